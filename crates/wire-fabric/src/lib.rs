//! The fabric codec.

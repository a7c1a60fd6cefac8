//! The metadata group.

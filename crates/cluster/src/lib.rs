//! The cluster: membership, the partition map and the metadata group.
//!
//! Layer 4: depends on `model` (and openraft for the metadata group); no sockets of its own.
//! The server wires it to the fabric.

pub mod balance;
pub mod claims;
pub mod metadata;
pub mod placement;

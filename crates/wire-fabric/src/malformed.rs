//! The one decoding error: bytes that cannot be a valid fabric frame.

/// Why bytes cannot be a valid fabric frame. `reason` is a static human string.
///
/// "Not enough bytes yet" is never `Malformed`; [`crate::decode_frame`] reports it as
/// `Ok(None)`. A peer that sends a malformed frame is broken or hostile: the caller closes the
/// connection, since nothing after the bad frame can be trusted to start on a frame boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// What is wrong, for logs.
    pub reason: &'static str,
}

impl Malformed {
    /// A `Malformed` with the given reason.
    pub const fn new(reason: &'static str) -> Malformed {
        Malformed { reason }
    }
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed fabric frame: {}", self.reason)
    }
}

impl std::error::Error for Malformed {}

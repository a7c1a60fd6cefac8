//! The one decoding error: bytes that cannot be a valid frame or message.

/// Why bytes cannot be a valid frame or message. `reason` is a static human string.
///
/// "Not enough bytes yet" is never `Malformed`; decoders report it as `Ok(None)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// What is wrong, for logs; never shown to clients (they get a result code).
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
        write!(f, "malformed message: {}", self.reason)
    }
}

impl std::error::Error for Malformed {}

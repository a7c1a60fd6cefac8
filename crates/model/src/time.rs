//! Generations, void times and TTL requests.

use crate::{ResultCode, TTL_SECONDS_MAX};

/// Seconds between the Unix epoch and Aerospike's epoch, 2010-01-01T00:00:00Z.
pub const CITRUSLEAF_EPOCH_UNIX_SECONDS: u64 = 1_262_304_000;

/// A record's generation: 16 bits in the record, 32 on the wire. Never 0 for a stored record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Generation(pub u16);

impl Generation {
    /// The generation of a record written for the first time.
    pub const FIRST: Generation = Generation(1);

    /// The generation after one more write: wraps from `u16::MAX` to 1, skipping 0.
    pub fn next(self) -> Generation {
        match self.0 {
            u16::MAX => Generation::FIRST,
            value => Generation(value + 1),
        }
    }
}

/// When a record expires, in seconds since 2010-01-01 UTC; 0 means never.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VoidTime(pub u32);

impl VoidTime {
    /// The void time of a record that never expires.
    pub const NEVER: VoidTime = VoidTime(0);

    /// Whether a record with this void time is expired at `now` (seconds since 2010).
    pub fn is_expired_at(self, now_seconds: u32) -> bool {
        self.0 != 0 && self.0 <= now_seconds
    }

    /// The void time `ttl_seconds` after `now_seconds`; a TTL of 0 means never.
    pub fn after(now_seconds: u32, ttl_seconds: u32) -> VoidTime {
        if ttl_seconds == 0 {
            VoidTime::NEVER
        } else {
            VoidTime(now_seconds.saturating_add(ttl_seconds))
        }
    }
}

/// What a write asks for in its `record_ttl` slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TtlRequest {
    /// 0: use the namespace's `default-ttl`.
    NamespaceDefault,
    /// -1 (0xFFFFFFFF): never expire.
    NeverExpire,
    /// -2 (0xFFFFFFFE): keep the record's current void time (default TTL on create).
    Unchanged,
    /// A TTL in seconds, 1 ..= [`TTL_SECONDS_MAX`].
    Seconds(u32),
}

impl TtlRequest {
    /// Decodes the wire value.
    ///
    /// # Errors
    /// [`ResultCode::Parameter`] for a TTL above ten years that is not a special value, as
    /// Aerospike does.
    pub fn from_wire(value: u32) -> Result<TtlRequest, ResultCode> {
        match value {
            0 => Ok(TtlRequest::NamespaceDefault),
            u32::MAX => Ok(TtlRequest::NeverExpire),
            0xFFFF_FFFE => Ok(TtlRequest::Unchanged),
            seconds if seconds <= TTL_SECONDS_MAX => Ok(TtlRequest::Seconds(seconds)),
            _ => Err(ResultCode::Parameter),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_wraps_to_one_not_zero() {
        assert_eq!(Generation(1).next(), Generation(2));
        assert_eq!(Generation(u16::MAX).next(), Generation(1));
    }

    #[test]
    fn ttl_special_values_decode() {
        assert_eq!(TtlRequest::from_wire(0), Ok(TtlRequest::NamespaceDefault));
        assert_eq!(TtlRequest::from_wire(u32::MAX), Ok(TtlRequest::NeverExpire));
        assert_eq!(
            TtlRequest::from_wire(u32::MAX - 1),
            Ok(TtlRequest::Unchanged)
        );
        assert_eq!(
            TtlRequest::from_wire(TTL_SECONDS_MAX),
            Ok(TtlRequest::Seconds(TTL_SECONDS_MAX))
        );
        assert_eq!(
            TtlRequest::from_wire(TTL_SECONDS_MAX + 1),
            Err(ResultCode::Parameter)
        );
    }

    #[test]
    fn void_time_zero_never_expires() {
        assert!(!VoidTime::NEVER.is_expired_at(u32::MAX));
        assert!(VoidTime(10).is_expired_at(10));
        assert!(!VoidTime(10).is_expired_at(9));
        assert_eq!(VoidTime::after(100, 0), VoidTime::NEVER);
        assert_eq!(VoidTime::after(100, 5), VoidTime(105));
    }
}

//! Record digests and partition ids.

use ripemd::{Digest as _, Ripemd160};

use crate::UserKey;

/// Number of partitions in every namespace, fixed by the Aerospike clients.
pub const PARTITION_COUNT: usize = 4096;

/// The 20-byte RIPEMD-160 digest that addresses a record inside a namespace.
///
/// Ordering is byte-wise, which is the order partition scans walk and resume in.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 20]);

impl Ord for Digest {
    /// Byte-wise, as two big-endian words: the same order as comparing the arrays, without
    /// a `memcmp` call per comparison (primary index searches make about a dozen per lookup;
    /// the first word almost always decides).
    #[inline]
    fn cmp(&self, other: &Digest) -> std::cmp::Ordering {
        self.words().cmp(&other.words())
    }
}

impl PartialOrd for Digest {
    #[inline]
    fn partial_cmp(&self, other: &Digest) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Digest {
    /// Size of a digest on the wire and in memory.
    pub const SIZE_BYTES: usize = 20;

    /// The bytes as big-endian words, which order as the bytes do.
    #[inline]
    fn words(&self) -> (u128, u32) {
        let [high @ .., c0, c1, c2, c3] = self.0;
        (
            u128::from_be_bytes(high),
            u32::from_be_bytes([c0, c1, c2, c3]),
        )
    }

    /// Computes the digest of `key` in `set_name` as the Aerospike clients do:
    /// `RIPEMD-160(set_name || particle_type(key) || key_bytes)`. The namespace is not part of
    /// it, and an absent set contributes no bytes.
    pub fn compute(set_name: &[u8], key: &UserKey<'_>) -> Digest {
        let mut hasher = Ripemd160::new();
        hasher.update(set_name);
        hasher.update([key.particle_type() as u8]);
        match key {
            UserKey::Integer(value) => hasher.update(value.to_be_bytes()),
            UserKey::String(bytes) | UserKey::Blob(bytes) => hasher.update(bytes),
        }
        Digest(hasher.finalize().into())
    }

    /// Builds a digest from exactly 20 bytes, or `None` for any other length.
    pub fn from_slice(bytes: &[u8]) -> Option<Digest> {
        <[u8; 20]>::try_from(bytes).ok().map(Digest)
    }

    /// The partition this digest falls in: the low 12 bits of its first two bytes read
    /// little-endian (Aerospike's `as_partition_getid`).
    pub fn partition_id(&self) -> PartitionId {
        let low_bits = u16::from_le_bytes([self.0[0], self.0[1]]);
        PartitionId(low_bits & (PARTITION_COUNT as u16 - 1))
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// A partition number in `0..PARTITION_COUNT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionId(pub u16);

impl PartitionId {
    /// The partition number as an index into per-partition arrays.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// Every partition id, in order.
    pub fn all() -> impl ExactSizeIterator<Item = PartitionId> {
        // PARTITION_COUNT fits in u16 (asserted below), so no id is truncated.
        (0..PARTITION_COUNT).map(|pid| PartitionId(pid as u16))
    }
}

const _: () = assert!(PARTITION_COUNT.is_power_of_two());
const _: () = assert!(PARTITION_COUNT <= u16::MAX as usize);

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-wise order must be the byte-wise one scans resume by: two digests that first
    /// differ at any position, by any pair of byte values (signedness edges included), with
    /// the later bytes ordered the other way, compare as their byte arrays do.
    #[test]
    fn digest_order_is_byte_order() {
        let edges = [0x00u8, 0x01, 0x7f, 0x80, 0xfe, 0xff];
        for position in 0..Digest::SIZE_BYTES {
            for (&low, &high) in edges.iter().zip(&edges[1..]) {
                let mut smaller = [0x5a; 20];
                let mut larger = [0x5a; 20];
                smaller[position] = low;
                larger[position] = high;
                for later in position + 1..Digest::SIZE_BYTES {
                    smaller[later] = 0xff;
                    larger[later] = 0x00;
                }
                let (smaller, larger) = (Digest(smaller), Digest(larger));
                assert_eq!(smaller.0.cmp(&larger.0), std::cmp::Ordering::Less);
                assert!(
                    smaller < larger,
                    "position {position}: {smaller:?} < {larger:?}"
                );
                assert!(larger > smaller);
                assert_eq!(smaller.cmp(&smaller), std::cmp::Ordering::Equal);
            }
        }
    }

    fn hex(digest: Digest) -> String {
        format!("{digest:?}")
    }

    // Vectors from the Go client's key tests (set "set"), re-checked with Python's RIPEMD-160.
    #[test]
    fn digest_matches_aerospike_client_vectors() {
        let cases: [(UserKey<'_>, &str); 8] = [
            (
                UserKey::Integer(0),
                "93d943aae37b017ad7e011b0c1d2e2143c2fb37d",
            ),
            (
                UserKey::Integer(-1),
                "22116d253745e29fc63fdf760b6e26f7e197e01d",
            ),
            (
                UserKey::Integer(i64::MIN),
                "7185c2a47fb02c996daed26b4e01b83240aee9d4",
            ),
            (
                UserKey::Integer(i64::MAX),
                "1698328974afa62c8e069860c1516f780d63dbb8",
            ),
            (
                UserKey::String(b""),
                "2819b1ff6e346a43b4f5f6b77a88bc3eaac22a83",
            ),
            (
                UserKey::String(b"aaaaaaaaaa"),
                "5979fb32a80da070ff356f7695455592272e36c2",
            ),
            (
                UserKey::Blob(b""),
                "327e2877b8815c7aeede0d5a8620d4ef8df4a4b4",
            ),
            (
                UserKey::Blob(b"aaaaaaaaaa"),
                "d10982327b2b04c7360579f252e164a75f83cd99",
            ),
        ];
        for (key, expected) in cases {
            assert_eq!(hex(Digest::compute(b"set", &key)), expected, "key {key:?}");
        }
    }

    #[test]
    fn digest_matches_python_client_for_demo_set() {
        let digest = Digest::compute(b"demo", &UserKey::Integer(1));
        assert_eq!(hex(digest), "b7f4b83889e2da67de683e1df6919a1eacc446c8");
        let digest = Digest::compute(b"demo", &UserKey::String(b"key1"));
        assert_eq!(hex(digest), "ec91192d4b7f8ce35d5d78d34bca65cbaaaac960");
        assert_eq!(digest.partition_id(), PartitionId(492));
    }

    #[test]
    fn partition_id_is_low_twelve_bits_little_endian() {
        let digest = Digest::compute(b"set", &UserKey::Integer(0));
        assert_eq!(digest.partition_id(), PartitionId(2451));
        let mut bytes = [0u8; 20];
        bytes[0] = 0xff;
        bytes[1] = 0xff;
        assert_eq!(Digest(bytes).partition_id(), PartitionId(4095));
    }

    #[test]
    fn from_slice_accepts_only_twenty_bytes() {
        assert!(Digest::from_slice(&[0; 19]).is_none());
        assert!(Digest::from_slice(&[0; 21]).is_none());
        assert_eq!(Digest::from_slice(&[7; 20]), Some(Digest([7; 20])));
    }
}

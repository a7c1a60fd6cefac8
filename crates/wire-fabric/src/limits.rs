//! Every limit the decoder enforces, and the frame header's fixed sizes.
//!
//! A limit here is a promise both ways: [`crate::encode`] asserts it (sending more is a
//! programmer error) and [`crate::decode_frame`] answers [`crate::Malformed`] when a peer breaks
//! it. Counts are checked against the bytes present as well, so a limit is never what bounds
//! memory; it bounds what a well-behaved peer may send.

/// The two bytes every frame starts with. A client of another protocol that connects to the
/// fabric port by mistake (Aerospike frames start with version 2, RESP with `*` or a letter
/// pair unlikely to be `OF`) is refused on its first 8 bytes.
pub const FRAME_MAGIC: [u8; 2] = *b"OF";

/// The fabric protocol version in byte 2 of every frame. A change to any body layout bumps it;
/// a node refuses frames of any other version, so mixed versions fail loudly at `Hello`.
pub const FABRIC_VERSION: u8 = 1;

/// Size of the frame header: magic (2), version (1), message type (1), body size (u32).
pub const FRAME_HEADER_SIZE_BYTES: usize = 8;

/// A body-size limit that fits every message a node sends: an Aerospike client frame may be
/// 128 MiB (the server's `PROTO_SIZE_MAX`) plus its 8-byte header, and a forward adds a few
/// dozen bytes of its own; the extra MiB covers both with room to spare. Callers pass their
/// limit to [`crate::decode_frame`]; this is the usual one.
pub const FRAME_BODY_SIZE_BYTES_MAX_DEFAULT: u32 = 129 * 1024 * 1024;

/// Longest namespace name, Aerospike's (`AS_ID_NAMESPACE_SZ` is 32 with the NUL). A namespace
/// is never empty.
pub const NAMESPACE_NAME_BYTES_MAX: usize = model::NAMESPACE_NAME_BYTES_MAX;

/// Longest set name, Aerospike's (`AS_SET_NAME_MAX_SIZE` is 64 with the NUL); empty means no
/// set (in a record) or the whole namespace (in a truncate).
pub const SET_NAME_BYTES_MAX: usize = model::SET_NAME_BYTES_MAX;

/// Longest cluster name: 64 bytes, as Aerospike allows for its `cluster-name`.
pub const CLUSTER_NAME_BYTES_MAX: usize = 64;

/// Longest DNS name (253 bytes).
const HOST_NAME_BYTES_MAX: usize = 253;

/// Longest address text, `host:port`: a DNS name, a colon and five port digits. A bracketed
/// IPv6 address with a zone (`[v6%zone]:port`, under 64 bytes) fits too.
pub const ADDRESS_BYTES_MAX: usize = HOST_NAME_BYTES_MAX + 1 + 5;

/// Most addresses in one list of a `Hello`: a node announces one per interface it listens on,
/// and Aerospike clients try them in order, so a long list only slows them down.
pub const ADDRESSES_PER_LIST_MAX: usize = 32;

/// Most peer node ids in one heartbeat, hence the largest cluster a heartbeat can describe:
/// far above the clusters Osprey is built for, and small enough that a heartbeat stays
/// about 1 KiB.
pub const PEERS_PER_HEARTBEAT_MAX: usize = 128;

/// Size of a record digest on the wire.
pub const DIGEST_SIZE_BYTES: usize = model::Digest::SIZE_BYTES;

const _: () = assert!(FRAME_HEADER_SIZE_BYTES == FRAME_MAGIC.len() + 1 + 1 + 4);
const _: () = assert!(ADDRESS_BYTES_MAX == 259);
const _: () = assert!(NAMESPACE_NAME_BYTES_MAX == 31);
const _: () = assert!(SET_NAME_BYTES_MAX == 63);
// Every length and count travels as a u32, and the body size is a u32 too.
const _: () = assert!(FRAME_BODY_SIZE_BYTES_MAX_DEFAULT as u64 <= u32::MAX as u64);
const _: () = assert!(FRAME_BODY_SIZE_BYTES_MAX_DEFAULT as u64 > 128 * 1024 * 1024 + 8);

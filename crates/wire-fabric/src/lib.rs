//! The node-to-node protocol of an Osprey cluster (the fabric) as a pure codec.
//!
//! What it does: finds whole frames at the start of a byte buffer and decodes each into a
//! [`Message`] that borrows its byte fields from the buffer ([`decode_frame`],
//! [`decode_header`]), and appends messages to a caller-owned `Vec<u8>` ([`encode`], and
//! [`PartitionChunkWriter`] for a chunk of records written as a partition is walked). The
//! messages: [`Message::Hello`]/[`Message::HelloAck`] open a connection, heartbeats, the
//! metadata consensus group's calls, client requests forwarded to a partition's owner, replica
//! writes and truncates with their acks, and partition streams for migrations.
//!
//! Layer 3, beside the client wire codecs: depends only on `model` and std. No I/O, no async;
//! the server owns the sockets and the cluster crate gives the messages their meaning.
//!
//! Invariants:
//! - Decoding never sizes anything by a length or count the peer declared: every declared
//!   length is compared with the bytes present, and nothing is reserved by it. Decoding
//!   allocates nothing at all; list fields ([`List`]) are read lazily from the buffer.
//! - A frame header is judged from its 8 bytes alone, before the body arrives, so a body over
//!   the caller's limit is refused without being buffered.
//! - Every strict prefix of a valid frame decodes to `Ok(None)`: "need more bytes" is never
//!   an error.
//! - A decoded [`Message`] is valid through and through (limits, UTF-8, enum bytes, partition
//!   ids), and re-encodes to exactly the bytes it was decoded from: each message has one
//!   encoding.
//! - [`encode`] asserts every limit the decoder enforces, so what a node sends, its peers
//!   accept.
//! - Every integer is big-endian.
//!
//! # Wire format (version [`FABRIC_VERSION`])
//!
//! A frame is an 8-byte header, `"OF"`, version `u8`, message type `u8` ([`MessageType`]),
//! body size `u32`, then the body. In the body, `str` and `bytes` are a `u32` length then the
//! bytes, a list is a `u32` count then its items, a flag is one byte 0 or 1, a digest is 20
//! bytes, a partition is a `u16` below 4096, and `rec` is a [`RecordVersion`]: digest,
//! set name `bytes`, generation `u16`, last update `u64` ms, void time `u32`, flag "has
//! data", then (if set) the data as `bytes`. The fields of each body, in order:
//!
//! - `0x01` `Hello`, `0x02` `HelloAck`: node id `u64`, cluster name `str`, service addresses
//!   (list of `str`), RESP addresses (list of `str`), fabric address `str`.
//! - `0x03` `Heartbeat`: node id `u64`, sent at `u64` ms, map version `u64`, peer node ids
//!   (list of `u64`).
//! - `0x10` `Raft`: request id `u64`, kind `u8` ([`RaftKind`]), payload `bytes`.
//! - `0x11` `RaftReply`: request id `u64`, payload `bytes`.
//! - `0x20` `Forward`: request id `u64`, protocol `u8` ([`ForwardProtocol`]), time left `u32`
//!   ms, payload `bytes`.
//! - `0x21` `ForwardReply`: request id `u64`, payload `bytes`.
//! - `0x30` `ReplicaWrite`: request id `u64`, namespace `bytes`, partition, partition version
//!   `u64`, sequence `u64`, `rec`.
//! - `0x31` `ReplicaTruncate`: request id `u64`, namespace `bytes`, set name `bytes`, before
//!   `u64` ms.
//! - `0x32` `ReplicaAck`: request id `u64`, result code `u8`.
//! - `0x40` `PartitionStreamRequest`: request id `u64`, namespace `bytes`, partition, flag
//!   "after", (if set) digest, chunk size max `u32`.
//! - `0x41` `PartitionChunk`: request id `u64`, namespace `bytes`, partition, flag "done",
//!   list of `rec`.
//!
//! Limits: [`NAMESPACE_NAME_BYTES_MAX`], [`SET_NAME_BYTES_MAX`], [`CLUSTER_NAME_BYTES_MAX`],
//! [`ADDRESS_BYTES_MAX`], [`ADDRESSES_PER_LIST_MAX`], [`PEERS_PER_HEARTBEAT_MAX`], and the
//! caller's body size limit (usually [`FRAME_BODY_SIZE_BYTES_MAX_DEFAULT`]).
//!
//! Changing any layout bumps [`FABRIC_VERSION`]: a body with bytes left over is malformed, so
//! fields cannot be appended silently. The cluster design is in the cluster reference
//! (`cluster.md` section 5) and `docs/ARCHITECTURE.md`.

mod chunk_writer;
mod decode;
mod encode;
mod frame;
mod limits;
mod list;
mod malformed;
mod message;
mod reader;
mod record;
mod writer;

pub use chunk_writer::PartitionChunkWriter;
pub use encode::encode;
pub use frame::{FrameHeader, decode_frame, decode_header};
pub use limits::{
    ADDRESS_BYTES_MAX, ADDRESSES_PER_LIST_MAX, CLUSTER_NAME_BYTES_MAX, DIGEST_SIZE_BYTES,
    FABRIC_VERSION, FRAME_BODY_SIZE_BYTES_MAX_DEFAULT, FRAME_HEADER_SIZE_BYTES, FRAME_MAGIC,
    NAMESPACE_NAME_BYTES_MAX, PEERS_PER_HEARTBEAT_MAX, SET_NAME_BYTES_MAX,
};
pub use list::{List, ListIter};
pub use malformed::Malformed;
pub use message::{
    ForwardProtocol, Hello, Message, MessageType, REPLICA_ACK_OK, REPLICA_ACK_STALE_VERSION,
    RaftKind, RecordVersion,
};

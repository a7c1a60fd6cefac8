//! The messages of the fabric, as views that borrow their bytes from the decoded buffer (or,
//! when built for encoding, from the caller).
//!
//! Invariants:
//! - A [`Message`] returned by [`crate::decode_frame`] is valid through and through: every
//!   limit of `limits.rs` holds, every text is UTF-8, every partition id is below 4096, and
//!   iterating its lists cannot fail.
//! - A decoded message re-encodes to exactly the bytes it came from: the encoding has one form
//!   per message (flags are 0 or 1, no padding, no trailing bytes).

use model::{Digest, Generation, PartitionId, VoidTime};

use crate::list::List;

/// One fabric message: what one frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// The first message each side of a connection sends: who the sender is.
    Hello(Hello<'a>),
    /// The answer to a [`Message::Hello`]: who the receiver is.
    HelloAck(Hello<'a>),
    /// A periodic sign of life, with what the sender knows.
    Heartbeat {
        /// The sender.
        node_id: u64,
        /// The sender's wall clock when it sent this, in milliseconds since the Unix epoch.
        sent_at_ms: u64,
        /// The version of cluster metadata (partition map included) the sender has applied.
        map_version: u64,
        /// The nodes the sender currently hears heartbeats from.
        peer_node_ids: List<'a, u64>,
    },
    /// A message of the metadata consensus group, for the node that hosts its receiver.
    Raft {
        /// Matches the [`Message::RaftReply`].
        request_id: u64,
        /// Which consensus call the payload is.
        kind: RaftKind,
        /// The call's arguments, encoded by the cluster layer; opaque here.
        payload: &'a [u8],
    },
    /// The answer to a [`Message::Raft`].
    RaftReply {
        /// The request's id.
        request_id: u64,
        /// The call's result, encoded by the cluster layer; opaque here.
        payload: &'a [u8],
    },
    /// A client request that reached a node which does not own its partition, passed to the
    /// owner unchanged.
    Forward {
        /// Matches the [`Message::ForwardReply`].
        request_id: u64,
        /// Which client protocol the payload is in.
        protocol: ForwardProtocol,
        /// How long the client will still wait, in milliseconds; 0 means no limit.
        time_left_ms: u32,
        /// One whole Aerospike proto frame (header included), or one RESP command as raw RESP.
        payload: &'a [u8],
    },
    /// The owner's answer to a [`Message::Forward`].
    ForwardReply {
        /// The request's id.
        request_id: u64,
        /// The reply bytes exactly as the owner would have sent them to the client.
        payload: &'a [u8],
    },
    /// A write the master of a partition sends to each of the partition's replicas.
    ReplicaWrite {
        /// Matches the [`Message::ReplicaAck`].
        request_id: u64,
        /// The record's namespace (1 to 31 bytes).
        namespace: &'a [u8],
        /// The record's partition.
        partition: PartitionId,
        /// The partition configuration version the master writes under; a replica refuses
        /// versions older than its own.
        partition_version: u64,
        /// The master's write sequence within the partition, so a replica applies writes in
        /// order and notices a gap.
        sequence: u64,
        /// The record as the master now has it.
        record: RecordVersion<'a>,
    },
    /// A truncate of a namespace or of one set, sent to every node.
    ReplicaTruncate {
        /// Matches the [`Message::ReplicaAck`].
        request_id: u64,
        /// The namespace (1 to 31 bytes).
        namespace: &'a [u8],
        /// The set; empty truncates the whole namespace.
        set_name: &'a [u8],
        /// Records last updated before this time are removed, in milliseconds since the Unix
        /// epoch.
        before_ms: u64,
    },
    /// The answer to a [`Message::ReplicaWrite`] or [`Message::ReplicaTruncate`].
    ReplicaAck {
        /// The request's id.
        request_id: u64,
        /// An Aerospike result code: [`REPLICA_ACK_OK`], [`REPLICA_ACK_STALE_VERSION`], or
        /// any other code the write failed with.
        result_code: u8,
    },
    /// A request for the records of one partition, in digest order, from its master.
    PartitionStreamRequest {
        /// Matches the [`Message::PartitionChunk`] answers.
        request_id: u64,
        /// The namespace (1 to 31 bytes).
        namespace: &'a [u8],
        /// The partition to stream.
        partition: PartitionId,
        /// Resume after this digest; `None` starts at the first record.
        after_digest: Option<Digest>,
        /// About how many bytes of records one chunk may carry; a chunk holds at least one
        /// record whatever its size.
        chunk_size_bytes_max: u32,
    },
    /// One chunk of a partition stream: records in digest order.
    PartitionChunk {
        /// The request's id.
        request_id: u64,
        /// The namespace (1 to 31 bytes).
        namespace: &'a [u8],
        /// The partition streamed.
        partition: PartitionId,
        /// Whether this is the last chunk: no record of the partition follows the last one
        /// here.
        done: bool,
        /// The records, decoded lazily by iterating.
        records: List<'a, RecordVersion<'a>>,
    },
}

/// Who a node is: the body of [`Message::Hello`] and [`Message::HelloAck`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello<'a> {
    /// The sender's node id.
    pub node_id: u64,
    /// The cluster the sender belongs to (at most 64 bytes); a node refuses a peer of
    /// another cluster.
    pub cluster_name: &'a str,
    /// Where Aerospike clients reach the sender, each `host:port`.
    pub service_addresses: List<'a, &'a str>,
    /// Where Redis clients reach the sender, each `host:port`.
    pub resp_addresses: List<'a, &'a str>,
    /// Where other nodes reach the sender's fabric, `host:port`.
    pub fabric_address: &'a str,
}

/// One version of one record, as replication and migration carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordVersion<'a> {
    /// The record's digest.
    pub digest: Digest,
    /// The record's set; empty for none.
    pub set_name: &'a [u8],
    /// The record's generation.
    pub generation: Generation,
    /// When the record was last written, in milliseconds since the Unix epoch; with the
    /// generation it decides which of two versions is newer.
    pub last_update_ms: u64,
    /// When the record expires.
    pub void_time: VoidTime,
    /// The record's data as the engine encodes it, opaque here; `None` for a tombstone (the
    /// record was deleted and must stay deleted).
    pub data: Option<&'a [u8]>,
}

/// The client protocol of a [`Message::Forward`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForwardProtocol {
    /// An Aerospike proto frame.
    Aerospike = 1,
    /// A RESP command.
    Resp = 2,
}

impl ForwardProtocol {
    /// The protocol for a wire byte, or `None` for an unknown one.
    pub fn from_u8(byte: u8) -> Option<ForwardProtocol> {
        match byte {
            1 => Some(ForwardProtocol::Aerospike),
            2 => Some(ForwardProtocol::Resp),
            _ => None,
        }
    }
}

/// Which consensus call a [`Message::Raft`] carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaftKind {
    /// Log replication and leader heartbeats.
    AppendEntries = 1,
    /// A candidate asks for a vote.
    Vote = 2,
    /// One piece of a snapshot sent in chunks.
    InstallSnapshot = 3,
    /// A whole snapshot in one message.
    FullSnapshot = 4,
}

impl RaftKind {
    /// The kind for a wire byte, or `None` for an unknown one.
    pub fn from_u8(byte: u8) -> Option<RaftKind> {
        match byte {
            1 => Some(RaftKind::AppendEntries),
            2 => Some(RaftKind::Vote),
            3 => Some(RaftKind::InstallSnapshot),
            4 => Some(RaftKind::FullSnapshot),
            _ => None,
        }
    }
}

/// [`Message::ReplicaAck`] result: the replica applied the write.
pub const REPLICA_ACK_OK: u8 = 0;

/// [`Message::ReplicaAck`] result: the replica refused the write because its partition
/// version is newer, or it is no longer a replica of the partition. Aerospike's code 7
/// (cluster key mismatch) means the same to a client: the cluster changed under the request.
pub const REPLICA_ACK_STALE_VERSION: u8 = 7;

/// The message type in byte 3 of the frame header. Types are grouped by family, 16 to a
/// family, so a family can grow without renumbering; any other byte is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageType {
    /// [`Message::Hello`].
    Hello = 0x01,
    /// [`Message::HelloAck`].
    HelloAck = 0x02,
    /// [`Message::Heartbeat`].
    Heartbeat = 0x03,
    /// [`Message::Raft`].
    Raft = 0x10,
    /// [`Message::RaftReply`].
    RaftReply = 0x11,
    /// [`Message::Forward`].
    Forward = 0x20,
    /// [`Message::ForwardReply`].
    ForwardReply = 0x21,
    /// [`Message::ReplicaWrite`].
    ReplicaWrite = 0x30,
    /// [`Message::ReplicaTruncate`].
    ReplicaTruncate = 0x31,
    /// [`Message::ReplicaAck`].
    ReplicaAck = 0x32,
    /// [`Message::PartitionStreamRequest`].
    PartitionStreamRequest = 0x40,
    /// [`Message::PartitionChunk`].
    PartitionChunk = 0x41,
}

impl MessageType {
    /// Every message type, in wire order.
    pub const ALL: [MessageType; 12] = [
        MessageType::Hello,
        MessageType::HelloAck,
        MessageType::Heartbeat,
        MessageType::Raft,
        MessageType::RaftReply,
        MessageType::Forward,
        MessageType::ForwardReply,
        MessageType::ReplicaWrite,
        MessageType::ReplicaTruncate,
        MessageType::ReplicaAck,
        MessageType::PartitionStreamRequest,
        MessageType::PartitionChunk,
    ];

    /// The message type for a wire byte, or `None` for an unknown one.
    pub fn from_u8(byte: u8) -> Option<MessageType> {
        MessageType::ALL
            .into_iter()
            .find(|message_type| *message_type as u8 == byte)
    }
}

impl Message<'_> {
    /// The type byte this message travels under.
    pub fn message_type(&self) -> MessageType {
        match self {
            Message::Hello(_) => MessageType::Hello,
            Message::HelloAck(_) => MessageType::HelloAck,
            Message::Heartbeat { .. } => MessageType::Heartbeat,
            Message::Raft { .. } => MessageType::Raft,
            Message::RaftReply { .. } => MessageType::RaftReply,
            Message::Forward { .. } => MessageType::Forward,
            Message::ForwardReply { .. } => MessageType::ForwardReply,
            Message::ReplicaWrite { .. } => MessageType::ReplicaWrite,
            Message::ReplicaTruncate { .. } => MessageType::ReplicaTruncate,
            Message::ReplicaAck { .. } => MessageType::ReplicaAck,
            Message::PartitionStreamRequest { .. } => MessageType::PartitionStreamRequest,
            Message::PartitionChunk { .. } => MessageType::PartitionChunk,
        }
    }

    /// About how many bytes the encoded frame takes: the variable parts plus a margin for the
    /// fixed fields, so an encoder can reserve its buffer once instead of growing it.
    pub fn encoded_size_hint(&self) -> usize {
        const FIXED_FIELDS_BYTES: usize = 96;
        let variable = match *self {
            Message::Raft { payload, .. }
            | Message::RaftReply { payload, .. }
            | Message::Forward { payload, .. }
            | Message::ForwardReply { payload, .. } => payload.len(),
            Message::ReplicaWrite {
                namespace, record, ..
            } => namespace.len() + record.set_name.len() + record.data.map_or(0, <[u8]>::len),
            _ => 0,
        };
        FIXED_FIELDS_BYTES + variable
    }

    /// The request id a reply must echo, for the messages that carry one.
    pub fn request_id(&self) -> Option<u64> {
        match *self {
            Message::Hello(_) | Message::HelloAck(_) | Message::Heartbeat { .. } => None,
            Message::Raft { request_id, .. }
            | Message::RaftReply { request_id, .. }
            | Message::Forward { request_id, .. }
            | Message::ForwardReply { request_id, .. }
            | Message::ReplicaWrite { request_id, .. }
            | Message::ReplicaTruncate { request_id, .. }
            | Message::ReplicaAck { request_id, .. }
            | Message::PartitionStreamRequest { request_id, .. }
            | Message::PartitionChunk { request_id, .. } => Some(request_id),
        }
    }
}

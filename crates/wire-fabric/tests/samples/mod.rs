//! Sample messages covering every message type, every enum value, empty and full lists, and
//! every field at its limit; shared by the test files of this crate.

use model::{Digest, Generation, PartitionId, VoidTime};
use wire_fabric::{
    ADDRESS_BYTES_MAX, ADDRESSES_PER_LIST_MAX, CLUSTER_NAME_BYTES_MAX, ForwardProtocol, Hello,
    List, Message, NAMESPACE_NAME_BYTES_MAX, PEERS_PER_HEARTBEAT_MAX, REPLICA_ACK_OK,
    REPLICA_ACK_STALE_VERSION, RaftKind, RecordVersion, SET_NAME_BYTES_MAX, encode,
};

/// Records of every shape: with data, a tombstone, no set, empty data, extreme values.
pub const RECORDS: [RecordVersion<'static>; 4] = [
    RecordVersion {
        digest: Digest([0x11; 20]),
        set_name: b"users",
        generation: Generation(3),
        last_update_ms: 1_700_000_000_123,
        void_time: VoidTime(500_000_000),
        data: Some(b"\x00\x02bins-as-the-engine-encodes-them"),
    },
    RecordVersion {
        digest: Digest([0x22; 20]),
        set_name: b"",
        generation: Generation(1),
        last_update_ms: 1,
        void_time: VoidTime::NEVER,
        data: None,
    },
    RecordVersion {
        digest: Digest([0xff; 20]),
        set_name: b"s",
        generation: Generation(u16::MAX),
        last_update_ms: u64::MAX,
        void_time: VoidTime(u32::MAX),
        data: Some(b""),
    },
    RecordVersion {
        digest: Digest([0; 20]),
        set_name: &[b's'; SET_NAME_BYTES_MAX],
        generation: Generation(0),
        last_update_ms: 0,
        void_time: VoidTime(0),
        data: None,
    },
];

const SERVICE_ADDRESSES: [&str; 2] = ["10.0.0.1:3000", "[fe80::1%eth0]:3000"];
const RESP_ADDRESSES: [&str; 1] = ["10.0.0.1:6379"];
const PEERS: [u64; 3] = [0xBB9_0000_0001, 2, u64::MAX];
const NAMESPACE_AT_LIMIT: &[u8] = &[b'n'; NAMESPACE_NAME_BYTES_MAX];

/// A `'static` slice of `items`, for samples built at run time.
fn leak<T>(items: Vec<T>) -> &'static [T] {
    Box::leak(items.into_boxed_slice())
}

fn hello_at_limits() -> Hello<'static> {
    let address: &'static str = Box::leak("a".repeat(ADDRESS_BYTES_MAX).into_boxed_str());
    let addresses = leak(vec![address; ADDRESSES_PER_LIST_MAX]);
    Hello {
        node_id: u64::MAX,
        cluster_name: Box::leak("c".repeat(CLUSTER_NAME_BYTES_MAX).into_boxed_str()),
        service_addresses: List::from_items(addresses),
        resp_addresses: List::from_items(addresses),
        fabric_address: address,
    }
}

fn membership() -> Vec<Message<'static>> {
    let hello = Hello {
        node_id: 0xBB9_0000_0001,
        cluster_name: "prod",
        service_addresses: List::from_items(&SERVICE_ADDRESSES),
        resp_addresses: List::from_items(&RESP_ADDRESSES),
        fabric_address: "10.0.0.1:3001",
    };
    let bare_hello = Hello {
        node_id: 0,
        cluster_name: "",
        service_addresses: List::from_items(&[]),
        resp_addresses: List::from_items(&[]),
        fabric_address: "",
    };
    let peers_at_limit = leak((0..PEERS_PER_HEARTBEAT_MAX as u64).collect());
    vec![
        Message::Hello(hello),
        Message::HelloAck(hello),
        Message::Hello(bare_hello),
        Message::HelloAck(hello_at_limits()),
        Message::Heartbeat {
            node_id: 7,
            sent_at_ms: 1_700_000_000_000,
            map_version: 42,
            peer_node_ids: List::from_items(&PEERS),
        },
        Message::Heartbeat {
            node_id: 7,
            sent_at_ms: 0,
            map_version: 0,
            peer_node_ids: List::from_items(&[]),
        },
        Message::Heartbeat {
            node_id: u64::MAX,
            sent_at_ms: u64::MAX,
            map_version: u64::MAX,
            peer_node_ids: List::from_items(peers_at_limit),
        },
    ]
}

fn requests() -> Vec<Message<'static>> {
    let kinds = [
        RaftKind::AppendEntries,
        RaftKind::Vote,
        RaftKind::InstallSnapshot,
        RaftKind::FullSnapshot,
    ];
    let mut messages: Vec<Message<'static>> = kinds
        .into_iter()
        .map(|kind| Message::Raft {
            request_id: 100 + kind as u64,
            kind,
            payload: b"{\"term\":3}",
        })
        .collect();
    messages.extend([
        Message::RaftReply {
            request_id: 101,
            payload: b"",
        },
        Message::Forward {
            request_id: 9,
            protocol: ForwardProtocol::Aerospike,
            time_left_ms: 1000,
            payload: b"\x02\x03\x00\x00\x00\x00\x00\x00",
        },
        Message::Forward {
            request_id: u64::MAX,
            protocol: ForwardProtocol::Resp,
            time_left_ms: 0,
            payload: b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
        },
        Message::ForwardReply {
            request_id: 9,
            payload: b"$-1\r\n",
        },
    ]);
    messages
}

fn replication() -> Vec<Message<'static>> {
    let mut messages: Vec<Message<'static>> = RECORDS
        .iter()
        .enumerate()
        .map(|(position, record)| Message::ReplicaWrite {
            request_id: position as u64,
            namespace: b"test",
            partition: PartitionId(position as u16 * 1365),
            partition_version: 5,
            sequence: 1000 + position as u64,
            record: *record,
        })
        .collect();
    messages.extend([
        Message::ReplicaWrite {
            request_id: 0,
            namespace: NAMESPACE_AT_LIMIT,
            partition: PartitionId(4095),
            partition_version: u64::MAX,
            sequence: u64::MAX,
            record: RECORDS[0],
        },
        Message::ReplicaTruncate {
            request_id: 3,
            namespace: b"test",
            set_name: b"",
            before_ms: 1_700_000_000_000,
        },
        Message::ReplicaTruncate {
            request_id: 4,
            namespace: NAMESPACE_AT_LIMIT,
            set_name: &[b's'; SET_NAME_BYTES_MAX],
            before_ms: u64::MAX,
        },
        Message::ReplicaAck {
            request_id: 3,
            result_code: REPLICA_ACK_OK,
        },
        Message::ReplicaAck {
            request_id: 4,
            result_code: REPLICA_ACK_STALE_VERSION,
        },
    ]);
    messages
}

fn partition_streams() -> Vec<Message<'static>> {
    vec![
        Message::PartitionStreamRequest {
            request_id: 77,
            namespace: b"test",
            partition: PartitionId(0),
            after_digest: None,
            chunk_size_bytes_max: 1 << 20,
        },
        Message::PartitionStreamRequest {
            request_id: 78,
            namespace: b"bar",
            partition: PartitionId(4095),
            after_digest: Some(Digest([0xab; 20])),
            chunk_size_bytes_max: u32::MAX,
        },
        Message::PartitionChunk {
            request_id: 77,
            namespace: b"test",
            partition: PartitionId(0),
            done: false,
            records: List::from_items(&RECORDS),
        },
        Message::PartitionChunk {
            request_id: 77,
            namespace: b"test",
            partition: PartitionId(0),
            done: true,
            records: List::from_items(&[]),
        },
    ]
}

/// Every sample message.
pub fn messages() -> Vec<Message<'static>> {
    [membership(), requests(), replication(), partition_streams()].concat()
}

/// `message` encoded as one frame.
pub fn encoded(message: &Message<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    encode(message, &mut out);
    out
}

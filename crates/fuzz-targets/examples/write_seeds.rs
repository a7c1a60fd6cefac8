//! Writes the hand-made seed inputs of every fuzz target into `<folder>/<target>/<name>`:
//! real frames (get, put, operate, delete, batch, scan, query, info, security), RESP
//! pipelines and replies, msgpack lists and maps, each particle type, request sequences, a
//! write block a namespace really wrote, every fabric message, list, map, bit and HLL ops on a
//! record, and expressions.
//!
//! `cargo run -p fuzz-targets --example write_seeds -- <folder>`. The seeds are merged with the
//! fuzzer's own finds and minimized before they go into `fuzz/corpus/` (see
//! `docs/internals/fuzzing.md`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use engine::{
    Acks, BinRef, ExistsPolicy, GenerationPolicy, ManualClock, Namespace, NamespaceConfig,
    ReplySink, WriteRequest,
};
use model::{
    CITRUSLEAF_EPOCH_UNIX_SECONDS, Digest, Generation, Op, OpCode, PartitionId, TtlRequest,
    UserKey, VoidTime,
};
use storage::test_device::TestDevice;
use storage::{Device, Flushing, StorageConfig};
use wire_aerospike::{
    MessageHeader, PROTO_VERSION, ProtoType, encode_batch_header, encode_batch_repeat_row,
    encode_batch_row, encode_info_request, encode_message, encode_proto_header, field_type, info1,
    info2, info3,
};
use wire_fabric::{ForwardProtocol, Hello, List, Message, RaftKind, RecordVersion};

type Seeds = Vec<(&'static str, String, Vec<u8>)>;

fn main() {
    let folder = std::env::args()
        .nth(1)
        .expect("usage: write_seeds <folder>");
    let mut seeds = Seeds::new();
    aerospike_seeds(&mut seeds);
    resp_seeds(&mut seeds);
    msgpack_seeds(&mut seeds);
    particle_seeds(&mut seeds);
    engine_ops_seeds(&mut seeds);
    storage_record_seeds(&mut seeds);
    fabric_seeds(&mut seeds);
    collection_ops_seeds(&mut seeds);
    expressions_seeds(&mut seeds);
    for (target, name, data) in &seeds {
        let path: PathBuf = Path::new(&folder).join(target).join(name);
        std::fs::create_dir_all(path.parent().expect("a file in a folder")).expect("mkdir");
        std::fs::write(&path, data).expect("write a seed");
    }
    println!("{} seeds written under {folder}", seeds.len());
}

fn op<'a>(code: OpCode, particle_type: u8, bin_name: &'a [u8], value: &'a [u8]) -> Op<'a> {
    Op {
        code,
        particle_type,
        bin_name,
        value,
    }
}

fn message(header: MessageHeader, fields: &[(u8, &[u8])], ops: &[Op<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_message(&mut out, &header, fields, ops);
    out
}

/// A list `[1, "ab", [nil, true]]` as clients write it (strings carry the STRING prefix).
const LIST: &[u8] = &[0x93, 0x01, 0xa3, 3, b'a', b'b', 0x92, 0xc0, 0xc3];
/// A key-ordered map `{"k": 1, "j": -1}` with its ext flags pseudo-entry.
const MAP: &[u8] = &[
    0x83, 0xc7, 0x00, 0x01, 0xc0, 0xa2, 3, b'j', 0xff, 0xa2, 3, b'k', 0x01,
];

fn batch_body() -> Vec<u8> {
    let digest = |seed: u8| Digest([seed; 20]);
    let read = MessageHeader {
        info1: info1::READ | info1::GET_ALL,
        ..MessageHeader::default()
    };
    let write = MessageHeader {
        info2: info2::WRITE,
        info4: 1,
        generation: 3,
        record_ttl: 60,
        ..MessageHeader::default()
    };
    let fields: [(u8, &[u8]); 2] = [(field_type::NAMESPACE, b"test"), (field_type::SET, b"s")];
    let keyed: [(u8, &[u8]); 2] = [
        (field_type::NAMESPACE, b"test"),
        (field_type::KEY, b"\x03k"),
    ];
    let one = 1i64.to_be_bytes();
    let mut body = Vec::new();
    encode_batch_header(&mut body, 5, 0x0c);
    encode_batch_row(&mut body, 0, &digest(1), &read, &fields, &[]);
    encode_batch_repeat_row(&mut body, 1, &digest(2));
    let ops = [
        op(OpCode::Write, 1, b"n", &one),
        op(OpCode::Read, 0, b"n", b""),
    ];
    encode_batch_row(&mut body, 2, &digest(3), &write, &fields, &ops);
    encode_batch_repeat_row(&mut body, 3, &digest(4));
    encode_batch_row(&mut body, 4, &digest(5), &read, &keyed, &[]);
    body
}

fn aerospike_seeds(seeds: &mut Seeds) {
    let mut push = |name: &str, data: Vec<u8>| {
        seeds.push(("aerospike_message", name.to_owned(), data));
    };
    let mut info = Vec::new();
    encode_info_request(&mut info, &["node", "build", "namespaces", "partitions"]);
    push("info-summary-and-node", info);
    let mut info = Vec::new();
    encode_info_request(
        &mut info,
        &[
            "namespace/test",
            "sets:ns=test;set=demo",
            "sindex-create:ns=test;set=s;indexname=i;bin=b;type=numeric",
            "truncate:namespace=test;set=s;lut=0",
        ],
    );
    push("info-commands-with-params", info);
    let mut empty_info = Vec::new();
    encode_info_request(&mut empty_info, &[]);
    push("info-empty", empty_info);
    let digest = [7u8; 20];
    let key_fields: [(u8, &[u8]); 4] = [
        (field_type::NAMESPACE, b"test"),
        (field_type::SET, b"demo"),
        (field_type::KEY, b"\x03user-1"),
        (field_type::DIGEST, &digest),
    ];
    let get = MessageHeader {
        info1: info1::READ | info1::GET_ALL,
        transaction_ttl: 1000,
        ..MessageHeader::default()
    };
    push("get-all-bins", message(get, &key_fields, &[]));
    let exists = MessageHeader {
        info1: info1::READ | info1::GET_NO_BINS,
        ..MessageHeader::default()
    };
    push("exists", message(exists, &key_fields, &[]));
    let seven = 7i64.to_be_bytes();
    let one_and_a_half = 1.5f64.to_be_bytes();
    let put = MessageHeader {
        info2: info2::WRITE,
        record_ttl: 3600,
        ..MessageHeader::default()
    };
    let put_ops = [
        op(OpCode::Write, 1, b"int", &seven),
        op(OpCode::Write, 3, b"str", b"hello"),
        op(OpCode::Write, 20, b"list", LIST),
        op(OpCode::Write, 19, b"map", MAP),
        op(OpCode::Write, 2, b"float", &one_and_a_half),
        op(OpCode::Write, 17, b"bool", &[1]),
    ];
    push("put-every-bin-type", message(put, &key_fields, &put_ops));
    let operate = MessageHeader {
        info1: info1::READ,
        info2: info2::WRITE | info2::GENERATION | info2::RESPOND_ALL_OPS,
        info3: info3::UPDATE_ONLY,
        generation: 2,
        ..MessageHeader::default()
    };
    let operate_ops = [
        op(OpCode::Incr, 1, b"int", &seven),
        op(OpCode::Append, 3, b"str", b"!"),
        op(OpCode::Read, 0, b"int", b""),
        op(OpCode::Touch, 0, b"", b""),
    ];
    push("operate", message(operate, &key_fields, &operate_ops));
    let delete = MessageHeader {
        info2: info2::WRITE | info2::DELETE | info2::DURABLE_DELETE,
        ..MessageHeader::default()
    };
    push("delete", message(delete, &key_fields, &[]));
    let batch = batch_body();
    let batch_header = MessageHeader {
        info1: info1::READ | info1::BATCH,
        ..MessageHeader::default()
    };
    let batch_fields: [(u8, &[u8]); 1] = [(field_type::BATCH_WITH_SET, &batch)];
    push("batch", message(batch_header, &batch_fields, &[]));
    let partitions: Vec<u8> = [0u16, 1, 4095]
        .iter()
        .flat_map(|p| p.to_le_bytes())
        .collect();
    let resume: Vec<u8> = [[1u8; 20], [2u8; 20]].concat();
    let scan = MessageHeader {
        info1: info1::READ,
        info3: info3::PARTITION_DONE,
        ..MessageHeader::default()
    };
    let scan_fields: [(u8, &[u8]); 8] = [
        (field_type::NAMESPACE, b"test"),
        (field_type::SET, b"demo"),
        (field_type::TRID, &42u64.to_be_bytes()),
        (field_type::SOCKET_TIMEOUT, &10_000u32.to_be_bytes()),
        (field_type::RECORDS_PER_SECOND, &0u32.to_be_bytes()),
        (field_type::PID_ARRAY, &partitions),
        (field_type::DIGEST_ARRAY, &resume),
        (field_type::MAX_RECORDS, &100u64.to_be_bytes()),
    ];
    let bins = [op(OpCode::Read, 0, b"int", b"")];
    push("scan-partitions", message(scan, &scan_fields, &bins));
    let range: Vec<u8> = [
        &[1u8, 1, b'b', 1][..],
        &8u32.to_be_bytes(),
        &1i64.to_be_bytes(),
    ]
    .concat();
    let query_fields: [(u8, &[u8]); 6] = [
        (field_type::NAMESPACE, b"test"),
        (field_type::SET, b"demo"),
        (field_type::INDEX_NAME, b"idx"),
        (field_type::INDEX_RANGE, &range),
        (field_type::INDEX_TYPE, &[1]),
        (field_type::BVAL_ARRAY, &5i64.to_le_bytes()),
    ];
    push("query-index-range", message(scan, &query_fields, &[]));
    let mut pipeline = message(get, &key_fields, &[]);
    pipeline.extend(message(put, &key_fields, &put_ops[..1]));
    push("two-frames", pipeline);
    let mut login = encode_proto_header(ProtoType::Security, 16).to_vec();
    login[0] = 0;
    login.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    push("security-login-version-0", login);
    let mut bad_version = encode_proto_header(ProtoType::Message, 0).to_vec();
    bad_version[0] = PROTO_VERSION + 1;
    push("bad-version", bad_version);
    push(
        "oversized",
        encode_proto_header(ProtoType::Message, 1 << 40).to_vec(),
    );
    seeds.push((
        "aerospike_batch",
        "five-rows-with-repeats".to_owned(),
        batch,
    ));
}

fn resp_seeds(seeds: &mut Seeds) {
    let requests: [(&str, &[u8]); 10] = [
        ("set", b"\0*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n"),
        ("inline-ping", b"\0PING\r\n"),
        ("inline-quotes", b"\0SET \"a b\\x41\\n\" 'c\\'d' \r\n"),
        (
            "pipeline",
            b"\0*2\r\n$3\r\nGET\r\n$1\r\na\r\n*3\r\n$4\r\nHSET\r\n$1\r\nh\r\n$0\r\n\r\nINCR n\n",
        ),
        ("empty-requests", b"\0*0\r\n*-1\r\n\r\n \t\r\n"),
        (
            "unauthenticated-auth",
            b"\x01*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n",
        ),
        ("unauthenticated-too-many", b"\x01*11\r\n"),
        ("bad-bulk-length", b"\0*1\r\n$-2\r\n"),
        ("expected-dollar", b"\0*1\r\n:1\r\n"),
        ("nul-stalls-line", b"\0GET a\0b\r\n"),
    ];
    let replies: [(&str, &[u8]); 6] = [
        (
            "reply-scalars",
            b"\0+OK\r\n-ERR nope\r\n:-42\r\n$3\r\nabc\r\n$-1\r\n",
        ),
        ("reply-array", b"\0*3\r\n:1\r\n*1\r\n+x\r\n$0\r\n\r\n"),
        ("reply-resp3-map", b"\0%2\r\n+a\r\n#t\r\n+b\r\n,1.5\r\n"),
        (
            "reply-resp3-attribute",
            b"\0|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n",
        ),
        (
            "reply-resp3-misc",
            b"\0_\r\n(12345678901234567890\r\n=7\r\ntxt:abc\r\n!3\r\nERR\r\n",
        ),
        ("reply-push-and-set", b"\0>2\r\n+message\r\n~1\r\n:1\r\n"),
    ];
    for (name, data) in requests.into_iter().chain(replies) {
        seeds.push(("resp", name.to_owned(), data.to_vec()));
    }
}

fn msgpack_seeds(seeds: &mut Seeds) {
    let values: [(&str, &[u8]); 9] = [
        ("list", LIST),
        ("map-key-ordered", MAP),
        (
            "list16-of-ints",
            &[
                0xdc, 0x00, 0x04, 0xcc, 0xff, 0xd0, 0x80, 0xcf, 0, 0, 0, 0, 0, 0, 1, 0, 0xd3, 0xff,
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
        ),
        (
            "map32-string-keys",
            &[0xdf, 0, 0, 0, 1, 0xd9, 2, 3, b'k', 0xa1, b'v'],
        ),
        (
            "nested",
            &[
                0x91, 0x91, 0x91, 0x81, 0x01, 0x92, 0xc2, 0xca, 0x3f, 0xc0, 0, 0,
            ],
        ),
        (
            "bins-and-exts",
            &[
                0x94, 0xc4, 2, 1, 2, 0xd4, 1, 0xff, 0xc7, 1, 5, 0xaa, 0xcb, 0x40, 0x09, 0x21, 0xfb,
                0x54, 0x44, 0x2d, 0x18,
            ],
        ),
        (
            "str16-and-str32",
            &[0x92, 0xda, 0, 2, 3, b'a', 0xdb, 0, 0, 0, 2, 3, b'b'],
        ),
        ("empty-list", &[0x90]),
        ("reserved-marker", &[0x91, 0xc1]),
    ];
    for (name, data) in values {
        seeds.push(("msgpack", name.to_owned(), data.to_vec()));
    }
}

fn particle_seeds(seeds: &mut Seeds) {
    // Index into the target's table of known particle types.
    let known = |particle_type: u8| {
        [0u8, 1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 17, 18, 19, 20, 23]
            .iter()
            .position(|&known| known == particle_type)
            .map(|index| index as u8)
            .expect("a known particle type")
    };
    let encode = |key: (u8, &[u8]), ops: &[(u8, u8, &[u8], &[u8])]| {
        let mut data = vec![key.0, key.1.len() as u8];
        data.extend_from_slice(key.1);
        for &(code, particle_type, name, value) in ops {
            data.extend_from_slice(&[code, known(particle_type), name.len() as u8]);
            data.extend_from_slice(name);
            data.push(value.len() as u8);
            data.extend_from_slice(value);
        }
        data
    };
    let int_key: (u8, &[u8]) = (1, &[0, 0, 0, 0, 0, 0, 0, 9]);
    let (write, incr, append, prepend) = (0, 1, 2, 3);
    let one = 1i64.to_be_bytes();
    let half = 0.5f64.to_be_bytes();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "integer-then-incr",
            encode(
                int_key,
                &[(write, 1, b"n", &[0xff, 0xfe]), (incr, 1, b"n", &one)],
            ),
        ),
        (
            "float-then-incr",
            encode(
                (3, b"k"),
                &[(write, 2, b"f", &half), (incr, 2, b"f", &half)],
            ),
        ),
        (
            "string-append-prepend",
            encode(
                (4, b"\x00\x01"),
                &[(append, 3, b"s", b"mid"), (prepend, 3, b"s", b"pre")],
            ),
        ),
        (
            "blob-then-null",
            encode(
                (3, b"k"),
                &[(write, 4, b"b", &[0, 1, 2]), (write, 0, b"b", b"")],
            ),
        ),
        (
            "bool-and-list",
            encode(
                (3, b"k"),
                &[(write, 17, b"t", &[1]), (write, 20, b"l", LIST)],
            ),
        ),
        (
            "map-and-geojson",
            encode(
                (3, b"k"),
                &[(write, 19, b"m", MAP), (write, 23, b"g", b"\x00\x00\x00{}")],
            ),
        ),
        (
            "opaque-blobs",
            encode(
                (3, b"k"),
                &[
                    (write, 7, b"java", b"\xac\xed"),
                    (write, 9, b"py", b"\x80\x04"),
                ],
            ),
        ),
        (
            "hll-and-type-mismatch",
            encode(
                (3, b"k"),
                &[(write, 18, b"h", &[0; 16]), (incr, 1, b"h", &one)],
            ),
        ),
    ];
    for (name, data) in cases {
        seeds.push(("particle", name.to_owned(), data));
    }
}

fn engine_ops_seeds(seeds: &mut Seeds) {
    // Steps as `engine_ops` reads them (see its `read_write` and `read_op`). A write is
    // [0, key, policy, generation policy (+ value), TTL (+ seconds), key field (+ value),
    // flags, op count - 1, ops...]; an op is [code, bin name, particle type, value choice...].
    let create_update_read: &[&[u8]] = &[
        // Create record 0 (update policy, no generation check, never expires): b = 1.
        &[0, 0, 0, 2, 1, 0, 0, 0, 0, 1, 0, 0],
        // Update only: increment b by 1.
        &[0, 0, 1, 2, 1, 0, 0, 0, 3, 1, 0, 0],
        // Read bin b of record 0.
        &[5, 0, 0, 1],
    ];
    let ttl_expire_sweep: &[&[u8]] = &[
        // Record 1 with a TTL of 1 s: c = "hi".
        &[0, 1, 0, 2, 3, 0, 0, 0, 0, 1, 2, 1, 2, b'h', b'i'],
        // The clock moves 3 s, the sweeper runs, the read finds nothing.
        &[6, 3],
        &[7],
        &[5, 1, 0, 2],
    ];
    let generation_and_keys: &[&[u8]] = &[
        // Create-only record 2 with the string key "k0": b = 1.
        &[0, 2, 4, 2, 0, 3, 0, 0, 0, 0, 1, 0, 0],
        // Generation must equal 1, key "k1" (a mismatch): read all, then b = 1.
        &[0, 2, 0, 0, 1, 1, 3, 1, 0, 1, 2, 0, 0, 0, 0, 1, 0, 0],
        // Delete if the generation is greater than 0, with the right key.
        &[4, 2, 1, 0, 3, 0],
    ];
    for (name, steps) in [
        ("create-update-read", create_update_read),
        ("ttl-expire-sweep", ttl_expire_sweep),
        ("generation-and-keys", generation_and_keys),
    ] {
        seeds.push(("engine_ops", name.to_owned(), steps.concat()));
    }
}

fn storage_record_seeds(seeds: &mut Seeds) {
    const BLOCK_BYTES: u32 = storage::WRITE_BLOCK_SIZE_BYTES_MIN;
    let device_size_bytes = u64::from(BLOCK_BYTES) * 4;
    let device = Arc::new(TestDevice::new("seed", device_size_bytes, 0));
    let mut storage = StorageConfig::with_defaults(vec!["seed".into()], device_size_bytes);
    storage.write_block_size_bytes = BLOCK_BYTES;
    let config = NamespaceConfig {
        storage: Some(storage),
        allow_ttl_without_nsup: true,
        ..NamespaceConfig::with_defaults("fuzz")
    };
    let clock = Arc::new(ManualClock::new(
        (CITRUSLEAF_EPOCH_UNIX_SECONDS + 1_000_000) * 1000,
    ));
    let devices: Vec<Arc<dyn Device>> = vec![device.clone()];
    let (namespace, _) =
        Namespace::open(config, clock, devices, Flushing::Manual).expect("a blank device opens");
    let seven = 7i64.to_be_bytes();
    let writes: [SeedWrite<'_>; 3] = [
        (0, None, vec![op(OpCode::Write, 1, b"n", &seven)]),
        (
            1,
            Some(b"\x03k1"),
            vec![
                op(OpCode::Write, 3, b"s", b"text"),
                op(OpCode::Write, 20, b"l", LIST),
            ],
        ),
        (2, None, vec![op(OpCode::Write, 19, b"m", MAP)]),
    ];
    for (key, key_field, ops) in &writes {
        let request = WriteRequest {
            digest: Digest::compute(b"fuzz", &UserKey::Integer(*key)),
            set_name: b"fuzz",
            key: *key_field,
            exists: ExistsPolicy::Update,
            generation: GenerationPolicy::None,
            ttl: TtlRequest::Seconds(100),
            respond_all_ops: false,
            deadline: engine::Deadline::NONE,
            filter: None,
            read_all_bins: false,
        };
        namespace
            .write(
                &request,
                ops.iter().copied(),
                &mut Ignore,
                &mut Acks::default(),
            )
            .expect("a seed write succeeds");
    }
    let delete = engine::DeleteRequest {
        digest: Digest::compute(b"fuzz", &UserKey::Integer(2)),
        set_name: b"",
        key: None,
        generation: GenerationPolicy::None,
        deadline: engine::Deadline::NONE,
        filter: None,
    };
    namespace
        .delete(&delete, &mut Acks::default())
        .expect("the seed record exists");
    namespace.flush_storage().expect("a test device flushes");
    let image = device.durable_image();
    let block = &image[..BLOCK_BYTES as usize];
    let used = block
        .iter()
        .rposition(|&byte| byte != 0)
        .map_or(0, |last| last + 1);
    for (name, flags) in [("written-block", 0u8), ("written-block-data-in-memory", 2)] {
        let mut data = vec![flags];
        data.extend_from_slice(&block[..used]);
        seeds.push(("storage_record", name.to_owned(), data));
    }
}

/// A write the storage seed makes: user key, KEY field, ops.
type SeedWrite<'a> = (i64, Option<&'a [u8]>, Vec<Op<'a>>);

/// A reply sink that drops every bin.
struct Ignore;

impl ReplySink for Ignore {
    fn bin(&mut self, _op_code: OpCode, _bin: BinRef<'_>) {}
}

/// Every fabric message type once, in the stream form (flags byte 0, then one frame), plus a
/// pipeline of all of them and a body-only input (flags byte 1, type byte, body).
fn fabric_seeds(seeds: &mut Seeds) {
    let records = [
        RecordVersion {
            digest: Digest([0x11; 20]),
            set_name: b"users",
            generation: Generation(3),
            last_update_ms: 1_700_000_000_123,
            void_time: VoidTime(500_000_000),
            data: Some(b"\x00\x01bins"),
        },
        RecordVersion {
            digest: Digest([0x22; 20]),
            set_name: b"",
            generation: Generation(1),
            last_update_ms: 1,
            void_time: VoidTime::NEVER,
            data: None,
        },
    ];
    let hello = Hello {
        node_id: 0xBB9_0000_0001,
        cluster_name: "prod",
        service_addresses: List::from_items(&["10.0.0.1:3000", "[::1]:3000"]),
        resp_addresses: List::from_items(&["10.0.0.1:6379"]),
        fabric_address: "10.0.0.1:3001",
    };
    let messages: [(&str, Message<'_>); 12] = [
        ("hello", Message::Hello(hello)),
        ("hello-ack", Message::HelloAck(hello)),
        (
            "heartbeat",
            Message::Heartbeat {
                node_id: 1,
                sent_at_ms: 1_700_000_000_000,
                map_version: 42,
                peer_node_ids: List::from_items(&[2, 3]),
            },
        ),
        (
            "raft-append-entries",
            Message::Raft {
                request_id: 7,
                kind: RaftKind::AppendEntries,
                payload: b"{\"term\":3}",
            },
        ),
        (
            "raft-reply",
            Message::RaftReply {
                request_id: 7,
                payload: b"{}",
            },
        ),
        (
            "forward-resp",
            Message::Forward {
                request_id: 8,
                protocol: ForwardProtocol::Resp,
                time_left_ms: 1000,
                payload: b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
            },
        ),
        (
            "forward-reply",
            Message::ForwardReply {
                request_id: 8,
                payload: b"$-1\r\n",
            },
        ),
        (
            "replica-write",
            Message::ReplicaWrite {
                request_id: 9,
                namespace: b"test",
                partition: PartitionId(4095),
                partition_version: 5,
                sequence: 1000,
                record: records[0],
            },
        ),
        (
            "replica-truncate",
            Message::ReplicaTruncate {
                request_id: 10,
                namespace: b"test",
                set_name: b"users",
                before_ms: 1_700_000_000_000,
            },
        ),
        (
            "replica-ack",
            Message::ReplicaAck {
                request_id: 9,
                result_code: 7,
            },
        ),
        (
            "partition-stream-request",
            Message::PartitionStreamRequest {
                request_id: 11,
                namespace: b"test",
                partition: PartitionId(12),
                after_digest: Some(Digest([0xab; 20])),
                chunk_size_bytes_max: 1 << 20,
            },
        ),
        (
            "partition-chunk",
            Message::PartitionChunk {
                request_id: 11,
                namespace: b"test",
                partition: PartitionId(12),
                done: true,
                records: List::from_items(&records),
            },
        ),
    ];
    let mut pipeline = vec![0];
    for (name, message) in &messages {
        let mut data = vec![0];
        wire_fabric::encode(message, &mut data);
        pipeline.extend_from_slice(&data[1..]);
        seeds.push(("fabric", (*name).to_owned(), data));
    }
    seeds.push(("fabric", "pipeline-of-every-message".to_owned(), pipeline));
    let mut body_only = vec![1, 0x41];
    wire_fabric::encode(&messages[11].1, &mut body_only);
    body_only.drain(2..2 + wire_fabric::FRAME_HEADER_SIZE_BYTES);
    seeds.push(("fabric", "body-only-partition-chunk".to_owned(), body_only));
}

/// The starting bins of a `collection_ops` input (see its `write_starting_bins`): `present`
/// (bit 0 list, 1 map, 2 blob, 3 integer, 4 HLL, 5 raw LIST bin `r`), the list `[5, 7]`, the
/// map `{"a": 9}`, the blob `ff 0f`, the integer 42, an HLL of 4 index bits, then `raw`.
fn collection_prefix(present: u8, raw: &[u8]) -> Vec<u8> {
    let mut data = vec![
        present, 2, 0, 2, 5, 0, 2, 7, 1, 1, 0, 2, 9, 2, 0xff, 0x0f, 2, 42, 0, 0,
    ];
    if present & 0x20 != 0 {
        data.push(raw.len() as u8);
        data.extend_from_slice(raw);
    }
    data
}

/// One `collection_ops` op with a raw payload: family (0 list, 1 map, 2 bits, 3 HLL), the
/// index of its code in the target's table of that family, the bin's index in its
/// `BIN_NAMES` (l, m, b, i, h, r, x), the payload.
fn raw_op(family: u8, code_index: u8, bin: u8, payload: &[u8]) -> Vec<u8> {
    let mut op = vec![family, 2, code_index, bin, payload.len() as u8];
    op.extend_from_slice(payload);
    op
}

fn collection_ops_seeds(seeds: &mut Seeds) {
    let request = |present: u8, raw: &[u8], ops: &[Vec<u8>]| {
        let mut data = collection_prefix(present, raw);
        data.extend_from_slice(&[0, ops.len() as u8 - 1]);
        data.extend(ops.concat());
        data
    };
    // List APPEND 5 (code 1, index 1), then GET_BY_INDEX (19, index 17) value (7) at 0.
    let list = request(
        0x0f,
        b"",
        &[
            raw_op(0, 1, 0, b"\x92\x01\x05"),
            raw_op(0, 17, 0, b"\x93\x13\x07\x00"),
        ],
    );
    // Map PUT "k" = 5 (67, index 3), then GET_BY_KEY (97, index 24) value of "k".
    let map = request(
        0x0f,
        b"",
        &[
            raw_op(1, 3, 1, b"\x93\x43\xa2\x03k\x05"),
            raw_op(1, 24, 1, b"\x93\x61\x07\xa2\x03k"),
        ],
    );
    // Bit SET (3) at bit 0, 8 bits, of blob aa; then GET (50, index 13) of those 8 bits.
    let bits = request(
        0x0f,
        b"",
        &[
            raw_op(2, 3, 2, b"\x94\x03\x00\x08\xc4\x02\x04\xaa"),
            raw_op(2, 13, 2, b"\x93\x32\x00\x08"),
        ],
    );
    // HLL ADD (1) "a" and "b" to the HLL bin, then COUNT (50, index 5).
    let hll = request(
        0x1f,
        b"",
        &[
            raw_op(3, 1, 4, b"\x92\x01\x92\xa2\x03a\xa2\x03b"),
            raw_op(3, 5, 4, b"\x91\x32"),
        ],
    );
    // A raw LIST bin [1, 2, 3]; APPEND of a wildcard (refused: the record must not change),
    // then GET_BY_VALUE_INTERVAL (25, index 23) from 1 to infinity, a read.
    let specials = request(
        0x21,
        b"\x93\x01\x02\x03",
        &[
            raw_op(0, 1, 5, b"\x92\x01\xd4\xff\x00"),
            raw_op(0, 23, 5, b"\x94\x19\x07\x01\xd4\xff\x01"),
        ],
    );
    // List APPEND_ITEMS (2) of an array declaring 2^32 - 1 items; a context into a map key
    // with create flags: [0xff, [0xa2, "z"], [SIZE]] on the map bin.
    let hostile = request(
        0x0f,
        b"",
        &[
            raw_op(0, 2, 0, b"\x92\x02\xdd\xff\xff\xff\xff"),
            raw_op(1, 23, 1, b"\x93\xcc\xff\x92\xcc\xa2\xa2\x03z\x91\x60"),
        ],
    );
    for (name, data) in [
        ("list-append-get", list),
        ("map-put-get", map),
        ("bits-set-get", bits),
        ("hll-add-count", hll),
        ("wildcard-and-infinity", specials),
        ("huge-count-and-context", hostile),
    ] {
        seeds.push(("collection_ops", name.to_owned(), data));
    }
}

/// The start of an `expressions` input whose expression is the raw bytes after it (mode 0;
/// see its `write_record`): the integer bin 7, the float 1.5, the list `[5, 7]`, the map
/// `{"a": 9}`, the blob `ab`, an HLL of 4 index bits; EXP_MODIFY on bin `BIN_NAMES[bin]`
/// (i, f, s, l, m, b, h, t, x) with flags 0.
fn expression_prefix(bin: u8) -> Vec<u8> {
    vec![
        0, 2, 7, 1, 2, 0, 2, 5, 0, 2, 7, 1, 1, 0, 2, 9, 1, 0xab, 0, 0, bin, 1, 0,
    ]
}

fn expressions_seeds(seeds: &mut Seeds) {
    let expressions: [(&str, u8, &[u8]); 5] = [
        // [EQ, [BIN, int, "i"], 7]
        ("bin-equals", 8, b"\x93\x01\x93\x51\x02\xa1i\x07"),
        // [AND, [GT, [CALL, int, cdt, [SIZE], [BIN, list, "l"]], 1], [KEY_EXISTS]]
        (
            "and-list-size-key-exists",
            8,
            b"\x93\x10\x93\x03\x95\x7f\x02\x00\x91\x10\x93\x51\x04\xa1l\x01\x91\x47",
        ),
        // [LET, "a", [BIN, int, "i"], [COND, [GE, [VAR, "a"], 5], [ADD, [VAR, "a"], 1], 0]]
        (
            "let-cond-add",
            0,
            b"\x94\x7d\xa1a\x93\x51\x02\xa1i\x94\x7b\x93\x04\x92\x7c\xa1a\x05\x93\x14\x92\x7c\xa1a\x01\x00",
        ),
        // [EQ, [CALL, int, cdt, [GET_BY_KEY, value, "a"], [BIN, map, "m"]], 9]
        (
            "map-get-by-key",
            8,
            b"\x93\x01\x95\x7f\x02\x00\x93\x61\x07\xa2\x03a\x93\x51\x05\xa1m\x09",
        ),
        // [LT, [CALL, int, hll, [COUNT], [BIN, hll, "h"]], 100]
        (
            "hll-count",
            8,
            b"\x93\x05\x95\x7f\x02\x02\x91\x32\x93\x51\x09\xa1h\x64",
        ),
    ];
    for (name, bin, expression) in expressions {
        let mut data = expression_prefix(bin);
        data.extend_from_slice(expression);
        seeds.push(("expressions", name.to_owned(), data));
    }
}

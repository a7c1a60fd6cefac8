//! The codec through its public API: round trips of every sample message, strict prefixes,
//! header checks before the body arrives, every limit and enum byte enforced, lazy chunk
//! records, and the chunk writer.

mod samples;

use model::PartitionId;
use wire_fabric::{
    FRAME_HEADER_SIZE_BYTES, FrameHeader, List, Malformed, Message, MessageType,
    PartitionChunkWriter, RecordVersion, decode_frame, decode_header, encode,
};

use samples::{RECORDS, encoded, messages};

/// A body limit above every sample.
const LIMIT_BYTES: u32 = 1 << 20;

/// A frame of `message_type` around `body`, built by hand.
fn frame(message_type: u8, body: &[u8]) -> Vec<u8> {
    let mut frame = vec![b'O', b'F', 1, message_type];
    let size = u32::try_from(body.len()).expect("test bodies are small");
    frame.extend_from_slice(&size.to_be_bytes());
    frame.extend_from_slice(body);
    frame
}

/// A body built field by field, big-endian, to forge what `encode` refuses to write.
#[derive(Default)]
struct Body(Vec<u8>);

impl Body {
    fn u8(mut self, value: u8) -> Body {
        self.0.push(value);
        self
    }
    fn u16(mut self, value: u16) -> Body {
        self.0.extend_from_slice(&value.to_be_bytes());
        self
    }
    fn u32(mut self, value: u32) -> Body {
        self.0.extend_from_slice(&value.to_be_bytes());
        self
    }
    fn u64(mut self, value: u64) -> Body {
        self.0.extend_from_slice(&value.to_be_bytes());
        self
    }
    fn raw(mut self, bytes: &[u8]) -> Body {
        self.0.extend_from_slice(bytes);
        self
    }
    fn text(self, bytes: &[u8]) -> Body {
        let size = u32::try_from(bytes.len()).expect("test fields are small");
        self.u32(size).raw(bytes)
    }
}

fn decode_all(buf: &[u8]) -> Result<Option<(Message<'_>, usize)>, Malformed> {
    decode_frame(buf, LIMIT_BYTES)
}

fn assert_malformed(buf: &[u8], reason: &str) {
    match decode_all(buf) {
        Err(malformed) => assert_eq!(malformed.reason, reason),
        other => panic!("expected {reason:?}, got {other:?}"),
    }
}

#[test]
fn every_message_round_trips_through_encode_and_decode() {
    for message in messages() {
        let bytes = encoded(&message);
        let (decoded, size_bytes) = decode_all(&bytes).unwrap().unwrap();
        assert_eq!(decoded, message);
        assert_eq!(size_bytes, bytes.len(), "{message:?}");
        assert_eq!(
            encoded(&decoded),
            bytes,
            "a decoded message re-encodes to its bytes"
        );
    }
}

#[test]
fn the_samples_cover_every_message_type() {
    let types: Vec<MessageType> = messages().iter().map(Message::message_type).collect();
    for message_type in MessageType::ALL {
        assert!(types.contains(&message_type), "{message_type:?}");
    }
}

#[test]
fn every_strict_prefix_of_every_message_needs_more_bytes() {
    for message in messages() {
        let bytes = encoded(&message);
        for prefix_size_bytes in 0..bytes.len() {
            let prefix = &bytes[..prefix_size_bytes];
            assert_eq!(
                decode_all(prefix),
                Ok(None),
                "{prefix_size_bytes} of {message:?}"
            );
        }
    }
}

#[test]
fn frames_back_to_back_decode_one_at_a_time() {
    let all = messages();
    let stream: Vec<u8> = all.iter().flat_map(encoded).collect();
    let mut start = 0;
    for message in &all {
        let (decoded, size_bytes) = decode_all(&stream[start..]).unwrap().unwrap();
        assert_eq!(&decoded, message);
        start += size_bytes;
    }
    assert_eq!(start, stream.len());
}

#[test]
fn the_header_is_magic_version_type_and_body_size() {
    let bytes = encoded(&Message::ReplicaAck {
        request_id: 0x0102_0304_0506_0708,
        result_code: 7,
    });
    assert_eq!(
        bytes,
        b"OF\x01\x32\0\0\0\x09\x01\x02\x03\x04\x05\x06\x07\x08\x07"
    );
    let header = decode_header(&bytes, 9).unwrap().unwrap();
    let expected = FrameHeader {
        message_type: MessageType::ReplicaAck,
        body_size_bytes: 9,
    };
    assert_eq!(header, expected);
    assert_eq!(header.frame_size_bytes(), bytes.len());
}

#[test]
fn a_declared_body_over_the_limit_is_malformed_before_the_body_arrives() {
    // Only the header is present: the limit must be enforced without the body.
    let header = &frame(0x21, &[0; 101])[..FRAME_HEADER_SIZE_BYTES];
    let over = decode_frame(header, 100);
    assert_eq!(
        over,
        Err(Malformed::new("frame body size is over the limit"))
    );
    assert_eq!(decode_frame(header, 101), Ok(None));
    let huge = [b'O', b'F', 1, 0x41, 0xff, 0xff, 0xff, 0xff];
    assert!(decode_frame(&huge, LIMIT_BYTES).is_err());
    assert_eq!(decode_frame(&huge, u32::MAX), Ok(None));
}

#[test]
fn a_corrupted_type_byte_is_malformed_from_the_header_alone() {
    let known: Vec<u8> = MessageType::ALL.iter().map(|kind| *kind as u8).collect();
    for message in messages() {
        let mut bytes = encoded(&message);
        for type_byte in (0..=u8::MAX).filter(|byte| !known.contains(byte)) {
            bytes[3] = type_byte;
            assert_malformed(&bytes, "unknown message type");
            assert!(decode_all(&bytes[..FRAME_HEADER_SIZE_BYTES]).is_err());
        }
    }
}

#[test]
fn a_corrupted_magic_or_version_is_malformed() {
    let good = encoded(&messages()[0]);
    for (position, byte, reason) in [
        (0, b'*', "frame does not start with the fabric magic"),
        (1, 0, "frame does not start with the fabric magic"),
        (2, 0, "frame has another fabric version"),
        (2, 2, "frame has another fabric version"),
    ] {
        let mut bad = good.clone();
        bad[position] = byte;
        assert_malformed(&bad, reason);
        assert!(decode_all(&bad[..FRAME_HEADER_SIZE_BYTES]).is_err());
    }
}

#[test]
fn a_body_with_a_byte_more_or_less_is_malformed() {
    // Every body ends in a fixed-size or length-prefixed field, so one byte less always cuts
    // a field, and one byte more is always left over.
    for message in messages() {
        let bytes = encoded(&message);
        let body = &bytes[FRAME_HEADER_SIZE_BYTES..];
        let longer = frame(bytes[3], &[body, &[0]].concat());
        assert_malformed(&longer, "bytes left over after the last field of the body");
        let shorter = frame(bytes[3], &body[..body.len() - 1]);
        assert_malformed(&shorter, "a field runs past the end of the body");
    }
}

#[test]
fn names_over_their_limits_are_malformed() {
    let truncate = |namespace: &[u8], set_name: &[u8]| {
        let body = Body::default().u64(1).text(namespace).text(set_name).u64(0);
        frame(0x31, &body.0)
    };
    assert!(decode_all(&truncate(&[b'n'; 31], &[b's'; 63])).is_ok());
    assert_malformed(&truncate(&[b'n'; 32], b""), "namespace name over 31 bytes");
    assert_malformed(&truncate(b"", b""), "namespace name is empty");
    assert_malformed(&truncate(b"test", &[b's'; 64]), "set name over 63 bytes");
}

/// A `Hello` body with the given cluster name, service address list and fabric address.
fn hello_body(cluster_name: &[u8], service_addresses: &[&[u8]], fabric_address: &[u8]) -> Body {
    let count = u32::try_from(service_addresses.len()).expect("a test list is small");
    let mut body = Body::default().u64(1).text(cluster_name).u32(count);
    for address in service_addresses {
        body = body.text(address);
    }
    body.u32(0).text(fabric_address)
}

#[test]
fn hello_fields_over_their_limits_are_malformed() {
    let address: &[u8] = &[b'a'; 259];
    let ok = hello_body(&[b'c'; 64], &[address; 32], address);
    assert!(decode_all(&frame(0x01, &ok.0)).unwrap().is_some());
    let cases: [(Body, &str); 4] = [
        (
            hello_body(&[b'c'; 65], &[], b""),
            "cluster name over 64 bytes",
        ),
        (
            hello_body(b"c", &[address; 33], b""),
            "more addresses than a list may hold",
        ),
        (
            hello_body(b"c", &[&[b'a'; 260]], b""),
            "address over 259 bytes",
        ),
        (
            hello_body(b"c", &[], b"\xff:3000"),
            "a text field is not UTF-8",
        ),
    ];
    for (body, reason) in cases {
        assert_malformed(&frame(0x02, &body.0), reason);
    }
}

#[test]
fn more_peers_than_a_heartbeat_may_list_is_malformed() {
    let heartbeat = |count: u32| {
        let mut body = Body::default().u64(1).u64(2).u64(3).u32(count);
        for peer in 0..count {
            body = body.u64(u64::from(peer));
        }
        frame(0x03, &body.0)
    };
    assert!(decode_all(&heartbeat(128)).unwrap().is_some());
    assert_malformed(&heartbeat(129), "more peers than a heartbeat may list");
}

#[test]
fn a_count_larger_than_the_body_holds_is_malformed_without_allocating() {
    // Four billion records declared, none present: the decoder must fail on the first one
    // instead of reserving or looping over the declared count.
    let body = Body::default()
        .u64(1)
        .text(b"test")
        .u16(0)
        .u8(1)
        .u32(u32::MAX);
    assert_malformed(
        &frame(0x41, &body.0),
        "a field runs past the end of the body",
    );
    let body = Body::default().u64(1).u64(2).u64(3).u32(100).u64(9);
    assert_malformed(
        &frame(0x03, &body.0),
        "a field runs past the end of the body",
    );
    let body = Body::default()
        .u64(1)
        .u8(1)
        .u32(0)
        .u32(u32::MAX)
        .raw(b"short");
    assert_malformed(
        &frame(0x20, &body.0),
        "a field runs past the end of the body",
    );
}

#[test]
fn bad_enum_flag_and_partition_bytes_are_malformed() {
    let raft = Body::default().u64(1).u8(5).u32(0);
    assert_malformed(&frame(0x10, &raft.0), "unknown raft kind");
    let forward = Body::default().u64(1).u8(3).u32(0).u32(0);
    assert_malformed(&frame(0x20, &forward.0), "unknown forwarded protocol");
    let stream = |partition: u16, after_flag: u8| {
        let body = Body::default().u64(1).text(b"test").u16(partition);
        frame(0x40, &body.u8(after_flag).u32(10).0)
    };
    assert!(decode_all(&stream(4095, 0)).is_ok());
    assert_malformed(&stream(4096, 0), "partition id is not below 4096");
    assert_malformed(&stream(0, 2), "a flag byte is neither 0 nor 1");
    let tombstone_flag = |flag: u8| {
        let body = Body::default().u64(1).text(b"test").u16(0).u64(1).u64(1);
        let record = body.raw(&[0; 20]).text(b"").u16(1).u64(0).u32(0);
        frame(0x30, &record.u8(flag).0)
    };
    assert!(decode_all(&tombstone_flag(0)).is_ok());
    assert_malformed(&tombstone_flag(2), "a flag byte is neither 0 nor 1");
}

#[test]
fn chunk_records_are_read_lazily_in_order() {
    let message = Message::PartitionChunk {
        request_id: 1,
        namespace: b"test",
        partition: PartitionId(12),
        done: false,
        records: List::from_items(&RECORDS),
    };
    let bytes = encoded(&message);
    let Some((Message::PartitionChunk { records, .. }, _)) = decode_all(&bytes).unwrap() else {
        panic!("a chunk decodes as a chunk");
    };
    assert_eq!(records.len(), RECORDS.len());
    let mut iter = records.iter();
    assert_eq!(iter.len(), RECORDS.len());
    assert_eq!(iter.next(), Some(RECORDS[0]));
    let rest: Vec<RecordVersion<'_>> = iter.collect();
    assert_eq!(rest, RECORDS[1..]);
    // The records borrow the frame's bytes rather than copies of them.
    let data = records.iter().next().unwrap().data.unwrap();
    assert!(bytes.as_ptr_range().contains(&data.as_ptr()));
}

#[test]
fn the_chunk_writer_writes_what_encode_writes() {
    let mut out = b"earlier frames".to_vec();
    let mut writer = PartitionChunkWriter::begin(&mut out, 5, b"test", PartitionId(4095));
    let header_and_fields_bytes = writer.frame_size_bytes();
    for record in &RECORDS {
        writer.push(record);
    }
    assert_eq!(writer.record_count(), 4);
    let records_bytes: usize = RECORDS.iter().map(RecordVersion::encoded_size_bytes).sum();
    assert_eq!(
        writer.frame_size_bytes(),
        header_and_fields_bytes + records_bytes
    );
    writer.finish(true);
    let expected = encoded(&Message::PartitionChunk {
        request_id: 5,
        namespace: b"test",
        partition: PartitionId(4095),
        done: true,
        records: List::from_items(&RECORDS),
    });
    assert_eq!(&out[14..], expected);
}

#[test]
fn a_chunk_writer_dropped_unfinished_leaves_the_buffer_as_it_was() {
    let mut out = b"earlier frames".to_vec();
    let mut writer = PartitionChunkWriter::begin(&mut out, 5, b"test", PartitionId(1));
    writer.push(&RECORDS[0]);
    drop(writer);
    assert_eq!(out, b"earlier frames");
}

#[test]
fn request_ids_are_reported_for_requests_and_replies() {
    for message in messages() {
        let expected = !matches!(
            message,
            Message::Hello(_) | Message::HelloAck(_) | Message::Heartbeat { .. }
        );
        assert_eq!(message.request_id().is_some(), expected, "{message:?}");
    }
}

#[test]
fn lists_compare_by_items_whichever_form_they_are_in() {
    let message = Message::Heartbeat {
        node_id: 1,
        sent_at_ms: 2,
        map_version: 3,
        peer_node_ids: List::from_items(&[4, 5]),
    };
    let bytes = encoded(&message);
    let (decoded, _) = decode_all(&bytes).unwrap().unwrap();
    assert_eq!(decoded, message);
    let other = Message::Heartbeat {
        node_id: 1,
        sent_at_ms: 2,
        map_version: 3,
        peer_node_ids: List::from_items(&[4, 6]),
    };
    assert_ne!(decoded, other);
    assert_eq!(format!("{:?}", List::from_items(&[4u64, 5])), "[4, 5]");
}

#[test]
#[should_panic(expected = "namespace name of 32 bytes is over the limit of 31")]
fn encode_refuses_a_namespace_over_the_limit() {
    encode(
        &Message::ReplicaTruncate {
            request_id: 1,
            namespace: &[b'n'; 32],
            set_name: b"",
            before_ms: 0,
        },
        &mut Vec::new(),
    );
}

#[test]
#[should_panic(expected = "peer list holds 129 items, over the limit of 128")]
fn encode_refuses_more_peers_than_a_heartbeat_may_list() {
    let peers: Vec<u64> = (0..129).collect();
    let message = Message::Heartbeat {
        node_id: 1,
        sent_at_ms: 2,
        map_version: 3,
        peer_node_ids: List::from_items(&peers),
    };
    encode(&message, &mut Vec::new());
}

#[test]
#[should_panic(expected = "partition id 4096 is not below 4096")]
fn encode_refuses_a_partition_id_of_4096() {
    let message = Message::PartitionStreamRequest {
        request_id: 1,
        namespace: b"test",
        partition: PartitionId(4096),
        after_digest: None,
        chunk_size_bytes_max: 1,
    };
    encode(&message, &mut Vec::new());
}

/// The size hint covers every request and reply on the data path, so encoding them never
/// grows the buffer (a regrowth was a tenth of a replicated write's instructions).
#[test]
fn the_size_hint_covers_the_data_path_messages() {
    for message in messages() {
        let on_data_path = matches!(
            message.message_type(),
            MessageType::ReplicaWrite
                | MessageType::ReplicaAck
                | MessageType::Forward
                | MessageType::ForwardReply
                | MessageType::Raft
                | MessageType::RaftReply
        );
        if on_data_path {
            let size_bytes = encoded(&message).len();
            assert!(
                message.encoded_size_hint() >= size_bytes,
                "{message:?}: {size_bytes} bytes"
            );
        }
    }
}

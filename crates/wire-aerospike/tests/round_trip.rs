//! Encode/decode round trips: what `encode_message` and `encode_info_request` write,
//! `decode_frame`, `Message::parse` and `info_request_lines` read back unchanged.

use model::{Op, OpCode, ParticleType};
use wire_aerospike::{
    Fields, Message, MessageHeader, PROTO_BODY_SIZE_BYTES_MAX, ProtoType, ScanFields, UdfFields,
    decode_frame, encode_info_request, encode_message, field_type, info_request_lines,
};

/// Encodes a request and decodes it again, checking the frame on the way.
fn encode_then_parse<'a>(
    out: &'a mut Vec<u8>,
    header: &MessageHeader,
    fields: &[(u8, &[u8])],
    ops: &[Op<'_>],
) -> Message<'a> {
    encode_message(out, header, fields, ops);
    let out: &'a [u8] = out;
    let decoded = decode_frame(out, PROTO_BODY_SIZE_BYTES_MAX).expect("an encoded frame is valid");
    let frame = decoded.expect("an encoded frame is complete");
    assert_eq!(frame.proto_type, ProtoType::Message);
    assert_eq!(frame.size_bytes(), out.len());
    Message::parse(frame.body).expect("an encoded message parses")
}

/// One value of each shape the particle types take on the wire.
fn sample_values() -> Vec<(u8, Vec<u8>)> {
    vec![
        (ParticleType::Null as u8, vec![]),
        (ParticleType::Integer as u8, (-7i64).to_be_bytes().to_vec()),
        (ParticleType::Float as u8, 2.5f64.to_be_bytes().to_vec()),
        (ParticleType::String as u8, b"hello".to_vec()),
        (ParticleType::Blob as u8, vec![0, 0xff, 0x10]),
        (ParticleType::Bool as u8, vec![1]),
        (ParticleType::List as u8, vec![0x92, 0x01, 0xa1, b'x']),
        (ParticleType::GeoJson as u8, b"\0\0\0{}".to_vec()),
        (0xee, vec![0xaa; 300]),
    ]
}

#[test]
fn every_op_code_with_several_particle_types_round_trips() {
    // Each known op code is paired with every sample value and bin names from empty to 255
    // bytes (long names are the engine's to reject, not the codec's).
    let codes: Vec<OpCode> = (0..=u8::MAX).filter_map(OpCode::from_u8).collect();
    assert_eq!(codes.len(), 15);
    let values = sample_values();
    let names: [&[u8]; 4] = [b"", b"a", b"fifteen_chars__", &[b'n'; 255]];
    let mut ops = Vec::new();
    for (code_index, code) in codes.iter().enumerate() {
        for (value_index, (particle_type, value)) in values.iter().enumerate() {
            let bin_name = names[(code_index + value_index) % names.len()];
            ops.push(Op {
                code: *code,
                particle_type: *particle_type,
                bin_name,
                value,
            });
        }
    }
    let header = MessageHeader {
        info1: 0x81,
        info2: 0x42,
        info3: 0x24,
        info4: 0x18,
        result_code: 0,
        generation: 0xdead_beef,
        record_ttl: u32::MAX,
        transaction_ttl: 1,
        field_count: 999, // Overwritten from the slices.
        op_count: 999,
    };
    let fields = [
        (field_type::NAMESPACE, &b"test"[..]),
        (field_type::DIGEST, &[3; 20]),
    ];
    let mut out = Vec::new();
    let message = encode_then_parse(&mut out, &header, &fields, &ops);
    let expected_header = MessageHeader {
        field_count: 2,
        op_count: 135,
        ..header
    };
    assert_eq!(message.header, expected_header);
    assert_eq!(message.ops().len(), ops.len());
    assert!(message.ops().eq(ops.iter().copied()));
}

#[test]
fn every_field_type_round_trips_into_its_slot() {
    let fields: Vec<(u8, &[u8])> = vec![
        (field_type::NAMESPACE, b"test"),
        (field_type::SET, b"demo"),
        (field_type::KEY, b"\x03key1"),
        (field_type::RECORD_VERSION, &[1; 7]),
        (field_type::DIGEST, &[9; 20]),
        (field_type::MRT_ID, &[2; 8]),
        (field_type::MRT_DEADLINE, &[3; 4]),
        (field_type::TRID, &[4; 8]),
        (field_type::SOCKET_TIMEOUT, &[5; 4]),
        (field_type::RECORDS_PER_SECOND, &[6; 4]),
        (field_type::PID_ARRAY, &[7; 8]),
        (field_type::DIGEST_ARRAY, &[8; 40]),
        (field_type::MAX_RECORDS, &[9; 8]),
        (field_type::BVAL_ARRAY, &[10; 8]),
        (field_type::INDEX_NAME, b"idx"),
        (field_type::INDEX_RANGE, b"range"),
        (field_type::INDEX_CONTEXT, b"\x90"),
        (field_type::INDEX_EXPRESSION, b"\x93"),
        (field_type::INDEX_TYPE, &[1]),
        (field_type::UDF_FILENAME, b"module"),
        (field_type::UDF_FUNCTION, b"function"),
        (field_type::UDF_ARGLIST, b""),
        (field_type::UDF_OP, &[0]),
        (field_type::QUERY_BINLIST, &[0]),
        (field_type::BATCH, b"batch"),
        (field_type::BATCH_WITH_SET, b"ignored: BATCH came first"),
        (field_type::FILTER_EXP, b"\x93\x01"),
    ];
    let mut out = Vec::new();
    let message = encode_then_parse(&mut out, &MessageHeader::default(), &fields, &[]);
    let expected = Fields {
        namespace: Some(b"test"),
        set: Some(b"demo"),
        key: Some(b"\x03key1"),
        digest: Some(&[9; 20]),
        filter_expression: Some(b"\x93\x01"),
        udf: true,
        udf_call: UdfFields {
            module: Some(b"module"),
            function: Some(b"function"),
            arguments: Some(b""),
            op: Some(&[0]),
        },
        batch: Some(b"batch"),
        scan: ScanFields {
            task_id: Some(&[4; 8]),
            socket_timeout: Some(&[5; 4]),
            records_per_second: Some(&[6; 4]),
            partition_ids: Some(&[7; 8]),
            resume_digests: Some(&[8; 40]),
            max_records: Some(&[9; 8]),
            index_range: Some(b"range"),
            index_name: Some(b"idx"),
            index_type: Some(&[1]),
            index_context: Some(b"\x90"),
            index_expression: Some(b"\x93"),
            resume_values: Some(&[10; 8]),
            bin_list: Some(&[0]),
        },
        other_field_count: 3,
    };
    assert_eq!(message.fields, expected);
    assert_eq!(message.header.field_count, 27);
}

#[test]
fn a_message_without_udf_fields_reports_no_udf() {
    let fields = [(field_type::NAMESPACE, &b"ns"[..]), (field_type::KEY, b"")];
    let mut out = Vec::new();
    let message = encode_then_parse(&mut out, &MessageHeader::default(), &fields, &[]);
    assert!(!message.fields.udf);
    assert_eq!(message.fields.key, Some(&b""[..]));
    assert_eq!(message.fields.batch, None);
}

#[test]
fn messages_appended_to_one_buffer_decode_one_after_another() {
    let touch = Op {
        code: OpCode::Touch,
        particle_type: 0,
        bin_name: b"",
        value: b"",
    };
    let mut out = Vec::new();
    encode_message(&mut out, &MessageHeader::default(), &[], &[touch]);
    encode_info_request(&mut out, &["build"]);
    let first = decode_frame(&out, PROTO_BODY_SIZE_BYTES_MAX)
        .unwrap()
        .unwrap();
    assert_eq!(
        Message::parse(first.body).unwrap().ops().next(),
        Some(touch)
    );
    let rest = &out[first.size_bytes()..];
    let second = decode_frame(rest, PROTO_BODY_SIZE_BYTES_MAX)
        .unwrap()
        .unwrap();
    assert_eq!(second.proto_type, ProtoType::Info);
    assert_eq!(second.size_bytes(), rest.len());
}

#[test]
fn info_requests_round_trip_through_info_request_lines() {
    let cases: [&[&str]; 4] = [
        &[],
        &["node"],
        &[
            "namespace/test",
            "sindex-create:ns=test;indexname=x;indexdata=a,NUMERIC",
            "",
        ],
        &[
            "features",
            "partitions",
            "replicas",
            "peers-clear-std",
            "partition-generation",
        ],
    ];
    for commands in cases {
        let mut out = Vec::new();
        encode_info_request(&mut out, commands);
        let frame = decode_frame(&out, PROTO_BODY_SIZE_BYTES_MAX)
            .unwrap()
            .unwrap();
        assert_eq!(frame.proto_type, ProtoType::Info);
        let lines: Vec<&[u8]> = info_request_lines(frame.body).collect();
        let expected: Vec<&[u8]> = commands.iter().map(|command| command.as_bytes()).collect();
        assert_eq!(lines, expected);
    }
}

//! Golden byte fixtures from the protocol reference (`aerospike-protocol.md` sections 2.2 and 7.2):
//! decoding them must give the documented values, and encoding those values must give back the
//! exact bytes.

use model::{Digest, UserKey};
use wire_aerospike::{
    Message, MessageHeader, PROTO_BODY_SIZE_BYTES_MAX, ProtoType, begin_info_response,
    begin_response, decode_frame, encode_info_request, encode_message, field_type,
    finish_info_response, finish_response, info_request_lines, info1, write_op,
};

/// Parses hex digits, ignoring whitespace, so fixtures can be laid out as in the reference.
fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .bytes()
        .filter(|byte| !byte.is_ascii_whitespace())
        .collect();
    assert_eq!(digits.len() % 2, 0, "odd number of hex digits");
    let digit = |byte: u8| char::from(byte).to_digit(16).expect("hex digit");
    let pair =
        |pair: &[u8]| u8::try_from(digit(pair[0]) * 16 + digit(pair[1])).expect("two hex digits");
    digits.chunks(2).map(pair).collect()
}

/// GET of all bins of test/demo/"key1" with a 1000 ms total timeout (section 7.2).
const GET_REQUEST_HEX: &str = "
    02 03 00 00 00 00 00 41   16 03 00 00 00 00 00000000 00000000 000003e8 0003 0000
    00000005 00 74657374
    00000005 01 64656d6f
    00000015 04 ec91192d4b7f8ce35d5d78d34bca65cbaaaac960";

/// The reply to it: bins a=42 and s="hi", generation 1, never expires (section 7.2).
const GET_RESPONSE_HEX: &str = "
    02 03 00 00 00 00 00 32   16 00 00 00 00 00 00000001 00000000 00000000 0000 0002
    0000000d 01 01 00 01 61 000000000000002a
    00000007 01 03 00 01 73 6869";

const DIGEST_HEX: &str = "ec91192d4b7f8ce35d5d78d34bca65cbaaaac960";

#[test]
fn get_request_from_the_reference_decodes_to_namespace_set_and_digest() {
    let bytes = hex(GET_REQUEST_HEX);
    let frame = decode_frame(&bytes, PROTO_BODY_SIZE_BYTES_MAX)
        .unwrap()
        .unwrap();
    assert_eq!(frame.proto_type, ProtoType::Message);
    assert_eq!(frame.size_bytes(), bytes.len());

    let message = Message::parse(frame.body).unwrap();
    let expected_header = MessageHeader {
        info1: info1::READ | info1::GET_ALL,
        transaction_ttl: 1000,
        field_count: 3,
        ..MessageHeader::default()
    };
    assert_eq!(message.header, expected_header);
    assert_eq!(message.fields.namespace, Some(&b"test"[..]));
    assert_eq!(message.fields.set, Some(&b"demo"[..]));
    assert_eq!(message.fields.digest, Some(&hex(DIGEST_HEX)[..]));
    assert_eq!(message.fields.key, None);
    assert!(!message.fields.udf);
    assert_eq!(message.fields.other_field_count, 0);
    assert_eq!(message.ops().count(), 0);

    // The fixture's digest is the one model computes for the key, so the fixture is coherent.
    let digest = Digest::compute(b"demo", &UserKey::String(b"key1"));
    assert_eq!(&digest.0[..], &hex(DIGEST_HEX)[..]);
}

#[test]
fn get_request_from_the_reference_encodes_to_its_exact_bytes() {
    let digest = hex(DIGEST_HEX);
    let header = MessageHeader {
        info1: info1::READ | info1::GET_ALL,
        transaction_ttl: 1000,
        ..MessageHeader::default()
    };
    let fields = [
        (field_type::NAMESPACE, &b"test"[..]),
        (field_type::SET, b"demo"),
        (field_type::DIGEST, &digest),
    ];
    let mut out = Vec::new();
    encode_message(&mut out, &header, &fields, &[]);
    assert_eq!(out, hex(GET_REQUEST_HEX));
}

#[test]
fn get_response_from_the_reference_encodes_to_its_exact_bytes() {
    let mut out = Vec::new();
    let start = begin_response(&mut out);
    write_op(&mut out, 1, 1, b"a", &42i64.to_be_bytes());
    write_op(&mut out, 1, 3, b"s", b"hi");
    let header = MessageHeader {
        generation: 1,
        op_count: 2,
        ..MessageHeader::default()
    };
    finish_response(&mut out, start, &header);
    assert_eq!(out, hex(GET_RESPONSE_HEX));
}

#[test]
fn info_request_from_the_reference_encodes_and_splits_into_its_commands() {
    let commands = ["node", "partition-generation", "build"];
    let mut out = Vec::new();
    encode_info_request(&mut out, &commands);
    let mut expected = hex("02 01 00 00 00 00 00 20");
    expected.extend_from_slice(b"node\npartition-generation\nbuild\n");
    assert_eq!(out, expected);

    let frame = decode_frame(&out, PROTO_BODY_SIZE_BYTES_MAX)
        .unwrap()
        .unwrap();
    assert_eq!(frame.proto_type, ProtoType::Info);
    let lines: Vec<&[u8]> = info_request_lines(frame.body).collect();
    assert_eq!(lines, commands.map(str::as_bytes));
}

#[test]
fn info_response_from_the_reference_is_framed_with_its_body_size() {
    let body = b"node\tBB9020011AC4202\npartition-generation\t1\nbuild\t8.1.2.0\n";
    let mut out = Vec::new();
    let start = begin_info_response(&mut out);
    out.extend_from_slice(body);
    finish_info_response(&mut out, start);
    assert_eq!(out[..8], hex("02 01 00 00 00 00 00 3a"));
    assert_eq!(&out[8..], body);
}

//! Targets over the Aerospike wire codec: frames, AS_MSG messages with their fields and ops,
//! info text, and the rows of a batch field.
//!
//! Invariants the targets assert, beyond "no panic":
//! - [`decode_frame`] never claims more bytes than it was given; a frame it returns answers
//!   `Ok(None)` on every strict prefix; a header it refuses is refused from its 8 bytes alone.
//! - A message that parses re-encodes, with [`encode_message`], into one that parses to the
//!   same header, fields and ops; no strict prefix of a parsed body parses.
//! - Info lines, command names and parameters are slices that put the request back together.
//! - A security request that parses re-encodes into one with the same command and fields, and
//!   its lists of roles and privileges re-encode to their exact bytes.
//! - Batch rows stop at their first error, which is the last item; rows re-encode into a body
//!   that parses to the same rows; an iterator resumed from a position yields what was left.

use model::{Digest, Op};
use wire_aerospike::security::{
    SecurityRequest, field, parse_names, parse_privileges, write_names_field,
    write_privileges_field, write_security_request,
};
use wire_aerospike::{
    BatchRequest, BatchRow, Fields, Frame, Malformed, Message, MessageHeader,
    PROTO_HEADER_SIZE_BYTES, ProtoType, decode_frame, encode_batch_header, encode_batch_repeat_row,
    encode_batch_row, encode_info_request, encode_message, encode_proto_header, field_type,
    info_command_name, info_param, info_request_lines,
};

/// The body limit the targets decode frames under. Far below the server's 128 MiB, so that a
/// declared size above it is refused and one below it can be satisfied by a fuzzer input.
pub const FRAME_BODY_SIZE_BYTES_MAX: u64 = 64 * 1024;

/// Info parameter keys looked up in every info command.
const INFO_KEYS: [&[u8]; 4] = [b"namespace", b"set", b"ns", b"id"];

/// Target `aerospike_message`: `data` is a stream of proto frames, as a connection receives
/// them. Each frame is checked, and its body parsed as its type demands: info text, or an
/// AS_MSG message with its fields, ops and batch rows.
pub fn aerospike_message(data: &[u8]) {
    let mut rest = data;
    loop {
        match decode_frame(rest, FRAME_BODY_SIZE_BYTES_MAX) {
            Ok(Some(frame)) => {
                check_frame_bounds(rest, &frame);
                check_frame(&frame);
                rest = &rest[frame.size_bytes()..];
            }
            Ok(None) => {
                check_incomplete(rest);
                return;
            }
            Err(malformed) => {
                check_refused_from_header(rest, malformed);
                return;
            }
        }
    }
}

/// Target `aerospike_batch`: `data` is the data of a BATCH field.
pub fn aerospike_batch(data: &[u8]) {
    check_batch(data);
}

fn check_frame_bounds(buf: &[u8], frame: &Frame<'_>) {
    let size_bytes = frame.size_bytes();
    assert!(
        size_bytes <= buf.len(),
        "frame of {size_bytes} bytes in {}",
        buf.len()
    );
    assert_eq!(frame.body, &buf[PROTO_HEADER_SIZE_BYTES..size_bytes]);
    for prefix_size_bytes in 0..size_bytes {
        assert_eq!(
            decode_frame(&buf[..prefix_size_bytes], FRAME_BODY_SIZE_BYTES_MAX),
            Ok(None),
            "a strict prefix of {prefix_size_bytes} bytes of a complete frame"
        );
    }
    let body_size_bytes = u64::try_from(frame.body.len()).expect("usize fits in u64");
    let header = encode_proto_header(frame.proto_type, body_size_bytes);
    // The version byte may be the legacy 0 of a security frame; the rest must match.
    assert_eq!(header[1..], buf[1..PROTO_HEADER_SIZE_BYTES]);
}

fn check_incomplete(buf: &[u8]) {
    let Some(header) = buf.first_chunk::<PROTO_HEADER_SIZE_BYTES>() else {
        return;
    };
    let declared_size_bytes = u64::from_be_bytes(*header) & ((1 << 48) - 1);
    let present_size_bytes = (buf.len() - PROTO_HEADER_SIZE_BYTES) as u64;
    assert!(
        declared_size_bytes > present_size_bytes,
        "Ok(None) although the {declared_size_bytes}-byte body is all there"
    );
}

fn check_refused_from_header(buf: &[u8], malformed: Malformed) {
    assert!(
        buf.len() >= PROTO_HEADER_SIZE_BYTES,
        "refused before 8 bytes"
    );
    let header_only = &buf[..PROTO_HEADER_SIZE_BYTES];
    assert_eq!(
        decode_frame(header_only, FRAME_BODY_SIZE_BYTES_MAX),
        Err(malformed),
        "a refusal must come from the header alone"
    );
    for prefix_size_bytes in 0..PROTO_HEADER_SIZE_BYTES {
        assert_eq!(
            decode_frame(&buf[..prefix_size_bytes], FRAME_BODY_SIZE_BYTES_MAX),
            Ok(None)
        );
    }
}

fn check_frame(frame: &Frame<'_>) {
    match frame.proto_type {
        ProtoType::Info => check_info(frame.body),
        ProtoType::Message | ProtoType::Compressed | ProtoType::InternalXdr => {
            check_message(frame.body);
        }
        ProtoType::Security => check_security(frame.body),
    }
}

/// A security body that parses re-encodes (`write_security_request`) into one that parses to
/// the same command and fields; its ROLES and PRIVILEGES fields, where they parse, re-encode
/// to exactly their bytes.
fn check_security(body: &[u8]) {
    let Ok(request) = SecurityRequest::parse(body) else {
        return;
    };
    let fields: Vec<(u8, &[u8])> = (0..=field::CONNECTIONS)
        .filter_map(|id| request.field(id).map(|data| (id, data)))
        .collect();
    let mut frame = Vec::new();
    write_security_request(&mut frame, request.command, &fields);
    let reparsed = SecurityRequest::parse(&frame[PROTO_HEADER_SIZE_BYTES..])
        .expect("a re-encoded security request parses");
    assert_eq!(reparsed.command, request.command);
    for id in 0..=field::CONNECTIONS {
        assert_eq!(reparsed.field(id), request.field(id), "field {id}");
    }
    /// A field's header: its u32 size and u8 id.
    const FIELD_HEADER_BYTES: usize = 5;
    if let Some(data) = request.field(field::ROLES)
        && let Ok(names) = parse_names(data)
    {
        let mut out = Vec::new();
        write_names_field(&mut out, field::ROLES, names.iter().copied());
        assert_eq!(&out[FIELD_HEADER_BYTES..], data);
    }
    if let Some(data) = request.field(field::PRIVILEGES)
        && let Ok(privileges) = parse_privileges(data)
    {
        let mut out = Vec::new();
        write_privileges_field(&mut out, &privileges);
        assert_eq!(&out[FIELD_HEADER_BYTES..], data);
    }
}

fn check_info(body: &[u8]) {
    let lines: Vec<&[u8]> = info_request_lines(body).collect();
    let complete_size_bytes = body
        .iter()
        .rposition(|&byte| byte == b'\n')
        .map_or(0, |newline| newline + 1);
    let mut rejoined = Vec::with_capacity(complete_size_bytes);
    for line in &lines {
        rejoined.extend_from_slice(line);
        rejoined.push(b'\n');
        check_info_command(line);
    }
    assert_eq!(rejoined, body[..complete_size_bytes]);
    // Lines made of UTF-8 re-encode into a request with the same lines.
    let commands: Option<Vec<&str>> = lines.iter().map(|l| std::str::from_utf8(l).ok()).collect();
    if let Some(commands) = commands {
        let mut frame = Vec::new();
        encode_info_request(&mut frame, &commands);
        let decoded = decode_frame(&frame, u64::MAX)
            .expect("an encoded info request decodes")
            .expect("an encoded info request is complete");
        assert_eq!(decoded.proto_type, ProtoType::Info);
        assert_eq!(info_request_lines(decoded.body).collect::<Vec<_>>(), lines);
    }
}

fn check_info_command(line: &[u8]) {
    let (name, params) = info_command_name(line);
    let is_separator = |byte: &u8| matches!(byte, b'/' | b':' | b';');
    assert!(!name.iter().any(is_separator), "a name holds no separator");
    if name.len() == line.len() {
        assert!(params.is_empty());
    } else {
        assert!(is_separator(&line[name.len()]));
        assert_eq!(params, &line[name.len() + 1..]);
    }
    for key in INFO_KEYS {
        let expected = params
            .split(|&byte| byte == b';')
            .find_map(|pair| pair.strip_prefix(key)?.strip_prefix(b"="));
        assert_eq!(info_param(params, key), expected, "key {key:?}");
    }
}

fn check_message(body: &[u8]) {
    let Ok(message) = Message::parse(body) else {
        return;
    };
    let ops: Vec<Op<'_>> = message.ops().collect();
    assert_eq!(ops.len(), usize::from(message.header.op_count));
    for prefix_size_bytes in [0, body.len() / 2, body.len() - 1] {
        assert!(
            Message::parse(&body[..prefix_size_bytes]).is_err(),
            "a strict prefix of {prefix_size_bytes} bytes of a parsed body parses"
        );
    }
    let fields = named_fields(&message.fields);
    let mut frame = Vec::new();
    encode_message(&mut frame, &message.header, &fields, &ops);
    let reencoded = decode_frame(&frame, u64::MAX)
        .expect("an encoded message decodes")
        .expect("an encoded message is complete");
    let again = Message::parse(reencoded.body).expect("an encoded message parses");
    let field_count = u16::try_from(fields.len()).expect("fewer than 25 named fields");
    assert_eq!(
        again.header,
        MessageHeader {
            field_count,
            ..message.header
        }
    );
    assert_eq!(again.ops().collect::<Vec<_>>(), ops);
    assert_eq!(
        Fields {
            udf: message.fields.udf,
            other_field_count: message.fields.other_field_count,
            ..again.fields
        },
        message.fields
    );
    if let Some(batch) = message.fields.batch {
        check_batch(batch);
    }
}

/// The fields a [`Fields`] keeps by name, as `(type, data)` pairs, namespace first (batch rows
/// require it first). UDF and unnamed fields are only counted by the parser, so they are left
/// out.
fn named_fields<'a>(fields: &Fields<'a>) -> Vec<(u8, &'a [u8])> {
    let scan = &fields.scan;
    let slots = [
        (field_type::NAMESPACE, fields.namespace),
        (field_type::SET, fields.set),
        (field_type::KEY, fields.key),
        (field_type::DIGEST, fields.digest),
        (field_type::FILTER_EXP, fields.filter_expression),
        (field_type::BATCH, fields.batch),
        (field_type::TRID, scan.task_id),
        (field_type::SOCKET_TIMEOUT, scan.socket_timeout),
        (field_type::RECORDS_PER_SECOND, scan.records_per_second),
        (field_type::PID_ARRAY, scan.partition_ids),
        (field_type::DIGEST_ARRAY, scan.resume_digests),
        (field_type::MAX_RECORDS, scan.max_records),
        (field_type::INDEX_RANGE, scan.index_range),
        (field_type::INDEX_NAME, scan.index_name),
        (field_type::INDEX_TYPE, scan.index_type),
        (field_type::INDEX_CONTEXT, scan.index_context),
        (field_type::INDEX_EXPRESSION, scan.index_expression),
        (field_type::BVAL_ARRAY, scan.resume_values),
        (field_type::QUERY_BINLIST, scan.bin_list),
        (field_type::UDF_FILENAME, fields.udf_call.module),
        (field_type::UDF_FUNCTION, fields.udf_call.function),
        (field_type::UDF_ARGLIST, fields.udf_call.arguments),
        (field_type::UDF_OP, fields.udf_call.op),
    ];
    slots
        .into_iter()
        .filter_map(|(field_type, data)| Some((field_type, data?)))
        .collect()
}

/// A batch row with everything owned or copied, for comparing two parses.
#[derive(Debug, PartialEq, Eq)]
struct RowSummary<'a> {
    index: u32,
    digest: Digest,
    header: MessageHeader,
    fields: Vec<(u8, &'a [u8])>,
    repeated: bool,
    ops: Vec<Op<'a>>,
}

impl<'a> RowSummary<'a> {
    fn of(row: &BatchRow<'a>) -> RowSummary<'a> {
        RowSummary {
            index: row.index,
            digest: row.digest,
            header: row.header,
            fields: named_fields(&row.fields),
            repeated: row.repeated,
            ops: row.ops().collect(),
        }
    }
}

fn check_batch(data: &[u8]) {
    let Ok(request) = BatchRequest::parse(data) else {
        assert!(data.len() < 5, "only a short header is refused outright");
        return;
    };
    let items: Vec<Result<BatchRow<'_>, Malformed>> = request.rows().collect();
    assert!(items.len() as u64 <= u64::from(request.row_count) + 1);
    if let Some(error_at) = items.iter().position(Result::is_err) {
        assert_eq!(error_at, items.len() - 1, "an error is the last item");
    }
    let rows: Vec<&BatchRow<'_>> = items.iter().filter_map(|item| item.as_ref().ok()).collect();
    for row in &rows {
        assert!(
            row.fields.namespace.is_some(),
            "every row names its namespace"
        );
        assert_eq!(row.ops().count(), usize::from(row.header.op_count));
    }
    check_batch_resumes(&request, &items);
    check_batch_round_trip(request.parent_flags, &rows);
}

/// An iterator resumed from where another stood after some rows yields what the original did
/// after them.
fn check_batch_resumes(request: &BatchRequest<'_>, items: &[Result<BatchRow<'_>, Malformed>]) {
    let all: Vec<Option<RowSummary<'_>>> = items
        .iter()
        .map(|item| item.as_ref().ok().map(RowSummary::of))
        .collect();
    // An iterator that yielded an error stands before the bad row, so resuming it yields the
    // error again: only positions after rows that parsed are resumed from.
    let parsed = items.iter().take_while(|item| item.is_ok()).count();
    for split in [1, parsed / 2, parsed] {
        if split == 0 || split > parsed {
            continue;
        }
        let mut rows = request.rows();
        rows.by_ref().take(split).for_each(drop);
        let resumed: Vec<Option<RowSummary<'_>>> = request
            .rows_from(rows.position())
            .map(|item| item.ok().map(|row| RowSummary::of(&row)))
            .collect();
        assert_eq!(resumed, all[split..], "resumed after {split} rows");
    }
}

/// The rows that parsed, re-encoded into a body of their own, parse to the same rows.
fn check_batch_round_trip(parent_flags: u8, rows: &[&BatchRow<'_>]) {
    let mut body = Vec::new();
    let row_count = u32::try_from(rows.len()).expect("rows fit the u32 count they came from");
    encode_batch_header(&mut body, row_count, parent_flags);
    for row in rows {
        if row.repeated {
            encode_batch_repeat_row(&mut body, row.index, &row.digest);
        } else {
            let fields = named_fields(&row.fields);
            let ops: Vec<Op<'_>> = row.ops().collect();
            encode_batch_row(
                &mut body,
                row.index,
                &row.digest,
                &row.header,
                &fields,
                &ops,
            );
        }
    }
    let request = BatchRequest::parse(&body).expect("an encoded batch header parses");
    let again: Vec<RowSummary<'_>> = request
        .rows()
        .map(|row| RowSummary::of(&row.expect("an encoded row parses")))
        .collect();
    assert_eq!(again.len(), rows.len());
    for (again, row) in again.iter().zip(rows) {
        let original = RowSummary::of(row);
        let field_count = u16::try_from(original.fields.len()).expect("few named fields");
        let expected = RowSummary {
            header: MessageHeader {
                field_count: field_count.max(1),
                ..original.header
            },
            ..original
        };
        // A repeated row carries its template's header, whose field count was re-derived too.
        assert_eq!(again.fields, expected.fields);
        assert_eq!(
            (again.index, again.digest),
            (expected.index, expected.digest)
        );
        assert_eq!(
            (again.repeated, &again.ops),
            (expected.repeated, &expected.ops)
        );
        assert_eq!(again.header, expected.header);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strict_prefix_of_a_valid_stream_is_only_ever_incomplete() {
        let mut stream = Vec::new();
        encode_info_request(&mut stream, &["namespace/test", "sets:ns=test;set=a"]);
        encode_message(
            &mut stream,
            &MessageHeader::default(),
            &[(field_type::NAMESPACE, b"test")],
            &[],
        );
        for size_bytes in 0..=stream.len() {
            aerospike_message(&stream[..size_bytes]);
        }
    }
}

//! The scan mode (`--scan`): one partition scan of a namespace or a set, sent as Aerospike
//! clients send it, read to its LAST message and timed.
//!
//! The request (protocol reference 8.2) is one AS_MSG: info1 READ (+ GET_NO_BINS), info3
//! PARTITION_DONE, and the fields NAMESPACE, SET (only when a set is named), TRID (u64 BE),
//! SOCKET_TIMEOUT (u32 BE, ms) and PID_ARRAY (all 4096 partition ids as u16 little-endian).
//! The reply is a stream of type-3 protos, each holding messages back to back: records,
//! partition-done messages, and at the end one message with info3 LAST.
//!
//! Invariants of [`StreamParser`]:
//! - It never allocates: it holds at most one 22-byte header across reads and skips field and
//!   op bodies by counting, so a declared length can never make it allocate or buffer.
//! - Every declared length is checked against the proto that contains it, and a proto's size
//!   against [`PROTO_BODY_SIZE_BYTES_MAX`]; a violation is [`StreamError::Malformed`].
//! - A non-zero result code in any message (record, partition-done or LAST) is
//!   [`StreamError::ResultCode`]: a scan that is not complete is never reported as a result.
//! - Nothing may follow the LAST message.

use std::fmt;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use wire_aerospike::{
    MESSAGE_HEADER_SIZE_BYTES, MessageHeader, PROTO_BODY_SIZE_BYTES_MAX, PROTO_HEADER_SIZE_BYTES,
    PROTO_VERSION, ProtoType, begin_response, field_type, finish_response, info1, info3,
    write_field,
};

/// Partitions of a namespace; a scan asks for all of them.
pub const PARTITION_COUNT: u16 = 4096;

/// Bytes asked of the socket per read.
const READ_BUFFER_BYTES: usize = 1024 * 1024;

/// Size of a field's or an op's length word.
const ITEM_SIZE_BYTES: usize = 4;

/// Smallest op size: op code, particle type, version and name length bytes.
const OP_SIZE_BYTES_MIN: u32 = 4;

/// Byte of the message header holding its own size (always 22).
const HEADER_SIZE_OFFSET: usize = 0;

/// What one scan asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanRequest {
    /// Namespace to scan.
    pub namespace: String,
    /// Set to scan; empty scans the whole namespace (no SET field is sent).
    pub set: String,
    /// Ask for digests and metadata only (info1 GET_NO_BINS).
    pub no_bins: bool,
    /// The scan's task id (TRID field).
    pub task_id: u64,
    /// How long the server may wait on a blocked socket (SOCKET_TIMEOUT field), ms.
    pub socket_timeout_ms: u32,
}

/// Appends the request frame of `request` to `out`.
pub fn encode_scan_request(request: &ScanRequest, out: &mut Vec<u8>) {
    let mut partitions = Vec::with_capacity(usize::from(PARTITION_COUNT) * 2);
    for partition in 0..PARTITION_COUNT {
        partitions.extend_from_slice(&partition.to_le_bytes());
    }
    let start = begin_response(out);
    write_field(out, field_type::NAMESPACE, request.namespace.as_bytes());
    let mut field_count = 1;
    if !request.set.is_empty() {
        write_field(out, field_type::SET, request.set.as_bytes());
        field_count += 1;
    }
    write_field(out, field_type::TRID, &request.task_id.to_be_bytes());
    write_field(
        out,
        field_type::SOCKET_TIMEOUT,
        &request.socket_timeout_ms.to_be_bytes(),
    );
    write_field(out, field_type::PID_ARRAY, &partitions);
    field_count += 3;
    let header = MessageHeader {
        info1: info1::READ
            | if request.no_bins {
                info1::GET_NO_BINS
            } else {
                0
            },
        info3: info3::PARTITION_DONE,
        field_count,
        ..MessageHeader::default()
    };
    finish_response(out, start, &header);
}

/// Why a scan's reply stream was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// The bytes are not a valid reply stream.
    Malformed(&'static str),
    /// A message carried a non-zero result code.
    ResultCode {
        /// The result code.
        code: u8,
        /// The partition, when the message was a partition-done message.
        partition: Option<u32>,
        /// Whether the message was the LAST message.
        last: bool,
    },
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Malformed(reason) => write!(f, "malformed scan reply: {reason}"),
            StreamError::ResultCode {
                code,
                partition,
                last,
            } => {
                let name = crate::protocol::ErrorLabel::ResultCode(*code);
                match (partition, last) {
                    (Some(partition), _) => {
                        write!(f, "partition {partition} ended with result code {name}")
                    }
                    (None, true) => write!(f, "the scan ended with result code {name}"),
                    (None, false) => write!(f, "a scan message carried result code {name}"),
                }
            }
        }
    }
}

/// What the stream held so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamCounts {
    /// Record messages (neither LAST nor PARTITION_DONE, result 0).
    pub records: u64,
    /// Partition-done messages with result 0.
    pub partitions_done: u64,
    /// Protos (frames) received.
    pub protos: u64,
    /// Bytes received, proto headers included, up to the end of the LAST message.
    pub bytes: u64,
}

/// What the parser expects next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// An 8-byte proto header.
    ProtoHeader,
    /// A 22-byte message header.
    MessageHeader,
    /// A 4-byte field or op size.
    ItemSize,
    /// The rest of a field or op body.
    Skip(u64),
    /// Nothing: the LAST message was read.
    Done,
}

/// The kind of the message being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Record,
    PartitionDone,
    Last,
}

/// Counts the records of a scan's reply stream as its bytes arrive, in place.
#[derive(Clone, Debug)]
pub struct StreamParser {
    want: Want,
    /// A header split across reads, gathered here.
    staged: [u8; MESSAGE_HEADER_SIZE_BYTES],
    staged_len: usize,
    /// Body bytes of the current proto not yet consumed (or reserved by `Skip`).
    proto_left: u64,
    fields_left: u16,
    ops_left: u16,
    kind: Kind,
    counts: StreamCounts,
}

impl Default for StreamParser {
    fn default() -> Self {
        StreamParser {
            want: Want::ProtoHeader,
            staged: [0; MESSAGE_HEADER_SIZE_BYTES],
            staged_len: 0,
            proto_left: 0,
            fields_left: 0,
            ops_left: 0,
            kind: Kind::Record,
            counts: StreamCounts::default(),
        }
    }
}

impl StreamParser {
    /// What the stream held so far.
    pub fn counts(&self) -> StreamCounts {
        self.counts
    }

    /// Whether the LAST message was read.
    pub fn is_done(&self) -> bool {
        self.want == Want::Done
    }

    /// Consumes the next bytes of the stream; `Ok(true)` once the LAST message was read.
    ///
    /// # Errors
    ///
    /// [`StreamError`] when the bytes are not a valid stream or a message carries a non-zero
    /// result code; the parser must not be fed again after an error.
    pub fn feed(&mut self, data: &[u8]) -> Result<bool, StreamError> {
        let mut at = 0;
        while at < data.len() {
            let rest = &data[at..];
            let size = match self.want {
                Want::Done => return Err(StreamError::Malformed("bytes after the LAST message")),
                Want::Skip(left) => {
                    let take = left.min(rest.len() as u64);
                    // `take` is at most `rest.len()`, so it fits in usize.
                    at += take as usize;
                    if take == left {
                        self.finish_item()?;
                    } else {
                        self.want = Want::Skip(left - take);
                    }
                    continue;
                }
                Want::ProtoHeader => PROTO_HEADER_SIZE_BYTES,
                Want::MessageHeader => MESSAGE_HEADER_SIZE_BYTES,
                Want::ItemSize => ITEM_SIZE_BYTES,
            };
            if self.want == Want::MessageHeader
                && self.staged_len == 0
                && let Some(message_size) = whole_message_size(rest, self.proto_left)
            {
                // The whole message is in this read (the common case): count it and step over
                // its fields and ops at once.
                self.take_message_header(&rest[..MESSAGE_HEADER_SIZE_BYTES])?;
                self.proto_left -= (message_size - MESSAGE_HEADER_SIZE_BYTES) as u64;
                (self.fields_left, self.ops_left) = (0, 0);
                self.finish_item()?;
                at += message_size;
                continue;
            }
            if self.staged_len == 0 && rest.len() >= size {
                // The whole header is in this read: decode it in place.
                self.take_header(&rest[..size])?;
                at += size;
            } else {
                let take = (size - self.staged_len).min(rest.len());
                self.staged[self.staged_len..self.staged_len + take].copy_from_slice(&rest[..take]);
                self.staged_len += take;
                at += take;
                if self.staged_len == size {
                    self.staged_len = 0;
                    let staged = self.staged;
                    self.take_header(&staged[..size])?;
                }
            }
        }
        self.counts.bytes += data.len() as u64;
        Ok(self.is_done())
    }

    /// Handles one complete header of the size `self.want` asks for.
    fn take_header(&mut self, bytes: &[u8]) -> Result<(), StreamError> {
        match self.want {
            Want::ProtoHeader => self.take_proto_header(bytes),
            Want::MessageHeader => self.take_message_header(bytes),
            Want::ItemSize => self.take_item_size(bytes),
            Want::Skip(_) | Want::Done => Ok(()),
        }
    }

    fn take_proto_header(&mut self, bytes: &[u8]) -> Result<(), StreamError> {
        let mut word = [0u8; PROTO_HEADER_SIZE_BYTES];
        word.copy_from_slice(bytes);
        if word[0] != PROTO_VERSION {
            return Err(StreamError::Malformed("proto version is not 2"));
        }
        match ProtoType::from_u8(word[1]) {
            Some(ProtoType::Message) => {}
            Some(ProtoType::Compressed) => {
                return Err(StreamError::Malformed(
                    "compressed proto, which the request did not ask for",
                ));
            }
            _ => return Err(StreamError::Malformed("proto type is not 3 (message)")),
        }
        let size = u64::from_be_bytes(word) & ((1 << 48) - 1);
        if size > PROTO_BODY_SIZE_BYTES_MAX {
            return Err(StreamError::Malformed("proto body is larger than 128 MiB"));
        }
        self.counts.protos += 1;
        self.proto_left = size;
        self.next_message()
    }

    /// After a proto header or a complete message: the next message, or the next proto.
    fn next_message(&mut self) -> Result<(), StreamError> {
        self.want = match self.proto_left {
            0 => Want::ProtoHeader,
            left if left < MESSAGE_HEADER_SIZE_BYTES as u64 => {
                return Err(StreamError::Malformed("proto ends inside a message header"));
            }
            _ => Want::MessageHeader,
        };
        Ok(())
    }

    fn take_message_header(&mut self, bytes: &[u8]) -> Result<(), StreamError> {
        // next_message checked that the proto holds the whole header.
        self.proto_left -= MESSAGE_HEADER_SIZE_BYTES as u64;
        if usize::from(bytes[HEADER_SIZE_OFFSET]) != MESSAGE_HEADER_SIZE_BYTES {
            return Err(StreamError::Malformed("message header size is not 22"));
        }
        let mut array = [0u8; MESSAGE_HEADER_SIZE_BYTES];
        array.copy_from_slice(bytes);
        let header = MessageHeader::decode(&array);
        let last = header.info3 & info3::LAST != 0;
        let partition_done = header.info3 & info3::PARTITION_DONE != 0;
        if header.result_code != 0 {
            return Err(StreamError::ResultCode {
                code: header.result_code,
                partition: (partition_done && !last).then_some(header.generation),
                last,
            });
        }
        self.kind = if last {
            Kind::Last
        } else if partition_done {
            self.counts.partitions_done += 1;
            Kind::PartitionDone
        } else {
            self.counts.records += 1;
            Kind::Record
        };
        self.fields_left = header.field_count;
        self.ops_left = header.op_count;
        self.finish_item()
    }

    fn take_item_size(&mut self, bytes: &[u8]) -> Result<(), StreamError> {
        // finish_item checked that the proto holds the size word.
        self.proto_left -= ITEM_SIZE_BYTES as u64;
        let size = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if self.fields_left > 0 {
            if size == 0 {
                return Err(StreamError::Malformed(
                    "field size is 0 (it must count the type byte)",
                ));
            }
            self.fields_left -= 1;
        } else {
            if size < OP_SIZE_BYTES_MIN {
                return Err(StreamError::Malformed("op size is under 4"));
            }
            self.ops_left -= 1;
        }
        let size = u64::from(size);
        if size > self.proto_left {
            return Err(StreamError::Malformed("a field or op runs past its proto"));
        }
        self.proto_left -= size;
        self.want = Want::Skip(size);
        Ok(())
    }

    /// After a message header or a field or op body: the next item of the message, or the
    /// end of the message.
    fn finish_item(&mut self) -> Result<(), StreamError> {
        if self.fields_left > 0 || self.ops_left > 0 {
            if self.proto_left < ITEM_SIZE_BYTES as u64 {
                return Err(StreamError::Malformed("a message runs past its proto"));
            }
            self.want = Want::ItemSize;
            return Ok(());
        }
        if self.kind != Kind::Last {
            return self.next_message();
        }
        if self.proto_left != 0 {
            return Err(StreamError::Malformed("bytes after the LAST message"));
        }
        self.want = Want::Done;
        Ok(())
    }
}

/// The size of the message at the start of `bytes` when all of it lies in `bytes` and in the
/// `proto_left` bytes left in its proto, with valid field and op sizes; else `None` (the caller
/// then reads it piece by piece, which also reports what is wrong).
fn whole_message_size(bytes: &[u8], proto_left: u64) -> Option<usize> {
    let limit = bytes
        .len()
        .min(usize::try_from(proto_left).unwrap_or(usize::MAX));
    let header = bytes.get(..MESSAGE_HEADER_SIZE_BYTES)?;
    if limit < MESSAGE_HEADER_SIZE_BYTES {
        return None;
    }
    let field_count = usize::from(u16::from_be_bytes([header[18], header[19]]));
    let op_count = usize::from(u16::from_be_bytes([header[20], header[21]]));
    let mut at = MESSAGE_HEADER_SIZE_BYTES;
    for index in 0..field_count + op_count {
        let body_at = at + ITEM_SIZE_BYTES;
        if body_at > limit {
            return None;
        }
        let size = u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        let size_min = if index < field_count {
            1
        } else {
            OP_SIZE_BYTES_MIN
        };
        if size < size_min {
            return None;
        }
        at = body_at.checked_add(usize::try_from(size).ok()?)?;
        if at > limit {
            return None;
        }
    }
    Some(at)
}

/// One timed scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanRun {
    /// From handing the request to the socket to reading the LAST message.
    pub elapsed: Duration,
    /// From handing the request to the socket to the first reply bytes.
    pub first_byte: Duration,
    /// What the stream held.
    pub counts: StreamCounts,
}

/// One connection that runs scans one after the other.
#[derive(Debug)]
pub struct ScanClient {
    stream: TcpStream,
    buffer: Vec<u8>,
    idle_timeout: Option<Duration>,
}

impl ScanClient {
    /// Connects to `address`; a scan fails when no byte arrives for `idle_timeout`.
    ///
    /// # Errors
    ///
    /// When the server cannot be reached.
    pub fn connect(
        address: SocketAddr,
        idle_timeout: Option<Duration>,
    ) -> Result<ScanClient, String> {
        let stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))
            .map_err(|error| format!("cannot connect to {address}: {error}"))?;
        stream
            .set_nodelay(true)
            .and_then(|()| stream.set_read_timeout(idle_timeout))
            .map_err(|error| format!("cannot set up the connection to {address}: {error}"))?;
        Ok(ScanClient {
            stream,
            buffer: vec![0; READ_BUFFER_BYTES],
            idle_timeout,
        })
    }

    /// Sends `request` and reads its reply stream to the LAST message.
    ///
    /// # Errors
    ///
    /// When the connection fails or stays silent for the idle timeout, the stream is
    /// malformed, or any message carries a non-zero result code. The connection must not be
    /// used again after an error.
    pub fn scan(&mut self, request: &ScanRequest) -> Result<ScanRun, String> {
        let mut frame = Vec::new();
        encode_scan_request(request, &mut frame);
        let mut parser = StreamParser::default();
        let started = Instant::now();
        self.stream
            .write_all(&frame)
            .map_err(|error| format!("cannot send the scan request: {error}"))?;
        let mut first_byte = None;
        loop {
            let read = match self.stream.read(&mut self.buffer) {
                Ok(0) => {
                    return Err(format!(
                        "the server closed the connection before the LAST message \
                         ({} records so far)",
                        parser.counts().records
                    ));
                }
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(format!(
                        "no reply bytes for {} ms ({} records so far)",
                        self.idle_timeout.map_or(0, |timeout| timeout.as_millis()),
                        parser.counts().records
                    ));
                }
                Err(error) => return Err(format!("cannot read the scan reply: {error}")),
            };
            first_byte.get_or_insert_with(|| started.elapsed());
            let done = parser.feed(&self.buffer[..read]).map_err(|error| {
                format!(
                    "{error} (after {} records, {} bytes)",
                    parser.counts().records,
                    parser.counts().bytes
                )
            })?;
            if done {
                break;
            }
        }
        let elapsed = started.elapsed();
        Ok(ScanRun {
            elapsed,
            first_byte: first_byte.unwrap_or(elapsed),
            counts: parser.counts(),
        })
    }
}

#[cfg(test)]
mod tests {
    use wire_aerospike::{
        Message, begin_message, begin_proto, decode_frame, finish_message, finish_proto, write_op,
    };

    use super::*;

    fn request(set: &str, no_bins: bool) -> ScanRequest {
        ScanRequest {
            namespace: "test".to_owned(),
            set: set.to_owned(),
            no_bins,
            task_id: 0x0102_0304_0506_0708,
            socket_timeout_ms: 30_000,
        }
    }

    /// The fields of an encoded request as (type, data), in order.
    fn fields_of(message_bytes: &[u8], count: u16) -> Vec<(u8, Vec<u8>)> {
        let mut rest = &message_bytes[MESSAGE_HEADER_SIZE_BYTES..];
        let mut fields = Vec::new();
        for _ in 0..count {
            let size = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            fields.push((rest[4], rest[5..4 + size].to_vec()));
            rest = &rest[4 + size..];
        }
        assert!(rest.is_empty(), "bytes after the fields");
        fields
    }

    #[test]
    fn the_request_is_a_partition_scan_of_all_4096_partitions() {
        let mut out = Vec::new();
        encode_scan_request(&request("demo", false), &mut out);
        let frame = decode_frame(&out, PROTO_BODY_SIZE_BYTES_MAX)
            .unwrap()
            .unwrap();
        assert_eq!(frame.proto_type, ProtoType::Message);
        assert_eq!(frame.size_bytes(), out.len());
        let message = Message::parse(frame.body).unwrap();
        let header = message.header;
        assert_eq!(header.info1, info1::READ);
        assert_eq!((header.info2, header.info3), (0, info3::PARTITION_DONE));
        assert_eq!((header.field_count, header.op_count), (5, 0));
        assert_eq!(message.fields.namespace, Some(&b"test"[..]));
        assert_eq!(message.fields.digest, None);
        let fields = fields_of(frame.body, 5);
        let types: Vec<u8> = fields.iter().map(|(field_type, _)| *field_type).collect();
        assert_eq!(types, [0, 1, 7, 9, 11]);
        assert_eq!(fields[1].1, b"demo");
        assert_eq!(fields[2].1, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(fields[3].1, 30_000u32.to_be_bytes());
        let partitions = &fields[4].1;
        assert_eq!(partitions.len(), 8192);
        assert_eq!(&partitions[..6], [0, 0, 1, 0, 2, 0]);
        assert_eq!(&partitions[8190..], [0xff, 0x0f]);
    }

    #[test]
    fn no_bins_sets_get_no_bins_and_an_empty_set_sends_no_set_field() {
        let mut out = Vec::new();
        encode_scan_request(&request("", true), &mut out);
        let frame = decode_frame(&out, PROTO_BODY_SIZE_BYTES_MAX)
            .unwrap()
            .unwrap();
        let message = Message::parse(frame.body).unwrap();
        assert_eq!(message.header.info1, info1::READ | info1::GET_NO_BINS);
        assert_eq!(message.header.field_count, 4);
        assert_eq!(message.fields.set, None);
        let types: Vec<u8> = fields_of(frame.body, 4).iter().map(|f| f.0).collect();
        assert_eq!(types, [0, 7, 9, 11]);
    }

    /// Appends a record message: namespace, digest and set fields and one 100-byte bin.
    fn record(out: &mut Vec<u8>, key: u8) {
        let start = begin_message(out);
        write_field(out, field_type::NAMESPACE, b"test");
        write_field(out, field_type::DIGEST, &[key; 20]);
        write_field(out, field_type::SET, b"demo");
        write_op(out, 1, 3, b"testbin", &[b'x'; 100]);
        let header = MessageHeader {
            generation: 1,
            field_count: 3,
            op_count: 1,
            ..MessageHeader::default()
        };
        finish_message(out, start, &header);
    }

    /// Appends a header-only message with `info3` and `result_code`.
    fn bare(out: &mut Vec<u8>, info3_bits: u8, result_code: u8, generation: u32) {
        let start = begin_message(out);
        let header = MessageHeader {
            info3: info3_bits,
            result_code,
            generation,
            ..MessageHeader::default()
        };
        finish_message(out, start, &header);
    }

    /// Two data protos (3 records, then 2 records and a partition-done), then LAST alone.
    fn sample_stream() -> Vec<u8> {
        let mut out = Vec::new();
        let first = begin_proto(&mut out);
        for key in 0..3 {
            record(&mut out, key);
        }
        finish_proto(&mut out, first, ProtoType::Message);
        let second = begin_proto(&mut out);
        record(&mut out, 3);
        bare(&mut out, info3::PARTITION_DONE, 0, 17);
        record(&mut out, 4);
        finish_proto(&mut out, second, ProtoType::Message);
        let last = begin_proto(&mut out);
        bare(&mut out, info3::LAST, 0, 0);
        finish_proto(&mut out, last, ProtoType::Message);
        out
    }

    #[test]
    fn a_stream_of_two_protos_and_a_last_counts_its_records() {
        let stream = sample_stream();
        let mut parser = StreamParser::default();
        assert_eq!(parser.feed(&stream), Ok(true));
        let counts = parser.counts();
        assert_eq!(counts.records, 5);
        assert_eq!(counts.partitions_done, 1);
        assert_eq!(counts.protos, 3);
        assert_eq!(counts.bytes, stream.len() as u64);
    }

    #[test]
    fn the_stream_may_arrive_in_pieces_of_any_size() {
        let stream = sample_stream();
        for piece in [1, 2, 3, 5, 7, 8, 13, 22, 23, 64, 150] {
            let mut parser = StreamParser::default();
            let chunks: Vec<&[u8]> = stream.chunks(piece).collect();
            for (index, chunk) in chunks.iter().enumerate() {
                let done = parser.feed(chunk).unwrap();
                assert_eq!(
                    done,
                    index == chunks.len() - 1,
                    "piece {piece}, chunk {index}"
                );
            }
            assert_eq!(parser.counts().records, 5, "piece {piece}");
            assert_eq!(parser.counts().bytes, stream.len() as u64);
        }
    }

    #[test]
    fn the_last_message_may_share_the_final_data_proto() {
        let mut out = Vec::new();
        let start = begin_proto(&mut out);
        record(&mut out, 1);
        bare(&mut out, info3::LAST, 0, 0);
        finish_proto(&mut out, start, ProtoType::Message);
        let mut parser = StreamParser::default();
        assert_eq!(parser.feed(&out), Ok(true));
        assert_eq!(parser.counts().records, 1);
    }

    #[test]
    fn non_zero_result_codes_fail_loudly() {
        let single = |info3_bits, code, generation| {
            let mut out = Vec::new();
            let start = begin_proto(&mut out);
            bare(&mut out, info3_bits, code, generation);
            finish_proto(&mut out, start, ProtoType::Message);
            StreamParser::default().feed(&out)
        };
        assert_eq!(
            single(info3::LAST, 16, 0),
            Err(StreamError::ResultCode {
                code: 16,
                partition: None,
                last: true
            })
        );
        let unavailable = single(info3::PARTITION_DONE, 11, 4095).unwrap_err();
        assert_eq!(
            unavailable.to_string(),
            "partition 4095 ended with result code 11 PARTITION_UNAVAILABLE"
        );
        // A start-up error without LAST (as the 8.1 server sends it) fails too.
        assert!(matches!(
            single(0, 20, 0),
            Err(StreamError::ResultCode {
                code: 20,
                last: false,
                ..
            })
        ));
    }

    #[test]
    fn malformed_streams_are_refused_without_allocating_by_declared_sizes() {
        let mut good = sample_stream();
        // Bytes after LAST.
        good.push(0);
        assert_eq!(
            StreamParser::default().feed(&good),
            Err(StreamError::Malformed("bytes after the LAST message"))
        );
        let refused = |bytes: &[u8]| StreamParser::default().feed(bytes).unwrap_err();
        // A proto declaring 2^48 - 1 bytes.
        assert!(matches!(
            refused(&[2, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            StreamError::Malformed(_)
        ));
        // Wrong version, info proto, compressed proto.
        assert!(matches!(
            refused(&[1, 3, 0, 0, 0, 0, 0, 22]),
            StreamError::Malformed(_)
        ));
        assert!(matches!(
            refused(&[2, 1, 0, 0, 0, 0, 0, 22]),
            StreamError::Malformed(_)
        ));
        assert!(matches!(
            refused(&[2, 4, 0, 0, 0, 0, 0, 22]),
            StreamError::Malformed(_)
        ));
        // A proto too short for a message header.
        assert!(matches!(
            refused(&[2, 3, 0, 0, 0, 0, 0, 5]),
            StreamError::Malformed(_)
        ));
        // A message header that does not say 22.
        let mut bad_header = vec![2, 3, 0, 0, 0, 0, 0, 22, 21];
        bad_header.extend_from_slice(&[0; 21]);
        assert!(matches!(refused(&bad_header), StreamError::Malformed(_)));
        // A field that declares 4 GiB inside a small proto.
        let mut out = Vec::new();
        let start = begin_proto(&mut out);
        let message = begin_message(&mut out);
        write_field(&mut out, field_type::NAMESPACE, b"test");
        finish_message(
            &mut out,
            message,
            &MessageHeader {
                field_count: 1,
                ..MessageHeader::default()
            },
        );
        finish_proto(&mut out, start, ProtoType::Message);
        let size_at = PROTO_HEADER_SIZE_BYTES + MESSAGE_HEADER_SIZE_BYTES;
        out[size_at..size_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            refused(&out),
            StreamError::Malformed("a field or op runs past its proto")
        );
        // A message whose counts claim more items than its proto holds.
        let mut out = Vec::new();
        let start = begin_proto(&mut out);
        record(&mut out, 1);
        finish_proto(&mut out, start, ProtoType::Message);
        out[PROTO_HEADER_SIZE_BYTES + 21] = 2; // op count 1 -> 2
        assert_eq!(
            refused(&out),
            StreamError::Malformed("a message runs past its proto")
        );
    }
}

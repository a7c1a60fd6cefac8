//! Secondary-index queries: the request as the official clients send it (every partition in
//! PID_ARRAY, so Osprey walks the index in its order), and the reply stream of record,
//! partition-done and LAST messages.

use std::io::Write;

use model::{Digest, PARTITION_COUNT};
use wire_aerospike::{
    Fields, MESSAGE_HEADER_SIZE_BYTES, MessageHeader, OpIter, ProtoType, encode_message,
    field_type, info1, info3,
};

use crate::{Client, ClientError, Record, Value};

/// The values a query wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryRange {
    /// Integers `begin..=end`.
    Int {
        /// Smallest value wanted.
        begin: i64,
        /// Largest value wanted.
        end: i64,
    },
    /// Strings from `begin` (inclusive) to `end` (inclusive; `None` = no upper bound).
    /// `begin == end` is an equality, which Aerospike also serves. An open range from `""`
    /// starts at `"\0"`: it does not return the empty string itself.
    Str {
        /// Smallest value wanted.
        begin: String,
        /// Largest value wanted, if any.
        end: Option<String>,
    },
}

impl From<&str> for QueryRange {
    /// Every string from `start` on.
    fn from(start: &str) -> QueryRange {
        QueryRange::Str {
            begin: start.to_owned(),
            end: None,
        }
    }
}

impl QueryRange {
    /// The INDEX_RANGE field: one filter on `bin`.
    fn encode(&self, bin: &str, out: &mut Vec<u8>) {
        out.push(1);
        out.push(u8::try_from(bin.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(&bin.as_bytes()[..bin.len().min(usize::from(u8::MAX))]);
        let (particle_type, begin, end) = match self {
            QueryRange::Int { begin, end } => {
                (1, begin.to_be_bytes().to_vec(), end.to_be_bytes().to_vec())
            }
            // An empty end after a non-empty begin is Osprey's "no upper bound" (an empty
            // begin and end is an equality with ""), so an open range from "" starts at "\0".
            QueryRange::Str { begin, end: None } if begin.is_empty() => (3, vec![0], Vec::new()),
            QueryRange::Str { begin, end } => (
                3,
                begin.as_bytes().to_vec(),
                end.as_ref()
                    .map_or_else(Vec::new, |end| end.as_bytes().to_vec()),
            ),
        };
        out.push(particle_type);
        for value in [begin, end] {
            let length = u32::try_from(value.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&length.to_be_bytes());
            out.extend_from_slice(&value);
        }
    }
}

/// A query of one index.
#[derive(Clone, Debug)]
pub struct Query<'a> {
    /// Namespace.
    pub namespace: &'a str,
    /// Set; empty queries an index on the whole namespace.
    pub set: &'a str,
    /// The index, by name (needed for a user-key index, which has no bin).
    pub index_name: Option<&'a str>,
    /// The indexed bin (empty when `index_name` names the index).
    pub bin: &'a str,
    /// The values wanted.
    pub range: QueryRange,
    /// At most this many records, the smallest values first (0: all).
    pub max_records: u64,
    /// Only digests and keys, no bins.
    pub no_bins: bool,
    /// A short query (Aerospike's `QueryDuration::SHORT`): few records expected, so the
    /// server answers it on the connection's own thread when it can.
    pub short: bool,
}

impl<'a> Query<'a> {
    /// A query of the index on `bin` in `set` for `range`: every record, with its bins.
    pub fn new(namespace: &'a str, set: &'a str, bin: &'a str, range: QueryRange) -> Query<'a> {
        Query {
            namespace,
            set,
            index_name: None,
            bin,
            range,
            max_records: 0,
            no_bins: false,
            short: false,
        }
    }

    fn encode(&self, task_id: u64, out: &mut Vec<u8>) {
        let partitions: Vec<u8> = (0..u16::try_from(PARTITION_COUNT).unwrap_or(u16::MAX))
            .flat_map(u16::to_le_bytes)
            .collect();
        let mut range = Vec::new();
        self.range.encode(self.bin, &mut range);
        let task = task_id.to_be_bytes();
        let max_records = self.max_records.to_be_bytes();
        let mut fields: Vec<(u8, &[u8])> = vec![
            (field_type::NAMESPACE, self.namespace.as_bytes()),
            (field_type::TRID, &task),
            (field_type::PID_ARRAY, &partitions),
            (field_type::INDEX_RANGE, &range),
        ];
        if !self.set.is_empty() {
            fields.push((field_type::SET, self.set.as_bytes()));
        }
        if let Some(name) = self.index_name {
            fields.push((field_type::INDEX_NAME, name.as_bytes()));
        }
        if self.max_records > 0 {
            fields.push((field_type::MAX_RECORDS, &max_records));
        }
        let mut read = info1::READ;
        if self.no_bins {
            read |= info1::GET_NO_BINS;
        }
        if self.short {
            read |= info1::SHORT_QUERY;
        }
        let header = MessageHeader {
            info1: read,
            info3: info3::PARTITION_DONE,
            ..MessageHeader::default()
        };
        encode_message(out, &header, &fields, &[]);
    }
}

impl Client {
    /// Runs `query`; returns its records in the order the server sent them: index order
    /// (value, then digest) for every query this client sends.
    ///
    /// # Errors
    /// [`ClientError::ResultCode`] when the server refuses the query (201: no such index, 203:
    /// still building, 4: a malformed range); other [`ClientError`]s on a failed connection or
    /// a malformed reply.
    pub fn query(&mut self, query: &Query<'_>) -> Result<Vec<Record>, ClientError> {
        self.buffer.clear();
        query.encode(self.next_task_id(), &mut self.buffer);
        self.stream.get_mut().write_all(&self.buffer)?;
        let mut records = Vec::new();
        loop {
            let body = self.read_proto(ProtoType::Message)?;
            for message in Messages::new(&body) {
                let message = message?;
                if message.result_code != 0 {
                    return Err(ClientError::ResultCode(message.result_code));
                }
                if message.info3 & info3::LAST != 0 {
                    return Ok(records);
                }
                if message.info3 & info3::PARTITION_DONE == 0 {
                    records.push(message.record);
                }
            }
        }
    }

    fn next_task_id(&mut self) -> u64 {
        self.task_ids = self.task_ids.wrapping_add(1);
        self.task_ids
    }
}

/// One message of a reply.
#[derive(Debug)]
pub(crate) struct ReplyMessage {
    pub result_code: u8,
    pub info3: u8,
    pub record: Record,
}

/// The messages of one proto body, back to back.
pub(crate) struct Messages<'a> {
    rest: &'a [u8],
}

impl<'a> Messages<'a> {
    pub fn new(body: &'a [u8]) -> Messages<'a> {
        Messages { rest: body }
    }

    fn parse_one(&mut self) -> Result<ReplyMessage, ClientError> {
        let malformed = ClientError::Malformed;
        let (header, rest) = self
            .rest
            .split_first_chunk::<MESSAGE_HEADER_SIZE_BYTES>()
            .ok_or(malformed("message shorter than its header"))?;
        let header = MessageHeader::decode(header);
        let (fields, rest) =
            Fields::parse(rest, header.field_count).map_err(|_| malformed("bad fields"))?;
        let (ops, rest) = OpIter::parse(rest, header.op_count).map_err(|_| malformed("bad ops"))?;
        self.rest = rest;
        let key = fields.key.and_then(|key| {
            let (&particle_type, bytes) = key.split_first()?;
            Some(Value::from_wire(particle_type, bytes))
        });
        let bins = ops
            .map(|op| {
                let name = String::from_utf8_lossy(op.bin_name).into_owned();
                (name, Value::from_wire(op.particle_type, op.value))
            })
            .collect();
        Ok(ReplyMessage {
            result_code: header.result_code,
            info3: header.info3,
            record: Record {
                digest: fields.digest.and_then(Digest::from_slice),
                key,
                generation: header.generation,
                bins,
            },
        })
    }
}

impl Iterator for Messages<'_> {
    type Item = Result<ReplyMessage, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let parsed = self.parse_one();
        if parsed.is_err() {
            self.rest = &[];
        }
        Some(parsed)
    }
}

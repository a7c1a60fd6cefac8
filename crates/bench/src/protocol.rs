//! The two wire protocols the tool speaks: encoding an [`Op`] as a request and classifying the
//! reply as an [`Outcome`].
//!
//! The same op maps to each protocol like this (documented in `docs/benchmarks.md`):
//!
//! | op | Aerospike | Redis, one bin | Redis, several bins |
//! |---|---|---|---|
//! | read | read all bins | `GET key` | `HGETALL key` |
//! | write | write all bins (update, or replace for `RR`) | `SET key value` | `HSET key bin value ...` |
//! | delete | delete | `DEL key` | `DEL key` |
//!
//! Aerospike keys are integer user keys in the namespace and set; Redis keys are the key's
//! number in decimal. Integer bins hold the key's number.

use std::fmt;

use model::{Digest, ParticleType, PartitionId, UserKey};
use wire_aerospike::{
    MessageHeader, PROTO_BODY_SIZE_BYTES_MAX, ProtoType, begin_response, decode_frame, field_type,
    finish_response, info1, info2, info3, write_field, write_op,
};
use wire_resp::Reply;

use crate::source::{Op, OpKind, ValuePool};
use crate::spec::{BinSpec, ObjectSpec};

/// Which protocol to speak (`--protocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The Aerospike wire protocol (Osprey's port 3000).
    Aerospike,
    /// RESP (any Redis server, or Osprey's RESP port).
    Redis,
}

impl Protocol {
    /// The port a server of this protocol listens on by default.
    pub fn default_port(self) -> u16 {
        match self {
            Protocol::Aerospike => 3000,
            Protocol::Redis => 6379,
        }
    }
}

/// Why a command failed, as counted in the "errors by result code" columns.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorLabel {
    /// An Aerospike result code other than OK (and other than NOT_FOUND for reads and deletes).
    ResultCode(u8),
    /// A Redis error reply, by its first word (`ERR`, `WRONGTYPE`, `OOM`, ...).
    Redis(String),
    /// The connection failed or the server sent bytes that are not a reply.
    Connection,
    /// Not sent: no node of the partition map claims the key's partition as master.
    NoMaster,
}

impl fmt::Display for ErrorLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorLabel::ResultCode(code) => match result_code_name(*code) {
                Some(name) => write!(f, "{code} {name}"),
                None => write!(f, "{code}"),
            },
            ErrorLabel::Redis(word) => f.write_str(word),
            ErrorLabel::Connection => f.write_str("connection"),
            ErrorLabel::NoMaster => f.write_str("no master"),
        }
    }
}

/// Aerospike's names for the result codes a single-record command can get.
fn result_code_name(code: u8) -> Option<&'static str> {
    Some(match code {
        1 => "SERVER_ERROR",
        2 => "KEY_NOT_FOUND",
        3 => "GENERATION_ERROR",
        4 => "PARAMETER_ERROR",
        5 => "KEY_EXISTS",
        8 => "OUT_OF_SPACE",
        9 => "TIMEOUT",
        11 => "PARTITION_UNAVAILABLE",
        12 => "BIN_TYPE_ERROR",
        13 => "RECORD_TOO_BIG",
        14 => "KEY_BUSY",
        16 => "UNSUPPORTED_FEATURE",
        18 => "DEVICE_OVERLOAD",
        19 => "KEY_MISMATCH",
        20 => "NAMESPACE_NOT_FOUND",
        21 => "BIN_NAME_TOO_LONG",
        22 => "FORBIDDEN",
        _ => return None,
    })
}

/// What came back for one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done as asked.
    Ok,
    /// A read or delete of a key that does not exist: a valid answer, counted apart.
    NotFound,
    /// Failed.
    Error(ErrorLabel),
}

/// An op with what routes it: under Aerospike its key's digest, computed once for both the
/// partition (which picks the node) and the request; under RESP nothing, since any node
/// serves any key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyedOp {
    op: Op,
    digest: Option<Digest>,
}

impl KeyedOp {
    /// The partition of the key (Aerospike); `None` under RESP.
    pub fn partition(&self) -> Option<PartitionId> {
        self.digest.as_ref().map(Digest::partition_id)
    }
}

/// Encodes ops into request bytes for one connection.
#[derive(Debug)]
pub struct Encoder {
    protocol: Protocol,
    namespace: Vec<u8>,
    set: Vec<u8>,
    bins: Vec<(Vec<u8>, BinSpec)>,
    timeout_ms: u32,
    values: ValuePool,
}

impl Encoder {
    /// An encoder for `namespace`/`set` (Aerospike only) writing the bins of `object`.
    pub fn new(
        protocol: Protocol,
        namespace: &str,
        set: &str,
        object: &ObjectSpec,
        timeout_ms: u32,
        seed: u64,
    ) -> Encoder {
        let bins = object
            .bins
            .iter()
            .enumerate()
            .map(|(index, bin)| (ObjectSpec::bin_name(index).into_bytes(), *bin))
            .collect();
        Encoder {
            protocol,
            namespace: namespace.as_bytes().to_vec(),
            set: set.as_bytes().to_vec(),
            bins,
            timeout_ms,
            values: ValuePool::new(seed),
        }
    }

    /// `op` with its key's digest under Aerospike.
    pub fn key(&self, op: Op) -> KeyedOp {
        let digest = match self.protocol {
            Protocol::Aerospike => Some(self.digest(&op)),
            Protocol::Redis => None,
        };
        KeyedOp { op, digest }
    }

    /// Appends the request for `keyed` (from [`Encoder::key`]) to `out`.
    pub fn encode(&mut self, keyed: &KeyedOp, out: &mut Vec<u8>) {
        match self.protocol {
            Protocol::Aerospike => {
                let digest = keyed.digest.unwrap_or_else(|| self.digest(&keyed.op));
                self.encode_aerospike(&keyed.op, &digest, out);
            }
            Protocol::Redis => self.encode_redis(&keyed.op, out),
        }
    }

    /// The digest of the op's integer user key in this encoder's set.
    fn digest(&self, op: &Op) -> Digest {
        let key = i64::try_from(op.key).unwrap_or(i64::MAX);
        Digest::compute(&self.set, &UserKey::Integer(key))
    }

    fn encode_aerospike(&mut self, op: &Op, digest: &Digest, out: &mut Vec<u8>) {
        let key = i64::try_from(op.key).unwrap_or(i64::MAX);
        let mut header = MessageHeader {
            transaction_ttl: self.timeout_ms,
            field_count: 3,
            ..MessageHeader::default()
        };
        let start = begin_response(out);
        write_field(out, field_type::NAMESPACE, &self.namespace);
        write_field(out, field_type::SET, &self.set);
        write_field(out, field_type::DIGEST, &digest.0);
        match op.kind {
            OpKind::Read => header.info1 = info1::READ | info1::GET_ALL,
            OpKind::Delete => header.info2 = info2::WRITE | info2::DELETE,
            OpKind::Write => {
                header.info2 = info2::WRITE;
                if op.replace {
                    header.info3 = info3::CREATE_OR_REPLACE;
                }
                header.op_count = u16::try_from(self.bins.len()).unwrap_or(u16::MAX);
                for (name, bin) in &self.bins {
                    let (particle_type, value) = match bin {
                        BinSpec::Integer => (ParticleType::Integer, &key.to_be_bytes()[..]),
                        BinSpec::String(size) => (ParticleType::String, self.values.text(*size)),
                        BinSpec::Bytes(size) => (ParticleType::Blob, self.values.bytes(*size)),
                    };
                    let write = model::OpCode::Write as u8;
                    write_op(out, write, particle_type as u8, name, value);
                }
            }
        }
        finish_response(out, start, &header);
    }

    fn encode_redis(&mut self, op: &Op, out: &mut Vec<u8>) {
        let key = op.key.to_string();
        let key = key.as_bytes();
        let single_bin = self.bins.len() == 1;
        match (op.kind, single_bin) {
            (OpKind::Read, true) => wire_resp::encode_command(out, &[b"GET", key]),
            (OpKind::Read, false) => wire_resp::encode_command(out, &[b"HGETALL", key]),
            (OpKind::Delete, _) => wire_resp::encode_command(out, &[b"DEL", key]),
            (OpKind::Write, true) => {
                wire_resp::begin_command(out, 3);
                wire_resp::push_argument(out, b"SET");
                wire_resp::push_argument(out, key);
                self.push_value(out, 0, key);
            }
            (OpKind::Write, false) => {
                wire_resp::begin_command(out, 2 + 2 * self.bins.len());
                wire_resp::push_argument(out, b"HSET");
                wire_resp::push_argument(out, key);
                for index in 0..self.bins.len() {
                    wire_resp::push_argument(out, &self.bins[index].0);
                    self.push_value(out, index, key);
                }
            }
        }
    }

    /// Appends the value of bin `index` as a RESP argument: integers as the key's decimal text.
    fn push_value(&mut self, out: &mut Vec<u8>, index: usize, key: &[u8]) {
        let value = match self.bins[index].1 {
            BinSpec::Integer => key,
            BinSpec::String(size) => self.values.text(size),
            BinSpec::Bytes(size) => self.values.bytes(size),
        };
        wire_resp::push_argument(out, value);
    }
}

/// Decodes the reply to an op of `kind` at the start of `buf`: `Ok(None)` when more bytes are
/// needed, else the outcome and how many bytes the reply spans.
///
/// # Errors
///
/// A message when the bytes cannot be a reply of this protocol (the connection is dropped).
pub fn decode_reply(
    protocol: Protocol,
    kind: OpKind,
    buf: &[u8],
) -> Result<Option<(Outcome, usize)>, String> {
    match protocol {
        Protocol::Aerospike => decode_aerospike(kind, buf),
        Protocol::Redis => decode_redis(kind, buf),
    }
}

fn decode_aerospike(kind: OpKind, buf: &[u8]) -> Result<Option<(Outcome, usize)>, String> {
    let frame = match decode_frame(buf, PROTO_BODY_SIZE_BYTES_MAX) {
        Ok(Some(frame)) => frame,
        Ok(None) => return Ok(None),
        Err(malformed) => return Err(malformed.to_string()),
    };
    if frame.proto_type != ProtoType::Message {
        return Err(format!("reply has proto type {:?}", frame.proto_type));
    }
    let message = wire_aerospike::Message::parse(frame.body).map_err(|error| error.to_string())?;
    let outcome = match (message.header.result_code, kind) {
        (0, _) => Outcome::Ok,
        (2, OpKind::Read | OpKind::Delete) => Outcome::NotFound,
        (code, _) => Outcome::Error(ErrorLabel::ResultCode(code)),
    };
    Ok(Some((outcome, frame.size_bytes())))
}

fn decode_redis(kind: OpKind, buf: &[u8]) -> Result<Option<(Outcome, usize)>, String> {
    let (reply, size) = match wire_resp::decode_reply(buf) {
        Ok(Some(decoded)) => decoded,
        Ok(None) => return Ok(None),
        Err(malformed) => return Err(malformed.to_string()),
    };
    let outcome = match (reply, kind) {
        (Reply::Error(message), _) => {
            let word = message
                .split(|byte| *byte == b' ')
                .next()
                .unwrap_or_default();
            Outcome::Error(ErrorLabel::Redis(
                String::from_utf8_lossy(word).into_owned(),
            ))
        }
        (Reply::Null, OpKind::Read) => Outcome::NotFound,
        (
            Reply::Aggregate {
                element_count: 0, ..
            },
            OpKind::Read,
        ) => Outcome::NotFound,
        (Reply::Integer(0), OpKind::Delete) => Outcome::NotFound,
        _ => Outcome::Ok,
    };
    Ok(Some((outcome, size)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoder(protocol: Protocol, spec: &str) -> Encoder {
        Encoder::new(protocol, "test", "demo", &spec.parse().unwrap(), 250, 1)
    }

    fn redis_encode(spec: &str, op: Op, out: &mut Vec<u8>) {
        let mut encoder = encoder(Protocol::Redis, spec);
        let keyed = encoder.key(op);
        assert_eq!(keyed.partition(), None, "any node serves any key over RESP");
        encoder.encode(&keyed, out);
    }

    fn op(kind: OpKind, key: u64) -> Op {
        Op {
            kind,
            key,
            replace: false,
        }
    }

    #[test]
    fn aerospike_write_carries_namespace_set_digest_and_every_bin() {
        let mut out = Vec::new();
        let mut encoder = encoder(Protocol::Aerospike, "I,S:10");
        let keyed = encoder.key(Op {
            replace: true,
            ..op(OpKind::Write, 1)
        });
        encoder.encode(&keyed, &mut out);
        let frame = decode_frame(&out, PROTO_BODY_SIZE_BYTES_MAX)
            .unwrap()
            .unwrap();
        assert_eq!(frame.size_bytes(), out.len());
        let message = wire_aerospike::Message::parse(frame.body).unwrap();
        assert_eq!(message.header.info2, info2::WRITE);
        assert_eq!(message.header.info3, info3::CREATE_OR_REPLACE);
        assert_eq!(message.header.transaction_ttl, 250);
        assert_eq!(message.fields.namespace, Some(&b"test"[..]));
        // The digest test vector shared by the Go and Python clients: set demo, integer key 1.
        let digest = message.fields.digest.unwrap();
        assert_eq!(
            digest
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
            "b7f4b83889e2da67de683e1df6919a1eacc446c8"
        );
        let ops: Vec<_> = message.ops().collect();
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0].bin_name, b"testbin");
        assert_eq!(ops[0].value, 1i64.to_be_bytes());
        assert_eq!(ops[1].bin_name, b"testbin_2");
        assert_eq!(ops[1].value.len(), 10);
    }

    #[test]
    fn aerospike_read_and_delete_set_their_flags() {
        let mut encoder = encoder(Protocol::Aerospike, "I");
        for (kind, info1_bits, info2_bits) in [
            (OpKind::Read, info1::READ | info1::GET_ALL, 0),
            (OpKind::Delete, 0, info2::WRITE | info2::DELETE),
        ] {
            let mut out = Vec::new();
            encoder.encode(&encoder.key(op(kind, 9)), &mut out);
            let frame = decode_frame(&out, PROTO_BODY_SIZE_BYTES_MAX)
                .unwrap()
                .unwrap();
            let message = wire_aerospike::Message::parse(frame.body).unwrap();
            assert_eq!(
                (message.header.info1, message.header.info2),
                (info1_bits, info2_bits)
            );
            assert_eq!(message.ops().len(), 0);
        }
    }

    #[test]
    fn aerospike_replies_classify_by_result_code_and_kind() {
        let reply = |code: u8| {
            let mut out = Vec::new();
            let header = MessageHeader {
                result_code: code,
                ..MessageHeader::default()
            };
            let start = begin_response(&mut out);
            finish_response(&mut out, start, &header);
            out
        };
        let decode = |kind, bytes: &[u8]| decode_reply(Protocol::Aerospike, kind, bytes);
        let ok = reply(0);
        assert_eq!(decode(OpKind::Read, &ok), Ok(Some((Outcome::Ok, ok.len()))));
        assert_eq!(decode(OpKind::Read, &ok[..ok.len() - 1]), Ok(None));
        let missing = reply(2);
        assert_eq!(
            decode(OpKind::Delete, &missing).unwrap().unwrap().0,
            Outcome::NotFound
        );
        let write_missing = decode(OpKind::Write, &missing).unwrap().unwrap().0;
        assert_eq!(write_missing, Outcome::Error(ErrorLabel::ResultCode(2)));
        let busy = decode(OpKind::Write, &reply(14)).unwrap().unwrap().0;
        assert_eq!(busy.clone(), Outcome::Error(ErrorLabel::ResultCode(14)));
        assert_eq!(ErrorLabel::ResultCode(14).to_string(), "14 KEY_BUSY");
        assert!(decode(OpKind::Read, b"\x09\x03\0\0\0\0\0\0").is_err());
    }

    #[test]
    fn redis_commands_follow_the_bin_layout() {
        let mut out = Vec::new();
        redis_encode("S:3", op(OpKind::Write, 42), &mut out);
        assert!(out.starts_with(b"*3\r\n$3\r\nSET\r\n$2\r\n42\r\n$3\r\n"));
        out.clear();
        redis_encode("I,I", op(OpKind::Write, 7), &mut out);
        let expected = b"*6\r\n$4\r\nHSET\r\n$1\r\n7\r\n$7\r\ntestbin\r\n$1\r\n7\r\n$9\r\ntestbin_2\r\n$1\r\n7\r\n";
        assert_eq!(out, expected);
        out.clear();
        redis_encode("I,I", op(OpKind::Read, 7), &mut out);
        assert_eq!(out, b"*2\r\n$7\r\nHGETALL\r\n$1\r\n7\r\n");
        out.clear();
        redis_encode("I", op(OpKind::Delete, 7), &mut out);
        assert_eq!(out, b"*2\r\n$3\r\nDEL\r\n$1\r\n7\r\n");
    }

    #[test]
    fn redis_replies_classify_null_empty_and_errors() {
        let decode = |kind, bytes: &[u8]| {
            decode_reply(Protocol::Redis, kind, bytes)
                .unwrap()
                .unwrap()
                .0
        };
        assert_eq!(decode(OpKind::Read, b"$-1\r\n"), Outcome::NotFound);
        assert_eq!(decode(OpKind::Read, b"*0\r\n"), Outcome::NotFound);
        assert_eq!(decode(OpKind::Read, b"%0\r\n"), Outcome::NotFound);
        assert_eq!(decode(OpKind::Read, b"$1\r\nx\r\n"), Outcome::Ok);
        assert_eq!(decode(OpKind::Write, b"+OK\r\n"), Outcome::Ok);
        assert_eq!(decode(OpKind::Delete, b":0\r\n"), Outcome::NotFound);
        assert_eq!(decode(OpKind::Delete, b":1\r\n"), Outcome::Ok);
        let wrongtype = decode(OpKind::Read, b"-WRONGTYPE Operation against a key\r\n");
        assert_eq!(
            wrongtype,
            Outcome::Error(ErrorLabel::Redis("WRONGTYPE".into()))
        );
    }
}

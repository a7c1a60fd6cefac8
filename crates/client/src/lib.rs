//! A small blocking client for Osprey's Aerospike protocol, on one connection to one node:
//! info commands, puts and gets by key, and secondary-index queries with what Osprey adds to
//! Aerospike's: ranges on strings (closed or open-ended), results in index order with a limit,
//! and user-key indexes that read a set in key order from any start key. [`ClusterMap`] learns
//! a cluster's partition map from seed nodes, as Aerospike's smart clients do, and says which
//! node masters each partition.
//!
//! Layer: client (above the codecs; no engine). Used by `osprey-bench` and its tests.
//!
//! ```no_run
//! use client::{Client, Query, QueryRange, Value};
//! let mut client = Client::connect("127.0.0.1:3000")?;
//! client.info("sindex-create:namespace=test;set=users;indexname=by_key;source=key;type=string")?;
//! client.put("test", "users", &Value::from("user:7"), &[("age", Value::Int(41))])?;
//! // Ten records in key order from "user:5" on (once the index is built).
//! let first_ten = client.query(&Query {
//!     index_name: Some("by_key"),
//!     max_records: 10,
//!     ..Query::new("test", "users", "", QueryRange::from("user:5"))
//! })?;
//! # Ok::<(), client::ClientError>(())
//! ```
//!
//! Invariants:
//! - A reply is taken only as far as its declared sizes, each checked against
//!   [`PROTO_BODY_SIZE_BYTES_MAX`] before a buffer grows to hold it (bytes read ahead of it
//!   stay in the connection's read buffer for the next reply).
//! - Every call sends one request and reads its whole reply (through the LAST message for a
//!   query), so the connection is always between requests when a call returns `Ok`; after an
//!   error the connection should be dropped.

mod cluster;
mod query;

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use model::{Digest, Op, OpCode, UserKey};
use wire_aerospike::{
    MESSAGE_HEADER_SIZE_BYTES, MessageHeader, PROTO_BODY_SIZE_BYTES_MAX, PROTO_HEADER_SIZE_BYTES,
    ProtoType, encode_info_request, encode_message, field_type, info1, info2,
};

pub use cluster::{ClusterError, ClusterMap, Node, NodeFailure};
pub use query::{Query, QueryRange};

/// Size of a connection's read buffer, and the most a reply's body reserves before its bytes
/// arrive.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection failed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The server answered with a result code other than OK (Aerospike's numbering).
    #[error("server answered result code {0}")]
    ResultCode(u8),
    /// The server's bytes are not a valid reply.
    #[error("malformed reply: {0}")]
    Malformed(&'static str),
}

/// A bin value, or a user key (integers, strings and blobs only).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A 64-bit integer (particle 1).
    Int(i64),
    /// A double (particle 2).
    Float(f64),
    /// A UTF-8 string (particle 3).
    Str(String),
    /// Bytes (particle 4).
    Blob(Vec<u8>),
    /// Any other particle, as its type and wire bytes (lists and maps are msgpack).
    Other(u8, Vec<u8>),
}

impl From<&str> for Value {
    fn from(text: &str) -> Value {
        Value::Str(text.to_owned())
    }
}

impl Value {
    fn from_wire(particle_type: u8, bytes: &[u8]) -> Value {
        let be8 = <[u8; 8]>::try_from(bytes);
        match (particle_type, be8) {
            (1, Ok(be)) => Value::Int(i64::from_be_bytes(be)),
            (2, Ok(be)) => Value::Float(f64::from_be_bytes(be)),
            (3, _) => match std::str::from_utf8(bytes) {
                Ok(text) => Value::Str(text.to_owned()),
                Err(_) => Value::Blob(bytes.to_vec()),
            },
            (4, _) => Value::Blob(bytes.to_vec()),
            _ => Value::Other(particle_type, bytes.to_vec()),
        }
    }

    /// Particle type and wire bytes.
    fn to_wire(&self) -> (u8, Vec<u8>) {
        match self {
            Value::Int(value) => (1, value.to_be_bytes().to_vec()),
            Value::Float(value) => (2, value.to_be_bytes().to_vec()),
            Value::Str(text) => (3, text.as_bytes().to_vec()),
            Value::Blob(bytes) => (4, bytes.clone()),
            Value::Other(particle_type, bytes) => (*particle_type, bytes.clone()),
        }
    }

    /// The key this value names, if it can be one.
    fn user_key(&self) -> Option<UserKey<'_>> {
        match self {
            Value::Int(value) => Some(UserKey::Integer(*value)),
            Value::Str(text) => Some(UserKey::String(text.as_bytes())),
            Value::Blob(bytes) => Some(UserKey::Blob(bytes)),
            Value::Float(_) | Value::Other(..) => None,
        }
    }
}

/// A record as the server returned it.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Its digest.
    pub digest: Option<Digest>,
    /// Its user key, when the reply carries it: query results carry stored keys (puts
    /// through this client store them); a get's reply, as Aerospike's, does not.
    pub key: Option<Value>,
    /// Its generation.
    pub generation: u32,
    /// Its bins, in the order sent.
    pub bins: Vec<(String, Value)>,
}

/// One connection to one node.
#[derive(Debug)]
pub struct Client {
    /// Replies are read through a buffer: one receive serves a whole reply of several records
    /// (reading the socket directly took one receive per few hundred bytes, about 11 per
    /// 10-record query). Requests are written to the socket itself (`get_mut`).
    stream: BufReader<TcpStream>,
    /// Request being built.
    buffer: Vec<u8>,
    /// The last query's task id (TRID).
    task_ids: u64,
}

impl Client {
    /// Connects to `address` (`host:port`).
    ///
    /// # Errors
    /// [`ClientError::Io`] when the connection fails.
    pub fn connect(address: impl ToSocketAddrs) -> Result<Client, ClientError> {
        let stream = TcpStream::connect(address)?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream: BufReader::with_capacity(READ_BUFFER_BYTES, stream),
            buffer: Vec::new(),
            task_ids: 0,
        })
    }

    /// Connects to `address`, giving up after `timeout`; later reads and writes also fail
    /// after `timeout` without progress (so that a silent node cannot hang the caller).
    ///
    /// # Errors
    /// [`ClientError::Io`] when the connection fails or times out.
    pub fn connect_timeout(address: &SocketAddr, timeout: Duration) -> Result<Client, ClientError> {
        let stream = TcpStream::connect_timeout(address, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream: BufReader::with_capacity(READ_BUFFER_BYTES, stream),
            buffer: Vec::new(),
            task_ids: 0,
        })
    }

    /// Sends several info commands in one request, so that their values describe one moment
    /// of the node; returns the values in the order of `commands`.
    ///
    /// # Errors
    /// [`ClientError`] on a failed connection or a malformed reply, including a reply that
    /// lacks the line of one of the commands.
    pub fn info_values(&mut self, commands: &[&str]) -> Result<Vec<String>, ClientError> {
        self.buffer.clear();
        encode_info_request(&mut self.buffer, commands);
        self.stream.get_mut().write_all(&self.buffer)?;
        let body = self.read_proto(ProtoType::Info)?;
        let text = String::from_utf8_lossy(&body);
        let lines: Vec<(&str, &str)> = text
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .collect();
        commands
            .iter()
            .map(|command| {
                lines
                    .iter()
                    .find(|(name, _)| name == command)
                    .map(|(_, value)| (*value).to_owned())
                    .ok_or(ClientError::Malformed(
                        "an info reply without a requested line",
                    ))
            })
            .collect()
    }

    /// Sends one info command; returns its value (the text after the tab).
    ///
    /// # Errors
    /// [`ClientError`] on a failed connection or a malformed reply.
    pub fn info(&mut self, command: &str) -> Result<String, ClientError> {
        self.buffer.clear();
        encode_info_request(&mut self.buffer, &[command]);
        self.stream.get_mut().write_all(&self.buffer)?;
        let body = self.read_proto(ProtoType::Info)?;
        let text = String::from_utf8_lossy(&body);
        let line = text.lines().next().unwrap_or_default();
        let value = line.split_once('\t').map_or("", |(_, value)| value);
        Ok(value.to_owned())
    }

    /// Writes `bins` into the record `key` of `namespace` and `set` (creating it), storing
    /// the key with the record.
    ///
    /// # Errors
    /// [`ClientError::ResultCode`] when the server refuses the write.
    pub fn put(
        &mut self,
        namespace: &str,
        set: &str,
        key: &Value,
        bins: &[(&str, Value)],
    ) -> Result<(), ClientError> {
        let wire: Vec<(u8, Vec<u8>)> = bins.iter().map(|(_, value)| value.to_wire()).collect();
        let ops: Vec<Op<'_>> = bins
            .iter()
            .zip(&wire)
            .map(|((name, _), (particle_type, bytes))| Op {
                code: OpCode::Write,
                particle_type: *particle_type,
                bin_name: name.as_bytes(),
                value: bytes,
            })
            .collect();
        let header = MessageHeader {
            info2: info2::WRITE,
            ..MessageHeader::default()
        };
        self.single_record(namespace, set, key, &header, &ops)?;
        Ok(())
    }

    /// Reads every bin of the record `key`; `None` when there is none.
    ///
    /// # Errors
    /// [`ClientError`] on a failed connection, a malformed reply or a result code other than
    /// OK and KEY_NOT_FOUND.
    pub fn get(
        &mut self,
        namespace: &str,
        set: &str,
        key: &Value,
    ) -> Result<Option<Record>, ClientError> {
        let header = MessageHeader {
            info1: info1::READ | info1::GET_ALL,
            ..MessageHeader::default()
        };
        match self.single_record(namespace, set, key, &header, &[]) {
            Ok(record) => Ok(Some(record)),
            Err(ClientError::ResultCode(2)) => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn single_record(
        &mut self,
        namespace: &str,
        set: &str,
        key: &Value,
        header: &MessageHeader,
        ops: &[Op<'_>],
    ) -> Result<Record, ClientError> {
        let user_key = key.user_key().ok_or(ClientError::Malformed(
            "a key is an integer, a string or bytes",
        ))?;
        let digest = Digest::compute(set.as_bytes(), &user_key);
        let (particle_type, key_bytes) = key.to_wire();
        let mut key_field = vec![particle_type];
        key_field.extend_from_slice(&key_bytes);
        let fields: [(u8, &[u8]); 4] = [
            (field_type::NAMESPACE, namespace.as_bytes()),
            (field_type::SET, set.as_bytes()),
            (field_type::KEY, &key_field),
            (field_type::DIGEST, &digest.0),
        ];
        self.buffer.clear();
        encode_message(&mut self.buffer, header, &fields, ops);
        self.stream.get_mut().write_all(&self.buffer)?;
        let body = self.read_proto(ProtoType::Message)?;
        let mut messages = query::Messages::new(&body);
        let message = messages
            .next()
            .ok_or(ClientError::Malformed("an empty reply"))??;
        if message.result_code != 0 {
            return Err(ClientError::ResultCode(message.result_code));
        }
        Ok(message.record)
    }

    /// Reads one proto of `expected` type; returns its body.
    fn read_proto(&mut self, expected: ProtoType) -> Result<Vec<u8>, ClientError> {
        let mut header = [0u8; PROTO_HEADER_SIZE_BYTES];
        self.stream.read_exact(&mut header)?;
        if header[1] != expected as u8 {
            return Err(ClientError::Malformed("unexpected proto type"));
        }
        let mut size = [0u8; 8];
        size[2..].copy_from_slice(&header[2..]);
        let size_bytes = u64::from_be_bytes(size);
        if size_bytes > PROTO_BODY_SIZE_BYTES_MAX {
            return Err(ClientError::Malformed(
                "proto larger than the protocol allows",
            ));
        }
        // Grows as bytes arrive: never sized by the declared length alone.
        let mut body = Vec::with_capacity(size_bytes.min(READ_BUFFER_BYTES as u64) as usize);
        (&mut self.stream).take(size_bytes).read_to_end(&mut body)?;
        if body.len() as u64 != size_bytes {
            return Err(ClientError::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        if expected == ProtoType::Message && body.len() < MESSAGE_HEADER_SIZE_BYTES {
            return Err(ClientError::Malformed("message shorter than its header"));
        }
        Ok(body)
    }
}

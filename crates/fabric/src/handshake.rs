//! The handshake that opens every connection: the dialer sends `Hello`, the acceptor answers
//! `HelloAck`, each naming its node id, cluster and addresses.
//!
//! Invariants:
//! - No other frame is queued on a stream before its handshake succeeded, and a `Hello`
//!   after it closes the connection (see `connection.rs`).
//! - The acceptor answers every `Hello`, even one it refuses (another cluster, its own node
//!   id), so that the dialer learns why and logs it; then it closes.
//! - A handshake has a deadline: the request timeout.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::time::timeout;
use wire_fabric::{Hello, List, Message, MessageType};

use crate::config::FabricConfig;
use crate::connection::{StreamReader, StreamWriter};
use crate::fabric::Shared;
use crate::frame::encode_with_request_id;
use crate::frame_reader::{FrameReader, ReadError};
use crate::network::BoxedStream;

/// This node's `Hello` and `HelloAck`, encoded once at start.
pub(crate) struct HelloFrames {
    hello: Bytes,
    hello_ack: Bytes,
}

impl HelloFrames {
    /// Encodes both frames from `config`, announcing `fabric_address`.
    pub(crate) fn new(config: &FabricConfig, fabric_address: &str) -> HelloFrames {
        let service_addresses: Vec<&str> = config
            .service_addresses
            .iter()
            .map(String::as_str)
            .collect();
        let resp_addresses: Vec<&str> = config.resp_addresses.iter().map(String::as_str).collect();
        let hello = Hello {
            node_id: config.node_id,
            cluster_name: &config.cluster_name,
            service_addresses: List::from_items(&service_addresses),
            resp_addresses: List::from_items(&resp_addresses),
            fabric_address,
        };
        HelloFrames {
            hello: encode_with_request_id(&Message::Hello(hello), 0),
            hello_ack: encode_with_request_id(&Message::HelloAck(hello), 0),
        }
    }
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeError {
    /// Dialing, reading or writing failed.
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    /// The peer sent no valid first frame.
    #[error("no valid first frame: {0:?}")]
    Read(ReadError),
    /// The first frame was not the expected `Hello` or `HelloAck`.
    #[error("first frame is {0:?}")]
    Unexpected(MessageType),
    /// The peer belongs to another cluster.
    #[error("peer belongs to cluster {cluster_name:?}")]
    OtherCluster {
        /// The peer's cluster.
        cluster_name: String,
    },
    /// The peer claims node id 0 or this node's own id.
    #[error("peer claims node id {node_id}")]
    BadNodeId {
        /// The id claimed.
        node_id: u64,
    },
    /// The handshake did not finish within the deadline.
    #[error("timed out after {timeout_ms} ms")]
    Timeout {
        /// The deadline.
        timeout_ms: u64,
    },
}

/// A stream whose handshake succeeded, and who is at the other end.
pub(crate) struct Handshaken {
    pub(crate) node_id: u64,
    /// Where the peer says its fabric listens.
    pub(crate) fabric_address: String,
    pub(crate) reader: StreamReader,
    pub(crate) writer: StreamWriter,
}

/// Dials `address` and handshakes as the dialer.
pub(crate) async fn dial(shared: &Shared, address: &str) -> Result<Handshaken, HandshakeError> {
    with_deadline(shared.config(), async {
        let stream = shared.network().dial(address).await?;
        let (mut reader, mut writer) = split(stream, shared.config());
        writer.write_all(&shared.hello_frames().hello).await?;
        writer.flush().await?;
        let first = reader.next_frame().await.map_err(HandshakeError::Read)?;
        expect_type(first.message_type(), MessageType::HelloAck)?;
        let (node_id, fabric_address) = check_hello(shared.config(), &first.message())?;
        Ok(Handshaken {
            node_id,
            fabric_address,
            reader,
            writer,
        })
    })
    .await
}

/// Handshakes on an accepted stream as the acceptor.
pub(crate) async fn accept(
    shared: &Shared,
    stream: BoxedStream,
) -> Result<Handshaken, HandshakeError> {
    with_deadline(shared.config(), async {
        let (mut reader, mut writer) = split(stream, shared.config());
        let first = reader.next_frame().await.map_err(HandshakeError::Read)?;
        expect_type(first.message_type(), MessageType::Hello)?;
        let checked = check_hello(shared.config(), &first.message());
        writer.write_all(&shared.hello_frames().hello_ack).await?;
        writer.flush().await?;
        let (node_id, fabric_address) = checked?;
        Ok(Handshaken {
            node_id,
            fabric_address,
            reader,
            writer,
        })
    })
    .await
}

async fn with_deadline(
    config: &FabricConfig,
    handshake: impl Future<Output = Result<Handshaken, HandshakeError>>,
) -> Result<Handshaken, HandshakeError> {
    let timeout_ms = config.request_timeout_ms;
    timeout(Duration::from_millis(timeout_ms), handshake)
        .await
        .unwrap_or(Err(HandshakeError::Timeout { timeout_ms }))
}

fn split(stream: BoxedStream, config: &FabricConfig) -> (StreamReader, StreamWriter) {
    let (read_half, write_half) = tokio::io::split(stream);
    let reader = FrameReader::new(read_half, config.frame_body_size_bytes_max);
    (reader, write_half)
}

fn expect_type(message_type: MessageType, expected: MessageType) -> Result<(), HandshakeError> {
    if message_type == expected {
        Ok(())
    } else {
        Err(HandshakeError::Unexpected(message_type))
    }
}

/// The peer's node id and fabric address, if it may join this node's fabric.
fn check_hello(
    config: &FabricConfig,
    message: &Message<'_>,
) -> Result<(u64, String), HandshakeError> {
    let (Message::Hello(hello) | Message::HelloAck(hello)) = message else {
        return Err(HandshakeError::Unexpected(message.message_type()));
    };
    if hello.cluster_name != config.cluster_name {
        return Err(HandshakeError::OtherCluster {
            cluster_name: hello.cluster_name.to_owned(),
        });
    }
    if hello.node_id == 0 || hello.node_id == config.node_id {
        return Err(HandshakeError::BadNodeId {
            node_id: hello.node_id,
        });
    }
    Ok((hello.node_id, hello.fabric_address.to_owned()))
}

//! Encoding a [`Message`] as one frame, one helper per message.
//!
//! Invariants:
//! - Fields are written in the order `decode.rs` reads them; each helper mirrors its reader.
//! - Encoding only appends to the output buffer and patches the header it wrote itself.

use crate::frame::{begin_frame, finish_frame};
use crate::limits::{ADDRESSES_PER_LIST_MAX, CLUSTER_NAME_BYTES_MAX, PEERS_PER_HEARTBEAT_MAX};
use crate::list::{ListItem, put_address};
use crate::writer::{
    put_blob, put_flag, put_name, put_namespace, put_partition, put_set_name, put_u8, put_u32,
    put_u64,
};
use crate::{Hello, Message};

/// Appends `message` to `out` as one frame: header, then body.
///
/// # Panics
///
/// If the message breaks a limit the decoder enforces (a namespace over 31 bytes, more than
/// 128 peers, a partition id of 4096 or more, ...), or its body is over `u32::MAX` bytes:
/// sending such a message is a programmer error.
pub fn encode(message: &Message<'_>, out: &mut Vec<u8>) {
    let frame_start = begin_frame(out, message.message_type());
    encode_body(message, out);
    finish_frame(out, frame_start);
}

fn encode_body(message: &Message<'_>, out: &mut Vec<u8>) {
    match *message {
        Message::Hello(ref hello) | Message::HelloAck(ref hello) => write_hello(hello, out),
        Message::Heartbeat {
            node_id,
            sent_at_ms,
            map_version,
            peer_node_ids,
        } => {
            put_u64(out, node_id);
            put_u64(out, sent_at_ms);
            put_u64(out, map_version);
            peer_node_ids.write(out, PEERS_PER_HEARTBEAT_MAX, "peer list");
        }
        Message::Raft {
            request_id,
            kind,
            payload,
        } => {
            put_u64(out, request_id);
            put_u8(out, kind as u8);
            put_blob(out, payload);
        }
        Message::RaftReply {
            request_id,
            payload,
        }
        | Message::ForwardReply {
            request_id,
            payload,
        } => {
            put_u64(out, request_id);
            put_blob(out, payload);
        }
        Message::Forward {
            request_id,
            protocol,
            time_left_ms,
            payload,
        } => {
            put_u64(out, request_id);
            put_u8(out, protocol as u8);
            put_u32(out, time_left_ms);
            put_blob(out, payload);
        }
        Message::ReplicaWrite { .. }
        | Message::ReplicaTruncate { .. }
        | Message::ReplicaAck { .. } => write_replica(message, out),
        Message::PartitionStreamRequest { .. } | Message::PartitionChunk { .. } => {
            write_partition_stream(message, out);
        }
    }
}

fn write_hello(hello: &Hello<'_>, out: &mut Vec<u8>) {
    put_u64(out, hello.node_id);
    let cluster_name = hello.cluster_name.as_bytes();
    put_name(out, cluster_name, CLUSTER_NAME_BYTES_MAX, "cluster name");
    let addresses_max = ADDRESSES_PER_LIST_MAX;
    hello
        .service_addresses
        .write(out, addresses_max, "service address list");
    hello
        .resp_addresses
        .write(out, addresses_max, "RESP address list");
    put_address(out, hello.fabric_address);
}

fn write_replica(message: &Message<'_>, out: &mut Vec<u8>) {
    match *message {
        Message::ReplicaWrite {
            request_id,
            namespace,
            partition,
            partition_version,
            sequence,
            record,
        } => {
            put_u64(out, request_id);
            put_namespace(out, namespace);
            put_partition(out, partition);
            put_u64(out, partition_version);
            put_u64(out, sequence);
            record.write(out);
        }
        Message::ReplicaTruncate {
            request_id,
            namespace,
            set_name,
            before_ms,
        } => {
            put_u64(out, request_id);
            put_namespace(out, namespace);
            put_set_name(out, set_name);
            put_u64(out, before_ms);
        }
        Message::ReplicaAck {
            request_id,
            result_code,
        } => {
            put_u64(out, request_id);
            put_u8(out, result_code);
        }
        _ => unreachable!("write_replica is called for replica messages only"),
    }
}

fn write_partition_stream(message: &Message<'_>, out: &mut Vec<u8>) {
    match *message {
        Message::PartitionStreamRequest {
            request_id,
            namespace,
            partition,
            after_digest,
            chunk_size_bytes_max,
        } => {
            put_u64(out, request_id);
            put_namespace(out, namespace);
            put_partition(out, partition);
            put_flag(out, after_digest.is_some());
            if let Some(digest) = after_digest {
                out.extend_from_slice(&digest.0);
            }
            put_u32(out, chunk_size_bytes_max);
        }
        Message::PartitionChunk {
            request_id,
            namespace,
            partition,
            done,
            records,
        } => {
            put_u64(out, request_id);
            put_namespace(out, namespace);
            put_partition(out, partition);
            put_flag(out, done);
            records.write(out, usize::MAX, "record list");
        }
        _ => unreachable!("write_partition_stream is called for partition streams only"),
    }
}

//! Decoding a whole frame body into a [`Message`], one helper per message.
//!
//! Invariants:
//! - Fields are read in the order `encode.rs` writes them; each helper mirrors its writer.
//! - A body decodes only when its fields use every byte of it.

use crate::limits::{ADDRESSES_PER_LIST_MAX, CLUSTER_NAME_BYTES_MAX, PEERS_PER_HEARTBEAT_MAX};
use crate::list::{List, ListItem};
use crate::reader::Reader;
use crate::{ForwardProtocol, Hello, Malformed, Message, MessageType, RaftKind, RecordVersion};

/// Decodes `body`, which is all of a frame's body, as a message of `message_type`.
pub(crate) fn decode_body(
    message_type: MessageType,
    body: &[u8],
) -> Result<Message<'_>, Malformed> {
    let mut reader = Reader::new(body);
    let message = match message_type {
        MessageType::Hello => Message::Hello(read_hello(&mut reader)?),
        MessageType::HelloAck => Message::HelloAck(read_hello(&mut reader)?),
        MessageType::Heartbeat => read_heartbeat(&mut reader)?,
        MessageType::Raft => read_raft(&mut reader)?,
        MessageType::RaftReply => {
            let request_id = reader.u64()?;
            let payload = reader.blob()?;
            Message::RaftReply {
                request_id,
                payload,
            }
        }
        MessageType::Forward => read_forward(&mut reader)?,
        MessageType::ForwardReply => {
            let request_id = reader.u64()?;
            let payload = reader.blob()?;
            Message::ForwardReply {
                request_id,
                payload,
            }
        }
        MessageType::ReplicaWrite => read_replica_write(&mut reader)?,
        MessageType::ReplicaTruncate => read_replica_truncate(&mut reader)?,
        MessageType::ReplicaAck => {
            let request_id = reader.u64()?;
            let result_code = reader.u8()?;
            Message::ReplicaAck {
                request_id,
                result_code,
            }
        }
        MessageType::PartitionStreamRequest => read_partition_stream_request(&mut reader)?,
        MessageType::PartitionChunk => read_partition_chunk(&mut reader)?,
    };
    reader.finish()?;
    Ok(message)
}

fn read_hello<'a>(reader: &mut Reader<'a>) -> Result<Hello<'a>, Malformed> {
    let node_id = reader.u64()?;
    let cluster_name = reader.text(CLUSTER_NAME_BYTES_MAX, "cluster name over 64 bytes")?;
    let too_many = "more addresses than a list may hold";
    let service_addresses = List::read(reader, ADDRESSES_PER_LIST_MAX, too_many)?;
    let resp_addresses = List::read(reader, ADDRESSES_PER_LIST_MAX, too_many)?;
    let fabric_address = <&str>::read(reader)?;
    Ok(Hello {
        node_id,
        cluster_name,
        service_addresses,
        resp_addresses,
        fabric_address,
    })
}

fn read_heartbeat<'a>(reader: &mut Reader<'a>) -> Result<Message<'a>, Malformed> {
    let node_id = reader.u64()?;
    let sent_at_ms = reader.u64()?;
    let map_version = reader.u64()?;
    let too_many = "more peers than a heartbeat may list";
    let peer_node_ids = List::read(reader, PEERS_PER_HEARTBEAT_MAX, too_many)?;
    Ok(Message::Heartbeat {
        node_id,
        sent_at_ms,
        map_version,
        peer_node_ids,
    })
}

fn read_raft<'a>(reader: &mut Reader<'a>) -> Result<Message<'a>, Malformed> {
    let request_id = reader.u64()?;
    let kind = RaftKind::from_u8(reader.u8()?).ok_or(Malformed::new("unknown raft kind"))?;
    let payload = reader.blob()?;
    Ok(Message::Raft {
        request_id,
        kind,
        payload,
    })
}

fn read_forward<'a>(reader: &mut Reader<'a>) -> Result<Message<'a>, Malformed> {
    let request_id = reader.u64()?;
    let protocol = ForwardProtocol::from_u8(reader.u8()?)
        .ok_or(Malformed::new("unknown forwarded protocol"))?;
    let time_left_ms = reader.u32()?;
    let payload = reader.blob()?;
    Ok(Message::Forward {
        request_id,
        protocol,
        time_left_ms,
        payload,
    })
}

fn read_replica_write<'a>(reader: &mut Reader<'a>) -> Result<Message<'a>, Malformed> {
    let request_id = reader.u64()?;
    let namespace = reader.namespace()?;
    let partition = reader.partition()?;
    let partition_version = reader.u64()?;
    let sequence = reader.u64()?;
    let record = RecordVersion::read(reader)?;
    Ok(Message::ReplicaWrite {
        request_id,
        namespace,
        partition,
        partition_version,
        sequence,
        record,
    })
}

fn read_replica_truncate<'a>(reader: &mut Reader<'a>) -> Result<Message<'a>, Malformed> {
    let request_id = reader.u64()?;
    let namespace = reader.namespace()?;
    let set_name = reader.set_name()?;
    let before_ms = reader.u64()?;
    Ok(Message::ReplicaTruncate {
        request_id,
        namespace,
        set_name,
        before_ms,
    })
}

fn read_partition_stream_request<'a>(reader: &mut Reader<'a>) -> Result<Message<'a>, Malformed> {
    let request_id = reader.u64()?;
    let namespace = reader.namespace()?;
    let partition = reader.partition()?;
    let after_digest = if reader.flag()? {
        Some(reader.digest()?)
    } else {
        None
    };
    let chunk_size_bytes_max = reader.u32()?;
    Ok(Message::PartitionStreamRequest {
        request_id,
        namespace,
        partition,
        after_digest,
        chunk_size_bytes_max,
    })
}

fn read_partition_chunk<'a>(reader: &mut Reader<'a>) -> Result<Message<'a>, Malformed> {
    let request_id = reader.u64()?;
    let namespace = reader.namespace()?;
    let partition = reader.partition()?;
    let done = reader.flag()?;
    // No count limit of its own: the body size bounds a chunk, and every record takes bytes.
    let records = List::read(reader, usize::MAX, "record count over the limit")?;
    Ok(Message::PartitionChunk {
        request_id,
        namespace,
        partition,
        done,
        records,
    })
}

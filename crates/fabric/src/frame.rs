//! Frames as the transport handles them: [`OwnedFrame`] for a received frame, and encoding a
//! message under a request id the transport picks.
//!
//! Invariants:
//! - An [`OwnedFrame`] holds exactly one whole frame that `decode_frame` accepted, so
//!   decoding it again cannot fail.
//! - Every message that carries a request id has it as the first field of its body (see the
//!   codec's wire format), so the id sits at a fixed offset in every such frame and is
//!   patched there; a debug build checks the patch by decoding the frame back.

use bytes::Bytes;
use wire_fabric::{FRAME_HEADER_SIZE_BYTES, Message, MessageType, decode_frame, encode};

/// Where the request id sits in a frame that carries one: the body's first field.
const REQUEST_ID_OFFSET_BYTES: usize = FRAME_HEADER_SIZE_BYTES;

/// Size of the request id field.
const REQUEST_ID_SIZE_BYTES: usize = 8;

/// A frame received from a peer, owning its bytes.
///
/// The bytes share the allocation they were read into, so keeping a frame keeps that read
/// chunk (up to [`crate::READ_CHUNK_BYTES`] or one large frame) alive: copy out what must
/// outlive the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedFrame {
    bytes: Bytes,
    message_type: MessageType,
    request_id: Option<u64>,
}

impl OwnedFrame {
    /// Wraps one whole frame that `decode_frame` accepted, with its decoded type and request
    /// id.
    pub(crate) fn new(
        bytes: Bytes,
        message_type: MessageType,
        request_id: Option<u64>,
    ) -> OwnedFrame {
        OwnedFrame {
            bytes,
            message_type,
            request_id,
        }
    }

    /// The message, decoded again from the owned bytes (cheap: fields borrow, lists are
    /// lazy).
    pub fn message(&self) -> Message<'_> {
        match decode_frame(&self.bytes, u32::MAX) {
            Ok(Some((message, _))) => message,
            _ => panic!("an owned frame was validated when it arrived, and decodes again"),
        }
    }

    /// The frame's bytes, header included.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The frame's message type.
    pub fn message_type(&self) -> MessageType {
        self.message_type
    }

    /// The frame's request id, for messages that carry one.
    pub fn request_id(&self) -> Option<u64> {
        self.request_id
    }
}

/// What a frame is to the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameRole {
    /// `Hello` or `HelloAck`: only the first frame of a connection.
    Handshake,
    /// `Heartbeat`.
    Heartbeat,
    /// A message its receiver answers with a reply of the same request id.
    Request,
    /// The answer to a request.
    Reply,
}

impl FrameRole {
    /// The role of a message type.
    pub(crate) fn of(message_type: MessageType) -> FrameRole {
        match message_type {
            MessageType::Hello | MessageType::HelloAck => FrameRole::Handshake,
            MessageType::Heartbeat => FrameRole::Heartbeat,
            MessageType::Raft
            | MessageType::Forward
            | MessageType::ReplicaWrite
            | MessageType::ReplicaTruncate
            | MessageType::PartitionStreamRequest => FrameRole::Request,
            MessageType::RaftReply
            | MessageType::ForwardReply
            | MessageType::ReplicaAck
            | MessageType::PartitionChunk => FrameRole::Reply,
        }
    }
}

/// Encodes `message` as one frame; a message that carries a request id carries `request_id`
/// instead of its own.
pub(crate) fn encode_with_request_id(message: &Message<'_>, request_id: u64) -> Bytes {
    let mut out = Vec::with_capacity(message.encoded_size_hint());
    encode(message, &mut out);
    if message.request_id().is_some() {
        let field = REQUEST_ID_OFFSET_BYTES..REQUEST_ID_OFFSET_BYTES + REQUEST_ID_SIZE_BYTES;
        out[field].copy_from_slice(&request_id.to_be_bytes());
        debug_assert_eq!(
            decode_frame(&out, u32::MAX).map(|decoded| decoded.map(|(m, _)| m.request_id())),
            Ok(Some(Some(request_id))),
            "the request id is the first body field of {:?}",
            message.message_type(),
        );
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire_fabric::{ForwardProtocol, RaftKind};

    #[test]
    fn request_id_is_patched_in_every_message_that_carries_one() {
        let messages = [
            Message::Raft {
                request_id: 1,
                kind: RaftKind::Vote,
                payload: b"vote",
            },
            Message::RaftReply {
                request_id: 1,
                payload: b"",
            },
            Message::Forward {
                request_id: 1,
                protocol: ForwardProtocol::Resp,
                time_left_ms: 9,
                payload: b"x",
            },
            Message::ForwardReply {
                request_id: 1,
                payload: b"y",
            },
            Message::ReplicaTruncate {
                request_id: 1,
                namespace: b"test",
                set_name: b"",
                before_ms: 5,
            },
            Message::ReplicaAck {
                request_id: 1,
                result_code: 0,
            },
        ];
        for message in messages {
            let frame = encode_with_request_id(&message, 0x0102_0304_0506_0708);
            let (decoded, _) = decode_frame(&frame, u32::MAX).unwrap().unwrap();
            assert_eq!(decoded.request_id(), Some(0x0102_0304_0506_0708));
            assert_eq!(decoded.message_type(), message.message_type());
        }
    }
}

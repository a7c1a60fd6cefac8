//! The target over the fabric codec: the node-to-node messages of a cluster.
//!
//! Invariants the target asserts, beyond "no panic":
//! - [`decode_frame`] never claims more bytes than it was given; every strict prefix of a
//!   frame it returns is `Ok(None)`; `Ok(None)` means the header or the body is still short.
//! - A refusal is either the header's, made from its 8 bytes alone, or the body's, made only
//!   once the whole body is present (every strict prefix of the frame is `Ok(None)`) and from
//!   the frame's own bytes.
//! - A decoded message re-encodes with [`encode`] to exactly the bytes it came from; a decoded
//!   partition chunk, rewritten record by record with [`PartitionChunkWriter`], too.
//! - A decoded list yields exactly as many items as it says it holds.

use wire_fabric::{
    FRAME_HEADER_SIZE_BYTES, Malformed, Message, PartitionChunkWriter, decode_frame, decode_header,
    encode,
};

use crate::input::Input;

/// The body limit the target decodes frames under: far below a node's, so that a declared
/// size above it is refused and one below it can be satisfied by a fuzzer input.
pub const FRAME_BODY_SIZE_BYTES_MAX: u32 = 64 * 1024;

/// Target `fabric`: the first byte picks the form of the rest. Bit 0 clear: a stream of
/// frames, as a connection receives them. Bit 0 set: a message type byte, then one body, which
/// the target frames with a valid header so the fuzzer reaches the body decoders at once.
pub fn fabric(data: &[u8]) {
    let mut input = Input::new(data);
    let stream = if input.byte() & 1 == 1 {
        let message_type = input.byte();
        framed(message_type, input.take_rest())
    } else {
        input.take_rest().to_vec()
    };
    check_stream(&stream);
}

/// `body` behind a header of version 1 with `message_type` and the body's size.
fn framed(message_type: u8, body: &[u8]) -> Vec<u8> {
    let body_size_bytes = u32::try_from(body.len()).expect("fuzzer inputs are small");
    let mut frame = vec![b'O', b'F', 1, message_type];
    frame.extend_from_slice(&body_size_bytes.to_be_bytes());
    frame.extend_from_slice(body);
    frame
}

fn check_stream(data: &[u8]) {
    let mut rest = data;
    loop {
        match decode_frame(rest, FRAME_BODY_SIZE_BYTES_MAX) {
            Ok(Some((message, size_bytes))) => {
                assert!(
                    (FRAME_HEADER_SIZE_BYTES..=rest.len()).contains(&size_bytes),
                    "a frame of {size_bytes} bytes in {}",
                    rest.len()
                );
                check_message(&rest[..size_bytes], &message);
                rest = &rest[size_bytes..];
            }
            Ok(None) => {
                check_incomplete(rest);
                return;
            }
            Err(malformed) => {
                check_refusal(rest, malformed);
                return;
            }
        }
    }
}

fn check_message(frame: &[u8], message: &Message<'_>) {
    for prefix_size_bytes in 0..frame.len() {
        assert_eq!(
            decode_frame(&frame[..prefix_size_bytes], FRAME_BODY_SIZE_BYTES_MAX),
            Ok(None),
            "a strict prefix of {prefix_size_bytes} bytes of a complete frame"
        );
    }
    let mut again = Vec::new();
    encode(message, &mut again);
    assert_eq!(again, frame, "{message:?} re-encodes to its bytes");
    check_lists(frame, message);
}

fn check_lists(frame: &[u8], message: &Message<'_>) {
    match *message {
        Message::Hello(hello) | Message::HelloAck(hello) => {
            assert_eq!(
                hello.service_addresses.iter().count(),
                hello.service_addresses.len()
            );
            assert_eq!(
                hello.resp_addresses.iter().count(),
                hello.resp_addresses.len()
            );
        }
        Message::Heartbeat { peer_node_ids, .. } => {
            assert_eq!(peer_node_ids.iter().count(), peer_node_ids.len());
        }
        Message::PartitionChunk {
            request_id,
            namespace,
            partition,
            done,
            records,
        } => {
            let mut rewritten = Vec::new();
            let mut writer =
                PartitionChunkWriter::begin(&mut rewritten, request_id, namespace, partition);
            records.iter().for_each(|record| writer.push(&record));
            assert_eq!(usize::try_from(writer.record_count()), Ok(records.len()));
            writer.finish(done);
            assert_eq!(rewritten, frame, "a chunk rewritten record by record");
        }
        _ => {}
    }
}

fn check_incomplete(buf: &[u8]) {
    let Ok(Some(header)) = decode_header(buf, FRAME_BODY_SIZE_BYTES_MAX) else {
        assert!(
            buf.len() < FRAME_HEADER_SIZE_BYTES,
            "Ok(None) with a whole header"
        );
        return;
    };
    assert!(
        header.frame_size_bytes() > buf.len(),
        "Ok(None) although the {}-byte frame is all there",
        header.frame_size_bytes()
    );
}

fn check_refusal(buf: &[u8], malformed: Malformed) {
    assert!(
        buf.len() >= FRAME_HEADER_SIZE_BYTES,
        "refused before 8 bytes"
    );
    match decode_header(buf, FRAME_BODY_SIZE_BYTES_MAX) {
        Err(header_malformed) => {
            assert_eq!(header_malformed, malformed);
            let header_only = &buf[..FRAME_HEADER_SIZE_BYTES];
            assert_eq!(
                decode_frame(header_only, FRAME_BODY_SIZE_BYTES_MAX),
                Err(malformed),
                "a header refusal must come from the header alone"
            );
        }
        Ok(header) => {
            let header = header.expect("a refused buffer holds a whole header");
            let frame_size_bytes = header.frame_size_bytes();
            assert!(
                frame_size_bytes <= buf.len(),
                "a body refused before it was all there"
            );
            let frame = &buf[..frame_size_bytes];
            assert_eq!(
                decode_frame(frame, FRAME_BODY_SIZE_BYTES_MAX),
                Err(malformed),
                "a body refusal depends on the frame's bytes alone"
            );
            for prefix_size_bytes in 0..frame_size_bytes {
                assert_eq!(
                    decode_frame(&frame[..prefix_size_bytes], FRAME_BODY_SIZE_BYTES_MAX),
                    Ok(None),
                    "a strict prefix of {prefix_size_bytes} bytes of a refused frame"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use model::{Digest, Generation, PartitionId, VoidTime};
    use wire_fabric::{List, RecordVersion};

    use super::*;

    #[test]
    fn a_stream_of_valid_frames_passes_every_check() {
        let record = RecordVersion {
            digest: Digest([3; 20]),
            set_name: b"s",
            generation: Generation(2),
            last_update_ms: 5,
            void_time: VoidTime(0),
            data: Some(b"bins"),
        };
        let records = [
            record,
            RecordVersion {
                data: None,
                ..record
            },
        ];
        let mut stream = vec![0];
        let messages = [
            Message::ReplicaAck {
                request_id: 1,
                result_code: 0,
            },
            Message::PartitionChunk {
                request_id: 2,
                namespace: b"test",
                partition: PartitionId(7),
                done: true,
                records: List::from_items(&records),
            },
        ];
        messages
            .iter()
            .for_each(|message| encode(message, &mut stream));
        fabric(&stream);
        fabric(&[1, 0x32, 0, 0, 0, 0, 0, 0, 0, 9, 0]);
    }
}

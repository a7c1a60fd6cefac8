//! The 8-byte frame header, and finding whole frames at the start of a buffer.
//!
//! Layout: `magic[2] = "OF"`, `version: u8 = 1`, `message_type: u8`, `body_size_bytes: u32`
//! (big-endian), then the body.
//!
//! Invariants:
//! - [`decode_header`] judges a header from its 8 bytes alone, before any body byte arrives,
//!   so a peer announcing a body over the limit is refused without buffering it.
//! - A frame is decoded only once all of its body is present; until then the answer is
//!   `Ok(None)`, never an error, whatever the bytes so far.
//! - The declared body size is only ever compared, never used to reserve memory.

use crate::decode::decode_body;
use crate::limits::{FABRIC_VERSION, FRAME_HEADER_SIZE_BYTES, FRAME_MAGIC};
use crate::writer::put_u32;
use crate::{Malformed, Message, MessageType};

/// What the 8-byte header of a frame says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// The type of the message in the body.
    pub message_type: MessageType,
    /// How many body bytes follow the header.
    pub body_size_bytes: u32,
}

impl FrameHeader {
    /// How many bytes the whole frame takes: header plus body. A reader that knows this can
    /// wait for exactly that many bytes before decoding.
    pub fn frame_size_bytes(&self) -> usize {
        FRAME_HEADER_SIZE_BYTES + body_size_bytes_usize(self.body_size_bytes)
    }
}

/// Reads the header at the start of `buf`. `Ok(None)` means fewer than 8 bytes are present.
///
/// # Errors
///
/// [`Malformed`] when the magic is not `OF`, the version is not [`FABRIC_VERSION`], the message
/// type is unknown, or the declared body size is over `body_size_bytes_max`.
pub fn decode_header(
    buf: &[u8],
    body_size_bytes_max: u32,
) -> Result<Option<FrameHeader>, Malformed> {
    let Some(header) = buf.first_chunk::<FRAME_HEADER_SIZE_BYTES>() else {
        return Ok(None);
    };
    let [magic_0, magic_1, version, type_byte, size @ ..] = *header;
    if [magic_0, magic_1] != FRAME_MAGIC {
        return Err(Malformed::new("frame does not start with the fabric magic"));
    }
    if version != FABRIC_VERSION {
        return Err(Malformed::new("frame has another fabric version"));
    }
    let message_type =
        MessageType::from_u8(type_byte).ok_or(Malformed::new("unknown message type"))?;
    let body_size_bytes = u32::from_be_bytes(size);
    if body_size_bytes > body_size_bytes_max {
        return Err(Malformed::new("frame body size is over the limit"));
    }
    Ok(Some(FrameHeader {
        message_type,
        body_size_bytes,
    }))
}

/// Decodes the frame at the start of `buf`, and returns its message with how many bytes of
/// `buf` the frame took; the bytes after it are left for the next call. `Ok(None)` means more
/// bytes are needed. The message borrows its byte fields from `buf`.
///
/// # Errors
///
/// [`Malformed`] when the header is bad (see [`decode_header`]: judged as soon as its 8 bytes
/// are present, before the body arrives), or the whole body is not a valid message of its
/// type: a field past the end of the body, bytes left over, a limit broken (see the constants
/// of this crate), text that is not UTF-8, a flag byte other than 0 or 1, an unknown enum
/// byte, a partition id of 4096 or more.
pub fn decode_frame(
    buf: &[u8],
    body_size_bytes_max: u32,
) -> Result<Option<(Message<'_>, usize)>, Malformed> {
    let Some(header) = decode_header(buf, body_size_bytes_max)? else {
        return Ok(None);
    };
    let frame_size_bytes = header.frame_size_bytes();
    let Some(frame) = buf.get(..frame_size_bytes) else {
        return Ok(None);
    };
    let message = decode_body(header.message_type, &frame[FRAME_HEADER_SIZE_BYTES..])?;
    Ok(Some((message, frame_size_bytes)))
}

/// Appends a header for `message_type` with a body size of 0 to patch later, and returns
/// where the frame starts.
pub(crate) fn begin_frame(out: &mut Vec<u8>, message_type: MessageType) -> usize {
    let frame_start = out.len();
    out.extend_from_slice(&FRAME_MAGIC);
    out.extend_from_slice(&[FABRIC_VERSION, message_type as u8]);
    put_u32(out, 0);
    frame_start
}

/// Patches the body size of the frame begun at `frame_start`: everything after its header.
///
/// # Panics
///
/// If no header was begun at `frame_start`, or the body is over `u32::MAX` bytes.
pub(crate) fn finish_frame(out: &mut [u8], frame_start: usize) {
    let body_start = frame_start + FRAME_HEADER_SIZE_BYTES;
    assert!(
        body_start <= out.len() && out[frame_start..].starts_with(&FRAME_MAGIC),
        "no frame begun at {frame_start}"
    );
    let body_size_bytes = out.len() - body_start;
    let body_size_bytes = u32::try_from(body_size_bytes)
        .unwrap_or_else(|_| panic!("a frame body of {body_size_bytes} bytes is over u32::MAX"));
    out[body_start - 4..body_start].copy_from_slice(&body_size_bytes.to_be_bytes());
}

fn body_size_bytes_usize(body_size_bytes: u32) -> usize {
    usize::try_from(body_size_bytes).expect("a u32 fits in usize on every supported target")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(type_byte: u8, body_size_bytes: u32) -> Vec<u8> {
        let mut header = vec![b'O', b'F', FABRIC_VERSION, type_byte];
        header.extend_from_slice(&body_size_bytes.to_be_bytes());
        header
    }

    #[test]
    fn decode_header_reads_type_and_size() {
        let decoded = decode_header(&header(0x32, 9), 9).unwrap();
        let expected = FrameHeader {
            message_type: MessageType::ReplicaAck,
            body_size_bytes: 9,
        };
        assert_eq!(decoded, Some(expected));
        assert_eq!(expected.frame_size_bytes(), 17);
    }

    #[test]
    fn decode_header_needs_all_eight_bytes() {
        let header = header(0x32, 9);
        for prefix_size_bytes in 0..FRAME_HEADER_SIZE_BYTES {
            assert_eq!(decode_header(&header[..prefix_size_bytes], 9), Ok(None));
        }
    }

    #[test]
    fn decode_header_rejects_bad_magic_version_type_and_size() {
        let good = header(0x01, 10);
        let cases = [
            (0, b'X'),
            (1, b'X'),
            (2, 0),
            (2, 2),
            (3, 0),
            (3, 0x42),
            (7, 11),
        ];
        for (position, byte) in cases {
            let mut bad = good.clone();
            bad[position] = byte;
            assert!(decode_header(&bad, 10).is_err(), "byte {position} = {byte}");
        }
        assert!(decode_header(&good, 10).is_ok());
    }

    #[test]
    fn finish_frame_patches_the_body_size() {
        let mut out = b"before".to_vec();
        let frame_start = begin_frame(&mut out, MessageType::RaftReply);
        out.extend_from_slice(&[1, 2, 3]);
        finish_frame(&mut out, frame_start);
        assert_eq!(&out[6..], b"OF\x01\x11\0\0\0\x03\x01\x02\x03");
    }
}

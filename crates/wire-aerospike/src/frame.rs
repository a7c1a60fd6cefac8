//! The 8-byte proto header that frames every message in both directions.
//!
//! Layout (one big-endian u64): byte 0 version, byte 1 type, bytes 2..8 the body size (48 bits).
//!
//! Invariants:
//! - [`decode_frame`] judges the header from its 8 bytes alone, before any body byte arrives.
//! - A returned [`Frame`] body is exactly the declared size and lies inside the input buffer.
//! - Nothing here allocates; the declared size is only ever compared, never used to reserve.

use crate::Malformed;

/// The protocol version every frame carries (server `PROTO_VERSION`).
pub const PROTO_VERSION: u8 = 2;

/// Size of the proto header: version, type and a 48-bit body size.
pub const PROTO_HEADER_SIZE_BYTES: usize = 8;

/// Aerospike's own PROTO_SIZE_MAX (128 MiB): the largest body the server accepts.
pub const PROTO_BODY_SIZE_BYTES_MAX: u64 = 128 * 1024 * 1024;

/// The size field is 48 bits wide, so no body can be larger than this.
const PROTO_SIZE_FIELD_MAX: u64 = (1 << 48) - 1;

/// The security protocol predates versioning; the server accepts version 0 for it.
const PROTO_VERSION_SECURITY_LEGACY: u8 = 0;

const _: () = assert!(PROTO_BODY_SIZE_BYTES_MAX <= PROTO_SIZE_FIELD_MAX);
const _: () = assert!(PROTO_HEADER_SIZE_BYTES == 1 + 1 + 6);

/// The message type in byte 1 of the proto header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtoType {
    /// Text info protocol.
    Info = 1,
    /// Login, authentication and user administration.
    Security = 2,
    /// Data commands (AS_MSG).
    Message = 3,
    /// zlib-wrapped AS_MSG.
    Compressed = 4,
    /// Cross-datacenter replication; never sent by clients.
    InternalXdr = 5,
}

impl ProtoType {
    /// The proto type for a wire byte, or `None` outside 1..=5.
    pub fn from_u8(byte: u8) -> Option<ProtoType> {
        Some(match byte {
            1 => ProtoType::Info,
            2 => ProtoType::Security,
            3 => ProtoType::Message,
            4 => ProtoType::Compressed,
            5 => ProtoType::InternalXdr,
            _ => return None,
        })
    }
}

/// One complete proto frame found at the start of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The type from the header.
    pub proto_type: ProtoType,
    /// The bytes after the 8-byte header, exactly as many as the header declared.
    pub body: &'a [u8],
}

impl Frame<'_> {
    /// How many bytes of the buffer this frame occupies (header plus body): how much to consume.
    pub fn size_bytes(&self) -> usize {
        PROTO_HEADER_SIZE_BYTES + self.body.len()
    }
}

/// Looks at the start of `buf`. `Ok(None)` means more bytes are needed (incomplete header or
/// body); bytes after the frame are left alone for the next call.
///
/// # Errors
///
/// [`Malformed`] when the 8-byte header is bad: version other than 2 (type 2 Security may also
/// have version 0), type not in 1..=5, or declared body size above `body_size_bytes_max`. The
/// header is judged as soon as its 8 bytes are present, before the body arrives, so the caller
/// can drop a hostile connection early.
pub fn decode_frame(buf: &[u8], body_size_bytes_max: u64) -> Result<Option<Frame<'_>>, Malformed> {
    let Some((header, rest)) = buf.split_first_chunk::<PROTO_HEADER_SIZE_BYTES>() else {
        return Ok(None);
    };
    let [version, type_byte, ..] = *header;
    let proto_type =
        ProtoType::from_u8(type_byte).ok_or(Malformed::new("proto type is not in 1..=5"))?;
    let version_ok = version == PROTO_VERSION
        || (proto_type == ProtoType::Security && version == PROTO_VERSION_SECURITY_LEGACY);
    if !version_ok {
        return Err(Malformed::new("proto version is not 2"));
    }
    let body_size_bytes = u64::from_be_bytes(*header) & PROTO_SIZE_FIELD_MAX;
    if body_size_bytes > body_size_bytes_max {
        return Err(Malformed::new("proto body size is over the limit"));
    }
    let body_size_bytes = usize::try_from(body_size_bytes)
        .map_err(|_| Malformed::new("proto body size does not fit in memory"))?;
    Ok(rest
        .get(..body_size_bytes)
        .map(|body| Frame { proto_type, body }))
}

/// The 8-byte proto header for a body of `body_size_bytes`, always with version 2.
///
/// # Panics
///
/// If `body_size_bytes` does not fit the 48-bit size field (a programmer error: no message we
/// build comes near it).
pub fn encode_proto_header(proto_type: ProtoType, body_size_bytes: u64) -> [u8; 8] {
    assert!(
        body_size_bytes <= PROTO_SIZE_FIELD_MAX,
        "proto body of {body_size_bytes} bytes does not fit 48 bits"
    );
    let mut header = body_size_bytes.to_be_bytes();
    header[0] = PROTO_VERSION;
    header[1] = proto_type as u8;
    header
}

/// Reserves an 8-byte proto header at the end of `out`, and returns where it starts. Append the
/// body (for a stream: several messages, each from [`crate::begin_message`]), then call
/// [`finish_proto`].
pub fn begin_proto(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; PROTO_HEADER_SIZE_BYTES]);
    start
}

/// Patches the proto header reserved at `start` so that it frames everything after it.
///
/// # Panics
///
/// If fewer than 8 bytes follow `start` (no header was reserved there).
pub fn finish_proto(out: &mut [u8], start: usize, proto_type: ProtoType) {
    let body_start = start + PROTO_HEADER_SIZE_BYTES;
    assert!(
        body_start <= out.len(),
        "no proto header reserved at {start}"
    );
    let body_size_bytes = u64::try_from(out.len() - body_start).expect("usize fits in u64");
    let header = encode_proto_header(proto_type, body_size_bytes);
    out[start..body_start].copy_from_slice(&header);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(version: u8, type_byte: u8, body_size_bytes: u64) -> [u8; 8] {
        let mut header = body_size_bytes.to_be_bytes();
        header[0] = version;
        header[1] = type_byte;
        header
    }

    /// Decodes a lone header (no body bytes) and reports only what it judged.
    fn judge(version: u8, type_byte: u8, body_size_bytes: u64) -> Result<(), Malformed> {
        let header = header(version, type_byte, body_size_bytes);
        decode_frame(&header, PROTO_BODY_SIZE_BYTES_MAX).map(|_| ())
    }

    #[test]
    fn decode_frame_returns_the_body_and_leaves_following_bytes() {
        let mut buf = header(2, 3, 3).to_vec();
        buf.extend_from_slice(b"abcNEXT");
        let frame = decode_frame(&buf, PROTO_BODY_SIZE_BYTES_MAX)
            .unwrap()
            .unwrap();
        assert_eq!(frame.proto_type, ProtoType::Message);
        assert_eq!(frame.body, b"abc");
        assert_eq!(frame.size_bytes(), 11);
    }

    #[test]
    fn decode_frame_needs_the_whole_header_and_body() {
        let mut buf = header(2, 1, 4).to_vec();
        buf.extend_from_slice(b"node");
        for prefix_size_bytes in 0..buf.len() {
            let decoded = decode_frame(&buf[..prefix_size_bytes], PROTO_BODY_SIZE_BYTES_MAX);
            assert_eq!(decoded, Ok(None), "prefix of {prefix_size_bytes} bytes");
        }
        assert!(
            decode_frame(&buf, PROTO_BODY_SIZE_BYTES_MAX)
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn decode_frame_rejects_versions_other_than_2() {
        for version in [0, 1, 3, 0xff] {
            assert!(judge(version, 3, 0).is_err(), "version {version}");
        }
        assert_eq!(judge(2, 3, 0), Ok(()));
    }

    #[test]
    fn decode_frame_accepts_security_frames_with_version_0() {
        let header = header(0, 2, 0);
        let frame = decode_frame(&header, PROTO_BODY_SIZE_BYTES_MAX)
            .unwrap()
            .unwrap();
        assert_eq!(frame.proto_type, ProtoType::Security);
        assert!(
            judge(0, 1, 0).is_err(),
            "only security frames may have version 0"
        );
    }

    #[test]
    fn decode_frame_rejects_types_outside_1_to_5() {
        for type_byte in [0, 6, 0xff] {
            assert!(judge(2, type_byte, 0).is_err(), "type {type_byte}");
        }
        for type_byte in 1..=5 {
            assert_eq!(judge(2, type_byte, 0), Ok(()), "type {type_byte}");
        }
    }

    #[test]
    fn decode_frame_rejects_an_oversized_body_before_it_arrives() {
        // Only the 8 header bytes are present: the limit must be enforced without the body.
        assert!(judge(2, 3, PROTO_BODY_SIZE_BYTES_MAX + 1).is_err());
        assert!(judge(2, 3, PROTO_SIZE_FIELD_MAX).is_err());
        let at_limit = header(2, 3, PROTO_BODY_SIZE_BYTES_MAX);
        assert_eq!(decode_frame(&at_limit, PROTO_BODY_SIZE_BYTES_MAX), Ok(None));
        assert!(decode_frame(&header(2, 1, 11), 10).is_err());
        assert_eq!(
            decode_frame(&header(2, 3, PROTO_SIZE_FIELD_MAX), u64::MAX),
            Ok(None)
        );
    }

    #[test]
    fn encode_proto_header_round_trips_through_decode_frame() {
        let header = encode_proto_header(ProtoType::Info, 0x0102_0304_0506);
        assert_eq!(header, [2, 1, 1, 2, 3, 4, 5, 6]);
        let mut buf = encode_proto_header(ProtoType::Security, 2).to_vec();
        buf.extend_from_slice(&[9, 9]);
        let frame = decode_frame(&buf, 2).unwrap().unwrap();
        assert_eq!(
            (frame.proto_type, frame.body),
            (ProtoType::Security, &[9u8, 9][..])
        );
    }
}

//! Security (login) messages, proto type 2: only the reply a server without security sends.
//!
//! Layout after the 8-byte proto header: a 16-byte header (u8 scheme, u8 result code,
//! u8 command, u8 field count, 12 zero bytes), then fields. Aerospike Community Edition answers
//! every security message with result 51 (not supported) and no fields (server
//! `security_ce.c`); clients only send one when they are given a user name.

use crate::frame::{ProtoType, begin_proto, finish_proto};

/// Size of the security header that follows the proto header.
pub const SECURITY_HEADER_SIZE_BYTES: usize = 16;

/// Appends a complete security reply frame carrying `result_code` and no fields.
pub fn write_security_response(out: &mut Vec<u8>, result_code: u8) {
    let start = begin_proto(out);
    let mut header = [0u8; SECURITY_HEADER_SIZE_BYTES];
    header[1] = result_code;
    out.extend_from_slice(&header);
    finish_proto(out, start, ProtoType::Security);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode_frame;

    #[test]
    fn security_reply_is_a_type_two_frame_with_the_result_code() {
        let mut out = Vec::new();
        write_security_response(&mut out, 51);
        assert_eq!(out.len(), 8 + SECURITY_HEADER_SIZE_BYTES);
        let frame = decode_frame(&out, 1024).unwrap().unwrap();
        assert_eq!(frame.proto_type, ProtoType::Security);
        assert_eq!(frame.body[1], 51);
        assert!(frame.body[2..].iter().all(|&b| b == 0));
    }
}

//! Security messages, proto type 2: login, authentication and the user and role admin
//! commands, and their replies.
//!
//! Layout after the 8-byte proto header: a 16-byte header (u8 scheme, u8 result code,
//! u8 command, u8 field count, 12 zero bytes), then fields, each a u32 big-endian size (the
//! data's length plus one), a u8 id and the data.
//!
//! - Requests are parsed field by field to the end of the body, not by the header's count: one
//!   official client (Go v7) undercounts CREATE_ROLE's fields.
//! - Every reply but LOGIN's and the queries' is the 24-byte header alone: clients read exactly
//!   that much and reuse the connection.
//! - A query's answer is frames of records (each a 16-byte header and its fields), then one
//!   frame holding only a record with result [`QUERY_END`]: a client (Go) drops the records of
//!   the frame that ends the query.

use crate::frame::{ProtoType, begin_proto, finish_proto};
use crate::malformed::Malformed;

/// Size of the security header that follows the proto header.
pub const SECURITY_HEADER_SIZE_BYTES: usize = 16;

/// Result code of the record that ends a query's answer (`AS_SEC_OK_LAST`).
pub const QUERY_END: u8 = 50;

/// A query's records are sent in frames of about this size.
pub const QUERY_FRAME_BYTES: usize = 64 * 1024;

/// Security command codes.
pub mod command {
    /// Authenticate a connection with a session token.
    pub const AUTHENTICATE: u8 = 0;
    /// Create a user.
    pub const CREATE_USER: u8 = 1;
    /// Drop a user.
    pub const DROP_USER: u8 = 2;
    /// Set a user's password (user-admin).
    pub const SET_PASSWORD: u8 = 3;
    /// Change a password, giving the old one.
    pub const CHANGE_PASSWORD: u8 = 4;
    /// Grant roles to a user.
    pub const GRANT_ROLES: u8 = 5;
    /// Revoke roles from a user.
    pub const REVOKE_ROLES: u8 = 6;
    /// List one user or all.
    pub const QUERY_USERS: u8 = 9;
    /// Create a role.
    pub const CREATE_ROLE: u8 = 10;
    /// Drop a role.
    pub const DROP_ROLE: u8 = 11;
    /// Grant privileges to a role.
    pub const GRANT_PRIVILEGES: u8 = 12;
    /// Revoke privileges from a role.
    pub const REVOKE_PRIVILEGES: u8 = 13;
    /// Set a role's allow-list of client addresses.
    pub const SET_WHITELIST: u8 = 14;
    /// Set a role's read and write quotas.
    pub const SET_QUOTAS: u8 = 15;
    /// List one role or all.
    pub const QUERY_ROLES: u8 = 16;
    /// Log in with a credential; answered with a session token.
    pub const LOGIN: u8 = 20;
}

/// Security field ids.
pub mod field {
    /// A user name.
    pub const USER: u8 = 0;
    /// A password (as a credential: the client's bcrypt hash).
    pub const PASSWORD: u8 = 1;
    /// The old password of CHANGE_PASSWORD (a credential).
    pub const OLD_PASSWORD: u8 = 2;
    /// LOGIN's credential.
    pub const CREDENTIAL: u8 = 3;
    /// A clear-text password (external authentication).
    pub const CLEAR_PASSWORD: u8 = 4;
    /// A session token.
    pub const SESSION_TOKEN: u8 = 5;
    /// A session's time to live in seconds (u32).
    pub const SESSION_TTL: u8 = 6;
    /// A list of role names.
    pub const ROLES: u8 = 10;
    /// A role name.
    pub const ROLE: u8 = 11;
    /// A list of privileges.
    pub const PRIVILEGES: u8 = 12;
    /// An allow-list: addresses joined by commas.
    pub const WHITELIST: u8 = 13;
    /// A read quota (u32).
    pub const READ_QUOTA: u8 = 14;
    /// A write quota (u32).
    pub const WRITE_QUOTA: u8 = 15;
    /// Read statistics of a user (a count and u32s).
    pub const READ_INFO: u8 = 16;
    /// Write statistics of a user (a count and u32s).
    pub const WRITE_INFO: u8 = 17;
    /// Connections a user has open (u32).
    pub const CONNECTIONS: u8 = 18;
}

/// Largest field id a request may carry.
const FIELD_ID_MAX: u8 = field::CONNECTIONS;

/// A parsed security request: its command and its fields by id (the last of a repeated id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecurityRequest<'a> {
    /// The command code.
    pub command: u8,
    fields: [Option<&'a [u8]>; FIELD_ID_MAX as usize + 1],
}

impl<'a> SecurityRequest<'a> {
    /// Parses a security frame's body: the header, then fields to the end.
    ///
    /// # Errors
    /// [`Malformed`] for a short header, a field size of 0, a field past the body's end, or
    /// an unknown field id.
    pub fn parse(body: &'a [u8]) -> Result<SecurityRequest<'a>, Malformed> {
        let (header, mut rest) = body
            .split_first_chunk::<SECURITY_HEADER_SIZE_BYTES>()
            .ok_or(Malformed::new("security header too short"))?;
        let mut request = SecurityRequest {
            command: header[2],
            fields: [None; FIELD_ID_MAX as usize + 1],
        };
        while !rest.is_empty() {
            let (size, after) = rest
                .split_first_chunk::<4>()
                .ok_or(Malformed::new("security field header too short"))?;
            let size = usize::try_from(u32::from_be_bytes(*size))
                .map_err(|_| Malformed::new("security field size"))?;
            if size == 0 || size > after.len() {
                return Err(Malformed::new("security field size outside the message"));
            }
            let (id, data) = (after[0], &after[1..size]);
            let slot = request
                .fields
                .get_mut(usize::from(id))
                .ok_or(Malformed::new("unknown security field id"))?;
            *slot = Some(data);
            rest = &after[size..];
        }
        Ok(request)
    }

    /// The data of field `id`, if present.
    pub fn field(&self, id: u8) -> Option<&'a [u8]> {
        self.fields.get(usize::from(id)).copied().flatten()
    }
}

/// A privilege as the wire carries it: a code, and for data privileges (codes 10 and up) a
/// namespace and set (empty: any).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WirePrivilege<'a> {
    /// The privilege code.
    pub code: u8,
    /// The namespace, or empty.
    pub namespace: &'a [u8],
    /// The set, or empty.
    pub set: &'a [u8],
}

/// The first privilege code that carries a namespace and set.
const SCOPED_CODE_MIN: u8 = 10;

/// Parses a ROLES field: a u8 count, then per name a u8 length and the bytes.
///
/// # Errors
/// [`Malformed`] when the names overrun the field or bytes follow the last.
pub fn parse_names(data: &[u8]) -> Result<Vec<&[u8]>, Malformed> {
    let mut reader = Reader(data);
    let count = reader.byte()?;
    let names = (0..count)
        .map(|_| reader.short_string())
        .collect::<Result<Vec<_>, _>>()?;
    reader.end()?;
    Ok(names)
}

/// Parses a PRIVILEGES field: a u8 count, then per privilege a u8 code and, for codes of 10
/// and up, a u8-length namespace and a u8-length set.
///
/// # Errors
/// [`Malformed`] when the privileges overrun the field or bytes follow the last.
pub fn parse_privileges(data: &[u8]) -> Result<Vec<WirePrivilege<'_>>, Malformed> {
    let mut reader = Reader(data);
    let count = reader.byte()?;
    let mut privileges = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let code = reader.byte()?;
        let (namespace, set) = if code >= SCOPED_CODE_MIN {
            (reader.short_string()?, reader.short_string()?)
        } else {
            (&[][..], &[][..])
        };
        privileges.push(WirePrivilege {
            code,
            namespace,
            set,
        });
    }
    reader.end()?;
    Ok(privileges)
}

/// Parses a u32 field (a quota, a TTL).
///
/// # Errors
/// [`Malformed`] unless the data is exactly 4 bytes.
pub fn parse_u32(data: &[u8]) -> Result<u32, Malformed> {
    <[u8; 4]>::try_from(data)
        .map(u32::from_be_bytes)
        .map_err(|_| Malformed::new("a u32 security field is not 4 bytes"))
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, Malformed> {
        let (&byte, rest) = self
            .0
            .split_first()
            .ok_or(Malformed::new("security list overruns its field"))?;
        self.0 = rest;
        Ok(byte)
    }

    fn short_string(&mut self) -> Result<&'a [u8], Malformed> {
        let length = usize::from(self.byte()?);
        if length > self.0.len() {
            return Err(Malformed::new("security list overruns its field"));
        }
        let (text, rest) = self.0.split_at(length);
        self.0 = rest;
        Ok(text)
    }

    fn end(&self) -> Result<(), Malformed> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Malformed::new("bytes after a security list"))
        }
    }
}

/// Appends a complete security reply frame carrying `result_code` and no fields: the 24
/// bytes every reply but LOGIN's and the queries' is.
pub fn write_security_response(out: &mut Vec<u8>, result_code: u8) {
    let start = begin_proto(out);
    let record = begin_record(out);
    finish_record(out, record, result_code, 0);
    finish_proto(out, start, ProtoType::Security);
}

/// Appends a complete security request: `command` with `fields` (id, data), as clients send.
pub fn write_security_request(out: &mut Vec<u8>, command: u8, fields: &[(u8, &[u8])]) {
    let start = begin_proto(out);
    let record = begin_record(out);
    out[record + 2] = command;
    for (id, data) in fields {
        write_field(out, *id, data);
    }
    finish_record(
        out,
        record,
        0,
        u8::try_from(fields.len()).unwrap_or(u8::MAX),
    );
    finish_proto(out, start, ProtoType::Security);
}

/// Appends LOGIN's successful reply: the session token and its time to live.
pub fn write_login_response(out: &mut Vec<u8>, token: &[u8], ttl_s: u32) {
    let start = begin_proto(out);
    let record = begin_record(out);
    write_field(out, field::SESSION_TOKEN, token);
    write_field(out, field::SESSION_TTL, &ttl_s.to_be_bytes());
    finish_record(out, record, 0, 2);
    finish_proto(out, start, ProtoType::Security);
}

/// Reserves a record's 16-byte header at the end of `out`; returns where it starts.
pub fn begin_record(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; SECURITY_HEADER_SIZE_BYTES]);
    start
}

/// Fills the header reserved at `start` with the result code and field count.
pub fn finish_record(out: &mut [u8], start: usize, result_code: u8, field_count: u8) {
    out[start + 1] = result_code;
    out[start + 3] = field_count;
}

/// Appends one field.
pub fn write_field(out: &mut Vec<u8>, id: u8, data: &[u8]) {
    write_field_header(out, id, data.len());
    out.extend_from_slice(data);
}

/// Appends a ROLES field (names longer than 255 bytes are cut; none are kept so).
pub fn write_names_field<'a>(
    out: &mut Vec<u8>,
    id: u8,
    names: impl ExactSizeIterator<Item = &'a [u8]>,
) {
    let header = out.len();
    write_field_header(out, id, 0);
    out.push(u8::try_from(names.len()).unwrap_or(u8::MAX));
    for name in names.take(usize::from(u8::MAX)) {
        push_short_string(out, name);
    }
    patch_field_size(out, header);
}

/// Appends a PRIVILEGES field.
pub fn write_privileges_field(out: &mut Vec<u8>, privileges: &[WirePrivilege<'_>]) {
    let header = out.len();
    write_field_header(out, field::PRIVILEGES, 0);
    let privileges = &privileges[..privileges.len().min(usize::from(u8::MAX))];
    out.push(u8::try_from(privileges.len()).unwrap_or(u8::MAX));
    for privilege in privileges {
        out.push(privilege.code);
        if privilege.code >= SCOPED_CODE_MIN {
            push_short_string(out, privilege.namespace);
            push_short_string(out, privilege.set);
        }
    }
    patch_field_size(out, header);
}

/// Appends a READ_INFO or WRITE_INFO field: a count and u32s.
pub fn write_info_field(out: &mut Vec<u8>, id: u8, values: &[u32]) {
    let values = &values[..values.len().min(usize::from(u8::MAX))];
    write_field_header(out, id, 1 + 4 * values.len());
    out.push(u8::try_from(values.len()).unwrap_or(u8::MAX));
    for value in values {
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends the frame that ends a query's answer: one record with result [`QUERY_END`].
pub fn write_query_end(out: &mut Vec<u8>) {
    write_security_response(out, QUERY_END);
}

fn write_field_header(out: &mut Vec<u8>, id: u8, data_length: usize) {
    let size = u32::try_from(data_length + 1).unwrap_or(u32::MAX);
    out.extend_from_slice(&size.to_be_bytes());
    out.push(id);
}

fn patch_field_size(out: &mut [u8], header: usize) {
    let size = u32::try_from(out.len() - header - 4).unwrap_or(u32::MAX);
    out[header..header + 4].copy_from_slice(&size.to_be_bytes());
}

fn push_short_string(out: &mut Vec<u8>, text: &[u8]) {
    let text = &text[..text.len().min(usize::from(u8::MAX))];
    out.push(u8::try_from(text.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode_frame;

    /// The body of a request frame as [`write_security_request`] writes it.
    fn request(command: u8, fields: &[(u8, &[u8])]) -> Vec<u8> {
        let mut frame = Vec::new();
        write_security_request(&mut frame, command, fields);
        frame.split_off(8)
    }

    #[test]
    fn security_reply_is_a_type_two_frame_of_24_bytes_with_the_result_code() {
        let mut out = Vec::new();
        write_security_response(&mut out, 52);
        assert_eq!(out.len(), 8 + SECURITY_HEADER_SIZE_BYTES);
        let frame = decode_frame(&out, 1024).expect("valid").expect("complete");
        assert_eq!(frame.proto_type, ProtoType::Security);
        assert_eq!(frame.body[1], 52);
        assert!(frame.body[2..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_request_is_parsed_to_its_end_whatever_its_field_count_says() {
        let mut body = request(
            command::CREATE_ROLE,
            &[(field::ROLE, b"reader"), (field::WHITELIST, b"10.0.0.1")],
        );
        // Go v7 counts one field here for two.
        body[3] = 1;
        let parsed = SecurityRequest::parse(&body).expect("parses");
        assert_eq!(parsed.command, command::CREATE_ROLE);
        assert_eq!(parsed.field(field::ROLE), Some(&b"reader"[..]));
        assert_eq!(parsed.field(field::WHITELIST), Some(&b"10.0.0.1"[..]));
        assert_eq!(parsed.field(field::USER), None);
    }

    #[test]
    fn malformed_requests_are_refused() {
        assert!(SecurityRequest::parse(&[0; 15]).is_err());
        let mut body = request(command::LOGIN, &[(field::USER, b"admin")]);
        body.truncate(body.len() - 1);
        assert!(
            SecurityRequest::parse(&body).is_err(),
            "a field past the end"
        );
        let mut zero_size = request(command::LOGIN, &[]);
        zero_size.extend_from_slice(&[0, 0, 0, 0, field::USER]);
        assert!(SecurityRequest::parse(&zero_size).is_err());
        let unknown = request(command::LOGIN, &[(200, b"x")]);
        assert!(SecurityRequest::parse(&unknown).is_err());
        let huge = {
            let mut body = request(command::LOGIN, &[]);
            body.extend_from_slice(&u32::MAX.to_be_bytes());
            body.push(field::USER);
            body
        };
        assert!(
            SecurityRequest::parse(&huge).is_err(),
            "a declared size is never trusted"
        );
    }

    #[test]
    fn names_and_privileges_round_trip() {
        let mut out = Vec::new();
        let names: [&[u8]; 2] = [b"read", b"my-role"];
        write_names_field(&mut out, field::ROLES, names.into_iter());
        let body = [&[0u8; 16][..], &out].concat();
        let parsed = SecurityRequest::parse(&body).expect("parses");
        let data = parsed.field(field::ROLES).expect("present");
        assert_eq!(parse_names(data).expect("parses"), names.to_vec());

        let privileges = [
            WirePrivilege {
                code: 0,
                namespace: b"",
                set: b"",
            },
            WirePrivilege {
                code: 10,
                namespace: b"test",
                set: b"demo",
            },
        ];
        let mut out = vec![0u8; 16];
        write_privileges_field(&mut out, &privileges);
        let parsed = SecurityRequest::parse(&out).expect("parses");
        let data = parsed.field(field::PRIVILEGES).expect("present");
        assert_eq!(
            data,
            [
                2, 0, 10, 4, b't', b'e', b's', b't', 4, b'd', b'e', b'm', b'o'
            ]
        );
        assert_eq!(parse_privileges(data).expect("parses"), privileges.to_vec());
    }

    #[test]
    fn lists_that_overrun_or_trail_are_refused() {
        assert!(parse_names(&[]).is_err());
        assert!(parse_names(&[1, 5, b'a']).is_err());
        assert!(parse_names(&[0, 1]).is_err());
        assert!(parse_privileges(&[1, 10, 4, b't']).is_err());
        assert!(parse_privileges(&[1, 0, 0]).is_err());
        assert_eq!(parse_u32(&[0, 0, 1, 0]), Ok(256));
        assert!(parse_u32(&[0, 1]).is_err());
    }

    #[test]
    fn the_login_reply_carries_the_token_and_its_ttl() {
        let mut out = Vec::new();
        write_login_response(&mut out, b"token-bytes", 86_400);
        let frame = decode_frame(&out, 1024).expect("valid").expect("complete");
        assert_eq!(frame.body[1], 0);
        assert_eq!(frame.body[3], 2);
        let parsed = SecurityRequest::parse(frame.body).expect("parses");
        assert_eq!(
            parsed.field(field::SESSION_TOKEN),
            Some(&b"token-bytes"[..])
        );
        assert_eq!(
            parsed.field(field::SESSION_TTL).map(parse_u32),
            Some(Ok(86_400))
        );
    }
}

//! Replies of one command, written for the connection's protocol version (RESP2 or RESP3).

use wire_resp::RespVersion;
use wire_resp::encode;

/// Appends replies to the connection's output buffer.
pub struct Reply<'o> {
    out: &'o mut Vec<u8>,
    protocol: u8,
}

impl<'o> Reply<'o> {
    /// A writer for protocol version `protocol` (2 or 3).
    pub fn new(out: &'o mut Vec<u8>, protocol: u8) -> Reply<'o> {
        Reply { out, protocol }
    }

    fn version(&self) -> RespVersion {
        if self.protocol == 3 {
            RespVersion::Resp3
        } else {
            RespVersion::Resp2
        }
    }

    /// Switches the protocol (HELLO's own reply is already in the new version).
    pub fn set_protocol(&mut self, protocol: u8) {
        self.protocol = protocol;
    }

    /// `+OK` and other status replies.
    pub fn simple(&mut self, text: &str) {
        encode::simple_string(self.out, text.as_bytes());
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.simple("OK");
    }

    /// An error reply; `text` starts with its code (`ERR`, `WRONGTYPE`, ...).
    pub fn error(&mut self, text: &str) {
        encode::error(self.out, text.as_bytes());
    }

    /// An integer.
    pub fn integer(&mut self, value: i64) {
        encode::integer(self.out, value);
    }

    /// A bulk string.
    pub fn bulk(&mut self, bytes: &[u8]) {
        encode::bulk_string(self.out, bytes);
    }

    /// The null bulk string (RESP2 `$-1`, RESP3 `_`).
    pub fn null(&mut self) {
        encode::null(self.out, self.version());
    }

    /// The null array (RESP2 `*-1`, RESP3 `_`): EXEC aborted by WATCH, and other empty
    /// answers.
    pub fn null_array(&mut self) {
        encode::null_array(self.out, self.version());
    }

    /// Text for humans (INFO): a verbatim string in RESP3, a bulk string in RESP2.
    pub fn verbatim(&mut self, text: &[u8]) {
        encode::verbatim_string(self.out, self.version(), b"txt", text);
    }

    /// A double as Redis's `addReplyDouble` writes one: RESP3 `,1.5`, RESP2 the bulk string
    /// `1.5`; the text is Redis 7.2's (`d2string`).
    pub fn double(&mut self, value: f64) {
        encode::double(self.out, self.version(), value);
    }

    /// Whether the connection speaks RESP3 (some replies change shape, not only encoding).
    pub fn is_resp3(&self) -> bool {
        self.protocol == 3
    }

    /// Replies already encoded for this connection's protocol (an array's elements, written
    /// before their count was known).
    pub fn encoded(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    /// The header of an array of `length` elements.
    pub fn array(&mut self, length: usize) {
        encode::array_header(self.out, length);
    }

    /// The header of a map of `length` pairs (RESP2: an array of 2 × `length`).
    pub fn map(&mut self, length: usize) {
        encode::map_header(self.out, self.version(), length);
    }

    /// The header of a set of `length` elements (RESP2: an array).
    pub fn set(&mut self, length: usize) {
        encode::set_header(self.out, self.version(), length);
    }
}

//! Replies of one command, written for the connection's protocol version (RESP2 or RESP3).

use wire_resp::RespVersion;
use wire_resp::encode;

/// Appends replies to the connection's output buffer, up to a limit.
///
/// Invariant: once the buffer is longer than `len_max`, nothing more is written and
/// `overflowed` stays set; the connection then closes instead of sending the cut reply.
pub struct Reply<'o> {
    out: &'o mut Vec<u8>,
    protocol: u8,
    len_max: usize,
    overflowed: bool,
}

impl<'o> Reply<'o> {
    /// A writer for protocol version `protocol` (2 or 3), without a limit.
    pub fn new(out: &'o mut Vec<u8>, protocol: u8) -> Reply<'o> {
        Reply::with_limit(out, protocol, usize::MAX)
    }

    /// A writer that stops writing once `out` is longer than `len_max` bytes.
    pub fn with_limit(out: &'o mut Vec<u8>, protocol: u8, len_max: usize) -> Reply<'o> {
        Reply {
            out,
            protocol,
            len_max,
            overflowed: false,
        }
    }

    /// Whether the reply passed its limit (and was cut there).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Whether `extra_bytes` more would still fit: commands that gather a large answer
    /// before writing it ask first, and stop gathering when it would not.
    pub fn has_room_for(&mut self, extra_bytes: usize) -> bool {
        if self.out.len().saturating_add(extra_bytes) > self.len_max {
            self.overflowed = true;
        }
        !self.overflowed
    }

    /// Appends what `encode` writes, unless the reply already passed its limit; notes when
    /// this write passes it.
    fn write(&mut self, encode: impl FnOnce(&mut Vec<u8>, RespVersion)) {
        if self.has_room_for(0) {
            let version = self.version();
            encode(self.out, version);
            self.has_room_for(0);
        }
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
        self.write(|out, _| encode::simple_string(out, text.as_bytes()));
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.simple("OK");
    }

    /// An error reply; `text` starts with its code (`ERR`, `WRONGTYPE`, ...).
    pub fn error(&mut self, text: &str) {
        self.write(|out, _| encode::error(out, text.as_bytes()));
    }

    /// An integer.
    pub fn integer(&mut self, value: i64) {
        self.write(|out, _| encode::integer(out, value));
    }

    /// A bulk string.
    pub fn bulk(&mut self, bytes: &[u8]) {
        self.write(|out, _| encode::bulk_string(out, bytes));
    }

    /// The null bulk string (RESP2 `$-1`, RESP3 `_`).
    pub fn null(&mut self) {
        self.write(encode::null);
    }

    /// The null array (RESP2 `*-1`, RESP3 `_`): EXEC aborted by WATCH, and other empty
    /// answers.
    pub fn null_array(&mut self) {
        self.write(encode::null_array);
    }

    /// Text for humans (INFO): a verbatim string in RESP3, a bulk string in RESP2.
    pub fn verbatim(&mut self, text: &[u8]) {
        self.write(|out, version| encode::verbatim_string(out, version, b"txt", text));
    }

    /// A double as Redis's `addReplyDouble` writes one: RESP3 `,1.5`, RESP2 the bulk string
    /// `1.5`; the text is Redis 7.2's (`d2string`).
    pub fn double(&mut self, value: f64) {
        self.write(|out, version| encode::double(out, version, value));
    }

    /// Whether the connection speaks RESP3 (some replies change shape, not only encoding).
    pub fn is_resp3(&self) -> bool {
        self.protocol == 3
    }

    /// Replies already encoded for this connection's protocol (an array's elements, written
    /// before their count was known).
    pub fn encoded(&mut self, bytes: &[u8]) {
        self.write(|out, _| out.extend_from_slice(bytes));
    }

    /// The header of an array of `length` elements.
    pub fn array(&mut self, length: usize) {
        self.write(|out, _| encode::array_header(out, length));
    }

    /// The header of a map of `length` pairs (RESP2: an array of 2 × `length`).
    pub fn map(&mut self, length: usize) {
        self.write(|out, version| encode::map_header(out, version, length));
    }

    /// The header of a set of `length` elements (RESP2: an array).
    pub fn set(&mut self, length: usize) {
        self.write(|out, version| encode::set_header(out, version, length));
    }
}

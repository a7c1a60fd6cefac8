//! Replies of one command, written for the connection's protocol version (RESP2 or RESP3).

use wire_resp::RespVersion;
use wire_resp::encode;

use crate::client_memory::{CHARGE_STEP_BYTES, ClientMemory};

/// Appends replies to the connection's output buffer, up to a limit.
///
/// Invariants:
/// - Once the buffer is longer than `len_max`, nothing more is written and `overflowed`
///   stays set; the connection then closes instead of sending the cut reply.
/// - With a budget, the reply's growth past its first [`CHARGE_STEP_BYTES`] is charged to
///   `client-memory-max` as it grows (rounded up to whole steps), so that commands building
///   large replies at once cannot together pass it; a growth the limit cannot take cuts the
///   reply as `len_max` does. The charge is returned when the reply is dropped: by then the
///   connection reports the buffer itself.
/// - `check_at` is the smallest length at which a write must look at `len_max` or the budget.
pub struct Reply<'o> {
    out: &'o mut Vec<u8>,
    protocol: u8,
    len_max: usize,
    overflowed: bool,
    budget: Option<&'o ClientMemory>,
    over_budget: bool,
    start_len: usize,
    charged_bytes: usize,
    check_at: usize,
    /// Whether the engine refused the command's partition as not served here now.
    unavailable: bool,
    /// Whether a push message was written (see [`Reply::pushed`]).
    pushed: bool,
    /// Whether its error replies count in INFO's `errorstats` (not a scratch reply whose text
    /// is sent by another).
    counts_errors: bool,
    /// Error replies written, and how many of them were when a command last ended (see
    /// [`Reply::errors_since_mark`]).
    errors: (u32, u32),
}

impl<'o> Reply<'o> {
    /// A writer for protocol version `protocol` (2 or 3), without a limit.
    pub fn new(out: &'o mut Vec<u8>, protocol: u8) -> Reply<'o> {
        Reply::with_limit(out, protocol, usize::MAX)
    }

    /// A writer that stops writing once `out` is longer than `len_max` bytes.
    pub fn with_limit(out: &'o mut Vec<u8>, protocol: u8, len_max: usize) -> Reply<'o> {
        let start_len = out.len();
        Reply {
            out,
            protocol,
            len_max,
            overflowed: false,
            budget: None,
            over_budget: false,
            start_len,
            charged_bytes: 0,
            check_at: len_max,
            unavailable: false,
            pushed: false,
            counts_errors: true,
            errors: (0, 0),
        }
    }

    /// Charges the reply's growth to `memory` as it grows (when it has a limit).
    pub fn charged_to(mut self, memory: &'o ClientMemory) -> Reply<'o> {
        if memory.limit_bytes() != 0 {
            self.budget = Some(memory);
            self.check_at = self
                .len_max
                .min(self.start_len.saturating_add(CHARGE_STEP_BYTES));
        }
        self
    }

    /// Bytes in the buffer written to (replies before this one's included).
    pub fn buffer_len(&self) -> usize {
        self.out.len()
    }

    /// Notes that the engine refused the command with UNAVAILABLE: on a cluster, this node did
    /// not serve the key's partition at that instant (its map changing, or its write lease
    /// lapsed), so the connection may hold the command back and run it again.
    pub fn mark_unavailable(&mut self) {
        self.unavailable = true;
    }

    /// Whether [`Reply::mark_unavailable`] was called.
    pub fn was_unavailable(&self) -> bool {
        self.unavailable
    }

    /// Whether the reply was cut because all clients' memory could not take its growth.
    pub fn over_budget(&self) -> bool {
        self.over_budget
    }

    /// Whether the reply holds push messages (subscription confirmations, published
    /// messages): they are not replies, so CLIENT REPLY OFF or SKIP does not silence them, as
    /// Redis's `CLIENT_PUSHING` lets them through in either protocol version.
    pub fn pushed(&self) -> bool {
        self.pushed
    }

    /// Whether the reply passed its limit (and was cut there).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Whether `extra_bytes` more would still fit: commands that gather a large answer
    /// before writing it ask first, and stop gathering when it would not.
    pub fn has_room_for(&mut self, extra_bytes: usize) -> bool {
        let len = self.out.len().saturating_add(extra_bytes);
        if len > self.check_at {
            self.check_growth(len);
        }
        !self.overflowed
    }

    /// The reply is about to reach `len` bytes: within `len_max`, and with its growth charged.
    #[cold]
    fn check_growth(&mut self, len: usize) {
        if self.overflowed {
            return;
        }
        if len > self.len_max {
            self.overflowed = true;
            return;
        }
        let Some(memory) = self.budget else {
            return;
        };
        let growth = len - self.start_len;
        let needed = (growth - CHARGE_STEP_BYTES).div_ceil(CHARGE_STEP_BYTES) * CHARGE_STEP_BYTES;
        if memory.charge_reply(needed - self.charged_bytes) {
            self.charged_bytes = needed;
            self.check_at = self.len_max.min(
                self.start_len
                    .saturating_add(needed)
                    .saturating_add(CHARGE_STEP_BYTES),
            );
        } else {
            self.overflowed = true;
            self.over_budget = true;
        }
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

    /// A status reply of bytes that may not be UTF-8 (a MONITOR line, whose arguments are
    /// quoted to printable ASCII).
    pub fn simple_bytes(&mut self, text: &[u8]) {
        self.write(|out, _| encode::simple_string(out, text));
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.simple("OK");
    }

    /// A reply written only for its text, which another reply sends: its errors are not
    /// counted in INFO's `errorstats`.
    pub fn scratch(mut self) -> Reply<'o> {
        self.counts_errors = false;
        self
    }

    /// An error reply; `text` starts with its code (`ERR`, `WRONGTYPE`, ...). It counts in
    /// INFO's `errorstats`, also a command's inside a script, as in Redis (which then does not
    /// count the script's reply that passes the same error on).
    pub fn error(&mut self, text: &str) {
        self.errors.0 = self.errors.0.wrapping_add(1);
        if self.counts_errors {
            super::error_stats::record(text.as_bytes());
        }
        self.write(|out, _| encode::error(out, text.as_bytes()));
    }

    /// Whether an error reply was written since the last call, which marks where the errors
    /// are now: at a command's end, whether it failed, as Redis's `incrCommandStatsOnError`
    /// judges (the commands EXEC runs each take their own errors, leaving EXEC only its own).
    pub fn errors_since_mark(&mut self) -> bool {
        let (written, marked) = self.errors;
        self.errors.1 = written;
        written != marked
    }

    /// An error reply encoded already (`-` and the text, one line); counted in INFO's
    /// `errorstats` unless `counted_elsewhere` (a script passing on the error of a command it
    /// called, counted when the command answered it).
    pub fn error_line(&mut self, line: &[u8], counted_elsewhere: bool) {
        self.errors.0 = self.errors.0.wrapping_add(1);
        if self.counts_errors && !counted_elsewhere {
            let text = line.strip_prefix(b"-").unwrap_or(line);
            super::error_stats::record(text.strip_suffix(b"\r\n").unwrap_or(text));
        }
        self.encoded(line);
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

    /// The header of an out-of-band push of `length` elements (RESP2: an array).
    pub fn push(&mut self, length: usize) {
        self.pushed = true;
        self.write(|out, version| encode::push_header(out, version, length));
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

impl Drop for Reply<'_> {
    fn drop(&mut self) {
        if self.charged_bytes != 0
            && let Some(memory) = self.budget
        {
            memory.release_reply(self.charged_bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const MIB: usize = 1024 * 1024;

    /// Many connections building large replies at once must not pass `client-memory-max`
    /// together: each reply charges its growth as it goes, and the one the limit cannot take
    /// is cut.
    #[test]
    fn a_reply_charges_its_growth_and_is_cut_where_all_clients_would_pass_the_limit() {
        let memory = Arc::new(ClientMemory::new(4 * MIB as u64));
        let mut other_client = memory.open();
        other_client.charge(3 * MIB).unwrap();
        let value = vec![b'v'; 10_000];
        let mut out = Vec::new();
        let mut reply = Reply::with_limit(&mut out, 2, usize::MAX).charged_to(&memory);
        reply.bulk(&value);
        assert_eq!(
            memory.total_bytes(),
            3 * MIB,
            "a small reply charges nothing"
        );
        while !reply.overflowed() {
            reply.bulk(&value);
            assert!(memory.total_bytes() <= 4 * MIB);
        }
        assert!(reply.over_budget());
        let cut_at = reply.buffer_len();
        assert!(
            (MIB..MIB + CHARGE_STEP_BYTES + 2 * value.len()).contains(&cut_at),
            "the reply took the 1 MiB left and one step's grace: {cut_at}"
        );
        drop(reply);
        assert_eq!(memory.total_bytes(), 3 * MIB, "the reply's charge returns");
    }

    #[test]
    fn without_a_limit_a_reply_charges_nothing() {
        let memory = Arc::new(ClientMemory::new(0));
        let mut out = Vec::new();
        let mut reply = Reply::with_limit(&mut out, 2, usize::MAX).charged_to(&memory);
        reply.bulk(&vec![0; 3 * MIB]);
        assert!(!reply.overflowed());
        assert_eq!(memory.total_bytes(), 0);
    }
}

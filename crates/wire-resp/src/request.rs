//! Decoding one client request, multibulk (`*<n>\r\n$<len>\r\n<bytes>\r\n...`) or inline (a
//! line of words), into a reusable [`Args`], with Redis's limits and error texts
//! (`networking.c`: `processMultibulkBuffer`, `processInlineBuffer`; `sds.c`: `sdssplitargs`).
//!
//! Invariants:
//! - Nothing is reserved by a declared count or length. An argument is copied into the arena
//!   only once all its bytes are in the buffer, so the arena never holds more bytes than the
//!   buffer, and the argument list grows by one entry per at least six buffered bytes.
//! - A request that is not complete leaves its progress in [`Args`] (how many arguments are
//!   done, how far a line has been searched), so bytes that arrive in small pieces are examined
//!   once, not once per call. The next call must therefore be given the same unconsumed bytes,
//!   possibly extended (asserted: the buffer may not be shorter than the last one), or
//!   [`Args::clear`] must come first.
//! - A line is searched for its terminator as Redis's `strchr` searches a NUL-terminated buffer:
//!   a NUL byte before the terminator means "not found yet", and the line then only fails once
//!   64 KiB are buffered, as in Redis. Bulk payloads are never searched, so they may hold any
//!   byte.
//! - The byte after a CR that ends a count or bulk-length line, and the two bytes after a bulk
//!   payload, are skipped without being checked, as Redis skips them.
//! - No recursion: every loop advances through the buffer.

use crate::reply::BULK_LENGTH_MAX_BYTES;

/// Longest inline request, and longest a multibulk count line or bulk length line may grow
/// without its CR, once that many bytes are buffered: Redis's `PROTO_INLINE_MAX_SIZE`. Redis
/// checks it only when the terminator is missing, so a longer line that arrives in one read is
/// accepted; so is it here.
pub const INLINE_BYTES_MAX: usize = 64 * 1024;

/// Largest multibulk argument count: Redis 7.0 and later accept up to `INT_MAX` (before 7.0 the
/// limit was 1024 * 1024).
pub const ARGUMENT_COUNT_MAX: i64 = i32::MAX as i64;

/// Largest argument count a connection that must still authenticate may declare (Redis's
/// defence against CVE-2021-32675).
pub const UNAUTHENTICATED_ARGUMENT_COUNT_MAX: i64 = 10;

/// Largest bulk length a connection that must still authenticate may declare (CVE-2021-32675).
pub const UNAUTHENTICATED_BULK_LENGTH_MAX_BYTES: u64 = 16 * 1024;

/// Redis's default `client-query-buffer-limit`. The decoder does not enforce it: the caller owns
/// the query buffer and closes the connection, without a reply, once the buffered bytes (plus
/// those of commands queued by MULTI) exceed it. Without that limit a client could make a
/// request that never completes grow the buffer without bound.
pub const QUERY_BUFFER_LIMIT_BYTES: usize = 1024 * 1024 * 1024;

/// The query-buffer limit Redis applies instead while a connection must still authenticate.
pub const UNAUTHENTICATED_QUERY_BUFFER_LIMIT_BYTES: usize = 1024 * 1024;

/// Arena capacity an [`Args`] keeps from one request to the next. A request with bigger
/// arguments leaves a bigger arena behind; it is given back when the next request begins, so
/// an idle connection does not pin memory for its largest request ever. Equal to the inline
/// limit, so any inline request fits a warm arena.
const ARENA_RETAINED_BYTES_MAX: usize = INLINE_BYTES_MAX;

/// Argument slots an [`Args`] keeps from one request to the next, for the same reason. Redis
/// starts its `argv` at up to 1024 entries too.
const ARGUMENTS_RETAINED_MAX: usize = 1024;

/// The shortest buffered form of one bulk argument: `$0\r\n\r\n`. Bounds the argument list by
/// the buffer size.
const BULK_ARGUMENT_BYTES_MIN: usize = 6;

const _: () = assert!(UNAUTHENTICATED_BULK_LENGTH_MAX_BYTES < BULK_LENGTH_MAX_BYTES);
const _: () = assert!(UNAUTHENTICATED_ARGUMENT_COUNT_MAX < ARGUMENT_COUNT_MAX);
const _: () = assert!(ARGUMENT_COUNT_MAX <= u32::MAX as i64);
const _: () = assert!(INLINE_BYTES_MAX < UNAUTHENTICATED_QUERY_BUFFER_LIMIT_BYTES);
const _: () = assert!(UNAUTHENTICATED_QUERY_BUFFER_LIMIT_BYTES < QUERY_BUFFER_LIMIT_BYTES);
const _: () = assert!(BULK_LENGTH_MAX_BYTES < QUERY_BUFFER_LIMIT_BYTES as u64);

/// The limits a request is decoded under. They change with the server's configuration and the
/// connection's authentication, so the caller passes them on every call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    /// Largest bulk argument, Redis's `proto-max-bulk-len` (default 512 MiB).
    pub bulk_length_max_bytes: u64,
    /// True while the connection must authenticate before running commands (Redis's
    /// `authRequired`): counts above [`UNAUTHENTICATED_ARGUMENT_COUNT_MAX`] and bulk lengths
    /// above [`UNAUTHENTICATED_BULK_LENGTH_MAX_BYTES`] are then errors.
    pub unauthenticated: bool,
}

impl RequestLimits {
    /// Redis's defaults for an authenticated connection (or a server without a password).
    pub const DEFAULT: Self = Self {
        bulk_length_max_bytes: BULK_LENGTH_MAX_BYTES,
        unauthenticated: false,
    };
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A request Redis refuses. Redis replies with [`RequestError::write_reply`]'s bytes and then
/// closes the connection, and so must the caller; the rest of the buffer is not parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// No LF within [`INLINE_BYTES_MAX`] bytes of an inline request.
    InlineTooBig,
    /// An inline request with an unterminated quote, or a closing quote followed by something
    /// other than a space.
    UnbalancedQuotes,
    /// No CR within [`INLINE_BYTES_MAX`] bytes of a multibulk count line (`*<n>`).
    MultibulkCountTooBig,
    /// A multibulk count that is not an integer or is above [`ARGUMENT_COUNT_MAX`].
    InvalidMultibulkLength,
    /// A count above [`UNAUTHENTICATED_ARGUMENT_COUNT_MAX`] before authentication.
    UnauthenticatedMultibulkLength,
    /// No CR within [`INLINE_BYTES_MAX`] bytes of a bulk length line (`$<len>`).
    BulkCountTooBig,
    /// A bulk length line that does not start with `$`.
    ExpectedDollar {
        /// The byte found instead.
        got: u8,
    },
    /// A bulk length that is not an integer, is negative or is above
    /// [`RequestLimits::bulk_length_max_bytes`].
    InvalidBulkLength,
    /// A bulk length above [`UNAUTHENTICATED_BULK_LENGTH_MAX_BYTES`] before authentication.
    UnauthenticatedBulkLength,
}

impl RequestError {
    /// Appends the error reply Redis sends before closing the connection, the same in RESP2
    /// and RESP3: `-ERR Protocol error: <what>\r\n`.
    pub fn write_reply(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"-ERR Protocol error: ");
        match *self {
            Self::ExpectedDollar { got } => {
                out.extend_from_slice(b"expected '$', got '");
                // Redis formats the byte with %c and then turns CR and LF into spaces.
                out.push(if matches!(got, b'\r' | b'\n') {
                    b' '
                } else {
                    got
                });
                out.push(b'\'');
            }
            _ => out.extend_from_slice(self.description().as_bytes()),
        }
        out.extend_from_slice(b"\r\n");
    }

    /// The text after "Protocol error: " for every error but [`RequestError::ExpectedDollar`].
    fn description(&self) -> &'static str {
        match self {
            Self::InlineTooBig => "too big inline request",
            Self::UnbalancedQuotes => "unbalanced quotes in request",
            Self::MultibulkCountTooBig => "too big mbulk count string",
            Self::InvalidMultibulkLength => "invalid multibulk length",
            Self::UnauthenticatedMultibulkLength => "unauthenticated multibulk length",
            Self::BulkCountTooBig => "too big bulk count string",
            Self::ExpectedDollar { .. } => "expected '$'",
            Self::InvalidBulkLength => "invalid bulk length",
            Self::UnauthenticatedBulkLength => "unauthenticated bulk length",
        }
    }
}

/// The error text as the client sees it, code first: `ERR Protocol error: <what>`. A
/// non-printable byte in [`RequestError::ExpectedDollar`] is escaped here, so for the exact reply
/// bytes use [`RequestError::write_reply`].
impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ERR Protocol error: ")?;
        match self {
            Self::ExpectedDollar { got } => write!(f, "expected '$', got '{}'", got.escape_ascii()),
            other => f.write_str(other.description()),
        }
    }
}

impl std::error::Error for RequestError {}

/// The arguments of one request, owned by a connection and reused for every request: one byte
/// arena holding the arguments back to back, and where each one ends. Once the arena and the
/// list have grown to a connection's usual request, decoding allocates nothing.
///
/// Between a call that returned `Ok(None)` and the next call it also holds the request's
/// progress; see [`decode_request`].
#[derive(Clone, Debug, Default)]
pub struct Args {
    /// The arguments' bytes, back to back.
    arena: Vec<u8>,
    /// Where each argument ends in `arena`; argument `i` starts where argument `i - 1` ends.
    ends: Vec<usize>,
    /// How far an incomplete request got; `None` between requests.
    progress: Option<Progress>,
    /// The buffer length of the last call that returned `Ok(None)`; a resumed call's buffer is
    /// at least this long.
    resume_bytes_min: usize,
}

impl Args {
    /// An empty argument list; it grows with the first requests.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many arguments the request has. Zero after an empty request (an empty inline line,
    /// or a multibulk count of zero or less), which Redis skips silently.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there is no argument: an empty request that must be skipped.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Argument `index`; argument 0 is the command name.
    ///
    /// # Panics
    ///
    /// When `index >= self.len()`.
    pub fn get(&self, index: usize) -> &[u8] {
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        &self.arena[start..self.ends[index]]
    }

    /// Argument 0, the command name, or `None` for an empty request.
    pub fn command(&self) -> Option<&[u8]> {
        (!self.is_empty()).then(|| self.get(0))
    }

    /// True when argument 0 equals `name`, ignoring ASCII case, as Redis looks up commands.
    pub fn is_command(&self, name: &[u8]) -> bool {
        self.command()
            .is_some_and(|command| command.eq_ignore_ascii_case(name))
    }

    /// The arguments in order, the command name first.
    pub fn iter(&self) -> ArgsIter<'_> {
        ArgsIter {
            args: self,
            front: 0,
            back: self.len(),
        }
    }

    /// The total length of the arguments (Redis's `argv_len_sum`), for memory accounting such
    /// as the query-buffer limit of commands queued by MULTI.
    pub fn total_bytes(&self) -> usize {
        self.arena.len()
    }

    /// Heap bytes held by the arena and the argument list, for per-connection memory reports.
    pub fn allocated_bytes(&self) -> usize {
        self.arena.capacity() + self.ends.capacity() * size_of::<usize>()
    }

    /// Forgets the arguments and any incomplete request, so that the next
    /// [`decode_request`] may be given an unrelated buffer.
    pub fn clear(&mut self) {
        self.begin_request();
        self.progress = None;
        self.resume_bytes_min = 0;
    }

    /// Empties the arena and the list for a new request, giving back memory a large request
    /// left behind.
    fn begin_request(&mut self) {
        self.arena.clear();
        self.ends.clear();
        if self.arena.capacity() > ARENA_RETAINED_BYTES_MAX {
            self.arena.shrink_to(ARENA_RETAINED_BYTES_MAX);
        }
        if self.ends.capacity() > ARGUMENTS_RETAINED_MAX {
            self.ends.shrink_to(ARGUMENTS_RETAINED_MAX);
        }
    }

    fn push(&mut self, argument: &[u8]) {
        self.arena.extend_from_slice(argument);
        self.ends.push(self.arena.len());
    }
}

/// Arguments built from parts (a command a script or a test makes), as a request of those
/// parts decodes.
impl<A: AsRef<[u8]>> FromIterator<A> for Args {
    fn from_iter<I: IntoIterator<Item = A>>(parts: I) -> Self {
        let mut args = Args::new();
        for part in parts {
            args.push(part.as_ref());
        }
        args
    }
}

/// The arguments of an [`Args`] in order.
#[derive(Clone, Debug)]
pub struct ArgsIter<'a> {
    args: &'a Args,
    front: usize,
    back: usize,
}

impl<'a> Iterator for ArgsIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.front == self.back {
            return None;
        }
        self.front += 1;
        Some(self.args.get(self.front - 1))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let remaining = self.back - self.front;
        (remaining, Some(remaining))
    }
}

impl DoubleEndedIterator for ArgsIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front == self.back {
            return None;
        }
        self.back -= 1;
        Some(self.args.get(self.back))
    }
}

impl ExactSizeIterator for ArgsIter<'_> {}

impl<'a> IntoIterator for &'a Args {
    type Item = &'a [u8];
    type IntoIter = ArgsIter<'a>;

    fn into_iter(self) -> ArgsIter<'a> {
        self.iter()
    }
}

/// Decodes the request at the start of `buf` into `args` under [`RequestLimits::DEFAULT`]; see
/// [`decode_request_with_limits`].
///
/// # Errors
///
/// As [`decode_request_with_limits`].
pub fn decode_request(buf: &[u8], args: &mut Args) -> Result<Option<usize>, RequestError> {
    decode_request_with_limits(buf, args, RequestLimits::DEFAULT)
}

/// Decodes the request at the start of `buf` into `args`.
///
/// Returns `Ok(Some(consumed))` once a whole request is in `buf`: its arguments are in `args`
/// and it spans `buf[..consumed]`, so the next request starts at `buf[consumed..]`. An empty
/// request (an empty or blank inline line, `*0`, `*-1`) leaves `args` empty; Redis skips it
/// without a reply. Returns `Ok(None)` when more bytes are needed; `args` then holds the
/// request's progress, and the next call must be given the same bytes extended by what
/// arrived (or come after [`Args::clear`]).
///
/// A buffer starting with `*` holds a multibulk request; anything else is an inline request,
/// a line split into words like `sdssplitargs` (quotes, `\x41`-style escapes).
///
/// # Errors
///
/// A [`RequestError`] when Redis would answer with a protocol error and close the connection.
/// `args` is then empty and the caller must close the connection after writing
/// [`RequestError::write_reply`].
///
/// # Panics
///
/// When resuming an incomplete request with a buffer shorter than the last one.
pub fn decode_request_with_limits(
    buf: &[u8],
    args: &mut Args,
    limits: RequestLimits,
) -> Result<Option<usize>, RequestError> {
    let progress = match args.progress.take() {
        Some(progress) => {
            assert!(
                buf.len() >= args.resume_bytes_min,
                "an incomplete request resumed with {} bytes after {}: pass the same unconsumed \
                 bytes again, or call Args::clear first",
                buf.len(),
                args.resume_bytes_min,
            );
            progress
        }
        None => {
            let Some(&first) = buf.first() else {
                return Ok(None);
            };
            args.begin_request();
            if first == b'*' {
                Progress::Count(LineSearch::default())
            } else {
                Progress::Inline(LineSearch::default())
            }
        }
    };
    let step = match progress {
        Progress::Inline(line) => decode_inline(buf, args, line),
        Progress::Count(line) => decode_count(buf, args, line, &limits),
        Progress::Bulks {
            position,
            remaining,
            line,
        } => decode_bulks(buf, args, position, remaining, line, &limits),
    };
    match step {
        Ok(Step::Done(consumed)) => Ok(Some(consumed)),
        Ok(Step::Pending(progress)) => {
            args.progress = Some(progress);
            args.resume_bytes_min = buf.len();
            Ok(None)
        }
        Err(error) => {
            args.clear();
            Err(error)
        }
    }
}

/// How far an incomplete request got. Positions count from the start of the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Progress {
    /// An inline request whose LF has not been found.
    Inline(LineSearch),
    /// A multibulk request whose count line is not complete.
    Count(LineSearch),
    /// A multibulk request whose count is known: the arguments before `position` are in the
    /// arena and `remaining` more start at `position`.
    Bulks {
        position: usize,
        remaining: u32,
        line: LineSearch,
    },
}

/// How far the line being read has been searched for its terminator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct LineSearch {
    /// Bytes from the line start known to hold neither the terminator nor a NUL, or the offset
    /// of the NUL when `stalled`.
    searched: usize,
    /// A NUL came before the terminator: like Redis's `strchr`, the search stops there for good.
    stalled: bool,
}

/// What one call achieved.
enum Step {
    /// The request is complete and spans this many bytes.
    Done(usize),
    /// More bytes are needed.
    Pending(Progress),
}

fn decode_inline(buf: &[u8], args: &mut Args, mut line: LineSearch) -> Result<Step, RequestError> {
    let Some(newline) = find_line_end(buf, 0, b'\n', &mut line) else {
        if buf.len() > INLINE_BYTES_MAX {
            return Err(RequestError::InlineTooBig);
        }
        return Ok(Step::Pending(Progress::Inline(line)));
    };
    let mut end = newline;
    if end > 0 && buf[end - 1] == b'\r' {
        end -= 1;
    }
    split_inline(&buf[..end], args)?;
    Ok(Step::Done(newline + 1))
}

fn decode_count(
    buf: &[u8],
    args: &mut Args,
    mut line: LineSearch,
    limits: &RequestLimits,
) -> Result<Step, RequestError> {
    let (count, after_line) = if let Some((count, after_line)) = parse_plain_line(buf, 0, b'*') {
        (count, after_line)
    } else {
        let Some(cr) = find_line_end(buf, 0, b'\r', &mut line) else {
            if buf.len() > INLINE_BYTES_MAX {
                return Err(RequestError::MultibulkCountTooBig);
            }
            return Ok(Step::Pending(Progress::Count(line)));
        };
        // Redis wants one byte after the CR (the LF, which it does not check).
        if cr + 2 > buf.len() {
            return Ok(Step::Pending(Progress::Count(line)));
        }
        let count = parse_integer(&buf[1..cr]).ok_or(RequestError::InvalidMultibulkLength)?;
        (count, cr + 2)
    };
    if count > ARGUMENT_COUNT_MAX {
        return Err(RequestError::InvalidMultibulkLength);
    }
    if limits.unauthenticated && count > UNAUTHENTICATED_ARGUMENT_COUNT_MAX {
        return Err(RequestError::UnauthenticatedMultibulkLength);
    }
    let Ok(remaining @ 1..) = u32::try_from(count) else {
        // Zero or negative: an empty request, skipped.
        return Ok(Step::Done(after_line));
    };
    decode_bulks(
        buf,
        args,
        after_line,
        remaining,
        LineSearch::default(),
        limits,
    )
}

fn decode_bulks(
    buf: &[u8],
    args: &mut Args,
    mut position: usize,
    mut remaining: u32,
    mut line: LineSearch,
    limits: &RequestLimits,
) -> Result<Step, RequestError> {
    while remaining > 0 {
        let Some((payload_start, length)) = parse_bulk_line(buf, position, &mut line, limits)?
        else {
            return Ok(Step::Pending(Progress::Bulks {
                position,
                remaining,
                line,
            }));
        };
        // Compared, never reserved: the payload and the two bytes after it must be buffered.
        let available = (buf.len() - payload_start) as u64;
        if available < length.saturating_add(2) {
            return Ok(Step::Pending(Progress::Bulks {
                position,
                remaining,
                line,
            }));
        }
        let payload_end = payload_start + length as usize;
        args.push(&buf[payload_start..payload_end]);
        position = payload_end + 2;
        debug_assert!(args.len() * BULK_ARGUMENT_BYTES_MIN <= position);
        remaining -= 1;
        line = LineSearch::default();
    }
    Ok(Step::Done(position))
}

/// Parses the bulk length line at `position`; returns where the payload starts and its length,
/// or `None` when the line is not complete.
fn parse_bulk_line(
    buf: &[u8],
    position: usize,
    line: &mut LineSearch,
    limits: &RequestLimits,
) -> Result<Option<(usize, u64)>, RequestError> {
    let (length, payload_start) = if let Some(parsed) = parse_plain_line(buf, position, b'$') {
        parsed
    } else {
        let Some(cr) = find_line_end(buf, position, b'\r', line) else {
            if buf.len() - position > INLINE_BYTES_MAX {
                return Err(RequestError::BulkCountTooBig);
            }
            return Ok(None);
        };
        // Redis wants one byte after the CR (the LF, which it does not check).
        if cr + 2 > buf.len() {
            return Ok(None);
        }
        if buf[position] != b'$' {
            return Err(RequestError::ExpectedDollar { got: buf[position] });
        }
        let length =
            parse_integer(&buf[position + 1..cr]).ok_or(RequestError::InvalidBulkLength)?;
        (length, cr + 2)
    };
    let length = u64::try_from(length).map_err(|_| RequestError::InvalidBulkLength)?;
    if length > limits.bulk_length_max_bytes {
        return Err(RequestError::InvalidBulkLength);
    }
    if limits.unauthenticated && length > UNAUTHENTICATED_BULK_LENGTH_MAX_BYTES {
        return Err(RequestError::UnauthenticatedBulkLength);
    }
    Ok(Some((payload_start, length)))
}

/// The fast path for the lines clients send: `prefix`, 1 to 18 digits without a leading zero,
/// CR and one more byte. Returns the number and where the next line starts, or `None` for
/// anything else (which the exact, slower path then handles with the same outcome).
// Forced inline: it runs once per line, and inlining it into its two callers took the
// 16-command SET pipeline benchmark from about 29 to 23 ns per command.
#[inline(always)]
fn parse_plain_line(buf: &[u8], position: usize, prefix: u8) -> Option<(i64, usize)> {
    /// More digits could overflow; such lines take the slow path.
    const DIGITS_MAX: usize = 18;
    if *buf.get(position)? != prefix {
        return None;
    }
    let digits_start = position + 1;
    let mut index = digits_start;
    let mut value: i64 = 0;
    loop {
        match *buf.get(index)? {
            byte @ b'0'..=b'9' if index - digits_start < DIGITS_MAX => {
                value = value * 10 + i64::from(byte - b'0');
                index += 1;
            }
            b'\r' => break,
            _ => return None,
        }
    }
    let digit_count = index - digits_start;
    let leading_zero = digit_count > 1 && buf[digits_start] == b'0';
    if digit_count == 0 || leading_zero || index + 2 > buf.len() {
        return None;
    }
    Some((value, index + 2))
}

/// Finds the first `terminator` at or after `start`, as `strchr` would over a NUL-terminated
/// buffer: a NUL first means "not found", now and on every later call for this line. Resumes
/// where `search` left off.
fn find_line_end(
    buf: &[u8],
    start: usize,
    terminator: u8,
    search: &mut LineSearch,
) -> Option<usize> {
    if search.stalled {
        return None;
    }
    let from = start + search.searched;
    let rest = buf.get(from..).unwrap_or(&[]);
    match rest
        .iter()
        .position(|&byte| byte == terminator || byte == 0)
    {
        Some(offset) if rest[offset] == terminator => Some(from + offset),
        Some(offset) => {
            search.searched += offset;
            search.stalled = true;
            None
        }
        None => {
            search.searched += rest.len();
            None
        }
    }
}

/// Parses a decimal integer as Redis's `string2ll`: an optional `-`, no `+`, no leading zeros,
/// no spaces, at most 20 bytes, within `i64`.
fn parse_integer(text: &[u8]) -> Option<i64> {
    /// Redis's `LONG_STR_SIZE`: a text this long or longer is refused outright.
    const TEXT_BYTES_LIMIT: usize = 21;
    if text.is_empty() || text.len() >= TEXT_BYTES_LIMIT {
        return None;
    }
    if text == b"0" {
        return Some(0);
    }
    let (negative, digits) = match text.split_first() {
        Some((b'-', digits)) => (true, digits),
        _ => (false, text),
    };
    if !matches!(digits.first(), Some(b'1'..=b'9')) {
        return None;
    }
    let mut magnitude: u64 = 0;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude
            .checked_mul(10)?
            .checked_add(u64::from(byte - b'0'))?;
    }
    if negative {
        0_i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Splits `line` into words as Redis's `sdssplitargs` does (quotes, `\x41`-style escapes),
/// as Redis splits a function library's `#!` line; `None` where it fails (an unbalanced
/// quote, a closing quote followed by a non-space).
pub fn split_args(line: &[u8]) -> Option<Args> {
    let mut args = Args::new();
    split_inline(line, &mut args).ok()?;
    Some(args)
}

/// Splits an inline line into arguments as `sdssplitargs` does, appending them to `args`.
fn split_inline(line: &[u8], args: &mut Args) -> Result<(), RequestError> {
    let mut index = 0;
    loop {
        while index < line.len() && is_c_space(line[index]) {
            index += 1;
        }
        if index == line.len() {
            return Ok(());
        }
        index = split_word(line, index, &mut args.arena)?;
        args.ends.push(args.arena.len());
    }
}

/// Appends the word starting at `index` to `arena`; returns where the search for the next word
/// starts. An unquoted word ends at a space, tab, CR or LF (not at the other `isspace` bytes,
/// VT and FF, which `sdssplitargs` keeps inside words); a quote inside it opens a quoted part
/// that ends the word when it closes.
fn split_word(line: &[u8], index: usize, arena: &mut Vec<u8>) -> Result<usize, RequestError> {
    let rest = &line[index..];
    let run = rest
        .iter()
        .position(|&byte| matches!(byte, b' ' | b'\t' | b'\r' | b'\n' | b'"' | b'\''))
        .unwrap_or(rest.len());
    arena.extend_from_slice(&rest[..run]);
    let index = index + run;
    match line.get(index) {
        None => Ok(index),
        Some(b'"') => split_double_quoted(line, index + 1, arena),
        Some(b'\'') => split_single_quoted(line, index + 1, arena),
        // The blank that ends the word is skipped with it.
        Some(_) => Ok(index + 1),
    }
}

/// The inside of a `"..."` part starting at `index`: `\xHH`, `\n`, `\r`, `\t`, `\b`, `\a`, and
/// `\` before any other byte for that byte.
fn split_double_quoted(
    line: &[u8],
    mut index: usize,
    arena: &mut Vec<u8>,
) -> Result<usize, RequestError> {
    loop {
        match line.get(index) {
            None => return Err(RequestError::UnbalancedQuotes),
            Some(b'\\') => match line.get(index + 1..index + 4) {
                Some([b'x', high, low]) if high.is_ascii_hexdigit() && low.is_ascii_hexdigit() => {
                    arena.push(hex_value(*high) * 16 + hex_value(*low));
                    index += 4;
                }
                _ => {
                    // A backslash ending the line leaves the quote unterminated.
                    let escaped = *line.get(index + 1).ok_or(RequestError::UnbalancedQuotes)?;
                    arena.push(match escaped {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                    index += 2;
                }
            },
            Some(b'"') => return close_quote(line, index),
            Some(&byte) => {
                arena.push(byte);
                index += 1;
            }
        }
    }
}

/// The inside of a `'...'` part starting at `index`: only `\'` is an escape.
fn split_single_quoted(
    line: &[u8],
    mut index: usize,
    arena: &mut Vec<u8>,
) -> Result<usize, RequestError> {
    loop {
        match line.get(index) {
            None => return Err(RequestError::UnbalancedQuotes),
            Some(b'\\') if line.get(index + 1) == Some(&b'\'') => {
                arena.push(b'\'');
                index += 2;
            }
            Some(b'\'') => return close_quote(line, index),
            Some(&byte) => {
                arena.push(byte);
                index += 1;
            }
        }
    }
}

/// A closing quote at `index` must end the line or be followed by an `isspace` byte.
fn close_quote(line: &[u8], index: usize) -> Result<usize, RequestError> {
    match line.get(index + 1) {
        Some(&next) if !is_c_space(next) => Err(RequestError::UnbalancedQuotes),
        _ => Ok(index + 1),
    }
}

/// C's `isspace` in the "C" locale: space, tab, LF, VT, FF, CR.
fn is_c_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoded request's arguments and size.
    type Decoded = Option<(Vec<Vec<u8>>, usize)>;

    /// Decodes one request from `bytes` with fresh [`Args`].
    fn decode_one(bytes: &[u8]) -> Result<Decoded, RequestError> {
        let mut args = Args::new();
        let consumed = decode_request(bytes, &mut args)?;
        Ok(consumed.map(|consumed| (args.iter().map(<[u8]>::to_vec).collect(), consumed)))
    }

    fn arguments(bytes: &[u8]) -> Vec<Vec<u8>> {
        let (arguments, consumed) = decode_one(bytes).unwrap().unwrap();
        assert_eq!(
            consumed,
            bytes.len(),
            "{:?}",
            bytes.escape_ascii().to_string()
        );
        arguments
    }

    fn reply_text(error: RequestError) -> Vec<u8> {
        let mut out = Vec::new();
        error.write_reply(&mut out);
        out
    }

    #[test]
    fn arguments_built_from_parts_equal_the_request_of_those_parts_decoded() {
        let parts: [&[u8]; 4] = [b"SET", b"key", b"", b"\r\n$1"];
        let mut encoded = Vec::new();
        crate::encode_command(&mut encoded, &parts);
        let decoded = arguments(&encoded);
        let built: Args = parts.iter().collect();
        assert_eq!(
            built.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(),
            decoded
        );
        assert_eq!(built.total_bytes(), 10);
    }

    #[test]
    fn multibulk_request_decodes_its_arguments_and_size() {
        let bytes = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n";
        let (arguments, consumed) = decode_one(bytes).unwrap().unwrap();
        assert_eq!(arguments, [&b"SET"[..], b"key", b""]);
        assert_eq!(&bytes[consumed..], b"*1\r\n$4\r\nPING\r\n");
    }

    #[test]
    fn bulk_payloads_may_hold_any_byte() {
        let bytes = b"*2\r\n$3\r\nSET\r\n$6\r\n\r\n\0*$\n\r\n";
        assert_eq!(arguments(bytes), [&b"SET"[..], b"\r\n\0*$\n"]);
    }

    #[test]
    fn pipelined_requests_decode_one_per_call_on_the_rest_of_the_buffer() {
        let bytes = b"*1\r\n$4\r\nPING\r\nECHO hi\r\n\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        let expected: [&[&[u8]]; 4] = [&[b"PING"], &[b"ECHO", b"hi"], &[], &[b"GET", b"k"]];
        let mut args = Args::new();
        let mut start = 0;
        for want in expected {
            let consumed = decode_request(&bytes[start..], &mut args).unwrap().unwrap();
            assert_eq!(args.iter().collect::<Vec<_>>(), want);
            start += consumed;
        }
        assert_eq!(start, bytes.len());
        assert_eq!(decode_request(&bytes[start..], &mut args), Ok(None));
    }

    #[test]
    fn inline_requests_split_words_like_sdssplitargs() {
        let cases: [(&[u8], &[&[u8]]); 14] = [
            (b"SET key value\r\n", &[b"SET", b"key", b"value"]),
            (b"PING\n", &[b"PING"]),
            (b" \t GET   k \t \r\n", &[b"GET", b"k"]),
            (b"set \"a b\" 'c d'\n", &[b"set", b"a b", b"c d"]),
            (
                b"\"\\x41\\x4a\\n\\r\\t\\b\\a\\\"\\\\\\z\"\n",
                &[b"AJ\n\r\t\x08\x07\"\\z"],
            ),
            // An escape that is not \xHH keeps the character after the backslash.
            (b"\"\\xZZ\\x4\"\n", &[b"xZZx4"]),
            (b"'it\\'s' '\\n\\x41'\n", &[b"it's", b"\\n\\x41"]),
            // A quote inside a word opens a quoted part; its close ends the word.
            (b"foo\"bar baz\" next\n", &[b"foobar baz", b"next"]),
            (b"\"\" ''\n", &[b"", b""]),
            // VT and FF are blanks between words but stay inside one.
            (b"\x0ba\x0bb\x0c\n", &[b"a\x0bb\x0c"]),
            (b"a\rb\r\n", &[b"a", b"b"]),
            (b"\"a\"\x0b'b'\x0c\n", &[b"a", b"b"]),
            // Only one CR before the LF is the line ending; another is a blank.
            (b"x\r\r\n", &[b"x"]),
            (b"\xff\xfe \"\\xff\"\n", &[b"\xff\xfe", b"\xff"]),
        ];
        for (bytes, want) in cases {
            assert_eq!(arguments(bytes), want, "{}", bytes.escape_ascii());
        }
    }

    #[test]
    fn empty_lines_and_counts_below_one_are_empty_requests() {
        for bytes in [
            &b"\r\n"[..],
            b"\n",
            b"  \t\r\n",
            b"*0\r\n",
            b"*-1\r\n",
            b"*-10\r\n",
        ] {
            assert!(arguments(bytes).is_empty(), "{}", bytes.escape_ascii());
        }
        let mut args = Args::new();
        assert_eq!(decode_request(b"\r\nPING\r\n", &mut args), Ok(Some(2)));
        assert!(args.is_empty());
        assert_eq!(args.command(), None);
        assert!(!args.is_command(b"PING"));
    }

    #[test]
    fn unbalanced_quotes_are_refused() {
        for bytes in [
            // Redis's own test (tests/unit/protocol.tcl).
            &b"set \"\"\"test-key\"\"\" test-value\r\nping\r\n"[..],
            b"\"abc\n",
            b"'abc\r\n",
            b"\"a\"b\n",
            b"'a'b\n",
            b"\"abc\\\n",
            b"x \"a\\\"\n",
        ] {
            assert_eq!(
                decode_one(bytes),
                Err(RequestError::UnbalancedQuotes),
                "{}",
                bytes.escape_ascii()
            );
        }
    }

    #[test]
    fn error_replies_are_byte_exact() {
        let cases: [(RequestError, &[u8]); 10] = [
            (RequestError::InlineTooBig, b"too big inline request"),
            (
                RequestError::UnbalancedQuotes,
                b"unbalanced quotes in request",
            ),
            (
                RequestError::MultibulkCountTooBig,
                b"too big mbulk count string",
            ),
            (
                RequestError::InvalidMultibulkLength,
                b"invalid multibulk length",
            ),
            (
                RequestError::UnauthenticatedMultibulkLength,
                b"unauthenticated multibulk length",
            ),
            (RequestError::BulkCountTooBig, b"too big bulk count string"),
            (
                RequestError::ExpectedDollar { got: b'f' },
                b"expected '$', got 'f'",
            ),
            // Redis turns CR and LF in a formatted error into spaces.
            (
                RequestError::ExpectedDollar { got: b'\r' },
                b"expected '$', got ' '",
            ),
            (RequestError::InvalidBulkLength, b"invalid bulk length"),
            (
                RequestError::UnauthenticatedBulkLength,
                b"unauthenticated bulk length",
            ),
        ];
        for (error, text) in cases {
            let mut want = b"-ERR Protocol error: ".to_vec();
            want.extend_from_slice(text);
            want.extend_from_slice(b"\r\n");
            assert_eq!(reply_text(error), want, "{error:?}");
        }
        assert_eq!(
            RequestError::ExpectedDollar { got: 0xff }.to_string(),
            "ERR Protocol error: expected '$', got '\\xff'"
        );
        assert_eq!(
            RequestError::InvalidBulkLength.to_string(),
            "ERR Protocol error: invalid bulk length"
        );
    }

    #[test]
    fn multibulk_counts_follow_redis_limits() {
        assert_eq!(decode_one(b"*2147483647\r\n"), Ok(None));
        for bytes in [
            &b"*2147483648\r\n"[..],
            b"*3000000000\r\n",
            b"*99999999999999999999\r\n",
            b"*abc\r\n",
            b"*+1\r\n",
            b"*01\r\n",
            b"*-0\r\n",
            b"*\r\n",
            b"* 1\r\n",
            b"*1 \r\n",
        ] {
            let want = RequestError::InvalidMultibulkLength;
            assert_eq!(decode_one(bytes), Err(want), "{}", bytes.escape_ascii());
        }
    }

    #[test]
    fn bulk_lengths_follow_redis_limits() {
        let mut huge = b"*1\r\n$536870912\r\n".to_vec();
        huge.extend_from_slice(&[b'x'; 10]);
        assert_eq!(decode_one(&huge), Ok(None));
        for line in [
            &b"$536870913"[..],
            b"$-1",
            b"$-10",
            b"$blabla",
            b"$2000000000",
            b"$01",
            b"$",
            b"$+3",
            b"$9223372036854775808",
        ] {
            let mut bytes = b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n".to_vec();
            bytes.extend_from_slice(line);
            bytes.extend_from_slice(b"\r\n");
            let want = RequestError::InvalidBulkLength;
            assert_eq!(decode_one(&bytes), Err(want), "{}", line.escape_ascii());
        }
    }

    #[test]
    fn a_bulk_line_is_checked_for_its_dollar_only_once_its_cr_is_buffered() {
        // Redis's own tests (tests/unit/protocol.tcl).
        let got_f = RequestError::ExpectedDollar { got: b'f' };
        assert_eq!(
            decode_one(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n"),
            Err(got_f)
        );
        assert_eq!(decode_one(b"*1\r\nfoo\r\n"), Err(got_f));
        assert_eq!(decode_one(b"*1\r\nfoo"), Ok(None));
        assert_eq!(decode_one(b"*1\r\nfoo\r"), Ok(None));
        let got_cr = RequestError::ExpectedDollar { got: b'\r' };
        assert_eq!(decode_one(b"*1\r\n\r\n"), Err(got_cr));
    }

    #[test]
    fn the_byte_after_a_cr_and_after_a_payload_is_not_checked() {
        // Redis skips these bytes without looking, so neither may we refuse them.
        assert_eq!(arguments(b"*2\rX$3\rYfooZW$0\r\n\r\n"), [&b"foo"[..], b""]);
    }

    #[test]
    fn lines_without_their_terminator_fail_only_past_64_kib() {
        let mut inline = vec![b'a'; INLINE_BYTES_MAX];
        assert_eq!(decode_one(&inline), Ok(None));
        inline.push(b'a');
        assert_eq!(decode_one(&inline), Err(RequestError::InlineTooBig));
        // The limit applies only to a missing LF, as in Redis: a longer line that is all here
        // is a request.
        inline.push(b'\n');
        assert_eq!(arguments(&inline)[0].len(), INLINE_BYTES_MAX + 1);

        let mut count = b"*".to_vec();
        count.resize(INLINE_BYTES_MAX, b'1');
        assert_eq!(decode_one(&count), Ok(None));
        count.push(b'1');
        assert_eq!(decode_one(&count), Err(RequestError::MultibulkCountTooBig));

        let mut bulk = b"*1\r\n$".to_vec();
        bulk.resize(4 + INLINE_BYTES_MAX, b'1');
        assert_eq!(decode_one(&bulk), Ok(None));
        bulk.push(b'1');
        assert_eq!(decode_one(&bulk), Err(RequestError::BulkCountTooBig));
    }

    #[test]
    fn a_nul_before_the_line_end_stalls_the_line_as_in_redis() {
        // Redis finds line ends with strchr, which stops at a NUL: the line never completes and
        // fails once 64 KiB are buffered (tests/unit/protocol.tcl, "Protocol desync regression
        // test", sends "\x00", "*\x00" and "$\x00" then junk).
        for (start, want) in [
            (&b"\0"[..], RequestError::InlineTooBig),
            (b"*\0", RequestError::MultibulkCountTooBig),
            (b"$\0", RequestError::InlineTooBig),
            (b"SET k v\0\n", RequestError::InlineTooBig),
            (b"*1\r\n$3\0\r\n", RequestError::BulkCountTooBig),
        ] {
            let mut bytes = start.to_vec();
            bytes.extend_from_slice(b"payload\r\n");
            assert_eq!(decode_one(&bytes), Ok(None), "{}", start.escape_ascii());
            bytes.resize(INLINE_BYTES_MAX + 8, b'\n');
            assert_eq!(decode_one(&bytes), Err(want), "{}", start.escape_ascii());
        }
    }

    #[test]
    fn huge_declarations_reserve_nothing() {
        let mut args = Args::new();
        let mut bytes = b"*2147483647\r\n$536870912\r\n".to_vec();
        bytes.extend_from_slice(&[b'x'; 10]);
        assert_eq!(decode_request(&bytes, &mut args), Ok(None));
        assert!(args.allocated_bytes() < 1024, "{}", args.allocated_bytes());
    }

    #[test]
    fn unauthenticated_connections_get_redis_smaller_limits() {
        let limits = RequestLimits {
            unauthenticated: true,
            ..RequestLimits::DEFAULT
        };
        let decode = |bytes: &[u8]| decode_request_with_limits(bytes, &mut Args::new(), limits);
        assert_eq!(decode(b"*10\r\n"), Ok(None));
        let want = RequestError::UnauthenticatedMultibulkLength;
        assert_eq!(decode(b"*11\r\n"), Err(want));
        assert_eq!(decode(b"*1\r\n$16384\r\n"), Ok(None));
        let want = RequestError::UnauthenticatedBulkLength;
        assert_eq!(decode(b"*1\r\n$16385\r\n"), Err(want));
        // Validity is checked first, as in Redis.
        let want = RequestError::InvalidMultibulkLength;
        assert_eq!(decode(b"*2147483648\r\n"), Err(want));
        assert_eq!(decode(b"*0\r\n"), Ok(Some(4)));
    }

    #[test]
    fn the_bulk_limit_is_the_callers_proto_max_bulk_len() {
        let limits = RequestLimits {
            bulk_length_max_bytes: 4,
            ..RequestLimits::DEFAULT
        };
        let mut args = Args::new();
        let decode =
            |bytes: &[u8], args: &mut Args| decode_request_with_limits(bytes, args, limits);
        assert_eq!(decode(b"*1\r\n$4\r\nabcd\r\n", &mut args), Ok(Some(14)));
        let want = RequestError::InvalidBulkLength;
        assert_eq!(decode(b"*1\r\n$5\r\nabcde\r\n", &mut args), Err(want));
    }

    #[test]
    fn integers_parse_like_string2ll() {
        assert_eq!(parse_integer(b"0"), Some(0));
        assert_eq!(parse_integer(b"-1"), Some(-1));
        assert_eq!(parse_integer(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_integer(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"00",
            b"+1",
            b" 1",
            b"1x",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"000000000000000000001",
        ] {
            assert_eq!(parse_integer(bad), None, "{}", bad.escape_ascii());
        }
    }

    #[test]
    fn a_request_arriving_in_pieces_resumes_where_it_stopped() {
        // Each call with one more byte must continue from the last complete argument rather
        // than parse the request again, so a long request costs linear work.
        let bytes = b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n$2\r\nEX\r\n";
        let mut args = Args::new();
        let mut last_position = 0;
        for end in 0..bytes.len() {
            assert_eq!(decode_request(&bytes[..end], &mut args), Ok(None), "{end}");
            if let Some(Progress::Bulks { position, .. }) = args.progress {
                assert!(position >= last_position);
                assert_eq!(
                    args.total_bytes(),
                    args.iter().map(<[u8]>::len).sum::<usize>()
                );
                last_position = position;
            }
        }
        assert_eq!(last_position, bytes.len() - b"$2\r\nEX\r\n".len());
        assert_eq!(decode_request(bytes, &mut args), Ok(Some(bytes.len())));
        assert_eq!(
            args.iter().collect::<Vec<_>>(),
            [&b"SET"[..], b"k", b"value", b"EX"]
        );
    }

    #[test]
    fn an_inline_line_search_resumes_where_it_stopped() {
        let mut args = Args::new();
        assert_eq!(decode_request(b"GET ke", &mut args), Ok(None));
        assert_eq!(
            args.progress,
            Some(Progress::Inline(LineSearch {
                searched: 6,
                stalled: false
            }))
        );
        assert_eq!(decode_request(b"GET key\r\n", &mut args), Ok(Some(9)));
        assert_eq!(args.iter().collect::<Vec<_>>(), [&b"GET"[..], b"key"]);
    }

    #[test]
    #[should_panic(expected = "an incomplete request resumed")]
    fn resuming_with_a_shorter_buffer_is_a_programmer_error() {
        let mut args = Args::new();
        assert_eq!(decode_request(b"*2\r\n$3\r\nGET\r\n", &mut args), Ok(None));
        let _ = decode_request(b"*2\r\n", &mut args);
    }

    #[test]
    fn clear_forgets_an_incomplete_request() {
        let mut args = Args::new();
        assert_eq!(decode_request(b"*2\r\n$3\r\nGET\r\n", &mut args), Ok(None));
        args.clear();
        assert_eq!(decode_request(b"PING\r\n", &mut args), Ok(Some(6)));
        assert!(args.is_command(b"ping"));
    }

    #[test]
    fn an_error_leaves_the_args_empty_and_ready() {
        let mut args = Args::new();
        let bytes = b"*2\r\n$3\r\nGET\r\n$x\r\n";
        assert_eq!(
            decode_request(bytes, &mut args),
            Err(RequestError::InvalidBulkLength)
        );
        assert!(args.is_empty());
        assert_eq!(decode_request(b"PING\r\n", &mut args), Ok(Some(6)));
    }

    #[test]
    fn args_accessors_see_every_argument() {
        let mut args = Args::new();
        let bytes = b"*3\r\n$3\r\nsEt\r\n$0\r\n\r\n$2\r\nvv\r\n";
        assert_eq!(decode_request(bytes, &mut args), Ok(Some(bytes.len())));
        assert_eq!(args.len(), 3);
        assert_eq!(args.get(0), b"sEt");
        assert_eq!(args.get(1), b"");
        assert_eq!(args.get(2), b"vv");
        assert_eq!(args.command(), Some(&b"sEt"[..]));
        assert!(args.is_command(b"SET"));
        assert!(args.is_command(b"set"));
        assert!(!args.is_command(b"SETNX"));
        assert!(!args.is_command(b"se"));
        assert_eq!(args.iter().len(), 3);
        assert_eq!(
            args.iter().rev().collect::<Vec<_>>(),
            [&b"vv"[..], b"", b"sEt"]
        );
        assert_eq!((&args).into_iter().count(), 3);
        assert_eq!(args.total_bytes(), 5);
    }

    #[test]
    fn memory_left_by_a_large_request_is_given_back_by_the_next() {
        let mut args = Args::new();
        let big = vec![b'v'; 1024 * 1024];
        let mut bytes = Vec::new();
        crate::encode_command(&mut bytes, &[b"SET", b"k", &big]);
        assert_eq!(decode_request(&bytes, &mut args), Ok(Some(bytes.len())));
        assert!(args.allocated_bytes() >= big.len());
        assert_eq!(decode_request(b"PING\r\n", &mut args), Ok(Some(6)));
        let retained_max = ARENA_RETAINED_BYTES_MAX + ARGUMENTS_RETAINED_MAX * size_of::<usize>();
        assert!(
            args.allocated_bytes() <= retained_max,
            "{}",
            args.allocated_bytes()
        );
    }
}

//! Reply encoding: writers that append one RESP2 or RESP3 reply (or an aggregate header) to a
//! `Vec<u8>`, byte for byte as Redis writes it.
//!
//! Invariants:
//! - Nothing here allocates except by growing `out`: integers, lengths and doubles are formatted
//!   in stack buffers.
//! - Every writer appends one complete RESP item (an aggregate header counts as one; the caller
//!   then writes exactly as many elements as it announced: pairs for a map).
//! - Simple strings and errors never break the framing: a CR or LF in their text is written as a
//!   space, as Redis's `addReplyErrorFormat` does.
//! - Where RESP2 has no such type, the writer emits what Redis emits for a RESP2 client (a map is
//!   a flat array of `2n` elements, a double is a bulk string, a boolean is `:1`/`:0`), so a
//!   command implementation writes one reply for both versions.

/// The RESP version a connection speaks: RESP2 until the client sends `HELLO 3`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RespVersion {
    /// RESP2, the default of every new connection.
    #[default]
    Resp2,
    /// RESP3, chosen with `HELLO 3`.
    Resp3,
}

impl RespVersion {
    /// The version's number, as `HELLO` takes and reports it: 2 or 3.
    pub fn number(self) -> u8 {
        match self {
            Self::Resp2 => 2,
            Self::Resp3 => 3,
        }
    }

    /// The version `HELLO <protover>` asks for, or `None` for a number Redis refuses (it then
    /// replies `NOPROTO unsupported protocol version`).
    pub fn from_number(number: i64) -> Option<Self> {
        match number {
            2 => Some(Self::Resp2),
            3 => Some(Self::Resp3),
            _ => None,
        }
    }
}

/// Room for the longest text [`double_text`] writes, 25 bytes: a sign, 17 significant digits
/// and 7 zeros of padding (`double_layout` lists its layouts; the others are shorter, such as
/// a sign, 17 digits, a point and `e-308`, 23 bytes). Rust's `{:e}` text (at most 24 bytes)
/// passes through a buffer of the same size.
const DOUBLE_TEXT_BYTES_MAX: usize = 32;

/// Longest header line: a type byte, an unsigned 64-bit number (20 digits) and CRLF.
const HEADER_BYTES_MAX: usize = 1 + 20 + 2;

/// Appends a simple string: `+<text>\r\n`. A CR or LF in `text` is written as a space.
pub fn simple_string(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'+');
    push_line_text(out, text);
    out.extend_from_slice(b"\r\n");
}

/// Appends an error: `-<text>\r\n`. `text` is the whole message with its code, such as
/// `ERR syntax error` or `WRONGTYPE Operation against a key holding the wrong kind of value`.
/// A CR or LF in `text` is written as a space (arguments quoted into errors come from clients).
pub fn error(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'-');
    push_line_text(out, text);
    out.extend_from_slice(b"\r\n");
}

/// Appends an integer: `:<value>\r\n`.
pub fn integer(out: &mut Vec<u8>, value: i64) {
    let mut line = [0; HEADER_BYTES_MAX];
    let start = format_header(&mut line, b':', value.unsigned_abs(), value < 0);
    out.extend_from_slice(&line[start..]);
}

/// Appends a bulk string: `$<len>\r\n<bytes>\r\n`.
pub fn bulk_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(HEADER_BYTES_MAX + bytes.len() + 2);
    length_header(out, b'$', bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// Appends a null: RESP2 `$-1\r\n` (the null bulk string), RESP3 `_\r\n`.
pub fn null(out: &mut Vec<u8>, version: RespVersion) {
    out.extend_from_slice(match version {
        RespVersion::Resp2 => b"$-1\r\n",
        RespVersion::Resp3 => b"_\r\n",
    });
}

/// Appends a null array, which RESP3 no longer distinguishes from null: RESP2 `*-1\r\n`,
/// RESP3 `_\r\n`.
pub fn null_array(out: &mut Vec<u8>, version: RespVersion) {
    out.extend_from_slice(match version {
        RespVersion::Resp2 => b"*-1\r\n",
        RespVersion::Resp3 => b"_\r\n",
    });
}

/// Appends an array header `*<count>\r\n`; `count` elements must follow.
pub fn array_header(out: &mut Vec<u8>, count: usize) {
    length_header(out, b'*', count);
}

/// Appends a map header; `pair_count` key-value pairs (`2 * pair_count` elements) must follow.
/// RESP3 `%<pair_count>\r\n`; RESP2 has no map, so Redis writes a flat array
/// `*<2 * pair_count>\r\n`.
pub fn map_header(out: &mut Vec<u8>, version: RespVersion, pair_count: usize) {
    match version {
        RespVersion::Resp2 => length_header(out, b'*', pair_count.saturating_mul(2)),
        RespVersion::Resp3 => length_header(out, b'%', pair_count),
    }
}

/// Appends a set header; `count` elements must follow. RESP3 `~<count>\r\n`, RESP2
/// `*<count>\r\n`.
pub fn set_header(out: &mut Vec<u8>, version: RespVersion, count: usize) {
    let prefix = match version {
        RespVersion::Resp2 => b'*',
        RespVersion::Resp3 => b'~',
    };
    length_header(out, prefix, count);
}

/// Appends an out-of-band push header; `count` elements must follow. RESP3 `><count>\r\n`.
/// RESP2 has no push type: Redis sends pub/sub messages to a RESP2 client as a plain array,
/// so RESP2 gets `*<count>\r\n`.
pub fn push_header(out: &mut Vec<u8>, version: RespVersion, count: usize) {
    let prefix = match version {
        RespVersion::Resp2 => b'*',
        RespVersion::Resp3 => b'>',
    };
    length_header(out, prefix, count);
}

/// Appends a double as Redis's `addReplyDouble` does: RESP3 `,<text>\r\n`, RESP2 a bulk string
/// of the same text. The text is [`double_text`]'s: `inf`, `-inf`, `nan`, an integer when the
/// value is one (`3`, `-0`), otherwise the shortest digits that read back as `value`.
pub fn double(out: &mut Vec<u8>, version: RespVersion, value: f64) {
    let mut text = [0; DOUBLE_TEXT_BYTES_MAX];
    let length = format_double(&mut text, value);
    let text = &text[..length];
    match version {
        RespVersion::Resp2 => bulk_string(out, text),
        RespVersion::Resp3 => {
            out.push(b',');
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Appends `value` as text the way Redis's `d2string` formats a double (Redis 7.2 and later):
/// `nan`; `inf` / `-inf`; `0` / `-0`; a plain integer when the value is integral and within
/// +-2^62; otherwise the shortest round-trip digits laid out as `fpconv_dtoa` lays them out
/// (`0.0001`, `123.25`, `1e-7`, `1.5e+300`). Redis uses this text for double replies and for
/// scores it stores as strings.
///
/// One known difference: Redis takes its digits from Grisu2, which for about 1 double in 1000
/// writes one digit more than needed or a last digit that is not the closest
/// (`54.981237651954316` where this writes `54.98123765195432`). Both read back as the same
/// double; matching Redis there would need Grisu2 itself.
pub fn double_text(out: &mut Vec<u8>, value: f64) {
    let mut text = [0; DOUBLE_TEXT_BYTES_MAX];
    let length = format_double(&mut text, value);
    out.extend_from_slice(&text[..length]);
}

/// Appends a boolean: RESP3 `#t\r\n` / `#f\r\n`, RESP2 the integer `:1\r\n` / `:0\r\n`.
pub fn boolean(out: &mut Vec<u8>, version: RespVersion, value: bool) {
    out.extend_from_slice(match (version, value) {
        (RespVersion::Resp2, true) => b":1\r\n",
        (RespVersion::Resp2, false) => b":0\r\n",
        (RespVersion::Resp3, true) => b"#t\r\n",
        (RespVersion::Resp3, false) => b"#f\r\n",
    });
}

/// Appends a verbatim string: RESP3 `=<len + 4>\r\n<format>:<text>\r\n`, where `format` is
/// `txt` or `mkd`; RESP2 a bulk string of `text` alone.
pub fn verbatim_string(out: &mut Vec<u8>, version: RespVersion, format: &[u8; 3], text: &[u8]) {
    match version {
        RespVersion::Resp2 => bulk_string(out, text),
        RespVersion::Resp3 => {
            out.reserve(HEADER_BYTES_MAX + 4 + text.len() + 2);
            length_header(out, b'=', text.len().saturating_add(4));
            out.extend_from_slice(format);
            out.push(b':');
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Appends `<prefix><length>\r\n`, as one copy from a stack buffer.
pub(crate) fn length_header(out: &mut Vec<u8>, prefix: u8, length: usize) {
    let mut line = [0; HEADER_BYTES_MAX];
    let start = format_header(&mut line, prefix, length as u64, false);
    out.extend_from_slice(&line[start..]);
}

/// Two ASCII digits for every value below 100, so numbers are written two digits at a time.
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// Writes `<prefix>[-]<magnitude>\r\n` right-aligned in `line`; returns where it starts.
fn format_header(
    line: &mut [u8; HEADER_BYTES_MAX],
    prefix: u8,
    magnitude: u64,
    negative: bool,
) -> usize {
    let mut start = line.len() - 2;
    line[start..].copy_from_slice(b"\r\n");
    start = format_decimal(&mut line[..start], magnitude);
    if negative {
        start -= 1;
        line[start] = b'-';
    }
    start -= 1;
    line[start] = prefix;
    start
}

/// Writes `value` in decimal right-aligned in `digits` (at least 20 bytes when `value` may be
/// any `u64`); returns where the digits start.
fn format_decimal(digits: &mut [u8], mut value: u64) -> usize {
    let mut start = digits.len();
    while value >= 100 {
        let pair = (value % 100) as usize * 2;
        value /= 100;
        start -= 2;
        digits[start..start + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if value >= 10 {
        let pair = value as usize * 2;
        start -= 2;
        digits[start..start + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        start -= 1;
        digits[start] = b'0' + value as u8;
    }
    start
}

/// Appends the text of a simple string or error, with CR and LF written as spaces.
fn push_line_text(out: &mut Vec<u8>, text: &[u8]) {
    if text.iter().any(|&byte| byte == b'\r' || byte == b'\n') {
        out.extend(text.iter().map(|&byte| match byte {
            b'\r' | b'\n' => b' ',
            other => other,
        }));
    } else {
        out.extend_from_slice(text);
    }
}

/// The largest magnitude Redis prints as an integer: `double2ll` accepts integral values within
/// `LLONG_MAX / 2`, which converts to the double 2^62.
const DOUBLE_INTEGER_MAGNITUDE_MAX: f64 = 4_611_686_018_427_387_904.0;

/// Formats `value` as Redis's `d2string` into `text`; returns its length.
fn format_double(text: &mut [u8; DOUBLE_TEXT_BYTES_MAX], value: f64) -> usize {
    let special: &[u8] = if value.is_nan() {
        // Redis writes one form of NaN whatever its sign or payload.
        b"nan"
    } else if value == f64::INFINITY {
        b"inf"
    } else if value == f64::NEG_INFINITY {
        b"-inf"
    } else if value == 0.0 {
        if value.is_sign_negative() {
            b"-0"
        } else {
            b"0"
        }
    } else if value.fract() == 0.0 && value.abs() <= DOUBLE_INTEGER_MAGNITUDE_MAX {
        // Integral and within +-2^62, so the conversion is exact.
        let integer = value as i64;
        let mut digits = [0; 20];
        let start = format_decimal(&mut digits, integer.unsigned_abs());
        let mut length = 0;
        if integer < 0 {
            text[0] = b'-';
            length = 1;
        }
        let digits = &digits[start..];
        text[length..length + digits.len()].copy_from_slice(digits);
        return length + digits.len();
    } else {
        b""
    };
    if !special.is_empty() {
        text[..special.len()].copy_from_slice(special);
        return special.len();
    }
    let (digits, digit_count, exponent) = shortest_digits(value.abs());
    let mut length = 0;
    if value < 0.0 {
        text[0] = b'-';
        length = 1;
    }
    length + double_layout(&mut text[length..], &digits[..digit_count], exponent)
}

/// The shortest decimal digits that read back as `magnitude` (positive, finite, non-zero), and
/// the power of ten of the last digit: `magnitude = digits * 10^exponent`.
///
/// Rust's `{:e}` formatting already yields the shortest round-trip digits ("1.2345e-7"), so this
/// takes them from there, formatted into a stack buffer.
fn shortest_digits(magnitude: f64) -> ([u8; 17], usize, i32) {
    let mut scientific = StackText::default();
    // Writing into StackText fails only if the text overflows it, and `{:e}` of an f64 is at
    // most 17 digits, a point, `e`, a sign and 3 exponent digits.
    let written = std::fmt::Write::write_fmt(&mut scientific, format_args!("{magnitude:e}"));
    assert!(
        written.is_ok(),
        "{{:e}} of {magnitude} overflowed its buffer"
    );
    let text = &scientific.bytes[..scientific.length];
    let marker = text.iter().position(|&byte| byte == b'e');
    let marker = marker.expect("{:e} output contains an exponent marker");
    let mut digits = [0; 17];
    let mut digit_count = 0;
    for &byte in text[..marker].iter().filter(|byte| byte.is_ascii_digit()) {
        digits[digit_count] = byte;
        digit_count += 1;
    }
    let (negative, exponent_digits) = match text[marker + 1..].split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, &text[marker + 1..]),
    };
    let scientific_exponent = exponent_digits
        .iter()
        .fold(0_i32, |sum, &byte| sum * 10 + i32::from(byte - b'0'));
    let scientific_exponent = if negative {
        -scientific_exponent
    } else {
        scientific_exponent
    };
    // digits d1.d2d3... * 10^e is d1d2d3... * 10^(e - (count - 1)).
    (
        digits,
        digit_count,
        scientific_exponent - (digit_count as i32 - 1),
    )
}

/// Lays out `digits * 10^exponent` as Redis's `fpconv_dtoa` does; returns the length written.
///
/// - A plain integer (digits then zeros) when `exponent >= 0` and the decimal exponent is below
///   `digits.len() + 7`.
/// - A plain decimal when `exponent < 0` and either `exponent > -7` or the decimal exponent's
///   magnitude is below 4: `123.25`, `0.000001`.
/// - Otherwise scientific: `1e-7`, `1.5e+300`, `1e+20`: an explicit exponent sign and no
///   leading zeros in the exponent.
fn double_layout(text: &mut [u8], digits: &[u8], exponent: i32) -> usize {
    let count = digits.len() as i32;
    let decimal_exponent = exponent + count - 1;
    let magnitude = decimal_exponent.unsigned_abs();
    if exponent >= 0 && (magnitude as i32) < count + 7 {
        let zeros = exponent as usize;
        text[..digits.len()].copy_from_slice(digits);
        text[digits.len()..digits.len() + zeros].fill(b'0');
        return digits.len() + zeros;
    }
    if exponent < 0 && (exponent > -7 || magnitude < 4) {
        // How many digits stand before the point.
        let integer_digits = count + exponent;
        if integer_digits <= 0 {
            let zeros = (-integer_digits) as usize;
            text[..2].copy_from_slice(b"0.");
            text[2..2 + zeros].fill(b'0');
            text[2 + zeros..2 + zeros + digits.len()].copy_from_slice(digits);
            return 2 + zeros + digits.len();
        }
        let (before, after) = digits.split_at(integer_digits as usize);
        text[..before.len()].copy_from_slice(before);
        text[before.len()] = b'.';
        text[before.len() + 1..=digits.len()].copy_from_slice(after);
        return digits.len() + 1;
    }
    let mut length = 1;
    text[0] = digits[0];
    if digits.len() > 1 {
        text[1] = b'.';
        text[2..=digits.len()].copy_from_slice(&digits[1..]);
        length = digits.len() + 1;
    }
    text[length] = b'e';
    text[length + 1] = if decimal_exponent < 0 { b'-' } else { b'+' };
    length += 2;
    let mut exponent_text = [0; 20];
    let start = format_decimal(&mut exponent_text, u64::from(magnitude));
    let exponent_text = &exponent_text[start..];
    text[length..length + exponent_text.len()].copy_from_slice(exponent_text);
    length + exponent_text.len()
}

/// A fixed buffer that `std::fmt::Write` can format into without allocating.
struct StackText {
    bytes: [u8; DOUBLE_TEXT_BYTES_MAX],
    length: usize,
}

impl Default for StackText {
    fn default() -> Self {
        Self {
            bytes: [0; DOUBLE_TEXT_BYTES_MAX],
            length: 0,
        }
    }
}

impl std::fmt::Write for StackText {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        let end = self.length + text.len();
        let slot = self
            .bytes
            .get_mut(self.length..end)
            .ok_or(std::fmt::Error)?;
        slot.copy_from_slice(text.as_bytes());
        self.length = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RespVersion::{Resp2, Resp3};

    fn written(write: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = b"before".to_vec();
        write(&mut out);
        assert!(out.starts_with(b"before"), "writers append");
        out.split_off(6)
    }

    #[test]
    fn scalars_are_byte_exact() {
        assert_eq!(written(|out| simple_string(out, b"OK")), b"+OK\r\n");
        assert_eq!(written(|out| simple_string(out, b"")), b"+\r\n");
        let syntax = written(|out| error(out, b"ERR syntax error"));
        assert_eq!(syntax, b"-ERR syntax error\r\n");
        assert_eq!(written(|out| bulk_string(out, b"foo")), b"$3\r\nfoo\r\n");
        assert_eq!(written(|out| bulk_string(out, b"")), b"$0\r\n\r\n");
        let binary = written(|out| bulk_string(out, b"a\r\n\0"));
        assert_eq!(binary, b"$4\r\na\r\n\0\r\n");
    }

    #[test]
    fn simple_strings_and_errors_never_carry_cr_or_lf() {
        let text = b"ERR unknown command 'a\r\nb', with args beginning with: ";
        let out = written(|out| error(out, text));
        assert_eq!(
            out,
            b"-ERR unknown command 'a  b', with args beginning with: \r\n"
        );
        assert_eq!(written(|out| simple_string(out, b"\nx\r")), b"+ x \r\n");
    }

    #[test]
    fn integers_cover_the_whole_range() {
        let cases: [(i64, &[u8]); 8] = [
            (0, b":0\r\n"),
            (7, b":7\r\n"),
            (10, b":10\r\n"),
            (-1, b":-1\r\n"),
            (99, b":99\r\n"),
            (-12345, b":-12345\r\n"),
            (i64::MAX, b":9223372036854775807\r\n"),
            (i64::MIN, b":-9223372036854775808\r\n"),
        ];
        for (value, want) in cases {
            assert_eq!(written(|out| integer(out, value)), want, "{value}");
        }
        for value in (0..2000).chain([999_999, 1_000_000, u32::MAX.into()]) {
            let want = format!(":{value}\r\n");
            assert_eq!(written(|out| integer(out, value)), want.as_bytes());
        }
    }

    #[test]
    fn nulls_depend_on_the_version() {
        assert_eq!(written(|out| null(out, Resp2)), b"$-1\r\n");
        assert_eq!(written(|out| null(out, Resp3)), b"_\r\n");
        assert_eq!(written(|out| null_array(out, Resp2)), b"*-1\r\n");
        assert_eq!(written(|out| null_array(out, Resp3)), b"_\r\n");
    }

    #[test]
    fn aggregate_headers_depend_on_the_version() {
        assert_eq!(written(|out| array_header(out, 0)), b"*0\r\n");
        assert_eq!(written(|out| array_header(out, 12)), b"*12\r\n");
        assert_eq!(written(|out| map_header(out, Resp2, 3)), b"*6\r\n");
        assert_eq!(written(|out| map_header(out, Resp3, 3)), b"%3\r\n");
        assert_eq!(written(|out| set_header(out, Resp2, 2)), b"*2\r\n");
        assert_eq!(written(|out| set_header(out, Resp3, 2)), b"~2\r\n");
        assert_eq!(written(|out| push_header(out, Resp2, 3)), b"*3\r\n");
        assert_eq!(written(|out| push_header(out, Resp3, 3)), b">3\r\n");
        let widest = written(|out| array_header(out, usize::MAX));
        assert_eq!(widest, format!("*{}\r\n", usize::MAX).as_bytes());
    }

    #[test]
    fn versions_are_numbered_as_hello_numbers_them() {
        assert_eq!(RespVersion::default(), Resp2);
        assert_eq!(Resp2.number(), 2);
        assert_eq!(Resp3.number(), 3);
        assert_eq!(RespVersion::from_number(3), Some(Resp3));
        assert_eq!(RespVersion::from_number(2), Some(Resp2));
        assert_eq!(RespVersion::from_number(1), None);
        assert_eq!(RespVersion::from_number(4), None);
    }

    #[test]
    fn booleans_are_integers_in_resp2() {
        assert_eq!(written(|out| boolean(out, Resp2, true)), b":1\r\n");
        assert_eq!(written(|out| boolean(out, Resp2, false)), b":0\r\n");
        assert_eq!(written(|out| boolean(out, Resp3, true)), b"#t\r\n");
        assert_eq!(written(|out| boolean(out, Resp3, false)), b"#f\r\n");
    }

    #[test]
    fn verbatim_strings_are_bulk_strings_in_resp2() {
        let resp3 = written(|out| verbatim_string(out, Resp3, b"txt", b"Some string"));
        assert_eq!(resp3, b"=15\r\ntxt:Some string\r\n");
        let resp2 = written(|out| verbatim_string(out, Resp2, b"mkd", b"# x"));
        assert_eq!(resp2, b"$3\r\n# x\r\n");
        assert_eq!(
            written(|out| verbatim_string(out, Resp3, b"mkd", b"")),
            b"=4\r\nmkd:\r\n"
        );
    }

    #[test]
    fn doubles_are_bulk_strings_in_resp2() {
        assert_eq!(written(|out| double(out, Resp3, 1.5)), b",1.5\r\n");
        assert_eq!(written(|out| double(out, Resp2, 1.5)), b"$3\r\n1.5\r\n");
        assert_eq!(
            written(|out| double(out, Resp3, f64::INFINITY)),
            b",inf\r\n"
        );
        assert_eq!(
            written(|out| double(out, Resp3, f64::NEG_INFINITY)),
            b",-inf\r\n"
        );
        assert_eq!(written(|out| double(out, Resp3, f64::NAN)), b",nan\r\n");
        assert_eq!(
            written(|out| double(out, Resp2, f64::NEG_INFINITY)),
            b"$4\r\n-inf\r\n"
        );
        assert_eq!(written(|out| double(out, Resp2, 3.0)), b"$1\r\n3\r\n");
    }

    #[test]
    fn double_text_matches_redis_d2string() {
        // Expected texts were produced by Redis's own d2string and fpconv_dtoa (deps/fpconv),
        // compiled from redis/redis at 4f8cdc2a (2024-10), for these inputs.
        let cases: [(f64, &str); 44] = [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (1.5, "1.5"),
            (0.1, "0.1"),
            (-0.1, "-0.1"),
            (1e-7, "1e-7"),
            (1e-6, "0.000001"),
            (1.5e-7, "1.5e-7"),
            (123.456, "123.456"),
            (1e20, "1e+20"),
            (5e18, "5e+18"),
            (4_611_686_018_427_387_904.0, "4611686018427387904"),
            (-4_611_686_018_427_387_904.0, "-4611686018427387904"),
            (4_611_686_018_427_388_928.0, "4611686018427389000"),
            (9_223_372_036_854_775_808.0, "9223372036854776000"),
            (1e300, "1e+300"),
            (-1e300, "-1e+300"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (std::f64::consts::PI, "3.141592653589793"),
            (1.0 / 3.0, "0.3333333333333333"),
            (100.0, "100"),
            (1e15, "1000000000000000"),
            (1.2345678901234567e23, "123456789012345670000000"),
            (0.000123, "0.000123"),
            (1234567.0001, "1234567.0001"),
            (12345678.9, "12345678.9"),
            (0.5, "0.5"),
            (-2.5, "-2.5"),
            (1e21, "1e+21"),
            (1e22, "1e+22"),
            (123456789012345680000.0, "123456789012345680000"),
            (4.5e-5, "0.000045"),
            (0.001, "0.001"),
            (1.5000000000000002e-5, "1.5000000000000002e-5"),
            (99.99, "99.99"),
            (1e16, "10000000000000000"),
            (2.5e-310, "2.5e-310"),
            (f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (value, want) in cases {
            let text = written(|out| double_text(out, value));
            assert_eq!(String::from_utf8_lossy(&text), want, "{value:e}");
        }
        let negative_nan = -f64::NAN;
        assert_eq!(written(|out| double_text(out, negative_nan)), b"nan");
    }

    #[test]
    fn double_text_is_the_shortest_where_redis_grisu2_is_not() {
        // Redis's fpconv_dtoa is Grisu2, which for about 1 double in 1000 writes a digit more
        // than needed, or a last digit that is not the closest. Both texts read back as the same
        // double; ours is the shortest and closest (Rust's formatting). These were measured
        // against Redis's code.
        let cases: [(u64, &str, &str); 3] = [
            (
                0x404b_7d99_3204_5fb2,
                "54.98123765195432",
                "54.981237651954316",
            ),
            (
                0x42e6_15a7_d373_9314,
                "194258126216344.63",
                "194258126216344.62",
            ),
            (
                0x44ad_5434_e830_86e4,
                "6.92509834279259e+22",
                "69250983427925896000000",
            ),
        ];
        for (bits, want, redis) in cases {
            let value = f64::from_bits(bits);
            let text = written(|out| double_text(out, value));
            assert_eq!(String::from_utf8_lossy(&text), want, "{value:e}");
            assert_eq!(
                redis.parse::<f64>().unwrap(),
                value,
                "Redis's text reads back too"
            );
        }
    }

    #[test]
    fn double_text_reads_back_as_the_same_double() {
        // A spread of bit patterns, finite ones only: each text must parse to the same value.
        let mut bits: u64 = 0x0123_4567_89ab_cdef;
        for _ in 0..20_000 {
            bits = bits
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let value = f64::from_bits(bits);
            if !value.is_finite() {
                continue;
            }
            let text = written(|out| double_text(out, value));
            assert!(text.len() <= 25, "{value:e}");
            let text = String::from_utf8(text).unwrap();
            assert_eq!(
                text.parse::<f64>().unwrap().to_bits(),
                value.to_bits(),
                "{text}"
            );
        }
    }
}

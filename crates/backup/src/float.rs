//! Doubles as text, in a form both reference readers accept.
//!
//! Written: `nan`, `inf`, `-inf`, or the shortest decimal that reads back to the same bits,
//! either plain (`0.1`, `-0`) or with a lowercase `e` (`1e21`, `5e-324`), whichever is shorter.
//! The C reader rejects an uppercase `E` and the Go reader rejects `-nan`, so neither is
//! written.
//!
//! Read: an optional sign, then either digits with at most one `.` and an optional lowercase
//! `e` exponent, or `nan`, `inf` or `infinity` in any case. That is what the C reader accepts,
//! and covers what the Go writer writes (`NaN`, `+Inf`, `-Inf`).

/// The longest float text read, in bytes: the C reader's token limit. A Go writer's fixed-point
/// form of a large key (`%f` of 1e308) needs about 310.
pub const FLOAT_TEXT_BYTES_MAX: usize = 999;

/// The text this crate writes for `value`.
pub fn format_float(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // Rust's `Display` and `LowerExp` both print the shortest digits that read back exactly.
    let plain = format!("{value}");
    let scientific = format!("{value:e}");
    if scientific.len() < plain.len() {
        scientific
    } else {
        plain
    }
}

/// Parses float text as described in the module comment, or `None` when it is not a float.
pub fn parse_float(text: &[u8]) -> Option<f64> {
    if text.len() > FLOAT_TEXT_BYTES_MAX {
        return None;
    }
    let (negative, unsigned) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    let magnitude = parse_special(unsigned).or_else(|| parse_decimal(unsigned))?;
    Some(if negative { -magnitude } else { magnitude })
}

/// `nan`, `inf` or `infinity` in any case, without a sign.
fn parse_special(text: &[u8]) -> Option<f64> {
    if text.eq_ignore_ascii_case(b"nan") {
        Some(f64::NAN)
    } else if text.eq_ignore_ascii_case(b"inf") || text.eq_ignore_ascii_case(b"infinity") {
        Some(f64::INFINITY)
    } else {
        None
    }
}

/// Digits with at most one `.`, at least one digit, then an optional `e`, optional sign and at
/// least one digit; no sign in front.
fn parse_decimal(text: &[u8]) -> Option<f64> {
    let (mantissa, exponent) = match text.iter().position(|&byte| byte == b'e') {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    if !is_mantissa(mantissa) {
        return None;
    }
    if let Some(exponent) = exponent {
        let digits = exponent
            .strip_prefix(b"-")
            .or_else(|| exponent.strip_prefix(b"+"))
            .unwrap_or(exponent);
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
    }
    // The bytes are ASCII digits, `.`, `e` and signs only, so they are UTF-8.
    std::str::from_utf8(text).ok()?.parse().ok()
}

fn is_mantissa(text: &[u8]) -> bool {
    let digit_count = text.iter().filter(|byte| byte.is_ascii_digit()).count();
    let dot_count = text.iter().filter(|&&byte| byte == b'.').count();
    digit_count >= 1 && dot_count <= 1 && digit_count + dot_count == text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_writes_specials_and_shortest_decimals() {
        assert_eq!(format_float(f64::NAN), "nan");
        assert_eq!(format_float(-f64::NAN), "nan");
        assert_eq!(format_float(f64::INFINITY), "inf");
        assert_eq!(format_float(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_float(0.1), "0.1");
        assert_eq!(format_float(-0.0), "-0");
        assert_eq!(format_float(1.0), "1");
        assert_eq!(format_float(1e21), "1e21");
        assert_eq!(format_float(1.5e-7), "1.5e-7");
        assert_eq!(format_float(5e-324), "5e-324");
        assert_eq!(format_float(123456.0), "123456");
    }

    #[test]
    fn parse_reads_c_and_go_forms() {
        assert_eq!(parse_float(b"0.10000000000000001"), Some(0.1));
        assert_eq!(parse_float(b"1e+21"), Some(1e21));
        assert_eq!(parse_float(b"1e21"), Some(1e21));
        assert_eq!(
            parse_float(b"-0").map(f64::to_bits),
            Some((-0.0f64).to_bits())
        );
        assert_eq!(parse_float(b"+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_float(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert!(parse_float(b"NaN").is_some_and(f64::is_nan));
        assert!(parse_float(b"-nan").is_some_and(f64::is_nan));
        assert_eq!(parse_float(b".5"), Some(0.5));
        assert_eq!(parse_float(b"5."), Some(5.0));
    }

    #[test]
    fn parse_refuses_what_the_c_reader_refuses() {
        for text in [
            &b""[..],
            b"-",
            b".",
            b"1E5",
            b"0x1p3",
            b"1e",
            b"1e+",
            b"1.2.3",
            b"1e5e5",
            b"--1",
            b" 1",
            b"1 ",
            b"nanx",
            b"in",
        ] {
            assert_eq!(
                parse_float(text),
                None,
                "{:?}",
                text.escape_ascii().to_string()
            );
        }
    }

    #[test]
    fn format_then_parse_round_trips_bits() {
        let mut bits: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..10_000 {
            bits = bits.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let value = f64::from_bits(bits);
            let parsed = parse_float(format_float(value).as_bytes()).expect("written text parses");
            if value.is_nan() {
                assert!(parsed.is_nan());
            } else {
                assert_eq!(parsed.to_bits(), value.to_bits(), "{value:e}");
            }
        }
    }
}

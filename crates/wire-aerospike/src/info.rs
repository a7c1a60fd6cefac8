//! The text info protocol (proto type 1): `command\n` lines in, `command\tvalue\n` lines out.
//!
//! Command syntax: `name`, `name:key=value;key=value` or `name/arg/arg`; the name ends at the
//! first `/`, `:` or `;`.
//!
//! Invariants:
//! - Only complete lines count: text after the last `\n` of a request is ignored.
//! - Parsing borrows from the request and never allocates.

use crate::ProtoType;
use crate::frame::{begin_proto, finish_proto};

/// The complete lines of an info request body, without their `\n`; text after the last `\n`
/// is ignored. An empty body has no lines (it asks for the summary).
pub fn info_request_lines(body: &[u8]) -> impl Iterator<Item = &[u8]> {
    body.split_inclusive(|&byte| byte == b'\n')
        .filter_map(|line| line.strip_suffix(b"\n"))
}

/// Splits an info command line into its name (up to the first `/`, `:` or `;`) and the rest
/// after that separator (empty if there is none).
pub fn info_command_name(line: &[u8]) -> (&[u8], &[u8]) {
    match line
        .iter()
        .position(|byte| matches!(byte, b'/' | b':' | b';'))
    {
        Some(separator_index) => (&line[..separator_index], &line[separator_index + 1..]),
        None => (line, &[]),
    }
}

/// Looks up `key=value` in a `;`-separated parameter string, e.g.
/// `info_param(b"namespace=test;set=x", b"set") == Some(b"x")`. The first match wins; a pair
/// without `=` matches nothing.
pub fn info_param<'a>(params: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    params.split(|&byte| byte == b';').find_map(|pair| {
        let equals_index = pair.iter().position(|&byte| byte == b'=')?;
        (&pair[..equals_index] == key).then(|| &pair[equals_index + 1..])
    })
}

/// Reserves the 8-byte proto header of an info response at the end of `out`, and returns where
/// it starts; append the body, then call [`finish_info_response`].
pub fn begin_info_response(out: &mut Vec<u8>) -> usize {
    begin_proto(out)
}

/// Patches the proto header (type 1) reserved at `start` so it frames `out[start + 8..]`.
///
/// # Panics
///
/// If no header was reserved at `start`.
pub fn finish_info_response(out: &mut [u8], start: usize) {
    finish_proto(out, start, ProtoType::Info);
}

/// Appends an info request frame (proto type 1) to `out`: each command followed by `\n`.
///
/// # Panics
///
/// If a command contains `\n`: it would become two commands.
pub fn encode_info_request(out: &mut Vec<u8>, commands: &[&str]) {
    let start = begin_proto(out);
    for command in commands {
        assert!(
            !command.contains('\n'),
            "info command {command:?} contains a newline"
        );
        out.extend_from_slice(command.as_bytes());
        out.push(b'\n');
    }
    finish_proto(out, start, ProtoType::Info);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_request_lines_yields_complete_lines_only() {
        let lines: Vec<&[u8]> = info_request_lines(b"node\n\nbuild\npartial").collect();
        assert_eq!(lines, [&b"node"[..], b"", b"build"]);
        assert_eq!(info_request_lines(b"").count(), 0);
        assert_eq!(info_request_lines(b"no newline").count(), 0);
    }

    #[test]
    fn info_command_name_splits_at_the_first_separator() {
        assert_eq!(
            info_command_name(b"namespace/test"),
            (&b"namespace"[..], &b"test"[..])
        );
        assert_eq!(
            info_command_name(b"sindex-create:ns=a;x=b"),
            (&b"sindex-create"[..], &b"ns=a;x=b"[..])
        );
        assert_eq!(info_command_name(b"node"), (&b"node"[..], &b""[..]));
        assert_eq!(
            info_command_name(b"sindex/test/idx"),
            (&b"sindex"[..], &b"test/idx"[..])
        );
        assert_eq!(info_command_name(b"a;b"), (&b"a"[..], &b"b"[..]));
        assert_eq!(info_command_name(b"x:"), (&b"x"[..], &b""[..]));
        assert_eq!(info_command_name(b""), (&b""[..], &b""[..]));
    }

    #[test]
    fn info_param_matches_whole_keys_only() {
        let params = b"namespace=test;set=x";
        assert_eq!(info_param(params, b"set"), Some(&b"x"[..]));
        assert_eq!(info_param(params, b"namespace"), Some(&b"test"[..]));
        assert_eq!(info_param(params, b"missing"), None);
        assert_eq!(info_param(params, b"name"), None);
        assert_eq!(info_param(b"nsx=1;ns=2", b"ns"), Some(&b"2"[..]));
        assert_eq!(info_param(b"ns;ns=3", b"ns"), Some(&b"3"[..]));
        assert_eq!(info_param(b"set=;a=b=c", b"set"), Some(&b""[..]));
        assert_eq!(info_param(b"set=;a=b=c", b"a"), Some(&b"b=c"[..]));
        assert_eq!(info_param(b"", b""), None);
    }

    #[test]
    fn an_info_response_is_framed_as_type_1() {
        let mut out = vec![0xaa];
        let start = begin_info_response(&mut out);
        out.extend_from_slice(b"node\tBB9\n");
        finish_info_response(&mut out, start);
        assert_eq!(out[..9], [0xaa, 2, 1, 0, 0, 0, 0, 0, 9]);
    }
}

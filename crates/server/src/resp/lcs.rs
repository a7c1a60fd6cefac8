//! LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]: the longest common subsequence
//! of two strings, as Redis's `lcsCommand` (`t_string.c`) finds it, with the same table and the
//! same walk back through it, so that of several common subsequences of the longest length it
//! answers the one Redis answers, with the same match ranges.
//!
//! Bound: the table has one cell per pair of prefixes, `(len1 + 1) * (len2 + 1)` cells of 4
//! bytes, and filling it takes as many steps. Redis refuses a table larger than
//! `proto-max-bulk-len` (512 MiB); Osprey refuses one of more than [`LCS_TABLE_CELLS_MAX`]
//! cells (64 MiB, e.g. two strings of 4095 bytes), before it allocates anything, so that no client
//! can make the server allocate or compute without limit. A table large enough to take long
//! is built on the long-request pool.
//!
//! Invariants:
//! - The two strings are read together, in the namespace's exclusive section (as Redis reads
//!   them in one command); the table is built after, outside it.
//! - Nothing is allocated before the table's size is checked against the bound.

use std::sync::Arc;

use wire_resp::Args;

use super::commands::Command;
use super::keys::{self, Target};
use super::reply::Reply;
use super::strings::{StringValue, string_of};
use super::{After, Session};

/// LCS.
pub const COMMANDS: &[Command] = &[("lcs", -3, lcs)];

/// The most cells an LCS table may have: `(len1 + 1) * (len2 + 1)`, 4 bytes each (64 MiB).
pub const LCS_TABLE_CELLS_MAX: usize = 16 * 1024 * 1024;

/// Redis's reply when a key holds something other than a string.
const NOT_STRINGS: &str = "ERR The specified keys must contain string values";

/// Redis's reply to LEN and IDX together.
const LEN_AND_IDX: &str = "ERR If you want both the length and indexes, please just use IDX.";

/// LCS's options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Options {
    len_only: bool,
    indexes: bool,
    min_match_len: usize,
    with_match_len: bool,
}

impl Options {
    /// Parses the options after the two keys, as Redis does.
    ///
    /// # Errors
    /// Redis's texts.
    fn parse(args: &Args) -> Result<Options, String> {
        let mut options = Options::default();
        let mut position = 3;
        while position < args.len() {
            let word = args.get(position).to_ascii_uppercase();
            let has_value = position + 1 < args.len();
            match word.as_slice() {
                b"IDX" => options.indexes = true,
                b"LEN" => options.len_only = true,
                b"WITHMATCHLEN" => options.with_match_len = true,
                b"MINMATCHLEN" if has_value => {
                    let value = keys::parse_i64(args.get(position + 1))
                        .map_err(|()| keys::NOT_AN_INTEGER.to_owned())?;
                    options.min_match_len = usize::try_from(value.max(0)).unwrap_or(usize::MAX);
                    position += 1;
                }
                _ => return Err(keys::SYNTAX_ERROR.to_owned()),
            }
            position += 1;
        }
        if options.len_only && options.indexes {
            return Err(LEN_AND_IDX.to_owned());
        }
        Ok(options)
    }
}

/// One run of consecutive common bytes: where it is in each string (inclusive) and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    pub first: (usize, usize),
    pub second: (usize, usize),
    pub len: usize,
}

/// A longest common subsequence: its bytes, and its runs from the end backwards (as Redis
/// lists them), those shorter than the minimum left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subsequence {
    pub bytes: Vec<u8>,
    pub matches: Vec<Match>,
}

/// The table's cell count for strings of `first_len` and `second_len` bytes, if within
/// [`LCS_TABLE_CELLS_MAX`].
pub fn table_cells(first_len: usize, second_len: usize) -> Option<usize> {
    let first_side = first_len.checked_add(1)?;
    let second_side = second_len.checked_add(1)?;
    first_side
        .checked_mul(second_side)
        .filter(|&cells| cells <= LCS_TABLE_CELLS_MAX)
}

/// The longest common subsequence of `a` and `b`, as Redis's table and walk find it.
///
/// # Panics
/// When the table would pass [`LCS_TABLE_CELLS_MAX`] (callers check [`table_cells`]).
pub fn longest_common_subsequence(a: &[u8], b: &[u8], min_match_len: usize) -> Subsequence {
    let cells = table_cells(a.len(), b.len()).expect("callers check the table's size");
    let width = b.len() + 1;
    // Lengths fit a u32: the bound keeps both strings far below 2^32 bytes.
    let mut table = vec![0u32; cells];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            table[i * width + j] = if a[i - 1] == b[j - 1] {
                table[(i - 1) * width + j - 1] + 1
            } else {
                table[(i - 1) * width + j].max(table[i * width + j - 1])
            };
        }
    }
    let cell = |i: usize, j: usize| table[i * width + j];
    let mut bytes = Vec::with_capacity(cell(a.len(), b.len()) as usize);
    let mut matches = Vec::new();
    // The run being walked: (start in a, end in a, start in b, end in b).
    let mut run: Option<(usize, usize, usize, usize)> = None;
    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            bytes.push(a[i - 1]);
            run = match run {
                None => Some((i - 1, i - 1, j - 1, j - 1)),
                Some((a_start, a_end, b_start, b_end)) if a_start == i && b_start == j => {
                    Some((a_start - 1, a_end, b_start - 1, b_end))
                }
                Some(other) => {
                    emit = true;
                    Some(other)
                }
            };
            if let Some((a_start, _, b_start, _)) = run
                && (a_start == 0 || b_start == 0)
            {
                emit = true;
            }
            i -= 1;
            j -= 1;
        } else {
            if cell(i - 1, j) > cell(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = run.is_some();
        }
        if emit && let Some((a_start, a_end, b_start, b_end)) = run.take() {
            let len = a_end - a_start + 1;
            if min_match_len == 0 || len >= min_match_len {
                matches.push(Match {
                    first: (a_start, a_end),
                    second: (b_start, b_end),
                    len,
                });
            }
        }
    }
    bytes.reverse();
    Subsequence { bytes, matches }
}

/// A string argument's bytes: a missing key is the empty string.
fn string_at(session: &Session, key: &[u8]) -> Result<Vec<u8>, String> {
    let target = Target::of(&session.state, session.database, key);
    match target.read(|current| current.map(|current| string_of(&current))) {
        Ok(None) => Ok(Vec::new()),
        Ok(Some(Ok(StringValue::Bytes(bytes)))) => Ok(bytes),
        Ok(Some(Ok(StringValue::Integer(value)))) => Ok(value.to_string().into_bytes()),
        Ok(Some(Err(()))) => Err(NOT_STRINGS.to_owned()),
        Err(code) => Err(engine_text(code)),
    }
}

/// The error text the engine's refusal `code` answers.
fn engine_text(code: model::ResultCode) -> String {
    let mut out = Vec::new();
    keys::engine_error(&mut Reply::new(&mut out, 2).scratch(), code);
    let text = String::from_utf8_lossy(&out);
    text.trim_start_matches('-').trim_end().to_owned()
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]
fn lcs(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let state = Arc::clone(&session.state);
    let strings = keys::namespace_of(&state).exclusive(|| {
        let first = string_at(session, args.get(1))?;
        let second = string_at(session, args.get(2))?;
        Ok::<_, String>((first, second))
    });
    let outcome = strings.and_then(|(first, second)| {
        let options = Options::parse(args)?;
        let cells =
            table_cells(first.len(), second.len()).ok_or_else(|| too_large(&first, &second))?;
        Ok((first, second, options, cells))
    });
    let (first, second, options, cells) = match outcome {
        Ok(parsed) => parsed,
        Err(text) => {
            reply.error(&text);
            return After::Continue;
        }
    };
    if session.should_offload(cells) {
        return After::Offload;
    }
    let found = longest_common_subsequence(&first, &second, options.min_match_len);
    let len = i64::try_from(found.bytes.len()).unwrap_or(i64::MAX);
    if options.indexes {
        reply_indexes(reply, &found, len, options.with_match_len);
    } else if options.len_only {
        reply.integer(len);
    } else {
        reply.bulk(&found.bytes);
    }
    After::Continue
}

/// Osprey's refusal of a table past [`LCS_TABLE_CELLS_MAX`].
fn too_large(first: &[u8], second: &[u8]) -> String {
    format!(
        "ERR Insufficient memory, transient memory for LCS exceeds Osprey's limit of \
         {LCS_TABLE_CELLS_MAX} table cells (strings of {} and {} bytes need {} x {})",
        first.len(),
        second.len(),
        first.len().saturating_add(1),
        second.len().saturating_add(1)
    )
}

/// IDX's reply: a map of `matches` (each `[[a_start, a_end], [b_start, b_end]]`, with the
/// run's length when WITHMATCHLEN) and `len`.
fn reply_indexes(reply: &mut Reply<'_>, found: &Subsequence, len: i64, with_match_len: bool) {
    let as_integer = |value: usize| i64::try_from(value).unwrap_or(i64::MAX);
    reply.map(2);
    reply.bulk(b"matches");
    reply.array(found.matches.len());
    for matched in &found.matches {
        reply.array(2 + usize::from(with_match_len));
        for (start, end) in [matched.first, matched.second] {
            reply.array(2);
            reply.integer(as_integer(start));
            reply.integer(as_integer(end));
        }
        if with_match_len {
            reply.integer(as_integer(matched.len));
        }
    }
    reply.bulk(b"len");
    reply.integer(len);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(found: &Subsequence) -> String {
        String::from_utf8(found.bytes.clone()).unwrap()
    }

    #[test]
    fn finds_redis_subsequence_and_runs() {
        // Redis's documented example: LCS of ohmytext and mynewtext is mytext, runs 4-7/5-8
        // and 2-3/0-1.
        let found = longest_common_subsequence(b"ohmytext", b"mynewtext", 0);
        assert_eq!(text(&found), "mytext");
        assert_eq!(
            found.matches,
            [
                Match {
                    first: (4, 7),
                    second: (5, 8),
                    len: 4
                },
                Match {
                    first: (2, 3),
                    second: (0, 1),
                    len: 2
                }
            ]
        );
        let long_runs = longest_common_subsequence(b"ohmytext", b"mynewtext", 4);
        assert_eq!(long_runs.matches.len(), 1);
    }

    #[test]
    fn empty_and_disjoint_strings_have_an_empty_subsequence() {
        assert_eq!(text(&longest_common_subsequence(b"", b"abc", 0)), "");
        assert_eq!(text(&longest_common_subsequence(b"abc", b"xyz", 0)), "");
        assert!(
            longest_common_subsequence(b"abc", b"xyz", 0)
                .matches
                .is_empty()
        );
        assert_eq!(text(&longest_common_subsequence(b"abc", b"abc", 0)), "abc");
    }

    #[test]
    fn the_table_is_bounded_before_it_is_allocated() {
        assert_eq!(table_cells(0, 0), Some(1));
        assert_eq!(table_cells(4095, 4095), Some(4096 * 4096));
        assert_eq!(table_cells(4096, 4096), None);
        assert_eq!(table_cells(usize::MAX, 1), None);
        assert_eq!(table_cells(LCS_TABLE_CELLS_MAX, 0), None);
    }
}

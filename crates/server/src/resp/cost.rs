//! What a Redis command may cost, judged before it runs, to decide whether it runs on the
//! long-request pool (`After::Offload`) rather than on the runtime's worker.
//!
//! The cost is the number of elements the command may visit: its arguments (and one per 64 bytes
//! of them), plus the elements of the collections it reads whole (SMEMBERS, HGETALL, the set and sorted-set algebra, the
//! HSCAN family, which answers a whole collection at once, LREM, LPOS, and DEL or UNLINK, which
//! free what they delete). Range reads (LRANGE, the ZRANGE family) judge their range
//! themselves, once they know it; KEYS and SCAN judge the key space.
//!
//! Invariant: estimating reads at most one record per key the command names, under that
//! record's read lock, and changes nothing.

use wire_resp::Args;

use super::collection;
use super::keys::Target;
use super::{LONG_COMMAND_COST_MIN, Session};

/// Where a command names the keys whose collections it reads whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// No whole collection: its arguments are its cost.
    Nothing,
    /// The key at this position.
    Key(usize),
    /// Every argument from this position on.
    KeysFrom(usize),
    /// A key count at this position, then that many keys.
    CountedKeysAt(usize),
}

/// Argument bytes that cost as much as one element: copying and comparing 64 bytes takes about
/// as long as visiting one element of a collection.
const ARGUMENT_BYTES_PER_ELEMENT: usize = 64;

/// The elements a command named by lower-case `name`, which reads collections as `reads`
/// says, may visit with `args`, counted until they reach [`LONG_COMMAND_COST_MIN`] (enough to
/// send it to the pool).
#[inline]
pub fn estimate(session: &Session, name: &str, reads: Reads, args: &Args) -> usize {
    let arguments = args.len() + args.total_bytes() / ARGUMENT_BYTES_PER_ELEMENT;
    match reads {
        // Most commands: decided here, inline, on every call.
        Reads::Nothing => arguments,
        reads => estimate_reads(session, name, reads, args, arguments),
    }
}

/// [`estimate`] for a command that reads collections whole: their elements are added.
fn estimate_reads(
    session: &Session,
    name: &str,
    reads: Reads,
    args: &Args,
    arguments: usize,
) -> usize {
    let positions = match reads {
        Reads::Nothing => 0..0,
        Reads::Key(position) => position..(position + 1).min(args.len()),
        Reads::KeysFrom(position) => position..args.len(),
        Reads::CountedKeysAt(position) => {
            let count = std::str::from_utf8(args.get(position))
                .ok()
                .and_then(|text| text.parse::<usize>().ok())
                .unwrap_or(0);
            (position + 1)..(position + 1).saturating_add(count).min(args.len())
        }
    };
    // MATCH compares each element with the pattern: a long pattern costs per element.
    let per_element = match name {
        "hscan" | "sscan" | "zscan" => 1 + match_pattern(args).len() / ARGUMENT_BYTES_PER_ELEMENT,
        _ => 1,
    };
    // Counting stops once the cost decides: a DEL of a million keys reads none of them here.
    let mut cost = arguments;
    for position in positions {
        if cost >= LONG_COMMAND_COST_MIN {
            break;
        }
        let elements = elements_at(session, args.get(position));
        cost = cost.saturating_add(elements.saturating_mul(per_element));
    }
    cost
}

/// The pattern after MATCH in a scan's options, or nothing.
fn match_pattern(args: &Args) -> &[u8] {
    (3..args.len().saturating_sub(1))
        .rev()
        .find(|&position| args.get(position).eq_ignore_ascii_case(b"match"))
        .map_or(&[], |position| args.get(position + 1))
}

/// Where the command named `name` (lower case) names the collections it reads whole.
pub fn reads(name: &str) -> Reads {
    match name {
        "smembers" | "hgetall" | "hkeys" | "hvals" | "hscan" | "sscan" | "zscan" | "lrem"
        | "lpos" | "zrandmember" => Reads::Key(1),
        "zrangestore" => Reads::Key(2),
        "sunion" | "sinter" | "sdiff" | "del" | "unlink" => Reads::KeysFrom(1),
        "sunionstore" | "sinterstore" | "sdiffstore" => Reads::KeysFrom(2),
        "sintercard" | "zunion" | "zinter" | "zdiff" | "zintercard" => Reads::CountedKeysAt(1),
        "zunionstore" | "zinterstore" | "zdiffstore" => Reads::CountedKeysAt(2),
        _ => Reads::Nothing,
    }
}

/// The elements of the value at `key`; 0 when there is none (or it cannot be read now: the
/// command itself will say why).
fn elements_at(session: &Session, key: &[u8]) -> usize {
    let target = Target::of(&session.state, session.database, key);
    target
        .view(|current| current.map_or(0, |current| collection::element_count(&current)))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_positions_follow_each_command_syntax() {
        assert_eq!(reads("get"), Reads::Nothing);
        assert_eq!(reads("smembers"), Reads::Key(1));
        assert_eq!(reads("sunionstore"), Reads::KeysFrom(2));
        assert_eq!(reads("zinterstore"), Reads::CountedKeysAt(2));
        assert_eq!(reads("sintercard"), Reads::CountedKeysAt(1));
    }
}

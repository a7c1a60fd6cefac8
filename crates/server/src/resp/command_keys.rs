//! COMMAND GETKEYS and COMMAND GETKEYSANDFLAGS: which arguments of a full command line are
//! keys, as Redis 7.0's key specifications and `*GetKeys` procedures (`db.c`) find them.
//!
//! Most commands place their keys at fixed positions, which COMMAND INFO also reports
//! (`commands::key_positions`: first, last, step). The others find them by reading the
//! arguments: a key count (EVAL, FCALL, ZUNION, LMPOP...), a keyword (XREAD's STREAMS, SORT's
//! and GEORADIUS's STORE, MIGRATE's KEYS), or a subcommand (OBJECT, MEMORY, XINFO, XGROUP).
//! Where the arguments contradict the command (a key count of 0, or more keys than arguments),
//! Redis answers "Invalid arguments specified for command", except for the commands whose keys
//! are optional (EVAL and FCALL and their variants), which answer no keys.
//!
//! Flags (GETKEYSANDFLAGS) are Redis's for the commands listed in [`flags_of`]; for another
//! command they are derived from whether it writes: `RW access update` for a write, `RO
//! access` for a read. Redis's own flags differ for some writes (DEL is `RM delete`).
//!
//! Invariant: the keys found are positions in the given arguments, so what is allocated is
//! bounded by the arguments, never by a count a client declared.

use wire_resp::Args;

use super::commands;
use super::reply::Reply;

/// Why no keys are answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeysError {
    /// No such command (or subcommand).
    UnknownCommand,
    /// The command never takes keys.
    NoKeys,
    /// The argument count does not fit the command's arity.
    Arity,
    /// The arguments contradict where the command's keys are.
    InvalidArguments,
}

impl KeysError {
    /// Redis's text.
    pub fn text(self) -> &'static str {
        match self {
            KeysError::UnknownCommand => "ERR Invalid command specified",
            KeysError::NoKeys => "ERR The command has no key arguments",
            KeysError::Arity => "ERR Invalid number of arguments specified for command",
            KeysError::InvalidArguments => "ERR Invalid arguments specified for command",
        }
    }
}

/// The positions of the keys in `line` (a full command line, name first), in Redis's order.
///
/// # Errors
/// [`KeysError`], checked in Redis's order: the command, whether it has keys, its arity, its
/// arguments.
pub fn key_positions(line: &[&[u8]]) -> Result<Vec<usize>, KeysError> {
    let name = line.first().ok_or(KeysError::UnknownCommand)?;
    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
    let (name, arity) = commands::arity_of(&name).ok_or(KeysError::UnknownCommand)?;
    let count = line.len();
    let subcommand = line
        .get(1)
        .map(|word| String::from_utf8_lossy(word).to_ascii_lowercase());
    if let Some(keyed) = container_keys(name, subcommand.as_deref()) {
        return keyed;
    }
    if commands::key_positions(name) == (0, 0, 0) && !finds_keys_itself(name) {
        return Err(KeysError::NoKeys);
    }
    let arity_fits = if arity > 0 {
        count == arity.unsigned_abs() as usize
    } else {
        count >= arity.unsigned_abs() as usize
    };
    if !arity_fits {
        return Err(KeysError::Arity);
    }
    let found = match name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => {
            return Ok(counted(line, 2, None).unwrap_or_default());
        }
        "sintercard" | "zunion" | "zinter" | "zdiff" | "zintercard" | "lmpop" | "zmpop" => {
            counted(line, 1, None)
        }
        "blmpop" | "bzmpop" => counted(line, 2, None),
        "zunionstore" | "zinterstore" | "zdiffstore" => counted(line, 2, Some(1)),
        "sort" | "sort_ro" => Some(sort_keys(line)),
        "georadius" | "georadiusbymember" => Some(georadius_keys(line)),
        "xread" | "xreadgroup" => streams_keys(line),
        "migrate" => Some(migrate_keys(line)),
        _ => ranged(name, count),
    };
    found
        .filter(|positions| !positions.is_empty())
        .ok_or(KeysError::InvalidArguments)
}

/// Commands whose keys are found by reading the arguments (COMMAND INFO reports none).
fn finds_keys_itself(name: &str) -> bool {
    matches!(
        name,
        "eval"
            | "evalsha"
            | "eval_ro"
            | "evalsha_ro"
            | "fcall"
            | "fcall_ro"
            | "lmpop"
            | "zmpop"
            | "blmpop"
            | "bzmpop"
            | "zunion"
            | "zinter"
            | "zdiff"
            | "zintercard"
            | "xread"
            | "xreadgroup"
    )
}

/// The keys of a container command's subcommand (OBJECT ENCODING key, MEMORY USAGE key, XINFO
/// STREAM key, XGROUP CREATE key ...); `None` for a command that is no container.
fn container_keys(name: &str, subcommand: Option<&str>) -> Option<Result<Vec<usize>, KeysError>> {
    let keyed: &[&str] = match name {
        "object" => &["encoding", "freq", "idletime", "refcount"],
        "memory" => &["usage"],
        "xinfo" => &["stream", "groups", "consumers"],
        "xgroup" => &[
            "create",
            "setid",
            "destroy",
            "createconsumer",
            "delconsumer",
        ],
        _ => return None,
    };
    let keyless: &[&str] = match name {
        "memory" => &["doctor", "malloc-stats", "purge", "stats", "help"],
        _ => &["help"],
    };
    Some(match subcommand {
        Some(subcommand) if keyed.contains(&subcommand) => Ok(vec![2]),
        Some(subcommand) if keyless.contains(&subcommand) => Err(KeysError::NoKeys),
        _ => Err(KeysError::UnknownCommand),
    })
}

/// The keys at the fixed positions COMMAND INFO reports; `None` when one is past the end.
fn ranged(name: &str, count: usize) -> Option<Vec<usize>> {
    let (first, last, step) = commands::key_positions(name);
    let first = usize::try_from(first).ok()?;
    let last = if last < 0 {
        count.checked_sub(usize::try_from(last.unsigned_abs()).ok()?)?
    } else {
        usize::try_from(last).ok()?
    };
    let step = usize::try_from(step).ok()?.max(1);
    if last >= count || last < first || first >= count {
        return None;
    }
    Some((first..=last).step_by(step).collect())
}

/// The keys after a key count at `count_position` (Redis's `genericGetKeys`), and the
/// destination at `store` first when there is one; `None` when the count is below 1 or above
/// the arguments left.
fn counted(line: &[&[u8]], count_position: usize, store: Option<usize>) -> Option<Vec<usize>> {
    let declared = std::str::from_utf8(line.get(count_position)?)
        .ok()?
        .parse::<i64>()
        .ok()?;
    let first = count_position + 1;
    let available = line.len().checked_sub(first)?;
    let keys = usize::try_from(declared)
        .ok()
        .filter(|&keys| keys >= 1 && keys <= available)?;
    Some(store.into_iter().chain(first..first + keys).collect())
}

/// SORT's key and the last STORE's (Redis's `sortGetKeys`: LIMIT skips two arguments, GET and
/// BY one).
fn sort_keys(line: &[&[u8]]) -> Vec<usize> {
    let mut store = None;
    let mut position = 2;
    while position < line.len() {
        let word = line[position];
        if word.eq_ignore_ascii_case(b"limit") {
            position += 2;
        } else if word.eq_ignore_ascii_case(b"get") || word.eq_ignore_ascii_case(b"by") {
            position += 1;
        } else if word.eq_ignore_ascii_case(b"store") && position + 1 < line.len() {
            store = Some(position + 1);
        }
        position += 1;
    }
    std::iter::once(1).chain(store).collect()
}

/// GEORADIUS's key and the last STORE's or STOREDIST's (Redis's `georadiusGetKeys`).
fn georadius_keys(line: &[&[u8]]) -> Vec<usize> {
    let mut store = None;
    let mut position = 5;
    while position < line.len() {
        let word = line[position];
        let stores = word.eq_ignore_ascii_case(b"store") || word.eq_ignore_ascii_case(b"storedist");
        if stores && position + 1 < line.len() {
            store = Some(position + 1);
            position += 1;
        }
        position += 1;
    }
    std::iter::once(1).chain(store).collect()
}

/// XREAD's and XREADGROUP's keys, as Redis's key specification finds them: the first STREAMS
/// from argument 1 (XREADGROUP: 4) on, then the first half of what follows it; `None` when
/// there is no STREAMS or nothing after it to halve.
fn streams_keys(line: &[&[u8]]) -> Option<Vec<usize>> {
    let search_from = if line[0].eq_ignore_ascii_case(b"xreadgroup") {
        4
    } else {
        1
    };
    let streams = (search_from..line.len())
        .find(|&position| line[position].eq_ignore_ascii_case(b"streams"))?;
    let first = streams + 1;
    let keys = (line.len() - first) / 2;
    Some((first..first + keys).collect())
}

/// MIGRATE's keys: the key argument, or those after KEYS when the key argument is empty
/// (Redis's `migrateGetKeys`).
fn migrate_keys(line: &[&[u8]]) -> Vec<usize> {
    let mut position = 6;
    while position < line.len() {
        let word = line[position];
        if word.eq_ignore_ascii_case(b"keys") {
            if !line[3].is_empty() {
                return Vec::new();
            }
            return (position + 1..line.len()).collect();
        }
        if word.eq_ignore_ascii_case(b"auth") {
            position += 1;
        } else if word.eq_ignore_ascii_case(b"auth2") {
            position += 2;
        }
        position += 1;
    }
    vec![3]
}

/// The flags GETKEYSANDFLAGS shows for the key at `position` of `line`: Redis's for the
/// commands listed, else derived from whether the command writes.
pub fn flags_of(line: &[&[u8]], position: usize) -> &'static [&'static str] {
    let name = String::from_utf8_lossy(line[0]).to_ascii_lowercase();
    let first = position == 1;
    match name.as_str() {
        "set"
            if line
                .iter()
                .skip(3)
                .any(|word| word.eq_ignore_ascii_case(b"get")) =>
        {
            &["RW", "access", "update"]
        }
        "set" | "mset" | "msetnx" | "setex" | "psetex" => &["OW", "update"],
        "lmove" | "rpoplpush" | "blmove" | "brpoplpush" if first => &["RW", "access", "delete"],
        "lmove" | "rpoplpush" | "blmove" | "brpoplpush" => &["RW", "insert"],
        "sort" | "georadius" | "georadiusbymember" if first => &["RO", "access"],
        "sort" | "georadius" | "georadiusbymember" => &["OW", "update"],
        "zunionstore" | "zinterstore" | "zdiffstore" | "sunionstore" | "sinterstore"
        | "sdiffstore" | "zrangestore" | "geosearchstore"
            if first =>
        {
            &["OW", "update"]
        }
        "zunionstore" | "zinterstore" | "zdiffstore" | "sunionstore" | "sinterstore"
        | "sdiffstore" | "zrangestore" | "geosearchstore" => &["RO", "access"],
        "del" | "unlink" | "getdel" => &["RM", "delete"],
        "exists" | "type" | "ttl" | "pttl" | "expiretime" | "pexpiretime" | "touch" => &["RO"],
        _ if super::script_host::is_write(name.as_bytes()) => &["RW", "access", "update"],
        _ => &["RO", "access"],
    }
}

/// COMMAND GETKEYS command [arg ...] (`with_flags`: GETKEYSANDFLAGS).
pub fn command_getkeys(args: &Args, reply: &mut Reply<'_>, with_flags: bool) {
    let line: Vec<&[u8]> = (2..args.len()).map(|position| args.get(position)).collect();
    match key_positions(&line) {
        Err(error) => reply.error(error.text()),
        Ok(positions) => {
            reply.array(positions.len());
            for position in positions {
                if with_flags {
                    reply.array(2);
                    reply.bulk(line[position]);
                    let flags = flags_of(&line, position);
                    reply.set(flags.len());
                    flags.iter().for_each(|flag| reply.simple(flag));
                } else {
                    reply.bulk(line[position]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(line: &str) -> Result<Vec<String>, KeysError> {
        let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        key_positions(&words).map(|positions| {
            positions
                .into_iter()
                .map(|position| String::from_utf8_lossy(words[position]).into_owned())
                .collect()
        })
    }

    #[test]
    fn fixed_positions_follow_command_info() {
        assert_eq!(keys("get k").unwrap(), ["k"]);
        assert_eq!(keys("mset a 1 b 2").unwrap(), ["a", "b"]);
        assert_eq!(keys("lcs a b").unwrap(), ["a", "b"]);
        assert_eq!(keys("blpop a b 0").unwrap(), ["a", "b"]);
        assert_eq!(keys("memory usage k").unwrap(), ["k"]);
        assert_eq!(keys("xgroup create k g $").unwrap(), ["k"]);
    }

    #[test]
    fn counted_keys_are_checked_against_the_arguments() {
        assert_eq!(keys("eval s 1 k a").unwrap(), ["k"]);
        assert!(keys("eval s 0").unwrap().is_empty());
        assert!(keys("eval s 5 k").unwrap().is_empty());
        assert_eq!(keys("fcall f 1 x foo").unwrap(), ["x"]);
        assert_eq!(
            keys("zunionstore d 2 a b WEIGHTS 1 2").unwrap(),
            ["d", "a", "b"]
        );
        assert_eq!(keys("zinter 2 a b").unwrap(), ["a", "b"]);
        assert_eq!(
            keys("zunionstore d 3 a b"),
            Err(KeysError::InvalidArguments)
        );
        assert_eq!(keys("zunionstore d 0 a"), Err(KeysError::InvalidArguments));
        assert_eq!(keys("zunionstore d -1 a"), Err(KeysError::InvalidArguments));
    }

    #[test]
    fn keywords_find_their_keys() {
        assert_eq!(keys("sort abc store def").unwrap(), ["abc", "def"]);
        assert_eq!(
            keys("sort abc store invalid store stillbad store def").unwrap(),
            ["abc", "def"]
        );
        assert_eq!(keys("sort abc by store get store").unwrap(), ["abc"]);
        assert_eq!(keys("xread count 2 streams a b 0 0").unwrap(), ["a", "b"]);
        // Redis's key specification halves what follows STREAMS, rounding down.
        assert_eq!(keys("xread streams a b 0").unwrap(), ["a"]);
        assert_eq!(
            keys("xread count 1 streams a"),
            Err(KeysError::InvalidArguments)
        );
        assert_eq!(keys("xreadgroup group g c streams s >").unwrap(), ["s"]);
    }

    #[test]
    fn errors_come_in_redis_order() {
        assert_eq!(keys("nosuchcommand a"), Err(KeysError::UnknownCommand));
        assert_eq!(keys("ping"), Err(KeysError::NoKeys));
        assert_eq!(keys("get"), Err(KeysError::Arity));
        assert_eq!(keys("get a b"), Err(KeysError::Arity));
        assert_eq!(keys("object help"), Err(KeysError::NoKeys));
        assert_eq!(keys("object nosuch k"), Err(KeysError::UnknownCommand));
    }
}

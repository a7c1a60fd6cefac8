//! CONFIG: every parameter of redis-server 7.0, in one table that drives GET, SET and the help:
//! those Osprey serves itself here, Redis's others in `redis_table.rs`.
//!
//! A parameter is settable at run time (its setter applies it), fixed while Osprey runs (a
//! start-up setting, or a Redis setting Osprey answers with a fixed value: SET accepts its
//! current value only, as tools often set one), immutable as in Redis (`databases`), or kept:
//! one of Redis's tuning knobs for its own internals (encodings, rehashing, defragmentation,
//! AOF/RDB and replication timings), which has no counterpart in Osprey. A kept parameter is
//! checked as Redis checks it, remembered, and answered by GET, so that tools and test suites
//! that set them go on; it changes nothing (docs/internals/redis-mapping.md lists them).
//!
//! Invariants:
//! - CONFIG SET of several parameters is all or nothing, as in Redis 7: every name is checked
//!   first, in order (unknown, immutable, duplicate), then each value is checked against its type and
//!   range; only then are the setters called, and a setter's failure restores what the
//!   earlier ones changed.
//! - GET answers each matching parameter once, under its own name and under its alias when
//!   the pattern matches that, as Redis does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use wire_resp::Args;

use super::command_stats;
use super::commands::{Command, subcommand_error};
use super::glob::Glob;
use super::pubsub::notify;
use super::reply::Reply;
use super::{After, Session, keys};
use crate::state::ServerState;

/// CONFIG.
pub const COMMANDS: &[Command] = &[("config", -2, config)];

/// The settable parameters that no other part of the server keeps.
#[derive(Debug)]
pub struct Settings {
    /// `latency-monitor-threshold`: stored and reported; Osprey records no latency events.
    pub latency_monitor_threshold_ms: AtomicU64,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call the commands Redis refuses them
    /// (for tests; not scripts, and not blocking commands, which a script cannot wait on).
    pub scripts_may_call_noscript: AtomicBool,
    /// `hll-sparse-max-bytes`: the size past which a sparse HyperLogLog turns dense.
    pub hll_sparse_bytes_max: AtomicU64,
    /// `stream-node-max-entries`: where a stream's next append starts a new node (0: never),
    /// which approximate trimming removes whole.
    pub stream_node_entries_max: AtomicU64,
    /// `maxmemory`, and the memory it is compared with.
    pub memory_limit: super::memory_limit::MemoryLimit,
    /// The kept parameters set since start (by name; the others have Redis's default).
    kept: Mutex<HashMap<&'static str, String>>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            latency_monitor_threshold_ms: AtomicU64::new(0),
            scripts_may_call_noscript: AtomicBool::new(false),
            hll_sparse_bytes_max: AtomicU64::new(
                super::hyperloglog::SPARSE_BYTES_MAX_DEFAULT as u64,
            ),
            stream_node_entries_max: AtomicU64::new(super::streams::NODE_ENTRIES_DEFAULT as u64),
            memory_limit: super::memory_limit::MemoryLimit::default(),
            kept: Mutex::new(HashMap::new()),
        }
    }
}

/// Reads a parameter's current value as CONFIG GET prints it.
type Getter = fn(&ServerState) -> String;
/// Applies a value that passed its type's check; the error is Redis's reason text.
type Setter = fn(&ServerState, &[u8]) -> Result<(), String>;

/// What CONFIG SET may do with a parameter.
#[derive(Clone, Copy)]
enum Access {
    /// Refused whatever the value (Redis's immutable parameters).
    Immutable,
    /// Fixed while Osprey runs: its current value is accepted, any other refused.
    Fixed,
    Settable(Setter),
    /// Checked, remembered and reported; no effect in Osprey.
    Kept,
}

/// How a value is checked before it is set.
#[derive(Clone, Copy)]
enum Kind {
    Integer {
        min: i64,
        max: i64,
    },
    /// An integer, or a size with a unit (`64mb`, `1gb`, `2k`), as Redis's memory parameters.
    Memory {
        min: i64,
        max: i64,
    },
    Bool,
    /// One of the names.
    Enum(&'static [&'static str]),
    /// Words, each one of the names (Redis's multi-argument enums).
    Flags(&'static [&'static str]),
    /// Checked by its setter (or its fixed value).
    Text,
}

/// Where a parameter's value comes from.
#[derive(Clone, Copy)]
enum Value {
    /// Read from the server.
    Live(Getter),
    /// Redis's default, or what a kept parameter was set to since.
    Default(&'static str),
}

/// One parameter.
struct Parameter {
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    access: Access,
    value: Value,
}

const INT_MAX: i64 = i32::MAX as i64;

mod redis_table;

/// Every parameter, by name.
static PARAMETERS: &[Parameter] = &[
    fixed("appendfsync", Kind::Text, |state| {
        append_fsync(state).unwrap_or("everysec").to_owned()
    }),
    fixed("appendonly", Kind::Bool, |state| {
        yes_no(append_fsync(state).is_some())
    }),
    fixed("bind", Kind::Text, |state| {
        state.config.resp.address.clone()
    }),
    settable(
        "busy-reply-threshold",
        Some("lua-time-limit"),
        Kind::Integer {
            min: 0,
            max: i64::MAX,
        },
        |state| super::scripting::parameters(state)[0].1.clone(),
        |state, value| {
            let set = super::scripting::set_parameter(state, b"busy-reply-threshold", value);
            set.unwrap_or(Ok(())).map_err(|_| NOT_AN_INTEGER.to_owned())
        },
    ),
    fixed("client-output-buffer-limit", Kind::Text, |state| {
        state
            .config
            .resp
            .output_buffer_limits()
            .unwrap_or_default()
            .redis_text()
    }),
    fixed("client-query-buffer-limit", Kind::Text, |_| {
        wire_resp::QUERY_BUFFER_LIMIT_BYTES.to_string()
    }),
    Parameter {
        name: "databases",
        alias: None,
        kind: Kind::Integer {
            min: 1,
            max: INT_MAX,
        },
        access: Access::Immutable,
        value: Value::Live(|state| state.config.resp.databases.to_string()),
    },
    settable(
        "dbfilename",
        None,
        Kind::Text,
        |state| state.resp_saves.dbfilename(),
        |state, value| {
            let name = std::str::from_utf8(value)
                .map_err(|_| "dbfilename can't be a path, just a filename".to_owned())?;
            state.resp_saves.set_dbfilename(name).map_err(str::to_owned)
        },
    ),
    fixed("dir", Kind::Text, |state| {
        state.config.service.work_directory.display().to_string()
    }),
    settable(
        "hll-sparse-max-bytes",
        None,
        Kind::Memory {
            min: 0,
            max: i64::MAX,
        },
        |state| {
            let settings = &state.resp_settings;
            settings
                .hll_sparse_bytes_max
                .load(Ordering::Relaxed)
                .to_string()
        },
        |state, value| {
            let kind = Kind::Memory {
                min: 0,
                max: i64::MAX,
            };
            store_checked(kind, value, &state.resp_settings.hll_sparse_bytes_max)
        },
    ),
    settable(
        "stream-node-max-entries",
        None,
        Kind::Integer {
            min: 0,
            max: i64::MAX,
        },
        |state| {
            let settings = &state.resp_settings;
            let entries = settings.stream_node_entries_max.load(Ordering::Relaxed);
            entries.to_string()
        },
        |state, value| {
            let kind = Kind::Integer {
                min: 0,
                max: i64::MAX,
            };
            store_checked(kind, value, &state.resp_settings.stream_node_entries_max)
        },
    ),
    settable(
        "latency-monitor-threshold",
        None,
        Kind::Integer {
            min: 0,
            max: i64::MAX,
        },
        |state| {
            let settings = &state.resp_settings;
            settings
                .latency_monitor_threshold_ms
                .load(Ordering::Relaxed)
                .to_string()
        },
        |state, value| {
            let ms = parsed_u64(value)?;
            let settings = &state.resp_settings;
            settings
                .latency_monitor_threshold_ms
                .store(ms, Ordering::Relaxed);
            Ok(())
        },
    ),
    settable(
        "loglevel",
        None,
        Kind::Enum(&["debug", "verbose", "notice", "warning"]),
        |_| crate::logging::redis_level().to_owned(),
        |_, value| crate::logging::set_redis_level(&String::from_utf8_lossy(value)),
    ),
    settable(
        "latency-tracking",
        None,
        Kind::Bool,
        |_| yes_no(command_stats::latency_tracking()),
        |_, value| {
            command_stats::set_latency_tracking(value.eq_ignore_ascii_case(b"yes"));
            Ok(())
        },
    ),
    settable(
        "latency-tracking-info-percentiles",
        None,
        Kind::Text,
        |_| {
            let words: Vec<String> = command_stats::info_percentiles()
                .iter()
                .map(f64::to_string)
                .collect();
            words.join(" ")
        },
        |_, value| command_stats::set_info_percentiles(&String::from_utf8_lossy(value)),
    ),
    fixed(
        "maxclients",
        Kind::Integer {
            min: 1,
            max: u32::MAX as i64,
        },
        |state| state.config.resp.maxclients.to_string(),
    ),
    settable(
        "maxmemory",
        None,
        Kind::Memory {
            min: 0,
            max: i64::MAX,
        },
        |state| state.resp_settings.memory_limit.limit_bytes().to_string(),
        |state, value| {
            let bytes = check_kind(
                Kind::Memory {
                    min: 0,
                    max: i64::MAX,
                },
                value,
            )?;
            let bytes = bytes.parse().map_err(|_| NOT_A_MEMORY_VALUE.to_owned())?;
            state.resp_settings.memory_limit.set_limit_bytes(bytes);
            Ok(())
        },
    ),
    fixed("maxmemory-clients", Kind::Text, |state| {
        state.client_memory.limit_bytes().to_string()
    }),
    fixed("maxmemory-policy", Kind::Text, |_| "noeviction".to_owned()),
    settable(
        "notify-keyspace-events",
        None,
        Kind::Text,
        |state| notify::flags_text(state.pubsub.notify_flags.load(Ordering::Relaxed)),
        |state, value| {
            let flags = notify::parse_flags(value).ok_or(notify::INVALID_CLASS)?;
            state.pubsub.notify_flags.store(flags, Ordering::Relaxed);
            Ok(())
        },
    ),
    fixed("port", Kind::Text, |state| {
        state.config.resp.port.to_string()
    }),
    fixed("proto-max-bulk-len", Kind::Text, |_| {
        let limits = wire_resp::RequestLimits::DEFAULT;
        limits.bulk_length_max_bytes.to_string()
    }),
    fixed("save", Kind::Text, |_| String::new()),
    settable(
        "slowlog-log-slower-than",
        None,
        Kind::Integer {
            min: -1,
            max: i64::MAX,
        },
        |state| state.resp_slowlog.threshold_us().to_string(),
        |state, value| {
            let threshold_us = keys::parse_i64(value).map_err(|()| NOT_AN_INTEGER)?;
            state.resp_slowlog.set_threshold_us(threshold_us);
            Ok(())
        },
    ),
    settable(
        "slowlog-max-len",
        None,
        Kind::Integer {
            min: 0,
            max: i64::MAX,
        },
        |state| state.resp_slowlog.len_max().to_string(),
        |state, value| {
            let len_max = usize::try_from(parsed_u64(value)?).unwrap_or(usize::MAX);
            state.resp_slowlog.set_len_max(len_max);
            Ok(())
        },
    ),
    fixed(
        "timeout",
        Kind::Integer {
            min: 0,
            max: INT_MAX,
        },
        |state| state.config.resp.timeout.to_string(),
    ),
];

const NOT_AN_INTEGER: &str = "argument couldn't be parsed into an integer";
const NOT_A_MEMORY_VALUE: &str = "argument must be a memory value";

impl Parameter {
    /// The value CONFIG GET answers.
    fn current(&self, state: &ServerState) -> String {
        match self.value {
            Value::Live(get) => get(state),
            Value::Default(default) => state
                .resp_settings
                .kept
                .lock()
                .get(self.name)
                .cloned()
                .unwrap_or_else(|| default.to_owned()),
        }
    }
}

const fn fixed(name: &'static str, kind: Kind, get: Getter) -> Parameter {
    Parameter {
        name,
        alias: None,
        kind,
        access: Access::Fixed,
        value: Value::Live(get),
    }
}

/// One of Redis's parameters with its default (kept, fixed at it, or immutable).
const fn redis(
    access: Access,
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    default: &'static str,
) -> Parameter {
    Parameter {
        name,
        alias,
        kind,
        access,
        value: Value::Default(default),
    }
}

const fn settable(
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    get: Getter,
    set: Setter,
) -> Parameter {
    Parameter {
        name,
        alias,
        kind,
        access: Access::Settable(set),
        value: Value::Live(get),
    }
}

/// Checks `value` as `kind` (a non-negative integer or memory size) and stores it in `slot`.
fn store_checked(kind: Kind, value: &[u8], slot: &AtomicU64) -> Result<(), String> {
    let checked = check_kind(kind, value)?;
    let parsed = checked.parse().map_err(|_| match kind {
        Kind::Memory { .. } => NOT_A_MEMORY_VALUE.to_owned(),
        _ => NOT_AN_INTEGER.to_owned(),
    })?;
    slot.store(parsed, Ordering::Relaxed);
    Ok(())
}

fn yes_no(on: bool) -> String {
    if on { "yes" } else { "no" }.to_owned()
}

fn parsed_u64(value: &[u8]) -> Result<u64, String> {
    keys::parse_i64(value)
        .ok()
        .and_then(|value| u64::try_from(value).ok())
        .ok_or_else(|| NOT_AN_INTEGER.to_owned())
}

/// Redis's `appendfsync` for the RESP namespace's storage (`None`: in memory only): `always`
/// with commit-to-device, else `everysec` (writes reach the file within flush-max-ms).
pub fn append_fsync(state: &ServerState) -> Option<&'static str> {
    let namespace = state.namespace(state.config.resp_namespace().as_bytes())?;
    let storage = namespace.config().storage.as_ref()?;
    Some(if storage.commit_to_device {
        "always"
    } else {
        "everysec"
    })
}

/// Osprey's parameters, then Redis's others.
fn every_parameter() -> impl Iterator<Item = &'static Parameter> {
    PARAMETERS.iter().chain(redis_table::REDIS_PARAMETERS)
}

fn lookup(name: &[u8]) -> Option<&'static Parameter> {
    every_parameter().find(|parameter| {
        name.eq_ignore_ascii_case(parameter.name.as_bytes())
            || parameter
                .alias
                .is_some_and(|alias| name.eq_ignore_ascii_case(alias.as_bytes()))
    })
}

const HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Print this help.",
];

/// CONFIG GET pattern [pattern ...] | SET name value [name value ...] | RESETSTAT | REWRITE |
/// HELP
fn config(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let subcommand = args.get(1).to_ascii_uppercase();
    match (subcommand.as_slice(), args.len()) {
        (b"GET", 3..) => config_get(&session.state, args, reply),
        (b"SET", 4..) if args.len().is_multiple_of(2) => config_set(&session.state, args, reply),
        (b"SET", 4..) => reply.error("ERR syntax error"),
        (b"RESETSTAT", 2) => {
            session.state.resp_commands.store(0, Ordering::Relaxed);
            session
                .state
                .resp_unknown_commands
                .store(0, Ordering::Relaxed);
            super::error_stats::reset();
            super::command_stats::reset();
            reply.ok();
        }
        // Osprey's settings come from its own TOML file, which CONFIG never writes: Redis's
        // answer for a server started without a config file.
        (b"REWRITE", 2) => reply.error("ERR The server is running without a config file"),
        (b"HELP", 2) => {
            reply.array(HELP.len());
            HELP.iter().for_each(|line| reply.simple(line));
        }
        _ => reply.error(&subcommand_error(
            "config",
            &["get", "set", "resetstat", "rewrite", "help"],
            args,
        )),
    }
    After::Continue
}

fn config_get(state: &ServerState, args: &Args, reply: &mut Reply<'_>) {
    let patterns: Vec<Glob> = (2..args.len())
        .map(|position| Glob::new(&args.get(position).to_ascii_lowercase()))
        .collect();
    let matches = |name: &str| patterns.iter().any(|glob| glob.matches(name.as_bytes()));
    let mut found: Vec<(&str, String)> = Vec::new();
    for parameter in every_parameter() {
        let names = std::iter::once(parameter.name).chain(parameter.alias);
        for name in names.filter(|name| matches(name)) {
            found.push((name, parameter.current(state)));
        }
    }
    reply.map(found.len());
    for (name, value) in found {
        reply.bulk(name.as_bytes());
        reply.bulk(value.as_bytes());
    }
}

/// Sets every pair, or none (see the invariants).
fn config_set(state: &ServerState, args: &Args, reply: &mut Reply<'_>) {
    let pairs: Vec<(&[u8], &[u8])> = (2..args.len())
        .step_by(2)
        .map(|position| (args.get(position), args.get(position + 1)))
        .collect();
    match checked_pairs(state, &pairs).and_then(|checked| apply(state, &checked)) {
        Ok(()) => reply.ok(),
        Err(message) => reply.error(&message),
    }
}

/// The parameters `pairs` name, each checked; Redis's error for the first that fails.
fn checked_pairs<'a>(
    state: &ServerState,
    pairs: &[(&'a [u8], &'a [u8])],
) -> Result<Vec<(&'static Parameter, &'a [u8])>, String> {
    let mut checked: Vec<(&'static Parameter, &[u8])> = Vec::with_capacity(pairs.len());
    for &(name, value) in pairs {
        let Some(parameter) = lookup(name) else {
            return Err(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                String::from_utf8_lossy(name)
            ));
        };
        let failed = |reason: &str| set_failed(name, reason);
        let fixed_elsewhere = match parameter.access {
            Access::Immutable => true,
            Access::Fixed => parameter.current(state).as_bytes() != value,
            Access::Settable(_) | Access::Kept => false,
        };
        if fixed_elsewhere {
            return Err(failed("can't set immutable config"));
        }
        if checked
            .iter()
            .any(|(seen, _)| std::ptr::eq(*seen, parameter))
        {
            return Err(failed("duplicate parameter"));
        }
        checked.push((parameter, value));
    }
    // Redis's error names the parameter as the client did (an alias, too).
    for (&(name, value), (parameter, _)) in pairs.iter().zip(&checked) {
        check_kind(parameter.kind, value).map_err(|reason| set_failed(name, &reason))?;
    }
    Ok(checked)
}

/// Calls the setters in order; if one fails, restores what the earlier ones changed.
fn apply(state: &ServerState, checked: &[(&'static Parameter, &[u8])]) -> Result<(), String> {
    let before: Vec<String> = checked
        .iter()
        .map(|(parameter, _)| parameter.current(state))
        .collect();
    for (done, &(parameter, value)) in checked.iter().enumerate() {
        if let Err(reason) = set(state, parameter, value) {
            for (&(earlier, _), old) in checked[..done].iter().zip(&before) {
                let _ = set(state, earlier, old.as_bytes());
            }
            return Err(set_failed(parameter.name.as_bytes(), &reason));
        }
    }
    Ok(())
}

/// Sets one parameter whose value passed its check.
fn set(state: &ServerState, parameter: &'static Parameter, value: &[u8]) -> Result<(), String> {
    match parameter.access {
        Access::Settable(set) => set(state, value),
        Access::Kept => {
            let value = check_kind(parameter.kind, value)?;
            let mut kept = state.resp_settings.kept.lock();
            kept.insert(parameter.name, value);
            Ok(())
        }
        Access::Fixed | Access::Immutable => Ok(()),
    }
}

fn set_failed(name: &[u8], reason: &str) -> String {
    format!(
        "ERR CONFIG SET failed (possibly related to argument '{}') - {reason}",
        String::from_utf8_lossy(name)
    )
}

/// Redis's check of a value against its parameter's type and range; the value as GET then
/// answers it (a size in bytes, names in lower case).
fn check_kind(kind: Kind, value: &[u8]) -> Result<String, String> {
    let in_range = |number: i64, min: i64, max: i64| {
        if number < min || number > max {
            return Err(format!(
                "argument must be between {min} and {max} inclusive"
            ));
        }
        Ok(number.to_string())
    };
    let lower = String::from_utf8_lossy(value).to_ascii_lowercase();
    match kind {
        Kind::Integer { min, max } => {
            let number = keys::parse_i64(value).map_err(|()| NOT_AN_INTEGER.to_owned())?;
            in_range(number, min, max)
        }
        Kind::Memory { min, max } => {
            let bytes = memory_bytes(&lower).ok_or_else(|| NOT_A_MEMORY_VALUE.to_owned())?;
            in_range(bytes, min, max)
        }
        Kind::Bool if lower == "yes" || lower == "no" => Ok(lower),
        Kind::Bool => Err("argument must be 'yes' or 'no'".to_owned()),
        Kind::Enum(names) if names.contains(&lower.as_str()) => Ok(lower),
        Kind::Flags(names)
            if !lower.trim().is_empty()
                && lower.split_whitespace().all(|word| names.contains(&word)) =>
        {
            Ok(lower.split_whitespace().collect::<Vec<_>>().join(" "))
        }
        Kind::Enum(names) | Kind::Flags(names) => Err(format!(
            "argument(s) must be one of the following: {}",
            names.join(", ")
        )),
        Kind::Text => Ok(String::from_utf8_lossy(value).into_owned()),
    }
}

/// Redis's `memtoull`: digits (no sign), then an optional unit (`b`, `k` = 1000, `kb` = 1024, `m`, `mb`,
/// `g`, `gb`), case-insensitive; `None` for anything else or a result past `i64::MAX`.
fn memory_bytes(lower: &str) -> Option<i64> {
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(digits_end);
    let multiplier: i64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    digits.parse::<i64>().ok()?.checked_mul(multiplier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_are_unique_and_lower_case() {
        let mut names: Vec<&str> = every_parameter()
            .flat_map(|parameter| std::iter::once(parameter.name).chain(parameter.alias))
            .collect();
        assert!(names.iter().all(|name| *name == name.to_ascii_lowercase()));
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
    }

    #[test]
    fn values_are_checked_as_redis_checks_them() {
        let range = Kind::Integer { min: -1, max: 10 };
        assert_eq!(check_kind(range, b"10"), Ok("10".to_owned()));
        assert_eq!(
            check_kind(range, b"11"),
            Err("argument must be between -1 and 10 inclusive".to_owned())
        );
        assert_eq!(check_kind(range, b"x"), Err(NOT_AN_INTEGER.to_owned()));
        assert_eq!(check_kind(Kind::Bool, b"YES"), Ok("yes".to_owned()));
        assert!(check_kind(Kind::Bool, b"on").is_err());
        let memory = Kind::Memory {
            min: 0,
            max: i64::MAX,
        };
        assert_eq!(check_kind(memory, b"2KB"), Ok("2048".to_owned()));
        assert_eq!(check_kind(memory, b"3m"), Ok("3000000".to_owned()));
        assert_eq!(check_kind(memory, b"1gb"), Ok("1073741824".to_owned()));
        assert_eq!(
            check_kind(memory, b"1tb"),
            Err(NOT_A_MEMORY_VALUE.to_owned())
        );
        assert_eq!(
            check_kind(memory, b"bla"),
            Err(NOT_A_MEMORY_VALUE.to_owned())
        );
        let policy = Kind::Enum(&["ip", "hostname"]);
        assert_eq!(check_kind(policy, b"IP"), Ok("ip".to_owned()));
        assert_eq!(
            check_kind(policy, b"dns"),
            Err("argument(s) must be one of the following: ip, hostname".to_owned())
        );
        let flags = Kind::Flags(&["default", "save", "now"]);
        assert_eq!(check_kind(flags, b"save  NOW"), Ok("save now".to_owned()));
        assert!(check_kind(flags, b"save later").is_err());
    }
}

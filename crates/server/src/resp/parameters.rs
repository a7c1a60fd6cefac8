//! CONFIG: the Redis parameters Osprey has, in one table that drives GET, SET and the help.
//!
//! A parameter is settable at run time (its setter applies it), fixed while Osprey runs (a
//! start-up setting, or a Redis setting Osprey answers with a fixed value: SET accepts its
//! current value only, as tools often set one), or immutable as in Redis (`databases`).
//!
//! Invariants:
//! - CONFIG SET of several parameters is all or nothing, as in Redis 7: every name is checked
//!   first, in order (unknown, immutable, duplicate), then each value is checked against its type and
//!   range; only then are the setters called, and a setter's failure restores what the
//!   earlier ones changed.
//! - GET answers each matching parameter once, under its own name and under its alias when
//!   the pattern matches that, as Redis does.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use wire_resp::Args;

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
    /// `latency-tracking`: stored and reported; Osprey keeps no per-command latency
    /// histograms for INFO latencystats.
    pub latency_tracking: AtomicBool,
    /// `latency-monitor-threshold`: stored and reported; Osprey records no latency events.
    pub latency_monitor_threshold_ms: AtomicU64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            latency_tracking: AtomicBool::new(true),
            latency_monitor_threshold_ms: AtomicU64::new(0),
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
}

/// How a value is checked before it is set.
#[derive(Clone, Copy)]
enum Kind {
    Integer {
        min: i64,
        max: i64,
    },
    Bool,
    /// Checked by its setter (or its fixed value).
    Text,
}

/// One parameter.
struct Parameter {
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    access: Access,
    get: Getter,
}

const INT_MAX: i64 = i32::MAX as i64;

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
        get: |state| state.config.resp.databases.to_string(),
    },
    fixed("dir", Kind::Text, |state| {
        state.config.service.work_directory.display().to_string()
    }),
    fixed("hll-sparse-max-bytes", Kind::Text, |_| "3000".to_owned()),
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
        "latency-tracking",
        None,
        Kind::Bool,
        |state| yes_no(state.resp_settings.latency_tracking.load(Ordering::Relaxed)),
        |state, value| {
            let on = value.eq_ignore_ascii_case(b"yes");
            state
                .resp_settings
                .latency_tracking
                .store(on, Ordering::Relaxed);
            Ok(())
        },
    ),
    fixed("latency-tracking-info-percentiles", Kind::Text, |_| {
        "50 99 99.9".to_owned()
    }),
    fixed(
        "maxclients",
        Kind::Integer {
            min: 1,
            max: u32::MAX as i64,
        },
        |state| state.config.resp.maxclients.to_string(),
    ),
    fixed("maxmemory", Kind::Text, |_| "0".to_owned()),
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

const fn fixed(name: &'static str, kind: Kind, get: Getter) -> Parameter {
    Parameter {
        name,
        alias: None,
        kind,
        access: Access::Fixed,
        get,
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
        get,
    }
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

fn lookup(name: &[u8]) -> Option<&'static Parameter> {
    PARAMETERS.iter().find(|parameter| {
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
    for parameter in PARAMETERS {
        let names = std::iter::once(parameter.name).chain(parameter.alias);
        for name in names.filter(|name| matches(name)) {
            found.push((name, (parameter.get)(state)));
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
            Access::Fixed => (parameter.get)(state).as_bytes() != value,
            Access::Settable(_) => false,
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
    for &(parameter, value) in &checked {
        check_kind(parameter.kind, value)
            .map_err(|reason| set_failed(parameter.name.as_bytes(), &reason))?;
    }
    Ok(checked)
}

/// Calls the setters in order; if one fails, restores what the earlier ones changed.
fn apply(state: &ServerState, checked: &[(&'static Parameter, &[u8])]) -> Result<(), String> {
    let before: Vec<String> = checked
        .iter()
        .map(|(parameter, _)| (parameter.get)(state))
        .collect();
    for (done, &(parameter, value)) in checked.iter().enumerate() {
        let Access::Settable(set) = parameter.access else {
            continue;
        };
        if let Err(reason) = set(state, value) {
            for (&(earlier, _), old) in checked[..done].iter().zip(&before) {
                if let Access::Settable(restore) = earlier.access {
                    let _ = restore(state, old.as_bytes());
                }
            }
            return Err(set_failed(parameter.name.as_bytes(), &reason));
        }
    }
    Ok(())
}

fn set_failed(name: &[u8], reason: &str) -> String {
    format!(
        "ERR CONFIG SET failed (possibly related to argument '{}') - {reason}",
        String::from_utf8_lossy(name)
    )
}

/// Redis's check of a value against its parameter's type and range.
fn check_kind(kind: Kind, value: &[u8]) -> Result<(), String> {
    match kind {
        Kind::Integer { min, max } => {
            let number = keys::parse_i64(value).map_err(|()| NOT_AN_INTEGER.to_owned())?;
            if number < min || number > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(())
        }
        Kind::Bool if value.eq_ignore_ascii_case(b"yes") || value.eq_ignore_ascii_case(b"no") => {
            Ok(())
        }
        Kind::Bool => Err("argument must be 'yes' or 'no'".to_owned()),
        Kind::Text => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_are_unique_and_lower_case() {
        let mut names: Vec<&str> = PARAMETERS
            .iter()
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
        assert_eq!(check_kind(range, b"10"), Ok(()));
        assert_eq!(
            check_kind(range, b"11"),
            Err("argument must be between -1 and 10 inclusive".to_owned())
        );
        assert_eq!(check_kind(range, b"x"), Err(NOT_AN_INTEGER.to_owned()));
        assert_eq!(check_kind(Kind::Bool, b"YES"), Ok(()));
        assert!(check_kind(Kind::Bool, b"on").is_err());
    }
}

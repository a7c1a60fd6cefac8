//! WAIT, WAITAOF, LATENCY and DEBUG: what tools and test suites ask a Redis server about its
//! replication, its latency and its internals, answered from what Osprey has.

use std::time::Duration;

use wire_resp::Args;

use super::commands::{Command, subcommand_error};
use super::reply::Reply;
use super::{After, Session, keys};

/// WAIT, WAITAOF, LATENCY, DEBUG.
pub const COMMANDS: &[Command] = &[
    ("debug", -2, debug),
    ("latency", -2, latency),
    ("wait", 3, wait),
    ("waitaof", 4, waitaof),
];

/// The longest DEBUG SLEEP: it holds a long-request thread while it sleeps.
const DEBUG_SLEEP_MAX: Duration = Duration::from_secs(3600);

/// WAIT numreplicas timeout: Osprey acknowledges a write only once its replicas hold it, so
/// the answer is at once the replicas every acknowledged write reached.
fn wait(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    if keys::parse_i64(args.get(1)).is_err() {
        reply.error("ERR value is not an integer or out of range");
        return After::Continue;
    }
    match keys::parse_i64(args.get(2)) {
        Err(()) => reply.error("ERR timeout is not an integer or out of range"),
        Ok(timeout) if timeout < 0 => reply.error("ERR timeout is negative"),
        Ok(_) => reply.integer(i64::try_from(replica_count(session)).unwrap_or(i64::MAX)),
    }
    After::Continue
}

/// Replicas of each write of the RESP namespace: its replication factor less the master,
/// capped by the nodes there are; 0 on a single node.
fn replica_count(session: &Session) -> usize {
    let state = &session.state;
    if !state.is_clustered() {
        return 0;
    }
    let resp_namespace = state.config.resp_namespace();
    let factor = state
        .config
        .namespaces
        .iter()
        .find(|namespace| namespace.name == resp_namespace)
        .map_or(1, |namespace| usize::from(namespace.replication_factor));
    let nodes = state.cluster_view().peers(false).len() + 1;
    factor.min(nodes).saturating_sub(1)
}

fn waitaof(_: &mut Session, _: &Args, reply: &mut Reply<'_>) -> After {
    reply.error(
        "ERR WAITAOF is not served by Osprey: it has no append-only file (a write is \
         acknowledged once its storage and its replicas hold it)",
    );
    After::Continue
}

const LATENCY_HELP: &[&str] = &[
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Print this help.",
];

/// Redis's LATENCY DOCTOR while latency monitoring has never been on.
const DOCTOR_DISABLED: &str = "I'm sorry, Dave, I can't do that. Latency monitoring is disabled \
     in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold \
     <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest \
     to take a look at https://redis.io/topics/latency-monitor.\n";

/// Redis's LATENCY DOCTOR with monitoring on and no event recorded.
const DOCTOR_QUIET: &str = "Dave, no latency spike was observed during the lifetime of this \
     Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, \
     take a stress pill, and think things over.\n";

/// LATENCY LATEST | HISTORY event | RESET [event ...] | GRAPH event | DOCTOR |
/// HISTOGRAM [command ...] | HELP: Osprey records no latency events (spikes over
/// `latency-monitor-threshold`), so it answers those as Redis does with none recorded;
/// HISTOGRAM answers the per-command histograms.
fn latency(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let subcommand = args.get(1).to_ascii_uppercase();
    match (subcommand.as_slice(), args.len()) {
        (b"LATEST", 2) | (b"HISTORY", 3) => reply.array(0),
        (b"HISTOGRAM", _) => {
            let names: Vec<String> = (2..args.len())
                .map(|position| String::from_utf8_lossy(args.get(position)).to_ascii_lowercase())
                .collect();
            crate::latency::redis::reply_histogram(&names, reply);
        }
        (b"RESET", _) => reply.integer(0),
        (b"GRAPH", 3) => reply.error(&format!(
            "ERR No samples available for event '{}'",
            String::from_utf8_lossy(args.get(2))
        )),
        (b"DOCTOR", 2) => {
            let settings = &session.state.resp_settings;
            let threshold_ms = settings
                .latency_monitor_threshold_ms
                .load(std::sync::atomic::Ordering::Relaxed);
            let text = if threshold_ms == 0 {
                DOCTOR_DISABLED
            } else {
                DOCTOR_QUIET
            };
            reply.verbatim(text.as_bytes());
        }
        (b"HELP", 2) => {
            reply.array(LATENCY_HELP.len());
            LATENCY_HELP.iter().for_each(|line| reply.simple(line));
        }
        _ => reply.error(&subcommand_error(
            "latency",
            &[
                "doctor",
                "graph",
                "histogram",
                "history",
                "latest",
                "reset",
                "help",
            ],
            args,
        )),
    }
    After::Continue
}

/// DEBUG SLEEP seconds | SET-ACTIVE-EXPIRE 0|1 | OBJECT key | CHANGE-REPL-ID | DIGEST |
/// DIGEST-VALUE key [key ...] | RELOAD [options] | QUICKLIST-PACKED-THRESHOLD size |
/// PROTOCOL type | HELP
fn debug(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let subcommand = args.get(1).to_ascii_uppercase();
    match (subcommand.as_slice(), args.len()) {
        (b"SLEEP", 3) => return debug_sleep(session, args.get(2), reply),
        // The engine's expiry sweeps run on their own; the switch is accepted and changes
        // nothing (an expired key is never served either way).
        (b"SET-ACTIVE-EXPIRE", 3) | (b"CHANGE-REPL-ID", 2) => reply.ok(),
        (b"SET-DISABLE-DENY-SCRIPTS", 3) => {
            let lifted = keys::parse_i64(args.get(2)).is_ok_and(|value| value != 0);
            let settings = &session.state.resp_settings;
            settings
                .scripts_may_call_noscript
                .store(lifted, std::sync::atomic::Ordering::Relaxed);
            reply.ok();
        }
        (b"OBJECT", 3) => super::dump::debug_object(session, args.get(2), reply),
        (b"DIGEST", 2) => return super::digest::debug_digest(session, reply),
        (b"DIGEST-VALUE", _) => {
            let keys = (2..args.len()).map(|position| args.get(position).to_vec());
            super::digest::debug_digest_value(session, keys, reply);
        }
        (b"RELOAD", _) => debug_reload(args, reply),
        (b"PROTOCOL", 3) => debug_protocol(args.get(2), reply),
        (b"QUICKLIST-PACKED-THRESHOLD", 3) => match memory_value(args.get(2)) {
            Some(bytes) if bytes <= PACKED_THRESHOLD_BYTES_MAX => reply.ok(),
            _ => reply
                .error("ERR argument must be a memory value bigger than 1 and smaller than 4gb"),
        },
        (b"HELP", 2) => {
            reply.array(DEBUG_HELP.len());
            DEBUG_HELP.iter().for_each(|line| reply.simple(line));
        }
        _ => reply.error(&format!(
            "ERR DEBUG {} is not served by Osprey (it serves SLEEP, SET-ACTIVE-EXPIRE, \
             SET-DISABLE-DENY-SCRIPTS, OBJECT, CHANGE-REPL-ID, DIGEST, DIGEST-VALUE, RELOAD, \
             QUICKLIST-PACKED-THRESHOLD, PROTOCOL and HELP)",
            printable(args.get(1))
        )),
    }
    After::Continue
}

const DEBUG_HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANGE-REPL-ID",
    "    Answered OK: Osprey has no replication ID.",
    "DIGEST",
    "    Output a hex signature representing the current DB content (Osprey's own digest).",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "OBJECT <key>",
    "    Show low level info about the `key` and associated value.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Accepted; Osprey's lists have no quicklist nodes.",
    "RELOAD [MERGE] [NOFLUSH] [NOSAVE]",
    "    Answered OK: Osprey's data lives in its own storage, with nothing to save and reload.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Accepted; Osprey's expiry sweeps run on their own.",
    "SET-DISABLE-DENY-SCRIPTS <0|1>",
    "    Let scripts call the commands they may not (not scripts or blocking commands).",
    "SLEEP <seconds>",
    "    Stop the connection for <seconds> (may be fractional); others are served.",
    "HELP",
    "    Print this help.",
];

/// DEBUG PROTOCOL type: a fixed value of each RESP3 type, or its RESP2 form, as Redis's
/// `debug.c` answers (client libraries test their parsers with it).
fn debug_protocol(name: &[u8], reply: &mut Reply<'_>) {
    let resp3 = reply.is_resp3();
    let boolean = |reply: &mut Reply<'_>, value: bool| match (resp3, value) {
        (true, true) => reply.encoded(b"#t\r\n"),
        (true, false) => reply.encoded(b"#f\r\n"),
        (false, value) => reply.integer(i64::from(value)),
    };
    match name.to_ascii_lowercase().as_slice() {
        b"string" => reply.bulk(b"Hello World"),
        b"integer" => reply.integer(12345),
        // Redis's value, not pi: the test value its clients expect.
        #[allow(clippy::approx_constant)]
        b"double" => reply.double(3.141),
        b"bignum" => {
            const BIGNUM: &[u8] = b"1234567999999999999999999999999999999";
            if resp3 {
                reply.encoded(b"(");
                reply.encoded(BIGNUM);
                reply.encoded(b"\r\n");
            } else {
                reply.bulk(BIGNUM);
            }
        }
        b"null" => reply.null(),
        b"array" | b"set" => {
            if name.eq_ignore_ascii_case(b"set") {
                reply.set(3);
            } else {
                reply.array(3);
            }
            (0..3).for_each(|value| reply.integer(value));
        }
        b"map" => {
            reply.map(3);
            for key in 0..3 {
                reply.integer(key);
                boolean(reply, key == 1);
            }
        }
        b"attrib" => {
            // An attribute is not a reply: a RESP2 client gets only the reply after it.
            if resp3 {
                reply.encoded(b"|1\r\n");
                reply.bulk(b"key-popularity");
                reply.array(2);
                reply.bulk(b"key:123");
                reply.integer(90);
            }
            reply.bulk(b"Some real reply following the attribute");
        }
        b"push" if !resp3 => reply.error("ERR RESP2 is not supported by this command"),
        b"push" => {
            reply.push(2);
            reply.bulk(b"server-cpu-usage");
            reply.integer(42);
            reply.bulk(b"Some real reply following the push reply");
        }
        b"true" => boolean(reply, true),
        b"false" => boolean(reply, false),
        b"verbatim" => reply.verbatim(b"This is a verbatim\nstring"),
        _ => reply.error(
            "ERR Wrong protocol type name. Please use one of the following: \
             string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ),
    }
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: Redis saves its RDB file and loads it back. Osprey
/// keeps its data in its own storage, always as a reload would find it, so there is nothing to
/// save or load: it checks the options as Redis does and answers OK.
fn debug_reload(args: &Args, reply: &mut Reply<'_>) {
    let known = (2..args.len()).all(|position| {
        let option = args.get(position);
        [b"MERGE".as_slice(), b"NOFLUSH", b"NOSAVE"]
            .iter()
            .any(|word| option.eq_ignore_ascii_case(word))
    });
    if known {
        reply.ok();
    } else {
        reply.error("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.");
    }
}

/// The largest DEBUG QUICKLIST-PACKED-THRESHOLD Redis accepts: 1 MiB below 4 GiB.
const PACKED_THRESHOLD_BYTES_MAX: u64 = (1 << 32) - (1 << 20);

/// A memory value as Redis reads one (`memtoull`): digits, then an optional unit (b, k, kb, m,
/// mb, g, gb, any case).
fn memory_value(text: &[u8]) -> Option<u64> {
    let digits = text.iter().take_while(|byte| byte.is_ascii_digit()).count();
    let (number, unit) = text.split_at(digits);
    let multiplier: u64 = match unit.to_ascii_lowercase().as_slice() {
        b"" | b"b" => 1,
        b"k" => 1000,
        b"kb" => 1024,
        b"m" => 1000 * 1000,
        b"mb" => 1024 * 1024,
        b"g" => 1000 * 1000 * 1000,
        b"gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    let number: u64 = std::str::from_utf8(number).ok()?.parse().ok()?;
    number.checked_mul(multiplier)
}

/// DEBUG SLEEP runs on the long-request pool (a runtime worker never sleeps): the connection
/// waits, the others go on.
fn debug_sleep(session: &Session, seconds: &[u8], reply: &mut Reply<'_>) -> After {
    let seconds = std::str::from_utf8(seconds)
        .ok()
        .and_then(|text| text.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    let sleep = Duration::try_from_secs_f64(seconds.max(0.0))
        .unwrap_or(DEBUG_SLEEP_MAX)
        .min(DEBUG_SLEEP_MAX);
    if !sleep.is_zero() {
        if session.may_offload {
            return After::Offload;
        }
        if tokio::runtime::Handle::try_current().is_ok() {
            // Inside EXEC, on a runtime worker: sleeping here would stop other clients.
            reply.error("ERR DEBUG SLEEP is not allowed inside MULTI by Osprey");
            return After::Continue;
        }
        std::thread::sleep(sleep);
    }
    reply.ok();
    After::Continue
}

fn printable(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(128)]).into_owned()
}

//! SHUTDOWN, SAVE and BGSAVE.
//!
//! - SHUTDOWN stops the server as SIGTERM does (connections closed, namespaces closed, a
//!   cluster node leaving as a stopped one does), and closes the connection that sent it
//!   without a reply, as redis-server, exiting, does. NOSAVE, SAVE, NOW and FORCE are taken
//!   (SHUTDOWN writes no RDB file: what a namespace on a device holds is already there, what a
//!   memory namespace holds goes with the process, as with Redis's `save ""`); ABORT answers
//!   that no shutdown is in progress (Osprey's does not wait for replicas, so there is none
//!   to abort). While a script is busy, only SHUTDOWN NOSAVE is served, and it stops the
//!   script first.
//! - SAVE, BGSAVE and LASTSAVE write the Redis namespace as a Redis RDB file
//!   (`rdb_save.rs`); SHUTDOWN SAVE does not write one (the namespace's storage keeps it).
//! - SAVE and SHUTDOWN are not allowed inside MULTI (Redis's `no-multi`).

use wire_resp::Args;

use super::commands::Command;
use super::reply::Reply;
use super::{After, Session, rdb_save, scripting};

/// The commands.
pub const COMMANDS: &[Command] = &[
    ("bgsave", -1, rdb_save::bgsave),
    ("lastsave", 1, rdb_save::lastsave),
    ("save", 1, rdb_save::save),
    ("shutdown", -1, shutdown),
];

/// Commands refused inside MULTI, as Redis flags them `no-multi`.
pub const NOT_IN_MULTI: &[&[u8]] = &[b"save", b"shutdown"];

/// What SHUTDOWN was asked.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    nosave: bool,
    save: bool,
    abort: bool,
    /// NOW or FORCE: taken, and change nothing here.
    other: bool,
}

fn parse_options(args: &Args) -> Option<Options> {
    let mut options = Options::default();
    for position in 1..args.len() {
        let word = args.get(position).to_ascii_lowercase();
        match word.as_slice() {
            b"nosave" => options.nosave = true,
            b"save" => options.save = true,
            b"now" | b"force" => options.other = true,
            b"abort" => options.abort = true,
            _ => return None,
        }
    }
    let legal = !(options.nosave && options.save)
        && !(options.abort && (options.nosave || options.save || options.other));
    legal.then_some(options)
}

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]
fn shutdown(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let Some(options) = parse_options(args) else {
        reply.error("ERR syntax error");
        return After::Continue;
    };
    if options.abort {
        reply.error("ERR No shutdown in progress.");
        return After::Continue;
    }
    let state = &session.state;
    if !options.nosave
        && let Some(running) = state.scripts.running()
        && !scripting::in_script()
    {
        // Redis's rule while a script is busy: only NOSAVE stops the server.
        reply.error(running.kind.busy());
        return After::Continue;
    }
    tracing::warn!(
        client = %session.peer_address(),
        "SHUTDOWN received from a Redis client: the server stops"
    );
    state.shutdown_requested.notify_one();
    After::Close
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(words: &[&str]) -> Option<Options> {
        let args: Args = std::iter::once("shutdown")
            .chain(words.iter().copied())
            .collect();
        parse_options(&args)
    }

    #[test]
    fn shutdown_options_are_read_as_redis_reads_them() {
        assert_eq!(options(&[]), Some(Options::default()));
        assert!(options(&["NOSAVE", "now", "FORCE"]).is_some_and(|o| o.nosave && o.other));
        assert!(options(&["abort"]).is_some_and(|o| o.abort));
        assert_eq!(options(&["nosave", "save"]), None);
        assert_eq!(options(&["abort", "now"]), None);
        assert_eq!(options(&["later"]), None);
    }
}

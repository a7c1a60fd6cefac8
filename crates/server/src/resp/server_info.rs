//! INFO: what a Redis tool asks a server about itself, answered from live figures.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use engine::NamespaceSummary;
use wire_resp::Args;

use super::commands::{Command, REDIS_VERSION};
use super::reply::Reply;
use super::{After, Session};
use crate::state::ServerState;

/// INFO (CONFIG is `parameters.rs`).
pub const COMMANDS: &[Command] = &[("info", -1, info)];

/// The sections INFO knows, in the order it prints them.
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "keyspace",
];

/// INFO [section ...]: every section for no argument, `all`, `default` or `everything`.
fn info(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let wanted: Vec<String> = (1..args.len())
        .map(|position| String::from_utf8_lossy(args.get(position)).to_ascii_lowercase())
        .collect();
    let everything = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| matches!(w.as_str(), "all" | "default" | "everything"));
    let state = &session.state;
    let summary = resp_summary(state);
    let mut text = String::new();
    for &section in SECTIONS {
        if everything || wanted.iter().any(|w| w == section) {
            if !text.is_empty() {
                text.push_str("\r\n");
            }
            write_section(&mut text, section, state, &summary);
        }
    }
    reply.verbatim(text.as_bytes());
    After::Continue
}

/// The RESP namespace's summary and the key count of each database.
struct RespSummary {
    namespace: NamespaceSummary,
    database_keys: Vec<u64>,
}

fn resp_summary(state: &ServerState) -> RespSummary {
    let namespace = state
        .namespace(state.config.resp_namespace().as_bytes())
        .expect("the RESP namespace is validated at start-up");
    let sets = namespace.sets();
    let database_keys = state
        .resp_databases
        .iter()
        .map(|(_, name)| {
            sets.iter()
                .find(|set| set.name == name)
                .map_or(0, |set| set.objects)
        })
        .collect();
    RespSummary {
        namespace: namespace.summary(),
        database_keys,
    }
}

/// INFO's `used_memory`: the RESP namespace's data, primary-index and set-index bytes.
pub fn used_memory_bytes(state: &ServerState) -> u64 {
    let namespace = state
        .namespace(state.config.resp_namespace().as_bytes())
        .expect("the RESP namespace is validated at start-up");
    used_memory_of(&namespace.summary())
}

fn used_memory_of(ns: &NamespaceSummary) -> u64 {
    ns.data_used_bytes + ns.index_used_bytes + ns.set_index_used_bytes
}

fn write_section(text: &mut String, section: &str, state: &ServerState, summary: &RespSummary) {
    let ns = &summary.namespace;
    let uptime_s = state.started.elapsed().as_secs();
    let used_memory = used_memory_of(ns);
    let _ = match section {
        "server" => write!(
            text,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nosprey_version:{}\r\n\
             redis_mode:standalone\r\nos:{}\r\narch_bits:64\r\nprocess_id:{}\r\n\
             uptime_in_seconds:{uptime_s}\r\nuptime_in_days:{}\r\n",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::process::id(),
            uptime_s / 86_400,
        ),
        "clients" => write!(
            text,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\n",
            state.resp_connected.load(Ordering::Relaxed),
            state.config.resp.maxclients,
            state.blocked_clients.blocked_count(),
        ),
        "memory" => write!(
            text,
            "# Memory\r\nused_memory:{used_memory}\r\nused_memory_human:{}\r\n\
             used_memory_rss:{}\r\nused_memory_dataset:{}\r\nmaxmemory:{}\r\n\
             maxmemory_policy:noeviction\r\nmem_clients_normal:{}\r\nmaxmemory_clients:{}\r\n\
             mem_allocator:{}\r\n",
            human_bytes(used_memory),
            crate::info::resident_set_bytes(),
            ns.data_used_bytes,
            state.resp_settings.memory_limit.limit_bytes(),
            state.client_memory.total_bytes(),
            state.client_memory.limit_bytes(),
            if cfg!(feature = "jemalloc") {
                "jemalloc"
            } else {
                "libc"
            },
        ),
        "persistence" => write!(
            text,
            "# Persistence\r\nloading:0\r\nrdb_bgsave_in_progress:0\r\naof_enabled:{}\r\n",
            u8::from(super::parameters::append_fsync(state).is_some())
        ),
        "stats" => write!(
            text,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             rejected_connections:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\n\
             expired_keys:{}\r\nevicted_clients:{}\r\n\
             client_output_buffer_limit_disconnections:{}\r\nrejected_unknown_commands:{}\r\n",
            state.resp_client_ids.load(Ordering::Relaxed),
            state.resp_commands.load(Ordering::Relaxed),
            state.resp_connections.refused.load(Ordering::Relaxed),
            ns.client_read_success,
            ns.client_read_not_found,
            ns.expired_objects,
            state.client_memory.evicted.load(Ordering::Relaxed),
            state
                .client_memory
                .output_limit_closed
                .load(Ordering::Relaxed),
            state.resp_unknown_commands.load(Ordering::Relaxed),
        ),
        _ => {
            let mut line = String::from("# Keyspace\r\n");
            for (database, keys) in summary.database_keys.iter().enumerate() {
                if *keys > 0 {
                    let _ = write!(line, "db{database}:keys={keys},expires=0,avg_ttl=0\r\n");
                }
            }
            text.push_str(&line);
            Ok(())
        }
    };
}

/// `1.50M`-style sizes, as Redis's `used_memory_human`.
fn human_bytes(bytes: u64) -> String {
    let units = [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    for (unit, size) in units {
        if bytes >= size {
            return format!("{:.2}{unit}", bytes as f64 / size as f64);
        }
    }
    format!("{bytes}B")
}

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

/// The sections INFO knows, in the order Redis 7.0 prints them (`modules` is Redis's
/// `module_list`, empty: Osprey loads no Redis modules).
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

/// The sections left out of INFO with no argument and of `INFO default`, as Redis leaves them
/// out.
const NOT_DEFAULT: &[&str] = &["commandstats", "latencystats"];

/// The sections of INFO with no argument and of `INFO default`: Redis's defaults.
fn default_sections() -> impl Iterator<Item = String> {
    SECTIONS
        .iter()
        .filter(|section| !NOT_DEFAULT.contains(section))
        .map(|&section| section.to_owned())
}

/// INFO [section ...]: the default sections for no argument or `default`, every section for
/// `all` or `everything`; names in any case, each section printed once, in Redis's order.
fn info(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let mut wanted: Vec<String> = Vec::new();
    let mut all = false;
    if args.len() == 1 {
        wanted.extend(default_sections());
    }
    for position in 1..args.len() {
        let name = String::from_utf8_lossy(args.get(position)).to_ascii_lowercase();
        match name.as_str() {
            "all" | "everything" => all = true,
            "default" => wanted.extend(default_sections()),
            "module_list" => wanted.push("modules".to_owned()),
            _ => wanted.push(name),
        }
    }
    let state = &session.state;
    let summary = resp_summary(state);
    let mut text = String::new();
    for &section in SECTIONS {
        if all || wanted.iter().any(|w| w == section) {
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

/// INFO's `used_memory`, which `maxmemory` is compared with: what the RESP front end holds,
/// as Redis's counts its whole server: the namespace's data, primary-index and set-index
/// bytes, the clients' buffers, and the scripts (their cached bodies and the Lua state).
pub fn used_memory_bytes(state: &ServerState) -> u64 {
    let namespace = state
        .namespace(state.config.resp_namespace().as_bytes())
        .expect("the RESP namespace is validated at start-up");
    let (_, script_bytes, lua_bytes) = scripts_memory(state);
    used_memory_of(state, &namespace.summary(), script_bytes + lua_bytes)
}

fn used_memory_of(state: &ServerState, ns: &NamespaceSummary, scripts_bytes: u64) -> u64 {
    let clients_bytes = state.client_memory.total_bytes() as u64;
    ns.data_used_bytes
        + ns.index_used_bytes
        + ns.set_index_used_bytes
        + clients_bytes
        + scripts_bytes
}

/// The cached scripts' count and bytes, and the Lua state's bytes (the last seen while a
/// script holds the state).
fn scripts_memory(state: &ServerState) -> (usize, u64, u64) {
    let (scripts, script_bytes, lua_bytes) = state.scripts.cache_figures();
    (scripts, script_bytes as u64, lua_bytes)
}

fn write_section(text: &mut String, section: &str, state: &ServerState, summary: &RespSummary) {
    let ns = &summary.namespace;
    let uptime_s = state.started.elapsed().as_secs();
    let (scripts, script_bytes, lua_bytes) = scripts_memory(state);
    let used_memory = used_memory_of(state, ns, script_bytes + lua_bytes);
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
             used_memory_rss:{}\r\nused_memory_lua:{lua_bytes}\r\n\
             used_memory_vm_eval:{lua_bytes}\r\nused_memory_lua_human:{}\r\n\
             used_memory_scripts_eval:{script_bytes}\r\nnumber_of_cached_scripts:{scripts}\r\n\
             used_memory_scripts:{script_bytes}\r\n\
             used_memory_dataset:{}\r\nmaxmemory:{}\r\n\
             maxmemory_policy:noeviction\r\nmem_clients_normal:{}\r\nmaxmemory_clients:{}\r\n\
             mem_allocator:{}\r\n",
            human_bytes(used_memory),
            crate::info::resident_set_bytes(),
            human_bytes(lua_bytes),
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
        "persistence" => {
            let saves = &state.resp_saves;
            write!(
                text,
                "# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:{}\r\n\
                 rdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\n\
                 rdb_last_bgsave_status:{}\r\naof_enabled:{}\r\n",
                saves.changes_since(ns.client_write_success + ns.client_delete_success),
                u8::from(saves.in_progress()),
                saves.last_save_unix_s(),
                if saves.last_bgsave_ok() { "ok" } else { "err" },
                u8::from(super::parameters::append_fsync(state).is_some())
            )
        }
        "stats" => write!(
            text,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             rejected_connections:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\n\
             expired_keys:{}\r\nevicted_clients:{}\r\n\
             client_output_buffer_limit_disconnections:{}\r\ntotal_error_replies:{}\r\n\
             rejected_unknown_commands:{}\r\nmigrate_cached_sockets:0\r\n",
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
            super::error_stats::total(),
            state.resp_unknown_commands.load(Ordering::Relaxed),
        ),
        // Osprey's copies are its own cluster's (a partition's replicas), not Redis
        // replicas: to a Redis client it is a master with none, and no replication stream.
        "replication" => write!(
            text,
            "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\
             master_failover_state:no-failover\r\nmaster_repl_offset:0\r\n\
             repl_backlog_active:0\r\n"
        ),
        "cpu" => {
            let cpu = process_cpu();
            write!(
                text,
                "# CPU\r\nused_cpu_sys:{}\r\nused_cpu_user:{}\r\n\
                 used_cpu_sys_children:{}\r\nused_cpu_user_children:{}\r\n",
                seconds_text(cpu.system_us),
                seconds_text(cpu.user_us),
                seconds_text(cpu.children_system_us),
                seconds_text(cpu.children_user_us),
            )
        }
        "modules" => write!(text, "# Modules\r\n"),
        "commandstats" => write!(text, "# Commandstats\r\n{}", super::command_stats::lines()),
        "errorstats" => write!(text, "# Errorstats\r\n{}", super::error_stats::lines()),
        "latencystats" => write!(text, "{}", crate::latency::redis::latencystats()),
        "cluster" => write!(text, "# Cluster\r\ncluster_enabled:0\r\n"),
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

/// The CPU time of this process and of its waited-for children, in microseconds.
#[derive(Debug, Default, PartialEq, Eq)]
struct ProcessCpu {
    user_us: u64,
    system_us: u64,
    children_user_us: u64,
    children_system_us: u64,
}

/// Redis reads `getrusage`; Osprey denies `unsafe` and its `rustix` has no `getrusage`, so it
/// reads the same kernel counters from `/proc/self/stat` (zeros where that is unavailable).
fn process_cpu() -> ProcessCpu {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    parse_proc_stat(&stat).unwrap_or_default()
}

/// `utime`, `stime`, `cutime` and `cstime` of a `/proc/<pid>/stat` line, fields 14 to 17, in
/// clock ticks of `USER_HZ`, which the kernel fixes at 100 per second for this file on every
/// architecture Osprey builds for (so the figures move in steps of 10 ms). The command name,
/// field 2, may hold spaces and parentheses: the fields are counted after its last `)`.
fn parse_proc_stat(stat: &str) -> Option<ProcessCpu> {
    const USER_HZ: u64 = 100;
    const US_PER_TICK: u64 = 1_000_000 / USER_HZ;
    let after_name = &stat[stat.rfind(')')? + 1..];
    // After the name: field 3 (state) is the first; utime is field 14.
    let mut ticks = after_name
        .split_whitespace()
        .skip(11)
        .map(str::parse::<u64>);
    let mut next = || ticks.next()?.ok().map(|tick| tick * US_PER_TICK);
    Some(ProcessCpu {
        user_us: next()?,
        system_us: next()?,
        children_user_us: next()?,
        children_system_us: next()?,
    })
}

/// Microseconds as Redis prints a `struct timeval`: `seconds.micros`, six digits.
fn seconds_text(us: u64) -> String {
    format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_times_are_read_after_the_command_name_in_microseconds() {
        let line = "4242 (osp rey) (x) S 1 2 3 4 5 6 7 8 9 10 250 31 7 2 20 0 1 0 99 0 0";
        let cpu = parse_proc_stat(line).expect("a whole line");
        assert_eq!(
            cpu,
            ProcessCpu {
                user_us: 2_500_000,
                system_us: 310_000,
                children_user_us: 70_000,
                children_system_us: 20_000,
            }
        );
        assert_eq!(seconds_text(cpu.system_us), "0.310000");
        assert_eq!(seconds_text(cpu.user_us), "2.500000");
        assert_eq!(parse_proc_stat("4242 (cut) S 1 2"), None);
        assert_eq!(parse_proc_stat(""), None);
    }

    #[test]
    fn the_real_process_has_cpu_times() {
        let stat = std::fs::read_to_string("/proc/self/stat").expect("Linux");
        assert!(parse_proc_stat(&stat).is_some());
    }
}

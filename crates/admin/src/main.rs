//! `osprey-admin`: run info commands on one node or every node of a cluster, as `asinfo` does,
//! and see the cluster as `asadm` shows it: `summary`, `show statistics|config|sets|sindex|
//! latencies`, `watch` for live rates, `set-config` on every node. Tables with colours on a
//! terminal, tab-separated plain text in a pipe (or with `--plain`).

mod commands;
mod nodes;
mod table;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use table::Style;

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(name = "osprey-admin", version, about, disable_help_flag = true)]
struct Args {
    /// Print help (`-h` is the host, as in asinfo and asadm).
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// A node of the cluster (the seed).
    #[arg(short = 'h', long, default_value = "127.0.0.1", global = true)]
    host: String,
    /// Its Aerospike service port.
    #[arg(short = 'p', long, default_value_t = 3000, global = true)]
    port: u16,
    /// Plain tab-separated output even on a terminal.
    #[arg(long, global = true)]
    plain: bool,
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Info commands, as asinfo runs them (`osprey-admin info statistics`).
    Info {
        /// On every node of the cluster, not only the seed.
        #[arg(short, long)]
        all: bool,
        /// The commands (`statistics`, `namespace/test`, `latencies:`, ...).
        #[arg(required = true)]
        commands: Vec<String>,
    },
    /// The cluster's nodes and namespaces at a glance.
    Summary,
    /// A table across the cluster.
    Show {
        #[command(subcommand)]
        what: Show,
    },
    /// Rates per second of each node's and namespace's requests, refreshed every interval.
    Watch {
        /// Seconds between looks.
        #[arg(short, long, default_value_t = 1.0)]
        interval: f64,
        /// Stop after this many tables (forever without).
        #[arg(short, long)]
        count: Option<u64>,
    },
    /// Changes a setting on every node (`set-config service single-scan-threads=8`).
    SetConfig {
        /// `service` or `namespace`.
        context: String,
        /// The namespace, for context `namespace`.
        #[arg(short, long)]
        namespace: Option<String>,
        /// `KEY=VALUE`, one or more.
        #[arg(required = true)]
        settings: Vec<String>,
    },
}

/// What `show` shows.
#[derive(Debug, Subcommand)]
enum Show {
    /// Statistics: `service`, `namespace`, or both.
    Statistics {
        context: Option<String>,
        /// Only the names containing this.
        #[arg(long)]
        like: Option<String>,
    },
    /// Configuration: `service`, `namespace`, or both.
    Config {
        context: Option<String>,
        /// Only the names containing this.
        #[arg(long)]
        like: Option<String>,
    },
    /// Every set of every node.
    Sets,
    /// Every secondary index of every node.
    Sindex,
    /// Each histogram's rate and the share over thresholds, as asadm's `show latencies`.
    Latencies {
        /// How many thresholds.
        #[arg(short, long, default_value_t = 3)]
        buckets: usize,
        /// Every how many powers of two (3: >1, >8, >64).
        #[arg(short, long, default_value_t = 3)]
        exponent: usize,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    let style = Style::detect(args.plain);
    match run(&args, style) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("osprey-admin: {}", style.error(&error));
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args, style: Style) -> Result<(), String> {
    let seed = nodes::seed_address(&args.host, args.port)?;
    let all = !matches!(args.command, Command::Info { all: false, .. });
    let mut nodes = nodes::reach(seed, all)?;
    let nodes = nodes.as_mut_slice();
    let shown = match &args.command {
        Command::Info { commands, .. } => commands::info(nodes, commands, style)?,
        Command::Summary => commands::summary(nodes, style)?,
        Command::Show { what } => match what {
            Show::Statistics { context, like } => {
                commands::show_stats(nodes, false, context.as_deref(), like.as_deref(), style)?
            }
            Show::Config { context, like } => {
                commands::show_stats(nodes, true, context.as_deref(), like.as_deref(), style)?
            }
            Show::Sets => commands::show_sets(nodes, style)?,
            Show::Sindex => commands::show_sindex(nodes, style)?,
            Show::Latencies { buckets, exponent } => {
                commands::show_latencies(nodes, *buckets, *exponent, style)?
            }
        },
        Command::Watch { interval, count } => {
            let interval = Duration::from_secs_f64(interval.max(0.1));
            commands::watch(nodes, interval, *count, style, |table| print!("{table}"))?;
            String::new()
        }
        Command::SetConfig {
            context,
            namespace,
            settings,
        } => commands::set_config(nodes, context, namespace.as_deref(), settings, style)?,
    };
    print!("{shown}");
    Ok(())
}

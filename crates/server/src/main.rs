//! `osprey`: a distributed key-value database speaking the Aerospike wire protocol.
//!
//! Layer 5, the only crate with tokio and sockets. `main` is thin: parse arguments, load the
//! configuration, start the runtime, run the server until SIGTERM or SIGINT, exit 0.

mod access;
mod admin;
mod batch;
mod client_memory;
mod cluster;
mod config;
mod connection;
mod dispatch;
mod info;
mod jobs;
mod latency;
mod limits;
mod logging;
mod long_requests;
mod metrics;
mod resp;
mod scan;
mod server;
mod sindex_info;
mod sindex_store;
mod state;
#[cfg(test)]
mod test_seed;
mod tls;
mod udf;
mod unsupported;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(
    name = "osprey",
    version,
    about = "Osprey: an Aerospike-compatible key-value database"
)]
struct Args {
    /// TOML file overriding the built-in configuration.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the effective configuration as TOML and exit.
    #[arg(long)]
    print_config: bool,
    /// Load this Redis RDB file into the Redis namespace before accepting connections
    /// (overrides `[resp] load-rdb`).
    #[arg(long, value_name = "FILE")]
    load_rdb: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut config = match config::Config::load(args.config.as_deref()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("osprey: {error}");
            return ExitCode::from(2);
        }
    };
    if let Some(path) = args.load_rdb {
        config.resp.load_rdb = Some(path);
    }
    if args.print_config {
        print!("{}", config.to_toml());
        return ExitCode::SUCCESS;
    }
    logging::init(&config.logging);
    let threads = match config.service.threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        threads => threads,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("osprey: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(server::run(config, shutdown_signal())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("osprey: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Completes on the first SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(stream) => stream,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

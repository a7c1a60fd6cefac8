//! `osprey-bench`: one benchmark tool for Osprey (Aerospike protocol) and any Redis server
//! (RESP), with aerospike-benchmark's options and workloads, HDR latency percentiles, the
//! Index64 scaling test, the per-connection test and the scan test. `osprey-bench --help` lists
//! the options; `docs/benchmarks.md` shows how the project's comparisons use it.
//!
//! Layer: a top-level binary; depends on `model`, `wire-aerospike` and `wire-resp` for the
//! protocols and on `client` for the partition map, never on the server or the engine.

mod modes;
mod options;
mod protocol;
mod query;
mod report;
mod routes;
mod runner;
mod scan;
mod source;
mod spec;
mod stats;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Parser;

use crate::options::Options;

fn main() -> ExitCode {
    let options = Options::parse();
    let seed = options.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64)
    });
    let stop = Arc::new(AtomicBool::new(false));
    stop_on_ctrl_c(&stop);
    if let Some(action) = options.testbin_index {
        let prepared = options.address().and_then(|address| {
            query::testbin_index(address, &options.namespace, &options.set, action)
        });
        if let Err(message) = prepared {
            eprintln!("osprey-bench: --testbin-index: {message}");
            return ExitCode::FAILURE;
        }
    }
    let result = if let Some(kind) = options.query {
        modes::query(&options, kind, seed, &stop)
    } else if options.scan {
        modes::scan(&options, seed, &stop)
    } else if options.scaling {
        modes::scaling(&options, seed, &stop)
    } else if options.per_connection {
        modes::per_connection(&options, seed, &stop)
    } else {
        modes::single(&options, seed, &stop)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("osprey-bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The first Ctrl-C (or SIGTERM) ends the run early; its summary is still printed.
fn stop_on_ctrl_c(stop: &Arc<AtomicBool>) {
    let stop = stop.clone();
    let spawned = std::thread::Builder::new()
        .name("signals".to_owned())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                let mut terminate =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
                let terminated = async {
                    match terminate.as_mut() {
                        Some(signal) => signal.recv().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = terminated => {}
                }
            });
            stop.store(true, Ordering::Relaxed);
        });
    if let Err(error) = spawned {
        eprintln!("osprey-bench: Ctrl-C will not stop the run early: {error}");
    }
}

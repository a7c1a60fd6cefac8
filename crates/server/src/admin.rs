//! Operator info commands that change or inspect running work: `set-config`, `get-config`,
//! `truncate`, `truncate-namespace`, `query-show` and `query-abort`.
//!
//! Replies follow Aerospike: `ok` on success, `ERROR:<code>:<message>` otherwise. Work that
//! takes long (building a set index, reclaiming truncated records) runs on a background thread
//! after the reply; its progress shows in `sets` (`index_populating`) and in the object counts.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use engine::{Namespace, TruncateError};
use tracing::{info, warn};
use wire_aerospike::info_param;

use crate::config::SCAN_THREADS_MAX;
use crate::state::ServerState;

/// Nanoseconds in a millisecond, for truncate's `lut` (Unix nanoseconds).
const NANOS_PER_MS: u64 = 1_000_000;

/// `set-config:context=service;single-scan-threads=N` or
/// `set-config:context=namespace;id=<ns>;set=<set>;enable-index=<bool>`.
pub fn set_config(state: &ServerState, params: &[u8], value: &mut String) {
    match info_param(params, b"context") {
        Some(b"service") => set_service_config(state, params, value),
        Some(b"namespace") => set_namespace_config(state, params, value),
        _ => value.push_str("ERROR:4:invalid context"),
    }
}

fn set_service_config(state: &ServerState, params: &[u8], value: &mut String) {
    let threads = info_param(params, b"single-scan-threads")
        .or_else(|| info_param(params, b"single-query-threads"));
    let parsed = threads
        .and_then(|text| std::str::from_utf8(text).ok())
        .and_then(|text| text.parse::<usize>().ok())
        .filter(|n| (1..=SCAN_THREADS_MAX).contains(n));
    match parsed {
        Some(threads) => {
            state.scan_threads.store(threads, Ordering::Relaxed);
            info!(threads, "single-scan-threads changed");
            value.push_str("ok");
        }
        None => value.push_str("ERROR:4:invalid set-config parameter"),
    }
}

fn set_namespace_config(state: &ServerState, params: &[u8], value: &mut String) {
    let name = info_param(params, b"id").or_else(|| info_param(params, b"namespace"));
    let Some(namespace) = name.and_then(|name| state.namespace_arc(name)) else {
        value.push_str("ERROR:20:namespace not found");
        return;
    };
    let set = info_param(params, b"set").filter(|set| !set.is_empty());
    let enable = match info_param(params, b"enable-index") {
        Some(b"true") => true,
        Some(b"false") => false,
        _ => {
            value.push_str("ERROR:4:invalid set-config parameter");
            return;
        }
    };
    let Some(set) = set else {
        value.push_str("ERROR:4:invalid set-config parameter");
        return;
    };
    if switch_set_index(namespace, set, enable).is_err() {
        value.push_str("ERROR:4:invalid set name");
        return;
    }
    if let Some(node) = state.cluster_node() {
        node.replicate_set_index_switch(namespace.name(), set, enable);
    }
    value.push_str("ok");
}

/// Turns the set index of `set` on (building it in the background) or off.
///
/// # Errors
/// The set name is not one a set can have.
pub fn switch_set_index(namespace: &Arc<Namespace>, set: &[u8], enable: bool) -> Result<(), ()> {
    if !enable {
        namespace.disable_set_index(set);
        return Ok(());
    }
    match namespace.enable_set_index(set) {
        Ok(Some(build)) => {
            let namespace = namespace.clone();
            let set_name = String::from_utf8_lossy(set).into_owned();
            spawn_background("set-index", move || {
                namespace.build_set_index(build);
                info!(
                    namespace = namespace.name(),
                    set = set_name,
                    "set index built"
                );
            });
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(_) => Err(()),
    }
}

/// `get-config:context=service` (the default) or `get-config:context=namespace;id=<ns>`.
pub fn get_config(state: &ServerState, params: &[u8], value: &mut String) {
    match info_param(params, b"context") {
        None | Some(b"service") => {
            let service = &state.config.service;
            let _ = write!(
                value,
                "cluster-name={};proto-fd-idle-ms={};proto-fd-max={};\
                 single-scan-threads={};single-query-threads={};batch-max-requests={};\
                 transaction-max-ms={};connections-max-per-address={};client-memory-max={};\
                 ops-per-request-max={};long-request-threads={};ticker-interval={};\
                 microsecond-histograms={}",
                service.cluster_name,
                service.idle_timeout_ms,
                service.connections_max,
                state.scan_threads.load(Ordering::Relaxed),
                state.scan_threads.load(Ordering::Relaxed),
                service.batch_max_requests,
                service.transaction_max_ms,
                service.connections_max_per_address,
                service.client_memory_max,
                service.ops_per_request_max,
                service.long_request_threads,
                service.ticker_interval_s,
                service.microsecond_histograms,
            );
        }
        Some(b"namespace") => {
            let name = info_param(params, b"id").or_else(|| info_param(params, b"namespace"));
            match name.and_then(|name| state.namespace(name)) {
                Some(namespace) => {
                    let config = namespace.config();
                    let _ = write!(
                        value,
                        "default-ttl={};nsup-period={};allow-ttl-without-nsup={};\
                         max-record-size={};storage-engine={}",
                        config.default_ttl_seconds,
                        config.nsup_period_seconds,
                        config.allow_ttl_without_nsup,
                        config.max_record_size_bytes,
                        if namespace.has_storage() {
                            "device"
                        } else {
                            "memory"
                        },
                    );
                }
                None => value.push_str("ERROR:20:namespace not found"),
            }
        }
        Some(b"logging") => {
            let format = match state.config.logging.format {
                crate::logging::Format::Text => "text",
                crate::logging::Format::Json => "json",
            };
            let _ = write!(value, "level={};format={format}", crate::logging::filter());
        }
        Some(_) => value.push_str("ERROR:4:invalid context"),
    }
}

/// `truncate:namespace=<ns>;set=<set>[;lut=<unix ns>]`.
pub fn truncate(state: &ServerState, params: &[u8], value: &mut String) {
    let Some(set) = info_param(params, b"set").filter(|set| !set.is_empty()) else {
        value.push_str("ERROR:4:missing set");
        return;
    };
    truncate_scope(state, params, Some(set), value);
}

/// `truncate-namespace:namespace=<ns>[;lut=<unix ns>]`; naming a set is an error.
pub fn truncate_namespace(state: &ServerState, params: &[u8], value: &mut String) {
    if info_param(params, b"set").is_some() {
        value.push_str("ERROR:4:set not allowed");
        return;
    }
    truncate_scope(state, params, None, value);
}

fn truncate_scope(state: &ServerState, params: &[u8], set: Option<&[u8]>, value: &mut String) {
    let name = info_param(params, b"namespace").or_else(|| info_param(params, b"ns"));
    let Some(namespace) = name.and_then(|name| state.namespace_arc(name)) else {
        value.push_str("ERROR:20:namespace not found");
        return;
    };
    let before_ms = match info_param(params, b"lut") {
        None => None,
        Some(text) => match std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
        {
            Some(nanos) => Some(nanos / NANOS_PER_MS),
            None => {
                value.push_str("ERROR:4:invalid lut");
                return;
            }
        },
    };
    match namespace.truncate(set, before_ms) {
        Ok(_) => {
            if let Some(node) = state.cluster_node() {
                node.replicate_truncate(namespace.name(), set, namespace.truncate_cutoff_ms(set));
            }
            reclaim_in_background(namespace.clone());
            value.push_str("ok");
        }
        Err(TruncateError::CutoffInFuture) => value.push_str("ERROR:4:lut is in the future"),
        Err(TruncateError::BadSet) => value.push_str("ERROR:4:invalid set name"),
        Err(TruncateError::Storage(reason)) => {
            value.push_str("ERROR:1:");
            value.push_str(&reason);
        }
    }
}

pub(crate) fn reclaim_in_background(namespace: Arc<Namespace>) {
    spawn_background("truncate", move || {
        let removed = namespace.reclaim_truncated();
        info!(
            namespace = namespace.name(),
            removed, "truncated records reclaimed"
        );
    });
}

fn spawn_background(name: &str, work: impl FnOnce() + Send + 'static) {
    if let Err(error) = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(work)
    {
        warn!(%error, name, "cannot start a background thread");
    }
}

/// `query-show` (every job) or `query-show:trid=<id>` (also `id=`).
pub fn query_show(state: &ServerState, params: &[u8], value: &mut String) {
    match task_id_param(params) {
        None if params.is_empty() => {
            for (position, job) in state.scan_jobs.all().iter().enumerate() {
                if position > 0 {
                    value.push(';');
                }
                job.describe(value);
            }
        }
        None => value.push_str("ERROR:4:invalid trid"),
        Some(task_id) => match state.scan_jobs.find(task_id) {
            Some(job) => job.describe(value),
            None => value.push_str("ERROR:2:job not found"),
        },
    }
}

/// `query-abort:trid=<id>` (also `id=`): stops a running scan.
pub fn query_abort(state: &ServerState, params: &[u8], value: &mut String) {
    let job = task_id_param(params).and_then(|task_id| state.scan_jobs.find(task_id));
    match job {
        Some(job) if job.state() == crate::jobs::JobState::Active => {
            job.request_abort();
            value.push_str("ok");
        }
        _ => value.push_str("ERROR:2:id not active"),
    }
}

/// `query-abort-all`: stops every running scan; answers how many.
pub fn query_abort_all(state: &ServerState, value: &mut String) {
    let mut aborted = 0;
    for job in state.scan_jobs.all() {
        if job.state() == crate::jobs::JobState::Active {
            job.request_abort();
            aborted += 1;
        }
    }
    let _ = write!(value, "OK - number of queries killed: {aborted}");
}

fn task_id_param(params: &[u8]) -> Option<u64> {
    info_param(params, b"trid")
        .or_else(|| info_param(params, b"id"))
        .and_then(|text| std::str::from_utf8(text).ok())
        .and_then(|text| text.parse().ok())
}

//! The log: lines on standard error, as text or as JSON objects (`[logging] format`), at the
//! levels of a filter (`[logging] level`, or `RUST_LOG` when set) that can be changed while the
//! server runs: `log-set:` (info) and `CONFIG SET loglevel` (Redis) replace it, and new lines
//! follow at once.
//!
//! The filter is tracing's: a level (`info`), or a level and per-module levels
//! (`info,osprey::cluster=debug`). `log-set:` takes Aerospike's form,
//! `log-set:id=0;<context>=<level>`, where context `any` sets the level of everything and any
//! other names a module of the server (`cluster`, `resp`, `tls`, ...), and `log-set:filter=..`
//! takes a whole filter.
//!
//! Invariant: [`FILTER`]'s text is the filter the subscriber applies (both change together,
//! under its lock).

use std::sync::OnceLock;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Registry, fmt, reload};

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// One readable line per event.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields`.
    Json,
}

/// The `[logging]` section.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct LoggingConfig {
    /// The filter at start (`RUST_LOG` overrides it when set).
    pub level: String,
    /// Text or JSON lines.
    pub format: Format,
}

impl Default for LoggingConfig {
    fn default() -> LoggingConfig {
        LoggingConfig {
            level: "info".to_owned(),
            format: Format::Text,
        }
    }
}

impl LoggingConfig {
    /// Checks the filter.
    ///
    /// # Errors
    /// Why the filter is not one.
    pub fn validate(&self) -> Result<(), String> {
        EnvFilter::try_new(&self.level)
            .map(drop)
            .map_err(|error| format!("logging.level = {:?}: {error}", self.level))
    }
}

/// The live filter: its text, and the handle that replaces it in the subscriber.
struct Live {
    text: String,
    handle: reload::Handle<EnvFilter, Registry>,
}

static FILTER: OnceLock<Mutex<Live>> = OnceLock::new();

/// Installs the subscriber for `config` (once per process).
pub fn init(config: &LoggingConfig) {
    let text = std::env::var("RUST_LOG")
        .ok()
        .filter(|text| EnvFilter::try_new(text).is_ok())
        .unwrap_or_else(|| config.level.clone());
    let filter = EnvFilter::try_new(&text).unwrap_or_else(|_| EnvFilter::new("info"));
    let (filter, handle) = reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    let stderr = std::io::stderr;
    let installed = match config.format {
        Format::Json => registry
            .with(fmt::layer().json().with_writer(stderr))
            .try_init(),
        Format::Text => registry
            .with(
                fmt::layer()
                    .with_writer(stderr)
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
            )
            .try_init(),
    };
    if installed.is_ok() {
        let _ = FILTER.set(Mutex::new(Live { text, handle }));
    }
}

/// The filter applied now.
pub fn filter() -> String {
    FILTER
        .get()
        .map_or_else(|| "info".to_owned(), |live| live.lock().text.clone())
}

/// Replaces the filter with `text`.
///
/// # Errors
/// Why `text` is not a filter, or that no subscriber of this module is installed.
pub fn set_filter(text: &str) -> Result<(), String> {
    let filter = EnvFilter::try_new(text).map_err(|error| error.to_string())?;
    let live = FILTER.get().ok_or("the log is not reloadable")?;
    let mut live = live.lock();
    live.handle
        .reload(filter)
        .map_err(|error| error.to_string())?;
    live.text = text.to_owned();
    Ok(())
}

/// The level of `context` in Aerospike's `log-set` (`any`: every module) as a directive
/// to add to the filter.
fn directive(context: &str, level: &str) -> Result<String, String> {
    let level = level.to_ascii_lowercase();
    let level = match level.as_str() {
        "critical" => "error",
        "warning" => "warn",
        "detail" => "trace",
        other => other,
    };
    if !matches!(level, "off" | "error" | "warn" | "info" | "debug" | "trace") {
        return Err(format!("bad level {level:?}"));
    }
    let valid_context = context
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_');
    match context {
        "any" => Ok(level.to_owned()),
        _ if valid_context && !context.is_empty() => Ok(format!("osprey::{context}={level}")),
        _ => Err(format!("bad context {context:?}")),
    }
}

/// `log-set:` with its parameters: `filter=<filter>`, or `[id=0;]<context>=<level>...`.
/// Answers `ok` or `ERROR:4:<why>`.
pub fn log_set(params: &str) -> String {
    match apply_log_set(params) {
        Ok(()) => "ok".to_owned(),
        Err(why) => format!("ERROR:4:{why}"),
    }
}

fn apply_log_set(params: &str) -> Result<(), String> {
    let pairs: Vec<(&str, &str)> = params
        .split(';')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            pair.split_once('=')
                .ok_or(format!("bad parameter {pair:?}"))
        })
        .collect::<Result<_, _>>()?;
    if let Some((_, filter)) = pairs.iter().find(|(key, _)| *key == "filter") {
        return set_filter(filter);
    }
    let mut directives: Vec<String> = filter().split(',').map(str::to_owned).collect();
    let mut changed = false;
    for (context, level) in pairs.into_iter().filter(|(key, _)| *key != "id") {
        let directive = directive(context, level)?;
        match context {
            // A new level for everything: module levels set before it go.
            "any" => directives = vec![directive],
            _ => {
                let prefix = format!("osprey::{context}=");
                directives.retain(|kept| !kept.starts_with(&prefix));
                directives.push(directive);
            }
        }
        changed = true;
    }
    if !changed {
        return Err("no context to set".to_owned());
    }
    set_filter(&directives.join(","))
}

/// Redis's `loglevel` of the filter's overall level.
pub fn redis_level() -> &'static str {
    let text = filter();
    let overall = text
        .split(',')
        .find(|directive| !directive.contains('='))
        .unwrap_or("info");
    match overall {
        "trace" | "debug" => "debug",
        "warn" | "error" | "off" => "warning",
        _ => "notice",
    }
}

/// Sets the overall level from Redis's `loglevel` (debug, verbose, notice, warning),
/// keeping per-module levels.
///
/// # Errors
/// Redis's message for a level it does not know.
pub fn set_redis_level(level: &str) -> Result<(), String> {
    let overall = match level.to_ascii_lowercase().as_str() {
        "debug" => "debug",
        "verbose" => "debug",
        "notice" => "info",
        "warning" => "warn",
        _ => {
            return Err(
                "argument(s) must be one of the following: debug, verbose, notice, warning"
                    .to_owned(),
            );
        }
    };
    let mut directives: Vec<String> = filter()
        .split(',')
        .filter(|directive| directive.contains('='))
        .map(str::to_owned)
        .collect();
    directives.insert(0, overall.to_owned());
    set_filter(&directives.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aerospike_contexts_and_levels_become_directives() {
        assert_eq!(directive("any", "DEBUG"), Ok("debug".to_owned()));
        assert_eq!(
            directive("cluster", "warning"),
            Ok("osprey::cluster=warn".to_owned())
        );
        assert!(directive("cluster", "loud").is_err());
        assert!(directive("a,b", "info").is_err());
    }

    #[test]
    fn a_bad_filter_in_the_configuration_is_named() {
        let config = LoggingConfig {
            level: "info,osprey=loud".to_owned(),
            format: Format::Json,
        };
        let error = config.validate().expect_err("refused");
        assert!(error.contains("logging.level"), "{error}");
    }
}

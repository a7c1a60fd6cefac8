//! The settings that bound what clients may hold: Redis's `client-output-buffer-limit` classes
//! and memory sizes as Redis writes them (`64mb`, `1gb`), or as a share of the machine's memory
//! (`5%`). Pure parsing; `client_memory` applies them.

/// Redis's default `client-output-buffer-limit`: no limit for ordinary clients, whose memory is
/// bounded by `client-memory-max` instead; the replica and pub/sub classes as Redis sets them.
pub const OUTPUT_BUFFER_LIMITS_DEFAULT: &str =
    "normal 0 0 0 replica 268435456 67108864 60 pubsub 33554432 8388608 60";

/// Default of `service.client-memory-max`: a tenth of the machine's memory. Redis leaves
/// `maxmemory-clients` off; Osprey bounds it by default so that clients that never read their
/// replies cannot exhaust the machine (see `docs/reliability.md`).
pub const CLIENT_MEMORY_MAX_DEFAULT: &str = "10%";

/// The limits of one client class, in bytes and seconds; 0 disables a limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputBufferLimit {
    /// A client whose unsent replies reach this is closed at once.
    pub hard_bytes: u64,
    /// A client whose unsent replies stay at or above this for `soft_seconds` is closed.
    pub soft_bytes: u64,
    /// How long a client may stay over its soft limit.
    pub soft_seconds: u64,
}

/// `client-output-buffer-limit`, one entry per class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputBufferLimits {
    /// Ordinary clients: every Redis connection today.
    pub normal: OutputBufferLimit,
    /// Replicas (Redis's `replica`, also spelled `slave`).
    pub replica: OutputBufferLimit,
    /// Subscribed clients.
    pub pubsub: OutputBufferLimit,
}

/// The longest soft-limit time accepted: about 100 years (a deadline is an instant, which a
/// longer time could overflow).
const SOFT_SECONDS_MAX: u64 = 100 * 365 * 86_400;

impl OutputBufferLimits {
    /// Parses `class hard soft seconds` groups over `self`, as Redis's CONFIG SET does: the
    /// classes named change, the others keep their limits.
    ///
    /// # Errors
    /// A text naming the bad part, when the word count is not a multiple of four, a class is
    /// unknown or a size or a number of seconds does not parse.
    pub fn parse_over(mut self, text: &str) -> Result<OutputBufferLimits, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.is_empty() || !words.len().is_multiple_of(4) {
            return Err("expects groups of: class hard-limit soft-limit soft-seconds".to_owned());
        }
        for group in words.chunks_exact(4) {
            let limit = OutputBufferLimit {
                hard_bytes: parse_memory(group[1])?,
                soft_bytes: parse_memory(group[2])?,
                soft_seconds: group[3]
                    .parse()
                    .ok()
                    .filter(|seconds| *seconds <= SOFT_SECONDS_MAX)
                    .ok_or_else(|| format!("bad soft-seconds {:?}", group[3]))?,
            };
            match group[0].to_ascii_lowercase().as_str() {
                "normal" => self.normal = limit,
                "replica" | "slave" => self.replica = limit,
                "pubsub" => self.pubsub = limit,
                class => return Err(format!("unknown client class {class:?}")),
            }
        }
        Ok(self)
    }

    /// The limits as Redis's CONFIG GET prints them.
    pub fn redis_text(self) -> String {
        let class = |name: &str, limit: &OutputBufferLimit| {
            format!(
                "{name} {} {} {}",
                limit.hard_bytes, limit.soft_bytes, limit.soft_seconds
            )
        };
        [
            class("normal", &self.normal),
            class("slave", &self.replica),
            class("pubsub", &self.pubsub),
        ]
        .join(" ")
    }
}

/// A memory size as Redis's `memtoll` reads one: digits, then optionally `b`, `k` (1000), `kb`
/// (1024), `m`, `mb`, `g` or `gb`, in any case.
///
/// # Errors
/// A text naming the value, when it does not parse or overflows.
pub fn parse_memory(text: &str) -> Result<u64, String> {
    let lower = text.to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(digits_end);
    let multiplier: u64 = match unit {
        "" | "b" => 1,
        "k" => 1_000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return Err(format!("bad memory size {text:?}")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|value| value.checked_mul(multiplier))
        .ok_or_else(|| format!("bad memory size {text:?}"))
}

/// A memory limit: a size, or a percentage of the machine's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryLimit {
    /// This many bytes; 0 means no limit.
    Bytes(u64),
    /// This percentage (1 to 100) of the machine's memory.
    Percent(u8),
}

impl MemoryLimit {
    /// Parses `512mb`-style sizes (see [`parse_memory`]) and `N%`.
    ///
    /// # Errors
    /// A text naming the value when neither form parses, or a percentage is not 1 to 100.
    pub fn parse(text: &str) -> Result<MemoryLimit, String> {
        match text.trim().strip_suffix('%') {
            Some(percent) => match percent.trim().parse::<u8>() {
                Ok(percent @ 1..=100) => Ok(MemoryLimit::Percent(percent)),
                _ => Err(format!("bad percentage {text:?}: 1% to 100%")),
            },
            None => parse_memory(text.trim()).map(MemoryLimit::Bytes),
        }
    }

    /// The limit in bytes on a machine with `machine_bytes` of memory; 0 = no limit.
    pub fn bytes(self, machine_bytes: u64) -> u64 {
        match self {
            MemoryLimit::Bytes(bytes) => bytes,
            MemoryLimit::Percent(percent) => machine_bytes / 100 * u64::from(percent),
        }
    }
}

/// The memory the server may use in bytes: the machine's (`MemTotal` in `/proc/meminfo`), or
/// its control group's limit where that is lower (a container's); `None` where unknown.
pub fn machine_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    let machine_bytes = kib.checked_mul(1024)?;
    Some(cgroup_memory_limit_bytes().map_or(machine_bytes, |limit| limit.min(machine_bytes)))
}

/// The memory limit of this process's control group: cgroup v2's `memory.max`, else v1's
/// `memory.limit_in_bytes`; `None` when unlimited or unknown.
fn cgroup_memory_limit_bytes() -> Option<u64> {
    [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|path| parse_cgroup_limit(&std::fs::read_to_string(path).ok()?))
}

/// A cgroup memory limit file's value: bytes, or `max` (v2) for none. v1 writes "none" as
/// a huge number, which the machine's memory then bounds.
fn parse_cgroup_limit(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_limits_read_as_bytes_and_max_as_none() {
        assert_eq!(parse_cgroup_limit("8589934592\n"), Some(8 << 30));
        assert_eq!(parse_cgroup_limit("max\n"), None);
        assert_eq!(parse_cgroup_limit(""), None);
    }

    #[test]
    fn memory_sizes_read_as_redis_reads_them() {
        assert_eq!(parse_memory("0"), Ok(0));
        assert_eq!(parse_memory("100"), Ok(100));
        assert_eq!(parse_memory("1k"), Ok(1000));
        assert_eq!(parse_memory("1KB"), Ok(1024));
        assert_eq!(parse_memory("256mb"), Ok(256 << 20));
        assert_eq!(parse_memory("2g"), Ok(2_000_000_000));
        assert!(parse_memory("").is_err());
        assert!(parse_memory("mb").is_err());
        assert!(parse_memory("1tb").is_err());
        assert!(parse_memory("-1").is_err());
        assert!(parse_memory("99999999999999999999gb").is_err());
    }

    #[test]
    fn memory_limits_take_sizes_or_a_share_of_the_machine() {
        assert_eq!(MemoryLimit::parse("64mb"), Ok(MemoryLimit::Bytes(64 << 20)));
        assert_eq!(MemoryLimit::parse("10%"), Ok(MemoryLimit::Percent(10)));
        assert_eq!(MemoryLimit::Percent(10).bytes(1000), 100);
        assert_eq!(MemoryLimit::Bytes(0).bytes(1000), 0);
        assert!(MemoryLimit::parse("0%").is_err());
        assert!(MemoryLimit::parse("101%").is_err());
        assert!(MemoryLimit::parse(CLIENT_MEMORY_MAX_DEFAULT).is_ok());
    }

    #[test]
    fn output_buffer_limits_parse_per_class_over_the_previous_ones() {
        let defaults = OutputBufferLimits::default()
            .parse_over(OUTPUT_BUFFER_LIMITS_DEFAULT)
            .unwrap();
        assert_eq!(defaults.normal, OutputBufferLimit::default());
        assert_eq!(defaults.replica.hard_bytes, 256 << 20);
        assert_eq!(defaults.pubsub.soft_seconds, 60);
        let changed = defaults.parse_over("normal 1mb 512kb 10").unwrap();
        assert_eq!(
            changed.normal,
            OutputBufferLimit {
                hard_bytes: 1 << 20,
                soft_bytes: 512 << 10,
                soft_seconds: 10
            }
        );
        assert_eq!(changed.replica, defaults.replica);
        assert!(defaults.parse_over("normal 1mb 1mb").is_err());
        assert!(defaults.parse_over("master 0 0 0").is_err());
        assert!(defaults.parse_over("normal x 0 0").is_err());
        // A time that would overflow the deadline it sets is refused, not a panic later.
        assert!(
            defaults
                .parse_over("normal 0 1mb 18446744073709551615")
                .is_err()
        );
        let text = changed.redis_text();
        assert_eq!(defaults.parse_over(&text).unwrap(), changed);
    }
}

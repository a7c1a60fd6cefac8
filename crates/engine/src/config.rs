//! A namespace's configuration, as the engine needs it.

use model::{BINS_PER_RECORD_MAX, NAMESPACE_NAME_BYTES_MAX};
use storage::StorageConfig;

/// [`BINS_PER_RECORD_MAX`] as the setting's type.
const BINS_PER_RECORD_MAX_U32: u32 = BINS_PER_RECORD_MAX as u32;

const _: () = assert!(BINS_PER_RECORD_MAX <= u32::MAX as usize);

/// Settings of one namespace (the server maps its config file onto this).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceConfig {
    /// Name, 1..=31 bytes.
    pub name: String,
    /// TTL given to writes that ask for the namespace default; 0 means never expire.
    pub default_ttl_seconds: u32,
    /// Seconds between expiry sweeps; 0 disables the sweeper.
    pub nsup_period_seconds: u32,
    /// Whether writes may set a TTL although the sweeper is disabled.
    pub allow_ttl_without_nsup: bool,
    /// Largest record (bins plus stored key) a write may leave behind.
    pub max_record_size_bytes: u32,
    /// Most bins a write may leave in a record (`max-bins-per-record`); a write that would leave
    /// more fails with PARAMETER, as Aerospike's does past `RECORD_MAX_BINS`.
    pub max_bins_per_record: u32,
    /// Sets whose set index is enabled from the start (`enable-index` in the config file).
    pub indexed_sets: Vec<String>,
    /// Device storage; `None` keeps records in memory only.
    pub storage: Option<StorageConfig>,
    /// Evict when the device's used bytes exceed this percentage of it; 0 = never.
    pub evict_used_pct: u8,
    /// Evict when the machine's memory use exceeds this percentage; 0 = never.
    pub evict_sys_memory_pct: u8,
    /// Refuse writes when the machine's memory use exceeds this percentage; 0 = never.
    pub stop_writes_sys_memory_pct: u8,
    /// Per eviction round, the thousandths of the records with a TTL to evict, soonest to
    /// expire first (Aerospike's `evict-tenths-pct`, in tenths of a percent).
    pub evict_tenths_pct: u16,
}

impl NamespaceConfig {
    /// Aerospike's defaults for a namespace called `name`.
    pub fn with_defaults(name: &str) -> NamespaceConfig {
        NamespaceConfig {
            name: name.to_owned(),
            default_ttl_seconds: 0,
            nsup_period_seconds: 120,
            allow_ttl_without_nsup: false,
            // Aerospike's classic limit: a record must fit one 1 MiB write block.
            max_record_size_bytes: 1024 * 1024,
            // Aerospike's fixed limit; lower values let an operator bound what one write costs.
            max_bins_per_record: BINS_PER_RECORD_MAX_U32,
            indexed_sets: Vec::new(),
            storage: None,
            evict_used_pct: 0,
            evict_sys_memory_pct: 0,
            stop_writes_sys_memory_pct: 90,
            evict_tenths_pct: 5,
        }
    }

    /// Checks the settings a config file could get wrong.
    ///
    /// # Errors
    /// A sentence naming the bad setting.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() || self.name.len() > NAMESPACE_NAME_BYTES_MAX {
            return Err(format!(
                "namespace name {:?} must be 1 to {NAMESPACE_NAME_BYTES_MAX} bytes",
                self.name
            ));
        }
        if self
            .name
            .bytes()
            .any(|b| matches!(b, b';' | b':' | b'/' | b'\t' | b'\n' | b'='))
        {
            return Err(format!(
                "namespace name {:?} contains a reserved character",
                self.name
            ));
        }
        if self.default_ttl_seconds > model::TTL_SECONDS_MAX {
            return Err(format!(
                "default-ttl must be at most {} seconds",
                model::TTL_SECONDS_MAX
            ));
        }
        if self.max_record_size_bytes == 0 {
            return Err("max-record-size must be positive".to_owned());
        }
        if self.max_bins_per_record == 0 || self.max_bins_per_record > BINS_PER_RECORD_MAX_U32 {
            return Err(format!(
                "max-bins-per-record must be 1 to {BINS_PER_RECORD_MAX_U32} (Aerospike's limit)"
            ));
        }
        for set in &self.indexed_sets {
            if set.is_empty() || set.len() > model::SET_NAME_BYTES_MAX {
                return Err(format!(
                    "set name {set:?} must be 1 to {} bytes",
                    model::SET_NAME_BYTES_MAX
                ));
            }
        }
        if self.indexed_sets.len() > model::SETS_PER_NAMESPACE_MAX {
            return Err("too many sets".to_owned());
        }
        if let Some(storage) = &self.storage {
            storage.validate()?;
        }
        for (name, pct) in [
            ("evict-used-pct", self.evict_used_pct),
            ("evict-sys-memory-pct", self.evict_sys_memory_pct),
            (
                "stop-writes-sys-memory-pct",
                self.stop_writes_sys_memory_pct,
            ),
        ] {
            if pct > 100 {
                return Err(format!("{name} must be at most 100"));
            }
        }
        if self.evict_used_pct != 0 && self.storage.is_none() {
            return Err(
                "evict-used-pct needs device storage (use evict-sys-memory-pct)".to_owned(),
            );
        }
        if self.evict_tenths_pct == 0 || self.evict_tenths_pct > 1000 {
            return Err("evict-tenths-pct must be 1 to 1000".to_owned());
        }
        Ok(())
    }
}

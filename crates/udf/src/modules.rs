//! The in-memory store of registered Lua modules.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mlua::chunk::ChunkMode;
use parking_lot::{Mutex, RwLock};

use crate::sandbox::{Deps, new_state};
use crate::{Limits, UdfError};

/// Aerospike's limit on a UDF file's size (`MAX_UDF_CONTENT_LENGTH`).
pub const MAX_CONTENT_LEN: usize = 1024 * 1024;
/// Aerospike's limit on a UDF file name, terminator excluded.
pub const MAX_NAME_LEN: usize = 127;
/// Where Aerospike keeps UDF files; it shows in runtime error messages.
pub const DEFAULT_USER_PATH: &str = "/opt/aerospike/usr/udf/lua";

/// Limits applied while validating a module (running its top level).
const VALIDATE_LIMITS: Limits = Limits {
    time_ms: 1000,
    memory_bytes: 64 * 1024 * 1024,
};

/// One registered module.
#[derive(Debug, Clone)]
pub struct Module {
    /// The file name, e.g. `mymod.lua`.
    pub name: String,
    /// The Lua source.
    pub source: String,
    /// SHA-1 of the source, lower-case hex.
    pub hash: String,
    /// The store generation at which this version was registered; a new
    /// version always has a higher generation.
    pub generation: u64,
}

/// What `udf-list` shows of a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleInfo {
    /// The file name.
    pub name: String,
    /// SHA-1 of the source, lower-case hex.
    pub hash: String,
}

/// Registered Lua modules by file name, shared by all runtimes.
///
/// Every `put` validates the source first (compiles it and runs its top
/// level in a sandboxed state, as Aerospike's `udf-put`), so the store only
/// holds modules that load. Every change bumps [`Modules::generation`], which
/// runtimes watch to drop stale cached states.
#[derive(Debug)]
pub struct Modules {
    map: RwLock<HashMap<String, Arc<Module>>>,
    generation: AtomicU64,
    /// Serializes writers so generations follow registration order.
    write: Mutex<()>,
}

impl Default for Modules {
    fn default() -> Self {
        Self::new()
    }
}

impl Modules {
    /// An empty store.
    pub fn new() -> Self {
        Modules {
            map: RwLock::new(HashMap::new()),
            generation: AtomicU64::new(0),
            write: Mutex::new(()),
        }
    }

    /// Validates and registers (or replaces) a module.
    pub fn put(self: &Arc<Self>, name: &str, source: &str) -> Result<(), UdfError> {
        check_name(name)?;
        if source.len() > MAX_CONTENT_LEN {
            return Err(UdfError::TooLarge { size: source.len() });
        }
        self.validate(name, source)?;
        let _writer = self.write.lock();
        let generation = self.generation.load(Ordering::SeqCst) + 1;
        let module = Module {
            name: name.to_owned(),
            source: source.to_owned(),
            hash: sha1_hex(source.as_bytes()),
            generation,
        };
        self.map.write().insert(name.to_owned(), Arc::new(module));
        self.generation.store(generation, Ordering::SeqCst);
        Ok(())
    }

    /// A module's source.
    pub fn get(&self, name: &str) -> Option<String> {
        self.map.read().get(name).map(|m| m.source.clone())
    }

    /// A module with its metadata.
    pub fn entry(&self, name: &str) -> Option<Arc<Module>> {
        self.map.read().get(name).cloned()
    }

    /// All modules' names and hashes, sorted by name.
    pub fn list(&self) -> Vec<ModuleInfo> {
        let mut out: Vec<ModuleInfo> = self
            .map
            .read()
            .values()
            .map(|m| ModuleInfo {
                name: m.name.clone(),
                hash: m.hash.clone(),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Removes a module; false when it was not registered.
    pub fn remove(&self, name: &str) -> bool {
        let _writer = self.write.lock();
        let removed = self.map.write().remove(name).is_some();
        if removed {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        removed
    }

    /// (name, source) of every module, sorted by name, for persistence.
    pub fn iter(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .map
            .read()
            .values()
            .map(|m| (m.name.clone(), m.source.clone()))
            .collect();
        out.sort();
        out
    }

    /// Increases on every registration and removal.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Compiles `source` and runs its top level in a throw-away state.
    fn validate(self: &Arc<Self>, name: &str, source: &str) -> Result<(), UdfError> {
        let deps = Deps::default();
        let lua = new_state(self, DEFAULT_USER_PATH, &deps).map_err(|e| UdfError::Runtime {
            message: e.to_string(),
        })?;
        let run = || -> mlua::Result<()> {
            crate::runtime::arm(&lua, VALIDATE_LIMITS)?;
            let chunk = lua
                .load(source)
                .set_name(name)
                .set_mode(ChunkMode::Text)
                .into_function()?;
            chunk.call::<()>(())
        };
        let result = run();
        crate::runtime::disarm(&lua);
        result.map_err(|e| compile_error(name, &crate::runtime::error_message(&e)))
    }
}

/// Aerospike's `udf_filename_is_valid` plus its extension and length rules.
fn check_name(name: &str) -> Result<(), UdfError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '$');
    let has_ext = name.find('.').is_some_and(|dot| dot + 1 < name.len());
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with('.')
        && !name.contains("..")
        && name.chars().all(ok_char)
        && has_ext;
    if valid {
        Ok(())
    } else {
        Err(UdfError::InvalidName {
            name: name.to_owned(),
        })
    }
}

/// Splits Lua's `[string "file"]:line: message` as `populate_error` does;
/// other messages keep their first line (up to 256 bytes).
pub(crate) fn compile_error(name: &str, message: &str) -> UdfError {
    if let Some(parsed) = parse_located(message) {
        return parsed;
    }
    let first = message.lines().next().unwrap_or_default();
    let mut end = first.len().min(256);
    while !first.is_char_boundary(end) {
        end -= 1;
    }
    UdfError::Compile {
        file: name.to_owned(),
        line: 0,
        message: first[..end].to_owned(),
    }
}

fn parse_located(message: &str) -> Option<UdfError> {
    let rest = message.strip_prefix("[string \"")?;
    let (file, rest) = rest.split_once("\"]:")?;
    let (line, text) = rest.split_once(':')?;
    Some(UdfError::Compile {
        file: file.to_owned(),
        line: line.parse().ok()?,
        message: text.strip_prefix(' ').unwrap_or(text).to_owned(),
    })
}

fn sha1_hex(data: &[u8]) -> String {
    sha1_smol::Sha1::from(data).digest().to_string()
}

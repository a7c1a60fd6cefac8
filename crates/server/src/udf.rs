//! Lua UDFs: the module store behind `udf-put`, `udf-get`, `udf-list` and `udf-remove`, kept
//! in `<work-directory>/udf/` so modules survive a restart, record UDFs (`apply`) run on a
//! record under its partition's lock through `engine::Namespace::edit`, and stream UDFs
//! (aggregations) run over a partition's records for `scan::aggregate`.
//!
//! Invariants:
//! - A module is compiled (and its top level run in the sandbox) before it is stored; one that
//!   fails is refused with Aerospike's `error=compile_error;...` answer and stored nowhere.
//! - The file is written (to a temporary name, then renamed) before the module is put in the
//!   store, so a module a client saw registered survives a crash.
//! - A UDF runs in a Lua state of its worker thread, within [`UDF_TIME_MAX_MS`] and
//!   [`UDF_MEMORY_MAX_BYTES`]; a failure answers UDF_BAD_RESPONSE (100) with a `FAILURE` bin
//!   and changes nothing of the record unless the UDF committed it before failing.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use engine::collection::{self, KIND_GEOJSON, KIND_STRING, List, Map, MapOrder, Value};
use engine::{Acks, EditRequest, Expression, Namespace, Origin, RecordEdit, RecordMeta};
use model::{ParticleType, ResultCode, TtlRequest};
use tracing::{info, warn};
use udf::{Limits, Modules, UdfError, UdfRecord, UdfRuntime};

use crate::cluster::ClusterNode;
use crate::dispatch::RecordCommand;
use wire_aerospike::info_param;

/// How long one UDF call may run.
pub const UDF_TIME_MAX_MS: u64 = 1_000;
/// How much memory one UDF call may use.
pub const UDF_MEMORY_MAX_BYTES: usize = 64 * 1024 * 1024;

/// The registered modules, and where they are kept.
#[derive(Debug)]
pub struct UdfModules {
    modules: Arc<Modules>,
    /// `<work-directory>/udf`; `None` when the server keeps no files.
    dir: Option<PathBuf>,
}

impl UdfModules {
    /// The modules kept in `work_directory` (none without one).
    pub fn load(work_directory: &Path) -> UdfModules {
        let modules = Arc::new(Modules::new());
        let dir = (!work_directory.as_os_str().is_empty()).then(|| work_directory.join("udf"));
        if let Some(dir) = &dir {
            load_dir(&modules, dir);
        }
        UdfModules { modules, dir }
    }

    /// `udf-put:filename=<name>;content-len=<len>;udf-type=LUA;content=<base64>`; on a
    /// cluster, `cluster` commits it for every node.
    pub fn put(&self, cluster: Option<&ClusterNode>, params: &[u8], value: &mut String) {
        let Some(name) = filename(params) else {
            return value.push_str("error=invalid_filename");
        };
        let content = info_param(params, b"content").unwrap_or_default();
        let declared = info_param(params, b"content-len")
            .and_then(|len| std::str::from_utf8(len).ok()?.parse::<usize>().ok());
        if declared.is_none_or(|len| len % 4 != 0) {
            return value.push_str("error=invalid_content_len");
        }
        if declared != Some(content.len()) {
            return value.push_str("error=invalid_content");
        }
        if content.len() / 4 * 3 > udf::MAX_CONTENT_LEN + 3 {
            return value.push_str("error=invalid_udf_content_len,>1M");
        }
        let Some(source) = BASE64
            .decode(content)
            .ok()
            .and_then(|s| String::from_utf8(s).ok())
        else {
            return value.push_str("error=invalid_base64_content");
        };
        if let Err(error) = self.modules.put(&name, &source) {
            warn!(module = %name, %error, "udf-put refused");
            return value.push_str(&error.info_response());
        }
        self.keep(&name, &source);
        // On a cluster the module reaches every node through the metadata group.
        if let Some(node) = cluster {
            node.replicate_udf_put(&name, &source);
        }
        value.push_str("ok");
    }

    /// Registers a module the cluster holds (already compiled by the node that took it).
    pub fn put_local(&self, name: &str, source: &str) {
        match self.modules.put(name, source) {
            Ok(()) => self.keep(name, source),
            Err(error) => warn!(module = %name, %error, "a cluster UDF module does not load here"),
        }
    }

    /// Removes a module the cluster removed.
    pub fn remove_local(&self, name: &str) {
        self.modules.remove(name);
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_file(dir.join(name));
        }
        info!(module = %name, "UDF module removed");
    }

    /// A registered module's source.
    pub fn source(&self, name: &str) -> Option<String> {
        self.modules.get(name)
    }

    /// Writes a registered module's file, and says so.
    fn keep(&self, name: &str, source: &str) {
        if let Err(error) = self.save(name, source) {
            warn!(module = %name, %error, "could not keep a UDF module on disk");
        }
        info!(module = %name, "UDF module registered");
    }

    /// `udf-get:filename=<name>`: `type=LUA;content=<base64>;`.
    pub fn get(&self, params: &[u8], value: &mut String) {
        let Some(name) = filename(params) else {
            return value.push_str("error=invalid_filename");
        };
        match self.modules.get(&name) {
            Some(source) => {
                let _ = write!(value, "type=LUA;content={};", BASE64.encode(source));
            }
            None => value.push_str("error=not_found"),
        }
    }

    /// `udf-list`: `filename=<name>,hash=<sha1>,type=LUA;` per module.
    pub fn list(&self, value: &mut String) {
        for module in self.modules.list() {
            let _ = write!(
                value,
                "filename={},hash={},type=LUA;",
                module.name, module.hash
            );
        }
    }

    /// `udf-remove:filename=<name>`; on a cluster, `cluster` commits it for every node.
    pub fn remove(&self, cluster: Option<&ClusterNode>, params: &[u8], value: &mut String) {
        let Some(name) = filename(params) else {
            return value.push_str("error=invalid_filename");
        };
        self.remove_local(&name);
        if let Some(node) = cluster {
            node.replicate_udf_remove(&name);
        }
        value.push_str("ok");
    }

    /// Keeps a module's source in its file.
    fn save(&self, name: &str, source: &str) -> std::io::Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        std::fs::create_dir_all(dir)?;
        let temporary = dir.join(format!(".{name}.tmp"));
        std::fs::write(&temporary, source)?;
        std::fs::rename(&temporary, dir.join(name))
    }
}

/// Registers every module file of `dir`; one that no longer compiles is logged and skipped.
fn load_dir(modules: &Arc<Modules>, dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        match std::fs::read_to_string(entry.path()) {
            Ok(source) => {
                if let Err(error) = modules.put(&name, &source) {
                    warn!(module = %name, %error, "a kept UDF module no longer loads");
                }
            }
            Err(error) => warn!(module = %name, %error, "could not read a UDF module"),
        }
    }
}

/// The `filename` parameter of a UDF info command.
fn filename(params: &[u8]) -> Option<String> {
    let name = info_param(params, b"filename")?;
    let name = std::str::from_utf8(name).ok()?;
    (!name.is_empty()).then(|| name.to_owned())
}

// ---- record UDFs -------------------------------------------------------------------------

thread_local! {
    /// This thread's Lua runtime, for the module store it was made for.
    static RUNTIME: RefCell<Option<(usize, UdfRuntime)>> = const { RefCell::new(None) };
}

/// What a record UDF answered: its return value, or its failure.
pub enum UdfOutcome {
    /// The UDF returned this (bin `SUCCESS`).
    Returned(Value),
    /// The UDF failed: the message for bin `FAILURE`.
    Failed(String),
}

/// A record UDF to call: module, function and arguments, decoded from a message's UDF fields.
#[derive(Clone, Debug)]
pub struct UdfCall {
    pub module: String,
    pub function: String,
    pub arguments: Vec<udf::Value>,
}

impl UdfCall {
    /// The call a message's UDF_FILENAME, UDF_FUNCTION and UDF_ARGLIST fields name.
    ///
    /// # Errors
    /// PARAMETER for a missing or malformed field.
    pub fn from_fields(fields: &wire_aerospike::UdfFields<'_>) -> Result<UdfCall, ResultCode> {
        Ok(UdfCall {
            module: text(fields.module)?.to_owned(),
            function: text(fields.function)?.to_owned(),
            arguments: arguments(fields.arguments)?,
        })
    }
}

/// Runs the record UDF `command` names on its record.
///
/// # Errors
/// PARAMETER for missing or malformed UDF fields; the record's own errors (TIMEOUT,
/// KEY_MISMATCH, FILTERED_OUT, ...).
pub fn apply(
    modules: &UdfModules,
    namespace: &Namespace,
    command: &RecordCommand<'_>,
    origin: Origin,
    acks: &mut Acks,
) -> Result<(UdfOutcome, RecordMeta), ResultCode> {
    let call = UdfCall::from_fields(&command.fields.udf_call)?;
    let filter = command
        .fields
        .filter_expression
        .map(Expression::parse_filter)
        .transpose()?;
    let request = EditRequest {
        digest: command.digest,
        set_name: command.fields.set.unwrap_or_default(),
        key: command.fields.key,
        filter: filter.as_ref(),
        deadline: command.deadline,
        ttl: TtlRequest::from_wire(command.header.record_ttl)?,
    };
    apply_call(modules, namespace, call, &request, origin, acks)
}

/// Runs `call` on the record `request` names (a record UDF, or one record of a background UDF
/// query), under its partition's lock.
///
/// # Errors
/// The record's own errors (TIMEOUT, KEY_MISMATCH, FILTERED_OUT, ...).
pub fn apply_call(
    modules: &UdfModules,
    namespace: &Namespace,
    call: UdfCall,
    request: &EditRequest<'_>,
    origin: Origin,
    acks: &mut Acks,
) -> Result<(UdfOutcome, RecordMeta), ResultCode> {
    let limits = Limits {
        time_ms: UDF_TIME_MAX_MS,
        memory_bytes: UDF_MEMORY_MAX_BYTES,
    };
    let UdfCall {
        module,
        function,
        arguments,
    } = call;
    namespace.edit(origin, request, acks, |edit| {
        with_runtime(modules, |runtime| {
            let mut record = EditedRecord { edit };
            match runtime.apply(&module, &function, arguments, &mut record, limits) {
                Ok(returned) => UdfOutcome::Returned(from_udf(returned)),
                Err(error) => UdfOutcome::Failed(failure(&error)),
            }
        })
    })
}

/// The message a failed UDF answers with.
fn failure(error: &UdfError) -> String {
    error.failure_message()
}

/// Runs the stream UDF `call` names over `input` (one partition's records), on this thread's
/// runtime, within [`UDF_TIME_MAX_MS`] and [`UDF_MEMORY_MAX_BYTES`]; each value it produces
/// goes to `emit`.
///
/// # Errors
/// The UDF's failure, worded for a `FAILURE` bin by [`UdfError::stream_failure_message`].
pub fn aggregate(
    modules: &UdfModules,
    call: &UdfCall,
    input: &mut udf::StreamInput<'_>,
    emit: &mut dyn FnMut(udf::Value),
) -> Result<(), UdfError> {
    let limits = Limits {
        time_ms: UDF_TIME_MAX_MS,
        memory_bytes: UDF_MEMORY_MAX_BYTES,
    };
    with_runtime(modules, |runtime| {
        runtime.aggregate(
            &call.module,
            &call.function,
            call.arguments.clone(),
            input,
            emit,
            limits,
        )
    })
}

/// A UDF's result as the particle of its `SUCCESS` bin: (particle type, bytes).
pub fn success_particle(value: udf::Value) -> (u8, Vec<u8>) {
    collection::to_particle(&from_udf(value))
}

/// Seconds a record has left to live, as `record.ttl` answers: `u32::MAX` for one that never
/// expires (Aerospike's -1 as an unsigned 32-bit number).
pub fn ttl_left_seconds(void_time_epoch_s: u64, now_ms: u64) -> u32 {
    match void_time_epoch_s {
        0 => u32::MAX,
        void_time => {
            let left = void_time.saturating_sub(now_ms / 1000);
            u32::try_from(left).unwrap_or(u32::MAX - 1)
        }
    }
}

fn with_runtime<T>(modules: &UdfModules, run: impl FnOnce(&mut UdfRuntime) -> T) -> T {
    RUNTIME.with(|cell| {
        let mut slot = cell.borrow_mut();
        let store = Arc::as_ptr(&modules.modules) as usize;
        if slot.as_ref().is_none_or(|(owner, _)| *owner != store) {
            *slot = Some((store, UdfRuntime::new(modules.modules.clone())));
        }
        let (_, runtime) = slot.as_mut().expect("just made");
        run(runtime)
    })
}

fn text(field: Option<&[u8]>) -> Result<&str, ResultCode> {
    let bytes = field.ok_or(ResultCode::Parameter)?;
    std::str::from_utf8(bytes).map_err(|_| ResultCode::Parameter)
}

/// The UDF_ARGLIST field: a msgpack array (an absent or empty field: no arguments).
fn arguments(field: Option<&[u8]>) -> Result<Vec<udf::Value>, ResultCode> {
    let Some(bytes) = field.filter(|bytes| !bytes.is_empty()) else {
        return Ok(Vec::new());
    };
    match collection::decode(bytes)? {
        Value::List(list) => Ok(list.items.into_iter().map(to_udf).collect()),
        _ => Err(ResultCode::Parameter),
    }
}

/// A record being edited, as the Lua API sees it.
struct EditedRecord<'e> {
    edit: &'e mut RecordEdit,
}

impl UdfRecord for EditedRecord<'_> {
    fn exists(&self) -> bool {
        self.edit.exists()
    }

    fn bin(&self, name: &str) -> Option<udf::Value> {
        let (particle_type, bytes) = self.edit.bin(name.as_bytes())?;
        Some(particle_to_udf(particle_type, bytes))
    }

    fn set_bin(&mut self, name: &str, value: udf::Value) {
        self.edit.set_bin(name.as_bytes(), udf_to_particle(value));
    }

    fn bin_names(&self) -> Vec<String> {
        self.edit
            .bin_names()
            .map(|name| String::from_utf8_lossy(name).into_owned())
            .collect()
    }

    fn ttl(&self) -> u32 {
        let facts = self.edit.facts();
        ttl_left_seconds(facts.void_time_epoch_s, facts.now_ms)
    }

    fn set_ttl(&mut self, ttl: u32) {
        self.edit.set_ttl(ttl);
    }

    fn generation(&self) -> u32 {
        u32::from(self.edit.generation())
    }

    fn last_update_ms(&self) -> u64 {
        self.edit.facts().last_update_ms
    }

    fn set_name(&self) -> Option<String> {
        let name = self.edit.facts().set_name;
        (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned())
    }

    fn digest(&self) -> [u8; 20] {
        *self.edit.facts().digest
    }

    fn key(&self) -> Option<udf::Value> {
        let (particle_type, bytes) = self.edit.facts().key?;
        Some(particle_to_udf(particle_type, bytes))
    }

    fn device_size(&self) -> u64 {
        self.edit.facts().size_bytes
    }

    fn create(&mut self) -> i32 {
        status(self.edit.create())
    }

    fn update(&mut self) -> i32 {
        status(self.edit.update())
    }

    fn remove(&mut self) -> i32 {
        status(self.edit.remove())
    }
}

/// Aerospike's `aerospike:create/update/remove` answer: 0, or the failure's result code.
fn status(result: Result<(), ResultCode>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(code) => i32::from(code.code()),
    }
}

// ---- conversions -------------------------------------------------------------------------

/// A bin's particle as a Lua value.
pub fn particle_to_udf(particle_type: u8, bytes: &[u8]) -> udf::Value {
    if particle_type == ParticleType::GeoJson as u8 {
        return udf::Value::GeoJson(String::from_utf8_lossy(geojson_text(bytes)).into_owned());
    }
    match collection::from_particle(particle_type, bytes) {
        Ok(value) => to_udf(value),
        Err(_) => udf::Value::Bytes(bytes.to_vec()),
    }
}

/// The JSON of a GeoJSON particle: after the flags, the cell count and the cells.
fn geojson_text(bytes: &[u8]) -> &[u8] {
    let cells = bytes.get(1..3).map_or(0, |count| {
        usize::from(u16::from_be_bytes([count[0], count[1]]))
    });
    bytes.get(3 + 8 * cells..).unwrap_or_default()
}

/// A Lua value as a bin's particle (`None`: nil, which removes the bin).
fn udf_to_particle(value: udf::Value) -> Option<(u8, Vec<u8>)> {
    match value {
        udf::Value::Nil => None,
        udf::Value::GeoJson(json) => {
            let mut bytes = vec![0, 0, 0];
            bytes.extend_from_slice(json.as_bytes());
            Some((ParticleType::GeoJson as u8, bytes))
        }
        other => Some(collection::to_particle(&from_udf(other))),
    }
}

fn to_udf(value: Value) -> udf::Value {
    match value {
        Value::Nil | Value::Ext { .. } | Value::Wildcard | Value::Infinity => udf::Value::Nil,
        Value::Bool(flag) => udf::Value::Bool(flag),
        Value::Int(number) => udf::Value::Int(number),
        Value::Float(number) => udf::Value::Float(number),
        Value::Bytes { kind, data } => match (kind, String::from_utf8(data)) {
            (KIND_STRING, Ok(text)) => udf::Value::Str(text),
            (KIND_GEOJSON, Ok(text)) => udf::Value::GeoJson(text),
            (_, Ok(text)) => udf::Value::Bytes(text.into_bytes()),
            (_, Err(error)) => udf::Value::Bytes(error.into_bytes()),
        },
        Value::List(list) => udf::Value::List(list.items.into_iter().map(to_udf).collect()),
        Value::Map(map) => udf::Value::Map(
            map.entries
                .into_iter()
                .map(|(key, value)| (to_udf(key), to_udf(value)))
                .collect(),
        ),
    }
}

fn from_udf(value: udf::Value) -> Value {
    match value {
        udf::Value::Nil => Value::Nil,
        udf::Value::Bool(flag) => Value::Bool(flag),
        udf::Value::Int(number) => Value::Int(number),
        udf::Value::Float(number) => Value::Float(number),
        udf::Value::Str(text) => Value::string(text.as_bytes()),
        udf::Value::Bytes(data) => Value::Bytes {
            kind: ParticleType::Blob as u8,
            data,
        },
        udf::Value::GeoJson(text) => Value::Bytes {
            kind: KIND_GEOJSON,
            data: text.into_bytes(),
        },
        udf::Value::List(items) => Value::List(List {
            ordered: false,
            items: items.into_iter().map(from_udf).collect(),
        }),
        udf::Value::Map(entries) => Value::Map(Map {
            order: MapOrder::Unordered,
            entries: entries
                .into_iter()
                .map(|(key, value)| (from_udf(key), from_udf(value)))
                .collect(),
        }),
    }
}

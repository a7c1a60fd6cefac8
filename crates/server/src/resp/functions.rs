//! Redis functions: FUNCTION LOAD | LIST | DELETE | FLUSH | DUMP | RESTORE | KILL | STATS |
//! HELP, FCALL and FCALL_RO, on the Lua runtime EVAL uses (`udf::redis`).
//!
//! - A library is Lua code with a `#!lua name=<library>` line; loading it runs it once, and
//!   the functions it registers (`redis.register_function`) are what FCALL calls.
//! - A function runs exactly as an EVAL script runs (`scripting::run_registered`): on the
//!   long-request pool, inside the namespace's exclusive section, registered for BUSY and
//!   FUNCTION KILL, its commands through the same dispatch and checks.
//! - Libraries live in this node's memory: they are not persisted (Redis keeps them in its
//!   RDB file) and not copied to other nodes; FUNCTION DUMP and RESTORE move them.
//!
//! Invariants:
//! - `Catalog::owners` maps each registered function name, in lower case, to the one library
//!   that registered it: no two functions have names equal but for case, and every library
//!   has a function.
//! - Every callback lives in the one Lua state of `Functions::engine`, which is built once and
//!   never dropped, so a callback cloned out of the catalog stays callable.
//! - Lock order: `engine` before `catalog`. A function runs holding `engine`, so a load never
//!   compiles into the state while a function runs (it gets BUSY instead).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use udf::redis::{ParsedScript, RedisScripting, RedisValue, RegisteredFunction, ScriptRun};
use wire_resp::Args;

use super::commands::Command;
use super::rdb;
use super::reply::Reply;
use super::scripting::{self, Access, Killer, NotRun, RunKind, SCRIPT_MEMORY_BYTES_MAX};
use super::{After, Session, glob, keys};

/// The function commands.
pub const COMMANDS: &[Command] = &[
    ("fcall", -3, fcall),
    ("fcall_ro", -3, fcall_ro),
    ("function", -2, function),
];

/// How long a library's code may run at load (Redis's `LOAD_TIMEOUT_MS`): it should only
/// register functions.
const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// The one engine Osprey has, as FUNCTION LIST and STATS name it.
const ENGINE_NAME: &str = "LUA";

const LIBRARY_NAME_RULE: &str = "Library names can only contain letters, numbers, or \
                                 underscores(_) and must be at least one character long";

/// The server's function libraries and the Lua state their functions live in.
#[derive(Default)]
pub struct Functions {
    engine: Mutex<Option<RedisScripting>>,
    catalog: Mutex<Catalog>,
}

impl std::fmt::Debug for Functions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Functions")
            .field("libraries", &self.catalog.lock().libraries.len())
            .finish_non_exhaustive()
    }
}

/// The libraries by name, and which library registered each function.
///
/// Library names match exactly; function names match in any case (Redis 7.0's function
/// dictionary hashes and compares them without case: FCALL TEST calls `test`), so `owners`
/// is keyed by the name in lower case.
#[derive(Clone, Debug, Default)]
struct Catalog {
    libraries: BTreeMap<String, Library>,
    owners: HashMap<String, String>,
}

/// A function name as `Catalog::owners` keys it.
fn function_key(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// A loaded library: its code as given (shebang included) and its functions.
#[derive(Clone, Debug)]
struct Library {
    code: Vec<u8>,
    functions: Vec<RegisteredFunction>,
}

impl Catalog {
    fn function(&self, name: &[u8]) -> Option<&RegisteredFunction> {
        let name = std::str::from_utf8(name).ok()?;
        let library = self.libraries.get(self.owners.get(&function_key(name))?)?;
        library
            .functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
    }

    /// The library that registered function `name` (in any case).
    fn owner(&self, name: &str) -> Option<&String> {
        self.owners.get(&function_key(name))
    }

    fn insert(&mut self, name: String, library: Library) {
        for function in &library.functions {
            let previous = self
                .owners
                .insert(function_key(&function.name), name.clone());
            assert!(
                previous.is_none(),
                "function {} registered twice",
                function.name
            );
        }
        self.libraries.insert(name, library);
    }

    fn remove(&mut self, name: &str) -> Option<Library> {
        let library = self.libraries.remove(name)?;
        for function in &library.functions {
            self.owners.remove(&function_key(&function.name));
        }
        Some(library)
    }

    fn function_count(&self) -> usize {
        self.owners.len()
    }
}

/// A library's `#!<engine> name=<library>` line.
#[derive(Debug, PartialEq, Eq)]
struct Metadata {
    engine: String,
    name: String,
    /// Where the code after the line starts (its line feed, to keep line numbers).
    code_offset: usize,
}

/// Parses a library's first line (Redis's `functionExtractLibMetaData`).
///
/// # Errors
/// Redis's text, without `ERR `.
fn parse_metadata(code: &[u8]) -> Result<Metadata, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".to_owned());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".to_owned());
    };
    // Redis splits the whole line, `#!` included, then drops the first word's first two
    // bytes: `#! name=x` names the engine "".
    let Some(parts) = wire_resp::split_args(&code[..end]) else {
        return Err("Invalid library metadata".to_owned());
    };
    let mut parts = parts
        .iter()
        .map(|part| String::from_utf8_lossy(part).into_owned());
    let Some(first) = parts.next() else {
        return Err("Invalid library metadata".to_owned());
    };
    let engine = first.get(2..).unwrap_or_default().to_owned();
    let mut name = None;
    for part in parts {
        let is_name = part.len() >= 5 && part.as_bytes()[..5].eq_ignore_ascii_case(b"name=");
        if !is_name {
            return Err(format!("Invalid metadata value given: {part}"));
        }
        if name.is_some() {
            return Err(
                "Invalid metadata value, name argument was given multiple times".to_owned(),
            );
        }
        name = Some(part[5..].to_owned());
    }
    let Some(name) = name else {
        return Err("Library name was not given".to_owned());
    };
    Ok(Metadata {
        engine,
        name,
        code_offset: end,
    })
}

/// Whether `name` may name a library or function: letters, digits and `_`, at least one.
fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Loads library `code` into `catalog` (replacing one of its name when `replace`), its
/// functions compiled in `engine`: the library's name (Redis's
/// `functionsCreateWithLibraryCtx`).
///
/// # Errors
/// Redis's text, without `ERR `; `catalog` is then as it was.
fn create_library(
    engine: &mut RedisScripting,
    catalog: &mut Catalog,
    code: &[u8],
    replace: bool,
) -> Result<String, String> {
    let metadata = parse_metadata(code)?;
    if !is_valid_name(&metadata.name) {
        return Err(LIBRARY_NAME_RULE.to_owned());
    }
    if !metadata.engine.eq_ignore_ascii_case(ENGINE_NAME) {
        return Err(format!("Engine '{}' not found", metadata.engine));
    }
    if catalog.libraries.contains_key(&metadata.name) && !replace {
        return Err(format!("Library '{}' already exists", metadata.name));
    }
    let functions = engine.load_library(
        &code[metadata.code_offset..],
        LOAD_TIMEOUT,
        SCRIPT_MEMORY_BYTES_MAX,
    )?;
    if functions.is_empty() {
        return Err("No functions registered".to_owned());
    }
    for (index, function) in functions.iter().enumerate() {
        // Two names that differ only in case are one function name: Redis keeps the first
        // (its library lists both); Osprey refuses the library, as it would another's.
        let twice = functions[..index]
            .iter()
            .any(|other| other.name.eq_ignore_ascii_case(&function.name));
        if twice
            || catalog
                .owner(&function.name)
                .is_some_and(|owner| *owner != metadata.name)
        {
            return Err(format!("Function {} already exists", function.name));
        }
    }
    catalog.remove(&metadata.name);
    let library = Library {
        code: code.to_vec(),
        functions,
    };
    catalog.insert(metadata.name.clone(), library);
    Ok(metadata.name)
}

/// How FUNCTION RESTORE treats the libraries already loaded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RestorePolicy {
    /// Drop them all first.
    Flush,
    /// Keep them; a library of the same name is an error.
    Append,
    /// Keep them; a library of the same name is replaced.
    Replace,
}

/// Adds `restored`'s libraries to `catalog` (Redis's `libraryJoin`).
///
/// # Errors
/// Redis's text, without `ERR `; `catalog` is then as it was.
fn join(catalog: &mut Catalog, restored: Catalog, replace: bool) -> Result<(), String> {
    let mut joined = catalog.clone();
    for name in restored.libraries.keys() {
        if joined.libraries.contains_key(name) {
            if !replace {
                return Err(format!("Library {name} already exists"));
            }
            joined.remove(name);
        }
    }
    for function in restored.libraries.values().flat_map(|l| &l.functions) {
        if joined.owner(&function.name).is_some() {
            return Err(format!("Function {} already exists", function.name));
        }
    }
    for (name, library) in restored.libraries {
        joined.insert(name, library);
    }
    *catalog = joined;
    Ok(())
}

impl Functions {
    /// Runs `body` with the engine (built on first use) and the catalog, or answers BUSY when
    /// a function runs now.
    fn with_engine<T>(
        &self,
        body: impl FnOnce(&mut RedisScripting, &mut Catalog) -> Result<T, String>,
    ) -> Result<T, String> {
        let Some(mut slot) = self.engine.try_lock() else {
            return Err(scripting::BUSY_FUNCTION.to_owned());
        };
        if slot.is_none() {
            *slot = Some(RedisScripting::new().map_err(|e| format!("ERR {e}"))?);
        }
        let engine = slot.as_mut().expect("the engine was just built");
        body(engine, &mut self.catalog.lock())
    }
}

/// FCALL function numkeys [key ...] [arg ...]
fn fcall(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    fcall_generic(session, args, reply, Access::ReadWrite)
}

/// FCALL_RO function numkeys [key ...] [arg ...]: only functions flagged `no-writes`.
fn fcall_ro(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    fcall_generic(session, args, reply, Access::ReadOnly)
}

/// FCALL's key count, checked against its arguments, or Redis's error.
fn key_count(args: &Args) -> Result<usize, &'static str> {
    let count = keys::parse_i64(args.get(2)).map_err(|()| "ERR Bad number of keys provided")?;
    if count < 0 {
        return Err("ERR Number of keys can't be negative");
    }
    match usize::try_from(count) {
        Ok(count) if count <= args.len() - 3 => Ok(count),
        _ => Err("ERR Number of keys can't be greater than number of args"),
    }
}

fn fcall_generic(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    access: Access,
) -> After {
    let state = Arc::clone(&session.state);
    let functions = &state.scripts.functions;
    let Some(function) = functions.catalog.lock().function(args.get(1)).cloned() else {
        return scripting::refuse_run(session, args, reply, "ERR Function not found");
    };
    let key_count = match key_count(args) {
        Ok(count) => count,
        Err(message) => return scripting::refuse_run(session, args, reply, message),
    };
    let parsed = ParsedScript {
        flags: function.flags,
        code_offset: 0,
    };
    if let Some(refusal) = scripting::refusal(session, parsed, access) {
        return scripting::refuse_run(session, args, reply, refusal);
    }
    // Where no long function could give its worker away, functions run on the long-request
    // pool.
    if session.may_offload && !super::script_worker::on_runtime_worker() {
        return After::Offload;
    }
    let read_only = access == Access::ReadOnly || function.flags.no_writes;
    let keys: Vec<&[u8]> = (3..3 + key_count).map(|i| args.get(i)).collect();
    let argv: Vec<&[u8]> = (3 + key_count..args.len()).map(|i| args.get(i)).collect();
    let kind = RunKind::Function {
        name: function.name.clone(),
        command: (0..args.len()).map(|i| args.get(i).to_vec()).collect(),
    };
    let limits = (read_only, function.flags.allow_oom);
    let value = scripting::run_registered(session, args, kind, limits, |host, checkpoint| {
        let run = ScriptRun {
            sha: &function.name,
            body: b"",
            keys: &keys,
            args: &argv,
            memory_bytes_max: SCRIPT_MEMORY_BYTES_MAX,
        };
        // A function runs holding the engine: a load waits for it (or gets BUSY).
        match functions.engine.lock().as_mut() {
            Some(engine) => engine.call_function(&function, run, host, checkpoint),
            None => (RedisValue::Error(b"ERR Function not found".to_vec()), host),
        }
    });
    let value = match value {
        Ok(value) => value,
        Err(NotRun::AwaitTurn) => return After::AwaitScript,
        Err(NotRun::Busy(busy)) => RedisValue::Error(busy.as_bytes().to_vec()),
    };
    super::script_host::write_value(reply, &value);
    After::Continue
}

/// FUNCTION <subcommand> ...
fn function(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let subcommand = args.get(1).to_ascii_lowercase();
    let state = Arc::clone(&session.state);
    let functions = &state.scripts.functions;
    let arity_ok = |arity: i32| {
        let count = i32::try_from(args.len()).unwrap_or(i32::MAX);
        (arity > 0 && count == arity) || (arity < 0 && count >= -arity)
    };
    let arity = match subcommand.as_slice() {
        b"delete" => 3,
        b"dump" | b"help" | b"kill" | b"stats" => 2,
        b"flush" | b"list" => -2,
        b"load" | b"restore" => -3,
        _ => {
            let shown = &args.get(1)[..args.get(1).len().min(128)];
            reply.error(&format!(
                "ERR unknown subcommand '{}'. Try FUNCTION HELP.",
                String::from_utf8_lossy(shown)
            ));
            return After::Continue;
        }
    };
    if !arity_ok(arity) {
        reply.error(&format!(
            "ERR wrong number of arguments for 'function|{}' command",
            String::from_utf8_lossy(&subcommand)
        ));
        return After::Continue;
    }
    match subcommand.as_slice() {
        b"load" => function_load(functions, args, reply),
        b"list" => function_list(functions, args, reply),
        b"delete" => function_delete(functions, args.get(2), reply),
        b"flush" => function_flush(functions, args, reply),
        b"dump" => function_dump(functions, reply),
        b"restore" => function_restore(functions, args, reply),
        b"kill" => scripting::kill(&state.scripts, Killer::Function, reply),
        b"stats" => function_stats(&state.scripts, reply),
        _ => function_help(reply),
    }
    After::Continue
}

/// Redis's reply to a subcommand given the wrong arguments (`addReplySubcommandSyntaxError`).
fn syntax_error(args: &Args) -> String {
    let shown = &args.get(1)[..args.get(1).len().min(128)];
    format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
        String::from_utf8_lossy(shown)
    )
}

/// FUNCTION LOAD [REPLACE] code
fn function_load(functions: &Functions, args: &Args, reply: &mut Reply<'_>) {
    let mut replace = false;
    for position in 2..args.len() - 1 {
        let option = args.get(position);
        if !option.eq_ignore_ascii_case(b"replace") {
            return reply.error(&format!(
                "ERR Unknown option given: {}",
                String::from_utf8_lossy(option)
            ));
        }
        replace = true;
    }
    let code = args.get(args.len() - 1);
    let loaded = functions.with_engine(|engine, catalog| {
        create_library(engine, catalog, code, replace).map_err(|text| format!("ERR {text}"))
    });
    match loaded {
        Ok(name) => reply.bulk(name.as_bytes()),
        Err(message) => reply.error(&message),
    }
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]
fn function_list(functions: &Functions, args: &Args, reply: &mut Reply<'_>) {
    let (mut with_code, mut pattern) = (false, None);
    let mut position = 2;
    while position < args.len() {
        let argument = args.get(position);
        if !with_code && argument.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if pattern.is_none() && argument.eq_ignore_ascii_case(b"libraryname") {
            if position + 1 >= args.len() {
                return reply.error("ERR library name argument was not given");
            }
            position += 1;
            // Redis matches the pattern without case (`stringmatchlen(..., nocase)`); names are
            // letters, digits and `_`, so both sides in lower case match as it does.
            pattern = Some(glob::Glob::new(&args.get(position).to_ascii_lowercase()));
        } else {
            return reply.error(&format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(argument)
            ));
        }
        position += 1;
    }
    let catalog = functions.catalog.lock();
    let listed: Vec<(&String, &Library)> = catalog
        .libraries
        .iter()
        .filter(|(name, _)| {
            pattern
                .as_ref()
                .is_none_or(|p| p.matches(name.to_ascii_lowercase().as_bytes()))
        })
        .collect();
    reply.array(listed.len());
    for (name, library) in listed {
        write_library(reply, name, library, with_code);
    }
}

fn write_library(reply: &mut Reply<'_>, name: &str, library: &Library, with_code: bool) {
    reply.map(if with_code { 4 } else { 3 });
    reply.bulk(b"library_name");
    reply.bulk(name.as_bytes());
    reply.bulk(b"engine");
    reply.bulk(ENGINE_NAME.as_bytes());
    reply.bulk(b"functions");
    reply.array(library.functions.len());
    for function in &library.functions {
        reply.map(3);
        reply.bulk(b"name");
        reply.bulk(function.name.as_bytes());
        reply.bulk(b"description");
        match &function.description {
            Some(text) => reply.bulk(text),
            None => reply.null(),
        }
        reply.bulk(b"flags");
        let flags = flag_names(function);
        reply.set(flags.len());
        flags.iter().for_each(|flag| reply.simple(flag));
    }
    if with_code {
        reply.bulk(b"library_code");
        reply.bulk(&library.code);
    }
}

/// A function's flags, in Redis's order.
fn flag_names(function: &RegisteredFunction) -> Vec<&'static str> {
    let flags = function.flags;
    [
        (flags.no_writes, "no-writes"),
        (flags.allow_oom, "allow-oom"),
        (flags.allow_stale, "allow-stale"),
        (flags.no_cluster, "no-cluster"),
        (flags.allow_cross_slot_keys, "allow-cross-slot-keys"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect()
}

/// FUNCTION DELETE library
fn function_delete(functions: &Functions, name: &[u8], reply: &mut Reply<'_>) {
    let name = String::from_utf8_lossy(name);
    match functions.catalog.lock().remove(&name) {
        Some(_) => reply.ok(),
        None => reply.error("ERR Library not found"),
    }
}

/// FUNCTION FLUSH [ASYNC | SYNC]: the callbacks go with the Lua state's next collection.
fn function_flush(functions: &Functions, args: &Args, reply: &mut Reply<'_>) {
    if args.len() > 3 {
        return reply.error(&syntax_error(args));
    }
    if args.len() == 3
        && !args.get(2).eq_ignore_ascii_case(b"sync")
        && !args.get(2).eq_ignore_ascii_case(b"async")
    {
        return reply.error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
    }
    *functions.catalog.lock() = Catalog::default();
    reply.ok();
}

/// FUNCTION DUMP: every library's code in Redis's function dump format.
fn function_dump(functions: &Functions, reply: &mut Reply<'_>) {
    let catalog = functions.catalog.lock();
    let payload = rdb::encode_functions(catalog.libraries.values().map(|l| l.code.as_slice()));
    reply.bulk(&payload);
}

/// Every library's code, as FUNCTION DUMP and an RDB file carry them.
pub(super) fn library_codes(functions: &Functions) -> Vec<Vec<u8>> {
    let catalog = functions.catalog.lock();
    catalog.libraries.values().map(|l| l.code.clone()).collect()
}

/// Loads the libraries `codes` (an RDB file's), replacing libraries of the same name, as
/// FUNCTION RESTORE ... REPLACE; nothing is loaded when one fails.
///
/// # Errors
/// The reason a library was refused.
pub(super) fn restore_libraries(functions: &Functions, codes: &[Vec<u8>]) -> Result<(), String> {
    functions.with_engine(|engine, catalog| {
        let mut staged = Catalog::default();
        for code in codes {
            create_library(engine, &mut staged, code, false)?;
        }
        join(catalog, staged, true)
    })
}

/// FUNCTION RESTORE payload [FLUSH | APPEND | REPLACE]
fn function_restore(functions: &Functions, args: &Args, reply: &mut Reply<'_>) {
    if args.len() > 4 {
        return reply.error(&syntax_error(args));
    }
    let policy = match args.len() {
        3 => RestorePolicy::Append,
        _ => match args.get(3).to_ascii_lowercase().as_slice() {
            b"append" => RestorePolicy::Append,
            b"replace" => RestorePolicy::Replace,
            b"flush" => RestorePolicy::Flush,
            _ => {
                return reply.error(
                    "ERR Wrong restore policy given, value should be either FLUSH, APPEND or \
                     REPLACE.",
                );
            }
        },
    };
    let codes = match rdb::decode_functions(args.get(2)) {
        Ok(codes) => codes,
        Err(error) => return reply.error(error.text()),
    };
    let restored = functions.with_engine(|engine, catalog| {
        let mut staged = Catalog::default();
        for code in &codes {
            create_library(engine, &mut staged, code, false).map_err(|t| format!("ERR {t}"))?;
        }
        match policy {
            RestorePolicy::Flush => {
                *catalog = staged;
                Ok(())
            }
            RestorePolicy::Append | RestorePolicy::Replace => {
                join(catalog, staged, policy == RestorePolicy::Replace)
                    .map_err(|t| format!("ERR {t}"))
            }
        }
    });
    match restored {
        Ok(()) => reply.ok(),
        Err(message) => reply.error(&message),
    }
}

/// FUNCTION STATS: the function running now and the engine's counts.
fn function_stats(scripts: &scripting::Scripts, reply: &mut Reply<'_>) {
    let running = scripts.running();
    if let Some(running) = &running
        && let RunKind::Eval = running.kind
    {
        return reply.error(scripting::BUSY);
    }
    reply.map(2);
    reply.bulk(b"running_script");
    match running.as_deref() {
        Some(scripting::Running {
            started,
            kind: RunKind::Function { name, command },
            ..
        }) => {
            reply.map(3);
            reply.bulk(b"name");
            reply.bulk(name.as_bytes());
            reply.bulk(b"command");
            reply.array(command.len());
            command.iter().for_each(|part| reply.bulk(part));
            reply.bulk(b"duration_ms");
            reply.integer(i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX));
        }
        _ => reply.null(),
    }
    let catalog = scripts.functions.catalog.lock();
    reply.bulk(b"engines");
    reply.map(1);
    reply.bulk(ENGINE_NAME.as_bytes());
    reply.map(2);
    reply.bulk(b"libraries_count");
    reply.integer(i64::try_from(catalog.libraries.len()).unwrap_or(i64::MAX));
    reply.bulk(b"functions_count");
    reply.integer(i64::try_from(catalog.function_count()).unwrap_or(i64::MAX));
}

fn function_help(reply: &mut Reply<'_>) {
    const LINES: &[&str] = &[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME \
         argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored \
         using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a \
         restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, \
         abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, \
         replace the old",
        "      libraries with the new libraries (notice that even on this option there is a \
         chance of failure",
        "      in case of functions name collision with another library).",
        "HELP",
        "    Prints this help.",
    ];
    reply.array(LINES.len());
    for text in LINES {
        reply.simple(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_metadata_parses_as_redis_reads_it() {
        let parsed = parse_metadata(b"#!lua name=mylib\nreturn 1");
        assert_eq!(
            parsed,
            Ok(Metadata {
                engine: "lua".to_owned(),
                name: "mylib".to_owned(),
                code_offset: 16,
            })
        );
        let error = |code: &[u8]| parse_metadata(code).unwrap_err();
        assert_eq!(error(b"return 1"), "Missing library metadata");
        assert_eq!(error(b"#!lua name=x"), "Invalid library metadata");
        assert_eq!(error(b"#!lua\n"), "Library name was not given");
        assert_eq!(
            error(b"#!lua name=a foo=bar\n"),
            "Invalid metadata value given: foo=bar"
        );
        assert_eq!(
            error(b"#!lua name=a NAME=b\n"),
            "Invalid metadata value, name argument was given multiple times"
        );
        // As `sdssplitargs` splits the line: quotes around the name, an empty engine name.
        let quoted = parse_metadata(b"#!lua name=\"foo\"\nreturn 1").unwrap();
        assert_eq!(
            (quoted.engine.as_str(), quoted.name.as_str()),
            ("lua", "foo")
        );
        let no_engine = parse_metadata(b"#! name=test\nreturn 1").unwrap();
        assert_eq!(
            (no_engine.engine.as_str(), no_engine.name.as_str()),
            ("", "test")
        );
        assert_eq!(error(b"#!lua name=\"foo\n"), "Invalid library metadata");
        assert!(is_valid_name("lib_1"));
        assert!(!is_valid_name("lib-1"));
        assert!(!is_valid_name(""));
    }

    /// A library loads its functions, a second library may not take a function name, and a
    /// restore that collides leaves the catalog as it was.
    #[test]
    fn libraries_load_replace_and_join_without_collisions() {
        let mut engine = RedisScripting::new().expect("engine");
        let mut catalog = Catalog::default();
        let code = b"#!lua name=a\nredis.register_function('f', function() return 1 end)";
        assert_eq!(
            create_library(&mut engine, &mut catalog, code, false),
            Ok("a".into())
        );
        assert_eq!(
            create_library(&mut engine, &mut catalog, code, false),
            Err("Library 'a' already exists".to_owned())
        );
        assert_eq!(
            create_library(&mut engine, &mut catalog, code, true),
            Ok("a".into())
        );
        let other = b"#!lua name=b\nredis.register_function('f', function() return 2 end)";
        assert_eq!(
            create_library(&mut engine, &mut catalog, other, false),
            Err("Function f already exists".to_owned())
        );
        let mut restored = Catalog::default();
        create_library(&mut engine, &mut restored, other, false).expect("loads alone");
        assert_eq!(
            join(&mut catalog, restored, true),
            Err("Function f already exists".to_owned())
        );
        assert_eq!(catalog.libraries.len(), 1);
        assert!(catalog.function(b"f").is_some());
        let endless = b"#!lua name=c\nwhile true do end";
        assert_eq!(
            create_library(&mut engine, &mut catalog, endless, false),
            Err("Error registering functions: ERR FUNCTION LOAD timeout".to_owned())
        );
    }
}

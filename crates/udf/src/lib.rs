//! Osprey's Lua runtime for Aerospike-compatible user-defined functions.
//!
//! The crate knows nothing of Osprey's engine: the server registers modules
//! in a [`Modules`] store, gives each worker thread a [`UdfRuntime`], and
//! runs record UDFs through [`UdfRuntime::apply`] against its own
//! implementation of [`UdfRecord`], and stream UDFs (aggregations) through
//! [`UdfRuntime::aggregate`] over records it pulls from the host.
//!
//! # Design
//!
//! * **Modules.** [`Modules::put`] validates a file name as Aerospike does,
//!   compiles the source and runs its top level in a throw-away sandboxed
//!   state; failures come back as [`UdfError::Compile`], whose
//!   [`UdfError::info_response`] is Aerospike's `udf-put` answer. The store
//!   keeps a generation counter bumped on each change.
//! * **States.** Like Aerospike's per-file state cache, a runtime keeps one
//!   Lua 5.4 state per module. The module is loaded with `require`, so its
//!   global functions are the callable UDFs and it may `require` other
//!   registered modules. A state whose module (or a module it required)
//!   changed is dropped and rebuilt on next use.
//! * **Sandbox.** Only `string`, `math`, `table`, `utf8`, base (without
//!   `dofile`/`loadfile`, `load` text-only) and `os.time` are there; no
//!   `io`, `package`, `debug` library or `coroutine`. `require` finds only
//!   registered modules. Aerospike's Lua API is provided: `record`,
//!   `aerospike`, `list`, `map`, `bytes`, `geojson`, logging globals
//!   (`trace`/`debug`/`info`/`warn`, to `tracing`), and the `as.lua` helpers.
//! * **Streams.** A stream function gets a `stream` on which it composes
//!   `filter`, `map`, `aggregate`, `reduce` and `groupby`; the runtime runs
//!   the operations up to and including the first `reduce` (the server's
//!   share in Aerospike) over read-only records, and emits each value.
//! * **Limits.** Each call gets a deadline checked by an instruction-count
//!   hook and a memory cap (Lua's allocator limit plus a budget for the Rust
//!   heap behind lists, maps and bytes). An aborted call cannot be swallowed
//!   by `pcall`; it ends in [`UdfError::Timeout`] or [`UdfError::Memory`]
//!   and the state stays usable.
//!
//! # Invariants
//!
//! * The record is reachable from Lua only during its call (a scoped
//!   userdata); a handle kept in a global errors afterwards.
//! * Containers are shared (Aerospike's reference semantics) but no code
//!   holds two container locks at once, and conversions bound nesting, so
//!   self-containing lists neither deadlock nor overflow the stack.
//! * Values convert as Aerospike's `mod_lua_val.c`: Lua tables and functions
//!   are not values (Nil as a result, refused as a bin value).

mod error;
mod guard;
mod item;
mod lualib;
mod modules;
mod record;
pub mod redis;
mod runtime;
mod sandbox;
mod stream;
mod value;

pub use error::UdfError;
pub use modules::{DEFAULT_USER_PATH, MAX_CONTENT_LEN, MAX_NAME_LEN, Module, ModuleInfo, Modules};
pub use record::UdfRecord;
pub use runtime::{Limits, RuntimeConfig, UdfRuntime};
pub use stream::StreamInput;
pub use value::Value;

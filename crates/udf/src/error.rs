//! Errors of module registration and UDF execution.

use base64::Engine as _;

/// Lua's status for a runtime error (`LUA_ERRRUN`).
const LUA_ERRRUN: u8 = 2;
/// Lua's status for a memory error (`LUA_ERRMEM`).
const LUA_ERRMEM: u8 = 4;
/// Aerospike's status when no Lua state could be had for the module.
const STATE_UNAVAILABLE: u8 = 1;

/// What can go wrong registering a module or running a UDF.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UdfError {
    /// The module name is not a valid UDF file name (Aerospike accepts
    /// `[A-Za-z0-9._$-]`, no leading dot, no `..`, an extension, < 128 bytes).
    #[error("invalid UDF file name: {name:?}")]
    InvalidName {
        /// The refused name.
        name: String,
    },
    /// The module source is larger than Aerospike's 1 MiB limit.
    #[error("UDF content too large: {size} bytes")]
    TooLarge {
        /// The source size in bytes.
        size: usize,
    },
    /// The module failed to compile or to run its top level.
    #[error("compile error: [{file}:{line}] {message}")]
    Compile {
        /// The file Lua blamed (usually the module's own name).
        file: String,
        /// The line Lua blamed, 0 when unknown.
        line: u32,
        /// Lua's message, without the position prefix.
        message: String,
    },
    /// No module of that name is registered.
    #[error("module not found: {module}")]
    ModuleNotFound {
        /// The requested module.
        module: String,
    },
    /// The Lua code raised an error (or the function does not exist).
    #[error("{message}")]
    Lua {
        /// The message Aerospike puts in the `FAILURE` bin, e.g.
        /// `/opt/aerospike/usr/udf/lua/mymod.lua:12: boom`.
        message: String,
    },
    /// The call ran past its time limit.
    #[error("{message}")]
    Timeout {
        /// The message, `<file>:<line>: UDF Execution Timeout` as Aerospike.
        message: String,
    },
    /// The call went past its memory limit.
    #[error("{message}")]
    Memory {
        /// The message (Lua's `not enough memory`).
        message: String,
    },
    /// The Lua state itself could not be set up (a bug or resource failure).
    #[error("UDF runtime error: {message}")]
    Runtime {
        /// What failed.
        message: String,
    },
}

impl UdfError {
    /// The text for the `FAILURE` bin of a result-code-100
    /// (`UDF_BAD_RESPONSE`) answer.
    pub fn failure_message(&self) -> String {
        match self {
            UdfError::Lua { message }
            | UdfError::Timeout { message }
            | UdfError::Memory { message } => message.clone(),
            other => other.to_string(),
        }
    }

    /// The text for the `FAILURE` bin that ends a failed stream UDF, as
    /// Aerospike's server words it: `UDF: Execution Error <rc>`, then
    /// ` : <Lua message>` when Lua raised one. `rc` is Lua's status: 2 for a
    /// runtime error (a timeout included), 4 for memory; 1 when the module
    /// could not be loaded, which carries no message.
    pub fn stream_failure_message(&self) -> String {
        match self {
            UdfError::Lua { message } | UdfError::Timeout { message } => {
                format!("UDF: Execution Error {LUA_ERRRUN} : {message}")
            }
            UdfError::Memory { message } => {
                format!("UDF: Execution Error {LUA_ERRMEM} : {message}")
            }
            _ => format!("UDF: Execution Error {STATE_UNAVAILABLE}"),
        }
    }

    /// The answer to an info `udf-put` command that failed with this error,
    /// in Aerospike's format: `error=compile_error;file=F;line=N;message=B64`
    /// for compile errors (the message is base-64 encoded, as the server
    /// does), `error=invalid_filename` and `error=invalid_udf_content_len,>1M`
    /// for the others.
    pub fn info_response(&self) -> String {
        match self {
            UdfError::Compile {
                file,
                line,
                message,
            } => {
                let b64 = base64::engine::general_purpose::STANDARD.encode(message);
                format!("error=compile_error;file={file};line={line};message={b64}")
            }
            UdfError::InvalidName { .. } => "error=invalid_filename".to_owned(),
            UdfError::TooLarge { .. } => "error=invalid_udf_content_len,>1M".to_owned(),
            _ => "error=unknown_error".to_owned(),
        }
    }
}

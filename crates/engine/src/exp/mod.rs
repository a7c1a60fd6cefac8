//! Aerospike expressions: the filter expression of a command (FILTER_EXP field 43) and the
//! expression of an EXP_READ / EXP_MODIFY op.
//!
//! An expression arrives as a msgpack tree (see the protocol reference, "Filter
//! expressions"): a node is an array `[op_code, args...]`, a scalar is a literal. It is decoded
//! with [`crate::cdt::value::decode`] and compiled (`parse`) into a tree of typed nodes, then
//! evaluated on a record (`eval`); list, map, bit and HLL reads go through the CDT, bits and
//! HLL modules (`call`).
//!
//! Invariants:
//! - Parsing never panics and never allocates more than the input's bytes justify: the
//!   decoder checks every declared count against the bytes left and bounds nesting at
//!   `cdt::value::DEPTH_MAX`, and compiling walks only what was decoded. Evaluation recurses
//!   along the same tree, so its depth is bounded too.
//! - Every node has a static type, checked when parsing as Aerospike checks it (`exp.c`
//!   `build_*`): comparing an integer with a string, adding a float to an integer, a
//!   non-boolean under AND, and so on are PARAMETER at parse time, never evaluated.
//! - Evaluation is three-valued: `None` is Aerospike's UNKNOWN (a missing bin, a bin of
//!   another type than the read declares, integer division by zero, a failed CDT read). AND is
//!   false when any argument is false even if another is unknown; OR is true when any is true;
//!   otherwise an unknown argument makes the result unknown.
//! - A filter passes a record only when it evaluates to true: false and unknown filter it out
//!   (`exp.c` `match_internal` turns UNKNOWN into false once the record is read).

mod call;
mod eval;
mod parse;
#[cfg(test)]
mod tests;

use model::ResultCode;

use crate::cdt::value::Value;

use parse::Type;

/// What an expression may read of a record.
pub trait RecordView {
    /// The bin `name`: its particle type and bytes; `None` when the record has no such bin.
    fn bin(&self, name: &[u8]) -> Option<(u8, &[u8])>;
    /// The record's metadata.
    fn meta(&self) -> RecordFacts<'_>;
}

/// A record's metadata, as expressions see it.
#[derive(Clone, Copy, Debug)]
pub struct RecordFacts<'a> {
    /// Milliseconds since the Unix epoch of the last write.
    pub last_update_ms: u64,
    /// Seconds since the Unix epoch when the record expires; 0: never.
    pub void_time_epoch_s: u64,
    /// Now, in milliseconds since the Unix epoch.
    pub now_ms: u64,
    /// The record's set name (empty: none).
    pub set_name: &'a [u8],
    /// The record's digest.
    pub digest: &'a [u8; 20],
    /// The stored user key (particle type, bytes), when the record keeps one.
    pub key: Option<(u8, &'a [u8])>,
    /// The record's stored size in bytes.
    pub size_bytes: u64,
}

/// A parsed expression.
#[derive(Debug)]
pub struct Expression {
    root: parse::Node,
    result_type: Type,
    var_count: usize,
    reads_the_clock: bool,
}

impl Expression {
    /// Parses a packed expression (the FILTER_EXP field, or an expression op's).
    ///
    /// # Errors
    /// PARAMETER for a malformed or ill-typed expression; UNSUPPORTED_FEATURE for an op
    /// Osprey does not evaluate (the 8.1 map key/value, result-remove and builtin ops).
    pub fn parse(packed: &[u8]) -> Result<Expression, ResultCode> {
        let compiled = parse::compile(packed)?;
        Ok(Expression {
            root: compiled.root,
            result_type: compiled.ty,
            var_count: compiled.var_count,
            reads_the_clock: compiled.reads_the_clock,
        })
    }

    /// Parses a filter expression: as [`Expression::parse`], and the expression must be
    /// boolean (Aerospike refuses any other filter with PARAMETER, `exp.c`
    /// `check_filter_exp`).
    ///
    /// # Errors
    /// As [`Expression::parse`]; PARAMETER for a filter that is not boolean.
    pub fn parse_filter(packed: &[u8]) -> Result<Expression, ResultCode> {
        let expression = Expression::parse(packed)?;
        match expression.result_type {
            Type::Bool => Ok(expression),
            _ => Err(ResultCode::Parameter),
        }
    }

    /// Whether its value can change with no write: it reads the record's TTL, void time or
    /// time since its last update.
    pub(crate) fn reads_the_clock(&self) -> bool {
        self.reads_the_clock
    }

    /// The particle type of every value it yields (INTEGER, STRING, LIST, MAP, ...); `None`
    /// for nil.
    pub(crate) fn result_particle_type(&self) -> Option<u8> {
        let particle = match self.result_type {
            Type::Nil | Type::Any => return None,
            Type::Bool => model::ParticleType::Bool,
            Type::Int => model::ParticleType::Integer,
            Type::Str => model::ParticleType::String,
            Type::List => model::ParticleType::List,
            Type::Map => model::ParticleType::Map,
            Type::Blob => model::ParticleType::Blob,
            Type::Float => model::ParticleType::Float,
            Type::Geo => model::ParticleType::GeoJson,
            Type::Hll => model::ParticleType::Hll,
        };
        Some(particle as u8)
    }

    /// Evaluates the expression on `record`: `Ok(None)` when the result is unknown (a bin
    /// the expression reads is missing, or of another type).
    ///
    /// # Errors
    /// UNSUPPORTED_FEATURE when a list, map, bit or HLL call reaches a module that cannot run
    /// the op yet; every other failure is an unknown result, as in Aerospike.
    pub(crate) fn eval(&self, record: &dyn RecordView) -> Result<Option<Value>, ResultCode> {
        eval::run(&self.root, self.var_count, record)
    }

    /// Whether `record` passes the expression as a filter (true; false or unknown filter it
    /// out).
    ///
    /// # Errors
    /// As [`Expression::eval`].
    pub fn matches(&self, record: &dyn RecordView) -> Result<bool, ResultCode> {
        Ok(matches!(self.eval(record)?, Some(Value::Bool(true))))
    }
}

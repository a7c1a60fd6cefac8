//! Module calls (`[127, type, system, payload, bin]`): a list or map op, a bit op or an HLL op
//! run on a value inside an expression (`exp.c` `eval_call`).
//!
//! The payload is the op's ordinary msgpack (`[code, args...]`, or `[0xff, ctx, [code,
//! args...]]`), except that an argument that is an array is an expression: it is evaluated
//! first and its value takes its place. The bin argument is evaluated last; a read returns
//! the op's result, a modify (system flag 0x40) runs on a copy and returns the modified copy.
//!
//! Invariants:
//! - A call never changes the record: it works on values it owns.
//! - Any failure of the op (a bad argument, a type the op does not take, a result of another
//!   type than the call declares) makes the call unknown, as in Aerospike; only
//!   UNSUPPORTED_FEATURE, an op a module cannot run yet, is an error.

use model::ResultCode;

use super::eval::{Eval, Outcome};
use super::parse::{CallArg, CallNode, KIND_HLL, System, Type};
use crate::cdt::value::{self, KIND_BLOB, List, Value};
use crate::cdt::{self, Call};

/// Evaluates a module call.
///
/// # Errors
/// UNSUPPORTED_FEATURE when the module cannot run the op yet.
pub(super) fn eval(eval: &mut Eval<'_>, call: &CallNode) -> Outcome {
    let Some(payload) = payload(eval, call)? else {
        return Ok(None);
    };
    let Some(bin) = eval.node(&call.bin)? else {
        return Ok(None);
    };
    let outcome = match call.system {
        System::Cdt => run_cdt(call.modify, &payload, bin),
        System::Bits | System::Hll => run_bytes(call, &payload, bin),
    };
    let result = match outcome {
        Ok(result) => result,
        Err(ResultCode::UnsupportedFeature) => return Err(ResultCode::UnsupportedFeature),
        Err(_) => return Ok(None),
    };
    Ok(typed(result, call.result))
}

/// The op's payload with every expression argument evaluated: `None` when one is unknown.
fn payload(eval: &mut Eval<'_>, call: &CallNode) -> Result<Option<Vec<u8>>, ResultCode> {
    let mut items = Vec::with_capacity(call.args.len() + 1);
    items.push(Value::Int(call.code));
    for arg in &call.args {
        match arg {
            CallArg::Literal(literal) => items.push(literal.clone()),
            CallArg::Exp(node) => match eval.node(node)? {
                Some(value) => items.push(value),
                None => return Ok(None),
            },
        }
    }
    let op = list(items);
    let whole = match &call.context {
        Some(context) => list(vec![Value::Int(0xff), context.clone(), op]),
        None => op,
    };
    Ok(Some(value::pack(&whole)))
}

/// An unordered list of `items`.
fn list(items: Vec<Value>) -> Value {
    Value::List(List {
        ordered: false,
        items,
    })
}

/// Runs a list or map op on the bin argument (nil: no bin).
fn run_cdt(modify: bool, payload: &[u8], bin: Value) -> Result<Value, ResultCode> {
    let call = Call::parse(payload)?;
    let mut target = match bin {
        Value::Nil => None,
        collection @ (Value::List(_) | Value::Map(_)) => Some(collection),
        _ => return Err(ResultCode::IncompatibleType),
    };
    if !modify {
        return cdt::read(&call, target.as_ref());
    }
    cdt::modify(&call, &mut target)?;
    Ok(target.unwrap_or(Value::Nil))
}

/// Runs a bit or HLL op on the bin argument (nil: no bin).
fn run_bytes(call: &CallNode, payload: &[u8], bin: Value) -> Result<Value, ResultCode> {
    let kind = match call.system {
        System::Hll => KIND_HLL,
        _ => KIND_BLOB,
    };
    let mut particle = match bin {
        Value::Nil => None,
        Value::Bytes { kind: held, data } if held == kind => Some((kind, data)),
        _ => return Err(ResultCode::IncompatibleType),
    };
    if !call.modify {
        let bin = particle
            .as_ref()
            .map(|(kind, data)| (*kind, data.as_slice()));
        return match call.system {
            System::Hll => crate::hll::read(payload, bin),
            _ => crate::bits::read(payload, bin),
        };
    }
    match call.system {
        System::Hll => crate::hll::modify(payload, &mut particle)?,
        _ => crate::bits::modify(payload, &mut particle)?,
    };
    match particle {
        Some((kind, data)) => value::from_particle(kind, &data),
        None => Ok(Value::Nil),
    }
}

/// The call's result when it is of the declared type, else unknown.
fn typed(result: Value, declared: Type) -> Option<Value> {
    let particle = match &result {
        Value::Nil => 0,
        Value::Bool(_) => 17,
        Value::Int(_) => 1,
        Value::Float(_) => 2,
        Value::Bytes { kind, .. } => *kind,
        Value::List(_) => 20,
        Value::Map(_) => 19,
        Value::Ext { .. } | Value::Wildcard | Value::Infinity => return None,
    };
    (particle == declared.particle()).then_some(result)
}

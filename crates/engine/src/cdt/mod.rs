//! Collection data type (CDT) operations: list and map ops on LIST and MAP bins, reached at
//! the top of a bin or through a context into nested lists and maps.
//!
//! An op's payload (CDT_READ / CDT_MODIFY, see the protocol reference "CDT, bit and HLL op
//! payloads") is a msgpack array `[code, args...]`, or `[0xff, [ctx...], [code, args...]]`
//! with a context. The bin's value is decoded into a [`value::Value`] tree, the op runs on
//! the element the context reaches, and a modified value is packed back whole.
//!
//! Invariants:
//! - A failed op leaves the bin as it was: ops run on a decoded copy, and the caller stores
//!   the copy only on success.
//! - Nothing that may only select (a wildcard, infinity) is ever stored.
//! - A stored LIST bin holds a list, a MAP bin a map; an op of the other family, or on a bin
//!   of another type, is INCOMPATIBLE_TYPE (Aerospike's BIN_TYPE_ERROR, 12).

pub(crate) mod context;
pub(crate) mod list;
pub(crate) mod map;
pub(crate) mod result;
pub(crate) mod value;

use model::ResultCode;

use value::Value;

/// The code that wraps an op in a context.
const CONTEXT_EVAL: i64 = 0xff;

/// One decoded CDT op: the context steps (type, value) and the op with its arguments.
#[derive(Debug)]
pub(crate) struct Call {
    pub(crate) context: Vec<(i64, Value)>,
    pub(crate) code: u8,
    pub(crate) args: Vec<Value>,
}

/// The family an op code belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    List,
    Map,
}

impl Call {
    /// Decodes an op payload.
    ///
    /// # Errors
    /// PARAMETER for a payload that is not a well-formed op.
    pub(crate) fn parse(payload: &[u8]) -> Result<Call, ResultCode> {
        let Value::List(top) = value::decode(payload)? else {
            return Err(ResultCode::Parameter);
        };
        let mut items = top.items.into_iter();
        let first = items.next().and_then(|v| v.as_int());
        let Some(first) = first else {
            return Err(ResultCode::Parameter);
        };
        if first != CONTEXT_EVAL {
            let code = u8::try_from(first).map_err(|_| ResultCode::Parameter)?;
            return Ok(Call {
                context: Vec::new(),
                code,
                args: items.collect(),
            });
        }
        let (Some(Value::List(steps)), Some(Value::List(inner)), None) =
            (items.next(), items.next(), items.next())
        else {
            return Err(ResultCode::Parameter);
        };
        let context = context::parse_steps(steps.items)?;
        let mut inner = inner.items.into_iter();
        let code = inner
            .next()
            .and_then(|v| v.as_int())
            .and_then(|code| u8::try_from(code).ok())
            .ok_or(ResultCode::Parameter)?;
        Ok(Call {
            context,
            code,
            args: inner.collect(),
        })
    }

    fn family(&self) -> Result<Family, ResultCode> {
        if list::is_modify(self.code).is_some() {
            Ok(Family::List)
        } else if map::is_modify(self.code).is_some() {
            Ok(Family::Map)
        } else {
            Err(ResultCode::Parameter)
        }
    }

    /// Whether the op changes its bin.
    ///
    /// # Errors
    /// PARAMETER for an unknown op code.
    pub(crate) fn is_modify(&self) -> Result<bool, ResultCode> {
        let modifies = list::is_modify(self.code).or_else(|| map::is_modify(self.code));
        modifies.ok_or(ResultCode::Parameter)
    }
}

/// Runs a reading op on a bin's value (`None`: no such bin). Returns the op's result.
///
/// # Errors
/// The op's result code: PARAMETER, INCOMPATIBLE_TYPE, ELEMENT_NOT_FOUND, OP_NOT_APPLICABLE.
pub(crate) fn read(call: &Call, bin: Option<&Value>) -> Result<Value, ResultCode> {
    let family = call.family()?;
    let target = match bin {
        Some(top) => context::reach(top, &call.context)?,
        None => None,
    };
    match family {
        Family::List => list::read(call.code, &call.args, target),
        Family::Map => map::read(call.code, &call.args, target),
    }
}

/// Runs a modifying op on a bin's value (`None`: no such bin; the op may create it). Returns
/// the op's result.
///
/// # Errors
/// As [`read`], and ELEMENT_EXISTS for a write its flags forbid.
pub(crate) fn modify(call: &Call, bin: &mut Option<Value>) -> Result<Value, ResultCode> {
    let family = call.family()?;
    let result = if call.context.is_empty() {
        run_modify(family, call, bin)?
    } else {
        let first = &call.context[0];
        let top = bin.get_or_insert_with(|| context::empty(context::is_list_step(first), 0));
        let element = context::reach_mut(top, &call.context, family == Family::List)?;
        let mut slot = Some(std::mem::replace(element, Value::Nil));
        let outcome = run_modify(family, call, &mut slot);
        *element = slot.unwrap_or(Value::Nil);
        outcome?
    };
    // A wildcard or infinity may select elements, never be stored.
    if bin.as_ref().is_some_and(Value::has_special) {
        return Err(ResultCode::Parameter);
    }
    Ok(result)
}

fn run_modify(
    family: Family,
    call: &Call,
    target: &mut Option<Value>,
) -> Result<Value, ResultCode> {
    match family {
        Family::List => list::modify(call.code, &call.args, target),
        Family::Map => map::modify(call.code, &call.args, target),
    }
}

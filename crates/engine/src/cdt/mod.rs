//! Collection data type (CDT) operations: list and map ops on LIST and MAP bins, reached at
//! the top of a bin or through a context into nested lists and maps.
//!
//! An op's payload (CDT_READ / CDT_MODIFY, see the protocol reference "CDT, bit and HLL op
//! payloads") is a msgpack array `[code, args...]`, or `[0xff, [ctx...], [code, args...]]`
//! with a context. The bin's value is decoded into a [`value::Value`] tree, the op runs on
//! the element the context reaches, and a modified value is packed back whole; a map put of
//! one key at the top of a bin runs on the packed bytes instead ([`modify_packed`]), with
//! the same result.
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
pub mod value;

use model::{ParticleType, ResultCode};

pub(crate) use map::packed::PackedWrite;
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
        let (element, path) = context::reach_mut(top, &call.context, family == Family::List)?;
        let mut slot = Some(std::mem::replace(element, Value::Nil));
        let outcome = run_modify(family, call, &mut slot);
        *element = slot.unwrap_or(Value::Nil);
        let result = outcome?;
        // An ordered list on the way keeps its order (Aerospike's `cdt_context_unwind`).
        context::settle(top, &path);
        result
    };
    // A wildcard or infinity may select elements, never be stored; one can only come from the
    // op's arguments or context, so the bin is walked for one only when they hold one.
    let may_store_special = call.args.iter().any(Value::has_special)
        || call.context.iter().any(|(_, key)| key.has_special());
    if may_store_special && bin.as_ref().is_some_and(Value::has_special) {
        return Err(ResultCode::Parameter);
    }
    Ok(result)
}

/// Runs a modifying op on a bin's packed value in place of [`modify`] where that is cheaper
/// and gives the same bytes and answer: a map ADD, PUT or REPLACE at the top of a MAP bin
/// ([`map::packed`]). `None`: the op or the bin is not one it takes; run [`modify`].
///
/// # Errors
/// As [`modify`].
pub(crate) fn modify_packed(
    call: &Call,
    particle_type: u8,
    bytes: &[u8],
) -> Option<Result<PackedWrite, ResultCode>> {
    if !call.context.is_empty() || particle_type != ParticleType::Map as u8 {
        return None;
    }
    // A wildcard or infinity in the arguments makes `modify` check the whole bin for one.
    if call.args.iter().any(Value::has_special) {
        return None;
    }
    map::packed::put_one(call.code, &call.args, bytes)
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

/// What the CDT's randomized tests share.
#[cfg(test)]
pub(crate) mod test_support {
    /// The seed of randomized test `test`: `OSPREY_CDT_SEED` when set (to replay a failure),
    /// else from the clock. Printed, so that a failure shows how to replay it.
    pub(crate) fn seed(test: &str) -> u64 {
        let seed = std::env::var("OSPREY_CDT_SEED")
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or_else(|| {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                now.map_or(1, |elapsed| elapsed.as_nanos() as u64) | 1
            });
        println!("{test} seed {seed} (replay: OSPREY_CDT_SEED={seed})");
        seed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use value::List;

    fn ints(numbers: &[i64]) -> Value {
        Value::List(List {
            ordered: false,
            items: numbers.iter().map(|&n| Value::Int(n)).collect(),
        })
    }

    fn items_of(value: &Value) -> &[Value] {
        match value {
            Value::List(list) => &list.items,
            other => panic!("not a list: {other:?}"),
        }
    }

    #[test]
    fn an_ordered_list_keeps_its_order_when_an_op_changes_an_element_through_a_context() {
        // Aerospike's `cdt_context_unwind_list` (`particle_list.c`): after an op through a
        // context, each ordered list on the way moves the changed element to its sorted
        // place; a list-index create step on an ordered list adds at the end, so the new
        // element lands in order too. Go: "should support Create List Ops".
        let append_items = Call {
            context: Vec::new(),
            code: 2,
            args: vec![
                Value::List(List {
                    ordered: false,
                    items: vec![ints(&[7, 9, 5]), ints(&[1, 2, 3]), ints(&[6, 5, 4, 1])],
                }),
                Value::Int(1),
                Value::Int(0),
            ],
        };
        let mut bin = None;
        assert_eq!(modify(&append_items, &mut bin).unwrap().as_int(), Some(3));
        // APPEND 2 (ordered) into a new ordered list created at index 3.
        let append = Call {
            context: vec![(0x10 | 0xc0, Value::Int(3))],
            code: 1,
            args: vec![Value::Int(2), Value::Int(1), Value::Int(0)],
        };
        assert_eq!(modify(&append, &mut bin).unwrap().as_int(), Some(1));
        let top = bin.as_ref().unwrap();
        let expected = [
            ints(&[1, 2, 3]),
            ints(&[2]),
            ints(&[6, 5, 4, 1]),
            ints(&[7, 9, 5]),
        ];
        assert_eq!(items_of(top).len(), 4);
        for (got, want) in items_of(top).iter().zip(&expected) {
            assert!(value::equal(got, want), "{top:?}");
        }
        // Changing an element moves it: [2] becomes [2, 8], still before [6, ...]; [1, 2, 3]
        // becomes [1, 2, 3, 9, ...] (no move); prepending 0 to [7, 9, 5] moves it first.
        let insert = Call {
            context: vec![(0x10, Value::Int(-1))],
            code: 3,
            args: vec![Value::Int(0), Value::Int(0)],
        };
        modify(&insert, &mut bin).unwrap();
        let first = &items_of(bin.as_ref().unwrap())[0];
        assert!(value::equal(first, &ints(&[0, 7, 9, 5])), "{bin:?}");
        // Two ordered levels settle deepest first: inserting 6 before [1]'s 1 makes it
        // [6, 1], which moves after [5] in its list, which then moves after [[3]].
        let ordered = |items: Vec<Value>| {
            Value::List(List {
                ordered: true,
                items,
            })
        };
        let mut two = Some(ordered(vec![
            ordered(vec![ints(&[1]), ints(&[5])]),
            ordered(vec![ints(&[3])]),
        ]));
        let deep = Call {
            context: vec![(0x10, Value::Int(0)), (0x10, Value::Int(0))],
            code: 3,
            args: vec![Value::Int(0), Value::Int(6)],
        };
        modify(&deep, &mut two).unwrap();
        let want = ordered(vec![
            ordered(vec![ints(&[3])]),
            ordered(vec![ints(&[5]), ints(&[6, 1])]),
        ]);
        assert!(value::equal(two.as_ref().unwrap(), &want), "{two:?}");
        // An unordered list is left as it is.
        let mut plain = Some(Value::List(List {
            ordered: false,
            items: vec![ints(&[5]), ints(&[1])],
        }));
        let bump = Call {
            context: vec![(0x10, Value::Int(0))],
            code: 3,
            args: vec![Value::Int(0), Value::Int(0)],
        };
        modify(&bump, &mut plain).unwrap();
        assert!(value::equal(
            &items_of(plain.as_ref().unwrap())[0],
            &ints(&[0, 5])
        ));
    }
}

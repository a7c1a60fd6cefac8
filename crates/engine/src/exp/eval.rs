//! Evaluating compiled expressions on a record, as Aerospike evaluates them (`exp.c`
//! `eval_*`).
//!
//! Invariants:
//! - `None` is UNKNOWN. An op whose argument is unknown is unknown, except AND (false wins)
//!   and OR (true wins), and COND, which only evaluates the branch it takes.
//! - Integer arithmetic wraps on overflow (two's complement, as the server's C does on its
//!   platforms); integer division or modulo by zero is unknown; float division by zero
//!   follows IEEE 754.
//! - Values keep the types the parser checked: a node typed integer yields `Value::Int` or
//!   unknown, and so on, so a mismatch at run time can only make a result unknown.

use std::cmp::Ordering;

use model::ResultCode;

use super::RecordView;
use super::call;
use super::parse::{Arith, Binary, CmpOp, Logic, Meta, Node, Type, Unary};
use crate::cdt::value::{self, KIND_BLOB, Value};

/// One evaluation: the record and the variables' values.
pub(super) struct Eval<'r> {
    record: &'r dyn RecordView,
    vars: Vec<Option<Value>>,
}

/// The result of evaluating a node: `Ok(None)` when unknown.
pub(super) type Outcome = Result<Option<Value>, ResultCode>;

/// Evaluates `root` on `record`, with `var_count` variable slots.
///
/// # Errors
/// UNSUPPORTED_FEATURE from a module call the module cannot run yet.
pub(super) fn run(root: &Node, var_count: usize, record: &dyn RecordView) -> Outcome {
    let mut eval = Eval {
        record,
        vars: vec![None; var_count],
    };
    eval.node(root)
}

impl Eval<'_> {
    /// Evaluates one node.
    pub(super) fn node(&mut self, node: &Node) -> Outcome {
        match node {
            Node::Unknown => Ok(None),
            Node::Literal(value) => Ok(Some(value.clone())),
            Node::Compare(op, left, right) => self.compare(*op, left, right),
            Node::InList(value, list) => self.in_list(value, list),
            Node::GeoCompare(left, right) => self.geo_compare(left, right),
            Node::Regex(regex, text) => Ok(match self.node(text)? {
                Some(Value::Bytes { data, .. }) => Some(Value::Bool(regex.is_match(&data))),
                _ => None,
            }),
            Node::Logic(op, args) => self.logic(*op, args),
            Node::Not(arg) => Ok(self.boolean(arg)?.map(|b| Value::Bool(!b))),
            Node::Arith(op, args) => self.arith(*op, args),
            Node::Unary(op, arg) => Ok(self.node(arg)?.and_then(|v| unary(*op, v))),
            Node::Binary(op, left, right) => self.binary(*op, left, right),
            Node::DigestModulo(modulo) => Ok(Some(self.digest_modulo(*modulo))),
            Node::Meta(meta) => Ok(Some(self.meta(*meta))),
            Node::Key(ty) => Ok(self.key(*ty)),
            Node::Bin(ty, name) => Ok(self.bin(*ty, name)),
            Node::BinType(name) => Ok(Some(Value::Int(
                self.record
                    .bin(name)
                    .map_or(0, |(particle, _)| i64::from(particle)),
            ))),
            Node::Cond(cases, default) => self.cond(cases, default),
            Node::Var(slot) => Ok(self.vars.get(*slot).cloned().flatten()),
            Node::Let(first, definitions, body) => self.let_(*first, definitions, body),
            Node::Call(node) => call::eval(self, node),
        }
    }

    /// Evaluates a boolean node.
    fn boolean(&mut self, node: &Node) -> Result<Option<bool>, ResultCode> {
        Ok(match self.node(node)? {
            Some(Value::Bool(flag)) => Some(flag),
            _ => None,
        })
    }

    /// EQ .. LE: unknown when either side is; the left side first.
    fn compare(&mut self, op: CmpOp, left: &Node, right: &Node) -> Outcome {
        let Some(left) = self.node(left)? else {
            return Ok(None);
        };
        let Some(right) = self.node(right)? else {
            return Ok(None);
        };
        Ok(compare(op, &left, &right).map(Value::Bool))
    }

    /// GEO compare: whether the left GeoJSON (a bin's stored particle or a literal's text)
    /// matches the right one as a geo index query would; unknown when either side is unknown
    /// or not valid GeoJSON.
    fn geo_compare(&mut self, left: &Node, right: &Node) -> Outcome {
        let Some(left) = self.node(left)? else {
            return Ok(None);
        };
        let Some(right) = self.node(right)? else {
            return Ok(None);
        };
        let geometry = |value: &Value| match value {
            Value::Bytes {
                kind: value::KIND_GEOJSON,
                data,
            } => crate::geo::geometry_of_value(data).ok(),
            _ => None,
        };
        let (Some(left), Some(right)) = (geometry(&left), geometry(&right)) else {
            return Ok(None);
        };
        Ok(Some(Value::Bool(crate::geo::compare(&left, &right))))
    }

    /// IN_LIST: whether the list holds an element equal to the value.
    fn in_list(&mut self, value: &Node, list: &Node) -> Outcome {
        let Some(value) = self.node(value)? else {
            return Ok(None);
        };
        let Some(Value::List(list)) = self.node(list)? else {
            return Ok(None);
        };
        let found = list.items.iter().any(|item| value::equal(&value, item));
        Ok(Some(Value::Bool(found)))
    }

    /// AND, OR, EXCLUSIVE (exactly one true).
    fn logic(&mut self, op: Logic, args: &[Node]) -> Outcome {
        let mut unknown = false;
        let mut trues = 0;
        for arg in args {
            match (op, self.boolean(arg)?) {
                (Logic::And, Some(false)) => return Ok(Some(Value::Bool(false))),
                (Logic::Or, Some(true)) => return Ok(Some(Value::Bool(true))),
                (Logic::Exclusive, None) => return Ok(None),
                (Logic::Exclusive, Some(true)) if trues == 1 => {
                    return Ok(Some(Value::Bool(false)));
                }
                (Logic::Exclusive, Some(true)) => trues += 1,
                (_, None) => unknown = true,
                _ => {}
            }
        }
        Ok(match (op, unknown) {
            (_, true) => None,
            (Logic::And, false) => Some(Value::Bool(true)),
            (Logic::Or, false) => Some(Value::Bool(false)),
            (Logic::Exclusive, false) => Some(Value::Bool(trues == 1)),
        })
    }

    /// The numeric ops over several numbers: evaluated left to right, unknown as soon as one
    /// argument is.
    fn arith(&mut self, op: Arith, args: &[Node]) -> Outcome {
        let mut values = Vec::with_capacity(args.len());
        for arg in args {
            match self.node(arg)? {
                Some(value) => values.push(value),
                None => return Ok(None),
            }
        }
        if let Some(ints) = values.iter().map(Value::as_int).collect::<Option<Vec<_>>>() {
            return Ok(arith_int(op, &ints).map(Value::Int));
        }
        let floats: Option<Vec<f64>> = values.iter().map(as_float).collect();
        Ok(floats.and_then(|floats| arith_float(op, &floats).map(Value::Float)))
    }

    /// The ops of two numbers.
    fn binary(&mut self, op: Binary, left: &Node, right: &Node) -> Outcome {
        let Some(left) = self.node(left)? else {
            return Ok(None);
        };
        let Some(right) = self.node(right)? else {
            return Ok(None);
        };
        Ok(binary(op, &left, &right))
    }

    /// DIGEST_MODULO: the digest's bytes 16..20 as a little-endian unsigned integer, modulo.
    fn digest_modulo(&self, modulo: i64) -> Value {
        let digest = self.record.meta().digest;
        let word = u32::from_le_bytes([digest[16], digest[17], digest[18], digest[19]]);
        Value::Int(i64::from(word) % modulo)
    }

    /// The metadata reads.
    fn meta(&self, meta: Meta) -> Value {
        let facts = self.record.meta();
        let int = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
        match meta {
            // Osprey keeps records in memory: nothing on a device.
            Meta::DeviceSize => Value::Int(0),
            Meta::MemorySize | Meta::RecordSize => int(facts.size_bytes),
            // Nanoseconds since the Unix epoch.
            Meta::LastUpdate => int(facts.last_update_ms.saturating_mul(1_000_000)),
            // Milliseconds.
            Meta::SinceUpdate => int(facts.now_ms.saturating_sub(facts.last_update_ms)),
            Meta::VoidTime => match facts.void_time_epoch_s {
                0 => Value::Int(-1),
                seconds => int(seconds.saturating_mul(1_000_000_000)),
            },
            Meta::Ttl => Value::Int(ttl(facts.void_time_epoch_s, facts.now_ms)),
            Meta::SetName => Value::string(facts.set_name),
            Meta::KeyExists => Value::Bool(facts.key.is_some()),
            Meta::IsTombstone => Value::Bool(false),
        }
    }

    /// KEY: the stored key, when it is of the type asked for.
    fn key(&self, ty: Type) -> Option<Value> {
        let (particle, bytes) = self.record.meta().key?;
        let value = match particle {
            1 => Value::Int(i64::from_be_bytes(bytes.try_into().ok()?)),
            3 => Value::string(bytes),
            4 => Value::Bytes {
                kind: KIND_BLOB,
                data: bytes.to_vec(),
            },
            _ => return None,
        };
        (particle == ty.particle()).then_some(value)
    }

    /// BIN: the bin's value, when the bin holds the type asked for.
    fn bin(&self, ty: Type, name: &[u8]) -> Option<Value> {
        let (particle, bytes) = self.record.bin(name)?;
        if particle != ty.particle() {
            return None;
        }
        value::from_particle(particle, bytes).ok()
    }

    /// COND: the value of the first true condition, else the default; unknown at the first
    /// unknown condition.
    fn cond(&mut self, cases: &[(Node, Node)], default: &Node) -> Outcome {
        for (condition, value) in cases {
            match self.boolean(condition)? {
                Some(true) => return self.node(value),
                Some(false) => {}
                None => return Ok(None),
            }
        }
        self.node(default)
    }

    /// LET: each definition into its slot, in order, then the body.
    fn let_(&mut self, first: usize, definitions: &[Node], body: &Node) -> Outcome {
        for (offset, definition) in definitions.iter().enumerate() {
            let value = self.node(definition)?;
            if let Some(slot) = self.vars.get_mut(first + offset) {
                *slot = value;
            }
        }
        self.node(body)
    }
}

/// TTL in seconds: -1 when the record never expires, else the seconds left, at least 1.
fn ttl(void_time_s: u64, now_ms: u64) -> i64 {
    if void_time_s == 0 {
        return -1;
    }
    let left = void_time_s.saturating_sub(now_ms / 1000).max(1);
    // Aerospike reports the 32-bit TTL as a signed 32-bit number.
    i64::from(left as u32 as i32)
}

/// A float value.
fn as_float(value: &Value) -> Option<f64> {
    match value {
        Value::Float(number) => Some(*number),
        _ => None,
    }
}

/// Compares two known values: `None` when Aerospike cannot (a collection holding an
/// unordered map).
pub(super) fn compare(op: CmpOp, left: &Value, right: &Value) -> Option<bool> {
    let order = match (left, right) {
        (Value::Float(x), Value::Float(y)) => return Some(compare_floats(op, *x, *y)),
        (Value::Bytes { data: x, .. }, Value::Bytes { data: y, .. }) => x.cmp(y),
        _ if has_unordered_map(left) || has_unordered_map(right) => return None,
        _ => value::compare(left, right),
    };
    Some(match op {
        CmpOp::Eq => order == Ordering::Equal,
        CmpOp::Ne => order != Ordering::Equal,
        CmpOp::Gt => order == Ordering::Greater,
        CmpOp::Ge => order != Ordering::Less,
        CmpOp::Lt => order == Ordering::Less,
        CmpOp::Le => order != Ordering::Greater,
    })
}

/// IEEE comparison: NaN is unequal to everything, and neither less nor greater.
fn compare_floats(op: CmpOp, x: f64, y: f64) -> bool {
    match op {
        CmpOp::Eq => x == y,
        CmpOp::Ne => x != y,
        CmpOp::Gt => x > y,
        CmpOp::Ge => x >= y,
        CmpOp::Lt => x < y,
        CmpOp::Le => x <= y,
    }
}

/// Whether a value is or holds a non-empty unordered map (Aerospike will not order one).
fn has_unordered_map(value: &Value) -> bool {
    match value {
        Value::Map(map) => {
            (!map.order.is_key_sorted() && !map.entries.is_empty())
                || map
                    .entries
                    .iter()
                    .any(|(k, v)| has_unordered_map(k) || has_unordered_map(v))
        }
        Value::List(list) => list.items.iter().any(has_unordered_map),
        _ => false,
    }
}

/// The integer ops over several integers (at least one); `None` on division by zero.
fn arith_int(op: Arith, args: &[i64]) -> Option<i64> {
    let (&first, rest) = args.split_first()?;
    Some(match op {
        Arith::Add => rest.iter().fold(first, |a, &b| a.wrapping_add(b)),
        Arith::Sub if rest.is_empty() => first.wrapping_neg(),
        Arith::Sub => rest.iter().fold(first, |a, &b| a.wrapping_sub(b)),
        Arith::Mul => rest.iter().fold(first, |a, &b| a.wrapping_mul(b)),
        Arith::Div => {
            // One argument: its reciprocal. Else the first over the product of the rest.
            let (dividend, divisor) = match rest.is_empty() {
                true => (1, first),
                false => (first, rest.iter().fold(1_i64, |a, &b| a.wrapping_mul(b))),
            };
            if divisor == 0 {
                return None;
            }
            dividend.wrapping_div(divisor)
        }
        Arith::Min => rest.iter().fold(first, |a, &b| a.min(b)),
        Arith::Max => rest.iter().fold(first, |a, &b| a.max(b)),
        Arith::IntAnd => rest.iter().fold(first, |a, &b| a & b),
        Arith::IntOr => rest.iter().fold(first, |a, &b| a | b),
        Arith::IntXor => rest.iter().fold(first, |a, &b| a ^ b),
    })
}

/// The float ops over several floats (at least one).
fn arith_float(op: Arith, args: &[f64]) -> Option<f64> {
    let (&first, rest) = args.split_first()?;
    Some(match op {
        Arith::Add => rest.iter().fold(first, |a, &b| a + b),
        Arith::Sub if rest.is_empty() => 0.0 - first,
        Arith::Sub => rest.iter().fold(first, |a, &b| a - b),
        Arith::Mul => rest.iter().fold(first, |a, &b| a * b),
        Arith::Div if rest.is_empty() => 1.0 / first,
        Arith::Div => first / rest.iter().product::<f64>(),
        // The first argument stays unless another is strictly smaller (larger).
        Arith::Min => rest.iter().fold(first, |a, &b| if a > b { b } else { a }),
        Arith::Max => rest.iter().fold(first, |a, &b| if a < b { b } else { a }),
        Arith::IntAnd | Arith::IntOr | Arith::IntXor => return None,
    })
}

/// The ops of one number.
fn unary(op: Unary, value: Value) -> Option<Value> {
    Some(match (op, value) {
        (Unary::Abs, Value::Int(n)) => Value::Int(n.wrapping_abs()),
        (Unary::Abs, Value::Float(x)) => Value::Float(x.abs()),
        (Unary::Floor, Value::Float(x)) => Value::Float(x.floor()),
        (Unary::Ceil, Value::Float(x)) => Value::Float(x.ceil()),
        (Unary::ToInt, Value::Float(x)) => Value::Int(float_to_int(x)),
        (Unary::ToFloat, Value::Int(n)) => Value::Float(n as f64),
        (Unary::IntNot, Value::Int(n)) => Value::Int(!n),
        (Unary::IntCount, Value::Int(n)) => Value::Int(i64::from(n.count_ones())),
        _ => return None,
    })
}

/// A float truncated to an integer as x86-64 converts it: out of range or NaN gives the
/// "integer indefinite" value, `i64::MIN`.
fn float_to_int(x: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    match x.is_nan() || !(-LIMIT..LIMIT).contains(&x) {
        true => i64::MIN,
        false => x as i64,
    }
}

/// The ops of two numbers.
fn binary(op: Binary, left: &Value, right: &Value) -> Option<Value> {
    if let (Some(x), Some(y)) = (as_float(left), as_float(right)) {
        return match op {
            Binary::Pow => Some(Value::Float(x.powf(y))),
            Binary::Log => Some(Value::Float(x.ln() / y.ln())),
            _ => None,
        };
    }
    let n = left.as_int()?;
    if let Value::Bool(search) = right {
        let bits = if *search { n as u64 } else { !n as u64 };
        return Some(Value::Int(scan(op, bits)?));
    }
    let m = right.as_int()?;
    // x86-64 shifts by the count modulo 64, as `wrapping_sh*` do.
    let shift = m as u32;
    Some(Value::Int(match op {
        Binary::Mod if m == 0 => return None,
        Binary::Mod => n.wrapping_rem(m),
        Binary::LShift => n.wrapping_shl(shift),
        Binary::RShift => (n as u64).wrapping_shr(shift) as i64,
        Binary::ARShift => n.wrapping_shr(shift),
        _ => return None,
    }))
}

/// LSCAN / RSCAN: the index (0 = most significant) of the first set bit of `bits` from the
/// left (right); -1 when none is set.
fn scan(op: Binary, bits: u64) -> Option<i64> {
    if bits == 0 {
        return Some(-1);
    }
    match op {
        Binary::LScan => Some(i64::from(bits.leading_zeros())),
        Binary::RScan => Some(63 - i64::from(bits.trailing_zeros())),
        _ => None,
    }
}

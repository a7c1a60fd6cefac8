//! Compiling a decoded expression into typed nodes, with Aerospike's build-time checks
//! (`exp.c` `build_*`): the arity of each op, the static type of each argument, variable
//! scoping, and the shapes of the special nodes (bin reads, `let`, `cond`, module calls).
//!
//! Invariants:
//! - Compilation recurses along the decoded tree only, whose depth the decoder bounds.
//! - Every node's static type is known once compiled ([`Type::Any`] only for literal
//!   extensions, which only module calls and comparisons between themselves accept).
//! - A variable is visible from the definition after its own to the end of its `let`; a name
//!   already visible may not be defined again, and a definition may not read itself.

use model::ResultCode;

use crate::cdt::value::{self, KIND_BLOB, KIND_GEOJSON, KIND_STRING, Value};

/// A particle type's first byte for HLL bytes in msgpack (`AS_BYTES_HLL`).
pub(super) const KIND_HLL: u8 = 18;

/// The most evaluated arguments a module call may carry (Aerospike's vector limit).
const CALL_ARGS_MAX: usize = 16;

/// The CDT op code that wraps an op in a context.
const CDT_CONTEXT_EVAL: i64 = 0xff;
/// The 8.1 CDT select op, with its own argument layout.
const CDT_SELECT: i64 = 0xfe;

/// The static type of an expression (the wire's `ExpType`, plus [`Type::Any`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Type {
    Nil,
    Bool,
    Int,
    Str,
    List,
    Map,
    Blob,
    Float,
    Geo,
    Hll,
    /// A literal extension (wildcard, infinity): no type of its own.
    Any,
}

impl Type {
    /// The type a wire `ExpType` code names.
    fn from_code(code: i64) -> Option<Type> {
        Some(match code {
            0 => Type::Nil,
            1 => Type::Bool,
            2 => Type::Int,
            3 => Type::Str,
            4 => Type::List,
            5 => Type::Map,
            6 => Type::Blob,
            7 => Type::Float,
            8 => Type::Geo,
            9 => Type::Hll,
            _ => return None,
        })
    }

    /// The particle type a bin of this type holds.
    pub(super) fn particle(self) -> u8 {
        match self {
            Type::Nil | Type::Any => 0,
            Type::Int => 1,
            Type::Float => 2,
            Type::Str => 3,
            Type::Blob => 4,
            Type::Bool => 17,
            Type::Hll => 18,
            Type::Map => 19,
            Type::List => 20,
            Type::Geo => 23,
        }
    }
}

/// The comparison ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CmpOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

/// The logical ops over several booleans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Logic {
    And,
    Or,
    Exclusive,
}

/// The numeric ops over one or more numbers of one type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    IntAnd,
    IntOr,
    IntXor,
}

/// The ops of one number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unary {
    Abs,
    Floor,
    Ceil,
    ToInt,
    ToFloat,
    IntNot,
    IntCount,
}

/// The ops of two numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Binary {
    Pow,
    Log,
    Mod,
    LShift,
    RShift,
    ARShift,
    LScan,
    RScan,
}

/// The record metadata reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Meta {
    DeviceSize,
    LastUpdate,
    SinceUpdate,
    VoidTime,
    Ttl,
    SetName,
    KeyExists,
    IsTombstone,
    MemorySize,
    RecordSize,
}

/// Which module a call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum System {
    Cdt,
    Bits,
    Hll,
}

/// One argument of a module call: a literal kept as sent, or an expression evaluated first.
#[derive(Debug)]
pub(super) enum CallArg {
    Literal(Value),
    Exp(Node),
}

/// A module call (`[127, type, system, payload, bin]`).
#[derive(Debug)]
pub(super) struct CallNode {
    pub(super) result: Type,
    pub(super) system: System,
    /// Whether the call modifies (a copy of) its bin and returns it.
    pub(super) modify: bool,
    /// The context of a `[0xff, ctx, [code, args...]]` payload.
    pub(super) context: Option<Value>,
    pub(super) code: i64,
    pub(super) args: Vec<CallArg>,
    pub(super) bin: Node,
}

/// A compiled expression node.
#[derive(Debug)]
pub(super) enum Node {
    /// `[0]`: always unknown.
    Unknown,
    Literal(Value),
    Compare(CmpOp, Box<Node>, Box<Node>),
    InList(Box<Node>, Box<Node>),
    /// `[8, left, right]`: GeoJSON match, unknown when either side is.
    GeoCompare(Box<Node>, Box<Node>),
    /// `[7, flags, regex, string]`: whether the regex matches anywhere in the string.
    Regex(regex::bytes::Regex, Box<Node>),
    Logic(Logic, Vec<Node>),
    Not(Box<Node>),
    Arith(Arith, Vec<Node>),
    Unary(Unary, Box<Node>),
    Binary(Binary, Box<Node>, Box<Node>),
    DigestModulo(i64),
    Meta(Meta),
    Key(Type),
    Bin(Type, Vec<u8>),
    BinType(Vec<u8>),
    /// `(condition, value)` pairs, then the default.
    Cond(Vec<(Node, Node)>, Box<Node>),
    Var(usize),
    /// The first variable slot, the definitions (one slot each, in order), the body.
    Let(usize, Vec<Node>, Box<Node>),
    Call(Box<CallNode>),
}

/// POSIX `regcomp` flags a REGEX carries (EXTENDED and NOSUB change nothing here).
const REGEX_ICASE: i64 = 2;
const REGEX_NEWLINE: i64 = 8;
/// The most a compiled regex may take: a pattern that needs more is refused (PARAMETER).
const REGEX_SIZE_MAX_BYTES: usize = 1 << 20;

/// A variable in scope: its name, slot and type (`None` while being defined).
struct Var {
    name: Vec<u8>,
    slot: usize,
    ty: Option<Type>,
}

/// The compiler's state: the variables in scope and the slots they need.
#[derive(Default)]
struct Compiler {
    scope: Vec<Var>,
    slots_max: usize,
    reads_the_clock: bool,
}

/// Decodes and compiles a packed expression. Returns the root, its type and the number of
/// variable slots evaluation needs.
///
/// # Errors
/// PARAMETER for a malformed or ill-typed expression; UNSUPPORTED_FEATURE for an op Osprey
/// does not evaluate.
pub(super) fn compile(packed: &[u8]) -> Result<Compiled, ResultCode> {
    let tree = value::decode(packed)?;
    let mut compiler = Compiler::default();
    let (root, ty) = compiler.node(&tree)?;
    if ty == Type::Any {
        return Err(ResultCode::Parameter);
    }
    Ok(Compiled {
        root,
        ty,
        var_count: compiler.slots_max,
        reads_the_clock: compiler.reads_the_clock,
    })
}

/// A compiled expression: its root, type, the variable slots evaluation needs, and whether
/// it reads the clock (TTL, void time or time since update: a value that changes with no
/// write).
pub(super) struct Compiled {
    pub(super) root: Node,
    pub(super) ty: Type,
    pub(super) var_count: usize,
    pub(super) reads_the_clock: bool,
}

/// An unsigned integer argument.
fn uint(arg: &Value) -> Result<i64, ResultCode> {
    match arg {
        Value::Int(n) if *n >= 0 => Ok(*n),
        _ => Err(ResultCode::Parameter),
    }
}

/// A raw msgpack string (a bin or variable name, a regex): the decoder took its first byte
/// for a kind, so put it back.
fn raw_string(arg: &Value) -> Result<Vec<u8>, ResultCode> {
    match arg {
        Value::Bytes { kind, data } => {
            let mut text = Vec::with_capacity(data.len() + 1);
            text.push(*kind);
            text.extend_from_slice(data);
            Ok(text)
        }
        _ => Err(ResultCode::Parameter),
    }
}

/// A bin name as a bin read names it: 1 to 15 bytes.
fn bin_name(arg: &Value) -> Result<Vec<u8>, ResultCode> {
    let name = raw_string(arg)?;
    match name.len() {
        1..=15 => Ok(name),
        _ => Err(ResultCode::Parameter),
    }
}

/// A variable name: a letter or underscore, then letters, digits or underscores.
fn var_name(arg: &Value) -> Result<Vec<u8>, ResultCode> {
    let name = raw_string(arg)?;
    let valid = match name.split_first() {
        Some((first, rest)) => {
            (first.is_ascii_alphabetic() || *first == b'_')
                && rest.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
        }
        None => false,
    };
    match valid {
        true => Ok(name),
        false => Err(ResultCode::Parameter),
    }
}

/// Refuses an op unless it has exactly `count` arguments.
fn arity(args: &[Value], count: usize) -> Result<(), ResultCode> {
    match args.len() == count {
        true => Ok(()),
        false => Err(ResultCode::Parameter),
    }
}

/// Refuses a type other than `expected`.
fn expect(ty: Type, expected: Type) -> Result<(), ResultCode> {
    match ty == expected {
        true => Ok(()),
        false => Err(ResultCode::Parameter),
    }
}

impl Compiler {
    /// Compiles one node: a literal, or an op array.
    fn node(&mut self, tree: &Value) -> Result<(Node, Type), ResultCode> {
        let ty = match tree {
            Value::List(list) if list.ordered => return Err(ResultCode::Parameter),
            Value::List(list) => return self.op(&list.items),
            Value::Nil => Type::Nil,
            Value::Bool(_) => Type::Bool,
            Value::Int(_) => Type::Int,
            Value::Float(_) => Type::Float,
            Value::Bytes { kind, .. } => match *kind {
                KIND_STRING => Type::Str,
                KIND_BLOB => Type::Blob,
                KIND_HLL => Type::Hll,
                KIND_GEOJSON => Type::Geo,
                _ => return Err(ResultCode::Parameter),
            },
            Value::Map(_) => Type::Map,
            Value::Ext { .. } | Value::Wildcard | Value::Infinity => Type::Any,
        };
        Ok((Node::Literal(tree.clone()), ty))
    }

    /// Compiles an op array `[code, args...]`.
    fn op(&mut self, items: &[Value]) -> Result<(Node, Type), ResultCode> {
        let (code, args) = items.split_first().ok_or(ResultCode::Parameter)?;
        let code = uint(code)?;
        match code {
            0 => arity(args, 0).map(|()| (Node::Unknown, Type::Bool)),
            1..=6 => self.compare(code, args),
            7 => self.regex(args),
            8 => self.geo(args),
            9 => self.in_list(args),
            16 => self.logic(Logic::And, args),
            17 => self.logic(Logic::Or, args),
            18 => self.not(args),
            19 => self.logic(Logic::Exclusive, args),
            20..=23 | 50 | 51 => self.arith(code, args),
            24..=29 => self.math(code, args),
            30..=41 => self.int_op(code, args),
            64 => self.digest_modulo(args),
            65..=74 => self.meta(code, args),
            80 => self.key(args),
            81 => self.bin(args),
            82 => {
                arity(args, 1)?;
                Ok((Node::BinType(bin_name(&args[0])?), Type::Int))
            }
            // 8.1: RESULT_REMOVE, MAP_KEYS, MAP_VALUES, VAR_BUILTIN.
            100..=102 | 122 => Err(ResultCode::UnsupportedFeature),
            123 => self.cond(args),
            124 => self.var(args),
            125 => self.let_(args),
            126 => quoted(args),
            127 => self.call(args),
            _ => Err(ResultCode::Parameter),
        }
    }

    /// Compiles each argument, returning the nodes and their types.
    fn all(&mut self, args: &[Value]) -> Result<(Vec<Node>, Vec<Type>), ResultCode> {
        let mut nodes = Vec::with_capacity(args.len());
        let mut types = Vec::with_capacity(args.len());
        for arg in args {
            let (node, ty) = self.node(arg)?;
            nodes.push(node);
            types.push(ty);
        }
        Ok((nodes, types))
    }

    /// Compiles exactly two arguments.
    fn two(&mut self, args: &[Value]) -> Result<(Node, Type, Node, Type), ResultCode> {
        arity(args, 2)?;
        let (left, left_type) = self.node(&args[0])?;
        let (right, right_type) = self.node(&args[1])?;
        Ok((left, left_type, right, right_type))
    }

    /// Compiles exactly one argument.
    fn one(&mut self, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        arity(args, 1)?;
        self.node(&args[0])
    }

    /// EQ .. LE: two arguments of one type, neither GeoJSON nor HLL.
    fn compare(&mut self, code: i64, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        let (left, left_type, right, right_type) = self.two(args)?;
        if left_type != right_type || matches!(left_type, Type::Geo | Type::Hll) {
            return Err(ResultCode::Parameter);
        }
        let op = match code {
            1 => CmpOp::Eq,
            2 => CmpOp::Ne,
            3 => CmpOp::Gt,
            4 => CmpOp::Ge,
            5 => CmpOp::Lt,
            _ => CmpOp::Le,
        };
        let node = Node::Compare(op, Box::new(left), Box::new(right));
        Ok((node, Type::Bool))
    }

    /// REGEX `[7, flags, "regex", string_exp]`: POSIX `regcomp` flags (1 EXTENDED, 2 ICASE,
    /// 4 NOSUB, 8 NEWLINE), compiled by the `regex` crate, whose syntax is that of POSIX
    /// extended expressions for what clients send (basic-syntax escapes such as `\(` differ).
    fn regex(&mut self, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        arity(args, 3)?;
        let Value::Int(flags) = args[0] else {
            return Err(ResultCode::Parameter);
        };
        let pattern =
            String::from_utf8(raw_string(&args[1])?).map_err(|_| ResultCode::Parameter)?;
        let (node, ty) = self.node(&args[2])?;
        expect(ty, Type::Str)?;
        let newline = flags & REGEX_NEWLINE != 0;
        let compiled = regex::bytes::RegexBuilder::new(&pattern)
            .case_insensitive(flags & REGEX_ICASE != 0)
            .multi_line(newline)
            .dot_matches_new_line(!newline)
            .size_limit(REGEX_SIZE_MAX_BYTES)
            .build()
            .map_err(|_| ResultCode::Parameter)?;
        Ok((Node::Regex(compiled, Box::new(node)), Type::Bool))
    }

    /// GEO compare: two GeoJSON arguments (`geo::compare`: the left one's points within the
    /// right one's region, or its regions containing the right one's point).
    fn geo(&mut self, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        let (left, left_type, right, right_type) = self.two(args)?;
        expect(left_type, Type::Geo)?;
        expect(right_type, Type::Geo)?;
        Ok((
            Node::GeoCompare(Box::new(left), Box::new(right)),
            Type::Bool,
        ))
    }

    /// IN_LIST (8.1): a value and a list.
    fn in_list(&mut self, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        let (value, _, list, list_type) = self.two(args)?;
        expect(list_type, Type::List)?;
        Ok((Node::InList(Box::new(value), Box::new(list)), Type::Bool))
    }

    /// AND, OR, EXCLUSIVE: two or more booleans.
    fn logic(&mut self, op: Logic, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        if args.len() < 2 {
            return Err(ResultCode::Parameter);
        }
        let (nodes, types) = self.all(args)?;
        if types.iter().any(|&ty| ty != Type::Bool) {
            return Err(ResultCode::Parameter);
        }
        Ok((Node::Logic(op, nodes), Type::Bool))
    }

    /// NOT: one boolean.
    fn not(&mut self, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        let (node, ty) = self.one(args)?;
        expect(ty, Type::Bool)?;
        Ok((Node::Not(Box::new(node)), Type::Bool))
    }

    /// ADD, SUB, MUL, DIV, MIN, MAX: one or more numbers, all integers or all floats.
    fn arith(&mut self, code: i64, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        let op = match code {
            20 => Arith::Add,
            21 => Arith::Sub,
            22 => Arith::Mul,
            23 => Arith::Div,
            50 => Arith::Min,
            _ => Arith::Max,
        };
        let (nodes, types) = self.all(args)?;
        let ty = *types.first().ok_or(ResultCode::Parameter)?;
        if !matches!(ty, Type::Int | Type::Float) || types.iter().any(|&t| t != ty) {
            return Err(ResultCode::Parameter);
        }
        Ok((Node::Arith(op, nodes), ty))
    }

    /// POW, LOG (two floats), MOD (two integers), ABS (a number), FLOOR, CEIL (a float).
    fn math(&mut self, code: i64, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        match code {
            24..=26 => {
                let (op, ty) = match code {
                    24 => (Binary::Pow, Type::Float),
                    25 => (Binary::Log, Type::Float),
                    _ => (Binary::Mod, Type::Int),
                };
                let (left, left_type, right, right_type) = self.two(args)?;
                expect(left_type, ty)?;
                expect(right_type, ty)?;
                Ok((Node::Binary(op, Box::new(left), Box::new(right)), ty))
            }
            27 => {
                let (node, ty) = self.one(args)?;
                if !matches!(ty, Type::Int | Type::Float) {
                    return Err(ResultCode::Parameter);
                }
                Ok((Node::Unary(Unary::Abs, Box::new(node)), ty))
            }
            _ => {
                let op = if code == 28 {
                    Unary::Floor
                } else {
                    Unary::Ceil
                };
                self.unary(op, Type::Float, Type::Float, args)
            }
        }
    }

    /// A one-argument op from `from` to `to`.
    fn unary(
        &mut self,
        op: Unary,
        from: Type,
        to: Type,
        args: &[Value],
    ) -> Result<(Node, Type), ResultCode> {
        let (node, ty) = self.one(args)?;
        expect(ty, from)?;
        Ok((Node::Unary(op, Box::new(node)), to))
    }

    /// TO_INT, TO_FLOAT and the integer bit ops.
    fn int_op(&mut self, code: i64, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        match code {
            30 => self.unary(Unary::ToInt, Type::Float, Type::Int, args),
            31 => self.unary(Unary::ToFloat, Type::Int, Type::Float, args),
            32..=34 => {
                let op = match code {
                    32 => Arith::IntAnd,
                    33 => Arith::IntOr,
                    _ => Arith::IntXor,
                };
                let (nodes, types) = self.all(args)?;
                if types.is_empty() || types.iter().any(|&ty| ty != Type::Int) {
                    return Err(ResultCode::Parameter);
                }
                Ok((Node::Arith(op, nodes), Type::Int))
            }
            35 => self.unary(Unary::IntNot, Type::Int, Type::Int, args),
            39 => self.unary(Unary::IntCount, Type::Int, Type::Int, args),
            _ => {
                let (op, second) = match code {
                    36 => (Binary::LShift, Type::Int),
                    37 => (Binary::RShift, Type::Int),
                    38 => (Binary::ARShift, Type::Int),
                    40 => (Binary::LScan, Type::Bool),
                    _ => (Binary::RScan, Type::Bool),
                };
                let (left, left_type, right, right_type) = self.two(args)?;
                expect(left_type, Type::Int)?;
                expect(right_type, second)?;
                Ok((Node::Binary(op, Box::new(left), Box::new(right)), Type::Int))
            }
        }
    }

    /// DIGEST_MODULO `[64, modulo]`: the modulo as a non-zero 32-bit integer.
    fn digest_modulo(&mut self, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        arity(args, 1)?;
        let modulo = args[0].as_int().ok_or(ResultCode::Parameter)? as i32;
        match modulo {
            0 => Err(ResultCode::Parameter),
            _ => Ok((Node::DigestModulo(i64::from(modulo)), Type::Int)),
        }
    }

    /// The metadata reads: no arguments.
    fn meta(&mut self, code: i64, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        arity(args, 0)?;
        let (meta, ty) = match code {
            65 => (Meta::DeviceSize, Type::Int),
            66 => (Meta::LastUpdate, Type::Int),
            67 => (Meta::SinceUpdate, Type::Int),
            68 => (Meta::VoidTime, Type::Int),
            69 => (Meta::Ttl, Type::Int),
            70 => (Meta::SetName, Type::Str),
            71 => (Meta::KeyExists, Type::Bool),
            72 => (Meta::IsTombstone, Type::Bool),
            73 => (Meta::MemorySize, Type::Int),
            _ => (Meta::RecordSize, Type::Int),
        };
        self.reads_the_clock |= matches!(meta, Meta::SinceUpdate | Meta::VoidTime | Meta::Ttl);
        Ok((Node::Meta(meta), ty))
    }

    /// KEY `[80, type]`: an integer, string or blob key.
    fn key(&mut self, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        arity(args, 1)?;
        let ty = Type::from_code(uint(&args[0])?).ok_or(ResultCode::Parameter)?;
        match ty {
            Type::Int | Type::Str | Type::Blob => Ok((Node::Key(ty), ty)),
            _ => Err(ResultCode::Parameter),
        }
    }

    /// BIN `[81, type, "name"]`.
    fn bin(&mut self, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        arity(args, 2)?;
        let ty = Type::from_code(uint(&args[0])?).ok_or(ResultCode::Parameter)?;
        let name = bin_name(&args[1])?;
        Ok((Node::Bin(ty, name), ty))
    }

    /// COND `[123, cond1, value1, ..., default]`: boolean conditions, values of one type (an
    /// `[0]` unknown fits any).
    fn cond(&mut self, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        if args.len() < 3 || args.len().is_multiple_of(2) {
            return Err(ResultCode::Parameter);
        }
        let mut ty: Option<Type> = None;
        let mut cases = Vec::with_capacity(args.len() / 2);
        for pair in args.chunks_exact(2) {
            let (condition, condition_type) = self.node(&pair[0])?;
            expect(condition_type, Type::Bool)?;
            let (value, value_type) = self.node(&pair[1])?;
            unify(&mut ty, &value, value_type)?;
            cases.push((condition, value));
        }
        let last = args.last().ok_or(ResultCode::Parameter)?;
        let (default, default_type) = self.node(last)?;
        let ty = match ty {
            None => default_type,
            Some(ty) => {
                unify(&mut Some(ty), &default, default_type)?;
                ty
            }
        };
        Ok((Node::Cond(cases, Box::new(default)), ty))
    }

    /// VAR `[124, "name"]`: a variable in scope, fully defined.
    fn var(&mut self, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        arity(args, 1)?;
        let name = raw_string(&args[0])?;
        let var = self
            .scope
            .iter()
            .rev()
            .find(|var| var.name == name)
            .ok_or(ResultCode::Parameter)?;
        let ty = var.ty.ok_or(ResultCode::Parameter)?;
        Ok((Node::Var(var.slot), ty))
    }

    /// LET `[125, "name1", exp1, ..., body]`: fresh names, each defined in order and visible
    /// to the definitions after it and to the body.
    fn let_(&mut self, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        if args.len() < 3 || args.len().is_multiple_of(2) {
            return Err(ResultCode::Parameter);
        }
        let scope_start = self.scope.len();
        let first_slot = scope_start;
        let outcome = self.let_body(args);
        self.scope.truncate(scope_start);
        let (definitions, body, ty) = outcome?;
        Ok((Node::Let(first_slot, definitions, Box::new(body)), ty))
    }

    /// The definitions and body of a LET, leaving its variables in scope.
    fn let_body(&mut self, args: &[Value]) -> Result<(Vec<Node>, Node, Type), ResultCode> {
        let mut definitions = Vec::with_capacity(args.len() / 2);
        for pair in args.chunks_exact(2) {
            let name = var_name(&pair[0])?;
            if self.scope.iter().any(|var| var.name == name) {
                return Err(ResultCode::Parameter);
            }
            let slot = self.scope.len();
            self.scope.push(Var {
                name,
                slot,
                ty: None,
            });
            self.slots_max = self.slots_max.max(self.scope.len());
            let (definition, ty) = self.node(&pair[1])?;
            if let Some(var) = self.scope.last_mut() {
                var.ty = Some(ty);
            }
            definitions.push(definition);
        }
        let last = args.last().ok_or(ResultCode::Parameter)?;
        let (body, ty) = self.node(last)?;
        Ok((definitions, body, ty))
    }

    /// CALL `[127, type, system, payload, bin]`.
    fn call(&mut self, args: &[Value]) -> Result<(Node, Type), ResultCode> {
        arity(args, 4)?;
        let result = Type::from_code(uint(&args[0])?).ok_or(ResultCode::Parameter)?;
        let flags = uint(&args[1])?;
        let modify = flags & 0x40 != 0;
        let system = match flags & !0x40 {
            0 => System::Cdt,
            1 => System::Bits,
            2 => System::Hll,
            _ => return Err(ResultCode::Parameter),
        };
        let (context, code, payload_args) = call_payload(&args[2])?;
        let mut call_args = Vec::with_capacity(payload_args.len());
        let mut evaluated = 0;
        for arg in payload_args {
            call_args.push(match arg {
                Value::List(_) => {
                    evaluated += 1;
                    CallArg::Exp(self.node(arg)?.0)
                }
                _ => CallArg::Literal(arg.clone()),
            });
        }
        if evaluated > CALL_ARGS_MAX {
            return Err(ResultCode::Parameter);
        }
        let (bin, bin_type) = self.node(&args[3])?;
        let ty = call_type(system, bin_type, result)?;
        let node = CallNode {
            result,
            system,
            modify,
            context,
            code,
            args: call_args,
            bin,
        };
        Ok((Node::Call(Box::new(node)), ty))
    }
}

/// The type of a call: its declared type, once its bin argument fits the module (a nil bin
/// argument makes the call nil-typed, as in Aerospike).
fn call_type(system: System, bin_type: Type, result: Type) -> Result<Type, ResultCode> {
    let fits = match system {
        System::Cdt => matches!(bin_type, Type::List | Type::Map),
        System::Bits => bin_type == Type::Blob,
        System::Hll => bin_type == Type::Hll,
    };
    match (bin_type, fits) {
        (Type::Nil, _) => Ok(Type::Nil),
        (_, true) => Ok(result),
        (_, false) => Err(ResultCode::Parameter),
    }
}

/// Splits a call payload into its context (if wrapped), op code and arguments.
fn call_payload(payload: &Value) -> Result<(Option<Value>, i64, &[Value]), ResultCode> {
    let Value::List(list) = payload else {
        return Err(ResultCode::Parameter);
    };
    let (code, args) = list.items.split_first().ok_or(ResultCode::Parameter)?;
    let code = uint(code)?;
    if code == CDT_SELECT {
        return Err(ResultCode::UnsupportedFeature);
    }
    if code != CDT_CONTEXT_EVAL {
        return Ok((None, code, args));
    }
    let [context @ Value::List(_), Value::List(inner)] = args else {
        return Err(ResultCode::Parameter);
    };
    let (code, args) = inner.items.split_first().ok_or(ResultCode::Parameter)?;
    let code = uint(code)?;
    if code == CDT_SELECT || code == CDT_CONTEXT_EVAL {
        return Err(ResultCode::Parameter);
    }
    Ok((Some(context.clone()), code, args))
}

/// Checks a COND value's type against the type so far (an `[0]` unknown fits any).
fn unify(ty: &mut Option<Type>, node: &Node, node_type: Type) -> Result<(), ResultCode> {
    if matches!(node, Node::Unknown) {
        return Ok(());
    }
    match ty {
        None => {
            *ty = Some(node_type);
            Ok(())
        }
        Some(expected) if *expected == node_type => Ok(()),
        Some(_) => Err(ResultCode::Parameter),
    }
}

/// QUOTED `[126, list]`: a list literal.
fn quoted(args: &[Value]) -> Result<(Node, Type), ResultCode> {
    arity(args, 1)?;
    match &args[0] {
        list @ Value::List(_) => Ok((Node::Literal(list.clone()), Type::List)),
        _ => Err(ResultCode::Parameter),
    }
}

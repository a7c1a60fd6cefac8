//! Sorted-set algebra: ZUNION, ZINTER, ZDIFF, their STORE forms, and ZINTERCARD, as Redis's
//! `zunionInterDiffGenericCommand` (`t_zset.c`).
//!
//! A plain set given as input counts as a sorted set whose members all score 1. WEIGHTS
//! multiply each input's scores; AGGREGATE says how the scores of a member found in several
//! inputs combine (SUM, the default, MIN or MAX). Where the arithmetic makes NaN, the answer is
//! Redis's: a weighted score that is NaN (`inf * 0`) counts as 0, and so does a sum that is NaN
//! (`inf + -inf`); MIN and MAX keep the score they had against a NaN.
//!
//! Union and intersection visit their inputs smallest first (a stable sort by cardinality, as
//! Redis sorts them before it starts), so that sums round, and infinities cancel, as in Redis.
//!
//! Invariants:
//! - The commands run in the namespace's exclusive section, as SINTERSTORE does: no other
//!   command interleaves between reading the inputs and storing the result.
//! - Errors come in Redis's order: the key count, then each key's type, then the options.
//! - Work and memory are bounded by the inputs' sizes: nothing is sized by a declared count.

use std::collections::HashMap;
use std::sync::Arc;

use wire_resp::Args;

use super::collection::{self, Failure, finish};
use super::commands::Command;
use super::keys::{self, Target};
use super::reply::Reply;
use super::sets::SetValue;
use super::zsets::{self, ZSetValue, parse_score};
use super::{After, Session};

/// The commands of this module, with Redis's arities.
pub const COMMANDS: &[Command] = &[
    ("zdiff", -3, |s, a, r| {
        combine(s, a, r, Operation::Difference)
    }),
    ("zdiffstore", -4, |s, a, r| {
        combine_store(s, a, r, Operation::Difference)
    }),
    ("zinter", -3, |s, a, r| {
        combine(s, a, r, Operation::Intersection)
    }),
    ("zintercard", -3, zintercard),
    ("zinterstore", -4, |s, a, r| {
        combine_store(s, a, r, Operation::Intersection)
    }),
    ("zunion", -3, |s, a, r| combine(s, a, r, Operation::Union)),
    ("zunionstore", -4, |s, a, r| {
        combine_store(s, a, r, Operation::Union)
    }),
];

/// Redis's reply to a weight that does not parse.
const WEIGHT_NOT_A_FLOAT: &str = "ERR weight value is not a float";

/// Redis's reply to ZINTERCARD's LIMIT when it is negative or not an integer.
const LIMIT_NEGATIVE: &str = "ERR LIMIT can't be negative";

/// What a command makes of its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    /// Every member of any input.
    Union,
    /// The members of every input.
    Intersection,
    /// The members of the first input in none of the others, with the first's scores.
    Difference,
}

/// What a command answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// The members (ZUNION, ZINTER, ZDIFF): WITHSCORES is allowed.
    Reply,
    /// The size of the result, stored at the destination (the STORE forms).
    Store,
    /// The size of the intersection (ZINTERCARD): LIMIT is allowed.
    Cardinality,
}

/// How the scores of a member found in several inputs combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// `value` combined into `target`, as Redis's `zunionInterAggregate`: a NaN sum is 0, and
    /// MIN and MAX keep `target` against a NaN `value`.
    pub fn combine(self, target: f64, value: f64) -> f64 {
        match self {
            Aggregate::Sum => {
                let sum = target + value;
                if sum.is_nan() { 0.0 } else { sum }
            }
            Aggregate::Min if value < target => value,
            Aggregate::Max if value > target => value,
            Aggregate::Min | Aggregate::Max => target,
        }
    }
}

/// A score times its input's weight, as Redis starts a member's score: NaN (`inf * 0`) is 0.
pub fn weighted(score: f64, weight: f64) -> f64 {
    let product = score * weight;
    if product.is_nan() { 0.0 } else { product }
}

/// The options after the keys.
#[derive(Clone, Debug, PartialEq)]
struct Options {
    /// One per key.
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
    /// ZINTERCARD's LIMIT; 0: none.
    limit: usize,
}

/// The keys a command names after its key count at `count_position`, checked as Redis checks
/// them before it reads anything.
///
/// # Errors
/// Redis's texts: a count that is no integer, below 1, or above the arguments left.
fn parse_keys<'a>(
    args: &'a Args,
    count_position: usize,
    name: &str,
) -> Result<Vec<&'a [u8]>, Failure> {
    let count = keys::parse_i64(args.get(count_position))
        .map_err(|()| Failure::message(keys::NOT_AN_INTEGER))?;
    if count < 1 {
        return Err(Failure::Message(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    let first = count_position + 1;
    let available = args.len() - first;
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count > available {
        return Err(Failure::message(keys::SYNTAX_ERROR));
    }
    Ok((first..first + count)
        .map(|position| args.get(position))
        .collect())
}

/// Parses the options from `position`, as Redis does: WEIGHTS and AGGREGATE for union and
/// intersection, WITHSCORES when the members are answered, LIMIT for ZINTERCARD.
///
/// # Errors
/// Redis's texts; a syntax error for an option the command does not take.
fn parse_options(
    args: &Args,
    mut position: usize,
    key_count: usize,
    operation: Operation,
    form: Form,
) -> Result<Options, Failure> {
    let mut options = Options {
        weights: vec![1.0; key_count],
        aggregate: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    let weighs = operation != Operation::Difference && form != Form::Cardinality;
    while position < args.len() {
        let remaining = args.len() - position;
        let word = args.get(position);
        if weighs && remaining > key_count && word.eq_ignore_ascii_case(b"weights") {
            for (index, weight) in options.weights.iter_mut().enumerate() {
                *weight = parse_score(args.get(position + 1 + index))
                    .ok_or_else(|| Failure::message(WEIGHT_NOT_A_FLOAT))?;
            }
            position += 1 + key_count;
        } else if weighs && remaining >= 2 && word.eq_ignore_ascii_case(b"aggregate") {
            options.aggregate = match args.get(position + 1).to_ascii_lowercase().as_slice() {
                b"sum" => Aggregate::Sum,
                b"min" => Aggregate::Min,
                b"max" => Aggregate::Max,
                _ => return Err(Failure::message(keys::SYNTAX_ERROR)),
            };
            position += 2;
        } else if form == Form::Reply && word.eq_ignore_ascii_case(b"withscores") {
            options.withscores = true;
            position += 1;
        } else if form == Form::Cardinality && remaining >= 2 && word.eq_ignore_ascii_case(b"limit")
        {
            options.limit = match keys::parse_i64(args.get(position + 1)).map(u64::try_from) {
                Ok(Ok(limit)) => usize::try_from(limit).unwrap_or(usize::MAX),
                _ => return Err(Failure::message(LIMIT_NEGATIVE)),
            };
            position += 2;
        } else {
            return Err(Failure::message(keys::SYNTAX_ERROR));
        }
    }
    Ok(options)
}

/// What an input key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Missing,
    ZSet,
    Set,
}

/// One input: its key, what it holds, its size and its weight.
#[derive(Clone, Copy, Debug)]
struct Input<'a> {
    key: &'a [u8],
    kind: Kind,
    len: usize,
    weight: f64,
}

/// What the key holds and its size: a sorted set, a set, or nothing.
///
/// # Errors
/// [`Failure::WrongType`] for any other type; an engine failure.
fn probe(session: &Session, key: &[u8]) -> Result<(Kind, usize), Failure> {
    let target = Target::of(&session.state, session.database, key);
    match collection::read(&target, |zset: Option<&ZSetValue>| zset.map(ZSetValue::len)) {
        Ok(Some(len)) => Ok((Kind::ZSet, len)),
        Ok(None) => Ok((Kind::Missing, 0)),
        Err(Failure::WrongType) => collection::read(&target, |set: Option<&SetValue>| {
            set.map_or(0, SetValue::len)
        })
        .map(|len| (Kind::Set, len)),
        Err(failure) => Err(failure),
    }
}

/// Calls `visit` with each (member, score) of the input, under its read lock (a set's members
/// score 1).
fn visit_input(
    session: &Session,
    input: &Input<'_>,
    mut visit: impl FnMut(&[u8], f64),
) -> Result<(), Failure> {
    let target = Target::of(&session.state, session.database, input.key);
    match input.kind {
        Kind::Missing => Ok(()),
        Kind::ZSet => collection::read(&target, |zset: Option<&ZSetValue>| {
            zset.into_iter()
                .flat_map(ZSetValue::iter)
                .for_each(|entry| visit(entry.member(), entry.score()));
        }),
        Kind::Set => collection::read(&target, |set: Option<&SetValue>| {
            set.into_iter()
                .flat_map(SetValue::iter)
                .for_each(|member| visit(member, 1.0));
        }),
    }
}

/// Calls `look` with a finder of the input's scores (a set's members score 1), under its read
/// lock.
fn with_scores<T>(
    session: &Session,
    input: &Input<'_>,
    look: impl FnOnce(&dyn Fn(&[u8]) -> Option<f64>) -> T,
) -> Result<T, Failure> {
    let target = Target::of(&session.state, session.database, input.key);
    match input.kind {
        Kind::Missing => Ok(look(&|_| None)),
        Kind::ZSet => collection::read(&target, |zset: Option<&ZSetValue>| {
            look(&|member| zset.and_then(|zset| zset.score(member)))
        }),
        Kind::Set => collection::read(&target, |set: Option<&SetValue>| {
            look(&|member| set.filter(|set| set.contains(member)).map(|_| 1.0))
        }),
    }
}

/// A member and its score, copied out of an input.
type Scored = (Arc<[u8]>, f64);

/// The result of `operation` over `inputs`, as (member, score) in no order.
fn combined(
    session: &Session,
    inputs: &mut [Input<'_>],
    operation: Operation,
    aggregate: Aggregate,
) -> Result<Vec<Scored>, Failure> {
    match operation {
        Operation::Union => {
            inputs.sort_by_key(|input| input.len);
            union(session, inputs, aggregate)
        }
        Operation::Intersection => {
            inputs.sort_by_key(|input| input.len);
            intersection(session, inputs, aggregate)
        }
        Operation::Difference => difference(session, inputs),
    }
}

/// Every member of any input, its weighted scores aggregated in input order. O(N), N the
/// members of all inputs.
fn union(
    session: &Session,
    inputs: &[Input<'_>],
    aggregate: Aggregate,
) -> Result<Vec<Scored>, Failure> {
    let mut scores: HashMap<Arc<[u8]>, f64> = HashMap::new();
    for input in inputs {
        visit_input(session, input, |member, score| {
            let score = weighted(score, input.weight);
            match scores.get_mut(member) {
                Some(total) => *total = aggregate.combine(*total, score),
                None => {
                    scores.insert(Arc::from(member), score);
                }
            }
        })?;
    }
    Ok(scores.into_iter().collect())
}

/// The members of the smallest input found in every other, their scores aggregated in input
/// order as Redis does (the first weighted with NaN as 0, the others' products as they come).
/// O(N*M), N the smallest input's size, M the number of inputs.
fn intersection(
    session: &Session,
    inputs: &[Input<'_>],
    aggregate: Aggregate,
) -> Result<Vec<Scored>, Failure> {
    let Some((smallest, others)) = inputs.split_first() else {
        return Ok(Vec::new());
    };
    let mut candidates = Vec::with_capacity(smallest.len);
    visit_input(session, smallest, |member, score| {
        candidates.push((Arc::from(member), weighted(score, smallest.weight)));
    })?;
    for input in others {
        if candidates.is_empty() {
            break;
        }
        with_scores(session, input, |score_of| {
            candidates.retain_mut(|(member, total)| match score_of(member) {
                Some(score) => {
                    *total = aggregate.combine(*total, score * input.weight);
                    true
                }
                None => false,
            });
        })?;
    }
    Ok(candidates)
}

/// The members of the first input in none of the others, with the first's scores. O(N*M), N
/// the first input's size, M the number of inputs.
fn difference(session: &Session, inputs: &[Input<'_>]) -> Result<Vec<Scored>, Failure> {
    let Some((first, others)) = inputs.split_first() else {
        return Ok(Vec::new());
    };
    let mut kept = Vec::with_capacity(first.len);
    visit_input(session, first, |member, score| {
        kept.push((Arc::from(member), score));
    })?;
    for input in others {
        if kept.is_empty() {
            break;
        }
        with_scores(session, input, |score_of| {
            kept.retain(|(member, _)| score_of(member).is_none());
        })?;
    }
    Ok(kept)
}

/// The sorted set of `members`.
fn zset_of(members: Vec<Scored>) -> ZSetValue {
    let mut zset = ZSetValue::default();
    for (member, score) in members {
        zset.insert(&member, score);
    }
    zset
}

/// Runs `run` in the RESP namespace's exclusive section: the keys it reads and writes change
/// together, as one Redis command.
fn isolated<T>(session: &mut Session, run: impl FnOnce(&mut Session) -> T) -> T {
    let state = Arc::clone(&session.state);
    keys::namespace_of(&state).exclusive(|| run(session))
}

/// Reads the inputs and computes the result, errors in Redis's order: the key count, each
/// key's type, then the options.
fn run(
    session: &Session,
    args: &Args,
    count_position: usize,
    operation: Operation,
    form: Form,
) -> Result<(Options, Vec<Scored>), Failure> {
    let name = String::from_utf8_lossy(args.get(0)).to_ascii_lowercase();
    let keys = parse_keys(args, count_position, &name)?;
    let options = parse_options(
        args,
        count_position + 1 + keys.len(),
        keys.len(),
        operation,
        form,
    );
    let probed = keys
        .iter()
        .map(|key| probe(session, key))
        .collect::<Result<Vec<_>, _>>()?;
    let options = options?;
    let mut inputs: Vec<Input<'_>> = keys
        .iter()
        .zip(probed)
        .zip(&options.weights)
        .map(|((key, (kind, len)), &weight)| Input {
            key,
            kind,
            len,
            weight,
        })
        .collect();
    let members = combined(session, &mut inputs, operation, options.aggregate)?;
    Ok((options, members))
}

/// ZUNION, ZINTER, ZDIFF numkeys key [key ...] [options]: the resulting members in score
/// order, with their scores when WITHSCORES.
fn combine(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    operation: Operation,
) -> After {
    let outcome = isolated(session, |session| {
        run(session, args, 1, operation, Form::Reply)
    });
    finish(reply, outcome, |reply, (options, members)| {
        let zset = zset_of(members);
        let entries: Vec<_> = zset.iter().collect();
        zsets::reply_entries(reply, &entries, options.withscores);
    })
}

/// ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE destination numkeys key [key ...] [options]: stores
/// the result at `destination` (replacing what it held, with no expiry; deleting it when the
/// result is empty) and answers its size.
fn combine_store(
    session: &mut Session,
    args: &Args,
    reply: &mut Reply<'_>,
    operation: Operation,
) -> After {
    let outcome = isolated(session, |session| {
        let (_, members) = run(session, args, 2, operation, Form::Store)?;
        let zset = zset_of(members);
        let len = zset.len();
        collection::store_replacing(session, args.get(1), Box::new(zset), len)
    });
    finish(reply, outcome, |reply, len| {
        reply.integer(i64::try_from(len).unwrap_or(i64::MAX));
    })
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]: the size of the intersection, at most
/// `limit` when it is not 0.
fn zintercard(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let outcome = isolated(session, |session| {
        run(session, args, 1, Operation::Intersection, Form::Cardinality)
    });
    finish(reply, outcome, |reply, (options, members)| {
        let len = match options.limit {
            0 => members.len(),
            limit => members.len().min(limit),
        };
        reply.integer(i64::try_from(len).unwrap_or(i64::MAX));
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_that_are_nan_count_as_zero() {
        let sum = Aggregate::Sum;
        assert_eq!(sum.combine(f64::INFINITY, f64::NEG_INFINITY), 0.0);
        assert_eq!(sum.combine(1.0, f64::NAN), 0.0);
        assert_eq!(sum.combine(1.5, 2.0), 3.5);
    }

    #[test]
    fn min_and_max_keep_their_score_against_nan() {
        assert_eq!(Aggregate::Min.combine(2.0, f64::NAN), 2.0);
        assert_eq!(Aggregate::Max.combine(2.0, f64::NAN), 2.0);
        assert_eq!(Aggregate::Min.combine(2.0, -1.0), -1.0);
        assert_eq!(Aggregate::Max.combine(2.0, 5.0), 5.0);
        assert_eq!(Aggregate::Max.combine(2.0, 1.0), 2.0);
    }

    #[test]
    fn weighted_scores_that_are_nan_count_as_zero() {
        assert_eq!(weighted(f64::INFINITY, 0.0), 0.0);
        assert_eq!(weighted(0.0, f64::NEG_INFINITY), 0.0);
        assert_eq!(weighted(2.0, 1.5), 3.0);
        assert_eq!(weighted(f64::INFINITY, -1.0), f64::NEG_INFINITY);
    }

    use crate::resp::args_of as args;

    #[test]
    fn options_follow_each_command() {
        let parsed = |words: &[&str], operation, form| {
            let args = args(words);
            let keys = parse_keys(&args, 1, "zunion").map(|keys| keys.len());
            keys.and_then(|count| parse_options(&args, 2 + count, count, operation, form))
        };
        let union = parsed(
            &[
                "zunion",
                "2",
                "a",
                "b",
                "WEIGHTS",
                "2",
                "inf",
                "AGGREGATE",
                "max",
                "withscores",
            ],
            Operation::Union,
            Form::Reply,
        )
        .unwrap();
        assert_eq!(union.weights, [2.0, f64::INFINITY]);
        assert_eq!(union.aggregate, Aggregate::Max);
        assert!(union.withscores);
        // WEIGHTS needs one weight per key; ZDIFF takes no weights; a store no WITHSCORES.
        let syntax = Err(Failure::message(keys::SYNTAX_ERROR));
        let short = &["zunion", "2", "a", "b", "WEIGHTS", "2"];
        assert_eq!(parsed(short, Operation::Union, Form::Reply), syntax);
        let weighted_diff = &["zdiff", "1", "a", "WEIGHTS", "2"];
        assert_eq!(
            parsed(weighted_diff, Operation::Difference, Form::Reply),
            syntax
        );
        let scored = &["zunion", "1", "a", "WITHSCORES"];
        assert_eq!(parsed(scored, Operation::Union, Form::Store), syntax);
        let nan = &["zunion", "1", "a", "WEIGHTS", "nan"];
        assert_eq!(
            parsed(nan, Operation::Union, Form::Reply),
            Err(Failure::message(WEIGHT_NOT_A_FLOAT))
        );
        let limit = &["zintercard", "1", "a", "LIMIT", "-1"];
        assert_eq!(
            parsed(limit, Operation::Intersection, Form::Cardinality),
            Err(Failure::message(LIMIT_NEGATIVE))
        );
        let limited = parsed(
            &["zintercard", "1", "a", "limit", "3"],
            Operation::Intersection,
            Form::Cardinality,
        );
        assert_eq!(limited.unwrap().limit, 3);
    }

    #[test]
    fn key_counts_are_checked_before_anything_is_read() {
        let zero = args(&["zunion", "0", "a"]);
        assert_eq!(
            parse_keys(&zero, 1, "zunion"),
            Err(Failure::message(
                "ERR at least 1 input key is needed for 'zunion' command"
            ))
        );
        let too_many = args(&["zunion", "3", "a", "b"]);
        assert_eq!(
            parse_keys(&too_many, 1, "zunion"),
            Err(Failure::message(keys::SYNTAX_ERROR))
        );
        let huge = args(&["zunion", "9223372036854775807", "a"]);
        assert_eq!(
            parse_keys(&huge, 1, "zunion"),
            Err(Failure::message(keys::SYNTAX_ERROR))
        );
        let word = args(&["zunion", "x", "a"]);
        assert_eq!(
            parse_keys(&word, 1, "zunion"),
            Err(Failure::message(keys::NOT_AN_INTEGER))
        );
    }
}

//! Index values that are not a bin's own value: the element a CDT context reaches inside a
//! bin's list or map (Aerospike 6.1's context indexes), or the value of an expression over
//! the record (Aerospike 8.1's expression indexes).
//!
//! A [`Derivation`] is compiled once, when its index is created, from the definition's
//! canonical bytes (see [`canonical`]); for each record it yields one collection value
//! ([`Value`]), which [`keys_of_value`] turns into the index's keys exactly as a bin holding
//! that value would give them (its scalar for a default index, its elements, map keys or
//! map values for a collection index).
//!
//! Invariants:
//! - The value a derivation yields depends only on the record's version (bins, key, set,
//!   digest, last-update time), never on the time of reading: an expression that reads the
//!   clock (TTL, void time, time since update) is refused when the index is created, since
//!   the keys a write removes must be those it once inserted.
//! - Queries name an index by the same canonical bytes: a context or an expression is
//!   decoded and packed again before it is compared, so two encodings of one value (a
//!   fixint or an int64 for the same integer) find the same index.

use model::{Digest, ResultCode};

use super::{IndexCollection, IndexKey, IndexKind, IndexSource};
use crate::cdt::value::{self, KIND_BLOB, KIND_GEOJSON, KIND_STRING, Value};
use crate::exp::Expression;
use crate::filter::StoredView;
use crate::namespace::Namespace;
use crate::record::Record;

/// How an index's value is computed from a record, when it is not a bin's own value.
#[derive(Debug)]
pub(crate) enum Derivation {
    /// The element the context's steps reach in the bin's list or map.
    Context {
        bin: Vec<u8>,
        steps: Vec<(i64, Value)>,
    },
    /// The expression's value over the record.
    Expression(Expression),
}

/// `bytes` (a packed msgpack value: a context array or an expression) decoded and packed
/// again, so that equal values have equal bytes.
///
/// # Errors
/// PARAMETER when the bytes are not one complete msgpack value.
pub fn canonical(bytes: &[u8]) -> Result<Vec<u8>, ResultCode> {
    Ok(value::pack(&value::decode(bytes)?))
}

impl Derivation {
    /// The derivation an index of `kind` and `collection` on `source` needs: `None` for a
    /// bin or user-key index.
    ///
    /// # Errors
    /// A message for Aerospike's PARAMETER (4): a context that is not a valid path, an
    /// expression that does not parse, reads the clock, or yields a type the index cannot
    /// hold.
    pub(crate) fn compile(
        source: &IndexSource,
        kind: IndexKind,
        collection: IndexCollection,
    ) -> Result<Option<Derivation>, &'static str> {
        match source {
            IndexSource::Bin(_) | IndexSource::UserKey => Ok(None),
            IndexSource::BinContext { bin, context } => {
                let steps = match value::decode(context) {
                    Ok(Value::List(list)) => crate::cdt::context::parse_steps(list.items),
                    _ => Err(ResultCode::Parameter),
                }
                .map_err(|_| "invalid context")?;
                Ok(Some(Derivation::Context {
                    bin: bin.clone(),
                    steps,
                }))
            }
            IndexSource::Expression(packed) => {
                let expression = Expression::parse(packed).map_err(|_| "invalid expression")?;
                if expression.reads_the_clock() {
                    return Err(
                        "an index expression cannot read the clock (ttl, void time, since update)",
                    );
                }
                let wanted = match collection {
                    IndexCollection::Default => kind.particle_type(),
                    IndexCollection::List => super::PARTICLE_LIST,
                    IndexCollection::MapKeys | IndexCollection::MapValues => super::PARTICLE_MAP,
                };
                if expression
                    .result_particle_type()
                    .is_some_and(|yields| yields != wanted)
                {
                    return Err("the expression's type does not match the index type");
                }
                Ok(Some(Derivation::Expression(expression)))
            }
        }
    }

    /// The value the record yields: `None` when the bin is missing, the context reaches
    /// nothing, or the expression is unknown.
    pub(crate) fn value(
        &self,
        namespace: &Namespace,
        digest: &Digest,
        record: &Record,
    ) -> Option<Value> {
        match self {
            Derivation::Context { bin, steps } => {
                let bins = record.bins();
                let bin = bins.iter().find(|found| found.name == *bin)?;
                let top = value::from_particle(bin.particle_type, bin.value).ok()?;
                crate::cdt::context::reach(&top, steps).ok()?.cloned()
            }
            Derivation::Expression(expression) => {
                let view = StoredView {
                    record,
                    bins: record.bins(),
                    digest,
                    set_name: namespace.sets.name_of(record.set_id).unwrap_or_default(),
                    now: namespace.clock.now(),
                };
                expression.eval(&view).ok().flatten()
            }
        }
    }
}

/// The keys `value` has in an index of `kind` and `collection`, sorted, each once: the value
/// itself (default), or each element of a list, each key or each value of a map, that has the
/// index's type.
pub(crate) fn keys_of_value(
    kind: IndexKind,
    collection: IndexCollection,
    value: &Value,
) -> Vec<IndexKey> {
    let mut keys: Vec<IndexKey> = chosen(collection, value)
        .flat_map(|item| scalar_keys(kind, item))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Whether `value` holds, in an index of `collection`, a GeoJSON value with the cell `cell`
/// that matches `query` (a geo query's exact check of a candidate).
pub(crate) fn geo_holds(
    collection: IndexCollection,
    value: &Value,
    cell: u64,
    query: &crate::geo::Geometry,
) -> bool {
    chosen(collection, value).any(|item| {
        geo_bytes(item).is_some_and(|bytes| {
            crate::geo::cells_of_value(bytes).contains(&cell)
                && crate::geo::geometry_of_value(bytes)
                    .is_ok_and(|geometry| crate::geo::compare(&geometry, query))
        })
    })
}

/// The values of `value` an index of `collection` holds.
fn chosen(collection: IndexCollection, value: &Value) -> Box<dyn Iterator<Item = &Value> + '_> {
    match (collection, value) {
        (IndexCollection::Default, _) => Box::new(std::iter::once(value)),
        (IndexCollection::List, Value::List(list)) => Box::new(list.items.iter()),
        (IndexCollection::MapKeys, Value::Map(map)) => Box::new(map.entries.iter().map(|e| &e.0)),
        (IndexCollection::MapValues, Value::Map(map)) => Box::new(map.entries.iter().map(|e| &e.1)),
        _ => Box::new(std::iter::empty()),
    }
}

/// The keys of one scalar in an index of `kind`: none when it has another type; a GeoJSON
/// value's cells.
fn scalar_keys(kind: IndexKind, item: &Value) -> Vec<IndexKey> {
    match (kind, item) {
        (IndexKind::Numeric, Value::Int(number)) => vec![IndexKey::Int(*number)],
        (IndexKind::String, Value::Bytes { kind, data }) if *kind == KIND_STRING => {
            vec![IndexKey::Str(data.as_slice().into())]
        }
        (IndexKind::Blob, Value::Bytes { kind, data }) if *kind == KIND_BLOB => {
            vec![IndexKey::Str(data.as_slice().into())]
        }
        (IndexKind::Geo2dSphere, item) => geo_bytes(item)
            .map(|bytes| {
                crate::geo::cells_of_value(bytes)
                    .into_iter()
                    .map(super::cell_key)
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The bytes of a GeoJSON value (a stored particle, or JSON text).
fn geo_bytes(item: &Value) -> Option<&[u8]> {
    match item {
        Value::Bytes { kind, data } if *kind == KIND_GEOJSON => Some(data),
        _ => None,
    }
}

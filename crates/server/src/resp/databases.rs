//! Redis's numbered databases: each is a set of the RESP namespace. Database 0 is the
//! configured set (`[resp] set`), database n > 0 the set `<set>-<n>`, so a key's digest, and
//! so its partition and its node on a cluster, depend on its database
//! (`docs/internals/redis-mapping.md`).
//!
//! SELECT changes the session's database; MOVE moves a key to another database; FLUSHALL
//! truncates every database's set. SWAPDB swaps which sets two databases are: a key's
//! database is part of its digest, so the records stay where they are and the numbers change
//! hands, at once, whatever the databases hold. The order is kept in a record of its own
//! (set `<set>-databases`, key `order`), written before the swap takes effect and read at
//! start-up, so that a restart on the same storage keeps it.
//!
//! Invariants:
//! - A session's database is below `resp.databases` (checked at SELECT, asserted here).
//! - The set names are fixed at start-up and distinct; `order` is a permutation of their
//!   indexes, changed only by SWAPDB, inside the namespace's exclusive section and under
//!   `swapping`, so no command sees half a swap.

use std::sync::atomic::{AtomicU16, Ordering};

use engine::Namespace;
use model::{Digest, ParticleType, UserKey};
use parking_lot::Mutex;
use wire_resp::Args;

use super::commands::Command;
use super::keys::{self, Target, engine_error, namespace_of};
use super::reply::Reply;
use super::{After, Session};

/// The most databases a server may have (`resp.databases`): each is a set of the namespace,
/// and INFO lists them all, so the count stays small; Redis's default is 16.
pub const DATABASES_MAX: u16 = 256;

/// A database number, below `resp.databases`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Database(pub u16);

/// The set names of every database, by number.
#[derive(Debug)]
pub struct Databases {
    set_names: Vec<String>,
    /// Per database, the index in `set_names` of the set it is (the identity until a SWAPDB).
    order: Vec<AtomicU16>,
    /// Where the order is kept: the set and key of its record.
    order_record: (String, &'static [u8]),
    /// Held by a SWAPDB from reading the order to writing it.
    swapping: Mutex<()>,
}

/// The key of the record holding the order of the databases.
const ORDER_KEY: &[u8] = b"order";

/// The set holding database `database` when database 0 is `set`.
pub fn database_set_name(set: &str, database: u16) -> String {
    match database {
        0 => set.to_owned(),
        n => format!("{set}-{n}"),
    }
}

impl Databases {
    /// The `count` databases whose first is `set`.
    pub fn new(set: &str, count: u16) -> Databases {
        assert!(count >= 1, "at least one database, got {count}");
        assert!(
            count <= DATABASES_MAX,
            "at most {DATABASES_MAX}, got {count}"
        );
        let set_names = (0..count).map(|n| database_set_name(set, n)).collect();
        Databases {
            set_names,
            order: (0..count).map(AtomicU16::new).collect(),
            order_record: (format!("{set}-databases"), ORDER_KEY),
            swapping: Mutex::new(()),
        }
    }

    /// How many there are.
    pub fn count(&self) -> u16 {
        u16::try_from(self.set_names.len()).expect("at most DATABASES_MAX databases")
    }

    /// The set holding `database`.
    pub fn set_name(&self, database: Database) -> &str {
        let index = usize::from(database.0);
        assert!(
            index < self.set_names.len(),
            "database {index} of {}",
            self.set_names.len()
        );
        &self.set_names[usize::from(self.order[index].load(Ordering::Acquire))]
    }

    /// The order a SWAPDB left in `namespace`'s record, if any (a record that does not read as
    /// a permutation of these databases is ignored, with a warning).
    pub fn load_order(&self, namespace: &Namespace) {
        let text = namespace
            .view(&self.order_address(), |current| {
                current.and_then(|current| {
                    super::strings::string_of(&current)
                        .ok()
                        .map(|value| value.bytes())
                })
            })
            .ok()
            .flatten();
        let Some(text) = text else {
            return;
        };
        match parse_order(&text, self.set_names.len()) {
            Some(order) => {
                for (slot, index) in self.order.iter().zip(order) {
                    slot.store(index, Ordering::Release);
                }
            }
            None => tracing::warn!(
                record = %String::from_utf8_lossy(&text),
                "the databases' order record does not name each database once: ignored"
            ),
        }
    }

    fn order_address(&self) -> engine::RecordAddress<'_> {
        let (set, key) = &self.order_record;
        engine::RecordAddress {
            digest: Digest::compute(set.as_bytes(), &UserKey::String(key)),
            set_name: set.as_bytes(),
            key: Some((ParticleType::String as u8, key)),
        }
    }

    /// SWAPDB: `a` and `b` exchange sets. The new order is written first (`writes` carries
    /// what the reply waits for), then takes effect; the caller holds the namespace's
    /// exclusive section.
    fn swap(
        &self,
        namespace: &Namespace,
        writes: &mut super::keys::Writes,
        (a, b): (Database, Database),
    ) -> Result<(), model::ResultCode> {
        let _swapping = self.swapping.lock();
        let mut order: Vec<u16> = self
            .order
            .iter()
            .map(|slot| slot.load(Ordering::Acquire))
            .collect();
        order.swap(usize::from(a.0), usize::from(b.0));
        let text = order
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(",");
        writes.store_string(namespace, &self.order_address(), text.as_bytes())?;
        for (slot, index) in self.order.iter().zip(order) {
            slot.store(index, Ordering::Release);
        }
        Ok(())
    }

    /// Every database with its set.
    pub fn iter(&self) -> impl Iterator<Item = (Database, &str)> {
        (0..self.count()).map(|n| (Database(n), self.set_name(Database(n))))
    }

    /// The database a client names, or Redis's error.
    ///
    /// # Errors
    /// Redis's texts for an argument that is not an integer or is out of range.
    pub fn parse(&self, argument: &[u8]) -> Result<Database, &'static str> {
        let number = keys::parse_i64(argument).map_err(|()| keys::NOT_AN_INTEGER)?;
        if i32::try_from(number).is_err() {
            return Err(OUT_OF_INT_RANGE);
        }
        match u16::try_from(number) {
            Ok(n) if n < self.count() => Ok(Database(n)),
            _ => Err(OUT_OF_RANGE),
        }
    }
}

/// Redis's reply to a database number beyond the configured count.
pub const OUT_OF_RANGE: &str = "ERR DB index is out of range";

/// Redis's reply to a number that does not fit a C `int`.
const OUT_OF_INT_RANGE: &str =
    "ERR value is out of range, value must between -2147483648 and 2147483647";

/// The database commands.
pub const COMMANDS: &[Command] = &[
    ("move", 3, move_key),
    ("select", 2, select),
    ("swapdb", 3, swapdb),
];

/// SELECT index
fn select(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    match session.state.resp_databases.parse(args.get(1)) {
        Ok(database) => {
            session.database = database;
            reply.ok();
        }
        Err(message) => reply.error(message),
    }
    After::Continue
}

/// MOVE key db: 1 if the key moved (value and expiry) to database `db`, 0 if it is missing
/// here or exists there. Refused on a cluster, as Redis Cluster refuses it: the two keys have
/// different partitions, perhaps on different nodes.
fn move_key(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    if session.state.is_clustered() {
        reply.error("ERR MOVE is not allowed in cluster mode");
        return After::Continue;
    }
    let destination = match session.state.resp_databases.parse(args.get(2)) {
        Ok(database) => database,
        Err(message) => {
            reply.error(message);
            return After::Continue;
        }
    };
    if destination == session.database {
        reply.error("ERR source and destination objects are the same");
        return After::Continue;
    }
    let key = args.get(1);
    let state = std::sync::Arc::clone(&session.state);
    let source = session.database;
    let moved = namespace_of(&state).exclusive(|| {
        let stored = keys::copy_key(session, (source, key), (destination, key), false)?;
        if stored == Some(true) {
            let target = Target::of(&state, source, key);
            target.update(&mut session.writes, |_, _| {
                Ok((engine::Decision::Delete, ()))
            })?;
        }
        Ok(stored == Some(true))
    });
    match moved {
        Ok(moved) => reply.integer(i64::from(moved)),
        Err(code) => engine_error(reply, code),
    }
    After::Continue
}

/// SWAPDB index index: the two databases exchange their keys, at once (see the module's
/// comment). Clients blocked on keys of either retry where their keys are now; a transaction
/// watching a key of either that exists in one of them is aborted (`transactions::changed`).
/// Refused on a cluster, as Redis Cluster has one database.
fn swapdb(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let state = std::sync::Arc::clone(&session.state);
    let databases = &state.resp_databases;
    let mut pair = [Database(0); 2];
    for (index, position) in [1, 2].into_iter().enumerate() {
        if keys::parse_i64(args.get(position)).is_err() {
            reply.error(match position {
                1 => "ERR invalid first DB index",
                _ => "ERR invalid second DB index",
            });
            return After::Continue;
        }
        match databases.parse(args.get(position)) {
            Ok(database) => pair[index] = database,
            Err(_) => {
                reply.error(OUT_OF_RANGE);
                return After::Continue;
            }
        }
    }
    if state.is_clustered() {
        reply.error("ERR SWAPDB is not allowed in cluster mode");
        return After::Continue;
    }
    if pair[0] == pair[1] {
        reply.ok();
        return After::Continue;
    }
    let namespace = namespace_of(&state);
    let swapped =
        namespace.exclusive(|| databases.swap(namespace, &mut session.writes, (pair[0], pair[1])));
    match swapped {
        Ok(()) => {
            state.blocked_clients.wake_all();
            reply.ok();
        }
        Err(code) => engine_error(reply, code),
    }
    After::Continue
}

/// The order a record holds (`2,0,1`): each of `count` databases once, else `None`.
fn parse_order(text: &[u8], count: usize) -> Option<Vec<u16>> {
    let order: Vec<u16> = std::str::from_utf8(text)
        .ok()?
        .split(',')
        .map(|index| index.parse().ok())
        .collect::<Option<_>>()?;
    let mut seen = vec![false; count];
    for &index in &order {
        let slot = seen.get_mut(usize::from(index))?;
        if std::mem::replace(slot, true) {
            return None;
        }
    }
    (order.len() == count).then_some(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_zero_is_the_configured_set_and_the_others_take_a_suffix() {
        let databases = Databases::new("redis", 16);
        assert_eq!(databases.set_name(Database(0)), "redis");
        assert_eq!(databases.set_name(Database(1)), "redis-1");
        assert_eq!(databases.set_name(Database(15)), "redis-15");
        let names: std::collections::HashSet<&str> =
            databases.iter().map(|(_, name)| name).collect();
        assert_eq!(names.len(), 16, "distinct sets");
    }

    #[test]
    fn an_order_record_must_name_each_database_once() {
        assert_eq!(parse_order(b"1,0,2", 3), Some(vec![1, 0, 2]));
        assert_eq!(parse_order(b"1,1,2", 3), None);
        assert_eq!(parse_order(b"1,0", 3), None);
        assert_eq!(parse_order(b"0,1,3", 3), None);
        assert_eq!(parse_order(b"0,x,2", 3), None);
    }

    #[test]
    fn database_numbers_parse_with_redis_errors() {
        let databases = Databases::new("redis", 16);
        assert_eq!(databases.parse(b"3"), Ok(Database(3)));
        assert_eq!(databases.parse(b"16"), Err(OUT_OF_RANGE));
        assert_eq!(databases.parse(b"-1"), Err(OUT_OF_RANGE));
        assert_eq!(databases.parse(b"x"), Err(keys::NOT_AN_INTEGER));
        assert_eq!(databases.parse(b"99999999999"), Err(OUT_OF_INT_RANGE));
    }
}

//! Redis's numbered databases: each is a set of the RESP namespace. Database 0 is the
//! configured set (`[resp] set`), database n > 0 the set `<set>-<n>`, so a key's digest, and
//! so its partition and its node on a cluster, depend on its database
//! (`docs/internals/redis-mapping.md`).
//!
//! SELECT changes the session's database; MOVE moves a key to another database; FLUSHALL
//! truncates every database's set. SWAPDB is refused: a key's database is part of its digest,
//! so swapping two databases would rewrite every key of both, neither atomic nor cheap.
//!
//! Invariants:
//! - A session's database is below `resp.databases` (checked at SELECT, asserted here).
//! - The set names are fixed at start-up and distinct.

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
}

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
        Databases { set_names }
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
        &self.set_names[index]
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

/// SWAPDB index index: refused once its arguments are valid, since a database is part of each
/// key's digest (see the module's comment).
fn swapdb(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let databases = &session.state.resp_databases;
    for position in [1, 2] {
        if keys::parse_i64(args.get(position)).is_err() {
            reply.error(match position {
                1 => "ERR invalid first DB index",
                _ => "ERR invalid second DB index",
            });
            return After::Continue;
        }
        if databases.parse(args.get(position)).is_err() {
            reply.error(OUT_OF_RANGE);
            return After::Continue;
        }
    }
    reply.error(SWAPDB_REFUSED);
    After::Continue
}

/// Why SWAPDB is refused.
pub const SWAPDB_REFUSED: &str = "ERR SWAPDB is not supported: a key's database is part of its \
                                  digest, so swapping databases would rewrite every key";

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
    fn database_numbers_parse_with_redis_errors() {
        let databases = Databases::new("redis", 16);
        assert_eq!(databases.parse(b"3"), Ok(Database(3)));
        assert_eq!(databases.parse(b"16"), Err(OUT_OF_RANGE));
        assert_eq!(databases.parse(b"-1"), Err(OUT_OF_RANGE));
        assert_eq!(databases.parse(b"x"), Err(keys::NOT_AN_INTEGER));
        assert_eq!(databases.parse(b"99999999999"), Err(OUT_OF_INT_RANGE));
    }
}

//! Hash commands. A hash is a native map of field to value, shown to Aerospike clients as one
//! MAP bin named `hash` (see `docs/internals/redis-mapping.md`).

use indexmap::IndexMap;
use model::ParticleType;
use wire_resp::Args;

use super::collection::{self, Change, Collection, Failure, ScanOptions, finish};
use super::commands::Command;
use super::keys::{self, Target};
use super::msgpack::{self, Reader};
use super::reply::Reply;
use super::{After, Session, format_double, parse_double};

/// The hash commands.
pub const COMMANDS: &[Command] = &[
    ("hdel", -3, hdel),
    ("hexists", 3, hexists),
    ("hget", 3, hget),
    ("hgetall", 2, |s, a, r| hgetall(s, a, r, Parts::Both)),
    ("hincrby", 4, hincrby),
    ("hincrbyfloat", 4, hincrbyfloat),
    ("hkeys", 2, |s, a, r| hgetall(s, a, r, Parts::Fields)),
    ("hlen", 2, hlen),
    ("hmget", -3, hmget),
    ("hmset", -4, |s, a, r| hset(s, a, r, true)),
    ("hscan", -3, hscan),
    ("hset", -4, |s, a, r| hset(s, a, r, false)),
    ("hsetnx", 4, hsetnx),
    ("hstrlen", 3, hstrlen),
    ("hvals", 2, |s, a, r| hgetall(s, a, r, Parts::Values)),
];

/// Bytes one field costs beyond its field and value bytes: the map entry (two boxed slices and
/// a hash) and its slot in the index table.
const ENTRY_OVERHEAD_BYTES: usize = 48;

/// A Redis hash.
#[derive(Debug, Default)]
pub struct HashValue {
    fields: IndexMap<Box<[u8]>, Box<[u8]>>,
    size_bytes: usize,
}

impl HashValue {
    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.fields.get(field).map(AsRef::as_ref)
    }

    /// Sets `field`; returns whether it is new.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        let added = entry_size(field, value);
        match self.fields.insert(field.into(), value.into()) {
            Some(old) => {
                self.size_bytes = self.size_bytes + added - entry_size(field, &old);
                false
            }
            None => {
                self.size_bytes += added;
                true
            }
        }
    }

    /// Removes `field`; returns whether it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self.fields.swap_remove(field) {
            Some(old) => {
                self.size_bytes -= entry_size(field, &old);
                true
            }
            None => false,
        }
    }

    /// The number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Field and value pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields.iter().map(|(f, v)| (f.as_ref(), v.as_ref()))
    }
}

fn entry_size(field: &[u8], value: &[u8]) -> usize {
    field.len() + value.len() + ENTRY_OVERHEAD_BYTES
}

impl HashValue {
    /// The MAP bin's msgpack.
    fn encoded(&self) -> Vec<u8> {
        let mut encoded = Vec::new();
        msgpack::write_map_len(&mut encoded, self.fields.len());
        for (field, value) in self.iter() {
            msgpack::write_bytes(&mut encoded, field);
            msgpack::write_bytes(&mut encoded, value);
        }
        encoded
    }
}

collection::native_value!(HashValue);

impl Collection for HashValue {
    const BIN: &'static [u8] = b"hash";
    const PARTICLE: ParticleType = ParticleType::Map;
    const TYPE_NAME: &'static str = "hash";

    fn decode(value: &[u8]) -> Option<HashValue> {
        let mut reader = Reader::new(value);
        let count = reader.map_len()?;
        let mut hash = HashValue::default();
        for _ in 0..count {
            let field = reader.scalar()?.to_bytes();
            let value = reader.scalar()?.to_bytes();
            hash.insert(&field, &value);
        }
        reader.is_done().then_some(hash)
    }

    fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// HSET key field value [field value ...] (and HMSET, which answers OK): fields added.
pub fn hset(session: &mut Session, args: &Args, reply: &mut Reply<'_>, legacy_ok: bool) -> After {
    if !args.len().is_multiple_of(2) {
        let name = String::from_utf8_lossy(args.get(0)).to_ascii_lowercase();
        reply.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        return After::Continue;
    }
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        true,
        |hash: &mut HashValue| {
            let mut added = 0;
            for position in (2..args.len()).step_by(2) {
                added += i64::from(hash.insert(args.get(position), args.get(position + 1)));
            }
            Ok(Change::Changed(added))
        },
    );
    finish(reply, outcome, |reply, added| {
        if legacy_ok {
            reply.ok();
        } else {
            reply.integer(added.unwrap_or(0));
        }
    })
}

/// HSETNX key field value: 1 if the field was set, 0 if it existed.
pub fn hsetnx(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        true,
        |hash: &mut HashValue| {
            if hash.get(args.get(2)).is_some() {
                return Ok(Change::Unchanged(0));
            }
            hash.insert(args.get(2), args.get(3));
            Ok(Change::Changed(1))
        },
    );
    finish(reply, outcome, |reply, set| reply.integer(set.unwrap_or(0)))
}

/// HGET key field
pub fn hget(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |hash: Option<&HashValue>| {
        hash.and_then(|hash| hash.get(args.get(2)).map(<[u8]>::to_vec))
    });
    finish(reply, outcome, |reply, value| match value {
        Some(value) => reply.bulk(&value),
        None => reply.null(),
    })
}

/// HMGET key field [field ...]
pub fn hmget(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |hash: Option<&HashValue>| {
        (2..args.len())
            .map(|position| hash.and_then(|hash| hash.get(args.get(position)).map(<[u8]>::to_vec)))
            .collect::<Vec<_>>()
    });
    finish(reply, outcome, |reply, values| {
        reply.array(values.len());
        for value in values {
            match value {
                Some(value) => reply.bulk(&value),
                None => reply.null(),
            }
        }
    })
}

/// What HGETALL, HKEYS and HVALS return.
#[derive(Clone, Copy, Debug)]
pub enum Parts {
    /// Fields and values (a map in RESP3).
    Both,
    /// Fields.
    Fields,
    /// Values.
    Values,
}

/// HGETALL key, HKEYS key, HVALS key
pub fn hgetall(session: &mut Session, args: &Args, reply: &mut Reply<'_>, parts: Parts) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |hash: Option<&HashValue>| {
        let Some(hash) = hash else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(hash.len() * 2);
        for (field, value) in hash.iter() {
            match parts {
                Parts::Both => {
                    out.push(field.to_vec());
                    out.push(value.to_vec());
                }
                Parts::Fields => out.push(field.to_vec()),
                Parts::Values => out.push(value.to_vec()),
            }
        }
        out
    });
    finish(reply, outcome, |reply, items| {
        match parts {
            Parts::Both => reply.map(items.len() / 2),
            Parts::Fields | Parts::Values => reply.array(items.len()),
        }
        items.iter().for_each(|item| reply.bulk(item));
    })
}

/// HDEL key field [field ...]: fields removed.
pub fn hdel(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        false,
        |hash: &mut HashValue| {
            let removed: i64 = (2..args.len())
                .map(|position| i64::from(hash.remove(args.get(position))))
                .sum();
            Ok(Change::when(removed > 0, removed))
        },
    );
    finish(reply, outcome, |reply, removed| {
        reply.integer(removed.unwrap_or(0))
    })
}

/// HEXISTS key field
pub fn hexists(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |hash: Option<&HashValue>| {
        hash.is_some_and(|hash| hash.get(args.get(2)).is_some())
    });
    finish(reply, outcome, |reply, found| {
        reply.integer(i64::from(found))
    })
}

/// HLEN key
pub fn hlen(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |hash: Option<&HashValue>| {
        hash.map_or(0, HashValue::len)
    });
    finish(reply, outcome, |reply, len| {
        reply.integer(i64::try_from(len).unwrap_or(i64::MAX));
    })
}

/// HSTRLEN key field
pub fn hstrlen(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |hash: Option<&HashValue>| {
        hash.and_then(|hash| hash.get(args.get(2)))
            .map_or(0, <[u8]>::len)
    });
    finish(reply, outcome, |reply, len| {
        reply.integer(i64::try_from(len).unwrap_or(i64::MAX));
    })
}

/// HINCRBY key field increment
pub fn hincrby(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let Ok(increment) = keys::parse_i64(args.get(3)) else {
        reply.error(keys::NOT_AN_INTEGER);
        return After::Continue;
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        true,
        |hash: &mut HashValue| {
            let old = match hash.get(args.get(2)) {
                None => 0,
                Some(text) => keys::parse_i64(text)
                    .map_err(|()| Failure::message("ERR hash value is not an integer"))?,
            };
            let new = old
                .checked_add(increment)
                .ok_or_else(|| Failure::message("ERR increment or decrement would overflow"))?;
            hash.insert(args.get(2), new.to_string().as_bytes());
            Ok(Change::Changed(new))
        },
    );
    finish(reply, outcome, |reply, new| reply.integer(new.unwrap_or(0)))
}

/// HINCRBYFLOAT key field increment
pub fn hincrbyfloat(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let Some(increment) = parse_double(args.get(3)) else {
        reply.error("ERR value is not a valid float");
        return After::Continue;
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(
        &target,
        &mut session.writes,
        true,
        |hash: &mut HashValue| {
            let old = match hash.get(args.get(2)) {
                None => 0.0,
                Some(text) => parse_double(text)
                    .ok_or_else(|| Failure::message("ERR hash value is not a float"))?,
            };
            let new = old + increment;
            if !new.is_finite() {
                return Err(Failure::message(
                    "ERR increment would produce NaN or Infinity",
                ));
            }
            let text = format_double(new);
            hash.insert(args.get(2), text.as_bytes());
            Ok(Change::Changed(text))
        },
    );
    finish(reply, outcome, |reply, text| {
        reply.bulk(text.unwrap_or_default().as_bytes());
    })
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]
pub fn hscan(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let options = match ScanOptions::parse(args) {
        Ok(options) => options,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |hash: Option<&HashValue>| {
        let mut out = Vec::new();
        for (field, value) in hash.into_iter().flat_map(HashValue::iter) {
            if options.keeps_under_lock(field) {
                out.push(field.to_vec());
                out.push(value.to_vec());
            }
        }
        out
    });
    let outcome = outcome.map(|items| {
        items
            .chunks_exact(2)
            .filter(|pair| options.matches_late(&pair[0]))
            .flatten()
            .cloned()
            .collect::<Vec<_>>()
    });
    finish(reply, outcome, |reply, items| {
        collection::reply_scan(reply, 2, &items)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::NativeValue as _;

    #[test]
    fn size_follows_inserts_replacements_and_removals() {
        let mut hash = HashValue::default();
        assert!(hash.insert(b"f", b"v"));
        assert!(!hash.insert(b"f", b"longer"));
        assert_eq!(hash.size_bytes(), entry_size(b"f", b"longer"));
        assert!(hash.remove(b"f"));
        assert_eq!(hash.size_bytes(), 0);
        assert!(hash.is_empty());
    }

    #[test]
    fn the_rendered_bin_decodes_to_the_same_hash() {
        let mut hash = HashValue::default();
        hash.insert(b"name", b"Ann");
        hash.insert(&[0xff], &[0x00, 0x01]);
        let decoded = HashValue::decode(&hash.encoded()).expect("decodes");
        assert_eq!(decoded.get(b"name"), Some(&b"Ann"[..]));
        assert_eq!(decoded.get(&[0xff]), Some(&[0x00, 0x01][..]));
        assert_eq!(decoded.size_bytes(), hash.size_bytes());
    }
}

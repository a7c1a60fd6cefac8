//! Geo commands. A geo key is a sorted set whose scores are 52-bit geohashes, as in Redis
//! (`geohash.rs` has the arithmetic; `docs/internals/redis-mapping.md`, "Geo", the mapping):
//! GEOADD is ZADD of encoded points, so ZRANGE, ZREM and every sorted-set command work on a
//! geo key, and a key moved from Redis reads the same.
//!
//! Invariants:
//! - A search reads at most the members of its (up to nine) score ranges, and counts them
//!   first, stopping at [`super::LONG_COMMAND_COST_MIN`]: one that may visit that many asks
//!   for the long-request pool before it does anything.
//! - A search decides a point by its exact distance from the center, computed as Redis
//!   computes it, so the members found are Redis's, including points at the edge.
//! - A command that may store (GEORADIUS ... STORE, GEOSEARCHSTORE) runs whole in the
//!   namespace's exclusive section: its read of the source and its write of the destination
//!   are one step to every other command.

use std::sync::Arc;

use wire_resp::Args;

use super::collection::{self, Change, Failure, finish};
use super::commands::Command;
use super::geohash::{self, Extent, Shape};
use super::keys::{self, Target};
use super::reply::Reply;
use super::zsets::{self, ScoreRange, ZSetValue};
use super::{After, LONG_COMMAND_COST_MIN, Session};

/// The geo commands, with Redis's arities.
pub const COMMANDS: &[Command] = &[
    ("geoadd", -5, geoadd),
    ("geodist", -4, geodist),
    ("geohash", -2, geohash_command),
    ("geopos", -2, geopos),
    ("georadius", -6, |s, a, r| search(s, a, r, Form::Radius)),
    ("georadius_ro", -6, |s, a, r| {
        search(s, a, r, Form::RadiusReadOnly)
    }),
    ("georadiusbymember", -5, |s, a, r| {
        search(s, a, r, Form::Member)
    }),
    ("georadiusbymember_ro", -5, |s, a, r| {
        search(s, a, r, Form::MemberReadOnly)
    }),
    ("geosearch", -7, |s, a, r| search(s, a, r, Form::Search)),
    ("geosearchstore", -8, |s, a, r| {
        search(s, a, r, Form::SearchStore)
    }),
];

/// Redis's reply to a coordinate or distance that is no number.
const NOT_A_FLOAT: &str = "ERR value is not a valid float";
/// Redis's reply to an unknown unit.
const UNKNOWN_UNIT: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";
/// Redis's reply to FROMMEMBER or GEORADIUSBYMEMBER naming a member the key lacks.
const MEMBER_UNKNOWN: &str = "ERR could not decode requested zset member";

/// Runs `run` in the RESP namespace's exclusive section: the keys it reads and writes change
/// together, as one Redis command does.
pub(super) fn isolated<T>(session: &mut Session, run: impl FnOnce(&mut Session) -> T) -> T {
    let state = Arc::clone(&session.state);
    keys::namespace_of(&state).exclusive(|| run(session))
}

// ---------------------------------------------------------------------------------------------
// Arguments

/// A double as Redis's `getDoubleFromObject` reads one, or `error`.
fn double_arg(bytes: &[u8], error: &str) -> Result<f64, Failure> {
    zsets::parse_score(bytes).ok_or_else(|| Failure::message(error))
}

/// A longitude and latitude at `position` (`extractLongLatOrReply`).
fn point_arg(args: &Args, position: usize) -> Result<(f64, f64), Failure> {
    let longitude = double_arg(args.get(position), NOT_A_FLOAT)?;
    let latitude = double_arg(args.get(position + 1), NOT_A_FLOAT)?;
    if !geohash::is_valid(longitude, latitude) {
        // C's `%f`: six decimals, every integral digit.
        return Err(Failure::Message(format!(
            "ERR invalid longitude,latitude pair {longitude:.6},{latitude:.6}"
        )));
    }
    Ok((longitude, latitude))
}

/// Meters per unit of `m`, `km`, `ft` or `mi`, any case (`extractUnitOrReply`).
fn unit_arg(bytes: &[u8]) -> Result<f64, Failure> {
    match bytes.to_ascii_lowercase().as_slice() {
        b"m" => Ok(1.0),
        b"km" => Ok(1000.0),
        b"ft" => Ok(0.3048),
        b"mi" => Ok(1609.34),
        _ => Err(Failure::message(UNKNOWN_UNIT)),
    }
}

/// `radius unit` at `position` (`extractDistanceOrReply`): the radius and meters per unit.
fn radius_arg(args: &Args, position: usize) -> Result<(Extent, f64), Failure> {
    let radius = double_arg(args.get(position), "ERR need numeric radius")?;
    if radius < 0.0 {
        return Err(Failure::message("ERR radius cannot be negative"));
    }
    Ok((Extent::Radius(radius), unit_arg(args.get(position + 1))?))
}

/// `width height unit` at `position` (`extractBoxOrReply`).
fn box_arg(args: &Args, position: usize) -> Result<(Extent, f64), Failure> {
    let width = double_arg(args.get(position), "ERR need numeric width")?;
    let height = double_arg(args.get(position + 1), "ERR need numeric height")?;
    if height < 0.0 || width < 0.0 {
        return Err(Failure::message("ERR height or width cannot be negative"));
    }
    let meters_per_unit = unit_arg(args.get(position + 2))?;
    Ok((Extent::Box { width, height }, meters_per_unit))
}

/// The point a member of `zset` stands for (`longLatFromMember`).
fn member_point(zset: &ZSetValue, member: &[u8]) -> Result<(f64, f64), Failure> {
    zset.score(member)
        .map(geohash::point_of)
        .ok_or_else(|| Failure::message(MEMBER_UNKNOWN))
}

// ---------------------------------------------------------------------------------------------
// Replies

/// A distance as Redis writes one (`fixedpoint_d2string` with 4 decimals): the value times
/// 10^4 rounded to the nearest integer, ties to even, as `llrint` rounds.
pub fn distance_text(distance: f64) -> String {
    if distance == 0.0 {
        return "0.0000".to_owned();
    }
    let scaled = (distance * 10_000.0).round_ties_even() as i64;
    let sign = if scaled < 0 { "-" } else { "" };
    let magnitude = scaled.unsigned_abs();
    format!("{sign}{}.{:04}", magnitude / 10_000, magnitude % 10_000)
}

/// A coordinate as Redis writes one (`addReplyHumanLongDouble`): `%.17Lf` without trailing
/// zeros (nor a trailing dot), `-0` as `0`.
pub fn coordinate_text(value: f64) -> String {
    let mut text = format!("{value:.17}");
    if text.contains('.') {
        let kept = text.trim_end_matches('0').trim_end_matches('.').len();
        text.truncate(kept);
    }
    if text == "-0" {
        text = "0".to_owned();
    }
    text
}

/// Answers a coordinate: a RESP3 double, a RESP2 bulk string, with [`coordinate_text`].
fn reply_coordinate(reply: &mut Reply<'_>, value: f64) {
    let text = coordinate_text(value);
    if reply.is_resp3() {
        reply.encoded(format!(",{text}\r\n").as_bytes());
    } else {
        reply.bulk(text.as_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// GEOADD, GEOPOS, GEODIST, GEOHASH

/// GEOADD key [NX | XX] [CH] longitude latitude member [longitude latitude member ...]
pub fn geoadd(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut position = 2;
    while position < args.len() {
        match args.get(position).to_ascii_lowercase().as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"ch" => ch = true,
            _ => break,
        }
        position += 1;
    }
    let remaining = args.len() - position;
    if remaining == 0 || !remaining.is_multiple_of(3) || (nx && xx) {
        reply.error(keys::SYNTAX_ERROR);
        return After::Continue;
    }
    let mut points = Vec::with_capacity(remaining / 3);
    for first in (position..args.len()).step_by(3) {
        match point_arg(args, first) {
            Ok((longitude, latitude)) => {
                let score =
                    geohash::score_of(longitude, latitude).expect("a valid point has a score");
                points.push((score as f64, args.get(first + 2)));
            }
            Err(failure) => {
                failure.reply(reply);
                return After::Continue;
            }
        }
    }
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::modify(&target, &mut session.writes, !xx, |zset| {
        Ok(add_points(zset, &points, nx, xx))
    });
    finish(reply, outcome, |reply, counts| {
        let (added, changed) = counts.unwrap_or_default();
        let answer = if ch { added + changed } else { added };
        reply.integer(i64::try_from(answer).unwrap_or(i64::MAX));
    })
}

/// ZADD's work for GEOADD's points (`zsetAdd` without GT, LT or INCR): how many were added
/// and how many existing members moved.
fn add_points(
    zset: &mut ZSetValue,
    points: &[(f64, &[u8])],
    nx: bool,
    xx: bool,
) -> Change<(usize, usize)> {
    let (mut added, mut changed) = (0, 0);
    for &(score, member) in points {
        match zset.score(member) {
            None if xx => {}
            None => {
                zset.insert(member, score);
                added += 1;
            }
            Some(_) if nx => {}
            Some(current) => {
                if current != score {
                    zset.insert(member, score);
                    changed += 1;
                }
            }
        }
    }
    Change::when(added + changed > 0, (added, changed))
}

/// GEOPOS key [member ...]: each member's longitude and latitude, or a null array.
pub fn geopos(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |zset: Option<&ZSetValue>| {
        (2..args.len())
            .map(|position| {
                zset.and_then(|zset| zset.score(args.get(position)))
                    .map(geohash::point_of)
            })
            .collect::<Vec<_>>()
    });
    finish(reply, outcome, |reply, points| {
        reply.array(points.len());
        for point in points {
            match point {
                Some((longitude, latitude)) => {
                    reply.array(2);
                    reply_coordinate(reply, longitude);
                    reply_coordinate(reply, latitude);
                }
                None => reply.null_array(),
            }
        }
    })
}

/// GEODIST key member1 member2 [unit]: the distance, with 4 decimals, or null.
pub fn geodist(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let meters_per_unit = match args.len() {
        4 => Ok(1.0),
        5 => unit_arg(args.get(4)),
        _ => Err(Failure::message(keys::SYNTAX_ERROR)),
    };
    let meters_per_unit = match meters_per_unit {
        Ok(meters_per_unit) => meters_per_unit,
        Err(failure) => {
            failure.reply(reply);
            return After::Continue;
        }
    };
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |zset: Option<&ZSetValue>| {
        let zset = zset?;
        let first = geohash::point_of(zset.score(args.get(2))?);
        let second = geohash::point_of(zset.score(args.get(3))?);
        Some(geohash::distance_m(first.0, first.1, second.0, second.1))
    });
    finish(reply, outcome, |reply, distance_m| match distance_m {
        Some(distance_m) => reply.bulk(distance_text(distance_m / meters_per_unit).as_bytes()),
        None => reply.null(),
    })
}

/// GEOHASH key [member ...]: each member's 11-character standard geohash, or null.
pub fn geohash_command(session: &mut Session, args: &Args, reply: &mut Reply<'_>) -> After {
    let target = Target::of(&session.state, session.database, args.get(1));
    let outcome = collection::read(&target, |zset: Option<&ZSetValue>| {
        (2..args.len())
            .map(|position| {
                zset.and_then(|zset| zset.score(args.get(position)))
                    .map(geohash::standard_text)
            })
            .collect::<Vec<_>>()
    });
    finish(reply, outcome, |reply, texts| {
        reply.array(texts.len());
        for text in texts {
            match text {
                Some(text) => reply.bulk(&text),
                None => reply.null(),
            }
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Searches

/// Which search command runs (Redis's `georadiusGeneric` flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// GEORADIUS key longitude latitude radius unit ...
    Radius,
    /// GEORADIUS_RO: no STORE.
    RadiusReadOnly,
    /// GEORADIUSBYMEMBER key member radius unit ...
    Member,
    /// GEORADIUSBYMEMBER_RO: no STORE.
    MemberReadOnly,
    /// GEOSEARCH key FROM... BY... ...
    Search,
    /// GEOSEARCHSTORE destination source FROM... BY... ... [STOREDIST]
    SearchStore,
}

impl Form {
    /// Where the source key is.
    fn source_position(self) -> usize {
        if self == Form::SearchStore { 2 } else { 1 }
    }

    /// Whether it is GEOSEARCH or GEOSEARCHSTORE (FROM... and BY... options).
    fn is_search(self) -> bool {
        matches!(self, Form::Search | Form::SearchStore)
    }

    /// Whether it takes STORE and STOREDIST with a key.
    fn takes_store_key(self) -> bool {
        matches!(self, Form::Radius | Form::Member)
    }

    /// Whether this request may write a key (a word STORE or STOREDIST among its options
    /// suffices: it then runs in the exclusive section even if the word turns out to be
    /// something else).
    fn may_store(self, args: &Args) -> bool {
        self == Form::SearchStore
            || (self.takes_store_key()
                && (3..args.len()).any(|position| {
                    let word = args.get(position);
                    word.eq_ignore_ascii_case(b"store") || word.eq_ignore_ascii_case(b"storedist")
                }))
    }
}

/// How results are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum Order {
    /// As found: box by box, in score order within a box.
    #[default]
    Unsorted,
    /// Nearest first.
    Ascending,
    /// Farthest first.
    Descending,
}

/// A parsed search.
#[derive(Debug, Default)]
struct Request<'a> {
    /// The center (none yet, or the key is missing and FROMMEMBER could not be read).
    center: Option<(f64, f64)>,
    from_member: bool,
    from_point: bool,
    /// What it covers and the unit's meters.
    extent: Option<(Extent, f64)>,
    by_radius: bool,
    by_box: bool,
    with_distance: bool,
    with_hash: bool,
    with_coordinates: bool,
    order: Order,
    any: bool,
    /// COUNT; 0 when none.
    count: u64,
    /// Where to store the results, and whether their scores are distances.
    store: Option<&'a [u8]>,
    store_distance: bool,
}

impl<'a> Request<'a> {
    /// Parses a search as Redis's `georadiusGeneric` does, errors in its order; `zset` is the
    /// source (members named by FROMMEMBER are looked up as they are parsed).
    fn parse(args: &'a Args, form: Form, zset: Option<&ZSetValue>) -> Result<Self, Failure> {
        let mut request = Request::default();
        let first_option = match form {
            Form::Radius | Form::RadiusReadOnly => {
                request.center = Some(point_arg(args, 2)?);
                request.extent = Some(radius_arg(args, 4)?);
                6
            }
            Form::Member | Form::MemberReadOnly => {
                // A missing key: the rest is parsed for its STORE, nothing read.
                if let Some(zset) = zset {
                    request.center = Some(member_point(zset, args.get(2))?);
                    request.extent = Some(radius_arg(args, 3)?);
                }
                5
            }
            Form::Search => 2,
            Form::SearchStore => {
                request.store = Some(args.get(1));
                3
            }
        };
        let mut position = first_option;
        while position < args.len() {
            position += request.parse_option(args, position, form, zset)?;
        }
        request.check(args, form)?;
        if request.count != 0 && request.order == Order::Unsorted && !request.any {
            // The nearest COUNT: sorted, as Redis does.
            request.order = Order::Ascending;
        }
        Ok(request)
    }

    /// Parses the option at `position`; returns how many arguments it took.
    fn parse_option(
        &mut self,
        args: &'a Args,
        position: usize,
        form: Form,
        zset: Option<&ZSetValue>,
    ) -> Result<usize, Failure> {
        let after = args.len() - position - 1;
        let word = args.get(position).to_ascii_lowercase();
        let search = form.is_search();
        match word.as_slice() {
            b"withdist" => self.with_distance = true,
            b"withhash" => self.with_hash = true,
            b"withcoord" => self.with_coordinates = true,
            b"any" => self.any = true,
            b"asc" => self.order = Order::Ascending,
            b"desc" => self.order = Order::Descending,
            b"count" if after >= 1 => {
                let count = keys::parse_i64(args.get(position + 1))
                    .map_err(|()| Failure::message(keys::NOT_AN_INTEGER))?;
                self.count = u64::try_from(count)
                    .ok()
                    .filter(|&count| count > 0)
                    .ok_or_else(|| Failure::message("ERR COUNT must be > 0"))?;
                return Ok(2);
            }
            b"store" | b"storedist" if after >= 1 && form.takes_store_key() => {
                self.store = Some(args.get(position + 1));
                self.store_distance = word == b"storedist";
                return Ok(2);
            }
            b"storedist" if form == Form::SearchStore => self.store_distance = true,
            b"frommember" if after >= 1 && search && !self.from_point => {
                if let Some(zset) = zset {
                    self.center = Some(member_point(zset, args.get(position + 1))?);
                }
                self.from_member = true;
                return Ok(2);
            }
            b"fromlonlat" if after >= 2 && search && !self.from_member => {
                self.center = Some(point_arg(args, position + 1)?);
                self.from_point = true;
                return Ok(3);
            }
            b"byradius" if after >= 2 && search && !self.by_box => {
                self.extent = Some(radius_arg(args, position + 1)?);
                self.by_radius = true;
                return Ok(3);
            }
            b"bybox" if after >= 3 && search && !self.by_radius => {
                self.extent = Some(box_arg(args, position + 1)?);
                self.by_box = true;
                return Ok(4);
            }
            _ => return Err(Failure::message(keys::SYNTAX_ERROR)),
        }
        Ok(1)
    }

    /// The checks Redis makes once the options are read.
    fn check(&self, args: &Args, form: Form) -> Result<(), Failure> {
        if self.store.is_some() && (self.with_distance || self.with_hash || self.with_coordinates) {
            let what = if form == Form::SearchStore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            };
            return Err(Failure::Message(format!(
                "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
            )));
        }
        // Redis names the command as the client spelled it.
        let name = String::from_utf8_lossy(args.get(0));
        if form.is_search() && !(self.from_member || self.from_point) {
            return Err(Failure::Message(format!(
                "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
            )));
        }
        if form.is_search() && !(self.by_radius || self.by_box) {
            return Err(Failure::Message(format!(
                "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
            )));
        }
        if self.any && self.count == 0 {
            return Err(Failure::message(
                "ERR the ANY argument requires COUNT argument",
            ));
        }
        Ok(())
    }

    /// The shape, once parsed from an existing key.
    fn shape(&self) -> Option<Shape> {
        let (longitude, latitude) = self.center?;
        let (extent, meters_per_unit) = self.extent?;
        Some(Shape {
            longitude,
            latitude,
            extent,
            meters_per_unit,
        })
    }

    /// Meters per unit of the results' distances.
    fn meters_per_unit(&self) -> f64 {
        self.extent
            .map_or(1.0, |(_, meters_per_unit)| meters_per_unit)
    }
}

/// A member found by a search (`geoPoint`).
#[derive(Debug, Clone)]
struct Point {
    member: Vec<u8>,
    longitude: f64,
    latitude: f64,
    distance_m: f64,
    score: f64,
}

/// What a search comes to.
enum Answer<'a> {
    /// It may visit many members: it runs again on the long-request pool.
    Offload,
    /// The points to answer.
    Points(Request<'a>, Vec<Point>),
    /// The number of points stored.
    Stored(usize),
}

/// GEORADIUS, GEORADIUSBYMEMBER and their _RO forms, GEOSEARCH, GEOSEARCHSTORE.
fn search(session: &mut Session, args: &Args, reply: &mut Reply<'_>, form: Form) -> After {
    let outcome = if form.may_store(args) {
        isolated(session, |session| answer(session, args, form))
    } else {
        answer(session, args, form)
    };
    match outcome {
        Ok(Answer::Offload) => After::Offload,
        Ok(Answer::Points(request, points)) => {
            reply_points(reply, &request, &points);
            After::Continue
        }
        Ok(Answer::Stored(count)) => {
            reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
            After::Continue
        }
        Err(failure) => {
            failure.reply(reply);
            After::Continue
        }
    }
}

/// Finds the points, then stores them when the request says so.
fn answer<'a>(session: &mut Session, args: &'a Args, form: Form) -> Result<Answer<'a>, Failure> {
    let target = Target::of(
        &session.state,
        session.database,
        args.get(form.source_position()),
    );
    let found = collection::read(&target, |zset: Option<&ZSetValue>| {
        let request = Request::parse(args, form, zset)?;
        let points = match (zset, request.shape()) {
            (Some(zset), Some(shape)) => {
                let ranges = geohash::search_ranges(&shape);
                if session.should_offload(candidate_count(zset, &ranges)) {
                    return Ok(None);
                }
                let limit = if request.any { request.count } else { 0 };
                points_in(zset, &shape, &ranges, limit)
            }
            _ => Vec::new(),
        };
        Ok(Some((request, points)))
    })??;
    let Some((request, mut points)) = found else {
        return Ok(Answer::Offload);
    };
    order_points(&mut points, request.order);
    if request.count != 0 {
        points.truncate(usize::try_from(request.count).unwrap_or(usize::MAX));
    }
    let Some(destination) = request.store else {
        return Ok(Answer::Points(request, points));
    };
    let scored = points.iter().map(|point| {
        let score = if request.store_distance {
            point.distance_m / request.meters_per_unit()
        } else {
            point.score
        };
        (point.member.as_slice(), score)
    });
    store(session, destination, scored).map(Answer::Stored)
}

/// The members in `ranges`, counted until they reach [`LONG_COMMAND_COST_MIN`].
fn candidate_count(zset: &ZSetValue, ranges: &[(u64, u64)]) -> usize {
    let mut count = 0;
    for &(min, max) in ranges {
        let range = ScoreRange::half_open(min as f64, max as f64);
        count += zset
            .by_score(&range)
            .take(LONG_COMMAND_COST_MIN - count)
            .count();
        if count >= LONG_COMMAND_COST_MIN {
            break;
        }
    }
    count
}

/// The members of `ranges` inside `shape`, box by box, in score order within a box
/// (`membersOfAllNeighbors`); with a `limit` (ANY), the first `limit` found.
fn points_in(zset: &ZSetValue, shape: &Shape, ranges: &[(u64, u64)], limit: u64) -> Vec<Point> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let full = |points: &Vec<Point>| limit != 0 && points.len() >= limit;
    let mut points = Vec::new();
    for &(min, max) in ranges {
        if full(&points) {
            break;
        }
        let range = ScoreRange::half_open(min as f64, max as f64);
        for entry in zset.by_score(&range) {
            let (longitude, latitude) = geohash::point_of(entry.score());
            if let Some(distance_m) = shape.distance_if_inside_m(longitude, latitude) {
                points.push(Point {
                    member: entry.member().to_vec(),
                    longitude,
                    latitude,
                    distance_m,
                    score: entry.score(),
                });
            }
            if full(&points) {
                break;
            }
        }
    }
    points
}

/// Sorts by distance; stable, as the C library's merge sort that Redis's `qsort` is here.
fn order_points(points: &mut [Point], order: Order) {
    let by_distance = |a: &Point, b: &Point| {
        a.distance_m
            .partial_cmp(&b.distance_m)
            .unwrap_or(std::cmp::Ordering::Equal)
    };
    match order {
        Order::Unsorted => {}
        Order::Ascending => points.sort_by(by_distance),
        Order::Descending => points.sort_by(|a, b| by_distance(b, a)),
    }
}

/// Answers the points with what the request asked for: member, then distance, hash and
/// coordinates, each point an array when any of those is asked.
fn reply_points(reply: &mut Reply<'_>, request: &Request<'_>, points: &[Point]) {
    let extras = usize::from(request.with_distance)
        + usize::from(request.with_hash)
        + usize::from(request.with_coordinates);
    reply.array(points.len());
    for point in points {
        if extras > 0 {
            reply.array(extras + 1);
        }
        reply.bulk(&point.member);
        if request.with_distance {
            let distance = point.distance_m / request.meters_per_unit();
            reply.bulk(distance_text(distance).as_bytes());
        }
        if request.with_hash {
            reply.integer(point.score as i64);
        }
        if request.with_coordinates {
            reply.array(2);
            reply_coordinate(reply, point.longitude);
            reply_coordinate(reply, point.latitude);
        }
    }
}

/// Stores the scored members at `destination` as a sorted set (replacing what was there,
/// with no expiry), or deletes `destination` when there are none; returns how many.
fn store<'m>(
    session: &mut Session,
    destination: &[u8],
    scored: impl Iterator<Item = (&'m [u8], f64)>,
) -> Result<usize, Failure> {
    let mut zset = ZSetValue::default();
    let mut count = 0;
    for (member, score) in scored {
        zset.insert(member, score);
        count += 1;
    }
    collection::store_replacing(session, destination, Box::new(zset), count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_print_with_four_decimals_rounded_as_llrint() {
        assert_eq!(distance_text(0.0), "0.0000");
        assert_eq!(distance_text(166.274_151_381_437_6), "166.2742");
        assert_eq!(distance_text(0.000_04), "0.0000");
        assert_eq!(distance_text(0.000_06), "0.0001");
        assert_eq!(distance_text(12.5), "12.5000");
        assert_eq!(distance_text(0.123_46), "0.1235");
        // 0.12345 is 0.1234499... as a double.
        assert_eq!(distance_text(0.123_45), "0.1234");
    }

    #[test]
    fn coordinates_print_as_seventeen_decimals_without_trailing_zeros() {
        assert_eq!(
            coordinate_text(13.361_389_338_970_184),
            "13.36138933897018433"
        );
        assert_eq!(coordinate_text(180.0), "180");
        assert_eq!(coordinate_text(-0.0), "0");
        assert_eq!(coordinate_text(0.5), "0.5");
        assert_eq!(coordinate_text(85.051_128_78), "85.0511287799999991");
    }

    #[test]
    fn geoadd_counts_added_and_changed_members_as_zadd() {
        let mut zset = ZSetValue::default();
        let points: [(f64, &[u8]); 2] = [(1.0, b"a"), (2.0, b"b")];
        assert!(matches!(
            add_points(&mut zset, &points, false, false),
            Change::Changed((2, 0))
        ));
        let moved: [(f64, &[u8]); 2] = [(3.0, b"a"), (4.0, b"c")];
        assert!(matches!(
            add_points(&mut zset, &moved, false, true),
            Change::Changed((0, 1))
        ));
        assert!(matches!(
            add_points(&mut zset, &moved, true, false),
            Change::Changed((1, 0))
        ));
        assert_eq!(zset.score(b"a"), Some(3.0));
        assert!(matches!(
            add_points(&mut zset, &moved, false, false),
            Change::Unchanged((0, 0))
        ));
    }
}

//! GeoJSON geometry: the GeoJSON particle (type 23), the geo index predicates and `GeoCompare`.
//!
//! Pure functions, no engine state. What Aerospike does and what this module copies:
//!
//! - **Accepted input** (the server's `geojson.cc`): a top-level object whose `type` is `Point`,
//!   `Polygon`, `MultiPolygon`, `AeroCircle` (`{"type": "AeroCircle", "coordinates": [[lng,
//!   lat], radius_meters]}`) or `Feature` wrapping one of those in `geometry`. Coordinates are
//!   `[lng, lat]` pairs of exactly two numbers (integers allowed) with `|lat| <= 90` and
//!   `|lng| <= 180`. A ring needs at least four positions once consecutive duplicates are
//!   dropped and must be closed. Everything else (`LineString`, `MultiPoint`,
//!   `GeometryCollection`, a third coordinate, ...) is refused. Aerospike answers
//!   `AS_ERR_GEO_INVALID_GEOJSON` (160) for a bad particle; Osprey's [`ResultCode`] has no such
//!   code, so this module answers [`ResultCode::Parameter`].
//! - **Geometry is spherical** (S2): polygon edges are geodesics, not straight lines in lng/lat;
//!   each ring is normalized to the side that covers at most half the sphere, so ring
//!   orientation does not matter and a ring across the antimeridian is the small region it
//!   looks like; a polygon contains a point when an odd number of its rings do (holes);
//!   a multipolygon is the union of its polygons; a circle is the spherical cap of angle
//!   `radius / 6_371_000 m` (the server's default `geo2dsphere-within-earth-radius-meters`),
//!   so circles over a pole or across the antimeridian just work, a negative radius is an
//!   empty circle and a huge one the whole sphere.
//! - **A point is the centre of its S2 leaf cell**: the server keeps only the leaf cell id of a
//!   point and tests that cell's centre, so every predicate here does the same (a shift of
//!   under a centimetre).
//! - **Matching** (`as_geojson_match`): a query with a point finds the regions (polygons,
//!   multipolygons, circles) that contain it and never points; a query with a region finds
//!   the points within it and never regions. `GeoCompare` applies the same rule to the bin's
//!   value and the expression's constant ([`compare`]).
//! - **The particle** (`particle_geojson.c`): `u8 flags, u16 ncells (big-endian), ncells × u64
//!   cell ids (big-endian), JSON text`. Incoming flags and cells are ignored; the stored form
//!   has flag `0x1` for a region, one cell (the leaf cell) for a point, and for a region the
//!   covering of S2's `RegionCoverer` with the server's particle settings (levels 1..=30,
//!   at most 12 cells, level step 1). The stored bytes are exactly what a reply carries.
//!
//! JSON is read by a small reader of its own here, strict as the server's parser (jansson) is:
//! RFC 8259 text, UTF-8, no trailing data, integers within `i64`, reals within `f64`, no
//! `\u0000`, the last of duplicate keys wins. (`serde_json` would do, but linking it into the
//! engine makes `u8: PartialEq<_>` ambiguous and breaks type inference in other modules.)
//!
//! Invariants: [`parse`] only returns geometries whose coordinates are valid; no function here
//! panics on any input; the JSON size is bounded by [`MAX_JSON_LEN`] and its nesting by
//! [`MAX_JSON_DEPTH`], so hostile input costs bounded time and stack.

use std::f64::consts::{FRAC_PI_2, PI};
use std::fmt;

use model::ResultCode;
use s2::cap::Cap;
use s2::cell::Cell;
use s2::cellid::CellID;
use s2::edge_crossings::{Crossing, EdgeCrosser, crossing_sign, robust_cross_prod};
use s2::latlng::LatLng;
use s2::point::{Point, ordered_ccw};
use s2::predicates::{Direction, robust_sign};
use s2::rect::Rect;
use s2::rect_bounder::RectBounder;
use s2::region::{Region, RegionCoverer};
use s2::s1::angle::{Angle, Rad};

/// The earth radius Aerospike uses to turn a circle's radius into an angle (metres, the
/// namespace default `geo2dsphere-within-earth-radius-meters`).
pub(crate) const EARTH_RADIUS_M: f64 = 6_371_000.0;

/// The largest GeoJSON text accepted, in bytes (Osprey's bound; Aerospike bounds it only by
/// the record size).
pub(crate) const MAX_JSON_LEN: usize = 1 << 20;

/// The deepest nesting of JSON arrays and objects accepted (GeoJSON itself needs five).
pub(crate) const MAX_JSON_DEPTH: usize = 128;

/// Particle flag: the geometry is a region (polygon, multipolygon or circle).
pub(crate) const FLAG_REGION: u8 = 0x1;

/// `flags` (1 byte) and `ncells` (2 bytes) before the cells.
const HEADER_LEN: usize = 3;

/// The server's coverer settings for a stored particle (`geo_region_cover` without a
/// namespace): levels 1..=30, at most 12 cells, every level.
const COVERER: RegionCoverer = RegionCoverer {
    min_level: 1,
    max_level: 30,
    level_mod: 1,
    max_cells: 12,
};

/// More cells than this and the server refuses the covering (`max(6, max_cells)`).
const MAX_COVER_CELLS: usize = 12;

/// Allowed error of a ring's turning angle, per vertex, before it is inverted (S2's bound).
const TURNING_ANGLE_ERROR_PER_VERTEX: f64 = 3.7e-16;

/// A parsed, validated GeoJSON geometry.
#[derive(Clone, Debug)]
pub(crate) enum Geometry {
    /// A point, in degrees as given.
    Point {
        /// Longitude in degrees, within [-180, 180].
        lng: f64,
        /// Latitude in degrees, within [-90, 90].
        lat: f64,
    },
    /// A polygon: one or more rings (S2 treats every ring alike; holes by parity).
    Polygon(Polygon),
    /// The union of polygons.
    MultiPolygon(Vec<Polygon>),
    /// Aerospike's `AeroCircle`: a spherical cap.
    Circle {
        /// Centre as `(lng, lat)` in degrees.
        center: (f64, f64),
        /// Radius in metres on a sphere of [`EARTH_RADIUS_M`]; negative means empty.
        radius_m: f64,
    },
}

/// A polygon as S2 sees it: normalized rings, inside where an odd number of rings contain.
#[derive(Clone, Debug)]
pub(crate) struct Polygon {
    loops: Vec<Loop>,
}

/// One ring: unit vectors (not repeating the first), oriented so that its inside, on the
/// left, covers at most half the sphere.
#[derive(Clone)]
struct Loop {
    vertices: Vec<Point>,
    /// Whether `Point::origin()` is inside; containment counts crossings from there.
    origin_inside: bool,
    /// A bound of the inside (geodesic edges and enclosed poles included).
    bound: Rect,
}

impl fmt::Debug for Loop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loop")
            .field("vertices", &self.vertices.len())
            .field("origin_inside", &self.origin_inside)
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing.

/// Parses GeoJSON text into a geometry, refusing what Aerospike refuses.
///
/// Errors: [`ResultCode::Parameter`] for text over [`MAX_JSON_LEN`], malformed or too deeply
/// nested JSON, an unsupported type, or invalid coordinates or rings.
pub(crate) fn parse(json: &[u8]) -> Result<Geometry, ResultCode> {
    if json.len() > MAX_JSON_LEN {
        return Err(ResultCode::Parameter);
    }
    let object = read_json(json)?;
    match type_of(&object)? {
        "Feature" => {
            let geometry = object.get("geometry").ok_or(ResultCode::Parameter)?;
            shape_of(type_of(geometry)?, geometry.get("coordinates"))
        }
        kind => shape_of(kind, object.get("coordinates")),
    }
}

/// The `type` member of an object, which must be a string.
fn type_of(object: &Json) -> Result<&str, ResultCode> {
    match object.get("type") {
        Some(Json::String(kind)) => Ok(kind),
        _ => Err(ResultCode::Parameter),
    }
}

/// The geometry of one of the four supported types from its `coordinates` member.
fn shape_of(kind: &str, coordinates: Option<&Json>) -> Result<Geometry, ResultCode> {
    let coordinates = coordinates.ok_or(ResultCode::Parameter)?;
    match kind {
        "Point" => {
            let (lng, lat) = position(coordinates)?;
            Ok(Geometry::Point { lng, lat })
        }
        "Polygon" => Ok(Geometry::Polygon(polygon(coordinates)?)),
        "MultiPolygon" => {
            let polygons = array(coordinates)?.iter().map(polygon);
            Ok(Geometry::MultiPolygon(polygons.collect::<Result<_, _>>()?))
        }
        "AeroCircle" => circle(coordinates),
        _ => Err(ResultCode::Parameter),
    }
}

/// The value as a JSON array.
fn array(value: &Json) -> Result<&[Json], ResultCode> {
    match value {
        Json::Array(items) => Ok(items),
        _ => Err(ResultCode::Parameter),
    }
}

/// A JSON number (integer or real) as `f64`.
fn number(value: &Json) -> Result<f64, ResultCode> {
    match value {
        Json::Number(number) => Ok(*number),
        _ => Err(ResultCode::Parameter),
    }
}

/// A `[lng, lat]` position: exactly two numbers, `|lat| <= 90°` and `|lng| <= 180°` as S2
/// checks them (in radians, after conversion).
fn position(value: &Json) -> Result<(f64, f64), ResultCode> {
    let [lng, lat] = array(value)? else {
        return Err(ResultCode::Parameter);
    };
    let (lng, lat) = (number(lng)?, number(lat)?);
    let latlng = LatLng::from_degrees(lat, lng);
    if latlng.lat.rad().abs() <= FRAC_PI_2 && latlng.lng.rad().abs() <= PI {
        Ok((lng, lat))
    } else {
        Err(ResultCode::Parameter)
    }
}

/// A polygon from its array of rings (an empty array is the empty polygon, as in S2).
fn polygon(value: &Json) -> Result<Polygon, ResultCode> {
    let loops = array(value)?.iter().map(ring).collect::<Result<_, _>>()?;
    Ok(Polygon { loops })
}

/// A ring: consecutive duplicates dropped, at least four positions left, closed.
fn ring(value: &Json) -> Result<Loop, ResultCode> {
    let mut points = Vec::new();
    for position_value in array(value)? {
        let (lng, lat) = position(position_value)?;
        let point = sphere_point(lng, lat);
        if points.last() != Some(&point) {
            points.push(point);
        }
    }
    if points.len() < 4 || points.first() != points.last() {
        return Err(ResultCode::Parameter);
    }
    points.pop();
    Ok(Loop::new(points))
}

/// An `AeroCircle` body: `[[lng, lat], radius_meters]`.
fn circle(value: &Json) -> Result<Geometry, ResultCode> {
    let [center, radius] = array(value)? else {
        return Err(ResultCode::Parameter);
    };
    Ok(Geometry::Circle {
        center: position(center)?,
        radius_m: number(radius)?,
    })
}

// ---------------------------------------------------------------------------------------------
// JSON.

/// A JSON value.
#[derive(Debug)]
enum Json {
    /// `true`, `false` or `null`.
    Literal,
    Number(f64),
    String(String),
    Array(Vec<Json>),
    /// Members in input order; lookups take the last of duplicate keys.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The member `key` of an object (the last one if repeated); `None` for a non-object.
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().rev().find(|(k, _)| k == key).map(|m| &m.1),
            _ => None,
        }
    }
}

/// Reads one JSON text: a value with nothing but whitespace around it.
///
/// Errors: [`ResultCode::Parameter`] for anything that is not strict JSON (see the module
/// doc) or nests deeper than [`MAX_JSON_DEPTH`].
fn read_json(text: &[u8]) -> Result<Json, ResultCode> {
    std::str::from_utf8(text).map_err(|_| ResultCode::Parameter)?;
    let mut reader = Reader { text, pos: 0 };
    let value = reader.value(0)?;
    reader.skip_whitespace();
    if reader.pos == text.len() {
        Ok(value)
    } else {
        Err(ResultCode::Parameter)
    }
}

/// A cursor over JSON text already known to be valid UTF-8.
struct Reader<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    /// The next byte, if any, without consuming it.
    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    /// Consumes and returns the next byte.
    fn next(&mut self) -> Result<u8, ResultCode> {
        let byte = self.peek().ok_or(ResultCode::Parameter)?;
        self.pos += 1;
        Ok(byte)
    }

    /// Consumes `byte` or fails.
    fn expect(&mut self, byte: u8) -> Result<(), ResultCode> {
        if self.next()? == byte {
            Ok(())
        } else {
            Err(ResultCode::Parameter)
        }
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// One value at nesting `depth` (the number of enclosing arrays and objects).
    fn value(&mut self, depth: usize) -> Result<Json, ResultCode> {
        self.skip_whitespace();
        match self.peek().ok_or(ResultCode::Parameter)? {
            b'{' | b'[' if depth >= MAX_JSON_DEPTH => Err(ResultCode::Parameter),
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(Json::String),
            b't' => self.literal("true", Json::Literal),
            b'f' => self.literal("false", Json::Literal),
            b'n' => self.literal("null", Json::Literal),
            _ => self.number().map(Json::Number),
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, ResultCode> {
        let end = self.pos + word.len();
        if self.text.get(self.pos..end) == Some(word.as_bytes()) {
            self.pos = end;
            Ok(value)
        } else {
            Err(ResultCode::Parameter)
        }
    }

    /// An object; `depth` counts it.
    fn object(&mut self, depth: usize) -> Result<Json, ResultCode> {
        self.expect(b'{')?;
        let mut members = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_whitespace();
            let key = self.string()?;
            self.skip_whitespace();
            self.expect(b':')?;
            members.push((key, self.value(depth)?));
            self.skip_whitespace();
            match self.next()? {
                b',' => continue,
                b'}' => return Ok(Json::Object(members)),
                _ => return Err(ResultCode::Parameter),
            }
        }
    }

    /// An array; `depth` counts it.
    fn array(&mut self, depth: usize) -> Result<Json, ResultCode> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value(depth)?);
            self.skip_whitespace();
            match self.next()? {
                b',' => continue,
                b']' => return Ok(Json::Array(items)),
                _ => return Err(ResultCode::Parameter),
            }
        }
    }

    /// A string: escapes decoded, raw control characters and `\u0000` refused.
    fn string(&mut self) -> Result<String, ResultCode> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            match self.next()? {
                b'"' => return String::from_utf8(out).map_err(|_| ResultCode::Parameter),
                b'\\' => {
                    let c = self.escape()?;
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                byte if byte < 0x20 => return Err(ResultCode::Parameter),
                byte => out.push(byte),
            }
        }
    }

    /// The character of an escape, after its backslash.
    fn escape(&mut self) -> Result<char, ResultCode> {
        let simple = match self.next()? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(),
            _ => return Err(ResultCode::Parameter),
        };
        Ok(simple)
    }

    /// The character of `\uXXXX` (a surrogate pair takes two), after the `u`.
    fn unicode_escape(&mut self) -> Result<char, ResultCode> {
        let first = self.hex4()?;
        let code = match first {
            0xd800..=0xdbff => {
                self.expect(b'\\')?;
                self.expect(b'u')?;
                let second = self.hex4()?;
                if !(0xdc00..=0xdfff).contains(&second) {
                    return Err(ResultCode::Parameter);
                }
                0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00)
            }
            0 => return Err(ResultCode::Parameter),
            _ => first,
        };
        char::from_u32(code).ok_or(ResultCode::Parameter)
    }

    /// Four hex digits.
    fn hex4(&mut self) -> Result<u32, ResultCode> {
        let mut value = 0;
        for _ in 0..4 {
            let digit = char::from(self.next()?).to_digit(16);
            value = value * 16 + digit.ok_or(ResultCode::Parameter)?;
        }
        Ok(value)
    }

    /// A number by RFC 8259's grammar; an integer must fit `i64`, a real must be finite.
    fn number(&mut self) -> Result<f64, ResultCode> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return Err(ResultCode::Parameter),
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.required_digits()?;
            integer = false;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.required_digits()?;
            integer = false;
        }
        let text = std::str::from_utf8(&self.text[start..self.pos]);
        let text = text.map_err(|_| ResultCode::Parameter)?;
        let value = if integer {
            text.parse::<i64>().map(|i| i as f64).ok()
        } else {
            text.parse::<f64>().ok().filter(|f| f.is_finite())
        };
        value.ok_or(ResultCode::Parameter)
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    /// One or more digits.
    fn required_digits(&mut self) -> Result<(), ResultCode> {
        let start = self.pos;
        self.digits();
        if self.pos > start {
            Ok(())
        } else {
            Err(ResultCode::Parameter)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The particle.

/// Splits particle bytes (request or stored form) into flags, cell bytes and JSON text.
///
/// Errors: [`ResultCode::Parameter`] when the bytes are shorter than the header and cells.
fn split_particle(bytes: &[u8]) -> Result<(u8, &[u8], &[u8]), ResultCode> {
    let [flags, hi, lo, rest @ ..] = bytes else {
        return Err(ResultCode::Parameter);
    };
    let cells_len = usize::from(u16::from_be_bytes([*hi, *lo])) * 8;
    if rest.len() < cells_len {
        return Err(ResultCode::Parameter);
    }
    let (cells, json) = rest.split_at(cells_len);
    Ok((*flags, cells, json))
}

/// Parses a GeoJSON particle as a client sends it and builds its stored form.
///
/// The incoming flags and cells are ignored (clients send none); the stored form carries the
/// region flag and the cells the server would compute, then the JSON text unchanged.
/// Errors: [`ResultCode::Parameter`] for a truncated header, invalid GeoJSON, or a region
/// whose covering exceeds the server's limit.
pub(crate) fn particle_from_wire(bytes: &[u8]) -> Result<(Geometry, Vec<u8>), ResultCode> {
    let (_, _, json) = split_particle(bytes)?;
    let geometry = parse(json)?;
    let cells = cells_of(&geometry)?;
    let ncells = u16::try_from(cells.len()).map_err(|_| ResultCode::Parameter)?;
    let flags = if geometry.is_region() { FLAG_REGION } else { 0 };
    let mut stored = Vec::with_capacity(HEADER_LEN + cells.len() * 8 + json.len());
    stored.push(flags);
    stored.extend_from_slice(&ncells.to_be_bytes());
    for cell in &cells {
        stored.extend_from_slice(&cell.to_be_bytes());
    }
    stored.extend_from_slice(json);
    Ok((geometry, stored))
}

/// The JSON text of a particle, after its flags, cell count and cells.
///
/// Errors: [`ResultCode::Parameter`] when the bytes are shorter than their header says.
pub(crate) fn json_of_particle(stored: &[u8]) -> Result<&[u8], ResultCode> {
    split_particle(stored).map(|(_, _, json)| json)
}

/// The cell ids of a stored particle, in order.
///
/// Errors: [`ResultCode::Parameter`] when the bytes are shorter than their header says.
pub(crate) fn cells_of_particle(stored: &[u8]) -> Result<Vec<u64>, ResultCode> {
    let (_, cells, _) = split_particle(stored)?;
    let words = cells.chunks_exact(8).map(|word| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        u64::from_be_bytes(bytes)
    });
    Ok(words.collect())
}

/// The geometry of a stored particle (its JSON parsed again).
///
/// Errors: [`ResultCode::Parameter`] for a truncated particle or invalid JSON.
pub(crate) fn geometry_of_particle(stored: &[u8]) -> Result<Geometry, ResultCode> {
    parse(json_of_particle(stored)?)
}

/// The S2 cells Aerospike stores: a point's leaf cell, or a region's covering.
fn cells_of(geometry: &Geometry) -> Result<Vec<u64>, ResultCode> {
    if let Geometry::Point { lng, lat } = *geometry {
        return Ok(vec![CellID::from(sphere_point(lng, lat)).0]);
    }
    let cells = COVERER.covering(geometry).0;
    if cells.len() > MAX_COVER_CELLS {
        return Err(ResultCode::Parameter);
    }
    Ok(cells.into_iter().map(|cell| cell.0).collect())
}

/// The cells a GeoJSON text has in a geo index: a point's leaf cell, or a region's covering
/// (what its particle would store); `None` for text that is not valid GeoJSON. Used for
/// GeoJSON inside lists and maps, which is stored as plain JSON text.
pub(crate) fn cells_of_json(json: &[u8]) -> Option<(Geometry, Vec<u64>)> {
    let geometry = parse(json).ok()?;
    let cells = cells_of(&geometry).ok()?;
    Some((geometry, cells))
}

/// The geometry of a GeoJSON value as it reaches an expression or a query: either a stored
/// particle (flags, cells, JSON; its first byte is 0 or 1, which JSON never starts with) or
/// the JSON text alone (a literal, or an item of a list or map).
///
/// Errors: [`ResultCode::Parameter`] when it is neither.
pub(crate) fn geometry_of_value(bytes: &[u8]) -> Result<Geometry, ResultCode> {
    match bytes.first() {
        Some(&flags) if flags == 0 || flags == FLAG_REGION => geometry_of_particle(bytes),
        _ => parse(bytes),
    }
}

/// A GeoJSON value as it is stored (flags, its cells, the JSON text), from either form
/// [`geometry_of_value`] takes: a particle (its cells computed again) or the JSON text alone.
/// Writes that do not come as a client's particle (a UDF's, an expression's) store their
/// GeoJSON this way, so that geo indexes find it.
///
/// Errors: [`ResultCode::GeoInvalidGeojson`] when it is not valid GeoJSON.
pub(crate) fn stored_form(bytes: &[u8]) -> Result<Vec<u8>, ResultCode> {
    let stored = match bytes.first() {
        Some(&flags) if flags == 0 || flags == FLAG_REGION => particle_from_wire(bytes),
        _ => {
            let mut particle = vec![0, 0, 0];
            particle.extend_from_slice(bytes);
            particle_from_wire(&particle)
        }
    };
    stored
        .map(|(_, stored)| stored)
        .map_err(|_| ResultCode::GeoInvalidGeojson)
}

/// The cells of a GeoJSON value as [`geometry_of_value`] takes it: a stored particle's own,
/// or those its JSON text would get; none for bytes that are neither.
pub(crate) fn cells_of_value(bytes: &[u8]) -> Vec<u64> {
    match bytes.first() {
        Some(&flags) if flags == 0 || flags == FLAG_REGION => {
            cells_of_particle(bytes).unwrap_or_default()
        }
        _ => cells_of_json(bytes)
            .map(|(_, cells)| cells)
            .unwrap_or_default(),
    }
}

/// The coverer of a "points within region" query: coarser than a particle's (levels 1..=20,
/// as the server's namespace defaults `geo2dsphere-within-*`), since every candidate is
/// checked exactly anyway.
const QUERY_COVERER: RegionCoverer = RegionCoverer {
    min_level: 1,
    max_level: 20,
    level_mod: 1,
    max_cells: 12,
};

/// The ranges of cell ids (inclusive, sorted, disjoint) a geo index query reads to find every
/// candidate for `query`: for a region, the leaf cells under each cell of its covering (the
/// points within it); for a point, its leaf cell and each of its ancestors (the regions whose
/// coverings hold it). Each range lies within one cube face, so within one half of the `u64`
/// range: read as `i64`, its ends keep their order.
pub(crate) fn query_cell_ranges(query: &Geometry) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = match *query {
        Geometry::Point { lng, lat } => {
            let leaf = CellID::from(sphere_point(lng, lat));
            (1..=30)
                .map(|level| leaf.parent(level).0)
                .map(|id| (id, id))
                .collect()
        }
        _ => QUERY_COVERER
            .covering(query)
            .0
            .into_iter()
            .map(|cell| (cell.range_min().0, cell.range_max().0))
            .collect(),
    };
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (begin, end) in ranges {
        match merged.last_mut() {
            Some(last) if begin <= last.1.saturating_add(1) && (begin >> 63) == (last.1 >> 63) => {
                last.1 = last.1.max(end);
            }
            _ => merged.push((begin, end)),
        }
    }
    merged
}

// ---------------------------------------------------------------------------------------------
// Predicates.

impl Geometry {
    /// Whether this is a region (polygon, multipolygon or circle) rather than a point.
    pub(crate) fn is_region(&self) -> bool {
        !matches!(self, Geometry::Point { .. })
    }

    /// Whether the region contains the unit vector `p` (always false for a point).
    fn contains_point(&self, p: &Point) -> bool {
        match self {
            Geometry::Point { .. } => false,
            Geometry::Polygon(polygon) => polygon.contains(p),
            Geometry::MultiPolygon(polygons) => polygons.iter().any(|poly| poly.contains(p)),
            Geometry::Circle { .. } => self.cap().contains_point(p),
        }
    }

    /// The spherical cap of a circle, the one-point cap of a point, else a bounding cap.
    fn cap(&self) -> Cap {
        match *self {
            Geometry::Point { lng, lat } => Cap::from(&cell_center(lng, lat)),
            Geometry::Circle {
                center: (lng, lat),
                radius_m,
            } => {
                let angle = Angle::from(Rad(radius_m / EARTH_RADIUS_M));
                Cap::from_center_angle(&sphere_point(lng, lat), &angle)
            }
            _ => self.bound().cap_bound(),
        }
    }

    /// A latitude-longitude rectangle holding the whole geometry.
    fn bound(&self) -> Rect {
        match *self {
            Geometry::Point { lng, lat } => Rect::from(LatLng::from(cell_center(lng, lat))),
            Geometry::Polygon(ref polygon) => polygon.bound(),
            Geometry::MultiPolygon(ref polygons) => polygons
                .iter()
                .fold(Rect::empty(), |acc, poly| acc.union(&poly.bound())),
            Geometry::Circle {
                center: (lng, lat),
                radius_m,
            } => circle_bound(lng, lat, radius_m / EARTH_RADIUS_M),
        }
    }
}

/// Whether `candidate` is a point within `region` (a polygon, multipolygon or circle): the
/// "points within region" query. A region candidate never matches, as in Aerospike.
pub(crate) fn within(candidate: &Geometry, region: &Geometry) -> bool {
    match *candidate {
        Geometry::Point { lng, lat } => region.contains_point(&cell_center(lng, lat)),
        _ => false,
    }
}

/// Whether `region` (a polygon, multipolygon or circle) contains `point`: the "regions
/// containing point" query. A point `region` or a region `point` never matches.
pub(crate) fn contains(region: &Geometry, point: &Geometry) -> bool {
    within(point, region)
}

/// The expression `GeoCompare` (and the index match): a point query finds the regions that
/// contain it, a region query the points within it; point-point and region-region are false.
pub(crate) fn compare(bin: &Geometry, query: &Geometry) -> bool {
    if query.is_region() {
        within(bin, query)
    } else {
        contains(bin, query)
    }
}

/// A bounding box `(min_lng, min_lat, max_lng, max_lat)` in degrees, for index pruning, or
/// `None` for an empty geometry (a polygon without rings, a circle with a negative radius).
///
/// The box covers the geodesic edges and the enclosed poles. A geometry that crosses the
/// antimeridian gets the full longitude range [-180, 180], so one box always suffices.
// Kept for an R-tree of bounding boxes; the geo index keys cells instead.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn bounding_box(geometry: &Geometry) -> Option<(f64, f64, f64, f64)> {
    let rect = geometry.bound();
    if rect.is_empty() {
        return None;
    }
    let (lng_lo, lng_hi) = if rect.lng.is_inverted() {
        (-180.0, 180.0)
    } else {
        (rect.lng.lo.to_degrees(), rect.lng.hi.to_degrees())
    };
    let (lat_lo, lat_hi) = (rect.lat.lo.to_degrees(), rect.lat.hi.to_degrees());
    Some((lng_lo, lat_lo.max(-90.0), lng_hi, lat_hi.min(90.0)))
}

// ---------------------------------------------------------------------------------------------
// Spherical geometry (S2 semantics on top of the `s2` crate's robust primitives).

/// The unit vector of a `(lng, lat)` position in degrees.
fn sphere_point(lng: f64, lat: f64) -> Point {
    Point::from(LatLng::from_degrees(lat, lng))
}

/// The bound of a circle of `angle` radians around `(lng, lat)` in degrees: all longitudes
/// when it reaches a pole, else the longitudes where meridians touch it (law of sines), and a
/// hair wider for rounding. (The `s2` crate's `Cap::rect_bound` gets this wrong.)
fn circle_bound(lng: f64, lat: f64, angle: f64) -> Rect {
    const MARGIN: f64 = 1e-12;
    if angle < 0.0 {
        return Rect::empty();
    }
    let (lat, lng) = (lat.to_radians(), lng.to_radians());
    let mut rect = Rect::full();
    rect.lat.lo = (lat - angle - MARGIN).max(-FRAC_PI_2);
    rect.lat.hi = (lat + angle + MARGIN).min(FRAC_PI_2);
    let reaches_pole = rect.lat.lo <= -FRAC_PI_2 || rect.lat.hi >= FRAC_PI_2;
    let (sin_a, sin_c) = (angle.sin(), lat.cos());
    if !reaches_pole && angle < FRAC_PI_2 && sin_a < sin_c {
        let half_width = (sin_a / sin_c).asin() + MARGIN;
        rect.lng.lo = (lng - half_width + PI).rem_euclid(2.0 * PI) - PI;
        rect.lng.hi = (lng + half_width + PI).rem_euclid(2.0 * PI) - PI;
    }
    rect
}

/// The centre of the S2 leaf cell holding a position: how the server sees a stored point.
fn cell_center(lng: f64, lat: f64) -> Point {
    Point::from(CellID::from(sphere_point(lng, lat)))
}

impl Polygon {
    /// Whether an odd number of rings contain `p`.
    fn contains(&self, p: &Point) -> bool {
        self.loops
            .iter()
            .filter(|lp| lp.bound.contains_point(p) && lp.contains(p))
            .count()
            % 2
            == 1
    }

    /// The union of the rings' bounds.
    fn bound(&self) -> Rect {
        self.loops
            .iter()
            .fold(Rect::empty(), |acc, lp| acc.union(&lp.bound))
    }

    /// Whether any ring edge crosses or touches any edge of the cell.
    fn crosses_cell(&self, corners: &[Point; 4]) -> bool {
        self.loops.iter().any(|lp| {
            (0..lp.vertices.len()).any(|i| {
                let (a, b) = (lp.vertex(i), lp.vertex(i + 1));
                (0..4).any(|k| {
                    crossing_sign(a, b, &corners[k], &corners[(k + 1) % 4]) != Crossing::DoNotCross
                })
            })
        })
    }

    /// Whether any ring vertex lies in the cell.
    fn has_vertex_in(&self, cell: &Cell) -> bool {
        self.loops
            .iter()
            .any(|lp| lp.vertices.iter().any(|v| cell.contains_point(v)))
    }
}

/// The four corners of a cell.
fn corners_of(cell: &Cell) -> [Point; 4] {
    [
        cell.vertex(0),
        cell.vertex(1),
        cell.vertex(2),
        cell.vertex(3),
    ]
}

impl Loop {
    /// A ring from at least three distinct unit vectors, inverted if its inside (left of the
    /// edges) would cover more than half the sphere, as S2's `Normalize` does.
    fn new(mut vertices: Vec<Point>) -> Loop {
        let max_error = TURNING_ANGLE_ERROR_PER_VERTEX * vertices.len() as f64;
        if turning_angle(&vertices) < -max_error {
            vertices.reverse();
        }
        let mut lp = Loop {
            vertices,
            origin_inside: false,
            bound: Rect::full(),
        };
        lp.origin_inside = lp.origin_inside();
        lp.bound = lp.compute_bound();
        lp
    }

    /// Vertex `i`, wrapping around.
    fn vertex(&self, i: usize) -> &Point {
        &self.vertices[i % self.vertices.len()]
    }

    /// Whether `Point::origin()` is inside: vertex 1's wedge says whether a point just beside
    /// it is inside; counting crossings from the origin to vertex 1 says the rest.
    fn origin_inside(&self) -> bool {
        let (v0, v1, v2) = (self.vertex(0), self.vertex(1), self.vertex(2));
        let v1_inside = ordered_ccw(&v1.ortho(), v0, v2, v1);
        v1_inside != self.crossing_parity(v1, false)
    }

    /// Whether the ring contains `p`, by the parity of edge crossings from the origin.
    fn contains(&self, p: &Point) -> bool {
        self.crossing_parity(p, self.origin_inside)
    }

    /// `start` flipped once per ring edge that the arc from the origin to `p` crosses.
    fn crossing_parity(&self, p: &Point, start: bool) -> bool {
        let mut crosser = EdgeCrosser::new_with_c(&Point::origin(), p, self.vertex(0));
        let mut inside = start;
        for i in 1..=self.vertices.len() {
            inside ^= crosser.chain_edge_or_vertex_crossing(self.vertex(i));
        }
        inside
    }

    /// The bound of the vertices and geodesic edges, widened to an enclosed pole.
    fn compute_bound(&self) -> Rect {
        let mut bounder = RectBounder::new();
        for i in 0..=self.vertices.len() {
            bounder.add_point(self.vertex(i));
        }
        let mut rect = bounder.get_bound();
        if self.contains(&Point::from_coords(0.0, 0.0, 1.0)) {
            rect.lat.hi = FRAC_PI_2;
            rect.lng = s2::s1::interval::FULL;
        }
        if rect.lng.is_full() && self.contains(&Point::from_coords(0.0, 0.0, -1.0)) {
            rect.lat.lo = -FRAC_PI_2;
        }
        rect
    }
}

/// The sum of the turning angles at the vertices: positive when the left side is the
/// smaller one (S2's `GetTurningAngle`).
fn turning_angle(vertices: &[Point]) -> f64 {
    let n = vertices.len();
    (0..n)
        .map(|i| {
            let a = &vertices[(i + n - 1) % n];
            turn_angle(a, &vertices[i], &vertices[(i + 1) % n])
        })
        .sum()
}

/// The signed angle by which the path a→b→c turns at b (positive turning left).
fn turn_angle(a: &Point, b: &Point, c: &Point) -> f64 {
    let angle = robust_cross_prod(a, b)
        .0
        .angle(&robust_cross_prod(b, c).0)
        .rad();
    if robust_sign(a, b, c) == Direction::CounterClockwise {
        angle
    } else {
        -angle
    }
}

/// The S2 region of a geometry, for the cell covering of the stored particle.
impl Region for Geometry {
    fn cap_bound(&self) -> Cap {
        self.cap()
    }

    fn rect_bound(&self) -> Rect {
        self.bound()
    }

    fn contains_cell(&self, cell: &Cell) -> bool {
        match self {
            Geometry::Point { .. } => false,
            Geometry::Polygon(polygon) => polygon.contains_cell(cell),
            Geometry::MultiPolygon(polygons) => polygons.iter().any(|p| p.contains_cell(cell)),
            Geometry::Circle { .. } => self.cap().contains_cell(cell),
        }
    }

    fn intersects_cell(&self, cell: &Cell) -> bool {
        match self {
            Geometry::Point { lng, lat } => cell.contains_point(&cell_center(*lng, *lat)),
            Geometry::Polygon(polygon) => polygon.intersects_cell(cell),
            Geometry::MultiPolygon(polygons) => polygons.iter().any(|p| p.intersects_cell(cell)),
            Geometry::Circle { .. } => self.cap().intersects_cell(cell),
        }
    }
}

impl Polygon {
    /// Whether the cell lies wholly inside: no ring edge meets the cell's edges, no ring
    /// vertex lies in the cell, and one corner is inside.
    fn contains_cell(&self, cell: &Cell) -> bool {
        let corners = corners_of(cell);
        self.contains(&corners[0]) && !self.crosses_cell(&corners) && !self.has_vertex_in(cell)
    }

    /// Whether the cell meets the polygon: an edge crossing, a corner inside, or a ring
    /// vertex in the cell.
    fn intersects_cell(&self, cell: &Cell) -> bool {
        if !self.bound().intersects(&cell.rect_bound()) {
            return false;
        }
        let corners = corners_of(cell);
        self.crosses_cell(&corners) || self.contains(&corners[0]) || self.has_vertex_in(cell)
    }
}

#[cfg(test)]
mod tests;

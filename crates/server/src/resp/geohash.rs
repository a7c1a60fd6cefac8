//! Geohash arithmetic as Redis's geo commands use it (`docs/internals/redis-mapping.md`, "Geo"):
//! a point is a 52-bit interleaved geohash (26 bits of latitude in the even bits, 26 of
//! longitude in the odd), stored as a sorted-set score; a search covers its shape with the
//! geohash box of the center and its eight neighbours, each box one range of scores, and keeps
//! the points of those ranges whose exact distance is within the shape.
//!
//! Everything here follows Redis's `geohash.c` and `geohash_helper.c` operation by operation,
//! in the same floating-point order, so that a point at the edge of a radius is in or out as
//! it is in Redis. No state: pure functions.

use std::f64::consts::PI;

/// Longitudes a point may have (Redis's `GEO_LONG_MIN`/`GEO_LONG_MAX`).
pub const LONGITUDE_MIN: f64 = -180.0;
/// See [`LONGITUDE_MIN`].
pub const LONGITUDE_MAX: f64 = 180.0;
/// Latitudes a point may have: the limits of the Web Mercator projection (EPSG:900913), which
/// cannot reach the poles (Redis's `GEO_LAT_MIN`/`GEO_LAT_MAX`).
pub const LATITUDE_MIN: f64 = -85.05112878;
/// See [`LATITUDE_MIN`].
pub const LATITUDE_MAX: f64 = 85.05112878;
/// Bits per coordinate in a stored score: 26 + 26 = 52 bits, what a double holds exactly.
pub const STEP_MAX: u8 = 26;
/// The Earth's quadratic mean radius for WGS-84, as Redis's distances use it.
pub const EARTH_RADIUS_M: f64 = 6_372_797.560_856;
/// Half the Mercator projection's width: the radius from which a search needs the coarsest
/// boxes (`geohashEstimateStepsByRadius`).
const MERCATOR_MAX_M: f64 = 20_037_726.37;
/// Degrees to radians, computed as Redis's `D_R` (`M_PI / 180.0`).
const RADIANS_PER_DEGREE: f64 = PI / 180.0;

const _: () = assert!(STEP_MAX as u32 * 2 <= f64::MANTISSA_DIGITS);

/// An interval of one coordinate, in degrees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    /// The low end.
    pub min: f64,
    /// The high end.
    pub max: f64,
}

/// The ranges stored scores are encoded in: longitude +-180, latitude +-85.05112878.
pub const MERCATOR: (Range, Range) = (
    Range {
        min: LONGITUDE_MIN,
        max: LONGITUDE_MAX,
    },
    Range {
        min: LATITUDE_MIN,
        max: LATITUDE_MAX,
    },
);

/// The ranges of the standard geohash (latitude +-90), which GEOHASH answers in.
pub const STANDARD: (Range, Range) = (
    Range {
        min: -180.0,
        max: 180.0,
    },
    Range {
        min: -90.0,
        max: 90.0,
    },
);

/// A geohash of `step` bits per coordinate (`GeoHashBits`). All zero means "no box" in a
/// search's neighbour list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Hash {
    /// Interleaved bits: latitude in the even positions, longitude in the odd.
    pub bits: u64,
    /// Bits per coordinate, 1 to 32.
    pub step: u8,
}

/// The box a geohash names.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    /// Its longitudes.
    pub longitude: Range,
    /// Its latitudes.
    pub latitude: Range,
}

/// Spreads the low 32 bits of `x` into the even bit positions and those of `y` into the odd.
fn interleave(x: u32, y: u32) -> u64 {
    fn spread(value: u32) -> u64 {
        let mut v = u64::from(value);
        v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v << 2)) & 0x3333_3333_3333_3333;
        (v | (v << 1)) & 0x5555_5555_5555_5555
    }
    spread(x) | (spread(y) << 1)
}

/// The inverse of [`interleave`]: the even bits in the low half, the odd bits in the high.
fn deinterleave(interleaved: u64) -> u64 {
    fn gather(value: u64) -> u64 {
        let mut v = value & 0x5555_5555_5555_5555;
        v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
        v = (v | (v >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
        (v | (v >> 16)) & 0x0000_0000_FFFF_FFFF
    }
    gather(interleaved) | (gather(interleaved >> 1) << 32)
}

/// Whether a longitude and latitude can be stored (inside the Mercator limits).
pub fn is_valid(longitude: f64, latitude: f64) -> bool {
    (LONGITUDE_MIN..=LONGITUDE_MAX).contains(&longitude)
        && (LATITUDE_MIN..=LATITUDE_MAX).contains(&latitude)
}

/// The geohash of a point within `ranges` (longitude, latitude) at `step` bits per
/// coordinate (`geohashEncode`); `None` outside the Mercator limits or the ranges.
pub fn encode(ranges: (Range, Range), longitude: f64, latitude: f64, step: u8) -> Option<Hash> {
    let (longitude_range, latitude_range) = ranges;
    if !(1..=32).contains(&step) || !is_valid(longitude, latitude) {
        return None;
    }
    if latitude < latitude_range.min
        || latitude > latitude_range.max
        || longitude < longitude_range.min
        || longitude > longitude_range.max
    {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let latitude_offset =
        (latitude - latitude_range.min) / (latitude_range.max - latitude_range.min) * scale;
    let longitude_offset =
        (longitude - longitude_range.min) / (longitude_range.max - longitude_range.min) * scale;
    // Truncated toward zero, as C converts a double to an unsigned integer.
    Some(Hash {
        bits: interleave(latitude_offset as u32, longitude_offset as u32),
        step,
    })
}

/// The box of `hash` within `ranges` (`geohashDecode`); `None` for the all-zero hash.
pub fn decode(ranges: (Range, Range), hash: Hash) -> Option<Area> {
    if hash.bits == 0 && hash.step == 0 {
        return None;
    }
    let (longitude_range, latitude_range) = ranges;
    let separated = deinterleave(hash.bits);
    let latitude_cell = separated as u32;
    let longitude_cell = (separated >> 32) as u32;
    let cells = (1u64 << hash.step) as f64;
    let at = |range: Range, cell: u32| {
        range.min + (f64::from(cell) * 1.0 / cells) * (range.max - range.min)
    };
    Some(Area {
        latitude: Range {
            min: at(latitude_range, latitude_cell),
            max: at(latitude_range, latitude_cell.wrapping_add(1)),
        },
        longitude: Range {
            min: at(longitude_range, longitude_cell),
            max: at(longitude_range, longitude_cell.wrapping_add(1)),
        },
    })
}

/// The center of `area`, held within the Mercator limits (`geohashDecodeAreaToLongLat`):
/// (longitude, latitude).
pub fn center(area: &Area) -> (f64, f64) {
    let longitude =
        ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONGITUDE_MIN, LONGITUDE_MAX);
    let latitude =
        ((area.latitude.min + area.latitude.max) / 2.0).clamp(LATITUDE_MIN, LATITUDE_MAX);
    (longitude, latitude)
}

/// The 52-bit score of a point inside the Mercator limits (what GEOADD stores).
pub fn score_of(longitude: f64, latitude: f64) -> Option<u64> {
    encode(MERCATOR, longitude, latitude, STEP_MAX).map(align_52)
}

/// The point a sorted-set score stands for (`decodeGeohash`): (longitude, latitude). Any
/// score decodes: it is taken as an unsigned integer first (saturating, where C's conversion
/// of a negative or huge double is undefined).
pub fn point_of(score: f64) -> (f64, f64) {
    let hash = Hash {
        bits: score as u64,
        step: STEP_MAX,
    };
    let area = decode(MERCATOR, hash).expect("a hash of step 26 is never the zero hash");
    center(&area)
}

/// `hash` shifted to 52 bits (`geohashAlign52Bits`): the score of its box's first point.
pub fn align_52(hash: Hash) -> u64 {
    hash.bits << (52 - u32::from(hash.step) * 2)
}

/// The 11-character standard geohash of a stored score, as GEOHASH answers it: the point is
/// decoded and encoded again with latitudes +-90; the 11th character stands for bits Redis does
/// not have and is always `0`.
pub fn standard_text(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (longitude, latitude) = point_of(score);
    let bits = encode(STANDARD, longitude, latitude, STEP_MAX).map_or(0, |hash| hash.bits);
    let mut text = [b'0'; 11];
    for (position, character) in text.iter_mut().enumerate().take(10) {
        let shift = 52 - (position + 1) * 5;
        *character = ALPHABET[((bits >> shift) & 0x1f) as usize];
    }
    text
}

/// Moves `hash` one box east (`d > 0`) or west (`geohash_move_x`), wrapping around.
fn move_x(hash: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let width = 64 - u32::from(hash.step) * 2;
    let mut x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555_u64 >> width;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaa_u64 >> width;
    hash.bits = x | y;
}

/// Moves `hash` one box north (`d > 0`) or south (`geohash_move_y`), wrapping around.
fn move_y(hash: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let width = 64 - u32::from(hash.step) * 2;
    let x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaa_u64 >> width;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555_u64 >> width;
    hash.bits = x | y;
}

/// The order a search visits boxes in (Redis's `membersOfAllNeighbors`): the center, then
/// north, south, east, west, north-east, north-west, south-east, south-west, as (x, y) moves.
const VISIT_MOVES: [(i8, i8); 9] = [
    (0, 0),
    (0, 1),
    (0, -1),
    (1, 0),
    (-1, 0),
    (1, 1),
    (-1, 1),
    (1, -1),
    (-1, -1),
];

/// `hash` and its eight neighbours, in [`VISIT_MOVES`] order.
fn with_neighbors(hash: Hash) -> [Hash; 9] {
    VISIT_MOVES.map(|(dx, dy)| {
        let mut moved = hash;
        move_x(&mut moved, dx);
        move_y(&mut moved, dy);
        moved
    })
}

fn radians(degrees: f64) -> f64 {
    degrees * RADIANS_PER_DEGREE
}

fn degrees(radians: f64) -> f64 {
    radians / RADIANS_PER_DEGREE
}

/// The distance between two latitudes on one meridian (`geohashGetLatDistance`).
pub fn latitude_distance_m(latitude_1: f64, latitude_2: f64) -> f64 {
    EARTH_RADIUS_M * (radians(latitude_2) - radians(latitude_1)).abs()
}

/// The great-circle distance between two points, by the haversine formula
/// (`geohashGetDistance`).
pub fn distance_m(longitude_1: f64, latitude_1: f64, longitude_2: f64, latitude_2: f64) -> f64 {
    let v = ((radians(longitude_2) - radians(longitude_1)) / 2.0).sin();
    // Same meridian: the haversine reduces to the difference of latitudes.
    if v == 0.0 {
        return latitude_distance_m(latitude_1, latitude_2);
    }
    let latitude_1 = radians(latitude_1);
    let latitude_2 = radians(latitude_2);
    let u = ((latitude_2 - latitude_1) / 2.0).sin();
    let a = u * u + latitude_1.cos() * latitude_2.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// What a search covers, in the unit the request named.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Extent {
    /// BYRADIUS: a circle of this radius.
    Radius(f64),
    /// BYBOX: a box this wide and high, its edges on meridians and parallels.
    Box {
        /// East to west.
        width: f64,
        /// North to south.
        height: f64,
    },
}

/// A search's shape (`GeoShape`): a center, an extent, and the unit's size in meters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// The center's longitude.
    pub longitude: f64,
    /// The center's latitude.
    pub latitude: f64,
    /// What it covers, in the unit.
    pub extent: Extent,
    /// Meters per unit (m 1, km 1000, ft 0.3048, mi 1609.34).
    pub meters_per_unit: f64,
}

impl Shape {
    /// The distance of a point from the center, in meters, when the point is inside the
    /// shape (`geoWithinShape`).
    pub fn distance_if_inside_m(&self, longitude: f64, latitude: f64) -> Option<f64> {
        match self.extent {
            Extent::Radius(radius) => {
                let distance = distance_m(self.longitude, self.latitude, longitude, latitude);
                (distance <= radius * self.meters_per_unit).then_some(distance)
            }
            Extent::Box { width, height } => {
                let width_m = width * self.meters_per_unit;
                let height_m = height * self.meters_per_unit;
                if latitude_distance_m(latitude, self.latitude) > height_m / 2.0 {
                    return None;
                }
                if distance_m(longitude, latitude, self.longitude, latitude) > width_m / 2.0 {
                    return None;
                }
                Some(distance_m(
                    self.longitude,
                    self.latitude,
                    longitude,
                    latitude,
                ))
            }
        }
    }

    /// The half-extents in meters: (half height, half width) of the box around the shape.
    fn half_extents_m(&self) -> (f64, f64) {
        match self.extent {
            Extent::Radius(radius) => {
                let radius_m = self.meters_per_unit * radius;
                (radius_m, radius_m)
            }
            Extent::Box { width, height } => (
                self.meters_per_unit * (height / 2.0),
                self.meters_per_unit * (width / 2.0),
            ),
        }
    }

    /// The box around the shape (`geohashBoundingBox`): (longitude, latitude) ranges.
    pub fn bounding_box(&self) -> (Range, Range) {
        let (height_m, width_m) = self.half_extents_m();
        let latitude_delta = degrees(height_m / EARTH_RADIUS_M);
        let longitude_delta_top =
            degrees(width_m / EARTH_RADIUS_M / radians(self.latitude + latitude_delta).cos());
        let longitude_delta_bottom =
            degrees(width_m / EARTH_RADIUS_M / radians(self.latitude - latitude_delta).cos());
        // The box is widest at the edge nearer the equator.
        let longitude_delta = if self.latitude < 0.0 {
            longitude_delta_bottom
        } else {
            longitude_delta_top
        };
        (
            Range {
                min: self.longitude - longitude_delta,
                max: self.longitude + longitude_delta,
            },
            Range {
                min: self.latitude - latitude_delta,
                max: self.latitude + latitude_delta,
            },
        )
    }

    /// The radius, in meters, that sizes the search boxes: the radius, or the half diagonal
    /// of a box.
    fn covering_radius_m(&self) -> f64 {
        let radius = match self.extent {
            Extent::Radius(radius) => radius,
            Extent::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        };
        radius * self.meters_per_unit
    }
}

/// The bits per coordinate of the boxes that cover a radius at a latitude
/// (`geohashEstimateStepsByRadius`).
pub fn steps_for_radius(radius_m: f64, latitude: f64) -> u8 {
    if radius_m == 0.0 {
        return STEP_MAX;
    }
    let mut radius_m = radius_m;
    let mut step: i32 = 1;
    while radius_m < MERCATOR_MAX_M {
        radius_m *= 2.0;
        step += 1;
    }
    // One box coarser, so that the radius fits in most cases.
    step -= 2;
    // Meridians converge toward the poles: coarser boxes there.
    if !(-66.0..=66.0).contains(&latitude) {
        step -= 1;
        if !(-80.0..=80.0).contains(&latitude) {
            step -= 1;
        }
    }
    step.clamp(1, i32::from(STEP_MAX)) as u8
}

/// The boxes a search visits, in order, as half-open score ranges `[min, max)`
/// (`geohashCalculateAreasByShapeWGS84` then `membersOfAllNeighbors`): up to nine; a
/// neighbour equal to the box visited just before it is skipped, as Redis skips it.
pub fn search_ranges(shape: &Shape) -> Vec<(u64, u64)> {
    let boxes = search_boxes(shape);
    let mut ranges = Vec::with_capacity(boxes.len());
    let mut last_visited: Option<(usize, Hash)> = None;
    for (position, hash) in boxes.iter().enumerate() {
        if *hash == Hash::default() {
            continue;
        }
        // Redis compares with the last box it visited only when that was a neighbour (its
        // index 0, the center, reads as "none yet").
        if let Some((last, previous)) = last_visited
            && last != 0
            && previous == *hash
        {
            continue;
        }
        let next = Hash {
            bits: hash.bits + 1,
            step: hash.step,
        };
        ranges.push((align_52(*hash), align_52(next)));
        last_visited = Some((position, *hash));
    }
    ranges
}

/// The center box and its neighbours, those the shape cannot reach zeroed, in
/// [`VISIT_MOVES`] order.
fn search_boxes(shape: &Shape) -> [Hash; 9] {
    let (longitude_bounds, latitude_bounds) = shape.bounding_box();
    let mut steps = steps_for_radius(shape.covering_radius_m(), shape.latitude);
    let encode_at = |steps: u8| {
        encode(MERCATOR, shape.longitude, shape.latitude, steps)
            .expect("a search's center is inside the Mercator limits")
    };
    let mut boxes = with_neighbors(encode_at(steps));
    // Near a box's edge the estimated step may leave part of the shape outside the nine
    // boxes: one step coarser then.
    let area_of = |hash: Hash| decode(MERCATOR, hash).expect("a box of step >= 1");
    let (north, south) = (area_of(boxes[1]), area_of(boxes[2]));
    let (east, west) = (area_of(boxes[3]), area_of(boxes[4]));
    let too_fine = north.latitude.max < latitude_bounds.max
        || south.latitude.min > latitude_bounds.min
        || east.longitude.max < longitude_bounds.max
        || west.longitude.min > longitude_bounds.min;
    if steps > 1 && too_fine {
        steps -= 1;
        boxes = with_neighbors(encode_at(steps));
    }
    if steps >= 2 {
        let area = area_of(boxes[0]);
        // Positions in VISIT_MOVES: north 1, south 2, east 3, west 4, north-east 5,
        // north-west 6, south-east 7, south-west 8.
        let mut zero = |positions: [usize; 3]| positions.map(|p| boxes[p] = Hash::default());
        if area.latitude.min < latitude_bounds.min {
            zero([2, 8, 7]);
        }
        if area.latitude.max > latitude_bounds.max {
            zero([1, 5, 6]);
        }
        if area.longitude.min < longitude_bounds.min {
            zero([4, 8, 6]);
        }
        if area.longitude.max > longitude_bounds.max {
            zero([3, 7, 5]);
        }
    }
    boxes
}

#[cfg(test)]
#[path = "geohash_tests.rs"]
mod tests;

//! Unit tests of the geohash arithmetic. Expected values are redis-server 7.0's answers for
//! the same points (GEOADD then ZSCORE, GEOHASH, GEOPOS, GEODIST).

use super::*;
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};

const PALERMO: (f64, f64) = (13.361389, 38.115556);
const CATANIA: (f64, f64) = (15.087269, 37.502669);

#[test]
fn interleaving_round_trips_and_puts_x_in_the_even_bits() {
    assert_eq!(interleave(1, 0), 1);
    assert_eq!(interleave(0, 1), 2);
    assert_eq!(interleave(u32::MAX, 0), 0x5555_5555_5555_5555);
    let mut rng = SmallRng::seed_from_u64(7);
    for _ in 0..1000 {
        let (x, y) = (rng.random::<u32>(), rng.random::<u32>());
        let separated = deinterleave(interleave(x, y));
        assert_eq!(separated as u32, x);
        assert_eq!((separated >> 32) as u32, y);
    }
}

#[test]
fn scores_are_redis_scores() {
    assert_eq!(score_of(PALERMO.0, PALERMO.1), Some(3_479_099_956_230_698));
    assert_eq!(score_of(CATANIA.0, CATANIA.1), Some(3_479_447_370_796_909));
    assert_eq!(score_of(0.0, 0.0), Some(3_377_699_720_527_872));
    assert_eq!(score_of(-180.0, -85.05112878), Some(0));
    // At the top edge the latitude offset is 2^26 itself, one bit past 52: Redis stores that.
    assert_eq!(score_of(180.0, 85.05112878), Some(13_510_798_882_111_488));
    assert_eq!(score_of(180.1, 0.0), None);
    assert_eq!(score_of(0.0, 85.06), None);
    assert_eq!(score_of(f64::INFINITY, 0.0), None);
}

#[test]
fn points_decode_to_the_center_of_their_cell() {
    let (longitude, latitude) = point_of(3_479_099_956_230_698.0);
    assert_eq!(format!("{longitude:.17}"), "13.36138933897018433");
    assert_eq!(format!("{latitude:.17}"), "38.11555639549629859");
    // Clamped to the limits where the cell's center is past them.
    assert_eq!(point_of(13_510_798_882_111_488.0), (180.0, LATITUDE_MAX));
    // Any score decodes, even one no GEOADD wrote.
    let (longitude, latitude) = point_of(-5.0);
    assert!(is_valid(longitude, latitude));
}

#[test]
fn standard_geohashes_are_redis_text() {
    assert_eq!(&standard_text(3_479_099_956_230_698.0), b"sqc8b49rny0");
    assert_eq!(&standard_text(3_377_699_720_527_872.0), b"s0000000000");
    assert_eq!(&standard_text(13_510_798_882_111_488.0), b"bp05b5048p0");
    assert_eq!(&standard_text(0.0), b"00bh0hbj200");
}

#[test]
fn distances_are_haversine_on_redis_radius() {
    // GEODIST measures between the decoded points: Redis answers 166.2742 km.
    let palermo = point_of(3_479_099_956_230_698.0);
    let catania = point_of(3_479_447_370_796_909.0);
    let distance = distance_m(palermo.0, palermo.1, catania.0, catania.1);
    assert!((distance - 166_274.2).abs() < 0.05, "{distance}");
    assert_eq!(distance_m(1.0, 2.0, 1.0, 2.0), 0.0);
    // Same meridian: the latitude difference times the radius.
    let one_degree = distance_m(10.0, 0.0, 10.0, 1.0);
    assert_eq!(one_degree, EARTH_RADIUS_M * RADIANS_PER_DEGREE);
    let symmetric = distance_m(catania.0, catania.1, palermo.0, palermo.1);
    assert!((symmetric - distance).abs() < 1e-6);
}

#[test]
fn neighbors_move_one_box_and_wrap_around() {
    let hash = encode(MERCATOR, 0.0, 0.0, 4).unwrap();
    let boxes = with_neighbors(hash);
    let center = decode(MERCATOR, hash).unwrap();
    let north = decode(MERCATOR, boxes[1]).unwrap();
    let east = decode(MERCATOR, boxes[3]).unwrap();
    let south_west = decode(MERCATOR, boxes[8]).unwrap();
    assert_eq!(north.latitude.min, center.latitude.max);
    assert_eq!(north.longitude, center.longitude);
    assert_eq!(east.longitude.min, center.longitude.max);
    assert_eq!(south_west.latitude.max, center.latitude.min);
    assert_eq!(south_west.longitude.max, center.longitude.min);
    // East of the last column is the first.
    let edge = encode(MERCATOR, 179.9, 0.0, 4).unwrap();
    let wrapped = decode(MERCATOR, with_neighbors(edge)[3]).unwrap();
    assert_eq!(wrapped.longitude.min, LONGITUDE_MIN);
}

#[test]
fn steps_follow_the_radius_and_the_latitude() {
    assert_eq!(steps_for_radius(0.0, 0.0), 26);
    assert_eq!(steps_for_radius(1.0, 0.0), 24);
    assert_eq!(steps_for_radius(1000.0, 0.0), 14);
    assert_eq!(steps_for_radius(1000.0, 70.0), 13);
    assert_eq!(steps_for_radius(1000.0, -81.0), 12);
    assert_eq!(steps_for_radius(5e7, 0.0), 1);
}

#[test]
fn the_search_boxes_cover_every_point_of_the_shape() {
    // Every point found inside a random shape by brute force has its score in one of the
    // shape's score ranges: the boxes never miss a point.
    let mut rng = SmallRng::seed_from_u64(26);
    for round in 0..300 {
        let center = (
            rng.random_range(-180.0..180.0),
            rng.random_range(-80.0..80.0),
        );
        let extent = if round % 2 == 0 {
            Extent::Radius(rng.random_range(1.0..500.0))
        } else {
            Extent::Box {
                width: rng.random_range(1.0..800.0),
                height: rng.random_range(1.0..800.0),
            }
        };
        let shape = Shape {
            longitude: center.0,
            latitude: center.1,
            extent,
            meters_per_unit: 1000.0,
        };
        let ranges = search_ranges(&shape);
        assert!(!ranges.is_empty() && ranges.len() <= 9);
        for _ in 0..200 {
            let longitude = center.0 + rng.random_range(-8.0..8.0);
            let latitude = center.1 + rng.random_range(-5.0..5.0);
            // On the east and north edges the cell index overflows into bit 53 (as in
            // Redis), past every box: such points are never found.
            if !(-179.9..179.9).contains(&longitude) || !(-85.0..85.0).contains(&latitude) {
                continue;
            }
            let score = score_of(longitude, latitude).unwrap();
            let (longitude, latitude) = point_of(score as f64);
            if shape.distance_if_inside_m(longitude, latitude).is_some() {
                assert!(
                    ranges.iter().any(|&(min, max)| (min..max).contains(&score)),
                    "{shape:?} misses ({longitude}, {latitude})"
                );
            }
        }
    }
}

#[test]
fn boxes_test_latitude_then_longitude_distance() {
    let shape = Shape {
        longitude: 0.0,
        latitude: 0.0,
        extent: Extent::Box {
            width: 200.0,
            height: 100.0,
        },
        meters_per_unit: 1000.0,
    };
    assert!(shape.distance_if_inside_m(0.8, 0.0).is_some());
    assert!(shape.distance_if_inside_m(0.0, 0.8).is_none());
    assert!(shape.distance_if_inside_m(0.8, 0.4).is_some());
    let (longitudes, latitudes) = shape.bounding_box();
    assert!(longitudes.min < -0.89 && longitudes.max > 0.89);
    assert!(latitudes.min < -0.44 && latitudes.max > 0.44);
}

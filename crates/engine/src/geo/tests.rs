use super::*;

/// The Go client's test polygon (`geo_test.go`).
const GO_POLYGON: &str = r#"{
    "type": "Polygon",
    "coordinates": [
        [[-122.500000, 37.000000],[-121.000000, 37.000000],
         [-121.000000, 38.080000],[-122.500000, 38.080000],
         [-122.500000, 37.000000]]
    ]
}"#;

fn geo(json: &str) -> Geometry {
    parse(json.as_bytes()).unwrap()
}

fn point(lng: f64, lat: f64) -> Geometry {
    geo(&format!(
        r#"{{ "type": "Point", "coordinates": [{lng:.6}, {lat:.6}] }}"#
    ))
}

/// The Go tests' 20 points: `(-122 + 0.1 i, 37.5 + 0.1 i)`, formatted with `%f`.
fn go_points() -> Vec<Geometry> {
    (0..20)
        .map(|i| point(-122.0 + 0.1 * f64::from(i), 37.5 + 0.1 * f64::from(i)))
        .collect()
}

fn circle(lng: f64, lat: f64, radius: f64) -> Geometry {
    geo(&format!(
        r#"{{ "type": "AeroCircle", "coordinates": [[{lng:.8}, {lat:.8}], {radius:.6}] }}"#
    ))
}

fn wire(json: &str) -> Vec<u8> {
    let mut bytes = vec![0, 0, 0];
    bytes.extend_from_slice(json.as_bytes());
    bytes
}

#[test]
fn go_region_containing_point_finds_the_one_region() {
    let region = geo(GO_POLYGON);
    let queries = [
        (-122.0, 37.5),
        (-121.7, 37.8),
        (-121.9, 37.6),
        (-121.8, 37.7),
        (-121.6, 37.9),
        (-121.5, 38.0),
    ];
    for (lng, lat) in queries {
        let query = point(lng, lat);
        assert!(contains(&region, &query), "{lng} {lat}");
        assert!(compare(&region, &query));
    }
}

#[test]
fn go_points_within_polygon_are_six() {
    let region = geo(GO_POLYGON);
    let found = go_points().iter().filter(|p| within(p, &region)).count();
    assert_eq!(found, 6);
    let compared = go_points().iter().filter(|p| compare(p, &region)).count();
    assert_eq!(compared, 6);
}

#[test]
fn go_points_within_circle_are_four() {
    let region = circle(-122.0, 37.5, 50_000.0);
    let found = go_points().iter().filter(|p| within(p, &region)).count();
    assert_eq!(found, 4);
}

#[test]
fn matching_never_pairs_points_with_points_or_regions_with_regions() {
    let p = point(-122.0, 37.5);
    let region = geo(GO_POLYGON);
    assert!(!compare(&p, &p));
    assert!(!compare(&region, &region));
    assert!(!within(&region, &region));
    assert!(!contains(&p, &p));
    // A circle stored in a bin is a region: a point query finds it.
    assert!(compare(&circle(-122.0, 37.5, 1000.0), &p));
}

#[test]
fn accepts_feature_integers_and_boundary_coordinates() {
    let feature = r#"{"type": "Feature", "properties": {},
        "geometry": {"type": "Point", "coordinates": [180, -90]}}"#;
    assert!(matches!(geo(feature), Geometry::Point { lng, lat } if lng == 180.0 && lat == -90.0));
    assert!(matches!(
        geo(r#"{"type":"Point","coordinates":[-180,90]}"#),
        Geometry::Point { .. }
    ));
    let multi = r#"{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,0]]],
        [[[10,10],[11,10],[11,11],[10,10]]]]}"#;
    let multi = geo(multi);
    assert!(contains(&multi, &point(10.7, 10.2)));
    assert!(contains(&multi, &point(0.7, 0.2)));
    assert!(!contains(&multi, &point(5.0, 5.0)));
}

#[test]
fn rejects_malformed_and_unsupported_input() {
    let bad = [
        "",
        "{",
        "[]",
        "42",
        r#"{"type": "Point"}"#,
        r#"{"coordinates": [0, 0]}"#,
        r#"{"type": 7, "coordinates": [0, 0]}"#,
        r#"{"type": "LineString", "coordinates": [[0, 0], [1, 1]]}"#,
        r#"{"type": "MultiPoint", "coordinates": [[0, 0]]}"#,
        r#"{"type": "GeometryCollection", "geometries": []}"#,
        r#"{"type": "Feature", "geometry": {"type": "Feature"}}"#,
        r#"{"type": "Feature"}"#,
        r#"{"type": "Point", "coordinates": [0, 0, 0]}"#,
        r#"{"type": "Point", "coordinates": [0]}"#,
        r#"{"type": "Point", "coordinates": ["0", 0]}"#,
        r#"{"type": "Point", "coordinates": [0, 90.000001]}"#,
        r#"{"type": "Point", "coordinates": [180.000001, 0]}"#,
        r#"{"type": "Point", "coordinates": [0, 0]} trailing"#,
        r#"{"type": "Point", "coordinates": [1e999, 0]}"#,
        r#"{"type": "Polygon", "coordinates": [[[0,0],[1,0],[1,1],[0,1]]]}"#,
        r#"{"type": "Polygon", "coordinates": [[[0,0],[1,0],[1,0],[0,0]]]}"#,
        r#"{"type": "Polygon", "coordinates": [[0,0],[1,0],[1,1],[0,0]]}"#,
        r#"{"type": "Polygon", "coordinates": {}}"#,
        r#"{"type": "AeroCircle", "coordinates": [[0, 0]]}"#,
        r#"{"type": "AeroCircle", "coordinates": [[0, 0], "5"]}"#,
        r#"{"type": "AeroCircle", "coordinates": [[0, 95], 5]}"#,
    ];
    for json in bad {
        assert_eq!(
            parse(json.as_bytes()).unwrap_err(),
            ResultCode::Parameter,
            "{json}"
        );
    }
}

#[test]
fn rejects_huge_nesting_and_size_without_panic() {
    let depth = 100_000;
    let nested = format!(
        r#"{{"type":"Polygon","coordinates":{}{}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    );
    assert_eq!(parse(nested.as_bytes()).unwrap_err(), ResultCode::Parameter);
    let big = format!(
        r#"{{"type":"Point","coordinates":[0,0],"pad":"{}"}}"#,
        "x".repeat(MAX_JSON_LEN)
    );
    assert_eq!(parse(big.as_bytes()).unwrap_err(), ResultCode::Parameter);
    assert_eq!(parse(&[0xff, 0xfe]).unwrap_err(), ResultCode::Parameter);
}

#[test]
fn ring_orientation_does_not_matter() {
    let ccw = geo(r#"{"type":"Polygon","coordinates":[[[0,0],[2,0],[2,2],[0,2],[0,0]]]}"#);
    let cw = geo(r#"{"type":"Polygon","coordinates":[[[0,0],[0,2],[2,2],[2,0],[0,0]]]}"#);
    for region in [&ccw, &cw] {
        assert!(contains(region, &point(1.0, 1.0)));
        assert!(!contains(region, &point(3.0, 1.0)));
        assert!(!contains(region, &point(-179.0, -1.0)));
    }
}

#[test]
fn holes_exclude_their_inside() {
    let holed = geo(r#"{"type":"Polygon","coordinates":[
            [[0,0],[10,0],[10,10],[0,10],[0,0]],
            [[4,4],[4,6],[6,6],[6,4],[4,4]]]}"#);
    assert!(contains(&holed, &point(2.0, 2.0)));
    assert!(!contains(&holed, &point(5.0, 5.0)));
    assert!(!contains(&holed, &point(12.0, 5.0)));
}

#[test]
fn polygon_edges_are_geodesics() {
    // The top edge from (-60, 60) to (60, 60) arcs up to about 73.9° at lng 0.
    let region =
        geo(r#"{"type":"Polygon","coordinates":[[[-60,50],[60,50],[60,60],[-60,60],[-60,50]]]}"#);
    assert!(contains(&region, &point(0.0, 70.0)));
    assert!(!contains(&region, &point(0.0, 75.0)));
    let (_, _, _, max_lat) = bounding_box(&region).unwrap();
    assert!(max_lat > 73.8 && max_lat < 74.0, "{max_lat}");
}

#[test]
fn antimeridian_polygon_is_the_small_side() {
    let region =
        geo(r#"{"type":"Polygon","coordinates":[[[170,-5],[-170,-5],[-170,5],[170,5],[170,-5]]]}"#);
    assert!(contains(&region, &point(180.0, 0.0)));
    assert!(contains(&region, &point(-175.0, 1.0)));
    assert!(!contains(&region, &point(0.0, 0.0)));
    assert_eq!(
        bounding_box(&region).map(|b| (b.0, b.2)),
        Some((-180.0, 180.0))
    );
}

#[test]
fn circles_use_the_earth_radius_and_cross_poles_and_antimeridian() {
    // 1° of arc is 111_194.93 m on a 6_371_000 m sphere.
    let metres_per_degree = EARTH_RADIUS_M * PI / 180.0;
    let c = circle(0.0, 0.0, metres_per_degree * 1.001);
    assert!(contains(&c, &point(1.0, 0.0)));
    assert!(!contains(
        &circle(0.0, 0.0, metres_per_degree * 0.999),
        &point(1.0, 0.0)
    ));
    let polar = circle(0.0, 89.0, 300_000.0);
    assert!(contains(&polar, &point(180.0, 89.5)));
    let (min_lng, _, max_lng, max_lat) = bounding_box(&polar).unwrap();
    assert_eq!((min_lng, max_lng, max_lat), (-180.0, 180.0, 90.0));
    let wrap = circle(179.9, 0.0, 50_000.0);
    assert!(contains(&wrap, &point(-179.9, 0.0)));
    assert_eq!(
        bounding_box(&wrap).map(|b| (b.0, b.2)),
        Some((-180.0, 180.0))
    );
    let empty = circle(0.0, 0.0, -1.0);
    assert!(!contains(&empty, &point(0.0, 0.0)));
    assert!(bounding_box(&empty).is_none());
    assert!(contains(&circle(0.0, 0.0, 1e9), &point(180.0, 0.0)));
}

#[test]
fn bounding_boxes_hold_their_geometry() {
    let (min_lng, min_lat, max_lng, max_lat) = bounding_box(&geo(GO_POLYGON)).unwrap();
    assert!(min_lng <= -122.5 && max_lng >= -121.0 && min_lat <= 37.0 && max_lat >= 38.08);
    assert!(min_lng > -122.51 && max_lng < -120.99 && min_lat > 36.99 && max_lat < 38.1);
    let (a, b, c, d) = bounding_box(&point(-122.0, 37.5)).unwrap();
    assert!((a - -122.0).abs() < 1e-6 && (b - 37.5).abs() < 1e-6 && a == c && b == d);
    let c = bounding_box(&circle(-122.0, 37.5, 50_000.0)).unwrap();
    assert!(c.0 < -122.5 && c.2 > -121.5 && c.1 < 37.06 && c.3 > 37.94);
    let empty = geo(r#"{"type":"Polygon","coordinates":[]}"#);
    assert!(bounding_box(&empty).is_none());
    assert!(!contains(&empty, &point(0.0, 0.0)));
}

#[test]
fn point_particle_stores_its_leaf_cell() {
    let json = r#"{ "type": "Point", "coordinates": [-122.000000, 37.500000] }"#;
    // Incoming cells are skipped and ignored.
    let mut request = vec![0xff, 0, 1];
    request.extend_from_slice(&7u64.to_be_bytes());
    request.extend_from_slice(json.as_bytes());
    let (geometry, stored) = particle_from_wire(&request).unwrap();
    assert!(!geometry.is_region());
    assert_eq!(&stored[..3], &[0, 0, 1]);
    let cells = cells_of_particle(&stored).unwrap();
    let leaf = CellID(cells[0]);
    assert!(leaf.is_valid() && leaf.is_leaf());
    assert!(Cell::from(leaf).contains_point(&sphere_point(-122.0, 37.5)));
    assert_eq!(json_of_particle(&stored).unwrap(), json.as_bytes());
    assert!(matches!(
        geometry_of_particle(&stored).unwrap(),
        Geometry::Point { .. }
    ));
}

#[test]
fn region_particles_store_a_covering() {
    for json in [
        GO_POLYGON,
        r#"{"type":"AeroCircle","coordinates":[[-122.0,37.5],50000.0]}"#,
        r#"{"type":"AeroCircle","coordinates":[[0,90],500000]}"#,
    ] {
        let (geometry, stored) = particle_from_wire(&wire(json)).unwrap();
        assert!(geometry.is_region());
        assert_eq!(stored[0], FLAG_REGION, "{json}");
        let cells = cells_of_particle(&stored).unwrap();
        assert!(
            !cells.is_empty() && cells.len() <= MAX_COVER_CELLS,
            "{json}"
        );
        assert_eq!(
            usize::from(u16::from_be_bytes([stored[1], stored[2]])),
            cells.len()
        );
        assert_eq!(json_of_particle(&stored).unwrap(), json.as_bytes());
        let covered = |p: Point| cells.iter().any(|c| CellID(*c).contains(&CellID::from(p)));
        let inside = go_points().into_iter().filter(|p| within(p, &geometry));
        for p in inside {
            let Geometry::Point { lng, lat } = p else {
                continue;
            };
            assert!(covered(sphere_point(lng, lat)), "{json} {lng} {lat}");
        }
    }
    let (_, stored) = particle_from_wire(&wire(r#"{"type":"Polygon","coordinates":[]}"#)).unwrap();
    assert_eq!(stored[..3], [FLAG_REGION, 0, 0]);
    // The whole sphere needs the 24 level-1 cells: over the server's limit of 12.
    let everything = wire(r#"{"type":"AeroCircle","coordinates":[[0,0],1e9]}"#);
    assert_eq!(
        particle_from_wire(&everything).unwrap_err(),
        ResultCode::Parameter
    );
}

#[test]
fn json_reader_is_as_strict_as_jansson() {
    // Escapes in keys and the last of duplicate keys count.
    let escaped = r#"{"t\u0079pe": "Polygon", "type": "Point", "coordinates": [1.5e0, -2]}"#;
    assert!(matches!(geo(escaped), Geometry::Point { lng, lat } if lng == 1.5 && lat == -2.0));
    let ok = r#"{"type":"Point","coordinates":[0,0],"p":{"s":"\"\\\/\b\f\n\r\t\ud83d\ude00","n":[null,true,false,-0.0]}}"#;
    assert!(parse(ok.as_bytes()).is_ok());
    let bad = [
        r#"{"type":"Point","coordinates":[0,0],"s":"\u0000"}"#,
        r#"{"type":"Point","coordinates":[0,0],"s":"\ud83d"}"#,
        r#"{"type":"Point","coordinates":[0,0],"s":"\x"}"#,
        "{\"type\":\"Point\",\"coordinates\":[0,0],\"s\":\"\t\"}",
        r#"{"type":"Point","coordinates":[0,0],}"#,
        r#"{"type":"Point","coordinates":[01,0]}"#,
        r#"{"type":"Point","coordinates":[1.,0]}"#,
        r#"{"type":"Point","coordinates":[+1,0]}"#,
        r#"{"type":"Point","coordinates":[0,0],"big":9223372036854775808}"#,
        r#"{"type":"Point","coordinates":[0,0],"n":nul}"#,
        r#"{'type':'Point','coordinates':[0,0]}"#,
    ];
    for json in bad {
        assert_eq!(
            parse(json.as_bytes()).unwrap_err(),
            ResultCode::Parameter,
            "{json}"
        );
    }
    let big = r#"{"type":"Point","coordinates":[0,0],"big":9223372036854775807}"#;
    assert!(parse(big.as_bytes()).is_ok());
}

#[test]
fn coverings_cover_every_inside_point() {
    let shapes = [
        r#"{"type":"Polygon","coordinates":[
            [[0,0],[10,0],[10,10],[0,10],[0,0]],[[4,4],[4,6],[6,6],[6,4],[4,4]]]}"#,
        r#"{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,0]]],
            [[[10,10],[11,10],[11,11],[10,10]]]]}"#,
        r#"{"type":"Polygon","coordinates":[[[170,-5],[-170,-5],[-170,5],[170,5],[170,-5]]]}"#,
        r#"{"type":"AeroCircle","coordinates":[[179.9,0],50000]}"#,
    ];
    for json in shapes {
        let (geometry, stored) = particle_from_wire(&wire(json)).unwrap();
        let cells = cells_of_particle(&stored).unwrap();
        assert!(
            !cells.is_empty() && cells.len() <= MAX_COVER_CELLS,
            "{json}"
        );
        let mut inside = 0;
        for i in 0..200 {
            for j in 0..100 {
                let (lng, lat) = (-180.0 + 1.8 * f64::from(i), -12.0 + 0.24 * f64::from(j));
                let p = point(lng, lat);
                if !within(&p, &geometry) {
                    continue;
                }
                inside += 1;
                let leaf = CellID::from(cell_center(lng, lat));
                assert!(cells.iter().any(|c| CellID(*c).contains(&leaf)), "{json}");
            }
        }
        assert!(inside > 0, "{json}");
    }
}

#[test]
fn truncated_particles_are_refused() {
    for bytes in [&[][..], &[0][..], &[0, 0][..], &[0, 0, 1, 1, 2, 3][..]] {
        assert_eq!(
            particle_from_wire(bytes).unwrap_err(),
            ResultCode::Parameter
        );
        assert_eq!(json_of_particle(bytes).unwrap_err(), ResultCode::Parameter);
    }
    let bad_json = wire("{not json");
    assert_eq!(
        particle_from_wire(&bad_json).unwrap_err(),
        ResultCode::Parameter
    );
    assert_eq!(json_of_particle(&[0, 0, 0]).unwrap(), b"");
}

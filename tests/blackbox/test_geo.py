"""Geospatial (GEO2DSPHERE) secondary indexes, GeoJSON bins and the GEO compare expression,
through the official client. The queries port the Go client's `geo_test.go`: regions
containing a point, points within a polygon, points within a circle (AeroCircle)."""

from __future__ import annotations

import json

import aerospike
import pytest
from aerospike import exception as ex
from aerospike import predicates as p
from aerospike_helpers import expressions as exp

import harness

# The Go client's test polygon.
GO_POLYGON = {
    "type": "Polygon",
    "coordinates": [
        [[-122.5, 37.0], [-121.0, 37.0], [-121.0, 38.08], [-122.5, 38.08], [-122.5, 37.0]]
    ],
}

# Points the Go client queries for the regions containing them: all inside the polygon.
GO_QUERY_POINTS = [
    (-122.0, 37.5),
    (-121.7, 37.8),
    (-121.9, 37.6),
    (-121.8, 37.7),
    (-121.6, 37.9),
    (-121.5, 38.0),
]


def point(lng: float, lat: float) -> aerospike.GeoJSON:
    return aerospike.GeoJSON({"type": "Point", "coordinates": [lng, lat]})


def diagonal_points(size: int = 20) -> list[tuple[float, float]]:
    """The Go client's points: (-122 + 0.1 i, 37.5 + 0.1 i)."""
    return [(round(-122.0 + 0.1 * i, 6), round(37.5 + 0.1 * i, 6)) for i in range(size)]


def wait_built(client, name: str) -> None:
    import time

    deadline = time.monotonic() + 20
    while harness.parse_kv(harness.info(client, f"sindex/test/{name}"))["load_pct"] != "100":
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.fixture
def geo_index(client, uset):
    """A GEO2DSPHERE index on bin `g` of a fresh set, dropped after the test."""
    name = harness.unique("geo")
    client.index_geo2dsphere_create("test", uset, "g", name)
    wait_built(client, name)
    yield name
    client.index_remove("test", name)


def query(client, uset, predicate) -> list:
    q = client.query("test", uset)
    q.where(predicate)
    return q.results()


def test_geojson_bins_round_trip_and_invalid_geojson_answers_160(client, uset, healthy):
    key = ("test", uset, "p")
    value = point(-122.0, 37.5)
    client.put(key, {"g": value})
    _, _, bins = client.get(key)
    assert isinstance(bins["g"], aerospike.GeoJSON)
    assert bins["g"].dumps() == value.dumps()
    region = aerospike.GeoJSON(GO_POLYGON)
    client.put(key, {"g": region})
    _, _, bins = client.get(key)
    assert json.loads(bins["g"].dumps()) == GO_POLYGON
    bad_values = [
        {"type": "LineString", "coordinates": [[0, 0], [1, 1]]},
        {"type": "Point", "coordinates": [0, 100]},
    ]
    for bad in bad_values:
        with pytest.raises(ex.AerospikeError) as raised:
            client.put(key, {"g": aerospike.GeoJSON(bad)})
        assert raised.value.code == 160
    # GeoJSON inside a list is kept as it is.
    client.put(key, {"l": [value, 1]})
    _, _, bins = client.get(key)
    assert bins["l"][0].dumps() == value.dumps() and bins["l"][1] == 1


def test_regions_containing_a_point(client, uset, geo_index, healthy):
    client.put(("test", uset, 0), {"g": aerospike.GeoJSON(GO_POLYGON)}, policy={"key": aerospike.POLICY_KEY_SEND})
    for lng, lat in GO_QUERY_POINTS:
        found = query(client, uset, p.geo_contains_geojson_point("g", point(lng, lat).dumps()))
        assert len(found) == 1
        assert json.loads(found[0][2]["g"].dumps()) == GO_POLYGON
    # A point outside finds nothing; a point query never finds points.
    assert query(client, uset, p.geo_contains_geojson_point("g", point(-120.0, 37.5).dumps())) == []
    client.put(("test", uset, 1), {"g": point(-122.0, 37.5)})
    found = query(client, uset, p.geo_contains_geojson_point("g", point(-122.0, 37.5).dumps()))
    assert [r[0][2] for r in found] == [0]


def test_points_within_a_polygon(client, uset, geo_index, healthy):
    points = diagonal_points()
    for i, (lng, lat) in enumerate(points):
        client.put(("test", uset, i), {"g": point(lng, lat)}, policy={"key": aerospike.POLICY_KEY_SEND})
    # A region in the index is never a "points within" match.
    client.put(("test", uset, "region"), {"g": aerospike.GeoJSON(GO_POLYGON)})
    found = query(client, uset, p.geo_within_geojson_region("g", json.dumps(GO_POLYGON)))
    assert sorted(r[0][2] for r in found) == [0, 1, 2, 3, 4, 5]
    for r in found:
        assert tuple(json.loads(r[2]["g"].dumps())["coordinates"]) in points


def test_points_within_a_circle(client, uset, geo_index, healthy):
    for i, (lng, lat) in enumerate(diagonal_points()):
        client.put(("test", uset, i), {"g": point(lng, lat)}, policy={"key": aerospike.POLICY_KEY_SEND})
    found = query(client, uset, p.geo_within_radius("g", -122.0, 37.5, 50000.0))
    assert sorted(r[0][2] for r in found) == [0, 1, 2, 3]


def test_the_index_follows_updates_and_deletes(client, uset, geo_index, healthy):
    key = ("test", uset, "moving")
    client.put(key, {"g": point(-122.0, 37.5)}, policy={"key": aerospike.POLICY_KEY_SEND})
    within = p.geo_within_geojson_region("g", json.dumps(GO_POLYGON))
    assert [r[0][2] for r in query(client, uset, within)] == ["moving"]
    client.put(key, {"g": point(10.0, 10.0)})
    assert query(client, uset, within) == []
    client.put(key, {"g": point(-121.9, 37.6)})
    assert [r[0][2] for r in query(client, uset, within)] == ["moving"]
    client.put(key, {"g": 5})
    assert query(client, uset, within) == []
    client.put(key, {"g": point(-121.9, 37.6)})
    client.remove(key)
    assert query(client, uset, within) == []


def test_a_paginated_geo_query_returns_every_point_once(client, uset, geo_index, healthy):
    for i in range(300):
        lng, lat = -122.4 + (i % 20) * 0.05, 37.1 + (i // 20) * 0.05
        client.put(("test", uset, i), {"g": point(round(lng, 6), round(lat, 6))},
                   policy={"key": aerospike.POLICY_KEY_SEND})
    q = client.query("test", uset)
    q.where(p.geo_within_geojson_region("g", json.dumps(GO_POLYGON)))
    q.max_records = 40
    q.paginate()
    seen: list = []
    while not q.is_done():
        page = q.results()
        seen.extend(r[0][2] for r in page)
    assert sorted(seen) == list(range(300))


def test_a_list_geo_index(client, uset, healthy):
    name = harness.unique("geol")
    client.index_list_create("test", uset, "l", aerospike.INDEX_GEO2DSPHERE, name)
    try:
        wait_built(client, name)
        client.put(("test", uset, 1), {"l": [point(-122.0, 37.5), point(0.0, 0.0)]},
                   policy={"key": aerospike.POLICY_KEY_SEND})
        client.put(("test", uset, 2), {"l": [point(10.0, 10.0)]})
        # Two points inside the polygon: the record still comes back once, as from Aerospike
        # (the Go client's secondary_index_test.go:429).
        client.put(("test", uset, 3), {"l": [point(-121.9, 37.6), point(-121.8, 37.7)]},
                   policy={"key": aerospike.POLICY_KEY_SEND})
        q = client.query("test", uset)
        q.where(p.geo_within_geojson_region("l", json.dumps(GO_POLYGON), aerospike.INDEX_TYPE_LIST))
        assert sorted(r[0][2] for r in q.results()) == [1, 3]
    finally:
        client.index_remove("test", name)


def test_cmp_geo_expression(client, uset, healthy):
    inside, outside = ("test", uset, "in"), ("test", uset, "out")
    client.put(inside, {"g": point(-122.0, 37.5), "r": aerospike.GeoJSON(GO_POLYGON)})
    client.put(outside, {"g": point(10.0, 10.0), "r": aerospike.GeoJSON(GO_POLYGON)})
    # Point bin within region bin, and region bin containing point bin.
    for expr in (
        exp.CmpGeo(exp.GeoBin("g"), exp.GeoBin("r")),
        exp.CmpGeo(exp.GeoBin("r"), exp.GeoBin("g")),
    ):
        policy = {"expressions": expr.compile()}
        assert client.get(inside, policy=policy)[2]["g"].dumps() == point(-122.0, 37.5).dumps()
        with pytest.raises(ex.FilteredOut):
            client.get(outside, policy=policy)
    # A literal region.
    literal = exp.CmpGeo(exp.GeoBin("g"), aerospike.GeoJSON(GO_POLYGON))
    assert client.get(inside, policy={"expressions": literal.compile()})[2]["g"] is not None
    # A query filtered by the expression.
    q = client.query("test", uset)
    found = q.results({"expressions": exp.CmpGeo(exp.GeoBin("g"), exp.GeoBin("r")).compile()})
    assert len(found) == 1 and found[0][2]["g"].dumps() == point(-122.0, 37.5).dumps()

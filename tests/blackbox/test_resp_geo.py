"""Redis geo commands (GEOADD, GEOPOS, GEODIST, GEOHASH, GEOSEARCH, GEOSEARCHSTORE, the GEORADIUS
family) through redis-py and raw RESP2/RESP3, compared with Debian's redis-server: a geo key is
a sorted set of 52-bit geohash scores, and every reply, error text included, is redis-server's,
byte for byte.

The randomized comparison prints its seed; GEO_SEED=<seed> replays it.
"""

from __future__ import annotations

import math
import os
import random
import shlex

import pytest

import harness
from test_resp_zsets import Raw


@pytest.fixture
def key():
    return harness.unique("geo")


PALERMO = ("13.361389", "38.115556")
CATANIA = ("15.087269", "37.502669")


# -- through redis-py -------------------------------------------------------------------------


def test_a_geo_key_is_a_sorted_set_of_geohash_scores(r, key):
    assert r.geoadd(key, [*PALERMO, "Palermo", *CATANIA, "Catania"]) == 2
    assert r.type(key) in (b"zset", "zset")
    assert r.zscore(key, "Palermo") == 3479099956230698.0
    assert r.zrange(key, 0, -1) == [b"Palermo", b"Catania"]
    assert r.zrem(key, "Catania") == 1
    assert r.geopos(key, "Catania") == [None]


def test_geopos_geodist_geohash_answer_as_redis(r, key):
    r.geoadd(key, [*PALERMO, "Palermo", *CATANIA, "Catania"])
    (longitude, latitude), missing = r.geopos(key, "Palermo", "nope")
    assert (longitude, latitude) == (13.36138933897018433, 38.11555639549629859)
    assert missing is None
    assert r.geodist(key, "Palermo", "Catania") == 166274.1516
    assert r.geodist(key, "Palermo", "Catania", "km") == 166.2742
    assert r.geodist(key, "Palermo", "Catania", "mi") == 103.3182
    assert r.geodist(key, "Palermo", "nope") is None
    hashes = r.geohash(key, "Palermo", "Catania", "nope")
    hashes = [h.decode() if isinstance(h, bytes) else h for h in hashes]
    assert hashes == ["sqc8b49rny0", "sqdtr74hyu0", None]
    assert r.geopos(harness.unique("none"), "a") == [None]


def test_geoadd_options_follow_zadd(r, key):
    assert r.geoadd(key, [1, 1, "a", 2, 2, "b"]) == 2
    assert r.geoadd(key, [3, 3, "a", 4, 4, "c"], nx=True) == 1
    assert r.geoadd(key, [3, 3, "a", 5, 5, "d"], xx=True) == 0
    assert r.geoadd(key, [6, 6, "a", 6, 6, "b"], xx=True, ch=True) == 2
    assert r.geoadd(key, [6, 6, "a"], ch=True) == 0
    assert sorted(r.zrange(key, 0, -1)) == [b"a", b"b", b"c"]


def test_geosearch_options_shape_the_reply(r, key):
    r.geoadd(key, [*PALERMO, "Palermo", *CATANIA, "Catania"])
    found = r.geosearch(key, longitude=15, latitude=37, radius=200, unit="km", sort="ASC")
    assert found == [b"Catania", b"Palermo"]
    found = r.geosearch(
        key, member="Palermo", radius=200, unit="km", withdist=True, withhash=True, withcoord=True
    )
    palermo = (13.36138933897018433, 38.11555639549629859)
    assert found[0] == [b"Palermo", 0.0, 3479099956230698, palermo]
    assert found[1][:3] == [b"Catania", 166.2742, 3479447370796909]
    found = r.geosearch(key, longitude=15, latitude=37, width=400, height=400, unit="km", count=1)
    assert found == [b"Catania"]
    destination = harness.unique("dst")
    assert r.geosearchstore(destination, key, longitude=15, latitude=37, radius=200, unit="km",
                            storedist=True) == 2
    assert r.zscore(destination, "Catania") == pytest.approx(56.4413, abs=1e-4)
    assert r.georadiusbymember(key, "Palermo", 100, unit="km") == [b"Palermo"]
    assert r.georadius(key, 15, 37, 200, unit="km", store=destination) == 2
    assert r.zscore(destination, "Palermo") == 3479099956230698.0
    assert r.ttl(destination) == -1


def test_searches_of_a_missing_key_answer_empty_and_delete_the_destination(r, key):
    destination = harness.unique("dst")
    r.set(destination, "x")
    assert r.geosearch(key, longitude=1, latitude=1, radius=1, unit="km") == []
    assert r.geosearchstore(destination, key, longitude=1, latitude=1, radius=1, unit="km") == 0
    assert r.exists(destination) == 0


def test_a_large_search_runs_on_the_long_request_pool_with_the_same_answer(resp_server, key):
    # 30,000 points in one small area: a search over them all visits more members than the
    # long-request threshold (20,000), runs on the pool, and still answers every point.
    client = resp_server.redis()
    rng = random.Random(3)
    for start in range(0, 30_000, 1_000):
        points = []
        for i in range(start, start + 1_000):
            points += [10 + rng.random() * 0.01, 20 + rng.random() * 0.01, f"p{i}"]
        client.geoadd(key, points)
    found = client.geosearch(key, longitude=10.005, latitude=20.005, radius=10, unit="km")
    assert len(found) == 30_000
    assert client.geosearch(key, longitude=10.005, latitude=20.005, radius=10, unit="km",
                            count=3, any=True)[0].startswith(b"p")


# -- the same bytes as redis-server -------------------------------------------------------------

# Every error and edge the argument parsing has, in Redis's order of checks.
SCRIPT = """
GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
GEOADD g 180 85.05112878 ne -180 -85.05112878 sw 0 0 zero
GEOADD g 200 10 m
GEOADD g 10 -86 m
GEOADD g 1e300 10 m
GEOADD g inf 10 m
GEOADD g abc 10 m
GEOADD g 10 1e400 m
GEOADD g 1 2
GEOADD g 1 2 m 3
GEOADD g xx nx 1 2 m
GEOADD g ch xx 1 2 m
GEOADD g ch ch ch
GEOADD s 1 1 m
SET str x
GEOADD str 1 1 m
GEOADD str 200 1 m
GEOPOS str m
GEOPOS g Palermo nope ne sw zero
GEOPOS g
GEOPOS nokey a
GEOHASH g Palermo Catania ne sw zero nope
GEOHASH nokey a
GEODIST g Palermo Catania
GEODIST g Palermo Catania KM
GEODIST g Palermo Catania ft
GEODIST g Palermo Catania mi
GEODIST g Palermo Catania parsec
GEODIST g Palermo Catania km extra
GEODIST g Palermo nope
GEODIST nokey a b
GEODIST nokey a b parsec
GEODIST str a b
ZRANGE g 0 -1 WITHSCORES
GEOSEARCH g FROMMEMBER Palermo BYRADIUS 200 km WITHCOORD WITHDIST WITHHASH ASC
GEOSEARCH g FROMLONLAT 15 37 BYBOX 400 400 km
GEOSEARCH g FROMLONLAT 15 37 BYBOX 400 400 km DESC COUNT 1
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 200 km COUNT 1 ANY
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS -1 km
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 1 kmx
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS x km
GEOSEARCH g FROMLONLAT 15 37 BYBOX x 1 km
GEOSEARCH g FROMLONLAT 15 37 BYBOX 1 x km
GEOSEARCH g FROMLONLAT 15 37 BYBOX -1 1 km
GEOSEARCH g FROMLONLAT 15 37 BYBOX 1 1 parsec
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 1 km ANY
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 1 km COUNT 0
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 1 km COUNT -3
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 1 km COUNT x
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 1 km COUNT
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 1 km BYBOX 1 1 km
GEOSEARCH g FROMLONLAT 15 37 FROMMEMBER Palermo BYRADIUS 1 km
GEOSEARCH g FROMMEMBER nope BYRADIUS 1 km
GEOSEARCH g FROMLONLAT 200 37 BYRADIUS 1 km
GEOSEARCH g BYRADIUS 1 km WITHDIST
GEOSEARCH g FROMLONLAT 15 37 WITHDIST
geosearch g FROMLONLAT 15 37 withdist asc
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 1 km STORE x
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 1 km STOREDIST
GEOSEARCH nokey FROMMEMBER nope BYRADIUS 1 km
GEOSEARCH nokey FROMMEMBER nope BYRADIUS 1 km ANY
GEOSEARCH str FROMLONLAT 15 37 BYRADIUS 1 km
GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 0 km
GEOSEARCH g FROMMEMBER zero BYRADIUS 0 m WITHDIST
GEOSEARCH g FROMLONLAT 179.9 85 BYRADIUS 5000 km WITHCOORD
GEOSEARCH g FROMLONLAT -179.9 -85 BYBOX 9000 9000 km WITHCOORD
GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 30000 km WITHHASH
GEOSEARCHSTORE d g FROMLONLAT 15 37 BYRADIUS 200 km WITHDIST
GEOSEARCHSTORE d g FROMLONLAT 15 37 BYRADIUS 200 km
ZRANGE d 0 -1 WITHSCORES
GEOSEARCHSTORE d g FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST COUNT 1
ZCARD d
GEOSEARCHSTORE d g FROMLONLAT 15 37 BYRADIUS 1 m
EXISTS d
GEOSEARCHSTORE d nokey FROMLONLAT 15 37 BYRADIUS 1 m
GEOSEARCHSTORE d str FROMLONLAT 15 37 BYRADIUS 1 m
GEORADIUS g 15 37 200 km WITHDIST WITHCOORD DESC
GEORADIUS g 15 37 200 km STORE x WITHDIST
GEORADIUS g 15 37 200 km STORE r
ZRANGE r 0 -1 WITHSCORES
GEORADIUS g 15 37 200 km STOREDIST
GEORADIUS g 15 37 abc km
GEORADIUS g 200 37 1 km
GEORADIUS g 15 37 1 parsec
GEORADIUS g 15 37 1 km FROMMEMBER Palermo
GEORADIUS_RO g 15 37 200 km STORE x
GEORADIUS_RO g 15 37 200 km ASC COUNT 1
GEORADIUSBYMEMBER g Palermo 200 km WITHDIST ASC
GEORADIUSBYMEMBER g nope 200 km
GEORADIUSBYMEMBER g Palermo abc km
GEORADIUSBYMEMBER nokey m abc xyz
GEORADIUSBYMEMBER nokey m abc xyz STORE r
EXISTS r
GEORADIUSBYMEMBER nokey m abc xyz STORE
GEORADIUSBYMEMBER_RO g Palermo 200 km STORE r
GEORADIUSBYMEMBER_RO g Palermo 200 km WITHHASH
GEORADIUSBYMEMBER str m 1 km
"""


def test_replies_are_byte_for_byte_those_of_redis_server(resp_server, redis_server_port):
    commands = [shlex.split(line) for line in SCRIPT.strip().splitlines()]
    compare(resp_server, redis_server_port, commands)


def compare(resp_server, redis_port, commands, protocols=(2, 3)):
    """Runs `commands` on a flushed Osprey and a flushed redis-server; every reply must be
    the same bytes. Osprey's module server is this module's alone, so key names are shared."""
    for protocol in protocols:
        ours, theirs = Raw(resp_server.resp_port, protocol), Raw(redis_port, protocol)
        try:
            ours("FLUSHALL")
            theirs("FLUSHALL")
            for command in commands:
                expected = theirs(*command)
                got = ours(*command)
                assert got == expected, f"RESP{protocol} {shlex.join(map(str, command))}"
        finally:
            ours.close()
            theirs.close()


@pytest.mark.parametrize(
    "command,count",
    [("GEOADD", 4), ("GEODIST", 3), ("GEOHASH", 1), ("GEOPOS", 1), ("GEORADIUS", 5),
     ("GEORADIUS_RO", 5), ("GEORADIUSBYMEMBER", 4), ("GEORADIUSBYMEMBER_RO", 4),
     ("GEOSEARCH", 6), ("GEOSEARCHSTORE", 7)],
)
def test_arity_follows_redis(resp_server, redis_server_port, command, count):
    compare(resp_server, redis_server_port, [[command] + ["g"] * (count - 1)], protocols=(2,))


# -- randomized comparison ----------------------------------------------------------------------


def destination(longitude, latitude, bearing, distance_m):
    """The point `distance_m` from a point along `bearing` (radians), on a sphere of Redis's
    radius: points placed at a search's edge."""
    radius = 6372797.560856
    lat1, lon1 = math.radians(latitude), math.radians(longitude)
    angle = distance_m / radius
    lat2 = math.asin(
        math.sin(lat1) * math.cos(angle) + math.cos(lat1) * math.sin(angle) * math.cos(bearing)
    )
    lon2 = lon1 + math.atan2(math.sin(bearing) * math.sin(angle) * math.cos(lat1),
                             math.cos(angle) - math.sin(lat1) * math.sin(lat2))
    lon2 = (math.degrees(lon2) + 540) % 360 - 180
    return lon2, max(-85.05, min(85.05, math.degrees(lat2)))


def random_commands(rng: random.Random, rounds: int) -> list[list[str]]:
    units = {"m": 1.0, "km": 1000.0, "ft": 0.3048, "mi": 1609.34}
    commands = []
    for round_index in range(rounds):
        key = f"g{round_index % 3}"
        center = (rng.uniform(-179, 179), rng.uniform(-84, 84))
        unit = rng.choice(list(units))
        radius_km = rng.choice([rng.uniform(0.01, 5), rng.uniform(5, 300), rng.uniform(300, 3000)])
        radius = radius_km * 1000
        radius_in_unit = radius / units[unit]
        points = []
        for i in range(rng.randrange(5, 40)):
            # Most points near the circle's edge, some well inside, some anywhere.
            spread = rng.choice([1 + rng.uniform(-1e-6, 1e-6), 1 + rng.uniform(-0.02, 0.02),
                                 rng.uniform(0, 1), rng.uniform(0, 3)])
            longitude, latitude = destination(*center, rng.uniform(0, 2 * math.pi), radius * spread)
            points += [f"{longitude:.7f}", f"{latitude:.7f}", f"m{round_index}_{i}"]
        commands.append(["GEOADD", key, *points])
        lon, lat = f"{center[0]:.7f}", f"{center[1]:.7f}"
        r = f"{radius_in_unit:.6f}"
        options = rng.sample(["WITHCOORD", "WITHDIST", "WITHHASH"], rng.randrange(0, 4))
        order = rng.choice([[], ["ASC"], ["DESC"]])
        count = rng.choice([[], [], ["COUNT", str(rng.randrange(1, 10))]])
        width = f"{radius_in_unit * rng.uniform(0.5, 2):.6f}"
        height = f"{radius_in_unit * rng.uniform(0.5, 2):.6f}"
        member = f"m{round_index}_{rng.randrange(0, 5)}"
        commands += [
            ["GEOSEARCH", key, "FROMLONLAT", lon, lat, "BYRADIUS", r, unit, *options, *order,
             *count],
            ["GEOSEARCH", key, "FROMLONLAT", lon, lat, "BYBOX", width, height, unit, *options,
             *order],
            ["GEOSEARCH", key, "FROMMEMBER", member, "BYRADIUS", r, unit, *order, *count],
            ["GEORADIUS", key, lon, lat, r, unit, *options, *order],
            ["GEORADIUSBYMEMBER_RO", key, member, r, unit, *options, *count],
            ["GEOSEARCHSTORE", "dst", key, "FROMLONLAT", lon, lat, "BYRADIUS", r, unit, *count],
            ["ZRANGE", "dst", "0", "-1", "WITHSCORES"],
            ["GEODIST", key, member, f"m{round_index}_0", unit],
            ["GEOHASH", key, member],
            ["GEOPOS", key, member],
        ]
    return commands


def test_random_searches_find_what_redis_server_finds(resp_server, redis_server_port):
    seed = int(os.environ.get("GEO_SEED", random.randrange(1 << 30)))
    print(f"GEO_SEED={seed}")
    commands = random_commands(random.Random(seed), rounds=60)
    compare(resp_server, redis_server_port, commands)

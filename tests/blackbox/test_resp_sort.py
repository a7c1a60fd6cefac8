"""SORT and SORT_RO on lists, sets and sorted sets through redis-py and raw RESP2/RESP3,
compared byte for byte with Debian's redis-server: BY (patterns, hash fields, nosort), LIMIT,
GET (`#`, string keys, `key->field`), ASC/DESC, ALPHA, STORE, and Redis's error texts.

The randomized comparison prints its seed; SORT_SEED=<seed> replays it. redis-server runs
with LC_ALL=C, so that its ALPHA order (strcoll) is the byte order Osprey sorts by.
"""

from __future__ import annotations

import os
import random
import shlex

import pytest

import harness
from test_resp_zsets import Raw


@pytest.fixture
def key():
    return harness.unique("sort")


@pytest.fixture(scope="module")
def redis_c_locale_port():
    """A reference redis-server in the C locale: its ALPHA order follows the locale."""
    with harness.reference_redis_server(env={"LC_ALL": "C"}) as port:
        yield port

# -- through redis-py -------------------------------------------------------------------------


def test_sort_orders_numbers_and_text(r, key):
    r.rpush(key, 3, 10, 1, "2.5", -4)
    assert r.sort(key) == [b"-4", b"1", b"2.5", b"3", b"10"]
    assert r.sort(key, desc=True, start=1, num=2) == [b"3", b"2.5"]
    assert r.sort(key, alpha=True) == [b"-4", b"1", b"10", b"2.5", b"3"]
    assert r.sort(key, by="nosort", desc=True) == [b"-4", b"2.5", b"1", b"10", b"3"]
    r.rpush(key, "x")
    with pytest.raises(Exception, match="One or more scores can't be converted into double"):
        r.sort(key)


def test_sort_by_and_get_read_other_keys(r, key):
    r.rpush(key, "a", "b", "c")
    for element, weight in [("a", 3), ("b", 1), ("c", 2)]:
        r.set(f"{key}:w:{element}", weight)
        r.hset(f"{key}:h:{element}", "name", element.upper())
    assert r.sort(key, by=f"{key}:w:*") == [b"b", b"c", b"a"]
    assert r.sort(key, by=f"{key}:h:*->name", alpha=True, desc=True) == [b"c", b"b", b"a"]
    assert r.sort(key, by=f"{key}:w:*", get=["#", f"{key}:h:*->name", f"{key}:none:*"]) == [
        b"b", b"B", None, b"c", b"C", None, b"a", b"A", None,
    ]
    destination = harness.unique("dst")
    assert r.sort(key, by=f"{key}:w:*", get=f"{key}:none:*", store=destination) == 3
    assert r.lrange(destination, 0, -1) == [b"", b"", b""]
    assert r.execute_command("SORT_RO", key, "BY", f"{key}:w:*", "LIMIT", 0, 1) == [b"b"]


def test_sort_of_sets_and_sorted_sets(r, key):
    r.sadd(key, 5, 1, 3)
    assert r.sort(key) == [b"1", b"3", b"5"]
    destination = harness.unique("dst")
    # A stored set is sorted by its members even BY nosort, as in Redis.
    r.sadd(key, "b", "a")
    assert r.sort(key, by="nosort", store=destination) == 5
    assert r.lrange(destination, 0, -1) == [b"1", b"3", b"5", b"a", b"b"]
    zkey = harness.unique("z")
    r.zadd(zkey, {"x": 1, "y": 2, "z": 3})
    assert r.sort(zkey, by="nosort", desc=True, start=0, num=2) == [b"z", b"y"]
    assert r.sort(zkey, alpha=True, desc=True) == [b"z", b"y", b"x"]


def test_a_large_sort_runs_on_the_long_request_pool_with_the_same_answer(resp_server, key):
    client = resp_server.redis()
    values = list(range(30_000))
    random.Random(4).shuffle(values)
    for start in range(0, len(values), 5_000):
        client.rpush(key, *values[start:start + 5_000])
    assert client.sort(key, start=0, num=3) == [b"0", b"1", b"2"]
    destination = harness.unique("dst")
    assert client.sort(key, desc=True, store=destination) == 30_000
    assert client.lindex(destination, 0) == b"29999"


# -- the same bytes as redis-server -------------------------------------------------------------

SCRIPT = """
RPUSH l 3 10 1 2.5 -4 " 7" ""
SORT l
SORT l DESC
SORT l ALPHA
SORT l ALPHA DESC LIMIT 1 3
SORT l LIMIT 2 -1
SORT l LIMIT -5 3
SORT l LIMIT 3 0
SORT l LIMIT 100 3
SORT l LIMIT 0
SORT l LIMIT a 1
SORT l LIMIT 0 b
SORT l BY nosort
SORT l BY nosort DESC
SORT l BY nosort DESC LIMIT 1 2
SORT l BY nosort LIMIT 5 10
SORT l BY w_* GET #
SORT l BY nosort GET # GET w_* GET nostar
SORT l ASC DESC ALPHA
SORT l BOGUS
SORT l BY
SORT l GET
SORT l STORE
MSET w_3 30 w_10 1 w_1 20 w_2.5 abc w_-4 5
SORT l BY w_*
SORT l BY w_* ALPHA
SORT l BY w_* ALPHA DESC
SORT l BY w_* GET # GET w_*
HSET h_3 f c
HSET h_10 f a
HSET h_1 f b
SORT l BY h_*->f ALPHA
SORT l BY h_*->f ALPHA GET h_*->f GET h_*-> GET h_*->nofield GET #
SORT l BY h_*-> GET h_*->f
SORT l BY nosort GET w_*->f
SORT l BY w_* STORE dst
SORT l BY nosort GET h_*->f STORE dst
LRANGE dst 0 -1
SORT l LIMIT 0 0 STORE dst
EXISTS dst
SORT nokey
SORT nokey STORE dst
SORT nokey BY nosort LIMIT 0 1
SET str x
SORT str
SORT str LIMIT x 1
HSET h a 1
SORT h
SORT_RO l STORE dst
SORT_RO l BY nosort DESC LIMIT 0 2
RPUSH bad 1 x
SORT bad
SORT bad STORE dst
SORT bad ALPHA
RPUSH inf inf -inf 1e308 0
SORT inf
SADD s 5 1 3 10 7
SORT s
SORT s DESC LIMIT 1 2
SORT s BY nosort STORE dst
LRANGE dst 0 -1
SORT s BY nosort ALPHA STORE dst
ZADD z 1 c 2 b 3 a 3 d
SORT z ALPHA
SORT z BY nosort
SORT z BY nosort DESC
SORT z BY nosort LIMIT 1 2
SORT z BY nosort DESC LIMIT 1 2
SORT z BY nosort LIMIT 10 2
SORT z BY nosort DESC LIMIT -1 1
SORT z BY nosort STORE dst
LRANGE dst 0 -1
SORT z
RPUSH over 1e400 1
SORT over
ZADD errno 1 x
"""
# SORT over comes last: redis-server does not clear errno before its strtod, so the ERANGE
# that 1e400 leaves would make its later numeric sorts fail; ZADD's score parsing clears it.


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


def test_replies_are_byte_for_byte_those_of_redis_server(resp_server, redis_c_locale_port):
    commands = [shlex.split(line) for line in SCRIPT.strip().splitlines()]
    compare(resp_server, redis_c_locale_port, commands)


@pytest.mark.parametrize("command", ["SORT", "SORT_RO"])
def test_arity_follows_redis(resp_server, redis_c_locale_port, command):
    compare(resp_server, redis_c_locale_port, [[command]], protocols=(2,))


# -- randomized comparison ----------------------------------------------------------------------


def random_commands(rng: random.Random, rounds: int) -> list[list[str]]:
    """Lists and sorted sets of numbers and words, with weights and hash fields (all distinct,
    so that no two elements tie under Redis's unstable partial sort), and SORT variants;
    missing weights are in SCRIPT."""
    commands = []
    for round_index in range(rounds):
        words = [f"w{n}" for n in rng.sample(range(1000), rng.randrange(1, 30))]
        numbers = [str(n) for n in rng.sample(range(-500, 500), rng.randrange(1, 30))]
        elements = rng.choice([words, numbers]) + rng.choice([[], numbers[:2]])
        weights = rng.sample(range(10_000), len(elements))
        kind = rng.choice(["list", "zset"])
        key = f"{kind}{round_index}"
        if kind == "list":
            commands.append(["RPUSH", key, *elements])
        else:
            pairs = [x for element in elements for x in (str(rng.randrange(50)), element)]
            commands.append(["ZADD", key, *pairs])
        for element, weight in zip(elements, weights):
            commands.append(["SET", f"wt_{element}", str(weight)])
            commands.append(["HSET", f"hs_{element}", "f", f"v{weight:05d}"])
        for _ in range(6):
            options = []
            alpha = rng.random() < 0.4
            by = rng.choice([None, "nosort", "wt_*", "hs_*->f"])
            if by is not None:
                options += ["BY", by]
            if rng.random() < 0.5:
                options += ["LIMIT", str(rng.randrange(-2, 8)), str(rng.randrange(-2, 8))]
            for pattern in rng.sample(["#", "wt_*", "hs_*->f", "none_*"], rng.randrange(0, 3)):
                options += ["GET", pattern]
            if rng.random() < 0.5:
                options.append(rng.choice(["ASC", "DESC"]))
            if alpha or by == "hs_*->f" or elements is words:
                options.append("ALPHA")
            command = ["SORT", key, *options]
            commands.append(command)
            if rng.random() < 0.3:
                commands.append([*command, "STORE", "dst"])
                commands.append(["LRANGE", "dst", "0", "-1"])
    return commands


def test_random_sorts_answer_what_redis_server_answers(resp_server, redis_c_locale_port):
    seed = int(os.environ.get("SORT_SEED", random.randrange(1 << 30)))
    print(f"SORT_SEED={seed}")
    commands = random_commands(random.Random(seed), rounds=40)
    compare(resp_server, redis_c_locale_port, commands)

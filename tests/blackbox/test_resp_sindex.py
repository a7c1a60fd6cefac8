"""Osprey's secondary-index commands over RESP (SINDEX.CREATE, .DROP, .LIST, .QUERY), and the
user-key index: Redis keys read in key order from any start key, against ZRANGEBYLEX's
answers on a model; bin indexes over records an Aerospike client wrote; bounds, LIMIT and
errors as Redis's range commands give them; both protocols see the same indexes.
"""

from __future__ import annotations

import bisect
import random
import threading
import time

import aerospike
import pytest
import redis

import harness
from test_sindex import seed_from_env, wait_built


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r2(resp_server, request):
    client = resp_server.redis(protocol=request.param)
    yield client
    for line in client.execute_command("SINDEX.LIST"):
        text = line.decode() if isinstance(line, bytes) else line
        name = dict(part.split("=", 1) for part in text.split(":"))["indexname"]
        client.execute_command("SINDEX.DROP", name)


def wait_ready(r, name: str) -> None:
    """Queries until the index has finished building (BUSY before)."""
    for _ in range(400):
        try:
            r.execute_command("SINDEX.QUERY", name, "-", "+", "LIMIT", 0, 0)
            return
        except redis.ResponseError as error:
            assert "is still building" in str(error), error
            harness.time.sleep(0.05)
    raise AssertionError(f"index {name} never became ready")


def as_bytes(items) -> list[bytes]:
    return [item if isinstance(item, bytes) else str(item).encode() for item in items]


def test_user_key_index_reads_redis_keys_in_order_as_zrangebylex_would(r2):
    seed = seed_from_env()
    rng = random.Random(seed)
    prefix = harness.unique("uk") + ":"
    keys = sorted({prefix + "".join(rng.choice("abcxyz019") for _ in range(rng.randrange(1, 6)))
                   for _ in range(300)})
    model = prefix[:-1] + "-model"  # sorts before the prefix: outside every range
    for key in keys:
        r2.set(key, "v")
        r2.zadd(model, {key: 0})
    # Other types are keys too, and keys outside the prefix are outside every range below.
    r2.hset(prefix + "~hash", "f", "1")
    r2.zadd(model, {prefix + "~hash": 0})
    assert r2.execute_command("SINDEX.CREATE", "redis_keys", "KEY", "STRING") in (b"OK", "OK")
    wait_ready(r2, "redis_keys")
    low, high = f"[{prefix}", f"({prefix}\xff"
    for _ in range(50):
        start = prefix + "".join(rng.choice("abcxyz019") for _ in range(rng.randrange(0, 4)))
        bound = rng.choice(["[", "("]) + start
        count = rng.randrange(1, 15)
        expected = r2.zrangebylex(model, bound, high, start=0, num=count)
        got = r2.execute_command("SINDEX.QUERY", "redis_keys", bound, high, "LIMIT", 0, count)
        assert as_bytes(got) == as_bytes(expected), (seed, bound, count)
    everything = r2.execute_command("SINDEX.QUERY", "redis_keys", low, high)
    assert as_bytes(everything) == as_bytes(r2.zrange(model, 0, -1))
    # Offsets, and a key that goes away.
    assert as_bytes(r2.execute_command("SINDEX.QUERY", "redis_keys", low, high, "LIMIT", 5, 3)) \
        == as_bytes(keys[5:8])
    r2.delete(keys[0])
    assert as_bytes(r2.execute_command("SINDEX.QUERY", "redis_keys", low, high, "LIMIT", 0, 1)) \
        == as_bytes(keys[1:2])
    r2.delete(*keys[1:], prefix + "~hash", model)


def test_keys_alone_follow_ttl_changes_deletes_and_flushes(r2):
    """SINDEX.QUERY without WITHBINS answers a user-key index from its entries, which keep
    each record's void time, without looking the records up: keys given a TTL in place
    (PEXPIRE) or born with one expire from it (before any sweep removes them), a TTL
    cleared by PERSIST or lengthened keeps the key, deleted and flushed keys are gone, and keys
    written after a flush come back; always the keys WITHBINS (which reads each record)
    gives."""
    prefix = harness.unique("ttl") + ":"
    names = [f"{prefix}{i}" for i in range(6)]
    for name in names[:5]:
        r2.set(name, "v")
    # TTLs long enough that a loaded machine answers the first queries before they pass.
    r2.set(names[5], "v", px=1500)
    assert r2.execute_command("SINDEX.CREATE", "keys_ttl", "KEY", "STRING") in (b"OK", "OK")
    wait_ready(r2, "keys_ttl")
    low, high = f"[{prefix}", f"({prefix}\xff"

    def keys_alone() -> list[bytes]:
        return as_bytes(r2.execute_command("SINDEX.QUERY", "keys_ttl", low, high))

    def keys_looked_up() -> list[bytes]:
        rows = r2.execute_command("SINDEX.QUERY", "keys_ttl", low, high, "WITHBINS")
        return as_bytes(row[0] for row in rows)

    r2.pexpire(names[0], 1500)
    r2.expire(names[1], 1)
    r2.persist(names[1])
    r2.pexpire(names[2], 1)
    r2.expire(names[2], 100_000)
    r2.delete(names[3])
    assert keys_alone() == keys_looked_up() == as_bytes(names[:3] + names[4:])
    harness.time.sleep(3.2)  # void times count whole seconds
    assert r2.exists(names[0], names[5]) == 0
    assert keys_alone() == keys_looked_up() == as_bytes([names[1], names[2], names[4]])
    r2.flushdb()
    assert keys_alone() == keys_looked_up() == []
    r2.set(names[4], "again")
    assert keys_alone() == keys_looked_up() == as_bytes([names[4]])
    r2.delete(names[4])


def test_keys_alone_never_lie_while_writers_set_and_delete(resp_server):
    """Writers SET and DEL keys (each key owned by one writer, so its operations are ordered)
    while readers ask a user-key index for the keys alone, answered from its entries. For every
    query: a key returned was present at some moment of the query (never one deleted before it
    began and not set again until it ended), and a key present for the whole query is returned.
    Every operation's start and end are logged; seeded."""
    seed = seed_from_env()
    prefix = harness.unique("live") + ":"
    names = [f"{prefix}{i:03d}" for i in range(60)]
    setup = resp_server.redis()
    # Per key: (start, end, present after) of each operation, in order.
    log: dict[str, list[tuple[float, float, bool]]] = {}
    for name in names:
        started = time.monotonic()
        setup.set(name, "v")
        log[name] = [(started, time.monotonic(), True)]
    assert setup.execute_command("SINDEX.CREATE", "keys_live", "KEY", "STRING") in (b"OK", "OK")
    wait_ready(setup, "keys_live")
    stop = threading.Event()
    queries: list[tuple[float, float, set[str]]] = []
    failures: list[BaseException] = []

    def write(owned: list[str], rng: random.Random) -> None:
        client = resp_server.redis()
        while not stop.is_set():
            name = rng.choice(owned)
            present = rng.random() < 0.5
            started = time.monotonic()
            if present:
                client.set(name, "v")
            else:
                client.delete(name)
            log[name].append((started, time.monotonic(), present))

    def read() -> None:
        client = resp_server.redis()
        while not stop.is_set():
            started = time.monotonic()
            got = client.execute_command("SINDEX.QUERY", "keys_live", f"[{prefix}", f"({prefix}\xff")
            queries.append((started, time.monotonic(), {k.decode() for k in got}))

    def guarded(run, *args) -> None:
        try:
            run(*args)
        except BaseException as error:  # reported below, with the seed
            failures.append(error)
            stop.set()

    threads = [threading.Thread(target=guarded, args=(write, names[w::2], random.Random(seed + w)))
               for w in range(2)]
    threads += [threading.Thread(target=guarded, args=(read,)) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(3)
    stop.set()
    for thread in threads:
        thread.join()
    assert not failures, (seed, failures)
    assert len(queries) > 20, queries

    def steady(name: str, began: float, ended: float) -> bool | None:
        """Whether `name` was present for the whole of [began, ended]; None if it changed."""
        ops = log[name]
        before = bisect.bisect_right([end for _, end, _ in ops], began) - 1
        follows = ops[before + 1] if before + 1 < len(ops) else None
        if before < 0 or (follows is not None and follows[0] <= ended):
            return None
        return ops[before][2]

    checked = {True: 0, False: 0}
    for began, ended, got in queries:
        for name in names:
            state = steady(name, began, ended)
            if state is True:
                assert name in got, (seed, name, "present for the whole query and missed")
            if state is False:
                assert name not in got, (seed, name, "absent for the whole query and returned")
            if state is not None:
                checked[state] += 1
    assert checked[True] > 100 and checked[False] > 100, checked
    setup.execute_command("SINDEX.DROP", "keys_live")
    setup.delete(*names)


def test_bounds_limits_and_empty_ranges_follow_the_redis_range_commands(r2):
    prefix = harness.unique("b") + ":"
    for i in range(10):
        r2.set(f"{prefix}{i}", i)
    r2.execute_command("SINDEX.CREATE", "keys2", "KEY", "STRING")
    wait_ready(r2, "keys2")
    q = lambda *a: as_bytes(r2.execute_command("SINDEX.QUERY", "keys2", *a))  # noqa: E731
    names = as_bytes(f"{prefix}{i}" for i in range(10))
    end = f"({prefix}\xff"
    assert q(f"[{prefix}3", end) == names[3:]
    assert q(f"({prefix}3", end) == names[4:]
    assert q(f"[{prefix}3", f"[{prefix}5") == names[3:6]
    assert q(f"[{prefix}3", f"({prefix}5") == names[3:5]
    assert q(f"[{prefix}5", f"[{prefix}3") == []
    assert q("+", "-") == []
    assert q(f"[{prefix}3", end, "LIMIT", -1, 5) == []
    assert q(f"[{prefix}3", end, "LIMIT", 2, -1) == names[5:]
    for bad, text in [(("x", "+"), "min or max not valid string range item"),
                      (("-", "+", "LIMIT", "a", "1"), "value is not an integer or out of range"),
                      (("-", "+", "NOPE"), "syntax error")]:
        with pytest.raises(redis.ResponseError, match=text):
            r2.execute_command("SINDEX.QUERY", "keys2", *bad)
    with pytest.raises(redis.ResponseError, match="no such index 'nope'"):
        r2.execute_command("SINDEX.QUERY", "nope", "-", "+")
    r2.delete(*[f"{prefix}{i}" for i in range(10)])


def test_bin_index_over_aerospike_records_with_bins_and_numeric_bounds(resp_server, r2):
    client = resp_server.client()
    uset = harness.unique("people")
    for i in range(60):
        client.put(("test", uset, f"p{i:02}"), {"age": i % 20, "name": f"n{i}"},
                   policy={"key": aerospike.POLICY_KEY_SEND})
    client.put(("test", uset, "nokey"), {"age": 5})  # stored without its key
    assert r2.execute_command("SINDEX.CREATE", "by_age", "BIN", "age", "NUMERIC", "SET", uset) \
        in (b"OK", "OK")
    wait_built(client, "test", "by_age")
    q = lambda *a: r2.execute_command("SINDEX.QUERY", "by_age", *a)  # noqa: E731
    ages = lambda lo, hi: sorted(f"p{i:02}".encode() for i in range(60) if lo <= i % 20 <= hi)  # noqa: E731
    assert sorted(as_bytes(q(3, 4))) == ages(3, 4)
    assert sorted(as_bytes(q("(3", 4))) == ages(4, 4)
    assert sorted(as_bytes(q("-inf", "(2"))) == ages(0, 1)
    assert sorted(as_bytes(q(18, "+inf"))) == ages(18, 19)
    assert q("+inf", "-inf") == []
    # Infinities in any case, "inf" alone as ZRANGEBYSCORE takes it.
    assert sorted(as_bytes(q("-INF", "(1"))) == ages(0, 0)
    assert sorted(as_bytes(q(19, "Inf"))) == ages(19, 19)
    with_nokey = q(5, 5)
    assert with_nokey.count(None) == 1 and sorted(as_bytes(k for k in with_nokey if k)) == ages(5, 5)
    # In index order: ages ascend, so LIMIT keeps the smallest.
    first = q("-inf", "+inf", "LIMIT", 0, 3)
    assert sorted(as_bytes(first)) == ages(0, 0)
    pairs = q(7, 7, "WITHBINS")
    assert len(pairs) == 3
    for key, bins in pairs:
        bins = bins if isinstance(bins, dict) else dict(zip(bins[::2], bins[1::2]))
        assert bins == {b"age": 7, b"name": b"n%d" % int(key[1:])}
    with pytest.raises(redis.ResponseError, match="min or max is not an integer"):
        q("abc", 5)
    # Both protocols see one index: the Aerospike side lists and drops it.
    assert "indexname=by_age" in harness.info(client, "sindex-list:ns=test")
    assert r2.execute_command("SINDEX.DROP", "by_age") == 1
    assert r2.execute_command("SINDEX.DROP", "by_age") == 0
    assert "indexname=by_age" not in harness.info(client, "sindex-list:ns=test")


def test_create_errors_are_clear(r2):
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r2.execute_command("SINDEX.CREATE", "x", "WHAT", "STRING")
    with pytest.raises(redis.ResponseError, match="index type must be NUMERIC or STRING"):
        r2.execute_command("SINDEX.CREATE", "x", "KEY", "GEO")
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r2.execute_command("SINDEX.CREATE", "x", "KEY", "STRING", "LIST")
    with pytest.raises(redis.ResponseError, match="no such namespace 'nope'"):
        r2.execute_command("SINDEX.CREATE", "x", "KEY", "STRING", "NAMESPACE", "nope")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        r2.execute_command("SINDEX.CREATE", "x", "KEY")
    r2.execute_command("SINDEX.CREATE", "dup", "KEY", "STRING")
    assert r2.execute_command("SINDEX.CREATE", "dup", "KEY", "STRING") in (b"OK", "OK")
    with pytest.raises(redis.ResponseError, match="already exists"):
        r2.execute_command("SINDEX.CREATE", "dup", "KEY", "NUMERIC")
    listed = [line if isinstance(line, bytes) else line.encode()
              for line in r2.execute_command("SINDEX.LIST")]
    assert any(b"indexname=dup:set=redis:bin=null:source=key:type=string" in line for line in listed)

"""MULTI, EXEC, DISCARD, WATCH and UNWATCH through redis-py (RESP2 and RESP3): queueing,
Redis's errors, all-or-nothing visibility under concurrent clients, and optimistic locking
that a write through either protocol breaks.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

import harness


class Raw:
    """One pinned connection answering raw replies (no redis-py response callbacks), so that
    MULTI's QUEUED and EXEC's null show as they are on the wire."""

    def __init__(self, client):
        self.client = client
        self.connection = client.connection_pool.get_connection()

    def execute_command(self, *args):
        self.connection.send_command(*args)
        return self.connection.read_response()

    def __getattr__(self, name):
        return getattr(self.client, name)


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(resp_server, request):
    return Raw(resp_server.redis(protocol=request.param))


@pytest.fixture
def key():
    return harness.unique("tx")


def test_exec_answers_every_queued_command_in_order(r, key):
    assert r.execute_command("MULTI") in (b"OK", "OK", True)
    assert r.execute_command("SET", key, "1") in (b"QUEUED", "QUEUED")
    assert r.execute_command("INCR", key) in (b"QUEUED", "QUEUED")
    assert r.execute_command("GET", key) in (b"QUEUED", "QUEUED")
    assert r.execute_command("EXEC") == [b"OK", 2, b"2"]


def test_a_queueing_error_aborts_the_whole_transaction(r, key):
    r.execute_command("MULTI")
    r.execute_command("SET", key, "1")
    with pytest.raises(redis.ResponseError, match="unknown command 'NOPE'"):
        r.execute_command("NOPE")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'get'"):
        r.execute_command("GET")
    with pytest.raises(redis.ResponseError, match="Transaction discarded because of previous errors"):
        r.execute_command("EXEC")
    assert r.get(key) is None, "nothing ran"


def test_a_runtime_error_does_not_undo_the_others(r, key):
    r.hset(key + "h", "f", "v")
    r.execute_command("MULTI")
    r.execute_command("SET", key, "a")
    r.execute_command("INCR", key + "h")
    r.execute_command("SET", key, "b")
    replies = r.execute_command("EXEC")
    assert replies[0] in (b"OK", "OK", True) and replies[2] in (b"OK", "OK", True)
    assert isinstance(replies[1], redis.ResponseError) and "WRONGTYPE" in str(replies[1])
    assert r.get(key) == b"b"


def test_misuse_gets_redis_errors(r, key):
    with pytest.raises(redis.ResponseError, match="EXEC without MULTI"):
        r.execute_command("EXEC")
    with pytest.raises(redis.ResponseError, match="DISCARD without MULTI"):
        r.execute_command("DISCARD")
    r.execute_command("MULTI")
    with pytest.raises(redis.ResponseError, match="MULTI calls can not be nested"):
        r.execute_command("MULTI")
    with pytest.raises(redis.ResponseError, match="WATCH inside MULTI is not allowed"):
        r.execute_command("WATCH", key)
    assert r.execute_command("DISCARD") in (b"OK", "OK", True)
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'watch'"):
        r.execute_command("WATCH")


def test_discard_drops_the_queue(r, key):
    r.execute_command("MULTI")
    r.execute_command("SET", key, "1")
    r.execute_command("DISCARD")
    assert r.get(key) is None


def test_a_write_by_another_client_aborts_exec(resp_server, r, key):
    other = resp_server.redis()
    r.set(key, "1")
    r.execute_command("WATCH", key)
    other.set(key, "1")  # the same value still counts as a write
    r.execute_command("MULTI")
    r.execute_command("SET", key, "mine")
    assert r.execute_command("EXEC") is None
    assert r.get(key) == b"1"


def test_an_untouched_watch_lets_exec_run_and_ends_with_it(resp_server, r, key):
    other = resp_server.redis()
    r.execute_command("WATCH", key, key + "other")
    other.set(key + "unrelated", "x")
    r.execute_command("MULTI")
    r.execute_command("SET", key, "mine")
    assert r.execute_command("EXEC") == [b"OK"]
    # The watch ended with EXEC: a later write does not abort the next transaction.
    other.set(key, "theirs")
    r.execute_command("MULTI")
    r.execute_command("GET", key)
    assert r.execute_command("EXEC") == [b"theirs"]


def test_unwatch_and_discard_forget_watches(resp_server, r, key):
    other = resp_server.redis()
    for forget in ("UNWATCH", "DISCARD"):
        r.execute_command("WATCH", key)
        other.set(key, forget)
        if forget == "DISCARD":
            r.execute_command("MULTI")
        r.execute_command(forget)
        r.execute_command("MULTI")
        r.execute_command("GET", key)
        assert r.execute_command("EXEC") == [forget.encode()]


def test_delete_expiry_and_flush_abort_exec(resp_server, r, key):
    other = resp_server.redis()
    r.set(key, "1")
    r.execute_command("WATCH", key)
    other.delete(key)
    r.execute_command("MULTI")
    r.execute_command("SET", key, "x")
    assert r.execute_command("EXEC") is None

    r.set(key, "1", ex=1)
    r.execute_command("WATCH", key)
    time.sleep(2.1)
    r.execute_command("MULTI")
    r.execute_command("SET", key, "x")
    assert r.execute_command("EXEC") is None, "a watched key that expired aborts EXEC"

    r.set(key + "f", "1")
    r.execute_command("WATCH", key + "f")
    other.flushdb()
    r.execute_command("MULTI")
    r.execute_command("SET", key, "x")
    assert r.execute_command("EXEC") is None, "FLUSHDB removed the watched key"


def test_a_flush_that_removes_no_watched_key_lets_exec_run(resp_server, r, key):
    """As Redis 7 (multi.tcl "FLUSHDB does not touch non affected keys"): FLUSHDB and FLUSHALL
    abort a transaction only for the watched keys they remove; a watch on a key that did not
    exist, or that lives in another database, stays clean."""
    other = resp_server.redis()
    for flush in (other.flushdb, other.flushall):
        r.execute_command("WATCH", key + "missing")
        flush()
        r.execute_command("MULTI")
        r.execute_command("PING")
        assert r.execute_command("EXEC") in ([b"PONG"], [True], ["PONG"])
    elsewhere = resp_server.redis(db=1)
    elsewhere.set(key, "1")
    r.execute_command("WATCH", key)
    other.flushdb()
    r.execute_command("MULTI")
    r.execute_command("PING")
    assert r.execute_command("EXEC") is not None, "db 1's key is not db 0's"
    elsewhere.delete(key)


def test_a_write_through_aerospike_aborts_exec(resp_server, r, key):
    client = resp_server.client()
    r.set(key, "1")
    r.execute_command("WATCH", key)
    client.put(("test", "redis", key), {"value": "from-aerospike"})
    r.execute_command("MULTI")
    r.execute_command("SET", key, "mine")
    assert r.execute_command("EXEC") is None
    assert r.get(key) == b"from-aerospike"


def test_optimistic_locking_counts_exactly_under_contention(resp_server, key):
    """redis-py's WATCH/MULTI retry loop from 4 threads: no increment lost."""
    threads, per_thread = 4, 50
    resp_server.redis().set(key, "0")

    def add_one(pipe):
        value = int(pipe.get(key))
        pipe.multi()
        pipe.set(key, str(value + 1))

    def worker():
        client = resp_server.redis()
        for _ in range(per_thread):
            client.transaction(add_one, key)

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert resp_server.redis().get(key) == str(threads * per_thread).encode()


def test_readers_never_see_half_a_transaction(resp_server, key):
    """A writer moves one unit between two keys in MULTI/EXEC; a reader's MULTI/EXEC of both
    keys always sees their sum intact."""
    a, b = key + "a", key + "b"
    resp_server.redis().mset({a: "100", b: "0"})
    stop = threading.Event()
    sums: list[int] = []

    def writer():
        client = resp_server.redis()
        while not stop.is_set():
            pipe = client.pipeline(transaction=True)
            pipe.decr(a)
            pipe.incr(b)
            pipe.execute()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        reader = resp_server.redis()
        for _ in range(300):
            pipe = reader.pipeline(transaction=True)
            pipe.get(a)
            pipe.get(b)
            got_a, got_b = pipe.execute()
            sums.append(int(got_a) + int(got_b))
    finally:
        stop.set()
        thread.join()
    assert set(sums) == {100}

"""Hash commands through redis-py (RESP2 and RESP3), their errors, and the same hashes through
the Aerospike client: a hash is one MAP bin named `hash`.
"""

from __future__ import annotations

import aerospike
import pytest
import redis

import harness


@pytest.fixture
def key():
    return harness.unique("h")


def test_hset_hget_hmget_hlen_hexists_hstrlen(r, key):
    assert r.hset(key, mapping={"a": "1", "b": "two"}) == 2
    assert r.hset(key, "a", "one") == 0, "replacing a field adds none"
    assert r.hget(key, "a") == b"one"
    assert r.hget(key, "missing") is None
    assert r.hget(key + "x", "a") is None
    assert r.hmget(key, ["a", "nope", "b"]) == [b"one", None, b"two"]
    assert r.hmget(key + "x", ["a"]) == [None]
    assert r.hlen(key) == 2 and r.hlen(key + "x") == 0
    assert r.hexists(key, "b") is True and r.hexists(key, "c") is False
    assert r.hstrlen(key, "b") == 3 and r.hstrlen(key, "c") == 0
    assert r.type(key) == b"hash"


def test_hgetall_hkeys_hvals(r, key):
    fields = {f"f{i}": f"v{i}" for i in range(20)}
    r.hset(key, mapping=fields)
    assert r.hgetall(key) == {k.encode(): v.encode() for k, v in fields.items()}
    assert sorted(r.hkeys(key)) == sorted(k.encode() for k in fields)
    assert sorted(r.hvals(key)) == sorted(v.encode() for v in fields.values())
    assert r.hgetall(key + "x") == {}
    assert r.hkeys(key + "x") == [] and r.hvals(key + "x") == []


def test_hsetnx_and_hmset(r, key):
    assert r.hsetnx(key, "f", "first") == 1
    assert r.hsetnx(key, "f", "second") == 0
    assert r.hget(key, "f") == b"first"
    assert r.execute_command("HMSET", key, "g", "1", "h", "2") in (b"OK", "OK", True)
    assert r.hmget(key, ["g", "h"]) == [b"1", b"2"]


def test_hdel_removes_fields_and_the_empty_hash(r, key):
    r.hset(key, mapping={"a": "1", "b": "2"})
    assert r.hdel(key, "a", "zz") == 1
    assert r.hdel(key, "a") == 0
    assert r.hdel(key + "x", "a") == 0
    assert r.hdel(key, "b") == 1
    assert r.exists(key) == 0, "a hash emptied by HDEL is deleted, as in Redis"


def test_hincrby_and_hincrbyfloat(r, key):
    assert r.hincrby(key, "n", 5) == 5
    assert r.hincrby(key, "n", -7) == -2
    assert r.hincrbyfloat(key, "x", 10.5) == 10.5
    assert r.hincrbyfloat(key, "x", 0.1) == pytest.approx(10.6)
    assert r.hget(key, "x") == b"10.6"
    r.hset(key, "s", "abc")
    with pytest.raises(redis.ResponseError, match="hash value is not an integer"):
        r.hincrby(key, "s", 1)
    with pytest.raises(redis.ResponseError, match="hash value is not a float"):
        r.hincrbyfloat(key, "s", 1.0)
    with pytest.raises(redis.ResponseError, match="value is not an integer or out of range"):
        r.execute_command("HINCRBY", key, "n", "1.5")
    with pytest.raises(redis.ResponseError, match="value is not a valid float"):
        r.execute_command("HINCRBYFLOAT", key, "x", "abc")
    r.hset(key, "big", str(2**63 - 1))
    with pytest.raises(redis.ResponseError, match="increment or decrement would overflow"):
        r.hincrby(key, "big", 1)
    assert r.hget(key, "big") == str(2**63 - 1).encode(), "a failed increment changes nothing"


def test_hscan_returns_every_field_and_honours_match(r, key):
    r.hset(key, mapping={f"user:{i}": str(i) for i in range(50)} | {"other": "x"})
    cursor, items = r.hscan(key, 0)
    assert cursor == 0 and len(items) == 51
    cursor, items = r.hscan(key, 0, match="user:1*")
    assert cursor == 0 and set(items) == {f"user:{i}".encode() for i in [1] + list(range(10, 20))}
    assert r.hscan(key + "x", 0) == (0, {})
    with pytest.raises(redis.ResponseError, match="invalid cursor"):
        r.execute_command("HSCAN", key, "abc")
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("HSCAN", key, "0", "COUNT", "0")
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("HSCAN", key, "0", "MATCH")


def test_wrong_type_and_arity_errors(r, key):
    r.set(key, "string")
    for command in (["HSET", key, "f", "v"], ["HGET", key, "f"], ["HGETALL", key], ["HDEL", key, "f"],
                    ["HLEN", key], ["HINCRBY", key, "f", "1"], ["HSCAN", key, "0"]):
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            r.execute_command(*command)
    r.hset(key + "h", "f", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.get(key + "h")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'hset' command"):
        r.execute_command("HSET", key + "h", "f")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'hset' command"):
        r.execute_command("HSET", key + "h", "f", "v", "g")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'hget' command"):
        r.execute_command("HGET", key + "h")


def test_binary_fields_and_values_round_trip(r, key):
    r.hset(key, b"\xff\x00", b"\x01\xfe")
    assert r.hget(key, b"\xff\x00") == b"\x01\xfe"


def test_expiry_survives_hash_changes(r, key):
    r.hset(key, "a", "1")
    assert r.expire(key, 100) is True
    r.hset(key, "b", "2")
    r.hdel(key, "a")
    assert 95 <= r.ttl(key) <= 100


def test_a_hash_written_through_resp_reads_through_aerospike(resp_server, key):
    r = resp_server.redis()
    client = resp_server.client()
    r.hset(key, mapping={"name": "Ann", "city": "Oslo"})
    r.hset(key, b"raw", b"\xff\x01")
    _, meta, bins = client.get(("test", "redis", key))
    assert bins == {"hash": {"name": "Ann", "city": "Oslo", "raw": bytearray(b"\xff\x01")}}
    assert meta["gen"] == 2, "one write per HSET"


def test_a_hash_written_through_aerospike_reads_through_resp_and_back(resp_server, key):
    r = resp_server.redis()
    client = resp_server.client()
    client.put(("test", "redis", key), {"hash": {"name": "Bob", "age": 42, "score": 1.5}})
    assert r.type(key) == b"hash"
    assert r.hgetall(key) == {b"name": b"Bob", b"age": b"42", b"score": b"1.5"}
    assert r.hincrby(key, "age", 1) == 43
    _, _, bins = client.get(("test", "redis", key))
    assert bins == {"hash": {"name": "Bob", "age": "43", "score": "1.5"}}
    # An Aerospike write replaces the Redis value; Redis reads the new one.
    client.put(("test", "redis", key), {"hash": {"only": "this"}}, policy={"exists": aerospike.POLICY_EXISTS_REPLACE})
    assert r.hgetall(key) == {b"only": b"this"}


def test_a_record_with_other_bins_is_not_a_hash(resp_server, key):
    r = resp_server.redis()
    client = resp_server.client()
    client.put(("test", "redis", key), {"hash": {"f": "v"}, "extra": 1})
    assert r.type(key) == b"record"
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.hset(key, "f", "w")
    _, _, bins = client.get(("test", "redis", key))
    assert bins == {"hash": {"f": "v"}, "extra": 1}, "nothing dropped"
    assert r.delete(key) == 1

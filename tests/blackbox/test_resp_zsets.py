"""Redis sorted sets (ZADD .. ZSCAN) over RESP2 and RESP3: Redis 7.2's replies and error texts,
the wire shapes RESP3 gives scores and WITHSCORES, lex ranges (mixed scores included), a
large set against a model, the `zset` MAP bin Aerospike clients see, and the same commands
byte for byte against Debian's redis-server.
"""

from __future__ import annotations

import random
import shlex
import socket

import pytest
import redis

import harness


@pytest.fixture
def key():
    return harness.unique("z")


# -- raw RESP ---------------------------------------------------------------------------------


def encode(args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        arg = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


def read_reply(stream) -> bytes:
    """One whole reply, as the bytes it came in."""
    line = stream.readline()
    kind = line[:1]
    if kind in b"+-:,_#(":
        return line
    if kind in b"$=!":
        length = int(line[1:-2])
        return line if length < 0 else line + stream.read(length + 2)
    if kind in b"*%~>":
        count = int(line[1:-2])
        if count < 0:
            return line
        count = count * 2 if kind == b"%" else count
        return line + b"".join(read_reply(stream) for _ in range(count))
    raise AssertionError(f"not a RESP reply: {line!r}")


class Raw:
    """A plain socket speaking RESP2, or RESP3 after HELLO 3."""

    def __init__(self, port: int, protocol: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.stream = self.sock.makefile("rb")
        if protocol == 3:
            assert self("HELLO", 3).startswith(b"%")

    def __call__(self, *args) -> bytes:
        self.sock.sendall(encode(args))
        return read_reply(self.stream)

    def close(self):
        self.stream.close()
        self.sock.close()


@pytest.fixture
def raw2(resp_server):
    conn = Raw(resp_server.resp_port, 2)
    yield conn
    conn.close()


@pytest.fixture
def raw3(resp_server):
    conn = Raw(resp_server.resp_port, 3)
    yield conn
    conn.close()


def pairs(reply) -> list[tuple]:
    """redis-py's WITHSCORES answer as (member, score) tuples: RESP3 gives lists."""
    return [tuple(pair) for pair in reply]


def bulk(text: str) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(text), text.encode())


# -- ZADD, ZINCRBY, ZSCORE, ZMSCORE ------------------------------------------------------------


def test_zadd_counts_and_options(r, key):
    assert r.zadd(key, {"a": 1, "b": 2, "c": 3}) == 3
    assert r.zadd(key, {"a": 1.5, "b": 2, "d": 4}) == 1
    assert r.zadd(key, {"a": 1.5, "b": 5, "e": 6}, ch=True) == 2
    assert r.zadd(key, {"a": 10, "f": 7}, nx=True) == 1
    assert r.zscore(key, "a") == 1.5
    assert r.zadd(key, {"a": 11, "g": 7}, xx=True) == 0
    assert r.zscore(key, "a") == 11 and r.zscore(key, "g") is None
    assert r.zadd(key, {"a": 1, "b": 100}, gt=True, ch=True) == 1
    assert r.zscore(key, "a") == 11 and r.zscore(key, "b") == 100
    assert r.zadd(key, {"a": 1, "b": 200, "new": 0}, lt=True, ch=True) == 2
    assert r.zscore(key, "a") == 1 and r.zscore(key, "b") == 100 and r.zscore(key, "new") == 0
    assert r.zadd(key, {"b": 150}, xx=True, gt=True, ch=True) == 1
    assert r.zcard(key) == 7
    assert r.zadd(key + "missing", {"a": 1}, xx=True) == 0
    assert r.exists(key + "missing") == 0


def test_zadd_option_errors_use_redis_texts(r, key):
    cases = [
        (["NX", "XX", 1, "a"], "XX and NX options at the same time are not compatible"),
        (["GT", "LT", 1, "a"], "GT, LT, and/or NX options at the same time are not compatible"),
        (["NX", "GT", 1, "a"], "GT, LT, and/or NX options at the same time are not compatible"),
        (["NX", "LT", 1, "a"], "GT, LT, and/or NX options at the same time are not compatible"),
        (["INCR", 1, "a", 2, "b"], "INCR option supports a single increment-element pair"),
        ([1, "a", 2], "syntax error"),
        (["CH", "x"], "syntax error"),
        (["abc", "a"], "value is not a valid float"),
        (["nan", "a"], "value is not a valid float"),
        (["1e400", "a"], "value is not a valid float"),
        ([" 1", "a"], "value is not a valid float"),
        ([1, "a", "x", "b"], "value is not a valid float"),
    ]
    for args, message in cases:
        with pytest.raises(redis.ResponseError) as error:
            r.execute_command("ZADD", key, *args)
        assert str(error.value) == message, args
    # Nothing of a failed ZADD was applied.
    assert r.exists(key) == 0
    r.set(key, "string")
    with pytest.raises(redis.ResponseError, match="^value is not a valid float"):
        r.execute_command("ZADD", key, "abc", "a")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.zadd(key, {"a": 1})


def test_zadd_incr_and_zincrby(r, key):
    assert r.zadd(key, {"a": 1}, incr=True) == 1.0
    assert r.zadd(key, {"a": 2.5}, incr=True) == 3.5
    assert r.zadd(key, {"a": 1}, incr=True, nx=True) is None
    assert r.zadd(key, {"nosuch": 1}, incr=True, xx=True) is None
    assert r.zadd(key, {"a": -1}, incr=True, gt=True) is None
    assert r.zadd(key, {"a": -1}, incr=True, lt=True) == 2.5
    assert r.zadd(key + "missing", {"a": 1}, incr=True, xx=True) is None
    assert r.zincrby(key, 2, "a") == 4.5
    assert r.zincrby(key, -0.5, "b") == -0.5
    assert r.zadd(key, {"inf": float("inf")}) == 1
    with pytest.raises(redis.ResponseError) as error:
        r.zincrby(key, float("-inf"), "inf")
    assert str(error.value) == "resulting score is not a number (NaN)"
    with pytest.raises(redis.ResponseError) as error:
        r.zadd(key, {"inf": float("-inf")}, incr=True)
    assert str(error.value) == "resulting score is not a number (NaN)"
    assert r.zscore(key, "inf") == float("inf")
    with pytest.raises(redis.ResponseError, match="^value is not a valid float"):
        r.zincrby(key, "x", "a")


def test_zscore_and_zmscore(r, key):
    r.zadd(key, {"a": 1.5, "b": -2, "c": float("inf")})
    assert r.zscore(key, "a") == 1.5
    assert r.zscore(key, "c") == float("inf")
    assert r.zscore(key, "nosuch") is None
    assert r.zscore(key + "missing", "a") is None
    assert r.zmscore(key, ["a", "nosuch", "b"]) == [1.5, None, -2.0]
    assert r.zmscore(key + "missing", ["a", "b"]) == [None, None]


def test_scores_are_bulk_strings_in_resp2_and_doubles_in_resp3(raw2, raw3, key):
    raw2("ZADD", key, "1.5", "a", "0.1", "b", "3", "c", "-inf", "d", "1e17", "e", "-0", "f", "1e300", "g")
    expected = {"a": "1.5", "b": "0.1", "c": "3", "d": "-inf", "e": "100000000000000000", "f": "0", "g": "1e+300"}
    for member, text in expected.items():
        assert raw2("ZSCORE", key, member) == bulk(text)
        assert raw3("ZSCORE", key, member) == f",{text}\r\n".encode()
    assert raw2("ZSCORE", key, "nosuch") == b"$-1\r\n"
    assert raw3("ZSCORE", key, "nosuch") == b"_\r\n"
    assert raw2("ZMSCORE", key, "a", "nosuch") == b"*2\r\n" + bulk("1.5") + b"$-1\r\n"
    assert raw3("ZMSCORE", key, "a", "nosuch") == b"*2\r\n,1.5\r\n_\r\n"
    assert raw2("ZINCRBY", key, "1", "a") == bulk("2.5")
    assert raw3("ZINCRBY", key, "1", "a") == b",3.5\r\n"
    assert raw3("ZADD", key, "NX", "INCR", "1", "a") == b"_\r\n"
    assert raw2("ZADD", key, "NX", "INCR", "1", "a") == b"$-1\r\n"


# -- ZRANGE and friends -----------------------------------------------------------------------


def test_zrange_withscores_shapes(raw2, raw3, key):
    raw2("ZADD", key, "1", "a", "2.5", "b")
    pairs2 = b"*4\r\n" + bulk("a") + bulk("1") + bulk("b") + bulk("2.5")
    pairs3 = b"*2\r\n*2\r\n" + bulk("a") + b",1\r\n*2\r\n" + bulk("b") + b",2.5\r\n"
    assert raw2("ZRANGE", key, 0, -1, "WITHSCORES") == pairs2
    assert raw3("ZRANGE", key, 0, -1, "WITHSCORES") == pairs3
    assert raw3("ZRANGEBYSCORE", key, "-inf", "+inf", "WITHSCORES") == pairs3
    assert raw3("ZRANGE", key, "-inf", "+inf", "BYSCORE", "WITHSCORES") == pairs3
    assert raw3("ZREVRANGE", key, 0, 0, "WITHSCORES") == b"*1\r\n*2\r\n" + bulk("b") + b",2.5\r\n"
    assert raw3("ZRANGE", key, 0, -1) == b"*2\r\n" + bulk("a") + bulk("b")
    assert raw3("ZRANGE", key + "missing", 0, -1, "WITHSCORES") == b"*0\r\n"
    assert raw3("ZRANGE", key, 5, 10, "WITHSCORES") == b"*0\r\n"


def test_zrange_by_index(r, key):
    r.zadd(key, {m: i for i, m in enumerate("abcdef")})
    assert r.zrange(key, 0, -1) == [b"a", b"b", b"c", b"d", b"e", b"f"]
    assert pairs(r.zrange(key, 2, 3, withscores=True)) == [(b"c", 2.0), (b"d", 3.0)]
    assert r.zrange(key, -2, -1) == [b"e", b"f"]
    assert r.zrange(key, -100, 1) == [b"a", b"b"]
    assert r.zrange(key, 4, 100) == [b"e", b"f"]
    assert r.zrange(key, 3, 1) == []
    assert r.zrange(key, 6, 10) == []
    assert r.zrange(key, 0, 1, desc=True) == [b"f", b"e"]
    assert pairs(r.zrevrange(key, 0, 1, withscores=True)) == [(b"f", 5.0), (b"e", 4.0)]
    assert r.zrevrange(key, -2, -1) == [b"b", b"a"]
    assert r.execute_command("ZRANGE", key, 0, -1, "LIMIT", 0, -1) == [b"a", b"b", b"c", b"d", b"e", b"f"]


def test_zrange_by_score(r, key):
    r.zadd(key, {"a": 1, "b": 2, "c": 2, "d": 3, "e": float("inf"), "n": float("-inf")})
    assert r.zrangebyscore(key, 2, 3) == [b"b", b"c", b"d"]
    assert r.zrangebyscore(key, "(2", 3) == [b"d"]
    assert r.zrangebyscore(key, 1, "(2") == [b"a"]
    assert r.zrangebyscore(key, "(1", "(3") == [b"b", b"c"]
    assert r.zrangebyscore(key, "-inf", "+inf") == [b"n", b"a", b"b", b"c", b"d", b"e"]
    assert r.zrangebyscore(key, "(-inf", "(+inf") == [b"a", b"b", b"c", b"d"]
    assert r.zrangebyscore(key, 3, 1) == []
    assert r.zrangebyscore(key, "(2", "(2") == []
    assert r.zrangebyscore(key, 2, 2) == [b"b", b"c"]
    assert pairs(r.zrangebyscore(key, 1, 3, start=1, num=2, withscores=True)) == [(b"b", 2.0), (b"c", 2.0)]
    assert r.zrangebyscore(key, 1, 3, start=2, num=-1) == [b"c", b"d"]
    assert r.zrangebyscore(key, 1, 3, start=-1, num=2) == []
    assert r.zrangebyscore(key, 1, 3, start=1, num=0) == []
    assert r.zrevrangebyscore(key, 3, 1) == [b"d", b"c", b"b", b"a"]
    assert pairs(r.zrevrangebyscore(key, "(3", "(1", withscores=True)) == [(b"c", 2.0), (b"b", 2.0)]
    assert r.zrevrangebyscore(key, "+inf", "-inf", start=1, num=2) == [b"d", b"c"]
    assert r.zrange(key, 3, 1, byscore=True, desc=True) == [b"d", b"c", b"b", b"a"]
    assert r.zrange(key, 1, 3, byscore=True, offset=1, num=1) == [b"b"]
    # Redis reads bounds with strtod: an empty bound is 0, leading spaces are allowed.
    assert r.execute_command("ZRANGEBYSCORE", key, " 1", "1e500") == [b"a", b"b", b"c", b"d", b"e"]
    for bad in (["a", "1"], ["1", "nan"], ["1x", "2"], ["((1", "2"]):
        with pytest.raises(redis.ResponseError) as error:
            r.execute_command("ZRANGEBYSCORE", key, *bad)
        assert str(error.value) == "min or max is not a float"
    assert r.zcount(key, "-inf", "+inf") == 6
    assert r.zcount(key, "(1", 3) == 3
    assert r.zcount(key, 3, 1) == 0
    assert r.zcount(key + "missing", 0, 1) == 0
    with pytest.raises(redis.ResponseError, match="^min or max is not a float$"):
        r.zcount(key, "x", 1)


def test_zrange_option_errors(r, key):
    r.zadd(key, {"a": 1})
    cases = [
        (["ZRANGE", key, 0, -1, "LIMIT", 0, 1], "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"),
        (["ZRANGE", key, "-", "+", "BYLEX", "WITHSCORES"], "syntax error, WITHSCORES not supported in combination with BYLEX"),
        (["ZRANGEBYLEX", key, "-", "+", "WITHSCORES"], "syntax error, WITHSCORES not supported in combination with BYLEX"),
        (["ZREVRANGE", key, 0, -1, "LIMIT", 0, 1], "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"),
        (["ZRANGE", key, 0, -1, "REV", "REV"], "syntax error"),
        (["ZRANGE", key, 0, -1, "BYSCORE", "BYLEX"], "syntax error"),
        (["ZRANGE", key, 0, -1, "LIMIT", 0], "syntax error"),
        (["ZRANGE", key, 0, -1, "FOO"], "syntax error"),
        (["ZRANGEBYSCORE", key, 0, 1, "REV"], "syntax error"),
        (["ZRANGEBYSCORE", key, 0, 1, "BYSCORE"], "syntax error"),
        (["ZREVRANGE", key, 0, 1, "BYSCORE"], "syntax error"),
        (["ZRANGE", key, 0, -1, "LIMIT", "a", 1], "value is not an integer or out of range"),
        (["ZRANGE", key, "a", -1], "value is not an integer or out of range"),
        (["ZRANGE", key, "a", "b", "BYSCORE"], "min or max is not a float"),
        (["ZRANGE", key, "a", "b", "BYLEX"], "min or max not valid string range item"),
    ]
    for args, message in cases:
        with pytest.raises(redis.ResponseError) as error:
            r.execute_command(*args)
        assert str(error.value) == message, args


def test_lex_ranges(r, key):
    r.zadd(key, {m: 0 for m in ["", "a", "aa", "ab", "b", "c", "d", "e", "zz"]})
    assert r.zrangebylex(key, "-", "+") == [b"", b"a", b"aa", b"ab", b"b", b"c", b"d", b"e", b"zz"]
    assert r.zrangebylex(key, "[a", "+", start=0, num=3) == [b"a", b"aa", b"ab"]
    assert r.zrangebylex(key, "(a", "[c") == [b"aa", b"ab", b"b", b"c"]
    assert r.zrangebylex(key, "[aa", "(b") == [b"aa", b"ab"]
    assert r.zrangebylex(key, "-", "[") == [b""]
    assert r.zrangebylex(key, "[c", "[a") == []
    assert r.zrangebylex(key, "[c", "(c") == []
    assert r.zrangebylex(key, "[c", "[c") == [b"c"]
    assert r.zrangebylex(key, "+", "+") == []
    assert r.zrangebylex(key, "-", "-") == []
    assert r.zrangebylex(key, "[a", "+", start=2, num=-1) == [b"ab", b"b", b"c", b"d", b"e", b"zz"]
    assert r.zrangebylex(key, "[a", "+", start=-1, num=3) == []
    assert r.zrevrangebylex(key, "+", "-", start=0, num=3) == [b"zz", b"e", b"d"]
    assert r.zrevrangebylex(key, "(e", "(b", start=1, num=2) == [b"c"]
    assert r.zrevrangebylex(key, "[b", "[e") == []
    assert r.zrange(key, "[e", "[b", bylex=True, desc=True) == [b"e", b"d", b"c", b"b"]
    assert r.zrange(key, "(a", "+", bylex=True, offset=0, num=2) == [b"aa", b"ab"]
    assert r.zlexcount(key, "-", "+") == 9
    assert r.zlexcount(key, "[b", "(e") == 3
    assert r.zlexcount(key, "[z", "-") == 0
    assert r.zlexcount(key + "missing", "-", "+") == 0
    for bad in (["a", "[c"], ["[a", "c"], ["-a", "+"], ["-", "++"], ["", "+"]):
        with pytest.raises(redis.ResponseError) as error:
            r.execute_command("ZRANGEBYLEX", key, *bad)
        assert str(error.value) == "min or max not valid string range item"
    with pytest.raises(redis.ResponseError, match="^min or max not valid string range item$"):
        r.zlexcount(key, "a", "b")
    binary = [bytes([0]), bytes([0x7F]), bytes([0x80]), bytes([0xFF])]
    r.zadd(key + "bin", {m: 0 for m in binary})
    assert r.zrangebylex(key + "bin", "-", "+") == binary
    assert r.zrangebylex(key + "bin", b"(\x7f", "+") == binary[2:]


def test_lex_ranges_with_mixed_scores_walk_as_a_small_redis_set(r, key):
    # Score order: m(0) a(1) z(2) b(3) c(3). A small Redis sorted set (these answers are
    # redis-server's) gives nothing when the last member is below min or the first above max,
    # else walks this order from the first member >= min to the first member > max (REV: from
    # the last member <= max down to the first < min). Osprey does the same at any size.
    r.zadd(key, {"m": 0, "a": 1, "z": 2, "b": 3, "c": 3})
    assert r.zrangebylex(key, "[b", "[c") == []
    assert r.zrangebylex(key, "-", "[c") == []
    assert r.zrangebylex(key, "[n", "+") == []
    assert r.zrangebylex(key, "[b", "+") == [b"m", b"a", b"z", b"b", b"c"]
    assert r.zrangebylex(key, "[b", "+", start=2, num=2) == [b"z", b"b"]
    assert r.zrevrangebylex(key, "[c", "[b") == []
    assert r.zrevrangebylex(key, "+", "[b") == [b"c", b"b", b"z"]
    assert r.zlexcount(key, "[b", "[z") == 5
    assert r.zremrangebylex(key, "(a", "+") == 5
    assert r.exists(key) == 0


def test_zrank_and_zrevrank(r, key):
    r.zadd(key, {"a": 1, "b": 2, "c": 3})
    assert r.zrank(key, "a") == 0 and r.zrank(key, "c") == 2
    assert r.zrevrank(key, "a") == 2 and r.zrevrank(key, "c") == 0
    assert r.zrank(key, "nosuch") is None
    assert r.zrank(key + "missing", "a") is None
    with pytest.raises(redis.ResponseError) as error:
        r.execute_command("ZRANK", key, "a", "extra")
    assert str(error.value) == "syntax error"
    with pytest.raises(redis.ResponseError) as error:
        r.execute_command("ZREVRANK", key, "a", "WITHSCORE", "x")
    assert str(error.value) == "wrong number of arguments for 'zrevrank' command"


def test_zrank_withscore_shapes(raw2, raw3, key):
    raw2("ZADD", key, "1.5", "a", "2", "b")
    assert raw2("ZRANK", key, "b", "WITHSCORE") == b"*2\r\n:1\r\n" + bulk("2")
    assert raw3("ZRANK", key, "b", "withscore") == b"*2\r\n:1\r\n,2\r\n"
    assert raw3("ZREVRANK", key, "a", "WITHSCORE") == b"*2\r\n:1\r\n,1.5\r\n"
    assert raw2("ZRANK", key, "nosuch", "WITHSCORE") == b"*-1\r\n"
    assert raw3("ZRANK", key, "nosuch", "WITHSCORE") == b"_\r\n"
    assert raw2("ZRANK", key + "missing", "a", "WITHSCORE") == b"*-1\r\n"
    assert raw2("ZRANK", key, "nosuch") == b"$-1\r\n"


# -- ZPOPMIN, ZPOPMAX, ZREM, ZREMRANGEBY* -------------------------------------------------------


def test_zpop_shapes(raw2, raw3, key):
    raw2("ZADD", key, "1", "a", "2", "b", "3", "c", "4", "d", "5", "e")
    assert raw2("ZPOPMIN", key) == b"*2\r\n" + bulk("a") + bulk("1")
    assert raw3("ZPOPMIN", key) == b"*2\r\n" + bulk("b") + b",2\r\n"
    assert raw2("ZPOPMAX", key, 2) == b"*4\r\n" + bulk("e") + bulk("5") + bulk("d") + bulk("4")
    raw2("ZADD", key, "4", "d", "5", "e")
    assert raw3("ZPOPMAX", key, 2) == b"*2\r\n*2\r\n" + bulk("e") + b",5\r\n*2\r\n" + bulk("d") + b",4\r\n"
    assert raw3("ZPOPMIN", key, 1) == b"*1\r\n*2\r\n" + bulk("c") + b",3\r\n"
    assert raw3("ZPOPMIN", key, 0) == b"*0\r\n"
    assert raw2("EXISTS", key) == b":0\r\n"
    assert raw3("ZPOPMIN", key) == b"*0\r\n"
    assert raw3("ZPOPMIN", key, 3) == b"*0\r\n"
    assert raw2("ZPOPMIN", key, -1) == b"-ERR value is out of range, must be positive\r\n"
    assert raw2("ZPOPMIN", key, "x") == b"-ERR value is out of range, must be positive\r\n"
    assert raw2("ZPOPMIN", key, 1, 2) == b"-ERR syntax error\r\n"


def test_zpop_takes_from_the_ends_and_deletes_the_emptied_key(r, key):
    r.zadd(key, {"a": 1, "b": 2, "c": 3})
    assert pairs(r.zpopmax(key, 10)) == [(b"c", 3.0), (b"b", 2.0), (b"a", 1.0)]
    assert r.exists(key) == 0
    assert r.type(key) in (b"none", "none")


def test_zrem_and_zremrange(r, key):
    r.zadd(key, {m: i for i, m in enumerate("abcdef", start=1)})
    assert r.zrem(key, "a", "b", "nosuch") == 2
    assert r.zrem(key, "nosuch") == 0
    assert r.zrem(key + "missing", "a") == 0
    assert r.zremrangebyrank(key, -1, -1) == 1
    assert r.zremrangebyrank(key, 5, 1) == 0
    assert r.zrange(key, 0, -1) == [b"c", b"d", b"e"]
    assert r.zremrangebyscore(key, "(3", 4) == 1
    assert r.zremrangebyscore(key, 10, 20) == 0
    assert r.zrange(key, 0, -1) == [b"c", b"e"]
    assert r.zremrangebyrank(key, 0, -1) == 2
    assert r.exists(key) == 0
    r.zadd(key, {m: 0 for m in "abcd"})
    assert r.zremrangebylex(key, "[b", "(d") == 2
    assert r.zrange(key, 0, -1) == [b"a", b"d"]
    assert r.zremrangebylex(key, "-", "+") == 2
    assert r.exists(key) == 0
    assert r.zremrangebyrank(key, 0, -1) == 0
    assert r.zremrangebyscore(key, "-inf", "+inf") == 0
    assert r.zremrangebylex(key, "-", "+") == 0
    for command, args, message in [
        ("ZREMRANGEBYRANK", ["a", 1], "value is not an integer or out of range"),
        ("ZREMRANGEBYSCORE", ["a", 1], "min or max is not a float"),
        ("ZREMRANGEBYLEX", ["b", "d"], "min or max not valid string range item"),
    ]:
        with pytest.raises(redis.ResponseError) as error:
            r.execute_command(command, key, *args)
        assert str(error.value) == message


# -- ZSCAN, types, arity ------------------------------------------------------------------------


def test_zscan(raw2, raw3, key):
    raw2("ZADD", key, "1.5", "apple", "2", "banana", "0.1", "avocado")
    everything = b"*6\r\n" + bulk("avocado") + bulk("0.1") + bulk("apple") + bulk("1.5") + bulk("banana") + bulk("2")
    assert raw2("ZSCAN", key, 0) == b"*2\r\n" + bulk("0") + everything
    # Scores stay bulk strings in RESP3, as Redis writes them.
    assert raw3("ZSCAN", key, 0, "COUNT", 100) == b"*2\r\n" + bulk("0") + everything
    assert raw2("ZSCAN", key, 0, "MATCH", "a*") == b"*2\r\n" + bulk("0") + b"*4\r\n" + bulk("avocado") + bulk("0.1") + bulk("apple") + bulk("1.5")
    assert raw2("ZSCAN", key + "missing", 0) == b"*2\r\n" + bulk("0") + b"*0\r\n"
    assert raw2("ZSCAN", key, "x") == b"-ERR invalid cursor\r\n"


def test_zscan_through_redis_py(r, key):
    r.zadd(key, {f"m{i}": i for i in range(50)})
    expected = {b"m1": 1.0} | {f"m1{i}".encode(): float(10 + i) for i in range(10)}
    assert dict(r.zscan_iter(key, match="m1*")) == expected


def test_wrong_types_and_missing_keys(r, key):
    r.set(key, "v")
    for args in [
        ["ZSCORE", key, "a"],
        ["ZMSCORE", key, "a"],
        ["ZCARD", key],
        ["ZRANK", key, "a"],
        ["ZRANGE", key, 0, -1],
        ["ZRANGEBYLEX", key, "-", "+"],
        ["ZCOUNT", key, 0, 1],
        ["ZLEXCOUNT", key, "-", "+"],
        ["ZREM", key, "a"],
        ["ZINCRBY", key, 1, "a"],
        ["ZPOPMIN", key],
        ["ZREMRANGEBYRANK", key, 0, 1],
        ["ZSCAN", key, 0],
    ]:
        with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
            r.execute_command(*args)
    r.zadd(key + "z", {"a": 1})
    assert r.type(key + "z") in (b"zset", "zset")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.get(key + "z")
    missing = key + "missing"
    assert r.zcard(missing) == 0
    assert r.zrange(missing, 0, -1) == []
    assert r.zrangebyscore(missing, "-inf", "+inf") == []
    assert r.zpopmin(missing) == []


@pytest.mark.parametrize(
    "command, count",
    [
        ("zadd", 3), ("zcard", 1), ("zcount", 2), ("zincrby", 3), ("zlexcount", 3), ("zmscore", 2),
        ("zpopmax", 1), ("zpopmin", 1), ("zrange", 3), ("zrangebylex", 3), ("zrangebyscore", 3),
        ("zrank", 2), ("zrem", 2), ("zremrangebylex", 3), ("zremrangebyrank", 3), ("zremrangebyscore", 5),
        ("zrevrange", 3), ("zrevrangebylex", 3), ("zrevrangebyscore", 3), ("zrevrank", 2), ("zscan", 2), ("zscore", 2),
    ],
)
def test_arity_follows_redis(resp_server, command, count):
    r = resp_server.redis()
    with pytest.raises(redis.ResponseError) as error:
        r.execute_command(command.upper(), *(["k"] * (count - 1)))
    assert str(error.value) == f"wrong number of arguments for '{command}' command"


# -- a large set against a model ----------------------------------------------------------------


def test_a_large_set_matches_a_model(resp_server, key):
    r = resp_server.redis()
    rng = random.Random(7)
    model: dict[bytes, float] = {}
    pipe = r.pipeline(transaction=False)
    for _ in range(6):
        batch = {f"m{rng.randrange(100_000):05d}".encode(): float(rng.randrange(-400, 400)) / 4 for _ in range(1000)}
        model.update(batch)
        pipe.zadd(key, batch)
    pipe.execute()
    for member in rng.sample(sorted(model), 300):
        del model[member]
        r.zrem(key, member)
    ordered = sorted(model.items(), key=lambda item: (item[1], item[0]))
    names = [member for member, _ in ordered]
    n = len(ordered)
    assert r.zcard(key) == n
    assert pairs(r.zrange(key, 0, -1, withscores=True)) == ordered
    pipe = r.pipeline(transaction=False)
    checks = []
    for _ in range(200):
        start, stop = rng.randrange(-n - 5, n + 5), rng.randrange(-n - 5, n + 5)
        pipe.zrange(key, start, stop)
        s, e = (start + n if start < 0 else start), (stop + n if stop < 0 else stop)
        s = max(s, 0)
        checks.append(names[s : e + 1] if s <= e and s < n else [])
    for member in rng.sample(names, 100):
        pipe.zrank(key, member)
        checks.append(names.index(member))
        pipe.zrevrank(key, member)
        checks.append(n - 1 - names.index(member))
    for _ in range(100):
        low, high = sorted(rng.randrange(-400, 400) / 4 for _ in range(2))
        offset, count = rng.randrange(0, 20), rng.randrange(-1, 30)
        pipe.zrangebyscore(key, f"({low}", high, start=offset, num=count)
        inside = [m for m, score in ordered if low < score <= high][offset:]
        checks.append(inside if count < 0 else inside[:count])
        pipe.zcount(key, low, f"({high}")
        checks.append(sum(1 for _, score in ordered if low <= score < high))
    assert pipe.execute() == checks


def test_large_equal_score_set_lex_ranges_match_a_model(resp_server, key):
    r = resp_server.redis()
    rng = random.Random(11)
    members = sorted({"".join(rng.choice("abcde") for _ in range(rng.randrange(0, 6))).encode() for _ in range(3000)})
    for i in range(0, len(members), 500):
        r.zadd(key, {m: 0 for m in members[i : i + 500]})
    pipe = r.pipeline(transaction=False)
    checks = []
    for _ in range(200):
        low, high = sorted(rng.sample(members, 2))
        lo_ex, hi_ex = rng.random() < 0.5, rng.random() < 0.5
        lo = (b"(" if lo_ex else b"[") + low
        hi = (b"(" if hi_ex else b"[") + high
        inside = [m for m in members if (m > low if lo_ex else m >= low) and (m < high if hi_ex else m <= high)]
        pipe.zrangebylex(key, lo, hi, start=0, num=10)
        checks.append(inside[:10])
        pipe.zrevrangebylex(key, hi, lo, start=2, num=5)
        checks.append(inside[::-1][2:7])
        pipe.zlexcount(key, lo, hi)
        checks.append(len(inside))
    assert pipe.execute() == checks


# -- Aerospike clients --------------------------------------------------------------------------


def test_a_zset_is_a_map_bin_for_aerospike_clients(resp_server, key):
    r = resp_server.redis()
    client = resp_server.client()
    r.zadd(key, {"a": 1.5, "b": 2})
    _, _, bins = client.get(("test", "redis", key))
    assert bins == {"zset": {"a": 1.5, "b": 2.0}}
    client.put(("test", "redis", key + "as"), {"zset": {"x": 3, "y": 0.5}})
    assert r.type(key + "as") in (b"zset", "zset")
    assert pairs(r.zrange(key + "as", 0, -1, withscores=True)) == [(b"y", 0.5), (b"x", 3.0)]
    assert r.zadd(key + "as", {"z": 1}) == 1
    assert client.get(("test", "redis", key + "as"))[2] == {"zset": {"x": 3.0, "y": 0.5, "z": 1.0}}
    client.put(("test", "redis", key + "bad"), {"zset": {"x": "not a score"}})
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.zscore(key + "bad", "x")


# -- the same bytes as redis-server -------------------------------------------------------------




# Commands whose replies are the same in every Redis 7.x: scores are integers or halves, whose
# text is the same under 7.0's `%.17g` and 7.2's shortest form, and no ZRANK WITHSCORE (7.2).
SCRIPT = """
ZADD s 1 a 2 b 3 c
ZADD s CH 1.5 a 5 b 4 d 6 e
ZADD s NX 10 a 7 f
ZADD s XX CH 11 a 8 b
ZADD s GT CH 1 a 100 b
ZADD s LT CH 1 a 100 b
ZADD s INCR 2.5 a
ZADD s INCR NX 2.5 a
ZADD s INCR XX 2.5 nosuch
ZADD s GT LT 1 a
ZADD s INCR 1 a 2 b
ZADD s inf i -inf j
ZADD s INCR -inf i
ZADD s " 1" a
ZRANGE s 0 -1 WITHSCORES
ZRANGE s -3 -1 REV WITHSCORES
ZREVRANGE s 1 2 WITHSCORES
ZRANGE s (1.5 +inf BYSCORE LIMIT 1 3 WITHSCORES
ZRANGE s +inf (1.5 BYSCORE REV LIMIT 1 3 WITHSCORES
ZRANGEBYSCORE s "" ""
ZRANGEBYSCORE s -inf +inf LIMIT -1 2
ZREVRANGEBYSCORE s (100 (2 WITHSCORES
ZRANGE s 0 -1 LIMIT 0 1
ZRANGE s 0 -1 BYSCORE BYLEX
ZCOUNT s (1 100
ZMSCORE s a nosuch i
ZINCRBY s 0.5 a
ZINCRBY s -inf i
ZPOPMIN s 2
ZPOPMAX s
ZPOPMIN s 0
ZPOPMIN s -1
ZSCAN s 0 MATCH *
ZADD l 0 a 0 b 0 c 0 d 0 e 0 aa 0 ab 0 ""
ZRANGEBYLEX l [a + LIMIT 0 3
ZRANGEBYLEX l (a [c
ZRANGEBYLEX l - [
ZRANGEBYLEX l [c (c
ZRANGEBYLEX l a c
ZRANGEBYLEX l - + WITHSCORES
ZREVRANGEBYLEX l + - LIMIT 2 3
ZRANGE l [e [b BYLEX REV LIMIT 1 2
ZLEXCOUNT l [b (e
ZREMRANGEBYLEX l [b (d
ZADD m 1 a 2 z 3 b 3 c 0 m
ZRANGEBYLEX m [b +
ZREVRANGEBYLEX m [c [b
ZLEXCOUNT m - [c
ZREMRANGEBYRANK m 1 -2
ZREMRANGEBYSCORE m (0 +inf
ZRANGE m 0 -1 WITHSCORES
ZRANK m nosuch
"""


def test_replies_are_byte_for_byte_those_of_redis_server(resp_server, redis_server_port):
    rng = random.Random(5)
    commands = [shlex.split(line) for line in SCRIPT.strip().splitlines()]
    members = ["", "a", "b", "c", "aa", "ab", "zz"] + [f"m{i}" for i in range(200)]
    for _ in range(400):
        zkey = rng.choice(["big", "lex"])
        member = rng.choice(members)
        score = "0" if zkey == "lex" else str(rng.randrange(-20, 20) / 2)
        bound = lambda: rng.choice(["(", ""]) + str(rng.randrange(-12, 12) / 2)
        lex = lambda: rng.choice(["-", "+", "[" + rng.choice(members), "(" + rng.choice(members)])
        limit = ["LIMIT", str(rng.randrange(-1, 4)), str(rng.randrange(-1, 6))]
        commands.append(
            rng.choice(
                [
                    ["ZADD", zkey, score, member, score, rng.choice(members)],
                    ["ZADD", zkey, score, member],
                    ["ZREM", zkey, member],
                    ["ZRANK", zkey, member],
                    ["ZREVRANK", zkey, member],
                    ["ZRANGE", zkey, str(rng.randrange(-9, 9)), str(rng.randrange(-9, 9)), "WITHSCORES"],
                    ["ZRANGEBYSCORE", zkey, bound(), bound(), "WITHSCORES", *limit],
                    ["ZREVRANGEBYSCORE", zkey, bound(), bound(), *limit],
                    ["ZRANGEBYLEX", "lex", lex(), lex(), *limit],
                    ["ZREVRANGEBYLEX", "lex", lex(), lex(), *limit],
                    ["ZLEXCOUNT", "lex", lex(), lex()],
                    ["ZCOUNT", zkey, bound(), bound()],
                    ["ZPOPMIN", zkey, str(rng.randrange(0, 3))],
                ]
            )
        )
    commands += [["ZRANGE", "big", "0", "-1", "WITHSCORES"], ["ZRANGE", "lex", "0", "-1"]]
    prefix = harness.unique("cmp") + ":"
    for protocol in (2, 3):
        ours, theirs = Raw(resp_server.resp_port, protocol), Raw(redis_server_port, protocol)
        try:
            theirs("FLUSHALL")
            mine = {}
            for command in commands:
                # Prefix Osprey's keys so that this test leaves the others' keys alone.
                key_name = mine.setdefault(command[1], f"{prefix}{protocol}:{command[1]}")
                expected = theirs(*command)
                got = ours(command[0], key_name, *command[2:])
                assert got == expected, f"RESP{protocol} {shlex.join(command)}"
        finally:
            ours.close()
            theirs.close()

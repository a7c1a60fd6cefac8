"""Redis lists through the RESP front end: LPUSH/RPUSH(X), LPOP/RPOP with and without a count,
LLEN, LRANGE, LINDEX, LSET, LREM, LTRIM, LINSERT and LPOS, with Redis 7.2's replies and error
texts in RESP2 and RESP3; a list's bytes in the set statistics; the same list through the
Aerospike client.
"""

from __future__ import annotations

import socket

import pytest
import redis

import harness

RESP_SET = "redis"


@pytest.fixture
def key():
    return harness.unique("list")


def raw_exchange(port: int, payload: bytes, expect: int, timeout: float = 3.0) -> bytes:
    """Sends `payload` and reads until `expect` bytes arrived (or the timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(payload)
        data = b""
        try:
            while len(data) < expect:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except socket.timeout:
            pass
        return data


def command(*args: str | bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        arg = arg.encode() if isinstance(arg, str) else arg
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


def test_pushes_order_elements_and_answer_the_length(r, key):
    assert r.rpush(key, "b", "c") == 2
    assert r.lpush(key, "a", "z") == 4
    assert r.lrange(key, 0, -1) == [b"z", b"a", b"b", b"c"]
    assert r.llen(key) == 4
    assert r.type(key) in (b"list", "list")
    assert r.lpushx(key, "y") == 5
    assert r.rpushx(key, "d", "e") == 7
    assert r.lrange(key, 0, -1) == [b"y", b"z", b"a", b"b", b"c", b"d", b"e"]
    assert r.lpushx(key + "missing", "x") == 0
    assert r.rpushx(key + "missing", "x") == 0
    assert r.exists(key + "missing") == 0
    assert r.llen(key + "missing") == 0
    binary = bytes(range(256))
    assert r.rpush(key, binary, b"") == 9
    assert r.lrange(key, -2, -1) == [binary, b""]


def test_pops_without_a_count(r, key):
    r.rpush(key, "a", "b", "c")
    assert r.lpop(key) == b"a"
    assert r.rpop(key) == b"c"
    assert r.rpop(key) == b"b"
    # The pop that empties the list deletes the key.
    assert r.exists(key) == 0
    assert r.type(key) in (b"none", "none")
    assert r.lpop(key) is None
    assert r.rpop(key) is None


def test_pops_with_a_count(r, key):
    r.rpush(key, "a", "b", "c", "d", "e")
    assert r.lpop(key, 2) == [b"a", b"b"]
    # RPOP's elements come in pop order: the tail first.
    assert r.rpop(key, 2) == [b"e", b"d"]
    assert r.lpop(key, 0) == []
    assert r.rpop(key, 0) == []
    assert r.llen(key) == 1
    assert r.lpop(key, 10) == [b"c"]
    assert r.exists(key) == 0
    # A missing key with a count is a null array, also with count 0.
    assert r.lpop(key, 1) is None
    assert r.rpop(key, 0) is None
    for bad in ("-1", "abc", "1.5"):
        with pytest.raises(redis.ResponseError) as error:
            r.execute_command("LPOP", key, bad)
        assert str(error.value) == "value is out of range, must be positive"
    with pytest.raises(redis.ResponseError) as error:
        r.execute_command("RPOP", key, "1", "2")
    assert str(error.value) == "wrong number of arguments for 'rpop' command"


def test_pop_replies_on_the_wire(resp_server, key):
    port = resp_server.resp_port
    setup = command("RPUSH", key, "a", "b", "c")
    pops = (
        command("LPOP", key + "missing", "1")
        + command("LPOP", key + "missing")
        + command("LPOP", key, "0")
        + command("RPOP", key, "2")
        + command("LPOP", key)
    )
    resp2 = b"*-1\r\n$-1\r\n*0\r\n*2\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"
    reply = raw_exchange(port, setup + pops, expect=4 + len(resp2))
    assert reply == b":3\r\n" + resp2
    hello = command("HELLO", "3")
    resp3 = b"_\r\n_\r\n*0\r\n*2\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"
    reply = raw_exchange(port, hello + setup + pops, expect=10_000, timeout=1.0)
    assert reply.endswith(b":3\r\n" + resp3)


def test_lrange_indexes(r, key):
    r.rpush(key, *"abcde")
    assert r.lrange(key, 0, 0) == [b"a"]
    assert r.lrange(key, 1, 3) == [b"b", b"c", b"d"]
    assert r.lrange(key, -3, -2) == [b"c", b"d"]
    assert r.lrange(key, -100, 100) == [b"a", b"b", b"c", b"d", b"e"]
    assert r.lrange(key, 3, 1) == []
    assert r.lrange(key, 5, 10) == []
    assert r.lrange(key, 0, -6) == []
    assert r.lrange(key, -1, -1) == [b"e"]
    assert r.lrange(key + "missing", 0, -1) == []
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("LRANGE", key, "x", "1")


def test_lindex_and_lset(r, key):
    r.rpush(key, "a", "b", "c")
    assert r.lindex(key, 0) == b"a"
    assert r.lindex(key, -1) == b"c"
    assert r.lindex(key, -3) == b"a"
    assert r.lindex(key, 3) is None
    assert r.lindex(key, -4) is None
    assert r.lindex(key + "missing", 0) is None
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("LINDEX", key, "x")
    assert r.lset(key, 1, "B") is True
    assert r.lset(key, -1, "C") is True
    assert r.lrange(key, 0, -1) == [b"a", b"B", b"C"]
    with pytest.raises(redis.ResponseError) as error:
        r.lset(key, 3, "x")
    assert str(error.value) == "index out of range"
    with pytest.raises(redis.ResponseError) as error:
        r.lset(key, -4, "x")
    assert str(error.value) == "index out of range"
    with pytest.raises(redis.ResponseError) as error:
        r.lset(key + "missing", 0, "x")
    assert str(error.value) == "no such key"
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("LSET", key, "one", "x")


def test_lrem_from_the_head_the_tail_or_all(r, key):
    r.rpush(key, "a", "b", "a", "c", "a", "b", "a")
    assert r.lrem(key, 2, "a") == 2
    assert r.lrange(key, 0, -1) == [b"b", b"c", b"a", b"b", b"a"]
    assert r.lrem(key, -1, "b") == 1
    assert r.lrange(key, 0, -1) == [b"b", b"c", b"a", b"a"]
    assert r.lrem(key, 0, "a") == 2
    assert r.lrange(key, 0, -1) == [b"b", b"c"]
    assert r.lrem(key, 0, "zzz") == 0
    assert r.lrem(key, -10, "c") == 1
    assert r.lrem(key, 1, "b") == 1
    assert r.exists(key) == 0
    assert r.lrem(key, 0, "a") == 0
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("LREM", key, "x", "a")


def test_ltrim(r, key):
    r.rpush(key, *"abcdef")
    assert r.ltrim(key, 1, -2) is True
    assert r.lrange(key, 0, -1) == [b"b", b"c", b"d", b"e"]
    assert r.ltrim(key, -100, 100) is True
    assert r.lrange(key, 0, -1) == [b"b", b"c", b"d", b"e"]
    assert r.ltrim(key, -2, -1) is True
    assert r.lrange(key, 0, -1) == [b"d", b"e"]
    # An empty range empties the list, which deletes the key.
    assert r.ltrim(key, 1, 0) is True
    assert r.exists(key) == 0
    assert r.ltrim(key, 0, -1) is True
    r.rpush(key, "a", "b")
    assert r.ltrim(key, 5, 10) is True
    assert r.exists(key) == 0
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("LTRIM", key, "0", "y")


def test_linsert(r, key):
    r.rpush(key, "a", "c", "a")
    assert r.linsert(key, "BEFORE", "c", "b") == 4
    assert r.linsert(key, "after", "a", "a2") == 5
    assert r.lrange(key, 0, -1) == [b"a", b"a2", b"b", b"c", b"a"]
    assert r.linsert(key, "AFTER", "nope", "x") == -1
    assert r.linsert(key + "missing", "BEFORE", "a", "x") == 0
    assert r.exists(key + "missing") == 0
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("LINSERT", key, "MIDDLE", "a", "x")


def test_lpos(r, key):
    r.rpush(key, "a", "b", "c", "1", "2", "3", "c", "c")
    assert r.lpos(key, "c") == 2
    assert r.lpos(key, "c", rank=2) == 6
    assert r.lpos(key, "c", rank=-1) == 7
    assert r.lpos(key, "c", rank=-3) == 2
    assert r.lpos(key, "c", rank=4) is None
    assert r.lpos(key, "nope") is None
    assert r.lpos(key, "c", count=2) == [2, 6]
    assert r.lpos(key, "c", count=0) == [2, 6, 7]
    assert r.lpos(key, "c", rank=-1, count=2) == [7, 6]
    assert r.lpos(key, "c", count=0, maxlen=3) == [2]
    assert r.lpos(key, "c", rank=-1, count=0, maxlen=2) == [7, 6]
    assert r.lpos(key, "c", maxlen=2) is None
    assert r.lpos(key, "nope", count=1) == []
    assert r.lpos(key + "missing", "c") is None
    assert r.lpos(key + "missing", "c", count=1) == []
    errors = [
        (["RANK", "0"], "RANK can't be zero: use 1 to start from the first match, 2 from the "
                        "second ... or use negative to start from the end of the list"),
        (["RANK", "x"], "value is not an integer or out of range"),
        (["RANK", str(-(2**63))],
         "value is out of range, value must between -9223372036854775807 and 9223372036854775807"),
        (["COUNT", "-1"], "COUNT can't be negative"),
        (["COUNT", "x"], "COUNT can't be negative"),
        (["MAXLEN", "-1"], "MAXLEN can't be negative"),
        (["COUNT"], "syntax error"),
        (["FOO", "1"], "syntax error"),
    ]
    for options, message in errors:
        with pytest.raises(redis.ResponseError) as error:
            r.execute_command("LPOS", key, "c", *options)
        assert str(error.value) == message, options
    # The options are checked before the key.
    with pytest.raises(redis.ResponseError, match="^RANK can't be zero"):
        r.execute_command("LPOS", key + "missing", "c", "RANK", "0")


def test_wrong_types_and_arities(r, key):
    r.set(key, "a string")
    for args in (
        ["LPUSH", key, "x"], ["RPUSH", key, "x"], ["LPUSHX", key, "x"], ["RPUSHX", key, "x"],
        ["LPOP", key], ["RPOP", key, "2"], ["LPOP", key, "0"], ["LLEN", key],
        ["LRANGE", key, "0", "-1"], ["LINDEX", key, "0"], ["LSET", key, "0", "x"],
        ["LREM", key, "0", "x"], ["LTRIM", key, "0", "1"], ["LINSERT", key, "BEFORE", "a", "b"],
        ["LPOS", key, "a"],
    ):
        with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
            r.execute_command(*args)
    assert r.get(key) == b"a string"
    r.hset(key + "h", "f", "v")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.lpush(key + "h", "x")
    r.rpush(key + "l", "a")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.hget(key + "l", "f")
    for args in (
        ["LPUSH", key], ["RPUSHX", key], ["LPOP"], ["LLEN"], ["LLEN", key, key],
        ["LRANGE", key, "0"], ["LINDEX", key], ["LSET", key, "0"], ["LREM", key, "0"],
        ["LTRIM", key, "0"], ["LINSERT", key, "BEFORE", "a"], ["LPOS", key],
    ):
        with pytest.raises(redis.ResponseError) as error:
            r.execute_command(*args)
        assert str(error.value) == f"wrong number of arguments for '{args[0].lower()}' command"


def test_a_list_s_bytes_follow_every_change(resp_server, key):
    """The set's data_used_bytes stays the stored key's bytes plus the list's elements, each
    costing its bytes plus one fixed overhead, through every kind of change; none is left
    after the list is gone."""
    r = resp_server.redis()
    client = resp_server.client()

    def used() -> int:
        # The set does not exist before the first Redis write.
        text = harness.info(client, f"sets/test/{RESP_SET}")
        return int(harness.parse_set_entry(text)["data_used_bytes"]) if text else 0

    baseline = used()
    r.rpush(key, "a")
    one = used() - baseline
    r.rpush(key, "bcd")
    overhead = used() - baseline - one - 3
    key_bytes = one - 1 - overhead
    assert overhead >= 0 and key_bytes >= len(key)

    def check():
        elements = r.lrange(key, 0, -1)
        expected = key_bytes + sum(len(e) + overhead for e in elements) if elements else 0
        assert used() - baseline == expected, elements

    r.lpush(key, "x" * 100, "y")
    check()
    r.lset(key, 0, "a much longer value")
    check()
    r.lset(key, 0, "s")
    check()
    r.linsert(key, "AFTER", "s", "inserted")
    check()
    r.lpop(key)
    r.rpop(key, 2)
    check()
    r.rpush(key, *["e%d" % i for i in range(50)])
    r.lrem(key, 0, "e7")
    r.lrem(key, -2, "x" * 100)
    check()
    r.ltrim(key, 3, -5)
    check()
    r.lpop(key, 1000)
    check()
    assert used() == baseline
    r.rpush(key, "again", "twice")
    r.delete(key)
    assert used() == baseline


def test_long_lists_push_and_pop_in_order(resp_server, key):
    r = resp_server.redis()
    pipe = r.pipeline(transaction=False)
    for i in range(0, 20_000, 100):
        pipe.rpush(key, *[str(j) for j in range(i, i + 100)])
    replies = pipe.execute()
    assert replies[-1] == 20_000
    assert r.lindex(key, 12_345) == b"12345"
    assert r.lrange(key, 19_998, -1) == [b"19998", b"19999"]
    assert r.lpos(key, "19999") == 19_999
    popped = r.lpop(key, 10_000)
    assert popped[0] == b"0" and popped[-1] == b"9999"
    popped = r.rpop(key, 10_001)
    assert popped[0] == b"19999" and popped[-1] == b"10000"
    assert r.exists(key) == 0


def test_a_list_is_an_aerospike_list_bin(resp_server, key):
    r = resp_server.redis()
    client = resp_server.client()
    r.rpush(key, "a", "b", "c")
    _, meta, bins = client.get(("test", RESP_SET, key))
    assert bins == {"list": ["a", "b", "c"]}
    generation = meta["gen"]
    r.lpush(key, "z")
    assert client.get(("test", RESP_SET, key))[2] == {"list": ["z", "a", "b", "c"]}
    assert client.get(("test", RESP_SET, key))[1]["gen"] == generation + 1
    # A change that changes nothing writes nothing.
    r.lrem(key, 0, "nope")
    r.ltrim(key, 0, -1)
    r.linsert(key, "BEFORE", "nope", "x")
    assert client.get(("test", RESP_SET, key))[1]["gen"] == generation + 1
    # A list an Aerospike client wrote is a Redis list; numbers read as their text.
    client.put(("test", RESP_SET, key + "as"), {"list": ["x", 7, "y"]})
    assert r.type(key + "as") in (b"list", "list")
    assert r.lrange(key + "as", 0, -1) == [b"x", b"7", b"y"]
    assert r.rpush(key + "as", "w") == 4
    assert r.lpop(key + "as") == b"x"
    assert client.get(("test", RESP_SET, key + "as"))[2] == {"list": ["7", "y", "w"]}
    # A record with other bins is not a list.
    client.put(("test", RESP_SET, key + "other"), {"list": ["x"], "more": 1})
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.lrange(key + "other", 0, -1)

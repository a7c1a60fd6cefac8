"""Redis sets through redis-py (RESP2 and RESP3) and raw sockets, and the same records through
the Aerospike client: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER,
SSCAN, SMOVE, SINTER, SUNION, SDIFF, their STORE forms and SINTERCARD.
"""

from __future__ import annotations

import random
import socket
import threading

import aerospike
import pytest
import redis

import harness

WRONGTYPE = "^WRONGTYPE Operation against a key holding the wrong kind of value$"


@pytest.fixture
def key():
    return harness.unique("s")


def members(reply) -> set[bytes]:
    """A set-shaped reply (list in RESP2, list or set in RESP3) as a Python set, checking that it
    holds no repeat."""
    items = list(reply)
    assert len(items) == len(set(items)), items
    return set(items)


def encode(*args) -> bytes:
    out = b"*%d\r\n" % len(args)
    for arg in args:
        arg = arg if isinstance(arg, bytes) else str(arg).encode()
        out += b"$%d\r\n%s\r\n" % (len(arg), arg)
    return out


def raw_replies(port: int, commands: list[tuple], protocol: int) -> bytes:
    """The raw bytes answering `commands` (after HELLO 3 when `protocol` is 3)."""
    payload = encode("HELLO", "3") if protocol == 3 else b""
    payload += b"".join(encode(*command) for command in commands) + encode("PING", "END-OF-REPLIES")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(payload)
        data = b""
        while not data.endswith(b"END-OF-REPLIES\r\n"):
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    if protocol == 3:
        data = data[data.index(b"modules\r\n*0\r\n") + len(b"modules\r\n*0\r\n"):]
    return data[: -len(b"$14\r\nEND-OF-REPLIES\r\n")]


def test_sadd_srem_scard_and_membership(r, key):
    assert r.sadd(key, "a", "b", "c", "a") == 3
    assert r.sadd(key, "c", "d") == 1
    assert r.sadd(key, "a") == 0
    assert r.scard(key) == 4
    assert r.scard(key + "missing") == 0
    assert r.sismember(key, "a") in (1, True)
    assert r.sismember(key, "z") in (0, False)
    assert r.sismember(key + "missing", "a") in (0, False)
    assert [bool(x) for x in r.smismember(key, ["a", "z", "d"])] == [True, False, True]
    assert [bool(x) for x in r.smismember(key + "missing", ["a", "b"])] == [False, False]
    assert r.srem(key, "a", "z", "a") == 1
    assert r.srem(key + "missing", "a") == 0
    assert members(r.smembers(key)) == {b"b", b"c", b"d"}
    assert r.type(key) in (b"set", "set")
    # Removing the last members deletes the key, as Redis does.
    assert r.srem(key, "b", "c", "d") == 3
    assert r.exists(key) == 0
    assert r.type(key) in (b"none", "none")


def test_binary_and_empty_members(r, key):
    binary = bytes(range(256))
    assert r.sadd(key, binary, b"", b"\xff\x00") == 3
    assert members(r.smembers(key)) == {binary, b"", b"\xff\x00"}
    assert r.sismember(key, b"") in (1, True)
    assert r.srem(key, binary) == 1


def test_smembers_of_a_missing_key_is_empty(r, key):
    assert members(r.smembers(key)) == set()


@pytest.mark.parametrize("protocol", [2, 3])
def test_reply_shapes_on_the_wire(resp_server, key, protocol):
    commands = [
        ("SADD", key, "m"),
        ("SMEMBERS", key),
        ("SMEMBERS", key + "missing"),
        ("SPOP", key + "missing"),
        ("SPOP", key + "missing", 2),
        ("SRANDMEMBER", key + "missing"),
        ("SRANDMEMBER", key + "missing", 2),
        ("SRANDMEMBER", key, 2),
        ("SMISMEMBER", key, "m", "x"),
        ("SSCAN", key, 0),
        ("SINTER", key, key + "missing"),
        ("SUNION", key),
        ("SPOP", key, 5),
    ]
    set_prefix = b"~" if protocol == 3 else b"*"
    null = b"_\r\n" if protocol == 3 else b"$-1\r\n"
    expected = (
        b":1\r\n"
        + set_prefix + b"1\r\n$1\r\nm\r\n"
        + set_prefix + b"0\r\n"
        + null
        + set_prefix + b"0\r\n"
        + null
        + b"*0\r\n"  # SRANDMEMBER with a count answers an array in both protocols.
        + b"*1\r\n$1\r\nm\r\n"
        + b"*2\r\n:1\r\n:0\r\n"
        + b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\nm\r\n"
        + set_prefix + b"0\r\n"
        + set_prefix + b"1\r\n$1\r\nm\r\n"
        + set_prefix + b"1\r\n$1\r\nm\r\n"
    )
    assert raw_replies(resp_server.resp_port, commands, protocol) == expected


def test_spop_one_member(r, key):
    assert r.spop(key) is None
    r.sadd(key, "a", "b", "c")
    popped = {r.spop(key) for _ in range(3)}
    assert popped == {b"a", b"b", b"c"}
    assert r.exists(key) == 0
    assert r.spop(key) is None


def test_spop_with_a_count(r, key):
    everything = {f"m{i}".encode() for i in range(100)}
    r.sadd(key, *everything)
    first = members(r.spop(key, 30))
    assert len(first) == 30 and first <= everything
    assert r.scard(key) == 70
    assert members(r.smembers(key)) == everything - first
    assert members(r.spop(key, 0)) == set()
    assert r.scard(key) == 70
    rest = members(r.spop(key, 1000))
    assert rest == everything - first
    assert r.exists(key) == 0
    assert members(r.spop(key, 5)) == set()


def test_spop_errors(r, key):
    r.sadd(key, "a")
    for bad in ("-1", "abc", "1.5", "99999999999999999999"):
        with pytest.raises(redis.ResponseError, match="^value is out of range, must be positive$"):
            r.execute_command("SPOP", key, bad)
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SPOP", key, 1, 2)
    assert r.scard(key) == 1


def test_srandmember_without_count_and_with_positive_counts(r, key):
    assert r.srandmember(key) is None
    everything = {f"m{i}".encode() for i in range(50)}
    r.sadd(key, *everything)
    seen = {r.srandmember(key) for _ in range(400)}
    assert seen <= everything and len(seen) > 30
    for count in (1, 5, 20, 49):
        picked = r.srandmember(key, count)
        assert len(picked) == count and members(picked) <= everything
    assert members(r.srandmember(key, 50)) == everything
    assert members(r.srandmember(key, 10**12)) == everything
    assert r.srandmember(key, 0) == []
    assert r.srandmember(key + "missing", 5) == []
    assert r.scard(key) == 50


def test_srandmember_with_negative_counts_repeats(r, key):
    r.sadd(key, "a", "b")
    picked = r.srandmember(key, -200)
    assert len(picked) == 200 and set(picked) == {b"a", b"b"}
    assert r.srandmember(key + "missing", -5) == []
    r.sadd(key + "one", "x")
    assert r.srandmember(key + "one", -3) == [b"x", b"x", b"x"]


def test_srandmember_errors_and_limits(r, key):
    r.sadd(key, "a")
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.srandmember(key, "abc")
    with pytest.raises(redis.ResponseError, match="^value is out of range, value must between -9223372036854775807 and 9223372036854775807$"):
        r.srandmember(key, -(2**63))
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SRANDMEMBER", key, 1, 2)
    # A negative count asks for a reply of that many members whatever the set's size: Osprey
    # refuses one that would pass 512 MiB rather than build it.
    with pytest.raises(redis.ResponseError, match="^value is out of range, the reply would exceed 512 MiB$"):
        r.srandmember(key, -(2**63 - 1))
    assert r.srandmember(key, 2**63 - 1) == [b"a"]


def test_sscan(r, key):
    assert r.sscan(key) == (0, [])
    r.sadd(key, "apple", "avocado", "banana")
    cursor, found = r.sscan(key)
    assert cursor == 0 and members(found) == {b"apple", b"avocado", b"banana"}
    assert members(r.sscan(key, 0, match="a*")[1]) == {b"apple", b"avocado"}
    assert r.sscan(key, 0, match="z*") == (0, [])
    assert members(r.sscan(key, 0, count=1)[1]) == {b"apple", b"avocado", b"banana"}
    with pytest.raises(redis.ResponseError, match="^invalid cursor$"):
        r.execute_command("SSCAN", key, "abc")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SSCAN", key, 0, "COUNT", 0)
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("SSCAN", key, 0, "COUNT", "x")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SSCAN", key, 0, "MATCH")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SSCAN", key, 0, "FOO", "bar")
    # As in Redis, a missing key answers an empty scan before its options are looked at.
    assert r.execute_command("SSCAN", key + "missing", 0, "COUNT", 0) in ([b"0", []], [0, []], (0, []))


def test_smove(r, key):
    src, dst, other = key + "src", key + "dst", key + "str"
    r.sadd(src, "a", "b")
    r.sadd(dst, "b")
    r.set(other, "v")
    assert r.smove(key + "missing", dst, "a") in (0, False)
    # A missing source answers 0 before the destination's type is checked, as in Redis.
    assert r.smove(key + "missing", other, "a") in (0, False)
    assert r.smove(src, dst, "zzz") in (0, False)
    assert r.smove(src, dst, "a") in (1, True)
    assert members(r.smembers(src)) == {b"b"}
    assert members(r.smembers(dst)) == {b"a", b"b"}
    # Same key: 1 if the member is there, nothing changes.
    assert r.smove(dst, dst, "a") in (1, True)
    assert r.smove(dst, dst, "zzz") in (0, False)
    # Moving a member the destination already has still removes it from the source.
    assert r.smove(src, dst, "b") in (1, True)
    assert r.exists(src) == 0
    assert members(r.smembers(dst)) == {b"a", b"b"}
    # A missing destination is created.
    assert r.smove(dst, key + "new", "a") in (1, True)
    assert members(r.smembers(key + "new")) == {b"a"}
    with pytest.raises(redis.ResponseError, match=WRONGTYPE):
        r.smove(dst, other, "b")
    with pytest.raises(redis.ResponseError, match=WRONGTYPE):
        r.smove(other, dst, "b")
    assert members(r.smembers(dst)) == {b"b"}


def test_sinter_sunion_sdiff(r, key):
    a, b, c = key + "a", key + "b", key + "c"
    r.sadd(a, 1, 2, 3, 4)
    r.sadd(b, 3, 4, 5)
    r.sadd(c, 4, 5, 6)
    assert members(r.sinter(a, b)) == {b"3", b"4"}
    assert members(r.sinter(a, b, c)) == {b"4"}
    assert members(r.sinter(a)) == {b"1", b"2", b"3", b"4"}
    assert members(r.sinter(a, a)) == {b"1", b"2", b"3", b"4"}
    assert members(r.sinter(a, key + "missing")) == set()
    assert members(r.sunion(a, b, c)) == {b"1", b"2", b"3", b"4", b"5", b"6"}
    assert members(r.sunion(a, key + "missing")) == {b"1", b"2", b"3", b"4"}
    assert members(r.sunion(key + "missing")) == set()
    assert members(r.sdiff(a, b)) == {b"1", b"2"}
    assert members(r.sdiff(a, b, c)) == {b"1", b"2"}
    assert members(r.sdiff(b, a)) == {b"5"}
    assert members(r.sdiff(a, a)) == set()
    assert members(r.sdiff(a, key + "missing")) == {b"1", b"2", b"3", b"4"}
    assert members(r.sdiff(key + "missing", a)) == set()


def test_a_wrong_type_anywhere_fails_the_multi_key_commands(r, key):
    r.sadd(key + "a", "x")
    r.set(key + "str", "v")
    for command in ("SINTER", "SUNION", "SDIFF"):
        # Every key's type is checked, even after a missing key.
        with pytest.raises(redis.ResponseError, match=WRONGTYPE):
            r.execute_command(command, key + "missing", key + "a", key + "str")
        with pytest.raises(redis.ResponseError, match=WRONGTYPE):
            r.execute_command(command + "STORE", key + "dest", key + "a", key + "str")
    with pytest.raises(redis.ResponseError, match=WRONGTYPE):
        r.execute_command("SINTERCARD", 3, key + "missing", key + "a", key + "str")
    assert r.exists(key + "dest") == 0


def test_store_forms_replace_the_destination(r, key):
    a, b, dest = key + "a", key + "b", key + "dest"
    r.sadd(a, 1, 2, 3)
    r.sadd(b, 2, 3, 4)
    assert r.sinterstore(dest, a, b) == 2
    assert members(r.smembers(dest)) == {b"2", b"3"}
    assert r.sunionstore(dest, a, b) == 4
    assert members(r.smembers(dest)) == {b"1", b"2", b"3", b"4"}
    assert r.sdiffstore(dest, a, b) == 1
    assert members(r.smembers(dest)) == {b"1"}
    # The destination may hold anything: it is replaced, and its expiry dropped.
    r.set(dest, "a string", ex=100)
    assert r.sunionstore(dest, a) == 3
    assert r.type(dest) in (b"set", "set")
    assert r.ttl(dest) == -1
    # An empty result deletes the destination.
    assert r.sinterstore(dest, a, key + "missing") == 0
    assert r.exists(dest) == 0
    r.set(dest, "v")
    assert r.sdiffstore(dest, a, a) == 0
    assert r.exists(dest) == 0
    # The destination may also be a source.
    assert r.sunionstore(a, a, b) == 4
    assert members(r.smembers(a)) == {b"1", b"2", b"3", b"4"}


def test_sintercard(r, key):
    a, b = key + "a", key + "b"
    r.sadd(a, 1, 2, 3, 4)
    r.sadd(b, 2, 3, 4, 5)
    assert r.sintercard(2, [a, b]) == 3
    assert r.sintercard(2, [a, b], limit=2) == 2
    assert r.sintercard(2, [a, b], limit=0) == 3
    assert r.sintercard(2, [a, b], limit=10) == 3
    assert r.sintercard(1, [a]) == 4
    assert r.sintercard(2, [a, key + "missing"]) == 0
    assert r.execute_command("SINTERCARD", 1, a, "limit", 1) == 1
    for numkeys in (0, -1, "x"):
        with pytest.raises(redis.ResponseError, match="^numkeys should be greater than 0$"):
            r.execute_command("SINTERCARD", numkeys, a)
    with pytest.raises(redis.ResponseError, match="^Number of keys can't be greater than number of args$"):
        r.execute_command("SINTERCARD", 3, a, b)
    for limit in (-1, "x"):
        with pytest.raises(redis.ResponseError, match="^LIMIT can't be negative$"):
            r.execute_command("SINTERCARD", 2, a, b, "LIMIT", limit)
    for tail in (["LIMIT"], ["FOO", 1]):
        with pytest.raises(redis.ResponseError, match="^syntax error$"):
            r.execute_command("SINTERCARD", 2, a, b, *tail)


@pytest.mark.parametrize(
    "command",
    [
        ("SADD", "m"),
        ("SREM", "m"),
        ("SMEMBERS",),
        ("SISMEMBER", "m"),
        ("SMISMEMBER", "m"),
        ("SCARD",),
        ("SPOP",),
        ("SPOP", 1),
        ("SPOP", 0),
        ("SRANDMEMBER",),
        ("SRANDMEMBER", 1),
        ("SRANDMEMBER", 0),
        ("SSCAN", 0),
        ("SSCAN", 0, "COUNT", 0),
        ("SINTER",),
        ("SUNION",),
        ("SDIFF",),
    ],
)
def test_every_command_refuses_a_key_of_another_type(r, key, command):
    r.set(key, "a string")
    name, *rest = command
    with pytest.raises(redis.ResponseError, match=WRONGTYPE):
        r.execute_command(name, key, *rest)
    assert r.get(key) == b"a string"


@pytest.mark.parametrize(
    "args",
    [
        ("SADD", "k"),
        ("SREM", "k"),
        ("SMEMBERS",),
        ("SMEMBERS", "k", "x"),
        ("SISMEMBER", "k"),
        ("SISMEMBER", "k", "m", "x"),
        ("SMISMEMBER", "k"),
        ("SCARD",),
        ("SCARD", "k", "x"),
        ("SPOP",),
        ("SRANDMEMBER",),
        ("SSCAN", "k"),
        ("SMOVE", "a", "b"),
        ("SMOVE", "a", "b", "m", "x"),
        ("SINTER",),
        ("SUNION",),
        ("SDIFF",),
        ("SINTERSTORE", "d"),
        ("SUNIONSTORE", "d"),
        ("SDIFFSTORE", "d"),
        ("SINTERCARD", 1),
    ],
)
def test_wrong_arity_uses_redis_text(r, args):
    name = args[0].lower()
    with pytest.raises(redis.ResponseError, match=f"^wrong number of arguments for '{name}' command$"):
        r.execute_command(*args)


def test_a_big_set_pops_every_member_once(r, key):
    everything = {str(i).encode() for i in range(5000)}
    pipe = r.pipeline(transaction=False)
    for start in range(0, 5000, 500):
        pipe.sadd(key, *range(start, start + 500))
    assert sum(pipe.execute()) == 5000
    popped = set()
    while r.exists(key):
        batch = members(r.spop(key, 700))
        assert not (batch & popped)
        popped |= batch
    assert popped == everything


def test_a_set_written_through_resp_reads_through_aerospike(resp_server, key):
    r = resp_server.redis()
    client = resp_server.client()
    r.sadd(key, "text", b"\xff\xfe", "42")
    _, meta, bins = client.get(("test", "redis", key))
    assert list(bins) == ["set"]
    # A LIST of the members: valid UTF-8 as strings, anything else as a blob.
    assert sorted(bins["set"], key=repr) == sorted(["text", bytearray(b"\xff\xfe"), "42"], key=repr)
    r.srem(key, "text")
    assert sorted(client.get(("test", "redis", key))[2]["set"], key=repr) == sorted([bytearray(b"\xff\xfe"), "42"], key=repr)
    r.spop(key, 2)
    with pytest.raises(aerospike.exception.RecordNotFound):
        client.get(("test", "redis", key))


def test_a_list_written_through_aerospike_is_a_set_to_resp(resp_server, key):
    r = resp_server.redis()
    client = resp_server.client()
    client.put(("test", "redis", key), {"set": ["a", "b", "a", 7, 1.5, bytearray(b"\xff\x01")]})
    assert r.type(key) in (b"set", "set")
    assert r.scard(key) == 5
    assert members(r.smembers(key)) == {b"a", b"b", b"7", b"1.5", b"\xff\x01"}
    assert r.sismember(key, "7")
    # The first change stores it natively; the Aerospike client reads the new members.
    assert r.sadd(key, "c") == 1
    assert sorted(client.get(("test", "redis", key))[2]["set"], key=repr) == sorted(
        ["a", "b", "7", "1.5", bytearray(b"\xff\x01"), "c"], key=repr
    )
    # Multi-key commands read it too.
    r.sadd(key + "other", "a", "z")
    assert members(r.sinter(key, key + "other")) == {b"a"}
    # A record that is not exactly one `set` LIST of scalars is not a set.
    client.put(("test", "redis", key + "nested"), {"set": [["nested"]]})
    client.put(("test", "redis", key + "two"), {"set": ["a"], "x": 1})
    for other in (key + "nested", key + "two"):
        with pytest.raises(redis.ResponseError, match=WRONGTYPE):
            r.smembers(other)
        with pytest.raises(redis.ResponseError, match=WRONGTYPE):
            r.sadd(other, "m")


def test_concurrent_smoves_never_lose_or_duplicate_a_member(resp_server, key):
    # Pipelined SMOVEs of a few members back and forth from several connections at once: each
    # SMOVE runs alone (the namespace's exclusive section), so every member ends in exactly one
    # of the two sets.
    a, b = key + "a", key + "b"
    everything = {str(i).encode() for i in range(4)}
    resp_server.redis().sadd(a, *everything)
    errors = []

    def mover(seed):
        rng = random.Random(seed)
        pipe = resp_server.redis().pipeline(transaction=False)
        for _ in range(4000):
            src, dst = (a, b) if rng.random() < 0.5 else (b, a)
            pipe.smove(src, dst, str(rng.randrange(4)))
        try:
            pipe.execute()
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=mover, args=(seed,)) for seed in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    r = resp_server.redis()
    assert members(r.sinter(a, b)) == set()
    assert members(r.sunion(a, b)) == everything

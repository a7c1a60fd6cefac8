"""Redis streams through the RESP front end: XADD (ids, NOMKSTREAM, MAXLEN/MINID trimming),
XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XSETID, XREAD (blocking), consumer groups (XGROUP,
XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO), compared with redis-server where the
replies do not depend on time; a stream and its groups surviving a restart on device storage;
an Aerospike client reading the stream's record.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest
import redis

import harness

RESP_SET = "redis"


@pytest.fixture
def key():
    return harness.unique("xs")


# -- the basics --------------------------------------------------------------------------------


def test_xadd_with_explicit_partial_and_generated_ids_follows_redis_id_rules(r, key):
    assert r.xadd(key, {"a": "1"}, id="5-1") == b"5-1" or r.xadd  # RESP2/3 both give bytes
    assert r.xadd(key, {"a": "2"}, id="5-*") == b"5-2"
    assert r.xadd(key, {"a": "3"}, id="6") == b"6-0"
    with pytest.raises(redis.ResponseError, match="equal or smaller than the target stream top item"):
        r.xadd(key, {"a": "4"}, id="6-0")
    with pytest.raises(redis.ResponseError, match="must be greater than 0-0"):
        r.xadd(key + "new", {"a": "4"}, id="0-0")
    with pytest.raises(redis.ResponseError, match="Invalid stream ID"):
        r.xadd(key, {"a": "4"}, id="abc")
    generated = r.xadd(key, {"a": "5"})
    ms, seq = map(int, generated.split(b"-"))
    assert abs(ms - time.time() * 1000) < 10_000
    assert r.xlen(key) == 4
    assert r.type(key) == b"stream"
    assert r.xadd(key + "none", {"a": "1"}, nomkstream=True) is None
    assert r.exists(key + "none") == 0
    r.set(key + "str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.xadd(key + "str", {"a": "1"})


def test_xrange_and_xrevrange_take_exclusive_bounds_and_count(r, key):
    for ms in range(1, 6):
        r.xadd(key, {"n": str(ms)}, id=f"{ms}-0")
    ids = lambda entries: [e[0] for e in entries]
    assert ids(r.xrange(key)) == [b"1-0", b"2-0", b"3-0", b"4-0", b"5-0"]
    assert ids(r.xrange(key, "(2-0", "4")) == [b"3-0", b"4-0"]
    assert ids(r.xrevrange(key, "+", "-", count=2)) == [b"5-0", b"4-0"]
    assert ids(r.xrevrange(key, "(5-0", "(1-0")) == [b"4-0", b"3-0", b"2-0"]
    assert r.xrange(key, "3", "2") == []
    assert r.xrange(key, "1", "5")[0][1] == {b"n": b"1"}
    with pytest.raises(redis.ResponseError, match="invalid end ID for the interval"):
        r.xrange(key, "-", "(0-0")
    assert r.xdel(key, "2-0", "9-9") == 1
    # redis-py trims approximately by default: whole blocks of 100 entries, so none here.
    assert r.xtrim(key, maxlen=2) == 0
    assert r.xtrim(key, maxlen=2, approximate=False) == 2
    assert ids(r.xrange(key)) == [b"4-0", b"5-0"]
    assert r.xtrim(key, minid="5", approximate=False) == 1
    assert r.xlen(key) == 1


def test_an_emptied_stream_keeps_its_key_and_last_id(r, key):
    r.xadd(key, {"f": "v"}, id="7-0")
    assert r.xdel(key, "7-0") == 1
    assert r.exists(key) == 1
    assert r.xlen(key) == 0
    with pytest.raises(redis.ResponseError, match="equal or smaller"):
        r.xadd(key, {"f": "v"}, id="7-0")


# -- against redis-server ----------------------------------------------------------------------




def command(*args: str | bytes) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        arg = arg.encode() if isinstance(arg, str) else arg
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


class RespReader:
    """Reads whole RESP2 replies, as their bytes or as Python values."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = b""

    def line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line + b"\r\n"

    def exact(self, size: int) -> bytes:
        while len(self.buffer) < size:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed"
            self.buffer += chunk
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def read_reply(self) -> bytes:
        line = self.line()
        if line[:1] == b"$" and line != b"$-1\r\n":
            return line + self.exact(int(line[1:-2]) + 2)
        if line[:1] == b"*" and line != b"*-1\r\n":
            return line + b"".join(self.read_reply() for _ in range(int(line[1:-2])))
        return line


def parse(data: bytes):
    """The Python value of one RESP2 reply's bytes."""

    def value(at: int):
        end = data.index(b"\r\n", at)
        kind, body = data[at : at + 1], data[at + 1 : end]
        at = end + 2
        if kind == b"$":
            if body == b"-1":
                return None, at
            size = int(body)
            return data[at : at + size], at + size + 2
        if kind == b"*":
            if body == b"-1":
                return None, at
            items = []
            for _ in range(int(body)):
                item, at = value(at)
                items.append(item)
            return items, at
        if kind == b":":
            return int(body), at
        return (kind + body), at

    return value(0)[0]


def exchange(sock: socket.socket, reader: RespReader, args: list[str]) -> bytes:
    sock.sendall(command(*args))
    return reader.read_reply()


def stable(args: list[str], reply: bytes):
    """What of a reply must be equal on both servers: all of it, except times, idle times and
    the radix-tree sizes Osprey does not have."""
    name = [a.lower() for a in args[:2]]
    if reply.startswith(b"-"):
        return reply
    if name[0] == "xpending" and len(args) > 3:
        return [row[:2] + row[3:] for row in parse(reply)]
    if name == ["xinfo", "stream"]:
        fields = parse(reply)
        pairs = dict(zip(fields[::2], fields[1::2]))
        pairs.pop(b"radix-tree-keys")
        pairs.pop(b"radix-tree-nodes")
        return pairs
    if name == ["xinfo", "consumers"]:
        return [dict(zip(c[::2], c[1::2]))[b"pending"] for c in parse(reply)]
    return reply


class Model:
    """Generates commands whose replies do not depend on the clock: explicit ids, mostly
    growing, sometimes stale (to be refused)."""

    def __init__(self, rng: random.Random, keys: list[str]):
        self.rng = rng
        self.keys = keys
        self.ms = 1
        self.groups = ["g1", "g2"]
        self.consumers = ["alice", "bob"]

    def some_id(self) -> str:
        ms = self.rng.randrange(0, self.ms + 2)
        return self.rng.choice([f"{ms}-{self.rng.randrange(3)}", str(ms), "-", "+", f"({ms}-1"])

    def add(self) -> list[str]:
        key = self.rng.choice(self.keys)
        roll = self.rng.random()
        if roll < 0.7:
            self.ms += self.rng.randrange(1, 3)
            new_id = self.rng.choice([f"{self.ms}-{self.rng.randrange(2)}", f"{self.ms}-*", str(self.ms)])
        else:
            new_id = self.rng.choice([f"{self.rng.randrange(self.ms + 1)}-0", "0-0", f"{self.ms}-*"])
        trim = []
        if self.rng.random() < 0.2:
            trim = self.rng.choice([["MAXLEN", str(self.rng.randrange(6))], ["MAXLEN", "=", "4"], ["MINID", f"{max(1, self.ms - 5)}"]])
        options = ["NOMKSTREAM"] if self.rng.random() < 0.1 else []
        fields = [x for i in range(self.rng.randrange(1, 3)) for x in (f"f{i}", self.rng.choice(["v", "", "12", "x" * 30]))]
        return ["XADD", key, *options, *trim, new_id, *fields]

    def command(self) -> list[str]:
        rng = self.rng
        key = rng.choice(self.keys)
        group = rng.choice(self.groups)
        consumer = rng.choice(self.consumers)
        kind = rng.randrange(22)
        if kind < 6:
            return self.add()
        if kind == 6:
            return ["XRANGE", key, self.some_id(), self.some_id()] + (["COUNT", str(rng.randrange(-1, 4))] if rng.random() < 0.5 else [])
        if kind == 7:
            return ["XREVRANGE", key, self.some_id(), self.some_id()] + (["COUNT", str(rng.randrange(0, 4))] if rng.random() < 0.5 else [])
        if kind == 8:
            return ["XDEL", key] + [f"{rng.randrange(self.ms + 1)}-{rng.randrange(2)}" for _ in range(rng.randrange(1, 3))]
        if kind == 9:
            return rng.choice([["XTRIM", key, "MAXLEN", str(rng.randrange(8))], ["XTRIM", key, "MINID", "=", str(rng.randrange(self.ms + 1))], ["XTRIM", key, "LIMIT", "2"], ["XTRIM", key, "MAXLEN", "4", "LIMIT", "1"]])
        if kind == 10:
            return ["XLEN", key]
        if kind == 11:
            start = rng.choice(["$", "0", f"{rng.randrange(self.ms + 1)}-0"])
            return ["XGROUP", "CREATE", key, group, start] + (["MKSTREAM"] if rng.random() < 0.5 else [])
        if kind == 12:
            return rng.choice([
                ["XGROUP", "SETID", key, group, rng.choice(["$", "0", f"{rng.randrange(self.ms + 1)}"])],
                ["XGROUP", "CREATECONSUMER", key, group, consumer],
                ["XGROUP", "DELCONSUMER", key, group, consumer],
                ["XGROUP", "DESTROY", key, group] if rng.random() < 0.2 else ["TYPE", key],
            ])
        if kind in (13, 14, 15):
            options = (["COUNT", str(rng.randrange(0, 4))] if rng.random() < 0.6 else []) + (["NOACK"] if rng.random() < 0.1 else [])
            start = rng.choice([">", ">", "0", f"{rng.randrange(self.ms + 1)}-0"])
            return ["XREADGROUP", "GROUP", group, consumer, *options, "STREAMS", key, start]
        if kind == 16:
            return ["XACK", key, group] + [f"{rng.randrange(self.ms + 1)}-{rng.randrange(2)}" for _ in range(rng.randrange(1, 4))]
        if kind == 17:
            return rng.choice([
                ["XPENDING", key, group],
                ["XPENDING", key, group, "-", "+", str(rng.randrange(1, 10))],
                ["XPENDING", key, group, "-", "+", "10", consumer],
            ])
        if kind == 18:
            ids = [f"{rng.randrange(self.ms + 1)}-{rng.randrange(2)}" for _ in range(rng.randrange(1, 4))]
            options = rng.choice([["JUSTID"], [], ["RETRYCOUNT", "5"], ["FORCE", "JUSTID"]])
            return ["XCLAIM", key, group, consumer, rng.choice(["0", "3600000"]), *ids, *options]
        if kind == 19:
            return ["XAUTOCLAIM", key, group, consumer, "0", rng.choice(["0", "-", f"{rng.randrange(self.ms + 1)}"]), "COUNT", str(rng.randrange(1, 4))] + (["JUSTID"] if rng.random() < 0.5 else [])
        if kind == 20:
            return rng.choice([["XINFO", "STREAM", key], ["XINFO", "GROUPS", key], ["XINFO", "CONSUMERS", key, group]])
        other = rng.choice(self.keys)
        return ["XREAD", "COUNT", str(rng.randrange(0, 3)), "STREAMS", key, other, f"{rng.randrange(self.ms + 1)}-0", "0"]


def test_stream_commands_answer_as_redis_server_does(resp_server, redis_server_port):
    """A seeded random mix of stream and consumer-group commands (valid and invalid, with
    explicit ids so both servers agree) on both servers, compared reply by reply: bytes, or
    the fields that do not depend on time. Replay with OSPREY_STREAMS_SEED=<seed>."""
    seed = int(os.environ.get("OSPREY_STREAMS_SEED", random.randrange(1 << 32)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    prefix = harness.unique("xdiff")
    model = Model(rng, [f"{prefix}:a", f"{prefix}:b"])
    with (
        socket.create_connection(("127.0.0.1", resp_server.resp_port), timeout=5) as osprey,
        socket.create_connection(("127.0.0.1", redis_server_port), timeout=5) as reference,
    ):
        osprey_reader, reference_reader = RespReader(osprey), RespReader(reference)
        for step in range(1500):
            args = model.command()
            if args[0] in ("XCLAIM", "XAUTOCLAIM"):
                # Redis 7.2 creates the claiming (or reading) consumer even when it gets
                # nothing; 7.0 only when it does: the reference is brought to 7.2's state first.
                exchange(reference, reference_reader, ["XGROUP", "CREATECONSUMER", *args[1:4]])
            if args[0] == "XREADGROUP":
                create = ["XGROUP", "CREATECONSUMER", args[-2], args[2], args[3]]
                exchange(reference, reference_reader, create)
            expected = exchange(reference, reference_reader, args)
            got = exchange(osprey, osprey_reader, args)
            assert stable(args, got) == stable(args, expected), f"seed {seed} step {step}: {args}\nosprey {got!r}\nredis  {expected!r}"
        for name in model.keys:
            exchange(osprey, osprey_reader, ["DEL", name])
            exchange(reference, reference_reader, ["DEL", name])


def test_argument_errors_answer_redis_texts(resp_server, redis_server_port):
    """Each malformed call answers what redis-server answers, byte for byte."""
    k = harness.unique("xerr")
    calls = [
        ["XADD", k, "MAXLEN", "-1", "*", "f", "v"],
        ["XADD", k, "MAXLEN", "1", "MINID", "1", "*", "f", "v"],
        ["XADD", k, "LIMIT", "5", "*", "f", "v"],
        ["XADD", k, "MAXLEN", "1", "LIMIT", "5", "*", "f", "v"],
        ["XADD", k, "*", "f"],
        ["XADD", k, "1-1", "f", "v"],
        ["XTRIM", k, "FOO", "1"],
        ["XTRIM", k, "LIMIT", "1", "x"],
        ["XRANGE", k, "x", "+"],
        ["XRANGE", k, "-", "+", "COUNT"],
        ["XREAD", "STREAMS", k],
        ["XREAD", "STREAMS", k, ">"],
        ["XREAD", "BLOCK", "-1", "STREAMS", k, "$"],
        ["XREAD", "BLOCK", "x", "STREAMS", k, "$"],
        ["XREAD", "GROUP", "g", "c", "STREAMS", k, "0"],
        ["XREADGROUP", "COUNT", "1", "STREAMS", k, ">"],
        ["XREADGROUP", "GROUP", "g", "c", "STREAMS", k, ">"],
        ["XREADGROUP", "GROUP", "nog", "c", "STREAMS", k, ">"],
        ["XGROUP", "CREATE", "nokey", "g", "$"],
        ["XGROUP", "CREATE", k, "g", "$"],
        ["XGROUP", "CREATE", k, "g", "$"],
        ["XGROUP", "FOO", k, "g"],
        ["XGROUP", "DESTROY", k],
        ["XGROUP", "SETID", k, "nog", "0"],
        ["XGROUP", "CREATE", k, "g2", "$", "ENTRIESREAD", "-5"],
        ["XGROUP", "HELP"],
        ["XINFO", "HELP"],
        ["XINFO", "STREAM", "nokey"],
        ["XINFO", "STREAM", k, "FULL", "COUNT"],
        ["XINFO", "CONSUMERS", k, "nog"],
        ["XCLAIM", k, "g", "c", "x", "1-1"],
        ["XCLAIM", k, "g", "c", "0", "1-1", "BOGUS"],
        ["XCLAIM", k, "nog", "c", "0", "1-1"],
        ["XAUTOCLAIM", k, "g", "c", "0", "0", "COUNT", "0"],
        ["XPENDING", k, "g", "-", "+"],
        ["XPENDING", k, "nog"],
        ["XSETID", k, "0-0"],
        ["XSETID", "nokey", "5"],
        ["XSETID", k, "5", "ENTRIESADDED", "-1"],
        ["XLEN", k, "extra"],
    ]
    with (
        socket.create_connection(("127.0.0.1", resp_server.resp_port), timeout=5) as osprey,
        socket.create_connection(("127.0.0.1", redis_server_port), timeout=5) as reference,
    ):
        osprey_reader, reference_reader = RespReader(osprey), RespReader(reference)
        for args in [["XADD", k, "1-1", "f", "v"], *calls]:
            # Redis 7.2 words HELP's own line "Print", 7.0 "Prints": Osprey answers as 7.2.
            expected = exchange(reference, reference_reader, args).replace(b"Prints this help", b"Print this help")
            got = exchange(osprey, osprey_reader, args)
            assert got == expected, f"{args}\nosprey {got!r}\nredis  {expected!r}"
        exchange(osprey, osprey_reader, ["DEL", k])
        exchange(reference, reference_reader, ["DEL", k])


# -- groups ------------------------------------------------------------------------------------


def test_a_group_delivers_each_entry_once_and_tracks_pending_entries(r, key):
    for ms in range(1, 4):
        r.xadd(key, {"n": str(ms)}, id=f"{ms}-0")
    r.xgroup_create(key, "g", id="0")
    first = r.xreadgroup("g", "alice", {key: ">"}, count=2)
    second = r.xreadgroup("g", "bob", {key: ">"})
    entries = lambda reply: [e[0] for e in (reply[key.encode()][0] if isinstance(reply, dict) else reply[0][1])]
    assert entries(first) == [b"1-0", b"2-0"]
    assert entries(second) == [b"3-0"]
    assert r.xreadgroup("g", "bob", {key: ">"}) in (None, [], {})
    summary = r.xpending(key, "g")
    assert summary["pending"] == 3
    assert r.xack(key, "g", "1-0", "9-0") == 1
    claimed = r.xclaim(key, "g", "bob", 0, ["2-0"], justid=True)
    assert claimed == [b"2-0"]
    rows = r.xpending_range(key, "g", "-", "+", 10)
    assert [(row["message_id"], row["consumer"]) for row in rows] == [(b"2-0", b"bob"), (b"3-0", b"bob")]
    groups = r.xinfo_groups(key)
    assert groups[0]["name"] == b"g" and groups[0]["pending"] == 2 and groups[0]["lag"] == 0
    assert r.xgroup_delconsumer(key, "g", "bob") == 2
    assert r.xpending(key, "g")["pending"] == 0


# -- blocking ----------------------------------------------------------------------------------


def test_xread_block_is_woken_by_an_xadd_from_another_client(resp_server, key):
    reader, writer = resp_server.redis(), resp_server.redis()
    writer.xadd(key, {"old": "1"}, id="1-0")
    result = {}

    def read():
        result["reply"] = reader.xread({key: "$"}, block=4000)

    thread = threading.Thread(target=read)
    started = time.monotonic()
    thread.start()
    assert harness.wait_until(lambda: int(writer.info("clients")["blocked_clients"]) == 1, timeout=5)
    writer.xadd(key, {"new": "2"}, id="2-0")
    thread.join(timeout=5)
    assert time.monotonic() - started < 3
    assert result["reply"] == [[key.encode(), [(b"2-0", {b"new": b"2"})]]]


def test_xread_block_times_out_with_a_null_array(resp_server, key):
    r = resp_server.redis()
    started = time.monotonic()
    assert r.xread({key: "$"}, block=200) in (None, [], {})  # redis-py reads the null as empty
    assert time.monotonic() - started >= 0.18
    with socket.create_connection(("127.0.0.1", resp_server.resp_port), timeout=5) as sock:
        sock.sendall(command("XREAD", "BLOCK", "100", "STREAMS", key, "$"))
        assert RespReader(sock).read_reply() == b"*-1\r\n"
    # Inside MULTI a blocking read answers at once, as its timeout would.
    pipe = r.pipeline(transaction=True)
    pipe.xread({key: "$"}, block=0)
    assert pipe.execute() in ([None], [[]], [{}])


def test_xreadgroup_block_is_woken_and_a_destroyed_group_answers_nogroup(resp_server, key):
    reader, writer = resp_server.redis(), resp_server.redis()
    writer.xgroup_create(key, "g", id="$", mkstream=True)
    outcome = {}

    def read(name):
        try:
            outcome[name] = reader.xreadgroup("g", "c", {key: ">"}, block=4000)
        except redis.ResponseError as error:
            outcome[name] = error

    thread = threading.Thread(target=read, args=("first",))
    thread.start()
    assert harness.wait_until(lambda: int(writer.info("clients")["blocked_clients"]) == 1, timeout=5)
    writer.xadd(key, {"f": "v"}, id="5-0")
    thread.join(timeout=5)
    assert outcome["first"] == [[key.encode(), [(b"5-0", {b"f": b"v"})]]]
    assert writer.xpending(key, "g")["pending"] == 1

    thread = threading.Thread(target=read, args=("second",))
    thread.start()
    assert harness.wait_until(lambda: int(writer.info("clients")["blocked_clients"]) == 1, timeout=5)
    writer.xgroup_destroy(key, "g")
    thread.join(timeout=5)
    assert isinstance(outcome["second"], redis.ResponseError)
    assert str(outcome["second"]) == "NOGROUP the consumer group this client was blocked on no longer exists"


def blocked_xreadgroup_outcome(port: int, key: str, change) -> str:
    """Blocks an XREADGROUP on `key`'s group, lets `change(client)` run from another client,
    and returns the blocked reader's error."""
    reader, writer = (redis.Redis(host="127.0.0.1", port=port, socket_timeout=10) for _ in range(2))
    writer.delete(key)
    writer.xadd(key, {"f": "v"}, id="666-0")
    writer.xgroup_create(key, "mygroup", id="$")
    outcome = {}

    def read():
        try:
            outcome["reply"] = reader.xreadgroup("mygroup", "Alice", {key: ">"}, block=0)
        except redis.ResponseError as error:
            outcome["reply"] = str(error)

    thread = threading.Thread(target=read)
    thread.start()
    assert harness.wait_until(lambda: int(writer.info("clients")["blocked_clients"]) == 1, timeout=5)
    change(writer)
    thread.join(timeout=5)
    assert not thread.is_alive(), "the reader stayed blocked"
    reader.close()
    writer.close()
    return outcome["reply"]


def test_a_blocked_xreadgroup_whose_stream_goes_away_is_unblocked_as_redis_unblocks_it(resp_server,
                                                                                      redis_server_port, key):
    """type/stream-cgroups.tcl "Blocking XREADGROUP: key deleted", "key type changed with SET",
    "... with transaction", "flushed DB": the waiting reader gets Redis's "UNBLOCKED the
    stream key no longer exists" (Osprey answered NOGROUP or WRONGTYPE, as to a new read)."""

    def in_transaction(client):
        pipe = client.pipeline(transaction=True)
        pipe.delete(key)
        pipe.sadd(key, "e1")
        pipe.execute()

    changes = {
        "deleted": lambda client: client.delete(key),
        "set": lambda client: client.set(key, "val1"),
        "transaction": in_transaction,
        "flushall": lambda client: client.flushall(),
    }
    for name, change in changes.items():
        expected = blocked_xreadgroup_outcome(redis_server_port, key, change)
        assert expected == "UNBLOCKED the stream key no longer exists", name
        assert blocked_xreadgroup_outcome(resp_server.resp_port, key, change) == expected, name


def test_approximate_trimming_removes_the_nodes_redis_keeps(resp_server, redis_server_port, key):
    """type/stream.tcl "XTRIM with MAXLEN option basic test": after exact trims have left the
    first of Redis's 100-entry nodes partly deleted, `MAXLEN ~ 444` removes that node whole and
    stops at the next (XLEN 500; Osprey cut blocks of 100 from the front and left 455). Trims
    with LIMIT, MINID and XDEL-emptied nodes answer as redis-server's do too."""
    steps = [("MAXLEN", "666"), ("MAXLEN", "=", "555"), ("MAXLEN", "~", "444"), ("MAXLEN", "~", "400"),
             ("MINID", "~", "650"), ("MAXLEN", "~", "10", "LIMIT", "150"), ("MINID", "=", "905")]

    def run(port: int) -> list:
        client = redis.Redis(host="127.0.0.1", port=port)
        client.delete(key)
        pipe = client.pipeline(transaction=False)
        for ms in range(1, 1001):
            pipe.xadd(key, {"xitem" if ms % 10 else "yitem": ms}, id=f"{ms}-0")
        pipe.execute()
        outcome = []
        for step in steps:
            outcome.append((client.execute_command("XTRIM", key, *step), client.xlen(key)))
            if step == ("MAXLEN", "~", "400"):
                client.xdel(key, *(f"{ms}-0" for ms in range(701, 801)))
        client.close()
        return outcome

    expected = run(redis_server_port)
    assert expected[2] == (55, 500)
    assert run(resp_server.resp_port) == expected


def test_node_size_follows_stream_node_max_entries_as_in_redis(resp_server, redis_server_port,
                                                                key):
    """type/stream.tcl "XADD with LIMIT consecutive calls" and "XTRIM with LIMIT delete entries
    no more than limit": with `stream-node-max-entries` set, nodes are cut at that size when
    entries are appended, and approximate trims remove whole nodes of it (the setting was
    stored and reported only: nodes stayed at 100 entries)."""

    def run(port: int) -> list:
        client = redis.Redis(host="127.0.0.1", port=port)
        outcome = []
        try:
            client.delete(key)
            client.config_set("stream-node-max-entries", 10)
            for _ in range(100):
                client.xadd(key, {"xitem": "v"})
            for _ in range(2):
                client.execute_command("XADD", key, "MAXLEN", "~", "55", "LIMIT", "30", "*",
                                       "xitem", "v")
                outcome.append(client.xlen(key))
            client.delete(key)
            client.config_set("stream-node-max-entries", 2)
            for _ in range(3):
                client.xadd(key, {"xitem": "v"})
            for limit in ("1", "2"):
                outcome.append(client.execute_command("XTRIM", key, "MAXLEN", "~", "0",
                                                      "LIMIT", limit))
            outcome.append(client.config_get("stream-node-max-entries"))
        finally:
            client.config_set("stream-node-max-entries", 100)
            client.close()
        return outcome

    expected = run(redis_server_port)
    assert expected[:4] == [71, 62, 0, 2]
    assert run(resp_server.resp_port) == expected


def test_a_copy_keeps_the_node_boundaries_of_its_stream(resp_server, redis_server_port, key):
    """keyspace.tcl "COPY basic usage for stream-cgroups" after a test left
    `stream-node-max-entries` at 2: the copy's XINFO STREAM FULL must equal the original's.
    Node boundaries lived in memory only, and a stream decoded from its bin (a copy, a
    restart) was cut into nodes of 100 afresh."""

    def run(port: int) -> list:
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            client.delete(key, key + "-copy")
            client.config_set("stream-node-max-entries", 2)
            for ms in range(100, 106):
                client.xadd(key, {"f": ms}, id=f"{ms}-0")
            client.xdel(key, "103-0")
            client.copy(key, key + "-copy")
            original = client.xinfo_stream(key, full=True)
            copied = client.xinfo_stream(key + "-copy", full=True)
            assert copied == original
            # radix-tree-nodes counts Redis's radix tree's inner nodes, which Osprey estimates.
            return [original["radix-tree-keys"],
                    client.execute_command("XTRIM", key + "-copy", "MAXLEN", "~", "2")]
        finally:
            client.config_set("stream-node-max-entries", 100)
            client.close()

    assert run(resp_server.resp_port) == run(redis_server_port)


def test_long_stream_reads_are_answered_whole(r, key):
    # 30,000 entries go past the long-request threshold: the range is built on the pool.
    pipe = r.pipeline(transaction=False)
    for ms in range(1, 30_001):
        pipe.xadd(key, {"f": "v"}, id=f"{ms}-0")
    pipe.execute()
    assert len(r.xrange(key)) == 30_000
    read = r.xread({key: "0"})
    entries = read[key.encode()][0] if isinstance(read, dict) else read[0][1]
    assert len(entries) == 30_000
    r.delete(key)


# -- storage and the Aerospike view ------------------------------------------------------------


def test_a_stream_and_its_groups_survive_a_restart_on_device_storage(start_server):
    data_dir = Path(tempfile.mkdtemp(prefix="osprey-streams-"))
    try:
        storage = harness.device_storage([data_dir / "test.dat"], filesize=16 * 1024 * 1024, write_block_size=64 * 1024, commit_to_device=True)
        srv = start_server(service={}, namespaces=[harness.namespace("test", storage_engine=storage)])
        r = srv.redis()
        r.xadd("orders", {"item": "tea"}, id="1-0")
        r.xadd("orders", {"item": "cake"}, id="2-0")
        r.xgroup_create("orders", "kitchen", id="0")
        r.xreadgroup("kitchen", "cook", {"orders": ">"}, count=1)
        r.xdel("orders", "2-0")
        before = r.xinfo_stream("orders", full=True)
        srv.kill_and_restart()
        r = srv.redis()
        assert r.type("orders") == b"stream"
        assert r.xrange("orders") == [(b"1-0", {b"item": b"tea"})]
        after = r.xinfo_stream("orders", full=True)
        assert after["last-generated-id"] == before["last-generated-id"] == b"2-0"
        assert after["max-deleted-entry-id"] == b"2-0"
        assert after["entries-added"] == 2
        assert after["groups"][0]["name"] == b"kitchen"
        assert after["groups"][0]["pel-count"] == 1
        assert r.xpending("orders", "kitchen")["consumers"] == [{"name": b"cook", "pending": 1}]
        with pytest.raises(redis.ResponseError, match="equal or smaller"):
            r.xadd("orders", {"item": "tea"}, id="2-0")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def test_an_aerospike_client_reads_the_stream_as_one_map_bin(resp_server, key):
    r = resp_server.redis()
    r.xadd(key, {"temp": "21.5", "room": "hall"}, id="10-1")
    r.xadd(key, {"temp": "22"}, id="11-0")
    r.xgroup_create(key, "g", id="0")
    r.xreadgroup("g", "c", {key: ">"}, count=1)
    client = resp_server.client()
    _, _, bins = client.get(("test", RESP_SET, key))
    stream = bins["stream"]
    assert stream["entries"] == [["10-1", ["temp", "21.5", "room", "hall"]], ["11-0", ["temp", "22"]]]
    assert stream["last-id"] == "11-0"
    assert stream["entries-added"] == 2
    assert stream["max-deleted-id"] == "0-0"
    name, last_id, entries_read, pending, consumers = stream["groups"][0]
    assert (name, last_id, entries_read) == ("g", "10-1", 1)
    assert [p[:2] for p in pending] == [["10-1", "c"]]
    assert [c[0] for c in consumers] == ["c"]

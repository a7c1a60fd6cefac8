"""Redis's blocking pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP)
and the multi-key pops (LMOVE, RPOPLPUSH, LMPOP, ZMPOP) through the RESP front end: served at
once when there is a value, blocked until a write of either protocol brings one, timeouts with
Redis's null replies and error texts, arrival order among blocked clients, MULTI, CLIENT
UNBLOCK, a blocked client leaving; and the multi-key pops byte for byte against redis-server.
"""

from __future__ import annotations

import os
import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

import harness

RESP_SET = "redis"


@pytest.fixture
def key():
    return harness.unique("blk")


def blocked_count(r) -> int:
    return int(r.info("clients")["blocked_clients"])


def wait_blocked(r, count: int) -> None:
    """Waits until `count` clients are blocked on the server."""
    assert harness.wait_until(lambda: blocked_count(r) == count, timeout=5), blocked_count(r)


def command(*args: str | bytes) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        arg = arg.encode() if isinstance(arg, str) else arg
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


def read_until(sock: socket.socket, expected: bytes, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while not data.endswith(expected) and len(data) < len(expected) + 1024:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


# -- served at once ----------------------------------------------------------------------------


def plain(value, key: str = ""):
    """A reply as plain lists, whatever redis-py's callbacks made of it (tuples, floats): the
    key written as `{k}`, scores (bytes holding a number) as floats."""
    if isinstance(value, (list, tuple)):
        return [plain(v, key) for v in value]
    if isinstance(value, bytes):
        try:
            return float(value)
        except ValueError:
            return value.replace(key.encode(), b"{k}") if key else value
    return value


def test_blocking_pops_take_a_value_at_once_from_the_first_key_holding_one(r, key):
    run = lambda *args: plain(r.execute_command(*args), key)
    r.rpush(key + "b", "x", "y")
    assert run("BLPOP", key + "a", key + "b", 0) == [b"{k}b", b"x"]
    assert run("BRPOP", key + "a", key + "b", 1) == [b"{k}b", b"y"]
    r.rpush(key + "s", "1", "2", "3")
    assert run("BLMOVE", key + "s", key + "d", "LEFT", "RIGHT", 0) == 1.0
    assert run("BRPOPLPUSH", key + "s", key + "d", 0) == 3.0
    assert r.lrange(key + "d", 0, -1) == [b"3", b"1"]
    assert run("BLMPOP", 0, 2, key + "x", key + "d", "LEFT", "COUNT", 5) == [b"{k}d", [3.0, 1.0]]
    r.zadd(key + "z", {"a": 1, "b": 2, "c": 3})
    assert run("BZPOPMIN", key + "n", key + "z", 0) == [b"{k}z", b"a", 1.0]
    assert run("BZPOPMAX", key + "z", 0) == [b"{k}z", b"c", 3.0]
    assert run("BZMPOP", 0, 1, key + "z", "MIN", "COUNT", 9) == [b"{k}z", [[b"b", 2.0]]]
    assert blocked_count(r) == 0


def test_timeout_errors_are_redis_texts(r, key):
    for bad in ("abc", "", "1x", "nan"):
        with pytest.raises(redis.ResponseError, match="^timeout is not a float or out of range$"):
            r.execute_command("BLPOP", key, bad)
    with pytest.raises(redis.ResponseError, match="^timeout is negative$"):
        r.execute_command("BRPOP", key, "-1")
    with pytest.raises(redis.ResponseError, match="^timeout is negative$"):
        r.execute_command("BZPOPMIN", key, "-0.5")
    with pytest.raises(redis.ResponseError, match="^timeout is out of range$"):
        r.execute_command("BLPOP", key, "1e300")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("BLMOVE", key, key, "UP", "LEFT", "x")
    with pytest.raises(redis.ResponseError, match="^numkeys should be greater than 0$"):
        r.execute_command("BLMPOP", "x", 0, key, "LEFT")
    with pytest.raises(redis.ResponseError, match="^timeout is not a float or out of range$"):
        r.execute_command("BZMPOP", "x", 1, key, "MIN")
    r.set(key + "str", "v")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.execute_command("BLPOP", key + "none", key + "str", 0)
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.execute_command("BZPOPMIN", key + "str", 0)
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'blpop'"):
        r.execute_command("BLPOP", key)
    assert blocked_count(r) == 0


# -- timeouts ----------------------------------------------------------------------------------


def test_a_blpop_of_0_2_seconds_answers_null_after_about_0_2_seconds(r, key):
    started = time.monotonic()
    assert r.execute_command("BLPOP", key, "0.2") is None
    elapsed = time.monotonic() - started
    assert 0.18 <= elapsed < 1.5, elapsed
    started = time.monotonic()
    assert r.execute_command("BZPOPMIN", key, "0.1") is None
    assert r.execute_command("BLMOVE", key, key + "d", "LEFT", "LEFT", "0.1") is None
    assert r.execute_command("BLMPOP", "0.1", 1, key, "RIGHT") is None
    assert time.monotonic() - started >= 0.28


@pytest.mark.parametrize("protocol,null", [(2, b"*-1\r\n"), (3, b"_\r\n")])
def test_a_timeout_is_the_null_array_in_resp2_and_null_in_resp3(resp_server, key, protocol, null):
    with socket.create_connection(("127.0.0.1", resp_server.resp_port)) as sock:
        if protocol == 3:
            sock.sendall(command("HELLO", "3"))
            read_until(sock, b"modules\r\n*0\r\n")
        # BLMOVE answers its timeout with the null array too, as Redis does.
        sock.sendall(command("BLPOP", key, "0.05") + command("BLMOVE", key, key, "LEFT", "LEFT", "0.05"))
        assert read_until(sock, null + null) == null + null


# -- woken by writes ---------------------------------------------------------------------------


def blocked_call(resp_server, *args, protocol: int = 2):
    """Starts `args` on a fresh connection in a thread; returns the future and the client."""
    client = resp_server.redis(protocol=protocol)
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(client.execute_command, *args)
    pool.shutdown(wait=False)
    return future


@pytest.mark.parametrize(
    "blocking,push,expected",
    [
        (("BLPOP", "{k}", "{k}2", 0), ("RPUSH", "{k}2", "a", "b"), [b"{k}2", b"a"]),
        (("BRPOP", "{k}", 5), ("RPUSH", "{k}", "a", "b"), [b"{k}", b"b"]),
        (("BLMOVE", "{k}", "{k}d", "RIGHT", "LEFT", 5), ("RPUSH", "{k}", "a", "b"), b"b"),
        (("BRPOPLPUSH", "{k}", "{k}d", 0), ("LPUSH", "{k}", "a"), b"a"),
        (("BLMPOP", 5, 2, "{k}0", "{k}", "LEFT", "COUNT", 2), ("RPUSH", "{k}", "a", "b", "c"), [b"{k}", [b"a", b"b"]]),
        (("BZPOPMIN", "{k}", 0), ("ZADD", "{k}", 2, "b", 1, "a"), [b"{k}", b"a", 1.0]),
        (("BZPOPMAX", "{k}", 5), ("ZADD", "{k}", 2, "b", 1, "a"), [b"{k}", b"b", 2.0]),
        (("BZMPOP", 0, 1, "{k}", "MAX", "COUNT", 5), ("ZADD", "{k}", 2, "b", 1, "a"), [b"{k}", [[b"b", 2.0], [b"a", 1.0]]]),
    ],
    ids=["blpop", "brpop", "blmove", "brpoplpush", "blmpop", "bzpopmin", "bzpopmax", "bzmpop"],
)
def test_each_blocking_command_is_woken_by_a_redis_write(resp_server, key, blocking, push, expected):
    r = resp_server.redis()
    fill = lambda args: [a.replace("{k}", key) if isinstance(a, str) else a for a in args]
    future = blocked_call(resp_server, *fill(blocking))
    wait_blocked(r, 1)
    assert not future.done()
    r.execute_command(*fill(push))
    assert plain(future.result(timeout=5), key) == expected
    assert blocked_count(r) == 0


def test_a_write_inside_exec_wakes_a_blocked_client(resp_server, key):
    r = resp_server.redis()
    future = blocked_call(resp_server, "BLPOP", key, 0)
    wait_blocked(r, 1)
    pipe = r.pipeline(transaction=True)
    pipe.rpush(key, "x")
    pipe.rpush(key, "y")
    pipe.execute()
    assert plain(future.result(timeout=5)) == [key.encode(), b"x"]
    assert r.lrange(key, 0, -1) == [b"y"]


def test_an_aerospike_put_wakes_a_blocked_client(resp_server, key):
    """A record an Aerospike client writes with the one LIST bin `list` is a Redis list
    (redis-mapping.md): its put wakes BLPOP; a MAP bin `zset` of member to score wakes
    BZPOPMIN."""
    r = resp_server.redis()
    aero = resp_server.client()
    future = blocked_call(resp_server, "BLPOP", key, 0)
    wait_blocked(r, 1)
    aero.put(("test", RESP_SET, key), {"list": ["from-aerospike", "second"]})
    assert plain(future.result(timeout=5)) == [key.encode(), b"from-aerospike"]
    assert r.lrange(key, 0, -1) == [b"second"]
    future = blocked_call(resp_server, "BZPOPMIN", key + "z", 0)
    wait_blocked(r, 1)
    aero.put(("test", RESP_SET, key + "z"), {"zset": {"m": 2.5, "n": 1.0}})
    assert plain(future.result(timeout=5)) == [(key + "z").encode(), b"n", 1.0]


def test_a_write_of_another_type_leaves_the_client_blocked(resp_server, key):
    r = resp_server.redis()
    future = blocked_call(resp_server, "BLPOP", key, 2)
    wait_blocked(r, 1)
    r.set(key, "string")
    time.sleep(0.2)
    assert not future.done()
    r.delete(key)
    r.rpush(key, "v")
    assert plain(future.result(timeout=5)) == [key.encode(), b"v"]


# -- fairness ----------------------------------------------------------------------------------


def test_three_blocked_clients_are_served_in_arrival_order(resp_server, key):
    r = resp_server.redis()
    futures = []
    for count in range(1, 4):
        futures.append(blocked_call(resp_server, "BLPOP", key, 0))
        wait_blocked(r, count)
    # One push of three elements, then one at a time: each goes to the longest waiting client.
    r.rpush(key, "first", "second", "third")
    assert [f.result(timeout=5)[1] for f in futures] == [b"first", b"second", b"third"]
    futures = []
    for count in range(1, 4):
        futures.append(blocked_call(resp_server, "BRPOP", key, key + "other", 0))
        wait_blocked(r, count)
    for element in ("a", "b", "c"):
        r.lpush(key, element)
        wait_blocked(r, 3 - "abc".index(element) - 1)
    assert [f.result(timeout=5)[1] for f in futures] == [b"a", b"b", b"c"]


def test_a_new_blocking_command_queues_behind_clients_already_waiting(resp_server, key):
    r = resp_server.redis()
    first = blocked_call(resp_server, "BLPOP", key, 0)
    wait_blocked(r, 1)
    second = blocked_call(resp_server, "BLPOP", key, 0)
    wait_blocked(r, 2)
    r.rpush(key, "only")
    assert plain(first.result(timeout=5)) == [key.encode(), b"only"]
    time.sleep(0.1)
    assert not second.done()
    r.rpush(key, "next")
    assert plain(second.result(timeout=5)) == [key.encode(), b"next"]


# -- transactions, CLIENT UNBLOCK, disconnects, pipelines ------------------------------------------


def test_inside_multi_a_blocking_command_times_out_at_once(r, key):
    pipe = r.pipeline(transaction=True)
    pipe.execute_command("BLPOP", key, 0)
    pipe.execute_command("BLMOVE", key, key + "d", "LEFT", "LEFT", 0)
    pipe.execute_command("BZPOPMIN", key + "z", 0)
    pipe.rpush(key, "x")
    pipe.execute_command("BLPOP", key, 0)
    started = time.monotonic()
    assert plain(pipe.execute()) == [None, None, None, 1, [key.encode(), b"x"]]
    assert time.monotonic() - started < 1
    assert blocked_count(r) == 0


def test_client_unblock_answers_as_a_timeout_or_with_the_unblocked_error(resp_server, key):
    r = resp_server.redis()
    waiter = resp_server.redis()
    waiter_id = waiter.client_id()
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(waiter.execute_command, "BLPOP", key, 0)
    wait_blocked(r, 1)
    assert r.execute_command("CLIENT", "UNBLOCK", waiter_id) == 1
    assert future.result(timeout=5) is None
    assert r.execute_command("CLIENT", "UNBLOCK", waiter_id) == 0
    future = pool.submit(waiter.execute_command, "BZPOPMAX", key, 0)
    wait_blocked(r, 1)
    assert r.execute_command("CLIENT", "UNBLOCK", waiter_id, "ERROR") == 1
    with pytest.raises(redis.ResponseError, match="client unblocked via CLIENT UNBLOCK$"):
        future.result(timeout=5)
    pool.shutdown()
    with pytest.raises(redis.ResponseError, match="^CLIENT UNBLOCK reason should be TIMEOUT or ERROR$"):
        r.execute_command("CLIENT", "UNBLOCK", waiter_id, "LATER")
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("CLIENT", "UNBLOCK", "x")
    assert r.execute_command("CLIENT", "UNBLOCK", 999999) == 0


def test_a_blocked_client_that_disconnects_leaves_the_waiters(resp_server, key):
    r = resp_server.redis()
    sock = socket.create_connection(("127.0.0.1", resp_server.resp_port))
    sock.sendall(command("BLPOP", key, "0"))
    wait_blocked(r, 1)
    behind = blocked_call(resp_server, "BLPOP", key, 0)
    wait_blocked(r, 2)
    sock.close()
    wait_blocked(r, 1)
    # The one that left takes nothing: the client behind it is served.
    r.rpush(key, "x")
    assert plain(behind.result(timeout=5)) == [key.encode(), b"x"]
    sock = socket.create_connection(("127.0.0.1", resp_server.resp_port))
    sock.sendall(command("BRPOP", key, "0"))
    wait_blocked(r, 1)
    sock.close()
    wait_blocked(r, 0)
    r.rpush(key, "kept")
    assert r.lrange(key, 0, -1) == [b"kept"]


def test_requests_pipelined_after_a_blocked_command_wait_for_its_reply(resp_server, key):
    r = resp_server.redis()
    with socket.create_connection(("127.0.0.1", resp_server.resp_port)) as sock:
        sock.sendall(command("BLPOP", key, "0") + command("PING") + command("LLEN", key))
        wait_blocked(r, 1)
        r.rpush(key, "x", "y")
        expected = b"*2\r\n$%d\r\n%s\r\n$1\r\nx\r\n+PONG\r\n:1\r\n" % (len(key), key.encode())
        assert read_until(sock, b":1\r\n") == expected


def test_a_client_blocked_on_keys_of_both_kinds_is_counted_once(resp_server, key):
    r = resp_server.redis()
    futures = [blocked_call(resp_server, "BLPOP", key, key, 0), blocked_call(resp_server, "BZPOPMIN", key, 0)]
    wait_blocked(r, 2)
    r.zadd(key, {"m": 1})
    assert plain(futures[1].result(timeout=5)) == [key.encode(), b"m", 1.0]
    r.rpush(key, "e")
    assert plain(futures[0].result(timeout=5)) == [key.encode(), b"e"]


# -- multi-key pops against redis-server ---------------------------------------------------------




def random_command(rng: random.Random, keys: list[str]) -> list[str]:
    pick = lambda: rng.choice(keys)
    element = lambda: rng.choice(["a", "b", "c", "dd", "1", ""])
    ends = ["LEFT", "RIGHT", "left", "UP"]
    count = lambda: rng.choice(["1", "2", "5", "0", "-1", "x"])
    kind = rng.randrange(12)
    if kind == 0:
        return ["RPUSH", pick()] + [element() for _ in range(rng.randrange(1, 4))]
    if kind == 1:
        return ["LPUSH", pick(), element()]
    if kind == 2:
        return ["ZADD", pick()] + [x for _ in range(rng.randrange(1, 3)) for x in (str(rng.randrange(-3, 4)), element())]
    if kind == 3:
        return ["SET", pick(), "string"]
    if kind == 4:
        return ["LMOVE", pick(), pick(), rng.choice(ends), rng.choice(ends)]
    if kind == 5:
        return ["RPOPLPUSH", pick(), pick()]
    if kind in (6, 7):
        numkeys = rng.choice([1, 2, 3, 0, 9])
        chosen = [pick() for _ in range(min(numkeys, 3))]
        tail = [rng.choice(["LEFT", "RIGHT", "right", "MIN"])]
        if rng.random() < 0.5:
            tail += ["COUNT", count()]
        return ["LMPOP", str(numkeys)] + chosen + tail
    if kind in (8, 9):
        numkeys = rng.choice([1, 2, 3, 0])
        chosen = [pick() for _ in range(numkeys)]
        tail = [rng.choice(["MIN", "MAX", "max", "LEFT"])]
        if rng.random() < 0.5:
            tail += ["COUNT", count()]
        return ["ZMPOP", str(numkeys)] + chosen + tail
    if kind == 10:
        return ["LRANGE", pick(), "0", "-1"]
    return ["ZRANGE", pick(), "0", "-1", "WITHSCORES"]


def exchange(sock: socket.socket, args: list[str]) -> bytes:
    """Sends one command and reads its whole reply (RESP2)."""
    sock.sendall(command(*args))
    reader = RespReader(sock)
    return reader.read_reply()


class RespReader:
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


def test_multi_key_pops_answer_as_redis_server_does(resp_server, redis_server_port):
    """A seeded random mix of LMOVE, RPOPLPUSH, LMPOP and ZMPOP (valid and invalid arguments,
    keys of other types) on both servers, compared reply by reply. Replay with
    OSPREY_BLOCKING_SEED=<seed>."""
    seed = int(os.environ.get("OSPREY_BLOCKING_SEED", random.randrange(1 << 32)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    prefix = harness.unique("diff")
    keys = [f"{prefix}:{name}" for name in "abcd"]
    with (
        socket.create_connection(("127.0.0.1", resp_server.resp_port), timeout=5) as osprey,
        socket.create_connection(("127.0.0.1", redis_server_port), timeout=5) as reference,
    ):
        for step in range(400):
            args = random_command(rng, keys)
            expected = exchange(reference, args)
            got = exchange(osprey, args)
            assert got == expected, f"seed {seed} step {step}: {args}"
        for name in keys:
            exchange(osprey, ["DEL", name])

"""The Redis protocol front end, first slice: connection commands, strings and keys, through
redis-py (RESP2 and RESP3) and raw sockets, and the same records through the Aerospike client.
"""

from __future__ import annotations

import socket
import time

import pytest
import redis

import harness


@pytest.fixture
def key():
    return harness.unique("k")


def test_ping_echo_select_and_time(r):
    assert r.ping() is True
    assert r.echo("hello") == b"hello"
    assert r.execute_command("SELECT", 0) in (b"OK", "OK", True)
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        r.execute_command("SELECT", 16)
    seconds, micros = r.time()
    assert abs(seconds - time.time()) < 5 and 0 <= micros < 1_000_000


def test_set_get_and_their_options(r, key):
    assert r.get(key) is None
    assert r.set(key, "v1") is True
    assert r.get(key) == b"v1"
    assert r.set(key, "v2", nx=True) is None
    assert r.get(key) == b"v1"
    assert r.set(key + "x", "v", xx=True) is None
    assert r.exists(key + "x") == 0
    assert r.set(key, "v3", xx=True) is True
    assert r.set(key, "v4", get=True) == b"v3"
    assert r.get(key) == b"v4"
    with pytest.raises(redis.ResponseError, match="^syntax error"):
        r.execute_command("SET", key, "v", "NX", "XX")
    with pytest.raises(redis.ResponseError, match="invalid expire time"):
        r.set(key, "v", ex=0)
    binary = bytes(range(256))
    assert r.set(key, binary)
    assert r.get(key) == binary
    assert r.strlen(key) == 256


def test_expiry_ttl_and_keepttl(r, key):
    assert r.set(key, "v", ex=100)
    assert 99 <= r.ttl(key) <= 100
    assert 98_000 <= r.pttl(key) <= 100_000
    assert r.set(key, "w", keepttl=True)
    assert 98 <= r.ttl(key) <= 100
    assert r.set(key, "x")
    assert r.ttl(key) == -1
    assert r.ttl(key + "missing") == -2
    assert r.set(key, "short", px=1200)
    time.sleep(2.2)
    assert r.get(key) is None


def test_incr_family_and_integer_errors(r, key):
    assert r.incr(key) == 1
    assert r.incrby(key, 41) == 42
    assert r.decr(key) == 41
    assert r.decrby(key, 40) == 1
    assert r.get(key) == b"1"
    r.set(key, "not a number")
    with pytest.raises(redis.ResponseError, match="value is not an integer or out of range"):
        r.incr(key)
    r.set(key, str(2**63 - 1))
    with pytest.raises(redis.ResponseError, match="increment or decrement would overflow"):
        r.incr(key)
    with pytest.raises(redis.ResponseError, match="value is not an integer"):
        r.execute_command("INCRBY", key, "1.5")


def test_append_strlen_mget_mset_getdel(r, key):
    assert r.append(key, "ab") == 2
    assert r.append(key, "cd") == 4
    assert r.get(key) == b"abcd"
    assert r.mset({key + "1": "a", key + "2": "b"}) is True
    assert r.mget(key + "1", key + "missing", key + "2") == [b"a", None, b"b"]
    assert r.getdel(key + "1") == b"a"
    assert r.getdel(key + "1") is None
    assert r.strlen(key + "missing") == 0


def test_del_exists_type_and_dbsize(r, key):
    r.set(key + "a", 1)
    r.set(key + "b", 2)
    assert r.exists(key + "a", key + "b", key + "a", key + "none") == 3
    assert r.type(key + "a") in (b"string", "string")
    assert r.type(key + "none") in (b"none", "none")
    before = r.dbsize()
    assert r.delete(key + "a", key + "b", key + "none") == 2
    assert r.dbsize() == before - 2
    assert r.unlink(key + "a") == 0


def test_unknown_command_and_wrong_arity_use_redis_texts(r):
    with pytest.raises(redis.ResponseError) as error:
        r.execute_command("NOSUCH", "a", "b")
    assert str(error.value) == "unknown command 'NOSUCH', with args beginning with: 'a' 'b' "
    with pytest.raises(redis.ResponseError) as error:
        r.execute_command("GET")
    assert str(error.value) == "wrong number of arguments for 'get' command"


def test_hello_switches_protocol_and_client_names(resp_server):
    reply = raw_exchange(resp_server.resp_port, b"HELLO 3 SETNAME me\r\nCLIENT GETNAME\r\nGET nosuchkey\r\nHELLO 4\r\n")
    assert reply.startswith(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n")
    assert b"$5\r\nproto\r\n:3\r\n" in reply
    # After HELLO 3 the null is RESP3's `_`.
    assert reply.endswith(b"$2\r\nme\r\n_\r\n-NOPROTO unsupported protocol version\r\n")
    r = resp_server.redis()
    assert r.client_setname("named") is True
    assert r.client_getname() in (b"named", "named")
    assert isinstance(r.client_id(), int)


def test_a_string_written_through_resp_reads_through_aerospike_and_back(resp_server, key):
    r = resp_server.redis()
    client = resp_server.client()
    r.set(key, "from redis")
    (_, _, record_key, _), meta, bins = client.get(("test", "redis", key))
    assert bins == {"value": "from redis"}
    r.incr(key + "n")
    assert client.get(("test", "redis", key + "n"))[2] == {"value": 1}
    client.put(("test", "redis", key + "a"), {"value": "from aerospike"})
    assert r.get(key + "a") == b"from aerospike"
    client.increment(("test", "redis", key + "n"), "value", 9)
    assert r.get(key + "n") == b"10"
    client.put(("test", "redis", key + "other"), {"x": 1})
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.get(key + "other")


def test_pipelines_of_any_depth_answer_in_order(resp_server, key):
    r = resp_server.redis()
    pipe = r.pipeline(transaction=False)
    for i in range(1000):
        pipe.set(f"{key}:{i}", i)
    for i in range(1000):
        pipe.get(f"{key}:{i}")
    replies = pipe.execute()
    assert replies[:1000] == [True] * 1000
    assert replies[1000:] == [str(i).encode() for i in range(1000)]


def raw_exchange(port: int, payload: bytes, timeout: float = 3.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(payload)
        chunks = []
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                chunks.append(data)
        except socket.timeout:
            pass
        return b"".join(chunks)


def test_inline_commands_and_quit(resp_server):
    reply = raw_exchange(resp_server.resp_port, b"PING\r\nPING x\r\nECHO \"a b\"\r\nQUIT\r\nPING\r\n")
    assert reply == b"+PONG\r\n$1\r\nx\r\n$3\r\na b\r\n+OK\r\n"


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"*1\r\n$-5\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*1\r\n+PING\r\n", b"-ERR Protocol error: expected '$', got '+'\r\n"),
        (b'SET "unbalanced\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    ],
)
def test_malformed_requests_get_redis_errors_and_a_closed_connection(resp_server, payload, message):
    assert raw_exchange(resp_server.resp_port, payload) == message
    assert resp_server.redis().ping() is True


def test_a_huge_declared_bulk_is_not_allocated(resp_server):
    # 500 MB declared, 10 bytes sent: the server waits for the rest without reserving it.
    with socket.create_connection(("127.0.0.1", resp_server.resp_port), timeout=2) as sock:
        sock.sendall(b"*2\r\n$3\r\nSET\r\n$500000000\r\n0123456789")
        time.sleep(0.3)
    rss = int(harness.parse_kv(harness.info(resp_server.client(), "statistics"))["process_rss_bytes"])
    assert rss < 400_000_000
    assert resp_server.redis().ping() is True

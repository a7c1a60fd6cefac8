"""Server commands of the Redis front end: CONFIG through one parameter table, SLOWLOG, CLIENT
KILL / PAUSE / REPLY / NO-EVICT / NO-TOUCH, WAIT, LATENCY and DEBUG. Error texts are compared
with a redis-server 7.0.15 the module starts on a free port.
"""

from __future__ import annotations

import socket
import time

import pytest
import redis

import harness


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def real_redis():
    """A reference redis-server 7.0 without a config file and with DEBUG, for its error texts."""
    with harness.reference_redis_server("--enable-debug-command", "yes") as port:
        client = redis.Redis(port=port)
        yield client
        client.close()

@pytest.fixture
def o(resp_server):
    return resp_server.redis()


def error_of(client, *args) -> str:
    with pytest.raises(redis.ResponseError) as error:
        client.execute_command(*args)
    return str(error.value)


def raw(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    return s


def request(*args: str | bytes) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        arg = arg.encode() if isinstance(arg, str) else arg
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


def read_exactly(s: socket.socket, expected: bytes) -> bytes:
    got = b""
    while len(got) < len(expected):
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def nothing_arrives(s: socket.socket, seconds: float) -> bool:
    s.settimeout(seconds)
    try:
        return s.recv(4096) == b"" and False
    except socket.timeout:
        return True
    finally:
        s.settimeout(5)


# Errors whose text Osprey shares with redis-server (7.0.15 here; Osprey answers as 7.2).
SAME_ERRORS = [
    ("CONFIG", "SET", "nosuch", "1"),
    ("CONFIG", "SET", "slowlog-max-len", "-1"),
    ("CONFIG", "SET", "slowlog-log-slower-than", "abc"),
    ("CONFIG", "SET", "slowlog-log-slower-than", "-2"),
    ("CONFIG", "SET", "latency-tracking", "maybe"),
    ("CONFIG", "SET", "databases", "4"),
    ("CONFIG", "SET", "slowlog-max-len", "1", "slowlog-max-len", "2"),
    ("CONFIG", "SET", "slowlog-max-len", "1", "nosuch", "2"),
    ("CONFIG", "SET", "slowlog-max-len", "1", "timeout"),
    ("CONFIG", "SET", "timeout"),
    ("CONFIG", "GET"),
    ("CONFIG", "REWRITE"),
    ("CONFIG", "NOPE"),
    ("SLOWLOG", "GET", "-2"),
    ("SLOWLOG", "GET", "x"),
    ("SLOWLOG", "NOPE"),
    ("SLOWLOG", "LEN", "1"),
    ("CLIENT", "PAUSE", "10", "NOPE"),
    ("CLIENT", "PAUSE", "-1"),
    ("CLIENT", "PAUSE", "abc"),
    ("CLIENT", "KILL", "1.2.3.4:5"),
    ("CLIENT", "KILL", "ID", "0"),
    ("CLIENT", "KILL", "TYPE", "nope"),
    ("CLIENT", "KILL", "USER", "nosuch"),
    ("CLIENT", "KILL", "SKIPME", "maybe"),
    ("CLIENT", "KILL", "ADDR"),
    ("CLIENT", "KILL", "NOPE", "x"),
    ("CLIENT", "REPLY", "maybe"),
    ("CLIENT", "NO-EVICT", "maybe"),
    ("CLIENT", "NOSUCH"),
    ("WAIT", "x", "0"),
    ("WAIT", "0", "-1"),
    ("WAIT", "0", "x"),
    ("LATENCY", "NOPE"),
    ("LATENCY", "GRAPH", "command"),
    ("DEBUG", "OBJECT", "nosuchkey"),
]


@pytest.mark.parametrize("args", SAME_ERRORS, ids=" ".join)
def test_error_texts_are_redis_servers(o, real_redis, args):
    assert error_of(o, *args) == error_of(real_redis, *args)


def test_config_get_answers_from_the_table_with_patterns_and_aliases(o):
    assert o.config_get("save") == {"save": ""}
    assert o.config_get("appendonly") == {"appendonly": "no"}
    assert o.config_get("maxmemory") == {"maxmemory": "0"}
    assert o.config_get("databases") == {"databases": "16"}
    assert o.config_get("slowlog-*") == {
        "slowlog-log-slower-than": "10000", "slowlog-max-len": "128"}
    assert o.config_get("lua-time-limit") == {"lua-time-limit": "5000"}
    both = o.config_get("busy-reply-threshold", "lua-time-limit")
    assert both == {"busy-reply-threshold": "5000", "lua-time-limit": "5000"}
    assert o.config_get("latency-tracking") == {"latency-tracking": "yes"}
    assert "timeout" in o.config_get("*") and "maxclients" in o.config_get("*")
    assert o.config_get("nosuchsetting") == {}


def test_config_set_round_trips_and_several_parameters_are_all_or_nothing(o):
    assert o.config_set("slowlog-max-len", 7) is True
    assert o.config_get("slowlog-max-len") == {"slowlog-max-len": "7"}
    o.execute_command("CONFIG", "SET", "slowlog-log-slower-than", "-1", "latency-tracking", "no")
    assert o.config_get("slowlog-log-slower-than") == {"slowlog-log-slower-than": "-1"}
    assert o.config_get("latency-tracking") == {"latency-tracking": "no"}
    o.config_set("lua-time-limit", 1234)
    assert o.config_get("busy-reply-threshold") == {"busy-reply-threshold": "1234"}
    # The second pair fails its check: the first is not applied either.
    with pytest.raises(redis.ResponseError, match="argument 'slowlog-max-len'"):
        o.execute_command("CONFIG", "SET", "slowlog-log-slower-than", "5", "slowlog-max-len", "x")
    assert o.config_get("slowlog-log-slower-than") == {"slowlog-log-slower-than": "-1"}
    # Fixed settings accept their current value only.
    assert o.config_set("save", "") is True
    with pytest.raises(redis.ResponseError, match="can't set immutable config"):
        o.config_set("appendonly", "yes")
    o.execute_command("CONFIG", "SET", "slowlog-log-slower-than", "10000", "slowlog-max-len", "128",
                      "latency-tracking", "yes", "busy-reply-threshold", "5000")
    assert o.config_resetstat() is True
    assert o.execute_command("CONFIG", "HELP")[0].startswith(b"CONFIG <subcommand>")


def test_config_get_names_every_parameter_redis_server_names(o, real_redis):
    """Tools and Redis's own tests read and set any of redis-server's parameters; Osprey
    refused all but a few, and a unit whose first line set `hash-max-ziplist-entries` never
    ran."""
    assert set(o.config_get("*")) == set(real_redis.config_get("*"))


def test_kept_parameters_are_checked_remembered_and_answered_under_both_names(o):
    o.config_set("hash-max-ziplist-entries", 16)
    assert o.config_get("hash-max-*-entries") == {
        "hash-max-listpack-entries": "16", "hash-max-ziplist-entries": "16"}
    o.execute_command("CONFIG", "SET", "stream-node-max-bytes", "2kb", "activedefrag", "YES",
                      "cluster-preferred-endpoint-type", "HOSTNAME", "shutdown-on-sigterm",
                      "save  now")
    assert o.config_get("stream-node-max-bytes") == {"stream-node-max-bytes": "2048"}
    assert o.config_get("activedefrag") == {"activedefrag": "yes"}
    assert o.config_get("cluster-preferred-endpoint-type") == {
        "cluster-preferred-endpoint-type": "hostname"}
    assert o.config_get("shutdown-on-sigterm") == {"shutdown-on-sigterm": "save now"}
    # All or nothing: a kept parameter set before a failing one is restored.
    with pytest.raises(redis.ResponseError, match="argument 'list-compress-depth'"):
        o.execute_command("CONFIG", "SET", "set-max-intset-entries", "7",
                          "list-compress-depth", "-1")
    assert o.config_get("set-max-intset-entries") == {"set-max-intset-entries": "512"}
    o.execute_command("CONFIG", "SET", "hash-max-listpack-entries", "512", "stream-node-max-bytes",
                      "4096", "activedefrag", "no", "cluster-preferred-endpoint-type", "ip",
                      "shutdown-on-sigterm", "default")


KEPT_ERRORS = [
    ("CONFIG", "SET", "hash-max-ziplist-entries", "x"),
    ("CONFIG", "SET", "hash-max-ziplist-entries", "-1"),
    ("CONFIG", "SET", "stream-node-max-bytes", "1tb"),
    ("CONFIG", "SET", "active-defrag-cycle-min", "100"),
    ("CONFIG", "SET", "activerehashing", "maybe"),
    ("CONFIG", "SET", "oom-score-adj", "always"),
    ("CONFIG", "SET", "shutdown-on-sigint", "later"),
    ("CONFIG", "SET", "daemonize", "no"),
    ("CONFIG", "SET", "io-threads", "4"),
    ("CONFIG", "SET", "hz", "10", "hz", "11"),
    ("CONFIG", "SET", "maxmemory", "bla"),
    ("CONFIG", "SET", "maxmemory", "-1"),
]


@pytest.mark.parametrize("args", KEPT_ERRORS, ids=" ".join)
def test_kept_and_immutable_parameters_refuse_as_redis_server_does(o, real_redis, args):
    assert error_of(o, *args) == error_of(real_redis, *args)


def test_parameters_osprey_does_not_honour_accept_only_their_value(o):
    """A password, TLS port or replica setting that Osprey would store and not act on would
    mislead: those accept only the value Osprey behaves by."""
    for name, value in [("requirepass", "secret"), ("tls-port", "6380"), ("maxmemory-policy", "allkeys-lru"),
                        ("appendonly", "yes"), ("protected-mode", "yes")]:
        with pytest.raises(redis.ResponseError, match="can't set immutable config"):
            o.config_set(name, value)
    assert o.config_get("requirepass") == {"requirepass": ""}


def slowlog_of(client):
    return client.execute_command("SLOWLOG", "GET", "-1")


def test_slowlog_logs_a_slow_command_and_not_fast_ones(o):
    o.config_set("slowlog-log-slower-than", 100_000)
    o.slowlog_reset()
    o.client_setname("sleeper")
    for _ in range(20):
        o.get("fast")
    started = time.monotonic()
    assert o.execute_command("DEBUG", "SLEEP", "0.2") == b"OK"
    assert time.monotonic() - started >= 0.2
    entries = slowlog_of(o)
    assert len(entries) == 1 and o.slowlog_len() == 1
    entry_id, unix_time, duration_us, args, address, name = entries[0]
    assert args == [b"DEBUG", b"SLEEP", b"0.2"]
    assert 200_000 <= duration_us < 2_000_000
    assert abs(unix_time - time.time()) < 10
    assert address.startswith(b"127.0.0.1:") and int(address.split(b":")[1]) > 0
    assert name == b"sleeper"
    assert o.slowlog_reset() is True and o.slowlog_len() == 0
    o.config_set("slowlog-log-slower-than", 10_000)


def test_slowlog_entries_cut_arguments_as_redis_server_does(o, real_redis):
    long_value = b"v" * 200
    many = [b"k%d" % n for n in range(40)]
    cut = {}
    for name, client in [("osprey", o), ("redis", real_redis)]:
        client.config_set("slowlog-log-slower-than", 0)
        client.slowlog_reset()
        client.execute_command("ECHO", long_value)
        client.execute_command("DEL", *many)
        client.config_set("slowlog-log-slower-than", 10_000)
        entries = slowlog_of(client)
        cut[name] = [entry[3] for entry in entries if entry[3][0] in (b"ECHO", b"DEL")]
    assert cut["osprey"] == cut["redis"]
    delete, echo = cut["osprey"]
    assert echo[1] == b"v" * 128 + b"... (72 more bytes)"
    assert len(delete) == 32 and delete[-1] == b"... (10 more arguments)"


def test_slowlog_is_bounded_by_its_length_and_off_when_negative(o):
    o.config_set("slowlog-max-len", 3)
    o.config_set("slowlog-log-slower-than", 0)
    o.slowlog_reset()
    for n in range(10):
        o.set("k%d" % n, n)
    assert o.slowlog_len() == 3
    entries = slowlog_of(o)
    assert len(entries) == 3
    assert [entry[3][1] for entry in entries if entry[3][0] == b"SET"] == [b"k9", b"k8"][:len(
        [entry for entry in entries if entry[3][0] == b"SET"])]
    o.config_set("slowlog-log-slower-than", -1)
    o.slowlog_reset()
    o.execute_command("DEBUG", "SLEEP", "0.05")
    assert o.slowlog_len() == 0
    o.execute_command("CONFIG", "SET", "slowlog-max-len", "128", "slowlog-log-slower-than", "10000")


def client_address(s: socket.socket) -> str:
    host, port = s.getsockname()[:2]
    return f"{host}:{port}"


def test_client_kill_closes_another_connection(resp_server, o):
    victim = raw(resp_server.resp_port)
    victim.sendall(request("PING"))
    assert read_exactly(victim, b"+PONG\r\n") == b"+PONG\r\n"
    assert o.execute_command("CLIENT", "KILL", client_address(victim)) == b"OK"
    victim.settimeout(5)
    assert victim.recv(100) == b"", "the killed connection sees its end"
    victim.close()

    other = raw(resp_server.resp_port)
    other.sendall(request("CLIENT", "ID"))
    reply = other.recv(100)
    other_id = int(reply[1:].split(b"\r\n")[0])
    assert o.execute_command("CLIENT", "KILL", "ID", other_id, "SKIPME", "yes") == 1
    assert other.recv(100) == b""
    other.close()

    assert o.execute_command("CLIENT", "KILL", "ID", other_id) == 0
    assert o.execute_command("CLIENT", "KILL", "TYPE", "master") == 0
    assert o.execute_command("CLIENT", "KILL", "USER", "default", "MAXAGE", "100000") == 0
    own = o.client_id()
    assert o.execute_command("CLIENT", "KILL", "ID", own) == 0, "SKIPME yes by default"


def test_client_kill_type_pubsub_closes_subscribers_only(resp_server, o):
    subscriber = raw(resp_server.resp_port)
    subscriber.sendall(request("SUBSCRIBE", "news"))
    assert subscriber.recv(100).startswith(b"*3\r\n$9\r\nsubscribe")
    plain = raw(resp_server.resp_port)
    plain.sendall(request("PING"))
    assert plain.recv(100) == b"+PONG\r\n"
    assert o.execute_command("CLIENT", "KILL", "TYPE", "pubsub") == 1
    assert subscriber.recv(100) == b""
    plain.sendall(request("PING"))
    assert plain.recv(100) == b"+PONG\r\n"
    subscriber.close()
    plain.close()


def test_a_killed_client_killing_itself_gets_its_reply_first(resp_server):
    s = raw(resp_server.resp_port)
    s.sendall(request("CLIENT", "KILL", "SKIPME", "no", "ADDR", client_address(s),
                      "LADDR", client_address_of_peer(s)))
    assert read_exactly(s, b":1\r\n") == b":1\r\n"
    assert s.recv(100) == b""
    s.close()


def client_address_of_peer(s: socket.socket) -> str:
    host, port = s.getpeername()[:2]
    return f"{host}:{port}"


def test_client_pause_write_holds_writes_until_unpause_and_serves_reads(resp_server, o):
    o.set("paused-key", "before")
    assert o.execute_command("CLIENT", "PAUSE", 10_000, "WRITE") == b"OK"
    writer = raw(resp_server.resp_port)
    try:
        writer.sendall(request("SET", "paused-key", "after"))
        assert nothing_arrives(writer, 0.5), "the write waits"
        reader = resp_server.redis()
        assert reader.get("paused-key") == b"before", "a read is served meanwhile"
        assert o.execute_command("CLIENT", "UNPAUSE") == b"OK"
        assert read_exactly(writer, b"+OK\r\n") == b"+OK\r\n"
        assert reader.get("paused-key") == b"after"
    finally:
        o.execute_command("CLIENT", "UNPAUSE")
        writer.close()


def test_client_pause_ends_at_its_deadline(resp_server, o):
    o.execute_command("CLIENT", "PAUSE", 300, "ALL")
    started = time.monotonic()
    other = resp_server.redis()
    assert other.ping() is True
    assert time.monotonic() - started >= 0.2


def test_client_reply_off_and_skip(resp_server):
    s = raw(resp_server.resp_port)
    s.sendall(request("CLIENT", "REPLY", "OFF") + request("SET", "reply-key", "1")
              + request("GET", "reply-key") + request("CLIENT", "REPLY", "ON")
              + request("GET", "reply-key"))
    expected = b"+OK\r\n$1\r\n1\r\n"
    assert read_exactly(s, expected) == expected
    s.sendall(request("CLIENT", "REPLY", "SKIP") + request("INCR", "reply-key")
              + request("GET", "reply-key"))
    assert read_exactly(s, b"$1\r\n2\r\n") == b"$1\r\n2\r\n"
    s.close()


def test_client_flags_tracking_and_help(o):
    assert o.execute_command("CLIENT", "NO-EVICT", "on") == b"OK"
    assert o.execute_command("CLIENT", "NO-EVICT", "off") == b"OK"
    assert o.execute_command("CLIENT", "NO-TOUCH", "on") == b"OK"
    assert o.execute_command("CLIENT", "NO-TOUCH", "off") == b"OK"
    assert "not served" in error_of(o, "CLIENT", "TRACKING", "on")
    assert o.execute_command("CLIENT", "HELP")[0].startswith(b"CLIENT <subcommand>")


def test_wait_latency_and_debug(o, real_redis):
    o.set("w", 1)
    assert o.execute_command("WAIT", 0, 0) == 0, "a single node has no replicas"
    assert o.execute_command("WAIT", 1, 100) == 0
    assert "not served" in error_of(o, "WAITAOF", 1, 0, 0)
    for args in [("LATENCY", "LATEST"), ("LATENCY", "HISTORY", "command"),
                 ("LATENCY", "RESET"), ("LATENCY", "DOCTOR")]:
        assert o.execute_command(*args) == real_redis.execute_command(*args), args
    assert o.execute_command("DEBUG", "SLEEP", "0") == b"OK"
    assert o.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0") == b"OK"
    assert o.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1") == b"OK"
    assert o.execute_command("DEBUG", "CHANGE-REPL-ID") == b"OK"
    line = o.execute_command("DEBUG", "OBJECT", "w")
    encoding = o.object("encoding", "w")
    assert line.startswith(b"Value at:") and b"refcount:1 encoding:%s " % encoding in line
    assert "not served" in error_of(o, "DEBUG", "JMAP")


def test_debug_sleep_stops_only_its_own_connection(resp_server, o):
    import threading

    sleeping = threading.Thread(
        target=lambda: resp_server.redis().execute_command("DEBUG", "SLEEP", "1"))
    sleeping.start()
    time.sleep(0.1)
    started = time.monotonic()
    assert o.ping() is True
    assert time.monotonic() - started < 0.5
    sleeping.join()

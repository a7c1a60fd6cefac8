"""Redis pub/sub through the RESP front end: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and their
UNSUBSCRIBEs with Redis's counts, PUBLISH and SPUBLISH answering their receivers, the messages'
bytes in RESP2 and RESP3 compared with a real redis-server's, RESP2's subscribed context, PUBSUB
introspection, keyspace notifications (compared with redis-server's for the same commands), a
subscriber that never reads cut off at the `pubsub` output limit while the others go on, and
PUBLISH across a three-node cluster.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
import redis

import harness
from test_cluster import wait_formed
from test_hostile import rss_bytes



@pytest.fixture(scope="module")
def real_redis_port(redis_server_port):
    """The reference redis-server (`conftest.py`), for differential checks."""
    return redis_server_port

def command(*args: str | bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        arg = arg.encode() if isinstance(arg, str) else arg
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


class Raw:
    """A plain socket speaking RESP: sends commands and collects what arrives."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)

    def send(self, *args: str | bytes) -> None:
        self.sock.sendall(command(*args))

    def read_quiet(self, quiet_s: float = 0.3) -> bytes:
        """Everything that arrives until nothing more comes for `quiet_s`."""
        data = b""
        self.sock.settimeout(quiet_s)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except socket.timeout:
            pass
        return data

    def close(self) -> None:
        self.sock.close()


def wait_message(pubsub, timeout: float = 5.0):
    """The next message (not a subscription reply) a redis-py PubSub receives."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if message is not None:
            return message
    raise AssertionError("no message arrived")


@pytest.mark.parametrize("protocol", [2, 3])
def test_subscriptions_count_and_publish_answers_its_receivers(resp_server, protocol):
    r = resp_server.redis(protocol=protocol)
    channel = harness.unique("news")
    p = r.pubsub()
    p.subscribe(channel, channel + ":b")
    replies = [p.get_message(timeout=2) for _ in range(2)]
    assert [(m["type"], m["data"]) for m in replies] == [("subscribe", 1), ("subscribe", 2)]
    p.psubscribe(channel + ":*")
    assert p.get_message(timeout=2)["data"] == 3
    publisher = resp_server.redis(protocol=protocol)
    assert publisher.publish(channel, "hello") == 1
    assert publisher.publish(channel + ":b", "both") == 2
    assert publisher.publish(harness.unique("nobody"), "x") == 0
    first = wait_message(p)
    assert (first["type"], first["channel"], first["data"]) == ("message", channel.encode(), b"hello")
    got = sorted((m["type"], m["pattern"], m["data"]) for m in (wait_message(p), wait_message(p)))
    assert got == [("message", None, b"both"), ("pmessage", (channel + ":*").encode(), b"both")]
    p.unsubscribe(channel)
    assert p.get_message(timeout=2)["data"] == 2
    p.punsubscribe()
    assert p.get_message(timeout=2)["data"] == 1
    p.unsubscribe()
    assert p.get_message(timeout=2)["data"] == 0
    assert publisher.publish(channel + ":b", "late") == 0
    p.close()


def exchange(port: int, resp3: bool) -> bytes:
    """A fixed conversation of a subscriber (and a publisher beside it); returns the bytes the
    subscriber received after its HELLO."""
    subscriber, publisher = Raw(port), Raw(port)
    try:
        if resp3:
            subscriber.send("HELLO", "3")
            subscriber.read_quiet()
        subscriber.send("SUBSCRIBE", "chan", "other")
        subscriber.send("PSUBSCRIBE", "ch*")
        subscriber.send("SSUBSCRIBE", "shard")
        got = subscriber.read_quiet()
        for args in (("PUBLISH", "chan", "hello"), ("PUBLISH", "chx", "pat"), ("SPUBLISH", "shard", "s"),
                     ("PUBLISH", "chan", b"\x00\xffbin")):
            publisher.send(*args)
            publisher.read_quiet(0.1)
        got += subscriber.read_quiet()
        for args in (("PING",), ("PING", "hi"), ("GET", "k"), ("SET", "k", "v"), ("NOSUCH",),
                     ("SUBSCRIBE",), ("UNSUBSCRIBE", "chan", "never"), ("PUNSUBSCRIBE",),
                     ("SUNSUBSCRIBE",), ("UNSUBSCRIBE",), ("UNSUBSCRIBE",), ("PUNSUBSCRIBE",), ("PING",)):
            subscriber.send(*args)
            got += subscriber.read_quiet(0.15)
        return got
    finally:
        subscriber.close()
        publisher.close()


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_messages_and_replies_are_the_bytes_redis_sends(resp_server, real_redis_port, resp3):
    """The same conversation with redis-server and with Osprey gives the same bytes: the
    subscription replies, message, pmessage and smessage frames (arrays in RESP2, pushes in
    RESP3), PING as a message in RESP2's subscribed context, the context's refusals, and the
    unsubscribe replies with their null channel when nothing is left."""
    expected = exchange(real_redis_port, resp3)
    got = exchange(resp_server.resp_port, resp3)
    assert got == expected


@pytest.mark.parametrize("protocol", [2, 3])
def test_client_reply_off_silences_replies_but_not_subscriptions_or_messages(resp_server, protocol):
    """A subscriber that turned replies off (CLIENT REPLY OFF) still gets its subscription
    confirmations and its messages, as Redis's pushes bypass REPLY OFF and SKIP in both
    protocol versions (the suite's pubsub unit waited for ever on them in RESP3)."""
    channel = harness.unique("quiet")
    p = resp_server.redis(protocol=protocol).pubsub()
    p.execute_command("CLIENT", "REPLY", "OFF")
    p.subscribe(channel)
    assert p.get_message(timeout=2)["type"] == "subscribe"
    p.psubscribe(channel + "*")
    assert p.get_message(timeout=2)["data"] == 2
    publisher = resp_server.redis(protocol=protocol)
    assert publisher.publish(channel, "hello") == 2
    got = sorted((m["type"], m["data"]) for m in (wait_message(p), wait_message(p)))
    assert got == [("message", b"hello"), ("pmessage", b"hello")]
    p.unsubscribe(channel)
    assert (p.get_message(timeout=2)["type"], p.get_message(timeout=2)) == ("unsubscribe", None)
    p.close()


def reply_off_exchange(port: int, resp3: bool) -> bytes:
    """What a client with CLIENT REPLY OFF, then SKIP, receives: only the pushes."""
    client, publisher = Raw(port), Raw(port)
    try:
        if resp3:
            client.send("HELLO", "3")
            client.read_quiet()
        for args in (("CLIENT", "REPLY", "OFF"), ("SUBSCRIBE", "quiet"), ("PSUBSCRIBE", "qu*"),
                     ("SUBSCRIBE",), ("PING",)):
            client.send(*args)
        got = client.read_quiet()
        publisher.send("PUBLISH", "quiet", "hi")
        publisher.read_quiet(0.1)
        got += client.read_quiet()
        for args in (("UNSUBSCRIBE",), ("PUNSUBSCRIBE",), ("CLIENT", "REPLY", "ON"), ("CLIENT", "REPLY", "SKIP"),
                     ("SUBSCRIBE", "skip"), ("ECHO", "after"), ("UNSUBSCRIBE",)):
            client.send(*args)
            got += client.read_quiet(0.15)
        return got
    finally:
        client.close()
        publisher.close()


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_client_reply_off_and_skip_let_the_same_pushes_through_as_redis(resp_server, real_redis_port,
                                                                         resp3):
    """Byte for byte against redis-server: under REPLY OFF the (un)subscription confirmations
    and messages arrive while the errors and PONG do not; a SKIP spent on SUBSCRIBE still lets
    its confirmation through."""
    expected = reply_off_exchange(real_redis_port, resp3)
    assert b"subscribe" in expected
    assert reply_off_exchange(resp_server.resp_port, resp3) == expected


def test_resp2_subscribed_context_refuses_other_commands_and_reset_leaves_it(resp_server):
    sock = Raw(resp_server.resp_port)
    try:
        sock.send("SUBSCRIBE", "ctx")
        assert sock.read_quiet() == b"*3\r\n$9\r\nsubscribe\r\n$3\r\nctx\r\n:1\r\n"
        sock.send("GET", "x")
        assert sock.read_quiet() == (
            b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET "
            b"are allowed in this context\r\n")
        sock.send("RESET")
        assert sock.read_quiet() == b"+RESET\r\n"
        sock.send("GET", harness.unique("none"))
        assert sock.read_quiet() == b"$-1\r\n"
        assert resp_server.redis().pubsub_numsub("ctx") == [(b"ctx", 0)]
    finally:
        sock.close()


def test_resp3_subscriber_runs_any_command_between_pushes(resp_server):
    r = resp_server.redis(protocol=3)
    p = r.pubsub()
    p.subscribe("r3")
    p.get_message(timeout=2)
    sock = Raw(resp_server.resp_port)
    try:
        sock.send("HELLO", "3")
        sock.read_quiet()
        sock.send("SUBSCRIBE", "r3")
        sock.send("SET", "r3key", "v")
        sock.send("GET", "r3key")
        assert sock.read_quiet() == b">3\r\n$9\r\nsubscribe\r\n$2\r\nr3\r\n:1\r\n+OK\r\n$1\r\nv\r\n"
        assert resp_server.redis().publish("r3", "m") == 2
        assert sock.read_quiet() == b">3\r\n$7\r\nmessage\r\n$2\r\nr3\r\n$1\r\nm\r\n"
        assert wait_message(p)["data"] == b"m"
    finally:
        sock.close()
        p.close()


def test_pubsub_introspection(resp_server):
    r = resp_server.redis()
    prefix = harness.unique("intro")
    p1, p2 = r.pubsub(), r.pubsub()
    p1.subscribe(prefix + ":a", prefix + ":b")
    p2.subscribe(prefix + ":a")
    p1.psubscribe(prefix + "*", prefix + "?")
    p2.psubscribe(prefix + "*")
    p2.ssubscribe(prefix + ":s")
    for p, count in ((p1, 4), (p2, 3)):
        for _ in range(count):
            assert p.get_message(timeout=2) is not None
    assert sorted(r.pubsub_channels(prefix + "*")) == [(prefix + ":a").encode(), (prefix + ":b").encode()]
    assert r.pubsub_numsub(prefix + ":a", prefix + ":b", prefix + ":none") == [
        ((prefix + ":a").encode(), 2), ((prefix + ":b").encode(), 1), ((prefix + ":none").encode(), 0)]
    assert r.pubsub_numpat() >= 2
    assert r.pubsub_shardchannels(prefix + "*") == [(prefix + ":s").encode()]
    assert r.pubsub_shardnumsub(prefix + ":s") == [((prefix + ":s").encode(), 1)]
    assert r.execute_command("PUBSUB", "NUMSUB") == []
    with pytest.raises(redis.ResponseError, match="^unknown subcommand 'NOPE'. Try PUBSUB HELP.$"):
        r.execute_command("PUBSUB", "NOPE")
    with pytest.raises(redis.ResponseError, match=r"^wrong number of arguments for 'pubsub\|numpat' command$"):
        r.execute_command("PUBSUB", "NUMPAT", "x")
    assert r.spublish(prefix + ":s", "only shard") == 1
    message = wait_message(p2)
    assert (message["type"], message["data"]) == ("smessage", b"only shard")
    p1.close()
    p2.close()
    assert harness.wait_until(lambda: r.pubsub_channels(prefix + "*") == [], 5)


def keyspace_events(port: int, prefix: str, writes=None, flags="KEA") -> list[tuple[bytes, bytes]]:
    """The notifications a fixed series of writes causes on a server, in order."""
    r = redis.Redis(port=port)
    r.config_set("notify-keyspace-events", flags)
    p = r.pubsub()
    p.psubscribe("__key*__:*")
    p.get_message(timeout=2)
    writes = writes or [
        ("SET", f"{prefix}s", "1"), ("SET", f"{prefix}s", "2", "EX", "100"), ("INCR", f"{prefix}n"),
        ("APPEND", f"{prefix}s", "x"), ("EXPIRE", f"{prefix}s", "50"), ("PERSIST", f"{prefix}s"),
        ("RENAME", f"{prefix}s", f"{prefix}t"), ("DEL", f"{prefix}t", f"{prefix}missing"),
        ("RPUSH", f"{prefix}l", "a", "b"), ("LPOP", f"{prefix}l"), ("RPOP", f"{prefix}l"),
        ("HSET", f"{prefix}h", "f", "v"), ("HDEL", f"{prefix}h", "nope"), ("HDEL", f"{prefix}h", "f"),
        ("SADD", f"{prefix}set", "m"), ("SADD", f"{prefix}set", "m"), ("SREM", f"{prefix}set", "m"),
        ("ZADD", f"{prefix}z", "1", "m"), ("ZINCRBY", f"{prefix}z", "2", "m"), ("ZREM", f"{prefix}z", "m"),
        ("MSET", f"{prefix}a", "1", f"{prefix}b", "2"), ("EXPIRE", f"{prefix}a", "-1"),
        ("UNLINK", f"{prefix}b"),
    ]
    for args in writes:
        r.execute_command(*args)
    events = []
    while True:
        message = p.get_message(timeout=0.5)
        if message is None:
            break
        if message["type"] == "pmessage":
            events.append((message["channel"], message["data"]))
    p.close()
    r.config_set("notify-keyspace-events", "")
    return events


def test_keyspace_notifications_are_the_events_redis_publishes(resp_server, real_redis_port):
    prefix = harness.unique("ks") + ":"
    expected = keyspace_events(real_redis_port, prefix)
    assert (f"__keyevent@0__:rename_to".encode(), f"{prefix}t".encode()) in expected
    assert keyspace_events(resp_server.resp_port, prefix) == expected


def test_new_key_events_are_the_ones_redis_publishes(resp_server, real_redis_port):
    """Class `n` (`new`) was not told, and Redis's pubsub unit waited for ever on "new key
    test". A key a command creates is told as `new` before the command's own event; a second
    write of it is not."""
    prefix = harness.unique("new") + ":"
    writes = [
        ("SET", f"{prefix}a", "1"), ("SET", f"{prefix}a", "2"), ("SET", f"{prefix}b", "1"),
        ("LPUSH", f"{prefix}l", "x"), ("LPUSH", f"{prefix}l", "y"), ("HSET", f"{prefix}h", "f", "v"),
        ("SADD", f"{prefix}s", "m"), ("ZADD", f"{prefix}z", "1", "m"), ("INCR", f"{prefix}n"),
        ("RENAME", f"{prefix}b", f"{prefix}c"), ("DEL", f"{prefix}a"), ("SET", f"{prefix}a", "3"),
    ]
    for flags in ("En", "KEAn"):
        expected = keyspace_events(real_redis_port, prefix, writes, flags)
        assert (b"__keyevent@0__:new", f"{prefix}a".encode()) in expected
        assert keyspace_events(resp_server.resp_port, prefix, writes, flags) == expected
        redis.Redis(port=real_redis_port).delete(*[f"{prefix}{k}" for k in "abclhszn"])
        resp_server.redis().delete(*[f"{prefix}{k}" for k in "abclhszn"])


def test_key_miss_events_are_the_ones_redis_publishes(resp_server, real_redis_port):
    """Class `m` (`keymiss`) was accepted and never told. A read command that looks up a key
    and finds nothing tells it (Redis's `lookupKeyRead`); a write's lookup (SETBIT, LMOVE's
    source, SMOVE) and OBJECT do not, and a key that is there is no miss."""
    prefix = harness.unique("miss") + ":"
    missing = f"{prefix}gone"
    reads = [
        ("GET", missing), ("STRLEN", missing), ("MGET", missing, f"{prefix}there"),
        ("GETRANGE", missing, "0", "1"), ("EXISTS", missing), ("TYPE", missing),
        ("TTL", missing), ("PEXPIRETIME", missing), ("DUMP", missing),
        ("GETBIT", missing, "3"), ("BITCOUNT", missing), ("BITPOS", missing, "1"),
        ("BITFIELD_RO", missing, "GET", "u4", "0"), ("HGET", missing, "f"), ("HGETALL", missing),
        ("LRANGE", missing, "0", "-1"), ("LLEN", missing), ("SMEMBERS", missing),
        ("SISMEMBER", missing, "m"), ("ZSCORE", missing, "m"), ("ZRANGE", missing, "0", "-1"),
        ("XLEN", missing), ("GEOPOS", missing, "m"), ("SINTER", missing, f"{prefix}set"),
        ("OBJECT", "ENCODING", missing), ("SETBIT", f"{prefix}bits", "1", "1"),
        ("LMOVE", missing, f"{prefix}list", "LEFT", "RIGHT"),
        ("SMOVE", missing, f"{prefix}set", "m"), ("GET", f"{prefix}there"),
    ]
    setup = [("SET", f"{prefix}there", "v"), ("SADD", f"{prefix}set", "m")]
    for port in (real_redis_port, resp_server.resp_port):
        redis.Redis(port=port).execute_command(*setup[0])
        redis.Redis(port=port).execute_command(*setup[1])
    expected = keyspace_events(real_redis_port, prefix, reads, "KEm")
    assert (b"__keyevent@0__:keymiss", missing.encode()) in expected
    assert (b"__keyspace@0__:" + missing.encode(), b"keymiss") in expected
    assert keyspace_events(resp_server.resp_port, prefix, reads, "KEm") == expected
    assert keyspace_events(resp_server.resp_port, prefix, reads, "KEA") == [], "A leaves m out"
    for port in (real_redis_port, resp_server.resp_port):
        redis.Redis(port=port).delete(f"{prefix}there", f"{prefix}set", f"{prefix}bits")


def expiry_events(r: redis.Redis, prefix: str) -> list[tuple[bytes, bytes]]:
    """The `x` class events of two keys given a 1 s expiry, one in database 3 (nothing else is
    published: no command names an expiry that the server carries out itself)."""
    r.config_set("notify-keyspace-events", "KEx")
    p = r.pubsub()
    p.psubscribe("__key*__:*")
    p.get_message(timeout=2)
    try:
        r.set(prefix + "a", "1", ex=1)
        other = redis.Redis(port=r.connection_pool.connection_kwargs["port"], db=3)
        other.set(prefix + "b", "2", px=800)
        other.close()
        events = []
        deadline = time.monotonic() + 10
        while len(events) < 4 and time.monotonic() < deadline:
            message = p.get_message(timeout=0.5)
            if message is not None and message["type"] == "pmessage":
                events.append((message["channel"], message["data"]))
        return sorted(events)
    finally:
        p.close()
        r.config_set("notify-keyspace-events", "")


def test_a_key_the_sweep_expires_is_announced_as_redis_announces_it(real_redis_port):
    """Osprey published no `expired` event: an expiry is carried out by the engine's sweep,
    which no command's notification covered (Redis's pubsub unit waited for ever on it). The
    sweep now tells the front end of each key it reclaims on the partitions this node is
    master of."""
    server = harness.start_server(
        namespaces=[harness.namespace("test", nsup_period=1)], tag="osprey-expired-events")
    try:
        prefix = harness.unique("exp") + ":"
        expected = expiry_events(redis.Redis(port=real_redis_port), prefix)
        assert expected == sorted([
            (b"__keyevent@0__:expired", (prefix + "a").encode()),
            (b"__keyevent@3__:expired", (prefix + "b").encode()),
            ((f"__keyspace@0__:{prefix}a").encode(), b"expired"),
            ((f"__keyspace@3__:{prefix}b").encode(), b"expired"),
        ])
        assert expiry_events(server.redis(), prefix) == expected
    finally:
        server.close_clients()
        server.stop()


def test_stream_commands_publish_the_events_redis_publishes(resp_server, real_redis_port):
    """pubsub.tcl "Keyspace notifications: stream events test" waited for ever: stream
    commands published nothing. XGROUP's subcommands tell `xgroup-<subcommand>` when they
    change the group; XREADGROUP, XCLAIM and XAUTOCLAIM tell `xgroup-createconsumer` only when
    they created their consumer; XADD, XDEL, XTRIM and XSETID tell their names."""
    key = harness.unique("ks") + ":stream"
    writes = [
        ("XGROUP", "CREATE", key, "g", "$", "MKSTREAM"), ("XGROUP", "CREATECONSUMER", key, "g", "Bob"),
        ("XADD", key, "1-0", "f", "A"), ("XREADGROUP", "GROUP", "g", "Alice", "STREAMS", key, ">"),
        ("XREADGROUP", "GROUP", "g", "Alice", "STREAMS", key, ">"),
        ("XCLAIM", key, "g", "Mike", "0", "1-0", "FORCE"), ("XGROUP", "DELCONSUMER", key, "g", "Lee"),
        ("XAUTOCLAIM", key, "g", "Bob", "0", "1-0"), ("XGROUP", "DELCONSUMER", key, "g", "Bob"),
        ("XGROUP", "SETID", key, "g", "0"), ("XADD", key, "2-0", "f", "B"), ("XDEL", key, "1-0"),
        ("XDEL", key, "1-0"), ("XTRIM", key, "MAXLEN", "0"), ("XSETID", key, "5-0"),
        ("XGROUP", "DESTROY", key, "g"), ("XGROUP", "DESTROY", key, "g"), ("DEL", key),
    ]
    expected = keyspace_events(real_redis_port, "", writes)
    assert (f"__keyspace@0__:{key}".encode(), b"xgroup-createconsumer") in expected
    assert keyspace_events(resp_server.resp_port, "", writes) == expected


def test_notify_keyspace_events_config(resp_server):
    r = resp_server.redis()
    assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": ""}
    r.config_set("notify-keyspace-events", "KEA")
    assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": "AKE"}
    r.config_set("notify-keyspace-events", "Kl$")
    assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": "$lK"}
    with pytest.raises(redis.ResponseError, match="Invalid event class character"):
        r.config_set("notify-keyspace-events", "Kq")
    r.config_set("notify-keyspace-events", "")


def client_output_limit_disconnections(r) -> int:
    return int(r.info("stats")["client_output_buffer_limit_disconnections"])


def test_a_subscriber_that_never_reads_is_cut_off_while_the_others_go_on(tmp_path):
    """A subscriber whose socket is never read fills its output up to the `pubsub` class's hard
    limit (1 MiB here) and is closed, counted and logged; the publisher never waits, a
    subscriber that reads gets every message, and the server's memory stays bounded."""
    server = harness.start_server(
        namespaces=[harness.namespace("test", allow_ttl_without_nsup=True)],
        resp={"client-output-buffer-limit": "pubsub 1mb 256kb 60"},
        tag="osprey-pubsub-limit",
    )
    try:
        r = server.redis()
        before = client_output_limit_disconnections(r)
        baseline = rss_bytes(server.pid)
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", server.resp_port))
        stalled.sendall(command("SUBSCRIBE", "flood"))
        reader = server.redis().pubsub()
        reader.subscribe("flood")
        reader.get_message(timeout=2)
        assert harness.wait_until(lambda: r.pubsub_numsub("flood") == [(b"flood", 2)], 5)
        payload = b"x" * 10_000
        count = 3000
        received = []

        def read_all():
            while len(received) < count:
                message = reader.get_message(ignore_subscribe_messages=True, timeout=5)
                if message is None:
                    return
                received.append(message["data"])

        thread = threading.Thread(target=read_all)
        thread.start()
        started = time.monotonic()
        peak = 0
        for index in range(count):
            r.publish("flood", payload)
            if index % 500 == 0:
                peak = max(peak, rss_bytes(server.pid))
        publish_s = time.monotonic() - started
        thread.join(timeout=60)
        assert len(received) == count and all(data == payload for data in received)
        assert harness.wait_until(lambda: client_output_limit_disconnections(r) == before + 1, 5)
        assert r.pubsub_numsub("flood") == [(b"flood", 1)]
        assert "output buffer limits" in server.log_text()
        # 30 MB went out; the stalled subscriber held at most about its 1 MiB limit.
        assert peak - baseline < 64 * 1024 * 1024, (baseline, peak)
        assert publish_s < 30
        stalled.close()
        reader.close()
    finally:
        server.close_clients()
        server.stop()


@pytest.fixture(scope="module")
def cluster():
    fabric_ports = [harness.free_port() for _ in range(3)]
    seeds = [f"127.0.0.1:{port}" for port in fabric_ports]
    servers = []
    for index, fabric_port in enumerate(fabric_ports):
        server = harness.OspreyServer(
            {"port": 0},
            [harness.namespace("test", replication_factor=2)],
            tag=f"pubsub-cluster{index}",
            cluster={"node-id": f"D{index + 1}", "fabric-port": fabric_port, "seeds": seeds},
        )
        server.config_path.write_text(
            server.config_path.read_text().replace(
                "[cluster]", f'[cluster]\nmetadata-dir = "{server.dir / "cluster"}"'
            )
        )
        servers.append(server.start())
    wait_formed(servers)
    yield servers
    for server in servers:
        server.stop()


def test_publish_on_one_node_reaches_subscribers_on_every_node(cluster):
    subscribers = []
    for server in cluster:
        p = redis.Redis(port=server.resp_port, socket_timeout=5).pubsub()
        p.subscribe("everywhere")
        p.psubscribe("every*")
        p.get_message(timeout=2)
        p.get_message(timeout=2)
        subscribers.append(p)
    publisher = redis.Redis(port=cluster[1].resp_port, socket_timeout=5)
    # As in Redis Cluster, PUBLISH answers the receivers on the node it ran on.
    assert publisher.publish("everywhere", "one") == 2
    for index in range(20):
        publisher.publish("everywhere", f"n{index}")
    for p in subscribers:
        got = [wait_message(p) for _ in range(42)]
        direct = [m["data"] for m in got if m["type"] == "message"]
        assert direct == [b"one"] + [f"n{index}".encode() for index in range(20)]
        assert len([m for m in got if m["type"] == "pmessage"]) == 21
        p.close()


def test_spublish_reaches_the_shard_channel_subscribers_of_its_master(cluster):
    channel = harness.unique("shard")
    subscriber = None
    for server in cluster:
        p = redis.Redis(port=server.resp_port, socket_timeout=5).pubsub()
        try:
            p.ssubscribe(channel)
            message = p.get_message(timeout=2)
        except redis.ResponseError as error:
            assert "master is another node" in str(error)
            p.close()
            continue
        if message is not None and message["type"] == "ssubscribe":
            subscriber, master = p, server
        else:
            p.close()
    assert subscriber is not None
    elsewhere = next(server for server in cluster if server is not master)
    assert redis.Redis(port=elsewhere.resp_port, socket_timeout=5).spublish(channel, "s") == 1
    message = wait_message(subscriber)
    assert (message["type"], message["data"]) == ("smessage", b"s")
    subscriber.close()

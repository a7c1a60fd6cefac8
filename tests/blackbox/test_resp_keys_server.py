"""Numbered databases, DUMP/RESTORE and the server commands through redis-py: a key in one
database is invisible in another (KEYS, SCAN, DBSIZE, FLUSHDB per database), MOVE and COPY ...
DB move values between them, FLUSHALL empties them all, and an Aerospike client finds database
n's keys in the set `redis-n`; values DUMPed by redis-server 7.0 RESTORE into Osprey and the
other way round for every type; corrupted payloads are refused; error texts match
redis-server's.
"""

from __future__ import annotations

import random
import time

import pytest
import redis

import harness


@pytest.fixture
def key():
    return harness.unique("ks")


def client(server, db: int = 0) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=server.resp_port, db=db, socket_timeout=10)


def error_of(call) -> str:
    with pytest.raises(redis.ResponseError) as caught:
        call()
    return str(caught.value)


# -- databases --------------------------------------------------------------------------------------


def test_a_key_in_one_database_is_invisible_in_another(resp_server, key):
    db0, db1 = client(resp_server, 0), client(resp_server, 1)
    db0.flushall()
    db1.set(key, "one")
    assert db0.get(key) is None
    assert db0.exists(key) == 0
    assert db1.get(key) == b"one"
    db0.set(key, "zero")
    assert db1.get(key) == b"one", "each database holds its own value"
    assert db0.keys("*") == [key.encode()]
    assert db1.keys("*") == [key.encode()]
    db1.hset(key + "h", "f", "v")
    assert sorted(db1.scan_iter("*")) == sorted([key.encode(), (key + "h").encode()])
    assert list(db0.scan_iter("*")) == [key.encode()]
    assert db0.dbsize() == 1
    assert db1.dbsize() == 2
    assert db1.randomkey() in (key.encode(), (key + "h").encode())
    assert client(resp_server, 2).randomkey() is None


def test_flushdb_empties_only_its_database_and_flushall_all(resp_server, key):
    db0, db3 = client(resp_server, 0), client(resp_server, 3)
    db0.set(key, "a")
    db3.set(key, "b")
    db3.flushdb()
    assert db3.dbsize() == 0
    assert db0.get(key) == b"a"
    db3.set(key, "b")
    db0.flushall()
    assert db0.dbsize() == 0
    assert db3.dbsize() == 0


def test_select_changes_the_database_of_the_connection(resp_server, key):
    client(resp_server).set(key, "zero")
    single = redis.Redis(
        host="127.0.0.1", port=resp_server.resp_port, single_connection_client=True
    )
    assert single.execute_command("SELECT", 5) is True
    assert single.get(key) is None
    assert b" db=5 " in single.execute_command("CLIENT", "INFO")
    single.set(key, "five")
    assert client(resp_server, 5).get(key) == b"five"
    assert client(resp_server).get(key) == b"zero"
    single.execute_command("RESET")
    assert single.get(key) == b"zero", "RESET selects database 0"
    assert error_of(lambda: single.execute_command("SELECT", 16)) == "DB index is out of range"
    assert error_of(lambda: single.execute_command("SELECT", "x")) == (
        "value is not an integer or out of range"
    )
    single.close()


def test_move_moves_a_key_with_its_expiry_unless_the_target_has_it(resp_server, key):
    db0, db1 = client(resp_server, 0), client(resp_server, 1)
    db0.set(key, "v", ex=100)
    assert db0.move(key, 1) == 1
    assert db0.exists(key) == 0
    assert db1.get(key) == b"v"
    assert 90 < db1.ttl(key) <= 100
    assert db0.move(key, 1) == 0, "missing in the source"
    db0.rpush(key, "x")
    assert db0.move(key, 1) == 0, "present in the target"
    assert db0.lrange(key, 0, -1) == [b"x"]
    assert error_of(lambda: db0.move(key, 0)) == "source and destination objects are the same"
    assert error_of(lambda: db0.move(key, 16)) == "DB index is out of range"


def test_copy_to_another_database(resp_server, key):
    db0, db2 = client(resp_server, 0), client(resp_server, 2)
    db0.zadd(key, {"a": 1, "b": 2})
    assert db0.copy(key, key, destination_db=2) == 1
    assert db2.zrange(key, 0, -1, withscores=True) == [(b"a", 1.0), (b"b", 2.0)]
    assert db0.copy(key, key, destination_db=2) == 0
    db0.zadd(key, {"c": 3})
    assert db0.copy(key, key, destination_db=2, replace=True) == 1
    assert db2.zcard(key) == 3
    assert error_of(lambda: db0.copy(key, key)) == "source and destination objects are the same"


SWAPDB_SEQUENCE = [
    ("SELECT", "0"), ("FLUSHALL",),
    ("SET", "{k}a", "zero"), ("RPUSH", "{k}l", "x"), ("SELECT", "1"), ("SET", "{k}a", "one"),
    ("SET", "{k}b", "only-one"), ("SWAPDB", "0", "1"), ("GET", "{k}a"), ("GET", "{k}b"),
    ("LLEN", "{k}l"), ("DBSIZE",), ("SELECT", "0"), ("GET", "{k}a"), ("GET", "{k}b"),
    ("DBSIZE",), ("SWAPDB", "1", "1"), ("SWAPDB", "0", "99"), ("SWAPDB", "x", "1"),
    ("SWAPDB", "1", "y"), ("SWAPDB", "1", "0"), ("GET", "{k}a"), ("FLUSHALL",),
]


def test_swapdb_answers_as_redis_server(resp_server, redis_server_port, key):
    """Each database's keys change hands at once; errors are Redis's."""
    from test_resp_maxmemory import replies

    commands = [tuple(word.replace("{k}", key) for word in command) for command in SWAPDB_SEQUENCE]
    ours = replies(redis.Redis(port=resp_server.resp_port), commands)
    assert ours == replies(redis.Redis(port=redis_server_port), commands)


def test_swapdb_aborts_transactions_watching_keys_it_changes(resp_server, redis_server_port, key):
    """As Redis's SWAPDB: a watched key of either database that exists in one of them aborts
    EXEC; one missing from both does not."""
    for port in (resp_server.resp_port, redis_server_port):
        watcher = redis.Redis(host="127.0.0.1", port=port, single_connection_client=True)
        other = redis.Redis(host="127.0.0.1", port=port)
        outcomes = []
        for present_in in (0, 1, None):
            other.flushall()
            if present_in is not None:
                redis.Redis(host="127.0.0.1", port=port, db=present_in).set(key, "v")
            watcher.execute_command("WATCH", key)
            other.swapdb(0, 1)
            watcher.execute_command("MULTI")
            watcher.execute_command("PING")
            outcomes.append(watcher.execute_command("EXEC"))
        assert outcomes[0] is None and outcomes[1] is None, port
        assert outcomes[2] is not None, port
        other.flushall()
        watcher.close()


def test_a_client_blocked_on_a_database_is_served_by_the_swap(resp_server, key):
    """BLPOP on db 0 waits; SWAPDB brings db 1's list: the client is served at once."""
    import threading

    client(resp_server, 1).rpush(key, "from-one")
    blocked = client(resp_server, 0)
    got = {}
    thread = threading.Thread(target=lambda: got.update(reply=blocked.blpop([key], timeout=5)))
    thread.start()
    time.sleep(0.3)
    client(resp_server).swapdb(0, 1)
    thread.join()
    assert got["reply"] == (key.encode(), b"from-one")
    client(resp_server).swapdb(0, 1)


def test_the_order_survives_a_restart_on_durable_storage(tmp_path, key):
    """The swap is kept in a record of the namespace (set `<set>-databases`), written before
    the reply: a restart on the same files keeps each database's keys where SWAPDB put them."""
    storage = harness.device_storage([tmp_path / "data.dat"], filesize=64 << 20)
    server = harness.start_server(
        service={},
        namespaces=[harness.namespace("test", storage_engine=storage)],
        tag="osprey-swapdb-restart",
    )
    try:
        client(server, 0).set(key, "zero")
        client(server, 3).set(key, "three")
        client(server, 0).swapdb(0, 3)
        assert client(server, 0).get(key) == b"three"
        server.stop()
        server.start()
        assert client(server, 0).get(key) == b"three"
        assert client(server, 3).get(key) == b"zero"
        order = server.client().get(("test", "redis-databases", "order"))[2]
        assert order["value"].split(",")[:4] == ["3", "1", "2", "0"]
    finally:
        server.close_clients()
        server.stop()


def test_info_keyspace_lists_each_database(resp_server, key):
    db0 = client(resp_server)
    db0.flushall()
    db0.set(key, "a")
    client(resp_server, 7).set(key, "b")
    client(resp_server, 7).set(key + "2", "b")
    keyspace = db0.info("keyspace")
    assert keyspace["db0"]["keys"] == 1
    assert keyspace["db7"]["keys"] == 2
    assert db0.config_get("databases") == {"databases": "16"}


def test_an_aerospike_client_finds_database_n_in_set_redis_n(resp_server, key):
    client(resp_server, 4).set(key, "four")
    record = resp_server.client().get(("test", "redis-4", key))
    assert record[2] == {"value": "four"}


def test_keyspace_notifications_name_the_database(resp_server, key):
    db6 = client(resp_server, 6)
    db6.config_set("notify-keyspace-events", "KEA")
    try:
        pubsub = db6.pubsub()
        pubsub.psubscribe("__key*@6__:*")
        assert pubsub.get_message(timeout=5)["type"] == "psubscribe"
        db6.set(key, "x")
        channels = set()
        for _ in range(2):
            message = pubsub.get_message(timeout=5)
            channels.add(message["channel"])
        assert channels == {f"__keyspace@6__:{key}".encode(), b"__keyevent@6__:set"}
        pubsub.close()
    finally:
        db6.config_set("notify-keyspace-events", "")


def test_aerospike_clients_writes_are_notified_to_redis_subscribers(resp_server, key):
    """Keyspace notifications for writes from either protocol: an Aerospike client's put of a
    new record (sent with its key) is `new` then `write`, a put of an existing one `write`, a
    delete `del`, each on the database its set is; a record sent by digest alone has no key
    name to notify, and nothing is published."""
    import aerospike

    db2 = client(resp_server, 2)
    db2.config_set("notify-keyspace-events", "KEgn")
    aero = resp_server.client()
    send_key = {"key": aerospike.POLICY_KEY_SEND}
    try:
        pubsub = db2.pubsub()
        pubsub.psubscribe("__keyspace@2__:*")
        assert pubsub.get_message(timeout=5)["type"] == "psubscribe"
        aero.put(("test", "redis-2", key), {"value": "a"}, policy=send_key)
        aero.put(("test", "redis-2", key), {"value": "b"}, policy=send_key)
        aero.remove(("test", "redis-2", key), policy=send_key)
        aero.put(("test", "redis-2", key + "-digest-only"), {"value": "c"})
        aero.put(("test", "redis-2", 42), {"value": "d"}, policy=send_key)
        events = []
        while (message := pubsub.get_message(timeout=2)) is not None:
            events.append((message["channel"].decode(), message["data"]))
        prefix = "__keyspace@2__:"
        assert events == [
            (prefix + key, b"new"), (prefix + key, b"write"), (prefix + key, b"write"),
            (prefix + key, b"del"), (prefix + "42", b"new"), (prefix + "42", b"write"),
        ]
        pubsub.close()
    finally:
        db2.config_set("notify-keyspace-events", "")
        aero.remove(("test", "redis-2", key + "-digest-only"))
        aero.remove(("test", "redis-2", 42))


def test_a_transaction_and_a_script_run_in_the_session_database(resp_server, key):
    db8 = client(resp_server, 8)
    with db8.pipeline(transaction=True) as pipe:
        pipe.set(key, "t").get(key)
        assert pipe.execute() == [True, b"t"]
    assert db8.eval("return redis.call('GET', KEYS[1])", 1, key) == b"t"
    assert client(resp_server).get(key) is None
    # A script's SELECT lasts until the script ends, as in Redis 7.
    assert db8.eval("redis.call('SELECT', 9); return redis.call('SET', KEYS[1], 'n')", 1, key)
    assert client(resp_server, 9).get(key) == b"n"
    assert db8.get(key) == b"t"


# -- DUMP and RESTORE -------------------------------------------------------------------------------


def fill_every_type(r: redis.Redis, prefix: str) -> dict[str, object]:
    """Writes one key of each type, small (compact encodings in redis-server) and large
    (its plain ones), and answers how to read each back."""
    r.set(prefix + "s", "hello")
    r.set(prefix + "int", "-70000")
    r.set(prefix + "long", "a" * 300 + "b" * 300)
    r.rpush(prefix + "l", "a", "b", "12", "-5000", "x" * 300)
    r.rpush(prefix + "biglist", *[f"e{i}" for i in range(1000)])
    r.sadd(prefix + "iset", 1, 2, 3, -100000)
    r.sadd(prefix + "set", "a", "b", "c")
    r.sadd(prefix + "bigset", *[f"m{i}" for i in range(300)])
    r.zadd(prefix + "z", {"a": 1.5, "b": -2, "c": 100})
    r.zadd(prefix + "bigz", {f"m{i}": i / 3 for i in range(300)})
    r.hset(prefix + "h", mapping={"f": "v", "n": "42"})
    r.hset(prefix + "bigh", mapping={f"f{i}": "v" * (i % 70) for i in range(300)})
    return {
        "s": lambda c, k: c.get(k),
        "int": lambda c, k: c.get(k),
        "long": lambda c, k: c.get(k),
        "l": lambda c, k: c.lrange(k, 0, -1),
        "biglist": lambda c, k: c.lrange(k, 0, -1),
        "iset": lambda c, k: c.smembers(k),
        "set": lambda c, k: c.smembers(k),
        "bigset": lambda c, k: c.smembers(k),
        "z": lambda c, k: c.zrange(k, 0, -1, withscores=True),
        "bigz": lambda c, k: c.zrange(k, 0, -1, withscores=True),
        "h": lambda c, k: c.hgetall(k),
        "bigh": lambda c, k: c.hgetall(k),
    }


def test_dumps_of_redis_server_restore_into_osprey(resp_server, redis_server_port, key):
    real = redis.Redis(port=redis_server_port, socket_timeout=10)
    ours = client(resp_server)
    readers = fill_every_type(real, key)
    for suffix, read in readers.items():
        payload = real.dump(key + suffix)
        assert ours.restore(key + suffix, 0, payload) == b"OK", suffix
        assert read(ours, key + suffix) == read(real, key + suffix), suffix
        assert ours.type(key + suffix) == real.type(key + suffix)


def test_dumps_of_osprey_restore_into_redis_server(resp_server, redis_server_port, key):
    real = redis.Redis(port=redis_server_port, socket_timeout=10)
    ours = client(resp_server)
    readers = fill_every_type(ours, key)
    for suffix, read in readers.items():
        payload = ours.dump(key + suffix)
        assert real.restore(key + suffix + "back", 0, payload) == b"OK", suffix
        assert read(real, key + suffix + "back") == read(ours, key + suffix), suffix


def test_restore_options_and_errors_match_redis_server(resp_server, redis_server_port, key):
    real = redis.Redis(port=redis_server_port, socket_timeout=10)
    ours = client(resp_server)
    for r in (real, ours):
        r.set(key, "v")
        r.set(key + "src", "payload")
    payload = real.dump(key + "src")
    corrupted = payload[:-1] + bytes([payload[-1] ^ 0xFF])
    newer = payload[:-10] + b"\x0b\x00" + payload[-8:]
    truncated = payload[:5]
    calls = [
        ("RESTORE", key, 0, payload),
        ("RESTORE", key + "n", -1, payload),
        ("RESTORE", key + "n", "x", payload),
        ("RESTORE", key + "n", 0, corrupted),
        ("RESTORE", key + "n", 0, newer),
        ("RESTORE", key + "n", 0, truncated),
        ("RESTORE", key + "n", 0, payload, "IDLETIME", -1),
        ("RESTORE", key + "n", 0, payload, "FREQ", 256),
        ("RESTORE", key + "n", 0, payload, "IDLETIME", 1, "FREQ", 1),
        ("RESTORE", key + "n", 0, payload, "BOGUS"),
        ("OBJECT", "FOO", key),
        ("OBJECT", "ENCODING"),
        ("OBJECT", "FREQ", key),
        ("MEMORY", "FOO"),
        ("MOVE", key, "x"),
        ("MOVE", key, 99),
        ("SELECT", 99999999999),
        ("SWAPDB", 0, "x"),
        ("COPY", key, key + "c", "DB", 99),
    ]
    for call in calls:
        answers = []
        for r in (real, ours):
            try:
                answers.append(("ok", r.execute_command(*call)))
            except redis.ResponseError as error:
                answers.append(("error", str(error)))
        assert answers[0] == answers[1], call
    for r in (real, ours):
        assert r.exists(key + "n") == 0, "nothing restored by a refused payload"


def test_restore_replace_ttl_and_absttl(resp_server, key):
    ours = client(resp_server)
    ours.rpush(key, "a", "b")
    payload = ours.dump(key)
    assert error_of(lambda: ours.restore(key, 0, payload)) == "BUSYKEY Target key name already exists."
    assert ours.restore(key, 5000, payload, replace=True) == b"OK"
    assert 0 < ours.pttl(key) <= 5000
    assert ours.lrange(key, 0, -1) == [b"a", b"b"]
    assert ours.restore(key + "past", 1000, payload, absttl=True) == b"OK"
    assert ours.exists(key + "past") == 0, "an absolute TTL in the past stores nothing"
    assert ours.dump(key + "missing") is None


def test_random_payloads_are_refused_and_the_server_keeps_serving(resp_server, key):
    ours = client(resp_server)
    rng = random.Random(26)
    for _ in range(200):
        payload = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        with pytest.raises(redis.ResponseError):
            ours.restore(key, 0, payload)
    assert ours.exists(key) == 0
    assert ours.ping() is True


# -- OBJECT and MEMORY --------------------------------------------------------------------------------


def test_object_answers_osprey_encodings_idletime_and_refcount(resp_server, key):
    ours = client(resp_server)
    ours.set(key + "s", "text")
    ours.incr(key + "i")
    ours.hset(key + "h", "f", "v")
    ours.rpush(key + "l", "a")
    ours.sadd(key + "set", "a")
    ours.zadd(key + "z", {"a": 1})
    encodings = {
        "s": b"raw",
        "i": b"int",
        "h": b"hashtable",
        "l": b"deque",
        "set": b"hashtable",
        "z": b"btree",
    }
    for suffix, encoding in encodings.items():
        assert ours.object("encoding", key + suffix) == encoding, suffix
    assert ours.object("encoding", key + "missing") is None
    assert ours.object("refcount", key + "s") == 1
    assert 0 <= ours.object("idletime", key + "s") <= 5
    assert error_of(lambda: ours.object("freq", key + "s")).startswith(
        "An LFU maxmemory policy is not selected"
    )
    help_lines = ours.execute_command("OBJECT", "HELP")
    assert help_lines[0].startswith(b"OBJECT <subcommand>")


def test_memory_usage_grows_with_the_value(resp_server, key):
    ours = client(resp_server)
    ours.set(key, "x")
    small = ours.memory_usage(key)
    ours.set(key, "x" * 10_000)
    assert ours.memory_usage(key) >= small + 10_000 - 1
    ours.rpush(key + "l", *["y" * 100] * 100)
    assert ours.memory_usage(key + "l") >= 100 * 100
    assert ours.memory_usage(key + "missing") is None


def test_streams_live_in_the_selected_database(r):
    """A stream written in database 5 is read there, blocks and wakes there, and is invisible
    from database 0 (the stream commands name their keys through the session's database)."""
    r.execute_command("SELECT", 5)
    r.delete("events")
    first = r.xadd("events", {"n": "1"})
    assert r.xrange("events") == [(first, {b"n": b"1"})]
    r.execute_command("SELECT", 0)
    assert r.exists("events") == 0
    assert r.xlen("events") == 0
    r.execute_command("SELECT", 5)
    assert r.xlen("events") == 1
    r.delete("events")

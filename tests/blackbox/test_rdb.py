"""Redis RDB files both ways, against a real redis-server 7.0.

A redis-server started here (its own port and `dir`) is given every type Osprey serves, in
several databases, with expiries; its SAVE is loaded by `osprey` at start-up (`[resp]
load-rdb`), and every key is compared through redis-py with what redis-server answers: TYPE,
the whole value, PTTL within a second, XINFO STREAM FULL and XPENDING for streams, PFCOUNT
and the bytes for HyperLogLogs. The other way, Osprey's SAVE is loaded by a second
redis-server and compared key by key with Osprey. Files that cannot be taken (a flipped byte,
a truncated file, a future version, a module's value) stop start-up with the reason, and
a data directory on a device is left as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest
import redis

import harness

# Redis 7.0 keeps a list node as a listpack up to 8 KiB (`list-max-listpack-size -2`): a
# longer element is a plain node.
LARGE_ELEMENT_BYTES = 20_000
# PTTL is whole seconds in Osprey (Aerospike void times): up to a second early.
PTTL_TOLERANCE_MS = 1_500


@contextlib.contextmanager
def redis_server(directory: Path, dbfilename: str = "dump.rdb") -> Iterator[redis.Redis]:
    """A redis-server on a free port, its files in `directory`, loading `dbfilename` there if
    it exists; yields a client of database 0."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed (cargo xtask ci installs it)", pytrace=False)
    port = harness.free_port()
    log = directory / f"redis-{port}.log"
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(directory), "--dbfilename", dbfilename, "--logfile", str(log)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except (redis.ConnectionError, redis.BusyLoadingError):
                if process.poll() is not None:
                    pytest.fail(f"redis-server exited: {log.read_text(errors='replace')}")
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        yield client
    finally:
        process.terminate()
        process.wait(timeout=20)


def db(client: redis.Redis, number: int) -> redis.Redis:
    kwargs = client.connection_pool.connection_kwargs
    return redis.Redis(host=kwargs["host"], port=kwargs["port"], db=number, socket_timeout=30)


def fill_every_type(r: redis.Redis) -> None:
    """Database 0: every type, small and large encodings; 1 and 5: a few keys with expiries."""
    r.set("str", "hello")
    r.set("int", 12345)
    r.set("neg", -7)
    r.set("binary", b"\x00\xff\x01bytes")
    r.set("lzf", "abc" * 10_000)
    r.set("ttl", "soon", px=300_000)
    r.set("expired", "gone", px=200)
    r.rpush("list-small", "a", "b", "3", "-4")
    r.rpush("list-large", *[f"element-{i}" for i in range(3000)])
    r.rpush("list-plain", "x" * LARGE_ELEMENT_BYTES, "y", "z" * 100)
    r.sadd("set-small", "a", "b", "c")
    r.sadd("set-intset", *range(-50, 50))
    r.sadd("set-large", *[f"member-{i}" for i in range(2000)])
    r.zadd("zset-small", {"a": 1, "b": 2.5, "c": -3})
    r.zadd("zset-large", {f"m{i}": i * 0.5 for i in range(1000)})
    r.hset("hash-small", mapping={"f": "v", "n": 7})
    r.hset("hash-large", mapping={f"field-{i}": f"value-{i}" for i in range(1000)})
    r.pexpire("hash-large", 600_000)
    r.pfadd("hll-sparse", *[f"e{i}" for i in range(100)])
    r.pfadd("hll-dense", *[f"e{i}" for i in range(20_000)])
    r.setbit("bitmap", 7, 1)
    r.setbit("bitmap", 1000, 1)
    r.geoadd("geo", (13.361389, 38.115556, "Palermo"), (15.087269, 37.502669, "Catania"))
    fill_streams(r)
    one, five = db(r, 1), db(r, 5)
    one.set("one", "1", px=400_000)
    one.rpush("one-list", "a")
    five.hset("five", "f", "v")
    r.function_load(
        "#!lua name=rdblib\nredis.register_function('rdbfunc', function(keys, args) return 7 end)")


def fill_streams(r: redis.Redis) -> None:
    for i in range(250):
        fields = {"n": i} if i % 3 else {"n": i, "extra": "x" * (i % 7)}
        r.xadd("stream", fields, id=f"{1000 + i // 2}-{i % 2}")
    r.xdel("stream", "1001-0", "1050-1")
    r.xgroup_create("stream", "workers", id="0")
    r.xreadgroup("workers", "alice", {"stream": ">"}, count=10)
    r.xreadgroup("workers", "bob", {"stream": ">"}, count=5)
    r.xack("stream", "workers", "1000-0")
    r.xgroup_create("stream", "late", id="$")
    r.xgroup_createconsumer("stream", "late", "idle")
    r.xadd("stream-trimmed", {"a": 1}, id="5-0")
    r.xadd("stream-trimmed", {"a": 2}, id="6-0")
    r.xdel("stream-trimmed", "5-0", "6-0")


def every_key(r: redis.Redis) -> list[bytes]:
    return sorted(r.scan_iter(count=1000))


def value_of(r: redis.Redis, key: bytes):
    kind = r.type(key)
    if kind == b"string":
        return r.get(key)
    if kind == b"list":
        return r.lrange(key, 0, -1)
    if kind == b"set":
        return sorted(r.smembers(key))
    if kind == b"zset":
        return r.zrange(key, 0, -1, withscores=True)
    if kind == b"hash":
        return sorted(r.hgetall(key).items())
    if kind == b"stream":
        return r.xrange(key)
    raise AssertionError(f"{key!r}: unexpected type {kind!r}")


# The fields of XINFO STREAM FULL that both 7.0 and Osprey (which answers as 7.2) have.
STREAM_FIELDS = ["length", "last-generated-id", "max-deleted-entry-id", "entries-added",
                 "recorded-first-entry-id", "entries"]
GROUP_FIELDS = ["name", "last-delivered-id", "entries-read", "lag", "pel-count", "pending"]
CONSUMER_FIELDS = ["name", "seen-time", "pel-count", "pending"]


raw_reply = harness.raw_reply


def as_map(reply) -> dict:
    """A map reply: RESP3's map, or RESP2's flat array of names and values."""
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2]))


def stream_facts(r: redis.Redis, key: bytes) -> dict:
    info = as_map(raw_reply(r, "XINFO", "STREAM", key, "FULL"))
    facts = {f: info[f.encode()] for f in STREAM_FIELDS}
    groups = []
    for group in info[b"groups"]:
        group = as_map(group)
        consumers = []
        for consumer in group[b"consumers"]:
            consumer = as_map(consumer)
            consumers.append({f: consumer[f.encode()] for f in CONSUMER_FIELDS})
        facts_of_group = {f: group[f.encode()] for f in GROUP_FIELDS}
        facts_of_group["consumers"] = consumers
        groups.append(facts_of_group)
        facts["xpending " + group[b"name"].decode()] = r.xpending(key, group[b"name"])
    facts["groups"] = groups
    return facts


def assert_same_keys(expected: redis.Redis, actual: redis.Redis, databases: list[int]) -> None:
    """Every key of `expected` in `databases` is in `actual`, of the same type and value,
    with the same expiry within the tolerance, and `actual` has no other key."""
    for number in databases:
        want, got = db(expected, number), db(actual, number)
        keys = every_key(want)
        assert every_key(got) == keys, f"db {number}"
        for key in keys:
            where = f"db {number} key {key!r}"
            assert got.type(key) == want.type(key), where
            assert value_of(got, key) == value_of(want, key), where
            want_ttl, got_ttl = want.pttl(key), got.pttl(key)
            if want_ttl < 0:
                assert got_ttl == want_ttl, where
            else:
                assert abs(got_ttl - want_ttl) <= PTTL_TOLERANCE_MS, f"{where}: {got_ttl} {want_ttl}"
            if want.type(key) == b"stream":
                assert stream_facts(got, key) == stream_facts(want, key), where
            if key.startswith(b"hll"):
                assert got.pfcount(key) == want.pfcount(key), where


def function_names(r: redis.Redis) -> list:
    return sorted(library[b"library_name"] if isinstance(library, dict)
                  else dict(zip(library[::2], library[1::2]))[b"library_name"]
                  for library in r.function_list())


@pytest.fixture(scope="module")
def redis_dump() -> Iterator[tuple[Path, redis.Redis]]:
    """redis-server's SAVE of every type: the file, and the server that wrote it (still
    running, for comparison)."""
    directory = Path(tempfile.mkdtemp(prefix="rdb-redis-"))
    with redis_server(directory) as r:
        fill_every_type(r)
        assert r.save()
        time.sleep(0.3)  # "expired" has passed; redis-server still holds it until touched.
        yield directory / "dump.rdb", r
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def loaded(redis_dump) -> Iterator[harness.OspreyServer]:
    path, _ = redis_dump
    work = Path(tempfile.mkdtemp(prefix="osprey-rdb-work-"))
    server = harness.start_server(
        service={"work-directory": str(work)},
        namespaces=[harness.namespace("test", allow_ttl_without_nsup=True)],
        tag="osprey-rdb", resp={"load-rdb": str(path)})
    server.work = work
    yield server
    server.stop()
    server.remove_dir()
    shutil.rmtree(work, ignore_errors=True)


def test_a_save_of_redis_server_loads_key_by_key(redis_dump, loaded):
    _, real = redis_dump
    ours = loaded.redis()
    assert real.exists("expired") == 0
    assert ours.exists("expired") == 0, "a key expired in the file is not loaded"
    assert_same_keys(real, ours, [0, 1, 5])
    assert ours.fcall("rdbfunc", 0) == 7
    assert function_names(ours) == function_names(real)
    log = loaded.log_text()
    assert "RDB file loaded" in log
    assert "by_database=db0=" in log and "db1=2" in log and "db5=1" in log, log


def test_a_save_of_osprey_loads_into_redis_server(loaded):
    ours = loaded.redis()
    ours.set("written-by-osprey", "yes", ex=1000)
    ours.xadd("osprey-stream", {"f": "v"})
    db(ours, 2).zadd("db2", {"m": 1})
    directory = loaded.work
    assert ours.config_get("dir")["dir"] == str(directory)
    assert ours.config_set("dbfilename", "from-osprey.rdb")
    before = ours.lastsave()
    time.sleep(1.1)
    assert ours.save()
    assert ours.lastsave() > before
    persistence = ours.info("persistence")
    assert persistence["rdb_bgsave_in_progress"] == 0
    assert persistence["rdb_changes_since_last_save"] == 0
    assert (directory / "from-osprey.rdb").exists()
    with redis_server(directory, "from-osprey.rdb") as real:
        assert_same_keys(ours, real, [0, 1, 2, 5])
        assert function_names(real) == function_names(ours)


def test_bgsave_answers_at_once_and_writes_the_file(loaded):
    ours = loaded.redis()
    directory = loaded.work
    assert ours.config_set("dbfilename", "background.rdb")
    assert ours.bgsave() is True
    harness.wait_until(lambda: ours.info("persistence")["rdb_bgsave_in_progress"] == 0, 20)
    assert ours.info("persistence")["rdb_last_bgsave_status"] == "ok"
    with redis_server(directory, "background.rdb") as real:
        assert_same_keys(ours, real, [0, 1, 5])


def test_dbfilename_must_be_a_file_name(loaded):
    ours = loaded.redis()
    with pytest.raises(redis.ResponseError, match="dbfilename can't be a path, just a filename"):
        ours.config_set("dbfilename", "../elsewhere.rdb")


# -- refusals ---------------------------------------------------------------------------------------


def refusal_of(path: Path, namespaces=None) -> str:
    code, output = harness.run_until_exit(resp={"load-rdb": str(path)}, namespaces=namespaces)
    assert code not in (None, 0), output
    return output


def changed_copy(source: Path, name: str, change) -> Path:
    directory = Path(tempfile.mkdtemp(prefix="rdb-bad-"))
    data = bytearray(source.read_bytes())
    path = directory / name
    path.write_bytes(bytes(change(data)))
    return path


def flip_middle_byte(data: bytearray) -> bytearray:
    data[len(data) // 2] ^= 0x01
    return data


def test_a_flipped_byte_truncation_or_future_version_stops_start_up(redis_dump):
    path, _ = redis_dump
    flipped = changed_copy(path, "flipped.rdb", flip_middle_byte)
    output = refusal_of(flipped)
    assert "flipped.rdb:" in output and ("wrong checksum" in output or "malformed" in output), output
    truncated = changed_copy(path, "truncated.rdb", lambda d: d[: len(d) * 2 // 3])
    assert "truncated.rdb:" in refusal_of(truncated)
    assert "(truncated)" in refusal_of(truncated)
    future = changed_copy(path, "future.rdb", lambda d: d[:5] + b"0012" + d[9:])
    assert "RDB version 12 is newer than the newest Osprey reads" in refusal_of(future)


def module_id(name: str, version: int) -> int:
    charset = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    value = 0
    for character in name:
        value = (value << 6) | charset.index(character)
    return (value << 10) | version


def module_file(directory: Path) -> Path:
    """A file with a string, then a ReJSON value (type 7, its module id), as redis-server with
    the module writes one; the module's data never needs reading."""
    body = b"REDIS0010" + b"\xfe\x00" + b"\x00\x01a\x01b" + b"\x07\x04json"
    body += b"\x81" + module_id("ReJSON-RL", 3).to_bytes(8, "big") + b"\x00\xff" + bytes(8)
    path = directory / "module.rdb"
    path.write_bytes(body)
    return path


def test_a_module_value_stops_start_up_naming_the_key():
    path = module_file(Path(tempfile.mkdtemp(prefix="rdb-module-")))
    output = refusal_of(path)
    assert ("module.rdb: key \"json\" in db 0: module type 'ReJSON-RL' is not something "
            "Osprey stores (at byte 16)") in output, output


def test_the_command_line_option_loads_and_refuses_too():
    path = module_file(Path(tempfile.mkdtemp(prefix="rdb-cli-")))
    directory = Path(tempfile.mkdtemp(prefix="rdb-cli-config-"))
    config = directory / "osprey.toml"
    config.write_text(harness.render_config(dict(harness.SERVICE_DEFAULTS),
                                            [harness.namespace("test")]))
    result = subprocess.run([str(harness.osprey_bin()), "--config", str(config), "--load-rdb",
                             str(path)], capture_output=True, timeout=30)
    assert result.returncode != 0
    assert b"module type 'ReJSON-RL' is not something Osprey stores" in result.stderr


def file_digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.is_file()}


def test_a_refused_file_leaves_a_device_namespace_as_it_was_and_a_good_one_merges(redis_dump):
    """Keys stored on a device before: a refused load changes no byte of the data files; a
    good load replaces the keys the file has and keeps the others."""
    path, real = redis_dump
    data = Path(tempfile.mkdtemp(prefix="rdb-device-"))
    namespaces = [harness.namespace(
        "test", allow_ttl_without_nsup=True,
        storage_engine=harness.device_storage([data / "test.dat"], filesize=64 * 1024 * 1024))]
    server = harness.OspreyServer({}, namespaces, tag="osprey-rdb-device")
    server.start()
    ours = server.redis()
    ours.set("kept", "mine")
    ours.set("str", "will be replaced")
    server.terminate()
    before = file_digests(data)
    flipped = changed_copy(path, "flipped.rdb", flip_middle_byte)
    refusal_of(flipped, namespaces=namespaces)
    assert file_digests(data) == before, "a refused load wrote nothing"
    server.config_path.write_text(harness.render_config(
        dict(harness.SERVICE_DEFAULTS), namespaces, {"load-rdb": str(path)}))
    server.start()
    ours = server.redis()
    assert ours.get("kept") == b"mine"
    assert ours.get("str") == real.get("str")
    assert ours.lrange("list-large", 0, -1) == real.lrange("list-large", 0, -1)
    server.stop()
    server.remove_dir()
    shutil.rmtree(data, ignore_errors=True)

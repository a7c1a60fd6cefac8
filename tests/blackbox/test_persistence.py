"""Device storage: records kept in files survive restarts (graceful and SIGKILL), through the
official Aerospike client and through RESP.

The contract (fixed by the project lead): a namespace with `[namespaces.storage-engine]`
`type = "device"` keeps its records in `files`; at start-up the server rebuilds the namespace
from them (cold start) with each record's newest version, generation, void time and last-update
time; deletes, truncates and expiry stay in force; it logs `cold start: namespace NS loaded N
records from M blocks in X ms` before `osprey ready`. With `commit-to-device = true` every
acknowledged write survives SIGKILL; without it, what was written more than `flush-max-ms` (plus
a margin) before the kill survives. A second server on the same file refuses to start. Writes
fail with OUT_OF_SPACE (8) below `stop-writes-avail-pct` free blocks; reads and deletes go on.

Every restart test runs in three modes: `sigterm` (graceful stop), `sigkill` (no
commit-to-device, killed once `flush-max-ms` plus a margin has passed) and `sigkill-commit`
(commit-to-device, killed at once). Data files live in a temporary directory removed after the
test.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import aerospike
import pytest
from aerospike import exception as ex
from aerospike_helpers.operations import operations as aerospike_ops

import harness

KIB = 1024
MIB = 1024 * KIB

NEVER = (0xFFFFFFFF, -1)  # what the C client reports for void time 0
OUT_OF_SPACE = 8
FLUSH_MARGIN_S = 1.0  # the spec's "small margin" past flush-max-ms for SIGKILL without commit
GAP_S = 0.05  # last-update times are kept in milliseconds: cut-offs leave this much either side

# Storage of the namespace `test` unless a test says otherwise: 256 blocks of 64 KiB.
STORAGE_DEFAULTS: dict[str, Any] = {
    "filesize": 16 * MIB,
    "write_block_size": 64 * KIB,
    "flush_max_ms": 1000,
    "commit_to_device": False,
}

MODES: dict[str, dict[str, Any]] = {
    "sigterm": {"commit_to_device": False, "flush_max_ms": 1000},
    "sigkill": {"commit_to_device": False, "flush_max_ms": 100},
    "sigkill-commit": {"commit_to_device": True, "flush_max_ms": 1000},
}

COLD_START_RE = re.compile(
    r"cold start: namespace (\S+) loaded (\d+) records from (\d+) blocks in (\d+) ms"
)


class DeviceNode:
    """A server whose namespace `test` is stored on files, restarted the way `mode` says."""

    def __init__(self, srv: harness.OspreyServer, mode: str, storage: dict[str, Any]):
        self.srv = srv
        self.mode = mode
        self.storage = storage
        self.client = self.new_client()
        self.restarts = 0

    def new_client(self):
        """A client of the running process whose writes store the user key (so that scans
        return it), closed when the process is stopped."""
        cfg = harness.client_config(self.srv.port)
        cfg["policies"]["write"]["key"] = aerospike.POLICY_KEY_SEND
        c = aerospike.client(cfg)
        c.connect()
        self.srv.clients.append(c)
        return c

    def restart(self) -> None:
        """Stops (SIGTERM, or SIGKILL once what was written is due on the file) and starts on
        the same files; a fresh client replaces the old one."""
        if self.mode == "sigterm":
            self.srv.restart()
        elif self.mode == "sigkill":
            time.sleep(self.storage["flush-max-ms"] / 1000 + FLUSH_MARGIN_S)
            self.srv.kill_and_restart()
        else:
            self.srv.kill_and_restart()
        self.restarts += 1
        self.client = self.new_client()
        assert self.cold_start_loaded() is not None, (
            f"no 'cold start: namespace test loaded N records ...' line after restart "
            f"{self.restarts} ({self.mode}); log:\n{self.srv.log_tail()}"
        )

    def stop_until(self, up_at: float) -> None:
        """Stops the server the way `mode` says and starts it again once `time.monotonic()`
        reaches `up_at`."""
        if self.mode == "sigterm":
            self.srv.stop()
        else:
            if self.mode == "sigkill":
                time.sleep(self.storage["flush-max-ms"] / 1000 + FLUSH_MARGIN_S)
            self.srv.close_clients()
            self.srv.kill()
        time.sleep(max(0.0, up_at - time.monotonic()))
        self.srv.start()
        self.restarts += 1
        self.client = self.new_client()

    def cold_start_loaded(self, ns: str = "test") -> int | None:
        """N of this run's `cold start: namespace NS loaded N records` line."""
        for m in COLD_START_RE.finditer(self.srv.log_text()):
            if m.group(1) == ns:
                return int(m.group(2))
        return None

    def stats(self, ns: str = "test") -> dict[str, str]:
        return harness.ns_stats(self.client, ns)


@pytest.fixture(params=list(MODES))
def mode(request) -> str:
    return request.param


@pytest.fixture
def device():
    """Factory for servers with a device namespace `test` on files in a fresh directory.

    `device(mode, storage={...}, files=1, other_namespaces=[...], resp=None, **ns_settings)`;
    each server is stopped (exit 0 asserted) and its directories removed after the test."""
    started: list[harness.OspreyServer] = []
    dirs: list[Path] = []

    def _start(mode: str = "sigterm", storage: dict[str, Any] | None = None, files: int = 1,
               other_namespaces: list[dict[str, Any]] | None = None, resp: dict[str, Any] | None = None,
               **ns_settings: Any) -> DeviceNode:
        data_dir = Path(tempfile.mkdtemp(prefix="osprey-data-"))
        dirs.append(data_dir)
        settings = {**STORAGE_DEFAULTS, **MODES[mode], **(storage or {})}
        table = harness.device_storage([data_dir / f"test-{i}.dat" for i in range(files)], **settings)
        ns = harness.namespace("test", **{"nsup_period": 1, **ns_settings}, storage_engine=table)
        srv = harness.OspreyServer({}, [*(other_namespaces or []), ns], tag="osprey-device", resp=resp)
        started.append(srv)
        try:
            srv.start()
        except FileNotFoundError as e:
            pytest.fail(str(e), pytrace=False)
        return DeviceNode(srv, mode, table)

    yield _start
    errors = []
    for srv in started:
        srv.close_clients()
        try:
            if srv.alive():
                srv.stop()
        except AssertionError as e:
            errors.append(str(e))
        srv.remove_dir()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    assert not errors, "\n".join(errors)


# -- helpers ----------------------------------------------------------------------------------------


def record_bins(i: int, version: int) -> dict[str, Any]:
    """Bins of every type, derived from (i, version) so that a read names what it returned."""
    return {
        "i": i * 1000 + version,
        "s": f"value-{i}-{version}-" + "x" * (i % 57),
        "b": bytes([i % 256, version % 256]) * (1 + i % 9),
        "f": i + version / 8,
        "l": [i, f"v{version}", [1.5, -2, "z"], None],
        "m": {"i": i, "v": version, "nested": {"k": [1, 2, {"x": "y"}]}},
        "t": version % 2 == 0,
    }


def normalized(bins: dict[str, Any] | None) -> dict[str, Any] | None:
    """The client returns blobs as bytearray: compare them as bytes."""
    if bins is None:
        return None
    return {k: (bytes(v) if isinstance(v, bytearray) else v) for k, v in bins.items()}


def get_or_none(client, key) -> tuple[dict | None, dict | None]:
    """(meta, bins) of a record, or (None, None) when it is not found."""
    try:
        _, meta, bins = client.get(key)
    except ex.RecordNotFound:
        return None, None
    return meta, normalized(bins)


def assert_record(client, key, want_bins: dict[str, Any] | None, want_gen: int | None = None, when: str = ""):
    meta, bins = get_or_none(client, key)
    if want_bins is None:
        assert bins is None, f"{when}: key {key} should be gone, got bins={bins} meta={meta}"
        return
    assert bins is not None, f"{when}: key {key} is missing; expected {want_bins}"
    assert bins == want_bins, f"{when}: key {key}: expected {want_bins}, got {bins}"
    if want_gen is not None:
        assert meta["gen"] == want_gen, f"{when}: key {key}: expected generation {want_gen}, got {meta['gen']}"


def assert_all(client, model: dict[tuple, tuple[dict | None, int | None]], when: str) -> None:
    """Every key of `model` holds (bins, generation); bins None means the key is gone."""
    wrong = []
    for key, (bins, gen) in model.items():
        try:
            assert_record(client, key, bins, gen, when)
        except AssertionError as e:
            wrong.append(str(e))
    assert not wrong, f"{len(wrong)} of {len(model)} keys wrong; first ones:\n" + "\n".join(wrong[:10])


def wait_objects(client, want: int, when: str) -> None:
    """The namespace's object count reaches `want` (records removed in the background)."""
    ok = harness.wait_until(lambda: harness.ns_objects(client, "test") == want, timeout=5.0)
    assert ok, f"{when}: namespace test has {harness.ns_objects(client, 'test')} objects, expected {want}"


def scan_keys(client, set_name: str | None) -> set:
    return {r[0][2] for r in harness.by_digest(harness.scan(client, "test", set_name)).values()}


# -- data, generations, TTLs ------------------------------------------------------------------------


def test_records_of_every_type_and_their_generations_survive_a_restart(device, mode):
    node = device(mode)
    model: dict[tuple, tuple[dict | None, int | None]] = {}
    sets = ["s1", "s2", None]
    for set_index, set_name in enumerate(sets):
        for i in range(40):
            key = ("test", set_name, f"k{i}")
            writes = 1 + (i + set_index) % 4
            for version in range(writes):
                node.client.put(key, record_bins(i, version))
            model[key] = (record_bins(i, writes - 1), writes)
    assert_all(node.client, model, "before restart")
    node.restart()
    assert_all(node.client, model, f"after {mode} restart")
    assert node.cold_start_loaded() == len(model), node.srv.log_tail()
    assert harness.ns_objects(node.client, "test") == len(model)
    assert harness.set_objects(node.client, "test", "s1") == 40
    assert harness.set_objects(node.client, "test", "s2") == 40
    # A write after the restart carries on from the restored generation.
    key = ("test", "s1", "k3")
    node.client.put(key, {"after": 1})
    meta, bins = get_or_none(node.client, key)
    assert meta["gen"] == model[key][1] + 1
    assert bins == {**model[key][0], "after": 1}


def test_user_keys_stored_with_send_key_come_back_after_a_restart(device, mode):
    node = device(mode)
    send = {"key": aerospike.POLICY_KEY_SEND}
    keys = ["alpha", "日本", 12345, -7, 2**62, bytearray(b"\x00\x01blob")]
    for k in keys:
        node.client.put(("test", "sk", k), {"v": 1}, policy=send)
    # A per-call POLICY_KEY_DIGEST (0) does not override the node client's default of sending
    # the key: a plain client writes the records without one.
    plain = node.srv.client()
    for i in range(10):
        plain.put(("test", "sk", f"nokey{i}"), {"v": 2})
    node.restart()
    found = {}
    for (_, _, user_key, digest), _, _ in harness.scan(node.client, "test", "sk"):
        found[bytes(digest)] = user_key
    for k in keys:
        digest = bytes(aerospike.calc_digest("test", "sk", k))
        assert digest in found, f"record with user key {k!r} is missing after restart"
        got = bytes(found[digest]) if isinstance(found[digest], bytearray) else found[digest]
        want = bytes(k) if isinstance(k, bytearray) else k
        assert got == want, f"user key {k!r} came back as {found[digest]!r}"
    for i in range(10):
        digest = bytes(aerospike.calc_digest("test", "sk", f"nokey{i}"))
        assert found.get(digest, "missing") is None, f"nokey{i}: expected no stored key, got {found.get(digest)!r}"


def test_ttls_survive_a_restart_as_void_times(device, mode):
    node = device(mode)
    ttls = {"t1000": 1000, "t100000": 100000, "never": aerospike.TTL_NEVER_EXPIRE, "default": 0}
    for name, ttl in ttls.items():
        node.client.put(("test", "ttl", name), {"n": name}, meta={"ttl": ttl})
    written_at = time.monotonic()
    # Long enough that a TTL reset to its original value at the restart would show.
    time.sleep(2.2)
    node.restart()
    elapsed_s = time.monotonic() - written_at
    for name, ttl in ttls.items():
        meta, bins = get_or_none(node.client, ("test", "ttl", name))
        assert bins == {"n": name}, f"{name}: got {bins}"
        if ttl in (aerospike.TTL_NEVER_EXPIRE, 0):
            assert meta["ttl"] in NEVER, f"{name}: a never-expiring record came back with ttl {meta['ttl']}"
        else:
            # void time = write time + ttl: what is left shrinks with the time gone by.
            low, high = ttl - elapsed_s - 2, ttl - 2
            assert low <= meta["ttl"] <= high, (
                f"{name}: ttl {ttl} written {elapsed_s:.1f}s ago, remaining ttl after restart is "
                f"{meta['ttl']}; expected {low:.0f}..{high:.0f}"
            )


def test_last_update_times_survive_a_restart(device, mode):
    # A truncate with a cut-off after the restart removes exactly what was last updated before
    # it: the restored last-update times are the written ones.
    node = device(mode)
    for i in range(30):
        node.client.put(("test", "lut", f"old{i}"), {"i": i})
    time.sleep(GAP_S)
    cut_ns = time.time_ns()
    time.sleep(GAP_S)
    for i in range(30):
        node.client.put(("test", "lut", f"new{i}"), {"i": i})
    node.restart()
    node.client.truncate("test", "lut", cut_ns)
    assert scan_keys(node.client, "lut") == {f"new{i}" for i in range(30)}


# -- overwrites, deletes, defragmentation -------------------------------------------------------------


def test_overwritten_records_come_back_in_their_last_version_and_deleted_ones_stay_gone(device, mode):
    node = device(mode)
    model: dict[tuple, tuple[dict | None, int | None]] = {}
    for i in range(200):
        key = ("test", "ow", i)
        for version in range(3):
            node.client.put(key, record_bins(i, version))
        model[key] = (record_bins(i, 2), 3)
    for i in range(0, 200, 3):
        node.client.remove(("test", "ow", i))
        model[("test", "ow", i)] = (None, None)
    node.restart()
    assert_all(node.client, model, "after restart 1")

    # Between restarts: delete more, bring some deleted keys back (a new record: generation 1),
    # overwrite others.
    for i in range(1, 200, 5):
        if model[("test", "ow", i)][0] is not None:
            node.client.remove(("test", "ow", i))
            model[("test", "ow", i)] = (None, None)
    for i in range(0, 200, 9):
        node.client.put(("test", "ow", i), record_bins(i, 7))
        model[("test", "ow", i)] = (record_bins(i, 7), 1)
    for i in range(2, 200, 7):
        key = ("test", "ow", i)
        bins, gen = model[key]
        if bins is not None:
            node.client.put(key, record_bins(i, 8))
            model[key] = (record_bins(i, 8), gen + 1)
    for n in (2, 3, 4):
        node.restart()
        assert_all(node.client, model, f"after restart {n}")
    live = sum(1 for bins, _ in model.values() if bins is not None)
    assert harness.ns_objects(node.client, "test") == live
    assert scan_keys(node.client, "ow") == {k[2] for k, (bins, _) in model.items() if bins is not None}


def put_retrying_overload(client, key, bins) -> None:
    """A put; DEVICE_OVERLOAD (18, the write queue is full) is retried for up to 5 s."""
    deadline = time.monotonic() + 5.0
    while True:
        try:
            client.put(key, bins)
            return
        except ex.DeviceOverload:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def churn(node: DeviceNode, model: dict, round_no: int, writes: int) -> None:
    """Overwrites 50 hot keys again and again, adds a cold key (never overwritten) every 10th
    write and deletes every 7th cold key: blocks fill with mostly superseded entries and a few
    live ones, so defragmentation must copy the live ones out to free them."""
    pad = "p" * 900
    for n in range(writes):
        hot = ("test", "hot", n % 50)
        bins = {"r": round_no, "n": n, "pad": pad}
        put_retrying_overload(node.client, hot, bins)
        model[hot] = (bins, None)
        if n % 10 == 0:
            cold_no = n // 10
            cold = ("test", "cold", f"{round_no}-{cold_no}")
            cold_bins = {"r": round_no, "c": cold_no, "pad": pad}
            put_retrying_overload(node.client, cold, cold_bins)
            model[cold] = (cold_bins, 1)
            if cold_no % 7 == 3:
                node.client.remove(cold)
                model[cold] = (None, None)


@pytest.mark.parametrize("mode", ["sigterm", "sigkill"])
def test_deletes_stay_gone_after_defragmentation_and_several_restarts(device, mode):
    # 64 blocks of 64 KiB; each round writes ~6.6 MB, so blocks must be defragmented and reused.
    node = device(mode, storage={"filesize": 4 * MIB, "defrag_sleep_us": 100})
    model: dict[tuple, tuple[dict | None, int | None]] = {}
    for i in range(50):  # deleted first: their tombstones must outlive the blocks they shadow
        key = ("test", "gone", i)
        node.client.put(key, {"i": i, "pad": "g" * 900})
        node.client.remove(key)
        model[key] = (None, None)
    for round_no in range(3):
        churn(node, model, round_no, 6000)
        stats = node.stats()
        assert int(stats["defrag_reads"]) > 0, f"round {round_no}: no defragmentation ran: {stats}"
        assert int(stats["defrag_writes"]) > 0, f"round {round_no}: defragmentation copied nothing: {stats}"
        assert float(stats["device_write_amplification"]) > 1.0, stats
        assert_all(node.client, model, f"round {round_no} before restart")
        node.restart()
        assert_all(node.client, model, f"round {round_no} after restart")
    live = sum(1 for bins, _ in model.values() if bins is not None)
    assert harness.ns_objects(node.client, "test") == live


# -- truncates and expiry -------------------------------------------------------------------------


def test_truncated_sets_stay_gone_after_restarts_and_later_writes_survive(device, mode):
    node = device(mode)
    harness.put_many(node.srv, "test", "tr", ((i, {"i": i}) for i in range(300)))
    harness.put_many(node.srv, "test", "keep", ((i, {"i": i}) for i in range(100)))
    node.client.truncate("test", "tr", 0)
    time.sleep(GAP_S)
    for i in range(0, 300, 10):  # written again after the truncate: new records
        node.client.put(("test", "tr", i), {"again": i})
    # A cut-off truncate on a third set: only what was last updated before the cut-off goes.
    harness.put_many(node.srv, "test", "cut", ((i, {"i": i}) for i in range(100)))
    time.sleep(GAP_S)
    cut_ns = time.time_ns()
    time.sleep(GAP_S)
    for i in range(50, 100):
        node.client.put(("test", "cut", i), {"late": i})
    node.client.truncate("test", "cut", cut_ns)
    for n in (1, 2):
        node.restart()
        assert scan_keys(node.client, "tr") == set(range(0, 300, 10)), f"restart {n}"
        assert scan_keys(node.client, "keep") == set(range(100)), f"restart {n}"
        assert scan_keys(node.client, "cut") == set(range(50, 100)), f"restart {n}"
        assert_record(node.client, ("test", "tr", 10), {"again": 10}, 1, f"restart {n}")
        assert_record(node.client, ("test", "tr", 11), None, None, f"restart {n}")
        assert_record(node.client, ("test", "cut", 3), None, None, f"restart {n}")
        assert_record(node.client, ("test", "cut", 60), {"i": 60, "late": 60}, 2, f"restart {n}")
        wait_objects(node.client, 30 + 100 + 50, f"restart {n}")


def test_a_namespace_truncate_stays_in_force_after_restarts(device, mode):
    node = device(mode)
    for set_name in ("a", "b", None):
        harness.put_many(node.srv, "test", set_name, ((i, {"i": i}) for i in range(100)))
    node.client.truncate("test", None, 0)
    time.sleep(GAP_S)
    node.client.put(("test", "a", "after"), {"v": 1})
    node.client.put(("test", None, "after"), {"v": 2})
    for n in (1, 2):
        node.restart()
        assert scan_keys(node.client, "a") == {"after"}, f"restart {n}"
        assert scan_keys(node.client, "b") == set(), f"restart {n}"
        wait_objects(node.client, 2, f"restart {n}")
        assert_record(node.client, ("test", None, "after"), {"v": 2}, 1, f"restart {n}")
        assert_record(node.client, ("test", None, 5), None, None, f"restart {n}")


def test_expired_records_are_not_loaded(device, mode):
    node = device(mode)
    for i in range(50):  # expire while the server runs (nsup-period 1)
        node.client.put(("test", "exp", f"run{i}"), {"i": i}, meta={"ttl": 1})
    for i in range(50):
        node.client.put(("test", "exp", f"keep{i}"), {"i": i}, meta={"ttl": 10000})
    time.sleep(2.5)
    for i in range(50):  # expire while the server is down
        node.client.put(("test", "exp", f"down{i}"), {"i": i}, meta={"ttl": 3})
    # Down until the `down` records are past their void time.
    node.stop_until(time.monotonic() + 4.2)
    assert node.cold_start_loaded() == 50, (
        f"expected 50 records loaded (the expired ones skipped); log:\n{node.srv.log_tail()}"
    )
    assert scan_keys(node.client, "exp") == {f"keep{i}" for i in range(50)}
    for prefix in ("run", "down"):
        assert_record(node.client, ("test", "exp", f"{prefix}7"), None, None, "after restart")
    assert harness.ns_objects(node.client, "test") == 50


# -- RESP ----------------------------------------------------------------------------------------


def test_records_written_through_resp_survive_a_restart(device, mode):
    # A memory namespace comes first, so RESP uses the device namespace only because
    # [resp] namespace says so.
    node = device(mode, other_namespaces=[harness.namespace("mem")], resp={"namespace": "test"})
    r = node.srv.redis()
    assert r.set("str", "hello") is True
    assert r.set("bin", bytes(range(256))) is True
    assert r.set("ttl", "v", ex=1000) is True
    assert r.incr("counter") == 1 and r.incrby("counter", 41) == 42
    assert r.hset("hash", mapping={"f1": "v1", "f2": "v2", "f3": "3"}) == 3
    assert r.hdel("hash", "f3") == 1
    assert r.rpush("list", "a", "b", "c", "d") == 4
    assert r.lpop("list") == b"a"
    assert r.zadd("zset", {"one": 1, "two": 2.5, "three": -3}) == 3
    assert r.sadd("set", "x", "y", "z") == 3
    assert r.srem("set", "y") == 1
    assert r.set("deleted", "soon") is True
    assert r.delete("deleted") == 1
    node.restart()
    r = node.srv.redis()
    assert r.get("str") == b"hello"
    assert r.get("bin") == bytes(range(256))
    assert 990 <= r.ttl("ttl") <= 1000
    assert r.get("counter") == b"42"
    assert r.ttl("str") == -1
    assert r.hgetall("hash") == {b"f1": b"v1", b"f2": b"v2"}
    assert r.lrange("list", 0, -1) == [b"b", b"c", b"d"]
    assert r.zrange("zset", 0, -1, withscores=True) == [(b"three", -3.0), (b"one", 1.0), (b"two", 2.5)]
    assert r.smembers("set") == {b"x", b"z"}
    assert r.exists("deleted") == 0
    assert r.type("hash") == b"hash" and r.type("zset") == b"zset"
    assert r.dbsize() == 8
    # The data still works as such: an update after the restart applies to the restored value.
    assert r.rpush("list", "e") == 4
    assert r.zincrby("zset", 10, "one") == 11.0
    assert harness.ns_objects(node.client, "mem") == 0


@pytest.mark.parametrize("data_in_memory", [True, False])
def test_bits_and_registers_changed_in_place_survive_a_restart(device, data_in_memory):
    """SETBIT within a string and PFADD raising registers of a dense HyperLogLog change the
    stored bytes in place instead of building the record again. On a device namespace the
    version appended to the file must be the changed one: with the data on the device only,
    the change is made to the copy read back, which is then written; with the data in memory
    too, the general path runs (a change in place could not be put back if the device
    refused it). Both read back whole after a restart."""
    node = device(storage={"data_in_memory": data_in_memory}, resp={"namespace": "test"})
    r = node.srv.redis()
    assert r.set("bits", bytes(64)) is True
    for offset in (3, 100, 511):
        assert r.setbit("bits", offset, 1) == 0
    assert r.setbit("bits", 100, 0) == 1
    assert r.pfadd("hll", *[f"e{i}" for i in range(5000)]) == 1
    assert r.get("hll")[4] == 0, "dense"
    assert r.pfadd("hll", *[f"more{i}" for i in range(300)]) == 1
    count = r.pfcount("hll")  # caches the estimate in the value: read it after
    bits, registers = r.get("bits"), r.get("hll")
    assert bits == b"\x10" + bytes(62) + b"\x01"
    node.restart()
    r = node.srv.redis()
    assert r.get("bits") == bits
    assert r.get("hll") == registers
    assert r.pfcount("hll") == count


def test_keys_alone_from_a_user_key_index_over_records_on_the_device(device):
    """With the data on the device only, a user-key index is rebuilt at a restart from the
    records recovery loaded, each entry stamped with its record's void time; keys-only
    queries (answered from those stamps) then follow TTLs set and cleared, deletes and
    expiry, as WITHBINS (which reads each record back from the file) does."""
    node = device(storage={"data_in_memory": False, "post_write_queue": 0, "flush_max_ms": 50},
                  resp={"namespace": "test"})
    r = node.srv.redis()
    names = [f"dk:{i}" for i in range(8)]
    for name in names[:6]:
        r.set(name, "v")
    r.set(names[6], "v", ex=1)
    r.set(names[7], "v", ex=1000)
    assert r.execute_command("SINDEX.CREATE", "dev_keys", "KEY", "STRING") in (b"OK", "OK")
    node.restart()
    r = node.srv.redis()

    def keys_alone() -> list[bytes]:
        return r.execute_command("SINDEX.QUERY", "dev_keys", "[dk:", "(dk:\xff")

    def keys_looked_up() -> list[bytes]:
        return [row[0] for row in r.execute_command("SINDEX.QUERY", "dev_keys", "[dk:", "(dk:\xff",
                                                    "WITHBINS")]

    deadline = time.monotonic() + 10
    while True:
        try:
            keys_alone()
            break
        except Exception as error:  # noqa: BLE001 - BUSY while the index rebuilds
            assert "still building" in str(error) and time.monotonic() < deadline, error
            time.sleep(0.05)
    time.sleep(0.3)  # past flush-max-ms: every version is on the file
    r.pexpire(names[0], 200)
    r.expire(names[7], 1)
    r.persist(names[7])
    r.delete(names[1])
    assert keys_alone() == keys_looked_up()
    time.sleep(2.2)  # void times count whole seconds; names[6] was born with one second
    expected = [n.encode() for n in names if n not in (names[0], names[1], names[6])]
    assert keys_alone() == keys_looked_up() == expected


# -- data in memory, or on the device only ------------------------------------------------------------


@pytest.mark.parametrize("data_in_memory", [False, True], ids=["data-on-device", "data-in-memory"])
def test_reads_writes_and_scans_see_the_same_records_with_data_on_the_device_or_in_memory(
        device, data_in_memory):
    # post-write-queue 0: once flushed, every read of an older record goes to the file.
    node = device(storage={"data_in_memory": data_in_memory, "post_write_queue": 0, "flush_max_ms": 50},
                  resp={"namespace": "test"})
    c = node.client
    model = {}
    for i in range(300):
        key = ("test", "dm", i)
        c.put(key, {"i": i, "s": f"value-{i}" * 20, "l": [i, "x"], "m": {"k": i}})
        model[key] = {"i": i, "s": f"value-{i}" * 20, "l": [i, "x"], "m": {"k": i}}
    time.sleep(0.3)  # past flush-max-ms: the blocks are on the file
    # Read-modify-writes read the old version back first.
    for i in range(0, 300, 3):
        key = ("test", "dm", i)
        c.operate(key, [
            aerospike_ops.increment("i", 1000),
            aerospike_ops.append("s", "!"),
        ])
        model[key] = {**model[key], "i": i + 1000, "s": model[key]["s"] + "!"}
    for i in range(1, 300, 3):
        key = ("test", "dm", i)
        c.put(key, {"only": i}, policy={"exists": aerospike.POLICY_EXISTS_REPLACE})
        model[key] = {"only": i}
    for key, bins in model.items():
        _, meta, got = c.get(key)
        assert got == bins, f"{key}: {got} != {bins}"
    _, meta, got = c.get(("test", "dm", 0))
    assert meta["gen"] == 2
    rows = c.batch_read([("test", "dm", i) for i in range(0, 300, 7)])
    for row in rows.batch_records:
        assert row.result == 0 and row.record[2] == model[row.key[:3]], row.key
    scanned = {}
    c.query("test", "dm").foreach(lambda rec: scanned.__setitem__(rec[0][2], rec[2]))
    assert scanned == {key[2]: bins for key, bins in model.items()}
    # Touch re-appends the old data with new metadata.
    c.touch(("test", "dm", 2), 500)
    _, meta, got = c.get(("test", "dm", 2))
    assert got == model[("test", "dm", 2)] and meta["gen"] == 2 and 490 <= meta["ttl"] <= 500

    r = node.srv.redis()
    assert r.set("s", "v" * 500) is True and r.rpush("l", *"abcdef") == 6
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    time.sleep(0.3)
    assert r.append("s", "w") == 501 and r.get("s") == b"v" * 500 + b"w"
    assert r.lpop("l") == b"a" and r.lrange("l", 0, -1) == [b"b", b"c", b"d", b"e", b"f"]
    assert r.hincrby("h", "a", 41) == 42 and r.hgetall("h") == {b"a": b"42", b"b": b"2"}
    assert r.set("s", "replaced") is True and r.get("s") == b"replaced"
    assert set(r.keys("*")) == {b"s", b"l", b"h"}

    stats = node.stats()
    assert stats["data-in-memory"] == str(data_in_memory).lower(), stats
    assert int(stats["device_read_errors"]) == 0
    if data_in_memory:
        assert int(stats["device_reads"]) == 0, "data in memory: no read went to the file"
        assert int(stats["data_used_bytes"]) > 300 * 100
    else:
        assert int(stats["device_reads"]) >= 100, stats
        assert int(stats["data_used_bytes"]) == 0, "the index holds no record data"

    node.restart()
    r = node.srv.redis()
    for key, bins in model.items():
        assert node.client.get(key)[2] == bins, key
    assert r.get("s") == b"replaced" and r.hgetall("h") == {b"a": b"42", b"b": b"2"}


def test_memory_holds_only_the_index_when_data_stays_on_the_device(device):
    sizes = {}
    for data_in_memory in (True, False):
        node = device(storage={"data_in_memory": data_in_memory})
        for i in range(2000):
            node.client.put(("test", "mem", i), {"pad": "p" * 1000})
        stats = node.stats()
        sizes[data_in_memory] = int(stats["memory_used_bytes"])
        node.srv.stop()
    assert sizes[True] > 2000 * 1000, sizes
    assert sizes[False] < sizes[True] / 10, f"index only should be far smaller: {sizes}"


def test_a_record_corrupted_on_the_file_is_an_error_never_wrong_data(device):
    node = device(storage={"data_in_memory": False, "post_write_queue": 0, "flush_max_ms": 50})
    c = node.client
    # 600 records of about 250 bytes fill more than two 64 KiB blocks, so the first block is
    # no longer the one being filled (which reads are served from).
    for i in range(600):
        c.put(("test", "cor", i), {"v": f"record-{i:03d}-" + "z" * 200})
    time.sleep(0.3)  # flushed, and no block cached: reads go to the file
    path = Path(node.storage["files"][0])
    image = path.read_bytes()
    at = image.find(b"record-017-")
    assert at > 0 and image.find(b"record-017-", at + 1) == -1
    # Another process changes the file under the server (through the page cache it reads).
    with open(path, "r+b") as f:
        f.seek(at + 3)
        f.write(b"X")
    with pytest.raises(ex.AerospikeError) as failure:
        c.get(("test", "cor", 17))
    assert failure.value.code == 1, f"expected UNKNOWN (1), got {failure.value.code}"
    for i in (16, 18, 40):
        assert c.get(("test", "cor", i))[2] == {"v": f"record-{i:03d}-" + "z" * 200}
    assert int(node.stats()["device_read_errors"]) >= 1
    assert "failed its checksum" in node.srv.log_text()
    # The record can be written over; the new version reads back.
    c.put(("test", "cor", 17), {"v": "new"}, policy={"exists": aerospike.POLICY_EXISTS_REPLACE})
    assert c.get(("test", "cor", 17))[2] == {"v": "new"}


# -- locking, stop-writes, statistics, configuration ---------------------------------------------------


def test_a_second_server_on_the_same_file_refuses_to_start(device):
    node = device()
    node.client.put(("test", "lock", 1), {"v": 1})
    data_file = node.storage["files"][0]
    code, output = harness.run_until_exit(namespaces=node.srv.namespaces)
    assert code is not None, f"a second server started on {data_file} (or hung); output:\n{output[-3000:]}"
    assert code != 0, f"the second server exited with 0; output:\n{output[-3000:]}"
    assert Path(data_file).name in output, f"the refusal does not name the file {data_file}:\n{output[-3000:]}"
    # The first one is unharmed.
    assert node.srv.alive()
    assert get_or_none(node.client, ("test", "lock", 1))[1] == {"v": 1}
    node.client.put(("test", "lock", 2), {"v": 2})
    node.restart()
    assert get_or_none(node.client, ("test", "lock", 2))[1] == {"v": 2}


def fill_until_out_of_space(client, set_name: str, limit: int) -> tuple[list, Exception]:
    """Writes new 2 KiB records until one fails with OUT_OF_SPACE; returns the written keys
    and that error."""
    written = []
    for i in range(limit):
        key = ("test", set_name, i)
        try:
            client.put(key, {"i": i, "pad": "f" * 2048})
        except ex.AerospikeError as e:
            assert e.code == OUT_OF_SPACE, f"write {i} failed with {e.code} ({e.msg}), expected {OUT_OF_SPACE}"
            return written, e
        written.append(key)
    raise AssertionError(f"{limit} writes of 2 KiB into a 512 KiB file never hit OUT_OF_SPACE")


def test_stop_writes_refuses_writes_but_serves_reads_and_deletes(device):
    # 8 blocks of 64 KiB; writes stop when fewer than half of them are free.
    node = device(storage={"filesize": 8 * 64 * KIB, "stop_writes_avail_pct": 50})
    written, err = fill_until_out_of_space(node.client, "full", 2000)
    assert written, "the very first write was refused"
    assert isinstance(err, ex.ServerError), type(err)
    stats = node.stats()
    assert stats["stop_writes"] == "true", stats
    # Updates are writes too.
    with pytest.raises(ex.AerospikeError) as e:
        node.client.put(written[0], {"i": -1})
    assert e.value.code == OUT_OF_SPACE
    # Reads go on.
    for key in written[:: max(1, len(written) // 20)]:
        assert get_or_none(node.client, key)[1] == {"i": key[2], "pad": "f" * 2048}, key
    # Deletes go on.
    for key in written[:10]:
        node.client.remove(key)
        assert get_or_none(node.client, key) == (None, None), key


def test_writes_resume_once_deletes_freed_the_space(device):
    node = device(storage={"filesize": 8 * 64 * KIB, "stop_writes_avail_pct": 50, "flush_max_ms": 100,
                           "defrag_sleep_us": 100})
    written, _ = fill_until_out_of_space(node.client, "full", 2000)
    for key in written:
        node.client.remove(key)

    def write_accepted():
        try:
            node.client.put(("test", "full", "again"), {"v": 1})
            return True
        except ex.AerospikeError as e:
            assert e.code == OUT_OF_SPACE, e
            return False

    assert harness.wait_until(write_accepted, timeout=15.0, interval=0.2), (
        f"writes still refused 15 s after deleting every record: {node.stats()}"
    )
    assert node.stats()["stop_writes"] == "false"


DEVICE_STAT_INTS = [
    "device_total_bytes",
    "device_used_bytes",
    "device_free_pct",
    "device_available_pct",
    "defrag_q",
    "write_q",
    "defrag_reads",
    "defrag_writes",
    "tombstones",
    "device_flushes",
]


def test_device_namespace_reports_its_storage_statistics(device):
    node = device(files=2, storage={"filesize": 4 * MIB, "flush_max_ms": 100},
                  other_namespaces=[harness.namespace("mem")])
    stats = node.stats()
    assert stats.get("storage-engine") == "device", stats
    for name in DEVICE_STAT_INTS:
        assert name in stats, f"{name} missing from namespace/test: {stats}"
        assert re.fullmatch(r"\d+", stats[name]), f"{name}={stats[name]!r} is not a whole number"
    assert int(stats["device_total_bytes"]) == 2 * 4 * MIB
    assert re.fullmatch(r"\d+\.\d{2}", stats["device_write_amplification"]), stats["device_write_amplification"]
    assert stats["stop_writes"] == "false"
    used_before = int(stats["device_used_bytes"])

    for i in range(500):
        node.client.put(("test", "st", i), {"pad": "u" * 2000})
    for i in range(100):
        node.client.remove(("test", "st", i))
    time.sleep(0.1 + FLUSH_MARGIN_S)  # past flush-max-ms: the partial block was flushed
    stats = node.stats()
    total, used = int(stats["device_total_bytes"]), int(stats["device_used_bytes"])
    assert used >= used_before + 400 * 2000, f"device_used_bytes {used} after writing 400 live 2 KB records"
    assert used <= total
    for name in ("device_free_pct", "device_available_pct"):
        assert 0 <= int(stats[name]) <= 100, stats[name]
    assert int(stats["device_available_pct"]) < 100, stats
    assert int(stats["device_flushes"]) > 0, stats
    assert int(stats["tombstones"]) >= 1, f"100 flushed records deleted but no tombstone kept: {stats}"
    assert float(stats["device_write_amplification"]) >= 1.0
    assert stats["stop_writes"] == "false"
    assert harness.ns_stats(node.client, "mem").get("storage-engine") == "memory"


def test_a_memory_namespace_reports_storage_engine_memory(client):
    assert harness.ns_stats(client, "test").get("storage-engine") == "memory"


@pytest.mark.parametrize(
    "table, setting",
    [
        ({"type": "device", "files": [], "filesize": 4 * MIB}, "file"),
        ({"type": "device", "filesize": 4 * MIB}, "file"),
        ({"type": "device", "files": ["FILE"], "filesize": 4 * MIB, "write-block-size": 100000},
         "write-block-size"),
        ({"type": "device", "files": ["FILE"], "filesize": 4 * MIB, "write-block-size": 3 * 64 * KIB},
         "write-block-size"),
        ({"type": "device", "files": ["FILE"], "filesize": 2 * 64 * KIB, "write-block-size": 64 * KIB},
         "filesize"),
        ({"type": "device", "files": ["FILE"], "filesize": 4 * MIB, "stop-writes-avail-pct": 80},
         "stop-writes-avail-pct"),
        ({"type": "flash", "files": ["FILE"], "filesize": 4 * MIB}, "flash"),
    ],
    ids=["empty-files", "no-files", "wbs-not-power-of-two", "wbs-3-blocks", "filesize-under-4-blocks",
         "stop-writes-over-50", "unknown-type"],
)
def test_a_bad_device_configuration_is_refused_naming_the_setting(table, setting):
    data_dir = Path(tempfile.mkdtemp(prefix="osprey-data-"))
    try:
        table = {k: ([str(data_dir / "t.dat")] if v == ["FILE"] else v) for k, v in table.items()}
        ns = harness.namespace("test", nsup_period=1, storage_engine=table)
        code, output = harness.run_until_exit(namespaces=[ns])
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    assert code is not None, f"the server started with storage-engine {table}; output:\n{output[-2000:]}"
    assert code != 0
    assert setting in output, f"the refusal does not name {setting!r}:\n{output[-2000:]}"

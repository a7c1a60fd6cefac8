"""Partition scans through the official client and raw bytes, scan jobs, scan threads.

A scan is a query without a filter (reference 8.2): the client sends PID_ARRAY (partitions from
their start) and DIGEST_ARRAY (partitions to resume strictly after a digest), optionally
MAX_RECORDS; the server streams record messages and ends with a LAST message. Every scan is a job
named by the client's task id (TRID), shown by `query-show` and stopped by `query-abort`
(reference 8.4; server query_job.c, thr_info.c).

Exactness: tests that scan one set use a set no other test writes; tests that scan a whole
namespace use a server of their own. The writers test is randomized: its seed is printed and can
be replayed with OSPREY_TEST_SEED=<seed>.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time

import aerospike
import pytest
from aerospike import exception as ex

import aswire
import harness

# Fields and flags of scan requests (reference 3.2, 4).
INFO3_PARTITION_DONE = 0x04
FIELD_TRID = 7
FIELD_SOCKET_TIMEOUT = 9
FIELD_PID_ARRAY = 11
FIELD_DIGEST_ARRAY = 12
FIELD_MAX_RECORDS = 13

# What ends a scan stopped by `query-abort`: Aerospike's query manager sets the job's result to
# AS_ERR_QUERY_ABORT (15) and conn_query_job_finish sends it in the LAST message
# (server as/src/query/query_manager.c as_query_manager_abort_job, query.c
# conn_query_job_finish -> as_msg_send_fin_timeout(sock, _job->abandoned, ...)). 210 is a
# client-side code (C client AEROSPIKE_ERR_QUERY_ABORTED), never sent by a server.
QUERY_ABORT = 15

N_PARTITIONS = 4096
ALL_PIDS = range(N_PARTITIONS)


def pid_of(digest: bytes) -> int:
    """Partition id of a digest (reference 6): low 12 bits of the first two bytes, little-endian."""
    return (digest[0] | (digest[1] << 8)) & 0x0FFF


def seed_from_env() -> int:
    """Seed of the randomized tests: OSPREY_TEST_SEED, or a fresh one (printed)."""
    seed = int(os.environ.get("OSPREY_TEST_SEED") or random.randrange(1 << 32))
    print(f"seed {seed} (replay with OSPREY_TEST_SEED={seed})")
    return seed


# -- raw scan requests and replies -----------------------------------------------------------------


def pid_array(pids) -> bytes:
    return b"".join(struct.pack("<H", p) for p in pids)


def scan_frame(
    ns: str,
    set_name: str | None = None,
    *,
    pids=ALL_PIDS,
    digests=(),
    trid: int | None = None,
    socket_timeout_ms: int = 10000,
    max_records: int | None = None,
    bins=(),
    nobins: bool = False,
    info3: int = INFO3_PARTITION_DONE,
    raw_fields: list[bytes] | None = None,
) -> bytes:
    """A scan request as the clients build it (go7 setScan, c as_scan_command_init)."""
    if raw_fields is None:
        fields = [aswire.ns_field(ns)]
        if set_name:
            fields.append(aswire.set_field(set_name))
        fields.append(aswire.field(FIELD_TRID, struct.pack(">Q", trid if trid is not None else random.randrange(1, 1 << 63))))
        fields.append(aswire.field(FIELD_SOCKET_TIMEOUT, struct.pack(">I", socket_timeout_ms)))
        if pids is not None and len(pids) > 0:
            fields.append(aswire.field(FIELD_PID_ARRAY, pid_array(pids)))
        if digests:
            fields.append(aswire.field(FIELD_DIGEST_ARRAY, b"".join(bytes(d) for d in digests)))
        if max_records is not None:
            fields.append(aswire.field(FIELD_MAX_RECORDS, struct.pack(">Q", max_records)))
    else:
        fields = raw_fields
    info1 = aswire.INFO1_READ
    if nobins:
        info1 |= aswire.INFO1_NOBINDATA
    ops = [aswire.read_bin(b) for b in bins]
    return aswire.as_msg(fields, ops, info1=info1, info3=info3)


split_messages = aswire.split_messages


class ScanStream:
    """Reads a scan's reply stream message by message."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.last: aswire.Msg | None = None
        self.records: list[aswire.Msg] = []

    def next_frame(self, timeout: float = 10.0) -> None:
        self.sock.settimeout(timeout)
        version, ptype, body = aswire.recv_frame(self.sock)
        assert (version, ptype) == (2, aswire.TYPE_MSG), (version, ptype)
        msgs = split_messages(body)
        for i, m in enumerate(msgs):
            if m.info3 & aswire.INFO3_LAST:
                assert i == len(msgs) - 1, "messages after the LAST message"
                self.last = m
            else:
                self.records.append(m)

    def read_to_end(self, timeout: float = 20.0) -> aswire.Msg:
        deadline = time.monotonic() + timeout
        while self.last is None:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "the scan stream never sent its LAST message"
            self.next_frame(timeout=remaining)
        return self.last


def run_raw_scan(sock: socket.socket, frame: bytes, timeout: float = 20.0) -> tuple[list[aswire.Msg], aswire.Msg]:
    """Sends a scan and reads its whole reply: (record messages, LAST message)."""
    sock.sendall(frame)
    stream = ScanStream(sock)
    last = stream.read_to_end(timeout)
    records = [m for m in stream.records if not (m.info3 & INFO3_PARTITION_DONE)]
    # Partition-done messages are only for partitions that could not be served (reference 8.2);
    # a single node serves them all.
    assert all(m.result_code == 0 for m in stream.records), [m.result_code for m in stream.records if m.result_code]
    return records, last


def field_map(m: aswire.Msg) -> dict[int, bytes]:
    out = {}
    for ftype, data in m.fields:
        assert ftype not in out, f"field {ftype} twice in one record message"
        out[ftype] = data
    return out


def digest_field(m: aswire.Msg) -> bytes:
    return field_map(m)[aswire.FIELD_DIGEST]


def keys_in_partition(ns: str, set_name: str, n: int, start: int = 0) -> tuple[int, list[int]]:
    """`n` integer keys of one partition: scans keys from `start` for a partition that gets n."""
    by_pid: dict[int, list[int]] = {}
    k = start
    while True:
        pid = pid_of(aerospike.calc_digest(ns, set_name, k))
        lst = by_pid.setdefault(pid, [])
        lst.append(k)
        if len(lst) == n:
            return pid, lst
        k += 1


# -- data ------------------------------------------------------------------------------------------


def make_bins(i: int) -> dict:
    bins = {"id": i, "s": f"v{i}", "f": i / 4.0, "b": bytes([i % 256]) * 3}
    if i % 3 == 0:
        bins["tag"] = f"t{i}"
    return bins


def expected_by_digest(ns, set_name, keys, bins_of=make_bins) -> dict[bytes, dict]:
    return {bytes(aerospike.calc_digest(ns, set_name, k)): bins_of(k) for k in keys}


def load(server, set_name, n, start=0, ns="test", send_key=True):
    harness.put_many(server, ns, set_name, ((i, make_bins(i)) for i in range(start, start + n)), send_key=send_key)
    return expected_by_digest(ns, set_name, range(start, start + n))


@pytest.fixture(scope="module")
def nsserver():
    """A server of this module's own: namespace `test` holds exactly what the tests here put."""
    try:
        srv = harness.start_server(tag="osprey-scan")
    except FileNotFoundError as e:
        pytest.fail(str(e), pytrace=False)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def nsdata(nsserver):
    """Records in set `a` (300), set `b` (120) and in no set (60); digest -> (set, key, bins)."""
    model = {}
    for set_name, start, n in (("a", 0, 300), ("b", 1000, 120), (None, 2000, 60)):
        harness.put_many(nsserver, "test", set_name, ((i, make_bins(i)) for i in range(start, start + n)))
        for i in range(start, start + n):
            model[bytes(aerospike.calc_digest("test", set_name or "", i))] = (set_name, i, make_bins(i))
    return model


@pytest.fixture(scope="module")
def nsclient(nsserver):
    return nsserver.client()


# -- scans through the client ----------------------------------------------------------------------


def test_scan_of_a_set_returns_each_record_once_with_its_bins(server, client, uset):
    expected = load(server, uset, 400)
    records = harness.scan(client, "test", uset)
    got = harness.by_digest(records)
    assert set(got) == set(expected)
    for d, (key, meta, bins) in got.items():
        assert bins == expected[d], key
        assert key[0] == "test" and key[1] == uset
        # The raw loader sent the key, so the server stored it and returns it (KEY field).
        assert bytes(aerospike.calc_digest("test", uset, key[2])) == d
        assert meta["gen"] == 1


def test_scan_returns_the_generation_and_no_key_when_none_was_stored(client, uset):
    for i in range(20):
        client.put(("test", uset, i), {"i": i})
    for i in range(5):
        client.put(("test", uset, i), {"i": i + 100})
    got = harness.by_digest(harness.scan(client, "test", uset))
    assert len(got) == 20
    for i in range(20):
        key, meta, bins = got[bytes(aerospike.calc_digest("test", uset, i))]
        assert key[2] is None  # written without POLICY_KEY_SEND: no key stored
        assert meta["gen"] == (2 if i < 5 else 1)
        assert bins == {"i": i + 100 if i < 5 else i}


def test_scan_reports_each_record_s_remaining_ttl(client, uset):
    client.put(("test", uset, "t"), {"a": 1}, meta={"ttl": 1000})
    client.put(("test", uset, "n"), {"a": 2}, meta={"ttl": aerospike.TTL_NEVER_EXPIRE})
    got = {r[2]["a"]: r[1] for r in harness.scan(client, "test", uset)}
    assert 995 <= got[1]["ttl"] <= 1000, got
    assert got[2]["ttl"] in (0xFFFFFFFF, -1), got


@pytest.mark.parametrize("set_index", [False, True])
def test_expired_records_are_skipped_before_any_sweep_removes_them(start_server, set_index):
    # With nsup-period 0 nothing is ever swept: expired records stay in the index, and reads and
    # scans must treat them as absent (Aerospike checks the void time on every read and scan).
    srv = start_server(namespaces=[harness.namespace("test", nsup_period=0, allow_ttl_without_nsup=True)])
    c = srv.client()
    if set_index:
        assert harness.raw_info(srv, "set-config:context=namespace;id=test;set=e;enable-index=true") == "ok"
    # TTL 2: void times are whole seconds, so these expire 1 to 2 s from now.
    harness.put_many(srv, "test", "e", ((i, {"i": i}) for i in range(40)), ttl=2)
    harness.put_many(srv, "test", "e", ((i, {"i": i}) for i in range(40, 60)))
    harness.put_many(srv, "test", "other", ((i, {"i": i}) for i in range(500)))
    assert len(harness.scan(c, "test", "e")) == 60
    survivors = {bytes(aerospike.calc_digest("test", "e", i)) for i in range(40, 60)}
    ok = harness.wait_until(lambda: set(harness.by_digest(harness.scan(c, "test", "e"))) == survivors, 5)
    assert ok, f"{len(harness.scan(c, 'test', 'e'))} records in the scan, want 20"
    pages = harness.paginate(c, "test", "e", 6)
    assert set(harness.by_digest([r for p in pages for r in p])) == survivors
    assert len(harness.scan(c, "test", None)) == 520
    with pytest.raises(ex.RecordNotFound):
        c.get(("test", "e", 0))


def test_client_scan_query_and_foreach_see_the_same_records(server, client, uset):
    expected = load(server, uset, 150)
    via_query = set(harness.by_digest(harness.scan(client, "test", uset)))
    via_scan = set(harness.by_digest(client.scan("test", uset).results()))
    seen = []
    client.query("test", uset).foreach(lambda rec: seen.append(rec))
    via_foreach = set(harness.by_digest(seen))
    assert via_query == via_scan == via_foreach == set(expected)


def test_select_returns_only_the_selected_bins_and_skips_records_without_them(server, client, uset):
    expected = load(server, uset, 90)
    got = harness.by_digest(harness.scan(client, "test", uset, select=["tag"]))
    with_tag = {d for d, b in expected.items() if "tag" in b}
    assert set(got) == with_tag
    for d, (_, _, bins) in got.items():
        assert bins == {"tag": expected[d]["tag"]}

    got = harness.by_digest(harness.scan(client, "test", uset, select=["id", "tag"]))
    assert set(got) == set(expected)
    for d, (_, _, bins) in got.items():
        assert bins == {k: v for k, v in expected[d].items() if k in ("id", "tag")}

    assert harness.scan(client, "test", uset, select=["no-such-bin"]) == []


def test_scan_without_bin_data_returns_metadata_only(server, client, uset):
    expected = load(server, uset, 70)
    client.put(("test", uset, 5), {"id": 5, "again": 1})
    got = harness.by_digest(harness.scan(client, "test", uset, nobins=True))
    assert set(got) == set(expected)
    for d, (key, meta, bins) in got.items():
        assert bins == {}, bins
        assert meta["gen"] == (2 if key[2] == 5 else 1)
    # The scan API's own switch.
    seen = []
    client.scan("test", uset).foreach(lambda rec: seen.append(rec), {}, {"nobins": True})
    assert set(harness.by_digest(seen)) == set(expected)
    assert all(rec[2] == {} for rec in seen)


def test_scan_of_a_set_that_does_not_exist_returns_nothing_and_no_error(client, uset):
    assert harness.scan(client, "test", uset) == []
    # A set whose records were all deleted.
    client.put(("test", uset, 1), {"a": 1})
    client.remove(("test", uset, 1))
    assert harness.scan(client, "test", uset) == []


def test_scan_of_an_unknown_namespace_fails_with_namespace_error(client):
    with pytest.raises(ex.NamespaceNotFound):
        harness.scan(client, "no-such-ns", "s")


def test_max_records_caps_what_one_scan_call_returns(server, client, uset):
    expected = load(server, uset, 500)
    q = client.query("test", uset)
    q.max_records = 37
    got = harness.by_digest(q.results())
    assert len(got) == 37
    assert set(got) <= set(expected)

    got = harness.by_digest(client.scan("test", uset).results({"max_records": 37}))
    assert len(got) == 37
    assert set(got) <= set(expected)

    q = client.query("test", uset)
    q.max_records = 10_000
    assert set(harness.by_digest(q.results())) == set(expected)


@pytest.mark.parametrize("page_size", [1_000, 64, 500, 499])
def test_pages_return_every_record_exactly_once(server, client, uset, page_size):
    n = 500
    expected = load(server, uset, n)
    pages = harness.paginate(client, "test", uset, page_size)
    sizes = [len(p) for p in pages]
    # Each page but the last is full; the last holds the rest (possibly none, when the previous
    # page ended exactly at the last record: the client cannot know before asking once more).
    assert all(s == page_size for s in sizes[:-1]), sizes
    assert sizes[-1] <= page_size, sizes
    assert sum(sizes) == n, sizes
    assert len(pages) in (n // page_size + 1, -(-n // page_size)), sizes
    got = harness.by_digest([r for p in pages for r in p])
    assert set(got) == set(expected)
    for d, rec in got.items():
        assert rec[2] == expected[d]


def test_partition_filter_returns_exactly_the_records_of_its_partitions(server, client, uset):
    n = 3000
    load(server, uset, n)
    pid_by_key = {i: client.get_key_partition_id("test", uset, i) for i in range(n)}
    for i in range(0, n, 97):
        assert pid_by_key[i] == pid_of(aerospike.calc_digest("test", uset, i))

    def keys_of(records):
        keys = [r[0][2] for r in records]
        assert len(keys) == len(set(keys)), "a record came back twice"
        return set(keys)

    # A range of partitions.
    begin, count = 1000, 300
    got = keys_of(client.query("test", uset).results({"partition_filter": {"begin": begin, "count": count}}))
    assert got == {k for k, p in pid_by_key.items() if begin <= p < begin + count}
    assert got  # the range does hold records

    # One partition: the fullest one, and an empty one.
    counts: dict[int, int] = {}
    for p in pid_by_key.values():
        counts[p] = counts.get(p, 0) + 1
    fullest = max(counts, key=counts.get)
    got = keys_of(client.query("test", uset).results({"partition_filter": {"begin": fullest, "count": 1}}))
    assert got == {k for k, p in pid_by_key.items() if p == fullest}
    empty = next(p for p in range(N_PARTITIONS) if p not in counts)
    assert client.query("test", uset).results({"partition_filter": {"begin": empty, "count": 1}}) == []

    # The last partitions and the first.
    for begin, count in ((N_PARTITIONS - 50, 50), (0, 50)):
        got = keys_of(client.scan("test", uset).results({"partition_filter": {"begin": begin, "count": count}}))
        assert got == {k for k, p in pid_by_key.items() if begin <= p < begin + count}


def test_partition_filter_pages_return_every_record_of_the_range_once(server, client, uset):
    n = 3000
    load(server, uset, n)
    begin, count = 2000, 600
    want = {i for i in range(n) if begin <= client.get_key_partition_id("test", uset, i) < begin + count}
    pages = harness.paginate(client, "test", uset, 25, policy={"partition_filter": {"begin": begin, "count": count}})
    keys = [r[0][2] for p in pages for r in p]
    assert len(keys) == len(set(keys)), "a record came back twice"
    assert set(keys) == want
    assert all(len(p) == 25 for p in pages[:-1]), [len(p) for p in pages]


def test_a_scan_stopped_by_the_client_resumes_from_its_partition_status(server, client, uset):
    """The documented terminate/resume flow: a foreach stopped early (callback returns False),
    then a new query given the first one's partition status returns exactly the rest."""
    n = 600
    expected = load(server, uset, n)
    first = []

    def stop_after_150(part_id, rec):
        if len(first) == 150:
            return False
        assert part_id == pid_of(harness.digest_of(rec)), "foreach reports the record's partition"
        first.append(rec)
        return True

    everything = {"partition_filter": {"begin": 0, "count": N_PARTITIONS}}
    q1 = client.query("test", uset)
    q1.foreach(stop_after_150, everything)
    assert len(first) == 150
    status = q1.get_partitions_status()
    assert not q1.is_done()

    q2 = client.query("test", uset)
    rest = q2.results({"partition_filter": {"begin": 0, "count": N_PARTITIONS, "partition_status": status}})
    got = harness.by_digest(first + rest)  # fails on a record returned twice
    assert set(got) == set(expected)
    assert len(rest) == n - 150


@pytest.mark.parametrize("scan_threads", [None, 8])
def test_paginated_scan_while_writers_run_returns_each_stable_record_exactly_once(server, start_server, uset, scan_threads):
    """Pages while another thread inserts new keys, updates and deletes others.

    Every record that existed for the whole pagination comes back exactly once (updated ones
    included, with one of the values it had); nothing comes back twice; nothing comes back that
    never existed. A partition walk resumes strictly after the last digest returned, so updates
    and inserts can't make a record repeat, and deletes of other records can't make one vanish.
    """
    if scan_threads is not None:
        server = start_server(service={"single-scan-threads": scan_threads})
    seed = seed_from_env()
    rng = random.Random(seed)
    n = rng.randint(1500, 3000)
    page_size = rng.randint(40, 160)
    harness.put_many(server, "test", uset, ((i, {"id": i, "v": 0}) for i in range(n)))

    keys = list(range(n))
    rng.shuffle(keys)
    doomed = set(keys[: n // 5])  # deleted (some re-created) while the pages are read
    updated = set(keys[n // 5 : n // 2])  # updated again and again; never deleted
    stable = set(range(n)) - doomed
    writer_rng = random.Random(rng.randrange(1 << 32))
    next_new = [n]
    versions = {k: 0 for k in range(n)}
    ops_done = [0]
    stop = threading.Event()
    errors: list[BaseException] = []
    wclient = server.client()

    def writer():
        doomed_left = sorted(doomed)
        writer_rng.shuffle(doomed_left)
        deleted: list[int] = []
        updated_list = sorted(updated)
        try:
            while not stop.is_set():
                r = writer_rng.random()
                if r < 0.35:
                    k = next_new[0]
                    next_new[0] += 1
                    wclient.put(("test", uset, k), {"id": k, "v": 0}, policy={"key": aerospike.POLICY_KEY_SEND})
                elif r < 0.75:
                    k = writer_rng.choice(updated_list)
                    versions[k] += 1
                    wclient.put(("test", uset, k), {"id": k, "v": versions[k]})
                elif doomed_left and r < 0.93:
                    k = doomed_left.pop()
                    wclient.remove(("test", uset, k))
                    deleted.append(k)
                elif deleted:
                    k = deleted.pop(writer_rng.randrange(len(deleted)))
                    wclient.put(("test", uset, k), {"id": k, "v": 1000}, policy={"key": aerospike.POLICY_KEY_SEND})
                ops_done[0] += 1
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    def wait_for_writes(_page):
        # Let the writer make progress between pages, whatever the scheduling.
        target = ops_done[0] + 15
        deadline = time.monotonic() + 5
        while ops_done[0] < target and not errors and time.monotonic() < deadline:
            time.sleep(0.001)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        pages = harness.paginate(server.client(), "test", uset, page_size, between_pages=wait_for_writes)
    finally:
        stop.set()
        t.join(10)
    assert not errors, f"writer failed: {errors[0]!r} (seed {seed})"
    print(f"{n} records, pages of {page_size}: {len(pages)} pages, {ops_done[0]} writes, {next_new[0] - n} inserts")
    assert ops_done[0] > 2 * len(pages), f"the writer did not run during the pages (seed {seed})"

    ids = []
    for page in pages:
        assert len(page) <= page_size
        for key, _, bins in page:
            ids.append(bins["id"])
            if bins["id"] in updated:
                assert 0 <= bins["v"] <= versions[bins["id"]], (bins, seed)
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes, f"records returned twice: {dupes[:10]} (seed {seed})"
    missing = sorted(stable - set(ids))
    assert not missing, f"{len(missing)} stable records never returned, e.g. {missing[:10]} (seed {seed})"
    phantoms = sorted(set(ids) - set(range(next_new[0])))
    assert not phantoms, f"records that were never written: {phantoms[:10]} (seed {seed})"


# -- whole-namespace scans, scan threads, statistics (a server of this module's own) ---------------


def test_namespace_scan_returns_records_of_every_set_and_without_set(nsclient, nsdata):
    got = harness.by_digest(harness.scan(nsclient, "test", None))
    assert set(got) == set(nsdata)
    for d, (key, _, bins) in got.items():
        set_name, k, want = nsdata[d]
        assert key[1] == set_name
        assert key[2] == k
        assert bins == want


def test_namespace_scan_pages_and_partition_filter(nsclient, nsdata):
    pages = harness.paginate(nsclient, "test", None, 70)
    assert set(harness.by_digest([r for p in pages for r in p])) == set(nsdata)
    begin, count = 512, 1024
    got = harness.by_digest(nsclient.query("test", None).results({"partition_filter": {"begin": begin, "count": count}}))
    assert set(got) == {d for d in nsdata if begin <= pid_of(d) < begin + count}


def test_namespace_scan_without_bins_and_with_a_selection(nsclient, nsdata):
    got = harness.by_digest(harness.scan(nsclient, "test", None, nobins=True))
    assert set(got) == set(nsdata)
    assert all(rec[2] == {} for rec in got.values())
    got = harness.by_digest(harness.scan(nsclient, "test", None, select=["tag"]))
    assert set(got) == {d for d, (_, _, b) in nsdata.items() if "tag" in b}


def get_service_config(client) -> dict[str, str]:
    return harness.parse_kv(harness.info(client, "get-config:context=service"))


def test_single_scan_threads_can_be_set_and_read_back(nsserver, nsclient):
    assert get_service_config(nsclient)["single-scan-threads"] == "4"  # the default
    try:
        for n in (1, 8, 128, 2):
            assert harness.raw_info(nsserver, f"set-config:context=service;single-scan-threads={n}") == "ok"
            assert get_service_config(nsclient)["single-scan-threads"] == str(n)
        for bad in ("0", "129", "-1", "many", ""):
            reply = harness.raw_info(nsserver, f"set-config:context=service;single-scan-threads={bad}")
            assert reply.startswith("ERROR"), (bad, reply)
            assert get_service_config(nsclient)["single-scan-threads"] == "2"
    finally:
        harness.raw_info(nsserver, "set-config:context=service;single-scan-threads=4")


def test_results_are_the_same_with_one_and_eight_scan_threads(nsserver, nsclient, nsdata):
    outcomes = []
    try:
        for n in (1, 8):
            assert harness.raw_info(nsserver, f"set-config:context=service;single-scan-threads={n}") == "ok"
            whole = harness.by_digest(harness.scan(nsclient, "test", None))
            one_set = harness.by_digest(harness.scan(nsclient, "test", "a"))
            pages = harness.paginate(nsclient, "test", "a", 45)
            paged = harness.by_digest([r for p in pages for r in p])
            q = nsclient.query("test", None)
            q.max_records = 100
            capped = harness.by_digest(q.results())
            assert len(capped) == 100
            outcomes.append(
                (
                    {d: r[2] for d, r in whole.items()},
                    set(one_set),
                    set(paged),
                    [len(p) for p in pages],
                )
            )
    finally:
        harness.raw_info(nsserver, "set-config:context=service;single-scan-threads=4")
    assert outcomes[0] == outcomes[1]
    assert set(outcomes[0][0]) == set(nsdata)
    assert outcomes[0][1] == {d for d, v in nsdata.items() if v[0] == "a"}


def test_single_scan_threads_from_the_config_file(start_server):
    srv = start_server(service={"single-scan-threads": 2})
    c = srv.client()
    assert get_service_config(c)["single-scan-threads"] == "2"
    harness.put_many(srv, "test", "s", ((i, {"i": i}) for i in range(200)))
    assert len(harness.by_digest(harness.scan(c, "test", "s"))) == 200


NS_STATS = (
    "objects",
    "data_used_bytes",
    "index_used_bytes",
    "set_index_used_bytes",
    "truncated_records",
    "pi_query_long_basic_complete",
    "pi_query_long_basic_abort",
    "pi_query_long_basic_error",
)


def test_namespace_statistics_are_reported_and_count_finished_scans(nsclient, nsdata):
    stats = harness.ns_stats(nsclient, "test")
    for name in NS_STATS:
        assert name in stats, f"namespace/test lacks {name}"
        int(stats[name])
    assert int(stats["objects"]) == len(nsdata)
    assert int(stats["data_used_bytes"]) > 0
    assert int(stats["index_used_bytes"]) > 0
    before = int(stats["pi_query_long_basic_complete"])
    harness.scan(nsclient, "test", "a")
    harness.scan(nsclient, "test", None, nobins=True)
    pages = harness.paginate(nsclient, "test", "b", 50)  # one scan per page
    after = harness.ns_stats(nsclient, "test")
    assert int(after["pi_query_long_basic_complete"]) == before + 2 + len(pages)
    assert after["pi_query_long_basic_abort"] == stats["pi_query_long_basic_abort"]
    assert after["pi_query_long_basic_error"] == stats["pi_query_long_basic_error"]


def test_set_statistics_have_objects_and_data_used_bytes(nsclient, nsdata):
    a = harness.set_info(nsclient, "test", "a")
    b = harness.set_info(nsclient, "test", "b")
    assert int(a["objects"]) == 300 and int(b["objects"]) == 120
    assert int(a["data_used_bytes"]) > int(b["data_used_bytes"]) > 0


# -- raw scans -------------------------------------------------------------------------------------


def test_raw_scan_reply_has_the_documented_record_messages(server, client, uset):
    harness.put_many(server, "test", uset, ((i, {"n": i, "s": "x" * i}) for i in range(30)))
    client.put(("test", uset, 7), {"n": 7, "s": "x" * 7})  # generation 2
    with server.raw() as s:
        records, last = run_raw_scan(s, scan_frame("test", uset))
        assert last.result_code == 0
        assert last.ops == [] and last.fields == []
        assert aswire.request_info(s, ["build"])[0][0] == "build"  # still in step
    assert len(records) == 30
    digests = set()
    for m in records:
        assert m.header_sz == 22 and m.result_code == 0
        assert m.info1 & aswire.INFO1_NOBINDATA == 0
        f = field_map(m)
        assert f[aswire.FIELD_NAMESPACE] == b"test"
        assert f[aswire.FIELD_SET] == uset.encode()
        d = f[aswire.FIELD_DIGEST]
        assert len(d) == 20
        key = f[aswire.FIELD_KEY]
        assert key[0] == aswire.PT_INTEGER
        k = int.from_bytes(key[1:], "big", signed=True)
        assert bytes(aerospike.calc_digest("test", uset, k)) == d
        assert m.generation == (2 if k == 7 else 1)
        assert m.record_ttl == 0  # never expires
        assert all(o.op == aswire.OP_READ for o in m.ops)
        assert m.bins() == {"n": k, "s": "x" * k}
        digests.add(d)
    assert len(digests) == 30


def test_raw_scan_without_bin_data_and_with_bin_selection(server, uset):
    harness.put_many(server, "test", uset, ((i, {"a": i, "b": -i} if i % 2 else {"a": i}) for i in range(20)))
    with server.raw() as s:
        records, last = run_raw_scan(s, scan_frame("test", uset, nobins=True))
        assert last.result_code == 0
        assert len(records) == 20
        for m in records:
            assert m.info1 & aswire.INFO1_NOBINDATA, "records without bins carry GET_NO_BINS"
            assert m.ops == []
            assert m.generation == 1
        records, last = run_raw_scan(s, scan_frame("test", uset, bins=["b"]))
        assert last.result_code == 0
        assert sorted(m.bins()["b"] for m in records) == sorted(-i for i in range(20) if i % 2)
        assert all(list(m.bins()) == ["b"] for m in records)


def test_raw_scan_resumes_strictly_after_the_given_digest(server, client, uset):
    pid, keys = keys_in_partition("test", uset, 8)
    pid2, keys2 = keys_in_partition("test", uset, 3, start=keys[-1] + 1)
    if pid2 == pid:
        pid2, keys2 = keys_in_partition("test", uset, 3, start=keys[-1] + 100_000)
    harness.put_many(server, "test", uset, ((k, {"k": k}) for k in keys + keys2))
    with server.raw() as s:
        records, last = run_raw_scan(s, scan_frame("test", uset, pids=[pid]))
        assert last.result_code == 0
        order = [digest_field(m) for m in records]
        assert sorted(order) == sorted(bytes(aerospike.calc_digest("test", uset, k)) for k in keys)
        # The same partition is always walked in the same order.
        again, _ = run_raw_scan(s, scan_frame("test", uset, pids=[pid]))
        assert [digest_field(m) for m in again] == order

        for cut in range(len(order)):
            records, last = run_raw_scan(s, scan_frame("test", uset, pids=None, digests=[order[cut]]))
            assert last.result_code == 0
            assert [digest_field(m) for m in records] == order[cut + 1 :], cut

        # Resume one partition and scan another from its start, in one request.
        records, last = run_raw_scan(s, scan_frame("test", uset, pids=[pid2], digests=[order[4]]))
        assert last.result_code == 0
        got = {digest_field(m) for m in records}
        assert got == set(order[5:]) | {bytes(aerospike.calc_digest("test", uset, k)) for k in keys2}

        # The resume point itself was deleted: the walk still continues after it.
        key_of = {bytes(aerospike.calc_digest("test", uset, k)): k for k in keys}
        client.remove(("test", uset, key_of[order[3]]))
        records, last = run_raw_scan(s, scan_frame("test", uset, pids=None, digests=[order[3]]))
        assert [digest_field(m) for m in records] == order[4:]


def test_raw_scan_max_records_stops_after_that_many(server, uset):
    harness.put_many(server, "test", uset, ((i, {"i": i}) for i in range(120)))
    with server.raw() as s:
        for cap in (1, 7, 119, 120, 500):
            records, last = run_raw_scan(s, scan_frame("test", uset, max_records=cap))
            assert last.result_code == 0
            assert len(records) == min(cap, 120), cap
            assert len({digest_field(m) for m in records}) == len(records)


def test_raw_scan_of_a_missing_set_answers_only_last_ok(server, uset):
    with server.raw() as s:
        records, last = run_raw_scan(s, scan_frame("test", uset))
        assert records == [] and last.result_code == 0


def _malformed_cases(uset):
    ns, st = aswire.ns_field("test"), aswire.set_field(uset)
    trid = aswire.field(FIELD_TRID, struct.pack(">Q", 4242))
    pids = aswire.field(FIELD_PID_ARRAY, pid_array(range(10)))
    d_in_0 = next(
        bytes(aerospike.calc_digest("test", uset, k)) for k in range(100000) if pid_of(aerospike.calc_digest("test", uset, k)) == 0
    )
    return {
        # Aerospike: "basic query missing pids and digests fields" -> UNSUPPORTED_FEATURE.
        "no PID_ARRAY and no DIGEST_ARRAY": ([ns, st, trid], aswire.UNSUPPORTED_FEATURE),
        "partition id 4096": ([ns, st, trid, aswire.field(FIELD_PID_ARRAY, pid_array([1, 4096]))], aswire.PARAMETER),
        "partition id 65535": ([ns, st, trid, aswire.field(FIELD_PID_ARRAY, pid_array([65535]))], aswire.PARAMETER),
        "a partition twice": ([ns, st, trid, aswire.field(FIELD_PID_ARRAY, pid_array([5, 6, 5]))], aswire.PARAMETER),
        "a partition in both arrays": (
            [ns, st, trid, aswire.field(FIELD_PID_ARRAY, pid_array([0, 1])), aswire.field(FIELD_DIGEST_ARRAY, d_in_0)],
            aswire.PARAMETER,
        ),
        "a digest twice": ([ns, st, trid, aswire.field(FIELD_DIGEST_ARRAY, d_in_0 * 2)], aswire.PARAMETER),
        "PID_ARRAY of one byte": ([ns, st, trid, aswire.field(FIELD_PID_ARRAY, b"\x01")], aswire.PARAMETER),
        "PID_ARRAY of odd length": ([ns, st, trid, aswire.field(FIELD_PID_ARRAY, pid_array([1, 2]) + b"\x00")], aswire.PARAMETER),
        "empty PID_ARRAY": ([ns, st, trid, aswire.field(FIELD_PID_ARRAY, b"")], aswire.PARAMETER),
        "unknown namespace": ([aswire.ns_field("no-such-ns"), st, trid, pids], aswire.NAMESPACE),
    }


@pytest.mark.parametrize(
    "case",
    [
        "no PID_ARRAY and no DIGEST_ARRAY",
        "partition id 4096",
        "partition id 65535",
        "a partition twice",
        "a partition in both arrays",
        "a digest twice",
        "PID_ARRAY of one byte",
        "PID_ARRAY of odd length",
        "empty PID_ARRAY",
        "unknown namespace",
    ],
)
def test_a_malformed_scan_is_refused_with_one_last_message(server, client, uset, healthy, case):
    client.put(("test", uset, 1), {"a": 1})
    fields, code = _malformed_cases(uset)[case]
    with server.raw() as s:
        s.sendall(scan_frame("test", raw_fields=fields))
        stream = ScanStream(s)
        last = stream.read_to_end(timeout=5)
        assert stream.records == [], "no record before the refusal"
        assert last.result_code == code, (case, last.result_code)
        assert last.ops == []
        # The connection stays in step: info, then a valid scan on the same socket.
        assert aswire.request_info(s, ["build"])[0][0] == "build"
        records, last = run_raw_scan(s, scan_frame("test", uset))
        assert last.result_code == 0 and len(records) == 1


def test_a_scan_without_the_partition_done_flag_is_unsupported(server, client, uset, healthy):
    # Aerospike 8.1 basic_query_job_start: "basic query expects unsupported pid-done-ok" -> 16.
    client.put(("test", uset, 1), {"a": 1})
    with server.raw() as s:
        s.sendall(scan_frame("test", uset, info3=0))
        stream = ScanStream(s)
        last = stream.read_to_end(timeout=5)
        assert stream.records == []
        assert last.result_code == aswire.UNSUPPORTED_FEATURE
        assert aswire.request_info(s, ["build"])[0][0] == "build"


# -- scan jobs: query-show and query-abort ---------------------------------------------------------


def job_info(server, trid: int, param: str = "trid") -> dict[str, str] | str:
    """`query-show:trid=<id>` as a dict, or the ERROR text."""
    value = harness.raw_info(server, f"query-show:{param}={trid}")
    if value.startswith("ERROR"):
        return value
    entries = [e for e in value.split(";") if e]
    assert len(entries) == 1, value
    return harness.parse_kv(entries[0], sep=":")


def all_jobs(server) -> list[dict[str, str]]:
    value = harness.raw_info(server, "query-show")
    return [harness.parse_kv(e, sep=":") for e in value.split(";") if e]


def test_a_finished_scan_is_shown_done_with_its_counts(server, uset):
    trid = random.randrange(1, 1 << 62)
    harness.put_many(server, "test", uset, ((i, {"i": i}) for i in range(40)))
    with server.raw() as s:
        records, last = run_raw_scan(s, scan_frame("test", uset, trid=trid))
    assert last.result_code == 0 and len(records) == 40
    for param in ("trid", "id"):
        job = job_info(server, trid, param)
        assert isinstance(job, dict), job
        assert job["trid"] == str(trid)
        assert job["ns"] == "test"
        assert job["set"] == uset
        assert job["status"] == "done(ok)"
        assert float(job["job-progress"]) == 100.0
        assert int(job["recs-succeeded"]) == 40
    assert any(j.get("trid") == str(trid) for j in all_jobs(server))


def test_a_client_scan_is_listed_as_a_job(server, client, uset):
    load(server, uset, 25)
    harness.scan(client, "test", uset)
    jobs = [j for j in all_jobs(server) if j.get("set") == uset]
    assert len(jobs) == 1, jobs
    job = jobs[0]
    assert job["ns"] == "test" and job["status"] == "done(ok)"
    assert int(job["recs-succeeded"]) == 25
    assert int(job["trid"]) != 0  # the client's task id
    assert job_info(server, int(job["trid"]))["set"] == uset


def test_query_show_and_abort_of_an_unknown_job_are_errors(server):
    trid = random.randrange(1, 1 << 62)
    assert harness.raw_info(server, f"query-show:trid={trid}") == "ERROR:2:job not found"
    assert harness.raw_info(server, f"query-show:id={trid}") == "ERROR:2:job not found"
    # Aerospike answers `ERROR:2:id not active` here; the code is what clients act on.
    assert harness.raw_info(server, f"query-abort:trid={trid}").startswith("ERROR:2:")
    assert harness.raw_info(server, f"query-abort:id={trid}").startswith("ERROR:2:")


BIG_N = 30_000
BIG_PAD = b"p" * 1024


@pytest.fixture(scope="module")
def bigserver():
    """A server holding ~30 MiB in set `big`: far more than socket buffers and the scan's own
    queue, so a scan whose client stops reading stays active."""
    try:
        srv = harness.start_server(tag="osprey-scanjobs")
    except FileNotFoundError as e:
        pytest.fail(str(e), pytrace=False)
    harness.put_many(srv, "test", "big", ((i, {"i": i, "pad": BIG_PAD}) for i in range(BIG_N)), send_key=False)
    yield srv
    srv.stop()


def start_blocked_scan(srv, trid: int, socket_timeout_ms: int = 20000) -> tuple[socket.socket, ScanStream]:
    """Starts a scan of `big`, reads its first proto, then stops reading (the caller holds the
    socket). Waits until the job is listed."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect((srv.host, srv.port))
    s.sendall(scan_frame("test", "big", trid=trid, socket_timeout_ms=socket_timeout_ms))
    stream = ScanStream(s)
    stream.next_frame()
    assert stream.last is None, "the whole scan fit in one proto"
    job = harness.wait_until(lambda: isinstance(job_info(srv, trid), dict), 5)
    assert job, job_info(srv, trid)
    return s, stream


def test_a_blocked_scan_is_active_until_query_abort_ends_it(bigserver):
    srv = bigserver
    c = srv.client()
    before = harness.ns_stats(c, "test")
    trid = random.randrange(1, 1 << 62)
    s, stream = start_blocked_scan(srv, trid)
    with s:
        time.sleep(0.5)
        job = job_info(srv, trid)
        assert job["status"] == "active", job
        assert job["trid"] == str(trid) and job["ns"] == "test" and job["set"] == "big"
        assert 0 <= float(job["job-progress"]) < 100
        assert 0 < int(job["recs-succeeded"]) < BIG_N
        listed = [j for j in all_jobs(srv) if j.get("trid") == str(trid)]
        assert len(listed) == 1 and listed[0]["status"] == "active"

        assert harness.raw_info(srv, f"query-abort:trid={trid}") == "ok"
        last = stream.read_to_end(timeout=20)
        assert last.result_code == QUERY_ABORT, f"aborted scan ended with {last.result_code}"
        assert len(stream.records) < BIG_N
        # The socket is usable afterwards.
        assert aswire.request_info(s, ["build"])[0][0] == "build"

    job = harness.wait_until(lambda: job_info(srv, trid)["status"] != "active", 5)
    assert job_info(srv, trid)["status"] == "done(user-aborted)"
    assert harness.raw_info(srv, f"query-abort:trid={trid}").startswith("ERROR:2:")
    after = harness.ns_stats(c, "test")
    assert int(after["pi_query_long_basic_abort"]) == int(before["pi_query_long_basic_abort"]) + 1
    assert after["pi_query_long_basic_complete"] == before["pi_query_long_basic_complete"]
    # And the server still scans.
    assert len(harness.scan(c, "test", "big", nobins=True)) == BIG_N


def test_query_abort_accepts_id_as_well_as_trid(bigserver):
    trid = random.randrange(1, 1 << 62)
    s, stream = start_blocked_scan(bigserver, trid)
    with s:
        assert job_info(bigserver, trid, "id")["status"] == "active"
        assert harness.raw_info(bigserver, f"query-abort:id={trid}") == "ok"
        assert stream.read_to_end(timeout=20).result_code == QUERY_ABORT
    assert job_info(bigserver, trid)["status"] == "done(user-aborted)"


def test_a_scan_whose_client_goes_away_is_abandoned(bigserver):
    c = bigserver.client()
    before = harness.ns_stats(c, "test")
    trid = random.randrange(1, 1 << 62)
    s, _ = start_blocked_scan(bigserver, trid)
    s.close()
    harness.wait_until(lambda: job_info(bigserver, trid)["status"] != "active", 10)
    status = job_info(bigserver, trid)["status"]
    assert status.startswith("done(abandoned"), status
    after = harness.ns_stats(c, "test")
    assert int(after["pi_query_long_basic_error"]) == int(before["pi_query_long_basic_error"]) + 1
    assert after["pi_query_long_basic_complete"] == before["pi_query_long_basic_complete"]
    assert after["pi_query_long_basic_abort"] == before["pi_query_long_basic_abort"]


def test_a_scan_blocked_past_its_socket_timeout_is_abandoned(bigserver):
    # SOCKET_TIMEOUT (u32 ms) is how long the server waits on a client that does not read
    # (reference 8.2; server query.c get_query_socket_timeout -> fd_timeout, used by
    # conn_query_job_send_response; a send that times out abandons the job).
    trid = random.randrange(1, 1 << 62)
    s, _ = start_blocked_scan(bigserver, trid, socket_timeout_ms=300)
    t0 = time.monotonic()
    with s:
        harness.wait_until(lambda: job_info(bigserver, trid)["status"] != "active", 3)
        waited = time.monotonic() - t0
        status = job_info(bigserver, trid)["status"]
        assert status.startswith("done(abandoned"), f"{status} {waited:.1f}s after the client stopped reading"


def test_records_per_second_paces_a_scan(start_server):
    # 300 records at 1,000 records per second take at least 0.3 s minus the first record's
    # slot; unthrottled the same scan takes a few milliseconds.
    server = start_server()
    client = server.client()
    for i in range(300):
        client.put(("test", "paced", i), {"v": i})
    query = client.query("test", "paced")
    query.records_per_second = 1000
    started = time.monotonic()
    records = query.results()
    elapsed_s = time.monotonic() - started
    assert len(records) == 300
    assert elapsed_s >= 0.25, f"300 records at 1000/s came back in {elapsed_s:.3f} s"
    (job,) = [line for line in harness.info(client, "query-show").split(";") if ":set=paced:" in line]
    assert ":rps=1000:" in job and ":recs-succeeded=300:" in job

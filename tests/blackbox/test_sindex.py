"""Secondary indexes through the official client and raw bytes: creating (both info syntaxes),
building over existing records, equality and range queries, bin selection, pagination that
resumes after (index value, digest), partition filters, dropping, and an index that follows
updates, deletes, type changes, expiry, truncate and records kept on a device.

The consistency checker moves indexed values between ranges while queries run, records every
write with its start and end times, and checks both guarantees (docs/ARCHITECTURE.md,
"Secondary indexes and queries"): a query never returns a record whose value did not satisfy the filter,
and never misses one whose value satisfied it for the whole query. It is randomized: its seed
is printed and replays with OSPREY_TEST_SEED=<seed>.
"""

from __future__ import annotations

import os
import random
import struct
import threading
import time

import aerospike
import pytest
from aerospike import exception as ex
from aerospike import predicates as p

import aswire
import harness
from test_scan import ALL_PIDS, field_map, pid_of, run_raw_scan

FIELD_BVAL_ARRAY = 15
FIELD_INDEX_RANGE = 22
FIELD_INDEX_TYPE = 26
PARAMETER = 4
INDEX_NOT_FOUND = 201


def seed_from_env() -> int:
    seed = int(os.environ.get("OSPREY_TEST_SEED") or random.randrange(1 << 32))
    print(f"seed {seed} (replay with OSPREY_TEST_SEED={seed})")
    return seed


def wait_built(client, ns: str, name: str) -> dict[str, str]:
    """Polls `sindex/<ns>/<name>` until load_pct is 100, as the clients' IndexTask does."""
    deadline = time.monotonic() + 20
    while True:
        stats = harness.parse_kv(harness.info(client, f"sindex/{ns}/{name}"))
        if stats["load_pct"] == "100":
            return stats
        assert time.monotonic() < deadline, f"index {name} never finished building: {stats}"
        time.sleep(0.05)


def entries(client, ns: str, name: str) -> int:
    return int(harness.parse_kv(harness.info(client, f"sindex/{ns}/{name}"))["entries"])


def query(client, ns: str, set_name: str | None, predicate, bins=(), policy=None) -> list:
    q = client.query(ns, set_name)
    if bins:
        q.select(*bins)
    q.where(predicate)
    return q.results(policy or {})


def keys_of(records) -> list:
    return sorted(r[0][2] for r in records)


@pytest.fixture
def people(client, uset):
    """200 records `k0..k199` in a fresh set: age = i % 50, name = n<i % 7>, i = i. Indexes
    made by the test are dropped after it."""
    for i in range(200):
        client.put(("test", uset, f"k{i}"), {"age": i % 50, "name": f"n{i % 7}", "i": i},
                   policy={"key": aerospike.POLICY_KEY_SEND})
    made: list[str] = []

    def index(kind: str, bin_name: str) -> str:
        name = harness.unique("idx")
        create = client.index_integer_create if kind == "numeric" else client.index_string_create
        create("test", uset, bin_name, name)
        made.append(name)
        wait_built(client, "test", name)
        return name

    yield uset, index
    for name in made:
        client.index_remove("test", name)


def test_an_index_built_over_existing_records_answers_equality_and_range(client, people):
    uset, index = people
    name = index("numeric", "age")
    stats = wait_built(client, "test", name)
    assert int(stats["entries"]) == 200
    assert keys_of(query(client, "test", uset, p.equals("age", 7))) == sorted(["k7", "k57", "k107", "k157"])
    in_range = query(client, "test", uset, p.between("age", 10, 12))
    assert sorted(r[2]["age"] for r in in_range) == [10] * 4 + [11] * 4 + [12] * 4
    assert query(client, "test", uset, p.between("age", 50, 1000)) == []
    listed = harness.info(client, "sindex-list:ns=test")
    assert f"indexname={name}:set={uset}:bin=age:type=numeric:indextype=default" in listed
    assert f"indexname={name}" in listed and "state=RW" in listed


def test_string_equality_with_bin_selection(client, people):
    uset, index = people
    index("string", "name")
    records = query(client, "test", uset, p.equals("name", "n3"), bins=("i",))
    assert sorted(r[2]["i"] for r in records) == [i for i in range(200) if i % 7 == 3]
    assert all(set(r[2]) == {"i"} for r in records)
    assert query(client, "test", uset, p.equals("name", "nobody")) == []


def test_the_index_follows_updates_deletes_and_type_changes(client, people):
    uset, index = people
    name = index("numeric", "age")
    client.put(("test", uset, "k7"), {"age": 1000})
    client.put(("test", uset, "k57"), {"age": "seven"})  # no longer an integer: not indexed
    client.remove(("test", uset, "k107"))
    client.put(("test", uset, "new"), {"age": 7}, policy={"key": aerospike.POLICY_KEY_SEND})
    assert keys_of(query(client, "test", uset, p.equals("age", 7))) == sorted(["k157", "new"])
    assert keys_of(query(client, "test", uset, p.equals("age", 1000))) == ["k7"]
    # 200 records, one deleted, one no longer an integer, one added.
    assert entries(client, "test", name) == 199


def test_pagination_resumes_after_the_last_value_and_digest(client, people):
    uset, index = people
    index("numeric", "age")
    q = client.query("test", uset)
    q.where(p.between("age", 5, 44))
    q.max_records = 13
    q.paginate()
    seen: list[int] = []
    pages = 0
    while not q.is_done():
        page = q.results()
        seen += [r[2]["i"] for r in page]
        pages += 1
        assert pages < 100, "pagination never ended"
    assert pages > 2
    assert sorted(seen) == [i for i in range(200) if 5 <= i % 50 <= 44]


def test_a_query_from_the_start_returns_records_in_index_order(server, client, people):
    """Beyond Aerospike: a query no partition resumes walks the index's namespace-wide order,
    so records arrive sorted by (value, digest) and MAX_RECORDS keeps the smallest values."""
    uset, index = people
    index("numeric", "age")
    index_range = (bytes([1, 3]) + b"age" + bytes([1]) + struct.pack(">I", 8) + struct.pack(">q", 5)
                   + struct.pack(">I", 8) + struct.pack(">q", 44))

    def order(records) -> list[tuple[int, bytes]]:
        return [(struct.unpack("<q", field_map(m)[FIELD_BVAL_ARRAY])[0], field_map(m)[aswire.FIELD_DIGEST])
                for m in records]

    with server.raw() as sock:
        records, last = run_raw_scan(sock, query_frame(uset, index_range))
    assert last.result_code == 0
    everything = order(records)
    assert len(everything) == 160 and everything == sorted(everything)
    with server.raw() as sock:
        records, last = run_raw_scan(sock, query_frame(uset, index_range, max_records=10))
    assert last.result_code == 0
    assert order(records) == everything[:10]
    # Through the official client too: the ten smallest ages, in order.
    q = client.query("test", uset)
    q.where(p.between("age", 5, 44))
    q.max_records = 10
    assert [r[2]["age"] for r in q.results()] == [5] * 4 + [6] * 4 + [7] * 2


def test_records_carry_their_index_value_and_resume_needs_it(server, client, people):
    uset, index = people
    index("numeric", "age")
    index_range = (bytes([1, 3]) + b"age" + bytes([1]) + struct.pack(">I", 8) + struct.pack(">q", 0)
                   + struct.pack(">I", 8) + struct.pack(">q", 49))
    with server.raw() as sock:
        records, last = run_raw_scan(sock, query_frame(uset, index_range, max_records=5))
    assert last.result_code == 0 and len(records) == 5
    for m in records:
        bval = struct.unpack("<q", field_map(m)[FIELD_BVAL_ARRAY])[0]
        assert bval == m.bins()["age"]
    # Resuming a partition after (value, digest) needs the value: a digest alone is refused.
    digest = field_map(records[0])[aswire.FIELD_DIGEST]
    with server.raw() as sock:
        _, last = run_raw_scan(sock, query_frame(uset, index_range, pids=(), digests=[digest]))
    assert last.result_code == PARAMETER
    # With it, the partition resumes strictly after that record.
    bval = m_bval = struct.unpack("<q", field_map(records[0])[FIELD_BVAL_ARRAY])[0]
    with server.raw() as sock:
        rest, last = run_raw_scan(sock, query_frame(uset, index_range, pids=(), digests=[digest],
                                                    bvals=[m_bval]))
    assert last.result_code == 0
    partition = pid_of(digest)
    later = [(r[2]["age"], r[0][3]) for r in query(client, "test", uset, p.between("age", 0, 49))
             if pid_of(r[0][3]) == partition and (r[2]["age"], r[0][3]) > (bval, digest)]
    assert sorted(field_map(m)[aswire.FIELD_DIGEST] for m in rest) == sorted(d for _, d in later)


def query_frame(uset: str, index_range: bytes, *, pids=ALL_PIDS, digests=(), bvals=(),
                max_records: int | None = None, extra=()) -> bytes:
    fields = [aswire.ns_field("test"), aswire.set_field(uset),
              aswire.field(7, struct.pack(">Q", random.randrange(1, 1 << 63))),
              aswire.field(9, struct.pack(">I", 10000))]
    if pids:
        fields.append(aswire.field(11, b"".join(struct.pack("<H", x) for x in pids)))
    if digests:
        fields.append(aswire.field(12, b"".join(digests)))
    if bvals:
        fields.append(aswire.field(FIELD_BVAL_ARRAY, b"".join(struct.pack("<q", v) for v in bvals)))
    if max_records is not None:
        fields.append(aswire.field(13, struct.pack(">Q", max_records)))
    fields.append(aswire.field(FIELD_INDEX_RANGE, index_range))
    fields.extend(extra)
    return aswire.as_msg(fields, [], info1=aswire.INFO1_READ, info3=0x04)


def test_a_partition_filter_returns_only_those_partitions(client, people):
    uset, index = people
    index("numeric", "age")
    policy = {"partition_filter": {"begin": 0, "count": 2048}}
    records = query(client, "test", uset, p.between("age", 0, 49), policy=policy)
    expected = [k for k in (f"k{i}" for i in range(200))
                if pid_of(aerospike.calc_digest("test", uset, k)) < 2048]
    assert keys_of(records) == sorted(expected)


def test_info_commands_in_both_syntaxes(server, uset):
    """Raw info requests: the C client turns ERROR replies into exceptions."""
    def info(command: str) -> str:
        return harness.raw_info(server, command)

    name = harness.unique("idx")
    create = f"sindex-create:namespace=test;set={uset};indexname={name};bin=score;type=INTEGER"
    assert info(create) == "ok"
    assert info(create) == "ok"  # the same definition again
    other = f"sindex-create:ns=test;set={uset};indexname={name};indexdata=other,STRING"
    assert info(other).startswith("ERROR:200:")
    same_bin = f"sindex-create:ns=test;set={uset};indexname={name}x;indexdata=score,numeric"
    assert info(same_bin).startswith("ERROR:200:")
    both = f"sindex-create:ns=test;indexname=b{name};indexdata=score,numeric;bin=score;type=numeric"
    assert info(both).startswith("ERROR:4:")
    # A blob index, type named in any case.
    assert info(f"sindex-create:ns=test;indexname=c{name};indexdata=x,BLOB") == "ok"
    assert info(f"sindex-delete:ns=test;indexname=c{name}") == "ok"
    assert info(f"sindex-create:ns=nope;indexname=d{name};indexdata=x,numeric").startswith("ERROR:20:")
    assert info(f"sindex-exists:ns=test;indexname={name}") == "true"
    deadline = time.monotonic() + 20
    while (stats := harness.parse_kv(info(f"sindex-stat:namespace=test;indexname={name}")))["load_pct"] != "100":
        # The build runs in the background, and may take a moment on a loaded machine.
        assert time.monotonic() < deadline, stats
        time.sleep(0.05)
    assert stats["entries"] == "0"
    assert f"indexname={name}:set={uset}:bin=score:type=numeric" in info("sindex/test")
    assert info(f"sindex-delete:namespace=test;indexname={name}") == "ok"
    assert info(f"sindex-delete:ns=test;indexname={name}") == "ok"  # gone already
    assert info(f"sindex-exists:ns=test;indexname={name}") == "false"
    assert info(f"sindex/test/{name}").startswith("ERROR:201:")


def test_list_and_map_indexes_hold_each_item_and_follow_updates(client, uset):
    """Indexes on list elements, map keys and map values: one entry per distinct item of the
    index's type; equality and range queries on items; an update moves the entries."""
    ns = "test"
    for i in range(30):
        client.put((ns, uset, f"c{i}"), {
            "scores": [i % 5, i % 5, 100 + i, "not an int"],
            "tags": [f"t{i % 3}", "all", 7],
            "m": {f"k{i % 4}": i, "shared": 1000},
        }, policy={"key": aerospike.POLICY_KEY_SEND})
    made = []

    def made_index(create, bin_name: str, datatype: int) -> str:
        name = harness.unique("idx")
        create(ns, uset, bin_name, datatype, name)
        made.append(name)
        wait_built(client, ns, name)
        return name

    try:
        scores = made_index(client.index_list_create, "scores", aerospike.INDEX_NUMERIC)
        tags = made_index(client.index_list_create, "tags", aerospike.INDEX_STRING)
        keys = made_index(client.index_map_keys_create, "m", aerospike.INDEX_STRING)
        values = made_index(client.index_map_values_create, "m", aerospike.INDEX_NUMERIC)
        listed = harness.info(client, f"sindex-list:ns={ns}")
        assert f"indexname={scores}:set={uset}:bin=scores:type=numeric:indextype=list" in listed
        assert f"indexname={keys}:set={uset}:bin=m:type=string:indextype=mapkeys" in listed
        assert f"indexname={values}:set={uset}:bin=m:type=numeric:indextype=mapvalues" in listed
        # Distinct integer items only: i % 5 (twice, once entered) and 100 + i.
        assert entries(client, ns, scores) == 60
        assert entries(client, ns, tags) == 60
        assert entries(client, ns, keys) == 60
        assert entries(client, ns, values) == 60

        lst = aerospike.INDEX_TYPE_LIST
        assert keys_of(query(client, ns, uset, p.contains("scores", lst, 3))) == sorted(
            f"c{i}" for i in range(30) if i % 5 == 3)
        assert keys_of(query(client, ns, uset, p.range("scores", lst, 110, 112))) == ["c10", "c11", "c12"]
        assert keys_of(query(client, ns, uset, p.contains("tags", lst, "t1"))) == sorted(
            f"c{i}" for i in range(30) if i % 3 == 1)
        assert len(query(client, ns, uset, p.contains("tags", lst, "all"))) == 30
        assert query(client, ns, uset, p.contains("tags", lst, "not there")) == []
        assert keys_of(query(client, ns, uset, p.contains("m", aerospike.INDEX_TYPE_MAPKEYS, "k2"))) == sorted(
            f"c{i}" for i in range(30) if i % 4 == 2)
        assert keys_of(query(client, ns, uset, p.range("m", aerospike.INDEX_TYPE_MAPVALUES, 5, 7))) == [
            "c5", "c6", "c7"]
        # The default (bin value) type finds nothing: no such index.
        with pytest.raises(ex.IndexNotFound):
            query(client, ns, uset, p.equals("scores", 3))

        client.put((ns, uset, "c3"), {"scores": [42], "m": {"k9": 6}}, policy={"key": aerospike.POLICY_KEY_SEND})
        assert keys_of(query(client, ns, uset, p.contains("scores", lst, 42))) == ["c3"]
        assert "c3" not in keys_of(query(client, ns, uset, p.contains("scores", lst, 3)))
        assert keys_of(query(client, ns, uset, p.range("m", aerospike.INDEX_TYPE_MAPVALUES, 5, 7))) == [
            "c3", "c5", "c6", "c7"]
        assert entries(client, ns, scores) == 59
        client.remove((ns, uset, "c4"))
        assert entries(client, ns, scores) == 57
        assert entries(client, ns, keys) == 57  # c3 now has one key, c4 none
    finally:
        for name in made:
            client.index_remove(ns, name)


def test_queries_without_a_usable_index_fail_cleanly(server, client, uset):
    client.put(("test", uset, "a"), {"v": 1})
    with pytest.raises(ex.IndexNotFound):
        query(client, "test", uset, p.equals("v", 1))
    name = harness.unique("idx")
    client.index_integer_create("test", uset, "v", name)
    wait_built(client, "test", name)
    try:
        # A list index of that bin does not exist.
        with pytest.raises(ex.IndexNotFound):
            query(client, "test", uset, p.contains("v", aerospike.INDEX_TYPE_LIST, 1))
        good = (bytes([1, 1]) + b"v" + bytes([1]) + struct.pack(">I", 8) + struct.pack(">q", 1)
                + struct.pack(">I", 8) + struct.pack(">q", 1))
        malformed = [
            good[:-3],  # end value cut short
            bytes([2]) + good[1:],  # two filters
            good[:2] + b"v" + bytes([1]) + struct.pack(">I", 0xFFFFFFF0),  # declared length past the end
            bytes([1, 1]) + b"v" + bytes([1]) + struct.pack(">I", 8) + struct.pack(">q", 5)
            + struct.pack(">I", 8) + struct.pack(">q", 1),  # begin > end
        ]
        for bad in malformed:
            with server.raw() as sock:
                _, last = run_raw_scan(sock, query_frame(uset, bad))
            assert last.result_code == PARAMETER, bad
        for bad_type in (bytes([4]), bytes([0, 0]), b""):  # INDEX_TYPE is one byte, 0 to 3
            with server.raw() as sock:
                extra = [aswire.field(FIELD_INDEX_TYPE, bad_type)]
                _, last = run_raw_scan(sock, query_frame(uset, good, extra=extra))
            assert last.result_code == PARAMETER, bad_type
        with server.raw() as sock:
            records, last = run_raw_scan(sock, query_frame(uset, good))
        assert last.result_code == 0 and len(records) == 1
    finally:
        client.index_remove("test", name)
    assert client.get(("test", uset, "a"))[2] == {"v": 1}


def test_expired_and_truncated_records_leave_the_index(start_server):
    srv = start_server(namespaces=[harness.namespace("test", nsup_period=1)])
    client = srv.client()
    client.index_integer_create("test", "s", "v", "by_v")
    wait_built(client, "test", "by_v")
    for i in range(20):
        client.put(("test", "s", i), {"v": i}, meta={"ttl": 1 if i < 5 else -1})
    assert entries(client, "test", "by_v") == 20
    deadline = time.monotonic() + 10
    while entries(client, "test", "by_v") != 15:
        assert time.monotonic() < deadline, "expired records stayed in the index"
        time.sleep(0.2)
    assert sorted(r[2]["v"] for r in query(client, "test", "s", p.between("v", 0, 100))) == list(range(5, 20))
    client.truncate("test", "s", 0)
    assert query(client, "test", "s", p.between("v", 0, 100)) == []
    deadline = time.monotonic() + 10
    while entries(client, "test", "by_v") != 0:
        assert time.monotonic() < deadline, "truncated records stayed in the index"
        time.sleep(0.2)


def test_an_index_of_records_kept_on_the_device(start_server, tmp_path):
    storage = harness.device_storage([tmp_path / "test.dat"], filesize=64 * 1024 * 1024,
                                     write_block_size=65536)
    srv = start_server(namespaces=[harness.namespace("test", storage_engine=storage)])
    client = srv.client()
    for i in range(300):
        client.put(("test", "d", i), {"v": i % 30, "pad": "x" * 200})
    client.index_integer_create("test", "d", "v", "dv")
    wait_built(client, "test", "dv")
    for i in range(0, 300, 3):
        client.put(("test", "d", i), {"v": 1000 + i, "pad": "y"})
    for i in range(1, 300, 3):
        client.remove(("test", "d", i))
    # Old values were read back from the device to remove their entries.
    assert entries(client, "test", "dv") == 200
    got = sorted(r[2]["v"] for r in query(client, "test", "d", p.between("v", 0, 29)))
    assert got == sorted(i % 30 for i in range(2, 300, 3))
    assert len(query(client, "test", "d", p.between("v", 1000, 2000))) == 100


def test_index_definitions_survive_restarts_and_are_rebuilt(start_server, tmp_path):
    """A device namespace keeps its index definitions beside its data file: after a restart
    (graceful, then SIGKILL) the indexes are listed again, rebuilt from the records loaded,
    and answer queries; a dropped index stays dropped."""
    storage = harness.device_storage([tmp_path / "test.dat"], filesize=32 * 1024 * 1024,
                                     write_block_size=65536, commit_to_device=True)
    srv = start_server(namespaces=[harness.namespace("test", storage_engine=storage)])
    client = srv.client()
    client.index_integer_create("test", "p", "age", "by_age")
    client.index_list_create("test", None, "tags", aerospike.INDEX_STRING, "by_tag")
    client.index_string_create("test", "p", "name", "by_name")
    for i in range(100):
        client.put(("test", "p", i), {"age": i % 10, "tags": [f"t{i % 4}"], "name": f"n{i}"})
    client.index_remove("test", "by_name")

    def check(srv) -> None:
        client = srv.client()
        listed = harness.info(client, "sindex-list:ns=test")
        assert "indexname=by_age:set=p:bin=age:type=numeric:indextype=default" in listed
        assert "indexname=by_tag:set=null:bin=tags:type=string:indextype=list" in listed
        assert "by_name" not in listed
        assert int(wait_built(client, "test", "by_age")["entries"]) == 100
        assert int(wait_built(client, "test", "by_tag")["entries"]) == 100
        assert sorted(r[2]["age"] for r in query(client, "test", "p", p.equals("age", 3))) == [3] * 10
        tagged = query(client, "test", None, p.contains("tags", aerospike.INDEX_TYPE_LIST, "t1"))
        assert len(tagged) == 25

    check(srv.restart())
    check(srv.kill_and_restart())
    srv.client().index_remove("test", "by_tag")
    srv = srv.restart()
    assert "by_tag" not in harness.info(srv.client(), "sindex-list:ns=test")


def test_in_memory_index_definitions_survive_restarts_in_the_work_directory(start_server, tmp_path):
    """An in-memory namespace loses its records on a restart but, as in Aerospike (whose
    system metadata lives in its work-directory), not its index definitions: with
    `work-directory` set they are listed again after a restart (graceful, then SIGKILL), empty,
    and fill as records are written; a dropped index stays dropped. Without one, nothing is
    kept (the directory is where a server keeps files, and none is assumed)."""
    work = tmp_path / "work" / "osprey"  # created by the server
    srv = start_server(service={"work-directory": str(work)})
    client = srv.client()
    client.index_integer_create("test", "p", "age", "by_age")
    assert harness.info(client, "sindex-create:namespace=test;set=p;indexname=by_key;"
                                "source=key;type=numeric").startswith("ok")
    client.index_string_create("test", "p", "name", "by_name")
    client.index_remove("test", "by_name")
    assert (work / "test.sindex").is_file()

    def check(srv) -> None:
        client = srv.client()
        listed = harness.info(client, "sindex-list:ns=test")
        assert "indexname=by_age:set=p:bin=age:type=numeric:indextype=default" in listed
        assert "indexname=by_key:set=p:bin=null:source=key:type=numeric" in listed
        assert "by_name" not in listed
        assert int(wait_built(client, "test", "by_age")["entries"]) == 0
        policy = {"key": aerospike.POLICY_KEY_SEND}
        for i in range(30):
            client.put(("test", "p", i), {"age": i % 3, "name": f"n{i}"}, policy=policy)
        assert entries(client, "test", "by_age") == 30
        assert entries(client, "test", "by_key") == 30
        assert sorted(r[2]["name"] for r in query(client, "test", "p", p.equals("age", 2))) == \
            sorted(f"n{i}" for i in range(2, 30, 3))

    check(srv.restart())
    check(srv.kill_and_restart())
    srv.client().index_remove("test", "by_key")
    srv = srv.restart()
    assert "by_key" not in harness.info(srv.client(), "sindex-list:ns=test")
    srv.stop()

    plain = start_server()
    plain.client().index_integer_create("test", "p", "age", "by_age")
    plain = plain.restart()
    assert "by_age" not in harness.info(plain.client(), "sindex-list:ns=test")


def test_a_work_directory_that_cannot_be_created_refuses_the_start(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    code, output = harness.run_until_exit(service={"work-directory": str(blocker / "work")})
    assert code not in (None, 0), output
    assert "work-directory" in output and "a-file" in output, output


def test_queries_never_lie_while_writers_move_values(start_server):
    """Writers move each key's value between ranges; readers query [0, 99], whole or in pages
    (one paginated query counts as one query). For each query:
    every record returned has a value in range that some write (or the load) gave it, and
    every key whose value stayed in range for the whole query is returned: in a whole query
    (one piece: fewer than 256 entries in range) even if writes moved it within the range
    meanwhile; in a paged one, if no write touched it (pages are separate reads of the index,
    see docs/queries.md, "Guarantees")."""
    seed = seed_from_env()
    srv = start_server(namespaces=[harness.namespace("test")])
    setup = srv.client()
    keys = 300
    # Per key, its writes in order as [start, end, value]; end is infinite while in flight.
    log: dict[int, list[list]] = {k: [[0.0, 0.0, k % 200]] for k in range(keys)}
    for k in range(keys):
        setup.put(("test", "c", k), {"v": k % 200}, policy={"key": aerospike.POLICY_KEY_SEND})
    setup.index_integer_create("test", "c", "v", "cv")
    wait_built(setup, "test", "cv")
    stop = threading.Event()
    errors: list[str] = []

    def writer(index: int) -> None:
        rng = random.Random(seed + index)
        client = srv.client()
        mine = [k for k in range(keys) if k % 2 == index]  # each key has one writer
        while not stop.is_set():
            k = rng.choice(mine)
            value = rng.randrange(0, 200)
            entry = [time.monotonic(), float("inf"), value]
            log[k].append(entry)
            client.put(("test", "c", k), {"v": value}, policy={"key": aerospike.POLICY_KEY_SEND})
            entry[1] = time.monotonic()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    reader = srv.client()
    queries = 0
    try:
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            q_start = time.monotonic()
            if queries % 2 == 0:
                # One walk of the index's namespace-wide order.
                results = query(reader, "test", "c", p.between("v", 0, 99))
            else:
                # Pages of 40: the first walks the namespace-wide order, the rest resume
                # partitions after their last (value, digest).
                results = paged_query(reader, p.between("v", 0, 99), page_records=40)
            q_end = time.monotonic()
            check_query(log, q_start, q_end, results, errors, moves_allowed=queries % 2 == 0)
            queries += 1
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert queries >= 3
    assert not errors, f"seed {seed}: " + "; ".join(errors[:10])


def paged_query(client, predicate, page_records: int) -> list:
    q = client.query("test", "c")
    q.where(predicate)
    q.max_records = page_records
    q.paginate()
    results: list = []
    while not q.is_done():
        results += q.results()
    return results


def check_query(log, q_start, q_end, results, errors, moves_allowed: bool) -> None:
    returned: dict[int, int] = {}
    for (_, _, key, _), _, bins in results:
        value = bins["v"]
        if key is None:
            errors.append("a record came back without its key")
            continue
        returned[key] = value
        if not 0 <= value <= 99:
            errors.append(f"key {key} returned with {value}, outside the filter")
        # The value must be one a write gave it that could be current during the query.
        possible = [v for (s, e, v) in snapshot(log[key]) if s <= q_end]
        if value not in possible:
            errors.append(f"key {key} returned with {value}, never written")
    for key, writes in log.items():
        writes = snapshot(writes)
        during = [w for w in writes if w[1] >= q_start and w[0] <= q_end]
        before = [w for w in writes if w[1] < q_start]
        if not before or (during and not moves_allowed):
            continue
        # The last write finished before the query started (writes of one key are
        # sequential), then those overlapping it: every value the key could hold meanwhile.
        values = [before[-1][2]] + [w[2] for w in during]
        if all(0 <= v <= 99 for v in values) and key not in returned:
            errors.append(f"key {key} held {values} (all in range) during the query and was missed")


def snapshot(writes: list) -> list:
    """A copy of one key's writes (its writer appends and completes them meanwhile)."""
    return [tuple(w) for w in list(writes)]


def string_range(bin_name: bytes, begin: bytes, end: bytes) -> bytes:
    """An INDEX_RANGE on a string: equality when begin == end, else Osprey's range (an empty
    end after a non-empty begin: no upper bound)."""
    return (bytes([1, len(bin_name)]) + bin_name + bytes([3]) + struct.pack(">I", len(begin)) + begin
            + struct.pack(">I", len(end)) + end)


FIELD_INDEX_NAME = 21


def test_user_key_index_and_string_ranges_through_the_wire(server, client, uset):
    """Beyond Aerospike: `source=key` indexes the records' stored keys; a query naming it (by
    INDEX_NAME) reads the set in key order from any start key, with or without an end; a
    string range is served, but cannot resume by partition (BVAL_ARRAY holds integers)."""
    names = [f"user:{i:03}" for i in range(0, 200, 2)]
    for name in names:
        client.put(("test", uset, name), {"v": 1}, policy={"key": aerospike.POLICY_KEY_SEND})
    client.put(("test", uset, "user:999-unkeyed"), {"v": 1})  # key not stored: not indexed
    index_name = harness.unique("keys")
    create = f"sindex-create:namespace=test;set={uset};indexname={index_name};source=key;type=string"
    assert harness.raw_info(server, create) == "ok"
    assert harness.raw_info(server, f"sindex-create:namespace=test;set={uset};indexname=x;"
                            "source=key;bin=v;type=string").startswith("ERROR:4:")
    stats = wait_built(client, "test", index_name)
    assert int(stats["entries"]) == len(names)
    listed = harness.info(client, "sindex-list:ns=test")
    assert f"indexname={index_name}:set={uset}:bin=null:source=key:type=string" in listed

    def run(begin: bytes, end: bytes, **options) -> tuple[list[str], int]:
        extra = [aswire.field(FIELD_INDEX_NAME, index_name.encode())]
        frame = query_frame(uset, string_range(b"", begin, end), extra=extra, **options)
        with server.raw() as sock:
            records, last = run_raw_scan(sock, frame)
        keys = [field_map(m)[aswire.FIELD_KEY][1:].decode() for m in records]
        return keys, last.result_code

    assert run(b"user:050", b"", max_records=5) == (names[25:30], 0)
    assert run(b"user:051", b"", max_records=3) == (names[26:29], 0)
    assert run(b"user:010", b"user:020") == (names[5:11], 0)
    assert run(b"user:100", b"user:100") == (["user:100"], 0)
    assert run(b"user:2", b"") == ([], 0)
    stats = harness.parse_kv(harness.info(client, f"sindex/test/{index_name}"))
    assert int(stats["lookups"]) >= int(stats["records_returned"]) > 0
    digest = aerospike.calc_digest("test", uset, "user:050")
    _, code = run(b"user:000", b"user:100", pids=(), digests=[digest], bvals=[0])
    assert code == 4  # a string range resumed by partition: PARAMETER
    # Inverted ranges are malformed.
    _, code = run(b"user:100", b"user:010")
    assert code == 4
    client.index_remove("test", index_name)


def test_short_and_small_queries_answered_inline_match_threaded_ones(client, people):
    """A short query (the clients' expected_duration SHORT) or one wanting few records runs on
    the connection's task instead of a scan thread; the answers must not differ."""
    uset, index = people
    name = index("numeric", "age")
    threaded = query(client, "test", uset, p.between("age", 10, 20))
    short = query(client, "test", uset, p.between("age", 10, 20),
                  policy={"expected_duration": aerospike.QUERY_DURATION_SHORT})
    assert len(threaded) == 44
    assert keys_of(short) == keys_of(threaded)
    q = client.query("test", uset)
    q.where(p.between("age", 10, 20))
    q.max_records = 1000
    assert keys_of(q.results()) == keys_of(threaded)
    stats = harness.parse_kv(harness.info(client, f"sindex/test/{name}"))
    assert int(stats["query_basic_complete"]) == 3

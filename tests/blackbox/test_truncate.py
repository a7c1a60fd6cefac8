"""Truncate: a set or a whole namespace, all of it or what was last updated before a cut-off.

Aerospike (reference 9; server thr_info.c cmd_truncate / cmd_truncate_namespace, truncate.c):
`truncate:namespace=<ns>;set=<set>[;lut=<unix ns>]` and `truncate-namespace:namespace=<ns>[;lut=..]`
answer `ok`; records whose last-update time is strictly before the cut-off (now, without one) are
gone at once for clients (reads answer NOT_FOUND) and freed in the background; a record written
after the truncate survives; a cut-off in the future, a `set=` on `truncate-namespace` or an
unknown namespace are errors. The client's `truncate(ns, set, nanos)` sends `truncate` (set given)
or `truncate-namespace` (set None), with `lut=nanos` unless nanos is 0.

Cut-off tests leave 50 ms between the records before and after it: last-update times are kept
in milliseconds.
"""

from __future__ import annotations

import time

import aerospike
import pytest
from aerospike import exception as ex

import aswire
import harness

GAP_S = 0.05


def digest(ns: str, set_name: str | None, k) -> bytes:
    return bytes(aerospike.calc_digest(ns, set_name or "", k))


def scan_keys(client, ns: str, set_name: str | None) -> set:
    return {r[0][2] for r in harness.by_digest(harness.scan(client, ns, set_name)).values()}


def load(server, set_name, keys, ns="test"):
    harness.put_many(server, ns, set_name, ((k, {"k": k, "pad": "x" * 100}) for k in keys))


def assert_gone(client, ns, set_name, keys):
    for k in keys:
        with pytest.raises(ex.RecordNotFound):
            client.get((ns, set_name, k))
        _, meta = client.exists((ns, set_name, k))
        assert meta is None, (k, meta)


def wait_set_objects(client, ns, set_name, n, timeout=5.0):
    ok = harness.wait_until(lambda: harness.set_objects(client, ns, set_name) == n, timeout)
    assert ok, f"set {set_name} has {harness.set_objects(client, ns, set_name)} objects, want {n}"


# -- truncate of one set --------------------------------------------------------------------------


def test_truncate_removes_every_record_of_the_set_at_once(server, client, uset, healthy):
    other = harness.unique("s")
    load(server, uset, range(200))
    load(server, other, range(50))
    client.truncate("test", uset, 0)
    # Immediately: reads, scans and pages see nothing.
    assert_gone(client, "test", uset, range(0, 200, 13))
    assert harness.scan(client, "test", uset) == []
    assert harness.paginate(client, "test", uset, 10) == [[]]
    # Other sets are untouched.
    assert scan_keys(client, "test", other) == set(range(50))
    assert client.get(("test", other, 7))[2] == {"k": 7, "pad": "x" * 100}
    # The set's count drops once the background removal ends.
    wait_set_objects(client, "test", uset, 0)
    assert harness.set_objects(client, "test", other) == 50


def test_truncate_with_a_cut_off_removes_only_records_last_updated_before_it(server, client, uset):
    load(server, uset, range(100))
    time.sleep(GAP_S)
    cut = time.time_ns()
    time.sleep(GAP_S)
    load(server, uset, range(100, 180))
    for k in range(0, 100, 10):  # written before the cut-off, updated after it: they stay
        client.put(("test", uset, k), {"k": k, "late": True})
    client.truncate("test", uset, cut)

    survivors = set(range(100, 180)) | set(range(0, 100, 10))
    assert scan_keys(client, "test", uset) == survivors
    assert_gone(client, "test", uset, [k for k in range(100) if k % 10][:20])
    assert client.get(("test", uset, 10))[2] == {"k": 10, "pad": "x" * 100, "late": True}
    assert client.get(("test", uset, 150))[2] == {"k": 150, "pad": "x" * 100}
    wait_set_objects(client, "test", uset, len(survivors))


def test_a_record_written_right_after_a_truncate_survives(client, uset):
    for i in range(20):
        client.truncate("test", uset, 0)
        client.put(("test", uset, f"new{i}"), {"i": i})
        _, _, bins = client.get(("test", uset, f"new{i}"))
        assert bins == {"i": i}, f"a write just after truncate #{i} was lost"
    assert harness.by_digest(harness.scan(client, "test", uset)).keys() >= {digest("test", uset, "new19")}


def test_truncates_in_quick_succession_each_remove_what_was_written_before_them(server, client, uset):
    """truncate(ns, set, 0) removes "all records of the set up to now", and a record written after
    it survives. Pipelined on one connection, many truncates and writes fall in the same
    millisecond: each truncate must still remove the write just before it, and spare the one
    just after it."""

    def get(k):
        fields = aswire.record_fields("test", uset, aerospike.calc_digest("test", uset, k))
        return aswire.as_msg(fields, [], info1=aswire.INFO1_READ | aswire.INFO1_GET_ALL)

    frames = []
    for i in range(20):
        frames += [
            harness.put_frame("test", uset, f"old{i}", {"i": i}),
            aswire.info_frame([f"truncate:namespace=test;set={uset}"]),
            harness.put_frame("test", uset, f"new{i}", {"i": i}),
            get(f"old{i}"),
            get(f"new{i}"),
        ]
    with server.raw() as s:
        s.sendall(b"".join(frames))

        def result_code():
            _, ptype, body = aswire.recv_frame(s)
            assert ptype == aswire.TYPE_MSG
            return aswire.parse_msg(body).result_code

        survivors = []
        for i in range(20):
            assert result_code() == 0
            _, ptype, body = aswire.recv_frame(s)
            assert ptype == aswire.TYPE_INFO and body.decode().rstrip("\n").endswith("\tok"), body
            assert result_code() == 0
            if result_code() != aswire.NOT_FOUND:
                survivors.append(f"old{i}")
            assert result_code() == 0, f"new{i} was lost to the truncate before it"
    assert not survivors, f"records written before a truncate survived it: {survivors}"
    # new19 was written after the last truncate; everything else came before one.
    assert {r[0][2] for r in harness.scan(client, "test", uset)} == {"new19"}
    wait_set_objects(client, "test", uset, 1)


def test_a_truncated_key_written_again_is_a_new_record(client, uset):
    key = ("test", uset, "k")
    for i in range(3):
        client.put(key, {"v": i})
    assert client.get(key)[1]["gen"] == 3
    client.truncate("test", uset, 0)
    with pytest.raises(ex.RecordNotFound):
        client.touch(key)
    with pytest.raises(ex.RecordNotFound):
        client.remove(key)
    # A create-only write succeeds: the truncated record no longer exists.
    client.put(key, {"w": 1}, policy={"exists": aerospike.POLICY_EXISTS_CREATE})
    _, meta, bins = client.get(key)
    assert bins == {"w": 1}  # no bin of the truncated record comes back
    assert meta["gen"] == 1


def test_truncate_of_a_set_that_does_not_exist_is_accepted(client, uset):
    client.truncate("test", uset, 0)
    client.put(("test", uset, 1), {"a": 1})
    assert scan_keys(client, "test", uset) == {None}  # key not stored by client.put


# -- truncate of a namespace and statistics (servers of their own) ---------------------------------


@pytest.fixture
def two_ns_server(start_server):
    return start_server(namespaces=[harness.namespace("test", nsup_period=1), harness.namespace("keep", nsup_period=1)])


def load_namespace(srv, ns="test"):
    load(srv, "a", range(120), ns=ns)
    load(srv, "b", range(1000, 1080), ns=ns)
    load(srv, None, range(2000, 2040), ns=ns)
    return 240


@pytest.mark.parametrize("how", ["info", "client"])
def test_truncate_namespace_removes_every_set_and_records_without_set(two_ns_server, how):
    srv = two_ns_server
    c = srv.client()
    load_namespace(srv)
    kept = load_namespace(srv, ns="keep")
    if how == "info":
        assert harness.raw_info(srv, "truncate-namespace:namespace=test") == "ok"
    else:
        c.truncate("test", None, 0)
    assert harness.scan(c, "test", None) == []
    assert_gone(c, "test", "a", range(0, 120, 17))
    assert_gone(c, "test", None, [2000, 2039])
    # Another namespace is untouched.
    assert len(harness.scan(c, "keep", None)) == kept
    assert harness.wait_until(lambda: harness.ns_objects(c, "test") == 0, 5), harness.ns_objects(c, "test")
    for s in ("a", "b"):
        wait_set_objects(c, "test", s, 0)
    assert harness.ns_objects(c, "keep") == kept
    # Writes after it stay.
    c.put(("test", "a", 5), {"again": 1})
    assert c.get(("test", "a", 5))[2] == {"again": 1}
    assert harness.ns_objects(c, "test") == 1


def test_truncate_namespace_with_a_cut_off(two_ns_server):
    srv = two_ns_server
    c = srv.client()
    load(srv, "a", range(100))
    load(srv, None, range(500, 520))
    time.sleep(GAP_S)
    cut = time.time_ns()
    time.sleep(GAP_S)
    load(srv, "b", range(1000, 1030))
    load(srv, None, range(520, 530))
    assert harness.raw_info(srv, f"truncate-namespace:namespace=test;lut={cut}") == "ok"
    got = harness.by_digest(harness.scan(c, "test", None))
    assert set(got) == {digest("test", "b", k) for k in range(1000, 1030)} | {
        digest("test", None, k) for k in range(520, 530)
    }
    assert harness.wait_until(lambda: harness.ns_objects(c, "test") == 40, 5), harness.ns_objects(c, "test")


def test_truncated_records_and_the_size_statistics_follow_a_truncate(two_ns_server):
    srv = two_ns_server
    c = srv.client()
    n = load_namespace(srv)
    stats = harness.ns_stats(c, "test")
    assert int(stats["objects"]) == n
    assert int(stats["truncated_records"]) == 0
    a = harness.set_info(c, "test", "a")
    assert int(a["objects"]) == 120 and int(a["data_used_bytes"]) > 120 * 100

    c.truncate("test", "a", 0)
    ok = harness.wait_until(lambda: int(harness.ns_stats(c, "test")["truncated_records"]) == 120, 5)
    assert ok, harness.ns_stats(c, "test")["truncated_records"]
    after = harness.ns_stats(c, "test")
    assert int(after["objects"]) == n - 120
    assert int(after["data_used_bytes"]) < int(stats["data_used_bytes"])
    assert int(after["index_used_bytes"]) < int(stats["index_used_bytes"])
    a = harness.set_info(c, "test", "a")
    assert int(a["objects"]) == 0 and int(a["data_used_bytes"]) == 0
    assert int(harness.set_info(c, "test", "b")["objects"]) == 80

    assert harness.raw_info(srv, "truncate-namespace:namespace=test") == "ok"
    ok = harness.wait_until(lambda: int(harness.ns_stats(c, "test")["truncated_records"]) == n, 5)
    assert ok, harness.ns_stats(c, "test")["truncated_records"]
    final = harness.ns_stats(c, "test")
    assert int(final["objects"]) == 0 and int(final["data_used_bytes"]) == 0
    assert int(harness.ns_stats(c, "keep")["truncated_records"]) == 0


# -- refusals -------------------------------------------------------------------------------------


def future_ns() -> int:
    return time.time_ns() + 3600 * 10**9


REFUSED = {
    "truncate-namespace with a set": lambda s: f"truncate-namespace:namespace=test;set={s}",
    "truncate-namespace of an unknown namespace": lambda s: "truncate-namespace:namespace=no-such-ns",
    "truncate in an unknown namespace": lambda s: f"truncate:namespace=no-such-ns;set={s}",
    "truncate with a cut-off in the future": lambda s: f"truncate:namespace=test;set={s};lut={future_ns()}",
    "truncate-namespace with a cut-off in the future": lambda s: f"truncate-namespace:namespace=test;lut={future_ns()}",
    "truncate without a set": lambda s: "truncate:namespace=test",
    "truncate without a namespace": lambda s: f"truncate:set={s}",
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_truncate_is_an_error_and_removes_nothing(server, client, uset, case):
    load(server, uset, range(30))
    reply = harness.raw_info(server, REFUSED[case](uset))
    assert reply.startswith("ERROR"), reply
    assert scan_keys(client, "test", uset) == set(range(30))
    assert harness.set_objects(client, "test", uset) == 30


def test_client_truncate_with_a_future_cut_off_raises(server, client, uset):
    load(server, uset, range(10))
    with pytest.raises(ex.AerospikeError):
        client.truncate("test", uset, future_ns())
    assert scan_keys(client, "test", uset) == set(range(10))

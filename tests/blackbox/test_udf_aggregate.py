"""Aggregations (stream UDFs, UDF_OP 1) through the official Python client: `query.apply` then
`results()`. The server runs the stream function's operations up to its first reduce over each
partition's selected records and sends every value in a `SUCCESS` bin; the client runs the
final reduce in its own Lua, from the module copy in its `user_path`. Every expected result is
computed here, in Python, from the records the test wrote.

Also: a secondary-index filter, a filter expression, empty and unknown sets, a failing and a
runaway stream function (the client gets an error, the server serves on), malformed requests
answered PARAMETER over the raw protocol, and a three-node cluster, where each node aggregates
the partitions it masters.
"""

from __future__ import annotations

import collections
import socket
import struct
import threading
import time

import aerospike
import pytest
from aerospike import exception as ex
from aerospike import predicates as p
from aerospike_helpers import expressions as exp

import aswire
import harness
from test_cluster import cluster  # noqa: F401  (the three-node fixture)
from test_scan import ScanStream

MODULE = """
local function one(r) return 1 end
local function add(a, b) return a + b end

function count(s)
  return s : map(one) : reduce(add)
end

function sum(s, bin)
  return s : map(function(r) return r[bin] end) : reduce(add)
end

function sum_above(s, bin, floor)
  return s : filter(function(r) return r[bin] > floor end)
           : map(function(r) return r[bin] end)
           : reduce(add)
end

function sum_bins(s, bins, factor)
  local function total(r)
    local t = 0
    for b in list.iterator(bins) do t = t + (r[b] or 0) end
    return t * factor
  end
  return s : map(total) : reduce(add)
end

function values(s, bin)
  return s : map(function(r) return r[bin] end)
end

function count_by(s, bin)
  local function fold(groups, r)
    local k = r[bin]
    groups[k] = (groups[k] or 0) + 1
    return groups
  end
  local function merge(a, b) return map.merge(a, b, add) end
  return s : aggregate(map(), fold) : reduce(merge)
end

function describe(s)
  return s : map(function(r)
    return map{set = record.setname(r), gen = record.gen(r), bins = record.numbins(r),
               digest_size = bytes.size(record.digest(r))}
  end)
end

function boom(s)
  return s : map(function(r) error('boom') end)
end

function forever(s)
  return s : map(function(r) while true do end end)
end

function writes(s)
  return s : map(function(r) r['n'] = -1; return 1 end) : reduce(add)
end

function partial_counts(s)
  return s : aggregate(0, function(n, r) return n + 1 end)
end
"""

SET = "agg"
RECORDS = 300


def record(i: int) -> dict:
    return {"n": i, "m": i % 7, "g": ["red", "green", "blue"][i % 3]}


@pytest.fixture(scope="module")
def osprey(tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    server = harness.start_server(service={"work-directory": str(work)}, tag="osprey-aggregate")
    yield server
    server.close_clients()
    server.stop()


@pytest.fixture(scope="module")
def lua_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("lua")


@pytest.fixture(scope="module")
def aero(osprey, lua_dir):
    client = harness.client_with_udf(osprey, lua_dir, "agg.lua", MODULE)
    for i in range(RECORDS):
        client.put(("test", SET, i), record(i))
    # Records of another set, which no aggregation of SET may see.
    for i in range(20):
        client.put(("test", SET + "-other", i), {"n": 1000 + i, "m": 0, "g": "red"})
    return client


def aggregate(client, set_name: str, function: str, args: list, *, where=None, policy=None):
    query = client.query("test", set_name)
    if where is not None:
        query.where(where)
    query.apply("agg", function, args)
    return query.results(policy or {})


def test_count_counts_the_records_of_the_set(aero):
    assert aggregate(aero, SET, "count", []) == [RECORDS]


def test_sum_of_a_bin(aero):
    assert aggregate(aero, SET, "sum", ["n"]) == [sum(range(RECORDS))]


def test_filter_map_reduce_with_arguments_from_the_client(aero):
    expected = sum(i for i in range(RECORDS) if i > 123)
    assert aggregate(aero, SET, "sum_above", ["n", 123]) == [expected]


def test_arguments_of_every_type_reach_the_stream_function(aero):
    expected = sum((record(i)["n"] + record(i)["m"]) * 3 for i in range(RECORDS))
    assert aggregate(aero, SET, "sum_bins", [["n", "m", "missing"], 3]) == [expected]


def test_an_aggregate_into_a_map_groups_by_a_bin(aero):
    expected = collections.Counter(record(i)["g"] for i in range(RECORDS))
    [groups] = aggregate(aero, SET, "count_by", ["g"])
    assert groups == dict(expected)


def test_without_a_reduce_the_client_gets_every_value(aero):
    values = aggregate(aero, SET, "values", ["n"])
    assert sorted(values) == list(range(RECORDS))


def test_without_a_reduce_each_partition_with_records_sends_its_own_aggregate(aero):
    """As Aerospike, the server runs the stream once per partition that has selected records
    (and only those: an empty partition would send the aggregate's initial value, 0)."""
    partitions = collections.Counter(
        pid_of(aerospike.calc_digest("test", SET, i)) for i in range(RECORDS)
    )
    counts = aggregate(aero, SET, "partial_counts", [])
    assert sorted(counts) == sorted(partitions.values())


def pid_of(digest: bytes) -> int:
    return (digest[0] | (digest[1] << 8)) & 0x0FFF


def test_the_stream_sees_whole_records_and_their_metadata_whatever_the_selection(aero):
    query = aero.query("test", SET)
    query.select("n")
    query.apply("agg", "describe", [])
    described = query.results()
    assert len(described) == RECORDS
    assert all(d == {"set": SET, "gen": 1, "bins": 3, "digest_size": 20} for d in described)


def test_a_secondary_index_query_aggregates_only_the_records_in_range(aero):
    aero.index_integer_create("test", SET, "n", "agg_n")
    try:
        ready = lambda: aggregate(aero, SET, "count", [], where=p.equals("n", 5)) == [1]  # noqa: E731
        assert harness.wait_until(ready, 5), "the index never served the query"
        in_range = [i for i in range(RECORDS) if 40 <= i <= 139]
        assert aggregate(aero, SET, "count", [], where=p.between("n", 40, 139)) == [len(in_range)]
        assert aggregate(aero, SET, "sum", ["n"], where=p.between("n", 40, 139)) == [sum(in_range)]
        expected = collections.Counter(record(i)["g"] for i in in_range)
        [groups] = aggregate(aero, SET, "count_by", ["g"], where=p.between("n", 40, 139))
        assert groups == dict(expected)
    finally:
        aero.index_remove("test", "agg_n")


def test_a_filter_expression_keeps_its_records_out_of_the_stream(aero):
    # Aerospike 8 refuses an aggregation with a filter expression (16); Osprey applies it.
    odd = exp.Eq(exp.Mod(exp.IntBin("n"), 2), 1).compile()
    expected = sum(i for i in range(RECORDS) if i % 2 == 1)
    assert aggregate(aero, SET, "sum", ["n"], policy={"expressions": odd}) == [expected]


def test_an_empty_set_and_an_unknown_set_aggregate_to_nothing(aero):
    aero.put(("test", "agg-emptied", 1), {"n": 1})
    aero.remove(("test", "agg-emptied", 1))
    assert aggregate(aero, "agg-emptied", "count", []) == []
    assert aggregate(aero, "agg-never-written", "count", []) == []


def test_a_lua_error_fails_the_query_and_the_server_serves_on(aero, osprey):
    with pytest.raises(ex.AerospikeError) as error:
        aggregate(aero, SET, "boom", [])
    # The C client reports a FAILURE bin as a client error carrying the server's text.
    assert "UDF: Execution Error 2" in str(error.value.msg), error.value.msg
    assert "agg.lua:" in str(error.value.msg) and "boom" in str(error.value.msg)
    other = osprey.client()
    assert other.get(("test", SET, 7))[2] == record(7)
    assert aggregate(aero, SET, "count", []) == [RECORDS]


def test_a_missing_function_or_module_fails_as_aerospike_words_it(aero, osprey, lua_dir):
    with pytest.raises(ex.AerospikeError) as error:
        aggregate(aero, SET, "no_such_function", [])
    assert "function not found" in str(error.value.msg), error.value.msg
    # Known to the client's Lua, never registered on the server.
    (lua_dir / "unregistered.lua").write_text(MODULE)
    query = aero.query("test", SET)
    query.apply("unregistered", "count", [])
    with pytest.raises(ex.AerospikeError) as error:
        query.results()
    assert "UDF: Execution Error 1" in str(error.value.msg), error.value.msg


def test_records_are_read_only_in_a_stream(aero):
    with pytest.raises(ex.AerospikeError) as error:
        aggregate(aero, SET, "writes", [])
    assert "read-only" in str(error.value.msg), error.value.msg
    assert aero.get(("test", SET, 3))[2] == record(3)


@pytest.mark.timeout_s(60)
def test_a_runaway_stream_ends_at_its_deadline_while_other_clients_are_served(aero, osprey):
    outcome: dict = {}

    def run_forever():
        started = time.monotonic()
        try:
            aggregate(aero, SET, "forever", [])
            outcome["error"] = None
        except ex.AerospikeError as e:
            outcome["error"] = e
        outcome["seconds"] = time.monotonic() - started

    runner = threading.Thread(target=run_forever)
    runner.start()
    other = osprey.client()
    slowest = 0.0
    while runner.is_alive():
        started = time.monotonic()
        assert other.get(("test", SET, 11))[2] == record(11)
        slowest = max(slowest, time.monotonic() - started)
        time.sleep(0.02)
    runner.join()
    assert outcome["error"] is not None, "a runaway stream must fail"
    assert "UDF Execution Timeout" in str(outcome["error"].msg), outcome["error"].msg
    assert outcome["seconds"] < 10, outcome
    assert slowest < 0.5, f"a get waited {slowest:.3f} s behind the runaway aggregation"
    assert aggregate(aero, SET, "count", []) == [RECORDS]


# -- the raw protocol ------------------------------------------------------------------------------

FIELD_UDF_FILENAME, FIELD_UDF_FUNCTION, FIELD_UDF_ARGLIST, FIELD_UDF_OP = 30, 31, 32, 33
PARAMETER = 4
UDF_BAD_RESPONSE = 100


def raw_aggregation(osprey, module: bytes, function: bytes, arglist: bytes, op: bytes = b"\x01"):
    """An aggregation as the C client sends it (to one node, without partitions): the reply's
    messages before LAST, and LAST."""
    fields = [
        aswire.ns_field("test"),
        aswire.set_field(SET),
        aswire.field(7, struct.pack(">Q", 77)),  # TRID
        aswire.field(FIELD_UDF_FILENAME, module),
        aswire.field(FIELD_UDF_FUNCTION, function),
        aswire.field(FIELD_UDF_ARGLIST, arglist),
        aswire.field(FIELD_UDF_OP, op),
    ]
    with osprey.raw() as s:
        s.sendall(aswire.as_msg(fields, [], info1=aswire.INFO1_READ))
        stream = ScanStream(s)
        last = stream.read_to_end(timeout=10)
        return stream.records, last


def test_raw_values_come_in_success_bins_and_a_failure_in_a_failure_bin(aero, osprey):
    values, last = raw_aggregation(osprey, b"agg", b"count", b"\x90")
    assert last.result_code == 0
    assert all(not m.fields and list(m.bins()) == ["SUCCESS"] for m in values), values
    assert sum(m.bins()["SUCCESS"] for m in values) == RECORDS
    failed, last = raw_aggregation(osprey, b"agg", b"boom", b"\x90")
    assert [list(m.bins()) for m in failed] == [["FAILURE"]]
    assert failed[0].result_code == 0
    assert last.result_code == UDF_BAD_RESPONSE


def test_raw_malformed_udf_fields_answer_parameter(aero, osprey):
    _, last = raw_aggregation(osprey, b"agg", b"count", b"\x01")  # arglist not a list
    assert last.result_code == PARAMETER
    _, last = raw_aggregation(osprey, b"agg", b"count", b"\x90", op=b"\x03")  # no such UDF_OP
    assert last.result_code == PARAMETER
    assert aggregate(aero, SET, "count", []) == [RECORDS]


# -- a three-node cluster --------------------------------------------------------------------------


def test_a_cluster_aggregates_each_record_once_on_its_master(cluster, tmp_path):  # noqa: F811
    seed = cluster[0]
    client = aerospike.client(
        harness.client_config(seed.port, lua={"user_path": str(tmp_path)})
    ).connect()
    try:
        module = tmp_path / "agg.lua"
        module.write_text(MODULE)
        client.udf_put(str(module))
        for node in cluster:
            deadline = time.monotonic() + 10
            while "filename=agg.lua" not in info_value(node, "udf-list"):
                assert time.monotonic() < deadline, "the module never reached a node"
                time.sleep(0.1)
        for i in range(RECORDS):
            client.put(("test", "agg-cluster", i), record(i))
        assert aggregate(client, "agg-cluster", "count", []) == [RECORDS]
        assert aggregate(client, "agg-cluster", "sum", ["n"]) == [sum(range(RECORDS))]
        expected = collections.Counter(record(i)["g"] for i in range(RECORDS))
        [groups] = aggregate(client, "agg-cluster", "count_by", ["g"])
        assert groups == dict(expected)
    finally:
        client.close()


def info_value(server, command: str) -> str:
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        return dict(aswire.request_info(sock, [command]))[command]

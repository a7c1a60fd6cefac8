"""Lua record UDFs through the official Python client: registering modules (udf_put, udf_list,
udf_get, udf_remove, kept across a restart), apply on a record, its failures answered as
UDF_BAD_RESPONSE (100) with the Lua error, runaway scripts stopped while the server serves on,
and batch apply."""

from __future__ import annotations

import base64
import time

import aerospike
import pytest
from aerospike import exception as ex

import aswire
import harness

MODULE = """
function add(rec, bin, n)
  rec[bin] = (rec[bin] or 0) + n
  if aerospike:exists(rec) then aerospike:update(rec) else aerospike:create(rec) end
  return rec[bin]
end

function fail(rec)
  error("boom")
end

function loop(rec)
  while true do end
end

function grow(rec)
  local t = {}
  for i = 1, 100000000 do t[i] = string.rep("x", 1000) end
end

function drop(rec)
  aerospike:remove(rec)
  return 1
end

function meta(rec)
  local names = list()
  for _, name in ipairs(record.bin_names(rec)) do list.append(names, name) end
  return map{gen = record.gen(rec), set = record.setname(rec), bins = names}
end

function place(rec, lng, lat)
  rec["where"] = geojson('{"type": "Point", "coordinates": [' .. lng .. ', ' .. lat .. ']}')
  if aerospike:exists(rec) then aerospike:update(rec) else aerospike:create(rec) end
  return 1
end

function misplace(rec)
  rec["where"] = geojson('{"type": "Nowhere"}')
  return aerospike:update(rec)
end

function lists(rec)
  local l = list{1, 2, 3}
  list.append(l, "four")
  rec["l"] = l
  aerospike:update(rec)
  return list.size(l)
end
"""

UDF_BAD_RESPONSE = 100


@pytest.fixture(scope="module")
def osprey(tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    server = harness.start_server(service={"work-directory": str(work)}, tag="osprey-udf")
    yield server
    server.close_clients()
    server.stop()


@pytest.fixture(scope="module")
def aero(osprey, tmp_path_factory):
    return harness.client_with_udf(osprey, tmp_path_factory.mktemp("lua"), "counters.lua", MODULE)


def test_a_registered_module_is_listed_and_read_back(aero):
    listed = {module["name"]: module for module in aero.udf_list()}
    assert "counters.lua" in listed
    assert listed["counters.lua"]["type"] == aerospike.UDF_TYPE_LUA
    assert aero.udf_get("counters.lua") == MODULE


def test_apply_creates_and_updates_a_record(aero):
    key = ("test", "udf", "counter")
    assert aero.apply(key, "counters", "add", ["n", 5]) == 5
    assert aero.apply(key, "counters", "add", ["n", 2]) == 7
    _, meta, bins = aero.get(key)
    assert bins == {"n": 7}
    assert meta["gen"] == 2
    described = aero.apply(key, "counters", "meta", [])
    assert described == {"gen": 2, "set": "udf", "bins": ["n"]}
    assert aero.apply(key, "counters", "lists", []) == 4
    assert aero.get(key)[2]["l"] == [1, 2, 3, "four"]
    assert aero.apply(key, "counters", "drop", []) == 1
    with pytest.raises(ex.RecordNotFound):
        aero.get(key)


def test_a_record_a_udf_writes_takes_the_ttl_the_command_asks_for(aero):
    """The Go client's UDF spec: a record created by a UDF under a write policy of 1000 s
    expired never, because the edit ignored the command's TTL."""
    key = ("test", "udf", "ttl")
    assert aero.apply(key, "counters", "add", ["n", 1], policy={"ttl": 1000}) == 1
    _, meta, _ = aero.get(key)
    assert 990 <= meta["ttl"] <= 1000, meta


def test_a_lua_error_answers_100_with_its_message_and_changes_nothing(aero):
    key = ("test", "udf", "failing")
    aero.put(key, {"a": 1})
    with pytest.raises(ex.UDFError) as error:
        aero.apply(key, "counters", "fail", [])
    assert error.value.code == UDF_BAD_RESPONSE
    assert "boom" in str(error.value.msg)
    with pytest.raises(ex.UDFError) as error:
        aero.apply(key, "counters", "no_such_function", [])
    assert "function not found" in str(error.value.msg)
    _, meta, bins = aero.get(key)
    assert bins == {"a": 1} and meta["gen"] == 1


def test_runaway_scripts_are_stopped_and_the_server_serves_on(aero):
    key = ("test", "udf", "runaway")
    aero.put(key, {"a": 1})
    for function in ("loop", "grow"):
        started = time.monotonic()
        with pytest.raises(ex.UDFError):
            aero.apply(key, "counters", function, [], policy={"total_timeout": 10_000})
        assert time.monotonic() - started < 8, function
        assert aero.get(key)[2] == {"a": 1}


def test_batch_apply_runs_the_udf_per_record(aero):
    keys = [("test", "udf", f"batch-{i}") for i in range(4)]
    rows = aero.batch_apply(keys, "counters", "add", ["n", 3]).batch_records
    assert [row.result for row in rows] == [0, 0, 0, 0]
    assert [aero.get(k)[2] for k in keys] == [{"n": 3}] * 4


def test_geojson_a_udf_writes_is_found_by_a_geo_index(aero, uset):
    """A UDF's GeoJSON is stored with its cells, as a client's is: a geo index finds it; one
    that is not valid GeoJSON fails the write (`aerospike:update` returns
    GEO_INVALID_GEOJSON, 160) and the record keeps its point."""
    name = harness.unique("where")
    aero.index_geo2dsphere_create("test", uset, "where", name)
    try:
        for i, (lng, lat) in enumerate([(-122.0, 37.5), (-121.0, 37.4), (10.0, 50.0)]):
            aero.apply(("test", uset, i), "counters", "place", [lng, lat])
        deadline = time.monotonic() + 20
        while harness.parse_kv(harness.info(aero, f"sindex/test/{name}"))["load_pct"] != "100":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        region = aerospike.GeoJSON({"type": "AeroCircle", "coordinates": [[-121.5, 37.45], 100000]})
        q = aero.query("test", uset)
        q.where(aerospike.predicates.geo_within_geojson_region("where", region.dumps()))
        found = sorted(record[2]["where"].dumps() for record in q.results())
        assert len(found) == 2 and all('"coordinates": [-12' in point for point in found), found
        before = aero.get(("test", uset, 0))[2]["where"].dumps()
        assert aero.apply(("test", uset, 0), "counters", "misplace", []) == 160
        assert aero.get(("test", uset, 0))[2]["where"].dumps() == before
    finally:
        aero.index_remove("test", name)


def test_a_module_that_does_not_compile_is_refused_with_its_error(osprey):
    bad = "function broken(rec) return end end\n"
    content = base64.b64encode(bad.encode()).decode()
    reply = harness.raw_info(
        osprey,
        f"udf-put:filename=broken.lua;content-len={len(content)};udf-type=LUA;content={content}",
    )
    assert reply.startswith("error=compile_error;file=broken.lua;line=1;message="), reply
    assert "filename=broken.lua" not in harness.raw_info(osprey, "udf-list")


def test_a_raw_apply_of_a_missing_module_answers_100_and_the_connection_stays_in_step(osprey):
    digest = aerospike.calc_digest("test", "udf", "raw")
    fields = aswire.record_fields("test", "udf", digest) + [
        aswire.field(30, b"missing"),
        aswire.field(31, b"function"),
        aswire.field(32, b"\x90"),
    ]
    with osprey.raw() as s:
        reply = aswire.request_msg(s, aswire.as_msg(fields, info2=aswire.INFO2_WRITE))
        assert reply.result_code == UDF_BAD_RESPONSE
        assert [op.name for op in reply.ops] == ["FAILURE"]
        assert aswire.request_info(s, ["node"])[0][0] == "node"


def test_modules_survive_a_restart_and_removal_is_kept_too(osprey, tmp_path):
    source = "function one(rec) return 1 end\n"
    content = base64.b64encode(source.encode()).decode()
    put = f"udf-put:filename=kept.lua;content-len={len(content)};udf-type=LUA;content={content}"
    assert harness.raw_info(osprey, put) == "ok"
    osprey.restart()
    client = osprey.client(lua={"user_path": str(tmp_path)})
    assert client.apply(("test", "udf", "after-restart"), "kept", "one", []) == 1
    assert harness.raw_info(osprey, "udf-remove:filename=kept.lua") == "ok"
    osprey.restart()
    assert "filename=kept.lua" not in harness.raw_info(osprey, "udf-list")
    for entry in harness.raw_info(osprey, "udf-list").split(";"):
        if entry:
            fields = dict(part.split("=", 1) for part in entry.split(","))
            assert len(fields["hash"]) == 40 and fields["type"] == "LUA"


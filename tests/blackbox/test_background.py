"""Background queries and scans through the official Python client: write ops
(`query.add_ops` + `execute_background`) and record UDFs (`query.apply` + `execute_background`)
applied to every record the query selects (a set, a secondary-index filter, a filter
expression) and to no other, followed to the end with `job_info` (`query-show`)."""

from __future__ import annotations

import time

import aerospike
import pytest
from aerospike import predicates as p
from aerospike_helpers import expressions as exp
from aerospike_helpers.operations import operations as ops

import harness

MODULE = """
function bump(rec, bin, n)
  rec[bin] = (rec[bin] or 0) + n
  aerospike:update(rec)
  return rec[bin]
end
"""


@pytest.fixture(scope="module")
def osprey(tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    server = harness.start_server(service={"work-directory": str(work)}, tag="osprey-background")
    yield server
    server.close_clients()
    server.stop()


@pytest.fixture(scope="module")
def aero(osprey, tmp_path_factory):
    return harness.client_with_udf(osprey, tmp_path_factory.mktemp("lua"), "background.lua", MODULE)


def fill(client, set_name: str, count: int = 100) -> None:
    for i in range(count):
        client.put(("test", set_name, i), {"n": i, "mark": 0})
    # A record of another set, which no job here may touch.
    client.put(("test", set_name + "-other", 0), {"n": 1, "mark": 0})


def wait_done(client, job: int) -> dict:
    deadline = time.monotonic() + 10
    while True:
        info = client.job_info(job, aerospike.JOB_QUERY)
        if info["status"] == aerospike.JOB_STATUS_COMPLETED:
            return info
        assert time.monotonic() < deadline, info
        time.sleep(0.05)


def marks(client, set_name: str, count: int = 100) -> dict[int, int]:
    return {i: client.get(("test", set_name, i))[2]["mark"] for i in range(count)}


def query_show(client, job: int) -> dict[str, str]:
    line = harness.info(client, f"query-show:trid={job}")
    return dict(item.split("=", 1) for item in line.strip().split(":") if "=" in item)


def test_background_ops_write_every_record_of_a_set_scan(aero):
    fill(aero, "bg_all")
    query = aero.query("test", "bg_all")
    query.add_ops([ops.write("mark", 1), ops.increment("n", 1000)])
    job = query.execute_background()
    wait_done(aero, job)
    assert set(marks(aero, "bg_all").values()) == {1}
    assert aero.get(("test", "bg_all", 7))[2]["n"] == 1007
    assert aero.get(("test", "bg_all-other", 0))[2]["mark"] == 0
    shown = query_show(aero, job)
    assert shown["job-type"] == "background-ops", shown
    assert shown["recs-succeeded"] == "100", shown
    assert shown["recs-failed"] == "0", shown


def test_background_ops_with_an_index_filter_write_only_the_selected_records(aero):
    fill(aero, "bg_index")
    aero.index_integer_create("test", "bg_index", "n", "bg_index_n")
    time.sleep(0.5)
    query = aero.query("test", "bg_index")
    query.where(p.between("n", 10, 19))
    query.add_ops([ops.write("mark", 2)])
    job = query.execute_background()
    wait_done(aero, job)
    expected = {i: 2 if 10 <= i <= 19 else 0 for i in range(100)}
    assert marks(aero, "bg_index") == expected
    assert query_show(aero, job)["recs-succeeded"] == "10"
    aero.index_remove("test", "bg_index_n")


def test_background_ops_with_a_filter_expression_skip_the_records_it_rejects(aero):
    fill(aero, "bg_filter")
    query = aero.query("test", "bg_filter")
    query.add_ops([ops.write("mark", 3)])
    even = exp.Eq(exp.Mod(exp.IntBin("n"), 2), 0).compile()
    job = query.execute_background(policy={"expressions": even})
    wait_done(aero, job)
    expected = {i: 3 if i % 2 == 0 else 0 for i in range(100)}
    assert marks(aero, "bg_filter") == expected
    assert query_show(aero, job)["recs-succeeded"] == "50"


def test_background_udf_runs_on_every_selected_record(aero):
    fill(aero, "bg_udf")
    aero.index_integer_create("test", "bg_udf", "n", "bg_udf_n")
    time.sleep(0.5)
    query = aero.query("test", "bg_udf")
    query.where(p.between("n", 0, 49))
    query.apply("background", "bump", ["mark", 5])
    job = query.execute_background()
    wait_done(aero, job)
    expected = {i: 5 if i < 50 else 0 for i in range(100)}
    assert marks(aero, "bg_udf") == expected
    shown = query_show(aero, job)
    assert shown["job-type"] == "background-udf", shown
    assert shown["recs-succeeded"] == "50", shown
    aero.index_remove("test", "bg_udf_n")


def test_a_failing_background_udf_counts_its_records_as_failed(aero):
    fill(aero, "bg_udf_fail", count=10)
    query = aero.query("test", "bg_udf_fail")
    query.apply("background", "missing_function", [])
    job = query.execute_background()
    wait_done(aero, job)
    shown = query_show(aero, job)
    assert shown["recs-failed"] == "10", shown
    assert shown["recs-succeeded"] == "0", shown

"""osprey-bench's query workloads (`--query lookup|range|ordered`) against Osprey (both of its
protocols) and Debian's redis-server: each creates what it reads from, checks every reply's
size, and reports its commands; a run over keys that were never loaded fails clearly; and
`--testbin-index` creates and drops the index the writes comparison needs.
"""

from __future__ import annotations

import pytest

import benchtool
import harness
from test_bench_redis import redis_server  # noqa: F401 (a fixture)

KEYS = "2000"


@pytest.fixture
def osprey(start_server):
    srv = start_server(namespaces=[harness.namespace("test")])
    yield srv, srv.client()


def measured(lines: list[dict]) -> dict[str, dict]:
    return {line["name"]: line for line in lines}


def test_lookup_and_range_on_osprey_check_their_answers(osprey):
    srv, client = osprey
    common = ["-p", str(srv.port), "-s", "q", "-k", KEYS]
    benchtool.run(*common, "-w", "I", "-o", "I,S:20", "-z", "2")
    lookup = measured(benchtool.run_json(*common, "--query", "lookup", "-t", "1", "-z", "1"))
    assert set(lookup) == {"get", "lookup"}
    assert lookup["get"]["commands"] == lookup["lookup"]["commands"] > 10
    assert 0 < lookup["lookup"]["p50_us"] <= lookup["lookup"]["p99_us"]
    stats = harness.parse_kv(harness.info(client, "sindex/test/osprey_bench_testbin"))
    assert stats["entries"] == KEYS and int(stats["query_basic_complete"]) >= lookup["lookup"]["commands"]
    (ranged,) = benchtool.run_json(*common, "--query", "range", "-t", "1", "-z", "2")
    assert ranged["name"] == "range" and ranged["commands"] > 10
    # Every range query returned 10 records.
    stats = harness.parse_kv(harness.info(client, "sindex/test/osprey_bench_testbin"))
    assert int(stats["records_returned"]) == lookup["lookup"]["commands"] + 10 * ranged["commands"]


def test_range_and_ordered_on_redis_build_their_sorted_sets(redis_server):  # noqa: F811
    port, redis_client = redis_server
    common = ["-p", str(port), "--protocol", "redis", "-k", "500"]
    benchtool.run(*common, "-w", "I", "-o", "I,S:20")
    (ranged,) = benchtool.run_json(*common, "--query", "range", "-t", "1")
    assert ranged["commands"] > 10
    assert redis_client.zcard("osprey-bench:testbin") == 500
    (ordered,) = benchtool.run_json(*common, "--query", "ordered", "-t", "1", "--pipeline", "4")
    assert ordered["commands"] > 10 and ordered["commands"] % 4 == 0
    assert redis_client.zcard("osprey-bench:keys") == 500
    assert redis_client.get("k0000000499") == b"v" * 100


def test_ordered_on_osprey_uses_its_user_key_index(osprey):
    srv, _ = osprey
    r = srv.redis()
    (ordered,) = benchtool.run_json("-p", str(srv.resp_port), "--protocol", "redis", "-k", "500",
                                    "--query", "ordered", "-t", "1", "--pipeline", "16", "-z", "2")
    assert ordered["commands"] > 16
    first = r.execute_command("SINDEX.QUERY", "osprey_bench_keys", "[k0000000100", "+", "LIMIT", 0, 3)
    assert first == [b"k0000000100", b"k0000000101", b"k0000000102"]


def test_a_query_over_keys_never_loaded_fails_clearly(osprey):
    srv, _ = osprey
    done = benchtool.run("-p", str(srv.port), "-s", "empty", "-k", "100", "--query", "range",
                         "-t", "1", check=False)
    assert done.returncode != 0
    assert "load the keys first" in done.stderr


def test_testbin_index_creates_and_drops_the_index(osprey):
    srv, client = osprey
    common = ["-p", str(srv.port), "-s", "w", "-k", "300", "-t", "3", "-w", "RU,0"]
    benchtool.run(*common, "--testbin-index", "create")
    assert "indexname=osprey_bench_testbin" in harness.info(client, "sindex-list:ns=test")
    _, _, bins = client.get(("test", "w", 7))
    assert bins["testbin"] == 7
    benchtool.run(*common, "--testbin-index", "drop")
    assert "osprey_bench_testbin" not in harness.info(client, "sindex-list:ns=test")

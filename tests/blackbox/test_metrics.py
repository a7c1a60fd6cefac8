"""Metrics and latency histograms, through the real interfaces:

- the Prometheus endpoint, scraped over HTTP and parsed with the official Prometheus client's
  parser: every series checked against what the info commands answer (statistics, namespace,
  sets, secondary indexes), the latency histograms against the requests sent, RESP commands
  against INFO commandstats; off by default; hostile scrapers (oversized headers, a silent
  connection, too many connections, wrong methods and paths) refused while others are served;
- `latencies:` in Aerospike's format (names alone before a tick, then ms or µs rates and
  seventeen percentages), its errors, and the replica-write histogram of a cluster
  (`test_cluster.py`);
- Redis's `LATENCY HISTOGRAM` and `INFO latencystats`, shaped as redis-server 7.0 answers them
  (compared with a reference server), `latency-tracking` and its percentiles set at run time.
"""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import aerospike
import pytest
import redis
from aerospike import predicates
from prometheus_client.parser import text_string_to_metric_families

import harness
from harness import OspreyServer, namespace

TICK_S = 1


@pytest.fixture(scope="module")
def server():
    server = OspreyServer(
        {"port": 0, "metrics-port": 0, "ticker-interval-s": TICK_S},
        [namespace("test"), namespace("other")],
        tag="metrics",
        resp={"port": 0},
    ).start()
    yield server
    server.stop()


def scrape(server: OspreyServer) -> dict[str, list]:
    """Every sample by family name, as the Prometheus client parses the endpoint's answer."""
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=5) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = answer.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(families, name: str, suffix: str = "", **labels) -> float:
    """The one sample of family `name` (sample name `name + suffix`) with these labels."""
    family = families[name]
    found = [
        sample.value
        for sample in family.samples
        if sample.name == name + suffix
        and all(sample.labels.get(key) == wanted for key, wanted in labels.items())
    ]
    assert len(found) == 1, f"{name}{suffix} {labels}: {found}"
    return found[0]


def info(server: OspreyServer, command: str) -> str:
    return harness.raw_info(server, command)


def test_the_endpoint_is_off_unless_a_port_is_set():
    server = OspreyServer({"port": 0}, [namespace("test")], tag="nometrics").start()
    try:
        assert server.metrics_port is None
        assert "metrics=off" in server.log_text()
    finally:
        server.stop()


def test_node_namespace_set_and_sindex_series_agree_with_the_info_commands(server):
    client = server.client()
    for i in range(300):
        client.put(("test", "people", i), {"age": i % 50, "name": f"n{i}"})
    client.put(("other", None, "solo"), {"x": 1})
    client.index_integer_create("test", "people", "age", "people_age")
    harness.wait_until(
        lambda: "load_pct=100" in info(server, "sindex-stat:namespace=test;indexname=people_age"),
        timeout=10,
    )
    families = scrape(server)
    labels = {"cluster_name": info(server, "cluster-name"), "service": f"127.0.0.1:{server.port}"}
    up = families["aerospike_node_up"].samples[0]
    assert up.value == 1 and up.labels["node_id"] == info(server, "node")

    statistics = harness.parse_kv(info(server, "statistics"))
    assert value(families, "aerospike_node_stats_objects", **labels) == int(statistics["objects"]) == 301
    assert families["aerospike_node_stats_objects"].type == "gauge"
    assert families["aerospike_node_stats_client_connections_opened"].type == "counter"
    # A boolean is 1 or 0; a name or key is left out, as the exporter leaves it.
    assert value(families, "aerospike_node_stats_cluster_integrity", **labels) == 1
    assert "aerospike_node_stats_cluster_name" not in families
    assert "aerospike_node_stats_cluster_key" not in families

    for ns, objects in (("test", 300), ("other", 1)):
        stats = harness.parse_kv(info(server, f"namespace/{ns}"))
        ns_labels = dict(labels, ns=ns, storage_engine="memory")
        assert value(families, "aerospike_namespace_objects", **ns_labels) == int(stats["objects"]) == objects
        # The client's parser names a counter's sample `_total` (the exporter's have no suffix).
        written = value(families, "aerospike_namespace_client_write_success", "_total", **ns_labels)
        assert written == int(stats["client_write_success"]) == objects
        # A configuration value (a name with `-`) is a gauge, as the exporter types it.
        assert families["aerospike_namespace_default_ttl"].type == "gauge"

    set_labels = dict(labels, ns="test", set="people")
    assert value(families, "aerospike_sets_objects", **set_labels) == 300
    sindex_labels = dict(labels, ns="test", sindex="people_age")
    stat = harness.parse_kv(info(server, "sindex-stat:namespace=test;indexname=people_age"))
    assert value(families, "aerospike_sindex_entries", **sindex_labels) == int(stat["entries"]) == 300


def test_latency_histograms_count_every_request_by_operation(server):
    client = server.client()
    before = scrape(server)

    def count(families, op, ns="test"):
        if "osprey_latency_seconds" not in families:
            return 0
        return value(families, "osprey_latency_seconds", "_count", ns=ns, op=op)

    counts_before = {op: count(before, op) for op in ("read", "write", "udf", "pi-query", "si-query")}
    batch_before = value(before, "osprey_latency_seconds", "_count", op="batch-index")
    for i in range(40):
        client.put(("test", "lat", i), {"v": i})
    for i in range(25):
        client.get(("test", "lat", i))
    client.remove(("test", "lat", 0))
    client.batch_read([("test", "lat", i) for i in range(10)])
    client.scan("test", "lat").results()
    client.index_integer_create("test", "lat", "v", "lat_v")
    harness.wait_until(
        lambda: "load_pct=100" in info(server, "sindex-stat:namespace=test;indexname=lat_v"), timeout=10
    )
    query = client.query("test", "lat")
    query.where(predicates.between("v", 1, 5))
    query.results()

    after = scrape(server)
    assert count(after, "write") - counts_before["write"] == 41  # the remove is a write
    assert count(after, "read") - counts_before["read"] == 25
    assert count(after, "pi-query") - counts_before["pi-query"] == 1
    assert count(after, "si-query") - counts_before["si-query"] == 1
    assert value(after, "osprey_latency_seconds", "_count", op="batch-index") - batch_before == 1
    # Cumulative: each bucket holds at least the one before, +Inf holds them all.
    family = after["osprey_latency_seconds"]
    buckets = [s for s in family.samples if s.name.endswith("_bucket")
               and s.labels.get("ns") == "test" and s.labels["op"] == "read"]
    values = [s.value for s in buckets]
    assert values == sorted(values) and buckets[-1].labels["le"] == "+Inf"
    assert values[-1] == count(after, "read")
    assert value(after, "osprey_latency_seconds", "_sum", ns="test", op="read") > 0


def test_latencies_answers_names_alone_before_a_tick_and_then_rates_in_aerospike_format():
    quiet = OspreyServer({"port": 0, "ticker-interval-s": 3600}, [namespace("test")], tag="noticks").start()
    try:
        quiet.client().put(("test", None, 1), {"a": 1})
        assert info(quiet, "latencies:") == (
            "batch-index:;{test}-read:;{test}-write:;{test}-udf:;{test}-pi-query:;{test}-si-query:"
        )
        assert info(quiet, "latencies:hist={test}-read") == "{test}-read:"
        assert info(quiet, "latencies:hist={nope}-read") == "ERROR:4:bad hist name"
        assert info(quiet, "latencies:hist=") == "ERROR:4:missing 'hist' value"
    finally:
        quiet.stop()

    server = OspreyServer({"port": 0, "ticker-interval-s": TICK_S, "microsecond-histograms": True},
                          [namespace("test")], tag="usec").start()
    try:
        client = server.client()
        for i in range(50):
            client.put(("test", None, i), {"a": i})
        time.sleep(TICK_S + 0.5)
        entries = dict(entry.split(":", 1) for entry in info(server, "latencies:").split(";"))
        fields = entries["{test}-write"].split(",")
        assert fields[0] == "usec" and len(fields) == 2 + 17, fields
        assert re.fullmatch(r"\d+\.\d", fields[1])
        percents = [float(field) for field in fields[2:]]
        assert all(re.fullmatch(r"\d+\.\d\d", field) for field in fields[2:])
        assert percents == sorted(percents, reverse=True), "shares above larger thresholds are smaller"
        # Writes take more than a microsecond.
        assert percents[0] > 0
    finally:
        server.stop()


def test_the_exporter_style_rates_follow_the_last_tick(server):
    client = server.client()
    for i in range(100):
        client.put(("test", "rates", i), {"v": i})
        client.get(("test", "rates", i))
    time.sleep(TICK_S + 0.5)
    families = scrape(server)
    total = value(families, "aerospike_latencies_read_ms_bucket", ns="test", le="+Inf")
    assert value(families, "aerospike_latencies_read_ms_count", ns="test") == total
    faster = [value(families, "aerospike_latencies_read_ms_bucket", ns="test", le=str(1 << i)) for i in range(17)]
    assert faster == sorted(faster) and faster[-1] <= total + 1e-9
    assert families["aerospike_latencies_read_ms_bucket"].type == "gauge"
    batch = families["aerospike_latencies_batch_index_ms_count"].samples[0]
    assert "ns" not in batch.labels


def test_resp_commands_are_counted_and_timed_as_commandstats_counts_them(server):
    client = server.redis()
    for i in range(30):
        client.set(f"m{i}", i)
    for i in range(20):
        client.get(f"m{i}")
    client.set("not-a-number", "x")
    with pytest.raises(redis.ResponseError):
        client.execute_command("INCR", "not-a-number")
    families = scrape(server)
    stats = client.info("commandstats")
    for command in ("set", "get", "incr"):
        calls = stats[f"cmdstat_{command}"]["calls"]
        assert value(families, "osprey_resp_command_calls", "_total", command=command) == calls
        assert value(families, "osprey_resp_command_duration_seconds", "_count", command=command) == calls
    assert value(families, "osprey_resp_command_failed_calls", "_total", command="incr") == \
        stats["cmdstat_incr"]["failed_calls"] == 1
    processed = value(families, "osprey_resp_commands_processed", "_total")
    assert processed >= 51


def raw_http(server: OspreyServer, request: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", server.metrics_port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks) and b"Connection: close" not in request:
                break
        return b"".join(chunks)


def test_wrong_paths_methods_and_oversized_headers_get_http_errors(server):
    def status(path: str, method: str = "GET") -> int:
        request = urllib.request.Request(f"http://127.0.0.1:{server.metrics_port}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return answer.status
        except urllib.error.HTTPError as error:
            assert method != "POST" or error.headers["Allow"] == "GET, HEAD"
            return error.code

    assert status("/nothing") == 404
    assert status("/metrics", "POST") == 405
    assert status("/metrics", "HEAD") == 200
    answer = raw_http(server, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40_000 + b"\r\n\r\n")
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431"), answer[:80]
    assert scrape(server)["aerospike_node_up"].samples[0].value == 1


def test_silent_and_surplus_scrapers_are_closed_while_others_are_served(server):
    silent = socket.create_connection(("127.0.0.1", server.metrics_port))
    silent.sendall(b"GET /metr")  # and never more
    held = [socket.create_connection(("127.0.0.1", server.metrics_port)) for _ in range(20)]
    try:
        time.sleep(0.3)
        # Connections past the limit are closed at once: some of the twenty see an end.
        closed = 0
        for sock in held:
            sock.settimeout(0.2)
            try:
                closed += sock.recv(1) == b""
            except socket.timeout:
                pass
            except ConnectionResetError:
                closed += 1
        assert closed >= 20 + 1 - 16
    finally:
        for sock in held:
            sock.close()
    # With the others gone, a scrape is served while the silent one still waits.
    harness.wait_until(lambda: _scrapes(server), timeout=5)
    silent.settimeout(10)
    started = time.monotonic()
    ended = silent.recv(100)
    waited = time.monotonic() - started
    assert ended == b"" or ended.startswith(b"HTTP/1.1 408"), ended
    assert waited < 8, "the silent connection is closed within the header timeout"
    silent.close()


def _scrapes(server: OspreyServer) -> bool:
    try:
        return "aerospike_node_up" in scrape(server)
    except OSError:
        return False


@pytest.fixture(scope="module")
def redis_server_port():
    with harness.reference_redis_server() as port:
        yield port


def test_latency_histogram_is_shaped_as_redis_answers_it_in_resp2_and_resp3(server, redis_server_port):
    for protocol in (2, 3):
        ours = server.redis(protocol=protocol)
        theirs = redis.Redis(host="127.0.0.1", port=redis_server_port, protocol=protocol)
        for client in (ours, theirs):
            client.config_set("latency-tracking", "yes")
            client.config_resetstat()
            for i in range(50):
                client.set(f"h{i}", i)
            client.config_get("maxmemory")
        answers = [client.execute_command("LATENCY", "HISTOGRAM", "set", "config", "nope")
                   for client in (ours, theirs)]
        for answer in answers:
            answer = {k.decode() if isinstance(k, bytes) else k: v for k, v in _as_dict(answer).items()}
            # RESETSTAT is timed after the reset it made, as the other calls are.
            assert sorted(answer) == ["config|get", "config|resetstat", "set"], answer
            entry = {k.decode(): v for k, v in _as_dict(answer["set"]).items()}
            assert sorted(entry) == ["calls", "histogram_usec"]
            assert entry["calls"] == 50
            points = sorted(_as_dict(entry["histogram_usec"]).items())
            cumulative = [count for _, count in points]
            assert cumulative == sorted(cumulative) and cumulative[-1] == 50
        assert _as_dict(ours.execute_command("LATENCY", "HISTOGRAM", "never-called")) == {}


def _as_dict(answer) -> dict:
    """A map as redis-py gives it: a dict (RESP3), or a flat list of pairs (RESP2)."""
    if isinstance(answer, dict):
        return answer
    return dict(zip(answer[0::2], answer[1::2]))


LATENCY_LINE = re.compile(r"latency_percentiles_usec_([^:]+):((?:p[\d.]+=\d+\.\d{3},?)*)")


def latencystats_text(client) -> str:
    return harness.raw_reply(client, "INFO", "latencystats").decode()


def test_info_latencystats_and_its_settings_work_as_in_redis(server, redis_server_port):
    ours = server.redis()
    theirs = redis.Redis(host="127.0.0.1", port=redis_server_port)
    for client in (ours, theirs):
        client.config_set("latency-tracking", "yes")
        client.config_set("latency-tracking-info-percentiles", "50 99 99.9")
        client.config_resetstat()
        for i in range(20):
            client.get(f"g{i}")
        text = latencystats_text(client)
        assert text.startswith("# Latencystats\r\n")
        lines = dict(LATENCY_LINE.fullmatch(line).groups() for line in text.split("\r\n")[1:] if line)
        assert list(part.split("=")[0] for part in lines["get"].split(",")) == ["p50", "p99", "p99.9"]
        p50, p99, p999 = (float(part.split("=")[1]) for part in lines["get"].split(","))
        assert 0 < p50 <= p99 <= p999
        client.config_set("latency-tracking-info-percentiles", "90")
        assert client.config_get("latency-tracking-info-percentiles") == \
            {"latency-tracking-info-percentiles": "90"}
        assert re.search(r"latency_percentiles_usec_get:p90=\d+\.\d{3}\r\n", latencystats_text(client))
        with pytest.raises(redis.ResponseError):
            client.config_set("latency-tracking-info-percentiles", "101")
        # Tracking off: calls are still counted, no longer timed.
        client.config_set("latency-tracking", "no")
        client.config_resetstat()
        client.get("g0")
        assert latencystats_text(client) == "# Latencystats\r\n"
        client.config_set("latency-tracking", "yes")
        client.config_set("latency-tracking-info-percentiles", "50 99 99.9")
    # Not among INFO's default sections, as in Redis.
    assert "latency_percentiles_usec" not in ours.execute_command("INFO").__repr__()


DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "osprey.json"


def test_every_series_the_grafana_dashboard_queries_is_served(server):
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    queried = set(re.findall(r"\b(?:aerospike|osprey)_[a-z0-9_]+", " ".join(expressions)))
    assert len(queried) >= 15
    # Each is served once traffic has run (the latency rates after a tick).
    client = server.client()
    client.put(("test", "dash", 1), {"v": 1})
    client.get(("test", "dash", 1))
    server.redis().set("dash", 1)
    time.sleep(TICK_S + 0.5)
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=5) as answer:
        served = {line.split("{")[0].split(" ")[0] for line in answer.read().decode().splitlines()
                  if line and not line.startswith("#")}
    assert sorted(queried - served) == []

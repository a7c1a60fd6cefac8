"""osprey-admin, the real binary, against a real node: `info` as asinfo answers it, `summary`
and `show` tables checked against the info commands, `watch` rates against the requests sent,
`set-config` applied, plain tab-separated output in a pipe and tables with colours on a
terminal. Across a cluster: `test_cluster.py`.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

import harness
from harness import OspreyServer, namespace

ADMIN_BIN = Path(os.environ.get("OSPREY_ADMIN_BIN", str(harness.REPO_ROOT / "target" / "debug" / "osprey-admin")))


def admin(server: OspreyServer, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(ADMIN_BIN), "-h", "127.0.0.1", "-p", str(server.port), *args],
                          capture_output=True, text=True, timeout=30)
    if check:
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def rows(text: str) -> list[list[str]]:
    """The tab-separated lines of plain output, without titles (`# ...`)."""
    return [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def server():
    server = OspreyServer({"port": 0, "ticker-interval-s": 1}, [namespace("test"), namespace("other")],
                          tag="admin").start()
    client = server.client()
    for i in range(120):
        client.put(("test", "people", i), {"age": i})
    client.index_integer_create("test", "people", "age", "people_age")
    yield server
    server.stop()


def test_info_answers_as_asinfo_does(server):
    assert admin(server, "info", "build").stdout == "8.0.0.0\n"
    assert admin(server, "info", "namespaces").stdout == "test;other\n"
    both = admin(server, "info", "build", "node").stdout.splitlines()
    assert both == ["build\t8.0.0.0", f"node\t{harness.raw_info(server, 'node')}"]


def test_summary_and_show_agree_with_the_info_commands(server):
    summary = rows(admin(server, "summary").stdout)
    node_id = harness.raw_info(server, "node")
    assert summary[0][:2] == ["node", "address"]
    assert summary[1][0] == node_id and summary[1][1] == f"127.0.0.1:{server.port}"
    namespaces = {row[0]: row for row in summary if row[0] in ("test", "other")}
    assert namespaces["test"][2] == "120" and namespaces["other"][2] == "0"

    shown = rows(admin(server, "show", "statistics", "namespace", "--like", "objects").stdout)
    stats = harness.parse_kv(harness.raw_info(server, "namespace/test"))
    assert ["objects", stats["objects"]] in shown
    config = rows(admin(server, "show", "config", "service").stdout)
    assert ["ticker-interval", "1"] in config

    sets = rows(admin(server, "show", "sets").stdout)
    assert [node_id, "test", "people", "120"] == sets[1][:4]
    harness.wait_until(lambda: "load_pct=100" in harness.raw_info(
        server, "sindex-stat:namespace=test;indexname=people_age"), timeout=10)
    sindex = rows(admin(server, "show", "sindex").stdout)
    assert sindex[1][:5] == [node_id, "test", "people", "people_age", "age"]
    assert sindex[1][7] == "120"


def test_show_latencies_takes_the_thresholds_asked_for(server):
    client = server.client()
    for i in range(50):
        client.get(("test", "people", i))
    time.sleep(1.5)
    table = rows(admin(server, "show", "latencies", "--buckets", "4", "--exponent", "2").stdout)
    assert table[0] == ["node", "histogram", "ops/sec", ">1", ">4", ">16", ">64"]
    reads = next(row for row in table if row[1] == "{test}-read (ms)")
    assert len(reads) == 7
    refused = admin(server, "show", "latencies", "--buckets", "9", "--exponent", "3", check=False)
    assert refused.returncode == 1 and "17 thresholds" in refused.stderr


def test_watch_shows_the_rates_of_the_requests_sent(server):
    client = server.client()
    watcher = subprocess.Popen([str(ADMIN_BIN), "-p", str(server.port), "watch", "-i", "1", "-c", "2"],
                               stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 2.2
    writes = 0
    while time.monotonic() < deadline:
        client.put(("test", "watched", writes), {"v": writes})
        writes += 1
    out, _ = watcher.communicate(timeout=20)
    assert watcher.returncode == 0
    table = [row for row in rows(out) if row[1] == "test"]
    assert len(table) == 2
    header = rows(out)[0]
    position = header.index("write_success/s")
    rates = [float(row[position]) for row in table]
    # Two seconds of writes at a steady pace: each one-second rate is a share of them.
    assert 0 < sum(rates) <= writes * 1.2, (rates, writes)


def test_set_config_changes_every_node_and_a_refusal_fails(server):
    done = admin(server, "set-config", "service", "single-scan-threads=7")
    assert rows(done.stdout)[1][1] == "ok"
    assert "single-scan-threads=7" in harness.raw_info(server, "get-config:context=service")
    refused = admin(server, "set-config", "service", "single-scan-threads=0", check=False)
    assert refused.returncode == 1 and "refused" in refused.stderr
    assert admin(server, "set-config", "service", "nonsense", check=False).returncode == 1


def test_a_terminal_gets_tables_with_colours_and_a_pipe_plain_text(server):
    plain = admin(server, "summary").stdout
    assert "\x1b[" not in plain and "\t" in plain
    # `script` gives the command a terminal.
    drawn = subprocess.run(["script", "-qec", f"{ADMIN_BIN} -p {server.port} summary", "/dev/null"],
                           capture_output=True, text=True, timeout=30).stdout
    assert "\x1b[" in drawn and "│" in drawn and "\t" not in drawn
    assert "\x1b[" not in admin(server, "summary", "--plain").stdout


def test_an_unreachable_node_is_an_error_naming_it():
    port = harness.free_port()
    done = subprocess.run([str(ADMIN_BIN), "-p", str(port), "summary"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and f"127.0.0.1:{port}" in done.stderr

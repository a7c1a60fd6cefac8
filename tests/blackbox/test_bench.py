"""osprey-bench against a real osprey: what the tool reports is what the server says it served.

Every test starts its own server so that the server's counters start at zero.
"""

from __future__ import annotations

import socket
import threading

import pytest

import benchtool
import harness


@pytest.fixture
def bench_server(start_server):
    srv = start_server(namespaces=[harness.namespace("test")])
    yield srv, srv.client()


def counters(client) -> dict[str, int]:
    stats = harness.ns_stats(client, "test")
    return {name: int(value) for name, value in stats.items() if value.isdigit()}


def test_insert_read_update_delete_counts_match_the_server_statistics(bench_server):
    srv, client = bench_server
    port = str(srv.port)
    common = ["-p", port, "-s", "bench", "-z", "4", "--seed", "7"]

    inserted = benchtool.run_json(*common, "-w", "I", "-k", "3000", "-o", "S:50,I")
    write = benchtool.op(benchtool.summary(inserted), "write")
    benchtool.assert_clean(write)
    assert write["ok"] == 3000
    _, _, bins = client.get(("test", "bench", 1234))
    assert bins["testbin_2"] == 1234
    assert isinstance(bins["testbin"], str) and len(bins["testbin"]) == 50
    # Taken after the check's own read, so that only the bench's commands differ below.
    after_insert = counters(client)
    assert after_insert["client_write_success"] == 3000
    assert after_insert["objects"] == 3000
    assert harness.set_objects(client, "test", "bench") == 3000

    # Keys 3000..3999 do not exist yet: some reads miss, some updates create them.
    mixed = benchtool.run_json(*common, "-w", "RU,70", "-k", "4000", "-o", "S:50,I", "-t", "2")
    read = benchtool.op(benchtool.summary(mixed), "read")
    write = benchtool.op(benchtool.summary(mixed), "write")
    benchtool.assert_clean(read)
    benchtool.assert_clean(write)
    assert read["not_found"] > 0 and read["ok"] > read["not_found"]
    after_mixed = counters(client)
    served_reads = after_mixed["client_read_success"] - after_insert["client_read_success"]
    missed_reads = after_mixed["client_read_not_found"] - after_insert["client_read_not_found"]
    served_writes = after_mixed["client_write_success"] - after_insert["client_write_success"]
    assert (served_reads, missed_reads) == (read["ok"], read["not_found"])
    assert served_writes == write["ok"]
    intervals = [line for line in mixed if line["type"] == "interval"]
    assert intervals, "a per-second line for a 2 s run"

    objects = after_mixed["objects"]
    deleted = benchtool.run_json(*common, "-w", "DB", "-k", "4000")
    delete = benchtool.op(benchtool.summary(deleted), "delete")
    benchtool.assert_clean(delete)
    assert (delete["ok"], delete["not_found"]) == (objects, 4000 - objects)
    after_delete = counters(client)
    assert after_delete["client_delete_success"] == objects
    assert after_delete["client_delete_not_found"] == 4000 - objects
    assert after_delete["objects"] == 0


def test_async_pipelined_insert_writes_every_key_once(bench_server):
    srv, client = bench_server
    lines = benchtool.run_json(
        "-p", str(srv.port), "-w", "I", "-k", "5000", "-K", "100",
        "--async", "--max-inflight", "32", "--pipeline", "8", "-z", "2", "-o", "B:16",
    )
    config = lines[0]
    assert (config["type"], config["connections"], config["pipeline"]) == ("config", 4, 8)
    write = benchtool.op(benchtool.summary(lines), "write")
    benchtool.assert_clean(write)
    assert write["ok"] == 5000
    assert harness.ns_objects(client, "test") == 5000
    assert client.exists(("test", "testset", 100))[1] is not None
    assert client.exists(("test", "testset", 5099))[1] is not None
    assert client.exists(("test", "testset", 5100))[1] is None


def test_throttled_run_never_exceeds_its_target_rate(bench_server):
    srv, _ = bench_server
    lines = benchtool.run_json("-p", str(srv.port), "-g", "400", "-t", "2", "-z", "2")
    result = benchtool.summary(lines)
    # The pacer issues on a fixed schedule: at most rate x elapsed, plus one command per
    # connection, with elapsed_s rounded to 0.1 s. Unthrottled, this runs at 10,000s per second.
    assert result["total_count"] <= 400 * (result["elapsed_s"] + 0.1) + 2, result
    assert result["total_count"] >= 400, result


def test_zipf_reads_and_replaces_run_clean(bench_server):
    srv, client = bench_server
    lines = benchtool.run_json(
        "-p", str(srv.port), "-w", "RR,50", "-t", "1", "-z", "2", "-k", "1000",
        "--key-distribution", "zipf:1.1", "-o", "I",
    )
    for name in ("read", "write"):
        benchtool.assert_clean(benchtool.op(benchtool.summary(lines), name))
    # Zipf picks key 0 most often: it must exist after a second of replaces.
    assert client.get(("test", "testset", 0))[2] == {"testbin": 0}


def test_scaling_writes_and_reads_every_key_per_thread_count(bench_server):
    srv, client = bench_server
    lines = benchtool.run_json("-p", str(srv.port), "--scaling", "-z", "3", "-k", "2000")
    assert [row["threads"] for row in lines] == [1, 2, 3]
    for row in lines:
        assert row["write_ops_per_s"] > 0 and row["read_ops_per_s"] > 0, row
        assert (row["write_errors"], row["read_errors"], row["read_not_found"]) == (0, 0, 0), row
    stats = counters(client)
    assert stats["client_write_success"] == 3 * 2000
    assert stats["client_read_success"] == 3 * 2000
    assert stats["objects"] == 2000


def test_per_connection_reports_a_row_per_connection_count(bench_server):
    srv, client = bench_server
    lines = benchtool.run_json(
        "-p", str(srv.port), "--per-connection", "--connection-counts", "1,2", "-t", "1",
        "--pipeline", "4",
    )
    assert [row["connections"] for row in lines] == [1, 2]
    for row in lines:
        assert row["ops_per_s"] > 0 and row["errors_by_code"] == {} and row["timeouts"] == 0
        assert row["ops_per_s_per_connection"] == pytest.approx(
            row["ops_per_s"] / row["connections"], abs=1
        )


def test_text_output_has_per_second_lines_and_a_summary(bench_server):
    srv, _ = bench_server
    done = benchtool.run("-p", str(srv.port), "-t", "2", "-z", "2")
    lines = done.stdout.splitlines()
    assert lines[0].startswith("osprey-bench: 2 s of workload RU,50 on 127.0.0.1:")
    per_second = [line for line in lines if line.startswith("[")]
    assert per_second and "write(tps=" in per_second[0] and "p99.9=" in per_second[0]
    assert any(line.startswith("Summary: ") for line in lines)
    assert any(line.startswith("read ") for line in lines)


def test_csv_rows_line_up_with_the_header(bench_server):
    srv, _ = bench_server
    done = benchtool.run("-p", str(srv.port), "-t", "1", "-z", "2", "--output", "csv")
    header, *rows = done.stdout.splitlines()
    assert header.startswith("type,elapsed_s,op,count,ops_per_s,")
    assert [row.split(",")[0] for row in rows][-2:] == ["summary", "summary"]
    for row in rows:
        assert len(row.split(",")) == len(header.split(",")), row


def test_unreachable_server_is_a_clear_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = benchtool.run("-p", str(port), "-t", "1", check=False)
    assert done.returncode == 1
    assert f"cannot connect to 127.0.0.1:{port}" in done.stderr


def test_bad_options_are_refused_with_the_option_named():
    done = benchtool.run("-w", "RU,150", check=False)
    assert done.returncode == 2
    assert "read percent must be 0 to 100" in done.stderr
    done = benchtool.run("-o", "S:x", check=False)
    assert done.returncode == 2 and "not a number" in done.stderr


def silent_server(stop: threading.Event) -> tuple[socket.socket, threading.Thread]:
    """A listener that accepts connections, reads what they send and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)
    held: list[socket.socket] = []

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                held.append(conn)
            except OSError:
                continue
        for conn in held:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def test_a_silent_server_shows_as_timeouts_not_a_hang():
    stop = threading.Event()
    listener, thread = silent_server(stop)
    try:
        port = str(listener.getsockname()[1])
        lines = benchtool.run_json("-p", port, "-t", "1", "-z", "2", "-T", "100")
        result = benchtool.summary(lines)
        timeouts = sum(entry["timeouts"] for entry in result["ops"])
        assert timeouts > 0
        assert all(entry["ok"] == 0 and entry["errors"] == 0 for entry in result["ops"])
    finally:
        stop.set()
        thread.join()
        listener.close()


def test_scan_mode_counts_every_record_of_the_set_and_of_the_namespace(bench_server):
    srv, client = bench_server
    port = str(srv.port)
    benchtool.run_json("-p", port, "-s", "scanned", "-w", "I", "-k", "2500", "-o", "S:100", "-z", "2")
    benchtool.run_json("-p", port, "-s", "other", "-w", "I", "-k", "700", "-o", "S:100", "-z", "2")

    def scans(*args: str) -> list[dict]:
        lines = benchtool.run_json("-p", port, "--scan", "--scan-repeat", "2", *args)
        runs = [line for line in lines if line["type"] == "scan"]
        assert len(runs) == 2, lines
        return runs

    for run in scans("-s", "scanned"):
        assert run["records"] == 2500
        assert run["bytes"] > 2500 * 100, "every record carries its 100-byte bin"
    for run in scans("-s", ""):
        assert run["records"] == 3200
    no_bins = scans("-s", "scanned", "--scan-no-bins")
    assert all(run["records"] == 2500 and run["bytes"] < 2500 * 100 for run in no_bins)
    assert scans("-s", "nosuchset")[0]["records"] == 0
    assert int(harness.ns_stats(client, "test")["pi_query_long_basic_complete"]) == 8

"""osprey-bench over RESP against Debian's redis-server: the same workloads, checked against
what redis-server counts in INFO commandstats and holds in its keyspace.

`cargo xtask ci` installs redis-server when it is missing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest
import redis

import benchtool


@pytest.fixture
def redis_server():
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed (cargo xtask ci installs it)", pytrace=False)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port, socket_timeout=5)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        yield port, client
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=10)


def calls(client: redis.Redis, command: str) -> int:
    stats = client.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


def test_one_bin_maps_to_set_get_del_and_counts_match(redis_server):
    port, client = redis_server
    common = ["--protocol", "redis", "-p", str(port), "-z", "3", "--seed", "3"]

    inserted = benchtool.run_json(*common, "-w", "I", "-k", "2000", "-o", "S:20")
    write = benchtool.op(benchtool.summary(inserted), "write")
    benchtool.assert_clean(write)
    assert write["ok"] == 2000
    assert client.dbsize() == 2000
    assert calls(client, "set") == 2000
    assert len(client.get("1999")) == 20

    gets_before = calls(client, "get")
    mixed = benchtool.run_json(*common, "-w", "RU,80", "-k", "2500", "-o", "S:20", "-t", "1")
    read = benchtool.op(benchtool.summary(mixed), "read")
    write = benchtool.op(benchtool.summary(mixed), "write")
    benchtool.assert_clean(read)
    benchtool.assert_clean(write)
    assert read["not_found"] > 0
    assert calls(client, "get") - gets_before == read["count"]
    assert calls(client, "set") == 2000 + write["count"]

    keys = client.dbsize()
    deleted = benchtool.run_json(*common, "-w", "DB", "-k", "2500")
    delete = benchtool.op(benchtool.summary(deleted), "delete")
    benchtool.assert_clean(delete)
    assert (delete["ok"], delete["not_found"]) == (keys, 2500 - keys)
    assert client.dbsize() == 0


def test_several_bins_map_to_a_hash_over_resp3(redis_server):
    port, client = redis_server
    common = ["--protocol", "redis", "--resp", "3", "-p", str(port), "-z", "2", "-o", "I,S:8"]
    inserted = benchtool.run_json(*common, "-w", "I", "-k", "100", "-K", "500")
    benchtool.assert_clean(benchtool.op(benchtool.summary(inserted), "write"))
    row = client.hgetall("542")
    assert row[b"testbin"] == b"542" and len(row[b"testbin_2"]) == 8
    assert calls(client, "hset") == 100
    assert calls(client, "hello") >= 2

    hgetalls_before = calls(client, "hgetall")
    mixed = benchtool.run_json(*common, "-w", "RU,100", "-k", "100", "-K", "500", "-t", "1")
    read = benchtool.op(benchtool.summary(mixed), "read")
    benchtool.assert_clean(read)
    assert read["not_found"] == 0 and calls(client, "hgetall") - hgetalls_before == read["count"]


def test_redis_errors_are_counted_by_their_error_word(redis_server):
    port, client = redis_server
    client.set("7", "a string, not a hash")
    lines = benchtool.run_json(
        "--protocol", "redis", "-p", str(port), "-z", "1", "-o", "I,I",
        "-w", "RU,100", "-k", "1", "-K", "7", "-t", "1",
    )
    read = benchtool.op(benchtool.summary(lines), "read")
    assert read["ok"] == 0 and read["count"] > 0
    assert read["errors_by_code"] == {"WRONGTYPE": read["count"]}

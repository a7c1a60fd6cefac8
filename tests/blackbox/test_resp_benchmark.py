"""redis-benchmark (Debian's redis-tools) runs its standard tests against Osprey without an
error: every command it sends is answered as redis-server answers it, at pipeline 1 and 16.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

import harness

# The tests redis-benchmark runs by default (redis-tools 7.0).
STANDARD_TESTS = (
    "ping_inline,ping_mbulk,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,"
    "lrange,mset"
)


@pytest.fixture(scope="module")
def resp_server():
    server = harness.start_server(service={}, namespaces=[harness.namespace("test")], tag="osprey-resp-bench")
    yield server
    server.stop()


def run_benchmark(port: int, pipeline: int) -> str:
    binary = shutil.which("redis-benchmark")
    assert binary, "redis-benchmark is installed by the test command"
    completed = subprocess.run(
        [binary, "-p", str(port), "-n", "2000", "-c", "10", "-P", str(pipeline), "-r", "1000",
         "-t", STANDARD_TESTS, "-q"],
        capture_output=True, text=True, timeout=120,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    return output


@pytest.mark.parametrize("pipeline", [1, 16])
def test_redis_benchmark_standard_tests_run_without_errors(resp_server, pipeline):
    output = run_benchmark(resp_server.resp_port, pipeline)
    assert "error" not in output.lower(), output
    expected = ["PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "LPUSH", "RPUSH", "LPOP", "RPOP",
                "SADD", "HSET", "SPOP", "ZADD", "ZPOPMIN", "LRANGE_100", "LRANGE_600", "MSET"]
    finished = {
        line.split(":")[0].split(" (")[0].strip()
        for line in output.replace("\r", "\n").splitlines()
        if "requests per second" in line
    }
    assert set(expected) <= finished, f"missing {set(expected) - finished}:\n{output}"
    client = resp_server.redis()
    assert client.dbsize() > 0, "the benchmark's writes are stored"

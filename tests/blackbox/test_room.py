"""Running out of room in memory: stop-writes and eviction above the memory thresholds.

The thresholds are set to 1% of the machine's memory, which any running machine exceeds, so the
server's once-a-second sample of memory use crosses them at once.
"""

from __future__ import annotations

import time

import aerospike
import pytest
from aerospike import exception as ex

import harness

SAMPLE_WAIT_S = 10.0


def namespace_stats(client, ns: str) -> dict[str, str]:
    text = harness.info(client, f"namespace/{ns}")
    return dict(item.split("=", 1) for item in text.split(";") if "=" in item)


def wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + SAMPLE_WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_writes_stop_above_the_memory_threshold_while_reads_and_deletes_go_on(start_server, tmp_path):
    storage = harness.device_storage([tmp_path / "tight.dat"], filesize=4 * 1048576)
    ns = {**harness.NAMESPACE_DEFAULTS, "name": "tight", "storage-engine": storage,
          "stop-writes-sys-memory-pct": 100}
    srv = start_server(namespaces=[ns])
    client = srv.client()
    for i in range(10):
        client.put(("tight", "s", f"k{i}"), {"v": i})
    srv.stop()
    ns["stop-writes-sys-memory-pct"] = 1
    srv = start_server(namespaces=[ns])
    client = srv.client()
    wait_for(lambda: namespace_stats(client, "tight")["stop_writes"] == "true", "stop_writes=true")
    with pytest.raises(ex.AerospikeError) as refused:
        client.put(("tight", "s", "new"), {"v": 1})
    assert refused.value.code == 8, f"expected OUT_OF_SPACE (8), got {refused.value.code}"
    with pytest.raises(ex.AerospikeError) as refused:
        client.put(("tight", "s", "k0"), {"v": 100})
    assert refused.value.code == 8
    _, _, bins = client.get(("tight", "s", "k0"))
    assert bins == {"v": 0}, "a refused write changed the record"
    client.remove(("tight", "s", "k1"))
    with pytest.raises(ex.RecordNotFound):
        client.get(("tight", "s", "k1"))


def test_eviction_above_the_memory_threshold_takes_the_soonest_to_expire_first(start_server):
    ns = {**harness.NAMESPACE_DEFAULTS, "name": "evicting", "evict-sys-memory-pct": 1,
          "stop-writes-sys-memory-pct": 0, "evict-tenths-pct": 200, "nsup-period": 1}
    srv = start_server(namespaces=[ns])
    client = srv.client()
    for i in range(200):
        client.put(("evicting", "s", f"keep-{i}"), {"v": i}, meta={"ttl": aerospike.TTL_NEVER_EXPIRE})
    for i in range(200):
        client.put(("evicting", "s", f"ttl-{i}"), {"v": i}, meta={"ttl": 10_000 + i * 100})
    wait_for(lambda: int(namespace_stats(client, "evicting")["evicted_objects"]) >= 60,
             "evicted_objects >= 60")
    for i in range(200):
        _, meta, _ = client.get(("evicting", "s", f"keep-{i}"))
        assert meta is not None, f"keep-{i} has no TTL and must never be evicted"
    present = []
    for i in range(200):
        try:
            client.get(("evicting", "s", f"ttl-{i}"))
            present.append(i)
        except ex.RecordNotFound:
            pass
    gone = [i for i in range(200) if i not in present]
    assert gone, "nothing with a TTL was evicted"
    if present:
        assert max(gone) < min(present), f"evicted {gone} while {min(present)} expires sooner"

"""A three-node cluster on loopback, driven by the official client given one seed.

Three real `osprey` processes whose `[cluster]` seeds name each other form one cluster; the
tests check what a client sees (three nodes, a partition map where every partition has one
master and one replica), that every command gives the same results as on one node (each
record exactly once), that replicas hold every record, that a request sent to the wrong node
is forwarded and answered, and that every node's Redis port serves every key.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import aerospike
import pytest
from prometheus_client.parser import text_string_to_metric_families
import redis
from aerospike import exception as ex

import aswire
from harness import REPO_ROOT, OspreyServer, client_config, error_raised_by, free_port, namespace

NODES = 3
RECORDS = 3000
FORM_TIMEOUT_S = 30.0


def info_value(host: str, port: int, command: str) -> str:
    with socket.create_connection((host, port), timeout=5) as sock:
        return dict(aswire.request_info(sock, [command]))[command]


def statistics(server: OspreyServer) -> dict[str, str]:
    text = info_value(server.host, server.port, "statistics")
    return dict(pair.split("=", 1) for pair in text.split(";") if "=" in pair)


def namespace_stats(server: OspreyServer, name: str = "test") -> dict[str, str]:
    text = info_value(server.host, server.port, f"namespace/{name}")
    return dict(pair.split("=", 1) for pair in text.split(";") if "=" in pair)


def wait_formed(servers: list[OspreyServer]) -> float:
    """Seconds until every node reports the full cluster, a stable map and a partition map."""
    started = time.monotonic()
    deadline = started + FORM_TIMEOUT_S
    while time.monotonic() < deadline:
        ready = True
        for server in servers:
            stable = info_value(server.host, server.port, f"cluster-stable:size={len(servers)}")
            generation = int(info_value(server.host, server.port, "partition-generation"))
            ready &= not stable.startswith("ERROR") and generation > 0
        if ready:
            return time.monotonic() - started
        time.sleep(0.1)
    logs = "\n\n".join(server.log_tail() for server in servers)
    raise AssertionError(f"the cluster did not form within {FORM_TIMEOUT_S}s; logs:\n{logs}")


@pytest.fixture(scope="module")
def cluster():
    fabric_ports = [free_port() for _ in range(NODES)]
    seeds = [f"127.0.0.1:{port}" for port in fabric_ports]
    servers = []
    for index, fabric_port in enumerate(fabric_ports):
        server = OspreyServer(
            {"port": 0, "metrics-port": 0, "ticker-interval-s": 1},
            [namespace("test", replication_factor=2)],
            tag=f"cluster{index}",
            cluster={
                "node-id": f"C{index + 1}",
                "fabric-port": fabric_port,
                "seeds": seeds,
            },
        )
        servers.append(server)
    for server in servers:
        server.config_path.write_text(
            server.config_path.read_text().replace(
                "[cluster]", f'[cluster]\nmetadata-dir = "{server.dir / "cluster"}"'
            )
        )
        server.start()
    formed_s = wait_formed(servers)
    print(f"cluster formed {formed_s:.2f} s after the last node was ready")
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def client(cluster):
    seed = cluster[0]
    c = aerospike.client(client_config(seed.port)).connect()
    yield c
    c.close()


def replicas_of(server: OspreyServer) -> list[bytes]:
    """Per column, the 512-byte bitmap this node claims for namespace test."""
    text = info_value(server.host, server.port, "replicas")
    entry = next(part for part in text.split(";") if part.startswith("test:"))
    regime_and_count, *bitmaps = entry.split(":", 1)[1].split(",")[0:1] + entry.split(",")[1:]
    count = int(entry.split(",")[1])
    columns = entry.split(",")[2:]
    assert regime_and_count == "0"
    assert len(columns) == count
    return [base64.b64decode(column) for column in columns]


def claimed(bitmap: bytes) -> set[int]:
    return {pid for pid in range(4096) if bitmap[pid >> 3] & (0x80 >> (pid & 7))}


def test_the_client_given_one_seed_sees_every_node(cluster, client):
    names = sorted(node["node_name"] for node in client.get_node_names())
    assert names == ["C1", "C2", "C3"]
    for server in cluster:
        peers = info_value(server.host, server.port, "peers-clear-std")
        listed = {other.port for other in cluster if f"127.0.0.1:{other.port}" in peers}
        assert listed == {other.port for other in cluster if other is not server}


def test_every_partition_has_one_master_and_one_replica(cluster):
    masters: list[set[int]] = []
    proles: list[set[int]] = []
    for server in cluster:
        columns = replicas_of(server)
        assert len(columns) == 2
        masters.append(claimed(columns[0]))
        proles.append(claimed(columns[1]))
    for column in (masters, proles):
        assert sum(len(claims) for claims in column) == 4096
        assert set().union(*column) == set(range(4096))
    for index in range(NODES):
        assert not masters[index] & proles[index], "a node is never its own replica"
        share = len(masters[index]) / 4096
        assert 0.28 < share < 0.39, f"node {index} masters {share:.2%} of the partitions"


def key(i: int) -> tuple[str, str, str]:
    return ("test", "cl", f"k{i}")


@pytest.fixture(scope="module")
def loaded(cluster, client):
    for i in range(RECORDS):
        client.put(key(i), {"v": i, "s": f"value-{i}"})
    return RECORDS


def test_puts_and_gets_through_the_cluster(loaded, client):
    for i in range(0, RECORDS, 7):
        _, meta, bins = client.get(key(i))
        assert bins == {"v": i, "s": f"value-{i}"}
        assert meta["gen"] == 1


def test_each_master_times_its_replica_writes(cluster, loaded):
    replica_writes = 0
    for server in cluster:
        url = f"http://127.0.0.1:{server.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
        for family in text_string_to_metric_families(text):
            if family.name == "osprey_latency_seconds":
                replica_writes += sum(
                    sample.value for sample in family.samples
                    if sample.name.endswith("_count") and sample.labels["op"] == "write-repl-write"
                )
    # Every put went to one replica (earlier tests of this module may have written more).
    assert replica_writes >= loaded
    # `latencies:` answers the histogram when named, in Aerospike's format, after a tick.
    time.sleep(1.2)
    answers = [info_value(server.host, server.port, "latencies:hist={test}-write-repl-write")
               for server in cluster]
    assert all(answer.startswith("{test}-write-repl-write:msec,") for answer in answers), answers
    assert "write-repl-write" not in info_value(cluster[0].host, cluster[0].port, "latencies:")


def test_osprey_admin_sees_and_sets_every_node(cluster, loaded):
    admin = str(REPO_ROOT / "target" / "debug" / "osprey-admin")
    seed = cluster[0]

    def run(*args: str) -> str:
        done = subprocess.run([admin, "-p", str(seed.port), *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    summary = [line.split("\t") for line in run("summary").splitlines() if line and not line.startswith("#")]
    assert sorted(row[0] for row in summary[1:4]) == ["C1", "C2", "C3"]
    namespace = next(row for row in summary if row[0] == "test")
    # Every record on two nodes: the objects of all nodes add up to twice the records.
    assert int(namespace[1]) == 3 and int(namespace[2]) >= 2 * loaded
    assert sorted(line.split(" ")[-1] for line in run("info", "--all", "node").splitlines()) == ["C1", "C2", "C3"]
    run("set-config", "service", "single-scan-threads=5")
    for server in cluster:
        assert "single-scan-threads=5" in info_value(server.host, server.port, "get-config:context=service")


def test_operate_batch_and_remove(loaded, client):
    _, meta, bins = client.operate(key(1), [
        aerospike_helpers_increment("v", 10),
        aerospike_helpers_read("v"),
    ])
    assert bins["v"] == 11 and meta["gen"] == 2
    keys = [key(i) for i in range(200)]
    batch = client.batch_read(keys)
    assert [r.result for r in batch.batch_records] == [0] * 200
    client.remove(key(5))
    with pytest.raises(ex.RecordNotFound):
        client.get(key(5))
    client.put(key(5), {"v": 5, "s": "value-5"})
    client.put(key(1), {"v": 1, "s": "value-1"})


def aerospike_helpers_increment(name, by):
    from aerospike_helpers.operations import operations
    return operations.increment(name, by)


def aerospike_helpers_read(name):
    from aerospike_helpers.operations import operations
    return operations.read(name)


def test_a_scan_returns_every_record_exactly_once(loaded, client):
    seen = []
    client.scan("test", "cl").foreach(lambda record: seen.append(bytes(record[0][3])))
    assert len(seen) == RECORDS
    assert len(set(seen)) == RECORDS


def test_every_record_has_a_master_copy_and_a_replica_copy(loaded, cluster):
    masters = proles = 0
    for server in cluster:
        stats = namespace_stats(server)
        masters += int(stats["master_objects"])
        proles += int(stats["prole_objects"])
        assert stats["effective_replication_factor"] == "2"
        assert stats["replication-factor"] == "2"
    assert masters == RECORDS
    assert proles == RECORDS


def test_every_partition_has_the_same_content_on_its_master_and_its_replica(loaded, cluster):
    held: dict[int, list[tuple[str, str]]] = {}
    for server in cluster:
        text = info_value(server.host, server.port, "partition-hashes:namespace=test")
        for entry in text.split(";"):
            pid, records, content = entry.split(":")
            held.setdefault(int(pid), []).append((records, content))
    assert sorted(held) == list(range(4096))
    assert all(len(copies) == 2 for copies in held.values()), "every partition on two nodes"
    differing = [pid for pid, copies in held.items() if copies[0] != copies[1]]
    assert differing == []
    assert sum(int(copies[0][0]) for copies in held.values()) >= RECORDS


def test_smart_clients_send_nothing_to_the_wrong_node(loaded, cluster):
    forwarded = sum(int(statistics(server)["forwarded_requests"]) for server in cluster)
    assert forwarded == 0


def master_of(cluster: list[OspreyServer], digest: bytes) -> OspreyServer:
    pid = int.from_bytes(digest[:2], "little") & 0x0FFF
    for server in cluster:
        if pid in claimed(replicas_of(server)[0]):
            return server
    raise AssertionError(f"no master claims partition {pid}")


def test_a_request_sent_to_another_node_is_forwarded_to_the_master(loaded, cluster, client):
    """A client with a stale map sends a write to a node that is not the master: the node
    forwards it, the master answers, and the record is where a smart client looks for it."""
    digest = aerospike.calc_digest("test", "cl", "stale-map")
    master = master_of(cluster, digest)
    other = next(server for server in cluster if server is not master)
    before = int(statistics(other)["forwarded_requests"])
    fields = aswire.record_fields("test", "cl", digest)
    write = aswire.as_msg(fields, [aswire.write_int("v", 77)], info2=aswire.INFO2_WRITE)
    read = aswire.as_msg(fields, [aswire.read_bin("v")], info1=aswire.INFO1_READ)
    with socket.create_connection((other.host, other.port), timeout=5) as sock:
        assert aswire.request_msg(sock, write).result_code == 0
        reply = aswire.request_msg(sock, read)
        assert reply.result_code == 0
        assert reply.bins() == {"v": 77}
    assert int(statistics(other)["forwarded_requests"]) == before + 2
    _, _, bins = client.get(("test", "cl", "stale-map"))
    assert bins == {"v": 77}


def test_truncate_on_one_node_empties_the_set_everywhere(cluster, client):
    for i in range(300):
        client.put(("test", "gone", f"t{i}"), {"v": i})
    client.truncate("test", "gone", 0)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = []
        client.scan("test", "gone").foreach(lambda record: left.append(record))
        if not left:
            break
        time.sleep(0.1)
    assert left == []


def test_every_redis_port_serves_every_key(cluster):
    ports = [server.resp_port for server in cluster]
    clients = [redis.Redis(port=port, socket_timeout=5) for port in ports]
    for i in range(60):
        clients[i % NODES].set(f"rk{i}", f"rv{i}")
    for r in clients:
        for i in range(60):
            assert r.get(f"rk{i}") == f"rv{i}".encode()
    counter = [r.incr("counter") for r in clients]
    assert counter == [1, 2, 3]
    clients[1].rpush("list", "a", "b")
    assert clients[2].lrange("list", 0, -1) == [b"a", b"b"]


def test_redis_databases_are_routed_by_their_own_digests(cluster, client):
    """A key in database 3 lives in the set `redis-3`, whose digest picks its partition: every
    node's Redis port, with SELECT 3, reads and writes the same records (forwarded commands
    carry their database), KEYS and DBSIZE gather database 3 alone, and an Aerospike client
    finds the key in that set."""
    clients = [redis.Redis(port=s.resp_port, db=3, socket_timeout=5) for s in cluster]
    plain = redis.Redis(port=cluster[0].resp_port, socket_timeout=5)
    for i in range(30):
        clients[i % NODES].set(f"db3k{i}", f"v{i}")
    for r in clients:
        assert [r.get(f"db3k{i}") for i in range(30)] == [f"v{i}".encode() for i in range(30)]
        assert r.dbsize() == 30
        assert len(r.keys("db3k*")) == 30
    assert plain.get("db3k0") is None
    assert plain.keys("db3k*") == []
    assert client.get(("test", "redis-3", "db3k7"))[2] == {"value": "v7"}
    with pytest.raises(redis.ResponseError, match="MOVE is not allowed in cluster mode"):
        clients[0].move("db3k0", 4)
    clients[1].flushdb()
    assert clients[2].dbsize() == 0


def test_redis_keys_on_several_masters_get_crossslot(cluster, client):
    r = redis.Redis(port=cluster[0].resp_port, socket_timeout=5)
    masters = {}
    for i in range(50):
        digest = aerospike.calc_digest("test", "redis", f"x{i}")
        masters.setdefault(master_of(cluster, digest).port, f"x{i}")
        if len(masters) == 2:
            break
    first, second = masters.values()
    # redis-py keeps the message and drops the error code (CROSSSLOT).
    with pytest.raises(redis.ResponseError, match="hash to the same slot"):
        r.mset({first: 1, second: 2})


def keys_on_two_masters(cluster: list[OspreyServer], prefix: str) -> tuple[str, str]:
    masters = {}
    for i in range(200):
        key = f"{prefix}{i}"
        masters.setdefault(master_of(cluster, aerospike.calc_digest("test", "redis", key)).port, key)
        if len(masters) == 2:
            return tuple(masters.values())
    raise AssertionError("no two keys with different masters")


def test_redis_commands_with_keys_among_their_options_are_routed_by_every_key(cluster):
    """GEOSEARCHSTORE's source, BITOP's and PFMERGE's sources, and a STORE key of SORT or
    GEORADIUS count as keys: on several masters they get CROSSSLOT, never a read of the wrong
    node's copy; and SORT's BY and GET patterns, whose keys may be anywhere, are refused with
    Redis Cluster's words."""
    r = redis.Redis(port=cluster[0].resp_port, socket_timeout=5)
    first, second = keys_on_two_masters(cluster, "routed")
    r.geoadd(first, (13.4, 52.5, "berlin"))
    crossing = [
        ("GEOSEARCHSTORE", second, first, "FROMLONLAT", "13.4", "52.5", "BYRADIUS", "10", "km"),
        ("GEORADIUS", first, "13.4", "52.5", "10", "km", "STORE", second),
        ("BITOP", "OR", first, second),
        ("PFMERGE", first, second),
        ("PFCOUNT", first, second),
        ("SORT", first, "STORE", second),
    ]
    for command in crossing:
        with pytest.raises(redis.ResponseError, match="hash to the same slot"):
            r.execute_command(*command)
    with pytest.raises(redis.ResponseError, match="BY option of SORT denied in Cluster mode"):
        r.execute_command("SORT", first, "BY", "weight_*")
    with pytest.raises(redis.ResponseError, match="GET option of SORT denied in Cluster mode"):
        r.execute_command("SORT", first, "GET", "data_*")
    assert r.execute_command("GEOSEARCHSTORE", first, first, "FROMLONLAT", "13.4", "52.5",
                             "BYRADIUS", "10", "km") == 1


def every_node_answers(cluster: list[OspreyServer], command: str, expected: str) -> list[str]:
    """What each node answers `command`, once all answer `expected` (or after 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        answers = [info_value(server.host, server.port, command) for server in cluster]
        if answers == [expected] * len(cluster) or time.monotonic() > deadline:
            return answers
        time.sleep(0.1)


def test_a_secondary_index_made_on_one_node_serves_queries_from_every_node(loaded, cluster, client):
    from aerospike import predicates as p
    client.index_integer_create("test", "cl", "v", "cl_v")
    exists = "sindex-exists:ns=test;indexname=cl_v"
    assert every_node_answers(cluster, exists, "true") == ["true"] * NODES
    time.sleep(1)  # the builds run in the background
    query = client.query("test", "cl")
    query.where(p.between("v", 100, 299))
    found = []
    query.foreach(lambda record: found.append(record[2]["v"]))
    assert sorted(found) == list(range(100, 300))
    client.index_remove("test", "cl_v")
    assert every_node_answers(cluster, exists, "false") == ["false"] * NODES


def test_context_and_expression_indexes_made_on_one_node_serve_queries_from_every_node(cluster, client):
    """The cluster metadata carries an index's context and expression: each node builds the same
    index over its own partitions, and a query through the cluster returns each record once."""
    from aerospike import predicates as p
    from aerospike_helpers import cdt_ctx
    from aerospike_helpers import expressions as exp

    for i in range(200):
        client.put(("test", "clx", i), {"i": i, "l": [i % 10, 1000 + i], "a": i % 7, "b": i % 4})
    first = [cdt_ctx.cdt_ctx_list_index(0)]
    client.index_cdt_create("test", "clx", "l", aerospike.INDEX_TYPE_DEFAULT, aerospike.INDEX_NUMERIC, "clx_first", first)
    a_plus_b = exp.Add(exp.IntBin("a"), exp.IntBin("b")).compile()
    client.index_expr_create("test", "clx", aerospike.INDEX_TYPE_DEFAULT, aerospike.INDEX_NUMERIC, a_plus_b, "clx_sum")
    for name in ("clx_first", "clx_sum"):
        exists = f"sindex-exists:ns=test;indexname={name}"
        assert every_node_answers(cluster, exists, "true") == ["true"] * NODES
    for server in cluster:
        entries = info_value(server.host, server.port, "sindex-list:ns=test").split(";")
        entry = next(e for e in entries if "indexname=clx_sum:" in e)
        assert ":bin=null:" in entry and ":exp=null:" not in entry, entry
    time.sleep(1)  # the builds run in the background
    query = client.query("test", "clx")
    query.where(p.equals("l", 3), first)
    assert sorted(record[2]["i"] for record in query.results()) == [i for i in range(200) if i % 10 == 3]
    query = client.query("test", "clx")
    query.where_with_expr(a_plus_b, p.between(None, 8, 9))
    assert sorted(record[2]["i"] for record in query.results()) == [i for i in range(200) if i % 7 + i % 4 >= 8]
    client.index_remove("test", "clx_first")
    client.index_remove("test", "clx_sum")


def test_a_batch_sent_to_one_node_answers_rows_of_every_master(loaded, cluster):
    """A client with a stale map sends a whole batch to one node: rows of partitions other
    nodes master are forwarded one by one, and every row comes back in its place."""
    from test_batch import batch_frame, batch_reply, row_read

    rows = [row_read(i, aerospike.calc_digest("test", "cl", f"k{i}"), set_name="cl") for i in range(60)]
    target = cluster[1]
    before = int(statistics(target)["forwarded_requests"])
    with socket.create_connection((target.host, target.port), timeout=5) as sock:
        sock.sendall(batch_frame(rows))
        replies, last, _ = batch_reply(sock)
    assert last.result_code == 0
    assert sorted(reply.transaction_ttl for reply in replies) == list(range(60))
    for reply in replies:
        assert reply.result_code == 0
        assert reply.bins()["v"] == reply.transaction_ttl
    # A read is served by any node holding a full copy (two of the three at RF 2): about a
    # third of the rows go elsewhere.
    forwarded = int(statistics(target)["forwarded_requests"]) - before
    assert 5 < forwarded < 40, f"{forwarded} of 60 rows forwarded"


def test_the_official_go_client_finds_every_node_and_sends_each_key_to_its_master(cluster):
    """tests/go/cluster_client (built by `cargo xtask blackbox`): the Go client v8, given one
    seed, sees the three nodes, and its 1,000 puts and gets all land on the key's master."""
    binary = os.environ.get("OSPREY_GO_CLUSTER_CLIENT", "target/go/cluster_client")
    assert Path(binary).exists(), f"{binary} is missing: run `cargo xtask blackbox`, which builds it"
    before = sum(int(statistics(server)["forwarded_requests"]) for server in cluster)
    run = subprocess.run([binary, str(cluster[2].port), str(NODES)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"nodes: {NODES}" in run.stdout
    after = sum(int(statistics(server)["forwarded_requests"]) for server in cluster)
    assert after == before


def test_the_official_java_client_finds_every_node_and_sends_each_key_to_its_master(cluster):
    """tests/java/cluster_client (built by `cargo xtask blackbox`): the Java client 9.0.5, given
    one seed, sees the three nodes, and its 1,000 puts and gets all land on the key's master."""
    target = Path(__file__).resolve().parents[2] / "tests/java/cluster_client/target"
    default = os.pathsep.join([str(target / "cluster-client.jar"), str(target / "dependency/*")])
    classpath = os.environ.get("OSPREY_JAVA_CLUSTER_CLIENT", default)
    jar = classpath.split(os.pathsep)[0]
    assert Path(jar).exists(), f"{jar} is missing: run `cargo xtask blackbox`, which builds it"
    before = sum(int(statistics(server)["forwarded_requests"]) for server in cluster)
    run = subprocess.run(["java", "-cp", classpath, "ClusterClient", str(cluster[1].port), str(NODES)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"nodes: {NODES}" in run.stdout
    after = sum(int(statistics(server)["forwarded_requests"]) for server in cluster)
    assert after == before


def test_every_redis_port_sees_the_whole_data_set(cluster):
    """DBSIZE, KEYS, SCAN and RANDOMKEY answer for the whole cluster from any node: each node
    counts and walks only the partitions it masters, and the node asked merges the parts (a
    replica's copy is never counted twice)."""
    writer = redis.Redis(port=cluster[1].resp_port, socket_timeout=5)
    writer.flushdb()
    names = {f"whole:{i}".encode() for i in range(500)}
    pipe = writer.pipeline(transaction=False)
    for name in names:
        pipe.set(name, b"v")
    pipe.execute()
    for server in cluster:
        r = redis.Redis(port=server.resp_port, socket_timeout=5)
        assert r.dbsize() == len(names)
        keys = r.keys("*")
        assert len(keys) == len(names) and set(keys) == names
        assert sorted(r.keys("whole:1?")) == sorted(n for n in names if len(n) == 8 and n.startswith(b"whole:1"))
        scanned = list(r.scan_iter(count=50))
        assert len(scanned) == len(names), "a full SCAN returns each key exactly once"
        assert set(scanned) == names
        assert r.randomkey() in names
    writer.flushdb()
    for server in cluster:
        r = redis.Redis(port=server.resp_port, socket_timeout=5)
        assert r.dbsize() == 0
        assert r.keys("*") == []
        assert r.randomkey() is None


def test_a_set_index_switched_on_one_node_serves_scans_from_every_node(loaded, cluster, client):
    """`set-config ... enable-index=true` sent to one node is cluster-wide metadata: every node
    builds the set's index, and a scan of the set returns the same records, each once."""

    def scanned_digests() -> list[bytes]:
        seen: list[bytes] = []
        client.scan("test", "cl").foreach(lambda record: seen.append(bytes(record[0][3])))
        return seen

    before = scanned_digests()
    switch = "set-config:context=namespace;id=test;set=cl;enable-index={}"
    assert info_value(cluster[2].host, cluster[2].port, switch.format("true")) == "ok"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        sets = [info_value(s.host, s.port, "sets/test/cl") for s in cluster]
        if all("enable-index=true" in text and "index_populating=false" in text for text in sets):
            break
        time.sleep(0.1)
    assert all("enable-index=true" in text for text in sets), sets
    after = scanned_digests()
    assert len(after) == len(set(after)) == len(before) >= RECORDS
    assert set(after) == set(before)
    assert info_value(cluster[0].host, cluster[0].port, switch.format("false")) == "ok"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        sets = [info_value(s.host, s.port, "sets/test/cl") for s in cluster]
        if all("enable-index=false" in text for text in sets):
            break
        time.sleep(0.1)
    assert all("enable-index=false" in text for text in sets), sets


def redis_keys_by_master(cluster: list[OspreyServer], count: int) -> dict[int, list[str]]:
    """`count` Redis keys per node, by the node's service port: keys that node masters."""
    by_master: dict[int, list[str]] = {server.port: [] for server in cluster}
    i = 0
    while any(len(keys) < count for keys in by_master.values()):
        name = f"tx{i}"
        by_master[master_of(cluster, aerospike.calc_digest("test", "redis", name)).port].append(name)
        i += 1
    return {port: keys[:count] for port, keys in by_master.items()}


def test_a_redis_transaction_runs_on_the_master_of_its_keys(cluster):
    """MULTI/EXEC on keys another node masters runs there, whole; keys of two masters get
    CROSSSLOT and nothing runs; WATCH takes only keys the connected node masters, since the
    watch lives on this node."""
    keys = redis_keys_by_master(cluster, 2)
    here, elsewhere = cluster[0], cluster[1]
    r = redis.Redis(port=here.resp_port, socket_timeout=5)
    remote = keys[elsewhere.port]
    pipe = r.pipeline(transaction=True)
    pipe.set(remote[0], "a").incr(remote[1]).incr(remote[1]).get(remote[0])
    assert pipe.execute() == [True, 1, 2, b"a"]
    assert redis.Redis(port=elsewhere.resp_port).get(remote[1]) == b"2"

    local = keys[here.port]
    pipe = r.pipeline(transaction=True)
    pipe.set(local[0], "x").set(remote[0], "y")
    with pytest.raises(redis.ResponseError, match="hash to the same slot"):
        pipe.execute()
    assert r.get(local[0]) is None and r.get(remote[0]) == b"a"

    with pytest.raises(redis.ResponseError, match="WATCH on a cluster"):
        r.execute_command("WATCH", remote[0])
    pipe = r.pipeline(transaction=True)
    pipe.watch(local[1])
    pipe.multi()
    pipe.set(local[1], "watched")
    assert pipe.execute() == [True]
    for key in local + remote:
        r.delete(key)


def test_keys_over_many_keys_runs_each_nodes_part_off_the_runtime(cluster):
    """A KEYS that visits tens of thousands of keys runs each node's part on its long-request
    pool (`long_request_jobs`), as on one node, instead of holding a runtime worker, and still
    answers the whole data set."""
    r = redis.Redis(port=cluster[2].resp_port, socket_timeout=30)
    r.flushdb()
    # Each node's part visits the keys it masters, about a third: 23,000, past the pool's
    # threshold (20,000). (With 40,000 keys, each node's 27,000 copies passed it; the estimate
    # counts the masters now, as the part walks only those.)
    count = 70_000
    pipe = r.pipeline(transaction=False)
    for i in range(count):
        pipe.set(f"many:{i}", b"v")
    pipe.execute()
    before = [int(statistics(server)["long_request_jobs"]) for server in cluster]
    assert len(r.keys("many:*")) == count
    after = [int(statistics(server)["long_request_jobs"]) for server in cluster]
    assert all(a > b for a, b in zip(after, before)), (before, after)
    r.flushdb()


def test_a_udf_module_put_on_one_node_runs_on_every_master(loaded, cluster, client):
    source = "function bump(rec) rec['u'] = (rec['u'] or 0) + 1; aerospike:update(rec); return rec['u'] end\n"
    content = base64.b64encode(source.encode()).decode()
    put = f"udf-put:filename=bump.lua;content-len={len(content)};udf-type=LUA;content={content}"
    assert info_value(cluster[0].host, cluster[0].port, put) == "ok"
    # The 30 keys below fall on every node's partitions: each apply runs on its master.
    for node in cluster:
        deadline = time.monotonic() + 10
        while "filename=bump.lua" not in info_value(node.host, node.port, "udf-list"):
            assert time.monotonic() < deadline, "the module never reached a node"
            time.sleep(0.1)
    keys = [("test", "udf", f"u{i}") for i in range(30)]
    assert [client.apply(k, "bump", "bump", []) for k in keys] == [1] * 30
    assert [client.apply(k, "bump", "bump", []) for k in keys] == [2] * 30
    remove = "udf-remove:filename=bump.lua"
    assert info_value(cluster[1].host, cluster[1].port, remove) == "ok"
    for node in cluster:
        deadline = time.monotonic() + 10
        while "filename=bump.lua" in info_value(node.host, node.port, "udf-list"):
            assert time.monotonic() < deadline, "the removal never reached a node"
            time.sleep(0.1)


def test_a_blocking_pop_forwarded_to_its_master_waits_across_slices_and_is_woken(cluster):
    """BLPOP on a node that does not master the key is forwarded in slices of at most a
    second (blocking.rs): it waits past one slice, is woken by a push through a third node,
    and a timeout longer than a slice answers null once it has passed."""
    import threading

    key = next(
        f"blk{i}"
        for i in range(1000)
        if master_of(cluster, aerospike.calc_digest("test", "redis", f"blk{i}")) is not cluster[0]
    )
    waiter = redis.Redis(port=cluster[0].resp_port, socket_timeout=10)
    pusher = redis.Redis(port=cluster[2].resp_port, socket_timeout=5)
    result = {}
    thread = threading.Thread(target=lambda: result.update(popped=waiter.blpop([key], 0)))
    thread.start()
    time.sleep(1.6)
    assert thread.is_alive()
    pusher.rpush(key, "v")
    thread.join(timeout=5)
    assert tuple(result["popped"]) == (key.encode(), b"v")
    started = time.monotonic()
    assert waiter.blpop([key], 1.5) is None
    assert 1.4 <= time.monotonic() - started < 4


def test_a_command_forwarded_to_a_node_running_a_script_gets_busy(cluster):
    """A Redis command for a key whose master is another node is forwarded there. Sent while
    a looping script runs on that node, before the script passes busy-reply-threshold, it
    waits for the script's turn there (on the runtime, not at the namespace's gate, where a
    runaway script would hold it for good) and is answered BUSY once the threshold has
    passed, as a command sent to that node directly is; after SCRIPT KILL it is served."""
    busy_node, other = cluster[0], cluster[1]
    key = next(
        f"fwd-busy{i}" for i in range(500)
        if master_of(cluster, aerospike.calc_digest("test", "redis", f"fwd-busy{i}")).port
        == busy_node.port
    )
    admin = redis.Redis(port=busy_node.resp_port, socket_timeout=10)
    admin.config_set("busy-reply-threshold", 1000)
    looping = redis.Redis(port=busy_node.resp_port, socket_timeout=60)
    outcome = {}

    def loop():
        try:
            looping.eval("while true do end", 0)
        except redis.ResponseError as error:
            outcome["error"] = str(error)

    thread = threading.Thread(target=loop)
    thread.start()
    try:
        time.sleep(0.2)  # the script runs; the threshold is still ahead
        sender = redis.Redis(port=other.resp_port, socket_timeout=5)
        message = str(error_raised_by(lambda: sender.set(key, "v")))
        assert message.startswith("BUSY Redis is busy running a script"), message
    finally:
        while "NOTBUSY" not in str(error_raised_by(admin.script_kill)):
            time.sleep(0.05)
        thread.join(timeout=10)
        admin.config_set("busy-reply-threshold", 5000)
    assert "Script killed by user" in outcome.get("error", ""), outcome
    assert redis.Redis(port=other.resp_port, socket_timeout=5).set(key, "after") is True

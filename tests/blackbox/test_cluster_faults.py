"""Faults on a real cluster, each node in a network namespace of its own: what a client was told
succeeded survives, nothing it was told failed or deleted exists, and the copies agree.

Three release `osprey` processes at replication factor 2 (a fourth joins in one test), each in
its own namespace (`netns.py`), while three workloads run on several threads through the
official client and record every operation with its outcome: acknowledged, definitely failed,
or in doubt (the client's `in_doubt`, or a timeout); the workloads and their checkers are in
`fault_workloads.py`:

* registers: read a key, then write it with the generation read (`POLICY_GEN_EQ`). Asserted:
  no two acknowledged writes won one generation, generations of acknowledged writes never go
  back in real time, the final record holds the last of them, and the Go checker
  (`tests/go/linearizability`, Porcupine; in-doubt writes may or may not have taken effect)
  finds the writes plus the reads made after the cluster settled linearizable (when it decides
  within its time limit). The checker's verdict on every read is printed, not asserted: Osprey,
  like Aerospike in AP mode, answers a read at any full copy, so during a map change a read can
  return a version older than one the reader already saw;
* counters: `increment` by 1; the final value is at least the acknowledged increments and at
  most those plus the in-doubt ones;
* a set: inserts of unique keys, and deletes of some of them: every acknowledged insert not
  deleted reads back, no definitely failed insert exists, no acknowledged delete comes back
  (the kill test restarts the node on its data files), and no delete of an acknowledged insert
  is answered NOT_FOUND.

Each test injects one fault (a node isolated, a majority/minority split, a one-way drop, a
pause, a kill and restart, a bandwidth cap while data migrates, a delayed fabric), heals it,
waits until every node answers `cluster-stable` (failing early when migrations stop making
progress), checks that every workload gets writes acknowledged again, runs the checkers, and
compares every partition's two copies (`partition-hashes`).

Every choice (victim, timings, workload mix) comes from a seed, printed as
`OSPREY_FAULT_SEED=<n>`; set that variable to replay a run (thread timing still differs).
`OSPREY_FAULT_ROUNDS=N` repeats each fault N times with seeds derived from the first, each printed.
`OSPREY_FAULT_TBF_RATE` (default 32mbit; 16mbit and 8mbit pass too, see docs/reliability.md) and
`OSPREY_FAULT_TBF_LATENCY` (400ms) shape the bandwidth cap. The checker is
`OSPREY_LINEARIZABILITY_CHECKER`, or built with `go build` when that is unset. A failing round keeps
its servers' logs and its histories, and names them. Needs root and network namespaces (iproute2 and
iptables are installed when missing); skipped, saying why, without them.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

import aerospike
import pytest

import aswire
import netns
from fault_workloads import (CHECKER_TIMEOUT_S, NAMESPACE, Workloads, claimed_by, counter_problems,
                             info_value, mastered_by, register_problems, replica_problems, set_problems)
from harness import REPO_ROOT, device_storage, namespace, wait_until

FAULT_ROUNDS = int(os.environ.get("OSPREY_FAULT_ROUNDS", "1"))
FIRST_SEED = int(os.environ.get("OSPREY_FAULT_SEED", str(random.randrange(1 << 31))))
ROUND_TIMEOUT_S = 240
SETTLE_TIMEOUT_S = 90.0
MIGRATION_STALL_TIMEOUT_S = 30.0
PROBE_SET = "probe"
PROBE_COUNT = 24
PROBE_INTERVAL_S = 0.125
HEARTBEAT_TIMEOUT_S = 1.5
# A one-way drop: the receiver stops hearing the sender after the heartbeat timeout, the leader
# waits as long again before it removes one of them, then the map changes.
ONE_WAY_WRITES_WITHIN_S = 4 * HEARTBEAT_TIMEOUT_S + 4
TBF_RATE = os.environ.get("OSPREY_FAULT_TBF_RATE", "32mbit")
TBF_LATENCY = os.environ.get("OSPREY_FAULT_TBF_LATENCY", "400ms")



@pytest.fixture(scope="module", autouse=True)
def network_namespaces():
    """Skips the module, saying why, where network namespaces cannot be made."""
    reason = netns.unavailable_reason()
    if reason is not None:
        pytest.skip(f"no network namespaces: {reason}")


# -- seeds -------------------------------------------------------------------------------------


def round_seeds() -> list[int]:
    """The first seed, then each next one drawn from the one before."""
    seeds = [FIRST_SEED]
    while len(seeds) < FAULT_ROUNDS:
        seeds.append(random.Random(seeds[-1]).randrange(1 << 31))
    return seeds


# -- info --------------------------------------------------------------------------------------


def is_settled(server: netns.NamespacedServer, size: int) -> bool:
    try:
        return (not info_value(server, f"cluster-stable:size={size}").startswith("ERROR")
                and int(info_value(server, "partition-generation")) > 0)
    except (OSError, ValueError):
        return False


def statistics(server: netns.NamespacedServer) -> dict[str, str]:
    text = info_value(server, "statistics")
    return dict(pair.split("=", 1) for pair in text.split(";") if "=" in pair)


def cluster_state(servers: list[netns.NamespacedServer]) -> str:
    """Each node's map version and partitions left to move, and its last log lines of its own."""
    lines = []
    for server in servers:
        try:
            state = (f"map version {info_value(server, 'partition-generation')}, "
                     f"{statistics(server).get('migrate_partitions_remaining')} partitions to move")
        except OSError as error:
            state = f"unreachable ({error})"
        own_lines = [line for line in server.log_text().splitlines() if "openraft" not in line]
        lines.append(f"{server.node}: {state}\n" + "\n".join(own_lines[-8:]))
    return "\n".join(lines)


def wait_settled(servers: list[netns.NamespacedServer], timeout_s: float = SETTLE_TIMEOUT_S) -> float:
    """Seconds until every node answers `cluster-stable` for exactly `servers`."""
    started = time.monotonic()
    if wait_until(lambda: all(is_settled(s, len(servers)) for s in servers), timeout_s, 0.2):
        return time.monotonic() - started
    raise AssertionError(f"not settled within {timeout_s}s:\n{cluster_state(servers)}")


def partitions_to_move(servers: list[netns.NamespacedServer]) -> int:
    total = 0
    for server in servers:
        try:
            total += int(statistics(server).get("migrate_partitions_remaining", "0"))
        except OSError:
            pass
    return total


def wait_migrations(servers: list[netns.NamespacedServer], stall_timeout_s: float) -> float:
    """Seconds until the cluster settles, failing as soon as no partition has finished moving
    for `stall_timeout_s`."""
    started = last_progress = time.monotonic()
    fewest = partitions_to_move(servers)
    while not all(is_settled(s, len(servers)) for s in servers):
        remaining = partitions_to_move(servers)
        if remaining < fewest:
            fewest, last_progress = remaining, time.monotonic()
        if time.monotonic() - last_progress > stall_timeout_s:
            raise AssertionError(f"migrations stalled: no progress in {stall_timeout_s}s, {fewest} "
                                 f"partitions still to move:\n{cluster_state(servers)}")
        time.sleep(0.5)
    return time.monotonic() - started


def partition_generation(servers: list[netns.NamespacedServer]) -> int:
    """The highest partition-map version any of `servers` has applied."""
    return max(int(info_value(server, "partition-generation")) for server in servers)


def restart_noticed(victim: netns.NamespacedServer, survivors: list[netns.NamespacedServer]) -> None:
    """Starts `victim` again and waits until the survivors changed the map for it. Until then
    every node may answer `cluster-stable`: the survivors have not seen the new process yet,
    and the new process answers from the metadata it kept on disk."""
    generation = partition_generation(survivors)
    victim.start()
    noticed = wait_until(lambda: partition_generation(survivors) > generation,
                             MIGRATION_STALL_TIMEOUT_S, 0.1)
    assert noticed, (f"the survivors did not change the map for the restarted {victim.node} within "
                     f"{MIGRATION_STALL_TIMEOUT_S}s:\n{cluster_state([victim, *survivors])}")


def partition_of(digest: bytes) -> int:
    return (digest[0] | (digest[1] << 8)) & 0xFFF


def raw_write(server: netns.NamespacedServer, set_name: str, digest: bytes) -> int | None:
    """One write straight to `server` on a socket of its own: the result code, or None when
    no answer came."""
    request = aswire.as_msg(aswire.record_fields(NAMESPACE, set_name, digest),
                            [aswire.write_int("v", 1)], info2=aswire.INFO2_WRITE)
    try:
        with socket.create_connection((server.host, server.port), timeout=5) as sock:
            return aswire.request_msg(sock, request).result_code
    except (OSError, aswire.ConnectionClosed):
        return None


def raw_delete(server: netns.NamespacedServer, set_name: str, digest: bytes) -> int | None:
    """One delete straight to `server`: the result code, or None when no answer came."""
    request = aswire.as_msg(aswire.record_fields(NAMESPACE, set_name, digest), [],
                            info2=aswire.INFO2_WRITE | aswire.INFO2_DELETE)
    try:
        with socket.create_connection((server.host, server.port), timeout=5) as sock:
            return aswire.request_msg(sock, request).result_code
    except (OSError, aswire.ConnectionClosed):
        return None


# -- the cluster -------------------------------------------------------------------------------


class Cluster:
    """Namespaces and the servers in them; `close()` kills the servers and removes the
    namespaces, keeping the servers' directories (logs) only when asked."""

    def __init__(self, size: int, storage: str):
        self.network = netns.Network()
        self.storage = storage
        self.data_dirs: list[Path] = []
        self.servers: list[netns.NamespacedServer] = []
        nodes = self.network.create(size)
        self.seeds = list(nodes)
        for node in nodes:
            self.servers.append(self._server(node))

    def _server(self, node: netns.Node) -> netns.NamespacedServer:
        namespaces = [namespace(NAMESPACE, replication_factor=2)]
        if self.storage == "device":
            data_dir = Path(tempfile.mkdtemp(prefix="faults-data-"))
            self.data_dirs.append(data_dir)
            namespaces = [namespace(NAMESPACE, replication_factor=2, storage_engine=device_storage(
                [data_dir / "test.dat"], filesize=64 * 1024 * 1024, write_block_size=1024 * 1024))]
        return netns.NamespacedServer(node, f"F{node.index + 1}", self.seeds, namespaces=namespaces)

    def start(self) -> None:
        for server in self.servers:
            server.start()
        wait_settled(self.servers)

    def add_server(self) -> netns.NamespacedServer:
        """A new node in a new namespace, seeded with the first nodes; not started."""
        server = self._server(self.network.add_node())
        self.servers.append(server)
        return server

    def others(self, server: netns.NamespacedServer) -> list[netns.NamespacedServer]:
        return [s for s in self.servers if s is not server]

    def close(self, keep_logs: bool) -> None:
        for server in self.servers:
            if server.alive():
                server.kill()
            if not keep_logs:
                server.remove_dir()
        for data_dir in self.data_dirs:
            shutil.rmtree(data_dir, ignore_errors=True)
        self.network.destroy()


@pytest.fixture
def clusters():
    """Makes clusters; whatever happens, every one is torn down after the test."""
    made: list[Cluster] = []

    def make(size: int = 3, storage: str = "memory") -> Cluster:
        cluster = Cluster(size, storage)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.close(keep_logs=True)


@pytest.fixture(scope="session")
def linearizability_checker(tmp_path_factory) -> Path:
    """The Go checker: OSPREY_LINEARIZABILITY_CHECKER, else built here with `go build`."""
    given = os.environ.get("OSPREY_LINEARIZABILITY_CHECKER")
    if given:
        assert Path(given).is_file(), f"OSPREY_LINEARIZABILITY_CHECKER={given} is not a file"
        return Path(given)
    output = tmp_path_factory.mktemp("checker") / "linearizability"
    source = REPO_ROOT / "tests" / "go" / "linearizability"
    result = subprocess.run(["go", "build", "-mod=mod", "-o", str(output), "."], cwd=source,
                            capture_output=True, text=True, timeout=CHECKER_TIMEOUT_S)
    assert result.returncode == 0, (
        f"cannot build the checker (or set OSPREY_LINEARIZABILITY_CHECKER): {result.stderr}")
    return output


# -- a round -----------------------------------------------------------------------------------


class Round:
    """One fault under load: the cluster, the workloads, the generator, and what was seen."""

    def __init__(self, cluster: Cluster, rng: random.Random, seed: int):
        self.cluster = cluster
        self.rng = rng
        self.seed = seed
        self.notes: list[str] = []
        self.problems: list[str] = []

    @property
    def servers(self) -> list[netns.NamespacedServer]:
        return self.cluster.servers

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  [{time.monotonic():.3f}] {text}", flush=True)

    def victim(self) -> netns.NamespacedServer:
        server = self.rng.choice(self.servers)
        self.note(f"victim {server.node.ip} ({server.node.netns})")
        return server

    def fault_duration_s(self) -> float:
        """Longer than the heartbeat timeout, so that the cluster acts on the fault."""
        return self.rng.uniform(HEARTBEAT_TIMEOUT_S * 2.3, HEARTBEAT_TIMEOUT_S * 3.3)


def run_rounds(name: str, clusters, checker: Path, tmp_path: Path, fault: Callable[[Round], None],
               storage: str = "memory") -> None:
    for seed in round_seeds():
        print(f"\n{name}: OSPREY_FAULT_SEED={seed}", flush=True)
        run_round(name, seed, clusters(3, storage), checker, tmp_path / f"seed-{seed}", fault)


def run_round(name: str, seed: int, cluster: Cluster, checker: Path, out_dir: Path,
              fault: Callable[[Round], None]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{name}:{seed}")
    cluster.start()
    fault_round = Round(cluster, rng, seed)
    workloads = Workloads(cluster.servers, rng, tag=f"{name}-{seed}")
    try:
        workloads.start()
        time.sleep(rng.uniform(0.5, 1.5))
        fault(fault_round)
        healed_s = time.monotonic()
        settled_s = wait_migrations(cluster.servers, MIGRATION_STALL_TIMEOUT_S)
        fault_round.note(f"healed; settled {settled_s:.1f} s later")
        workloads.wait_for_writes_after(healed_s + settled_s)
        workloads.stop()
        wait_settled(cluster.servers)
        check_all(fault_round, workloads, checker, out_dir)
    finally:
        workloads.stop()
        workloads.close()
    cluster.close(keep_logs=False)


def save_outcomes(workloads: Workloads, out_dir: Path) -> None:
    """Every insert's and delete's outcome, and the counters', for whoever reads a failure."""
    outcomes = {"inserts": workloads.set.inserts, "deletes": workloads.set.deletes,
                "insert and delete calls (monotonic ns)": workloads.set.times_ns,
                "counters": {"acked": workloads.counters.acked_count,
                             "in doubt": workloads.counters.in_doubt_count}}
    (out_dir / "outcomes.json").write_text(json.dumps(outcomes))


def check_all(fault_round: Round, workloads: Workloads, checker: Path, out_dir: Path) -> None:
    """Runs every checker, then fails with everything they found."""
    print(f"  {workloads.summary()}", flush=True)
    save_outcomes(workloads, out_dir)
    problems = list(fault_round.problems)
    problems += counter_problems(workloads.counters)
    found, counts = set_problems(workloads.set)
    problems += found
    workloads.registers.read_all_finally()
    found, verdict = register_problems(checker, workloads.registers, out_dir)
    problems += found
    problems += replica_problems(fault_round.servers, workloads)
    print(f"  checked: set {counts}; registers: {verdict}", flush=True)
    if problems:
        dirs = ", ".join(str(server.dir) for server in fault_round.servers)
        pytest.fail(f"OSPREY_FAULT_SEED={fault_round.seed}: " + "\n".join(problems)
                    + f"\nlogs in {dirs}; histories in {out_dir}", pytrace=False)


# -- faults ------------------------------------------------------------------------------------


class DeposedProbe:
    """Checks that a node back from a fault does not answer for partitions it lost: while it is
    cut off, the majority writes records in partitions the node mastered before; once the fault
    heals, deletes of them go straight to the node, one every PROBE_INTERVAL_S. It is no longer
    their master: it must pass each delete on (OK) or refuse it, never answer NOT_FOUND from
    its own copy, which lacks them."""

    def __init__(self, victim: netns.NamespacedServer):
        self.victim = victim
        masters = sorted(mastered_by(victim))
        spread = masters[:: max(1, len(masters) // PROBE_COUNT)][:PROBE_COUNT]
        self.digests = [digest_in(pid) for pid in spread]

    def write_through(self, majority: list[netns.NamespacedServer]) -> None:
        """Writes every probe record through the majority, once it has failed over."""
        for index, digest in enumerate(self.digests):
            writer = majority[index % len(majority)]
            taken = wait_until(lambda: raw_write(writer, PROBE_SET, digest) == 0,
                                   SETTLE_TIMEOUT_S, 0.1)
            assert taken, f"the majority takes writes of {self.victim.node}'s partitions after failover"

    def delete_at_victim(self) -> list[str]:
        """The deletes' answers; the problems they show."""
        answers = []
        for digest in self.digests:
            answers.append(raw_delete(self.victim, PROBE_SET, digest))
            time.sleep(PROBE_INTERVAL_S)
        not_found = answers.count(2)
        print(f"  probe deletes at the healed node answered {answers}", flush=True)
        if not not_found:
            return []
        return [f"the node back from the fault ({self.victim.node}) answered NOT_FOUND to {not_found} of "
                f"{len(answers)} deletes of records the majority acknowledged meanwhile, in partitions "
                f"it no longer masters: it served them from its own stale copy (answers: {answers})"]


def digest_in(pid: int, set_name: str = PROBE_SET) -> bytes:
    """The digest of some key of `set_name` in partition `pid`."""
    for i in range(1_000_000):
        digest = aerospike.calc_digest(NAMESPACE, set_name, f"p{pid}-{i}")
        if partition_of(digest) == pid:
            return digest
    raise AssertionError(f"no key in partition {pid}")


def cut_off(fault_round: Round, victim: netns.NamespacedServer, cut: Callable[[], None],
            heal: Callable[[], None], check_cut: Callable[[], None] | None = None) -> None:
    """Cuts `victim` off for the fault's duration, has the majority write the probe records,
    heals, and probes the victim."""
    probe = DeposedProbe(victim)
    duration_s = fault_round.fault_duration_s()
    started = time.monotonic()
    cut()
    try:
        if check_cut is not None:
            check_cut()
        probe.write_through(fault_round.cluster.others(victim))
        fault_round.note(f"the majority took writes of the victim's partitions "
                         f"{time.monotonic() - started:.1f} s into the fault")
        time.sleep(max(0.0, duration_s - (time.monotonic() - started)))
    finally:
        heal()
    fault_round.problems += probe.delete_at_victim()


def isolate_a_node(fault_round: Round) -> None:
    victim = fault_round.victim()
    cut_off(fault_round, victim, lambda: netns.isolate(victim.node), fault_round.cluster.network.heal)


def split_majority_minority(fault_round: Round) -> None:
    """The minority (one node) refuses writes with UNAVAILABLE once it knows it is cut off;
    clients still reach both sides."""
    minority = fault_round.victim()
    majority = [s.node for s in fault_round.cluster.others(minority)]
    digest = digest_in(min(mastered_by(minority)), "quorum")

    def minority_refuses() -> None:
        refused = wait_until(lambda: raw_write(minority, "quorum", digest) == 11, 20.0, 0.2)
        assert refused, "the minority refuses writes with UNAVAILABLE (11)"

    cut_off(fault_round, minority, lambda: netns.partition([[minority.node], majority]),
            fault_round.cluster.network.heal, minority_refuses)


def pause_a_node(fault_round: Round) -> None:
    victim = fault_round.victim()
    cut_off(fault_round, victim, victim.pause, victim.resume)


def drop_one_way(fault_round: Round) -> None:
    """What one node sends another is dropped. Neither is silent to the third, so neither is
    declared dead; but a master cannot have its replica's acknowledgements, so the group must
    remove one of the two (the cluster is the nodes that all hear each other), and the
    partitions they shared must take writes again while the drop lasts."""
    source, destination = fault_round.rng.sample(fault_round.servers, 2)
    third = next(s for s in fault_round.servers if s not in (source, destination))
    shared = shared_partitions(source, destination)
    digests = [digest_in(pid, "oneway") for pid in sorted(shared)[:: max(1, len(shared) // 8)][:8]]
    duration_s = fault_round.fault_duration_s()
    started = time.monotonic()
    fault_round.note(f"{source.node.ip} -> {destination.node.ip} dropped; "
                     f"{len(shared)} partitions held by both")
    netns.drop_one_way(source.node, destination.node)
    try:
        for digest in digests:
            taken = wait_until(lambda: raw_write(third, "oneway", digest) == 0, ONE_WAY_WRITES_WITHIN_S, 0.1)
            if not taken:
                fault_round.problems.append(
                    f"a partition {source.node} and {destination.node} both held took no write within "
                    f"{ONE_WAY_WRITES_WITHIN_S} s of a one-way drop between them")
                break
        fault_round.note(f"their partitions took writes {time.monotonic() - started:.1f} s into the drop")
        time.sleep(max(0.0, duration_s - (time.monotonic() - started)))
    finally:
        fault_round.cluster.network.heal()


def shared_partitions(a: netns.NamespacedServer, b: netns.NamespacedServer) -> set[int]:
    """The partitions one of the two masters and the other holds the replica of."""
    return ((mastered_by(a) & claimed_by(b, 1)) | (mastered_by(b) & claimed_by(a, 1)))


def kill_and_restart(fault_round: Round) -> None:
    """SIGKILL; the survivors fail over (and, drawn, settle); the node restarts on its files,
    which hold records deleted meanwhile: they must not come back."""
    victim = fault_round.victim()
    victim.kill()
    fault_round.note("killed")
    survivors = fault_round.cluster.others(victim)
    if fault_round.rng.random() < 0.5:
        fault_round.note(f"survivors settled in {wait_settled(survivors):.1f} s")
    else:
        time.sleep(fault_round.rng.uniform(0.0, HEARTBEAT_TIMEOUT_S * 2))
    restart_noticed(victim, survivors)
    fault_round.note("restarted, and the survivors changed the map for it")


def cap_bandwidth_while_data_moves(fault_round: Round) -> None:
    """A bandwidth cap on one node while a fourth node joins, or while a node restarts and fills."""
    rate = TBF_RATE
    if fault_round.rng.random() < 0.5:
        joining = fault_round.cluster.add_server()
        capped = fault_round.rng.choice(fault_round.servers)
        fault_round.note(f"{joining.node.ip} joins; {capped.node.ip} capped at {rate}")
        netns.cap_bandwidth(capped.node, rate, latency=TBF_LATENCY)
        joining.start()
    else:
        capped = fault_round.victim()
        capped.kill()
        fault_round.note(f"restarts capped at {rate}")
        netns.cap_bandwidth(capped.node, rate, latency=TBF_LATENCY)
        restart_noticed(capped, fault_round.cluster.others(capped))
    settled_s = wait_migrations(fault_round.servers, MIGRATION_STALL_TIMEOUT_S)
    fault_round.note(f"migrations done {settled_s:.1f} s after, under the cap")
    fault_round.cluster.network.heal()


def delay_the_fabric(fault_round: Round) -> None:
    """A node's fabric connections to its peers delayed by a user-space proxy in its namespace
    (its open connections are cut so that it redials through the proxy); healing stops the
    proxy, which cuts them again."""
    victim = fault_round.victim()
    delay_ms = round(fault_round.rng.uniform(20.0, 100.0))
    peers = [s.node for s in fault_round.cluster.others(victim)]
    netns.delay_fabric(victim.node, peers, delay_ms)
    netns.cut_connections(victim.node, peers, netns.FABRIC_PORT)
    delayed = wait_until(
        lambda: netns.delay_proxy_output(victim.node).count("delaying a connection") >= len(peers), 20.0)
    assert delayed, f"the node redials its peers through the proxy: {netns.delay_proxy_output(victim.node)}"
    fault_round.note(f"fabric delayed {delay_ms} ms each way")
    time.sleep(fault_round.fault_duration_s())
    netns.stop_delay_proxy(victim.node)


# -- tests -------------------------------------------------------------------------------------

ROUNDS_TIMEOUT_S = ROUND_TIMEOUT_S * FAULT_ROUNDS


@pytest.mark.timeout_s(ROUNDS_TIMEOUT_S)
def test_a_node_isolated_past_the_heartbeat_timeout_loses_nothing(clusters, linearizability_checker,
                                                                  tmp_path):
    run_rounds("isolate", clusters, linearizability_checker, tmp_path, isolate_a_node)


@pytest.mark.timeout_s(ROUNDS_TIMEOUT_S)
def test_a_minority_refuses_writes_and_the_majority_fails_over(clusters, linearizability_checker, tmp_path):
    run_rounds("split", clusters, linearizability_checker, tmp_path, split_majority_minority)


@pytest.mark.timeout_s(ROUNDS_TIMEOUT_S)
def test_a_one_way_drop_loses_nothing_and_the_partitions_it_stalled_take_writes_again(clusters, linearizability_checker, tmp_path):
    run_rounds("one-way", clusters, linearizability_checker, tmp_path, drop_one_way)


@pytest.mark.timeout_s(ROUNDS_TIMEOUT_S)
def test_a_node_paused_past_the_heartbeat_timeout_loses_nothing(clusters, linearizability_checker, tmp_path):
    run_rounds("pause", clusters, linearizability_checker, tmp_path, pause_a_node)


@pytest.mark.timeout_s(ROUNDS_TIMEOUT_S)
def test_a_killed_node_restarts_on_its_files_and_deletes_stay_deleted(clusters, linearizability_checker,
                                                                      tmp_path):
    run_rounds("kill", clusters, linearizability_checker, tmp_path, kill_and_restart, storage="device")


@pytest.mark.timeout_s(ROUNDS_TIMEOUT_S)
def test_migrations_finish_under_a_bandwidth_cap(clusters, linearizability_checker, tmp_path):
    run_rounds("tbf", clusters, linearizability_checker, tmp_path, cap_bandwidth_while_data_moves)


@pytest.mark.timeout_s(ROUNDS_TIMEOUT_S)
def test_a_delayed_fabric_loses_nothing(clusters, linearizability_checker, tmp_path):
    run_rounds("delay", clusters, linearizability_checker, tmp_path, delay_the_fabric)

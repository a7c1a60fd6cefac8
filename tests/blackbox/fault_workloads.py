"""The fault suite's workloads and checkers (`test_cluster_faults.py`).

Workloads run on threads of their own against a cluster while a fault is injected, recording
every operation with its outcome (acknowledged, failed, in doubt): generation-CAS registers,
counters, and inserts and deletes of a set. The checkers then demand: counters within their
bounds, every acknowledged insert present and every acknowledged delete absent, every
partition's copies equal, and register histories linearizable (Porcupine, in
`tests/go/linearizability`).
"""

from __future__ import annotations

import base64
import json
import random
import socket
import subprocess
import threading
import time
from pathlib import Path

import aerospike
from aerospike import exception as ex

import aswire
import netns
from harness import client_config, wait_until

NAMESPACE = "test"
CLIENT_TIMEOUT_MS = 3000
PROGRESS_TIMEOUT_S = 20.0
CHECKER_TIMEOUT_S = 300
CHECKER_KEY_TIMEOUT_S = 5


def info_value(server: netns.NamespacedServer, command: str) -> str:
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        return dict(aswire.request_info(sock, [command]))[command]


def claimed_by(server: netns.NamespacedServer, column: int) -> set[int]:
    """The partitions `server` claims in `column` of its `replicas` answer: 0 master, 1 first
    replica."""
    text = info_value(server, "replicas")
    entry = next(part for part in text.split(";") if part.startswith(f"{NAMESPACE}:"))
    bitmap = base64.b64decode(entry.split(",")[2 + column])
    return {pid for pid in range(4096) if bitmap[pid >> 3] & (0x80 >> (pid & 7))}


def mastered_by(server: netns.NamespacedServer) -> set[int]:
    """The partitions `server` claims as master."""
    return claimed_by(server, 0)


# -- workloads ---------------------------------------------------------------------------------


def workload_client(servers: list[netns.NamespacedServer]):
    config = client_config(servers[0].port, tend_interval=250)
    config["hosts"] = [(s.host, s.port) for s in servers]
    for policy in ("read", "write", "operate", "remove"):
        config["policies"][policy] = {"total_timeout": CLIENT_TIMEOUT_MS, "max_retries": 0}
    return aerospike.client(config).connect()


def in_doubt(error: ex.AerospikeError) -> bool:
    """Whether a write that raised `error` may have been applied: the client says so, or it
    timed out (on the client or on the server, which may have forwarded it)."""
    return bool(getattr(error, "in_doubt", False)) or isinstance(error, ex.TimeoutError)


class Workload:
    """Threads running one kind of operation until `stop()`, each recording outcomes."""

    name = "workload"

    def __init__(self, servers, rng: random.Random, threads: int, tag: str):
        self.client = workload_client(servers)
        self.rng = random.Random(rng.randrange(1 << 31))
        self.tag = tag
        self.pause_s = rng.uniform(0.001, 0.004)
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(index, self.rng.randrange(1 << 31)),
                                         daemon=True) for index in range(threads)]
        self.errors: dict[str, int] = {}
        self.last_ack_s = 0.0
        self.lock = threading.Lock()

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=CLIENT_TIMEOUT_MS / 1000 * 3)
        assert not any(t.is_alive() for t in self.threads), f"{self.name} threads did not stop"

    def close(self) -> None:
        self.client.close()

    def _run(self, index: int, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stopping.is_set():
            self.step(index, rng)
            if self.pause_s:
                time.sleep(rng.uniform(0, self.pause_s))

    def step(self, index: int, rng: random.Random) -> None:
        raise NotImplementedError

    def acked(self) -> None:
        self.last_ack_s = time.monotonic()

    def failed(self, error: ex.AerospikeError) -> None:
        name = f"{type(error).__name__}({error.code}){' in doubt' if in_doubt(error) else ''}"
        with self.lock:
            self.errors[name] = self.errors.get(name, 0) + 1


class Registers(Workload):
    """Reads a key, then writes it with the generation read; records a Porcupine history."""

    name = "registers"

    def __init__(self, servers, rng, threads, tag, key_count: int):
        super().__init__(servers, rng, threads, tag)
        self.keys = [f"{tag}-r{i}" for i in range(key_count)]
        self.history: list[dict] = []
        self.final_reads: list[dict] = []
        for key in self.keys:
            self._write(client_id=0, key=key, value=0)

    def record_key(self, name: str):
        return (NAMESPACE, "registers", name)

    def _record(self, **operation) -> None:
        self.history.append(operation)

    def _write(self, client_id: int, key: str, value: int) -> None:
        call_ns = time.monotonic_ns()
        try:
            self.client.put(self.record_key(key), {"v": value})
            self._record(client=client_id, key=key, kind="write", input={"value": value},
                         output={"ok": True}, call_ns=call_ns, return_ns=time.monotonic_ns())
            self.acked()
        except ex.AerospikeError as error:
            self._write_failed(client_id, key, "write", {"value": value}, call_ns, error)

    def _write_failed(self, client_id, key, kind, operation_input, call_ns, error) -> None:
        self.failed(error)
        outcome: dict = {"unknown": True}
        if isinstance(error, ex.RecordGenerationError):
            outcome = {"output": {"ok": False, "error": "generation"}}
        elif not in_doubt(error):
            outcome = {"output": {"ok": False, "error": type(error).__name__}}
        self._record(client=client_id, key=key, kind=kind, input=operation_input, call_ns=call_ns,
                     return_ns=time.monotonic_ns(), **outcome)

    def read(self, client_id: int, key: str) -> dict | None:
        """Reads `key` into the history; returns the output, or None without one."""
        call_ns = time.monotonic_ns()
        try:
            _, meta, bins = self.client.get(self.record_key(key))
            output = {"found": True, "value": bins["v"], "generation": meta["gen"]}
        except ex.RecordNotFound:
            output = {"found": False}
        except ex.AerospikeError as error:
            self.failed(error)
            return None
        self._record(client=client_id, key=key, kind="read", output=output, call_ns=call_ns,
                     return_ns=time.monotonic_ns())
        return output

    def cas(self, client_id: int, key: str, generation: int, value: int) -> None:
        call_ns = time.monotonic_ns()
        try:
            self.client.put(self.record_key(key), {"v": value}, meta={"gen": generation},
                            policy={"gen": aerospike.POLICY_GEN_EQ})
            self._record(client=client_id, key=key, kind="cas",
                         input={"generation": generation, "value": value}, output={"ok": True},
                         call_ns=call_ns, return_ns=time.monotonic_ns())
            self.acked()
        except ex.AerospikeError as error:
            self._write_failed(client_id, key, "cas", {"generation": generation, "value": value},
                               call_ns, error)

    def step(self, index: int, rng: random.Random) -> None:
        client_id = index + 1
        key = rng.choice(self.keys)
        seen = self.read(client_id, key)
        if seen is None:
            return
        value = client_id * 10_000_000 + rng.randrange(10_000_000)
        if seen["found"]:
            self.cas(client_id, key, seen["generation"], value)
        else:
            self._write(client_id, key, value)

    def read_all_finally(self) -> None:
        """A last read of every key, after the threads stopped and the cluster settled."""
        reads_before = len(self.history)
        for key in self.keys:
            wait_until(lambda: self.read(len(self.threads) + 1, key) is not None, PROGRESS_TIMEOUT_S)
        self.final_reads = self.history[reads_before:]
        del self.history[reads_before:]

    def writes_and_final_reads(self) -> list[dict]:
        return [op for op in self.history if op["kind"] != "read"] + self.final_reads

    def values_per_generation(self) -> dict[tuple[str, int], set[int]]:
        """Per (key, generation), the values reads returned and acknowledged writes made."""
        values: dict[tuple[str, int], set[int]] = {}
        for op in self.history + self.final_reads:
            output = op.get("output", {})
            if op["kind"] == "read" and output.get("found"):
                values.setdefault((op["key"], output["generation"]), set()).add(output["value"])
            elif op["kind"] == "cas" and output.get("ok"):
                values.setdefault((op["key"], op["input"]["generation"] + 1), set()).add(op["input"]["value"])
        return values


class Counters(Workload):
    """Increments counters by one, counting acknowledged and in-doubt increments per key."""

    name = "counters"

    def __init__(self, servers, rng, threads, tag, key_count: int):
        super().__init__(servers, rng, threads, tag)
        self.keys = [f"{tag}-c{i}" for i in range(key_count)]
        self.acked_count = {key: 0 for key in self.keys}
        self.in_doubt_count = {key: 0 for key in self.keys}
        for key in self.keys:
            self.client.put(self.record_key(key), {"n": 0})

    def record_key(self, name: str):
        return (NAMESPACE, "counters", name)

    def step(self, index: int, rng: random.Random) -> None:
        key = rng.choice(self.keys)
        try:
            self.client.increment(self.record_key(key), "n", 1)
            with self.lock:
                self.acked_count[key] += 1
            self.acked()
        except ex.AerospikeError as error:
            self.failed(error)
            if in_doubt(error):
                with self.lock:
                    self.in_doubt_count[key] += 1


class InsertsAndDeletes(Workload):
    """Inserts unique keys; now and then deletes one it inserted. Records every outcome."""

    name = "set"

    def __init__(self, servers, rng, threads, tag, delete_share: float):
        super().__init__(servers, rng, threads, tag)
        self.delete_share = delete_share
        self.inserts: dict[str, str] = {}
        self.deletes: dict[str, str] = {}
        self.times_ns: dict[str, list[int]] = {}
        self.deletable: list[list[str]] = [[] for _ in self.threads]
        self.counters = [0 for _ in self.threads]

    def record_key(self, name: str):
        return (NAMESPACE, "set", name)

    def step(self, index: int, rng: random.Random) -> None:
        if self.deletable[index] and rng.random() < self.delete_share:
            self._delete(self.deletable[index].pop(rng.randrange(len(self.deletable[index]))))
        else:
            self._insert(index)

    def _insert(self, index: int) -> None:
        name = f"{self.tag}-s{index}-{self.counters[index]}"
        self.counters[index] += 1
        self.times_ns[name] = [time.monotonic_ns()]
        try:
            self.client.put(self.record_key(name), {"v": name})
            self.inserts[name] = "acked"
            self.deletable[index].append(name)
            self.acked()
        except ex.AerospikeError as error:
            self.failed(error)
            self.inserts[name] = "in doubt" if in_doubt(error) else "failed"

    def _delete(self, name: str) -> None:
        self.times_ns[name].append(time.monotonic_ns())
        try:
            self.client.remove(self.record_key(name))
            self.deletes[name] = "acked"
            self.acked()
        except ex.RecordNotFound:
            # The record was acknowledged: a node answered for a copy that lacks it.
            self.deletes[name] = "not found"
        except ex.AerospikeError as error:
            self.failed(error)
            self.deletes[name] = "in doubt" if in_doubt(error) else "failed"


class Workloads:
    """The three workloads, their mix drawn from the round's generator."""

    def __init__(self, servers, rng: random.Random, tag: str):
        self.registers = Registers(servers, rng, threads=rng.randint(2, 4), tag=tag,
                                   key_count=rng.randint(2, 4))
        self.counters = Counters(servers, rng, threads=rng.randint(1, 2), tag=tag,
                                 key_count=rng.randint(1, 3))
        self.set = InsertsAndDeletes(servers, rng, threads=rng.randint(1, 3), tag=tag,
                                     delete_share=rng.uniform(0.1, 0.4))
        self.all: list[Workload] = [self.registers, self.counters, self.set]

    def start(self) -> None:
        for workload in self.all:
            workload.start()

    def stop(self) -> None:
        for workload in self.all:
            workload.stopping.set()
        for workload in self.all:
            workload.stop()

    def close(self) -> None:
        for workload in self.all:
            workload.close()

    def wait_for_writes_after(self, moment_s: float) -> None:
        """Every workload gets an acknowledged write after `moment_s`: the cluster serves."""
        for workload in self.all:
            taken = wait_until(lambda: workload.last_ack_s > moment_s, PROGRESS_TIMEOUT_S)
            assert taken, f"no {workload.name} write acknowledged within {PROGRESS_TIMEOUT_S}s of healing"

    def names_by_digest(self) -> dict[str, str]:
        """Every key the workloads touched, by digest (hex), with the set workload's history of
        it: its insert's and delete's outcomes and their times (monotonic s)."""
        names = {}
        for workload, keys in ((self.registers, self.registers.keys), (self.counters, self.counters.keys)):
            for key in keys:
                names[aerospike.calc_digest(*workload.record_key(key)).hex()] = f"{workload.name} {key}"
        for name, times_ns in list(self.set.times_ns.items()):
            outcomes = f"insert {self.set.inserts.get(name, 'running')}"
            if name in self.set.deletes or len(times_ns) > 1:
                outcomes += f", delete {self.set.deletes.get(name, 'running')}"
            at = ", ".join(f"{t / 1e9:.3f}" for t in times_ns)
            names[aerospike.calc_digest(*self.set.record_key(name)).hex()] = f"set {name}: {outcomes} at {at}"
        return names

    def summary(self) -> str:
        set_outcomes = {}
        for outcome in list(self.set.inserts.values()):
            set_outcomes[f"insert {outcome}"] = set_outcomes.get(f"insert {outcome}", 0) + 1
        for outcome in list(self.set.deletes.values()):
            set_outcomes[f"delete {outcome}"] = set_outcomes.get(f"delete {outcome}", 0) + 1
        return (f"registers: {len(self.registers.history)} operations; counters: acked "
                f"{sum(self.counters.acked_count.values())}, in doubt "
                f"{sum(self.counters.in_doubt_count.values())}; set: {set_outcomes}; errors: "
                f"{ {w.name: w.errors for w in self.all} }")


# -- checkers ----------------------------------------------------------------------------------


def counter_problems(counters: Counters) -> list[str]:
    """Each counter is at least its acknowledged increments, at most those plus the in-doubt."""
    problems = []
    for key in counters.keys:
        _, _, bins = counters.client.get(counters.record_key(key))
        acked, doubt = counters.acked_count[key], counters.in_doubt_count[key]
        if not acked <= bins["n"] <= acked + doubt:
            problems.append(f"counter {key} is {bins['n']}: not within acknowledged {acked} and "
                            f"acknowledged plus in doubt {acked + doubt}")
    return problems


def read_state(client, keys: list[tuple]) -> dict[tuple, bool]:
    """Whether each key exists: a batch, then each row that failed read again on its own."""
    found: dict[tuple, bool] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start:start + 500]
        for key, row in zip(chunk, client.batch_read(chunk).batch_records):
            if row.result == 0 and row.record and row.record[2] is not None:
                found[key] = True
            elif row.result == 2:
                found[key] = False
    for key in keys:
        if key not in found:
            found[key] = single_exists(client, key)
    return found


def single_exists(client, key: tuple) -> bool:
    for _ in range(20):
        try:
            client.get(key)
            return True
        except ex.RecordNotFound:
            return False
        except ex.AerospikeError:
            time.sleep(0.25)
    raise AssertionError(f"{key} could not be read")


def set_problems(workload: InsertsAndDeletes) -> tuple[list[str], dict[str, int]]:
    """Acknowledged inserts not deleted are there; definitely failed inserts and acknowledged
    deletes are not. Returns the problems and the counts checked."""
    inserts, deletes = dict(workload.inserts), dict(workload.deletes)
    must_exist = [n for n, o in inserts.items()
                  if o == "acked" and deletes.get(n, "failed") in ("failed", "not found")]
    failed_inserts = [n for n, o in inserts.items() if o == "failed"]
    acked_deletes = [n for n, o in deletes.items() if o == "acked"]
    names = must_exist + failed_inserts + acked_deletes
    found = read_state(workload.client, [workload.record_key(n) for n in names])
    lost = [n for n in must_exist if not found[workload.record_key(n)]]
    phantoms = [n for n in failed_inserts if found[workload.record_key(n)]]
    resurrected = [n for n in acked_deletes if found[workload.record_key(n)]]
    problems = []
    not_found = [n for n, o in deletes.items() if o == "not found"]
    if not_found:
        problems.append(f"{len(not_found)} deletes of acknowledged inserts answered NOT_FOUND: "
                        f"{not_found[:20]}")
    if lost:
        problems.append(f"{len(lost)} acknowledged inserts lost: {lost[:20]}")
    if phantoms:
        problems.append(f"{len(phantoms)} inserts that definitely failed exist: {phantoms[:20]}")
    if resurrected:
        problems.append(f"{len(resurrected)} acknowledged deletes came back: {resurrected[:20]}")
    counts = {"present": len(must_exist), "failed inserts absent": len(failed_inserts),
              "deleted absent": len(acked_deletes)}
    return problems, counts


def copies_disagree(servers: list[netns.NamespacedServer]) -> dict[int, list[str]]:
    """Partitions not held by exactly two nodes with equal content, with what each holds (the
    master's copy marked with a star)."""
    held: dict[int, list[str]] = {}
    for server in servers:
        masters = mastered_by(server)
        for entry in info_value(server, f"partition-hashes:namespace={NAMESPACE}").split(";"):
            pid, records, content = entry.split(":")
            star = "*" if int(pid) in masters else ""
            held.setdefault(int(pid), []).append(f"{server.node.ip}{star}={records}:{content}")
    missing = [pid for pid in range(4096) if pid not in held]
    disagree = {pid: ["held by no node"] for pid in missing}
    disagree.update({pid: copies for pid, copies in held.items()
                     if len(copies) != 2 or copies[0].split("=")[1] != copies[1].split("=")[1]})
    return disagree


def replica_problems(servers: list[netns.NamespacedServer], workloads=None) -> list[str]:
    """Partitions whose copies differ once replica writes in flight settled, each explained
    record by record where `workloads` is given."""
    # Replica writes still in flight when the clients stopped settle within moments.
    if wait_until(lambda: not copies_disagree(servers), 10.0, 0.5):
        return []
    differing = copies_disagree(servers)
    if not differing:
        return []
    problems = [f"{len(differing)} partitions' copies differ: {dict(list(differing.items())[:10])}"]
    if workloads is not None:
        names = workloads.names_by_digest()
        for pid, copies in list(differing.items())[:5]:
            holders = [server for server in servers
                       if any(copy.startswith(f"{server.node.ip}=") or copy.startswith(f"{server.node.ip}*=")
                              for copy in copies)]
            problems.append(differing_records(holders, pid, names))
    return problems


def partition_versions(server: netns.NamespacedServer, pid: int) -> dict[str, tuple[int, int]]:
    """What `server` holds of partition `pid`: digest (hex) to (generation, last-update ms)."""
    text = info_value(server, f"partition-versions:namespace={NAMESPACE};pid={pid}")
    versions = {}
    for entry in filter(None, text.split(",")):
        digest, generation, last_update_ms = entry.split(":")
        versions[digest] = (int(generation), int(last_update_ms))
    return versions


def differing_records(servers: list[netns.NamespacedServer], pid: int, names: dict[str, str]) -> str:
    """The records of partition `pid` whose versions differ between `servers`, the nodes
    holding it, each with its workload key and that key's history (what the client was told,
    and when)."""
    held = {server.node.ip: partition_versions(server, pid) for server in servers}
    digests = set().union(*held.values()) if held else set()
    lines = [f"partition {pid}:"]
    for digest in sorted(digests):
        copies = {ip: versions.get(digest) for ip, versions in held.items()}
        if len(set(copies.values())) > 1:
            lines.append(f"  {digest} ({names.get(digest, 'unknown key')}): {copies}")
    return "\n".join(lines)


def run_checker(checker: Path, history: list[dict], out_dir: Path, name: str) -> tuple[int, str]:
    """Runs the Go checker on `history` (saved, with a drawing on a violation, in `out_dir`):
    its exit status (0 linearizable, 1 not, 3 undecided in time) and what it printed."""
    history_path = out_dir / f"{name}.json"
    history_path.write_text(json.dumps(history))
    drawing = out_dir / f"{name}.html"
    command = [str(checker), "-visualize", str(drawing), "-timeout", f"{CHECKER_KEY_TIMEOUT_S}s",
               str(history_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=CHECKER_TIMEOUT_S)
    output = " ".join(f"{result.stdout} {result.stderr}".split())
    return result.returncode, f"{output} (history {history_path})"


def verdict_of(status: int) -> str:
    return {0: "linearizable", 1: "NOT linearizable", 3: "undecided in time"}.get(status, f"exit {status}")


def acknowledged_cas_problems(registers: Registers) -> list[str]:
    """What acknowledged generation writes promise, checked directly (no search, so it decides
    even where thousands of in-doubt writes make the linearizability search too long): one
    winner per generation, generations that never go back in real time, and a final record
    that holds the last of them."""
    problems = []
    for key in registers.keys:
        acked = [op for op in registers.history if op["key"] == key and op["kind"] == "cas"
                 and op.get("output", {}).get("ok")]
        final = [op["output"] for op in registers.final_reads if op["key"] == key]
        problems += one_winner_per_generation(key, acked)
        problems += generations_never_go_back(key, acked)
        problems += final_holds_the_last_write(key, acked, final[0] if final else None)
    return problems


def one_winner_per_generation(key: str, acked: list[dict]) -> list[str]:
    winners: dict[int, list[int]] = {}
    for op in acked:
        winners.setdefault(op["input"]["generation"], []).append(op["input"]["value"])
    return [f"{key}: two acknowledged writes both expected generation {generation}: {values}"
            for generation, values in winners.items() if len(values) > 1]


def generations_never_go_back(key: str, acked: list[dict]) -> list[str]:
    """A write acknowledged before another was sent made a generation the later one's expected
    generation must not be below (else the later one overwrote a state the earlier replaced)."""
    by_return = sorted(acked, key=lambda op: op["return_ns"])
    made_before, index = 0, 0
    for op in sorted(acked, key=lambda op: op["call_ns"]):
        while index < len(by_return) and by_return[index]["return_ns"] < op["call_ns"]:
            made_before = max(made_before, by_return[index]["input"]["generation"] + 1)
            index += 1
        if op["input"]["generation"] < made_before:
            return [f"{key}: an acknowledged write expected generation {op['input']['generation']} after "
                    f"generation {made_before} had been acknowledged (a lost update)"]
    return []


def final_holds_the_last_write(key: str, acked: list[dict], final: dict | None) -> list[str]:
    if not acked:
        return []
    last = max(acked, key=lambda op: op["input"]["generation"])
    made = last["input"]["generation"] + 1
    if final is None or not final.get("found"):
        return [f"{key}: not found at the end, after acknowledged writes up to generation {made}"]
    if final["generation"] < made:
        return [f"{key}: generation {final['generation']} at the end, below the acknowledged {made}"]
    if final["generation"] == made and final["value"] != last["input"]["value"]:
        return [f"{key}: value {final['value']} at the end, not the acknowledged {last['input']['value']}"]
    return []


def register_problems(checker: Path, registers: Registers, out_dir: Path) -> tuple[list[str], str]:
    """Hard: the acknowledged writes' promises, and the Go checker on the writes and the reads
    made after the cluster settled, when it decides in time. Reported only: the checker on
    every read, and reads that saw a write later lost. Osprey, like Aerospike in AP mode,
    answers a read at any full copy, so a read that a lagging client map sends to the copy that
    is not master may return the version before one a generation error already revealed."""
    problems = acknowledged_cas_problems(registers)
    status, output = run_checker(checker, registers.writes_and_final_reads(), out_dir, "registers-writes")
    if status not in (0, 3):
        problems.append(f"registers: writes {verdict_of(status)}: {output}")
    full_status, full_output = run_checker(checker, registers.history + registers.final_reads, out_dir,
                                           "registers-all")
    several = {k: sorted(v) for k, v in registers.values_per_generation().items() if len(v) > 1}
    verdict = (f"writes {verdict_of(status)}; with every read {verdict_of(full_status)}"
               f"{'' if full_status == 0 else ' (' + full_output + ')'}; generations read with two "
               f"values (a read of a write later lost): {len(several)} {dict(list(several.items())[:3])}")
    return problems, verdict

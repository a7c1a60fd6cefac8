#!/usr/bin/env python3
"""Single-node benchmark: memory per record, round-trip latency, and server CPU per request.

Reproduce (from the repository root):

    cargo build --release -p server --bin osprey && .venv/bin/python bench/single_node.py

Each run starts a fresh `osprey` (port 0, one namespace `test`, every other setting at its
default) and measures, in order:

1. Memory per record. VmRSS of the server (/proc/<pid>/status) after start-up and a short
   warm-up is the baseline. N records are then inserted: integer keys 0..N-1 in set `bench`,
   one bin `v` holding a 100-byte string, digest only (no stored key, as the official client
   sends by default). The load uses raw sockets with pipelined requests, several connections
   each in its own thread, so that the load takes seconds rather than minutes. Then VmRSS is
   read again, and (after - baseline) / N is reported next to `data_used_bytes` / `objects`
   from the `namespace/test` info command. `objects` must equal N, and a random sample of
   records is read back with the official client and compared.
2. Single-connection round-trip latency. The official `aerospike` client, used from one
   thread (so one pooled connection at a time), does `--latency-ops` puts of a 100-byte
   string bin to set `latency`, then as many gets of the same keys. Every call is timed with
   time.perf_counter_ns. Then the same with a raw socket client: one connection, send one
   prebuilt request frame, read the whole reply, check its result code. The raw numbers
   show how much of the official client's latency is the client itself.
3. Server CPU per request. utime+stime of the server (/proc/<pid>/stat, clock ticks) before
   and after each latency phase, divided by the operations. The tick is 10 ms, so the script
   also sums the nanosecond run time of every server thread (/proc/<pid>/task/*/schedstat).

`--pin same|split` fixes the CPU affinity of server and client (one CPU for both, or one
each); the default leaves placement to the scheduler, which on a small VM changes the
round-trip time several-fold.

The server is then stopped with SIGTERM and must exit 0; its stderr must hold no ERROR,
WARN or panic line. Across runs the script prints the median, min and max of every metric as
a markdown table, with machine facts and the exact command. Progress goes to stderr, the
report to stdout (and to --markdown FILE / --json FILE when given).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib.metadata
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import aerospike

REPO_ROOT = Path(__file__).resolve().parents[1]

NAMESPACE = "test"
LOAD_SET = "bench"
LATENCY_SET = "latency"
BIN_NAME = "v"
VALUE_SIZE_BYTES = 100

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")

SERVICE_RE = re.compile(r'service="?([0-9.]+):(\d+)')
ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- raw wire protocol (layouts: docs/internals/wire-aerospike.md) --------------------------------

PROTO_VERSION = 2
TYPE_MSG = 3
INFO1_READ = 0x01
INFO1_GET_ALL = 0x02
INFO2_WRITE = 0x01
FIELD_NAMESPACE = 0
FIELD_SET = 1
FIELD_DIGEST = 4
OP_WRITE = 2
PT_STRING = 3
MSG_HEADER = struct.Struct(">BBBBBBIIIHH")
PROTO_WORD = struct.Struct(">Q")
RESULT_CODE_OFFSET = 8 + 5  # proto header, then header_sz, info1..info4


def _field(ftype: int, data: bytes) -> bytes:
    return struct.pack(">IB", len(data) + 1, ftype) + data


def _frame(body: bytes) -> bytes:
    return PROTO_WORD.pack((PROTO_VERSION << 56) | (TYPE_MSG << 48) | len(body)) + body


class FrameBuilder:
    """Builds write and read frames for one set: namespace, set, digest fields (no key)."""

    def __init__(self, set_name: str):
        self.set_name = set_name
        self.prefix_fields = _field(FIELD_NAMESPACE, NAMESPACE.encode()) + _field(FIELD_SET, set_name.encode())
        self.write_header = MSG_HEADER.pack(22, 0, INFO2_WRITE, 0, 0, 0, 0, 0, 0, 3, 1)
        self.read_header = MSG_HEADER.pack(22, INFO1_READ | INFO1_GET_ALL, 0, 0, 0, 0, 0, 0, 0, 3, 0)
        self.digest_field_header = struct.pack(">IB", 21, FIELD_DIGEST)
        name = BIN_NAME.encode()
        self.op_header_base = (OP_WRITE, PT_STRING, 0, len(name))
        self.name = name

    def digest(self, key: int) -> bytes:
        return bytes(aerospike.calc_digest(NAMESPACE, self.set_name, key))

    def write(self, key: int, value: bytes) -> bytes:
        op = struct.pack(">IBBBB", 4 + len(self.name) + len(value), *self.op_header_base) + self.name + value
        body = self.write_header + self.prefix_fields + self.digest_field_header + self.digest(key) + op
        return _frame(body)

    def read(self, key: int) -> bytes:
        return _frame(self.read_header + self.prefix_fields + self.digest_field_header + self.digest(key))


def value_for(key: int) -> bytes:
    """A 100-byte ASCII string that differs per key, so a read-back proves the right record."""
    text = (f"k{key:011d}:" * 9)[:VALUE_SIZE_BYTES]
    text = text.ljust(VALUE_SIZE_BYTES, "x")
    assert len(text) == VALUE_SIZE_BYTES
    return text.encode()


def recv_exact_into(sock: socket.socket, buf: bytearray, n: int) -> None:
    """Appends exactly n bytes from sock to buf."""
    target = len(buf) + n
    while len(buf) < target:
        chunk = sock.recv(max(65536, target - len(buf)))
        if not chunk:
            raise ConnectionError(f"server closed the connection ({target - len(buf)} bytes short)")
        buf += chunk


def read_replies(sock: socket.socket, count: int, pending: bytearray) -> list[int]:
    """Reads `count` complete reply frames (pipelined, in order); returns their result codes.

    `pending` holds bytes already received beyond earlier replies and is updated in place.
    """
    codes: list[int] = []
    pos = 0
    while len(codes) < count:
        if len(pending) - pos < 8:
            recv_exact_into(sock, pending, 8 - (len(pending) - pos))
        (word,) = PROTO_WORD.unpack_from(pending, pos)
        size = word & 0xFFFFFFFFFFFF
        if (word >> 48) & 0xFF != TYPE_MSG:
            raise AssertionError(f"reply frame type {(word >> 48) & 0xFF}, expected {TYPE_MSG}")
        if len(pending) - pos < 8 + size:
            recv_exact_into(sock, pending, 8 + size - (len(pending) - pos))
        codes.append(pending[pos + RESULT_CODE_OFFSET])
        pos += 8 + size
    del pending[:pos]
    return codes


def raw_connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


# -- the server process -------------------------------------------------------------------------


class Server:
    def __init__(self, binary: Path, cpus: set[int] | None):
        self.binary = binary
        self.cpus = cpus
        self.dir = Path(tempfile.mkdtemp(prefix="osprey-bench-"))
        self.config_path = self.dir / "osprey.toml"
        # Port 0 and one namespace `test`; everything else is the built-in default.
        self.config_path.write_text(f'[service]\nport = 0\n\n[resp]\nport = 0\n\n[[namespaces]]\nname = "{NAMESPACE}"\n')
        self.log_path = self.dir / "stderr.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> None:
        env = dict(os.environ)
        env["NO_COLOR"] = "1"
        env.pop("RUST_LOG", None)
        self._stderr = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(self.binary), "--config", str(self.config_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            env=env,
            preexec_fn=(lambda: os.sched_setaffinity(0, self.cpus)) if self.cpus else None,
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in self.log_text().splitlines():
                if "osprey ready" in line and (m := SERVICE_RE.search(line)):
                    self.port = int(m.group(2))
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(f"osprey exited with {self.proc.returncode} before ready:\n{self.log_text()}")
            time.sleep(0.02)
        self.proc.kill()
        raise RuntimeError(f"osprey not ready within {READY_TIMEOUT_S}s:\n{self.log_text()}")

    def log_text(self) -> str:
        try:
            return ANSI_RE.sub("", self.log_path.read_bytes().decode("utf-8", "replace"))
        except FileNotFoundError:
            return ""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS line")

    def cpu_ticks(self) -> tuple[int, int]:
        """(utime, stime) of the whole process (all threads), in clock ticks."""
        text = Path(f"/proc/{self.pid}/stat").read_text()
        fields = text[text.rindex(")") + 2 :].split()
        # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
        return int(fields[11]), int(fields[12])

    def cpu_ns(self) -> int:
        """Sum of on-CPU nanoseconds over the server's threads (/proc/<pid>/task/*/schedstat)."""
        total = 0
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                pass
        return total

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(f"osprey did not exit within {STOP_TIMEOUT_S}s of SIGTERM")
        self._stderr.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def client_config(port: int) -> dict:
    policy = {"total_timeout": 10000, "max_retries": 0}
    return {
        "hosts": [("127.0.0.1", port)],
        "policies": {"read": dict(policy), "write": dict(policy), "info": {"timeout": 10000}},
        "connect_timeout": 10000,
    }


def namespace_stats(client) -> dict[str, str]:
    answers = client.info_all(f"namespace/{NAMESPACE}")
    assert len(answers) == 1, f"expected one node, got {list(answers)}"
    ((err, text),) = answers.values()
    assert err is None, f"info namespace/{NAMESPACE} failed: {err}"
    return dict(item.split("=", 1) for item in text.strip().split(";") if item)


# -- phases -------------------------------------------------------------------------------------


def warm_up(server: Server, client) -> None:
    """Touches the code paths the load uses without storing anything: info, and pipelined
    reads of keys that do not exist."""
    namespace_stats(client)
    builder = FrameBuilder(LOAD_SET)
    with raw_connect(server.port) as sock:
        pending = bytearray()
        for batch in range(4):
            keys = range(batch * 256, (batch + 1) * 256)
            sock.sendall(b"".join(builder.read(k) for k in keys))
            codes = read_replies(sock, len(keys), pending)
            assert all(c == 2 for c in codes), f"warm-up read of a missing key answered {set(codes)}"
    for k in range(200):
        assert client.exists((NAMESPACE, LOAD_SET, k))[1] is None
    time.sleep(0.3)


def load(server: Server, records: int, connections: int, depth: int) -> float:
    """Inserts keys 0..records-1 over `connections` pipelined sockets; returns seconds taken."""
    errors: list[str] = []
    builder = FrameBuilder(LOAD_SET)
    progress = [0] * connections

    def worker(index: int) -> None:
        try:
            with raw_connect(server.port) as sock:
                pending = bytearray()
                keys = range(index, records, connections)
                for start in range(0, len(keys), depth):
                    batch = keys[start : start + depth]
                    sock.sendall(b"".join([builder.write(k, value_for(k)) for k in batch]))
                    codes = read_replies(sock, len(batch), pending)
                    if any(codes):
                        bad = [(k, c) for k, c in zip(batch, codes) if c]
                        raise AssertionError(f"{len(bad)} writes failed, first {bad[:3]}")
                    progress[index] += len(batch)
        except Exception as error:  # noqa: BLE001 - reported after join
            errors.append(f"connection {index}: {error!r}")

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(connections)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    last = started
    while any(t.is_alive() for t in threads):
        time.sleep(0.2)
        now = time.perf_counter()
        if now - last >= 5:
            done = sum(progress)
            log(f"  load: {done:,}/{records:,} ({done / (now - started):,.0f}/s)")
            last = now
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError("load failed: " + "; ".join(errors))
    return elapsed


def verify_sample(client, records: int, sample: int, rng: random.Random) -> int:
    keys = {0, records - 1} | {rng.randrange(records) for _ in range(sample)}
    for k in sorted(keys):
        _, meta, bins = client.get((NAMESPACE, LOAD_SET, k))
        expected = value_for(k).decode()
        if bins != {BIN_NAME: expected}:
            raise AssertionError(f"key {k}: read back {bins!r}, expected {{'v': {expected!r}}}")
        if meta["gen"] != 1:
            raise AssertionError(f"key {k}: generation {meta['gen']}, expected 1")
    return len(keys)


def summarize_latencies(samples_ns: list[int], elapsed_s: float) -> dict[str, float]:
    ordered = sorted(samples_ns)
    n = len(ordered)

    def pct(p: float) -> float:
        # nearest-rank percentile
        return ordered[min(n - 1, max(0, int(round(p / 100 * n + 0.5)) - 1))] / 1000

    return {
        "p50_us": pct(50),
        "p90_us": pct(90),
        "p99_us": pct(99),
        "mean_us": statistics.fmean(ordered) / 1000,
        "ops_per_s": n / elapsed_s,
    }


def timed_phase(server: Server, name: str, ops: int, call) -> dict[str, float]:
    """Runs call(i) for i in 0..ops, timing each; adds server CPU per request."""
    samples = [0] * ops
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()
    try:
        ticks_before, ns_before = server.cpu_ticks(), server.cpu_ns()
        phase_start = clock()
        for i in range(ops):
            t0 = clock()
            call(i)
            samples[i] = clock() - t0
        phase_end = clock()
        ticks_after, ns_after = server.cpu_ticks(), server.cpu_ns()
    finally:
        gc.enable()
    result = summarize_latencies(samples, (phase_end - phase_start) / 1e9)
    user_ticks = ticks_after[0] - ticks_before[0]
    system_ticks = ticks_after[1] - ticks_before[1]
    per_op_us = 1e6 / CLOCK_TICKS_PER_S / ops
    result["server_cpu_us_per_op"] = (user_ticks + system_ticks) * per_op_us
    result["server_user_us_per_op"] = user_ticks * per_op_us
    result["server_system_us_per_op"] = system_ticks * per_op_us
    result["server_cpu_schedstat_us_per_op"] = (ns_after - ns_before) / 1000 / ops
    log(
        f"  {name}: p50 {result['p50_us']:.1f} us, p99 {result['p99_us']:.1f} us, "
        f"{result['ops_per_s']:,.0f} ops/s, server CPU {result['server_cpu_us_per_op']:.1f} us/op "
        f"(user {result['server_user_us_per_op']:.1f}, system {result['server_system_us_per_op']:.1f}; "
        f"schedstat {result['server_cpu_schedstat_us_per_op']:.1f})"
    )
    return result


def latency_phases(server: Server, client, ops: int) -> dict[str, dict[str, float]]:
    keys = [(NAMESPACE, LATENCY_SET, i) for i in range(ops)]
    values = [{BIN_NAME: value_for(i).decode()} for i in range(ops)]
    results: dict[str, dict[str, float]] = {}

    # Untimed warm-up on other keys, so connection set-up is not in the samples.
    for i in range(500):
        client.put((NAMESPACE, LATENCY_SET, ops + i), {BIN_NAME: "w" * VALUE_SIZE_BYTES})
        client.get((NAMESPACE, LATENCY_SET, ops + i))

    def client_put(i: int) -> None:
        client.put(keys[i], values[i])

    def client_get(i: int) -> None:
        client.get(keys[i])

    results["client put"] = timed_phase(server, "client put", ops, client_put)
    results["client get"] = timed_phase(server, "client get", ops, client_get)
    # Every get above must have found its record with the right value; check a few.
    for i in range(0, ops, max(1, ops // 50)):
        assert client.get(keys[i])[2] == values[i], f"latency key {i} read back wrong"

    builder = FrameBuilder(LATENCY_SET)
    writes = [builder.write(i, value_for(i)) for i in range(ops)]
    reads = [builder.read(i) for i in range(ops)]
    with raw_connect(server.port) as sock:
        pending = bytearray()
        for i in range(500):
            sock.sendall(builder.read(ops + i))
            read_replies(sock, 1, pending)
        codes = [0] * ops

        # Blocking mode: with a timeout set, Python polls before every send and recv, which
        # would add two system calls per request to the client side.
        sock.settimeout(None)
        buf = bytearray(1 << 16)
        view = memoryview(buf)
        recv_into = sock.recv_into
        unpack_from = PROTO_WORD.unpack_from

        def raw_call(frames: list[bytes]):
            def call(i: int) -> None:
                sock.sendall(frames[i])
                # One reply: the 8-byte header, then exactly the body it declares.
                got = recv_into(view)
                while got < 8:
                    got += recv_into(view[got:])
                total = 8 + (unpack_from(buf)[0] & 0xFFFFFFFFFFFF)
                while got < total:
                    got += recv_into(view[got:])
                if got != total:
                    raise AssertionError(f"{got - total} unexpected bytes after a reply")
                codes[i] = buf[RESULT_CODE_OFFSET]

            return call

        results["raw put"] = timed_phase(server, "raw put", ops, raw_call(writes))
        if any(codes):
            raise AssertionError(f"raw puts failed: codes {sorted(set(codes))}")
        results["raw get"] = timed_phase(server, "raw get", ops, raw_call(reads))
        if any(codes):
            raise AssertionError(f"raw gets failed: codes {sorted(set(codes))}")
    return results


def one_run(args: argparse.Namespace, run_index: int) -> dict[str, float]:
    rng = random.Random(run_index)
    server = Server(args.binary, args.server_cpus)
    server.start()
    log(f"run {run_index + 1}/{args.runs}: osprey pid {server.pid} on port {server.port}")
    metrics: dict[str, float] = {}
    client = None
    try:
        client = aerospike.client(client_config(server.port))
        client.connect()
        warm_up(server, client)
        rss_baseline = server.rss_bytes()

        log(f"  loading {args.records:,} records over {args.load_connections} connections...")
        load_s = load(server, args.records, args.load_connections, args.pipeline_depth)
        rss_after = server.rss_bytes()
        stats = namespace_stats(client)
        objects = int(stats["objects"])
        data_used = int(stats["data_used_bytes"])
        if objects != args.records:
            raise AssertionError(f"namespace reports objects={objects}, expected {args.records}")
        checked = verify_sample(client, args.records, args.verify_sample, rng)
        log(
            f"  loaded in {load_s:.1f} s ({args.records / load_s:,.0f}/s); RSS "
            f"{rss_baseline / 2**20:.1f} -> {rss_after / 2**20:.1f} MiB; "
            f"{(rss_after - rss_baseline) / args.records:.1f} B/record; objects={objects}; "
            f"verified {checked} records"
        )
        metrics.update(
            {
                "load_s": load_s,
                "load_ops_per_s": args.records / load_s,
                "rss_baseline_mib": rss_baseline / 2**20,
                "rss_after_mib": rss_after / 2**20,
                "rss_per_record_bytes": (rss_after - rss_baseline) / args.records,
                "data_used_per_record_bytes": data_used / objects,
                "objects": objects,
            }
        )

        log(f"  latency: {args.latency_ops:,} ops per phase")
        for phase, values in latency_phases(server, client, args.latency_ops).items():
            for key, value in values.items():
                metrics[f"{phase} {key}"] = value
    except BaseException:
        log(f"  run failed; server stderr ({server.log_path}):\n{server.log_text()[-4000:]}")
        if client is not None:
            client.close()
        server.kill()
        raise
    client.close()
    code = server.stop()
    text = server.log_text()
    bad_lines = [l for l in text.splitlines() if re.search(r"\b(ERROR|WARN)\b|panicked", l)]
    log(f"  SIGTERM: exit code {code}; {len(bad_lines)} ERROR/WARN/panic lines in stderr")
    if code != 0:
        raise RuntimeError(f"osprey exited with {code} after SIGTERM:\n{text[-4000:]}")
    if bad_lines:
        raise RuntimeError("osprey logged problems:\n" + "\n".join(bad_lines[:20]))
    metrics["exit_code"] = code
    # A clean run leaves nothing behind; a failed one keeps its config and stderr for a look.
    shutil.rmtree(server.dir, ignore_errors=True)
    return metrics


# -- report -------------------------------------------------------------------------------------

# (metric key, row label, format)
ROWS = [
    ("rss_per_record_bytes", "Memory per record: RSS growth / N (bytes)", "{:.1f}"),
    ("data_used_per_record_bytes", "Memory per record: data_used_bytes / objects (bytes)", "{:.1f}"),
    ("rss_baseline_mib", "RSS after start-up and warm-up (MiB)", "{:.1f}"),
    ("rss_after_mib", "RSS after the load (MiB)", "{:.1f}"),
    ("load_ops_per_s", "Load rate, pipelined raw writes (records/s)", "{:,.0f}"),
]
PHASE_ROWS = [
    ("p50_us", "p50 (µs)", "{:.1f}"),
    ("p90_us", "p90 (µs)", "{:.1f}"),
    ("p99_us", "p99 (µs)", "{:.1f}"),
    ("mean_us", "mean (µs)", "{:.1f}"),
    ("ops_per_s", "ops/s", "{:,.0f}"),
    ("server_cpu_us_per_op", "server CPU, utime+stime (µs/op)", "{:.1f}"),
    ("server_user_us_per_op", "server CPU, of which user (µs/op)", "{:.1f}"),
    ("server_system_us_per_op", "server CPU, of which system (µs/op)", "{:.1f}"),
    ("server_cpu_schedstat_us_per_op", "server CPU, schedstat (µs/op)", "{:.2f}"),
]
PHASES = ["client put", "client get", "raw put", "raw get"]
PIN_DESCRIPTIONS = {
    "none": "none (the scheduler places server and client threads)",
    "same": "server and client on one CPU",
    "split": "server on one CPU, client on the other",
}


def all_rows() -> list[tuple[str, str, str]]:
    rows = list(ROWS)
    for phase in PHASES:
        for key, label, fmt in PHASE_ROWS:
            rows.append((f"{phase} {key}", f"{phase}: {label}", fmt))
    return rows


def markdown_table(runs: list[dict[str, float]]) -> str:
    lines = ["| Metric | Median | Min | Max | Each run |", "|---|---:|---:|---:|---:|"]
    for key, label, fmt in all_rows():
        values = [r[key] for r in runs]
        lines.append(
            f"| {label} | {fmt.format(statistics.median(values))} | "
            f"{fmt.format(min(values))} | {fmt.format(max(values))} | "
            f"{' / '.join(fmt.format(v) for v in values)} |"
        )
    return "\n".join(lines)


def machine_facts() -> dict[str, str]:
    cpu_model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    mem_total = "unknown"
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_total = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    try:
        client_version = importlib.metadata.version("aerospike")
    except importlib.metadata.PackageNotFoundError:
        client_version = "unknown"
    return {
        "nproc": str(os.cpu_count()),
        "cpu_model": cpu_model,
        "memory": mem_total,
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "aerospike_client": client_version,
        "commit": commit,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh servers to measure (default 3)")
    parser.add_argument("--records", type=int, default=1_000_000, help="records to load (default 1000000)")
    parser.add_argument("--latency-ops", type=int, default=20_000, help="ops per latency phase (default 20000)")
    parser.add_argument("--binary", type=Path, default=Path("target/release/osprey"), help="osprey binary")
    parser.add_argument("--load-connections", type=int, default=2, help="sockets (threads) for the load")
    parser.add_argument("--pipeline-depth", type=int, default=256, help="requests in flight per load socket")
    parser.add_argument("--verify-sample", type=int, default=2000, help="random records read back per run")
    parser.add_argument(
        "--pin",
        choices=["none", "same", "split"],
        default="none",
        help="CPU affinity: none (default, the scheduler decides), same (server and this script on "
        "the first allowed CPU), split (server on the first, this script on the second)",
    )
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    parser.add_argument("--json", type=Path, help="write every run's metrics as JSON")
    args = parser.parse_args()
    if not args.binary.is_absolute() and not args.binary.exists():
        args.binary = REPO_ROOT / args.binary
    if not args.binary.exists():
        parser.error(f"{args.binary} not found; build it: cargo build --release -p server --bin osprey")
    if args.runs < 1 or args.records < 1 or args.latency_ops < 1:
        parser.error("--runs, --records and --latency-ops must be positive")

    args.server_cpus = None
    if args.pin != "none":
        if len(os.sched_getaffinity(0)) < 2 and args.pin == "split":
            parser.error("--pin split needs two CPUs")
        # Threads inherit the affinity: pin before the client or any loader thread exists.
        first, *rest = sorted(os.sched_getaffinity(0))
        args.server_cpus = {first}
        os.sched_setaffinity(0, {first} if args.pin == "same" else {rest[0]})

    command = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.executable, Path.cwd()), *sys.argv])
    facts = machine_facts()
    started = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    log(f"binary {args.binary}; {facts['nproc']} CPUs, {facts['cpu_model']}, {facts['kernel']}")
    runs = []
    for run_index in range(args.runs):
        runs.append(one_run(args, run_index))
    total_s = time.monotonic() - started
    log(f"done in {total_s:.0f} s")

    report = "\n".join(
        [
            f"Command: `{command}`",
            "",
            f"- Date: {date}; commit {facts['commit']}; total run time {total_s:.0f} s",
            f"- Machine: {facts['nproc']} CPUs ({facts['cpu_model']}), {facts['memory']} RAM, "
            f"{facts['kernel']}",
            f"- Python {facts['python']}, aerospike client {facts['aerospike_client']}; "
            f"CPU pinning: {PIN_DESCRIPTIONS[args.pin]}",
            f"- {args.runs} runs, each on a fresh server; {args.records:,} records of one 100-byte string "
            f"bin; {args.latency_ops:,} ops per latency phase. Every run checked objects == N, read back "
            f"{args.verify_sample:,} random records plus the first and last, and got exit code 0 on SIGTERM",
            "",
            markdown_table(runs),
            "",
        ]
    )
    print(report)
    if args.markdown:
        args.markdown.write_text(report)
    if args.json:
        args.json.write_text(json.dumps({"command": command, "date": date, "machine": facts, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

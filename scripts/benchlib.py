"""Shared pieces of the benchmark scripts that compare Osprey with redis-server.

`scripts/compare-redis` (osprey-bench against both servers) and `scripts/compare-resp`
(redis-benchmark against both servers' RESP ports) import this module; Python finds it because
it sits beside them. It holds what does not depend on the client or the workloads: CPU pinning,
starting and stopping a server and reading its CPU time from /proc, `redis-server` itself,
statistics and number formatting for the reports, and the machine facts a report states.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

REPO_ROOT = Path(__file__).resolve().parents[1]

READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 15.0
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")

ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
OSPREY_BAD_LOG_RE = re.compile(r"\bERROR\b|panicked")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- sibling scripts as modules ----------------------------------------------------------------


def load_script(name: str) -> Any:
    """The script `name` beside this file (a file without `.py`, such as `compare-resp`) as a
    module named with underscores; registered in sys.modules, where dataclasses look their
    module up by name."""
    path = Path(__file__).resolve().with_name(name)
    module_name = name.replace("-", "_")
    loader = importlib.machinery.SourceFileLoader(module_name, str(path))
    spec = importlib.util.spec_from_loader(module_name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    loader.exec_module(module)
    return module


# -- CPU pinning ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pinning:
    mode: str
    server_cpus: str | None  # taskset -c list, None when unpinned
    client_cpus: str | None

    def server_prefix(self) -> list[str]:
        return ["taskset", "-c", self.server_cpus] if self.server_cpus else []

    def client_prefix(self) -> list[str]:
        return ["taskset", "-c", self.client_cpus] if self.client_cpus else []

    def describe(self, client: str = "osprey-bench") -> str:
        if self.mode == "none":
            return "none: the scheduler places server and client threads"
        return (
            f"split: each server on CPU {self.server_cpus} (`taskset -c {self.server_cpus}`), "
            f"{client} on CPU {self.client_cpus} (`taskset -c {self.client_cpus}`); "
            "server and client never share a core"
        )


def cpu_list(cpus: list[int]) -> str:
    """taskset -c syntax for a sorted CPU list: [1, 2, 3, 5] -> "1-3,5"."""
    ranges: list[str] = []
    start = previous = cpus[0]
    for cpu in cpus[1:] + [-1]:
        if cpu == previous + 1:
            previous = cpu
            continue
        ranges.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = cpu
    return ",".join(ranges)


def cpus_of(cpu_list_text: str | None) -> list[int]:
    """The CPUs of a taskset -c list: "1-3,5" -> [1, 2, 3, 5]."""
    cpus: list[int] = []
    for part in (cpu_list_text or "").split(","):
        if part:
            first, _, last = part.partition("-")
            cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def plan_pinning(mode: str, server_cpu_count: int = 1) -> Pinning:
    """`split`: the servers on the first `server_cpu_count` CPUs, the client on the others."""
    if mode == "none":
        return Pinning("none", None, None)
    cpus = sorted(os.sched_getaffinity(0))
    if server_cpu_count < 1 or len(cpus) < server_cpu_count + 1:
        raise SystemExit(f"--pin split with {server_cpu_count} server CPU(s) needs at least "
                         f"{server_cpu_count + 1} CPUs (this process may use {len(cpus)}); use --pin none")
    if shutil.which("taskset") is None:
        raise SystemExit("--pin split needs `taskset` (util-linux); use --pin none")
    return Pinning("split", cpu_list(cpus[:server_cpu_count]), cpu_list(cpus[server_cpu_count:]))


# -- server processes -------------------------------------------------------------------------


@dataclass
class CpuSample:
    """Server CPU time so far: schedstat nanoseconds summed over threads, utime and stime ticks."""

    cpu_ns: int
    user_ticks: int
    system_ticks: int


class ServerProcess:
    """A server child process: start, CPU accounting from /proc, SIGTERM stop."""

    name = "server"

    def __init__(self, binary: str, pinning: Pinning, work_dir: Path):
        self.binary = binary
        self.pinning = pinning
        self.work_dir = work_dir
        self.log_path = work_dir / f"{self.name}.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.exit_code: int | None = None

    def spawn(self, args: list[str]) -> None:
        env = dict(os.environ, NO_COLOR="1")
        env.pop("RUST_LOG", None)
        with open(self.log_path, "wb") as log_file:
            self.proc = subprocess.Popen(
                self.pinning.server_prefix() + [self.binary] + args,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
            )

    def start(self) -> None:
        raise NotImplementedError

    def fail_start(self, reason: str) -> None:
        self.stop()
        raise RuntimeError(f"{self.name} {reason}; its log:\n{self.log_tail()}")

    def check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            self.fail_start(f"exited with code {self.proc.returncode} before it was ready")

    def log_text(self) -> str:
        try:
            return ANSI_RE.sub("", self.log_path.read_bytes().decode("utf-8", "replace"))
        except FileNotFoundError:
            return ""

    def log_tail(self, line_count: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-line_count:])

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu_sample(self) -> CpuSample:
        user_ticks, system_ticks = self.stat_cpu_ticks()
        return CpuSample(cpu_ns=self.schedstat_cpu_ns(), user_ticks=user_ticks, system_ticks=system_ticks)

    def schedstat_cpu_ns(self) -> int:
        """On-CPU nanoseconds summed over the live threads (first field of each schedstat);
        where the kernel keeps no schedstat (some sandboxes), the process's utime and stime,
        in clock ticks."""
        tasks = list(Path(f"/proc/{self.pid}/task").iterdir())
        if tasks and not (tasks[0] / "schedstat").exists():
            user_ticks, system_ticks = self.stat_cpu_ticks()
            return (user_ticks + system_ticks) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
        total_ns = 0
        for task in tasks:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                total_ns += int((task / "schedstat").read_text().split()[0])
        return total_ns

    def stat_cpu_ticks(self) -> tuple[int, int]:
        """(utime, stime) of the whole process: fields 14 and 15 of /proc/<pid>/stat."""
        text = Path(f"/proc/{self.pid}/stat").read_text()
        fields = text[text.rindex(")") + 2 :].split()  # fields[0] is field 3, the state
        return int(fields[11]), int(fields[12])

    def stop(self) -> int | None:
        """SIGTERM, wait, and return the exit code (SIGKILL after STOP_TIMEOUT_S). Never raises."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log(f"{self.name} did not exit within {STOP_TIMEOUT_S:.0f} s of SIGTERM; killing it")
                self.proc.kill()
                self.proc.wait()
        self.exit_code = self.proc.returncode
        return self.exit_code

    def log_problems(self) -> list[str]:
        return []


class RedisServer(ServerProcess):
    name = "redis"

    def start(self) -> None:
        self.port = free_port()
        self.spawn(
            ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"]
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if redis_answers_ping(self.port):
                return
            self.check_alive()
            time.sleep(0.02)
        self.fail_start(f"did not answer PING within {READY_TIMEOUT_S:.0f} s")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_answers_ping(port: int) -> bool:
    """Whether a server on `port` answers PING: PONG, or NOAUTH from one that wants a login."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


@contextlib.contextmanager
def running(server: ServerProcess) -> Iterator[ServerProcess]:
    """Starts the server and stops it however the block ends (error, Ctrl-C, SIGTERM)."""
    try:
        server.start()
        yield server
    finally:
        server.stop()


# -- statistics -------------------------------------------------------------------------------


def per_million(cpu_s: float, requests: int) -> float | None:
    return cpu_s / requests * 1e6 if requests else None


def spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


# -- formatting -------------------------------------------------------------------------------


def fmt_ops(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def fmt_cpu(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def fmt_us(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def markdown_table(header: list[str], align: str, rows: list[list[str]]) -> str:
    """align: one character per column, `l` or `r`."""
    separator = ["---" if a == "l" else "---:" for a in align]
    lines = [header, separator] + rows
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


# -- machine and build facts ------------------------------------------------------------------


def command_output(args: list[str]) -> str:
    try:
        completed = subprocess.run(args, capture_output=True, text=True, timeout=30, cwd=REPO_ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (completed.stdout or completed.stderr).strip()
    return text if completed.returncode == 0 and text else "unknown"


def git_commit() -> str:
    commit = command_output(["git", "rev-parse", "--short", "HEAD"])
    dirty = command_output(["git", "status", "--porcelain"])
    return f"{commit} (with uncommitted changes)" if dirty not in ("", "unknown") else commit


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def ram_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 2**20
    return 0.0


def machine_facts() -> str:
    return f"{os.cpu_count()} CPUs ({cpu_model()}), {ram_gib():.1f} GiB RAM, Linux {platform.release()}"


def display_path(path: str) -> str:
    """A path relative to the repository root when inside it, so reports hold no machine paths."""
    resolved = Path(path).resolve()
    with contextlib.suppress(ValueError):
        return str(resolved.relative_to(REPO_ROOT))
    return path


# -- command line -----------------------------------------------------------------------------


def without_json_option(argv: list[str]) -> list[str]:
    """argv less `--json PATH`, which changes no figure and names a local file."""
    kept: list[str] = []
    skip_next = False
    for arg in argv:
        if skip_next:
            skip_next = False
        elif arg == "--json":
            skip_next = True
        elif not arg.startswith("--json="):
            kept.append(arg)
    return kept


def exit_on_sigterm(signum: int, _frame: Any) -> None:
    log("terminated; stopping the server")
    raise SystemExit(128 + signum)  # unwinds through the `finally` blocks that stop the servers

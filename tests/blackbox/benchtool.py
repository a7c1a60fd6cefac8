"""Running the real `osprey-bench` binary and reading its JSON lines, for the bench tests."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BENCH_BIN = ROOT / "target" / "debug" / "osprey-bench"
BENCH_TIMEOUT_S = 60


def bench_bin() -> Path:
    path = Path(os.environ.get("OSPREY_BENCH_BIN", str(DEFAULT_BENCH_BIN)))
    if not path.exists():
        raise FileNotFoundError(f"osprey-bench not built at {path} (cargo build -p bench)")
    return path


def run(*args: str, check: bool = True, timeout: float = BENCH_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Runs osprey-bench with `args`; with `check`, asserts it exited 0."""
    done = subprocess.run(
        [str(bench_bin()), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert done.returncode == 0, f"osprey-bench {args} exited {done.returncode}:\n{done.stderr}"
    return done


def run_json(*args: str) -> list[dict]:
    """Runs with `--output json` and returns every line as an object."""
    done = run(*args, "--output", "json")
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def summary(lines: list[dict]) -> dict:
    (last,) = [line for line in lines if line["type"] == "summary"]
    assert lines[-1] is last, "the summary is the last line"
    return last


def op(report: dict, name: str) -> dict:
    """The entry of operation kind `name` (read, write, delete) in a summary or interval."""
    (entry,) = [entry for entry in report["ops"] if entry["op"] == name]
    return entry


def assert_clean(entry: dict) -> None:
    """No timeouts, no errors, and the outcome counts add up to the count."""
    assert entry["timeouts"] == 0, entry
    assert entry["errors"] == 0, entry
    assert entry["ok"] + entry["not_found"] == entry["count"], entry

"""Every snippet of README.md runs as pasted, in order, against one fresh server, and prints what
its comments say it prints: the Python snippets (also those inside a shell here-document), the
`redis-cli` lines, and the configuration files (which `osprey --print-config` must accept).

The snippets name the default ports, 3000 and 6379; the test points them at its own server's
ports, which is the only change made to them. A Python snippet that logs in (it names a
`"user"`) runs against a second server, with security on. Shell lines that build, install, benchmark or
start a server (`cargo ...`, `python3 -m venv ...`, `osprey ...`) are not run here: CI builds
and starts the server in its own way. Any other kind of snippet fails the test until it is
taught how to run it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import harness

README = harness.REPO_ROOT / "README.md"
FENCE_RE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)
HEREDOC_RE = re.compile(r"^(?P<command>.*?)<<'(?P<tag>\w+)'\n(?P<body>.*?)^(?P=tag)\n", re.M | re.S)
# Shell lines the test does not run, and why: they build, install, benchmark or start a server.
NOT_RUN_PREFIXES = ("cargo ", "python3 -m venv ", "osprey ")
AEROSPIKE_HOST = '("127.0.0.1", 3000)'


@dataclass
class Snippet:
    kind: str  # "python", "redis-cli" or "toml"
    text: str
    line: int  # in README.md, for failure messages


def readme_snippets() -> list[Snippet]:
    text = README.read_text()
    snippets: list[Snippet] = []
    for fence in FENCE_RE.finditer(text):
        language, body = fence.group(1), fence.group(2)
        line = text.count("\n", 0, fence.start()) + 1
        if language == "python":
            snippets.append(Snippet("python", body, line))
        elif language == "toml":
            snippets.append(Snippet("toml", body, line))
        elif language == "sh":
            snippets.extend(shell_snippets(body, line))
        else:
            pytest.fail(f"README.md line {line}: a ```{language} snippet this test cannot run")
    return snippets


def shell_snippets(body: str, line: int) -> list[Snippet]:
    """A shell block's runnable parts: Python here-documents and `redis-cli` lines."""
    snippets = []
    for heredoc in HEREDOC_RE.finditer(body):
        assert heredoc.group("command").strip().endswith("python -"), heredoc.group("command")
        snippets.append(Snippet("python", heredoc.group("body"), line))
    rest = HEREDOC_RE.sub("", body)
    for command in rest.splitlines():
        command = command.strip()
        if not command or command.startswith(NOT_RUN_PREFIXES):
            continue
        assert command.startswith("redis-cli "), f"README.md line {line}: cannot run {command!r}"
        snippets.append(Snippet("redis-cli", command, line))
    return snippets


def expected_line(comment: str) -> re.Pattern:
    """A comment's promised output as a pattern: `...` stands for anything."""
    return re.compile(".*?".join(re.escape(part) for part in comment.split("...")))


def run_python(snippet: Snippet, server: harness.OspreyServer, work_dir: Path) -> None:
    assert AEROSPIKE_HOST in snippet.text, f"README.md line {snippet.line}: no client host"
    code = snippet.text.replace(AEROSPIKE_HOST, f'("127.0.0.1", {server.port})')
    done = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True,
                          cwd=work_dir, timeout=60)
    assert done.returncode == 0, f"README.md line {snippet.line}:\n{code}\n{done.stderr}"
    promised = [line.split("#", 1)[1].strip() for line in code.splitlines() if "print(" in line]
    printed = done.stdout.splitlines()
    assert len(printed) == len(promised), (snippet.line, printed)
    for comment, output in zip(promised, printed):
        assert expected_line(comment).fullmatch(output), (snippet.line, comment, output)


def run_redis_cli(snippet: Snippet, server: harness.OspreyServer) -> None:
    command, comment = snippet.text.split("#", 1)
    args = shlex.split(command)
    assert args[:3] == ["redis-cli", "-p", "6379"], snippet.text
    done = subprocess.run(["redis-cli", "-p", str(server.resp_port), *args[3:]],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, (snippet.text, done.stderr)
    # redis-cli writes `(integer) 2` to a terminal and `2` to a pipe; the comments show the
    # terminal's form, with a list's items joined by commas.
    promised = comment.strip().removeprefix("(integer) ").split(", ")
    assert done.stdout.splitlines() == promised, (snippet.text, done.stdout)


def run_toml(snippet: Snippet, work_dir: Path) -> None:
    config = work_dir / "readme.toml"
    config.write_text(snippet.text)
    done = subprocess.run([str(harness.osprey_bin()), "--config", str(config), "--print-config"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"README.md line {snippet.line}:\n{snippet.text}\n{done.stderr}"


def test_every_readme_snippet_runs_as_pasted_and_prints_what_it_says(start_server, tmp_path):
    server = start_server(namespaces=[harness.namespace("test")])
    secure = harness.start_server(namespaces=[harness.namespace("test")], tag="osprey-readme-secure",
                                  sections={"security": {"enabled": True}})
    try:
        run_snippets(server, secure, tmp_path)
    finally:
        secure.close_clients()
        secure.stop()


def run_snippets(server, secure, tmp_path):
    snippets = readme_snippets()
    kinds = {snippet.kind for snippet in snippets}
    assert kinds == {"python", "redis-cli", "toml"}, kinds
    logged_in = [snippet for snippet in snippets if snippet.kind == "python" and '"user"' in snippet.text]
    assert logged_in, "the README shows a login"
    for snippet in snippets:
        if snippet.kind == "python":
            run_python(snippet, secure if snippet in logged_in else server, tmp_path)
        elif snippet.kind == "redis-cli":
            run_redis_cli(snippet, server)
        else:
            run_toml(snippet, tmp_path)

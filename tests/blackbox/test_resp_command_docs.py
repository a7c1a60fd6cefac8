"""COMMAND DOCS through redis-py (RESP2 and RESP3), raw sockets, and redis-cli's inline argument
hints: every command Osprey serves is documented with Redis's argument structure.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import socket
import subprocess
import time

import pytest

import harness

# "search": Osprey's SINDEX.* commands (Redis 8 files its FT.* search commands there).
GROUPS = {"connection", "server", "transactions", "generic", "string", "bitmap", "hyperloglog", "hash", "list",
          "set", "sorted-set", "geo", "stream", "pubsub", "scripting", "search"}


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(resp_server, request):
    return resp_server.redis(protocol=request.param, decode_responses=True)


def docs(r, *names):
    """COMMAND DOCS as nested dicts, whatever shape redis-py gives for the protocol."""
    return {name: normalized(doc) for name, doc in pairs(r.execute_command("COMMAND DOCS", *names))}


def pairs(reply):
    """A map reply's items: a dict in RESP3, a flat list of keys and values in RESP2."""
    if isinstance(reply, dict):
        return list(reply.items())
    return list(zip(reply[0::2], reply[1::2]))


def normalized(doc):
    fields = dict(pairs(doc))
    if "arguments" in fields:
        fields["arguments"] = [normalized(argument) for argument in fields["arguments"]]
    if "subcommands" in fields:
        fields["subcommands"] = {name: normalized(sub) for name, sub in pairs(fields["subcommands"])}
    if "flags" in fields:
        fields["flags"] = sorted(fields["flags"])
    return fields


def arguments_by_name(doc):
    return {argument["name"]: argument for argument in doc["arguments"]}


def test_hset_docs(r):
    doc = docs(r, "hset")["hset"]
    assert doc["summary"] == "Set the string value of a hash field"
    assert doc["since"] == "2.0.0"
    assert doc["group"] == "hash"
    assert doc["arguments"] == [
        {"name": "key", "type": "key", "key_spec_index": 0},
        {
            "name": "field_value",
            "type": "block",
            "flags": ["multiple"],
            "arguments": [{"name": "field", "type": "string"}, {"name": "value", "type": "string"}],
        },
    ]


def test_set_docs_with_its_options(r):
    doc = docs(r, "set")["set"]
    assert doc["group"] == "string"
    key, value, condition, get, expiration = doc["arguments"]
    assert (key["type"], value["type"]) == ("key", "string")
    assert condition["type"] == "oneof" and condition["flags"] == ["optional"]
    assert [(a["type"], a["token"]) for a in condition["arguments"]] == [("pure-token", "NX"), ("pure-token", "XX")]
    assert get == {"name": "get", "type": "pure-token", "token": "GET", "flags": ["optional"]}
    assert expiration["type"] == "oneof" and expiration["flags"] == ["optional"]
    assert [(a["name"], a["type"], a["token"]) for a in expiration["arguments"]] == [
        ("seconds", "integer", "EX"),
        ("milliseconds", "integer", "PX"),
        ("unix-time-seconds", "unix-time", "EXAT"),
        ("unix-time-milliseconds", "unix-time", "PXAT"),
        ("keepttl", "pure-token", "KEEPTTL"),
    ]


def test_zrange_docs_with_a_limit_block(r):
    doc = docs(r, "zrange")["zrange"]
    assert doc["group"] == "sorted-set"
    arguments = arguments_by_name(doc)
    assert arguments["start"]["type"] == "string" and "flags" not in arguments["start"]
    limit = next(a for a in doc["arguments"] if a.get("token") == "LIMIT")
    assert limit["type"] == "block" and limit["flags"] == ["optional"]
    assert limit["arguments"] == [{"name": "offset", "type": "integer"}, {"name": "count", "type": "integer"}]
    assert doc["arguments"][-1] == {"name": "withscores", "type": "pure-token", "token": "WITHSCORES", "flags": ["optional"]}


def test_expire_and_multi_key_docs(r):
    doc = docs(r, "expire")["expire"]
    assert doc["group"] == "generic" and doc["since"] == "1.0.0"
    key, seconds, condition = doc["arguments"]
    assert key["type"] == "key" and seconds == {"name": "seconds", "type": "integer"}
    assert [a["token"] for a in condition["arguments"]] == ["NX", "XX", "GT", "LT"]
    assert docs(r, "del")["del"]["arguments"] == [{"name": "key", "type": "key", "key_spec_index": 0, "flags": ["multiple"]}]
    rename = docs(r, "rename")["rename"]["arguments"]
    assert [(a["name"], a["key_spec_index"]) for a in rename] == [("key", 0), ("newkey", 1)]


def test_commands_without_arguments_have_no_arguments_field(r):
    doc = docs(r, "time")["time"]
    assert doc == {"summary": "Return the current server time", "since": "2.6.0", "group": "server"}


def test_all_docs_cover_every_command(resp_server, r):
    every = docs(r)
    assert len(every) == r.execute_command("COMMAND COUNT")
    # redis-py parses COMMAND's RESP3 reply expecting Redis 7's ten fields per command.
    assert set(every) == set(resp_server.redis(protocol=2, decode_responses=True).command())
    for name, doc in every.items():
        assert isinstance(doc["summary"], str) and doc["summary"], name
        assert re.fullmatch(r"\d+\.\d+\.\d+", doc["since"]), name
        assert doc["group"] in GROUPS, name


def test_unknown_names_are_skipped_and_names_are_case_insensitive(r):
    assert set(docs(r, "nosuchcommand", "GeT", "hget")) == {"get", "hget"}
    assert not docs(r, "nosuchcommand")


def test_container_subcommands(r):
    client = docs(r, "client")["client"]
    assert client["group"] == "connection" and "arguments" not in client
    subcommands = client["subcommands"]
    assert {"client|id", "client|getname", "client|setname", "client|info", "client|list"} <= set(subcommands)
    assert subcommands["client|setname"]["arguments"] == [{"name": "connection-name", "type": "string"}]
    config_get = docs(r, "config|get")["config|get"]
    assert config_get["arguments"] == [{"name": "parameter", "type": "string", "flags": ["multiple"]}]
    assert set(docs(r, "command")["command"]["subcommands"]) == {
        "command|count",
        "command|docs",
        "command|getkeys",
        "command|getkeysandflags",
        "command|info",
    }


def raw_exchange(port: int, payload: bytes, until: bytes, timeout: float = 3.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        data = b""
        deadline = time.monotonic() + timeout
        while until not in data and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def test_wire_shape_in_resp2_and_resp3(resp_server):
    """redis-cli reads flags as status replies; RESP3 gives maps and a set of flags."""
    resp2 = raw_exchange(resp_server.resp_port, b"COMMAND DOCS expire\r\n", b"+optional\r\n")
    assert resp2.startswith(b"*2\r\n$6\r\nexpire\r\n*8\r\n$7\r\nsummary\r\n")
    assert b"$5\r\nflags\r\n*1\r\n+optional\r\n" in resp2
    resp3 = raw_exchange(resp_server.resp_port, b"HELLO 3\r\nCOMMAND DOCS expire\r\n", b"+optional\r\n")
    docs_reply = resp3[resp3.index(b"%1\r\n$6\r\nexpire\r\n") :]
    assert docs_reply.startswith(b"%1\r\n$6\r\nexpire\r\n%4\r\n$7\r\nsummary\r\n")
    assert b"$5\r\nflags\r\n~1\r\n+optional\r\n" in docs_reply


def redis_cli_hint(port: int, typed: str) -> str | None:
    """The grey hint redis-cli shows after `typed`, read from a pseudo-terminal."""
    import fcntl
    import pty
    import struct
    import termios

    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm"
        os.execvp("redis-cli", ["redis-cli", "-p", str(port)])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
    hints: list[bytes] = []
    try:
        for chunk in [b""] + [typed.encode()]:
            os.write(fd, chunk)
            quiet_since = time.monotonic()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and time.monotonic() - quiet_since < 0.7:
                if not select.select([fd], [], [], 0.05)[0]:
                    continue
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    break
                if b"\x1b[6n" in data:  # the line editor asks where the cursor is
                    os.write(fd, b"\x1b[1;1R")
                hints += re.findall(rb"\x1b\[0;90;49m(.*?)\x1b\[0m", data)
                quiet_since = time.monotonic()
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)
    return hints[-1].decode() if hints else None


def redis_cli_major_version() -> int:
    if shutil.which("redis-cli") is None:
        return 0
    version = subprocess.run(["redis-cli", "--version"], capture_output=True, text=True).stdout
    match = re.search(r"(\d+)\.\d+\.\d+", version)
    return int(match.group(1)) if match else 0


@pytest.mark.skipif(redis_cli_major_version() < 7, reason="needs redis-cli 7 or later")
@pytest.mark.parametrize(
    "typed, hint",
    [
        ("hset ", "key field value [field value ...]"),
        ("set k v ", "[NX|XX] [GET] [EX seconds|PX milliseconds|EXAT unix-time-seconds|PXAT unix-time-milliseconds|KEEPTTL]"),
        ("zrange ", "key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]"),
        ("expire k ", "seconds [NX|XX|GT|LT]"),
        ("client setname ", "connection-name"),
    ],
)
def test_redis_cli_shows_argument_hints(resp_server, typed, hint):
    assert redis_cli_hint(resp_server.resp_port, typed) == hint

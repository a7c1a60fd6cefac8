"""MONITOR: every command the server runs, one line each, as redis-server writes them
(compared with Debian's redis-server for the same commands, less the time and the client's
port); scripts shown before the commands they call; admin commands and passwords hidden; data
commands refused on a monitoring connection; RESET ending the mode; and a monitor that never
reads cut off at its output limit while the server goes on.
"""

from __future__ import annotations

import re
import socket
import time

import pytest
import redis

import harness
from test_resp_zsets import Raw, encode, read_reply


class Monitor:
    """A raw connection in MONITOR mode."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.stream = self.sock.makefile("rb")
        self.sock.sendall(encode(("MONITOR",)))
        assert self.stream.readline() == b"+OK\r\n"

    def lines(self, count: int) -> list[str]:
        return [self.stream.readline().decode() for _ in range(count)]

    def send(self, *args) -> bytes:
        self.sock.sendall(encode(args))
        return read_reply(self.stream)

    def close(self):
        self.stream.close()
        self.sock.close()


LINE = re.compile(r'^\+(\d+)\.(\d{6}) \[(\d+) ([^\]]+)\] (.*)\r\n$')


def shape(line: str) -> tuple[str, str, str]:
    """A line without its time and the client's port: (db, client or lua, arguments)."""
    match = LINE.match(line)
    assert match, line
    source = match.group(4)
    source = "client" if source.startswith("127.0.0.1:") else source
    return match.group(3), source, match.group(5)


# Commands whose monitor lines redis-server and Osprey must write alike.
COMMANDS = [
    ("SET", "k", "plain"),
    ("SET", "k", 'quote " backslash \\ newline \n tab \t nul \x00 high \xff'),
    ("GET", "k"),
    ("SELECT", "3"),
    ("INCR", "counter"),
    ("SELECT", "0"),
    ("CONFIG", "GET", "maxmemory"),
    ("CLIENT", "SETNAME", "watched"),
    ("EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "k", "from lua"),
    ("EVALSHA", "0" * 40, "0"),
    ("MULTI",),
    ("SET", "k", "in multi"),
    ("EXEC",),
    ("MULTI",),
    ("NOSUCHCOMMAND",),
    ("EXEC",),
    ("HELLO", "2", "AUTH", "user", "secret"),
    ("DEL", "k", "counter"),
]

# What each server shows of COMMANDS: all but CONFIG GET (an admin command) and the unknown
# command (refused before it runs).
SHOWN = len(COMMANDS) - 2


def run_and_watch(port: int) -> list[tuple[str, str, str]]:
    monitor = Monitor(port)
    client = socket.create_connection(("127.0.0.1", port), timeout=5)
    stream = client.makefile("rb")
    try:
        for command in COMMANDS:
            client.sendall(encode(tuple(word.encode("latin-1") for word in command)))
            read_reply(stream)
        return [shape(line) for line in monitor.lines(SHOWN)]
    finally:
        stream.close()
        client.close()
        monitor.close()


def test_monitor_lines_are_those_of_redis_server(resp_server, redis_server_port):
    ours = run_and_watch(resp_server.resp_port)
    theirs = run_and_watch(redis_server_port)
    assert ours == theirs
    # What the comparison covers, spelled out.
    assert ours[0] == ("0", "client", '"SET" "k" "plain"')
    assert ours[1][2] == ('"SET" "k" "quote \\" backslash \\\\ newline \\n tab \\t nul \\x00 '
                          'high \\xff"')
    assert ours[4] == ("3", "client", '"INCR" "counter"')
    assert ours[7] == ("0", "client",
                       '"EVAL" "return redis.call(\'SET\', KEYS[1], ARGV[1])" "1" "k" "from lua"')
    assert ours[8] == ("0", "lua", '"SET" "k" "from lua"')
    assert ours[9][2] == '"EVALSHA" "%s" "0"' % ("0" * 40)
    assert [line[2] for line in ours[10:15]] == [
        '"MULTI"', '"SET" "k" "in multi"', '"EXEC"', '"MULTI"', '"EXEC"']
    assert ours[15][2] == '"HELLO" "2" "AUTH" "(redacted)" "(redacted)"'


def test_a_line_carries_the_time_and_the_client_address(resp_server):
    monitor = Monitor(resp_server.resp_port)
    client = Raw(resp_server.resp_port, 2)
    try:
        before = time.time()
        assert client("PING") == b"+PONG\r\n"
        [line] = monitor.lines(1)
        match = LINE.match(line)
        assert match, line
        assert abs(float(f"{match.group(1)}.{match.group(2)}") - before) < 5
        client_port = client.sock.getsockname()[1]
        assert match.group(4) == f"127.0.0.1:{client_port}", line
        assert match.group(5) == '"PING"'
    finally:
        client.close()
        monitor.close()


def test_a_monitor_may_not_touch_data_and_reset_ends_the_mode(resp_server):
    monitor = Monitor(resp_server.resp_port)
    admin = Raw(resp_server.resp_port, 2)
    try:
        assert monitor.send("GET", "k") == b"-ERR Replica can't interact with the keyspace\r\n"
        assert monitor.send("FUNCTION", "FLUSH") == (
            b"-ERR Replica can't interact with the keyspace\r\n")
        # FUNCTION LIST reads no data (Redis flags it neither read nor write): served.
        assert monitor.send("FUNCTION", "LIST", "LIBRARYNAME", "none-such") == b"*0\r\n"
        assert shape(monitor.lines(1)[0])[2] == '"FUNCTION" "LIST" "LIBRARYNAME" "none-such"'
        # A command it may send is shown to every monitor, itself included, as Redis does.
        assert monitor.send("PING") == b"+PONG\r\n"
        assert shape(monitor.lines(1)[0]) == ("0", "client", '"PING"')
        assert b" flags=O " in admin("CLIENT", "LIST")
        assert monitor.send("RESET") == b"+RESET\r\n"
        assert b" flags=O " not in admin("CLIENT", "LIST")
        assert admin("SET", "after-reset", "v") == b"+OK\r\n"
        # No line comes any more: the next reply is the GET's.
        assert monitor.send("GET", "after-reset") == b"$1\r\nv\r\n"
    finally:
        admin.close()
        monitor.close()


def test_monitor_inside_a_transaction_is_refused(resp_server):
    r = resp_server.redis()
    pipe = r.pipeline(transaction=True)
    pipe.execute_command("MONITOR")
    with pytest.raises(redis.ResponseError) as caught:
        pipe.execute()
    assert "MONITOR isn't allowed for DENY BLOCKING client" in str(caught.value)


def test_a_monitor_that_never_reads_is_cut_off_at_its_limit():
    """A monitor's lines wait in a bounded mailbox, as a subscriber's messages do: one that
    never reads is disconnected at the normal class's hard limit, and the server serves on."""
    server = harness.start_server(
        namespaces=[harness.namespace("test", allow_ttl_without_nsup=True)],
        resp={"client-output-buffer-limit": "normal 256kb 0 0"},
        tag="osprey-monitor-limit",
    )
    try:
        admin = server.redis()
        sleeper = socket.create_connection(("127.0.0.1", server.resp_port), timeout=5)
        sleeper.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sleeper.sendall(encode((b"MONITOR",)))
        deadline = time.monotonic() + 30
        while not any("O" in entry["flags"] for entry in admin.client_list()):
            assert time.monotonic() < deadline, "the monitor never started"
            time.sleep(0.01)
        value = "v" * 1000
        sets = 0
        while True:
            monitors = [entry for entry in admin.client_list() if "O" in entry["flags"]]
            if not monitors:
                break
            pipe = admin.pipeline(transaction=False)
            for _ in range(200):
                pipe.set("k", value)
            pipe.execute()
            sets += 200
            assert time.monotonic() < deadline, "the monitor was never cut off"
        # Cut off near its limit (256 KiB of lines, plus what the socket took), not before.
        assert sets >= 200
        assert admin.get("k") == value.encode()
        assert "panicked" not in server.log_text()
        sleeper.close()
    finally:
        server.close_clients()
        server.stop()

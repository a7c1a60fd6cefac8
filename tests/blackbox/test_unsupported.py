"""What Osprey does not implement yet, as a new user meets it: every such request answers
UNSUPPORTED_FEATURE (16) at once, with a reason where the protocol carries one; it is counted
per kind in `statistics`; and the log names it once, however often a client repeats it. Redis
commands Osprey does not serve answer Redis's own `ERR unknown command` text and are counted in
INFO's `rejected_unknown_commands`.

One server for the module, so that the counters and the log start from zero.
"""

from __future__ import annotations

import socket
import subprocess

import aerospike
import pytest
import redis
from aerospike import exception as ex
from aerospike_helpers import expressions as exp
from aerospike_helpers.operations import expression_operations as expression_ops
from aerospike_helpers.operations import operations as ops

import aswire
import harness
from test_scan import ScanStream, scan_frame

UNSUPPORTED_FEATURE = 16


@pytest.fixture(scope="module")
def osprey():
    server = harness.start_server(
        namespaces=[harness.namespace("test", nsup_period=1)], tag="osprey-unsupported"
    )
    yield server
    server.close_clients()
    server.stop()


@pytest.fixture(scope="module")
def aero(osprey, tmp_path_factory):
    # udf_put copies the module into the client's Lua path (the working directory by default)
    # before it asks the server; keep that copy out of the checkout.
    lua_path = tmp_path_factory.mktemp("lua")
    return osprey.client(lua={"user_path": str(lua_path)})


def statistics(client) -> dict[str, int]:
    stats = harness.parse_kv(harness.info(client, "statistics"))
    return {name: int(value) for name, value in stats.items() if name.startswith("unsupported_")}


def assert_unsupported(call) -> ex.AerospikeError:
    with pytest.raises(ex.AerospikeError) as error:
        call()
    assert error.value.code == UNSUPPORTED_FEATURE, (error.value.code, error.value.msg)
    return error.value


def refused_once_more(client, statistic: str, call) -> None:
    """`call` fails with 16 and adds exactly one to `statistic`, and to no other counter."""
    before = statistics(client)
    assert_unsupported(call)
    after = statistics(client)
    changed = {name: after[name] - before[name] for name in after if after[name] != before[name]}
    assert changed == {statistic: 1}, changed


def test_statistics_list_every_unsupported_counter_at_zero_on_a_fresh_server(aero):
    assert statistics(aero) == {
        "unsupported_expression_ops": 0,
        "unsupported_legacy_scans": 0,
    }


def test_an_expression_osprey_cannot_evaluate_answers_16_and_is_counted(aero, osprey):
    """The 8.1 map-keys expression (op 101), as a filter: refused before the record is read."""
    key = ("test", "unsupported", "ops")
    aero.put(key, {"s": "hello", "n": 1})
    digest = aerospike.calc_digest(*key)
    fields = aswire.record_fields(*key[:2], digest) + [aswire.field(43, b"\x91\x65")]

    def read_with_filter() -> int:
        with osprey.raw() as s:
            reply = aswire.request_msg(
                s, aswire.as_msg(fields, [], info1=aswire.INFO1_READ | aswire.INFO1_GET_ALL)
            )
        return reply.result_code

    before = statistics(aero)
    assert read_with_filter() == UNSUPPORTED_FEATURE
    after = statistics(aero)
    changed = {name: after[name] - before[name] for name in after if after[name] != before[name]}
    assert changed == {"unsupported_expression_ops": 1}, changed
    assert aero.get(key)[2] == {"s": "hello", "n": 1}


def test_legacy_scans_answer_16_and_are_counted(aero, osprey):
    before = statistics(aero)["unsupported_legacy_scans"]
    with osprey.raw() as s:
        s.sendall(scan_frame("test", "unsupported", info3=0))
        assert ScanStream(s).read_to_end(timeout=5).result_code == UNSUPPORTED_FEATURE
    assert statistics(aero)["unsupported_legacy_scans"] == before + 1


def test_a_client_repeating_an_unsupported_request_is_logged_once_and_counted_every_time(aero, osprey):
    before = statistics(aero)["unsupported_legacy_scans"]
    with osprey.raw() as s:
        for _ in range(200):
            s.sendall(scan_frame("test", "unsupported", info3=0))
            assert ScanStream(s).read_to_end(timeout=5).result_code == UNSUPPORTED_FEATURE
    assert statistics(aero)["unsupported_legacy_scans"] == before + 200
    lines = [line for line in osprey.log_text().splitlines() if "scans without partitions" in line]
    assert len(lines) == 1, lines
    assert "WARN" in lines[0] and "not supported yet" in lines[0], lines[0]
    assert "unsupported_legacy_scans" in lines[0], lines[0]


# -- Redis ----------------------------------------------------------------------------------------

# Commands of Redis 7 that Osprey does not serve yet: Redis's own replication and migration
# between servers (AUTH and ACL were here until they were served).
NOT_YET = [
    ("MIGRATE", "host", "6379", "key", "0", "1000"),
    ("PSYNC", "?", "-1"),
]


def unknown_command_text(args) -> str:
    """Redis's text for an unknown command (server.c `processCommand`)."""
    quoted = "".join(f"'{arg}' " for arg in args[1:])
    return f"unknown command '{args[0]}', with args beginning with: {quoted}"


def test_redis_commands_not_served_yet_answer_redis_unknown_command_text_and_are_counted(osprey):
    r = osprey.redis()
    before = int(r.info("stats")["rejected_unknown_commands"])
    for args in NOT_YET:
        with pytest.raises(redis.ResponseError) as error:
            r.execute_command(*args)
        assert str(error.value) == unknown_command_text(args)
    assert int(r.info("stats")["rejected_unknown_commands"]) == before + len(NOT_YET)


# Commands and subcommands of Redis 7 that Osprey knows and refuses, saying why, rather than
# answering "unknown command".
REFUSED = [
    ("WAITAOF", "1", "0", "0"),
    ("CLIENT", "TRACKING", "on"),
    ("DEBUG", "JMAP"),
]


def test_redis_commands_osprey_refuses_say_so_and_are_not_counted_as_unknown(osprey):
    r = osprey.redis()
    before = int(r.info("stats")["rejected_unknown_commands"])
    for args in REFUSED:
        with pytest.raises(redis.ResponseError) as error:
            r.execute_command(*args)
        assert "not served by Osprey" in str(error.value), args
    assert int(r.info("stats")["rejected_unknown_commands"]) == before


def resp_request(*args: bytes) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


def test_the_unknown_command_reply_is_byte_for_byte_what_redis_server_sends(osprey, tmp_path):
    """Compared with a real redis-server on commands neither knows: short arguments, and long
    ones, which Redis lists only up to 128 bytes."""
    requests = [
        resp_request(b"NOSUCH", b"a", b"b c"),
        resp_request(b"NOSUCH", b"a", b"b c", b"x" * 100, b"y" * 100, b"z"),
    ]
    port = free_port()
    redis_server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        harness.wait_until(lambda: exchange(port, resp_request(b"PING")), timeout=10)
        expected = [exchange(port, request) for request in requests]
    finally:
        redis_server.terminate()
        redis_server.wait(timeout=10)
    assert all(reply.startswith(b"-ERR unknown command 'NOSUCH'") for reply in expected), expected
    assert [exchange(osprey.resp_port, request) for request in requests] == expected


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exchange(port: int, request: bytes) -> bytes | None:
    """One request's reply line, or None while nothing listens on `port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(request)
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
            return reply
    except ConnectionRefusedError:
        return None


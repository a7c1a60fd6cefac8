"""SHUTDOWN stops the server as SIGTERM does (exit code 0, the connection closed without a
reply, as redis-server's); its options and refusals as redis-server answers them; only
SHUTDOWN NOSAVE while a script is busy, stopping the script; BGSAVE's options as Redis reads
them (SAVE and BGSAVE themselves are `test_rdb.py`'s); SAVE and SHUTDOWN refused inside MULTI,
which dooms the transaction, as in Redis.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

import harness
from test_resp_zsets import Raw


def fresh_server(tag: str):
    return harness.start_server(
        namespaces=[harness.namespace("test", allow_ttl_without_nsup=True)],
        tag=tag,
    )


def wait_for_exit(server, timeout_s: float = 15.0) -> int:
    assert server.proc is not None
    return server.proc.wait(timeout=timeout_s)


def test_shutdown_stops_the_server_and_closes_the_connection_without_a_reply():
    server = fresh_server("osprey-shutdown")
    try:
        r = server.redis()
        r.set("k", "v")
        raw = Raw(server.resp_port, 2)
        raw.sock.sendall(b"*1\r\n$8\r\nSHUTDOWN\r\n")
        assert raw.sock.recv(100) == b""
        raw.close()
        assert wait_for_exit(server) == 0
        assert "shutdown requested by SHUTDOWN" in server.log_text()
    finally:
        server.stop()


@pytest.mark.parametrize("command", [
    ["SHUTDOWN", "ABORT"],
    ["SHUTDOWN", "NOSAVE", "SAVE"],
    ["SHUTDOWN", "ABORT", "NOW"],
    ["SHUTDOWN", "LATER"],
    ["SAVE", "x"],
])
def test_shutdown_options_are_refused_as_redis_refuses_them(resp_server, redis_server_port,
                                                            command):
    ours, theirs = Raw(resp_server.resp_port, 2), Raw(redis_server_port, 2)
    try:
        assert ours(*command) == theirs(*command)
    finally:
        ours.close()
        theirs.close()
    assert resp_server.redis().ping()


@pytest.mark.parametrize("command", ["SAVE", "SHUTDOWN"])
def test_save_and_shutdown_inside_multi_are_refused_and_doom_it(resp_server, redis_server_port,
                                                                 command):
    """Redis's multi.tcl "MULTI with SAVE" and "MULTI with SHUTDOWN"."""
    for port in (resp_server.resp_port, redis_server_port):
        raw = Raw(port, 2)
        try:
            assert raw("DEL", "foo") in (b":0\r\n", b":1\r\n")
            assert raw("MULTI") == b"+OK\r\n"
            assert raw("SET", "foo", "bar") == b"+QUEUED\r\n"
            assert raw(command) == b"-ERR Command not allowed inside a transaction\r\n"
            assert raw("EXEC") == (b"-EXECABORT Transaction discarded because of previous "
                                   b"errors.\r\n")
            assert raw("GET", "foo") == b"$-1\r\n"
        finally:
            raw.close()


def test_bgsave_takes_only_schedule(resp_server):
    r = resp_server.redis()
    for command in (["BGSAVE", "LATER"], ["BGSAVE", "SCHEDULE", "NOW"]):
        with pytest.raises(redis.ResponseError, match="syntax error"):
            r.execute_command(*command)


def test_while_a_script_is_busy_only_shutdown_nosave_stops_the_server():
    server = fresh_server("osprey-shutdown-busy")
    try:
        admin = server.redis()
        admin.config_set("busy-reply-threshold", 100)
        looping = redis.Redis(host="127.0.0.1", port=server.resp_port, socket_timeout=30)
        outcome: dict[str, object] = {}

        def loop() -> None:
            try:
                outcome["value"] = looping.eval("while true do end", 0)
            except redis.RedisError as error:
                outcome["error"] = error

        thread = threading.Thread(target=loop)
        thread.start()
        deadline = time.monotonic() + 10
        while True:
            try:
                admin.ping()
            except redis.ResponseError as error:
                assert "BUSY" in str(error)
                break
            assert time.monotonic() < deadline, "never BUSY"
            time.sleep(0.02)
        with pytest.raises(redis.ResponseError) as caught:
            admin.execute_command("SHUTDOWN")
        assert "BUSY Redis is busy running a script" in str(caught.value)
        with pytest.raises(redis.ConnectionError):
            admin.execute_command("SHUTDOWN", "NOSAVE")
        thread.join(timeout=15)
        assert not thread.is_alive()
        assert "error" in outcome, outcome
        assert wait_for_exit(server) == 0
    finally:
        server.stop()

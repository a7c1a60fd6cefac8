"""INFO commandstats: calls, rejected and failed calls per command and subcommand, compared
with a reference redis-server 7.0 sent the same commands (the microseconds differ, and are
only checked to be there): plain calls, rejections (argument count, inside MULTI, a read-only
script's write), failures (a wrong type, EXEC's own errors but not its commands', a script's
error), calls inside scripts, subcommands of container commands, blocking commands counted when
they answer, and CONFIG RESETSTAT.
"""

from __future__ import annotations

import re
import time

import pytest
import redis

import harness


@pytest.fixture(scope="module")
def redis_server_port():
    with harness.reference_redis_server() as port:
        yield port


def clients(resp_server, redis_server_port):
    ours = resp_server.redis(protocol=2)
    theirs = redis.Redis(host="127.0.0.1", port=redis_server_port, protocol=2)
    return ours, theirs


LINE = re.compile(
    r"cmdstat_(?P<name>[^:]+):calls=(?P<calls>\d+),usec=(?P<usec>\d+),"
    r"usec_per_call=(?P<per_call>\d+\.\d\d),rejected_calls=(?P<rejected>\d+),"
    r"failed_calls=(?P<failed>\d+)"
)


def commandstats(client) -> dict[str, tuple[int, int, int]]:
    """Per command: calls, rejected and failed calls, from INFO commandstats' raw text."""
    connection = client.connection_pool.get_connection("INFO")
    try:
        connection.send_command("INFO", "commandstats")
        text = connection.read_response().decode()
    finally:
        client.connection_pool.release(connection)
    lines = text.split("\r\n")
    assert lines[0] == "# Commandstats"
    stats = {}
    for line in filter(None, lines[1:]):
        match = LINE.fullmatch(line)
        assert match, line
        calls = int(match["calls"])
        if calls:
            per_call = int(match["usec"]) / calls
            assert abs(float(match["per_call"]) - per_call) < 1.0, line
        stats[match["name"]] = (calls, int(match["rejected"]), int(match["failed"]))
    return stats


def run(client, script):
    for args in script:
        try:
            client.execute_command(*args)
        except redis.ResponseError:
            pass


SCRIPT = [
    ("SET", "{cs}a", "1"),
    ("SET", "{cs}a", "2"),
    ("GET", "{cs}a"),
    ("SET", "{cs}a"),  # rejected: argument count
    ("LPUSH", "{cs}a", "x"),  # failed: wrong type
    ("EXEC",),  # failed: EXEC without MULTI
    ("CONFIG", "GET", "maxmemory"),
    ("CONFIG", "NOSUCHSUBCOMMAND"),  # not counted: unknown subcommand
    ("NOSUCHCOMMAND",),  # not counted: unknown command
    ("XGROUP", "CREATECONSUMER", "{cs}stream", "group", "consumer"),  # failed: no such key
    ("EVAL", "return redis.pcall('lpush', KEYS[1], 'x') and 1", "1", "{cs}a"),
    ("EVAL", "return redis.call('lpush', KEYS[1], 'x')", "1", "{cs}a"),
    ("EVAL", "return redis.error_reply('MY custom')", "0"),
    ("EVAL_RO", "return redis.pcall('set', KEYS[1], 'y') and 1", "1", "{cs}a"),
    ("EVAL", "return 1"),  # rejected: argument count
    ("BLPOP", "{cs}list", "0.01"),  # answers at its timeout
]


def test_commandstats_count_as_redis_does(resp_server, redis_server_port):
    ours, theirs = clients(resp_server, redis_server_port)
    for client in (ours, theirs):
        client.delete("{cs}a", "{cs}list", "{cs}stream")
        client.config_resetstat()
        # RESETSTAT is counted once it ran, after the reset.
        assert commandstats(client) == {"config|resetstat": (1, 0, 0)}
        run(client, SCRIPT)
    expected = commandstats(theirs)
    got = commandstats(ours)
    # Each INFO is counted once it has written its text: both show the first one.
    assert got == expected
    assert expected["set"] == (2, 2, 0)  # the read-only script's SET is rejected
    assert expected["lpush"] == (3, 0, 3)
    assert expected["config|get"] == (1, 0, 0)
    assert expected["eval"] == (3, 1, 2)
    ours.close()
    theirs.close()


def test_a_transaction_counts_its_commands_and_its_own_errors(resp_server, redis_server_port):
    ours, theirs = clients(resp_server, redis_server_port)
    for client in (ours, theirs):
        client.delete("{cs}t")
        client.config_resetstat()
        pipe = client.pipeline(transaction=True)
        pipe.set("{cs}t", "v").lpush("{cs}t", "x").get("{cs}t")
        with pytest.raises(redis.ResponseError):
            pipe.execute()
        # A command refused while queued dooms the transaction: EXECABORT is EXEC's own.
        client.execute_command("MULTI")
        with pytest.raises(redis.ResponseError):
            client.execute_command("GET")
        with pytest.raises(redis.ResponseError, match="discarded because of previous errors"):
            client.execute_command("EXEC")
    expected = commandstats(theirs)
    assert commandstats(ours) == expected
    assert expected["exec"] == (2, 0, 1)
    assert expected["lpush"] == (1, 0, 1)
    assert expected["get"] == (1, 1, 0)
    ours.close()
    theirs.close()


def test_info_shows_commandstats_only_when_asked(resp_server):
    client = resp_server.redis(protocol=2)
    client.ping()
    assert not any(name.startswith("cmdstat_") for name in client.info())
    everything = client.info("everything")
    assert everything["cmdstat_ping"]["calls"] >= 1
    assert not any(name.startswith("cmdstat_") for name in client.info("default"))
    client.close()


def test_a_command_that_waits_for_a_script_is_a_call_and_one_answered_busy_a_rejection(resp_server):
    """A command that arrives while a script runs, before `busy-reply-threshold`, waits and
    runs once the script ends: a call. One answered BUSY (past the threshold) is a rejection,
    as Redis's `rejectCommand` counts it."""
    import threading

    spin = ("local start = redis.call('TIME') "
            "repeat local now = redis.call('TIME') "
            "until (now[1] - start[1]) * 1000000 + (now[2] - start[2]) > tonumber(ARGV[1])")
    admin = resp_server.redis(protocol=2)
    admin.config_set("busy-reply-threshold", 5000)
    admin.config_resetstat()
    runner = threading.Thread(target=lambda: resp_server.redis().eval(spin, 0, 600_000))
    runner.start()
    time.sleep(0.2)
    assert resp_server.redis().get("{cs}waiting") is None  # waits for the script, then runs
    runner.join()
    assert commandstats(admin)["get"] == (1, 0, 0)
    admin.config_set("busy-reply-threshold", 100)
    admin.config_resetstat()
    runner = threading.Thread(target=lambda: resp_server.redis().eval(spin, 0, 600_000))
    runner.start()
    time.sleep(0.3)
    with pytest.raises(redis.ResponseError, match="BUSY"):
        resp_server.redis().get("{cs}waiting")
    runner.join()
    admin.config_set("busy-reply-threshold", 5000)
    assert commandstats(admin)["get"] == (0, 1, 0)

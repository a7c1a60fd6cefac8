"""`maxmemory` with Redis's noeviction policy: past the limit, commands that may grow the data
set are refused with Redis's OOM error, where and as redis-server 7.0 refuses them (as they
arrive, inside MULTI, at EXEC, in scripts); everything else goes on. Each sequence runs on
Osprey and on a reference redis-server, both set to `maxmemory 1` over a non-empty data set,
and their replies are compared.
"""

from __future__ import annotations

import pytest
import redis

import harness


@pytest.fixture(scope="module")
def real_redis():
    with harness.reference_redis_server() as port:
        client = redis.Redis(port=port)
        yield client
        client.close()


@pytest.fixture
def o(resp_server):
    return resp_server.redis()


def replies(client: redis.Redis, commands: list[tuple]) -> list:
    """Each command's reply, or its error's text, on one connection."""
    connection = client.connection_pool.get_connection()
    try:
        answers = []
        for command in commands:
            connection.send_command(*command)
            try:
                answers.append(connection.read_response())
            except redis.ResponseError as error:
                answers.append(f"error: {error}")
        return answers
    finally:
        client.connection_pool.release(connection)


def past_the_limit(client: redis.Redis, key: str, commands: list[tuple]) -> list:
    """`commands` with `maxmemory 1` over a data set holding `key`, then the limit lifted."""
    client.set(key, "before")
    client.config_set("maxmemory", 1)
    try:
        return replies(client, commands)
    finally:
        client.config_set("maxmemory", 0)


SEQUENCES = {
    "growing commands refused, others served": [
        ("SET", "{k}", "v"), ("LPUSH", "{k}:list", "x"), ("GET", "{k}"), ("EXPIRE", "{k}", "100"),
        ("DEL", "{k}:other"), ("INCR", "{k}:counter"), ("APPEND", "{k}", "more")],
    "a refusal inside MULTI dooms it": [
        ("MULTI",), ("GET", "{k}"), ("SET", "{k}", "v"), ("EXEC",), ("GET", "{k}")],
    "DISCARD is served": [("MULTI",), ("GET", "{k}"), ("DISCARD",), ("PING",)],
    "compat script: refused at its first growing call": [
        ("EVAL", "return redis.call('SET', KEYS[1], 'v')", "1", "{k}"),
        ("EVAL", "return redis.pcall('SET', KEYS[1], 'v')['err']", "1", "{k}"),
        ("EVAL", "return redis.call('GET', KEYS[1])", "1", "{k}")],
    "compat script: not stopped once it wrote": [
        ("EVAL", "redis.call('DEL', KEYS[2]) return redis.call('SET', KEYS[1], 'v')", "2", "{k}",
         "{k}:gone"),
        ("GET", "{k}")],
    "scripts with flags: refused unless no-writes or allow-oom": [
        ("EVAL", "#!lua\nreturn 1", "0"),
        ("EVAL", "#!lua flags=no-writes\nreturn 2", "0"),
        ("EVAL", "#!lua flags=allow-oom\nreturn redis.call('SET', KEYS[1], 'w')", "1", "{k}"),
        ("GET", "{k}"),
        ("EVAL", "#!lua flags=\nreturn 3", "0"),
        ("EVAL", "#!lua flags=no-writes\nreturn redis.call('SET', KEYS[1], 'v')", "1", "{k}")],
}


def with_key(commands: list[tuple], key: str) -> list[tuple]:
    return [tuple(str(word).replace("{k}", key) for word in command) for command in commands]


@pytest.mark.parametrize("name", SEQUENCES)
def test_past_maxmemory_osprey_answers_as_redis_server(o, real_redis, name):
    key = harness.unique("oom")
    commands = with_key(SEQUENCES[name], key)
    assert past_the_limit(o, key, commands) == past_the_limit(real_redis, key, commands)


def test_exec_of_a_transaction_that_may_grow_is_aborted_once_past_the_limit(o, real_redis):
    """The limit is passed while the transaction is queued (from another connection): EXEC
    answers EXECABORT naming OOM, as Redis does; one of reads only runs."""
    def run(client: redis.Redis, key: str) -> list:
        client.set(key, "before")
        other = redis.Redis(port=client.connection_pool.connection_kwargs["port"])
        growing = replies(client, [("MULTI",), ("SET", key, "v"), ("GET", key)])
        other.config_set("maxmemory", 1)
        try:
            growing += replies(client, [("EXEC",)])
            growing += replies(client, [("MULTI",), ("GET", key), ("EXEC",)])
        finally:
            other.config_set("maxmemory", 0)
            other.close()
        return growing

    key = harness.unique("oom")
    assert run(o, key) == run(real_redis, key)


def test_the_limit_is_reported_and_takes_units(o):
    o.config_set("maxmemory", "10mb")
    try:
        assert o.config_get("maxmemory") == {"maxmemory": str(10 * 1024 * 1024)}
        assert o.info("memory")["maxmemory"] == 10 * 1024 * 1024
        # 10 MiB is far above this data set: writes go on.
        assert o.set(harness.unique("oom"), "v") is True
    finally:
        o.config_set("maxmemory", 0)
    assert o.info("memory")["maxmemory"] == 0


def test_the_limit_counts_the_scripts_as_redis_counts_its_whole_server(o, real_redis):
    """Redis's `Script - disallow write on OOM` sets `maxmemory 1` over an empty data set and
    expects a script's SET refused: Redis's used_memory is never near 0. Osprey's counted the
    data set alone, so the SET passed, the test stopped before lifting the limit, and every
    write of the units after it failed. The figure now counts the clients' buffers and the
    scripts (cached bodies and the Lua state) too."""
    def run(client: redis.Redis) -> list:
        client.flushall()
        client.script_load("return 1")
        client.config_set("maxmemory", 1)
        try:
            return replies(client, [("EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", "k")])
        finally:
            client.config_set("maxmemory", 0)

    assert run(o) == run(real_redis)
    assert o.info("memory")["used_memory"] > o.info("memory")["used_memory_dataset"]


def test_a_script_on_a_fresh_empty_server_meets_the_limit():
    """The story: Redis's own suite sets `maxmemory 1` and runs a script's SET first thing on a
    fresh server. There Osprey held no data, no client buffer and no measured Lua state, so its
    `used_memory` was 0, not past 1, and the SET was served. The Lua state is now measured as
    each run starts, and counted while the run holds it."""
    server = harness.start_server(
        service={},
        namespaces=[harness.namespace("test", allow_ttl_without_nsup=True)],
        tag="osprey-fresh-maxmemory",
    )
    try:
        client = server.redis()
        client.config_set("maxmemory", 1)
        with pytest.raises(redis.ResponseError, match="command not allowed when used memory"):
            client.eval("redis.call('set', 'x', 1)", 0)
        client.config_set("maxmemory", 0)
        assert client.get("x") is None
    finally:
        server.close_clients()
        server.stop()

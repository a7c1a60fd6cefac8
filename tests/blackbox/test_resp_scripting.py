"""Redis Lua scripting through redis-py (EVAL, EVALSHA, EVAL_RO, SCRIPT LOAD | EXISTS | FLUSH |
KILL, register_script): Redis's type conversions both ways, its error texts, atomicity under a
concurrent client, a runaway script answered with BUSY to others and stopped by SCRIPT KILL, a
script stopped by its memory cap; and a fixed set of scripts whose replies are byte for byte
those of Debian's redis-server.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

import harness
from test_resp_zsets import Raw


@pytest.fixture
def key():
    return harness.unique("lua")


def long_client(server) -> redis.Redis:
    """A client that waits for a long script's reply."""
    return redis.Redis(host="127.0.0.1", port=server.resp_port, socket_timeout=60)


def error_of(call) -> str:
    with pytest.raises(redis.ResponseError) as caught:
        call()
    return str(caught.value)


# -- conversions ----------------------------------------------------------------------------------


def test_lua_values_convert_to_replies_as_redis_converts_them(r):
    # Numbers truncate to integers, a table stops at its first nil, false is a null, true is 1.
    assert r.eval("return {1, 2, 3.7, 'x', false, true, nil, 5}", 0) == [1, 2, 3, b"x", None, 1]
    assert r.eval("return -3.9", 0) == -3
    assert r.eval("return 'bytes'", 0) == b"bytes"
    assert r.eval("return nil", 0) is None
    assert r.eval("return redis.status_reply('FINE')", 0) in (b"FINE", "FINE")
    assert r.eval("return {ok = 'PONG'}", 0) in (b"PONG", "PONG", True)
    assert error_of(lambda: r.eval("return redis.error_reply('MY failure')", 0)) == "MY failure"
    assert error_of(lambda: r.eval("return {err = 'bare'}", 0)) == "bare"


def test_replies_convert_to_lua_values_as_redis_converts_them(r, key):
    r.rpush(key, "a", "b")
    script = """
        local missing = redis.call('GET', KEYS[1] .. ':missing')
        local list = redis.call('LRANGE', KEYS[1], 0, -1)
        local status = redis.call('SET', KEYS[1] .. ':s', 'v')
        local count = redis.call('LLEN', KEYS[1])
        return {type(missing), tostring(missing), type(list), #list, status.ok, type(count)}
    """
    assert r.eval(script, 1, key) == [b"boolean", b"false", b"table", 2, b"OK", b"number"]


def test_resp3_conversions_after_setresp(resp_server, key):
    r3 = resp_server.redis(protocol=3)
    r3.hset(key, mapping={"f": "v"})
    assert r3.eval("redis.setresp(3) return redis.call('HGETALL', KEYS[1]).map.f", 1, key) == b"v"
    assert r3.eval("redis.setresp(3) return {double = 1.5}", 0) == 1.5
    assert r3.eval("redis.setresp(3) return true", 0) is True
    assert r3.eval("redis.setresp(3) return false", 0) is False
    assert r3.eval("redis.setresp(3) return {map = {a = 1}}", 0) == {b"a": 1}
    assert r3.eval("redis.setresp(3) return {set = {a = true}}", 0) in ({b"a"}, [b"a"])
    # A RESP2 client gets the RESP2 shapes of the same values.
    r2 = resp_server.redis(protocol=2)
    assert r2.eval("redis.setresp(3) return {double = 1.5}", 0) == b"1.5"
    assert r2.eval("redis.setresp(3) return true", 0) == 1
    assert error_of(lambda: r2.eval("redis.setresp(4)", 0)).startswith(
        "RESP version must be 2 or 3."
    )


def test_keys_argv_and_the_libraries(r, key):
    assert r.eval("return {KEYS[1], ARGV[1], #KEYS, #ARGV}", 1, key, "v") == [key.encode(), b"v", 1, 1]
    assert r.eval("return cjson.encode({1, 'a/b', {x = true}})", 0) == b'[1,"a\\/b",{"x":true}]'
    assert r.eval("return cjson.decode(ARGV[1]).list[2]", 0, '{"list": [5, 6]}') == 6
    assert r.eval("return bit.bxor(5, 3)", 0) == 6
    assert r.eval("return bit.tohex(255, 4)", 0) == b"00ff"
    assert r.eval("return struct.unpack('<i4', struct.pack('<i4', -7))", 0) == -7
    assert r.eval("return redis.sha1hex('abc')", 0) == b"a9993e364706816aba3e25717850c26c9cd0d89d"
    assert r.eval("return unpack({1, 2})", 0) == 1
    assert r.eval("redis.log(redis.LOG_WARNING, 'from a script') return 1", 0) == 1
    assert r.eval("redis.replicate_commands() redis.set_repl(redis.REPL_ALL) return 1", 0) == 1


# -- the script cache ---------------------------------------------------------------------------


def test_script_load_evalsha_exists_and_flush(r, key):
    sha = r.script_load("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    assert sha in (b"8cc4b1e7b3c8ba3f1cda97b1ab6ee5ed3e9dd9a9", "8cc4b1e7b3c8ba3f1cda97b1ab6ee5ed3e9dd9a9") or len(sha) == 40
    assert r.evalsha(sha, 1, key, 5) == 5
    assert r.evalsha(sha.upper() if isinstance(sha, str) else sha.upper(), 1, key, 1) == 6
    assert r.script_exists(sha, "0" * 40) == [True, False]
    incr = r.register_script("return redis.call('INCR', KEYS[1])")
    assert incr(keys=[key]) == 7
    assert r.script_flush() is True
    assert r.script_exists(sha) == [False]
    assert error_of(lambda: r.evalsha(sha, 1, key, 1)) == "No matching script. Please use EVAL."
    # register_script loads again after NOSCRIPT.
    assert incr(keys=[key]) == 8


def test_eval_caches_its_script_for_evalsha(r):
    body = f"return '{harness.unique('cached')}'"
    r.eval(body, 0)
    sha = r.script_load(body)
    assert r.script_exists(sha) == [True]


# -- errors ---------------------------------------------------------------------------------------


def test_errors_read_as_redis_words_them(r, key):
    assert error_of(lambda: r.eval("return 1", 2, "k")) == (
        "Number of keys can't be greater than number of args"
    )
    assert error_of(lambda: r.eval("return 1", -1)) == "Number of keys can't be negative"
    assert error_of(lambda: r.eval("return 1", "x")) == "value is not an integer or out of range"
    assert error_of(lambda: r.evalsha("abc", 0)) == "No matching script. Please use EVAL."
    assert error_of(lambda: r.eval("return redis.call('nosuch')", 0)).startswith(
        "Unknown Redis command called from script script: "
    )
    assert error_of(lambda: r.eval("return redis.call('get')", 0)).startswith(
        "Wrong number of args calling Redis command from script script: "
    )
    assert error_of(lambda: r.eval("return redis.call('multi')", 0)).startswith(
        "This Redis command is not allowed from script script: "
    )
    assert "Attempt to modify a readonly table" in error_of(lambda: r.eval("x = 5", 0))
    assert "nonexistent global variable 'nope'" in error_of(lambda: r.eval("return nope", 0))
    assert error_of(lambda: r.eval("return 1 +", 0)).startswith(
        "Error compiling script (new function): user_script:1:"
    )
    r.set(key, "text")
    message = error_of(lambda: r.eval("return redis.call('INCR', KEYS[1])", 1, key))
    assert message.startswith("value is not an integer or out of range script: ")
    assert message.endswith(", on @user_script:1.")
    assert error_of(lambda: r.eval("return redis.pcall('INCR', KEYS[1])", 1, key)) == (
        "value is not an integer or out of range"
    )


def test_read_only_scripts_refuse_writes(r, key):
    assert error_of(lambda: r.eval_ro("return redis.call('SET', KEYS[1], 'v')", 1, key)).startswith(
        "Write commands are not allowed from read-only scripts. script: "
    )
    assert r.eval_ro("return redis.call('GET', KEYS[1])", 1, key) is None
    body = "#!lua flags=no-writes\nreturn redis.call('SET', KEYS[1], 'v')"
    assert error_of(lambda: r.eval(body, 1, key)).startswith(
        "Write commands are not allowed from read-only scripts."
    )
    writes = "#!lua\nreturn redis.call('SET', KEYS[1], 'v')"
    assert error_of(lambda: r.eval_ro(writes, 1, key)) == (
        "Can not execute a script with write flag using *_ro command."
    )
    assert error_of(lambda: r.eval("#!lua flags=bogus\nreturn 1", 0)) == (
        "Unexpected flag in script shebang: bogus"
    )
    sha = r.script_load("return redis.call('GET', KEYS[1])")
    assert r.evalsha_ro(sha, 1, key) is None


# -- atomicity ------------------------------------------------------------------------------------


def test_a_concurrent_client_never_sees_a_script_half_done(resp_server, key):
    """The script sets two keys to the same value many times over; a second client reads both
    with MGET as fast as it can. Run atomically, every read sees them equal."""
    # The reader may wait out all three scripts (seconds each on a loaded machine): a reader
    # with the default 5 s time-out died silently in its thread and left nothing seen.
    writer, reader = resp_server.redis(), long_client(resp_server)
    a, b = key + ":a", key + ":b"
    writer.mset({a: 0, b: 0})
    script = "for i = 1, 20000 do redis.call('SET', KEYS[1], i) redis.call('SET', KEYS[2], i) end"
    done = threading.Event()
    seen = []

    def read():
        while not done.is_set():
            seen.append(tuple(reader.mget(a, b)))

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for _ in range(3):
            writer.eval(script, 2, a, b)
    finally:
        done.set()
        thread.join()
    assert seen, "the reader ran"
    assert all(first == second for first, second in seen), [p for p in seen if p[0] != p[1]][:3]


def test_a_pipeline_of_scripts_is_answered_in_order_with_what_follows_it(resp_server, key):
    """Scripts a pipeline sends back to back (they once ran in one trip to the long-request
    pool; now on the runtime worker, one after the other) are answered one per request, in
    order, with the commands between and after them (a GET, a failing script, a MULTI)
    answered where they stand."""
    r = resp_server.redis()
    sha = r.script_load("return redis.call('INCR', KEYS[1])")
    pipe = r.pipeline(transaction=False)
    for _ in range(100):
        pipe.evalsha(sha, 1, key)
    pipe.get(key)
    pipe.eval("return redis.call('INCR', KEYS[1])", 1, key)
    pipe.eval("return redis.call('NOSUCHCOMMAND')", 0)
    pipe.evalsha(sha, 1, key)
    pipe.execute_command("MULTI")
    pipe.evalsha(sha, 1, key)
    pipe.execute_command("EXEC")
    for _ in range(10):
        pipe.evalsha(sha, 1, key)
    replies = pipe.execute(raise_on_error=False)
    assert replies[:100] == list(range(1, 101))
    assert replies[100] == b"100" and replies[101] == 101
    assert isinstance(replies[102], redis.ResponseError)
    assert "Unknown Redis command" in str(replies[102])
    assert replies[103:107] == [102, b"OK", b"QUEUED", [103]]
    assert replies[107:] == list(range(104, 114))


def test_scripts_of_many_clients_at_once_each_wait_their_turn(key):
    """Two connections' scripts could reach the long-request pool together (each offloaded
    while none ran) and the second panicked its pool thread ("two scripts run at once"),
    closing its connection. Now a script that finds another running waits for it: on the
    runtime, where scripts run now, two connections' scripts meet the same way."""
    server = harness.start_server(
        service={"long-request-threads": 4},
        namespaces=[harness.namespace("test")],
        tag="osprey-scripts-at-once",
    )
    try:
        sha = server.redis().script_load(
            "local n = redis.call('INCR', KEYS[1]) for i = 1, 2000 do end return n")
        errors: list[str] = []

        def run_scripts() -> None:
            client = server.redis()
            try:
                for _ in range(20):
                    pipe = client.pipeline(transaction=False)
                    for _ in range(20):
                        pipe.evalsha(sha, 1, key)
                    pipe.execute()
            except redis.RedisError as error:
                errors.append(repr(error))

        threads = [threading.Thread(target=run_scripts) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert int(server.redis().get(key)) == 8 * 20 * 20
        assert "panicked" not in server.log_text()
    finally:
        server.close_clients()
        server.stop()


def test_debug_set_disable_deny_scripts_lets_scripts_call_what_redis_refuses_them(resp_server, key):
    """Redis's tests lift the refusal with DEBUG SET-DISABLE-DENY-SCRIPTS 1 to call, say,
    CLIENT or DEBUG from a script; Osprey answered the DEBUG subcommand as unknown. Scripts
    and blocking commands stay refused (a script cannot run another or wait)."""
    r = resp_server.redis()
    client_id = "return redis.call('CLIENT', 'ID')"
    assert "not allowed from script" in error_of(lambda: r.eval(client_id, 0))
    assert r.execute_command("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1") == b"OK"
    try:
        assert isinstance(r.eval(client_id, 0), int)
        assert "not allowed from script" in error_of(
            lambda: r.eval("return redis.call('BLPOP', KEYS[1], 0)", 1, key))
        assert "not allowed from script" in error_of(
            lambda: r.eval("return redis.call('EVAL', 'return 1', 0)", 0))
    finally:
        r.execute_command("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0")
    assert "not allowed from script" in error_of(lambda: r.eval(client_id, 0))


def test_a_script_inside_a_transaction_runs_with_it(resp_server, key):
    pipe = resp_server.redis().pipeline(transaction=True)
    pipe.set(key, 1)
    pipe.eval("return redis.call('INCRBY', KEYS[1], ARGV[1])", 1, key, 41)
    pipe.get(key)
    assert pipe.execute() == [True, 42, b"42"]


# -- runaway scripts ------------------------------------------------------------------------------


def run_in_thread(call):
    """Runs `call` in a thread; returns the thread and where its outcome lands."""
    outcome = {}

    def target():
        try:
            outcome["value"] = call()
        except Exception as error:  # noqa: BLE001 (the outcome is the test's to judge)
            outcome["error"] = error

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def kill_any_script_left(admin) -> None:
    """After a failed test on a shared server: a loop left running would fail every later
    test of the module with it (BUSY or a timeout). NOTBUSY when none is left."""
    harness.error_raised_by(admin.script_kill)


def test_a_looping_script_gets_others_busy_and_script_kill_stops_it(resp_server, key):
    """A script loops forever. Past busy-reply-threshold another client gets BUSY (SCRIPT KILL
    is served); SCRIPT KILL stops the script, and the other client is served again."""
    admin = resp_server.redis()
    admin.config_set("busy-reply-threshold", 300)
    try:
        looping = long_client(resp_server)
        thread, outcome = run_in_thread(lambda: looping.eval("while true do end", 0))
        other = resp_server.redis()
        # Before the threshold the other client waits for the script; past it, BUSY.
        deadline = time.monotonic() + 10
        while True:
            try:
                other.set(key, "v")
            except redis.exceptions.BusyLoadingError as error:
                message = str(error)
                break
            except redis.ResponseError as error:
                message = str(error)
                break
            assert time.monotonic() < deadline, "never BUSY"
            time.sleep(0.05)
        assert "Redis is busy running a script" in message, message
        assert "SCRIPT KILL" in message, message
        assert admin.script_kill() is True
        thread.join(timeout=10)
        assert not thread.is_alive()
        assert "Script killed by user with SCRIPT KILL..." in str(outcome.get("error")), outcome
        assert other.set(key, "v") is True
        assert other.get(key) == b"v"
        # redis-py keeps the codes it does not know (NOTBUSY, UNKILLABLE) in the message.
        assert error_of(lambda: admin.script_kill()) == "NOTBUSY No scripts in execution right now."
    finally:
        kill_any_script_left(admin)
        admin.config_set("busy-reply-threshold", 5000)


def test_a_looping_script_on_a_one_thread_server_leaves_the_other_clients_served(
    start_server, key
):
    """A script runs on the runtime thread that read its command, as any command does. Here
    that thread is the server's only one: a script that loops forever must give the thread's
    other connections to another thread, or no client could be answered, BUSY or otherwise,
    and none could send SCRIPT KILL. New connections are accepted too."""
    server = start_server(
        service={"threads": 1},
        namespaces=[harness.namespace("test", allow_ttl_without_nsup=True)],
    )
    admin = server.redis()
    admin.config_set("busy-reply-threshold", 200)
    looping = long_client(server)
    thread, outcome = run_in_thread(lambda: looping.eval("while true do end", 0))
    # Each SET waits for the script, and once it has run past the threshold is answered BUSY
    # (a server whose one thread the script held would answer nothing: a timeout).
    deadline = time.monotonic() + 10
    while True:
        try:
            admin.set(key, "waiting")
        except redis.ResponseError as error:
            assert "BUSY Redis is busy running a script" in str(error), error
            break
        assert time.monotonic() < deadline, "never BUSY"
        time.sleep(0.05)
    # A connection opened while the script loops is served: BUSY, then, once killed, OK.
    fresh = server.redis()
    assert "BUSY Redis is busy running a script" in error_of(lambda: fresh.set(key, "v"))
    assert admin.script_kill() is True
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert "Script killed by user with SCRIPT KILL..." in str(outcome.get("error")), outcome
    assert fresh.set(key, "after") is True
    assert fresh.get(key) == b"after"


def test_commands_racing_a_script_start_are_answered_busy_and_never_stuck(start_server, key):
    """A command checks for a running script before it reaches the namespace's gate. One that
    passed the check just before a script started used to reach the gate after the script
    took it, and waited there until the script ended: for a runaway script, never answered,
    BUSY or otherwise (CI saw it as a SET that timed out, then every later test waiting for
    the loop nobody killed). A script now waits for the commands in flight before it takes
    the gate. Here a client sends pipelines of SETs without a pause while, round after round,
    a looping script starts: each round the client must be answered BUSY before the script
    is killed."""
    server = start_server(
        service={"threads": 2},
        namespaces=[harness.namespace("test", allow_ttl_without_nsup=True)],
    )
    admin = server.redis()
    admin.config_set("busy-reply-threshold", 30)
    busy_replies = [0]
    stop = threading.Event()

    def send_sets():
        client = long_client(server)
        while not stop.is_set():
            pipe = client.pipeline(transaction=False)
            for i in range(16):
                pipe.set(f"{key}-{i}", i)
            replies = pipe.execute(raise_on_error=False)
            busy_replies[0] += sum("BUSY" in str(reply) for reply in replies)

    sender, sender_outcome = run_in_thread(send_sets)
    try:
        for round_ in range(100):
            seen = busy_replies[0]
            looping = long_client(server)
            script, _ = run_in_thread(lambda: looping.eval("while true do end", 0))
            deadline = time.monotonic() + 5
            while busy_replies[0] == seen and time.monotonic() < deadline:
                assert "error" not in sender_outcome, sender_outcome
                time.sleep(0.002)
            answered = busy_replies[0] > seen
            while "NOTBUSY" in str(harness.error_raised_by(admin.script_kill)):
                time.sleep(0.002)  # not started yet
            script.join(timeout=10)
            assert answered, f"round {round_}: a SET racing the script's start was never answered"
    finally:
        stop.set()
        sender.join(timeout=10)
    assert "error" not in sender_outcome, sender_outcome
    assert admin.get(f"{key}-15") == b"15"


def test_aerospike_requests_behind_a_looping_script_wait_without_wedging_the_server(
    start_server, key
):
    """A script holds the Redis namespace for as long as it runs. An Aerospike request on that
    namespace used to block its runtime thread at the namespace's gate: on a one-thread server
    the first such request left no thread to serve SCRIPT KILL, and the server was wedged
    until the script ended (for a runaway script, never). Such a request now waits on the
    runtime: until the script ends, then it runs; or until its own deadline, then it is
    answered TIMEOUT and never applied afterwards."""
    import aerospike

    server = start_server(
        service={"threads": 1},
        namespaces=[harness.namespace("test", allow_ttl_without_nsup=True)],
    )
    admin = server.redis()
    admin.config_set("busy-reply-threshold", 200)
    aero = server.client()
    looping = long_client(server)
    script, script_outcome = run_in_thread(lambda: looping.eval("while true do end", 0))
    deadline = time.monotonic() + 10
    while "BUSY" not in str(harness.error_raised_by(lambda: admin.ping())):
        assert time.monotonic() < deadline, "the script never ran past the threshold"
        time.sleep(0.05)
    patient = [
        run_in_thread(
            lambda i=i: aero.put(("test", "redis", f"{key}-{i}"), {"value": i},
                                 policy={"total_timeout": 20000})
        )
        for i in range(4)
    ]
    started = time.monotonic()
    with pytest.raises(aerospike.exception.TimeoutError):
        aero.put(("test", "redis", f"{key}-hasty"), {"value": "late"},
                 policy={"total_timeout": 300, "max_retries": 0})
    assert time.monotonic() - started < 5
    time.sleep(0.2)
    assert all(thread.is_alive() for thread, _ in patient), "they wait for the script"
    assert admin.script_kill() is True
    script.join(timeout=10)
    assert "Script killed by user with SCRIPT KILL..." in str(script_outcome.get("error"))
    for i, (thread, outcome) in enumerate(patient):
        thread.join(timeout=10)
        assert not thread.is_alive() and "error" not in outcome, outcome
        assert admin.get(f"{key}-{i}") == str(i).encode()
    time.sleep(0.3)
    assert admin.exists(f"{key}-hasty") == 0, "a write answered TIMEOUT was applied later"


def test_a_loop_inside_a_coroutine_is_stopped_by_script_kill(resp_server, key):
    """Coroutines were left out of scripts: a loop inside one ran without the run's hook, out
    of SCRIPT KILL's reach. The hook is now one every coroutine inherits; and a script that
    catches the kill with coroutine.resume is killed all the same."""
    admin = resp_server.redis()
    for script in (
        "coroutine.wrap(function() while true do end end)()",
        "local ok = coroutine.resume(coroutine.create(function() while true do end end)) "
        "while true do end",
        "local ok = coroutine.resume(coroutine.create(function() while true do end end)) "
        "return 'swallowed'",
    ):
        looping = long_client(resp_server)
        thread, outcome = run_in_thread(lambda: looping.eval(script, 0))
        deadline = time.monotonic() + 10
        while True:
            try:
                if admin.script_kill():
                    break
            except redis.ResponseError as error:
                assert "NOTBUSY" in str(error), error
            assert time.monotonic() < deadline, "the script never ran"
            time.sleep(0.02)
        thread.join(timeout=10)
        assert not thread.is_alive(), script
        assert "Script killed by user with SCRIPT KILL..." in str(outcome.get("error")), (
            script, outcome)
        looping.close()
    assert admin.set(key, "served") is True


def test_ten_thousand_runs_leave_the_lua_state_small(start_server):
    """Redis's scripting.tcl "EVAL does not leak in the Lua stack": after 10,000 runs the Lua
    state holds under 100 KiB. Each run leaves garbage (its KEYS and ARGV, its replies): the
    collector must keep up with it without a full cycle per run, which cost more than the
    script."""
    server = start_server(namespaces=[harness.namespace("test", allow_ttl_without_nsup=True)])
    r = server.redis()
    for _ in range(20):
        pipe = r.pipeline(transaction=False)
        for _ in range(500):
            pipe.eval("return redis.call('INCR', KEYS[1])", 1, "x")
        pipe.execute()
    assert r.get("x") == b"10000"
    assert r.info("memory")["used_memory_lua"] < 100 * 1024


def test_exec_past_busy_reply_threshold_aborts_the_transaction_and_ends_it(resp_server, key):
    """Redis's multi.tcl "EXEC and script timeout": EXEC that arrives while a script runs past
    busy-reply-threshold answers `EXECABORT ... because of: BUSY ...` and leaves MULTI.
    Osprey answered plain BUSY and kept the client inside MULTI, so the suite's next commands
    were queued (its SCRIPT KILL too) and the script ran on."""
    admin = resp_server.redis()
    admin.config_set("busy-reply-threshold", 200)
    try:
        looping = long_client(resp_server)
        thread, outcome = run_in_thread(lambda: looping.eval("while true do end", 0))
        client = resp_server.redis()
        connection = client.connection_pool.get_connection()
        try:
            def busy() -> bool:
                try:
                    client.ping()
                    return False
                except redis.ResponseError as error:
                    return str(error).startswith("BUSY")

            assert harness.wait_until(busy, 10)
            replies = []
            for command in (("MULTI",), ("INCR", key), ("EXEC",), ("PING",)):
                connection.send_command(*command)
                try:
                    replies.append(connection.read_response())
                except redis.ResponseError as error:
                    replies.append(error)
            assert replies[0] == b"OK"
            assert str(replies[1]).startswith("BUSY Redis is busy running a script")
            # redis-py takes the EXECABORT code off the message into the exception's class.
            assert isinstance(replies[2], redis.exceptions.ExecAbortError)
            assert str(replies[2]) == ("Transaction discarded because of: BUSY Redis is busy "
                                       "running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.")
            # Out of MULTI: the next command is not queued (it meets the script, as any does).
            assert str(replies[3]).startswith("BUSY")
        finally:
            client.connection_pool.release(connection)
        assert admin.script_kill() is True
        thread.join(timeout=10)
        assert client.ping() is True
    finally:
        kill_any_script_left(admin)
        admin.config_set("busy-reply-threshold", 5000)


def test_a_server_asked_to_stop_stops_a_script_that_never_ends(key):
    """SIGTERM while a script looped forever: the script's connection waited for its reply past
    the shutdown grace period and the pool for the script, so the server never exited. It now
    stops the script (as SHUTDOWN NOSAVE does) and exits with 0."""
    server = harness.start_server(
        namespaces=[harness.namespace("test")], tag="osprey-script-at-shutdown")
    looping = redis.Redis(host="127.0.0.1", port=server.resp_port, socket_timeout=30)
    thread, outcome = run_in_thread(
        lambda: looping.eval("redis.call('SET', KEYS[1], 'w') while true do end", 1, key))
    time.sleep(0.5)  # the script has started (any command now would wait for it, then BUSY)
    server.close_clients()
    server.stop()  # asserts exit code 0 within its time limit
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert outcome.get("error") is not None


def test_a_command_that_waits_for_a_script_is_answered_once_it_ends(resp_server, key):
    """A command that arrives while a script runs, before busy-reply-threshold, waits and is
    answered once the script ends; on a bare connection (no reconnect-and-retry by the client),
    so a command dropped while it waited would show as a time-out."""
    script = """
        local function now() local t = redis.call('TIME') return t[1] * 1e6 + t[2] end
        local began = now()
        while now() - began < 500000 do end
        return 'done'
    """
    slow = long_client(resp_server)
    thread, outcome = run_in_thread(lambda: slow.eval(script, 0))
    bare = redis.Connection(host="127.0.0.1", port=resp_server.resp_port, socket_timeout=5)
    try:
        time.sleep(0.1)  # the script runs
        bare.send_command("SET", key, "after")
        assert bare.read_response() == b"OK"
        thread.join(timeout=10)
        assert outcome.get("value") == b"done", outcome
        bare.send_command("GET", key)
        assert bare.read_response() == b"after"
    finally:
        bare.disconnect()


def test_a_command_answered_busy_inside_multi_aborts_the_transaction(resp_server, key):
    """Inside MULTI, a command refused with BUSY while a script runs dooms the transaction, as
    in Redis: once the script is killed, EXEC answers EXECABORT and runs none of the queue.
    (redis-py's client object reconnects on BUSY, so the transaction uses its bare connection.)"""
    admin = resp_server.redis()
    admin.config_set("busy-reply-threshold", 100)
    transaction = redis.Connection(host="127.0.0.1", port=resp_server.resp_port, socket_timeout=5)

    def call(*args):
        transaction.send_command(*args)
        try:
            return transaction.read_response()
        except redis.ResponseError as error:
            return error

    try:
        admin.set(key, 1)
        assert call("MULTI") == b"OK"
        assert call("INCR", key) == b"QUEUED"
        looping = long_client(resp_server)
        thread, outcome = run_in_thread(lambda: looping.eval("while true do end", 0))
        deadline = time.monotonic() + 10
        while (answer := call("INCR", key)) == b"QUEUED":  # until the script runs
            assert time.monotonic() < deadline, "never BUSY"
            time.sleep(0.05)
        assert "Redis is busy running a script" in str(answer), answer
        assert admin.script_kill() is True
        thread.join(timeout=10)
        assert not thread.is_alive()
        assert call("INCR", key) == b"QUEUED"
        assert str(call("EXEC")) == "Transaction discarded because of previous errors."
        assert admin.get(key) == b"1"
        assert call("PING") == b"PONG"  # no longer in MULTI
    finally:
        transaction.disconnect()
        kill_any_script_left(admin)
        admin.config_set("busy-reply-threshold", 5000)


def test_a_script_that_wrote_is_unkillable_and_ends_on_its_own(resp_server, key):
    admin = resp_server.redis()
    admin.config_set("busy-reply-threshold", 200)
    try:
        script = """
            redis.call('SET', KEYS[1], 'written')
            local start = redis.call('TIME')
            local function now() local t = redis.call('TIME') return t[1] * 1e6 + t[2] end
            local began = now()
            while now() - began < 1500000 do end
            return 'done'
        """
        writer = long_client(resp_server)
        thread, outcome = run_in_thread(lambda: writer.eval(script, 1, key))
        time.sleep(0.6)
        assert error_of(lambda: admin.script_kill()).startswith(
            "UNKILLABLE Sorry the script already executed write commands against the dataset."
        )
        thread.join(timeout=20)
        assert outcome.get("value") == b"done", outcome
        assert admin.get(key) == b"written"
    finally:
        kill_any_script_left(admin)
        admin.config_set("busy-reply-threshold", 5000)


def test_a_script_allocating_without_bound_is_stopped_by_its_memory_cap(resp_server):
    r = long_client(resp_server)
    message = error_of(lambda: r.eval("local s = 'x' while true do s = s .. s end", 0))
    assert message.startswith("Error running script "), message
    assert message.endswith("not enough memory"), message
    # pcall cannot swallow the cap either, and the server goes on.
    swallowing = "local s = 'x' pcall(function() while true do s = s .. s end end) return 'no'"
    assert "not enough memory" in error_of(lambda: r.eval(swallowing, 0))
    assert r.eval("return 1", 0) == 1


def test_config_get_reports_the_busy_threshold(resp_server):
    r = resp_server.redis()
    assert r.config_get("busy-reply-threshold") == {"busy-reply-threshold": "5000"}
    assert r.config_get("lua-time-limit") == {"lua-time-limit": "5000"}


# -- the same bytes as redis-server ---------------------------------------------------------------

# Scripts whose replies redis-server 7.0 and Osprey give byte for byte (see redis-mapping.md for
# where Lua 5.4 differs from Redis's 5.1: none of these touch it). Each is (script, keys, args).
SCRIPTS = [
    ("return 1", [], []),
    ("return {1, 2, 3.7, 'x', false, true, nil, 5}", [], []),
    ("return -3.9", [], []),
    ("return nil", [], []),
    ("return false", [], []),
    ("return true", [], []),
    ("return {}", [], []),
    ("return {{1, {2}}, 'a'}", [], []),
    ("return redis.status_reply('FINE')", [], []),
    ("return redis.error_reply('My Error')", [], []),
    ("return redis.error_reply('oops')", [], []),
    ("return redis.error_reply('-CODE with text')", [], []),
    ("return {err = 'bare'}", [], []),
    ("return {ok = 'line\\nbreak'}", [], []),
    ("return redis.call('SET', KEYS[1], ARGV[1])", ["k"], ["v"]),
    ("return redis.call('GET', KEYS[1])", ["k"], []),
    ("return redis.call('GET', 'missing')", [], []),
    ("return redis.call('INCR', KEYS[1])", ["k"], []),
    ("return redis.pcall('INCR', KEYS[1])", ["k"], []),
    ("return {pcall(redis.call, 'nosuch')}", [], []),
    ("return redis.call('nosuch')", [], []),
    ("return redis.call('get')", [], []),
    ("return redis.pcall('set', 'a')", [], []),
    ("return redis.call('multi')", [], []),
    ("return redis.call()", [], []),
    ("return redis.call('set', {}, 1)", [], []),
    ("return redis.call('RPUSH', KEYS[1], 1, 2.5, 'x')", ["l"], []),
    ("return redis.call('LRANGE', KEYS[1], 0, -1)", ["l"], []),
    ("return redis.call('HSET', KEYS[1], 'f', 'v')", ["h"], []),
    ("return redis.call('HGETALL', KEYS[1])", ["h"], []),
    ("redis.setresp(3) return redis.call('HGETALL', KEYS[1])", ["h"], []),
    ("redis.setresp(3) return {double = 1.5}", [], []),
    ("redis.setresp(3) return true", [], []),
    ("redis.setresp(3) return {map = {a = 1}}", [], []),
    ("redis.setresp(3) return redis.call('GET', 'missing')", [], []),
    ("redis.setresp(5)", [], []),
    ("return {KEYS[1], KEYS[2], ARGV[1], #ARGV}", ["a", "b"], ["c", "d"]),
    ("x = 5 return 1", [], []),
    ("return y", [], []),
    ("error('boom')", [], []),
    ("error({err = 'MY x'})", [], []),
    ("return nil + 1", [], []),
    ("local t = {} t.f()", [], []),
    ("local a; return a .. 'x'", [], []),
    ("return {pcall(function() local t = {} return t.x.y end)}", [], []),
    ("local g = getmetatable(_G) g.__index = {}", [], []),
    ("getmetatable('').__index = function() return 1 end", [], []),
    ("return cjson.encode({1, 2, {a = 1}, 'q\"/'})", [], []),
    ("return cjson.encode({})", [], []),
    ("return cjson.decode('[1, 2, {\"a\": [true, false]}]')[3].a[1]", [], []),
    ("return cmsgpack.pack(0.1, -1099511627776, 2^40, 1.5, 127, -32, -33, 300, 70000)", [], []),
    ("return cmsgpack.pack('abc', string.rep('x', 40), true, false, nil, {}, {1, {2, 'x'}})", [], []),
    ("return cmsgpack.pack({[3] = 1}, {[1.5] = 'a'})", [], []),
    ("local a = {} a[1] = a return cmsgpack.pack(a)", [], []),
    ("return {cmsgpack.unpack(cmsgpack.pack(1, 'two', {3, 4}, -5, 2^40))}", [], []),
    ("local t = cmsgpack.unpack(cmsgpack.pack({a = {1, 2}})) return t.a", [], []),
    ("return {cmsgpack.unpack_one(cmsgpack.pack('a', 'b'), 0)}", [], []),
    ("return {cmsgpack.unpack_limit(cmsgpack.pack('a', 'b', 'c'), 2, 0)}", [], []),
    ("return {cmsgpack.unpack_limit(cmsgpack.pack('a', 'b', 'c'), 5, 2)}", [], []),
    ("return cmsgpack.unpack(ARGV[1])", [], ["\x93\x01\xa2hi\xcb\x3f\xb9\x99\x99\x99\x99\x99\x9a"]),
    ("return {pcall(cmsgpack.unpack, ARGV[1])}", [], ["\xa5ab"]),
    ("return {pcall(cmsgpack.unpack, ARGV[1])}", [], ["\xc7\x01"]),
    ("return {pcall(cmsgpack.unpack_one, 'a', 5)}", [], []),
    ("return cmsgpack.pack()", [], []),
    ("return {cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_max_depth(2)}", [], []),
    ("cjson.encode_max_depth(1) return {pcall(cjson.encode, {1, {2}})}", [], []),
    ("cjson.decode_max_depth(1) return {pcall(cjson.decode, '{\"obj\": {\"a\": [1]}}')}", [], []),
    ("return cjson.encode_max_depth(0)", [], []),
    ("return {cjson.encode_invalid_numbers(), pcall(cjson.encode, {0/0})}", [], []),
    ("cjson.encode_invalid_numbers(true) return cjson.encode({0/0, 1/0, -1/0})", [], []),
    ("return {cjson.encode_invalid_numbers('null'), cjson.encode({1/0})}", [], []),
    ("return cjson.encode_invalid_numbers('maybe')", [], []),
    ("return cjson.encode_keep_buffer('maybe')", [], []),
    ("return bit.band(0xff, 0x0f)", [], []),
    ("return bit.tohex(-1)", [], []),
    ("return bit.lshift(1, 31)", [], []),
    ("return bit.rshift(-1, 28)", [], []),
    ("return bit.arshift(-256, 4)", [], []),
    ("return struct.pack('>i2', 258)", [], []),
    ("return struct.unpack('>i2', ARGV[1])", [], ["\x01\x02"]),
    ("return redis.sha1hex('')", [], []),
    ("return redis.sha1hex()", [], []),
    ("return redis.log()", [], []),
    ("return redis.log('x', 'y')", [], []),
    ("return unpack({1, 2, 3})", [], []),
    ("return string.rep('ab', 3)", [], []),
    ("return table.concat({'a', 'b'}, ',')", [], []),
    ("return redis.REDIS_VERSION ~= nil", [], []),
    ("return pcall(error)", [], []),
    # Coroutines (Lua 5.1's API, which 5.4 keeps).
    ("local co = coroutine.create(function(a) local b = coroutine.yield(a + 1) return b * 2 end) "
     "local _, x = coroutine.resume(co, 1) local _, y = coroutine.resume(co, 10) "
     "return {x, y, coroutine.status(co)}", [], []),
    ("return {coroutine.wrap(function() coroutine.yield(7) end)()}", [], []),
    ("local ok, e = coroutine.resume(coroutine.create(function() error('boom') end)) "
     "return {tostring(ok), e}", [], []),
    ("return coroutine.resume(coroutine.create(function() return redis.call('SET', KEYS[1], 'c') end))",
     ["k"], []),
    ("getmetatable('').__index = function() return 1 end", [], []),
]


def test_scripts_reply_byte_for_byte_as_redis_server(resp_server, redis_server_port):  # noqa: F811
    for protocol in (2, 3):
        ours, theirs = Raw(resp_server.resp_port, protocol), Raw(redis_server_port, protocol)
        try:
            for script, keys, args in SCRIPTS:
                command = ["EVAL", script, str(len(keys)), *keys, *args]
                expected = theirs(*command)
                got = ours(*command)
                assert got == expected, f"RESP{protocol} {script!r}"
            for command in (["EVAL", "return 1", "2", "k"], ["EVAL", "return 1", "-1"],
                             ["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"],
                             ["SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"],
                             ["SCRIPT", "FLUSH", "bogus"], ["SCRIPT", "KILL"],
                             ["SCRIPT", "LOAD", "return 1"]):
                assert ours(*command) == theirs(*command), f"RESP{protocol} {command}"
        finally:
            ours.close()
            theirs.close()


def test_cjson_encode_keep_buffer_takes_and_answers_its_setting_as_redis_does(r, redis_server_port):
    """scripting.tcl "JSON smoke test" calls cjson.encode_keep_buffer(false), which Osprey's
    cjson lacked: it sets lua-cjson's keep-the-buffer option (true, "on", "off") and answers the
    setting; an unknown option is refused."""
    reference = redis.Redis(host="127.0.0.1", port=redis_server_port)
    script = ("return {cjson.encode_keep_buffer(), cjson.encode_keep_buffer(false), "
              "cjson.encode_keep_buffer('on'), cjson.encode({1, 'x'})}")
    assert r.eval(script, 0) == reference.eval(script, 0) == [1, None, 1, b'[1,"x"]']
    ours = error_of(lambda: r.eval("return cjson.encode_keep_buffer('maybe')", 0))
    assert "bad argument #1 to 'encode_keep_buffer'" in ours
    assert "bad argument #1 to 'encode_keep_buffer'" in error_of(
        lambda: reference.eval("return cjson.encode_keep_buffer('maybe')", 0))
    reference.close()


def test_sort_by_a_constant_in_a_script_orders_a_set_as_redis_does(r, redis_server_port, key):
    """scripting.tcl "SORT BY <constant> output gets ordered for scripting": a set that SORT
    would leave in its own order (BY a pattern without `*`) comes out sorted as text when a
    script asks, so that the script's reply does not depend on how the set is laid out; a list
    keeps its order. redis-server answers the same."""
    members = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "l", "m", "n", "o", "p", "q", "r", "s",
               "t", "u", "v", "z", "aa", "aaa", "azz"]
    reference = redis.Redis(host="127.0.0.1", port=redis_server_port)
    for client in (r, reference):
        client.delete(key, key + ":list")
        client.sadd(key, *members)
        client.rpush(key + ":list", "b", "a", "c")
    scripts = ["return redis.call('sort', KEYS[1], 'by', '_')",
               "return redis.call('sort', KEYS[1], 'by', '_', 'get', '#', 'get', '_:*')",
               "return redis.call('sort', KEYS[1], 'by', 'nosort', 'desc', 'limit', 0, 3)",
               "return redis.call('sort', KEYS[1] .. ':list', 'by', '_')"]
    for script in scripts:
        assert r.eval(script, 1, key) == reference.eval(script, 1, key), script
    assert r.eval(scripts[0], 1, key) == [m.encode() for m in sorted(members)]
    assert r.eval(scripts[3], 1, key) == [b"b", b"a", b"c"]
    reference.close()


def test_a_blocking_pop_in_a_script_is_refused_as_redis_7_0_refuses_it_and_a_published_message_is_delivered(
        r, resp_server, redis_server_port, key):
    """Redis 7.0 flags BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN and BZPOPMAX `noscript`: a
    script that calls one gets "not allowed" (7.2 ran them as their non-blocking forms, and
    Osprey did too). BLMPOP, BZMPOP and XREAD ... BLOCK were never refused: they answer at
    once, even with 0 (wait for ever). Both servers answer each the same. A PUBLISH from a
    script reaches a subscriber."""
    reference = redis.Redis(host="127.0.0.1", port=redis_server_port)
    calls = [
        ("BLPOP", "KEYS[1]", "0"), ("BRPOP", "KEYS[1]", "0"),
        ("BLMOVE", "KEYS[1]", "KEYS[1]", "'LEFT'", "'RIGHT'", "0"),
        ("BRPOPLPUSH", "KEYS[1]", "KEYS[1]", "0"), ("BZPOPMIN", "KEYS[1]", "0"),
        ("BZPOPMAX", "KEYS[1]", "0"),
    ]
    for name, *arguments in calls:
        script = f"return redis.call('{name}', {', '.join(arguments)})"
        ours = error_of(lambda: r.eval(script, 1, key))
        theirs = error_of(lambda: reference.eval(script, 1, key))
        assert ours == theirs, name
        assert ours.startswith("This Redis command is not allowed from script script: "), ours
    # XREAD and XREADGROUP refuse their BLOCK option in a script, by the name as called.
    for script in ("return redis.call('xread', 'BLOCK', 0, 'STREAMS', KEYS[1], '$')",
                   "return redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'BLOCK', 0, 'STREAMS', KEYS[1], '>')"):
        ours = error_of(lambda: r.eval(script, 1, key))
        assert ours == error_of(lambda: reference.eval(script, 1, key)), script
        assert "command is not allowed with BLOCK option from scripts" in ours, ours
    started = time.monotonic()
    for script in ("return redis.call('BLMPOP', 0, 1, KEYS[1], 'LEFT')",
                   "return redis.call('BZMPOP', 0, 1, KEYS[1], 'MIN')"):
        assert r.eval(script, 1, key) is None, script
        assert reference.eval(script, 1, key) is None, script
    assert time.monotonic() - started < 2
    r.rpush(key, "a")
    assert r.eval("return redis.call('BLMPOP', 0, 1, KEYS[1], 'LEFT')", 1, key) == [key.encode(), [b"a"]]
    reference.close()
    subscriber = resp_server.redis().pubsub()
    subscriber.subscribe("script-news")
    assert subscriber.get_message(timeout=5)["type"] == "subscribe"
    assert r.eval("return redis.call('PUBLISH', ARGV[1], ARGV[2])", 0, "script-news", "hi") == 1
    message = subscriber.get_message(timeout=5)
    assert (message["channel"], message["data"]) == (b"script-news", b"hi")
    subscriber.close()

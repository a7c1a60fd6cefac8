"""Redis functions through redis-py (FUNCTION LOAD | LIST | DELETE | FLUSH | DUMP | RESTORE |
KILL | STATS, FCALL, FCALL_RO): libraries and their flags, Redis's error texts byte for byte
against Debian's redis-server 7.0, FUNCTION DUMP payloads moved both ways between redis-server
and Osprey, and a runaway function answered with BUSY to others and stopped by FUNCTION KILL.

Libraries belong to the node, not to a key: every test starts with FUNCTION FLUSH.
"""

from __future__ import annotations

import time

import pytest
import redis

import harness
from test_resp_scripting import error_of, long_client, run_in_thread
from test_resp_zsets import Raw

LIBRARY = """#!lua name=mylib
local function set_and_echo(keys, args)
  redis.call('SET', keys[1], args[1])
  return redis.call('GET', keys[1])
end
redis.register_function('set_and_echo', set_and_echo)
redis.register_function{
  function_name = 'readonly_get',
  callback = function(keys) return redis.call('GET', keys[1]) end,
  flags = {'no-writes'},
  description = 'reads a key',
}
"""


@pytest.fixture
def key():
    return harness.unique("fn")


@pytest.fixture
def fr(r):
    """`r` with no libraries loaded."""
    r.function_flush()
    return r


def test_a_library_loads_and_its_functions_run_with_keys_and_arguments(fr, key):
    assert fr.function_load(LIBRARY) in (b"mylib", "mylib")
    assert fr.fcall("set_and_echo", 1, key, "value") == b"value"
    assert fr.fcall_ro("readonly_get", 1, key) == b"value"
    assert fr.get(key) == b"value"
    # The keys and arguments are the callback's two arguments; there are no KEYS/ARGV globals.
    fr.function_load("#!lua name=args\nredis.register_function('echo', "
                     "function(k, a) return {#k, #a, k[1], a[2]} end)")
    assert fr.fcall("echo", 1, "k1", "a1", "a2") == [1, 2, b"k1", b"a2"]


def test_function_list_describes_libraries_functions_flags_and_code(fr):
    fr.function_load(LIBRARY)
    [library] = fr.function_list(withcode=True)
    if isinstance(library, list):  # RESP2: a flat list of fields and values
        library = dict(zip(library[::2], library[1::2]))
    assert library[b"library_name"] == b"mylib"
    assert library[b"engine"] == b"LUA"
    assert library[b"library_code"] == LIBRARY.encode()
    functions = {}
    for function in library[b"functions"]:
        if isinstance(function, list):
            function = dict(zip(function[::2], function[1::2]))
        functions[function[b"name"]] = function
    assert functions[b"set_and_echo"][b"description"] is None
    assert list(functions[b"set_and_echo"][b"flags"]) == []
    assert functions[b"readonly_get"][b"description"] == b"reads a key"
    assert [bytes(f) if not isinstance(f, str) else f.encode()
            for f in functions[b"readonly_get"][b"flags"]] == [b"no-writes"]
    assert fr.function_list(library="my*") != []
    assert fr.function_list(library="other*") == []


def test_delete_flush_and_replace(fr, key):
    fr.function_load(LIBRARY)
    assert error_of(lambda: fr.function_load(LIBRARY)) == "Library 'mylib' already exists"
    replaced = LIBRARY.replace("return redis.call('GET', keys[1])\nend", "return 'replaced'\nend")
    fr.function_load(replaced, replace=True)
    assert fr.fcall("set_and_echo", 1, key, "v") == b"replaced"
    assert fr.function_delete("mylib") in (True, b"OK", "OK")
    assert error_of(lambda: fr.fcall("set_and_echo", 1, key, "v")) == "Function not found"
    assert error_of(lambda: fr.function_delete("mylib")) == "Library not found"
    fr.function_load(LIBRARY)
    assert fr.function_flush() in (True, b"OK", "OK")
    assert fr.function_list() == []


def test_fcall_ro_runs_only_functions_flagged_no_writes(fr, key):
    fr.function_load(LIBRARY)
    assert error_of(lambda: fr.fcall_ro("set_and_echo", 1, key, "v")) == (
        "Can not execute a script with write flag using *_ro command."
    )
    fr.function_load("#!lua name=sneaky\nredis.register_function{function_name='sneaky', "
                     "callback=function(k) return redis.call('SET', k[1], 'x') end, "
                     "flags={'no-writes'}}")
    assert error_of(lambda: fr.fcall("sneaky", 1, key)).startswith(
        "Write commands are not allowed from read-only scripts."
    )


def test_register_function_outside_the_load_fails(fr):
    # At run time the `redis` table has no register_function (Lua 5.4 words the call of a nil
    # field differently from Redis's 5.1, hence no byte comparison).
    fr.function_load("#!lua name=n\nlocal function f() redis.register_function('z', "
                     "function() end) end\nredis.register_function('y', function() f() "
                     "return 1 end)")
    message = error_of(lambda: fr.fcall("y", 0))
    assert "register_function" in message and "a nil value" in message, message
    assert message.endswith("script: y, on @user_function:2."), message


def test_a_library_that_never_ends_loading_is_stopped(fr):
    message = error_of(lambda: fr.function_load("#!lua name=endless\nwhile true do end"))
    assert message == "Error registering functions: ERR FUNCTION LOAD timeout"
    assert fr.function_list() == []


# -- the same bytes as redis-server ---------------------------------------------------------------

# Command sequences whose replies redis-server 7.0 and Osprey give byte for byte. Each list
# starts from no libraries; each library holds one function, since Redis lists a library's
# functions in its hash table's order.
SEQUENCES = [
    [["FUNCTION", "LOAD", "return 1"]],
    [["FUNCTION", "LOAD", "#!lua\nreturn 1"]],
    [["FUNCTION", "LOAD", "#!lua name=x"]],
    [["FUNCTION", "LOAD", "#!js name=x\nreturn 1"]],
    [["FUNCTION", "LOAD", "#!lua name=x foo=bar\nreturn 1"]],
    [["FUNCTION", "LOAD", "#!lua name=lib-3\nreturn 1"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nlocal x = 1"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nlocal x = = 1"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nredis.call('ping')"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nerror('boom')"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('g')"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('g', 1)"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function(1, 2, 3)"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('g-h', function() end)"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function{function_name='g'}"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function{callback=function() end}"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function{function_name='g', "
                          "callback=function() end, flags={'bad'}}"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function{function_name='g', "
                          "callback=function() end, flags='no-writes'}"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function{function_name='g', "
                          "callback=function() end, other=1}"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('g', function() end)\n"
                          "redis.register_function('g', function() end)"]],
    [["FUNCTION", "LOAD", "BOGUS", "#!lua name=x\nreturn 1"]],
    [["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('g', function(k, a) "
                          "return redis.call('SET', k[1], a[1]) end)"],
     ["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('g', function() end)"],
     ["FUNCTION", "LOAD", "#!lua name=y\nredis.register_function('g', function() end)"],
     ["FUNCTION", "LOAD", "REPLACE", "#!lua name=x\nredis.register_function('g', "
                                     "function() return 2 end)"],
     ["FCALL", "g", "0"], ["FCALL", "g", "x"], ["FCALL", "g", "5"], ["FCALL", "g", "-1"],
     ["FCALL_RO", "g", "0"], ["FCALL", "nope", "0"],
     ["FUNCTION", "LIST"], ["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "x*"],
     ["FUNCTION", "LIST", "LIBRARYNAME"], ["FUNCTION", "LIST", "BOGUS"],
     ["FUNCTION", "STATS"], ["FUNCTION", "DELETE", "nope"], ["FUNCTION", "DELETE", "x"],
     ["FUNCTION", "LIST"]],
    [["FUNCTION", "LOAD", "#!lua name=e\nredis.register_function{function_name='e', "
                          "callback=function() return error('bad') end, flags={'no-writes', "
                          "'allow-stale'}, description='d'}"],
     ["FCALL", "e", "0"], ["FCALL_RO", "e", "0"], ["FUNCTION", "LIST"]],
    [["FUNCTION", "LOAD", "#!lua name=w\nredis.register_function('w', function() "
                          "return redis.call('nosuch') end)"],
     ["FCALL", "w", "0"]],
    [["FUNCTION", "LOAD", "#!lua name=v\nredis.register_function('v', function() "
                          "return KEYS end)"],
     ["FCALL", "v", "0"]],
    [["FUNCTION", "LOAD", "#!lua name=t\nredis.register_function('t', function(k, a) "
                          "return {redis.status_reply('FINE'), #a, a[1], tonumber(a[2]) + 1} "
                          "end)"],
     ["FCALL", "t", "0", "x", "41"]],
    [["FUNCTION", "LOAD", "#!lua name=c\nredis.register_function('MyFunc', function() return 1 end)"],
     ["FCALL", "myfunc", "0"], ["FCALL", "MYFUNC", "0"], ["FCALL_RO", "MyFunc", "0"],
     ["FUNCTION", "LOAD", "#!lua name=d\nredis.register_function('myFUNC', function() end)"],
     ["FUNCTION", "LOAD", "#!lua name=\"q\"\nredis.register_function('q', function() end)"],
     ["FUNCTION", "LOAD", "#!LUA name='Q'\nredis.register_function('r', function() end)"],
     ["FUNCTION", "LOAD", "#! name=e\nredis.register_function('e', function() end)"],
     ["FUNCTION", "LOAD", "#!lua name=\"e\nredis.register_function('e', function() end)"],
     ["FUNCTION", "LOAD", "#!lua name=\"e\"x\nredis.register_function('e', function() end)"],
     ["FUNCTION", "LOAD", "#!\"lua\" name=\\x41\nredis.register_function('s', function() end)"],
     ["FUNCTION", "LIST", "LIBRARYNAME", "C"]],
    [["FUNCTION", "FLUSH", "BOGUS"], ["FUNCTION", "FLUSH", "SYNC", "X"],
     ["FUNCTION", "FLUSH", "ASYNC"], ["FUNCTION", "KILL"], ["FUNCTION", "BOGUS"],
     ["FUNCTION", "DELETE"], ["FUNCTION", "RESTORE", "bad"],
     ["FUNCTION", "RESTORE", "bad", "BOGUS"], ["FUNCTION", "RESTORE", "a", "b", "c"],
     ["FUNCTION", "DUMP"], ["FUNCTION", "HELP"]],
]


def test_function_names_match_in_any_case_and_the_library_line_splits_as_redis_splits_it(fr):
    """functions.tcl: FCALL finds a function whatever the case of its name (Redis 7.0's function
    dictionary ignores case), so two libraries may not register names that differ only in case;
    the `#!` line is split as Redis splits arguments, so a quoted name is the name without its
    quotes, and `#! name=x` names the engine "" (Osprey took `name=x` for the engine)."""
    fr.function_load("#!lua name=casing\nredis.register_function('MyFunc', function() return 'hi' end)")
    assert fr.fcall("myfunc", 0) == fr.fcall("MYFUNC", 0) == b"hi"
    assert error_of(lambda: fr.function_load(
        "#!lua name=other\nredis.register_function('myfunc', function() end)")) == "Function myfunc already exists"
    assert fr.function_load('#!lua name="foo"\nredis.register_function(\'foo\', function() return 1 end)') \
        in (b"foo", "foo")
    assert fr.fcall("FOO", 0) == 1
    assert error_of(lambda: fr.function_load(
        "#! name=test\nredis.register_function('bar', function() end)")) == "Engine '' not found"
    assert error_of(lambda: fr.function_load(
        '#!lua name="bar\nredis.register_function(\'bar\', function() end)')) == "Invalid library metadata"
    fr.function_delete("casing")
    assert error_of(lambda: fr.fcall("myfunc", 0)) == "Function not found"


def test_functions_reply_byte_for_byte_as_redis_server(resp_server, redis_server_port):  # noqa: F811
    for protocol in (2, 3):
        ours, theirs = Raw(resp_server.resp_port, protocol), Raw(redis_server_port, protocol)
        try:
            for sequence in SEQUENCES:
                assert ours("FUNCTION", "FLUSH") == theirs("FUNCTION", "FLUSH")
                for command in sequence:
                    expected = theirs(*command)
                    got = ours(*command)
                    assert got == expected, f"RESP{protocol} {command}"
        finally:
            ours.close()
            theirs.close()


def test_function_dumps_move_both_ways_between_redis_server_and_osprey(resp_server,
                                                                        redis_server_port):  # noqa: F811
    """A dump of redis-server (its library codes LZF-compressed) restores into Osprey, and
    Osprey's dump restores into redis-server; each then runs the other's functions."""
    ours = resp_server.redis()
    theirs = redis.Redis(host="127.0.0.1", port=redis_server_port)
    for server in (ours, theirs):
        server.function_flush()
    theirs.function_load(LIBRARY)
    ours.function_restore(theirs.function_dump())
    assert ours.fcall("set_and_echo", 1, "fn:k", "from redis") == b"from redis"
    ours.function_load("#!lua name=osprey_lib\nredis.register_function('from_osprey', "
                       "function() return 'hello from osprey' end)")
    theirs.function_flush()
    theirs.function_restore(ours.function_dump())
    assert theirs.fcall("from_osprey", 0) == b"hello from osprey"
    assert theirs.fcall("set_and_echo", 1, "fn:k", "back") == b"back"
    # Restoring over existing libraries: APPEND refuses a name taken, REPLACE takes it, FLUSH
    # starts over; a corrupt payload is refused by its checksum and loads nothing.
    payload = theirs.function_dump()
    for server in (ours, theirs):
        # Each names the first library of the payload it meets (Redis in its hash order).
        assert error_of(lambda: server.function_restore(payload)) in (
            "Library mylib already exists", "Library osprey_lib already exists"
        )
        assert server.function_restore(payload, "REPLACE") in (True, b"OK", "OK")
        assert server.function_restore(payload, "FLUSH") in (True, b"OK", "OK")
        corrupt = bytearray(payload)
        corrupt[5] ^= 0xFF
        assert error_of(lambda: server.function_restore(bytes(corrupt), "FLUSH")) == (
            "DUMP payload version or checksum are wrong"
        )
        assert len(server.function_list()) == 2


def crc64(data: bytes) -> int:
    """Redis's CRC-64 (Jones polynomial, reflected, no final xor)."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x95AC9329AC4BC9B5 if crc & 1 else crc >> 1
    return crc


def with_footer(body: bytes, version: int = 10) -> bytes:
    """`body` with an RDB version and a checksum that holds, as FUNCTION DUMP ends."""
    signed = body + version.to_bytes(2, "little")
    return signed + crc64(signed).to_bytes(8, "little")


# Payloads whose footer holds but whose body is hostile: lengths declared far past the bytes
# there (plain and LZF), a value that is not a library, the pre-release function record, a
# library whose code is not a library.
HOSTILE_BODIES = [
    b"\xf5\x81" + b"\xff" * 8,
    b"\xf5\x80\x7f\xff\xff\xff",
    b"\xf5\xc3\x80\xff\xff\xff\xff\x80\xff\xff\xff\xff",
    b"\xf5\xc3\x05\x0a\x00\x01\x02\x03\x04",
    b"\x00\x01a",
    b"\xf5\x08not code",
    b"\xf5",
]


def test_hostile_restore_payloads_are_refused_as_redis_server_refuses_them(
        resp_server, redis_server_port):  # noqa: F811
    ours, theirs = Raw(resp_server.resp_port, 2), Raw(redis_server_port, 2)
    try:
        assert ours("FUNCTION", "FLUSH") == theirs("FUNCTION", "FLUSH")
        for body in HOSTILE_BODIES:
            for payload in (with_footer(body), with_footer(body, version=99), body):
                command = ["FUNCTION", "RESTORE", payload]
                assert ours(*command) == theirs(*command), repr(payload)
        # Redis 7.2 (as Osprey answers) refuses the pre-release record outright; 7.0 reads it.
        assert ours("FUNCTION", "RESTORE", with_footer(b"\xf6\x01a")) == (
            b"-ERR Pre-GA function format not supported\r\n"
        )
        assert ours("FUNCTION", "LIST") == b"*0\r\n"
        assert ours("PING") == b"+PONG\r\n"
    finally:
        ours.close()
        theirs.close()


# -- runaway functions ----------------------------------------------------------------------------


def test_a_looping_function_gets_others_busy_and_function_kill_stops_it(resp_server, key):
    """A function loops forever. Past busy-reply-threshold another client gets Redis's BUSY
    naming FUNCTION KILL; FUNCTION STATS names the running function; SCRIPT KILL may not stop
    it, FUNCTION KILL does, and the other client is served again."""
    admin = resp_server.redis()
    admin.function_flush()
    admin.function_load("#!lua name=loop\nredis.register_function('spin', "
                        "function() while true do end end)")
    admin.config_set("busy-reply-threshold", 300)
    try:
        looping = long_client(resp_server)
        thread, outcome = run_in_thread(lambda: looping.fcall("spin", 0))
        other = resp_server.redis()
        deadline = time.monotonic() + 10
        while True:
            try:
                other.set(key, "v")
            except redis.ResponseError as error:
                message = str(error)
                break
            assert time.monotonic() < deadline, "never BUSY"
            time.sleep(0.05)
        assert "FUNCTION KILL" in message, message
        stats = admin.function_stats()
        running = stats[b"running_script"] if isinstance(stats, dict) else stats[1]
        if isinstance(running, list):
            running = dict(zip(running[::2], running[1::2]))
        assert running[b"name"] == b"spin"
        assert [part.lower() for part in running[b"command"]] == [b"fcall", b"spin", b"0"]
        assert "FUNCTION KILL" in error_of(lambda: admin.script_kill())
        assert admin.function_kill() in (True, b"OK", "OK")
        thread.join(timeout=10)
        assert not thread.is_alive()
        assert "Script killed by user with SCRIPT KILL..." in str(outcome.get("error")), outcome
        assert other.set(key, "v") is True
    finally:
        admin.config_set("busy-reply-threshold", 5000)

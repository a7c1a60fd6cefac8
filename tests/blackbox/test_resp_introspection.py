"""COMMAND GETKEYS and COMMAND GETKEYSANDFLAGS against Debian's redis-server (keys at fixed
positions, after a key count, after a keyword, in subcommands, and Redis's errors), and DEBUG
DIGEST, DIGEST-VALUE and RELOAD: digests that change with the data and only with it.
"""

from __future__ import annotations

import shlex

import pytest
import redis

import harness
from test_resp_zsets import Raw

GETKEYS = """
COMMAND GETKEYS get key
COMMAND GETKEYS set k v EX 10
COMMAND GETKEYS mset k1 v1 k2 v2
COMMAND GETKEYS del a b c
COMMAND GETKEYS lcs key1 key2
COMMAND GETKEYS blpop a b 0
COMMAND GETKEYS lmove a b left right
COMMAND GETKEYS zunionstore target 3 a b c WEIGHTS 1 2 3
COMMAND GETKEYS zunionstore target 3 a b
COMMAND GETKEYS zunionstore target 0 a
COMMAND GETKEYS zinterstore target -1 a
COMMAND GETKEYS zunion 2 a b WITHSCORES
COMMAND GETKEYS zdiff 1 a
COMMAND GETKEYS zintercard 2 a b LIMIT 1
COMMAND GETKEYS sintercard 2 a b
COMMAND GETKEYS zrangestore dst src 0 -1
COMMAND GETKEYS eval "return 1" 1 key
COMMAND GETKEYS eval "return 1" 0
COMMAND GETKEYS eval "return 1" 3 key
COMMAND GETKEYS evalsha abc 2 k1 k2 arg
COMMAND GETKEYS fcall test 1 x foo
COMMAND GETKEYS fcall_ro test 1 x foo
COMMAND GETKEYS lmpop 2 a b LEFT
COMMAND GETKEYS blmpop 0 2 a b LEFT
COMMAND GETKEYS sort abc store def
COMMAND GETKEYS sort abc store invalid store stillbad store def
COMMAND GETKEYS sort abc by store get store
COMMAND GETKEYS sort_ro abc
COMMAND GETKEYS xread COUNT 2 STREAMS s1 s2 0 0
COMMAND GETKEYS xread STREAMS s1 s2 0
COMMAND GETKEYS xreadgroup GROUP g c STREAMS s >
COMMAND GETKEYS memory usage key
COMMAND GETKEYS object encoding key
COMMAND GETKEYS xgroup create key groupname $
COMMAND GETKEYS ping
COMMAND GETKEYS ping hello
COMMAND GETKEYS object help
COMMAND GETKEYS get
COMMAND GETKEYS get a b
COMMAND GETKEYS nosuchcommand a
COMMAND GETKEYS
COMMAND GETKEYSANDFLAGS set k1 v1
COMMAND GETKEYSANDFLAGS mset k1 v1 k2 v2
COMMAND GETKEYSANDFLAGS LMOVE k1 k2 left right
COMMAND GETKEYSANDFLAGS sort k1 store k2
COMMAND GETKEYSANDFLAGS get k1
COMMAND GETKEYSANDFLAGS zunionstore d 2 a b
COMMAND GETKEYSANDFLAGS ping now
"""


@pytest.mark.parametrize("protocol", [2, 3])
def test_getkeys_answers_as_redis_server(resp_server, redis_server_port, protocol):
    ours, theirs = Raw(resp_server.resp_port, protocol), Raw(redis_server_port, protocol)
    try:
        for line in GETKEYS.strip().splitlines():
            words = shlex.split(line)
            assert ours(*words) == theirs(*words), f"RESP{protocol} {line}"
    finally:
        ours.close()
        theirs.close()


def test_getkeys_of_many_keys_returns_them_all(resp_server, redis_server_port):
    keys = [f"key{i}" for i in range(1, 261)]
    line = ["COMMAND", "GETKEYS", "ZUNIONSTORE", "target", str(len(keys)), *keys]
    ours, theirs = Raw(resp_server.resp_port, 2), Raw(redis_server_port, 2)
    try:
        got = ours(*line)
        assert got == theirs(*line)
        assert got.startswith(b"*261\r\n$6\r\ntarget\r\n$4\r\nkey1\r\n")
    finally:
        ours.close()
        theirs.close()


ZERO = "0" * 40


def digest(r) -> str:
    value = r.execute_command("DEBUG", "DIGEST")
    return value.decode() if isinstance(value, bytes) else value


def value_digests(r, *keys) -> list[str]:
    values = r.execute_command("DEBUG", "DIGEST-VALUE", *keys)
    return [v.decode() if isinstance(v, bytes) else v for v in values]


def test_digests_follow_the_data_and_only_the_data():
    server = harness.start_server(
        service={},
        namespaces=[harness.namespace("test", allow_ttl_without_nsup=True)],
        tag="osprey-digest",
    )
    try:
        r = server.redis()
        assert digest(r) == ZERO
        assert value_digests(r, "nosuch") == [ZERO]
        r.set("s", "v")
        r.zadd("z", {"a": 1, "b": 2})
        r.sadd("set", *[f"m{i}" for i in range(50)])
        r.hset("h", mapping={f"f{i}": i for i in range(20)})
        r.rpush("l", "x", "y")
        full = digest(r)
        assert len(full) == 40 and full != ZERO
        assert digest(r) == full
        before = value_digests(r, "s", "z", "set", "h", "l", "nosuch")
        assert len(set(before)) == 6 and before[-1] == ZERO
        # Rebuilding the same set in another order gives the same digest.
        r.delete("set")
        r.sadd("set", *[f"m{i}" for i in reversed(range(50))])
        assert value_digests(r, "set") == [before[2]] and digest(r) == full
        # Any change changes it: a score, a member, an expiry, a new key.
        r.zadd("z", {"a": 1.5})
        assert value_digests(r, "z") != [before[1]] and digest(r) != full
        r.zadd("z", {"a": 1})
        assert digest(r) == full
        r.expire("s", 1000)
        assert digest(r) != full
        r.persist("s")
        assert digest(r) == full
        r.set("other", "v")
        assert digest(r) != full
        r.delete("other")
        assert digest(r) == full
        # RELOAD checks its options and keeps the data as it is.
        assert r.execute_command("DEBUG", "RELOAD") in (b"OK", "OK", True)
        assert r.execute_command("DEBUG", "RELOAD", "NOSAVE", "noflush", "MERGE") in (b"OK", "OK", True)
        with pytest.raises(redis.ResponseError, match="only supports the MERGE, NOFLUSH and NOSAVE"):
            r.execute_command("DEBUG", "RELOAD", "NOW")
        assert digest(r) == full
        assert r.execute_command("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1K") in (b"OK", "OK", True)
        with pytest.raises(redis.ResponseError, match="memory value"):
            r.execute_command("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5gb")
        r.flushall()
        assert digest(r) == ZERO
    finally:
        server.stop()

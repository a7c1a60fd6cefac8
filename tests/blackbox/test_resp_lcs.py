"""LCS over RESP2 and RESP3, byte for byte against Debian's redis-server (the subsequence, LEN,
IDX with MINMATCHLEN and WITHMATCHLEN, error texts and their order), and Osprey's bound on the
table LCS builds: strings whose table would pass it are refused at once, and the server goes
on serving.
"""

from __future__ import annotations

import shlex

import pytest
import redis

import harness
from test_resp_zsets import Raw

RNA1 = (
    "CACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCGGCTGC"
    "ATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTGCAGGCTGCTTACGG"
)
RNA2 = (
    "ATTAAAGGTTTATACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGTT"
    "GTCACTCGGCTGCATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTG"
)

SCRIPT = f"""
SET {{a}} ohmytext
SET {{b}} mynewtext
SET {{r1}} {RNA1}
SET {{r2}} {RNA2}
SET {{n}} 12345
SET {{m}} 2345
RPUSH {{list}} x
LCS {{a}} {{b}}
LCS {{a}} {{b}} LEN
LCS {{a}} {{b}} IDX
LCS {{a}} {{b}} IDX MINMATCHLEN 4
LCS {{a}} {{b}} IDX MINMATCHLEN 4 WITHMATCHLEN
LCS {{a}} {{b}} idx withmatchlen minmatchlen -3
LCS {{r1}} {{r2}}
LCS {{r1}} {{r2}} LEN
LCS {{r1}} {{r2}} IDX MINMATCHLEN 5 WITHMATCHLEN
LCS {{n}} {{m}}
LCS {{a}} {{missing}}
LCS {{missing}} {{other}} IDX
LCS {{a}} {{a}} IDX WITHMATCHLEN
LCS {{a}} {{b}} LEN IDX
LCS {{a}} {{b}} MINMATCHLEN
LCS {{a}} {{b}} MINMATCHLEN x
LCS {{a}} {{b}} NOSUCH
LCS {{a}} {{list}}
LCS {{list}} {{a}} NOSUCH
LCS {{a}}
"""


@pytest.mark.parametrize("protocol", [2, 3])
def test_replies_are_byte_for_byte_those_of_redis_server(resp_server, redis_server_port, protocol):
    prefix = harness.unique("lcs") + ":"
    ours, theirs = Raw(resp_server.resp_port, protocol), Raw(redis_server_port, protocol)
    try:
        theirs("FLUSHALL")
        for line in SCRIPT.strip().splitlines():
            words = shlex.split(line)
            plain = [w[1:-1] if w.startswith("{") else w for w in words]
            mine = [prefix + w[1:-1] if w.startswith("{") else w for w in words]
            assert ours(*mine) == theirs(*plain), f"RESP{protocol} {line}"
    finally:
        ours.close()
        theirs.close()


def test_a_table_past_the_bound_is_refused_at_once_and_the_server_goes_on(resp_server):
    r = resp_server.redis()
    key = harness.unique("lcsbig")
    # Two strings of 8 KiB: 67 million cells, four times the bound; Redis would build them.
    r.set(key + "a", "a" * 8192)
    r.set(key + "b", "b" * 8192)
    with pytest.raises(redis.ResponseError, match="exceeds Osprey's limit of 16777216 table cells"):
        r.execute_command("LCS", key + "a", key + "b")
    with pytest.raises(redis.ResponseError, match="table cells"):
        r.execute_command("LCS", key + "a", key + "b", "LEN")
    # One string empty: a table of one row, however long the other.
    r.set(key + "big", "x" * 100_000)
    assert r.execute_command("LCS", key + "big", key + "missing") in (b"", "")
    # Just within the bound: answered.
    r.set(key + "c", "ab" * 2047)
    r.set(key + "d", "ba" * 2047)
    assert r.execute_command("LCS", key + "c", key + "d", "LEN") == 4093
    assert r.ping()

"""Filter expressions through the official Python client: a record the filter rejects is left
alone and the command answers FILTERED_OUT (27); a batch row answers 27 for itself; a scan or
query skips it. Expressions also read into and write bins (expression operations)."""

from __future__ import annotations

import aerospike
import pytest
from aerospike import exception as ex
from aerospike_helpers import expressions as exp
from aerospike_helpers.operations import expression_operations as expression_ops
from aerospike_helpers.operations import operations as ops

FILTERED_OUT = 27


def key(uset, k="k"):
    return ("test", uset, k)


def when(expression) -> dict:
    return {"expressions": expression.compile()}


def test_a_get_returns_the_record_only_when_the_filter_passes(client, uset):
    k = key(uset)
    client.put(k, {"a": 5, "s": "x"})
    assert client.get(k, policy=when(exp.GT(exp.IntBin("a"), 3)))[2] == {"a": 5, "s": "x"}
    with pytest.raises(ex.FilteredOut):
        client.get(k, policy=when(exp.GT(exp.IntBin("a"), 7)))
    # A bin of another type, or a missing one, makes the filter unknown: filtered out.
    with pytest.raises(ex.FilteredOut):
        client.get(k, policy=when(exp.Eq(exp.IntBin("s"), 1)))
    with pytest.raises(ex.FilteredOut):
        client.get(k, policy=when(exp.Eq(exp.IntBin("missing"), 1)))


def test_a_filtered_out_write_or_delete_changes_nothing(client, uset):
    k = key(uset)
    client.put(k, {"a": 1})
    reject = when(exp.Eq(exp.IntBin("a"), 2))
    with pytest.raises(ex.FilteredOut):
        client.put(k, {"a": 9}, policy=reject)
    with pytest.raises(ex.FilteredOut):
        client.remove(k, policy=reject)
    with pytest.raises(ex.FilteredOut):
        client.operate(k, [ops.increment("a", 1)], policy=reject)
    _, meta, bins = client.get(k)
    assert bins == {"a": 1} and meta["gen"] == 1
    accept = when(exp.Eq(exp.IntBin("a"), 1))
    client.put(k, {"a": 2}, policy=accept)
    assert client.get(k)[2] == {"a": 2}


def test_logic_arithmetic_and_metadata_in_filters(client, uset):
    k = key(uset)
    client.put(k, {"a": 6, "b": 2.5, "s": "hello"}, meta={"ttl": 1000})
    passing = [
        exp.And(exp.GT(exp.IntBin("a"), 5), exp.LT(exp.FloatBin("b"), 3.0)),
        exp.Or(exp.Eq(exp.IntBin("a"), 0), exp.Eq(exp.StrBin("s"), "hello")),
        exp.Not(exp.Eq(exp.IntBin("a"), 7)),
        exp.Eq(exp.Mod(exp.IntBin("a"), 4), 2),
        exp.Eq(exp.Add(exp.IntBin("a"), 4), 10),
        exp.GT(exp.TTL(), 900),
        exp.GT(exp.LastUpdateTime(), 0),
        exp.Eq(exp.SetName(), uset),
        exp.BinExists("a"),
        exp.Eq(exp.BinType("s"), aerospike.AS_BYTES_STRING),
        exp.Let(exp.Def("x", exp.IntBin("a")), exp.Eq(exp.Var("x"), 6)),
        exp.Eq(exp.Cond(exp.GT(exp.IntBin("a"), 5), 1, 0), 1),
    ]
    for expression in passing:
        assert client.get(k, policy=when(expression))[2]["a"] == 6, expression
    with pytest.raises(ex.FilteredOut):
        client.get(k, policy=when(exp.And(exp.GT(exp.IntBin("a"), 5), exp.Eq(exp.IntBin("a"), 0))))


def test_batch_rows_the_filter_rejects_answer_27(client, uset):
    keys = [key(uset, str(i)) for i in range(6)]
    for i, k in enumerate(keys):
        client.put(k, {"i": i})
    rows = client.batch_read(keys, policy=when(exp.GE(exp.IntBin("i"), 3))).batch_records
    assert [row.result for row in rows] == [FILTERED_OUT] * 3 + [0] * 3
    assert [row.record[2]["i"] for row in rows if row.result == 0] == [3, 4, 5]


def test_a_scan_and_a_query_skip_what_the_filter_rejects(client, uset):
    for i in range(20):
        client.put(key(uset, str(i)), {"i": i, "even": i % 2})
    scan = client.query("test", uset)
    got = sorted(b["i"] for _, _, b in scan.results(policy=when(exp.Eq(exp.IntBin("even"), 0))))
    assert got == list(range(0, 20, 2))


def test_expression_operations_read_and_write_bins(client, uset):
    k = key(uset)
    client.put(k, {"a": 4, "b": 3})
    _, _, bins = client.operate(
        k,
        [
            expression_ops.expression_read(
                "sum", exp.Add(exp.IntBin("a"), exp.IntBin("b")).compile()
            ),
            expression_ops.expression_write("c", exp.Mul(exp.IntBin("a"), 10).compile()),
        ],
    )
    assert bins["sum"] == 7
    assert client.get(k)[2] == {"a": 4, "b": 3, "c": 40}


@pytest.mark.parametrize(
    "packed",
    [b"\x93\x01", b"\x91", b"\xdd\xff\xff\xff\xff", b"\x93\xc1\x01\x02", b"\x91" * 300 + b"\x01"],
)
def test_malformed_filters_are_parameter_errors(client, server, uset, packed):
    import aswire

    k = ("test", uset, "raw")
    client.put(k, {"a": 1})
    digest = aerospike.calc_digest(*k)
    fields = aswire.record_fields("test", uset, digest) + [aswire.field(43, packed)]
    with server.raw() as s:
        reply = aswire.request_msg(
            s, aswire.as_msg(fields, [], info1=aswire.INFO1_READ | 0x02)
        )
        assert reply.result_code == aswire.PARAMETER
        assert aswire.request_info(s, ["node"])[0][0] == "node"

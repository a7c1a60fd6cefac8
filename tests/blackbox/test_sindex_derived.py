"""Secondary indexes on an element inside a list or map (a CDT context), on an expression, and
on blob bins, through the official client: created with `index_cdt_create`,
`index_expr_create` and `index_blob_create`, queried with a context, with the expression
(`where_with_expr`) or by name (`where_with_index_name`), listed by `sindex-list` with their
context and expression, and kept across restarts."""

from __future__ import annotations

import base64
import time

import aerospike
import pytest
from aerospike import exception as ex
from aerospike import predicates as p
from aerospike_helpers import cdt_ctx
from aerospike_helpers import expressions as exp

import harness


def wait_built(client, name: str) -> dict:
    deadline = time.monotonic() + 20
    while True:
        stats = harness.parse_kv(harness.info(client, f"sindex/test/{name}"))
        if stats["load_pct"] == "100":
            return stats
        assert time.monotonic() < deadline
        time.sleep(0.05)


def keys_of(records) -> list:
    return sorted(record[2]["k"] for record in records)


@pytest.fixture
def people(client, uset):
    """Records k = 0..29 with a list `scores` (its first element k % 5), a map `address`
    ({"zip": 100 + k % 3, "city": ...}), integer bins `a` and `b` (a + b = k % 7 + k % 4), a
    blob `tag`, and a nested map of lists `nested` ({"l": [k % 6, ...]})."""
    for k in range(30):
        client.put(
            ("test", uset, k),
            {
                "k": k,
                "scores": [k % 5, 100 + k, -k],
                "address": {"zip": 100 + k % 3, "city": f"c{k % 2}"},
                "a": k % 7,
                "b": k % 4,
                "tag": bytearray([k % 3, 0xFF]),
                "nested": {"l": [k % 6, 7]},
            },
        )
    return uset


def test_a_context_index_on_a_list_element(client, people):
    name = harness.unique("first_score")
    first = [cdt_ctx.cdt_ctx_list_index(0)]
    client.index_cdt_create(
        "test", people, "scores", aerospike.INDEX_TYPE_DEFAULT, aerospike.INDEX_NUMERIC, name, first
    )
    try:
        assert int(wait_built(client, name)["entries"]) == 30
        q = client.query("test", people)
        q.where(p.between("scores", 1, 2), first)
        assert keys_of(q.results()) == [k for k in range(30) if k % 5 in (1, 2)]
        # The index follows a write that changes the element.
        client.put(("test", people, 0), {"scores": [2]})
        q = client.query("test", people)
        q.where(p.equals("scores", 2), first)
        assert keys_of(q.results()) == [0] + [k for k in range(30) if k % 5 == 2]
        # Without the context the query names another index, which does not exist.
        q = client.query("test", people)
        q.where(p.equals("scores", 2))
        with pytest.raises(ex.IndexNotFound):
            q.results()
    finally:
        client.index_remove("test", name)


def test_a_context_index_on_a_map_value_and_on_a_nested_list(client, people):
    by_zip = harness.unique("zip")
    zip_ctx = [cdt_ctx.cdt_ctx_map_key("zip")]
    client.index_cdt_create(
        "test", people, "address", aerospike.INDEX_TYPE_DEFAULT, aerospike.INDEX_NUMERIC, by_zip, zip_ctx
    )
    # A list index on the list inside the map: each of its elements.
    by_item = harness.unique("nested")
    nested_ctx = [cdt_ctx.cdt_ctx_map_key("l")]
    client.index_cdt_create(
        "test", people, "nested", aerospike.INDEX_TYPE_LIST, aerospike.INDEX_NUMERIC, by_item, nested_ctx
    )
    try:
        wait_built(client, by_zip)
        assert int(wait_built(client, by_item)["entries"]) == 60
        q = client.query("test", people)
        q.where(p.equals("address", 101), zip_ctx)
        assert keys_of(q.results()) == [k for k in range(30) if k % 3 == 1]
        q = client.query("test", people)
        q.where(p.contains("nested", aerospike.INDEX_TYPE_LIST, 7), nested_ctx)
        assert len(q.results()) == 30
        q = client.query("test", people)
        q.where(p.range("nested", aerospike.INDEX_TYPE_LIST, 4, 5), nested_ctx)
        assert keys_of(q.results()) == [k for k in range(30) if k % 6 in (4, 5)]
    finally:
        client.index_remove("test", by_zip)
        client.index_remove("test", by_item)


def test_an_expression_index_queried_by_its_expression_and_by_its_name(client, people):
    name = harness.unique("a_plus_b")
    a_plus_b = exp.Add(exp.IntBin("a"), exp.IntBin("b")).compile()
    client.index_expr_create("test", people, aerospike.INDEX_TYPE_DEFAULT, aerospike.INDEX_NUMERIC, a_plus_b, name)
    try:
        assert int(wait_built(client, name)["entries"]) == 30
        expected = [k for k in range(30) if 3 <= k % 7 + k % 4 <= 5]
        q = client.query("test", people)
        q.where_with_expr(a_plus_b, p.between(None, 3, 5))
        assert keys_of(q.results()) == expected
        q = client.query("test", people)
        q.where_with_index_name(name, p.between(None, 3, 5))
        assert keys_of(q.results()) == expected
        # A record without `b` has no value: it leaves the index.
        client.remove_bin(("test", people, 3), ["b"])
        q = client.query("test", people)
        q.where_with_index_name(name, p.between(None, 3, 5))
        assert keys_of(q.results()) == [k for k in expected if k != 3]
        assert int(wait_built(client, name)["entries"]) == 29
        # Another expression names no index.
        q = client.query("test", people)
        q.where_with_expr(exp.IntBin("a").compile(), p.between(None, 3, 5))
        with pytest.raises(ex.IndexNotFound):
            q.results()
    finally:
        client.index_remove("test", name)


def test_an_expression_index_on_map_keys(client, people):
    name = harness.unique("address_keys")
    address = exp.MapBin("address").compile()
    client.index_expr_create("test", people, aerospike.INDEX_TYPE_MAPKEYS, aerospike.INDEX_STRING, address, name)
    try:
        assert int(wait_built(client, name)["entries"]) == 60
        q = client.query("test", people)
        q.where_with_expr(address, p.contains(None, aerospike.INDEX_TYPE_MAPKEYS, "zip"))
        assert len(q.results()) == 30
    finally:
        client.index_remove("test", name)


def test_a_blob_index(client, people):
    name = harness.unique("tag")
    client.index_blob_create("test", people, "tag", name)
    try:
        assert int(wait_built(client, name)["entries"]) == 30
        q = client.query("test", people)
        q.where(p.equals("tag", bytearray([1, 0xFF])))
        assert keys_of(q.results()) == [k for k in range(30) if k % 3 == 1]
        listed = harness.info(client, "sindex-list:ns=test")
        assert f"indexname={name}:set={people}:bin=tag:type=blob:indextype=default" in listed
    finally:
        client.index_remove("test", name)


def test_sindex_list_shows_the_context_and_the_expression(client, uset):
    by_ctx, by_exp = harness.unique("ctx"), harness.unique("exp")
    client.index_cdt_create(
        "test", uset, "scores", aerospike.INDEX_TYPE_DEFAULT, aerospike.INDEX_NUMERIC, by_ctx,
        [cdt_ctx.cdt_ctx_list_index(0)],
    )
    client.index_expr_create(
        "test", uset, aerospike.INDEX_TYPE_DEFAULT, aerospike.INDEX_NUMERIC, exp.IntBin("a").compile(), by_exp
    )
    try:
        lines = {
            harness.parse_kv(line.replace(":", ";"))["indexname"]: harness.parse_kv(line.replace(":", ";"))
            for line in harness.info(client, "sindex-list:ns=test").split(";")
            if "indexname=" in line
        }
        # [LIST_INDEX (0x10), 0], packed.
        assert base64.b64decode(lines[by_ctx]["context"]) == bytes([0x92, 0x10, 0x00])
        assert lines[by_ctx]["exp"] == "null" and lines[by_ctx]["bin"] == "scores"
        assert lines[by_exp]["bin"] == "null" and lines[by_exp]["context"] == "null"
        # [BIN (81), INT (2), "a"], packed.
        assert base64.b64decode(lines[by_exp]["exp"]) == bytes([0x93, 0x51, 0x02, 0xA1]) + b"a"
    finally:
        client.index_remove("test", by_ctx)
        client.index_remove("test", by_exp)


def test_bad_definitions_answer_4_and_create_nothing(server, client, uset):
    def refusal_code(command: str) -> int:
        """The info reply's error code (the client raises on `ERROR:<code>:...`)."""
        try:
            harness.info(client, command)
        except ex.AerospikeError as error:
            return error.code
        return 0

    ttl = base64.b64encode(bytes([0x91, 69])).decode()
    int_bin = base64.b64encode(bytes([0x93, 0x51, 0x02, 0xA1]) + b"a").decode()
    ctx = base64.b64encode(bytes([0x92, 0x10, 0x00])).decode()
    refused = {
        # An expression reading the clock would change with no write.
        f"sindex-create:ns=test;set={uset};indexname=bad1;exp={ttl};type=numeric": 4,
        # A string index on an integer expression.
        f"sindex-create:ns=test;set={uset};indexname=bad2;exp={int_bin};type=string": 4,
        # bin and exp, context and exp, indexdata and type.
        f"sindex-create:ns=test;indexname=bad3;exp={int_bin};indexdata=a,numeric": 4,
        f"sindex-create:ns=test;indexname=bad4;exp={int_bin};context={ctx};type=numeric": 4,
        f"sindex-create:ns=test;indexname=bad5;indexdata=a,numeric;type=numeric": 4,
        # Not base64, and base64 of no msgpack value.
        "sindex-create:ns=test;indexname=bad6;exp=%%%;type=numeric": 4,
        f"sindex-create:ns=test;indexname=bad7;bin=a;type=numeric;context={base64.b64encode(bytes([0x92, 0x10])).decode()}": 4,
    }
    for command, code in refused.items():
        assert refusal_code(command) == code, command
    assert "bad" not in harness.info(client, "sindex-list:ns=test")


def test_context_and_expression_indexes_survive_a_restart(start_server, tmp_path):
    storage = harness.device_storage([tmp_path / "test.dat"], filesize=32 * 1024 * 1024,
                                     write_block_size=65536, commit_to_device=True)
    srv = start_server(namespaces=[harness.namespace("test", storage_engine=storage)])
    client = srv.client()
    first = [cdt_ctx.cdt_ctx_list_index(0)]
    client.index_cdt_create(
        "test", "p", "l", aerospike.INDEX_TYPE_DEFAULT, aerospike.INDEX_NUMERIC, "by_first", first
    )
    doubled = exp.Mul(exp.IntBin("n"), 2).compile()
    client.index_expr_create("test", "p", aerospike.INDEX_TYPE_DEFAULT, aerospike.INDEX_NUMERIC, doubled, "by_double")
    for k in range(40):
        client.put(("test", "p", k), {"k": k, "l": [k % 4], "n": k})

    srv = srv.kill_and_restart()
    client = srv.client()
    assert int(wait_built(client, "by_first")["entries"]) == 40
    assert int(wait_built(client, "by_double")["entries"]) == 40
    q = client.query("test", "p")
    q.where(p.equals("l", 3), first)
    assert keys_of(q.results()) == [k for k in range(40) if k % 4 == 3]
    q = client.query("test", "p")
    q.where_with_expr(doubled, p.between(None, 10, 20))
    assert keys_of(q.results()) == list(range(5, 11))

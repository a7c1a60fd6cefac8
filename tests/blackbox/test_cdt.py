"""List and map (CDT) operations through the official Python client: the Aerospike semantics
users rely on (orders, flags, return types, nested contexts), and hostile payloads refused
with PARAMETER (4) while the record and the connection stay as they were."""

from __future__ import annotations

import aerospike
import pytest
from aerospike import exception as ex
from aerospike_helpers import cdt_ctx
from aerospike_helpers.operations import list_operations as lops
from aerospike_helpers.operations import map_operations as mops
from aerospike_helpers.operations import operations as ops

import aswire


def key(uset, k="k"):
    return ("test", uset, k)


def results(client, k, operations):
    """Each op's result, in order."""
    return [value for _, value in client.operate_ordered(k, operations)[2]]


# -- lists ---------------------------------------------------------------------------------------


def test_list_appends_inserts_and_reads_by_index(client, uset):
    k = key(uset)
    assert results(
        client,
        k,
        [
            lops.list_append("l", 1),
            lops.list_append_items("l", [2, 3, 4]),
            lops.list_insert("l", 1, "one-and-a-half"),
            lops.list_get("l", -1),
            lops.list_get_range("l", 1, 2),
            lops.list_size("l"),
        ],
    ) == [1, 4, 5, 4, ["one-and-a-half", 2], 5]
    assert client.get(k)[2] == {"l": [1, "one-and-a-half", 2, 3, 4]}
    assert results(client, k, [lops.list_pop("l", 0), lops.list_size("l")]) == [1, 4]


def test_list_selection_by_value_range_rank_and_relative_rank(client, uset):
    k = key(uset)
    client.put(k, {"l": [7, 1, 9, 3, 5]})
    assert results(
        client,
        k,
        [
            lops.list_get_by_value_range("l", aerospike.LIST_RETURN_VALUE, 3, 8),
            lops.list_get_by_rank_range("l", 0, aerospike.LIST_RETURN_VALUE, 2),
            lops.list_get_by_rank_range("l", -1, aerospike.LIST_RETURN_INDEX, 1),
            lops.list_get_by_value_range(
                "l", aerospike.LIST_RETURN_COUNT, 3, 8, inverted=True
            ),
            lops.list_get_by_value_rank_range_relative(
                "l", 5, 1, aerospike.LIST_RETURN_VALUE, 2
            ),
        ],
    ) == [[7, 3, 5], [1, 3], [2], 2, [7, 9]]
    assert results(
        client, k, [lops.list_remove_by_value("l", 9, aerospike.LIST_RETURN_INDEX)]
    ) == [[2]]
    assert client.get(k)[2] == {"l": [7, 1, 3, 5]}


def test_an_ordered_list_keeps_its_order_and_refuses_inserts_by_index(client, uset):
    k = key(uset)
    ordered = {"list_order": aerospike.LIST_ORDERED}
    client.operate(k, [lops.list_append_items("l", [5, 1, 3], policy=ordered)])
    assert client.get(k)[2] == {"l": [1, 3, 5]}
    client.operate(k, [lops.list_append("l", 2, policy=ordered)])
    assert client.get(k)[2] == {"l": [1, 2, 3, 5]}
    with pytest.raises(ex.OpNotApplicable):
        client.operate(k, [lops.list_insert("l", 0, 9)])
    assert client.get(k)[2] == {"l": [1, 2, 3, 5]}


def test_add_unique_refuses_a_duplicate_unless_told_not_to_fail(client, uset):
    k = key(uset)
    client.put(k, {"l": [1, 2]})
    unique = {"write_flags": aerospike.LIST_WRITE_ADD_UNIQUE}
    with pytest.raises(ex.ElementExistsError):
        client.operate(k, [lops.list_append("l", 2, policy=unique)])
    lenient = {"write_flags": aerospike.LIST_WRITE_ADD_UNIQUE | aerospike.LIST_WRITE_NO_FAIL}
    client.operate(k, [lops.list_append("l", 2, policy=lenient)])
    assert client.get(k)[2] == {"l": [1, 2]}


def test_list_sort_and_increment(client, uset):
    k = key(uset)
    client.put(k, {"l": [3, 1, 2, 1]})
    client.operate(k, [lops.list_sort("l", aerospike.LIST_SORT_DROP_DUPLICATES)])
    assert client.get(k)[2] == {"l": [1, 2, 3]}
    assert results(client, k, [lops.list_increment("l", 0, 10)]) == [11]
    assert client.get(k)[2] == {"l": [11, 2, 3]}


# -- maps ----------------------------------------------------------------------------------------


def test_map_puts_increments_and_reads_by_key(client, uset):
    k = key(uset)
    assert results(
        client,
        k,
        [
            mops.map_put("m", "b", 2),
            mops.map_put_items("m", {"a": 1, "c": 3}),
            mops.map_increment("m", "a", 10),
            mops.map_get_by_key("m", "a", aerospike.MAP_RETURN_VALUE),
            mops.map_size("m"),
        ],
    ) == [1, 3, 11, 11, 3]
    assert client.get(k)[2] == {"m": {"a": 11, "b": 2, "c": 3}}


def test_a_key_ordered_map_reads_ranges_in_key_order(client, uset):
    k = key(uset)
    ordered = {"map_order": aerospike.MAP_KEY_ORDERED}
    client.operate(k, [mops.map_put_items("m", {"c": 3, "a": 1, "b": 2, "d": 0}, ordered)])
    assert results(
        client,
        k,
        [
            mops.map_get_by_key_range("m", "b", "d", aerospike.MAP_RETURN_KEY),
            mops.map_get_by_index_range("m", 0, 2, aerospike.MAP_RETURN_VALUE),
            mops.map_get_by_rank_range("m", 0, 2, aerospike.MAP_RETURN_KEY),
        ],
    ) == [["b", "c"], [1, 2], ["d", "a"]]


def test_map_write_flags_create_only_and_update_only(client, uset):
    k = key(uset)
    client.put(k, {"m": {"a": 1}})
    create_only = {"map_write_flags": aerospike.MAP_WRITE_FLAGS_CREATE_ONLY}
    with pytest.raises(ex.ElementExistsError):
        client.operate(k, [mops.map_put("m", "a", 2, create_only)])
    update_only = {"map_write_flags": aerospike.MAP_WRITE_FLAGS_UPDATE_ONLY}
    with pytest.raises(ex.ElementNotFoundError):
        client.operate(k, [mops.map_put("m", "z", 2, update_only)])
    client.operate(k, [mops.map_put("m", "a", 5, update_only)])
    assert client.get(k)[2] == {"m": {"a": 5}}


def test_puts_into_stored_maps_of_every_order_keep_every_entry_in_its_place(client, uset):
    """A put of one key edits a stored map's packed bytes: an existing key's value changes in
    place, a new key goes where its order says (the header grows from 15 to 16 entries on
    the way), and reads by index see the order Aerospike keeps."""
    orders = (aerospike.MAP_UNORDERED, aerospike.MAP_KEY_ORDERED, aerospike.MAP_KEY_VALUE_ORDERED)
    for order in orders:
        k = key(uset, f"order-{order}")
        policy = {"map_order": order}
        entries = {f"k{j:02}": j for j in range(0, 30, 2)}
        client.operate(k, [mops.map_put_items("m", entries, policy)])
        puts = [mops.map_put("m", "k04", -4, policy), mops.map_put("m", "k05", 5, policy)]
        puts.append(mops.map_put("m", 7, "seven", policy))
        assert results(client, k, puts) == [15, 16, 17]
        expected = dict(entries, k04=-4, k05=5)
        expected[7] = "seven"
        assert client.get(k)[2]["m"] == expected
        by_index = mops.map_get_by_index_range("m", 0, 4, aerospike.MAP_RETURN_KEY)
        assert results(client, k, [by_index]) == [[7, "k00", "k02", "k04"]]


def test_map_remove_returns_what_it_removed(client, uset):
    k = key(uset)
    client.put(k, {"m": {"a": 1, "b": 2, "c": 3}})
    assert results(
        client, k, [mops.map_remove_by_key("m", "b", aerospike.MAP_RETURN_VALUE)]
    ) == [2]
    assert client.get(k)[2] == {"m": {"a": 1, "c": 3}}


# -- nested contexts -----------------------------------------------------------------------------


def test_ops_reach_nested_lists_and_maps_through_a_context(client, uset):
    k = key(uset)
    client.put(k, {"doc": {"tags": ["a", "b"], "counts": {"x": 1}}})
    tags = [cdt_ctx.cdt_ctx_map_key("tags")]
    counts = [cdt_ctx.cdt_ctx_map_key("counts")]
    assert results(
        client,
        k,
        [
            lops.list_append("doc", "c", ctx=tags),
            mops.map_increment("doc", "x", 4, ctx=counts),
            lops.list_get_by_index("doc", -1, aerospike.LIST_RETURN_VALUE, ctx=tags),
        ],
    ) == [3, 5, "c"]
    assert client.get(k)[2] == {"doc": {"tags": ["a", "b", "c"], "counts": {"x": 5}}}


def test_a_create_context_makes_the_missing_levels(client, uset):
    k = key(uset)
    client.put(k, {"doc": {}})
    create = [cdt_ctx.cdt_ctx_map_key_create("new", aerospike.MAP_KEY_ORDERED)]
    client.operate(k, [lops.list_append("doc", 1, ctx=create)])
    assert client.get(k)[2] == {"doc": {"new": [1]}}
    missing = [cdt_ctx.cdt_ctx_map_key("absent")]
    with pytest.raises(ex.AerospikeError) as error:
        client.operate(k, [lops.list_append("doc", 1, ctx=missing)])
    assert error.value.code == 23  # ELEMENT_NOT_FOUND
    assert client.get(k)[2] == {"doc": {"new": [1]}}


def test_an_op_of_the_wrong_family_is_incompatible_and_changes_nothing(client, uset):
    k = key(uset)
    client.put(k, {"l": [1], "n": 5})
    with pytest.raises(ex.BinIncompatibleType):
        client.operate(k, [mops.map_put("l", "a", 1)])
    with pytest.raises(ex.BinIncompatibleType):
        client.operate(k, [ops.write("x", 1), lops.list_append("n", 1)])
    _, meta, bins = client.get(k)
    assert bins == {"l": [1], "n": 5}
    assert meta["gen"] == 1


# -- hostile payloads ----------------------------------------------------------------------------


def raw_cdt(s, digest, op_type, bin_name, payload):
    """Sends one CDT op with `payload` as raw bytes; returns the reply."""
    fields = aswire.record_fields("test", "cdt-raw", digest)
    op = aswire.op(op_type, bin_name, payload, ptype=4)
    info2 = aswire.INFO2_WRITE if op_type == 4 else 0
    return aswire.request_msg(
        s, aswire.as_msg(fields, [op], info1=0 if info2 else aswire.INFO1_READ, info2=info2)
    )


@pytest.mark.parametrize(
    "payload",
    [
        b"",  # nothing
        b"\x91\xc0",  # no op code
        b"\x92\x01",  # the array declares two items, holds one
        b"\xdd\xff\xff\xff\xff\x01",  # four billion items declared in six bytes
        b"\x92\x01" + b"\x91" * 200 + b"\x01",  # nesting past the limit
        b"\x92\x7f\x01",  # an unknown list op code
        b"\x93\x13\x07",  # a get-by-index with too few arguments
        b"\x93\xff\x90\x92\x01\x01",  # a context with no steps
    ],
)
def test_malformed_payloads_are_parameter_errors_and_the_connection_lives(
    client, server, uset, payload
):
    k = ("test", "cdt-raw", "hostile")
    client.put(k, {"l": [1, 2]})
    digest = aerospike.calc_digest(*k)
    with server.raw() as s:
        for op_type in (3, 4):
            reply = raw_cdt(s, digest, op_type, "l", payload)
            assert reply.result_code == aswire.PARAMETER, (op_type, payload)
        assert aswire.request_info(s, ["node"])[0][0] == "node"
    assert client.get(k)[2] == {"l": [1, 2]}

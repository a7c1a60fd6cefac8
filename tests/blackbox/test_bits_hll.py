"""Bitwise operations on blob bins and HyperLogLog operations on HLL bins, through the official
Python client: Aerospike's results and errors, and an HLL written here read back as one."""

from __future__ import annotations

import aerospike
import pytest
from aerospike import exception as ex
from aerospike_helpers.operations import bitwise_operations as bits
from aerospike_helpers.operations import hll_operations as hll
from aerospike_helpers.operations import operations as ops


def key(uset, k="k"):
    return ("test", uset, k)


def results(client, k, operations):
    return [value for _, value in client.operate_ordered(k, operations)[2]]


def test_bit_set_get_count_and_scan(client, uset):
    k = key(uset)
    client.put(k, {"b": bytearray(b"\x00\x00\x00\x00")})
    assert results(
        client,
        k,
        [
            bits.bit_set("b", 4, 8, 1, bytearray(b"\xff")),
            bits.bit_get("b", 0, 16),
            bits.bit_count("b", 0, 32),
            bits.bit_lscan("b", 0, 32, True),
        ],
    ) == [None, b"\x0f\xf0", 8, 4]
    assert client.get(k)[2] == {"b": b"\x0f\xf0\x00\x00"}


def test_bit_resize_creates_and_grows_and_add_saturates(client, uset):
    k = key(uset)
    client.operate(k, [bits.bit_resize("b", 2)])
    assert client.get(k)[2] == {"b": b"\x00\x00"}
    add = bits.bit_add("b", 0, 8, 200, False, aerospike.BIT_OVERFLOW_SATURATE)
    client.operate(k, [add])
    assert client.get(k)[2] == {"b": b"\xc8\x00"}
    client.operate(k, [add])  # 400 does not fit in 8 bits: saturates at 255
    assert client.get(k)[2] == {"b": b"\xff\x00"}
    fail = bits.bit_add("b", 0, 8, 1, False, aerospike.BIT_OVERFLOW_FAIL)
    with pytest.raises(ex.OpNotApplicable):
        client.operate(k, [fail])


def test_bit_ops_on_a_non_blob_bin_are_incompatible(client, uset):
    k = key(uset)
    client.put(k, {"n": 5})
    with pytest.raises(ex.BinIncompatibleType):
        client.operate(k, [bits.bit_get("n", 0, 8)])
    with pytest.raises(ex.OpNotApplicable):
        client.put(k, {"b": bytearray(b"\x01")})
        client.operate(k, [bits.bit_get("b", 0, 16)])


def test_hll_counts_distinct_values_within_its_error(client, uset):
    k = key(uset)
    values = [f"user-{i}" for i in range(1000)]
    (changed,) = results(client, k, [hll.hll_add("h", values, 12)])
    assert 0 < changed <= 1000
    count, description = results(client, k, [hll.hll_get_count("h"), hll.hll_describe("h")])
    assert abs(count - 1000) <= 1000 * 3 * 1.04 / 64, count
    assert description == [12, 0]
    # Adding the same values again changes nothing.
    assert results(client, k, [hll.hll_add("h", values[:10])]) == [0]


def test_hll_union_and_similarity_of_two_bins(client, uset):
    a, b = key(uset, "a"), key(uset, "b")
    client.operate(a, [hll.hll_add("h", [f"x{i}" for i in range(0, 600)], 12, 20)])
    client.operate(b, [hll.hll_add("h", [f"x{i}" for i in range(300, 900)], 12, 20)])
    other = client.get(b)[2]["h"]
    union, similarity = results(
        client, a, [hll.hll_get_union_count("h", [other]), hll.hll_get_similarity("h", [other])]
    )
    assert abs(union - 900) <= 900 * 0.1, union
    assert abs(similarity - 300 / 900) < 0.1, similarity


def test_hll_create_only_on_an_existing_bin_is_bin_exists(client, uset):
    k = key(uset)
    client.operate(k, [hll.hll_init("h", 10)])
    with pytest.raises(ex.BinExistsError):
        client.operate(k, [hll.hll_init("h", 10, policy={"flags": aerospike.HLL_WRITE_CREATE_ONLY})])
    assert results(client, k, [hll.hll_describe("h")]) == [[10, 0]]
    assert client.get(k)[2]["h"] is not None
    client.operate(k, [ops.write("x", 1)])

"""operate(): several ops on one record, atomically (reference 5.1, 5.2; server write.c)."""

from __future__ import annotations

import aerospike
import pytest
from aerospike import exception as ex
from aerospike_helpers.expressions import base as exp
from aerospike_helpers.operations import list_operations as lops
from aerospike_helpers.operations import map_operations as mops
from aerospike_helpers.operations import operations as ops

import aswire


def key(uset, k="k"):
    return ("test", uset, k)


def test_operate_reads_and_writes_in_one_command(client, uset):
    client.put(key(uset), {"a": 1, "b": "x"})
    _, meta, bins = client.operate(key(uset), [ops.write("c", 3), ops.read("a"), ops.read("c")])
    assert bins == {"a": 1, "c": 3}
    assert meta["gen"] == 2
    assert client.get(key(uset))[2] == {"a": 1, "b": "x", "c": 3}


def test_operate_write_on_a_missing_record_creates_it(client, uset):
    _, meta, _ = client.operate(key(uset), [ops.write("a", 1)])
    assert meta["gen"] == 1
    assert client.get(key(uset))[2] == {"a": 1}


def test_operate_with_only_reads_on_a_missing_record_is_not_found(client, uset):
    with pytest.raises(ex.RecordNotFound) as e:
        client.operate(key(uset), [ops.read("a")])
    assert e.value.code == 2


def test_increment_adds_to_an_integer_bin(client, uset):
    client.put(key(uset), {"n": 10})
    _, _, bins = client.operate(key(uset), [ops.increment("n", 5), ops.read("n")])
    assert bins == {"n": 15}
    _, _, bins = client.operate(key(uset), [ops.increment("n", -20), ops.read("n")])
    assert bins == {"n": -5}


def test_increment_creates_a_missing_bin_and_record(client, uset):
    _, _, bins = client.operate(key(uset), [ops.increment("n", 7), ops.read("n")])
    assert bins == {"n": 7}


def test_increment_adds_to_a_float_bin(client, uset):
    client.put(key(uset), {"f": 1.25})
    _, _, bins = client.operate(key(uset), [ops.increment("f", 2.5), ops.read("f")])
    assert bins == {"f": 3.75}
    assert type(bins["f"]) is float


def test_increment_via_the_client_shortcut(client, uset):
    client.put(key(uset), {"n": 1})
    client.increment(key(uset), "n", 41)
    assert client.get(key(uset))[2] == {"n": 42}


def test_increment_wraps_around_like_int64(client, uset):
    # server particle_integer.c integer_incr_from_wire: plain two's-complement add.
    client.put(key(uset), {"n": 2**63 - 1})
    client.increment(key(uset), "n", 1)
    assert client.get(key(uset))[2] == {"n": -(2**63)}


def test_increment_on_a_string_bin_is_bin_incompatible_type_12(client, uset):
    client.put(key(uset), {"s": "text"})
    with pytest.raises(ex.BinIncompatibleType) as e:
        client.operate(key(uset), [ops.increment("s", 1)])
    assert e.value.code == 12
    _, meta, bins = client.get(key(uset))
    assert bins == {"s": "text"}
    assert meta["gen"] == 1


def test_float_increment_on_an_integer_bin_is_bin_incompatible_type_12(client, uset):
    client.put(key(uset), {"n": 1})
    with pytest.raises(ex.BinIncompatibleType):
        client.operate(key(uset), [ops.increment("n", 1.5)])
    assert client.get(key(uset))[2] == {"n": 1}


def test_integer_increment_on_a_float_bin_is_bin_incompatible_type_12(client, uset):
    # particle_float.c float_incr_from_wire: "won't allow adding integers to floats".
    client.put(key(uset), {"f": 1.5})
    with pytest.raises(ex.BinIncompatibleType):
        client.operate(key(uset), [ops.increment("f", 1)])
    assert client.get(key(uset))[2] == {"f": 1.5}


def test_operate_checks_the_generation_policy(client, uset):
    client.put(key(uset), {"n": 1})
    eq = {"gen": aerospike.POLICY_GEN_EQ}
    with pytest.raises(ex.RecordGenerationError):
        client.operate(key(uset), [ops.increment("n", 1)], meta={"gen": 5}, policy=eq)
    _, meta, bins = client.operate(key(uset), [ops.increment("n", 1), ops.read("n")], meta={"gen": 1}, policy=eq)
    assert bins == {"n": 2}
    assert meta["gen"] == 2


def test_append_and_prepend_on_a_string_bin(client, uset):
    client.put(key(uset), {"s": "mid"})
    client.operate(key(uset), [ops.append("s", "-end"), ops.prepend("s", "start-")])
    assert client.get(key(uset))[2] == {"s": "start-mid-end"}
    client.append(key(uset), "s", "!")
    client.prepend(key(uset), "s", "¡")
    assert client.get(key(uset))[2] == {"s": "¡start-mid-end!"}


def test_append_and_prepend_on_a_blob_bin(client, uset):
    client.put(key(uset), {"b": b"\x01\x02"})
    client.operate(key(uset), [ops.append("b", b"\x03"), ops.prepend("b", b"\x00")])
    assert bytes(client.get(key(uset))[2]["b"]) == b"\x00\x01\x02\x03"


def test_append_to_a_missing_bin_creates_it(client, uset):
    client.put(key(uset), {"a": 1})
    client.append(key(uset), "s", "new")
    assert client.get(key(uset))[2] == {"a": 1, "s": "new"}


@pytest.mark.parametrize("op", [ops.append, ops.prepend], ids=["append", "prepend"])
def test_append_or_prepend_on_an_integer_bin_is_bin_incompatible_type_12(client, uset, op):
    client.put(key(uset), {"n": 5})
    with pytest.raises(ex.BinIncompatibleType) as e:
        client.operate(key(uset), [op("n", "x")])
    assert e.value.code == 12
    assert client.get(key(uset))[2] == {"n": 5}


def test_append_of_a_string_to_a_blob_bin_is_bin_incompatible_type_12(client, uset):
    client.put(key(uset), {"b": b"\x01"})
    with pytest.raises(ex.BinIncompatibleType):
        client.operate(key(uset), [ops.append("b", "text")])
    assert bytes(client.get(key(uset))[2]["b"]) == b"\x01"


def test_touch_op_bumps_generation_and_sets_ttl(client, uset):
    client.put(key(uset), {"a": 1})
    _, meta, _ = client.operate(key(uset), [ops.touch()], meta={"ttl": 500})
    assert meta["gen"] == 2
    _, meta = client.exists(key(uset))
    assert meta["gen"] == 2
    assert 490 <= meta["ttl"] <= 500


def test_touch_op_on_a_missing_record_is_not_found(client, uset):
    # write.c write_master_policies: a touch op makes the command "record must exist".
    with pytest.raises(ex.RecordNotFound):
        client.operate(key(uset), [ops.touch(), ops.write("a", 1)])
    assert client.exists(key(uset))[1] is None


def test_delete_op_removes_the_record(client, uset):
    client.put(key(uset), {"a": 1})
    client.operate(key(uset), [ops.delete()])
    assert client.exists(key(uset))[1] is None


def test_delete_op_followed_by_a_write_leaves_only_the_new_bins(client, uset):
    client.put(key(uset), {"a": 1, "b": 2})
    client.operate(key(uset), [ops.delete(), ops.write("c", 3)])
    assert client.get(key(uset))[2] == {"c": 3}


def test_read_after_write_in_one_operate_sees_the_new_value(client, uset):
    client.put(key(uset), {"a": 1})
    _, _, results = client.operate_ordered(
        key(uset), [ops.read("a"), ops.write("a", 2), ops.read("a"), ops.increment("a", 10), ops.read("a")]
    )
    assert results == [("a", 1), ("a", 2), ("a", 12)]


def test_operate_ordered_returns_reads_in_request_order(client, uset):
    client.put(key(uset), {"a": 1, "b": "two", "c": 3.0})
    _, _, results = client.operate_ordered(key(uset), [ops.read("c"), ops.read("a"), ops.read("b")])
    assert results == [("c", 3.0), ("a", 1), ("b", "two")]


def test_a_failing_op_leaves_the_whole_record_unchanged(client, uset):
    client.put(key(uset), {"a": 1, "s": "text"})
    with pytest.raises(ex.BinIncompatibleType):
        client.operate(
            key(uset),
            [ops.write("a", 2), ops.write("new", "x"), ops.increment("s", 1), ops.write("b", 3)],
        )
    _, meta, bins = client.get(key(uset))
    assert bins == {"a": 1, "s": "text"}
    assert meta["gen"] == 1


def test_a_failing_op_on_a_missing_record_creates_nothing(client, uset):
    with pytest.raises(ex.BinIncompatibleType):
        client.operate(key(uset), [ops.write("s", "text"), ops.increment("s", 1)])
    assert client.exists(key(uset))[1] is None


def test_respond_all_ops_returns_one_entry_per_op_in_order(server, uset):
    # Raw, because the python client only sets RESPOND_ALL_OPS for CDT/bit/HLL/exp ops.
    digest = aerospike.calc_digest("test", uset, "rao")
    with server.raw() as s:
        reply = aswire.request_msg(
            s,
            aswire.as_msg(
                aswire.record_fields("test", uset, digest),
                [
                    aswire.write_int("a", 1),
                    aswire.read_bin("a"),
                    aswire.op(aswire.OP_INCR, "b", aswire.int_bytes(2), aswire.PT_INTEGER),
                    aswire.read_bin("b"),
                ],
                info1=aswire.INFO1_READ,
                info2=aswire.INFO2_WRITE | aswire.INFO2_RESPOND_ALL_OPS,
            ),
        )
    assert reply.result_code == aswire.OK
    assert reply.generation == 1
    assert [o.name for o in reply.ops] == ["a", "a", "b", "b"]
    assert [o.decoded() for o in reply.ops] == [None, 1, None, 2]


def test_a_read_with_no_bin_name_reads_every_bin_only_with_get_all(server, uset):
    """The Go client's touch-and-get-header operate sends a READ op with no bin name and no
    GET_ALL flag; Osprey answered it with every bin, where Aerospike (`op_is_read_all`) reads
    all bins only when info1 GET_ALL is set and otherwise reads the bin named "", which no
    record has."""
    digest = aerospike.calc_digest("test", uset, "header")
    fields = aswire.record_fields("test", uset, digest)
    with server.raw() as s:
        for info1, expected in ((aswire.INFO1_READ, []), (aswire.INFO1_READ | aswire.INFO1_GET_ALL, ["a"])):
            reply = aswire.request_msg(
                s,
                aswire.as_msg(
                    fields,
                    [aswire.write_int("a", 1), aswire.read_bin("")],
                    info1=info1,
                    info2=aswire.INFO2_WRITE,
                ),
            )
            assert reply.result_code == aswire.OK
            assert [o.name for o in reply.ops] == expected


def test_cdt_list_append_in_an_operate_with_a_write(client, uset):
    client.put(key(uset), {"a": 1, "l": [1, 2]})
    _, _, bins = client.operate(key(uset), [ops.write("a", 2), lops.list_append("l", 3)])
    assert bins["l"] == 3  # the list's size after the append
    assert client.get(key(uset))[2] == {"a": 2, "l": [1, 2, 3]}


def test_cdt_map_read_in_an_operate_leaves_the_record_alone(client, uset):
    client.put(key(uset), {"m": {"x": 1, "y": 2}})
    _, meta, bins = client.operate(key(uset), [mops.map_size("m")])
    assert bins == {"m": 2}
    _, after, stored = client.get(key(uset))
    assert stored == {"m": {"x": 1, "y": 2}}
    assert after["gen"] == meta["gen"] == 1


def test_filter_expression_works_or_is_unsupported_16(client, uset):
    client.put(key(uset), {"a": 1})
    true_filter = {"expressions": exp.Eq(exp.IntBin("a"), 1).compile()}
    false_filter = {"expressions": exp.Eq(exp.IntBin("a"), 2).compile()}
    try:
        _, _, bins = client.get(key(uset), policy=true_filter)
    except ex.AerospikeError as e:
        assert e.code == 16, f"expected UNSUPPORTED_FEATURE, got {e.code} {e.msg}"
        with pytest.raises(ex.AerospikeError) as e2:
            client.put(key(uset), {"a": 5}, policy=false_filter)
        assert e2.value.code == 16
    else:
        assert bins == {"a": 1}
        with pytest.raises(ex.FilteredOut) as e2:
            client.get(key(uset), policy=false_filter)
        assert e2.value.code == 27
        with pytest.raises(ex.FilteredOut):
            client.put(key(uset), {"a": 5}, policy=false_filter)
    assert client.get(key(uset))[2] == {"a": 1}


def test_udf_apply_of_an_unregistered_module_fails_and_the_server_stays_healthy(client, uset, healthy):
    # A real server answers UDF_BAD_RESPONSE (100) for a missing module (python suite
    # test_apply.py test_udf_error_causing_args); Osprey without Lua answers 16.
    client.put(key(uset), {"a": 1})
    with pytest.raises(ex.AerospikeError) as e:
        client.apply(key(uset), "no_such_module", "no_such_function", [1, "x"])
    assert e.value.code in (100, 16), (e.value.code, e.value.msg)
    _, meta, bins = client.get(key(uset))
    assert bins == {"a": 1}
    assert meta["gen"] == 1


def test_an_increment_of_a_missing_bin_creates_it_whatever_its_type(server, client, uset):
    """Aerospike turns every modify op on a missing bin into a create (the Go client's "Add
    must work": AddBins of a string). Sent raw, as the clients check increment operands."""
    k = key(uset)
    client.put(k, {"n": 1})
    digest = aerospike.calc_digest(*k)
    incr_string = aswire.op(aswire.OP_INCR, "added", b"test", aswire.PT_STRING)
    with server.raw() as s:
        reply = aswire.request_msg(
            s, aswire.as_msg(aswire.record_fields(*k[:2], digest), [incr_string], info2=aswire.INFO2_WRITE)
        )
    assert reply.result_code == 0
    assert client.get(k)[2] == {"n": 1, "added": "test"}
    # Once it exists, a string does not add up.
    with server.raw() as s:
        reply = aswire.request_msg(
            s, aswire.as_msg(aswire.record_fields(*k[:2], digest), [incr_string], info2=aswire.INFO2_WRITE)
        )
    assert reply.result_code == 12

"""Single-record put/get/select/exists/remove through the official client (reference 5.3, 7)."""

from __future__ import annotations

import aerospike
import pytest
from aerospike import exception as ex

import aswire
import harness


def key(uset, k="k"):
    return ("test", uset, k)


@pytest.mark.parametrize(
    "value",
    [
        0,
        1,
        -1,
        42,
        -123456789,
        2**63 - 1,
        -(2**63),
    ],
    ids=["zero", "one", "minus_one", "small", "negative", "int64_max", "int64_min"],
)
def test_integers_round_trip_exactly(client, uset, value):
    client.put(key(uset), {"i": value})
    _, _, bins = client.get(key(uset))
    assert bins == {"i": value}
    assert type(bins["i"]) is int


@pytest.mark.parametrize("value", [0.0, 3.14159, -2.5, 1e308, -1e-308, float("inf")])
def test_floats_round_trip_exactly(client, uset, value):
    client.put(key(uset), {"f": value})
    _, _, bins = client.get(key(uset))
    assert type(bins["f"]) is float
    assert bins["f"] == value


@pytest.mark.parametrize(
    "value",
    ["", "hello", "héllo wörld ✓ 🦅 日本語", "x" * 10000],
    ids=["empty", "ascii", "unicode", "long"],
)
def test_strings_round_trip_exactly(client, uset, value):
    client.put(key(uset), {"s": value})
    _, _, bins = client.get(key(uset))
    assert bins == {"s": value}
    assert type(bins["s"]) is str


def test_bytes_and_bytearray_round_trip_as_blobs(client, uset):
    data = bytes(range(256)) * 4
    client.put(key(uset), {"b": data, "ba": bytearray(b"\x00\x01\xff"), "e": b""})
    _, _, bins = client.get(key(uset))
    assert bytes(bins["b"]) == data
    assert bytes(bins["ba"]) == b"\x00\x01\xff"
    assert bytes(bins["e"]) == b""


def test_booleans_round_trip_as_booleans_by_default(client, uset):
    # python 19 default send_bool_as = AS_BOOL (particle type 17, aerospike.rst).
    client.put(key(uset), {"t": True, "f": False})
    _, _, bins = client.get(key(uset))
    assert bins == {"t": True, "f": False}
    assert type(bins["t"]) is bool


def test_booleans_sent_as_integers_come_back_as_integers(server, uset):
    c = server.client(send_bool_as=aerospike.INTEGER)
    c.put(key(uset), {"t": True, "f": False})
    _, _, bins = c.get(key(uset))
    assert bins == {"t": 1, "f": 0}
    assert type(bins["t"]) is int


def test_nested_mixed_lists_round_trip_equal(client, uset):
    value = [1, -2, "three", 4.5, b"six", [7, [8, "nine"]], {"ten": 10, 11: [12]}, None, True, 2**63 - 1, ""]
    client.put(key(uset), {"l": value, "empty": []})
    _, _, bins = client.get(key(uset))
    assert bins["l"] == value
    assert bins["empty"] == []


def test_nested_mixed_maps_round_trip_equal(client, uset):
    value = {
        "a": 1,
        "b": "two",
        3: 3.5,
        "nested": {"x": [1, 2, {"y": "z"}], "n": -(2**63)},
        b"blobkey": b"blobvalue",
        "u": "日本",
    }
    client.put(key(uset), {"m": value, "empty": {}})
    _, _, bins = client.get(key(uset))
    assert bins["m"] == value
    assert bins["empty"] == {}


def test_key_ordered_maps_round_trip_equal(client, uset):
    value = aerospike.KeyOrderedDict({"b": 2, "a": 1, "c": 3})
    client.put(key(uset), {"m": value})
    _, _, bins = client.get(key(uset))
    assert dict(bins["m"]) == {"a": 1, "b": 2, "c": 3}


def test_geojson_round_trips_equal(client, uset):
    point = aerospike.GeoJSON({"type": "Point", "coordinates": [-122.0, 37.5]})
    client.put(key(uset), {"g": point})
    _, _, bins = client.get(key(uset))
    assert isinstance(bins["g"], aerospike.GeoJSON)
    assert bins["g"].unwrap() == {"type": "Point", "coordinates": [-122.0, 37.5]}


def test_many_bins_of_every_type_in_one_record(client, uset):
    rec = {
        "i": 7,
        "f": 7.5,
        "s": "seven",
        "b": b"\x07",
        "l": [7],
        "m": {"seven": 7},
        "t": True,
    }
    client.put(key(uset), rec)
    _, _, bins = client.get(key(uset))
    assert {k: (bytes(v) if k == "b" else v) for k, v in bins.items()} == rec


def test_integer_string_and_bytes_keys_address_different_records(client, uset):
    client.put(("test", uset, 1), {"v": "int"})
    client.put(("test", uset, "1"), {"v": "str"})
    client.put(("test", uset, bytearray(b"1")), {"v": "blob"})
    assert client.get(("test", uset, 1))[2] == {"v": "int"}
    assert client.get(("test", uset, "1"))[2] == {"v": "str"}
    assert client.get(("test", uset, bytearray(b"1")))[2] == {"v": "blob"}


def test_digest_only_key_reads_the_same_record(client, uset):
    client.put(key(uset, "dk"), {"v": 1})
    digest = aerospike.calc_digest("test", uset, "dk")
    _, _, bins = client.get(("test", uset, None, digest))
    assert bins == {"v": 1}


def test_records_without_a_set_are_separate_from_records_in_a_set(client, uset):
    k = harness.unique("noset")
    client.put(("test", None, k), {"v": "none"})
    client.put(("test", uset, k), {"v": "set"})
    assert client.get(("test", None, k))[2] == {"v": "none"}
    assert client.get(("test", uset, k))[2] == {"v": "set"}
    client.remove(("test", None, k))


def test_same_key_in_two_namespaces_is_two_records(client, uset):
    client.put(("test", uset, "k"), {"v": "test"})
    client.put(("short", uset, "k"), {"v": "short"})
    assert client.get(("test", uset, "k"))[2] == {"v": "test"}
    assert client.get(("short", uset, "k"))[2] == {"v": "short"}


def test_select_returns_only_the_named_bins(client, uset):
    client.put(key(uset), {"a": 1, "b": "two", "c": [3]})
    _, meta, bins = client.select(key(uset), ["a", "c"])
    assert bins == {"a": 1, "c": [3]}
    assert meta["gen"] == 1


def test_select_of_a_missing_bin_omits_it(client, uset):
    client.put(key(uset), {"a": 1})
    _, _, bins = client.select(key(uset), ["a", "zz"])
    assert bins == {"a": 1}


def test_select_of_only_missing_bins_returns_the_record_without_bins(client, uset):
    # read.c: requested bins that do not exist are omitted; the record itself is found (0).
    client.put(key(uset), {"a": 1})
    _, meta, bins = client.select(key(uset), ["zz"])
    assert not bins
    assert meta["gen"] == 1


def test_select_on_a_missing_record_is_not_found(client, uset):
    with pytest.raises(ex.RecordNotFound) as e:
        client.select(key(uset, "missing"), ["a"])
    assert e.value.code == 2


def test_exists_returns_generation_and_ttl_without_bins(client, uset):
    client.put(key(uset), {"a": 1})
    client.put(key(uset), {"a": 2})
    _, meta = client.exists(key(uset))
    assert meta is not None
    assert meta["gen"] == 2
    # test has default-ttl 0: never expires; the client reports 0xFFFFFFFF (or -1).
    assert meta["ttl"] in (0xFFFFFFFF, -1)


def test_exists_on_a_missing_record_returns_no_meta(client, uset):
    _, meta = client.exists(key(uset, "missing"))
    assert meta is None


def test_get_of_a_missing_record_is_record_not_found_code_2(client, uset):
    with pytest.raises(ex.RecordNotFound) as e:
        client.get(key(uset, "missing"))
    assert e.value.code == 2


def test_generation_starts_at_1_and_increments_on_every_write(client, uset):
    for expected in range(1, 6):
        client.put(key(uset), {"n": expected})
        _, meta, bins = client.get(key(uset))
        assert meta["gen"] == expected
        assert bins == {"n": expected}


def test_put_with_no_bins_is_parameter_error_4(client, uset):
    # write.c write_master_policies: "bin op(s) expected, none present" -> AS_ERR_PARAMETER.
    with pytest.raises(ex.InvalidRequest) as e:
        client.put(key(uset), {})
    assert e.value.code == 4
    assert client.exists(key(uset))[1] is None


def test_put_merges_bins_into_an_existing_record(client, uset):
    client.put(key(uset), {"a": 1, "b": 2})
    client.put(key(uset), {"b": 20, "c": 30})
    assert client.get(key(uset))[2] == {"a": 1, "b": 20, "c": 30}


def test_remove_then_get_is_not_found(client, uset):
    client.put(key(uset), {"a": 1})
    client.remove(key(uset))
    with pytest.raises(ex.RecordNotFound):
        client.get(key(uset))


def test_a_recreated_record_starts_again_at_generation_1(client, uset):
    client.put(key(uset), {"a": 1})
    client.put(key(uset), {"a": 2})
    client.remove(key(uset))
    client.put(key(uset), {"a": 3})
    _, meta, bins = client.get(key(uset))
    assert bins == {"a": 3}
    assert meta["gen"] == 1


def test_send_key_policy_returns_the_user_key_in_the_key_tuple(client, uset):
    # The key tuple's user key comes from the read policy (python suite test_get_put.py
    # test_pos_get_with_policy_key_digest): a real server does not echo the key on reads.
    send = {"key": aerospike.POLICY_KEY_SEND}
    client.put(key(uset, "sent"), {"a": 1}, policy=send)
    (ns, set_name, user_key, digest), _, bins = client.get(key(uset, "sent"), policy=send)
    assert (ns, set_name, user_key) == ("test", uset, "sent")
    assert bytes(digest) == bytes(aerospike.calc_digest("test", uset, "sent"))
    assert bins == {"a": 1}
    (_, _, user_key, _), _, _ = client.get(key(uset, "sent"))
    assert user_key is None


def _raw_write_with_key(server, uset, digest, key_text):
    with server.raw() as s:
        return aswire.request_msg(
            s,
            aswire.as_msg(
                aswire.record_fields("test", uset, digest, aswire.key_field_str(key_text)),
                [aswire.write_int("raw", 1)],
                info2=aswire.INFO2_WRITE,
            ),
        ).result_code


def test_send_key_policy_stores_the_key_on_the_server(server, client, uset):
    # Proof of storage: another key sent with the same digest is KEY_MISMATCH (19).
    client.put(key(uset, "sent"), {"a": 1}, policy={"key": aerospike.POLICY_KEY_SEND})
    digest = aerospike.calc_digest("test", uset, "sent")
    assert _raw_write_with_key(server, uset, digest, "other") == aswire.KEY_MISMATCH
    assert _raw_write_with_key(server, uset, digest, "sent") == aswire.OK
    assert client.get(key(uset, "sent"))[2] == {"a": 1, "raw": 1}


def test_digest_key_policy_stores_no_key(server, client, uset):
    client.put(key(uset, "unsent"), {"a": 1}, policy={"key": aerospike.POLICY_KEY_DIGEST})
    digest = aerospike.calc_digest("test", uset, "unsent")
    assert _raw_write_with_key(server, uset, digest, "other") == aswire.OK


def test_reading_a_record_through_another_set_name_is_parameter_error(client, uset):
    # Same digest, different set: server read.c set_name_check -> AS_ERR_PARAMETER (4).
    client.put(key(uset, "k"), {"a": 1})
    digest = aerospike.calc_digest("test", uset, "k")
    with pytest.raises(ex.InvalidRequest) as e:
        client.get(("test", uset + "x", None, digest))
    assert e.value.code == 4


def test_writing_a_record_through_another_set_name_is_parameter_error(client, uset):
    # server rw_utils.c set_name_check_on_update -> AS_ERR_PARAMETER (4); record unchanged.
    client.put(key(uset, "k"), {"a": 1})
    digest = aerospike.calc_digest("test", uset, "k")
    with pytest.raises(ex.InvalidRequest) as e:
        client.put(("test", uset + "x", None, digest), {"a": 2})
    assert e.value.code == 4
    assert client.get(key(uset, "k"))[2] == {"a": 1}


def test_bin_name_of_16_bytes_is_bin_name_error_21(server, uset):
    # strict_types=False so that the client does not reject the name itself (conversions.c).
    c = server.client(strict_types=False)
    with pytest.raises(ex.BinNameError) as e:
        c.put(key(uset), {"b" * 16: 1})
    assert e.value.code == 21
    with pytest.raises(ex.RecordNotFound):
        c.get(key(uset))


def test_bin_name_of_15_bytes_is_accepted(client, uset):
    client.put(key(uset), {"b" * 15: 1})
    assert client.get(key(uset))[2] == {"b" * 15: 1}


def test_set_name_of_63_bytes_is_accepted(client):
    set_name = ("s" + harness.unique(""))[:20].ljust(63, "x")
    client.put(("test", set_name, "k"), {"a": 1})
    assert client.get(("test", set_name, "k"))[2] == {"a": 1}


def test_set_name_of_64_bytes_is_rejected(server, client):
    # server namespace.c as_namespace_get_create_set_w_len: name >= 64 bytes -> AS_ERR_PARAMETER.
    # The C client may refuse the key itself (as_key set buffer is 64 bytes incl. NUL), so this
    # checks the server with raw bytes and only that the client call fails.
    set_name = harness.unique("s").ljust(64, "y")
    with pytest.raises(ex.AerospikeError):
        client.put(("test", set_name, "k"), {"a": 1})
    digest = aerospike.calc_digest("test", set_name[:63], "k")
    with server.raw() as s:
        reply = aswire.request_msg(
            s,
            aswire.as_msg(
                aswire.record_fields("test", set_name, digest),
                [aswire.write_int("a", 1)],
                info2=aswire.INFO2_WRITE,
            ),
        )
    assert reply.result_code == aswire.PARAMETER


def test_record_over_max_record_size_is_record_too_big_13(client, uset):
    with pytest.raises(ex.RecordTooBig) as e:
        client.put(key(uset), {"big": b"x" * (2 * 1024 * 1024)})
    assert e.value.code == 13
    with pytest.raises(ex.RecordNotFound):
        client.get(key(uset))


def test_update_that_would_exceed_max_record_size_leaves_the_record_unchanged(client, uset):
    client.put(key(uset), {"a": b"x" * (600 * 1024)})
    with pytest.raises(ex.RecordTooBig):
        client.put(key(uset), {"b": b"y" * (600 * 1024)})
    _, meta, bins = client.get(key(uset))
    assert set(bins) == {"a"}
    assert meta["gen"] == 1


def test_record_under_max_record_size_is_stored(client, uset):
    data = bytes(range(256)) * (512 * 4)  # 512 KiB
    client.put(key(uset), {"big": data})
    assert bytes(client.get(key(uset))[2]["big"]) == data


def test_unknown_namespace_is_namespace_not_found_20(server, client):
    # The client already knows the namespaces from `replicas` and fails locally with 20;
    # the server must answer 20 too (section 3.3 step 3), checked with raw bytes.
    with pytest.raises(ex.NamespaceNotFound) as e:
        client.put(("nope", "s", "k"), {"a": 1})
    assert e.value.code == 20
    digest = aerospike.calc_digest("nope", "s", "k")
    with server.raw() as s:
        reply = aswire.request_msg(
            s,
            aswire.as_msg(
                aswire.record_fields("nope", "s", digest), [aswire.write_int("a", 1)], info2=aswire.INFO2_WRITE
            ),
        )
        assert reply.result_code == aswire.NAMESPACE
        reply = aswire.request_msg(
            s,
            aswire.as_msg(
                aswire.record_fields("nope", "s", digest), [], info1=aswire.INFO1_READ | aswire.INFO1_GET_ALL
            ),
        )
        assert reply.result_code == aswire.NAMESPACE


def test_a_message_without_a_namespace_field_is_namespace_error_20(server):
    digest = aerospike.calc_digest("test", "s", "k")
    with server.raw() as s:
        reply = aswire.request_msg(
            s,
            aswire.as_msg(
                [aswire.set_field("s"), aswire.digest_field(digest)],
                [],
                info1=aswire.INFO1_READ | aswire.INFO1_GET_ALL,
            ),
        )
    assert reply.result_code == aswire.NAMESPACE

"""Record-exists and generation policies, delete, touch, remove_bin (reference 3.2, 5.2, 7)."""

from __future__ import annotations

import aerospike
import pytest
from aerospike import exception as ex


def key(uset, k="k"):
    return ("test", uset, k)


def exists(policy):
    return {"exists": policy}


# -- record-exists policies ----------------------------------------------------------------------
# Python -> wire (go7 writeHeaderWrite, same in the C client): IGNORE = update (create or merge),
# UPDATE = update-only, CREATE_OR_REPLACE = replace, REPLACE = replace-only, CREATE = create-only.


def test_default_policy_creates_a_missing_record(client, uset):
    client.put(key(uset), {"a": 1}, policy=exists(aerospike.POLICY_EXISTS_IGNORE))
    assert client.get(key(uset))[2] == {"a": 1}


def test_update_only_merges_into_an_existing_record(client, uset):
    client.put(key(uset), {"a": 1, "b": 2})
    client.put(key(uset), {"b": 3, "c": 4}, policy=exists(aerospike.POLICY_EXISTS_UPDATE))
    _, meta, bins = client.get(key(uset))
    assert bins == {"a": 1, "b": 3, "c": 4}
    assert meta["gen"] == 2


def test_update_only_on_a_missing_record_is_not_found_2(client, uset):
    with pytest.raises(ex.RecordNotFound) as e:
        client.put(key(uset), {"a": 1}, policy=exists(aerospike.POLICY_EXISTS_UPDATE))
    assert e.value.code == 2
    assert client.exists(key(uset))[1] is None


def test_replace_drops_the_bins_not_written(client, uset):
    client.put(key(uset), {"a": 1, "b": 2})
    client.put(key(uset), {"c": 3}, policy=exists(aerospike.POLICY_EXISTS_CREATE_OR_REPLACE))
    _, meta, bins = client.get(key(uset))
    assert bins == {"c": 3}
    assert meta["gen"] == 2


def test_replace_creates_a_missing_record(client, uset):
    client.put(key(uset), {"c": 3}, policy=exists(aerospike.POLICY_EXISTS_CREATE_OR_REPLACE))
    _, meta, bins = client.get(key(uset))
    assert bins == {"c": 3}
    assert meta["gen"] == 1


def test_replace_only_replaces_an_existing_record(client, uset):
    client.put(key(uset), {"a": 1, "b": 2})
    client.put(key(uset), {"b": 5}, policy=exists(aerospike.POLICY_EXISTS_REPLACE))
    assert client.get(key(uset))[2] == {"b": 5}


def test_replace_only_on_a_missing_record_is_not_found_2(client, uset):
    with pytest.raises(ex.RecordNotFound) as e:
        client.put(key(uset), {"a": 1}, policy=exists(aerospike.POLICY_EXISTS_REPLACE))
    assert e.value.code == 2
    assert client.exists(key(uset))[1] is None


def test_create_only_creates_a_missing_record(client, uset):
    client.put(key(uset), {"a": 1}, policy=exists(aerospike.POLICY_EXISTS_CREATE))
    _, meta, bins = client.get(key(uset))
    assert bins == {"a": 1}
    assert meta["gen"] == 1


def test_create_only_on_an_existing_record_is_record_exists_5_and_changes_nothing(client, uset):
    client.put(key(uset), {"a": 1})
    with pytest.raises(ex.RecordExistsError) as e:
        client.put(key(uset), {"a": 2, "b": 3}, policy=exists(aerospike.POLICY_EXISTS_CREATE))
    assert e.value.code == 5
    _, meta, bins = client.get(key(uset))
    assert bins == {"a": 1}
    assert meta["gen"] == 1


# -- generation policies ---------------------------------------------------------------------------


def test_gen_eq_with_the_current_generation_writes(client, uset):
    client.put(key(uset), {"a": 1})
    client.put(key(uset), {"a": 2})
    client.put(key(uset), {"a": 3}, meta={"gen": 2}, policy={"gen": aerospike.POLICY_GEN_EQ})
    _, meta, bins = client.get(key(uset))
    assert bins == {"a": 3}
    assert meta["gen"] == 3


@pytest.mark.parametrize("gen", [1, 3, 100])
def test_gen_eq_with_another_generation_is_generation_error_3(client, uset, gen):
    client.put(key(uset), {"a": 1})
    client.put(key(uset), {"a": 2})
    with pytest.raises(ex.RecordGenerationError) as e:
        client.put(key(uset), {"a": 9}, meta={"gen": gen}, policy={"gen": aerospike.POLICY_GEN_EQ})
    assert e.value.code == 3
    _, meta, bins = client.get(key(uset))
    assert bins == {"a": 2}
    assert meta["gen"] == 2


def test_gen_gt_with_a_greater_generation_writes(client, uset):
    client.put(key(uset), {"a": 1})
    client.put(key(uset), {"a": 2}, meta={"gen": 5}, policy={"gen": aerospike.POLICY_GEN_GT})
    _, meta, bins = client.get(key(uset))
    assert bins == {"a": 2}
    assert meta["gen"] == 2


@pytest.mark.parametrize("gen", [0, 1])
def test_gen_gt_with_an_equal_or_smaller_generation_is_generation_error_3(client, uset, gen):
    client.put(key(uset), {"a": 1})
    with pytest.raises(ex.RecordGenerationError) as e:
        client.put(key(uset), {"a": 2}, meta={"gen": gen}, policy={"gen": aerospike.POLICY_GEN_GT})
    assert e.value.code == 3
    assert client.get(key(uset))[2] == {"a": 1}


def test_gen_eq_on_a_remove_checks_the_generation(client, uset):
    client.put(key(uset), {"a": 1})
    with pytest.raises(ex.RecordGenerationError):
        client.remove(key(uset), meta={"gen": 7}, policy={"gen": aerospike.POLICY_GEN_EQ})
    assert client.get(key(uset))[2] == {"a": 1}
    client.remove(key(uset), meta={"gen": 1}, policy={"gen": aerospike.POLICY_GEN_EQ})
    assert client.exists(key(uset))[1] is None


# -- delete ------------------------------------------------------------------------------------------


def test_delete_then_get_is_not_found_2(client, uset):
    client.put(key(uset), {"a": 1})
    client.remove(key(uset))
    with pytest.raises(ex.RecordNotFound) as e:
        client.get(key(uset))
    assert e.value.code == 2


def test_delete_of_a_missing_record_is_not_found_2(client, uset):
    with pytest.raises(ex.RecordNotFound) as e:
        client.remove(key(uset, "missing"))
    assert e.value.code == 2


def test_delete_twice_is_not_found_the_second_time(client, uset):
    client.put(key(uset), {"a": 1})
    client.remove(key(uset))
    with pytest.raises(ex.RecordNotFound):
        client.remove(key(uset))


# -- touch ---------------------------------------------------------------------------------------------


def test_touch_bumps_the_generation_and_sets_the_ttl(client, uset):
    client.put(key(uset), {"a": 1})
    client.touch(key(uset), 1000)
    _, meta, bins = client.get(key(uset))
    assert bins == {"a": 1}
    assert meta["gen"] == 2
    assert 990 <= meta["ttl"] <= 1000


def test_touch_with_never_expire_clears_the_ttl(client, uset):
    client.put(key(uset), {"a": 1}, meta={"ttl": 1000})
    client.touch(key(uset), aerospike.TTL_NEVER_EXPIRE)
    _, meta = client.exists(key(uset))
    assert meta["gen"] == 2
    assert meta["ttl"] in (0xFFFFFFFF, -1)


def test_touch_of_a_missing_record_is_not_found_2(client, uset):
    with pytest.raises(ex.RecordNotFound) as e:
        client.touch(key(uset, "missing"), 100)
    assert e.value.code == 2
    assert client.exists(key(uset, "missing"))[1] is None


# -- bin removal ---------------------------------------------------------------------------------------


def test_remove_bin_removes_only_the_named_bins(client, uset):
    client.put(key(uset), {"a": 1, "b": 2, "c": 3})
    client.remove_bin(key(uset), ["a", "c"])
    _, meta, bins = client.get(key(uset))
    assert bins == {"b": 2}
    assert meta["gen"] == 2


def test_putting_none_removes_a_bin(client, uset):
    client.put(key(uset), {"a": 1, "b": 2})
    client.put(key(uset), {"a": None})
    assert client.get(key(uset))[2] == {"b": 2}


def test_removing_the_last_bin_deletes_the_record(client, uset):
    # write.c: a record left with no bins is deleted.
    client.put(key(uset), {"a": 1})
    client.remove_bin(key(uset), ["a"])
    with pytest.raises(ex.RecordNotFound):
        client.get(key(uset))


def test_put_with_all_bins_none_on_a_new_record_is_not_found_and_creates_nothing(client, uset):
    # write.c write_master_apply: only bin deletes on a record that did not exist -> AS_ERR_NOT_FOUND.
    with pytest.raises(ex.RecordNotFound) as e:
        client.put(key(uset), {"a": None, "b": None})
    assert e.value.code == 2
    assert client.exists(key(uset))[1] is None

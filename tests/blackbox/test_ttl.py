"""TTL and expiry (reference 3.1 special record_ttl values; server record.c, rw_utils.h)."""

from __future__ import annotations

import time

import aerospike
import pytest
from aerospike import exception as ex

import harness

NEVER = (0xFFFFFFFF, -1)  # what the C client reports for void time 0
MAX_TTL = 315360000  # 10 years: MAX_ALLOWED_TTL in server rw_utils.h


def key(uset, k="k", ns="test"):
    return (ns, uset, k)


def test_ttl_in_meta_is_reported_back_by_get(client, uset):
    client.put(key(uset), {"a": 1}, meta={"ttl": 1000})
    _, meta, _ = client.get(key(uset))
    assert 998 <= meta["ttl"] <= 1000


def test_ttl_given_in_the_write_policy_is_applied(client, uset):
    client.put(key(uset), {"a": 1}, policy={"ttl": 5000})
    _, meta = client.exists(key(uset))
    assert 4998 <= meta["ttl"] <= 5000


def test_ttl_minus_one_never_expires(client, uset):
    client.put(key(uset), {"a": 1}, meta={"ttl": aerospike.TTL_NEVER_EXPIRE})
    _, meta, _ = client.get(key(uset))
    assert meta["ttl"] in NEVER


def test_ttl_minus_one_in_a_namespace_with_a_default_ttl_never_expires(client, uset):
    client.put(key(uset, ns="short"), {"a": 1}, meta={"ttl": aerospike.TTL_NEVER_EXPIRE})
    time.sleep(2.5)
    _, meta, bins = client.get(key(uset, ns="short"))
    assert bins == {"a": 1}
    assert meta["ttl"] in NEVER


def test_ttl_zero_in_a_namespace_without_default_ttl_never_expires(client, uset):
    client.put(key(uset), {"a": 1}, meta={"ttl": aerospike.TTL_NAMESPACE_DEFAULT})
    assert client.get(key(uset))[1]["ttl"] in NEVER


def test_ttl_minus_two_keeps_the_existing_void_time_on_update(client, uset):
    client.put(key(uset), {"a": 1}, meta={"ttl": 1000})
    time.sleep(2.1)
    client.put(key(uset), {"a": 2}, meta={"ttl": aerospike.TTL_DONT_UPDATE})
    _, meta, bins = client.get(key(uset))
    assert bins == {"a": 2}
    assert meta["gen"] == 2
    # Kept: void time is still t0 + 1000, so at least 2 s have gone (a reset would give >= 999).
    assert 990 <= meta["ttl"] <= 998, meta


def test_ttl_minus_two_keeps_never_expire_on_update(client, uset):
    client.put(key(uset), {"a": 1}, meta={"ttl": aerospike.TTL_NEVER_EXPIRE})
    client.put(key(uset), {"a": 2}, meta={"ttl": aerospike.TTL_DONT_UPDATE})
    assert client.get(key(uset))[1]["ttl"] in NEVER


def test_ttl_minus_two_on_create_uses_the_namespace_default(client, uset):
    client.put(key(uset, ns="short"), {"a": 1}, meta={"ttl": aerospike.TTL_DONT_UPDATE})
    _, meta, _ = client.get(key(uset, ns="short"))
    assert 1 <= meta["ttl"] <= 2


def test_ttl_zero_uses_the_namespace_default_and_the_record_expires(client, uset):
    k = key(uset, ns="short")
    client.put(k, {"a": 1}, meta={"ttl": aerospike.TTL_NAMESPACE_DEFAULT})
    _, meta, _ = client.get(k)
    assert 1 <= meta["ttl"] <= 2
    time.sleep(3.1)
    with pytest.raises(ex.RecordNotFound):
        client.get(k)


def test_a_write_resets_the_ttl_to_the_namespace_default(client, uset):
    k = key(uset, ns="short")
    client.put(k, {"a": 1}, meta={"ttl": 1000})
    client.put(k, {"a": 2})
    _, meta, _ = client.get(k)
    assert 1 <= meta["ttl"] <= 2


def test_ttl_of_ten_years_is_accepted(client, uset):
    client.put(key(uset), {"a": 1}, meta={"ttl": MAX_TTL})
    _, meta, _ = client.get(key(uset))
    assert MAX_TTL - 2 <= meta["ttl"] <= MAX_TTL


def test_ttl_over_ten_years_is_parameter_error_4(client, uset):
    with pytest.raises(ex.InvalidRequest) as e:
        client.put(key(uset), {"a": 1}, meta={"ttl": MAX_TTL + 1})
    assert e.value.code == 4
    assert client.exists(key(uset))[1] is None


def test_touch_with_ttl_over_ten_years_is_parameter_error_4(client, uset):
    client.put(key(uset), {"a": 1})
    with pytest.raises(ex.InvalidRequest):
        client.touch(key(uset), MAX_TTL + 1)
    _, meta = client.exists(key(uset))
    assert meta["gen"] == 1


def test_a_record_with_ttl_1_is_not_found_two_seconds_later(client, uset):
    client.put(key(uset), {"a": 1}, meta={"ttl": 1})
    assert client.get(key(uset))[2] == {"a": 1}
    time.sleep(2.1)
    with pytest.raises(ex.RecordNotFound):
        client.get(key(uset))
    assert client.exists(key(uset))[1] is None


def test_an_expired_record_is_invisible_even_before_any_sweep(start_server, uset):
    # nsup-period 0: nothing ever sweeps, so only the read path can hide the record.
    srv = start_server(namespaces=[harness.namespace("test", nsup_period=0, allow_ttl_without_nsup=True)])
    c = srv.client()
    c.put(key(uset), {"a": 1}, meta={"ttl": 1})
    c.put(key(uset, "keep"), {"a": 2})
    time.sleep(2.1)
    with pytest.raises(ex.RecordNotFound):
        c.get(key(uset))
    assert c.exists(key(uset))[1] is None
    with pytest.raises(ex.RecordNotFound):
        c.operate(key(uset), [{"op": aerospike.OPERATOR_READ, "bin": "a"}])
    # Updating an expired record starts a new one.
    c.put(key(uset), {"b": 1}, policy={"exists": aerospike.POLICY_EXISTS_IGNORE})
    _, meta, bins = c.get(key(uset))
    assert bins == {"b": 1}
    assert meta["gen"] == 1
    assert c.get(key(uset, "keep"))[2] == {"a": 2}


def test_the_sweeper_removes_expired_records_and_counts_them(start_server, uset):
    srv = start_server(namespaces=[harness.namespace("test", nsup_period=1)])
    c = srv.client()
    n = 5
    for i in range(n):
        c.put(key(uset, i), {"i": i}, meta={"ttl": 1})
    c.put(key(uset, "keep"), {"i": -1})
    stats = harness.ns_stats(c, "test")
    assert int(stats["objects"]) == n + 1
    assert int(stats.get("expired_objects", "0")) == 0
    assert harness.set_objects(c, "test", uset) == n + 1

    def swept():
        s = harness.ns_stats(c, "test")
        return int(s["objects"]) == 1 and int(s.get("expired_objects", -1)) == n

    assert harness.wait_until(swept, timeout=6.0, interval=0.2), harness.ns_stats(c, "test")
    assert harness.set_objects(c, "test", uset) == 1
    assert c.get(key(uset, "keep"))[2] == {"i": -1}


def test_without_nsup_a_ttl_write_is_forbidden_22_but_never_expire_is_accepted(start_server, uset):
    # server rw_utils.h is_ttl_disallowed: nsup-period 0 and allow-ttl-without-nsup false.
    srv = start_server(namespaces=[harness.namespace("test", nsup_period=0, allow_ttl_without_nsup=False)])
    c = srv.client()
    with pytest.raises(ex.ForbiddenError) as e:
        c.put(key(uset), {"a": 1}, meta={"ttl": 100})
    assert e.value.code == 22
    assert c.exists(key(uset))[1] is None
    c.put(key(uset), {"a": 1}, meta={"ttl": aerospike.TTL_NEVER_EXPIRE})
    c.put(key(uset, "default"), {"a": 1}, meta={"ttl": aerospike.TTL_NAMESPACE_DEFAULT})
    assert c.get(key(uset))[1]["ttl"] in NEVER
    assert c.get(key(uset, "default"))[1]["ttl"] in NEVER
    stats = harness.ns_stats(c, "test")
    assert stats["nsup-period"] == "0"
    assert stats["allow-ttl-without-nsup"] == "false"


def test_read_touch_resets_the_ttl_of_the_last_write_and_keeps_the_generation(client, uset):
    """Aerospike's `read_touch_ttl_percent`: a read touches the record once its remaining TTL is
    within that percent of the last write's TTL; the TTL starts again and the generation stays.
    -1 never touches; over 100 is a bad parameter."""
    k = key(uset, "touched")
    client.put(k, {"a": 1}, meta={"ttl": 10})
    time.sleep(1.2)
    # 9 of 10 seconds left: more than 50% of the TTL, so no touch.
    assert client.get(k, policy={"read_touch_ttl_percent": 50})[2] == {"a": 1}
    assert client.exists(k)[1]["ttl"] in (8, 9)
    client.get(k, policy={"read_touch_ttl_percent": -1})
    assert client.exists(k)[1]["ttl"] in (8, 9)
    # Within 100% of the TTL: the read touches, the TTL is 10 again, the generation stays 1.
    client.get(k, policy={"read_touch_ttl_percent": 100})
    _, meta = client.exists(k)
    assert meta["ttl"] in (9, 10) and meta["gen"] == 1, meta
    with pytest.raises(ex.InvalidRequest):  # PARAMETER (4)
        client.get(k, policy={"read_touch_ttl_percent": 101})
    # A record that never expires is never touched.
    forever = key(uset, "forever")
    client.put(forever, {"a": 1}, meta={"ttl": -1})
    client.get(forever, policy={"read_touch_ttl_percent": 100})
    assert client.exists(forever)[1]["gen"] == 1

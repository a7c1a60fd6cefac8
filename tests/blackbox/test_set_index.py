"""Set indexes: enabled by info command or config file, invisible to clients except for speed.

Aerospike (reference 9; server cfg_info.c cfg_set_set, set_index.c, namespace.c append_set_props):
`set-config:context=namespace;id=<ns>;set=<set>;enable-index=true|false` answers `ok`, any other
value is an error; `sets/<ns>/<set>` shows `enable-index` and `index_populating` while the
background build runs. A scan must return the same records whether the set is indexed or not,
while the index is being built, and after writes, deletes, expiry and truncates.

The tests run on a server of their own whose namespace holds a filler set, so that each test's
sets are a small or a large share of the namespace as intended.
"""

from __future__ import annotations

import time

import aerospike
import pytest

import harness

# Records of other sets. Enough that a partition holds about ten of them, so that a set can be a
# small share of each partition (the case a set index is for) as well as a large one.
FILLER = 40_000


@pytest.fixture(scope="module")
def ixserver():
    try:
        srv = harness.start_server(namespaces=[harness.namespace("test", nsup_period=1)], tag="osprey-setindex")
    except FileNotFoundError as e:
        pytest.fail(str(e), pytrace=False)
    harness.put_many(srv, "test", "filler", ((i, {"f": i}) for i in range(FILLER)), send_key=False)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def ixclient(ixserver):
    return ixserver.client()


def bins_of(i: int) -> dict:
    b = {"id": i, "s": "x" * (i % 50)}
    if i % 4 == 0:
        b["tag"] = i
    return b


def load(srv, set_name: str, keys) -> None:
    harness.put_many(srv, "test", set_name, ((i, bins_of(i)) for i in keys))


def digest(set_name: str, k) -> bytes:
    return bytes(aerospike.calc_digest("test", set_name, k))


def enable_index(srv, set_name: str, on: bool = True, ns_param: str = "id") -> str:
    return harness.raw_info(
        srv, f"set-config:context=namespace;{ns_param}=test;set={set_name};enable-index={'true' if on else 'false'}"
    )


def wait_built(client, set_name: str, timeout: float = 10.0) -> dict:
    info = harness.wait_until(
        lambda: (i if (i := harness.set_info(client, "test", set_name))["index_populating"] == "false" else None), timeout
    )
    assert info, f"index of {set_name} still populating after {timeout}s: {harness.set_info(client, 'test', set_name)}"
    return info


def snapshot(client, set_name: str) -> dict:
    """Everything a client can observe through scans of one set."""
    full = harness.by_digest(harness.scan(client, "test", set_name))
    selected = harness.by_digest(harness.scan(client, "test", set_name, select=["tag"]))
    nobins = harness.by_digest(harness.scan(client, "test", set_name, nobins=True))
    assert all(r[2] == {} for r in nobins.values())
    pages = harness.paginate(client, "test", set_name, max(7, len(full) // 15))
    paged = harness.by_digest([r for p in pages for r in p])
    pf = {"partition_filter": {"begin": 1000, "count": 1500}}
    filtered = harness.by_digest(client.query("test", set_name).results(pf))
    q = client.query("test", set_name)
    q.max_records = 25
    capped = harness.by_digest(q.results())
    assert set(capped) <= set(full)
    return {
        "full": {d: (r[0][2], r[1]["gen"], r[2]) for d, r in full.items()},
        "selected": {d: r[2] for d, r in selected.items()},
        "nobins": {d: r[1]["gen"] for d, r in nobins.items()},
        "page_sizes": [len(p) for p in pages],
        "paged": {d: r[2] for d, r in paged.items()},
        "filtered": set(filtered),
        "capped": len(capped),
    }


# -- the info command and the sets listing -------------------------------------------------------


def test_enable_index_answers_ok_and_shows_in_sets(ixserver, ixclient):
    s = harness.unique("ix")
    load(ixserver, s, range(300))
    before = harness.set_info(ixclient, "test", s)
    assert before["enable-index"] == "false"
    assert before["index_populating"] == "false"

    assert enable_index(ixserver, s, True) == "ok"
    info = harness.set_info(ixclient, "test", s)
    assert info["enable-index"] == "true"
    assert info["index_populating"] in ("true", "false")  # true while the build runs
    info = wait_built(ixclient, s)
    assert info["enable-index"] == "true"
    assert int(info["objects"]) == 300

    assert enable_index(ixserver, s, True) == "ok"  # enabling twice is harmless
    assert enable_index(ixserver, s, False) == "ok"
    info = harness.set_info(ixclient, "test", s)
    assert info["enable-index"] == "false" and info["index_populating"] == "false"
    assert enable_index(ixserver, s, False) == "ok"


def test_enable_index_accepts_namespace_instead_of_id(ixserver, ixclient):
    s = harness.unique("ix")
    load(ixserver, s, range(20))
    assert enable_index(ixserver, s, True, ns_param="namespace") == "ok"
    assert wait_built(ixclient, s)["enable-index"] == "true"
    assert enable_index(ixserver, s, False, ns_param="namespace") == "ok"
    assert harness.set_info(ixclient, "test", s)["enable-index"] == "false"


@pytest.mark.parametrize("value", ["yes", "1", "TRUE", ""])
def test_a_bad_enable_index_value_is_an_error_and_changes_nothing(ixserver, ixclient, value):
    s = harness.unique("ix")
    load(ixserver, s, range(10))
    reply = harness.raw_info(ixserver, f"set-config:context=namespace;id=test;set={s};enable-index={value}")
    assert reply.startswith("ERROR"), reply
    assert harness.set_info(ixclient, "test", s)["enable-index"] == "false"


def test_enable_index_in_an_unknown_namespace_is_an_error(ixserver):
    reply = harness.raw_info(ixserver, "set-config:context=namespace;id=no-such-ns;set=s;enable-index=true")
    assert reply.startswith("ERROR"), reply


def test_an_index_enabled_in_the_config_file(start_server):
    srv = start_server(
        namespaces=[harness.namespace("test", nsup_period=1, sets=[{"name": "cfgset", "enable-index": True}])]
    )
    c = srv.client()
    harness.put_many(srv, "test", "other", ((i, {"o": i}) for i in range(500)))
    load(srv, "cfgset", range(60))
    info = wait_built(c, "cfgset")
    assert info["enable-index"] == "true"
    assert int(info["objects"]) == 60
    assert harness.set_info(c, "test", "other")["enable-index"] == "false"
    got = harness.by_digest(harness.scan(c, "test", "cfgset"))
    assert {d: r[2] for d, r in got.items()} == {digest("cfgset", i): bins_of(i) for i in range(60)}
    assert int(harness.ns_stats(c, "test")["set_index_used_bytes"]) > 0
    # It can be switched off at runtime like any other.
    assert enable_index(srv, "cfgset", False) == "ok"
    assert harness.set_info(c, "test", "cfgset")["enable-index"] == "false"


# -- scans see the same data with the index on, off and building ----------------------------------

SHARES = {
    # A partition holds at most a record or two of the set among about ten others.
    "small": 40,
    # About one record of the set in a partition of about ten.
    "medium": 3000,
    # About a quarter of each partition.
    "large": 12000,
}


@pytest.mark.parametrize("share", list(SHARES))
def test_scans_are_identical_with_and_without_the_index(ixserver, ixclient, share):
    s = harness.unique("ix")
    n = SHARES[share]
    load(ixserver, s, range(n))
    for i in range(0, n, 7):
        ixclient.put(("test", s, i), {"again": i})  # generation 2 and other bins for some

    off = snapshot(ixclient, s)
    assert len(off["full"]) == n
    assert enable_index(ixserver, s, True) == "ok"
    wait_built(ixclient, s)
    on = snapshot(ixclient, s)
    assert enable_index(ixserver, s, False) == "ok"
    off_again = snapshot(ixclient, s)
    assert on == off
    assert off_again == off


@pytest.mark.parametrize("share", list(SHARES))
@pytest.mark.parametrize("toggle", ["enable once", "enable and disable between pages"])
def test_changing_the_index_while_a_scan_paginates(ixserver, ixclient, share, toggle):
    """The index is enabled (its build starts, no waiting) between two pages of a scan, or
    switched on and off between every page: the pages still hold every record once."""
    s = harness.unique("ix")
    n = SHARES[share]
    load(ixserver, s, range(n))
    page_size = max(3, n // 12)

    def between(i):
        if toggle == "enable once":
            if i == 0:
                assert enable_index(ixserver, s, True) == "ok"
        else:
            assert enable_index(ixserver, s, i % 2 == 0) == "ok"

    pages = harness.paginate(ixclient, "test", s, page_size, between_pages=between)
    got = harness.by_digest([r for p in pages for r in p])
    assert {d: r[2] for d, r in got.items()} == {digest(s, i): bins_of(i) for i in range(n)}
    assert all(len(p) == page_size for p in pages[:-1]), [len(p) for p in pages]
    assert enable_index(ixserver, s, True) == "ok"
    wait_built(ixclient, s)
    assert set(harness.by_digest(harness.scan(ixclient, "test", s))) == set(got)


def test_writes_and_deletes_after_enabling_are_seen_by_scans(ixserver, ixclient):
    s = harness.unique("ix")
    load(ixserver, s, range(200))
    assert enable_index(ixserver, s, True) == "ok"
    wait_built(ixclient, s)

    model = {i: bins_of(i) for i in range(200)}
    for i in range(200, 260):  # inserts
        ixclient.put(("test", s, i), {"id": i, "new": True})
        model[i] = {"id": i, "new": True}
    for i in range(0, 200, 3):  # deletes
        ixclient.remove(("test", s, i))
        del model[i]
    for i in range(1, 200, 5):  # updates
        if i in model:
            ixclient.put(("test", s, i), {"upd": i})
            model[i] = {**model[i], "upd": i}
    ixclient.put(("test", s, 0), {"back": 1})  # deleted, then written again
    model[0] = {"back": 1}

    want = {digest(s, i): b for i, b in model.items()}
    got = harness.by_digest(harness.scan(ixclient, "test", s))
    assert {d: r[2] for d, r in got.items()} == want
    pages = harness.paginate(ixclient, "test", s, 17)
    assert {d: r[2] for d, r in harness.by_digest([r for p in pages for r in p]).items()} == want
    assert harness.set_objects(ixclient, "test", s) == len(model)

    # The same key in another set is another record, not one of this set's.
    other = harness.unique("ix")
    ixclient.put(("test", other, 1), {"x": 1})
    assert set(harness.by_digest(harness.scan(ixclient, "test", s))) == set(want)


def test_expired_records_leave_indexed_scans(ixserver, ixclient):
    s = harness.unique("ix")
    assert enable_index(ixserver, s, True) == "ok"
    # TTL 2: void times are whole seconds, so these expire 1 to 2 s from now.
    harness.put_many(ixserver, "test", s, ((i, {"i": i}) for i in range(30)), ttl=2)
    harness.put_many(ixserver, "test", s, ((i, {"i": i}) for i in range(30, 50)))
    wait_built(ixclient, s)
    assert len(harness.scan(ixclient, "test", s)) == 50
    survivors = {digest(s, i) for i in range(30, 50)}
    # The records are gone from scans once their void time passed (nsup-period is 1 s).
    got = harness.wait_until(lambda: set(harness.by_digest(harness.scan(ixclient, "test", s))) == survivors, 6)
    assert got, f"{len(harness.scan(ixclient, 'test', s))} records after expiry, want 20"
    assert set(harness.by_digest(r for p in harness.paginate(ixclient, "test", s, 7) for r in p)) == survivors
    assert harness.wait_until(lambda: harness.set_objects(ixclient, "test", s) == 20, 5)


def test_set_index_used_bytes_grows_when_an_index_is_enabled(ixserver, ixclient):
    s = harness.unique("ix")
    load(ixserver, s, range(800))
    before = int(harness.ns_stats(ixclient, "test")["set_index_used_bytes"])
    assert enable_index(ixserver, s, True) == "ok"
    wait_built(ixclient, s)
    during = int(harness.ns_stats(ixclient, "test")["set_index_used_bytes"])
    assert during > before
    load(ixserver, s, range(800, 1600))
    grown = int(harness.ns_stats(ixclient, "test")["set_index_used_bytes"])
    assert grown > during
    assert enable_index(ixserver, s, False) == "ok"
    # Disabling frees the index (server set_index.c as_set_index_disable destroys the trees).
    assert harness.wait_until(lambda: int(harness.ns_stats(ixclient, "test")["set_index_used_bytes"]) <= before, 5)


def test_truncate_of_an_indexed_set_leaves_exactly_the_survivors(ixserver, ixclient):
    s = harness.unique("ix")
    assert enable_index(ixserver, s, True) == "ok"
    load(ixserver, s, range(150))
    time.sleep(0.05)
    cut = time.time_ns()
    time.sleep(0.05)
    load(ixserver, s, range(150, 200))
    ixclient.truncate("test", s, cut)
    want = {digest(s, i) for i in range(150, 200)}
    assert set(harness.by_digest(harness.scan(ixclient, "test", s))) == want
    assert set(harness.by_digest(r for p in harness.paginate(ixclient, "test", s, 9) for r in p)) == want
    assert harness.wait_until(lambda: harness.set_objects(ixclient, "test", s) == 50, 5)
    # The filler set is untouched.
    assert harness.set_objects(ixclient, "test", "filler") == FILLER

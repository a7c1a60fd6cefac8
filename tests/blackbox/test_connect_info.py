"""Connecting with the official client and the info protocol (reference sections 2.1-2.5)."""

from __future__ import annotations

import re

import aerospike
import pytest
from aerospike import exception as ex

import aswire
import harness
from harness import info, parse_kv, parse_sets

# Base64 of 512 bytes of 0xFF: the bitmap of a node that owns all 4096 partitions (section 2.4).
ALL_PARTITIONS = "/" * 682 + "8="


def test_client_connects_and_reports_connected(server):
    c = server.client()
    assert c.is_connected() is True
    c.close()
    assert c.is_connected() is False


def test_client_with_matching_cluster_name_connects(server):
    c = server.client(cluster_name="bbtest")
    assert c.is_connected()
    key = ("test", harness.unique("s"), "cn")
    c.put(key, {"a": 1})
    assert c.get(key)[2] == {"a": 1}


def test_client_with_another_cluster_name_rejects_the_node(server):
    # Seed validation compares `cluster-name` with the configured name (c as_lookup.c).
    with pytest.raises(ex.AerospikeError):
        c = aerospike.client(harness.client_config(server.port, cluster_name="not-this-cluster"))
        c.connect()
        c.close()


def test_node_is_a_non_empty_upper_case_hex_id_equal_to_the_client_node_name(client):
    value = info(client, "node")
    assert re.fullmatch(r"[0-9A-F]+", value), value
    assert harness.node_name(client) == value


def test_node_id_is_stable_across_requests(client):
    assert info(client, "node") == info(client, "node")


def test_build_is_a_dotted_numeric_version_of_at_least_three_parts(client):
    value = info(client, "build")
    assert re.fullmatch(r"\d+(\.\d+){2,3}", value), value
    parts = tuple(int(p) for p in value.split("."))
    # The C client (python 19) refuses servers older than 4.9.0.3 (c as_lookup.c).
    assert parts >= (4, 9, 0, 3)


def test_edition_names_an_aerospike_edition(client):
    assert info(client, "edition") in ("Aerospike Community Edition", "Aerospike Enterprise Edition")


def test_version_names_the_edition_and_the_build(client):
    value = info(client, "version")
    build = info(client, "build")
    assert value.startswith("Aerospike "), value
    assert value.endswith("build " + build), value


def test_help_lists_every_info_command_and_each_is_recognized(server):
    commands = harness.raw_info(server, "help").split(";")
    assert {"help", "statistics", "udf-put", "sindex-create", "query-show"} <= set(commands)
    # Commands that change something are asked with no parameters only where that is harmless.
    changes = {"cluster-leave", "truncate", "truncate-namespace", "query-abort-all", "scan-abort-all"}
    for command in commands:
        if command not in changes:
            assert "unrecognized command" not in harness.raw_info(server, command), command


def test_features_contains_pscans_and_the_collection_types(client):
    tokens = info(client, "features").split(";")
    assert all(tokens), f"empty token in features: {tokens}"
    assert {"pscans", "cdt-list", "cdt-map", "blob-bits", "geo", "udf"} <= set(tokens)


def test_partition_generation_is_an_integer_other_than_minus_one(client):
    value = int(info(client, "partition-generation"))
    assert value != -1
    assert value >= 0


def test_peers_generation_is_an_integer(client):
    assert int(info(client, "peers-generation")) >= 0


def test_peers_clear_std_lists_no_peers_with_the_default_port(client):
    value = info(client, "peers-clear-std")
    m = re.fullmatch(r"(\d+),3000,\[\]", value)
    assert m, value
    assert int(m.group(1)) == int(info(client, "peers-generation"))


def test_replicas_gives_every_namespace_all_partitions_in_ap_mode(client):
    value = info(client, "replicas")
    entries = value.split(";")
    assert len(entries) == 2, value[:200]
    seen = {}
    for e in entries:
        name, _, rest = e.partition(":")
        regime, n, bitmap = rest.split(",")
        assert regime == "0"
        assert n == "1"
        assert len(bitmap) == 684
        assert bitmap == ALL_PARTITIONS
        seen[name] = True
    assert set(seen) == {"test", "short"}


def test_replicas_entry_for_test_has_the_exact_form(client):
    value = info(client, "replicas")
    assert "test:0,1," + ALL_PARTITIONS in value.split(";")


def test_namespaces_lists_the_configured_namespaces(client):
    value = info(client, "namespaces")
    assert not value.endswith(";")
    assert sorted(value.split(";")) == ["short", "test"]


def test_namespace_info_has_objects_and_the_configuration(client):
    stats = parse_kv(info(client, "namespace/test"))
    assert int(stats["objects"]) >= 0
    assert stats["nsup-period"] == "1"
    assert stats["default-ttl"] == "0"
    assert stats["storage-engine"] == "memory"
    short = parse_kv(info(client, "namespace/short"))
    assert short["default-ttl"] == "2"
    assert short["nsup-period"] == "1"


def test_namespace_info_for_an_unknown_namespace_is_type_unknown(client):
    assert info(client, "namespace/nope") == "type=unknown"


def test_namespace_objects_grows_by_the_number_of_records_put(client, uset):
    before = harness.ns_objects(client, "test")
    n = 7
    for i in range(n):
        client.put(("test", uset, i), {"i": i})
    assert harness.ns_objects(client, "test") == before + n
    client.remove(("test", uset, 0))
    assert harness.ns_objects(client, "test") == before + n - 1


def test_sets_lists_a_set_with_its_object_count(client, uset):
    for i in range(3):
        client.put(("test", uset, i), {"i": i})
    entries = [e for e in parse_sets(info(client, "sets")) if e.get("set") == uset]
    assert len(entries) == 1, entries
    assert entries[0]["ns"] == "test"
    assert int(entries[0]["objects"]) == 3
    client.remove(("test", uset, 1))
    assert harness.set_objects(client, "test", uset) == 2


def test_statistics_is_a_key_value_list(client):
    stats = parse_kv(info(client, "statistics"))
    assert len(stats) >= 1


def test_cluster_name_is_the_configured_name(client):
    assert info(client, "cluster-name") == "bbtest"


def test_service_clear_std_gives_the_bound_address_and_port(server, client):
    value = info(client, "service-clear-std")
    assert f"127.0.0.1:{server.port}" in value.split(","), value


def test_user_agent_set_is_acknowledged_with_ok(server):
    # The C client itself sends this when build >= 8.1; a raw connection sends it once.
    with server.raw() as s:
        cmd = "user-agent-set:value=cHl0aG9uLWJsYWNrYm94"
        assert aswire.request_info(s, [cmd]) == [(cmd, "ok")]


def test_unknown_info_command_is_unrecognized_error_4(server):
    with server.raw() as s:
        assert aswire.request_info(s, ["no-such-command"]) == [
            ("no-such-command", "ERROR:4:unrecognized command")
        ]


def test_client_raises_invalid_request_for_an_unknown_info_command(client):
    # The C client turns an `ERROR:4:...` value into an error (c as_info.c as_info_validate);
    # the python suite expects InvalidRequest for servers >= 7.1 (test_info_all.py).
    with pytest.raises(ex.InvalidRequest) as e:
        client.info_all("no-such-command")
    assert e.value.code == 4


def test_several_commands_in_one_request_are_answered_in_order(server, client):
    cmds = ["node", "no-such-command", "build", "namespaces", "partition-generation", "namespace/nope"]
    with server.raw() as s:
        pairs = aswire.request_info(s, cmds)
    assert [p[0] for p in pairs] == cmds
    values = dict(pairs)
    assert values["node"] == info(client, "node")
    assert values["no-such-command"] == "ERROR:4:unrecognized command"
    assert values["build"] == info(client, "build")
    assert sorted(values["namespaces"].split(";")) == ["short", "test"]
    assert values["namespace/nope"] == "type=unknown"


def test_the_client_tend_request_is_answered_by_name(server, client):
    # c as_node.c tends with exactly this request and fails on any unexpected name.
    with server.raw() as s:
        pairs = aswire.request_info(s, "node\npeers-generation\npartition-generation\n")
    assert [p[0] for p in pairs] == ["node", "peers-generation", "partition-generation"]
    assert pairs[0][1] == info(client, "node")
    int(pairs[1][1])
    assert int(pairs[2][1]) != -1


def test_the_c_client_seed_request_is_answered_positionally(server):
    # Python 19 (C client) validates a seed with node, partition-generation, build, cluster-name.
    with server.raw() as s:
        pairs = aswire.request_info(s, ["node", "partition-generation", "build", "cluster-name"])
    assert [p[0] for p in pairs] == ["node", "partition-generation", "build", "cluster-name"]
    assert pairs[3][1] == "bbtest"


def test_echoed_name_is_the_whole_command_with_parameters(server):
    cmd = "namespace/test"
    with server.raw() as s:
        ((name, value),) = aswire.request_info(s, [cmd])
    assert name == cmd
    assert "objects=" in value


def test_text_after_the_last_newline_is_ignored(server):
    # Section 2.1: the server only processes complete lines.
    with server.raw() as s:
        pairs = aswire.request_info(s, "node\nbuild")
    assert [p[0] for p in pairs] == ["node"]


def test_an_empty_info_request_returns_the_summary(server, client):
    # Section 2.3(c): the java suite sends an empty request and needs the summary lines.
    with server.raw() as s:
        pairs = dict(aswire.request_info(s, ""))
    for name in ("node", "build", "features", "partition-generation"):
        assert name in pairs, f"summary lacks {name}: {sorted(pairs)}"
    assert pairs["node"] == info(client, "node")

"""INFO and CONFIG through redis-py (RESP2 and RESP3): live figures, section selection, the
settings Osprey has, and Redis's errors for the rest.
"""

from __future__ import annotations

import pytest
import redis

import harness


def test_info_reports_live_figures(r):
    prefix = harness.unique("info")
    before = r.info()
    r.mset({f"{prefix}:{i}": "x" * 100 for i in range(50)})
    r.get(f"{prefix}:0")
    r.get(f"{prefix}:missing")
    after = r.info()
    assert after["redis_version"].startswith("7.")
    assert after["connected_clients"] >= 1
    assert after["db0"]["keys"] >= before.get("db0", {"keys": 0})["keys"] + 50
    assert after["used_memory"] > before["used_memory"]
    assert after["used_memory_rss"] > 0
    assert after["total_commands_processed"] > before["total_commands_processed"]
    assert after["keyspace_hits"] > before["keyspace_hits"]
    assert after["keyspace_misses"] > before["keyspace_misses"]


def test_info_prints_only_the_sections_asked_for(r):
    memory = r.info("memory")
    assert "used_memory" in memory and "redis_version" not in memory
    both = r.execute_command("INFO", "server", "clients")
    assert "redis_version" in both and "connected_clients" in both and "used_memory" not in both
    assert r.info("nosuchsection") == {}


def test_config_get_matches_patterns_and_set_refuses_changes(r):
    assert r.config_get("save") == {"save": ""}
    assert r.config_get("appendonly") == {"appendonly": "no"}
    assert r.config_get("databases") == {"databases": "16"}
    several = r.config_get("max*")
    assert set(several) == {"maxclients", "maxmemory", "maxmemory-clients", "maxmemory-policy",
                            "maxmemory-samples", "maxmemory-eviction-tenacity"}
    assert r.config_get("nosuchsetting") == {}
    assert r.config_set("save", "") is True, "setting the current value is accepted"
    with pytest.raises(redis.ResponseError, match="can't set immutable config"):
        r.config_set("appendonly", "yes")
    with pytest.raises(redis.ResponseError, match="Unknown option or number of arguments for CONFIG SET - 'nosuch'"):
        r.config_set("nosuch", "1")
    with pytest.raises(redis.ResponseError, match="unknown subcommand .NOPE.. Try CONFIG HELP."):
        r.execute_command("CONFIG", "NOPE")
    assert r.config_resetstat() is True


def test_command_entries_have_redis_7s_ten_fields(r):
    """redis-py's RESP3 parser reads all ten fields of each COMMAND entry; Osprey's first
    entries had six, and `r.command()` raised IndexError under RESP3."""
    commands = r.command()
    assert len(commands) == r.command_count()
    get = commands["get"]
    assert (get["arity"], get["first_key_pos"], get["last_key_pos"], get["step_count"]) == (2, 1, 1, 1)
    assert commands["mset"]["step_count"] == 2 and commands["ping"]["first_key_pos"] == 0

"""The log: JSON lines as an option, and levels changed while the server runs, through
Aerospike's `log-set:` and Redis's `CONFIG SET loglevel`.

Lines are recognised by what the server logs at each level: `single-scan-threads changed`
(info, on `set-config`) and `connection closed` (debug, when a client leaves).
"""

from __future__ import annotations

import json
import subprocess
import time

import harness
from harness import OspreyServer, namespace


def test_json_format_writes_one_object_per_line():
    server = OspreyServer({"port": 0}, [namespace("test")], tag="jsonlog",
                          sections={"logging": {"format": "json"}})
    binary = harness.osprey_bin()
    with open(server.log_path, "wb") as stderr:
        process = subprocess.Popen([str(binary), "--config", str(server.config_path)],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        ready = harness.wait_until(
            lambda: next((line for line in server.log_text().splitlines() if "osprey ready" in line), None),
            timeout=10,
        )
        event = json.loads(ready)
        assert event["level"] == "INFO"
        assert event["fields"]["message"] == "osprey ready"
        assert event["target"] == "osprey::server"
        assert event["fields"]["service"].startswith("127.0.0.1:")
        assert all(json.loads(line) for line in server.log_text().splitlines() if line)
    finally:
        process.terminate()
        process.wait(timeout=10)
        server.remove_dir()


def logged_after(server: OspreyServer, mark: int, text: str) -> bool:
    return text in server.log_text()[mark:]


def test_levels_change_at_run_time_through_both_protocols():
    server = OspreyServer({"port": 0}, [namespace("test")], tag="loglevels", resp={"port": 0}).start()
    try:
        redis = server.redis()
        assert redis.config_get("loglevel") == {"loglevel": "notice"}
        assert harness.raw_info(server, "get-config:context=logging") == "level=info;format=text"

        # info: set-config logs; a closed connection (debug) does not.
        mark = len(server.log_text())
        assert harness.raw_info(server, "set-config:context=service;single-scan-threads=3") == "ok"
        server.client().close()
        assert harness.wait_until(lambda: logged_after(server, mark, "single-scan-threads changed"), 5)
        time.sleep(0.3)
        assert not logged_after(server, mark, "connection closed")

        # Aerospike's log-set: debug for everything, then the connection's close shows.
        assert harness.raw_info(server, "log-set:id=0;any=debug") == "ok"
        assert harness.raw_info(server, "get-config:context=logging") == "level=debug;format=text"
        mark = len(server.log_text())
        harness.raw_info(server, "build")
        assert harness.wait_until(lambda: logged_after(server, mark, "connection closed"), 5)
        assert redis.config_get("loglevel") == {"loglevel": "debug"}

        # Redis's loglevel warning: info lines stop too.
        assert redis.config_set("loglevel", "warning")
        mark = len(server.log_text())
        assert harness.raw_info(server, "set-config:context=service;single-scan-threads=4") == "ok"
        time.sleep(0.3)
        assert not logged_after(server, mark, "single-scan-threads changed")

        # One module's level, kept when the overall level changes.
        assert harness.raw_info(server, "log-set:id=0;cluster=debug") == "ok"
        assert redis.config_set("loglevel", "notice")
        assert harness.raw_info(server, "get-config:context=logging") == \
            "level=info,osprey::cluster=debug;format=text"

        assert harness.raw_info(server, "log-set:id=0;any=loud") == 'ERROR:4:bad level "loud"'
        assert harness.raw_info(server, "log-set:filter=info,osprey=[") .startswith("ERROR:4:")
    finally:
        server.stop()


def test_a_bad_level_in_the_configuration_stops_start_up_naming_it():
    server = OspreyServer({"port": 0}, [namespace("test")], tag="badlevel",
                          sections={"logging": {"level": "info,osprey=loud"}})
    result = subprocess.run([str(harness.osprey_bin()), "--config", str(server.config_path)],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 2
    assert "logging.level" in result.stderr
    server.remove_dir()

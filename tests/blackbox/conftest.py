"""Fixtures for the black-box suite: a real `osprey` process driven by the official client.

Run: .venv/bin/python -m pytest tests/blackbox   (OSPREY_BIN overrides the binary path)
"""

from __future__ import annotations

import faulthandler
import resource
import signal

import pytest

import harness


def _raise_nofile_limit() -> None:
    # Servers started from here inherit this limit; the 1000-connection test needs it.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


_raise_nofile_limit()

TEST_TIMEOUT_S = 90


@pytest.fixture(autouse=True)
def _per_test_timeout(request):
    """Fail a test that hangs (every socket and client call also has its own timeout). A test
    that runs long on purpose says how long with `@pytest.mark.timeout_s(seconds)`."""
    marker = request.node.get_closest_marker("timeout_s")
    timeout_s = marker.args[0] if marker else TEST_TIMEOUT_S
    if marker:
        # pytest's stack dump after faulthandler_timeout is for hangs; this test is long on
        # purpose, and its own limit below still catches a hang.
        faulthandler.cancel_dump_traceback_later()

    def on_alarm(signum, frame):
        raise TimeoutError(f"test exceeded {timeout_s}s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


# The session server: namespace `test` swept every second, and `short` whose default TTL is 2 s.
SESSION_NAMESPACES = [
    harness.namespace("test", nsup_period=1),
    harness.namespace("short", default_ttl=2, nsup_period=1),
]


@pytest.fixture(scope="session")
def server():
    try:
        srv = harness.start_server(namespaces=SESSION_NAMESPACES, tag="osprey-session")
    except FileNotFoundError as e:
        pytest.fail(str(e), pytrace=False)
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def client(server):
    """One shared client on the session server (the server closes it at teardown)."""
    return server.client()


@pytest.fixture
def start_server():
    """Factory for extra servers with a custom config; each is stopped (exit 0 asserted) after the test."""
    started: list[harness.OspreyServer] = []

    def _start(service=None, namespaces=None):
        try:
            srv = harness.start_server(service=service, namespaces=namespaces, tag="osprey-extra")
        except FileNotFoundError as e:
            pytest.fail(str(e), pytrace=False)
        started.append(srv)
        return srv

    yield _start
    errors = []
    for srv in started:
        srv.close_clients()
        try:
            if srv.returncode is None:
                srv.stop()
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)


@pytest.fixture
def uset():
    """A set name no other test uses."""
    return harness.unique("s")


@pytest.fixture
def healthy(server, client):
    """After the test: a normal put/get on the session server still works and the process lives."""
    yield
    assert server.alive(), f"osprey died; log:\n{server.log_tail()}"
    key = ("test", "health", harness.unique("h"))
    client.put(key, {"v": 1})
    _, meta, bins = client.get(key)
    assert bins == {"v": 1}
    client.remove(key)


@pytest.fixture(scope="module")
def resp_server(request):
    """One server per RESP test module (namespace `test`, TTLs allowed without a sweeper)."""
    tag = "osprey-" + request.module.__name__.removeprefix("test_").replace("_", "-")
    server = harness.start_server(
        service={},
        namespaces=[harness.namespace("test", allow_ttl_without_nsup=True)],
        tag=tag,
    )
    yield server
    server.close_clients()
    server.stop()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(resp_server, request):
    """A redis-py client on `resp_server`, once per protocol version (RESP2 and RESP3)."""
    return resp_server.redis(protocol=request.param)


@pytest.fixture(scope="module")
def redis_server_port():
    """A reference redis-server for the module's differential tests: its port."""
    with harness.reference_redis_server() as port:
        yield port

"""A new user's first start: what happens when the configuration points at a directory that does
not exist yet, or at a port another program holds.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from pathlib import Path

import pytest

import harness

MIB = 1024 * 1024


def test_a_device_file_in_a_missing_directory_is_created_and_the_log_says_so(start_server):
    """The bug: the README's `files = ["data/test.dat"]` on a fresh checkout stopped start-up
    with the bare `osprey: data/test.dat: No such file or directory (os error 2)`, which reads
    as if the data file were expected to exist. Osprey now creates the missing directories
    (all of them, as `mkdir -p`), logs that it did, and keeps the data across a restart."""
    root = Path(tempfile.mkdtemp(prefix="osprey-first-start-"))
    data_file = root / "data" / "nested" / "test.dat"
    try:
        storage = harness.device_storage([data_file], filesize=4 * MIB, write_block_size=64 * 1024)
        server = start_server(namespaces=[harness.namespace("test", storage_engine=storage)])
        assert data_file.is_file()
        lines = [line for line in server.log_text().splitlines() if "created the missing directory" in line]
        assert len(lines) == 1, server.log_tail()
        assert str(data_file.parent) in lines[0] and str(data_file) in lines[0], lines[0]
        client = server.client()
        client.put(("test", "first", 1), {"v": 1})
        server.restart()
        assert server.client().get(("test", "first", 1))[2] == {"v": 1}
        assert "created the missing directory" not in server.log_text(), "created only once"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_device_directory_that_cannot_be_created_is_named_in_the_refusal():
    root = Path(tempfile.mkdtemp(prefix="osprey-first-start-"))
    blocker = root / "a-file"
    blocker.write_text("not a directory")
    try:
        storage = harness.device_storage([blocker / "data" / "test.dat"], filesize=4 * MIB)
        code, output = harness.run_until_exit(namespaces=[harness.namespace("test", storage_engine=storage)])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert code not in (None, 0), output
    assert f"cannot create directory {blocker / 'data'}" in output, output


@pytest.fixture
def occupied_port():
    """A port held by another program (a listening socket), as a second server or any other
    service on the machine would hold 3000 or 6379."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_a_taken_service_port_is_refused_with_the_address_and_the_setting_to_change(occupied_port):
    """The bug: start-up ended with the operating system's bare `osprey: Address already in use
    (os error 98)`, naming neither the address nor which of the three ports it was."""
    code, output = harness.run_until_exit(service={"port": occupied_port})
    assert code not in (None, 0), output
    expected = f"osprey: cannot listen on 127.0.0.1:{occupied_port} (service.port): address already in use"
    assert expected in output, output


def test_a_taken_redis_port_is_refused_with_the_address_and_the_setting_to_change(occupied_port):
    code, output = harness.run_until_exit(resp={"port": occupied_port})
    assert code not in (None, 0), output
    expected = f"osprey: cannot listen on 127.0.0.1:{occupied_port} (resp.port): address already in use"
    assert expected in output, output

"""Many clients and many connections at once: no lost updates, no refused connections."""

from __future__ import annotations

import selectors
import socket
import threading
import time

import aerospike
from aerospike_helpers.operations import operations as ops

import aswire
import harness

THREADS = 8
OPS_PER_THREAD = 500


def test_concurrent_clients_lose_no_increment_and_read_their_own_writes(server, client, uset):
    shared = ("test", uset, "shared")
    client.put(shared, {"n": 0})
    errors: list[str] = []
    barrier = threading.Barrier(THREADS, timeout=60)

    def worker(t: int) -> None:
        c = None
        try:
            c = aerospike.client(harness.client_config(server.port))
            c.connect()
            mine = f"t{t}"
            last_written: dict[int, int] = {}
            barrier.wait()
            for i in range(OPS_PER_THREAD):
                kind = i % 4
                if kind == 0:
                    # Write a private record, overwriting one of 10 keys.
                    k = (i // 4) % 10
                    c.put(("test", uset, f"p{t}_{k}"), {"v": i, "t": t})
                    last_written[k] = i
                elif kind == 1:
                    # Read back a private record: must be our last write.
                    k = (i // 4) % 10
                    _, _, bins = c.get(("test", uset, f"p{t}_{k}"))
                    assert bins == {"v": last_written[k], "t": t}, (t, k, bins)
                elif kind == 2:
                    # Atomic increment of a bin every thread shares.
                    c.increment(shared, "n", 1)
                else:
                    # Increment this thread's own bin on the shared record and read it back.
                    _, _, bins = c.operate(shared, [ops.increment(mine, 1), ops.read(mine)])
                    assert bins[mine] == (i // 4) + 1, (t, i, bins)
        except Exception as e:  # collected and reported by the main thread
            errors.append(f"thread {t}: {type(e).__name__}: {e}")
        finally:
            if c is not None:
                c.close()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "worker threads hung"
    assert not errors, "\n".join(errors[:10])

    per_kind = OPS_PER_THREAD // 4
    _, meta, bins = client.get(shared)
    assert bins["n"] == THREADS * per_kind
    for t in range(THREADS):
        assert bins[f"t{t}"] == per_kind
    # One initial put plus one generation per increment of either kind.
    assert meta["gen"] == 1 + 2 * THREADS * per_kind


def test_a_thousand_simultaneous_connections_each_get_an_info_answer(server, client, healthy):
    n = 1000
    node = harness.info(client, "node")
    socks: list[socket.socket] = []
    request = aswire.info_frame(["node"])
    try:
        for _ in range(n):
            s = socket.create_connection((server.host, server.port), timeout=10)
            socks.append(s)
        # Every connection is open at once; now each asks.
        for s in socks:
            s.sendall(request)
        expected = f"node\t{node}\n".encode()
        want = 8 + len(expected)
        received: dict[int, bytes] = {i: b"" for i in range(n)}
        sel = selectors.DefaultSelector()
        for i, s in enumerate(socks):
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, i)
        pending = n
        deadline = time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            for sk, _ in sel.select(timeout=1):
                i = sk.data
                try:
                    chunk = sk.fileobj.recv(4096)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(sk.fileobj)
                    pending -= 1
                    continue
                received[i] += chunk
                if len(received[i]) >= want:
                    sel.unregister(sk.fileobj)
                    pending -= 1
        sel.close()
        answered = sum(1 for b in received.values() if len(b) >= want and b[8:] == expected)
        assert answered == n, f"{answered} of {n} connections got the node answer"
        for b in received.values():
            assert b[:2] == bytes([aswire.PROTO_VERSION, aswire.TYPE_INFO])
    finally:
        for s in socks:
            s.close()
    assert server.alive()

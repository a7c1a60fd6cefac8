"""A TCP proxy that delays every byte by a fixed time: the network delay `tc netem` would add,
on kernels without netem.

It runs inside a node's network namespace. An iptables rule there,

    iptables -t nat -A OUTPUT -p tcp -d PEER --dport FABRIC -m mark ! --mark MARK \
        -j REDIRECT --to-ports PORT

sends the node's new connections to its peers' fabric ports to this proxy instead; the proxy
recovers each connection's real destination with `getsockopt(SOL_IP, SO_ORIGINAL_DST)`, connects
there itself (its own sockets carry MARK, so the rule lets them through), and forwards the bytes
of both directions, each chunk `delay_ms` after it arrived, in order. Connections opened before
the rule are not affected (NAT applies to new connections only).

Run: python delay_proxy.py --port PORT --delay-ms MS --mark MARK
It prints `delay proxy ready on PORT` once it listens and a line per connection it delays
(`delaying a connection to HOST:PORT`), and runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import struct

SO_ORIGINAL_DST = 80
CHUNK_BYTES = 65536
CONNECT_TIMEOUT_S = 5.0


def original_destination(sock: socket.socket) -> tuple[str, int]:
    """The address a REDIRECTed connection was sent to (a `struct sockaddr_in`)."""
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, packed_address = struct.unpack_from("!2xH4s", raw)
    return socket.inet_ntoa(packed_address), port


async def connect_marked(host: str, port: int, mark: int):
    """A connection to (host, port) whose packets carry `mark`, so the REDIRECT rule skips it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, mark)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.sock_connect(sock, (host, port)), CONNECT_TIMEOUT_S)
    except BaseException:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock)


async def read_into(reader: asyncio.StreamReader, queue: asyncio.Queue, delay_s: float) -> None:
    """Queues each chunk read with the time it is due; an empty chunk marks the end."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            data = await reader.read(CHUNK_BYTES)
        except OSError:
            data = b""
        queue.put_nowait((loop.time() + delay_s, data))
        if not data:
            return


async def write_from(queue: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
    """Writes each queued chunk once it is due; at the end, half-closes the other side."""
    loop = asyncio.get_running_loop()
    while True:
        due, data = await queue.get()
        wait_s = due - loop.time()
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        if not data:
            if writer.can_write_eof():
                writer.write_eof()
            return
        writer.write(data)
        await writer.drain()


async def pump(reader, writer, delay_s: float) -> None:
    queue: asyncio.Queue = asyncio.Queue()
    await asyncio.gather(read_into(reader, queue, delay_s), write_from(queue, writer))


def close_quietly(writer: asyncio.StreamWriter) -> None:
    try:
        writer.close()
    except OSError:
        pass


async def serve_connection(reader, writer, delay_s: float, mark: int) -> None:
    client_socket = writer.get_extra_info("socket")
    client_socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        host, port = original_destination(client_socket)
        upstream_reader, upstream_writer = await connect_marked(host, port, mark)
    except (OSError, asyncio.TimeoutError) as error:
        print(f"cannot connect: {error}", flush=True)
        close_quietly(writer)
        return
    print(f"delaying a connection to {host}:{port}", flush=True)
    try:
        await asyncio.gather(
            pump(reader, upstream_writer, delay_s),
            pump(upstream_reader, writer, delay_s),
        )
    except (OSError, ConnectionError):
        pass
    finally:
        close_quietly(writer)
        close_quietly(upstream_writer)


async def serve(port: int, delay_s: float, mark: int) -> None:
    server = await asyncio.start_server(
        lambda r, w: serve_connection(r, w, delay_s, mark), host="0.0.0.0", port=port
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    print(f"delay proxy ready on {port}", flush=True)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="where REDIRECTed connections arrive")
    parser.add_argument("--delay-ms", type=float, required=True, help="delay of every chunk, each direction")
    parser.add_argument("--mark", type=lambda text: int(text, 0), required=True,
                        help="SO_MARK of the proxy's own connections (the REDIRECT rule skips it)")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.delay_ms / 1000.0, args.mark))


if __name__ == "__main__":
    main()

"""TLS on both client ports and on the fabric: the official clients with and without client
certificates, redis-cli --tls, clear ports switched off, certificate logins (Aerospike's PKI,
Valkey's tls-auth-clients-user), certificates reloaded while the server runs, and hostile
handshakes: plaintext, garbage, and a handshake that never finishes."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import time
from pathlib import Path

import aerospike
import pytest
import redis
from aerospike import exception as ex

import aswire
import harness
import tls_certs

SERVER_NAME = "osprey.test"
ROLE_VIOLATION = 81


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls-certs")
    ca = tls_certs.authority(directory)
    other_ca = tls_certs.authority(directory, "Other CA")
    return {
        "dir": directory,
        "ca": ca,
        "server": tls_certs.issue(ca, directory, SERVER_NAME, dns=[SERVER_NAME], ips=["127.0.0.1"]),
        "alice": tls_certs.issue(ca, directory, "alice"),
        "bob": tls_certs.issue(ca, directory, "bob"),
        "mallory": tls_certs.issue(other_ca, directory, "mallory", dns=[SERVER_NAME]),
    }


def tls_section(certs, **settings) -> dict:
    section = {"cert-file": str(certs["server"].cert), "key-file": str(certs["server"].key),
               "ca-file": str(certs["ca"].cert)}
    section.update({k.replace("_", "-"): v for k, v in settings.items()})
    return section


def start(certs, tls: dict | None = None, service: dict | None = None, resp: dict | None = None,
          sections: dict | None = None, tag: str = "osprey-tls") -> harness.OspreyServer:
    return harness.start_server(
        service={"tls-port": 0, **(service or {})},
        resp={"tls-port": 0, **(resp or {})},
        sections={"tls": tls or tls_section(certs), **(sections or {})},
        tag=tag,
    )


def tls_config(srv, certs, client: str | None = None, **extra) -> dict:
    tls = {"enable": True, "cafile": str(certs["ca"].cert)}
    if client:
        tls.update(certfile=str(certs[client].cert), keyfile=str(certs[client].key))
    config = harness.client_config(srv.tls_port, tls=tls, **extra)
    config["hosts"] = [("127.0.0.1", srv.tls_port, SERVER_NAME)]
    return config


def aerospike_tls(srv, certs, client: str | None = None, **extra):
    connected = aerospike.client(tls_config(srv, certs, client, **extra)).connect()
    srv.clients.append(connected)
    return connected


def redis_tls(srv, certs, client: str | None = None, **extra) -> redis.Redis:
    if client:
        extra.update(ssl_certfile=str(certs[client].cert), ssl_keyfile=str(certs[client].key))
    return redis.Redis(port=srv.resp_tls_port, ssl=True, ssl_ca_certs=str(certs["ca"].cert),
                       ssl_check_hostname=False, socket_timeout=5, **extra)


def tls_socket(srv, certs, port: int, client: str | None = None) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(certs["ca"].cert))
    if client:
        context.load_cert_chain(str(certs[client].cert), str(certs[client].key))
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    return context.wrap_socket(raw, server_hostname=SERVER_NAME)


def redis_cli(port: int, certs, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["redis-cli", "-p", str(port), "--tls", "--cacert", str(certs["ca"].cert),
         "--sni", SERVER_NAME, *args],
        capture_output=True, text=True, timeout=10)


def go_client(*args: str) -> subprocess.CompletedProcess:
    """tests/go/cluster_client (built by `cargo xtask blackbox`): the official Go client v8."""
    binary = os.environ.get("OSPREY_GO_CLUSTER_CLIENT", "target/go/cluster_client")
    assert Path(binary).exists(), f"{binary} is missing: run `cargo xtask blackbox`, which builds it"
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)


def statistics(srv) -> dict[str, str]:
    return harness.parse_kv(harness.raw_info(srv, "statistics"))


def closed_within(sock: socket.socket, seconds: float) -> bytes:
    """What the server sent before closing `sock`, failing if it is still open after
    `seconds` (a reset, which a close with unread input sends, counts as closed)."""
    sock.settimeout(seconds)
    received = b""
    while True:
        try:
            chunk = sock.recv(4096)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


@pytest.fixture(scope="module")
def server(certs):
    srv = start(certs, tls_section(certs, authenticate_client="optional"))
    yield srv
    srv.stop()


def test_the_official_clients_serve_over_tls_with_and_without_client_certificates(server, certs):
    go = go_client("tls", str(server.tls_port), "1", str(certs["ca"].cert), SERVER_NAME,
                   str(certs["bob"].cert), str(certs["bob"].key))
    assert go.returncode == 0 and "puts and gets ok" in go.stdout, go.stdout + go.stderr
    anonymous = aerospike_tls(server, certs)
    key = ("test", "tls", harness.unique())
    anonymous.put(key, {"bin": "over tls"})
    assert anonymous.get(key)[2] == {"bin": "over tls"}
    records = anonymous.batch_read([key, ("test", "tls", "missing")]).batch_records
    assert [r.record[2] if r.record else None for r in records] == [{"bin": "over tls"}, None]
    service = anonymous.info_all("service-tls-std")
    assert list(service.values())[0][1].strip() == f"127.0.0.1:{server.tls_port}"
    with_certificate = aerospike_tls(server, certs, client="alice")
    assert with_certificate.get(key)[2] == {"bin": "over tls"}
    # The same records through the clear port.
    assert server.client().get(key)[2] == {"bin": "over tls"}

    r = redis_tls(server, certs)
    assert r.set("tls:key", "v1")
    assert redis_tls(server, certs, client="bob").get("tls:key") == b"v1"
    clear = redis.Redis(port=server.resp_port, socket_timeout=5)
    assert clear.get("tls:key") == b"v1"
    assert redis_cli(server.resp_tls_port, certs, "SET", "tls:cli", "from-cli").stdout.strip() == "OK"
    assert redis_cli(server.resp_tls_port, certs, "GET", "tls:cli").stdout.strip() == "from-cli"
    assert clear.get("tls:cli") == b"from-cli"
    # A reply larger than TLS's record and buffer sizes arrives whole.
    big = os.urandom(300_000)
    r.set("tls:big", big)
    assert r.get("tls:big") == big


def test_plaintext_and_garbage_on_a_tls_port_are_refused_while_others_are_served(server, certs):
    failures_before = int(statistics(server)["tls_handshake_failures"])
    with socket.create_connection(("127.0.0.1", server.tls_port), timeout=5) as plain:
        plain.sendall(aswire.info_frame(["build"]))
        answer = closed_within(plain, 5)
        # A TLS alert record (content type 21), then the end: never an info reply.
        assert answer[:1] in (b"\x15", b""), answer[:16]
    cli = subprocess.run(["redis-cli", "-p", str(server.resp_tls_port), "PING"],
                         capture_output=True, text=True, timeout=10)
    assert "PONG" not in cli.stdout
    with socket.create_connection(("127.0.0.1", server.resp_tls_port), timeout=5) as garbage:
        garbage.sendall(os.urandom(64 * 1024))
        closed_within(garbage, 5)
    failures = int(statistics(server)["tls_handshake_failures"])
    assert failures >= failures_before + 3
    assert redis_tls(server, certs).ping()
    assert aerospike_tls(server, certs).is_connected()


def client_hello() -> bytes:
    """The first flight of a real TLS client."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    session = context.wrap_bio(incoming, outgoing, server_hostname=SERVER_NAME)
    with pytest.raises(ssl.SSLWantReadError):
        session.do_handshake()
    return outgoing.read()


def test_a_handshake_that_never_finishes_is_timed_out(certs):
    srv = start(certs, tls_section(certs, handshake_timeout_ms=500), tag="osprey-tls-stall")
    try:
        silent = socket.create_connection(("127.0.0.1", srv.tls_port), timeout=5)
        half = socket.create_connection(("127.0.0.1", srv.resp_tls_port), timeout=5)
        hello = client_hello()
        half.sendall(hello[: len(hello) // 2])
        # Meanwhile others complete theirs.
        assert redis_tls(srv, certs).ping()
        started = time.monotonic()
        closed_within(silent, 5)
        closed_within(half, 5)
        assert time.monotonic() - started < 3
        silent.close()
        half.close()
        assert int(statistics(srv)["tls_handshake_failures"]) >= 2
    finally:
        srv.stop()


def test_client_certificates_required_by_any_or_by_name(certs):
    srv = start(certs, tls_section(certs, authenticate_client="any"), tag="osprey-tls-any")
    try:
        assert aerospike_tls(srv, certs, client="alice").is_connected()
        assert redis_tls(srv, certs, client="bob").ping()
        with pytest.raises(redis.ConnectionError):
            redis_tls(srv, certs).ping()
        with pytest.raises(ex.AerospikeError):
            aerospike_tls(srv, certs)
        # A certificate from another authority is refused too.
        with pytest.raises((ssl.SSLError, OSError)):
            with tls_socket(srv, certs, srv.tls_port, client="mallory") as sock:
                sock.sendall(aswire.info_frame(["node"]))
                assert sock.recv(100) == b""
    finally:
        srv.stop()
    srv = start(certs, tls_section(certs, authenticate_client="alice"), tag="osprey-tls-named")
    try:
        assert redis_tls(srv, certs, client="alice").ping()
        with pytest.raises(redis.ConnectionError):
            redis_tls(srv, certs, client="bob").ping()
    finally:
        srv.stop()


def test_the_clear_ports_can_be_switched_off(certs):
    srv = start(certs, service={"tls-only": True}, resp={"tls-only": True}, tag="osprey-tls-only")
    try:
        assert srv.port == 0 and srv.resp_port is None
        ready = [line for line in srv.log_text().splitlines() if "osprey ready" in line][0]
        assert "service=off" in ready and "resp=off" in ready
        client = aerospike_tls(srv, certs)
        key = ("test", "tls", "only")
        client.put(key, {"x": 1})
        assert client.get(key)[2] == {"x": 1}
        answers = {name: client.info_all(name) for name in
                   ("service-clear-std", "service-tls-std", "peers-clear-std")}
        value = {name: list(a.values())[0][1].strip() for name, a in answers.items()}
        assert value["service-clear-std"] == ""
        assert value["service-tls-std"] == f"127.0.0.1:{srv.tls_port}"
        assert redis_tls(srv, certs).ping()
    finally:
        srv.stop()


def test_a_client_certificate_logs_in_as_the_user_it_names(certs, tmp_path):
    srv = start(certs, tls_section(certs, authenticate_client="optional"),
                service={"work-directory": str(tmp_path)}, resp={"tls-auth-clients-user": "CN"},
                sections={"security": {"enabled": True}}, tag="osprey-tls-pki")
    try:
        admin = aerospike_tls(srv, certs, user="admin", password="admin")
        admin.admin_create_user("alice", "unused-password", ["read"])
        admin.admin_create_user("carol", "carol-password", ["read-write"])
        writer = aerospike_tls(srv, certs, user="carol", password="carol-password")
        key = ("test", "tls", "pki")
        writer.put(key, {"x": 1})

        pki = {"auth_mode": aerospike.AUTH_PKI}
        alice = aerospike_tls(srv, certs, client="alice", policies=pki)
        assert alice.get(key)[2] == {"x": 1}
        with pytest.raises(ex.AerospikeError) as refused:
            alice.put(key, {"x": 2})
        assert refused.value.code == ROLE_VIOLATION
        # A certificate that names no user logs nobody in.
        with pytest.raises(ex.AerospikeError):
            aerospike_tls(srv, certs, client="bob", policies=pki)
        # Nor does a PKI login without a certificate.
        with pytest.raises(ex.AerospikeError):
            aerospike_tls(srv, certs, policies=pki)

        r = redis_tls(srv, certs, client="alice")
        assert r.execute_command("ACL", "WHOAMI") == b"alice"
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.set("k", "v")
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis_tls(srv, certs, client="bob").get("k")
        # The official Go client: a PKI login as alice reads, and is refused a write.
        go = go_client("tls", str(srv.tls_port), "1", str(certs["ca"].cert), SERVER_NAME,
                       str(certs["alice"].cert), str(certs["alice"].key), "pki")
        assert go.returncode != 0 and "ROLE_VIOLATION" in go.stderr, go.stdout + go.stderr
        carol = redis_tls(srv, certs, username="carol", password="carol-password")
        assert carol.get("k") is None and carol.execute_command("ACL", "WHOAMI") == b"carol"
    finally:
        srv.stop()


def peer_certificate(srv, certs, port: int) -> bytes:
    with tls_socket(srv, certs, port) as sock:
        return sock.getpeercert(binary_form=True)


def der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text())


def replace_files(pair: tls_certs.Pair, target: tls_certs.Pair) -> None:
    """Puts `pair`'s certificate and key where `target`'s are, each by an atomic rename."""
    for source, destination in ((pair.cert, target.cert), (pair.key, target.key)):
        staged = destination.with_suffix(".staged")
        staged.write_bytes(source.read_bytes())
        staged.replace(destination)


def test_certificates_reload_without_a_restart(certs, tmp_path):
    served = tls_certs.Pair(tmp_path / "served.pem", tmp_path / "served.key")
    first = tls_certs.issue(certs["ca"], tmp_path, SERVER_NAME, dns=[SERVER_NAME], stem="first", serial=1001)
    second = tls_certs.issue(certs["ca"], tmp_path, SERVER_NAME, dns=[SERVER_NAME], stem="second", serial=2002)
    replace_files(first, served)
    tls = tls_section(certs, cert_file=str(served.cert), key_file=str(served.key), reload_check_s=1)
    srv = start(certs, tls, tag="osprey-tls-reload")
    try:
        open_before = redis_tls(srv, certs)
        assert open_before.set("reload", "before")
        assert peer_certificate(srv, certs, srv.resp_tls_port) == der(first.cert)

        replace_files(second, served)
        seen = harness.wait_until(
            lambda: peer_certificate(srv, certs, srv.tls_port) == der(second.cert), timeout=10)
        assert seen, "the new certificate was not served within 10 s"
        assert open_before.get("reload") == b"before"

        # A key that does not match the certificate is refused; the last good one stays.
        served.key.write_bytes(certs["alice"].key.read_bytes())
        answer = harness.raw_info(srv, "tls-reload")
        assert answer.startswith("ERROR:4:"), answer
        assert peer_certificate(srv, certs, srv.tls_port) == der(second.cert)
        assert int(statistics(srv)["tls_reload_failures"]) >= 1
        replace_files(first, served)
        assert harness.raw_info(srv, "tls-reload") == "ok"
        assert peer_certificate(srv, certs, srv.tls_port) == der(first.cert)
    finally:
        srv.stop()


def test_a_bad_tls_configuration_stops_start_up_with_its_reason(certs, tmp_path):
    missing = tls_section(certs, cert_file=str(tmp_path / "missing.pem"))
    code, output = harness.run_until_exit(service={"tls-port": 0})
    assert code not in (None, 0) and "service.tls-port needs [tls] cert-file" in output
    srv = harness.OspreyServer({"tls-port": 0}, [harness.namespace("test")], tag="osprey-tls-bad",
                               sections={"tls": missing})
    try:
        with pytest.raises(RuntimeError, match="missing.pem"):
            srv.start()
    finally:
        if srv.proc and srv.proc.poll() is None:
            srv.kill()


def admin_info(srv, command: str) -> str:
    """An info value through the (clear, local) admin port, which the TLS-only nodes keep."""
    with socket.create_connection(("127.0.0.1", srv.admin_port), timeout=5) as sock:
        return dict(aswire.request_info(sock, [command]))[command]


def test_a_cluster_over_a_tls_fabric_serves_tls_clients_and_refuses_a_stranger(certs):
    nodes = 3
    fabric_ports = [harness.free_port() for _ in range(nodes + 1)]
    seeds = [f"127.0.0.1:{port}" for port in fabric_ports[:nodes]]
    servers = []

    def node(index: int, tls: dict) -> harness.OspreyServer:
        srv = harness.OspreyServer(
            {"port": 0, "tls-port": 0, "tls-only": True},
            [harness.namespace("test", replication_factor=2)],
            tag=f"osprey-tls-cluster{index}",
            cluster={"node-id": f"D{index + 1}", "fabric-port": fabric_ports[index],
                     "seeds": seeds, "tls": True},
            sections={"tls": tls})
        srv.config_path.write_text(srv.config_path.read_text().replace(
            "[cluster]", f'[cluster]\nmetadata-dir = "{srv.dir / "cluster"}"'))
        servers.append(srv)
        return srv.start()

    try:
        for index in range(nodes):
            node(index, tls_section(certs))
        formed = harness.wait_until(
            lambda: all(not admin_info(s, f"cluster-stable:size={nodes}").startswith("ERROR")
                        and int(admin_info(s, "partition-generation")) > 0 for s in servers),
            timeout=30, interval=0.2)
        assert formed, "\n\n".join(s.log_tail() for s in servers)

        peers = admin_info(servers[0], "peers-tls-std")
        for other in servers[1:]:
            assert f",{SERVER_NAME},[127.0.0.1:{other.tls_port}]]" in peers, peers
        # No node has a clear service port: clear clients learn of no peer.
        assert admin_info(servers[0], "peers-clear-std").endswith(",3000,[]")

        client = aerospike_tls(servers[0], certs)
        assert harness.wait_until(lambda: len(client.get_nodes()) == nodes, timeout=10), \
            client.get_nodes()
        go = go_client("tls", str(servers[1].tls_port), str(nodes), str(certs["ca"].cert), SERVER_NAME)
        assert go.returncode == 0 and "puts and gets ok" in go.stdout, go.stdout + go.stderr
        keys = [("test", "fabric", f"k{i}") for i in range(200)]
        for i, key in enumerate(keys):
            client.put(key, {"i": i})
        assert [client.get(key)[2]["i"] for key in keys] == list(range(200))

        stranger = tls_section(certs, cert_file=str(certs["mallory"].cert),
                               key_file=str(certs["mallory"].key),
                               ca_file=str(tls_certs.authority(certs["dir"], "Stranger CA").cert))
        node(nodes, stranger)
        time.sleep(3)
        assert not admin_info(servers[0], f"cluster-stable:size={nodes}").startswith("ERROR")
        assert admin_info(servers[nodes], f"cluster-stable:size={nodes + 1}").startswith("ERROR")
        assert client.get(keys[0])[2] == {"i": 0}
    finally:
        for srv in servers:
            if srv.alive():
                srv.stop()

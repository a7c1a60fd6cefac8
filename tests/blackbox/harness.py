"""Start, stop and talk to a real `osprey` process for the black-box suite.

The contract with the server (fixed by the project lead):

* `osprey --config FILE.toml`; unknown keys are an error.
* With `port = 0` the server picks a free port and logs (stderr, tracing format) one line
  containing `osprey ready` and `service=127.0.0.1:PORT` with the real port.
* SIGTERM shuts it down gracefully with exit code 0.

An `OspreyServer` may be started again on the same config file once its process has ended
(`kill` or `terminate`): that is how the persistence tests restart a server on its data files.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import uuid
import contextlib
from pathlib import Path
from typing import Any, Iterator

import aerospike

import aswire

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BIN = REPO_ROOT / "target" / "debug" / "osprey"
DEFAULT_RELEASE_BIN = REPO_ROOT / "target" / "release" / "osprey"

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0

ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
SERVICE_RE = re.compile(r'service="?([0-9.]+):(\d+)')
RESP_RE = re.compile(r'resp="?[0-9.]+:(\d+)')
ADMIN_RE = re.compile(r'admin="?[0-9.]+:(\d+)')
METRICS_RE = re.compile(r'metrics="?[0-9.]+:(\d+)')
SERVICE_TLS_RE = re.compile(r'service_tls="?([0-9.]+):(\d+)')
RESP_TLS_RE = re.compile(r'resp_tls="?[0-9.]+:(\d+)')

# Defaults of the [service] section, written out in full so that every server the suite starts
# has a known configuration.
SERVICE_DEFAULTS: dict[str, Any] = {
    "address": "127.0.0.1",
    "port": 0,
    "cluster-name": "bbtest",
    "idle-timeout-ms": 60000,
    "frame-read-timeout-ms": 10000,
    "frame-size-max-bytes": 134217728,
    "connections-max": 10000,
}

NAMESPACE_DEFAULTS: dict[str, Any] = {
    "default-ttl": 0,
    "nsup-period": 120,
    "allow-ttl-without-nsup": False,
    "max-record-size": 1048576,
}


def free_port() -> int:
    """A port free on loopback now (another process may take it before it is used)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def osprey_bin(release: bool = False) -> Path:
    """The binary under test; `release` asks for the optimized build (OSPREY_RELEASE_BIN), which
    tests that assert latency bounds need: a debug build is ten to thirty times slower per
    element, so its latencies say nothing about the server's."""
    if release:
        return Path(os.environ.get("OSPREY_RELEASE_BIN", str(DEFAULT_RELEASE_BIN)))
    return Path(os.environ.get("OSPREY_BIN", str(DEFAULT_BIN)))


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"unsupported TOML value {v!r}")


def render_config(service: dict[str, Any], namespaces: list[dict[str, Any]], resp: dict[str, Any] | None = None,
                  admin: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None,
                  sections: dict[str, dict[str, Any]] | None = None) -> str:
    """The TOML file. A namespace value that is a list of tables (`sets`) becomes an array of
    tables nested in that namespace: `[[namespaces.sets]]`, written after its plain keys; a dict
    value (`storage-engine`) becomes a table nested in it, `[namespaces.storage-engine]`. The
    Redis and admin ports default to 0 (a free port) so that servers started side by side never
    collide."""
    lines = ["[service]"]
    for k, v in service.items():
        lines.append(f"{k} = {_toml_value(v)}")
    lines.append("")
    lines.append("[resp]")
    for k, v in {"port": 0, **(resp or {})}.items():
        lines.append(f"{k} = {_toml_value(v)}")
    lines.append("")
    lines.append("[admin]")
    for k, v in {"port": 0, **(admin or {})}.items():
        lines.append(f"{k} = {_toml_value(v)}")
    if cluster:
        lines.append("")
        lines.append("[cluster]")
        for k, v in cluster.items():
            lines.append(f"{k} = {_toml_value(v)}")
    for section, table in (sections or {}).items():
        lines.append("")
        lines.append(f"[{section}]")
        for k, v in table.items():
            lines.append(f"{k} = {_toml_value(v)}")
    for ns in namespaces:
        lines.append("")
        lines.append("[[namespaces]]")
        nested = {k: v for k, v in ns.items() if isinstance(v, list)}
        subtables = {k: v for k, v in ns.items() if isinstance(v, dict)}
        for k, v in ns.items():
            if k not in nested and k not in subtables:
                lines.append(f"{k} = {_toml_value(v)}")
        for k, table in subtables.items():
            lines.append(f"[namespaces.{k}]")
            for tk, tv in table.items():
                lines.append(f"{tk} = {_toml_value(tv)}")
        for k, tables in nested.items():
            for table in tables:
                lines.append(f"[[namespaces.{k}]]")
                for tk, tv in table.items():
                    lines.append(f"{tk} = {_toml_value(tv)}")
    return "\n".join(lines) + "\n"


def namespace(name: str, **overrides: Any) -> dict[str, Any]:
    """A namespace table: defaults plus overrides given with underscores (nsup_period=1).

    `sets=[{"name": "s1", "enable-index": True}]` adds `[[namespaces.sets]]` tables;
    `storage_engine=device_storage(files)` adds a `[namespaces.storage-engine]` table."""
    ns: dict[str, Any] = {"name": name}
    ns.update(NAMESPACE_DEFAULTS)
    for k, v in overrides.items():
        ns[k.replace("_", "-")] = v
    return ns


def device_storage(files: list[str | Path], **settings: Any) -> dict[str, Any]:
    """A `[namespaces.storage-engine]` table of type device on `files`; settings are given with
    underscores (write_block_size=65536, commit_to_device=True) and written in that order."""
    table: dict[str, Any] = {"type": "device", "files": [str(f) for f in files]}
    for k, v in settings.items():
        table[k.replace("_", "-")] = v
    return table


# The Aerospike C client under the Python one sets up its Lua (the user path where it finds the
# module an aggregation's final reduce runs in) once per process, from the first client made:
# every client of these tests shares this one user path, whatever its test asks for.
LUA_USER_PATH = Path(tempfile.mkdtemp(prefix="osprey-client-lua-"))


def client_config(port: int, **extra: Any) -> dict[str, Any]:
    """Client config with no hidden retries, so that a server error shows as the error."""
    policy = {"total_timeout": 5000, "max_retries": 0}
    cfg: dict[str, Any] = {
        "hosts": [("127.0.0.1", port)],
        "policies": {
            "read": dict(policy),
            "write": dict(policy),
            "operate": dict(policy),
            "apply": dict(policy),
            "remove": dict(policy),
            "info": {"timeout": 5000},
        },
        "connect_timeout": 5000,
    }
    cfg.update(extra)
    cfg["lua"] = {"user_path": str(LUA_USER_PATH)}
    return cfg


class OspreyServer:
    """One running `osprey` process."""

    def __init__(self, service: dict[str, Any], namespaces: list[dict[str, Any]], tag: str = "osprey",
                 resp: dict[str, Any] | None = None, admin: dict[str, Any] | None = None,
                 release: bool = False, cluster: dict[str, Any] | None = None,
                 sections: dict[str, dict[str, Any]] | None = None):
        self.release = release
        self.service = dict(SERVICE_DEFAULTS)
        self.service.update(service)
        self.namespaces = namespaces
        self.dir = Path(tempfile.mkdtemp(prefix=f"{tag}-"))
        self.config_path = self.dir / "osprey.toml"
        self.config_path.write_text(
            render_config(self.service, self.namespaces, resp, admin, cluster, sections))
        self.log_path = self.dir / "stderr.log"
        self.stdout_path = self.dir / "stdout.log"
        self.proc: subprocess.Popen | None = None
        self.host = "127.0.0.1"
        self.port = 0
        self.resp_port: int | None = None
        self.admin_port: int | None = None
        self.tls_port: int | None = None
        self.resp_tls_port: int | None = None
        self.metrics_port: int | None = None
        self.clients: list[Any] = []
        self.returncode: int | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> "OspreyServer":
        """Starts the process and waits for `osprey ready`. Called again after the process
        ended, it starts a new one on the same config file (the last run's log is kept as
        `stderr.previous.log`)."""
        binary = osprey_bin(self.release)
        if not binary.exists():
            build = "cargo build --release -p server" if self.release else "cargo build -p server"
            variable = "OSPREY_RELEASE_BIN" if self.release else "OSPREY_BIN"
            raise FileNotFoundError(
                f"osprey binary not found at {binary}: build it with `{build}` "
                f"or point {variable} at it"
            )
        if self.proc is not None:
            assert self.proc.poll() is not None, "start() while the previous process still runs"
            self._close_logs()
            self.close_clients()
            if self.log_path.exists():
                self.log_path.replace(self.dir / "stderr.previous.log")
            self.returncode = None
            self.resp_port = None
        env = dict(os.environ)
        env.setdefault("NO_COLOR", "1")
        self._stderr = open(self.log_path, "wb")
        self._stdout = open(self.stdout_path, "wb")
        self.proc = subprocess.Popen(
            [str(binary), "--config", str(self.config_path)],
            stdin=subprocess.DEVNULL,
            stdout=self._stdout,
            stderr=self._stderr,
            env=env,
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            text = self.log_text()
            for line in text.splitlines():
                if "osprey ready" in line:
                    m = SERVICE_RE.search(line)
                    tls = SERVICE_TLS_RE.search(line)
                    resp_tls = RESP_TLS_RE.search(line)
                    self.tls_port = int(tls.group(2)) if tls else None
                    self.resp_tls_port = int(resp_tls.group(1)) if resp_tls else None
                    if m or tls:
                        self.host = (m or tls).group(1)
                        self.port = int(m.group(2)) if m else 0
                        resp = RESP_RE.search(line)
                        self.resp_port = int(resp.group(1)) if resp else None
                        admin = ADMIN_RE.search(line)
                        self.admin_port = int(admin.group(1)) if admin else None
                        metrics = METRICS_RE.search(line)
                        self.metrics_port = int(metrics.group(1)) if metrics else None
                        return self
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"osprey exited with {self.proc.returncode} before it was ready; "
                    f"config:\n{self.config_path.read_text()}\nlog:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(
                    f"osprey did not log 'osprey ready' within {READY_TIMEOUT_S}s; log:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def log_text(self) -> str:
        try:
            raw = self.log_path.read_bytes()
        except FileNotFoundError:
            return ""
        return ANSI_RE.sub("", raw.decode("utf-8", "replace"))

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close_clients(self) -> None:
        for c in self.clients:
            try:
                c.close()
            except Exception:
                pass
        self.clients.clear()

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait; returns the exit code (kills and raises if it does not exit)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(
                    f"osprey did not exit within {timeout}s of SIGTERM; log:\n{self.log_tail()}"
                )
        self.returncode = self.proc.returncode
        self._close_logs()
        return self.returncode

    def kill(self) -> int:
        """SIGKILL (no chance to flush anything) and wait; returns the exit status (-9)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.returncode = self.proc.returncode
        self._close_logs()
        return self.returncode

    def restart(self) -> "OspreyServer":
        """SIGTERM (asserting exit code 0), then start again on the same config file. Clients
        of the old process are closed; the port may change (with `port = 0`)."""
        self.stop()
        return self.start()

    def kill_and_restart(self) -> "OspreyServer":
        """SIGKILL, then start again on the same config file."""
        self.close_clients()
        self.kill()
        return self.start()

    def remove_dir(self) -> None:
        """Deletes this server's directory (config and logs); the process must have ended."""
        assert not self.alive(), "remove_dir() while osprey runs"
        shutil.rmtree(self.dir, ignore_errors=True)

    def _close_logs(self) -> None:
        for name in ("_stderr", "_stdout"):
            f = getattr(self, name, None)
            if f is not None:
                try:
                    f.close()
                except Exception:
                    pass

    def stop(self) -> None:
        """Close clients, SIGTERM, and assert a graceful exit (code 0)."""
        self.close_clients()
        code = self.terminate()
        assert code == 0, f"osprey exited with {code} after SIGTERM; log:\n{self.log_tail()}"

    # -- clients ------------------------------------------------------------------------------

    def client(self, **extra: Any):
        """A connected aerospike client; closed when the server is stopped."""
        c = aerospike.client(client_config(self.port, **extra))
        c.connect()
        self.clients.append(c)
        return c

    def redis(self, protocol: int = 2, **extra: Any):
        """A redis-py client on this server's RESP port (closed at teardown). It does not
        retry on its own (redis-py's default from 6.0 sends a command again after a timeout or
        a broken connection, which would hide a server's failure and apply a write twice)."""
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        assert self.resp_port, "this server does not serve RESP"
        extra.setdefault("retry", Retry(NoBackoff(), 0))
        extra.setdefault("socket_timeout", 5)
        client = redis.Redis(host=self.host, port=self.resp_port, protocol=protocol, **extra)
        self.clients.append(client)
        return client

    def raw(self, timeout: float = 5.0) -> socket.socket:
        s = socket.create_connection((self.host, self.port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s


def start_server(
    service: dict[str, Any] | None = None,
    namespaces: list[dict[str, Any]] | None = None,
    tag: str = "osprey",
    resp: dict[str, Any] | None = None,
    admin: dict[str, Any] | None = None,
    release: bool = False,
    sections: dict[str, dict[str, Any]] | None = None,
) -> OspreyServer:
    """`sections`: further top-level tables of the config file (`{"security": {...}}`)."""
    if namespaces is None:
        namespaces = [namespace("test", nsup_period=1)]
    return OspreyServer(service or {}, namespaces, tag=tag, resp=resp, admin=admin,
                        release=release, sections=sections).start()


def run_until_exit(
    service: dict[str, Any] | None = None,
    namespaces: list[dict[str, Any]] | None = None,
    timeout: float = READY_TIMEOUT_S,
    resp: dict[str, Any] | None = None,
) -> tuple[int | None, str]:
    """Runs a server that is expected to refuse its configuration: returns (exit code, stdout
    and stderr). A server that gets ready instead is stopped and the code is None. The
    config directory is removed."""
    if namespaces is None:
        namespaces = [namespace("test", nsup_period=1)]
    srv = OspreyServer(service or {}, namespaces, tag="osprey-refused", resp=resp)
    try:
        try:
            srv.start()
        except RuntimeError as e:
            assert srv.proc is not None
            srv.proc.wait(timeout=timeout)
            code = srv.terminate()
            output = srv.stdout_path.read_text(errors="replace") + srv.log_text()
            if "before it was ready" not in str(e):
                return None, output  # it hung at start-up and was killed: no refusal
            return code, output
        srv.stop()
        return None, srv.log_text()
    finally:
        srv.remove_dir()


# -- info helpers -------------------------------------------------------------------------------


def info(client, command: str) -> str:
    """Value of one info command on the single node (the client strips `command\\t`)."""
    res = client.info_all(command)
    assert len(res) == 1, f"expected one node, got {list(res)}"
    (err, value), = res.values()
    assert err is None, f"info {command!r} failed: {err}"
    assert value is not None
    return value.rstrip("\n")


def node_name(client) -> str:
    res = client.info_all("node")
    assert len(res) == 1
    return next(iter(res))


def parse_kv(text: str, sep: str = ";") -> dict[str, str]:
    """`k=v;k=v` into a dict; every entry must have an '='."""
    out: dict[str, str] = {}
    for item in text.split(sep):
        if not item:
            continue
        assert "=" in item, f"entry without '=': {item!r} in {text[:200]!r}"
        k, v = item.split("=", 1)
        out[k] = v
    return out


def parse_sets(text: str) -> list[dict[str, str]]:
    """`sets` answer: `ns=..:set=..:objects=..:...;` entries."""
    entries = []
    for item in text.split(";"):
        if item:
            entries.append(parse_kv(item, sep=":"))
    return entries


def ns_stats(client, ns: str) -> dict[str, str]:
    return parse_kv(info(client, f"namespace/{ns}"))


def ns_objects(client, ns: str) -> int:
    return int(ns_stats(client, ns)["objects"])


def set_objects(client, ns: str, set_name: str) -> int | None:
    for e in parse_sets(info(client, "sets")):
        if e.get("ns") == ns and e.get("set") == set_name:
            return int(e["objects"])
    return None


def unique(prefix: str = "k") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def error_raised_by(call):
    """The exception `call` raises, or None (for tests that judge errors and successes alike)."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 (the caller judges it)
        return error
    return None


def raw_reply(client, *command):
    """A Redis command's reply as the protocol has it, without redis-py's conversions of it."""
    connection = client.connection_pool.get_connection()
    try:
        connection.send_command(*command)
        return connection.read_response()
    finally:
        client.connection_pool.release(connection)


def wait_until(pred, timeout: float, interval: float = 0.05):
    """Poll pred() until it returns a truthy value or timeout; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)


def raw_info(server: "OspreyServer", command: str) -> str:
    """Value of one info command over a raw socket: unlike `info`, an `ERROR:...` value is
    returned as text (the client would raise on some of them)."""
    with server.raw() as s:
        ((name, value),) = aswire.request_info(s, [command])
    assert name == command, (name, command)
    return value


def parse_set_entry(text: str) -> dict[str, str]:
    """One `sets/<ns>/<set>` answer: `k=v:k=v:...;` (a leading `ns=..:set=..` is allowed)."""
    entries = [e for e in text.split(";") if e]
    assert len(entries) == 1, f"expected one set entry, got {text!r}"
    return parse_kv(entries[0], sep=":")


def set_info(client, ns: str, set_name: str) -> dict[str, str]:
    return parse_set_entry(info(client, f"sets/{ns}/{set_name}"))


# -- bulk loading over a raw socket ---------------------------------------------------------------


def _particle(value: Any) -> tuple[int, bytes]:
    if isinstance(value, bool):
        return aswire.PT_BOOL, bytes([1 if value else 0])
    if isinstance(value, int):
        return aswire.PT_INTEGER, aswire.int_bytes(value)
    if isinstance(value, float):
        return aswire.PT_FLOAT, struct.pack(">d", value)
    if isinstance(value, str):
        return aswire.PT_STRING, value.encode()
    if isinstance(value, (bytes, bytearray)):
        return aswire.PT_BLOB, bytes(value)
    raise TypeError(f"put_many cannot encode {value!r}")


def put_frame(ns: str, set_name: str, key: int | str, bins: dict[str, Any], send_key: bool = True, ttl: int = 0) -> bytes:
    """A raw write of `bins` to (ns, set_name, key); the key is stored when `send_key`."""
    digest = aerospike.calc_digest(ns, set_name or "", key)
    key_field = None
    if send_key:
        key_field = aswire.key_field_int(key) if isinstance(key, int) else aswire.key_field_str(key)
    fields = [aswire.ns_field(ns)]
    if set_name:
        fields.append(aswire.set_field(set_name))
    fields.append(aswire.digest_field(digest))
    if key_field is not None:
        fields.append(key_field)
    ops = []
    for name, value in bins.items():
        ptype, data = _particle(value)
        ops.append(aswire.op(aswire.OP_WRITE, name, data, ptype))
    return aswire.as_msg(fields, ops, info2=aswire.INFO2_WRITE, record_ttl=ttl)


def put_many(server: "OspreyServer", ns: str, set_name: str | None, records, send_key: bool = True,
             ttl: int = 0, window: int = 256) -> int:
    """Writes (key, bins) pairs with pipelined raw requests, `window` in flight; every reply must
    be OK. Much faster than one client.put per record. Returns the number written."""
    n = 0
    with server.raw(timeout=30.0) as s:
        batch: list[bytes] = []

        def flush():
            s.sendall(b"".join(batch))
            for _ in batch:
                _, ptype, body = aswire.recv_frame(s)
                reply = aswire.parse_msg(body)
                assert reply.result_code == 0, f"raw put failed with {reply.result_code}"
            batch.clear()

        for key, bins in records:
            batch.append(put_frame(ns, set_name or "", key, bins, send_key=send_key, ttl=ttl))
            n += 1
            if len(batch) >= window:
                flush()
        if batch:
            flush()
    return n


# -- scans through the client ---------------------------------------------------------------------


def digest_of(record) -> bytes:
    """The digest of a (key, meta, bins) record tuple returned by a scan."""
    return bytes(record[0][3])


def by_digest(records) -> dict[bytes, tuple]:
    """Scan results keyed by digest; fails if a record came back twice."""
    out: dict[bytes, tuple] = {}
    for rec in records:
        d = digest_of(rec)
        assert d not in out, f"record {d.hex()} returned twice (key {rec[0][2]!r})"
        out[d] = rec
    return out


def scan(client, ns: str, set_name: str | None, *, select=None, nobins: bool = False, policy=None) -> list:
    """All records of one scan (a query without a filter) as (key, meta, bins) tuples."""
    q = client.query(ns, set_name)
    if select:
        q.select(*select)
    options = {"nobins": True} if nobins else None
    return q.results(policy or {}, options)


def paginate(client, ns: str, set_name: str | None, page_size: int, *, policy=None, between_pages=None,
             max_pages: int = 100000) -> list[list]:
    """Pages of a paginated scan (query.max_records = page_size) until the client says done.

    `between_pages(i)` runs after page i (to write, enable an index...)."""
    q = client.query(ns, set_name)
    q.max_records = page_size
    q.paginate()
    pages = []
    for i in range(max_pages):
        page = q.results(policy or {})
        pages.append(page)
        if q.is_done():
            return pages
        if between_pages is not None:
            between_pages(i)
    raise AssertionError(f"pagination not done after {max_pages} pages")


def client_with_udf(server: "OspreyServer", lua_dir: Path, name: str, source: str):
    """A client of `server` that registered the Lua module `name` (source `source`), written to
    `lua_dir` (out of the checkout) and to the clients' shared Lua path, where an aggregation's
    final reduce finds it."""
    client = server.client()
    (LUA_USER_PATH / name).write_text(source)
    module = lua_dir / name
    module.write_text(source)
    client.udf_put(str(module))
    return client


@contextlib.contextmanager
def reference_redis_server(*extra_args: str, env: dict[str, str] | None = None) -> Iterator[int]:
    """A redis-server (the Debian package's, 7.0) on a free port, without persistence, for the
    differential tests that compare Osprey's replies with it: yields its port. `cargo xtask ci`
    installs it; without it the test fails, saying so."""
    binary = shutil.which("redis-server")
    if binary is None:
        import pytest
        pytest.fail("redis-server is not installed (cargo xtask ci installs it)", pytrace=False)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="reference-redis-") as workdir:
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", workdir, *extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "redis-server did not start"
                    time.sleep(0.05)
            yield port
        finally:
            process.terminate()
            process.wait(timeout=10)

"""Real `osprey` processes, each in a Linux network namespace of its own, and the faults a
network can have between them.

A `Network` makes N namespaces joined by a bridge in the test's own (root) namespace; the
bridge has an address too, so a client running in the test reaches every node at its own IP.
`NamespacedServer` is a `harness.OspreyServer` started inside a namespace (the test thread
enters the namespace with setns(2) for the fork, so the harness's start-up, log parsing and
restarts are unchanged), serving and clustering on the namespace's address.

Faults (`Network.heal()` lifts the drops and caps; `Network.destroy()` undoes everything):

* `isolate(node)`: every packet to or from the node's interface dropped (iptables in its
  namespace): fabric and client traffic alike;
* `partition(groups)`: nodes hear only the nodes of their own group (clients reach all);
* `drop_one_way(src, dst)`: src's packets to dst dropped, dst's to src delivered;
* `cap_bandwidth(node, rate)`: a `tc tbf` qdisc on both ends of the node's veth pair;
* `delay_fabric(node, peers, delay_ms)`: the node's new connections to its peers' fabric port
  go through `delay_proxy.py` in its namespace, every byte `delay_ms` late (`cut_connections`
  makes it redial); `stop_delay_proxy` undoes it;
* `cut_connections(node, peers, port)`: aborts the node's open connections (`ss -K`);
* `NamespacedServer.pause()` / `resume()`: SIGSTOP and SIGCONT.

Names are unique per `Network` (an id made of the creating process's pid and random digits, in
every namespace, bridge and interface name), so runs side by side never collide, and a new
`Network` removes what runs whose process is gone left behind. Needs root, `ip` (iproute2)
and `iptables`; `ensure_tools()` installs the Debian packages when they are missing.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import aerospike

from harness import OspreyServer, client_config, namespace, wait_until

SERVICE_PORT = 3000
FABRIC_PORT = 3001
DELAY_PROXY_PORT = 3999
DELAY_PROXY_MARK = 0x4F53
COMMAND_TIMEOUT_S = 30.0
DELAY_PROXY_READY_TIMEOUT_S = 10.0
CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/var/run/netns")
TOOLS = {"ip": "iproute2", "ss": "iproute2", "tc": "iproute2", "iptables": "iptables"}
DELAY_PROXY_SCRIPT = Path(__file__).resolve().parent / "delay_proxy.py"


# -- host preparation ------------------------------------------------------------------------


def run_command(args: list[str], check: bool = True) -> subprocess.CompletedProcess:
    """Runs a command, returning its output; raises with its stderr when `check` and it fails."""
    result = subprocess.run(args, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


def ensure_tools() -> None:
    """Installs iproute2 and iptables with apt-get when missing (CI starts from a clean machine)."""
    missing = sorted({package for tool, package in TOOLS.items() if shutil.which(tool) is None})
    if not missing:
        return
    if shutil.which("apt-get") is None:
        raise RuntimeError(f"missing {missing} and no apt-get to install them")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-q", *missing]
    if subprocess.run(install, capture_output=True, env=env, timeout=600).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, timeout=600)
        result = subprocess.run(install, capture_output=True, text=True, env=env, timeout=600)
        if result.returncode != 0:
            raise RuntimeError(f"apt-get install {missing} failed: {result.stderr.strip()[-2000:]}")


def unavailable_reason() -> str | None:
    """Why network namespaces cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None and shutil.which("apt-get") is None:
        return "no `ip` (iproute2) and no apt-get to install it"
    try:
        ensure_tools()
    except RuntimeError as error:
        return str(error)
    probe = f"osprey-probe-{secrets.token_hex(3)}"
    result = run_command(["ip", "netns", "add", probe], check=False)
    if result.returncode != 0:
        return f"cannot create a network namespace: {result.stderr.strip()}"
    run_command(["ip", "netns", "delete", probe], check=False)
    return None


def free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.0.0.0/8 that no address or route of this machine overlaps."""
    taken = [ipaddress.ip_network(word, strict=False)
             for line in run_command(["ip", "-4", "-o", "addr"]).stdout.splitlines()
             for word in line.split() if "/" in word and word[0].isdigit()]
    taken += [ipaddress.ip_network(line.split()[0], strict=False)
              for line in run_command(["ip", "-4", "route"]).stdout.splitlines()
              if line and line[0].isdigit()]
    for _ in range(1000):
        candidate = ipaddress.ip_network(f"10.{random.randrange(64, 250)}.{random.randrange(256)}.0/24")
        if not any(candidate.overlaps(network) for network in taken):
            return candidate
    raise RuntimeError("no free /24 in 10.0.0.0/8")


# -- entering a namespace ----------------------------------------------------------------------


_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


@contextmanager
def inside_netns(name: str) -> Iterator[None]:
    """Runs the block with this thread in network namespace `name` (setns is per thread): a
    process started meanwhile lives in it. Back in the thread's own namespace afterwards."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(NETNS_DIR / name, os.O_RDONLY)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(target)
        os.close(own)


# -- the network -------------------------------------------------------------------------------


class Node:
    """One namespace: its name, address and the veth pair that joins it to the bridge."""

    def __init__(self, network: "Network", index: int):
        self.index = index
        self.netns = f"osprey-{network.run_id}-{index}"
        self.ip = str(network.subnet.network_address + 10 + index)
        self.outer_veth = f"ov{network.run_id}{index}"
        self.inner_veth = f"oi{network.run_id}{index}"
        self.delay_proxy: subprocess.Popen | None = None
        self.delay_proxy_log: Path | None = None

    def exec(self, args: list[str], check: bool = True) -> subprocess.CompletedProcess:
        """Runs a command inside this node's namespace."""
        return run_command(["ip", "netns", "exec", self.netns, *args], check=check)

    def __repr__(self) -> str:
        return f"Node({self.index}, {self.ip})"


LEFTOVER_RE = re.compile(r"^osprey-(?P<run_id>(?P<pid>[0-9a-f]{6})[0-9a-f]{4})-\d+$")


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_processes_in(netns_name: str) -> None:
    """SIGKILLs what still runs in the namespace (a server or proxy whose test died)."""
    pids = run_command(["ip", "netns", "pids", netns_name], check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def reap_leftovers() -> None:
    """Removes the namespaces, bridges and FORWARD rules of runs whose process is gone (a
    test run killed before its finalizers ran): each name carries its creator's pid."""
    listing = run_command(["ip", "netns", "list"], check=False).stdout.split("\n")
    dead_runs = set()
    for line in listing:
        match = LEFTOVER_RE.match(line.split(" ")[0])
        if match and not process_alive(int(match["pid"], 16)):
            kill_processes_in(match[0])
            run_command(["ip", "netns", "delete", match[0]], check=False)
            dead_runs.add(match["run_id"])
    for run_id in dead_runs:
        bridge = f"obr{run_id}"
        run_command(["ip", "link", "delete", bridge], check=False)
        run_command(["iptables", "-D", "FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"], check=False)


class Network:
    """Namespaces joined by a bridge; `destroy()` removes everything it made."""

    def __init__(self):
        reap_leftovers()
        self.run_id = f"{os.getpid() & 0xFFFFFF:06x}{secrets.token_hex(2)}"
        self.subnet = free_subnet()
        self.bridge = f"obr{self.run_id}"
        self.bridge_ip = str(self.subnet.network_address + 1)
        self.prefix = self.subnet.prefixlen
        self.nodes: list[Node] = []
        self.forward_rule: list[str] | None = None

    def create(self, count: int) -> list[Node]:
        run_command(["ip", "link", "add", self.bridge, "type", "bridge"])
        run_command(["ip", "addr", "add", f"{self.bridge_ip}/{self.prefix}", "dev", self.bridge])
        run_command(["ip", "link", "set", self.bridge, "up"])
        self._accept_bridged_traffic()
        return [self.add_node() for _ in range(count)]

    def _accept_bridged_traffic(self) -> None:
        """With br_netfilter, bridged packets pass the root namespace's FORWARD chain, whose
        policy may be DROP (Docker sets it): accept this bridge's traffic there."""
        try:
            calls_iptables = Path("/proc/sys/net/bridge/bridge-nf-call-iptables").read_text().strip()
        except OSError:
            return
        if calls_iptables == "1":
            self.forward_rule = ["FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"]
            run_command(["iptables", "-I", *self.forward_rule])

    def add_node(self) -> Node:
        node = Node(self, len(self.nodes))
        self.nodes.append(node)
        run_command(["ip", "netns", "add", node.netns])
        run_command(["ip", "link", "add", node.outer_veth, "type", "veth",
                     "peer", "name", node.inner_veth, "netns", node.netns])
        run_command(["ip", "link", "set", node.outer_veth, "master", self.bridge, "up"])
        node.exec(["ip", "link", "set", "lo", "up"])
        node.exec(["ip", "addr", "add", f"{node.ip}/{self.prefix}", "dev", node.inner_veth])
        node.exec(["ip", "link", "set", node.inner_veth, "up"])
        return node

    def destroy(self) -> None:
        """Removes the namespaces (their veth pairs go with them), the bridge and the FORWARD
        rule; stops delay proxies. Safe to call twice, and after a partial `create`."""
        for node in self.nodes:
            stop_delay_proxy(node)
            if node.delay_proxy_log is not None:
                shutil.rmtree(node.delay_proxy_log.parent, ignore_errors=True)
            kill_processes_in(node.netns)
            run_command(["ip", "netns", "delete", node.netns], check=False)
            run_command(["ip", "link", "delete", node.outer_veth], check=False)
        run_command(["ip", "link", "delete", self.bridge], check=False)
        if self.forward_rule is not None:
            run_command(["iptables", "-D", *self.forward_rule], check=False)
            self.forward_rule = None

    def heal(self, nodes: list[Node] | None = None) -> None:
        """Removes every drop rule and bandwidth cap (delay proxies stay: `stop_delay_proxy`)."""
        for node in nodes or self.nodes:
            node.exec(["iptables", "-F", "INPUT"])
            node.exec(["iptables", "-F", "OUTPUT"])
            uncap_bandwidth(node)


def isolate(node: Node) -> None:
    """Drops every packet in and out of the node's interface: fabric and clients alike."""
    node.exec(["iptables", "-A", "INPUT", "-i", node.inner_veth, "-j", "DROP"])
    node.exec(["iptables", "-A", "OUTPUT", "-o", node.inner_veth, "-j", "DROP"])


def drop_one_way(source: Node, destination: Node) -> None:
    """Drops what `source` sends to `destination`; `destination`'s packets still arrive."""
    source.exec(["iptables", "-A", "OUTPUT", "-d", destination.ip, "-j", "DROP"])


def cut_between(node: Node, peers: list[Node]) -> None:
    """Drops traffic both ways between `node` and each of `peers` (rules in `node` only)."""
    for peer in peers:
        node.exec(["iptables", "-A", "INPUT", "-s", peer.ip, "-j", "DROP"])
        node.exec(["iptables", "-A", "OUTPUT", "-d", peer.ip, "-j", "DROP"])


def partition(groups: list[list[Node]]) -> None:
    """Each node hears only the nodes of its own group; clients (the bridge) reach every node."""
    for group in groups:
        outside = [node for other in groups if other is not group for node in other]
        for node in group:
            cut_between(node, outside)


def cap_bandwidth(node: Node, rate: str, burst: str = "32kbit", latency: str = "400ms") -> None:
    """A token bucket on both ends of the node's veth pair: what it sends and what it receives
    pass at most `rate` (tc syntax: 1mbit)."""
    tbf = ["tbf", "rate", rate, "burst", burst, "latency", latency]
    node.exec(["tc", "qdisc", "replace", "dev", node.inner_veth, "root", *tbf])
    run_command(["tc", "qdisc", "replace", "dev", node.outer_veth, "root", *tbf])


def uncap_bandwidth(node: Node) -> None:
    node.exec(["tc", "qdisc", "del", "dev", node.inner_veth, "root"], check=False)
    run_command(["tc", "qdisc", "del", "dev", node.outer_veth, "root"], check=False)


def delay_fabric(node: Node, peers: list[Node], delay_ms: float) -> None:
    """Sends the node's new connections to the peers' fabric port through a delay proxy in its
    namespace: every byte of them, both ways, arrives `delay_ms` late. Connections already
    open are not affected: cut them (`cut_connections`), or start the node after this."""
    stop_delay_proxy(node)
    node.delay_proxy_log = Path(tempfile.mkdtemp(prefix="delay-proxy-")) / "proxy.log"
    with open(node.delay_proxy_log, "wb") as log, inside_netns(node.netns):
        node.delay_proxy = subprocess.Popen(
            [sys.executable, str(DELAY_PROXY_SCRIPT), "--port", str(DELAY_PROXY_PORT),
             "--delay-ms", str(delay_ms), "--mark", hex(DELAY_PROXY_MARK)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )
    if not wait_until(lambda: "ready" in delay_proxy_output(node) or node.delay_proxy.poll() is not None,
                    DELAY_PROXY_READY_TIMEOUT_S) or node.delay_proxy.poll() is not None:
        output = delay_proxy_output(node)
        stop_delay_proxy(node)
        raise RuntimeError(f"the delay proxy did not start: {output!r}")
    for peer in peers:
        node.exec(["iptables", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", peer.ip,
                   "--dport", str(FABRIC_PORT), "-m", "mark", "!", "--mark", hex(DELAY_PROXY_MARK),
                   "-j", "REDIRECT", "--to-ports", str(DELAY_PROXY_PORT)])


def cut_connections(node: Node, peers: list[Node], port: int) -> None:
    """Aborts the node's open TCP connections to `port` on each peer (`ss -K`)."""
    for peer in peers:
        node.exec(["ss", "-K", "dst", peer.ip, "dport", "=", str(port)])


def delay_proxy_output(node: Node) -> str:
    """What the node's delay proxy printed: its ready line and a line per connection."""
    if node.delay_proxy_log is None:
        return ""
    try:
        return node.delay_proxy_log.read_text(errors="replace")
    except OSError:
        return ""


def stop_delay_proxy(node: Node) -> None:
    """Removes the REDIRECT rules and stops the proxy (its connections close)."""
    node.exec(["iptables", "-t", "nat", "-F", "OUTPUT"], check=False)
    proxy, node.delay_proxy = node.delay_proxy, None
    if proxy is not None and proxy.poll() is None:
        proxy.terminate()
        try:
            proxy.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proxy.kill()
            proxy.wait()


# -- servers in namespaces ---------------------------------------------------------------------


class NamespacedServer(OspreyServer):
    """An `OspreyServer` whose process runs in `node`'s namespace, serving on the node's IP at
    SERVICE_PORT and clustering on FABRIC_PORT: the ports stay the same across restarts."""

    def __init__(self, node: Node, node_id: str, seeds: list[Node], release: bool = True,
                 namespaces: list[dict[str, Any]] | None = None, cluster: dict[str, Any] | None = None):
        self.node = node
        settings = {
            "node-id": node_id,
            "fabric-address": node.ip,
            "fabric-port": FABRIC_PORT,
            "seeds": [f"{seed.ip}:{FABRIC_PORT}" for seed in seeds],
            **(cluster or {}),
        }
        super().__init__(
            {"address": node.ip, "port": SERVICE_PORT},
            namespaces or [namespace("test", replication_factor=2)],
            tag=f"netns{node.index}",
            release=release,
            cluster=settings,
        )
        # The metadata group's log and vote survive a restart, as on a real machine.
        self.config_path.write_text(self.config_path.read_text().replace(
            "[cluster]", f'[cluster]\nmetadata-dir = "{self.dir / "cluster"}"'))

    def start(self) -> "NamespacedServer":
        with inside_netns(self.node.netns):
            super().start()
        return self

    def client(self, **extra: Any):
        """A connected client seeded with this node's address (the harness's uses loopback)."""
        config = client_config(self.port, **extra)
        config["hosts"] = [(self.host, self.port)]
        connected = aerospike.client(config).connect()
        self.clients.append(connected)
        return connected

    def pause(self) -> None:
        """SIGSTOP: the process stays, silent, its sockets open."""
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

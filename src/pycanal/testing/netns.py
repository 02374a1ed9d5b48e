"""Private hosts for multi-host tests: Linux network namespaces on a bridge of their own.

A Spark cluster whose every process listens on 127.0.0.1 hides what breaks between hosts: an
address that only means something on the host that gave it (a driver that advertises loopback or
the host name's 127.0.1.1), a service bound to loopback. ``PrivateNetwork`` gives each simulated
host its own network stack (``ip netns``) and joins them with veth pairs on a bridge in the root
namespace, where the rest of the test runs (the driver, MariaDB, the S3 server) at the bridge's
address. The subnet is a private /24 that no interface of the machine uses; nothing is routed
beyond the bridge, so no packet leaves the machine. The processes still share the filesystem (the
same Python, pycanal and Spark at the same paths, as the nodes of a cluster have them installed).

    with PrivateNetwork() as net:
        net.gateway                        # "10.x.y.1": the root namespace on the bridge
        host = net.host("worker1")         # a namespace at "10.x.y.2", loopback up
        host.command(["java", ...])        # ["ip", "netns", "exec", <namespace>, "java", ...]
        host.kill()                        # SIGKILL every process in it: the host is lost

Needs root (CAP_NET_ADMIN) and iproute2; :func:`netns_missing` says why not where they are absent.
"""

from __future__ import annotations

import ipaddress
import os
import random
import shutil
import signal
import subprocess
from dataclasses import dataclass

__all__ = ["LOOPBACK", "Host", "PrivateNetwork", "netns_missing"]


@dataclass(frozen=True)
class Host:
    """A place to run processes: its address, and the namespace (None: this one)."""

    name: str
    address: str
    namespace: str | None = None

    def command(self, args: list[str]) -> list[str]:
        """``args`` run on this host (``ip netns exec`` execs it: the pid is the command's)."""
        return args if self.namespace is None else ["ip", "netns", "exec", self.namespace, *args]

    def kill(self) -> None:
        """SIGKILL every process in the host's namespace, as if the machine had died."""
        if self.namespace is None:
            raise ValueError("the loopback host is this machine: not one to kill")
        pids = _ip("netns", "pids", self.namespace).split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


LOOPBACK = Host("loopback", "127.0.0.1")
"""Every process on this machine's loopback (single-host tests)."""


def netns_missing() -> str | None:
    """Why network namespaces cannot be made here, or None."""
    if shutil.which("ip") is None:
        return "no ip command (iproute2)"
    if os.geteuid() != 0:
        return "not root: making network namespaces needs CAP_NET_ADMIN"
    return None


class PrivateNetwork:
    """A bridge and a private /24 in the root namespace; hosts on it (see the module)."""

    def __init__(self) -> None:
        self.tag = f"{os.getpid() % 100000:05d}{random.randrange(100):02d}"
        self.bridge = f"pcb{self.tag}"  # interface names: 15 characters at most
        self.subnet = _free_subnet()
        self.gateway = str(self.subnet.network_address + 1)
        self.hosts: list[Host] = []
        self._up = False

    def __enter__(self) -> PrivateNetwork:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> PrivateNetwork:
        missing = netns_missing()
        if missing:
            raise RuntimeError(f"cannot make a private network: {missing}")
        _ip("link", "add", self.bridge, "type", "bridge")
        self._up = True
        _ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        return self

    def host(self, name: str) -> Host:
        """A new namespace joined to the bridge at the next address."""
        n = len(self.hosts) + 1
        namespace = f"pycanal-{self.tag}-{name}"
        address = str(self.subnet.network_address + 1 + n)
        veth = f"pcv{self.tag}{n}"
        _ip("netns", "add", namespace)
        host = Host(name, address, namespace)
        self.hosts.append(host)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        _ip("link", "set", veth, "master", self.bridge, "up")
        for args in (
            ("addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0"),
            ("link", "set", "eth0", "up"),
            ("link", "set", "lo", "up"),  # Spark's JVM and its Python workers talk over loopback
        ):
            _ip("-n", namespace, *args)
        return host

    def stop(self) -> None:
        """Kill what runs on the hosts, remove them and the bridge. Idempotent."""
        for host in self.hosts:
            try:
                host.kill()
            finally:
                subprocess.run(["ip", "netns", "del", host.namespace or ""], capture_output=True)
        self.hosts.clear()
        if self._up:
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
            self._up = False


def _ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def _free_subnet() -> ipaddress.IPv4Network:
    """A 10.x.y.0/24 that overlaps no address of the machine's interfaces."""
    used = []
    for line in _ip("-4", "-o", "addr").splitlines():  # "2: eth0    inet 10.0.0.5/24 brd ..."
        words = line.split()
        if "inet" in words:
            used.append(ipaddress.ip_interface(words[words.index("inet") + 1]).network)
    for _ in range(100):
        net = ipaddress.ip_network(f"10.{random.randrange(100, 250)}.{random.randrange(256)}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free 10.x.y.0/24 for a private network")

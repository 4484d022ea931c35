"""An emulated cluster on one Linux machine: network namespaces as hosts, bridges as switches.

Layout (``topology="star"``)::

    host ns  sc-…-h0 [eth0] ══veth══ [p0] ┐
    host ns  sc-…-h1 [eth0] ══veth══ [p1] ├─ bridge br0 in switch ns sc-…-sw
    …                                     ┘

``topology="two-tier"``: hosts are dealt round-robin-free, in blocks, to
``leaves`` leaf switches (one namespace and bridge each); every leaf has an
uplink veth (trunk) to a spine bridge in its own namespace.  All hosts share
one IPv4 subnet (10.200.0.0/16), one L2 domain, so no routing is involved.

Shaping: ``tc qdisc … tbf`` on the egress of *both* ends of every veth, so
each direction of each link is limited independently (a veth end's egress is
exactly one direction of the link; no ifb/ingress policing is needed).
The default ``qdisc="ackprio"`` puts a strict-priority htb (rates far above
the link, so it only orders packets) inside the tbf: pure TCP ACKs (IP
packets under 64 bytes, matched with u32) leave before data, data waits in
a FIFO.  That is what a real host's
flow-queueing qdisc (fq_codel, the Linux default, missing from this kernel)
does for a sparse ACK flow; with one plain tbf FIFO (``qdisc="tbf"``) the
ACKs of an incoming flow wait behind up to 50 ms of outgoing data, which
stalls every bidirectional pattern (rings) in a way no real NIC does
(docs/accuracy.md).  ``qdisc="fq"`` (up to 16 hosts) adds one round-robin class per
(source, destination) host pair, as fq_codel serves flows, so a small control message
to one neighbour does not wait behind bulk data to another.  All count whole Ethernet frames, so TCP goodput is
``rate × 1448/1514`` ≈ 95.6 % of the shaped rate at MTU 1500 (see docs/calibration.md).

Every veth is created with both ends directly inside namespaces this run
made, so nothing is added to the machine's own namespace and interface names
cannot clash with other users.  Namespace names are ``sc-<pid>-<random>-…``.
:class:`EmulatedCluster` is a context manager that kills the processes it
started and deletes every namespace it created on exit, also when setup or
the body raises.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.units import parse_bandwidth

__all__ = ["EmulatedCluster", "Host", "emulation_available", "list_namespaces", "SUBNET"]

SUBNET = "10.200"
TOPOLOGIES = ("star", "two-tier")
#: ``tbf``: one FIFO per link direction; ``ackprio``: htb at the same rate, pure ACKs served first
QDISCS = ("ackprio", "fq", "tbf")


def emulation_available() -> str | None:
    """``None`` if this process can build namespaces, else the reason it cannot."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (network namespaces and tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"needs the {tool!r} command (iproute2)"
    return None


def list_namespaces() -> list[str]:
    """Names of all network namespaces on the machine."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


@dataclass(frozen=True)
class Host:
    """One emulated machine: its namespace, address and the leaf switch it hangs off."""

    index: int
    netns: str
    ip: str
    leaf: int


class EmulatedCluster:
    """Context manager building (and always removing) a shaped namespace cluster.

    Parameters
    ----------
    hosts: number of host namespaces.
    rate: host-link rate per direction, e.g. ``"200Mb/s"`` (parsed with simcomm.units).
    topology: ``"star"`` (one switch) or ``"two-tier"`` (leaves joined by a spine).
    leaves: leaf switches for ``two-tier``; hosts fill leaf 0 first, then leaf 1, ...
    trunk_rate: leaf-spine rate per direction (default: ``rate``).
    burst: token bucket in bytes (default: 50 us of traffic, at least two frames).
    qdisc: ``"ackprio"`` (default), ``"fq"`` or ``"tbf"``; see "Shaping" above.
    """

    def __init__(self, hosts: int = 2, rate: str | float = "200Mb/s", *, topology: str = "star",
                 leaves: int = 2, trunk_rate: str | float | None = None, burst: int | None = None,
                 mtu: int = 1500, qdisc: str = "ackprio"):
        if qdisc not in QDISCS:
            raise ConfigError(f"qdisc: {qdisc!r} is not one of {', '.join(QDISCS)}")
        self.qdisc = qdisc
        if topology not in TOPOLOGIES:
            raise ConfigError(f"topology: {topology!r} is not one of {', '.join(TOPOLOGIES)}")
        if not 1 <= hosts <= 200:
            raise ConfigError(f"hosts: {hosts} must be between 1 and 200")
        if qdisc == "fq" and hosts > 16:
            raise ConfigError(f"hosts: qdisc 'fq' keeps one class per host pair and supports up to 16 hosts, "
                              f"not {hosts}")
        if topology == "two-tier" and not 1 <= leaves <= hosts:
            raise ConfigError(f"leaves: {leaves} must be between 1 and the number of hosts ({hosts})")
        self.n_hosts = hosts
        self.rate = parse_bandwidth(rate, "rate")
        self.trunk_rate = parse_bandwidth(trunk_rate, "trunk_rate") if trunk_rate is not None else self.rate
        self.topology = topology
        self.n_leaves = leaves if topology == "two-tier" else 1
        self.burst = burst
        self.mtu = mtu
        self.prefix = f"sc-{os.getpid()}-{secrets.token_hex(3)}"
        self.hosts: tuple[Host, ...] = ()
        self._created: list[str] = []
        self._procs: list[subprocess.Popen] = []
        self._old_term = None

    # ---- lifecycle -----------------------------------------------------
    def __enter__(self) -> EmulatedCluster:
        why = emulation_available()
        if why:
            raise ConfigError(f"emulated cluster: {why}")
        self._trap_sigterm()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Kill started processes, then delete every namespace created (idempotent)."""
        for p in self._procs:
            if p.poll() is None:
                p.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):  # kill is never ignored in practice
                p.wait(timeout=10)
        self._procs.clear()
        errors = []
        for ns in reversed(self._created):
            r = subprocess.run(["ip", "netns", "del", ns], capture_output=True, text=True, check=False)
            if r.returncode != 0 and ns in list_namespaces():
                errors.append(f"{ns}: {r.stderr.strip()}")
        self._created.clear()
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
            self._old_term = None
        if errors:
            raise RuntimeError("could not delete namespaces: " + "; ".join(errors))

    def _trap_sigterm(self) -> None:
        # SIGTERM (``timeout``, a cancelled CI job) ends Python without unwinding ``with``
        # blocks, which would leave the namespaces behind; raising SystemExit instead runs
        # close().  Only the main thread may set handlers; the previous one is restored.
        if threading.current_thread() is not threading.main_thread():
            return

        def _exit(signum, frame):
            raise SystemExit(128 + signum)

        self._old_term = signal.signal(signal.SIGTERM, _exit)

    # ---- building ------------------------------------------------------
    def _ip(self, *args: str) -> None:
        r = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")

    def _ns(self, suffix: str) -> str:
        name = f"{self.prefix}-{suffix}"
        self._ip("netns", "add", name)
        self._created.append(name)
        self._ip("-n", name, "link", "set", "lo", "up")
        return name

    def _bridge(self, ns: str) -> None:
        self._ip("-n", ns, "link", "add", "br0", "type", "bridge")
        self._ip("-n", ns, "link", "set", "br0", "up")

    def _tc(self, ns: str, *args: str) -> None:
        cmd = ["ip", "netns", "exec", ns, "tc", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")

    def burst_bytes(self, rate: float) -> int:
        """The token bucket of a link shaped at ``rate`` B/s: ``burst``, else 50 us of traffic, >= 2 frames."""
        return self.burst or max(2 * (self.mtu + 14), int(rate * 50e-6))

    def _shape(self, ns: str, dev: str, rate: float) -> None:
        bits = int(round(rate * 8))
        frame = self.mtu + 14
        burst = self.burst_bytes(rate)
        limit = max(256 * 1024, int(rate * 0.05))  # 50 ms of queue: TCP sees delay, not loss
        if self.qdisc == "tbf":
            self._tc(ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{bits}bit",
                     "burst", str(burst), "limit", str(limit))
            return
        # tbf shapes exactly as above; inside it a strict-priority htb (rates far above the link,
        # so it never limits) sends pure ACKs before data
        d = ("dev", dev)
        self._tc(ns, "qdisc", "replace", *d, "root", "handle", "1:", "tbf", "rate", f"{bits}bit",
                 "burst", str(burst), "limit", str(limit))
        self._tc(ns, "qdisc", "add", *d, "parent", "1:1", "handle", "10:", "htb", "default", "20")
        fast = ("rate", "10gbit", "ceil", "10gbit", "quantum", str(frame))
        self._tc(ns, "class", "add", *d, "parent", "10:", "classid", "10:1", "htb", *fast)
        self._tc(ns, "class", "add", *d, "parent", "10:1", "classid", "10:10", "htb", *fast, "prio", "0")
        self._tc(ns, "class", "add", *d, "parent", "10:1", "classid", "10:20", "htb", *fast, "prio", "1")
        self._tc(ns, "qdisc", "add", *d, "parent", "10:20", "pfifo", "limit", str(max(2, limit // frame)))
        self._tc(ns, "qdisc", "add", *d, "parent", "10:10", "pfifo", "limit", "1000")
        # pure ACK: TCP, IP total length < 64 (20 B IP + 20..40 B TCP header, no payload)
        self._tc(ns, "filter", "add", *d, "parent", "10:", "protocol", "ip", "prio", "1", "u32",
                 "match", "ip", "protocol", "6", "0xff", "match", "u16", "0x0000", "0xffc0", "at", "2",
                 "flowid", "10:10")
        if self.qdisc == "fq":
            self._fair_classes(ns, d, fast, frame, limit)

    def _fair_classes(self, ns: str, d: tuple, fast: tuple, frame: int, limit: int) -> None:
        """One round-robin data class per (source, destination) host pair, like a flow-queueing qdisc.

        htb serves equal-priority classes in turn (a quantum of one frame each), so a
        sparse pair (a receiver's small "ready" notice to its other neighbour) no longer
        waits behind a bulk pair's queue.  Unmatched packets use the shared FIFO 10:20.
        """
        ips = [f"{SUBNET}.{i // 250}.{i % 250 + 1}" for i in range(self.n_hosts)]
        for a, src in enumerate(ips):
            for b, dst in enumerate(ips):
                if a == b:
                    continue
                minor = f"{0x100 + a * 32 + b:x}"
                self._tc(ns, "class", "add", *d, "parent", "10:1", "classid", f"10:{minor}", "htb", *fast, "prio", "1")
                self._tc(ns, "qdisc", "add", *d, "parent", f"10:{minor}", "pfifo", "limit",
                         str(max(2, limit // frame)))
                self._tc(ns, "filter", "add", *d, "parent", "10:", "protocol", "ip", "prio", "2", "u32",
                         "match", "ip", "src", f"{src}/32", "match", "ip", "dst", f"{dst}/32", "flowid", f"10:{minor}")

    def _link(self, ns_a: str, dev_a: str, ns_b: str, dev_b: str, rate: float) -> None:
        self._ip("link", "add", dev_a, "netns", ns_a, "type", "veth", "peer", "name", dev_b, "netns", ns_b)
        for ns, dev in ((ns_a, dev_a), (ns_b, dev_b)):
            self._ip("-n", ns, "link", "set", dev, "mtu", str(self.mtu))
            self._shape(ns, dev, rate)

    def _build(self) -> None:
        spine = None
        if self.topology == "two-tier":
            spine = self._ns("spine")
            self._bridge(spine)
        leaves = []
        for j in range(self.n_leaves):
            sw = self._ns("sw" if spine is None else f"leaf{j}")
            self._bridge(sw)
            if spine is not None:
                self._link(sw, "up0", spine, f"d{j}", self.trunk_rate)
                self._ip("-n", sw, "link", "set", "up0", "master", "br0", "up")
                self._ip("-n", spine, "link", "set", f"d{j}", "master", "br0", "up")
            leaves.append(sw)
        per_leaf = -(-self.n_hosts // self.n_leaves)
        hosts = []
        for i in range(self.n_hosts):
            leaf = i // per_leaf
            ns = self._ns(f"h{i}")
            ip = f"{SUBNET}.{i // 250}.{i % 250 + 1}"
            self._link(ns, "eth0", leaves[leaf], f"p{i}", self.rate)
            self._ip("-n", leaves[leaf], "link", "set", f"p{i}", "master", "br0", "up")
            self._ip("-n", ns, "addr", "add", f"{ip}/16", "dev", "eth0")
            self._ip("-n", ns, "link", "set", "eth0", "up")
            hosts.append(Host(i, ns, ip, leaf))
        self.hosts = tuple(hosts)

    # ---- running -------------------------------------------------------
    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(self._created)

    def popen(self, host: int, argv: Sequence[str], *, env: dict | None = None, **kw) -> subprocess.Popen:
        """Start ``argv`` inside host ``host``'s namespace; it is killed on exit."""
        h = self.hosts[host]
        full_env = dict(os.environ if env is None else env)
        full_env["SIMCOMM_NODE"] = f"h{h.index}"
        full_env["SIMCOMM_LEAF"] = f"leaf{h.leaf}"
        # gloo advertises the address its host name resolves to, which lives outside the namespace
        full_env["GLOO_SOCKET_IFNAME"] = "eth0"
        p = subprocess.Popen(["ip", "netns", "exec", h.netns, *argv], env=full_env, **kw)
        self._procs.append(p)
        return p

    def python(self, host: int, module: str, args: Sequence[str], **kw) -> subprocess.Popen:
        """Run ``python -m module args`` (this interpreter) on host ``host``."""
        return self.popen(host, [sys.executable, "-m", module, *args], **kw)

    def describe(self) -> dict:
        """A JSON-able record of the emulated cluster (for result files)."""
        return {"hosts": self.n_hosts, "topology": self.topology, "leaves": self.n_leaves,
                "rate_Bps": self.rate, "trunk_rate_Bps": self.trunk_rate, "mtu": self.mtu,
                "qdisc": f"{self.qdisc} on both veth ends", "burst_B": self.burst_bytes(self.rate)}

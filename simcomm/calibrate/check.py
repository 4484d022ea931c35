"""``--check``: compare predictions with a measurement record, case by case.

The network the prediction runs on comes from the record: an emulated
cluster records its hosts, leaves and rates; a real one is taken as a star
of its distinct nodes (one switch), which is what a single-switch cluster is.
α and β are the record's own inter-node fit (intra-node if it has one node),
so ``--check`` on a file judges the model, never a re-fit of the collectives.

A record is a file from anywhere, so :func:`validate_record` checks its
structure and types before anything is built from it: every field it uses,
with one ``error:`` line naming the first bad one (``p2p.inter.times[2]``),
and bounded sizes (:data:`MAX_HOSTS`, :data:`MAX_RANKS`, :data:`MAX_POINTS`, :data:`MAX_CASES`)
so a record naming host 999999999 is refused instead of allocating a
cluster of that size.
"""

from __future__ import annotations

import json
import math
import os
import stat
import statistics
from dataclasses import dataclass
from pathlib import Path

from simcomm.calibrate.fit import CalibrationError
from simcomm.calibrate.launch import fit_record
from simcomm.calibrate.predict import CASES, closed_form, cluster_topology, predict

__all__ = ["CheckRow", "load_record", "validate_record", "topology_for", "check_record", "summary",
           "MAX_HOSTS", "MAX_RANKS", "MAX_POINTS", "MAX_CASES"]

#: largest cluster a record may describe: the flow engine prices every case on it, and a
#: calibration that really ran on more hosts than this is not one a single check should replay
MAX_HOSTS = 1024
#: (pricing the five cases of a 1 024-rank record takes about 1.3 s; 4 096 ranks, 10 s)
MAX_RANKS = 1024
#: most ping-pong points per class (a sweep has about 10; the fit's Theil-Sen slope is quadratic)
MAX_POINTS = 1000
#: most collective cases per record (a sweep has 10: five kinds at two sizes)
MAX_CASES = 64
P2P_CLASSES = ("intra", "inter", "cross")
TOPOLOGIES = ("star", "two-tier")


@dataclass(frozen=True)
class CheckRow:
    case: str
    ranks: int
    nbytes: int
    measured: float
    predicted: float
    closed: float | None

    @property
    def error(self) -> float:
        """Signed relative error of the prediction."""
        return (self.predicted - self.measured) / self.measured


#: the largest measurement record read (a record of every collective and size is a few hundred KB)
MAX_RECORD_BYTES = 64 << 20


def load_record(path: str | Path) -> dict:
    """Read a measurement JSON (a ``.toml`` path means the JSON beside it)."""
    p = Path(path)
    if p.suffix == ".toml":
        p = p.with_suffix(".json")
    try:
        st = os.stat(p)
        # a FIFO or device would block the read (or never end): only a regular file of a record's size is read
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_RECORD_BYTES:
            raise CalibrationError(f"check: {str(p)!r} is not a regular file of at most "
                                   f"{MAX_RECORD_BYTES >> 20} MiB (a FIFO, device or directory is not read)")
        rec = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CalibrationError(f"check: cannot read {str(p)!r} ({exc.strerror or exc})") from None
    except ValueError:
        raise CalibrationError(f"check: {str(p)!r} is not a JSON measurement record") from None
    if not isinstance(rec, dict) or rec.get("version") != 1 or "collectives" not in rec:
        raise CalibrationError(f"check: {str(p)!r} is not a simcomm calibration record (version 1)")
    validate_record(rec, str(p))
    return rec


def _bad(where: str, field: str, why: str) -> CalibrationError:
    return CalibrationError(f"check: {where}: field {field}: {why}")


def _int(v, where: str, field: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise _bad(where, field, f"{v!r:.40} is not an integer from {lo} to {hi}")
    return v


def _pos(v, where: str, field: str, *, zero: bool = False) -> float:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (v >= 0 if zero else v > 0)
    if not ok or v > 1e18:
        raise _bad(where, field, f"{v!r:.40} is not a finite number {'>= 0' if zero else '> 0'} (at most 1e18)")
    return float(v)


def _list(v, where: str, field: str, most: int) -> list:
    if not isinstance(v, list) or len(v) > most:
        raise _bad(where, field, f"must be a list of at most {most} entries")
    return v


def validate_record(rec: dict, where: str = "record") -> None:
    """Check every field ``--check`` reads; raise one :class:`CalibrationError` naming the first bad one."""
    world = _int(rec.get("world"), where, "world", 2, MAX_RANKS)
    nodes = rec.get("nodes")
    if nodes is not None:
        nodes = _list(nodes, where, "nodes", MAX_RANKS)
        if len(nodes) != world:
            raise _bad(where, "nodes", f"has {len(nodes)} entries for world {world}; need one node per rank")
        for i, n in enumerate(nodes):
            if not isinstance(n, str) or not n or len(n) > 256:
                raise _bad(where, f"nodes[{i}]", f"{n!r:.40} is not a host name")
        if len(set(nodes)) > MAX_HOSTS:
            raise _bad(where, "nodes", f"names {len(set(nodes))} hosts; at most {MAX_HOSTS}")
    cl = rec.get("cluster")
    hosts = len(set(nodes)) if nodes else 1
    if cl is not None:
        if not isinstance(cl, dict):
            raise _bad(where, "cluster", "must be an object")
        if "hosts" in cl:
            hosts = _int(cl["hosts"], where, "cluster.hosts", 1, MAX_HOSTS)
        topo = cl.get("topology", "star")
        if topo not in TOPOLOGIES:
            raise _bad(where, "cluster.topology", f"{topo!r:.40} is not one of {', '.join(TOPOLOGIES)}")
        if topo == "two-tier" and "leaves" in cl:
            _int(cl["leaves"], where, "cluster.leaves", 1, hosts)
        for k in ("rate_Bps", "trunk_rate_Bps"):
            if k in cl:
                _pos(cl[k], where, f"cluster.{k}")
        if "mtu" in cl:
            _int(cl["mtu"], where, "cluster.mtu", 68, 65535)
    if nodes:
        order = list(dict.fromkeys(nodes))
        if all(n[:1] == "h" and n[1:].isdigit() for n in order):  # emulated hosts h<i>: i is the host index
            for i, n in enumerate(nodes):
                if int(n[1:]) >= max(hosts, len(order)):
                    raise _bad(where, f"nodes[{i}]", f"host {n!r:.40} is outside the cluster's "
                                                     f"{max(hosts, len(order))} hosts")
    host = rec.get("host")
    if host is not None:
        if not isinstance(host, dict):
            raise _bad(where, "host", "must be an object with reduce_Bps and copy_Bps")
        for k in ("reduce_Bps", "copy_Bps"):
            _pos(host.get(k), where, f"host.{k}")
    p2p = rec.get("p2p")
    if not isinstance(p2p, dict) or not p2p:
        raise _bad(where, "p2p", "must be an object with at least one of " + ", ".join(P2P_CLASSES))
    for cls, d in p2p.items():
        if cls not in P2P_CLASSES:
            raise _bad(where, f"p2p.{str(cls)[:40]}", f"is not one of {', '.join(P2P_CLASSES)}")
        if not isinstance(d, dict):
            raise _bad(where, f"p2p.{cls}", "must be an object with sizes and times")
        sizes = _list(d.get("sizes"), where, f"p2p.{cls}.sizes", MAX_POINTS)
        times = _list(d.get("times"), where, f"p2p.{cls}.times", MAX_POINTS)
        if len(sizes) != len(times):
            raise _bad(where, f"p2p.{cls}.times", f"has {len(times)} entries for {len(sizes)} sizes")
        for i, v in enumerate(sizes):
            _pos(v, where, f"p2p.{cls}.sizes[{i}]", zero=True)
        for i, v in enumerate(times):
            _pos(v, where, f"p2p.{cls}.times[{i}]")
    colls = _list(rec.get("collectives"), where, "collectives", MAX_CASES)
    if not colls:
        raise _bad(where, "collectives", "is empty; the record holds no collective measurements")
    for i, c in enumerate(colls):
        f = f"collectives[{i}]"
        if not isinstance(c, dict):
            raise _bad(where, f, "must be an object with kind, ranks, nbytes and time")
        if c.get("kind") not in CASES:
            raise _bad(where, f"{f}.kind", f"{c.get('kind')!r:.40} is not one of {', '.join(CASES)}")
        _int(c.get("ranks"), where, f"{f}.ranks", 2, world)
        _int(c.get("nbytes"), where, f"{f}.nbytes", 1, 10**15)
        _pos(c.get("time"), where, f"{f}.time")


def topology_for(rec: dict, alpha: float, bandwidth: float, trunk_bandwidth: float | None = None,
                 loopback: tuple[float, float] | None = None):
    """The recorded cluster as a simcomm Topology carrying the fitted link (see predict.py).

    ``trunk_bandwidth`` is the cross-leaf ping-pong's fitted goodput where the
    record has one; else the trunks get the recorded shaped rate ratio.
    """
    nodes = rec.get("nodes") or ["n0"] * int(rec.get("world", 2))
    order = list(dict.fromkeys(nodes))
    rank_host = tuple(order.index(n) for n in nodes)
    cl = rec.get("cluster") or {}
    hosts = int(cl.get("hosts", len(order)))
    leaves = int(cl.get("leaves", 1)) if cl.get("topology") == "two-tier" else 1
    per_leaf = -(-hosts // leaves)
    ratio = float(cl.get("trunk_rate_Bps", 1.0)) / float(cl.get("rate_Bps", 1.0))
    if trunk_bandwidth is not None:
        ratio = min(1.0, trunk_bandwidth / bandwidth)  # a cross-leaf path is never faster than a host link
    # emulated hosts are named h<i>; map them to their real index so leaves are right
    if all(isinstance(n, str) and n[:1] == "h" and n[1:].isdigit() for n in order):
        rank_host = tuple(int(n[1:]) for n in nodes)
    leaf_of = tuple(h // per_leaf for h in range(max(hosts, max(rank_host) + 1)))
    from simcomm.runtimes.host import HostRates

    return cluster_topology(rank_host, leaf_of, alpha, bandwidth, ratio, name=f"{cl.get('topology', 'star')}",
                            host=HostRates.from_record(rec, "the record's host probe"), loopback=loopback)


def check_record(rec: dict) -> list[CheckRow]:
    validate_record(rec)
    fits, _ = fit_record(rec)
    f = fits.get("inter") or fits.get("intra") or fits["cross"]
    cross = fits.get("cross") if "inter" in fits else None
    intra = fits.get("intra")
    topo = topology_for(rec, f.alpha, f.bandwidth, cross.bandwidth if cross else None,
                        (intra.alpha, intra.bandwidth) if intra else None)
    rows = []
    mtu = int((rec.get("cluster") or {}).get("mtu", 1500))
    for c in rec["collectives"]:
        p, n = int(c["ranks"]), int(c["nbytes"])
        rows.append(CheckRow(c["kind"], p, n, float(c["time"]), predict(c["kind"], p, n, topo, mtu),
                             closed_form(c["kind"], p, n, f.alpha, f.beta)))
    if not rows:
        raise CalibrationError("check: the record holds no collective measurements")
    return rows


def summary(rows: list[CheckRow]) -> dict:
    errs = [abs(r.error) for r in rows]
    return {"cases": len(rows), "median_abs_error": statistics.median(errs), "max_abs_error": max(errs)}

"""``--check``: compare predictions with a measurement record, case by case.

The network the prediction runs on comes from the record: an emulated
cluster records its hosts, leaves and rates; a real one is taken as a star
of its distinct nodes (one switch), which is what a single-switch cluster is.
α and β are the record's own inter-node fit (intra-node if it has one node),
so ``--check`` on a file judges the model, never a re-fit of the collectives.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from simcomm.calibrate.fit import CalibrationError
from simcomm.calibrate.predict import closed_form, cluster_topology, predict
from simcomm.calibrate.launch import fit_record

__all__ = ["CheckRow", "load_record", "topology_for", "check_record", "summary"]


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


def load_record(path: str | Path) -> dict:
    """Read a measurement JSON (a ``.toml`` path means the JSON beside it)."""
    p = Path(path)
    if p.suffix == ".toml":
        p = p.with_suffix(".json")
    try:
        rec = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CalibrationError(f"check: cannot read {str(p)!r} ({exc.strerror or exc})") from None
    except ValueError:
        raise CalibrationError(f"check: {str(p)!r} is not a JSON measurement record") from None
    if not isinstance(rec, dict) or rec.get("version") != 1 or "collectives" not in rec:
        raise CalibrationError(f"check: {str(p)!r} is not a simcomm calibration record (version 1)")
    return rec


def topology_for(rec: dict, alpha: float, bandwidth: float, trunk_bandwidth: float | None = None):
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
    return cluster_topology(rank_host, leaf_of, alpha, bandwidth, ratio, name=f"{cl.get('topology', 'star')}")


def check_record(rec: dict) -> list[CheckRow]:
    fits, _ = fit_record(rec)
    f = fits.get("inter") or fits.get("intra") or fits["cross"]
    cross = fits.get("cross") if "inter" in fits else None
    topo = topology_for(rec, f.alpha, f.bandwidth, cross.bandwidth if cross else None)
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

"""The cluster side of ``simcomm calibrate --nccl-tests``: read the tables, and predict them with a trial NIC.

Each file is one nccl-tests output (:mod:`simcomm.nccl.measured`); the test it ran comes from its header
(recent nccl-tests name it) or ``FILE:test`` (``all_reduce``, ``all_gather`` ...), its rank count from
its ``# Rank`` lines or its per-rank sizes.  Its node count is its ranks over the cluster's GPUs per
node.  Only rows between nodes inform the network: a table of one node is refused by the fit.

The predictor puts a trial ``calib-inter`` class on the cluster exactly as ``--links`` does
(:func:`simcomm.topologies.calibrated.with_calibrated_links`, after the stack) and runs ``simcomm bench``'s
own model of each table's collective at its sizes, so a fitted file predicts, through every command,
what the fit saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simcomm.bench import COLLECTIVES, bench, canonical
from simcomm.calibrate.fit import CalibrationError
from simcomm.calibrate.nccl_tests import BIG, SMALL
from simcomm.nccl.measured import Measured, read_measured, what_rows_say

__all__ = ["Table", "read_tables", "ClusterPredictor"]


@dataclass(frozen=True)
class Table:
    """One nccl-tests output: which collective, on how many ranks, its counted rows (bytes, seconds)."""

    path: str
    kind: str                 # simcomm's collective name
    ranks: int
    sizes: tuple[float, ...]
    times_s: tuple[float, ...]
    dtype: str
    gpus_per_thread: int


def _test_of(path: str, given: str | None, measured: Measured) -> str:
    if given is not None:
        if given not in COLLECTIVES:
            raise CalibrationError(f"--nccl-tests: {path}: test {given!r} is not valid; valid choices: "
                                   f"{', '.join(sorted(COLLECTIVES))}")
        return given
    if measured.test is not None:
        return measured.test
    tests, _, words = what_rows_say(measured)
    if len(tests) == 1:
        return tests[0]
    raise CalibrationError(f"--nccl-tests: {path}: the file does not name its test and its rows ({words}) fit "
                           f"{' or '.join(tests) or 'none'}: give it as {path}:TEST, e.g. {path}:all_reduce")


def read_tables(specs: list[str]) -> list[Table]:
    """Each ``FILE`` or ``FILE:TEST`` read and checked: its collective, ranks, and its settled, non-empty rows."""
    if not specs:
        raise CalibrationError("--nccl-tests: give at least one nccl-tests output file")
    out = []
    for spec in specs:
        path, _, given = spec.partition(":") if ":" in spec and not Path(spec).exists() else (spec, "", "")
        measured = read_measured(path)
        test = _test_of(path, given or None, measured)
        _, implied, _ = what_rows_say(measured)
        ranks = measured.ranks if measured.ranks is not None else implied
        if ranks is None:
            raise CalibrationError(f"--nccl-tests: {path}: the file has no '# Rank' lines and its sizes do not say "
                                   "its rank count; keep nccl-tests' header in the file")
        rows = [r for r in measured.rows if r.size > 0 and r.time_us > 0 and not r.unsettled]
        out.append(Table(path, COLLECTIVES[test], ranks, tuple(float(r.size) for r in rows),
                         tuple(r.time_us * 1e-6 for r in rows), rows[0].type if rows else "float",
                         measured.gpus_per_thread or 1))
    return out


class ClusterPredictor:
    """Predicts every table's big or small rows on a cluster with a trial ``calib-inter`` class.

    ``clusters``: node count -> (raw, stack-applied) topology of each table's size; :meth:`from_scenario`
    builds them as every command does (``benchmarks/nccl/calibrate_suite.py`` passes the suite's own models).
    """

    def __init__(self, tables: list[Table], clusters: dict, gpus_per_node: int, runtime):
        self.tables, self.clusters, self.gpus_per_node, self.runtime = tables, clusters, gpus_per_node, runtime
        # only tables across nodes see the network
        self.network = [t for t in tables if t.ranks // gpus_per_node > 1]
        if not self.network:
            raise CalibrationError("--nccl-tests: every table ran on one node, so its rates are NVLink's or PCIe's, "
                                   "which datasheets give; calibrate from an nccl-tests run across 2+ nodes")
        raw = self.clusters[max(self.clusters)][0]
        self.nic = _nic_class(raw)
        self.preset_alpha = _route_latency(raw)

    @classmethod
    def from_scenario(cls, scenario, tables: list[Table]) -> ClusterPredictor:
        """The clusters of each table's node count built from ``scenario`` as ``simcomm bench`` builds them."""
        from simcomm.pipeline import Context

        context = Context(scenario)
        gpn = scenario.gpus_per_node or context.cluster(scenario.nodes, 0)[0].n_ranks // max(1, scenario.nodes)
        clusters = {}
        for t in tables:
            if t.ranks % gpn:
                raise CalibrationError(f"--nccl-tests: {t.path} ran on {t.ranks} ranks, not a whole number of "
                                       f"{gpn}-GPU nodes: set --gpus-per-node to the measured machine's")
            clusters.setdefault(t.ranks // gpn, context.cluster(t.ranks // gpn, 0))
        return cls(tables, clusters, gpn, context.runtime())

    def rows(self, which: str) -> list[tuple[Table, float, float]]:
        """(table, size, measured seconds) of the network tables' rows of at least BIG ("big") or at most SMALL."""
        return [(t, s, m) for t in self.network for s, m in zip(t.sizes, t.times_s, strict=True)
                if (s >= BIG if which == "big" else s <= SMALL)]

    def measured(self, which: str) -> list[float]:
        return [m for _, _, m in self.rows(which)]

    def with_class(self, nodes: int, goodput: float, alpha: float):
        from simcomm.links.base import LinkClass
        from simcomm.topologies.calibrated import with_calibrated_links

        trial = LinkClass("calib-inter", goodput, alpha, self.nic.family, "trial of simcomm calibrate --nccl-tests",
                          "simcomm calibrate --nccl-tests", True)
        return with_calibrated_links(self.clusters[nodes][1], {"calib-inter": trial}, "--nccl-tests")

    def __call__(self, goodput: float, alpha: float, which: str) -> list[float]:
        out = []
        rows = self.rows(which)
        for t in self.network:
            sizes = [s for table, s, _ in rows if table is t]
            if not sizes:
                continue
            nodes = t.ranks // self.gpus_per_node
            topo, _ = self.with_class(nodes, goodput, alpha)
            rows = bench(canonical(t.kind), topo, self.runtime, sizes, dtype=t.dtype,
                         gpus_per_thread=min(t.gpus_per_thread, t.ranks // nodes))
            out += [r.time_us * 1e-6 for r in rows]
        return out


def _nic_class(raw):
    """The link class of the cluster's host links (what ``calib-inter`` replaces): its line rate and family."""
    from simcomm.topologies.calibrated import host_edges

    edges = host_edges(raw)
    if not edges:
        raise CalibrationError("--nccl-tests: the cluster has no link between a machine and a network switch to "
                               "calibrate (one node, or a direct network)")
    names = sorted({raw.graph.edges[u, v]["link"] for u, v in edges})
    return raw.links[names[0]]


def _route_latency(raw) -> float:
    """End-to-end latency of the route from rank 0 to the first rank of another machine, as the preset states it."""
    other = next(r for r in range(raw.n_ranks) if raw.machine_of(r) != raw.machine_of(0))
    path = list(raw.path(0, other))
    return sum(raw.links[raw.graph.edges[u, v]["link"]].latency for u, v in zip(path, path[1:], strict=False))

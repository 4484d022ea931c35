"""End-to-end training iterations on the emulated cluster, and simcomm's prediction of them.

An experiment of simcomm's accuracy suite (docs/accuracy.md), kept in benchmarks/, not in
the product.  ``launch_e2e`` runs ``e2e_worker.py`` (beside this file) ranks inside an
:class:`~simcomm.calibrate.emulate.EmulatedCluster` (workers host-major,
``per_host`` ranks per host; for ``ps`` one more host holds the server);
``measure`` turns the record into mean iteration times; ``predict_e2e``
runs ``simcomm.pipeline.simulate`` on the same setting: the emulated cluster
as a Topology carrying the ping-pong fit (``cluster_topology``), the ``ideal``
stack (the fit already is TCP goodput and latency; nothing is added), a trace
captured on this machine and the strategy options the workers implement.

Compute: the trace's layer times are scaled by one factor, the median time of a
forward+backward+step measured by every worker at once with no communication
(the worker's probe, the same co-location as training) over the trace's own
forward+backward+step sum.  That factor holds both the sharing of the cores
by co-located ranks and the work hooks do not see; it comes from a
compute-only microbenchmark, never from the training iterations.  A second
microbenchmark runs the same compute while every worker streams 1 MiB to its
ring neighbour: its slowdown per byte moved is the host CPU cost of
communication, which the prediction's stack charges to overlapping compute.
The compute probe's spread within each rank (:func:`probe_jitter`) is the
compute's iteration-to-iteration jitter, given to the workload as
``compute_jitter`` (simcomm.jitter), so a step that waits for several ranks
waits for the slowest.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from e2e_psdrop import DROP_RATIO, THRESHOLD_EVERY
from e2e_sparse import SKETCH_COLS, SKETCH_ROWS

from simcomm.calibrate.launch import wait_all
from simcomm.calibrate.predict import cluster_topology
from simcomm.errors import ConfigError

__all__ = ["E2ESpec", "Measured", "launch_e2e", "measure", "compute_scale", "trace_compute_s", "predict_e2e", "e2e_topology",
           "STRATEGY_OPTIONS"]

#: simcomm options that describe what e2e_worker does (see its docstring)
STRATEGY_OPTIONS = {
    "allreduce": {"algorithm": "ring", "overlap": "none"},
    "node-based": {"algorithm": "ring", "intra_algorithm": "ring", "overlap": "none"},
    "ps": {"servers": 1, "placement": "own"},
    "sgp": {"interval": 1, "mode": "overlap"},  # the worker runs reference SGP (simcomm's default is the AWS code)
    "dpsgd": {"mode": "overlap"},
    "crossover-sgd": {"mode": "serial"},
    "hierarchical-crossover-sgd": {"groups": 2, "mode": "serial", "reduce": "after-backward",
                                   "broadcast": "segment"},
    "gtopk": {"density": 0.004, "down": "bcast"},
    "gs-sgd": {"density": 0.004, "sketch_rows": SKETCH_ROWS, "sketch_cols": SKETCH_COLS},
    # the worker's accumulator work is a few ms of its compute; seed 004's measured TF overheads do not apply.
    # Its server steps once every push is in, then sends (Sec. 4.2 as written): pull after-update
    "ps-layer-drop": {"servers": 1, "placement": "own", "drop_ratio": DROP_RATIO, "threshold_every": THRESHOLD_EVERY,
                      "worker_overhead": 0.0, "server_overhead": 0.0, "pull": "after-update"},
    "pcnn": {},
}
#: DDP bucket size per strategy (MB; default 25, one bucket for the suite's 1.1 MB model).  pcnn groups the
#: layers of a bucket into one unit; its authors' code posts one all-to-all per convolution layer as backward
#: produces it (NU-CUCIS/pcnn ffbp_multistep.c, backprop_overlap), so a bucket per layer (1 kB closes each
#: convolution with its batch norm, as the code's conv layer holds both)
BUCKET_MB = {"pcnn": 0.001}
#: strategies with a parameter server on a host of its own (the last rank)
SERVED = ("ps", "ps-layer-drop")
#: strategies whose per-iteration peer tables are random (a fresh derangement per segment and
#: iteration): the prediction is the mean over TABLE_SEEDS tables, as the run's mean is over its own
RANDOM_TABLES = ("crossover-sgd", "hierarchical-crossover-sgd")
TABLE_SEEDS = 8


@dataclass(frozen=True)
class E2ESpec:
    """One end-to-end run: strategy, placement, model and how long to measure."""

    strategy: str
    workers: int = 4
    per_host: int = 1
    model: str = "resnet20-cifar"
    batch: int = 32
    iters: int = 20
    warmup: int = 2
    k_prime: int = 4  # node-based: iterations between internode exchanges
    epoch: int = 10  # node-based: iterations per epoch (an exchange also ends each epoch)
    probe: int = 8
    probe_warmup: int = 2
    groups: int = 0  # hierarchical-crossover-sgd: groups of consecutive ranks

    def __post_init__(self):
        if self.strategy not in STRATEGY_OPTIONS:
            raise ConfigError(f"strategy: {self.strategy!r} is not one of {', '.join(STRATEGY_OPTIONS)}")
        if self.workers < 2 or self.per_host < 1 or self.workers % self.per_host:
            raise ConfigError(f"workers: {self.workers} must be >= 2 and a multiple of per_host {self.per_host}")

    @property
    def nodes(self) -> int:
        return self.workers // self.per_host

    @property
    def hosts(self) -> int:
        return self.nodes + (1 if self.strategy in SERVED else 0)

    @property
    def world(self) -> int:
        return self.workers + (1 if self.strategy in SERVED else 0)

    def host_of(self, rank: int) -> int:
        return rank // self.per_host if rank < self.workers else self.nodes


@dataclass(frozen=True)
class Measured:
    """Mean iteration seconds per kind, their epoch-weighted mean, and the compute probe."""

    kinds: dict
    mean_s: float
    probe_s: float
    iterations: int
    stream_probe_s: float | None = None  # the same compute while streaming (None: not recorded)
    cpu_per_byte: float = 0.0  # host CPU s per byte moved, from the two probes
    jitter: float = 0.0  # compute's coefficient of variation within a rank, from the compute probe
    rates: dict | None = None  # gtopk / gs-sgd: measured seconds per element of their kernels (median of ranks)


def launch_e2e(cluster, spec: E2ESpec, *, limit: float = 300.0, timeout: float = 30.0) -> dict:
    """Run ``spec`` on ``cluster`` (which must have ``spec.hosts`` hosts); return the record."""
    if cluster.n_hosts != spec.hosts:
        raise ConfigError(f"hosts: the cluster has {cluster.n_hosts}, {spec.strategy} needs {spec.hosts}")
    master, port = cluster.hosts[0].ip, 29600
    with tempfile.TemporaryDirectory(prefix="simcomm-e2e-") as tmp:
        out = os.path.join(tmp, "rec.json")
        common = ["--world", str(spec.world), "--master", master, "--port", str(port), "--strategy", spec.strategy,
                  "--model", spec.model, "--per-host", str(spec.per_host), "--batch", str(spec.batch),
                  "--iters", str(spec.iters), "--warmup", str(spec.warmup), "--k-prime", str(spec.k_prime),
                  "--epoch", str(spec.epoch), "--probe", str(spec.probe), "--probe-warmup", str(spec.probe_warmup),
                  "--groups", str(spec.groups or STRATEGY_OPTIONS[spec.strategy].get("groups", 0)),
                  "--timeout", f"{timeout:g}", "--out", out]
        worker = str(Path(__file__).with_name("e2e_worker.py"))  # a script beside this file, not a package module
        procs = [cluster.popen(spec.host_of(r), [sys.executable, worker, "--rank", str(r), *common],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for r in range(spec.world)]
        wait_all(procs, time.monotonic() + limit)
        rec = json.loads(Path(out).read_text())
    rec.update(spec=asdict(spec), cluster=cluster.describe(), load=os.getloadavg()[0])
    return rec


def record_run(spec: E2ESpec, rate: str, path: Path, suite: str, *, limit: float, **cluster_kw) -> dict:
    """One suite run: ``spec`` on a fresh emulated cluster at ``rate`` , the record
    stamped with the 1-minute load before and after and the ``suite`` tag, written to ``path``; ``cluster_kw`` goes to
    :class:`EmulatedCluster` (mtu, qdisc, topology).  A crashed run
    (gloo aborting, a timeout) is recorded as failed and the suite goes on."""
    from simcomm.calibrate.emulate import EmulatedCluster
    from simcomm.calibrate.fit import CalibrationError

    load0 = os.getloadavg()[0]
    try:
        with EmulatedCluster(spec.hosts, rate, **cluster_kw) as cl:
            rec = launch_e2e(cl, spec, limit=limit)
    except CalibrationError as exc:
        rec = {"failed": " ".join(str(exc).split()), "spec": {"strategy": spec.strategy}}
    rec["load"] = [load0, os.getloadavg()[0]]
    rec["suite"] = suite
    path.write_text(json.dumps(rec, indent=1, sort_keys=True))
    return rec


def measure(rec: dict) -> Measured:
    """Iteration i ends when its slowest worker ends; its time is that end minus the previous one."""
    spec = E2ESpec(**rec["spec"])
    rows = [r for r in rec["ranks"] if r["rank"] < spec.workers]
    ends = [max(r["ends"][i] for r in rows) for i in range(len(rows[0]["ends"]))]
    kinds: dict[str, list[float]] = {}
    for i in range(spec.warmup + 1, len(ends)):
        kinds.setdefault(rows[0]["kinds"][i - 1], []).append(ends[i] - ends[i - 1])
    means = {k: statistics.fmean(v) for k, v in kinds.items()}
    if spec.strategy == "node-based":
        from simcomm.strategies.node_based import exchanges_per_epoch

        x = exchanges_per_epoch(spec.epoch, spec.k_prime)
        mean = ((spec.epoch - x) * means.get("local", 0.0) + x * means["exchange"]) / spec.epoch
    else:
        mean = statistics.fmean(d for v in kinds.values() for d in v)
    probe = statistics.median(t for r in rows for t in r["probe"])  # robust to a neighbour's burst
    jitter = probe_jitter(rows, probe)
    n_it = sum(len(v) for v in kinds.values())
    rates = {k: statistics.median(r["rates"][k] for r in rows) for k in (rows[0].get("rates") or {})}
    stream = [t for r in rows for t in r.get("stream_probe", ())]
    if not stream:
        return Measured(means, mean, probe, n_it, jitter=jitter, rates=rates or None)
    streamed = statistics.median(stream)
    cpu = max(0.0, streamed - probe) / float(rows[0]["stream_bytes"])
    return Measured(means, mean, probe, n_it, streamed, cpu, jitter, rates or None)


def probe_jitter(rows: list[dict], probe_s: float) -> float:
    """Median over ranks and probe halves of the spread of one rank's compute, over the median.

    Within one rank and one half (the probe runs before and after the stream
    probe), so neither differences between ranks nor drift between the halves
    count as iteration-to-iteration variation.
    """
    spreads = []
    for r in rows:
        p = list(r["probe"])
        for half in (p[:len(p) // 2], p[len(p) // 2:]):
            if len(half) >= 2:
                spreads.append(statistics.pstdev(half))
    return min(0.5, statistics.median(spreads) / probe_s) if spreads and probe_s > 0 else 0.0


def trace_compute_s(trace) -> float:
    """Forward + backward + optimizer step of one rank as the trace's layers add up."""
    return sum(l.forward_s + l.backward_s + l.update_s for l in trace.layers)


def compute_scale(trace, probe_s: float) -> float:
    """Co-located compute probe over the trace's compute (see the module docstring)."""
    return probe_s / trace_compute_s(trace)


def e2e_topology(spec: E2ESpec, cluster: dict, alpha: float, bandwidth: float, trunk_ratio: float):
    """The emulated cluster of ``spec`` as a simcomm Topology (ranks in worker order, then the server)."""
    hosts = int(cluster["hosts"])
    leaves = int(cluster.get("leaves", 1)) if cluster.get("topology") == "two-tier" else 1
    per_leaf = -(-hosts // leaves)
    rank_host = tuple(spec.host_of(r) for r in range(spec.world))
    return cluster_topology(rank_host, tuple(h // per_leaf for h in range(hosts)), alpha, bandwidth,
                            trunk_ratio, name=f"emulated-{cluster.get('topology', 'star')}")


def with_rates(trace, rates: dict | None, scale: float):
    """The trace carrying measured compression rates (``Measured.rates``) as ``meta["compression_rates"]``.

    simcomm multiplies the top-k, sketch and query kernels by the compute scale
    (they run on the device) and not the host merge, so the co-located
    measurements are divided by it accordingly.
    """
    if not rates:
        return trace
    import dataclasses

    scaled = {k: (v if k == "merge_cpu" else v / scale) for k, v in rates.items()}
    return dataclasses.replace(trace, meta={**trace.meta, "compression_rates": scaled})


def predict_e2e(spec: E2ESpec, topology, trace, scale: float, cpu_per_byte: float = 0.0, jitter: float = 0.0,
                rates: dict | None = None, stack: str = "ideal"):
    """simcomm's Result for ``spec`` on ``topology`` with the trace scaled by ``scale``.

    ``cpu_per_byte`` is the host CPU cost of communication from the stream probe
    (:attr:`Measured.cpu_per_byte`), given to the stack; ``jitter`` the compute's
    coefficient of variation from the compute probe (:attr:`Measured.jitter`);
    ``rates`` the measured compression kernels (:attr:`Measured.rates`).  For
    strategies with random peer tables the mean time over TABLE_SEEDS tables is
    returned (as ``mean_s`` of the first result, the others' kinds dropped).
    """
    from simcomm.pipeline import simulate
    from simcomm.scenario import Scenario, StackSpec, WorkloadSpec

    options = dict(STRATEGY_OPTIONS[spec.strategy])
    if spec.strategy == "node-based":
        options["k_prime"] = spec.k_prime
    if spec.groups:
        options["groups"] = spec.groups
    trace = with_rates(trace, rates, scale)

    def one(opts):
        scn = Scenario(strategy=spec.strategy, nodes=spec.nodes, gpus_per_node=spec.per_host, cluster="emulated",
                       batch=spec.batch, dataset_size=spec.epoch * spec.workers * spec.batch, fidelity="flow",
                       workload=WorkloadSpec(bucket_mb=BUCKET_MB.get(spec.strategy, 25.0), compute_scale=(scale,) * spec.nodes,
                                             compute_jitter=jitter),
                       stack=StackSpec(stack, cpu_per_byte=cpu_per_byte), options=opts)
        return simulate(scn, topology=topology, trace=trace, baseline=False, analytic=False)

    if spec.strategy not in RANDOM_TABLES:
        return one(options)
    runs = [one({**options, "seed": k}) for k in range(TABLE_SEEDS)]
    import dataclasses

    return dataclasses.replace(runs[0], mean_s=statistics.fmean(r.mean_s for r in runs))

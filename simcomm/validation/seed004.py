"""Seed 004, Table 1: parameter server with and without layer dropping, 1 Gb/s and 56 Gb/s.

Setup (Sec. 6.1/6.2): ResNet-50 v1, synchronous TF 1.13 PS over OpenMPI.
1 Gb/s: 1 PS machine (CPU) + 2 worker machines x 2 GTX 1080 Ti (4 workers).
56 Gb/s: 4 machines x 2 V100 on KISTI Neuron (8 workers), the PS on one of them.

Unknowns the paper omits, calibrated per network on the *no-dropping* row only:

1. the PS's reduce+update rate (s/B), from the row's PS compute;
2. the effective network goodput, as one factor on simcomm's line-rate
   communication time, from the row's communication time.

The batch (64) and the drop ratio R (0.9, the strategy default) are assumed a
priori; worker compute comes from the roofline traces, not from the table.
Predicted: worker compute (both rows), the dropping row's communication and
total.  The dropping row's PS compute uses the paper's own +15 %/+23 %
overhead, so it is an *input*, not a prediction.
"""

from __future__ import annotations

from simcomm.scenario import Scenario, StackSpec
from simcomm.topologies.two_level import two_level
from simcomm.validation._sim import bundled, simulate
from simcomm.validation.base import Baseline, CaseResult, Reported, Row, case

PAPER = "seed 004 (Jeong et al., Electronics 2021), Table 1"
BATCH = 64
DROP_RATIO = 0.9

#: Table 1, seconds per iteration
REPORTED = {
    "1g.worker": 0.388, "1g.ps": 0.073, "1g.comm": 3.457, "1g.total": 3.918,
    "1g.drop.worker": 0.408, "1g.drop.ps": 0.085, "1g.drop.comm": 0.182, "1g.drop.total": 0.675,
    "56g.worker": 0.222, "56g.ps": 0.048, "56g.comm": 1.951, "56g.total": 2.222,
    "56g.drop.worker": 0.230, "56g.drop.ps": 0.060, "56g.drop.comm": 0.375, "56g.drop.total": 0.665,
}
#: the paper's stated compute overheads of dropping (Sec. 6.1: +5 %/+15 %; Sec. 6.2: +3.6 %/+23 %)
OVERHEAD = {"1g": (0.05, 0.15), "56g": (0.036, 0.23)}


def _network(key: str):
    """(topology, trace, placement, workers) of one network."""
    if key == "1g":
        # machines 0-1: workers (2 GPUs each); machine 2: the CPU parameter server ("own" placement)
        topo = two_level(3, [2, 2, 1], intra="pcie", intra_link="pcie3", nic_link="eth-1g", nic_attach="pcie3",
                         device="gtx-1080-ti", name="seed004-1g")
        return topo, bundled("resnet50-1080ti-roofline"), "own", 2
    topo = two_level(4, 2, intra="pcie", intra_link="pcie3", nic_link="ib-fdr", nic_attach="pcie3",
                     device="v100", name="seed004-56g")
    return topo, bundled("resnet50-v100-roofline"), "colocated", 4


def _run(key: str, strategy: str, options: dict):
    topo, trace, placement, machines = _network(key)
    scn = Scenario(strategy=strategy, nodes=machines, gpus_per_node=2, cluster=topo.meta.get("name", key),
                   batch=BATCH, stack=StackSpec("ideal", overhead=40e-6),
                   options={"placement": placement, **options})
    return simulate(scn, topology=topo, trace=trace), trace.grad_bytes, placement


def _split(res, s_per_byte: float, model_bytes: float, placement: str, server_ovh: float = 0.0):
    """(worker compute, server compute, communication) of one simulated iteration."""
    server = s_per_byte * (res.n_ranks + 1) * model_bytes * (1.0 + server_ovh)
    worker = res.breakdown.compute - (server if placement == "colocated" else 0.0)
    return worker, server, res.mean_s - worker - server


def network_rows(key: str, base: Baseline) -> tuple[list[Row], list[str], list[str]]:
    """Rows, calibrated unknowns and findings of one network (``base`` only exposes its no-drop row)."""
    w_ovh, s_ovh = OVERHEAD[key]
    res, model_bytes, placement = _run(key, "ps", {"server_s_per_byte": 1.0e-10})
    # unknown 1: the server rate, from the no-drop row's PS compute
    s_per_byte = base[f"{key}.ps"] / ((res.n_ranks + 1) * model_bytes)
    res, _, _ = _run(key, "ps", {"server_s_per_byte": s_per_byte})
    worker, server, comm = _split(res, s_per_byte, model_bytes, placement)
    # unknown 2: effective goodput, one factor on the line-rate communication time
    factor = base[f"{key}.comm"] / comm
    drop, _, _ = _run(key, "ps-layer-drop", {"server_s_per_byte": s_per_byte, "drop_ratio": DROP_RATIO,
                                             "worker_overhead": w_ovh, "server_overhead": s_ovh})
    d_worker, d_server, d_comm = _split(drop, s_per_byte, model_bytes, placement, s_ovh)
    d_comm *= factor
    net = "1 Gb/s" if key == "1g" else "56 Gb/s"
    r = REPORTED
    where = "Table 1"
    rows = [
        Row(f"{net}, no drop: worker compute", r[f"{key}.worker"], worker, "s", "prediction", where,
            f"roofline trace, batch {BATCH}"),
        Row(f"{net}, no drop: PS compute", r[f"{key}.ps"], server, "s", "calibration", where),
        Row(f"{net}, no drop: communication", r[f"{key}.comm"], comm * factor, "s", "calibration", where),
        Row(f"{net}, no drop: total", r[f"{key}.total"], worker + server + comm * factor, "s", "calibration", where,
            "predicted worker + calibrated PS and comm: not counted as a prediction"),
        Row(f"{net}, drop: worker compute", r[f"{key}.drop.worker"], d_worker, "s", "prediction", where,
            f"+{w_ovh:.1%} overhead from the paper's text"),
        Row(f"{net}, drop: PS compute", r[f"{key}.drop.ps"], d_server, "s", "input", where,
            f"+{s_ovh:.0%} overhead from the paper's text"),
        Row(f"{net}, drop: communication", r[f"{key}.drop.comm"], d_comm, "s", "prediction", where,
            f"R = {DROP_RATIO}"),
        Row(f"{net}, drop: total", r[f"{key}.drop.total"], d_worker + d_server + d_comm, "s", "prediction", where),
    ]
    cal = [f"{net}: PS reduce+update rate {s_per_byte:.3g} s/B (from the no-drop PS compute)",
           f"{net}: effective goodput factor {1 / factor:.3f} of line rate (no-drop communication "
           f"{r[f'{key}.comm']} s vs {comm:.3f} s at line rate)"]
    implied = 1.0 - r[f"{key}.drop.comm"] / r[f"{key}.comm"]
    find = [f"{net}: the reported communication cut implies R ~ {implied:.2f} if communication scales "
            f"with bytes"]
    return rows, cal, find


@case("seed004-table1", summary="PS with/without layer dropping, ResNet-50, 1 Gb/s and 56 Gb/s",
      reference=PAPER)
def run() -> CaseResult:
    rep = {k: Reported(k, v, "s", "Table 1") for k, v in REPORTED.items()}
    rows, cal, find = [], [], []
    for key in ("1g", "56g"):
        base = Baseline(rep, {f"{key}.ps", f"{key}.comm"})
        r, c, f = network_rows(key, base)
        rows += r
        cal += c
        find += f
    find.append("1 Gb/s: even at line rate simcomm's PS (push, then update, then pull, serialized) needs "
                "2 x 4 x 102 MB / 0.125 GB/s = 6.5 s; the paper's 3.457 s means TF overlaps pushes with pulls "
                "per variable, so the calibrated factor exceeds 1 (it absorbs that overlap)")
    find.append("56 Gb/s: the reported goodput is ~10x below FDR line rate (MPI over TCP); "
                "dropping cuts bytes ~10x but the reported time only ~5x: a fixed per-iteration cost "
                "(per-tensor messages, serialization) that a bandwidth factor cannot carry")
    return CaseResult(
        name="seed004-table1", title="Parameter server with layer dropping (Table 1)", paper=PAPER,
        setup=("ResNet-50 v1 (25.6 M parameters, 102 MB fp32), synchronous PS, one server",
               "1 Gb/s: 2 machines x 2 GTX 1080 Ti workers + 1 CPU PS machine, 1 GbE",
               "56 Gb/s: 4 machines x 2 V100 (KISTI Neuron), PS co-located with 2 workers, 56 Gb/s"),
        assumptions=(f"per-worker batch {BATCH} (not stated; a 1080 Ti roofline at 64 gives the paper's 0.39 s)",
                     f"drop ratio R = {DROP_RATIO} (not stated in the paper)",
                     "worker compute from the bundled roofline traces (1080 Ti, V100)",
                     "ideal stack with 40 us per message, scaled by the calibrated goodput factor"),
        method=("iteration = worker compute + PS compute + communication (TF's synchronous PS)",
                "PS compute = s_B (R + 1) |θ| (1 + server overhead), s_B the fitted reduce+update rate",
                "communication = f x simulated push of R x |θ| into the server and pull back, f the fitted "
                "goodput factor; with dropping, the pushed bytes are (1 - R_drop) |θ| per worker"),
        calibrated=tuple(cal), rows=tuple(rows), findings=tuple(find))

"""Seed 003: PCNN against all-reduce, strong scaling to 8 192 Cori cores, and the 392 MB FC layer.

Setup (Sec. 5): ImageNet, global batch 256, strong scaling, one MPI rank per
Haswell node (32 cores as threads), Cray Aries dragonfly, up to 256 nodes.
Reported speedups at 8 192 cores (Fig. 8 / abstract): VGG-16 pcnn 2516x vs
allreduce 559x; ResNet-50 pcnn 2734x vs allreduce 1572x.

Speedup is the paper's "based on the number of cores": we take the one-core
time as 32 x the simulated one-node time (assumed linear inside a node).
One unknown, the network efficiency of the MPI stack on Aries, is calibrated
on the VGG-16 ``allreduce`` row only (bisection on simulated speedup); the
other three rows are predictions.  Analytic fidelity keeps 256 ranks fast.
"""

from __future__ import annotations

from simcomm.scenario import Scenario, StackSpec, WorkloadSpec
from simcomm.validation._sim import simulate
from simcomm.validation.base import Baseline, CaseResult, Reported, Row, case

PAPER = "seed 003 (Lee et al. 2018), Fig. 8 and Sec. 5"
NODES, CORES, GLOBAL_BATCH = 256, 32, 256
REPORTED = {"vgg16.allreduce": 559.0, "vgg16.pcnn": 2516.36, "resnet50.allreduce": 1572.0,
            "resnet50.pcnn": 2734.25}
#: VGG-16 FC1 (Sec. 5): N' activations in, N errors out, mini-batch K
FC1 = {"n_in": 25_088, "n_out": 4_096, "k": 256}


def _trace(model: str):
    from simcomm.traces.synth import synth_trace

    return synth_trace(model, "haswell", batch=[1, 8, 32])  # t(b) = t0 + b t1 interpolation


def _time(trace, strategy: str, nodes: int, efficiency: float) -> float:
    opts = {"overlap": "backward+forward"} if strategy == "allreduce" else {}
    scn = Scenario(strategy=strategy, nodes=nodes, gpus_per_node=1, cluster="cori-haswell", batch=GLOBAL_BATCH,
                   fidelity="analytic", stack=StackSpec("mpi-tcp", efficiency=efficiency, overhead=2e-6),
                   workload=WorkloadSpec(scaling="strong"), options=opts)
    return simulate(scn, trace=trace).mean_s


def speedup(trace, strategy: str, efficiency: float) -> float:
    serial = CORES * _time(trace, "allreduce", 1, efficiency)
    return serial / _time(trace, strategy, NODES, efficiency)


def calibrate(trace, target: float) -> float:
    """Efficiency in (0, 1] whose allreduce speedup hits ``target`` (speedup grows with efficiency)."""
    lo, hi = 1e-3, 1.0
    if speedup(trace, "allreduce", hi) <= target:
        return hi
    for _ in range(14):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if speedup(trace, "allreduce", mid) < target else (lo, mid)
    return (lo * hi) ** 0.5


def fc1_ratio(p: int) -> float:
    """All-reduce volume over PCNN volume for FC1 at ``p`` ranks (seed 003 Eq. 11; > 1: PCNN cheaper)."""
    n_in, n_out, k = FC1["n_in"], FC1["n_out"], FC1["k"]
    return (n_out * n_in) / (n_in * k / p + n_out * k)


@case("seed003-pcnn", summary="PCNN vs all-reduce strong scaling to 8 192 Cori cores; FC1 Eq. 11",
      reference=PAPER)
def run() -> CaseResult:
    rep = {k: Reported(k, v, "x", "Fig. 8") for k, v in REPORTED.items()}
    base = Baseline(rep, {"vgg16.allreduce"})
    traces = {m: _trace(m) for m in ("vgg16", "resnet50")}
    eff = calibrate(traces["vgg16"], base["vgg16.allreduce"])
    rows = []
    for model in ("vgg16", "resnet50"):
        for strat in ("allreduce", "pcnn"):
            key = f"{model}.{strat}"
            role = "calibration" if key == "vgg16.allreduce" else "prediction"
            rows.append(Row(f"{model} {strat}: speedup at {NODES * CORES} cores", REPORTED[key],
                            speedup(traces[model], strat, eff), "x", role, "Fig. 8"))
    pred = {r.label.split(":")[0]: r.predicted for r in rows}
    for model in ("vgg16", "resnet50"):
        rows.append(Row(f"{model}: pcnn / allreduce speedup", REPORTED[f"{model}.pcnn"] /
                        REPORTED[f"{model}.allreduce"], pred[f"{model} pcnn"] / pred[f"{model} allreduce"],
                        "x", "prediction", "Fig. 8", "ratio of the two rows above"))
    ratios = ", ".join(f"P={p}: {fc1_ratio(p):.1f}x" for p in (16, 64, 256))
    return CaseResult(
        name="seed003-pcnn", title="PCNN vs all-reduce on Cori (strong scaling)", paper=PAPER, fidelity="analytic",
        setup=(f"global batch {GLOBAL_BATCH} split over up to {NODES} Haswell nodes (1 rank x {CORES} cores each)",
               "Cray Aries dragonfly (cori-haswell preset), ImageNet VGG-16 and ResNet-50",
               "allreduce overlapped with backward and the next forward (the paper's Intel-Caffe style)"),
        assumptions=("one-core time = 32 x simulated one-node time (linear inside a node)",
                     "per-layer time from Haswell roofline synthesis at batches 1, 8, 32 (t0 + b t1)",
                     "MPI stack on Aries: 2 us per message; analytic fidelity (256 ranks)"),
method=("strong scaling: per-rank batch ceil(256 / P); per-layer t(b) = t0 + b t1 from the Haswell "
                "roofline at batches 1, 8, 32",
                "speedup(P) = 32 T(1 node) / T(P nodes), T from the analytic (closed-form) engine",
                "allreduce: bucketed all-reduce of |θ| overlapped with backward and the next forward; pcnn: "
                "FC all-to-all of activations + all-gather of errors, conv all-to-all slices (seed 003 Eq. 11)",
                "FC1 volume ratio: N N' / (N' K / P + N K)"),
                calibrated=(f"network efficiency {eff:.3f} of Aries line rate, from the VGG-16 allreduce speedup",),
        rows=tuple(rows),
        findings=(f"FC1 of VGG-16 (N'=25 088, N=4 096, K=256, 392 MB): all-reduce moves NN' words, PCNN "
                  f"N'K/P + NK; volume ratio {ratios}; Eq. 11 holds for every P, consistent with the "
                  f"paper's Fig. 7 ordering (PCNN below MPICH and ring all-reduce; the figure gives no numbers)",
                  "misses: the simulated pcnn gains far less than the paper's; at 1 sample per node the "
                  "Haswell roofline compute (not a measurement) and the paper's unreported MPI all-reduce "
                  "algorithm dominate, and one efficiency fitted on VGG-16 under-predicts ResNet-50's "
                  "allreduce scaling, so the paper's baseline is not a bandwidth-limited all-reduce alone",
                  "the speedups hinge on the unmeasured one-core time; ratios of pcnn to allreduce at the "
                  "same core count do not, so they are the fairer check"))

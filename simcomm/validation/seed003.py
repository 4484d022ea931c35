"""Seed 003: PCNN against all-reduce, strong scaling to 8 192 Cori cores, and the 392 MB FC layer.

Setup (Sec. 5): ImageNet, global batch 256, strong scaling, one MPI rank per
Haswell node (32 cores as threads), Cray Aries dragonfly, up to 256 nodes,
Cray MPICH (the cori-haswell preset's ``cray-mpich`` stack: MPICH's algorithm
choice, Rabenseifner above 2 KB as Sec. 3-B assumes).  Reported speedups at
8 192 cores (Fig. 8 / abstract): VGG-16 pcnn 2516x vs allreduce 559x;
ResNet-50 pcnn 2734x vs allreduce 1572x.

Speedup is the paper's "based on the number of cores": we take the one-core
time as 32 x the simulated one-node time (assumed linear inside a node).
One unknown, the goodput of Cray MPICH on Aries as a fraction of the 8 GB/s
MPI bandwidth NERSC quotes, is calibrated on the VGG-16 ``allreduce`` row only
(bisection on simulated speedup); the other three rows are predictions.  Its
physical range: at most 1 (no goodput above the measured MPI bandwidth); at
least the value below which VGG-16's allreduce would already expose
communication at 8 nodes, where Sec. 5-3 (Fig. 10) says its measurable
communication time is still zero (it appears from 512 cores).  Analytic
fidelity keeps 256 ranks fast.
"""

from __future__ import annotations

from simcomm.scenario import Scenario, StackSpec, WorkloadSpec
from simcomm.strategies.pcnn import fc_volume_ratio
from simcomm.topologies.devices import DEVICES, device_gamma
from simcomm.validation._sim import simulate
from simcomm.validation.base import Baseline, CaseResult, Fit, Reported, Row, case, explain_misses

PAPER = "seed 003 (Lee et al. 2018), Fig. 8 and Sec. 5"
NODES, CORES, GLOBAL_BATCH = 256, 32, 256
REPORTED = {"vgg16.allreduce": 559.0, "vgg16.pcnn": 2516.36, "resnet50.allreduce": 1572.0,
            "resnet50.pcnn": 2734.25}
#: VGG-16 FC1 (Sec. 5): N' activations in, N errors out, mini-batch K
FC1 = {"n_in": 25_088, "n_out": 4_096, "k": 256}
#: "measurable communication time" counts as non-zero above this share of the iteration (Fig. 10 reading)
EXPOSED = 0.05
#: Sec. 3-B: "most of the MPI implementations do not support multi-threaded internal computation", so Cray
#: MPICH sums on one of the node's 32 cores: that core's share of the node's documented memory bandwidth (the
#: rule for one CPU rank, simcomm.topologies.devices), seconds per byte reduced.  A finding, not the rows' setup:
#: a core summing while the others wait may draw more than its share, and its rate is unpublished.
ONE_CORE_GAMMA = device_gamma("haswell", CORES)
#: ResNet-50's pcnn/allreduce ratio reaches the near-miss line (-30 %) with the all-reduce's sum at this rate
#: (bytes reduced per second; bisected between 2.8e-10 and 2.9e-10 s/B when written, 2026-11-28)
NEAR_MISS_REDUCE_RATE = 3.5e9


def _trace(model: str):
    from simcomm.traces.synth import synth_trace

    return synth_trace(model, "haswell", batch=[1, 8, 32])  # t(b) = t0 + b t1 interpolation


def _run(trace, strategy: str, nodes: int, efficiency: float, mpi_gamma: float | None = None):
    """One run; ``mpi_gamma``: seconds per byte the all-reduce's MPI sum costs (None: the node's γ, all cores).

    Only the all-reduce sums inside MPI: PCNN's collectives (all-to-all, all-gather) reduce nothing and its
    local sums run on the node's 32 threads (Sec. 3-B), so a PCNN run keeps the node's γ.
    """
    opts = {"overlap": "backward+forward"} if strategy == "allreduce" else {}
    reduce_s = mpi_gamma if strategy == "allreduce" else None
    # stack None: the preset's cray-mpich (MPICH's algorithm choice, 1 us per message)
    scn = Scenario(strategy=strategy, nodes=nodes, gpus_per_node=1, cluster="cori-haswell", batch=GLOBAL_BATCH,
                   fidelity="analytic", stack=StackSpec(None, efficiency=efficiency, reduce_per_byte=reduce_s),
                   workload=WorkloadSpec(scaling="strong"), options=opts)
    return simulate(scn, trace=trace)


def _time(trace, strategy: str, nodes: int, efficiency: float, mpi_gamma: float | None = None) -> float:
    return _run(trace, strategy, nodes, efficiency, mpi_gamma).mean_s


def exposed_share(trace, strategy: str, nodes: int, efficiency: float) -> float:
    """Exposed communication over the iteration (the paper's "measurable communication time")."""
    res = _run(trace, strategy, nodes, efficiency)
    return res.breakdown.comm_exposed / res.mean_s


def speedup(trace, strategy: str, efficiency: float, mpi_gamma: float | None = None) -> float:
    serial = CORES * _time(trace, "allreduce", 1, efficiency, mpi_gamma)
    return serial / _time(trace, strategy, NODES, efficiency, mpi_gamma)


def _bisect(f, lo: float = 1e-3, hi: float = 1.0, steps: int = 14) -> float:
    """Geometric bisection for the efficiency where increasing ``f`` changes sign."""
    for _ in range(steps):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo * hi) ** 0.5


def calibrate(trace, target: float, mpi_gamma: float | None = None) -> float:
    """Efficiency in (0, 1] whose allreduce speedup hits ``target`` (speedup grows with efficiency)."""
    if speedup(trace, "allreduce", 1.0, mpi_gamma) <= target:
        return 1.0
    return _bisect(lambda e: speedup(trace, "allreduce", e, mpi_gamma) - target)


def hidden_floor(trace) -> float:
    """Lowest efficiency at which VGG-16's allreduce still hides its communication at 8 nodes (Fig. 10)."""
    return _bisect(lambda e: EXPOSED - exposed_share(trace, "allreduce", 8, e))


def fc1_ratio(p: int) -> float:
    """All-reduce words over PCNN words for VGG-16 FC1 at ``p`` ranks (Eq. 10 over Eq. 8, bandwidth terms)."""
    return fc_volume_ratio(FC1["n_out"], FC1["n_in"], FC1["k"], p)


def _onsets(traces, eff: float) -> str:
    """Node counts from which each method's exposed communication exceeds EXPOSED (Fig. 10's onsets)."""
    out = []
    for model, strat, rep in (("vgg16", "allreduce", 512), ("resnet50", "allreduce", 1024),
                              ("vgg16", "pcnn", 2048), ("resnet50", "pcnn", "> 2048")):
        first = next((n for n in (2, 4, 8, 16, 32, 64, 128, 256)
                      if exposed_share(traces[model], strat, n, eff) > EXPOSED), None)
        out.append(f"{model} {strat} from {first * CORES if first else 'never'} cores (paper: {rep})")
    return "; ".join(out)


def implied_extra(traces, eff: float, model: str) -> tuple[str, float]:
    """What the paper's two speedups of ``model`` imply at 256 nodes if simcomm's compute there is right.

    The paper's iteration is ``32 T(1 node) / speedup``; less the simulated
    non-communication time it leaves the exposed communication each method must
    have had (an inference from the speedups, not a measurement).  A
    bandwidth-bound exchange keeps the two methods' exposed communication at the
    simulated ratio; what the all-reduce pays beyond that ratio is a cost PCNN
    does not have (Sec. 3-B names MPICH's single-threaded reduction, against
    PCNN's sums on 32 threads).  Returns the sentence and the rate (bytes/s) a
    single-threaded sum of the gradients would need to cost that much.
    """
    trace = traces[model]
    serial = CORES * _time(trace, "allreduce", 1, eff)
    sim = {s: _run(trace, s, NODES, eff) for s in ("allreduce", "pcnn")}
    iteration = {s: serial / REPORTED[f"{model}.{s}"] for s in sim}
    paper = {s: iteration[s] - (r.mean_s - r.breakdown.comm_exposed) for s, r in sim.items()}
    ratio = sim["allreduce"].breakdown.comm_exposed / sim["pcnn"].breakdown.comm_exposed
    extra = paper["allreduce"] - ratio * paper["pcnn"]
    grads = sum(layer.grad_bytes for layer in trace.layers)
    rate = grads * (NODES - 1) / NODES / extra if extra > 0 else float("inf")
    return (f"{model}: iterations {iteration['allreduce']:.3f} / {iteration['pcnn']:.3f} s, exposed "
            f"communication {paper['allreduce']:.3f} / {paper['pcnn']:.3f} s ({paper['allreduce'] / paper['pcnn']:.1f}x "
            f"apart, simulated {ratio:.2f}x), {extra:.3f} s for the all-reduce alone, a sum of its "
            f"{grads / 1e6:.0f} MB at {rate / 1e9:.2f} GB/s"), rate


def _implied_finding(traces, eff: float) -> str:
    parts = [implied_extra(traces, eff, m) for m in ("vgg16", "resnet50")]
    rates = [r for _, r in parts]
    return (f"what both rows of a model imply at {NODES} nodes (allreduce / pcnn; the paper's iteration is 32 T(1 "
            "node) / speedup, less the simulated compute and update: a residual inference, not a row): "
            + "; ".join(t for t, _ in parts) +
            ". A bandwidth-bound exchange keeps the simulated ratio, so the rest is a cost the all-reduce pays and "
            "PCNN does not, as the paper's single-threaded MPI reduction (Sec. 3-B); but the two models would need "
            f"a reduction rate {max(rates) / min(rates):.1f}x apart, so no one per-byte rate closes both, and the "
            "Haswell's reduction rate under Cray MPICH is unpublished (a second unknown on this platform is not "
            "fitted: the goodput already is)")


def single_thread_finding(traces, target: float, eff: float) -> str:
    """The tallied rows again with Cray MPICH's sum on one core (:data:`ONE_CORE_GAMMA`), the goodput refitted.

    The all-reduce rows cannot tell the wire from the sum: both cost per byte of |θ| in Rabenseifner's
    reduce-scatter, so the goodput fitted on VGG-16 absorbs whatever the sum does not take, and ResNet-50's
    all-reduce row stays where it is.  PCNN pays only the wire (its sums run on 32 threads), so it gains what
    the refitted goodput gives back.
    """
    eff1 = calibrate(traces["vgg16"], target, ONE_CORE_GAMMA)
    sp = {(m, s): speedup(traces[m], s, eff1, ONE_CORE_GAMMA) for m in ("vgg16", "resnet50")
          for s in ("allreduce", "pcnn")}
    ratios = ", ".join(f"{m} {sp[(m, 'pcnn')] / sp[(m, 'allreduce')]:.2f}x (paper "
                       f"{REPORTED[f'{m}.pcnn'] / REPORTED[f'{m}.allreduce']:.2f}x)" for m in ("vgg16", "resnet50"))
    node_bw = DEVICES["haswell"].memory_bandwidth
    return (f"MPI's single-threaded sum (Sec. 3-B: 'most of the MPI implementations do not support multi-threaded "
            f"internal computation'), not in the rows: they price Cray MPICH's reduction at the node's "
            f"{node_bw / 1e9:.1f} GB/s ({1 / device_gamma('haswell', 1) / 1e9:.1f} GB/s reduced), as if it ran on all "
            f"{CORES} cores. At one core's share of that bandwidth ({node_bw / CORES / 1e9:.2f} GB/s of memory "
            f"traffic, {1 / ONE_CORE_GAMMA / 1e9:.2f} GB/s reduced) the VGG-16 fit splits the all-reduce's per-byte "
            f"cost between the sum and the wire: goodput {eff1:.3f} instead of {eff:.3f}, ResNet-50's all-reduce "
            f"{sp[('resnet50', 'allreduce')]:.0f}x (unchanged: the fit absorbs the split), pcnn {sp[('vgg16', 'pcnn')]:.0f}x "
            f"(VGG-16) and {sp[('resnet50', 'pcnn')]:.0f}x (ResNet-50), pcnn/allreduce {ratios}. Not adopted: a core "
            f"summing while the others wait for the exposed all-reduce can draw more than its share (one core of "
            f"the development machine moved 9-11 GB/s in a two-operand sum), Haswell's rate under Cray MPICH is "
            f"unpublished, and ResNet-50's ratio is a near miss only with the sum at or below about "
            f"{NEAR_MISS_REDUCE_RATE / 1e9:.1f} GB/s reduced ({3 * NEAR_MISS_REDUCE_RATE / 1e9:.1f} GB/s of traffic)")


#: what would close each missed row: quantities the paper does not publish
_GENERAL = ("the one-core time the speedups divide (32 x one node is assumed, not measured), Haswell's per-layer "
            "compute at 1 sample per node (a roofline, not a measurement) and how each method sums and updates "
            "(PCNN's multithreaded sums and sharded updates against a single-threaded MPI reduction): PCNN's FC "
            "volume gain is at most 2x, so 4.5x needs compute-side costs the paper does not give")
CLOSES = (
    ("pcnn / allreduce", "the rate at which one Haswell core runs Cray MPICH's single-threaded sum (Sec. 3-B; "
                         "unpublished): the rows price it at the whole node's memory bandwidth, and the slower it "
                         "is, the more of the all-reduce's fitted per-byte cost is the sum, which PCNN does not pay "
                         f"(findings: ResNet-50's ratio is a near miss with the sum at or below about "
                         f"{NEAR_MISS_REDUCE_RATE / 1e9:.1f} GB/s reduced); and " + _GENERAL),
    ("", _GENERAL),
)

@case("seed003-pcnn", summary="PCNN vs all-reduce strong scaling to 8 192 Cori cores; FC1 Eq. 11",
      reference=PAPER)
def run() -> CaseResult:
    rep = {k: Reported(k, v, "x", "Fig. 8") for k, v in REPORTED.items()}
    base = Baseline(rep, {"vgg16.allreduce"})
    traces = {m: _trace(m) for m in ("vgg16", "resnet50")}
    eff = calibrate(traces["vgg16"], base["vgg16.allreduce"])
    floor = hidden_floor(traces["vgg16"])
    fit = Fit("Cray MPICH goodput on Aries", eff, "x 8 GB/s", floor, 1.0,
              "at most NERSC's measured MPI bandwidth; at least the value that still hides VGG-16's allreduce at "
              "8 nodes, where Sec. 5-3 (Fig. 10) reports no measurable communication", "VGG-16 allreduce speedup")
    fits = (fit.check(),)
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
    ratios = ", ".join(f"P={p}: {fc1_ratio(p):.3f}x" for p in (16, 64, 256))
    line = {f"{m}.{s}": speedup(traces[m], s, 1.0) for m in ("vgg16", "resnet50") for s in ("allreduce", "pcnn")}
    return CaseResult(
        name="seed003-pcnn", title="PCNN vs all-reduce on Cori (strong scaling)", paper=PAPER, fidelity="analytic",
        setup=(f"global batch {GLOBAL_BATCH} split over up to {NODES} Haswell nodes (1 rank x {CORES} cores each)",
               "Cray Aries dragonfly (cori-haswell preset), ImageNet VGG-16 and ResNet-50, Cray MPICH (the "
               "preset's cray-mpich stack: MPICH's algorithm choice, 1 us per message)",
               "allreduce overlapped with backward and the next forward (the paper's Intel-Caffe style)",
               "pcnn: one communication thread per node calling blocking MPI, collectives FIFO in posting order"),
        assumptions=("one-core time = 32 x simulated one-node time (linear inside a node)",
                     "per-layer time from Haswell roofline synthesis at batches 1, 8, 32 (t0 + b t1)",
                     f"'measurable communication' (Fig. 10) read as exposed communication above "
                     f"{EXPOSED:.0%} of the iteration; analytic fidelity (256 ranks)"),
        method=("strong scaling: per-rank batch ceil(256 / P); per-layer t(b) = t0 + b t1 from the Haswell "
                "roofline at batches 1, 8, 32",
                "speedup(P) = 32 T(1 node) / T(P nodes), T from the analytic (closed-form) engine",
                "allreduce: bucketed all-reduce of |θ| overlapped with backward and the next forward; pcnn: "
                "FC all-to-all of activations + all-gather of errors + all-gather of parameters, conv all-to-all "
                "slices + local sum + all-gather (seed 003 Eqs. 5-8, 12)",
                "FC1 volume ratio: Eq. 10 over Eq. 8 bandwidth terms, 2NN' / (N'K/P + NK + NN') "
                "(simcomm.strategies.pcnn.fc_volume_ratio)"),
        calibrated=(f"network goodput {eff:.3f} of Aries' 8 GB/s MPI bandwidth ({eff * 8:.2f} GB/s), from the "
                    f"VGG-16 allreduce speedup",),
        fits=fits,
        rows=explain_misses(rows, CLOSES),
        findings=(f"FC1 of VGG-16 (N'=25 088, N=4 096, K=256, 392 MB): Rabenseifner's all-reduce moves 2NN'(P-1)/P "
                  f"words, PCNN (N'K/P^2 + NK/P + NN'/P)(P-1) (it all-gathers the NN' updated parameters itself, "
                  f"Eq. 7); volume ratio {ratios}: PCNN moves about half the all-reduce's words on FC1 and never "
                  f"less than half. Eq. 11 holds for every P, consistent with the paper's Fig. 7 ordering (PCNN "
                  f"below MPICH and ring all-reduce; the figure gives no numbers)",
                  f"the fitted goodput ({eff:.3f}, {eff * 8:.2f} GB/s) is low for Aries but what the paper's own "
                  f"Fig. 10 text implies: with it the model's onsets of measurable communication are {_onsets(traces, eff)}; "
                  f"VGG-16 allreduce's onset matches, the others come earlier than the paper's (the model hides "
                  f"less, the same shortfall as the pcnn rows)",
                  "at the measured 8 GB/s (goodput 1.0) the model gives speedups "
                  + ", ".join(f"{k} {v:.0f}x" for k, v in line.items())
                  + ": communication of a 553 MB VGG-16 would be almost hidden and all four rows far above the "
                    "paper's, so the paper's baseline all-reduce ran well below the network's bandwidth",
                  "misses: the simulated pcnn gains far less over allreduce than the paper's 4.5x (VGG-16) and 1.74x "
                  "(ResNet-50); at 1 sample per node the Haswell roofline compute (not a measurement) sets how much "
                  "communication the overlap can hide, and PCNN's FC gain is bounded by the 2x volume ratio above, "
                  "so a 4.5x gain needs more than the gradient-averaging algorithm (e.g. the paper's multithreaded "
                  "sums and sharded updates against a single-threaded MPI reduction)",
                  _implied_finding(traces, eff),
                  single_thread_finding(traces, base["vgg16.allreduce"], eff),
                  "the speedups hinge on the unmeasured one-core time; ratios of pcnn to allreduce at the "
                  "same core count do not, so they are the fairer check"))

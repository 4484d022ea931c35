"""Seed 002, Table II: gTop-k, Sketched-SGD and gs-SGD throughput on 4 GPUs over 1 Gb/s Ethernet.

Setup (Sec. IV-D): 4 GPU machines, 1 GbE, PyTorch 1.8 + Horovod 0.22 over
OpenMPI 4.1.1, CIFAR-10 ResNet-20 and VGG-16.  The paper states neither the
GPU, the batch nor the density.  We take the batch of the gTop-k code the
baseline comes from (``batch_size 32`` in hclhkbu/gtopkssgd
``exp_configs/{resnet20,vgg16}.conf``), the last warm-up density 0.004, and
each method as its code runs it: gTop-k's per-round host merges and
``MPI_Bcast`` (seed-code-facts C7), Sketched-SGD's server round trip (C8) and
gs-SGD's tree with an O(log d) Count-Sketch and a second round (C6; sketch
sized by :func:`simcomm.strategies.gs_sgd.sketch_dims`).

One unknown per model, calibrated on the gTop-k column only: a per-iteration
host cost H shared by the three methods (framework, data loading, Python-side
work), modelled as blocking data loading.  Sketched-SGD and gs-SGD
throughputs and the g/k and g/s ratios are then predictions.
"""

from __future__ import annotations

from simcomm.scenario import Scenario, StackSpec, WorkloadSpec
from simcomm.strategies.gs_sgd import sketch_dims
from simcomm.validation._sim import simulate
from simcomm.validation.base import Baseline, CaseResult, Fit, Reported, Row, case, explain_misses

PAPER = "seed 002 (Dai et al. 2021), Table II"
RANKS, BATCH = 4, 32
#: TCP goodput on 1 GbE: seed 004 Table 1 moved 4 x 102 MB per direction in 3.457 s at 1 Gb/s (94 %)
TCP_GBE = 0.94
#: Table II, images/s on 4 GPUs
REPORTED = {"resnet20.gtopk": 804.0, "resnet20.sketched-sgd": 976.0, "resnet20.gs-sgd": 1038.0,
            "vgg16.gtopk": 325.0, "vgg16.sketched-sgd": 827.0, "vgg16.gs-sgd": 1014.0}
RATIOS = {"resnet20": (1.3, 1.1), "vgg16": (3.1, 1.2)}  # g/k and g/s as printed
STRATS = ("gtopk", "sketched-sgd", "gs-sgd")
#: single-process CIFAR loading measured with PIL on one AMD EPYC core (crop, two AutoAugment ops,
#: normalise): 0.35 ms per image, a heavier pipeline than the gTop-k code's crop + flip
LOAD_PER_IMAGE = 0.35e-3


def _trace(model: str, batch: int = BATCH):
    from simcomm.traces.synth import synth_trace

    return synth_trace("resnet20-cifar" if model == "resnet20" else "vgg16-cifar", "1080ti", batch=batch)


def _run(trace, strategy: str, overhead: float, batch: int = BATCH):
    scn = Scenario(strategy=strategy, nodes=RANKS, gpus_per_node=1, cluster="gbe-4gpu", batch=batch,
                   stack=StackSpec(None, efficiency=TCP_GBE), workload=WorkloadSpec(dataload_s=overhead))
    return simulate(scn, trace=trace)


def throughput(trace, strategy: str, overhead: float, batch: int = BATCH) -> float:
    return _run(trace, strategy, overhead, batch).samples_per_s


#: what would close each missed row: quantities the paper does not publish
CLOSES = (
    ("", "each method's own host cost (Fig. 4-5 break it down without numbers): one host cost fitted on gTop-k "
         "makes every method pay gTop-k's; the reported ratios need gTop-k's host-side merges to cost far more "
         "than the sketches' handling, and the GPU, batch and density, none of them stated"),
)

@case("seed002-table2", summary="gTop-k / Sketched-SGD / gs-SGD throughput, 4 GPUs on 1 GbE", reference=PAPER)
def run() -> CaseResult:
    rep = {k: Reported(k, v, "img/s", "Table II") for k, v in REPORTED.items()}
    rows, cal, find, fits = [], [], [], []
    for model in ("resnet20", "vgg16"):
        base = Baseline(rep, {f"{model}.gtopk"})
        trace = _trace(model)
        bare = {s: RANKS * BATCH / throughput(trace, s, 0.0) for s in STRATS}
        t_gk = RANKS * BATCH / base[f"{model}.gtopk"]
        overhead = max(0.0, t_gk - bare["gtopk"])
        fits.append(Fit(f"{model} host cost per iteration", overhead, "s", 0.0, t_gk,
                        "a cost all three methods share cannot be negative nor exceed the gTop-k iteration it is "
                        "fitted on", f"{model} gTop-k throughput").check())
        got = {s: throughput(trace, s, overhead) for s in STRATS}
        rows_, cols = sketch_dims(int(round(trace.grad_bytes / 4)))
        cal.append(f"{model}: host cost H = {overhead * 1e3:.1f} ms per iteration (simulated gTop-k iteration "
                   f"without it: {bare['gtopk'] * 1e3:.1f} ms)")
        for s in STRATS:
            key = f"{model}.{s}"
            rows.append(Row(f"{model} {s}: throughput", REPORTED[key], got[s], "img/s",
                            "calibration" if s == "gtopk" else "prediction", "Table II"))
        gk, gs = RATIOS[model]
        rows.append(Row(f"{model}: gs-SGD / gTop-k", gk, got["gs-sgd"] / got["gtopk"], "x", "prediction",
                        "Table II", "printed ratio"))
        rows.append(Row(f"{model}: gs-SGD / Sketched-SGD", gs, got["gs-sgd"] / got["sketched-sgd"], "x",
                        "prediction", "Table II", "printed ratio"))
        spread = RANKS * BATCH * (1 / REPORTED[f"{model}.gtopk"] - 1 / REPORTED[f"{model}.gs-sgd"])
        find.append(f"{model}: simulated iterations without any host cost: gTop-k {bare['gtopk'] * 1e3:.1f} ms, "
                    f"Sketched-SGD {bare['sketched-sgd'] * 1e3:.1f} ms, gs-SGD {bare['gs-sgd'] * 1e3:.1f} ms "
                    f"(sketch {rows_} x {cols} = {rows_ * cols} counters, {rows_ * cols * 4 / 1e3:.0f} kB); so even "
                    f"with H = 0 gs-SGD / gTop-k is {bare['gtopk'] / bare['gs-sgd']:.2f}x (reported {gk}x). The "
                    f"paper's gTop-k iteration is {spread * 1e3:.0f} ms longer than its gs-SGD one; the "
                    f"simulated gap is {(bare['gtopk'] - bare['gs-sgd']) * 1e3:.0f} ms")
        find.append(f"{model}: H = {overhead * 1e3:.0f} ms per iteration of {BATCH} images is "
                    f"{overhead / (BATCH * LOAD_PER_IMAGE):.0f}x what loading them in one process costs "
                    f"({BATCH * LOAD_PER_IMAGE * 1e3:.0f} ms at {LOAD_PER_IMAGE * 1e3:.2f} ms per image, measured): "
                    "the paper's throughputs carry a large implementation cost outside the three algorithms "
                    "(Fig. 4-5 break it down without numbers), which also dilutes every ratio")
    alt = {m: {s: throughput(_trace(m, 128), s, 0.0, 128) for s in ("gtopk", "gs-sgd")} for m in ("resnet20",
                                                                                                  "vgg16")}
    find.append("at batch 128 per GPU instead of 32 (with H = 0): gs-SGD / gTop-k "
                + ", ".join(f"{m} {alt[m]['gs-sgd'] / alt[m]['gtopk']:.2f}x" for m in alt)
                + "; the reported ratios stay out of reach")
    find.append("gTop-k's per-round merge runs on the host in numpy (intersect1d + argsort of 2k entries, 0.2 us "
                "per entry measured): 2 rounds x 24 ms at VGG-16's k = 58 914 on 4 ranks, the largest cost C7 "
                "flags; it makes VGG-16 the model where gs-SGD gains most, as reported, but not 3.1x")
    return CaseResult(
        name="seed002-table2", title="Sketching vs global top-k throughput (Table II)", paper=PAPER,
        setup=("4 machines x 1 GPU, 1 Gb/s Ethernet (gbe-4gpu preset, its mpi-tcp stack: Open MPI's algorithm "
               "choice), CIFAR-10",
               "ResNet-20 (0.27 M parameters) and CIFAR VGG-16 (14.7 M parameters)",
               "gTop-k as hclhkbu/gtopkssgd runs it (GPU top-k, host merges with a barrier per round, MPI_Bcast); "
               "Sketched-SGD via a server rank; gs-SGD tree all-reduce of O(log d) sketches + second round"),
        assumptions=(f"per-GPU batch {BATCH} (the gTop-k code's exp_configs; seed 002 gives none)",
                     "GTX 1080 Ti roofline compute (GPU not stated)",
                     "density k/d = 0.004 (the last warm-up density); Count-Sketch for +-0.1 ||g||_2 on every "
                     "coordinate with probability 0.99 (strategy defaults: cols 800, rows ceil(ln(d/0.01)/0.413))",
                     f"TCP goodput {TCP_GBE:.0%} of 1 Gb/s (seed 004 Table 1 measured 94 % on 1 GbE), Open MPI's "
                     "per-message cost"),
        method=("throughput = R B / T, T = H + t_fwd + t_bwd + T_compress + T_comm + t_update",
                "gtopk: d r_topk + ceil(log2 R) (hop + 2k r_merge + barrier) + Bcast(2k words) + k r_merge; "
                "gs-sgd: 2 rows d r_sketch + 2 ceil(log2 R)(α + S β) + 2 ceil(log2 R)(α + k β); sketched-sgd: "
                "sketches to a server and back (docs/strategies.md)",
                "H: one per-iteration host cost (blocking data-loading term) shared by the three methods, fitted "
                "on gTop-k"),
        calibrated=tuple(cal), fits=tuple(fits), rows=explain_misses(rows, CLOSES), findings=tuple(find))

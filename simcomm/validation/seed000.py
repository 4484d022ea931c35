"""Seed 000, Tables III and VII: node-based communication against the all-reduce baseline.

Table III (Sec. IV-C1): CIFAR, ResNet-18/50/101, batch 128 per replica, 4 to
20 DEEP-EST ESB nodes (1 V100 each, 100 Gb/s InfiniBand); "speedup" of the
proposal over the baseline, printed in percent.  Table VII (Sec. IV-C6):
ImageNet-1K, ResNet-18/34, ShuffleNetV2, batch 64, K' = 50, R = 16 ranks on
M = 4 Ceta-Ciemat nodes (4 V100 each).

We read a speedup s % as ``T_allreduce / T_node-based = 1 + s/100`` per
iteration (the mean over the node-based period, seed 000 footnote 1).

Both experiments are bound by data loading, which the paper never times.
One unknown per dataset, a *blocking* per-iteration loading time d (same
loader, batch and dataset for every model and node count), is calibrated on
one row and everything else is predicted:

* CIFAR d on ResNet-18 at 8 nodes: the 4-node rows are printed only as
  "@1" (a nearby value), so the first exactly printed row is the baseline;
* ImageNet d on the ResNet-18 row of Table VII.

Blocking loading adds d to both methods' iteration, so
``d = (T_a - (1+g) T_n) / g`` for a measured gain g; the case then re-runs the
pipeline with that d (the calibration row's error shows the fit).
"""

from __future__ import annotations

from simcomm.scenario import Scenario, StackSpec, WorkloadSpec
from simcomm.validation._sim import simulate
from simcomm.validation.base import Baseline, CaseResult, Reported, Row, case

PAPER = "seed 000 (Moreno-Alvarez et al., IEEE TNNLS 2023), Tables III and VII"
NODES = (4, 8, 12, 16, 20)
CIFAR_MODELS = ("resnet18", "resnet50", "resnet101")
IMAGENET_MODELS = ("resnet18", "resnet34", "shufflenetv2")
#: Table III speedup (%) per model and node count; the 4-node rows are printed "@1"
TABLE3 = {"resnet18": (1.0, 4.97, 15.12, 5.62, 1.55), "resnet50": (1.0, 5.77, 17.99, 11.02, 6.11),
          "resnet101": (1.0, 7.24, 21.47, 12.93, 7.15)}
#: Table VII speedup, read as percent like Table III's
TABLE7 = {"resnet18": 1.10, "resnet34": 2.34, "shufflenetv2": 1.03}
CAL3, CAL7 = "t3.resnet18.8", "t7.resnet18"
SETTINGS = {"t3": dict(cluster="deep-est-esb", gpus=1, batch=128, dataset=50_000),
            "t7": dict(cluster="ceta-ciemat", gpus=4, batch=64, dataset=1_281_167)}


def reported() -> dict[str, Reported]:
    out = {f"t3.{m}.{n}": Reported(f"{m} {n} nodes", v, "%", "Table III")
           for m, vals in TABLE3.items() for n, v in zip(NODES, vals)}
    out.update({f"t7.{m}": Reported(m, v, "%", "Table VII") for m, v in TABLE7.items()})
    return out


def _trace(table: str, model: str):
    from simcomm.traces.synth import synth_trace

    s = SETTINGS[table]
    return synth_trace(f"{model}-cifar" if table == "t3" else model, "v100", batch=s["batch"])


def iteration(table: str, trace, strategy: str, nodes: int, dataload: float) -> float:
    """Mean iteration time of ``strategy`` (the node-based mean covers its exchange period)."""
    s = SETTINGS[table]
    scn = Scenario(strategy=strategy, nodes=nodes, gpus_per_node=s["gpus"], cluster=s["cluster"],
                   batch=s["batch"], dataset_size=s["dataset"], stack=StackSpec("mpi-tcp"),
                   workload=WorkloadSpec(dataload_s=dataload), options={"overlap": "none"})
    return simulate(scn, trace=trace).mean_s


def gain_pct(table: str, trace, nodes: int, dataload: float) -> float:
    """Speedup of node-based over allreduce in percent."""
    a = iteration(table, trace, "allreduce", nodes, dataload)
    return 100.0 * (a / iteration(table, trace, "node-based", nodes, dataload) - 1.0)


def solve_dataload(table: str, trace, nodes: int, gain: float) -> float:
    """Blocking load time d giving ``gain`` percent (d adds to both iterations)."""
    a = iteration(table, trace, "allreduce", nodes, 0.0)
    n = iteration(table, trace, "node-based", nodes, 0.0)
    g = gain / 100.0
    return max(0.0, (a - (1.0 + g) * n) / g)


def _table3(base: Baseline, traces: dict) -> tuple[list[Row], float, dict]:
    d = solve_dataload("t3", traces["resnet18"], 8, base[CAL3])
    rows, pred = [], {}
    for m in CIFAR_MODELS:
        for n, rep in zip(NODES, TABLE3[m]):
            key = f"t3.{m}.{n}"
            pred[(m, n)] = gain_pct("t3", traces[m], n, d)
            rows.append(Row(f"Table III {m}, {n} nodes: speedup", rep, pred[(m, n)], "%",
                            "calibration" if key == CAL3 else "prediction", "Table III",
                            "printed '@1' (approximate)" if n == 4 else ""))
    return rows, d, pred


def _trend_rows(pred: dict) -> list[Row]:
    faster = sum(1 for v in pred.values() if v > 0)
    order = pred[("resnet101", 12)] > pred[("resnet50", 12)] > pred[("resnet18", 12)]
    peak12 = sum(1 for m in CIFAR_MODELS if max(NODES, key=lambda n: pred[(m, n)]) == 12)
    drop20 = sum(1 for m in CIFAR_MODELS if pred[(m, 20)] < pred[(m, 12)])
    w = "Table III"
    return [Row("Table III: rows where node-based is faster", 15.0, float(faster), "count", "prediction", w,
                "of 15"),
            Row("Table III: 12-node gain ordered ResNet-101 > 50 > 18", 1.0, float(order), "bool", "prediction", w,
                "'gain grows with the parameter count'"),
            Row("Table III: models whose gain peaks at 12 nodes", 3.0, float(peak12), "count", "prediction", w,
                "of 3"),
            Row("Table III: models whose 20-node gain is below the 12-node gain", 3.0, float(drop20), "count",
                "prediction", w, "of 3")]


def _table7(base: Baseline, traces: dict) -> tuple[list[Row], float]:
    d = solve_dataload("t7", traces["resnet18"], 4, base[CAL7])
    rows = [Row(f"Table VII {m}, R=16 M=4: speedup", TABLE7[m], gain_pct("t7", traces[m], 4, d), "%",
                "calibration" if f"t7.{m}" == CAL7 else "prediction", "Table VII") for m in IMAGENET_MODELS]
    return rows, d


def _alternatives(traces3: dict, traces7: dict) -> list[str]:
    """What the other readings of the paper would give (for the findings; nothing here is reported as a row)."""
    d4 = solve_dataload("t3", traces3["resnet18"], 4, TABLE3["resnet18"][0])
    at12 = ", ".join(f"{m} {gain_pct('t3', traces3[m], 12, d4):.1f} %" for m in CIFAR_MODELS)
    d7 = solve_dataload("t7", traces7["resnet18"], 4, 10.0)
    ratio = ", ".join(f"{m} {1 + gain_pct('t7', traces7[m], 4, d7) / 100:.2f}x" for m in IMAGENET_MODELS[1:])
    return [f"calibrating CIFAR d on the approximate 4-node row instead ('@1' = 1 %) gives d = {d4:.2f} s and "
            f"12-node gains of {at12} (reported 15.1 / 18.0 / 21.5 %): the ordering survives, the size does not",
            f"if Table VII's speedups were ratios (1.10x) instead of percent, d = {d7 * 1e3:.0f} ms and the "
            f"predictions would be {ratio} (reported 2.34x, 1.03x)"]


@case("seed000-node-based", summary="node-based vs all-reduce speedups, Tables III (ESB, CIFAR) and VII (Ceta, "
      "ImageNet)", reference=PAPER)
def run() -> CaseResult:
    rep = reported()
    traces3 = {m: _trace("t3", m) for m in CIFAR_MODELS}
    traces7 = {m: _trace("t7", m) for m in IMAGENET_MODELS}
    rows3, d3, pred = _table3(Baseline(rep, {CAL3}), traces3)
    rows7, d7 = _table7(Baseline(rep, {CAL7}), traces7)
    grads = ", ".join(f"{m} {traces3[m].grad_bytes / 1e6:.0f} MB" for m in CIFAR_MODELS)
    return CaseResult(
        name="seed000-node-based", title="Node-based communication vs all-reduce (Tables III, VII)", paper=PAPER,
        setup=("Table III: DEEP-EST ESB (deep-est-esb preset), 1 V100 per node, 4-20 nodes, 100 Gb/s InfiniBand; "
               "CIFAR (50 000 images), ResNet-18/50/101 with the CIFAR stem, batch 128 per replica",
               "Table VII: Ceta-Ciemat (ceta-ciemat preset), 4 nodes x 4 V100, R = 16; ImageNet-1K "
               "(1 281 167 images), ResNet-18/34 and ShuffleNetV2, batch 64 per replica, K' = 50",
               "node-based: intranode gradient all-reduce every iteration (none with 1 GPU per node), "
               "internode parameter all-reduce 1 + floor(K/K') times per epoch (seed 000 footnote 1)",
               "speedup s % read as T_allreduce / T_node-based = 1 + s/100 per mean iteration"),
        assumptions=("V100 roofline compute (fp32, SGD) from the model zoo; gradients " + grads,
                     "MPI over TCP stack (seed 000 ran TCP over InfiniBand): 40 % of line rate, 40 us per message",
                     "both methods reduce after backward, not overlapped (ColossalAI's gradient handler runs "
                     "after backward)",
                     "K' = 50 for CIFAR too (the paper states 50 for ImageNet and the RNNs only)",
                     "data loading blocks the iteration (loaded before forward), the same d for every model "
                     "and node count of a table",
                     "Table VII's speedups are percent, like Table III's (the table does not say; MA-A beside "
                     "them is a ratio in both tables)",
                     "all-reduce algorithm: the engine's MPICH-style automatic choice by size and rank count"),
        calibrated=(f"CIFAR loading d = {d3 * 1e3:.0f} ms per iteration ({128 / d3:.0f} images/s per replica), "
                    "from Table III ResNet-18 at 8 nodes (4.97 %)",
                    f"ImageNet loading d = {d7 * 1e3:.0f} ms per iteration ({64 / d7:.0f} images/s per "
                    "replica), from Table VII ResNet-18 (1.10 %)"),
        rows=tuple(rows3 + _trend_rows(pred) + rows7),
        findings=tuple([
            "Table III: node-based is faster at every node count and the 12-node gain grows with the model, "
            "as reported; the simulated gains jump at 12 and 20 nodes because the baseline's all-reduce at a "
            "non-power-of-two rank count pays extra steps (automatic algorithm choice), so the 12-node rows "
            "match but the 20-node rows are over-predicted by ~10 pp: the paper attributes its 20-node drop to "
            "the few iterations per epoch (K = 20), which in this model costs only 1 exchange in 20 "
            "iterations; an unquantified per-epoch cost (evaluation, start-up) would be needed",
            "the 4-node rows are ~1 % in the paper but 4-9 % here: a bandwidth-bound all-reduce costs about the "
            "same at 4 and 8 ranks, so the paper's 1 % -> 5-7 % jump needs a cost growing with N that it does "
            "not describe",
            "Table VII: fitting d on ResNet-18's 1.10 % needs d of several seconds (about 15 images/s per "
            "replica), implausible for a 4 x V100 node unless loading from Lustre stalls; ResNet-34 then "
            "matches but ShuffleNetV2 (9 MB of gradients, 5x fewer than ResNet-18) is under-predicted ~5x: "
            "its reported gain equals ResNet-18's, which points at a per-tensor latency cost of the "
            "baseline (ShuffleNetV2 has many small parameter tensors) that the bucketed model does not charge",
        ] + _alternatives(traces3, traces7)),
        method=("per-rank iteration: T = d + t_fwd + t_bwd + T_comm + t_update, with d the blocking load time "
                "and T_comm after backward (no overlap)",
                "allreduce: T_comm = all-reduce of |θ| over all R ranks every iteration",
                "node-based: T_local = d + t_fwd + t_bwd + t_update + intranode all-reduce of |θ| over R_m ranks (0 when R_m = 1); "
                "T_exchange = T_local + all-reduce of |θ| over R ranks; X = 1 + floor(K/K') exchanges per "
                "epoch of K = ceil(N/(R B)) iterations; mean T = ((K - X) T_local + X T_exchange) / K",
                "speedup % = 100 (T_allreduce / T_node-based - 1); d solved from the calibration row: "
                "d = (T_a - (1+g) T_n) / g with T_a, T_n simulated at d = 0",
                "every all-reduce is simulated at flow level on the preset topology with the stack's "
                "bandwidth fraction and per-message cost"),
        fidelity="flow")

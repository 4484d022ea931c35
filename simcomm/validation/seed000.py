"""Seed 000, Tables III and VII: node-based communication against the all-reduce baseline, as the code ran.

Table III (Sec. IV-C1): CIFAR, ResNet-18/50/101, 4 to 20 DEEP-EST ESB nodes
(1 V100 each, 100 Gb/s InfiniBand); "speedup" of the proposal over the
baseline, printed in percent.  Table VII (Sec. IV-C6): ImageNet-1K,
ResNet-18/34, ShuffleNetV2, K' = 50, R = 16 ranks on M = 4 Ceta-Ciemat nodes
(4 V100 each).

Set up as the authors' code runs (seed-code-facts A.1):

* Open MPI over TCP (``--mca btl tcp,self,vader``): the presets' ``mpi-tcp``
  stack with Open MPI's coll/tuned algorithm choice;
* the baseline is ColossalAI's data-parallel gradient handler: one flat fp32
  buffer all-reduced after backward (node-based's ``paper_baseline``);
  node-based's intranode all-reduce runs the same way (its default);
* CIFAR K' is the code's automatic ``--sharingiter -1`` (K' = K: one global
  average per epoch); ImageNet K' = 50 (the launcher and the paper);
* batch: CIFAR 128 per replica, ResNet-101 98 (CIFAR/main.py:43-44 "lack of
  GPU RAM"; the paper says 128); ImageNet 64 per replica (the paper, Sec.
  IV-B; the published ImageNet code is not runnable as published, so which
  batch ran is unknown; its overrides are in the findings);
* data loading runs in the training process (``get_dataloader`` without
  ``num_workers``), so it blocks every iteration; every epoch ends with an
  evaluation over the test set, sharded over the ranks (``test_interval=1``).

We read a speedup s % as ``T_allreduce / T_node-based = 1 + s/100`` per
mean iteration (node-based's mean covers its exchange and evaluation
iterations; the baseline gets the same evaluation, E/K per iteration).

One unknown per table, the per-image loading cost c (seconds per image, so
d = B·c per iteration), is fitted on one row: CIFAR on ResNet-18 at 8 nodes
(the 4-node rows are printed only "@1"), ImageNet on ResNet-18.  Its physical
range is a factor 4 either way around torchvision's own pipeline measured in
one process (``MEASURED``); a fit outside it is not used: the table then runs
with the measured cost and the calibration row becomes a prediction (a miss).
"""

from __future__ import annotations

from simcomm.scenario import Scenario, StackSpec, WorkloadSpec
from simcomm.validation._sim import simulate
from simcomm.validation.base import Baseline, CaseResult, Fit, Reported, Row, case, explain_misses

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
#: per-replica batch that runs: CIFAR as the code (ResNet-101 forced to 98), ImageNet as the paper
BATCH = {"t3": {"resnet18": 128, "resnet50": 128, "resnet101": 98},
         "t7": {"resnet18": 64, "resnet34": 64, "shufflenetv2": 64}}
#: the other reading of each conflict (seed-code-facts A.1): the paper's CIFAR 128, the ImageNet code's overrides
BATCH_OTHER = {"t3": {"resnet18": 128, "resnet50": 128, "resnet101": 128},
               "t7": {"resnet18": 128, "resnet34": 256, "shufflenetv2": 256}}
SETTINGS = {"t3": dict(cluster="deep-est-esb", gpus=1, dataset=50_000, test=10_000, k_prime=-1),
            "t7": dict(cluster="ceta-ciemat", gpus=4, dataset=1_281_167, test=50_000, k_prime=50)}
#: torchvision 0.28 running the authors' transforms in one process on one AMD EPYC core (seconds per image,
#: best of 3): CIFAR RandomCrop(32, 4) + AutoAugment(CIFAR10) + ToTensor + Normalize + collate (CIFAR/aux.py);
#: ImageNet JPEG decode (500x375, 119 kB) + RandomResizedCrop(224) + flip + ToTensor + Normalize (IMAGENET/aux.py)
MEASURED = {"t3": 0.84e-3, "t7": 8.2e-3}
#: the same for the test transforms: CIFAR Resize(32) + ToTensor + Normalize; ImageNet Resize(256) + CenterCrop
MEASURED_TEST = {"t3": 0.30e-3, "t7": 10.9e-3}
#: physical range of the fitted per-image cost around the measurement
SLACK = 4.0
BOUND_WHY = ("a factor 4 either way around torchvision's own pipeline measured in one process: another core "
             "(2.5 GHz Xeon Silver on ESB vs AMD EPYC here), contention with the training process, file reads, "
             "and run-to-run spread (25 % here)")


def reported() -> dict[str, Reported]:
    out = {f"t3.{m}.{n}": Reported(f"{m} {n} nodes", v, "%", "Table III")
           for m, vals in TABLE3.items() for n, v in zip(NODES, vals, strict=False)}
    out.update({f"t7.{m}": Reported(m, v, "%", "Table VII") for m, v in TABLE7.items()})
    return out


def _trace(table: str, model: str, batch: int):
    from simcomm.traces.synth import synth_trace

    return synth_trace(f"{model}-cifar" if table == "t3" else model, "v100", batch=batch)


def eval_seconds(table: str, nodes: int, batch: int) -> float:
    """Per-epoch evaluation loading on one rank (the forward passes are the strategy's eval-samples)."""
    s = SETTINGS[table]
    return -(-s["test"] // (nodes * s["gpus"])) * MEASURED_TEST[table]


def _scenario(table: str, strategy: str, nodes: int, batch: int, dataload: float, options: dict,
              collectives: str | None = None) -> Scenario:
    s = SETTINGS[table]
    return Scenario(strategy=strategy, nodes=nodes, gpus_per_node=s["gpus"], cluster=s["cluster"], batch=batch,
                    dataset_size=s["dataset"], stack=StackSpec(collectives=collectives),
                    workload=WorkloadSpec(dataload_s=dataload), options=options)


def _node_based(table: str, nodes: int, batch: int, rule: str = "alg2", k_prime: int | None = None) -> dict:
    s = SETTINGS[table]
    return {"k_prime": s["k_prime"] if k_prime is None else k_prime, "exchange_rule": rule,
            "eval_s": eval_seconds(table, nodes, batch), "eval_samples": s["test"]}


def iteration(table: str, trace, strategy: str, nodes: int, d: float, batch: int | None = None,
              collectives: str | None = None, **nb) -> float:
    """Mean iteration of ``strategy`` with blocking loading ``d`` s and the per-epoch evaluation.

    node-based's mean covers its exchange and evaluation iterations; the baseline evaluates every epoch
    too, so it gets the same E spread over the same K iterations.
    """
    from simcomm.strategies.node_based import NodeBased, NodeBasedParams
    from simcomm.workload import build_workload

    batch = batch or trace.batch
    opts = _node_based(table, nodes, batch, **nb)
    if strategy == "node-based":
        return simulate(_scenario(table, strategy, nodes, batch, d, opts, collectives), trace=trace).mean_s
    t = simulate(_scenario(table, strategy, nodes, batch, d, {"bucket_mb": 0.0, "overlap": "none"}, collectives),
                 trace=trace).mean_s
    w = build_workload(trace, nodes * SETTINGS[table]["gpus"], batch=batch, dataset_size=SETTINGS[table]["dataset"])
    return t + NodeBased(NodeBasedParams(**opts)).eval_seconds(w) / w.iterations_per_epoch


def _it(table: str, trace, strategy: str, nodes: int, d: float, batch: int | None, nb: dict) -> float:
    return iteration(table, trace, strategy, nodes, d, *(() if batch is None else (batch,)), **nb)


def gain_pct(table: str, trace, nodes: int, d: float, batch: int | None = None, **nb) -> float:
    """Speedup of node-based over allreduce in percent."""
    a = _it(table, trace, "allreduce", nodes, d, batch, nb)
    return 100.0 * (a / _it(table, trace, "node-based", nodes, d, batch, nb) - 1.0)


def solve_dataload(table: str, trace, nodes: int, gain: float, batch: int | None = None,
                   collectives: str | None = None) -> float:
    """Blocking load time d giving ``gain`` percent (d adds to both iterations); 0 if no d >= 0 can."""
    nb = {"collectives": collectives} if collectives else {}
    a = _it(table, trace, "allreduce", nodes, 0.0, batch, nb)
    n = _it(table, trace, "node-based", nodes, 0.0, batch, nb)
    g = gain / 100.0
    return max(0.0, (a - (1.0 + g) * n) / g)


def _fit(table: str, base: Baseline, key: str, trace, nodes: int, batch: int):
    """(per-image cost used, Fit or None, calibrated line): the fit when physical, else the measurement."""
    c = solve_dataload(table, trace, nodes, base[key], batch) / batch
    low, high = MEASURED[table] / SLACK, MEASURED[table] * SLACK
    what = "CIFAR" if table == "t3" else "ImageNet"
    if low <= c <= high:
        fit = Fit(f"{what} loading per image", c, "s", low, high, BOUND_WHY, key).check()
        return c, fit, (f"{what} loading c = {c * 1e3:.3g} ms per image (d = {batch * c * 1e3:.0f} ms per "
                        f"iteration of {batch}), fitted on {key}")
    return MEASURED[table], None, (
        f"{what} loading: no fit. Matching {key} needs c = {c * 1e3:.3g} ms per image, outside the physical range "
        f"[{low * 1e3:.3g}, {high * 1e3:.3g}] ms ({BOUND_WHY}); the table runs with the measured "
        f"{MEASURED[table] * 1e3:.3g} ms per image and {key} is reported as a prediction")


def _table3(base: Baseline, traces: dict) -> tuple[list[Row], tuple, str, dict, float]:
    c, fit, line = _fit("t3", base, CAL3, traces["resnet18"], 8, BATCH["t3"]["resnet18"])
    rows, pred = [], {}
    for m in CIFAR_MODELS:
        for n, rep in zip(NODES, TABLE3[m], strict=False):
            key = f"t3.{m}.{n}"
            pred[(m, n)] = gain_pct("t3", traces[m], n, BATCH["t3"][m] * c, BATCH["t3"][m])
            rows.append(Row(f"Table III {m}, {n} nodes: speedup", rep, pred[(m, n)], "%",
                            "calibration" if key == CAL3 and fit else "prediction", "Table III",
                            "printed '@1' (approximate)" if n == 4 else ""))
    return rows, (fit,) if fit else (), line, pred, c


def _trend_rows(pred: dict) -> list[Row]:
    faster = sum(1 for v in pred.values() if v > 0)
    order = pred[("resnet101", 12)] > pred[("resnet50", 12)] > pred[("resnet18", 12)]
    peak12 = sum(1 for m in CIFAR_MODELS if max(NODES, key=lambda n: pred[(m, n)]) == 12)
    drop20 = sum(1 for m in CIFAR_MODELS if pred[(m, 20)] < pred[(m, 12)])
    w = "Table III"
    return [Row("Table III: rows where node-based is faster", 15.0, float(faster), "count", "not-a-test", w,
                "of 15; true by construction: with 1 GPU per node node-based only drops all-reduces"),
            Row("Table III: 12-node gain ordered ResNet-101 > 50 > 18", 1.0, float(order), "bool", "prediction", w,
                "'gain grows with the parameter count'"),
            Row("Table III: models whose gain peaks at 12 nodes", 3.0, float(peak12), "count", "prediction", w,
                "of 3"),
            Row("Table III: models whose 20-node gain is below the 12-node gain", 3.0, float(drop20), "count",
                "prediction", w, "of 3")]


def _table7(base: Baseline, traces: dict) -> tuple[list[Row], tuple, str, float]:
    c, fit, line = _fit("t7", base, CAL7, traces["resnet18"], 4, BATCH["t7"]["resnet18"])
    b = BATCH["t7"]
    rows = [Row(f"Table VII {m}, R=16 M=4: speedup", TABLE7[m], gain_pct("t7", traces[m], 4, b[m] * c, b[m]), "%",
                "calibration" if f"t7.{m}" == CAL7 and fit else "prediction", "Table VII")
            for m in IMAGENET_MODELS]
    return rows, (fit,) if fit else (), line, c


def _baseline_comm(trace) -> str:
    """The baseline's exposed all-reduce per node count (Table III, ResNet-18)."""
    out = []
    for n in NODES:
        res = simulate(_scenario("t3", "allreduce", n, trace.batch, 0.0, {"bucket_mb": 0.0, "overlap": "none"}),
                       trace=trace)
        out.append(f"{res.breakdown.comm_exposed * 1e3:.0f}")
    return " / ".join(out)


def _alternatives(traces3: dict, c3: float, c7: float) -> list[str]:
    """The other readings of the paper and the code (findings only; nothing here is a row)."""
    out = []
    # Open MPI 3.1's rules (segmented ring for these sizes) instead of 4.1's Rabenseifner, loading refitted
    old = "openmpi-3.1"
    c31 = solve_dataload("t3", traces3["resnet18"], 8, TABLE3["resnet18"][1], 128, collectives=old) / 128
    gains = " / ".join(f"{gain_pct('t3', traces3['resnet50'], n, 128 * c31, 128, collectives=old):.1f}"
                       for n in NODES)
    out.append(f"Open MPI 3.1's rules instead of 4.1's (the version seed 000 ran is not published): a ring for these "
               f"sizes, loading refitted to {c31 * 1e3:.3g} ms per image; ResNet-50 gains at {' / '.join(map(str, NODES))} "
               f"nodes {gains} % against the paper's {' / '.join(f'{v:g}' for v in TABLE3['resnet50'])}: flat in N, "
               "so neither version's all-reduce gives the paper's peak at 12 nodes and fall at 20")
    b = BATCH_OTHER["t3"]["resnet101"]
    tr = _trace("t3", "resnet101", b)
    out.append("the paper's CIFAR batch 128 for ResNet-101 (the code forces 98): gains at 8 / 12 / 20 nodes "
               + " / ".join(f"{gain_pct('t3', tr, n, b * c3, b):.1f} %" for n in (8, 12, 20)))
    kp = ", ".join(f"{n} nodes {gain_pct('t3', traces3['resnet18'], n, 128 * c3, 128, k_prime=50):.2f} %"
                   for n in (4, 8))
    out.append(f"K' = 50 on CIFAR (the launcher's example `-s 50` instead of the automatic K' = K): ResNet-18 "
               f"{kp}; only R = 4 (K = 98) exchanges twice, for R >= 8 K <= 50 and both give one exchange")
    code7 = []
    for m in IMAGENET_MODELS:
        b = BATCH_OTHER["t7"][m]
        try:
            code7.append(f"{m} (batch {b}) {gain_pct('t7', _trace('t7', m, b), 4, b * c7, b):.2f} %")
        except Exception as exc:  # noqa: BLE001 - e.g. the memory check refusing a batch: say so
            code7.append(f"{m} (batch {b}) refused: {exc}")
    out.append("the ImageNet code's batch overrides (r18 128, r34 and ShuffleNet the launcher's 256) with the "
               "same per-image loading: " + ", ".join(code7))
    return out


#: what would close each missed row: a quantity the paper does not publish (docs/validation.md, misses)
CLOSES = (
    (", 4 nodes:", "the 4-node runs' loading and all-reduce times (the paper prints only '@1', a nearby value, and "
                   "no breakdown): at K = 98 the simulated gain is the baseline's all-reduce over a loading-bound "
                   "iteration, larger than ~1 %"),
    ("12-node gain ordered", "the Open MPI version and algorithm at 12 ranks (unpublished)"),
    ("gain peaks at 12", "the all-reduce Open MPI ran at 12, 16 and 20 ranks (version and coll/tuned rules "
                         "unpublished; neither 4.1's Rabenseifner, as slow at 20 ranks as at 12, nor 3.1's flat "
                         "ring gives a peak at 12 alone: findings) or a per-epoch cost beyond the test-set pass"),
    ("20-node gain is below", "the same: Open MPI's algorithm at 20 ranks and per-epoch costs at K = 20 "
                              "(unpublished)"),
    (", 20 nodes:", "per-epoch costs beyond the test-set pass (reshuffle, checkpoint, logging) that weigh 1/K = "
                    "1/20 of an epoch, and Open MPI's algorithm at 20 ranks (version unpublished: 4.1's "
                    "Rabenseifner makes the baseline as slow at 20 ranks as at 12; 3.1's ring lowers these gains "
                    "but not to the paper's, findings)"),
    ("resnet101, 12 nodes:", "ResNet-101's batch (the paper says 128, the code forces 98) and Open MPI's "
                             "algorithm at 12 ranks (unpublished)"),
    (", 12 nodes:", "Open MPI's algorithm at 12 ranks (version unpublished) and each model's own loading per "
                    "image (one cost is fitted on ResNet-18 at 8 nodes)"),
    (", 8 nodes:", "each model's own loading per image (one cost is fitted on ResNet-18) and Open MPI's algorithm "
                   "at 8 ranks (unpublished)"),
    (", 16 nodes:", "Open MPI's algorithm at 16 ranks (version unpublished)"),
    ("Table VII shufflenetv2", "the unpublished ColossalAI fork's gradient handler: the published one flattens every "
                               "gradient into one buffer, so ShuffleNetV2's 5x fewer bytes give 5x less gain; an "
                               "equal gain needs a per-tensor cost"),
    ("Table VII resnet34", "ResNet-34's batch on Ceta (paper 64, the ImageNet launcher 256) and its own loading "
                           "per image (fitted on ResNet-18)"),
)

@case("seed000-node-based", summary="node-based vs all-reduce speedups, Tables III (ESB, CIFAR) and VII (Ceta, "
      "ImageNet)", reference=PAPER)
def run() -> CaseResult:
    rep = reported()
    traces3 = {m: _trace("t3", m, BATCH["t3"][m]) for m in CIFAR_MODELS}
    traces7 = {m: _trace("t7", m, BATCH["t7"][m]) for m in IMAGENET_MODELS}
    rows3, fit3, line3, pred, c3 = _table3(Baseline(rep, {CAL3}), traces3)
    rows7, fit7, line7, c7 = _table7(Baseline(rep, {CAL7}), traces7)
    grads = ", ".join(f"{m} {traces3[m].grad_bytes / 1e6:.0f} MB" for m in CIFAR_MODELS)
    k20 = -(-50_000 // (20 * 128))
    return CaseResult(
        name="seed000-node-based", title="Node-based communication vs all-reduce (Tables III, VII)", paper=PAPER,
        setup=("Table III: DEEP-EST ESB (deep-est-esb preset), 1 V100 per node, 4-20 nodes, 100 Gb/s InfiniBand; "
               "CIFAR (50 000 images, 10 000 test), ResNet-18/50 at batch 128 and ResNet-101 at 98 per replica "
               "(CIFAR/main.py), K' = K (the code's automatic --sharingiter -1)",
               "Table VII: Ceta-Ciemat (ceta-ciemat preset), 4 nodes x 4 V100, R = 16; ImageNet-1K "
               "(1 281 167 images, 50 000 validation), ResNet-18/34 and ShuffleNetV2, batch 64 per replica "
               "(the paper), K' = 50",
               "both presets' stack: Open MPI over TCP (mpi-tcp, coll/tuned algorithm choice), as the launcher's "
               "--mca btl tcp,self,vader",
               "baseline: ColossalAI's gradient handler, one flat fp32 all-reduce after backward; node-based: "
               "intranode gradient all-reduce after backward (none with 1 GPU per node), internode parameter "
               "all-reduce when i mod K' = 0 or i = K (for these K and K' footnote 1's count is the same)",
               "loading blocks every iteration (num_workers 0); each epoch ends with an evaluation over the test "
               "set sharded over the ranks, in both methods",
               "speedup s % read as T_allreduce / T_node-based = 1 + s/100 per mean iteration"),
        assumptions=("V100 roofline compute (fp32, SGD) from the model zoo; gradients " + grads,
                     "MPI over TCP stack: 40 % of line rate, 40 us per message (seed 000 ran TCP over "
                     "InfiniBand)",
                     "the same per-image loading cost for every model and node count of a table; evaluation "
                     f"loading {MEASURED_TEST['t3'] * 1e3:.2f} ms (CIFAR) and {MEASURED_TEST['t7'] * 1e3:.1f} ms "
                     "(ImageNet) per test image, measured as the training pipelines",
                     "Table VII's speedups are percent, like Table III's (the table does not say; MA-A beside "
                     "them is a ratio in both tables)"),
        calibrated=(line3, line7), fits=fit3 + fit7,
        rows=explain_misses(rows3 + _trend_rows(pred) + rows7, CLOSES),
        findings=tuple([
            "Table III: the simulated gain is the baseline's per-iteration all-reduce of |θ| over TCP against "
            "node-based's single exchange per epoch, diluted by loading and evaluation; it grows with the model "
            "as reported, but the paper's rise from ~1 % at 4 nodes to 15-21 % at 12 and its fall at 16-20 need "
            "costs that change with N in ways the paper does not describe (the paper blames the few iterations "
            f"per epoch at 20 nodes, K = {k20}, which here cost one exchange and one evaluation per {k20} "
            "iterations)",
            "Table III's 15/15 rows with node-based faster is not a test: with one GPU per node node-based only "
            "removes all-reduces",
            f"Table III: the baseline's one-buffer all-reduce of ResNet-18 takes {_baseline_comm(traces3['resnet18'])} "
            f"ms at {' / '.join(map(str, NODES))} ranks: Open MPI's Rabenseifner folds the ranks beyond a power of "
            "two with full-buffer exchanges, so the simulated gains peak at 12 and 20 nodes (the paper's at 12 "
            "only)",
            "Table VII: ShuffleNetV2 (5x fewer gradient bytes than ResNet-18) reports the same gain as "
            "ResNet-18, which a bandwidth-bound all-reduce cannot give; per-tensor latency would (ShuffleNetV2 "
            "has many small tensors) but ColossalAI's handler flattens every gradient into one buffer, so unless "
            "the unpublished fork differs, this model has no mechanism for it",
        ] + _alternatives(traces3, c3, c7)),
        method=("per-rank iteration: T = d + t_fwd + t_bwd + T_comm + t_update, with d = B c the blocking load "
                "time and T_comm after backward (no overlap); evaluation adds E = ceil(N_test / R) c_test + "
                "ceil(N_test / (R B)) t_fwd once per epoch",
                "allreduce: T_comm = all-reduce of |θ| over all R ranks every iteration, one flat buffer; mean = "
                "T + E / K",
                "node-based: T_local = d + t_fwd + t_bwd + t_update + intranode all-reduce of |θ| over R_m ranks "
                "(0 when R_m = 1); T_exchange = T_local + all-reduce of |θ| over R ranks; X = ceil(K/K') "
                "exchanges per epoch of K = ceil(N/(R B)) iterations, the last one also evaluating; mean T = "
                "((K - X) T_local + X T_exchange + E) / K",
                "speedup % = 100 (T_allreduce / T_node-based - 1); d solved from the calibration row: "
                "d = (T_a - (1+g) T_n) / g with T_a, T_n simulated at d = 0, and c = d / B",
                "every all-reduce is simulated at flow level on the preset topology with the stack's "
                "bandwidth fraction, per-message cost and Open MPI's algorithm choice"),
        fidelity="flow")

"""Seed 001, Fig. 11 / Sec. 4.3: time efficiency of gossip (SGP, Crossover-SGD) against AllReduce.

The setup is the authors' AWS timing code (220606_aws/imagenet_test.py,
seed-code-facts §A.2), not the NEURON training runs: AWS g4dn.2xlarge
instances with one T4 each (Table 2; the ``aws-g4dn`` preset, whose stack is
NCCL over TCP sockets because that code calls ``init_process_group("nccl")``
and g4dn has no EFA), ResNet-50 under Apex AMP O1 (fp16 compute, fp32
master parameters on the wire), a synthetic batch drawn by ``torch.rand``
on the CPU inside the timer (no data loading, but the draw, the per-tensor
host loops of clipping, norms and the LARS step, and AMP's unscale are timed
too: :mod:`simcomm.validation.aws_loop`, the same for every method and the
reference), communication every iteration, and per-iteration time from
before the draw to after the closing barrier.  The code runs, in one job:

* AllReduce: after the step, 18 per-segment NCCL all-reduces of the
  parameters, one after another (aws:537-549);
* SGP: after the step, per segment a threaded send to rank + 2^(t mod log2 N)
  and a blocking receive from rank - 2^(...), a pair all-reduce when both are
  the same rank (``sgp`` mode blocking);
* Crossover-SGD: after the step, per segment a threaded send and blocking
  receive on a fresh fair table, a pair all-reduce for 2-cycles
  (``crossover-sgd`` mode blocking);
* hierarchical Crossover-SGD with 2, 4 and 8 groups of consecutive ranks:
  reduce to the root, roots step and gossip per segment, one broadcast of
  the whole model (``hierarchical-crossover-sgd`` mode blocking,
  broadcast model).

The paper prints no absolute time, only claims (Sec. 4.3): the two gossip
methods have ~12-14 % higher time efficiency than AllReduce, Crossover-SGD
~1-2 % below SGP; hierarchical Crossover-SGD is below AllReduce with a fixed
number of groups and above it with a fixed group size.  Time efficiency at N
instances is ``E(N) = T_ref / T(N)`` (T_ref: one T4's iteration without
communication; the "optimal line" is E = 1), and "12-14 % higher" is read as
a difference of percentage points of E.  With no absolute number there is
nothing to calibrate: every row is an a-priori prediction (the findings
give the compute a 13 pp gap would need: :func:`compute_for_gap`).
"""

from __future__ import annotations

import dataclasses

from simcomm.scenario import Scenario, WorkloadSpec
from simcomm.validation._sim import simulate
from simcomm.validation.base import CaseResult, Row, case, explain_misses

PAPER = "seed 001 (Yeo et al., Crossover-SGD), Fig. 11 and Sec. 4.3"
NODES = 16  # the issue's instance count; the text of the paper does not print Fig. 11's axis
SCALES = (4, 8, 16)
#: the AWS timing code's --batch_size default (aws:52); no launch script for the AWS runs is published
BATCH = 64
PRECISION = "amp-fp16"  # Apex AMP O1 (aws: amp.initialize(..., opt_level="O1"))
WHERE = "Sec. 4.3 (Fig. 11)"
#: the text's claims, in percentage points of time efficiency (midpoints of the printed ranges)
REPORTED = {"gossip_gain": 13.0, "sgp_over_crossover": 1.5}
#: the methods as the AWS timing code runs them (strategy, options)
METHODS: dict[str, tuple[str, dict]] = {
    "sgp": ("sgp", {"mode": "blocking"}),
    "crossover-sgd": ("crossover-sgd", {"mode": "blocking"}),
    **{f"hier-g{g}": ("hierarchical-crossover-sgd", {"groups": g, "mode": "blocking", "broadcast": "model"})
       for g in (2, 4, 8)},
}


def _trace(batch: int = BATCH):
    from simcomm import traces

    trace, _ = traces.trace_for("resnet50", "t4", batch, "fp16")
    return trace


def segment_trace(trace):
    """The trace with each seed-001 segment's parameter layers merged into one layer (same times and bytes).

    The AWS code all-reduces the parameters segment by segment (18 messages
    for ResNet-50); ``allreduce`` with ``overlap=none`` and a bucket per layer
    of this trace runs exactly those 18 all-reduces, one after another, after
    backward (the code runs them after the step: the same critical path).
    Layers without parameters stay where they are.
    """
    from simcomm.strategies._gossip import model_segments
    from simcomm.workload import build_workload

    segs, _ = model_segments(build_workload(trace, 1, bucket_mb=0), 0)
    first = {s[0]: s for s in segs}
    merged_away = {i for s in segs for i in s[1:]}
    layers = []
    for i, layer in enumerate(trace.layers):
        if i in merged_away:
            continue
        if i in first:
            group = [trace.layers[j] for j in first[i]]
            layer = dataclasses.replace(
                layer, name=f"segment {len(layers)}", params=sum(x.params for x in group),
                grad_bytes=sum(x.grad_bytes for x in group), forward_s=sum(x.forward_s for x in group),
                backward_s=sum(x.backward_s for x in group), update_s=sum(x.update_s for x in group),
                flops=sum(x.flops or 0.0 for x in group) or None, by_batch=(), grad_l1=(), spread={})
        layers.append(layer)
    return dataclasses.replace(trace, layers=tuple(layers))


def host_loop(trace, batch: int = BATCH, **constants):
    """The AWS loop's host work per iteration on the T4 (simcomm.validation.aws_loop; ``constants``: its
    host constants, for the findings' sensitivity only)."""
    from simcomm.traces.devices import get_device
    from simcomm.validation.aws_loop import loop_cost

    return loop_cost(trace, get_device("t4"), batch, **constants)


def segment_tensors(trace) -> list[list[int]]:
    """The element counts of each seed-001 segment's parameter tensors (torchvision's 161 for ResNet-50)."""
    from types import SimpleNamespace

    from simcomm.strategies._gossip import model_segments
    from simcomm.validation.aws_loop import parameter_tensors
    from simcomm.workload import build_workload

    segs, _ = model_segments(build_workload(trace, 1, bucket_mb=0), 0)
    return [[n for n, _ in parameter_tensors(SimpleNamespace(layers=[trace.layers[i] for i in seg]))]
            for seg in segs]


def exchange_host(trace, method: str, nodes: int, **constants) -> float:
    """The host work (s) of ``method``'s own exchange function in the AWS code (simcomm.validation.aws_exchange;
    0 for the hierarchical variants, not counted); ``constants``: its dispatch, for the findings only."""
    from simcomm.traces.devices import get_device
    from simcomm.validation.aws_exchange import METHODS, exchange_cost

    if method not in METHODS:
        return 0.0
    return exchange_cost(segment_tensors(trace), get_device("t4"), method, nodes, **constants).total_s


def _gaps(t: dict[str, float]) -> dict[str, float]:
    """Gossip - AllReduce efficiency gaps (pp) of one :func:`times` result."""
    return {k: _pp(t["ref"] / t[k] - t["ref"] / t["allreduce"]) for k in ("sgp", "crossover-sgd")}


def _loop_sensitivity(trace) -> str:
    """What the loop's two measured host constants do to the gap rows (a finding, not a fit)."""
    from simcomm.validation.aws_loop import DISPATCH_S, RAND_S_PER_ELEMENT

    variants = (("the device's bare 5 us per call (no dispatch)", {"dispatch_s": 0.0}),
                ("twice the measured dispatch", {"dispatch_s": 2 * DISPATCH_S}),
                ("the draw at g4dn's 3.5 GHz instead of 2.1", {"rand_s_per_element": RAND_S_PER_ELEMENT * 2.1 / 3.5}),
                ("the draw at the slowest session's best (65.9 ms)",
                 {"rand_s_per_element": 65.9e-3 / (BATCH * 3 * 224 * 224)}))
    parts, errors = [], []
    for label, constants in variants:
        loop = host_loop(trace, **constants).total_s
        gap = _gaps(times(NODES, load=loop))["sgp"]
        errors.append(_pp(gap / REPORTED['gossip_gain'] - 1))
        parts.append(f"{label}: {loop * 1e3:.0f} ms, SGP - AllReduce {gap:.1f} pp ({errors[-1]:+.1f} %)")
    return ("the loop's host constants are measured on the development machine, not on g4dn, so the gap rows "
            "carry their uncertainty: " + "; ".join(parts) + f". Over these variants the SGP row's error spans "
            f"{min(errors):+.1f} to {max(errors):+.1f} % (the exchanges' host work priced with the measured "
            "dispatch throughout)")


def _loop_assumption() -> str:
    """The host loop's ``assumed:`` line, its parts in milliseconds."""
    from simcomm.validation.aws_loop import DISPATCH_S, RAND_S_PER_ELEMENT

    loop = host_loop(_trace())
    return (f"host work inside the timer {loop.total_s * 1e3:.0f} ms per iteration, every method and the reference "
            f"(simcomm.validation.aws_loop): torch.rand on the CPU and pageable copies {loop.input_s * 1e3:.0f} ms "
            f"({RAND_S_PER_ELEMENT * 1e9:.2f} ns per float, measured on one core here; PCIe Gen3 x16 at 12 GB/s); "
            f"zero_grad, clip_grad_norm (norms stacked on the GPU: PyTorch >= 1.8, which the code's NCCL send/recv "
            f"needs), the norms loop and lars.py's step over "
            f"{loop.tensors} tensors, {loop.kernels} kernels and {loop.syncs} reads back to the host "
            f"{loop.loops_s * 1e3:.0f} ms (per kernel and per read one call: {DISPATCH_S * 1e6:.1f} us of PyTorch "
            f"dispatch, measured here, and the T4's 5 us launch; or the tensor's memory traffic at the T4's "
            f"roofline when longer), AMP's unscale {loop.unscale_s * 1e3:.1f} ms, less the trace's fused update "
            f"{loop.replaced_update_s * 1e3:.1f} ms, which lars.py replaces")


def _run(trace, strategy: str, nodes: int, options: dict, batch: int, load: float):
    """One method's run; ``load``: the loop's host work (s), blocking every iteration, the reference's too."""
    scn = Scenario(strategy=strategy, nodes=nodes, gpus_per_node=1, cluster="aws-g4dn", batch=batch,
                   options=options, resolution=0.0,
                   workload=WorkloadSpec(precision=PRECISION, bucket_mb=0.0, dataload_s=load))
    return simulate(scn, trace=trace)


def times(nodes: int, batch: int = BATCH, load: float | None = None, exchange: bool = True) -> dict[str, float]:
    """Mean iteration time (s) per method at ``nodes`` instances, plus ``ref`` (one T4, no communication).

    ``load``: the timed loop's host work per iteration (None: :func:`host_loop`'s, the case's setup; other
    values only for the findings that show what it changes); ``exchange``: False leaves out each method's own
    exchange host work (:func:`exchange_host`; a finding shows what it changes)."""
    trace = _trace(batch)
    if load is None:
        load = host_loop(trace, batch).total_s  # from the model's own tensors, not the merged segments
    # each method's own exchange function adds its host work (aws_exchange) to the loop's, which all share
    extra = {m: exchange_host(trace, m, nodes) if exchange else 0.0 for m in ("allreduce", *METHODS)}
    out = {"ref": _run(trace, "allreduce", 1, {}, batch, load).mean_s,
           # a bucket per (merged) layer: the 18 per-segment all-reduces of aws:537-549
           "allreduce": _run(segment_trace(trace), "allreduce", nodes, {"overlap": "none", "bucket_mb": 1e-9},
                             batch, load + extra["allreduce"]).mean_s}
    for key, (strategy, options) in METHODS.items():
        if options.get("groups", 0) < nodes:
            out[key] = _run(trace, strategy, nodes, options, batch, load + extra[key]).mean_s
    return out


def efficiencies(nodes: int, batch: int = BATCH) -> dict[str, float]:
    """Time efficiency E = T_ref / T(N) (0..1) per method."""
    t = times(nodes, batch)
    return {k: t["ref"] / v for k, v in t.items() if k != "ref"}


def _pp(x: float) -> float:
    return 100.0 * x


def compute_for_gap(gap: float, add_a: float, add_b: float) -> tuple[float, float] | None:
    """The per-iteration compute ``c`` (s) at which ``E_a - E_b = gap`` (0..1), both roots, or None.

    Every method of this case exchanges after the step and blocks, so its
    iteration is the compute plus what it adds, ``T = c + add``, and
    ``T_ref = c``: ``gap(c) = c / (c + add_a) - c / (c + add_b)
    = c (add_b - add_a) / ((c + add_a)(c + add_b))``.  It is zero at ``c = 0``
    and as ``c`` grows, and peaks at ``c = sqrt(add_a add_b)`` with
    ``(sqrt(add_b) - sqrt(add_a)) / (sqrt(add_b) + sqrt(add_a))``; any smaller
    gap is reached twice, the roots of
    ``gap c^2 + (gap (add_a + add_b) - (add_b - add_a)) c + gap add_a add_b = 0``.
    """
    if not (gap > 0.0 and 0.0 <= add_a < add_b):
        return None
    lin = (add_b - add_a) - gap * (add_a + add_b)
    disc = lin * lin - 4.0 * gap * gap * add_a * add_b
    if lin <= 0.0 or disc < -1e-12 * lin * lin:  # beyond rounding: the gap is above the peak
        return None
    disc = max(disc, 0.0)
    return (lin - disc ** 0.5) / (2.0 * gap), (lin + disc ** 0.5) / (2.0 * gap)


def _gap_compute_finding(t: dict[str, float], trace) -> str:
    """Why the T4's compute is not calibrated, and which compute the reported SGP gap would need."""
    from simcomm.traces.devices import get_device

    add_s, add_r = t["sgp"] - t["ref"], t["allreduce"] - t["ref"]
    gap_sgp, gap_co = (_pp(t["ref"] / t[k] - t["ref"] / t["allreduce"]) for k in ("sgp", "crossover-sgd"))
    peak = get_device("t4").flops_for("fp16")
    # training FLOPs: forward (the trace's per-layer flops) + backward (twice the forward)
    work = 3.0 * sum(layer.flops or 0.0 for layer in trace.layers)
    top = _pp((add_r ** 0.5 - add_s ** 0.5) / (add_r ** 0.5 + add_s ** 0.5))
    roots = compute_for_gap(REPORTED["gossip_gain"] / 100.0, add_s, add_r)
    host = host_loop(trace).total_s  # part of every c: the compute is what is left of it

    def share(c: float) -> str:
        return f"{_pp(work / (c - host) / peak):.1f} % of peak" if c > host else "less than the host loop alone"

    need = ("no compute gives it" if roots is None else " or ".join(f"{c * 1e3:.0f} ms ({share(c)})" for c in roots))
    return (f"the T4's compute is not calibrated: the paper prints no single-instance time, throughput or "
            f"all-reduce time for the AWS runs (Sec. 4.3 gives only the 12-14 % and 1-2 % claims, Table 2 only the "
            f"hardware, Fig. 11 is plotted without values), and its gaps could not pin it anyway: with the "
            f"exchanges above (after the step at N={NODES}, SGP adds {add_s * 1e3:.0f} ms, AllReduce "
            f"{add_r * 1e3:.0f} ms), gap(c) = c/(c + {add_s * 1e3:.0f} ms) - c/(c + {add_r * 1e3:.0f} ms) peaks at "
            f"{top:.1f} pp at c = {(add_s * add_r) ** 0.5 * 1e3:.0f} ms and the reported "
            f"{REPORTED['gossip_gain']:.0f} pp needs c = {need}, against {t['ref'] * 1e3:.0f} ms simulated "
            f"(the host loop's {host * 1e3:.0f} ms and {work / 1e12:.2f} TFLOP of training work an iteration "
            f"against the T4's {peak / 1e12:.0f} TF fp16 peak for the compute): a fit on either gap row would set "
            f"the T4's compute from a row then not reported, and the other gap row ({abs(gap_co - gap_sgp):.1f} pp away "
            f"here) would be no test")


def _exchange_finding(trace, t: dict[str, float], loopless: dict[str, float]) -> str:
    """What each method's own exchange host work is, and what it does to the rows."""
    from simcomm.validation.aws_exchange import STORE_POLL_S

    host = {m: exchange_host(trace, m, NODES) for m in ("allreduce", "sgp", "crossover-sgd")}
    e = {k: t["ref"] / t[k] for k in ("allreduce", "sgp", "crossover-sgd")}
    e_nb = t["ref"] / (t["sgp"] - STORE_POLL_S)  # the barrier is serial on every rank: it adds to the iteration
    return (f"each exchange function's own host work in the AWS code (aws_exchange) at N={NODES}: AllReduce "
            f"{host['allreduce'] * 1e3:.1f} ms, SGP {host['sgp'] * 1e3:.1f} ms (of which "
            f"{STORE_POLL_S * 1e3:.0f} ms is the store barrier of the dist.new_group() that sgp() makes on every "
            f"call, PyTorch 1.8 to 2.0), Crossover-SGD {host['crossover-sgd'] * 1e3:.1f} ms; without it SGP - "
            f"AllReduce is {loopless['sgp']:.1f} pp and Crossover-SGD - AllReduce {loopless['crossover-sgd']:.1f} "
            f"pp (the tally before this was counted). With PyTorch 1.7's new_group, which ended in an NCCL "
            f"barrier() instead of the store's 10 ms poll (about a millisecond, taken as nothing here), SGP - "
            f"AllReduce would be {_pp(e_nb - e['allreduce']):.1f} pp and SGP - Crossover-SGD "
            f"{_pp(e_nb - e['crossover-sgd']):+.1f} pp (paper: +1.5)")


#: what would close each missed row: a quantity the paper or the AWS runs do not publish
CLOSES = (
    ("- AllReduce efficiency", "the AWS runs' per-instance batch (no launch command is published) and the T4's "
                               "training compute on those instances: the roofline synthesis, its factor borrowed from "
                               "the V100 fit (no allowed T4 source), prices 131 ms of forward, backward and update and "
                               "the host loop (aws_loop) adds about 100 ms, where the authors' logs (an independent "
                               "check, not fitted) show every timed iteration at 0.45 s or more, so the exchange is "
                               "still too large a share of the step here; see the findings)"),
    ("SGP - Crossover-SGD", "the PyTorch version of the AWS runs (unpublished), which sets what SGP's per-call "
                            "dist.new_group() costs (1.8 to 2.0: the store barrier's 10 ms poll, counted here; "
                            "1.7: an NCCL barrier instead), and what Crossover-SGD paid beyond its simulated "
                            "exchange: the paper names peer selection, which the published AWS code draws before "
                            "the timer; a candidate inside it is NCCL's communicator set-up, not modelled: "
                            "ProcessGroupNCCL creates one communicator per rank pair at the pair's first send or "
                            "recv (ProcessGroupNCCL.cpp, getKeySendRecv) and each 2-rank group's at its first "
                            "all-reduce, so the fair tables' fresh peers keep creating them over many timed "
                            "iterations while SGP's four offsets create theirs in the first ones; the authors' logs "
                            "(not fitted) fit this: SGP's first three timed iterations take 0.63-0.67 s and the "
                            "rest 0.46-0.52 s, Crossover-SGD's fall from 1.08 s over about twenty iterations to "
                            "0.49-0.58 s; its time per communicator over sockets is unpublished"),
    ("groups of 2 (fixed size)", "the cost of NCCL's group reduce and broadcast over sockets as the group grows "
                                 "(the AWS runs' NCCL version, sockets and threads are unpublished): a pipelined "
                                 "reduce costs about |theta|/beta whatever the group size"),
)

@case("seed001-time-efficiency", summary="gossip vs AllReduce time efficiency on AWS g4dn (T4, NCCL over TCP)",
      reference=PAPER)
def run() -> CaseResult:
    from simcomm.validation.aws_stagger import stagger_finding

    t = {n: times(n) for n in SCALES}
    eff = {n: {k: t[n]["ref"] / v for k, v in t[n].items() if k != "ref"} for n in SCALES}
    e = eff[NODES]
    rows = (
        Row(f"{NODES} instances: SGP - AllReduce efficiency", REPORTED["gossip_gain"],
            _pp(e["sgp"] - e["allreduce"]), "pp", "prediction", WHERE, "paper: 12-14 % for both gossip methods"),
        Row(f"{NODES} instances: Crossover-SGD - AllReduce efficiency", REPORTED["gossip_gain"],
            _pp(e["crossover-sgd"] - e["allreduce"]), "pp", "prediction", WHERE,
            "paper: 12-14 % for both gossip methods"),
        Row(f"{NODES} instances: SGP - Crossover-SGD efficiency", REPORTED["sgp_over_crossover"],
            _pp(e["sgp"] - e["crossover-sgd"]), "pp", "prediction", WHERE, "paper: 1-2 %"),
        Row(f"{NODES} instances: hierarchical, 2 groups (fixed count) below AllReduce", 1.0,
            float(e["hier-g2"] < e["allreduce"]), "bool", "prediction", WHERE, "fixed number of groups"),
        Row(f"{NODES} instances: hierarchical, groups of 2 (fixed size) above AllReduce", 1.0,
            float(e[f"hier-g{NODES // 2}"] > e["allreduce"]), "bool", "prediction", WHERE, "fixed group size"),
    )
    absolute = "; ".join(f"N={n}: " + ", ".join(f"{k} {_pp(v):.1f} %" for k, v in sorted(eff[n].items()))
                         for n in SCALES)
    per_iter = ", ".join(f"{k} {t[NODES][k] * 1e3:.0f} ms" for k in ("ref", "allreduce", "sgp", "crossover-sgd",
                                                                       "hier-g2", f"hier-g{NODES // 2}"))
    gain = {n: _pp(eff[n]["sgp"] - eff[n]["allreduce"]) for n in SCALES}
    big = {b: efficiencies(NODES, b) for b in (128, 256)}
    bare_gap = _gaps(times(NODES, load=0.0, exchange=False))
    loopless = _gaps(times(NODES, exchange=False))
    trace = _trace()
    load = host_loop(trace).total_s
    variants = {label: t[NODES]["ref"] / _run(trace, "crossover-sgd", NODES, opts, BATCH, load).mean_s
                for label, opts in (("Alg. 1 (mode=overlap)", {"mode": "overlap"}),
                                    ("overlap=compute", {"mode": "blocking", "overlap": "compute"}))}
    big_gain = ", ".join(f"batch {b}: {_pp(x['sgp'] - x['allreduce']):.1f} pp" for b, x in big.items())
    return CaseResult(
        name="seed001-time-efficiency", title="Gossip vs AllReduce time efficiency (Fig. 11)", paper=PAPER,
        setup=(f"{NODES} AWS g4dn.2xlarge instances x 1 T4 (aws-g4dn preset, up to 3 125 Mb/s), NCCL over TCP "
               "sockets (nccl-socket stack: the AWS code uses the NCCL backend; g4dn has no EFA)",
               f"ResNet-50, batch {BATCH} per instance, Apex AMP O1 (fp16 compute, fp32 parameters on the wire), "
               "synthetic input drawn on the CPU inside the timer, host loops of clipping, norms and LARS, AMP "
               "unscale (aws_loop); communication every iteration",
               "as the AWS timing code runs them: AllReduce = 18 per-segment parameter all-reduces after the step; "
               "SGP = per segment a blocking exchange with rank +/- 2^(t mod log2 N) after the step; Crossover-SGD "
               "= per segment a blocking exchange on a fresh fair table; both with a pair all-reduce for 2-cycles",
               "hierarchical Crossover-SGD (groups of consecutive ranks): reduce to the root, roots step and "
               "gossip per segment, one broadcast of the whole model; 2 groups (fixed count) and groups of 2 "
               f"({NODES // 2} groups, fixed size)",
               "each exchange function's own host work (aws_exchange): AllReduce's flatten, division and "
               "unflatten per segment; SGP's dist.new_group() store barrier per call, per segment a flatten, a "
               "send thread, a zeroed receive buffer and a synchronisation, per tensor a three-kernel average; "
               "Crossover-SGD the same without the barrier, the model flattened once",
               "time efficiency E(N) = T(1 instance, no communication) / T(N), T(N) from before forward to the "
               "closing barrier (the AWS code's timer; every rank done); gaps in percentage points of E"),
        assumptions=(f"{NODES} instances: the issue's count; the paper's text does not print Fig. 11's x-axis (the "
                     "AWS code runs its 8-group phase only with >= 8 processes)",
                     f"batch {BATCH}: the AWS timing code's --batch_size default; no launch command for the AWS runs "
                     "is published, and Table 1's 256 is the NEURON training setting (V100 32 GB)",
                     "T4 compute from the roofline synthesis in fp16, its factor borrowed from the V100 fit (no "
                     "allowed T4 source); Apex O1's per-iteration weight casts are not modelled",
                     _loop_assumption(),
                     "no peer-selection cost: the AWS code draws every table before the timer starts"),
        calibrated=(), rows=explain_misses(rows, CLOSES),
        findings=(
            f"absolute efficiencies: {absolute}; per iteration at N={NODES}: {per_iter}",
            "SGP - AllReduce gap by scale: " + ", ".join(f"N={n} {g:.1f} pp" for n, g in gain.items()) +
            f"; it grows with the per-iteration compute the exchange is added to ({big_gain} at N={NODES}, "
            "everything else equal), so the unpublished AWS batch is the largest uncertainty in this row",
            _gap_compute_finding(t[NODES], trace),
            f"the timed loop's host work (aws_loop, {host_loop(trace).total_s * 1e3:.0f} ms an iteration in every "
            f"method and the reference) is what brings the gaps near the paper's: without it and the exchanges' "
            f"own host work SGP - AllReduce is {bare_gap['sgp']:.1f} pp and Crossover-SGD - AllReduce "
            f"{bare_gap['crossover-sgd']:.1f} pp at N={NODES} (the tally before 2026-11-28). Left out: Apex O1's "
            f"per-iteration weight casts, which would lengthen every iteration and narrow the gaps",
            _exchange_finding(trace, t[NODES], loopless),
            _loop_sensitivity(trace),
            f"SGP comes out {_pp(e['sgp'] - e['crossover-sgd']):+.2f} pp against Crossover-SGD: in the AWS code "
            "both send and receive exactly |theta| per iteration, segment by segment, one peer per segment, after "
            "the step, and SGP alone makes a process group every call (the store barrier above). The paper "
            "attributes Crossover-SGD's 1-2 % deficit to its segment-wise peer selection, but the AWS code draws "
            "the tables before the timer starts (aws:323-345), so the timed region holds no such cost; the gap is "
            "not reproduced",
            stagger_finding(trace, t[NODES]),
            "hierarchical: a pipelined NCCL reduce or broadcast of |theta| costs about |theta|/beta whatever the "
            "group size, so every configuration pays reduce + roots' exchange + broadcast, about three gossip "
            "exchanges, and sits below AllReduce (whose ring moves 2(N-1)/N |theta|). The paper's fixed-size curve "
            "above AllReduce is not reproduced; the paper's explanation (group traffic growing linearly with the "
            "group size) fits a reduce/broadcast that is not pipelined",
            f"the paper's own Crossover-SGD variants at N={NODES}, for comparison (not what Fig. 11 timed): "
            + ", ".join(f"{k} {_pp(v):.1f} %" for k, v in variants.items()) +
            f" against blocking {_pp(e['crossover-sgd']):.1f} %; Alg. 1's overlapped segments share the same NIC, "
            "so they save only per-message latency; hiding the exchange behind forward and backward "
            "(overlap=compute, the conclusion's future work) is what would lift it",
            "the authors' AWS iteration logs (220606_aws/itr_time_{4,8,16}_0.csv, not a reported row: shown, not "
            "counted or fitted): all-reduce minus the fastest gossip kind is 72, 107 and 104 ms at 4, 8 and 16 "
            "instances (medians), where a ring moves 0.5, 0.75 and 0.875 |theta| more per rank than a one-way exchange: "
            "about 140 ms per |theta| at 4 and 8, i.e. about 5.8 Gb/s per direction, against 11.25 Gb/s here "
            "(AWS's 25 Gb/s burst x 0.45 under nccl-socket); and at every scale one SGP offset runs about 45 ms "
            "faster than the others (457 "
            "against 499 ms at 4, 456 against 500-508 at 8, 513 against 560 at 16), including offsets whose send and "
            "receive peers differ, so the gap is not a pair all-reduce's cost: NCCL over sockets moves the same bytes "
            "in the same 512 KiB requests over the same sockets for a 2-rank all-reduce as for a one-way exchange "
            "(net_socket.cc; simcomm.runtimes.transport), and simcomm prices both alike",
            "the previous version's misses (docs/validation.md) came from running another setup than the AWS code: "
            "SGP overlapped with forward+backward (reference SGP, 99.9 % efficiency) instead of blocking per "
            "segment after the step; Crossover-SGD with all segments in flight; AllReduce overlapped with "
            "backward instead of 18 parameter all-reduces after the step; an MPI/TCP stack instead of NCCL "
            "sockets; fp16 instead of fp32 messages; batch 256 at 8 instances; and rows with 42-step "
            "accumulation, which the AWS timing loop never does (it communicates every iteration)"),
        method=("E(N) = T_ref / T(N), T_ref = one instance's iteration (forward, backward, update; no "
                "communication); gap = 100 (E_a - E_b) in pp",
                "allreduce: T = t_fwd + t_bwd + t_upd + sum over 18 segments of T_allreduce(N, |theta_s|) "
                "(NCCL's algorithm choice over TCP) + H_allreduce",
                "sgp, crossover-sgd (blocking): T = t_fwd + t_bwd + t_upd + sum_s (alpha + |theta_s| beta + "
                "|theta_s| gamma) + H_method, a 2-rank all-reduce for a 2-cycle",
                "H_method: the exchange function's host work, per kernel group max(k (dispatch + launch), bytes / "
                "memory rate), plus calls, synchronisations, threads (67 us) and SGP's 10 ms store barrier",
                "hierarchical-crossover-sgd: T = t_fwd + t_bwd + T_reduce(L, |theta|) + t_upd + T_crossover(G) + "
                "T_bcast(L, |theta|) for G groups of L instances"),
        fidelity="flow")

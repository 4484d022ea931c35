"""Seed 001, Fig. 11 / Sec. 4.3: time efficiency of gossip (SGP, Crossover-SGD) against AllReduce.

Setup (Sec. 4.1, Table 2): AWS g4dn.2xlarge instances (1 x T4, up to
3 125 Mb/s), PyTorch 1.4 + Apex over OpenMPI 3.1, ResNet-50 on ImageNet.
The text of the paper gives no absolute time or efficiency (Fig. 11's curves
are not printed), only the claims: the two gossip methods are ~12-14 % more
time-efficient than AllReduce, Crossover-SGD ~1-2 % below SGP; hierarchical
Crossover-SGD is below AllReduce with a fixed number of groups and above it
with a fixed group size.

Time efficiency at N workers: ``E(N) = T_ref / T(N)`` with ``T_ref`` the
one-worker iteration (no communication) of the same schedule; the ideal
("optimal line") is 1.  A "12-14 % higher" efficiency is read as a difference
of percentage points (pp) of E.

Nothing is calibrated: with no absolute number in the text there is no
baseline row to fit.  Everything is an a-priori prediction at N = 8, run
twice: communication every step (interval 1) and every 42 accumulated steps
(Table 1's interval).  AllReduce with accumulation is composed from simulated
parts: ``T = ((I-1) T_local + T_allreduce) / I`` with ``T_local`` the
forward+backward-only step that the gossip strategies simulate.
"""

from __future__ import annotations

from simcomm.scenario import Scenario, StackSpec
from simcomm.validation._sim import simulate
from simcomm.validation.base import CaseResult, Row, case

PAPER = "seed 001 (Yeo et al., Crossover-SGD), Fig. 11 and Sec. 4.3"
NODES, BATCH, INTERVAL = 8, 256, 42
WHERE = "Sec. 4.3 (Fig. 11)"
#: the text's claims, in percentage points of time efficiency (midpoints of the printed ranges)
REPORTED = {"gossip_gain": 13.0, "sgp_over_crossover": 1.5}


def _trace():
    from simcomm.traces.synth import synth_trace

    # Table 1: 256 per node, mixed precision; fp16 parameters and gradients on the wire (Apex O2-style)
    return synth_trace("resnet50", "t4", batch=BATCH, dtype="fp16")


def _run(trace, strategy: str, nodes: int, options: dict):
    scn = Scenario(strategy=strategy, nodes=nodes, gpus_per_node=1, cluster="aws-g4dn", batch=BATCH,
                   stack=StackSpec("mpi-tcp"), options=options)
    return simulate(scn, trace=trace)


def efficiencies(trace, interval: int, nodes: int = NODES) -> dict[str, float]:
    """Time efficiency (0..1) per method at ``nodes`` workers, communication every ``interval`` steps."""
    gossip = {"sgp": ("sgp", {}), "crossover-sgd": ("crossover-sgd", {}),
              "crossover-sgd-overlap": ("crossover-sgd", {"overlap": "compute"}),
              "hier-fixed-groups": ("hierarchical-crossover-sgd", {"groups": 2}),
              "hier-fixed-size": ("hierarchical-crossover-sgd", {"groups": nodes // 2})}
    times = {k: _run(trace, s, nodes, {**o, "interval": interval}) for k, (s, o) in gossip.items()}
    ar_n, ar_1 = _run(trace, "allreduce", nodes, {}).mean_s, _run(trace, "allreduce", 1, {}).mean_s
    if interval > 1:
        local = next(k.time_s for k in times["sgp"].kinds if k.weight > 1)  # forward+backward only
        ar_n = ((interval - 1) * local + ar_n) / interval
        ar_1 = ((interval - 1) * local + ar_1) / interval
    out = {k: ar_1 / r.mean_s for k, r in times.items()}
    out["allreduce"] = ar_1 / ar_n
    return out


def _pp(x: float) -> float:
    return 100.0 * x


@case("seed001-time-efficiency", summary="gossip vs AllReduce time efficiency on AWS g4dn (T4, 3 125 Mb/s)",
      reference=PAPER)
def run() -> CaseResult:
    trace = _trace()
    eff = {i: efficiencies(trace, i) for i in (1, INTERVAL)}
    rows = []
    for i, e in eff.items():
        tag = f"interval {i}"
        rows += [
            Row(f"{tag}: SGP - AllReduce efficiency", REPORTED["gossip_gain"], _pp(e["sgp"] - e["allreduce"]), "pp",
                "prediction", WHERE, "paper: 12-14 % for both gossip methods"),
            Row(f"{tag}: Crossover-SGD - AllReduce efficiency", REPORTED["gossip_gain"],
                _pp(e["crossover-sgd"] - e["allreduce"]), "pp", "prediction", WHERE,
                "paper: 12-14 % for both gossip methods"),
            Row(f"{tag}: SGP - Crossover-SGD efficiency", REPORTED["sgp_over_crossover"],
                _pp(e["sgp"] - e["crossover-sgd"]), "pp", "prediction", WHERE, "paper: 1-2 %"),
        ]
    e1 = eff[1]
    rows += [
        Row("interval 1: hierarchical (2 groups) below AllReduce", 1.0,
            float(e1["hier-fixed-groups"] < e1["allreduce"]), "bool", "prediction", WHERE, "fixed number of groups"),
        Row("interval 1: hierarchical (groups of 2) above AllReduce", 1.0,
            float(e1["hier-fixed-size"] > e1["allreduce"]), "bool", "prediction", WHERE, "fixed group size"),
    ]
    absolute = "; ".join(f"interval {i}: " + ", ".join(f"{k} {_pp(v):.1f} %" for k, v in sorted(e.items()))
                         for i, e in eff.items())
    e42 = eff[INTERVAL]
    return CaseResult(
        name="seed001-time-efficiency", title="Gossip vs AllReduce time efficiency (Fig. 11)", paper=PAPER,
        setup=(f"{NODES} AWS g4dn.2xlarge instances x 1 T4 (aws-g4dn preset), up to 3 125 Mb/s Ethernet",
               f"ResNet-50, {BATCH} images per worker per step, mixed precision (Table 1)",
               "SGP on the directed exponential graph, Crossover-SGD with segments overlapped (Alg. 1), "
               "hierarchical Crossover-SGD with 2 groups (fixed count) and groups of 2 (fixed size)",
               "time efficiency E(N) = T(1 worker) / T(N); gaps in percentage points of E"),
        assumptions=(f"{NODES} workers: Fig. 11's x-axis is not in the text; 86 016 = 256 x 42 x 8 "
                     "suggests 8 worker processes",
                     "T4 roofline compute in fp16, batch 256 (Table 1); fp16 parameters and gradients on the wire",
                     "MPI over TCP stack (OpenMPI 3.1): 40 % of line rate, 40 us per message (docs/strategies.md)",
                     "no data-loading term: the paper gives no time to calibrate it on (it would shrink every gap)",
                     "AllReduce overlapped with backward (Apex DDP); gossip exchange as each strategy documents",
                     f"interval {INTERVAL} rows: every method accumulates {INTERVAL - 1} forward+backward steps "
                     "and communicates on the last"),
        calibrated=(), rows=tuple(rows),
        findings=(
            f"absolute efficiencies at N={NODES}: {absolute}",
            f"interval {INTERVAL} (Table 1's setting) leaves communication at most "
            f"{_pp(1 - min(e42.values())):.1f} % of any method's time, so no 12-14 pp gap can appear; the "
            "claimed gap needs communication every step, so Fig. 11 was most likely run without accumulation",
            "crossover-sgd's default (overlap=none) posts its segment exchange after the local update and waits "
            "before the next step, as the published code does (the paper's conclusion lists overlapping it with "
            "backward as future work); sgp hides its exchange behind forward+backward. With overlap=compute "
            "crossover-sgd's efficiency at interval 1 is "
            f"{_pp(eff[1]['crossover-sgd-overlap']):.1f} % against SGP's {_pp(eff[1]['sgp']):.1f} %, the 1-2 % "
            "gap the paper measures is thus consistent with an overlapped exchange; it is shown as a finding, "
            "not a prediction, because the paper does not say which variant Fig. 11 ran",
            "the hierarchical claims fail for the same reason plus the serial group reduce and broadcast; with "
            "one GPU per instance the groups' reduce and broadcast cross the 3 125 Mb/s network",
            "SGP - AllReduce is over-predicted: with no data-loading term and a 40 %-of-line TCP stack, the "
            "exposed all-reduce is larger than the paper's; a blocking loader of d seconds turns E into "
            "(T1 + d)/(TN + d) and shrinks the gap, but the paper gives no number to fit d on"),
        method=("E(N) = T_ref / T(N), T_ref = one worker's iteration (forward, backward, update; no "
                "communication); gap = 100 (E_a - E_b) in pp",
                "allreduce: bucketed ring/tree all-reduce of the gradients overlapped with backward",
                "sgp: T = max(t_fwd + t_bwd, α + (|θ| + w)β) + t_update: one model to one peer on the "
                "directed exponential graph, posted at the start of the iteration",
                "crossover-sgd: T = t_fwd + t_bwd + t_update + max_s(α + |θ_s|β) with all S segment "
                "flows sharing the NIC, then averaging",
                "hierarchical-crossover-sgd: T = t_fwd + t_bwd + T_reduce(L) + t_update + T_crossover(G) + "
                "T_bcast(L) for G groups of L workers",
                "interval I: ((I-1) T_local + T_comm-step) / I for every method, T_local = t_fwd + t_bwd"),
        fidelity="flow")

"""``pcnn`` and ``pcnn-no-overlap``: communication-efficient gradient averaging (Lee et al., seed 003).

Fully-connected layer (N outputs, N' inputs, global batch K over P ranks):
all-to-all of the input activations (each rank keeps N'/P rows for all K
samples; posted during forward), all-gather of the errors (N x K; posted
during backward), local partial gradient N x N'/P for all K samples, update
of that 1/P slice, all-gather of the updated parameters (posted in forward
order, so it hides behind the next forward).  Eqs. 5-8::

    T_f = 3(P-1)α + (N'K/P² + NK/P + NN'/P)(P-1)β

cheaper than Rabenseifner's all-reduce (Eq. 10, 2(P-1)/P·NN'β) exactly when
``N'K/P + NK < NN'`` (Eq. 11).  Convolution layers (and everything that is
not fully connected): all-to-all of D/P x F gradient slices, local sum (γ),
slice update, all-gather of parameters; Eq. 12
``T_c = 2(P-1)α + 2(DF/P)(P-1)β``.

``pcnn`` overlaps as the paper's Fig. 4: one communication-dedicated thread
per node calling *blocking* MPI (Sec. 4-A), so a rank's collectives run one at
a time in posting order (one ``comm`` stream per rank, FIFO; seed-code-facts
C9).  ``pcnn-no-overlap`` blocks compute on every communication, so compute
and communication are fully serialised (the same messages; its iteration is
the sum of both).  The plan is one steady-state iteration: the parameter
all-gathers of the previous iteration open it.  They are posted in forward
order while updates run in backward order (Sec. 3-D-1), so the first one (unit
0, updated last) cannot start before the previous iteration's last update:
opening the iteration with them is exact, not an approximation.  Each unit's
forward waits for its own.  Strong scaling: K = 256 global, K/P per rank
(Sec. 5).  Non-FC layers are grouped into units at the workload's bucket
boundaries to keep plans small.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.errors import ConfigError, PlanError
from simcomm.ops import PlanBuilder
from simcomm.strategies._fold import fold_plan
from simcomm.strategies.base import NotApplicable, Strategy, register

FC_TYPES = ("linear", "dense", "fc", "fullyconnected", "innerproduct")


def fc_criterion(n: float, n_prev: float, k: float, p: float) -> bool:
    """Seed 003 Eq. 11: PCNN's FC bandwidth term beats Rabenseifner's all-reduce."""
    return n_prev * k / p + n * k < n * n_prev


def pcnn_fc_cost(n, n_prev, k, p, alpha, beta) -> float:
    """Seed 003 Eq. 8 (= Eqs. 5 + 6 + 7), β per element."""
    return 3 * (p - 1) * alpha + (n_prev * k / p ** 2 + n * k / p + n * n_prev / p) * (p - 1) * beta


def pcnn_conv_cost(elements, p, alpha, beta) -> float:
    """Seed 003 Eq. 12 with DF = ``elements``."""
    return 2 * (p - 1) * alpha + 2 * elements / p * (p - 1) * beta


def rabenseifner_cost(elements, p, alpha, beta) -> float:
    """Seed 003 Eq. 10."""
    return 2 * math.log2(p) * alpha + 2 * (p - 1) / p * elements * beta


def fc_volume_ratio(n, n_prev, k, p) -> float:
    """Words an FC layer's all-reduce moves over the words PCNN moves (Eq. 10 over Eq. 8, bandwidth terms).

    ``2NN' / (N'K/P + NK + NN')``: PCNN also all-gathers the updated parameters (Eq. 7), so the
    ratio stays below 2 however small N'K/P + NK is; > 1 exactly when Eq. 11 holds.
    """
    return rabenseifner_cost(n * n_prev, p, 0.0, 1.0) / pcnn_fc_cost(n, n_prev, k, p, 0.0, 1.0)


@dataclass(frozen=True)
class PCNNParams:
    """Options of ``pcnn``."""

    error_fraction: float = 0.5  # share of an FC layer's backward that computes errors

    def __post_init__(self):
        if not (isinstance(self.error_fraction, (int, float)) and 0 <= self.error_fraction <= 1):
            raise ConfigError(f"error-fraction: {self.error_fraction!r} must be in [0, 1]")

    @property
    def assumed(self) -> tuple[str, ...]:
        out = ["non-FC layers grouped into units at the workload's bucket boundaries (--bucket-mb; the authors' "
               "code posts one all-to-all per conv layer as backward produces it: a bucket smaller than a layer, "
               "e.g. --bucket-mb 0.001, gives that, at many more collectives; a model under one bucket runs as one "
               "unit after the whole backward, with no overlap)",
               "parameter all-gathers of the previous iteration open the plan (steady state)",
               "one communication thread per node, blocking MPI: collectives run FIFO in posting order"]
        if self.error_fraction == 0.5:
            out.append("FC backward split 1/2 errors, 1/2 weight gradient (equal GEMM FLOPs)")
        return tuple(out)


def is_fc(layer) -> bool:
    return layer.module_type.lower().replace("_", "") in FC_TYPES


def units_of(w) -> list[tuple[str, tuple[int, ...]]]:
    """("fc", (i,)) per FC layer and ("conv", run) per run of other layers within one bucket."""
    bucket_of = {j: i for i, bk in enumerate(w.buckets) for j in bk}
    out: list[tuple[str, tuple[int, ...]]] = []
    cur: list[int] = []
    for i, layer in enumerate(w.layers):
        if is_fc(layer):
            if cur:
                out.append(("conv", tuple(cur)))
                cur = []
            if not (layer.input_shape and layer.output_shape):
                raise PlanError(f"pcnn: layer {layer.name!r} has no activation shapes (N, N'); "
                                "use a trace captured with input/output shapes")
            out.append(("fc", (i,)))
        else:
            if cur and bucket_of.get(cur[-1]) != bucket_of.get(i):
                out.append(("conv", tuple(cur)))
                cur = []
            cur.append(i)
    if cur:
        out.append(("conv", tuple(cur)))
    return out


def plan_pcnn(w, topology, p: PCNNParams, overlap: bool):
    n = w.n_ranks
    if n < 2:
        raise NotApplicable("pcnn needs at least 2 ranks")
    units = units_of(w)
    return fold_plan(w, n, lambda b: _emit_pcnn(b, w, topology, p, overlap, units))


def _emit_pcnn(b: PlanBuilder, w, topology, p: PCNNParams, overlap: bool, units):
    n = w.n_ranks
    ranks = list(range(n))
    nbytes = [sum(w.layers[i].grad_bytes for i in idx) for _, idx in units]
    fwd_s = [sum(w.layers[i].forward_s for i in idx) for _, idx in units]
    bwd_s = [sum(w.layers[i].backward_s for i in idx) for _, idx in units]
    upd_s = [sum(w.layers[i].update_s for i in idx) for _, idx in units]
    last_comm: list[int] = []  # no-overlap: compute waits for the latest communication

    def comm(kind, size, after, label):
        cid = b.collective(kind, ranks, size, after=after, label=label)
        last_comm[:] = [cid]
        return cid

    scale = [w.scale(r) for r in ranks]  # (read once: the loops below run units x ranks times)

    def comp(r, secs, after=(), label="", category="compute"):
        extra = last_comm if not overlap else []
        return b.compute(r, secs * scale[r], after=list(after) + extra, label=label, category=category)

    ag = {u: comm("allgather", nbytes[u], (), f"params allgather[{u}]") for u in range(len(units)) if nbytes[u] > 0}
    all_ag = list(ag.values())
    load = {}
    if w.dataload_s > 0:
        stream = "data" if w.dataload_overlap else "compute"
        load = {r: b.compute(r, w.dataload_s, label="dataload", stream=stream, category="dataload") for r in ranks}
    a2a, agerr, a2ag = {}, {}, {}
    inputs_ready = [load[r] for r in ranks if r in load]  # ops after which a unit's input activations exist
    for u, (kind, idx) in enumerate(units):
        if kind == "fc":
            # Sec. 3-D-1: the all-to-all is posted "once the activations are ready", i.e. the layer's
            # *input* activations (N' x K/P), which exist before the layer's own forward runs
            layer = w.layers[idx[0]]
            a2a[u] = comm("alltoall", math.prod(layer.input_shape) * w.batch * w.dtype_bytes, inputs_ready,
                          f"activations alltoall[{u}]")
        ops = []
        first = ([ag[u]] if u in ag else []) if overlap else all_ag if u == 0 else []
        label = f"forward[{u}]"
        for r in ranks:
            after = first + [load[r]] if u == 0 and r in load else first
            ops.append(comp(r, fwd_s[u], after, label))
        inputs_ready = ops
    for u in reversed(range(len(units))):
        kind, idx = units[u]
        frac = p.error_fraction if kind == "fc" else 1.0
        label = f"backward[{u}]"
        ops = [comp(r, bwd_s[u] * frac, (), label) for r in ranks]
        if kind == "fc":
            layer = w.layers[idx[0]]
            agerr[u] = comm("allgather", math.prod(layer.output_shape) * w.batch * n * w.dtype_bytes, ops,
                            f"errors allgather[{u}]")
        elif nbytes[u] > 0:
            a2ag[u] = comm("alltoall", nbytes[u], ops, f"gradient alltoall[{u}]")
    gamma = topology.gammas()  # (each rank's topology.gamma(r), read once)
    for u in reversed(range(len(units))):
        kind, _ = units[u]
        partial, local, update = f"partial gradient[{u}]", f"local sum[{u}]", f"slice update[{u}]"
        for r in ranks:
            if kind == "fc":
                comp(r, bwd_s[u] * (1 - p.error_fraction), [a2a[u], agerr[u]], partial)
            elif u in a2ag:
                b.compute(r, float(gamma[r]) * nbytes[u] * (n - 1) / n,
                          after=[a2ag[u]] + (last_comm if not overlap else []), label=local, category="update")
            comp(r, upd_s[u] / n, (), update, category="update")
    fc = sum(1 for k, _ in units if k == "fc")
    return b.build(kind="pcnn" if overlap else "pcnn (no overlap)", units=len(units), fc_layers=fc)


@register
class PCNN(Strategy):
    """Seed 003's gradient averaging with its overlapping strategy."""

    name = "pcnn"
    summary = "FC: all-to-all activations + all-gather errors; conv: all-to-all slices; overlapped (seed 003)"
    reference = "Lee et al., Communication-efficient parallelization strategy for deep CNN training, 2018 (seed 003)"
    Params = PCNNParams
    paper_baseline = ("allreduce", (("overlap", "backward+forward"),),
                      "seed 003's allreduce baseline: gradients all-reduced as backward produces them, the next "
                      "forward waiting per layer (Intel-Caffe style)")

    overlap = True

    def plan(self, workload, topology):
        return plan_pcnn(workload, topology, self.params, self.overlap)


@register
class PCNNNoOverlap(PCNN):
    """Seed 003's gradient averaging with every communication blocking."""

    name = "pcnn-no-overlap"
    summary = "PCNN's gradient averaging with no computation/communication overlap (seed 003)"
    overlap = False

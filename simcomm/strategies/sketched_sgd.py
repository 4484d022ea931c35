"""``sketched-sgd``: Sketched-SGD with a parameter server (Ivkin et al., NeurIPS 2019), seed 002's baseline.

Pattern (seed-code-facts C8): every worker sends its Count-Sketch to the
server (incast of P-1 sketches: O(P·log d), S2:L51, L203), the server sums them
and runs HEAVYMIX, asks every worker for the exact values at the k chosen
coordinates (the second round: k indices out, k values back), sums those, and
sends the sparse update (k values + indices) to every worker.  The server is a
training rank (``server``, default rank 0).  Sketches are sized as gs-SGD's
(O(log d) counters, :func:`simcomm.strategies.gs_sgd.sketch_dims`).

Closed form (server link the bottleneck, no overlap at the server):
``t ≈ 4α + (P-1)(S + k·4 + k·dtype + k·(dtype+4))β`` — O(P·log d), seed 002.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.strategies._fold import builder_for
from simcomm.strategies._gossip import check_int
from simcomm.strategies._sparse import INDEX_BYTES, emit_compute_phase, emit_updates, entry_bytes, rate
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.gs_sgd import SketchParams, sketch_shape


@dataclass(frozen=True)
class SketchedParams(SketchParams):
    """Options of ``sketched-sgd``: the sketching ones plus the server rank."""

    server: int = 0

    def __post_init__(self):
        super().__post_init__()
        check_int("server", self.server, 0)

    @property
    def assumed(self) -> tuple[str, ...]:
        out = list(super().assumed)
        if self.server == 0:
            out.append("parameter server co-located with training rank 0")
        return tuple(out)


@register
class SketchedSGD(Strategy):
    """Sketches to one server, HEAVYMIX there, second round, sparse broadcast."""

    name = "sketched-sgd"
    summary = "count-sketches to a parameter server, HEAVYMIX, second round, sparse update to workers"
    reference = "Ivkin et al., Communication-efficient distributed SGD with sketching, NeurIPS 2019; seed 002"
    Params = SketchedParams
    paper_baseline = ("gtopk", (), "seed 002 compares the sketching methods with gTop-k (Table II)")
    wire_dtypes = ("fp32", "fp64")  # Count-Sketch counters sum many gradients: kept fp32 as in seed 002

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        if n < 2:
            raise NotApplicable("sketched-sgd needs at least 2 ranks")
        if p.server >= n:
            raise ConfigError(f"server: rank {p.server} is outside the {n} training ranks")
        d, k, rows, cols, sbytes = sketch_shape(w, p)
        s = p.server
        workers = [r for r in range(n) if r != s]
        b = builder_for(w, n)
        ready = emit_compute_phase(b, w, lambda r: d * rows * rate(w, "sketch", p.elem_s) * w.scale(r),
                                   "sketch")
        ins = [b.transfer(r, s, sbytes, after=[ready[r]], label="sketch to server") for r in workers]
        total = b.compute(s, topology.gamma(s) * sbytes * len(workers), after=ins + [ready[s]],
                          label="sum sketches", category="compression")
        hm = b.compute(s, d * rows * rate(w, "query"), after=[total], label="heavymix",
                       category="compression")
        vals = []
        for r in workers:
            ask = b.transfer(s, r, k * INDEX_BYTES, after=[hm], label="request top-k", stream=f"to{r}")
            vals.append(b.transfer(r, s, k * w.dtype_bytes, after=[ask], label="top-k values"))
        acc = b.compute(s, k * len(workers) * rate(w, "accumulate"), after=vals, label="sum values",
                        category="compression")
        back = {r: b.transfer(s, r, k * entry_bytes(w), after=[acc], label="sparse update", stream=f"to{r}")
                for r in workers}
        back[s] = acc
        emit_updates(b, w, lambda r: [back[r]])
        return b.build(kind="sketch to server", k=k, sketch_bytes=sbytes,
                       assumed=(f"k = {k} of d = {d}; sketch {rows} x {cols} = {rows * cols} counters "
                                f"({sbytes / 1e3:.4g} kB)",))

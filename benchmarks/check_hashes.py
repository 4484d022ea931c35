"""Exactness you can rerun: SHA-256 digests of every engine run of a fixed set of check scenarios.

Each scenario (``--list``) is a flat scenario (the keys of ``simcomm run``) run as ``simcomm run`` runs it,
through :func:`simcomm.pipeline.simulate` without a baseline.  Every call into the engine
(:func:`simcomm.engine.simulate`: the strategy's flow or analytic run of each kind of iteration, and the
analytic estimate beside a flow run) is recorded, and the scenario's digest is the SHA-256 of, per engine run
in call order, the fidelity, the makespan, every op's start and end (the float64 bytes of the arrays), the
bytes per link family, and the whole ``meta`` (statistics, the collective algorithms that ran, link usage and
busiest links where asked), followed by the numbers of the Result (each kind's time, breakdown, link bytes,
analytic estimate, rank mean, busiest links and exposed split; the mean, epoch and samples per second).
Floats enter as ``float.hex`` (arrays as their IEEE-754 bytes), so a change of one ulp anywhere changes the
digest; words the pipeline adds (``assumed:`` lines) and the engine paths a run took (``Timeline.paths``,
each kind's ``engine``: the reference paths change them by design) do not enter.  The digests live in
``benchmarks/hashes.json`` (name -> digest, sorted keys).

    python benchmarks/check_hashes.py                 # compare: exit 1 naming each differing scenario
    python benchmarks/check_hashes.py --update        # rewrite hashes.json (says how many changed)
    python benchmarks/check_hashes.py --list          # the scenarios
    python benchmarks/check_hashes.py --references    # every reference path against the default, per scenario
    python benchmarks/check_hashes.py --only megatron  # scenarios whose name contains a word

The rank fold (``simcomm.strategies._fold``: identical ranks' computes planned once) is a fast path of planning;
its reference is the scenario key ``fold_ranks = "off"`` (every rank planned).  A folded scenario names its twin
(:attr:`Case.twin`: at 2 048 ranks, where ``auto`` folds, the same scenario with ``fold_ranks = "off"``; on the
NCCL cluster, each seed strategy with ``fold_ranks = "on"`` against its ``/nccl/flow/exact``), and every run of
the check compares the two bit for bit on what a fold keeps (:attr:`Outcome.kept`: every collective and message
and the computes of rank 0 and the servers, each run's makespan, bytes and ``meta``, the Result's numbers).  A
difference fails the check and blocks ``--update``; so does a folded scenario that folds nothing.

An ``--update`` is legitimate only for a deliberate change of the model (a strategy's plan, a cost, a
default), stated in its commit; a speed-up of the engine must leave every digest as it was
(docs/engine.md, "Exactness check").

Reference paths (``--references``; tests/engine/test_check_hashes.py flips each on a subset).  Every fast path
of the engine has a reference that turns it off, one name in ``EngineOptions.reference``
(:data:`simcomm.engine.paths.REFERENCES`; :func:`simcomm.engine.paths.choose` decides the paths of every run
and ``Timeline.paths`` records them).  Those exact by design must give every digest bit for bit:

=============  ======================================================  ==========================================
name           switch                                                  what it turns off
=============  ======================================================  ==========================================
direct         ``EngineOptions(reference={"direct"})``                 the direct loop of plans of computes and
                                                                       messages (SimPy's queue instead)
callbacks      ``reference={"callbacks"}``                             callbacks and ``Driver`` (one SimPy
                                                                       process per stream and collective)
scalar         ``reference={"scalar"}``                                the fluid core's scalar twin for few
                                                                       flows (numpy arrays throughout)
lean           ``reference={"lean"}``                                  the scalar twin's lean form for disjoint
                                                                       routes (the general scalar form)
max-live-2,    ``EngineOptions(max_live=2)`` or ``64`` (default 16)    where the core moves between its scalar
max-live-64                                                            twin and its arrays
no-keep        ``reference={"keep"}``                                  collective preparations kept with the
                                                                       topology for later runs
no-shapes      ``reference={"shapes"}``                                one preparation for groups the runtime
                                                                       places alike (NCCL: alike machines), one
                                                                       isolated run for alike disjoint steps
no-alike-      ``reference={"alike_steps"}``                           a group's steps taken from an alike group's
steps                                                                  derivation (each group's derived anew)
event-loop     ``reference={"one_pass"}``                              the analytic one pass (``longest_path``;
                                                                       the event loop instead)
no-local-      ``reference={"local_collectives"}``                     machine-local collectives on the direct
collectives                                                            loop (the callbacks driver instead)
no-rounds      ``reference={"rounds"}``                                the direct loop's message rounds (one
                                                                       stream at a time instead)
no-sparse-     ``reference={"sparse_links"}``                          the fluid core's updates of an event's few
links                                                                  links alone (an array over every link)
=============  ======================================================  ==========================================

Exact in the model but not in floats, so compared to a relative 1e-9 on every start, end and makespan at
resolution 0 (at 1 % they may merge other completions, docs/engine.md, "Per-link reservations"); their
statistics differ by design (solves, coalesced steps):

=============  ======================================================  ==========================================
name           switch                                                  what it turns off
=============  ======================================================  ==========================================
per-link       ``reference={"per_link"}``                              reservations of a step's own links (the
                                                                       whole idle network instead)
coalesce       ``reference={"coalesce"}``                              coalesced repeats and scaled steps (with
                                                                       ``stack_cpu`` both ways run every repeat
                                                                       as flows: a reservation has no bytes for
                                                                       the CPU cost to follow)
incremental    ``reference={"incremental"}``                           incremental max-min re-solves and link
                                                                       pruning (the textbook solver)
no-scaling     ``reference={"scaling"}``                               reusing a scalable step's isolated run
                                                                       for another size (run again instead)
closed-steps   ``EngineOptions(closed_steps=1)``: the other way round  the fluid run of a step of one size per
               (the default prices only steps of at least 2^16         link (every such step priced alone by its
               transfers by their closed form;                         closed form instead; docs/engine.md,
               ``reference={"closed_steps"}`` turns it off)            "Steps of one size per link")
=============  ======================================================  ==========================================

Not references, so not flipped: ``resolution`` (an approximation with its own bound and tests),
``analytic.PAIR_LIMIT`` (samples the pairs of huge schedules: another answer), ``fluid._REFRESH`` (a full
re-solve every 64 to stop rounding drift: another rounding), the tolerances ``TIME_TOL``, ``REL_TOL``,
``_CPU_TOL``/``_CPU_ROUNDS``; and caches without a switch (routes, routed steps per group, analytic pairs),
exact by construction and covered by every digest.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DIGESTS = HERE / "hashes.json"

#: every strategy of ``simcomm list strategies`` but megatron (which has its layouts below)
STRATEGIES = ("allreduce", "crossover-sgd", "dpsgd", "gaussian-k", "gs-sgd", "gtopk", "hierarchical-allreduce",
              "hierarchical-crossover-sgd", "node-based", "ok-topk", "pcnn", "pcnn-no-overlap", "ps",
              "ps-layer-drop", "sgp", "sketched-sgd", "topka")
#: the NCCL cluster: 2 DGX A100 nodes x 8 GPUs on HDR InfiniBand (the preset's stack is NCCL)
NCCL = {"cluster": "dgx-a100-hdr", "nodes": 2}
#: the MPI cluster: seed 001's 4 KISTI Neuron nodes x 2 V100, Open MPI over TCP
MPI = {"cluster": "kisti-neuron", "nodes": 4, "stack": "mpi-tcp"}
#: large-model layouts: GPT-2 small cut to 4 layers, 2 DGX A100 nodes, 64 sequences per iteration
LLM = {**NCCL, "strategy": "megatron", "model": "gpt2-small", "layers": 4, "global_batch": 64, "microbatch": 1}
LAYOUTS = {
    "tp4": {"tp": 4},
    "pp4-1f1b": {"pp": 4},
    "pp4-gpipe": {"pp": 4, "schedule": "gpipe"},
    "tp2-pp2-interleaved": {"tp": 2, "pp": 2, "schedule": "interleaved", "virtual": 2},
    "tp4-sp": {"tp": 4, "sequence_parallel": True},
    "tp2-zero1": {"tp": 2, "zero": 1},
    "tp2-zero3": {"tp": 2, "zero": 3},
    "zero3-hsdp": {"zero": 3, "shard_group": 2},
    "zero3-deepspeed": {"tp": 2, "zero": 3, "framework": "deepspeed"},
    "tp2-cp2-ring": {"tp": 2, "cp": 2},
    "tp2-cp2-ulysses": {"tp": 2, "cp": 2, "cp_kind": "ulysses"},
    "tp2-pp2-recompute-all-replicas": {"tp": 2, "pp": 2, "recompute": "full", "replicas": "all"},
    "ep4-moe": {"model": "mixtral-8x7b", "layers": 2, "tp": 2, "experts_parallel": 4},
}


@dataclasses.dataclass(frozen=True)
class Case:
    """One check scenario: flat scenario keys, and what the run asks of the engine beyond ``simcomm run``."""

    name: str
    flat: dict
    busiest: int = 0  # busiest links reported (``--busiest-links``)
    usage: bool = False  # link usage recorded (what ``--timeline`` asks)
    #: the check scenario whose numbers this one must give bit for bit (the rank fold against every rank planned:
    #: the same scenario with ``fold_ranks = "off"``), compared on :attr:`Outcome.kept`
    twin: str = ""


def cases() -> tuple[Case, ...]:
    """The check scenarios, in a fixed order (their names are the keys of hashes.json)."""
    out = []
    for s in STRATEGIES:
        out += [Case(f"{s}/nccl/flow/exact", {**NCCL, "strategy": s, "resolution": 0.0}),
                Case(f"{s}/nccl/flow/default", {**NCCL, "strategy": s}),
                Case(f"{s}/nccl/analytic", {**NCCL, "strategy": s, "fidelity": "analytic"}),
                Case(f"{s}/mpi/flow/exact", {**MPI, "strategy": s, "resolution": 0.0})]
    for s in ("allreduce", "sgp", "gtopk", "ps"):  # gloo on seed 001's AWS instances
        out.append(Case(f"{s}/gloo/flow/exact", {"cluster": "aws-g4dn", "nodes": 4, "stack": "gloo",
                                                 "strategy": s, "resolution": 0.0}))
    for s in ("allreduce", "pcnn"):  # Cray MPICH on Cori's dragonfly (seed 003)
        out.append(Case(f"{s}/cray-mpich/flow/default", {"cluster": "cori-haswell", "nodes": 8, "strategy": s}))
    for s in ("ps", "ps-layer-drop"):  # seed 004's CPU parameter server on its own machine
        out.append(Case(f"{s}/cpu-ps/flow/exact", {"cluster": "seed004-ps", "nodes": 2, "strategy": s,
                                                   "resolution": 0.0}))
    tree = {**NCCL, "nodes": 8, "gpus_per_node": 2, "topology": "fat-tree", "oversubscription": 4}
    for s in ("allreduce", "crossover-sgd", "hierarchical-allreduce", "ok-topk"):  # contention on the uplinks
        out.append(Case(f"{s}/fat-tree-4to1/flow/exact", {**tree, "strategy": s, "resolution": 0.0}))
    for algo, proto in (("tree", "ll128"), ("ring", "simple"), ("ring", "ll")):
        out.append(Case(f"allreduce/nccl-{algo}-{proto}/flow/exact",
                        {**NCCL, "strategy": "allreduce", "nccl_algo": algo, "nccl_proto": proto, "resolution": 0.0}))
    out += [
        Case("allreduce/dgx1-v100/flow/exact", {"cluster": "dgx1-v100", "nodes": 2, "resolution": 0.0}),
        Case("allreduce/nccl/busiest-links", {**NCCL, "resolution": 0.0}, busiest=3),
        Case("ps/nccl/busiest-links", {**NCCL, "strategy": "ps", "resolution": 0.0}, busiest=3),
        Case("allreduce/nccl/link-usage", {**NCCL, "resolution": 0.0}, usage=True),
        Case("sgp/nccl/link-usage", {**NCCL, "strategy": "sgp"}, usage=True),
        Case("allreduce/mpi/comm-cpu", {**MPI, "stack_cpu": "25ns", "resolution": 0.0}),
        Case("sgp/mpi/comm-cpu", {**MPI, "strategy": "sgp", "stack_cpu": "25ns"}),
        Case("allreduce/nccl/compute-jitter", {**NCCL, "compute_jitter": 0.1}),
        Case("node-based/nccl/straggler", {**NCCL, "strategy": "node-based", "straggler_scale": 1.5,
                                            "resolution": 0.0}),
    ]
    for name, opts in LAYOUTS.items():
        flat = {**LLM, **opts}
        out += [Case(f"megatron-{name}/nccl/flow/exact", {**flat, "resolution": 0.0}),
                Case(f"megatron-{name}/nccl/flow/default", flat),
                Case(f"megatron-{name}/nccl/analytic", {**flat, "fidelity": "analytic"})]
    out += [Case("megatron-tp2-pp2-interleaved/nccl/link-usage", {**LLM, **LAYOUTS["tp2-pp2-interleaved"]},
                 usage=True),
            Case("megatron-tp2-zero1/mpi/flow/exact", {**LLM, **MPI, "tp": 2, "zero": 1, "resolution": 0.0})]
    return tuple(out) + fold_cases()


#: the exact rank fold's scale: 256 DGX A100 nodes x 8 = 2 048 training ranks (FOLD_RANKS, where ``auto`` folds),
#: training a 4-layer RNN so that every rank planned (the reference) stays cheap
FOLD = {"cluster": "dgx-a100-hdr", "nodes": 256, "model": "rnn-mnist"}
#: (strategy, resolution) at FOLD: collectives only; a tree of messages; messages and the direct loop; at 1 %
#: (merged completions) and exact.  (Servers, never folded, are checked at 16 ranks: ps, ps-layer-drop; ps at
#: 2 048 ranks would double the time --references takes over these scenarios.)
FOLD_STRATEGIES = (("allreduce", 0.0), ("gtopk", None), ("dpsgd", 0.0))


def fold_cases() -> tuple[Case, ...]:
    """The rank fold (``fold_ranks``) against every rank planned: each folded scenario has its twin, fold off.

    At 2 048 ranks ``auto`` folds, and the twin gives ``fold_ranks = "off"``; on the NCCL cluster (16 ranks)
    every seed strategy forces the fold ``on`` and its twin is the strategy's ``/nccl/flow/exact`` scenario
    (``auto``: not folded at 16 ranks).  Both sides keep their own digest; the twin check compares them.
    """
    out = []
    for s, res in FOLD_STRATEGIES:
        tail = "flow/exact" if res == 0.0 else "flow/default"
        flat = {**FOLD, "strategy": s, **({} if res is None else {"resolution": res})}
        out += [Case(f"{s}/2048-ranks/{tail}", flat, twin=f"{s}/2048-ranks-fold-off/{tail}"),
                Case(f"{s}/2048-ranks-fold-off/{tail}", {**flat, "fold_ranks": "off"})]
    for s in STRATEGIES:
        out.append(Case(f"{s}/nccl-fold-on/flow/exact", {**NCCL, "strategy": s, "resolution": 0.0, "fold_ranks": "on"},
                        twin=f"{s}/nccl/flow/exact"))
    return tuple(out)


# ---- hashing ---------------------------------------------------------------------------------------------

#: fields of the Result's records that are words about the run, not its numbers: the engine paths it took
#: (``IterationKind.engine``, ``Timeline.paths``), which each reference path changes by design
NOT_HASHED = frozenset({"engine"})


def _canon(x, out: list) -> None:
    """Append a canonical text of ``x`` to ``out``: floats as ``float.hex``, float arrays as their bytes."""
    if x is None or isinstance(x, (bool, np.bool_)):
        out.append(repr(bool(x)) if x is not None else "N")
    elif isinstance(x, (int, np.integer)):
        out.append(f"i{int(x)}")
    elif isinstance(x, (float, np.floating)):
        out.append("f" + float(x).hex())
    elif isinstance(x, str):
        out.append("s" + repr(x))
    elif isinstance(x, np.ndarray):
        a = np.ascontiguousarray(x, dtype="<f8" if x.dtype.kind == "f" else "<i8")
        out.append(f"a{a.dtype.str}{a.shape}" + hashlib.sha256(a.tobytes()).hexdigest())
    elif isinstance(x, dict):
        out.append("{")
        for k in sorted(x, key=repr):
            _canon(k, out)
            _canon(x[k], out)
        out.append("}")
    elif isinstance(x, (list, tuple)):
        out.append("[")
        for v in x:
            _canon(v, out)
        out.append("]")
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        out.append(type(x).__name__ + "(")
        for f in dataclasses.fields(x):
            if f.name in NOT_HASHED:
                continue
            _canon(getattr(x, f.name), out)
        out.append(")")
    else:
        raise TypeError(f"check_hashes: cannot hash a {type(x).__name__}")


def run_digest(tl, ops=None) -> str:
    """Digest of one engine run: fidelity, makespan, starts, ends, bytes per link family, meta.

    ``ops``: the op ids whose starts and ends enter (None: every op).
    """
    out: list = []
    start, end = (tl.start, tl.end) if ops is None else (tl.start[ops], tl.end[ops])
    _canon([tl.fidelity, tl.makespan, start, end, tl.link_class_bytes, tl.meta], out)
    return hashlib.sha256("\x1f".join(out).encode()).hexdigest()


def kept_ops(plan, n_train: int):
    """The ids of the ops a rank fold keeps, in op order: every collective and message, and the computes of
    rank 0 and of ranks that do not train (servers).  A folded plan and its full twin emit these in the same
    order (the fold only leaves out computes of training ranks 1 ...), so their times pair up one to one."""
    from simcomm.ops import Compute

    return np.array([op.id for op in plan.ops if not (isinstance(op, Compute) and 0 < op.rank < n_train)],
                    dtype=np.int64)


#: the Result's numbers (its words, options and ``assumed:`` lines are the pipeline's, not the engine's)
RESULT_FIELDS = ("kinds", "mean_s", "breakdown", "link_bytes", "analytic_mean_s", "epoch_s", "samples_per_s",
                 "rank_mean_s", "busiest_links", "exposed_by")


@dataclasses.dataclass
class Outcome:
    """One scenario's engine runs (their digests and timelines) and its digest.

    ``kept``: the digest of what a rank fold keeps (each run's digest over :func:`kept_ops` only, and the Result's
    numbers), which a folded scenario and its twin share bit for bit.
    """

    runs: list
    timelines: list
    digest: str
    kept: str = ""
    folded: int = 0  # computes the plans folded onto rank 0 (plan.meta["folded_computes"])


@contextlib.contextmanager
def recording(runs: list, adjust: Callable | None = None, plans: list | None = None) -> Iterator[None]:
    """Record every :func:`simcomm.engine.simulate` call's Timeline into ``runs`` (``adjust`` may rewrite a call)
    and, when given ``plans``, its plan."""
    import simcomm.engine as engine

    real = engine.simulate

    def simulate(plan, topology, **kwargs):
        tl = adjust(real, plan, topology, kwargs) if adjust else real(plan, topology, **kwargs)
        runs.append(tl)
        if plans is not None:
            plans.append(plan)
        return tl

    engine.simulate = simulate
    try:
        yield
    finally:
        engine.simulate = real


def run_case(case: Case, adjust: Callable | None = None) -> Outcome:
    """Run ``case`` as ``simcomm run`` would, recording every engine run, and digest it."""
    from simcomm import pipeline
    from simcomm.scenario import from_flat

    timelines: list = []
    plans: list = []
    with recording(timelines, adjust, plans):
        result = pipeline.simulate(from_flat(case.flat), baseline=False, busiest_links=case.busiest,
                                   on_timeline=(lambda *a: None) if case.usage else None)
    if result.not_applicable or not timelines:
        raise SystemExit(f"error: check scenario {case.name} ran no engine run ({result.not_applicable})")
    numbers = [getattr(result, f) for f in RESULT_FIELDS]
    runs = [run_digest(tl) for tl in timelines]
    kept = ""
    if twinned(case.name):
        kept = _digest([[run_digest(tl, kept_ops(plan, result.n_ranks)) for tl, plan in zip(timelines, plans,
                                                                                             strict=True)], numbers])
    folded = sum(int(plan.meta.get("folded_computes", 0)) for plan in plans)
    return Outcome(runs, timelines, _digest([runs, numbers]), kept, folded)


def _digest(x) -> str:
    out: list = []
    _canon(x, out)
    return hashlib.sha256("\x1f".join(out).encode()).hexdigest()


def twinned(name: str) -> bool:
    """Whether check scenario ``name`` has a twin or is one (:attr:`Case.twin`)."""
    return any(name in (c.name, c.twin) for c in cases() if c.twin)


def twin_failures(chosen, outcomes: dict) -> list[str]:
    """One line for each chosen scenario that does not give its twin's numbers (the twin is run if not chosen)."""
    by_name = {c.name: c for c in cases()}
    bad = []
    for case in chosen:
        if not case.twin:
            continue
        if case.twin not in outcomes:
            outcomes[case.twin] = run_case(by_name[case.twin])
        if not outcomes[case.name].folded or outcomes[case.twin].folded:  # else the check compares a plan with itself
            bad.append(f"{case.name}: {'folded nothing' if not outcomes[case.name].folded else 'its twin folded too'} "
                       "(the twin check would compare a plan with itself)")
        elif outcomes[case.name].kept != outcomes[case.twin].kept:
            bad.append(f"{case.name}: differs from {case.twin} (fold_ranks {case.flat.get('fold_ranks', 'auto')} "
                       f"against {by_name[case.twin].flat.get('fold_ranks', 'auto')}: the rank fold changes a float)")
    return bad


# ---- reference paths ---------------------------------------------------------------------------------------

def _split(kwargs: dict):
    """(EngineOptions, other keyword arguments) of one ``simulate`` call."""
    from simcomm.engine import EngineOptions

    kw = dict(kwargs)
    names = {f.name for f in dataclasses.fields(EngineOptions)}
    opts = EngineOptions.of(kw.pop("options", None), **{k: kw.pop(k) for k in list(kw) if k in names})
    return opts, kw


def _options(reference: frozenset = frozenset(), **changes) -> Callable:
    """An ``adjust`` that runs each engine call with ``reference`` added to its references and ``changes``."""
    def adjust(real, plan, topology, kwargs):
        opts, kw = _split(kwargs)
        return real(plan, topology, options=dataclasses.replace(opts, reference=opts.reference | reference,
                                                                **changes), **kw)
    return adjust


@dataclasses.dataclass(frozen=True)
class Reference:
    """A reference path: ``adjust`` rewrites each engine call (its options' ``reference``, ``max_live``).

    ``witness`` names a function (``module:Class.attr`` or ``module.attr``) that is called a different
    number of times on the reference path than on the default one: where the counts differ, the scenario
    took the fast path and the reference really ran something else (not a switch that does nothing).
    """

    name: str
    exact: bool  # bit for bit by design (else: the same in the model, compared to REL_TOL at resolution 0)
    witness: str
    adjust: Callable


REFERENCES = (
    Reference("direct", True, "simcomm.engine.drive.executor._run_direct", _options(frozenset({"direct"}))),
    Reference("callbacks", True, "simcomm.engine.events:Driver.__init__",
              _options(frozenset({"callbacks"}))),
    Reference("scalar", True, "simcomm.engine.fluid.small:SmallFlows.__init__", _options(frozenset({"scalar"}))),
    Reference("lean", True, "simcomm.engine.fluid.lone:LoneFlows.settle_next", _options(frozenset({"lean"}))),
    Reference("max-live-2", True, "simcomm.engine.fluid.core:FluidCore._solve", _options(max_live=2)),
    Reference("max-live-64", True, "simcomm.engine.fluid.core:FluidCore._solve", _options(max_live=64)),
    Reference("no-keep", True, "simcomm.engine.drive.executor._prepare", _options(frozenset({"keep"}))),
    Reference("no-shapes", True, "simcomm.engine.drive.executor._prepare", _options(frozenset({"shapes"}))),
    Reference("no-alike-steps", True, "simcomm.engine.flow.steps.route_step", _options(frozenset({"alike_steps"}))),
    Reference("event-loop", True, "simcomm.engine.flow.analytic.longest_path", _options(frozenset({"one_pass"}))),
    Reference("no-local-collectives", True, "simcomm.engine.flow.pricer:FlowPricer.reserved",
              _options(frozenset({"local_collectives"}))),
    Reference("no-rounds", True, "simcomm.engine.fluid.core:FluidCore.add_messages", _options(frozenset({"rounds"}))),
    Reference("no-sparse-links", True, "simcomm.engine.fluid.core:FluidCore._gone_sparse",
              _options(frozenset({"sparse_links"}))),
    Reference("per-link", False, "simcomm.engine.flow.network:LiveNetwork.hold", _options(frozenset({"per_link"}))),
    Reference("coalesce", False, "simcomm.engine.flow.pricer:FlowPricer._isolated_period",
              _options(frozenset({"coalesce"}))),
    Reference("incremental", False, "simcomm.engine.fluid.core:FluidCore._solve_plain",
              _options(frozenset({"incremental"}))),
    Reference("no-scaling", False, "simcomm.engine.flow.pricer.run_isolated", _options(frozenset({"scaling"}))),
    # the other way round: the default prices steps of 2^16 transfers or more by their closed form, which no
    # check scenario reaches, so every step is forced through it here and compared with the fluid runs
    Reference("closed-steps", False, "simcomm.engine.flow.pricer:FlowPricer._closed_step", _options(closed_steps=1)),
)


@contextlib.contextmanager
def counting(witness: str, calls: list) -> Iterator[None]:
    """Count calls of ``witness`` (see :class:`Reference`) into ``calls[0]`` for the block."""
    import importlib

    module, _, rest = witness.partition(":")
    if not rest:
        module, _, rest = witness.rpartition(".")
    owner, _, attr = rest.rpartition(".")
    target = importlib.import_module(module)
    if owner:
        target = getattr(target, owner)
    real = getattr(target, attr)

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    setattr(target, attr, counted)
    try:
        yield
    finally:
        setattr(target, attr, real)
#: relative tolerance of the references exact in the model only (docs/engine.md: coalesced repeats, per-link
#: reservations and incremental re-solves agree with the plain model to 1e-9)
REL_TOL = 1e-9


def _rel(a, b) -> float:
    """Largest relative difference of two float arrays of one shape (inf when shapes or NaNs differ)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
        return math.inf
    ok = ~np.isnan(a)
    a, b = a[ok], b[ok]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(a == b, 0.0, np.abs(a - b) / np.maximum(np.abs(a), np.abs(b)))
    return float(r.max()) if r.size else 0.0


def check_reference(case: Case, ref: Reference, base: Outcome, base_calls: int) -> tuple[bool, bool, str]:
    """(passed, reached, what was seen) of ``case`` on ``ref`` against its default run ``base``.

    ``base_calls``: calls of the reference's witness in the default run; ``reached`` says the
    reference run called it another number of times (it ran another path).
    """
    calls = [0]
    with counting(ref.witness, calls):
        other = run_case(case, ref.adjust)
    reached = calls[0] != base_calls
    if other.digest == base.digest:
        return True, reached, "bit for bit"
    if ref.exact:
        bad = [i for i, (x, y) in enumerate(zip(base.runs, other.runs, strict=False)) if x != y]
        return False, reached, f"DIFFERS (engine runs {bad or 'count'})"
    worst = math.inf if len(other.timelines) != len(base.timelines) else max(
        max(_rel(x.start, y.start), _rel(x.end, y.end), _rel(x.makespan, y.makespan))
        for x, y in zip(base.timelines, other.timelines, strict=False))
    merges = case.flat.get("fidelity") != "analytic" and case.flat.get("resolution") != 0.0  # (default 1 %)
    if merges:
        return True, reached, f"times within {worst:.2g} (not checked: at resolution > 0 other completions merge)"
    ok = worst <= REL_TOL
    return ok, reached, f"{'times within' if ok else 'DIFFERS beyond'} {REL_TOL:g} (max {worst:.2g})"


def compare_references(chosen, refs, report: Callable = print) -> tuple[int, dict]:
    """Run each scenario on the default path and on each reference; (failures, scenarios reaching each)."""
    failed, reached = 0, {r.name: 0 for r in refs}
    for case in chosen:
        counts = {r.name: [0] for r in refs}
        with contextlib.ExitStack() as stack:
            for r in refs:
                stack.enter_context(counting(r.witness, counts[r.name]))
            base = run_case(case)
        for ref in refs:
            ok, hit, seen = check_reference(case, ref, base, counts[ref.name][0])
            failed += not ok
            reached[ref.name] += bool(hit)
            report(f"{case.name} [{ref.name}]: {seen}{' (path not taken here)' if hit is False else ''}")
    return failed, reached


# ---- the command -------------------------------------------------------------------------------------------

def load(path: Path) -> dict:
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def select(only: list | None) -> tuple[Case, ...]:
    chosen = tuple(c for c in cases() if not only or any(word in c.name for word in only))
    if not chosen:
        raise SystemExit(f"error: --only {', '.join(only or [])}: no check scenario matches (see --list)")
    return chosen


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--update", action="store_true", help="rewrite the digests (of the --only scenarios)")
    p.add_argument("--list", action="store_true", help="list the check scenarios")
    p.add_argument("--references", nargs="?", const="all", metavar="NAMES",
                   help="run each reference path (comma list; default all) and compare it with the default")
    p.add_argument("--only", action="append", metavar="WORD", help="scenarios whose name contains WORD")
    p.add_argument("--file", type=Path, default=DIGESTS, help=f"digest file (default {DIGESTS.name})")
    args = p.parse_args(argv)
    chosen = select(args.only)
    if args.list:
        for c in chosen:
            extra = (f" busiest_links={c.busiest}" if c.busiest else "") + (" link_usage" if c.usage else "")
            print(f"{c.name}: " + " ".join(f"{k}={v}" for k, v in c.flat.items()) + extra)
        print(f"{len(chosen)} scenarios")
        return 0
    t0 = time.perf_counter()
    if args.references:
        return _references(chosen, args.references, t0)
    stored = load(args.file)
    outcomes = {c.name: run_case(c) for c in chosen}
    digests = {c.name: outcomes[c.name].digest for c in chosen}
    unequal = twin_failures(chosen, outcomes)
    took = time.perf_counter() - t0
    if args.update:
        if unequal:  # a digest may move with the model; a folded plan and its full twin may never differ
            for line in unequal:
                print(line)
            print(f"{len(unequal)} folded check scenarios differ from their twins: nothing updated")
            return 1
        new = dict(stored) if args.only else {}
        new.update(digests)
        changed = sorted(n for n in set(new) | set(stored) if new.get(n) != stored.get(n))
        args.file.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
        print(f"{len(changed)} of {len(new)} digests changed in {args.file.name} ({took:.1f} s)"
              + "".join(f"\n  {n}: {'removed' if n not in new else 'new' if n not in stored else 'changed'}"
                        for n in changed))
        return 0
    bad = [f"{n}: {'no stored digest' if n not in stored else 'differs'}" for n, d in digests.items()
           if stored.get(n) != d]
    if not args.only:
        bad += [f"{n}: stored, but no such check scenario" for n in sorted(set(stored) - set(digests))]
    for line in bad + unequal:
        print(line)
    if bad:
        print(f"{len(bad)} of {len(digests)} check scenarios differ from {args.file.name} ({took:.1f} s, numpy "
              f"{np.__version__}, Python {sys.version.split()[0]}); if the model changed on purpose, run "
              "python benchmarks/check_hashes.py --update and say why in the commit")
    if unequal:
        print(f"{len(unequal)} folded check scenarios differ from their twins: the rank fold is not exact "
              "(no --update makes it so)")
    if bad or unequal:
        return 1
    twins = sum(bool(c.twin) for c in chosen)
    print(f"{len(digests)} check scenarios hash as stored in {args.file.name}"
          + (f", {twins} folded ones as their twins" if twins else "") + f" ({took:.1f} s)")
    return 0


def _references(chosen, names: str, t0: float) -> int:
    refs = REFERENCES if names == "all" else tuple(r for r in REFERENCES if r.name in names.split(","))
    unknown = sorted(set(names.split(",")) - {r.name for r in REFERENCES}) if names != "all" else []
    if unknown or not refs:
        raise SystemExit(f"error: --references {unknown[0] if unknown else names!r} is unknown; valid choices: "
                         + ", ".join(r.name for r in REFERENCES))
    failed, reached = compare_references(chosen, refs)
    for r in refs:
        print(f"{r.name}: {'bit for bit' if r.exact else f'to {REL_TOL:g}'}; its path taken in {reached[r.name]} of "
              f"{len(chosen)} scenarios{'' if reached[r.name] else ' (NEVER: the switch changes nothing here)'}")
    never = [r.name for r in refs if not reached[r.name]]
    print(f"{len(chosen)} scenarios x {len(refs)} reference paths: {failed} differ, {len(never)} never taken "
          f"({time.perf_counter() - t0:.1f} s)")
    return 1 if failed or never else 0


if __name__ == "__main__":
    sys.exit(main())

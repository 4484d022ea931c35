"""The one chooser of the engine's paths: driver, collective pricing and fluid-core form.

The engine has fast paths in three layers, each exact against a reference
path (docs/engine.md, "Engine paths").  :func:`choose` picks them, from the plan
and the options alone, and nothing else in the engine decides which runs; its
:class:`Paths` is recorded in every run (``Timeline.paths``, and in ``--json``
of ``simcomm run`` as each kind's ``engine``).

* **driver** (how the plan's ops are run through time):
  ``one-pass`` (analytic without link bytes: every op's times in op order,
  :func:`simcomm.engine.flow.analytic.longest_path`), ``direct`` (a flow run of computes and
  messages, no CPU cost of communication: a heap that replays SimPy's events,
  :func:`simcomm.engine.drive.executor._run_direct`; collectives too when every one is a *cut*,
  :func:`cuts_only`, each then run alone on SimPy's queue), ``callbacks`` (SimPy's queue, streams and
  collectives driven by callbacks, :mod:`simcomm.engine.events`), ``processes`` (one SimPy
  process per stream and collective: the reference).
* **pricing** (how a collective's steps are priced): ``closed-forms`` (analytic),
  ``per-link`` (repeated steps reserve their own links), ``whole-network`` (they reserve
  the idle network: with link usage recorded or a CPU cost of communication, or the
  ``per_link`` reference), ``plain`` (every repeat as flows: the ``coalesce`` reference);
  ``scaled``: a scalable step's isolated run is reused for other sizes; ``closed_from``: a step of at
  least this many transfers that carries one size per link is priced alone by its closed form
  (docs/engine.md, "Steps of one size per link"; 0: never).
* **core** (the fluid core's most specialised form; it moves to the arrays when more than
  ``max_live`` flows are live): ``lean`` (Python floats while live routes are disjoint,
  :mod:`simcomm.engine.fluid.lone`), ``scalar`` (Python floats, :mod:`simcomm.engine.fluid.small`),
  ``numpy`` (arrays throughout), ``plain`` (arrays, every flow re-solved by the textbook
  solver at every event: the ``incremental`` reference); ``none`` for closed forms.

References (``EngineOptions.reference``, :data:`REFERENCES`) each turn one fast path off;
those marked exact in :data:`EXACT` give the same floats bit for bit, the others the same
answer in the model (benchmarks/check_hashes.py compares both).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import repeat

__all__ = ["Paths", "choose", "cuts_only", "REFERENCES", "EXACT", "TAKEN"]

#: Every reference path: name -> the fast path it turns off.
REFERENCES = {
    "one_pass": "the analytic one pass (analytic runs without link bytes go through the event loop)",
    "direct": "the direct loop for plans of computes and messages, and collectives that are cuts (SimPy's queue "
              "instead)",
    "callbacks": "callbacks driving streams and collectives (one SimPy process each instead)",
    "keep": "collective preparations, their routed steps and those steps' runs alone kept with the topology for "
            "later runs (prepared again each run)",
    "shapes": "one preparation for groups the runtime places alike, one isolated run for alike disjoint-route "
              "steps and for large steps alike up to an order-keeping relabelling of their links (each group "
              "prepared and run on its own)",
    "per_link": "reservations of a repeated step's own links (of the whole idle network instead)",
    "coalesce": "coalesced repeats and scaled steps (every repeat of every step as plain flows)",
    "scaling": "reusing a scalable step's isolated run for another size (run alone again instead)",
    "lean": "the scalar core's lean form for disjoint routes (the general scalar form instead)",
    "scalar": "the fluid core's scalar form for few flows (numpy arrays throughout instead)",
    "incremental": "incremental max-min re-solves and link pruning (the textbook solver at every event)",
    "closed_steps": "a large step of one transfer size per link priced alone by its closed form (run as flows "
                    "instead)",
    "alike_steps": "a (group, preparation)'s steps taken from an alike group's derivation, translated to the group's "
                   "ranks and routes (each group's steps derived anew instead)",
    "local_collectives": "machine-local collectives whose every step is reserved on links nothing else in the plan "
                         "uses, run on the direct loop beside its messages and cuts (the callbacks driver instead)",
    "rounds": "message rounds: the direct loop starts the messages one done event releases in one pass and sums "
              "their bytes per link family at cuts (simcomm.engine.drive.rounds), the one pass prices every "
              "message's seconds at once (one stream, one message at a time instead)",
    "sparse_links": "the fluid core's per-link updates when an event's flows cross few of the network's links "
                    "(FluidCore._rates_gone_entered: one array over every link at every event instead)",
}
#: Paths taken op by op or step by step during a run (beside :func:`choose`'s up-front choice): name -> what
#: counts.  Where the engine takes one it says so, ``ctx.took(name)`` (:class:`simcomm.engine.drive.executor.Context`),
#: and the run records every count above zero as ``Timeline.paths["taken"]`` (each kind's ``engine.taken`` in
#: ``--json``); a name not listed here fails the run, so a new path is listed (and documented) once, here.
TAKEN = {
    "closed_steps": "steps priced alone by their closed form (at least ``closed_from`` transfers, one size per link)",
    "pair_counts": "of those, steps of blocks of pairs whose link loads were counted by classes, never routed",
    "coalesced_steps": "repeats of a step reserved for its isolated run's period instead of run as flows",
    "scaled_runs": "isolated runs of a scalable step reused for another size (``scaled``)",
    "cut_collectives": "collectives the direct loop ran alone on SimPy's queue, between its own runs (cuts)",
    "merged_flows": "flows retired at a nearby completion's event (``resolution`` > 0: an approximation)",
    "sampled_schedules": "analytic collective shapes of more than ``PAIR_LIMIT`` transfers priced from a sampled "
                         "schedule (no link bytes counted for them)",
    "ops_not_run": "ops left unrun once every ``stop_after`` op had ended (their times NaN)",
    "alike_steps": "steps of a (group, preparation) taken from an alike group's derivation (``alike_steps``)",
    "local_collectives": "machine-local collectives the direct loop ran as reservations of their own links "
                         "(``local_collectives``)",
    "message_rounds": "rounds of at least two messages the direct loop started in one pass, or one-pass runs that "
                      "priced every message's seconds at once (``rounds``)",
}
#: References that give every float bit for bit (the others: the same model, floats to 1e-9).
EXACT = frozenset({"one_pass", "direct", "callbacks", "keep", "shapes", "lean", "scalar", "alike_steps",
                   "local_collectives", "rounds", "sparse_links"})


@dataclass(frozen=True)
class Paths:
    """The paths one engine run takes (see the module docstring)."""

    driver: str
    pricing: str
    scaled: bool
    core: str
    keep: bool
    max_live: int
    shapes: bool = True
    closed_from: int = 0
    resolution: float = 0.0
    stop_after: int = 0
    alike_steps: bool = True

    def to_dict(self) -> dict:
        """What a run records: every field (driver, pricing, scaled steps, core; whether small preparations are
        kept for later runs and alike groups share one; where the core leaves its scalar forms; the closed-step
        threshold, 0: never; the event resolution, 0: exact; how many ops ``stop_after`` waits for, 0: every op
        runs; whether a group's steps may be taken from an alike group's derivation).  The run adds ``taken``:
        the counts of :data:`TAKEN`."""
        return asdict(self)


def cuts_only(ops, local=None) -> bool:
    """Whether the plan has messages and every collective of it is a *cut*: every earlier op runs before it
    (an ancestor, through deps or stream order) and every later op after it (a descendant).

    ``local`` (a predicate on collectives, or None): collectives it accepts (machine-local ones, whose links the
    executor then checks nothing else uses, :func:`simcomm.engine.drive.executor._local_collectives`) are not
    cuts but ops on each member's stream, as a message is on its source's; a plan of such collectives and cuts
    qualifies without messages too (hierarchical-crossover-sgd's group reduces and broadcasts between its
    barriers).

    Such a collective (crossover-sgd's barrier over all ranks after each round of messages) starts on an idle
    network with nothing else pending and ends before anything else starts, so the direct loop runs it alone
    on SimPy's queue, between its own runs of the messages (docs/engine.md, "The direct loop").  One pass in
    op order (ids are a topological order): an op after the last cut descends from it when one of its
    predecessors does (every op between them already does), so when a predecessor's id is at least the cut's;
    the ops since the last cut that nothing has followed yet must all be predecessors of the next.
    """
    from simcomm.ops import Collective, Compute, Transfer

    last: dict[tuple[int, str], int] = {}  # (rank, stream) -> the last op on it
    get = last.get
    followed = bytearray(len(ops))  # op -> some later op has it as a predecessor
    cut = -1  # the last collective (every one so far a cut)
    messages = False

    def stream_preds(op) -> set[int]:
        """A collective's deps and, on each member's stream, the op before it (it becomes each stream's last)."""
        keys = [(r, op.stream) for r in op.ranks]
        preds = set(op.deps)
        preds.update(map(get, keys))  # (each member's last op, None for a stream without one)
        preds.discard(None)
        last.update(zip(keys, repeat(op.id)))
        return preds

    for op in ops:
        kind = type(op)
        if kind is Transfer or kind is Compute:  # one stream: the common case, kept to a few operations
            if kind is Transfer:
                key = (op.src, op.stream)
                messages = True
            else:
                key = (op.rank, op.stream)
            prev = get(key)
            last[key] = op.id
            deps = op.deps
            for d in deps:
                followed[d] = 1
            if prev is not None:
                followed[prev] = 1
            if cut >= 0 and not ((prev is not None and prev >= cut) or (deps and max(deps) >= cut)):
                return False
            continue
        if not isinstance(op, Collective):  # (another kind of op: not this path)
            return False
        preds = stream_preds(op)
        if cut >= 0 and not (preds and max(preds) >= cut):
            return False
        if local is not None and local(op):  # an op on each member's stream, not a cut
            for d in preds:
                followed[d] = 1
            messages = True  # (runs on the direct loop as messages do)
            continue
        # every op since the last cut is followed by a later one or is a predecessor of this one: once its
        # predecessors are marked followed (as they are next in any case), none since the last cut is left unmarked
        for d in preds:
            followed[d] = 1
        if followed.find(0, cut + 1, op.id) >= 0:
            return False
        cut = op.id
    return messages


def choose(plan, fidelity: str, options, local=None) -> Paths:
    """The paths a run of ``plan`` at ``fidelity`` with ``options`` (EngineOptions) takes (``local``: the
    executor's test of a machine-local collective, :func:`cuts_only`; the ``local_collectives`` reference drops
    it)."""
    from simcomm.ops import Collective

    ref = options.reference
    flow = fidelity == "flow"
    cpu = flow and options.comm_cpu > 0  # the analytic fidelity has no shared network to count bytes on
    if not flow and not options.link_bytes and "one_pass" not in ref:
        driver = "one-pass"
    elif flow and not cpu and "direct" not in ref and (
            not any(isinstance(op, Collective) for op in plan.ops) or cuts_only(plan.ops)
            or (local is not None and "local_collectives" not in ref and not options.stop_after
                and cuts_only(plan.ops, local))):  # (the direct loop runs every op: stop_after keeps the queue)
        driver = "direct"
    elif "callbacks" not in ref:
        driver = "callbacks"
    else:
        driver = "processes"
    if not flow:
        pricing, scaled, core = "closed-forms", False, "none"
    else:
        # A reserved repeat has no live flows whose bytes a CPU cost could follow, so with comm_cpu every
        # repeat runs as flows (docs/engine.md, "CPU cost of communication").
        coalesce = "coalesce" not in ref and not cpu
        if not coalesce:
            pricing = "plain"
        elif "per_link" in ref or options.record_link_usage:
            pricing = "whole-network"
        else:
            pricing = "per-link"
        scaled = coalesce and "scaling" not in ref
        if "incremental" in ref:
            core = "plain"
        elif "scalar" in ref:
            core = "numpy"
        elif "lean" in ref:
            core = "scalar"
        else:
            core = "lean"
    closed_from = options.closed_steps if flow and pricing != "plain" and "closed_steps" not in ref else 0
    # the direct loop runs every op whatever stop_after says; closed forms merge no completions
    stop = len(options.stop_after) if driver != "direct" else 0
    return Paths(driver, pricing, scaled, core, "keep" not in ref, options.max_live, "shapes" not in ref,
                 closed_from, float(options.resolution) if flow else 0.0, stop, flow and "alike_steps" not in ref)

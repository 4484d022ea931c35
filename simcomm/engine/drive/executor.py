"""``run()``: execute a CommPlan on a Topology.

In the model every (rank, stream) pair that has ops executes its ops in id order
(ids are a topological order, so this cannot deadlock); an op starts once its
dependencies are done.  How that is driven is the run's ``paths.driver``
(:func:`simcomm.engine.paths.choose`): plans of computes and messages on a heap
that replays SimPy's events (``direct``, :func:`_run_direct`); others on SimPy's
queue with generators driven by callbacks (``callbacks``,
:class:`~simcomm.engine.events.Driver` and :class:`_Arrivals`) or as one SimPy
process per stream and collective (``processes``, the reference); the same events
in the same order either way (docs/engine.md, "Drivers").  Compute ops are timeouts.  A Transfer
occupies its source's stream.  A Collective starts when the last member
reaches it; one process then runs it and releases every member.  How a
Transfer or Collective is priced is the fidelity's business:
:class:`~simcomm.engine.flow.pricer.FlowPricer` runs flows on the fluid network,
:class:`~simcomm.engine.flow.analytic.AnalyticPricer` uses closed forms.  Both see
the same op stream.
"""

from __future__ import annotations

import math
import weakref
from collections import defaultdict
from dataclasses import fields, replace
from functools import cached_property
from itertools import repeat
from operator import attrgetter, itemgetter

import numpy as np
import simpy

from simcomm.engine.drive.rounds import FamilyBytes
from simcomm.engine.events import Driver, Environment, run_alone, run_events, started
from simcomm.engine.options import FIDELITIES, EngineOptions, Pricer
from simcomm.engine.paths import TAKEN, Paths, choose, cuts_only
from simcomm.engine.timeline import Timeline
from simcomm.errors import ConfigError, PlanError, SimcommError
from simcomm.ops import Collective, CommPlan, Compute, Transfer
from simcomm.topologies.base import Topology

__all__ = ["run", "FIDELITIES"]

OPTIONS = tuple(f.name for f in fields(EngineOptions))
#: Compute stretches stop once the CPU time still owed is below this (seconds).
_CPU_TOL = 1e-12
#: ... or after this many rounds (the CPU cost of communication would exceed the CPU).
_CPU_ROUNDS = 200
#: Collective preparations with at most this many transfers (over their steps) are always kept
#: with the topology for later runs (unless the ``keep`` reference is asked) ...
_KEEP_TRANSFERS = 4096
#: ... and larger ones while the topology's kept ones hold at most this many transfers in all (~32 bytes each:
#: ~64 MB; a 16 384-rank tree all-reduce holds ~5 x 10^5, prepared once for a run's flow simulation and its closed form)
_KEEP_BUDGET = 1 << 21
#: Kept preparations per topology (weakly: they go with it), see ``run()``.
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Kept(dict):
    """The preparations kept with one topology, by (runtime, ppn, op key), and the transfers they hold."""

    transfers: int = 0

    def offer(self, key, prep) -> None:
        """Keep ``prep`` when it is small, or while the kept ones stay within :data:`_KEEP_BUDGET` transfers."""
        size = sum(len(st) for st in prep.steps)
        if size <= _KEEP_TRANSFERS or self.transfers + size <= _KEEP_BUDGET:
            self[key] = prep
            self.transfers += size


class Context:
    """What pricers share: the topology, per-rank gamma, per-link family, statistics."""

    def __init__(self, env: simpy.Environment, topology: Topology, *, paths: Paths, ppn: int | None,
                 record_usage: bool = False, resolution: float = 0.0,
                 link_bytes: bool = True, traffic_weights: tuple = ()):
        self.env = env
        self.paths = paths  # the driver, pricing and fluid-core form of this run (paths.choose)
        self.link_bytes = link_bytes  # False: bytes per link family are not counted
        self.weights: dict[str, float] = dict(traffic_weights)  # stream -> times its bytes count (default once)
        self.resolution = resolution
        self.record_usage = record_usage
        self.topology = topology
        self.ppn = ppn
        classes, code = topology.link_class_codes  # per link class, not per link: millions of links
        fams = [topology.links[name].family for name in classes]
        self.families = tuple(sorted(set(fams)))
        index = {f: i for i, f in enumerate(self.families)}
        self.family_of_link = np.array([index[f] for f in fams], dtype=np.int64)[code]
        self.family_bytes = np.zeros(len(self.families))
        self.per_link: np.ndarray | None = None
        self.stats: dict[str, int] = defaultdict(int)
        self.taken: dict[str, int] = defaultdict(int)  # paths taken op by op (paths.TAKEN), see took()
        self.rounds = True  # the direct loop starts rounds of messages at once (off: the ``rounds`` reference)
        self.sparse_links = True  # the fluid core updates an event's few links alone (off: ``sparse_links``)

    # gamma and machine are read when a pricer first needs them: a run of messages alone on the direct loop needs
    # neither (sgp's 14 kinds at 16 384 GPUs, each a flow run and a closed form: ~25 ms of graph reads a run)
    @cached_property
    def gamma(self) -> np.ndarray:
        """Seconds per byte reduced on each rank (:meth:`Topology.gammas`)."""
        return self.topology.gammas()

    @cached_property
    def machine(self) -> np.ndarray:
        """Machine of each rank; a rank without one is alone on its own (negative) id."""
        machine = self.topology.machines()
        return np.where(machine < 0, -1 - np.arange(len(machine)), machine)

    def took(self, path: str, count: int = 1) -> None:
        """Record that the run took ``path`` (a name of :data:`simcomm.engine.paths.TAKEN`) ``count`` times: call it
        where the path is chosen; the run's ``Timeline.paths["taken"]`` (``--json``: each kind's ``engine``) shows
        it, and an unlisted name fails the run (:func:`_paths`)."""
        self.taken[path] += count

    def weight(self, stream: str) -> float | None:
        """How many times the bytes of ``stream``'s ops count (``traffic_weights``), None: once."""
        return self.weights.get(stream) if self.weights else None

    def count_bytes(self, routed, repeats: int, weight: float | None = None) -> None:
        """Add one op's bytes per family (``weight`` times, when its stream has one) and per link (once)."""
        if self.link_bytes and len(routed) and len(self.families):
            times = repeats if weight is None else repeats * weight
            self.family_bytes += times * routed.family_bytes(self.family_of_link, len(self.families))
            if self.per_link is not None:  # only when the busiest individual links are asked for
                np.add.at(self.per_link, routed.links, repeats * np.repeat(routed.nbytes, routed.route_len))


def run(plan: CommPlan, topology: Topology, *, fidelity: str = "flow", seed: int = 0,
        options: EngineOptions | None = None, **kwargs) -> Timeline:
    """Simulate ``plan`` on ``topology``; see :func:`simcomm.engine.simulate`.

    Options: ``reference`` (default none) names fast paths to turn off
    (:data:`simcomm.engine.paths.REFERENCES`; the paths taken are chosen by
    :func:`simcomm.engine.paths.choose` and recorded as ``Timeline.paths``);
    ``max_live`` (default 16) is where the fluid core leaves its scalar forms (the
    same floats at any value);
    ``ppn`` overrides the ranks-per-machine given to hierarchical algorithms;
    ``record_link_usage`` (default False) stores bytes/s per link family over
    time in ``meta["link_usage"]`` as ``(time_s, family, bytes_per_s)`` rows,
    one whenever a family's value changes (flow fidelity; empty for analytic).
    ``comm_cpu`` (seconds per byte, default 0) is the host CPU a rank spends on
    each byte it sends or receives: a Compute op is stretched by ``comm_cpu`` times
    the bytes its rank moved while it ran (flow fidelity, transfers and steps on
    the shared network; docs/engine.md, "CPU cost of communication").
    ``resolution`` (default 0: exact) merges flow completions that lie within
    that fraction of the finishing transfers' own durations into one event
    (flow fidelity; ``meta["merged_flows"]`` counts the flows moved; docs/engine.md,
    "Event resolution").
    ``link_bytes`` (default True) counts the bytes each link family carries
    (``Timeline.link_class_bytes``); with False that dict is empty, and the
    analytic fidelity then runs without an event loop (:func:`analytic.longest_path`:
    the same start and end of every op, in one pass in op order).
    ``seed`` is recorded; the models are deterministic and draw no random numbers.
    """
    if fidelity not in FIDELITIES:
        raise ConfigError(f"fidelity: unknown {fidelity!r}; valid choices: {', '.join(FIDELITIES)}")
    opts = EngineOptions.of(options, **kwargs)  # every option typed and checked once
    if plan.n_ranks > topology.n_ranks:
        raise PlanError(f"plan uses {plan.n_ranks} ranks but topology {topology.name!r} "
                        f"has only {topology.n_ranks}")
    env = Environment()
    local = _machine_local(topology) if fidelity == "flow" else None
    paths = choose(plan, fidelity, opts, local)  # the one place the engine's paths are decided
    ctx = Context(env, topology, paths=paths, ppn=opts.ppn, record_usage=opts.record_link_usage,
                  resolution=float(opts.resolution), link_bytes=opts.link_bytes,
                  traffic_weights=opts.traffic_weights)
    if opts.busiest_links:
        ctx.per_link = np.zeros(len(topology.capacity))
    ctx.rounds = "rounds" not in opts.reference
    ctx.sparse_links = "sparse_links" not in opts.reference
    flow_pricer = analytic_pricer = None
    if fidelity == "flow":
        from simcomm.engine.flow.pricer import FlowPricer

        flow_pricer = FlowPricer(ctx)
    else:
        from simcomm.engine.flow.analytic import AnalyticPricer

        analytic_pricer = AnalyticPricer(ctx)
    pricer: Pricer = flow_pricer or analytic_pricer  # type: ignore[assignment]  # exactly one is set

    ops = plan.ops
    n = len(ops)
    # (the analytic one pass routes its pairs in one batch of its own: AnalyticPricer.route_pairs)
    sends = [(op.src, op.dst) for op in ops if isinstance(op, Transfer)] if paths.driver != "one-pass" else []
    if len(sends) > 1 and (flow_pricer is None or opts.comm_cpu > 0):
        # a gossip plan's ~10^5 messages: their routes in one batch, not one router call each, for the pricers
        # that route a message by route() (the flow pricer's messages are routed in one batch by add_messages)
        topology.prime_routes(*np.array(sends, dtype=np.int64).T)
    if flow_pricer is not None and sends:
        # what pricing a message needs of its route, for every pair at once (FlowPricer.transfer, the direct loop)
        flow_pricer.add_messages(sends)
    prepared: dict = {}  # by op key, and by op id (the same objects)
    runtime = opts.runtime  # the caller's (setup's, from the stack): the engine has no default runtime
    chosen: dict[tuple, int] = {}
    # A preparation depends on the op's key, the runtime and the ppn override alone, so it is kept
    # with the topology for the next run (a strategy's flow run, then its analytic estimate; plans
    # with thousands of 2-rank all-reduces), within a budget of transfers (memory): _Kept.offer.
    kept = _KEPT.setdefault(topology, _Kept()) if paths.keep else _Kept()
    # the runtime's placement of each group, asked once per group (CollectiveRuntime.placement: a function of the
    # group's ranks, the topology and ppn; hierarchical-crossover-sgd at 16 384 GPUs runs ~39 000 collectives of
    # 2 049 groups)
    where_of: dict = {}
    collectives = []
    for op in ops:
        if isinstance(op, Collective):
            collectives.append(op)
            if runtime is None:
                raise ConfigError(f"runtime: the plan has collective ops ({op.kind} over {len(op.ranks)} ranks) and "
                                  "no runtime to run them; hand the engine the stack's: "
                                  "EngineOptions(runtime=simcomm.runtimes.get_runtime(name))")
            # What else the runtime's schedule depends on: where the members sit (NCCL), ranks per machine (MPI).
            where = where_of.get(op.ranks, where_of)
            if where is where_of:
                where = where_of[op.ranks] = runtime.placement(op, topology, ctx.ppn)
            if not paths.shapes:  # the reference: every group prepared on its own
                where = (where, op.ranks)
            key = (op.kind, op.algorithm, len(op.ranks), op.nbytes, op.root, where)
            if key not in prepared:
                prep = kept.get((runtime, ctx.ppn, key))
                if prep is None:
                    prep = _prepare(runtime, op, topology, ctx.ppn)
                    kept.offer((runtime, ctx.ppn, key), prep)
                prepared[key] = prep
            prepared[op.id] = prepared[key]
            label = (op.kind, op.algorithm, prepared[key].label)
            chosen[label] = chosen.get(label, 0) + 1

    if flow_pricer is not None and collectives:
        flow_pricer.prime_steps(collectives, prepared)  # their small steps' routes in a few batches

    local_steps: dict = {}
    if paths.driver == "direct" and local is not None and "local_collectives" not in opts.reference \
            and not opts.stop_after and any(
            isinstance(op, Collective) and local(op) for op in ops) and not cuts_only(ops):
        # (choose() took the direct loop for machine-local collectives: their links are checked here)
        assert flow_pricer is not None
        found = _local_collectives(ops, flow_pricer, prepared, local)
        if found is None:  # a machine-local collective's links are not its own: SimPy's queue after all
            paths = ctx.paths = replace(paths, driver="callbacks")
        else:
            local_steps = found

    if paths.driver == "one-pass":
        # Closed forms share nothing, so every op's times follow from its deps in op order.
        from simcomm.engine.flow.analytic import longest_path

        assert analytic_pricer is not None
        t0, t1 = longest_path(ops, analytic_pricer, prepared)
        return Timeline(start=t0, end=t1, makespan=float(t1.max()) if n else 0.0, link_class_bytes={},
                        fidelity=fidelity, meta=_meta(ctx, seed, chosen), paths=_paths(paths, ctx))

    # Plain lists while running (cheaper per op than numpy items); arrays at the end.
    start: list[float] = [np.nan] * n
    end: list[float] = [np.nan] * n
    cpu = float(opts.comm_cpu)
    track = cpu > 0 and fidelity == "flow"  # the analytic fidelity has no shared network to count bytes on
    # Plans of computes and messages alone run on the direct loop (the same events, without SimPy).
    direct = paths.driver == "direct"
    callbacks = paths.driver == "callbacks"
    done = [] if direct else [env.event() for _ in range(n)]
    arrived = [0] * n
    halt = _stop_after(opts.stop_after, done, n) if not direct else []

    def finish(oid: int) -> None:
        end[oid] = env.now
        done[oid].succeed()

    def collective(op):
        # Members arrive without waiting for the op's deps (one wait here instead of one
        # per member and dep); the start is the same: last arrival and every dep done.
        for d in op.deps:
            if not done[d].processed:
                yield done[d]
        start[op.id] = env.now
        yield from pricer.collective(op, prepared[op.id])
        finish(op.id)

    if track:
        assert flow_pricer is not None  # only the flow fidelity tracks ranks' bytes
        flow_pricer.track_ranks()

    def cpu_stretched(op):
        # The rank's CPU also moved bytes while computing: owe comm_cpu per byte, and
        # keep computing until the owed time (which itself overlaps more traffic) is paid.
        assert flow_pricer is not None  # CPU-stretched computes are built only when ranks' bytes are tracked
        b0 = flow_pricer.rank_bytes(op.rank)
        yield env.timeout(op.seconds)
        paid = 0.0
        for _ in range(_CPU_ROUNDS):
            owed = cpu * (flow_pricer.rank_bytes(op.rank) - b0) - paid
            if owed <= _CPU_TOL:
                break
            paid += owed
            ctx.stats["cpu_stretch_rounds"] += 1
            yield env.timeout(owed)

    timeout, transfer = env.timeout, pricer.transfer

    def stream(oids: list[int]):
        for oid in oids:
            op = ops[oid]
            if isinstance(op, Collective):
                arrived[oid] += 1
                if arrived[oid] == len(op.ranks):
                    launch(collective(op))
                if done[oid].callbacks is not None:  # not processed yet
                    yield done[oid]
                continue
            for d in op.deps:
                if done[d].callbacks is not None:
                    yield done[d]
            start[oid] = env.now
            if isinstance(op, Compute):
                if op.seconds > 0:
                    if track:
                        yield from cpu_stretched(op)
                    else:
                        yield timeout(op.seconds)
            else:
                yield from transfer(op)
            end[oid] = env.now
            done[oid].succeed()

    launch = (lambda gen: Driver(env, gen)) if callbacks else env.process

    same: dict[tuple, list[int]] = {}  # streams with equal ops share one list (_Arrivals merges them)

    def arrivals(oids: list[int]) -> None:
        # the stream's start: SimPy's Initialize (urgent, now), one event as env.process makes
        started(env, _Arrivals(same.setdefault(tuple(oids), oids), ops, arrived, done,
                               lambda op: launch(collective(op))))

    queues: dict[tuple[int, str], list[int]] = {}
    get_queue = queues.get
    member_queues: dict[tuple, list] = {}  # (a collective's ranks, stream) -> its members' queues, in rank order
    for op in ops:
        # one stream (a gossip plan's ~6 x 10^5 ops): no tuple of members
        if type(op) is Transfer:
            stream_key = (op.src, op.stream)
        elif type(op) is Compute:
            stream_key = (op.rank, op.stream)
        elif isinstance(op, Collective):  # (a group's collectives repeat: hierarchical-crossover-sgd's 38 930 of 2 049)
            into = member_queues.get((op.ranks, op.stream))
            if into is None:
                into = member_queues[(op.ranks, op.stream)] = [queues.setdefault((r, op.stream), [])
                                                               for r in op.ranks]
            for q in into:
                q.append(op.id)
            continue
        else:
            members = (op.src,) if isinstance(op, Transfer) else op.ranks
            for r in members:
                queues.setdefault((r, op.stream), []).append(op.id)
            continue
        q = get_queue(stream_key)
        if q is None:
            queues[stream_key] = [op.id]
        else:
            q.append(op.id)
    if not direct:
        is_coll = [isinstance(op, Collective) for op in ops]
        for qkey in sorted(queues):
            q = queues[qkey]
            if callbacks and all(is_coll[oid] for oid in q):
                arrivals(q)
            else:
                launch(stream(q))
    try:
        if direct:
            assert flow_pricer is not None
            _run_direct(ops, _merged([queues[k] for k in sorted(queues)]), flow_pricer, ctx, start, end,
                        prepared, local_steps)
        else:
            run_events(env, halt)
    except Exception as exc:
        # SimPy re-raises a process's exception as a copy chained to the original.
        if isinstance(exc.__cause__, SimcommError):
            raise exc.__cause__ from None
        raise

    pricer.finish_stats()
    t_start, t_end = np.array(start, dtype=float), np.array(end, dtype=float)
    missing = np.flatnonzero(np.isnan(t_end))
    if len(missing) and not halt:
        op = ops[int(missing[0])]
        raise PlanError(f"op {op.id} ({op.label or type(op).__name__}) never ran: its dependencies "
                        "or its group's stream order can never be satisfied")
    if len(missing):
        ctx.took("ops_not_run", len(missing))
    if pricer.live_merged:  # the shared network's merges (isolated runs count their own)
        ctx.stats["merged_flows"] += pricer.live_merged
    if ctx.stats.get("merged_flows"):  # (every merge, the shared network's and the isolated runs')
        ctx.took("merged_flows", ctx.stats["merged_flows"])
    stats = _meta(ctx, seed, chosen)
    if ctx.record_usage:
        from simcomm.engine.fluid.core import merge_usage

        stats["link_usage"] = merge_usage(pricer.usage, ctx.families)
    link_bytes = {f: float(b) for f, b in zip(ctx.families, ctx.family_bytes, strict=False)} if ctx.link_bytes else {}
    if ctx.per_link is not None:
        # busiest = longest time at full rate (bytes / capacity): a fast link carrying more can be idler
        busy = ctx.per_link / topology.capacity
        top = sorted(np.flatnonzero(ctx.per_link), key=lambda i: (-busy[i], i))[:opts.busiest_links]
        stats["busiest_links"] = [(*map(str, topology.link_endpoints(int(i))), topology.link_names[i],
                                   float(ctx.per_link[i]), float(busy[i])) for i in top]
    last = float(np.nanmax(t_end)) if halt else float(t_end.max()) if n else 0.0
    return Timeline(start=t_start, end=t_end, makespan=last, link_class_bytes=link_bytes,
                    fidelity=fidelity, meta=stats, paths=_paths(paths, ctx))


class _Arrivals:
    """Streams of collectives alone, run as callbacks: what ``run()``'s ``stream`` does for them.

    Each call sits where the stream process's resume would (the done event's callbacks, in
    the same order), so every event runs at the same instant and in the same order; only the
    process's own termination event (which nothing waits for) is not made.  ``weight`` streams
    with the same ops, at the same op and next to each other in a callbacks list, behave as
    one that arrives ``weight`` times at once (nothing runs between them), so they merge when
    one is appended right after the other (:meth:`wait`): the tensor-parallel ranks of a group
    then cost one call per collective, not one each.  A class, not a closure that appends
    itself, so that a finished run leaves no reference cycle.
    """

    __slots__ = ("oids", "pos", "weight", "ops", "arrived", "done", "launch")

    def __init__(self, oids: list[int], ops, arrived: list[int], done: list, launch):
        self.oids, self.pos, self.weight = oids, 0, 1
        self.ops, self.arrived, self.done, self.launch = ops, arrived, done, launch

    def wait(self, cbs: list) -> None:
        """Append to ``cbs``, merging with an equal stream appended just before."""
        last = cbs[-1] if cbs else None
        if type(last) is _Arrivals and last.oids is self.oids and last.pos == self.pos:
            last.weight += self.weight
        else:
            cbs.append(self)

    def __call__(self, _ev) -> None:
        oids, arrived, w = self.oids, self.arrived, self.weight
        i = self.pos
        while i < len(oids):
            oid = oids[i]
            n = arrived[oid] + w
            arrived[oid] = n
            if n == len(self.ops[oid].ranks):
                self.launch(self.ops[oid])
            i += 1
            cbs = self.done[oid].callbacks
            if cbs is not None:  # not processed yet: go on when it is
                self.pos = i
                self.wait(cbs)
                return
        self.pos = i


def _merged(streams: list[list[int]]) -> tuple[list[list[int]], list[int]]:
    """``streams`` with each run of equal neighbours as one, and how many each stands for.

    Equal streams hold the same collectives (a compute or message belongs to one stream), so neighbours in
    ``run()``'s order start one after the other and then always move together: each arrives at the same
    collective, waits for its done event right after the other, and resumes right after it, with nothing in
    between.  One that arrives ``weight`` times at once makes the same events in the same order (the last
    arrival starts the collective at the same place): the 7 other members of each of
    hierarchical-crossover-sgd's 2 048 machines cost one stream, not 7.
    """
    out: list[list[int]] = []
    weight: list[int] = []
    for q in streams:
        if out and out[-1] == q:
            weight[-1] += 1
        else:
            out.append(q)
            weight.append(1)
    return out, weight


def _run_direct(ops, merged: tuple[list[list[int]], list[int]], pricer, ctx: Context, start: list, end: list,
                prepared: dict, local: dict) -> None:
    """Run a plan of Computes and Transfers as ``run()``'s SimPy processes would, without SimPy.

    It replays SimPy's scheduling exactly: one heap of ``(time, priority, sequence)`` entries,
    an entry pushed wherever ``run()``, :meth:`FlowPricer.transfer` and :class:`LiveNetwork`
    schedule an event (a process start at the urgent priority, a timeout, an op's done event,
    a batch's completion, the network's kick and wake-ups at the late priority), in the same
    order and at the same ``now + delay`` instants, and each stream resumes exactly where its
    generator would (docs/engine.md, "The direct loop").  Three shortcuts keep that order:
    events due now at the normal priority wait in a FIFO beside the heap (their sequence
    numbers increase), only the network's current wake-up is kept (beside the heap: a
    superseded one would be ignored by LiveNetwork's generation check when it fired), and the
    one pending kick (due now, at the late priority) is kept beside the heap too, with its
    sequence number, and taken once nothing due now precedes it.  The fluid core, the routes and the
    statistics are the flow pricer's own, so every float is the same; what is saved is SimPy's
    per-event objects, generator resumptions and callback lists (a run of the per-tensor
    parameter server at 1 024 GPUs schedules ~2.4 million events).

    Collectives that are cuts (:func:`simcomm.engine.paths.cuts_only`: crossover-sgd's barriers between its
    rounds of messages) run as ``run()``'s do: each member's stream arrives and waits for its done event, the
    last arrival starts the collective (an urgent event), which waits for its deps in order; then, once nothing
    else is due at this instant (nothing else can run before it ends), it is priced alone on SimPy's queue from
    this instant (:func:`simcomm.engine.events.run_alone`: the flow pricer's own generator on the idle network,
    the same events in the same order as in the whole run), and its done event is due at its end.

    Machine-local collectives (``local``: op id -> their steps, :func:`_local_collectives`: every step reserved,
    on links that nothing else in the plan uses but the collectives of the same group and stream, which run one
    after another) start as cuts do, then run :meth:`FlowPricer.reserved`, the flow pricer's own steps: where
    :meth:`FlowPricer.collective` holds a step's links until the end of the instant (a late event) and then
    reserves them (a timer, then the reservation's event), the same entries go on the heap, in the same order;
    nothing else can take their links, so the reservation's outcome is known (docs/engine.md, "The direct
    loop").
    """
    from collections import deque
    from heapq import heappop, heappush
    from itertools import count

    from simcomm.engine.flow.pricer import UNTIL_LATE

    streams, weight = merged  # (equal neighbouring streams as one: _merged)
    net = pricer.net
    core = net.core  # messages go to the core directly: with no collectives there are no reservations, so
    # LiveNetwork's per-link bookkeeping (what a reservation would check) is not kept here
    add_message = core.add_message
    fbytes = ctx.family_bytes.tolist()  # written back at the end (nothing else adds to it meanwhile)
    n_fam = len(ctx.families)
    # (src, dst) -> (route latency, route as a tuple, bytes per family of one byte, links) of every message
    # (run() worked them out for the flow pricer: FlowPricer.add_messages)
    pairs = pricer.messages
    count_fam = ctx.link_bytes and n_fam > 0  # (FlowPricer.transfer counts families only when there are some)
    per_link = ctx.per_link
    weights = ctx.weights  # (FlowPricer.transfer's traffic weight per stream)
    # message rounds (simcomm.engine.drive.rounds): messages a done event releases started as one round, and the
    # messages' family bytes logged and added at cuts and at the end (not with weights or per-link counts)
    rounds = ctx.rounds
    log = FamilyBytes(n_fam) if rounds and count_fam and per_link is None and not weights else None
    add_messages = core.add_messages
    urgent, normal, late = simpy.events.URGENT, simpy.events.NORMAL, simpy.events.NORMAL + 1
    INIT, TIMER, DONE, GOT, KICK, COLL, HOLD, RTIME, RESUME, GOTS = range(10)
    gens: dict = {}  # local collective id -> its FlowPricer.reserved generator, while it runs
    n = len(ops)
    # each op's kind in one pass over the ops (at 10^5-10^6 ops, each pass is memory traffic)
    kinds = list(map(_KIND.get, map(type, ops), repeat(3)))
    if 3 in kinds:  # (a subclass of an op type: told apart by isinstance)
        kinds = [k if k != 3 else 2 if isinstance(ops[i], Collective) else 0 if isinstance(ops[i], Compute) else 3
                 for i, k in enumerate(kinds)]
    is_compute = [k == 0 for k in kinds]
    is_message = [k == 1 for k in kinds]
    is_coll = [k == 2 for k in kinds]
    arrived = [0] * n  # members of each collective arrived so far
    coll_dep: dict[int, int] = {}  # collective id -> deps known processed (it waits for them in order, as run()'s collective)
    ready: list[int] = []  # collectives whose deps are done: each runs alone once nothing else is due now
    env = ctx.env
    processed = [False] * n  # an op's done event has been processed (SimPy: callbacks is None)
    waiting: list = [None] * n  # op id -> streams waiting for its done event, in order (None: none)
    pos = [0] * len(streams)  # per stream: index of the op it is at
    # per stream: deps of that op known processed (a stream resumes its scan there, as run()'s generator resumes
    # its loop over the deps: an op waiting for 16 383 messages is not rescanned from its first at each one)
    dep_at = [0] * len(streams)
    batch_of: dict[int, int] = {}  # network batch id -> the stream waiting for it
    heap: list = []
    imm: deque = deque()  # (sequence, kind, argument) of events due now at the normal priority
    popleft = imm.popleft
    seq = count()
    now = 0.0  # simpy.Environment's initial time (0, the same instant)
    messages_started = 0  # messages handed to the network so far (FlowPricer.transfer's steps_simulated)
    kicked = False  # the network's kick is pending (at now, the late priority) with sequence number kick_seq
    kick_seq = 0
    wake_t: float | None = None  # the network's pending wake-up: time and sequence number
    wake_seq = 0

    def ends_now(s: int) -> None:
        # the op stream s is at ends now: its done event is due, and the stream goes on
        oid = streams[s][pos[s]]
        end[oid] = now
        imm.append((next(seq), DONE, oid))
        pos[s] += 1
        advance(s)

    def advance(s: int) -> None:
        # The stream generator of run() from the op at pos[s], until it waits for something.
        nonlocal kicked, kick_seq, messages_started
        q = streams[s]
        i = pos[s]
        while i < len(q):
            oid = q[i]
            op = ops[oid]
            if is_coll[oid]:  # run()'s stream: arrive (the last starts it), then wait for its done event
                arrived[oid] += weight[s]
                if arrived[oid] == len(op.ranks):
                    heappush(heap, (now, urgent, next(seq), COLL, oid))
                i += 1
                if not processed[oid]:
                    w = waiting[oid]
                    if w is None:
                        waiting[oid] = [s]
                    else:
                        w.append(s)
                    pos[s] = i
                    return
                continue
            deps = op.deps
            for j in range(dep_at[s], len(deps)):
                d = deps[j]
                if not processed[d]:
                    w = waiting[d]
                    if w is None:
                        waiting[d] = [s]
                    else:
                        w.append(s)
                    pos[s] = i
                    dep_at[s] = j
                    return
            dep_at[s] = 0
            start[oid] = now
            if is_compute[oid]:
                if op.seconds > 0:
                    heappush(heap, (now + op.seconds, normal, next(seq), TIMER, s))
                    pos[s] = i
                    return
            else:  # FlowPricer.transfer, one message (comm_cpu is off here)
                latency, route, fam, links = pairs[(op.src, op.dst)]
                nbytes = op.nbytes
                if log is not None:  # added at the next cut or the end, in this order (rounds.FamilyBytes)
                    log.fams.append(fam)
                    log.nbytes.append(nbytes)
                elif count_fam:  # ctx.family_bytes += nbytes * fam, element by element in Python floats
                    counted = nbytes if not weights or op.stream not in weights else nbytes * weights[op.stream]
                    for f, x in fam:
                        fbytes[f] += counted * x
                    if per_link is not None:  # the busiest links (only when asked for: a numpy call per message)
                        np.add.at(per_link, links, float(nbytes))
                # LiveNetwork.add: the batch, then the late kick (once per instant; at now + 0.0 = now)
                batch_of[add_message(float(nbytes), now + latency, route)] = s
                messages_started += 1
                if not kicked:
                    kicked, kick_seq = True, next(seq)
                pos[s] = i
                return
            end[oid] = now
            imm.append((next(seq), DONE, oid))
            i += 1
        pos[s] = i

    def collective(c: int) -> None:
        # run()'s collective process: wait for each unprocessed dep in order (a waiter ~c), then it is ready
        deps = ops[c].deps
        for j in range(coll_dep.get(c, 0), len(deps)):
            d = deps[j]
            if not processed[d]:
                w = waiting[d]
                if w is None:
                    waiting[d] = [~c]
                else:
                    w.append(~c)
                coll_dep[c] = j
                return
        start[c] = now
        steps = local.get(c)
        if steps is None:
            ready.append(c)
            return
        ctx.took("local_collectives")
        gens[c] = pricer.reserved(ops[c], steps, add_bytes)
        step(c)

    def add_bytes(times, fam) -> None:
        # ctx.family_bytes += times * fam, element by element in Python floats (the same floats)
        if log is not None:  # after the bytes of the messages started before (message rounds: logged)
            log.flush(fbytes)
        for f, x in enumerate(fam.tolist()):
            fbytes[f] += times * x

    def step(c: int) -> None:
        # the local collective c's FlowPricer.reserved from here until it waits (its generator: the same events)
        try:
            got = next(gens[c])
        except StopIteration:
            del gens[c]
            end[c] = now
            imm.append((next(seq), DONE, c))  # run()'s finish: the done event
            return
        if got is UNTIL_LATE:  # LiveNetwork.late(): at now, the late priority
            heappush(heap, (now, late, next(seq), HOLD, c))
        else:  # LiveNetwork.start's timer: due at now + (res.end - now), res.end = now + repeats x period
            period, left = got
            heappush(heap, (now + ((now + left * period) - now), normal, next(seq), RTIME, c))

    def run_ready() -> float:
        # the one ready collective alone on SimPy's queue from now (a cut: nothing else is live or due)
        c = ready.pop()
        assert not ready and not heap and not kicked and wake_t is None and core.empty, "not a cut"
        if count_fam:
            if log is not None:
                log.flush(fbytes)
            ctx.family_bytes[:] = fbytes  # the collective adds its bytes to the array, after the messages'
        ctx.took("cut_collectives")
        t = run_alone(env, now, pricer.collective(ops[c], prepared[c]))
        assert net.idle, "a cut collective leaves the network idle"
        if count_fam:
            fbytes[:] = ctx.family_bytes.tolist()
        end[c] = t
        imm.append((next(seq), DONE, c))
        return t

    def start_round(w: list) -> None:
        # the streams of ``w`` in order, as advance (or collective) would resume each; runs of streams at a message
        # whose dependencies are all done (advance would start it and return) start as one round
        run_s: list[int] = []
        run_o: list[int] = []
        for s in w:
            q = streams[s] if s >= 0 else ()
            if s >= 0 and pos[s] < len(q):  # (a stream waiting for a collective's end is already past it)
                oid = q[pos[s]]
                if is_message[oid]:
                    deps = ops[oid].deps
                    j = dep_at[s]
                    while j < len(deps) and processed[deps[j]]:
                        j += 1
                    if j == len(deps):
                        run_s.append(s)
                        run_o.append(oid)
                    else:  # advance: wait for the first dep not done (nothing else happens, so no order to keep)
                        d = deps[j]
                        wd = waiting[d]
                        if wd is None:
                            waiting[d] = [s]
                        else:
                            wd.append(s)
                        dep_at[s] = j
                    continue
            if run_s:
                start_messages(run_s, run_o)
                run_s, run_o = [], []
            if s >= 0:
                advance(s)
            else:
                collective(~s)
        if run_s:
            start_messages(run_s, run_o)

    def start_messages(ss: list[int], oids: list[int]) -> None:
        # advance's message branch for each stream of ``ss`` at its op of ``oids``, in order, in one pass
        nonlocal kicked, kick_seq, messages_started
        if len(ss) == 1:
            advance(ss[0])
            return
        ctx.took("message_rounds")
        # field by field over the round, in its order (C-level loops: a round is 16 384 messages at 16 384 GPUs)
        sel = list(map(ops.__getitem__, oids))
        hits = list(map(pairs.__getitem__, map(_src_dst, sel)))  # (latency, route, fam, links) of each
        raw = list(map(_nbytes, sel))
        for oid in oids:
            start[oid] = now
        for s in ss:
            dep_at[s] = 0
        if log is not None:
            log.fams.extend(map(itemgetter(2), hits))
            log.nbytes.extend(raw)
        elif count_fam:  # advance's own adds, one message after another
            for op, hit, nbytes in zip(sel, hits, raw, strict=True):
                counted = nbytes if not weights or op.stream not in weights else nbytes * weights[op.stream]
                for f, x in hit[2]:
                    fbytes[f] += counted * x
                if per_link is not None:
                    np.add.at(per_link, hit[3], float(nbytes))
        first = add_messages(list(map(float, raw)), [now + hit[0] for hit in hits], list(map(itemgetter(1), hits)))
        messages_started += len(ss)
        batch_of.update(zip(range(first, first + len(ss)), ss, strict=True))
        if not kicked:
            kicked, kick_seq = True, next(seq)

    settle_next, inf = core.settle_next, math.inf
    settles = 0  # net.settles, added at the end

    for s in range(len(streams)):
        heappush(heap, (now, urgent, next(seq), INIT, s))
    while True:
        # Events scheduled for now at the normal priority wait in ``imm`` (in sequence order)
        # rather than in the heap; the heap's top goes first only if its key is smaller.
        if imm:
            if heap:
                h = heap[0]
                if h[0] == now and (h[1] < normal or (h[1] == normal and h[2] < imm[0][0])):
                    now, _, _, kind, arg = heappop(heap)
                else:
                    _, kind, arg = popleft()
            else:
                _, kind, arg = popleft()
        elif kicked and not (heap and heap[0][0] == now and (heap[0][1] < late or (
                heap[0][1] == late and heap[0][2] < kick_seq))) and (
                wake_t is None or wake_t != now or kick_seq < wake_seq):
            # the kick (now, late priority: after any urgent or normal event due now) is the next event
            kind = KICK
        elif wake_t is not None and (not heap or wake_t < heap[0][0] or (wake_t == heap[0][0] and (
                late < heap[0][1] or (late == heap[0][1] and wake_seq < heap[0][2])))):
            # the network's wake-up (late priority) is the next event
            now, wake_t = wake_t, None
            if kicked:  # the kick due now settles
                continue
            kind = KICK  # settle now (kicked is already False)
        elif ready and not (heap and heap[0][0] == now):
            now = run_ready()  # nothing else due now: the collective runs (its done event is due at its end)
            continue
        elif heap:
            now, _, _, kind, arg = heappop(heap)
        else:
            break
        if kind == DONE:
            processed[arg] = True
            w = waiting[arg]
            if w is not None:
                waiting[arg] = None
                if rounds and len(w) > 1:
                    start_round(w)
                else:
                    for s in w:
                        if s >= 0:
                            advance(s)
                        else:
                            collective(~s)
        elif kind == TIMER:  # the op the stream is at ends now
            ends_now(arg)
        elif kind == GOT:
            s, fin = arg
            if fin[0] > now:
                heappush(heap, (now + (float(fin[0]) - now), normal, next(seq), TIMER, s))
            else:
                ends_now(s)
        elif kind == GOTS:  # a round's completions: the GOT events of sequence numbers first, first + 1, ...
            got, i, first = arg
            while True:
                s, fin = got[i]
                if fin[0] > now:
                    heappush(heap, (now + (float(fin[0]) - now), normal, next(seq), TIMER, s))
                else:
                    ends_now(s)
                i += 1
                if i == len(got):
                    break
                if heap:  # an event pushed meanwhile that is due before the next GOT goes first (as above)
                    h = heap[0]
                    if h[0] == now and (h[1] < normal or (h[1] == normal and h[2] < first + i)):
                        imm.appendleft((first + i, GOTS, (got, i, first)))
                        break
        elif kind == KICK:
            kicked = False
            # LiveNetwork._settle
            # (the one wake-up of the current generation is kept beside the heap: every earlier
            # one is stale, which LiveNetwork's generation check would ignore when it fires)
            settles += 1
            done, nxt = settle_next(now)
            if rounds and len(done) > 1:  # one entry for them all, their sequence numbers reserved
                first = next(seq)
                seq = count(first + len(done))
                imm.append((first, GOTS, ([(batch_of.pop(bid), fin) for bid, fin in done], 0, first)))
            else:
                for bid, fin in done:
                    imm.append((next(seq), GOT, (batch_of.pop(bid), fin)))
            if nxt < inf:
                d = nxt - now
                wake_t, wake_seq = now + (d if not d < 0.0 else 0.0), next(seq)  # max(d, 0.0)
            else:
                wake_t = None
        elif kind == COLL:
            collective(arg)
        elif kind == RTIME:  # the reservation expires: its event (normal priority, now) resumes the collective
            imm.append((next(seq), RESUME, arg))
        elif kind in (HOLD, RESUME):
            step(arg)
        else:
            advance(arg)
    # FlowPricer.transfer's bookkeeping, once: one simulated step per message started
    started = messages_started  # (each message starts once: advance or start_messages counted it)
    if started:
        ctx.stats["steps_simulated"] += started
        pricer._used = True
    net.settles += settles
    if count_fam and n_fam:
        if log is not None:
            log.flush(fbytes)
        ctx.family_bytes[:] = fbytes


#: a message's route key and its bytes, read field by field over a round (_run_direct's start_messages)
_src_dst, _nbytes = attrgetter("src", "dst"), attrgetter("nbytes")


def _machine_local(topology: Topology):
    """Whether a collective's ranks sit on one machine (``paths.cuts_only``'s ``local``)."""
    machine = topology.machines().tolist()
    known: dict[tuple[int, ...], bool] = {}  # (a plan holds each group's collectives many times)

    def local(op) -> bool:
        ranks = op.ranks
        hit = known.get(ranks)
        if hit is None:
            m = machine[ranks[0]]
            hit = known[ranks] = m >= 0 and len(ranks) > 1 and all(machine[r] == m for r in ranks)
        return hit

    return local


def _local_collectives(ops, pricer, prepared: dict, local) -> dict | None:
    """op id -> :meth:`FlowPricer.reservable` steps of each machine-local collective of a direct plan, or None
    when one cannot run on the direct loop: a step that would run as flows, or a held link that a message or
    another group's (or stream's) collective crosses.  What is left never meets other traffic: the collectives
    of one group and stream run one after another (each member's stream waits for the one before), and the
    plan's other collectives are cuts (``paths.cuts_only``), so each step finds its links free and keeps them
    for its whole reservation, as :meth:`FlowPricer.collective` would."""
    found: dict[int, list] = {}
    owners: dict[tuple, int] = {}
    seen: set = set()
    held, whose = [], []
    mine = [op for op in ops if isinstance(op, Collective) and local(op)]
    again: dict = {}  # (group, preparation, stream) -> its steps, for a group's later collectives of one shape
    for op in mine:
        prep = prepared[op.id]
        shape = (op.ranks, id(prep), op.stream)
        entries = again.get(shape)
        if entries is not None:  # (the same steps and owner: their held links are in already)
            found[op.id] = entries
            continue
        entries = again[shape] = pricer.reservable(op, prep)
        if entries is None:
            return None
        found[op.id] = entries
        owner = owners.setdefault((op.ranks, op.stream), len(owners))
        for entry in entries:
            links = entry[2]
            if (id(links), owner) not in seen:  # (alike steps share their held links)
                seen.add((id(links), owner))
                held.append(links)
                whose.append(np.full(len(links), owner))
    if not held:  # (no local collective holds a link: zero bytes, no steps)
        return found
    links, group = np.concatenate(held), np.concatenate(whose)
    order = np.argsort(links, kind="stable")
    links, group = links[order], group[order]
    twice = links[1:] == links[:-1]
    if (group[1:][twice] != group[:-1][twice]).any():
        return None
    pairs = {(op.src, op.dst) for op in ops if type(op) is Transfer}
    crossed = [pricer.messages[pair][3] for pair in pairs]
    if crossed:
        held_link = np.zeros(len(pricer.net.core.capacity), dtype=bool)  # (np.isin's answer, without sorting)
        held_link[links] = True
        if held_link[np.concatenate(crossed)].any():
            return None
    return found


#: op types the direct loop tells apart: compute, message, collective (a subclass: checked with isinstance)
_KIND = {Compute: 0, Transfer: 1, Collective: 2}


def _prepare(runtime, op, topology: Topology, ppn: int | None):
    """The runtime's preparation of ``op`` (one place, which the ``keep`` reference's check counts)."""
    return runtime.prepare(op, topology, ppn)


def _stop_after(ids: frozenset[int], done: list, n: int) -> list:
    """The event loop's halt flag for ``EngineOptions.stop_after``: a list that becomes non-empty once the done
    events of every op in ``ids`` have been processed (a callback on each, so the run's other events pay
    nothing); empty for ever when ``ids`` is."""
    halt: list = []
    if not ids:
        return halt
    if max(ids) >= n:
        raise ConfigError(f"stop_after: op {max(ids)} is not in the plan (ops 0 to {n - 1})")
    left = [len(ids)]

    def ended(_event) -> None:
        left[0] -= 1
        if not left[0]:
            halt.append(True)

    for oid in sorted(ids):
        done[oid].callbacks.append(ended)
    return halt


def _paths(paths: Paths, ctx: Context) -> dict:
    """What the run records of its paths: :func:`choose`'s choice and the counts of those taken op by op."""
    unknown = sorted(set(ctx.taken) - set(TAKEN))
    if unknown:
        raise AssertionError(f"engine path {unknown[0]!r} taken but not listed in simcomm.engine.paths.TAKEN")
    return {**paths.to_dict(), "taken": {k: int(v) for k, v in sorted(ctx.taken.items()) if v}}


def _meta(ctx: Context, seed: int, chosen: dict) -> dict:
    stats: dict = dict(sorted(ctx.stats.items()))
    stats["seed"] = seed
    # What each collective really ran: (kind, algorithm asked, what ran, how many ops).
    stats["algorithms"] = [(k, a, ran, n) for (k, a, ran), n in sorted(chosen.items())]
    return stats

"""The op vocabulary: the contract between strategies and the engine.

A strategy speaks only in ops.  Each op has an integer ``id`` equal to its
position in the plan and a tuple of ``deps`` (ids of earlier ops that must
finish before it may start), so every plan is acyclic by construction.  The
engine never knows which strategy produced a plan, and a new engine fidelity
needs no strategy change.

Ops
---
:class:`Compute`
    ``seconds`` of work on one rank's device (category says what kind:
    ``compute``, ``dataload``, ``compression``, ``update`` ...).
:class:`Collective`
    A collective of ``kind`` (``allreduce``, ``allgather`` ...) over a group of
    ranks, ``nbytes`` with the size convention of :mod:`simcomm.collectives`,
    priced by ``algorithm`` (``auto``: the runtime the engine is handed chooses, the stack's; the engine
    has no default runtime).
:class:`Transfer`
    A point-to-point message of ``nbytes`` from ``src`` to ``dst``.

Streams: ops carry a ``stream`` name (``compute`` or ``comm`` by default).
:class:`PlanBuilder` chains ops issued on the same (rank, stream) in program
order by adding dependencies, like CUDA streams, so compute and communication
of one rank overlap unless a dependency says otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace

from simcomm.errors import ConfigError, PlanError

__all__ = ["Compute", "Collective", "Transfer", "Op", "CommPlan", "IterationInfo", "PlanBuilder", "MAX_PLAN_OPS"]

#: the largest plan a run may build (ps at 1 024 GPUs is 0.66 M ops; a 175B layout on 1 024 GPUs ~0.5 M)
MAX_PLAN_OPS = 15_000_000


@dataclass(frozen=True, slots=True)
class Compute:
    """``seconds`` of device work on ``rank``."""

    id: int
    rank: int
    seconds: float
    deps: tuple[int, ...] = ()
    label: str = ""
    stream: str = "compute"
    category: str = "compute"

    @property
    def ranks(self) -> tuple[int, ...]:
        return (self.rank,)


@dataclass(frozen=True, slots=True)
class Collective:
    """A collective over ``ranks`` (group order defines ring order and root index)."""

    id: int
    kind: str
    ranks: tuple[int, ...]
    nbytes: float
    algorithm: str = "auto"
    deps: tuple[int, ...] = ()
    label: str = ""
    root: int = 0  # index into ``ranks`` for rooted collectives
    stream: str = "comm"
    category: str = "comm"


@dataclass(frozen=True, slots=True)
class Transfer:
    """A point-to-point message; it occupies ``src``'s stream."""

    id: int
    src: int
    dst: int
    nbytes: float
    deps: tuple[int, ...] = ()
    label: str = ""
    stream: str = "comm"
    category: str = "comm"

    @property
    def ranks(self) -> tuple[int, ...]:
        return (self.src, self.dst)


Op = Compute | Collective | Transfer


@dataclass(frozen=True)
class IterationInfo:
    """How the pipeline reads a plan as training iterations (typed; the strategies' side of the contract).

    ``kind`` names the kind of iteration in reports.  A plan that holds more than one
    iteration (to capture overlap with the next one) sets ``period = (a, b)``: its
    iteration time is ``end[b] - end[a]``; ``period_ranks`` gives each rank's own
    ``(a, b)`` (a rank's finish, for per-rank means); ``iterations_in_plan`` divides
    its traffic per iteration.  ``assumed`` lines are printed with the result.
    ``measured_ranks``: these ranks stand for all (a plan that simulates one of several
    identical replicas in full, the others only where they communicate with it); the
    critical rank and per-rank means are taken over them.  None: every rank.
    ``samples``: samples one iteration trains when the strategy sets its own global batch
    (a large-model layout); None: the workload's per-rank batch × ranks.
    ``traffic_weights``: ``(stream, weight)`` pairs: the link bytes of that stream's ops count
    ``weight`` times (a plan that simulates one of several identical replicas counts their
    traffic with it; engine option ``traffic_weights``).
    ``paths``: the planning paths the strategy chose where it chose them (a fold of workers, replicas,
    lanes or messages: name -> a small JSON-able record, ``{"used": bool, ...}``); the run reports them beside
    the engine's paths (each kind's ``engine`` in ``--json``).
    """

    kind: str = "every iteration"
    period: tuple[int, int] | None = None
    period_ranks: Mapping[int, tuple[int, int]] | None = None
    iterations_in_plan: int = 1
    assumed: tuple[str, ...] = ()
    measured_ranks: tuple[int, ...] | None = None
    samples: int | None = None
    traffic_weights: tuple[tuple[str, float], ...] = ()
    paths: Mapping[str, Mapping] = field(default_factory=dict)

    def with_assumed(self, *lines: str) -> IterationInfo:
        return replace(self, assumed=tuple(self.assumed) + tuple(lines))


@dataclass(frozen=True)
class CommPlan:
    """An acyclic op graph over ``n_ranks`` ranks, how to read it as iterations, and free-form diagnostics.

    ``info`` is what the pipeline reads (:class:`IterationInfo`); ``meta`` holds a
    strategy's own diagnostics (bytes pushed, peers, ...) that reports and tests may
    show but no stage depends on.
    """

    n_ranks: int
    ops: tuple[Op, ...]
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    info: IterationInfo = field(default_factory=IterationInfo, compare=False, hash=False)

    def validate(self) -> CommPlan:
        """Check the contract; raise :class:`PlanError` with the first violation."""
        n = self.n_ranks
        if n < 1:
            raise PlanError(f"plan has {n} ranks; need at least 1")
        measured = self.info.measured_ranks
        if measured is not None and (not measured or any(not 0 <= r < n for r in measured)
                                     or len(set(measured)) != len(measured)):
            raise PlanError(f"plan's measured ranks must be distinct ranks in 0..{n - 1}, at least one")
        for i, op in enumerate(self.ops):
            if op.id != i:
                raise PlanError(f"op at position {i} has id {op.id}; ids must equal positions")
            for d in op.deps:
                if not 0 <= d < i:
                    raise PlanError(f"op {i} ({op.label or type(op).__name__}) depends on {d}, "
                                    "which is not an earlier op")
            # The checks below, in this order, by kind of op (plans hold hundreds of thousands).
            if isinstance(op, Compute):
                if not 0 <= op.rank < n:
                    raise PlanError(f"op {i} uses ranks {op.ranks}, outside 0..{n - 1}")
                if not op.seconds >= 0:
                    raise PlanError(f"op {i} has negative or NaN compute time {op.seconds}")
                continue
            if isinstance(op, Transfer):
                if not (0 <= op.src < n and 0 <= op.dst < n):
                    raise PlanError(f"op {i} uses ranks {op.ranks}, outside 0..{n - 1}")
                if not op.nbytes >= 0:
                    raise PlanError(f"op {i} has negative or NaN byte count {op.nbytes}")
                if op.src == op.dst:
                    raise PlanError(f"op {i}: transfer from rank {op.src} to itself")
                continue
            ranks = op.ranks
            if any(not 0 <= r < n for r in ranks):
                raise PlanError(f"op {i} uses ranks {ranks}, outside 0..{n - 1}")
            if isinstance(op, Collective):
                if not op.nbytes >= 0:
                    raise PlanError(f"op {i} has negative or NaN byte count {op.nbytes}")
                if len(set(ranks)) != len(ranks) or not ranks:
                    raise PlanError(f"op {i}: collective group must be non-empty with distinct ranks")
                if not 0 <= op.root < len(ranks):
                    raise PlanError(f"op {i}: root index {op.root} outside its group of {len(ranks)}")
        return self


def _setters(cls) -> dict:
    """Each field's slot setter (the slot descriptor's ``__set__``), by name."""
    return {f.name: getattr(cls, f.name).__set__ for f in fields(cls)}


_COMPUTE_SET, _TRANSFER_SET = _setters(Compute), _setters(Transfer)


def _new_compute(id, rank, seconds, deps, label, stream, category, _new=object.__new__, _cls=Compute,
                 _id=_COMPUTE_SET["id"], _rank=_COMPUTE_SET["rank"], _seconds=_COMPUTE_SET["seconds"],
                 _deps=_COMPUTE_SET["deps"], _label=_COMPUTE_SET["label"], _stream=_COMPUTE_SET["stream"],
                 _category=_COMPUTE_SET["category"]) -> Compute:
    """``Compute(id, rank, ...)``, the same instance, at about half the cost.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``;
    the slots' own descriptors set the same fields directly (plans hold 10^5-10^6 ops).
    """
    op = _new(_cls)
    _id(op, id)
    _rank(op, rank)
    _seconds(op, seconds)
    _deps(op, deps)
    _label(op, label)
    _stream(op, stream)
    _category(op, category)
    return op


def _new_transfer(id, src, dst, nbytes, deps, label, stream, category, _new=object.__new__, _cls=Transfer,
                  _id=_TRANSFER_SET["id"], _src=_TRANSFER_SET["src"], _dst=_TRANSFER_SET["dst"],
                  _nbytes=_TRANSFER_SET["nbytes"], _deps=_TRANSFER_SET["deps"], _label=_TRANSFER_SET["label"],
                  _stream=_TRANSFER_SET["stream"], _category=_TRANSFER_SET["category"]) -> Transfer:
    """``Transfer(id, src, ...)``, the same instance, as :func:`_new_compute` makes one."""
    op = _new(_cls)
    _id(op, id)
    _src(op, src)
    _dst(op, dst)
    _nbytes(op, nbytes)
    _deps(op, deps)
    _label(op, label)
    _stream(op, stream)
    _category(op, category)
    return op


def _with_prev(after, prev) -> tuple[int, ...]:
    """``tuple(sorted(set(after) | {prev}))`` (no ``prev`` when None), without a set for 0 or 1 ``after``."""
    if type(after) is tuple or type(after) is list:
        n = len(after)
        if n == 0:
            return () if prev is None else (prev,)
        if n == 1:
            a = after[0]
            if prev is None or prev == a:  # the set keeps ``a``, the element added first
                return (a,)
            return (a, prev) if a < prev else (prev, a)
        if n == 2 and prev is not None:
            a, c = after
            if a != c:
                if prev != a and prev != c:  # three distinct: nothing for a set to drop
                    return tuple(sorted((a, c, prev)))
                return (a, c) if a < c else (c, a)  # prev is one of the two (a tree's merge after its message)
    deps = set(after)
    if prev is not None:
        deps.add(prev)
    return tuple(sorted(deps))


class PlanBuilder:
    """Append ops with automatic per-(rank, stream) ordering.

    Each ``add_*`` method returns the new op's id.  ``after`` lists extra
    dependencies; the previous op on each involved (rank, stream) is added
    automatically so that a stream executes in program order.
    """

    def __init__(self, n_ranks: int):
        self.n_ranks = n_ranks
        self._ops: list[Op] = []
        self._tail: dict[tuple[int, str], int] = {}

    def _deps(self, ranks: Iterable[int], stream: str, after: Iterable[int]) -> tuple[int, ...]:
        deps = set(after)
        for r in ranks:
            prev = self._tail.get((r, stream))
            if prev is not None:
                deps.add(prev)
        return tuple(sorted(deps))

    def _push(self, op: Op, ranks: Iterable[int]) -> int:
        self._append(op)
        for r in ranks:
            self._tail[(r, op.stream)] = op.id
        return op.id

    # compute() and transfer() inline _deps (one rank: _with_prev) and _append: a plan of messages calls them
    # ~10^6 times.
    def compute(self, rank: int, seconds: float, *, after: Iterable[int] = (), label: str = "",
                stream: str = "compute", category: str = "compute") -> int:
        ops, tail, key = self._ops, self._tail, (rank, stream)
        oid = len(ops)
        if oid >= MAX_PLAN_OPS:
            self._too_many()
        ops.append(_new_compute(oid, rank, float(seconds), _with_prev(after, tail.get(key)), label, stream,
                                category))
        tail[key] = oid
        return oid

    def collective(self, kind: str, ranks: Sequence[int], nbytes: float, *, algorithm: str = "auto",
                   after: Iterable[int] = (), label: str = "", root: int = 0,
                   stream: str = "comm", category: str = "comm") -> int:
        ranks = tuple(ranks)
        deps = self._deps(ranks, stream, after)
        op = Collective(len(self._ops), kind, ranks, float(nbytes), algorithm, deps, label, root, stream, category)
        return self._push(op, ranks)

    def transfer(self, src: int, dst: int, nbytes: float, *, after: Iterable[int] = (), label: str = "",
                 stream: str = "comm", category: str = "comm") -> int:
        ops, tail, key = self._ops, self._tail, (src, stream)
        oid = len(ops)
        if oid >= MAX_PLAN_OPS:
            self._too_many()
        ops.append(_new_transfer(oid, src, dst, float(nbytes), _with_prev(after, tail.get(key)), label, stream,
                                 category))
        tail[key] = oid
        return oid

    def transfers(self, srcs: Sequence[int], dsts: Sequence[int], nbytes: float, *, afters: Sequence[Sequence[int]],
                  labels: Sequence[str], stream: str = "comm", category: str = "comm") -> list[int]:
        """:meth:`transfer` of ``nbytes`` from each ``srcs[i]`` to ``dsts[i]`` after ``afters[i]`` in turn, the same
        ops, made in one call (a gossip round at 16 384 GPUs is 16 384 messages); their ids."""
        ops, tail = self._ops, self._tail
        first = oid = len(ops)
        if first + len(srcs) > MAX_PLAN_OPS:
            self._too_many()
        nb = float(nbytes)
        append, get = ops.append, tail.get
        for src, dst, after, label in zip(srcs, dsts, afters, labels, strict=True):
            key = (src, stream)
            append(_new_transfer(oid, src, dst, nb, _with_prev(after, get(key)), label, stream, category))
            tail[key] = oid
            oid += 1
        return list(range(first, oid))

    def computes(self, ranks: Sequence[int], seconds: Sequence[float], *, after: Sequence[int] = (), label: str = "",
                 stream: str = "compute", category: str = "compute") -> list[int]:
        """:meth:`compute` for each of ``ranks`` in turn (``seconds`` by position, ``after`` the same for all);
        their ids.  A builder may make them with less work per call (:class:`~simcomm.strategies._fold.FoldingBuilder`)."""
        compute = self.compute
        return [compute(r, x, after=after, label=label, stream=stream, category=category)
                for r, x in zip(ranks, seconds, strict=True)]

    def tail(self, rank: int, stream: str) -> int | None:
        """Id of the last op issued on (rank, stream), if any."""
        return self._tail.get((rank, stream))

    def _append(self, op: Op) -> None:
        if len(self._ops) >= MAX_PLAN_OPS:
            self._too_many()
        self._ops.append(op)

    def _too_many(self) -> None:
        # A plan takes ~0.3 kB per op to build and ~1 kB with its run: refuse a setting whose plan would exhaust it,
        # with the numbers, before the machine starts swapping (issue 15: sizes that exhaust memory).
        raise ConfigError(f"plan: this setting needs more than {MAX_PLAN_OPS:,} ops on {self.n_ranks:,} ranks "
                              f"(about {MAX_PLAN_OPS * 1000 / 1e9:.0f} GB to build and run); simulate fewer nodes or "
                              "a strategy with collective ops, or split the question (simcomm whatif)")

    def build(self, *, kind: str = "every iteration", period: tuple[int, int] | None = None,
              period_ranks: Mapping[int, tuple[int, int]] | None = None, iterations_in_plan: int = 1,
              assumed: tuple[str, ...] = (), measured_ranks: Sequence[int] | None = None,
              samples: int | None = None, traffic_weights: Mapping[str, float] | None = None,
              paths: Mapping[str, Mapping] | None = None, **meta) -> CommPlan:
        """The plan: the iteration protocol as typed fields, anything else as diagnostics in ``meta``."""
        info = IterationInfo(kind, period, period_ranks, iterations_in_plan, tuple(assumed),
                             None if measured_ranks is None else tuple(measured_ranks), samples,
                             tuple(sorted((traffic_weights or {}).items())), dict(paths or {}))
        return CommPlan(self.n_ranks, tuple(self._ops), dict(meta), info).validate()

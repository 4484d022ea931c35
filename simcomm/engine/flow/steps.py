"""A collective's routed steps for the flow pricer: derived from the routes, translated from an alike group, or
counted from pair counts (:class:`StepDerivation`, a mixin of :class:`~simcomm.engine.flow.pricer.FlowPricer`).

Kept apart from the pricer because it is a separate question: *what* each step of a preparation on a group
is (its routes, latencies, held links, bytes per link family, closed form), worked out once per (group,
preparation) and reused, where the pricer decides *how* the steps run on the shared network.  The mixin reads
the pricer's state set in its ``__init__`` (``ctx``, ``net``, ``fam``, ``closed_from``, ``alike_steps`` and
the caches ``_routes``, ``_shapes``, ``_patterns``, ``_templates``, ``_kept_steps``, ``_kept_runs``,
``_moved``).
"""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any

import numpy as np

from simcomm.collectives.base import Step
from simcomm.engine.flow.closed import Unrouted, closed_period, counted_step
from simcomm.engine.schedule import PRIME_CHUNK, RoutedStep, route_step, step_routes, step_routes_many
from simcomm.topologies.wiring import unique_ids

__all__ = ["StepDerivation"]


def _scalable(routed: RoutedStep) -> bool:
    """Same bytes and route latency on every transfer, positive bytes, no reduction.

    Run alone, such a step's flows all enter their bandwidth phase together and
    its max-min rates never depend on the byte count, so every finish time is
    ``latency + bytes x (a pattern constant)``: one isolated run prices the
    pattern for every size (an all-to-all's pairwise steps on every layer).
    """
    if len(routed) == 0 or len(routed.red_ranks):
        return False
    nb, lat = routed.nbytes, routed.latency
    return bool(nb[0] > 0 and (nb == nb[0]).all() and (lat == lat[0]).all())


#: routed steps of small collective preparations (the executor's kept ones: at most this many transfers), kept
#: per topology and the run settings ``FlowPricer._steps`` reads, for later runs (``keep`` reference: not kept)
_KEEP_TRANSFERS = 4096
_KEPT_STEPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class StepDerivation:
    """The routed steps of a collective (mixin of :class:`~simcomm.engine.flow.pricer.FlowPricer`)."""

    # set by FlowPricer.__init__ (declared here for the type checker)
    ctx: Any
    net: Any
    fam: np.ndarray | None
    closed_from: int
    alike_steps: bool
    _routes: dict
    _shapes: dict
    _patterns: dict
    _templates: dict
    _held_of: dict
    _kept_steps: dict | None
    _kept_runs: dict | None
    _moved: np.ndarray | None

    def _steps(self, op, prep) -> list:
        """Per step of ``prep`` on ``op``'s group: ``(routed, scalable key, held links, family bytes, closed)``.

        Routing, NCCL's latency, the scalable test, the held links and the bytes per link
        family depend on the group and the preparation alone, so they are worked out once
        per (group, preparation) and reused by every collective of that shape (a
        tensor-parallel layout runs the same few shapes ~10^5 times).  ``family bytes`` is
        None when the run counts bytes per individual link (``busiest_links``) or not at all.
        """
        key = (tuple(op.ranks), id(prep))
        hit = self._shapes.get(key)
        if hit is None and self._kept_steps is not None and self._moved is None:
            hit = self._kept_steps.get(key)
            if hit is not None:
                self._shapes[key] = hit
        if hit is not None:
            return hit[1]
        group = np.asarray(op.ranks, dtype=np.int64)
        gkey = group.tobytes()
        out = []
        closed_from = self.closed_from
        transfers = 0  # over the steps (whether they are kept)
        for i, step in enumerate(prep.steps):
            size = len(step)
            transfers += size
            latency = None if prep.latency is None else prep.latency[i]
            large = bool(closed_from) and size >= closed_from  # (_counted finds nothing in a smaller step)
            counted = self._counted(group, gkey, step, latency) if large else None
            if counted is not None:
                out.append(counted)
                continue
            pkey = (gkey, step.src.tobytes(), step.dst.tobytes())  # the (group, src, dst) pattern
            pattern = self._pattern(group, gkey, step, pkey) if self.alike_steps and not large else None
            if pattern is not None:
                tkey = (id(prep), i, pattern[0])
                made = self._templates.get(tkey)
                if made is not None:
                    out.append(self._translated(made, pattern, group, pkey))
                    continue
            entry = self._derived(group, gkey, step, latency)
            if pattern is not None:
                # the receivers that reduce as indices into the group (increasing: the same order in any alike one)
                self._templates[tkey] = (prep, entry, np.searchsorted(group, entry[0].red_ranks))
            out.append(entry)
        self._shapes[key] = (prep, out)  # the preparation is kept alive with its id
        # (not with comm_cpu's per-rank bytes, which route every step: _counted)
        if self._kept_steps is not None and self._kept_runs is not None and self._moved is None \
                and transfers <= _KEEP_TRANSFERS:
            self._kept_steps[key] = (prep, out)
            for routed, *_ in out:
                self._kept_runs.setdefault(id(routed), (routed, None))
        return out

    def prime_steps(self, ops, prepared: dict) -> None:
        """Route the small steps (fewer than :data:`~simcomm.engine.schedule.PRIME_CHUNK` transfers) of the
        collectives of ``ops`` whose steps are not known yet in a few batches
        (:func:`~simcomm.engine.schedule.step_routes_many`), for :meth:`_steps` to find in ``_routes``: the same
        arrays it would route one pattern at a time (hierarchical-allreduce at 16 384 GPUs: 2 048 machines'
        reduce-scatters and all-gathers).  Only steps that :meth:`_steps` routes by ``step_routes`` are primed:
        not a large step (counted or closed) nor a group's steps kept from an earlier run."""
        kept = self._kept_steps if self._moved is None else None
        seen: set = set()
        items = []
        for op in ops:
            prep = prepared[op.id]
            key = (op.ranks, id(prep))
            if key in seen:
                continue
            seen.add(key)
            if key in self._shapes or (kept is not None and key in kept):
                continue
            group = None
            for step in prep.steps:
                if type(step) is Step and 0 < len(step) < PRIME_CHUNK:
                    if group is None:
                        group = np.asarray(op.ranks, dtype=np.int64)
                        gkey = group.tobytes()
                    items.append((group, gkey, step))
        if items:
            step_routes_many(self.ctx.topology, items, self._routes)

    def _derived(self, group: np.ndarray, gkey: bytes, step, latency: float | None) -> tuple:
        """:meth:`_steps`' entry of one step of a group, derived from its routes (the reference of
        :meth:`_translated`)."""
        ctx = self.ctx
        routed = route_step(ctx.topology, group, step, ctx.gamma, self._routes, gkey)
        if latency is not None:
            # NCCL's pipelined steps: every transfer waits the tuning model's latency, not the route's.
            routed = replace(routed, latency=np.full(len(routed), float(latency)))
        skey = ((gkey, step.src.tobytes(), step.dst.tobytes(), float(routed.latency[0]))
                if _scalable(routed) else None)
        found = (closed_period(routed, self.net.core.capacity)
                 if self.closed_from and len(routed) >= self.closed_from else None)
        closed = None if found is None else found[0]
        # the links a reservation of this step holds (see LiveNetwork.free)
        held = (self._held(routed.links)
                if ctx.paths.pricing != "plain" and (step.repeat > 1 or skey is not None or closed is not None)
                else None)
        fbytes = None
        if ctx.link_bytes and len(routed) and len(ctx.families) and ctx.per_link is None:
            # a closed step's too, crossing by crossing as its flows would count them: the same floats (summed
            # from its link loads instead, the bytes at 16 384 GPUs moved by up to 10^-11)
            fbytes = routed.family_bytes(ctx.family_of_link, len(ctx.families))
        return routed, skey, held, fbytes, closed

    def _held(self, links: np.ndarray) -> np.ndarray:
        """The held links of a step's concatenated routes ``links`` (sorted ids), worked out once per routes:
        ``links`` is a pattern's array in ``_routes``, shared by every size of the pattern (hierarchical-allreduce's
        8 lanes' trees at 16 384 GPUs cross 3 x 10^5 links each, in 4 sizes), and its held links are shared by
        their entries as an alike group's are (:meth:`_translated`)."""
        hit = self._held_of.get(id(links))
        if hit is None or hit[0] is not links:  # (an id names its array only while the array is held here)
            hit = self._held_of[id(links)] = (links, unique_ids(links, len(self.ctx.topology.capacity)))
        return hit[1]

    def _pattern(self, group: np.ndarray, gkey: bytes, step, key: tuple) -> list | None:
        """``[signature, routes, held links or None]`` of ``step``'s (src, dst) pattern on ``group``, or None
        when the group's ranks do not increase (its steps are then derived on their own).

        The signature is everything :meth:`_derived` reads of the group besides its ranks' and links' ids:
        each route's latency and length, the family of each link in route order and each member's reduction
        rate.  Two increasing groups with one signature derive a preparation's step to the same nbytes,
        latencies, reductions (the same receivers by position, in the same order), scalable test and bytes
        per family, bit for bit; only the ranks, the links and the held links (:meth:`_translated`) differ.
        ``key``: ``(gkey, src bytes, dst bytes)`` of the step's pattern.
        """
        pattern = self._patterns.get(key)
        if pattern is None:
            if len(group) > 1 and not bool((group[1:] > group[:-1]).all()):
                pattern = self._patterns[key] = []
            else:
                ctx = self.ctx
                routes = step_routes(ctx.topology, group, step, self._routes, gkey)
                latency, lens, links = routes[0], routes[1], routes[2]
                sig = (latency.tobytes(), lens.tobytes(), ctx.family_of_link[links].tobytes(),
                       ctx.gamma[group].tobytes())
                pattern = self._patterns[key] = [sig, routes, None]
        return pattern or None

    def _translated(self, made: tuple, pattern: list, group: np.ndarray, pkey: tuple) -> tuple:
        """:meth:`_steps`' entry of a step an alike group derived (``made``: that group's preparation, entry
        and reducing receivers by position), for ``group`` (its ``pattern``, :meth:`_pattern`, of key
        ``pkey``: ``(group bytes, src bytes, dst bytes)``): the same
        floats as :meth:`_derived` on this group, without deriving them again (hierarchical-crossover-sgd at
        16 384 GPUs derives ~22 500 (group, segment size) steps of 2 048 alike machines)."""
        _, (routed0, skey0, held0, fbytes, closed), red_local = made
        _, (_, lens, links, src, dst, _), held = pattern
        red_ranks = group[red_local] if len(red_local) else routed0.red_ranks
        routed = RoutedStep(src, dst, routed0.nbytes, routed0.latency, lens, links, routed0.repeat, red_ranks,
                            routed0.red_seconds, routed0.red_slot)
        skey = None if skey0 is None else (*pkey, skey0[3])
        if held0 is not None and held is None:
            held = pattern[2] = unique_ids(links, len(self.ctx.topology.capacity))
        self.ctx.took("alike_steps")
        return routed, skey, None if held0 is None else held, fbytes, closed

    def _counted(self, group: np.ndarray, gkey: bytes, step, latency: float | None) -> tuple | None:
        """:meth:`_steps`' entry of a large step of blocks of pairs priced from its pair counts
        (:func:`~simcomm.engine.flow.closed.counted_step`), or None."""
        ctx = self.ctx
        if not self.closed_from or len(step) < self.closed_from or self.fam is not None or self._moved is not None:
            return None
        found = counted_step(ctx.topology, group, step, latency, self.net.core.capacity)
        if found is None:
            return None
        closed, loads, counts = found
        assert latency is not None  # (counted_step takes only steps of one latency)
        fixed = float(latency)
        fbytes = None  # (with the busiest links asked for, count_bytes counts both from the blocks)
        if ctx.link_bytes and len(ctx.families) and ctx.per_link is None:
            fbytes = np.bincount(ctx.family_of_link, weights=loads, minlength=len(ctx.families))

        def make() -> RoutedStep:
            routed = route_step(ctx.topology, group, step, ctx.gamma, self._routes, gkey)
            return replace(routed, latency=np.full(len(routed), fixed))

        return Unrouted(make, step.repeat, step.blocks, counts), None, np.flatnonzero(loads > 0), fbytes, closed

"""The scalar twin of the fluid core (simcomm.engine.fluid.small) gives the array core's
answer bit for bit: every finish time, every statistic, every usage sample and
every op start and end are the same floats, with and without event resolution,
across switches between the two forms."""

import numpy as np
import pytest
from flowcases import coo, fifo_server_plan, flow_instances, gossip_plan
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine import simulate
from simcomm.engine.fluid.core import FluidCore, run_isolated
from simcomm.engine.fluid.maxmin import maxmin_rates, maxmin_small
from simcomm.engine.fluid.small import MAX_LIVE
from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.fat_tree import fat_tree
from simcomm.topologies.two_level import two_level

LINK = LinkClass("small-link", 1e9, 1e-6, "custom")


def instances(max_flows):
    caps = st.sampled_from([1.0, 2.0, 3.0, 7.5, 10.0, 0.25]) | st.floats(0.1, 100.0)
    return flow_instances(max_links=8, caps=caps, max_route=4, max_flows=max_flows)


def same(a, b):
    """Bit-for-bit equality of two float arrays (NaN equal to NaN)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


@settings(max_examples=200, deadline=None)
@given(instances(max_flows=12), st.data())
def test_scalar_solver_is_the_vectorised_one_bit_for_bit(case, data):
    caps, routes = case
    if data.draw(st.booleans()):  # residual capacities with zeros and negatives, as in re-solves
        caps = caps - np.array(data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 200.0]),
                                                  min_size=len(caps), max_size=len(caps))))
    rates, rounds = maxmin_small([list(r) for r in routes], dict(enumerate(caps.tolist())))
    ref, ref_rounds = maxmin_rates(*coo(routes), len(routes), caps)
    assert same(rates, ref) and rounds == ref_rounds


def _run_both(caps, routes, sizes, lats, **kw):
    link, lens = np.concatenate([np.asarray(r, dtype=np.int64) for r in routes]), np.array([len(r) for r in routes])
    nb, lat = np.array(sizes[:len(routes)], float), np.array(lats[:len(routes)], float)
    fam = np.arange(len(caps)) % 3
    a = run_isolated(caps, nb, lat, lens, link, family_of_link=fam, **kw)
    b = run_isolated(caps, nb, lat, lens, link, family_of_link=fam, form="numpy", **kw)
    return a, b


@settings(max_examples=150, deadline=None)
@given(instances(max_flows=MAX_LIVE + 4),
       st.lists(st.sampled_from([0.0, 1.0, 2.0, 5.0]) | st.floats(0.0, 50.0), min_size=20, max_size=20),
       st.lists(st.sampled_from([0.0, 0.1, 0.5]) | st.floats(0.0, 3.0), min_size=20, max_size=20),
       st.sampled_from([0.0, 0.0, 0.01, 0.3]), st.sampled_from([None, 0.2, 0.6]))
def test_isolated_runs_are_bit_identical(case, sizes, lats, resolution, stop):
    # Up to MAX_LIVE + 4 flows: larger batches start on the arrays, the rest in scalar form.
    caps, routes = case
    until = np.inf
    if stop is not None:
        full, _ = _run_both(caps, routes, sizes, lats, resolution=resolution)
        until = float(np.nanmax(full.finish)) * stop if np.isfinite(np.nanmax(full.finish)) else np.inf
    a, b = _run_both(caps, routes, sizes, lats, resolution=resolution, until=until)
    assert same(a.finish, b.finish) and same(a.rem, b.rem) and same(a.t_bw, b.t_bw)
    assert a.solves == b.solves and a.merged == b.merged and a.at == b.at
    assert len(a.usage) == len(b.usage)
    for (ta, fa), (tb, fb) in zip(a.usage, b.usage, strict=False):
        assert same(ta, tb) and same(fa, fb)


def _staggered(core, caps, batches):
    """Feed ``batches`` (start time, routes, sizes, latencies) to ``core``; return every settle's output."""
    out, pending = [], sorted(batches, key=lambda x: x[0])
    t, k = 0.0, 0
    while k < len(pending) or not core.empty:
        nxt = core.next_time()
        if k < len(pending) and pending[k][0] <= nxt:
            t = pending[k][0]
            while k < len(pending) and pending[k][0] == t:
                _, routes, sizes, lats = pending[k]
                link = np.concatenate([np.asarray(r, dtype=np.int64) for r in routes])
                core.add(np.array(sizes, float), t + np.array(lats, float), np.array([len(r) for r in routes]), link)
                k += 1
        else:
            t = nxt
        out.append((t, [(b, f.tobytes()) for b, f in core.settle(t)]))
    return out, (core.solves, core.rounds, core.full_solves, core.merged)


@settings(max_examples=80, deadline=None)
@given(instances(max_flows=6), st.lists(st.tuples(st.floats(0.0, 5.0), st.integers(0, 5),
                                                   st.floats(0.1, 20.0), st.floats(0.0, 1.0)),
                                         min_size=1, max_size=40),
       st.sampled_from([0.0, 0.05]))
def test_flows_arriving_over_time_are_bit_identical(case, arrivals, resolution):
    # Batches arrive while others run (re-solves of every kind, compactions, switches of form
    # when more than MAX_LIVE flows are live): every settle reports the same batches and times.
    caps, routes = case
    batches = {}
    for t, i, size, lat in arrivals:
        r = routes[i % len(routes)]
        batches.setdefault(round(t, 1), []).append((r, size, lat))
    feed = [(t, [x[0] for x in v], [x[1] for x in v], [x[2] for x in v]) for t, v in batches.items()]
    a = _staggered(FluidCore(caps, resolution=resolution), caps, feed)
    b = _staggered(FluidCore(caps, "numpy", resolution=resolution), caps, feed)
    assert a == b


def test_a_lone_message_chain_stays_scalar_and_matches():
    # One message at a time over a two-hop route: the scalar form's whole reason to exist.
    caps = np.array([4.0, 2.0, 8.0])
    core, ref = FluidCore(caps), FluidCore(caps, "numpy")
    for c in (core, ref):
        t = 0.0
        for k in range(50):
            c.add(np.array([1.0 + k % 3]), np.array([t + 0.01]), np.array([2]), np.array([k % 2, 2]))
            c.settle(t)
            while not c.empty:
                t = c.next_time()
                c.settle(t)
    assert core._small is not None and ref._small is None
    assert (core.t, core.solves, core.rounds) == (ref.t, ref.solves, ref.rounds)
    # Alone, a message over link 0 (4 B/s) or link 1 (2 B/s), then the shared link 2 (8 B/s), gets its tightest link.
    assert core.t == pytest.approx(50 * 0.01 + sum((1.0 + k % 3) / (4.0 if k % 2 == 0 else 2.0) for k in range(50)),
                                   rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_engine_runs_are_bit_identical_with_and_without_the_scalar_core(seed):
    topo = two_level(4, 4, nic_link="ib-edr", inter="fat-tree") \
        if seed == 2 else fat_tree(4, link=LINK, levels=2, oversubscription=2)
    plan = gossip_plan(topo.n_ranks, seed, stagger=2e-3, per_rank=3, sizes=[1e5, 4e5, 2e6], ring_bytes=3e6)
    for kw in ({}, {"resolution": 0.02}, {"record_link_usage": True}, {"comm_cpu": 1e-10}):
        a = simulate(plan, topo, runtime=MPICH, **kw)
        b = simulate(plan, topo, reference={"scalar"}, runtime=MPICH, **kw)
        assert same(a.start, b.start) and same(a.end, b.end)
        assert a.meta == b.meta and a.link_class_bytes == b.link_class_bytes


def test_a_parameter_server_plan_is_bit_identical():
    # A FIFO server: every worker's pushes queue into rank 0, pulls queue out of it.
    topo = fat_tree(4, link=LINK, levels=2)
    plan = fifo_server_plan(topo.n_ranks, 5, compute=1e-4, nbytes=1e5, update=1e-5)
    a = simulate(plan, topo, resolution=0.01, runtime=MPICH)
    ref = simulate(plan, topo, resolution=0.01, reference={"scalar"}, runtime=MPICH)
    assert same(a.start, ref.start) and same(a.end, ref.end) and a.meta == ref.meta


def test_the_option_is_checked():
    plan = PlanBuilder(2)
    plan.transfer(0, 1, 1.0)
    with pytest.raises(ConfigError, match="reference: 'scalr' is unknown; valid choices: one_pass, direct"):
        simulate(plan.build(), fat_tree(4, link=LINK, levels=2), reference={"scalr"}, runtime=MPICH)
    with pytest.raises(ConfigError, match="reference: 'scalar' must be a set of names"):
        simulate(plan.build(), fat_tree(4, link=LINK, levels=2), reference="scalar", runtime=MPICH)
    with pytest.raises(ConfigError, match="max_live: 0 must be a positive integer"):
        simulate(plan.build(), fat_tree(4, link=LINK, levels=2), max_live=0, runtime=MPICH)


def test_a_route_crossing_a_link_twice_stays_with_the_arrays():
    # prune.route_matrix counts a looping route's link pairs once per position pair; the scalar
    # form does not repeat that, so such flows are left to the arrays: the same answer either way.
    caps = np.array([0.5, 0.5, 3.0, 4.0, 4.0, 0.5, 1.0, 1.0])
    loop = [6, 5, 6]
    feed = [(0.0, [[3], [2, 4]], [9.0, 8.0], [0.0, 0.1]), (0.5, [loop], [3.0], [0.0]),
            (0.7, [[7, 6], loop], [2.0, 3.0], [0.1, 0.2])]
    assert _staggered(FluidCore(caps), caps, feed) == _staggered(FluidCore(caps, "numpy"), caps, feed)
    core = FluidCore(caps)
    core.add(np.array([1.0]), np.array([0.0]), np.array([2]), np.array([3, 4]))
    core.settle(0.0)
    assert core._small is not None
    core.add(np.array([1.0]), np.array([0.0]), np.array([3]), np.array(loop))
    core.settle(0.0)
    assert core._small is None and core.n_live == 2


def _state(core):
    """Per live flow (slot order): bytes left, rate, when last re-solved, next change, pruned row;
    and the load and flow count of every link on those rows."""
    if core._small is not None:
        sm = core._small
        flows = list(zip(sm.rem, sm.rate, sm.t_ref, sm.t_next, sm.phase, sm.row, strict=False))
        load = {link: (sm.load.get(link, 0.0), sm.nflows.get(link, 0)) for row in sm.row for link in row}
    else:
        live = np.flatnonzero(core.phase != 2)
        n_links = len(core.capacity)
        rows = [tuple(x for x in core.rows[i].tolist() if x != n_links) for i in live]
        flows = list(zip(core.rem[live].tolist(), core.rate[live].tolist(), core.t_ref[live].tolist(),
                         core.t_next[live].tolist(), core.phase[live].tolist(), rows, strict=False))
        load = {link: (float(core.link_load[link]), int(core.link_count[link])) for row in rows for link in row}
    # A latency-phase flow's t_ref is the merge instant in either form but is never read.
    return [f[:2] + (f[2] if f[4] == 1 else None,) + f[3:] for f in flows], load


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.1, 10.0), min_size=3, max_size=8),
       st.lists(st.tuples(st.floats(0.0, 6.0), st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True),
                          st.floats(0.1, 20.0), st.floats(0.0, 0.3)), min_size=1, max_size=60),
       st.sampled_from([0.0, 0.01]))
def test_the_scalar_state_is_the_array_state_after_every_settle(caps, arrivals, resolution):
    # White box: after every settle of cores fed in lockstep, every live flow's floats, its
    # pruned row (finished flows count until the same compaction) and the loads on its links
    # are the same in both forms, and so is the next event.
    caps = np.array(caps)
    arrivals = sorted((round(t, 1), list(dict.fromkeys(x % len(caps) for x in r)), s, lat) for t, r, s, lat in arrivals)
    cores = [FluidCore(caps, resolution=resolution), FluidCore(caps, "numpy", resolution=resolution)]
    k = 0
    while k < len(arrivals) or not cores[1].empty:
        nxt = [c.next_time() for c in cores]
        assert nxt[0] == nxt[1]
        t = nxt[1]
        if k < len(arrivals) and arrivals[k][0] <= t:
            t = arrivals[k][0]
            while k < len(arrivals) and arrivals[k][0] == t:
                _, route, size, lat = arrivals[k]
                for c in cores:
                    c.add(np.array([size]), np.array([t + lat]), np.array([len(route)]), np.array(route))
                k += 1
        out = [[(b, f.tobytes()) for b, f in c.settle(t)] for c in cores]
        assert out[0] == out[1]
        if cores[0]._small is not None:  # (past MAX_LIVE both hold arrays)
            assert _state(cores[0]) == _state(cores[1])
    assert (cores[0].solves, cores[0].rounds, cores[0].full_solves) == \
        (cores[1].solves, cores[1].rounds, cores[1].full_solves)


@pytest.mark.parametrize("scalar", [True, False])
def test_a_flow_slower_than_a_new_flows_share_is_not_re_solved(scalar):
    # A runs alone at 1 B/s on link 0; B enters link 1 (1.0005 B/s) at t = 1: its share is above
    # A's rate by more than the 1e-9 margin, so only B is solved (a partial solve, A untouched).
    core = FluidCore(np.array([1.0, 1.0005]), "lean" if scalar else "numpy")
    core.add(np.array([10.0]), np.array([0.0]), np.array([1]), np.array([0]))
    core.settle(0.0)
    core.add(np.array([10.0]), np.array([1.0]), np.array([1]), np.array([1]))
    done = core.settle(1.0)
    while not done or len(done) < 2:
        done += core.settle(core.next_time())
    assert (core.solves, core.full_solves) == (4, 2)  # A alone (full), B (partial), A leaves (full), B leaves
    # (B is re-solved when A leaves at 10 s: the same rate, its finish recomputed from there)
    assert [float(f[0]) for _, f in done] == [10.0, pytest.approx(1.0 + 10.0 / 1.0005, rel=1e-15)]

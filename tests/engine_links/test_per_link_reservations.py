"""Per-link reservations (docs/engine.md, "Per-link reservations").

A repeated step may be reserved when none of its own links is in use; traffic
interrupts only the reservations whose links it shares.  Max-min decomposes
over the components of the flow-link graph, so at ``resolution=0`` every op's
start and end must equal the whole-network rule's (and the plain model's).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine import simulate
from simcomm.engine.flow.network import Environment, LiveNetwork
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies import resolve
from simcomm.topologies.fat_tree import fat_tree
from simcomm.topologies.star import star

LINK = LinkClass("pl-link", 1e9, 1e-6, "custom")


def _run(plan, topo, per_link: bool, **kw):
    reference = set(kw.pop("reference", ())) | (set() if per_link else {"per_link"})
    return simulate(plan, topo, resolution=0.0, reference=reference, **{"runtime": MPICH, **kw})


def _same(a, b):
    np.testing.assert_allclose(a.start, b.start, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(a.end, b.end, rtol=1e-9, atol=1e-15)
    assert a.link_class_bytes == pytest.approx(b.link_class_bytes, rel=1e-12)


def _three_ways(plan, topo, **kw):
    """Per-link vs whole-network vs plain flows: all agree; returns (per-link, whole)."""
    links = _run(plan, topo, True, **kw)
    whole = _run(plan, topo, False, **kw)
    plain = _run(plan, topo, True, reference={"coalesce"}, **kw)
    _same(links, whole)
    _same(links, plain)
    return links, whole


# ---- the live network's bookkeeping ------------------------------------------------------


def _net(per_link=True):
    env = Environment()
    return env, LiveNetwork(env, np.ones(6), per_link=per_link)


def test_disjoint_reservations_are_held_together_and_interrupted_one_by_one():
    env, net = _net()
    a = net.reserve(1.0, 5, np.array([0, 1]))
    assert net.free(np.array([2, 3])) and not net.free(np.array([1, 2]))
    b = net.reserve(2.0, 3, np.array([2, 3]))
    assert not net.idle
    env.run(until=2.5)
    # A flow on link 3 interrupts b only (during its 2nd repeat, 0.5 s in).
    net.add(np.array([1.0]), np.array([2.5]), np.array([1]), np.array([3]))
    assert b.event.triggered and b.event.value == (1, 0.5)
    assert not a.event.triggered and net.interrupts == 1
    assert not net.free(np.array([3])) and net.free(np.array([2]))
    env.run(until=6.0)
    assert a.event.value is None  # ran all 5 repeats undisturbed
    assert net.free(np.array([0, 1, 2, 3])) and net.idle  # the flow's batch finished at 3.5


def test_a_batch_interrupts_every_reservation_it_touches_in_grant_order():
    env, net = _net()
    r = [net.reserve(1.0, 4, np.array([i])) for i in (0, 1, 2)]
    order = []
    for i, res in enumerate(r):
        res.event.callbacks.append(lambda _e, i=i: order.append(i))
    env.run(until=0.25)
    net.add(np.array([1.0, 1.0]), np.array([0.25, 0.25]), np.array([1, 1]), np.array([2, 0]))
    env.run(until=0.3)
    assert order == [0, 2] and not r[1].event.triggered and net.interrupts == 2


def test_busy_links_refuse_a_reservation_until_their_batch_is_done():
    env, net = _net()
    net.add(np.array([1.0]), np.array([0.0]), np.array([2]), np.array([4, 5]))
    env.run(until=0.5)
    assert not net.free(np.array([5])) and net.free(np.array([0, 3]))
    env.run(until=2.0)
    assert net.free(np.array([4, 5]))


def test_a_hold_taken_back_before_it_is_priced_costs_no_rebuild():
    env, net = _net()
    res = net.hold(np.array([0, 1]))
    assert not net.free(np.array([1]))
    net.add(np.array([1.0]), np.array([0.0]), np.array([1]), np.array([1]))
    assert res.event.value == (0, 0.0) and net.interrupts == 1  # taken back: nothing ran yet
    kept = net.hold(np.array([2]))
    env.run(until=0.5)
    net.start(kept, 0.25, 4)
    assert kept.t0 == 0.5 and kept.end == 1.5
    gone = net.hold(np.array([3]))
    net.release(gone)  # a step needing no time gives its hold back
    assert net.free(np.array([3])) and not net.free(np.array([2]))
    env.run(until=2.0)
    assert kept.event.value is None and net.idle


def test_whole_network_mode_needs_an_idle_network():
    env, net = _net(per_link=False)
    net.add(np.array([1.0]), np.array([0.0]), np.array([1]), np.array([4]))
    assert not net.free(np.array([0]))
    env.run(until=2.0)
    assert net.free(np.array([0]))
    res = net.reserve(1.0, 2, np.array([0]))
    assert res.links is None and not net.free(np.array([5]))
    net.add(np.array([1.0]), np.array([2.0]), np.array([1]), np.array([5]))
    assert res.event.value == (0, 0.0)


# ---- whole simulations: per-link equals whole-network (and plain) -----------------------


def test_disjoint_rings_are_both_coalesced():
    b = PlanBuilder(8)
    b.collective("allreduce", range(4), 4e6, algorithm="ring")
    b.collective("allreduce", range(4, 8), 2e6, algorithm="ring", stream="other")
    links, whole = _three_ways(b.build(), star(8, LINK, gamma=1e-9))
    # Each ring has 2 x 3 steps; both are priced alone.  The whole-network rule reserves
    # only the one that starts first and runs the other's steps as flows.
    assert links.meta["steps_coalesced"] == 12 and links.meta.get("steps_simulated", 0) == 0
    assert whole.meta.get("steps_simulated", 0) > 0


@pytest.mark.parametrize("delay", [0.0, 1e-6, 0.5e-3, 1.003e-3, 2.5e-3, 7e-3])
def test_transfer_interrupts_only_the_ring_it_touches(delay):
    b = PlanBuilder(9)
    b.collective("allreduce", range(4), 4e6, algorithm="ring")
    b.collective("allreduce", range(4, 8), 3e6, algorithm="ring", stream="other")
    c = b.compute(8, delay)
    b.transfer(8, 1, 2e6, after=[c])  # shares switch->rank1 with the first ring only
    links, whole = _three_ways(b.build(), star(9, LINK, gamma=1e-9))
    if delay < links.end[0]:  # (at 0: the held links are taken back before the ring is priced)
        assert links.meta["reservation_interrupts"] == 1


@pytest.mark.parametrize("alg", ["ring", "recursive-doubling", "rabenseifner", "hierarchical"])
def test_collectives_with_pipeline_traffic_on_a_two_level_machine(alg):
    topo = resolve("dgx-h100-ndr", nodes=2)
    g = topo.n_ranks // 2
    b = PlanBuilder(topo.n_ranks)
    b.collective("allreduce", range(g), 8e6, algorithm=alg)
    b.collective("allreduce", range(g, 2 * g), 8e6, algorithm=alg, stream="tp1")
    c = b.compute(0, 3e-5)
    b.transfer(0, g, 6e6, after=[c], stream="pp")  # across the nodes, like a pipeline send
    b.transfer(g + 1, 1, 6e6, after=[c], stream="pp")
    b.transfer(2, 3, 1e6, after=[c], stream="pp2")  # on node 0's NVLink: mid-collective
    links, whole = _three_ways(b.build(), topo)
    if alg != "recursive-doubling":  # (no repeated step to reserve)
        # Node 1's collective never meets other traffic: per link it is reserved undisturbed.
        assert links.meta["steps_coalesced"] > whole.meta.get("steps_coalesced", 0)
        assert links.meta["reservation_interrupts"] == 1


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["coll", "xfer"]), st.integers(0, 15), st.integers(0, 15),
                          st.floats(1e5, 4e6), st.floats(0.0, 6e-3), st.sampled_from([2, 4, 8])),
                min_size=1, max_size=6),
       st.sampled_from(["ring", "recursive-doubling", "rabenseifner"]),
       st.sampled_from([0.0, 2e-10]))
def test_random_mixes_of_collectives_and_transfers_agree(items, alg, gamma):
    topo = fat_tree(4, link=LINK, levels=3, gamma=gamma)
    b = PlanBuilder(16)
    for i, (kind, a, z, size, delay, p) in enumerate(items):
        c = b.compute(a, delay)
        if kind == "coll":  # an aligned block of p ranks: disjoint from or equal to the others
            lo = (a // p) * p
            b.collective("allreduce", range(lo, lo + p), size, algorithm=alg, after=[c], stream=f"s{i}")
        elif a != z:
            b.transfer(a, z, size, after=[c], stream=f"s{i}")
    _three_ways(b.build(), topo, ppn=2)

"""Both fidelities on one op stream: analytic == flow without contention,
stream overlap and dependencies, determinism and clean user errors."""


import numpy as np
import pytest

from simcomm.engine import simulate
from simcomm.errors import ConfigError, PlanError, UnknownNameError
from simcomm.links.base import LinkClass
from simcomm.ops import CommPlan, PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.fat_tree import fat_tree
from simcomm.topologies.full_mesh import full_mesh
from simcomm.topologies.two_level import two_level

LINK = LinkClass("f-link", 2e9, 1.5e-6, "custom")


def _iteration_plan(p: int) -> CommPlan:
    """Compute, then a bucketed allreduce overlapping the next layer, a broadcast and a send."""
    b = PlanBuilder(p)
    ready = [b.compute(r, 1e-3 * (1 + r % 3)) for r in range(p)]
    a1 = b.collective("allreduce", range(p), 3e6, algorithm="ring", after=ready)
    for r in range(p):
        b.compute(r, 2e-3)
    a2 = b.collective("allreduce", range(p), 5e5, algorithm="recursive-doubling")
    b.collective("broadcast", range(p), 1e6, algorithm="binomial", root=p - 1, after=[a1, a2])
    b.transfer(0, p - 1, 7e5, after=[a2])
    b.collective("alltoall", range(p), 2e6)  # algorithm "auto": MPICH-style choice
    return b.build()


@pytest.mark.parametrize("p", [2, 5, 8])
def test_analytic_equals_flow_without_contention(p):
    topo = full_mesh(p, LINK, gamma=1e-10)
    plan = _iteration_plan(p)
    flow = simulate(plan, topo, fidelity="flow", runtime=MPICH)
    ana = simulate(plan, topo, fidelity="analytic", runtime=MPICH)
    np.testing.assert_allclose(flow.start, ana.start, rtol=1e-9)
    np.testing.assert_allclose(flow.end, ana.end, rtol=1e-9)
    assert ana.fidelity == "analytic" and flow.fidelity == "flow"
    assert ana.link_class_bytes == pytest.approx(flow.link_class_bytes, rel=1e-12)


def test_compute_and_comm_streams_overlap():
    b = PlanBuilder(2)
    c = b.compute(0, 1e-3)
    b.transfer(0, 1, 2e6)          # comm stream: starts at 0, beside the compute
    b.compute(0, 1e-3)             # compute stream: after the first compute only
    b.transfer(0, 1, 2e6, after=[c])
    tl = simulate(b.build(), full_mesh(2, LINK), runtime=MPICH)
    assert tl.start[1] == 0.0
    assert tl.end[1] == pytest.approx(1.5e-6 + 1e-3, rel=1e-12)
    assert tl.start[2] == pytest.approx(1e-3, rel=1e-12)
    assert tl.start[3] == pytest.approx(max(tl.end[1], 1e-3), rel=1e-12)
    assert tl.makespan == pytest.approx(tl.start[3] + 1.5e-6 + 1e-3, rel=1e-12)


def test_a_collective_starts_when_its_last_member_arrives():
    b = PlanBuilder(3)
    for r in range(3):
        b.compute(r, (r + 1) * 1e-3)
    b.collective("allgather", range(3), 3e6, algorithm="ring", after=[0, 1, 2])
    tl = simulate(b.build(), full_mesh(3, LINK), runtime=MPICH)
    assert tl.start[3] == pytest.approx(3e-3, rel=1e-12)
    assert tl.duration(3) == pytest.approx(2 * (1.5e-6 + 1e6 / 2e9), rel=1e-12)


def test_hierarchical_gets_ppn_from_the_topology():
    import simcomm.collectives  # noqa: F401
    from simcomm.collectives.base import ALGORITHMS

    nic = LinkClass("nic", 1e9, 2e-6, "infiniband")
    topo = two_level(4, 2, intra="nvswitch", nic_link=nic, inter="switch")
    b = PlanBuilder(8)
    b.collective("allreduce", range(8), 8e6, algorithm="hierarchical")
    flow = simulate(b.build(), topo, runtime=MPICH)
    ana = simulate(b.build(), topo, fidelity="analytic", runtime=MPICH)
    intra = topo.links[topo.meta["intra_link"]]
    attach = next(lc for lc in topo.links.values() if lc.family == "pcie")
    a_i, b_i = 2 * intra.latency, 1 / intra.bandwidth
    a_e = 2 * attach.latency + 2 * nic.latency
    b_e = 1 / min(nic.bandwidth, attach.bandwidth)
    alg = ALGORITHMS.get("allreduce/hierarchical")
    # The node-major group gets ppn = 2.  Analytic: no contention.  Flow: the two
    # internode rings (one per local rank) run at once and share each node's NIC,
    # so the internode bandwidth term doubles.
    want_ana = alg.cost(8, 8e6, a_i, b_i, 0.0, ppn=2, alpha_inter=a_e, beta_inter=b_e).total
    want_flow = alg.cost(8, 8e6, a_i, b_i, 0.0, ppn=2, alpha_inter=a_e, beta_inter=2 * b_e).total
    assert ana.duration(0) == pytest.approx(want_ana, rel=1e-9)
    assert flow.duration(0) == pytest.approx(want_flow, rel=1e-9)


def test_deterministic():
    topo = fat_tree(4, link=LINK, levels=3, oversubscription=2, gamma=1e-10)
    plan = _iteration_plan(16)
    a = simulate(plan, topo, seed=3, runtime=MPICH)
    b = simulate(plan, topo, seed=3, runtime=MPICH)
    assert a.start.tobytes() == b.start.tobytes() and a.end.tobytes() == b.end.tobytes()
    assert a.meta == b.meta and a.link_class_bytes == b.link_class_bytes
    assert a.meta["seed"] == 3


def test_empty_plan_and_single_rank_collective():
    tl = simulate(CommPlan(1, ()), full_mesh(1, LINK), runtime=MPICH)
    assert tl.makespan == 0.0 and len(tl.end) == 0
    b = PlanBuilder(1)
    b.collective("allreduce", [0], 1e6, algorithm="ring")
    assert simulate(b.build(), full_mesh(1, LINK), runtime=MPICH).makespan == 0.0


def test_user_errors_are_clean():
    topo = full_mesh(4, LINK)
    b = PlanBuilder(4)
    b.collective("allreduce", range(4), 1e6, algorithm="nope")
    with pytest.raises(UnknownNameError, match="allreduce/nope.*valid choices"):
        simulate(b.build(), topo, runtime=MPICH)
    ok = PlanBuilder(4)
    ok.transfer(0, 1, 1.0)
    with pytest.raises(ConfigError, match="fidelity.*valid choices: flow, analytic"):
        simulate(ok.build(), topo, fidelity="packet", runtime=MPICH)
    with pytest.raises(ConfigError, match="engine option 'bogus'"):
        simulate(ok.build(), topo, bogus=1, runtime=MPICH)
    with pytest.raises(PlanError, match="5 ranks.*only 4"):
        big = PlanBuilder(5)
        big.transfer(0, 4, 1.0)
        simulate(big.build(), topo, runtime=MPICH)
    h = PlanBuilder(4)
    h.collective("allreduce", range(4), 1e6, algorithm="hierarchical")
    with pytest.raises(ConfigError, match="ppn"):
        simulate(h.build(), topo, ppn=3, runtime=MPICH)

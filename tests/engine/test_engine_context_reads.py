"""The engine's context reads each rank's gamma and machine from the topology when a pricer first needs them.

A run of messages alone on the direct loop prices each message from its route and never reduces, so the
context reads neither (sgp's 14 kinds at 16 384 GPUs each run twice, a flow run and a closed form: every eager
read of the gammas was ~25 ms of graph); a run with a collective reads them once, the topology's own arrays.
"""

from __future__ import annotations

import numpy as np

from simcomm import engine
from simcomm.ops import PlanBuilder
from simcomm.runtimes import NcclRuntime
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.base import Topology
from simcomm.topologies.two_level import two_level


def _reads(monkeypatch) -> list[str]:
    seen: list[str] = []
    for name in ("gammas", "machines"):
        orig = getattr(Topology, name)
        monkeypatch.setattr(Topology, name, lambda self, orig=orig, name=name: seen.append(name) or orig(self))
    return seen


def _topo():
    return apply_stack(two_level(2, 8, intra="nvswitch", nic_link="ib-hdr", nics_per_node=8, device="h100",
                                 inter="rail"), get_stack("nccl"))


def test_messages_alone_read_no_gamma_and_a_collective_reads_it_once(monkeypatch):
    topo = _topo()
    b = PlanBuilder(16)
    for r in range(16):
        b.transfer(r, (r + 9) % 16, 4e6, after=[b.compute(r, 1e-4)])
    messages = b.build()
    seen = _reads(monkeypatch)
    # the flow run, and the closed form as the pipeline asks for it (times only: the one pass)
    for fidelity, link_bytes in (("flow", True), ("analytic", False)):
        tl = engine.simulate(messages, topo, fidelity=fidelity, runtime=NcclRuntime(), link_bytes=link_bytes)
        assert tl.makespan > 1e-4
    # (machines() is the direct loop's machine-local check's to read, from the topology's kept tuple: the context
    # itself reads neither)
    assert "gammas" not in seen

    b = PlanBuilder(16)
    b.collective("allreduce", tuple(range(16)), 64e6)
    tl = engine.simulate(b.build(), topo, fidelity="flow", runtime=NcclRuntime())
    assert seen.count("gammas") == 1 and tl.makespan > 0
    monkeypatch.undo()
    # what a pricer reads is the topology's own arrays
    from simcomm.engine.drive.executor import Context
    from simcomm.engine.events import Environment
    from simcomm.engine.options import EngineOptions
    from simcomm.engine.paths import choose

    ctx = Context(Environment(), topo, paths=choose(messages, "flow", EngineOptions()), ppn=None)
    assert np.array_equal(ctx.gamma, topo.gammas()) and np.array_equal(ctx.machine, topo.machines())

"""Host CPU cost of communication (engine option ``comm_cpu``): hand-computed stretches.

One 1 MB/s link between two ranks, no latency; a compute of C seconds on a rank
that moves B bytes while computing owes ``comm_cpu x B`` more seconds, and the
bytes moved during that extra time owe more again (a fixed point).
"""

import math

import pytest

from simcomm import engine
from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies import full_mesh

LINK = LinkClass("one-mb", 1e6, 0.0, "ethernet", "1 MB/s test link", "test")
CPU = 1e-7  # 0.1 s per MB


def _plan(compute_rank: int, seconds: float, nbytes: float, after_transfer: bool = False):
    b = PlanBuilder(2)
    t = b.transfer(0, 1, nbytes, label="t", stream="comm")
    c = b.compute(compute_rank, seconds, after=[t] if after_transfer else [], label="c")
    return b.build(kind="x"), t, c


def test_transfer_inside_compute_adds_cpu_times_bytes():
    plan, t, c = _plan(0, 1.0, 0.5e6)
    tl = engine.simulate(plan, full_mesh(2, LINK), comm_cpu=CPU, runtime=MPICH)
    # 0.5 MB finishes at 0.5 s, inside the compute: 1.0 + 1e-7 x 5e5 = 1.05 s
    assert tl.end[t] == pytest.approx(0.5, abs=1e-12)
    assert tl.end[c] == pytest.approx(1.05, abs=1e-12)


def test_receiver_pays_too():
    plan, _, c = _plan(1, 1.0, 0.5e6)
    assert engine.simulate(plan, full_mesh(2, LINK), comm_cpu=CPU, runtime=MPICH).end[c] == pytest.approx(1.05, abs=1e-12)


def test_transfer_outlasting_compute_gives_the_fixed_point():
    plan, _, c = _plan(0, 0.2, 1e6)
    tl = engine.simulate(plan, full_mesh(2, LINK), comm_cpu=CPU, runtime=MPICH)
    # t = 0.2 + 1e-7 x (1e6 B/s x t)  ->  t = 0.2 / 0.9 while the transfer still runs
    assert tl.end[c] == pytest.approx(0.2 / 0.9, rel=1e-9)
    assert tl.meta["cpu_stretch_rounds"] > 1


def test_compute_after_the_transfer_is_not_stretched():
    plan, t, c = _plan(0, 1.0, 0.5e6, after_transfer=True)
    tl = engine.simulate(plan, full_mesh(2, LINK), comm_cpu=CPU, runtime=MPICH)
    assert tl.end[t] == pytest.approx(0.5, abs=1e-12) and tl.end[c] == pytest.approx(1.5, abs=1e-12)


def test_zero_cost_is_the_default_timeline():
    plan, _, _ = _plan(0, 1.0, 0.5e6)
    a = engine.simulate(plan, full_mesh(2, LINK), runtime=MPICH)
    b = engine.simulate(plan, full_mesh(2, LINK), comm_cpu=0.0, runtime=MPICH)
    assert a.end.tolist() == b.end.tolist()


@pytest.mark.parametrize("bad", [-1e-9, math.inf, math.nan, "fast"])
def test_bad_cost_is_one_clear_error(bad):
    plan, _, _ = _plan(0, 1.0, 1.0)
    with pytest.raises(ConfigError, match="comm_cpu"):
        engine.simulate(plan, full_mesh(2, LINK), comm_cpu=bad, runtime=MPICH)


def test_every_repeat_of_a_collective_alone_on_the_network_is_charged():
    """A ring all-gather alone on an idle network is the case coalesced repeats price as one reservation
    (its 3 steps: ``steps_coalesced`` 3 without a CPU cost); a reservation has no live flows whose bytes the
    CPU cost could follow, so with one every repeat runs as flows and is charged.  4 ranks, 0.4 MB: each of
    the 3 steps sends and receives 0.1 MB per rank in 0.1 s; rank 0's 1 s compute overlaps all of it and
    owes 1e-7 x 3 x 0.2 MB = 0.06 s."""
    b = PlanBuilder(4)
    g = b.collective("allgather", range(4), 4e5, algorithm="ring", stream="comm")
    c = b.compute(0, 1.0, label="c")
    plan = b.build(kind="x")
    free = engine.simulate(plan, full_mesh(4, LINK), runtime=MPICH)
    assert free.meta["steps_coalesced"] == 3 and free.end[c] == 1.0
    tl = engine.simulate(plan, full_mesh(4, LINK), comm_cpu=CPU, runtime=MPICH)
    assert tl.paths["pricing"] == "plain" and "steps_coalesced" not in tl.meta
    assert tl.end[g] == pytest.approx(0.3, abs=1e-12)
    assert tl.end[c] == pytest.approx(1.06, abs=1e-12)

"""Event resolution (engine option ``resolution``): merged flow completions.

Hand-computed cases on one 1 B/s link: two flows of 100 B and 100.5 B share it
at 0.5 B/s, so the first ends at 200 s and the second, alone for its last
0.5 B, at 200.5 s.  With resolution 0.01 the second's projected end (201 s at
the shared rate) lies within 1 % of its own duration (201 s) of the first's,
so both are retired at the middle of the span, 200.5 s.  Properties: the
makespan stays within ε of the exact one, the rule is scale-free, and
resolution 0 is the exact engine.
"""

import json

import numpy as np
import pytest
from flowcases import flat, flow_instances
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm import engine
from simcomm.engine.fluid.core import run_isolated
from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.star import star

ONE = np.array([1.0])


def _run(sizes, latency=None, caps=ONE, routes=None, **kw):
    """run_isolated of flows of ``sizes`` (default: all on link 0 of ``caps``)."""
    sizes = np.asarray(sizes, float)
    links, lens = flat(routes or [[0]] * len(sizes))
    lat = np.zeros(len(sizes)) if latency is None else np.asarray(latency, float)
    return run_isolated(caps, sizes, lat, lens, links, **kw)


def test_exact_engine_ends_each_flow_at_its_own_instant():
    done = _run([100.0, 100.5])
    assert done.finish.tolist() == [200.0, 200.5]
    assert done.merged == 0


def test_close_completions_share_the_middle_of_their_span():
    done = _run([100.0, 100.5], resolution=0.01)
    # group [200, 201] (201 at the shared rate) -> one event at 200.5 retires both
    assert done.finish.tolist() == [200.5, 200.5]
    assert done.merged == 2
    assert done.solves < _run([100.0, 100.5]).solves


def test_far_completions_are_not_merged():
    # 100 B ends at 200 s; 150 B would end at 300 s at the shared rate: 100 s > 1 % of 300 s.
    done = _run([100.0, 150.0], resolution=0.01)
    assert done.finish.tolist() == [200.0, 250.0]
    assert done.merged == 0


def test_a_flow_entering_its_bandwidth_phase_stops_the_merge():
    # A third flow on its own link starts sending at 200.2 s: the event lands there,
    # not at 200.5 s; the 100.5 B flow (0.8 s from its end of 201 s) finishes with it.
    caps = np.array([1.0, 2.0])
    done = _run([100.0, 100.5, 10.0], latency=[0, 0, 200.2], caps=caps, routes=[[0], [0], [1]],
                     resolution=0.01)
    assert done.finish[:2].tolist() == [200.2, 200.2]
    assert done.finish[2] == pytest.approx(200.2 + 10.0 / 2.0, rel=1e-15)


@st.composite
def _instances(draw):
    caps, routes = draw(flow_instances(max_links=4, caps=st.floats(0.5, 3.0), max_route=4, max_flows=12))
    return caps, routes, draw(st.lists(st.floats(1.0, 100.0), min_size=len(routes), max_size=len(routes)))


@settings(max_examples=150, deadline=None)
@given(_instances(), st.sampled_from([0.001, 0.01, 0.05]))
def test_makespan_stays_within_the_resolution(inst, eps):
    caps, routes, sizes = inst
    exact = _run(sizes, caps=caps, routes=routes)
    merged = _run(sizes, caps=caps, routes=routes, resolution=eps)
    assert not np.isnan(merged.finish).any()
    assert abs(merged.finish.max() - exact.finish.max()) <= eps * exact.finish.max()
    assert merged.solves <= exact.solves


@settings(max_examples=80, deadline=None)
@given(_instances(), st.integers(-3, 3))
def test_merging_is_scale_free(inst, k):
    # The rule compares times with durations, so scaling every size by 2^k (exact in
    # floating point) scales every finish time by 2^k: no absolute time scale hides in it.
    caps, routes, sizes = inst
    a = _run(sizes, caps=caps, routes=routes, resolution=0.01)
    b = _run(np.asarray(sizes) * 2.0**k, caps=caps, routes=routes, resolution=0.01)
    assert np.allclose(b.finish, a.finish * 2.0**k, rtol=1e-12, atol=0)


LINK = LinkClass("one-bps", 1.0, 0.0, "ethernet", "1 B/s test link", "test")


def _engine_plan():
    # Ranks 0 and 1 both send to rank 2: they share the switch's link to it.
    b = PlanBuilder(3)
    b.transfer(0, 2, 100.0, label="a")
    b.transfer(1, 2, 100.5, label="b")
    return b.build(kind="x")


def test_engine_option_reaches_the_network_and_is_counted():
    plan = _engine_plan()
    exact = engine.simulate(plan, star(3, LINK), runtime=MPICH)
    merged = engine.simulate(plan, star(3, LINK), resolution=0.01, runtime=MPICH)
    assert exact.end.tolist() == [200.0, 200.5] and "merged_flows" not in exact.meta
    assert merged.end.tolist() == [200.5, 200.5] and merged.meta["merged_flows"] == 2


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2, "1%"])
def test_bad_resolution_is_one_clear_error(bad):
    with pytest.raises(ConfigError, match="resolution"):
        engine.simulate(_engine_plan(), star(3, LINK), resolution=bad, runtime=MPICH)


CROSS = ("run", "--strategy", "crossover-sgd", "--nodes", "2", "--cluster", "dgx-a100-hdr", "--no-baseline")


def test_cli_prints_the_merge_and_exact_mode_drops_it(cli):
    rc, out, _ = cli(*CROSS, "--json")
    assert rc == 0
    fast = json.loads(out)
    line = [a for a in fast["assumed"] if "merged into one event" in a]
    assert len(line) == 1 and line[0].startswith("flow completions within 1 % of their transfer time")
    rc, out, _ = cli(*CROSS, "--json", "--resolution", "0")
    exact = json.loads(out)
    assert rc == 0 and not [a for a in exact["assumed"] if "merged" in a]
    assert fast["mean_s"] != exact["mean_s"]
    # Each merged completion moves by at most half of 1 % of its transfer, which is shorter than the iteration.
    assert abs(fast["mean_s"] / exact["mean_s"] - 1) < 0.005


def test_cli_rejects_a_resolution_outside_0_1(cli):
    rc, out, err = cli(*CROSS, "--resolution", "1.5")
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "resolution" in lines[0] and ">= 0 and < 1" in lines[0]


def test_scenario_file_sets_the_resolution(cli, tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('strategy = "crossover-sgd"\nnodes = 2\ncluster = "dgx-a100-hdr"\nresolution = 0\n')
    rc, out, _ = cli("run", str(f), "--no-baseline", "--json")
    assert rc == 0 and not [a for a in json.loads(out)["assumed"] if "merged" in a]

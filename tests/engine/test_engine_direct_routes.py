"""Message routes worked out in one pass (schedule.message_routes: the flow pricer, the direct loop) are the
per-message ones.

A route's latency is the sum of its links' latencies; summed row by row over a matrix of routes of one length
it must be the very float a 1-D ``sum`` of that route gives (numpy adds a C-ordered row as it adds a vector).
"""

from __future__ import annotations

import numpy as np

from simcomm.engine.schedule import message_routes
from simcomm.ops import PlanBuilder
from simcomm.topologies.presets import preset


def test_row_sums_are_the_sums_of_each_row_bit_for_bit():
    rng = np.random.default_rng(3)
    for length in range(41):
        values = rng.uniform(0, 1, 500) * 10.0 ** rng.uniform(-9, 3, 500)
        rows = rng.integers(0, 500, (64, length))
        got = values[rows].sum(axis=1)
        assert got.tobytes() == np.array([values[r].sum() for r in rows]).tobytes(), length


def test_message_routes_are_the_per_message_routes():
    topo = preset("dgx-a100-hdr", nodes=6, gpus_per_node=8)
    rng = np.random.default_rng(4)
    b = PlanBuilder(topo.n_ranks)
    pairs = [(int(a), int(c)) for a, c in rng.integers(0, topo.n_ranks, (300, 2)) if a != c] + [(0, 1), (0, 47)]
    for a, c in pairs:
        b.transfer(a, c, 1e6)
        b.compute(a, 1e-3)
    classes, code = topo.link_class_codes  # (as the engine's Context numbers the link families)
    fams = [topo.links[name].family for name in classes]
    index = {f: i for i, f in enumerate(sorted(set(fams)))}
    fam_of_link, n_fam = np.array([index[f] for f in fams], dtype=np.int64)[code], len(index)
    assert n_fam > 1
    got = message_routes(list(dict.fromkeys(pairs)), topo, fam_of_link, n_fam)
    assert set(got) == set(pairs)
    for (a, c), (latency, route, fam, links) in got.items():
        want = np.asarray(topo.route(a, c), dtype=np.int64)
        per = np.bincount(fam_of_link[want], minlength=n_fam).astype(float)
        assert latency == float(topo.latency[want].sum()) and route == tuple(want.tolist())
        assert fam == [(f, x) for f, x in enumerate(per.tolist()) if x != 0.0]
        assert links.tolist() == want.tolist()


def test_message_routes_of_self_pairs_and_mixed_lengths_are_plain_tuples_in_length_order():
    topo = preset("dgx-a100-hdr", nodes=4, gpus_per_node=8)
    fam_of_link, n_fam = np.zeros(len(topo.capacity), dtype=np.int64), 1
    keys = [(3, 3), (0, 9), (0, 1), (5, 5), (31, 2), (2, 31)]  # lengths 0, 6, 2, 0, 6, 6
    got = message_routes(keys, topo, fam_of_link, n_fam)
    assert list(got) == [(3, 3), (5, 5), (0, 1), (0, 9), (31, 2), (2, 31)]  # by length, then as given
    for (a, c), (latency, route, fam, links) in got.items():
        want = topo.route(a, c)
        assert route == want and type(route) is tuple and all(type(x) is int for x in route)
        assert links.dtype == np.int64 and links.tolist() == list(want)
        assert latency == float(topo.latency[np.asarray(want, dtype=np.int64)].sum())
        assert fam == ([(0, float(len(want)))] if want else [])


def test_an_op_waiting_for_many_messages_times_as_on_simpys_queue():
    # the direct loop resumes a stream's scan of an op's deps where it stopped (as run()'s generator does)
    from simcomm import engine
    from simcomm.engine.options import EngineOptions

    topo = preset("dgx-a100-hdr", nodes=4, gpus_per_node=8)
    rng = np.random.default_rng(5)
    b = PlanBuilder(topo.n_ranks)
    ready = [b.compute(r, float(rng.uniform(0, 1e-3))) for r in range(1, 32)]
    ins = [b.transfer(r, 0, float(rng.uniform(1e3, 1e7)), after=[ready[r - 1]]) for r in range(1, 32)]
    total = b.compute(0, 1e-4, after=list(reversed(ins)))  # finishes out of the order it lists them
    for r in range(1, 32):
        b.transfer(0, r, 1e5, after=[total], stream=f"to{r}")
    plan = b.build()
    fast = engine.simulate(plan, topo, options=EngineOptions())
    ref = engine.simulate(plan, topo, options=EngineOptions(reference={"direct"}))
    assert fast.paths["driver"] == "direct" and ref.paths["driver"] != "direct"
    assert fast.start.tobytes() == ref.start.tobytes() and fast.end.tobytes() == ref.end.tobytes()

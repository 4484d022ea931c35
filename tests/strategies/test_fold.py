"""Identical ranks folded onto rank 0 (:mod:`simcomm.strategies._fold`): exact, checked op by op.

A folded plan emits rank 0's computes for every rank whose computes are provably copies of them; every
collective keeps all its members.  It must time exactly like the full plan: every kind's iteration time, its
breakdown on the critical rank and its bytes per link family, bit for bit, on a rail-optimised DGX cluster and
an oversubscribed fat-tree, at event resolution 0 and 1 %, and under the closed form.  A rank that stops
copying rank 0 (a merge after a message of its own) computes on its own from there; a straggler's plan is built
in full.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcomm import engine
from simcomm.engine.options import EngineOptions
from simcomm.ops import PlanBuilder
from simcomm.pipeline.baseline import make_strategy, scenario_options
from simcomm.result import breakdown, iteration_time
from simcomm.scenario.resolve import from_flat
from simcomm.scenario.setup import Resolver, resolve_setup
from simcomm.strategies._fold import FoldingBuilder, fold_plan
from simcomm.workload import build_workload

CASES = [  # (strategy, options): every seed strategy (sgp's approximate message fold off: fold_messages)
    ("allreduce", {}),
    ("allreduce", {"overlap": "none", "bucket_mb": 0.0}),
    ("allreduce", {"overlap": "backward+forward"}),
    ("gaussian-k", {}),
    ("topka", {}),
    ("ok-topk", {}),
    ("pcnn", {}),
    ("pcnn-no-overlap", {}),
    ("node-based", {"k_prime": 2}),
    ("sgp", {"interval": 3}),
    ("crossover-sgd", {"interval": 2}),
    ("gtopk", {}),
    ("gtopk", {"down": "tree"}),
    ("hierarchical-allreduce", {}),
    ("node-based", {}),
    ("sgp", {}),
    ("sgp", {"mode": "neuron"}),
    ("dpsgd", {}),
    ("crossover-sgd", {}),
    ("hierarchical-crossover-sgd", {}),
    ("gs-sgd", {}),
    ("sketched-sgd", {}),
    ("ps", {}),
    ("ps-layer-drop", {}),
]
CLUSTERS = [  # (cluster keys, nodes, GPUs per node)
    ({"cluster": "dgx-a100-hdr"}, 3, 4),
    ({"topology": "fat-tree", "oversubscription": 4.0, "inter": "roce-100g"}, 6, 2),
]


def setup_of(strategy, options, cluster, nodes, gpn, **workload):
    scn = from_flat({"strategy": strategy, "nodes": nodes, "gpus_per_node": gpn, **cluster, **options})
    st = make_strategy(scn.strategy, scenario_options(scn))
    setup = resolve_setup(scn, Resolver(scn), st.extra_nodes())
    w = build_workload(setup.trace, setup.n_train, batch=8, wire_dtype=setup.wire_dtype, dataset_size=1000,
                       **workload)
    return st, setup, w


def runs(kinds, setup, **opts):
    out = []
    for weight, plan in kinds:
        tl = engine.simulate(plan, setup.topology, fidelity="flow", options=EngineOptions(runtime=setup.runtime, **opts))
        t, window = iteration_time(plan, tl)
        out.append((weight, plan.info.kind, t, breakdown(plan, tl, setup.n_train, window),
                    dict(tl.link_class_bytes)))
    return out


@pytest.mark.parametrize("cluster,nodes,gpn", CLUSTERS)
@pytest.mark.parametrize("strategy,options", CASES)
def test_folded_plans_time_exactly_like_full_ones(strategy, options, cluster, nodes, gpn):
    st, setup, w = setup_of(strategy, options, cluster, nodes, gpn)
    full = st.iterations(w, setup.topology)
    folded = st.iterations(replace(w, fold_ranks=True), setup.topology)
    assert [k for k, _ in full] == [k for k, _ in folded]
    assert any(p.meta.get("folded_computes") for _, p in folded), "nothing folded"
    assert sum(len(p.ops) for _, p in folded) < sum(len(p.ops) for _, p in full)
    for res in (0.0, 0.01):
        assert runs(folded, setup, resolution=res) == runs(full, setup, resolution=res)
    for (_, a), (_, b) in zip(full, folded, strict=True):
        ta = engine.simulate(a, setup.topology, fidelity="analytic", options=EngineOptions(runtime=setup.runtime))
        tb = engine.simulate(b, setup.topology, fidelity="analytic", options=EngineOptions(runtime=setup.runtime))
        assert iteration_time(a, ta)[0] == iteration_time(b, tb)[0]


def test_a_straggler_is_not_folded():
    st, setup, w = setup_of("allreduce", {}, CLUSTERS[0][0], 3, 4, compute_scale=(1.0,) * 11 + (1.5,))
    (_, plan), = st.iterations(replace(w, fold_ranks=True), setup.topology)
    assert "folded_computes" not in plan.meta and plan.info.measured_ranks is None
    (_, full), = st.iterations(w, setup.topology)
    assert plan.ops == full.ops


def test_the_builder_folds_copies_and_lets_the_rest_compute_on_their_own():
    b = FoldingBuilder(5, 4)
    a = b.compute(0, 1.0, label="forward")
    assert b.compute(1, 1.0, label="forward") == a  # a copy: rank 0's op
    assert b.compute(2, 2.0, label="forward") != a  # other seconds: its own op ...
    up = b.compute(0, 1.0, label="update")
    assert b.compute(1, 1.0, label="update") == up
    assert b.compute(2, 1.0, label="update") != up  # ... and so from then on
    c0 = b.collective("allreduce", (0, 1), 8.0)
    c1 = b.collective("allreduce", (2, 3), 8.0)
    b.compute(0, 1.0, after=[c0], label="sum")
    assert b.compute(3, 1.0, after=[c1], label="forward") != a  # waits for another collective than its mirror
    t = b.transfer(1, 4, 8.0, after=[a])  # a folded rank's message is kept
    assert b.compute(4, 1.0, after=[t]) == t + 1  # a server (rank >= n_train) is never folded
    plan = b.build()
    assert plan.info.measured_ranks == (0, 2, 3) and plan.meta["folded_computes"] == 2
    assert len(plan.ops) == 12 - 2  # 12 asked for, 2 folded


def test_fold_plan_folds_what_it_can():
    w = setup_of("allreduce", {}, CLUSTERS[0][0], 3, 4)[2]

    def emit(b: PlanBuilder):
        for r in range(w.n_ranks):
            b.compute(r, 1.0 + (r == 5))
        return b.build()

    folded = fold_plan(replace(w, fold_ranks=True), w.n_ranks, emit)
    assert len(folded.ops) == 2 and folded.info.measured_ranks == (0, 5)
    assert len(fold_plan(replace(w, fold_ranks=True, compute_jitter=0.1), w.n_ranks, emit).ops) == w.n_ranks


@pytest.mark.parametrize("strategy", ["gaussian-k", "node-based", "dpsgd", "ps"])
def test_fold_ranks_on_gives_what_off_and_auto_give_bit_for_bit(strategy):
    from simcomm.pipeline import simulate

    flat = {"strategy": strategy, "nodes": 3, "gpus_per_node": 4, "cluster": "dgx-a100-hdr"}
    runs = {s: simulate(from_flat({**flat, "fold_ranks": s})) for s in ("auto", "off", "on")}
    full, folded = runs["off"], runs["on"]
    numbers = ("mean_s", "breakdown", "link_bytes", "baseline_s", "analytic_mean_s", "epoch_s", "samples_per_s",
               "assumed")
    assert [getattr(folded, f) for f in numbers] == [getattr(full, f) for f in numbers] \
        == [getattr(runs["auto"], f) for f in numbers]
    assert [(k.time_s, k.breakdown, k.link_bytes, k.analytic_s) for k in folded.kinds] == \
        [(k.time_s, k.breakdown, k.link_bytes, k.analytic_s) for k in full.kinds]
    # each kind's engine paths name the fold: forced on at 12 ranks it folds; auto (under 256) and off do not
    for setting, res in runs.items():
        for kind in res.kinds:
            fold = kind.engine["rank_fold"]
            assert fold["setting"] == setting and fold["used"] is (setting == "on")
            assert (fold["folded_ranks"] > 0) is (fold["folded_computes"] > 0) is (setting == "on")
            assert fold["folded_ranks"] <= 11  # ranks 1 ... 11 of 12 training ranks


def test_fold_ranks_auto_folds_from_fold_ranks_training_ranks_and_never_with_jitter_or_a_cpu_cost():
    from simcomm.pipeline.run import FOLD_RANKS, _folds_ranks

    assert FOLD_RANKS == 256
    auto, off, on = (from_flat({"fold_ranks": s}) for s in ("auto", "off", "on"))
    assert [_folds_ranks(auto, n, 0.0) for n in (2, 255, 256, 16384)] == [False, False, True, True]
    assert not any(_folds_ranks(off, n, 0.0) for n in (2, 256, 16384))
    assert all(_folds_ranks(on, n, 0.0) for n in (2, 255, 256))
    assert not _folds_ranks(auto, 256, 25e-9)  # a host CPU cost per byte: charged per rank
    assert not _folds_ranks(from_flat({"compute_jitter": 0.1}), 256, 0.0)


@pytest.mark.parametrize("extra, why", [
    (("--compute-jitter", "0.1"), "compute_jitter"),
    (("--stack-cpu", "25ns"), "stack_cpu"),
])
def test_fold_ranks_on_refuses_what_it_cannot_fold_exactly(cli, extra, why):
    rc, out, err = cli("run", "-s", "allreduce", "--cluster", "dgx-a100-hdr", "--nodes", "2", "--fold-ranks", "on",
                       *extra)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("error: fold_ranks: on folds ranks that compute alike, which " + why)


def test_run_json_names_the_rank_fold_and_a_bad_setting_is_one_error_line(cli):
    import json

    argv = ("run", "-s", "gtopk", "--cluster", "dgx-a100-hdr", "--nodes", "2", "--gpus-per-node", "4", "--json")
    rc, on, err = cli(*argv, "--fold-ranks", "on")
    assert rc == 0, err
    rc, off, err = cli(*argv, "--fold-ranks", "off")
    assert rc == 0, err
    on_kinds, off_kinds = json.loads(on)["kinds"], json.loads(off)["kinds"]
    assert [k["engine"]["rank_fold"] for k in off_kinds] == \
        [{"setting": "off", "used": False, "folded_ranks": 0, "folded_computes": 0}]
    fold = on_kinds[0]["engine"]["rank_fold"]
    assert fold["setting"] == "on" and fold["used"] and fold["folded_ranks"] == 7 and fold["folded_computes"] > 0
    for kinds in (on_kinds, off_kinds):
        del kinds[0]["engine"]["rank_fold"]
    assert {**json.loads(on), "kinds": on_kinds} == {**json.loads(off), "kinds": off_kinds}  # every number equal
    rc, out, err = cli(*argv, "--fold-ranks", "sometimes")
    assert rc == 2 and err.strip() == "error: fold_ranks: 'sometimes' is not valid; valid choices: auto, on, off"


# ---- sgp's pattern fold (an approximation with a measured bound) ----------------------------------------------

def _sgp_kinds(fold, nodes=24, cluster="dgx-a100-hdr", **workload):
    scn = from_flat({"strategy": "sgp", "nodes": nodes, "gpus_per_node": 8, "cluster": cluster})
    setup = resolve_setup(scn, Resolver(scn), 0)
    w = build_workload(setup.trace, setup.n_train, wire_dtype=setup.wire_dtype, **workload)
    st = make_strategy("sgp", {"fold": fold})
    out = []
    for _, plan in st.iterations(w, setup.topology):
        opts = EngineOptions(runtime=setup.runtime, resolution=0.01, traffic_weights=plan.info.traffic_weights)
        tl = engine.simulate(plan, setup.topology, fidelity="flow", options=opts)
        out.append((plan, iteration_time(plan, tl)[0], dict(tl.link_class_bytes)))
    return out


def test_sgp_fold_times_within_its_bound_and_keeps_the_bytes():
    # docs/engine.md: within 0.06 % of every rank simulated at 256, 512 and 1 024 GPUs on dgx-a100-hdr; 0.1 % here
    full, folded = _sgp_kinds("off"), _sgp_kinds("on")
    assert len(full) == len(folded) == 7
    smaller = 0
    for (pf, tf, bf), (pq, tq, bq) in zip(full, folded, strict=True):
        assert pq.info.kind == pf.info.kind
        assert abs(tq - tf) <= 1e-3 * tf
        assert bq.keys() == bf.keys() and all(bq[k] == pytest.approx(bf[k], rel=1e-12) for k in bf)
        smaller += len(pq.ops) < len(pf.ops)
        if len(pq.ops) < len(pf.ops):
            assert any(line.startswith("sgp fold:") for line in pq.info.assumed)
            assert 0 in pq.info.measured_ranks
    assert smaller >= 5


def test_sgp_fold_auto_needs_the_pipelines_word_and_on_refuses_unequal_ranks():
    from simcomm.errors import ConfigError

    auto = _sgp_kinds("auto", nodes=4)
    assert all(p.info.measured_ranks is None for p, _, _ in auto)  # the pipeline's word (fold_ranks) missing
    # fold=on on 32 ranks: the first 64 hold them all, so the plans are the full ones, with no assumed: line
    small = _sgp_kinds("on", nodes=4)
    assert [(p.ops, p.info.assumed) for p, _, _ in small] == [(p.ops, p.info.assumed) for p, _, _ in auto]
    with pytest.raises(ConfigError, match="fold"):
        _sgp_kinds("on", nodes=4, compute_jitter=0.1)


@pytest.mark.parametrize("stack,as_planned", [("nccl", True), ("gloo", False), ("mpi-tcp", False)])
def test_sgp_folds_messages_only_where_the_stack_carries_them_as_planned(stack, as_planned):
    from simcomm.pipeline.run import _messages_as_planned

    scn = from_flat({"strategy": "sgp", "nodes": 24, "gpus_per_node": 8, "cluster": "dgx-a100-hdr", "stack": stack})
    setup = resolve_setup(scn, Resolver(scn), 0)
    assert _messages_as_planned(setup.runtime, setup.topology) is as_planned
    w = replace(build_workload(setup.trace, setup.n_train), fold_ranks=True, fold_messages=as_planned)
    plans = make_strategy("sgp", {}).iterations(w, setup.topology)
    assert any(line.startswith("sgp fold:") for _, p in plans for line in p.info.assumed) is as_planned


def _route_classes_link_by_link(topology, offset: int, n: int):
    """pattern_ranks' route classes as first written: each crossed link's family read link by link."""
    import numpy as np

    src = np.arange(n, dtype=np.int64)
    lens, links = topology.routes(src, (src + offset) % n)
    owner = np.repeat(src, lens)
    fams = [topology.links[name].family for name in topology.link_names]
    index = {f: i for i, f in enumerate(sorted(set(fams)))}
    family = np.array([index[f] for f in fams], dtype=np.int64)[links]
    counts = np.bincount(owner * len(index) + family, minlength=n * len(index)).reshape(n, len(index))
    key = np.zeros(n, dtype=np.int64)
    for f in range(len(index)):
        key = key * (int(counts.max()) + 1) + counts[:, f]
    return np.unique(key, return_inverse=True)[1].reshape(-1)


@pytest.mark.parametrize("cluster", ["dgx-a100-hdr", "dgx1-v100"])
def test_sgp_pattern_route_classes_read_from_the_link_classes_are_the_per_link_ones(cluster):
    import numpy as np

    from simcomm.strategies._fold import pattern_ranks

    scn = from_flat({"strategy": "sgp", "nodes": 12, "gpus_per_node": 8, "cluster": cluster})
    topo = resolve_setup(scn, Resolver(scn), 0).topology
    n = topo.n_ranks
    for offset in (1, 4, 8, 16, 48):
        _, klass = pattern_ranks(topo, offset, n)
        ref = _route_classes_link_by_link(topo, offset, n)
        assert np.array_equal(klass, ref)
    assert len(set(_route_classes_link_by_link(topo, 1, n).tolist())) > 1  # (classes to tell apart)


def test_sgp_folded_averages_take_each_ranks_own_gamma():
    # the folded plan reads each simulated rank's gamma once for every segment: on ranks of unequal gammas every
    # average is still its own rank's gamma times the segment's bytes, after its own message and its receive
    scn = from_flat({"strategy": "sgp", "nodes": 24, "gpus_per_node": 8, "cluster": "dgx-a100-hdr"})
    setup = resolve_setup(scn, Resolver(scn), 0)
    topo = setup.topology
    for r in range(0, topo.n_ranks, 3):
        topo.graph.nodes[topo.ranks[r]]["gamma"] = (1 + r % 7) * 1e-11
    w = build_workload(setup.trace, setup.n_train, wire_dtype=setup.wire_dtype)
    from simcomm.strategies._gossip import segment_bytes

    seg = segment_bytes(w, 0)[0]
    plans = make_strategy("sgp", {"fold": "on"}).iterations(w, topo)
    folded = [p for _, p in plans if p.info.measured_ranks is not None]
    assert len(folded) >= 5
    for plan in folded:
        ops = plan.ops
        for op in ops:
            if op.label.startswith("average segment "):
                s = int(op.label.rsplit(" ", 1)[1])
                assert op.seconds == topo.gamma(op.rank) * seg[s]
                # after its own message (or pair all-reduce) and, when its in-peer is simulated, the one it receives
                own = [d for d in op.deps if op.rank in ops[d].ranks and op.label != ops[d].label]
                assert own and all(ops[d].category == "comm" or ops[d].rank == op.rank for d in op.deps)

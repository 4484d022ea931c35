"""Execution modes of the gossip strategies (seed 001's code vs its paper), hand-computed on tiny cases.

Unless said otherwise: the toy trace of conftest (4 layers l0..l3 of 4 MB, forward 1 ms, backward
2 ms, update 0.1 ms each, so fwd+bwd+update = 12.4 ms per iteration), one bucket, and the full
mesh of conftest (every ordered pair its own 1 GB/s link with 1 us latency, gamma 0).  The layer
names have no block structure, so the default segments are 4 segments of 4 MB (one per layer):
one 4 MB message takes 1 us + 4 ms = 4.001 ms.  A barrier is a 4-byte all-reduce (recursive doubling:
2 steps of 1 us + 4 ns on 4 ranks = 2.008 us).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm import engine
from simcomm.links.base import LinkClass
from simcomm.ops import Collective, Compute, Transfer
from simcomm.runtimes.mpi import MPICH
from simcomm.strategies import STRATEGIES
from simcomm.strategies._gossip import aws_exp_offsets, base3_offsets, exp_graph_exponents, fair_peer_table, floor_log, select_sources
from simcomm.strategies.base import make_params
from simcomm.topologies.full_mesh import full_mesh

LINK = LinkClass("b-link", 1e9, 1e-6, "infiniband")  # the same link as conftest's mesh fixture

MS = 1e-3
US = 1e-6


def strat(name, **opts):
    cls = STRATEGIES.get(name)
    return cls(make_params(cls, opts))


def transfers(plan):
    return [op for op in plan.ops if isinstance(op, Transfer)]


def colls(plan, kind=None):
    return [op for op in plan.ops if isinstance(op, Collective) and (kind is None or op.kind == kind)]


def makespan(plan, topo):
    return engine.simulate(plan, topo, runtime=MPICH).makespan


def op_end(plan, topo, label, rank):
    tl = engine.simulate(plan, topo, runtime=MPICH)
    ids = [op.id for op in plan.ops if op.label == label and rank in op.ranks]
    return float(tl.end[ids[0]]), float(tl.start[ids[0]])


# ---- peer graphs of seed 001's code ----------------------------------------------------------

def test_aws_sgp_offsets_and_neuron_peers():
    # AWS timing code: 2^(t mod floor(log2 R)), i in range(int(log2 R))
    assert aws_exp_offsets(16) == (1, 2, 4, 8)
    assert aws_exp_offsets(8) == (1, 2, 4)
    assert aws_exp_offsets(6) == (1, 2)            # floor(log2 6) = 2 ...
    assert exp_graph_exponents(6) == (0, 1, 2)     # ... while reference SGP uses floor(log2 5) + 1 = 3 exponents
    assert aws_exp_offsets(2) == (1,)
    # NEURON code: peers j*3^i, j = 1, 2, i = t mod (floor(log3(R-1)) + 1)
    # R = 10: floor(log3 9) = 2 -> period 3: (1, 2), (3, 6), (9, 18), then (1, 2) again
    assert [base3_offsets(10, t) for t in range(4)] == [(1, 2), (3, 6), (9, 18), (1, 2)]
    # R = 4: floor(log3 3) = 1 -> period 2
    assert [base3_offsets(4, t) for t in range(3)] == [(1, 2), (3, 6), (1, 2)]
    # exact integer logs: int(math.log(243, 3)) is 4 in floating point, the code means 5
    assert floor_log(243, 3) == 5 and floor_log(242, 3) == 4 and floor_log(1, 3) == 0
    assert strat("sgp").period(16) == 4 and strat("sgp", mode="neuron").period(10) == 3
    assert strat("sgp", mode="overlap").period(6) == 3


# ---- SGP: blocking per segment after the step (default) -------------------------------------

def test_sgp_blocking_per_segment_after_step(make_workload, mesh):
    w, topo = make_workload(4), mesh(4)
    s = strat("sgp")
    assert s.params.mode == "blocking"
    plan = s.plan_iteration(w, topo, 0)                       # iteration 0: offset 2^0 = 1
    ts = transfers(plan)
    # 4 segments x 4 ranks, each rank -> rank + 1, exactly the 4 MB segment (no push-sum element)
    assert len(ts) == 16 and {t.nbytes for t in ts} == {4e6}
    assert sorted({(t.src, t.dst) for t in ts}) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    # the first segment leaves only after the sender's optimizer step
    upd = {op.rank: op.id for op in plan.ops if isinstance(op, Compute) and op.label == "update"}
    first = [t for t in ts if t.label.startswith("segment 0 ")]
    assert all(upd[t.src] in t.deps for t in first)
    # 12.4 ms compute + 4 segments one after another x 4.001 ms = 28.404 ms
    assert makespan(plan, topo) == pytest.approx(12.4 * MS + 4 * 4.001 * MS, rel=1e-9)
    # with gamma 1e-10 s/B each 0.5/0.5 average of a received 4 MB segment costs 0.4 ms:
    # 12.4 + 4 x (4.001 + 0.4) = 30.004 ms
    topo_g = full_mesh(4, LINK, gamma=1e-10)
    assert makespan(s.plan_iteration(w, topo_g, 0), topo_g) == pytest.approx(30.004 * MS, rel=1e-9)


def test_sgp_overlap_hides_what_blocking_exposes(make_workload, mesh):
    w, topo = make_workload(4), mesh(4)
    blocking = makespan(strat("sgp").plan(w, topo), topo)
    over = strat("sgp", mode="overlap").plan(w, topo)
    # overlap: 16 MB + 4 B push-sum weight posted at iteration start: 16.000004 ms + 1 us > fwd+bwd 12 ms,
    # then update 0.4 ms: 16.401004 ms
    assert {t.nbytes for t in transfers(over)} == {16e6 + 4}
    assert makespan(over, topo) == pytest.approx(16.401004 * MS, rel=1e-9)
    assert blocking == pytest.approx(28.404 * MS, rel=1e-9) and blocking > makespan(over, topo)


def test_sgp_same_peer_runs_a_pair_allreduce(make_workload, mesh):
    """Offset R/2: rank r sends to and receives from the same rank, so the AWS code runs all_reduce on the pair."""
    w, topo = make_workload(4), mesh(4)
    plan = strat("sgp").plan_iteration(w, topo, 1)           # iteration 1: offset 2^1 = 2 = R/2
    pairs = colls(plan, "allreduce")
    assert not transfers(plan)
    assert len(pairs) == 4 * 2 and {c.ranks for c in pairs} == {(0, 2), (1, 3)} and {c.nbytes for c in pairs} == {4e6}
    # a 2-rank all-reduce of 4 MB (Rabenseifner: 2 steps of 2 MB, 2 x 2.001 ms) moves the same 4 MB per rank
    # as the two messages would: 12.4 + 4 x 4.002 = 28.408 ms
    assert makespan(plan, topo) == pytest.approx(28.408 * MS, rel=1e-9)
    # R = 2: every iteration is a pair
    assert len(colls(strat("sgp").plan(make_workload(2), mesh(2)), "allreduce")) == 4


def test_sgp_neuron_two_peers_barriers_no_sleep(make_workload, mesh):
    w, topo = make_workload(4), mesh(4)
    plan = strat("sgp", mode="neuron").plan_iteration(w, topo, 0)   # peers +1 then +2
    ts = transfers(plan)
    seg0 = [(t.src, t.dst) for t in ts if t.label.startswith("segment 0 ")]
    assert seg0 == [(r, (r + 1) % 4) for r in range(4)] + [(r, (r + 2) % 4) for r in range(4)]
    bars = colls(plan, "allreduce")
    assert len(bars) == 4 * 2 and all(b.nbytes == 4 and b.ranks == (0, 1, 2, 3) for b in bars)
    # per segment: 4.001 (peer 1) + barrier 2.008 us + 4.001 (peer 2) + 2.008 us = 8.006016 ms;
    # 12.4 + 4 x 8.006016 = 44.424064 ms (no 0.3 s sleeps)
    assert makespan(plan, topo) == pytest.approx(44.424064 * MS, rel=1e-9)
    # the 1/3 average reads both received segments: 2 x 4 MB x 1e-10 = 0.8 ms per segment
    topo_g = full_mesh(4, LINK, gamma=1e-10)
    plan_g = strat("sgp", mode="neuron").plan_iteration(w, topo_g, 0)
    # (the barriers' 4-byte reductions add about 1e-8 s)
    assert makespan(plan_g, topo_g) == pytest.approx((44.424064 + 4 * 0.8) * MS, abs=1e-8)
    # iteration 1: offsets 3 and 6 = 2 (mod 4)
    p1 = strat("sgp", mode="neuron").plan_iteration(w, topo, 1)
    assert {(t.src, t.dst) for t in transfers(p1) if t.label.startswith("segment 0 ")} == \
        {(r, (r + 3) % 4) for r in range(4)} | {(r, (r + 2) % 4) for r in range(4)}


def test_sgp_neuron_skips_messages_to_oneself(make_workload, mesh):
    # R = 2: offsets 1 and 2; 2 = 0 (mod 2) is rank r itself, a local copy
    plan = strat("sgp", mode="neuron").plan(make_workload(2), mesh(2))
    assert sorted((t.src, t.dst) for t in transfers(plan) if t.label.startswith("segment 0 ")) == [(0, 1), (1, 0)]


# ---- D-PSGD ----------------------------------------------------------------------------------

def test_dpsgd_blocking_both_neighbours_per_segment(make_workload, mesh):
    w, topo = make_workload(4), mesh(4)
    plan = strat("dpsgd", mode="blocking").plan(w, topo)
    ts = transfers(plan)
    assert len(ts) == 4 * 8 and {t.nbytes for t in ts} == {4e6}
    assert {(t.src, t.dst) for t in ts if t.label.startswith("segment 0 ")} == \
        {(r, (r + 1) % 4) for r in range(4)} | {(r, (r - 1) % 4) for r in range(4)}
    # both directions at once on their own links: 12.4 + 4 x 4.001 = 28.404 ms
    assert makespan(plan, topo) == pytest.approx(28.404 * MS, rel=1e-9)
    # overlap (default, Lian et al. Alg. 1): exactly |theta| = 16 MB (no push-sum weight), hidden up to 12 ms:
    # 16.001 + 0.4 = 16.401 ms
    over = strat("dpsgd").plan(w, topo)
    assert {t.nbytes for t in transfers(over)} == {16e6}
    assert makespan(over, topo) == pytest.approx(16.401 * MS, rel=1e-9)


# ---- Crossover-SGD ---------------------------------------------------------------------------

def test_crossover_serial_blocking_overlap_timings(make_workload, mesh):
    cls = "crossover-sgd"
    # R = 3: the only derangements are the two 3-cycles, so no 2-cycle (pair all-reduce) can occur
    w3, t3 = make_workload(3), mesh(3)
    blocking = strat(cls, mode="blocking").plan(w3, t3)
    assert not colls(blocking) and len(transfers(blocking)) == 12
    # one segment after another, no barrier: 12.4 + 4 x 4.001 = 28.404 ms
    assert makespan(blocking, t3) == pytest.approx(28.404 * MS, rel=1e-9)
    # R = 4, serial (default, training code): + a 4-rank barrier (2.008 us) after every segment:
    # 12.4 + 4 x (4.001 + 0.002008) = 28.412032 ms
    w4, t4 = make_workload(4), mesh(4)
    serial = strat(cls).plan(w4, t4)
    assert makespan(serial, t4) == pytest.approx(28.412032 * MS, rel=1e-9)
    # overlap (Alg. 1): all 4 segments in flight at once; on the mesh a rank's segments to the same peer share
    # that pair's link, so the exchange takes (most segments on one ordered pair) x 4 ms + 1 us
    over = strat(cls, mode="overlap").plan(w3, t3)
    load = Counter((t.src, t.dst) for t in transfers(over))
    assert makespan(over, t3) == pytest.approx(12.4 * MS + max(load.values()) * 4 * MS + US, rel=1e-9)
    assert makespan(over, t3) <= makespan(blocking, t3)


def test_crossover_two_cycles_pair_allreduce_only_in_aws_mode(make_workload, mesh):
    w, topo = make_workload(2), mesh(2)
    aws = strat("crossover-sgd", mode="blocking").plan(w, topo)
    # R = 2: every table is the 2-cycle 0 <-> 1: one 2-rank all-reduce of each 4 MB segment, no message
    assert not transfers(aws)
    assert [(c.kind, c.ranks, c.nbytes) for c in colls(aws)] == [("allreduce", (0, 1), 4e6)] * 4
    assert makespan(aws, topo) == pytest.approx(28.408 * MS, rel=1e-9)   # 12.4 + 4 x 4.002
    # training code (MPI isend/recv): two messages per segment, then the barrier
    train = strat("crossover-sgd").plan(w, topo)
    assert len(transfers(train)) == 8 and all(c.nbytes == 4 for c in colls(train))


def test_crossover_blocking_pairs_match_its_tables(make_workload, mesh):
    """R = 6: every segment's 2-cycles become all-reduces, every other rank sends one message."""
    plan = strat("crossover-sgd", mode="blocking", seed=3).plan(make_workload(6), mesh(6))
    for s in range(4):
        dest = fair_peer_table(6, 3, 0, s)
        two = {tuple(sorted((r, int(dest[r])))) for r in range(6) if int(dest[int(dest[r])]) == r}
        got = {c.ranks for c in colls(plan) if c.label.startswith(f"segment {s} ")}
        sent = {(t.src, t.dst) for t in transfers(plan) if t.label.startswith(f"segment {s} ")}
        assert got == two
        assert sent == {(r, int(dest[r])) for r in range(6) if tuple(sorted((r, int(dest[r])))) not in two}


# ---- fair peer selection: the code's select_layer ---------------------------------------------

@settings(max_examples=80, deadline=None)
@given(st.integers(2, 200), st.integers(0, 10_000), st.integers(0, 50), st.integers(0, 30))
def test_select_sources_forced_choice_and_inverse(n, seed, it, seg):
    sel = select_sources(n, seed, it, seg).tolist()
    assert sorted(sel) == list(range(n)) and all(sel[i] != i for i in range(n))
    if n - 1 not in sel[: n - 2]:
        assert sel[n - 2] == n - 1                 # select_layer's forced choice at i = G-2
    dest = fair_peer_table(n, seed, it, seg).tolist()
    assert all(dest[sel[i]] == i for i in range(n))   # r sends to sel.index(r)


def _select_layer_step_by_step(n, seed, it, seg):
    """select_layer as the seed code walks it: at source i, a uniform pick among the ranks nobody has chosen yet
    (never i itself), G-1 forced at i = G-2 while free; the pick's index is int(u * pool size) of one draw."""
    u = np.random.default_rng([seed, it, seg]).random(n).tolist()
    pool, sel = list(range(n)), []
    for i in range(n):
        if i == n - 2 and n - 1 in pool:
            pick = n - 1
        elif i in pool:
            k = int(u[i] * (len(pool) - 1))
            k += k >= pool.index(i)
            pick = pool[k]
        else:
            pick = pool[int(u[i] * len(pool))]
        # select_sources keeps the pool by swapping the last into the chosen place: the same order here
        at = pool.index(pick)
        pool[at] = pool[-1]
        pool.pop()
        sel.append(pick)
    return sel


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 300), st.integers(0, 10_000), st.integers(0, 50), st.integers(0, 30))
def test_select_sources_is_select_layer_step_by_step(n, seed, it, seg):
    assert select_sources(n, seed, it, seg).tolist() == _select_layer_step_by_step(n, seed, it, seg)


def test_select_sources_distribution_for_four_ranks():
    """Hand-enumerated select_layer for G = 4 (sources in order, uniform over unchosen non-self, forced at i = 2).

    sel[0] = a uniform on {1, 2, 3}.  a = 1: sel[1] uniform on {0, 2, 3} -> [1,0,3,2], [1,2,3,0], [1,3,0,2]
    (1/9 each; i = 2 is forced to 3 when 3 is free).  a = 2: sel[1] uniform on {0, 3}: 0 -> [2,0,3,1] (1/6);
    3 -> sel[2] uniform on {0, 1}: [2,3,0,1], [2,3,1,0] (1/12 each).  a = 3 likewise: [3,0,1,2] (1/6),
    [3,2,0,1], [3,2,1,0] (1/12 each).
    """
    want = {(1, 0, 3, 2): 1 / 9, (1, 2, 3, 0): 1 / 9, (1, 3, 0, 2): 1 / 9, (2, 0, 3, 1): 1 / 6,
            (2, 3, 0, 1): 1 / 12, (2, 3, 1, 0): 1 / 12, (3, 0, 1, 2): 1 / 6, (3, 2, 0, 1): 1 / 12,
            (3, 2, 1, 0): 1 / 12}
    draws = 4000
    got = Counter(tuple(select_sources(4, seed, 0, 0).tolist()) for seed in range(draws))
    assert set(got) == set(want)
    for k, p in want.items():
        # binomial std at p = 1/6, n = 4000 is 0.006: 0.03 is 5 sigma
        assert abs(got[k] / draws - p) < 0.03


# ---- hierarchical Crossover-SGD ----------------------------------------------------------------

def test_hierarchical_reduce_after_backward_vs_overlap(make_workload, mesh):
    """R = 4, groups=2 ({0,1}, {2,3}), 4 MB buckets (one per layer)."""
    w, topo = make_workload(4, bucket_mb=4), mesh(4)
    after = strat("hierarchical-crossover-sgd", groups=2).plan(w, topo)
    red = colls(after, "reduce")
    assert [(c.ranks, c.nbytes) for c in red] == [((0, 1), 16e6), ((2, 3), 16e6)]   # one flat reduce per group
    ups = [op for op in after.ops if isinstance(op, Compute) and op.label == "update"]
    assert sorted(op.rank for op in ups) == [0, 2]                                  # only the roots step
    # the reduce starts when backward ends (fwd 4 + bwd 8 = 12 ms) and takes Rabenseifner's 2 x (1 us + 8 ms):
    # the root's update starts at 28.002 ms
    end, start = op_end(after, topo, "update", 0)
    assert start == pytest.approx(28.002 * MS, rel=1e-9)
    # reduce=overlap: one 4 MB reduce (2 x 2.001 ms) per bucket as backward produces it: buckets are ready at
    # 6, 8, 10, 12 ms and the reduces queue on one stream: 6 + 4.002 = 10.002, 14.004, 18.006, 22.008 ms
    over = strat("hierarchical-crossover-sgd", groups=2, reduce="overlap").plan(w, topo)
    assert len(colls(over, "reduce")) == 2 * 4
    end, start = op_end(over, topo, "update", 0)
    assert start == pytest.approx(22.008 * MS, rel=1e-9)


def test_hierarchical_training_and_aws_code_paths(make_workload, mesh):
    w, topo = make_workload(4), mesh(4)
    # training code (default): roots 0 and 2 form a 2-cycle in every segment -> two messages, a barrier over
    # all 4 ranks (2.008 us), the 4 MB segment broadcast in each group (binomial, 4.001 ms):
    # 12 + 16.002 (reduce) + 0.4 (root update) + 4 x (4.001 + 0.002008 + 4.001) = 60.418032 ms
    train = strat("hierarchical-crossover-sgd", groups=2).plan(w, topo)
    assert makespan(train, topo) == pytest.approx(60.418032 * MS, rel=1e-9)
    # AWS timing code (aws:742-795): a group barrier (a 4-byte all-reduce of 2 ranks: 1 us + 4 ns), the reduce,
    # the 2-cycle as a pair all-reduce of each segment (4.002 ms), no barrier between segments, a group
    # barrier again, one broadcast of the whole 16 MB model (16.001 ms):
    # 28.402 + 1.004 us + 4 x 4.002 + 1.004 us + 16.001 = 60.413008 ms
    aws = strat("hierarchical-crossover-sgd", groups=2, mode="blocking", broadcast="model").plan(w, topo)
    bars = [((0, 1), 4.0), ((2, 3), 4.0)]
    assert [(c.ranks, c.nbytes) for c in colls(aws, "allreduce")] == bars + [((0, 2), 4e6)] * 4 + bars
    assert [(c.ranks, c.nbytes) for c in colls(aws, "broadcast")] == [((0, 1), 16e6), ((2, 3), 16e6)]
    assert makespan(aws, topo) == pytest.approx(60.413008 * MS, rel=1e-9)


def test_hierarchical_groups_of_one_are_flat(make_workload, mesh):
    """groups = R: group size 1, so no reduce and no broadcast (the AWS code's flat path)."""
    plan = strat("hierarchical-crossover-sgd", groups=4, mode="blocking", broadcast="model").plan(
        make_workload(4), mesh(4))
    assert not colls(plan, "reduce") and not colls(plan, "broadcast")


# ---- bad input through the CLI -----------------------------------------------------------------

@pytest.mark.parametrize("argv, msg", [
    (("--strategy", "sgp", "--opt", "mode=bogus"),
     "mode: 'bogus' is not valid; valid choices: blocking, neuron, overlap"),
    (("--strategy", "crossover-sgd", "--opt", "mode=async"),
     "mode: 'async' is not valid; valid choices: serial, blocking, overlap"),
    (("--strategy", "hierarchical-crossover-sgd", "--opt", "broadcast=all"),
     "broadcast: 'all' is not valid; valid choices: segment, model"),
])
def test_cli_unknown_mode_one_line_exit_2(cli, argv, msg):
    rc, out, err = cli("run", *argv)
    assert rc == 2
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and msg in lines[0]



@settings(max_examples=30, deadline=None)
@given(st.integers(2, 12), st.integers(0, 20), st.sampled_from(["sgp", "crossover-sgd"]))
def test_aws_modes_move_one_model_per_rank(n, it, name):
    """Blocking (AWS) modes: every rank sends and receives exactly |theta| = 16 MB per iteration, whether a
    segment travels as a message or inside a pair all-reduce (which moves the same bytes per rank)."""
    from simcomm.traces.schema import Layer, Trace
    from simcomm.workload import build_workload

    layers = tuple(Layer(f"l{i}", "Conv2d", 1_000_000, 4_000_000, 1e-3, 2e-3, 1e-4) for i in range(4))
    w = build_workload(Trace("toy", 8, "float32", "test", "gpu", "synthetic", layers, 0.0124), n, bucket_mb=0)
    topo = full_mesh(n, LINK)
    plan = strat(name).plan_iteration(w, topo, it) if name == "sgp" else strat(name, mode="blocking", seed=it).plan(w, topo)
    sent, recv = Counter(), Counter()
    for t in transfers(plan):
        sent[t.src] += t.nbytes
        recv[t.dst] += t.nbytes
    for c in colls(plan, "allreduce"):
        assert len(c.ranks) == 2
        for r in c.ranks:
            sent[r] += c.nbytes
            recv[r] += c.nbytes
    assert all(sent[r] == 16e6 and recv[r] == 16e6 for r in range(n))

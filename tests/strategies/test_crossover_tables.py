"""crossover-sgd's serial exchange emitted from its tables (``emit_serial_tables``) is the reference's plan.

``emit_crossover`` makes mode ``serial`` with the averaging per segment (the default of ``crossover-sgd`` and of
``hierarchical-crossover-sgd``) with :func:`~simcomm.strategies.crossover_sgd.emit_serial_tables`; with
``tables=False`` it makes it with the general :func:`~simcomm.strategies._gossip.emit_segment_gossip`.  Both must
give the same plan: every op (id, kind, ranks, bytes or seconds, deps, label, stream, category), the plan's
information and its metadata, with and without identical ranks folded.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest

import simcomm.strategies.crossover_sgd as crossover
import simcomm.strategies.hierarchical_crossover_sgd as hierarchical
from simcomm.pipeline.baseline import make_strategy, scenario_options
from simcomm.scenario.resolve import from_flat
from simcomm.scenario.setup import Resolver, resolve_setup
from simcomm.workload import build_workload

CASES = [
    ("crossover-sgd", {}),
    ("crossover-sgd", {"overlap": "compute"}),
    ("crossover-sgd", {"segments": 3, "seed": 7}),
    ("crossover-sgd", {"interval": 3}),
    ("hierarchical-crossover-sgd", {}),
    ("hierarchical-crossover-sgd", {"broadcast": "model"}),
    ("hierarchical-crossover-sgd", {"reduce": "overlap"}),
    ("hierarchical-crossover-sgd", {"groups": 4, "segments": 5}),
    ("hierarchical-crossover-sgd", {"groups": 12, "seed": 3}),  # groups of one rank: no broadcast
]


def plans(strategy, options, fold, monkeypatch, tables):
    scn = from_flat({"strategy": strategy, "nodes": 3, "gpus_per_node": 4, "cluster": "dgx-a100-hdr", **options})
    st = make_strategy(scn.strategy, scenario_options(scn))
    setup = resolve_setup(scn, Resolver(scn), st.extra_nodes())
    w = replace(build_workload(setup.trace, setup.n_train, batch=8), fold_ranks=fold)
    with monkeypatch.context() as m:
        emit = functools.partial(crossover.emit_crossover, tables=tables)
        m.setattr(crossover, "emit_crossover", emit)
        m.setattr(hierarchical, "emit_crossover", emit)
        return st.iterations(w, setup.topology)


@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize("strategy,options", CASES)
def test_tables_give_the_reference_plan(strategy, options, fold, monkeypatch):
    fast = plans(strategy, options, fold, monkeypatch, tables=True)
    ref = plans(strategy, options, fold, monkeypatch, tables=False)
    assert [w for w, _ in fast] == [w for w, _ in ref]
    for (_, a), (_, b) in zip(fast, ref, strict=True):
        assert a.ops == b.ops
        assert a.info == b.info and a.meta == b.meta and a.n_ranks == b.n_ranks
    assert any(type(op).__name__ == "Transfer" for _, p in fast for op in p.ops)


def test_the_fast_emitter_is_the_one_used_by_default(monkeypatch):
    called = []
    real = crossover.emit_serial_tables

    def spy(*args, **kw):
        called.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(crossover, "emit_serial_tables", spy)
    scn = from_flat({"strategy": "crossover-sgd", "nodes": 2, "gpus_per_node": 2, "cluster": "dgx-a100-hdr"})
    st = make_strategy(scn.strategy, scenario_options(scn))
    setup = resolve_setup(scn, Resolver(scn), st.extra_nodes())
    st.iterations(build_workload(setup.trace, setup.n_train, batch=8), setup.topology)
    assert called
    called.clear()
    st = make_strategy("crossover-sgd", {"mode": "blocking"})
    st.iterations(build_workload(setup.trace, setup.n_train, batch=8), setup.topology)
    assert not called  # blocking keeps the general emitter

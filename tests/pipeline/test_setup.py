"""Scenario -> Setup (simcomm.scenario.setup) and run_plans' one RunRecord (simcomm.pipeline.plans)."""

from __future__ import annotations

import dataclasses

import pytest

from simcomm.pipeline import RunOptions, RunRecord, make_strategy, run_plans
from simcomm.scenario import from_flat
from simcomm.scenario.setup import Resolver, Setup, resolve_setup
from simcomm.workload import build_workload


def test_a_setup_is_typed_frozen_and_says_its_choices():
    scn = from_flat({"cluster": "dgx-a100-hdr", "nodes": 2, "strategy": "allreduce", "precision": "bf16"})
    setup = resolve_setup(scn, Resolver(scn))
    assert isinstance(setup, Setup)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setup.n_train = 3  # type: ignore[misc]
    assert (setup.n_train, setup.gpus_per_node, setup.stack_name, setup.runtime.name) == (16, 8, "nccl", "nccl")
    assert setup.topology.n_ranks == setup.cluster.n_ranks == 16 and setup.device == "a100-80g"
    assert setup.wire_dtype == "bf16" and setup.dataset_size == 1_281_167 and setup.compute_scale == ()
    assert not setup.cluster.network.any()
    # one line per choice, in the order the run prints them
    starts = ("trace: ", "8 GPU(s) per node (dgx-a100-hdr preset)", "transport stack nccl: ", "dataset size 1281167",
              "precision bf16: ")
    assert len(setup.notes) == len(starts)
    assert all(line.startswith(s) for line, s in zip(setup.notes, starts, strict=False)), setup.notes


def test_a_parameter_server_setup_counts_training_ranks_only():
    scn = from_flat({"cluster": "dgx-a100-hdr", "nodes": 2, "strategy": "ps"})
    setup = resolve_setup(scn, Resolver(scn), extra=1)
    assert setup.n_train == 16 and setup.cluster.n_ranks == 24  # one more machine of 8, its first rank serves
    assert setup.cluster.meta["server_ranks"] == (16,)


def test_run_plans_returns_one_record():
    scn = from_flat({"cluster": "dgx-a100-hdr", "nodes": 2, "strategy": "allreduce"})
    setup = resolve_setup(scn, Resolver(scn))
    w = build_workload(setup.trace, setup.n_train)
    plans = make_strategy("allreduce", {}).iterations(w, setup.topology)
    seen = []
    record = run_plans(plans, setup.topology, setup.n_train, RunOptions("analytic", 0, setup.runtime),
                       on_timeline=lambda *a: seen.append(a[0]))
    assert isinstance(record, RunRecord) and len(record.kinds) == len(plans) == len(seen)
    assert record.merged_flows == 0
    ((kind, asked), ran), = record.algorithms.items()
    assert (kind, asked) == ("allreduce", "auto") and sum(ran.values()) > 0

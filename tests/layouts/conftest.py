"""Tiny hand-computable transformers for the layout tests (context parallelism, HSDP, layout axes).

``L`` blocks of an attention and an MLP layer, sequence ``s = 4``, hidden ``h = 8``,
4 heads of dimension 2, bf16 (2 bytes): one sample's K and V for the whole sequence
are ``2 · 4 · 8 · 2 = 128`` bytes.  Gradient bytes: attention 256, MLP 512 per block.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from simcomm import engine
from simcomm.links.base import LinkClass
from simcomm.ops import Collective, Transfer
from simcomm.runtimes.mpi import MPICH
from simcomm.strategies import STRATEGIES
from simcomm.strategies.base import make_params
from simcomm.topologies.full_mesh import full_mesh
from simcomm.traces.schema import Layer, Trace
from simcomm.workload import build_workload

S, H = 4, 8
TF, TB = 1e-3, 2e-3  # forward / backward seconds of one block at the trace's batch
FREE = LinkClass("free", 1e18, 0.0, "nvlink")  # communication ~free: the dependencies alone set the time


def tiny(blocks=1, *, ends=False, batch=1, heads=4, kv_heads=None, seq=S) -> Trace:
    layers = []
    if ends:
        layers.append(Layer("embed", "Embedding", 100, 400, 0.0, 0.0, 0.0, (seq,), (seq, H)))
    for i in range(blocks):
        layers.append(Layer(f"block{i}.attn", "Attention", 64, 256, TF / 2, TB / 2, 0.0, (seq, H), (seq, H)))
        layers.append(Layer(f"block{i}.mlp", "MLP", 128, 512, TF / 2, TB / 2, 0.0, (seq, H), (seq, H)))
    if ends:
        layers.append(Layer("head", "Linear", 100, 400, 0.0, 0.0, 0.0, (seq, H), (seq, 100)))
    meta = {"transformer": {"layers": blocks, "hidden": H, "ffn": 4 * H, "heads": heads,
                            "kv_heads": kv_heads or heads, "vocab": 100, "seq": seq, "experts": 0, "top_k": 1,
                            "shared_experts": 0, "tied": False}}
    return Trace("tiny-gpt", batch, "bf16", "test", "gpu", "synthetic", tuple(layers), iteration_s=1.0, meta=meta)


def plan_of(n, opts, trace=None, batch=1, link=FREE):
    w = build_workload(trace or tiny(), n, batch=batch, bucket_mb=0.0)
    cls = STRATEGIES.get("megatron")
    return cls(make_params(cls, opts)).plan(w, full_mesh(n, link)), w


def run(n, opts, link=FREE, **kw):
    plan, _ = plan_of(n, opts, link=link, **kw)
    return plan, engine.simulate(plan, full_mesh(n, link), runtime=MPICH)


def transfers(plan, text=""):
    return [op for op in plan.ops if isinstance(op, Transfer) and text in op.label]


def colls(plan, kind, text=""):
    return [op for op in plan.ops if isinstance(op, Collective) and op.kind == kind and text in op.label]


@pytest.fixture
def lay():
    """The helpers above, for the tests of this folder."""
    return SimpleNamespace(tiny=tiny, plan_of=plan_of, run=run, transfers=transfers, colls=colls, S=S, H=H,
                           TF=TF, TB=TB, FREE=FREE, replace=replace)

"""Plans the layout tests build: the op count of a layout's real ``megatron`` plan."""

from __future__ import annotations


def built_ops(lay, model: str = "gpt2-small", gpus: int = 8, batch: int = 8, **extra) -> int:
    """Ops of the ``megatron`` plan ``simcomm plan``'s layout ``lay`` runs on one 8-GPU DGX A100 node."""
    from simcomm.pipeline import Context, make_strategy
    from simcomm.scenario import from_flat
    from simcomm.workload import build_workload

    scn = from_flat({"strategy": "megatron", "model": model, "cluster": "dgx-a100-hdr", "nodes": 1,
                     "batch": batch, "scaling": "strong", **lay.options(batch), **extra})
    ctx = Context(scn)
    _, topo = ctx.cluster(1, 0)
    w = build_workload(ctx.trace(), gpus, global_batch=batch, scaling="strong")
    return len(make_strategy("megatron", dict(scn.options)).plan(w, topo).ops)

"""Per-rank compute of a transformer layer at a layout's tensor- and context-parallel shapes.

The ``megatron`` strategy and ``plan``'s estimate both read :func:`sharded_layer_times`, so they price a
layer alike.  A synthesised zoo transformer (``trace.meta["gemm"]``) is re-priced at the rank's own GEMM
shapes (:func:`simcomm.traces.transformer_cost.leaf_seconds`: a ``T x 3h/tp x h`` QKV projection runs in
fewer, emptier waves than ``1/tp`` of the whole one, and a thin one may fall to its memory floor).  The
trace's own time is kept as the scale, so an edited trace is used as given: the model supplies only the
ratio ``tp · cp · t(rank) / t(whole)``.
Any other trace (a capture, a file without ``meta["gemm"]``, a CNN) keeps ``1/(tp · cp)`` of its layer time.
"""

from __future__ import annotations

from simcomm.traces.schema import Layer, Trace
from simcomm.traces.transformer_cost import LeafPricing, Sharding, leaf_seconds
from simcomm.workload import layer_times

__all__ = ["sharded_layer_times"]


def sharded_layer_times(trace: Trace, layer: Layer, micro_batch: int, tp: int = 1,
                        cp: int = 1) -> tuple[float, float]:
    """(forward, backward) of ``layer`` at ``micro_batch`` as a whole-layer time: ``/ (tp · cp)`` is one rank's.

    Without GEMM pricing in the trace's meta this is :func:`simcomm.workload.layer_times`.
    """
    if tp == cp == 1 and micro_batch == trace.batch:
        return layer.forward_s, layer.backward_s  # the trace's own shapes: its own times
    meta = trace.meta or {}
    shape = meta.get("transformer")
    pricing = LeafPricing.from_meta(meta) if shape else None
    whole = (leaf_seconds(layer.module_type, shape, layer.params, trace.batch, pricing, flops=layer.flops)
             if pricing and shape else None)
    if whole is None or pricing is None or not shape:
        return layer_times(layer, trace.batch, micro_batch)
    part = leaf_seconds(layer.module_type, shape, layer.params, micro_batch, pricing, Sharding(tp, cp))
    assert part is not None
    n = tp * cp
    return layer.forward_s * n * part[0] / whole[0], layer.backward_s * n * part[1] / whole[1]

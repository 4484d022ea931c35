"""GPU memory: what one rank needs at its peak, and whether it fits.

* :mod:`simcomm.memory.state`: weights, gradients and optimizer state per parameter, replicated or
  ZeRO-sharded (one table for both models);
* :mod:`simcomm.memory.replicated`: a data-parallel replica of any traced model (every layer's
  kept outputs and internals), used for strategies that do not shard state;
* :mod:`simcomm.memory.activations`: what a transformer block keeps for backward per attention kind
  and recomputation kind, tensor/sequence/context parallel, and the pipeline's in-flight micro-batches;
* :mod:`simcomm.memory.layout`: one rank of a large-model layout (tensor, pipeline, data/ZeRO,
  expert, context parallel), per pipeline stage;
* :mod:`simcomm.memory.fit`: the peak's breakdown, the allocator margin, the GPU's capacity
  (``gpu_memory``) and the policy (``memory = refuse | warn | off``).
"""

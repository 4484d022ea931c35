"""Model state per parameter (weights, gradients, optimizer), replicated or ZeRO-sharded: one table for both models.

Rajbhandari et al., SC 2020 ("ZeRO"), section 3.1: mixed precision (fp16/bf16) with
Adam keeps 2 bytes of weights, 2 of gradients and K = 12 of optimizer state (the fp32
master copy 4, momentum 4, variance 4) per parameter, 16 in all; fp32 training 4 + 4 + 8.
SGD with momentum keeps one fp32 buffer (4), plus the 4-byte master copy under mixed
precision; ``none`` keeps no moments (the master copy still exists under mixed precision).
ZeRO stage 1 shards the optimizer state over the ``d`` data-parallel ranks, stage 2 also
the gradients, stage 3 also the weights; a shard is ``ceil(n / d)`` elements (ZeRO pads
its partitions to whole elements).
"""

from __future__ import annotations

from simcomm.errors import ConfigError

__all__ = ["STATE_BYTES", "MASTER_BYTES", "DTYPES", "OPTIMIZERS", "state_bytes_per_param", "zero_state_bytes",
           "split"]

#: the compute dtypes a memory model accepts -> their state class
DTYPES = {"bf16": "mixed", "fp16": "mixed", "fp32": "fp32"}
OPTIMIZERS = ("adam", "sgd", "none")
#: (weight, gradient, optimizer-state) bytes per parameter; mixed precision's optimizer state includes the
#: fp32 master copy (:data:`MASTER_BYTES`)
STATE_BYTES = {("mixed", "adam"): (2, 2, 12), ("mixed", "sgd"): (2, 2, 8), ("mixed", "none"): (2, 2, 4),
               ("fp32", "adam"): (4, 4, 8), ("fp32", "sgd"): (4, 4, 4), ("fp32", "none"): (4, 4, 0)}
#: the fp32 master copy mixed precision keeps per parameter (part of the optimizer state above)
MASTER_BYTES = 4


def state_bytes_per_param(dtype: str = "bf16", optimizer: str = "adam") -> tuple[int, int, int]:
    """(weight, gradient, optimizer) bytes per parameter; unknown choices are one-line errors."""
    if dtype not in DTYPES:
        raise ConfigError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"optimizer: {optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
    return STATE_BYTES[(DTYPES[dtype], optimizer)]


def split(n: int, parts: int) -> int:
    """``ceil(n / parts)``: a shard or a tensor-parallel slice rounded up to whole elements."""
    return -(-n // parts)


def zero_state_bytes(n: int, dp: int = 1, zero: int = 0, dtype: str = "bf16",
                     optimizer: str = "adam") -> tuple[int, int, int]:
    """(weight, gradient, optimizer) bytes per rank of ``n`` parameters replicated over ``dp`` ranks at ZeRO
    stage ``zero`` (ZeRO paper, Figure 1)."""
    pb, gb, ob = state_bytes_per_param(dtype, optimizer)
    shard = split(n, dp)
    return (pb * (shard if zero >= 3 else n), gb * (shard if zero >= 2 else n), ob * (shard if zero >= 1 else n))

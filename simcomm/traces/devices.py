"""Compute devices for roofline synthesis: documented peaks and efficiency factors.

Peaks come from ``shared/reference/cost-models-and-hardware.md`` section 4
(source keys in each entry's reference).  Peaks are never reached by real
training kernels, so the roofline multiplies them by efficiency factors
(:data:`DEFAULT_COMPUTE_EFF`, :data:`DEFAULT_MEMORY_EFF`); docs/traces.md
explains the choice and its expected error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simcomm.errors import ConfigError
from simcomm.registry import Registry

__all__ = ["DeviceSpec", "DEVICES", "DEFAULT_COMPUTE_EFF", "DEFAULT_MEMORY_EFF", "get_device"]

#: fraction of peak FLOP/s a training step sustains on large GEMM/conv layers
DEFAULT_COMPUTE_EFF = 0.5
#: fraction of peak memory bandwidth sustained by streaming (elementwise, BN) kernels
DEFAULT_MEMORY_EFF = 0.7


@dataclass(frozen=True)
class DeviceSpec:
    """Peak throughput of one device; FLOP/s per dtype and memory bytes/s."""

    name: str
    kind: str  # "gpu" or "cpu"
    peak_flops: dict = field(default_factory=dict)  # dtype -> FLOP/s
    mem_bw: float = 0.0  # bytes/s
    memory: float = 0.0  # bytes
    compute_eff: float = DEFAULT_COMPUTE_EFF
    memory_eff: float = DEFAULT_MEMORY_EFF
    launch_s: float = 0.0  # fixed per-kernel overhead added to every layer pass

    def flops_for(self, dtype: str) -> float:
        """Peak FLOP/s for ``dtype``; a device without that dtype is a user error."""
        if dtype not in self.peak_flops:
            raise ConfigError(f"dtype: device {self.name!r} has no documented {dtype} peak; "
                              f"valid choices: {', '.join(self.peak_flops)}")
        return self.peak_flops[dtype]


DEVICES: Registry[DeviceSpec] = Registry("device", "simcomm.devices")

# GPU launch overhead ~5 us per kernel on CUDA (why: tiny layers are latency-bound, not roofline-bound)
_GPU_LAUNCH = 5e-6


def _add(name, kind, summary, reference, peaks, mem_bw, memory, launch=_GPU_LAUNCH, **kw):
    DEVICES.add(name, DeviceSpec(name, kind, peaks, mem_bw, memory, launch_s=launch, **kw),
                summary=summary, reference=reference)


_add("v100", "gpu", "NVIDIA V100 SXM2: 15.7 TF fp32, 125 TF fp16 tensor, 900 GB/s HBM2",
     "[V100-wp] [V100-bw] [V100-32]", {"fp32": 15.7e12, "fp16": 125e12}, 900e9, 16e9)
_add("a100", "gpu", "NVIDIA A100 SXM4 40 GB: 19.5 TF fp32, 312 TF fp16/bf16 tensor, 1555 GB/s",
     "[A100-gk] [A100-pc2] [A100-tc]", {"fp32": 19.5e12, "fp16": 312e12, "bf16": 312e12}, 1555e9, 40e9)
_add("h100", "gpu", "NVIDIA H100 SXM5: 66.9 TF fp32, 989.4 TF fp16/bf16 tensor, 3.35 TB/s",
     "[H100-gk]", {"fp32": 66.9e12, "fp16": 989.4e12, "bf16": 989.4e12}, 3.35e12, 80e9)
_add("t4", "gpu", "NVIDIA T4: 8.1 TF fp32, 65 TF fp16 tensor, 320 GB/s GDDR6",
     "[T4-sys] [T4-es]", {"fp32": 8.1e12, "fp16": 65e12}, 320e9, 16e9)
_add("1080ti", "gpu", "NVIDIA GTX 1080 Ti: 11.34 TF fp32 (3584 cores x 2 x 1.582 GHz), 484 GB/s",
     "[1080Ti] (fp32 peak derived)", {"fp32": 11.34e12}, 484e9, 11e9)
_add("haswell", "cpu", "Cori Haswell node, 2x E5-2698 v3: 2.36 TF fp32, 136.6 GB/s DDR4",
     "[CORI] [HSW-uw] [HSW-bw] (fp32 = 2x DP, derived)", {"fp32": 2.36e12}, 136.6e9, 128e9, launch=2e-6)


def get_device(name: str) -> DeviceSpec:
    """Look up a device; unknown names raise UnknownNameError listing the choices."""
    return DEVICES.get(name)

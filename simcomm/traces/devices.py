"""Compute devices for roofline synthesis: documented peaks and calibrated efficiency factors.

Peaks come from ``shared/reference/cost-models-and-hardware.md`` section 4 and,
for the devices added later (A100 80 GB, H200, B200, GB200, L40S), from the sources
listed in docs/traces.md (keys in each entry's reference).  Real training
kernels never reach peak, so the roofline multiplies the peaks by efficiency
factors.  A CNN compute factor is **fitted** only on an allowed source
(DEVELOPERS.md: a seed paper's stated single-GPU compute time, or this project's
own capture), one unknown per device, on a row that is then reported only as a
calibration (:mod:`simcomm.traces.calibration`, ``data/compute_anchors.json``):
the V100 and GTX 1080 Ti on seed 004's worker compute, the H100 on its own CUDA
run.  The device's other precisions keep the same fraction of their own peak.
Every other GPU **borrows** the factor of the nearest fitted device (its source
says which and why); the CPU keeps the engineering defaults
:data:`DEFAULT_COMPUTE_EFF` and :data:`DEFAULT_MEMORY_EFF`.  Published training
benchmarks (NVIDIA DeepLearningExamples, Lambda, MLPerf) are neither collected
nor fitted.

``fp32`` on Ampere and later runs on TF32 tensor cores by default in NVIDIA's
containers and in torch's convolutions (``fp32_math = "tf32"``); a strict-FP32
model would be up to 8x slower for GEMMs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simcomm.errors import ConfigError, UnknownNameError
from simcomm.registry import Registry

__all__ = ["DeviceSpec", "Efficiency", "DEVICES", "DEFAULT_COMPUTE_EFF", "DEFAULT_MEMORY_EFF", "CLUSTER_DEVICES",
           "get_device", "device_for_cluster"]

#: fraction of peak FLOP/s assumed where no allowed measurement was fitted nor borrowed (the CPU)
DEFAULT_COMPUTE_EFF = 0.5
#: fraction of peak memory bandwidth sustained by streaming (elementwise, BN) kernels; also kept for fitted devices
DEFAULT_MEMORY_EFF = 0.7


@dataclass(frozen=True)
class Efficiency:
    """Roofline factors for one precision of one device, and where they come from."""

    compute: float
    memory: float
    source: str  # "fitted on <anchor id> (...)", "borrowed: <why>; <its source>", or "default (not calibrated)"
    #: the anchor row (data/compute_anchors.json) the factor was fitted on, kept through every borrow; "" if none
    anchor: str = ""
    #: what the factor was borrowed from (a device, or "the fp16 fit"); "" for a factor fitted or defaulted here
    lender: str = ""

    @property
    def calibrated(self) -> bool:
        return not self.source.startswith("default")

    @property
    def origin(self) -> str:
        """Short form of the source: ``fitted on <anchor>``, ``borrowed from <device>, fitted on <anchor>``, ..."""
        if not self.lender:
            return self.source.split(" (")[0]
        return ", ".join(x for x in (f"borrowed from {self.lender}", self.anchor and f"fitted on {self.anchor}") if x)


@dataclass(frozen=True)
class DeviceSpec:
    """Peak throughput of one device; FLOP/s per math mode and memory bytes/s."""

    name: str
    kind: str  # "gpu" or "cpu"
    peak_flops: dict = field(default_factory=dict)  # math mode (fp32, tf32, fp16, bf16) -> FLOP/s
    mem_bw: float = 0.0  # bytes/s
    memory: float = 0.0  # bytes: nominal capacity (vendors' "GB" is GiB)
    compute_eff: float = DEFAULT_COMPUTE_EFF  # used for precisions without a fitted entry
    memory_eff: float = DEFAULT_MEMORY_EFF
    launch_s: float = 0.0  # fixed per-kernel overhead added to every layer pass
    label: str = ""  # display name ("V100", "GTX 1080 Ti")
    fp32_math: str = "fp32"  # "tf32" where fp32 training runs on TF32 tensor cores by default
    fitted: tuple = ()  # ((dtype, Efficiency), ...): calibrated factors per trace dtype
    # ((dtype, Efficiency), ...) for GEMM-bound transformers: ResNet-50's factors (convolutions, small
    # elementwise kernels) are several times too pessimistic for their large matrix multiplies
    fitted_transformer: tuple = ()
    # streaming multiprocessors: the GEMM model's waves (simcomm.traces.gemm); 0 for a CPU (no tiles)
    sms: int = 0

    @property
    def fp8_formats(self) -> tuple[str, ...]:
        """The FP8 GEMM formats its tensor cores run: ``fp8`` (Hopper, Ada, Blackwell), ``mxfp8`` (Blackwell)."""
        return tuple(f for f in ("fp8", "mxfp8") if f in self.peak_flops)

    def flops_for(self, dtype: str) -> float:
        """Peak FLOP/s for ``dtype``; a device without that dtype is a user error."""
        math = self.fp32_math if dtype == "fp32" else dtype
        if math not in self.peak_flops:
            valid = [d for d in ("fp32", "fp16", "bf16") if d in self.peak_flops]
            raise ConfigError(f"dtype: device {self.name!r} has no documented {dtype} peak; "
                              f"valid choices: {', '.join(valid)}")
        return self.peak_flops[math]

    def efficiency(self, dtype: str, family: str = "cnn") -> Efficiency:
        """Factors for ``dtype``: the fitted entry, else the device's defaults (labelled).

        ``family="transformer"`` prefers a transformer fit and otherwise falls back to the
        CNN fit, saying so in the source.
        """
        if family == "transformer":
            for key, eff in self.fitted_transformer:
                if key == dtype:
                    return eff
        for key, eff in self.fitted:
            if key == dtype:
                if family == "transformer":
                    return Efficiency(eff.compute, eff.memory, f"CNN factors (no transformer fit): {eff.source}",
                                      anchor=eff.anchor)
                return eff
        return Efficiency(self.compute_eff, self.memory_eff, "default (not calibrated)")


DEVICES: Registry[DeviceSpec] = Registry("device", "simcomm.devices")

# GPU launch overhead ~5 us per kernel on CUDA (why: tiny layers are latency-bound, not roofline-bound)
_GPU_LAUNCH = 5e-6
# GPU and DIMM "GB" are binary: a "16 GB" V100 holds 16 GiB (nvidia-smi: 16160 MiB usable)
_GIB = 2**30


def _fit(compute: float, row: str) -> Efficiency:
    return Efficiency(compute, DEFAULT_MEMORY_EFF, f"fitted on {row} (data/compute_anchors.json)", anchor=row)


def _borrow(eff: Efficiency, why: str, lender: str = "") -> Efficiency:
    """``eff`` under a new source; ``lender`` names what it came from, when the origin should say so."""
    return Efficiency(eff.compute, eff.memory, f"borrowed: {why}; {eff.source}", anchor=eff.anchor, lender=lender)


def _one_unknown(dtype: str, eff: Efficiency, others: tuple[str, ...]) -> tuple:
    """``fitted`` for a device with one fitted precision: its other precisions keep the same fraction of peak."""
    return ((dtype, eff),) + tuple((d, _borrow(eff, f"from the {dtype} fit, the same fraction of the {d} peak (one "
                                                  "unknown per device)", lender=f"the {dtype} fit")) for d in others)


def _borrow_all(fits: tuple, why: str) -> tuple:
    """Every precision of ``fits`` borrowed for ``why``."""
    return tuple((d, _borrow(e, why)) for d, e in fits)


def _from(fits: tuple, device: str, why: str) -> tuple:
    """``device``'s factors, every precision, borrowed for ``why``."""
    return tuple((d, _borrow(e, f"from {device}, {why}", lender=device)) for d, e in fits)


# Streaming multiprocessors per GPU (the GEMM model's wave size): NVIDIA's architecture whitepapers (V100 80,
# A100 108, H100 SXM5 132, AD102 in the L40S 142, T4 40, GP102 in the 1080 Ti 28) and the B200's 148 [B200-gk]
_SMS = {"v100": 80, "a100": 108, "a100-80g": 108, "h100": 132, "h800": 132, "h200": 132, "b200": 148, "gb200": 148,
        "l40s": 142, "t4": 40, "1080ti": 28}
# Dense FP8 tensor-core peaks (half the datasheets' "with sparsity" figures): H100 SXM5 3958 TF sparse [H100-gk],
# the H200 the same GH100 compute; HGX B200 9 PF and GB200 10 PF sparse FP8/FP6, MXFP8 at the FP8 rate
# [B200-gk]; L40S 1466 TF sparse [L40S-ds].  Ampere, Volta and Turing have no FP8 tensor cores.
_FP8_H100 = {"fp8": 1978.9e12}
_FP8_B200 = {"fp8": 4.5e15, "mxfp8": 4.5e15}
_FP8_GB200 = {"fp8": 5e15, "mxfp8": 5e15}

# The fitted CNN compute factors, one per device (memory factor held at DEFAULT_MEMORY_EFF: one row fits one
# factor).  Regenerate with simcomm.traces.calibration.fit_all(); tests/traces/test_calibration.py checks they agree.
# V100, 1080 Ti: seed 004 Table 1's no-drop worker compute (ResNet-50, TensorFlow 1.13, fp32, batch 64 assumed),
# the forward + backward of one worker; those two rows are then seed004's calibration rows, not predictions.
# H100: this project's unhooked ResNet-50 step (batch 64, TF32 convolutions, zoo module) on one H100.
_V100_FP32 = _fit(0.593, "seed004-v100-rn50-worker")
_1080TI_FP32 = _fit(0.478, "seed004-1080ti-rn50-worker")
_H100_FP32 = _fit(0.154, "h100-rn50-fp32-b64")
_V100_FITS = _one_unknown("fp32", _V100_FP32, ("fp16",))
_H100_FITS = _one_unknown("fp32", _H100_FP32, ("fp16", "bf16"))
# Devices with no allowed single-GPU source borrow the nearest fitted device's factor: Ampere and later tensor-core
# GPUs the H100's (the one fitted tensor-core GPU), the T4 the V100's (Turing's SM derives from Volta's; seed 001
# prints no single-instance time)
_NO_SOURCE = "no allowed single-GPU source"


def _add(name, kind, summary, reference, peaks, mem_bw, memory, label, launch=_GPU_LAUNCH, **kw):
    kw.setdefault("sms", _SMS.get(name, 0))
    DEVICES.add(name, DeviceSpec(name, kind, peaks, mem_bw, memory, launch_s=launch, label=label, **kw),
                summary=summary, reference=reference)


_add("v100", "gpu", "NVIDIA V100 SXM2: 15.7 TF fp32, 125 TF fp16 tensor, 900 GB/s HBM2 (calibrated on seed 004)",
     "[V100-wp] [V100-bw] [V100-32]; fitted on seed 004 Table 1 (worker compute, ResNet-50)",
     {"fp32": 15.7e12, "fp16": 125e12}, 900e9, 16 * _GIB, "V100", fitted=_V100_FITS)
_A100_PEAKS = {"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12}
_A100_FITS = _from(_H100_FITS, "h100", f"the nearest fitted tensor-core GPU; {_NO_SOURCE} for the A100")
# Transformers (additive roofline, GEMMs priced by their shapes: simcomm.traces.gemm): the one scalar calibrated
# on Korthikanti et al. 2022's 22B row (full recomputation, tp 8 on one DGX A100 80 GB, Megatron-LM's unfused
# attention; docs/validation.md, "Large-model training"), whose other 17 rows it then predicts; 0.758 under the
# scalar roofline before the GEMM model
_A100_TF = Efficiency(0.784, DEFAULT_MEMORY_EFF, "calibrated on Korthikanti et al. 2022 Table 5, 22B full "
                      "recompute (docs/validation.md)")
_A100_TF_FITS = (("fp16", _A100_TF), ("bf16", _borrow(_A100_TF, "bf16 runs at the fp16 tensor peak")))
_add("a100", "gpu", "NVIDIA A100 SXM4 40 GB: 19.5 TF fp32, 156 TF tf32, 312 TF fp16/bf16 tensor, 1555 GB/s",
     "[A100-gk] [A100-pc2] [A100-tc]; CNN factors borrowed from the h100 fit, transformer factor of a100-80g",
     _A100_PEAKS, 1555e9, 40 * _GIB, "A100 40GB", fp32_math="tf32", fitted=_A100_FITS,
     fitted_transformer=tuple((d, _borrow(e, "same GA100 silicon as a100-80g")) for d, e in _A100_TF_FITS))
_add("a100-80g", "gpu", "NVIDIA A100 SXM4 80 GB: 19.5 TF fp32, 156 TF tf32, 312 TF fp16/bf16 tensor, 2039 GB/s",
     "[A100-gk] (80 GB: 2039 GB/s); CNN factors borrowed from the h100 fit; transformer factor on Korthikanti et "
     "al. 2022", _A100_PEAKS, 2039e9, 80 * _GIB, "A100 80GB", fp32_math="tf32", fitted=_A100_FITS,
     fitted_transformer=_A100_TF_FITS)
_H100_PEAKS = {"fp32": 66.9e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12, **_FP8_H100}
# Transformers (additive roofline with GEMMs priced by their shapes, simcomm.traces.synth): fitted so the
# roofline's forward+backward of megatron-1.7b (batch 4, sequence 2048, bf16 autocast) equals its CUDA capture
# on an H100 SXM5 (2026-11-26, benchmarks/gpu/h100-2026-11-26-llm; docs/traces.md, "Transformer capture");
# held out on hidden sizes 2304-16384 (benchmarks/gpu/h100-2026-11-26-llm-scale) the median error is 3.5 %
# (6.9 % with the scalar roofline's 0.656 before the GEMM model)
_H100_TF = Efficiency(0.675, DEFAULT_MEMORY_EFF, "fitted on an H100 CUDA capture of megatron-1.7b b4 bf16 "
                      "(benchmarks/gpu/h100-2026-11-26-llm)")
_H100_TF_FITS = (("bf16", _H100_TF), ("fp16", _borrow(_H100_TF, "fp16 runs at the bf16 tensor peak")))
_add("h100", "gpu", "NVIDIA H100 SXM5: 66.9 TF fp32, 494.7 TF tf32, 989.4 TF fp16/bf16 tensor, 3.35 TB/s",
     "[H100-gk]; fitted on this project's H100 ResNet-50 run (benchmarks/gpu/h100-2026-11-26)", _H100_PEAKS,
     3.35e12, 80 * _GIB, "H100", fp32_math="tf32", fitted=_H100_FITS, fitted_transformer=_H100_TF_FITS)
_add("h800", "gpu", "NVIDIA H800 SXM: H100 compute (GH100, 989.4 TF bf16), 80 GB HBM3 at 3.35 TB/s; NVLink cut to "
     "400 GB/s", "[H800] (the H100's compute and memory, NVLink 400 GB/s); factors of the h100 fit", _H100_PEAKS,
     3.35e12, 80 * _GIB, "H800", fp32_math="tf32", fitted=_from(_H100_FITS, "h100", "the same GH100 compute"),
     fitted_transformer=_borrow_all(_H100_TF_FITS, "same GH100 compute as h100"))
_add("h200", "gpu", "NVIDIA H200 SXM: H100 compute (GH100), 141 GB HBM3e, 4.8 TB/s",
     "[H200-gt] [H200-lz]; factors of the h100 fit", _H100_PEAKS, 4.8e12, 141 * _GIB, "H200", fp32_math="tf32",
     fitted=_from(_H100_FITS, "h100", "the same GH100 compute"),
     fitted_transformer=_borrow_all(_H100_TF_FITS, "same GH100 compute as h100"))
_add("b200", "gpu", "NVIDIA B200 (HGX, 1000 W): 80 TF fp32, 1100 TF tf32, 2250 TF fp16/bf16 dense, 8 TB/s, 192 GB",
     "[B200-gk]; factors borrowed from the h100 fit (no B200 single-GPU source)",
     {"fp32": 80e12, "tf32": 1100e12, "fp16": 2250e12, "bf16": 2250e12, **_FP8_B200}, 8e12, 192 * _GIB, "B200", fp32_math="tf32",
     fitted=_from(_H100_FITS, "h100", f"the nearest fitted datacenter GPU; {_NO_SOURCE} for the B200"),
     fitted_transformer=_borrow_all(_H100_TF_FITS, "nearest calibrated datacenter GPU (h100); no B200 capture"))
_add("gb200", "gpu", "B200 GPU of an NVIDIA GB200 superchip (1200 W): 90 TF fp32, 1250 TF tf32, 2500 TF fp16, 8 TB/s",
     "[B200-gk] (GB200 table); factors borrowed from the h100 fit (no GB200 single-GPU source)",
     {"fp32": 90e12, "tf32": 1250e12, "fp16": 2500e12, "bf16": 2500e12, **_FP8_GB200}, 8e12, 192 * _GIB, "GB200 (B200 GPU)",
     fp32_math="tf32", fitted=_from(_H100_FITS, "h100", f"the nearest fitted datacenter GPU; {_NO_SOURCE} for the GB200"),
     fitted_transformer=_borrow_all(_H100_TF_FITS, "nearest calibrated datacenter GPU (h100); no GB200 capture"))
_add("l40s", "gpu", "NVIDIA L40S: 91.6 TF fp32, 183 TF tf32, 362 TF fp16/bf16 tensor (dense), 864 GB/s, 48 GB",
     "[L40S-ds]; factors borrowed from the h100 fit (no L40S single-GPU source)",
     {"fp32": 91.6e12, "tf32": 183e12, "fp16": 362.05e12, "bf16": 362.05e12, "fp8": 733e12}, 864e9, 48 * _GIB, "L40S",
     fp32_math="tf32", fitted=_from(_H100_FITS, "h100", f"the nearest fitted tensor-core GPU; {_NO_SOURCE} for the L40S"))
_add("t4", "gpu", "NVIDIA T4: 8.1 TF fp32, 65 TF fp16 tensor, 320 GB/s GDDR6 (factors borrowed from the V100)",
     "[T4-sys] [T4-es]; factors borrowed from the v100 fit (seed 001 prints no single-instance time)",
     {"fp32": 8.1e12, "fp16": 65e12}, 320e9, 16 * _GIB, "T4",
     fitted=_from(_V100_FITS, "v100", f"the nearest fitted GPU (Turing's SM derives from Volta's); {_NO_SOURCE} "
                                      "for the T4"))
_add("1080ti", "gpu", "NVIDIA GTX 1080 Ti: 11.34 TF fp32 (3584 cores x 2 x 1.582 GHz), 484 GB/s (calibrated on seed 004)",
     "[1080Ti] (fp32 peak derived); fitted on seed 004 Table 1 (worker compute, ResNet-50)", {"fp32": 11.34e12},
     484e9, 11 * _GIB, "GTX 1080 Ti", fitted=(("fp32", _1080TI_FP32),))
_add("haswell", "cpu", "Cori Haswell node, 2x E5-2698 v3: 2.36 TF fp32, 136.6 GB/s DDR4",
     "[CORI] [HSW-uw] [HSW-bw] (fp32 = 2x DP, derived; not calibrated)", {"fp32": 2.36e12}, 136.6e9, 128 * _GIB,
     "Haswell node", launch=2e-6)

_add("gb300", "gpu", "Blackwell Ultra GPU of an NVIDIA GB300 superchip: 288 GB HBM3e, 8 TB/s; dense bf16/fp8 peaks "
     "assumed equal to GB200's", "[GB300] memory; peaks and SM count assumed as GB200's (no single-GPU bf16/fp8 "
     "figure collected; Blackwell Ultra's gains are FP4 and attention), factors borrowed from the h100 fit",
     {"fp32": 90e12, "tf32": 1250e12, "fp16": 2500e12, "bf16": 2500e12, **_FP8_GB200}, 8e12, 288 * _GIB,
     "GB300 (Blackwell Ultra; GB200's peaks assumed)", fp32_math="tf32", sms=_SMS["gb200"],
     fitted=_from(_H100_FITS, "h100", f"the nearest fitted datacenter GPU; {_NO_SOURCE} for the GB300"),
     fitted_transformer=_borrow_all(_H100_TF_FITS, "nearest calibrated datacenter GPU (h100); no GB300 capture"))

#: topology device names (simcomm/topologies/devices.py, presets) -> trace device names
CLUSTER_DEVICES = {"v100": "v100", "a100": "a100", "a100-80g": "a100-80g", "h100": "h100", "h800": "h800", "h200": "h200",
                   "b200": "b200", "gb200": "gb200", "gb300": "gb300", "l40s": "l40s", "t4": "t4", "gtx-1080-ti": "1080ti",
                   "1080ti": "1080ti", "haswell": "haswell"}


def get_device(name: str) -> DeviceSpec:
    """Look up a device; unknown names raise UnknownNameError listing the choices."""
    return DEVICES.get(name)


def device_for_cluster(name: str) -> str:
    """The trace device for a topology/cluster device name (``"gtx-1080-ti"`` -> ``"1080ti"``)."""
    if name in CLUSTER_DEVICES:
        return CLUSTER_DEVICES[name]
    raise UnknownNameError("cluster device", name, CLUSTER_DEVICES)

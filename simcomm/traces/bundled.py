"""Traces shipped with simcomm as package data (``simcomm/traces/data``).

``data/index.json`` lists every bundled trace (name, file, summary,
reference); :data:`BUNDLED` is the registry built from it, which ``simcomm
list traces`` prints.  Real CPU captures made on the development machine are
labelled ``cpu-capture``; roofline syntheses ``roofline``.
:func:`regenerate_roofline` rewrites the roofline files from the zoo with the
device registry's calibrated factors (they are deterministic); captures are
regenerated with ``simcomm trace capture``.  :func:`trace_for` picks the
bundled trace for a (model, device, batch, dtype) or synthesizes one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from simcomm.errors import TraceFormatError
from simcomm.registry import Registry
from simcomm.traces.io import loads_trace, save_trace
from simcomm.traces.schema import Trace

__all__ = ["BundledTrace", "BUNDLED", "load_bundled", "default_trace", "DEFAULT_TRACE", "ROOFLINE_SET",
           "DEFAULT_SYNTH_BATCH", "regenerate_roofline", "trace_for"]

DEFAULT_TRACE = "resnet50-v100-roofline"
#: per-GPU batch :func:`trace_for` synthesizes at when neither the caller nor a bundled trace gives one
DEFAULT_SYNTH_BATCH = 64

#: (model, device, batch) of every bundled roofline trace: seed-paper models at the seeds' batches
ROOFLINE_SET = (
    ("resnet50", "v100", 64), ("resnet50", "t4", 64), ("resnet50", "1080ti", 32), ("resnet50", "a100", 64),
    ("resnet50", "h100", 64), ("vgg16", "v100", 64), ("vgg16", "t4", 32), ("vgg16", "1080ti", 32),
    ("vgg16", "a100", 64), ("vgg16", "h100", 64), ("resnet20-cifar", "v100", 128),
    ("resnet20-cifar", "1080ti", 128), ("resnet20-cifar", "t4", 128), ("resnet18-cifar", "v100", 128),
    ("vit-b-384", "v100", 48), ("vit-s-cifar10", "v100", 48), ("gan-generator", "v100", 32),
    ("gan-discriminator", "v100", 32), ("lstm-mnist", "v100", 64), ("resnet18", "haswell", 32),
    ("resnet20-cifar", "haswell", 32),
)


@dataclass(frozen=True)
class BundledTrace:
    """A bundled trace file and what it is."""

    name: str
    file: str
    kind: str  # "roofline" or "cpu-capture"


def _data() -> Path:
    return Path(str(resources.files("simcomm.traces") / "data"))


def _build_registry() -> Registry[BundledTrace]:
    reg: Registry[BundledTrace] = Registry("bundled trace")
    index = _data() / "index.json"
    if index.exists():
        for row in json.loads(index.read_text(encoding="utf-8")):
            reg.add(row["name"], BundledTrace(row["name"], row["file"], row["kind"]),
                    summary=row["summary"], reference=row["reference"])
    return reg


BUNDLED: Registry[BundledTrace] = _build_registry()


def load_bundled(name: str) -> Trace:
    """Load a bundled trace by name; unknown names list the choices."""
    entry = BUNDLED.get(name)
    path = _data() / entry.file
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TraceFormatError(f"bundled trace {name!r} is missing from the installation: {exc}") from None
    return loads_trace(text, f"bundled:{name}")


def default_trace() -> Trace:
    """The trace ``simcomm run`` uses when none is given: ResNet-50 on V100, roofline, batch 64."""
    return load_bundled(DEFAULT_TRACE)


def _rounded(trace: Trace) -> Trace:
    # 6 significant digits keep bundled files small; the roofline is far coarser than that
    def r(v):
        return float(f"{v:.6g}")
    layers = tuple(replace(x, forward_s=r(x.forward_s), backward_s=r(x.backward_s), update_s=r(x.update_s),
                           by_batch=tuple((b, r(f), r(g)) for b, f, g in x.by_batch)) for x in trace.layers)
    return replace(trace, layers=layers, iteration_s=r(sum(x.forward_s + x.backward_s + x.update_s
                                                           for x in layers)))


def regenerate_roofline(out_dir: str | Path | None = None) -> list[dict]:
    """Rewrite every roofline trace of :data:`ROOFLINE_SET` and the index (capture rows are kept)."""
    from simcomm.traces.devices import DEVICES
    from simcomm.traces.synth import synth_trace
    from simcomm.traces.zoo import MODELS

    out = Path(out_dir) if out_dir else _data()
    rows = []
    for model, device, batch in ROOFLINE_SET:
        name = f"{model}-{device}-roofline"
        trace = _rounded(synth_trace(model, device, batch))
        save_trace(trace, out / f"{name}.json")
        eff = DEVICES.get(device).efficiency("fp32")
        how = (f"calibrated (compute_eff {eff.compute:g}, {eff.origin})" if eff.calibrated
               else "default efficiencies, not calibrated")
        rows.append({"name": name, "file": f"{name}.json", "kind": "roofline",
                     "summary": f"roofline synthesis: {model} on {device}, batch {batch}, fp32, SGD, {how}",
                     "reference": f"{MODELS.entry(model).reference}; peaks {DEVICES.entry(device).reference}"})
    index = out / "index.json"
    kept = [r for r in json.loads(index.read_text(encoding="utf-8")) if r["kind"] != "roofline"] \
        if index.exists() else []
    index.write_text(json.dumps(rows + kept, indent=1) + "\n", encoding="utf-8")
    return rows


def trace_for(model: str, device: str, batch: int | None = None, dtype: str = "fp32",
              attention: str | None = None, config=None) -> tuple[Trace, str]:
    """The trace for ``model`` on ``device`` and a one-line note saying where it came from.

    ``device`` is a trace device (``v100``) or a topology device name
    (``gtx-1080-ti``, mapped by :func:`~simcomm.traces.devices.device_for_cluster`).
    A bundled roofline trace is returned when one exists for (model, device) at
    ``batch`` (any bundled batch when ``batch`` is None) and ``dtype``;
    otherwise the roofline is synthesized with the device's calibrated factors
    for ``dtype`` at ``batch`` (default :data:`DEFAULT_SYNTH_BATCH`).  Unknown
    models, devices or dtypes raise one-line errors naming the choices.
    ``attention`` (zoo transformers only, None: flash) is stated at the end of a
    transformer's note.  ``config``: a transformer shape (:class:`~simcomm.llm.models.TransformerConfig`)
    to synthesise, named ``model``, instead of a zoo entry.
    """
    from simcomm.traces.devices import DEVICES, device_for_cluster
    from simcomm.traces.synth import FP8_DTYPES, check_attention_for, synth_trace
    from simcomm.traces.zoo.transformer import ATTENTIONS, TRANSFORMERS

    dev_name = device if device in DEVICES else device_for_cluster(device)
    dev = DEVICES.get(dev_name)
    attention = check_attention_for(model, attention, shaped=config is not None)  # bundled ones are no transformers
    for m, d, b in ROOFLINE_SET if config is None else ():
        name = f"{m}-{d}-roofline"
        if (m, d) == (model, dev_name) and batch in (None, b) and dtype == "fp32" and name in BUNDLED:
            return load_bundled(name), f"trace: bundled {name} ({dev.label}, batch {b}, {_how(dev, dtype)})"
    b = DEFAULT_SYNTH_BATCH if batch is None else batch
    trace = synth_trace(model, dev, b, dtype, attention=attention, config=config)
    default = " (default batch)" if batch is None else ""
    transformer = config is not None or model in TRANSFORMERS
    how = _how(dev, "bf16" if dtype in FP8_DTYPES else dtype, transformer)  # FP8 keeps the bf16 factor
    att = f"; attention: {ATTENTIONS[attention or 'flash']}" if transformer else ""
    return trace, f"trace: roofline synthesis of {model} on {dev.label} (batch {b}{default}, {dtype}, {how}){att}"


def _how(dev, dtype: str, transformer: bool = False) -> str:
    eff = dev.efficiency(dtype, "transformer" if transformer else "cnn")
    # transformers: GEMM time plus memory-bound time per pass (simcomm.traces.synth), with their own factor
    form = f", additive passes, compute factor {eff.compute:g} ({eff.source})" if transformer else ""
    if not eff.calibrated:
        return "uncalibrated roofline: default efficiencies" + form
    if eff.source.startswith("CNN factors"):
        return "roofline with ResNet-50's factors (no transformer fit for this device)" + form
    borrowed = eff.source.startswith("borrowed")
    return "calibrated roofline" + (f", factors {eff.origin}" if borrowed else "") + form

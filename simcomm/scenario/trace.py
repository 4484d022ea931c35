"""The trace a scenario names: ``--trace FILE``, a bundled trace, or the model synthesised on the cluster's device."""

from __future__ import annotations

from pathlib import Path

from simcomm.errors import ConfigError
from simcomm.scenario.spec import Scenario

__all__ = ["load_trace_for"]


def load_trace_for(scn: Scenario, notes: list, device: str | None = None):
    """The trace of ``--trace FILE``, a bundled trace name, or the model on the cluster's own device.

    With no ``--trace``, the model (``--model``, default ResNet-50) is the bundled
    trace for the cluster's device or a calibrated roofline synthesis on it
    (:func:`simcomm.traces.trace_for`), computing in the precision's dtype; a
    cluster that names no device known to the trace catalogue gets the V100 trace,
    said so.  The choice is printed as an ``assumed:`` line.
    """
    from simcomm import traces
    from simcomm.errors import UnknownNameError
    from simcomm.llm.zoo import TRANSFORMERS
    from simcomm.precision import PRECISIONS

    given = scn.trace or (scn.model if scn.model in traces.BUNDLED and scn.model not in traces.MODELS else None)
    if given and scn.workload.attention:  # a ready trace is used as priced: refuse rather than ignore
        raise ConfigError(f"attention: prices a zoo transformer's synthesised trace; trace {given!r} is used as "
                          "given (drop attention, or name a zoo transformer with --model)")
    if given and scn.shape.any():
        first = "model_config" if scn.shape.config else next(iter(scn.shape.given()))
        raise ConfigError(f"{first}: the [model] keys shape a transformer the run synthesises; trace {given!r} is "
                          "used as given (drop them, or name a zoo transformer with --model)")
    if scn.trace:
        if not Path(scn.trace).exists():
            raise ConfigError(f"trace: file {scn.trace!r} does not exist")
        return traces.load_trace(scn.trace)
    if scn.model and scn.model in traces.BUNDLED and scn.model not in traces.MODELS:
        notes.append(f"trace: bundled {scn.model} (named with --model)")
        return traces.load_bundled(scn.model)
    shape = None
    if scn.shape.any():  # a transformer by its shape: a zoo model changed, a Hugging Face config, or keys alone
        from simcomm.llm.shape import resolve_shape

        shape, lines = resolve_shape(scn.model, scn.shape)
        notes.extend(lines)
    model = shape.name if shape is not None else scn.model or "resnet50"
    if shape is None and model not in traces.MODELS:
        raise UnknownNameError("model", model, set(traces.BUNDLED.names()) | set(traces.MODELS.names()))
    if shape is None and model in TRANSFORMERS:
        from simcomm.llm.shape import params_line

        notes.append(params_line(TRANSFORMERS[model][0]))
    dtype = PRECISIONS[scn.workload.precision].compute if scn.workload.precision else "fp32"
    batch = scn.batch if scn.workload.scaling == "weak" else None
    if device is not None:
        try:
            traces.device_for_cluster(device)
        except UnknownNameError:
            notes.append(f"trace: the cluster's device {device!r} has no compute model; using the V100's")
            device = None
    from simcomm.traces.synth import check_fp8

    check_fp8(dtype, traces.DEVICES.get(traces.device_for_cluster(device or "v100")),
              None if shape is not None else model, "precision")
    trace, note = traces.trace_for(model, device or "v100", batch, dtype, scn.workload.attention, config=shape)
    notes.append(note + ("" if scn.model or shape is not None else " (the default model; --model to change)"))
    return trace

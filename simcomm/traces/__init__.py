"""Per-layer compute traces: schema, files, capture (torch, lazily), import and synthesis.

Catalogues (printed by ``simcomm list models|devices|traces``): :data:`MODELS`
(the built-in zoo), :data:`DEVICES` (roofline device specs, calibrated on allowed
single-GPU sources) and :data:`BUNDLED` (traces shipped as package data).
:func:`default_trace` is what ``simcomm run`` uses when the user names no
trace; :func:`trace_for` picks a bundled trace or synthesizes one for a
(model, device, batch, dtype).
"""

from simcomm.traces.bundled import BUNDLED, DEFAULT_TRACE, default_trace, load_bundled, trace_for
from simcomm.traces.devices import DEVICES, DeviceSpec, device_for_cluster, get_device
from simcomm.traces.io import DTYPE_BYTES, DTYPES, load_trace, save_trace
from simcomm.traces.schema import CAPTURE_METHODS, SCHEMA_VERSION, Layer, Trace
from simcomm.traces.zoo import MODELS, build_model, model_spec

__all__ = [
    "CAPTURE_METHODS", "SCHEMA_VERSION", "Layer", "Trace",
    "BUNDLED", "DEFAULT_TRACE", "default_trace", "load_bundled", "trace_for",
    "DEVICES", "DeviceSpec", "device_for_cluster", "get_device",
    "DTYPE_BYTES", "DTYPES", "load_trace", "save_trace",
    "MODELS", "build_model", "model_spec",
    "resolve_trace",
]


def resolve_trace(ref: str) -> Trace:
    """A trace from a file path or a bundled name (a path wins if it exists)."""
    from pathlib import Path

    if ref in BUNDLED and not Path(ref).exists():
        return load_bundled(ref)
    if not Path(ref).exists() and not ref.endswith(".json"):
        from simcomm.errors import UnknownNameError
        raise UnknownNameError("trace (file or bundled name)", ref, BUNDLED.names())
    return load_trace(ref)

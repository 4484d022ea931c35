"""Read and write trace files (schema v1, JSON) with one-line errors.

A trace file is a JSON object ``{"format": "simcomm-trace", "version": 1, ...}``
whose keys are the :class:`~simcomm.traces.schema.Trace` fields and whose
``layers`` are objects with the :class:`~simcomm.traces.schema.Layer` fields.
Every problem -- bad JSON, a truncated file, a wrong version, a missing or
unknown key, a wrong type, a negative or non-finite time -- is raised as a
:class:`~simcomm.errors.TraceFormatError` naming the field, e.g.
``layers[3].forward_s``.  Nothing else escapes :func:`load_trace`.

Only regular files of at most :data:`TRACE_MAX_BYTES` are read (:func:`read_regular`):
``/dev/zero`` would never end, a FIFO would block forever, and a multi-gigabyte file is not a
trace; each is refused with one line naming the path before a byte is read.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

from simcomm.errors import TraceFormatError
from simcomm.fileio import write_text
from simcomm.traces.schema import CAPTURE_METHODS, SCHEMA_VERSION, Layer, Trace

__all__ = ["FORMAT", "DTYPES", "DTYPE_BYTES", "TRACE_MAX_BYTES", "load_trace", "save_trace", "trace_to_dict",
           "trace_from_dict", "dumps_trace", "read_regular"]

#: The largest trace file read: 64 MiB.  The bundled traces total ~0.6 MB; a 1 000-layer trace with
#: several batches and gradient norms is ~1 MB, so this is far above any real trace and far below
#: what would exhaust memory when parsed (JSON objects take ~10x their text in Python).
TRACE_MAX_BYTES = 64 * 2**20

FORMAT = "simcomm-trace"
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8}
DTYPES = tuple(DTYPE_BYTES)
DEVICE_KINDS = ("gpu", "cpu")

_TRACE_REQUIRED = ("model", "batch", "dtype", "device", "device_kind", "method", "layers", "iteration_s")
_TRACE_OPTIONAL = ("warmup", "iters", "frameworks", "backward_order", "meta")
_LAYER_REQUIRED = ("name", "module_type", "params", "grad_bytes", "forward_s", "backward_s")
_LAYER_OPTIONAL = ("update_s", "input_shape", "output_shape", "flops", "grad_l1", "by_batch", "spread")


def _fail(field: str, msg: str) -> TraceFormatError:
    # field names can come from the file (a frameworks key): escape a newline or control character so
    # the error stays one line
    text = f"{field}: {msg}"
    return TraceFormatError(text if text.isprintable() else text.encode("unicode_escape").decode("ascii"))


def _int(v, field: str, minimum: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _fail(field, f"expected an integer, got {type(v).__name__}")
    if v < minimum:
        raise _fail(field, f"must be >= {minimum}, got {v}")
    return v


def _num(v, field: str) -> float:
    """A non-negative finite number (times, FLOPs, norms)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _fail(field, f"expected a number, got {type(v).__name__}")
    if not math.isfinite(v) or v < 0:
        raise _fail(field, f"must be a non-negative finite number, got {v!r}")
    return float(v)


#: the longest time one layer may take per batch: a day is far beyond any real layer, and bounding it keeps every
#: sum of a trace's times (an iteration, an epoch of thousands of iterations) finite
MAX_LAYER_S = 86_400.0


def _time(v, field: str) -> float:
    """A layer time: :func:`_num`, at most :data:`MAX_LAYER_S`."""
    t = _num(v, field)
    if t > MAX_LAYER_S:
        raise _fail(field, f"must be at most {MAX_LAYER_S:g} s (a day) for one layer, got {v!r}")
    return t


def _str(v, field: str, choices: tuple[str, ...] | None = None) -> str:
    if not isinstance(v, str) or not v:
        raise _fail(field, f"expected a non-empty string, got {type(v).__name__}")
    if choices is not None and v not in choices:
        raise _fail(field, f"{v!r} is not one of {', '.join(choices)}")
    return v


def _list(v, field: str) -> list:
    if not isinstance(v, list):
        raise _fail(field, f"expected a list, got {type(v).__name__}")
    return v


def _dict(v, field: str) -> dict:
    if not isinstance(v, dict):
        raise _fail(field, f"expected an object, got {type(v).__name__}")
    return v


def _keys(obj: dict, field: str, required: tuple[str, ...], optional: tuple[str, ...]) -> None:
    for key in required:
        if key not in obj:
            raise _fail(f"{field}{key}", "missing required field")
    for key in obj:
        if key not in required and key not in optional:
            raise _fail(f"{field}{key}", f"unknown field; valid fields: {', '.join(required + optional)}")


def _shape(v, field: str) -> tuple[int, ...]:
    return tuple(_int(x, f"{field}[{i}]") for i, x in enumerate(_list(v, field)))


def _layer_from_dict(d, i: int) -> Layer:
    f = f"layers[{i}]."
    d = _dict(d, f"layers[{i}]")
    _keys(d, f, _LAYER_REQUIRED, _LAYER_OPTIONAL)
    flops = d.get("flops")
    by_batch = []
    for j, row in enumerate(_list(d.get("by_batch", []), f + "by_batch")):
        row = _list(row, f"{f}by_batch[{j}]")
        if len(row) != 3:
            raise _fail(f"{f}by_batch[{j}]", "expected [batch, forward_s, backward_s]")
        by_batch.append((_int(row[0], f"{f}by_batch[{j}][0]", 1), _time(row[1], f"{f}by_batch[{j}][1]"),
                         _time(row[2], f"{f}by_batch[{j}][2]")))
    spread = _dict(d.get("spread", {}), f + "spread")
    for key, val in spread.items():
        _num(val, f"{f}spread.{key}")
    return Layer(
        name=_str(d["name"], f + "name"),
        module_type=_str(d["module_type"], f + "module_type"),
        params=_int(d["params"], f + "params"),
        grad_bytes=_int(d["grad_bytes"], f + "grad_bytes"),
        forward_s=_time(d["forward_s"], f + "forward_s"),
        backward_s=_time(d["backward_s"], f + "backward_s"),
        update_s=_time(d.get("update_s", 0.0), f + "update_s"),
        input_shape=_shape(d.get("input_shape", []), f + "input_shape"),
        output_shape=_shape(d.get("output_shape", []), f + "output_shape"),
        flops=None if flops is None else _num(flops, f + "flops"),
        grad_l1=tuple(_num(x, f"{f}grad_l1[{j}]") for j, x in enumerate(_list(d.get("grad_l1", []), f + "grad_l1"))),
        by_batch=tuple(by_batch),
        spread={str(k): float(v) for k, v in spread.items()},
    )


def trace_from_dict(d) -> Trace:
    """Validate a decoded JSON object and build a :class:`Trace` (TraceFormatError on any flaw)."""
    d = _dict(d, "trace")
    if d.get("format") != FORMAT:
        raise _fail("format", f"expected {FORMAT!r}, got {d.get('format')!r} (not a simcomm trace file?)")
    version = d.get("version")
    if version != SCHEMA_VERSION:
        raise _fail("version", f"unsupported trace version {version!r}; this simcomm reads version {SCHEMA_VERSION}")
    body = {k: v for k, v in d.items() if k not in ("format", "version")}
    _keys(body, "", _TRACE_REQUIRED, _TRACE_OPTIONAL)
    raw_layers = _list(body["layers"], "layers")
    if not raw_layers:
        raise _fail("layers", "a trace needs at least one layer")
    layers = tuple(_layer_from_dict(x, i) for i, x in enumerate(raw_layers))
    order = tuple(_int(x, f"backward_order[{i}]") for i, x in enumerate(_list(body.get("backward_order", []),
                                                                             "backward_order")))
    if order and sorted(order) != list(range(len(layers))):
        raise _fail("backward_order", f"must be a permutation of 0..{len(layers) - 1}")
    frameworks = _dict(body.get("frameworks", {}), "frameworks")
    for key, val in frameworks.items():
        _str(val, f"frameworks.{key}")
    return Trace(
        model=_str(body["model"], "model"),
        batch=_int(body["batch"], "batch", 1),
        dtype=_str(body["dtype"], "dtype", DTYPES),
        device=_str(body["device"], "device"),
        device_kind=_str(body["device_kind"], "device_kind", DEVICE_KINDS),
        method=_str(body["method"], "method", CAPTURE_METHODS),
        layers=layers,
        iteration_s=_num(body["iteration_s"], "iteration_s"),
        warmup=_int(body.get("warmup", 0), "warmup"),
        iters=_int(body.get("iters", 0), "iters"),
        frameworks=dict(frameworks),
        backward_order=order,
        meta=dict(_dict(body.get("meta", {}), "meta")),
    )


def trace_to_dict(trace: Trace) -> dict:
    """The JSON object of a trace; default-valued optional layer fields are left out."""
    layers = []
    for layer in trace.layers:
        d = {"name": layer.name, "module_type": layer.module_type, "params": layer.params,
             "grad_bytes": layer.grad_bytes, "forward_s": layer.forward_s, "backward_s": layer.backward_s,
             "update_s": layer.update_s, "input_shape": list(layer.input_shape),
             "output_shape": list(layer.output_shape)}
        if layer.flops is not None:
            d["flops"] = layer.flops
        if layer.grad_l1:
            d["grad_l1"] = list(layer.grad_l1)
        if layer.by_batch:
            d["by_batch"] = [list(row) for row in layer.by_batch]
        if layer.spread:
            d["spread"] = dict(layer.spread)
        layers.append(d)
    out = {"format": FORMAT, "version": SCHEMA_VERSION, "model": trace.model, "batch": trace.batch,
           "dtype": trace.dtype, "device": trace.device, "device_kind": trace.device_kind,
           "method": trace.method, "iteration_s": trace.iteration_s, "warmup": trace.warmup,
           "iters": trace.iters, "frameworks": dict(trace.frameworks), "meta": dict(trace.meta)}
    if trace.backward_order:
        out["backward_order"] = list(trace.backward_order)
    out["layers"] = layers
    return out


def dumps_trace(trace: Trace) -> str:
    """Canonical text: one layer per line keeps files small and diffs readable."""
    d = trace_to_dict(trace)
    layers = d.pop("layers")
    head = json.dumps(d, sort_keys=True)[:-1]
    rows = ",\n".join("  " + json.dumps(x, sort_keys=True) for x in layers)
    return f'{head}, "layers": [\n{rows}\n]}}\n'


def save_trace(trace: Trace, path: str | os.PathLike) -> Path:
    """Validate and write ``trace`` atomically (temp file + rename): no partial file on failure."""
    text = dumps_trace(trace)
    trace_from_dict(json.loads(text))  # never write a file we could not read back
    path = Path(path)
    write_text(path, text)
    return path


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def read_regular(path: str | os.PathLike, limit: int, what: str = "trace file") -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes, else one TraceFormatError.

    Checked with ``stat`` before opening (opening a FIFO blocks until a writer appears), opened
    non-blocking in case the path is swapped for a FIFO in between, checked again on the open
    file, and read with a cap of ``limit + 1`` bytes (a file growing meanwhile is still bounded).
    """
    name = str(path)
    if not name:
        raise TraceFormatError(f"{what}: the path is empty; give a file name")
    try:
        st = os.stat(name)
    except FileNotFoundError:
        raise TraceFormatError(f"{what} {name!r} does not exist") from None
    except OSError as exc:
        raise TraceFormatError(f"{what} {name!r} cannot be read: {exc.strerror or exc}") from None
    _check_stat(st, name, limit, what)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise TraceFormatError(f"{what} {name!r} cannot be read: {exc.strerror or exc}") from None
    try:
        _check_stat(os.fstat(fd), name, limit, what)
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise TraceFormatError(f"{what} {name!r} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise TraceFormatError(f"{what} {name!r} grew past the {_mib(limit)} limit while being read")
    return data


def _check_stat(st: os.stat_result, name: str, limit: int, what: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise TraceFormatError(f"{what} {name!r} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a character device" if stat.S_ISCHR(st.st_mode)
                else "a block device" if stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "not a regular file")
        raise TraceFormatError(f"{what} {name!r} is {kind}; only regular files are read")
    if st.st_size > limit:
        raise TraceFormatError(f"{what} {name!r} is {_mib(st.st_size)}, over the {_mib(limit)} limit")


def load_trace(path: str | os.PathLike) -> Trace:
    """Read a trace file; every flaw is one :class:`TraceFormatError` line naming file and field."""
    name = str(path)
    raw = read_regular(name, TRACE_MAX_BYTES, "trace file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"trace file {name!r} is not UTF-8 text: {exc}") from None
    return loads_trace(text, name)


def loads_trace(text: str, source: str = "<string>") -> Trace:
    """Parse trace JSON text (used by :func:`load_trace` and the bundled catalogue)."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        what = "truncated" if isinstance(exc, json.JSONDecodeError) and exc.pos >= len(text.rstrip()) else "malformed"
        raise TraceFormatError(f"trace file {source!r} is {what} JSON: {exc}") from None
    try:
        return trace_from_dict(data)
    except TraceFormatError as exc:
        raise TraceFormatError(f"trace file {source!r}: {exc}") from None
    except RecursionError:
        raise TraceFormatError(f"trace file {source!r}: nested too deeply") from None


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")

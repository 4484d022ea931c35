"""``simcomm trace synth|capture|import|show``: make, import and inspect per-layer compute traces.

Every output path (``--out``, ``--png``, and the default names) is checked with
:func:`simcomm.outpath.check_output_path` before any work, so a bad path costs one
``error:`` line, not a finished capture.  Slow steps show progress on stderr (never on
stdout, which stays machine-readable); ``SIMCOMM_NO_PROGRESS=1`` turns it off.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

import typer

from simcomm.cli.console import stderr, stdout, table
from simcomm.errors import ConfigError
from simcomm.outpath import check_output_path
from simcomm.units import format_size, format_time

trace_app = typer.Typer(help="Per-layer compute traces: synthesize, capture, import, show.",
                        no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def _batches(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"batch: {text!r} is not an integer or a comma-separated list such as 16,32,64") from None
    if not out or any(b < 1 for b in out):
        raise ConfigError(f"batch: {text!r} must hold positive integers")
    return out


def _default_out(stem: str) -> str:
    return f"{stem}.json"


def _summary_line(trace, path) -> None:
    gap = trace.iteration_s - trace.layer_sum_s
    rel = gap / trace.iteration_s if trace.iteration_s else 0.0
    stdout().print(f"wrote {path}: {trace.model} on {trace.device} ({trace.method}), batch {trace.batch}, "
                   f"{len(trace.layers)} layers, layer sum {format_time(trace.layer_sum_s)}, "
                   f"iteration {format_time(trace.iteration_s)}, gap {format_time(gap)} ({rel:+.1%})")


@trace_app.command("synth")
def synth_command(
    model: str = typer.Option(..., "--model", help="Zoo model (simcomm list models)."),
    device: str = typer.Option(..., "--device", help="v100, a100, h100, t4, 1080ti, haswell (simcomm list devices)."),
    batch: str = typer.Option("64", "--batch", help="Per-rank batch, or a list such as 16,32,64."),
    dtype: str = typer.Option("fp32", "--dtype", help="fp32, fp16 or bf16."),
    optimizer: str = typer.Option("sgd", "--optimizer", help="sgd (momentum), adam or none."),
    compute_eff: float = typer.Option(None, "--compute-eff", help="Fraction of peak FLOP/s (default 0.5)."),
    memory_eff: float = typer.Option(None, "--memory-eff", help="Fraction of peak memory bandwidth (default 0.7)."),
    attention: str = typer.Option(None, "--attention", help="Zoo transformers: flash (FlashAttention, the "
                                  "default) or unfused (Megatron-LM 2021-22: full s×s core, scores through HBM)."),
    out: str = typer.Option(None, "--out", help="Output file (default MODEL-DEVICE-roofline.json)."),
) -> None:
    """Synthesize a trace from the zoo's FLOPs and bytes with a roofline over the device's peaks."""
    from simcomm.traces.io import save_trace
    from simcomm.traces.synth import synth_trace

    target = check_output_path(_default_out(f"{model}-{device}-roofline") if out is None else out, "out")
    trace = synth_trace(model, device, _batches(batch), dtype, optimizer, compute_eff, memory_eff, attention)
    path = save_trace(trace, target)
    _summary_line(trace, path)


@trace_app.command("capture")
def capture_command(
    model: str = typer.Option(None, "--model", help="Zoo model (simcomm list models)."),
    module: str = typer.Option(None, "--module", help="Your model factory as pkg.mod:function."),
    batch: str = typer.Option("32", "--batch", help="Per-rank batch, or a list such as 16,32,64."),
    input_shape: str = typer.Option(None, "--input-shape", help="Per-sample input shape, e.g. 3,224,224."),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda (cuda:N; under torchrun LOCAL_RANK picks N)."),
    iters: int = typer.Option(10, "--iters", help="Measured iterations."),
    warmup: int = typer.Option(3, "--warmup", help="Warm-up iterations (not measured)."),
    grad_norms: int = typer.Option(0, "--grad-norms", help="Record per-layer gradient L1 norms over N iterations."),
    optimizer: str = typer.Option("sgd", "--optimizer", help="sgd (momentum) or adam."),
    threads: int = typer.Option(None, "--threads", help="CPU threads for torch (default: torch's choice)."),
    autocast: str = typer.Option(None, "--autocast", help="Mixed precision: bf16 or fp16 (torch.autocast)."),
    out: str = typer.Option(None, "--out", help="Output file (default MODEL-DEVICE-capture[-rankR].json)."),
) -> None:
    """Time every layer's forward and backward with torch (CUDA events on GPU, perf_counter on CPU)."""
    from simcomm.traces.capture import CaptureConfig, capture_trace, capture_warning, rank_suffix
    from simcomm.traces.io import save_trace

    if (model is None) == (module is None):
        raise ConfigError("model: give exactly one of --model NAME or --module pkg.mod:factory")
    shape = None
    if input_shape:
        try:
            shape = tuple(int(x) for x in input_shape.replace("x", ",").split(","))
        except ValueError:
            raise ConfigError(f"input-shape: {input_shape!r} is not a list of integers such as 3,224,224") from None
        if any(d < 1 for d in shape):
            raise ConfigError(f"input-shape: {input_shape!r} must hold positive integers")
    if iters < 1 or warmup < 0 or grad_norms < 0:
        raise ConfigError("iters: --iters must be >= 1, --warmup and --grad-norms >= 0")
    cfg = CaptureConfig(model=model, module=module, batches=tuple(_batches(batch)), input_shape=shape,
                        device=device, iters=iters, warmup=warmup, grad_norms=grad_norms,
                        optimizer=optimizer, threads=threads, autocast=autocast)
    kind = "gpu" if device.startswith("cuda") else "cpu"  # the trace's device_kind, known before capturing
    stem = (model or module.split(":")[-1]) + f"-{kind}-capture{rank_suffix()}"
    target = check_output_path(_default_out(stem) if out is None else out, "out")
    with _progress_display("capture") as show:
        trace = capture_trace(cfg, progress=show.bar if show else None, stage=show.stage if show else None)
    path = save_trace(trace, target)
    _summary_line(trace, path)
    warning = capture_warning(trace)
    if warning:
        sys.stderr.write(f"warning: {' '.join(warning.split())}\n")


class _Display:
    """A transient rich progress display on stderr: a stage line, then a bar over the iterations."""

    def __init__(self, what: str):
        from rich.progress import Progress

        self.progress = Progress(console=stderr(), transient=True)
        self.what = what
        self.task = self.progress.add_task(f"{what}: starting", total=None)
        self.progress.start()

    def stage(self, text: str) -> None:
        self.progress.update(self.task, description=f"{self.what}: {text}")

    def bar(self, total: int):
        self.progress.update(self.task, description=f"{self.what}: iterations", total=total, completed=0)
        return lambda: self.progress.advance(self.task)


@contextmanager
def _progress_display(what: str):
    """Yield a :class:`_Display`, always stopped, even on error; None when stderr is not a terminal (a
    log or a pipe would collect the redraws) or SIMCOMM_NO_PROGRESS is set."""
    if os.environ.get("SIMCOMM_NO_PROGRESS") or not stderr().is_terminal:
        yield None
        return
    show = _Display(what)
    try:
        yield show
    finally:
        show.progress.stop()


@trace_app.command("import")
def import_command(
    profile: str = typer.Argument(..., help="A torch.profiler Chrome/Kineto trace (.json or .json.gz)."),
    model: str = typer.Option(None, "--model", help="Model name to record (default: the profile's file name)."),
    batch: int = typer.Option(1, "--batch", help="Per-rank batch of the profiled run."),
    dtype: str = typer.Option("fp32", "--dtype", help="Parameter dtype of the profiled run."),
    module: str = typer.Option(None, "--module", help="Your model factory as pkg.mod:function, to count "
                                                      "parameters with torch (when not a zoo --model)."),
    allow_zero_params: bool = typer.Option(False, "--allow-zero-params",
                                           help="Import layers whose parameters the profile cannot tell "
                                                "with 0 parameters (their gradients then cost no traffic)."),
    out: str = typer.Option(None, "--out", help="Output file (default PROFILE-trace.json)."),
) -> None:
    """Map a torch.profiler trace's module ranges to layers (see docs/traces.md for how to record it)."""
    from simcomm.traces.io import save_trace
    from simcomm.traces.kineto import import_profile

    stem = os.path.basename(profile).split(".")[0] or "profile"
    target = check_output_path(_default_out(f"{stem}-trace") if out is None else out, "out")
    with _progress_display("import") as show:
        if show:
            show.stage(f"reading {profile}")
        trace = import_profile(profile, model=model, batch=batch, dtype=dtype, module=module,
                               allow_zero_params=allow_zero_params)
    path = save_trace(trace, target)
    _summary_line(trace, path)


@trace_app.command("show")
def show_command(
    trace_ref: str = typer.Argument(..., metavar="FILE|BUNDLED", help="A trace file or a bundled trace name."),
    png: str = typer.Option(None, "--png", help="Also draw a per-layer bar chart to this PNG."),
) -> None:
    """Print a trace's layers and totals as a table."""
    from simcomm.traces import resolve_trace

    if png is not None:
        check_output_path(png, "png")
    trace = resolve_trace(trace_ref)
    t = table(f"{trace.model} on {trace.device} ({trace.device_kind}), {trace.method}, batch {trace.batch}, "
              f"{trace.dtype}", [("#", "right"), ("layer", "left"), ("type", "left"), ("params", "right"),
                                 ("grad", "right"), ("forward", "right"), ("backward", "right"),
                                 ("update", "right"), ("GFLOP", "right"), ("output", "left")])
    for i, x in enumerate(trace.layers):
        t.add_row(str(i), x.name, x.module_type, f"{x.params:,}", format_size(x.grad_bytes),
                  format_time(x.forward_s), format_time(x.backward_s), format_time(x.update_s),
                  "-" if x.flops is None else f"{x.flops / 1e9:.3f}", "x".join(map(str, x.output_shape)))
    fwd = sum(x.forward_s for x in trace.layers)
    bwd = sum(x.backward_s for x in trace.layers)
    upd = sum(x.update_s for x in trace.layers)
    flops = [x.flops for x in trace.layers if x.flops is not None]
    t.add_row("", "total", "", f"{trace.params:,}", format_size(trace.grad_bytes), format_time(fwd),
              format_time(bwd), format_time(upd), f"{sum(flops) / 1e9:.3f}" if flops else "-", "")
    con = stdout()
    con.print(t)
    gap = trace.iteration_s - trace.layer_sum_s
    rel = f" ({gap / trace.iteration_s:+.1%})" if trace.iteration_s else ""
    con.print(f"layer sum {format_time(trace.layer_sum_s)}; iteration {format_time(trace.iteration_s)}; "
              f"gap {format_time(gap)}{rel}; warmup {trace.warmup}, iters {trace.iters}")
    if png:
        from simcomm.report.trace_plot import plot_trace

        con.print(f"wrote {plot_trace(trace, png)}")

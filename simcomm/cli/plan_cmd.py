"""``simcomm plan``: the fastest ``megatron`` layouts of a transformer on a cluster (docs/plan.md).

Enumerate, keep what fits in GPU memory, rank by a closed-form estimate, simulate
the best ``--simulate K`` with the pipeline, print the table (and ``--png``: the
Pareto plot of step time against GPU count).  Every bad input is one ``error:``
line before any long work.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simcomm.cli.console import print_json, stderr, stdout, table
from simcomm.cli.scenario_flags import scenario_flags
from simcomm.errors import ConfigError

__all__ = ["plan_command", "search", "parse_list", "parse_cp", "check_cp", "parse_shard_groups", "check_shard_groups"]

_PRECISIONS = ("bf16", "fp16", "fp32")


def parse_list(text: str, field: str, choices: tuple, cast=str) -> tuple:
    """``a,b,c`` checked against ``choices``; one line naming the field otherwise."""
    out = []
    for part in (x.strip() for x in text.split(",")):
        try:
            value = cast(part)
        except ValueError:
            value = part
        if value not in choices:
            raise ConfigError(f"{field}: {part!r} is not valid; valid choices: {', '.join(map(str, choices))}")
        if value not in out:
            out.append(value)
    return tuple(out)


def _ints(text: str, field: str, words: tuple) -> list:
    """``a,b,c``: each a positive integer or one of ``words``; one line naming the field otherwise."""
    out = []
    for part in (x.strip() for x in text.split(",")):
        if part in words:
            value = part
        else:
            try:
                value = int(part)
            except ValueError:
                value = 0
            if value < 1:
                raise ConfigError(f"{field}: {part!r} is not valid; valid choices: {', '.join(words)} or positive "
                                  "integers (a comma-separated list)")
        if value not in out:
            out.append(value)
    if len(out) > 1 and any(isinstance(x, str) for x in out):
        raise ConfigError(f"{field}: {text!r} mixes {' or '.join(words)} with other values; valid choices: "
                          f"{', '.join(words)} alone, or positive integers")
    return out


def parse_cp(text: str, cfg) -> tuple[int, ...] | None:
    """``--cp``: ``auto`` (None: :func:`simcomm.plan.auto_cps` once the GPUs per node are known) or
    context-parallel sizes, each dividing the model's sequence (checked here; the GPU count is checked once
    the cluster is known, :func:`check_cp`)."""
    from simcomm import plan

    values = _ints(text, "--cp", ("auto",))
    if values == ["auto"]:
        return None
    for c in values:
        if cfg.seq % c:
            raise ConfigError(f"--cp: {c} does not divide the sequence length {cfg.seq} of {cfg.name} (each "
                              f"context-parallel rank holds seq / cp tokens); valid choices: auto, "
                              f"{', '.join(map(str, plan.divisors(cfg.seq)))}")
    return tuple(sorted(values))


def check_cp(cps, cfg, n_gpus: int) -> None:
    """Every ``--cp`` value divides the GPUs (and the sequence): one line naming the valid choices."""
    from simcomm import plan

    for c in cps or ():
        if n_gpus % c:
            raise ConfigError(f"--cp: {c} does not divide the {n_gpus} GPUs; valid choices: auto, "
                              f"{', '.join(map(str, plan.valid_cps(cfg, n_gpus)))}")


def parse_shard_groups(text: str) -> tuple:
    """``--shard-group``: ``auto`` (the in-node group, :func:`simcomm.plan.node_shard_group`), ``none`` or HSDP
    group sizes."""
    from simcomm import plan

    values = _ints(text, "--shard-group", ("auto", "none"))
    if values == ["none"]:
        return ()
    return tuple(plan.NODE if x == "auto" else x for x in sorted(values, key=str))


def check_shard_groups(space, layouts, n_gpus: int) -> None:
    """Each explicit ``--shard-group`` size divides the dp·cp replicas of some ZeRO-3 layout (a smaller
    size than all of them), else one line with the sizes that would."""
    from simcomm import plan

    sizes = [g for g in space.shard_groups if g != plan.NODE]
    if not sizes:
        return
    if 3 not in space.zeros:
        raise ConfigError(f"--shard-group: {','.join(map(str, sizes))} (HSDP) needs ZeRO-3, and --zero "
                          f"{','.join(map(str, space.zeros))} leaves it out; valid choices: auto, none, or add 3 to "
                          "--zero")
    reps = sorted({x.replicas for x in layouts if x.zero == 3})
    valid = sorted({g for r in reps for g in plan.divisors(r) if g < r})
    for g in sizes:
        if not any(r % g == 0 and g < r for r in reps):
            raise ConfigError(f"--shard-group: {g} divides the data-parallel replicas (dp × cp: "
                              f"{', '.join(map(str, reps)) or 'none'}) of no ZeRO-3 layout on {n_gpus} GPUs "
                              f"(and is smaller); valid choices: auto, none, {', '.join(map(str, valid)) or '-'}")


class _Bar:
    """A rich progress bar on stderr (or nothing when quiet): ``stage(name, total)`` then ``tick()``."""

    def __init__(self, quiet: bool):
        # not on a pipe or file: there a transient bar only leaves a blank line before an error or the output
        off = quiet or not stderr().is_terminal
        self.progress = None if off else Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                                  TimeElapsedColumn(), console=stderr(), transient=True)
        self.task = None

    def __enter__(self):
        if self.progress is not None:
            self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.__exit__(*exc)

    def stage(self, name: str, total: int):
        if self.progress is not None:
            if self.task is not None:
                self.progress.remove_task(self.task)
            self.task = self.progress.add_task(name, total=total)

    def tick(self):
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task)


def _context(base: dict, nodes: int):
    from simcomm.pipeline import Context
    from simcomm.scenario import from_flat

    scn = from_flat({**base, "strategy": "megatron", "nodes": nodes})
    return scn, Context(scn)


def search(cfg, base: dict, nodes: int, global_batch: int, space, dtype: str, bar=None, strict: bool = True):
    """(rows ranked by estimate, n enumerated, n fitting, device label, GPUs, capacity) on ``nodes`` nodes;
    raises one ConfigError line when nothing divides or nothing fits (``strict``: also when a ``--cp`` or
    ``--shard-group`` value fits no layout on these GPUs; the Pareto sweep's other node counts skip them)."""
    from simcomm import plan
    from simcomm.pipeline import memory_budget
    from simcomm.units import format_size

    scn, ctx = _context(base, nodes)
    raw, topo = ctx.cluster(nodes, 0)
    n = topo.n_ranks
    gpn = max(1, n // nodes)
    dev = memory_budget(ctx.device(), scn.memory)
    if dev is None:
        raise ConfigError(f"cluster: {scn.cluster!r} names no GPU the memory model knows ({ctx.device() or 'none'}); "
                          "plan needs a GPU's memory to filter layouts (--gpu-memory gives one, e.g. 80GB)")
    if strict:
        check_cp(space.cps, cfg, n)
    layouts = plan.enumerate_layouts(cfg, n, global_batch, gpn, space)
    if strict:
        check_shard_groups(space, layouts, n)
    if not layouts:
        max_tp = space.max_tp or gpn
        raise ConfigError(f"layout: no tp × pp × dp = {n} GPUs divides {cfg.name}'s {cfg.layers} layers and "
                          f"{cfg.heads} heads (tp <= {max_tp}) with dp dividing the global batch {global_batch}; "
                          f"try a global batch that is a multiple of {n} or another node count")
    if bar:
        bar.stage(f"memory of {len(layouts)} layouts ({n} GPUs)", len(layouts))
    fits, smallest = plan.fit_layouts(cfg, layouts, global_batch, dev, dtype, bar.tick if bar else None)
    if not fits:
        lay, mem = smallest
        peak = mem.peak()
        raise ConfigError(f"memory: none of the {len(layouts)} layouts of {cfg.name} on {n} GPUs fits {dev.what} "
                          f"({format_size(dev.capacity)}); the smallest needs {format_size(peak.need(dev))} per GPU "
                          f"({mem.layout}: {mem.breakdown()}); use more GPUs or a smaller global batch")
    trace = ctx.trace()
    pricer = plan.Pricer(trace, topo, ctx.runtime(), cfg, global_batch, wire_bytes=4 if dtype == "fp32" else 2,
                         gpus_per_node=gpn)
    if bar:
        bar.stage(f"estimating {len(fits)} layouts that fit", len(fits))
    rows = []
    for lay, mem in fits:
        rows.append(plan.Row(lay, mem.total, pricer.estimate(lay)))
        if bar:
            bar.tick()
    return plan.rank_rows(rows), len(layouts), len(fits), dev, n, ctx


def _yes(x: bool) -> str:
    return "yes" if x else "-"


@scenario_flags(sections=("stack", "network", "memory"))
def plan_command(
    model: str = typer.Option(..., "--model", help="Zoo transformer (simcomm list models)."),
    cluster: str = typer.Option("dgx-a100-hdr", "--cluster", help="Cluster preset or file."),
    nodes: int = typer.Option(1, "--nodes", "-n", help="Number of nodes."),
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", "-g"),
    global_batch: int = typer.Option(..., "--global-batch", help="Sequences per training step."),
    precision: str = typer.Option("bf16", "--precision", help="bf16, fp16 or fp32 (compute and memory)."),
    attention: Optional[str] = typer.Option(None, "--attention", help="flash (FlashAttention, the default) or "
                                            "unfused (Megatron-LM 2021-22: full s×s core, scores through HBM)."),
    top: int = typer.Option(10, "--top", help="Rows to print."),
    simulate_k: int = typer.Option(3, "--simulate", help="Simulate the best K layouts by estimate (0: none)."),
    fidelity: str = typer.Option("flow", "--fidelity", help="Fidelity of those simulations: flow or analytic."),
    max_ops: int = typer.Option(300_000, "--max-ops",
                                help="Simulate a layout only if its plan has at most this many ops (time)."),
    max_tp: Optional[int] = typer.Option(None, "--max-tp", help="Largest tensor-parallel size (default: GPUs "
                                                                 "per node)."),
    max_microbatch: int = typer.Option(16, "--max-microbatch", help="Largest micro-batch searched."),
    zero: str = typer.Option("0,1,2,3", "--zero", help="ZeRO stages searched."),
    schedules: str = typer.Option("1f1b,interleaved,gpipe", "--schedules", help="Pipeline schedules searched."),
    recompute: str = typer.Option("none,selective,full", "--recompute", help="Recomputation searched."),
    cp: str = typer.Option("auto", "--cp", help="Context-parallel sizes searched (auto: 1, and 2, 4, ... up to "
                                                "the GPUs per node when the sequence is >= 8192)."),
    shard_group: str = typer.Option("auto", "--shard-group", help="HSDP shard-group sizes tried beside plain "
                                                                  "ZeRO-3 (auto: the in-node group; none)."),
    png: Optional[Path] = typer.Option(None, "--png", help="Write the Pareto plot (step time vs GPUs) here."),
    as_json: bool = typer.Option(False, "--json"),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    flags: dict | None = None,
) -> None:
    """Search tensor/context/pipeline/data-parallel (ZeRO, HSDP) layouts that fit in memory and print the fastest."""
    from simcomm import plan
    from simcomm.scenario import FIDELITIES
    from simcomm.traces.zoo.transformer import ATTENTIONS, TRANSFORMERS, check_attention

    # every check before any long work
    if model not in TRANSFORMERS:
        what = "is not a transformer (plan searches transformer layouts)" if model in _zoo_names() else "is unknown"
        raise ConfigError(f"model: {model!r} {what}; valid choices: {', '.join(TRANSFORMERS)}")
    for name, value, lo in (("--global-batch", global_batch, 1), ("--top", top, 1), ("--simulate", simulate_k, 0),
                            ("--max-ops", max_ops, 0), ("--max-microbatch", max_microbatch, 1),
                            ("--nodes", nodes, 1)):
        if value < lo:
            raise ConfigError(f"{name}: {value} must be >= {lo}")
    if max_tp is not None and max_tp < 1:
        raise ConfigError(f"--max-tp: {max_tp} must be >= 1")
    if fidelity not in FIDELITIES:
        raise ConfigError(f"--fidelity: {fidelity!r} is not valid; valid choices: {', '.join(FIDELITIES)}")
    if precision not in _PRECISIONS:
        raise ConfigError(f"--precision: {precision!r} is not valid; valid choices: {', '.join(_PRECISIONS)}")
    space = plan.Space(max_tp=max_tp, max_microbatch=max_microbatch,
                       zeros=parse_list(zero, "--zero", (0, 1, 2, 3), int),
                       schedules=parse_list(schedules, "--schedules", ("1f1b", "interleaved", "gpipe")),
                       recomputes=parse_list(recompute, "--recompute", ("none", "selective", "full")))
    # the attention priced into the trace and into selective recomputation's share (cfg.meta())
    cfg = replace(TRANSFORMERS[model][0], attention=check_attention(attention or "flash"))
    given = {"cluster": cluster, "gpus_per_node": gpus_per_node, "model": model, "precision": precision,
             "attention": attention, **(flags or {})}
    base = {k: v for k, v in given.items() if v is not None}
    _context(base, nodes)  # scenario vocabulary checks (cluster, stack, network flags): one line, now
    space = replace(space, cps=parse_cp(cp, cfg), shard_groups=parse_shard_groups(shard_group))
    if png is not None:
        from simcomm.outpath import check_output_path

        png = check_output_path(png, "--png")
    dtype = precision

    with _Bar(quiet or as_json) as bar:
        rows, n_enum, n_fit, dev, n_gpus, ctx = search(cfg, base, nodes, global_batch, space, dtype, bar)
        k = min(simulate_k, len(rows))
        todo = [i for i in range(k) if plan.plan_ops(cfg, rows[i].layout, n_gpus, global_batch) <= max_ops]
        for i in range(k):
            if i not in todo:
                ops = plan.plan_ops(cfg, rows[i].layout, n_gpus, global_batch)
                rows[i].note = f"not simulated: plan of ~{ops:,} ops > --max-ops {max_ops:,}"
        if todo:
            bar.stage(f"simulating {len(todo)} layout(s) ({fidelity})", len(todo))
        for i in todo:
            rows[i] = plan.simulate_row(rows[i], {**base, "nodes": nodes}, global_batch, fidelity)
            bar.tick()
        ranked = plan.rank_rows(rows)
        sweep = None
        if png is not None:
            sweep = _pareto_points(cfg, base, nodes, global_batch, space, dtype, bar, n_gpus, ranked[0])
    assumed = _assumed(ctx, cfg, space, n_gpus, nodes, precision, n_enum, n_fit, dev, k, fidelity, max_ops)
    # the default too: the attention kind changes every row's compute (plan prints no trace line)
    assumed.append(f"attention: {ATTENTIONS[cfg.attention]}" + ("" if attention else " (the default; --attention "
                                                                  "unfused for Megatron-LM 2021-22's)"))
    skipped = plan.batch_skipped(cfg, n_gpus, global_batch, max(1, n_gpus // nodes), space)
    if skipped:
        eg = ", ".join(f"tp {x[0]}" + (f" cp {x[3]}" if len(x) > 3 else "") + f" pp {x[1]} dp {x[2]}"
                       for x in skipped[:3])
        assumed.append(f"global batch {global_batch} kept exactly (never rounded): {len(skipped)} tp × pp × dp "
                       f"split(s) skipped because dp does not divide it ({eg}{', ...' if len(skipped) > 3 else ''})")
    shown = ranked[:top]
    simulated = [(i, r) for i, r in enumerate(ranked) if r.priced != plan.ESTIMATE or r.note]
    if as_json:
        print_json({"model": model, "cluster": cluster, "nodes": nodes, "gpus": n_gpus,
                    "global_batch": global_batch, "device": dev.label, "device_memory_gb": dev.capacity / 1e9,
                    "layouts": n_enum, "fit": n_fit, "assumed": assumed,
                    "rows": [dict(rank=i + 1, **r.to_dict(global_batch)) for i, r in rows_with_rank(shown, simulated)],
                    "pareto": sweep})
    else:
        _print(shown, model, cluster, n_gpus, global_batch, dev, n_enum, n_fit, assumed, simulated)
    if png is not None:
        from simcomm.report.plan_plot import plot_pareto

        plot_pareto(sweep, png, title=f"{model} on {cluster}, global batch {global_batch}")
        if not as_json:
            stdout().print(f"plot: {png}")


def _zoo_names() -> set:
    from simcomm.traces.zoo import MODELS

    return set(MODELS)


def _pareto_points(cfg, base, nodes, global_batch, space, dtype, bar, n_gpus, best) -> list[dict]:
    """Best estimated layout at each node count 1, 2, 4, ... below ``nodes`` (and the searched one)."""
    counts = sorted({c for c in (2 ** i for i in range(nodes.bit_length())) if c < nodes})
    pts = []
    for c in counts:
        try:
            rows = search(cfg, base, c, global_batch, space, dtype, bar, strict=False)[0]
        except ConfigError:
            continue  # nothing divides or fits at this size: no point
        r = rows[0]
        pts.append({"gpus": r.layout.gpus, "step_s": r.step_s, "priced": r.priced,
                    "layout": _short(r.layout)})
    pts.append({"gpus": n_gpus, "step_s": best.step_s, "priced": best.priced, "layout": _short(best.layout)})
    return pts


def _short(lay) -> str:
    s = f"tp{lay.tp}" + (f" cp{lay.cp}" if lay.cp > 1 else "") + f" pp{lay.pp} dp{lay.dp}"
    if lay.virtual > 1:
        s += f" v{lay.virtual}"
    return s + f" z{lay.zero}" + (f" hsdp{lay.shard_group}" if lay.shard_group else "") + f" mb{lay.microbatch}"


def _axes(cfg, space, gpn) -> tuple[str, str]:
    """(context parallelism, HSDP) as the ``assumed:`` line says what was searched."""
    from simcomm import plan

    cps = space.cps if space.cps is not None else plan.auto_cps(cfg, gpn)
    how = "--cp auto" if space.cps is None else "--cp"
    if cps == (1,):
        cp_text = (f"context parallelism not searched ({how}" + (f": seq {cfg.seq} < {plan.CP_AUTO_SEQ}; --cp 1,2,4 "
                   "searches it)" if space.cps is None else ")"))
    else:
        cp_text = (f"context parallel cp {','.join(map(str, cps))} ({how}"
                   + (f": seq {cfg.seq} >= {plan.CP_AUTO_SEQ}, powers of two up to the {gpn} GPUs per node"
                      if space.cps is None else "")
                   + "; ring attention (cp_kind ring; Ulysses all-to-alls not searched), CP ranks right outside TP, "
                   "each cp dividing the sequence and the GPUs)")
    g = space.shard_groups
    if 3 not in space.zeros or not g:
        hs = "HSDP not searched" + (" (--shard-group none)" if 3 in space.zeros else "")
    elif g == (plan.NODE,):
        hs = ("ZeRO-3 plain and as HSDP with the in-node shard group where a lane's replicas span nodes "
              "(--shard-group auto, FSDP HYBRID_SHARD)")
    else:
        sizes = ",".join("in-node" if x == plan.NODE else str(x) for x in g)
        hs = f"ZeRO-3 plain and as HSDP with shard group {sizes} where smaller than and dividing dp × cp"
    return cp_text, hs


def _assumed(ctx, cfg, space, n_gpus, nodes, precision, n_enum, n_fit, dev, k, fidelity, max_ops) -> list[str]:
    name, why = ctx.stack_choice()
    gpn = max(1, n_gpus // nodes)
    max_tp = space.max_tp or gpn
    cp_text, hs = _axes(cfg, space, gpn)
    return [
        f"{n_gpus} GPUs ({nodes} node(s)); {dev.label} with {dev.capacity / 1e9:.3g} GB per GPU; stack {name}"
        + (f" ({why})" if why else ""),
        f"precision {precision} (mixed precision with Adam: 16 bytes of model state per parameter)",
        f"searched: tp <= {max_tp} (tensor parallelism inside a node), every pp dividing the layers, dp the rest; "
        f"micro-batch <= {space.max_microbatch}; zero {','.join(map(str, space.zeros))}; schedules "
        f"{','.join(space.schedules)}; recompute {','.join(space.recomputes)}; sequence parallel on and off; "
        f"{cp_text}; {hs}; expert parallelism not searched",
        f"{n_enum} layouts divide the GPUs, layers, heads and global batch; {n_fit} fit in memory "
        f"(simcomm.memory.layout, fullest pipeline stage, memory = {dev.policy}: under warn or off every layout "
        "is kept)",
        dev.assumed(),
        "estimate: closed form of docs/plan.md (trace compute / (tp·cp), bubble (p-1)/v stages, TP, CP ring, DP "
        "(HSDP: in and across shard groups) and point-to-point priced by the engine's analytic NCCL model); rows "
        "are ranked by the simulated step time where there is one, else by it",
        f"the best {k} by estimate simulated with the pipeline ({fidelity} fidelity) when their plan has at most "
        f"{max_ops:,} ops; 'priced' says which step times are simulated (flow, analytic: the fidelity) and which are "
        "estimates",
    ]


#: the table's short names of Row.priced (the width of 15 columns); the JSON keeps the long ones
_PRICED = {"estimate": "estimate", "simulated flow": "flow", "simulated analytic": "analytic"}


def _sched(lay) -> str:
    if lay.pp == 1:
        return "-"
    return f"interl. v{lay.virtual}" if lay.schedule == "interleaved" else lay.schedule


def _print(rows, model, cluster, n_gpus, gb, dev, n_enum, n_fit, assumed, simulated) -> None:
    con = stdout()
    t = table(f"simcomm plan: {model} on {cluster}, {n_gpus} GPUs, global batch {gb} "
              f"({n_fit} of {n_enum} layouts fit in {dev.label})",
              [("rank", "right"), ("tp", "right"), ("cp", "right"), ("pp", "right"), ("dp", "right"),
               ("schedule", "left"), ("zero", "right"), ("HSDP", "right"), ("mb", "right"), ("SP", "left"),
               ("recompute", "left"), ("GB", "right"), ("step s", "right"), ("seq/s", "right"),
               ("priced", "left")])
    for i, r in enumerate(rows):
        lay = r.layout
        t.add_row(str(i + 1), str(lay.tp), str(lay.cp), str(lay.pp), str(lay.dp), _sched(lay), str(lay.zero),
                  str(lay.shard_group) if lay.shard_group else "-", str(lay.microbatch), _yes(lay.sequence_parallel),
                  lay.recompute, f"{r.memory_bytes / 1e9:.1f}", f"{r.step_s:.4g}", f"{gb / r.step_s:.4g}", _PRICED.get(r.priced, r.priced))
    con.print(t)
    b = table("breakdown (seconds per step): the estimate's parts for every row (TP, CP ring, DP: exposed "
              "communication); simulated rows also give the pipeline's compute and the rest (exposed communication, "
              "bubble, update)",
              [("rank", "right"), ("estimate", "right"), ("compute", "right"), ("TP", "right"),
               ("CP ring", "right"), ("bubble+p2p", "right"), ("DP", "right"), ("update", "right"),
               ("simulated", "right"), ("sim compute", "right"), ("sim rest", "right")])
    for i, r in rows_with_rank(rows, simulated):
        e = r.estimate
        sim = r.priced != "estimate"
        b.add_row(str(i + 1), f"{e.step:.4g}", f"{e.compute:.4g}", f"{e.tp:.3g}", f"{e.cp:.3g}", f"{e.bubble:.3g}",
                  f"{e.dp:.3g}", f"{e.update:.3g}", f"{r.step_s:.4g}" if sim else "-",
                  f"{r.compute_s:.4g}" if sim else "-", f"{r.exposed_s:.3g}" if sim else "-")
    con.print(b)
    for i, r in rows_with_rank(rows, simulated):
        if r.note:
            con.print(f"rank {i + 1}: {r.note}")
    for line in assumed:
        sys.stdout.write(f"assumed: {line}\n")


def rows_with_rank(shown, simulated):
    """(index, row) of the shown rows, then of simulated rows ranked below them (they are still reported)."""
    out = list(enumerate(shown))
    out += [(i, r) for i, r in simulated if i >= len(shown)]
    return out

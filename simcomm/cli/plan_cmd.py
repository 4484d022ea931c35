"""``simcomm plan``: the fastest ``megatron`` layouts of a transformer on a cluster (docs/plan.md).

Enumerate, keep what fits in GPU memory, prune by a closed-form estimate, simulate
the best ``--simulate K`` with the pipeline ``simcomm run`` uses and rank by those
simulations (:mod:`simcomm.llm.search`); print the simulated rows, the winner with the
``simcomm run`` command that reproduces it, and apart the best estimate-only rows
(and ``--png``: the Pareto plot of step time against GPU count, simulated points
apart from estimates).  Every bad input is one ``error:`` line before any long work.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simcomm.cli.console import print_json, stderr, stdout, table
from simcomm.cli.scenario_flags import scenario_flags
from simcomm.errors import ConfigError

__all__ = ["plan_command", "parse_list", "parse_cp", "parse_shard_groups", "run_command", "check_precisions"]

_PRECISIONS = ("bf16", "amp-bf16", "fp16", "amp-fp16", "fp32", "fp8", "fp8-tensorwise", "mxfp8")


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
    """``--cp``: ``auto`` (None: :func:`simcomm.llm.search.auto_cps` once the GPUs per node are known) or
    context-parallel sizes, each dividing the model's sequence (checked here; the GPU count is checked once
    the cluster is known, :func:`simcomm.llm.search.check_cp`)."""
    from simcomm.llm.layout import divisors

    values = _ints(text, "--cp", ("auto",))
    if values == ["auto"]:
        return None
    for c in values:
        if cfg.seq % c:
            raise ConfigError(f"--cp: {c} does not divide the sequence length {cfg.seq} of {cfg.name} (each "
                              f"context-parallel rank holds seq / cp tokens); valid choices: auto, "
                              f"{', '.join(map(str, divisors(cfg.seq)))}")
    return tuple(sorted(values))


def parse_shard_groups(text: str) -> tuple:
    """``--shard-group``: ``auto`` (the in-node group, :func:`simcomm.llm.search.node_shard_group`), ``none`` or
    HSDP group sizes."""
    from simcomm.llm import search as plan

    values = _ints(text, "--shard-group", ("auto", "none"))
    if values == ["none"]:
        return ()
    return tuple(plan.NODE if x == "auto" else x for x in sorted(values, key=str))


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

    def __call__(self, name: str, total: int):
        """The library's ``progress`` callback: start a stage, return its per-item tick."""
        self.stage(name, total)
        return self.tick


def _context(base: dict, nodes: int):
    from simcomm.pipeline import Context
    from simcomm.scenario import from_flat

    scn = from_flat({**base, "strategy": "megatron", "nodes": nodes})
    return scn, Context(scn)


def _yes(x: bool) -> str:
    return "yes" if x else "-"


@scenario_flags(sections=("stack", "network", "memory"))
def plan_command(
    model: str = typer.Option(..., "--model", help="Zoo transformer (simcomm list models)."),
    cluster: str = typer.Option("dgx-a100-hdr", "--cluster", help="Cluster preset or file."),
    nodes: int = typer.Option(1, "--nodes", "-n", help="Number of nodes."),
    gpus_per_node: int | None = typer.Option(None, "--gpus-per-node", "-g"),
    global_batch: int = typer.Option(..., "--global-batch", help="Sequences per training step."),
    precision: str = typer.Option("bf16", "--precision", help="Precisions searched: bf16, amp-bf16, fp16, "
                                  "amp-fp16, fp32, fp8, fp8-tensorwise, mxfp8 (comma-separated), or auto (bf16, and fp8 / mxfp8 where "
                                  "the GPU has FP8 tensor cores)."),
    attention: str | None = typer.Option(None, "--attention", help="flash (FlashAttention, the default) or "
                                            "unfused (Megatron-LM 2021-22: full s×s core, scores through HBM)."),
    top: int = typer.Option(10, "--top", help="Rows to print."),
    simulate_k: int = typer.Option(20, "--simulate", help="Simulate the best K layouts by estimate and rank by "
                                   "the simulations (at least 1)."),
    fidelity: str = typer.Option("flow", "--fidelity", help="Fidelity of those simulations: flow or analytic."),
    max_ops: int = typer.Option(300_000, "--max-ops",
                                help="Simulate a layout only if its plan has at most this many ops (time)."),
    sim_ops: int | None = typer.Option(None, "--sim-ops", help="Stop simulating once the simulated plans would pass "
                                       "this many ops in all (time; default no bound; the first layout is always "
                                       "simulated)."),
    prune: bool = typer.Option(True, "--prune/--no-prune", help="Pass over a layout of the K whose lower bound (its "
                               "plan's computes and transfers at link capacity, no contention) exceeds a step "
                               "simulated before it: it cannot win (flow fidelity; --no-prune simulates all K)."),
    workers: int | None = typer.Option(None, "--workers", help="Processes the search and the simulations run in "
                                       "(default: the CPUs, at most 2; the rows are the same for any number)."),
    max_tp: int | None = typer.Option(None, "--max-tp", help="Largest tensor-parallel size (default: GPUs "
                                                                 "per node)."),
    max_microbatch: int = typer.Option(16, "--max-microbatch", help="Largest micro-batch searched."),
    zero: str = typer.Option("0,1,2,3", "--zero", help="ZeRO stages searched."),
    schedules: str = typer.Option("1f1b,interleaved,gpipe", "--schedules", help="Pipeline schedules searched."),
    recompute: str = typer.Option("none,selective,full", "--recompute", help="Recomputation searched: none, "
                                  "selective, full (Megatron-core's), op (torchtitan's per-operator)."),
    cp: str = typer.Option("auto", "--cp", help="Context-parallel sizes searched (auto: 1, and 2, 4, ... up to "
                                                "the GPUs per node when the sequence is >= 8192)."),
    shard_group: str = typer.Option("auto", "--shard-group", help="HSDP shard-group sizes tried beside plain "
                                                                  "ZeRO-3 (auto: the in-node group; none)."),
    ep: str = typer.Option("auto", "--ep", help="Expert-parallel sizes searched for MoE models (auto: every one "
                                                "dividing the experts and the replicas)."),
    png: Path | None = typer.Option(None, "--png", help="Write the Pareto plot (step time vs GPUs) here."),
    as_json: bool = typer.Option(False, "--json"),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    flags: dict | None = None,
) -> None:
    """Search tensor/context/pipeline/expert/data-parallel (ZeRO, HSDP) layouts that fit in memory; simulate the
    best by estimate and print the fastest simulated one with its ``simcomm run`` command."""
    from simcomm.llm import search as plan
    from simcomm.llm import simulate as sim
    from simcomm.scenario import FIDELITIES
    from simcomm.traces.zoo.transformer import ATTENTIONS, TRANSFORMERS, check_attention

    # every check before any long work
    if model not in TRANSFORMERS:
        what = "is not a transformer (plan searches transformer layouts)" if model in _zoo_names() else "is unknown"
        raise ConfigError(f"model: {model!r} {what}; valid choices: {', '.join(TRANSFORMERS)}")
    for name, value, lo in (("--global-batch", global_batch, 1), ("--top", top, 1), ("--simulate", simulate_k, 1),
                            ("--max-ops", max_ops, 0), ("--sim-ops", sim_ops, 1), ("--max-microbatch", max_microbatch, 1),
                            ("--nodes", nodes, 1), ("--workers", workers, 1)):
        if value is not None and value < lo:
            raise ConfigError(f"{name}: {value} must be >= {lo}")
    if max_tp is not None and max_tp < 1:
        raise ConfigError(f"--max-tp: {max_tp} must be >= 1")
    if fidelity not in FIDELITIES:
        raise ConfigError(f"--fidelity: {fidelity!r} is not valid; valid choices: {', '.join(FIDELITIES)}")
    precisions = ("auto",) if precision.strip() == "auto" else parse_list(precision, "--precision", _PRECISIONS)
    space = plan.Space(max_tp=max_tp, max_microbatch=max_microbatch,
                       zeros=parse_list(zero, "--zero", (0, 1, 2, 3), int),
                       schedules=parse_list(schedules, "--schedules", ("1f1b", "interleaved", "gpipe")),
                       recomputes=parse_list(recompute, "--recompute", ("none", "selective", "full", "op")))
    # the attention priced into the trace and into selective recomputation's share (cfg.meta())
    cfg = replace(TRANSFORMERS[model][0], attention=check_attention(attention or "flash"))
    given = {"cluster": cluster, "gpus_per_node": gpus_per_node, "model": model,
             "precision": "bf16" if precisions == ("auto",) else precisions[0],
             "attention": attention, **(flags or {})}
    base = {k: v for k, v in given.items() if v is not None}
    _, ctx0 = _context(base, nodes)  # scenario vocabulary checks (cluster, stack, network flags): one line, now
    precisions = check_precisions(precisions, ctx0.device(), model)
    space = replace(space, cps=parse_cp(cp, cfg), shard_groups=parse_shard_groups(shard_group),
                    eps=parse_eps(ep, cfg))
    if png is not None:
        from simcomm.outpath import check_output_path

        png = check_output_path(png, "--png")
    procs = workers if workers is not None else sim.default_workers()
    with _Bar(quiet or as_json) as bar:
        found = plan.search_precisions(cfg, base, nodes, global_batch, space, precisions, bar, workers=procs)
        n_gpus, dev, ctx = found.gpus, found.device, found.context
        ranked = sim.simulate_best(found, cfg, base, nodes, global_batch, simulate_k, fidelity, max_ops, sim_ops,
                                   bar, procs, prune=prune)
        simulated = [r for r in ranked if r.simulated]
        if not simulated:
            raise ConfigError(f"--max-ops: none of the {len(ranked)} layouts that fit has a plan of at most "
                              f"{max_ops:,} ops, so none can be simulated; raise --max-ops")
        best = simulated[0]
        sweep = None
        if png is not None:
            sweep = _pareto_points(cfg, base, nodes, global_batch, space, precisions, bar, ranked, fidelity,
                                   max_ops, sim_ops)
    k = len(simulated)
    assumed = [*ctx.cluster_notes(nodes, 0), *_assumed(ctx, cfg, space, n_gpus, nodes, precisions, found.enumerated,
                                                       found.fit, dev, simulate_k, fidelity, max_ops, sim_ops, k),
                *sim.bound_notes(ranked, max_ops, sim_ops)]
    network = ctx.cluster(nodes, 0)[0].network  # echoed in the header and --json (the assumed line says what stayed)
    where = f"{cluster} ({network.label()})" if network.any() else cluster
    # the default too: the attention kind changes every row's compute (plan prints no trace line)
    assumed.append(f"attention: {ATTENTIONS[cfg.attention]}" + ("" if attention else " (the default; --attention "
                                                                  "unfused for Megatron-LM 2021-22's)"))
    skipped = plan.batch_skipped(cfg, n_gpus, global_batch, max(1, n_gpus // nodes), space)
    if skipped:
        eg = ", ".join(f"tp {x[0]}" + (f" cp {x[3]}" if len(x) > 3 else "") + f" pp {x[1]} dp {x[2]}"
                       for x in skipped[:3])
        assumed.append(f"global batch {global_batch} kept exactly (never rounded): {len(skipped)} tp × pp × dp "
                       f"split(s) skipped because dp does not divide it ({eg}{', ...' if len(skipped) > 3 else ''})")
    command = run_command(best.layout, base, nodes, global_batch, fidelity, best.precision)
    estimates = [r for r in ranked if not r.simulated][:top]
    if as_json:
        print_json({"model": model, "cluster": cluster, **({"network": network.given()} if network.any() else {}),
                    "nodes": nodes, "gpus": n_gpus,
                    "global_batch": global_batch, "device": dev.label, "device_memory_gb": dev.capacity / 1e9,
                    "layouts": found.enumerated, "fit": found.fit, "simulated": k, "assumed": assumed,
                    "winner": {"rank": 1, **best.to_dict(global_batch), "command": command},
                    "rows": [dict(rank=i + 1, **r.to_dict(global_batch)) for i, r in enumerate(simulated[:top])],
                    "estimates": [r.to_dict(global_batch) for r in estimates],
                    "pareto": sweep})
    else:
        _print(simulated[:top], estimates, model, where, n_gpus, global_batch, dev, found, assumed, command,
               len(precisions) > 1)
    if png is not None:
        from simcomm.report.plan_plot import plot_pareto

        plot_pareto(sweep, png, title=f"{model} on {cluster}, global batch {global_batch}")
        if not as_json:
            stdout().print(f"plot: {png}")


def parse_eps(text: str, cfg) -> tuple[int, ...] | None:
    """``--ep``: ``auto`` (None: every size dividing the experts and the replicas) or expert-parallel sizes, each
    dividing the model's experts (a dense model takes only 1)."""
    from simcomm.llm.layout import divisors

    values = _ints(text, "--ep", ("auto",))
    if values == ["auto"]:
        return None
    experts = getattr(cfg, "experts", 0) or 0
    for e in values:
        if e > 1 and not experts:
            raise ConfigError(f"--ep: {e} needs a mixture-of-experts model, and {cfg.name} is dense; valid choices: "
                              "auto, 1")
        if experts and experts % e:
            raise ConfigError(f"--ep: {e} does not divide the {experts} experts of {cfg.name}; valid choices: auto, "
                              f"{', '.join(map(str, divisors(experts)))}")
    return tuple(sorted(values))


def check_precisions(precisions: tuple, device: str | None, model: str) -> tuple[str, ...]:
    """``--precision``'s list on the cluster's GPU: ``auto`` is bf16 plus each FP8 recipe the GPU's tensor cores
    run (``fp8``, Megatron-core's default delayed scaling, on Hopper, Ada and Blackwell; ``mxfp8`` on Blackwell);
    an FP8 recipe the GPU lacks is one line (:func:`simcomm.traces.synth.check_fp8`, as ``simcomm run``)."""
    from simcomm import traces
    from simcomm.errors import UnknownNameError
    from simcomm.traces.synth import FP8_DTYPES, check_fp8

    try:
        dev = traces.DEVICES.get(traces.device_for_cluster(device or "v100"))
    except UnknownNameError:  # no compute model: the pipeline prices the V100's (and says so)
        dev = traces.DEVICES.get("v100")
    if precisions == ("auto",):
        return ("bf16", *(p for p, fmt in (("fp8", "fp8"), ("mxfp8", "mxfp8")) if fmt in dev.fp8_formats))
    for p in precisions:
        if p in FP8_DTYPES:
            check_fp8(p, dev, model, "--precision")
    return tuple(precisions)


def _precision_line(precisions: tuple, ctx) -> str:
    """The ``assumed:`` line of the precisions searched (each one's meaning, :data:`simcomm.precision.PRECISIONS`)."""
    from simcomm.precision import PRECISIONS
    from simcomm.traces.synth import FP8_DTYPES

    what = "; ".join(f"{p}: {PRECISIONS[p].summary}" for p in precisions)
    state = "mixed precision with Adam: 16 bytes of model state per parameter" + (
        ", FP8 layouts' memory counted as bf16's (TE keeps bf16 weights and activations)"
        if any(p in FP8_DTYPES for p in precisions) else "")
    if len(precisions) > 1:
        return f"precisions searched {', '.join(precisions)}, each layout in each ({what}); {state}"
    fp8 = "" if precisions[0] in FP8_DTYPES else \
        "; FP8 not searched (--precision bf16,fp8 or auto searches it on GPUs with FP8 tensor cores)"
    return f"precision {precisions[0]} ({state}){fp8}"


def run_command(lay, base: dict, nodes: int, global_batch: int, fidelity: str, precision: str | None = None) -> str:
    """The ``simcomm run`` command line that simulates ``lay`` exactly as ``plan`` did (same scenario keys)."""
    import shlex

    from simcomm.cli.scenario_flags import _OFF
    from simcomm.llm.simulate import scenario_keys
    from simcomm.scenario import KEY

    keys = scenario_keys(lay, {**base, "nodes": nodes}, global_batch, fidelity, precision)
    opts = lay.options(global_batch)
    words = ["simcomm", "run"]
    for name in ("strategy", "model", "cluster", "nodes", *sorted(set(keys) - set(opts) - {"strategy", "model",
                                                                                       "cluster", "nodes"})):
        value = keys[name]
        if KEY[name].kind == "bool":
            words.append(KEY[name].flag if value else _OFF.get(name, "--no-" + name.replace("_", "-")))
        else:
            words += [KEY[name].flag, str(value)]
    for name, value in opts.items():
        words += ["--opt", f"{name}={str(value).lower() if isinstance(value, bool) else value}"]
    return " ".join(shlex.quote(w) for w in words) + " --no-baseline"


def _zoo_names() -> set:
    from simcomm.traces.zoo import MODELS

    return set(MODELS)


def _pareto_points(cfg, base, nodes, global_batch, space, precisions, bar, ranked, fidelity, max_ops,
                   sim_ops) -> list[dict]:
    """Points of the plot: at each node count 1, 2, 4, ... below ``nodes`` its best layout by estimate and that
    layout simulated; at ``nodes`` every simulated row and the best estimate-only row."""
    from simcomm.llm import search as plan
    from simcomm.llm.simulate import simulate_best

    counts = sorted({c for c in (2 ** i for i in range(nodes.bit_length())) if c < nodes})
    pts = []
    for c in counts:
        try:
            found = plan.search_precisions(cfg, base, c, global_batch, space, precisions, bar, strict=False)
        except ConfigError:
            continue  # nothing divides or fits at this size: no point
        rows = simulate_best(found, cfg, base, c, global_batch, 1, fidelity, max_ops, sim_ops)
        pts.append(_point(found.rows[0], estimate=True))
        if rows[0].simulated:
            pts.append(_point(rows[0]))
    pts += [_point(r) for r in ranked if r.simulated]
    rest = [r for r in ranked if not r.simulated]
    if rest:
        pts.append(_point(rest[0], estimate=True))
    return pts


def _point(r, estimate: bool = False) -> dict:
    return {"gpus": r.layout.gpus, "step_s": r.estimate.step if estimate else r.step_s,
            "priced": "estimate" if estimate else r.priced, "layout": r.layout.short()}


def _axes(cfg, space, gpn) -> tuple[str, str]:
    """(context parallelism, HSDP) as the ``assumed:`` line says what was searched."""
    from simcomm.llm import search as plan

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


def _assumed(ctx, cfg, space, n_gpus, nodes, precisions, n_enum, n_fit, dev, k, fidelity, max_ops, sim_ops,
             done) -> list[str]:
    name, why = ctx.stack_choice()
    gpn = max(1, n_gpus // nodes)
    max_tp = space.max_tp or gpn
    cp_text, hs = _axes(cfg, space, gpn)
    experts = getattr(cfg, "experts", 0) or 0
    ep_text = ("expert parallelism not searched (dense model)" if not experts else
               "expert parallel ep " + ("every size dividing the experts and dp × cp" if space.eps is None
                                       else ",".join(map(str, space.eps)) + " where they divide dp × cp")
               + ", each with etp = tp and, when tp > 1, etp 1 (not with HSDP; ep dividing dp × cp, as the memory "
               "model requires)")
    return [
        f"{n_gpus} GPUs ({nodes} node(s)); {dev.label} with {dev.capacity / 1e9:.3g} GB per GPU; stack {name}"
        + (f" ({why})" if why else ""),
        _precision_line(precisions, ctx),
        f"searched: tp <= {max_tp} (tensor parallelism inside a node), every pp dividing the layers, dp the rest; "
        f"micro-batch <= {space.max_microbatch}; zero {','.join(map(str, space.zeros))}; schedules "
        f"{','.join(space.schedules)}; recompute {','.join(space.recomputes)}; sequence parallel on and off; "
        f"{cp_text}; {hs}; {ep_text}",
        f"{n_enum} layouts divide the GPUs, layers, heads and global batch; {n_fit} fit in memory "
        f"(simcomm.memory.layout, fullest pipeline stage, memory = {dev.policy}: under warn or off every layout "
        "is kept)",
        dev.assumed(),
        "estimate (only prunes): closed form of docs/plan.md (the emitter's per-layer compute, simcomm.llm.compute; "
        "bubble (p-1)/v stages, TP, CP ring, the MoE dispatchers' collectives (EP), DP (HSDP: in and across shard "
        "groups) and point-to-point priced by the engine's analytic NCCL model)",
        f"the best {k} by estimate whose plan has at most {max_ops:,} ops (--max-ops)"
        + (f", {sim_ops:,} in all (--sim-ops), " if sim_ops is not None else ", ") +
        f"simulated with the pipeline simcomm run uses ({fidelity} fidelity; {done} simulated) and ranked by their "
        "simulated step; estimate-only rows are listed apart, below them",
    ]


def _sched(lay) -> str:
    if lay.pp == 1:
        return "-"
    return f"int. v{lay.virtual}" if lay.schedule == "interleaved" else lay.schedule


_LAYOUT_COLUMNS = [("tp", "right"), ("cp", "right"), ("pp", "right"), ("dp", "right"), ("ep", "right"),
                   ("schedule", "left"), ("zero", "right"), ("HSDP", "right"), ("mb", "right"), ("SP", "left"),
                   ("rc", "left"), ("GB", "right")]
_RECOMPUTE = {"none": "-", "selective": "sel", "full": "full", "op": "op"}


def _cells(r, precision: bool = False) -> list[str]:
    lay = r.layout
    ep = str(lay.ep) + (f"/{lay.etp}" if lay.etp is not None else "")  # /N: expert tensor-parallel size N
    return [str(lay.tp), str(lay.cp), str(lay.pp), str(lay.dp), ep, _sched(lay), str(lay.zero),
            str(lay.shard_group) if lay.shard_group else "-", str(lay.microbatch), _yes(lay.sequence_parallel),
            _RECOMPUTE[lay.recompute], *([r.precision or "-"] if precision else []), f"{r.memory_bytes / 1e9:.1f}"]


def _columns(precision: bool) -> list[tuple[str, str]]:
    """The layout's columns, with the precision's before the memory when several are searched."""
    return _LAYOUT_COLUMNS[:-1] + [("prec", "left")] + _LAYOUT_COLUMNS[-1:] if precision else _LAYOUT_COLUMNS


def _print(simulated, estimates, model, cluster, n_gpus, gb, dev, found, assumed, command,
           precision: bool = False) -> None:
    con = stdout()
    t = table(f"simcomm plan: {model} on {cluster}, {n_gpus} GPUs, global batch {gb} ({found.fit} of "
              f"{found.enumerated} layouts fit in {dev.label}; ranked by simulated step time)",
              [("rank", "right"), *_columns(precision), ("step s", "right"), ("est. s", "right"),
               ("est#", "right"), ("err", "right")])
    for i, r in enumerate(simulated):
        err = (r.estimate.step - r.step_s) / r.step_s
        t.add_row(str(i + 1), *_cells(r, precision), f"{r.step_s:.4g}", f"{r.estimate.step:.4g}",
                  str(r.estimate_rank), f"{err:+.0%}")
    con.print(t)
    best = simulated[0]
    sys.stdout.write(f"winner: {best.layout.short()}, {best.step_s:.4g} s per step (simulated, "
                     f"{_PRICED_WORD[best.priced]} fidelity)\n")
    sys.stdout.write(f"reproduce: {command}\n")
    if estimates:
        bounded = any(_short_note(r.note) == "bound > best" for r in estimates)
        e = table("estimate only (not simulated; never ranked above a simulated row; '> --max-ops': its plan is "
                  "larger, '> --sim-ops': it would pass the simulations' op budget"
                  + (", 'bound > best': a lower bound on its step exceeds a simulated one)" if bounded else ")"),
                  [("est#", "right"), *_columns(precision), ("est. s", "right"), ("note", "left")])
        for r in estimates:
            e.add_row(str(r.estimate_rank), *_cells(r, precision), f"{r.estimate.step:.4g}", _short_note(r.note))
        con.print(e)
    moe = any(r.estimate.ep for r in simulated)  # the EP column only for a mixture-of-experts model
    b = table("breakdown of the simulated rows (seconds per step): the estimate's parts (TP, CP ring, "
              + ("EP, " if moe else "") + "DP: exposed communication) and the simulation's compute and rest (exposed "
              "communication, bubble, update)",
              [("rank", "right"), ("estimate", "right"), ("compute", "right"), ("TP", "right"),
               ("CP ring", "right"), *([("EP", "right")] if moe else []), ("bubble+p2p", "right"), ("DP", "right"),
               ("update", "right"), ("simulated", "right"), ("sim compute", "right"), ("sim rest", "right")])
    for i, r in enumerate(simulated):
        x = r.estimate
        b.add_row(str(i + 1), f"{x.step:.4g}", f"{x.compute:.4g}", f"{x.tp:.3g}", f"{x.cp:.3g}",
                  *([f"{x.ep:.3g}"] if moe else []), f"{x.bubble:.3g}", f"{x.dp:.3g}", f"{x.update:.3g}",
                  f"{r.step_s:.4g}", f"{r.compute_s:.4g}", f"{r.exposed_s:.3g}")
    con.print(b)
    for line in assumed:
        sys.stdout.write(f"assumed: {line}\n")


def _short_note(note: str) -> str:
    """The table's note: which bound kept a row from being simulated (the JSON keeps the whole note)."""
    for flag in ("--max-ops", "--sim-ops"):
        if flag in note:
            return f"> {flag}"
    from simcomm.llm.simulate import PRUNED

    if note.startswith(PRUNED):  # a lower bound above a step simulated before it (docs/plan.md, section 4)
        return "bound > best"
    return note or "-"


_PRICED_WORD = {"simulated flow": "flow", "simulated analytic": "analytic"}

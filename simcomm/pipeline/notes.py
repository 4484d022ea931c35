"""The ``assumed:`` notes a run adds to its Setup's: the memory check and the collective algorithms that ran."""

from __future__ import annotations

from simcomm.errors import SimcommError
from simcomm.scenario import MemorySpec

__all__ = ["memory_budget", "memory_check", "ran_lines"]


def memory_budget(device: str | None, spec: MemorySpec, replica: bool = False):
    """The :class:`~simcomm.memory.fit.Budget` a run is judged on, or None when nothing names a GPU's memory
    (``gpu_memory`` overrides the cluster's device's).  The margin is ``memory_margin``, else
    :data:`~simcomm.memory.fit.DEFAULT_MARGIN` for a layout's peak and 0 for a data-parallel ``replica``'s
    estimate (an assumption, docs/traces.md: no allowed source states a replica batch that did not fit)."""
    from simcomm import traces
    from simcomm.errors import UnknownNameError
    from simcomm.memory.fit import DEFAULT_MARGIN, Budget
    from simcomm.units import format_size

    margin = spec.margin if spec.margin is not None else 0.0 if replica else DEFAULT_MARGIN
    if spec.gpu_memory is not None:
        return Budget(spec.gpu_memory, format_size(spec.gpu_memory), margin, spec.policy, given=True)
    if device is None:
        return None
    try:
        dev = traces.get_device(traces.device_for_cluster(device))
    except UnknownNameError:
        return None
    if dev.kind != "gpu" or not dev.memory:
        return None
    return Budget(dev.memory, getattr(dev, "label", dev.name), margin, spec.policy)


def memory_check(strategy, w, trace, device: str | None, spec: MemorySpec, notes: list) -> dict:
    """Check the strategy's peak GPU memory (simcomm.memory) on the device: note its line, return its breakdown.

    A strategy that shards state gives its own peak (``Strategy.memory``); otherwise a data-parallel
    replica holds the whole model (:mod:`simcomm.memory.replicated`; strategies that shard only their
    update, PCNN's or a parameter server's, need less, so this is an upper bound).  ``memory = refuse``
    raises one DoesNotFitError line, naming the largest batch (or micro-batch) that fits when a smaller one
    would (:func:`_knob_hint`); ``warn`` notes the shortfall; ``off`` notes the estimate unchecked.
    """
    from simcomm.errors import DoesNotFitError
    from simcomm.memory import replicated
    from simcomm.memory.fit import check

    own = strategy.memory(w)
    budget = memory_budget(device, spec, replica=own is None or getattr(own, "replica", False))
    optimizer = str(trace.meta.get("optimizer", "sgd"))
    if isinstance(own, str):
        notes.append(own)
        return {}
    if own is None:
        if budget is None:
            return {}
        try:
            est = replicated.estimate(trace, w.batch, optimizer=optimizer)
        except SimcommError:
            notes.append("memory: no estimate (the trace lacks layer shapes)")
            return {}
        peak = est.peak()
    else:
        peak = own
    if budget is None:
        notes.append(f"memory: {peak.total / 1e9:.4g} GB per GPU, not checked (the cluster names no GPU whose "
                     f"memory is known; --gpu-memory gives one) ({peak.what}: {peak.breakdown()})")
        return peak.to_dict()
    try:
        notes.append(check(peak, budget))
    except DoesNotFitError as exc:
        knob = strategy.memory_knob(w) if own is not None else (
            "batch", w.batch, lambda batch: replicated.estimate(trace, batch, optimizer=optimizer).peak())
        raise DoesNotFitError(f"{exc}{_knob_hint(knob, w, budget)}") from None
    if budget.policy != "off":
        notes.append(budget.assumed())
    return peak.to_dict(budget)


def _knob_hint(knob, w, budget) -> str:
    """``; batch: 1000 per rank does not fit, valid range 1..42 ...``: the largest value of the key that sets the
    activations (``knob``: key, value, peak at a value; None: nothing to say) that fits, or that none does."""
    from simcomm.memory.fit import largest_fitting
    from simcomm.units import format_size

    if knob is None or knob[1] <= 1:
        return ""
    key, value, peak_at = knob
    most = largest_fitting(peak_at, budget, value - 1)
    strong = key == "batch" and w.scaling == "strong"  # the key is the global batch: ceil(B / R) per rank
    what = f"global {w.global_batch} ({value} per rank)" if strong else f"{value}" + (
        " per rank" if key == "batch" else "")
    if not most:
        return (f"; {key}: no value fits, not even 1 (it needs {format_size(peak_at(1).need(budget))} per GPU: "
                "the model state, not the batch)")
    valid = f"1..{most * w.n_ranks} (at most {most} per rank)" if strong else f"1..{most}" + (
        " per rank" if key == "batch" else "")
    return f"; {key}: {what} does not fit, valid range {valid}"


def ran_lines(ran: dict, runtime) -> list[str]:
    """One assumed line per (collective, algorithm asked) saying what ran, e.g. NCCL's choices."""
    out = []
    how = runtime.how  # whose rules chose, e.g. "NCCL's tuning model within NCCL_ALGO=ring"
    for (kind, asked), what in sorted(ran.items()):
        runs = ", ".join(f"{w} x{n}" if len(what) > 1 else w for w, n in sorted(what.items()))
        if asked == "auto":
            out.append(f"{kind} algorithm auto -> {runs} ({how})")
        elif runs != asked:
            out.append(f"{kind} algorithm {asked} -> {runs}")
    return out

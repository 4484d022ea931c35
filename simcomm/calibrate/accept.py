"""Decide whether a measured record may become a link file: refusals, warnings, provenance.

:func:`accept` runs after the measurement and before anything is written.

Refused (a :class:`~simcomm.calibrate.fit.CalibrationError`, one line, exit 2, no file):

* everything :mod:`~simcomm.calibrate.fit` refuses (too few sizes, non-positive α/β,
  R² below ``MIN_R2``, bandwidth-dominated points off the line);
* a fitted bandwidth above the line rate: the shaped rate under ``--emulate`` (the
  trunk's for the cross-leaf class), or the ``--line-rate`` the user stated.  Goodput
  can never beat the wire, so such a fit is a wrong measurement, whatever its R².

Warned (one ``warning:`` line each on stderr, and kept in the record's ``warnings``):

* the rounds did not settle: their fitted bandwidths spread more than the spec's limit,
  or fewer than two rounds could be fitted on their own;
* the stream probe disagrees with the ping-pong fit by more than :data:`STREAM_TOLERANCE`;
* the ping-pong sizes show a token bucket (the fit's ``burst``): said, with the rate read
  from the sizes above it; refused instead when that rate and the bulk stream disagree
  (too few sizes above the burst), naming the sizes to run;
* under ``--emulate``, the link sustains less than :data:`SHAPED_SHORTFALL` of its shaped
  goodput: the host forwards the emulated network in software and cannot keep up
  (CPU, or a token bucket smaller than the timer granularity), so the cluster is not
  the one asked for;
* the machine was loaded when the run started (1-min load average per CPU above
  :data:`LOAD_PER_CPU`);

Refused too, unless ``--allow-misfit`` (then warned): the fitted link predicts the run's
own collectives more than :data:`SELF_CHECK_LIMIT` off (median) or any one of them more
than :data:`SELF_CHECK_WORST` off, i.e. what ``--check`` would show, less the 2-rank
all-gathers (gloo's turn or not, by the ranks' posting skew: :func:`_self_check`).  The worst-case limit is there because on 2 hosts
at 1 Gb/s with 1 500-byte frames the rings ran 2x slower than the one-way cases: a median
of 9 %, but all-reduce at -55 %; such a link file would make every prediction from it wrong.
"""

from __future__ import annotations

import os

from simcomm.calibrate.fit import CalibrationError, Fit, check_line_rate

__all__ = ["accept", "shaped_goodput", "STREAM_TOLERANCE", "SHAPED_SHORTFALL", "LOAD_PER_CPU",
           "SELF_CHECK_LIMIT", "SELF_CHECK_WORST"]

#: |ping-pong fit / stream goodput - 1| above this is worth a warning (ping-pongs of 256 KB - 1 MB
#: run 1.5-4 % under a stream on the emulated cluster; twice that is no longer that effect)
STREAM_TOLERANCE = 0.08
#: an emulated link sustaining less than this share of its shaped goodput is not the link asked for
SHAPED_SHORTFALL = 0.90
#: a 1-min load average above this many runnable tasks per CPU before the run means it shared the CPUs
LOAD_PER_CPU = 0.5
#: median |error| of the self-check above which the fit does not describe this run's collectives
SELF_CHECK_LIMIT = 0.10
#: |error| of any one case above which the same holds (docs/accuracy.md: worst case 4.5 %)
SELF_CHECK_WORST = 0.25


def shaped_goodput(rate: float, mtu: int = 1500) -> float:
    """TCP goodput of a shaped Ethernet rate: ``rate × (mtu - 52) / (mtu + 14)`` (timestamps on)."""
    return rate * (mtu - 52) / (mtu + 14)


def _line_rates(rec: dict, line_rate: float | None) -> dict[str, tuple[float, str]]:
    """Per ping-pong class, the rate no fit may exceed and what it is called."""
    out = {}
    cl = rec.get("cluster") or {}
    if cl.get("rate_Bps"):
        rate = float(cl["rate_Bps"])
        trunk = float(cl.get("trunk_rate_Bps", rate))
        out["inter"] = (rate, "shaped rate")
        out["cross"] = (min(rate, trunk), "shaped rate")
    if line_rate is not None:
        for cls in ("inter", "cross"):
            out[cls] = (line_rate, "stated line rate (--line-rate)")
    return out


def _bucket_line(cls: str, f: Fit, burst: float, stream: float | None) -> str:
    """Say the token bucket the fit found; refuse when its sizes and the bulk stream disagree on the rate."""
    above = sum(1 for n in f.sizes if n > burst)
    # --sizes A..B steps x4 from 1 KB: the first such size at least 32 bursts (the estimate is low
    # when a size inside the burst bent the line), so several sizes lie well above it
    bigger = 1024
    while bigger < 32 * burst:
        bigger *= 4
    if stream and abs(f.bandwidth / stream - 1) > STREAM_TOLERANCE:
        raise CalibrationError(
            f"ping-pong {cls}: messages up to about {burst / 1024:.0f} KB pass at memory speed (a token-bucket "
            f"burst); the {above} sizes above it give {f.bandwidth / 1e6:.4g} MB/s but a bulk stream got "
            f"{stream / 1e6:.4g} MB/s, so too few sizes lie above the burst to read the shaped rate; re-run with "
            f"--sizes 1KB..{bigger >> 20}MB")
    agree = f" (a bulk stream got {stream / 1e6:.4g} MB/s)" if stream else ""
    return (f"ping-pong {cls}: a token-bucket burst of about {burst / 1024:.0f} KB: messages up to it pass at "
            f"memory speed, so the link is the sustained rate of the {above} sizes above it, "
            f"{f.bandwidth / 1e6:.4g} MB/s{agree}; a collective's first {burst / 1024:.0f} KB after an idle "
            f"gap runs faster than that")


def _next_try(warns: list[str]) -> str:
    """What to run instead of a refused self-check, from what the run's warnings found."""
    if any(w.startswith("emulated link:") for w in warns):
        return ("the emulated network could not carry its shaped rate on this machine: try --mtu 9000, a larger "
                "--burst, or a lower --rate")
    if any(w.startswith("the machine was busy") for w in warns):
        return "the machine was busy: re-run when the load average is below the CPU count"
    return "compare the cases with `simcomm calibrate --check` on the record"


def accept(rec: dict, fits: dict[str, Fit], *, line_rate: float | None = None,
           load: tuple[float, float] | None = None, allow_misfit: bool = False) -> list[str]:
    """Refuse what must not be written; return the warnings (also stored in ``rec['warnings']``).

    A fit that fails its own self-check is refused unless ``allow_misfit`` (``--allow-misfit``):
    a link file that predicts the run it came from half off would mislead every later run.
    """
    bounds = _line_rates(rec, line_rate)
    for cls, f in sorted(fits.items()):
        if cls in bounds:
            check_line_rate(f, *bounds[cls])
    warns: list[str] = []
    cl = rec.get("cluster") or {}
    for cls, f in sorted(fits.items()):
        d = rec["p2p"][cls]
        r = d.get("rounds") or {}
        bws = [b for b in r.get("bandwidths_Bps") or [] if b]
        ran = len(r.get("bandwidths_Bps") or [])
        if r and not r.get("stable") and len(bws) >= 2:
            warns.append(f"ping-pong {cls}: the fitted bandwidth did not settle in {ran} rounds: "
                         f"{min(bws) / 1e6:.4g}-{max(bws) / 1e6:.4g} MB/s, spread {r['spread']:.1%} (limit "
                         f"{r['limit']:.0%}); written is the fit of the per-size medians, "
                         f"{f.bandwidth / 1e6:.4g} MB/s; re-run on a quiet machine")
        elif r and not r.get("stable") and ran >= 2:
            warns.append(f"ping-pong {cls}: only {len(bws)} of {ran} rounds could be fitted on their own, so "
                         f"stability is unknown; written is the fit of the per-size medians, "
                         f"{f.bandwidth / 1e6:.4g} MB/s; re-run on a quiet machine")
        stream = (d.get("stream") or {}).get("goodput_Bps")
        burst = f.params.get("burst")
        if burst:
            warns.append(_bucket_line(cls, f, float(burst), stream))
        if stream and cls != "cross" and abs(f.bandwidth / stream - 1) > STREAM_TOLERANCE:
            warns.append(f"ping-pong {cls}: fitted {f.bandwidth / 1e6:.4g} MB/s but a bulk stream got "
                         f"{stream / 1e6:.4g} MB/s ({f.bandwidth / stream - 1:+.0%}); the sweep is not "
                         f"bandwidth-dominated at its largest sizes, or the machine was busy")
        if stream and cls == "inter" and cl.get("rate_Bps"):
            want = shaped_goodput(float(cl["rate_Bps"]), int(cl.get("mtu", 1500)))
            if stream < SHAPED_SHORTFALL * want:
                warns.append(f"emulated link: a bulk stream got {stream / 1e6:.4g} MB/s of the shaped "
                             f"{want / 1e6:.4g} MB/s goodput ({stream / want:.0%}); this machine cannot forward "
                             f"the emulated network at this rate (CPU, or a token bucket below the timer "
                             f"granularity): try --mtu 9000 or a larger --burst, or a lower --rate")
    if load is not None:
        cpus = os.cpu_count() or 1
        if load[0] > LOAD_PER_CPU * cpus:
            warns.append(f"the machine was busy: 1-min load average {load[0]:.2f} before the run and "
                         f"{load[1]:.2f} after, on {cpus} CPUs; timings share the CPUs with other work")
    misfit = _self_check(rec)
    if misfit and not allow_misfit:
        rec["warnings"] = warns + misfit
        raise CalibrationError(misfit[0] + "; refused (--allow-misfit writes it anyway); " + _next_try(warns))
    warns += misfit
    rec["warnings"] = warns
    return warns


def _self_check(rec: dict) -> list[str]:
    """What ``--check`` would say about this record, as a warning when it is far off.

    The 2-rank all-gathers are left out: gloo runs the pair's two directions in turn
    (``allgather/gloo``) when one rank posts after the other's notice arrived, and at once
    when both post within about a latency, which right after a benchmark's barrier is a coin
    toss per repeat (100 Mb/s, 4 MB: 181, 180, 183, 267, 189 ms; the ring 168, the turn 257;
    1 MB: 63.5 ms five times, the turn 64.4), and behind a token bucket the first rank's half
    blocks pass at memory speed so the turn costs little.  Either case is gloo's.
    """
    if not rec.get("collectives"):
        return []
    from simcomm.calibrate.check import check_record, summary

    try:
        rows = check_record(rec)
    except CalibrationError:  # e.g. a cluster above check's bounds: nothing to compare against
        return []
    rows = [r for r in rows if not (r.case == "allgather" and r.ranks == 2)]
    if not rows:
        return []
    s = summary(rows)
    rec["self_check"] = {"median_abs_error": s["median_abs_error"], "max_abs_error": s["max_abs_error"],
                         "cases": s["cases"]}
    if s["median_abs_error"] <= SELF_CHECK_LIMIT and s["max_abs_error"] <= SELF_CHECK_WORST:
        return []
    worst = max(rows, key=lambda r: abs(r.error))
    kinds = sorted({r.case for r in rows if abs(r.error) > SELF_CHECK_LIMIT})  # never empty: see above
    return [f"the fitted link predicts this run's own collectives {s['median_abs_error']:.0%} off (median; worst "
            f"{worst.error:+.0%}, {worst.case} {worst.nbytes} B; off by more than {SELF_CHECK_LIMIT:.0%}: "
            f"{', '.join(kinds)}); one α-β link does not describe this run (CPU-bound transfers or emulation, "
            f"or a network the model does not know); see `simcomm calibrate --check`"]

"""Write fitted link classes as a TOML file that ``--links`` accepts, atomically.

The format is the one :func:`simcomm.links.toml_file.load_link_file` reads::

    [links.calib-inter]
    bandwidth = "24.1135 MB/s"
    latency = "85.12 us"
    family = "ethernet"
    summary = "..."

Fit quality (R², worst relative error, the points) goes in comments, since
the loader accepts no extra keys; the full record lives in the JSON written
beside it.  Files are written to a temporary file in the same directory,
read back through the real loader, and only then renamed over the target, so
a failed or interrupted run never leaves a partial or unreadable link file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from simcomm.calibrate.fit import CalibrationError, Fit
from simcomm.fileio import write_text

__all__ = ["LinkEstimate", "render_link_toml", "write_link_file", "write_json_atomic", "atomic_write"]


@dataclass(frozen=True)
class LinkEstimate:
    """A link class ready to be written: name, fit and family."""

    name: str
    fit: Fit
    family: str = "ethernet"
    summary: str = ""


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def render_link_toml(links: list[LinkEstimate], header: str = "") -> str:
    """The TOML text for ``links`` (deterministic: same fits, same bytes)."""
    lines = ["# simcomm link classes fitted by `simcomm calibrate`."]
    lines += [f"# {h}" for h in header.splitlines() if h.strip()]
    for le in links:
        f = le.fit
        lines += ["", f"# {le.name}: {len(f.sizes)} points, R^2 = {f.r2:.6f}, "
                      f"median |rel err| = {f.median_rel_error:.2%}, worst = {f.max_rel_error:.2%}"]
        if "gamma" in f.params:
            lines.append(f"# gamma (reduction) = {f.params['gamma']:.6g} s/B")
        lines += [f"[links.{le.name}]",
                  f'bandwidth = "{f.bandwidth:.9g} B/s"',
                  f'latency = "{f.alpha * 1e6:.9g} us"',
                  f"family = {_q(le.family)}",
                  f"summary = {_q(le.summary or f'calibrated: {f.bandwidth / 1e6:.4g} MB/s, {f.alpha * 1e6:.4g} us')}"]
    return "\n".join(lines) + "\n"


def atomic_write(path: str | Path, text: str, verify=None) -> Path:
    """Write ``text`` to ``path`` via a temp file; ``verify(tmp_path)`` may raise to abort."""
    p = Path(path)
    if p.parent and not p.parent.exists():
        raise CalibrationError(f"out: directory {str(p.parent)!r} does not exist")
    return write_text(p, text, verify=verify)


def write_link_file(path: str | Path, links: list[LinkEstimate], header: str = "") -> Path:
    """Write and round-trip-check the link file; raise before touching ``path`` if it would be wrong."""
    if not links:
        raise CalibrationError("calibration produced no link class; nothing to write")
    text = render_link_toml(links, header)

    def verify(tmp: Path) -> None:
        from simcomm.links.toml_file import load_link_file

        got = load_link_file(tmp)
        for le in links:
            lc = got.get(le.name)
            if lc is None or abs(lc.bandwidth * le.fit.beta - 1) > 1e-6 or abs(lc.latency - le.fit.alpha) > 1e-12 + 1e-6 * le.fit.alpha:
                raise CalibrationError(f"link file: class {le.name!r} did not read back as written")

    return atomic_write(path, text, verify)


def write_json_atomic(path: str | Path, obj: Mapping) -> Path:
    """Deterministic JSON (sorted keys) written atomically."""
    return atomic_write(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")

"""What a host's CPU does per byte of a CPU collective (gloo, MPI on host memory), and what it costs.

A CPU collective is work for the host's cores and memory, not only for its
links.  Read from gloo's ring all-reduce (``gloo/allreduce.cc``, the algorithm
torch's ProcessGroupGloo runs for ``all_reduce``) and its TCP pairs
(``gloo/transport/tcp/pair.cc``):

* **Reduction.**  Each chunk is split into segments, two in flight; for every
  segment received in the reduce-scatter the calling thread runs
  ``opts.reduce(out, out, tmp, n)`` (``gloo/math.h`` ``sum``: ``c[i] = a[i] + b[i]``,
  two reads and one write per element) before it posts the next receive.  A
  rank of ``p`` reduces ``(p - 1)/p · n`` bytes of an ``n``-byte all-reduce, at
  the rate one thread adds two buffers on that host (``reduce_rate``, bytes of
  output per second).  The all-gather half reduces nothing.  With one tensor
  (torch's case) there is no local reduction of inputs and no final copy:
  ``in`` is empty and ``out`` has one buffer, so ``reduceInputs`` does nothing.
* **Copies.**  Every byte a pair sends is written into the kernel's socket
  buffer by the sender (``write``/``writev`` in ``Pair::write``) and read out by
  the receiver (``Pair::read``): one memory copy per byte at each end.  Between
  two hosts that copy runs far faster than the NIC (GB/s against 0.1-3 GB/s),
  so the link sets the pace.  On the TCP loopback (two ranks of one host) both
  copies run on the same host, so the "link" is two copies per byte:
  ``copy_rate / 2``.

A CPU stack therefore prices a collective's reduction at the host's rate, not
the device's: simcomm gives every rank ``γ = 1 / reduce_rate`` seconds per
byte reduced (:func:`host_gamma`), which the engine charges at the receiver of
every reducing transfer (docs/engine.md), and a same-host TCP link
``copy_rate / 2`` (:func:`loopback_rate`).  Both rates are measured by
``simcomm calibrate`` with every rank of a host probing at once (the ``host``
entry of the record; :func:`simcomm.calibrate.bench.run_benchmarks`), so ranks
sharing a host's cores and memory are already in the numbers.  The engine adds
the reduction to the transfer (a step ends when its data has arrived and been
reduced), which overstates a pipelined ring by at most the smaller of the two
where the wire and the reduction overlap (two segments in flight): a bound,
and exact where either dominates.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from simcomm.errors import ConfigError

__all__ = ["HostRates", "host_gamma", "loopback_rate", "reduced_bytes", "recorded_host", "GLOO_REFERENCE"]

GLOO_REFERENCE = ("facebookincubator/gloo gloo/allreduce.cc (ring: opts.reduce per reduce-scatter segment), "
                  "gloo/math.h (sum), gloo/transport/tcp/pair.cc (write/read: one copy per byte at each end)")


@dataclass(frozen=True)
class HostRates:
    """A host's CPU throughput for collectives: bytes/s one rank reduces and copies, every rank busy at once."""

    reduce_rate: float
    copy_rate: float
    source: str = "given"

    def __post_init__(self) -> None:
        for field in ("reduce_rate", "copy_rate"):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
                raise ConfigError(f"host {field.replace('_', ' ')} {v!r} must be a positive bandwidth (bytes/s)")

    @classmethod
    def from_record(cls, rec: dict, source: str = "calibration record") -> HostRates | None:
        """The ``host`` entry of a ``simcomm calibrate`` record (None when the record has none)."""
        host = rec.get("host") if isinstance(rec, dict) else None
        if not isinstance(host, dict):
            return None
        try:
            return cls(float(host["reduce_Bps"]), float(host["copy_Bps"]), source)
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"{source}: host needs reduce_Bps and copy_Bps as positive numbers") from None

    def line(self) -> str:
        """One ``assumed:``-style line saying what the host's collectives cost and where it comes from."""
        return (f"CPU collectives reduce at {self.reduce_rate / 1e9:.3g} GB/s and copy at {self.copy_rate / 1e9:.3g} "
                f"GB/s per rank ({self.source}; gloo's ring reduces (p-1)/p of the buffer, gloo/allreduce.cc)")


def host_gamma(rates: HostRates) -> float:
    """Seconds per byte reduced by one rank of a CPU collective: one thread's ``sum`` at ``reduce_rate``."""
    return 1.0 / rates.reduce_rate


def loopback_rate(rates: HostRates) -> float:
    """Bytes/s of a same-host TCP transfer: the sender's and the receiver's copy both run on this host."""
    return rates.copy_rate / 2.0


def reduced_bytes(p: int, nbytes: float) -> float:
    """Bytes one rank reduces in gloo's ring all-reduce of ``nbytes`` over ``p`` ranks: ``(p - 1)/p · n``."""
    if p < 1 or not (math.isfinite(nbytes) and nbytes >= 0):
        raise ConfigError(f"reduced bytes: ranks {p!r} must be >= 1 and bytes {nbytes!r} >= 0")
    return (p - 1) / p * nbytes


def recorded_host(links_path: str | Path) -> HostRates | None:
    """The host probe of the ``simcomm calibrate`` record written beside a link file (None: no record or probe).

    ``simcomm calibrate --out links.toml`` writes ``links.json`` beside it; a
    record that cannot be read or holds a malformed ``host`` is one ConfigError line.
    """
    rec_path = Path(links_path).with_suffix(".json")
    if not rec_path.is_file():
        return None
    where = f"calibration record {str(rec_path)!r}"
    try:
        if rec_path.stat().st_size > 64 << 20:
            raise ConfigError(f"{where}: larger than 64 MiB")
        rec = json.loads(rec_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{where}: cannot be read as JSON ({str(exc).splitlines()[0][:120]})") from None
    return HostRates.from_record(rec, where)

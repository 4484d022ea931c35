"""LogGP (Alexandrov, Ionescu, Schauser & Scheiman, SPAA 1995), priced over a step schedule.

Parameters of one link class with latency α and bandwidth 1/β, given a
per-message CPU overhead ``o`` (default ``α/4``, an assumption):

* ``G = β``            gap per byte (long messages);
* ``L = max(α - 2o, 0)`` wire latency, so one small message costs
  ``L + 2o = α`` exactly as in Hockney whenever ``α ≥ 2o``;
* ``g = o``            gap between consecutive messages of one rank (g ≥ o).

A step of the algorithm's schedule (:meth:`Algorithm.steps`) in which rank s
sends ``k_s`` messages ends when its last message arrives; a message of m
bytes from s arrives after ``(k_s - 1)·g + L + 2o + (m - 1)·G`` (every
message of s is charged its last message's injection delay, an upper bound).
Receivers then reduce at γ s/byte, as in the engine.  With ``ppn`` ranks per
node, transfers inside a node use the intranode link's parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simcomm.collectives.base import CostTerms
from simcomm.cost_models.base import COST_MODELS, CostModel
from simcomm.errors import ConfigError


@dataclass(frozen=True)
class LogGPParams:
    L: float
    o: float
    g: float
    G: float

    @classmethod
    def of(cls, link, overhead: float | None) -> LogGPParams:
        alpha, beta = float(link.latency), 1.0 / float(link.bandwidth)
        o = alpha / 4 if overhead is None else float(overhead)
        if not o >= 0:
            raise ConfigError(f"overhead: {overhead} must be non-negative (seconds)")
        return cls(max(alpha - 2 * o, 0.0), o, o, beta)


class LogGP(CostModel):
    name = "loggp"
    summary = "LogGP (L, o, g, G) over the algorithm's step schedule; o defaults to α/4"
    reference = "Alexandrov, Ionescu, Schauser & Scheiman, SPAA 1995"

    def __init__(self, overhead: float | None = None):
        self.overhead = overhead

    def with_overhead(self, overhead: float | None) -> LogGP:
        return LogGP(overhead)

    def params(self, link) -> LogGPParams:
        return LogGPParams.of(link, self.overhead)

    def price(self, alg, p, nbytes, link, *, gamma=0.0, ppn=1, intra=None):
        self._validate(gamma, ppn)
        e = self.params(link)
        i = self.params(intra) if intra is not None else e
        lat = bw = red = 0.0
        for s in alg.steps(p, nbytes, ppn=ppn):
            if len(s) == 0:
                continue
            same = (s.src // ppn) == (s.dst // ppn)
            pick = lambda attr, same=same: np.where(same, getattr(i, attr), getattr(e, attr))  # noqa: E731
            k = np.bincount(s.src, minlength=p)[s.src]
            t_lat = (k - 1) * pick("g") + pick("L") + 2 * pick("o")
            t_bw = np.maximum(s.nbytes - 1.0, 0.0) * pick("G")
            fin = t_lat + t_bw
            c = int(np.argmax(fin))
            step = (float(t_lat[c]), float(t_bw[c]), 0.0)
            if gamma and s.reduce.any():
                arrive = np.zeros(p)
                np.maximum.at(arrive, s.dst, fin)
                load = np.bincount(s.dst, weights=s.reduce, minlength=p)
                cand = np.where(load > 0, arrive + gamma * load, -np.inf)
                r = int(np.argmax(cand))
                if cand[r] > fin[c]:
                    t = int(np.flatnonzero((s.dst == r) & (fin == arrive[r]))[0])
                    step = (float(t_lat[t]), float(t_bw[t]), gamma * float(load[r]))
            lat += step[0] * s.repeat
            bw += step[1] * s.repeat
            red += step[2] * s.repeat
        return CostTerms(lat, bw, red)


LOGGP = LogGP()
COST_MODELS.add(LOGGP.name, LOGGP, summary=LOGGP.summary, reference=LOGGP.reference)

"""gloo's broadcast: a binomial tree in which a rank posts all its sends at once.

gloo (``gloo/broadcast.cc``, what torch's ProcessGroupGloo runs on CPU
tensors) numbers ranks relative to the root and uses the binomial tree of
:mod:`broadcast_binomial`, but a rank does not send to its children one
round at a time: as soon as it holds the buffer it posts the sends to *all*
its children and waits for them together.  So the root feeds its ⌈lg p⌉
children concurrently through one NIC, and relative rank ``v`` receives in
"wave" ``popcount(v)`` (its parent is ``v`` without its highest set bit).

Step d holds every transfer into a rank with ``popcount(v) = d``; a sender
is then always a rank that received in step d-1.  On a switch the concurrent
sends of one rank share its link, which the flow engine prices; the closed
form (every transfer on its own link) is one ``α + n·β`` per wave::

    T = D·(α + n·β),  D = max popcount(v) over 0 <= v < p

(``D = lg p`` for a power of two; for p = 4, D = 2 like the binomial tree,
but the root's two sends now share its link).

Open MPI's binomial broadcast (``build_bmtree``: a rank's parent clears its
highest set bit; ``bcast_intra_generic`` isends to all children at once) is
the same schedule, so ``rules="openmpi"`` prices it with this module.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives.base import Algorithm, CostTerms, Step, register


def max_popcount_below(p: int) -> int:
    """Largest number of set bits of any integer in ``[0, p)``."""
    k = (p - 1).bit_length()  # p-1 < 2^k
    # 2^k - 1 has k bits set and is < p exactly when p = 2^k; otherwise 2^(k-1) - 1 plus the top bit
    return k if p == 1 << k else max(k - 1, bin(p - 1).count("1"))


def _popcount(v: np.ndarray) -> np.ndarray:
    return np.array([bin(int(x)).count("1") for x in v], dtype=np.int64)


@register
class GlooBroadcast(Algorithm):
    collective = "broadcast"
    name = "gloo"
    summary = "gloo's binomial tree: each rank sends to all its children at once (popcount waves)"
    reference = "gloo/broadcast.cc (facebookincubator/gloo, as vendored in torch 2.x)"
    rooted = True

    def _steps(self, p, n, ppn):
        v = np.arange(1, p, dtype=np.int64)
        top = np.array([1 << (int(x).bit_length() - 1) for x in v], dtype=np.int64)
        parent, wave = v - top, _popcount(v)
        return [Step.make(parent[wave == d], v[wave == d], n) for d in range(1, int(wave.max()) + 1)]

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        d = max_popcount_below(p)
        return CostTerms(d * a, d * n * b, 0.0)

"""gloo's ring all-gather: half-block messages posted send-first, two in flight.

gloo (``gloo/allgather.cc``, what torch's ProcessGroupGloo runs for
``all_gather`` on CPU tensors) splits each rank's block of ``n/p`` into two
halves and runs ``2(p-1)`` iterations, each posting ``send`` to the right
*before* ``recv`` from the left, with two operations in flight.  For ``p > 2``
the right and left neighbours are different pairs, and this is the ring of
:mod:`allgather_ring` (one block per step to the right, the halves pipelined).

For ``p = 2`` the right and left neighbour are the same rank, and gloo's TCP
pair (``gloo/transport/tcp/pair.cc``) sends a message only after the peer's
"recv ready" notice, which the peer posts *after* its own send and which then
travels behind that send on the pair's one connection (see
:mod:`simcomm.runtimes.transport`).  The rank that posts second finds both
notices waiting and sends its two halves at once; each half of the other rank
waits for the notice behind the matching half: three half-block steps instead
of two at once::

    p = 2:  T = 3·(α + n/4·β)          (the ring's α + n/2·β, 1.5× its bytes term)
    p > 2:  T = (p-1)·α + (p-1)/p·n·β  (the ring)

Measured on the emulated gloo cluster: the ring's prediction of the 2-rank all-gather
was 33–35 % short at every rate (measured 1.49–1.54× the ring; docs/calibration.md).
"""

from __future__ import annotations

from simcomm.collectives._patterns import ring
from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class GlooAllgather(Algorithm):
    collective = "allgather"
    name = "gloo"
    summary = "gloo's ring: half blocks posted send-first; on 2 ranks the pair runs the two directions in turn"
    reference = "gloo/allgather.cc (send before recv, two in flight); gloo/transport/tcp/pair.cc (recv-ready notice)"

    def _steps(self, p, n, ppn):
        if p != 2:
            return ring(p, n / p, False, p - 1)
        half = n / 4  # half of one rank's block of n/2
        return [Step.make([1], [0], half), Step.make([1, 0], [0, 1], half), Step.make([0], [1], half)]

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        if p != 2:
            return CostTerms((p - 1) * a, (p - 1) / p * n * b, 0.0)
        return CostTerms(3 * a, 3 * n / 4 * b, 0.0)

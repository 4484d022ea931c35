"""The direct loop's message rounds: what a round of messages costs, kept to array work where it can be exact.

A gossip plan starts its messages in rounds: one done event (crossover-sgd's averaging of a segment, folded
into rank 0's) releases 16 384 streams at 16 384 GPUs, each at a message whose other dependencies are done.
The direct loop (:func:`simcomm.engine.drive.executor._run_direct`) then starts them as one round: the same
messages in the same order as one stream at a time would start them (the order of the waiting list), handed
to the fluid core in one call (:meth:`simcomm.engine.fluid.core.FluidCore.add_messages`: the same batches,
consecutive ids), with one kick; the completions one settle returns are one queue entry, their sequence numbers
reserved in order and handled in that order (handed back to the queue's front when an event pushed meanwhile is
due first).  The bytes each message adds to its route's link families are not added one
by one in Python floats: :class:`FamilyBytes` logs them and adds them at the next cut collective and at the end
of the run, per family with ``np.add.accumulate`` over ``[total, x_1, x_2, ...]``, a sum in the order given,
so every family's total is the float the adds one by one make (a family a route does not cross adds
``n x 0.0``, which changes no float).  The ``rounds`` reference (``EngineOptions.reference``) turns both off;
``Timeline.paths["taken"]["message_rounds"]`` counts the rounds started at once.  The one pass prices its
messages at once under the same switch (:meth:`simcomm.engine.flow.analytic.AnalyticPricer.message_seconds`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["FamilyBytes"]


class FamilyBytes:
    """Bytes per link family of the messages started, in start order, added to the totals on :meth:`flush`."""

    __slots__ = ("fams", "nbytes", "n_fam")

    def __init__(self, n_fam: int):
        self.n_fam = n_fam
        self.fams: list = []  # per message: its route's [(family, links of it)] (message_routes' shared lists)
        self.nbytes: list = []  # per message: the bytes it counts

    def flush(self, totals: list) -> None:
        """Add the logged bytes to ``totals`` (Python floats, one per family) in log order, and forget them."""
        fams, nbytes = self.fams, self.nbytes
        if not fams:
            return
        # one row of link counts per distinct list (a fabric has a few patterns, shared by their routes)
        which: dict[int, int] = {}
        rows: list = []
        at = []
        for fam in fams:
            k = which.get(id(fam))
            if k is None:
                k = which[id(fam)] = len(rows)
                rows.append(fam)
            at.append(k)
        table = np.zeros((len(rows), self.n_fam))
        for k, fam in enumerate(rows):
            for f, x in fam:
                table[k, f] = x
        # (counted * x per message and family: the product the one-by-one adds make)
        added = np.asarray(nbytes, dtype=float)[:, None] * table[np.asarray(at, dtype=np.intp)]
        for f in range(self.n_fam):
            totals[f] = float(np.add.accumulate(np.concatenate(([totals[f]], added[:, f])))[-1])
        fams.clear()
        nbytes.clear()

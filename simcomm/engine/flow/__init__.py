"""How transfers and collectives are priced: steps as flows on the live network, or closed forms.

:mod:`~simcomm.engine.flow.pricer` runs a collective's steps as batches of flows (coalesced
repeats, per-link or whole-network reservations, scaled steps); :mod:`~simcomm.engine.flow.network`
is the live network those flows share, driven by SimPy; :mod:`~simcomm.engine.flow.analytic` is
the analytic fidelity's closed forms.  Below this layer: the fluid core (:mod:`simcomm.engine.fluid`).
"""

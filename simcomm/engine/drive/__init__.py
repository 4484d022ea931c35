"""How a plan's ops are run through time: the executor and its drivers.

:mod:`~simcomm.engine.drive.executor` runs every (rank, stream) in op order on the driver
:func:`simcomm.engine.paths.choose` picked (the analytic one pass, the direct loop, callbacks
or SimPy processes), with the engine's events (:mod:`simcomm.engine.events`, the one module
that touches SimPy's private state).  Below this layer: how ops are priced (:mod:`simcomm.engine.flow`).
"""

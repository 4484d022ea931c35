"""The fluid core: flows on directed links at their max-min fair rates, free of any event library.

:mod:`~simcomm.engine.fluid.core` keeps the flows in numpy arrays and runs isolated batches;
:mod:`~simcomm.engine.fluid.small` and :mod:`~simcomm.engine.fluid.lone` are its scalar and lean
forms for few flows (the same floats); :mod:`~simcomm.engine.fluid.maxmin` is the one max-min
algorithm (vectorised, scalar, the lean closed form, the textbook reference) and the one
incremental re-solve around it (:class:`~simcomm.engine.fluid.maxmin.IncrementalSolve`, whose
kernels each form gives);
:mod:`~simcomm.engine.fluid.prune` drops links that cannot bind a flow's rate.
"""

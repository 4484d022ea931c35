"""What-if sweeps: a flat parameter vocabulary, a point function, result tables and a summary.

``simcomm whatif`` sweeps a grid (:mod:`simcomm.sweep`) of points through
:func:`simcomm.whatif.point.evaluate`, writes ``results.csv``/``results.json``
(:mod:`simcomm.whatif.results`) and a report whose plain-language findings
come from :mod:`simcomm.whatif.summary`.
"""

from simcomm.whatif.params import PARAMS, check_point, known_params, to_scenario
from simcomm.whatif.point import evaluate

__all__ = ["PARAMS", "check_point", "evaluate", "known_params", "to_scenario"]

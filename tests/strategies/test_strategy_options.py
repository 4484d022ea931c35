"""Strategy options given as text are converted by their real (resolved) types, never by annotation text."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from simcomm.errors import ConfigError
from simcomm.strategies.base import Strategy, make_params


class _Fake(Strategy):
    name = "fake"

    @dataclass(frozen=True)
    class Params:
        ratio: float = 1          # an int default must not make "1.5" an int
        cap: float | None = None  # optional
        flag: bool = False
        count: int = 2
        mode: str = "a"


def test_text_options_take_their_annotated_types():
    p = make_params(_Fake, {"ratio": "1.5", "cap": "0.25", "flag": "yes", "count": "3", "mode": "b"})
    assert (p.ratio, p.cap, p.flag, p.count, p.mode) == (1.5, 0.25, True, 3, "b")
    assert make_params(_Fake, {"ratio": 2.0}).ratio == 2.0  # typed values (TOML) pass through


@pytest.mark.parametrize("opts, message", [
    ({"count": "3.5"}, "option count: cannot read '3.5' as int"),
    ({"flag": "maybe"}, "option flag: cannot read 'maybe' as bool"),
    ({"ratio": "inf"}, "option ratio: inf must be a finite number"),
    ({"cap": "nan"}, "option cap: nan must be a finite number"),
    ({"nope": "1"}, "option 'nope' does not belong to strategy 'fake'; valid options: ratio, cap, flag, count, mode"),
])
def test_bad_option_text_is_one_line(opts, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_params(_Fake, opts)

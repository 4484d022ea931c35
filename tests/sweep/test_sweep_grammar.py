"""The --vary grammar: exact expansions, clear errors, and fuzzing."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError
from simcomm.sweep.grammar import Grid, parse_values, parse_vary


@pytest.mark.parametrize(("text", "expected"), [
    ("4..64x2", (4, 8, 16, 32, 64)),
    ("4..16+4", (4, 8, 12, 16)),
    ("1..4", (1, 2, 3, 4)),
    ("ib-edr,ib-hdr,eth-25g", ("ib-edr", "ib-hdr", "eth-25g")),
    ("0.01,0.1,1", (0.01, 0.1, 1)),
    ("3", (3,)),
    ("0.5..2x2", (0.5, 1.0, 2.0)),
    ("5..50x2", (5, 10, 20, 40)),
])
def test_values_expand_exactly(text, expected):
    assert parse_values("k", text) == expected


def test_grid_is_cartesian_in_given_order():
    g = parse_vary(["inter=ib-edr,eth-25g", "nodes=4..8x2"])
    assert g.keys == ("inter", "nodes") and len(g) == 4
    assert list(g.points()) == [{"inter": "ib-edr", "nodes": 4}, {"inter": "ib-edr", "nodes": 8},
                                {"inter": "eth-25g", "nodes": 4}, {"inter": "eth-25g", "nodes": 8}]


@pytest.mark.parametrize(("specs", "match"), [
    (["nodes"], "expected KEY=VALUES"),
    (["nodes="], "no values"),
    (["nodes=64..4"], "backwards"),
    (["nodes=4..64x1"], "factor must be > 1"),
    (["nodes=4..a"], "not a number|cannot parse"),
    (["nodes=1,,2"], "empty item"),
    (["nodes=1", "nodes=2"], "given twice"),
    (["colour=red"], "unknown parameter 'colour'; valid choices: inter, nodes"),
])
def test_bad_grammar_is_one_line(specs, match):
    with pytest.raises(ConfigError, match=match) as info:
        parse_vary(specs, known={"nodes": "", "inter": ""})
    assert "\n" not in str(info.value)


def test_empty_grid_is_an_error():
    with pytest.raises(ConfigError, match="empty"):
        Grid(()).check_nonempty()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_grammar_fuzz_only_config_errors(text):
    try:
        g = parse_vary([text])
    except ConfigError as exc:
        assert "\n" not in str(exc)
    else:
        assert len(g) >= 1

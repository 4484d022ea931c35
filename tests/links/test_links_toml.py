"""User link files: round trip, one-line errors, and a fuzzed loader."""

import contextlib
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError
from simcomm.links import load_link_file


def _write(tmp_path, text, name="links.toml"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_load_valid_file(tmp_path):
    p = _write(tmp_path, '[links.my-ib]\nbandwidth = "90Gb/s"\nlatency = "1.5us"\nfamily = "infiniband"\n'
                         '[links.slow]\nbandwidth = 1000\nlatency = 0\n')
    got = load_link_file(p)
    assert sorted(got) == ["my-ib", "slow"]
    assert got["my-ib"].bandwidth == 11.25e9 and got["my-ib"].latency == 1.5e-6
    assert got["my-ib"].family == "infiniband"
    assert got["slow"].bandwidth == 1000.0 and got["slow"].family == "custom"


@pytest.mark.parametrize("text,match", [
    ("[links.a\nbandwidth=1", "malformed TOML"),
    ("[other]\nx = 1\n", "missing \\[links\\] table"),
    ('[links.a]\nlatency = "1us"\n', "missing key 'bandwidth'"),
    ('[links.a]\nbandwidth = "1Gb/s"\n', "missing key 'latency'"),
    ('[links.a]\nbandwidth = "fast"\nlatency = "1us"\n', "bandwidth: cannot parse 'fast'"),
    ('[links.a]\nbandwidth = "-1Gb/s"\nlatency = "1us"\n', "must be positive"),
    ('[links.a]\nbandwidth = 0\nlatency = "1us"\n', "must be positive"),
    ('[links.a]\nbandwidth = "1Gb/s"\nlatency = "-1us"\n', "must be non-negative"),
    ('[links.a]\nbandwidth = "1Gb/s"\nlatency = "1us"\ncolor = 1\n', "unknown key 'color'"),
    ('[links.a]\nbandwidth = "1Gb/s"\nlatency = "1us"\nfamily = "warp"\n', "family 'warp'"),
    ('[links.ib-edr]\nbandwidth = "1Gb/s"\nlatency = "1us"\n', "redefines a preset"),
    ('links = 3\n', "must be a table"),
])
def test_bad_files_raise_one_line(tmp_path, text, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_link_file(_write(tmp_path, text))
    assert "\n" not in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_link_file(tmp_path / "nope.toml")


_values = st.one_of(st.integers(-10, 10**12), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(string.printable, max_size=12), st.booleans(),
                    st.sampled_from(["10Gb/s", "1.5us", "0", "1e400", "nan", "3 GBps", "-0"]))
_specs = st.dictionaries(st.sampled_from(["bandwidth", "latency", "family", "summary", "x"]), _values, max_size=5)


def _toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(v), repr(v))
    if isinstance(v, int):
        return str(v)
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")\
        .replace("\t", "\\t").replace("\x0b", "\\u000b").replace("\x0c", "\\f") + '"'


@settings(max_examples=150, deadline=None)
@given(specs=st.dictionaries(st.text("abc-_.", max_size=4), _specs, max_size=3))
def test_fuzz_structured(tmp_path_factory, specs):
    text = "".join(f'[links."{n}"]\n' + "".join(f"{k} = {_toml_value(v)}\n" for k, v in s.items())
                   for n, s in specs.items())
    p = tmp_path_factory.mktemp("f") / "l.toml"
    p.write_text(text, encoding="utf-8")
    try:
        got = load_link_file(p)
    except ConfigError as exc:
        assert "\n" not in str(exc).strip() or "malformed TOML" in str(exc)
    else:
        for lc in got.values():
            assert lc.bandwidth > 0 and lc.latency >= 0


@settings(max_examples=150, deadline=None)
@given(raw=st.binary(max_size=80))
def test_fuzz_raw_bytes(tmp_path_factory, raw):
    p = tmp_path_factory.mktemp("r") / "l.toml"
    p.write_bytes(b"[links.a]\n" + raw)
    with contextlib.suppress(ConfigError):
        load_link_file(p)

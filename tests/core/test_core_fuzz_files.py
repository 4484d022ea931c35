"""Property tests: the topology-file and scenario loaders only ever fail with a one-line ConfigError."""

import string
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError
from simcomm.scenario import load_scenario
from simcomm.topologies.custom import load_topology_file

KEYS = st.sampled_from(["kind", "link", "ranks", "nodes", "edges", "a", "b", "links", "bandwidth", "latency",
                        "family", "machine", "gamma", "rank", "name", "strategy", "cluster", "options", "workload",
                        "stack", "batch", "seed", "fidelity", "dataload_s", "scaling", "efficiency"])
SCALARS = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False, width=32),
                    st.text(string.ascii_letters + string.digits + "-./ ", max_size=12), st.booleans(),
                    st.sampled_from(["rank", "switch", "nic", "ib-edr", "100Gb/s", "1us", "r0", "r1", "sw"]))


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


TABLES = st.dictionaries(KEYS, st.one_of(SCALARS, st.lists(SCALARS, max_size=4)), max_size=6)
DOCS = st.tuples(TABLES, st.lists(st.tuples(st.sampled_from(["nodes.r0", "nodes.sw", "links.x", "options",
                                                             "workload", "stack", "edges"]), TABLES), max_size=3))


def _render(doc) -> str:
    top, sections = doc
    out = [f"{k} = {_toml_value(v)}" for k, v in top.items()]
    for name, table in sections:
        out.append(f"[{name}]" if name != "edges" else "[[edges]]")
        out += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(out) + "\n"


def _only_config_errors(load, path: Path) -> None:
    try:
        load(path)
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=DOCS)
def test_topology_toml_fuzz(tmp_path, doc):
    p = tmp_path / "t.toml"
    p.write_text(_render(doc))
    _only_config_errors(load_topology_file, p)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=DOCS)
def test_scenario_toml_fuzz(tmp_path, doc):
    p = tmp_path / "s.toml"
    p.write_text(_render(doc))
    _only_config_errors(load_scenario, p)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".toml", ".graphml"]))
def test_raw_bytes_fuzz(tmp_path, data, suffix):
    p = tmp_path / f"x{suffix}"
    p.write_bytes(data)
    _only_config_errors(load_topology_file, p)
    if suffix == ".toml":
        _only_config_errors(load_scenario, p)

"""``simcomm calibrate --check`` on malformed records: one ``error:`` line naming the field, exit 2.

Regression cases from issue 15 (each was a traceback, a hang or a memory blow-up before the
record was validated), plus a hypothesis fuzz test over mutated records.
"""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcomm.cli.app import main

SIZES = [1024, 65536, 1048576, 4194304]


def good_record() -> dict:
    """A small valid record: 4 emulated hosts, α = 100 us, 1 MB/s, two collective cases."""
    return {"version": 1, "backend": "gloo", "world": 4, "nodes": ["h0", "h1", "h2", "h3"],
            "cluster": {"hosts": 4, "topology": "star", "leaves": 1, "rate_Bps": 1.2e6,
                        "trunk_rate_Bps": 1.2e6, "mtu": 1500},
            "p2p": {"inter": {"sizes": list(SIZES), "times": [1e-4 + n / 1e6 for n in SIZES]}},
            "collectives": [{"kind": "allreduce", "ranks": 4, "nbytes": 4000000, "time": 6.6},
                            {"kind": "ps_pull", "ranks": 4, "nbytes": 1000000, "time": 3.0001}]}


def run_check(tmp_path, capsys, rec) -> tuple[int, str, str]:
    path = tmp_path / "rec.json"
    path.write_text(rec if isinstance(rec, str) else json.dumps(rec))
    code = main(["calibrate", "--check", str(path), "--json"])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_good_record_checks(tmp_path, capsys):
    code, out, err = run_check(tmp_path, capsys, good_record())
    assert (code, err) == (0, "")
    assert json.loads(out)["summary"]["cases"] == 2


@pytest.mark.parametrize("mutate, field", [
    # the example: an empty inter class used to be KeyError: 'sizes'
    (lambda r: r.update(collectives=[], p2p={"inter": {}}), "field p2p.inter.sizes: must be a list"),
    (lambda r: r["p2p"]["inter"]["times"].__setitem__(2, 0), "field p2p.inter.times[2]: 0 is not a finite number > 0"),
    (lambda r: r["cluster"].update(rate_Bps=0), "field cluster.rate_Bps: 0 is not a finite number > 0"),
    (lambda r: r["collectives"][0].update(time=0.0), "field collectives[0].time: 0.0 is not a finite number > 0"),
    (lambda r: r["collectives"][1].update(ranks=9), "field collectives[1].ranks: 9 is not an integer from 2 to 4"),
    (lambda r: r["collectives"][1].update(kind="alltoall"), "field collectives[1].kind: 'alltoall' is not one of"),
    (lambda r: r.update(world="4"), "field world: '4' is not an integer from 2 to 1024"),
    (lambda r: r["p2p"]["inter"].update(times=[1e-4]), "field p2p.inter.times: has 1 entries for 4 sizes"),
    (lambda r: r.update(nodes=["h0", "h1", "h2", "h999999999"]),
     "field nodes[3]: host 'h999999999' is outside the cluster's 4 hosts"),
    (lambda r: r["cluster"].update(hosts=2314651), "field cluster.hosts: 2314651 is not an integer from 1 to 1024"),
    (lambda r: r.update(world=2314651), "field world: 2314651 is not an integer from 2 to 1024"),
    (lambda r: r["cluster"].update(topology="torus"), "field cluster.topology: 'torus' is not one of star, two-tier"),
    (lambda r: r["p2p"].update(weird={}), "field p2p.weird: is not one of intra, inter, cross"),
    (lambda r: r["collectives"].__setitem__(0, 7), "field collectives[0]: must be an object"),
])
def test_a_malformed_record_is_one_line_naming_the_field(tmp_path, capsys, mutate, field):
    rec = good_record()
    mutate(rec)
    code, out, err = run_check(tmp_path, capsys, rec)
    assert code == 2 and out == ""
    assert err.startswith("error: check: ") and err.count("\n") == 1
    assert field in err


def test_a_record_whose_fit_is_garbage_is_refused(tmp_path, capsys):
    rec = good_record()
    rec["p2p"]["inter"]["times"] = [1e-4, 3e-3, 1e-3, 0.2]  # 1 MB in 1 ms but 4 MB in 200 ms
    code, _, err = run_check(tmp_path, capsys, rec)
    assert code == 2 and err.count("\n") == 1 and "ping-pong inter" in err


# ---- fuzzing: every mutation of a good record is checked or refused in one line -------------

_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**12), st.just(2314651),
                  st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
                  st.just("h999999999"), st.just([]), st.just({}), st.just(0), st.just(0.0))


def _paths(obj, prefix=()):
    """Every (path to a container, key) in a JSON object."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield prefix, k
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield prefix, i
            yield from _paths(v, prefix + (i,))


def _apply(rec, path, key, how, value):
    node = rec
    for p in path:
        node = node[p]
    if how == "delete":
        del node[key]
    elif how == "set":
        node[key] = value
    elif how == "wrap":  # a scalar where a container was, or the other way round
        node[key] = [node[key]]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_check_never_tracebacks_on_a_mutated_record(tmp_path, capsys, data):
    rec = good_record()
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        paths = list(_paths(rec))
        if not paths:
            break
        path, key = data.draw(st.sampled_from(paths), label="where")
        how = data.draw(st.sampled_from(["delete", "set", "set", "wrap"]), label="how")
        _apply(rec, path, key, how, data.draw(_leaf, label="value"))
    text = json.dumps(rec)  # NaN/Infinity are written as JSON extensions, which json.loads reads back
    code, out, err = run_check(tmp_path, capsys, text)
    if code == 0:
        assert err == "" and json.loads(out)["summary"]["cases"] >= 1
    else:
        assert code == 2 and out == ""
        assert err.startswith("error: ") and err.count("\n") == 1, err

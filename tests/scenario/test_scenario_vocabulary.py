"""One scenario vocabulary: a TOML file, run flags and a what-if point are the same scenario."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError
from simcomm.scenario import KEY, KEYS, Scenario, from_flat, load_scenario, to_flat

# Each scenario exercises a different part of the vocabulary: network overrides, times with
# units, NCCL stack keys, straggler knobs, strategy options.
SCENARIOS = [
    {"strategy": "sgp", "nodes": 4, "cluster": "deep-est-esb", "inter": "ib-hdr", "dataload": "5ms", "batch": 16},
    {"strategy": "allreduce", "nodes": 2, "cluster": "dgx-a100-hdr", "nccl_algo": "ring", "bucket_mb": 0,
     "overlap": "none"},
    {"strategy": "node-based", "nodes": 4, "cluster": "deep-est-esb", "k_prime": 5, "straggler_scale": 1.5,
     "straggler_node": 1, "stack_overhead": "20us"},
    {"strategy": "allreduce", "nodes": 8, "cluster": "deep-est-esb", "oversubscription": 2.0, "batch": 32,
     "stack_cpu": "2ns", "resolution": 0},
]


def _toml_value(v) -> str:
    return json.dumps(v) if not isinstance(v, bool) else str(v).lower()


def _flag_args(point: dict) -> list[str]:
    out = []
    for k, v in point.items():
        if k in KEY:
            out += [KEY[k].flag, str(v)]
        else:
            out += ["--opt", f"{k}={v}"]
    return out


@pytest.mark.parametrize("point", SCENARIOS, ids=lambda p: p["strategy"])
def test_toml_flags_and_whatif_point_give_identical_results(tmp_path, cli, point):
    from simcomm.whatif.point import evaluate

    f = tmp_path / "s.toml"
    f.write_text("".join(f"{k} = {_toml_value(v)}\n" for k, v in point.items()))
    rc, from_file, err = cli("run", str(f), "--json")
    assert rc == 0, err
    rc, from_flags, err = cli("run", *_flag_args(point), "--json")
    assert rc == 0, err
    assert from_file == from_flags  # byte-identical
    res = json.loads(from_file)
    row = evaluate(dict(point))
    assert row["status"] == "ok"
    assert row["iteration_s"] == res["mean_s"] and row["speedup"] == res["speedup"]
    assert row["assumed"] == res["assumed"]
    assert row.get("rank_mean_s") == res.get("rank_mean_s")


def test_sections_and_flat_keys_are_one_scenario(tmp_path):
    flat = tmp_path / "flat.toml"
    flat.write_text('strategy = "sgp"\ninter = "ib-hdr"\ndataload = "20ms"\nstack = "nccl"\nstack_cpu = "2ns"\n'
                    'interval = 3\n')
    sections = tmp_path / "sections.toml"
    sections.write_text('strategy = "sgp"\n[network]\ninter = "ib-hdr"\n[workload]\ndataload_s = 0.02\n'
                        '[stack]\nname = "nccl"\ncpu_per_byte = 2e-9\n[options]\ninterval = 3\n')
    a, b = load_scenario(flat), load_scenario(sections)
    assert a == b and a.options == b.options == {"interval": 3}
    assert a.network.inter == "ib-hdr" and a.workload.dataload_s == 0.02 and a.stack.cpu_per_byte == 2e-9


@pytest.mark.parametrize("flat, message", [
    ({"dataload": 20}, "dataload: 20 needs a unit, e.g. 20ms (a bare number is not a time)"),
    ({"dataload": "20"}, "dataload: '20' needs a unit"),
    ({"stack_cpu": 2.5e-8}, "stack_cpu: 2.5e-08 needs a unit, e.g. 25ns"),
    ({"nodes": 0}, "nodes: 0 is out of range; it must be >= 1 and <= 262144"),
    ({"nodes": "4.5"}, "nodes: '4.5' must be an integer"),
    ({"nodes": True}, "nodes: True must be an integer"),
    ({"resolution": float("nan")}, "resolution: nan must be a finite number"),
    ({"bucket_mb": float("inf")}, "bucket_mb: inf must be a finite number"),
    ({"oversubscription": 0.5}, "oversubscription: 0.5 is out of range; it must be >= 1 and <= 1024"),
    ({"fidelity": "exact"}, "fidelity: 'exact' is not valid; valid choices: flow, analytic"),
    ({"no_such_key": 1}, "unknown key 'no_such_key'; valid keys: "),
    ({"nodes": 65536, "gpus_per_node": 8}, "nodes x gpus_per_node: 65536 x 8 = 524,288 ranks"),
    ({"straggler_node": 4, "nodes": 4}, "straggler_node: 4 is out of range for 4 nodes (0..3)"),
    ({"compute_scale": [1.0, 2.0], "straggler_scale": 2.0}, "compute_scale: give per-node factors or"),
])
def test_bad_values_are_one_line_naming_the_key(flat, message):
    with pytest.raises(ConfigError) as exc:
        from_flat(flat)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_zero_needs_no_unit_and_seconds_spellings_take_numbers():
    assert from_flat({"dataload": 0}).workload.dataload_s == 0.0
    assert from_flat({"dataload": 0.5}, seconds={"dataload"}).workload.dataload_s == 0.5


def test_network_overrides_reach_run_and_refuse_a_topology_file(cli, tmp_path):
    rc, out, err = cli("run", "-s", "allreduce", "--nodes", "4", "--inter", "ib-hdr", "--json")
    assert rc == 0, err
    hdr = json.loads(out)["mean_s"]
    rc, out, err = cli("run", "-s", "allreduce", "--nodes", "4", "--inter", "eth-1g", "--json")
    assert rc == 0, err
    assert json.loads(out)["mean_s"] > hdr  # 1 Gb/s Ethernet is slower than HDR InfiniBand
    rc, out, err = cli("run", "-s", "allreduce", "--inter", "no-such-link")
    assert rc == 2 and err.startswith("error: ") and "no-such-link" in err and len(err.strip().splitlines()) == 1


def test_every_key_is_a_flag_of_run_compare_and_whatif():
    import typer

    from simcomm.cli.app import _register, app

    _register()
    cmd = typer.main.get_command(app)
    for name in ("run", "compare", "whatif"):
        opts = {o for p in cmd.commands[name].params for o in getattr(p, "opts", ())}
        missing = [k.flag for k in KEYS if k.flag not in opts and not (name != "run" and k.name == "strategy")]
        assert not missing, (name, missing)


_VALUES = {
    "nodes": st.integers(1, 64), "batch": st.integers(1, 4096), "seed": st.integers(0, 2 ** 31),
    "bucket_mb": st.floats(0, 1000, allow_nan=False), "resolution": st.floats(0, 0.99),
    "dataload": st.floats(0, 10), "stack_overhead": st.floats(0, 1e-3), "compute_jitter": st.floats(0, 0.9),
    "inter": st.sampled_from(["ib-edr", "ib-hdr", "eth-25g"]), "fidelity": st.sampled_from(["flow", "analytic"]),
    "dataload_overlap": st.booleans(), "oversubscription": st.floats(1, 16),
}


@settings(max_examples=60, deadline=None)
@given(st.fixed_dictionaries({}, optional=_VALUES))
def test_to_flat_round_trips(values):
    seconds = {"dataload", "stack_overhead"}
    scn = from_flat(values, seconds=seconds & set(values))
    again = from_flat(to_flat(scn))
    assert again == scn and isinstance(again, Scenario)

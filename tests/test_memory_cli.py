"""The memory keys from the command line: gpu_memory, memory = refuse | warn | off, memory_margin; bad input."""

from __future__ import annotations

import json

import pytest

RUN = ("run", "-s", "megatron", "--cluster", "dgx-a100-hdr", "--precision", "bf16", "--no-baseline")
BIG = (*RUN, "--model", "gpt3-175b", "--nodes", "1", "--batch", "1", "--opt", "tp=8")  # ~633 GB per GPU
SMALL = (*RUN, "--model", "megatron-1.7b", "--nodes", "2", "--batch", "4", "--opt", "tp=2", "--opt", "pp=2")


def test_refuse_is_the_default_and_warn_runs_with_the_shortfall(cli):
    rc, out, err = cli(*BIG)
    assert rc == 2 and err.count("\n") == 1 and "short by 547.5 GB; --memory warn runs it anyway)" in err
    rc, out, err = cli(*BIG, "--memory", "warn", "--json")
    assert rc == 0, err
    res = json.loads(out)
    mem = res["memory"]
    assert mem["fits"] is False and mem["policy"] == "warn" and mem["peak"] == mem["total"] + mem["margin"]
    assert mem["total"] == sum(mem[k] for k in ("weights", "gradients", "optimizer", "activations", "in_flight",
                                                "buffers"))
    assert any(a.startswith("memory: does not fit, running anyway (memory = warn)") and "short by 547.5 GB" in a
               for a in res["assumed"])


def test_off_checks_nothing_and_says_so(cli):
    rc, out, err = cli(*BIG, "--memory", "off")
    assert rc == 0, err
    assert "assumed: memory: not checked (memory = off); estimate 603.2 GB per GPU" in out
    assert "memory margin" not in out


def test_gpu_memory_overrides_the_device_and_the_margin_is_a_key(cli):
    rc, out, err = cli(*SMALL, "--gpu-memory", "96GB", "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["memory"]["capacity"] == 96e9 and res["memory"]["fits"] is True
    line = next(a for a in res["assumed"] if a.startswith("memory: peak "))
    assert " of the given 96 GB per GPU (megatron-1.7b with tp 2, pp 2" in line
    assert ("memory margin 5% of the peak for the caching allocator's fragmentation (freed blocks stay pooled by "
            "size, so reserved exceeds allocated; key memory_margin)") in res["assumed"]
    rc, out, err = cli(*SMALL, "--memory-margin", "0", "--json")
    assert rc == 0 and json.loads(out)["memory"]["margin"] == 0
    # a GPU too small for the layout's own peak is refused with its numbers
    rc, out, err = cli(*SMALL, "--gpu-memory", "5GB")
    assert rc == 2 and "but the GPU has the given 5 GB (short by" in err


@pytest.mark.parametrize("flag, value, needle", [
    ("--gpu-memory", "-5GB", "error: gpu_memory: '-5GB' must be positive"),
    ("--gpu-memory", "0GB", "error: gpu_memory: '0GB' must be positive"),
    ("--gpu-memory", "infGB", "error: gpu_memory: cannot parse 'infGB'"),
    ("--gpu-memory", "nanGB", "error: gpu_memory: cannot parse 'nanGB'"),
    ("--gpu-memory", "96", "error: gpu_memory: '96' needs a unit, e.g. 96GB"),
    ("--memory", "maybe", "error: memory: 'maybe' is not valid; valid choices: refuse, warn, off"),
    ("--memory-margin", "1.5", "error: memory_margin: 1.5 is out of range; it must be >= 0 and < 1"),
    ("--memory-margin", "nan", "error: memory_margin: nan must be a finite number"),
])
def test_bad_memory_input_is_one_line_exit_2(cli, flag, value, needle):
    rc, out, err = cli(*SMALL, flag, value)
    assert rc == 2 and err.count("\n") == 1 and err.startswith(needle), err


def test_scenario_file_spells_the_memory_table(tmp_path):
    from simcomm.scenario import load_scenario, to_flat

    f = tmp_path / "s.toml"
    f.write_text('strategy = "megatron"\n[memory]\ngpu_memory = "96GB"\npolicy = "warn"\nmargin = 0.1\n')
    scn = load_scenario(f)
    assert (scn.memory.gpu_memory, scn.memory.policy, scn.memory.margin) == (96e9, "warn", 0.1)
    f.write_text('strategy = "megatron"\nmemory = "off"\ngpu_memory = "94GB"\n')
    scn = load_scenario(f)
    assert (scn.memory.policy, scn.memory.gpu_memory) == ("off", 94e9)
    assert to_flat(scn)["memory"] == "off"


def test_plan_takes_the_memory_flags(cli):
    base = ("plan", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr", "--global-batch", "16", "--simulate",
            "1", "--quiet", "--zero", "0", "--schedules", "1f1b", "--recompute", "none", "--max-microbatch", "1")
    rc, out, err = cli(*base, "--gpu-memory", "1GB")
    assert rc == 2 and err.startswith("error: memory: none of the") and "fits the given 1 GB" in err, err
    rc, out, err = cli(*base, "--gpu-memory", "1GB", "--memory", "warn", "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["fit"] == res["layouts"] and res["device"] == "1 GB"

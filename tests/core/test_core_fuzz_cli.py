"""Fuzz the CLI's options the way a hostile new user would: exit 0 with finite output, or one `error:` line and exit 2.

Every command that takes user values is driven with flags drawn from a pool of plausible
and hostile values (huge or negative integers, nan/inf, empty strings, 300-character
names, units that do not exist, device files and directories as paths).  The property:

* exit status 0 and no ``nan``/``inf`` in what was printed, or
* exit status 2 and exactly one line on stderr, starting with ``error: ``;
* never a traceback, and no output file left behind by a failed run.

CI runs a bounded number of examples; ``SIMCOMM_FUZZ_EXAMPLES=6000 pytest -q
tests/core/test_core_fuzz_cli.py`` is the documented ~10-minute local campaign (3000 examples
took 4.5 min on 2 cores, 2026-11-26: no failure; docs/architecture.md, "Bad input").
"""

from __future__ import annotations

import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcomm.cli.app import main

EXAMPLES = int(os.environ.get("SIMCOMM_FUZZ_EXAMPLES", "40"))
HOSTILE = ["0", "-1", "1e9", "99999999999999999999", "nan", "inf", "-inf", "", " ", "1e308", "0.5", "abc",
           "a" * 300, "10XB", "1e-320", "/dev/zero", "/", "/proc/x", "true", "[1]", "1,2,,3", "ib-edr", "20ms", "4"]
NUMBER = st.sampled_from(["1", "2", "4", "8"]) | st.sampled_from(HOSTILE)
NAME = st.sampled_from(["allreduce", "sgp", "node-based", "ps", "gtopk", "nope", "", "a" * 300]) | st.sampled_from(HOSTILE)
CLUSTER = st.sampled_from(["deep-est-esb", "dgx-a100-hdr", "gbe-4gpu", "nope", "/dev/zero", "/", "a" * 300])
TIME = st.sampled_from(["0", "20ms", "1us", "20", "-5ms", "nan", "infs", "1e308s", "5 parsecs"])

RUN_FLAGS = {
    "--nodes": NUMBER, "--gpus-per-node": NUMBER, "--batch": NUMBER, "--seed": NUMBER, "--resolution": NUMBER,
    "--bucket-mb": NUMBER, "--compute-jitter": NUMBER, "--stack-efficiency": NUMBER, "--oversubscription": NUMBER,
    "--nics-per-node": NUMBER, "--straggler-scale": NUMBER, "--jitter": NUMBER, "--dataset-size": NUMBER,
    "--dataload": TIME, "--stack-overhead": TIME, "--stack-cpu": TIME,
    "--cluster": CLUSTER, "--inter": st.sampled_from(["ib-hdr", "eth-25g", "nope", ""]),
    "--topology": st.sampled_from(["fat-tree", "torus", "nope"]), "--fidelity": st.sampled_from(["flow", "analytic", "x"]),
    "--stack": st.sampled_from(["nccl", "mpi-tcp", "gloo", "nope"]), "--nccl-algo": st.sampled_from(["ring", "nvls", "x"]),
    "--precision": st.sampled_from(["fp32", "amp-fp16", "x"]), "--model": st.sampled_from(["resnet50", "vgg16", "x"]),
    "--compute-scale": st.sampled_from(["1,2", "0,1", "nan", "1e400", ""]),
    "--opt": st.sampled_from(["k_prime=5", "elem_s=inf", "density=nan", "x=1", "servers=0", "=", "noeq"]),
    "--baseline": st.sampled_from(["none", "allreduce:overlap=none", "nope", "allreduce:bad"]),
}


def _argv(draw_pairs) -> list[str]:
    out = []
    for flag, value in draw_pairs:
        out += [flag, value]
    return out


FLAGSETS = st.lists(st.sampled_from(sorted(RUN_FLAGS)), max_size=4, unique=True).flatmap(
    lambda flags: st.tuples(*(st.tuples(st.just(f), RUN_FLAGS[f]) for f in flags)))


def _check(capsys, argv, tmp_path=None) -> None:
    if tmp_path is not None:  # hypothesis reuses the fixture's folder: start each example empty
        for p in tmp_path.iterdir():
            if p.is_file():
                p.unlink()
    rc = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, (argv, err)
    if rc == 0:
        assert not re.search(r"(?<![\w-])(nan|inf)(?![\w-])", out.lower()), (argv, out)
    else:
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), (argv, rc, err)
    if tmp_path is not None and rc != 0:
        assert not [p for p in tmp_path.iterdir() if p.name.startswith("out")], argv


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(strategy=NAME, pairs=FLAGSETS)
def test_run_fuzz(capsys, strategy, pairs):
    _check(capsys, ["run", "--strategy", strategy, "--no-baseline", "--json", *_argv(pairs)])


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nodes=st.sampled_from(["2", "2,4", "0,x", "99999999", "", "1e9", "4,4,4"]), pairs=FLAGSETS,
       png=st.sampled_from(["out.png", "", "/nonexistent/x.png", "."]))
def test_compare_fuzz(capsys, tmp_path, nodes, pairs, png):
    png_path = str(tmp_path / png) if png and not png.startswith("/") and png != "." else png
    pairs = tuple(p for p in pairs if p[0] not in ("--opt",))
    _check(capsys, ["compare", "--strategies", "allreduce,sgp", "--nodes", nodes, "--quiet", "--png", png_path,
                    *_argv(pairs)], tmp_path)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(coll=st.sampled_from(["allreduce", "allgather", "broadcast", "nope"]), size=NUMBER | TIME,
       ranks=NUMBER, link=st.sampled_from(["ib-edr", "eth-1g", "nope", ""]),
       model=st.sampled_from(["hockney", "loggp", "x"]))
def test_cost_fuzz(capsys, coll, size, ranks, link, model):
    _check(capsys, ["cost", coll, "--size", size, "--ranks", ranks, "--link", link, "--model", model])


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(coll=st.sampled_from(["all_reduce", "all_gather", "broadcast", "x"]), nodes=NUMBER,
       sizes=st.sampled_from(["8B..1MB", "1MB", "0", "8B..8EB", "x", "1e308", "1MB..8B"]),
       cluster=CLUSTER, algo=st.sampled_from(["", "ring", "nvls", "x"]))
def test_bench_fuzz(capsys, coll, nodes, sizes, cluster, algo):
    argv = ["bench", coll, "--nodes", nodes, "--sizes", sizes, "--cluster", cluster, "--quiet"]
    _check(capsys, argv + (["--nccl-algo", algo] if algo else []))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=CLUSTER, nodes=NUMBER, gpn=NUMBER)
def test_topology_show_fuzz(capsys, target, nodes, gpn):
    _check(capsys, ["topology", "show", target, "--nodes", nodes, "--gpus-per-node", gpn])

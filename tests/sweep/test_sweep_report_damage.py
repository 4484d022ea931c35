"""``simcomm report`` on damaged, interrupted or foreign sweep directories: a warning or one error, never a crash."""

import json
import random
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TINY = ["whatif", "--vary", "nodes=2,4", "--strategies", "allreduce,sgp", "--fidelity", "analytic", "--sequential"]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A finished 4-point sweep (no report files), built once."""
    from simcomm.cli.app import main

    d = tmp_path_factory.mktemp("sweep") / "o"
    assert main([*TINY, "--no-report", "--question", "Tiny?", "--out", str(d)]) == 0
    return d


@pytest.fixture
def copy(sweep_dir, tmp_path):
    d = tmp_path / "o"
    shutil.copytree(sweep_dir, d)
    return d


def _report(cli, d, *extra):
    rc, _out, err = cli(["report", str(d), "--no-html", *extra])
    lines = err.splitlines()
    assert "Traceback" not in err
    return rc, [x for x in lines if not x.startswith("report: ")]


def _table_rows(d) -> int:
    md = (d / "report.md").read_text()
    section = md.split("## Ranked configurations", 1)[1].split("\n## ", 1)[0]
    return sum(1 for line in section.splitlines() if line.startswith("| ") and line[2:3].isdigit())


def test_0xff_byte_keeps_every_other_point_with_one_warning(copy, cli):
    lines = (copy / "points.jsonl").read_bytes().split(b"\n")
    lines[1] = lines[1][:50] + b"\xff" + lines[1][51:]
    (copy / "points.jsonl").write_bytes(b"\n".join(lines))
    rc, err = _report(cli, copy)
    assert rc == 0 and len(err) == 1
    assert err[0] == (f"warning: {copy / 'points.jsonl'}: skipped 1 of 4 line(s) (1 not UTF-8); 1 of 4 point(s) of "
                      "the sweep have no stored result and are left out (rerun the same simcomm whatif with this "
                      "--out to compute them)")
    assert _table_rows(copy) == 3


def test_store_is_read_even_when_results_json_is_there(copy, cli):
    # results.json may be older than the store (a resumed sweep killed before writing it): the store wins.
    (copy / "points.jsonl").write_bytes(b"\n".join((copy / "points.jsonl").read_bytes().split(b"\n")[1:]))
    rc, err = _report(cli, copy)
    assert rc == 0 and len(err) == 1 and "1 of 4 point(s) of the sweep have no stored result" in err[0]
    assert _table_rows(copy) == 3


def test_complete_last_record_without_newline_is_reported(copy, cli):
    (copy / "results.json").unlink()  # an interrupted sweep: the store is all there is
    assert cli(["report", str(copy), "--no-html"])[0] == 0
    whole = (copy / "report.md").read_text()
    data = (copy / "points.jsonl").read_bytes()
    (copy / "points.jsonl").write_bytes(data[:-1])
    rc, err = _report(cli, copy)
    assert rc == 0 and err == [] and (copy / "report.md").read_text() == whole and _table_rows(copy) == 4
    assert (copy / "points.jsonl").read_bytes() == data[:-1]  # report never writes the store


@pytest.mark.parametrize("edit", [
    lambda r: r["result"].update(iteration_s="fast"),
    lambda r: r.update(index="a"),
    lambda r: r.update(result=[1, 2]),
    lambda r: r.update(inputs=None),
])
def test_wrongly_typed_records_are_skipped(copy, cli, edit):
    lines = (copy / "points.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    edit(rec)
    lines[0] = json.dumps(rec)
    (copy / "points.jsonl").write_text("\n".join(lines) + "\n")
    rc, err = _report(cli, copy)
    assert rc == 0 and len(err) == 1 and err[0].startswith("warning: ") and "skipped 1 of 4 line(s)" in err[0]
    assert _table_rows(copy) == 3


@pytest.mark.parametrize(("text", "why"), [
    (None, "not complete JSON"),  # truncated
    ('{"question": 5, "axes": [], "base": {}}', "question is not a string"),
    ('{"question": "q", "axes": [["nodes", 2]], "base": {}}', "is not [name, [values...]]"),
    ('{"question": "q", "axes": [["nodes", [2, "x"]]], "base": {}}', "one axis takes one kind of value"),
    ('[1, 2]', "not a JSON object"),
    ('{"axes": [], "base": {}}', "sweep grid is empty"),
])
def test_damaged_sweep_json_is_one_error_line(copy, cli, text, why):
    path = copy / "sweep.json"
    path.write_text(path.read_text()[:40] if text is None else text)
    rc, err = _report(cli, copy)
    assert rc == 2 and len(err) == 1
    assert err[0].startswith(f"error: RESULTS_DIR: '{path}' is damaged (") and why in err[0]


def test_no_point_of_the_sweep_stored_is_one_error_line(copy, cli):
    (copy / "points.jsonl").write_text("")
    (copy / "results.json").unlink()
    rc, err = _report(cli, copy)
    assert rc == 2 and err == [(f"error: RESULTS_DIR: no point of the sweep in '{copy}' has a stored result "
                                f"({copy / 'points.jsonl'}: no stored point)")]


def test_store_without_checksums_falls_back_to_its_results_json(copy, cli):
    # A store written before records carried checksums: every line is skipped, results.json still reports.
    lines = [json.loads(x) for x in (copy / "points.jsonl").read_text().splitlines()]
    (copy / "points.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "sum"}) + "\n"
                                               for r in lines))
    rc, err = _report(cli, copy)
    assert rc == 0 and err == [(f"warning: {copy / 'points.jsonl'}: skipped 4 of 4 line(s) (4 no checksum); the "
                                "report is rebuilt from results.json instead")]
    assert _table_rows(copy) == 4


def test_markdown_question_is_escaped(copy, cli):
    markdown_it = pytest.importorskip("markdown_it")
    q = "EDR <script>alert(1)</script>\n# or [HDR](http://x)? **now**"
    assert cli(["report", str(copy), "--no-html", "--question", q])[0] == 0
    md = (copy / "report.md").read_text()
    quote = next(line for line in md.splitlines() if line.startswith("> "))
    html = markdown_it.MarkdownIt("commonmark").render(quote)
    assert "<script>" not in html and "<a " not in html and "<strong>" not in html and "<h1>" not in html
    assert html == ("<blockquote>\n<p>EDR &lt;script&gt;alert(1)&lt;/script&gt; # or [HDR](http://x)? "
                    "**now**</p>\n</blockquote>\n")


def _damage(data: bytes, how: str, rnd: random.Random) -> bytes:
    if not data:
        return data
    if how == "flip":
        i = rnd.randrange(len(data))
        return data[:i] + bytes([rnd.choice([0xFF, 0x00, ord("{"), ord("\n"), ord("x"), data[i] ^ 1])]) + data[i + 1:]
    if how == "truncate":
        return data[:rnd.randrange(len(data))]
    # Change the type of one value somewhere in one JSON document (a line of the store, or sweep.json).
    lines = data.split(b"\n")
    k = rnd.randrange(len(lines))
    try:
        doc = json.loads(lines[k])
    except ValueError:
        return data
    node, parent, key = doc, None, None
    for _ in range(rnd.randrange(1, 4)):
        if isinstance(node, dict) and node:
            key = rnd.choice(sorted(node))
        elif isinstance(node, list) and node:
            key = rnd.randrange(len(node))
        else:
            break
        parent, node = node, node[key]
    replacement = rnd.choice([None, 5, -1, 2.5, "x", True, [], [1, "a"], {}, {"a": 1}])
    if parent is None:
        doc = replacement
    else:
        parent[key] = replacement
    lines[k] = json.dumps(doc).encode()
    return b"\n".join(lines)


_DAMAGE = {"target": st.sampled_from(["points.jsonl", "sweep.json"]),
           "how": st.sampled_from(["flip", "truncate", "types"]),
           "times": st.integers(1, 3), "seed": st.integers(0, 2 ** 32 - 1)}


def _damaged_copy(sweep_dir, root, target, how, times, seed):
    d = root / "o"
    shutil.copytree(sweep_dir, d)
    (d / "results.json").unlink()  # an interrupted sweep: the store is all there is
    rnd = random.Random(seed)
    path = d / target
    for _ in range(times):
        path.write_bytes(_damage(path.read_bytes(), how, rnd))
    return d


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**_DAMAGE)
def test_damaged_store_loads_or_fails_in_one_line(sweep_dir, tmp_path_factory, target, how, times, seed):
    """The loading and summary half of ``report`` (fast, so many examples); the plots are the CLI test's."""
    from simcomm.cli.report_cmd import _load
    from simcomm.errors import ConfigError
    from simcomm.report.markdown import render_markdown

    d = _damaged_copy(sweep_dir, tmp_path_factory.mktemp("damaged"), target, how, times, seed)
    try:
        sweep, rows, warning = _load(d)
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("RESULTS_DIR: ")
        return
    assert 1 <= len(rows) <= 4 and (warning is None or "\n" not in warning)
    assert render_markdown(sweep, rows, {}).startswith("# simcomm what-if report")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**_DAMAGE)
def test_damaged_store_reports_or_fails_in_one_line(sweep_dir, tmp_path_factory, cli, target, how, times, seed):
    d = _damaged_copy(sweep_dir, tmp_path_factory.mktemp("damaged"), target, how, times, seed)
    rc, err = _report(cli, d)
    if rc == 2:
        assert len(err) == 1 and err[0].startswith("error: RESULTS_DIR: ")
    else:
        assert rc == 0 and len(err) <= 1 and all(x.startswith("warning: ") for x in err)
        assert (d / "report.md").exists()


def test_whatif_resume_over_a_0xff_byte_recomputes_only_that_point(copy, cli):
    lines = (copy / "points.jsonl").read_bytes().split(b"\n")
    lines[2] = lines[2][:50] + b"\xff" + lines[2][51:]
    (copy / "points.jsonl").write_bytes(b"\n".join(lines))
    rc, _, err = cli([*TINY, "--no-report", "--out", str(copy)])
    store = copy / "points.jsonl"
    assert rc == 0 and err.splitlines()[1:3] == [
        f"warning: {store}: skipped 1 of 4 line(s) (1 not UTF-8); their points are computed again",
        f"resume: {store}: keeping 3 stored point(s), computing 1"]
    rows = json.loads((copy / "results.json").read_text())["rows"]
    assert [(r["nodes"], r["strategy"], r["status"]) for r in rows] == [
        (2, "allreduce", "ok"), (2, "sgp", "ok"), (4, "allreduce", "ok"), (4, "sgp", "ok")]

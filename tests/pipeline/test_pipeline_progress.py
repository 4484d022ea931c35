"""``simulate(progress=...)`` names each stage as it begins; the command line's bar shows only on a terminal."""

from simcomm.cli.console import StageBar
from simcomm.pipeline import simulate
from simcomm.scenario import Scenario


def test_progress_names_every_stage_in_order():
    seen: list[str] = []
    res = simulate(Scenario(strategy="node-based", cluster="dgx-a100-hdr", nodes=2, gpus_per_node=8),
                   progress=seen.append)
    quiet = simulate(Scenario(strategy="node-based", cluster="dgx-a100-hdr", nodes=2, gpus_per_node=8))
    assert res.mean_s == quiet.mean_s  # the callback changes nothing
    kinds = len(res.kinds)
    assert seen[:2] == ["trace and cluster", "planning node-based on 16 ranks"]
    runs = [s for s in seen[2:] if not s.startswith("baseline")]
    assert len(runs) == 2 * kinds  # a flow run and a closed form per kind of iteration
    assert runs[0].startswith("flow simulation") and runs[0].endswith("ops on 16 ranks")
    assert runs[1].startswith("closed form")
    base = [s for s in seen if s.startswith("baseline")]
    assert base and base[0].startswith("baseline: ") and base[0].endswith(": planning")
    assert all(s.startswith("baseline: flow simulation") for s in base[1:])


def test_the_bar_stays_off_when_not_a_terminal_or_disabled():
    with StageBar() as bar:  # pytest captures stderr: not a terminal
        bar("a stage")
    assert not bar.on and bar.progress is None
    with StageBar(enabled=False) as bar:
        bar("a stage")
    assert not bar.on and bar.progress is None


def test_the_bar_names_the_stage_on_a_terminal(monkeypatch):
    import io
    import time

    from rich.console import Console

    from simcomm.cli import console

    out = io.StringIO()
    monkeypatch.setattr(console, "stderr", lambda: Console(file=out, force_terminal=True, width=100))
    monkeypatch.setattr(StageBar, "AFTER_S", 0.0)
    with StageBar() as bar:
        bar("flow simulation: 12 ops on 4 ranks")
        for _ in range(1000):  # the bar appears from a timer thread: wait for it (no timing asserted)
            if bar.progress is not None and bar.task is not None:
                break
            time.sleep(0.01)
        bar("closed form")
        bar.progress.refresh()
    text = out.getvalue()
    assert "closed form" in text

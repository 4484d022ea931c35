"""The README's Python API example runs as written (docs that cannot drift from the code)."""

from __future__ import annotations

import re
from pathlib import Path


def test_readme_python_example_runs(capsys):
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README lost its Python API example"
    scope: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)  # noqa: S102 - our own README
    res, results = scope["res"], scope["results"]
    assert res.mean_s > 0 and res.strategy == "sgp" and res.nodes == 16
    assert [(r.strategy, r.nodes) for r in results][:3] == [("allreduce", 4), ("sgp", 4), ("node-based", 4)]
    assert capsys.readouterr().out.splitlines()[0] == repr(res.mean_s)

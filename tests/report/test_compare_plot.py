"""The compare figure: the many-strategy table of cells, its fastest-per-column frame, and both layouts written."""

from __future__ import annotations

from types import SimpleNamespace

from simcomm.report.compare_plot import LINES, fastest_by_nodes, plot_compare


def _result(strategy, nodes, mean_s, speedup, not_applicable=None):
    parts = SimpleNamespace(compute=mean_s * 0.8, dataload=0.0, compression=0.0, server=0.0, comm_exposed=mean_s * 0.2)
    return SimpleNamespace(strategy=strategy, nodes=nodes, mean_s=mean_s, speedup=speedup, breakdown=parts,
                           not_applicable=not_applicable)


def test_fastest_per_node_count_skips_not_applicable_and_breaks_ties_by_name():
    results = [_result("b", 4, 0.10, 1.0), _result("a", 4, 0.10, 1.0), _result("c", 4, 0.05, 2.0, "needs 8 nodes"),
               _result("b", 8, 0.20, 1.0), _result("c", 8, 0.15, 1.33)]
    assert fastest_by_nodes(results) == {4: "a", 8: "c"}


def test_many_strategies_draw_cells_and_few_draw_lines(tmp_path):
    many = [_result(f"s{i:02d}", n, 0.1 + 0.01 * i, 0.1 / (0.1 + 0.01 * i)) for i in range(18) for n in (4, 8)]
    many.append(_result("s99", 4, float("nan"), None, "not applicable"))
    few = [r for r in many if r.strategy in {f"s0{i}" for i in range(LINES)}]
    wide, narrow = plot_compare(many, tmp_path / "many.png"), plot_compare(few, tmp_path / "few.png")
    from matplotlib.image import imread

    # the cells layout grows with the strategy count (one row each); the lines layout keeps its fixed height
    assert imread(wide).shape[0] > imread(narrow).shape[0]

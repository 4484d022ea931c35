"""Calibrate on one public nccl-tests run per platform, predict that platform's other runs (issue 25, item 6).

    python benchmarks/nccl/calibrate_suite.py            # the table docs/accuracy.md shows

For every platform of benchmarks/nccl/runs/ with at least two multi-node runs on one modelled cluster
(models.toml: the same preset or two-level description; node counts and collectives may differ), the
first run by id is the calibration row (runs the suite calls anomalous are included and marked: a
cloud network slower than its line rate is what a calibration is for): `simcomm calibrate --nccl-tests` fits the NICs' goodput and
latency on it alone, as a user would with the one table they have.  Each other run of the platform is
then predicted with and without the fitted `--links` file; errors are the median |predicted - measured|
/ measured over its counted rows of at least 1 MiB.  A platform whose calibration run is refused (the NIC
does not limit it, or its rows disagree) is listed with the refusal.  The calibration rows are never
reported as predictions.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from score import KIND, build  # noqa: E402  (the suite's own cluster models)


def nccl_tests_text(run: dict) -> str:
    """A run's rows laid out as nccl-tests prints them, with one '# Rank' line per rank and the test's name."""
    hw, data = run["hardware"], run["data"]
    ranks = hw["gpus_per_node"] * hw["nodes"]
    lines = [f"# Collective test starting: {run['collective']}_perf",
             f"# nThread 1 nGpus {int(MODELS[run['id']].get('gpus_per_thread', 1))} (the run's -g, models.toml)", "#"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on node-{r // hw['gpus_per_node']} device "
              f"{r % hw['gpus_per_node']}" for r in range(ranks)]
    inplace = data.get("inplace_time_us") or []
    for i, (size, count, t) in enumerate(zip(data["size"], data["count"], data["time_us"], strict=True)):
        other = f" {inplace[i]:.2f} 0 0 0" if i < len(inplace) else ""
        lines.append(f" {size} {count} {data['type']} {data['redop']} {data['root']} {t:.2f} 0 0 0{other}")
    return "\n".join(lines) + "\n"


def _platforms(models: dict) -> dict[str, list[str]]:
    groups = defaultdict(list)
    for rid, m in sorted(models.items()):
        if m.get("nodes", 1) < 2 or rid not in RUNS:
            continue
        key = m.get("cluster") or repr(sorted(m["build"].items()))
        # a platform: the same modelled cluster, stack, GPUs per node and the NIC the source states
        key += f"|{m.get('stack', 'nccl')}|{m.get('gpus_per_node')}|{RUNS[rid]['hardware'].get('nic', '')}"
        groups[key].append(rid)
    return {k: v for k, v in groups.items() if len(v) >= 2}


def _median_error(run: dict, model: dict, links: Path | None) -> float | None:
    from simcomm.bench import bench
    from simcomm.links.toml_file import load_link_file
    from simcomm.topologies.calibrated import with_calibrated_links

    topo, runtime = build(model)
    if links is not None:
        topo, _ = with_calibrated_links(topo, load_link_file(links), str(links))
    data = run["data"]
    keep = [(s, t) for s, t, c in zip(data["size"], data["time_us"], data["count"], strict=True) if s >= 2 ** 20 and c]
    if not keep:
        return None
    rows = bench(KIND[run["collective"]], topo, runtime, [float(s) for s, _ in keep], dtype=data["type"],
                 root=max(0, int(data.get("root", 0))), gpus_per_thread=int(model.get("gpus_per_thread", 1)))
    return statistics.median(abs(r.time_us - t) / t for r, (_, t) in zip(rows, keep, strict=True))


def calibrate(run: dict, model: dict, out: Path) -> str | None:
    """Fit the calibration run through the CLI's own code path; None, or the refusal line."""
    from simcomm.calibrate.fit import Fit
    from simcomm.calibrate.linkfile import LinkEstimate, write_link_file
    from simcomm.calibrate.nccl_cluster import ClusterPredictor, read_tables
    from simcomm.calibrate.nccl_tests import fit_network
    from simcomm.errors import ConfigError

    text = out.with_suffix(".txt")
    text.write_text(nccl_tests_text(run), encoding="utf-8")
    try:
        tables = read_tables([str(text)])
        topo, runtime = build(model)  # the suite's own model of the run's cluster (models.toml)
        gpn = int(model["gpus_per_node"])
        predictor = ClusterPredictor(tables, {topo.n_ranks // gpn: (topo, topo)}, gpn, runtime)
        fit = fit_network(predictor, predictor.measured("big"), predictor.measured("small"),
                          line_rate=predictor.nic.bandwidth, preset_alpha=predictor.preset_alpha)
    except ConfigError as e:
        return str(e)
    record = Fit("calib-inter", {"alpha": fit.alpha, "beta": 1 / fit.goodput}, (1.0,), (1.0,), (1.0,), 1.0)
    write_link_file(out, [LinkEstimate("calib-inter", record, predictor.nic.family)])
    return None


MODELS = tomllib.loads((HERE / "models.toml").read_text(encoding="utf-8"))
RUNS = {p.stem: tomllib.loads(p.read_text(encoding="utf-8")) for p in sorted((HERE / "runs").glob("*.toml"))}


def main() -> int:
    models = MODELS
    print("| platform (calibration run) | fit | predicted run | before | after |")
    print("|---|---|---|---|---|")
    befores, afters = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _key, ids in _platforms(models).items():
            # the first run (by id) a calibration accepts; the refusals of those before it are shown
            refused = None
            for i, cal in enumerate(ids[:-1]):  # noqa: B007 (i says, after the loop, which run calibrated)
                links = Path(tmp) / f"{cal}.toml"
                refused = calibrate(RUNS[cal], models[cal], links)
                if refused is None:
                    break
                print(f"| {cal} | refused: {refused.replace('|', '/')[:160]} | - | - | - |")
            if refused is not None:
                continue
            others = ids[i + 1:]
            fit = refused.replace("|", "/") if refused else links.read_text(encoding="utf-8").split("bandwidth = ")[1].split("\n")[0]
            for rid in others:
                b = _median_error(RUNS[rid], models[rid], None)
                a = None if refused else _median_error(RUNS[rid], models[rid], links)
                if b is not None and a is not None:
                    befores.append(b)
                    afters.append(a)
                flag = " (anomalous)" if RUNS[rid].get("anomalous") or RUNS[cal].get("anomalous") else ""
                print(f"| {cal} | {fit[:160]} | {rid}{flag} | {'-' if b is None else f'{b:.1%}'} | "
                      f"{'-' if a is None else f'{a:.1%}'} |")
    if afters:
        print(f"\nmedian over {len(afters)} predicted runs (>= 1 MiB rows): before {statistics.median(befores):.1%}, "
              f"after {statistics.median(afters):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Engine speed: ring allreduce of 100 MB on a two-level fat-tree (leaf-spine), with contention.

Each scale runs in a fresh Python subprocess so its peak RSS is its own.  The
table is printed and written into docs/performance.md between the markers
``<!-- bench_engine:begin -->`` / ``<!-- bench_engine:end -->`` (other
benchmarks keep their own sections in the same file).

    python benchmarks/bench_engine.py            # 64 .. 16384 ranks, writes the docs
    python benchmarks/bench_engine.py --no-write --scales 64 256
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

SCALES = (64, 256, 1024, 4096, 16384)
PLAIN_UP_TO = 256          # also run the plain (reference={"coalesce"}) model up to this size
DOC = Path(__file__).resolve().parents[1] / "docs" / "performance.md"
BEGIN, END = "<!-- bench_engine:begin -->", "<!-- bench_engine:end -->"

_CHILD = r"""
import json, resource, sys, time
ranks, coalesce = int(sys.argv[1]), sys.argv[2] == "1"
t0 = time.perf_counter()
from simcomm.engine import simulate
import simcomm.collectives, simcomm.engine.flow.pricer  # warm imports: time the engine, not the importer
from simcomm.ops import PlanBuilder
from simcomm.topologies.fat_tree import fat_tree
from simcomm.runtimes import get_runtime
t1 = time.perf_counter()
topo = fat_tree(levels=2, hosts=ranks, link="ib-edr")
b = PlanBuilder(ranks)
b.collective("allreduce", range(ranks), 100e6, algorithm="ring")
plan = b.build()
t2 = time.perf_counter()
tl = simulate(plan, topo, fidelity="flow", reference=() if coalesce else {"coalesce"}, runtime=get_runtime("mpich"))
t3 = time.perf_counter()
print(json.dumps({"ranks": ranks, "coalesce": coalesce, "import_s": t1 - t0, "build_s": t2 - t1,
                  "simulate_s": t3 - t2, "makespan_s": tl.makespan, "k": topo.meta["k"],
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "meta": tl.meta}))
"""


def run_one(ranks: int, coalesce: bool = True) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(ranks), "1" if coalesce else "0"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        info = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"Model name:\s*(.+)", info)
        model = m.group(1).strip() if m else model
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores visible, Python {platform.python_version()}"


def table(rows: list[dict], plain: dict[int, dict]) -> str:
    lines = ["| ranks | fat-tree k | simulate (s) | topology+plan build (s) | peak RSS (MB) | "
             "simulated makespan (ms) | t / (P log2 P) vs 1024 | plain model (s) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    ref = next((r for r in rows if r["ranks"] == 1024), rows[0])
    unit = ref["simulate_s"] / (ref["ranks"] * math.log2(ref["ranks"]))
    for r in rows:
        p = r["ranks"]
        growth = r["simulate_s"] / (p * math.log2(p)) / unit
        pl = plain.get(p)
        pl_s = "–" if pl is None else f"{pl['simulate_s']:.3f} (same makespan: {_same(pl, r)})"
        lines.append(f"| {p} | {r['k']} | {r['simulate_s']:.3f} | {r['build_s']:.3f} | "
                     f"{r['peak_rss_mb']:.0f} | {r['makespan_s'] * 1e3:.4f} | {growth:.2f} | {pl_s} |")
    return "\n".join(lines)


def _same(a: dict, b: dict) -> str:
    return "yes" if math.isclose(a["makespan_s"], b["makespan_s"], rel_tol=1e-9) else "NO"


def write_doc(section: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the marked section of docs/performance.md (other benchmarks own other sections)."""
    text = DOC.read_text() if DOC.exists() else "# Performance\n\nMeasured by the scripts in `benchmarks/`.\n"
    block = f"{begin}\n{section}\n{end}"
    if begin in text and end in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    tmp = DOC.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(DOC)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", type=int, nargs="*", default=list(SCALES))
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    args = ap.parse_args(argv)
    rows, plain = [], {}
    for p in args.scales:
        rows.append(run_one(p))
        print(f"{p:>6} ranks: simulate {rows[-1]['simulate_s']:.3f} s, peak RSS "
              f"{rows[-1]['peak_rss_mb']:.0f} MB", flush=True)
        if p <= PLAIN_UP_TO:
            plain[p] = run_one(p, coalesce=False)
    tab = table(rows, plain)
    print(tab)
    last = rows[-1]
    section = "\n".join([
        "## Engine: ring allreduce, 100 MB, two-level fat-tree (`benchmarks/bench_engine.py`)",
        "",
        f"Measured {_dt.date.today().isoformat()} on {machine()}.  Flow fidelity with contention "
        "(max-min sharing on every link); topology `fat_tree(levels=2, hosts=P, link=\"ib-edr\")` "
        "(leaf-spine, k the smallest even radix that fits P hosts); one `allreduce/ring` op over all "
        "ranks.  *simulate* is the wall time of `simulate()` alone; *peak RSS* is the whole "
        "process (Python, numpy, networkx, the topology).  *plain model* is `reference={\"coalesce\"}` "
        "(every repeat of every step run as flows), to show the shortcut changes the time, not the answer.",
        "",
        tab,
        "",
        f"Largest run's engine statistics: `{json.dumps(last['meta'], sort_keys=True)}`.",
        "",
        "Targets (issue 2): 1024 ranks < 1 s, 16384 ranks < 20 s, < 2 GB, growth about P log P.",
    ])
    if not args.no_write:
        write_doc(section)
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

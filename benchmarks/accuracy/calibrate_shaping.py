"""Does `simcomm calibrate` find the shaped link, or refuse saying what to run?  (docs/calibration.md)

    sudo PYTHONPATH=. .venv/bin/python benchmarks/accuracy/calibrate_shaping.py [NAME ...]

Runs `simcomm calibrate --emulate 2` as a user would, once per shaping (token-bucket burst
default / 64 KB / 512 KB at 100 Mb/s, 1 Gb/s with 1 500- and 9 000-byte frames) and one
loopback run (`--ranks 2`), one run each, no retries, and records per run: exit status,
fitted bandwidth against the shaped goodput, the burst the fit found, every warning or the
refusal, and the 1-min load average before and after.  Summary:
results/shaping/summary.json; each run's record beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks/accuracy/results/shaping"
RUNS = {f"{rate}-mtu{mtu}-{burst or 'default'}": (rate, mtu, burst)
        for rate in ("100Mb/s", "1Gb/s") for mtu in (1500, 9000) for burst in (None, "64KB", "512KB")
        if not (rate == "100Mb/s" and mtu == 9000)}
RUNS["loopback"] = (None, None, None)


def run(name: str, rate: str | None, mtu: int | None, burst: str | None) -> dict:
    from simcomm.calibrate.accept import shaped_goodput
    from simcomm.units import parse_bandwidth

    safe = name.replace("/", "")
    args = ["--ranks", "2"] if rate is None else ["--emulate", "2", "--rate", rate, "--mtu", str(mtu)]
    if burst:
        args += ["--burst", burst]
    cmd = [sys.executable, "-m", "simcomm", "calibrate", *args, "--out", str(OUT / f"{safe}.toml"), "--json"]
    before = os.getloadavg()[0]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    row = {"name": name, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(),
           "args": args, "rc": proc.returncode, "seconds": round(time.time() - t0, 1),
           "load_before": before, "load_after": os.getloadavg()[0],
           "stderr": [line for line in proc.stderr.splitlines() if line.startswith(("warning:", "error:"))]}
    if proc.returncode == 0:
        fits = json.loads(proc.stdout)["fits"]
        cls = "intra" if rate is None else "inter"
        fit = fits.get(cls) or next(iter(fits.values()))
        row["fitted_Bps"] = 1.0 / fit["params"]["beta"]
        row["burst_B"] = fit["params"].get("burst")
        if rate is not None:
            row["achievable_Bps"] = shaped_goodput(parse_bandwidth(rate), mtu)
            row["error"] = row["fitted_Bps"] / row["achievable_Bps"] - 1
    return row


def main() -> None:
    names = sys.argv[1:] or list(RUNS)
    rows = []
    summary = OUT / "summary.json"
    old = json.loads(summary.read_text()) if summary.exists() else []
    for name in names:
        row = run(name, *RUNS[name])
        rows.append(row)
        err = f"{row['error']:+.1%}" if "error" in row else "-"
        print(f"{name:26} rc={row['rc']} fitted={row.get('fitted_Bps', 0) / 1e6:8.3f} MB/s vs shaped {err:>7} "
              f"burst={row.get('burst_B')} load {row['load_before']:.1f}/{row['load_after']:.1f}", flush=True)
        for line in row["stderr"]:
            print("    " + line, flush=True)
    kept = [r for r in old if r["name"] not in names] + rows
    summary.write_text(json.dumps(kept, indent=1))


if __name__ == "__main__":
    main()

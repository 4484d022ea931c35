"""Start benchmark ranks and turn their record into fitted link classes.

Three ways to get ranks: under ``torchrun`` (this process is one rank; env
``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT``), as ``N`` local
worker processes on 127.0.0.1, or as workers inside an
:class:`~simcomm.calibrate.emulate.EmulatedCluster`.  Workers are separate
interpreters (``python -m simcomm.calibrate.worker``) rather than forks, so
that a rank can be placed in another network namespace and a hung rank can
be killed by its pid.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from simcomm.calibrate.bench import BenchSpec
from simcomm.calibrate.fit import CalibrationError, Fit, fit_alpha_beta, fit_bandwidth
from simcomm.calibrate.linkfile import LinkEstimate

__all__ = ["free_port", "launch_local", "launch_emulated", "run_from_env", "fit_record", "LINK_NAMES"]

#: link-class names written for each ping-pong class
LINK_NAMES = {"intra": "calib-intra", "inter": "calib-inter", "cross": "calib-cross"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_all(procs: list[subprocess.Popen], deadline: float) -> None:
    """Wait for every rank; on the first failure or at the deadline, stop the rest."""
    errors = []
    while True:
        states = [p.poll() for p in procs]
        bad = [i for i, s in enumerate(states) if s not in (None, 0)]
        if bad or all(s is not None for s in states) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    killed = set()
    for i, p in enumerate(procs):
        if p.poll() is None:
            p.kill()
            killed.add(i)
        _, err = p.communicate()
        lines = [ln for ln in (err or "").splitlines() if ln.startswith("error:")]
        tail = ((err or "").strip().splitlines()[-1:] or ["no output"])[0][:200]
        if lines:
            errors.append(lines[-1][len("error:"):].strip())
        elif p.returncode is not None and p.returncode > 0:
            errors.append(f"rank {i} failed with status {p.returncode}: {tail}")
        elif p.returncode is not None and p.returncode < 0 and i not in killed:
            # Died of a signal we did not send (e.g. SIGABRT from inside gloo): say so, with its last words.
            name = signal.Signals(-p.returncode).name if -p.returncode in signal.valid_signals() else "?"
            errors.append(f"rank {i} died of signal {-p.returncode} ({name}): {tail}")
    if errors:
        raise CalibrationError(errors[0])
    if any(p.returncode != 0 for p in procs):
        raise CalibrationError(f"calibration ranks did not finish within the time limit; "
                               f"statuses {[p.returncode for p in procs]}")


def _worker_args(rank: int, world: int, master: str, port: int, spec: BenchSpec, out: str,
                 backend: str, timeout: float) -> list[str]:
    return ["--rank", str(rank), "--world", str(world), "--master", master, "--port", str(port),
            "--backend", backend, "--timeout", f"{timeout:g}", "--spec", json.dumps(spec.to_json()),
            "--out", out]


def launch_local(spec: BenchSpec, ranks: int, *, backend: str = "gloo", timeout: float = 30.0,
                 master: str = "127.0.0.1", port: int | None = None, limit: float = 600.0) -> dict:
    """Run ``ranks`` local worker processes; return rank 0's record."""
    if ranks < 2:
        raise CalibrationError(f"ranks: {ranks}; calibration needs at least 2 ranks")
    port = port or free_port()
    with tempfile.TemporaryDirectory(prefix="simcomm-cal-") as tmp:
        out = os.path.join(tmp, "rec.json")
        procs = [subprocess.Popen([sys.executable, "-m", "simcomm.calibrate.worker",
                                   *_worker_args(r, ranks, master, port, spec, out, backend, timeout)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, "SIMCOMM_NODE": os.environ.get("SIMCOMM_NODE", "local")})
                 for r in range(ranks)]
        wait_all(procs, time.monotonic() + limit)
        return json.loads(Path(out).read_text())


def launch_emulated(cluster, spec: BenchSpec, *, ranks_per_host: int = 1, backend: str = "gloo",
                    timeout: float = 30.0, limit: float = 600.0) -> dict:
    """Run ranks inside ``cluster`` (host-major placement); return rank 0's record."""
    world = cluster.n_hosts * ranks_per_host
    master, port = cluster.hosts[0].ip, 29500
    with tempfile.TemporaryDirectory(prefix="simcomm-emu-") as tmp:
        out = os.path.join(tmp, "rec.json")
        procs = [cluster.python(r // ranks_per_host, "simcomm.calibrate.worker",
                                _worker_args(r, world, master, port, spec, out, backend, timeout),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for r in range(world)]
        wait_all(procs, time.monotonic() + limit)
        rec = json.loads(Path(out).read_text())
    rec["cluster"] = cluster.describe()
    return rec


def run_from_env(spec: BenchSpec, *, backend: str = "gloo", timeout: float = 30.0) -> dict | None:
    """This process is one rank of a ``torchrun`` job; rank 0 gets the record."""
    import torch.distributed as dist

    from simcomm.calibrate.bench import init_group, run_benchmarks

    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        master, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "29500"))
    except (KeyError, ValueError):
        raise CalibrationError("RANK/WORLD_SIZE: not set to integers; run under torchrun or pass --ranks N") from None
    init_group(backend, master, port, rank, world, timeout)
    try:
        return run_benchmarks(spec)
    finally:
        dist.destroy_process_group()


def fit_record(rec: dict) -> tuple[dict[str, Fit], list[LinkEstimate]]:
    """Fit α, β per ping-pong class in a measurement record."""
    fits: dict[str, Fit] = {}
    links = []
    for cls, d in sorted(rec.get("p2p", {}).items()):
        # cross-leaf: only the trunk's rate is new (its latency is the inter one plus two bridges)
        if cls == "cross":
            f = fit_bandwidth(d["sizes"], d["times"], name=f"ping-pong {cls}")
        else:  # a token bucket shapes a network, never a host's loopback
            f = fit_alpha_beta(d["sizes"], d["times"], name=f"ping-pong {cls}", bucket=cls != "intra")
        fits[cls] = f
        # gloo between nodes is TCP over Ethernet; within a node it is loopback TCP (no preset family)
        family = "ethernet" if cls in ("inter", "cross") and rec.get("backend") == "gloo" else "custom"
        links.append(LinkEstimate(LINK_NAMES[cls], f, family,
                                  f"{rec.get('backend', '?')} ping-pong, {cls}-node: "
                                  f"{f.bandwidth / 1e6:.4g} MB/s, {f.alpha * 1e6:.4g} us"))
    if not fits:
        raise CalibrationError("measurement record has no ping-pong data; calibration needs at least 2 ranks")
    return fits, links

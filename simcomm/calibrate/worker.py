"""One benchmark rank as a process: ``python -m simcomm.calibrate.worker ...``.

Used by ``simcomm calibrate --ranks N`` (local ranks) and by the emulated
cluster (each rank started with ``ip netns exec``).  Rank 0 writes the
measurement record as JSON to ``--out``; a user error (unreachable master)
is printed as one ``error:`` line and exit status 2, like the CLI.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from simcomm.calibrate.bench import BenchSpec, init_group, run_benchmarks
from simcomm.calibrate.linkfile import write_json_atomic
from simcomm.errors import SimcommError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="simcomm-calibrate-worker")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--spec", required=True, help="BenchSpec as JSON")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    def body():
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)  # ranks share few cores; intra-op threads would fight the network threads
        init_group(a.backend, a.master, a.port, a.rank, a.world, a.timeout)
        try:
            return run_benchmarks(BenchSpec.from_json(json.loads(a.spec)))
        finally:
            dist.destroy_process_group()

    return run_and_save(body, a.out)


def exit_now(status: int) -> None:
    """Leave the rank process without running C++ static destructors.

    gloo's background threads can still be joinable at interpreter shutdown, and
    their destructors then abort the process ("terminate called without an active
    exception", SIGABRT) after the work is done and the record is safely written.
    The measurement is complete at this point, so skip that teardown.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def run_and_save(body, out: str) -> int:
    """Run a rank's ``body``; the record it returns (rank 0's) is written atomically to ``out``.

    A user error becomes one ``error:`` line and status 2, as in the CLI.
    """
    try:
        rec = body()
        if rec is not None:
            write_json_atomic(out, rec)
    except SimcommError as exc:
        sys.stderr.write(f"error: {' '.join(str(exc).split())}\n")
        return 2
    return 0


if __name__ == "__main__":
    exit_now(main())

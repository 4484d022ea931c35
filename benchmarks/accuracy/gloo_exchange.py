"""Does gloo run the two directions of a symmetric exchange at once?  (docs/accuracy.md)

    sudo .venv/bin/python benchmarks/accuracy/gloo_exchange.py [star|two-tier] [MBIT]
    .venv/bin/python benchmarks/accuracy/gloo_exchange.py --report results/gloo-exchange-star-100.json

Four hosts of the emulated cluster (one rank each); every rank exchanges 1.08 MB (the
resnet20-cifar gradient, as SGP moves it) with the rank two places away, so rank r sends
to and receives from the same peer, over gloo's one TCP connection for that pair.  Four
ways of posting it, each timed 10 times (the first 2 dropped) after a barrier, the slowest
rank's time per repeat, the median reported:

* ``one-way``: ranks 0 and 1 send, ranks 2 and 3 receive (the fluid model's time for
  every pattern below, since each direction of each link is its own resource);
* ``send-first``: ``isend`` then ``irecv`` on the one connection (what the SGP worker did);
* ``recv-first``: ``irecv`` then ``isend`` (what it does now);
* ``two-connections``: send-first, but each direction on its own process group (own TCP
  connection).

gloo sends a message only after the peer's "recv ready" notice.  The later of two ranks
finds its peer's notice already there and queues its whole message at once; its own
notice, posted by the ``irecv`` after that, then waits behind the message on the same
connection, so the peer starts sending only when that message is through.  Raw record:
results/gloo-exchange-<topology>-<rate>.json.

Beside each measurement the script prints what simcomm's gloo runtime predicts from the
measured one-way time t₁ = α + n/B (simcomm.runtimes.transport.gloo_exchange): send-first
2·t₁ (the two messages in turn), receive-first and two connections t₁ (t₁: the fastest
one-way repeat), how many send-first repeats were serialised, and the load average.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATTERNS = ("one-way", "send-first", "recv-first", "two-connections")
N_FLOATS = 270_000  # 1.08 MB
REPEATS, DROP = 10, 2


def worker(rank: int, master: str, out: str) -> None:
    import torch
    import torch.distributed as dist

    from simcomm.calibrate.bench import init_group

    torch.set_num_threads(1)
    init_group("gloo", master, 29660, rank, 4, 30.0)
    # two extra groups: their own pairs, hence their own TCP connections
    mine, theirs = dist.new_group([0, 1, 2, 3]), dist.new_group([0, 1, 2, 3])
    if rank >= 2:
        mine, theirs = theirs, mine
    peer = (rank + 2) % 4
    buf, inbox = torch.ones(N_FLOATS), torch.empty(N_FLOATS)
    times = {}
    for name in PATTERNS:
        ts = []
        for _ in range(REPEATS):
            dist.barrier()
            t0 = time.perf_counter()
            if name == "one-way":
                reqs = [dist.isend(buf, dst=peer)] if rank < 2 else [dist.irecv(inbox, src=peer)]
            elif name == "send-first":
                reqs = [dist.isend(buf, dst=peer), dist.irecv(inbox, src=peer)]
            elif name == "recv-first":
                reqs = [dist.irecv(inbox, src=peer), dist.isend(buf, dst=peer)]
            else:
                reqs = [dist.isend(buf, dst=peer, group=mine), dist.irecv(inbox, src=peer, group=theirs)]
            for r in reqs:
                r.wait()
            ts.append(time.perf_counter() - t0)
        times[name] = ts[DROP:]
    rows = [None] * 4
    dist.all_gather_object(rows, times)
    if rank == 0:
        slowest = {k: [max(r[k][i] for r in rows) for i in range(REPEATS - DROP)] for k in PATTERNS}
        Path(out).write_text(json.dumps(slowest))
    dist.destroy_process_group()


def main() -> None:
    import subprocess
    import tempfile

    from simcomm.calibrate.emulate import EmulatedCluster

    topo = sys.argv[1] if len(sys.argv) > 1 else "star"
    mbit = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    kw = {"topology": topo, "leaves": 2, "trunk_rate": mbit * 1e6 / 16} if topo == "two-tier" else {}
    with tempfile.TemporaryDirectory() as tmp, EmulatedCluster(4, f"{mbit}Mb/s", mtu=9000, qdisc="fq", **kw) as cl:
        out = str(Path(tmp) / "out.json")
        procs = [cl.popen(h, [sys.executable, __file__, "--worker", str(h), cl.hosts[0].ip, out],
                          stderr=subprocess.DEVNULL) for h in range(4)]
        for p in procs:
            p.wait(timeout=300)
        slowest = json.loads(Path(out).read_text())
    rec = summarise(topo, mbit, slowest)
    dest = ROOT / f"benchmarks/accuracy/results/gloo-exchange-{topo}-{mbit}.json"
    dest.write_text(json.dumps(rec, indent=1, sort_keys=True))
    report(rec)


def summarise(topo: str, mbit: int, slowest: dict) -> dict:
    """Medians, simcomm's prediction on the measured one-way time, and each send-first repeat's case."""
    import os

    from simcomm.runtimes.transport import gloo_exchange

    med = {k: statistics.median(v) for k, v in slowest.items()}
    one = min(slowest["one-way"])  # the link's one-way time; slower repeats are the busy CPU's
    # the model on the measured one-way time t1 = alpha + n/B: one byte each way over 1/t1 B/s, no alpha: 2 t1
    pred = {"one-way": one, "send-first": gloo_exchange(1.0, 1.0, 1.0 / one, 0.0),
            "recv-first": one, "two-connections": one}
    # gloo's two cases: the later rank posts after the earlier one's notice arrived (serialised, 2 t1)
    # or within one latency of it (both notices cross, t1); each repeat is nearer one of them
    serial = sum(1 for t in slowest["send-first"] if abs(t - 2 * one) < abs(t - one))
    return {"topology": topo, "mbit": mbit, "bytes": 4 * N_FLOATS, "median_s": med, "runs_s": slowest,
            "one_way_s": one, "predicted_s": pred, "send_first_serialised": serial,
            "load_after": os.getloadavg()[0]}


def report(rec: dict) -> None:
    topo, mbit, med, pred, one = rec["topology"], rec["mbit"], rec["median_s"], rec["predicted_s"], rec["one_way_s"]
    for k in PATTERNS:
        print(f"{topo} {mbit} Mb/s {k:16} {med[k] * 1e3:7.1f} ms  ({med[k] / one:.2f}x one-way)  simcomm "
              f"{pred[k] * 1e3:7.1f} ms ({pred[k] / med[k] - 1:+.0%})")
    n = len(rec["runs_s"]["send-first"])
    print(f"send-first repeats serialised (nearer 2 t1 than t1, t1 = fastest one-way {one * 1e3:.1f} ms): "
          f"{rec['send_first_serialised']} of {n}; load average after: {rec.get('load_after', float('nan')):.2f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif len(sys.argv) > 1 and sys.argv[1] == "--report":  # a saved record, without root
        saved = json.loads(Path(sys.argv[2]).read_text())
        report(summarise(saved["topology"], saved["mbit"], saved["runs_s"]) | {"load_after": saved.get("load_after",
                                                                                                     float("nan"))})
    else:
        main()

"""Parameter servers on machines a cluster file names (``ps``'s ``server-machines``).

A cluster file describes every machine, the parameter server's included
(seed 004's "one parameter server machine and two worker machines"), so
``placement own`` on it can name which machines serve instead of attaching new
ones.  The first rank of each named machine serves; the machine's other ranks
(if the file gives it several) take no part; every other rank trains.  Training
ranks come first and the servers last, as everywhere else
(``meta["server_ranks"]``); routes are the file's, unchanged.
"""

from __future__ import annotations

from simcomm.errors import ConfigError
from simcomm.topologies.base import Topology

__all__ = ["serve_on_machines"]


def serve_on_machines(topo: Topology, machines: tuple[int, ...]) -> Topology:
    """``topo`` with the first rank of each of ``machines`` serving, after every training rank."""
    by_machine: dict[int, list[int]] = {}
    for r in range(topo.n_ranks):
        m = topo.machine_of(r)
        if m is not None:
            by_machine.setdefault(m, []).append(r)
    missing = [m for m in machines if m not in by_machine]
    if missing:
        have = ", ".join(map(str, sorted(by_machine))) or "none (the file gives no rank a machine)"
        raise ConfigError(f"server-machines: machine {missing[0]} is not in cluster {topo.name!r}; its machines: "
                          f"{have}")
    serving = set(machines)
    workers = [topo.ranks[r] for r in range(topo.n_ranks) if topo.machine_of(r) not in serving]
    if not workers:
        raise ConfigError(f"server-machines: {','.join(map(str, machines))} leaves no rank of cluster "
                          f"{topo.name!r} to train")
    servers = [topo.ranks[by_machine[m][0]] for m in machines]
    return Topology(topo.name, topo.graph, dict(topo.links), tuple(workers + servers), router=topo.router,
                    meta={**topo.meta, "server_ranks": tuple(range(len(workers), len(workers) + len(servers))),
                          "server_machines": machines})

"""``ps``: synchronous parameter server, the architecture of seed 004.

Pattern: the model is sharded over S servers.  After backward every worker
pushes shard k of its gradients (|θ|/S bytes) to server k; when all W pushes
have arrived, server k reduces them and updates its shard (server compute),
then every worker pulls the updated shard back.  Workers run no optimizer.

All W pushes converge on one server at once, so the server's link carries
W·|θ|/S bytes in each direction: the incast that makes PS scale badly.
Closed form, one server on its own node, full-duplex link of bandwidth B
(reference §1b, [derived]): ``T = t_c + 2α + 2·W·|θ|·β + t_server`` when push
and pull are serialized by the server's update, as they are here.

Server compute: ``server_s_per_byte × (W + 1) × |θ|/S`` (W reductions and
one update pass over the shard).  The default 1.4e-10 s/B is calibrated on
seed 004 Table 1's 1 Gb/s row (0.073 s for ResNet-50's 102 MB with 4 workers).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import ConfigError, PlanError
from simcomm.ops import PlanBuilder
from simcomm.strategies.base import Strategy, register
from simcomm.strategies.common import check_choice, emit_forward_backward

PLACEMENTS = ("own", "colocated")


@dataclass(frozen=True)
class PSParams:
    """Options of ``ps``."""

    servers: int = 1
    placement: str = "own"
    server_s_per_byte: float = 1.4e-10

    def __post_init__(self):
        if isinstance(self.servers, bool) or not isinstance(self.servers, int) or self.servers < 1:
            raise ConfigError(f"servers: {self.servers!r} must be a positive integer")
        check_choice("placement", self.placement, PLACEMENTS)
        if not self.server_s_per_byte >= 0:
            raise ConfigError(f"server-s-per-byte: {self.server_s_per_byte!r} must be >= 0")

    @property
    def assumed(self) -> tuple[str, ...]:
        out = []
        if self.servers == 1:
            out.append("1 parameter server (seed 004)")
        if self.placement == "own":
            out.append("servers on their own nodes, one server per extra node (seed 004's 1 Gb/s setup)")
        if self.server_s_per_byte == 1.4e-10:
            out.append("server reduce+update 1.4e-10 s/B x (workers+1) x shard (calibrated on seed 004 Table 1)")
        return tuple(out)


@register
class ParameterServer(Strategy):
    """Synchronous sharded parameter server: push, server reduce + update, pull."""

    name = "ps"
    summary = "workers push gradients to S sharded servers, servers reduce and update, workers pull"
    reference = "seed 004: Jeong et al. (Electronics 2021), Sec. 3; Li et al. OSDI 2014"
    Params = PSParams

    def extra_nodes(self) -> int:
        return self.params.servers if self.params.placement == "own" else 0

    def server_ranks(self, workload, topology) -> tuple[int, ...]:
        p = self.params
        W = workload.n_ranks
        if p.servers > W:
            # A shard per server smaller than a worker's share buys nothing and, co-located, is impossible.
            raise ConfigError(f"servers: {p.servers} is more than the {W} worker ranks; use at most {W}")
        if p.placement == "colocated":
            step = W // p.servers
            return tuple(k * step for k in range(p.servers))
        firsts: dict = {}
        for r in range(W, topology.n_ranks):
            firsts.setdefault(topology.machine_of(r), r)
        if len(firsts) < p.servers:
            raise PlanError(f"ps: placement 'own' needs {p.servers} extra nodes beyond the workers; "
                            f"the cluster has {len(firsts)}")
        return tuple(list(firsts.values())[: p.servers])

    # Hooks that ps-layer-drop overrides.
    def worker_workload(self, workload):
        return workload

    def wire_bytes(self, workload) -> tuple[float, float]:
        """(push, pull) bytes per worker per iteration, whole model."""
        return workload.model_bytes, workload.model_bytes

    def server_seconds(self, workload, shard: float) -> float:
        return self.params.server_s_per_byte * (workload.n_ranks + 1) * shard

    def plan(self, workload, topology):
        S = self.params.servers
        servers = self.server_ranks(workload, topology)
        w = self.worker_workload(workload)
        push, pull = self.wire_bytes(workload)
        W = w.n_ranks
        b = PlanBuilder(topology.n_ranks)
        one = (tuple(w.ready_order),)  # TF-style PS pushes once, after backward
        its = {r: emit_forward_backward(b, w, r, buckets=one) for r in range(W)}
        for k, s in enumerate(servers):
            pushes = [b.transfer(r, s, push / S, after=(its[r].backward_end,), label=f"push[{k}]",
                                 stream=f"push{k}") for r in range(W) if r != s]
            if s < W:
                pushes.append(its[s].backward_end)
            upd = b.compute(s, self.server_seconds(workload, workload.model_bytes / S), after=pushes,
                            label=f"server-update[{k}]", stream="server", category="server")
            for r in range(W):
                if r != s:
                    b.transfer(s, r, pull / S, after=(upd,), label=f"pull[{k}]", stream=f"pull{r}")
        return b.build(kind="every iteration", strategy=self.name, servers=servers)

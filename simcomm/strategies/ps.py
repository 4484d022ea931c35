"""``ps``: synchronous parameter server, run as TensorFlow, MXNet and BytePS run one (seed 004).

Pattern, per trainable tensor t (one message per tensor and direction):

1. backward produces t's gradient on every worker, which pushes it to t's
   server at once (TF: the gradient's Send to the ps task that owns the
   variable; MXNet KVStore / BytePS: ``push(key)`` from the backward callback);
2. t's server, once all W gradients of t are in, reduces them and updates t
   (server compute, category ``server``: the breakdown's ``server`` column);
3. it sends the updated t to every worker (pull);
4. the next iteration's forward of a layer waits only for that layer's tensors.

Pushes of late layers therefore overlap backward, and the pulls of tensors
already updated overlap the pushes of later ones on the full-duplex server
link (seed-code-facts C10).  The plan holds two iterations, like allreduce's
``overlap=backward+forward``; ``period_ranks`` measure one steady-state
iteration between each worker's two backward ends.  Workers run no optimizer.

Tensors (:func:`tensors`): the trace's layers split into the variables a
framework keeps, when the layer's shapes allow: a conv kernel (+ bias), a
norm layer's gamma and beta, a dense kernel and bias; anything else is one
tensor.  ResNet-50 gives 161 (53 conv kernels, 53 x 2 batch-norm, fc kernel
and bias), TF's count of trainable variables.

Sharding (``sharding``): ``round-robin`` assigns tensor i (creation order) to
server i mod S, the default of TF's ``replica_device_setter``
(``_RoundRobinStrategy``, tensorflow/python/training/device_setter.py; TF
also counts non-trainable variables such as ``global_step`` and batch-norm
moving statistics, which shifts but does not change the rule);
``greedy-bytes`` puts each tensor on the least-loaded server by bytes, TF's
``GreedyLoadBalancingStrategy`` with ``byte_size_load_fn``
(tensorflow/contrib/training/python/training/device_setter.py).

Message queues (``queues``): ``fifo`` has every endpoint send one message at
a time and receive one at a time, on separate queues (full duplex; a
blocking-MPI communication thread per process and direction): W pushes into
a server take W·n/B under both fidelities, so the analytic closed form
carries the incast; no two messages share a link of a non-blocking network,
so the analytic fidelity equals the flow one.  ``concurrent`` lets all
messages share links max-min fairly (TF's gRPC, MXNet's ZeroMQ, BytePS); the
flow fidelity prices the incast, the analytic fidelity prices each message
alone and misses it (said in an ``assumed:`` line).  With one server the two
agree in the flow fidelity whenever the server's link is no faster than a
worker's (seed004-ps at 1 Gb/s: 3.97 s against 3.93 s).  With several
servers ``fifo``'s fixed order blocks: a worker's next push to server b
waits behind its push to server a, which waits for the other workers' pushes
of the same tensor, so extra servers barely help (seed004-ps: 3.96 s with 2
servers); ``concurrent`` shows their gain (2.20 s).  ``auto`` (default) runs
``fifo`` with one server and ``concurrent`` with more.

Pull (``pull``): ``per-tensor`` (default) sends t as soon as it is updated
(MXNet/BytePS; the only way seed 004's 3.457 s at 1 Gb/s fits under line
rate); ``after-update`` waits for every tensor's update first, like TF's
``SyncReplicasOptimizer`` token.

Worker fold (``fold``, ``fold_workers``; :mod:`simcomm.strategies._ps_fold`): with one server of its own and
fifo queues, from 2 048 workers, windows of workers are simulated by their last one, the others' messages merged
per route class plus a wait of their latencies (within 1e-9 of every worker simulated; an ``assumed:`` line).

Closed form, one server on its own node behind a link of β s/B, per-message
cost α, T tensors, the server link the bottleneck, ``fifo`` [derived]::

    t_iter ≈ t_fwd + t_bwd − t_overlap + W·(n_1 + |θ|)·β + W·T·α + t_server

n_1 is the first-ready tensor: its W pushes precede every pull, after which
the egress is as busy as the ingress; t_overlap is the backward left when n_1
is ready (pushes already running); each tensor's update sits between its
pushes and its pulls.  seed004-ps, batch 64, cpu-ps (β = 1/117.5 MB/s):
0.324 − 0.21 + 4 × 110.4 MB·β + 4 × 161 × 40 us + 0.073 = 3.97 s; simulated
3.969 s.  Server
compute per tensor: ``server_s_per_byte × (W + 1) × n_t`` (W reductions and
one update pass); the default 1.43e-10 s/B is seed 004 Table 1's 1 Gb/s PS
compute (0.073 s for 4 workers and 102.2 MB).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from simcomm.errors import ConfigError, PlanError
from simcomm.ops import PlanBuilder
from simcomm.strategies._fold import builder_for
from simcomm.strategies._ps_fold import FOLDS, fold_note, worker_groups
from simcomm.strategies.base import Strategy, register
from simcomm.strategies.common import check_choice, emit_backward, emit_forward_backward

__all__ = ["PSParams", "ParameterServer", "Tensor", "tensors", "split_layer", "shard", "ready_groups"]

PLACEMENTS = ("own", "colocated")
SHARDINGS = ("round-robin", "greedy-bytes")
QUEUES = ("auto", "fifo", "concurrent")
PULLS = ("per-tensor", "after-update")
#: seed 004 Table 1, 1 Gb/s: 0.073 s / ((4 + 1) x 102,228,128 B)
SERVER_S_PER_BYTE = 1.43e-10
_NORMS = ("BatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm", "SyncBatchNorm")


@dataclass(frozen=True)
class Tensor:
    """One trainable variable: its layer (index into ``workload.layers``), name and wire bytes."""

    layer: int
    name: str
    nbytes: float


def split_layer(layer) -> tuple[tuple[str, float], ...]:
    """(variable name, share of the layer's bytes) of the tensors a framework keeps for ``layer``.

    Only splits the shapes prove: a norm layer's even parameter count into
    gamma and beta; a dense layer whose count is in·out + out; a conv whose
    count is c_in·c_out·k^d + c_out (bias) rather than a multiple of c_in·c_out.
    """
    p = layer.params
    if p <= 0:
        return ()
    mt = layer.module_type
    if mt.startswith(_NORMS) and p % 2 == 0:
        return (("gamma", 0.5), ("beta", 0.5))
    ins, outs = tuple(layer.input_shape), tuple(layer.output_shape)
    if mt == "Linear" and ins and outs:
        i, o = ins[-1], outs[-1]
        if p == i * o + o:
            return (("kernel", i * o / p), ("bias", o / p))
    m = re.fullmatch(r"Conv(?:Transpose)?([123])d", mt)
    if m and len(ins) > int(m.group(1)) and len(outs) > int(m.group(1)):
        d = int(m.group(1))
        ci, co = ins[-(d + 1)], outs[-(d + 1)]
        vol = (p - co) // (ci * co) if ci > 1 and p > co and (p - co) % (ci * co) == 0 else 0
        if vol and p % (ci * co) and round(vol ** (1 / d)) ** d == vol:  # a k^d kernel plus c_out biases
            return (("kernel", (p - co) / p), ("bias", co / p))
        return (("kernel", 1.0),)
    return (("weights", 1.0),)


def tensors(workload) -> tuple[Tensor, ...]:
    """The model's trainable tensors in creation (forward) order, see :func:`split_layer`."""
    out = []
    for j, layer in enumerate(workload.layers):
        for var, share in split_layer(layer):
            out.append(Tensor(j, f"{layer.name}/{var}", layer.grad_bytes * share))
    return tuple(out)


def shard(tens, servers: int, rule: str) -> tuple[int, ...]:
    """Server index of each tensor (creation order) under ``rule`` (see the module docstring)."""
    if rule == "round-robin":
        return tuple(i % servers for i in range(len(tens)))
    load = [0.0] * servers
    out = []
    for t in tens:
        k = min(range(servers), key=lambda s: (load[s], s))  # np.argmin: the first least-loaded task
        load[k] += t.nbytes
        out.append(k)
    return tuple(out)


def ready_groups(workload) -> tuple[tuple[int, ...], ...]:
    """Backward cut into groups, each ending at one layer with parameters (its gradient-ready point).

    Groups are in gradient-ready order; a group's last layer owns its tensors,
    and in forward order it is the group's first layer.  Layers after the last
    one with parameters (the first layers of forward) form a final group.
    """
    out, cur = [], []
    for j in workload.ready_order:
        cur.append(j)
        if workload.layers[j].params > 0:
            out.append(tuple(cur))
            cur = []
    if cur:
        out.append(tuple(cur))
    return tuple(out)


@dataclass(frozen=True)
class PSParams:
    """Options of ``ps``."""

    servers: int = 1
    placement: str = "own"
    sharding: str = "round-robin"
    queues: str = "auto"
    pull: str = "per-tensor"
    server_s_per_byte: float = SERVER_S_PER_BYTE
    #: machines of a cluster file that serve, comma-separated ("3", "0,4"); "" = new machines after the workers
    server_machines: str = ""
    #: simulate the workers in ``fold_workers`` groups (one server, fifo; an approximation, strategies/_ps_fold.py)
    fold: str = "auto"
    fold_workers: int = 32

    def __post_init__(self):
        if isinstance(self.servers, bool) or not isinstance(self.servers, int) or self.servers < 1:
            raise ConfigError(f"servers: {self.servers!r} must be a positive integer")
        check_choice("placement", self.placement, PLACEMENTS)
        check_choice("sharding", self.sharding, SHARDINGS)
        check_choice("queues", self.queues, QUEUES)
        check_choice("pull", self.pull, PULLS)
        check_choice("fold", self.fold, FOLDS)
        if isinstance(self.fold_workers, bool) or not isinstance(self.fold_workers, int) or self.fold_workers < 1:
            raise ConfigError(f"fold-workers: {self.fold_workers!r} must be a positive integer")
        if not self.server_s_per_byte >= 0:
            raise ConfigError(f"server-s-per-byte: {self.server_s_per_byte!r} must be >= 0")
        machines = self.machines  # checks the list
        if machines and (self.placement != "own" or len(machines) != self.servers):
            raise ConfigError(f"server-machines: {self.server_machines!r} names {len(machines)} machine(s) for "
                              f"{self.servers} server(s) placed {self.placement}; name one machine per server, "
                              "with placement own")

    @property
    def machines(self) -> tuple[int, ...]:
        """The machine indices ``server_machines`` names (empty: servers get new machines)."""
        items = [x.strip() for x in str(self.server_machines).split(",")] if str(self.server_machines).strip() else []
        if not all(x.isdigit() for x in items) or len(set(items)) != len(items):
            raise ConfigError(f"server-machines: {self.server_machines!r} must be distinct machine indices of the "
                              "cluster file, comma-separated (e.g. 3 or 0,4)")
        return tuple(int(x) for x in items)

    @property
    def fifo(self) -> bool:
        """One message at a time per endpoint and direction (``queues`` fifo, or auto with one server)."""
        return self.queues == "fifo" or (self.queues == "auto" and self.servers == 1)

    @property
    def per_tensor_pull_note(self) -> str:
        """The ``assumed:`` line of ``pull per-tensor`` (a strategy whose forward waits otherwise says so)."""
        return ("a tensor is pulled as soon as its server has updated it and the next forward of a layer waits only "
                "for its tensors (MXNet/BytePS; seed-code-facts C10)")

    @property
    def assumed(self) -> tuple[str, ...]:
        out = []
        if self.servers == 1:
            out.append("1 parameter server (seed 004 ran one)")
        elif self.sharding == "round-robin":
            out.append("tensors sharded round-robin over the servers in creation order (TF replica_device_setter's "
                       "default)")
        if self.machines:
            out.append(f"servers on machine(s) {self.server_machines} of the cluster file (server-machines), "
                       "the workers on the others")
        elif self.placement == "own":
            out.append("servers on their own CPU nodes (seed 004's 1 Gb/s setup)")
        how = f"queues {self.queues}" + (f" -> {'fifo' if self.fifo else 'concurrent'}" if self.queues == "auto"
                                         else "")
        if self.fifo:
            out.append(f"{how}: every server and worker sends one message at a time and receives one at a time, on "
                       "separate queues (full duplex; seed 004 publishes no code): the closed form carries the incast")
        else:
            out.append(f"{how}: messages share links concurrently (TF's gRPC, MXNet, BytePS): the flow fidelity prices "
                       "the incast, the closed form prices each message alone and misses it")
        if self.pull == "per-tensor":
            out.append(self.per_tensor_pull_note)
        if self.server_s_per_byte == SERVER_S_PER_BYTE:
            out.append("server reduce+update 1.43e-10 s/B x (workers+1) x tensor bytes (seed 004 Table 1, 1 Gb/s)")
        return tuple(out)


@register
class ParameterServer(Strategy):
    """Synchronous sharded parameter server, per-tensor push, update and pull (module docstring)."""

    name = "ps"
    summary = "per-tensor push to S sharded servers, server reduce + update, per-tensor pull (TF/MXNet/BytePS PS)"
    reference = "seed 004: Jeong et al. (Electronics 2021), Sec. 3, 6; Li et al. OSDI 2014; TF 1.13 device_setter.py"
    Params = PSParams

    def extra_nodes(self) -> int:
        return self.params.servers if self.params.placement == "own" else 0

    def server_ranks(self, workload, topology) -> tuple[int, ...]:
        p = self.params
        W = workload.n_ranks
        if p.placement == "colocated":
            if p.servers > W:
                raise ConfigError(f"servers: {p.servers} co-located servers need as many worker ranks; the run has "
                                  f"{W}: use at most {W} or --placement own")
            step = W // p.servers
            return tuple(k * step for k in range(p.servers))
        declared = tuple(r for r in topology.meta.get("server_ranks", ()) if r >= W)
        if not declared:  # a cluster with whole machines appended: the first rank of each serves
            firsts: dict = {}
            for r in range(W, topology.n_ranks):
                firsts.setdefault(topology.machine_of(r), r)
            declared = tuple(firsts.values())
        if len(declared) < p.servers:
            raise PlanError(f"ps: placement 'own' needs {p.servers} server nodes beyond the workers; "
                            f"the cluster has {len(declared)}")
        return declared[: p.servers]

    # Hooks that ps-layer-drop overrides.
    def worker_workload(self, workload):
        return workload

    def push_ready(self, it) -> tuple[int, ...]:
        """Per ready group, the op a worker's pushes of its tensors wait for: the group's gradient."""
        return it.bucket_ready

    def tensor_bytes(self, workload, tens) -> tuple[list[float], list[float]]:
        """Per tensor: bytes one worker pushes and bytes the server sends each worker."""
        n = [t.nbytes for t in tens]
        return n, list(n)

    def wire_bytes(self, workload) -> tuple[float, float]:
        """(push, pull) bytes per worker per iteration, whole model."""
        push, pull = self.tensor_bytes(workload, tensors(workload))
        return float(sum(push)), float(sum(pull))

    def server_seconds(self, workload, nbytes: float) -> float:
        """Reduce W gradients of ``nbytes`` and update the tensor."""
        return self.params.server_s_per_byte * (workload.n_ranks + 1) * nbytes

    def plan(self, workload, topology):
        p = self.params
        w = self.worker_workload(workload)
        W = w.n_ranks
        tens = tensors(w)
        if not tens:
            raise ConfigError(f"ps: trace {w.trace.model!r} has no layer with parameters; nothing to serve")
        if p.servers > len(tens):
            raise ConfigError(f"servers: {p.servers} is more than the {len(tens)} parameter tensors of "
                              f"{w.trace.model!r}; use at most {len(tens)} (a server would hold nothing)")
        servers = self.server_ranks(w, topology)
        owner = shard(tens, p.servers, p.sharding)
        push, pull = self.tensor_bytes(w, tens)
        groups = ready_groups(w)
        group_of = {j: g for g, layers in enumerate(groups) for j in layers}
        of_layer: dict[int, list[int]] = {}
        for i, t in enumerate(tens):
            of_layer.setdefault(t.layer, []).append(i)
        # push order: layers in gradient-ready order, a layer's variables in creation order
        order = [i for j in w.ready_order for i in of_layer.get(j, ())]
        arrival = sorted(range(W), key=lambda r: (w.scale(r), r))  # expected arrival order at a server
        fifo = p.fifo
        folded = worker_groups(p, w, topology, arrival, servers[0] if len(servers) == 1 else None)
        simulated = arrival if folded is None else [grp.rep for grp in folded]
        rest = {} if folded is None else {grp.rep: grp for grp in folded if grp.push_parts}
        b = builder_for(w, topology.n_ranks)
        its = {r: emit_forward_backward(b, w, r, buckets=groups) for r in sorted(simulated)}
        # The loops below emit ~10^6 ops at 1 024 workers: what does not depend on the worker is
        # looked up once per tensor (the same ops, in the same order, as the plain loops would make).
        ready_of = [(r, self.push_ready(its[r])) for r in simulated]
        transfer, compute = b.transfer, b.compute
        last_in: dict[int, int] = {}
        update = {}
        for i in order:
            t, k = tens[i], owner[i]
            s = servers[k]
            g, nbytes, label, stream = group_of[t.layer], push[i], f"push[{t.name}]", "push" if fifo else f"push{k}"
            arrived = []
            for r, bucket_ready in ready_of:
                ready = bucket_ready[g]
                if r == s:  # a co-located server reduces its own worker's gradient in place
                    arrived.append(ready)
                    continue
                grp = rest.get(r)
                if grp is not None:  # the window's other workers first: merged messages, then their latencies
                    for src, count in grp.push_parts:
                        last_in[k] = transfer(src, s, nbytes * count, after=(ready, last_in[k]) if k in last_in
                                              else (ready,), label=label, stream=stream)
                    if grp.push_wait > 0:
                        last_in[k] = compute(s, grp.push_wait, after=(last_in[k],), label=f"{label} latencies",
                                             stream="push-fold", category="comm")
                after = (ready, last_in[k]) if fifo and k in last_in else (ready,)
                last_in[k] = last = transfer(r, s, nbytes, after=after, label=label, stream=stream)
                arrived.append(last)
            update[i] = compute(s, self.server_seconds(w, t.nbytes), after=arrived, label=f"update[{t.name}]",
                                stream="server", category="server")
        every = tuple(update[i] for i in order)
        got: dict[int, dict[int, tuple[int, ...]]] = {r: {} for r in simulated}
        last_got: dict[int, int] = {}
        for i in order:
            t, s = tens[i], servers[owner[i]]
            dep = (update[i],) if p.pull == "per-tensor" else every
            nbytes, label = pull[i], f"pull[{t.name}]"
            for r in simulated:
                if r == s:
                    got[r][i] = dep
                    continue
                grp = rest.get(r)
                if grp is not None:  # on the server's pull stream: the merged messages, then the latencies
                    for dst, count in grp.pull_parts:
                        transfer(s, dst, nbytes * count, after=dep, label=label, stream="pull")
                    if grp.pull_wait > 0:
                        compute(s, grp.pull_wait, label=f"{label} latencies", stream="pull", category="comm")
                after = dep + ((last_got[r],) if fifo and r in last_got else ())
                last_got[r] = last = transfer(s, r, nbytes, after=after, label=label,
                                              stream="pull" if fifo else f"pull{r}")
                got[r][i] = (last,)
        fwd = [(w.forward_sum(g), f"forward#2[{w.layers[g[-1]].name}]", of_layer.get(g[-1], ()))
               for g in reversed(groups)]  # forward order; g[-1] (the first layer run) owns the group's tensors
        ends = {r: self._next_iteration(b, w, r, groups, fwd, got[r]) for r in sorted(simulated)}
        load = [0.0] * p.servers
        for i, t in enumerate(tens):
            load[owner[i]] += self.server_seconds(w, t.nbytes)
        split = sum(len(split_layer(layer)) > 1 for layer in w.layers)
        note = (f"{len(tens)} tensors, one push and one pull message each per worker ({split} layers split into "
                f"kernel/bias or gamma/beta from their shapes), {p.sharding} over {p.servers} server(s) "
                f"{', '.join(map(str, servers))}")
        last = max(simulated, key=lambda r: (w.scale(r), -r))
        fold_kw: dict = {}
        if folded is not None:
            fold_kw = {"measured_ranks": tuple(sorted(simulated)), "fold_groups": len(folded)}
        return b.build(kind="every iteration", strategy=self.name, servers=servers, tensors=len(tens),
                       period=(its[last].backward_end, ends[last]), iterations_in_plan=1,
                       period_ranks={r: (its[r].backward_end, ends[r]) for r in sorted(simulated)},
                       server_compute_s=max(load),
                       worker_compute_s=max((w.forward_s + w.backward_s) * w.scale(r) for r in range(W)), **fold_kw,
                       paths={"worker_fold": {"setting": p.fold, "used": folded is not None,
                                              "simulated_workers": len(simulated), "workers": W}},
                       assumed=(note,) if folded is None else (note, fold_note(W, folded)))

    @staticmethod
    def _next_iteration(b: PlanBuilder, w, r: int, groups, fwd, got) -> int:
        """Iteration 2 on worker ``r``: forward group by group, each after its tensors arrive; backward.

        ``fwd``: per group in forward order, (its forward seconds, its label, the tensors it waits for).
        """
        after: tuple[int, ...] = ()
        if w.dataload_s > 0:
            load = b.compute(r, w.dataload_s, label="dataload#2", stream="data" if w.dataload_overlap
                             else "compute", category="dataload")
            after = () if w.dataload_overlap else (load,)
        scale, compute = w.scale(r), b.compute
        for secs, label, owned in fwd:
            deps: tuple[int, ...] = ()
            for i in owned:
                deps += got[i]
            compute(r, secs * scale, after=after + deps, label=label)
            after = ()
        return emit_backward(b, w, r, buckets=groups, tag="#2")[-1]

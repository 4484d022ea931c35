"""Wiring of one run: trace -> workload -> strategy.plan -> engine -> Result.

``simulate(scenario)`` is the whole of ``simcomm run``; ``Context`` caches the
trace and clusters so that ``simcomm compare`` builds each only once.  Every
default the user did not choose is returned in ``Result.assumed``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from simcomm.errors import ConfigError, DoesNotFitError, SimcommError
from simcomm.gcpause import gc_paused
from simcomm.result import Breakdown, IterationKind, Result, breakdown, exposed_by, iteration_time
from simcomm.runtimes import Runtime, get_runtime
from simcomm.scenario import MemorySpec, Scenario, node_scales
from simcomm.scenario.spec import WorkloadSpec
from simcomm.stacks import apply_stack, get_stack
from simcomm.strategies.base import STRATEGIES, NotApplicable, make_params
from simcomm.topologies.nvlink import nvlink_notes
from simcomm.workload import build_workload

__all__ = ["simulate", "Context", "DATASETS", "run_plans", "BASELINE", "make_strategy", "baseline_choice",
           "resolve_precision"]

#: dataset name -> samples per epoch (seed 000 Sec. V)
DATASETS = {"cifar10": 50_000, "cifar100": 50_000, "imagenet": 1_281_167, "mnist": 60_000}
BASELINE = "allreduce"


@dataclass
class Context:
    """Caches shared by the runs of one command (trace, clusters).

    ``given_trace`` and ``given_topology`` let library callers (validation
    cases, notebooks) run the pipeline on a ready-made Trace or Topology
    instead of the scenario's names; the transport stack is still applied.
    """

    scenario: Scenario
    given_trace: object = None
    given_topology: object = None
    _trace: object = field(default=None, init=False, repr=False)
    _clusters: dict = field(default_factory=dict, init=False, repr=False)
    #: why NCCL runs over TCP sockets here ("" : it does not; None: not yet known)
    _sockets: str | None = field(default=None, init=False, repr=False)
    notes: list = field(default_factory=list)
    #: (raw, stack-applied) topology the last :func:`simulate` with this context ran on
    built: tuple | None = field(default=None, init=False, repr=False)

    def trace(self):
        if self._trace is None:
            self._trace = self.given_trace or load_trace_for(self.scenario, self.notes, self.device())
        return self._trace

    def device(self) -> str | None:
        """The cluster's GPU (or CPU) device name from its topology, None when it declares none."""
        if self.given_topology is not None:
            return self.given_topology.meta.get("device")
        return self.cluster(self.scenario.nodes, 0)[0].meta.get("device")

    def stack_choice(self) -> tuple[str, str | None]:
        """(stack name, why) : the user's, else the cluster preset's own (docs/strategies.md, "Stacks").

        NCCL on a network of plain Ethernet (``eth-*``) runs over TCP sockets: ``nccl`` becomes
        ``nccl-socket``, and why says so (:func:`simcomm.links.ethernet.socket_transport_reason`).
        """
        name, why = self._stack_named()
        if name == "nccl" and self.transport_switch() is not None:
            return "nccl-socket", self.transport_switch()
        return name, why

    def _stack_named(self) -> tuple[str, str | None]:
        if self.scenario.stack.name:
            return self.scenario.stack.name, None
        from simcomm.topologies.presets import default_stack

        if self.given_topology is not None or _is_file(self.scenario.cluster):
            return "nccl", "GPU clusters run NCCL unless told otherwise"
        return default_stack(self.scenario.cluster)

    def transport_switch(self) -> str | None:
        """Why NCCL runs over TCP sockets on this cluster's network (None: it has RDMA or a plugin)."""
        if self._sockets is None:
            self.cluster(self.scenario.nodes, 0)  # sets it from the raw cluster before the stack is applied
        return self._sockets or None

    def stack(self):
        """The scenario's transport stack with its overrides."""
        spec = self.scenario.stack
        return get_stack(self.stack_choice()[0]).with_overrides(spec.efficiency, spec.overhead, spec.cpu_per_byte,
                                                               spec.collectives)

    def runtime(self) -> Runtime:
        """How the engine runs collectives on this stack (its rules and NCCL overrides)."""
        spec = self.scenario.stack
        runtime = get_runtime(self.stack().collectives)
        given = {"nccl_algo": spec.nccl_algo, "nccl_proto": spec.nccl_proto}
        for which in (k for k, v in given.items() if v and k not in runtime.settings):
            # NCCL_ALGO/NCCL_PROTO mean nothing to MPI or gloo: refuse rather than ignore them
            raise ConfigError(f"stack.{which}: applies to NCCL's collectives only; this run uses {runtime.name}'s "
                              f"(stack {self.stack().name}); use --stack nccl or drop --{which.replace('_', '-')}")
        return runtime.configured(**{k: v for k, v in given.items() if k in runtime.settings})

    def calibration_notes(self, nodes: int, extra: int) -> tuple[str, ...]:
        """How the calibrated link file (``links``) was put on this cluster (empty without one)."""
        self.cluster(nodes, extra)
        return self._clusters[(nodes, extra)][2]

    def cluster(self, nodes: int, extra: int):
        """(raw, stack-applied) topology of ``nodes`` training nodes plus ``extra`` server nodes."""
        key = (nodes, extra)
        if key not in self._clusters:
            topo = build_cluster(self.scenario, nodes, extra, base=self.given_topology)
            if self._sockets is None:
                from simcomm.links.ethernet import socket_transport_reason

                self._sockets = socket_transport_reason(topo.links.values()) or ""
            eff = apply_stack(topo, self.stack())
            # Calibrated links go on after the stack: their latency split per hop accounts for the
            # stack's own per-hop overheads on the rest of the route, so a route adds up to the fit.
            notes: tuple[str, ...] = ()
            path = self.scenario.network.links
            if path:
                from simcomm.topologies.calibrated import with_calibrated_links

                classes = _link_classes(path)  # read once, put on both views of the cluster
                topo = with_calibrated_links(topo, classes, path)[0]
                eff, notes = with_calibrated_links(eff, classes, path)
                notes = tuple(notes)
            self._clusters[key] = (topo, eff, notes)
        return self._clusters[key][:2]


def load_trace_for(scn: Scenario, notes: list, device: str | None = None):
    """The trace of ``--trace FILE``, a bundled trace name, or the model on the cluster's own device.

    With no ``--trace``, the model (``--model``, default ResNet-50) is the bundled
    trace for the cluster's device or a calibrated roofline synthesis on it
    (:func:`simcomm.traces.trace_for`), computing in the precision's dtype; a
    cluster that names no device known to the trace catalogue gets the V100 trace,
    said so.  The choice is printed as an ``assumed:`` line.
    """
    from simcomm import traces
    from simcomm.errors import UnknownNameError
    from simcomm.llm.zoo import TRANSFORMERS
    from simcomm.precision import PRECISIONS

    given = scn.trace or (scn.model if scn.model in traces.BUNDLED and scn.model not in traces.MODELS else None)
    if given and scn.workload.attention:  # a ready trace is used as priced: refuse rather than ignore
        raise ConfigError(f"attention: prices a zoo transformer's synthesised trace; trace {given!r} is used as "
                          "given (drop attention, or name a zoo transformer with --model)")
    if given and scn.shape.any():
        first = "model_config" if scn.shape.config else next(iter(scn.shape.given()))
        raise ConfigError(f"{first}: the [model] keys shape a transformer the run synthesises; trace {given!r} is "
                          "used as given (drop them, or name a zoo transformer with --model)")
    if scn.trace:
        if not Path(scn.trace).exists():
            raise ConfigError(f"trace: file {scn.trace!r} does not exist")
        return traces.load_trace(scn.trace)
    if scn.model and scn.model in traces.BUNDLED and scn.model not in traces.MODELS:
        notes.append(f"trace: bundled {scn.model} (named with --model)")
        return traces.load_bundled(scn.model)
    shape = None
    if scn.shape.any():  # a transformer by its shape: a zoo model changed, a Hugging Face config, or keys alone
        from simcomm.llm.shape import resolve_shape

        shape, lines = resolve_shape(scn.model, scn.shape)
        notes.extend(lines)
    model = shape.name if shape is not None else scn.model or "resnet50"
    if shape is None and model not in traces.MODELS:
        raise UnknownNameError("model", model, set(traces.BUNDLED.names()) | set(traces.MODELS.names()))
    if shape is None and model in TRANSFORMERS:
        from simcomm.llm.shape import params_line

        notes.append(params_line(TRANSFORMERS[model][0]))
    dtype = PRECISIONS[scn.workload.precision].compute if scn.workload.precision else "fp32"
    batch = scn.batch if scn.workload.scaling == "weak" else None
    if device is not None:
        try:
            traces.device_for_cluster(device)
        except UnknownNameError:
            notes.append(f"trace: the cluster's device {device!r} has no compute model; using the V100's")
            device = None
    from simcomm.traces.synth import check_fp8

    check_fp8(dtype, traces.DEVICES.get(traces.device_for_cluster(device or "v100")),
              None if shape is not None else model, "precision")
    trace, note = traces.trace_for(model, device or "v100", batch, dtype, scn.workload.attention, config=shape)
    notes.append(note + ("" if scn.model or shape is not None else " (the default model; --model to change)"))
    return trace


def _is_file(cluster: str) -> bool:
    from simcomm.scenario.resolve import file_cluster

    return file_cluster(cluster)


def build_cluster(scn: Scenario, nodes: int, extra: int = 0, base=None):
    """A topology from a preset name or a cluster file (or ``base``), with ``extra`` server nodes.

    Server nodes (a parameter server's ``placement own``) are listed in
    ``meta["server_ranks"]``, after every training rank:

    * a preset that declares its own (``seed004-ps``) keeps them;
    * other presets are built with ``extra`` more machines, whose first ranks serve;
    * a cluster file (or ``base``) gets each missing server as a new machine
      with one CPU rank (Haswell-class γ) wired to the network exactly as
      training rank 0 is: rank 0's shortest path to the first switch it reaches
      over a network link (through intranode links and NICs, never other ranks)
      is copied and joined to that switch with the same link classes.  A file
      whose rank 0 reaches no such switch (ranks wired only to each other) is
      refused in one line.  Routing becomes minimum-hop ECMP on the grown graph.

    ``extra = 0`` with a preset gives ``nodes`` machines as before.
    """
    if (base is not None or _is_file(scn.cluster)) and scn.nvlink.any():
        raise ConfigError(f"nvl_domain/nvl_split: cluster {scn.cluster!r} is a topology file; NVLink domains apply "
                          "to multi-node NVLink presets only (edit the file's nvlink_domain instead)")
    if (base is not None or _is_file(scn.cluster)) and scn.network.any():
        given = ", ".join(k for k in ("inter", "intra", "nic", "nics_per_node", "topology", "oversubscription")
                          if getattr(scn.network, k) is not None)
        raise ConfigError(f"{given}: cluster {scn.cluster!r} is a topology file; network overrides apply to "
                          "two-level presets only (edit the file instead)")
    named = _server_machines(scn)
    if named and base is None and not _is_file(scn.cluster):
        raise ConfigError(f"server-machines: names machines of a cluster file; on preset {scn.cluster!r} the "
                          "servers get machines of their own after the workers (drop server-machines)")
    if base is not None:
        topo = base
    elif _is_file(scn.cluster):
        from simcomm.topologies.custom import load_topology_file

        topo = load_topology_file(scn.cluster)  # the file fixes nodes and ranks itself
    else:
        topo = _preset(scn, nodes)
        if extra and not topo.meta.get("server_ranks"):
            n0 = topo.n_ranks
            topo = _preset(scn, nodes + extra)
            firsts: dict = {}
            for r in range(n0, topo.n_ranks):
                firsts.setdefault(topo.machine_of(r) if topo.machine_of(r) is not None else ("r", r), r)
            topo.meta["server_ranks"] = tuple(firsts.values())[:extra]
            return topo
    if named:
        from simcomm.topologies.named_servers import serve_on_machines

        topo = serve_on_machines(topo, named)
    need = extra - len(topo.meta.get("server_ranks", ()))
    if need <= 0:
        return topo

    from simcomm.stacks.base import INTRANODE_FAMILIES
    from simcomm.topologies.base import ShortestPathRouter, Topology
    from simcomm.topologies.devices import device_gamma

    g0, r0 = topo.graph, topo.ranks[0]
    idx = topo.node_index
    net = {name: lc.family not in INTRANODE_FAMILIES for name, lc in topo.links.items()}
    parent, queue, hit = {r0: None}, [r0], None
    while queue and hit is None:  # BFS from rank 0 over its intranode links to the first network switch
        here = queue.pop(0)
        for n in sorted(g0.adj[here], key=idx.__getitem__):
            kind, link = g0.nodes[n]["kind"], g0.edges[here, n]["link"]
            if n in parent or kind == "rank":
                continue
            if net[link] and kind == "switch":
                parent[n], hit = here, n
                break
            if not net[link] or kind == "nic":
                parent[n] = here
                queue.append(n)
    if hit is None:
        raise ConfigError(f"cluster {topo.name!r}: placement 'own' needs a network switch to attach a "
                          f"parameter-server node to, and rank 0 ({r0!r}) reaches none without crossing another "
                          "rank; add a switch or use --placement colocated")
    path = [hit]
    while parent[path[-1]] is not None:
        path.append(parent[path[-1]])
    path.reverse()  # r0, ..., hit
    g = g0.copy()
    machines = [d.get("machine") for _, d in g.nodes(data=True) if isinstance(d.get("machine"), int)]
    new_m = max(machines, default=-1) + 1
    servers = list(topo.meta.get("server_ranks", ()))
    ranks = list(topo.ranks)
    for k in range(need):
        tag = f"ps-server{k}"
        while any(n == tag or str(n).startswith(tag + "/") for n in g):
            tag += "'"
        names = [tag] + [f"{tag}/{n}" for n in path[1:-1]]
        g.add_node(tag, kind="rank", machine=new_m + k, gamma=device_gamma("haswell", 1))
        for src, copy in zip(path[1:-1], names[1:]):
            g.add_node(copy, kind=g0.nodes[src]["kind"], machine=new_m + k)
        for a, b2, (u, v) in zip(names, names[1:] + [hit], zip(path, path[1:])):
            g.add_edge(a, b2, link=g0.edges[u, v]["link"])
        servers.append(len(ranks))
        ranks.append(tag)
    return Topology(topo.name, g, dict(topo.links), tuple(ranks), router=ShortestPathRouter(),
                    meta={**topo.meta, "server_ranks": tuple(servers), "servers_attached": need})


def _server_machines(scn: Scenario) -> tuple[int, ...]:
    """The machines ``ps``'s ``server_machines`` names (empty for every other strategy)."""
    if not scn.options.get("server_machines"):
        return ()
    return make_strategy(scn.strategy, dict(scn.options)).params.machines


def _preset(scn: Scenario, nodes: int):
    """A preset cluster of ``nodes`` machines with the scenario's network overrides applied."""
    from simcomm.topologies import presets

    topo = presets.preset(scn.cluster, nodes=nodes, gpus_per_node=scn.gpus_per_node, nvlink=scn.nvlink)
    return with_network(topo, scn.network, scn.cluster) if scn.network.any() else topo


def _link_classes(path: str) -> dict:
    """The classes of a calibrated link file (``links``); a missing or special file is one line."""
    from simcomm.links.toml_file import load_link_file

    if not Path(path).is_file():
        raise ConfigError(f"links: file {path!r} does not exist or is not a regular file")
    return load_link_file(path)


def _nic_attach(topo) -> str | None:
    g = topo.graph
    for u, v, name in g.edges(data="link"):
        if {g.nodes[u].get("kind"), g.nodes[v].get("kind")} == {"rank", "nic"}:
            return name
    return None


def with_network(base, net, cluster: str):
    """``base`` (a two-level preset) rebuilt with the network overrides ``net`` (:class:`NetworkSpec`)."""
    from simcomm.links import link_class
    from simcomm.topologies.two_level import two_level

    meta = base.meta
    if meta.get("builder") != "two-level":
        raise ConfigError(f"inter/intra/nic/nics_per_node/topology/oversubscription: cluster {cluster!r} is not a "
                          "two-level preset; these overrides need one")
    for key in ("inter", "intra", "nic"):
        if getattr(net, key) is not None:
            link_class(getattr(net, key))  # an unknown link class: one line listing the valid ones
    inter = net.topology or meta["inter"]
    opts = dict(meta.get("inter_options") or {}) if inter == meta["inter"] else {}
    if net.oversubscription is not None:
        if net.topology is None and meta["inter"] == "switch":
            inter, opts = "fat-tree", {}
        if inter != "fat-tree":
            raise ConfigError(f"oversubscription: applies to topology fat-tree only, not {inter!r}")
        opts["oversubscription"] = net.oversubscription
    return two_level(meta["nodes"], meta["gpus_per_node"], intra=meta["intra"],
                     intra_link=net.intra or meta["intra_link"], nic_link=net.inter or meta["nic_link"],
                     nics_per_node=net.nics_per_node or meta["nics_per_node"],
                     nic_attach=net.nic or _nic_attach(base) or "pcie4", inter=inter, inter_options=opts,
                     device=meta.get("device"), name=base.name)


def dataset_size_for(scn: Scenario, trace, notes: list) -> int | None:
    """Samples per epoch: the scenario's, else the trace's dataset, else a guess from the input (images only)."""
    if scn.dataset_size is not None:
        return scn.dataset_size
    if trace.meta.get("transformer"):  # a language model's epoch is a token budget no default can guess
        notes.append("epoch: not reported (a language model has no default dataset; give --dataset-size in "
                     "sequences)")
        return None
    name = str(trace.meta.get("dataset", "")).lower().replace("-", "")
    if name not in DATASETS:
        shape = trace.layers[0].input_shape if trace.layers else ()
        name = "cifar10" if shape and max(shape[-2:] or (0,)) <= 32 else "imagenet"
    notes.append(f"dataset size {DATASETS[name]} ({name}, seed 000)")
    return DATASETS[name]


def _train_ranks(topo, nodes: int, extra: int) -> int:
    """Training ranks (they come first): all but server nodes' ranks and, on presets, machines past ``nodes``."""
    servers = set(topo.meta.get("server_ranks", ()))
    custom = topo.meta.get("builder") == "custom"
    if not servers and (not extra or custom):
        return topo.n_ranks
    return sum(1 for r in range(topo.n_ranks)
               if r not in servers and (custom or topo.machine_of(r) is None or topo.machine_of(r) < nodes))


def run_plans(kinds, topo, n_train: int, fidelity: str, seed: int, analytic: bool = True,
              on_timeline=None, record_link_usage: bool = False, comm_cpu: float = 0.0,
              resolution: float = 0.0, merged: list | None = None, jitter: float = 0.0,
              runtime: Runtime | None = None, ran: dict | None = None, rank_means: bool = False,
              busiest: int = 0, comm_streams: dict | None = None, progress=None):
    """Simulate each (weight, plan); returns IterationKinds.

    ``on_timeline(label, weight, plan, timeline, topology)`` is called for each
    kind as it is simulated (``simcomm run --timeline`` writes them out).
    ``record_link_usage`` asks the engine for bytes/s per link family over time
    (``timeline.meta["link_usage"]``).  ``comm_cpu`` is the stack's host CPU cost
    per byte (engine option ``comm_cpu``, flow fidelity).  ``resolution`` is the
    engine's event resolution (flow fidelity); when given, ``merged`` receives
    the number of flows each simulation moved to a merged event.  ``jitter`` > 0
    (coefficient of variation of every rank's compute, drawn afresh each
    iteration) simulates each kind as :data:`simcomm.jitter.ITERATIONS` chained
    copies and reports their mean spacing (:mod:`simcomm.jitter`).  ``runtime`` is how
    collectives run on the stack (:class:`~simcomm.runtimes.Runtime`); ``ran``
    receives, per (collective, algorithm asked), what the engine ran and how often.
    ``rank_means``: also record each kind's mean over training ranks of their finish
    times (:func:`rank_mean`; not with ``jitter``).  ``busiest``: record that many of the
    busiest directed links of each kind, with their utilisation over the iteration.  ``progress(stage)``,
    when given, is told each engine run before it starts (a command line's progress bar).
    """
    from simcomm import engine
    from simcomm import jitter as jit

    out = []
    from simcomm.engine.options import EngineOptions

    # One options object per run: the flow fidelity's CPU cost and event resolution, the stack's runtime.
    opts = EngineOptions(runtime=runtime, record_link_usage=record_link_usage, busiest_links=busiest,
                         **({"comm_cpu": comm_cpu, "resolution": resolution} if fidelity == "flow" else {}))
    for n_kind, (weight, plan) in enumerate(kinds):
        run_plan, copies = plan, None
        if jitter and plan.info.measured_ranks is not None:
            # identical replicas folded into one would all draw replica 0's compute: no straggler among them
            raise ConfigError("workload.compute_jitter: draws every rank's compute separately, but this plan "
                              "simulates one data-parallel replica for all; use --opt replicas=all (or auto)")
        if jitter:
            run_plan, copies = jit.chain(plan, jit.draw(jitter, jit.ITERATIONS, plan.n_ranks, (seed, n_kind)))
        run_opts = replace(opts, traffic_weights=plan.info.traffic_weights) if plan.info.traffic_weights else opts
        of = f" {n_kind + 1}/{len(kinds)}" if len(kinds) > 1 else ""
        if progress is not None:
            progress(f"{fidelity} simulation{of}: {len(run_plan.ops):,} ops on {topo.n_ranks:,} ranks")
        tl = engine.simulate(run_plan, topo, fidelity=fidelity, seed=seed, options=run_opts)
        if merged is not None:
            merged.append(int(tl.meta.get("merged_flows", 0)))
        if ran is not None:
            for kind, asked, what, count in tl.meta.get("algorithms", ()):
                ran.setdefault((kind, asked), {}).setdefault(what, 0)
                ran[(kind, asked)][what] += count
        if on_timeline is not None:
            on_timeline(plan.info.kind, float(weight), run_plan, tl, topo)
        if copies is None:
            t, window = iteration_time(plan, tl)
            per = max(1, plan.info.iterations_in_plan)
        else:
            t, window = jit.per_iteration(tl.end, copies)
            per = len(copies)
        lb = {k: float(v) / per for k, v in sorted(tl.link_class_bytes.items())}
        est = t if fidelity == "analytic" else None
        if analytic and fidelity != "analytic":
            if progress is not None:
                progress(f"closed form{of}")
            try:
                # Only its times are needed: without link bytes the closed forms need no event loop.
                est = iteration_time(plan, engine.simulate(plan, topo, fidelity="analytic", seed=seed,
                                                           options=EngineOptions(runtime=runtime, link_bytes=False)))[0]
            except (NotImplementedError, SimcommError):
                est = None
        bd = breakdown(run_plan, tl, n_train, window)
        if copies is not None:  # the window spans len(copies) - 1 iterations
            bd = bd.scaled(1.0 / max(1, len(copies) - 1))
        rmean = rank_mean(plan, tl, n_train) if rank_means and copies is None else None
        hot = tuple((a, b, c, busy / per / t if t > 0 else 0.0) for a, b, c, _, busy in tl.meta.get("busiest_links", ()))
        split = {}
        if comm_streams and copies is None:
            split = exposed_by(plan, tl, n_train, window, comm_streams)
        out.append(IterationKind(plan.info.kind, float(weight), t, bd, lb, est, rmean, hot, split))
    return out


def rank_mean(plan, tl, n_train: int) -> float:
    """Mean over training ranks of the time each finishes the plan's iteration (its period, if it has one)."""
    import numpy as np

    from simcomm.ops import Collective, Compute, Transfer

    per = plan.info.period_ranks
    if per:
        return float(np.mean([float(tl.end[b] - tl.end[a]) for r, (a, b) in sorted(per.items()) if r < n_train]))
    measured = plan.info.measured_ranks  # ranks that stand for all (a plan of one replica of several)
    f = np.zeros(n_train)
    for op in plan.ops:
        members = (op.rank,) if isinstance(op, Compute) else (op.src,) if isinstance(op, Transfer) \
            else op.ranks if isinstance(op, Collective) else ()
        for r in members:
            if r < n_train:
                f[r] = max(f[r], tl.end[op.id])
    if measured is not None:
        return float(np.mean(f[[r for r in measured if r < n_train]]))
    return float(np.mean(f))


def _mean(kinds) -> tuple[float, Breakdown, dict, float | None]:
    total = sum(k.weight for k in kinds)
    mean = sum(k.weight * k.time_s for k in kinds) / total
    bd = Breakdown()
    lb: dict = {}
    for k in kinds:
        bd = bd.plus(k.breakdown.scaled(k.weight / total))
        for fam, v in k.link_bytes.items():
            lb[fam] = lb.get(fam, 0.0) + v * k.weight / total
    est = None
    if all(k.analytic_s is not None for k in kinds):
        est = sum(k.weight * k.analytic_s for k in kinds) / total
    return mean, bd, lb, est


def resolve_precision(scn: Scenario, trace, notes: list) -> str | None:
    """The wire dtype the workload uses (None: the trace's own), with an assumed line saying why."""
    from simcomm.precision import PRECISIONS

    wl = scn.workload
    prec = PRECISIONS[wl.precision] if wl.precision else None
    computes = (trace.meta or {}).get("compute_dtype", trace.dtype)  # an FP8 trace's dtype is its bf16 activations
    if prec is not None and prec.compute != computes and trace.dtype in ("fp32", "fp16", "bf16"):
        notes.append(f"precision {prec.name}: the trace computes in {computes} and is used as given "
                     f"(synthesise one with --model to compute in {prec.compute})")
    wire = wl.wire_dtype or (prec.wire if prec else None)
    if wl.wire_dtype:
        notes.append(f"wire dtype {wl.wire_dtype} (given)")
    elif prec is not None:
        notes.append(f"precision {prec.name}: {prec.summary}")
    else:
        notes.append(f"wire dtype {trace.dtype} (the trace's dtype; set --precision or --wire-dtype for mixed "
                     f"precision)")
    return wire


def _baseline_misfit(ref, strategy, w, trace, ctx, scn: Scenario) -> str | None:
    """Why the baseline's state would not fit in GPU memory (its own check's words), or None.

    The strategy was checked before it ran; a baseline is simulated whatever its memory (plain data
    parallelism of a 175B model needs terabytes per GPU), so the run says when it is hypothetical.
    """
    if ref is strategy or (ref.name == strategy.name and ref.params == strategy.params):
        return None
    try:
        memory_check(ref, w, trace, ctx.device(), replace(scn.memory, policy="refuse"), [])
    except DoesNotFitError as exc:
        return exc.why
    return None


def memory_budget(device: str | None, spec: MemorySpec, replica: bool = False):
    """The :class:`~simcomm.memory.fit.Budget` a run is judged on, or None when nothing names a GPU's memory
    (``gpu_memory`` overrides the cluster's device's).  The margin is ``memory_margin``, else
    :data:`~simcomm.memory.fit.DEFAULT_MARGIN` for a layout's peak and 0 for a data-parallel ``replica``'s
    estimate (docs/traces.md validates it on published batch limits without one)."""
    from simcomm import traces
    from simcomm.errors import UnknownNameError
    from simcomm.memory.fit import DEFAULT_MARGIN, Budget
    from simcomm.units import format_size

    margin = spec.margin if spec.margin is not None else 0.0 if replica else DEFAULT_MARGIN
    if spec.gpu_memory is not None:
        return Budget(spec.gpu_memory, format_size(spec.gpu_memory), margin, spec.policy, given=True)
    if device is None:
        return None
    try:
        dev = traces.get_device(traces.device_for_cluster(device))
    except UnknownNameError:
        return None
    if dev.kind != "gpu" or not dev.memory:
        return None
    return Budget(dev.memory, getattr(dev, "label", dev.name), margin, spec.policy)


def memory_check(strategy, w, trace, device: str | None, spec: MemorySpec, notes: list) -> dict:
    """Check the strategy's peak GPU memory (simcomm.memory) on the device: note its line, return its breakdown.

    A strategy that shards state gives its own peak (``Strategy.memory``); otherwise a data-parallel
    replica holds the whole model (:mod:`simcomm.memory.replicated`; strategies that shard only their
    update, PCNN's or a parameter server's, need less, so this is an upper bound).  ``memory = refuse``
    raises one DoesNotFitError line; ``warn`` notes the shortfall; ``off`` notes the estimate unchecked.
    """
    from simcomm.memory import replicated
    from simcomm.memory.fit import check

    own = strategy.memory(w)
    budget = memory_budget(device, spec, replica=own is None)
    if isinstance(own, str):
        notes.append(own)
        return {}
    if own is None:
        if budget is None:
            return {}
        try:
            est = replicated.estimate(trace, w.batch, optimizer=str(trace.meta.get("optimizer", "sgd")))
        except SimcommError:
            notes.append("memory: no estimate (the trace lacks layer shapes)")
            return {}
        peak = est.peak()
    else:
        peak = own
    if budget is None:
        notes.append(f"memory: {peak.total / 1e9:.4g} GB per GPU, not checked (the cluster names no GPU whose "
                     f"memory is known; --gpu-memory gives one) ({peak.what}: {peak.breakdown()})")
        return peak.to_dict()
    notes.append(check(peak, budget))
    if budget.policy != "off" and budget.margin:
        notes.append(budget.assumed())
    return peak.to_dict(budget)


def make_strategy(name: str, options: dict):
    cls = STRATEGIES.get(name)
    return cls(make_params(cls, options))


def scenario_options(scn: Scenario) -> dict:
    """The strategy's options with the scenario's ``framework`` (simcomm.frameworks) for a strategy that takes
    one; with a framework, a ``--bucket-mb`` other than the default is its gradient bucket (``grad_bucket_mb``)."""
    options = dict(scn.options)
    framework = scn.workload.framework
    if framework is None:
        return options
    cls = STRATEGIES.get(scn.strategy)
    if "framework" not in {f.name for f in dataclasses.fields(cls.Params)}:
        takes = sorted(n for n in STRATEGIES.names() if "framework" in
                       {f.name for f in dataclasses.fields(STRATEGIES.get(n).Params)})
        raise ConfigError(f"framework: strategy {scn.strategy!r} does not take a framework (it sets how ZeRO and "
                          f"data parallelism are scheduled; strategies that take one: {', '.join(takes)})")
    options["framework"] = framework
    if scn.workload.bucket_mb != WorkloadSpec().bucket_mb:
        options.setdefault("grad_bucket_mb", scn.workload.bucket_mb)
    return options


def baseline_choice(scn: Scenario, strategy) -> tuple[object | None, str]:
    """(baseline strategy or None, why): the user's ``--baseline``, else the strategy's paper baseline."""
    spec = scn.baseline
    if spec is not None and spec.none:
        return None, "no baseline (--baseline none)"
    if spec is not None:
        try:
            return make_strategy(spec.strategy, spec.option_dict()), "chosen with --baseline"
        except ConfigError as exc:
            raise ConfigError(f"baseline: {exc}") from None
    name, options, why = strategy.paper_baseline
    return make_strategy(name, dict(options)), why


def _check_wire(strategy, wire: str | None, trace) -> None:
    allowed = type(strategy).wire_dtypes
    dtype = wire or trace.dtype
    if allowed is not None and dtype not in allowed:
        raise ConfigError(f"wire_dtype: {dtype} is narrower than strategy {strategy.name!r} allows; valid "
                          f"choices: {', '.join(allowed)}")


def _ran_lines(ran: dict, runtime) -> list[str]:
    """One assumed line per (collective, algorithm asked) saying what ran, e.g. NCCL's choices."""
    out = []
    how = runtime.how  # whose rules chose, e.g. "NCCL's tuning model within NCCL_ALGO=ring"
    for (kind, asked), what in sorted(ran.items()):
        runs = ", ".join(f"{w} x{n}" if len(what) > 1 else w for w, n in sorted(what.items()))
        if asked == "auto":
            out.append(f"{kind} algorithm auto -> {runs} ({how})")
        elif runs != asked:
            out.append(f"{kind} algorithm {asked} -> {runs}")
    return out


def simulate(scn: Scenario, *, ctx: Context | None = None, baseline: bool = True,
             analytic: bool = True, on_timeline=None, busiest_links: int = 0, topology=None,
             trace=None, progress=None) -> Result:
    """Simulate ``scn`` and return its Result (NotApplicable is reported in the Result).

    ``baseline=False`` skips the "speedup vs" run.  ``topology``/``trace``: a ready-made
    Topology or Trace for library callers (a validation case's paper cluster) instead of the
    scenario's names; everything else is the unchanged ``simcomm run`` path.  ``busiest_links``:
    how many of the busiest directed links to report.  ``on_timeline`` receives each simulated
    kind of iteration of the chosen strategy (not of the baseline), see :func:`run_plans`.  ``progress(stage)``
    is told each stage (setup, plan, each engine run) as it begins, for a progress bar.  Runs with the cyclic garbage collector paused
    (:mod:`simcomm.gcpause`: plans of 10^5 ops and their runs leave no cycles).
    """
    if topology is not None or trace is not None:
        if ctx is not None:
            raise ValueError("simulate: give a ready-made topology/trace or a ctx, not both")
        ctx = Context(scn, given_trace=trace, given_topology=topology)
    with gc_paused():
        return _simulate(scn, ctx, baseline, analytic, on_timeline, busiest_links, progress)


def _simulate(scn: Scenario, ctx: Context | None, baseline: bool, analytic: bool, on_timeline,
              busiest_links: int = 0, progress=None) -> Result:
    def stage(what: str) -> None:
        if progress is not None:
            progress(what)

    stage("trace and cluster")
    ctx = ctx or Context(scn)
    strategy = make_strategy(scn.strategy, scenario_options(scn))
    trace = ctx.trace()
    extra = strategy.extra_nodes()
    raw, topo = ctx.cluster(scn.nodes, extra)
    ctx.built = (raw, topo)
    n_train = _train_ranks(raw, scn.nodes, extra)
    gpn = max(1, n_train // scn.nodes)
    notes = list(ctx.notes) + list(scn.assumed) + list(ctx.calibration_notes(scn.nodes, extra))
    notes += [line for line in nvlink_notes(raw) if line not in notes]
    if scn.gpus_per_node is None:
        notes.append(f"{gpn} GPU(s) per node ({scn.cluster} preset)")
    stack_name, why = ctx.stack_choice()
    stack = ctx.stack()
    spec = scn.stack
    if why is not None:
        notes.append(f"transport stack {stack_name}: {why} ({stack.summary})")
    elif spec.name == "nccl" and spec.efficiency is None and spec.overhead is None:
        notes.append("transport stack nccl (96 % of network line rate, 3 us per message)")
    wl = scn.workload
    scale = wl.compute_scale or node_scales(wl, scn.nodes)
    if wl.heterogeneous:
        notes.append(f"per-node compute scales {', '.join(f'{x:.3g}' for x in scale[:8])}"
                     f"{', ...' if len(scale) > 8 else ''} (straggler_scale {wl.straggler_scale:g} on node "
                     f"{wl.straggler_node}, jitter {wl.jitter:g} {wl.jitter_dist} seed {wl.jitter_seed})")
    if scale and len(scale) == scn.nodes and gpn > 1:
        scale = tuple(s for s in scale for _ in range(gpn))
    dataset = dataset_size_for(scn, trace, notes)
    wire = resolve_precision(scn, trace, notes)
    _check_wire(strategy, wire, trace)
    strong = wl.scaling == "strong"
    w = build_workload(trace, n_train, batch=None if strong else scn.batch,
                       global_batch=scn.batch if strong else None, scaling=wl.scaling,
                       bucket_mb=wl.bucket_mb, dataload_s=wl.dataload_s, dataload_overlap=wl.dataload_overlap,
                       compute_scale=scale or None, dataset_size=dataset, wire_dtype=wire,
                       compute_jitter=wl.compute_jitter)
    batch_note = len(notes) if scn.batch is None else None  # placed once the plans say whether they use it
    memory = memory_check(strategy, w, trace, ctx.device(), scn.memory, notes)
    common = dict(strategy=scn.strategy, options=dict(scn.options), nodes=scn.nodes, gpus_per_node=gpn,
                  n_ranks=n_train, cluster=scn.cluster, model=trace.model, batch=w.batch,
                  fidelity=scn.fidelity, stack=stack_name)
    stage(f"planning {scn.strategy} on {topo.n_ranks:,} ranks")
    try:
        plans = strategy.iterations(w, topo)
    except NotApplicable as exc:
        if batch_note is not None:
            notes.insert(batch_note, f"per-rank batch {w.batch} (the trace's)")
        return Result(**common, assumed=tuple(notes), not_applicable=str(exc), memory=memory)
    # A layout that trains a global batch of its own (megatron's global_batch) does not use the trace's
    # per-rank batch: saying it would contradict the layout's own line.
    if batch_note is not None and all(plan.info.samples in (None, w.global_batch) for _, plan in plans):
        notes.insert(batch_note, f"per-rank batch {w.batch} (the trace's)")
    assumed = notes + list(strategy.assumed())
    for _, plan in plans:
        for line in plan.info.assumed:
            if line not in assumed:
                assumed.append(line)
    cpu = stack.cpu_per_byte
    if cpu:
        where = " (the closed form omits it)" if scn.fidelity == "flow" else " (flow fidelity only: not applied)"
        assumed.append(f"host CPU cost of communication {cpu * 1e9:.3g} ns per byte sent or received, "
                       f"charged to the compute it overlaps{where}")
    if wl.compute_jitter:
        from simcomm.jitter import ITERATIONS

        assumed.append(f"compute jitter: every rank's compute drawn afresh each iteration (normal, cv "
                       f"{wl.compute_jitter:.3g}); each kind is the mean of {ITERATIONS} chained iterations "
                       f"(the closed form omits it)")
    merged: list[int] = []
    ran: dict = {}
    runtime = ctx.runtime()
    kinds = tuple(run_plans(plans, topo, n_train, scn.fidelity, scn.seed, analytic, on_timeline,
                            record_link_usage=on_timeline is not None, comm_cpu=cpu,
                            resolution=scn.resolution, merged=merged, jitter=wl.compute_jitter,
                            runtime=runtime, ran=ran, rank_means=bool(scale), busiest=busiest_links,
                            comm_streams=type(strategy).comm_streams, progress=progress))
    assumed += _ran_lines(ran, runtime)
    mean, bd, lb, est = _mean(kinds)
    _check_finite(scn, mean * (w.iterations_per_epoch or 1), est, lb)  # the epoch too: iterations x mean
    split: dict[str, float] = {}
    if kinds and all(k.exposed_by for k in kinds):
        total_w = sum(k.weight for k in kinds)
        for k in kinds:
            for name, v in k.exposed_by.items():
                split[name] = split.get(name, 0.0) + k.weight * v / total_w
    rmean = None
    if scale and all(k.rank_mean_s is not None for k in kinds):
        total = sum(k.weight for k in kinds)
        rmean = sum(k.weight * k.rank_mean_s for k in kinds) / total
    k = w.iterations_per_epoch
    samples = _samples(plans, w)
    base_s = speedup = base_desc = None
    if baseline:
        ref, why = baseline_choice(scn, strategy)
        if ref is not None:
            base_desc = f"{ref.describe()} on stack {stack_name}"
            base_samples = samples
            if ref.name == strategy.name and ref.params == strategy.params:
                base_s = mean
            else:
                bran: dict = {}
                stage(f"baseline {ref.describe()}: planning")
                try:
                    bplans = ref.iterations(w, topo)
                except NotApplicable as exc:
                    raise ConfigError(f"baseline: {ref.name!r} does not apply here ({exc}); choose another with "
                                      f"--baseline, or --baseline none") from None
                bk = run_plans(bplans, topo, n_train, scn.fidelity, scn.seed, analytic=False,
                               comm_cpu=cpu, resolution=scn.resolution, merged=merged, jitter=wl.compute_jitter,
                               runtime=runtime, ran=bran,
                               progress=None if progress is None else (lambda what: progress(f"baseline: {what}")))
                base_s = _mean(bk)[0] + _epoch_evaluation(strategy, ref, w, assumed)
                base_samples = _samples(bplans, w)
                base_desc += "".join(f"; {x}" for x in _ran_lines(bran, runtime))
            speedup = per_sample_speedup(base_s, base_samples, mean, samples)
            if base_samples != samples:
                assumed.append(f"speedup per sample: this iteration trains {samples:,} samples, the baseline's "
                               f"{base_samples:,}, so the speedup compares time per sample")
            assumed.append(f"baseline: {base_desc}: {why} (--baseline to change, --baseline none to drop)")
            misfit = _baseline_misfit(ref, strategy, w, trace, ctx, scn)
            if misfit:
                assumed.append(f"baseline does not fit in memory ({misfit}): its time is what the iteration "
                               "would take if it did")
    if sum(merged):
        assumed.append(f"flow completions within {scn.resolution * 100:.3g} % of their transfer time merged into one "
                       f"event ({sum(merged):,} flows; resolution 0 is exact)")
    return Result(**common, kinds=kinds, mean_s=mean, breakdown=bd, link_bytes=lb, analytic_mean_s=est,
                  iterations_per_epoch=k, epoch_s=k * mean if k else None,
                  samples_per_s=samples / mean if mean > 0 else math.inf,
                  samples_per_iteration=samples if samples != w.global_batch else None,
                  baseline_s=base_s, speedup=speedup, baseline=base_desc, assumed=tuple(assumed), rank_mean_s=rmean,
                  busiest_links=max(kinds, key=lambda k: k.weight).busiest_links if kinds else (),
                  exposed_by=split, memory=memory)


def _epoch_evaluation(strategy, ref, w, assumed: list) -> float:
    """The per-epoch evaluation a strategy prices (node-based's eval-s/eval-samples), spread over the epoch's
    iterations, for a baseline that does not price one: both methods evaluate every epoch (seed 000's code)."""
    evaluate = getattr(strategy, "eval_seconds", None)
    k = w.iterations_per_epoch
    if evaluate is None or not k or not strategy.params.evaluates or hasattr(ref, "eval_seconds"):
        return 0.0
    per_epoch = evaluate(w)
    assumed.append(f"the baseline evaluates every epoch too (the same {per_epoch * 1e3:.4g} ms): "
                   f"{per_epoch / k * 1e3:.4g} ms added to its mean iteration")
    return per_epoch / k


def _check_finite(scn: Scenario, epoch: float, closed_form: float | None, link_bytes: dict) -> None:
    """One error line when an input so large that the iteration time overflows (``--opt elem_s=1e308``).

    Every value was finite and in range on its own; only their product is not, so the line names what the
    user gave that scales a time: the strategy's options and the trace.
    """
    if (math.isfinite(epoch) and (closed_form is None or math.isfinite(closed_form))
            and all(math.isfinite(float(v)) for v in link_bytes.values())):
        return
    what = "iteration (or epoch) time overflows" if not math.isfinite(epoch) else "bytes on the links overflow"
    given = ", ".join(f"{k}={v}" for k, v in sorted(scn.options.items())) or "none"
    source = f"trace {scn.trace!r}" if scn.trace else f"model {scn.model or 'the default'}"
    raise ConfigError(f"the {what}: an input is too large to be a real system's "
                      f"(strategy options: {given}; {source}); give values of a real cluster")


def _samples(plans, w) -> int:
    """Samples one iteration trains: the plans' own (a layout's global batch), else the workload's."""
    return next((plan.info.samples for _, plan in plans if plan.info.samples), None) or w.global_batch


def per_sample_speedup(base_s: float, base_samples: int, mean: float, samples: int) -> float:
    """Baseline time per sample over this time per sample (plain time ratio when both train as many)."""
    if mean <= 0:
        return math.inf
    if base_samples == samples:
        return base_s / mean
    return (base_s / base_samples) / (mean / samples)

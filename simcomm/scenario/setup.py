"""Scenario -> Setup: the typed objects one run needs (trace, cluster, stack, runtime, precision, notes).

:func:`resolve_setup` turns a :class:`~simcomm.scenario.Scenario` into a frozen :class:`Setup`; the
pipeline (:mod:`simcomm.pipeline`) then plans, runs and reports it and never looks a name up again.
:class:`Resolver` holds what the runs of one command share (the trace, each cluster size built once:
``simcomm compare`` runs 18 strategies on one cluster); ``simcomm bench``, ``plan`` and ``whatif`` ask it
for a cluster, a stack or a trace directly.

Every choice the user did not make (the trace, GPUs per node, the stack, the dataset size, the wire
dtype) and everything simcomm changed or stretched (network overrides, a preset beyond its published
size) is one line of :attr:`Setup.notes`, printed as ``assumed:``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from simcomm.errors import ConfigError
from simcomm.runtimes import Runtime, get_runtime
from simcomm.scenario.resolve import node_scales
from simcomm.scenario.spec import NetworkSpec, Scenario
from simcomm.scenario.trace import load_trace_for
from simcomm.stacks import apply_stack, get_stack
from simcomm.stacks.base import socket_overhead_note
from simcomm.topologies.nvlink import nvlink_notes
from simcomm.topologies.overrides import OVERRIDE_FIELDS, NetworkOverrides

if TYPE_CHECKING:
    from simcomm.stacks.base import Stack
    from simcomm.topologies.base import Topology
    from simcomm.traces.schema import Trace

__all__ = ["Setup", "Resolver", "resolve_setup", "build_cluster", "network_overrides", "dataset_size_for",
           "resolve_precision", "train_ranks", "DATASETS"]

#: dataset name -> samples per epoch (seed 000 Sec. V)
DATASETS = {"cifar10": 50_000, "cifar100": 50_000, "imagenet": 1_281_167, "mnist": 60_000}


@dataclass(frozen=True)
class Setup:
    """What one run needs, resolved once from its Scenario (see the module docstring)."""

    scenario: Scenario
    trace: Trace
    cluster: Topology  # as built: a preset with its network overrides, or a file; servers attached
    topology: Topology  # the same cluster with the stack's link efficiencies: what the engine runs on
    stack: Stack  # with the scenario's overrides
    stack_name: str
    runtime: Runtime  # how the engine runs collectives on this stack
    n_train: int  # training ranks (server ranks come after them)
    gpus_per_node: int
    compute_scale: tuple[float, ...]  # per training rank ((): every rank nominal)
    dataset_size: int | None
    wire_dtype: str | None  # None: the trace's own dtype
    notes: tuple[str, ...]  # the assumed: lines of these choices, in order

    @property
    def device(self) -> str | None:
        return self.cluster.meta.get("device")


def network_overrides(net: NetworkSpec) -> NetworkOverrides:
    """The scenario's network keys as the topology's typed overrides."""
    return NetworkOverrides(**{k: getattr(net, k) for k in OVERRIDE_FIELDS})


def _is_file(cluster: str) -> bool:
    from simcomm.scenario.resolve import file_cluster

    return file_cluster(cluster)


def build_cluster(scn: Scenario, nodes: int, extra: int = 0, base=None):
    """A topology from a preset name or a cluster file (or ``base``), with ``extra`` server nodes.

    A preset is built with the scenario's network overrides (:func:`simcomm.topologies.overrides.apply_network`:
    the network changes, the machine stays); server nodes follow :mod:`simcomm.topologies.servers`.
    ``extra = 0`` with a preset gives ``nodes`` machines as before.
    """
    from simcomm.topologies.servers import attach_servers, first_ranks_of_machines

    over = network_overrides(scn.network)
    if (base is not None or _is_file(scn.cluster)) and scn.nvlink.any():
        raise ConfigError(f"nvl_domain/nvl_split: cluster {scn.cluster!r} is a topology file; NVLink domains apply "
                          "to multi-node NVLink presets only (edit the file's nvlink_domain instead)")
    if (base is not None or _is_file(scn.cluster)) and over.any():
        raise ConfigError(f"{', '.join(over.given())}: cluster {scn.cluster!r} is a topology file; network "
                          "overrides apply to two-level presets only (edit the file instead)")
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
        topo = _preset(scn, nodes, over)
        if extra and not topo.meta.get("server_ranks"):
            n0 = topo.n_ranks
            topo = _preset(scn, nodes + extra, over)
            topo.meta["server_ranks"] = first_ranks_of_machines(topo, n0, extra)
            return topo
    if named:
        from simcomm.topologies.named_servers import serve_on_machines

        topo = serve_on_machines(topo, named)
    need = extra - len(topo.meta.get("server_ranks", ()))
    return attach_servers(topo, need) if need > 0 else topo


def _server_machines(scn: Scenario) -> tuple[int, ...]:
    """The machines ``ps``'s ``server_machines`` names (empty for every other strategy)."""
    if not scn.options.get("server_machines"):
        return ()
    from simcomm.strategies.base import STRATEGIES, make_params

    cls = STRATEGIES.get(scn.strategy)
    return getattr(cls(make_params(cls, dict(scn.options))).params, "machines", ())  # ps's Params only


def _preset(scn: Scenario, nodes: int, over: NetworkOverrides):
    from simcomm.topologies import presets
    from simcomm.topologies.overrides import apply_network

    topo = presets.preset(scn.cluster, nodes=nodes, gpus_per_node=scn.gpus_per_node, nvlink=scn.nvlink)
    return apply_network(topo, over, scn.cluster)


def _cluster_lines(scn: Scenario, nodes: int, topo) -> tuple[str, ...]:
    """The network overrides as given, the preset's choice of link and a preset stretched past its published size,
    one line each."""
    from simcomm.topologies.overrides import override_line
    from simcomm.topologies.presets import PRESET_LINKS, PRESETS, published_size

    out = []
    if topo.network.any():
        out.append(override_line(scn.cluster, topo))
    if scn.cluster in PRESET_LINKS and topo.network.inter is None:
        out.append(PRESET_LINKS[scn.cluster])
    if scn.cluster in PRESETS:
        line = published_size(scn.cluster).beyond(scn.cluster, nodes, scn.gpus_per_node)
        if line:
            out.append(line)
    return tuple(out)


def _link_classes(path: str) -> dict:
    """The classes of a calibrated link file (``links``); a missing or special file is one line."""
    from simcomm.links.toml_file import load_link_file

    if not Path(path).is_file():
        raise ConfigError(f"links: file {path!r} does not exist or is not a regular file")
    return load_link_file(path)


@dataclass
class Resolver:
    """Caches shared by the runs of one command (trace, clusters); :func:`resolve_setup` reads through it.

    ``given_trace`` and ``given_topology`` let library callers (validation cases, notebooks) run the
    pipeline on a ready-made Trace or Topology instead of the scenario's names; the transport stack is
    still applied.
    """

    scenario: Scenario
    given_trace: Trace | None = None
    given_topology: Topology | None = None
    _trace: object = field(default=None, init=False, repr=False)
    _clusters: dict = field(default_factory=dict, init=False, repr=False)
    #: why NCCL runs over TCP sockets here ("" : it does not; None: not yet known)
    _sockets: str | None = field(default=None, init=False, repr=False)
    notes: list = field(default_factory=list)
    #: (raw, stack-applied) topology the last run with this resolver ran on
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
        from simcomm.stacks import get_stack

        name, why = self._stack_named()
        fallback = get_stack(name).over_plain_ethernet
        if fallback is not None and self.transport_switch() is not None:
            return fallback, self.transport_switch()
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
        stack = get_stack(self.stack_choice()[0]).with_overrides(spec.efficiency, spec.overhead, spec.cpu_per_byte,
                                                                spec.collectives, spec.reduce_per_byte)
        links = self.scenario.network.links
        on_host = get_runtime(stack.collectives).reduces_on_host
        if spec.reduce_per_byte is None and on_host and links:
            from simcomm.runtimes.host import host_gamma, recorded_host

            host = recorded_host(links)  # the calibration's host probe: every CPU stack reduces at its rate
            if host is not None:
                stack = stack.with_overrides(reduce_per_byte=host_gamma(host))
        if spec.reduce_per_byte is not None and not on_host:
            raise ConfigError(f"stack.reduce_per_byte: applies to collectives in host memory (gloo, MPI); stack "
                              f"{stack.name} reduces on the GPU; use --stack gloo or mpi-tcp, or drop --stack-reduce")
        return stack

    def runtime(self) -> Runtime:
        """How the engine runs collectives on this stack (its rules and NCCL overrides)."""
        spec = self.scenario.stack
        runtime = get_runtime(self.stack().collectives)
        given = {"nccl_algo": spec.nccl_algo, "nccl_proto": spec.nccl_proto}
        for which in (k for k, v in given.items() if v and k not in runtime.settings):
            # NCCL_ALGO/NCCL_PROTO mean nothing to MPI or gloo: refuse rather than ignore them
            raise ConfigError(f"stack.{which}: applies to NCCL's collectives only; this run uses {runtime.name}'s "
                              f"(stack {self.stack().name}); use --stack nccl or drop --{which.replace('_', '-')}")
        return runtime.configured(**{k: v for k, v in given.items() if k in runtime.settings}).with_tcp(
            self.stack().tcp_protocol)

    def calibration_notes(self, nodes: int, extra: int) -> tuple[str, ...]:
        """How the calibrated link file (``links``) was put on this cluster (empty without one)."""
        self.cluster(nodes, extra)
        return self._clusters[(nodes, extra)][2]

    def cluster_notes(self, nodes: int, extra: int) -> tuple[str, ...]:
        """The network overrides and a stretched preset, as ``assumed:`` lines (empty when neither)."""
        self.cluster(nodes, extra)
        return self._clusters[(nodes, extra)][3]

    def cluster(self, nodes: int, extra: int):
        """(raw, stack-applied) topology of ``nodes`` training nodes plus ``extra`` server nodes."""
        key = (nodes, extra)
        if key not in self._clusters:
            topo = build_cluster(self.scenario, nodes, extra, base=self.given_topology)
            lines = () if self.given_topology is not None else _cluster_lines(self.scenario, nodes, topo)
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
                eff, calib = with_calibrated_links(eff, classes, path)
                notes = tuple(calib)
            self._clusters[key] = (topo, eff, notes, lines)
        return self._clusters[key][:2]


def train_ranks(topo, nodes: int, extra: int) -> int:
    """Training ranks (they come first): all but server nodes' ranks and, on presets, machines past ``nodes``."""
    servers = set(topo.meta.get("server_ranks", ()))
    custom = topo.meta.get("builder") == "custom"
    if not servers and (not extra or custom):
        return topo.n_ranks
    return sum(1 for r in range(topo.n_ranks)
               if r not in servers and (custom or topo.machine_of(r) is None or topo.machine_of(r) < nodes))


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


def resolve_setup(scn: Scenario, resolver: Resolver, extra: int = 0) -> Setup:
    """The Setup of ``scn`` with ``extra`` server nodes, read through ``resolver``'s caches.

    ``scn`` may differ from ``resolver.scenario`` in its strategy, options and node count (``compare``);
    the cluster, the stack and the trace come from the resolver's scenario.
    """
    trace = resolver.trace()
    raw, topo = resolver.cluster(scn.nodes, extra)
    resolver.built = (raw, topo)
    n_train = train_ranks(raw, scn.nodes, extra)
    gpn = max(1, n_train // scn.nodes)
    notes = list(resolver.notes) + list(scn.assumed) + list(resolver.calibration_notes(scn.nodes, extra))
    notes += [line for line in nvlink_notes(raw) if line not in notes]
    notes += resolver.cluster_notes(scn.nodes, extra)
    if scn.gpus_per_node is None:
        notes.append(f"{gpn} GPU(s) per node ({scn.cluster} preset)")
    stack_name, why = resolver.stack_choice()
    stack = resolver.stack()
    spec = scn.stack
    if why is not None:
        notes.append(f"transport stack {stack_name}: {why} ({stack.summary})")
    elif spec.name == "nccl" and spec.efficiency is None and spec.overhead is None:
        notes.append("transport stack nccl (96 % of network line rate, 3 us per message)")
    notes += socket_overhead_note(raw, stack)  # TCP's per-message latency counted once (docs/links.md)
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
    return Setup(scn, trace, raw, topo, stack, stack_name, resolver.runtime(), n_train, gpn, tuple(scale),
                 dataset, wire, tuple(notes))

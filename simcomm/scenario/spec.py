"""A run's inputs as frozen dataclasses (built from the flat vocabulary by :mod:`simcomm.scenario.resolve`).

TOML layout (every key optional; CLI flags override the file; every key may also be
given flat at the top level under its name in :mod:`simcomm.scenario.keys`)::

    strategy = "node-based"
    nodes = 20
    gpus_per_node = 1
    cluster = "deep-est-esb"      # preset name or a cluster TOML file
    model = "resnet50"            # bundled model/trace name, or:
    trace = "my_trace.json"
    batch = 64                    # per-rank batch (weak) / global batch (strong)
    dataset_size = 1281167
    fidelity = "flow"             # or "analytic"
    resolution = 0.01             # flow events: merge completions within 1 % (0 = exact)
    seed = 0
    fold_ranks = "auto"           # identical ranks' computes planned once (exact): auto, on or off
    [workload]
    scaling = "weak"              # or "strong"
    bucket_mb = 25.0
    dataload_s = 0.0              # or "12ms"
    dataload_overlap = false
    compute_scale = [1.0, 1.3]    # per node (or per rank)
    compute_jitter = 0.0          # cv of each rank's compute, drawn afresh every iteration
    precision = "amp-fp16"        # fp32, amp-fp16, amp-bf16, fp16, bf16 (simcomm.precision)
    wire_dtype = "fp32"           # what gradients/models travel in (default: the precision's)
    [stack]
    name = "nccl"                 # default: the cluster preset's own stack
    collectives = "openmpi"       # how `auto` picks algorithms: nccl, openmpi, mpich, gloo
    nccl_algo = "ring"            # like NCCL_ALGO (nccl rules): ring, tree, nvls, nvls-tree, collnet-*, pat
    nccl_proto = "simple"         # like NCCL_PROTO: ll, ll128, simple
    efficiency = 0.9
    overhead = "5us"
    [network]                     # two-level presets: change the network (what-if's keys)
    inter = "ib-hdr"
    oversubscription = 2.0
    [model]                       # a transformer's shape (docs/transformers.md): a base and what changes
    name = "llama3.1-8b"          # a zoo transformer as the base (the same key as model = ...), or
    config = "config.json"        # a Hugging Face config.json as the base; with neither, the keys are the shape
    seq = 8192
    layers = 4                    # ... layers, hidden, heads, kv_heads, ffn, experts, top_k ... (keys.MODEL_KEYS)
    [nvlink]                      # multi-node NVLink presets (gb200-nvl72 ...): NVLink domains
    domain = 72                   # GPUs per domain (the same key as nvl_domain = ...)
    split = [18, 14]              # trays per domain, in order (nvl_split); must add up to nodes
    [memory]                      # the GPU memory check (simcomm.memory.fit)
    gpu_memory = "96GB"           # one GPU's memory (default: the cluster's device's)
    policy = "warn"               # refuse (default), warn (print the shortfall and run), off
    margin = 0.05                 # the allocator's fragmentation, a fraction of the peak (default: the model's)
    [baseline]                    # what "speedup vs" compares with; baseline = "none" drops it
    strategy = "allreduce"
    overlap = "none"
    bucket_mb = 0
    [options]                     # the strategy's own options
    k_prime = 50
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from simcomm.engine.options import SCENARIO_RESOLUTION
from simcomm.errors import ConfigError
from simcomm.frameworks import FRAMEWORK_NAMES
from simcomm.memory.fit import POLICIES
from simcomm.precision import check_wire_dtype, get_precision
from simcomm.scenario.keys import FIDELITIES, FOLD_SETTINGS, JITTER_DISTS, SCALINGS
from simcomm.stacks.base import COLLECTIVE_RULES, NCCL_ALGOS, NCCL_PROTOS, nccl_name
from simcomm.topologies.nvlink import NvlinkSpec

__all__ = ["Scenario", "ShapeSpec", "WorkloadSpec", "StackSpec", "NetworkSpec", "MemorySpec", "BaselineSpec",
           "NO_BASELINE", "parse_baseline",
           "FIDELITIES", "COLLECTIVE_RULES", "DEFAULT_RESOLUTION"]

#: a scenario's event resolution unless it says otherwise: defined with the engine's options, once
DEFAULT_RESOLUTION = SCENARIO_RESOLUTION


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def _need(ok: bool, field_: str, value, what: str) -> None:
    if not ok:
        raise ConfigError(f"{field_}: {value!r} must be {what}")


@dataclass(frozen=True)
class WorkloadSpec:
    scaling: str = "weak"
    bucket_mb: float = 25.0
    dataload_s: float = 0.0
    dataload_overlap: bool = False
    compute_scale: tuple[float, ...] = ()
    compute_jitter: float = 0.0  # coefficient of variation per rank and iteration (simcomm.jitter)
    precision: str | None = None  # a simcomm.precision preset; None: the trace's own dtype
    wire_dtype: str | None = None  # None: the precision's wire dtype (or the trace's dtype)
    attention: str | None = None  # a zoo transformer's attention core: flash or unfused (None: flash)
    framework: str | None = None  # simcomm.frameworks: whose data-parallel/ZeRO schedule megatron runs (None: generic)
    # static per-node heterogeneity, turned into compute scales by simcomm.scenario.resolve.node_scales
    straggler_scale: float = 1.0
    straggler_node: int = 0
    jitter: float = 0.0
    jitter_dist: str = "normal"
    jitter_seed: int = 0

    def __post_init__(self) -> None:
        if self.scaling not in SCALINGS:
            raise ConfigError(f"workload.scaling: {self.scaling!r} is not valid; valid choices: weak, strong")
        _need(_is_num(self.bucket_mb) and self.bucket_mb >= 0, "workload.bucket_mb", self.bucket_mb,
              "a non-negative number (MB; 0 = one bucket)")
        _need(_is_num(self.dataload_s) and self.dataload_s >= 0, "workload.dataload_s", self.dataload_s,
              "a non-negative time")
        _need(isinstance(self.dataload_overlap, bool), "workload.dataload_overlap", self.dataload_overlap,
              "true or false")
        _need(isinstance(self.compute_scale, tuple) and all(_is_num(x) and x > 0 for x in self.compute_scale),
              "workload.compute_scale", self.compute_scale, "a list of positive numbers")
        _need(_is_num(self.compute_jitter) and 0 <= self.compute_jitter < 1, "workload.compute_jitter",
              self.compute_jitter, "a coefficient of variation in [0, 1) (0 = every rank computes alike)")
        if self.precision is not None:
            get_precision(self.precision)
        if self.wire_dtype is not None:
            check_wire_dtype(self.wire_dtype, "workload.wire_dtype")
        _need(self.attention in (None, "flash", "unfused"), "attention", self.attention, "one of flash, unfused")
        _need(self.framework is None or self.framework in FRAMEWORK_NAMES, "framework", self.framework,
              "one of " + ", ".join(FRAMEWORK_NAMES))
        _need(_is_num(self.straggler_scale) and self.straggler_scale > 0, "straggler_scale", self.straggler_scale,
              "a positive factor")
        _need(_is_num(self.jitter) and self.jitter >= 0, "jitter", self.jitter, "a spread >= 0")
        _need(self.jitter_dist in JITTER_DISTS, "jitter_dist", self.jitter_dist, "one of " + ", ".join(JITTER_DISTS))
        if self.compute_scale and (self.straggler_scale != 1.0 or self.jitter):
            raise ConfigError("compute_scale: give per-node factors or straggler_scale/jitter, not both")

    @property
    def heterogeneous(self) -> bool:
        """True when straggler or static jitter knobs set the per-node compute scales."""
        return self.straggler_scale != 1.0 or self.jitter > 0


@dataclass(frozen=True)
class NetworkSpec:
    """Changes to a two-level cluster preset's network (None = keep the preset's)."""

    inter: str | None = None
    intra: str | None = None
    nic: str | None = None
    nics_per_node: int | None = None
    topology: str | None = None
    oversubscription: float | None = None
    links: str | None = None  # a calibrated link file, put on any cluster (simcomm.topologies.calibrated)

    def any(self) -> bool:
        """True when a two-level preset's network is changed (``links`` applies to every cluster, apart)."""
        return any(v is not None for v in (self.inter, self.intra, self.nic, self.nics_per_node, self.topology,
                                           self.oversubscription))


@dataclass(frozen=True)
class MemorySpec:
    """How the GPU memory check judges a run (:mod:`simcomm.memory.fit`)."""

    gpu_memory: float | None = None  # bytes; None: the cluster's device's nominal memory
    policy: str = "refuse"  # refuse, warn, off
    margin: float | None = None  # the caching allocator's fragmentation, a fraction of the peak (None: the model's)

    def __post_init__(self) -> None:
        _need(self.gpu_memory is None or (_is_num(self.gpu_memory) and self.gpu_memory > 0), "gpu_memory",
              self.gpu_memory, "a finite size > 0 such as 96GB")
        if self.policy not in POLICIES:
            raise ConfigError(f"memory: {self.policy!r} is not valid; valid choices: {', '.join(POLICIES)}")
        _need(self.margin is None or (_is_num(self.margin) and 0 <= self.margin < 1), "memory_margin", self.margin,
              "a fraction in [0, 1)")


@dataclass(frozen=True)
class StackSpec:
    name: str | None = None  # None: the cluster preset's stack (nccl for clusters without one)
    efficiency: float | None = None
    overhead: float | None = None
    cpu_per_byte: float | None = None  # host CPU s/byte charged to overlapping compute (None: the stack's)
    reduce_per_byte: float | None = None  # host CPU s/byte a CPU collective reduces (None: the device's gamma)
    collectives: str | None = None  # None: the stack's own rules (nccl -> nccl, mpi-tcp -> openmpi, ...)
    nccl_algo: str | None = None  # like NCCL_ALGO: force one NCCL algorithm (nccl rules only)
    nccl_proto: str | None = None  # like NCCL_PROTO: force one protocol

    def __post_init__(self) -> None:
        object.__setattr__(self, "nccl_algo", nccl_name(self.nccl_algo, "stack.nccl_algo", NCCL_ALGOS))
        object.__setattr__(self, "nccl_proto", nccl_name(self.nccl_proto, "stack.nccl_proto", NCCL_PROTOS))
        _need(self.name is None or (isinstance(self.name, str) and bool(self.name)), "stack.name", self.name,
              "a stack name")
        if self.collectives is not None and self.collectives not in COLLECTIVE_RULES:
            raise ConfigError(f"stack.collectives: {self.collectives!r} is not valid; valid choices: "
                              f"{', '.join(COLLECTIVE_RULES)}")
        _need(self.cpu_per_byte is None or (_is_num(self.cpu_per_byte) and self.cpu_per_byte >= 0),
              "stack.cpu_per_byte", self.cpu_per_byte, "a non-negative number of seconds per byte")
        _need(self.reduce_per_byte is None or (_is_num(self.reduce_per_byte) and self.reduce_per_byte >= 0),
              "stack.reduce_per_byte", self.reduce_per_byte, "a non-negative number of seconds per byte")
        _need(self.efficiency is None or (_is_num(self.efficiency) and 0 < self.efficiency <= 1),
              "stack.efficiency", self.efficiency, "a fraction in (0, 1]")
        _need(self.overhead is None or (_is_num(self.overhead) and self.overhead >= 0), "stack.overhead",
              self.overhead, "a non-negative time")


@dataclass(frozen=True)
class ShapeSpec:
    """The ``[model]`` keys given (None = not given): a transformer shape, or changes to the base model's.

    Values are checked by the vocabulary (:mod:`simcomm.scenario.keys`); the shape they make is checked
    and built by :func:`simcomm.llm.shape.resolve_shape`.
    """

    config: str | None = None
    seq: int | None = None
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    ffn: int | None = None
    vocab: int | None = None
    mlp: str | None = None
    norm: str | None = None
    bias: bool | None = None
    qkv_bias: bool | None = None
    qk_norm: bool | None = None
    tied: bool | None = None
    positions: int | None = None
    parallel: bool | None = None
    shared_norm: bool | None = None
    embed_norm: bool | None = None
    window: int | None = None
    experts: int | None = None
    top_k: int | None = None
    expert_ffn: int | None = None
    shared_experts: int | None = None
    shared_ffn: int | None = None
    first_dense: int | None = None
    moe_every: int | None = None
    router_bias: bool | None = None
    shared_gate: bool | None = None
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None

    def given(self) -> dict:
        """The shape keys given (``config`` apart), in field order."""
        return {k: v for k, v in self.__dict__.items() if v is not None and k != "config"}

    def any(self) -> bool:
        return self.config is not None or bool(self.given())


@dataclass(frozen=True)
class BaselineSpec:
    """What "speedup vs" compares with: a strategy and its options (``strategy = "none"``: no baseline)."""

    strategy: str = "allreduce"
    options: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        _need(isinstance(self.strategy, str) and bool(self.strategy), "baseline.strategy", self.strategy,
              "a strategy name or none")
        _need(isinstance(self.options, tuple) and all(isinstance(k, str) for k, _ in self.options),
              "baseline options", self.options, "key=value pairs")

    @property
    def none(self) -> bool:
        return self.strategy == "none"

    def option_dict(self) -> dict:
        return dict(self.options)


NO_BASELINE = BaselineSpec("none")


def parse_baseline(value) -> BaselineSpec:
    """A baseline from ``"none"``, ``"allreduce"``, ``"allreduce:overlap=none,bucket_mb=0"`` or a table.

    Option values stay strings (or TOML values); the strategy converts them by type.
    """
    if isinstance(value, BaselineSpec):
        return value
    if isinstance(value, dict):
        table = dict(value)
        name = table.pop("strategy", "allreduce")
        opts = table.pop("options", {})
        if not isinstance(opts, dict):
            raise ConfigError("baseline.options: must be a table of the baseline strategy's options")
        table.update(opts)
        return BaselineSpec(name, tuple(sorted((str(k).replace("-", "_"), v) for k, v in table.items())))
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"baseline: {value!r} must be 'none', a strategy name, or NAME:key=value,...")
    text = value.strip()
    name, _, rest = text.partition(":")
    opts = []
    for item in filter(None, (x.strip() for x in rest.split(","))):
        if "=" not in item:
            raise ConfigError(f"baseline: {item!r} must look like key=value (e.g. allreduce:overlap=none)")
        k, v = item.split("=", 1)
        opts.append((k.strip().replace("-", "_"), v.strip()))
    if name.strip() == "none" and opts:
        raise ConfigError("baseline: 'none' takes no options")
    return BaselineSpec(name.strip(), tuple(sorted(opts)))


@dataclass(frozen=True)
class Scenario:
    """Everything needed to simulate one strategy on one setting."""

    strategy: str = "allreduce"
    nodes: int = 4
    gpus_per_node: int | None = None  # None: the cluster preset's default
    cluster: str = "deep-est-esb"
    model: str | None = None
    trace: str | None = None
    batch: int | None = None
    dataset_size: int | None = None
    fidelity: str = "flow"
    resolution: float = DEFAULT_RESOLUTION
    seed: int = 0
    fold_ranks: str = "auto"  # the exact rank fold (simcomm.strategies._fold): auto, on or off
    workload: WorkloadSpec = WorkloadSpec()
    stack: StackSpec = StackSpec()
    network: NetworkSpec = NetworkSpec()
    shape: ShapeSpec = ShapeSpec()  # the [model] keys
    memory: MemorySpec = MemorySpec()
    nvlink: NvlinkSpec = NvlinkSpec()  # NVLink domains of multi-node NVLink presets (simcomm.topologies.nvlink)
    options: dict = field(default_factory=dict, compare=False)
    baseline: BaselineSpec | None = None  # None: the strategy's paper baseline (Strategy.paper_baseline)
    #: what the resolver filled in (a seed preset's setting), printed as ``assumed:`` lines
    assumed: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        _need(isinstance(self.strategy, str) and bool(self.strategy), "strategy", self.strategy, "a strategy name")
        _need(isinstance(self.cluster, str) and bool(self.cluster), "cluster", self.cluster,
              "a preset name or a file")
        for key in ("model", "trace"):
            value = getattr(self, key)
            _need(value is None or isinstance(value, str), key, value, "a name or a file path")
        _need(isinstance(self.seed, int) and not isinstance(self.seed, bool) and self.seed >= 0, "seed", self.seed,
              "a non-negative integer")
        _need(isinstance(self.options, dict), "options", self.options, "a table")
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or self.nodes < 1:
            raise ConfigError(f"nodes: {self.nodes!r} must be a positive integer")
        if self.gpus_per_node is not None and (isinstance(self.gpus_per_node, bool)
                                               or not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1):
            raise ConfigError(f"gpus_per_node: {self.gpus_per_node!r} must be a positive integer")
        if self.fidelity not in FIDELITIES:
            raise ConfigError(f"fidelity: {self.fidelity!r} is not valid; valid choices: {', '.join(FIDELITIES)}")
        if not (_is_num(self.resolution) and 0 <= self.resolution < 1):
            raise ConfigError(f"resolution: {self.resolution!r} must be a number in [0, 1) "
                              "(a fraction of a transfer's duration; 0 = exact flow events)")
        if self.fold_ranks not in FOLD_SETTINGS:
            raise ConfigError(f"fold_ranks: {self.fold_ranks!r} is not valid; valid choices: {', '.join(FOLD_SETTINGS)}")
        if self.model and self.trace:
            raise ConfigError("model and trace: give one of them, not both")
        if self.batch is not None and (isinstance(self.batch, bool) or not isinstance(self.batch, int)
                                       or self.batch < 1):
            raise ConfigError(f"batch: {self.batch!r} must be a positive integer")
        if self.dataset_size is not None and (isinstance(self.dataset_size, bool)
                                              or not isinstance(self.dataset_size, int) or self.dataset_size < 1):
            raise ConfigError(f"dataset_size: {self.dataset_size!r} must be a positive integer")

    def with_(self, **changes) -> Scenario:
        """A copy with the non-None ``changes`` applied (CLI flags over the file)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

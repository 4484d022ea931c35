"""The one scenario vocabulary: every flat key, its type, unit, bounds and help.

A scenario is a flat mapping such as ``{"strategy": "sgp", "nodes": 16,
"inter": "ib-hdr", "dataload": "20ms"}``.  The same keys are

* top-level keys of a scenario TOML file (the older ``[workload]``,
  ``[stack]`` and ``[network]`` sections are spellings of the same keys,
  see :data:`Key.toml`);
* the scenario flags of ``run``, ``compare``, ``whatif`` (``--inter``,
  ``--dataload`` ...: generated from this table by
  :mod:`simcomm.cli.scenario_flags`) and ``--set key=value``;
* what-if axes (``--vary inter=ib-edr,ib-hdr``).

Values are checked here, once, at the edge (:func:`coerce`): a wrong type,
a non-finite number, a value out of bounds or a time without a unit is one
:class:`~simcomm.errors.ConfigError` naming the key and what is valid.
Keys that are not in this table are strategy options (``k_prime``, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.frameworks import FRAMEWORK_NAMES
from simcomm.memory.fit import DEFAULT_MARGIN, POLICIES
from simcomm.topologies.two_level import INTER
from simcomm.units import parse_size, parse_time

__all__ = ["Key", "KEYS", "KEY", "coerce", "MAX_NODES", "MAX_GPUS_PER_NODE", "FIDELITIES", "SCALINGS",
           "JITTER_DISTS", "TOPOLOGIES", "MODEL_KEYS", "FOLD_SETTINGS"]

FIDELITIES = ("flow", "analytic")
#: the exact rank fold (simcomm.strategies._fold): from FOLD_RANKS training ranks, at any size, never
FOLD_SETTINGS = ("auto", "on", "off")
SCALINGS = ("weak", "strong")
JITTER_DISTS = ("normal", "uniform", "lognormal")
#: internode network kinds of two-level clusters (their registry: simcomm list fabrics)
TOPOLOGIES = INTER
#: the engine's rank cap (simcomm.topologies.fabric.MAX_RANKS) bounds nodes x GPUs per node
MAX_NODES = 262_144
MAX_GPUS_PER_NODE = 1_024


@dataclass(frozen=True)
class Key:
    """One scenario key.

    ``section``/``attr`` say where it lives in :class:`~simcomm.scenario.spec.Scenario`
    (``""``: the Scenario itself).  ``kind``: int, float, time, size (bytes, with a
    unit such as 96GB), bool, str, choice, floats, ints (a list of integers) or baseline.  ``lo``/``hi`` bound numbers (``lo_open``: the
    lower bound itself is excluded).  ``toml``: other spellings accepted in a
    scenario file, as ``section.key`` (numbers there are in the unit the key's
    name says, e.g. ``workload.dataload_s``).
    """

    name: str
    section: str
    attr: str
    kind: str
    help: str
    unit: str = ""
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple[str, ...] = ()
    toml: tuple[str, ...] = ()
    short: str = ""

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def bounds_text(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        lo = "" if self.lo is None else f"{'>' if self.lo_open else '>='} {self.lo:g}"
        hi = "" if self.hi is None else f"{'<' if self.hi_open else '<='} {self.hi:g}"
        return " and ".join(x for x in (lo, hi) if x)


def _k(name, section, attr, kind, help, **kw) -> Key:
    return Key(name, section, attr, kind, help, **kw)


KEYS: tuple[Key, ...] = (
    # what and where
    _k("strategy", "", "strategy", "str", "strategy name (simcomm list strategies)", short="-s"),
    _k("cluster", "", "cluster", "str", "cluster preset name or cluster TOML file"),
    _k("nodes", "", "nodes", "int", "number of nodes", lo=1, hi=MAX_NODES, short="-n"),
    _k("gpus_per_node", "", "gpus_per_node", "int", "GPUs (ranks) per node (default: the preset's)", lo=1,
       hi=MAX_GPUS_PER_NODE, short="-g"),
    _k("model", "", "model", "str", "bundled trace or zoo model name", toml=("model.name",)),
    _k("trace", "", "trace", "str", "trace file (JSON)"),
    _k("batch", "", "batch", "int", "per-rank batch (weak) or global batch (strong)", lo=1, hi=1e9),
    _k("dataset_size", "", "dataset_size", "int", "samples per epoch", lo=1, hi=1e13),
    _k("fidelity", "", "fidelity", "choice", "flow or analytic", choices=FIDELITIES),
    _k("resolution", "", "resolution", "float", "merge flow completions within this fraction of their duration "
       "(default 0.01; 0 = exact)", lo=0, hi=1, hi_open=True),
    _k("seed", "", "seed", "int", "simulation seed", lo=0, hi=2 ** 63 - 1),
    _k("fold_ranks", "", "fold_ranks", "choice", "plan identical ranks' computes once (exact): auto (from 256 "
       "training ranks), on (at any size) or off (every rank planned and simulated: the reference)",
       choices=FOLD_SETTINGS),
    _k("baseline", "", "baseline", "baseline", "what speedup compares with: none, a strategy, or "
       "NAME:key=value,... (default: the strategy's paper baseline)"),
    # workload
    _k("scaling", "workload", "scaling", "choice", "weak or strong", choices=SCALINGS),
    _k("bucket_mb", "workload", "bucket_mb", "float", "DDP bucket size in MB (0 = one bucket)", unit="MB", lo=0,
       hi=1e6),
    _k("dataload", "workload", "dataload_s", "time", "data-loading time per iteration, e.g. 20ms", unit="s",
       lo=0, hi=1e6, toml=("workload.dataload_s",)),
    _k("dataload_overlap", "workload", "dataload_overlap", "bool", "true: data loading overlaps the iteration"),
    _k("compute_scale", "workload", "compute_scale", "floats", "per-node (or per-rank) compute factors, a,b,...",
       lo=0, lo_open=True, hi=1e6),
    _k("compute_jitter", "workload", "compute_jitter", "float", "per-iteration jitter: cv of each rank's compute, "
       "drawn afresh every iteration (0 = none)", lo=0, hi=1, hi_open=True),
    _k("precision", "workload", "precision", "str", "fp32, amp-fp16, amp-bf16, fp16, bf16, fp8, "
       "fp8-tensorwise, mxfp8 (compute and wire dtype)"),
    _k("wire_dtype", "workload", "wire_dtype", "str", "what gradients/models travel in: fp32, fp16, bf16, fp64 "
       "(default: the precision's)"),
    _k("attention", "workload", "attention", "choice", "how a zoo transformer's attention core is priced: flash "
       "(FlashAttention, the default) or unfused (Megatron-LM 2021-22: full s×s core, scores through HBM)",
       choices=("flash", "unfused")),
    _k("framework", "workload", "framework", "choice", "training framework whose data-parallel and ZeRO/FSDP "
       "schedule megatron runs: bucket sizes, prefetch, streams, overlaps (default: simcomm's generic schedule; "
       "docs/strategies-llm.md)", choices=FRAMEWORK_NAMES),
    _k("straggler_scale", "workload", "straggler_scale", "float", "compute scale factor of the straggling node "
       "(1 = none)", lo=0, lo_open=True, hi=1e6),
    _k("straggler_node", "workload", "straggler_node", "int", "index of the straggling node", lo=0,
       hi=MAX_NODES - 1),
    _k("jitter", "workload", "jitter", "float", "spread of the static per-node compute scale (0 = none)", lo=0,
       hi=10),
    _k("jitter_dist", "workload", "jitter_dist", "choice", "normal, uniform or lognormal", choices=JITTER_DISTS),
    _k("jitter_seed", "workload", "jitter_seed", "int", "seed of the per-node jitter draw", lo=0, hi=2 ** 63 - 1),
    # transport stack
    _k("stack", "stack", "name", "str", "transport stack (simcomm list stacks; default: the cluster preset's)",
       toml=("stack.name",)),
    _k("stack_efficiency", "stack", "efficiency", "float", "fraction of line rate the stack reaches", lo=0,
       lo_open=True, hi=1, toml=("stack.efficiency",)),
    _k("stack_overhead", "stack", "overhead", "time", "per-message software overhead, e.g. 20us", unit="s", lo=0,
       hi=1, toml=("stack.overhead",)),
    _k("stack_cpu", "stack", "cpu_per_byte", "time", "host CPU time per byte sent or received, charged to the "
       "compute it overlaps, e.g. 25ns", unit="s/B", lo=0, hi=1e-3, toml=("stack.cpu_per_byte",)),
    _k("stack_reduce", "stack", "reduce_per_byte", "time", "host CPU time per byte a CPU collective (gloo, MPI "
       "on host memory) reduces, e.g. 0.4ns; default: the device's (simcomm calibrate measures it)", unit="s/B",
       lo=0, hi=1e-3, toml=("stack.reduce_per_byte",)),
    _k("collectives", "stack", "collectives", "str", "how auto picks collective algorithms: nccl, openmpi, "
       "openmpi-3.1, mpich, gloo (default: the stack's)"),
    _k("nccl_algo", "stack", "nccl_algo", "str", "like NCCL_ALGO: ring, tree, nvls, nvls-tree, collnet-direct, "
       "collnet-chain, pat"),
    _k("nccl_proto", "stack", "nccl_proto", "str", "like NCCL_PROTO: ll, ll128, simple"),
    # network overrides (two-level presets)
    _k("inter", "network", "inter", "str", "link class of the internode network (NIC link and fabric), e.g. "
       "ib-edr, ib-hdr, eth-25g"),
    _k("intra", "network", "intra", "str", "link class inside a node, e.g. pcie3, nvswitch-a100"),
    _k("nic", "network", "nic", "str", "link class attaching a GPU to its NIC, e.g. pcie3, pcie4"),
    _k("nics_per_node", "network", "nics_per_node", "int", "NICs per node", lo=1, hi=64),
    _k("topology", "network", "topology", "choice", "internode network kind", choices=TOPOLOGIES),
    _k("oversubscription", "network", "oversubscription", "float", "fat-tree uplink oversubscription r "
       "(implies topology fat-tree)", lo=1, hi=1024),
    _k("links", "network", "links", "str", "calibrated link file (simcomm calibrate --out): calib-inter on the "
       "host links, calib-intra inside a machine, used as measured"),
    # NVLink domains spanning machines (multi-node NVLink presets: simcomm.topologies.nvlink)
    _k("nvl_domain", "nvlink", "domain", "int", "GPUs per NVLink domain, whole trays (multi-node NVLink presets: "
       "gb200-nvl72 72, gb200-nvl36 36 or 72, h100-nvl256 256; default: the preset's)", unit="GPUs", lo=1,
       hi=MAX_NODES),
    _k("nvl_split", "nvlink", "split", "ints", "trays (nodes) in each NVLink domain, in order, e.g. 18,14 or 16+16 "
       "(default: domains filled in order); must add up to --nodes", lo=1, hi=MAX_NODES),
    # GPU memory check (simcomm.memory.fit)
    _k("gpu_memory", "memory", "gpu_memory", "size", "memory of one GPU, e.g. 96GB (default: the cluster's "
       "device's)", unit="B", lo=0, lo_open=True, hi=1e15),
    _k("memory", "memory", "policy", "choice", "when the peak memory exceeds the GPU's: refuse (one error "
       "line), warn (print the shortfall and run) or off (no check)", choices=POLICIES),
    _k("memory_margin", "memory", "margin", "float", f"fraction of the peak added for the caching allocator's "
       f"fragmentation (default {DEFAULT_MARGIN:g} for a large-model layout; 0 for a data-parallel replica's "
       f"estimate, an assumption: docs/traces.md)", lo=0, hi=1, hi_open=True),
)


def _m(name, kind, help, **kw) -> Key:
    """A key of the ``[model]`` table: a transformer's shape (simcomm.llm.models.TransformerConfig)."""
    if kind == "int":
        kw = {"lo": 1 if name not in _ZERO_OK else 0, "hi": 1e8, **kw}
    return Key(name, "model", {"model_config": "config"}.get(name, name), kind, help, **kw)


#: shape keys where 0 means "none" (no learned positions, no window, no query bottleneck, ...)
_ZERO_OK = ("positions", "window", "shared_experts", "first_dense", "q_lora_rank", "qk_nope_head_dim",
            "qk_rope_head_dim")
#: the [model] table: a Hugging Face config or zoo model as the base, each key given changing exactly itself
MODEL_KEYS: tuple[Key, ...] = (
    _m("model_config", "str", "Hugging Face config.json of the model (model_type llama, mistral, mixtral, qwen2, "
       "qwen2_moe, qwen3, qwen3_moe, deepseek_v2, deepseek_v3, gpt2, gpt_neox, falcon, mpt, nemotron)"),
    _m("seq", "int", "sequence length in tokens (any transformer, zoo or not)"),
    _m("layers", "int", "transformer layers"),
    _m("hidden", "int", "hidden size"),
    _m("heads", "int", "attention (query) heads"),
    _m("kv_heads", "int", "key/value heads (= heads: MHA; fewer: GQA; 1: MQA)"),
    _m("head_dim", "int", "width of one head (default hidden / heads)"),
    _m("ffn", "int", "FFN size of the dense MLP layers"),
    _m("vocab", "int", "vocabulary size"),
    _m("mlp", "choice", "MLP kind: swiglu (gated, 3 matrices), gelu or relu2 (2 matrices)",
       choices=("swiglu", "gelu", "relu2")),
    _m("norm", "choice", "norm kind: layernorm, rmsnorm or layernorm-nobias",
       choices=("layernorm", "rmsnorm", "layernorm-nobias")),
    _m("bias", "bool", "biases on the attention projections and a non-gated MLP"),
    _m("qkv_bias", "bool", "biases on the Q, K and V projections only (Qwen2)"),
    _m("qk_norm", "bool", "an RMSNorm over each head's queries and keys (Qwen3)"),
    _m("tied", "bool", "output projection tied to the input embedding"),
    _m("positions", "int", "learned position embeddings (0: rotary or ALiBi)"),
    _m("parallel", "bool", "attention and MLP read the same input (GPT-J, GPT-NeoX, Falcon)"),
    _m("shared_norm", "bool", "a parallel block's one norm for attention and MLP (GPT-J, Falcon 7B)"),
    _m("embed_norm", "bool", "a norm after the embedding (BLOOM)"),
    _m("window", "int", "sliding-window attention span in tokens (0: none)"),
    _m("experts", "int", "routed experts per MoE layer"),
    _m("top_k", "int", "routed experts per token"),
    _m("expert_ffn", "int", "FFN size of each routed expert"),
    _m("shared_experts", "int", "always-on shared experts per MoE layer"),
    _m("shared_ffn", "int", "FFN size of each shared expert (default expert_ffn)"),
    _m("first_dense", "int", "leading dense layers before the MoE layers"),
    _m("moe_every", "int", "every n-th layer from first_dense on is MoE"),
    _m("router_bias", "bool", "a learned bias per expert in the router (DeepSeek-V3's correction bias)"),
    _m("shared_gate", "bool", "a sigmoid gate on the shared expert (Qwen2-MoE)"),
    _m("q_lora_rank", "int", "latent attention: query bottleneck rank (0: a full query projection)"),
    _m("kv_lora_rank", "int", "latent attention: key-value latent rank (DeepSeek-V2/V3)"),
    _m("qk_nope_head_dim", "int", "latent attention: per-head query/key width without rotary"),
    _m("qk_rope_head_dim", "int", "latent attention: per-head rotary query/key width"),
    _m("v_head_dim", "int", "latent attention: per-head value width"),
)
KEYS = KEYS + MODEL_KEYS
KEY: dict[str, Key] = {k.name: k for k in KEYS}


def _number(key: Key, value, integer: bool):
    if isinstance(value, bool):
        raise ConfigError(f"{key.name}: {value!r} must be {'an integer' if integer else 'a number'}")
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            if integer:
                try:
                    f = float(text)
                except ValueError:
                    f = math.nan
                if f == f and abs(f) != math.inf and f == int(f):
                    value = int(f)  # 1e3 nodes
                else:
                    raise ConfigError(f"{key.name}: {value!r} must be an integer") from None
            else:
                raise ConfigError(f"{key.name}: {value!r} must be a number") from None
    if integer:
        if isinstance(value, float) and value == value and abs(value) != math.inf and value == int(value):
            value = int(value)
        if not isinstance(value, int):
            raise ConfigError(f"{key.name}: {value!r} must be an integer")
    elif not isinstance(value, (int, float)):
        raise ConfigError(f"{key.name}: {value!r} must be a number")
    else:
        value = float(value)
    _bounded(key, value)
    return value


def _bounded(key: Key, value) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key.name}: {value!r} must be a finite number ({key.bounds_text()})")
    bad = (key.lo is not None and (value <= key.lo if key.lo_open else value < key.lo)) or \
          (key.hi is not None and (value >= key.hi if key.hi_open else value > key.hi))
    if bad:
        shown = value if abs(value) < 1e15 else f"{value:.3g}"
        raise ConfigError(f"{key.name}: {shown} is out of range; it must be {key.bounds_text()}"
                          + (f" ({key.unit})" if key.unit else ""))


def _time(key: Key, value, spelled_in_seconds: bool) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{key.name}: {value!r} must be a time such as 20ms")
    if isinstance(value, (int, float)) or (isinstance(value, str) and _is_bare_number(value)):
        if not spelled_in_seconds and float(value) != 0:  # zero is zero in any unit
            example = "25ns" if key.name == "stack_cpu" else "20ms"
            raise ConfigError(f"{key.name}: {value!r} needs a unit, e.g. {example} (a bare number is not a time)")
        value = float(value)
    else:
        if not isinstance(value, str):
            raise ConfigError(f"{key.name}: {value!r} must be a time such as 20ms")
        value = parse_time(value, key.name)
    _bounded(key, float(value))
    return float(value)


def _size(key: Key, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{key.name}: {value!r} must be a size such as 96GB")
    if isinstance(value, (int, float)) or _is_bare_number(value):
        raise ConfigError(f"{key.name}: {value!r} needs a unit, e.g. 96GB (a bare number is not a size)")
    nbytes = parse_size(value, key.name)
    _bounded(key, float(nbytes))
    return float(nbytes)


def _is_bare_number(text: str) -> bool:
    try:
        float(text.strip())
    except ValueError:
        return False
    return True


def _bool(key: Key, value) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "1", "0", "on", "off"):
        return value.strip().lower() in ("true", "yes", "1", "on")
    raise ConfigError(f"{key.name}: {value!r} must be true or false")


def _floats(key: Key, value) -> tuple[float, ...]:
    if isinstance(value, str):
        items: list = [x for x in value.split(",") if x.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ConfigError(f"{key.name}: {value!r} must be a list of numbers, e.g. 1.0,1.3")
    if len(items) > MAX_NODES * MAX_GPUS_PER_NODE:
        raise ConfigError(f"{key.name}: {len(items)} values is more than there can be ranks")
    return tuple(_number(key, x, False) for x in items)


def _ints(key: Key, value) -> tuple[int, ...]:
    """A list of integers: ``18,14``, ``16+16`` or a TOML array."""
    if isinstance(value, str):
        items: list = [x for x in value.replace("+", ",").split(",") if x.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ConfigError(f"{key.name}: {value!r} must be a list of integers, e.g. 18,14")
    if not items or len(items) > MAX_NODES:
        raise ConfigError(f"{key.name}: {value!r} must list 1 to {MAX_NODES:,} integers, e.g. 18,14")
    return tuple(_number(key, x, True) for x in items)


def coerce(name: str, value, *, spelled_in_seconds: bool = False):
    """``value`` of key ``name`` checked and converted to its type (a ConfigError otherwise).

    Strings (from CLI flags or sweep axes) and TOML values take the same path.
    ``None`` stays None (the key's default).  ``spelled_in_seconds``: the value
    came from a spelling whose name states the unit (``dataload_s``), so a bare
    number is seconds; elsewhere a bare number is refused for a time.
    """
    key = KEY[name]
    if value is None:
        return None
    if key.kind == "int":
        return _number(key, value, True)
    if key.kind == "float":
        return _number(key, value, False)
    if key.kind == "time":
        return _time(key, value, spelled_in_seconds)
    if key.kind == "size":
        return _size(key, value)
    if key.kind == "bool":
        return _bool(key, value)
    if key.kind == "floats":
        return _floats(key, value)
    if key.kind == "ints":
        return _ints(key, value)
    if key.kind == "choice":
        if not isinstance(value, str) or value not in key.choices:
            raise ConfigError(f"{key.name}: {value!r} is not valid; valid choices: {', '.join(key.choices)}")
        return value
    if key.kind == "baseline":
        from simcomm.scenario.spec import parse_baseline

        return parse_baseline(value)
    if not isinstance(value, str) or not value.strip() or len(value) > 4096:
        raise ConfigError(f"{key.name}: {value!r} must be a non-empty name or path")
    return value.strip()

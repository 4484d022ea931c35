"""What a seed preset's paper ran on it: its setting, filled in where the user gave none (docs/topologies.md).

A seed preset is the platform a seed paper measured on.  Seed 000 ran
node-based communication against its all-reduce baseline on DEEP-EST ESB
(Table III: CIFAR, ResNet-18/50/101, 4-20 nodes of 1 V100) and on Ceta-Ciemat
(Table VII: ImageNet-1K, ResNet-18/34 and ShuffleNetV2, R = 16 on M = 4).  Its
code loads every batch inside the training process (``get_dataloader``
without ``num_workers``: the load blocks every iteration) and evaluates over
the test set after every epoch (``trainer.fit(..., test_interval=1)``,
CIFAR/main.py:96-104; seed-code-facts A.1).  A run on such a preset with no
model, batch, dataset or loading of its own runs that setting, each filled-in
value said in an ``assumed:`` line with where it comes from; a setting the
paper never ran (another strategy, node count, GPUs per node or model) is
allowed and said in one ``assumed:`` line.

The per-image loading cost is the one unknown of each table: it is the value
``simcomm validate`` fits (case seed000-node-based, on Table III ResNet-18 at
8 nodes and Table VII ResNet-18, rows it then does not report as
predictions); the test-set transforms are measured (torchvision in one
process).  tests/scenario/test_seed_settings.py holds both to validate's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["SeedSetting", "SETTINGS", "apply_seed_setting", "strategy_defaults"]

#: nodes of a scenario that gives none (simcomm.scenario.spec.Scenario)
DEFAULT_NODES = 4


@dataclass(frozen=True)
class SeedSetting:
    """One seed table as its platform ran it."""

    source: str  # "seed 000 Table III"
    what: str  # the setting in words
    strategies: tuple[str, ...]  # the methods the table compares
    nodes: tuple[int, ...]  # node counts the table ran
    gpus_per_node: int
    model: str  # the zoo model run when the user names none
    batches: dict[str, int]  # model -> per-replica batch the code ran (global batch when ``strong``)
    dataset: str
    dataset_size: int
    test_size: int = 0  # evaluated every epoch (0: no evaluation in the timed runs)
    load_per_image: float = 0.0  # seconds per training image, blocking (fitted by simcomm validate)
    load_source: str = ""  # where the loading comes from, or why there is none
    test_per_image: float = 0.0  # seconds per test image (measured)
    precision: str | None = None  # what the code computes in, when not fp32
    strong: bool = False  # the table scales a fixed global batch
    options: dict[str, dict] = field(default_factory=dict)  # strategy -> its options in this table
    reported: dict[tuple[str, int], float] = field(default_factory=dict)  # (model, nodes) -> speedup %


_LOAD_WHY = ("the code loads in the training process (get_dataloader without num_workers, so every iteration "
             "waits for it); the per-image cost is not published: simcomm validate fits it")
SETTINGS: dict[str, SeedSetting] = {
    "deep-est-esb": SeedSetting(
        source="seed 000 Table III", what="CIFAR-10, ResNet-18/50/101, 4-20 nodes x 1 V100, K' = K",
        strategies=("node-based", "allreduce"), nodes=(4, 8, 12, 16, 20), gpus_per_node=1,
        model="resnet50-cifar",
        # CIFAR/main.py:43-44 forces ResNet-101 to 98 ("lack of GPU RAM"); the paper says 128
        batches={"resnet18-cifar": 128, "resnet50-cifar": 128, "resnet101-cifar": 98},
        dataset="cifar10", dataset_size=50_000, test_size=10_000,
        load_per_image=2.05e-3, load_source="fitted on Table III ResNet-18 at 8 nodes",
        test_per_image=0.30e-3,
        options={"node-based": {"k_prime": -1}},  # the code's --sharingiter -1: K' = K on CIFAR
        reported={(m, n): v for m, vals in {"resnet18-cifar": (1.0, 4.97, 15.12, 5.62, 1.55),
                                            "resnet50-cifar": (1.0, 5.77, 17.99, 11.02, 6.11),
                                            "resnet101-cifar": (1.0, 7.24, 21.47, 12.93, 7.15)}.items()
                  for n, v in zip((4, 8, 12, 16, 20), vals, strict=False)}),
    "ceta-ciemat": SeedSetting(
        source="seed 000 Table VII", what="ImageNet-1K, ResNet-18/34 and ShuffleNetV2, R = 16 on M = 4, K' = 50",
        strategies=("node-based", "allreduce"), nodes=(4,), gpus_per_node=4,
        model="resnet34",  # ResNet-18 is the row the loading is fitted on
        batches={"resnet18": 64, "resnet34": 64, "shufflenetv2": 64},  # Sec. IV-B: 64 per replica
        dataset="imagenet", dataset_size=1_281_167, test_size=50_000,
        load_per_image=18.1e-3, load_source="fitted on Table VII ResNet-18",
        test_per_image=10.9e-3,
        options={"node-based": {"k_prime": 50}},
        reported={("resnet18", 4): 1.10, ("resnet34", 4): 2.34, ("shufflenetv2", 4): 1.03}),
    # seed 001 Fig. 11: the AWS timing code (aws/imagenet_test.py; seed-code-facts A.2)
    "aws-g4dn": SeedSetting(
        source="seed 001 Fig. 11", what="ResNet-50 timing on 4-16 g4dn instances x 1 T4, the AWS timing code",
        strategies=("allreduce", "sgp", "crossover-sgd", "hierarchical-crossover-sgd"), nodes=(4, 8, 16),
        gpus_per_node=1, model="resnet50", batches={"resnet50": 64},  # the code's --batch_size default
        dataset="imagenet", dataset_size=1_281_167,
        # the timed loop draws its batch on the CPU and runs per-tensor host loops (norms, LARS): simcomm validate
        # prices them for ResNet-50 (simcomm.validation.aws_loop); a run here leaves them to --dataload
        load_source="synthetic torch.rand input, no data loading (the timed loop's host work, ~102 ms for "
                    "ResNet-50 at batch 64, is in simcomm validate's seed001 case: simcomm.validation.aws_loop)",
        precision="amp-fp16",
        options={"sgp": {"mode": "blocking"}, "crossover-sgd": {"mode": "blocking"},
                 "hierarchical-crossover-sgd": {"mode": "blocking", "broadcast": "model"}}),
    # seed 002 Table II
    "gbe-4gpu": SeedSetting(
        source="seed 002 Table II", what="CIFAR-10 ResNet-20 and VGG-16 on 4 GPUs over 1 GbE",
        strategies=("gtopk", "sketched-sgd", "gs-sgd"), nodes=(4,), gpus_per_node=1, model="resnet20-cifar",
        batches={"resnet20-cifar": 32, "vgg16-cifar": 32},  # the gTop-k code's exp_configs
        dataset="cifar10", dataset_size=50_000,
        load_source="the host cost simcomm validate fits on gTop-k (154-288 ms per iteration) is a catch-all, "
                    "not applied"),
    # seed 003 Fig. 8: strong scaling of a global batch of 256, one MPI rank per Haswell node
    "cori-haswell": SeedSetting(
        source="seed 003 Fig. 8", what="ImageNet VGG-16 and ResNet-50, global batch 256, 1-256 Haswell nodes",
        strategies=("pcnn", "allreduce"), nodes=(1, 2, 4, 8, 16, 32, 64, 128, 256), gpus_per_node=1,
        model="vgg16", batches={"vgg16": 256, "resnet50": 256}, dataset="imagenet", dataset_size=1_281_167,
        load_source="the paper times training without loading", strong=True),
    # seed 004 Table 1, 1 Gb/s: two worker machines x 2 GTX 1080 Ti, a CPU parameter server
    "seed004-ps": SeedSetting(
        source="seed 004 Table 1", what="ResNet-50 on 2 x 2 GTX 1080 Ti workers and a CPU PS over 1 GbE",
        strategies=("ps", "ps-layer-drop"), nodes=(2,), gpus_per_node=2, model="resnet50",
        batches={"resnet50": 64},  # not stated (seed-code-facts D3)
        dataset="imagenet", dataset_size=1_281_167, load_source="the paper gives none"),
}


def _never_ran(s: SeedSetting, strategy: str, nodes: int, gpn: int | None, model: str) -> list[str]:
    out = []
    if strategy not in s.strategies:
        out.append(f"strategy {strategy} (it ran {' and '.join(s.strategies)})")
    if nodes not in s.nodes:
        out.append(f"{nodes} nodes (it ran {', '.join(map(str, s.nodes))})")
    if gpn is not None and gpn != s.gpus_per_node:
        out.append(f"{gpn} GPUs per node (it ran {s.gpus_per_node})")
    if model not in s.batches:
        out.append(f"{'model ' + model if model else 'a trace or shape of its own'} (it ran {', '.join(s.batches)})")
    return out


def _evaluation(s: SeedSetting, ranks: int) -> dict:
    """node-based's per-epoch evaluation: the test set's loading sharded over ``ranks``, and its forward passes."""
    return {"eval_s": math.ceil(s.test_size / ranks) * s.test_per_image, "eval_samples": s.test_size}


def strategy_defaults(cluster: str, model: str | None, strategy: str, ranks: int, evaluation: bool = True) -> dict:
    """The options a seed preset's setting gives ``strategy`` at ``ranks`` ranks (``compare``'s strategies and
    node counts other than the scenario's own); empty off a seed preset or for a model its paper did not run.
    ``evaluation``: include node-based's per-epoch evaluation."""
    s = SETTINGS.get(cluster)
    if s is None or model not in s.batches:
        return {}
    out = dict(s.options.get(strategy, {}))
    if strategy == "node-based" and s.test_size and evaluation:
        out.update(_evaluation(s, ranks))
    return out


def apply_seed_setting(strategy: str, top: dict, workload: dict, shape: dict, options: dict) -> tuple[str, ...]:
    """Fill a seed preset's setting into what the user left unset; returns the ``assumed:`` lines.

    ``top``, ``workload`` and ``options`` are the resolver's checked values (changed in place);
    ``shape`` is the ``[model]`` table (a transformer's shape: never a seed setting).
    """
    s = SETTINGS.get(top.get("cluster", "deep-est-esb"))
    if s is None:
        return ()
    named = "model" in top or "trace" in top or bool(shape)
    if not named:
        top["model"] = s.model
    model: str = "" if "trace" in top or shape else top.get("model", "")
    lines = []
    if "nodes" not in top and DEFAULT_NODES not in s.nodes:  # the scenario's default is not a count it ran
        top["nodes"] = s.nodes[-1]
        lines.append(f"{s.nodes[-1]} nodes ({s.source}'s); --nodes to change")
    nodes, gpn = top.get("nodes", DEFAULT_NODES), top.get("gpus_per_node")
    never = _never_ran(s, strategy, nodes, gpn, model)
    if not named:
        lines.insert(0, f"model {s.model}: {s.source}'s ({s.what}); --model to change")
    scaling = "strong" if s.strong else "weak"
    paper = model in s.batches and workload.get("scaling", scaling) == scaling
    if paper:
        if s.strong and "scaling" not in workload:
            workload["scaling"] = "strong"
        batch = top.setdefault("batch", s.batches[model])
        ranks = nodes * (gpn or s.gpus_per_node)
        if "dataset_size" not in top:
            top["dataset_size"] = s.dataset_size
            test = f", {s.test_size:,} test" if s.test_size else ""
            lines.append(f"dataset {s.dataset}: {s.dataset_size:,} training samples{test} ({s.source})")
        if "dataload_s" not in workload and s.load_per_image:
            workload["dataload_s"] = batch * s.load_per_image
            lines.append(f"data loading {batch * s.load_per_image * 1e3:.4g} ms per iteration, blocking: "
                         f"{s.load_per_image * 1e3:.3g} ms per image x batch {batch} ({s.load_source}; "
                         f"{_LOAD_WHY}); --dataload to change")
        elif "dataload_s" not in workload:
            lines.append(f"no data loading: {s.load_source}; --dataload to add it")
        if s.precision and "precision" not in workload:
            workload["precision"] = s.precision
            lines.append(f"precision {s.precision} ({s.source}'s code); --precision to change")
        own = s.options.get(strategy, {})
        for key, value in own.items():
            options.setdefault(key, value)
        if own:
            lines.append(f"{strategy} as {s.source}'s code runs it: "
                         + ", ".join(f"{k}={v}" for k, v in own.items()) + " (unless given)")
        if strategy == "node-based" and s.test_size and "eval_s" not in options and "eval_samples" not in options:
            options.update(_evaluation(s, ranks))
            per_rank = math.ceil(s.test_size / ranks)
            lines.append(f"evaluation every epoch over the {s.test_size:,} test images sharded over the {ranks} "
                         f"ranks (the code's test_interval=1): loading {per_rank} x {s.test_per_image * 1e3:.3g} "
                         f"ms (the test transforms measured in one process) plus their forward passes; "
                         "eval-s / eval-samples to change")
        if not never:
            value = s.reported.get((model, nodes))
            per = "global batch" if s.strong else "batch"
            lines.append(f"setting: {s.source}, {model} at {nodes} nodes x {s.gpus_per_node} GPU(s), {per} "
                         f"{batch}" + (f"; the paper measured a {value:g} % speedup of node-based over its "
                                       f"all-reduce baseline" if value is not None else ""))
    if never:
        lines.append(f"{' '.join(s.source.split()[:2])} never ran this on {top.get('cluster', 'deep-est-esb')}: "
                     + "; ".join(never) + f" ({s.source}: {s.what})"
                     + ("" if paper else "; so no batch, loading or evaluation from its setting"))
    return tuple(lines)

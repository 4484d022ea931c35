"""NCCL: its own algorithms, protocols and tuning model (the package :mod:`simcomm.nccl`), as one runtime.

NCCL does not run the MPI textbook algorithms: it picks Ring, Tree, NVLS,
NVLS-Tree, CollNet or PAT and a protocol with its tuning model and streams the
buffer through every channel at once (docs/nccl.md).  An op that names an MPI
textbook algorithm (``rabenseifner``, ``binomial``) is priced by the catalogue
on MPICH's rules, so a user may ask what it would cost on this fabric.

``nccl_algo`` and ``nccl_proto`` are NCCL_ALGO and NCCL_PROTO (normalised by
:func:`simcomm.stacks.nccl_name`); ``gpus_per_thread`` is nccl-tests' ``-g``
(1 for PyTorch DDP/FSDP: one process per GPU); ``pair_blocks_from`` is how the
preparation represents a PXN all-to-all (a speed choice: the same floats either way).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any

from simcomm.collectives.runtime import Prepared
from simcomm.errors import ConfigError
from simcomm.runtimes.base import RUNTIMES
from simcomm.runtimes.mpi import MPICH

__all__ = ["NcclRuntime"]


@dataclass(frozen=True)
class NcclRuntime:
    """How NCCL runs collectives, with NCCL_ALGO/NCCL_PROTO-like overrides."""

    nccl_algo: str | None = None
    nccl_proto: str | None = None
    #: GPUs one host thread drives (nccl-tests' -g); 1 for PyTorch DDP/FSDP, one process per GPU
    gpus_per_thread: int = 1
    #: a PXN all-to-all of at least this many transfers is prepared as blocks of pairs, its link loads counted by
    #: classes (:func:`simcomm.nccl.prepare.prepare_nccl`; the same floats); below, routing its pairs costs less
    #: (~1 ms at 128 ranks, ~3 ms to count).  1 keeps every one as blocks (the tests of the counted path)
    pair_blocks_from: int = 1 << 13

    def __post_init__(self) -> None:
        if isinstance(self.pair_blocks_from, bool) or not isinstance(self.pair_blocks_from, int) \
                or self.pair_blocks_from < 1:
            raise ConfigError(f"pair_blocks_from: must be an integer >= 1, got {self.pair_blocks_from!r}")

    @property
    def name(self) -> str:
        return "nccl"

    @property
    def how(self) -> str:
        forced = [f"{env}={v}" for env, v in (("NCCL_ALGO", self.nccl_algo), ("NCCL_PROTO", self.nccl_proto)) if v]
        return "NCCL's tuning model" + (" within " + ", ".join(forced) if forced else "")

    @property
    def settings(self) -> tuple[str, ...]:
        return ("nccl_algo", "nccl_proto")

    @property
    def grouped_p2p(self) -> bool:
        return True  # nccl-tests' sendrecv_perf: grouped ncclSend/ncclRecv, NCCL's point-to-point path

    @property
    def reduces_on_host(self) -> bool:
        return False  # NCCL's kernels reduce on the GPU

    def configured(self, **settings: str | None) -> NcclRuntime:
        unknown = sorted(set(settings) - set(self.settings))
        if unknown:
            raise ConfigError(f"{unknown[0]}: not a setting of NCCL's collectives; valid choices: "
                              f"{', '.join(self.settings)}")
        return replace(self, nccl_algo=settings.get("nccl_algo") or self.nccl_algo,
                       nccl_proto=settings.get("nccl_proto") or self.nccl_proto)

    def with_gpus_per_thread(self, gpus: int) -> NcclRuntime:
        return replace(self, gpus_per_thread=gpus)

    def placement(self, op: Any, topology: Any, ppn: int | None) -> Hashable:
        # NCCL's channels, rings and trees follow where each member sits; groups on alike machines with the same
        # local members are prepared alike (simcomm.nccl.shapes: one preparation, bit for bit)
        from simcomm.nccl.shapes import group_shape

        shape = group_shape(topology, op.ranks)
        return op.ranks if shape is None else ("machine class", *shape)

    def prepare(self, op: Any, topology: Any, ppn: int | None) -> Prepared:
        from simcomm.nccl import prepare_nccl

        prepared = prepare_nccl(op, topology, self)
        if prepared is not None:
            return prepared
        return MPICH.prepare(op, topology, ppn)  # a named textbook algorithm: the catalogue's, on MPICH's rules

    def exchanges(self, plan, topology=None):
        return plan  # ncclSend/ncclRecv of a pair run at once, each on its own channel's connection

    def with_tcp(self, protocol: str | None) -> NcclRuntime:
        return self  # NCCL's socket transport is the stack's (nccl-socket), not an MPI protocol

    def assumed(self, kind: str, topology: Any = None) -> tuple[str, ...]:
        from simcomm.nccl.execution import LAUNCH_PER_GPU_S
        from simcomm.nccl.tuning import VERSION

        out: tuple[str, ...] = (
            f"NCCL's algorithm and protocol choice and model: {VERSION} (--nccl-algo, --nccl-proto)",
            f"kernel launch {LAUNCH_PER_GPU_S * 1e6:.3f} us per GPU the calling thread drives, fitted once on a "
            "held-out public run (docs/accuracy.md; --gpus-per-thread)")
        if kind in ("alltoall", "sendrecv"):
            out += ("point-to-point messages priced as one NCCL ring step of their protocol and hop: NCCL has no "
                    "p2p latency model (docs/nccl.md)",)
        if topology is not None:
            from simcomm.nccl.fabric import fabric_note

            out += tuple(fabric_note(topology))
        return out


RUNTIMES.add("nccl", NcclRuntime(), summary="NCCL's algorithms, protocols and tuning model (Ring, Tree, NVLS, "
             "NVLS-Tree, CollNet, PAT; LL, LL128, Simple)",
             reference="NVIDIA/nccl src/graph/tuning.cc, src/device/*; docs/nccl.md")

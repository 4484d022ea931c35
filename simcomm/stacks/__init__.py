"""Transport stacks (NCCL, MPI over TCP, gloo, CPU parameter server, ideal), applied as effective topologies."""

from simcomm.stacks import presets as _presets  # noqa: F401  (registers the presets)
from simcomm.stacks.base import INTRANODE_FAMILIES, STACKS, Stack, apply_stack, get_stack

__all__ = ["INTRANODE_FAMILIES", "STACKS", "Stack", "apply_stack", "get_stack"]

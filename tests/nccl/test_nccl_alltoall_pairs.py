"""NCCL's all-to-all pattern built as arrays: the same pairs, order and bytes as the pair-by-pair loops."""

from __future__ import annotations

import numpy as np
import pytest

from simcomm.nccl.algorithms.p2p import P2P
from simcomm.nccl.layout import group_layout
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.two_level import two_level


def _loops(layout, nbytes):
    """The pattern as NCCL's p2p scheduling visits it, pair by pair (the reference the arrays reproduce)."""
    p, L, N = layout.n_ranks, layout.ppn, layout.n_nodes
    if N == 1 or L == 1 or not layout.uniform or layout.nics_per_node == 0 or not layout.pxn:
        pairs = [(i, j, nbytes / p) for i in range(p) for j in range(p) if i != j]
    else:
        pairs = [(a, b, N * nbytes / p) for node in layout.nodes for a in node for b in node if a != b]
        pairs += [(layout.nodes[k][j], layout.nodes[k2][j], L * nbytes / p)
                  for j in range(L) for k in range(N) for k2 in range(N) if k != k2]
    return (np.array([x[0] for x in pairs], dtype=np.int64), np.array([x[1] for x in pairs], dtype=np.int64),
            np.array([x[2] for x in pairs], dtype=float))


FABRICS = {
    "nvswitch 3 x 8 (PXN)": lambda: two_level(3, 8, intra="nvswitch", nic_link="ib-hdr", nics_per_node=8,
                                              device="h100"),
    "nvswitch 1 x 8": lambda: two_level(1, 8, intra="nvswitch", nic_link="ib-hdr", nics_per_node=8, device="h100"),
    "pcie 2 x 4 (no PXN)": lambda: two_level(2, 4, intra="pcie", intra_link="pcie5", nic_link="roce-400g",
                                             nics_per_node=4, nic_attach="pcie5", device="l40s"),
    "one GPU per node": lambda: two_level(4, 1, intra="pcie", intra_link="pcie4", nic_link="ib-hdr",
                                          nic_attach="pcie4", inter="switch", device="a100"),
}


@pytest.mark.parametrize("name", list(FABRICS))
@pytest.mark.parametrize("members", ["all", "strided", "uneven"])
def test_alltoall_pairs_as_arrays_equal_the_loops(name, members):
    topo = apply_stack(FABRICS[name](), get_stack("nccl"))
    ranks = list(range(topo.n_ranks))
    if members == "strided":
        ranks = ranks[::2] if len(ranks) > 2 else ranks
    elif members == "uneven":
        ranks = ranks[:-1] if len(ranks) > 2 else ranks
    layout = group_layout(topo, ranks)
    if name.endswith("(PXN)") and members != "uneven":
        assert layout.pxn and layout.uniform  # the relayed pattern is the one exercised
    for nbytes in (0.0, 3.0, 1e8 / 3):
        got, want = P2P().flows("alltoall", layout, nbytes, 0), _loops(layout, nbytes)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


def test_one_pattern_per_layout_shared_by_every_size():
    # pcnn runs an all-to-all per conv unit, each of its own size: the pairs (and their routed global ranks)
    # are built once per layout and shared, read-only; only the bytes are each call's own
    import simcomm.nccl.algorithms  # noqa: F401  (registers the catalogue)
    from simcomm.engine.schedule import route_step
    from simcomm.nccl.prepare import prepare_nccl
    from simcomm.ops import Collective
    from simcomm.runtimes import NcclRuntime

    topo = apply_stack(FABRICS["nvswitch 3 x 8 (PXN)"](), get_stack("nccl"))
    layout = group_layout(topo, list(range(topo.n_ranks)))
    a, b = P2P().flows("alltoall", layout, 8e6, 0), P2P().flows("alltoall", layout, 3e6, 0)
    assert a[0] is b[0] and a[1] is b[1] and not a[0].flags.writeable
    assert a[2].tobytes() == _loops(layout, 8e6)[2].tobytes() and b[2].tobytes() == _loops(layout, 3e6)[2].tobytes()
    cache: dict = {}
    group = np.arange(topo.n_ranks)
    steps = [prepare_nccl(Collective(0, "alltoall", tuple(range(topo.n_ranks)), n), topo, NcclRuntime()).steps[0]
             for n in (8e6, 3e6)]
    # the preparation keeps the pattern as its blocks of pairs (simcomm.collectives.pairs); built, its messages
    # are the layout's pattern, shared (no copy)
    assert all(np.shares_memory(s.src, a[0]) and np.shares_memory(s.dst, a[1]) for s in steps)
    assert steps[0].nbytes.tobytes() == a[2].tobytes() and steps[1].nbytes.tobytes() == b[2].tobytes()
    one, two = (route_step(topo, group, s, np.zeros(topo.n_ranks), cache) for s in steps)
    assert one.src is two.src and one.links is two.links and one.red_slot is two.red_slot
    assert one.nbytes.tobytes() != two.nbytes.tobytes()


@pytest.mark.parametrize("name", ["nvswitch 3 x 8 (PXN)", "pcie 2 x 4 (no PXN)", "one GPU per node"])
@pytest.mark.parametrize("nbytes", [0.0, 3.0, 818e3, 1e8 / 3])
def test_blocks_prepare_the_flows_preparation_bit_for_bit(name, nbytes, monkeypatch):
    # PXN's all-to-all prepared from its blocks (each link's bytes counted by classes, no pair routed) has the
    # flows' closed form, latency, label and messages, bit for bit
    import simcomm.nccl.algorithms  # noqa: F401  (registers the catalogue)
    from simcomm.nccl.prepare import prepare_nccl
    from simcomm.ops import Collective
    from simcomm.runtimes import NcclRuntime

    topo = apply_stack(FABRICS[name](), get_stack("nccl"))
    op = Collective(0, "alltoall", tuple(range(topo.n_ranks)), nbytes)
    # (a small all-to-all is routed by default: counting costs more there)
    kept = prepare_nccl(op, topo, NcclRuntime(pair_blocks_from=1))
    monkeypatch.setattr(P2P, "blocks", lambda *args: None)
    flows = prepare_nccl(op, topo, NcclRuntime())
    assert type(kept.steps[0]).__name__ == ("PairsStep" if name.endswith("(PXN)") else "Step")
    assert kept.closed_form == flows.closed_form and kept.latency == flows.latency and kept.label == flows.label
    for field in ("src", "dst", "nbytes", "reduce"):
        assert getattr(kept.steps[0], field).tobytes() == getattr(flows.steps[0], field).tobytes()


def test_the_blocks_threshold_is_the_runtimes_typed_setting():
    # the default keeps a small PXN all-to-all routed (fewer transfers than 2^13); from pair_blocks_from of its
    # transfers on it is kept as blocks; a value that is not a positive integer is one line
    import simcomm.nccl.algorithms  # noqa: F401  (registers the catalogue)
    from simcomm.errors import ConfigError
    from simcomm.nccl.prepare import prepare_nccl
    from simcomm.ops import Collective
    from simcomm.runtimes import NcclRuntime

    topo = apply_stack(FABRICS["nvswitch 3 x 8 (PXN)"](), get_stack("nccl"))
    op = Collective(0, "alltoall", tuple(range(topo.n_ranks)), 818e3)
    n = sum(P2P().blocks("alltoall", group_layout(topo, op.ranks), op.nbytes).counts())
    assert NcclRuntime().pair_blocks_from == 1 << 13 > n > 1
    assert type(prepare_nccl(op, topo, NcclRuntime()).steps[0]).__name__ == "Step"
    assert type(prepare_nccl(op, topo, NcclRuntime(pair_blocks_from=n)).steps[0]).__name__ == "PairsStep"
    assert type(prepare_nccl(op, topo, NcclRuntime(pair_blocks_from=n + 1)).steps[0]).__name__ == "Step"
    for bad in (0, -1, 1.5, True, "8"):
        with pytest.raises(ConfigError, match="pair_blocks_from: must be an integer >= 1"):
            NcclRuntime(pair_blocks_from=bad)

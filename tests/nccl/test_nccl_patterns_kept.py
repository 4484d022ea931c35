"""Kept NCCL patterns are the patterns: Tree's flows, built once per layout, equal a fresh build bit for bit."""

import pytest

import simcomm.nccl.algorithms  # noqa: F401  (registers the catalogue)
from simcomm.nccl import NCCL_ALGORITHMS, group_layout
from simcomm.topologies.presets import preset


@pytest.mark.parametrize("cluster,nodes,gpn", [("dgx-a100-hdr", 5, 8), ("dgx-a100-hdr", 1, 8),
                                               ("dgx-h100-ndr", 4, 8), ("dgx-a100-hdr", 3, 2)])
def test_tree_flows_kept_per_layout_equal_a_fresh_build(cluster, nodes, gpn):
    topo = preset(cluster, nodes=nodes, gpus_per_node=gpn)
    tree = NCCL_ALGORITHMS.get("tree")
    lay = group_layout(topo, tuple(range(topo.n_ranks)))
    for nbytes in (1e9, 3.0, 123456789.0, 0.0, 7):
        src, dst, nb = tree.flows("allreduce", lay, nbytes, 0)
        want = tree._flows(lay, nbytes)
        assert src.tolist() == want[0].tolist() and dst.tolist() == want[1].tolist()
        assert nb.tolist() == want[2].tolist() and nb.dtype == want[2].dtype
        src[:] = -1  # the caller owns what it gets: the kept pattern is untouched
    assert "_tree_pattern" in lay.__dict__
    assert tree.flows("allreduce", lay, 1.0, 0)[0].min() >= 0


@pytest.mark.parametrize("cluster,nodes,gpn", [("dgx-a100-hdr", 5, 8), ("dgx-a100-hdr", 1, 8),
                                               ("dgx1-v100", 2, 8), ("dgx-a100-hdr", 3, 2)])
def test_ring_flows_kept_per_layout_equal_a_fresh_build(cluster, nodes, gpn):
    topo = preset(cluster, nodes=nodes, gpus_per_node=gpn)
    ring = NCCL_ALGORITHMS.get("ring")
    lay = group_layout(topo, tuple(range(topo.n_ranks)))
    for kind, root in (("allreduce", 0), ("allgather", 0), ("reduce_scatter", 0), ("broadcast", 0),
                       ("broadcast", topo.n_ranks - 1), ("reduce", 1), ("allreduce", 0)):
        for nbytes in (1e9, 3.0, 0.0, 7):
            src, dst, nb = ring.flows(kind, lay, nbytes, root)
            want = ring._flows(kind, lay, nbytes, root)
            assert src.tolist() == want[0].tolist() and dst.tolist() == want[1].tolist(), (kind, root)
            assert nb.tolist() == want[2].tolist() and nb.dtype == want[2].dtype
            src[:] = -1  # the caller owns what it gets


def test_closed_form_of_a_small_group_on_a_large_fabric_is_the_full_counts():
    # _closed_form adds up only the links a small group crosses: the same float as counting every link
    import numpy as np

    from simcomm.collectives.base import Step
    from simcomm.nccl import prepare

    topo = preset("dgx-a100-hdr", nodes=64, gpus_per_node=8)
    rng = np.random.default_rng(2)
    for members in (np.arange(8), np.arange(0, 512, 64), rng.choice(512, 12, replace=False)):
        src, dst = rng.integers(0, len(members), 40), rng.integers(0, len(members), 40)
        step = Step.make(src, dst, rng.uniform(1, 1e8, 40))
        route_len, links = topo.routes(members[src], members[dst])
        load = np.bincount(links, weights=np.repeat(step.nbytes, route_len), minlength=len(topo.capacity))
        want = float((load[load > 0] / topo.capacity[load > 0]).max())
        assert prepare._closed_form(step, topo, members, 1e-6) == 1e-6 + want


def _tree_pairs(tree, layout):
    """Tree's pattern pair by pair, as written before it was built as arrays (the reference)."""
    from simcomm.nccl.channels import chain, dtree_parents, tree_edges

    nics = max(1, layout.nics_per_node)
    trees = dtree_parents(layout.n_nodes) if layout.n_nodes > 1 else ([-1], [-1])
    pairs = []
    for c in range(tree._channels(layout)):
        chains = [chain(layout, node, c % nics) for node in layout.nodes]
        for ch in chains:
            for a, b in zip(ch, ch[1:], strict=False):
                pairs += [(b, a), (a, b)]  # up toward the head, down from it
        for child, parent in tree_edges(trees[(c // nics) % 2]):
            pairs += [(chains[child][0], chains[parent][0]), (chains[parent][0], chains[child][0])]
    return pairs


@pytest.mark.parametrize("cluster,nodes,gpn,stride", [("dgx-a100-hdr", 5, 8, 1), ("dgx-a100-hdr", 1, 8, 1),
                                                      ("dgx-a100-hdr", 6, 8, 3), ("dgx1-v100", 3, 8, 2),
                                                      ("aws-g4dn", 4, None, 1), ("dgx-h100-ndr", 7, 8, 5)])
def test_tree_pattern_arrays_are_its_pairs_in_order(cluster, nodes, gpn, stride):
    # strided groups give nodes of unequal chains (a stride of 3 over 8 GPUs: 3, 3 and 2 members)
    topo = preset(cluster, nodes=nodes, gpus_per_node=gpn)
    tree = NCCL_ALGORITHMS.get("tree")
    lay = group_layout(topo, tuple(range(0, topo.n_ranks, stride)))
    src, dst, nb = tree._flows(lay, 6e6)
    assert list(zip(src.tolist(), dst.tolist(), strict=True)) == _tree_pairs(tree, lay)
    assert nb.tolist() == [6e6 / tree._channels(lay)] * len(src)

"""NCCL's own tuning model: what each (algorithm, protocol) costs, and which one NCCL runs.

A re-statement (no code copied) of NCCL's cost model as specified in
docs/nccl-source-notes.md, which read it from NVIDIA/nccl at commit 8898068
(``src/tuning/*``, the post-2.30.7 refactor that "preserves the pre-refactor
model" of ``src/graph/tuning.cc`` v2.30.7) and its topology search
(``src/graph/search.cc``).  Where versions differ we follow 2.30.x: ties go to
the lowest (algorithm, protocol) id, and PAT needs one GPU per node.

NCCL prices every enabled pair as ``time = latency + bytes / (1000 algBw)``
(us, GB/s) and runs the cheapest.  simcomm uses the model twice:

* to choose (:func:`select`), exactly as NCCL does, from NCCL's own view of
  the fabric: the graph its topology search would build (:func:`graphs`:
  channels and per-channel GB/s, from speed arrays per GPU generation);
* to run the choice on the flow engine: the pattern's flows
  (:mod:`simcomm.nccl.algorithms`) start after the model's latency and carry
  ``bytes / efficiency``, where ``efficiency`` is the model's bandwidth over
  the bandwidth the same pattern would have at the graph's own rates (LL's
  half-payload lines, LL128's 92 %, the per-channel caps, Tree's size
  correction and pattern penalty, NVLS's efficiency).  The flows' links are the
  fabric's effective rates (the stack's NVLink and network efficiencies),
  so contention and slow links change the time; on an uncontended fabric
  whose links match NCCL's view, the simulated time is NCCL's model time.

Units inside this module: microseconds and GB/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.nccl.layout import GroupLayout

__all__ = ["PROTOS", "ALGOS", "Graph", "ModelTime", "graphs", "model", "select", "protocols_enabled", "VERSION",
           "nvls_heads"]

VERSION = "NVIDIA/nccl 2.30.x tuning model (src/graph/tuning.cc v2.30.7; src/tuning/* at 8898068)"
ALGOS = ("tree", "ring", "collnet-direct", "collnet-chain", "nvls", "nvls-tree", "pat")  # NCCL's id order
PROTOS = ("ll", "ll128", "simple")
_P = {p: i for i, p in enumerate(PROTOS)}

#: baseLat[algo][proto], us
BASE_LAT = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "collnet-direct": (0.0, 0.0, 0.0),
            "collnet-chain": (0.0, 0.0, 0.0), "nvls": (0.0, 0.0, 0.0), "nvls-tree": (0.0, 0.0, 0.0),
            "pat": (8.0, 8.0, 8.0)}
#: hwLat[hop][algo][proto], us (0 where the protocol does not exist)
HW_LAT = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "collnet-direct": (0.0, 0.0, 3.7),
               "collnet-chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 25.0), "nvls-tree": (0.0, 0.0, 25.0),
               "pat": (0.0, 0.0, 4.0)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "collnet-direct": (0.0, 0.0, 3.7),
            "collnet-chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 0.0), "nvls-tree": (0.0, 0.0, 0.0),
            "pat": (0.0, 0.0, 4.0)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "collnet-direct": (0.0, 0.0, 31.0),
            "collnet-chain": (0.0, 0.0, 30.0), "nvls": (0.0, 0.0, 18.0), "nvls-tree": (0.0, 0.0, 20.9),
            "pat": (0.0, 0.0, 14.0)},
}
#: rows: compute-capability class (Volta, Ampere, Hopper, Blackwell); columns: 1, 2, >= 3 nodes
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
PER_CH_MAX_RING_LL128 = (20.0, 20.0, 36.7, 40.0)
PER_CH_MAX_TREE_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
PER_CH_MAX_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
PER_CH_MAX_NVLS_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0))
NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)
#: Tree's correction by size, index floor(log2(bytes / 64)) for 64 B .. 512 MiB (applied below index 23)
TREE_CORRECTION = {
    "ll": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
}
#: host cost of a network step, us (ring only), by CPU vendor; x3 for Simple
NET_OVERHEAD = {"intel": 1.0, "amd": 2.0}
#: per-channel speeds NCCL's search tries, high to low (GB/s): (intra-node only, with a network)
SPEEDS = {
    70: ((40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3),
         (48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12)),
    90: ((60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3),
         (48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12)),
    100: ((90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18),
          (96, 90.2, 86, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12)),
}
MAX_SEARCH_CHANNELS = 32  # MAXCHANNELS / 2


def _cc(arch: int) -> int:
    """NCCL's compute-capability class: 0 Volta (< 80), 1 Ampere, 2 Hopper, 3 Blackwell (>= 100)."""
    return 0 if arch < 80 else 1 if arch < 90 else 2 if arch < 100 else 3


def _speeds(arch: int, net: bool) -> tuple:
    return SPEEDS[100 if arch >= 100 else 90 if arch >= 90 else 70][1 if net else 0]


@dataclass(frozen=True)
class Graph:
    """One topology-search result: channels and per-channel GB/s (NCCL's ``ncclTopoGraph``)."""

    n_ch: int
    bw_intra: float
    bw_inter: float
    pattern: str = "ring"  # ring, balanced, tree, nvls


def _search(speeds, limit: float, fits, total: float) -> tuple[int, float] | None:
    """NCCL's speed loop: the most bandwidth (nCh x speed) over the speeds tried high to low.

    ``fits(speed)`` is how many channels the fabric carries at that speed.  The
    loop starts at the first speed under ``limit`` (the best GPU path), stops at
    a perfect result (the channel limit, or ``total`` reached) and stops lowering
    once the next speed is below 0.49x the best found (search.cc).
    """
    tried = [x for x in speeds if x <= limit + 1e-9]
    best = None
    for k, s in enumerate(tried):
        n = min(MAX_SEARCH_CHANNELS, fits(s))
        if n >= 1 and (best is None or n * s > best[0] * best[1] + 1e-9):
            best = (n, s)
        if best is not None and (best[0] >= MAX_SEARCH_CHANNELS or best[0] * best[1] >= total - 1e-9):
            break
        if best is not None and k + 1 < len(tried) and tried[k + 1] <= 0.49 * best[1]:
            break
    return best


def nvls_heads(layout: GroupLayout) -> int:
    """NVLS heads (NVLS channels) per node: one per GPU, at most NCCL_MAX_NVLS_ARITY = 32 (search.cc).

    Every node searches its own NVLS graph and NCCL keeps the fewest heads any node found (``init.cc``
    takes the minimum nChannels over ranks; ``ncclTopoPostset``'s ``minHeadNum``), so on NVLink domains of
    unequal size the smallest domain sets the heads.
    """
    return min(layout.min_ppn, MAX_SEARCH_CHANNELS)


def _dup(n: int, s: float, arch: int) -> tuple[int, float]:
    """Channel duplication after the search: same total bandwidth over twice the channels (search.cc)."""
    if s < 25 or (arch > 80 and s < 50 and n > 4):
        return n, s
    n2 = min(2 * n, MAX_SEARCH_CHANNELS)
    return n2, s / math.ceil(n2 / n)


def graphs(layout: GroupLayout) -> dict[str, Graph]:
    """The graphs NCCL's search would build for ``layout``: ``ring``, ``tree``, ``nvls`` (GB/s per channel).

    One node: channels share each GPU's intranode bandwidth (NVLink total or
    PCIe).  Several nodes: every channel also starts on a NIC, which can start
    ⌊NIC / speed⌋ channels, and its GPU-to-NIC path caps the speed; a channel
    crosses ppn-1 intranode hops per node, so NVLink carries nCh x speed x
    (ppn-1)/ppn per GPU.  Trees reuse the ring's channels and raise their
    intranode speed while it stays below twice the network's; NVLS takes one
    head per GPU, each charged (heads + 1) x speed on its NVLink.
    """
    arch, nodes, ppn = layout.arch, layout.n_nodes, layout.ppn
    intra = layout.intra_bw if ppn > 1 else 5000.0  # one GPU per node: nothing intranode to carry
    net = nodes > 1
    speeds = _speeds(arch, net)
    if not net:
        def fits(s):
            return int(intra // s + 1e-9)

        limit = total = intra
    else:
        nics = max(1, layout.nics_per_node)
        share = (ppn - 1) / ppn if ppn > 1 else 0.0

        def fits(s):
            by_nic = nics * int(layout.nic_bw // s + 1e-9)
            return min(by_nic, int(intra // (s * share) + 1e-9)) if share else by_nic

        limit = layout.gpu_nic_bw
        total = min(nics * layout.nic_bw, intra / share if share else math.inf)
    found = _search(speeds, limit, fits, total) or (1, 0.1)
    n, s = _dup(*found, arch)
    ring = Graph(n, s, s, "ring")
    bw_intra = s
    if net:  # trees raise their intranode speed while it stays below twice the network's
        for x in reversed(speeds):
            if s < x < 2 * s and n * x <= intra:
                bw_intra = x
    one_per_nic = ppn == 1 or layout.nics_per_node >= ppn
    tree = Graph(n, bw_intra, s, "tree" if arch >= 90 and one_per_nic or ppn == 1 else "balanced")
    heads = nvls_heads(layout)
    nv_speeds = speeds
    nv_intra = next((x for x in nv_speeds if (heads + 1) * x <= intra + 1e-9), nv_speeds[-1])
    cap = layout.gpu_nic_bw if net else max(nv_speeds)
    # search.cc's second pass raises bwInter one speed at a time while it is still below 2 bwIntra (the test
    # comes before the raise, so it can end at or above 2 bwIntra) and the heads' NIC paths carry it
    nv_inter = max((x for x in nv_speeds if x <= min(nv_intra, cap) + 1e-9), default=nv_speeds[-1])
    for x in sorted(x for x in nv_speeds if x > nv_inter):
        if nv_inter >= 2 * nv_intra or x > cap + 1e-9:
            break
        nv_inter = x
    return {"ring": ring, "tree": tree, "nvls": Graph(heads, nv_intra, max(nv_inter, nv_intra), "nvls")}


def runtime_channels(layout: GroupLayout, ring: Graph) -> int:
    """CUDA blocks NCCL launches (comm->nChannels): two per search channel, four on multi-node Hopper."""
    n = min(64, 2 * ring.n_ch)
    if layout.arch >= 90 and layout.n_nodes > 1 and ring.bw_intra > 45 and n < 16:
        n *= 2
    return n


@dataclass(frozen=True)
class ModelTime:
    """NCCL's price of one (algorithm, protocol) for one size."""

    algo: str
    proto: str
    latency_us: float
    alg_bw: float       # GB/s (after the busBw -> algBw conversion and Tree's size correction)
    bus_bw: float       # GB/s before that conversion: what the links carry
    efficiency: float   # the model's bandwidth over the same pattern's at NCCL's own link rates
    n_channels: int

    def seconds(self, nbytes: float) -> float:
        return (self.latency_us + nbytes / (1e3 * self.alg_bw)) * 1e-6 if self.alg_bw > 0 else math.inf


def protocols_enabled(algo: str, layout: GroupLayout) -> tuple[str, ...]:
    """Protocols NCCL enables by default.

    NVLS, NVLS-Tree, CollNet and PAT exist only in Simple.  LL128 is on by
    default only with NVLink (or nothing) inside the node on Volta or later
    (``isLL128Enabled``: typeIntra <= NVB, minCompCap >= 70).
    """
    if algo not in ("ring", "tree"):
        return ("simple",)
    ll128 = layout.arch >= 70 and layout.intra in ("nvswitch", "nvlink", "none")
    return ("ll", "ll128", "simple") if ll128 else ("ll", "simple")


def _n_steps(kind: str, p: int) -> int:
    return 2 * (p - 1) if kind == "allreduce" else p - 1 if kind in ("allgather", "reduce_scatter") else p


def _ring_latency(kind, proto, layout, nbytes, n_comm) -> float:
    i = _P[proto]
    p, nodes = layout.n_ranks, layout.n_nodes
    hop = "nvlink" if layout.intra in ("nvswitch", "nvlink") else "pci"
    base = BASE_LAT["ring"][i]
    if kind in ("broadcast", "reduce"):
        # every channel uses the same GPU order: one hop of latency (sameChannels)
        return base + HW_LAT["net" if nodes > 1 else hop]["ring"][i]
    steps = _n_steps(kind, p)
    inter_steps = 0 if nodes == 1 else 2 * (nodes - 1) if kind == "allreduce" else nodes - 1
    intra = HW_LAT[hop]["ring"][i]
    inter = HW_LAT["net"]["tree" if layout.ppn == 1 else "ring"][i]
    if nodes > 1:
        intra = max(intra, NET_OVERHEAD.get(layout.cpu, 1.0) * (3.0 if proto == "simple" else 1.0))
    lat = base + (steps - inter_steps) * intra + inter_steps * inter
    if proto == "simple" and kind == "allreduce" and nodes > 1 and nbytes / (n_comm * p) >= 64:
        lat *= 1.4 if layout.arch >= 80 else 1.9  # the "plateau" of multi-node rings
    return lat


def model(algo: str, proto: str, kind: str, layout: GroupLayout, nbytes: float,
          g: dict[str, Graph] | None = None) -> ModelTime:
    """NCCL's model of ``algo``/``proto`` for ``kind`` over ``layout`` at ``nbytes`` (nccl-tests size)."""
    g = g or graphs(layout)
    i, cc = _P[proto], _cc(layout.arch)
    p, nodes, ppn = layout.n_ranks, layout.n_nodes, layout.ppn
    col = 0 if nodes == 1 else 1 if nodes == 2 else 2
    hop = "nvlink" if layout.intra in ("nvswitch", "nvlink") else "pci"
    log_nodes = int(math.log2(nodes)) if nodes > 1 else 0
    ll_row = cc if nodes == 1 else (1 if layout.cpu == "amd" else 0)
    ll_max = LL_MAX_BW[ll_row][col]
    steps = _n_steps(kind, p)
    if algo == "ring":
        r = g["ring"]
        bw = r.bw_intra if nodes == 1 or (nodes <= 2 and layout.arch < 100) else r.bw_inter
        plain = r.n_ch * bw
        bus = min(ll_max, 0.5 * plain) if proto == "ll" else \
            min(0.92 * plain, r.n_ch * PER_CH_MAX_RING_LL128[cc]) if proto == "ll128" else plain
        lat = _ring_latency(kind, proto, layout, nbytes, runtime_channels(layout, r))
        return ModelTime(algo, proto, lat, bus * p / steps, bus, bus / plain, r.n_ch)
    if algo == "tree":
        t = g["tree"]
        bw = (t.bw_intra if nodes <= 2 else t.bw_inter) if layout.arch < 100 else min(t.bw_intra, t.bw_inter)
        plain = t.n_ch * bw
        bus = min(0.92 * plain, t.n_ch * PER_CH_MAX_TREE[cc][col])
        if proto == "ll":
            bus = min(bus / 3.8, ll_max)
        elif proto == "ll128":
            bus = min(bus * (7.0 / 9.0 if nodes == 1 else 120.0 / 128.0), t.n_ch * PER_CH_MAX_TREE_LL128[cc][col])
        if t.pattern == "tree":
            bus *= 0.85
        idx = int(math.floor(math.log2(nbytes / 64.0))) if nbytes >= 64 else -1
        corr = TREE_CORRECTION[proto][idx] if 0 <= idx < 23 else 1.0
        bus *= corr
        intra = HW_LAT[hop]["tree"][i]
        inter = HW_LAT["net"]["tree"][i]
        lat = BASE_LAT["tree"][i] + 2.0 * ((p // nodes - 1) * intra + log_nodes * inter)
        return ModelTime(algo, proto, lat, 0.5 * bus, bus, bus / plain, t.n_ch)
    if algo in ("nvls", "nvls-tree"):
        v = g["nvls"]
        eff = NVLS_EFFICIENCY[cc] * (v.n_ch - 1) / v.n_ch
        low = layout.min_ppn  # NCCL's minLocalRanks (src/tuning/nvls.cc)
        intra_bw = v.bw_intra * eff * (2.0 if kind == "allreduce" else (low - 1) / low)
        if algo == "nvls":
            per = min(intra_bw, v.bw_inter)
            lat = HW_LAT[hop]["nvls"][2] + (HW_LAT["net"]["nvls"][2] if nodes > 1 else 0.0)
        else:
            per = min(intra_bw, v.bw_inter * (2.0 if nodes <= 2 else 1.0), PER_CH_MAX_NVLS_TREE[cc][col] or math.inf)
            lat = HW_LAT[hop]["nvls-tree"][2] + 2.0 * log_nodes * HW_LAT["net"]["nvls-tree"][2]
        bus = v.n_ch * per
        alg = bus * p / steps if kind == "allreduce" else bus
        return ModelTime(algo, proto, lat, alg, bus, alg / _pattern_bw(algo, kind, layout), v.n_ch)
    if algo in ("collnet-direct", "collnet-chain"):
        r = g["ring"]
        bus = r.n_ch * r.bw_intra
        if algo == "collnet-direct":
            ratio = ppn / r.n_ch
            bus /= max(1.0, ratio - (ratio - 1) / 2)
            if layout.arch >= 90:
                bus *= 0.85
        intra = HW_LAT[hop][algo][2]
        inter = HW_LAT["net"][algo][2]
        lat = (2.0 * (min(1, ppn - 1) * intra + (ppn - 1) * 0.4) + inter if algo == "collnet-direct"
               else 2.0 * (ppn - 1) * intra + inter)
        return ModelTime(algo, proto, lat, 0.5 * bus, bus, 0.5 * bus / _pattern_bw(algo, kind, layout), r.n_ch)
    if algo == "pat":
        t = g["tree"]
        plain = t.n_ch * min(t.bw_inter, t.bw_intra)
        lat = BASE_LAT["pat"][2] + log_nodes * HW_LAT["net" if nodes > 1 else hop]["pat"][2] / 3.5 + 2.8 * p
        return ModelTime(algo, proto, lat, 0.75 * plain, 0.75 * plain, 0.75, t.n_ch)
    raise ValueError(f"unknown NCCL algorithm {algo!r}")


def _pattern_bw(algo: str, kind: str, layout: GroupLayout) -> float:
    """Algorithm bandwidth (GB/s) of a switch-reduced pattern (:mod:`simcomm.nccl.algorithms`) at NCCL's link rates.

    NVLS moves ``n(1 + 1/p)`` through each GPU's NVLink for an all-reduce and
    ``n`` for all-gather/reduce-scatter; NVLS-Tree adds ``2n/H`` through each of the
    ``H = min(L, 32)`` heads' NICs (``n/H`` on two nodes, where the two trees are one exchange); CollNet moves
    ``2(L-1)/L n`` through NVLink and ``n/L`` through each NIC.  The model's
    algorithm bandwidth over this is the efficiency the flows carry.
    """
    L = layout.min_ppn if algo == "nvls-tree" else layout.ppn  # the smallest node moves the most per port
    nvl, nic = layout.intra_bw, layout.gpu_nic_bw
    if algo == "nvls":
        return nvl * L / (L + 1) if kind == "allreduce" else nvl
    if algo == "nvls-tree":  # only the NVLS heads carry the trees, each over its own NIC
        return min(nvl * L / (L + 1), nvls_heads(layout) * nic * (1.0 if layout.n_nodes <= 2 else 0.5))
    return min(nvl * L / (2 * (L - 1)) if L > 1 else math.inf, L * nic)


def select(kind: str, layout: GroupLayout, nbytes: float, algos: tuple[str, ...],
           protos: tuple[str, ...] | None = None) -> ModelTime:
    """The cheapest (algorithm, protocol) by NCCL's model; ties go to the lowest id (NCCL 2.2x-2.30).

    ``protos`` (NCCL_PROTO) replaces the default protocol set; protocols an
    algorithm does not implement stay off either way.
    """
    g = graphs(layout)
    best = None
    for algo in sorted(algos, key=ALGOS.index):
        allowed = ("ll", "ll128", "simple") if algo in ("ring", "tree") else ("simple",)
        for proto in PROTOS:
            # NCCL_PROTO replaces the default set (it can force LL128 onto PCIe); unimplemented stays off
            if proto not in allowed or proto not in (protos or protocols_enabled(algo, layout)):
                continue
            m = model(algo, proto, kind, layout, nbytes, g)
            if m.alg_bw <= 0:
                continue
            if best is None or m.seconds(nbytes) < best.seconds(nbytes):
                best = m
    if best is None:
        raise ValueError("no algorithm/protocol pair to choose from")
    return best

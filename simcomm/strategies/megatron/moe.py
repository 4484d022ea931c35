"""Mixture-of-experts layers as Megatron-core runs them: token dispatchers, routing, expert compute.

Worked out once per plan from the trace's ``meta["transformer"]`` and the options; read by
:mod:`.costs` (an MoE layer's seconds and gradient split) and :mod:`.comm` (the collectives around it).
Every byte count is what one rank hands NCCL in Megatron-core's ``megatron/core/transformer/moe/``
(simcomm's sizes: an all-to-all's total one rank sends, its own block included; an all-gather's
gathered output; a reduce-scatter's input), for a micro-batch whose ``T = b·s/(tp·cp)`` tokens enter
the layer on each rank (sequence parallel: Megatron-core's ``MoELayer`` refuses tensor parallelism
without it in training):

* ``alltoall`` (``MoEAlltoAllTokenDispatcher``, the default): ``preprocess`` all-gathers each rank's
  per-expert token counts (``num_experts`` int64) over the ``tp_ep`` group (ETP × EP) and syncs them
  to the host; ``permute`` makes ``T·k`` rows; ``all_to_all`` over EP of the rows (``T·k·H``) and of
  their routing probabilities (``T·k`` values in the activations' dtype); with ETP > 1 ``gather_from_sequence_parallel_region``
  (all-gather-v) over ETP; the experts; ``reduce_scatter`` over ETP; ``all_to_all`` back over EP;
  ``unpermute``.  Backward runs the conjugates in reverse (an all-to-all's gradient is the reverse
  all-to-all, an all-gather's a reduce-scatter), the counts exchange excepted (no gradient).
* ``allgather`` (``MoEAllGatherTokenDispatcher``): the routing map (bool), probabilities and the
  ``T·H`` hidden states all-gathered over ``tp_ep`` (``etp·ep·T`` rows), each rank keeps its local
  experts' rows; the output reduce-scattered back; backward: the hidden states' gradient all-gathered,
  then the hidden states' and probabilities' gradients reduce-scattered.

Routing: dropless (Megatron-core's default, ``--moe-expert-capacity-factor`` unset) sends every
``T·k`` row; ``capacity_factor`` C caps each expert at ``ceil(T·k/E·C)`` rows per source rank
(``moe_utils.get_capacity``), beyond which tokens are dropped; ``pad_to_capacity``
(``--moe-pad-expert-input-to-capacity``) pads every expert to exactly that.  ``moe_imbalance`` I is the
busiest expert-parallel rank's routed rows over the mean: it sets the expert compute (every rank of the
group waits for the busiest at the combine) and is priced as every rank's message size (an upper
bound on the network traffic; the busiest receiver's volume is right).  Dropping caps it at C.

The experts run as one grouped GEMM (``--moe-grouped-gemm``, TEGroupedMLP/GroupedMLP) of ``E/ep``
per-expert GEMMs of ``m = etp·ep·T·k/E`` rows (balanced) by ``F/etp`` columns; each is tiled in
128 × 128 output tiles (CUTLASS's and cuBLAS's Hopper grouped-GEMM tile), so its efficiency relative to
the traced dense GEMM is the useful share of its tiles: ``m/⌈m/128⌉/128 · (F/etp)/⌈F/etp/128⌉/128``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.llm.layout import ep_problem
from simcomm.units import format_size

#: output tile edge of the grouped GEMM's kernels (assumed: CUTLASS / cuBLAS Hopper 128 x 128 tiles)
GEMM_TILE = 128
#: bytes of one routing-map entry (bool); a routing probability has the activations' dtype (Megatron-core's router
#: computes the softmax in fp32 and casts it back, ``.type_as(logits)``, unless --moe-router-dtype promotes it)
MAP_BYTES = 1
#: bytes of one token count in the counts exchange (int64)
COUNT_BYTES = 8


@dataclass(frozen=True)
class MoeCosts:
    """One MoE layer's shape on one rank for one micro-batch, and its collectives' bytes."""

    dispatcher: str
    experts: int
    top_k: int
    tokens: float  # T: tokens entering the layer on each rank
    load: float  # routed rows processed by the busiest rank, over the balanced T·k
    bytes_load: float  # routed rows each rank sends, over T·k, as priced (the busiest's: imbalance's upper bound)
    gemm_efficiency: float  # grouped GEMM tile efficiency relative to the traced dense GEMM
    routed_share: float  # share of the traced layer's FLOPs in the routed experts
    dense_param_share: float  # share of the layer's parameters that are not routed experts (router, shared, norm)
    shared_experts: int
    # bytes of each collective (0: not issued)
    counts_bytes: float  # alltoall: the token-count all-gather over tp_ep
    a2a_bytes: float  # alltoall: the rows all-to-all'd over EP (with the probabilities in the dispatch)
    a2a_probs_bytes: float  # alltoall: the probabilities that ride with the dispatch (and its gradient)
    etp_bytes: float  # alltoall with etp > 1: the all-gather-v (and reduce-scatter) over ETP
    gather_bytes: float  # allgather: the hidden states over tp_ep
    gather_meta_bytes: float  # allgather: routing map and probabilities (forward)
    gather_probs_bytes: float  # allgather: the probabilities alone (their gradient is reduce-scattered)
    assumed: tuple[str, ...]

    @property
    def compute_factor(self) -> float:
        """The layer's time over its traced (balanced, dense-GEMM) time: routed experts stretched by load/efficiency."""
        return 1.0 - self.routed_share + self.routed_share * self.load / self.gemm_efficiency


def tile_efficiency(rows: float, cols: float, tile: int = GEMM_TILE) -> float:
    """The useful share of a GEMM's ``tile × tile`` output tiles (rows × cols outputs)."""
    if rows <= 0 or cols <= 0:
        return 1.0
    return (rows / (math.ceil(rows / tile) * tile)) * (cols / (math.ceil(cols / tile) * tile))


def moe_costs(p, lay, meta, microbatch: int, act: int, priced: bool = False) -> MoeCosts | None:
    """The :class:`MoeCosts` of this plan's MoE layers (None when the trace has none or no expert meta).
    ``priced``: the trace prices its MoE leaves by GEMM shape (:func:`simcomm.llm.compute.moe_priced`), so the
    local experts' grouped GEMMs are priced at their shapes and :attr:`MoeCosts.compute_factor` is not used."""
    experts, top_k = int(meta.get("experts") or 0), int(meta.get("top_k") or 0)
    missing = [k for k in ("experts", "top_k", "hidden", "ffn", "seq") if not meta.get(k)]
    if missing:
        if lay.ep * lay.expert_tp > 1:
            raise ConfigError(f"experts-parallel: the MoE layers' dispatch needs the trace's transformer meta "
                              f"({', '.join(missing)} missing): the expert count, top-k, hidden and expert FFN "
                              "sizes and the sequence length")
        return None
    hidden, ffn = int(meta["hidden"]), int(meta["ffn"])
    shared = int(meta.get("shared_experts") or 0)
    tp, cp, ep, etp = lay.tp, lay.cp, lay.ep, lay.expert_tp
    tokens = microbatch * int(meta["seq"]) / (tp * cp)
    rows = tokens * top_k
    cf, imb = p.capacity_factor, p.moe_imbalance
    notes = []
    if cf is None:
        load = bytes_load = imb
        how = "dropless (Megatron-core's default: no --moe-expert-capacity-factor)"
    else:
        capacity = math.ceil(rows / experts * cf)  # moe_utils.get_capacity, per source rank and expert
        cap_load = capacity * experts / rows
        if p.pad_to_capacity:
            load = bytes_load = cap_load
            how = (f"capacity factor {cf:g}, padded (--moe-pad-expert-input-to-capacity): every expert gets exactly "
                   f"{capacity} rows per source rank, {cap_load:.4g}× the balanced rows")
        else:
            load = bytes_load = min(imb, cap_load)
            how = (f"capacity factor {cf:g}: at most {capacity} rows per expert per source rank; rows beyond it "
                   "dropped" + (f" (the busiest rank's {imb:g}× is cut to {load:.4g}×)" if imb > cap_load else ""))
    mats = 3 if meta.get("mlp") == "swiglu" else 2
    shared_ffn = int(meta.get("shared_ffn") or ffn)  # Qwen2-MoE's shared expert has its own FFN size
    routed = top_k * 2 * mats * hidden * ffn
    other = shared * 2 * mats * hidden * shared_ffn + 2 * hidden * experts
    routed_share = routed / (routed + other)
    expert_params = mats * hidden * ffn
    dense_params = shared * mats * hidden * shared_ffn + hidden * experts + hidden
    dense_param_share = dense_params / (dense_params + experts * expert_params)
    per_expert_rows = etp * ep * rows / experts * load
    eff = tile_efficiency(per_expert_rows, ffn / etp)
    counts = a2a = probs = etp_b = gather = gmeta = gprobs = 0.0
    if p.moe_dispatcher == "alltoall":
        if etp * ep > 1:
            counts = etp * ep * experts * COUNT_BYTES
        if ep > 1:
            a2a = rows * bytes_load * hidden * act
            probs = rows * bytes_load * act
        if etp > 1:
            etp_b = etp * rows * bytes_load * hidden * act
    elif etp * ep > 1:
        gather = etp * ep * tokens * hidden * act
        gprobs = etp * ep * tokens * experts * act
        gmeta = gprobs + etp * ep * tokens * experts * MAP_BYTES
    notes.append(f"moe routing: {how}; top-{top_k} of {experts} experts"
                 + (f" + {shared} shared" if shared else "") + f"; busiest expert-parallel rank's load "
                 f"{imb:g}× the mean (moe_imbalance: its routed rows set every rank's expert time"
                 + (" and are priced as every rank's all-to-all message, an upper bound on the traffic" if
                    p.moe_dispatcher == "alltoall" and ep > 1 and bytes_load > 1 else "") + ")")
    if priced:
        notes.append(f"moe experts: each rank holds {experts // ep} of the {experts} routed experts (each expert's "
                     f"FFN split over etp {etp}) and runs them as one grouped GEMM per matrix (--moe-grouped-gemm, "
                     f"TEGroupedMLP) of {per_expert_rows:.6g} rows per expert (the busiest rank's) by {ffn // etp} "
                     "columns, priced at those shapes: tensor-core tiles and waves over the SMs, the local experts' "
                     "weights read once (simcomm.traces.gemm; no measured grouped-GEMM efficiency); the routed "
                     f"experts are {routed_share:.4f} of the layer's FLOPs")
    else:
        notes.append(f"moe experts: one grouped GEMM (--moe-grouped-gemm) of {experts // ep} local experts × "
                     f"{per_expert_rows:.6g} rows by {ffn // etp} columns each, {GEMM_TILE}×{GEMM_TILE} output "
                     f"tiles: {eff:.4g} of the traced dense GEMM's rate (tile quantisation only; an assumed kernel, "
                     "no measured grouped-GEMM efficiency); the routed experts are "
                     f"{routed_share:.4f} of the layer's FLOPs (a trace without GEMM shapes: its time stretched)")
    if p.moe_dispatcher == "alltoall":
        notes.append(f"moe dispatcher alltoall (Megatron-core MoEAlltoAllTokenDispatcher; simcomm's default, which "
                     "Megatron-core recommends with expert parallelism: its --moe-token-dispatcher-type defaults to "
                     "allgather): per layer per micro-batch "
                     f"{tokens:.6g} tokens per rank; forward: token counts all-gathered over etp {etp} × ep {ep} "
                     f"({format_size(counts)}), rows all-to-all over ep {ep} ({format_size(a2a)} + {format_size(probs)} of "
                     "probabilities, one op)" + (f", all-gather over etp {etp} ({format_size(etp_b)})" if etp > 1 else "")
                     + ", experts, " + (f"reduce-scatter over etp {etp}, " if etp > 1 else "")
                     + "all-to-all back; backward the conjugates in reverse; the router, permutation and shared "
                     "experts are in the layer's one compute (serial with its communication: no "
                     "--moe-shared-expert-overlap)")
    else:
        notes.append(f"moe dispatcher allgather (Megatron-core MoEAllGatherTokenDispatcher): per layer per "
                     f"micro-batch hidden states all-gathered over etp {etp} × ep {ep} ({format_size(gather)}, routing map "
                     f"and probabilities {format_size(gmeta)} more, one op), the output reduce-scattered back; "
                     "backward: the gradient all-gathered, then reduce-scattered with the probabilities' gradient")
    if tp > 1 and not p.sequence_parallel:
        notes.append(f"moe with tp {tp} and no sequence parallelism: Megatron-core's MoELayer refuses it in "
                     "training; simcomm runs it as DeepSpeed-MoE does (sharded_moe.MOELayer): each rank dispatches "
                     f"its 1/{tp} of the replicated tokens (drop_tokens) and all-gathers the layer's output over tp "
                     "(gather_tokens), its input gradient likewise (give --opt sequence_parallel=true for what "
                     "Megatron-core runs)")
    return MoeCosts(p.moe_dispatcher, experts, top_k, tokens, load, bytes_load, eff, routed_share,
                    dense_param_share, shared, counts, a2a, probs, etp_b, gather, gmeta, gprobs, tuple(notes))


def has_tp_edges(kind: str, sequence_parallel: bool, moe: MoeCosts | None) -> bool:
    """Whether a layer of ``kind`` has Megatron's tensor-parallel collectives at its input and output (tp > 1).
    An MoE layer has none of its own (Megatron-core's dispatcher takes the s/tp tokens as they are under
    sequence parallelism) unless it has shared experts under sequence parallelism (SharedExpertMLP's gather
    before and reduce-scatter after); without sequence parallelism it runs DeepSpeed-MoE's MOELayer instead
    (an all-gather of the token slices after it, forward and backward: ``comm.LayerComm._comm_of``)."""
    return kind != "moe" or (sequence_parallel and moe is not None and moe.shared_experts > 0)


#: where a layer's dispatcher collectives are issued, in the emitter's order
DISPATCH_POINTS = ("fwd-pre", "fwd-post", "bwd-pre", "bwd-post")


def dispatcher_steps(m: MoeCosts, where: str) -> list[tuple[str, str, float]]:
    """The token dispatcher's collectives at ``where`` (:data:`DISPATCH_POINTS`) of one MoE layer and micro-batch,
    in issue order: (kind, group kind: ``ep``, ``etp`` or ``tp_ep``, bytes), those of 0 bytes left out.  What the
    emitter issues (``comm.LayerComm._moe_comm``) and the plan's estimate prices (``llm/estimate.py``), so the two
    cannot drift.  All-to-all (Megatron-core's ``MoEAlltoAllTokenDispatcher``): the token counts' all-gather over
    tp_ep, the rows' (and probabilities') all-to-all over ep, expert tensor parallelism's all-gather-v over etp
    and back; all-gather (``MoEAllGatherTokenDispatcher``): the hidden states over tp_ep and reduce-scattered back."""
    if m.dispatcher == "alltoall":
        steps = {"fwd-pre": [("allgather", "tp_ep", m.counts_bytes), ("alltoall", "ep", m.a2a_bytes + m.a2a_probs_bytes),
                             ("allgather", "etp", m.etp_bytes)],
                 "fwd-post": [("reduce_scatter", "etp", m.etp_bytes), ("alltoall", "ep", m.a2a_bytes)],
                 "bwd-pre": [("alltoall", "ep", m.a2a_bytes), ("allgather", "etp", m.etp_bytes)],
                 "bwd-post": [("reduce_scatter", "etp", m.etp_bytes),
                              ("alltoall", "ep", m.a2a_bytes + m.a2a_probs_bytes)]}[where]
    else:
        steps = {"fwd-pre": [("allgather", "tp_ep", m.gather_bytes + m.gather_meta_bytes)],
                 "fwd-post": [("reduce_scatter", "tp_ep", m.gather_bytes)],
                 "bwd-pre": [("allgather", "tp_ep", m.gather_bytes)],
                 "bwd-post": [("reduce_scatter", "tp_ep", m.gather_bytes + m.gather_probs_bytes)]}[where]
    return [(kind, which, nbytes) for kind, which, nbytes in steps if nbytes > 0]


def check_experts(p, lay, meta, model: str) -> None:
    """Layout checks of the expert layers (one line each, as Megatron-core's asserts):
    :func:`simcomm.llm.layout.ep_problem`, the rule the plan's search enumerates by."""
    problem = ep_problem(lay.ep, lay.expert_tp, lay.tp, lay.dp, int(meta.get("experts") or 0),
                         int(meta.get("ffn") or 0), model, p.etp is not None)
    if problem is not None:
        raise ConfigError(problem)

//! The operators of one MoE transformer layer for one micro-batch on one GPU, forward and backward, as
//! Megatron-Core's `MoELayer` runs them (`moe_layer.py`: router → token dispatcher → experts → combine, plus the
//! shared experts), after the layer's attention ([`crate::llm::operators::layer_passes`] without its MLP).
//!
//! With t tokens entering the layer on the GPU (b·s/(cp·tp) under sequence parallelism), E experts of width F,
//! top-K, d hidden, expert tensor parallelism etp and R = etp·t·K·γ routed copies the busiest rank's experts
//! process (γ the load factor, [`super::parallel::MoeTraining::load_factor`]):
//! - `MoE_Router` [t, d → E] GEMM (`router.py` `TopKRouter`) and `MoE_TopK`, its score function and top-k over
//!   [t, E] (a softmax-like pass);
//! - `MoE_Permute`: permutation into expert order (`moe_utils.py` `permute`: reads t·d, writes t·K·d), and with
//!   several local experts the sort by local expert after the all-to-all (`sort_chunks_by_idxs`, R·d); DeepEP
//!   permutes after its fused dispatch (R·d); HybridEP's `dispatch_with_permute` runs, after its dispatch kernel,
//!   a permute kernel that copies the R received rows out of its registered buffer grouped by expert (R·d read
//!   and written: DeepEP's `hybrid_ep` guide, "Executor": `dispatch_with_permute` = dispatch kernel + permute
//!   kernel; Megatron-Core's `fused_a2a.py` `HybridEPDispatch` passes `fuse_permute_dispatch` only under its opt-in
//!   `fused`, default off, and dispatches in bf16); the allgather dispatcher permutes the gathered tokens (R·d);
//! - the dispatcher's collectives ([`super::dispatch`]), twice per pass (dispatch and combine); HybridEP's
//!   all-gather of the [t, E] boolean routing map over the tp·ep group before them, forward only
//!   ([`super::dispatch::routing_map_gather`]);
//! - the experts: with `moe_grouped_gemm` Megatron-Core's TEGroupedMLP, timed as one dense `Expert_FC1`
//!   [R, d → 2F/etp] and `Expert_FC2` [R, F/etp → d] (learned or analytic GEMMs; backward dgrad and wgrad) and
//!   one `MoE_SwiGLU` [R, F/etp]. Transformer Engine runs each projection as one cuBLAS GEMM per local expert on 4
//!   streams: their GPU time is taken as the one GEMM's (each expert's GEMM fills the GPU here), their host time
//!   as the framework call's plus [`super::launches::MULTI_STREAM_GEMM_HOST_US`] per further expert's GEMM (applied
//!   in [`super::timing`]). Without it Megatron-Core's SequentialMLP, one `Expert_FC1` [R/(E/ep), d → 2F/etp] and
//!   `Expert_FC2` [R/(E/ep), F/etp → d] per local expert and one `MoE_SwiGLU` [R, F/etp];
//! - `MoE_Unpermute`: the weighted sum of each token's copies back into token order (reads t·K·d and the
//!   probabilities, writes t·d), and the unsort by local expert; HybridEP's `combine_with_unpermute` instead
//!   copies the R expert-output rows into its registered buffer (unpermute kernel, R·d read and written) and sums
//!   each token's copies inside its combine kernel;
//! - the shared experts (`shared_experts.py`, tensor-parallel like the dense MLP, on the gathered b·s/cp tokens):
//!   `Shared_Expert_FC1` [t_full, d → 2F_s/tp], `Shared_Expert_SwiGLU`, `Shared_Expert_FC2` [t_full, F_s/tp → d],
//!   with their own all-gather and reduce-scatter under sequence parallelism (all-reduce without);
//! - recomputation ([`super::recompute`]);
//! - under a PyTorch-native framework without `torch.compile`, the experts' and shared experts' eager SwiGLU
//!   kernels (torchtitan's `GroupedExperts`: `F.silu(x @ w1) * (x @ w3)`; [`crate::llm::framework::EagerKernels`]).
//!
//! Overlaps: DeepEP's NVLink forwarding runs beside its RDMA transfer; `moe_shared_expert_overlap` hides each
//! all-to-all behind the shared experts' gate+up GEMM (`token_dispatcher.py`: fc1 after the dispatch's
//! all-to-all is launched, fc2 during the combine's); `overlap_moe_expert_parallel_comm` is applied when the layer
//! is timed ([`super::timing`]).

use super::dispatch::dispatch_comm;
use super::layout::MoeLayout;
use super::parallel::{Dispatcher, MoeTraining};
use crate::comm::Group;
use crate::llm::config::TrainingConfig;
use crate::llm::layout::Layout;
use crate::llm::operators::{
    collective, comm_elem_bytes, compute, eager_ops, layer_passes, OpName, OpPrecisions, Overlap, StageOp,
};
use crate::op::{Collective, OpClass, Phase};

/// The expert computation's routed copies on the busiest rank, R = etp·t·K·γ (γ the load factor; exactly the
/// capacity with padding).
pub fn routed_copies(moe: &MoeTraining, tokens: u64) -> f64 {
    moe.etp as f64 * tokens as f64 * moe.config.top_k as f64 * moe.load_factor()
}

/// Tokens entering an MoE layer on one GPU per micro-batch: b·s/cp, divided by tp under sequence parallelism
/// (the MoE layer works on the sequence-parallel shard, `token_dispatcher.py`: num_local_tokens = S/TP·B).
pub fn tokens_entering(cfg: &TrainingConfig) -> u64 {
    let t = cfg.tokens_per_rank();
    if cfg.sp() {
        t / cfg.tp as u64
    } else {
        t
    }
}

fn pair(name: OpName, c: Collective, bytes: f64, group: Group, active: u32, calls: u32) -> [StageOp; 2] {
    let elems = (bytes / 2.0).round() as u64;
    let f = vec![elems, group.nodes as u64, group.ranks_per_node as u64];
    [Phase::Fwd, Phase::Bwd].map(|phase| collective(name, phase, calls, c, bytes, group, active, f.clone()))
}

/// The MLP part of one MoE layer (forward and backward, no recomputation): router, dispatch, experts, combine,
/// shared experts and their tensor-parallel communication.
pub fn moe_mlp_passes(cfg: &TrainingConfig, layout: &Layout, moe: &MoeTraining, prec: OpPrecisions) -> Vec<StageOp> {
    let c = &moe.config;
    let ml = MoeLayout::new(moe, layout.gpus_per_node);
    let (g, o) = (prec.gemm, prec.other);
    let d = cfg.model.hidden as u64;
    let t = tokens_entering(cfg);
    let (e, k) = (c.experts as u64, c.top_k as u64);
    let local = moe.local_experts().max(1) as u64;
    let f = (c.expert_ffn_hidden / moe.etp.max(1)) as u64;
    let r = routed_copies(moe, t).ceil().max(1.0) as u64;
    let elem = comm_elem_bytes(cfg);
    let a = layout.active_per_node;
    let mut ops = Vec::with_capacity(32);
    ops.extend(compute(OpName::MoeRouter, OpClass::Linear, o, &[1, t, e, d], vec![t, d, e], 1));
    ops.extend(compute(OpName::MoeTopK, OpClass::Softmax, o, &[t, e], vec![t, e], 1));
    // Permutation into expert order before the dispatch (not for HybridEP, which permutes inside it).
    let sent = t * k;
    match moe.dispatcher {
        Dispatcher::Alltoall => {
            ops.extend(compute(OpName::MoePermute, OpClass::Elementwise, o, &[sent, d, 1], vec![sent, d], 1))
        }
        Dispatcher::Allgather | Dispatcher::Deepep => {
            ops.extend(compute(OpName::MoePermute, OpClass::Elementwise, o, &[r, d, 1], vec![r, d], 1))
        }
        Dispatcher::Hybridep => {}
    }
    // HybridEP all-gathers the routing map before its dispatch (forward only): on the expert-parallel track.
    if let Some(ag) = super::dispatch::routing_map_gather(moe, &ml, t) {
        let f = vec![ag.bytes as u64, ag.group.nodes as u64, ag.group.ranks_per_node as u64];
        ops.push(collective(ag.name, Phase::Fwd, ag.calls, ag.collective, ag.bytes, ag.group, a, f));
    }
    let comm = dispatch_comm(moe, &ml, t, d, elem);
    let mut shared_partner = None;
    if moe.shared_expert_overlap && c.shared_ffn_hidden > 0 {
        shared_partner = Some(Overlap { with: OpName::SharedExpertFc1, chunks: 1, wgrad_only: false });
    }
    for (i, dc) in comm.iter().enumerate() {
        let mut p = pair(dc.name, dc.collective, dc.bytes, dc.group, a, 1);
        for o in p.iter_mut() {
            o.calls = dc.calls;
            if dc.beside_previous && i > 0 {
                o.overlaps = Some(Overlap { with: comm[i - 1].name, chunks: 1, wgrad_only: false });
            } else if dc.name == OpName::EpAllToAll {
                o.overlaps = shared_partner;
            }
        }
        // The reduce-scatter mirrors an all-gather in the combine: one of each per pass.
        if dc.collective == Collective::AllGather {
            for o in p.iter_mut() {
                o.calls = 1;
            }
            ops.extend(p.clone());
            let rs = pair(OpName::EpReduceScatter, Collective::ReduceScatter, dc.bytes, dc.group, a, 1);
            ops.extend(rs);
        } else {
            ops.extend(p);
        }
    }
    // HybridEP's `dispatch_with_permute`: after its dispatch kernel (and after the host synchronization on the
    // tokens per expert that sizes the output), a permute kernel copies the R received rows out of its registered
    // buffer grouped by expert (independent mode, the default).
    if moe.dispatcher == Dispatcher::Hybridep {
        ops.extend(compute(OpName::MoePermute, OpClass::Elementwise, o, &[r, d, 1], vec![r, d], 1));
    }
    // Sort by local expert after the all-to-all (and unsort before the combine).
    if moe.dispatcher == Dispatcher::Alltoall && local > 1 {
        ops.extend(compute(OpName::MoePermute, OpClass::Elementwise, o, &[r, d, 1], vec![r, d], 1));
        ops.extend(compute(OpName::MoeUnpermute, OpClass::Elementwise, o, &[r, d, 1], vec![r, d], 1));
    }
    if moe.grouped_gemm {
        // TEGroupedMLP: one grouped GEMM of all routed rows per projection, the activation once.
        ops.extend(compute(OpName::ExpertFc1, OpClass::Linear, g, &[1, r, 2 * f, d], vec![r, d, 2 * f], 1));
        ops.extend(compute(OpName::MoeAct, OpClass::Swiglu, o, &[r, f], vec![r, f], 1));
        ops.extend(eager_ops(o, r, f, cfg.framework.eager.swiglu, 1));
        ops.extend(compute(OpName::ExpertFc2, OpClass::Linear, g, &[1, r, d, f], vec![r, f, d], 1));
    } else {
        // SequentialMLP: a GEMM, an activation and a GEMM per local expert.
        let per = r.div_ceil(local);
        let n = local as u32;
        ops.extend(compute(OpName::ExpertFc1, OpClass::Linear, g, &[1, per, 2 * f, d], vec![per, d, 2 * f], n));
        ops.extend(compute(OpName::MoeAct, OpClass::Swiglu, o, &[per, f], vec![per, f], n));
        ops.extend(eager_ops(o, per, f, cfg.framework.eager.swiglu, n));
        ops.extend(compute(OpName::ExpertFc2, OpClass::Linear, g, &[1, per, d, f], vec![per, f, d], n));
    }
    // Unpermutation: the weighted sum of each token's copies (the allgather dispatcher's of its gathered tokens).
    // HybridEP's `combine_with_unpermute` instead copies the R expert-output rows into its registered buffer in
    // dispatch order (one read, one write) and its combine kernel sums each token's copies.
    if moe.dispatcher == Dispatcher::Hybridep {
        ops.extend(compute(OpName::MoeUnpermute, OpClass::Elementwise, o, &[r, d, 1], vec![r, d], 1));
    } else {
        let back = if moe.dispatcher == Dispatcher::Allgather { r } else { sent };
        ops.extend(compute(OpName::MoeUnpermute, OpClass::Elementwise, o, &[back, d, 2], vec![back, d], 1));
    }
    if c.shared_ffn_hidden > 0 {
        ops.extend(shared_expert_ops(cfg, layout, c.shared_ffn_hidden as u64, prec));
    }
    ops
}

/// The shared experts: a dense SwiGLU MLP of width F_s split over tp on the layer's b·s/cp tokens, with its
/// tensor-parallel communication (sequence parallelism: all-gather before, reduce-scatter after; Transformer
/// Engine's TP overlap pairs them with the GEMMs; otherwise one all-reduce).
fn shared_expert_ops(cfg: &TrainingConfig, layout: &Layout, width: u64, prec: OpPrecisions) -> Vec<StageOp> {
    let t = cfg.tokens_per_rank();
    let d = cfg.model.hidden as u64;
    let fs = width / cfg.tp as u64;
    let (g, o) = (prec.gemm, prec.other);
    let mut ops = Vec::with_capacity(12);
    ops.extend(compute(OpName::SharedExpertFc1, OpClass::Linear, g, &[1, t, 2 * fs, d], vec![t, d, 2 * fs], 1));
    ops.extend(compute(OpName::SharedExpertAct, OpClass::Swiglu, o, &[t, fs], vec![t, fs], 1));
    ops.extend(eager_ops(o, t, fs, cfg.framework.eager.swiglu, 1));
    ops.extend(compute(OpName::SharedExpertFc2, OpClass::Linear, g, &[1, t, d, fs], vec![t, fs, d], 1));
    if cfg.tp > 1 {
        let bytes = (t * d) as f64 * comm_elem_bytes(cfg);
        let tp = layout.tp_group;
        let a = layout.active_per_node;
        let f = vec![t * d, tp.nodes as u64, tp.ranks_per_node as u64];
        if cfg.sp() {
            for phase in [Phase::Fwd, Phase::Bwd] {
                let (ag_with, rs_with) = match phase {
                    Phase::Fwd => (OpName::SharedExpertFc1, OpName::SharedExpertFc2),
                    Phase::Bwd => (OpName::SharedExpertFc2, OpName::SharedExpertFc1),
                };
                // The shared experts' column-parallel input is gathered quantized like the dense MLP's
                // (`TrainingConfig::sp_gather_elem_bytes`).
                let ag_bytes = (t * d) as f64 * cfg.sp_gather_elem_bytes(phase);
                let mut ag =
                    collective(OpName::MpAllGather, phase, 1, Collective::AllGather, ag_bytes, tp, a, f.clone());
                let mut rs =
                    collective(OpName::MpReduceScatter, phase, 1, Collective::ReduceScatter, bytes, tp, a, f.clone());
                if cfg.tp_overlap() {
                    ag.overlaps = Some(Overlap { with: ag_with, chunks: cfg.tp, wgrad_only: false });
                    rs.overlaps = Some(Overlap { with: rs_with, chunks: cfg.tp, wgrad_only: false });
                }
                ops.push(ag);
                ops.push(rs);
            }
        } else {
            for phase in [Phase::Fwd, Phase::Bwd] {
                ops.push(collective(OpName::MpAllReduce, phase, 1, Collective::AllReduce, bytes, tp, a, f.clone()));
            }
        }
    }
    ops
}

/// The operators of one MoE layer per micro-batch (calls per layer): the attention of
/// [`layer_passes`] without its dense MLP, the MoE MLP ([`moe_mlp_passes`]) and the recomputation of
/// [`super::recompute`].
pub fn moe_layer_ops(cfg: &TrainingConfig, layout: &Layout, moe: &MoeTraining, prec: OpPrecisions) -> Vec<StageOp> {
    let mut ops = layer_passes(cfg, layout, prec, false);
    ops.extend(moe_mlp_passes(cfg, layout, moe, prec));
    let recomputed = super::recompute::recomputed(cfg, &ops);
    ops.extend(recomputed);
    let scaling = crate::llm::recipe::scaling_ops(cfg, layout, &ops);
    ops.extend(scaling);
    ops
}

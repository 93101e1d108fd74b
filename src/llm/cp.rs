//! Context parallelism as the frameworks implement it: how each rank's attention runs and what it communicates,
//! per Megatron-Core's `--cp-comm-type` (Megatron-LM `megatron/training/arguments.py`, passed to Transformer
//! Engine's `attn_forward_func_with_cp`, `transformer_engine/pytorch/attention/dot_product_attention/
//! context_parallel.py`) and PyTorch's `context_parallel` (`torch/distributed/tensor/experimental/_attention.py`)
//! that torchtitan runs.
//!
//! Every kind splits each sequence into 2·cp chunks and gives rank r chunks r and 2·cp − 1 − r (the load-balanced
//! causal split: TE's `get_seq_chunk_ids_for_reordering_before_attn`, PyTorch's round-robin / `_HeadTailLoadBalancer`
//! `enable_load_balance`), so every rank does the same attention work, cp·(l/cp)²/2 causal query-key pairs per
//! sequence and head. Per layer and micro-batch of b sequences of l tokens, with h/tp query heads, kv/tp key/value
//! heads of dimension d_h and e bytes per element, on a rank holding l/cp tokens:
//! - **`p2p`** (TE `AttnFuncWithCPAndKVP2P`, Megatron's default): cp FlashAttention steps of l/cp queries against
//!   one key/value chunk; each step's K and V (2·b·(l/cp)·kv/tp·d_h elements) travel to the ring neighbour while the
//!   step computes, backward also their gradients (twice the bytes): cp − 1 sends per pass, each hidden behind one
//!   step, only the excess charged.
//! - **`all_gather`** (TE `AttnFuncWithCPAndKVAllGather`, "KV all-gather between CP ranks is exposed"): forward
//!   all-gathers K and V of the whole sequence (2·b·l·kv/tp·d_h elements gathered) before attention, then runs the
//!   two local query chunks against the key prefix each needs on two streams (the same causal work as the ring's cp
//!   steps; modelled as those steps); backward all-gathers K and V again and reduce-scatters dK and dV: all
//!   exposed. Under torchtitan (PyTorch `_AllGatherRotater`, "all-gather all kv shards on ranks after the first
//!   sub-SDPA computation"): the asynchronous all-gather is waited for only after the first step's attention, so it
//!   hides behind one step; backward the same for K and V, while dK and dV travel the ring step by step
//!   (`dkv_rotater = _create_rotater(group, 2, method=_RotateMethod.ALL_TO_ALL)` in
//!   `_templated_ring_attention_backward`), each send hidden behind the next step and the last one exposed.
//! - **`a2a`** (TE `AttnFuncWithCPAndQKVOA2A`, DeepSpeed-Ulysses, Jacobs et al. 2023): all-to-alls over the cp
//!   ranks turn Q, K, V from l/cp tokens of all heads into l tokens of heads/cp (b·(l/cp)·(h + 2·kv)/tp·d_h
//!   elements per rank), one FlashAttention call runs the whole sequence on heads/cp, and an all-to-all returns O
//!   (b·(l/cp)·h/tp·d_h); backward the mirror image (dO, then dQ, dK, dV). Nothing overlaps them. TE needs the
//!   heads and key/value heads per tensor-parallel rank divisible by cp ("The number of attention heads needs to
//!   be divisible by CP size!").
//! - **`a2a+p2p`** (TE's hierarchical CP, Megatron's `--hierarchical-context-parallel-sizes a r`, a·r = cp): the
//!   all-to-all inside groups of a adjacent cp ranks, then the p2p ring over the r groups: r steps of l/r queries
//!   on heads/a, K/V sends of 2·b·(l/r)·kv/(tp·a)·d_h elements hidden behind each step.
//!
//! torchtitan's `context_parallel_rotate_method` defaults to `allgather` (`torchtitan/config/job_config.py`:
//! "'allgather' means to all-gather all kv shards on ranks after the first sub-SDPA computation, 'alltoall' means
//! to all-to-all shuffle the kv shards"); its `alltoall` is a ring rotation (`_AllToAllRotater`, a permute to the
//! next rank each step), perfcast's `p2p`. PyTorch has no Ulysses: `a2a` and `a2a+p2p` are refused under
//! torchtitan.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::config::{bad, ConfigError, TrainingConfig};
use super::framework::Framework;
use super::layout::Layout;
use super::operators::{collective, op, OpName, Overlap, StageOp, Work};
use crate::op::{Collective, OpClass, OpShape, Phase};

/// Megatron-Core's `cp_comm_type` (`--cp-comm-type`), the values Transformer Engine's `attn_forward_func_with_cp`
/// takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub enum CpCommType {
    /// The K/V ring (TE `AttnFuncWithCPAndKVP2P`; torchtitan's `alltoall` rotate method).
    #[serde(rename = "p2p")]
    P2p,
    /// The K/V all-gather (TE `AttnFuncWithCPAndKVAllGather`; torchtitan's `allgather`, its default). Also
    /// accepted as `allgather` (Megatron-LM's help text).
    #[serde(rename = "all_gather", alias = "allgather")]
    AllGather,
    /// Ulysses all-to-alls of Q, K, V and O (TE `AttnFuncWithCPAndQKVOA2A`).
    #[serde(rename = "a2a")]
    A2a,
    /// All-to-all inside groups, p2p ring across them (needs `hierarchical_context_parallel_sizes`).
    #[serde(rename = "a2a+p2p")]
    A2aP2p,
}

impl CpCommType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CpCommType::P2p => "p2p",
            CpCommType::AllGather => "all_gather",
            CpCommType::A2a => "a2a",
            CpCommType::A2aP2p => "a2a+p2p",
        }
    }

    /// The framework's default: torchtitan's `context_parallel_rotate_method` `allgather`, Megatron-Core's `p2p`
    /// for the others.
    pub fn default_for(framework: Framework) -> CpCommType {
        match framework {
            Framework::Torchtitan => CpCommType::AllGather,
            _ => CpCommType::P2p,
        }
    }
}

/// How context parallelism communicates in a validated configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpComm {
    /// The request's `cp_comm_type`, if it gave one.
    pub requested: Option<CpCommType>,
    /// The kind in effect (the request's, else the framework's default; [`CpComm::resolve`]).
    pub comm_type: CpCommType,
    /// The all-to-all group's size a: cp for `a2a`, the first hierarchical size for `a2a+p2p`, 1 otherwise.
    pub a2a: u32,
    /// The framework runs PyTorch's `_templated_ring_attention` (torchtitan) rather than Transformer Engine's.
    pub pytorch: bool,
}

impl Default for CpComm {
    fn default() -> Self {
        CpComm { requested: None, comm_type: CpCommType::P2p, a2a: 1, pytorch: false }
    }
}

impl CpComm {
    /// The request's `cp_comm_type` and `hierarchical_context_parallel_sizes` for cp ranks, tp-way tensor
    /// parallelism, `heads` query and `kv_heads` key/value heads. Errors: `parallelism.cp_comm_type` `a2a` with
    /// heads or kv_heads per tensor-parallel rank not divisible by cp (TE's assertion), `a2a+p2p` without
    /// hierarchical sizes (Megatron-LM's assertion); `parallelism.hierarchical_context_parallel_sizes` not two
    /// sizes whose product is cp, or given without `a2a+p2p`, or its all-to-all size not dividing the heads.
    pub fn validate(
        requested: Option<CpCommType>,
        hierarchical: Option<&[u32]>,
        cp: u32,
        tp: u32,
        heads: u32,
        kv_heads: u32,
    ) -> Result<CpComm, ConfigError> {
        const HIER: &str = "parallelism.hierarchical_context_parallel_sizes";
        let (hp, kvp) = (heads / tp.max(1), (kv_heads / tp.max(1)).max(1));
        let a2a = match (requested, hierarchical) {
            (Some(CpCommType::A2aP2p), None) => {
                return Err(bad(
                    "parallelism.cp_comm_type",
                    "a2a+p2p needs hierarchical_context_parallel_sizes [a2a, p2p] (Megatron-LM's \
                     --hierarchical-context-parallel-sizes)",
                ))
            }
            (Some(CpCommType::A2aP2p), Some(sizes)) => {
                if sizes.len() != 2 || sizes.contains(&0) || sizes[0] as u64 * sizes[1] as u64 != cp as u64 {
                    return Err(bad(
                        HIER,
                        format!("give two sizes [a2a, p2p] whose product is context_parallel {cp}, got {sizes:?}"),
                    ));
                }
                if hp % sizes[0] != 0 || kvp % sizes[0] != 0 {
                    return Err(bad(
                        HIER,
                        format!(
                            "the all-to-all size {} must divide the heads ({hp}) and key/value heads ({kvp}) per \
                             tensor-parallel rank",
                            sizes[0]
                        ),
                    ));
                }
                sizes[0]
            }
            (_, Some(_)) => return Err(bad(HIER, "only used with cp_comm_type a2a+p2p")),
            (Some(CpCommType::A2a), None) => {
                if cp > 1 && (hp % cp != 0 || kvp % cp != 0) {
                    return Err(bad(
                        "parallelism.cp_comm_type",
                        format!(
                            "a2a (Ulysses) splits the heads over the cp ranks: heads per tensor-parallel rank ({hp}) \
                             and key/value heads per rank ({kvp}) must be divisible by context_parallel {cp} \
                             (Transformer Engine's AttnFuncWithCPAndQKVOA2A)"
                        ),
                    ));
                }
                cp
            }
            _ => 1,
        };
        Ok(CpComm { requested, comm_type: requested.unwrap_or(CpCommType::P2p), a2a, pytorch: false })
    }

    /// This configuration run by `framework`: the requested kind or the framework's default
    /// ([`CpCommType::default_for`]). Errors: `parallelism.cp_comm_type` `a2a` or `a2a+p2p` under torchtitan
    /// (PyTorch's context parallelism rotates K/V, it has no all-to-all over heads).
    pub fn resolve(self, framework: Framework) -> Result<CpComm, ConfigError> {
        let pytorch = framework == Framework::Torchtitan;
        let comm_type = self.requested.unwrap_or_else(|| CpCommType::default_for(framework));
        if pytorch && matches!(comm_type, CpCommType::A2a | CpCommType::A2aP2p) {
            return Err(bad(
                "parallelism.cp_comm_type",
                format!(
                    "torchtitan's context parallelism (PyTorch context_parallel) rotates keys and values by \
                     all-gather or ring: cp_comm_type {} is Transformer Engine's; use all_gather or p2p",
                    comm_type.as_str()
                ),
            ));
        }
        Ok(CpComm { comm_type, pytorch, ..self })
    }

    /// The ring's size r = cp / a (1 for `a2a`).
    pub fn ring(&self, cp: u32) -> u32 {
        (cp / self.a2a.max(1)).max(1)
    }
}

/// The FlashAttention calls of one layer per micro-batch under context parallelism: (calls, queries per call and
/// sequence, heads per call, key/value heads per call) for `hp` query and `kvp` key/value heads on this
/// tensor-parallel rank — r ring steps of l/r queries on heads/a (cp steps of l/cp for `p2p` and `all_gather`, one
/// call of the whole sequence on heads/cp for `a2a`).
pub fn attention_calls(cfg: &TrainingConfig, hp: u64, kvp: u64) -> (u32, u64, u64, u64) {
    let l = cfg.model.seq_len as u64;
    if cfg.cp <= 1 {
        return (1, l, hp, kvp);
    }
    let a = cfg.cp_comm.a2a.max(1) as u64;
    let r = cfg.cp_comm.ring(cfg.cp);
    (r, l / r as u64, (hp / a).max(1), (kvp / a).max(1))
}

/// The time of one of `steps` ring steps (a layer's FlashAttention calls under context parallelism,
/// [`attention_calls`]) over the causal call of the same FLOPs the learned model times, averaged over the steps:
/// (1 + (steps − 1)·`full_over_causal`) / steps. With the load-balanced split one step per pass is causal — step 0,
/// the rank's own two chunks against each other (Transformer Engine `AttnFuncWithCPAndKVP2P.forward`: `causal=True`
/// / `attn_mask_type` causal for `i == 0`; PyTorch `_templated_ring_attention`: `is_causal` only when `i == 0`) —
/// and the other steps run without the mask: both query chunks against the first key/value chunk (`i <= rank`)
/// or the second query chunk against both key/value chunks, `causal=False` / `no_mask`; the backward mirrors them
/// (`AttnFuncWithCPAndKVP2P.backward`, `_templated_ring_attention_backward`). Each such step has the FLOPs of a
/// causal call of l/cp tokens, which is how [`attention_calls`] counts it, but runs at the unmasked rate
/// (`full_over_causal`: [`crate::llm::framework::AttentionKernel::full_over_causal`]). TE's `all_gather` kind, whose
/// two calls per rank are causal but attend a key prefix of mostly whole tiles, is counted the same way. 1 for one
/// call (no ring: cp 1, Ulysses `a2a`).
pub fn ring_step_scale(steps: u32, full_over_causal: f64) -> f64 {
    if steps <= 1 {
        return 1.0;
    }
    let n = steps as f64;
    (1.0 + (n - 1.0) * full_over_causal) / n
}

/// The context-parallel communication of one layer per micro-batch (module doc): `hp` query heads and `kv` key/value
/// heads of dimension `dh` on this tensor-parallel rank, `e` bytes per element.
pub fn cp_ops(cfg: &TrainingConfig, layout: &Layout, hp: u64, kv: u64, dh: u64, e: f64) -> Vec<StageOp> {
    if cfg.cp <= 1 {
        return Vec::new();
    }
    let (b, l, cp) = (cfg.micro_batch as u64, cfg.model.seq_len as u64, cfg.cp as u64);
    let lr = l / cp;
    let comm = cfg.cp_comm;
    let a = comm.a2a.max(1) as u64;
    let r = comm.ring(cfg.cp) as u64;
    let active = layout.active_per_node;
    let g = layout.cp_group;
    let feats = |elems: u64, grp: crate::comm::Group| vec![elems, grp.nodes as u64, grp.ranks_per_node as u64];
    let mut ops = Vec::new();
    if a > 1 {
        // Ulysses: Q, K, V in and O out forward; dO in and dQ, dK, dV out backward; exposed.
        let group = layout.cp_a2a_group(comm.a2a);
        let qkv = b * lr * (hp + 2 * kv) * dh;
        let o = b * lr * hp * dh;
        for phase in [Phase::Fwd, Phase::Bwd] {
            for elems in [qkv, o] {
                ops.push(collective(
                    OpName::CpAllToAll,
                    phase,
                    1,
                    Collective::AllToAll,
                    elems as f64 * e,
                    group,
                    active,
                    feats(elems, group),
                ));
            }
        }
    }
    if r <= 1 {
        return ops;
    }
    // K and V of one ring step's chunk: 2·b·(l/r)·(kv/a)·d_h elements.
    let kv_elems = 2 * b * (l / r) * (kv / a).max(1) * dh;
    let kv_bytes = kv_elems as f64 * e;
    let ring = layout.cp_ring_group();
    let hidden = |mut o: StageOp| {
        o.overlaps = Some(Overlap { with: OpName::FlashAttention, chunks: 1, wgrad_only: false });
        o
    };
    // Features as before this module: one tensor's elements (K or V) and the cp group's placement.
    let send = |phase, calls: u64, bytes: f64| {
        collective(
            OpName::CpP2p,
            phase,
            calls as u32,
            Collective::SendRecv,
            bytes,
            ring,
            active,
            feats(kv_elems / 2, g),
        )
    };
    match comm.comm_type {
        CpCommType::P2p | CpCommType::A2aP2p | CpCommType::A2a => {
            ops.push(hidden(send(Phase::Fwd, r - 1, kv_bytes)));
            ops.push(hidden(send(Phase::Bwd, r - 1, 2.0 * kv_bytes)));
        }
        CpCommType::AllGather => {
            // The whole sequence's K and V gathered (nccl-tests counts the output buffer): cp chunks.
            let gathered = kv_bytes * cp as f64;
            let ag = |phase| {
                collective(
                    OpName::CpAllGather,
                    phase,
                    1,
                    Collective::AllGather,
                    gathered,
                    g,
                    active,
                    feats(kv_elems * cp, g),
                )
            };
            if comm.pytorch {
                ops.push(hidden(ag(Phase::Fwd)));
                ops.push(hidden(ag(Phase::Bwd)));
                ops.push(hidden(send(Phase::Bwd, r - 1, kv_bytes)));
                ops.push(send(Phase::Bwd, 1, kv_bytes));
            } else {
                ops.push(ag(Phase::Fwd));
                ops.push(ag(Phase::Bwd));
                ops.push(collective(
                    OpName::CpReduceScatter,
                    Phase::Bwd,
                    1,
                    Collective::ReduceScatter,
                    gathered,
                    g,
                    active,
                    feats(kv_elems * cp, g),
                ));
            }
        }
    }
    ops
}

/// The ring's merges of the per-step partial results, per layer and micro-batch (`dtype` the attention's
/// precision; `hp` query and `kv` key/value heads of dimension `dh` on this tensor-parallel rank): each ring step's
/// attention writes a partial output (forward) or partial gradients (backward) that element-wise kernels fold into
/// the running result on the attention's stream, after the step and outside the FlashAttention kernel the learned
/// model times.
/// - Forward (TE `AttnFuncWithCPAndKVP2P.forward`, `flash_attn_fwd_out_correction`: `out.add_(out_per_step *
///   exp(softmax_lse_per_step - softmax_lse))`; PyTorch `_SDPAMerger.step`): r merges, one per step, each reading
///   the step's output and the running output and writing the running output — an element-wise kernel with two
///   inputs over b·(l/r)·(hp/a)·d_h elements (the last ring rank's steps all cover its whole l/r queries).
/// - Backward (TE `AttnFuncWithCPAndKVP2P.backward`: `dq.add_(dq_)`, and `dkv.add_(dkv_)` into the gradient
///   buffer that travels with the keys and values; PyTorch `_templated_ring_attention_backward`'s `grad_query +=`
///   and `grad_kv +=`): r − 1 accumulations of dQ (b·(l/r)·(hp/a)·d_h elements) and r − 1 of dK, dV
///   (2·b·(l/r)·(kv/a)·d_h), each two inputs and one output; the first step writes its gradients in place.
///
/// Only the ring kinds merge (`p2p`, `a2a+p2p`, and PyTorch's `all_gather`, which still runs cp sub-SDPA steps);
/// TE's `all_gather` computes each local query chunk in one call and `a2a` runs the whole sequence in one call.
/// Counted at the attention's 16-bit precision: PyTorch merges in fp32 with unfused kernels, so its count is a lower
/// bound.
pub fn merge_ops(cfg: &TrainingConfig, hp: u64, kv: u64, dh: u64, dtype: crate::hw::Precision) -> Vec<StageOp> {
    let comm = cfg.cp_comm;
    let r = comm.ring(cfg.cp) as u64;
    let ring = match comm.comm_type {
        CpCommType::P2p | CpCommType::A2aP2p => true,
        CpCommType::AllGather => comm.pytorch,
        CpCommType::A2a => false,
    };
    if cfg.cp <= 1 || r <= 1 || !ring {
        return Vec::new();
    }
    let a = comm.a2a.max(1) as u64;
    let (b, l) = (cfg.micro_batch as u64, cfg.model.seq_len as u64);
    // Rows of one step's tensors: tokens of the step's query (or key) chunk times its heads; d_h wide.
    let (q_rows, kv_rows) = (b * (l / r) * (hp / a).max(1), 2 * b * (l / r) * (kv / a).max(1));
    let merge = |phase, rows: u64, calls: u64| {
        let shape = OpShape::new(OpClass::Elementwise, phase, &[rows, dh, 2]);
        op(OpName::CpMerge, phase, calls as u32, Work::Compute { shape, dtype }, vec![rows, dh, 2])
    };
    vec![merge(Phase::Fwd, q_rows, r), merge(Phase::Bwd, q_rows, r - 1), merge(Phase::Bwd, kv_rows, r - 1)]
}

#[cfg(test)]
#[path = "cp_tests.rs"]
mod tests;

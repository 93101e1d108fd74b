//! Activation memory of MLA and MoE layers per micro-batch on one GPU (Korthikanti et al. 2022's accounting,
//! extended): the tensors a layer keeps for its backward pass, 16-bit, in bytes. Per token of the b·s/cp tokens,
//! with shard = tp under sequence parallelism (else 1) dividing what is replicated over the tensor-parallel ranks,
//! and tp dividing what is split:
//! - attention: the first norm's input and the projections' input 4d (and the dropout mask d) replicated; the
//!   queries, keys and values 2·a·D + 4·g·D (MLA: 2·a·(D_nope + D_rope) twice and 2·a·D_v) and the output
//!   projection's input 2·a·D (MLA 2·a·D_v) split; MLA's latents 4·q_r + 4·kv_r + 2·D_rope replicated; without
//!   FlashAttention the scores 2·a·s (5·a·s with dropout) split;
//! - a dense MLP: the second norm's input and the MLP input 4d (and the mask d) replicated, the activation's input
//!   and output 4f (GeLU) or 6f (SwiGLU) split;
//! - an MoE MLP: the second norm's input and the router's input 4d and the router's fp32 logits and probabilities
//!   8E replicated; for each of the R routed copies the busiest rank's experts process (R = etp·t·K·γ, t the
//!   tokens entering the layer on the GPU), the expert input 2d, the gate+up output 4F/etp, the activation output
//!   2F/etp and the expert output 2d (the unpermutation's probability gradient reads it); the shared experts'
//!   input 2d replicated and 6F_s split.
//!
//! Recomputation keeps less: `full` only the layer input 2d (replicated); `core_attn` drops the scores; `layernorm`
//! the two norms' outputs (2d each); `mla_up_proj` the up-projections' outputs; `mlp`, `moe` and `shared_experts`
//! keep only their module's input; `moe_act` drops the experts' activation output (Megatron-Core's
//! output-discarding and standard checkpointing, `recompute_modules`).

use super::ops::routed_copies;
use super::parallel::RecomputeModule;
use crate::llm::config::{Activation, Attention, Recompute, TrainingConfig};

/// Bytes one layer (an MoE layer when `moe`) keeps per micro-batch on one GPU under `recompute` (the request's
/// recompute modules apply when it is `selective`).
pub fn layer_bytes(cfg: &TrainingConfig, moe: bool, recompute: Recompute) -> f64 {
    let m = &cfg.model;
    let (d, a, s) = (m.hidden as f64, m.heads as f64, m.seq_len as f64 / cfg.cp as f64);
    let t_full = cfg.micro_batch as f64 * s;
    let tp = cfg.tp as f64;
    let shard = if cfg.sp() { tp } else { 1.0 };
    if recompute == Recompute::Full {
        return 2.0 * d * t_full / shard;
    }
    let modules = super::recompute::modules(cfg, recompute);
    let drops = |module| modules.contains(&module);
    let dropout = m.dropout > 0.0;
    let mask = if dropout { d } else { 0.0 };
    // Attention.
    let mut rep = 4.0 * d + mask;
    let (qkv, out) = match &m.mla {
        None => {
            let dh = cfg.head_dim as f64;
            (2.0 * a * dh + 4.0 * cfg.kv_heads as f64 * dh, 2.0 * a * dh)
        }
        Some(mla) => {
            let (qr, kvr) = (mla.q_lora_rank as f64, mla.kv_lora_rank as f64);
            rep += 4.0 * qr + 4.0 * kvr + 2.0 * mla.qk_rope_head_dim as f64;
            let (qk, v) = (mla.qk_head_dim() as f64, mla.v_head_dim as f64);
            (4.0 * a * qk + 2.0 * a * v, 2.0 * a * v)
        }
    };
    let mut split = out + if drops(RecomputeModule::MlaUpProj) && m.mla.is_some() { 0.0 } else { qkv };
    if m.attention != Attention::Flash && !drops(RecomputeModule::CoreAttn) {
        split += if dropout { 5.0 } else { 2.0 } * a * s;
    }
    if drops(RecomputeModule::Layernorm) {
        rep -= 2.0 * d;
    }
    let mut bytes = t_full * (rep / shard + split / tp);
    // The MLP part.
    let norm_out = if drops(RecomputeModule::Layernorm) { 0.0 } else { 2.0 * d };
    match (moe, &cfg.moe) {
        (true, Some(mt)) => {
            let c = &mt.config;
            bytes += t_full / shard * (2.0 * d + norm_out);
            if !drops(RecomputeModule::Moe) {
                bytes += t_full / shard * 8.0 * c.experts as f64;
                let r = routed_copies(mt, (t_full / shard) as u64);
                let f = c.expert_ffn_hidden as f64 / mt.etp.max(1) as f64;
                let act_out = if drops(RecomputeModule::MoeAct) { 0.0 } else { 2.0 * f };
                bytes += r * (2.0 * d + 4.0 * f + act_out + 2.0 * d);
                if c.shared_ffn_hidden > 0 {
                    bytes += t_full * 2.0 * d / shard;
                    if !drops(RecomputeModule::SharedExperts) {
                        bytes += t_full * 6.0 * c.shared_ffn_hidden as f64 / tp;
                    }
                }
            }
        }
        _ => {
            bytes += t_full / shard * (2.0 * d + mask + norm_out);
            if !drops(RecomputeModule::Mlp) {
                let f = cfg.ffn_hidden as f64;
                let act = if m.activation == Activation::Swiglu { 6.0 * f } else { 4.0 * f };
                bytes += t_full * act / tp;
            }
        }
    }
    bytes
}

/// Communication buffers of the flex dispatchers on one GPU, bytes [rec]: DeepEP and HybridEP allocate their
/// dispatch and combine buffers once (`fused_a2a.py` `get_buffer`, `init_hybrid_ep_buffer`) for the tokens a rank
/// may receive; counted as twice (dispatch and combine) the routed copies the busiest rank receives per
/// micro-batch, R·d·2 bytes (16-bit tokens). NCCL's all-to-all buffers are part of the fixed workspace
/// ([`crate::llm::memory::WORKSPACE_BYTES`]); 0 for the other dispatchers and dense models.
pub fn dispatch_buffer_bytes(cfg: &TrainingConfig) -> f64 {
    match &cfg.moe {
        Some(m) if m.dispatcher.is_flex() => {
            let r = routed_copies(m, super::ops::tokens_entering(cfg));
            2.0 * r * cfg.model.hidden as f64 * 2.0
        }
        _ => 0.0,
    }
}

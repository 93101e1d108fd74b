//! Multi-head latent attention's projections in training (DeepSeek-V2/V3; Megatron-Core `MLASelfAttention`,
//! `multi_latent_attention.py`). Per layer and micro-batch on one GPU, t tokens (t/tp rows with sequence
//! parallelism), a/tp heads:
//! - `MLA_Q_Down` [rows, d → q_r] and its RMSNorm `MLA_Norm` [rows, q_r] (without q_r: no down-projection, the
//!   up-projection reads d);
//! - `MLA_KV_Down` [rows, d → kv_r + D_rope] and `MLA_Norm` [rows, kv_r];
//! - `MLA_Q_Up` [t, q_r → a/tp·(D_nope + D_rope)] and `MLA_KV_Up` [t, kv_r → a/tp·(D_nope + D_v)], column-parallel.
//!
//! The down-projections are replicated over the tensor-parallel ranks (each computes its own rows; Megatron-Core
//! builds them duplicated), the up-projections split by heads. The attention itself runs as FlashAttention with
//! a/tp heads that each have their own key and value (no grouping) and head dim (D_nope + D_rope + D_v)/2, which
//! gives its FLOPs exactly (QKᵀ over D_nope + D_rope, ·V over D_v); RoPE rotates the a/tp query heads and the one
//! shared key head over D_rope dims; the output projection reads a/tp·D_v ([`crate::llm::operators::layer_passes`]).
//! Approximation: with sequence parallelism Megatron-Core all-gathers the latents rather than the hidden states;
//! the layer's all-gather is counted at the hidden size.

use super::spec::MlaSpec;
use crate::llm::config::TrainingConfig;
use crate::llm::operators::{compute, OpName, OpPrecisions, StageOp};
use crate::op::OpClass;

/// The projection operators of one MLA layer, forward and backward, for `t` tokens (`rows` with sequence
/// parallelism) on one GPU.
pub fn projection_ops(cfg: &TrainingConfig, mla: &MlaSpec, t: u64, rows: u64, prec: OpPrecisions) -> Vec<StageOp> {
    let d = cfg.model.hidden as u64;
    let hp = cfg.model.heads as u64 / cfg.tp as u64;
    let (qr, kvr) = (mla.q_lora_rank as u64, mla.kv_lora_rank as u64);
    let (nope, rope, v) = (mla.qk_nope_head_dim as u64, mla.qk_rope_head_dim as u64, mla.v_head_dim as u64);
    let (g, o) = (prec.gemm, prec.other);
    let b = cfg.micro_batch as u64;
    let mut ops = Vec::with_capacity(14);
    let q_in = if qr > 0 {
        ops.extend(compute(OpName::MlaQDown, OpClass::Linear, g, &[1, rows, qr, d], vec![rows, d, qr], 1));
        ops.extend(compute(OpName::MlaNorm, OpClass::RmsNorm, o, &[rows, qr], vec![b, rows / b.max(1), qr], 1));
        qr
    } else {
        d
    };
    ops.extend(compute(OpName::MlaKvDown, OpClass::Linear, g, &[1, rows, kvr + rope, d], vec![rows, d, kvr + rope], 1));
    ops.extend(compute(OpName::MlaNorm, OpClass::RmsNorm, o, &[rows, kvr], vec![b, rows / b.max(1), kvr], 1));
    let q_out = hp * (nope + rope);
    ops.extend(compute(OpName::MlaQUp, OpClass::Linear, g, &[1, t, q_out, q_in], vec![t, q_in, q_out], 1));
    let kv_out = hp * (nope + v);
    ops.extend(compute(OpName::MlaKvUp, OpClass::Linear, g, &[1, t, kv_out, kvr], vec![t, kvr, kv_out], 1));
    ops
}

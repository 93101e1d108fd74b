//! Multi-token prediction in training (DeepSeek-V3 §2.2; Megatron-Core `multi_token_prediction.py`,
//! `MultiTokenPredictionLayer`): each MTP layer, on the last pipeline stage after the main layers, embeds the
//! tokens one position ahead (the shared embedding), normalizes them and the previous hidden state (`enorm`,
//! `hnorm`), projects their concatenation 2d → d (`eh_proj`, column-parallel), runs one transformer layer like the
//! model's last (an MoE layer for DeepSeek-V3) and its own final norm, and computes its loss through the shared
//! output layer. Its operators per micro-batch are those of the embedding, two norms, `MTP_Proj`, the layer and
//! the head ([`crate::llm::operators::embedding_ops`], [`crate::llm::operators::head_ops`]).

use super::ops::moe_layer_ops;
use super::params::last_layer_is_moe;
use crate::llm::config::TrainingConfig;
use crate::llm::layout::Layout;
use crate::llm::operators::{compute, embedding_ops, head_ops, layer_ops, norm_op, OpName, OpPrecisions, StageOp};
use crate::op::OpClass;

/// The operators of one MTP layer per micro-batch (empty without MTP layers).
pub fn mtp_ops(cfg: &TrainingConfig, layout: &Layout, prec: OpPrecisions, v_padded: u64) -> Vec<StageOp> {
    if cfg.model.mtp_layers == 0 {
        return Vec::new();
    }
    let d = cfg.model.hidden as u64;
    let t = cfg.tokens_per_rank();
    let b = cfg.micro_batch as u64;
    let rows = if cfg.sp() { t / cfg.tp as u64 } else { t };
    let norm = norm_op(cfg);
    let mut ops = embedding_ops(cfg, layout, prec, v_padded);
    ops.extend(compute(norm.0, norm.1, prec.other, &[rows, d], vec![b, rows / b.max(1), d], 2));
    let out = d / cfg.tp as u64;
    ops.extend(compute(OpName::MtpProj, OpClass::Linear, prec.gemm, &[1, t, out, 2 * d], vec![t, 2 * d, out], 1));
    match (&cfg.moe, last_layer_is_moe(cfg)) {
        (Some(moe), true) => ops.extend(moe_layer_ops(cfg, layout, moe, prec)),
        _ => ops.extend(layer_ops(cfg, layout, prec)),
    }
    ops.extend(head_ops(cfg, layout, prec, v_padded));
    ops
}

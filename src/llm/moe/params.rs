//! Parameters of mixture-of-experts and MLA models, counted as Megatron-Core builds them (no linear biases:
//! `add_bias_linear` false in its MoE recipes; RMSNorm γ only, LayerNorm γ and β) and as Hugging Face reports them:
//! per GPU, split into the dense-like parameters (attention, norms, router, shared experts: sharded by tp, their
//! gradients reduced over dp·cp) and the expert parameters (sharded by ep·etp, gradients reduced over the
//! expert-data-parallel group); and for the whole model, total and active per token.
//!
//! Per layer: norms 2·n (n = d for RMSNorm, 2d for LayerNorm); attention d·D·(a + 2g) + a·D·d (GQA) or MLA's
//! projections ([`super::spec::MlaSpec::params`]; the down-projections and latent norms replicated over tp, the
//! up- and output projections split); a dense MLP u·d·f + f·d (u = 2 SwiGLU, 1 GeLU); an MoE MLP the router d·E
//! (replicated), the shared experts 3·d·F_s and E experts of 3·d·F. Multi-token prediction adds per MTP layer a
//! layer like the last one, its two input norms and its final norm, and the 2d·d projection (Megatron-Core
//! `multi_token_prediction.py`; DeepSeek-V3's 14 B MTP module is counted apart from its 671 B).

use super::parallel::MoeTraining;
use crate::llm::config::{Activation, Norm, TrainingConfig};

/// One layer's parameters on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LayerParams {
    /// Sharded by tp (or replicated), reduced over dp·cp.
    pub dense: f64,
    /// Routed experts: E/ep experts of 3·d·F/etp, reduced over the expert-data-parallel group.
    pub expert: f64,
}

impl LayerParams {
    /// Both parts.
    pub fn total(&self) -> f64 {
        self.dense + self.expert
    }
}

fn norm(cfg: &TrainingConfig) -> f64 {
    let d = cfg.model.hidden as f64;
    match cfg.model.norm {
        Norm::Rmsnorm => d,
        Norm::Layernorm => 2.0 * d,
    }
}

/// Attention parameters of one layer on one GPU of tensor-parallel degree `tp`.
fn attention(cfg: &TrainingConfig, tp: f64) -> f64 {
    let m = &cfg.model;
    let (d, a) = (m.hidden as f64, m.heads as f64);
    match &m.mla {
        None => {
            let (g, dh) = (cfg.kv_heads as f64, cfg.head_dim as f64);
            (d * dh * (a + 2.0 * g) + a * dh * d) / tp
        }
        Some(mla) => {
            let (qr, kvr) = (mla.q_lora_rank as f64, mla.kv_lora_rank as f64);
            let rope = mla.qk_rope_head_dim as f64;
            let replicated = if qr > 0.0 { d * qr + qr } else { 0.0 } + d * (kvr + rope) + kvr;
            let split = mla.params(m.hidden, m.heads) - replicated;
            replicated + split / tp
        }
    }
}

fn dense_mlp(cfg: &TrainingConfig, tp: f64) -> f64 {
    let (d, f) = (cfg.model.hidden as f64, cfg.ffn_hidden as f64);
    let u = if cfg.model.activation == Activation::Swiglu { 3.0 } else { 2.0 };
    u * d * f / tp
}

/// A dense layer's parameters on one GPU (norms, attention, dense MLP).
pub fn dense_layer(cfg: &TrainingConfig) -> f64 {
    let tp = cfg.tp as f64;
    2.0 * norm(cfg) + attention(cfg, tp) + dense_mlp(cfg, tp)
}

/// An MoE layer's parameters on one GPU: norms, attention, router and shared experts (dense), and the E/ep local
/// experts split over etp.
pub fn moe_layer(cfg: &TrainingConfig, moe: &MoeTraining) -> LayerParams {
    let c = &moe.config;
    let (tp, d) = (cfg.tp as f64, cfg.model.hidden as f64);
    let expert = 3.0 * d * c.expert_ffn_hidden as f64 / moe.etp.max(1) as f64;
    LayerParams {
        dense: 2.0 * norm(cfg) + attention(cfg, tp) + d * c.experts as f64 + 3.0 * d * c.shared_ffn_hidden as f64 / tp,
        expert: moe.local_experts() as f64 * expert,
    }
}

/// Whether the model's last layer is an MoE layer (its MTP layers are then MoE layers too; Megatron-Core
/// `gpt_layer_specs.py`).
pub fn last_layer_is_moe(cfg: &TrainingConfig) -> bool {
    cfg.moe.as_ref().is_some_and(|m| m.config.is_moe_layer(cfg.model.layers.saturating_sub(1)))
}

/// One multi-token-prediction layer's parameters on one GPU: a layer like the model's last, its embedding and
/// hidden norms and final norm, and the 2d → d projection split over tp.
pub fn mtp_layer(cfg: &TrainingConfig) -> LayerParams {
    let d = cfg.model.hidden as f64;
    let mut p = match (&cfg.moe, last_layer_is_moe(cfg)) {
        (Some(moe), true) => moe_layer(cfg, moe),
        _ => LayerParams { dense: dense_layer(cfg), expert: 0.0 },
    };
    p.dense += 3.0 * norm(cfg) + 2.0 * d * d / cfg.tp as f64;
    p
}

/// Total and active (per token: top-k routed experts) parameters of the whole model, as one GPU would hold them
/// (tp = ep = etp = 1), with the embedding, the LM head unless tied and the final norm; without the MTP layers.
pub fn model_params(cfg: &TrainingConfig, v_padded: u64) -> (f64, f64) {
    let one = TrainingConfig { tp: 1, ..cfg.clone() };
    let m = &cfg.model;
    let d = m.hidden as f64;
    let embedding = v_padded as f64 * d;
    let head = if m.tied_embeddings { 0.0 } else { embedding };
    let outer = embedding + head + norm(cfg);
    let Some(moe) = &cfg.moe else {
        let total = m.layers as f64 * dense_layer(&one) + outer;
        return (total, total);
    };
    let whole = MoeTraining { ep: 1, etp: 1, ..moe.clone() };
    let layer = moe_layer(&one, &whole);
    let per_expert = layer.expert / moe.config.experts as f64;
    let n_moe = moe.config.moe_layers_in(0, m.layers) as f64;
    let n_dense = m.layers as f64 - n_moe;
    let dense = n_dense * dense_layer(&one) + n_moe * layer.dense + outer;
    (dense + n_moe * layer.expert, dense + n_moe * moe.config.top_k as f64 * per_expert)
}

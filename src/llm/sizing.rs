//! Model sizes: vocabulary padding (S1 eq. 1–2) and parameters per pipeline stage (S1 eq. 6, Table III),
//! generalized to grouped-query attention, any MLP width, SwiGLU and tied embeddings.

use super::config::{Activation, TrainingConfig};
use super::partition::StageRole;

/// Padded vocabulary (S1 eq. 1–2, Megatron's `_vocab_size_with_padding`): the vocabulary is padded to a multiple
/// of 128·mp so every tensor-parallel rank holds an equal, GEMM-friendly slice.
///
/// `v_padded = ceil(v / (128·mp)) · 128·mp`; e.g. v = 50257, mp = 4 → 50688.
pub fn padded_vocab(vocab: u64, mp: u64) -> u64 {
    let divisibility = 128 * mp.max(1);
    vocab.div_ceil(divisibility) * divisibility
}

/// Parameters of one encoder on one tensor-parallel rank (S1 eq. 6):
/// `4d + 8d(d+1)/mp + d(4d+1)/mp` (two norms' γ, β unsplit; attention and MLP weights and biases split over mp).
/// Computed in f64 because the /mp terms need not be integers for every (d, mp).
pub fn encoder_params(d: u64, mp: u64) -> f64 {
    let (d, mp) = (d as f64, mp.max(1) as f64);
    4.0 * d + 8.0 * d * (d + 1.0) / mp + d * (4.0 * d + 1.0) / mp
}

/// Parameters held by one GPU of a pipeline stage (S1 eq. 6): the first stage adds the vocabulary-parallel
/// embedding `v_padded·d/mp`; the last adds the final norm `2d` and the untied LM head `v_padded·d/mp`; a single
/// stage (pp = 1) has both.
pub fn stage_params(role: StageRole, encoders: u64, d: u64, v_padded: u64, mp: u64) -> f64 {
    let embedding = v_padded as f64 * d as f64 / mp.max(1) as f64;
    let body = encoders as f64 * encoder_params(d, mp);
    match role {
        StageRole::First => embedding + body,
        StageRole::Middle => body,
        StageRole::Last => body + 2.0 * d as f64 + embedding,
        StageRole::Only => embedding + body + 2.0 * d as f64 + embedding,
    }
}

/// Parameters of one layer on one tensor-parallel rank, S1 eq. 6 generalized: the two norms' γ and β (4d,
/// unsplit, as S1 counts them for either norm) plus the split weights and biases
/// `[d·q + q (QKV) + d² + d (output) + d·u·f + u·f (up) + f·d + d (down)] / mp`, with q = (h + 2·kv)·d/h the QKV
/// width (GQA, Ainslie et al. 2023), f the MLP width and u = 2 for SwiGLU's gate and up projections (Shazeer
/// 2020), 1 for GeLU. With kv = h, f = 4d, u = 1 this is S1's `4d + 8d(d+1)/mp + d(4d+1)/mp` (tested).
///
/// With a head dim D ≠ d/h (`model.head_dim`) q = (h + 2·kv)·D and the output projection is h·D × d. Models with
/// MoE layers or MLA are counted as Megatron-Core builds them, without biases ([`crate::llm::moe::params`]).
pub fn layer_params(cfg: &TrainingConfig) -> f64 {
    let m = &cfg.model;
    if m.moe.is_some() || m.mla.is_some() {
        return crate::llm::moe::params::dense_layer(cfg);
    }
    let (d, h, kv) = (m.hidden as f64, m.heads as f64, cfg.kv_heads as f64);
    let dh = cfg.head_dim as f64;
    let f = cfg.ffn_hidden as f64;
    let u = if m.activation == Activation::Swiglu { 2.0 } else { 1.0 };
    let q = (h + 2.0 * kv) * dh;
    let split = d * q + q + h * dh * d + d + d * u * f + u * f + f * d + d;
    4.0 * d + split / cfg.tp as f64
}

/// Dense-like parameters of `moe_layers` MoE layers among `layers` on one GPU and, on the last stage, of the MTP
/// layers beyond [`layer_params`]'s dense count: what replaces layers · layer_params
/// ([`crate::llm::moe::params`]; 0 for a dense model without MTP).
fn moe_adjustment(cfg: &TrainingConfig, role: StageRole, layers: u64, moe_layers: u64) -> f64 {
    use crate::llm::moe::params;
    let mut p = 0.0;
    if let Some(moe) = &cfg.moe {
        p += moe_layers.min(layers) as f64 * (params::moe_layer(cfg, moe).dense - layer_params(cfg));
    }
    if matches!(role, StageRole::Last | StageRole::Only) && cfg.model.mtp_layers > 0 {
        p += cfg.model.mtp_layers as f64 * params::mtp_layer(cfg).dense;
    }
    p
}

/// Word-embedding parameters on one tensor-parallel rank: v_padded·d/mp.
pub fn embedding_params(cfg: &TrainingConfig, v_padded: u64) -> f64 {
    v_padded as f64 * cfg.model.hidden as f64 / cfg.tp as f64
}

/// Parameters held by one GPU of a pipeline stage with `layers` layers (`moe_layers` of them MoE layers): [`layer_params`] per
/// layer, the embedding on the first stage, the final norm (2d) and the LM head on the last; a tied LM head is not
/// stored twice when one stage holds both (with pp > 1 Megatron-LM keeps a copy on the last stage). MoE layers
/// count their dense-like parameters here (attention, norms, router, shared experts) and their routed experts in
/// [`crate::llm::moe::params`]; the last stage adds its MTP layers and, with pp > 1, the copy of the embedding they
/// read. Equal to [`stage_params`] for S1's models.
pub fn stage_params_of(cfg: &TrainingConfig, role: StageRole, layers: u64, moe_layers: u64, v_padded: u64) -> f64 {
    let body = layers as f64 * layer_params(cfg) + moe_adjustment(cfg, role, layers, moe_layers);
    body + outside_layers_params(cfg, role, v_padded)
}

/// Parameters of a stage outside its transformer layers, on one GPU: the embedding on the first stage; the final
/// norm (2d), the LM head (unless tied and on the same stage as the embedding) and, with MTP layers and pp > 1, the
/// copy of the embedding they read on the last ([`stage_params_of`]). Transformer Engine does not quantize them
/// (they are not TE modules), so an fp8 parameter all-gather moves them in 16 bits
/// ([`TrainingConfig::param_gather_bytes`]).
pub fn outside_layers_params(cfg: &TrainingConfig, role: StageRole, v_padded: u64) -> f64 {
    let embedding = embedding_params(cfg, v_padded);
    let mtp_embedding = cfg.model.mtp_layers > 0 && role == StageRole::Last;
    let head = 2.0 * cfg.model.hidden as f64
        + if cfg.model.tied_embeddings && role == StageRole::Only { 0.0 } else { embedding }
        + if mtp_embedding { embedding } else { 0.0 };
    match role {
        StageRole::First => embedding,
        StageRole::Middle => 0.0,
        StageRole::Last => head,
        StageRole::Only => embedding + head,
    }
}

/// Unique parameters of the whole model (tp = 1, every layer, one embedding, the LM head unless tied): what
/// "a 175B model" counts.
///
/// MoE and MLA models: [`crate::llm::moe::params::model_params`]'s total (every expert; without MTP layers).
pub fn model_params(cfg: &TrainingConfig, v_padded: u64) -> f64 {
    if cfg.model.moe.is_some() || cfg.model.mla.is_some() {
        return crate::llm::moe::params::model_params(cfg, v_padded).0;
    }
    let one = TrainingConfig { tp: 1, ..cfg.clone() };
    let embedding = v_padded as f64 * cfg.model.hidden as f64;
    let head = if cfg.model.tied_embeddings { 0.0 } else { embedding };
    cfg.model.layers as f64 * layer_params(&one) + embedding + 2.0 * cfg.model.hidden as f64 + head
}

/// Parameters one token uses: [`model_params`] with only the top-k routed experts of each MoE layer
/// ([`crate::llm::moe::params::model_params`]); all of them for a dense model.
pub fn active_params(cfg: &TrainingConfig, v_padded: u64) -> f64 {
    if cfg.model.moe.is_some() || cfg.model.mla.is_some() {
        return crate::llm::moe::params::model_params(cfg, v_padded).1;
    }
    model_params(cfg, v_padded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::Precision;
    use crate::llm::validate;

    fn cfg(model: serde_json::Value, tp: u32) -> TrainingConfig {
        validate(
            &serde_json::from_value(model).unwrap(),
            &serde_json::from_value(serde_json::json!({"tp": tp})).unwrap(),
            Precision::Fp16,
            64,
        )
        .unwrap()
    }

    #[test]
    fn general_layer_parameters_reduce_to_s1_eq6() {
        let c = cfg(serde_json::json!({"layers": 44, "hidden": 6144, "heads": 64, "seq_len": 2048, "vocab": 50257}), 4);
        assert_eq!(layer_params(&c), encoder_params(6144, 4));
        for role in [StageRole::First, StageRole::Middle, StageRole::Last, StageRole::Only] {
            assert_eq!(stage_params_of(&c, role, 11, 0, 50688), stage_params(role, 11, 6144, 50688, 4));
        }
    }

    #[test]
    fn llama2_7b_and_gpt3_175b_parameter_counts_by_hand() {
        // LLaMA-2 7B: d 4096, 32 layers, 32 heads, ffn 11008, SwiGLU, vocab 32000 (padded to 32000 at tp 1: 128·250).
        // Per layer: 4·4096 (norms) + QKV 4096·12288 + 12288 + out 4096² + 4096 + up 4096·2·11008 + 2·11008 +
        // down 11008·4096 + 4096 = 16,384 + 50,343,936 + 16,781,312 + 90,199,552 + 45,092,864 = 202,434,048.
        let c = cfg(
            serde_json::json!({"layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008,
            "activation": "swiglu", "seq_len": 4096, "vocab": 32000}),
            1,
        );
        assert_eq!(layer_params(&c), 202_434_048.0);
        // Model: 32 · 202,434,048 + 2 · 32000 · 4096 (untied) + 2 · 4096 = 6,740,041,728 (LLaMA-2 reports 6.74 B;
        // S1's accounting keeps biases LLaMA does not have).
        assert_eq!(model_params(&c, padded_vocab(32000, 1)), 6_740_041_728.0);
        // GPT-3 175B: 96 layers, d 12288, vocab 51200, tied: 96 · (4d norms + 12d² + 9d) + 51200·d + 2d
        // = 96 · 1,812,099,072 + 629,145,600 + 24,576 = 174,590,681,088 (≈ 175 B).
        let g = cfg(
            serde_json::json!({"layers": 96, "hidden": 12288, "heads": 96, "seq_len": 2048, "vocab": 51200,
            "tied_embeddings": true}),
            1,
        );
        assert_eq!(layer_params(&g), 1_812_099_072.0);
        assert_eq!(model_params(&g, 51200), 174_590_681_088.0);
    }

    #[test]
    fn vocab_padding_by_hand() {
        assert_eq!(padded_vocab(50257, 4), 50688); // 512 · 99
        assert_eq!(padded_vocab(50257, 1), 50304); // 128 · 393
        assert_eq!(padded_vocab(50257, 8), 51200); // 1024 · 50
        assert_eq!(padded_vocab(32000, 8), 32768); // 1024 · 32
        assert_eq!(padded_vocab(1024, 8), 1024);
    }

    #[test]
    fn gpt20b_stage_parameters_by_hand() {
        // d = 6144, mp = 4: 4·6144 = 24,576; 8·6144·6145/4 = 75,509,760; 6144·24,577/4 = 37,750,272.
        assert_eq!(encoder_params(6144, 4), 113_284_608.0);
        // Embedding slice 50,688·6144/4 = 77,856,768.
        // pp = 4 partition of 44 encoders is 11, 13, 13, 7 (see partition tests).
        assert_eq!(stage_params(StageRole::First, 11, 6144, 50688, 4), 77_856_768.0 + 11.0 * 113_284_608.0);
        assert_eq!(stage_params(StageRole::Middle, 13, 6144, 50688, 4), 1_472_699_904.0);
        assert_eq!(stage_params(StageRole::Last, 7, 6144, 50688, 4), 7.0 * 113_284_608.0 + 12_288.0 + 77_856_768.0);
    }
}

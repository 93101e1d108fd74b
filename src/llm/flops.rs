//! Model FLOPs and utilization (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
//! Clusters Using Megatron-LM", eq. 3; MODELS.md §1.6).

use super::config::{Activation, TrainingConfig};

/// Model FLOPs of one training iteration without activation recompute:
/// F = 72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h)) with B the global batch (sequences), s the sequence length, L
/// layers, h hidden, V vocabulary. (With full recompute the hardware does 96 instead of 72; MFU counts 72.)
pub fn model_flops(global_batch: u64, seq: u64, layers: u64, hidden: u64, vocab: u64) -> f64 {
    let (b, s, l, h, v) = (global_batch as f64, seq as f64, layers as f64, hidden as f64, vocab as f64);
    72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h))
}

/// Model FLOPs of one iteration for any layer shape (GQA, MLP width, SwiGLU), without recompute:
/// F = 6·B·s·(L·(P + 2·s·d) + V·d), where P = d·q + d² + u·d·f + f·d are the weights of one layer's four GEMMs
/// (q = (h + 2·kv)·d/h, u = 2 for SwiGLU) and 2·s·d per token is attention's QKᵀ and ·V (counted in full, as
/// Narayanan et al. do). With kv = h, f = 4d, u = 1 it is Narayanan et al.'s eq. 3 (tested); for LLaMA-style
/// models it is NeMo's `llama2` formula B·s·L·d²·(12 + 12·kv/h + 18·f/d + 12·s/d + 6·V/(L·d)).
///
/// With a head dim D ≠ d/h the QKV width is (h + 2·kv)·D and the output projection h·D × d; MoE and MLA models are
/// counted by [`crate::llm::moe::model_flops`] (top-k experts per token, MTP layers included).
pub fn model_flops_of(cfg: &TrainingConfig) -> f64 {
    if cfg.model.moe.is_some() || cfg.model.mla.is_some() {
        return crate::llm::moe::model_flops(cfg);
    }
    let m = &cfg.model;
    let (b, s, l, d, v) = (cfg.global_batch as f64, m.seq_len as f64, m.layers as f64, m.hidden as f64, m.vocab as f64);
    let dh = cfg.head_dim as f64;
    let (q, o) = ((m.heads as f64 + 2.0 * cfg.kv_heads as f64) * dh, m.heads as f64 * dh);
    let f = cfg.ffn_hidden as f64;
    let u = if m.activation == Activation::Swiglu { 2.0 } else { 1.0 };
    let p = d * q + o * d + u * d * f + f * d;
    6.0 * b * s * (l * (p + 2.0 * s * o) + v * d)
}

/// Model FLOPs utilization: F / (t · GPUs · peak FLOP/s).
pub fn mfu(flops: f64, iteration_s: f64, gpus: u64, peak_flops: f64) -> f64 {
    flops / (iteration_s * gpus as f64 * peak_flops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt3_175b_by_hand() {
        // GPT-3 175B (L 96, h 12288, s 2048, V 51200), B = 1536:
        // 72·1536·2048·96·12288² = 3.2829e18 · (1 + 2048/73728 + 51200/14155776) = 1.031395 → 3.3860e18.
        let f = model_flops(1536, 2048, 96, 12288, 51200);
        let base = 72.0 * 1536.0 * 2048.0 * 96.0 * 12288.0_f64.powi(2);
        let expected = base * (1.0 + 2048.0 / 73728.0 + 51200.0 / (12.0 * 96.0 * 12288.0));
        assert!((f / expected - 1.0).abs() < 1e-12);
        assert!((f / 3.386e18 - 1.0).abs() < 1e-3, "{f:e}");
    }

    fn cfg(model: serde_json::Value, gb: u32) -> TrainingConfig {
        let p = serde_json::from_value(serde_json::json!({"global_batch": gb})).unwrap();
        crate::llm::validate(&serde_json::from_value(model).unwrap(), &p, crate::hw::Precision::Bf16, 8).unwrap()
    }

    #[test]
    fn general_formula_reduces_to_narayanan_and_to_nemo_for_llama() {
        let g =
            cfg(serde_json::json!({"layers": 96, "hidden": 12288, "heads": 96, "seq_len": 2048, "vocab": 51200}), 1536);
        let n = model_flops(1536, 2048, 96, 12288, 51200);
        assert!((model_flops_of(&g) / n - 1.0).abs() < 1e-12);
        // Llama 3 8B (NeMo's llama2 formula): B 128, s 8192, L 32, d 4096, kv/h = 8/32, f 14336, V 128256:
        // 12 + 3 + 18·3.5 + 12·2 + 6·128256/(32·4096) = 12 + 3 + 63 + 24 + 5.87109375 = 107.87109375
        // → 128·8192·32·4096²·107.87109375 = 5.9297e16 FLOPs.
        let l = cfg(
            serde_json::json!({"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
            "activation": "swiglu", "seq_len": 8192, "vocab": 128256}),
            128,
        );
        let nemo = 128.0 * 8192.0 * 32.0 * 4096.0f64.powi(2) * 107.87109375;
        assert!((model_flops_of(&l) / nemo - 1.0).abs() < 1e-12, "{} vs {nemo}", model_flops_of(&l));
    }
}

//! The model architecture a training request names ([`ModelSpec`]): its layer counts and widths, its norm, attention
//! and activation, and Megatron-LM's default MLP width.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Normalization layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Norm {
    #[default]
    Layernorm,
    Rmsnorm,
}

/// Attention implementation (S1 Table I): fused scale-mask-softmax, unfused (mask fill + softmax) or
/// FlashAttention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Attention {
    #[default]
    FusedSoftmax,
    Unfused,
    Flash,
}

/// MLP activation: GeLU (GPT, S1) with one up-projection, or SwiGLU (Shazeer 2020, "GLU Variants Improve
/// Transformer"; LLaMA) with a gate and an up-projection of `ffn_hidden` each, fused into one GEMM of width
/// 2·ffn_hidden as Megatron-LM's `--swiglu` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    #[default]
    Gelu,
    Swiglu,
}

/// A decoder-only transformer (GPT-NeoX / LLaMA family).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "GPT-20B", "layers": 44, "hidden": 6144, "heads": 64, "seq_len": 2048,
    "vocab": 50257, "norm": "layernorm", "attention": "fused_softmax", "activation": "gelu",
    "parallel_residual": true}))]
pub struct ModelSpec {
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Encoder (transformer) layers, E.
    pub layers: u32,
    /// Hidden size d.
    pub hidden: u32,
    /// Attention (query) heads h.
    pub heads: u32,
    /// Sequence length l, tokens.
    pub seq_len: u32,
    /// Vocabulary size v before padding.
    pub vocab: u32,
    /// Default `layernorm`.
    #[serde(default)]
    pub norm: Norm,
    /// Default `fused_softmax`.
    #[serde(default)]
    pub attention: Attention,
    /// Default `gelu`.
    #[serde(default)]
    pub activation: Activation,
    /// GPT-NeoX parallel residual (attention and MLP read the same input): one tensor-parallel all-reduce per
    /// encoder forward instead of two. Default `false`.
    #[serde(default)]
    pub parallel_residual: bool,
    /// Rotary position embedding on q and k (GPT-NeoX, LLaMA). Default `true`.
    #[serde(default = "yes")]
    pub rotary: bool,
    /// Key/value heads: grouped-query attention (Ainslie et al. 2023, "GQA"); 1 is multi-query attention.
    /// Must divide `heads`. Default `heads` (multi-head attention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<u32>,
    /// Width of the MLP's hidden layer. Default 4·hidden for `gelu`; for `swiglu` Megatron-LM's
    /// ⌊(4·hidden·2/3)/64⌋·64 (the width that keeps the parameters of the 4·hidden GeLU MLP, rounded to 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ffn_hidden: Option<u32>,
    /// The LM head shares the input embedding's weights (GPT-2, Megatron's default). With pp = 1 the model holds
    /// one copy; with pp > 1 the last stage keeps a copy and the first and last stages all-reduce the embedding
    /// gradients every step (Megatron-LM). Default `false` (S1: untied, GPT-NeoX).
    #[serde(default)]
    pub tied_embeddings: bool,
    /// Hidden and attention dropout probability (Megatron-LM's `--hidden-dropout` / `--attention-dropout`; GPT-2
    /// and Megatron's GPT use 0.1, LLaMA 0). Above 0 each layer runs the attention-probability dropout and two
    /// bias-dropout-add kernels, and stores their masks (Korthikanti et al.). Default 0 (S1).
    #[serde(default)]
    pub dropout: f64,
    /// Dims per attention head (Megatron-LM `--kv-channels`). Default hidden / heads; Qwen3 models have
    /// heads · head_dim ≠ hidden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u32>,
    /// Mixture-of-experts layers ([`crate::llm::moe`]). Default: a dense model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<crate::llm::moe::MoeSpec>,
    /// Multi-head latent attention (DeepSeek-V2/V3; Megatron-Core `multi_latent_attention`). Default: multi-head or
    /// grouped-query attention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mla: Option<crate::llm::moe::MlaSpec>,
    /// Multi-token-prediction layers on the last pipeline stage (DeepSeek-V3 trains with 1; Megatron-Core
    /// `mtp_num_layers`, `multi_token_prediction.py`). Default 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mtp_layers: u32,
    /// RMSNorm of every query and key head before attention (Megatron-Core `qk_layernorm`: `SelfAttention`'s
    /// `q_layernorm` and `k_layernorm` over the head dim, `attention.py` `get_query_key_value_tensors`; Qwen3's
    /// `q_norm` / `k_norm`, Megatron-Bridge `qwen3_bridge.py` / `qwen3_moe_bridge.py` `qk_layernorm = True`).
    /// Two norm kernels per layer forward and backward ([`crate::llm::operators::layer_passes`]). Default `false`;
    /// set for the catalog's Qwen3 models and Hugging Face configs of `model_type` `qwen3` or `qwen3_moe`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub qk_norm: bool,
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn yes() -> bool {
    true
}

/// Megatron-LM's default MLP width: 4·hidden, or ⌊(4·hidden·2/3)/64⌋·64 with SwiGLU (Megatron-LM
/// `arguments.py`, `--swiglu` without `--ffn-hidden-size`).
pub fn default_ffn_hidden(hidden: u32, activation: Activation) -> u32 {
    match activation {
        Activation::Gelu => 4 * hidden,
        Activation::Swiglu => ((4.0 * hidden as f64 * 2.0 / 3.0) / 64.0).floor() as u32 * 64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swiglu_default_width_follows_megatron() {
        // LLaMA-7B: d = 4096 → 4·4096·2/3 = 10,922.67 → ⌊/64⌋ = 170 → 10,880 (LLaMA itself uses 11,008, which
        // it rounds up to 256: give ffn_hidden to match a checkpoint).
        assert_eq!(default_ffn_hidden(4096, Activation::Swiglu), 10_880);
        assert_eq!(default_ffn_hidden(4096, Activation::Gelu), 16_384);
    }
}

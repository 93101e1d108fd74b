//! The mixture-of-experts and multi-head-latent-attention vocabulary training and serving share: the request
//! forms ([`MoeSpec`], [`MlaSpec`]), the resolved MoE configuration ([`MoeConfig`]) and which layers are MoE
//! layers ([`MoeConfig::is_moe_layer`]).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::llm::config::{bad, ConfigError};

/// Mixture-of-experts layers (Shazeer et al. 2017; Mixtral, Qwen-MoE, DeepSeek-V3): every MoE layer replaces its
/// MLP by `experts` SwiGLU experts of width `expert_ffn_hidden`, of which each token uses `top_k` (chosen by a
/// router GEMM of `hidden × experts`), plus `shared_experts` experts every token uses. Which layers are MoE layers:
/// layer i (0-based) when i ≥ `dense_layers` and i mod `layer_freq` = 0 (Megatron-Core `moe_layer_freq`,
/// `gpt_layer_specs.py` `_get_moe_layer_pattern`; DeepSeek's `first_k_dense_replace`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"experts": 8, "top_k": 2, "expert_ffn_hidden": 14336}))]
pub struct MoeSpec {
    /// Routed experts per MoE layer, E.
    pub experts: u32,
    /// Experts each token is routed to, K.
    pub top_k: u32,
    /// Width of one routed expert's MLP (gate and up projections of this width, down projection back).
    pub expert_ffn_hidden: u32,
    /// Experts every token goes through besides its routed ones (DeepSeek's shared experts). Default 0.
    #[serde(default)]
    pub shared_experts: u32,
    /// Total width of the shared experts' MLP (Qwen-MoE's `shared_expert_intermediate_size`, Megatron-Core's
    /// `moe_shared_expert_intermediate_size`). Default shared_experts · expert_ffn_hidden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_ffn_hidden: Option<u32>,
    /// Leading layers that keep a dense MLP of `ffn_hidden` (DeepSeek-V3's `first_k_dense_replace`). Default 0.
    #[serde(default)]
    pub dense_layers: u32,
    /// One MoE layer every `layer_freq` layers (Megatron-Core's integer `moe_layer_freq`: layer i is an MoE layer
    /// when i mod layer_freq = 0). Training only; serving models every layer after `dense_layers` as MoE.
    /// Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer_freq: Option<u32>,
    /// Expert groups of group-limited routing (Megatron-Core `moe_router_num_groups`, DeepSeek's `n_group`): each
    /// token first picks `router_group_top_k` groups, then its top-k experts inside them. With the groups laid
    /// out over the expert-parallel nodes this limits how many nodes a token's dispatch reaches (DeepSeek-V3's
    /// node-limited routing). Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_groups: Option<u32>,
    /// Groups each token may use (Megatron-Core `moe_router_group_topk`, DeepSeek's `topk_group`). Needs
    /// `router_groups`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_group_top_k: Option<u32>,
}

/// Multi-head latent attention (DeepSeek-V2/V3, `kv_lora_rank` in config.json): queries and the key/value pair
/// are projected down to low-rank latents (`q_lora_rank`, `kv_lora_rank`) and up again per head; each head's
/// query/key has `qk_nope_head_dim` dims without and `qk_rope_head_dim` dims with rotary embedding, its value
/// `v_head_dim` dims. Serving approximates its attention kernels (see `llm::serving`); training runs it as
/// Megatron-Core's `MLASelfAttention` (`multi_latent_attention.py`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128}))]
pub struct MlaSpec {
    /// Rank of the query down-projection (0: queries projected directly from the hidden state).
    #[serde(default)]
    pub q_lora_rank: u32,
    /// Rank of the compressed key/value latent.
    pub kv_lora_rank: u32,
    /// Per-head query/key dims without rotary embedding.
    pub qk_nope_head_dim: u32,
    /// Per-head query/key dims with rotary embedding (shared key part cached with the latent).
    pub qk_rope_head_dim: u32,
    /// Per-head value dims.
    pub v_head_dim: u32,
}

impl MlaSpec {
    /// Parameters of one layer's MLA projections with `heads` query heads and hidden `d` (no biases, as
    /// DeepSeek-V3 and Megatron-Core's MLA have none): q down d·q_r, its norm q_r, q up q_r·a·(D_nope + D_rope)
    /// (or d·a·(D_nope + D_rope) without q_r), kv down d·(kv_r + D_rope), its norm kv_r, kv up
    /// kv_r·a·(D_nope + D_v), output a·D_v·d.
    pub fn params(&self, hidden: u32, heads: u32) -> f64 {
        let (d, a) = (hidden as f64, heads as f64);
        let (qr, kvr) = (self.q_lora_rank as f64, self.kv_lora_rank as f64);
        let (nope, rope, v) = (self.qk_nope_head_dim as f64, self.qk_rope_head_dim as f64, self.v_head_dim as f64);
        let q = if self.q_lora_rank > 0 { d * qr + qr + qr * a * (nope + rope) } else { d * a * (nope + rope) };
        q + d * (kvr + rope) + kvr + kvr * a * (nope + v) + a * v * d
    }

    /// Query/key dims per head, D_nope + D_rope.
    pub fn qk_head_dim(&self) -> u32 {
        self.qk_nope_head_dim + self.qk_rope_head_dim
    }
}

/// A resolved mixture-of-experts configuration.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct MoeConfig {
    /// Routed experts per MoE layer, E.
    pub experts: u32,
    /// Routed experts per token, K.
    pub top_k: u32,
    /// One routed expert's MLP width, F.
    pub expert_ffn_hidden: u32,
    /// Shared experts (every token).
    pub shared_experts: u32,
    /// Total MLP width of the shared experts (0 without them).
    pub shared_ffn_hidden: u32,
    /// Leading layers with a dense MLP.
    pub dense_layers: u32,
    /// One MoE layer every `layer_freq` layers (1: every layer after the dense ones).
    #[serde(skip_serializing_if = "is_one")]
    pub layer_freq: u32,
    /// Expert groups of group-limited routing (0: none).
    #[serde(skip_serializing_if = "is_zero")]
    pub router_groups: u32,
    /// Groups each token may use (0: no limit).
    #[serde(skip_serializing_if = "is_zero")]
    pub router_group_top_k: u32,
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl MoeConfig {
    /// From a request's [`MoeSpec`] (shared width defaults to shared_experts · expert_ffn_hidden, layer_freq to 1).
    pub fn from_spec(m: &MoeSpec) -> MoeConfig {
        MoeConfig {
            experts: m.experts,
            top_k: m.top_k,
            expert_ffn_hidden: m.expert_ffn_hidden,
            shared_experts: m.shared_experts,
            shared_ffn_hidden: m.shared_ffn_hidden.unwrap_or(m.shared_experts * m.expert_ffn_hidden),
            dense_layers: m.dense_layers,
            layer_freq: m.layer_freq.unwrap_or(1).max(1),
            router_groups: m.router_groups.unwrap_or(0),
            router_group_top_k: m.router_group_top_k.unwrap_or(0),
        }
    }

    /// The request form of this configuration.
    pub fn to_spec(&self) -> MoeSpec {
        MoeSpec {
            experts: self.experts,
            top_k: self.top_k,
            expert_ffn_hidden: self.expert_ffn_hidden,
            shared_experts: self.shared_experts,
            shared_ffn_hidden: (self.shared_ffn_hidden > 0).then_some(self.shared_ffn_hidden),
            dense_layers: self.dense_layers,
            layer_freq: (self.layer_freq > 1).then_some(self.layer_freq),
            router_groups: (self.router_groups > 0).then_some(self.router_groups),
            router_group_top_k: (self.router_group_top_k > 0).then_some(self.router_group_top_k),
        }
    }

    /// Whether layer `i` (0-based) is an MoE layer: i ≥ dense_layers and i mod layer_freq = 0 (Megatron-Core
    /// `_get_moe_layer_pattern`).
    pub fn is_moe_layer(&self, i: u32) -> bool {
        i >= self.dense_layers && i % self.layer_freq.max(1) == 0
    }

    /// MoE layers among layers [start, end).
    pub fn moe_layers_in(&self, start: u32, end: u32) -> u32 {
        (start..end).filter(|&i| self.is_moe_layer(i)).count() as u32
    }
}

/// Validates a request's [`MlaSpec`]; errors name `<prefix>.<field>` (`model.mla.kv_lora_rank`): any of its four
/// dimensions zero (`kv_lora_rank`, `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`; DeepSeek-V2 §2.1.2's
/// d_c, d_h, d_h^R and the value head width). Shared by training and serving requests.
pub fn validate_mla(m: &MlaSpec, prefix: &str) -> Result<(), ConfigError> {
    for (f, v) in [
        ("kv_lora_rank", m.kv_lora_rank),
        ("qk_nope_head_dim", m.qk_nope_head_dim),
        ("qk_rope_head_dim", m.qk_rope_head_dim),
        ("v_head_dim", m.v_head_dim),
    ] {
        if v == 0 {
            return Err(bad(&format!("{prefix}.{f}"), "must be at least 1"));
        }
    }
    Ok(())
}

/// Validates a request's [`MoeSpec`] for a model of `layers` layers and resolves it; errors name
/// `<prefix>.<field>` (`model.moe.top_k`): zero experts, top-k or width; top-k above the experts; dense layers that
/// leave no MoE layer; a zero shared width, layer frequency or group count; group top-k without groups or above
/// them, or groups that do not divide the experts.
pub fn validate_moe(m: &MoeSpec, layers: u32, prefix: &str) -> Result<MoeConfig, ConfigError> {
    let field = |f: &str| format!("{prefix}.{f}");
    for (f, v) in [("experts", m.experts), ("top_k", m.top_k), ("expert_ffn_hidden", m.expert_ffn_hidden)] {
        if v == 0 {
            return Err(bad(&field(f), "must be at least 1"));
        }
    }
    if m.top_k > m.experts {
        return Err(bad(&field("top_k"), format!("top_k {} exceeds the {} experts", m.top_k, m.experts)));
    }
    if m.dense_layers >= layers {
        return Err(bad(&field("dense_layers"), format!("{} dense layers leave no MoE layer", m.dense_layers)));
    }
    if m.shared_ffn_hidden == Some(0) {
        return Err(bad(&field("shared_ffn_hidden"), "must be at least 1 (leave it out for none)"));
    }
    if m.layer_freq == Some(0) {
        return Err(bad(&field("layer_freq"), "must be at least 1"));
    }
    match (m.router_groups, m.router_group_top_k) {
        (Some(0), _) => return Err(bad(&field("router_groups"), "must be at least 1 (leave it out for none)")),
        (Some(g), _) if m.experts % g != 0 => {
            return Err(bad(&field("router_groups"), format!("{g} groups do not divide the {} experts", m.experts)))
        }
        (Some(g), Some(k)) if k == 0 || k > g => {
            return Err(bad(&field("router_group_top_k"), format!("must be 1–{g} (the groups), got {k}")))
        }
        (None, Some(_)) => return Err(bad(&field("router_group_top_k"), "needs router_groups")),
        _ => {}
    }
    let c = MoeConfig::from_spec(m);
    if c.moe_layers_in(0, layers) == 0 {
        return Err(bad(&field("layer_freq"), "no layer is an MoE layer"));
    }
    Ok(c)
}

/// Qwen3-235B-A22B's expert layers, the MoE tests' common fixture (its Hugging Face `config.json`: 128 experts,
/// `num_experts_per_tok` 8, `moe_intermediate_size` 1,536, no shared experts, every layer MoE).
#[cfg(test)]
pub(crate) fn qwen3_235b_a22b() -> MoeConfig {
    MoeConfig {
        experts: 128,
        top_k: 8,
        expert_ffn_hidden: 1536,
        shared_experts: 0,
        shared_ffn_hidden: 0,
        dense_layers: 0,
        layer_freq: 1,
        router_groups: 0,
        router_group_top_k: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_pattern_follows_megatron() {
        // DeepSeek-V3: 3 dense layers, then every layer MoE: of 61 layers 58 are MoE.
        let ds = MoeConfig::from_spec(&MoeSpec {
            experts: 256,
            top_k: 8,
            expert_ffn_hidden: 2048,
            shared_experts: 1,
            shared_ffn_hidden: None,
            dense_layers: 3,
            layer_freq: None,
            router_groups: Some(8),
            router_group_top_k: Some(4),
        });
        assert_eq!((ds.moe_layers_in(0, 61), ds.shared_ffn_hidden), (58, 2048));
        assert!(!ds.is_moe_layer(2) && ds.is_moe_layer(3));
        // Megatron's moe_layer_freq 2: layers 0, 2, 4, … are MoE: 16 of 32.
        let alt = MoeConfig { layer_freq: 2, dense_layers: 0, ..ds.clone() };
        assert_eq!(alt.moe_layers_in(0, 32), 16);
        assert!(alt.is_moe_layer(0) && !alt.is_moe_layer(1));
        assert_eq!(MoeConfig::from_spec(&ds.to_spec()), ds);
    }

    #[test]
    fn deepseek_v3_mla_parameters_by_hand() {
        // d 7168, 128 heads, q_r 1536, kv_r 512, nope 128, rope 64, v 128: q down 11,010,048 + norm 1536 + q up
        // 1536·128·192 = 37,748,736 + kv down 7168·576 = 4,128,768 + norm 512 + kv up 512·128·256 = 16,777,216 +
        // output 128·128·7168 = 117,440,512 → 187,107,328.
        let mla = MlaSpec {
            q_lora_rank: 1536,
            kv_lora_rank: 512,
            qk_nope_head_dim: 128,
            qk_rope_head_dim: 64,
            v_head_dim: 128,
        };
        assert_eq!(mla.params(7168, 128), 187_107_328.0);
        assert_eq!(mla.qk_head_dim(), 192);
    }

    #[test]
    fn an_mla_spec_with_a_zero_dimension_is_refused_naming_the_field() {
        // DeepSeek-V3's MLA (config.json): q 1536, kv 512, nope 128, rope 64, v 128 — valid; q_lora_rank 0 is
        // allowed (queries projected directly, DeepSeek-V2-Lite); any of the other four at 0 names its field.
        let v3 = MlaSpec {
            q_lora_rank: 1536,
            kv_lora_rank: 512,
            qk_nope_head_dim: 128,
            qk_rope_head_dim: 64,
            v_head_dim: 128,
        };
        assert!(validate_mla(&v3, "model.mla").is_ok());
        assert!(validate_mla(&MlaSpec { q_lora_rank: 0, ..v3.clone() }, "model.mla").is_ok());
        let e = validate_mla(&MlaSpec { v_head_dim: 0, ..v3.clone() }, "model.mla").unwrap_err();
        assert_eq!(e.field, "model.mla.v_head_dim");
        let e = validate_mla(&MlaSpec { kv_lora_rank: 0, ..v3 }, "model.mla").unwrap_err();
        assert_eq!(e.field, "model.mla.kv_lora_rank");
    }
}

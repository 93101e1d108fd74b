//! A resolved serving model: every architectural number filled in (from the catalog, a Hugging Face config or
//! the request), with its parameter counts (total and active per token) and KV-cache bytes per token.
//!
//! Parameter counts (MODELS.md §5, generalized): per layer the attention projections
//! d·D·(a + 2g) (QKV) + a·D·d (output), the MLP 3·d·f (SwiGLU: gate, up, down) or 2·d·f (GeLU), two norms of d;
//! plus the embedding V·d, the final norm d and the LM head V·d unless tied. An MoE layer replaces the MLP by
//! E routed experts of 3·d·F, the router d·E and the shared experts 3·d·F_shared; a token uses K of the routed
//! experts (active parameters). Biases are not counted (Qwen2's QKV biases, GPT-3's: < 0.1 %). MLA (DeepSeek-V3):
//! q down/up d·q_r + q_r·a·(D_nope + D_rope) (or d·a·(D_nope + D_rope) without q_r), kv down d·(kv_r + D_rope), kv
//! up kv_r·a·(D_nope + D_v), output a·D_v·d, and the two latent norms q_r + kv_r.

use serde::Serialize;
use utoipa::ToSchema;

use super::request::MlaSpec;
use crate::llm::config::{Activation, Norm};

pub use crate::llm::moe::MoeConfig;

/// A decoder-only transformer with every number resolved.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ServingModel {
    pub name: String,
    /// Layers N.
    pub layers: u32,
    /// Hidden size d.
    pub hidden: u32,
    /// Query heads a.
    pub heads: u32,
    /// Key/value heads g.
    pub kv_heads: u32,
    /// Dims per head D.
    pub head_dim: u32,
    /// Dense MLP width f (the MoE model's dense layers).
    pub ffn_hidden: u32,
    /// Vocabulary V.
    pub vocab: u32,
    pub norm: Norm,
    pub activation: Activation,
    pub tied_embeddings: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moe: Option<MoeConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub mla: Option<MlaSpec>,
    /// DeepSeek sparse attention's indexer, on every layer (`None`: dense attention).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dsa: Option<DsaIndexer>,
    /// Multi-token-prediction modules after the last layer (config.json `num_nextn_predict_layers`: 1 for
    /// DeepSeek-V3/R1), which only speculative decoding runs ([`super::speculative`]); 0: none.
    #[serde(skip_serializing_if = "is_zero")]
    pub mtp_layers: u32,
    /// Sliding-window attention on some layers ([`SlidingWindow`]; `None`: every layer attends the whole context).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<SlidingWindow>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5; config.json `index_n_heads`, `index_head_dim`,
/// `index_topk`): before each layer's MLA, a "lightning indexer" scores every cached token for each new token and
/// the attention reads only the `topk` best. Its cost is the indexer itself, which no tensor-parallel split
/// shrinks: SGLang's `Indexer` (`python/sglang/srt/layers/attention/nsa/nsa_indexer.py`) holds `wq_b`
/// [q_lora_rank → heads·head_dim], `wk` [d → head_dim] and `weights_proj` [d → heads] as `ReplicatedLinear`, so
/// every GPU computes all `heads` heads' logits, `fp8_paged_mqa_logits` (DeepGEMM), over its sequences' whole
/// contexts. GLM-5: 32 heads of 128 dims, top-2,048 (aiconfigurator's `DSA_MODEL_DIMS["GlmMoeDsaForCausalLM"]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct DsaIndexer {
    /// Indexer heads (`index_n_heads`).
    pub heads: u32,
    /// Dims per indexer head (`index_head_dim`).
    pub head_dim: u32,
    /// Cached tokens each query attends (`index_topk`).
    pub topk: u32,
}

impl DsaIndexer {
    /// Bytes one token's index key takes in the cache per layer: `head_dim` fp8 elements and one fp32 scale per
    /// 128 of them (SGLang's `NSATokenToKVPool` index buffer, `head_dim_with_sf` = 132 for 128 dims).
    pub fn key_bytes(&self) -> f64 {
        self.head_dim as f64 + 4.0 * self.head_dim.div_ceil(128) as f64
    }
}

/// Sliding-window attention (config.json `sliding_window` and `layer_types`): the layers whose `layer_types` entry is
/// `"sliding_attention"` attend only the last `window_tokens` tokens of the context (the query's own included), the
/// `"full_attention"` layers the whole context. gpt-oss (`openai/gpt-oss-120b`: `sliding_window` 128, `layer_types`
/// alternating from `"sliding_attention"` on layer 0) windows every even layer: vLLM's
/// `OAIAttention.__init__` (`vllm/model_executor/models/gpt_oss.py`: `sliding_window = config.sliding_window if
/// self.layer_idx % 2 == 0 else None`) and TensorRT-LLM's `AttentionBlock.__init__`
/// (`tensorrt_llm/_torch/models/modeling_gpt_oss.py`, which passes `attention_window_size` to the attention op).
///
/// What it changes ([`super::step`]): a windowed layer's decode attention reads min(C, W) cached tokens of a C-token
/// context, and its prefill attention over a prompt of S tokens computes Σ_{i=1..S} min(i, W) query–key pairs
/// ([`SlidingWindow::prefill_keys`]) instead of S(S + 1)/2. The KV-cache capacity still reserves every layer's
/// whole context (vLLM's hybrid allocator frees a windowed layer's blocks beyond the window; not modelled: the KV
/// cache never binds the measured gpt-oss runs), and the windowed layers are spread evenly over pipeline stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct SlidingWindow {
    /// Tokens a windowed layer's query attends, W (config.json `sliding_window`).
    pub window_tokens: u32,
    /// Layers attending over the window (config.json `layer_types` entries `"sliding_attention"`), ≤ layers.
    pub layers: u32,
}

impl SlidingWindow {
    /// Query–key pairs of a causal prompt of `s` tokens under a window of W = `window_tokens` (token i, 1-based,
    /// attends min(i, W) keys): Σ_{i=1..s} min(i, W) = s(s + 1)/2 for s ≤ W, and W(W + 1)/2 + (s − W)·W beyond.
    pub fn prefill_keys(&self, s: u64) -> f64 {
        let (s, w) = (s as f64, self.window_tokens as f64);
        if s <= w {
            s * (s + 1.0) / 2.0
        } else {
            w * (w + 1.0) / 2.0 + (s - w) * w
        }
    }
}

impl ServingModel {
    /// Layers with an MoE MLP (0 for a dense model).
    pub fn moe_layers(&self) -> u32 {
        self.moe.as_ref().map_or(0, |m| self.layers.saturating_sub(m.dense_layers))
    }

    /// Attention projection parameters of one layer (QKV and output; MLA's projections and latent norms).
    pub fn attention_params(&self) -> f64 {
        let (d, a, g, dh) = (self.hidden as f64, self.heads as f64, self.kv_heads as f64, self.head_dim as f64);
        match &self.mla {
            None => d * dh * (a + 2.0 * g) + a * dh * d,
            Some(m) => m.params(self.hidden, self.heads),
        }
    }

    /// Parameters of one dense MLP of width `f`: 3·d·f with SwiGLU, 2·d·f with GeLU.
    pub fn mlp_params(&self, f: u32) -> f64 {
        let u = if self.activation == Activation::Swiglu { 3.0 } else { 2.0 };
        u * self.hidden as f64 * f as f64
    }

    /// Parameters of one MoE layer's MLP part: all routed experts, the router and the shared experts
    /// (`active` = only the top-K routed experts a token uses).
    pub fn moe_mlp_params(&self, active: bool) -> f64 {
        let Some(m) = &self.moe else { return 0.0 };
        let routed = if active { m.top_k } else { m.experts } as f64;
        routed * self.mlp_params(m.expert_ffn_hidden)
            + self.hidden as f64 * m.experts as f64
            + self.mlp_params(m.shared_ffn_hidden)
    }

    /// Embedding (and untied LM head) parameters: V·d, twice unless tied.
    pub fn embedding_params(&self) -> f64 {
        let e = self.vocab as f64 * self.hidden as f64;
        if self.tied_embeddings {
            e
        } else {
            2.0 * e
        }
    }

    fn params(&self, active: bool) -> f64 {
        let n = self.layers as f64;
        let d = self.hidden as f64;
        let moe = self.moe_layers() as f64;
        let layer_common = self.attention_params() + 2.0 * d;
        n * layer_common
            + (n - moe) * self.mlp_params(self.ffn_hidden)
            + moe * self.moe_mlp_params(active)
            + self.embedding_params()
            + d
    }

    /// Every parameter of the model.
    pub fn params_total(&self) -> f64 {
        self.params(false)
    }

    /// Parameters one token uses (MoE: its top-K routed experts; the embedding and LM head count).
    pub fn params_active(&self) -> f64 {
        self.params(true)
    }

    /// KV-cache elements per token and layer: 2·g·D (keys and values), or MLA's latent kv_lora_rank + D_rope.
    pub fn kv_elems_per_token_layer(&self) -> f64 {
        match &self.mla {
            None => 2.0 * self.kv_heads as f64 * self.head_dim as f64,
            Some(m) => (m.kv_lora_rank + m.qk_rope_head_dim) as f64,
        }
    }

    /// KV-cache bytes per token over the whole model (MODELS.md §5): 2·N·g·D·e_kv (MLA: N·(kv_r + D_rope)·e_kv),
    /// plus DSA's index keys, N·[`DsaIndexer::key_bytes`] whatever the cache's precision.
    /// Llama-3.1-70B in bf16: 2·80·8·128·2 = 327,680 B.
    pub fn kv_bytes_per_token(&self, kv_elem_bytes: f64) -> f64 {
        let index = self.dsa.map_or(0.0, |x| x.key_bytes());
        self.layers as f64 * (self.kv_elems_per_token_layer() * kv_elem_bytes + index)
    }
}

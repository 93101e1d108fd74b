//! The built-in model catalog: popular open models by name (`"model": "Llama-3.1-70B"`), each entry the values
//! of its Hugging Face `config.json` (`hidden_size`, `num_hidden_layers`, `num_attention_heads`,
//! `num_key_value_heads`, `head_dim`, `intermediate_size`, `vocab_size`, `tie_word_embeddings` and the MoE / MLA
//! keys), cited by repository id in [`CatalogEntry::source`]. GPT-3 has no public config: its sizes are Brown et
//! al. 2020, Table 2.1 (d_ff = 4·d_model, vocabulary 50,257, GeLU, LayerNorm, tied embeddings as GPT-2).
//!
//! Names compare case-insensitively, and each entry also answers to its Hugging Face repository ids.

use std::sync::OnceLock;

use super::model::{DsaIndexer, MoeConfig, ServingModel, SlidingWindow};
use super::request::MlaSpec;
use crate::llm::config::{Activation, Norm};

/// One catalog model.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    /// The model, resolved.
    pub model: ServingModel,
    /// Other names it answers to (Hugging Face repository ids).
    pub aliases: &'static [&'static str],
    /// Where its numbers come from.
    pub source: &'static str,
}

#[allow(clippy::too_many_arguments)]
fn dense(
    name: &str,
    layers: u32,
    hidden: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    ffn: u32,
    vocab: u32,
    tied: bool,
) -> ServingModel {
    ServingModel {
        name: name.to_string(),
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        ffn_hidden: ffn,
        vocab,
        norm: Norm::Rmsnorm,
        activation: Activation::Swiglu,
        tied_embeddings: tied,
        moe: None,
        mla: None,
        dsa: None,
        mtp_layers: 0,
        sliding_window: None,
    }
}

fn moe(mut m: ServingModel, experts: u32, top_k: u32, expert_ffn: u32, shared: u32, dense_layers: u32) -> ServingModel {
    m.moe = Some(MoeConfig {
        experts,
        top_k,
        expert_ffn_hidden: expert_ffn,
        shared_experts: shared,
        shared_ffn_hidden: shared * expert_ffn,
        dense_layers,
        layer_freq: 1,
        router_groups: 0,
        router_group_top_k: 0,
    });
    m
}

/// DeepSeek-V3's multi-head latent attention (deepseek-ai/DeepSeek-V3 config.json: q_lora_rank 1536, kv_lora_rank
/// 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128), which Kimi K2 keeps.
const DEEPSEEK_V3_MLA: MlaSpec =
    MlaSpec { q_lora_rank: 1536, kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128 };

/// Group-limited routing: `groups` expert groups, `top` of them per token (config.json `n_group`, `topk_group`).
fn node_limited(mut m: ServingModel, groups: u32, top: u32) -> ServingModel {
    if let Some(moe) = m.moe.as_mut() {
        moe.router_groups = groups;
        moe.router_group_top_k = top;
    }
    m
}

/// GPT-3 (Brown et al. 2020, Table 2.1): n_layers, d_model, n_heads, d_head; d_ff = 4·d_model.
fn gpt3(name: &str, layers: u32, d_model: u32, heads: u32, d_head: u32) -> ServingModel {
    ServingModel {
        norm: Norm::Layernorm,
        activation: Activation::Gelu,
        ..dense(name, layers, d_model, heads, heads, d_head, 4 * d_model, 50257, true)
    }
}

fn entry(model: ServingModel, aliases: &'static [&'static str], source: &'static str) -> CatalogEntry {
    CatalogEntry { model, aliases, source }
}

/// Every catalog entry, in the README's order.
pub fn catalog() -> &'static [CatalogEntry] {
    static CATALOG: OnceLock<Vec<CatalogEntry>> = OnceLock::new();
    CATALOG.get_or_init(build)
}

fn build() -> Vec<CatalogEntry> {
    const LLAMA2_7B: &str = "meta-llama/Llama-2-7b-hf config.json: hidden_size 4096, num_hidden_layers 32, \
        num_attention_heads 32, num_key_value_heads 32, intermediate_size 11008, vocab_size 32000";
    const LLAMA3_8B: &str = "meta-llama/Meta-Llama-3-8B and Llama-3.1-8B config.json: hidden_size 4096, \
        num_hidden_layers 32, num_attention_heads 32, num_key_value_heads 8, intermediate_size 14336, vocab_size 128256";
    const LLAMA3_70B: &str = "meta-llama/Meta-Llama-3-70B, Llama-3.1-70B and Llama-3.3-70B-Instruct config.json: \
        hidden_size 8192, num_hidden_layers 80, num_attention_heads 64, num_key_value_heads 8, intermediate_size 28672, \
        vocab_size 128256";
    const QWEN2_7B: &str = "Qwen/Qwen2-7B and Qwen/Qwen2.5-7B config.json: hidden_size 3584, num_hidden_layers 28, \
        num_attention_heads 28, num_key_value_heads 4, intermediate_size 18944, vocab_size 152064";
    const QWEN2_72B: &str = "Qwen/Qwen2-72B and Qwen/Qwen2.5-72B config.json: hidden_size 8192, num_hidden_layers 80, \
        num_attention_heads 64, num_key_value_heads 8, intermediate_size 29568, vocab_size 152064";
    vec![
        entry(dense("Llama-2-7B", 32, 4096, 32, 32, 128, 11008, 32000, false), &["meta-llama/Llama-2-7b-hf"], LLAMA2_7B),
        entry(
            dense("Llama-2-13B", 40, 5120, 40, 40, 128, 13824, 32000, false),
            &["meta-llama/Llama-2-13b-hf"],
            "meta-llama/Llama-2-13b-hf config.json: hidden_size 5120, num_hidden_layers 40, num_attention_heads 40, \
             num_key_value_heads 40, intermediate_size 13824, vocab_size 32000",
        ),
        entry(
            dense("Llama-2-70B", 80, 8192, 64, 8, 128, 28672, 32000, false),
            &["meta-llama/Llama-2-70b-hf"],
            "meta-llama/Llama-2-70b-hf config.json: hidden_size 8192, num_hidden_layers 80, num_attention_heads 64, \
             num_key_value_heads 8, intermediate_size 28672, vocab_size 32000",
        ),
        entry(
            dense("LLaMA-7B", 32, 4096, 32, 32, 128, 11008, 32000, false),
            &["huggyllama/llama-7b"],
            "huggyllama/llama-7b config.json: hidden_size 4096, num_hidden_layers 32, num_attention_heads 32, \
             intermediate_size 11008, vocab_size 32000",
        ),
        entry(dense("Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 128256, false), &["meta-llama/Meta-Llama-3-8B"], LLAMA3_8B),
        entry(
            dense("Llama-3-70B", 80, 8192, 64, 8, 128, 28672, 128256, false),
            &["meta-llama/Meta-Llama-3-70B"],
            LLAMA3_70B,
        ),
        entry(dense("Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, false), &["meta-llama/Llama-3.1-8B"], LLAMA3_8B),
        entry(
            dense("Llama-3.1-70B", 80, 8192, 64, 8, 128, 28672, 128256, false),
            &["meta-llama/Llama-3.1-70B", "Llama-3.3-70B", "meta-llama/Llama-3.3-70B-Instruct"],
            LLAMA3_70B,
        ),
        entry(
            dense("Llama-3.1-405B", 126, 16384, 128, 8, 128, 53248, 128256, false),
            &["meta-llama/Llama-3.1-405B"],
            "meta-llama/Llama-3.1-405B config.json: hidden_size 16384, num_hidden_layers 126, num_attention_heads \
             128, num_key_value_heads 8, intermediate_size 53248, vocab_size 128256",
        ),
        entry(
            dense("Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, true),
            &["meta-llama/Llama-3.2-1B"],
            "meta-llama/Llama-3.2-1B config.json: hidden_size 2048, num_hidden_layers 16, num_attention_heads 32, \
             num_key_value_heads 8, head_dim 64, intermediate_size 8192, vocab_size 128256, tie_word_embeddings true",
        ),
        entry(
            dense("Llama-3.2-3B", 28, 3072, 24, 8, 128, 8192, 128256, true),
            &["meta-llama/Llama-3.2-3B"],
            "meta-llama/Llama-3.2-3B config.json: hidden_size 3072, num_hidden_layers 28, num_attention_heads 24, \
             num_key_value_heads 8, head_dim 128, intermediate_size 8192, vocab_size 128256, tie_word_embeddings true",
        ),
        entry(
            dense("Mistral-7B", 32, 4096, 32, 8, 128, 14336, 32000, false),
            &["mistralai/Mistral-7B-v0.1", "Mistral-7B-v0.1"],
            "mistralai/Mistral-7B-v0.1 config.json: hidden_size 4096, num_hidden_layers 32, num_attention_heads 32, \
             num_key_value_heads 8, intermediate_size 14336, vocab_size 32000",
        ),
        entry(
            moe(dense("Mixtral-8x7B", 32, 4096, 32, 8, 128, 14336, 32000, false), 8, 2, 14336, 0, 0),
            &["mistralai/Mixtral-8x7B-v0.1", "Mixtral-8x7B-v0.1"],
            "mistralai/Mixtral-8x7B-v0.1 config.json: hidden_size 4096, num_hidden_layers 32, num_attention_heads \
             32, num_key_value_heads 8, intermediate_size 14336, num_local_experts 8, num_experts_per_tok 2, \
             vocab_size 32000",
        ),
        entry(
            moe(dense("Mixtral-8x22B", 56, 6144, 48, 8, 128, 16384, 32000, false), 8, 2, 16384, 0, 0),
            &["mistralai/Mixtral-8x22B-v0.1", "Mixtral-8x22B-v0.1"],
            "mistralai/Mixtral-8x22B-v0.1 config.json: hidden_size 6144, num_hidden_layers 56, num_attention_heads \
             48, num_key_value_heads 8, intermediate_size 16384, num_local_experts 8, num_experts_per_tok 2, \
             vocab_size 32000",
        ),
        entry(
            dense("Qwen1.5-7B", 32, 4096, 32, 32, 128, 11008, 151936, false),
            &["Qwen/Qwen1.5-7B"],
            "Qwen/Qwen1.5-7B config.json: hidden_size 4096, num_hidden_layers 32, num_attention_heads 32, \
             num_key_value_heads 32, intermediate_size 11008, vocab_size 151936",
        ),
        entry(dense("Qwen2-7B", 28, 3584, 28, 4, 128, 18944, 152064, false), &["Qwen/Qwen2-7B"], QWEN2_7B),
        entry(dense("Qwen2-72B", 80, 8192, 64, 8, 128, 29568, 152064, false), &["Qwen/Qwen2-72B"], QWEN2_72B),
        entry(dense("Qwen2.5-7B", 28, 3584, 28, 4, 128, 18944, 152064, false), &["Qwen/Qwen2.5-7B"], QWEN2_7B),
        entry(
            dense("Qwen2.5-14B", 48, 5120, 40, 8, 128, 13824, 152064, false),
            &["Qwen/Qwen2.5-14B"],
            "Qwen/Qwen2.5-14B config.json: hidden_size 5120, num_hidden_layers 48, num_attention_heads 40, \
             num_key_value_heads 8, intermediate_size 13824, vocab_size 152064",
        ),
        entry(
            dense("Qwen2.5-32B", 64, 5120, 40, 8, 128, 27648, 152064, false),
            &["Qwen/Qwen2.5-32B"],
            "Qwen/Qwen2.5-32B config.json: hidden_size 5120, num_hidden_layers 64, num_attention_heads 40, \
             num_key_value_heads 8, intermediate_size 27648, vocab_size 152064",
        ),
        entry(dense("Qwen2.5-72B", 80, 8192, 64, 8, 128, 29568, 152064, false), &["Qwen/Qwen2.5-72B"], QWEN2_72B),
        entry(
            dense("Qwen3-8B", 36, 4096, 32, 8, 128, 12288, 151936, false),
            &["Qwen/Qwen3-8B"],
            "Qwen/Qwen3-8B config.json: hidden_size 4096, num_hidden_layers 36, num_attention_heads 32, \
             num_key_value_heads 8, head_dim 128, intermediate_size 12288, vocab_size 151936",
        ),
        entry(
            dense("Qwen3-14B", 40, 5120, 40, 8, 128, 17408, 151936, false),
            &["Qwen/Qwen3-14B"],
            "Qwen/Qwen3-14B config.json: hidden_size 5120, num_hidden_layers 40, num_attention_heads 40, \
             num_key_value_heads 8, head_dim 128, intermediate_size 17408, vocab_size 151936",
        ),
        entry(
            dense("Qwen3-32B", 64, 5120, 64, 8, 128, 25600, 151936, false),
            &["Qwen/Qwen3-32B", "nvidia/Qwen3-32B-NVFP4"],
            "Qwen/Qwen3-32B config.json: hidden_size 5120, num_hidden_layers 64, num_attention_heads 64, \
             num_key_value_heads 8, head_dim 128 (64·128 = 8192 ≠ hidden), intermediate_size 25600, vocab_size 151936",
        ),
        entry(
            moe(dense("Qwen3-30B-A3B", 48, 2048, 32, 4, 128, 6144, 151936, false), 128, 8, 768, 0, 0),
            &["Qwen/Qwen3-30B-A3B"],
            "Qwen/Qwen3-30B-A3B config.json: hidden_size 2048, num_hidden_layers 48, num_attention_heads 32, \
             num_key_value_heads 4, head_dim 128, num_experts 128, num_experts_per_tok 8, moe_intermediate_size 768, \
             decoder_sparse_step 1, vocab_size 151936",
        ),
        entry(
            moe(dense("Qwen3-235B-A22B", 94, 4096, 64, 4, 128, 12288, 151936, false), 128, 8, 1536, 0, 0),
            &["Qwen/Qwen3-235B-A22B"],
            "Qwen/Qwen3-235B-A22B config.json: hidden_size 4096, num_hidden_layers 94, num_attention_heads 64, \
             num_key_value_heads 4, head_dim 128, num_experts 128, num_experts_per_tok 8, moe_intermediate_size 1536, \
             vocab_size 151936",
        ),
        entry(
            ServingModel {
                mla: Some(DEEPSEEK_V3_MLA),
                mtp_layers: 1,
                ..node_limited(
                    moe(dense("DeepSeek-V3", 61, 7168, 128, 128, 192, 18432, 129280, false), 256, 8, 2048, 1, 3),
                    8,
                    4,
                )
            },
            &[
                "deepseek-ai/DeepSeek-V3",
                "DeepSeek-R1",
                "deepseek-ai/DeepSeek-R1",
                "DeepSeek-V3.1",
                "deepseek-ai/DeepSeek-V3.1",
                "nvidia/DeepSeek-R1-NVFP4",
                "nvidia/DeepSeek-V3.1-NVFP4",
            ],
            "deepseek-ai/DeepSeek-V3 config.json: hidden_size 7168, num_hidden_layers 61 (the multi-token-prediction \
             layer is not served), num_attention_heads 128, q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, \
             qk_rope_head_dim 64, v_head_dim 128, intermediate_size 18432, n_routed_experts 256, num_experts_per_tok 8, \
             moe_intermediate_size 2048, n_shared_experts 1, first_k_dense_replace 3, n_group 8, topk_group 4, \
             vocab_size 129280, num_nextn_predict_layers 1 (one MTP module, run only by speculative decoding); MLA approximated in serving (see MlaSpec)",
        ),
        entry(
            ServingModel {
                mla: Some(DEEPSEEK_V3_MLA),
                ..moe(dense("Kimi-K2.5", 61, 7168, 64, 64, 192, 18432, 163840, false), 384, 8, 2048, 1, 1)
            },
            &["moonshotai/Kimi-K2.5", "Kimi-K2", "moonshotai/Kimi-K2-Instruct"],
            "moonshotai/Kimi-K2.5 config.json (text model; as copied in ai-dynamo/aiconfigurator \
             model_configs/moonshotai--Kimi-K2.5_config.json): num_hidden_layers 61, hidden_size 7168, \
             num_attention_heads 64, q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, \
             v_head_dim 128, intermediate_size 18432, n_routed_experts 384, num_experts_per_tok 8, \
             moe_intermediate_size 2048, n_shared_experts 1, first_k_dense_replace 1, vocab_size 163840; the vision \
             tower is not served here; MLA approximated (see MlaSpec)",
        ),
        entry(
            ServingModel {
                mla: Some(MlaSpec {
                    q_lora_rank: 2048,
                    kv_lora_rank: 512,
                    qk_nope_head_dim: 192,
                    qk_rope_head_dim: 64,
                    v_head_dim: 256,
                }),
                dsa: Some(DsaIndexer { heads: 32, head_dim: 128, topk: 2048 }),
                ..moe(dense("GLM-5", 78, 6144, 64, 64, 256, 12288, 154880, false), 256, 8, 2048, 1, 3)
            },
            &["zai-org/GLM-5", "zhipuai/GLM-5", "zai-org/GLM-5-FP8"],
            "zai-org/GLM-5-FP8 config.json (as copied in ai-dynamo/aiconfigurator \
             model_configs/zai-org--GLM-5-FP8_config.json): num_hidden_layers 78, hidden_size 6144, \
             num_attention_heads 64, q_lora_rank 2048, kv_lora_rank 512, qk_nope_head_dim 192, qk_rope_head_dim 64, \
             v_head_dim 256, intermediate_size 12288, n_routed_experts 256, num_experts_per_tok 8, \
             moe_intermediate_size 2048, n_shared_experts 1, first_k_dense_replace 3, vocab_size 154880; its \
             DeepSeek sparse attention: index_n_heads 32, index_head_dim 128, index_topk 2048 (zai-org/GLM-5 \
             config.json; aiconfigurator's DSA_MODEL_DIMS for GlmMoeDsaForCausalLM), the indexer on every layer",
        ),
        entry(
            moe(dense("MiniMax-M2.5", 62, 3072, 48, 8, 128, 1536, 200064, false), 256, 8, 1536, 0, 0),
            &["MiniMaxAI/MiniMax-M2.5", "MiniMax-M2", "MiniMaxAI/MiniMax-M2"],
            "MiniMaxAI/MiniMax-M2.5 config.json (MiniMax-M2's architecture): num_hidden_layers 62, hidden_size \
             3072, num_attention_heads 48, num_key_value_heads 8, head_dim 128, num_local_experts 256, \
             num_experts_per_tok 8, intermediate_size 1536 (per expert; no shared expert), vocab_size 200064, \
             tie_word_embeddings false",
        ),
        entry(
            ServingModel {
                sliding_window: Some(SlidingWindow { window_tokens: 128, layers: 18 }),
                ..moe(dense("gpt-oss-120b", 36, 2880, 64, 8, 64, 2880, 201088, false), 128, 4, 2880, 0, 0)
            },
            &["openai/gpt-oss-120b"],
            "openai/gpt-oss-120b config.json: num_hidden_layers 36, hidden_size 2880, num_attention_heads 64, \
             num_key_value_heads 8, head_dim 64, num_local_experts 128, num_experts_per_tok 4, intermediate_size \
             2880, vocab_size 201088, sliding_window 128 with layer_types alternating sliding_attention / \
             full_attention (18 windowed layers: vLLM's OAIAttention.__init__, gpt_oss.py); the windowed layers' \
             smaller KV cache and the attention sinks are not modelled: every layer caches the whole context",
        ),
        entry(gpt3("GPT-3-125M", 12, 768, 12, 64), &[], "Brown et al. 2020, Table 2.1: GPT-3 Small"),
        entry(gpt3("GPT-3-350M", 24, 1024, 16, 64), &[], "Brown et al. 2020, Table 2.1: GPT-3 Medium"),
        entry(gpt3("GPT-3-760M", 24, 1536, 16, 96), &[], "Brown et al. 2020, Table 2.1: GPT-3 Large"),
        entry(gpt3("GPT-3-1.3B", 24, 2048, 24, 128), &[], "Brown et al. 2020, Table 2.1: GPT-3 XL (24 heads of 128)"),
        entry(gpt3("GPT-3-2.7B", 32, 2560, 32, 80), &[], "Brown et al. 2020, Table 2.1: GPT-3 2.7B"),
        entry(gpt3("GPT-3-6.7B", 32, 4096, 32, 128), &[], "Brown et al. 2020, Table 2.1: GPT-3 6.7B"),
        entry(gpt3("GPT-3-13B", 40, 5140, 40, 128), &[], "Brown et al. 2020, Table 2.1: GPT-3 13B (d_model 5140)"),
        entry(gpt3("GPT-3-175B", 96, 12288, 96, 128), &["GPT-3"], "Brown et al. 2020, Table 2.1: GPT-3 175B"),
    ]
}

/// The catalog model named `name` (case-insensitive; its name or a Hugging Face repository id).
pub fn lookup(name: &str) -> Option<&'static CatalogEntry> {
    let want = name.trim().to_ascii_lowercase();
    catalog()
        .iter()
        .find(|e| e.model.name.to_ascii_lowercase() == want || e.aliases.iter().any(|a| a.to_ascii_lowercase() == want))
}

/// Every catalog name, for error messages.
pub fn names() -> Vec<&'static str> {
    catalog().iter().map(|e| e.model.name.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_counts_match_the_published_sizes() {
        // Llama-3.1-70B: per layer QKV 8192·128·(64 + 16) = 83,886,080, output 64·128·8192 = 67,108,864, MLP
        // 3·8192·28672 = 704,643,072, norms 2·8192 = 16,384: 855,654,400; × 80 = 68,452,352,000; embedding and
        // head 2·128256·8192 = 2,101,346,304; final norm 8192: 70,553,706,496 (Hugging Face's count).
        let l70 = &lookup("llama-3.1-70b").unwrap().model;
        assert_eq!(l70.params_total(), 70_553_706_496.0);
        assert_eq!(l70.params_active(), l70.params_total());
        // Mixtral-8x7B: attention 4096·128·48 + 32·128·4096 = 41,943,040; 8 experts of 3·4096·14336 =
        // 176,160,768; router 4096·8 = 32,768; norms 8192. Total per layer 1,451,270,144, × 32 = 46,440,644,608,
        // + embedding and head 262,144,000 + final norm 4096 = 46,702,792,704 (≈ 46.7 B, Mistral's figure).
        // Active: two experts, 394,305,536 per layer, × 32 + 262,148,096 = 12,879,925,248 (≈ 12.9 B).
        let mx = &lookup("mistralai/Mixtral-8x7B-v0.1").unwrap().model;
        assert_eq!(mx.params_total(), 46_702_792_704.0);
        assert_eq!(mx.params_active(), 12_879_925_248.0);
        // Qwen3-30B-A3B ≈ 30.5 B total, 3.3 B active (Qwen's model card).
        let q = &lookup("Qwen3-30B-A3B").unwrap().model;
        assert!((q.params_total() / 1e9 - 30.5).abs() < 0.2, "{}", q.params_total());
        assert!((q.params_active() / 1e9 - 3.3).abs() < 0.1, "{}", q.params_active());
        // DeepSeek-V3: 671 B without its 14 B multi-token-prediction module (685 B on Hugging Face); 37 B active
        // (DeepSeek-V3 technical report).
        let ds = &lookup("DeepSeek-V3").unwrap().model;
        assert!((ds.params_total() / 1e9 - 671.0).abs() < 1.0, "{}", ds.params_total());
        assert!((ds.params_active() / 1e9 - 37.0).abs() < 2.0, "{}", ds.params_active());
        // Kimi-K2: "1 T total, 32 B activated" (Moonshot's model card): 1,026.4 B and 32.9 B here.
        let k = &lookup("moonshotai/Kimi-K2.5").unwrap().model;
        assert!((k.params_total() / 1e12 - 1.0).abs() < 0.05, "{}", k.params_total());
        assert!((k.params_active() / 1e9 - 32.0).abs() < 1.5, "{}", k.params_active());
        // gpt-oss-120b: 116.8 B total (OpenAI's model card: 116.83 B with biases and sinks); 5.13 B active there
        // counts the unembedding but not the 201,088·2,880 = 0.58 B input embedding, which perfcast counts: 5.71 B.
        let o = &lookup("openai/gpt-oss-120b").unwrap().model;
        assert!((o.params_total() / 1e9 - 116.8).abs() < 0.2, "{}", o.params_total());
        assert!((o.params_active() / 1e9 - (5.13 + 0.58)).abs() < 0.05, "{}", o.params_active());
        // MiniMax-M2: "230 B total, 10 B active" (MiniMax's model card, without the 1.23 B of embedding and head):
        // 228.7 B and 11.0 B here.
        let mm = &lookup("MiniMaxAI/MiniMax-M2.5").unwrap().model;
        assert!((mm.params_total() / 1e9 - 229.0).abs() < 2.0, "{}", mm.params_total());
        assert!((mm.params_active() / 1e9 - 1.23 - 10.0).abs() < 0.3, "{}", mm.params_active());
        // GPT-3 175B: 12·96·12288² (biases and norms aside) + 50257·12288 ≈ 174.6 B.
        let g = &lookup("GPT-3-175B").unwrap().model;
        assert!((g.params_total() / 1e9 - 174.6).abs() < 0.5, "{}", g.params_total());
    }

    #[test]
    fn every_entry_is_consistent_and_names_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for e in catalog() {
            let m = &e.model;
            assert!(m.heads % m.kv_heads == 0, "{}", m.name);
            assert!(seen.insert(m.name.to_ascii_lowercase()), "duplicate {}", m.name);
            for a in e.aliases {
                assert!(seen.insert(a.to_ascii_lowercase()), "duplicate alias {a}");
            }
            assert!(!e.source.is_empty());
        }
        assert!(lookup("no-such-model").is_none());
    }
}

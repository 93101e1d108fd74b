//! Memory of one GPU of a serving instance (the fullest pipeline stage): weights, activation workspace, and the
//! KV cache that fills the rest — its capacity in tokens and how many requests fit at once.
//!
//! - **Weights** (MODELS.md §5): per layer the attention projections split over tp (key/value heads replicated
//!   when tp > g; MLA's down-projections replicated), the dense MLP's 3·d·f/t (2·d·f/t with GeLU), an MoE layer's
//!   E·3·d·F/t experts (E/ep experts of F/(t/ep) columns each) and shared experts, in the weights' precision; the
//!   router d·E, the two norms, the embedding and LM head (V padded to 64, split over tp) in 16 bits. The fullest
//!   stage holds ⌈N/pp⌉ layers (MoE ones first when the model has them) plus the embedding and head it owns.
//! - **Activation workspace** [rec] (what vLLM's profiling run measures): one step of `max_num_batched_tokens`
//!   tokens through the widest intermediate, B_t·(2·d + 3·w)·e (residual and normed input, gate+up and activated
//!   output of width w = the largest of f/t, K·F/(t/ep) and the QKV width); the sampler's fp32 logits for
//!   `max_num_seqs` sequences, S·V·4 B; and 1 GiB of non-tensor memory (CUDA graphs, NCCL and custom all-reduce
//!   buffers, cuBLAS workspaces; training's allowance).
//! - **KV cache** = gpu_memory_utilization·HBM − weights − workspace (TensorRT-LLM: its fraction of HBM −
//!   weights − workspace), in whole blocks of 16 tokens (vLLM; SGLang pages of 1, TensorRT-LLM blocks of 32); per
//!   token per GPU 2·⌈N/pp⌉·g_t·D·e_kv bytes (MLA: ⌈N/pp⌉·(kv_r + D_rope)·e_kv). **Max concurrency** = blocks /
//!   blocks per request of L + O tokens (× tp with data-parallel attention: each rank caches its own requests,
//!   with all g key/value heads, and holds the attention and dense weights whole).

use serde::Serialize;
use utoipa::ToSchema;

use super::request::Engine;
use super::step::vocab_per_gpu;
use super::validate::ServingConfig;
use crate::hw::GpuSpec;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Non-tensor memory every GPU of an instance keeps (CUDA graphs, communication buffers, workspaces), bytes.
pub const NON_TENSOR_BYTES: f64 = GIB;

/// Memory of one GPU of the fullest stage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct ServingMemory {
    /// Weights on one GPU, GiB.
    pub weights_gib: f64,
    /// Activation workspace and non-tensor memory, GiB.
    pub workspace_gib: f64,
    /// KV-cache bytes per token over the whole model (2·N·g·D·e_kv).
    pub kv_bytes_per_token: f64,
    /// KV-cache bytes per token on one GPU (its layers and key/value heads).
    pub kv_bytes_per_token_per_gpu: f64,
    /// KV cache on one GPU, GiB.
    pub kv_cache_gib: f64,
    /// Tokens the KV cache holds (whole blocks).
    pub kv_capacity_tokens: u64,
    /// Requests of input + output tokens that fit in the KV cache at once.
    pub max_concurrency: u64,
    /// Tokens per KV-cache block.
    pub block_tokens: u32,
    /// The GPU's memory, GiB.
    pub capacity_gib: f64,
    /// The weights and workspace leave room for at least one whole request's KV cache.
    pub fits: bool,
}

/// Bytes per layer of DeepSeek sparse attention's indexer weights on one GPU (0 without DSA), replicated on every
/// GPU whatever the tensor-parallel split (SGLang's `Indexer`, `python/sglang/srt/layers/attention/nsa/
/// nsa_indexer.py`, holds them as `ReplicatedLinear`): `wq_b` [q_r → H·D_i] and `wk` [d → D_i] in the weights'
/// precision (the checkpoint's fp8 linear layers), `weights_proj` [d → H] and `k_norm`'s LayerNorm weight and bias
/// (2·D_i) in 16 bits. GLM-5 (q_r 2,048, d 6,144, 32 heads of 128) in fp8: 2,048·4,096 + 6,144·128 = 9,175,040 B
/// of fp8 weights and (6,144·32 + 256)·2 = 393,728 B of 16-bit ones, 9,568,768 B per layer.
fn indexer_bytes(cfg: &ServingConfig) -> f64 {
    let m = &cfg.model;
    let Some(ix) = &m.dsa else { return 0.0 };
    let (h, di, d) = (ix.heads as f64, ix.head_dim as f64, m.hidden as f64);
    let q_in = m.mla.as_ref().map_or(d, |x| if x.q_lora_rank > 0 { x.q_lora_rank as f64 } else { d });
    (q_in * h * di + d * di) * cfg.precision.bytes() + (d * h + 2.0 * di) * cfg.activation_precision.bytes()
}

/// Bytes of the weights on one GPU of the fullest stage ([`ServingMemory::weights_gib`] in bytes).
pub fn weights_bytes(cfg: &ServingConfig) -> f64 {
    let m = &cfg.model;
    // Attention, dense layers and the vocabulary split over attn_tp (tp, or 1 with data-parallel attention); the
    // experts always over tp (E/ep experts of F/(tp/ep) columns).
    let (tp, d) = (cfg.attn_tp() as f64, m.hidden as f64);
    let experts_tp = cfg.tp as f64;
    let (we, ae) = (cfg.precision.bytes(), cfg.activation_precision.bytes());
    let (a, g, dh) = (m.heads as f64 / tp, cfg.kv_heads_per_gpu() as f64, m.head_dim as f64);
    let attention = match &m.mla {
        None => d * dh * (a + 2.0 * g) + a * dh * d,
        Some(x) => {
            let (qr, kvr) = (x.q_lora_rank as f64, x.kv_lora_rank as f64);
            let (nope, rope, v) = (x.qk_nope_head_dim as f64, x.qk_rope_head_dim as f64, x.v_head_dim as f64);
            let q = if x.q_lora_rank > 0 { d * qr + qr * a * (nope + rope) } else { d * a * (nope + rope) };
            q + d * (kvr + rope) + kvr * a * (nope + v) + a * v * d
        }
    };
    let latent_norms = m.mla.as_ref().map_or(0.0, |x| (x.q_lora_rank + x.kv_lora_rank) as f64);
    let common = attention * we + (2.0 * d + latent_norms) * ae + indexer_bytes(cfg);
    let dense = m.mlp_params(m.ffn_hidden) / tp * we;
    let moe = m.moe.as_ref().map_or(0.0, |x| {
        x.experts as f64 * m.mlp_params(x.expert_ffn_hidden) / experts_tp * we
            + m.mlp_params(x.shared_ffn_hidden) / tp * we
            + d * x.experts as f64 * ae
    });
    let stage = cfg.layers_per_stage();
    let moe_layers = m.moe_layers().min(stage);
    let layers = stage as f64 * common + (stage - moe_layers) as f64 * dense + moe_layers as f64 * moe;
    let table = vocab_per_gpu(m.vocab, cfg.attn_tp()) as f64 * d * ae;
    let ends = if cfg.pp == 1 {
        if m.tied_embeddings {
            table + d * ae
        } else {
            2.0 * table + d * ae
        }
    } else {
        table + d * ae
    };
    layers + ends
}

/// Bytes of weights one GPU of the fullest stage reads in one decode step of `batch` sequences: every weight but
/// the embedding table (only `batch` rows of it are read), an MoE layer's routed experts only as far as the step's
/// batch·K routed copies can reach them (min(E, batch·K) of E). Divided by the HBM bandwidth it bounds a decode
/// step from below.
pub fn decode_weight_bytes(cfg: &ServingConfig, batch: u32) -> f64 {
    let m = &cfg.model;
    let table = vocab_per_gpu(m.vocab, cfg.attn_tp()) as f64 * m.hidden as f64 * cfg.activation_precision.bytes();
    let tied_once = cfg.pp == 1 && m.tied_embeddings;
    let mut bytes = weights_bytes(cfg) - if tied_once { 0.0 } else { table };
    if let Some(x) = &m.moe {
        let touched = (x.experts as f64).min(batch as f64 * x.top_k as f64);
        let routed = x.experts as f64 * m.mlp_params(x.expert_ffn_hidden) / cfg.tp as f64 * cfg.precision.bytes();
        let layers = m.moe_layers().min(cfg.layers_per_stage()) as f64;
        bytes -= layers * routed * (1.0 - touched / x.experts as f64);
    }
    bytes
}

/// Activation workspace plus [`NON_TENSOR_BYTES`] on one GPU, bytes (see the module doc).
pub fn workspace_bytes(cfg: &ServingConfig) -> f64 {
    let m = &cfg.model;
    let tp = cfg.attn_tp() as f64;
    let qkv = (m.heads as f64 / tp + 2.0 * cfg.kv_heads_per_gpu() as f64) * m.head_dim as f64;
    let expert_tp = cfg.tp as f64 / cfg.ep as f64;
    let moe_w = m.moe.as_ref().map_or(0.0, |x| x.top_k as f64 * x.expert_ffn_hidden as f64 / expert_tp);
    let w = (m.ffn_hidden as f64 / tp).max(moe_w).max(qkv);
    let s = &cfg.settings;
    let step = s.max_num_batched_tokens as f64 * (2.0 * m.hidden as f64 + 3.0 * w) * cfg.activation_precision.bytes();
    let logits = s.max_num_seqs as f64 * m.vocab as f64 * 4.0;
    step + logits + NON_TENSOR_BYTES
}

/// Tokens per KV-cache block of `engine` (vLLM 16, SGLang 1, TensorRT-LLM 32).
pub fn block_tokens(engine: Engine) -> u32 {
    match engine {
        Engine::Vllm => 16,
        Engine::Sglang => 1,
        Engine::Trtllm => 32,
    }
}

/// The memory of one GPU of `cfg` on `gpu` (see the module doc).
pub fn serving_memory(cfg: &ServingConfig, gpu: &GpuSpec) -> ServingMemory {
    let m = &cfg.model;
    let e_kv = cfg.kv_cache_dtype.bytes();
    let kv_layer_gpu = match &m.mla {
        None => 2.0 * cfg.kv_heads_per_gpu() as f64 * m.head_dim as f64,
        Some(_) => m.kv_elems_per_token_layer(),
    };
    // DeepSeek sparse attention's index keys are cached beside the latent, on every GPU (the indexer is
    // replicated), in their own fp8 format.
    let index = m.dsa.map_or(0.0, |x| x.key_bytes());
    let per_gpu = cfg.layers_per_stage() as f64 * (kv_layer_gpu * e_kv + index);
    let weights = weights_bytes(cfg);
    let workspace = workspace_bytes(cfg);
    let hbm = gpu.memory_bytes();
    let u = cfg.settings.gpu_memory_utilization;
    let kv = match cfg.engine {
        Engine::Trtllm => u * (hbm - weights - workspace),
        _ => u * hbm - weights - workspace,
    }
    .max(0.0);
    let block = block_tokens(cfg.engine);
    let blocks = (kv / (per_gpu * block as f64)).floor() as u64;
    let per_request = (cfg.input_tokens as u64 + cfg.output_tokens as u64).div_ceil(block as u64).max(1);
    // With data-parallel attention every rank keeps its own requests' KV cache.
    let max_concurrency = blocks / per_request * cfg.dp() as u64;
    ServingMemory {
        weights_gib: weights / GIB,
        workspace_gib: workspace / GIB,
        kv_bytes_per_token: m.kv_bytes_per_token(e_kv),
        kv_bytes_per_token_per_gpu: per_gpu,
        kv_cache_gib: kv / GIB,
        kv_capacity_tokens: blocks * block as u64,
        max_concurrency,
        block_tokens: block,
        capacity_gib: hbm / GIB,
        fits: max_concurrency >= 1,
    }
}

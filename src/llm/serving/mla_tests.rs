//! Hand-counted shapes of MLA's decode attention (DeepSeek-R1) with and without data-parallel attention
//! ([`super::step`]'s `mla_decode`): the local query heads share one latent key/value head, read once, so the
//! grouped-attention model sees at most the 32 heads its kernels run in one pass.

use serde_json::json;

use super::step::{stage_ops, StageRole, StepLoad, StepOp};
use super::*;
use crate::hw::{presets, Precision, System};
use crate::llm::operators::{OpName, Work};
use crate::op::OpClass;

fn system() -> System {
    presets().into_iter().find(|p| p.name == "dgx-b200").unwrap().resolve().unwrap()
}

fn config(parallelism: serde_json::Value) -> ServingConfig {
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-b200",
        "model": "deepseek-ai/DeepSeek-R1", "engine": "trtllm", "precision": "fp8", "parallelism": parallelism,
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 64}}))
    .unwrap();
    validate(&req, &system()).unwrap()
}

/// The decode attention operators of a step of `seqs` sequences at context 1,536: (class, dtype, dims, calls).
fn decode_attention(cfg: &ServingConfig, seqs: u32) -> Vec<(OpClass, Precision, Vec<u64>, f64)> {
    let load = StepLoad {
        decode_seqs: seqs,
        decode_context: 1536,
        prefill_tokens: 0,
        prompt_len: 1024,
        sampled: seqs,
        graph_pad_tokens: 0,
    };
    let (dense, moe) = (cfg.model.layers - cfg.model.moe_layers(), cfg.model.moe_layers());
    let ops: Vec<StepOp> = stage_ops(cfg, &system(), &load, StageRole { first: true, last: true }, dense, moe);
    ops.into_iter()
        .filter(|o| o.op.name == OpName::AttentionDecode)
        .map(|o| match o.op.work {
            Work::Compute { shape, dtype } => (shape.class, dtype, o.op.features.clone(), o.per_step),
            _ => panic!("attention is a computation"),
        })
        .collect()
}

#[test]
fn mla_decode_reads_the_latent_cache_as_one_key_value_head() {
    // DeepSeek-R1: 128 query heads, kv_lora_rank 512 + qk_rope_head_dim 64 = 576 latent dims (one key/value head
    // of 576 / 2 = 288 dims: its K and V bytes are the latent's), 61 layers; TensorRT-LLM's fp8 KV cache.
    // tp 8: 128 / 8 = 16 heads per GPU, below the one-pass limit of 32; 64 sequences at 1,536 cached tokens.
    let cfg = config(json!({"tp": 8}));
    assert_eq!(cfg.kv_cache_dtype, Precision::Fp8);
    assert_eq!(
        decode_attention(&cfg, 64),
        vec![(OpClass::AttentionDecode, Precision::Fp8, vec![64, 1536, 16, 1, 288], 61.0)]
    );
    // tp 4: 32 heads, exactly the limit.
    let cfg = config(json!({"tp": 4}));
    assert_eq!(decode_attention(&cfg, 64)[0].2, vec![64, 1536, 32, 1, 288]);
}

#[test]
fn data_parallel_attention_does_not_stream_the_cache_once_per_head() {
    // TensorRT-LLM's `enable_attention_dp` over 8 GPUs (perfcast tp 8, attention_dp_size 8): each rank runs all
    // 128 heads for its 64 / 8 = 8 sequences. The MLA kernel reads the 1,536 · 576 fp8 latent bytes of a sequence
    // once for the 128 heads; the grouped-attention model is asked for min(128, 32) = 32 heads.
    let cfg = config(json!({"tp": 8, "ep": 8, "attention_dp_size": 8}));
    assert_eq!(
        decode_attention(&cfg, 8),
        vec![(OpClass::AttentionDecode, Precision::Fp8, vec![8, 1536, 32, 1, 288], 61.0)]
    );
}

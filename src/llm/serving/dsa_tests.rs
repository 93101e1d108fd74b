//! Hand-counted operators of DeepSeek sparse attention's indexer (GLM-5) in a decode and a prefill step, its
//! capped decode attention and its index keys in the KV cache ([`super::model::DsaIndexer`]).

use serde_json::json;

use super::step::{stage_ops, StageRole, StepLoad, StepOp};
use super::*;
use crate::hw::{presets, System};
use crate::llm::operators::OpName;
use crate::op::OpClass;

fn system() -> System {
    presets().into_iter().find(|p| p.name == "dgx-b200").unwrap().resolve().unwrap()
}

fn config(tp: u32) -> ServingConfig {
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-b200", "model": "zhipuai/GLM-5",
        "engine": "sglang", "precision": "fp8", "parallelism": {"tp": tp},
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 4}}))
    .unwrap();
    validate(&req, &system()).unwrap()
}

fn ops(cfg: &ServingConfig, load: &StepLoad) -> Vec<StepOp> {
    let (dense, moe) = (cfg.model.layers - cfg.model.moe_layers(), cfg.model.moe_layers());
    stage_ops(cfg, &system(), load, StageRole { first: true, last: true }, dense, moe)
}

fn calls(ops: &[StepOp], name: OpName) -> f64 {
    ops.iter().filter(|o| o.op.name == name).map(|o| o.per_step).sum()
}

/// The operator's dims as the step gave them (its features).
fn dims(o: &StepOp) -> Vec<u64> {
    o.op.features.clone()
}

const DECODE4: StepLoad = StepLoad::decode(4, 1536, 1024);

#[test]
fn glm5_runs_its_indexer_on_every_layer_whatever_the_tensor_parallel_split() {
    // GLM-5: 78 layers, every one with an indexer of 32 heads × 128 dims (q latent 2,048, hidden 6,144).
    let cfg = config(8);
    let ix = cfg.model.dsa.expect("GLM-5 has DSA");
    assert_eq!((ix.heads, ix.head_dim, ix.topk), (32, 128, 2048));
    let o = ops(&cfg, &DECODE4);
    // Per layer: 2 projections of their own (wq_b, weights_proj; wk rides in MLA's fused down-projection, whose
    // N grows from 2,048 + 512 + 64 = 2,624 to 2,752); 11 small kernels (k_norm, rotary, 3 on the query, 4 on the
    // key, the head gates, top-k); 1 logits kernel. × 78 layers: 156, 858, 78.
    assert_eq!(calls(&o, OpName::DsaIndexerProj), 156.0);
    let down = o.iter().find(|o| o.op.name == OpName::Linear1).unwrap();
    assert_eq!(dims(down), vec![1, 4, 2752, 6144]);
    assert_eq!(calls(&o, OpName::DsaIndexerElementwise), 858.0);
    assert_eq!(calls(&o, OpName::DsaIndexerLogits), 78.0);
    // ReplicatedLinear: wq_b is [4 tokens, 2,048 → 32·128 = 4,096] at tp 8 as at tp 1.
    let wq_b = |c: &ServingConfig| {
        ops(c, &DECODE4).into_iter().find(|o| o.op.name == OpName::DsaIndexerProj).map(|o| dims(&o)).unwrap()
    };
    assert_eq!(wq_b(&cfg), vec![1, 4, 4096, 2048]);
    assert_eq!(wq_b(&config(1)), wq_b(&cfg));
    // The logits: per sequence (4) the 32 query heads against 1,536 cached index keys of 128 fp8 dims.
    let logits = o.iter().find(|o| o.op.name == OpName::DsaIndexerLogits).unwrap();
    assert_eq!(dims(logits), vec![4, 32, 1536, 128]);
    match logits.op.work {
        crate::llm::operators::Work::Compute { shape, dtype } => {
            assert_eq!((shape.class, dtype), (OpClass::Bmm, crate::hw::Precision::Fp8))
        }
        _ => panic!("a computation"),
    }
}

#[test]
fn sparse_decode_attention_reads_at_most_topk_tokens() {
    let cfg = config(8);
    let attn = |c: u32| {
        let load = StepLoad { decode_context: c, ..DECODE4 };
        let o = ops(&cfg, &load);
        dims(o.iter().find(|o| o.op.name == OpName::AttentionDecode).unwrap())[1]
    };
    // 1,536 ≤ 2,048 cached tokens: all of them; 8,192: the indexer's 2,048.
    assert_eq!((attn(1536), attn(8192)), (1536, 2048));
    // The indexer's logits still score all 8,192.
    let o = ops(&cfg, &StepLoad { decode_context: 8192, ..DECODE4 });
    assert_eq!(dims(o.iter().find(|o| o.op.name == OpName::DsaIndexerLogits).unwrap())[2], 8192);
}

#[test]
fn prefill_logits_run_only_for_prompts_longer_than_topk() {
    let cfg = config(8);
    // A whole 1,024-token prompt (≤ 2,048): SGLang skips the logits and top-k; the projections and small kernels
    // run: 2·78 and (1 + 1 + 3 + 4 + 1)·78 = 780.
    let short = StepLoad {
        decode_seqs: 0,
        decode_context: 0,
        prefill_tokens: 1024,
        prompt_len: 1024,
        sampled: 1,
        graph_pad_tokens: 0,
        draft_tokens: 0,
    };
    let o = ops(&cfg, &short);
    assert_eq!((calls(&o, OpName::DsaIndexerLogits), calls(&o, OpName::DsaIndexerElementwise)), (0.0, 780.0));
    // A 4,096-token chunk of an 8,192-token prompt: logits over the prompt (8,192·32 = 262,144 query rows
    // against 4,096 keys on average) charged by its share 4,096 / 8,192 = 0.5 per layer, 39 per step; top-k over
    // [4,096 rows, 4,096 columns] once per layer.
    let long = StepLoad { prefill_tokens: 4096, prompt_len: 8192, ..short };
    let o = ops(&cfg, &long);
    assert_eq!(calls(&o, OpName::DsaIndexerLogits), 39.0);
    let logits = o.iter().find(|o| o.op.name == OpName::DsaIndexerLogits).unwrap();
    assert_eq!(dims(logits), vec![1, 262_144, 4096, 128]);
    assert!(o
        .iter()
        .any(|o| o.op.name == OpName::DsaIndexerElementwise && dims(o) == vec![4096, 4096, 1] && o.per_step == 78.0));
}

#[test]
fn index_keys_take_132_bytes_per_token_and_layer() {
    // GLM-5: 78 layers of the 512 + 64 = 576-element latent and a 128-dim fp8 index key with one fp32 scale
    // (132 B). fp8 cache: 78·(576 + 132) = 55,224 B per token; bf16: 78·(1,152 + 132) = 100,152 B.
    let m = &config(8).model;
    assert_eq!(m.kv_bytes_per_token(1.0), 55_224.0);
    assert_eq!(m.kv_bytes_per_token(2.0), 100_152.0);
    // Per GPU the same (the latent and the index keys are on every GPU), so the memory model's capacity uses it.
    let mem = memory::serving_memory(&config(8), &system().gpu);
    assert_eq!(mem.kv_bytes_per_token_per_gpu, 100_152.0);
    // A dense model's is unchanged: Llama-3.1-70B bf16 2·80·8·128·2 = 327,680 B.
    assert_eq!(catalog::lookup("Llama-3.1-70B").unwrap().model.kv_bytes_per_token(2.0), 327_680.0);
}

#[test]
fn a_hugging_face_config_with_index_keys_gives_the_indexer() {
    // zai-org/GLM-5's config.json keys that the parse reads (abridged).
    let glm5 = json!({"hidden_size": 6144, "num_hidden_layers": 78, "num_attention_heads": 64,
        "num_key_value_heads": 64, "q_lora_rank": 2048, "kv_lora_rank": 512, "qk_nope_head_dim": 192,
        "qk_rope_head_dim": 64, "v_head_dim": 256, "intermediate_size": 12288, "moe_intermediate_size": 2048,
        "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1, "first_k_dense_replace": 3,
        "vocab_size": 154880, "tie_word_embeddings": false, "index_n_heads": 32, "index_head_dim": 128,
        "index_topk": 2048});
    let m = hf::parse(&glm5, Some("GLM-5")).unwrap();
    assert_eq!(m, catalog::lookup("GLM-5").unwrap().model);
    // GLM-5.2 shares one indexer over 4 layers: refused, naming the key.
    let mut shared = glm5.clone();
    shared["index_topk_freq"] = json!(4);
    assert_eq!(hf::parse(&shared, None).unwrap_err().field, "model.hf_config.index_topk_freq");
    // An indexer without MLA: refused.
    let mut dense = glm5;
    dense.as_object_mut().unwrap().remove("kv_lora_rank");
    assert_eq!(hf::parse(&dense, None).unwrap_err().field, "model.hf_config.index_topk");
}

#[test]
fn glm5_indexer_weights_are_replicated_on_every_gpu() {
    // Per layer, by hand (GLM-5: q latent 2,048, hidden 6,144, 32 indexer heads of 128 dims; fp8 weights, 16-bit
    // activations): wq_b 2,048 × 4,096 + wk 6,144 × 128 = 9,175,040 fp8 bytes; weights_proj 6,144 × 32 = 196,608
    // and k_norm's weight and bias 2 × 128 in 16 bits, (196,608 + 256) × 2 = 393,728 bytes; 9,568,768 per layer,
    // × 78 layers = 746,363,904 bytes on every GPU, at tp 8 as at tp 4.
    for tp in [4, 8] {
        let cfg = config(tp);
        let mut dense_attention = cfg.clone();
        dense_attention.model.dsa = None;
        let extra = super::memory::weights_bytes(&cfg) - super::memory::weights_bytes(&dense_attention);
        assert_eq!(extra, 746_363_904.0, "tp {tp}");
    }
}

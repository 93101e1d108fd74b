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
        draft_tokens: 0,
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

/// The operators of one step of DeepSeek-R1 fp8 at tp 8 (fp8 KV cache) under `engine` with `load`, every layer.
fn step_ops(engine: &str, load: &StepLoad) -> Vec<StepOp> {
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-b200",
        "model": "deepseek-ai/DeepSeek-R1", "engine": engine, "precision": "fp8", "kv_cache_dtype": "fp8",
        "parallelism": {"tp": 8}, "workload": {"input_tokens": 8192, "output_tokens": 1024, "concurrency": 4}}))
    .unwrap();
    let cfg = validate(&req, &system()).unwrap();
    let (dense, moe) = (cfg.model.layers - cfg.model.moe_layers(), cfg.model.moe_layers());
    stage_ops(&cfg, &system(), load, StageRole { first: true, last: true }, dense, moe)
}

/// (class, dtype, dims, calls per step) of the operators named `name`.
fn named(ops: &[StepOp], name: OpName) -> Vec<(OpClass, Precision, Vec<u64>, f64)> {
    ops.iter()
        .filter(|o| o.op.name == name)
        .map(|o| match o.op.work {
            Work::Compute { shape, dtype } => (shape.class, dtype, o.op.features.clone(), o.per_step),
            _ => panic!("{name:?} is a computation"),
        })
        .collect()
}

const PREFILL_8K: StepLoad = StepLoad {
    decode_seqs: 0,
    decode_context: 0,
    prefill_tokens: 8192,
    prompt_len: 8192,
    sampled: 1,
    graph_pad_tokens: 0,
    draft_tokens: 0,
};

#[test]
fn every_engine_normalizes_both_latents_of_every_token_in_every_layer() {
    // DeepSeek-R1: q_lora_rank 1,536, kv_lora_rank 512, 61 layers. q_a_layernorm [T, 1536] and kv_a_layernorm
    // [T, 512] per layer, bf16 activations: a prefill of 8,192 tokens, and a decode step of 64 sequences.
    let norms = |t: u64| {
        vec![
            (OpClass::RmsNorm, Precision::Bf16, vec![t, 1536], 61.0),
            (OpClass::RmsNorm, Precision::Bf16, vec![t, 512], 61.0),
        ]
    };
    let decode = StepLoad::decode(64, 1536, 1024);
    for engine in ["sglang", "trtllm", "vllm"] {
        assert_eq!(named(&step_ops(engine, &PREFILL_8K), OpName::MlaNorm), norms(8192), "{engine}");
        assert_eq!(named(&step_ops(engine, &decode), OpName::MlaNorm), norms(64), "{engine}");
        // A decode step runs the absorbed path: no key assembly, no separate cache write.
        assert!(named(&step_ops(engine, &decode), OpName::MlaPrefillElementwise).is_empty(), "{engine}");
    }
}

#[test]
fn sglangs_unabsorbed_prefill_assembles_the_key_and_writes_the_latent_cache() {
    // tp 8: 128 / 8 = 16 local heads; D_nope 128, D_rope 64, kv_r 512; P = 8,192 prompt tokens, 61 layers.
    // Key assembly: width 16·128 + 16·64/2 = 2,048 + 512 = 2,560 (its 2·width·2 B per token = the read of k_nope,
    // 16·128·2 B, plus the write of k, 16·192·2 B: 4,096 + 6,144 = 10,240 = 2·2,560·2); the latent's copy [P, 512];
    // the KV-cache write of the [P, 512 + 64] latent row into the fp8 cache.
    let ops = step_ops("sglang", &PREFILL_8K);
    assert_eq!(
        named(&ops, OpName::MlaPrefillElementwise),
        vec![
            (OpClass::Elementwise, Precision::Bf16, vec![8192, 2560, 1], 61.0),
            (OpClass::Elementwise, Precision::Bf16, vec![8192, 512, 1], 61.0),
            (OpClass::Quantize, Precision::Fp8, vec![8192, 576], 61.0),
        ]
    );
    // Their DRAM traffic on the roofline: key 2 · 8,192 · 2,560 · 2 B = 83,886,080 B; latent copy
    // 2 · 8,192 · 512 · 2 = 16,777,216 B; cache write 8,192 · 576 · (2 + 1) = 14,155,776 B.
    let gpu = system().gpu;
    let bytes = |class, dtype, dims: &[u64]| {
        crate::cost::roofline::estimate(&crate::op::OpShape::new(class, crate::op::Phase::Fwd, dims), dtype, &gpu)
            .unwrap()
            .bytes
    };
    assert_eq!(bytes(OpClass::Elementwise, Precision::Bf16, &[8192, 2560, 1]), 83_886_080.0);
    assert_eq!(bytes(OpClass::Elementwise, Precision::Bf16, &[8192, 512, 1]), 16_777_216.0);
    assert_eq!(bytes(OpClass::Quantize, Precision::Fp8, &[8192, 576]), 14_155_776.0);
}

#[test]
fn tensorrt_llm_copies_k_nope_and_leaves_rope_and_cache_to_its_attention_op() {
    // forward_context_default: k_nope [P, 16, 128] copied into k; the rope half and the latent cache are the fused
    // attention op's. vLLM assembles its key inside the attention custom op: nothing here.
    assert_eq!(
        named(&step_ops("trtllm", &PREFILL_8K), OpName::MlaPrefillElementwise),
        vec![(OpClass::Elementwise, Precision::Bf16, vec![8192, 2048, 1], 61.0)]
    );
    assert!(named(&step_ops("vllm", &PREFILL_8K), OpName::MlaPrefillElementwise).is_empty());
}

#[test]
fn mlas_prefill_copies_cost_the_gpu_and_no_host_launch_of_their_own() {
    // `python_kernel_us` covers the element-wise kernels an operator list folds into its neighbours: a 20.5 µs
    // copy charges 20.5 µs of GPU time and 0 launches; an RMSNorm of MLA's latent charges its time and 1 launch.
    use super::fusion::fused_charge;
    assert_eq!(fused_charge(OpName::MlaPrefillElementwise, 20.5, 1, 7.4), (20.5, 0));
    assert_eq!(fused_charge(OpName::MlaNorm, 15.3, 1, 7.4), (15.3, 1));
}

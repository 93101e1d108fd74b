//! Hand-computed memory of NVFP4 weights and fp8 KV caches, the engines' KV-cache defaults, and the refusals.

use serde_json::json;

use super::request::ServingPrecision;
use super::*;
use crate::hw::{presets, Precision, System};

fn system(name: &str) -> System {
    presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap()
}

fn config(v: serde_json::Value) -> Result<ServingConfig, crate::llm::config::ConfigError> {
    let req: InferenceRequest = serde_json::from_value(v).unwrap();
    validate(&req, &system(&req.system))
}

fn llama70b_on_b200(extra: serde_json::Value) -> serde_json::Value {
    let mut v = json!({"system": "dgx-b200", "model": "Llama-3.1-70B", "parallelism": {"tp": 4},
        "precision": "fp4", "engine": "trtllm",
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 64}});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

#[test]
fn nvfp4_weights_and_an_fp8_kv_cache_of_llama_3_1_70b_on_four_b200s() {
    // Llama-3.1-70B at tp 4 in NVFP4 (0.5 B per element + one 1-byte scale per 16 = 0.5625 B) on B200 (180 GiB =
    // 193,273,528,320 B), TensorRT-LLM defaults (max_num_tokens 8192, max_batch_size 2048, 0.9 of the memory left
    // after weights and workspace, blocks of 32 tokens), its default KV cache fp8 (1 B).
    // Weights per GPU, per layer: QKV 8192·128·(64/4 + 2·8/4) = 20,971,520, output 16·128·8192 = 16,777,216, MLP
    // 3·8192·28672/4 = 176,160,768 → 213,909,504 params · 0.5625 B = 120,324,096 B, plus two bf16 norms
    // 2·8192·2 = 32,768 B → 120,356,864 B × 80 layers = 9,628,549,120 B; the bf16 embedding and LM head
    // 2·(128256/4)·8192·2 = 1,050,673,152 B and the final norm 16,384 B: 10,679,238,656 B.
    // Workspace: 8192 tokens · (2·8192 + 3·7168) · 2 B = 620,756,992 B; logits 2048 · 128256 · 4 B =
    // 1,050,673,152 B; 1 GiB non-tensor: 2,745,171,968 B.
    // KV cache: 0.9 · (193,273,528,320 − 10,679,238,656 − 2,745,171,968) = 161,864,205,926.4 B; per token per GPU
    // 2 · 80 · 2 · 128 · 1 B = 40,960 B; blocks of 32 tokens (1,310,720 B): 123,492 blocks = 3,951,744 tokens; a
    // request of 1024 + 1024 tokens takes 64 blocks: 1,929 requests at once.
    let cfg = config(llama70b_on_b200(json!({}))).unwrap();
    assert_eq!(
        (cfg.precision, cfg.kv_cache_dtype, cfg.activation_precision),
        (Precision::Nvfp4, Precision::Fp8, Precision::Bf16)
    );
    let m = memory::serving_memory(&cfg, &system("dgx-b200").gpu);
    assert!((m.weights_gib * (1u64 << 30) as f64 - 10_679_238_656.0).abs() < 1.0, "{}", m.weights_gib);
    assert_eq!(m.kv_bytes_per_token_per_gpu, 40_960.0);
    assert_eq!((m.kv_capacity_tokens, m.max_concurrency), (3_951_744, 1_929));
    // A bf16 cache asked for: twice the bytes per token (81,920), 61,746 blocks = 1,975,872 tokens, 964 requests.
    let cfg = config(llama70b_on_b200(json!({"kv_cache_dtype": "bf16"}))).unwrap();
    let m = memory::serving_memory(&cfg, &system("dgx-b200").gpu);
    assert_eq!(m.kv_bytes_per_token_per_gpu, 81_920.0);
    assert_eq!((m.kv_capacity_tokens, m.max_concurrency), (1_975_872, 964));
}

#[test]
fn the_kv_cache_defaults_follow_each_engine() {
    let kv = |engine: &str, precision: &str, system: &str| {
        config(json!({"system": system, "model": "Llama-3.1-8B", "precision": precision, "engine": engine,
            "workload": {"input_tokens": 128, "output_tokens": 128, "concurrency": 1}}))
        .unwrap()
        .kv_cache_dtype
    };
    // vLLM's and SGLang's `auto` keep 16 bits under (self-quantized) fp8 weights; TensorRT-LLM follows its ModelOpt
    // checkpoint's FP8 cache; NVFP4 checkpoints are ModelOpt's, whose FP8 cache every engine's `auto` follows; bf16
    // weights keep a bf16 cache everywhere.
    assert_eq!(kv("vllm", "fp8", "dgx-h100"), Precision::Bf16);
    assert_eq!(kv("sglang", "fp8", "dgx-h100"), Precision::Bf16);
    assert_eq!(kv("trtllm", "fp8", "dgx-h100"), Precision::Fp8);
    assert_eq!(kv("trtllm", "bf16", "dgx-h100"), Precision::Bf16);
    assert_eq!(kv("vllm", "bf16", "dgx-b200"), Precision::Bf16);
    for engine in ["vllm", "sglang", "trtllm"] {
        assert_eq!(kv(engine, "fp4", "dgx-b200"), Precision::Fp8, "{engine}");
    }
    assert_eq!(ServingPrecision::Fp4.precision(), Precision::Nvfp4);
}

#[test]
fn fp4_needs_fp4_tensor_cores_and_is_no_kv_cache_precision() {
    let e = config(llama70b_on_b200(json!({"system": "dgx-h100"}))).unwrap_err();
    assert_eq!(e.field, "precision");
    assert!(e.message.contains("no FP4 tensor cores"), "{}", e.message);
    let e = config(llama70b_on_b200(json!({"kv_cache_dtype": "fp4"}))).unwrap_err();
    assert_eq!(e.field, "kv_cache_dtype");
}

#[test]
fn vllm_holds_all_64_clients_of_an_nvfp4_llama_3_1_70b_on_one_b200_only_with_the_checkpoints_fp8_cache() {
    // Llama-3.1-70B in NVFP4 at tp 1 on one B200 (180 GiB = 193,273,528,320 B), vLLM V1 defaults on a ≥ 70 GiB GPU
    // (max_num_batched_tokens 8192, max_num_seqs 1024, gpu_memory_utilization 0.9 of the whole GPU, blocks of 16).
    // Weights, per layer: QKV 8192·128·(64 + 2·8) = 83,886,080, output 64·128·8192 = 67,108,864, MLP
    // 3·8192·28672 = 704,643,072 → 855,638,016 params · 0.5625 B = 481,296,384 B, plus the two bf16 norms 32,768 B
    // → 481,329,152 B × 80 = 38,506,332,160 B; bf16 embedding and LM head 2·128,256·8192·2 = 4,202,692,608 B and
    // the final norm 16,384 B: 42,709,041,152 B. Workspace: 8192·(2·8192 + 3·28672)·2 = 1,677,721,600 B, logits
    // 1024·128,256·4 = 525,336,576 B, 1 GiB: 3,276,800,000 B. KV cache: 0.9·193,273,528,320 − 42,709,041,152 −
    // 3,276,800,000 = 127,960,334,336 B.
    // The checkpoint's fp8 cache (the default): 2·80·8·128·1 = 163,840 B per token, 2,621,440 B per block →
    // 48,812 blocks = 780,992 tokens; a request of 1,024 + 8,192 tokens takes 576 blocks: 84 at once, so 64
    // closed-loop clients all run together (as the measured runs did).
    let req = |kv: serde_json::Value| {
        let mut v = json!({"system": "dgx-b200", "model": "Llama-3.1-70B", "precision": "fp4", "engine": "vllm",
            "workload": {"input_tokens": 1024, "output_tokens": 8192, "concurrency": 64}});
        if !kv.is_null() {
            v["kv_cache_dtype"] = kv;
        }
        config(v).unwrap()
    };
    let gpu = system("dgx-b200").gpu;
    let cfg = req(serde_json::Value::Null);
    assert_eq!(cfg.kv_cache_dtype, Precision::Fp8);
    let m = memory::serving_memory(&cfg, &gpu);
    assert!((m.weights_gib * (1u64 << 30) as f64 - 42_709_041_152.0).abs() < 1.0, "{}", m.weights_gib);
    assert_eq!((m.kv_capacity_tokens, m.max_concurrency), (780_992, 84));
    // A bf16 cache (`kv_cache_dtype: bf16`, vLLM's `auto` before it followed the checkpoint): 327,680 B per token,
    // 24,406 blocks = 390,496 tokens, 42 whole requests — 22 of the 64 clients would wait or be preempted.
    let m = memory::serving_memory(&req(json!("bf16")), &gpu);
    assert_eq!((m.kv_capacity_tokens, m.max_concurrency), (390_496, 42));
}

#[test]
fn sglangs_fp8_experts_are_block_scaled_and_every_other_engines_keep_the_requests_precision() {
    // aiconfigurator's runs: SGLang fp8 → moe_quant_mode fp8_block (638 of 638 rows), vLLM and TensorRT-LLM fp8 →
    // fp8; fp4 → nvfp4 and bf16 → bf16 under every engine.
    let experts = |engine: &str, precision: &str| {
        let cfg = config(json!({"system": "dgx-b200", "model": "DeepSeek-V3", "precision": precision,
            "engine": engine, "parallelism": {"tp": 8, "ep": 8},
            "workload": {"input_tokens": 128, "output_tokens": 128, "concurrency": 1}}))
        .unwrap();
        (cfg.precision, cfg.expert_precision())
    };
    assert_eq!(experts("sglang", "fp8"), (Precision::Fp8, Precision::Fp8Block));
    assert_eq!(experts("vllm", "fp8"), (Precision::Fp8, Precision::Fp8));
    assert_eq!(experts("trtllm", "fp8"), (Precision::Fp8, Precision::Fp8));
    for engine in ["vllm", "sglang", "trtllm"] {
        assert_eq!(experts(engine, "fp4"), (Precision::Nvfp4, Precision::Nvfp4), "{engine}");
        assert_eq!(experts(engine, "bf16"), (Precision::Bf16, Precision::Bf16), "{engine}");
    }
    // Block scales add no weight bytes perfcast counts: fp8_block is 1 B per element like fp8.
    assert_eq!(Precision::Fp8Block.bytes(), Precision::Fp8.bytes());
}

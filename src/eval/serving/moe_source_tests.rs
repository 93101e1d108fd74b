//! Whose measured kernels time an SGLang fp8 DeepSeek-V3's fused experts, through the bundled models a fresh install
//! serves: SGLang's own block-scaled MoE (`moe.fwd.fp8_block.sglang`, trained on aiconfigurator's SGLang `moe_perf`
//! tables), not the engine-neutral per-tensor fp8 model that stood in for it before
//! ([`crate::llm::serving::ServingConfig::expert_precision`]).

use serde_json::json;

use crate::cost::{CostBackend, Timed};
use crate::hw::{presets, Precision};
use crate::llm::operators::{OpName, Work};
use crate::llm::serving::step::{stage_ops, StageRole, StepLoad};
use crate::llm::serving::{validate, InferenceRequest};
use crate::op::{KernelFamily, OpShape};

/// The MoE operator and the dtypes of the GEMMs of one decode step of DeepSeek-V3 fp8 at tp 8, ep 8 on a DGX B200
/// under `engine`: 64 sequences at a context of 1,536 tokens, one MoE layer.
fn decode_moe(engine: &str) -> (OpShape, Precision, Vec<Precision>) {
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-b200", "model": "DeepSeek-V3",
        "precision": "fp8", "engine": engine, "parallelism": {"tp": 8, "ep": 8},
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 64}}))
    .unwrap();
    let system = presets().into_iter().find(|p| p.name == "dgx-b200").unwrap().resolve().unwrap();
    let cfg = validate(&req, &system).unwrap();
    let load = StepLoad::decode(64, 1536, 1024);
    let ops = stage_ops(&cfg, &system, &load, StageRole { first: true, last: true }, 0, 1);
    let moe = ops.iter().find(|o| o.op.name == OpName::Moe).expect("a MoE layer has experts");
    let Work::Compute { shape, dtype } = moe.op.work else { panic!("the experts are compute") };
    let gemms = ops
        .iter()
        .filter(|o| matches!(o.op.name, OpName::Linear3 | OpName::Linear4))
        .filter_map(|o| if let Work::Compute { dtype, .. } = o.op.work { Some(dtype) } else { None })
        .collect();
    (shape, dtype, gemms)
}

/// `shape` in `dtype` on a B200 as a request of `engine` times it, through the bundled models.
fn timed(engine: KernelFamily, shape: &OpShape, dtype: Precision) -> Timed {
    super::decode_tests::bundled_b200(engine).compute(shape, dtype).unwrap()
}

#[test]
fn sglangs_fp8_deepseek_v3_experts_are_timed_by_sglangs_own_block_scaled_kernels() {
    let (shape, dtype, gemms) = decode_moe("sglang");
    // 64 decode tokens, no data-parallel attention, ep 8: this GPU's experts receive ⌈64 · 1 / 8⌉ = 8 tokens' worth of
    // routed copies; expert FFN 2048 / (tp 8 / ep 8) = 2048 columns; 256 / 8 = 32 experts; top-8.
    assert_eq!(shape.dims, [8, 7168, 2048, 32, 8]);
    assert_eq!(dtype, Precision::Fp8Block);
    // The shared expert's GEMMs stay per-tensor fp8 (the runs' gemm_quant_mode fp8).
    assert!(!gemms.is_empty() && gemms.iter().all(|&d| d == Precision::Fp8), "{gemms:?}");
    let own = timed(KernelFamily::Sglang, &shape, dtype);
    assert_eq!(own.source.to_string(), "regressor:moe.fwd.fp8_block.sglang@v1");
    // The 32 experts' weights stream once: 32 · 3 · 7168 · 2048 · 1 B = 1,409,286,144 B at the B200's 8,000 GB/s:
    // 176.16 µs. No kernel beats that.
    let bound_us = 1_409_286_144.0 / 8.0e12 * 1e6;
    assert!(own.time_us >= bound_us, "{} µs below the {bound_us} µs the weights take", own.time_us);
    // SGLang measured this very shape (b200_sxm/sglang/moe_perf.csv.gz line 23,336: 64 tokens, ep 8, balanced,
    // FlashInfer's TensorRT-LLM kernel): 344.648 µs. Its own model answers closer to it than the per-tensor fp8 model
    // without an engine segment (the stand-in before: vLLM's and the engine-neutral measurements) does.
    let measured_us = 344.647_674_560_546_85;
    let stand_in = timed(KernelFamily::Sglang, &shape, Precision::Fp8);
    assert_eq!(stand_in.source.to_string(), "regressor:moe.fwd.fp8@v1 (sglang not measured)");
    assert!(
        (own.time_us - measured_us).abs() < (stand_in.time_us - measured_us).abs(),
        "own {} µs, stand-in {} µs, measured {measured_us} µs",
        own.time_us,
        stand_in.time_us
    );
}

#[test]
fn vllm_and_tensorrt_llm_keep_per_tensor_fp8_experts() {
    // Their runs say moe_quant_mode fp8: the experts stay in the request's precision.
    for engine in ["vllm", "trtllm"] {
        let (shape, dtype, _) = decode_moe(engine);
        assert_eq!((shape.dims, dtype), ([8, 7168, 2048, 32, 8], Precision::Fp8), "{engine}");
    }
    let (shape, dtype, _) = decode_moe("trtllm");
    assert_eq!(timed(KernelFamily::Trtllm, &shape, dtype).source.to_string(), "regressor:moe.fwd.fp8.trtllm@v1");
}

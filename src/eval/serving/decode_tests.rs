//! A hand-worked decode step of an NVFP4 Llama-3.1-70B under TensorRT-LLM on one B200, through the bundled models
//! a fresh install serves: TensorRT-LLM's GEMMs are the fastest engine kernel measured for each (its autotuned
//! tactic, [`crate::learn::backend::LearnedBackend`]), its attention applies RoPE, and the step's GEMMs stay above
//! the time the weights take to stream.

use std::sync::Arc;

use serde_json::json;

use crate::cost::{CostBackend, KernelChoice};
use crate::hw::presets;
use crate::learn::backend::LearnedBackend;
use crate::llm::operators::{OpName, Work};
use crate::llm::serving::step::{stage_ops, StageRole, StepLoad};
use crate::llm::serving::{validate, InferenceRequest, ServingConstants, ServingDerated};
use crate::op::KernelFamily;

/// The decode step's operators of Llama-3.1-70B NVFP4 at tp 1 on a B200 under `engine`: 4 sequences at a context
/// of 1,536 tokens.
fn decode_ops(engine: &str) -> Vec<crate::llm::serving::step::StepOp> {
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-b200", "model": "Llama-3.1-70B",
        "precision": "fp4", "engine": engine, "parallelism": {"tp": 1},
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 4}}))
    .unwrap();
    let system = presets().into_iter().find(|p| p.name == "dgx-b200").unwrap().resolve().unwrap();
    let cfg = validate(&req, &system).unwrap();
    let load = StepLoad::decode(4, 1536, 1024);
    stage_ops(&cfg, &system, &load, StageRole { first: true, last: true }, 80, 0)
}

/// The bundled models a fresh install serves, on a DGX B200, choosing `engine`'s measured kernels, derated with the
/// calibrated serving constants: what an `engine` request's operators are timed by.
pub(super) fn bundled_b200(engine: KernelFamily) -> ServingDerated<LearnedBackend> {
    let bundle = crate::bundle::Bundle::embedded().unwrap();
    let registry = Arc::new(crate::bundle::registry(&bundle).unwrap());
    let system = presets().into_iter().find(|p| p.name == "dgx-b200").unwrap().resolve().unwrap();
    ServingDerated::new(
        LearnedBackend::new(system, registry).with_kernels(KernelChoice::Engine(engine)),
        ServingConstants::CALIBRATED,
    )
}

/// Per-step µs of the step's four weight GEMMs (`Linear1`–`Linear4`) through the bundled models as `engine`'s
/// request would time them, with each GEMM's source.
fn gemm_us(engine: KernelFamily, ops: &[crate::llm::serving::step::StepOp]) -> (f64, Vec<String>) {
    let backend = bundled_b200(engine);
    let (mut total, mut sources) = (0.0, Vec::new());
    for o in ops
        .iter()
        .filter(|o| matches!(o.op.name, OpName::Linear1 | OpName::Linear2 | OpName::Linear3 | OpName::Linear4))
    {
        let Work::Compute { shape, dtype } = o.op.work else { panic!("a GEMM is compute") };
        let t = backend.compute(&shape, dtype).unwrap();
        total += o.per_step * t.time_us;
        sources.push(t.source.to_string());
    }
    (total, sources)
}

#[test]
fn an_nvfp4_llama_70b_decode_step_under_tensorrt_llm_streams_its_weights_on_the_fastest_kernels() {
    let trt = decode_ops("trtllm");
    // TensorRT-LLM's attention op applies RoPE; vLLM runs it as a kernel per layer (80).
    assert!(!trt.iter().any(|o| o.op.name == OpName::RoPE));
    let vllm = decode_ops("vllm");
    let rope: f64 = vllm.iter().filter(|o| o.op.name == OpName::RoPE).map(|o| o.per_step).sum();
    assert_eq!(rope, 80.0);
    // The weights one decode step streams, per layer: QKV 8192·(64 + 2·8)·128 = 83,886,080, output 8192·8192 =
    // 67,108,864, gate and up 8192·2·28672 = 469,762,048, down 28672·8192 = 234,881,024 → 855,638,016 params ·
    // 0.5625 B (4 bits + one fp8 scale per 16) = 481,296,384 B; × 80 layers = 38,503,710,720 B, at the B200's
    // 8,000 GB/s: 4,812.96 µs. No kernel beats that.
    let bound_us = 38_503_710_720.0 / 8.0e12 * 1e6;
    let (t_trt, sources) = gemm_us(KernelFamily::Trtllm, &trt);
    let (t_vllm, _) = gemm_us(KernelFamily::Vllm, &trt);
    let (t_sglang, _) = gemm_us(KernelFamily::Sglang, &trt);
    assert!(t_trt >= bound_us, "{t_trt} µs below the {bound_us} µs the weights take");
    // The fastest engine kernel per GEMM: never slower than vLLM's or SGLang's kernels summed.
    assert!(t_trt <= t_vllm.min(t_sglang) + 1e-6, "{t_trt} vs vLLM {t_vllm}, SGLang {t_sglang}");
    // Within 2.5× the streaming time (aiconfigurator's TensorRT-LLM table, at its fallback tactic, gives 22.5 µs
    // for x[4, 8192]·W[8192, 8192] — 4.8× its 37.7 MB at 8 TB/s — and ≈ 2.9× over the step).
    assert!(t_trt < 2.5 * bound_us, "{t_trt} µs ≥ 2.5 × {bound_us} µs");
    // Every GEMM names the model that answered (an engine's own: no stand-in).
    assert!(
        sources.iter().all(|s| s.starts_with("regressor:linear.fwd.nvfp4") && !s.contains("not measured")),
        "{sources:?}"
    );
}

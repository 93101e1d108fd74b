//! Which engine's model answers ([`KernelChoice`]): the fallback chain and the source that names it, TensorRT-LLM's
//! static activation scales, and training's fp8 GEMMs without the analytic cast — on models trained to a
//! constant learned/analytic ratio, so every answer is that ratio times the analytic time (LightGBM starts from the
//! mean label and a constant label leaves nothing to split).

use super::*;
use crate::cost::{Derated, Efficiency};
use crate::hw::presets;
use crate::learn::features::OP_FEATURES;
use crate::learn::fit::{fit, Grid, TrainingSet};
use crate::learn::lgbm::Model;
use crate::learn::op_key;

fn h100() -> System {
    presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap()
}

/// A model of `key` for `class` in `dtype` whose every answer is `ratio` × the analytic time.
fn constant(key: &str, class: OpClass, dtype: Precision, ratio: f64) -> ActiveRegressor {
    let gpu = h100().gpu;
    let mut set = TrainingSet::new(&OP_FEATURES);
    let mut i = 0;
    for a in [16u64, 64, 256, 1024, 4096] {
        for b in [128u64, 1024, 8192] {
            for c in [256u64, 2048, 8192] {
                let dims: Vec<u64> = match class {
                    OpClass::Linear => vec![1, a, b, c],
                    _ => vec![a, b * c / 128],
                };
                let shape = OpShape::new(class, Phase::Fwd, &dims);
                let cost = roofline::estimate(&shape, dtype, &gpu).unwrap();
                set.push(&op_features(&shape, dtype, &gpu, &cost), cost.time_us, cost.time_us * ratio, i);
                i += 1;
            }
        }
    }
    let fitted = fit(&set, Grid::Minimal, &mut |_| {}).unwrap();
    ActiveRegressor {
        key: key.into(),
        version: 1,
        model: Model::from_text(&fitted.model_text).unwrap(),
        feature_names: OP_FEATURES.iter().map(|s| s.to_string()).collect(),
        validation_mape: 0.0,
        summary: serde_json::Value::Null,
    }
}

fn gemm() -> OpShape {
    OpShape::new(OpClass::Linear, Phase::Fwd, &[1, 2048, 8192, 8192])
}

fn analytic(shape: &OpShape, dtype: Precision) -> f64 {
    roofline::estimate(shape, dtype, &h100().gpu).unwrap().time_us
}

#[test]
fn an_engine_without_a_model_falls_back_to_the_closest_and_says_so() {
    let fp8 = Precision::Fp8;
    let registry = Arc::new(Registry::new([
        constant(&op_key(OpClass::Linear, Phase::Fwd, fp8, None, None), OpClass::Linear, fp8, 1.5),
        constant(
            &op_key(OpClass::Linear, Phase::Fwd, fp8, Some(KernelFamily::Sglang), None),
            OpClass::Linear,
            fp8,
            2.0,
        ),
    ]));
    let ask = |kernels: KernelChoice| {
        let b = LearnedBackend::new(h100(), registry.clone()).with_kernels(kernels);
        let t = b.compute_uncached(&gemm(), fp8).unwrap();
        (t.source.to_string(), t.time_us / t.analytic_us)
    };
    let check = |(s, r): (String, f64), (want_s, want_r): (&str, f64)| {
        assert_eq!(s, want_s);
        assert!((r - want_r).abs() < 1e-6, "{s}: {r}");
    };
    // SGLang has its own; vLLM and the engine-neutral request the model without an engine segment.
    check(ask(KernelChoice::Engine(KernelFamily::Sglang)), ("regressor:linear.fwd.fp8.sglang@v1", 2.0));
    check(ask(KernelChoice::Engine(KernelFamily::Vllm)), ("regressor:linear.fwd.fp8@v1", 1.5));
    check(ask(KernelChoice::Neutral), ("regressor:linear.fwd.fp8@v1", 1.5));
    // TensorRT-LLM has none: SGLang's is the closest (TensorRT-LLM → SGLang → vLLM), named as a stand-in.
    check(
        ask(KernelChoice::Engine(KernelFamily::Trtllm)),
        ("regressor:linear.fwd.fp8.sglang@v1 (trtllm not measured)", 2.0),
    );
    // Training's fp8 GEMMs ask TensorRT-LLM's first, then the neutral ones (never SGLang's).
    check(ask(KernelChoice::Training), ("regressor:linear.fwd.fp8@v1 (trtllm not measured)", 1.5));
    // Without any model: analytic, whatever was asked.
    let none = LearnedBackend::new(h100(), Arc::new(Registry::default()))
        .with_kernels(KernelChoice::Engine(KernelFamily::Trtllm));
    assert_eq!(none.compute_uncached(&gemm(), fp8).unwrap().source, Source::Analytic);
    for f in KernelFamily::ALL {
        assert_eq!(KernelChoice::Engine(f).families(OpClass::Linear, fp8), f.closest());
    }
}

#[test]
fn tensorrt_llm_fp8_gemms_lose_the_measured_dynamic_scale_for_a_tensorrt_llm_request() {
    let (fp8, trt) = (Precision::Fp8, Some(KernelFamily::Trtllm));
    let registry = Arc::new(Registry::new([
        constant(&op_key(OpClass::Linear, Phase::Fwd, fp8, trt, None), OpClass::Linear, fp8, 2.0),
        constant(&op_key(OpClass::QuantizeScale, Phase::Fwd, fp8, trt, None), OpClass::QuantizeScale, fp8, 3.0),
    ]));
    // The GEMM x[2048, 8192]·W[8192, 8192] at 2× its analytic time, less 3× the analytic amax over x[2048, 8192]
    // (one kernel reading 2048·8192·2 B).
    let scale = OpShape::new(OpClass::QuantizeScale, Phase::Fwd, &[2048, 8192]);
    let want = 2.0 * analytic(&gemm(), fp8) - 3.0 * analytic(&scale, fp8);
    let trt_request =
        LearnedBackend::new(h100(), registry.clone()).with_kernels(KernelChoice::Engine(KernelFamily::Trtllm));
    let t = trt_request.compute_uncached(&gemm(), fp8).unwrap();
    assert!((t.time_us - want).abs() < 1e-6 * want, "{} vs {want}", t.time_us);
    assert_eq!(t.source.to_string(), "regressor:linear.fwd.fp8.trtllm@v1");
    // The cached answer is the same.
    assert_eq!(trt_request.compute(&gemm(), fp8).unwrap(), t);
    // An SGLang request falling back to TensorRT-LLM's GEMM keeps the measured (dynamic) call.
    let sglang = LearnedBackend::new(h100(), registry).with_kernels(KernelChoice::Engine(KernelFamily::Sglang));
    let s = sglang.compute_uncached(&gemm(), fp8).unwrap();
    assert!((s.time_us - 2.0 * analytic(&gemm(), fp8)).abs() < 1e-6 * s.time_us);
    assert_eq!(s.source.to_string(), "regressor:linear.fwd.fp8.trtllm@v1 (sglang not measured)");
}

#[test]
fn training_fp8_gemms_from_tensorrt_llm_lose_the_analytic_cast() {
    let (fp8, trt) = (Precision::Fp8, Some(KernelFamily::Trtllm));
    // TensorRT-LLM's quantization kernels are bundled too, yet training removes the fused cast Transformer Engine
    // runs, not those separately measured kernels.
    let registry = Arc::new(Registry::new([
        constant(&op_key(OpClass::Linear, Phase::Fwd, fp8, trt, None), OpClass::Linear, fp8, 2.0),
        constant(&op_key(OpClass::Quantize, Phase::Fwd, fp8, trt, None), OpClass::Quantize, fp8, 1.5),
        constant(&op_key(OpClass::QuantizeScale, Phase::Fwd, fp8, trt, None), OpClass::QuantizeScale, fp8, 3.0),
    ]));
    let eff = Efficiency { fused_fp8_quantize: true, ..Efficiency::ROOFLINE };
    let training = Derated::new(LearnedBackend::new(h100(), registry).with_kernels(KernelChoice::Training), eff);
    // Forward: the GEMM at 2× its analytic time less the cast of x[2048, 8192] by hand: 2,048 · 8,192 elements ×
    // (2 B read + 1 B written) = 50,331,648 B at the H100 SXM's 3,350 GB/s = 15.0244 µs, plus one 2 µs launch.
    let cast_fwd: f64 = 2048.0 * 8192.0 * 3.0 / 3350e9 * 1e6 + 2.0;
    assert!((cast_fwd - 17.0244).abs() < 1e-4);
    let want = 2.0 * analytic(&gemm(), fp8) - cast_fwd;
    let t = training.compute(&gemm(), fp8).unwrap();
    assert!((t.time_us - want).abs() < 1e-6 * want, "{} vs {want}", t.time_us);
    assert_eq!(t.source.to_string(), "regressor:linear.fwd.fp8.trtllm@v1");
    // Backward: dX = dY[2048, 8192]·Wᵀ and dW = Xᵀ[8192, 2048]·dY through the forward model, less the casts of
    // dY and Xᵀ: (2,048 · 8,192 + 8,192 · 2,048) × 3 B / 3,350 GB/s = 30.0487 µs, plus two launches = 34.0487 µs.
    let bwd = OpShape::new(OpClass::Linear, Phase::Bwd, &[1, 2048, 8192, 8192]);
    let dgrad = OpShape::new(OpClass::Linear, Phase::Fwd, &[1, 2048, 8192, 8192]);
    let wgrad = OpShape::new(OpClass::Linear, Phase::Fwd, &[1, 8192, 8192, 2048]);
    let cast_bwd: f64 = 2.0 * 2048.0 * 8192.0 * 3.0 / 3350e9 * 1e6 + 4.0;
    assert!((cast_bwd - 34.0487).abs() < 1e-4);
    let want = 2.0 * (analytic(&dgrad, fp8) + analytic(&wgrad, fp8)) - cast_bwd;
    let t = training.compute(&bwd, fp8).unwrap();
    assert!((t.time_us - want).abs() < 1e-6 * want, "{} vs {want}", t.time_us);
}

#[test]
fn training_times_fp8_gemms_with_cublaslt_measurements() {
    // The shipped training kernels ask TensorRT-LLM's (cuBLASLt) fp8 `linear` first, vLLM's after; every other
    // operator and precision from the engine-neutral models only.
    use crate::cost::TRAINING_KERNELS;
    assert_eq!(TRAINING_KERNELS, KernelChoice::Training);
    assert_eq!(TRAINING_KERNELS.families(OpClass::Linear, Precision::Fp8), &[KernelFamily::Trtllm, KernelFamily::Vllm]);
    assert_eq!(TRAINING_KERNELS.families(OpClass::Linear, Precision::Bf16), &[KernelFamily::Vllm]);
    assert_eq!(TRAINING_KERNELS.families(OpClass::FlashAttention, Precision::Fp8), &[KernelFamily::Vllm]);
    assert_eq!(TRAINING_KERNELS.families(OpClass::QuantizeScale, Precision::Fp8), &[KernelFamily::Vllm]);
}

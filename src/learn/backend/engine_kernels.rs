//! TensorRT-LLM's adjustments of its own measured kernels' answers for a TensorRT-LLM request: static activation
//! scales on fp8 GEMMs, and the fastest engine's NVFP4 kernel (moved out of `src/learn/backend.rs`).
//!
//! TensorRT-LLM serves FP8 checkpoints with static activation scales (ModelOpt's FP8 checkpoints carry
//! `input_scale`; `tensorrt_llm/_torch/modules/linear.py` quantizes with them when present), while aiconfigurator
//! timed its fp8 GEMMs with dynamic scales: a TensorRT-LLM fp8 `linear` for a TensorRT-LLM request loses the measured
//! scale computation (its `quantize_scale` model), as aiconfigurator's own `GEMM.query` does for `fp8_static` on
//! TensorRT-LLM (`sdk/operations/gemm.py`).

use super::LearnedBackend;
use crate::cost::{CostBackend, KernelChoice, Source, Timed};
use crate::hw::Precision;
use crate::op::{KernelFamily, OpClass, OpShape, Phase};

impl LearnedBackend {
    /// A TensorRT-LLM fp8 `linear` for a TensorRT-LLM request with static activation scales: the measured call
    /// (dynamic scales) less the measured scale computation of its input X[rows, k] (`quantize_scale`, TensorRT-LLM's
    /// own model only), never below the analytic time (see the module doc). Unchanged when no such model is active.
    pub(super) fn static_activation_scale(&self, shape: &OpShape, dtype: Precision, t: Timed) -> Timed {
        let applies = self.kernels == KernelChoice::Engine(KernelFamily::Trtllm)
            && dtype == Precision::Fp8
            && shape.class == OpClass::Linear
            && shape.phase == Phase::Fwd
            && t.source.kernel_family() == Some(KernelFamily::Trtllm);
        if !applies {
            return t;
        }
        let gpu = &self.analytic.system().gpu;
        let [b, m, _, k, _] = shape.dims;
        let scale = OpShape::new(OpClass::QuantizeScale, Phase::Fwd, &[b.max(1) * m, k]);
        let Some(model) =
            self.registry.op_on_family(OpClass::QuantizeScale, Phase::Fwd, dtype, Some(KernelFamily::Trtllm), gpu)
        else {
            return t;
        };
        match self.corrected(&scale, dtype, model, None) {
            Ok(q) if q.source != Source::Analytic => {
                Timed { time_us: (t.time_us - q.time_us).max(t.analytic_us.min(t.time_us)), ..t }
            }
            _ => t,
        }
    }

    /// A TensorRT-LLM NVFP4 `linear` or `moe` forward for a TensorRT-LLM request: the fastest of the engines' own
    /// measured kernels for the operator on this GPU (TensorRT-LLM's, SGLang's, vLLM's), named by the model that
    /// answered. TensorRT-LLM runs the fastest kernel it has for an NVFP4 GEMM or fused MoE, and every engine's
    /// measured NVFP4 kernel is one it has:
    /// - GEMM: `trtllm::nvfp4_gemm` asks its `AutoTuner` for a tactic (`tensorrt_llm/_torch/custom_ops/
    ///   torch_custom_ops.py`); the engine profiles every tactic at start-up (`PyTorchModelEngine.warmup` runs the
    ///   model under `autotune()`, `tensorrt_llm/_torch/pyexecutor/model_engine.py`), while aiconfigurator's
    ///   collector times `Linear.forward` outside `autotune()` (`collector/trtllm/collect_gemm.py`), where
    ///   `AutoTuner.choose_one` answers the fallback tactic −1 (`tensorrt_llm/_torch/autotuner.py`: "Early return if
    ///   it's not tuning, use cache found one or fallback one"). Its decode rows show it: on a B200, x[4, 8192] ·
    ///   W[8192, 8192] takes 22.5 µs — 4.8× the 4.7 µs its 37.7 MB of weights take at 8 TB/s — and grows with k
    ///   whatever n (x[4, 1024] · W[1024, 8192]: 8.4 µs, · W[1024, 1024]: 8.3 µs), where vLLM's and SGLang's CuteDSL
    ///   kernels (TensorRT-LLM carries the same `Sm100BlockScaledPersistentDenseGemmKernel`) take 12.8 and 13.5 µs.
    /// - MoE: at decode sizes TensorRT-LLM's NVFP4 experts run the TRT-LLM-gen kernels (aiconfigurator's own SDK
    ///   reads its `moe_torch_flow_min_latency` rows for NVFP4 gated MoE of at most 128 tokens, `sdk/operations/
    ///   moe.py`), which SGLang calls through FlashInfer (`flashinfer_trtllm_moe`) — 52 µs for 8 tokens of
    ///   DeepSeek-R1 at moe tp 4 on a B200 against the CUTLASS rows' 242 µs that the most-rows rule of
    ///   [`crate::learn::op_data::engine_kernels`] keeps.
    ///
    /// Unchanged when TensorRT-LLM's own model did not answer (another engine's stands in already) or no other
    /// engine's model of its own exists.
    pub(super) fn fastest_engine_kernel(&self, shape: &OpShape, dtype: Precision, t: Timed) -> Timed {
        let applies = self.kernels == KernelChoice::Engine(KernelFamily::Trtllm)
            && dtype == Precision::Nvfp4
            && matches!(shape.class, OpClass::Linear | OpClass::Moe)
            && shape.phase == Phase::Fwd
            && t.source.kernel_family() == Some(KernelFamily::Trtllm);
        if !applies {
            return t;
        }
        let gpu = &self.analytic.system().gpu;
        let mut best = t;
        for f in [KernelFamily::Sglang, KernelFamily::Vllm] {
            let segment = f.key_segment().map(|_| f);
            let Some(model) = self.registry.op_on_family(shape.class, shape.phase, dtype, segment, gpu) else {
                continue;
            };
            if let Ok(o) = self.corrected(shape, dtype, model, None) {
                if o.source != Source::Analytic && o.time_us < best.time_us {
                    best = o;
                }
            }
        }
        best
    }
}

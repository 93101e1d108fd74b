//! Operators without a model of their own, timed through another operator's learned model (moved out of
//! `src/learn/backend.rs`).
//!
//! A GEMM's backward with no backward model of its own is timed as its two GEMMs (dX = dY·Wᵀ, dW = Xᵀ·dY), each
//! through the forward model: they are forward GEMMs of other shapes. Training's flash attention with no
//! `flash_attention` model of its own is timed through the `attention_prefill` forward model of its precision: the
//! prefill of the same B, L, A, G, D is the same causal flash-attention forward (plus the KV-cache write, which the
//! analytic prefill count includes too), so the learned/analytic ratio of that prefill scales the analytic
//! flash-attention time — forward, and backward (2.5× the forward's FLOPs at
//! [`crate::cost::roofline::FLASH_BACKWARD_RATE`] of its rate) until measured backward samples exist.

use super::LearnedBackend;
use crate::cost::roofline::{self, UnsupportedPrecision};
use crate::cost::{CostBackend, Source, Timed};
use crate::hw::Precision;
use crate::op::{OpClass, OpShape, Phase};

impl LearnedBackend {
    /// The backward of a GEMM class as two forward GEMMs through the forward model, when one is active.
    pub(super) fn gemm_backward_via_forward(
        &self,
        shape: &OpShape,
        dtype: Precision,
    ) -> Option<Result<Timed, UnsupportedPrecision>> {
        if shape.phase != Phase::Bwd || !matches!(shape.class, OpClass::Linear | OpClass::Bmm) {
            return None;
        }
        let (fwd, instead_of) = self.model_for(shape.class, Phase::Fwd, dtype)?;
        let [b, m, n, k, _] = shape.dims;
        let (b, m) = if shape.class == OpClass::Linear { (1, b.max(1) * m) } else { (b, m) };
        let dgrad = OpShape::new(shape.class, Phase::Fwd, &[b, m, k, n]);
        let wgrad = OpShape::new(shape.class, Phase::Fwd, &[b, k, n, m]);
        Some((|| {
            let (a, c) =
                (self.corrected(&dgrad, dtype, fwd, instead_of)?, self.corrected(&wgrad, dtype, fwd, instead_of)?);
            let analytic = roofline::estimate(shape, dtype, &self.analytic.system().gpu)?.time_us;
            Ok(Timed::new(a.time_us + c.time_us, analytic, a.source).with_kernels(a.kernels + c.kernels))
        })())
    }

    /// Training's flash attention (forward or backward) through the `attention_prefill` forward model of its
    /// precision, when one is active: the analytic flash-attention time × (learned / analytic) of the prefill of the
    /// same B, L, A, G (0 → A), D. None when no such model is active or it does not answer.
    pub(super) fn flash_attention_via_prefill(
        &self,
        shape: &OpShape,
        dtype: Precision,
    ) -> Option<Result<Timed, UnsupportedPrecision>> {
        if shape.class != OpClass::FlashAttention {
            return None;
        }
        let gpu = &self.analytic.system().gpu;
        let (model, instead_of) = self.model_for(OpClass::AttentionPrefill, Phase::Fwd, dtype)?;
        let [b, l, a, d, g] = shape.dims;
        let prefill = OpShape::new(OpClass::AttentionPrefill, Phase::Fwd, &[b, l, a, if g == 0 { a } else { g }, d]);
        let learned = match self.corrected(&prefill, dtype, model, instead_of) {
            Ok(t) if t.source != Source::Analytic && t.analytic_us > 0.0 => t,
            Ok(_) => return None,
            Err(e) => return Some(Err(e)),
        };
        let ratio = learned.time_us / learned.analytic_us;
        Some(
            roofline::estimate(shape, dtype, gpu).map(|flash| {
                Timed::new(flash.time_us * ratio, flash.time_us, learned.source).with_kernels(flash.kernels)
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::presets;
    use crate::learn::features::op_features;
    use crate::learn::features::OP_FEATURES;
    use crate::learn::fit::{fit, Grid, TrainingSet};
    use crate::learn::lgbm::Model;
    use crate::learn::op_key;
    use crate::learn::{ActiveRegressor, Registry};
    use std::sync::Arc;

    #[test]
    fn flash_attention_is_timed_through_the_prefill_model() {
        let system = presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap();
        // Prefill rows measured at 1.5× their analytic time: the model's r̂ is ln 1.5 everywhere (LightGBM starts
        // from the mean label).
        let mut set = TrainingSet::new(&OP_FEATURES);
        let mut key = 0;
        for b in [1u64, 4, 16] {
            for l in [512u64, 2048, 8192] {
                for (a, g) in [(8u64, 8u64), (16, 16), (32, 8), (64, 8)] {
                    let shape = OpShape::new(OpClass::AttentionPrefill, Phase::Fwd, &[b, l, a, g, 128]);
                    let cost = roofline::estimate(&shape, Precision::Bf16, &system.gpu).unwrap();
                    let x = op_features(&shape, Precision::Bf16, &system.gpu, &cost);
                    set.push(&x, cost.time_us, cost.time_us * 1.5, key);
                    key += 1;
                }
            }
        }
        let fitted = fit(&set, Grid::Minimal, &mut |_| {}).unwrap();
        let model = ActiveRegressor {
            key: op_key(OpClass::AttentionPrefill, Phase::Fwd, Precision::Bf16, None, None),
            version: 3,
            model: Model::from_text(&fitted.model_text).unwrap(),
            feature_names: OP_FEATURES.iter().map(|s| s.to_string()).collect(),
            validation_mape: fitted.validation.mape,
            summary: serde_json::Value::Null,
        };
        let learned = LearnedBackend::new(system.clone(), Arc::new(Registry::new([model])));
        let analytic = LearnedBackend::new(system.clone(), Arc::new(Registry::default()));
        for phase in [Phase::Fwd, Phase::Bwd] {
            // Two sequences of 4096 tokens, 16 query heads and 4 key/value heads of 128 on this GPU.
            let flash = OpShape::new(OpClass::FlashAttention, phase, &[2, 4096, 16, 128, 4]);
            let bare = roofline::estimate(&flash, Precision::Bf16, &system.gpu).unwrap().time_us;
            let t = learned.compute_uncached(&flash, Precision::Bf16).unwrap();
            assert_eq!(t.source.to_string(), "regressor:attention_prefill.fwd.bf16@v3");
            assert_eq!(t.analytic_us, bare);
            assert!((t.time_us / bare - 1.5).abs() < 1e-6, "{phase:?}: {} vs {bare}", t.time_us);
            // No prefill model of this precision (fp16), or none at all: analytic.
            assert_eq!(learned.compute_uncached(&flash, Precision::Fp16).unwrap().source, Source::Analytic);
            assert_eq!(analytic.compute_uncached(&flash, Precision::Bf16).unwrap().time_us, bare);
        }
        // The backward is 2.5× the forward's FLOPs at 0.87 of its FLOP rate (FlashAttention-3's Fig. 5 and 6):
        // compute-bound at this size, so about 2.5 / 0.87 = 2.87×.
        let f = learned.compute_uncached(
            &OpShape::new(OpClass::FlashAttention, Phase::Fwd, &[2, 4096, 16, 128, 4]),
            Precision::Bf16,
        );
        let b = learned.compute_uncached(
            &OpShape::new(OpClass::FlashAttention, Phase::Bwd, &[2, 4096, 16, 128, 4]),
            Precision::Bf16,
        );
        let ratio = b.unwrap().time_us / f.unwrap().time_us;
        assert!((2.75..2.95).contains(&ratio), "{ratio}");
    }
}

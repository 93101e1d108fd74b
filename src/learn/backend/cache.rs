//! The process-wide cache of the learned backend's operator times, and the batched prefetch that fills it with one
//! LightGBM call per model (moved out of `src/learn/backend.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use super::{source_of, LearnedBackend};
use crate::cost::roofline;
use crate::cost::{CostBackend, KernelChoice, Timed};
use crate::hw::Precision;
use crate::learn::features::op_features;
use crate::learn::fit::MAX_ABS_LOG_RATIO;
use crate::learn::ActiveRegressor;
use crate::op::{KernelFamily, OpClass, OpShape};

/// Key of a cached operator time: the registry generation, the GPU description's hash, whose kernels, the operator
/// and precision.
pub(super) type CacheKey = (u64, u64, KernelChoice, OpShape, Precision);
/// Operator times already computed, shared by every request: repeated predictions (schedulers polling, searches
/// over configurations) re-use the shapes they share. Bounded; a registry swap changes the generation, so stale
/// entries are never read and age out.
pub(super) fn cache() -> &'static moka::sync::Cache<CacheKey, Timed> {
    static CACHE: std::sync::OnceLock<moka::sync::Cache<CacheKey, Timed>> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| moka::sync::Cache::new(200_000))
}

pub(super) fn gpu_hash(gpu: &crate::hw::GpuSpec) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    // The serialized description covers every number a model reads.
    serde_json::to_string(gpu).unwrap_or_default().hash(&mut h);
    h.finish()
}

impl LearnedBackend {
    /// [`CostBackend::prefetch`](crate::cost::CostBackend::prefetch): groups the uncached shapes that have a model of
    /// their own by model and predicts each group in one LightGBM call.
    pub(super) fn prefetch_batched(&self, ops: &[(OpShape, Precision)]) {
        let gpu = &self.analytic.system().gpu;
        let generation = self.registry.generation();
        type Group<'m> = (&'m ActiveRegressor, Option<KernelFamily>, Vec<(OpShape, Precision, f64, u32)>, Vec<f64>);
        let mut groups: HashMap<(*const ActiveRegressor, Option<KernelFamily>), Group> = HashMap::new();
        let mut seen = std::collections::HashSet::new();
        for &(shape, dtype) in ops {
            let key = (generation, self.gpu_hash, self.kernels, shape, dtype);
            if !seen.insert(key) || cache().contains_key(&key) {
                continue;
            }
            let Some((model, instead_of)) = self.model_for(shape.class, shape.phase, dtype) else { continue };
            // Answers [`LearnedBackend::static_activation_scale`] and [`LearnedBackend::fastest_engine_kernel`]
            // adjust are left to `compute`.
            if self.kernels == KernelChoice::Engine(KernelFamily::Trtllm)
                && ((dtype == Precision::Fp8 && shape.class == OpClass::Linear)
                    || (dtype == Precision::Nvfp4 && matches!(shape.class, OpClass::Linear | OpClass::Moe)))
            {
                continue;
            }
            let Ok(cost) = roofline::estimate(&shape, dtype, gpu) else { continue };
            let entry = groups
                .entry((Arc::as_ptr(model), instead_of))
                .or_insert_with(|| (model.as_ref(), instead_of, Vec::new(), Vec::new()));
            entry.2.push((shape, dtype, cost.time_us, cost.kernels));
            entry.3.extend_from_slice(&op_features(&shape, dtype, gpu, &cost));
        }
        for (model, instead_of, rows, x) in groups.into_values() {
            let Ok(r) = model.model.predict(&x) else { continue };
            for ((shape, dtype, analytic_us, kernels), r) in rows.into_iter().zip(r) {
                let time_us = analytic_us * r.clamp(-MAX_ABS_LOG_RATIO, MAX_ABS_LOG_RATIO).exp();
                let t = Timed::new(time_us, analytic_us, source_of(model, instead_of)).with_kernels(kernels);
                cache().insert((generation, self.gpu_hash, self.kernels, shape, dtype), t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::CostBackend;
    use crate::hw::presets;
    use crate::learn::features::OP_FEATURES;
    use crate::learn::fit::{fit, Grid, TrainingSet};
    use crate::learn::lgbm::Model;
    use crate::learn::op_key;
    use crate::learn::Registry;
    use crate::op::Phase;

    #[test]
    fn prefetched_answers_are_the_ones_compute_gives() {
        let system = presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap();
        // A small linear-forward model on synthetic rows (analytic time × a shape-dependent factor).
        let mut set = TrainingSet::new(&OP_FEATURES);
        let mut key = 0;
        for m in [64u64, 256, 1024, 4096, 16384] {
            for n in [128u64, 512, 2048, 8192] {
                for k in [256u64, 1024, 4096] {
                    let shape = OpShape::new(OpClass::Linear, Phase::Fwd, &[1, m, n, k]);
                    let cost = roofline::estimate(&shape, Precision::Bf16, &system.gpu).unwrap();
                    let x = op_features(&shape, Precision::Bf16, &system.gpu, &cost);
                    set.push(&x, cost.time_us, cost.time_us * (1.2 + (m as f64).ln() / 20.0), key);
                    key += 1;
                }
            }
        }
        let fitted = fit(&set, Grid::Minimal, &mut |_| {}).unwrap();
        let model = ActiveRegressor {
            key: op_key(OpClass::Linear, Phase::Fwd, Precision::Bf16, None, None),
            version: 1,
            model: Model::from_text(&fitted.model_text).unwrap(),
            feature_names: OP_FEATURES.iter().map(|s| s.to_string()).collect(),
            validation_mape: fitted.validation.mape,
            summary: serde_json::Value::Null,
        };
        let b = LearnedBackend::new(system, Arc::new(Registry::new([model])));
        let shapes: Vec<(OpShape, Precision)> = [(8192u64, 1280u64, 8192u64), (4096, 7168, 8192), (777, 333, 999)]
            .iter()
            .map(|&(m, n, k)| (OpShape::new(OpClass::Linear, Phase::Fwd, &[1, m, n, k]), Precision::Bf16))
            .collect();
        b.prefetch(&shapes);
        for (shape, dtype) in &shapes {
            let cached = b.compute(shape, *dtype).unwrap();
            assert_eq!(cached, b.compute_uncached(shape, *dtype).unwrap());
            assert!(cached.source.to_string().starts_with("regressor:"));
        }
    }
}

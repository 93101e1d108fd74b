//! The learned backend: the analytic time corrected by an active regressor, t = t_analytic · exp(r̂)
//! (MODELS.md §4; S1's per-operator regressors, hardware-aware as in DESIGN.md "The hybrid model").
//!
//! Lookup order for an operator on GPU g, for each engine the backend's [`KernelChoice`] asks in turn (a serving
//! engine's own kernels, then the closest engine's, [`crate::op::KernelFamily::closest`]; vLLM's are the models
//! without an engine in their key, with the engine-neutral measurements): the per-GPU model of (class, phase,
//! dtype, engine, g), else — fp16 on a GPU whose fp16 and bf16 peaks are equal — its per-GPU bf16 model, else the
//! cross-GPU model of (class, phase, dtype, engine) ([`Registry::op_on_family`]); an answer from another engine
//! than the first asked names it (`… (trtllm not measured)`). TensorRT-LLM's own adjustments of its answers are in
//! [`engine_kernels`]; operators without a model of their own timed through another's (a GEMM's backward, training's
//! flash attention) in [`stand_in`]; collectives in [`collective`]; the process-wide cache and batched prefetch in
//! [`cache`]. Otherwise the answer is analytic and says so.
//!
//! This module owns the backend itself: its construction, the model lookup, one corrected answer and the
//! [`CostBackend`] implementation that composes the submodules.

mod cache;
mod collective;
mod engine_kernels;
mod stand_in;

use std::sync::Arc;

use crate::comm::calibrated::SystemCalibration;
use crate::comm::Group;
use crate::cost::roofline::{self, UnsupportedPrecision};
use crate::cost::{AnalyticBackend, CostBackend, KernelChoice, Source, Timed};
use crate::hw::{Precision, System};
use crate::learn::fit::MAX_ABS_LOG_RATIO;
use crate::learn::registry::measured_sibling;
use crate::learn::{features::op_features, ActiveRegressor, Registry};
use crate::op::Collective;
use crate::op::{KernelFamily, OpClass, OpShape, Phase};

use cache::{cache, gpu_hash};

/// Analytic times corrected by the registry's active models. A learned collective is never faster than the
/// links the baseline used allow ([`comm::link_bound_us`]). A serving engine's all-reduce within one node is its
/// measured kernel's time ([`comm::engine_allreduce`]), under the same link bound.
#[derive(Debug, Clone)]
pub struct LearnedBackend {
    analytic: AnalyticBackend,
    registry: Arc<Registry>,
    gpu_hash: u64,
    calibration: Option<Arc<SystemCalibration>>,
    kernels: KernelChoice,
}

impl LearnedBackend {
    /// A backend for `system` reading `registry` (a snapshot: it does not change under the backend), answering with
    /// the engine-neutral models ([`KernelChoice::Neutral`]).
    pub fn new(system: System, registry: Arc<Registry>) -> LearnedBackend {
        let gpu_hash = gpu_hash(&system.gpu);
        LearnedBackend {
            analytic: AnalyticBackend::new(system),
            registry,
            gpu_hash,
            calibration: None,
            kernels: KernelChoice::Neutral,
        }
    }

    /// Answers with the models of `kernels` (a serving engine's, or training's; see the module doc).
    pub fn with_kernels(mut self, kernels: KernelChoice) -> LearnedBackend {
        self.kernels = kernels;
        self
    }

    /// The model that answers (class, phase, dtype) on this GPU under the backend's [`KernelChoice`], and the engine
    /// it stands in for when it is not the first asked.
    fn model_for(
        &self,
        class: OpClass,
        phase: Phase,
        dtype: Precision,
    ) -> Option<(&Arc<ActiveRegressor>, Option<KernelFamily>)> {
        let gpu = &self.analytic.system().gpu;
        let families = self.kernels.families(class, dtype);
        let asked = families.first().copied()?;
        families.iter().find_map(|&f| {
            let segment = f.key_segment().map(|_| f);
            let model = self.registry.op_on_family(class, phase, dtype, segment, gpu);
            model.map(|m| (m, (f != asked).then_some(asked)))
        })
    }

    /// Uses the system's communication calibration for collectives (see [`SystemCalibration::estimate`]).
    pub fn with_calibration(mut self, calibration: Option<Arc<SystemCalibration>>) -> LearnedBackend {
        self.calibration = calibration;
        self
    }

    fn corrected(
        &self,
        shape: &OpShape,
        dtype: Precision,
        model: &ActiveRegressor,
        instead_of: Option<KernelFamily>,
    ) -> Result<Timed, UnsupportedPrecision> {
        let gpu = &self.analytic.system().gpu;
        let cost = roofline::estimate(shape, dtype, gpu)?;
        let (fitted, rows_scale) = within_fitted_rows(shape, model.trained_dim_max(LINEAR_M).unwrap_or(0));
        let fitted_cost = if rows_scale > 1.0 { roofline::estimate(&fitted, dtype, gpu)? } else { cost.clone() };
        // A model that never measured this GPU but measured a same-die sibling answers as for the sibling: r̂ at the
        // sibling's features, applied to this GPU's roofline (`registry::measured_sibling`).
        let x = match measured_sibling(model, gpu) {
            Some(sibling) => op_features(&fitted, dtype, sibling, &roofline::estimate(&fitted, dtype, sibling)?),
            None => op_features(&fitted, dtype, gpu, &fitted_cost),
        };
        let time_us = match model.model.predict(&x) {
            Ok(r) => rows_scale * fitted_cost.time_us * r[0].clamp(-MAX_ABS_LOG_RATIO, MAX_ABS_LOG_RATIO).exp(),
            Err(e) => {
                tracing::warn!(key = %model.key, error = %e, "regressor failed; answering analytically");
                return Ok(Timed::new(cost.time_us, cost.time_us, Source::Analytic).with_kernels(cost.kernels));
            }
        };
        Ok(Timed::new(time_us, cost.time_us, source_of(model, instead_of)).with_kernels(cost.kernels))
    }
}

/// A GEMM taller than any its model was fitted on, as the fitted rows can time it: the GEMM cut along M into the
/// fewest equal slices no taller than `max_rows` (the tallest fitted GEMM), and the factor (M / slice rows)
/// that scales one slice's time to the whole; `(shape, 1.0)` for other operators, for GEMMs within the fitted rows
/// and when the range is unknown (`max_rows` 0).
///
/// Why: past the fitted range a tree ensemble answers with its edge leaves' correction, but the analytic model's
/// features (waves, tile quantities, bytes over L2) keep moving, so the correction no longer belongs to the shape
/// (training's routed expert GEMMs on Blackwell ask for M = 131,072–262,144 rows against aiconfigurator's largest
/// measured m = 32,768 and came out 9–20 % below the measured rate at m = 32,768). A GEMM whose M already fills many
/// waves of output tiles keeps its throughput as M grows (its time is linear in the number of waves: NVIDIA's Deep
/// Learning Performance guide, "Matrix Multiplication Background", § wave quantization), so equal slices at a fitted
/// height time the whole.
fn within_fitted_rows(shape: &OpShape, max_rows: u64) -> (OpShape, f64) {
    let rows = shape.dims[LINEAR_M];
    if shape.class != OpClass::Linear || max_rows == 0 || rows <= max_rows {
        return (*shape, 1.0);
    }
    let slices = rows.div_ceil(max_rows);
    let slice_rows = rows.div_ceil(slices);
    let mut slice = *shape;
    slice.dims[LINEAR_M] = slice_rows;
    (slice, rows as f64 / slice_rows as f64)
}

/// Index of M in a linear operator's dims (B, M, N, K; [`crate::op`]'s shape table).
const LINEAR_M: usize = 1;

/// The source of `model`'s answers, standing in for `instead_of`'s kernels when given.
fn source_of(model: &ActiveRegressor, instead_of: Option<KernelFamily>) -> Source {
    match model.source() {
        Source::Regressor { key, version, .. } => Source::Regressor { key, version, instead_of },
        other => other,
    }
}

impl LearnedBackend {
    /// [`CostBackend::compute`] without the process-wide cache: what a shape costs the first time.
    pub fn compute_uncached(&self, shape: &OpShape, dtype: Precision) -> Result<Timed, UnsupportedPrecision> {
        if let Some((model, instead_of)) = self.model_for(shape.class, shape.phase, dtype) {
            let t = self.corrected(shape, dtype, model, instead_of)?;
            let t = self.fastest_engine_kernel(shape, dtype, t);
            return Ok(self.static_activation_scale(shape, dtype, t));
        }
        if let Some(t) = self.gemm_backward_via_forward(shape, dtype) {
            return t;
        }
        if let Some(t) = self.flash_attention_via_prefill(shape, dtype) {
            return t;
        }
        self.analytic.compute(shape, dtype)
    }
}

impl CostBackend for LearnedBackend {
    fn system(&self) -> &System {
        self.analytic.system()
    }

    fn network_calibrated(&self) -> bool {
        self.calibration.is_some()
    }

    fn compute(&self, shape: &OpShape, dtype: Precision) -> Result<Timed, UnsupportedPrecision> {
        let key = (self.registry.generation(), self.gpu_hash, self.kernels, *shape, dtype);
        if let Some(t) = cache().get(&key) {
            return Ok(t);
        }
        let t = self.compute_uncached(shape, dtype)?;
        cache().insert(key, t.clone());
        Ok(t)
    }

    fn collective(&self, c: Collective, bytes: f64, group: Group, active_per_node: u32) -> Timed {
        self.learned_collective(c, bytes, group, active_per_node)
    }

    /// Groups the uncached shapes that have a model of their own by model and predicts each group in one LightGBM
    /// call; the answers go to the process-wide cache exactly as [`CostBackend::compute`] would have put them
    /// (shapes without a direct model are left to `compute`).
    fn prefetch(&self, ops: &[(OpShape, Precision)]) {
        self.prefetch_batched(ops)
    }
}

#[cfg(test)]
mod kernel_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::presets;
    use crate::learn::features::OP_FEATURES;
    use crate::learn::fit::{fit, Grid, TrainingSet};
    use crate::learn::lgbm::Model;
    use crate::learn::op_key;

    /// A forward GEMM model of `precision` (key GPU `gpu`, None: cross-GPU) fitted on B300's rooflines of every m in
    /// `ms` and n, k in `nks`, labelled `measured_us(roofline µs)`; its summary is empty. Returns it and its row count.
    fn b300_gemm_model(
        precision: Precision,
        gpu: Option<&str>,
        ms: &[u64],
        nks: &[u64],
        measured_us: impl Fn(f64) -> f64,
    ) -> (ActiveRegressor, usize) {
        let b300 = presets().into_iter().find(|p| p.name == "dgx-b300").unwrap().resolve().unwrap();
        let mut set = TrainingSet::new(&OP_FEATURES);
        let mut rows = 0;
        for &m in ms {
            for &n in nks {
                for &k in nks {
                    let shape = OpShape::new(OpClass::Linear, Phase::Fwd, &[1, m, n, k]);
                    let cost = roofline::estimate(&shape, precision, &b300.gpu).unwrap();
                    let x = op_features(&shape, precision, &b300.gpu, &cost);
                    set.push(&x, cost.time_us, measured_us(cost.time_us), rows);
                    rows += 1;
                }
            }
        }
        let fitted = fit(&set, Grid::Minimal, &mut |_| {}).unwrap();
        let model = ActiveRegressor {
            key: op_key(OpClass::Linear, Phase::Fwd, precision, None, gpu),
            version: 1,
            model: Model::from_text(&fitted.model_text).unwrap(),
            feature_names: OP_FEATURES.iter().map(|s| s.to_string()).collect(),
            validation_mape: fitted.validation.mape,
            summary: serde_json::Value::Null,
        };
        (model, rows as usize)
    }

    #[test]
    fn a_same_die_siblings_model_answers_at_this_gpus_own_peak() {
        // A B300-only fp8 GEMM model that learned "1.25 × the roofline" everywhere (constant labels: every leaf holds
        // ln 1.25), asked about GB300, which has no model of its own: the answer is GB300's roofline × 1.25, the
        // B300's efficiency at GB300's peak. For m = n = k = 16,384 (compute-bound: 2·16,384³ = 8.80e12 FLOP against
        // 3 × 16,384² B = 805 MB, 0.1 ms at 8 TB/s) the two rooflines share the tiling of 148 SMs and differ only in
        // the dense fp8 peak, 4,500 TFLOP/s (HGX B300) against 5,000 (GB300 NVL72): the compute term scales by
        // 4,500 / 5,000 = 0.9, the memory term (8 TB/s on both) not at all, so GB300 / B300 lies just above 0.9.
        let find = |name: &str| presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap();
        let (b300, gb300) = (find("dgx-b300"), find("gb300-nvl72"));
        let sizes = [256u64, 1024, 2048, 4096, 16384];
        let (model, _) = b300_gemm_model(Precision::Fp8, Some("B300"), &sizes, &[512, 1024, 4096, 16384], |t| t * 1.25);
        let registry = Arc::new(Registry::new([model]));
        let shape = OpShape::new(OpClass::Linear, Phase::Fwd, &[1, 16384, 16384, 16384]);
        let on =
            |system: System| LearnedBackend::new(system, registry.clone()).compute_uncached(&shape, Precision::Fp8);
        let (b, g) = (on(b300).unwrap(), on(gb300).unwrap());
        assert_eq!(g.source.to_string(), b.source.to_string());
        assert!(g.source.to_string().starts_with("regressor:linear.fwd.fp8.B300"), "{}", g.source);
        assert!((b.time_us / b.analytic_us - 1.25).abs() < 0.01, "{b:?}");
        assert!((g.time_us / g.analytic_us - 1.25).abs() < 0.01, "{g:?}");
        let ratio = g.time_us / b.time_us;
        assert!((0.9..0.92).contains(&ratio), "{ratio}");
    }

    #[test]
    fn a_cross_gpu_model_answers_a_gpu_it_never_saw_as_for_the_same_die_sibling_it_measured() {
        // A cross-GPU NVFP4 GEMM model (no GPU in its key) whose rows are B300's only (`summary.gpus`), measured at
        // 20 µs + 1.2 × the roofline: its correction r̂ = ln(t / t_roofline) falls with the size, so it depends on
        // the roofline times among the features. Asked about GB300 (no rows, no model of its own, B300's die), it
        // answers with B300's r̂ for the shape at GB300's roofline: the two answers then differ exactly by the
        // rooflines' ratio. For m = n = k = 16,384 the rooflines share the tiling of 148 SMs and differ in the dense
        // FP4 peak, 13,500 TFLOP/s (HGX B300) against 15,000 (GB300 NVL72): the GEMM's 2 · 16,384³ = 8.80e12 FLOP
        // take 651.6 against 586.4 µs, while the input's quantization (16,384² elements read in 16 bits and
        // written in 4 with a 1-byte scale per 16: 2.5625 B each, 688 MB ≈ 86 µs at the 8 TB/s of both) and the
        // launches do not change: (586.4 + 86) / (651.6 + 86) ≈ 0.912.
        let find = |name: &str| presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap();
        let (b300, gb300) = (find("dgx-b300"), find("gb300-nvl72"));
        let sizes = [256u64, 1024, 2048, 4096, 8192, 16384];
        let (model, rows) =
            b300_gemm_model(Precision::Nvfp4, None, &sizes, &[512, 1024, 4096, 8192, 16384], |t| 20.0 + 1.2 * t);
        let registry = Arc::new(Registry::new([ActiveRegressor {
            summary: serde_json::json!({"gpus": {"B300": rows}}),
            ..model
        }]));
        let model = registry.get("linear.fwd.nvfp4").unwrap();
        assert_eq!(measured_sibling(model, &gb300.gpu).map(|g| g.name.as_str()), Some("B300"));
        assert!(measured_sibling(model, &b300.gpu).is_none());
        let shape = OpShape::new(OpClass::Linear, Phase::Fwd, &[1, 16384, 16384, 16384]);
        let on =
            |system: System| LearnedBackend::new(system, registry.clone()).compute_uncached(&shape, Precision::Nvfp4);
        let (b, g) = (on(b300).unwrap(), on(gb300).unwrap());
        assert_eq!(g.source.to_string(), "regressor:linear.fwd.nvfp4@v1");
        // The same r̂ on both: the learned times scale exactly as the rooflines do.
        assert!((g.time_us / b.time_us - g.analytic_us / b.analytic_us).abs() < 1e-12, "{g:?} {b:?}");
        let ratio = g.time_us / b.time_us;
        assert!((0.905..0.92).contains(&ratio), "{ratio}");
    }

    #[test]
    fn a_gemm_taller_than_the_fitted_rows_is_timed_as_equal_fitted_slices() {
        let linear = |m: u64| OpShape::new(OpClass::Linear, Phase::Fwd, &[1, m, 4096, 4096]);
        // 262,144 rows against a fitted 32,768: ⌈262,144 / 32,768⌉ = 8 slices of 32,768 rows, × 8.
        let (slice, scale) = within_fitted_rows(&linear(262_144), 32_768);
        assert_eq!((slice.dims, scale), (linear(32_768).dims, 8.0));
        // 100,000 rows: ⌈100,000 / 32,768⌉ = 4 slices of ⌈100,000 / 4⌉ = 25,000 rows, × 100,000 / 25,000 = 4.
        let (slice, scale) = within_fitted_rows(&linear(100_000), 32_768);
        assert_eq!((slice.dims, scale), (linear(25_000).dims, 4.0));
        // 100,001 rows: 4 slices of ⌈100,001 / 4⌉ = 25,001 rows, × 100,001 / 25,001 = 3.99988…
        let (slice, scale) = within_fitted_rows(&linear(100_001), 32_768);
        assert_eq!(slice.dims[LINEAR_M], 25_001);
        assert!((scale - 100_001.0 / 25_001.0).abs() < 1e-12);
        // Within the fitted rows, with no recorded range, and for an operator that is not a GEMM: unchanged.
        for (shape, max) in [(linear(32_768), 32_768), (linear(262_144), 0)] {
            assert_eq!(within_fitted_rows(&shape, max), (shape, 1.0));
        }
        let attention = OpShape::new(OpClass::Bmm, Phase::Fwd, &[64, 262_144, 128, 128]);
        assert_eq!(within_fitted_rows(&attention, 32_768), (attention, 1.0));
    }
}

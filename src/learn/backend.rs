//! The learned backend: the analytic time corrected by an active regressor, t = t_analytic · exp(r̂)
//! (MODELS.md §4; S1's per-operator regressors, hardware-aware as in DESIGN.md "The hybrid model").
//!
//! Lookup order for an operator on GPU g, for each engine the backend's [`KernelChoice`] asks in turn (a serving
//! engine's own kernels, then the closest engine's, [`crate::op::KernelFamily::closest`]; vLLM's are the models
//! without an engine in their key, with the engine-neutral measurements): the per-GPU model of (class, phase,
//! dtype, engine, g), else — fp16 on a GPU whose fp16 and bf16 peaks are equal — its per-GPU bf16 model, else the
//! cross-GPU model of (class, phase, dtype, engine) ([`Registry::op_on_family`]); an answer from another engine
//! than the first asked names it (`… (trtllm not measured)`). TensorRT-LLM serves FP8 checkpoints with static
//! activation scales (ModelOpt's FP8 checkpoints carry `input_scale`; `tensorrt_llm/_torch/modules/linear.py`
//! quantizes with them when present), while aiconfigurator timed its fp8 GEMMs with dynamic scales: a TensorRT-LLM
//! fp8 `linear` for a TensorRT-LLM request loses the measured scale computation (its `quantize_scale` model), as
//! aiconfigurator's own `GEMM.query` does for `fp8_static` on TensorRT-LLM (`sdk/operations/gemm.py`). A GEMM's backward with no backward model of its own is timed as its two GEMMs
//! (dX = dY·Wᵀ, dW = Xᵀ·dY), each through the forward model: they are forward GEMMs of other shapes. Training's
//! flash attention with no `flash_attention` model of its own is timed through the `attention_prefill` forward
//! model of its precision: the prefill of the same B, L, A, G, D is the same causal flash-attention forward (plus
//! the KV-cache write, which the analytic prefill count includes too), so the learned/analytic ratio of that
//! prefill scales the analytic flash-attention time — forward, and backward (2.5× the forward's FLOPs at
//! [`crate::cost::roofline::FLASH_BACKWARD_RATE`] of its rate) until measured backward samples exist. Otherwise the answer is analytic and
//! says so.

use std::collections::HashMap;
use std::sync::Arc;

use crate::comm::calibrated::{CalibrationUse, SystemCalibration};
use crate::comm::{self, CommEstimate, Group, GroupLinks};
use crate::cost::roofline::{self, UnsupportedPrecision};
use crate::cost::{AnalyticBackend, CostBackend, KernelChoice, Source, Timed};
use crate::hw::{Precision, System};
use crate::learn::comm_features::{comm_features, comm_key};
use crate::learn::fit::MAX_ABS_LOG_RATIO;
use crate::learn::{features::op_features, ActiveRegressor, Registry};
use crate::op::Collective;
use crate::op::{KernelFamily, OpClass, OpShape, Phase};

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
        let siblings = !matches!(self.kernels, KernelChoice::Engine(_));
        families.iter().find_map(|&f| {
            let segment = f.key_segment().map(|_| f);
            let model = if siblings {
                self.registry.op_on_family_or_sibling(class, phase, dtype, segment, gpu)
            } else {
                self.registry.op_on_family(class, phase, dtype, segment, gpu)
            };
            model.map(|m| (m, (f != asked).then_some(asked)))
        })
    }

    /// Uses the system's communication calibration for collectives (see [`SystemCalibration::estimate`]).
    pub fn with_calibration(mut self, calibration: Option<Arc<SystemCalibration>>) -> LearnedBackend {
        self.calibration = calibration;
        self
    }

    /// The baseline of a collective before any learned correction: the measured group's fit, the α–β algorithms
    /// over calibrated links, or over the declared links; with the links used and the source.
    pub fn collective_baseline(
        &self,
        c: Collective,
        bytes: f64,
        group: Group,
        active_per_node: u32,
    ) -> (CommEstimate, GroupLinks, Source, bool) {
        let system = self.analytic.system();
        let links = GroupLinks::on(system, active_per_node);
        if let Some(cal) = &self.calibration {
            if let Some((e, how)) = cal.estimate(c, bytes, group, &links) {
                let source = Source::Calibrated { system: system.name.clone() };
                return (e, cal.links(c, group.ranks_per_node, &links), source, how == CalibrationUse::MeasuredGroup);
            }
        }
        (comm::estimate(c, bytes, group, &links), links, Source::Analytic, false)
    }

    /// A serving engine's all-reduce within one node, timed by that engine's measured kernel (or the closest
    /// engine's, named in the source; [`comm::engine_allreduce`]), never faster than the links allow
    /// ([`comm::link_bound_us`]). None for other collectives, other kernel choices (training), groups across nodes
    /// and where no table answers: the NCCL path then times it.
    fn engine_allreduce(
        &self,
        c: Collective,
        bytes: f64,
        group: Group,
        active_per_node: u32,
        analytic_us: f64,
    ) -> Option<Timed> {
        let KernelChoice::Engine(engine) = self.kernels else { return None };
        if c != Collective::AllReduce {
            return None;
        }
        let system = self.analytic.system();
        let m = comm::engine_allreduce::engine_allreduce(engine, system, group.ranks, group.nodes, bytes)?;
        let links = GroupLinks::on(system, active_per_node);
        let t = m.time_us.max(comm::link_bound_us(c, bytes, group, &links));
        let instead_of = (m.engine != engine).then_some(engine);
        Some(Timed::new(t, analytic_us, Source::Measured { table: m.table(), instead_of }))
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
        let x = op_features(shape, dtype, gpu, &cost);
        let time_us = match model.model.predict(&x) {
            Ok(r) => cost.time_us * r[0].clamp(-MAX_ABS_LOG_RATIO, MAX_ABS_LOG_RATIO).exp(),
            Err(e) => {
                tracing::warn!(key = %model.key, error = %e, "regressor failed; answering analytically");
                return Ok(Timed::new(cost.time_us, cost.time_us, Source::Analytic).with_kernels(cost.kernels));
            }
        };
        Ok(Timed::new(time_us, cost.time_us, source_of(model, instead_of)).with_kernels(cost.kernels))
    }

    /// A TensorRT-LLM fp8 `linear` for a TensorRT-LLM request with static activation scales: the measured call
    /// (dynamic scales) less the measured scale computation of its input X[rows, k] (`quantize_scale`, TensorRT-LLM's
    /// own model only), never below the analytic time (see the module doc). Unchanged when no such model is active.
    fn static_activation_scale(&self, shape: &OpShape, dtype: Precision, t: Timed) -> Timed {
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
    fn fastest_engine_kernel(&self, shape: &OpShape, dtype: Precision, t: Timed) -> Timed {
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

    /// The backward of a GEMM class as two forward GEMMs through the forward model, when one is active.
    fn gemm_backward_via_forward(
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
}

impl LearnedBackend {
    /// Training's flash attention (forward or backward) through the `attention_prefill` forward model of its
    /// precision, when one is active: the analytic flash-attention time × (learned / analytic) of the prefill of the
    /// same B, L, A, G (0 → A), D. None when no such model is active or it does not answer.
    fn flash_attention_via_prefill(
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

/// Key of a cached operator time: the registry generation, the GPU description's hash, whose kernels, the operator
/// and precision.
type CacheKey = (u64, u64, KernelChoice, OpShape, Precision);

/// The source of `model`'s answers, standing in for `instead_of`'s kernels when given.
fn source_of(model: &ActiveRegressor, instead_of: Option<KernelFamily>) -> Source {
    match model.source() {
        Source::Regressor { key, version, .. } => Source::Regressor { key, version, instead_of },
        other => other,
    }
}

/// Operator times already computed, shared by every request: repeated predictions (schedulers polling, searches
/// over configurations) re-use the shapes they share. Bounded; a registry swap changes the generation, so stale
/// entries are never read and age out.
fn cache() -> &'static moka::sync::Cache<CacheKey, Timed> {
    static CACHE: std::sync::OnceLock<moka::sync::Cache<CacheKey, Timed>> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| moka::sync::Cache::new(200_000))
}

fn gpu_hash(gpu: &crate::hw::GpuSpec) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    // The serialized description covers every number a model reads.
    serde_json::to_string(gpu).unwrap_or_default().hash(&mut h);
    h.finish()
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
        let analytic_us = self.analytic.collective(c, bytes, group, active_per_node).time_us;
        if let Some(t) = self.engine_allreduce(c, bytes, group, active_per_node, analytic_us) {
            return t;
        }
        let (base, links, source, measured) = self.collective_baseline(c, bytes, group, active_per_node);
        // A measured group's own fit is the best answer; elsewhere the learned correction applies, within the
        // placements it was trained on.
        if !measured {
            let within = |m: &ActiveRegressor| {
                m.trained_max("max_nodes").is_none_or(|n| group.nodes as f64 <= n)
                    && m.trained_max("max_ranks").is_none_or(|r| group.ranks as f64 <= r)
            };
            if let Some(m) = self.registry.get(&comm_key(c)).filter(|m| within(m)) {
                let x = comm_features(c, bytes, group, &links, base.time_us);
                if let Ok(r) = m.model.predict(&x) {
                    let t = base.time_us * r[0].clamp(-MAX_ABS_LOG_RATIO, MAX_ABS_LOG_RATIO).exp();
                    // Learned on other machines, the correction may not make this system's links faster than they
                    // are (a Slingshot-10 node's 4 × 6.25 GB/s answered like a DGX's InfiniBand).
                    let t = t.max(comm::link_bound_us(c, bytes, group, &links));
                    return Timed::new(t, analytic_us, m.source());
                }
            }
        }
        Timed::new(base.time_us, analytic_us, source)
    }

    /// Groups the uncached shapes that have a model of their own by model and predicts each group in one LightGBM
    /// call; the answers go to the process-wide cache exactly as [`CostBackend::compute`] would have put them
    /// (shapes without a direct model are left to `compute`).
    fn prefetch(&self, ops: &[(OpShape, Precision)]) {
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
mod kernel_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::presets;
    use crate::learn::features::OP_FEATURES;
    use crate::learn::fit::{fit, Grid, TrainingSet};
    use crate::learn::lgbm::Model;
    use crate::learn::op_key;

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

    #[test]
    fn a_learned_collective_is_never_faster_than_the_systems_links() {
        use crate::learn::comm_features::COMM_FEATURES;
        let system = presets().into_iter().find(|p| p.name == "perlmutter-a100-40g").unwrap().resolve().unwrap();
        // An all-reduce model that learned "4× faster than the α–β baseline" everywhere (as a model trained on
        // machines with faster networks may answer a Slingshot-10 system): r̂ = ln 0.25 on every row.
        let mut set = TrainingSet::new(&COMM_FEATURES);
        let mut key = 0;
        for (ranks, per_node) in [(2u32, 2u32), (4, 4), (8, 4), (16, 4), (4, 1)] {
            let group = Group::new(ranks, per_node);
            let links = GroupLinks::on(&system, 4);
            for bytes in [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9] {
                let base = comm::estimate(Collective::AllReduce, bytes, group, &links).time_us;
                set.push(&comm_features(Collective::AllReduce, bytes, group, &links, base), base, base * 0.25, key);
                key += 1;
            }
        }
        let fitted = fit(&set, Grid::Minimal, &mut |_| {}).unwrap();
        let model = ActiveRegressor {
            key: comm_key(Collective::AllReduce),
            version: 1,
            model: Model::from_text(&fitted.model_text).unwrap(),
            feature_names: COMM_FEATURES.iter().map(|s| s.to_string()).collect(),
            validation_mape: fitted.validation.mape,
            summary: serde_json::Value::Null,
        };
        let b = LearnedBackend::new(system, Arc::new(Registry::new([model])));
        // tp 8 across two Perlmutter nodes, 100 MB (S1's tensor-parallel all-reduce across Slingshot-10): the
        // baseline is the hierarchical algorithm, 2·3·2 + 2·3/4 · 1e8 / 300e9 + 2·1·5 + 2·1/2 · (1e8/4) / 6.25e9 =
        // 12 + 500 + 10 + 4,000 = 4,522 µs; a quarter of it, 1,130.5 µs, would need each node to export its half of
        // the vector (5e7 B) through its 4 × 6.25 = 25 GB/s in 1,130.5 µs (44 GB/s). The answer is the link bound,
        // 5e7 / 25e9 = 2,000 µs.
        let t = b.collective(Collective::AllReduce, 1e8, Group::new(8, 4), 4);
        assert!(t.source.to_string().starts_with("regressor:comm.all_reduce"), "{}", t.source);
        assert!((t.analytic_us - 4522.0).abs() < 1e-6, "{}", t.analytic_us);
        assert!((t.time_us - 2000.0).abs() < 1e-6, "{}", t.time_us);
        // Within a node the NVLink 3 bound is 3/4 · 1e8 / 300e9 = 250 µs; the baseline (Rabenseifner) 2·2·2 + 2·3/4 ·
        // 1e8 / 300e9 = 508 µs, a quarter of it 127 µs: floored at 250.
        let t = b.collective(Collective::AllReduce, 1e8, Group::new(4, 4), 4);
        assert!((t.time_us - 250.0).abs() < 1e-6, "{}", t.time_us);
        // A 1 kB all-reduce is latency: the baseline (recursive doubling) 2 · (2 + 1e3 / 300e9) = 4.0067 µs, the
        // learned quarter ≈ 1.0 µs (within 5 %: the trees' mean of ln 0.25), far above the bandwidth bound
        // 3/4 · 1e3 / 300e9 = 0.0025 µs: not floored.
        let t = b.collective(Collective::AllReduce, 1e3, Group::new(4, 4), 4);
        assert!((t.analytic_us - 4.0067).abs() < 1e-4, "{}", t.analytic_us);
        assert!((t.time_us / (4.0067 * 0.25) - 1.0).abs() < 0.05, "{}", t.time_us);
    }

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
        let mut set = TrainingSet::new(&OP_FEATURES);
        let mut key = 0;
        for m in [256u64, 1024, 2048, 4096, 16384] {
            for n in [512u64, 1024, 4096, 16384] {
                for k in [512u64, 1024, 4096, 16384] {
                    let shape = OpShape::new(OpClass::Linear, Phase::Fwd, &[1, m, n, k]);
                    let cost = roofline::estimate(&shape, Precision::Fp8, &b300.gpu).unwrap();
                    let x = op_features(&shape, Precision::Fp8, &b300.gpu, &cost);
                    set.push(&x, cost.time_us, cost.time_us * 1.25, key);
                    key += 1;
                }
            }
        }
        let fitted = fit(&set, Grid::Minimal, &mut |_| {}).unwrap();
        let registry = Arc::new(Registry::new([ActiveRegressor {
            key: op_key(OpClass::Linear, Phase::Fwd, Precision::Fp8, None, Some("B300")),
            version: 1,
            model: Model::from_text(&fitted.model_text).unwrap(),
            feature_names: OP_FEATURES.iter().map(|s| s.to_string()).collect(),
            validation_mape: fitted.validation.mape,
            summary: serde_json::Value::Null,
        }]));
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
}

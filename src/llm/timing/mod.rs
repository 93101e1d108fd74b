//! Stage 2 of a prediction — **time**: operator instances timed through a [`CostBackend`], once per distinct piece
//! of work.
//!
//! This stage owns the times and how they add up into passes:
//! - generic over any list of operator instances ([`StageOp`]; a training layer, or a serving step's prefill or
//!   decode operators): the memoizing [`Timer`], the charged time of each instance ([`time_ops`]: an operator
//!   overlapping another is charged only its excess) and a list's forward and backward seconds per pass
//!   ([`pass_seconds`]: GPU time or host time, whichever is longer);
//! - for training (`timing/training.rs`, the composition and the search's path, and
//!   `timing/training/decomposed.rs`, a decomposition timed; re-exported here): every model chunk's forward and
//!   backward seconds per micro-batch ([`chunk_seconds`]) and every stage's tail
//!   ([`crate::llm::pipeline::StageTail`]), from a [`crate::llm::decompose::Decomposition`] ([`time_training`]) or,
//!   without building one, straight from a configuration ([`pieces`], [`P2pTimes`], [`chunk_times`],
//!   [`stage_tail`]: the search's per-candidate path, which must not allocate). Both paths share the arithmetic, so
//!   a configuration the search finds predicts the same time through `POST /v1/predictions/training`.

use rustc_hash::FxHashMap;

use crate::comm::Group;
use crate::cost::{CostBackend, Timed};
use crate::llm::config::{ConfigError, TrainingConfig};
use crate::llm::cuda_graphs::CudaGraphs;
use crate::llm::framework::OptimizerImpl;
use crate::llm::operators::{optimizer_work, OpName, StageOp, Work};
use crate::op::Collective;
use crate::op::{OpShape, Phase};

#[derive(PartialEq, Eq, Hash, Clone, Copy)]
enum WorkKey {
    Compute(OpShape, crate::hw::Precision),
    Collective(Collective, u64, Group, u32),
    WideEp(crate::llm::serving::wideep::WideEpOp),
}

/// A [`Timer`]'s memo table (each distinct piece of work's time), handed from one timer to the next over the same
/// backend ([`Timer::with_cache`], [`Timer::into_cache`]): a backend's answers depend only on the work
/// ([`CostBackend`] is pure).
#[derive(Default)]
pub struct TimerCache(FxHashMap<WorkKey, Timed>);

impl TimerCache {
    /// Forgets every time (for another backend).
    pub fn clear(&mut self) {
        self.0.clear()
    }
}

/// Times operators through a backend, once per distinct piece of work (a search keeps one timer for all its
/// candidates: operator times depend on shapes, not on the whole configuration).
pub struct Timer<'a> {
    backend: &'a dyn CostBackend,
    /// FxHash: the keys are shapes, precisions and group sizes of validated configurations, never client strings
    /// (no HashDoS exposure).
    cache: FxHashMap<WorkKey, Timed>,
    /// Time multipliers (forward, backward) of the attention kernel the framework calls over the one the backend
    /// times ([`crate::llm::framework::AttentionKernel::slowdown`]); 1 by default.
    attention_scale: (f64, f64),
    /// The attention kernel's time without the causal mask over its causal time, (forward, backward), for the
    /// context-parallel ring's unmasked steps ([`crate::llm::framework::AttentionKernel::full_over_causal`]); 1 by
    /// default.
    full_over_causal: (f64, f64),
    /// How the optimizer step is launched (fused by default).
    optimizer: OptimizerImpl,
    /// Which passes replay as CUDA graphs (none by default).
    graphs: CudaGraphs,
}

/// Optimizer parameter tensors per transformer layer (two norm weights, the QKV, output, up — gate and up with
/// SwiGLU — and down projections: 6–7), and beyond the layers (embedding, final norm, LM head): what a per-tensor
/// optimizer loops over ([`OptimizerImpl::launches`]).
pub const TENSORS_PER_LAYER: f64 = 7.0;
/// See [`TENSORS_PER_LAYER`].
pub const TENSORS_BEYOND_LAYERS: f64 = 3.0;

/// Optimizer parameter tensors on one GPU of a stage of `layers` transformer layers, `moe_layers` of them MoE
/// layers: [`TENSORS_PER_LAYER`] per layer and [`TENSORS_BEYOND_LAYERS`]; an MoE layer trades its dense MLP's three
/// projections for the router's weight and a gate, up and down projection per local expert and for the shared
/// experts (Hugging Face's `Qwen3MoeSparseMoeBlock` holds one `Qwen3MoeMLP` per expert; Transformer Engine's
/// `GroupedLinear` one weight per local expert and projection).
pub fn optimizer_tensors(cfg: &TrainingConfig, layers: u32, moe_layers: u32) -> f64 {
    let dense = layers as f64 * TENSORS_PER_LAYER + TENSORS_BEYOND_LAYERS;
    let Some(moe) = &cfg.moe else { return dense };
    let mlps = moe.local_experts() as f64 + if moe.config.shared_ffn_hidden > 0 { 1.0 } else { 0.0 };
    dense + moe_layers.min(layers) as f64 * (1.0 + 3.0 * mlps - 3.0)
}

impl<'a> Timer<'a> {
    /// A timer over `backend` with an empty cache (Megatron's kernels).
    pub fn new(backend: &'a dyn CostBackend) -> Timer<'a> {
        Timer {
            backend,
            cache: FxHashMap::default(),
            attention_scale: (1.0, 1.0),
            full_over_causal: (1.0, 1.0),
            optimizer: OptimizerImpl::Fused,
            graphs: CudaGraphs::None,
        }
    }

    /// [`Timer::new`] remembering the times in `cache`, which must come from a timer over the same backend.
    pub fn with_cache(backend: &'a dyn CostBackend, cache: TimerCache) -> Timer<'a> {
        Timer { cache: cache.0, ..Timer::new(backend) }
    }

    /// The times this timer remembers, for the next timer over the same backend.
    pub fn into_cache(self) -> TimerCache {
        TimerCache(self.cache)
    }

    /// A timer over `backend` for `cfg`'s framework: its attention kernel and optimizer implementation.
    pub fn for_training(backend: &'a dyn CostBackend, cfg: &TrainingConfig) -> Timer<'a> {
        let fw = &cfg.framework;
        Timer {
            attention_scale: fw.attention.slowdown(&backend.system().gpu),
            full_over_causal: fw.attention.full_over_causal(&backend.system().gpu),
            optimizer: fw.optimizer,
            graphs: fw.cuda_graphs,
            ..Timer::new(backend)
        }
    }

    /// Forward and backward seconds of one transformer layer's `ops` (timed as `timed`) under the framework's
    /// CUDA graphs: [`pass_seconds_with`] with the layer's host time per pass as
    /// [`CudaGraphs::layer_host_us`] gives it (one graph launch costs one kernel's host time).
    pub fn layer_seconds(&self, ops: &[StageOp], timed: &[TimedOp]) -> (f64, f64) {
        let host_us = self.host_us();
        let graphs = self.graphs;
        pass_seconds_with(ops, timed, |eager| graphs.layer_host_us(eager, host_us))
    }

    /// The host time of one kernel launch, µs ([`crate::cost::Efficiency::host_us`]; 0 for a backend without
    /// efficiencies).
    pub fn host_us(&self) -> f64 {
        self.backend.efficiency().map_or(0.0, |e| e.host_us)
    }

    /// Which passes replay as CUDA graphs.
    pub fn graphs(&self) -> CudaGraphs {
        self.graphs
    }

    /// Forward and backward seconds of operators outside the layers (embedding, head) under the framework's CUDA
    /// graphs ([`CudaGraphs::outside_host_us`]).
    pub fn outside_seconds(&self, ops: &[StageOp], timed: &[TimedOp]) -> (f64, f64) {
        let graphs = self.graphs;
        pass_seconds_with(ops, timed, |eager| graphs.outside_host_us(eager))
    }

    /// The time multipliers (forward, backward) of the framework's attention kernel.
    pub fn attention_scale(&self) -> (f64, f64) {
        self.attention_scale
    }

    /// The backend.
    pub fn backend(&self) -> &'a dyn CostBackend {
        self.backend
    }

    /// The contention κ of overlapped communication ([`crate::cost::Efficiency::overlap_slowdown`]; 0 for a
    /// backend without efficiencies, e.g. the bare roofline).
    pub fn contention(&self) -> f64 {
        self.backend.efficiency().map_or(0.0, |e| e.overlap_slowdown)
    }

    /// The time of `work`. Errors: a precision the GPU has no path for (field `precision`).
    pub fn time(&mut self, work: &Work) -> Result<Timed, ConfigError> {
        let key = match *work {
            Work::Compute { shape, dtype } => WorkKey::Compute(shape, dtype),
            Work::Collective { collective, bytes, group, active_per_node } => {
                WorkKey::Collective(collective, bytes.to_bits(), group, active_per_node)
            }
            Work::WideEp(op) => WorkKey::WideEp(op),
        };
        if let Some(t) = self.cache.get(&key) {
            return Ok(t.clone());
        }
        let t = match *work {
            Work::Compute { shape, dtype } => self
                .backend
                .compute(&shape, dtype)
                .map_err(|e| ConfigError { field: "precision".into(), message: e.to_string() })?,
            Work::Collective { collective, bytes, group, active_per_node } => {
                self.backend.collective(collective, bytes, group, active_per_node)
            }
            // The serving step emits this work only where a table answers (`serving::step`'s `moe_block`).
            Work::WideEp(op) => crate::llm::serving::wideep::timed(&op, self.backend.system()).ok_or_else(|| {
                ConfigError { field: "parallelism.ep".into(), message: format!("no SGLang wide-EP table times {op:?}") }
            })?,
        };
        self.cache.insert(key, t.clone());
        Ok(t)
    }

    /// Seconds of `c` of `bytes` over `group` (0 for a group of one rank).
    pub fn collective_s(&mut self, c: Collective, bytes: f64, group: Group, active: u32) -> Result<f64, ConfigError> {
        if group.ranks <= 1 {
            return Ok(0.0);
        }
        Ok(self.time(&Work::Collective { collective: c, bytes, group, active_per_node: active })?.time_us * 1e-6)
    }

    /// Seconds of the Adam step over `params` parameters in `tensors` tensors (timed under the training's
    /// non-GEMM precision, the key its regressor is trained under), as [`Timer::optimizer`].
    pub fn optimizer_s(&mut self, params: f64, dtype: crate::hw::Precision, tensors: f64) -> Result<f64, ConfigError> {
        Ok(self.optimizer(&optimizer_work(params, dtype), tensors)?.time_us * 1e-6)
    }

    /// The Adam step `work` (a fused step's work over the stage's parameters) as the framework launches it over
    /// `tensors` parameter tensors: the fused kernel's time × [`OptimizerImpl::passes`] (the state passes of the
    /// unfused implementations), and at least its launches' host time ([`OptimizerImpl::launches`] ×
    /// [`crate::cost::Efficiency::host_us`]; the CPU issues a per-tensor loop's kernels one by one).
    pub fn optimizer(&mut self, work: &Work, tensors: f64) -> Result<Timed, ConfigError> {
        let t = self.time(work)?;
        if self.optimizer == OptimizerImpl::Fused {
            return Ok(t);
        }
        let host_us = self.optimizer.launches(tensors) * self.backend.efficiency().map_or(0.0, |e| e.host_us);
        let time_us = (t.time_us * self.optimizer.passes()).max(host_us);
        Ok(Timed { time_us, host_us, ..t })
    }
}

/// One operator instance timed: its time per call and the part of it charged to its pass.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedOp {
    /// The backend's time per call (µs), host time and source.
    pub time: Timed,
    /// Per-call charged time, µs: the time, or for an operator overlapping another only its excess.
    pub charged_us: f64,
}

/// The charged seconds (or µs) of a collective of `comm` that overlaps a computation, `exposed` of it not hidden:
/// the exposed part plus the slowdown κ·hidden it inflicts on the computation (contention,
/// [`crate::cost::Efficiency::overlap_slowdown`]).
pub fn overlap_charge(comm: f64, exposed: f64, kappa: f64) -> f64 {
    exposed + kappa * (comm - exposed).max(0.0)
}

/// Every op of `ops` timed, in order (the attention kernel scaled by the framework's
/// [`Timer::attention_scale`], and a context-parallel ring's steps by [`crate::llm::cp::ring_step_scale`]), with its per-call charged time: its time, or for an op overlapping another
/// ([`super::operators::Overlap`]) its exposed part over one call of its partner in `ops` (same phase, same
/// recomputation flag) plus the contention κ × its hidden part ([`overlap_charge`]).
pub fn time_ops(ops: &[StageOp], timer: &mut Timer) -> Result<Vec<TimedOp>, ConfigError> {
    let (fwd_scale, bwd_scale) = timer.attention_scale;
    let (fwd_full, bwd_full) = timer.full_over_causal;
    let timed: Vec<Timed> = ops
        .iter()
        .map(|o| {
            let t = timer.time(&o.work)?;
            // A recomputed forward runs the forward kernel.
            let fwd = o.phase == Phase::Fwd || o.recompute;
            let scale = if fwd { fwd_scale } else { bwd_scale };
            // A layer's FlashAttention calls beyond one are context parallelism's ring steps.
            let scale = scale * crate::llm::cp::ring_step_scale(o.calls, if fwd { fwd_full } else { bwd_full });
            Ok(if o.name == OpName::FlashAttention && scale != 1.0 {
                Timed { time_us: t.time_us * scale, ..t }
            } else {
                t
            })
        })
        .collect::<Result<_, ConfigError>>()?;
    let kappa = timer.contention();
    Ok(ops
        .iter()
        .zip(&timed)
        .map(|(o, t)| {
            let charged_us = match o.overlaps {
                None => t.time_us,
                Some(ov) => {
                    let partner = ops
                        .iter()
                        .zip(&timed)
                        .find(|(p, _)| p.name == ov.with && p.phase == o.phase && p.recompute == o.recompute)
                        .map_or(0.0, |(_, pt)| pt.time_us);
                    overlap_charge(t.time_us, ov.exposed(t.time_us, partner), kappa)
                }
            };
            TimedOp { time: t.clone(), charged_us }
        })
        .collect())
}

/// Forward and backward seconds of `ops` (timed as `timed`, in the same order) per micro-batch: per pass the
/// longer of its GPU time (Σ calls × charged time) and its host time (Σ calls × [`Timed::host_us`]) — the CPU
/// dispatches kernels ahead of the GPU, so a pass of short kernels runs at the host's pace and a pass of long ones
/// at the GPU's (the launch-bound regime of small models and large tensor parallelism).
pub fn pass_seconds(ops: &[StageOp], timed: &[TimedOp]) -> (f64, f64) {
    pass_seconds_with(ops, timed, |host_us| host_us)
}

/// [`pass_seconds`] with each pass's host time (µs, the sum over its kernels) mapped by `host` first (CUDA graphs
/// replace the per-kernel dispatch, [`CudaGraphs`]).
pub fn pass_seconds_with(ops: &[StageOp], timed: &[TimedOp], host: impl Fn(f64) -> f64) -> (f64, f64) {
    let [(f, host_f), (b, host_b)] = pass_sums(ops, timed);
    (f.max(host(host_f)) * 1e-6, b.max(host(host_b)) * 1e-6)
}

/// Per pass (`[forward, backward]`) the GPU time (Σ calls × charged time) and the host time (Σ calls ×
/// [`Timed::host_us`]) of `ops` timed as `timed`, µs.
pub fn pass_sums(ops: &[StageOp], timed: &[TimedOp]) -> [(f64, f64); 2] {
    let mut sums = [(0.0, 0.0); 2];
    for (o, t) in ops.iter().zip(timed) {
        let calls = o.calls as f64;
        let s = &mut sums[usize::from(o.phase == Phase::Bwd)];
        s.0 += calls * t.charged_us;
        s.1 += calls * t.time.host_us;
    }
    sums
}

mod training;
pub use training::*;

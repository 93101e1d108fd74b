//! The cost layer: how long one operator or one collective takes on a system.
//!
//! Owns the [`CostBackend`] trait and its answer ([`Timed`], [`Source`]); the analytic operator roofline with GEMM
//! tiles, waves and split-K ([`roofline`], MODELS.md §2.1); the analytic backend ([`AnalyticBackend`]: roofline for
//! operators, α–β collectives from [`crate::comm`]); and derating by achievable efficiencies ([`derate`]; a collective call's host time, [`host`]). The
//! training predictor asks a [`CostBackend`] for every operator and collective. Learned backends
//! ([`crate::learn::backend::LearnedBackend`]) implement the same trait with a correction t = t_analytic · exp(r̂)
//! (DESIGN.md "The hybrid model"); they live in `learn` because they read its registry and features, and `learn`
//! reads the roofline. Every answer names its [`Source`].
//!
//! May import: `hw`, `op`, `comm`. Must not import `learn`, `llm`, or anything outside the domain core.

pub mod analytic;
pub mod derate;
pub mod host;
pub mod roofline;

use std::fmt;

use serde::{Serialize, Serializer};

use crate::comm::Group;

use crate::hw::{Precision, System};
use crate::op::Collective;
use crate::op::{KernelFamily, OpShape};
use roofline::UnsupportedPrecision;

pub use analytic::AnalyticBackend;
pub use derate::{Derated, Efficiency};

/// Where a time came from: the analytic model, the system's communication calibration, a learned regressor
/// `<key>` at version `n`, or a serving engine's measured table (its own all-reduce,
/// [`crate::comm::engine_allreduce`]) — the last two standing in for the kernels of `instead_of` when the engine
/// asked for ([`KernelChoice`]) has no model or table of this operator and a closer engine's (or the engine-neutral
/// one) answered.
///
/// Serialized as `"analytic"`, `"calibrated:<system>"`, `"regressor:<key>@v<n>"`,
/// `"regressor:<key>@v<n> (<engine> not measured)"`, `"measured:<engine>_allreduce/<GPU>"` or
/// `"measured:<engine>_allreduce/<GPU> (<engine> not measured)"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    Analytic,
    Calibrated { system: String },
    Regressor { key: String, version: i64, instead_of: Option<KernelFamily> },
    Measured { table: String, instead_of: Option<KernelFamily> },
}

impl Source {
    /// The engine whose measured kernels trained the regressor that answered (its key's engine segment: none is
    /// vLLM's and the engine-neutral measurements, [`KernelFamily::key_segment`]); None for other sources.
    pub fn kernel_family(&self) -> Option<KernelFamily> {
        let Source::Regressor { key, .. } = self else { return None };
        let mut parts = key.split('.').skip(3);
        Some(parts.next().and_then(KernelFamily::parse).unwrap_or(KernelFamily::Vllm))
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Analytic => f.write_str("analytic"),
            Source::Calibrated { system } => write!(f, "calibrated:{system}"),
            Source::Regressor { key, version, instead_of: None } => write!(f, "regressor:{key}@v{version}"),
            Source::Regressor { key, version, instead_of: Some(e) } => {
                write!(f, "regressor:{key}@v{version} ({e} not measured)")
            }
            Source::Measured { table, instead_of: None } => write!(f, "measured:{table}"),
            Source::Measured { table, instead_of: Some(e) } => write!(f, "measured:{table} ({e} not measured)"),
        }
    }
}

/// Whose measured kernels a learned backend times operators with (the request's engine, or training's
/// framework), chosen by whoever builds the backend: the domain core asks any [`CostBackend`] the same questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum KernelChoice {
    /// The models without an engine in their key (engine-neutral and vLLM measurements) and nothing else.
    #[default]
    Neutral,
    /// A serving engine's: its own models where they exist, else the closest engine's, in
    /// [`KernelFamily::closest`]'s order (vLLM's being the models without an engine segment); the answer's
    /// [`Source`] names the stand-in.
    Engine(KernelFamily),
    /// Training with Transformer Engine: per-tensor fp8 GEMMs from TensorRT-LLM's measurements first — cuBLASLt FP8 GEMMs as Transformer Engine calls them
    /// (`transformer_engine/common/gemm/cublaslt_gemm.cu`; TensorRT-LLM's `Linear` with `QuantAlgo.FP8` calls
    /// `cublas_scaled_mm`) — falling back to the neutral ones; every other operator as [`KernelChoice::Neutral`],
    /// Transformer Engine's own amax and cast kernels (`fp8_recipe` tensorwise, mxfp8) included: TensorRT-LLM's
    /// PyTorch-op quantization kernels are not theirs.
    Training,
}

/// Whose measured kernels training predictions are timed with (the service's training backend and
/// `perfcast eval training`): [`KernelChoice::Training`] — Transformer Engine runs its fp8 GEMMs through cuBLASLt
/// (`transformer_engine/common/gemm/cublaslt_gemm.cu`, `cublas_gemm`), which aiconfigurator measured as
/// TensorRT-LLM's `cublas_scaled_mm`; vLLM's `CutlassFP8ScaledMMLinearKernel` (the engine-neutral fp8 `linear`
/// models, [`KernelChoice::Neutral`]) is a different kernel: on H100 it runs training-sized GEMMs (m ≥ 8,192,
/// n, k ≥ 4,096; 279 shapes both measured) in 0.95× cuBLASLt's time (median), on B200, GB200 and B300 in 1.17×,
/// 1.14× and 1.16× (one default SM100 tile configuration for m > 256, `scaled_mm_sm100_fp8_dispatch.cuh`
/// `sm100_fp8_config_default`, against cuBLASLt's per-shape heuristics). Both calls quantize the activation
/// inside the timed call; training removes the analytic cast from either ([`crate::cost::derate::fp8_quantize_us`]).
/// Leave-source-out (`perfcast eval training --leave-source-out --iterations 60`, 2026-11-28, 2-core VM, branch
/// `bwdense`), neutral → training: NeMo H100 fp8 7.7 % (+6.8 %) → 4.3 % (+0.5 %), DGX Cloud 6.2 % (−3.5 %) →
/// 2.8 % (−1.1 %), NeMo + DGX Cloud bf16 7.3 % (−7.3 %) → 2.5 % (−2.3 %) (the fit's sustained clock no longer
/// trades the bf16 rows against fp8 GEMMs timed too slow), NeMo Blackwell 9.8 % (+8.7 %) → 8.3 % (+6.5 %); worse:
/// vTrain 7.3 → 8.6 % (A100 bf16: the refit `kernel_us` and `memory`), NeMo MoE 10.5 % (−1.5 %) → 12.3 % (−9.2 %).
/// Subtracting TensorRT-LLM's separately measured quantization kernels instead of the analytic cast (the earlier
/// form of this choice) predicted NeMo's H100 fp8 rows 10.7 % too fast in-sample (2026-11-26).
pub const TRAINING_KERNELS: KernelChoice = KernelChoice::Training;

impl KernelChoice {
    /// The engines to ask, in order, for an operator of `class` in `dtype` (vLLM's = the models without an engine
    /// segment).
    pub fn families(self, class: crate::op::OpClass, dtype: Precision) -> &'static [KernelFamily] {
        use crate::op::OpClass;
        const NEUTRAL: [KernelFamily; 1] = [KernelFamily::Vllm];
        const TRT_FIRST: [KernelFamily; 2] = [KernelFamily::Trtllm, KernelFamily::Vllm];
        const VLLM: [KernelFamily; 3] = [KernelFamily::Vllm, KernelFamily::Sglang, KernelFamily::Trtllm];
        const SGLANG: [KernelFamily; 3] = [KernelFamily::Sglang, KernelFamily::Vllm, KernelFamily::Trtllm];
        const TRTLLM: [KernelFamily; 3] = [KernelFamily::Trtllm, KernelFamily::Sglang, KernelFamily::Vllm];
        match self {
            KernelChoice::Neutral => &NEUTRAL,
            KernelChoice::Engine(KernelFamily::Vllm) => &VLLM,
            KernelChoice::Engine(KernelFamily::Sglang) => &SGLANG,
            KernelChoice::Engine(KernelFamily::Trtllm) => &TRTLLM,
            KernelChoice::Training if dtype == Precision::Fp8 && class == OpClass::Linear => &TRT_FIRST,
            KernelChoice::Training => &NEUTRAL,
        }
    }
}

impl Serialize for Source {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A time with its provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed {
    /// The answer, µs.
    pub time_us: f64,
    /// The analytic baseline it was derived from, µs.
    pub analytic_us: f64,
    pub source: Source,
    /// Host (CPU) time to dispatch the work's kernels, µs ([`Efficiency::host_us`] per kernel; 0 where the backend
    /// does not model the host). It overlaps the GPU's execution: a pass takes the longer of its GPU time and its
    /// host time ([`crate::llm`]'s per-pass sums).
    pub host_us: f64,
    /// Kernels the work launches (0 where the backend does not know).
    pub kernels: u32,
}

impl Timed {
    /// A time from `source` with its analytic baseline, no host time, kernels unknown.
    pub fn new(time_us: f64, analytic_us: f64, source: Source) -> Timed {
        Timed { time_us, analytic_us, source, host_us: 0.0, kernels: 0 }
    }

    /// The same time, launching `kernels` kernels.
    pub fn with_kernels(self, kernels: u32) -> Timed {
        Timed { kernels, ..self }
    }
}

/// Answers "how long" for operators and collectives on one system.
///
/// Implementations must be pure functions of their arguments (the training predictor caches by shape).
pub trait CostBackend: Send + Sync {
    /// The system the backend answers for.
    fn system(&self) -> &System;

    /// Time of one compute operator on one GPU of the system.
    ///
    /// Errors: the GPU has no path for `dtype` (e.g. bf16 on V100).
    fn compute(&self, op: &OpShape, dtype: Precision) -> Result<Timed, UnsupportedPrecision>;

    /// Time of collective `c` over `group` while `active_per_node` GPUs of each node communicate at once (bytes
    /// as nccl-tests counts them, see [`crate::comm::estimate`]).
    fn collective(&self, c: Collective, bytes: f64, group: Group, active_per_node: u32) -> Timed;

    /// Computes the times of many operators at once, ahead of the [`CostBackend::compute`] calls that will ask
    /// for them (a search knows its shapes before it costs its candidates): a learned backend runs each model once
    /// over all its rows instead of once per shape. Answers are unchanged; the default does nothing.
    fn prefetch(&self, _ops: &[(OpShape, Precision)]) {}

    /// The achievable efficiencies analytic answers are derated by, if any ([`Derated`]).
    fn efficiency(&self) -> Option<Efficiency> {
        None
    }

    /// Whether the system's collectives are calibrated from measurements of that system (uploaded nccl-tests or
    /// OSU results, `POST /v1/systems/{name}/calibrate`). The default: no.
    fn network_calibrated(&self) -> bool {
        false
    }
}

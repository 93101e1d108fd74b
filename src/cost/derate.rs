//! Achievable efficiency: the analytic model's roofline times are lower bounds that real kernels, frameworks and
//! NCCL reach only in part. [`Derated`] turns a backend's *analytic* answers into realistic ones with a handful of
//! physical constants — the fraction of the tensor-core peak GEMMs reach per precision, the fraction of DRAM
//! bandwidth memory-bound kernels reach, a per-kernel cost (launch and framework dispatch), the fraction of link
//! bandwidth collectives reach and their extra per-call latency — the same kind of constants Calculon and
//! llm-analysis take as inputs. Answers from learned regressors are measured-like already and pass unchanged,
//! except two corrections for training: a learned compute-bound time (GEMM, batched GEMM, flash attention, MoE) is
//! divided by the sustained clock fraction of a power-capped training run ([`Efficiency::sustained_clock`]: the
//! regressors learned short microbenchmarks at boost clocks), and a learned fp8 GEMM first loses the activation
//! quantization the microbenchmark timed inside the call, which Transformer Engine fuses into the preceding kernel:
//! the analytic cast ([`fp8_quantize_us`]), whichever engine's call it is (TensorRT-LLM's cuBLASLt GEMM, which
//! training times its fp8 GEMMs with, [`crate::cost::TRAINING_KERNELS`], or vLLM's CUTLASS one). [`Derated`] is the
//! training backend only (serving uses its own, the operator estimate endpoint the learned backend directly).
//!
//! t_compute = (t_roofline − launches) / η + kernels · τ_kernel, η = η_gemm(precision) for matrix classes, η_mem
//! otherwise; learned: t_compute = (t_learned − t_fp8 quantization) / f_clock for compute-bound classes;
//! t_collective = t_α–β / η_net + α_extra.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::roofline::{UnsupportedPrecision, LAUNCH_OVERHEAD_US};
use super::{CostBackend, Source, Timed};
use crate::comm::Group;
use crate::hw::{Precision, System};
use crate::op::Collective;
use crate::op::{OpClass, OpShape, Phase};

/// The constants of [`Derated`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Efficiency {
    /// Fraction of the fp16/bf16 tensor-core peak GEMMs reach on GPUs without a measured fraction
    /// ([`MEASURED_GEMM`]), 0–1.
    pub gemm_16bit: f64,
    /// Fraction of the fp8 peak fp8 GEMMs reach, 0–1.
    pub gemm_fp8: f64,
    /// Fraction of the fp32/tf32 peak fp32/tf32 GEMMs reach on GPUs without a measured fraction, 0–1.
    pub gemm_32bit: f64,
    /// Fraction of DRAM bandwidth memory-bound kernels reach, 0–1.
    pub memory: f64,
    /// Cost of one kernel beyond its work (launch and framework dispatch), µs.
    pub kernel_us: f64,
    /// Fraction of the link bandwidth collectives reach, 0–1.
    pub network: f64,
    /// Latency every collective call adds (NCCL setup and synchronization), µs.
    pub collective_us: f64,
    /// Host (CPU) time to dispatch one kernel, µs: framework, autograd and launch work on the CPU, which overlaps
    /// the GPU's execution of earlier kernels. A pass is host-bound when its kernels' dispatch takes longer than
    /// their execution; 0 never is.
    #[serde(default)]
    pub host_us: f64,
    /// Use the GEMM fractions measured on known GPUs ([`MEASURED_GEMM`]) before the constants above.
    pub measured_gemm: bool,
    /// Contention κ of overlapped communication, 0–1: a collective that hides behind a computation (tensor-parallel
    /// userbuffers overlap, overlapped gradient reduction or parameter gather, overlapped pipeline sends, the
    /// context-parallel ring) takes SMs and memory bandwidth from it, so the computation is slowed by κ × the
    /// collective's hidden time. 0 = free overlap. See [`Efficiency::CALIBRATED`] for the value and its sources.
    #[serde(default)]
    pub overlap_slowdown: f64,
    /// Sustained clock of a training run as a fraction of the microbenchmark clock, 0–1, on every GPU but the
    /// Ampere ones ([`Efficiency::sustained_clock_ampere`]): a learned compute-bound operator time (GEMM, batched
    /// GEMM, flash attention, MoE experts) comes from short microbenchmarks at boost clocks, while a long training
    /// run is power-capped and runs its tensor-core kernels at a lower sustained clock, so training divides such a
    /// time by this fraction (1 = microbenchmark speed). Applied by [`Derated`] (training) only, never to analytic
    /// answers, which [`Efficiency::gemm_on`] derates already.
    #[serde(default = "one")]
    pub sustained_clock: f64,
    /// [`Efficiency::sustained_clock`] of Ampere GPUs (compute capability 8.x: A100, A30, A10, RTX 30), 0–1. A
    /// separate constant because the GPUs differ in how far a sustained load pulls them below their microbenchmark
    /// speed: an A100 holds its 1,410 MHz boost clock in long GEMM runs far better than an H100 SXM its 1,980 MHz
    /// under its 700 W cap (SuperBench's sustained A100 GEMMs reach 0.93 of the learned microbenchmarks' speed,
    /// `SUSTAINED_CLOCK_AMPERE`; the largest learned H100 GEMMs reach 0.77–0.83 of the peak and run about 15 %
    /// slower still in training). Default 1.
    #[serde(default = "one")]
    pub sustained_clock_ampere: f64,
    /// Remove the activation quantization that the learned per-tensor fp8 GEMM times include (aiconfigurator times
    /// TensorRT-LLM's `Linear` with `QuantAlgo.FP8` and vLLM's `CutlassFP8ScaledMMLinearKernel`, both quantizing
    /// the activation dynamically inside the timed call) from the learned fp8 `linear` times in training, where
    /// Transformer Engine fuses that cast into the preceding kernel: [`fp8_quantize_us`] is subtracted,
    /// analytically, whichever engine measured the call.
    #[serde(default)]
    pub fused_fp8_quantize: bool,
}

fn one() -> f64 {
    1.0
}

/// The activation quantization a per-tensor fp8 GEMM microbenchmark times with `shape` (a `linear`), µs: per GEMM
/// kernel, the 16-bit operand that is quantized read (2 bytes per element) and its fp8 copy written (1 byte) at the
/// DRAM bandwidth of `gpu`, plus one launch ([`LAUNCH_OVERHEAD_US`]). The forward quantizes the activation x[M,K];
/// the backward's two GEMMs (as forward GEMMs: dgrad [M,K,N], wgrad [K,N,M]) quantize their left operands, the output
/// gradient [M,N] and the activation [K,M]. A lower bound: the dynamic per-tensor scale also needs an amax pass.
pub fn fp8_quantize_us(shape: &OpShape, gpu: &crate::hw::GpuSpec) -> f64 {
    let [b, m, n, k, _] = shape.dims;
    let m = (b.max(1) * m) as f64;
    let (n, k) = (n as f64, k as f64);
    let (elements, kernels) = match shape.phase {
        Phase::Fwd => (m * k, 1.0),
        _ => (m * n + k * m, 2.0),
    };
    elements * 3.0 / (gpu.memory_bandwidth_gbs * 1e9) * 1e6 + kernels * LAUNCH_OVERHEAD_US
}

impl Efficiency {
    /// The roofline itself: every fraction 1, the analytic model's 2 µs per kernel, no extra latency.
    pub const ROOFLINE: Efficiency = Efficiency {
        gemm_16bit: 1.0,
        gemm_fp8: 1.0,
        gemm_32bit: 1.0,
        memory: 1.0,
        kernel_us: LAUNCH_OVERHEAD_US,
        network: 1.0,
        collective_us: 0.0,
        host_us: 0.0,
        measured_gemm: false,
        overlap_slowdown: 0.0,
        sustained_clock: 1.0,
        sustained_clock_ampere: 1.0,
        fused_fp8_quantize: false,
    };

    /// The constants perfcast predicts training iterations with. From operator-level training data (DATA.md):
    /// the measured GEMM fractions ([`MEASURED_GEMM`]), `network` 0.74 and `collective_us` 50 µs (vTrain's A100
    /// NCCL all-reduce table: t = t_α–β / 0.74 + 50 µs fits its 2–8-GPU rows with 4.2 % MAPE), `gemm_32bit`
    /// 0.81 (NeuSight's A100 FP32 linear rows); `gemm_16bit` 0.8 for GPUs without a measured fraction (between
    /// the measured 0.76–0.90). Fitted end to end (`perfcast eval training --cross-validate` on the 1,440 vTrain,
    /// 16 NeMo and 117 DGX Cloud rows; grouped 5-fold cross-validated errors in the README) jointly with the
    /// overlaps the frameworks run and what a fresh install serves — the bundled learned models where they cover
    /// an operator or collective, these constants for the rest — each searched inside its plausible range
    /// (`BOUNDS` of `perfcast eval training`'s fit, src/eval/efficiency_fit.rs), 2026-11-24 (branch `amperefix` on
    /// d4d14ff, bundle 51a1396a): the learned compute-bound operators run at the sustained clock
    /// [`SUSTAINED_CLOCK`] 0.857 then (folds 0.838–0.864; on Ampere the measured, not fitted,
    /// [`SUSTAINED_CLOCK_AMPERE`] 0.930) and the learned fp8 GEMMs without the activation cast Transformer Engine
    /// fuses ([`Efficiency::fused_fp8_quantize`], analytic); `memory` 0.710 then (folds 0.625–0.778; plausible 0.5–0.9),
    /// `kernel_us` 35.2 µs (folds 31.5–37.9; plausible 5–40) and `host_us` 67.9 µs (folds 67.6–68.1; plausible
    /// 20–100): `memory` is the most weakly determined.
    ///
    /// Refit 2026-11-28 (branch `fitprior`: the maximum a posteriori fit of `eval::fit_prior`, each constant's
    /// plausible range its ±2σ prior, with `longcp`'s CP merges and Hopper cuDNN attention; the all-rows fit of
    /// `perfcast eval training --leave-source-out --iterations 60`, 1,793 rows of vTrain, NeMo, DGX Cloud and
    /// llm-foundry): `memory` 0.659, `kernel_us` 24.1 µs, `host_us` 70.9 µs, [`SUSTAINED_CLOCK`] 0.890; the four
    /// leave-one-source-out fits 0.663–0.681, 19.8–25.7 µs, 70.6–70.9 µs, 0.848–0.906, none at a bound.
    /// Refit 2026-11-28 again (branch `bwdense` merged at 3b6b55e: the fp8 GEMMs of training timed by cuBLASLt's
    /// measurements, the library Transformer Engine calls, instead of vLLM's CUTLASS kernel; the same all-rows fit):
    /// `memory` 0.667, `kernel_us` 30.3 µs, `host_us` 70.1 µs, [`SUSTAINED_CLOCK`] 0.847; leave-one-source-out fits
    /// 0.655–0.689, 26.6–31.3 µs, 65.0–70.7 µs, 0.843–0.857. The fp8 rows no longer pull the clock up to make up for
    /// GEMMs timed too slow, so the bf16 rows stop trading against them.
    /// Refit 2026-11-28 evening (branch `calib` on main 0a0b797, after MoE HybridEP's two syncs per forward and the
    /// same-die learned-model rule; the same all-rows fit of `perfcast eval training --leave-source-out
    /// --iterations 60`, 1,793 rows): `memory` 0.684, `kernel_us` 27.3 µs, `host_us` 70.7 µs, [`SUSTAINED_CLOCK`]
    /// 0.844; the fits with one source left out 0.657–0.700, 26.3–28.3 µs, 65.1–70.7 µs, 0.844–0.855, none at a
    /// bound (main 691e9cd's run printed the same four values: the MoE and same-die changes move none of them at
    /// the printed precision).
    /// Refit 2026-11-29 (main 117d741, after the quantized sequence-parallel gathers, Qwen3's QK norm, HybridEP at
    /// its measured NVLink and 2-node rates and the sequence-parallel reduce-scatter hidden behind the wgrad GEMM;
    /// the same all-rows fit, 1,793 rows): `memory` 0.675, `kernel_us` 27.1 µs, `host_us` 70.7 µs,
    /// [`SUSTAINED_CLOCK`] 0.840; with one source left out 0.648–0.693, 25.96–29.62 µs, 64.6–70.7 µs, 0.841–0.848,
    /// none at a bound.
    /// Refit 2026-11-29 again (main 3adfb7b, after vTrain's runs modelled as Megatron-DeepSpeed ran them —
    /// `GPTModelPipe`'s fp32 upcast and the unfused passes of `_VocabParallelCrossEntropy`, and the column-parallel
    /// backward's input-gradient all-reduce launched `async_op=True` before the wgrad GEMM;
    /// the same all-rows fit, 1,793 rows of vtrain, nemo, dgxc, llmfoundry): `memory` 0.705, `kernel_us` 25.8 µs,
    /// `host_us` 69.3 µs, [`SUSTAINED_CLOCK`] 0.837; with one source left out 0.648–0.722, 24.51–26.79 µs,
    /// 64.6–69.4 µs, 0.837–0.842, none at a bound.
    /// Without the sustained clock
    /// and the fused cast (commit b3b06cc) `memory` sat at its lower bound 0.5 in every fold (0.30 unbounded): it
    /// slowed the bandwidth-bound operators to make up for H100 bf16 steps predicted 10–15 % too fast, a gap the
    /// sustained clock closes (bf16 −14.4 % → −3.7 %, cross-validated).
    /// Earlier fits: the Ampere clock fitted too (1.000, at its bound) with 0.864, 0.661, 37.5 µs, 67.9 µs (fd57f05);
    /// one sustained clock for every GPU 0.846 with 0.791, 31.8 µs, 67.9 µs (4208f2a);
    /// 0.5, 33.6 µs, 67.5 µs (b3b06cc); bundled models without overlaps 0.667, 36.9 µs, 67.9 µs;
    /// analytic operators with overlaps 0.542, 28.1 µs, 67.8 µs. `gemm_fp8` 0.565 is not fitted (every fp8 GEMM
    /// of the runs is learned; it times fp8 GEMMs only on GPUs the bundle does not cover): the analytic-operator
    /// fit with overlaps, which aiconfigurator's H100 fp8
    /// GEMMs (train split) bear out — 0.50 of the dense fp8 peak per-tensor scaled, 0.58 block-scaled (median of
    /// the top decile by FLOPs). `memory` and `kernel_us` also carry the element-wise kernels the operator list
    /// leaves out (bias, dropout and residual adds are folded into their neighbours), so they are lower and higher
    /// than a bandwidth test or a bare launch would give; `host_us` is per *counted* kernel for the same reason.
    pub const CALIBRATED: Efficiency = Efficiency {
        gemm_16bit: 0.8,
        gemm_fp8: 0.565,
        gemm_32bit: 0.81,
        // fitted by `perfcast eval training --leave-source-out --iterations 60` on the 1,793 rows of vtrain, nemo,
        // dgxc, llmfoundry, 2026-11-29, commit 3adfb7b
        memory: 0.705,   // folds 0.648–0.722
        kernel_us: 25.8, // folds 24.509–26.788
        network: 0.74,
        collective_us: 50.0,
        host_us: 69.3, // folds 64.633–69.369
        measured_gemm: true,
        overlap_slowdown: OVERLAP_SLOWDOWN,
        sustained_clock: SUSTAINED_CLOCK,
        sustained_clock_ampere: SUSTAINED_CLOCK_AMPERE,
        fused_fp8_quantize: true,
    };

    /// The sustained clock fraction of `gpu` in training ([`Efficiency::sustained_clock_ampere`] on Ampere,
    /// [`Efficiency::sustained_clock`] on the others).
    pub fn clock_on(&self, gpu: &crate::hw::GpuSpec) -> f64 {
        if gpu.generation() == "ampere" {
            self.sustained_clock_ampere
        } else {
            self.sustained_clock
        }
    }

    /// The GEMM fraction for `dtype` on a GPU without a measured one (block-scaled fp8 and nvfp4 GEMMs take the
    /// fp8 fraction of their own peak: no end-to-end row measures them apart).
    pub fn gemm(&self, dtype: Precision) -> f64 {
        match dtype {
            Precision::Fp8 | Precision::Fp8Block | Precision::Nvfp4 => self.gemm_fp8,
            Precision::Fp16 | Precision::Bf16 => self.gemm_16bit,
            _ => self.gemm_32bit,
        }
    }

    /// The GEMM fraction for `dtype` on `gpu`: measured ([`MEASURED_GEMM`]) where the training data has it,
    /// else [`Efficiency::gemm`].
    pub fn gemm_on(&self, gpu: &str, dtype: Precision) -> f64 {
        MEASURED_GEMM
            .iter()
            .find(|(prefix, p, _)| self.measured_gemm && gpu.starts_with(prefix) && *p == dtype)
            .map_or_else(|| self.gemm(dtype), |(_, _, f)| *f)
    }
}

/// Contention κ of overlapped communication ([`Efficiency::overlap_slowdown`]): 0.1, the share of the GPU that
/// an overlapped collective occupies. Sources: NeMo's Transformer Engine userbuffers configurations for H100
/// (`nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py`, e.g. `userbuffers_bf16_h100_h12288_tp4_…`)
/// reserve 16–24 of the 132 SMs for the pipelined reduce-scatter overlaps (`num_sm`, `set_sm_margin`: the GEMM
/// runs on the rest, a 12–18 % share), 2–24 for the bulk overlaps of the backward and ~0 for the ring-exchange
/// all-gathers (copy engines); NCCL's ring kernels for the data-parallel collectives occupy one SM per channel
/// (8–32 channels on H100, 6–24 % of the SMs). Rashidi et al. ("Enabling Compute-Communication Overlap in
/// Distributed Deep Learning Training Platforms", ISCA 2021) and Pati et al. ("T3", ASPLOS 2024) measure the
/// resulting slowdown of the overlapped kernels (SM and memory-bandwidth contention) at roughly 5–20 % of the
/// overlapped time. Plausible range 0–0.2. The end-to-end rows cannot identify it separately from the GEMM
/// fractions (README, accuracy), so the cited value is used.
pub const OVERLAP_SLOWDOWN: f64 = 0.1;

/// Sustained clock fraction of training runs on every GPU but the Ampere ones ([`Efficiency::sustained_clock`]).
/// Plausible range 0.8–1.0: a power-capped GPU under a sustained tensor-core load holds a clock below the boost
/// clock its microbenchmarks run at. Fitted end to end (`perfcast eval training --cross-validate`, 2026-11-24,
/// branch `amperefix` on d4d14ff, jointly with `memory`, `kernel_us` and `host_us`, with the measured
/// [`SUSTAINED_CLOCK_AMPERE`]): 0.857, folds 0.838–0.864, on the NeMo and DGX Cloud H100 rows. (0.864 with the
/// Ampere clock fitted too, fd57f05; one constant for A100 and H100 fitted 0.846, folds 0.829–0.855, 4208f2a.)
/// Refit 2026-11-28 with the prior of `eval::fit_prior` (branch `fitprior`, leave-source-out's all-rows fit on
/// vTrain, NeMo, DGX Cloud and llm-foundry): 0.890, the four leave-one-source-out fits 0.848–0.906.
/// Refit 2026-11-28 (branch `bwdense`: training's fp8 GEMMs timed by cuBLASLt's measurements, which run 1.14–1.17×
/// faster than vLLM's CUTLASS kernel on Blackwell and 0.95× on H100, and learned GEMMs taller than their fitted rows
/// timed as fitted slices): 0.847, the four leave-one-source-out fits 0.843–0.857.
/// Refit 2026-11-28 evening (branch `calib` on main 0a0b797, the same all-rows fit): 0.844, the fits with one
/// source left out 0.844–0.855.
/// Refit 2026-11-29 (main 117d741: quantized SP gathers, Qwen3's QK norm, HybridEP's measured rates, the
/// sequence-parallel reduce-scatter hidden behind wgrad; the same all-rows fit): 0.840, the fits with one source left
/// out 0.841–0.848.
/// Refit 2026-11-29 again (main 3adfb7b: Megatron-DeepSpeed's unfused fp32 loss and asynchronous column-parallel
/// input-gradient all-reduce on vTrain's rows; the same all-rows fit): 0.837, the fits with one source left out
/// 0.837–0.842.
pub const SUSTAINED_CLOCK: f64 = 0.837; // folds 0.837–0.842

/// Sustained clock fraction of training runs on Ampere GPUs ([`Efficiency::sustained_clock_ampere`]), measured,
/// not fitted: SuperBench's `gemm-flops` (DATA.md train data) runs cutlass tensor-core GEMMs of m = n = k = 16,384
/// back to back on 1,939 NDv4 (A100 40 GB) and 729 NDmv4 (A100 80 GB) production nodes; their fleet averages,
/// 280.4 / 265.9 (NDv4 fp16 / bf16) and 275.4 / 261.2 TFLOP/s (NDmv4), mean 270.7, over the bundled learned A100
/// model's 291.0 TFLOP/s for the same GEMM (aiconfigurator's short microbenchmarks) give 0.930 (per measurement
/// 0.90–0.96; the fp32-accumulating bf16 kernel, the one training uses, 0.90–0.91). Tested against the data
/// (`eval::efficiency_fit`). Why not fitted: the only Ampere end-to-end rows (vTrain's, hidden 1,024–2,048, often
/// host-bound) hardly depend on it — fitted with the rest it went to its bound 1.000 (folds 0.914–1.000, fd57f05),
/// while the fit with it fixed at 0.930 predicts vTrain as well (grouped CV 7.2 % vs 7.4 %, README).
pub const SUSTAINED_CLOCK_AMPERE: f64 = 0.93;

/// Fractions of the dense peak that large GEMMs reach, measured on the GPU (DATA.md training data): (GPU name
/// prefix, precision, fraction).
/// - A100 fp16 0.90, bf16 0.85, tf32 0.82: SuperBench `gemm-flops` (Azure NDv4 A100, v0.3.0 baseline: 280.4,
///   265.9 and 128.2 TFLOP/s of 312, 312 and 156).
/// - A100 fp32 0.81: NeuSight's A100 FP32 linear rows, median of the top decile by FLOPs (of 19.5 TFLOP/s).
/// - Hopper (H100, H200, GH200) bf16 and fp16 0.76: XLA's default matmul performance table, `sm_90` bf16 rows,
///   median of the top decile by FLOPs (of 989.5 TFLOP/s).
pub const MEASURED_GEMM: [(&str, Precision, f64); 10] = [
    ("A100", Precision::Fp16, 0.90),
    ("A100", Precision::Bf16, 0.85),
    ("A100", Precision::Tf32, 0.82),
    ("A100", Precision::Fp32, 0.81),
    ("H100", Precision::Bf16, 0.76),
    ("H100", Precision::Fp16, 0.76),
    ("H200", Precision::Bf16, 0.76),
    ("H200", Precision::Fp16, 0.76),
    ("GH200", Precision::Bf16, 0.76),
    ("GH200", Precision::Fp16, 0.76),
];

/// Whether every link `group` uses states what NCCL achieves on it ([`crate::hw::Link::achieved`]): the
/// intra-node link when the group has several ranks per node, the inter-node link when it spans nodes. Such a
/// collective is not derated by [`Efficiency::network`] (that fraction turns a datasheet bandwidth into an
/// achieved one).
pub fn achieved(system: &System, group: Group) -> bool {
    (group.ranks_per_node <= 1 || system.intra_node.achieved) && (group.nodes <= 1 || system.inter_node.achieved)
}

/// A backend whose analytic answers are derated by an [`Efficiency`].
#[derive(Debug, Clone)]
pub struct Derated<B> {
    inner: B,
    eff: Efficiency,
    /// The sustained clock of the system's GPU ([`Efficiency::clock_on`]), looked up once.
    clock: f64,
}

impl<B: CostBackend> Derated<B> {
    /// `inner` derated by `eff`.
    pub fn new(inner: B, eff: Efficiency) -> Derated<B> {
        let clock = eff.clock_on(&inner.system().gpu).clamp(1e-6, 1.0);
        Derated { inner, eff, clock }
    }

    /// The constants.
    pub fn efficiency(&self) -> &Efficiency {
        &self.eff
    }
}

impl<B: CostBackend> CostBackend for Derated<B> {
    fn system(&self) -> &System {
        self.inner.system()
    }

    fn compute(&self, shape: &OpShape, dtype: Precision) -> Result<Timed, UnsupportedPrecision> {
        let t = self.inner.compute(shape, dtype)?;
        let kernels = t.kernels as f64;
        let host_us = kernels * self.eff.host_us;
        if let Source::Regressor { .. } = t.source {
            if !shape.class.is_matmul() || shape.class == OpClass::AttentionDecode {
                return Ok(Timed { host_us, ..t });
            }
            let mut time_us = t.time_us;
            if self.eff.fused_fp8_quantize && dtype == Precision::Fp8 && shape.class == OpClass::Linear {
                let cast_us = fp8_quantize_us(shape, &self.system().gpu);
                time_us = (time_us - cast_us).max(t.analytic_us.min(time_us));
            }
            time_us /= self.clock;
            return Ok(Timed { time_us, host_us, ..t });
        }
        if t.source != Source::Analytic {
            return Ok(Timed { host_us, ..t });
        }
        let eta =
            if shape.class.is_matmul() { self.eff.gemm_on(&self.system().gpu.name, dtype) } else { self.eff.memory };
        let body = (t.time_us - kernels * LAUNCH_OVERHEAD_US).max(0.0);
        let time_us = body / eta.max(1e-6) + kernels * self.eff.kernel_us;
        Ok(Timed { time_us, host_us, ..t })
    }

    fn efficiency(&self) -> Option<Efficiency> {
        Some(self.eff)
    }

    fn network_calibrated(&self) -> bool {
        self.inner.network_calibrated()
    }

    fn prefetch(&self, ops: &[(OpShape, Precision)]) {
        self.inner.prefetch(ops)
    }

    fn collective(&self, c: Collective, bytes: f64, group: Group, active_per_node: u32) -> Timed {
        let t = self.inner.collective(c, bytes, group, active_per_node);
        if t.time_us == 0.0 {
            return t;
        }
        let host_us = super::host::collective_host_us(self.eff.host_us);
        if t.source != Source::Analytic {
            return Timed { host_us, ..t };
        }
        let network = if achieved(self.system(), group) { 1.0 } else { self.eff.network };
        Timed { time_us: t.time_us / network.max(1e-6) + self.eff.collective_us, host_us, ..t }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::AnalyticBackend;
    use crate::hw::presets;

    fn backend(eff: Efficiency) -> Derated<AnalyticBackend> {
        let s = presets().into_iter().find(|p| p.name == "dgx-a100-80g").unwrap().resolve().unwrap();
        Derated::new(AnalyticBackend::new(s), eff)
    }

    fn v100(eff: Efficiency) -> Derated<AnalyticBackend> {
        let mut spec = presets().into_iter().find(|p| p.name == "dgx-a100-80g").unwrap();
        spec.gpu = crate::hw::GpuRef::Name("V100-SXM2".into());
        Derated::new(AnalyticBackend::new(spec.resolve().unwrap()), eff)
    }

    #[test]
    fn roofline_efficiency_is_the_analytic_model() {
        let d = backend(Efficiency::ROOFLINE);
        let a = AnalyticBackend::new(d.system().clone());
        let shape = OpShape::new(OpClass::Linear, Phase::Bwd, &[1, 4096, 4096, 4096]);
        assert!(
            (d.compute(&shape, Precision::Fp16).unwrap().time_us - a.compute(&shape, Precision::Fp16).unwrap().time_us)
                .abs()
                < 1e-9
        );
    }

    /// A backend whose every compute answer is a learned 1,000 µs (analytic baseline 500 µs).
    struct Learned(System);

    impl CostBackend for Learned {
        fn system(&self) -> &System {
            &self.0
        }
        fn compute(&self, _: &OpShape, _: Precision) -> Result<Timed, UnsupportedPrecision> {
            Ok(Timed::new(1000.0, 500.0, Source::Regressor { key: "k".into(), version: 1, instead_of: None })
                .with_kernels(1))
        }
        fn collective(&self, _: Collective, _: f64, _: Group, _: u32) -> Timed {
            Timed::new(0.0, 0.0, Source::Analytic)
        }
    }

    #[test]
    fn learned_compute_bound_times_run_at_the_sustained_clock_without_the_fp8_cast() {
        let s = presets().into_iter().find(|p| p.name == "dgx-a100-80g").unwrap().resolve().unwrap();
        let bw = s.gpu.memory_bandwidth_gbs;
        // dgx-a100-80g is Ampere: its clock is `sustained_clock_ampere`; the other one must not apply.
        let eff = Efficiency {
            sustained_clock: 0.5,
            sustained_clock_ampere: 0.8,
            fused_fp8_quantize: true,
            ..Efficiency::ROOFLINE
        };
        let d = Derated::new(Learned(s), eff);
        // A bf16 GEMM: 1,000 µs at the microbenchmark clock, 1,000 / 0.8 = 1,250 µs sustained.
        let g = OpShape::new(OpClass::Linear, Phase::Fwd, &[1, 8192, 4096, 4096]);
        assert!((d.compute(&g, Precision::Bf16).unwrap().time_us - 1250.0).abs() < 1e-9);
        // The same GEMM in fp8: the cast of x[8192, 4096] reads 2 and writes 1 byte per element,
        // 8192·4096·3 B = 100,663,296 B at the DRAM bandwidth, plus a 2 µs launch, comes off first.
        let cast_us = 100_663_296.0 / (bw * 1e9) * 1e6 + 2.0;
        assert!((fp8_quantize_us(&g, &d.system().gpu) - cast_us).abs() < 1e-9);
        assert!((d.compute(&g, Precision::Fp8).unwrap().time_us - (1000.0 - cast_us) / 0.8).abs() < 1e-9);
        // Its backward casts the output gradient [8192, 4096] and the activation [4096, 8192]: twice the bytes,
        // two launches.
        let gb = OpShape::new(OpClass::Linear, Phase::Bwd, &[1, 8192, 4096, 4096]);
        let cast_bwd_us = 2.0 * 100_663_296.0 / (bw * 1e9) * 1e6 + 4.0;
        assert!((d.compute(&gb, Precision::Fp8).unwrap().time_us - (1000.0 - cast_bwd_us) / 0.8).abs() < 1e-9);
        // Memory-bound learned operators keep their time.
        let n = OpShape::new(OpClass::LayerNorm, Phase::Fwd, &[8192, 4096]);
        assert_eq!(d.compute(&n, Precision::Bf16).unwrap().time_us, 1000.0);
        // On an H100 (Hopper) the same GEMM runs at `sustained_clock`: 1,000 / 0.5 = 2,000 µs.
        let h = presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap();
        let dh = Derated::new(Learned(h), eff);
        assert!((dh.compute(&g, Precision::Bf16).unwrap().time_us - 2000.0).abs() < 1e-9);
    }

    #[test]
    fn derating_by_hand() {
        let eff = Efficiency {
            gemm_16bit: 0.5,
            memory: 0.8,
            kernel_us: 10.0,
            network: 0.5,
            collective_us: 20.0,
            host_us: 7.0,
            measured_gemm: true,
            ..Efficiency::ROOFLINE
        };
        let d = backend(eff);
        // Host time: 7 µs per kernel — two for a GEMM backward, one for a layernorm forward or a collective call.
        let gb = OpShape::new(OpClass::Linear, Phase::Bwd, &[1, 4096, 4096, 4096]);
        assert_eq!(d.compute(&gb, Precision::Fp16).unwrap().host_us, 14.0);
        assert_eq!(
            d.compute(&OpShape::new(OpClass::LayerNorm, Phase::Fwd, &[8, 8]), Precision::Fp16).unwrap().host_us,
            7.0
        );
        assert_eq!(d.collective(Collective::AllReduce, 1e8, Group::new(8, 8), 8).host_us, 7.0);
        assert_eq!(AnalyticBackend::new(d.system().clone()).compute(&gb, Precision::Fp16).unwrap().host_us, 0.0);
        let a = AnalyticBackend::new(d.system().clone());
        // A GEMM backward on the A100: two kernels at its measured fp16 fraction 0.90: (t − 2·2 µs)/0.9 + 2·10 µs.
        let g = OpShape::new(OpClass::Linear, Phase::Bwd, &[1, 4096, 4096, 4096]);
        let ta = a.compute(&g, Precision::Fp16).unwrap().time_us;
        assert!((d.compute(&g, Precision::Fp16).unwrap().time_us - ((ta - 4.0) / 0.9 + 20.0)).abs() < 1e-9);
        // On a V100 (no measured fraction) the constant 0.5 applies.
        let v = v100(eff);
        let tv = AnalyticBackend::new(v.system().clone()).compute(&g, Precision::Fp16).unwrap().time_us;
        assert!((v.compute(&g, Precision::Fp16).unwrap().time_us - ((tv - 4.0) / 0.5 + 20.0)).abs() < 1e-9);
        // A layernorm forward: one kernel at 80 % of the bandwidth.
        let n = OpShape::new(OpClass::LayerNorm, Phase::Fwd, &[8192, 4096]);
        let tn = a.compute(&n, Precision::Fp16).unwrap().time_us;
        assert!((d.compute(&n, Precision::Fp16).unwrap().time_us - ((tn - 2.0) / 0.8 + 10.0)).abs() < 1e-9);
        // An all-reduce within the node: the preset's intra-node link is NCCL's achieved bandwidth, so the α–β
        // time plus 20 µs; across nodes (datasheet InfiniBand) twice the α–β time plus 20 µs.
        let group = Group::new(8, 8);
        let c = a.collective(Collective::AllReduce, 1e8, group, 8).time_us;
        assert!((d.collective(Collective::AllReduce, 1e8, group, 8).time_us - (c + 20.0)).abs() < 1e-9);
        let wide = Group { ranks: 16, nodes: 2, ranks_per_node: 8 };
        let c = a.collective(Collective::AllReduce, 1e8, wide, 8).time_us;
        assert!((d.collective(Collective::AllReduce, 1e8, wide, 8).time_us - (2.0 * c + 20.0)).abs() < 1e-9);
        assert!(achieved(d.system(), group) && !achieved(d.system(), wide) && achieved(d.system(), Group::new(1, 1)));
        // A group of one rank costs nothing.
        assert_eq!(d.collective(Collective::AllReduce, 1e8, Group::new(1, 1), 8).time_us, 0.0);
    }
}

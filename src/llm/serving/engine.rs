//! The serving engines' scheduling defaults and perfcast's serving constants.
//!
//! **Defaults** (each overridable under `engine_options`), as the engines' own code sets them:
//! - **vLLM** (V1 engine, `EngineArgs.get_batch_defaults`, OpenAI server context; vLLM ≥ 0.8): on GPUs with
//!   ≥ 70 GiB that are not A100s `max_num_batched_tokens` 8192 and `max_num_seqs` 1024, else 2048 and 256;
//!   chunked prefill always on; `gpu_memory_utilization` 0.9; CUDA graphs captured for decode batches up to 512
//!   (`max_capture_size`).
//! - **SGLang** (`server_args.py`, v0.4–0.5): `chunked_prefill_size` 2048 below 35 GiB, 4096 below 60 GiB, 8192
//!   below 160 GiB, 16384 above; `cuda_graph_max_bs` 32/160 (below 60 GiB, tp < 4 / ≥ 4), 256/512 (60–160 GiB), 512
//!   above; `mem_fraction_static` 0.88; `max_running_requests` is sized from the KV pool (perfcast caps it at
//!   4096).
//! - **TensorRT-LLM** (`trtllm-serve` / `BuildConfig` defaults): `max_batch_size` 2048, `max_num_tokens` 8192,
//!   chunked context on, `kv_cache_config.free_gpu_memory_fraction` 0.9 — of the memory left after weights and
//!   activations, not of the whole GPU; CUDA graphs for decode batches up to 128.
//!
//! **Constants** ([`ServingConstants`]): the achievable efficiencies analytic times are derated by for serving
//! kernels ([`super::derate`]), and per engine the host time every step costs per step and per sequence
//! (scheduler, input preparation, sampling, output processing — what runs on the CPU between GPU steps). The host
//! costs, the bandwidth fraction of memory-bound matrix kernels and the per-kernel GPU cost are fitted on
//! LLM-Inference-Bench (the only serving rows in `../shared`, all train/calibration data by DATA.md) with grouped
//! cross-validation (`perfcast eval inference --cross-validate`, group = framework × model; README for the
//! errors). SGLang has no rows there: it uses TensorRT-LLM's fitted host cost, an assumption to replace when SGLang
//! measurements arrive.

use serde::Serialize;
use utoipa::ToSchema;

use super::request::Engine;
use crate::cost::Efficiency;
use crate::hw::GpuSpec;

/// An engine's scheduling settings (defaults, or the request's overrides).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct EngineSettings {
    /// Most sequences running at once.
    pub max_num_seqs: u32,
    /// Most tokens per step (decodes count one each, prefill chunks their length).
    pub max_num_batched_tokens: u32,
    /// Prompts are prefilled in chunks sharing steps with decodes.
    pub chunked_prefill: bool,
    /// Fraction of GPU memory the engine uses (TensorRT-LLM: of the memory free after weights and activations).
    pub gpu_memory_utilization: f64,
    /// Decode steps replay CUDA graphs.
    pub cuda_graphs: bool,
    /// Largest decode batch with a captured graph.
    pub cuda_graph_max_batch: u32,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The defaults of `engine` on `gpu` at tensor-parallel degree `tp` (see the module doc for their sources).
pub fn defaults(engine: Engine, gpu: &GpuSpec, tp: u32) -> EngineSettings {
    let mem_gib = gpu.memory_bytes() / GIB;
    match engine {
        Engine::Vllm => {
            let large = mem_gib >= 70.0 && !gpu.name.to_ascii_uppercase().contains("A100");
            EngineSettings {
                max_num_seqs: if large { 1024 } else { 256 },
                max_num_batched_tokens: if large { 8192 } else { 2048 },
                chunked_prefill: true,
                gpu_memory_utilization: 0.9,
                cuda_graphs: true,
                cuda_graph_max_batch: 512,
            }
        }
        Engine::Sglang => {
            let (chunk, graphs) = if mem_gib < 35.0 {
                (2048, if tp < 4 { 8 } else { 80 })
            } else if mem_gib < 60.0 {
                (4096, if tp < 4 { 32 } else { 160 })
            } else if mem_gib < 160.0 {
                (8192, if tp < 4 { 256 } else { 512 })
            } else {
                (16384, 512)
            };
            EngineSettings {
                max_num_seqs: 4096,
                max_num_batched_tokens: chunk,
                chunked_prefill: true,
                gpu_memory_utilization: 0.88,
                cuda_graphs: true,
                cuda_graph_max_batch: graphs,
            }
        }
        Engine::Trtllm => EngineSettings {
            max_num_seqs: 2048,
            max_num_batched_tokens: 8192,
            chunked_prefill: true,
            gpu_memory_utilization: 0.9,
            cuda_graphs: true,
            cuda_graph_max_batch: 128,
        },
    }
}

/// An engine's host (CPU) time per step, beyond the GPU's work: scheduling, input preparation, sampling
/// bookkeeping, output processing and detokenization.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct HostCost {
    /// Per step, µs.
    pub step_us: f64,
    /// Per sequence in the step, µs (Python-side per-sequence work scales with the batch).
    pub seq_us: f64,
}

/// perfcast's serving constants: the efficiencies serving kernels are derated by and the engines' host costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct ServingConstants {
    /// Achievable efficiencies of analytic operator and collective times ([`super::derate::ServingDerated`]; its
    /// `host_us` is unused: serving counts host time per step, [`HostCost`]).
    pub efficiency: Efficiency,
    /// Fraction of DRAM bandwidth memory-bound matrix kernels reach (decode GEMVs, decode attention), 0–1.
    pub stream: f64,
    /// vLLM's host time per step.
    pub vllm: HostCost,
    /// SGLang's host time per step.
    pub sglang: HostCost,
    /// TensorRT-LLM's host time per step.
    pub trtllm: HostCost,
    /// CPU time to launch one kernel outside a CUDA graph (PyTorch dispatch and `cudaLaunchKernel`), µs; a step's
    /// GPU time is at least its kernels' launch time.
    pub eager_kernel_us: f64,
}

impl ServingConstants {
    /// The shipped constants.
    ///
    /// Fixed from operator-level training data: the GEMM fractions of [`Efficiency::CALIBRATED`] (measured per GPU
    /// and precision); `network` 0.74 and `collective_us` 2 µs — vLLM's custom all-reduce on 2–8 H100s
    /// (aiconfigurator `custom_allreduce_perf`, train split) runs small messages in 4.2–5.6 µs against the α–β
    /// model's ≈ 2–4 µs and reaches 72 % of the NVLink bus bandwidth at 128 MiB; `eager_kernel_us` 5 µs [rec]
    /// (PyTorch's per-operator dispatch cost); `memory` 0.8 [rec] for element-wise kernels (fitted freely it
    /// collapses, see [`crate::eval`]'s inference evaluation).
    ///
    /// Fitted by `perfcast eval inference --cross-validate` on LLM-Inference-Bench (2026-11-23, all 1,202 rows; the
    /// five folds in the README): `stream` 0.845 (folds 0.78–0.85), `kernel_us` 7.41 µs, vLLM 983 µs per step + 80.1
    /// µs per sequence (folds 72–86 µs per sequence), TensorRT-LLM 31 µs per step + 30.5 µs per sequence. The vLLM
    /// rows are its 2024 V0 engine, whose per-sequence Python work the V1 engine (≥ 0.8) moved off the critical
    /// path: at large batches these constants are pessimistic for current vLLM. SGLang takes TensorRT-LLM's host
    /// cost (both overlap their scheduler with the GPU), an assumption.
    pub const CALIBRATED: ServingConstants = ServingConstants {
        efficiency: Efficiency {
            gemm_16bit: 0.8,
            gemm_fp8: 0.735,
            gemm_32bit: 0.81,
            memory: 0.8,
            kernel_us: 7.41,
            network: 0.74,
            collective_us: 2.0,
            host_us: 0.0,
            measured_gemm: true,
            // No collective is overlapped with compute in a serving step (the TP all-reduces sit between GEMMs).
            overlap_slowdown: crate::cost::derate::OVERLAP_SLOWDOWN,
        },
        stream: 0.845,
        vllm: HostCost { step_us: 983.0, seq_us: 80.1 },
        sglang: HostCost { step_us: 31.0, seq_us: 30.5 },
        trtllm: HostCost { step_us: 31.0, seq_us: 30.5 },
        eager_kernel_us: 5.0,
    };

    /// The bare roofline: every fraction 1, 2 µs per kernel, no host cost (the lower bound the calibrated constants
    /// are compared with).
    pub const ROOFLINE: ServingConstants = ServingConstants {
        efficiency: Efficiency::ROOFLINE,
        stream: 1.0,
        vllm: HostCost { step_us: 0.0, seq_us: 0.0 },
        sglang: HostCost { step_us: 0.0, seq_us: 0.0 },
        trtllm: HostCost { step_us: 0.0, seq_us: 0.0 },
        eager_kernel_us: 0.0,
    };

    /// The host cost of `engine`.
    pub fn host(&self, engine: Engine) -> HostCost {
        match engine {
            Engine::Vllm => self.vllm,
            Engine::Sglang => self.sglang,
            Engine::Trtllm => self.trtllm,
        }
    }
}

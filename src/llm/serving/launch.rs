//! How a step's kernels reach the GPU, and the host (CPU) time the launches take ([`LaunchPath`]).
//!
//! **vLLM V1 compiles its model** (vLLM ≥ 0.8; every vLLM run in `serving_runs_blackwell.csv` is 0.15.1–0.19.0 or a
//! nightly): `CompilationConfig.mode` defaults to `VLLM_COMPILE` (`vllm/config/compilation.py`, "For V1 engine this
//! is 3": vLLM's Inductor backend with piecewise compilation), with `custom_ops` off under Inductor ("Inductor
//! generates (fused) Triton kernels for disabled custom ops": RMSNorm, SiLU-and-mul, RoPE). The model's FX graph is
//! split at the `splitting_ops`, by default the attention ops (`_attention_ops`: `vllm::unified_attention`,
//! `unified_mla_attention`, `sparse_attn_indexer`, …): N attention calls make N + 1 compiled pieces. The CUDA graphs
//! follow `cudagraph_mode` `FULL_AND_PIECEWISE` (the V1 default, `docs/design/cuda_graphs.md`): a uniform decode
//! batch replays one full graph; any other step (prefill or mixed) of at most `max_cudagraph_capture_size` tokens
//! (min(2·`max_num_seqs`, 512, `max_num_batched_tokens`), perfcast's `cuda_graph_max_batch`) is padded to a
//! captured size and replays the pieces' graphs with attention run eagerly between them (`CUDAGraphWrapper`,
//! `vllm/compilation/cuda_graph.py`; `CudagraphDispatcher.dispatch`, `vllm/v1/cudagraph_dispatcher.py`); a larger
//! step finds no key and runs at runtime mode `NONE`: the Inductor-compiled pieces without graphs.
//! `--enforce-eager` (perfcast's `engine_options.cuda_graphs: false`) sets the optimization level to `-O0` ("Enforce eager set, overriding
//! optimization level to -O0", `VllmConfig.__post_init__`, logged by v0.15.1): no compilation, the model's
//! `nn.Module`s run eagerly. SGLang, TensorRT-LLM's PyTorch backend and vLLM's V0 engine run steps with prefill
//! eagerly from Python ([`LaunchPath::Eager`]).
//!
//! **Host time per launch, by where an operator runs** ([`OpHost`]):
//! - a kernel Inductor compiled into a piece, launched from its generated wrapper without a graph:
//!   `inductor_kernel_us` 9.1 µs — tritonbench PR #1017 (meta-pytorch/tritonbench, 2026-04), `nop_inductor_per_kernel`
//!   on GB200: `CachingAutotuner.run` of a 19-argument kernel 9.1 µs (0 arguments 6.8 µs: the autotuner preamble
//!   2.1 µs, Triton's binder 1.7 µs, `cuLaunchKernel` 3.0 µs);
//! - a custom op called through PyTorch's dispatcher into Python — attention between the pieces, and without graphs
//!   the MoE layer (`vllm::moe_forward`), the tensor-parallel all-reduce (`vllm::all_reduce`) and the LM head and
//!   sampler outside the compiled model: `custom_op_us` 20.9 µs a launched kernel, the floor of vLLM's custom
//!   all-reduce called eagerly in aiconfigurator's `custom_allreduce_perf` (`ar_backend` `vllm_eager`, ≤ 65,536
//!   elements, train split): 19.4–22.3 µs on H100, B200 and B300 at 2, 4 and 8 GPUs, 41.9–43.7 µs on GB200; 20.9 µs
//!   is the median of the eleven (GPU, GPUs) minima, against 4.2–7.3 µs for the same call replayed in a graph;
//! - a piece replayed from its CUDA graph: `piece_replay_us` 6 µs a piece — one graph launch, "about 5 to 7 us on
//!   GB200" (pytorch/pytorch PR #196413, on timing one graph replay per sample); its kernels cost the host nothing.
//!
//! A piecewise step's tokens are padded up to the captured size in its pieces' operators, not in its attention
//! (`StepLoad::graph_pad_tokens`). Not modelled: Inductor's per-piece wrapper beyond its kernels (≈ 5 µs a piece in
//! tritonbench PR #1016's breakdown).

use serde::Serialize;
use utoipa::ToSchema;

use super::engine::{EngineSettings, ServingConstants};
use super::request::{Engine, VllmEngine};
use crate::llm::operators::OpName;

/// How a step's kernels are launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LaunchPath {
    /// One CUDA graph replays the whole step (a decode batch within the captured sizes): no host launches.
    Graph,
    /// Every counted kernel launched eagerly ([`ServingConstants::eager_launch_us`] each).
    Eager,
    /// vLLM V1's Inductor-compiled pieces run without graphs (more tokens than the largest captured size).
    Compiled,
    /// vLLM V1's piecewise CUDA graphs: the pieces replayed, attention run eagerly between them.
    Piecewise,
}

/// Where an operator of a vLLM V1 step runs (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpHost {
    /// Compiled by Inductor into a piece (GEMMs, norms, RoPE, activations, embedding, router).
    Piece,
    /// A custom op inside a piece that Inductor calls out to (MoE, tensor-parallel and expert-parallel
    /// communication): captured with the piece in a graph, a Python call without one.
    OpaqueInPiece,
    /// A splitting op between pieces (attention, DSA's indexer): always a Python call, one per layer.
    Splitting,
    /// Outside the compiled model (LM head, logits gather, sampler, pipeline send): Python calls.
    OutsideModel,
}

impl OpHost {
    /// Where `name` runs.
    pub fn of(name: OpName) -> OpHost {
        match name {
            OpName::AttentionPrefill | OpName::AttentionDecode | OpName::DsaIndexerLogits => OpHost::Splitting,
            OpName::Moe | OpName::MpAllReduce | OpName::EpAllToAll | OpName::AllreduceRmsNorm => OpHost::OpaqueInPiece,
            OpName::FinalLinear | OpName::MpAllGather | OpName::Sampler | OpName::PpP2p => OpHost::OutsideModel,
            _ => OpHost::Piece,
        }
    }
}

/// Counted kernels of one stage's step by [`OpHost`], and its splitting-op calls.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LaunchCounts {
    /// Kernels compiled into the pieces.
    pub piece: f64,
    /// Kernels of custom ops inside the pieces.
    pub opaque: f64,
    /// Kernels of the splitting ops (launched from their Python calls; counted in `total` only).
    pub splitting: f64,
    /// Kernels outside the compiled model.
    pub outside: f64,
    /// Splitting-op calls: one attention call per layer (and one indexer call per DSA layer).
    pub splitting_calls: f64,
}

impl LaunchCounts {
    /// Every counted kernel.
    pub fn total(&self) -> f64 {
        self.piece + self.opaque + self.splitting + self.outside
    }

    /// The kernels counted at `host`.
    pub fn at(&self, host: OpHost) -> f64 {
        match host {
            OpHost::Piece => self.piece,
            OpHost::OpaqueInPiece => self.opaque,
            OpHost::Splitting => self.splitting,
            OpHost::OutsideModel => self.outside,
        }
    }

    /// Adds `kernels` kernels of operator `name`.
    pub fn add(&mut self, name: OpName, kernels: f64) {
        let slot = match OpHost::of(name) {
            OpHost::Piece => &mut self.piece,
            OpHost::OpaqueInPiece => &mut self.opaque,
            OpHost::Splitting => &mut self.splitting,
            OpHost::OutsideModel => &mut self.outside,
        };
        *slot += kernels;
    }

    /// The kernels that `launch` replays from a graph (their analytic bodies then cost the GPU
    /// `graph_kernel_us` each beyond them, not `kernel_us`).
    pub fn in_graph(&self, launch: LaunchPath) -> f64 {
        [OpHost::Piece, OpHost::OpaqueInPiece, OpHost::Splitting, OpHost::OutsideModel]
            .into_iter()
            .filter(|&h| launch.in_graph(h))
            .map(|h| self.at(h))
            .sum()
    }
}

impl LaunchPath {
    /// The path of a step under `engine` and `settings` that is not a full-graph replay (`full_graph` false) with
    /// `tokens` tokens per data-parallel rank: vLLM V1 with CUDA graphs on runs its compiled pieces, replayed from
    /// their graphs up to `cuda_graph_max_batch` tokens; everything else runs eagerly.
    pub fn of(engine: Engine, settings: &EngineSettings, full_graph: bool, tokens: u32) -> LaunchPath {
        if full_graph {
            return LaunchPath::Graph;
        }
        let compiled = engine == Engine::Vllm && settings.vllm_engine == VllmEngine::V1 && settings.cuda_graphs;
        match compiled {
            true if tokens <= settings.cuda_graph_max_batch => LaunchPath::Piecewise,
            true => LaunchPath::Compiled,
            false => LaunchPath::Eager,
        }
    }

    /// The host launch time of a stage's step with `counts`, µs (module doc).
    pub fn host_us(self, counts: &LaunchCounts, consts: &ServingConstants, engine: Engine, s: &EngineSettings) -> f64 {
        let python = consts.custom_op_us;
        match self {
            LaunchPath::Graph => 0.0,
            LaunchPath::Eager => counts.total() * consts.eager_launch_us(engine, s),
            LaunchPath::Compiled => {
                counts.piece * consts.inductor_kernel_us
                    + (counts.opaque + counts.outside + counts.splitting_calls) * python
            }
            LaunchPath::Piecewise => {
                (counts.splitting_calls + 1.0) * consts.piece_replay_us
                    + (counts.outside + counts.splitting_calls) * python
            }
        }
    }

    /// Whether an operator running at `host` replays from a graph on this path (its analytic kernels then cost the
    /// GPU `graph_kernel_us` beyond their bodies instead of `kernel_us`).
    pub fn in_graph(self, host: OpHost) -> bool {
        match self {
            LaunchPath::Graph => true,
            LaunchPath::Piecewise => matches!(host, OpHost::Piece | OpHost::OpaqueInPiece),
            LaunchPath::Eager | LaunchPath::Compiled => false,
        }
    }
}

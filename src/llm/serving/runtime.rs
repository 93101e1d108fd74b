//! The engines' runtime generations and entry points a request names under `engine_options`
//! ([`super::request::EngineOptions`]): vLLM's engine, TensorRT-LLM's backend and launcher.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// vLLM's engine generation (its host path between GPU steps differs, [`super::request::EngineOptions::vllm_engine`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum VllmEngine {
    /// The V0 engine (vLLM < 0.8; 2024).
    V0,
    /// The V1 engine (vLLM ≥ 0.8): scheduler and input preparation on a persistent batch in the engine-core
    /// process; detokenization and output processing in another process, off the GPU's critical path.
    #[default]
    V1,
}

/// The TensorRT-LLM entry point that started the engine ([`super::request::EngineOptions::trtllm_launcher`]):
/// each sets its own defaults (`super::engine` module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum TrtllmLauncher {
    /// `trtllm-serve` or the LLM API: `TorchLlmArgs`' defaults (CUDA graphs for batches 1–31, 32, 64 and 128
    /// without padding, chunked context off, `max_num_tokens` 8192).
    #[default]
    Serve,
    /// `trtllm-bench throughput` (`tensorrt_llm/bench/benchmark/utils/general.py`, `get_settings`): CUDA graphs up
    /// to the run's `max_batch_size` with padding, chunked context off, `max_num_tokens` at least the prompt +
    /// `max_batch_size`.
    Bench,
}

/// TensorRT-LLM's runtime ([`super::request::EngineOptions::trtllm_backend`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum TrtllmBackend {
    /// The PyTorch backend (TensorRT-LLM ≥ 1.0's default): CUDA graphs for decode batches, the tensor-parallel
    /// all-reduce fused with the residual add and the next RMSNorm.
    #[default]
    Pytorch,
    /// TensorRT engines run by the C++ executor (`trtllm-build`; TensorRT-LLM < 1.0): no CUDA graphs and no
    /// all-reduce fusion by default.
    Tensorrt,
}

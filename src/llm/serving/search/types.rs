//! The serving configuration search's request and answer types (`POST /v1/predictions/inference/search`): the
//! searched workload and constraints, the request, one configuration that meets the target, the answer, and the
//! defaults they name (moved out of `src/llm/serving/search.rs`; the search itself is [`super::search`]).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ParetoPoint;
use crate::hw::Precision;
use crate::llm::serving::report::InferencePrediction;
use crate::llm::serving::request::{Engine, EngineOptions, ModelRef, ServingPrecision, Slo};

/// The traffic shape searched for (the concurrency is searched).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchWorkload {
    /// Prompt tokens per request.
    pub input_tokens: u32,
    /// Generated tokens per request.
    pub output_tokens: u32,
    /// Requests each simulated candidate sends. Default 4 × its concurrency, at least 64 and at most 1,000 (a
    /// closed loop reaches its steady waves within a few rounds of clients).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_requests: Option<u32>,
}

/// Most candidates one search simulates.
pub const MAX_SIMULATIONS: u64 = 48;

/// Requests a simulated candidate of `concurrency` clients sends (see [`SearchWorkload::num_requests`]).
pub fn search_requests(w: &SearchWorkload, concurrency: u32) -> u32 {
    w.num_requests.unwrap_or_else(|| (4 * concurrency).clamp(64, 1000))
}

/// Limits of the searched space (each absent field: the default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct SearchConstraints {
    /// Tensor-parallel degrees to try. Default powers of two up to the GPUs per node (and the budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<Vec<u32>>,
    /// Pipeline degrees to try. Default 1, 2, 4, 8 within the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp: Option<Vec<u32>>,
    /// Expert-parallel degrees to try (MoE models). Default every power of two dividing tp and the experts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep: Option<Vec<u32>>,
    /// Precisions to try. Default bf16, fp8 where the GPU has FP8 tensor cores and fp4 where it has FP4 ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precisions: Option<Vec<ServingPrecision>>,
    /// Concurrency levels per instance to try. Default 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512,
    /// 768, 1024.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Vec<u32>>,
    /// Data-parallel attention (MoE models): `true` tries only it, `false` never; default both (ep = tp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp_attention: Option<bool>,
}

fn five() -> u32 {
    5
}

/// `POST /v1/predictions/inference/search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
    "workload": {"input_tokens": 1024, "output_tokens": 256}, "slo": {"ttft_ms": 500, "tpot_ms": 30},
    "engine": "vllm", "top_k": 3}))]
pub struct InferenceSearchRequest {
    /// Name of a stored system.
    pub system: String,
    /// A catalog name, `{"hf_config": {…}}`, or the architecture.
    pub model: ModelRef,
    /// GPU budget: instances of tp·pp GPUs, as many as fit.
    pub gpus: u32,
    pub workload: SearchWorkload,
    /// The latency target: give at least one bound; `percentile` (50, 90 or 99; default 90) of the simulated TTFT and
    /// TPOT must meet it.
    pub slo: Slo,
    /// Default `vllm`.
    #[serde(default)]
    pub engine: Engine,
    /// Overrides of the engine's scheduling defaults, for every candidate.
    #[serde(default)]
    pub engine_options: EngineOptions,
    /// KV-cache precision for every candidate. Default: each candidate's `precision` (bf16 under fp8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_dtype: Option<ServingPrecision>,
    #[serde(default)]
    pub constraints: SearchConstraints,
    /// How many configurations to return (each with its full prediction). Default 5.
    #[serde(default = "five")]
    pub top_k: u32,
}

/// One configuration that meets the target.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SearchHit {
    pub tp: u32,
    pub pp: u32,
    pub ep: u32,
    /// Data-parallel attention with all-to-all expert dispatch.
    pub dp_attention: bool,
    /// Attention data-parallel ranks.
    pub attention_dp: u32,
    pub precision: Precision,
    /// Clients per instance (the level with the best goodput that met the target).
    pub concurrency: u32,
    /// Instances of tp·pp GPUs in the budget.
    pub replicas: u32,
    /// Mean simulated TTFT and TPOT, ms.
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    /// The target's percentile of the simulated TTFT and TPOT, ms (what met it).
    pub ttft_percentile_ms: f64,
    pub tpot_percentile_ms: f64,
    /// Generated tokens per second per GPU of the requests that met the target (the ranking).
    pub goodput_per_gpu: f64,
    /// Generated tokens per second per GPU, every request.
    pub tokens_per_s_per_gpu: f64,
    /// Generated tokens per second of all replicas.
    pub output_tokens_per_s: f64,
    /// The instance's full prediction at that concurrency.
    pub prediction: Box<InferencePrediction>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct InferenceSearchResult {
    /// (configuration, concurrency) pairs considered, solved or bounded.
    pub evaluated: u64,
    /// Of them, solved in the steady state.
    pub solved: u64,
    /// Of them, simulated (the candidates the steady-state bound could not rule out, best bound first).
    pub simulated: u64,
    /// Configurations with a simulated concurrency meeting the target.
    pub feasible: u64,
    /// The percentile the target applied to.
    pub percentile: f64,
    /// Wall time of the search, ms.
    pub elapsed_ms: f64,
    /// evaluated / elapsed, per second.
    pub configurations_per_s: f64,
    /// The best `top_k`, by goodput per GPU.
    pub best: Vec<SearchHit>,
    /// The Pareto front of tokens/s per GPU against tokens/s per user over every solved pair (steady state),
    /// whatever the target; sorted by tokens/s per user.
    pub pareto_front: Vec<ParetoPoint>,
    /// Every solved pair (steady state), for the chart (`?format=svg`).
    pub points: Vec<ParetoPoint>,
    pub warnings: Vec<String>,
}

/// Default concurrency levels.
pub const CONCURRENCY: [u32; 17] = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024];

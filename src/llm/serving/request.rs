//! What a serving prediction is asked about (`POST /v1/predictions/inference`): the system, the model (a catalog
//! name, a Hugging Face `config.json`, or the architecture spelled out), the parallel configuration, the
//! precision, the serving engine with its scheduling options, and the workload. [`super::validate`] checks a
//! request and names the offending field.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use crate::hw::Precision;
use crate::llm::config::{Activation, Norm};
use crate::op::KernelFamily;

/// The model to serve: a name from perfcast's catalog (`"Llama-3.1-70B"`, see [`super::catalog`]), or an object —
/// either `{"hf_config": {…}}` with the contents of a Hugging Face `config.json`, or the architecture's fields
/// ([`ServingModelSpec`]).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ModelRef {
    /// A catalog name, compared case-insensitively (the README lists them).
    Name(String),
    /// An architecture, or a Hugging Face config under `hf_config`.
    Spec(ServingModelSpec),
}

/// Reads a string as a catalog name and an object as a [`ServingModelSpec`], keeping the field path of any error
/// inside the object (`model.layers`), which an untagged enum would lose.
impl<'de> Deserialize<'de> for ModelRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ModelRef, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ModelRef;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a catalog model name, {\"hf_config\": {…}} or a model object")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<ModelRef, E> {
                Ok(ModelRef::Name(s.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ModelRef, A::Error> {
                ServingModelSpec::deserialize(de::value::MapAccessDeserializer::new(map)).map(ModelRef::Spec)
            }
        }
        d.deserialize_any(V)
    }
}

pub use super::frontend::{Frontend, FrontendServer};
pub use super::runtime::{TrtllmBackend, TrtllmLauncher, VllmEngine};
pub use crate::llm::moe::{MlaSpec, MoeSpec};

/// A decoder-only transformer as a serving engine loads it. Give the architecture's fields, or `hf_config` alone
/// (a Hugging Face `config.json`, optionally with `name`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Llama-3.1-70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
    "head_dim": 128, "ffn_hidden": 28672, "vocab": 128256, "norm": "rmsnorm", "activation": "swiglu"}))]
pub struct ServingModelSpec {
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The contents of a Hugging Face `config.json` (`hidden_size`, `num_hidden_layers`, `num_attention_heads`,
    /// `num_key_value_heads`, `head_dim`, `intermediate_size`, `vocab_size`, `num_local_experts` / `num_experts`
    /// / `n_routed_experts`, `num_experts_per_tok`, `moe_intermediate_size`, …; [`super::hf`]). Excludes every
    /// other field but `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub hf_config: Option<serde_json::Value>,
    /// Transformer layers, N.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<u32>,
    /// Hidden size d.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<u32>,
    /// Query heads a.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heads: Option<u32>,
    /// Key/value heads g (GQA; must divide `heads`). Default `heads`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<u32>,
    /// Dims per head D; may differ from hidden/heads (Qwen3, GPT-3 13B). Default hidden/heads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u32>,
    /// Width of the (dense) MLP, f. Default 4·hidden for `gelu`, ⌊(8·hidden/3)/64⌋·64 for `swiglu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ffn_hidden: Option<u32>,
    /// Vocabulary size V.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocab: Option<u32>,
    /// Default `rmsnorm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm: Option<Norm>,
    /// Default `swiglu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation: Option<Activation>,
    /// The LM head shares the embedding's weights (stored once). Default `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tied_embeddings: Option<bool>,
    /// Mixture-of-experts layers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<MoeSpec>,
    /// Multi-head latent attention (approximated, see [`MlaSpec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mla: Option<MlaSpec>,
}

fn one() -> u32 {
    1
}

/// Tensor (tp), pipeline (pp) and expert (ep) parallel degrees of one serving instance: tp·pp GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"tp": 4, "pp": 1, "ep": 1}))]
pub struct ServingParallelism {
    /// GPUs of one pipeline stage (SGLang's `--tp-size`): Megatron-style tensor parallelism of attention heads and
    /// MLP columns (two all-reduces per layer), or, with `attention_dp_size`, the attention data-parallel ranks
    /// times the attention tensor-parallel degree of each. Default 1.
    #[serde(default = "one")]
    pub tp: u32,
    /// Pipeline stages (layers split; the running batch is split into pp micro-batches that flow through them).
    /// Default 1.
    #[serde(default = "one")]
    pub pp: u32,
    /// Expert-parallel degree (SGLang `--ep-size`, TensorRT-LLM `moe_expert_parallel_size`, aiconfigurator
    /// `moe_ep_size`): the routed experts are sharded over ep of the tp GPUs of a stage (E/ep experts each), each
    /// expert's MLP split over the remaining tp/ep (`moe_tp_size`). Must divide tp and the experts. Without
    /// attention data parallelism the tokens are replicated over the tensor-parallel group, so no all-to-all is
    /// needed (the layer's all-reduce combines the experts' outputs). Default 1.
    #[serde(default = "one", alias = "moe_ep_size")]
    pub ep: u32,
    /// Data-parallel attention over all tp GPUs (SGLang `--enable-dp-attention` with `--dp-size` = tp,
    /// TensorRT-LLM `enable_attention_dp`, vLLM data parallelism with `--enable-expert-parallel`, DeepEP):
    /// `attention_dp_size` = tp. Default `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not", alias = "enable_dp_attention")]
    pub dp_attention: bool,
    /// Attention data-parallel ranks (SGLang `--dp-size` with `--enable-dp-attention`, vLLM
    /// `--data-parallel-size` with `--enable-expert-parallel`, aiconfigurator `attention_dp_size`): attention and
    /// the dense layers run on tp/attention_dp_size GPUs per rank (tensor-parallel within it), each rank with its
    /// own requests and their KV cache; the experts stay sharded over all tp GPUs, and every MoE layer dispatches
    /// its routed tokens to the experts' GPUs by an all-to-all and combines them by another. Must divide tp; needs
    /// a mixture-of-experts model. Default 1, or tp with `dp_attention`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_dp_size: Option<u32>,
}

impl Default for ServingParallelism {
    fn default() -> ServingParallelism {
        ServingParallelism { tp: 1, pp: 1, ep: 1, dp_attention: false, attention_dp_size: None }
    }
}

/// Precision of weights and activations (and, by default, of the KV cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum ServingPrecision {
    #[default]
    Bf16,
    Fp16,
    /// FP8 (E4M3) weights and activations of the transformer layers' GEMMs and experts (vLLM's `fp8`
    /// quantization); embedding, LM head, norms and attention stay 16-bit. Needs FP8 tensor cores.
    Fp8,
    /// NVFP4 weights and activations of the transformer layers' GEMMs and experts (E2M1 elements with one FP8
    /// scale per 16, 0.5625 bytes per element: ModelOpt's NVFP4 checkpoints, TensorRT-LLM's and vLLM's `nvfp4`,
    /// SGLang's `modelopt_fp4`); embedding, LM head, norms and attention stay 16-bit. Needs FP4 tensor cores
    /// (Blackwell). As a KV-cache precision it is refused.
    Fp4,
}

impl ServingPrecision {
    /// The precision perfcast's cost models use.
    pub fn precision(self) -> Precision {
        match self {
            ServingPrecision::Bf16 => Precision::Bf16,
            ServingPrecision::Fp16 => Precision::Fp16,
            ServingPrecision::Fp8 => Precision::Fp8,
            ServingPrecision::Fp4 => Precision::Nvfp4,
        }
    }
}

/// The serving engine: selects its documented scheduling defaults ([`super::engine`]) and its per-step host
/// overhead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    #[default]
    Vllm,
    Sglang,
    Trtllm,
}

impl Engine {
    /// Every engine.
    pub const ALL: [Engine; 3] = [Engine::Vllm, Engine::Sglang, Engine::Trtllm];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Trtllm => "trtllm",
        }
    }

    /// Whose measured kernels time this engine's operators (the learned models of that engine where they exist,
    /// [`crate::cost::KernelChoice::Engine`]).
    pub fn kernels(self) -> KernelFamily {
        match self {
            Engine::Vllm => KernelFamily::Vllm,
            Engine::Sglang => KernelFamily::Sglang,
            Engine::Trtllm => KernelFamily::Trtllm,
        }
    }
}

/// Overrides of the engine's scheduling defaults (each absent field keeps the engine's default,
/// [`super::engine::EngineDefaults`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"max_num_seqs": 256, "max_num_batched_tokens": 8192, "gpu_memory_utilization": 0.9}))]
pub struct EngineOptions {
    /// Most sequences running at once per attention data-parallel rank (one rank without data-parallel
    /// attention): vLLM `max_num_seqs` (per data-parallel engine), TensorRT-LLM `max_batch_size` (per rank's
    /// scheduler), SGLang `max_running_requests` divided by `dp_size` (SGLang's flag is the instance's, split over
    /// the ranks under `--enable-dp-attention`: `ModelRunner`/`TpModelWorker`, `max_running_requests // dp_size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u32>,
    /// Most tokens one step processes, decodes and prefill chunks together (vLLM `max_num_batched_tokens`,
    /// SGLang `chunked_prefill_size`, TensorRT-LLM `max_num_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_batched_tokens: Option<u32>,
    /// Chunked prefill: prompts are prefilled in chunks that share steps with the running decodes. Off: a step
    /// prefills whole prompts and the decodes wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunked_prefill: Option<bool>,
    /// Fraction of the GPU's memory the engine may use (vLLM `gpu_memory_utilization`, SGLang
    /// `mem_fraction_static`; TensorRT-LLM's `free_gpu_memory_fraction` applies to the memory left after the
    /// weights), in (0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_utilization: Option<f64>,
    /// Decode steps replay captured CUDA graphs (no per-kernel host launch cost) up to
    /// `cuda_graph_max_batch` sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_graphs: Option<bool>,
    /// Largest decode batch with a captured CUDA graph (TensorRT-LLM `cuda_graph_config.max_batch_size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_graph_max_batch: Option<u32>,
    /// A decode batch between two captured sizes is padded up to the next and replays its graph (TensorRT-LLM
    /// `cuda_graph_config.enable_padding`: off by default under `trtllm-serve` and the LLM API, where only a batch
    /// of exactly a captured size — 1–31, 32, 64, 128 by default — replays a graph and any other runs eagerly; on
    /// under `trtllm-bench`). vLLM and SGLang always pad.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_graph_padding: Option<bool>,
    /// The decode batch sizes (sequences per attention data-parallel rank) the engine captures a CUDA graph for,
    /// replacing the engine's default list (`src/llm/serving/sim/steps.rs`, `graph_sizes`); sorted and
    /// de-duplicated, each 1–[`MAX_CUDA_GRAPH_BATCH`](super::validate::MAX_CUDA_GRAPH_BATCH), and the largest
    /// becomes `cuda_graph_max_batch` (give that too only if it equals the largest). Each engine's flag:
    /// TensorRT-LLM `cuda_graph_config.batch_sizes` (`CudaGraphConfig` in `tensorrt_llm/llmapi/llm_args.py`: its
    /// `max_batch_size` becomes the largest size), vLLM `compilation_config.cudagraph_capture_sizes` (or
    /// `--cudagraph-capture-sizes`; `VllmConfig._set_cudagraph_sizes`, `vllm/config/vllm.py`, drops the sizes above
    /// `max_num_batched_tokens` and sets `max_cudagraph_capture_size` to the largest kept), SGLang `--cuda-graph-bs`
    /// (`ServerArgs`, `python/sglang/srt/server_args.py`: `cuda_graph_max_bs = max(cuda_graph_bs)`). A batch between
    /// two sizes replays the next larger size's graph, padded, where the engine pads (vLLM and SGLang always,
    /// TensorRT-LLM with `cuda_graph_padding`), else runs eagerly (`replays_graph` in the same file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_graph_batch_sizes: Option<Vec<u32>>,
    /// Which TensorRT-LLM entry point started the engine, for the defaults it sets ([`TrtllmLauncher`]): `serve`
    /// (`trtllm-serve` or the LLM API) or `bench` (`trtllm-bench throughput`). Default: `bench` for an offline
    /// workload (neither `concurrency` nor `request_rate`: every request at once, as `trtllm-bench throughput`
    /// sends them), else `serve`. TensorRT-LLM only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trtllm_launcher: Option<TrtllmLauncher>,
    /// vLLM's engine generation, which sets its host cost per step ([`super::engine::HostCost`]): `v1` (vLLM ≥ 0.8,
    /// the default) or `v0` (the 2024 engine LLM-Inference-Bench measured: per-sequence Python scheduling and
    /// output processing between GPU steps). Ignored by the other engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vllm_engine: Option<VllmEngine>,
    /// TensorRT-LLM's runtime: `pytorch` (the PyTorch backend, `trtllm-serve`'s default since TensorRT-LLM 1.0)
    /// or `tensorrt` (engines built by `trtllm-build` and run by the C++ executor, the 2024 runtime
    /// LLM-Inference-Bench measured: no CUDA graphs unless asked, `ExtendedRuntimePerfKnobConfig.cudaGraphMode` =
    /// false, and the all-reduce not fused with the residual add and RMSNorm, `PluginConfig.reduce_fusion` = false).
    /// Ignored by the other engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trtllm_backend: Option<TrtllmBackend>,
    /// The engine prepares the next step on the CPU while the GPU runs the current one, so a step takes
    /// max(GPU, host) instead of GPU + host: SGLang's overlap scheduler (on by default since v0.4), vLLM V1's
    /// async scheduling (on by default in current releases, `--async-scheduling`; never in V0), TensorRT-LLM's
    /// PyTorch-backend overlap scheduler (on by default, `disable_overlap_scheduler` = False; the C++ executor of
    /// `trtllm_backend: tensorrt` has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub async_scheduling: Option<bool>,
    /// SGLang's `--scheduler-recv-interval` (default 1): during decoding its scheduler takes the requests waiting in
    /// its socket only every this many decode batches (`SchedulerRecvSkipper`: each decode batch adds 1 to a
    /// counter, a prefill batch 1,000, and the requests are received when it reaches the interval), so a request
    /// that arrives while the batch decodes waits up to this many decode steps before its prefill. 1–1,000;
    /// SGLang only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_recv_interval: Option<u32>,
}

impl EngineOptions {
    /// These options with every field `over` gives replaced by it.
    pub fn merged(&self, over: &EngineOptions) -> EngineOptions {
        EngineOptions {
            max_num_seqs: over.max_num_seqs.or(self.max_num_seqs),
            max_num_batched_tokens: over.max_num_batched_tokens.or(self.max_num_batched_tokens),
            chunked_prefill: over.chunked_prefill.or(self.chunked_prefill),
            gpu_memory_utilization: over.gpu_memory_utilization.or(self.gpu_memory_utilization),
            cuda_graphs: over.cuda_graphs.or(self.cuda_graphs),
            cuda_graph_max_batch: over.cuda_graph_max_batch.or(self.cuda_graph_max_batch),
            cuda_graph_padding: over.cuda_graph_padding.or(self.cuda_graph_padding),
            cuda_graph_batch_sizes: over.cuda_graph_batch_sizes.clone().or_else(|| self.cuda_graph_batch_sizes.clone()),
            trtllm_launcher: over.trtllm_launcher.or(self.trtllm_launcher),
            vllm_engine: over.vllm_engine.or(self.vllm_engine),
            trtllm_backend: over.trtllm_backend.or(self.trtllm_backend),
            async_scheduling: over.async_scheduling.or(self.async_scheduling),
            scheduler_recv_interval: over.scheduler_recv_interval.or(self.scheduler_recv_interval),
        }
    }
}

/// The traffic, as a serving benchmark client sends it ([`super::workload`] says which client each option
/// mirrors): `num_requests` requests of `input_tokens` prompt tokens generating `output_tokens` tokens, from
/// `concurrency` closed-loop clients (each sends its next request when its last one ends), at `request_rate`
/// requests per second (gamma inter-arrival times of shape `burstiness`), both (arrivals wait for a free client),
/// or neither (every request sent at once: an offline throughput run). Lengths are fixed, or vary by `range_ratio`,
/// `min_length_ratio` or `input_tokens_std` / `output_tokens_std`; `seed` fixes the draws.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"input_tokens": 1024, "output_tokens": 256, "concurrency": 32}))]
pub struct Workload {
    /// Prompt tokens per request, L (the mean when lengths vary).
    pub input_tokens: u32,
    /// Generated tokens per request, O (the first comes out of the prefill; the mean when lengths vary).
    pub output_tokens: u32,
    /// Clients of a closed loop: at most this many requests in flight (`vllm bench serve --max-concurrency`,
    /// genai-perf `--concurrency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Requests per second arriving (`vllm bench serve --request-rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_rate: Option<f64>,
    /// Shape of the gamma-distributed inter-arrival times under `request_rate`: 1 (default) is a Poisson process,
    /// below 1 burstier, above 1 more even (`vllm bench serve --burstiness`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burstiness: Option<f64>,
    /// Requests the benchmark sends. Default 1,000 (`vllm bench serve --num-prompts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_requests: Option<u32>,
    /// Lengths drawn uniformly in [L·(1 − r), L·(1 + r)] (`vllm bench serve --random-range-ratio`), r in [0, 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_ratio: Option<f64>,
    /// Lengths drawn as integers uniform in [⌊L·r⌋, L], r in (0, 1]: the lower-bounded range of SGLang's
    /// `bench_serving.py --random-range-ratio` (`compute_random_lens`) and of vLLM's `benchmarks/benchmark_serving.py`
    /// copy that SemiAnalysis InferenceX runs (`utils/bench_serving`, `sample_random_requests`). L is then the
    /// longest length, not the mean (the mean is L·(1 + r)/2). Excludes `range_ratio` and the standard deviations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length_ratio: Option<f64>,
    /// Standard deviation of normally distributed prompt lengths, tokens (genai-perf
    /// `--synthetic-input-tokens-stddev`). Excludes `range_ratio`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens_std: Option<f64>,
    /// Standard deviation of normally distributed output lengths, tokens (genai-perf `--output-tokens-stddev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_std: Option<f64>,
    /// Seed of the random lengths and arrivals. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Simulate the benchmark step by step (default `true`): latency percentiles, queueing of requests sent
    /// together, preemptions. `false` answers with the steady-state model alone (faster; means only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulate: Option<bool>,
}

impl Workload {
    /// A closed loop of `concurrency` clients with fixed lengths and every other option at its default.
    pub fn closed(input_tokens: u32, output_tokens: u32, concurrency: u32) -> Workload {
        Workload {
            input_tokens,
            output_tokens,
            concurrency: Some(concurrency),
            request_rate: None,
            burstiness: None,
            num_requests: None,
            range_ratio: None,
            min_length_ratio: None,
            input_tokens_std: None,
            output_tokens_std: None,
            seed: None,
            simulate: None,
        }
    }
}

/// A latency target (service-level objective): every given bound must hold. Goodput counts the requests that meet
/// it (`vllm bench serve --goodput ttft:… tpot:…`); the search ranks configurations whose `percentile` of TTFT
/// and TPOT meets it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    /// Largest acceptable time to first token, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Largest acceptable time per output token, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    /// Largest acceptable end-to-end latency, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_latency_ms: Option<f64>,
    /// The search: which percentile of the simulated TTFT and TPOT must meet the bounds, 50, 90 or 99. Default 90.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile: Option<f64>,
}

fn bf16() -> ServingPrecision {
    ServingPrecision::Bf16
}

/// How prefill and decode are deployed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum ServingMode {
    /// Aggregated: every instance prefills and decodes (one instance of `parallelism`).
    #[default]
    Agg,
    /// Disaggregated (DistServe, Splitwise; NVIDIA Dynamo, SGLang's and vLLM's P/D serving): a pool of prefill
    /// workers sends each request's KV cache to a pool of decode workers over the system's links.
    Disagg,
}

/// One pool of a disaggregated deployment: `workers` instances of `parallelism` each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"workers": 2, "parallelism": {"tp": 4}}))]
pub struct WorkerPool {
    /// Instances in the pool (Dynamo's `prefill_workers` / `decode_workers`). Default 1.
    #[serde(default = "one")]
    pub workers: u32,
    /// Each worker's parallelism. Default tp = pp = ep = 1.
    #[serde(default)]
    pub parallelism: ServingParallelism,
    /// Overrides of the engine options for this pool (on top of `engine_options`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_options: Option<EngineOptions>,
}

/// `POST /v1/predictions/inference`: serving of `model` on tp·pp GPUs of `system` by `engine` (or, with
/// `mode: "disagg"`, on prefill and decode pools), as a benchmark client measures it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "parallelism": {"tp": 4},
    "precision": "bf16", "engine": "vllm",
    "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 32}}))]
pub struct InferenceRequest {
    /// Name of a stored system (`GET /v1/systems`).
    pub system: String,
    /// A catalog name, `{"hf_config": {…}}`, or the architecture.
    pub model: ModelRef,
    /// Default tp = pp = ep = 1.
    #[serde(default)]
    pub parallelism: ServingParallelism,
    /// Weights and activations: `bf16` (default), `fp16`, `fp8` or `fp4` (NVFP4, Blackwell).
    #[serde(default = "bf16")]
    pub precision: ServingPrecision,
    /// KV-cache precision (vLLM's `--kv-cache-dtype`): `bf16`, `fp16` or `fp8` — an fp8 cache holds one byte per
    /// element, twice the tokens of a 16-bit one, and its attention runs the engine's fp8 kernels (TensorRT-LLM's
    /// FP8 context FMHA). Default: the engine's `auto`, which follows the checkpoint's `kv_cache_quant_algo`
    /// (vLLM `resolve_kv_cache_dtype_string`, `vllm/utils/torch_utils.py`; SGLang
    /// `ModelRunner.configure_kv_cache_dtype`, `python/sglang/srt/model_executor/model_runner.py`; TensorRT-LLM's
    /// `kv_cache_config.dtype: auto`): fp8 for `fp4` weights under every engine (NVFP4 checkpoints are ModelOpt's,
    /// and ModelOpt's `hf_ptq.py` quantizes the KV cache to FP8 by default, `--kv_cache_qformat fp8`, writing
    /// `kv_cache_quant_algo: FP8`) and for `fp8` weights under TensorRT-LLM (which serves ModelOpt's fp8
    /// checkpoints); 16-bit otherwise (a 16-bit checkpoint, or a self-quantized fp8 release such as DeepSeek's or
    /// MiniMax's, which names no KV-cache quantization).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_dtype: Option<ServingPrecision>,
    /// `vllm` (default), `sglang` or `trtllm`.
    #[serde(default)]
    pub engine: Engine,
    /// Overrides of the engine's scheduling defaults.
    #[serde(default)]
    pub engine_options: EngineOptions,
    pub workload: Workload,
    /// A latency target: the answer's `simulation.goodput` counts the requests that meet it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
    /// `agg` (default) or `disagg` (then `prefill` and `decode` give the pools, and `parallelism` is not used).
    #[serde(default, skip_serializing_if = "is_agg")]
    pub mode: ServingMode,
    /// The prefill pool (`mode: "disagg"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<WorkerPool>,
    /// The decode pool (`mode: "disagg"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<WorkerPool>,
    /// Speculative decoding: each decode step drafts tokens and verifies them in one forward pass of the model
    /// ([`SpeculativeDecoding`]). Default: none (one token per sequence per decode step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<SpeculativeDecoding>,
    /// The HTTP front end that tokenizes the requests before the engines ([`Frontend`]): the engine's own API server
    /// (default, one tokenizer thread) or NVIDIA Dynamo's (requests tokenized concurrently).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend: Option<Frontend>,
}

/// How speculative tokens are drafted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SpeculativeMethod {
    /// Multi-token prediction: the model's own MTP module drafts (DeepSeek-V3 technical report §2.2, one
    /// transformer layer after the model's, sharing its embedding and output head; config.json
    /// `num_nextn_predict_layers`). vLLM `speculative_config.method: "mtp"`, SGLang `--speculative-algorithm
    /// EAGLE` (or `NEXTN`) on an MTP checkpoint, TensorRT-LLM `speculative_config.decoding_type: MTP`.
    Mtp,
}

/// Speculative decoding of a serving request (Leviathan et al. 2023, "Fast Inference from Transformers via
/// Speculative Decoding"): every decode step drafts `num_speculative_tokens` tokens per sequence, verifies them
/// and the sequence's last token in one forward pass of the model, and keeps the accepted prefix plus the model's
/// own next token.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"method": "mtp", "num_speculative_tokens": 3}))]
pub struct SpeculativeDecoding {
    /// `mtp` (the model's multi-token-prediction module drafts; the model must have one).
    pub method: SpeculativeMethod,
    /// Draft tokens per sequence and decode step, k (vLLM `speculative_config.num_speculative_tokens`; SGLang
    /// `--speculative-num-steps` with `--speculative-eagle-topk 1` and `--speculative-num-draft-tokens` = k + 1;
    /// TensorRT-LLM `speculative_config.num_nextn_predict_layers`). 1–16. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_speculative_tokens: Option<u32>,
    /// Probability that a draft token is accepted given the one before it was, a in [0, 1), the same for every
    /// draft position (Leviathan et al. 2023's i.i.d. assumption: E = (1 − a^{k+1})/(1 − a) tokens per step).
    /// Default: none — the tokens per step TensorRT-LLM's tech blog 1 measured for DeepSeek-R1's one MTP layer run
    /// k times (1.92, 2.58, 2.82, 2.99, 3.01 at k = 1…5; later drafts are accepted less often:
    /// [`crate::llm::serving::speculative::REUSED_MTP_TOKENS_PER_STEP`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance_rate: Option<f64>,
}

fn is_agg(m: &ServingMode) -> bool {
    *m == ServingMode::Agg
}

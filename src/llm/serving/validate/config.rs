//! The validated serving configuration: every default filled in, and the per-GPU shapes derived from it.

use serde::Serialize;
use utoipa::ToSchema;

use crate::hw::Precision;
use crate::llm::serving::disagg::DisaggPools;
use crate::llm::serving::engine::EngineSettings;
use crate::llm::serving::model::ServingModel;
use crate::llm::serving::request::{Engine, ServingMode, Slo};
use crate::llm::serving::sim::steps::graph_sizes;
use crate::llm::serving::speculative::Speculative;
use crate::llm::serving::workload::Traffic;

/// A validated serving configuration with every default filled in.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ServingConfig {
    pub model: ServingModel,
    pub tp: u32,
    pub pp: u32,
    pub ep: u32,
    /// Data-parallel attention with all-to-all expert dispatch (attention_dp > 1).
    pub dp_attention: bool,
    /// Attention data-parallel ranks (1: none); attention runs tensor-parallel over tp/attention_dp GPUs per rank.
    pub attention_dp: u32,
    /// GEMM and expert weights and activations.
    pub precision: Precision,
    /// Everything else: embedding, LM head, norms, element-wise kernels (bf16, or fp16 where the GPU has no bf16).
    pub activation_precision: Precision,
    /// The KV cache and attention.
    pub kv_cache_dtype: Precision,
    pub engine: Engine,
    pub settings: EngineSettings,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Closed loop: requests in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Open loop: requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_rate: Option<f64>,
    /// The simulated benchmark's traffic (every default filled in).
    pub traffic: Traffic,
    /// The benchmark is simulated step by step (else the steady state alone answers).
    pub simulate: bool,
    /// The latency target goodput is counted against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
    /// Aggregated or disaggregated serving.
    pub mode: ServingMode,
    /// The disaggregated pools (the fields above are then the decode pool's worker's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pools: Option<DisaggPools>,
    /// Speculative decoding (`None`: one token per sequence per decode step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculative: Option<Speculative>,
    /// The decode batch sizes (per attention data-parallel rank) with a captured CUDA graph the request gave
    /// (`engine_options.cuda_graph_batch_sizes`, ascending and unique; `settings.cuda_graph_max_batch` is the
    /// largest); `None`: the engine's default list ([`Self::cuda_graph_sizes`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_graph_batch_sizes: Option<Vec<u32>>,
    /// Threads the front end tokenizes requests on at once ([`crate::llm::serving::frontend::tokenizer_threads`]: 1
    /// for the engine's own API server).
    pub tokenizer_threads: u32,
}

impl ServingConfig {
    /// The precision the routed experts (the fused MoE operator) run in: `fp8_block` for SGLang's fp8 (FP8 E4M3
    /// weights with one fp32 scale per 128×128 block, activations quantized per token and group of 128 inside the
    /// kernel), [`Self::precision`] for every other engine and precision.
    ///
    /// Why SGLang's fp8 experts are block-scaled: `--quantization fp8` on a block-quantized checkpoint (DeepSeek-V3's
    /// and R1's config.json: `quantization_config.weight_block_size: [128, 128]`) builds SGLang's `Fp8MoEMethod` with
    /// `block_quant = weight_block_size is not None` (`python/sglang/srt/layers/quantization/fp8.py`), and on Blackwell the
    /// `--moe-runner-backend flashinfer_trtllm` of InferenceX's recipes (`benchmarks/dsr1_fp8_b200.sh`) runs
    /// FlashInfer's `trtllm_fp8_block_scale_moe`. aiconfigurator's SGLang MoE tables measure fp8 experts only as
    /// `fp8_block` (`sglang/moe_perf`: `sglang_flashinfer_trtllm_moe` and `sglang_fused_moe_triton`, no per-tensor
    /// `fp8`), and its serving runs label every SGLang fp8 run `moe_quant_mode = fp8_block` (638 of 638 rows of
    /// `serving_runs_blackwell.csv`; its vLLM and TensorRT-LLM fp8 runs say `fp8`). The dense GEMMs stay
    /// [`Self::precision`] (the same rows' `gemm_quant_mode` is `fp8`). Weight bytes are the same (the scales add
    /// 0.02 %, [`Precision::bytes`]); the cost models time `fp8_block` at the fp8 peak.
    pub fn expert_precision(&self) -> Precision {
        match (self.engine, self.precision) {
            (Engine::Sglang, Precision::Fp8) => Precision::Fp8Block,
            (_, p) => p,
        }
    }

    /// The decode batch sizes (per attention data-parallel rank) with a captured CUDA graph, ascending: the
    /// request's list ([`Self::cuda_graph_batch_sizes`]), else the engine's default up to
    /// `settings.cuda_graph_max_batch` ([`graph_sizes`]). Whether graphs run at all is `settings.cuda_graphs`.
    pub fn cuda_graph_sizes(&self) -> Vec<u32> {
        match &self.cuda_graph_batch_sizes {
            Some(sizes) => sizes.clone(),
            None => graph_sizes(self.engine, self.settings.cuda_graph_max_batch, self.settings.cuda_graph_padding),
        }
    }

    /// GPUs of one serving instance: tp·pp.
    pub fn gpus(&self) -> u32 {
        self.tp * self.pp
    }

    /// The degree attention and the dense layers are split over: tp / attention_dp (tp without data-parallel
    /// attention, 1 with it over every GPU).
    pub fn attn_tp(&self) -> u32 {
        (self.tp / self.attention_dp.max(1)).max(1)
    }

    /// Data-parallel attention ranks the running requests are split over (1 without data-parallel attention).
    pub fn dp(&self) -> u32 {
        self.attention_dp.max(1)
    }

    /// Key/value heads on one GPU: g/tp, or 1 (replicated) when tp exceeds g (vLLM replicates key/value heads); all
    /// g with data-parallel attention; MLA's one latent.
    pub fn kv_heads_per_gpu(&self) -> u32 {
        if self.model.mla.is_some() {
            1
        } else {
            (self.model.kv_heads / self.attn_tp()).max(1)
        }
    }

    /// Layers of the fullest pipeline stage: ⌈N/pp⌉.
    pub fn layers_per_stage(&self) -> u32 {
        self.model.layers.div_ceil(self.pp)
    }
}

//! Validation of a serving request: the model resolved (catalog, Hugging Face config or fields), the parallel
//! configuration, precisions, engine settings and workload checked against the system, every refusal naming the
//! request field that causes it (`parallelism.ep`, `model.hf_config.num_key_value_heads`, …), never a panic.

use serde::Serialize;
use utoipa::ToSchema;

use super::catalog;
use super::engine::{defaults, EngineSettings};
use super::hf;
use super::model::{MoeConfig, ServingModel};
use super::request::{Engine, InferenceRequest, ModelRef, ServingModelSpec, ServingPrecision, Workload};
use crate::hw::{Precision, System};
use crate::llm::config::{bad, default_ffn_hidden, Activation, ConfigError, Norm};

/// Largest prompt or output length accepted, tokens (larger than any released model's context).
pub const MAX_TOKENS: u32 = 10_000_000;

/// A validated serving configuration with every default filled in.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ServingConfig {
    pub model: ServingModel,
    pub tp: u32,
    pub pp: u32,
    pub ep: u32,
    /// Data-parallel attention with all-to-all expert dispatch.
    pub dp_attention: bool,
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
}

impl ServingConfig {
    /// GPUs of one serving instance: tp·pp.
    pub fn gpus(&self) -> u32 {
        self.tp * self.pp
    }

    /// The degree attention and the dense layers are split over: tp, or 1 with data-parallel attention.
    pub fn attn_tp(&self) -> u32 {
        if self.dp_attention {
            1
        } else {
            self.tp
        }
    }

    /// Data-parallel attention ranks the running requests are split over: tp with data-parallel attention, else 1.
    pub fn dp(&self) -> u32 {
        if self.dp_attention {
            self.tp
        } else {
            1
        }
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

/// The model `r` names or describes. Errors name `model` (unknown catalog name) or the offending field.
pub fn resolve_model(r: &ModelRef) -> Result<ServingModel, ConfigError> {
    match r {
        ModelRef::Name(n) => catalog::lookup(n).map(|e| e.model.clone()).ok_or_else(|| {
            bad(
                "model",
                format!("unknown model {n:?}: give the architecture, or one of {}", catalog::names().join(", ")),
            )
        }),
        ModelRef::Spec(s) => match &s.hf_config {
            Some(hf_config) => {
                let mut extra = serde_json::to_value(ServingModelSpec { hf_config: None, name: None, ..s.clone() })
                    .unwrap_or_default();
                if let Some(first) = extra.as_object_mut().and_then(|o| o.keys().next().cloned()) {
                    return Err(bad(&format!("model.{first}"), "give hf_config alone (with an optional name)"));
                }
                hf::parse(hf_config, s.name.as_deref())
            }
            None => from_fields(s),
        },
    }
}

fn from_fields(s: &ServingModelSpec) -> Result<ServingModel, ConfigError> {
    let need = |v: Option<u32>, f: &str| -> Result<u32, ConfigError> {
        match v {
            None => Err(bad(&format!("model.{f}"), "missing (or name a catalog model, or give hf_config)")),
            Some(0) => Err(bad(&format!("model.{f}"), "must be at least 1")),
            Some(n) => Ok(n),
        }
    };
    let (layers, hidden, heads, vocab) =
        (need(s.layers, "layers")?, need(s.hidden, "hidden")?, need(s.heads, "heads")?, need(s.vocab, "vocab")?);
    let kv_heads = need(s.kv_heads.or(Some(heads)), "kv_heads")?;
    if heads % kv_heads != 0 {
        return Err(bad("model.kv_heads", format!("kv_heads {kv_heads} must divide heads {heads}")));
    }
    let head_dim = match s.head_dim {
        Some(d) => need(Some(d), "head_dim")?,
        None if hidden % heads == 0 => hidden / heads,
        None => {
            return Err(bad(
                "model.head_dim",
                format!("hidden {hidden} is not divisible by heads {heads}: give head_dim"),
            ))
        }
    };
    let activation = s.activation.unwrap_or(Activation::Swiglu);
    let ffn_hidden = need(s.ffn_hidden.or(Some(default_ffn_hidden(hidden, activation))), "ffn_hidden")?;
    let moe = match &s.moe {
        None => None,
        Some(m) => {
            for (f, v) in [("experts", m.experts), ("top_k", m.top_k), ("expert_ffn_hidden", m.expert_ffn_hidden)] {
                if v == 0 {
                    return Err(bad(&format!("model.moe.{f}"), "must be at least 1"));
                }
            }
            if m.top_k > m.experts {
                return Err(bad("model.moe.top_k", format!("top_k {} exceeds the {} experts", m.top_k, m.experts)));
            }
            if m.dense_layers >= layers {
                return Err(bad(
                    "model.moe.dense_layers",
                    format!("{} dense layers leave no MoE layer", m.dense_layers),
                ));
            }
            if m.shared_ffn_hidden == Some(0) {
                return Err(bad("model.moe.shared_ffn_hidden", "must be at least 1 (leave it out for none)"));
            }
            Some(MoeConfig::from_spec(m))
        }
    };
    if let Some(m) = &s.mla {
        for (f, v) in [
            ("kv_lora_rank", m.kv_lora_rank),
            ("qk_nope_head_dim", m.qk_nope_head_dim),
            ("qk_rope_head_dim", m.qk_rope_head_dim),
            ("v_head_dim", m.v_head_dim),
        ] {
            if v == 0 {
                return Err(bad(&format!("model.mla.{f}"), "must be at least 1"));
            }
        }
    }
    Ok(ServingModel {
        name: s.name.clone().unwrap_or_else(|| "custom".to_string()),
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim: s.mla.as_ref().map_or(head_dim, |m| m.qk_nope_head_dim + m.qk_rope_head_dim),
        ffn_hidden,
        vocab,
        norm: s.norm.unwrap_or(Norm::Rmsnorm),
        activation,
        tied_embeddings: s.tied_embeddings.unwrap_or(false),
        moe,
        mla: s.mla.clone(),
    })
}

/// Sizes beyond any model's, refused so that shapes stay far from integer overflow.
fn limits(m: &ServingModel) -> Result<(), ConfigError> {
    let moe = m.moe.as_ref();
    for (f, v, max) in [
        ("layers", m.layers, 100_000),
        ("hidden", m.hidden, 1 << 20),
        ("heads", m.heads, 1 << 16),
        ("head_dim", m.head_dim, 1 << 16),
        ("ffn_hidden", m.ffn_hidden, 1 << 24),
        ("vocab", m.vocab, 1 << 24),
        ("moe.experts", moe.map_or(1, |x| x.experts), 1 << 16),
        ("moe.expert_ffn_hidden", moe.map_or(1, |x| x.expert_ffn_hidden), 1 << 24),
        ("moe.shared_ffn_hidden", moe.map_or(1, |x| x.shared_ffn_hidden), 1 << 24),
    ] {
        if v > max {
            return Err(bad(&format!("model.{f}"), format!("{v} is above the largest supported, {max}")));
        }
    }
    Ok(())
}

fn workload(w: &Workload) -> Result<(), ConfigError> {
    for (f, v) in [("input_tokens", w.input_tokens), ("output_tokens", w.output_tokens)] {
        if v == 0 || v > MAX_TOKENS {
            return Err(bad(&format!("workload.{f}"), format!("must be 1–{MAX_TOKENS}, got {v}")));
        }
    }
    match (w.concurrency, w.request_rate) {
        (Some(_), Some(_)) | (None, None) => Err(bad("workload", "give exactly one of concurrency or request_rate")),
        (Some(c), None) if c == 0 || c > 1_000_000 => {
            Err(bad("workload.concurrency", format!("must be 1–1,000,000, got {c}")))
        }
        (None, Some(r)) if !(r > 0.0 && r < 1e9) => {
            Err(bad("workload.request_rate", format!("must be a positive number of requests/s, got {r}")))
        }
        _ => Ok(()),
    }
}

/// Validates `req` against `system` and fills in the defaults (the engine's per [`defaults`]).
///
/// Errors (field as in the request): an unknown catalog model or a bad architecture (`model…`); tp not dividing
/// the query heads, the dense MLP width or (with MoE) the experts' width per ep group (`parallelism.tp`); key/value
/// heads neither a multiple nor a divisor of tp (`parallelism.tp`); ep not dividing tp or the experts, or ep > 1
/// without MoE (`parallelism.ep`); pp above the layers (`parallelism.pp`); tp·pp above the system's GPUs
/// (`parallelism`); fp8 weights or KV cache on a GPU without FP8 tensor cores, fp4 weights on one without FP4 tensor
/// cores (`precision`, `kv_cache_dtype`); an fp4 KV cache (`kv_cache_dtype`);
/// engine options out of range (`engine_options.…`); the workload (`workload.…`).
pub fn validate(req: &InferenceRequest, system: &System) -> Result<ServingConfig, ConfigError> {
    let model = resolve_model(&req.model)?;
    limits(&model)?;
    let p = req.parallelism;
    for (f, v) in [("parallelism.tp", p.tp), ("parallelism.pp", p.pp), ("parallelism.ep", p.ep)] {
        if v == 0 {
            return Err(bad(f, "must be at least 1"));
        }
    }
    let tp = p.tp;
    // With data-parallel attention the heads are not split.
    let attn_tp = if p.dp_attention { 1 } else { tp };
    if model.heads % attn_tp != 0 {
        return Err(bad("parallelism.tp", format!("the {} query heads are not divisible by tp {tp}", model.heads)));
    }
    if model.mla.is_none() && model.kv_heads % attn_tp != 0 && attn_tp % model.kv_heads != 0 {
        return Err(bad(
            "parallelism.tp",
            format!("{} key/value heads are neither a multiple nor a divisor of tp {tp}", model.kv_heads),
        ));
    }
    let dense_layers = model.layers - model.moe_layers();
    if p.dp_attention && (model.moe.is_none() || p.ep != tp) {
        return Err(bad(
            "parallelism.dp_attention",
            format!("needs a mixture-of-experts model and ep = tp (got ep {}, tp {tp})", p.ep),
        ));
    }
    if dense_layers > 0 && !p.dp_attention && model.ffn_hidden % tp != 0 {
        return Err(bad("parallelism.tp", format!("ffn_hidden {} is not divisible by tp {tp}", model.ffn_hidden)));
    }
    match &model.moe {
        None if p.ep > 1 => return Err(bad("parallelism.ep", "ep > 1 needs a mixture-of-experts model")),
        None => {}
        Some(m) => {
            if tp % p.ep != 0 {
                return Err(bad(
                    "parallelism.ep",
                    format!("ep {} must divide tp {tp} (experts shard over tp GPUs)", p.ep),
                ));
            }
            if m.experts % p.ep != 0 {
                return Err(bad("parallelism.ep", format!("ep {} does not divide the {} experts", p.ep, m.experts)));
            }
            let expert_tp = tp / p.ep;
            let shared_tp = if p.dp_attention { 1 } else { tp };
            if m.expert_ffn_hidden % expert_tp != 0 || m.shared_ffn_hidden % shared_tp != 0 {
                return Err(bad(
                    "parallelism.tp",
                    format!(
                        "expert width {} is not divisible by tp/ep = {expert_tp} (or the shared width {} by tp)",
                        m.expert_ffn_hidden, m.shared_ffn_hidden
                    ),
                ));
            }
        }
    }
    if p.pp > model.layers {
        return Err(bad("parallelism.pp", format!("pp {} exceeds the {} layers", p.pp, model.layers)));
    }
    if (tp as u64) * (p.pp as u64) > system.total_gpus() {
        return Err(bad(
            "parallelism",
            format!("tp·pp = {} GPUs but {} has {}", tp as u64 * p.pp as u64, system.name, system.total_gpus()),
        ));
    }
    let gpu = &system.gpu;
    let has_fp8 = gpu.peak_matmul_flops(Precision::Fp8).is_some();
    if req.precision == ServingPrecision::Fp8 && !has_fp8 {
        return Err(bad("precision", format!("{} has no FP8 tensor cores (its peak_tflops.fp8 is null)", gpu.name)));
    }
    if req.precision == ServingPrecision::Fp4 && gpu.peak_matmul_flops(Precision::Nvfp4).is_none() {
        return Err(bad(
            "precision",
            format!(
                "{} has no FP4 tensor cores (its peak_tflops.fp4 is null): NVFP4 needs Blackwell (B200, B300, GB200, \
                 RTX PRO 6000); use fp8 or bf16",
                gpu.name
            ),
        ));
    }
    let has_bf16 = gpu.peak_matmul_flops(Precision::Bf16).is_some();
    let activation_precision = match req.precision {
        ServingPrecision::Fp16 => Precision::Fp16,
        _ if has_bf16 => Precision::Bf16,
        _ => Precision::Fp16,
    };
    if req.precision == ServingPrecision::Bf16 && !has_bf16 {
        return Err(bad("precision", format!("{} has no bf16 tensor cores: use fp16", gpu.name)));
    }
    let kv_cache_dtype = match req.kv_cache_dtype {
        Some(ServingPrecision::Fp8) if !has_fp8 => {
            return Err(bad("kv_cache_dtype", format!("{} has no FP8 path for an fp8 KV cache", gpu.name)))
        }
        Some(ServingPrecision::Bf16) if !has_bf16 => {
            return Err(bad("kv_cache_dtype", format!("{} has no bf16 tensor cores: use fp16", gpu.name)))
        }
        Some(ServingPrecision::Fp4) => {
            return Err(bad("kv_cache_dtype", "fp4 is a weight precision here: give bf16, fp16 or fp8"))
        }
        Some(k) => k.precision(),
        // TensorRT-LLM serves ModelOpt's fp8 and NVFP4 checkpoints with their FP8 KV cache (see the field's doc).
        None if req.engine == Engine::Trtllm
            && matches!(req.precision, ServingPrecision::Fp8 | ServingPrecision::Fp4)
            && has_fp8 =>
        {
            Precision::Fp8
        }
        None => activation_precision,
    };
    let d = defaults(req.engine, gpu, tp);
    let o = req.engine_options;
    let settings = EngineSettings {
        max_num_seqs: o.max_num_seqs.unwrap_or(d.max_num_seqs),
        max_num_batched_tokens: o.max_num_batched_tokens.unwrap_or(d.max_num_batched_tokens),
        chunked_prefill: o.chunked_prefill.unwrap_or(d.chunked_prefill),
        gpu_memory_utilization: o.gpu_memory_utilization.unwrap_or(d.gpu_memory_utilization),
        cuda_graphs: o.cuda_graphs.unwrap_or(d.cuda_graphs),
        cuda_graph_max_batch: o.cuda_graph_max_batch.unwrap_or(d.cuda_graph_max_batch),
        vllm_engine: o.vllm_engine.unwrap_or(d.vllm_engine),
        async_scheduling: o.async_scheduling.unwrap_or(d.async_scheduling),
    };
    for (f, v) in [
        ("engine_options.max_num_seqs", settings.max_num_seqs),
        ("engine_options.max_num_batched_tokens", settings.max_num_batched_tokens),
    ] {
        if v == 0 || v > 10_000_000 {
            return Err(bad(f, format!("must be 1–10,000,000, got {v}")));
        }
    }
    let u = settings.gpu_memory_utilization;
    if !(u > 0.0 && u <= 1.0) {
        return Err(bad("engine_options.gpu_memory_utilization", format!("must be in (0, 1], got {u}")));
    }
    workload(&req.workload)?;
    Ok(ServingConfig {
        model,
        tp,
        pp: p.pp,
        ep: p.ep,
        dp_attention: p.dp_attention,
        precision: req.precision.precision(),
        activation_precision,
        kv_cache_dtype,
        engine: req.engine,
        settings,
        input_tokens: req.workload.input_tokens,
        output_tokens: req.workload.output_tokens,
        concurrency: req.workload.concurrency,
        request_rate: req.workload.request_rate,
    })
}

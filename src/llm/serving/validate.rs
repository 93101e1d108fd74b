//! Validation of a serving request: the model resolved (catalog, Hugging Face config or fields), the parallel
//! configuration, precisions, engine settings and workload checked against the system, every refusal naming the
//! request field that causes it (`parallelism.ep`, `model.hf_config.num_key_value_heads`, …), never a panic.

use serde::Serialize;
use utoipa::ToSchema;

use super::catalog;
use super::disagg::{DisaggPools, PoolConfig};
use super::engine::{defaults, EngineSettings};
use super::hf;
use super::model::ServingModel;
use super::request::{
    Engine, InferenceRequest, ModelRef, ServingMode, ServingModelSpec, ServingParallelism, ServingPrecision, Slo,
    WorkerPool, Workload,
};
use super::sim::SimLimits;
use super::workload::{LengthDist, Traffic, DEFAULT_NUM_REQUESTS};
use crate::hw::{Precision, System};
use crate::llm::config::{bad, default_ffn_hidden, Activation, ConfigError, Norm};
use crate::llm::moe::validate_moe;

/// Largest prompt or output length accepted, tokens (larger than any released model's context).
pub const MAX_TOKENS: u32 = 10_000_000;

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
}

impl ServingConfig {
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
            if m.layer_freq.is_some_and(|f| f > 1) {
                return Err(bad(
                    "model.moe.layer_freq",
                    "serving models every layer after dense_layers as an MoE layer: leave layer_freq out",
                ));
            }
            Some(validate_moe(m, layers, "model.moe")?)
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
        dsa: None,
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

fn workload(w: &Workload) -> Result<Traffic, ConfigError> {
    for (f, v) in [("input_tokens", w.input_tokens), ("output_tokens", w.output_tokens)] {
        if v == 0 || v > MAX_TOKENS {
            return Err(bad(&format!("workload.{f}"), format!("must be 1–{MAX_TOKENS}, got {v}")));
        }
    }
    if let Some(c) = w.concurrency {
        if c == 0 || c > 1_000_000 {
            return Err(bad("workload.concurrency", format!("must be 1–1,000,000, got {c}")));
        }
    }
    if let Some(r) = w.request_rate {
        if !(r > 0.0 && r < 1e9) {
            return Err(bad("workload.request_rate", format!("must be a positive number of requests/s, got {r}")));
        }
    }
    let burstiness = w.burstiness.unwrap_or(1.0);
    if !(1e-3..=1e6).contains(&burstiness) {
        return Err(bad("workload.burstiness", format!("must be 0.001–1e6 (1 = Poisson), got {burstiness}")));
    }
    if w.burstiness.is_some() && w.request_rate.is_none() {
        return Err(bad("workload.burstiness", "applies to request_rate arrivals: give request_rate"));
    }
    let num_requests = w.num_requests.unwrap_or(DEFAULT_NUM_REQUESTS);
    if num_requests == 0 {
        return Err(bad("workload.num_requests", "must be at least 1"));
    }
    let std_ok = |v: Option<f64>| v.is_none_or(|x| x >= 0.0 && x.is_finite() && x <= MAX_TOKENS as f64);
    let std_given = w.input_tokens_std.is_some() || w.output_tokens_std.is_some();
    if let Some(r) = w.min_length_ratio {
        if w.range_ratio.is_some() || std_given {
            return Err(bad(
                "workload.min_length_ratio",
                "give min_length_ratio, range_ratio or input/output_tokens_std, not two of them",
            ));
        }
        if !(r > 0.0 && r <= 1.0) {
            return Err(bad("workload.min_length_ratio", format!("must be in (0, 1], got {r}")));
        }
    }
    let lengths = match (w.range_ratio, std_given) {
        (Some(_), true) => {
            return Err(bad("workload.range_ratio", "give range_ratio or input/output_tokens_std, not both"));
        }
        (Some(r), false) if !(0.0..1.0).contains(&r) => {
            return Err(bad("workload.range_ratio", format!("must be in [0, 1), got {r}")));
        }
        (Some(r), false) => LengthDist::Uniform { range_ratio: r },
        (None, true) if !std_ok(w.input_tokens_std) => {
            return Err(bad("workload.input_tokens_std", "must be a non-negative number of tokens"));
        }
        (None, true) if !std_ok(w.output_tokens_std) => {
            return Err(bad("workload.output_tokens_std", "must be a non-negative number of tokens"));
        }
        (None, true) => LengthDist::Normal {
            input_std: w.input_tokens_std.unwrap_or(0.0),
            output_std: w.output_tokens_std.unwrap_or(0.0),
        },
        (None, false) => match w.min_length_ratio {
            Some(r) if r < 1.0 => LengthDist::UniformBelow { min_ratio: r },
            _ => LengthDist::Fixed,
        },
    };
    Ok(Traffic {
        input_tokens: w.input_tokens,
        output_tokens: w.output_tokens,
        lengths,
        concurrency: w.concurrency,
        request_rate: w.request_rate,
        burstiness,
        num_requests,
        seed: w.seed.unwrap_or(0),
    })
}

fn slo(s: &Option<Slo>) -> Result<(), ConfigError> {
    let Some(s) = s else { return Ok(()) };
    for (f, v) in [("ttft_ms", s.ttft_ms), ("tpot_ms", s.tpot_ms), ("e2e_latency_ms", s.e2e_latency_ms)] {
        if v.is_some_and(|x| !(x > 0.0 && x.is_finite())) {
            return Err(bad(&format!("slo.{f}"), "must be a positive number of ms"));
        }
    }
    if let Some(p) = s.percentile {
        if ![50.0, 90.0, 99.0].contains(&p) {
            return Err(bad("slo.percentile", format!("must be 50, 90 or 99, got {p}")));
        }
    }
    Ok(())
}

/// Refuses a simulation beyond the server's caps (each a 422 naming the field to change): more than
/// `max_requests` requests (`workload.num_requests`), more than `max_concurrency` clients
/// (`workload.concurrency`), or more generated tokens in all than `max_tokens` (`workload.output_tokens`, counted
/// at the longest output the lengths allow). The steps cap is enforced while simulating.
pub fn check_limits(cfg: &ServingConfig, limits: &SimLimits) -> Result<(), ConfigError> {
    if !cfg.simulate {
        return Ok(());
    }
    let t = &cfg.traffic;
    let hint = "or set workload.simulate to false for the steady-state model";
    if t.num_requests > limits.max_requests {
        return Err(bad(
            "workload.num_requests",
            format!(
                "{} requests exceed this server's {} (serving_max_requests); send fewer, {hint}",
                t.num_requests, limits.max_requests
            ),
        ));
    }
    if let Some(c) = t.concurrency {
        if c > limits.max_concurrency {
            return Err(bad(
                "workload.concurrency",
                format!(
                    "{c} clients exceed this server's {} (serving_max_concurrency), {hint}",
                    limits.max_concurrency
                ),
            ));
        }
    }
    let longest = match t.lengths {
        LengthDist::Fixed => t.output_tokens as f64,
        LengthDist::Uniform { range_ratio } => (t.output_tokens as f64 * (1.0 + range_ratio)).ceil(),
        LengthDist::UniformBelow { .. } => t.output_tokens as f64,
        LengthDist::Normal { output_std, .. } => t.output_tokens as f64 + 4.0 * output_std,
    };
    let tokens = t.num_requests as f64 * longest;
    if tokens > limits.max_tokens as f64 {
        return Err(bad(
            "workload.output_tokens",
            format!(
                "{} requests × up to {longest:.0} output tokens = {tokens:.0} simulated tokens exceed this server's {} \
                 (serving_max_simulated_tokens); send fewer or shorter requests, {hint}",
                t.num_requests, limits.max_tokens
            ),
        ));
    }
    Ok(())
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
///
/// `mode: "disagg"`: each pool validated as its own instance (errors under `prefill.…` / `decode.…`), every worker
/// within the system's GPUs; the configuration is the decode worker's with the pools attached.
pub fn validate(req: &InferenceRequest, system: &System) -> Result<ServingConfig, ConfigError> {
    match req.mode {
        ServingMode::Agg => {
            for (f, p) in [("prefill", &req.prefill), ("decode", &req.decode)] {
                if p.is_some() {
                    return Err(bad(f, "only with mode \"disagg\" (aggregated serving uses parallelism)"));
                }
            }
            validate_instance(req, system)
        }
        ServingMode::Disagg => validate_disagg(req, system),
    }
}

fn validate_disagg(req: &InferenceRequest, system: &System) -> Result<ServingConfig, ConfigError> {
    let (Some(p), Some(d)) = (&req.prefill, &req.decode) else {
        let missing = if req.prefill.is_none() { "prefill" } else { "decode" };
        return Err(bad(missing, "mode \"disagg\" needs a prefill and a decode pool"));
    };
    if req.parallelism != ServingParallelism::default() {
        return Err(bad("parallelism", "with mode \"disagg\" give each pool's parallelism under prefill and decode"));
    }
    let one = |pool: &WorkerPool, name: &str| -> Result<(ServingConfig, PoolConfig), ConfigError> {
        if pool.workers == 0 || pool.workers > 10_000 {
            return Err(bad(&format!("{name}.workers"), format!("must be 1–10,000, got {}", pool.workers)));
        }
        let mut r = req.clone();
        (r.mode, r.prefill, r.decode, r.parallelism) = (ServingMode::Agg, None, None, pool.parallelism);
        if let Some(o) = &pool.engine_options {
            r.engine_options = r.engine_options.merged(o);
        }
        let cfg = validate_instance(&r, system).map_err(|mut e| {
            if e.field.starts_with("parallelism") || e.field.starts_with("engine_options") {
                e.field = format!("{name}.{}", e.field);
            }
            e
        })?;
        let pc = PoolConfig {
            workers: pool.workers,
            tp: cfg.tp,
            pp: cfg.pp,
            ep: cfg.ep,
            attention_dp: cfg.attention_dp,
            settings: cfg.settings,
        };
        Ok((cfg, pc))
    };
    let (pcfg, pp) = one(p, "prefill")?;
    let (dcfg, dp) = one(d, "decode")?;
    let total = pp.workers as u64 * pcfg.gpus() as u64 + dp.workers as u64 * dcfg.gpus() as u64;
    if total > system.total_gpus() {
        return Err(bad(
            "decode.workers",
            format!("the pools need {total} GPUs but {} has {}", system.name, system.total_gpus()),
        ));
    }
    Ok(ServingConfig { mode: ServingMode::Disagg, pools: Some(DisaggPools { prefill: pp, decode: dp }), ..dcfg })
}

fn validate_instance(req: &InferenceRequest, system: &System) -> Result<ServingConfig, ConfigError> {
    let model = resolve_model(&req.model)?;
    limits(&model)?;
    let p = req.parallelism;
    for (f, v) in [("parallelism.tp", p.tp), ("parallelism.pp", p.pp), ("parallelism.ep", p.ep)] {
        if v == 0 {
            return Err(bad(f, "must be at least 1"));
        }
    }
    let tp = p.tp;
    let adp = match (p.attention_dp_size, p.dp_attention) {
        (Some(0), _) => return Err(bad("parallelism.attention_dp_size", "must be at least 1")),
        (Some(a), true) if a != tp => {
            return Err(bad(
                "parallelism.attention_dp_size",
                format!("dp_attention means attention_dp_size = tp = {tp}, got {a}: give one of the two"),
            ))
        }
        (Some(a), _) => a,
        (None, true) => tp,
        (None, false) => 1,
    };
    if tp % adp != 0 {
        return Err(bad("parallelism.attention_dp_size", format!("attention_dp_size {adp} must divide tp {tp}")));
    }
    // With data-parallel attention the heads are split over tp/adp GPUs per rank.
    let attn_tp = tp / adp;
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
    if adp > 1 && model.moe.is_none() {
        let field = if p.dp_attention { "parallelism.dp_attention" } else { "parallelism.attention_dp_size" };
        return Err(bad(
            field,
            "data-parallel attention needs a mixture-of-experts model (a dense model's data-parallel ranks are \
             separate replicas)",
        ));
    }
    if dense_layers > 0 && model.ffn_hidden % attn_tp != 0 {
        return Err(bad(
            "parallelism.tp",
            format!("ffn_hidden {} is not divisible by the attention tp {attn_tp}", model.ffn_hidden),
        ));
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
            let shared_tp = attn_tp;
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
        // An NVFP4 checkpoint is ModelOpt's, with an FP8 KV cache, which every engine's `auto` follows; TensorRT-LLM
        // serves ModelOpt's fp8 checkpoints too (see the field's doc for the sources).
        None if has_fp8
            && (req.precision == ServingPrecision::Fp4
                || (req.engine == Engine::Trtllm && req.precision == ServingPrecision::Fp8)) =>
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
        // TensorRT-LLM's C++ executor captures no CUDA graphs unless asked (`ExtendedRuntimePerfKnobConfig`).
        cuda_graphs: o.cuda_graphs.unwrap_or(
            d.cuda_graphs
                && !(req.engine == Engine::Trtllm && o.trtllm_backend == Some(super::request::TrtllmBackend::Tensorrt)),
        ),
        cuda_graph_max_batch: o.cuda_graph_max_batch.unwrap_or(d.cuda_graph_max_batch),
        vllm_engine: o.vllm_engine.unwrap_or(d.vllm_engine),
        trtllm_backend: match req.engine {
            Engine::Trtllm => o.trtllm_backend.unwrap_or(d.trtllm_backend),
            _ => d.trtllm_backend,
        },
        // vLLM's V0 engine has no async scheduling.
        async_scheduling: o.async_scheduling.unwrap_or(
            d.async_scheduling
                && !(req.engine == Engine::Vllm && o.vllm_engine == Some(super::request::VllmEngine::V0)),
        ),
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
    let traffic = workload(&req.workload)?;
    slo(&req.slo)?;
    Ok(ServingConfig {
        model,
        tp,
        pp: p.pp,
        ep: p.ep,
        dp_attention: adp > 1,
        attention_dp: adp,
        precision: req.precision.precision(),
        activation_precision,
        kv_cache_dtype,
        engine: req.engine,
        settings,
        input_tokens: req.workload.input_tokens,
        output_tokens: req.workload.output_tokens,
        concurrency: req.workload.concurrency,
        request_rate: req.workload.request_rate,
        traffic,
        simulate: req.workload.simulate.unwrap_or(true),
        slo: req.slo,
        mode: ServingMode::Agg,
        pools: None,
    })
}

//! One serving instance validated: the parallel configuration (tp, pp, ep, data-parallel attention) against the
//! model and the system, the precisions against the GPU, and the engine settings with the engine's defaults.

use super::resolve::{limits, resolve_model};
use super::workload::{slo, workload};
use super::ServingConfig;
use crate::hw::{GpuSpec, Precision, System};
use crate::llm::config::{bad, ConfigError};
use crate::llm::serving::engine::{defaults, EngineSettings};
use crate::llm::serving::model::ServingModel;
use crate::llm::serving::request::{Engine, InferenceRequest, ServingMode, ServingParallelism, ServingPrecision};
use crate::llm::serving::sim::steps::vllm_max_capture_size;

/// Validates one aggregated instance of `req` on `system`: the model, its parallel layout
/// ([`attention_dp_size`], [`check_sharding`], [`check_size`]), its precisions ([`precisions`]) and its engine
/// settings ([`engine_settings`]), then the workload and SLO. Errors name the offending field.
pub(super) fn validate_instance(req: &InferenceRequest, system: &System) -> Result<ServingConfig, ConfigError> {
    let model = resolve_model(&req.model)?;
    limits(&model)?;
    let speculative = crate::llm::serving::speculative::validate(&req.speculative, &model)?;
    let p = req.parallelism;
    let tp = p.tp;
    let adp = attention_dp_size(p)?;
    check_sharding(&model, p, adp)?;
    check_size(&model, p, system)?;
    let gpu = &system.gpu;
    let (activation_precision, kv_cache_dtype) = precisions(req, gpu)?;
    let mut settings = engine_settings(req, gpu, tp)?;
    let cuda_graph_batch_sizes = super::graphs::capture_list(&req.engine_options, req.engine, &mut settings)?;
    let traffic = workload(&req.workload)?;
    slo(&req.slo)?;
    let tokenizer_threads = crate::llm::serving::frontend::tokenizer_threads(&req.frontend)?;
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
        speculative,
        cuda_graph_batch_sizes,
        tokenizer_threads,
    })
}

/// The attention data-parallel size from `parallelism` (`attention_dp_size`, or tp with `dp_attention`, else 1),
/// after checking that tp, pp and ep are positive and that the size divides tp (SGLang's `--enable-dp-attention`
/// sets it to tp). Errors name the field.
fn attention_dp_size(p: ServingParallelism) -> Result<u32, ConfigError> {
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
    Ok(adp)
}

/// Checks that the model's weights shard over the layout: query and key/value heads over the attention tp
/// (tp / attention DP), the dense FFN width likewise, data-parallel attention and ep > 1 only for mixture-of-experts
/// models, and ep dividing tp and the expert count, the expert width over tp/ep. Errors name the field.
fn check_sharding(model: &ServingModel, p: ServingParallelism, adp: u32) -> Result<(), ConfigError> {
    let tp = p.tp;
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
    Ok(())
}

/// Checks that pp does not exceed the model's layers and that one instance (tp·pp GPUs) fits the system.
fn check_size(model: &ServingModel, p: ServingParallelism, system: &System) -> Result<(), ConfigError> {
    let tp = p.tp;
    if p.pp > model.layers {
        return Err(bad("parallelism.pp", format!("pp {} exceeds the {} layers", p.pp, model.layers)));
    }
    if (tp as u64) * (p.pp as u64) > system.total_gpus() {
        return Err(bad(
            "parallelism",
            format!("tp·pp = {} GPUs but {} has {}", tp as u64 * p.pp as u64, system.name, system.total_gpus()),
        ));
    }
    Ok(())
}

/// The activation precision and the KV cache's dtype of `req` on `gpu` (the GPU's datasheet peaks say which
/// tensor-core precisions exist; `kv_cache_dtype` `auto` follows the checkpoint as the engines do). Errors
/// (`precision`, `kv_cache_dtype`): a precision the GPU has no tensor cores for.
fn precisions(req: &InferenceRequest, gpu: &GpuSpec) -> Result<(Precision, Precision), ConfigError> {
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
    Ok((activation_precision, kv_cache_dtype))
}

/// The engine settings: `engine_options` where given, else the engine's defaults on `gpu` at `tp`
/// ([`defaults`]); TensorRT-LLM's follow its backend and entry point ([`trtllm_defaults`]), SGLang's speculative
/// decoding ([`sglang_speculative_defaults`]). Errors
/// (`engine_options.*`): a batch limit outside 1–10,000,000, a memory fraction outside (0, 1], a
/// `scheduler_recv_interval` outside 1–1,000 or given to another engine than SGLang, or a `trtllm_launcher` given
/// to another engine than TensorRT-LLM.
fn engine_settings(req: &InferenceRequest, gpu: &GpuSpec, tp: u32) -> Result<EngineSettings, ConfigError> {
    let d = sglang_speculative_defaults(req, trtllm_defaults(req, defaults(req.engine, gpu, tp)));
    let o = &req.engine_options;
    let settings = EngineSettings {
        max_num_seqs: o.max_num_seqs.unwrap_or(d.max_num_seqs),
        max_num_batched_tokens: o.max_num_batched_tokens.unwrap_or(d.max_num_batched_tokens),
        chunked_prefill: o.chunked_prefill.unwrap_or(d.chunked_prefill),
        gpu_memory_utilization: o.gpu_memory_utilization.unwrap_or(d.gpu_memory_utilization),
        cuda_graphs: o.cuda_graphs.unwrap_or(d.cuda_graphs),
        // vLLM sizes its graphs from the batch limits it runs with ([`vllm_max_capture_size`]).
        cuda_graph_max_batch: match req.engine {
            Engine::Vllm => vllm_max_capture_size(
                o.cuda_graph_max_batch,
                o.max_num_seqs.unwrap_or(d.max_num_seqs),
                o.max_num_batched_tokens.unwrap_or(d.max_num_batched_tokens),
            ),
            _ => o.cuda_graph_max_batch.unwrap_or(d.cuda_graph_max_batch),
        },
        cuda_graph_padding: o.cuda_graph_padding.unwrap_or(d.cuda_graph_padding),
        vllm_engine: o.vllm_engine.unwrap_or(d.vllm_engine),
        trtllm_backend: d.trtllm_backend,
        // vLLM's V0 engine has no async scheduling.
        async_scheduling: o.async_scheduling.unwrap_or(
            d.async_scheduling
                && !(req.engine == Engine::Vllm && o.vllm_engine == Some(crate::llm::serving::request::VllmEngine::V0)),
        ),
        scheduler_recv_interval: o.scheduler_recv_interval.unwrap_or(d.scheduler_recv_interval),
    };
    if o.trtllm_launcher.is_some() && req.engine != Engine::Trtllm {
        return Err(bad("engine_options.trtllm_launcher", "is TensorRT-LLM's option: give it with engine trtllm"));
    }
    if let Some(r) = o.scheduler_recv_interval {
        if req.engine != Engine::Sglang {
            return Err(bad(
                "engine_options.scheduler_recv_interval",
                "is SGLang's option: give it with engine sglang",
            ));
        }
        if !(1..=1000).contains(&r) {
            return Err(bad("engine_options.scheduler_recv_interval", format!("must be 1–1,000, got {r}")));
        }
    }
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
    Ok(settings)
}

/// TensorRT-LLM and vLLM refuse a prompt longer than their token budget when chunked prefill is off — TensorRT-LLM's
/// PyTorch backend per request (`tensorrt_llm/llmapi/llm.py`, `BaseLLM._check_arguments`, "The sum of prompt length
/// …, query length … should not exceed max_num_tokens"; the C++ executor's batch scheduler never fits such a context
/// into a step either), vLLM at startup (`SchedulerConfig.verify_max_model_len`: `max_num_batched_tokens` below
/// `max_model_len` "makes vLLM reject longer sequences") — and the simulator would drop every such request: such a
/// request is a 422 naming `workload.input_tokens`, not a benchmark whose requests all fail. SGLang admits a lone
/// prompt above its budget (`PrefillAdder` takes the first request of a batch whatever its length), so it runs. The longest prompt is [`longest_prompt`]'s. `settings` are those of the
/// instance that prefills (an aggregated instance, a disaggregated prefill worker; a decode worker never does).
pub(super) fn check_prompt_fits_a_step(req: &InferenceRequest, settings: &EngineSettings) -> Result<(), ConfigError> {
    let longest = longest_prompt(req);
    let refuses = matches!(req.engine, Engine::Trtllm | Engine::Vllm);
    if refuses && !settings.chunked_prefill && longest > settings.max_num_batched_tokens {
        return Err(bad(
            "workload.input_tokens",
            format!(
                "a {longest}-token prompt exceeds the token budget {} (max_num_batched_tokens; TensorRT-LLM's \
                 max_num_tokens) without chunked prefill, which {} refuses: raise \
                 engine_options.max_num_batched_tokens or set engine_options.chunked_prefill true",
                settings.max_num_batched_tokens,
                if req.engine == Engine::Vllm { "vLLM" } else { "TensorRT-LLM" }
            ),
        ));
    }
    Ok(())
}

/// The longest prompt `req`'s workload sends, tokens: the upper bound of `range_ratio`'s uniform draws, else the
/// mean (normally drawn lengths have no bound; `min_length_ratio` draws at most the mean).
fn longest_prompt(req: &InferenceRequest) -> u32 {
    let w = &req.workload;
    match w.range_ratio {
        Some(r) => crate::llm::serving::workload::uniform_bounds(w.input_tokens, r, 1).1,
        None => w.input_tokens,
    }
}

/// SGLang's defaults `d` under speculative decoding (`req.speculative`); other engines' and requests' unchanged.
/// SGLang's `ServerArgs._handle_speculative_decoding` (`python/sglang/srt/server_args.py`; `NEXTN`, DeepSeek's MTP,
/// runs as `EAGLE`): `max_running_requests` unset → 48 ("Max running requests is reset to 48 for speculative
/// decoding"), and without `SGLANG_ENABLE_SPEC_V2` (off by default) `disable_overlap_schedule = True` ("Overlap
/// scheduler is disabled…"): the host schedules each step after the previous one's results, in series with the
/// GPU (`engine_options.async_scheduling: true` is the spec-v2 worker).
pub(super) fn sglang_speculative_defaults(req: &InferenceRequest, mut d: EngineSettings) -> EngineSettings {
    if req.engine == Engine::Sglang && req.speculative.is_some() {
        d.max_num_seqs = SGLANG_SPECULATIVE_MAX_RUNNING_REQUESTS;
        d.async_scheduling = false;
    }
    d
}

/// SGLang's `max_running_requests` under speculative decoding when the request does not set it
/// ([`sglang_speculative_defaults`]).
pub const SGLANG_SPECULATIVE_MAX_RUNNING_REQUESTS: u32 = 48;

/// TensorRT-LLM's defaults `d` ([`defaults`]: `trtllm-serve`'s PyTorch backend) for `req`'s backend and entry
/// point (`engine_options.trtllm_backend`, `engine_options.trtllm_launcher`; the `super::super::engine` module doc
/// gives the sources); other engines' unchanged.
///
/// - `trtllm_backend: tensorrt` (the C++ executor of `trtllm-build` engines): no CUDA graphs unless asked
///   (`ExtendedRuntimePerfKnobConfig.cudaGraphMode` = false) and no overlap scheduler.
/// - `trtllm_launcher: bench` (`trtllm-bench throughput`, `get_settings` in
///   `tensorrt_llm/bench/benchmark/utils/general.py`; the default of an offline workload): CUDA graphs padded up to
///   the run's `max_batch_size` (`max_num_seqs`), and with chunking off `max_num_tokens` =
///   max(`max_num_tokens`, longest prompt + `max_batch_size`) so that every prompt fits a step.
pub(super) fn trtllm_defaults(req: &InferenceRequest, mut d: EngineSettings) -> EngineSettings {
    use crate::llm::serving::request::{TrtllmBackend, TrtllmLauncher};
    if req.engine != Engine::Trtllm {
        return d;
    }
    let o = &req.engine_options;
    d.trtllm_backend = o.trtllm_backend.unwrap_or(d.trtllm_backend);
    if d.trtllm_backend == TrtllmBackend::Tensorrt {
        d.cuda_graphs = false;
        d.async_scheduling = false;
    }
    let w = &req.workload;
    let offline = w.concurrency.is_none() && w.request_rate.is_none();
    let launcher = o.trtllm_launcher.unwrap_or(if offline { TrtllmLauncher::Bench } else { TrtllmLauncher::Serve });
    if launcher == TrtllmLauncher::Bench {
        let batch = o.max_num_seqs.unwrap_or(d.max_num_seqs);
        d.cuda_graph_padding = true;
        d.cuda_graph_max_batch = batch;
        if !o.chunked_prefill.unwrap_or(d.chunked_prefill) {
            d.max_num_batched_tokens = d.max_num_batched_tokens.max(longest_prompt(req).saturating_add(batch));
        }
    }
    d
}

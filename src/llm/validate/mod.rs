//! Validation of a training request: every impossible combination is refused with the request field that causes
//! it (`parallelism.virtual_stages`, `model.kv_heads`, …), never a panic.
//!
//! One concept per module: [`validate`] here (the model and the parallel configuration, into a
//! [`TrainingConfig`]), `framework` (what the framework that runs it allows: [`with_framework`]) and `run` (the
//! whole-run length: [`validate_run`]). Every item is re-exported here.

mod framework;
mod run;
#[cfg(test)]
mod tests;

pub use framework::with_framework;
pub use run::validate_run;

use super::config::{
    bad, default_ffn_hidden, Attention, ConfigError, LayerSplit, MegatronSplit, ModelSpec, ParallelSpec, TrainingConfig,
};
use super::framework::{Framework, FrameworkTraits};
use super::partition::megatron_split;
use crate::hw::Precision;

/// Validates a model and a parallel configuration against a system of `system_gpus` GPUs and fills in defaults.
///
/// Errors (field named as in the request): zero sizes; `model.hidden` not divisible by `model.heads`; `model.kv_heads`
/// not dividing the heads; heads, kv_heads, hidden or ffn_hidden not divisible by `parallelism.tp`; `parallelism.pp` >
/// layers; tp·cp·pp·dp above the system's GPUs (`parallelism`); `parallelism.global_batch` not a multiple of
/// micro_batch·dp or inconsistent with `grad_accum`; `parallelism.zero_stage` > 3; `parallelism.distributed_optimizer`
/// with ZeRO stage 0; `parallelism.context_parallel` without flash attention or with a sequence not divisible by 2·cp
/// (Megatron's load-balanced causal split); `parallelism.cp_comm_type` and
/// `parallelism.hierarchical_context_parallel_sizes` as [`crate::llm::cp::CpComm::validate`] refuses them;
/// `parallelism.sequence_parallel` with seq_len/cp not divisible by tp; `parallelism.virtual_stages` with pp = 1 or
/// micro-batches not divisible by pp (Narayanan et al. 2021's interleaved schedule); `parallelism.layer_split` `s1`
/// with interleaving or with Megatron-Core's split options; Megatron-Core's split refusing the layers
/// (`parallelism.virtual_stages`, `parallelism.layer_split`, or the option at fault: [`megatron_split`]); the
/// custom pipeline layout refused (`parallelism.pipeline_model_parallel_layout`:
/// [`crate::llm::pipeline_layout::request_layout`]).
pub fn validate(
    model: &ModelSpec,
    par: &ParallelSpec,
    precision: Precision,
    system_gpus: u64,
) -> Result<TrainingConfig, ConfigError> {
    let derived = check(model, par, precision, system_gpus)?;
    Ok(assemble(model, par, precision, derived))
}

/// What [`validate`] derives from a request beyond the request's own fields: the defaults filled in and the options
/// resolved, each from the concept's own helper.
struct Derived {
    /// Dims per attention head, key/value heads and MLP width ([`attention_shape`]).
    head_dim: u32,
    kv_heads: u32,
    ffn_hidden: u32,
    /// How the context-parallel ranks communicate ([`cp_comm`]).
    cp_comm: crate::llm::cp::CpComm,
    /// The layer split and the Megatron-Core split options kept with it ([`pipeline_split`]).
    layer_split: LayerSplit,
    split: MegatronSplit,
    /// Megatron-Core's custom pipeline layout, when given ([`crate::llm::pipeline_layout::request_layout`]).
    pipeline_layout: Option<crate::llm::pipeline_layout::PipelineLayout>,
    /// Micro-batches per step ([`grad_accum`]).
    grad_accum: u32,
    /// The MoE, MLA and recompute-module options ([`moe_options`]).
    moe: crate::llm::moe::Resolved,
    /// The fp8 scaling recipe ([`fp8_recipe`]).
    fp8_recipe: crate::llm::recipe::Fp8Recipe,
}

/// Runs every check of [`validate`] in its documented order (the first failing one names the field) and returns what
/// they derive.
fn check(
    model: &ModelSpec,
    par: &ParallelSpec,
    precision: Precision,
    system_gpus: u64,
) -> Result<Derived, ConfigError> {
    check_positive(model, par)?;
    let (head_dim, kv_heads, ffn_hidden) = attention_shape(model)?;
    check_tensor_parallel(model, kv_heads, ffn_hidden, par.tp)?;
    check_pipeline_depth(model, par)?;
    check_zero(par)?;
    check_attention(model, par)?;
    let cp_comm = cp_comm(model, par)?;
    check_sequence_parallel(model, par)?;
    let (layer_split, split) = pipeline_split(model, par)?;
    let pipeline_layout = crate::llm::pipeline_layout::request_layout(model, par)?;
    validate_overlaps(par)?;
    check_gpus(par, system_gpus)?;
    let grad_accum = grad_accum(par)?;
    let moe = moe_options(model, par)?;
    let fp8_recipe = fp8_recipe(par, precision)?;
    Ok(Derived {
        head_dim,
        kv_heads,
        ffn_hidden,
        cp_comm,
        layer_split,
        split,
        pipeline_layout,
        grad_accum,
        moe,
        fp8_recipe,
    })
}

/// The [`TrainingConfig`] of a checked request: its own fields, and the defaults and options `d` derived from it.
fn assemble(model: &ModelSpec, par: &ParallelSpec, precision: Precision, d: Derived) -> TrainingConfig {
    TrainingConfig {
        model: model.clone(),
        tp: par.tp,
        pp: par.pp,
        dp: par.dp,
        cp: par.context_parallel,
        cp_comm: d.cp_comm,
        micro_batch: par.micro_batch,
        grad_accum: d.grad_accum,
        global_batch: d.grad_accum as u64 * (par.micro_batch as u64 * par.dp as u64),
        zero_stage: par.zero_stage,
        precision,
        fp8_recipe: d.fp8_recipe,
        fp8_param_gather: par.fp8_param_gather,
        kv_heads: d.kv_heads,
        ffn_hidden: d.ffn_hidden,
        sequence_parallel: par.sequence_parallel,
        virtual_stages: par.virtual_stages,
        recompute: par.recompute,
        distributed_optimizer: par.distributed_optimizer,
        overlap_grad_reduce: par.overlap_grad_reduce,
        overlap_param_gather: par.overlap_param_gather,
        align_param_gather: par.align_param_gather,
        bucket_params: par.bucket_size.map_or_else(|| TrainingConfig::default_bucket_params(par.dp), |b| b as f64),
        tp_comm_overlap: par.tp_comm_overlap,
        overlap_p2p_comm: par.overlap_p2p_comm,
        layer_split: d.layer_split,
        head_dim: d.head_dim,
        recompute_modules: d.moe.recompute_modules,
        moe: d.moe.moe,
        split: d.split,
        pipeline_layout: d.pipeline_layout,
        framework: FrameworkTraits::of(Framework::Megatron, &par.framework_options(), precision == Precision::Bf16),
        framework_options: par.framework_options(),
    }
}

/// How the context-parallel ranks communicate: the request's `cp_comm_type` and
/// `hierarchical_context_parallel_sizes` for its cp, tp and heads. Errors: [`crate::llm::cp::CpComm::validate`]'s.
fn cp_comm(model: &ModelSpec, par: &ParallelSpec) -> Result<crate::llm::cp::CpComm, ConfigError> {
    crate::llm::cp::CpComm::validate(
        par.cp_comm_type,
        par.hierarchical_context_parallel_sizes.as_deref(),
        par.context_parallel,
        par.tp,
        model.heads,
        model.kv_heads.unwrap_or(model.heads),
    )
}

/// The layer split ([`layer_split`]) and the Megatron-Core split options the configuration keeps with it: the
/// request's with the uniform split, none otherwise (S1 has its own). Errors: [`layer_split`]'s.
fn pipeline_split(model: &ModelSpec, par: &ParallelSpec) -> Result<(LayerSplit, MegatronSplit), ConfigError> {
    let split = par.megatron_split();
    if par.pipeline_model_parallel_layout.is_some() {
        // The layout (`pipeline_layout::request_layout`) replaces Megatron-Core's split; it still needs pp ≥ 2 to interleave.
        if par.virtual_stages > 1 && par.pp < 2 {
            return Err(bad("parallelism.virtual_stages", "interleaving needs at least two pipeline stages (pp ≥ 2)"));
        }
        return Ok((LayerSplit::Uniform, MegatronSplit::default()));
    }
    let layer_split = layer_split(model, par, &split)?;
    Ok((layer_split, if layer_split == LayerSplit::Uniform { split } else { MegatronSplit::default() }))
}

/// The MoE, MLA, MTP and recompute-module options resolved for the request's parallel shape. Errors:
/// [`crate::llm::moe::validate_training`]'s.
fn moe_options(model: &ModelSpec, par: &ParallelSpec) -> Result<crate::llm::moe::Resolved, ConfigError> {
    let shape = crate::llm::moe::Shape {
        tp: par.tp,
        cp: par.context_parallel,
        dp: par.dp,
        pp: par.pp,
        virtual_stages: par.virtual_stages,
        micro_batch: par.micro_batch,
        sequence_parallel: par.sequence_parallel,
    };
    crate::llm::moe::validate_training(model, par, shape)
}

/// The fp8 scaling recipe of the request's `precision`, `fp8_recipe` and `fp8_param_gather`; the parameters are
/// sharded (so fp8 gathers have something to gather) under the distributed optimizer or ZeRO-3. Errors:
/// [`crate::llm::recipe::validate`]'s.
fn fp8_recipe(par: &ParallelSpec, precision: Precision) -> Result<crate::llm::recipe::Fp8Recipe, ConfigError> {
    let sharded = par.distributed_optimizer || par.zero_stage >= 3;
    crate::llm::recipe::validate(precision, par.fp8_recipe, par.fp8_param_gather, sharded)
}

/// Checks that every size and degree of the request is at least 1 (`model.layers` … `parallelism.context_parallel`,
/// in that order; an absent `model.kv_heads` or `model.ffn_hidden` takes its default later).
fn check_positive(model: &ModelSpec, par: &ParallelSpec) -> Result<(), ConfigError> {
    for (field, v) in [
        ("model.layers", model.layers),
        ("model.hidden", model.hidden),
        ("model.heads", model.heads),
        ("model.seq_len", model.seq_len),
        ("model.vocab", model.vocab),
        ("model.kv_heads", model.kv_heads.unwrap_or(1)),
        ("model.ffn_hidden", model.ffn_hidden.unwrap_or(1)),
        ("parallelism.tp", par.tp),
        ("parallelism.pp", par.pp),
        ("parallelism.dp", par.dp),
        ("parallelism.micro_batch", par.micro_batch),
        ("parallelism.virtual_stages", par.virtual_stages),
        ("parallelism.context_parallel", par.context_parallel),
    ] {
        if v == 0 {
            return Err(bad(field, "must be at least 1"));
        }
    }
    Ok(())
}

/// The model's (head dimension, key/value heads, FFN width) with their defaults filled in: the head dimension is
/// MLA's query-key width, `model.head_dim`, or hidden / heads; kv_heads defaults to the heads (multi-head
/// attention) and ffn_hidden to the activation's Megatron-LM default ([`default_ffn_hidden`]). Errors:
/// `model.dropout` outside [0, 1), `model.head_dim` 0, `model.hidden` not divisible by the heads without a head
/// dimension, `model.kv_heads` not dividing the heads (grouped-query attention, Ainslie et al. 2023).
fn attention_shape(model: &ModelSpec) -> Result<(u32, u32, u32), ConfigError> {
    if !(0.0..1.0).contains(&model.dropout) {
        return Err(bad("model.dropout", format!("a probability in [0, 1), got {}", model.dropout)));
    }
    if model.head_dim == Some(0) {
        return Err(bad("model.head_dim", "must be at least 1"));
    }
    if model.head_dim.is_none() && model.mla.is_none() && model.hidden % model.heads != 0 {
        return Err(bad(
            "model.hidden",
            format!("hidden {} is not divisible by heads {} (give head_dim)", model.hidden, model.heads),
        ));
    }
    let head_dim = match (&model.mla, model.head_dim) {
        (Some(mla), _) => mla.qk_head_dim(),
        (None, Some(dh)) => dh,
        (None, None) => model.hidden / model.heads,
    };
    let kv_heads = model.kv_heads.unwrap_or(model.heads);
    if kv_heads > model.heads || model.heads % kv_heads != 0 {
        return Err(bad(
            "model.kv_heads",
            format!(
                "kv_heads {kv_heads} must divide heads {} (each key/value head serves a group of query heads)",
                model.heads
            ),
        ));
    }
    let ffn_hidden = model.ffn_hidden.unwrap_or_else(|| default_ffn_hidden(model.hidden, model.activation));
    Ok((head_dim, kv_heads, ffn_hidden))
}

/// Checks that the heads, key/value heads, hidden size and FFN width each split evenly over the `tp`
/// tensor-parallel ranks (Megatron-LM's column/row-parallel layers, Shoeybi et al. 2019). Errors:
/// `parallelism.tp`, naming the first dimension that does not divide.
fn check_tensor_parallel(model: &ModelSpec, kv_heads: u32, ffn_hidden: u32, tp: u32) -> Result<(), ConfigError> {
    for (what, n) in
        [("heads", model.heads), ("kv_heads", kv_heads), ("hidden", model.hidden), ("ffn_hidden", ffn_hidden)]
    {
        if n % tp != 0 {
            return Err(bad(
                "parallelism.tp",
                format!("{what} {n} is not divisible by tp {tp}: each tensor-parallel rank needs an equal share"),
            ));
        }
    }
    Ok(())
}

/// Checks that every pipeline stage gets at least one layer: pp ≤ layers, plus one for each of the embedding and
/// the loss that Megatron-Core's `account_for_embedding_in_pipeline_split` / `account_for_loss_in_pipeline_split`
/// count as a layer. Errors: `parallelism.pp`.
fn check_pipeline_depth(model: &ModelSpec, par: &ParallelSpec) -> Result<(), ConfigError> {
    let counted = par.account_for_embedding_in_pipeline_split as u32 + par.account_for_loss_in_pipeline_split as u32;
    if par.pp > model.layers + counted {
        return Err(bad(
            "parallelism.pp",
            format!("pp {} exceeds the model's {} layers: every stage needs at least one layer", par.pp, model.layers),
        ));
    }
    Ok(())
}

/// Checks the optimizer sharding: ZeRO stages 0–3 (Rajbhandari et al. 2020) and Megatron-LM's distributed
/// optimizer only with a stage ≥ 1 (it is ZeRO-1). Errors: `parallelism.zero_stage`,
/// `parallelism.distributed_optimizer`.
fn check_zero(par: &ParallelSpec) -> Result<(), ConfigError> {
    if par.zero_stage > 3 {
        return Err(bad("parallelism.zero_stage", format!("ZeRO stages are 0–3, got {}", par.zero_stage)));
    }
    if par.distributed_optimizer && par.zero_stage == 0 {
        return Err(bad(
            "parallelism.distributed_optimizer",
            "the distributed optimizer shards the optimizer states (ZeRO-1): it cannot run with zero_stage 0",
        ));
    }
    Ok(())
}

/// Checks the attention kernel against the options that need FlashAttention: an `attention_backend`, and context
/// parallelism (ring attention over flash kernels), whose causal load-balanced split cuts the sequence into 2·cp
/// equal chunks (Megatron-Core's `get_batch_on_this_cp_rank`). Errors: `parallelism.attention_backend`,
/// `parallelism.context_parallel`.
fn check_attention(model: &ModelSpec, par: &ParallelSpec) -> Result<(), ConfigError> {
    if let Some(k) = par.attention_backend {
        if model.attention != Attention::Flash {
            return Err(bad(
                "parallelism.attention_backend",
                format!(
                    "attention_backend {} names a FlashAttention-style kernel: set model.attention to flash",
                    k.as_str()
                ),
            ));
        }
    }
    let cp = par.context_parallel;
    if cp > 1 {
        if model.attention != Attention::Flash {
            return Err(bad(
                "parallelism.context_parallel",
                "context parallelism is ring attention over FlashAttention kernels: set model.attention to flash",
            ));
        }
        if model.seq_len % (2 * cp) != 0 {
            return Err(bad(
                "parallelism.context_parallel",
                format!(
                    "seq_len {} is not divisible by 2·cp = {}: the causal load-balanced split needs 2·cp equal chunks",
                    model.seq_len,
                    2 * cp
                ),
            ));
        }
    }
    Ok(())
}

/// Checks that sequence parallelism (Korthikanti et al. 2022) splits each context-parallel rank's seq_len / cp
/// tokens evenly over the tp ranks. Errors: `parallelism.sequence_parallel`.
fn check_sequence_parallel(model: &ModelSpec, par: &ParallelSpec) -> Result<(), ConfigError> {
    let (tp, cp) = (par.tp, par.context_parallel);
    if par.sequence_parallel && tp > 1 && (model.seq_len / cp) % tp != 0 {
        return Err(bad(
            "parallelism.sequence_parallel",
            format!("seq_len/cp = {} tokens are not divisible by tp {tp}", model.seq_len / cp),
        ));
    }
    Ok(())
}

/// The layer split over the pipeline stages: the one asked for, else S1's (the first and last stage one layer
/// lighter) without interleaving or Megatron-Core's split options, else Megatron-Core's uniform split. Then checks
/// that interleaving has pp ≥ 2 (Narayanan et al. 2021) and that Megatron-Core's split ([`megatron_split`]) accepts
/// the layers. Errors: `parallelism.layer_split` (S1 with interleaving or with `split`'s options),
/// `parallelism.virtual_stages`, and [`megatron_split`]'s.
fn layer_split(model: &ModelSpec, par: &ParallelSpec, split: &MegatronSplit) -> Result<LayerSplit, ConfigError> {
    let v = par.virtual_stages;
    let layer_split = match (par.layer_split, v) {
        (Some(LayerSplit::S1), v) if v > 1 => {
            return Err(bad(
                "parallelism.layer_split",
                "the interleaved schedule needs equal model chunks: use layer_split uniform (or leave it out)",
            ))
        }
        (Some(LayerSplit::S1), _) if !split.is_even() => {
            return Err(bad(
                "parallelism.layer_split",
                "num_layers_in_first/last_pipeline_stage and account_for_* are Megatron-Core's split: use \
                 layer_split uniform (or leave it out)",
            ))
        }
        (Some(s), _) => s,
        (None, 1) if split.is_even() => LayerSplit::S1,
        (None, _) => LayerSplit::Uniform,
    };
    if v > 1 && par.pp < 2 {
        return Err(bad("parallelism.virtual_stages", "interleaving needs at least two pipeline stages (pp ≥ 2)"));
    }
    if layer_split == LayerSplit::Uniform {
        megatron_split(model.layers, par.pp, v, split)?;
    }
    Ok(layer_split)
}

/// Checks that the model-parallel layout, tp·cp·pp·dp GPUs, fits the system's `system_gpus`. Errors:
/// `parallelism`.
fn check_gpus(par: &ParallelSpec, system_gpus: u64) -> Result<(), ConfigError> {
    let (tp, cp) = (par.tp, par.context_parallel);
    let gpus = tp as u64 * cp as u64 * par.pp as u64 * par.dp as u64;
    if gpus > system_gpus {
        return Err(bad(
            "parallelism",
            format!(
                "tp·cp·pp·dp = {tp}·{cp}·{}·{} = {gpus} GPUs, but the system has {system_gpus}; for a larger \
                 cluster of the same nodes register a system with more `nodes` (POST /v1/systems)",
                par.pp, par.dp
            ),
        ));
    }
    Ok(())
}

/// The micro-batches per step (gradient accumulation), from `grad_accum`, `global_batch` = micro_batch ·
/// grad_accum · dp, or 1; the interleaved schedule needs them divisible by pp (Narayanan et al. 2021; Megatron-LM's
/// `forward_backward_pipelining_with_interleaving`, `schedules.py`). Errors: `parallelism.grad_accum`,
/// `parallelism.global_batch` (0, inconsistent, or not a multiple of micro_batch·dp), `parallelism.virtual_stages`.
fn grad_accum(par: &ParallelSpec) -> Result<u32, ConfigError> {
    let per_step = par.micro_batch as u64 * par.dp as u64;
    let grad_accum = match (par.grad_accum, par.global_batch) {
        (Some(0), _) => return Err(bad("parallelism.grad_accum", "must be at least 1")),
        (_, Some(0)) => return Err(bad("parallelism.global_batch", "must be at least 1")),
        (Some(m), Some(gb)) => {
            if m as u64 * per_step != gb as u64 {
                return Err(bad(
                    "parallelism.global_batch",
                    format!(
                        "global_batch {gb} ≠ micro_batch·grad_accum·dp = {}·{m}·{} = {}",
                        par.micro_batch,
                        par.dp,
                        m as u64 * per_step
                    ),
                ));
            }
            m
        }
        (Some(m), None) => m,
        (None, Some(gb)) => {
            if gb as u64 % per_step != 0 {
                return Err(bad(
                    "parallelism.global_batch",
                    format!(
                        "global_batch {gb} is not a multiple of micro_batch·dp = {}·{} = {per_step}",
                        par.micro_batch, par.dp
                    ),
                ));
            }
            (gb as u64 / per_step) as u32
        }
        (None, None) => 1,
    };
    if par.virtual_stages > 1 && grad_accum % par.pp != 0 {
        return Err(bad(
            "parallelism.virtual_stages",
            format!("the interleaved schedule needs micro-batches per step ({grad_accum}) divisible by pp {}", par.pp),
        ));
    }
    Ok(grad_accum)
}

/// The communication-overlap options as Megatron-LM accepts them (`arguments.py`, `schedules.py`):
/// `overlap_param_gather` needs the distributed optimizer and `overlap_grad_reduce`; `overlap_p2p_comm` needs the
/// interleaved schedule when there is a pipeline; `bucket_size` is at least one parameter.
fn validate_overlaps(par: &ParallelSpec) -> Result<(), ConfigError> {
    if par.overlap_param_gather && !(par.distributed_optimizer && par.overlap_grad_reduce) {
        return Err(bad(
            "parallelism.overlap_param_gather",
            "Megatron-Core overlaps the distributed optimizer's parameter all-gather: it needs distributed_optimizer \
             and overlap_grad_reduce",
        ));
    }
    if par.overlap_p2p_comm && par.pp > 1 && par.virtual_stages < 2 {
        return Err(bad(
            "parallelism.overlap_p2p_comm",
            "Megatron-Core overlaps pipeline sends only in the interleaved schedule: set virtual_stages > 1",
        ));
    }
    if par.bucket_size == Some(0) {
        return Err(bad("parallelism.bucket_size", "must be at least 1 parameter"));
    }
    Ok(())
}

/// Validates `req`'s model, parallel configuration and framework against a system of `system_gpus` GPUs
/// ([`validate`], then [`with_framework`]).
pub fn validate_request(req: &super::config::TrainingRequest, system_gpus: u64) -> Result<TrainingConfig, ConfigError> {
    with_framework(validate(&req.model, &req.parallelism, req.precision, system_gpus)?, req.framework)
}

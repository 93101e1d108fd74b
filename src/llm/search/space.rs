//! The search space: the request's constraints validated into the template configuration every candidate is
//! derived from and the degrees and choices [`super::enumerate`] walks (tp, cp, pp, micro-batch sizes, virtual
//! stages, recomputation, sequence parallelism, expert layouts). Errors name the request field (422).

use super::request::SearchRequest;
use crate::llm::config::{bad, ConfigError, LayerSplit, ModelSpec, ParallelSpec, Recompute, TrainingConfig};
use crate::llm::moe::Dispatcher;
use crate::llm::validate::{validate, validate_run, with_framework};

/// The divisors of `n` in increasing order (those that fit a `u32`).
pub(super) fn divisors(n: u64) -> Vec<u32> {
    (1..=n.min(u32::MAX as u64)).filter(|d| n % d == 0).map(|d| d as u32).collect()
}

/// The validated template every candidate is derived from, and the enumeration limits.
pub(super) struct Space {
    /// The validated request every candidate copies and changes.
    pub base: TrainingConfig,
    /// Tensor-parallel degrees to try ([`tp_degrees`]).
    pub tps: Vec<u32>,
    /// Context-parallel degrees to try ([`cp_degrees`]).
    pub cps: Vec<u32>,
    /// The deepest pipeline (`constraints.max_pp`, at most the layers).
    pub max_pp: u32,
    /// The one pipeline depth `constraints.pp` asks for, if any.
    pub fixed_pp: Option<u32>,
    /// Micro-batch sizes, sequences (`constraints.micro_batches`, default 1, 2, 4, 8).
    pub micro_batches: Vec<u32>,
    /// The most virtual stages per pipeline rank (1 under S1's layer split).
    pub max_v: u32,
    /// Recomputation choices ([`memory_choices`]).
    pub recompute: Vec<Recompute>,
    /// Sequence-parallel choices ([`memory_choices`]).
    pub sp: Vec<bool>,
    /// Expert-parallel degrees to try (`[1]` for a dense model).
    pub eps: Vec<u32>,
    /// Expert-tensor-parallel degrees to try (empty: the candidate's tp and 1; `[1]` for a dense model).
    pub etps: Vec<u32>,
    /// Token dispatchers to try (one for a dense model).
    pub dispatchers: Vec<Dispatcher>,
}

/// The space of `req` on a system of `system_gpus` GPUs, `gpus_per_node` per node (the default tp limit), its
/// steps in the order their errors come: the request's sizes ([`check_request`]), the shared template
/// ([`base_config`]), the tp, cp and pp degrees, the micro-batch sizes, the memory-saving choices and the expert
/// layouts. Errors (422 fields): `gpus`, `global_batch`, `top_k`, `run…`, `model…`, `training…`, `constraints…`.
pub(super) fn space(req: &SearchRequest, gpus_per_node: u32, system_gpus: u64) -> Result<Space, ConfigError> {
    check_request(req, system_gpus)?;
    let base = base_config(req, system_gpus)?;
    let c = &req.constraints;
    let m = &base.model;
    let tps = tp_degrees(req, &base, gpus_per_node)?;
    let cps = cp_degrees(req, m)?;
    let max_pp = c.max_pp.unwrap_or(m.layers).clamp(1, m.layers);
    if let Some(pp) = c.pp {
        if pp == 0 || pp > m.layers {
            return Err(bad("constraints.pp", format!("pp must be 1–{} (the layers)", m.layers)));
        }
    }
    let micro_batches = c.micro_batches.clone().unwrap_or_else(|| vec![1, 2, 4, 8]);
    if micro_batches.is_empty() || micro_batches.contains(&0) {
        return Err(bad("constraints.micro_batches", "give at least one micro-batch size, each at least 1"));
    }
    let max_v = match req.training.layer_split {
        LayerSplit::S1 => 1,
        LayerSplit::Uniform => c.max_virtual_stages.unwrap_or(8).max(1),
    };
    let (recompute, sp) = memory_choices(req)?;
    let (eps, etps, dispatchers) = expert_space(req, &base)?;
    Ok(Space { base, tps, cps, max_pp, fixed_pp: c.pp, micro_batches, max_v, recompute, sp, eps, etps, dispatchers })
}

/// Checks the request's own sizes: 1 ≤ `gpus` ≤ the system's GPUs, `global_batch` ≥ 1, `top_k` 1–100, and the
/// run's length ([`validate_run`]). Errors: `gpus`, `global_batch`, `top_k`, `run…`.
fn check_request(req: &SearchRequest, system_gpus: u64) -> Result<(), ConfigError> {
    if req.gpus == 0 || req.gpus > system_gpus {
        return Err(bad("gpus", format!("gpus must be 1–{system_gpus} (the system's GPUs), got {}", req.gpus)));
    }
    if req.global_batch == 0 {
        return Err(bad("global_batch", "must be at least 1"));
    }
    if !(1..=100).contains(&req.top_k) {
        return Err(bad("top_k", "must be 1–100"));
    }
    if let Some(run) = &req.run {
        validate_run(run)?;
    }
    Ok(())
}

/// The options every candidate shares, validated once on one GPU with S1's split ([`validate`], [`with_framework`],
/// the context-parallel communication resolved for the framework): the options that depend on the candidate's
/// pipeline, split or experts stay off here (each candidate sets them: `Candidate::parallelism`). Errors: the
/// validation's, with `parallelism.` fields renamed `training.`; `training.cp_comm_type` a2a+p2p (its hierarchical
/// sizes are per candidate, so it is not searched).
fn base_config(req: &SearchRequest, system_gpus: u64) -> Result<TrainingConfig, ConfigError> {
    let t = &req.training;
    let mut template = ParallelSpec {
        global_batch: Some(req.global_batch),
        layer_split: Some(LayerSplit::S1),
        fp8_param_gather: t.fp8_param_gather,
        moe_grouped_gemm: t.moe_grouped_gemm,
        ..ParallelSpec::default()
    };
    t.copy_training_options(&mut template);
    template.overlap_p2p_comm = false;
    template.overlap_moe_expert_parallel_comm = false;
    template.account_for_embedding_in_pipeline_split = false;
    template.account_for_loss_in_pipeline_split = false;
    if t.cp_comm_type == Some(crate::llm::cp::CpCommType::A2aP2p) {
        return Err(bad(
            "training.cp_comm_type",
            "a2a+p2p needs hierarchical_context_parallel_sizes per candidate and is not searched: predict it with \
             /v1/predictions, or search p2p, all_gather or a2a",
        ));
    }
    validate(&req.model, &template, req.precision, system_gpus)
        .and_then(|c| with_framework(c, req.framework))
        .and_then(|mut c| {
            c.cp_comm = c.cp_comm.resolve(req.framework)?;
            Ok(c)
        })
        .map_err(|e| {
            let field = e.field.replace("parallelism.", "training.");
            ConfigError { field, message: e.message }
        })
}

/// The tensor-parallel degrees to try: `constraints.tp` alone, else every divisor of `gpus` up to `max_tp` (default
/// the GPUs per node: tp stays inside a node's NVLink domain) that splits the heads, kv_heads, hidden size and FFN
/// width evenly (Megatron-LM's column/row-parallel layers). Errors: `constraints.tp` not dividing those or the GPUs.
fn tp_degrees(req: &SearchRequest, base: &TrainingConfig, gpus_per_node: u32) -> Result<Vec<u32>, ConfigError> {
    let c = &req.constraints;
    let m = &base.model;
    let tp_ok =
        |tp: u32| m.heads % tp == 0 && base.kv_heads % tp == 0 && m.hidden % tp == 0 && base.ffn_hidden % tp == 0;
    let max_tp = c.max_tp.unwrap_or(gpus_per_node).max(1);
    Ok(match c.tp {
        Some(tp) if tp == 0 || !tp_ok(tp) || req.gpus % tp as u64 != 0 => {
            return Err(bad(
                "constraints.tp",
                format!("tp {tp} must divide heads, kv_heads, hidden, ffn_hidden and gpus"),
            ))
        }
        Some(tp) => vec![tp],
        None => divisors(req.gpus).into_iter().filter(|&tp| tp <= max_tp && tp_ok(tp)).collect(),
    })
}

/// The context-parallel degrees to try (`constraints.context_parallel`, default 1 only). Errors
/// (`constraints.context_parallel`): a degree of 0, or cp > 1 without flash attention or with a sequence not
/// divisible by 2·cp (Megatron-Core's causal load-balanced split into 2·cp chunks).
fn cp_degrees(req: &SearchRequest, m: &ModelSpec) -> Result<Vec<u32>, ConfigError> {
    let cps = req.constraints.context_parallel.clone().unwrap_or_else(|| vec![1]);
    for &cp in &cps {
        if cp == 0 {
            return Err(bad("constraints.context_parallel", "degrees must be at least 1"));
        }
        if cp > 1 && (m.attention != crate::llm::config::Attention::Flash || m.seq_len % (2 * cp) != 0) {
            return Err(bad(
                "constraints.context_parallel",
                format!("cp {cp} needs model.attention flash and seq_len divisible by 2·cp"),
            ));
        }
    }
    Ok(cps)
}

/// The memory-saving choices to try: activation recomputation (default every [`Recompute`] mode) and sequence
/// parallelism (default off and on). Errors: `constraints.recompute`, `constraints.sequence_parallel` empty.
fn memory_choices(req: &SearchRequest) -> Result<(Vec<Recompute>, Vec<bool>), ConfigError> {
    let c = &req.constraints;
    let recompute = c.recompute.clone().unwrap_or_else(|| Recompute::ALL.to_vec());
    let sp = c.sequence_parallel.clone().unwrap_or_else(|| vec![false, true]);
    if recompute.is_empty() {
        return Err(bad("constraints.recompute", "give at least one choice"));
    }
    if sp.is_empty() {
        return Err(bad("constraints.sequence_parallel", "give at least one choice"));
    }
    Ok((recompute, sp))
}

/// The expert layouts to try, (expert-parallel degrees, expert-tensor-parallel degrees, token dispatchers): `[1]`,
/// `[1]` and the all-to-all dispatcher for a dense model; for a mixture of experts `constraints.ep` (default every
/// divisor of the experts where the framework has expert parallelism, else 1), `constraints.expert_tp` (default
/// none: the candidate's tp and 1) and `constraints.moe_token_dispatcher` (default the all-to-all and DeepEP
/// dispatchers the framework has). Errors: `constraints.ep`, `constraints.expert_tp`,
/// `constraints.moe_token_dispatcher`, `training.overlap_moe_expert_parallel_comm` outside Megatron-Core.
#[allow(clippy::type_complexity)]
fn expert_space(
    req: &SearchRequest,
    base: &TrainingConfig,
) -> Result<(Vec<u32>, Vec<u32>, Vec<Dispatcher>), ConfigError> {
    let c = &req.constraints;
    let t = &req.training;
    Ok(match &base.moe {
        None => {
            if c.ep.is_some() || c.expert_tp.is_some() {
                return Err(bad("constraints.ep", "expert parallelism needs a mixture-of-experts model"));
            }
            (vec![1], vec![1], vec![Dispatcher::Alltoall])
        }
        Some(moe) => {
            let experts = moe.config.experts;
            let fw = req.framework;
            let eps = c.ep.clone().unwrap_or_else(|| {
                if fw.has_expert_parallelism() {
                    divisors(experts as u64)
                } else {
                    vec![1]
                }
            });
            if eps.is_empty() || eps.iter().any(|&e| e == 0 || experts % e != 0) {
                return Err(bad("constraints.ep", format!("each degree must divide the {experts} experts")));
            }
            if !fw.has_expert_parallelism() && eps.iter().any(|&e| e > 1) {
                return Err(bad(
                    "constraints.ep",
                    format!("{} has no expert parallelism: the only degree is 1", fw.as_str()),
                ));
            }
            if t.overlap_moe_expert_parallel_comm && !fw.is_megatron_core() {
                return Err(bad(
                    "training.overlap_moe_expert_parallel_comm",
                    format!("overlap_moe_expert_parallel_comm is Megatron-Core's: {} does not run it", fw.as_str()),
                ));
            }
            let etps = c.expert_tp.clone().unwrap_or_default();
            if etps.iter().any(|&e| e == 0 || moe.config.expert_ffn_hidden % e != 0) {
                return Err(bad(
                    "constraints.expert_tp",
                    format!("each degree must divide the experts' width {}", moe.config.expert_ffn_hidden),
                ));
            }
            // The default: the all-to-all and DeepEP dispatchers the framework has.
            let dispatchers = c.moe_token_dispatcher.clone().unwrap_or_else(|| {
                [Dispatcher::Alltoall, Dispatcher::Deepep]
                    .into_iter()
                    .filter(|d| fw.moe_dispatchers().contains(d))
                    .collect()
            });
            if dispatchers.is_empty() {
                return Err(bad("constraints.moe_token_dispatcher", "give at least one dispatcher"));
            }
            if let Some(d) = dispatchers.iter().find(|d| !fw.moe_dispatchers().contains(d)) {
                return Err(bad(
                    "constraints.moe_token_dispatcher",
                    format!("{} has no {} dispatcher", fw.as_str(), d.as_str()),
                ));
            }
            (eps, etps, dispatchers)
        }
    })
}

//! The search for the fastest configuration that fits: enumerate tp·cp·pp·dp factorizations of the GPUs,
//! micro-batch sizes, virtual stages, recomputation and sequence parallelism; drop what does not fit in memory;
//! rank the rest by predicted iteration time and return the top k with their full predictions.
//!
//! Speed: operator times depend on shapes, not on the whole configuration, so a layer's, the embedding's and the
//! head's per-micro-batch times are computed once per (tp, cp, micro_batch, sequence_parallel, recompute) and every
//! collective once per (size, group); a candidate then costs a few multiplications per model chunk. The schedule
//! simulation is the only per-candidate work that grows with pp·v·m: candidates are first ranked by a lower bound
//! of their iteration time ([`crate::llm::pipeline::makespan_lower_bound`]) and simulated in that order until the bound
//! exceeds the k-th best simulated time, so the top k are exact (branch and bound). A configuration the search
//! returns predicts the same time through `POST /v1/predictions/training` (the same [`super::timing`] code).

use std::time::Instant;

mod evaluator;
mod request;

pub use request::{Candidate, SearchConstraints, SearchHit, SearchRequest, SearchResult, SearchTraining};

use super::config::{bad, ConfigError, LayerSplit, MegatronSplit, ParallelSpec, Recompute, TrainingConfig};
use super::moe::Dispatcher;
use super::partition::megatron_split;
use super::predict::predict;
use super::run::run_estimate;
use super::validate::{validate, validate_run, with_framework};
use crate::cost::CostBackend;
use evaluator::Evaluator;

fn divisors(n: u64) -> Vec<u32> {
    (1..=n.min(u32::MAX as u64)).filter(|d| n % d == 0).map(|d| d as u32).collect()
}

/// The validated template every candidate is derived from, and the enumeration limits.
struct Space {
    base: TrainingConfig,
    tps: Vec<u32>,
    cps: Vec<u32>,
    max_pp: u32,
    fixed_pp: Option<u32>,
    micro_batches: Vec<u32>,
    max_v: u32,
    recompute: Vec<Recompute>,
    sp: Vec<bool>,
    /// Expert-parallel degrees, expert-tensor-parallel degrees (empty: the candidate's tp and 1) and dispatchers
    /// to try; `[1]`, `[1]` and one dispatcher for a dense model.
    eps: Vec<u32>,
    etps: Vec<u32>,
    dispatchers: Vec<Dispatcher>,
}

fn space(req: &SearchRequest, gpus_per_node: u32, system_gpus: u64) -> Result<Space, ConfigError> {
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
    let t = &req.training;
    // The options every candidate shares, validated once on one GPU with S1's split: the ones that depend on the
    // candidate's pipeline, split or experts stay off here (each candidate sets them: `Candidate::parallelism`).
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
    let base = validate(&req.model, &template, req.precision, system_gpus)
        .and_then(|c| with_framework(c, req.framework))
        .and_then(|mut c| {
            c.cp_comm = c.cp_comm.resolve(req.framework)?;
            Ok(c)
        })
        .map_err(|e| {
            let field = e.field.replace("parallelism.", "training.");
            ConfigError { field, message: e.message }
        })?;
    let c = &req.constraints;
    let m = &base.model;
    let tp_ok =
        |tp: u32| m.heads % tp == 0 && base.kv_heads % tp == 0 && m.hidden % tp == 0 && base.ffn_hidden % tp == 0;
    let max_tp = c.max_tp.unwrap_or(gpus_per_node).max(1);
    let tps: Vec<u32> = match c.tp {
        Some(tp) if tp == 0 || !tp_ok(tp) || req.gpus % tp as u64 != 0 => {
            return Err(bad(
                "constraints.tp",
                format!("tp {tp} must divide heads, kv_heads, hidden, ffn_hidden and gpus"),
            ))
        }
        Some(tp) => vec![tp],
        None => divisors(req.gpus).into_iter().filter(|&tp| tp <= max_tp && tp_ok(tp)).collect(),
    };
    let cps = c.context_parallel.clone().unwrap_or_else(|| vec![1]);
    for &cp in &cps {
        if cp == 0 {
            return Err(bad("constraints.context_parallel", "degrees must be at least 1"));
        }
        if cp > 1 && (m.attention != super::config::Attention::Flash || m.seq_len % (2 * cp) != 0) {
            return Err(bad(
                "constraints.context_parallel",
                format!("cp {cp} needs model.attention flash and seq_len divisible by 2·cp"),
            ));
        }
    }
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
    let max_v = match t.layer_split {
        LayerSplit::S1 => 1,
        LayerSplit::Uniform => c.max_virtual_stages.unwrap_or(8).max(1),
    };
    let recompute = c.recompute.clone().unwrap_or_else(|| Recompute::ALL.to_vec());
    let sp = c.sequence_parallel.clone().unwrap_or_else(|| vec![false, true]);
    if recompute.is_empty() {
        return Err(bad("constraints.recompute", "give at least one choice"));
    }
    if sp.is_empty() {
        return Err(bad("constraints.sequence_parallel", "give at least one choice"));
    }
    let (eps, etps, dispatchers) = match &base.moe {
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
    };
    Ok(Space { base, tps, cps, max_pp, fixed_pp: c.pp, micro_batches, max_v, recompute, sp, eps, etps, dispatchers })
}

/// Calls `f` with every expert layout of a candidate (ep, expert_tp, dispatcher, 1F1B overlap) that Megatron-Core
/// accepts ([`crate::llm::moe::parallel::resolve`]'s rules); the candidate itself for a dense model.
fn expert_layouts(req: &SearchRequest, sp: &Space, c: Candidate, f: &mut dyn FnMut(Candidate)) {
    let Some(moe) = &sp.base.moe else {
        f(c);
        return;
    };
    let ranks = c.tp as u64 * c.cp as u64 * c.dp as u64;
    let default_etps = [1, c.tp];
    let etps: &[u32] = if sp.etps.is_empty() { &default_etps } else { &sp.etps };
    for (i, &etp) in etps.iter().enumerate() {
        if etps[..i].contains(&etp) || moe.config.expert_ffn_hidden % etp != 0 {
            continue;
        }
        for &ep in &sp.eps {
            if ranks % (etp as u64 * ep as u64) != 0 || (c.tp > 1 && ep > 1 && !c.sequence_parallel) {
                continue;
            }
            for (j, &dispatcher) in sp.dispatchers.iter().enumerate() {
                // Without expert parallelism the dispatchers differ only in their local permutations.
                if ep * etp == 1 && j > 0 {
                    continue;
                }
                let overlap = req.training.overlap_moe_expert_parallel_comm
                    && ep > 1
                    && dispatcher != Dispatcher::Allgather
                    && c.recompute != Recompute::Full
                    && (c.pp == 1 || c.virtual_stages > 1);
                f(Candidate { ep, expert_tp: etp, dispatcher, overlap_ep: overlap, ..c });
            }
        }
    }
}

/// Calls `f` with every valid candidate (the same checks as [`validate`]).
fn enumerate(req: &SearchRequest, sp: &Space, f: &mut dyn FnMut(Candidate)) {
    let m = &sp.base.model;
    let gb = req.global_batch as u64;
    for &tp in &sp.tps {
        for &cp in &sp.cps {
            let per_pp = tp as u64 * cp as u64;
            if req.gpus % per_pp != 0 {
                continue;
            }
            if (m.seq_len / cp) % tp != 0 && sp.sp.iter().all(|&s| s) {
                continue;
            }
            let (hp, kvp) = (m.heads / tp, (sp.base.kv_heads / tp).max(1));
            if cp > 1 && sp.base.cp_comm.comm_type == crate::llm::cp::CpCommType::A2a && (hp % cp != 0 || kvp % cp != 0)
            {
                continue;
            }
            for pp in divisors(req.gpus / per_pp) {
                if pp > sp.max_pp || sp.fixed_pp.is_some_and(|f| f != pp) {
                    continue;
                }
                if req.training.layer_split == LayerSplit::Uniform
                    && megatron_split(m.layers, pp, 1, &req.training.megatron_split()).is_err()
                {
                    continue;
                }
                let dp = (req.gpus / per_pp / pp as u64) as u32;
                if gb % dp as u64 != 0 {
                    continue;
                }
                for &b in &sp.micro_batches {
                    if (gb / dp as u64) % b as u64 != 0 {
                        continue;
                    }
                    let grad_accum = gb / dp as u64 / b as u64;
                    for v in 1..=sp.max_v {
                        if v > 1
                            && (pp < 2
                                || grad_accum % pp as u64 != 0
                                || megatron_split(m.layers, pp, v, &req.training.megatron_split()).is_err())
                        {
                            continue;
                        }
                        for &recompute in &sp.recompute {
                            for &s in &sp.sp {
                                if s && (tp == 1 || (m.seq_len / cp) % tp != 0) {
                                    continue;
                                }
                                let c = Candidate {
                                    tp,
                                    cp,
                                    pp,
                                    dp,
                                    micro_batch: b,
                                    virtual_stages: v,
                                    recompute,
                                    sequence_parallel: s,
                                    ep: 1,
                                    expert_tp: 1,
                                    dispatcher: Dispatcher::Alltoall,
                                    overlap_ep: false,
                                };
                                expert_layouts(req, sp, c, f);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// How many candidates `req` enumerates on a system (cheap: no costing). Errors as [`search`].
pub fn count_candidates(req: &SearchRequest, gpus_per_node: u32, system_gpus: u64) -> Result<u64, ConfigError> {
    let sp = space(req, gpus_per_node, system_gpus)?;
    let mut n = 0u64;
    enumerate(req, &sp, &mut |_| n += 1);
    Ok(n)
}

/// Searches `req` on `backend`'s system. `progress(done, total)` is called now and then.
///
/// Errors (422 fields): `gpus`, `global_batch`, `top_k`, `run…`, `model…`, `training…`, `constraints…`; a
/// precision the GPU lacks (`precision`).
pub fn search(
    req: &SearchRequest,
    backend: &dyn CostBackend,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<SearchResult, ConfigError> {
    let start = Instant::now();
    let system = backend.system();
    let sp = space(req, system.gpus_per_node, system.total_gpus())?;
    crate::llm::recipe::check_gpu(&sp.base, &system.gpu)
        .map_err(|e| ConfigError { field: e.field.replace("parallelism.", "training."), message: e.message })?;
    let mut candidates: Vec<Candidate> = Vec::new();
    enumerate(req, &sp, &mut |c| candidates.push(c));
    let total = candidates.len() as u64;
    let mut base = sp.base.clone();
    base.layer_split = req.training.layer_split;
    base.split = match base.layer_split {
        LayerSplit::Uniform => req.training.megatron_split(),
        LayerSplit::S1 => MegatronSplit::default(),
    };
    let mut ev = Evaluator::new(backend, &base);
    let gb = req.global_batch as u64;
    ev.prefetch(&base, &req.training, &candidates, gb);
    // Phase 1: cost, memory-check and bound every candidate.
    let mut ranked: Vec<(f64, bool, u32)> = Vec::new();
    let mut cfg = base.clone();
    for (i, c) in candidates.iter().enumerate() {
        Evaluator::configure(&mut cfg, &req.training, c, gb);
        let costed = ev.bound(&cfg)?;
        if costed.fits {
            ranked.push((costed.bound_s, costed.exact, i as u32));
        }
        if i % 4096 == 4095 {
            progress(i as u64 + 1, total);
        }
    }
    let fitting = ranked.len() as u64;
    // Phase 2: exact times in bound order until the bound exceeds the k-th best.
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    let k = req.top_k as usize;
    let mut best: Vec<(f64, u32)> = Vec::with_capacity(k + 1);
    let mut simulated = 0u64;
    for &(bound, exact, i) in &ranked {
        if best.len() == k && bound >= best[k - 1].0 {
            break;
        }
        let t = if exact {
            bound
        } else {
            Evaluator::configure(&mut cfg, &req.training, &candidates[i as usize], gb);
            simulated += 1;
            ev.exact(&cfg)?
        };
        let pos = best.partition_point(|(bt, _)| *bt <= t);
        if pos < k {
            best.insert(pos, (t, i));
            best.truncate(k);
        }
    }
    progress(total, total);
    let elapsed_s = start.elapsed().as_secs_f64();
    // The full predictions of the winners (the same code path as POST /v1/predictions/training).
    let mut top = Vec::with_capacity(best.len());
    for (rank, (t, i)) in best.iter().enumerate() {
        let c = candidates[*i as usize];
        let parallelism = c.parallelism(req);
        let cfg =
            with_framework(validate(&req.model, &parallelism, req.precision, system.total_gpus())?, req.framework)?;
        let mut prediction = predict(&cfg, backend)?;
        debug_assert!((prediction.iteration_time_s / t - 1.0).abs() < 1e-9, "{} vs {t}", prediction.iteration_time_s);
        if let Some(run) = &req.run {
            prediction.run = Some(run_estimate(&prediction, run, req.model.seq_len));
        }
        top.push(SearchHit {
            rank: rank as u32 + 1,
            parallelism,
            iteration_time_s: prediction.iteration_time_s,
            interval: prediction.interval.clone(),
            memory_gib: prediction.memory.total_gib,
            prediction,
        });
    }
    let mut warnings = Vec::new();
    if total == 0 {
        warnings.push(format!(
            "no configuration of {} GPUs divides global_batch {} under the constraints",
            req.gpus, req.global_batch
        ));
    } else if fitting == 0 {
        warnings.push(format!(
            "none of the {total} configurations fits in {:.0} GiB per GPU: allow recompute, sequence parallelism, \
             more pipeline stages or a higher zero_stage",
            system.gpu.memory_gib
        ));
    }
    Ok(SearchResult {
        evaluated: total,
        fitting,
        simulated,
        elapsed_s,
        candidates_per_s: total as f64 / elapsed_s.max(1e-9),
        top,
        warnings,
    })
}

#[cfg(test)]
mod tests;

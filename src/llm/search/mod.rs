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

mod enumerate;
mod evaluator;
mod request;
mod space;

pub use request::{Candidate, SearchConstraints, SearchHit, SearchRequest, SearchResult, SearchTraining};

use super::config::{ConfigError, LayerSplit, MegatronSplit, TrainingConfig};
use super::predict::predict;
use super::run::run_estimate;
use super::validate::{validate, with_framework};
use crate::cost::CostBackend;
use enumerate::enumerate;
use evaluator::Evaluator;
use space::space;

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
    let mut cfg = base.clone();
    let mut ranked = bound_all(req, &mut ev, &mut cfg, &candidates, progress)?;
    let fitting = ranked.len() as u64;
    let (best, simulated) = exact_top_k(req, &mut ev, &mut cfg, &candidates, &mut ranked)?;
    progress(total, total);
    let elapsed_s = start.elapsed().as_secs_f64();
    let top = full_predictions(req, backend, &candidates, &best)?;
    Ok(SearchResult {
        evaluated: total,
        fitting,
        simulated,
        elapsed_s,
        candidates_per_s: total as f64 / elapsed_s.max(1e-9),
        top,
        warnings: warnings(req, total, fitting, system.gpu.memory_gib),
    })
}

/// Phase 1 of the branch and bound: costs every candidate once (`cfg` reconfigured for each: [`Evaluator::configure`]),
/// drops those that do not fit in memory and returns the others as (lower bound of the iteration time, s; whether the
/// bound is already the exact time; the candidate's index). `progress` gets (done, total) every 4,096 candidates.
fn bound_all(
    req: &SearchRequest,
    ev: &mut Evaluator,
    cfg: &mut TrainingConfig,
    candidates: &[Candidate],
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<(f64, bool, u32)>, ConfigError> {
    let gb = req.global_batch as u64;
    let total = candidates.len() as u64;
    let mut ranked: Vec<(f64, bool, u32)> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        Evaluator::configure(cfg, &req.training, c, gb);
        let costed = ev.bound(cfg)?;
        if costed.fits {
            ranked.push((costed.bound_s, costed.exact, i as u32));
        }
        if i % 4096 == 4095 {
            progress(i as u64 + 1, total);
        }
    }
    Ok(ranked)
}

/// Phase 2: sorts `ranked` by lower bound and simulates the schedules in that order until the bound reaches the k-th
/// best simulated time (`req.top_k`), so the top k are exact. Returns the best (iteration time, s; candidate index),
/// fastest first, and how many candidates were simulated.
#[allow(clippy::type_complexity)]
fn exact_top_k(
    req: &SearchRequest,
    ev: &mut Evaluator,
    cfg: &mut TrainingConfig,
    candidates: &[Candidate],
    ranked: &mut [(f64, bool, u32)],
) -> Result<(Vec<(f64, u32)>, u64), ConfigError> {
    let gb = req.global_batch as u64;
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    let k = req.top_k as usize;
    let mut best: Vec<(f64, u32)> = Vec::with_capacity(k + 1);
    let mut simulated = 0u64;
    for &(bound, exact, i) in ranked.iter() {
        if best.len() == k && bound >= best[k - 1].0 {
            break;
        }
        let t = if exact {
            bound
        } else {
            Evaluator::configure(cfg, &req.training, &candidates[i as usize], gb);
            simulated += 1;
            ev.exact(cfg)?
        };
        let pos = best.partition_point(|(bt, _)| *bt <= t);
        if pos < k {
            best.insert(pos, (t, i));
            best.truncate(k);
        }
    }
    Ok((best, simulated))
}

/// The full predictions of the winners `best` (iteration time, s; candidate index), ranked from 1, through the same
/// code path as `POST /v1/predictions/training` ([`validate`], [`with_framework`], [`predict`]), with the run's
/// length when `req.run` asks for it ([`run_estimate`]).
fn full_predictions(
    req: &SearchRequest,
    backend: &dyn CostBackend,
    candidates: &[Candidate],
    best: &[(f64, u32)],
) -> Result<Vec<SearchHit>, ConfigError> {
    let system = backend.system();
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
    Ok(top)
}

/// Why the search found nothing: no candidate (`total` 0: no layout divides the global batch under the
/// constraints) or none that fits the GPU's `memory_gib`, GiB; empty otherwise.
fn warnings(req: &SearchRequest, total: u64, fitting: u64, memory_gib: f64) -> Vec<String> {
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
            memory_gib
        ));
    }
    warnings
}

#[cfg(test)]
mod tests;

//! The enumeration of the search's candidates: every tp·cp·pp·dp factorization of the GPUs with the micro-batch
//! sizes, virtual stages, recomputation and sequence parallelism of the [`Space`] that the training validation
//! ([`crate::llm::validate::validate`]) would accept, and for a mixture of experts every expert layout Megatron-Core
//! accepts.

use super::request::{Candidate, SearchRequest};
use super::space::{divisors, Space};
use crate::llm::config::{LayerSplit, Recompute};
use crate::llm::moe::Dispatcher;
use crate::llm::partition::megatron_split;

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

/// Calls `f` with every valid candidate (the same checks as [`crate::llm::validate::validate`]), in the order of
/// [`grid`] and, within a candidate, of [`expert_layouts`].
pub(super) fn enumerate(req: &SearchRequest, sp: &Space, f: &mut dyn FnMut(Candidate)) {
    for c in grid(req, sp) {
        expert_layouts(req, sp, c, f);
    }
}

/// Every dense candidate the validation accepts, axis by axis, the outer axis first: tp, cp ([`model_parallel`]),
/// pp and the dp it leaves ([`pipelines`]), micro-batch size ([`micro_batches`]), virtual stages
/// ([`interleavings`]), recomputation, sequence parallelism ([`memory_savings`]). Each axis keeps the
/// [`Space`]'s order, so the search sees the candidates in a fixed order.
fn grid<'a>(req: &'a SearchRequest, sp: &'a Space) -> impl Iterator<Item = Candidate> + 'a {
    model_parallel(req, sp)
        .flat_map(move |c| pipelines(req, sp, c))
        .flat_map(move |c| micro_batches(req, sp, c))
        .flat_map(move |c| interleavings(req, sp, c))
        .flat_map(move |c| memory_savings(sp, c))
}

/// The (tp, cp) pairs whose tp·cp divides the GPUs, whose seq_len / cp splits over tp when sequence parallelism is
/// the only choice, and, with `cp_comm_type` `a2a`, whose heads and kv_heads per tp rank divide by cp (TE's
/// all-to-all splits heads), as candidates with the later axes at their first values (set by the later axes).
fn model_parallel<'a>(req: &'a SearchRequest, sp: &'a Space) -> impl Iterator<Item = Candidate> + 'a {
    let m = &sp.base.model;
    let a2a = sp.base.cp_comm.comm_type == crate::llm::cp::CpCommType::A2a;
    let pairs = sp.tps.iter().flat_map(move |&tp| sp.cps.iter().map(move |&cp| (tp, cp)));
    pairs
        .filter(move |&(tp, cp)| {
            let (hp, kvp) = (m.heads / tp, (sp.base.kv_heads / tp).max(1));
            req.gpus % (tp as u64 * cp as u64) == 0
                && !((m.seq_len / cp) % tp != 0 && sp.sp.iter().all(|&s| s))
                && !(cp > 1 && a2a && (hp % cp != 0 || kvp % cp != 0))
        })
        .map(|(tp, cp)| Candidate {
            tp,
            cp,
            pp: 1,
            dp: 1,
            micro_batch: 1,
            virtual_stages: 1,
            recompute: Recompute::None,
            sequence_parallel: false,
            ep: 1,
            expert_tp: 1,
            dispatcher: Dispatcher::Alltoall,
            overlap_ep: false,
        })
}

/// `c` with every pipeline depth pp dividing the GPUs left by tp·cp (increasing; at most `max_pp`, the fixed one
/// if any, and one Megatron-Core's uniform split accepts) and the dp that leaves, when dp divides the global batch.
fn pipelines<'a>(req: &'a SearchRequest, sp: &'a Space, c: Candidate) -> impl Iterator<Item = Candidate> + 'a {
    let per_pp = c.tp as u64 * c.cp as u64;
    let layers = sp.base.model.layers;
    divisors(req.gpus / per_pp)
        .into_iter()
        .filter(move |&pp| !(pp > sp.max_pp || sp.fixed_pp.is_some_and(|f| f != pp)))
        .filter(move |&pp| {
            req.training.layer_split != LayerSplit::Uniform
                || megatron_split(layers, pp, 1, &req.training.megatron_split()).is_ok()
        })
        .map(move |pp| Candidate { pp, dp: (req.gpus / per_pp / pp as u64) as u32, ..c })
        .filter(move |c| req.global_batch as u64 % c.dp as u64 == 0)
}

/// `c` with every micro-batch size of the [`Space`] that divides the global batch's share per dp rank.
fn micro_batches<'a>(req: &'a SearchRequest, sp: &'a Space, c: Candidate) -> impl Iterator<Item = Candidate> + 'a {
    let per_rank = req.global_batch as u64 / c.dp as u64;
    sp.micro_batches.iter().filter(move |&&b| per_rank % b as u64 == 0).map(move |&b| Candidate { micro_batch: b, ..c })
}

/// `c` with 1 to `max_v` virtual stages; more than one needs pp ≥ 2, micro-batches per step divisible by pp
/// (Narayanan et al. 2021's interleaved schedule) and a split Megatron-Core accepts.
fn interleavings<'a>(req: &'a SearchRequest, sp: &'a Space, c: Candidate) -> impl Iterator<Item = Candidate> + 'a {
    let grad_accum = req.global_batch as u64 / c.dp as u64 / c.micro_batch as u64;
    let layers = sp.base.model.layers;
    (1..=sp.max_v)
        .filter(move |&v| {
            !(v > 1
                && (c.pp < 2
                    || grad_accum % c.pp as u64 != 0
                    || megatron_split(layers, c.pp, v, &req.training.megatron_split()).is_err()))
        })
        .map(move |v| Candidate { virtual_stages: v, ..c })
}

/// `c` with every recomputation choice and, within each, every sequence-parallel choice (on only with tp > 1 and
/// seq_len / cp divisible by tp).
fn memory_savings(sp: &Space, c: Candidate) -> impl Iterator<Item = Candidate> + '_ {
    let seq_len = sp.base.model.seq_len;
    let pairs = sp.recompute.iter().flat_map(move |&r| sp.sp.iter().map(move |&s| (r, s)));
    pairs
        .filter(move |&(_, s)| !(s && (c.tp == 1 || (seq_len / c.cp) % c.tp != 0)))
        .map(move |(recompute, sequence_parallel)| Candidate { recompute, sequence_parallel, ..c })
}

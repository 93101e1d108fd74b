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

/// Calls `f` with every valid candidate (the same checks as [`crate::llm::validate::validate`]).
pub(super) fn enumerate(req: &SearchRequest, sp: &Space, f: &mut dyn FnMut(Candidate)) {
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

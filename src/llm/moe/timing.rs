//! Timing an MoE layer: its operators through the shared [`Timer`] and [`time_ops`] (Transformer Engine's grouped
//! expert GEMMs at the host time of one framework call plus [`super::launches::MULTI_STREAM_GEMM_HOST_US`] per
//! further local expert's GEMM, [`super::launches::grouped_gemm_host_us`]; HybridEP's transfer inside the NVLink
//! domain at its kernels' rate, [`super::nvlink`]; DeepEP's and HybridEP's inter-node transfer at their kernels'
//! RDMA rate, [`super::rdma`]), then Megatron-Core's
//! `overlap_moe_expert_parallel_comm`, which no single operator's overlap expresses: the combined 1F1B schedule
//! (`combined_1f1b.py`, `model_chunk_schedule_plan.py`) runs one micro-batch's forward of a layer beside another
//! micro-batch's backward of it, the dispatch and combine of each on the communication stream while the other
//! computes, so a pass's expert-parallel communication is exposed only where it outlasts the other pass's
//! computation of the layer, plus the contention κ of what it hides ([`crate::llm::timing::overlap_charge`]).
//! The warm-up and cool-down micro-batches, which have no partner, are treated like the steady state.
//!
//! A layer's passes then run at the pace of the longer of their GPU and host time ([`layer_seconds`]), the host
//! time counting the launches the MoE layer issues beyond its operators and the GPU time the idle its
//! device→host synchronizations cause ([`super::launches`]).

use super::launches::{grouped_gemm_host_us, moe_launches, synced_pass_us, SyncInterval};
use super::parallel::Dispatcher;
use crate::llm::config::{ConfigError, TrainingConfig};
use crate::llm::cuda_graphs::CudaGraphs;
use crate::llm::operators::{OpName, StageOp, Work};
use crate::llm::timing::{overlap_charge, pass_sums, time_ops, TimedOp, Timer};
use crate::op::Phase;

fn is_ep_comm(name: OpName) -> bool {
    matches!(name, OpName::EpAllToAll | OpName::EpAllGather | OpName::EpReduceScatter)
}

/// Whether an operator runs on the communication stream under `overlap_moe_expert_parallel_comm`: the combined 1F1B
/// schedule puts a layer's dispatch and combine nodes there and its attention and MLP on the computation stream
/// (Megatron-Core MR 3470, `fine_grained_callables.py`: the dispatch node runs `token_dispatch`, the combine node
/// `token_combine`). With HybridEP those calls are `dispatch_with_permute` and `combine_with_unpermute`, so the
/// permute and unpermute kernels they launch ([`super::ops`]) run there too.
fn on_comm_stream(name: OpName, hybridep: bool) -> bool {
    is_ep_comm(name) || (hybridep && matches!(name, OpName::MoePermute | OpName::MoeUnpermute))
}

/// Times one MoE layer's operators (as [`time_ops`]) and applies the 1F1B expert-parallel overlap when `cfg` asks
/// for it.
pub fn time_layer(cfg: &TrainingConfig, ops: &[StageOp], timer: &mut Timer) -> Result<Vec<TimedOp>, ConfigError> {
    let mut timed = time_ops(ops, timer)?;
    // Transformer Engine's grouped GEMM issues one cuBLAS GEMM per local expert from one framework call
    // (Megatron-Core's TEGroupedMLP; torchtitan's `torch._grouped_mm` is one kernel).
    let grouped = cfg.moe.as_ref().filter(|m| m.grouped_gemm && cfg.framework.framework.is_megatron_core());
    if let Some(moe) = grouped {
        let experts = moe.local_experts().max(1);
        for (o, t) in ops.iter().zip(timed.iter_mut()) {
            if matches!(o.name, OpName::ExpertFc1 | OpName::ExpertFc2) && t.time.host_us > 0.0 {
                // A recomputed forward runs the forward's one GEMM per expert.
                let gemms = if o.phase == Phase::Bwd && !o.recompute { 2 } else { 1 };
                t.time.host_us = grouped_gemm_host_us(t.time.host_us, experts, gemms);
            }
        }
    }
    // HybridEP's permute and unpermute kernels are launched from inside `dispatch_with_permute` and
    // `combine_with_unpermute`, the dispatcher's own calls (counted in [`super::launches`]): no framework call of
    // their own.
    if cfg.moe.as_ref().is_some_and(|m| m.dispatcher == Dispatcher::Hybridep) {
        for (o, t) in ops.iter().zip(timed.iter_mut()) {
            if matches!(o.name, OpName::MoePermute | OpName::MoeUnpermute) {
                t.time.host_us = 0.0;
            }
        }
    }
    // HybridEP's transfer inside the NVLink domain and DeepEP's and HybridEP's inter-node transfer at their kernels'
    // rates, not NCCL's.
    if let Some(moe) = cfg.moe.as_ref() {
        let system = timer.backend().system();
        if super::nvlink::apply_hybridep_nvl(moe, system, ops, &mut timed) {
            super::rdma::recharge_overlaps(ops, &mut timed, timer.contention());
        }
        super::rdma::apply_flex_rdma(moe, system, ops, &mut timed, timer.contention());
    }
    if let Some(moe) = cfg.moe.as_ref().filter(|m| m.overlap_ep_comm) {
        apply_ep_overlap(ops, &mut timed, timer.contention(), moe.dispatcher == Dispatcher::Hybridep);
    }
    Ok(timed)
}

/// Scales the charged time of each pass's expert-parallel collectives (and, with `hybridep`, of HybridEP's permute
/// and unpermute kernels, which run inside its dispatch and combine calls: [`on_comm_stream`]) so that together
/// they are charged their exposed part beside the other pass's computation (plus κ × the hidden part).
pub fn apply_ep_overlap(ops: &[StageOp], timed: &mut [TimedOp], kappa: f64, hybridep: bool) {
    let sum = |phase: Phase, pick: &dyn Fn(&StageOp) -> bool, full: bool| -> f64 {
        ops.iter()
            .zip(timed.iter())
            .filter(|(o, _)| o.phase == phase && pick(o))
            .map(|(o, t)| o.calls as f64 * if full { t.time.time_us } else { t.charged_us })
            .sum()
    };
    let comm = |o: &StageOp| on_comm_stream(o.name, hybridep);
    let compute = |o: &StageOp| matches!(o.work, Work::Compute { .. }) && !comm(o);
    let mut ratio = [1.0; 2];
    for (i, (phase, other)) in [(Phase::Fwd, Phase::Bwd), (Phase::Bwd, Phase::Fwd)].into_iter().enumerate() {
        let full = sum(phase, &comm, true);
        if full <= 0.0 {
            continue;
        }
        let window = sum(other, &compute, false);
        ratio[i] = overlap_charge(full, (full - window).max(0.0), kappa) / full;
    }
    for (o, t) in ops.iter().zip(timed.iter_mut()) {
        if on_comm_stream(o.name, hybridep) {
            t.charged_us = t.time.time_us * ratio[usize::from(o.phase == Phase::Bwd)];
        }
    }
}

/// Forward and backward seconds of one MoE (or MTP) layer's `ops` timed as `timed`: the host time counts the calls
/// the MoE layer issues beyond its operators ([`moe_launches`] × [`Timer::host_us`]), and the forward pays for its
/// device→host synchronization ([`synced_pass_us`]: what the forward issues before the first expert-parallel
/// collective or expert GEMM is the part before it), HybridEP's two in intervals between them
/// (`two_sync_forward_us`). Under CUDA graphs the host time is mapped as for a dense layer
/// and the synchronization is not modelled. A layer without an MoE router (a dense MTP layer) is timed as a dense
/// one; a recomputed MoE forward (`recompute_modules` `moe`, full recomputation) repeats its forward calls in the
/// backward, and the GPU idles one call after its synchronization.
pub fn layer_seconds(cfg: &TrainingConfig, timer: &Timer, ops: &[StageOp], timed: &[TimedOp]) -> (f64, f64) {
    let launch_us = timer.host_us();
    let graphs = timer.graphs();
    let [(gf, mut hf), (mut gb, mut hb)] = pass_sums(ops, timed);
    // A pass at the pace of the longer of its GPU time and its host time as the CUDA graphs leave it, s.
    let unsynced = |g: f64, h: f64| g.max(graphs.layer_host_us(h, launch_us)) * 1e-6;
    let router = |recompute: bool| {
        // A recomputed forward operator is charged to the backward pass.
        let phase = if recompute { Phase::Bwd } else { Phase::Fwd };
        ops.iter().any(|o| o.name == OpName::MoeRouter && o.phase == phase && o.recompute == recompute)
    };
    let moe = cfg.moe.as_ref().filter(|_| router(false));
    let Some(moe) = moe else { return (unsynced(gf, hf), unsynced(gb, hb)) };
    let l = moe_launches(moe, cfg.tp * cfg.cp, cfg.gemm_precision().bytes() < 2.0);
    hf += l.fwd() as f64 * launch_us;
    hb += l.bwd() as f64 * launch_us;
    if router(true) {
        hb += l.fwd() as f64 * launch_us;
        gb += l.fwd_syncs as f64 * launch_us;
    }
    if graphs != CudaGraphs::None {
        return (unsynced(gf, hf), unsynced(gb, hb));
    }
    // The forward up to the synchronization: every forward operator before the first expert-parallel collective
    // that follows it (all-to-all, reduce-scatter; the allgather dispatcher synchronizes after its all-gather) or
    // the first expert GEMM.
    let split = ops
        .iter()
        .position(|o| {
            o.phase == Phase::Fwd
                && !o.recompute
                && matches!(o.name, OpName::EpAllToAll | OpName::EpReduceScatter | OpName::ExpertFc1)
        })
        .unwrap_or(ops.len());
    let [(pre_g, pre_h), _] = pass_sums(&ops[..split], &timed[..split]);
    let pre_h = pre_h + l.fwd_pre_sync() as f64 * launch_us;
    let fwd = if l.fwd_syncs == 2 {
        two_sync_forward_us(ops, timed, (gf, hf), (pre_g, pre_h), launch_us)
    } else {
        synced_pass_us(l.fwd_syncs, gf, hf, pre_g, hf - pre_h, launch_us)
    };
    (fwd * 1e-6, gb.max(hb) * 1e-6)
}

/// HybridEP's forward of one MoE layer with its two synchronizations ([`super::launches`]), µs, in the two
/// intervals between them ([`SyncInterval`]): from (B) to (A) everything but the dispatch — this layer's
/// permute, experts, combine and unpermute (host `hf − pre_h − D_h`), then the next layer's attention, router and
/// the routing map's all-gather (GPU `pre_g`), whose GPU time t_A the host waits for at (A); from (A) to (B) the
/// dispatch kernel alone, issued by one call (host D_h) and waited for (GPU D). D and D_h are one call of the
/// forward's dispatch collectives (each runs twice, dispatch and combine). `gf`, `hf` the pass's GPU and host
/// time, `pre_g`, `pre_h` those of the part before the dispatch, `launch_us` one call's host time c:
/// max(G − D + c, H − D_h + t_A, h_post + g_pre) + max(D + c, D_h + D); a GPU-bound layer pays exactly c per
/// synchronization.
fn two_sync_forward_us(
    ops: &[StageOp],
    timed: &[TimedOp],
    (gf, hf): (f64, f64),
    (pre_g, pre_h): (f64, f64),
    launch_us: f64,
) -> f64 {
    let forward = |name: OpName| {
        ops.iter().zip(timed).filter(move |(o, _)| o.phase == Phase::Fwd && !o.recompute && o.name == name)
    };
    let (d_g, d_h) =
        forward(OpName::EpAllToAll).fold((0.0, 0.0), |(g, h), (_, t)| (g + t.charged_us, h + t.time.host_us));
    let t_a: f64 = forward(OpName::EpAllGather).map(|(o, t)| o.calls as f64 * t.charged_us).sum();
    let to_a = SyncInterval {
        gpu_us: gf - d_g,
        host_us: hf - d_h,
        pre_gpu_us: pre_g,
        post_host_us: hf - pre_h - d_h,
        tail_gpu_us: t_a,
    };
    let to_b = SyncInterval { gpu_us: d_g, host_us: d_h, pre_gpu_us: d_g, post_host_us: d_h, tail_gpu_us: 0.0 };
    to_a.us(launch_us) + to_b.us(launch_us)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::{Source, Timed};
    use crate::hw::Precision;
    use crate::llm::operators::Work;
    use crate::op::{Collective, OpClass, OpShape};

    /// A forward of attention, HybridEP's routing-map all-gather (263 µs GPU, 1 call), its dispatch and combine
    /// (423 µs each, 2 calls) and the experts, with `attn` and `experts` as (GPU µs, host µs); collectives at
    /// 44.7 µs of host time per call. A backward all-to-all that the forward must ignore.
    fn layer(attn: (f64, f64), experts: (f64, f64)) -> (Vec<StageOp>, Vec<TimedOp>) {
        let group = crate::comm::Group { ranks: 8, nodes: 1, ranks_per_node: 8 };
        let op = |name, phase, calls, (us, host_us): (f64, f64)| {
            let work = match name {
                OpName::EpAllToAll | OpName::EpAllGather => {
                    Work::Collective { collective: Collective::AllToAll, bytes: 1.0, group, active_per_node: 8 }
                }
                _ => Work::Compute {
                    shape: OpShape::new(OpClass::Elementwise, phase, &[1, 1, 1]),
                    dtype: Precision::Bf16,
                },
            };
            let o = StageOp { name, phase, calls, work, features: vec![], recompute: false, overlaps: None };
            let time = Timed { time_us: us, analytic_us: us, source: Source::Analytic, host_us, kernels: 1 };
            (o, TimedOp { time, charged_us: us })
        };
        [
            op(OpName::FlashAttention, Phase::Fwd, 1, attn),
            op(OpName::EpAllGather, Phase::Fwd, 1, (263.0, 44.7)),
            op(OpName::EpAllToAll, Phase::Fwd, 2, (423.0, 44.7)),
            op(OpName::ExpertFc1, Phase::Fwd, 1, experts),
            op(OpName::EpAllToAll, Phase::Bwd, 2, (999.0, 44.7)),
        ]
        .into_iter()
        .unzip()
    }

    #[test]
    fn hybridep_forward_waits_for_the_all_gather_and_the_dispatch_by_hand() {
        // Host-bound: attention 1,000 µs GPU / 2,000 µs host, experts 800 / 1,000. Forward G = 1,000 + 263 +
        // 2·423 + 800 = 2,909 µs, H = 2,000 + 44.7 + 2·44.7 + 1,000 = 3,134.1 µs; before the dispatch
        // g_pre = 1,263, h_pre = 2,044.7; c = 70.1.
        // (B)→(A): max(G − D + c = 2,486 + 70.1 = 2,556.1, H − D_h + t_A = 3,089.4 + 263 = 3,352.4,
        // h_post + g_pre = (3,134.1 − 2,044.7 − 44.7) + 1,263 = 2,307.7) = 3,352.4;
        // (A)→(B): max(D + c = 493.1, D_h + D = 467.7) = 493.1. Forward 3,845.5 µs.
        let (ops, timed) = layer((1000.0, 2000.0), (800.0, 1000.0));
        let fwd = two_sync_forward_us(&ops, &timed, (2909.0, 3134.1), (1263.0, 2044.7), 70.1);
        assert!((fwd - 3845.5).abs() < 1e-9, "{fwd}");
        // With one synchronization the pass ran at its host time, the all-gather and dispatch hidden:
        // max(2,979.1, 3,134.1, 1,089.4 + 1,263 = 2,352.4) = 3,134.1 µs.
        assert!((synced_pass_us(1, 2909.0, 3134.1, 1263.0, 1089.4, 70.1) - 3134.1).abs() < 1e-9);
    }

    #[test]
    fn a_gpu_bound_hybridep_forward_pays_one_launch_per_synchronization() {
        // Attention 3,000 / 500 µs, experts 2,000 / 500 µs: G = 3,000 + 263 + 846 + 2,000 = 6,109 µs, H = 1,134.1 µs,
        // g_pre = 3,263, h_pre = 544.7. (B)→(A): max(5,686 + 70.1, 1,089.4 + 263, 544.7 + 3,263) = 5,756.1;
        // (A)→(B): 493.1. Forward 6,249.2 = G + 2 × 70.1.
        let (ops, timed) = layer((3000.0, 500.0), (2000.0, 500.0));
        let fwd = two_sync_forward_us(&ops, &timed, (6109.0, 1134.1), (3263.0, 544.7), 70.1);
        assert!((fwd - 6249.2).abs() < 1e-9, "{fwd}");
    }
}

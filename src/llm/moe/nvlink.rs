//! HybridEP's dispatch and combine inside one NVLink domain, timed at the rate its own TMA kernels reach rather
//! than as an NCCL all-to-all.
//!
//! HybridEP (`deepseek-ai/DeepEP` `docs/README_Hybrid-EP.md` @ 41cad944) moves tokens inside the NVLink domain
//! with its own kernels ("Intra-node Communication: NVLink-optimized data transfer using Tensor Memory Accelerator
//! (TMA) instructions"), not through NCCL: the α–β pairwise all-to-all derated by the generic network efficiency
//! (a GB200 32-rank dispatch of 250 MB: 31 · 2 µs + 31/32 · 250 MB / 900 GB/s = 331.5 µs, / 0.74 + 50 µs =
//! 498 µs, 503 GB/s) does not time them. NVIDIA measured them on GB200 NVL72 ("GB200 Platform": 4,096 tokens of
//! hidden 7,168, top-8, 8 local experts, random uniform router; "Kernel Only", at 16 and at 32 SMs), algorithm
//! bandwidth in GB/s with the bytes `tests/test_hybrid_ep.py` (`test_hybrid_ep_benchmark`) counts:
//! `dispatched_hidden.numel() * 2`, the tokens the rank receives, one copy per (token, destination rank), times
//! hidden times 2 B — the t·n̄_gpu·d·e bytes of [`super::dispatch`]:
//!
//! | ranks | 16 SMs: dispatch (BF16) | combine | 32 SMs: dispatch (BF16) | combine |
//! |------:|------------------------:|--------:|------------------------:|--------:|
//! |     8 |                  750.15 |  684.27 |                  764.03 |  737.13 |
//! |    16 |                  661.93 |  600.75 |                  706.95 |  666.26 |
//! |    24 |                  637.80 |  565.53 |                  665.97 |  639.80 |
//! |    32 |                  629.79 |  547.25 |                  642.23 |  605.15 |
//! |    36 |                  612.85 |  543.27 |                  632.31 |  596.99 |
//!
//! The SM count is Megatron-Core's `moe_hybridep_num_sms` ([`MoeTraining::hybridep_sms`]): 16 by default
//! (`transformer_config.py`), 32 in NeMo / Megatron-Bridge's performance recipes
//! (`scripts/performance/utils/overrides.py` `_set_common_perf_overrides`: "if
//! recipe.model.moe_flex_dispatcher_backend == "hybridep": recipe.model.moe_hybridep_num_sms = 32"). Both columns
//! are measured; no other SM count is ([`super::parallel::HYBRIDEP_MEASURED_SMS`]). The SMs the kernels hold are
//! not taken from an overlapped computation's rate here (no overlap in perfcast is priced by SM share).
//!
//! On a DGX B200 (8 ranks on NVSwitch, same README, "Only Kernel Time", 16 SMs only) it reached 734.95 / 673.84
//! GB/s, within 2.1 % / 1.5 % of GB200's 8-rank 16-SM row: the rate is the kernel's over an NVLink 5 port, whether
//! the ranks share a baseboard or a rack, so a DGX B200 / B300 at 32 SMs takes GB200's 8-rank 32-SM row.
//! Megatron-Core dispatches the hidden states in BF16 under fp8 training (the [`super::ops`] bytes), the BF16
//! column. The inter-node (RDMA) part of a HybridEP dispatch is [`super::rdma`]'s, at the NIC's rate whatever the
//! SM count.
//!
//! Between measured rank counts the rate is interpolated linearly; beyond 36 ranks (the NVL72 rows' ep 64) the
//! 36-rank rate is kept (the trend flattens: 629.79 → 612.85 at 16 SMs and 642.23 → 632.31 at 32 SMs from 32 to
//! 36 ranks) and below 8 the 8-rank one. Both
//! rates were measured over NVLink 5's 900 GB/s per direction per GPU: on a system whose intra-node link is
//! declared at another datasheet bandwidth they scale with it; a link whose bandwidth is NCCL's achieved one
//! ([`crate::hw::Link::achieved`], e.g. the DGX H100 preset) has no datasheet figure to scale and keeps the
//! NCCL-timed all-to-all.

use super::parallel::{Dispatcher, MoeTraining};
use crate::cost::Source;
use crate::hw::System;
use crate::llm::operators::{OpName, StageOp, Work};
use crate::llm::timing::TimedOp;
use crate::op::Collective;

/// NVLink 5's bandwidth per GPU and direction, GB/s, over which the README's GB200 and B200 rates were measured
/// (GB200 NVL72 datasheet: 1.8 TB/s bidirectional per GPU).
pub const MEASURED_LINK_GBS: f64 = 900.0;

/// README_Hybrid-EP's GB200 rows, kernel only, 16 SMs: (ranks, BF16 dispatch GB/s, combine GB/s) of algorithm
/// bandwidth (see the module doc).
const GB200_KERNEL_GBS_16SM: [(u32, f64, f64); 5] =
    [(8, 750.15, 684.27), (16, 661.93, 600.75), (24, 637.80, 565.53), (32, 629.79, 547.25), (36, 612.85, 543.27)];

/// README_Hybrid-EP's GB200 rows, kernel only, 32 SMs: (ranks, BF16 dispatch GB/s, combine GB/s) of algorithm
/// bandwidth (see the module doc).
const GB200_KERNEL_GBS_32SM: [(u32, f64, f64); 5] =
    [(8, 764.03, 737.13), (16, 706.95, 666.26), (24, 665.97, 639.80), (32, 642.23, 605.15), (36, 632.31, 596.99)];

/// HybridEP's algorithm bandwidth (dispatch, combine), GB/s, among `ranks` ranks of one NVLink domain whose link
/// carries `link_gbs` per GPU and direction, its kernels on `sms` SMs: the README's GB200 rates of that SM count
/// (32 → the 32-SM rows; 16, the only other count [`super::parallel::resolve`] lets through → the 16-SM rows)
/// interpolated linearly in the rank count, held at the ends (8 and 36 ranks), scaled by `link_gbs` /
/// [`MEASURED_LINK_GBS`].
pub fn hybridep_nvl_gbs(ranks: u32, link_gbs: f64, sms: u32) -> (f64, f64) {
    let r = ranks as f64;
    let t = if sms == 32 { &GB200_KERNEL_GBS_32SM } else { &GB200_KERNEL_GBS_16SM };
    let (d, c) = if r <= t[0].0 as f64 {
        (t[0].1, t[0].2)
    } else if r >= t[t.len() - 1].0 as f64 {
        (t[t.len() - 1].1, t[t.len() - 1].2)
    } else {
        let i = t.iter().position(|row| row.0 as f64 >= r).unwrap_or(t.len() - 1).max(1);
        let (lo, hi) = (t[i - 1], t[i]);
        let w = (r - lo.0 as f64) / (hi.0 - lo.0) as f64;
        (lo.1 + w * (hi.1 - lo.1), lo.2 + w * (hi.2 - lo.2))
    };
    let scale = link_gbs / MEASURED_LINK_GBS;
    (d * scale, c * scale)
}

/// Time of one call of HybridEP's NVLink transfer, µs, a dispatch or a combine (the operator counts both, `calls`
/// 2 per pass, at one time each): the mean of `bytes` (the rank's received tokens × hidden × 2 B, as the README
/// counts them) at the dispatch's and at the combine's [`hybridep_nvl_gbs`] on `sms` SMs. 0 for one rank or no
/// bandwidth.
pub fn hybridep_nvl_call_us(bytes: f64, ranks: u32, link_gbs: f64, sms: u32) -> f64 {
    if ranks <= 1 || link_gbs <= 0.0 {
        return 0.0;
    }
    let (dispatch, combine) = hybridep_nvl_gbs(ranks, link_gbs, sms);
    let at = |gbs: f64| bytes / (gbs * 1e9) * 1e6;
    (at(dispatch) + at(combine)) / 2.0
}

/// Whether `o` is HybridEP's NVLink transfer: the expert-parallel all-to-all within one node (the whole dispatch
/// inside one NVLink domain, or the forwarding beside the RDMA part across nodes, [`super::dispatch`]).
fn nvl_part(o: &StageOp) -> Option<(f64, u32)> {
    match o.work {
        Work::Collective { collective: Collective::AllToAll, bytes, group, .. }
            if o.name == OpName::EpAllToAll && group.nodes == 1 && group.ranks_per_node > 1 =>
        {
            Some((bytes, group.ranks))
        }
        _ => None,
    }
}

/// Retimes HybridEP's NVLink transfers among `ops` (timed as `timed`) at its kernels' rate over `system`'s
/// intra-node link on the request's SMs ([`hybridep_nvl_call_us`], [`MoeTraining::hybridep_sms`]) where that
/// link is a datasheet figure; other dispatchers, and links
/// that carry NCCL's achieved bandwidth, are left as timed. The charge of an operator overlapping another is left
/// to [`super::rdma::recharge_overlaps`], which [`super::timing::time_layer`] runs when this returns true.
/// Returns whether anything was retimed.
pub fn apply_hybridep_nvl(moe: &MoeTraining, system: &System, ops: &[StageOp], timed: &mut [TimedOp]) -> bool {
    if moe.dispatcher != Dispatcher::Hybridep || system.intra_node.achieved {
        return false;
    }
    let mut changed = false;
    for (o, t) in ops.iter().zip(timed.iter_mut()) {
        if let Some((bytes, ranks)) = nvl_part(o) {
            let us = hybridep_nvl_call_us(bytes, ranks, system.intra_node.bandwidth_gbs, moe.hybridep_sms());
            t.time.time_us = us;
            t.time.analytic_us = us;
            t.time.source = Source::Analytic;
            t.charged_us = us;
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_rates_at_and_between_measured_rank_counts() {
        // At a measured count the README's row itself (900 GB/s: NVLink 5, as measured).
        assert_eq!(hybridep_nvl_gbs(32, 900.0, 16), (629.79, 547.25));
        assert_eq!(hybridep_nvl_gbs(8, 900.0, 16), (750.15, 684.27));
        // 28 ranks: halfway between 24 and 32: (637.80 + 629.79)/2 = 633.795, (565.53 + 547.25)/2 = 556.39.
        let (d, c) = hybridep_nvl_gbs(28, 900.0, 16);
        assert!((d - 633.795).abs() < 1e-9 && (c - 556.39).abs() < 1e-9, "{d} {c}");
        // 64 ranks (beyond the table) keeps the 36-rank row; 4 ranks the 8-rank row.
        assert_eq!(hybridep_nvl_gbs(64, 900.0, 16), (612.85, 543.27));
        assert_eq!(hybridep_nvl_gbs(4, 900.0, 16), (750.15, 684.27));
        // A 450 GB/s link halves both: 629.79 / 2 = 314.895, 547.25 / 2 = 273.625.
        let (d, c) = hybridep_nvl_gbs(32, 450.0, 16);
        assert!((d - 314.895).abs() < 1e-9 && (c - 273.625).abs() < 1e-9, "{d} {c}");
    }

    #[test]
    fn qwen3_235b_dispatch_on_32_gb200_ranks_by_hand() {
        // Qwen3-235B-A22B at ep 32 (4 of 128 experts per rank, top-8), micro-batch 1 of 4,096 tokens, hidden 4,096:
        // a token reaches n̄ = 32·(1 − C(124,8)/C(128,8)) ranks; C(124,8)/C(128,8) = Π_{i<8} (124 − i)/(128 − i)
        // = 0.770020 → n̄ = 7.359370. Received bytes 4096 · 7.359370 · 4096 · 2 B = 246,939,480 B (before the load
        // factor). Dispatch at 629.79 GB/s: 392.098 µs; combine at 547.25 GB/s: 451.237 µs; one call at their
        // mean 421.668 µs (the NCCL α–β path derated: (31·2 + 31/32 · 246,939,480 / 900e9 s) / 0.74 + 50 =
        // (62 + 265.80) / 0.74 + 50 = 492.98 µs).
        let bytes = 4096.0 * 7.359370 * 4096.0 * 2.0;
        assert!((bytes - 246_939_480.0f64).abs() < 1.0, "{bytes}");
        let us = hybridep_nvl_call_us(bytes, 32, 900.0, 16);
        let hand = (bytes / 629.79e9 + bytes / 547.25e9) / 2.0 * 1e6;
        assert!((us - hand).abs() < 1e-9, "{us}");
        assert!((us - 421.668).abs() < 0.001, "{us}");
        assert_eq!(hybridep_nvl_call_us(bytes, 1, 900.0, 16), 0.0);
        // The same call on 32 SMs (Megatron-Bridge's performance recipes): the README's 32-rank 32-SM row.
        // Dispatch 246,939,480 B / 642.23 GB/s = 384.503 µs; combine / 605.15 GB/s = 408.063 µs; one call at their
        // mean (384.503 + 408.063) / 2 = 396.283 µs, 6.0 % below the 16-SM 421.668 µs.
        let us32 = hybridep_nvl_call_us(bytes, 32, 900.0, 32);
        assert!((us32 - 396.283).abs() < 0.001, "{us32}");
        assert!((us32 / us - 0.93980).abs() < 1e-4, "{}", us32 / us);
    }

    #[test]
    fn the_32_sm_rows_at_and_between_measured_rank_counts() {
        // README_Hybrid-EP's GB200 32-SM rows as measured: 8 ranks 764.03 / 737.13, 36 ranks 632.31 / 596.99
        // (also what 64 ranks keeps, and 4 ranks the 8-rank row).
        assert_eq!(hybridep_nvl_gbs(8, 900.0, 32), (764.03, 737.13));
        assert_eq!(hybridep_nvl_gbs(64, 900.0, 32), (632.31, 596.99));
        assert_eq!(hybridep_nvl_gbs(4, 900.0, 32), (764.03, 737.13));
        // 12 ranks: halfway between 8 and 16: (764.03 + 706.95)/2 = 735.49, (737.13 + 666.26)/2 = 701.695.
        let (d, c) = hybridep_nvl_gbs(12, 900.0, 32);
        assert!((d - 735.49).abs() < 1e-9 && (c - 701.695).abs() < 1e-9, "{d} {c}");
    }

    #[test]
    fn only_hybridep_over_a_datasheet_link_is_retimed() {
        use crate::comm::Group;
        use crate::cost::Timed;
        use crate::llm::operators::collective;
        use crate::op::Phase;
        let find = |name: &str| crate::hw::presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap();
        let moe = MoeTraining::balanced(crate::llm::moe::spec::qwen3_235b_a22b(), (32, 1, 1), Dispatcher::Hybridep);
        let nvl = Group { ranks: 32, nodes: 1, ranks_per_node: 32 };
        let rdma = Group { ranks: 4, nodes: 4, ranks_per_node: 1 };
        let ops = vec![
            collective(OpName::EpAllToAll, Phase::Fwd, 2, Collective::AllToAll, 2e8, nvl, 32, vec![]),
            collective(OpName::EpAllToAll, Phase::Fwd, 2, Collective::AllToAll, 1e8, rdma, 32, vec![]),
        ];
        let as_timed = |us: f64| TimedOp {
            time: Timed { time_us: us, analytic_us: us, source: Source::Analytic, host_us: 0.0, kernels: 1 },
            charged_us: us,
        };
        // GB200 NVL72 (NVLink 5 datasheet 900 GB/s): 2e8 B at 629.79 and 547.25 GB/s: 317.566 and 365.464 µs,
        // one call 341.515 µs; the RDMA part (across nodes) is not this module's.
        let mut timed = vec![as_timed(500.0), as_timed(800.0)];
        assert!(apply_hybridep_nvl(&moe, &find("gb200-nvl72"), &ops, &mut timed));
        assert!((timed[0].time.time_us - 341.515).abs() < 1e-3, "{}", timed[0].time.time_us);
        assert_eq!(timed[0].charged_us, timed[0].time.time_us);
        assert_eq!(timed[1].time.time_us, 800.0);
        // With moe_hybridep_num_sms 32: 2e8 B at 642.23 and 605.15 GB/s: 311.415 and 330.497 µs, one call 320.956 µs.
        let sms32 = MoeTraining { hybridep_num_sms: Some(32), ..moe.clone() };
        let mut timed32 = vec![as_timed(500.0), as_timed(800.0)];
        assert!(apply_hybridep_nvl(&sms32, &find("gb200-nvl72"), &ops, &mut timed32));
        assert!((timed32[0].time.time_us - 320.956).abs() < 1e-3, "{}", timed32[0].time.time_us);
        assert_eq!(timed32[1].time.time_us, 800.0);
        // DGX H100's NVSwitch carries NCCL's achieved 350 GB/s (no datasheet figure to scale): left as timed; so is
        // the all-to-all dispatcher's NCCL collective on GB200.
        let mut h100 = vec![as_timed(500.0), as_timed(800.0)];
        assert!(!apply_hybridep_nvl(&moe, &find("dgx-h100"), &ops, &mut h100));
        assert_eq!(h100[0].time.time_us, 500.0);
        let nccl = MoeTraining { dispatcher: Dispatcher::Alltoall, ..moe };
        let mut a2a = vec![as_timed(500.0), as_timed(800.0)];
        assert!(!apply_hybridep_nvl(&nccl, &find("gb200-nvl72"), &ops, &mut a2a));
        assert_eq!(a2a[0].time.time_us, 500.0);
    }
}

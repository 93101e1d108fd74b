//! The inter-node (RDMA) transfer of the flex dispatchers, DeepEP and HybridEP, timed at the rate their own
//! kernels reach rather than at NCCL's.
//!
//! Across nodes DeepEP's normal kernels and HybridEP send each token once to each distinct node its experts live
//! on, GPU-initiated RDMA writes from each GPU through its own NIC to the GPU of the same rail on the other node,
//! which forwards it over NVLink ([`super::dispatch`]: the RDMA part moves t·n̄_node·d·e·γ bytes per GPU, node
//! copies counted with the GPU's own node as the kernels' benchmarks count them, of which the (N − 1)/N share
//! bound for the other N − 1 nodes crosses the NIC). These are not NCCL collectives: the calibrated or learned
//! NCCL all-to-all (a 1-GPU-per-node all-to-all of the H100 cluster moves about 36 GB/s per pair) does not time
//! them. Their vendors measure them kernel by kernel:
//!
//! - HybridEP (`deepseek-ai/DeepEP` `docs/README_Hybrid-EP.md`, "H100 Platform", 4,096 tokens of hidden 7,168,
//!   top-8, 8 local experts, 8 GPUs per node; "Kernel Only", 16 SMs — Megatron-Core's default
//!   `moe_hybridep_num_sms = 16`): algorithm bandwidth (bytes as `tests/test_hybrid_ep.py` counts them,
//!   `count_rdma_send_from_routing_map`: tokens × distinct nodes, the own node included, × hidden × 2 B)
//!   dispatch BF16 / combine at 32 ranks (4 nodes) 57.69 / 57.46 GB/s, at 64 ranks (8 nodes) 49.97 / 49.77 GB/s.
//!   Per byte through the NIC: 57.69 · 3/4 = 43.27, 57.46 · 3/4 = 43.10, 49.97 · 7/8 = 43.72, 49.77 · 7/8 = 43.55
//!   GB/s of the ConnectX-7's 400 Gb/s = 50 GB/s;
//! - DeepEP's normal kernels (`deepseek-ai/DeepEP` README, now `docs/legacy.md`: H800, ConnectX-7 400 Gb/s,
//!   4,096 tokens, hidden 7,168, top-8, FP8 dispatch / BF16 combine; "RDMA" bottleneck bandwidth counted the
//!   same way): EP 32 58 / 57 GB/s, EP 64 51 / 50 GB/s → 43.5 / 42.75 and 44.6 / 43.75 GB/s through the NIC.
//!
//! From 4 nodes on, both kernels move 0.86–0.89 of the NIC's line rate: [`FLEX_RDMA_EFFICIENCY`] (HybridEP's
//! 4-node pair, the configuration closest to the 256-GPU H100 recipes' ep 32). The NVLink forwarding runs
//! beside it ([`super::dispatch::DispatchComm::beside_previous`]).
//!
//! On 2 nodes both kernels stay below that rate, each by its own measure — a limit of each kernel's own pipeline
//! that the two implementations do not share. HybridEP measured it on H100 itself (16 ranks, 16 SMs, kernel only:
//! 71.71 / 62.95 GB/s algorithm bandwidth, 35.86 / 31.48 GB/s through the NIC, 0.7171 / 0.6295 of the line rate),
//! so a HybridEP transfer between 2 nodes is timed at those rates ([`nic_efficiency`]), dispatch and combine each
//! at its own. Megatron-Core runs HybridEP on `moe_hybridep_num_sms` = 16 SMs by default (`transformer_config.py`),
//! the row read here; at 16 ranks the README's 8-SM row is no slower (76.80 / 68.00 GB/s), so the rate is the
//! kernel's, not its SM budget's. DeepEP's EP 16 figure (43 / 43 GB/s, 21.5 through the NIC) was measured on H800,
//! whose NVLink forwarding (3.3 local GPUs per token and node at ~160 GB/s) bounds it there and not on H100's 2.25×
//! faster NVLink: not carried over; DeepEP keeps the NIC rate on 2 nodes.

use super::parallel::{Dispatcher, MoeTraining};
use crate::comm::{Group, GroupLinks};
use crate::cost::Source;
use crate::hw::System;
use crate::llm::operators::{OpName, StageOp, Work};
use crate::llm::timing::{overlap_charge, TimedOp};
use crate::op::Collective;

/// The fraction of a GPU's NIC line rate the flex dispatchers' inter-node kernels move through it (see the module
/// doc): HybridEP on 4 DGX H100 nodes, kernel only, 16 SMs, dispatch 57.69 and combine 57.46 GB/s algorithm
/// bandwidth → 3/4 of it off the node: 43.27 and 43.10 GB/s of 50 GB/s = 0.8654 and 0.8619, mean 0.864.
pub const FLEX_RDMA_EFFICIENCY: f64 = 0.864;

/// The fractions of a GPU's NIC line rate (dispatch, combine) that `dispatcher`'s inter-node kernels move through
/// it among `nodes` nodes, as their vendors measured them with ConnectX-7 at 400 Gb/s = 50 GB/s (see the module
/// doc): HybridEP on 2 DGX H100 nodes (`docs/README_Hybrid-EP.md`, 16 ranks, 16 SMs, kernel only, BF16 dispatch
/// 71.71 and combine 62.95 GB/s algorithm bandwidth, half of it off the node: 35.855 / 50 = 0.7171 and
/// 31.475 / 50 = 0.6295); otherwise — HybridEP from 4 nodes on, DeepEP everywhere — [`FLEX_RDMA_EFFICIENCY`] both
/// ways.
pub fn nic_efficiency(dispatcher: Dispatcher, nodes: u32) -> (f64, f64) {
    // README_Hybrid-EP, H100, 2 nodes: algorithm bandwidth (GB/s), half of it through the 50 GB/s NIC.
    const DISPATCH_ALG_GBS: f64 = 71.71;
    const COMBINE_ALG_GBS: f64 = 62.95;
    const NIC_GBS: f64 = 50.0;
    match (dispatcher, nodes) {
        (Dispatcher::Hybridep, 2) => (DISPATCH_ALG_GBS / 2.0 / NIC_GBS, COMBINE_ALG_GBS / 2.0 / NIC_GBS),
        _ => (FLEX_RDMA_EFFICIENCY, FLEX_RDMA_EFFICIENCY),
    }
}

/// Time of one call of `dispatcher`'s RDMA transfer, µs, a dispatch or a combine (the operator counts both,
/// `calls` 2 per pass, at one time each): the mean of the dispatch's and the combine's time, each the
/// (N − 1)/N share of `bytes` leaving the node at its [`nic_efficiency`] × `line_gbs`. 0 for one node or no
/// bandwidth.
pub fn flex_rdma_call_us(dispatcher: Dispatcher, bytes: f64, nodes: u32, line_gbs: f64) -> f64 {
    if nodes <= 1 || line_gbs <= 0.0 {
        return 0.0;
    }
    let (dispatch, combine) = nic_efficiency(dispatcher, nodes);
    let off_node = (nodes as f64 - 1.0) / nodes as f64 * bytes;
    let at = |e: f64| off_node / (e * line_gbs * 1e9) * 1e6;
    (at(dispatch) + at(combine)) / 2.0
}

/// Whether `o` is the RDMA part of a flex dispatcher's inter-node dispatch or combine: the expert-parallel
/// all-to-all among the nodes, one rank per node ([`super::dispatch::dispatch_comm`]).
fn is_flex_rdma(o: &StageOp) -> Option<(f64, Group, u32)> {
    match o.work {
        Work::Collective { collective: Collective::AllToAll, bytes, group, active_per_node }
            if o.name == OpName::EpAllToAll && group.nodes > 1 && group.ranks_per_node == 1 =>
        {
            Some((bytes, group, active_per_node))
        }
        _ => None,
    }
}

/// Retimes the RDMA parts of a DeepEP or HybridEP layer's `ops` (timed as `timed`) at the kernels' rate over
/// `system`'s NICs ([`flex_rdma_call_us`]; the line rate is the system's per-GPU NIC share, [`GroupLinks::on`]) and
/// recharges the operators that overlap them (the NVLink forwarding beside each) with contention `kappa`. Other
/// dispatchers and single-node layers are left as timed.
pub fn apply_flex_rdma(moe: &MoeTraining, system: &System, ops: &[StageOp], timed: &mut [TimedOp], kappa: f64) {
    if !matches!(moe.dispatcher, Dispatcher::Deepep | Dispatcher::Hybridep) {
        return;
    }
    let mut changed = false;
    for (o, t) in ops.iter().zip(timed.iter_mut()) {
        if let Some((bytes, group, active)) = is_flex_rdma(o) {
            let line = GroupLinks::on(system, active).inter_gbs_per_gpu;
            let us = flex_rdma_call_us(moe.dispatcher, bytes, group.nodes, line);
            t.time.time_us = us;
            t.time.analytic_us = us;
            t.time.source = Source::Analytic;
            t.charged_us = us;
            changed = true;
        }
    }
    if changed {
        recharge_overlaps(ops, timed, kappa);
    }
}

/// Recharges what overlaps another operator among `ops`, as `time_ops` does, against the partners' current times
/// in `timed` (after a retiming: [`apply_flex_rdma`], [`super::nvlink::apply_hybridep_nvl`]), with contention
/// `kappa`.
pub fn recharge_overlaps(ops: &[StageOp], timed: &mut [TimedOp], kappa: f64) {
    let times: Vec<f64> = timed.iter().map(|t| t.time.time_us).collect();
    for (i, o) in ops.iter().enumerate() {
        let Some(ov) = o.overlaps else { continue };
        let partner = ops
            .iter()
            .zip(&times)
            .find(|(p, _)| p.name == ov.with && p.phase == o.phase && p.recompute == o.recompute)
            .map_or(0.0, |(_, &pt)| pt);
        timed[i].charged_us = overlap_charge(times[i], ov.exposed(times[i], partner), kappa);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Time of one flex RDMA transfer at [`FLEX_RDMA_EFFICIENCY`] both ways, µs ([`flex_rdma_call_us`] of DeepEP, whose
    /// rate is that one on any number of nodes).
    fn flex_rdma_us(bytes: f64, nodes: u32, line_gbs: f64) -> f64 {
        flex_rdma_call_us(Dispatcher::Deepep, bytes, nodes, line_gbs)
    }

    #[test]
    fn qwen3_30b_on_two_dgx_h100_nodes_by_hand() {
        // Qwen3-30B-A3B (hidden 2048, top-8 of 128 experts) at ep 16 over 2 DGX H100 nodes, micro-batch 1 of 4,096
        // tokens, forced balance γ = 1.012 (load factor of `MoeTraining`, not needed here: bytes given). A token
        // reaches n̄_node = 2·(1 − C(64,8)/C(128,8)) nodes; C(64,8)/C(128,8) = Π_{i<8} (64 − i)/(128 − i)
        // = 0.0030959 → n̄_node = 1.993808. Node copies: 4096 · 1.993808 · 2048 · 2 B · 1.012 = 33,851,956 B.
        let bytes = 4096.0 * 1.993808 * 2048.0 * 2.0 * 1.012;
        assert!((bytes - 33_851_956.0f64).abs() < 20.0, "{bytes}");
        // Half crosses the NIC: 16,925,978 B. At the 4-node rate 0.864 · 50 GB/s = 43.2 GB/s that would be
        // 391.80 µs per dispatch or combine (NCCL's learned all-to-all answered 414 µs here).
        let us = flex_rdma_us(bytes, 2, 50.0);
        assert!((us - 16_925_978.0 / 43.2e9 * 1e6).abs() < 0.01, "{us}");
        assert!((us - 391.80).abs() < 0.01, "{us}");
        assert_eq!(flex_rdma_us(bytes, 1, 50.0), 0.0);
        // HybridEP's own 2-node rates (README_Hybrid-EP, 16 ranks, 16 SMs, kernel only): dispatch 71.71 GB/s
        // algorithm bandwidth → 35.855 GB/s through the NIC: 16,925,978 / 35.855e9 s = 472.07 µs; combine 62.95 →
        // 31.475 GB/s: 537.76 µs. One call (dispatch or combine) at their mean: 504.91 µs, 1.289 × the 4-node rate.
        let call = flex_rdma_call_us(Dispatcher::Hybridep, bytes, 2, 50.0);
        assert!((call - 504.91).abs() < 0.01, "{call}");
        assert_eq!(flex_rdma_call_us(Dispatcher::Hybridep, bytes, 1, 50.0), 0.0);
        // DeepEP keeps the 4-node NIC rate on 2 nodes (its EP 16 figure is H800's NVLink bound): 391.80 µs; from
        // 4 nodes on HybridEP too.
        let deepep = flex_rdma_call_us(Dispatcher::Deepep, bytes, 2, 50.0);
        assert!((deepep - 391.80).abs() < 0.01, "{deepep}");
        assert_eq!(flex_rdma_call_us(Dispatcher::Hybridep, bytes, 4, 50.0), flex_rdma_us(bytes, 4, 50.0));
        assert_eq!(nic_efficiency(Dispatcher::Hybridep, 8), (0.864, 0.864));
    }

    #[test]
    fn a_hybridep_layer_retimes_its_rdma_part_and_recharges_the_nvlink_forwarding_beside_it() {
        use crate::cost::Timed;
        use crate::llm::operators::{collective, Overlap};
        use crate::op::Phase;
        let system = crate::hw::presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap();
        // DGX H100: 8 ConnectX-7 at 400 Gb/s per node, 8 GPUs communicating: 50 GB/s each.
        assert_eq!(GroupLinks::on(&system, 8).inter_gbs_per_gpu, 50.0);
        let moe = MoeTraining::balanced(crate::llm::moe::spec::qwen3_235b_a22b(), (16, 1, 1), Dispatcher::Hybridep);
        // The RDMA part, 1e8 B of node copies among 2 nodes, and the NVLink forwarding beside it (3,000 µs).
        let rdma = Group { ranks: 2, nodes: 2, ranks_per_node: 1 };
        let nvl = Group { ranks: 8, nodes: 1, ranks_per_node: 8 };
        let mut ops = vec![
            collective(OpName::EpAllToAll, Phase::Fwd, 2, Collective::AllToAll, 1e8, rdma, 8, vec![]),
            collective(OpName::EpAllToAll, Phase::Fwd, 2, Collective::AllToAll, 3e8, nvl, 8, vec![]),
        ];
        ops[1].overlaps = Some(Overlap { with: OpName::EpAllToAll, chunks: 1, wgrad_only: false });
        let timed_as = |us: f64, charged: f64| TimedOp {
            time: Timed { time_us: us, analytic_us: us, source: Source::Analytic, host_us: 0.0, kernels: 1 },
            charged_us: charged,
        };
        let mut timed = vec![timed_as(500.0, 500.0), timed_as(3000.0, 2500.0)];
        apply_flex_rdma(&moe, &system, &ops, &mut timed, 0.0);
        // Half of 1e8 B leaves the node at HybridEP's 2-node rates: dispatch 5e7 / 35.855e9 s = 1,394.506 µs,
        // combine 5e7 / 31.475e9 s = 1,588.562 µs, one call at their mean 1,491.534 µs; the forwarding is exposed
        // for 3,000 − 1,491.534 = 1,508.466 µs.
        assert!((timed[0].time.time_us - 1491.534).abs() < 1e-3, "{}", timed[0].time.time_us);
        assert_eq!(timed[0].charged_us, timed[0].time.time_us);
        assert!((timed[1].charged_us - 1508.466).abs() < 1e-3, "{}", timed[1].charged_us);
        assert_eq!(timed[1].time.time_us, 3000.0);
        // The all-to-all dispatcher's NCCL collective is left as timed.
        let nccl = MoeTraining { dispatcher: Dispatcher::Alltoall, ..moe };
        let mut again = vec![timed_as(500.0, 500.0), timed_as(3000.0, 2500.0)];
        apply_flex_rdma(&nccl, &system, &ops, &mut again, 0.0);
        assert_eq!((again[0].time.time_us, again[1].charged_us), (500.0, 2500.0));
    }

    #[test]
    fn the_efficiency_reproduces_the_vendor_rates_it_is_read_from() {
        // HybridEP, 32 ranks on 4 DGX H100 nodes, 4,096 tokens of hidden 7,168 (bf16), top-8 of 256 experts
        // (8 per rank): n̄_node = 4·(1 − C(192,8)/C(256,8)); C(192,8)/C(256,8) = Π_{i<8} (192 − i)/(256 − i)
        // = 0.096446 → 3.614214 nodes. Node copies 4096 · 3.614214 · 14,336 B = 212,227,584 B. At the README's
        // 57.69 GB/s (dispatch) that is 3,678.8 µs; at the NIC rate 3/4 · 212,227,584 / 43.2e9 = 3,684.5 µs
        // (0.16 % longer: 0.864 is the mean of dispatch's 0.8654 and combine's 0.8619).
        let bytes = 4096.0 * 3.614214 * 14_336.0;
        let readme_us = bytes / 57.69e9 * 1e6;
        let us = flex_rdma_us(bytes, 4, 50.0);
        assert!((us - 0.75 * bytes / 43.2e9 * 1e6).abs() < 1e-6);
        assert!((us / readme_us - 1.0).abs() < 0.002, "{us} vs {readme_us}");
        // 64 ranks on 8 nodes (README 49.97 GB/s): the NIC rate gives 7/8 · bytes / 43.2 GB/s = bytes / 49.37 GB/s
        // (43.2 · 8/7 = 49.371), 1.2 % slower than measured.
        let b8 = 1.0e8;
        let alg = b8 / (flex_rdma_us(b8, 8, 50.0) * 1e-6) / 1e9;
        assert!((alg - 43.2 * 8.0 / 7.0).abs() < 1e-9 && (alg / 49.97 - 1.0).abs() < 0.013, "{alg}");
    }
}

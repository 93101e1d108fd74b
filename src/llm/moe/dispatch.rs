//! The token dispatcher's communication for one MoE layer and micro-batch on one GPU: which collectives, how many
//! bytes, over which group — the dispatch and combine of the forward pass (the backward pass sends the same bytes
//! the other way: the dispatch's gradient is a combine and vice versa, `token_dispatcher.py`, `fused_a2a.py`).
//!
//! With t tokens entering the layer on the GPU (b·s/(cp·tp) under sequence parallelism), K routed experts per
//! token, hidden d, e bytes per element (16-bit activations) and the busiest rank's load factor γ
//! ([`super::parallel::MoeTraining::load_factor`]):
//! - `allgather` (`MoEAllGatherTokenDispatcher`): an all-gather of the hidden states over the tp·ep group
//!   (etp·ep·t·d·e gathered) and its reduce-scatter in the combine;
//! - `alltoall` (`MoEAlltoAllTokenDispatcher`): an all-to-all over the ep group of each rank's t·K permuted copies,
//!   t·K·d·e·γ bytes per rank per direction (the busiest rank receives γ× the mean; NCCL's all-to-all moves each
//!   rank's (p − g)/p share over its NIC and the (g − 1)/p share over NVLink), then with etp > 1 an all-gather over
//!   the etp group of the etp·t·K·γ copies received (reduce-scatter in the combine);
//! - `deepep` / `hybridep` (`MoEFlexTokenDispatcher`): each token goes once to each distinct GPU its experts live
//!   on, n̄_gpu of them ([`super::routing::distinct_bins`]), and across nodes once to each distinct node, n̄_node
//!   (DeepEP's internode kernels send a token over RDMA once per destination node and forward it over NVLink
//!   inside it; DeepEP README). Within one node: one all-to-all of t·n̄_gpu·etp·d·e·γ bytes. Across nodes: the RDMA
//!   all-to-all among the nodes, t·n̄_node·d·e·γ bytes per GPU through its NIC share, and the NVLink forwarding of
//!   t·n̄_gpu·etp·d·e·γ bytes inside the node concurrently, charged only where it outlasts the RDMA part. The
//!   RDMA part is timed at the kernels' own rate ([`super::rdma`]), not as an NCCL all-to-all.
//!
//! HybridEP also all-gathers the routing map before its dispatch ([`routing_map_gather`]): forward only. Its
//! all-to-all inside one node (NVLink domain) is retimed at its TMA kernels' measured rate ([`super::nvlink`]).

use super::layout::MoeLayout;
use super::parallel::{Dispatcher, MoeTraining};
use super::routing::distinct_bins;
use crate::comm::Group;
use crate::op::Collective;

/// One collective of the dispatcher, per forward pass (dispatch and combine together: `calls` of them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DispatchComm {
    /// `EP_Alltoall`, `EP_Allgather` or `EP_Reduce_Scatter`.
    pub name: crate::llm::operators::OpName,
    pub collective: Collective,
    /// Bytes as nccl-tests counts them (all-to-all: the rank's send buffer; all-gather: the gathered total).
    pub bytes: f64,
    pub group: Group,
    /// Calls per forward pass (2: the dispatch and the combine).
    pub calls: u32,
    /// Runs beside the preceding collective of the list (DeepEP's NVLink forwarding beside its RDMA transfer):
    /// only its excess over one call of that one is charged.
    pub beside_previous: bool,
}

/// The dispatcher's collectives for `tokens` tokens entering the MoE layer on one GPU (see the module doc).
pub fn dispatch_comm(
    moe: &MoeTraining,
    ml: &MoeLayout,
    tokens: u64,
    hidden: u64,
    elem_bytes: f64,
) -> Vec<DispatchComm> {
    use crate::llm::operators::OpName;
    let c = &moe.config;
    let (t, d, k) = (tokens as f64, hidden as f64, c.top_k as f64);
    let load = moe.load_factor();
    let token_bytes = d * elem_bytes;
    let mut out = Vec::with_capacity(3);
    let mut push = |name, collective, bytes: f64, group: Group, beside_previous| {
        if group.ranks > 1 {
            out.push(DispatchComm { name, collective, bytes, group, calls: 2, beside_previous });
        }
    };
    match moe.dispatcher {
        Dispatcher::Allgather => {
            let bytes = ml.tp_ep_group.ranks as f64 * t * token_bytes;
            push(OpName::EpAllGather, Collective::AllGather, bytes, ml.tp_ep_group, false);
        }
        Dispatcher::Alltoall => {
            let copies = t * k * if moe.pad_to_capacity { moe.capacity_factor.unwrap_or(1.0) } else { 1.0 };
            let a2a = copies * token_bytes * if moe.pad_to_capacity { 1.0 } else { load };
            push(OpName::EpAllToAll, Collective::AllToAll, a2a, ml.ep_group, false);
            let received = moe.etp as f64 * t * k * load * token_bytes;
            push(OpName::EpAllGather, Collective::AllGather, received, ml.etp_group, false);
        }
        Dispatcher::Deepep | Dispatcher::Hybridep => {
            let (g, gk) = (c.router_groups, c.router_group_top_k);
            let gpus = distinct_bins(c.experts, c.top_k, moe.ep, g, gk) * moe.etp as f64;
            let nvl = t * gpus * token_bytes * load;
            let ep_nodes = ml.tp_ep_group.nodes;
            if ep_nodes <= 1 {
                push(OpName::EpAllToAll, Collective::AllToAll, nvl, ml.tp_ep_group, false);
            } else {
                let nodes = distinct_bins(c.experts, c.top_k, ep_nodes, g, gk);
                let rdma = Group { ranks: ep_nodes, nodes: ep_nodes, ranks_per_node: 1 };
                push(OpName::EpAllToAll, Collective::AllToAll, t * nodes * token_bytes * load, rdma, false);
                let per_node = ml.tp_ep_group.ranks_per_node;
                let local = Group { ranks: per_node, nodes: 1, ranks_per_node: per_node };
                push(OpName::EpAllToAll, Collective::AllToAll, nvl, local, true);
            }
        }
    }
    out
}

/// HybridEP's all-gather of the routing map over the expert-parallel (tp·ep) group before each dispatch, for
/// `tokens` tokens entering the MoE layer on one GPU: each rank contributes its [tokens, experts] boolean map
/// (one byte per entry), so ranks·tokens·experts bytes are gathered (nccl-tests' count). DeepEP's `hybrid_ep`
/// `HybridEPBuffer.dispatch_with_permute` (`deep_ep/hybrid_ep_buffer.py`) runs `metadata_preprocessing`, which
/// `all_gather_into_tensor`s the routing map (NCCL across nodes; within one node its NVLink kernel,
/// `csrc/hybrid_ep/extension/allgather.cu`) and derives the dispatch's and permute's layout from the global map.
/// Forward only: the combine's backward reuses the dispatch's `handle`. `calls` is 1. None without communication
/// (a single-rank group) or for another dispatcher.
pub fn routing_map_gather(moe: &MoeTraining, ml: &MoeLayout, tokens: u64) -> Option<DispatchComm> {
    use crate::llm::operators::OpName;
    let group = ml.tp_ep_group;
    if moe.dispatcher != Dispatcher::Hybridep || group.ranks <= 1 {
        return None;
    }
    let bytes = group.ranks as f64 * tokens as f64 * moe.config.experts as f64;
    Some(DispatchComm {
        name: OpName::EpAllGather,
        collective: Collective::AllGather,
        bytes,
        group,
        calls: 1,
        beside_previous: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::moe::spec::qwen3_235b_a22b;

    fn qwen235(ep: u32, dispatcher: Dispatcher) -> MoeTraining {
        MoeTraining::balanced(qwen3_235b_a22b(), (ep, 1, 32 / ep), dispatcher)
    }

    #[test]
    fn qwen3_235b_all_to_all_bytes_per_layer_by_hand() {
        // Qwen3-235B-A22B (hidden 4096, top-8 of 128) at tp 2 with sequence parallelism, micro-batch 1, 4,096
        // tokens: 2,048 tokens enter an MoE layer per GPU. Each all-to-all sends the rank's 2048·8 = 16,384 routed
        // copies of 4096 bf16 values: 16,384 · 8,192 B = 134,217,728 B (128 MiB). A layer runs four of them per
        // micro-batch (dispatch and combine, forward and backward): 512 MiB per GPU.
        for ep in [8, 32] {
            let moe = qwen235(ep, Dispatcher::Alltoall);
            let ml = MoeLayout::new(&moe, 8);
            let comm = dispatch_comm(&moe, &ml, 2048, 4096, 2.0);
            assert_eq!(comm.len(), 1);
            assert_eq!((comm[0].bytes, comm[0].calls), (134_217_728.0, 2));
            assert_eq!(2.0 * comm[0].calls as f64 * comm[0].bytes, 536_870_912.0);
            // ep 8 stays in one NVLink node; ep 32 spans 4 nodes, so (32 − 8)/32 = 3/4 of each rank's buffer
            // (100,663,296 B) crosses the network.
            let g = comm[0].group;
            assert_eq!((g.ranks, g.nodes), (ep, ep / 8));
            let inter = (g.ranks - g.ranks_per_node) as f64 / g.ranks as f64 * comm[0].bytes;
            assert_eq!(inter, if ep == 8 { 0.0 } else { 100_663_296.0 });
        }
    }

    #[test]
    fn deepep_sends_a_token_once_per_node() {
        // ep 32 over 4 nodes: a token reaches 4·(1 − C(96,8)/C(128,8)) = 3.63 nodes on average, so the RDMA part
        // carries 2048·3.61·8192 B instead of the 3/4 of 2048·8·8192 B that NCCL's all-to-all sends across nodes.
        let moe = qwen235(32, Dispatcher::Deepep);
        let ml = MoeLayout::new(&moe, 8);
        let comm = dispatch_comm(&moe, &ml, 2048, 4096, 2.0);
        assert_eq!(comm.len(), 2);
        let nodes = distinct_bins(128, 8, 4, 0, 0);
        assert_eq!(comm[0].bytes, 2048.0 * nodes * 8192.0);
        assert_eq!((comm[0].group.nodes, comm[0].group.ranks_per_node), (4, 1));
        assert!(comm[0].bytes < 0.75 * 134_217_728.0);
        assert!(comm[1].beside_previous && comm[1].group.nodes == 1);
    }

    #[test]
    fn hybridep_gathers_the_routing_map_over_the_ep_group() {
        // ep 32 (tp 1) over 4 nodes, 2,048 tokens per GPU, 128 experts: each rank's [2048, 128] bool map is
        // 262,144 B, 32 ranks gather 8,388,608 B, once per forward.
        let moe = qwen235(32, Dispatcher::Hybridep);
        let ml = MoeLayout::new(&moe, 8);
        let ag = routing_map_gather(&moe, &ml, 2048).unwrap();
        assert_eq!((ag.bytes, ag.calls, ag.collective), (8_388_608.0, 1, Collective::AllGather));
        assert_eq!((ag.group.ranks, ag.group.nodes), (32, 4));
        // No such all-gather for the other dispatchers.
        let a2a = qwen235(32, Dispatcher::Alltoall);
        assert!(routing_map_gather(&a2a, &MoeLayout::new(&a2a, 8), 2048).is_none());
    }
}

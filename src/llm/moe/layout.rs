//! Where the MoE parallel groups sit on the nodes: Megatron-Core's expert grid orders a pipeline stage's
//! tp·cp·dp ranks tp-ep-dp (`parallel_state.py`, the expert `RankGenerator` with order "tp-ep-dp-pp"): the
//! expert-tensor-parallel group is etp consecutive ranks, the expert-parallel group ep ranks of stride etp, the
//! expert-data-parallel group edp ranks of stride etp·ep. A stage's ranks are consecutive (pipeline rank slowest),
//! so every group is packed into as few nodes as its stride allows.

use super::parallel::MoeTraining;
use crate::comm::Group;

/// The MoE groups of one configuration on nodes of `gpus_per_node` GPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoeLayout {
    /// The expert-tensor-parallel group (etp consecutive ranks).
    pub etp_group: Group,
    /// The expert-parallel group (ep ranks, stride etp).
    pub ep_group: Group,
    /// The tensor-and-expert-parallel group (etp·ep consecutive ranks; the allgather and flex dispatchers').
    pub tp_ep_group: Group,
    /// The expert-data-parallel group (edp ranks, stride etp·ep): the expert gradients' reduction.
    pub edp_group: Group,
}

/// Ranks of a group of `ranks` ranks with stride `stride` that share a node of `gpn` GPUs.
fn strided_per_node(ranks: u32, stride: u32, gpn: u32) -> u32 {
    if stride >= gpn {
        1
    } else {
        (gpn / stride.max(1)).max(1).min(ranks)
    }
}

impl MoeLayout {
    /// The groups of `moe` on nodes of `gpus_per_node` GPUs.
    pub fn new(moe: &MoeTraining, gpus_per_node: u32) -> MoeLayout {
        let gpn = gpus_per_node.max(1);
        let (etp, ep, edp) = (moe.etp.max(1), moe.ep.max(1), moe.edp.max(1));
        MoeLayout {
            etp_group: Group::new(etp, etp.min(gpn)),
            ep_group: Group::new(ep, strided_per_node(ep, etp, gpn)),
            tp_ep_group: Group::new(etp * ep, (etp * ep).min(gpn)),
            edp_group: Group::new(edp, strided_per_node(edp, etp * ep, gpn)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::moe::parallel::Dispatcher;
    use crate::llm::moe::spec::qwen3_235b_a22b;

    fn moe(ep: u32, etp: u32, edp: u32) -> MoeTraining {
        MoeTraining::balanced(qwen3_235b_a22b(), (ep, etp, edp), Dispatcher::Alltoall)
    }

    #[test]
    fn expert_groups_on_eight_gpu_nodes() {
        // ep 32, etp 1, edp 1 (Qwen3-235B-A22B on 256 H100 with tp 2, pp 8): the expert-parallel group is 32
        // consecutive ranks, 4 nodes of 8.
        let l = MoeLayout::new(&moe(32, 1, 1), 8);
        assert_eq!(l.ep_group, Group { ranks: 32, nodes: 4, ranks_per_node: 8 });
        // ep 8 within a node; edp 4 strides by 8: one rank per node.
        let l = MoeLayout::new(&moe(8, 1, 4), 8);
        assert_eq!(l.ep_group, Group { ranks: 8, nodes: 1, ranks_per_node: 8 });
        assert_eq!(l.edp_group, Group { ranks: 4, nodes: 4, ranks_per_node: 1 });
        // etp 2, ep 8: the ep group strides by 2: 4 per node, 2 nodes; the tp·ep group is 16 ranks on 2 nodes.
        let l = MoeLayout::new(&moe(8, 2, 1), 8);
        assert_eq!(l.ep_group, Group { ranks: 8, nodes: 2, ranks_per_node: 4 });
        assert_eq!(l.tp_ep_group, Group { ranks: 16, nodes: 2, ranks_per_node: 8 });
        assert_eq!(l.etp_group, Group { ranks: 2, nodes: 1, ranks_per_node: 2 });
    }
}

//! Where the parallel groups sit on the nodes. Rank order is tp fastest, then cp, then dp, then pp
//! (Megatron-Core's default order `tp-cp-ep-dp-pp`; with cp = 1 it is GPT-NeoX's tp-dp-pp), so a tensor-parallel
//! group is packed into as few nodes as possible and the data-parallel group strides by tp·cp.

use super::config::TrainingConfig;
use crate::comm::Group;

/// The groups of one configuration on nodes of `gpus_per_node` GPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layout {
    /// Tensor-parallel group (tp ranks, consecutive).
    pub tp_group: Group,
    /// Context-parallel group (cp ranks, stride tp).
    pub cp_group: Group,
    /// Gradient-reduction and ZeRO group: the dp·cp ranks holding the same weights (stride tp). With cp = 1 this
    /// is the data-parallel group.
    pub dp_group: Group,
    /// GPUs of a node that communicate at once in tp/cp/dp collectives.
    pub active_per_node: u32,
    pub gpus_per_node: u32,
}

impl Layout {
    /// The layout of `cfg` on nodes of `gpus_per_node` GPUs.
    pub fn new(cfg: &TrainingConfig, gpus_per_node: u32) -> Layout {
        let gpn = gpus_per_node.max(1);
        let tp_group = Group::new(cfg.tp, cfg.tp.min(gpn));
        // Ranks of a strided group (stride tp) that share a node.
        let strided_per_node = |ranks: u32| if cfg.tp >= gpn { 1 } else { (gpn / cfg.tp).max(1).min(ranks) };
        let cp_group = Group::new(cfg.cp, strided_per_node(cfg.cp));
        let grad = cfg.grad_ranks();
        let dp_group = Group::new(grad, strided_per_node(grad));
        let active = (cfg.gpus().min(gpn as u64)) as u32;
        Layout { tp_group, cp_group, dp_group, active_per_node: active, gpus_per_node: gpn }
    }

    /// The pipeline send from stage `from` to stage `to` (either direction): within a node when both ends'
    /// first ranks are on the same node.
    pub fn p2p_group(&self, cfg: &TrainingConfig, from: u32, to: u32) -> Group {
        let stride = cfg.tp as u64 * cfg.cp as u64 * cfg.dp as u64;
        let gpn = self.gpus_per_node as u64;
        if (from as u64 * stride) / gpn == (to as u64 * stride) / gpn {
            Group { ranks: 2, nodes: 1, ranks_per_node: 2 }
        } else {
            Group { ranks: 2, nodes: 2, ranks_per_node: 1 }
        }
    }

    /// GPUs of a node that send pipeline activations at the same time (one stage's tp·cp·dp ranks on a node).
    pub fn p2p_active_per_node(&self, cfg: &TrainingConfig) -> u32 {
        (cfg.tp as u64 * cfg.cp as u64 * cfg.dp as u64).min(self.gpus_per_node as u64) as u32
    }

    /// The all-to-all group of `a` adjacent context-parallel ranks (stride tp; `cp_comm_type` `a2a`, the inner
    /// level of `a2a+p2p`).
    pub fn cp_a2a_group(&self, a: u32) -> Group {
        let per_node = if self.tp_group.ranks >= self.gpus_per_node {
            1
        } else {
            (self.gpus_per_node / self.tp_group.ranks).max(1).min(a)
        };
        Group::new(a, per_node)
    }

    /// The send between neighbours of the context-parallel ring: across nodes when the ring spans nodes (its
    /// slowest hop sets the pace).
    pub fn cp_ring_group(&self) -> Group {
        if self.cp_group.nodes > 1 {
            Group { ranks: 2, nodes: 2, ranks_per_node: 1 }
        } else {
            Group { ranks: 2, nodes: 1, ranks_per_node: 2 }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::Precision;
    use crate::llm::validate;

    fn cfg(par: serde_json::Value) -> TrainingConfig {
        let m = serde_json::from_value(serde_json::json!({"layers": 32, "hidden": 4096, "heads": 32,
            "seq_len": 8192, "vocab": 32000, "attention": "flash"}))
        .unwrap();
        validate(&m, &serde_json::from_value(par).unwrap(), Precision::Bf16, 4096).unwrap()
    }

    #[test]
    fn groups_on_eight_gpu_nodes() {
        // tp 2, cp 2, dp 4: tp pairs, cp stride 2 within the node, gradients over dp·cp = 8 ranks of stride 2:
        // 4 per node (8 GPUs / tp 2) → 2 nodes.
        let l = Layout::new(&cfg(serde_json::json!({"tp": 2, "context_parallel": 2, "dp": 4})), 8);
        assert_eq!(l.tp_group, Group { ranks: 2, nodes: 1, ranks_per_node: 2 });
        assert_eq!(l.cp_group, Group { ranks: 2, nodes: 1, ranks_per_node: 2 });
        assert_eq!(l.dp_group, Group { ranks: 8, nodes: 2, ranks_per_node: 4 });
        // tp 8 fills the node: cp 4 spans 4 nodes, one rank each.
        let l = Layout::new(&cfg(serde_json::json!({"tp": 8, "context_parallel": 4})), 8);
        assert_eq!(l.cp_group, Group { ranks: 4, nodes: 4, ranks_per_node: 1 });
        assert_eq!(l.cp_ring_group().nodes, 2);
    }

    #[test]
    fn pipeline_neighbours_share_a_node_only_when_a_stage_is_small() {
        // tp·cp·dp = 4 ranks per stage: stages 0 and 1 share node 0, stage 2 starts node 1.
        let c = cfg(serde_json::json!({"tp": 2, "dp": 2, "pp": 4}));
        let l = Layout::new(&c, 8);
        assert_eq!(l.p2p_group(&c, 0, 1).nodes, 1);
        assert_eq!(l.p2p_group(&c, 1, 2).nodes, 2);
        assert_eq!(l.p2p_group(&c, 3, 0).nodes, 2);
    }
}

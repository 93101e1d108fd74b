//! Collective operations: the communication half of what perfcast times, in NCCL's names, and nccl-tests'
//! bandwidth convention (MODELS.md §3.3). Plain vocabulary shared by the samples, the communication models
//! ([`crate::comm`]) and the cost backends.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Collective operation (NCCL names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    Reduce,
    AllToAll,
    /// Point-to-point send/receive between two ranks (also accepted as `p2p`).
    #[serde(alias = "p2p")]
    SendRecv,
}

impl Collective {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::AllToAll => "all_to_all",
            Collective::SendRecv => "send_recv",
        }
    }

    /// nccl-tests bus-bandwidth factor: busbw = algbw × factor (MODELS.md §3.3; nccl-tests PERFORMANCE.md).
    pub fn busbw_factor(self, ranks: u32) -> f64 {
        let n = ranks.max(1) as f64;
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => (n - 1.0) / n,
            Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
        }
    }
}

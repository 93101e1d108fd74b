//! Disaggregated serving (`mode: "disagg"`; DistServe, Zhong et al. OSDI 2024; Splitwise, Patel et al. ISCA 2024;
//! NVIDIA Dynamo, SGLang's and vLLM's P/D serving): a pool of prefill workers computes each prompt's KV cache and
//! sends it to a pool of decode workers, which compute the last prompt token, sample the first output token and
//! decode the rest. The client's TTFT therefore includes the prefill worker's queue and prefill, the KV transfer
//! and the decode worker's first step.
//!
//! **The transfer** ([`kv_transfer_s`]): every GPU of the prefill worker sends its share of the request's cache —
//! L · (KV bytes per token on one GPU of the prefill layout) — to its decode peer at once (NIXL / Mooncake /
//! NCCL send/recv: point-to-point, all GPUs in parallel), timed as a send/recv through the cost backend's link
//! model: within a node when one prefill and one decode worker fit together in a node (NVLink; an NVL72 rack is
//! one node of 72), else across nodes over each GPU's share of the node's NICs.

use std::collections::HashMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::engine::EngineSettings;
use super::memory::ServingMemory;
use super::validate::ServingConfig;
use crate::comm::Group;
use crate::cost::CostBackend;
use crate::op::Collective;

/// One pool of a disaggregated deployment, validated.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PoolConfig {
    /// Workers in the pool.
    pub workers: u32,
    pub tp: u32,
    pub pp: u32,
    pub ep: u32,
    /// Attention data-parallel ranks of a worker.
    pub attention_dp: u32,
    /// The pool's engine settings.
    pub settings: EngineSettings,
    /// The pool's CUDA-graph capture list where the request gives one
    /// ([`ServingConfig::cuda_graph_batch_sizes`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_graph_batch_sizes: Option<Vec<u32>>,
}

/// The two pools.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct DisaggPools {
    pub prefill: PoolConfig,
    pub decode: PoolConfig,
}

impl ServingConfig {
    /// The configuration of one worker of `pool` (this configuration with the pool's parallelism and settings).
    pub fn for_pool(&self, pool: &PoolConfig) -> ServingConfig {
        ServingConfig {
            tp: pool.tp,
            pp: pool.pp,
            ep: pool.ep,
            attention_dp: pool.attention_dp,
            dp_attention: pool.attention_dp > 1,
            settings: pool.settings,
            cuda_graph_batch_sizes: pool.cuda_graph_batch_sizes.clone(),
            pools: None,
            ..self.clone()
        }
    }

    /// GPUs of the whole deployment: one instance's tp·pp, or every worker of both pools.
    pub fn deployment_gpus(&self) -> u32 {
        match &self.pools {
            None => self.gpus(),
            Some(p) => p.prefill.workers * p.prefill.tp * p.prefill.pp + p.decode.workers * p.decode.tp * p.decode.pp,
        }
    }
}

/// The time to send an `input`-token request's KV cache from a prefill worker of `prefill` (whose memory is
/// `prefill_memory`) to a decode worker of `decode`, s (module doc).
pub fn kv_transfer_s(
    prefill: &ServingConfig,
    decode: &ServingConfig,
    prefill_memory: &ServingMemory,
    backend: &dyn CostBackend,
    input: u32,
) -> f64 {
    let system = backend.system();
    let gpn = system.gpus_per_node.max(1);
    let bytes = input as f64 * prefill_memory.kv_bytes_per_token_per_gpu;
    let together = prefill.gpus() + decode.gpus() <= gpn;
    let group = if together { Group::new(2, 2) } else { Group::new(2, 1) };
    backend.collective(Collective::SendRecv, bytes, group, prefill.gpus().min(gpn)).time_us * 1e-6
}

/// [`kv_transfer_s`] memoized by prompt length (a simulation asks once per request).
pub struct Transfers<'a> {
    prefill: &'a ServingConfig,
    decode: &'a ServingConfig,
    memory: ServingMemory,
    backend: &'a dyn CostBackend,
    memo: std::cell::RefCell<HashMap<u32, f64>>,
}

impl<'a> Transfers<'a> {
    pub fn new(
        prefill: &'a ServingConfig,
        decode: &'a ServingConfig,
        memory: ServingMemory,
        backend: &'a dyn CostBackend,
    ) -> Transfers<'a> {
        Transfers { prefill, decode, memory, backend, memo: Default::default() }
    }

    /// The transfer time of an `input`-token prompt, s.
    pub fn time_s(&self, input: u32) -> f64 {
        if let Some(t) = self.memo.borrow().get(&input) {
            return *t;
        }
        let t = kv_transfer_s(self.prefill, self.decode, &self.memory, self.backend, input);
        self.memo.borrow_mut().insert(input, t);
        t
    }
}

/// The disaggregated deployment as the answer reports it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct DisaggReport {
    pub pools: DisaggPools,
    /// Memory of one GPU of a prefill worker (the decode worker's is the answer's `memory`).
    pub prefill_memory: ServingMemory,
    /// KV transfer of a request of `input_tokens`, ms.
    pub kv_transfer_ms: f64,
    /// Bytes each prefill GPU sends for such a request.
    pub kv_transfer_bytes_per_gpu: f64,
    /// Prefill and decode workers busy over the run (busy time over duration × workers), 0–1.
    pub prefill_busy: f64,
    pub decode_busy: f64,
}

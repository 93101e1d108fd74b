//! CUDA graphs in training: what replaying captured kernels removes from the host.
//!
//! perfcast times a pass as the longer of its GPU time and its host time, the CPU dispatching
//! [`crate::cost::Efficiency::host_us`] per kernel ahead of the GPU ([`crate::llm::timing::pass_seconds`]); a pass of
//! short kernels (small models, small micro-batches, large tensor parallelism) runs at the host's pace. A CUDA graph
//! replays its captured kernels with one launch, so the host pays one dispatch per graph instead of one per kernel:
//! the effect shows only where the host was the bottleneck. What a graph does not change here: the GPU-side cost
//! per kernel ([`crate::cost::Efficiency::kernel_us`], fitted on eager runs, which also carries the kernels the
//! operator list folds away), the collectives, and the memory — Megatron's graphs keep static input and output
//! buffers per captured layer and micro-batch (`cuda_graphs.py` `CudaGraphManager`), which perfcast does not add to
//! the memory estimate.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Which parts of an iteration run as CUDA graphs (`cuda_graphs` of a training request's `parallelism`).
///
/// Megatron-LM (`arguments.py`): `--cuda-graph-impl` `none` (the default), `local` (Megatron-Core's
/// `CudaGraphManager`) or `transformer_engine` (TE's `make_graphed_callables`), and `--cuda-graph-scope` — by
/// default each whole `TransformerLayer` (its attention and MLP), or `full_iteration` (with the local
/// implementation: the whole forward-backward of the step captured once). NeMo / Megatron-Bridge's performance
/// recipes turn graphs on per model and system (`cuda_graph_impl`, `cuda_graph_scope`); torchtitan, DeepSpeed and
/// Hugging Face's Trainer do not capture training steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum CudaGraphs {
    /// Every kernel dispatched by the host (Megatron's default).
    #[default]
    None,
    /// Each transformer layer's forward and its backward replayed as one graph: the layer's host time per pass
    /// is one graph launch ([`CudaGraphs::layer_host_us`]); the embedding, the head, the optimizer and the
    /// collectives outside the layers stay eager.
    PerLayer,
    /// The whole forward-backward of a step captured as one graph (`--cuda-graph-scope full_iteration`): no host
    /// time in the forward and backward passes; the optimizer step stays eager.
    FullIteration,
}

impl CudaGraphs {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CudaGraphs::None => "none",
            CudaGraphs::PerLayer => "per_layer",
            CudaGraphs::FullIteration => "full_iteration",
        }
    }

    /// The host time of one pass of one transformer layer whose kernels take `eager_host_us` to dispatch, µs: the
    /// same without graphs; one dispatch (`host_us`, the host cost of one kernel: the graph's launch and the
    /// framework call around it) with per-layer graphs, or less if the layer launched fewer; 0 when the whole
    /// iteration is one graph.
    pub fn layer_host_us(self, eager_host_us: f64, host_us: f64) -> f64 {
        match self {
            CudaGraphs::None => eager_host_us,
            CudaGraphs::PerLayer => eager_host_us.min(host_us),
            CudaGraphs::FullIteration => 0.0,
        }
    }

    /// The host time of one pass of the operators outside the layers (embedding, head) whose kernels take
    /// `eager_host_us`: unchanged unless the whole iteration is one graph.
    pub fn outside_host_us(self, eager_host_us: f64) -> f64 {
        match self {
            CudaGraphs::FullIteration => 0.0,
            _ => eager_host_us,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphs_replace_per_kernel_dispatch_by_one_launch() {
        // A layer of 30 kernels at 67.9 µs of host time each: 2,037 µs eager; one launch per layer graph; none in
        // a captured iteration. The embedding is captured only with the whole iteration.
        let eager = 30.0 * 67.9;
        assert_eq!(CudaGraphs::None.layer_host_us(eager, 67.9), eager);
        assert_eq!(CudaGraphs::PerLayer.layer_host_us(eager, 67.9), 67.9);
        assert_eq!(CudaGraphs::FullIteration.layer_host_us(eager, 67.9), 0.0);
        assert_eq!(CudaGraphs::PerLayer.outside_host_us(135.8), 135.8);
        assert_eq!(CudaGraphs::FullIteration.outside_host_us(135.8), 0.0);
        let parsed: CudaGraphs = serde_json::from_value(serde_json::json!("per_layer")).unwrap();
        assert_eq!((parsed, parsed.as_str()), (CudaGraphs::PerLayer, "per_layer"));
    }
}

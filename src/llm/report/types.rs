//! The parts of the answer to `POST /v1/predictions/training` ([`super::TrainingPrediction`]): the per-stage
//! report, the operator table's rows, throughput, the resolved configuration and the whole-run estimate.

use serde::Serialize;
use utoipa::ToSchema;

use crate::cost::Source;
use crate::hw::Precision;
use crate::llm::config::{LayerSplit, Recompute};
use crate::llm::framework::{Framework, OptimizerImpl};
use crate::llm::operators::OpName;
use crate::llm::partition::StageRole;
use crate::op::Phase;

/// One pipeline stage of the prediction.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct StageReport {
    /// Stage index, 0-based.
    pub stage: u32,
    pub role: StageRole,
    /// Encoder layers on the stage (all its model chunks).
    pub encoders: u32,
    /// Parameters held by one GPU of the stage before ZeRO partitioning (S1 eq. 6, generalized; its routed experts
    /// included).
    pub parameters: f64,
    /// Forward time per micro-batch, all model chunks (compute, tensor/context-parallel communication, pipeline
    /// sends), s.
    pub forward_s: f64,
    /// Backward time per micro-batch, all model chunks (recomputation included), s.
    pub backward_s: f64,
    /// Fused Adam over the stage's (ZeRO-partitioned) parameters, s.
    pub optimizer_s: f64,
    /// ZeRO / distributed-optimizer all-gather of the updated parameters (and of the routed experts over the
    /// expert-data-parallel group), s (0 without it or with dp·cp = 1).
    pub param_allgather_s: f64,
    /// Data-parallel reduction of the stage's gradients after its last backward (0 with ZeRO ≥ 2, which reduces
    /// during every backward), s.
    pub grad_sync_s: f64,
    /// Memory one GPU of the stage needs, GiB.
    pub memory_gib: f64,
}

/// One row of the operator table: an operator, its per-call time and how often it runs per micro-batch over the
/// whole pipeline (update operators: per step).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct OperatorRow {
    /// S1 Table I name (or a Megatron-LM operator beyond it: `SwiGLU`, `MP_Allgather`, `CP_P2P`, …).
    pub name: OpName,
    /// The pass the time is charged to.
    pub phase: Phase,
    /// The S1 Table I feature vector.
    pub features: Vec<u64>,
    /// Calls per micro-batch summed over stages (per step for DP_*, Embedding_Grad_Allreduce and Optimizer).
    pub calls_per_micro_batch: u32,
    /// Time per call, µs.
    pub time_us: f64,
    /// calls · charged time, µs (an operator overlapping another — the context-parallel exchange behind its
    /// attention step — is charged only its excess; ZeRO-2/3's per-micro-batch collectives are listed at full
    /// time, the stage times charge only what their pass does not hide).
    pub total_us: f64,
    /// `analytic` or `regressor:<key>@v<n>`.
    #[schema(value_type = String)]
    pub source: Source,
    /// Precision of a computation (absent for communication).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    /// A forward operator re-run in the backward pass (activation recomputation).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub recompute: bool,
}

/// Throughput figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Throughput {
    /// global_batch · seq_len / iteration time, tokens/s.
    pub tokens_per_s: f64,
    /// Model FLOPs (Narayanan et al. eq. 3, generalized to GQA and SwiGLU; recomputation not counted) per second per
    /// GPU, TFLOP/s.
    pub model_tflops_per_gpu: f64,
    /// Model FLOPs utilization against the GPU's dense peak for the precision, 0–1.
    pub mfu: f64,
}

/// The resolved configuration the prediction used.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ResolvedConfig {
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub context_parallel: u32,
    /// How the context-parallel ranks communicate, in effect (the request's `cp_comm_type` or the framework's
    /// default; [`crate::llm::cp`]); absent with context_parallel 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cp_comm_type: Option<crate::llm::cp::CpCommType>,
    pub gpus: u64,
    pub micro_batch: u32,
    /// Micro-batches per step, m.
    pub grad_accum: u32,
    pub global_batch: u64,
    pub zero_stage: u32,
    pub precision: Precision,
    /// Padded vocabulary (S1 eq. 1–2).
    pub vocab_padded: u64,
    /// Nodes the tensor-parallel group spans.
    pub tp_nodes: u32,
    /// Nodes the gradient-reduction group (dp·cp ranks) spans.
    pub dp_nodes: u32,
    pub kv_heads: u32,
    pub ffn_hidden: u32,
    pub sequence_parallel: bool,
    pub virtual_stages: u32,
    pub recompute: Recompute,
    pub distributed_optimizer: bool,
    pub overlap_grad_reduce: bool,
    pub overlap_param_gather: bool,
    pub align_param_gather: bool,
    /// Parameters per gradient bucket on the first stage (the request's `bucket_size` or Megatron-Core's
    /// default).
    pub bucket_size: f64,
    /// Transformer Engine's TP overlap in effect (requested, with sequence parallelism and tp > 1).
    pub tp_comm_overlap: bool,
    /// Overlapped pipeline sends in effect.
    pub overlap_p2p_comm: bool,
    pub layer_split: LayerSplit,
    /// The framework that runs it.
    pub framework: Framework,
    /// The optimizer's implementation in effect (the request's or the framework's).
    pub optimizer: OptimizerImpl,
    /// Gradients reduced in fp32 (the request's `grad_reduce_in_fp32` or the framework's default).
    pub grad_reduce_in_fp32: bool,
    /// How the fp8 GEMMs are scaled (`delayed` unless the request names another; meaningful under precision fp8).
    pub fp8_recipe: crate::llm::recipe::Fp8Recipe,
    /// The parameter all-gathers move fp8 weights.
    pub fp8_param_gather: bool,
    /// Which passes replay as CUDA graphs.
    pub cuda_graphs: crate::llm::cuda_graphs::CudaGraphs,
    /// Unique parameters of the model (every expert; multi-token-prediction layers not counted).
    pub model_parameters: f64,
    /// Parameters one token uses: the model's with only the top-k routed experts of each MoE layer (= model
    /// parameters for a dense model).
    pub active_parameters: f64,
    /// Dims per attention head.
    pub head_dim: u32,
    /// Submodules selective recompute re-runs (Megatron-Core `recompute_modules`; empty without selective recompute).
    pub recompute_modules: Vec<crate::llm::moe::RecomputeModule>,
    /// Expert parallelism, the dispatcher and the routing balance (mixture-of-experts models).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moe: Option<crate::llm::moe::MoeReport>,
}

/// Wall-clock time and cost of a whole training run at the predicted iteration time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct RunEstimate {
    /// Optimizer steps.
    pub steps: u64,
    /// Tokens trained on: steps · global_batch · seq_len.
    pub tokens: f64,
    /// steps · iteration time, s.
    pub wall_clock_s: f64,
    /// The same in days (86,400 s).
    pub wall_clock_days: f64,
    /// wall_clock_s · GPUs / 3600.
    pub gpu_hours: f64,
}

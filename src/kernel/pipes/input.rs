//! The input of the pipeline-demand model: a kernel's launch geometry and its demand on each pipe (Nsight
//! Compute counters or an analytic count), totals over the whole kernel.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::hw::Precision;
#[cfg(doc)]
use crate::kernel::machine;

/// A kernel's launch and its demand on each pipe, totals over the whole kernel (all ≥ 0; 0 = no demand).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"blocks": 1024, "threads_per_block": 256, "flops_tensor": 6.87e10,
    "tensor_precision": "bf16", "lsu_warp_insts": 2.0e6, "l2_bytes": 2.0e8, "dram_bytes": 6.7e7, "measured_us": 310.0}))]
pub struct PipeWork {
    /// CTAs (thread blocks) in the grid.
    pub blocks: u64,
    /// Threads per CTA.
    pub threads_per_block: u32,
    /// Resident CTAs per SM; `null` = the occupancy calculator's ([`machine::occupancy`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks_per_sm: Option<u32>,
    /// Registers per thread (occupancy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers_per_thread: Option<f64>,
    /// Shared memory per CTA, bytes (occupancy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_mem_bytes_per_block: Option<f64>,
    /// Tensor-core FLOPs.
    #[serde(default)]
    pub flops_tensor: f64,
    /// Precision of the tensor work; `null` = fp16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_precision: Option<Precision>,
    /// FP32 FLOPs (fadd + fmul + 2·ffma).
    #[serde(default)]
    pub flops_fp32: f64,
    /// FP16 FLOPs on the vector pipe.
    #[serde(default)]
    pub flops_fp16: f64,
    /// FP64 FLOPs.
    #[serde(default)]
    pub flops_fp64: f64,
    /// Integer/logic warp instructions (`sm__inst_executed_pipe_alu.sum`).
    #[serde(default)]
    pub alu_warp_insts: f64,
    /// Special-function warp instructions (`sm__inst_executed_pipe_xu.sum`).
    #[serde(default)]
    pub xu_warp_insts: f64,
    /// Load/store warp instructions (`sm__inst_executed_pipe_lsu.sum`).
    #[serde(default)]
    pub lsu_warp_insts: f64,
    /// L1/TEX bytes.
    #[serde(default)]
    pub l1_bytes: f64,
    /// L2 bytes.
    #[serde(default)]
    pub l2_bytes: f64,
    /// DRAM bytes.
    #[serde(default)]
    pub dram_bytes: f64,
    /// Measured duration, µs, for the efficiency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_us: Option<f64>,
}

impl PipeWork {
    /// A launch of `blocks` × `threads_per_block` with no demand yet.
    pub fn launch(blocks: u64, threads_per_block: u32) -> PipeWork {
        PipeWork {
            blocks,
            threads_per_block,
            blocks_per_sm: None,
            registers_per_thread: None,
            shared_mem_bytes_per_block: None,
            flops_tensor: 0.0,
            tensor_precision: None,
            flops_fp32: 0.0,
            flops_fp16: 0.0,
            flops_fp64: 0.0,
            alu_warp_insts: 0.0,
            xu_warp_insts: 0.0,
            lsu_warp_insts: 0.0,
            l1_bytes: 0.0,
            l2_bytes: 0.0,
            dram_bytes: 0.0,
            measured_us: None,
        }
    }
}

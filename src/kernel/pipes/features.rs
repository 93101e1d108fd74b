//! The feature vector the learned kernel model (S2) reads from a pipeline-demand estimate: per-pipe cycles,
//! their maxima, the launch geometry and the hardware descriptors, by name and as a flat vector.

use serde::Serialize;
use utoipa::ToSchema;

/// The feature vector for the learned model (S2): per-pipe cycles, the maxima, the launch geometry and the
/// hardware descriptors. [`PipeFeatures::NAMES`] and [`PipeFeatures::values`] give it as a flat vector.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PipeFeatures {
    pub tensor_cycles: f64,
    pub fma_cycles: f64,
    pub fp64_cycles: f64,
    pub alu_cycles: f64,
    pub xu_cycles: f64,
    pub lsu_cycles: f64,
    pub l1_cycles: f64,
    pub l2_cycles: f64,
    pub dram_cycles: f64,
    /// Max over the instruction pipes.
    pub max_compute_cycles: f64,
    /// Max over L1, L2, DRAM.
    pub max_memory_cycles: f64,
    /// Max over all: the ceiling.
    pub ceiling_cycles: f64,
    pub waves: f64,
    /// CTAs on the busiest SM.
    pub ctas_per_sm: f64,
    /// Resident CTAs per SM.
    pub blocks_per_sm: f64,
    /// Theoretical occupancy, 0–1.
    pub occupancy: f64,
    pub sm_count: f64,
    pub clock_ghz: f64,
    pub fp32_tflops: f64,
    /// Matrix peak of the tensor precision (0 where none).
    pub tensor_tflops: f64,
    pub dram_gbs: f64,
    pub l2_gbs: f64,
    pub l1_gbs: f64,
    pub l2_mib: f64,
}

impl PipeFeatures {
    /// Feature names, in the order of [`PipeFeatures::values`].
    pub const NAMES: [&'static str; 24] = [
        "tensor_cycles",
        "fma_cycles",
        "fp64_cycles",
        "alu_cycles",
        "xu_cycles",
        "lsu_cycles",
        "l1_cycles",
        "l2_cycles",
        "dram_cycles",
        "max_compute_cycles",
        "max_memory_cycles",
        "ceiling_cycles",
        "waves",
        "ctas_per_sm",
        "blocks_per_sm",
        "occupancy",
        "sm_count",
        "clock_ghz",
        "fp32_tflops",
        "tensor_tflops",
        "dram_gbs",
        "l2_gbs",
        "l1_gbs",
        "l2_mib",
    ];

    /// The features as a flat vector (order of [`PipeFeatures::NAMES`]).
    pub fn values(&self) -> [f64; 24] {
        [
            self.tensor_cycles,
            self.fma_cycles,
            self.fp64_cycles,
            self.alu_cycles,
            self.xu_cycles,
            self.lsu_cycles,
            self.l1_cycles,
            self.l2_cycles,
            self.dram_cycles,
            self.max_compute_cycles,
            self.max_memory_cycles,
            self.ceiling_cycles,
            self.waves,
            self.ctas_per_sm,
            self.blocks_per_sm,
            self.occupancy,
            self.sm_count,
            self.clock_ghz,
            self.fp32_tflops,
            self.tensor_tflops,
            self.dram_gbs,
            self.l2_gbs,
            self.l1_gbs,
            self.l2_mib,
        ]
    }
}

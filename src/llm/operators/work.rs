//! What one operator is ([`StageOp`]): its work ([`Work`], a computation of a shape in a precision or a collective
//! over a group), its call count and pass, the collective it overlaps ([`Overlap`]), the precisions operators run in
//! ([`OpPrecisions`]), and the constructors the operator lists are built with.

use super::OpName;
use crate::comm::Group;
use crate::hw::{GpuSpec, Precision};
use crate::llm::config::TrainingConfig;
use crate::op::Collective;
use crate::op::{OpClass, OpShape, Phase};

/// What an operator does: a computation of a shape in a precision, or a collective of a size over a group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Work {
    Compute {
        shape: OpShape,
        dtype: Precision,
    },
    Collective {
        collective: Collective,
        /// Bytes as nccl-tests counts them.
        bytes: f64,
        group: Group,
        /// GPUs per node communicating at the same time (they share the NICs).
        active_per_node: u32,
    },
    /// One of SGLang's wide expert-parallel kernels (DeepEP dispatch and combine, DeepGEMM grouped experts), timed
    /// from SGLang's own measurements ([`crate::llm::serving::wideep`]).
    WideEp(crate::llm::serving::wideep::WideEpOp),
}

/// One operator: runs `calls` times per micro-batch (per step for the update operators) in the pass `phase` it
/// is charged to.
#[derive(Debug, Clone, PartialEq)]
pub struct StageOp {
    pub name: OpName,
    /// The pass the time is charged to (a recomputed forward operator is charged to the backward pass).
    pub phase: Phase,
    pub calls: u32,
    pub work: Work,
    /// The S1 Table I feature vector.
    pub features: Vec<u64>,
    /// A forward operator re-run during the backward pass (activation recomputation).
    pub recompute: bool,
    /// Runs concurrently with one call of another operator of the same phase ([`Overlap`]); only what it does not
    /// hide behind that operator is exposed.
    pub overlaps: Option<Overlap>,
}

/// A collective overlapped with one call of a computation of the same pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlap {
    /// The operator it hides behind.
    pub with: OpName,
    /// Chunks the collective and the computation are split into and pipelined (Transformer Engine's userbuffers
    /// overlap: one chunk's communication runs while the previous chunk computes); ≤ 1 = not split, the whole
    /// collective runs beside the whole computation (context parallelism's ring exchange).
    pub chunks: u32,
    /// The collective starts after the partner's input-gradient GEMM and hides behind its weight-gradient GEMM
    /// only: half of the partner's backward time, which perfcast times as the two GEMMs of equal FLOPs (for M
    /// tokens, K inputs and N outputs, dgrad dY·W and wgrad dYᵀ·X, 2·M·N·K each). Transformer Engine's
    /// column-parallel layers without Userbuffers launch the reduce-scatter of the input gradient with
    /// `async_op=True` right after the dgrad GEMM and wait for it after the wgrad GEMM, as Megatron-DeepSpeed's
    /// `ColumnParallelLinear` does its input-gradient all-reduce without sequence parallelism (`layer::tp_sync`).
    pub wgrad_only: bool,
}

impl Overlap {
    /// The exposed seconds (or µs) of a collective of `comm` overlapped with a computation of `compute`: unsplit,
    /// max(0, comm − compute); split in n chunks, the two-stage pipeline's excess over the computation,
    /// max(comm/n, comm − compute·(n − 1)/n) (the first chunk's communication, or the last one's, has no
    /// computation beside it). With [`Overlap::wgrad_only`], `compute` (the partner's whole backward) counts half.
    pub fn exposed(&self, comm: f64, compute: f64) -> f64 {
        let compute = if self.wgrad_only { compute / 2.0 } else { compute };
        if self.chunks <= 1 {
            (comm - compute).max(0.0)
        } else {
            let n = self.chunks as f64;
            (comm / n).max(comm - compute * (n - 1.0) / n)
        }
    }
}

/// The precisions operators run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpPrecisions {
    /// The transformer layers' four GEMMs (fp8 under fp8 training, `fp8_block` under blockwise scaling, nvfp4 under
    /// fp4 training).
    pub gemm: Precision,
    /// Everything else.
    pub other: Precision,
}

impl OpPrecisions {
    /// The precisions of `cfg` on `gpu` (see [`TrainingConfig::non_gemm_precision`]).
    pub fn of(cfg: &TrainingConfig, gpu: &GpuSpec) -> OpPrecisions {
        OpPrecisions { gemm: cfg.gemm_precision(), other: cfg.non_gemm_precision(gpu.peak_tflops.bf16.is_some()) }
    }
}

/// Bytes per element of activations and gradients exchanged in `cfg`'s precision (fp8 training keeps 16-bit
/// activations and gradients), and of the parameters a ZeRO / FSDP all-gather moves. The data-parallel gradient
/// reduction may be in fp32 instead ([`TrainingConfig::grad_elem_bytes`]).
pub fn comm_elem_bytes(cfg: &TrainingConfig) -> f64 {
    cfg.precision.bytes().max(2.0)
}

pub(crate) fn op(name: OpName, phase: Phase, calls: u32, work: Work, features: Vec<u64>) -> StageOp {
    StageOp { name, phase, calls, work, features, recompute: false, overlaps: None }
}

pub(crate) fn compute(
    name: OpName,
    class: OpClass,
    dtype: Precision,
    dims: &[u64],
    features: Vec<u64>,
    calls: u32,
) -> [StageOp; 2] {
    [Phase::Fwd, Phase::Bwd].map(|phase| {
        op(name, phase, calls, Work::Compute { shape: OpShape::new(class, phase, dims), dtype }, features.clone())
    })
}

/// The eager kernels beyond a fused operator over `rows` × `width` elements: `(fwd, bwd)` kernels per call of an
/// operator that runs `calls` times, each a unary element-wise pass (read and write the tensor once). Full
/// recomputation re-runs them with the rest of the forward; selective recomputation's modules do not (they name
/// the fused operators).
pub(crate) fn eager_ops(dtype: Precision, rows: u64, width: u64, (fwd, bwd): (u32, u32), calls: u32) -> Vec<StageOp> {
    [(Phase::Fwd, fwd), (Phase::Bwd, bwd)]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(phase, n)| {
            let shape = OpShape::new(OpClass::Elementwise, phase, &[rows, width, 1]);
            op(OpName::EagerElementwise, phase, n * calls, Work::Compute { shape, dtype }, vec![rows, width, n as u64])
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn collective(
    name: OpName,
    phase: Phase,
    calls: u32,
    c: Collective,
    bytes: f64,
    group: Group,
    active: u32,
    features: Vec<u64>,
) -> StageOp {
    op(name, phase, calls, Work::Collective { collective: c, bytes, group, active_per_node: active }, features)
}

//! GPU kernel models (MODELS.md §2): what bounds one kernel on one GPU, and how long it should take.
//!
//! Three analytic views, each pure (no IO) and each explaining its answer:
//! - [`roofline`] — hierarchical roofline (Williams et al. 2009; Yang et al. 2019): the lower bound on a kernel's
//!   time from its FLOPs per pipe and its bytes at L1, L2 and DRAM, the binding resource, the arithmetic
//!   intensities and a plain-language verdict (`"memory-bound: DRAM"`).
//! - [`hong_kim`] — Hong & Kim's MWP/CWP warp-parallelism model (ISCA 2009), S0's kernel model, with S0's two-level
//!   cache extension: cycles from per-thread instruction counts, the launch configuration and the machine's
//!   latencies and bandwidth.
//! - [`pipes`] — S2's (SynPerf) per-pipeline demand: cycles each instruction pipe (tensor, FMA, FP64, ALU, XU,
//!   LSU) and memory level (L1, L2, DRAM) needs after the CTAs are spread over the SMs; the max is the kernel's
//!   ceiling, measured / ceiling its efficiency, and the per-pipe cycles are features for the learned model.
//!
//! [`machine`] derives the per-SM and per-level numbers these models need from a [`crate::hw::GpuSpec`]
//! (measured MT4G hierarchy when the spec has one, documented defaults otherwise), and [`sample`] builds every
//! model's input that a profiled [`crate::samples::KernelSample`] allows and sets the result beside the measured
//! duration.
//!
//! Units follow the project's convention: `_us` µs, `_gbs` GB/s (10⁹ B/s), `_cycles` core clock cycles at the
//! GPU's `clock_ghz`, FLOPs and bytes as plain counts.
//!
//! Owns the single-kernel models. May import: `hw`, `samples`. Must not import `cost`, `learn`, `llm` or anything
//! outside the domain core (`ingest`, `store`, `service`, `jobs`, `api`, `app`, `cli`, `eval`, `config`, `metrics`).

pub mod hong_kim;
pub mod machine;
pub mod pipes;
pub mod roofline;
pub mod sample;

use serde::Serialize;
use utoipa::ToSchema;

pub use hong_kim::{
    estimate as hong_kim_estimate, estimate_request as hong_kim_estimate_request, HongKimCase, HongKimEstimate,
    HongKimKernel, HongKimMachine, HongKimMachineInput, HongKimRequest,
};
pub use machine::{Occupancy, ParamSource, Sourced};
pub use pipes::{estimate as pipes_estimate, Pipe, PipeDemand, PipeEstimate, PipeFeatures, PipeWork};
pub use roofline::{estimate as roofline_estimate, Resource, RooflineEstimate, RooflineTerm, RooflineWork};
pub use sample::{estimate_sample, SampleEstimates, SkippedModel};

/// An input a kernel model cannot use: `field` is the path of the offending value relative to the model's input
/// (`kernel.blocks`, `gpu.dram_latency_cycles`, `flops_tensor`), `message` says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema, thiserror::Error)]
#[error("{field}: {message}")]
pub struct KernelModelError {
    /// Path of the offending input value.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl KernelModelError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> KernelModelError {
        KernelModelError { field: field.into(), message: message.into() }
    }
}

/// `v` must be finite and ≥ 0.
pub(crate) fn non_negative(field: &str, v: f64) -> Result<f64, KernelModelError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(KernelModelError::new(field, format!("must be a finite number ≥ 0, got {v}")))
    }
}

/// `v` must be finite and > 0.
pub(crate) fn positive(field: &str, v: f64) -> Result<f64, KernelModelError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(KernelModelError::new(field, format!("must be a finite number > 0, got {v}")))
    }
}

/// `v` must be a fraction in [0, 1].
pub(crate) fn fraction(field: &str, v: f64) -> Result<f64, KernelModelError> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(KernelModelError::new(field, format!("must be a fraction between 0 and 1, got {v}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validators_name_the_field() {
        assert_eq!(non_negative("a", 0.0), Ok(0.0));
        assert_eq!(positive("b", -1.0).unwrap_err().field, "b");
        assert!(positive("b", f64::NAN).is_err());
        assert!(non_negative("c", f64::INFINITY).is_err());
        assert_eq!(fraction("h", 1.0), Ok(1.0));
        let e = fraction("h1", 1.5).unwrap_err();
        assert_eq!(e.to_string(), "h1: must be a fraction between 0 and 1, got 1.5");
    }
}

//! LLM training-iteration prediction (S1, MODELS.md §1, and the Megatron-LM options of §1.6): model and parallel
//! configuration, vocabulary padding and parameters, pipeline partition, memory per GPU, and the search for the
//! fastest configuration that fits; and LLM serving ([`serving`], MODELS.md §5) through the same stages. [`predict()`] runs four stages, one module each: [`decompose`] (operators and
//! collectives per stage, from [`operators`]), [`timing`] (the cost backend, once per distinct operator),
//! [`schedule`] (S1 eq. 7, or the 1F1B / interleaved simulation of [`pipeline`]) and [`report`] (the answer).
//!
//! May import: `hw`, `op`, `comm`, `cost` (it sees operator times only through the `CostBackend` trait). Must not
//! import `learn` or anything outside the domain core.

pub mod calibration;
pub mod config;
pub mod cp;
pub mod cuda_graphs;
pub mod decompose;
pub mod flops;
pub mod framework;
pub mod interval;
pub mod layout;
pub mod memory;
pub mod model_ref;
pub mod moe;
pub mod operators;
pub mod partition;
pub mod pipeline;
pub mod pipeline_layout;
pub mod predict;
pub mod recipe;
pub mod report;
pub mod run;
pub mod schedule;
pub mod search;
pub mod serving;
pub mod sizing;
pub mod timing;
pub mod trace;
pub mod validate;

#[cfg(test)]
mod framework_tests;
#[cfg(test)]
mod options_tests;
#[cfg(test)]
mod overlap_tests;
#[cfg(test)]
mod predict_tests;

pub use config::{ConfigError, ModelSpec, ParallelSpec, RunSpec, TrainingConfig, TrainingRequest};
pub use predict::predict;
pub use report::TrainingPrediction;
pub use validate::{validate, validate_request, validate_run, with_framework};

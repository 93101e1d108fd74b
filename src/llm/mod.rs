//! LLM training-iteration prediction (S1, MODELS.md §1, and the Megatron-LM options of §1.6): model and parallel
//! configuration, operator decomposition, vocabulary padding and parameters, pipeline partition, the 1F1B timeline
//! (eq. 7) and the general schedule simulation, memory per GPU, the composition that turns operator and collective
//! times into an iteration time, and the search for the fastest configuration that fits.

pub mod config;
pub mod costs;
pub mod flops;
pub mod layout;
pub mod memory;
pub mod operators;
pub mod partition;
pub mod pipeline;
pub mod predict;
pub mod run;
pub mod schedule;
pub mod search;
pub mod sizing;
pub mod validate;

#[cfg(test)]
mod predict_tests;

pub use config::{ConfigError, ModelSpec, ParallelSpec, RunSpec, TrainingConfig, TrainingRequest};
pub use predict::{predict, TrainingPrediction};
pub use validate::{validate, validate_run};

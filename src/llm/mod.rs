//! LLM training-iteration prediction (S1, MODELS.md §1): model and parallel configuration, operator
//! decomposition, vocabulary padding and parameters, pipeline partition, the 1F1B timeline (eq. 7), and the
//! composition that turns operator and collective times into an iteration time.

pub mod config;
pub mod flops;
pub mod operators;
pub mod partition;
pub mod predict;
pub mod schedule;
pub mod sizing;

#[cfg(test)]
mod predict_tests;

pub use config::{validate, ConfigError, ModelSpec, ParallelSpec, TrainingConfig, TrainingRequest};
pub use predict::{predict, TrainingPrediction};

//! What a training-iteration prediction is asked about: the model, the parallel configuration and the
//! precision, with the defaults of S1 (GPT-NeoX with ZeRO-1). Every option beyond S1 is optional and defaults to
//! S1's behaviour; [`super::validate`] checks a request and names the offending field.
//!
//! One concept per module: [`model`] (the architecture), [`parallel`] (the parallel configuration and training
//! options), [`options`] (the training options a request and a search share, declared once), [`request`] (the
//! request body), [`resolved`] (the validated [`TrainingConfig`]) and [`error`] ([`ConfigError`]). Every item is
//! re-exported here, so `crate::llm::config::X` names it.

pub mod error;
pub mod model;
pub mod options;
pub mod parallel;
pub mod request;
pub mod resolved;

pub use error::{bad, ConfigError};
pub use model::{default_ffn_hidden, Activation, Attention, ModelSpec, Norm};
pub use parallel::{LayerSplit, MegatronSplit, ParallelSpec, Recompute};
pub use request::{RunSpec, TrainingRequest};
pub use resolved::TrainingConfig;

//! Learning: the correction models of MODELS.md §4 — features, LightGBM training with S1's model selection, and
//! the registry of active models predictions read; the pure training-set builders and the promotion rule the
//! retrain job applies.
//!
//! May import: `hw`, `op`, `samples`, `comm`, `kernel`, `cost`. Must not import `llm` or anything outside the
//! domain core (the retrain job in `jobs` does the IO).

pub mod accuracy_plot;
pub mod backend;
pub mod comm_data;
pub mod comm_features;
pub mod features;
pub mod fit;
pub mod fit_summary;
pub mod kernel_data;
pub mod lgbm;
pub mod op_data;
pub mod promotion;
pub mod registry;

pub use fit::{fit, Accuracy, Fitted, Grid, TrainingSet};
pub use fit_summary::FitSummary;
pub use registry::{op_key, ActiveRegressor, Registry, SharedRegistry};

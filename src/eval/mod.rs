//! Accuracy evaluations against the measured datasets of `../shared/data` (DATA.md's train/test rule: fit on
//! train rows only, report on test rows only), used by `perfcast eval …`; and the bundle builder (`perfcast models
//! bundle`, [`bundle`]), which reads the same datasets' train split.
//!
//! May import the domain core, `ingest`, `store`, `jobs`, `service`, `bundle`. Must not import `api`, `app` or
//! `cli`; nothing but `cli` imports `eval`.

pub mod bundle;
pub mod comm;
pub mod datasets;
pub mod e2e;
pub mod efficiency_fit;
pub mod fit_prior;
pub mod inference;
pub mod intervals;
pub mod kernels;
pub mod logo;
pub mod neighbours;
pub mod operators;
pub mod output;
pub mod plot;
pub mod serving;
pub mod training;

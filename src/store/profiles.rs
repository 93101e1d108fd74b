//! The `profiles` table and the sample tables filled from it (`op_samples`, `comm_samples`, `kernel_samples`).
//!
//! One concept per module: [`records`] (what is stored and given back), [`insert`] (storing an upload),
//! [`read`] (reading profiles and their samples back) and [`training`] (the operator samples and dataset names
//! training reads). Every item is re-exported here, so `crate::store::profiles::X` names it.

pub mod insert;
pub mod read;
pub mod records;
pub mod training;

pub use insert::engine_columns;
pub(crate) use insert::insert_profile_in;
pub use records::{NewProfile, ProfileRecord, SampleBatch, SampleRow, Stored};
pub use training::{OpCount, OpRow, MAX_DATASETS};

//! Hardware descriptions: GPUs (with a sourced catalog) and systems of nodes joined by links.
//!
//! Pure data and validation; no IO.
//!
//! Owns GPU and system descriptions, the catalog and presets. May import: nothing of the crate (the bottom layer).

pub mod catalog;
pub mod directory;
pub mod gpu;
pub mod system;

pub use catalog::{catalog, lookup, CatalogGpu};
pub use directory::{GpuDirectory, KnownGpu};
pub use gpu::{GpuSpec, MemoryHierarchy, MemoryLevel, PeakTflops, Precision, Vendor};
pub use system::{presets, GpuRef, Link, System, SystemError, SystemSpec};

//! perfcast: predicts how fast distributed GPU applications run — GPU kernels, collectives, LLM training
//! iterations — with analytic models corrected by learned ones.
//!
//! Layers (ARCHITECTURE.md has the picture, the data flows and a concept → file table): the pure domain core —
//! [`hw`], [`op`], [`samples`], [`kernel`], [`comm`], [`cost`], [`learn`], [`llm`] — knows nothing of HTTP, SQL or
//! jobs; [`ingest`] parses uploads into samples; [`store`] holds all SQL; [`service`] is what the API and the CLI
//! share; [`jobs`] runs background work; [`api`] is the HTTP layer; [`bundle`] holds the measurements and models
//! embedded in the binary and installs them at the first start; [`app`] wires them together; [`cli`] is the
//! command line on top of everything; [`eval`] reports accuracy on the shared datasets (and builds the bundle).
//! `layering` (a test module) fails the build's tests when a core module imports an outer one or two modules
//! import each other.

pub mod api;
pub mod app;
pub mod bundle;
pub mod cli;
pub mod comm;
pub mod config;
pub mod cost;
pub mod eval;
pub mod hw;
pub mod ingest;
pub mod jobs;
pub mod kernel;
#[cfg(test)]
mod layering;
pub mod learn;
pub mod llm;
pub mod metrics;
pub mod op;
pub mod samples;
pub mod service;
pub mod store;

//! perfcast: predicts how fast distributed GPU applications run — GPU kernels, collectives and LLM training
//! iterations — with analytic models corrected by learned ones.
//!
//! Layers (DESIGN.md): the pure domain core ([`hw`], [`op`], [`kernel`], [`comm`], [`llm`], [`learn`], [`backend`]) knows nothing of HTTP
//! or SQL; [`store`] holds all SQL; [`api`] is the HTTP layer; [`app`] wires them together; [`service`] is the
//! orchestration the API and the CLI share; [`jobs`] runs the background work (retrain, calibrate, search).

pub mod api;
pub mod app;
pub mod backend;
pub mod comm;
pub mod config;
pub mod eval;
pub mod hw;
pub mod ingest;
pub mod jobs;
pub mod kernel;
pub mod learn;
pub mod llm;
pub mod metrics;
pub mod op;
pub mod service;
pub mod store;

//! The integration tests, one binary: a module per resource of the API (and per layer the API stands on), all
//! sharing `common` (the real router over a real SQLite file in a temporary directory).
//!
//! One binary instead of one per file: each test binary links the whole crate and LightGBM, so fourteen of them
//! cost fourteen links and their disk. Every test here owns its state (its own temporary database, its own
//! registry generation for the process-wide operator cache); what the process shares (the Prometheus recorder)
//! is only ever read with lower bounds. Two suites stay binaries of their own: `tests/crash/` (the kill loop:
//! minutes of a real server process, SIGKILLed on purpose) and `tests/cli.rs` (the real binary, its ports and
//! signals).

mod common;

mod auth;
mod browser;
mod bundle;
mod calibration;
mod collector;
mod dashboard;
mod estimates;
mod examples;
mod fixtures_upload;
mod fuzz_json;
mod inference;
mod ingest_props;
mod learning;
mod moe;
mod openapi;
mod operations;
mod plots;
mod predictions;
mod profiles;
mod recipes;
mod search;
mod speculative;
mod store;
mod systems;
mod timeline;
mod training_runs;

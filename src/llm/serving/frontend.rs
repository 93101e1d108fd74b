//! The HTTP front end in front of the engines ([`Frontend`], the request's `frontend`): it receives the
//! benchmark's requests and tokenizes their prompts before the engines see them, on a number of threads that
//! depends on which server it is ([`tokenizer_threads`]).
//!
//! - `engine` (the default): the engine's own API server — vLLM's API server, SGLang's `TokenizerManager`,
//!   `trtllm-serve` — which tokenizes on one thread (the sources are at
//!   [`super::engine::ServingConstants::CALIBRATED`]), so requests that arrive together are tokenized one after
//!   another.
//! - `dynamo`: NVIDIA Dynamo's Rust front end (its OpenAI HTTP service and `OpenAIPreprocessor`). Each request is
//!   its own task, and `OpenAIPreprocessor::preprocess_request` (ai-dynamo/dynamo `lib/llm/src/preprocessor.rs`)
//!   tokenizes its prompt inline (`gather_tokens`, timed by the `TOKENIZE_SECONDS` metric) on whichever tokio worker
//!   thread polls the task. The runtime is tokio's multi-thread runtime with `RuntimeConfig.num_worker_threads`
//!   workers (`RuntimeConfig::create_runtime` in `lib/runtime/src/config.rs`: `Builder::new_multi_thread()
//!   .worker_threads(num_worker_threads or std::thread::available_parallelism())`; `DYN_RUNTIME_NUM_WORKER_THREADS`,
//!   "Defaults to number of cores"). So up to that many requests are tokenized at once, each at one thread's speed.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::llm::config::{bad, ConfigError};

/// Which server fronts the engines ([`Frontend::server`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum FrontendServer {
    /// The engine's own API server (vLLM's API server, SGLang's `TokenizerManager`, `trtllm-serve`): one tokenizer
    /// thread.
    #[default]
    Engine,
    /// NVIDIA Dynamo's Rust front end: requests tokenized concurrently on its tokio worker threads (module doc).
    Dynamo,
}

/// The HTTP front end that receives the benchmark's requests and tokenizes them before the engines (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"server": "dynamo", "tokenizer_threads": 64}))]
pub struct Frontend {
    /// `engine` (default: the engine's own API server, one tokenizer thread) or `dynamo` (NVIDIA Dynamo's front
    /// end: requests tokenized concurrently).
    #[serde(default)]
    pub server: FrontendServer,
    /// Threads that tokenize requests at once, each at the engine's speed per token
    /// (`tokenize_us_per_token`): Dynamo's tokio worker threads, `DYN_RUNTIME_NUM_WORKER_THREADS`, by default the
    /// front end host's cores. 1–[`MAX_TOKENIZER_THREADS`]; `dynamo` only. Default
    /// [`DYNAMO_DEFAULT_TOKENIZER_THREADS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_threads: Option<u32>,
}

/// Dynamo's tokenizer threads when the request does not give them. **An assumption, not a measurement:** tokio's
/// default is the front end host's logical CPUs (`std::thread::available_parallelism`), which perfcast's systems
/// do not record; the Blackwell hosts have more (a DGX B200's two 56-core Xeon Platinum 8570 with two threads a
/// core: 224; a GB200 NVL72 compute tray's two 72-core Grace CPUs: 144), and a container's CPU limit may give
/// fewer. 64 is a round lower bound for a dedicated front-end host; give `frontend.tokenizer_threads` for the host
/// at hand. Not fitted.
pub const DYNAMO_DEFAULT_TOKENIZER_THREADS: u32 = 64;

/// The most tokenizer threads a request may give (a bound on the input).
pub const MAX_TOKENIZER_THREADS: u32 = 1024;

/// The threads `frontend` tokenizes requests on: 1 for the engine's own server (also when `frontend` is absent),
/// the given count or [`DYNAMO_DEFAULT_TOKENIZER_THREADS`] for Dynamo. Errors (422): `tokenizer_threads` with
/// `server: engine`, or outside 1–[`MAX_TOKENIZER_THREADS`] (`frontend.tokenizer_threads`).
pub fn tokenizer_threads(frontend: &Option<Frontend>) -> Result<u32, ConfigError> {
    const FIELD: &str = "frontend.tokenizer_threads";
    let Some(f) = frontend else {
        return Ok(1);
    };
    match (f.server, f.tokenizer_threads) {
        (FrontendServer::Engine, None) => Ok(1),
        (FrontendServer::Engine, Some(_)) => Err(bad(
            FIELD,
            "the engine's own API server tokenizes on one thread: give server \"dynamo\" for a concurrent front end",
        )),
        (FrontendServer::Dynamo, None) => Ok(DYNAMO_DEFAULT_TOKENIZER_THREADS),
        (FrontendServer::Dynamo, Some(t)) if (1..=MAX_TOKENIZER_THREADS).contains(&t) => Ok(t),
        (FrontendServer::Dynamo, Some(t)) => Err(bad(FIELD, format!("must be 1–{MAX_TOKENIZER_THREADS}, got {t}"))),
    }
}

//! The operations the HTTP API and the CLI share: they resolve names through the store and call the domain
//! core, so `perfcast predict request.json` and `POST /v1/predictions/training` give the same answer.
//!
//! May import: the domain core, `ingest`, `store`, `jobs` (to enqueue typed jobs and share their IO), `config`,
//! `metrics`. Must not import `api`, `app`, `cli` or `eval`.

pub mod comm_estimates;
pub mod estimates;
pub mod gpus;
pub mod inference;
pub mod kernel_estimates;
pub mod keys;
pub mod learning;
pub mod predictions;
pub mod profiles;
pub mod replicas;
pub mod startup;
pub mod systems;
pub mod training_runs;

use std::sync::Arc;

use crate::hw::{GpuDirectory, GpuSpec, SystemError};
use crate::jobs::WorkerHandle;
use crate::learn::SharedRegistry;
use crate::llm;
use crate::store::{Store, StoreError};

/// Why an operation failed, sorted by whose fault it is.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A named thing does not exist (`what` = e.g. `system "x"`); `field` is the request field that named it.
    #[error("{what} not found")]
    NotFound { what: String, field: Option<String> },
    /// The thing to create exists already.
    #[error("{0} already exists")]
    Conflict(String),
    /// The thing exists but cannot give what was asked in its current state (e.g. a model key without an active
    /// version has no accuracy plot); `detail` says why and what would change it.
    #[error("{detail}")]
    NotReady { detail: String },
    /// The request is well-formed but impossible; `field` is its path in the request.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// An uploaded file cannot be parsed; line and column of the input where known.
    #[error("{message}")]
    Unparseable { line: Option<u64>, column: Option<u64>, message: String },
    /// Our fault.
    #[error(transparent)]
    Internal(StoreError),
}

impl ServiceError {
    /// `Invalid` for `field`.
    pub fn invalid(field: &str, message: impl Into<String>) -> ServiceError {
        ServiceError::Invalid { field: field.to_string(), message: message.into() }
    }
}

impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => ServiceError::NotFound { what, field: None },
            StoreError::Conflict(what) => ServiceError::Conflict(what),
            other => ServiceError::Internal(other),
        }
    }
}

impl From<llm::ConfigError> for ServiceError {
    fn from(e: llm::ConfigError) -> Self {
        ServiceError::Invalid { field: e.field, message: e.message }
    }
}

impl From<SystemError> for ServiceError {
    fn from(e: SystemError) -> Self {
        ServiceError::Invalid { field: e.field, message: e.message }
    }
}

/// The application's operations over one store, one model registry and the worker.
#[derive(Debug, Clone)]
pub struct Service {
    pub store: Store,
    /// Active learned models (hot-swapped by the worker).
    pub registry: SharedRegistry,
    /// Wakes the background worker.
    pub worker: WorkerHandle,
    /// Known GPUs: the catalog plus imported ones (swapped on import).
    pub gpus: Arc<arc_swap::ArcSwap<GpuDirectory>>,
    /// Set once the imported GPUs and the active models are loaded.
    pub loaded: Arc<std::sync::atomic::AtomicBool>,
    /// Largest search answered inline (candidates); larger ones become jobs.
    pub search_inline_max: u64,
    /// Resolved systems with their calibrations (invalidated by writes; see [`systems::SystemCache`]).
    pub systems: Arc<systems::SystemCache>,
    /// Where the start is (the bundle install and the model loading that `app::start` runs while the server
    /// already listens); [`startup::Phase::Idle`] for a service nobody started.
    pub startup: Arc<startup::Startup>,
    /// Caps of one simulated serving benchmark.
    pub sim_limits: llm::serving::SimLimits,
}

impl Service {
    /// A service over `store` with an empty registry and a worker handle nobody listens to (the CLI's case;
    /// the application wires a real job runner).
    pub fn new(store: Store) -> Service {
        Service::with(store, crate::learn::registry::shared(), WorkerHandle::default())
    }

    /// A service with a registry and a worker handle.
    pub fn with(store: Store, registry: SharedRegistry, worker: WorkerHandle) -> Service {
        Service {
            store,
            registry,
            worker,
            gpus: Arc::new(arc_swap::ArcSwap::from_pointee(GpuDirectory::default())),
            loaded: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            search_inline_max: crate::config::Config::default().search_inline_max_candidates,
            systems: Arc::default(),
            startup: Arc::default(),
            sim_limits: llm::serving::SimLimits::DEFAULT,
        }
    }

    /// The same service with other caps on simulated serving benchmarks.
    pub fn with_sim_limits(mut self, limits: llm::serving::SimLimits) -> Service {
        self.sim_limits = limits;
        self
    }

    /// The same service with another inline-search limit.
    pub fn with_search_inline_max(mut self, candidates: u64) -> Service {
        self.search_inline_max = candidates;
        self
    }

    /// Loads the imported GPUs and the stored active models (startup, and the CLI before predicting); returns
    /// the number of active models.
    pub async fn load_models(&self) -> Result<usize, ServiceError> {
        self.load_models_parsed(std::collections::HashMap::new()).await
    }

    /// [`Service::load_models`], taking the models of `parsed` (by regressor id: those a first start's install
    /// activated and parsed already) instead of parsing their texts again.
    pub async fn load_models_parsed(
        &self,
        parsed: std::collections::HashMap<i64, crate::learn::lgbm::Model>,
    ) -> Result<usize, ServiceError> {
        self.gpus.store(Arc::new(self.store.gpu_directory().await?));
        let reg = crate::jobs::load_registry_at_start(&self.store, parsed).await?;
        let n = reg.len();
        self.registry.store(Arc::new(reg));
        self.loaded.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(n)
    }

    /// Resolves a GPU name (catalog name or alias). Errors: `Invalid` naming `field`.
    pub fn gpu(&self, name: &str, field: &str) -> Result<GpuSpec, ServiceError> {
        self.gpus.load().spec(name).ok_or_else(|| {
            ServiceError::invalid(field, format!("unknown GPU {name:?}: not in the catalog (GET /v1/gpus lists it)"))
        })
    }
}

//! `perfcast models bundle`: builds the bundle a fresh install serves from (`crate::bundle`) out of the train
//! split of `../shared/data` (DATA.md).
//!
//! What goes in:
//! - operators: aiconfigurator's GEMM, prefill / decode attention and MoE tables of all six GPUs as vLLM,
//!   TensorRT-LLM and SGLang measured them, and the latter two's fp8 activation quantization tables (their
//!   leave-one-GPU-out rule is for *evaluation*; a shipped model may train on all six), each sample keeping its
//!   engine, kernel and attention compute precision (the per-engine keys train on them); NeuSight's train split
//!   (`train_collect`, `train_processed`, AMD `train_processed_*`), DeepBench's GEMMs and XLA's sm_90 matmul table —
//!   the files `perfcast eval operators` trains on, plus aiconfigurator;
//! - collectives: the train rows `perfcast eval comm` calibrates on (vTrain's A100/V100 all-reduce LUT, SuperBench's
//!   NDv4/NDmv4 all-reduce, the H100 clusters' rows with at most 2 nodes), each on its own system, and
//!   aiconfigurator's one-node NCCL tables (one system per GPU). Its vLLM custom all-reduce tables are left out:
//!   they time vLLM's own kernel (NCCL only for large messages), which training frameworks do not use, and the
//!   `comm.all_reduce` model has no feature that tells the implementations apart — mixing them would teach the
//!   NCCL model vLLM's small-message times.
//!
//! Thinning: per regressor key (class, phase, dtype, engine), on the kernel the engine runs where a shape was
//! measured by several ([`kernel_mask`](crate::learn::op_data::kernel_mask), as the retrain does), at most
//! `max_rows_per_key` samples, shared out evenly over the key's GPUs (a GPU with fewer rows keeps all of them, the
//! rest go to the others), and within a GPU a uniform sample by a hash of the row's content
//! ([`thin_by_key`](crate::learn::fit::thin_by_key): no aliasing with the tables' grid order); per
//! communication system and collective the same cap. Times keep five significant digits.
//!
//! Then the parts are installed into a fresh database by the same code a first start runs ([`bundle::install`],
//! so every split key is the one a user's database will have), the bundled systems are calibrated, the retrain job
//! trains every key exactly as the worker does (`force`, the configured grid, promotion), and the active versions
//! are exported with the manifest (without their hold-out twins).
//!
//! The operator parts are read and thinned in [`op_parts`], the communication parts in [`comm_parts`].

use std::path::PathBuf;
use std::time::Instant;

use crate::bundle::write::{comm_jsonl, compress_models, gzip, op_jsonl, tar, write_dir};
use crate::bundle::{self, Bundle, Manifest, ModelEntry, Part, ShippedModel};
use crate::jobs::retrain::retrain;
use crate::jobs::{self, Job, JobKind, RetrainJob, RetrainParams, WorkerConfig};
use crate::learn::{registry, Grid};
use crate::store::Store;

mod comm_parts;
mod op_parts;

use comm_parts::{comm_sets, thin_comm};
pub use op_parts::share_out;
use op_parts::{operator_datasets, thin_operators};

/// How to build the bundle.
#[derive(Debug, Clone)]
pub struct Options {
    /// `../shared/data`.
    pub data: PathBuf,
    /// Where the bundle's files go (`models/bundled`).
    pub out: PathBuf,
    /// Most samples per regressor key (and per communication system and collective).
    pub max_rows_per_key: usize,
    /// Hyper-parameter grid of the retrain.
    pub grid: Grid,
    /// The worker settings of a default install (`per_gpu_min_samples`, `max_training_rows`).
    pub per_gpu_min_samples: u64,
    pub max_training_rows: usize,
    /// Git commit of the tree building it (`-dirty` when it has changes).
    pub commit: Option<String>,
    /// Retrain only these keys (exact, e.g. `comm.all_to_all`) and ship every other key's models from `carry`,
    /// which must have been built from the same samples (`samples.tar` byte for byte): the retrain is
    /// deterministic, so a full build would train the same models for them. `None`: train every key.
    pub keys: Option<Vec<String>>,
    /// The bundle whose other keys' models `keys` keeps (the one embedded in this binary).
    pub carry: Option<Bundle>,
}

/// The aiconfigurator GPU folders (DATA.md: all six are train data for a shipped model).
pub const AIC_GPUS: [&str; 6] = ["a100_sxm", "h100_sxm", "b200_sxm", "gb200", "b300_sxm", "l40s"];

/// A stable hash of a sample's content (FNV-1a over its debug form): its rank when thinning.
fn content_key(s: &impl std::fmt::Debug) -> u64 {
    format!("{s:?}").bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// The name of the bundled system for a dataset's machine (prefixed so it cannot take a user's system name).
fn bundled_name(name: &str) -> String {
    format!("bundled-{name}")
}

/// Builds the bundle into `opts.out` and returns its manifest. `progress` gets human-readable steps.
pub async fn build(opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Manifest, String> {
    let started = Instant::now();
    let mut op_sets = operator_datasets(&opts.data, progress)?;
    let before: usize = op_sets.iter().map(|d| d.samples.len()).sum();
    thin_operators(&mut op_sets, opts.max_rows_per_key);
    let after: usize = op_sets.iter().map(|d| d.samples.len()).sum();
    progress(&format!("operators: {before} samples thinned to {after} (at most {} per key)", opts.max_rows_per_key));
    let mut comm = comm_sets(&opts.data, progress)?;
    for c in &mut comm {
        thin_comm(c, opts.max_rows_per_key);
    }

    let mut files = Vec::new();
    let mut parts = Vec::new();
    for d in &op_sets {
        let file = format!("{}.jsonl.gz", d.name);
        let gz = gzip(&op_jsonl(&d.samples)).map_err(|e| e.to_string())?;
        parts.push(Part {
            file: file.clone(),
            dataset: d.name.into(),
            system: None,
            description: d.description.clone(),
            samples: d.samples.len() as u64,
            source_rows: d.source_rows,
        });
        files.push((file, gz));
    }
    for c in &comm {
        let file = format!("comm-{}.jsonl.gz", c.system.name);
        let gz = gzip(&comm_jsonl(&c.samples)).map_err(|e| e.to_string())?;
        parts.push(Part {
            file: file.clone(),
            dataset: c.dataset.into(),
            system: Some(c.system.name.clone()),
            description: format!("collectives measured on {}", c.system.description.clone().unwrap_or_default()),
            samples: c.samples.len() as u64,
            source_rows: c.source_rows,
        });
        files.push((file, gz));
    }
    let samples_tar = tar(&files).map_err(|e| e.to_string())?;
    let mut manifest = Manifest {
        format: 1,
        version: String::new(),
        commit: opts.commit.clone(),
        perfcast_version: env!("CARGO_PKG_VERSION").into(),
        created_at: String::new(),
        command: bundle::REGENERATE.into(),
        max_rows_per_key: opts.max_rows_per_key,
        grid: opts.grid,
        build_seconds: 0.0,
        parts,
        systems: comm.iter().map(|c| c.system.clone()).collect(),
        models: Vec::new(),
        samples_bytes: samples_tar.len() as u64,
        models_bytes: 0,
    };
    progress(&format!("training set: {} bytes in {} parts", samples_tar.len(), manifest.parts.len()));

    // Train exactly as a database with these samples would: the first-start install, calibrations, a retrain.
    let tmp = std::env::temp_dir().join(format!("perfcast-bundle-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let store = Store::open(&tmp.join("bundle.db")).await.map_err(|e| e.to_string())?;
    let result = train(&store, opts, &mut manifest, &samples_tar, progress).await;
    store.close().await;
    let _ = std::fs::remove_dir_all(&tmp);
    let (models, created_at) = result?;
    let (models, created_at) = match (&opts.keys, &opts.carry) {
        (Some(keys), Some(carry)) => carry_other_keys(keys, carry, &samples_tar, models, created_at, &mut manifest)?,
        _ => (models, created_at),
    };
    let json = serde_json::to_vec(&models).map_err(|e| e.to_string())?;
    let models_zst = compress_models(&json).map_err(|e| e.to_string())?;
    manifest.created_at = created_at;
    manifest.build_seconds = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    write_dir(&opts.out, manifest, &samples_tar, &models_zst).map_err(|e| format!("{}: {e}", opts.out.display()))
}

/// The shipped models of a `--keys` build: `carry`'s models of every other key (in `carry`'s order, the retrained
/// keys' new versions where their old ones stood) with their manifest entries, and the newest training time.
/// Errors: `carry` built from other samples (its models of the other keys would not be what these samples train).
fn carry_other_keys(
    keys: &[String],
    carry: &Bundle,
    samples_tar: &[u8],
    trained: Vec<ShippedModel>,
    created_at: String,
    manifest: &mut Manifest,
) -> Result<(Vec<ShippedModel>, String), String> {
    if carry.samples_tar != samples_tar {
        return Err("the samples differ from the carried bundle's: rebuild every key (no --keys)".into());
    }
    let retrained = |k: &str| keys.iter().any(|w| w == k);
    let entries = std::mem::take(&mut manifest.models);
    let mut models = Vec::new();
    let mut entries_out = Vec::new();
    let mut newest = created_at;
    let mut placed = std::collections::BTreeSet::new();
    for (m, e) in carry.models().map_err(|e| e.to_string())?.into_iter().zip(carry.manifest.models.iter()) {
        if !retrained(&m.key) {
            newest = newest.max(m.trained_at.clone());
            models.push(m);
            entries_out.push(e.clone());
        } else if placed.insert(m.key.clone()) {
            for (t, te) in trained.iter().zip(entries.iter()).filter(|(t, _)| t.key == m.key) {
                models.push(t.clone());
                entries_out.push(te.clone());
            }
        }
    }
    for (t, te) in trained.into_iter().zip(entries) {
        if !placed.contains(&t.key) {
            models.push(t);
            entries_out.push(te);
        }
    }
    manifest.models = entries_out;
    Ok((models, newest))
}

/// Installs the training set into `store`, calibrates its systems, retrains every key and returns the active
/// versions as shipped models with the time of the newest.
async fn train(
    store: &Store,
    opts: &Options,
    manifest: &mut Manifest,
    samples_tar: &[u8],
    progress: &mut dyn FnMut(&str),
) -> Result<(Vec<ShippedModel>, String), String> {
    let unversioned = Bundle { manifest: manifest.clone(), samples_tar: samples_tar.to_vec(), models_zst: Vec::new() };
    let startup = crate::service::startup::Startup::default();
    let report = bundle::install(store, &unversioned, false, &startup).await.map_err(|e| e.to_string())?;
    progress(&format!("installed {:?}", report.map(|r| (r.profiles, r.samples, r.seconds))));
    for s in &manifest.systems {
        crate::jobs::calibrate::calibrate_system(store, &s.name).await.map_err(|e| e.to_string())?;
    }
    progress("training every key (the retrain job, forced)");
    let t = Instant::now();
    let job = jobs::enqueue(store, &Job::Retrain(RetrainJob::automatic("bundle"))).await.map_err(|e| e.to_string())?;
    store.claim_job(&[JobKind::Retrain.as_str()]).await.map_err(|e| e.to_string())?;
    let cfg = WorkerConfig {
        grid: opts.grid,
        per_gpu_min_samples: opts.per_gpu_min_samples,
        max_training_rows: opts.max_training_rows,
        time_limit: std::time::Duration::from_secs(24 * 3600),
        ..WorkerConfig::default()
    };
    let params = RetrainParams { force: true, grid: Some(opts.grid), keys: opts.keys.clone() };
    let result = retrain(store, &registry::shared(), &cfg, job.id, &params).await.map_err(|e| e.to_string())?;
    progress(&format!(
        "trained {} versions, {} active, in {:.0} s",
        result.trained,
        result.activated,
        t.elapsed().as_secs_f64()
    ));
    let mut models = Vec::new();
    let mut newest = String::new();
    // The hold-out twins stay out of the bundle (half its size; see `crate::bundle`).
    for (r, _holdout) in store.active_regressors_with_holdout().await.map_err(|e| e.to_string())? {
        let model = r.model.clone().unwrap_or_default();
        manifest.models.push(ModelEntry {
            key: r.key.clone(),
            family: r.family.clone(),
            scope: r.scope.clone(),
            datasets: r.provenance.datasets.clone(),
            samples: r.fit.samples,
            train_rows: r.fit.train_rows,
            validation_rows: r.fit.validation_rows,
            features: r.feature_names.clone(),
            hyper_parameters: r.fit.candidate.clone(),
            validation_mape: r.fit.validation_mape,
            analytic_validation_mape: r.fit.analytic_validation_mape,
            model_bytes: model.len() as u64,
        });
        newest = newest.max(r.created_at.clone());
        models.push(ShippedModel {
            key: r.key,
            family: r.family,
            scope: r.scope,
            features: r.feature_names,
            fit: r.fit,
            datasets: r.provenance.datasets,
            trained_at: r.created_at,
            model,
            holdout_model: String::new(),
        });
    }
    Ok((models, newest))
}

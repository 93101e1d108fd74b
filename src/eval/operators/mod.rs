//! `perfcast eval operators`: operator-level accuracy on the held-out rows of `../shared/data`.
//!
//! It runs the service's own pipeline end to end: the train split (DATA.md) is uploaded into a fresh database
//! through [`Service::upload_profile`], the retrain job trains the regressors exactly as the worker does, and every
//! test row is answered by the learned backend the API uses. Nothing from the test split is uploaded, and no
//! hyper-parameter is chosen on it. The same test rows are also answered by the bundled models a fresh install
//! serves (`crate::bundle`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

mod report;
mod test_rows;

pub use report::markdown;

use super::datasets;
use super::neighbours::Neighbours;
use crate::hw::lookup;
use crate::ingest::{self, Context, Format};
use crate::jobs::retrain::retrain;
use crate::jobs::{self, Job, JobKind, RetrainJob, RetrainParams, WorkerConfig, WorkerHandle};
use crate::learn::fit::Accuracy;
use crate::learn::{registry, Grid};
use crate::samples::{OpSample, Sample};
use crate::service::profiles::UploadParams;
use crate::service::Service;
use crate::store::Store;

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct Options {
    /// `../shared/data`.
    pub data: PathBuf,
    /// Where the report (markdown, JSON, SVG) goes.
    pub out: PathBuf,
    /// The hyper-parameter grid the learned models are fitted with ([`Grid`]; `minimal` for a quick run).
    pub grid: Grid,
    /// Samples an (operator, GPU) pair needs for a per-GPU model of its own (as the retrain job's
    /// `per_gpu_min_samples`); fewer train with the cross-GPU model.
    pub per_gpu_min_samples: u64,
}

/// One (operator class, GPU) row of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The operator class (S1's Table I name, e.g. `linear`).
    pub op: String,
    /// The GPU's catalog name.
    pub gpu: String,
    /// The GPU had training samples of this operator class.
    pub seen: bool,
    /// The analytic roofline's accuracy on the test rows.
    pub analytic: Accuracy,
    /// The models learned here from the train split: accuracy on the same rows.
    pub learned: Accuracy,
    /// The bundled models (what a fresh install serves; trained on the thinned train split and the other bundled
    /// datasets, never on these rows).
    pub bundled: Accuracy,
    /// On the test rows that have train neighbours of the same GPU ([`super::neighbours`]): the neighbours'
    /// answer and the learned model's, on the same rows. `rows` = 0 where none has.
    pub neighbour_reference: Accuracy,
    /// The learned models' accuracy on exactly those rows.
    pub learned_on_neighbour_rows: Accuracy,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// One row per (operator class, GPU) of the test split.
    pub rows: Vec<Row>,
    /// Summaries (label → analytic, learned).
    pub summary: Vec<(String, Accuracy, Accuracy)>,
    /// The same subsets answered by the bundled models (label → bundled).
    pub bundled_summary: Vec<(String, Accuracy)>,
    /// Summaries of the rows with train neighbours (label → neighbour reference, learned on the same rows).
    pub neighbour_summary: Vec<(String, Accuracy, Accuracy)>,
    /// Train-split samples the learned models were fitted on.
    pub training_samples: u64,
    /// Test rows that could not be evaluated (GPU not in the catalog, …).
    pub skipped_test_rows: u64,
}

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    v.retain(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix) && n.contains(".csv")));
    v.sort();
    v
}

/// The training files of DATA.md's operator rows.
pub fn training_files(data: &Path) -> Vec<(PathBuf, &'static str)> {
    let ns = data.join("neusight");
    let mut v: Vec<(PathBuf, &'static str)> = Vec::new();
    v.extend(files(&ns.join("train_collect"), "").into_iter().map(|p| (p, "neusight")));
    v.extend(files(&ns.join("train_processed"), "").into_iter().map(|p| (p, "neusight")));
    v.extend(files(&ns.join("amd"), "train_processed_").into_iter().map(|p| (p, "neusight")));
    v.push((data.join("deepbench/deepbench_gemm.csv"), "deepbench"));
    v.push((data.join("xla_gpu_perf_tables/xla_matmul_perf_table.csv"), "xla"));
    v
}

/// The test files of DATA.md's operator rows.
pub fn test_files(data: &Path) -> Vec<PathBuf> {
    let ns = data.join("neusight");
    let mut v = files(&ns.join("test"), "");
    v.extend(files(&ns.join("amd"), "test_"));
    v
}

/// The operator samples of one NeuSight CSV (DATA.md's column list; latencies in ms).
///
/// Errors: the file unreadable or a row that does not parse (the parser's message naming the line).
pub(crate) fn parse_neusight(path: &Path) -> Result<Vec<OpSample>, String> {
    let raw = datasets::read(path)?;
    let parsed = ingest::parse(Format::NeusightCsv, &raw, &Context::default())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(parsed.samples.into_iter().filter_map(|s| if let Sample::Op(o) = s { Some(o) } else { None }).collect())
}

/// Runs the evaluation; `progress` gets human-readable steps: uploads the train split into a fresh database
/// ([`upload_train_split`]), retrains as the worker does ([`train`]), answers every test row with the analytic,
/// learned and bundled models ([`test_rows::evaluate`]), and writes operators.md, operators.json,
/// operators_rows.csv and operators.svg under `opts.out` ([`report::write`]).
pub async fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Report, String> {
    let tmp = tempfile_dir()?;
    let store = Store::open(&tmp.join("eval.db")).await.map_err(|e| e.to_string())?;
    let service = Service::with(store.clone(), registry::shared(), WorkerHandle::default());
    let training_samples = upload_train_split(&service, &opts.data, progress).await?;
    train(&store, &service, opts, progress).await?;
    let seen = fp32_gpus(&store).await?;
    progress("indexing the train split's own measurements (the train-neighbour reference)");
    let neighbours = train_neighbours(&opts.data)?;
    let snapshot = service.registry.load_full();
    let bundle = crate::bundle::Bundle::embedded().map_err(|e| e.to_string())?;
    let bundled = std::sync::Arc::new(crate::bundle::registry(&bundle).map_err(|e| e.to_string())?);
    let tested = test_rows::evaluate(&opts.data, &neighbours, (&snapshot, &bundled), progress)?;
    let rows = test_rows::rows(&tested.groups, &seen);
    let (summary, bundled_summary, neighbour_summary) = test_rows::summaries(&tested.groups, &seen);
    let report = Report {
        rows,
        summary,
        bundled_summary,
        neighbour_summary,
        training_samples,
        skipped_test_rows: tested.skipped,
    };
    report::write(opts, &report, tested.rows_csv, &tested.points)?;
    store.close().await;
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(report)
}

/// Uploads DATA.md's operator train split ([`training_files`]) through the service, as a user would (NeuSight's
/// CSVs as they are, DeepBench's and XLA's tables converted to perfcast JSON lines); a file the service refuses is
/// reported to `progress` and skipped. Returns the samples uploaded.
async fn upload_train_split(service: &Service, data: &Path, progress: &mut dyn FnMut(&str)) -> Result<u64, String> {
    let mut training_samples = 0u64;
    for (path, kind) in training_files(data) {
        let (raw, format) = match kind {
            "deepbench" => (datasets::to_jsonl(&datasets::deepbench_gemm(&path)?), "perfcast_jsonl"),
            "xla" => (datasets::to_jsonl(&datasets::xla_matmul(&path)?), "perfcast_jsonl"),
            _ => (datasets::read(&path)?, "neusight_csv"),
        };
        let params = UploadParams { format: Some(format.into()), ..Default::default() };
        match service.upload_profile(&raw, &params).await {
            Ok(out) => {
                training_samples += out.profile.samples;
                progress(&format!("uploaded {} ({} samples)", path.display(), out.profile.samples));
            }
            Err(e) => progress(&format!("skipped {}: {e}", path.display())),
        }
    }
    Ok(training_samples)
}

/// Trains the regressors on the uploaded samples as the worker does: a forced retrain job, claimed and run with
/// `opts.grid` and `opts.per_gpu_min_samples` ([`retrain`]); the models it activates land in the service's registry.
async fn train(store: &Store, service: &Service, opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<(), String> {
    progress("training (this takes minutes with the full grid)");
    let job = jobs::enqueue(store, &Job::Retrain(RetrainJob::automatic("eval"))).await.map_err(|e| e.to_string())?;
    store.claim_job(&[JobKind::Retrain.as_str()]).await.map_err(|e| e.to_string())?;
    let cfg =
        WorkerConfig { grid: opts.grid, per_gpu_min_samples: opts.per_gpu_min_samples, ..WorkerConfig::default() };
    let params = RetrainParams { force: true, grid: Some(opts.grid), keys: None };
    let result = retrain(store, &service.registry, &cfg, job.id, &params).await.map_err(|e| e.to_string())?;
    progress(&format!("trained {} models, {} active", result.trained, result.activated));
    Ok(())
}

/// The GPUs with fp32 training samples per operator class (the test rows are fp32): operator → GPU names.
async fn fp32_gpus(store: &Store) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in store.op_sample_counts().await.map_err(|e| e.to_string())? {
        if c.dtype == "fp32" {
            seen.entry(c.op).or_default().insert(c.gpu);
        }
    }
    Ok(seen)
}

/// The train split's own NeuSight measurements indexed by GPU (catalog name) for the train-neighbour reference
/// ([`Neighbours`]); samples of GPUs the catalog lacks are left out.
fn train_neighbours(data: &Path) -> Result<Neighbours, String> {
    let mut neighbours = Neighbours::default();
    for (path, kind) in training_files(data) {
        if kind == "neusight" {
            for s in parse_neusight(&path)? {
                if let Some(g) = lookup(&s.gpu) {
                    neighbours.add(&s, &g.spec.name);
                }
            }
        }
    }
    Ok(neighbours)
}

/// A fresh directory under the system's temporary directory for this process's evaluation database.
fn tempfile_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("perfcast-eval-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

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

use super::datasets;
use super::neighbours::Neighbours;
use super::output::pct;
use crate::cost::CostBackend;
use crate::hw::{lookup, Link, System};
use crate::ingest::{self, Context, Format};
use crate::jobs::retrain::retrain;
use crate::jobs::{self, Job, JobKind, RetrainJob, RetrainParams, WorkerConfig, WorkerHandle};
use crate::learn::backend::LearnedBackend;
use crate::learn::fit::{accuracy, Accuracy};
use crate::learn::{registry, Grid};
use crate::op::OpShape;
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
    pub grid: Grid,
    pub per_gpu_min_samples: u64,
}

/// One (operator class, GPU) row of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub op: String,
    pub gpu: String,
    /// The GPU had training samples of this operator class.
    pub seen: bool,
    pub analytic: Accuracy,
    pub learned: Accuracy,
    /// The bundled models (what a fresh install serves; trained on the thinned train split and the other bundled
    /// datasets, never on these rows).
    pub bundled: Accuracy,
    /// On the test rows that have train neighbours of the same GPU ([`super::neighbours`]): the neighbours'
    /// answer and the learned model's, on the same rows. `rows` = 0 where none has.
    pub neighbour_reference: Accuracy,
    pub learned_on_neighbour_rows: Accuracy,
}

/// Predictions and measurements of one (operator, GPU) group, µs.
#[derive(Default)]
struct Group {
    analytic: Vec<f64>,
    learned: Vec<f64>,
    bundled: Vec<f64>,
    measured: Vec<f64>,
    /// (neighbour reference, learned, measured) of the rows with train neighbours.
    neighbour: (Vec<f64>, Vec<f64>, Vec<f64>),
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
    /// Summaries (label → analytic, learned).
    pub summary: Vec<(String, Accuracy, Accuracy)>,
    /// The same subsets answered by the bundled models (label → bundled).
    pub bundled_summary: Vec<(String, Accuracy)>,
    /// Summaries of the rows with train neighbours (label → neighbour reference, learned on the same rows).
    pub neighbour_summary: Vec<(String, Accuracy, Accuracy)>,
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

pub(crate) fn parse_neusight(path: &Path) -> Result<Vec<OpSample>, String> {
    let raw = datasets::read(path)?;
    let parsed = ingest::parse(Format::NeusightCsv, &raw, &Context::default())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(parsed.samples.into_iter().filter_map(|s| if let Sample::Op(o) = s { Some(o) } else { None }).collect())
}

/// Runs the evaluation; `progress` gets human-readable steps.
pub async fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Report, String> {
    let tmp = tempfile_dir()?;
    let store = Store::open(&tmp.join("eval.db")).await.map_err(|e| e.to_string())?;
    let service = Service::with(store.clone(), registry::shared(), WorkerHandle::default());
    let mut training_samples = 0u64;
    for (path, kind) in training_files(&opts.data) {
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
    progress("training (this takes minutes with the full grid)");
    let job = jobs::enqueue(&store, &Job::Retrain(RetrainJob::automatic("eval"))).await.map_err(|e| e.to_string())?;
    store.claim_job(&[JobKind::Retrain.as_str()]).await.map_err(|e| e.to_string())?;
    let cfg =
        WorkerConfig { grid: opts.grid, per_gpu_min_samples: opts.per_gpu_min_samples, ..WorkerConfig::default() };
    let params = RetrainParams { force: true, grid: Some(opts.grid), keys: None };
    let result = retrain(&store, &service.registry, &cfg, job.id, &params).await.map_err(|e| e.to_string())?;
    progress(&format!("trained {} models, {} active", result.trained, result.activated));

    // GPUs with training samples per operator class.
    // GPUs with training samples per operator class and precision (the test rows are fp32).
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in store.op_sample_counts().await.map_err(|e| e.to_string())? {
        if c.dtype == "fp32" {
            seen.entry(c.op).or_default().insert(c.gpu);
        }
    }
    progress("indexing the train split's own measurements (the train-neighbour reference)");
    let mut neighbours = Neighbours::default();
    for (path, kind) in training_files(&opts.data) {
        if kind == "neusight" {
            for s in parse_neusight(&path)? {
                if let Some(g) = lookup(&s.gpu) {
                    neighbours.add(&s, &g.spec.name);
                }
            }
        }
    }
    let snapshot = service.registry.load_full();
    let bundle = crate::bundle::Bundle::embedded().map_err(|e| e.to_string())?;
    let bundled = std::sync::Arc::new(crate::bundle::registry(&bundle).map_err(|e| e.to_string())?);
    let link = Link::new("none", 1.0, 0.0);
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    let mut skipped = 0u64;
    let mut points: Vec<(f64, f64, f64)> = Vec::new();
    let mut rows_csv = csv::Writer::from_writer(Vec::new());
    let _ = rows_csv.write_record([
        "op",
        "phase",
        "dtype",
        "gpu",
        "d0",
        "d1",
        "d2",
        "d3",
        "measured_us",
        "analytic_us",
        "learned_us",
        "source",
    ]);
    for path in test_files(&opts.data) {
        let samples = parse_neusight(&path)?;
        progress(&format!("evaluating {} ({} rows)", path.display(), samples.len()));
        for s in samples {
            let Some(gpu) = lookup(&s.gpu).map(|g| g.spec.clone()) else {
                skipped += 1;
                continue;
            };
            let shape = OpShape { class: s.op, phase: s.phase, dims: s.dims };
            let Ok(analytic) = crate::cost::roofline::estimate(&shape, s.dtype, &gpu) else {
                skipped += 1;
                continue;
            };
            let system = System {
                name: "-".into(),
                gpu: gpu.clone(),
                gpus_per_node: 1,
                nodes: 1,
                intra_node: link.clone(),
                inter_node: link.clone(),
            };
            let Ok(learned) = LearnedBackend::new(system.clone(), snapshot.clone()).compute(&shape, s.dtype) else {
                skipped += 1;
                continue;
            };
            let Ok(fresh) = LearnedBackend::new(system, bundled.clone()).compute(&shape, s.dtype) else {
                skipped += 1;
                continue;
            };
            let g = groups.entry((s.op.as_str().to_string(), gpu.name.clone())).or_default();
            g.analytic.push(analytic.time_us);
            g.learned.push(learned.time_us);
            g.bundled.push(fresh.time_us);
            g.measured.push(s.time_us);
            if let Some(reference) = neighbours.predict(&s, &gpu.name) {
                g.neighbour.0.push(reference);
                g.neighbour.1.push(learned.time_us);
                g.neighbour.2.push(s.time_us);
            }
            points.push((s.time_us, analytic.time_us, learned.time_us));
            let d = s.dims.map(|v| v.to_string());
            let _ = rows_csv.write_record([
                s.op.as_str(),
                s.phase.as_str(),
                s.dtype.as_str(),
                &gpu.name,
                &d[0],
                &d[1],
                &d[2],
                &d[3],
                &format!("{:.3}", s.time_us),
                &format!("{:.3}", analytic.time_us),
                &format!("{:.3}", learned.time_us),
                &learned.source.to_string(),
            ]);
        }
    }
    let mut rows = Vec::new();
    for ((op, gpu), g) in &groups {
        let (nr, nl, nm) = &g.neighbour;
        rows.push(Row {
            op: op.clone(),
            gpu: gpu.clone(),
            seen: seen.get(op).is_some_and(|s| s.contains(gpu)),
            analytic: accuracy(&g.analytic, &g.measured),
            learned: accuracy(&g.learned, &g.measured),
            bundled: accuracy(&g.bundled, &g.measured),
            neighbour_reference: accuracy(nr, nm),
            learned_on_neighbour_rows: accuracy(nl, nm),
        });
    }
    // (analytic, learned) and (neighbour reference, learned on those rows) over the groups `f` selects.
    let pick = |f: &dyn Fn(&str, &str, bool) -> bool| {
        let (mut a, mut l, mut b, mut m) = (vec![], vec![], vec![], vec![]);
        let (mut nr, mut nl, mut nm) = (vec![], vec![], vec![]);
        for ((op, gpu), g) in &groups {
            let s = seen.get(op).is_some_and(|s| s.contains(gpu));
            if f(op, gpu, s) {
                a.extend(&g.analytic);
                l.extend(&g.learned);
                b.extend(&g.bundled);
                m.extend(&g.measured);
                nr.extend(&g.neighbour.0);
                nl.extend(&g.neighbour.1);
                nm.extend(&g.neighbour.2);
            }
        }
        ((accuracy(&a, &m), accuracy(&l, &m), accuracy(&b, &m)), (accuracy(&nr, &nm), accuracy(&nl, &nm)))
    };
    let gemm = |op: &str| op == "linear" || op == "bmm";
    let mut summary = Vec::new();
    let mut bundled_summary = Vec::new();
    let mut neighbour_summary = Vec::new();
    for (label, f) in [
        (
            "GEMM (linear + bmm), unseen H100",
            Box::new(|op: &str, gpu: &str, _s: bool| gemm(op) && gpu == "H100-SXM5-80GB")
                as Box<dyn Fn(&str, &str, bool) -> bool>,
        ),
        ("GEMM (linear + bmm), all unseen GPUs", Box::new(|op: &str, _g: &str, s: bool| gemm(op) && !s)),
        ("GEMM (linear + bmm), training GPUs' test shapes", Box::new(|op: &str, _g: &str, s: bool| gemm(op) && s)),
        ("vector ops, unseen GPUs", Box::new(|op: &str, _g: &str, s: bool| !gemm(op) && !s)),
        ("vector ops, training GPUs' test shapes", Box::new(|op: &str, _g: &str, s: bool| !gemm(op) && s)),
        ("all test rows", Box::new(|_: &str, _: &str, _: bool| true)),
    ] {
        let ((a, l, b), (nr, nl)) = pick(&*f);
        summary.push((label.to_string(), a, l));
        bundled_summary.push((label.to_string(), b));
        if nr.rows > 0 {
            neighbour_summary.push((label.to_string(), nr, nl));
        }
    }
    let report =
        Report { rows, summary, bundled_summary, neighbour_summary, training_samples, skipped_test_rows: skipped };
    std::fs::create_dir_all(&opts.out).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    std::fs::write(opts.out.join("operators.md"), markdown(&report)).map_err(|e| e.to_string())?;
    std::fs::write(opts.out.join("operators.json"), serde_json::to_vec_pretty(&report).unwrap_or_default())
        .map_err(|e| e.to_string())?;
    std::fs::write(opts.out.join("operators_rows.csv"), rows_csv.into_inner().map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    super::plot::scatter(&opts.out.join("operators.svg"), "Operators, held-out rows: predicted vs measured", &points)?;
    store.close().await;
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(report)
}

fn tempfile_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("perfcast-eval-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

fn signed_pct(v: f64) -> String {
    format!("{:+.1} %", v * 100.0)
}

/// Markdown rows `| label | rows | MAPE | signed | MAPE | signed |` of (label, first, second) summaries; the row
/// count is the first accuracy's.
fn summary_rows(s: &mut String, rows: &[(String, Accuracy, Accuracy)]) {
    for (label, a, b) in rows {
        s.push_str(&format!(
            "| {label} | {} | {} | {} | {} | {} |\n",
            a.rows,
            pct(a.mape),
            signed_pct(a.signed),
            pct(b.mape),
            signed_pct(b.signed)
        ));
    }
}

/// The report as a markdown table.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "Trained on {} samples of the train split; {} test rows skipped (GPU not in the catalog). \"GPU in training\" \
         means the GPU had fp32 training samples of that operator.\n\n",
        r.training_samples, r.skipped_test_rows
    ));
    s.push_str("| subset | rows | analytic MAPE | analytic signed | learned MAPE | learned signed | bundled models MAPE | bundled signed |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for ((label, a, l), (_, b)) in r.summary.iter().zip(&r.bundled_summary) {
        s.push_str(&format!(
            "| {label} | {} | {} | {} | {} | {} | {} | {} |\n",
            a.rows,
            pct(a.mape),
            signed_pct(a.signed),
            pct(l.mape),
            signed_pct(l.signed),
            pct(b.mape),
            signed_pct(b.signed)
        ));
    }
    s.push_str(
        "\n\"learned\": the models this evaluation trains on the train split it uploads; \"bundled models\": the ones a \
         fresh install serves (`models/bundled`, trained on the thinned train split and the other bundled datasets).\n",
    );
    s.push_str(&format!(
        "\nTrain-neighbour reference: test rows with train samples of the same GPU and operator whose every dim is \
         within {}×, answered by those samples' median work-scaled time (a lookup table of the train split; its \
         error is how much the train and test collections disagree at nearly equal shapes).\n\n",
        super::neighbours::TOLERANCE
    ));
    s.push_str("| subset | rows with neighbours | neighbour MAPE | neighbour signed | learned MAPE on them | learned signed |\n|---|---:|---:|---:|---:|---:|\n");
    summary_rows(&mut s, &r.neighbour_summary);
    s.push_str("\n| operator | GPU | GPU in training | rows | analytic MAPE | analytic signed | learned MAPE | learned signed | rows with neighbours | neighbour MAPE (signed) | learned on them |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for row in &r.rows {
        let n = &row.neighbour_reference;
        let (nm, lm) = if n.rows > 0 {
            (format!("{} ({})", pct(n.mape), signed_pct(n.signed)), pct(row.learned_on_neighbour_rows.mape))
        } else {
            ("–".to_string(), "–".to_string())
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {nm} | {lm} |\n",
            row.op,
            row.gpu,
            if row.seen { "yes" } else { "**no**" },
            row.analytic.rows,
            pct(row.analytic.mape),
            signed_pct(row.analytic.signed),
            pct(row.learned.mape),
            signed_pct(row.learned.signed),
            n.rows,
        ));
    }
    s
}

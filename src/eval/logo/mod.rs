//! Leave-one-GPU-out cross-validation (`perfcast eval cross-gpu`): for each regressor key and each GPU that has
//! rows of it, fit on the other GPUs' rows and measure the error on the held-out GPU's rows. It estimates how a
//! model does on a GPU it has never seen without touching any test split, and it is how perfcast chooses its
//! cross-GPU feature set (DATA.md: for aiconfigurator's tables this is the tuning protocol).
//!
//! Two sources ([`Source`]): NeuSight's, DeepBench's and XLA's operator train split ([`neusight`]), and NVIDIA
//! aiconfigurator's tensor-core operator tables over six GPUs ([`aiconfigurator`]). The split of one key for one
//! held-out GPU is [`split::Group::split`]; the fit is the service's own ([`crate::learn::fit`], S1's model
//! selection on a seeded 80/20 split of the training GPUs' rows).

pub mod aiconfigurator;
pub mod neusight;
pub mod split;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::learn::features::OP_FEATURES;
use crate::learn::fit::{accuracy, fit, predict_rows, Accuracy, Grid, TrainingSet};
use crate::learn::lgbm::Model;
use crate::learn::op_data::op_training_set;
use crate::learn::op_key;
use crate::op::KernelFamily;

pub use aiconfigurator::MoeRouting;
pub use split::{Group, Groups};

/// Which measurements a run reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// NeuSight (NVIDIA and AMD collections), DeepBench, XLA: FP32 and some FP16 GEMMs, vector operators.
    Neusight,
    /// aiconfigurator: bf16/fp8/fp8_block/nvfp4 GEMMs, prefill and decode attention, fused MoE on A100-SXM,
    /// H100-SXM, L40S, B200, GB200, B300.
    Aiconfigurator,
}

impl Source {
    /// The name used on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            Source::Neusight => "neusight",
            Source::Aiconfigurator => "aiconfigurator",
        }
    }

    /// Training rows per (key, held-out GPU) when `--max-rows` is not given: all of NeuSight's (at most ~90,000,
    /// a run takes about a minute on 2 cores), 24,000 of aiconfigurator's (~36,000 shapes per GPU and key; the
    /// fits dominate the run time).
    pub fn default_max_rows(self) -> usize {
        match self {
            Source::Neusight => 0,
            Source::Aiconfigurator => 24_000,
        }
    }
}

/// What a run does.
#[derive(Debug, Clone)]
pub struct Options {
    /// `../shared/data`.
    pub data: PathBuf,
    pub source: Source,
    pub grid: Grid,
    /// Features hidden from the models (names of [`OP_FEATURES`]), to compare feature sets.
    pub masked_features: Vec<String>,
    /// Most training rows per fit, shared equally by the training GPUs (0 = all).
    pub max_rows: usize,
    /// aiconfigurator only: which MoE rows, under which keys.
    pub moe_routing: MoeRouting,
    /// Only keys starting with one of these (empty = every key).
    pub keys: Vec<String>,
    /// Only these GPUs take part, held out or training (catalog names or aliases; empty = all).
    pub gpus: Vec<String>,
    /// Where to write every held-out row's prediction (CSV: key, held-out GPU, dims, analytic, learned and
    /// measured µs), for diagnosis; `None` writes nothing.
    pub rows_csv: Option<PathBuf>,
    /// aiconfigurator only: whose tables are read (vLLM's keys carry no engine, the others' do).
    pub engines: Vec<KernelFamily>,
    /// aiconfigurator only: also score every SGLang and TensorRT-LLM key's held-out rows with vLLM's model of the
    /// same operator (what their requests were timed by before, and their last fallback, [`KernelFamily::closest`]).
    pub fallback: bool,
}

/// One (key, held-out GPU) result.
#[derive(Debug, Clone, Serialize)]
pub struct LogoRow {
    pub key: String,
    pub held_out: String,
    /// Rows of the training GPUs the model was fitted on (after thinning).
    pub train_rows: usize,
    /// The training GPUs.
    pub trained_on: Vec<String>,
    /// The analytic model alone on the held-out GPU's rows.
    pub analytic: Accuracy,
    /// The learned correction (fitted without the held-out GPU) on the same rows.
    pub learned: Accuracy,
    /// With [`Options::fallback`]: the same rows timed by the models of the engines a request falls back to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<FallbackScore>,
}

/// The held-out rows of one engine's key timed by another engine's model of the same operator.
#[derive(Debug, Clone, Serialize)]
pub struct FallbackScore {
    /// The stand-in's key (`linear.fwd.fp8` for vLLM's).
    pub key: String,
    /// Fitted on the stand-in engine's rows of the training GPUs (the held-out GPU unseen by either engine).
    pub without_held_out: Accuracy,
    /// Fitted on the stand-in engine's rows of every GPU, the held-out one included, when it has rows there (a
    /// request on a GPU the other engine measured and this one did not).
    pub with_held_out: Option<Accuracy>,
}

/// The mean over held-out GPUs of one key (each GPU weighs the same, whatever its row count).
#[derive(Debug, Clone, Serialize)]
pub struct KeyMean {
    pub key: String,
    pub held_out_gpus: usize,
    pub rows: usize,
    pub analytic: Accuracy,
    pub learned: Accuracy,
}

/// A run's report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub source: Source,
    pub grid: Grid,
    pub max_rows: usize,
    pub masked_features: Vec<String>,
    pub features: Vec<String>,
    pub rows_read: usize,
    pub rows: Vec<LogoRow>,
    pub means: Vec<KeyMean>,
    /// Keys with GPUs that could not be held out (fewer than three GPUs with rows), and why.
    pub skipped: Vec<(String, String)>,
    pub elapsed_s: f64,
}

/// Sets every masked feature to NaN (LightGBM's missing value), so a model cannot use it.
fn mask(set: &mut TrainingSet, masked: &[usize]) {
    let n = set.feature_names.len();
    for row in set.x.chunks_mut(n) {
        for &m in masked {
            row[m] = f64::NAN;
        }
    }
}

/// Indices of `names` in [`OP_FEATURES`]; an unknown name is an error listing the known ones.
fn feature_indices(names: &[String]) -> Result<Vec<usize>, String> {
    names
        .iter()
        .map(|m| {
            OP_FEATURES.iter().position(|f| f == m).ok_or(format!("unknown feature {m:?}; features: {OP_FEATURES:?}"))
        })
        .collect()
}

/// Reads the source's rows and runs LOGO over every key with at least three GPUs.
pub fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Report, String> {
    let start = Instant::now();
    let masked = feature_indices(&opts.masked_features)?;
    let groups = match opts.source {
        Source::Neusight => neusight::load(&opts.data, progress)?,
        Source::Aiconfigurator => aiconfigurator::load(&opts.data, &opts.moe_routing, &opts.engines, progress)?,
    };
    let mut groups = groups;
    if !opts.gpus.is_empty() {
        let keep: Vec<String> = opts
            .gpus
            .iter()
            .map(|g| crate::hw::lookup(g).map(|c| c.spec.name.clone()).ok_or(format!("unknown GPU {g:?}")))
            .collect::<Result<_, _>>()?;
        for group in groups.by_key.values_mut() {
            group.by_gpu.retain(|name, _| keep.contains(name));
        }
    }
    let rows_read = groups.rows();
    progress(&format!("{rows_read} rows in {} keys", groups.by_key.len()));
    let mut rows_csv = match &opts.rows_csv {
        Some(p) => Some(csv::Writer::from_path(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => None,
    };
    let mut report = Report {
        source: opts.source,
        grid: opts.grid,
        max_rows: opts.max_rows,
        masked_features: opts.masked_features.clone(),
        features: OP_FEATURES.iter().map(|s| s.to_string()).collect(),
        rows_read,
        rows: Vec::new(),
        means: Vec::new(),
        skipped: Vec::new(),
        elapsed_s: 0.0,
    };
    for (key, group) in &groups.by_key {
        if !opts.keys.is_empty() && !opts.keys.iter().any(|k| key.starts_with(k.as_str())) {
            continue;
        }
        let held = group.held_out_candidates();
        if held.is_empty() {
            report.skipped.push((
                key.clone(),
                format!("rows on {} GPU(s): {:?}", group.by_gpu.len(), group.by_gpu.keys().collect::<Vec<_>>()),
            ));
            continue;
        }
        for held in held {
            match hold_out(key, group, held, opts, &masked)? {
                Some((mut row, predictions)) => {
                    if opts.fallback {
                        row.fallbacks = fallbacks(key, group, &groups, held, opts, &masked)?;
                        for f in &row.fallbacks {
                            progress(&format!(
                                "  {key} held out {held} timed by {}: {:.1} % ({:+.1} %)",
                                f.key,
                                f.without_held_out.mape * 100.0,
                                f.without_held_out.signed * 100.0
                            ));
                        }
                    }
                    if let Some(w) = rows_csv.as_mut() {
                        for p in predictions {
                            w.serialize(p).map_err(|e| e.to_string())?;
                        }
                    }
                    progress(&format!(
                        "{key} held out {held}: rows {} (trained on {}) analytic {:.1} % ({:+.1} %) learned {:.1} % ({:+.1} %)",
                        row.learned.rows,
                        row.train_rows,
                        row.analytic.mape * 100.0,
                        row.analytic.signed * 100.0,
                        row.learned.mape * 100.0,
                        row.learned.signed * 100.0
                    ));
                    report.rows.push(row);
                }
                None => report.skipped.push((format!("{key} held out {held}"), "too few training rows to fit".into())),
            }
        }
    }
    if let Some(w) = rows_csv.as_mut() {
        w.flush().map_err(|e| e.to_string())?;
    }
    report.means = means(&report.rows);
    report.elapsed_s = start.elapsed().as_secs_f64();
    Ok(report)
}

/// One held-out row's answers (the `rows_csv` file).
#[derive(Debug, Clone, Serialize)]
pub struct RowPrediction {
    pub key: String,
    pub held_out: String,
    pub d0: u64,
    pub d1: u64,
    pub d2: u64,
    pub d3: u64,
    pub d4: u64,
    pub analytic_us: f64,
    pub learned_us: f64,
    pub measured_us: f64,
}

/// Fits `group` without `held` and scores it on `held`; `None` when the training side is too small to fit.
fn hold_out(
    key: &str,
    group: &Group,
    held: &str,
    opts: &Options,
    masked: &[usize],
) -> Result<Option<(LogoRow, Vec<RowPrediction>)>, String> {
    let (train_obs, test_obs) = group.split(held, opts.max_rows);
    let (mut train, summary) = op_training_set(group.class, group.phase, group.dtype, &train_obs);
    let (mut test, _) = op_training_set(group.class, group.phase, group.dtype, &test_obs);
    mask(&mut train, masked);
    mask(&mut test, masked);
    if test.is_empty() {
        return Ok(None);
    }
    let Ok(fitted) = fit(&train, opts.grid, &mut |_| {}) else { return Ok(None) };
    let model = Model::from_text(&fitted.model_text).map_err(|e| format!("{key}: {e}"))?;
    let idx: Vec<usize> = (0..test.len()).collect();
    let pred = predict_rows(&model, &test, &idx).map_err(|e| format!("{key}: {e}"))?;
    let predictions = if opts.rows_csv.is_some() {
        // `op_training_set` keeps the observations' order, dropping those it cannot time; match them by dims.
        let kept: Vec<_> = test_obs
            .iter()
            .filter(|o| {
                let shape = crate::op::OpShape { class: group.class, phase: group.phase, dims: o.dims };
                crate::cost::roofline::estimate(&shape, group.dtype, o.gpu).is_ok_and(|c| c.time_us > 0.0)
            })
            .collect();
        if kept.len() != test.len() {
            return Err(format!("{key}: {} held-out rows timed, {} in the test set", kept.len(), test.len()));
        }
        kept.iter()
            .zip(&pred)
            .enumerate()
            .map(|(i, (o, &p))| RowPrediction {
                key: key.to_string(),
                held_out: held.to_string(),
                d0: o.dims[0],
                d1: o.dims[1],
                d2: o.dims[2],
                d3: o.dims[3],
                d4: o.dims[4],
                analytic_us: test.analytic_us[i],
                learned_us: p,
                measured_us: test.measured_us[i],
            })
            .collect()
    } else {
        Vec::new()
    };
    let row = LogoRow {
        key: key.to_string(),
        held_out: held.to_string(),
        train_rows: train.len(),
        trained_on: summary.gpus.keys().cloned().collect(),
        analytic: accuracy(&test.analytic_us, &test.measured_us),
        learned: accuracy(&pred, &test.measured_us),
        fallbacks: Vec::new(),
    };
    Ok(Some((row, predictions)))
}

/// The engine segment of `key` (`linear.fwd.fp8.sglang[balanced]` → SGLang; none → vLLM), and the key with
/// another engine's segment in its place.
fn with_engine(key: &str, group: &Group, to: KernelFamily) -> (KernelFamily, String) {
    let plain = op_key(group.class, group.phase, group.dtype, None, None);
    let rest = &key[plain.len()..];
    let (from, suffix) = match KernelFamily::ALL
        .iter()
        .filter_map(|f| f.key_segment().map(|seg| (*f, format!(".{seg}"))))
        .find(|(_, seg)| rest.starts_with(seg.as_str()))
    {
        Some((f, seg)) => (f, &rest[seg.len()..]),
        None => (KernelFamily::Vllm, rest),
    };
    (from, format!("{}{suffix}", op_key(group.class, group.phase, group.dtype, Some(to), None)))
}

/// [`FallbackScore`]s of `held`'s rows of an SGLang or TensorRT-LLM `key`: vLLM's model of the same operator (the
/// models without an engine segment, what every request read before the engines had their own, and the last resort
/// of their fallback order) fitted without and with the held-out GPU. None for vLLM's own keys.
fn fallbacks(
    key: &str,
    group: &Group,
    groups: &Groups,
    held: &str,
    opts: &Options,
    masked: &[usize],
) -> Result<Vec<FallbackScore>, String> {
    let (own, vllm_key) = with_engine(key, group, KernelFamily::Vllm);
    if own == KernelFamily::Vllm {
        return Ok(Vec::new());
    }
    let (_, test_obs) = group.split(held, opts.max_rows);
    let (mut test, _) = op_training_set(group.class, group.phase, group.dtype, &test_obs);
    mask(&mut test, masked);
    let mut out = Vec::new();
    if test.is_empty() {
        return Ok(out);
    }
    let score = |train_obs: Vec<crate::learn::op_data::OpObservation<'static>>| -> Result<Option<Accuracy>, String> {
        let (mut train, _) = op_training_set(group.class, group.phase, group.dtype, &train_obs);
        mask(&mut train, masked);
        let Ok(fitted) = fit(&train, opts.grid, &mut |_| {}) else { return Ok(None) };
        let model = Model::from_text(&fitted.model_text).map_err(|e| format!("{key}: {e}"))?;
        let idx: Vec<usize> = (0..test.len()).collect();
        let pred = predict_rows(&model, &test, &idx).map_err(|e| format!("{key}: {e}"))?;
        Ok(Some(accuracy(&pred, &test.measured_us)))
    };
    if let Some(standin) = groups.by_key.get(&vllm_key) {
        if let Some(without_held_out) = score(standin.split(held, opts.max_rows).0)? {
            let has_held = standin.by_gpu.get(held).is_some_and(|r| !r.rows.is_empty());
            let with_held_out = if has_held { score(standin.split("", opts.max_rows).0)? } else { None };
            out.push(FallbackScore { key: vllm_key, without_held_out, with_held_out });
        }
    }
    Ok(out)
}

/// Per key, the unweighted mean over its held-out GPUs of MAPE and signed error.
pub fn means(rows: &[LogoRow]) -> Vec<KeyMean> {
    let mut by_key: BTreeMap<&str, Vec<&LogoRow>> = BTreeMap::new();
    for r in rows {
        by_key.entry(&r.key).or_default().push(r);
    }
    let mean = |v: &[&LogoRow], f: &dyn Fn(&LogoRow) -> Accuracy| {
        let n = v.len() as f64;
        Accuracy {
            mape: v.iter().map(|r| f(r).mape).sum::<f64>() / n,
            signed: v.iter().map(|r| f(r).signed).sum::<f64>() / n,
            rows: v.iter().map(|r| f(r).rows).sum(),
        }
    };
    by_key
        .into_iter()
        .map(|(key, v)| KeyMean {
            key: key.to_string(),
            held_out_gpus: v.len(),
            rows: v.iter().map(|r| r.learned.rows).sum(),
            analytic: mean(&v, &|r| r.analytic),
            learned: mean(&v, &|r| r.learned),
        })
        .collect()
}

fn pct(a: &Accuracy) -> String {
    format!("{:.1} % ({:+.1} %)", a.mape * 100.0, a.signed * 100.0)
}

/// The report as markdown: one row per (key, held-out GPU), then the mean per key.
pub fn markdown(r: &Report) -> String {
    let mut s = format!(
        "Leave one GPU out, source {}: {} rows read; at most {} training rows per fit; grid {:?}; masked features: {}.\n\n",
        r.source.name(),
        r.rows_read,
        if r.max_rows == 0 { "all".to_string() } else { r.max_rows.to_string() },
        r.grid,
        if r.masked_features.is_empty() { "none".to_string() } else { r.masked_features.join(", ") },
    );
    s.push_str("| key | held-out GPU | rows | train rows | analytic MAPE (signed) | learned MAPE (signed) |\n");
    s.push_str("|---|---|---:|---:|---:|---:|\n");
    for x in &r.rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            x.key,
            x.held_out,
            x.learned.rows,
            x.train_rows,
            pct(&x.analytic),
            pct(&x.learned)
        ));
    }
    s.push_str(
        "\nMean over held-out GPUs:\n\n| key | GPUs | rows | analytic MAPE (signed) | learned MAPE (signed) |\n",
    );
    s.push_str("|---|---:|---:|---:|---:|\n");
    for m in &r.means {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            m.key,
            m.held_out_gpus,
            m.rows,
            pct(&m.analytic),
            pct(&m.learned)
        ));
    }
    let fallback_rows: Vec<&LogoRow> = r.rows.iter().filter(|x| !x.fallbacks.is_empty()).collect();
    if !fallback_rows.is_empty() {
        s.push_str(
            "\nThe same held-out rows timed by another engine's model (a request falling back to it), mean over \
             held-out GPUs; 'with the GPU': that engine's model also trained on the held-out GPU's rows:\n\n\
             | key | timed by | GPUs | own model MAPE (signed) | stand-in MAPE (signed) | stand-in with the GPU |\n\
             |---|---|---:|---:|---:|---:|\n",
        );
        let mut by_pair: BTreeMap<(&str, &str), Vec<(&LogoRow, &FallbackScore)>> = BTreeMap::new();
        for x in &fallback_rows {
            for f in &x.fallbacks {
                by_pair.entry((x.key.as_str(), f.key.as_str())).or_default().push((x, f));
            }
        }
        for ((key, standin), v) in by_pair {
            let n = v.len() as f64;
            let mean = |g: &dyn Fn(&(&LogoRow, &FallbackScore)) -> Option<Accuracy>| {
                let a: Vec<Accuracy> = v.iter().filter_map(g).collect();
                (!a.is_empty()).then(|| Accuracy {
                    mape: a.iter().map(|a| a.mape).sum::<f64>() / a.len() as f64,
                    signed: a.iter().map(|a| a.signed).sum::<f64>() / a.len() as f64,
                    rows: a.iter().map(|a| a.rows).sum(),
                })
            };
            let own = mean(&|(x, _)| Some(x.learned)).expect("non-empty");
            let without = mean(&|(_, f)| Some(f.without_held_out)).expect("non-empty");
            let with = mean(&|(_, f)| f.with_held_out).map_or("–".to_string(), |a| pct(&a));
            s.push_str(&format!("| {key} | {standin} | {n} | {} | {} | {with} |\n", pct(&own), pct(&without)));
        }
    }
    if !r.skipped.is_empty() {
        s.push_str("\nNot held out:\n\n| key | why |\n|---|---|\n");
        for (k, why) in &r.skipped {
            s.push_str(&format!("| {k} | {why} |\n"));
        }
    }
    s.push_str(&format!("\n{:.0} s.\n", r.elapsed_s));
    s
}

/// Writes `cross_gpu_<source>.md` and `.json` under `out` ([`crate::eval::output::write_files`]); returns their
/// paths.
pub fn write(r: &Report, out: &Path) -> Result<(PathBuf, PathBuf), String> {
    let none: Option<&[()]> = None;
    let paths =
        crate::eval::output::write_files(out, &format!("cross_gpu_{}", r.source.name()), &markdown(r), r, none)?;
    Ok((paths[0].clone(), paths[1].clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, held: &str, a: (f64, f64, usize), l: (f64, f64, usize)) -> LogoRow {
        LogoRow {
            key: key.into(),
            held_out: held.into(),
            train_rows: 10,
            trained_on: vec![],
            analytic: Accuracy { mape: a.0, signed: a.1, rows: a.2 },
            learned: Accuracy { mape: l.0, signed: l.1, rows: l.2 },
            fallbacks: Vec::new(),
        }
    }

    #[test]
    fn the_mean_weighs_every_held_out_gpu_the_same() {
        // Two GPUs of 100 and 300 rows at 10 % and 30 % learned MAPE: the mean is 20 %, not the row-weighted 25 %.
        let rows = vec![
            row("linear.fwd.bf16", "H100", (0.5, -0.5, 100), (0.1, 0.1, 100)),
            row("linear.fwd.bf16", "L40S", (0.3, -0.1, 300), (0.3, -0.3, 300)),
            row("moe.fwd.fp8", "B200", (0.2, 0.2, 7), (0.05, 0.0, 7)),
        ];
        let m = means(&rows);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].key.as_str(), m[0].held_out_gpus, m[0].rows), ("linear.fwd.bf16", 2, 400));
        assert!((m[0].learned.mape - 0.2).abs() < 1e-12);
        assert!((m[0].learned.signed - (-0.1)).abs() < 1e-12);
        assert!((m[0].analytic.mape - 0.4).abs() < 1e-12);
        assert!((m[0].analytic.signed - (-0.3)).abs() < 1e-12);
        assert_eq!(m[1].rows, 7);
    }

    #[test]
    fn an_engine_key_names_its_vllm_stand_in() {
        let mut g = Groups::default();
        let h100 = &crate::hw::lookup("H100-SXM5-80GB").unwrap().spec;
        let (moe, bf16) = (crate::op::OpClass::Moe, crate::hw::Precision::Bf16);
        g.add("moe.fwd.bf16.sglang[balanced]", moe, crate::op::Phase::Fwd, bf16, h100, [1, 2, 3, 4, 1], 1.0);
        let group = &g.by_key["moe.fwd.bf16.sglang[balanced]"];
        assert_eq!(
            with_engine("moe.fwd.bf16.sglang[balanced]", group, KernelFamily::Vllm),
            (KernelFamily::Sglang, "moe.fwd.bf16[balanced]".to_string())
        );
        assert_eq!(
            with_engine("moe.fwd.bf16", group, KernelFamily::Trtllm),
            (KernelFamily::Vllm, "moe.fwd.bf16.trtllm".to_string())
        );
    }

    #[test]
    fn unknown_masked_features_are_refused() {
        assert_eq!(feature_indices(&["dim0_log2".into()]).unwrap(), vec![0]);
        assert!(feature_indices(&["gpu_name".into()]).unwrap_err().contains("unknown feature"));
    }
}

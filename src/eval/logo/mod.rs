//! Leave-one-GPU-out cross-validation (`perfcast eval cross-gpu`): for each regressor key and each GPU that has
//! rows of it, fit on the other GPUs' rows and measure the error on the held-out GPU's rows. It estimates how a
//! model does on a GPU it has never seen without touching any test split, and it is how perfcast chooses its
//! cross-GPU feature set (DATA.md: for aiconfigurator's tables this is the tuning protocol).
//!
//! Two sources ([`Source`]): NeuSight's, DeepBench's and XLA's operator train split ([`neusight`]), and NVIDIA
//! aiconfigurator's tensor-core operator tables over six GPUs ([`aiconfigurator`]). The split of one key for one
//! held-out GPU is [`split::Group::split`]; the fit is the service's own ([`crate::learn::fit`], S1's model
//! selection on a seeded 80/20 split of the training GPUs' rows).
//!
//! This module holds the run: its source and options, and the loop over keys and held-out GPUs. One (key,
//! held-out GPU) fit and score is [`hold_out`]'s; scoring an engine's key by vLLM's model is [`fallback`]'s; the
//! result types, the per-key means and the written report are [`report`]'s.

pub mod aiconfigurator;
mod fallback;
mod hold_out;
pub mod neusight;
mod report;
pub mod split;

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use crate::learn::features::OP_FEATURES;
use crate::learn::fit::Grid;
use crate::op::KernelFamily;

pub use aiconfigurator::MoeRouting;
use fallback::fallbacks;
pub use fallback::FallbackScore;
use hold_out::hold_out;
pub use hold_out::RowPrediction;
pub use report::{markdown, means, write, KeyMean, LogoRow, Report};
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_masked_features_are_refused() {
        assert_eq!(feature_indices(&["dim0_log2".into()]).unwrap(), vec![0]);
        assert!(feature_indices(&["gpu_name".into()]).unwrap_err().contains("unknown feature"));
    }
}

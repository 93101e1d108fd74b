//! Leave-one-GPU-out cross-validation on the train split: for each training GPU, fit on the other GPUs' rows
//! and measure the error on the held-out GPU's rows. It estimates how a model does on a GPU it has never seen
//! without touching the test split, which is how perfcast chooses its cross-GPU feature set.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::datasets;
use super::operators::training_files;
use crate::hw::{lookup, GpuSpec};
use crate::ingest::{self, Context, Format};
use crate::learn::features::OP_FEATURES;
use crate::learn::fit::{accuracy, fit, predict_rows, Accuracy, Grid, TrainingSet};
use crate::learn::lgbm::Model;
use crate::learn::op_data::{op_training_set, OpObservation};
use crate::samples::{OpSample, Sample};

/// One (key, held-out GPU) result.
#[derive(Debug, Clone, Serialize)]
pub struct LogoRow {
    pub key: String,
    pub held_out: String,
    pub analytic: Accuracy,
    pub learned: Accuracy,
}

fn load_training(data: &Path) -> Result<Vec<OpSample>, String> {
    let mut out = Vec::new();
    for (path, kind) in training_files(data) {
        let samples = match kind {
            "deepbench" => datasets::deepbench_gemm(&path)?,
            "xla" => datasets::xla_matmul(&path)?,
            _ => {
                let raw = datasets::read(&path)?;
                ingest::parse(Format::NeusightCsv, &raw, &Context::default())
                    .map_err(|e| format!("{}: {e}", path.display()))?
                    .samples
                    .into_iter()
                    .filter_map(|s| if let Sample::Op(o) = s { Some(o) } else { None })
                    .collect()
            }
        };
        out.extend(samples);
    }
    Ok(out)
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

/// Runs LOGO over every (class, phase, dtype) with at least three GPUs, masking the features named in
/// `masked_features`.
pub fn run(
    data: &Path,
    grid: Grid,
    masked_features: &[String],
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<LogoRow>, String> {
    let masked: Vec<usize> = masked_features
        .iter()
        .map(|m| {
            OP_FEATURES.iter().position(|f| f == m).ok_or(format!("unknown feature {m:?}; features: {OP_FEATURES:?}"))
        })
        .collect::<Result<_, _>>()?;
    let samples = load_training(data)?;
    let gpus: BTreeMap<String, GpuSpec> =
        samples.iter().filter_map(|s| lookup(&s.gpu).map(|g| (s.gpu.clone(), g.spec.clone()))).collect();
    let mut groups: BTreeMap<String, Vec<&OpSample>> = BTreeMap::new();
    for s in &samples {
        if gpus.contains_key(&s.gpu) {
            groups.entry(crate::learn::op_key(s.op, s.phase, s.dtype, None)).or_default().push(s);
        }
    }
    let mut out = Vec::new();
    for (key, rows) in groups {
        let mut by_gpu: BTreeMap<String, Vec<&OpSample>> = BTreeMap::new();
        for s in &rows {
            by_gpu.entry(gpus[&s.gpu].name.clone()).or_default().push(s);
        }
        if by_gpu.len() < 3 {
            continue;
        }
        let (class, phase, dtype) = (rows[0].op, rows[0].phase, rows[0].dtype);
        for held in by_gpu.keys() {
            let obs = |keep: &dyn Fn(&str) -> bool| -> Vec<OpObservation> {
                rows.iter()
                    .enumerate()
                    .filter(|(_, s)| keep(&gpus[&s.gpu].name))
                    .map(|(i, s)| OpObservation {
                        gpu: &gpus[&s.gpu],
                        dims: s.dims,
                        time_us: s.time_us,
                        split_key: i as u64,
                    })
                    .collect()
            };
            let (mut train, _) = op_training_set(class, phase, dtype, &obs(&|g| g != held));
            let (mut test, _) = op_training_set(class, phase, dtype, &obs(&|g| g == held));
            mask(&mut train, &masked);
            mask(&mut test, &masked);
            let Ok(fitted) = fit(&train, grid, &mut |_| {}) else { continue };
            let model = Model::from_text(&fitted.model_text).map_err(|e| e.to_string())?;
            let idx: Vec<usize> = (0..test.len()).collect();
            let pred = predict_rows(&model, &test, &idx).map_err(|e| e.to_string())?;
            let row = LogoRow {
                key: key.clone(),
                held_out: held.clone(),
                analytic: accuracy(&test.analytic_us, &test.measured_us),
                learned: accuracy(&pred, &test.measured_us),
            };
            progress(&format!(
                "{key} held out {held}: rows {} analytic {:.1} % learned {:.1} %",
                row.learned.rows,
                row.analytic.mape * 100.0,
                row.learned.mape * 100.0
            ));
            out.push(row);
        }
    }
    Ok(out)
}

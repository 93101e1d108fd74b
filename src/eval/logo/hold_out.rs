//! One (key, held-out GPU) of the leave-one-GPU-out run: fit on the other GPUs' rows, score on the held-out
//! GPU's, and the held-out rows' predictions for `--rows-csv` (moved out of `src/eval/logo/mod.rs`).

use super::{Group, LogoRow, Options};
use crate::learn::fit::{accuracy, fit, predict_rows, TrainingSet};
use crate::learn::lgbm::Model;
use crate::learn::op_data::op_training_set;
use serde::Serialize;

/// Sets every masked feature to NaN (LightGBM's missing value), so a model cannot use it.
pub(super) fn mask(set: &mut TrainingSet, masked: &[usize]) {
    let n = set.feature_names.len();
    for row in set.x.chunks_mut(n) {
        for &m in masked {
            row[m] = f64::NAN;
        }
    }
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
pub(super) fn hold_out(
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

//! Fitting a correction model: r = ln(t_measured / t_analytic) from features (MODELS.md §4), with S1's model
//! selection — candidates (a small LightGBM hyper-parameter grid and LightGBM's random-forest mode) trained on a
//! seeded 80/20 split, the best by validation MAPE on time refit on all rows.
//!
//! The split is a fixed property of each row (a hash of its `split_key` with [`SPLIT_SEED`]), so retraining on
//! more data keeps old validation rows in validation: a new model and the active one can be compared on the
//! same held-out rows, neither having trained on them ([`Fitted::holdout_text`]).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::lgbm::{self, LgbmError, Model};

/// Seed of the 80/20 split.
pub const SPLIT_SEED: u64 = 0x5EED_CAFE_F00D_0001;

/// Rows below which no model is fitted: with fewer, a 20 % validation split says nothing.
pub const MIN_ROWS: usize = 30;

/// Most validation rows a fit keeps for its accuracy plot ([`Fitted::validation_points`]), evenly thinned: enough
/// to show the spread, small enough to store with every version (about 70 kB as JSON).
pub const MAX_VALIDATION_POINTS: usize = 2000;

/// Largest |r̂| a model may answer: exp(±3) is a factor of 20 off the analytic time, beyond which the analytic
/// model, not the correction, is wrong.
pub const MAX_ABS_LOG_RATIO: f64 = 3.0;

/// Rows to fit: features (row-major), analytic and measured times, and a stable key per row for the split.
#[derive(Debug, Clone, Default)]
pub struct TrainingSet {
    pub feature_names: Vec<String>,
    /// Row-major, `rows · feature_names.len()` values.
    pub x: Vec<f64>,
    pub analytic_us: Vec<f64>,
    pub measured_us: Vec<f64>,
    /// Stable per-row key (e.g. the sample's content hash); decides the row's side of the split.
    pub split_key: Vec<u64>,
}

impl TrainingSet {
    /// An empty set with these feature names.
    pub fn new(feature_names: &[&str]) -> TrainingSet {
        TrainingSet { feature_names: feature_names.iter().map(|s| s.to_string()).collect(), ..Default::default() }
    }

    /// Adds one row. Rows with a non-positive or non-finite time, or an infinite feature, are skipped (returns
    /// false); NaN features are kept as missing values.
    pub fn push(&mut self, features: &[f64], analytic_us: f64, measured_us: f64, split_key: u64) -> bool {
        let ok = analytic_us.is_finite() && analytic_us > 0.0 && measured_us.is_finite() && measured_us > 0.0;
        if ok && features.len() == self.feature_names.len() && features.iter().all(|v| !v.is_infinite()) {
            self.x.extend_from_slice(features);
            self.analytic_us.push(analytic_us);
            self.measured_us.push(measured_us);
            self.split_key.push(split_key);
            true
        } else {
            false
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.measured_us.len()
    }

    /// True without rows.
    pub fn is_empty(&self) -> bool {
        self.measured_us.is_empty()
    }

    fn n_features(&self) -> usize {
        self.feature_names.len()
    }

    fn row(&self, i: usize) -> &[f64] {
        let n = self.n_features();
        &self.x[i * n..(i + 1) * n]
    }

    /// True when row `i` belongs to the 20 % validation side of the seeded split.
    pub fn is_validation(&self, i: usize) -> bool {
        is_validation_key(self.split_key[i])
    }

    fn subset(&self, rows: &[usize]) -> (Vec<f64>, Vec<f32>) {
        let mut x = Vec::with_capacity(rows.len() * self.n_features());
        let mut y = Vec::with_capacity(rows.len());
        for &i in rows {
            x.extend_from_slice(self.row(i));
            y.push((self.measured_us[i] / self.analytic_us[i]).ln() as f32);
        }
        (x, y)
    }
}

/// SplitMix64 of the key and [`SPLIT_SEED`]: the row is in validation when the result is ≡ 0 (mod 5).
pub fn is_validation_key(key: u64) -> bool {
    let mut z = key ^ SPLIT_SEED;
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    z % 5 == 0
}

/// One LightGBM configuration to try.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Candidate {
    pub name: String,
    /// LightGBM parameters, `key=value` separated by spaces.
    pub params: String,
    pub num_iterations: u32,
}

/// Which hyper-parameter grid to search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Grid {
    /// Six candidates (GBDT with 15–127 leaves, a Huber variant, random forest).
    #[default]
    Full,
    /// Two candidates (one GBDT, one random forest): quick retrains.
    Fast,
    /// One tiny GBDT (few rounds): for smoke tests; it is usually worse than a real fit.
    Minimal,
}

fn candidate(name: &str, params: &str, num_iterations: u32) -> Candidate {
    Candidate { name: name.into(), params: params.into(), num_iterations }
}

/// The candidates of `grid` for a set of `rows` rows (min_data_in_leaf scales down for small sets).
pub fn candidates(grid: Grid, rows: usize) -> Vec<Candidate> {
    let leaf = (rows / 50).clamp(2, 20);
    let common = format!("seed=7 deterministic=true force_row_wise=true num_threads=2 min_data_in_leaf={leaf}");
    let gbdt = |leaves: u32, lr: f64, extra: &str| {
        format!(
            "objective=regression boosting=gbdt num_leaves={leaves} learning_rate={lr} feature_fraction=0.9 \
             bagging_fraction=0.8 bagging_freq=1 lambda_l2=1.0 {extra} {common}"
        )
    };
    let rf = format!(
        "objective=regression boosting=rf num_leaves=63 bagging_fraction=0.7 bagging_freq=1 feature_fraction=0.8 {common}"
    );
    match grid {
        Grid::Full => vec![
            candidate("gbdt-15-leaves", &gbdt(15, 0.1, ""), 300),
            candidate("gbdt-31-leaves", &gbdt(31, 0.05, ""), 600),
            candidate("gbdt-63-leaves", &gbdt(63, 0.05, ""), 800),
            candidate("gbdt-127-leaves", &gbdt(127, 0.03, "max_depth=12"), 1000),
            candidate("gbdt-31-huber", &gbdt(31, 0.05, "objective=huber alpha=0.3"), 600),
            candidate("random-forest", &rf, 300),
        ],
        Grid::Fast => vec![candidate("gbdt-31-leaves", &gbdt(31, 0.1, ""), 200), candidate("random-forest", &rf, 100)],
        Grid::Minimal => vec![candidate("gbdt-minimal", &gbdt(4, 0.1, ""), 2)],
    }
}

/// Accuracy of time predictions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema, Default)]
pub struct Accuracy {
    /// Mean |pred − meas| / meas, 0–∞ (0.05 = 5 %).
    pub mape: f64,
    /// Mean (pred − meas) / meas: positive = over-prediction.
    pub signed: f64,
    /// Rows evaluated.
    pub rows: usize,
}

/// MAPE and signed mean relative error of `pred` against `meas`.
pub fn accuracy(pred: &[f64], meas: &[f64]) -> Accuracy {
    let n = pred.len().min(meas.len());
    if n == 0 {
        return Accuracy::default();
    }
    let (mut abs, mut signed) = (0.0, 0.0);
    for i in 0..n {
        let rel = (pred[i] - meas[i]) / meas[i];
        abs += rel.abs();
        signed += rel;
    }
    Accuracy { mape: abs / n as f64, signed: signed / n as f64, rows: n }
}

/// Keeps at most `max` items, every k-th one (k = ⌈len / max⌉), so a large sample set is thinned evenly across
/// its upload order rather than truncated to its oldest rows. `max == 0` keeps everything.
pub fn thin_evenly<T>(items: Vec<T>, max: usize) -> Vec<T> {
    if max == 0 || items.len() <= max {
        return items;
    }
    let k = items.len().div_ceil(max);
    items.into_iter().step_by(k).collect()
}

/// Times a model predicts for `rows` of `set`: analytic · exp(clamped r̂).
pub fn predict_rows(model: &Model, set: &TrainingSet, rows: &[usize]) -> Result<Vec<f64>, LgbmError> {
    let (x, _) = set.subset(rows);
    let r = model.predict(&x)?;
    Ok(rows
        .iter()
        .zip(r)
        .map(|(&i, r)| set.analytic_us[i] * r.clamp(-MAX_ABS_LOG_RATIO, MAX_ABS_LOG_RATIO).exp())
        .collect())
}

/// One validation row as the chosen candidate's hold-out model saw it: the times its accuracy plot draws.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ValidationPoint {
    /// The measured time, µs.
    pub measured_us: f64,
    /// The analytic model's time, µs.
    pub analytic_us: f64,
    /// The hold-out model's time (analytic · exp(r̂)), µs.
    pub predicted_us: f64,
}

/// The outcome of [`fit`].
#[derive(Debug, Clone)]
pub struct Fitted {
    /// The chosen candidate refit on all rows (LightGBM text): the model to serve.
    pub model_text: String,
    /// The chosen candidate trained on the 80 % side only: what promotion compares on held-out rows.
    pub holdout_text: String,
    pub chosen: Candidate,
    /// The chosen candidate's accuracy on the validation rows.
    pub validation: Accuracy,
    /// The analytic model's accuracy on the same rows.
    pub analytic_validation: Accuracy,
    /// Every candidate's validation MAPE.
    pub candidates: Vec<(String, f64)>,
    pub train_rows: usize,
    pub validation_rows: usize,
    /// Gain importance of each feature in the final model.
    pub importance: Vec<(String, f64)>,
    /// The validation rows with the chosen candidate's hold-out predictions (what [`Fitted::validation`]
    /// measures), in the set's order, evenly thinned to at most [`MAX_VALIDATION_POINTS`].
    pub validation_points: Vec<ValidationPoint>,
}

/// Why no model was fitted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    #[error("{0} usable rows; at least {MIN_ROWS} are needed")]
    TooFewRows(usize),
    #[error("the seeded split left no validation (or no training) rows")]
    EmptySplit,
    #[error(transparent)]
    Lgbm(#[from] LgbmError),
}

/// Rows of each side of the split.
pub fn split(set: &TrainingSet) -> (Vec<usize>, Vec<usize>) {
    (0..set.len()).partition(|&i| !set.is_validation(i))
}

/// Selects the best candidate of `grid` on the seeded split and refits it on all rows. `progress` receives
/// 0–1 as candidates finish.
///
/// Errors: fewer than [`MIN_ROWS`] rows, an empty side of the split, a LightGBM failure.
pub fn fit(set: &TrainingSet, grid: Grid, progress: &mut dyn FnMut(f64)) -> Result<Fitted, FitError> {
    if set.len() < MIN_ROWS {
        return Err(FitError::TooFewRows(set.len()));
    }
    let (train_rows, val_rows) = split(set);
    if train_rows.is_empty() || val_rows.is_empty() {
        return Err(FitError::EmptySplit);
    }
    let (x, y) = set.subset(&train_rows);
    let n = set.n_features();
    let cands = candidates(grid, set.len());
    let meas: Vec<f64> = val_rows.iter().map(|&i| set.measured_us[i]).collect();
    let mut scores = Vec::with_capacity(cands.len());
    let mut best: Option<(usize, String, Accuracy, Vec<f64>)> = None;
    for (k, c) in cands.iter().enumerate() {
        let text = lgbm::train(&x, &y, n, &c.params, c.num_iterations)?;
        let pred = predict_rows(&Model::from_text(&text)?, set, &val_rows)?;
        let acc = accuracy(&pred, &meas);
        scores.push((c.name.clone(), acc.mape));
        if best.as_ref().is_none_or(|(_, _, b, _)| acc.mape < b.mape) {
            best = Some((k, text, acc, pred));
        }
        progress((k + 1) as f64 / (cands.len() + 1) as f64);
    }
    let (k, holdout_text, validation, best_pred) = best.ok_or(FitError::EmptySplit)?;
    let chosen = cands[k].clone();
    let all: Vec<usize> = (0..set.len()).collect();
    let (xa, ya) = set.subset(&all);
    let model_text = lgbm::train(&xa, &ya, n, &chosen.params, chosen.num_iterations)?;
    let importance = Model::from_text(&model_text)?.importance_gain()?;
    progress(1.0);
    let analytic: Vec<f64> = val_rows.iter().map(|&i| set.analytic_us[i]).collect();
    let points = (0..val_rows.len())
        .map(|j| ValidationPoint { measured_us: meas[j], analytic_us: analytic[j], predicted_us: best_pred[j] })
        .collect();
    Ok(Fitted {
        model_text,
        holdout_text,
        chosen,
        validation,
        analytic_validation: accuracy(&analytic, &meas),
        candidates: scores,
        train_rows: train_rows.len(),
        validation_rows: val_rows.len(),
        importance: set.feature_names.iter().cloned().zip(importance).collect(),
        validation_points: thin_evenly(points, MAX_VALIDATION_POINTS),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_every_kth_row_and_at_most_max() {
        let v: Vec<u32> = (0..10).collect();
        // ⌈10/4⌉ = 3 → rows 0, 3, 6, 9.
        assert_eq!(thin_evenly(v.clone(), 4), vec![0, 3, 6, 9]);
        assert_eq!(thin_evenly(v.clone(), 5), vec![0, 2, 4, 6, 8]);
        assert_eq!(thin_evenly(v.clone(), 10), v);
        assert_eq!(thin_evenly(v.clone(), 0), v);
        assert_eq!(thin_evenly(v, 1), vec![0]);
    }

    #[test]
    fn accuracy_by_hand() {
        // Errors +10 %, −20 %, 0 %: MAPE 10 %, signed −3.33 %.
        let a = accuracy(&[110.0, 80.0, 50.0], &[100.0, 100.0, 50.0]);
        assert!((a.mape - 0.1).abs() < 1e-12);
        assert!((a.signed + 0.1 / 3.0).abs() < 1e-12);
        assert_eq!(a.rows, 3);
    }

    #[test]
    fn split_is_about_one_in_five_and_stable() {
        let val = (0..10_000u64).filter(|&k| is_validation_key(k)).count();
        assert!((1800..2200).contains(&val), "{val}");
        assert_eq!(is_validation_key(42), is_validation_key(42));
    }

    #[test]
    fn a_learnable_correction_beats_the_analytic_baseline() {
        // measured = analytic · (1.5 when feature0 > 0.5 else 0.8): the analytic MAPE is large, a fit recovers it.
        let mut set = TrainingSet::new(&["f0", "f1"]);
        for i in 0..400u64 {
            let f0 = (i % 100) as f64 / 100.0;
            let f1 = (i / 100) as f64;
            let analytic = 10.0 + f1;
            let factor = if f0 > 0.5 { 1.5 } else { 0.8 };
            assert!(set.push(&[f0, f1], analytic, analytic * factor, i));
        }
        assert!(!set.push(&[0.0, 0.0], 1.0, -1.0, 999), "non-positive time must be refused");
        let mut last = 0.0;
        let fitted = fit(&set, Grid::Fast, &mut |p| last = p).unwrap();
        assert_eq!(last, 1.0);
        assert!(fitted.analytic_validation.mape > 0.25, "{:?}", fitted.analytic_validation);
        assert!(fitted.validation.mape < 0.02, "{:?}", fitted.validation);
        assert_eq!(fitted.train_rows + fitted.validation_rows, 400);
        assert_eq!(fitted.candidates.len(), 2);
        // The kept validation rows are the validation side's, with the predictions its MAPE was computed from.
        assert_eq!(fitted.validation_points.len(), fitted.validation_rows);
        let val_meas: Vec<f64> = (0..set.len()).filter(|&i| set.is_validation(i)).map(|i| set.measured_us[i]).collect();
        let kept_meas: Vec<f64> = fitted.validation_points.iter().map(|p| p.measured_us).collect();
        assert_eq!(kept_meas, val_meas);
        let pred: Vec<f64> = fitted.validation_points.iter().map(|p| p.predicted_us).collect();
        assert!((accuracy(&pred, &kept_meas).mape - fitted.validation.mape).abs() < 1e-12);
        let ana: Vec<f64> = fitted.validation_points.iter().map(|p| p.analytic_us).collect();
        assert!((accuracy(&ana, &kept_meas).mape - fitted.analytic_validation.mape).abs() < 1e-12);
        let f0_gain = fitted.importance.iter().find(|(n, _)| n == "f0").unwrap().1;
        let f1_gain = fitted.importance.iter().find(|(n, _)| n == "f1").unwrap().1;
        assert!(f0_gain > f1_gain);
    }

    #[test]
    fn validation_points_are_thinned_evenly_to_the_maximum() {
        let mut set = TrainingSet::new(&["f0"]);
        for i in 0..12_000u64 {
            set.push(&[(i % 97) as f64], 10.0, 10.0 + (i % 7) as f64, i);
        }
        let fitted = fit(&set, Grid::Minimal, &mut |_| {}).unwrap();
        assert!(fitted.validation_rows > MAX_VALIDATION_POINTS, "{}", fitted.validation_rows);
        let val_meas: Vec<f64> = (0..set.len()).filter(|&i| set.is_validation(i)).map(|i| set.measured_us[i]).collect();
        let kept: Vec<f64> = fitted.validation_points.iter().map(|p| p.measured_us).collect();
        assert_eq!(kept, thin_evenly(val_meas, MAX_VALIDATION_POINTS));
        assert!(kept.len() <= MAX_VALIDATION_POINTS);
    }

    #[test]
    fn too_few_rows_is_an_error() {
        let mut set = TrainingSet::new(&["f0"]);
        for i in 0..10u64 {
            set.push(&[i as f64], 1.0, 1.0, i);
        }
        assert_eq!(fit(&set, Grid::Fast, &mut |_| {}).unwrap_err(), FitError::TooFewRows(10));
    }
}

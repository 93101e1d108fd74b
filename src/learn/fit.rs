//! Fitting a correction model: r = ln(t_measured / t_analytic) from features (MODELS.md §4), with S1's model
//! selection — candidates (a small LightGBM hyper-parameter grid and LightGBM's random-forest mode) trained on a
//! seeded 80/20 split, the best by validation MAPE on time (the smallest within [`PARSIMONY`] of it) refit on all
//! rows.
//!
//! The split is a fixed property of each row (a hash of its `split_key` with [`SPLIT_SEED`]), so retraining on
//! more data keeps old validation rows in validation: a new model and the active one can be compared on the
//! same held-out rows, neither having trained on them ([`Fitted::holdout_text`]).
//!
//! Boosted candidates stop early: each round LightGBM scores the validation rows (L1 error of the log ratio) and
//! a candidate stops [`EARLY_STOPPING_ROUNDS`] rounds after its best round, keeping the rounds up to it; its
//! `num_iterations` is a ceiling. The refit on all rows runs the chosen candidate for the rounds its early stop
//! kept. This bounds a retrain's time and a model's size by what the data supports (a 1,000-round model of a
//! smooth table is mostly noise-fitting) — the validation rows that choose the candidate also choose its round
//! count, so its recorded validation error is slightly optimistic; promotion compares hold-out models on the same
//! rows either way. The random forest averages independent trees and runs all its rounds.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::lgbm::{self, EarlyStopping, LgbmError, Model};

mod thinning;
mod training_set;

pub use thinning::{thin_by_key, thin_evenly};
pub use training_set::{is_validation_key, split, TrainingSet, SPLIT_SEED};

/// Rows below which no model is fitted: with fewer, a 20 % validation split says nothing.
pub const MIN_ROWS: usize = 30;

/// Most validation rows a fit keeps for its accuracy plot ([`Fitted::validation_points`]), evenly thinned: enough
/// to show the spread, small enough to store with every version (about 70 kB as JSON).
pub const MAX_VALIDATION_POINTS: usize = 2000;

/// Boosting rounds without a lower validation error after which a boosted candidate stops.
pub const EARLY_STOPPING_ROUNDS: u32 = 40;

/// Largest |r̂| a model may answer: exp(±3) is a factor of 20 off the analytic time, beyond which the analytic
/// model, not the correction, is wrong.
pub const MAX_ABS_LOG_RATIO: f64 = 3.0;

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
    /// Five candidates (GBDT with 15, 31 and 63 leaves, a Huber variant, random forest).
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

/// The candidates of `grid` for a set of `rows` rows (min_data_in_leaf scales down for small sets). Their
/// `params` name no thread count: [`fit_with`] adds it (`deterministic=true` makes the result independent of it).
///
/// Boosted candidates learn at 0.1 for at most 300 rounds and stop early ([`EARLY_STOPPING_ROUNDS`]): on the
/// bundled training sets (2026-11-23) the former grid — rates 0.03–0.05 for 600–1,000 rounds, 127 leaves — reached
/// validation errors within a few per cent of these at three to ten times the trees, the retrain time and the
/// model size.
pub fn candidates(grid: Grid, rows: usize) -> Vec<Candidate> {
    let leaf = (rows / 50).clamp(2, 20);
    let common = format!("seed=7 deterministic=true force_row_wise=true min_data_in_leaf={leaf}");
    let gbdt = |objective: &str, leaves: u32, lr: f64| {
        format!(
            "objective={objective} boosting=gbdt num_leaves={leaves} learning_rate={lr} feature_fraction=0.9 \
             bagging_fraction=0.8 bagging_freq=1 lambda_l2=1.0 {common}"
        )
    };
    let rf = format!(
        "objective=regression boosting=rf num_leaves=63 bagging_fraction=0.7 bagging_freq=1 feature_fraction=0.8 {common}"
    );
    match grid {
        Grid::Full => vec![
            candidate("gbdt-15-leaves", &gbdt("regression", 15, 0.1), 300),
            candidate("gbdt-31-leaves", &gbdt("regression", 31, 0.1), 300),
            candidate("gbdt-63-leaves", &gbdt("regression", 63, 0.1), 300),
            // Huber on the log ratio: residuals beyond 0.3 (about 35 %) count linearly, so a few wild rows (a
            // throttled run, a CPU-bound small kernel) pull the fit less.
            candidate("gbdt-31-huber", &format!("{} alpha=0.3", gbdt("huber", 31, 0.1)), 300),
            candidate("random-forest", &rf, 100),
        ],
        Grid::Fast => {
            vec![candidate("gbdt-31-leaves", &gbdt("regression", 31, 0.1), 200), candidate("random-forest", &rf, 50)]
        }
        Grid::Minimal => vec![candidate("gbdt-minimal", &gbdt("regression", 4, 0.1), 2)],
    }
}

/// Among candidates whose validation MAPE is within this fraction of the best one's, the smallest model (fewest
/// bytes of model text: trees × leaves) is kept. Differences of a few per cent are within what another seeded
/// 20 % split would change, while the smaller model predicts faster, trains its refit faster and ships smaller.
pub const PARSIMONY: f64 = 0.03;

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
    /// The chosen candidate refit on all rows (LightGBM text without what predictions do not read,
    /// [`lgbm::slim`]): the model to serve.
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

/// How a fit uses the machine: candidates trained at once, each on one LightGBM thread (small LightGBM jobs scale
/// better across processes than across threads: no barrier per histogram), then the refit on `parallel` threads;
/// and a function every training thread runs first (the service lowers their scheduling priority, so requests
/// keep their latency while a retrain runs).
#[derive(Debug, Clone, Copy)]
pub struct Threads {
    /// Training threads at once (≥ 1).
    pub parallel: usize,
    /// Run first on every training thread.
    pub on_start: fn(),
}

impl Default for Threads {
    /// One thread per core, nothing run first.
    fn default() -> Threads {
        Threads { parallel: std::thread::available_parallelism().map_or(1, |n| n.get()), on_start: || {} }
    }
}

/// Runs `job(0..n)` on at most `threads.parallel` scoped threads (each running `threads.on_start` first) and
/// returns the results in index order.
fn run_parallel<T: Send>(n: usize, threads: Threads, job: &(dyn Fn(usize) -> T + Sync)) -> Vec<T> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<T>>> = std::sync::Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.parallel.clamp(1, n.max(1)) {
            scope.spawn(|| {
                (threads.on_start)();
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if k >= n {
                        break;
                    }
                    let r = job(k);
                    if let Ok(mut v) = results.lock() {
                        v[k] = Some(r);
                    }
                }
            });
        }
    });
    results.into_inner().unwrap_or_default().into_iter().flatten().collect()
}

/// Selects the best candidate of `grid` on the seeded split and refits it on all rows, on the default
/// [`Threads`]. `progress` receives 0–1 as the work finishes.
///
/// Errors: fewer than [`MIN_ROWS`] rows, an empty side of the split, a LightGBM failure.
pub fn fit(set: &TrainingSet, grid: Grid, progress: &mut dyn FnMut(f64)) -> Result<Fitted, FitError> {
    fit_with(set, grid, Threads::default(), progress)
}

/// [`fit`] on `threads`.
pub fn fit_with(
    set: &TrainingSet,
    grid: Grid,
    threads: Threads,
    progress: &mut dyn FnMut(f64),
) -> Result<Fitted, FitError> {
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
    let (vx, vy) = set.subset(&val_rows);
    let train_one = |k: usize| -> Result<(lgbm::Trained, Accuracy, Vec<f64>), FitError> {
        let c = &cands[k];
        // The random forest averages independent trees: no round is "best", it runs them all.
        let early = (!c.params.contains("boosting=rf")).then_some(EarlyStopping {
            x: &vx,
            y: &vy,
            patience: EARLY_STOPPING_ROUNDS,
        });
        let params = format!("{} num_threads=1", c.params);
        let trained = lgbm::train_with(&x, &y, n, &params, c.num_iterations, early)?;
        let pred = predict_rows(&Model::from_text(&trained.text)?, set, &val_rows)?;
        let acc = accuracy(&pred, &meas);
        Ok((trained, acc, pred))
    };
    let results = run_parallel(cands.len(), threads, &train_one);
    progress(cands.len() as f64 / (cands.len() + 1) as f64);
    let mut trained = Vec::with_capacity(cands.len());
    for r in results {
        trained.push(r?);
    }
    let scores: Vec<(String, f64)> =
        cands.iter().zip(&trained).map(|(c, (_, a, _))| (c.name.clone(), a.mape)).collect();
    // The smallest model within PARSIMONY of the best validation MAPE (the first of equals).
    let best_mape = trained.iter().map(|(_, a, _)| a.mape).fold(f64::INFINITY, f64::min);
    let k = (0..trained.len())
        .filter(|&k| trained[k].1.mape <= best_mape * (1.0 + PARSIMONY))
        .min_by_key(|&k| trained[k].0.text.len())
        .ok_or(FitError::EmptySplit)?;
    let (holdout, validation, best_pred) = trained.swap_remove(k);
    let holdout_text = lgbm::slim(&holdout.text);
    // The refit runs the rounds the early stop kept (recorded as the chosen candidate's `num_iterations`).
    let chosen = Candidate { num_iterations: holdout.iterations, ..cands[k].clone() };
    let all: Vec<usize> = (0..set.len()).collect();
    let (xa, ya) = set.subset(&all);
    let refit_params = format!("{} num_threads={}", chosen.params, threads.parallel.max(1));
    let refit = |_: usize| lgbm::train(&xa, &ya, n, &refit_params, chosen.num_iterations);
    let model_text =
        run_parallel(1, Threads { parallel: 1, ..threads }, &refit).pop().ok_or(FitError::EmptySplit)??;
    let importance = Model::from_text(&model_text)?.importance_gain()?;
    let model_text = lgbm::slim(&model_text);
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
    fn accuracy_by_hand() {
        // Errors +10 %, −20 %, 0 %: MAPE 10 %, signed −3.33 %.
        let a = accuracy(&[110.0, 80.0, 50.0], &[100.0, 100.0, 50.0]);
        assert!((a.mape - 0.1).abs() < 1e-12);
        assert!((a.signed + 0.1 / 3.0).abs() < 1e-12);
        assert_eq!(a.rows, 3);
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

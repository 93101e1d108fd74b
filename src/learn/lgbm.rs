//! The LightGBM boundary: training through the C API with explicit dataset parameters, and a thread-safe model
//! for predictions.
//!
//! Why not `lightgbm3::Dataset::from_slice`: it builds datasets with LightGBM's default dataset parameters, so
//! with few rows the feature pre-filter (`min_data_in_leaf` 20) drops every feature and the model is a constant
//! (DESIGN.md, build facts). Here the dataset is created with `feature_pre_filter=false min_data_in_bin=1`, and
//! the trained model leaves this module only as LightGBM's model text, which [`Model`] loads for predictions.

use std::ffi::{c_void, CStr, CString};

use lightgbm3_sys as sys;

/// A LightGBM call failed; the message is LightGBM's own.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("LightGBM: {0}")]
pub struct LgbmError(pub String);

fn last_error() -> LgbmError {
    // SAFETY: LGBM_GetLastError returns a pointer to a thread-local, NUL-terminated buffer owned by LightGBM.
    let msg = unsafe { CStr::from_ptr(sys::LGBM_GetLastError()) };
    LgbmError(msg.to_string_lossy().into_owned())
}

fn check(rc: i32) -> Result<(), LgbmError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(last_error())
    }
}

fn cstring(s: &str) -> Result<CString, LgbmError> {
    CString::new(s).map_err(|_| LgbmError("parameter string contains a NUL byte".into()))
}

struct DatasetGuard(sys::DatasetHandle);
impl Drop for DatasetGuard {
    fn drop(&mut self) {
        // SAFETY: the handle was created by LGBM_DatasetCreateFromMat and is freed once.
        unsafe { sys::LGBM_DatasetFree(self.0) };
    }
}

struct BoosterGuard(sys::BoosterHandle);
impl Drop for BoosterGuard {
    fn drop(&mut self) {
        // SAFETY: the handle was created by LGBM_BoosterCreate and is freed once.
        unsafe { sys::LGBM_BoosterFree(self.0) };
    }
}

/// Dataset parameters that keep every feature even with a handful of rows.
pub const DATASET_PARAMS: &str = "feature_pre_filter=false min_data_in_bin=1 max_bin=255 verbosity=-1";

/// Held-out rows a training run watches for early stopping: row-major `x` (same columns as the training rows),
/// labels `y`, and the rounds without improvement of the L1 error on them after which training stops.
#[derive(Debug, Clone, Copy)]
pub struct EarlyStopping<'a> {
    pub x: &'a [f64],
    pub y: &'a [f32],
    /// Boosting rounds without a lower validation L1 error before training stops.
    pub patience: u32,
}

/// A trained model: LightGBM text and the boosting rounds it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Trained {
    pub text: String,
    /// Boosting rounds kept (with early stopping: the round of the lowest validation error).
    pub iterations: u32,
}

/// A LightGBM dataset over row-major `x` (`n_features` columns) with labels `y`, its bins aligned with
/// `reference` when given (validation data must share the training data's bins).
fn dataset(x: &[f64], y: &[f32], n_features: usize, reference: Option<&DatasetGuard>) -> Result<DatasetGuard, LgbmError> {
    if n_features == 0 || x.len() != y.len() * n_features {
        return Err(LgbmError(format!("{} values for {} rows × {n_features} features", x.len(), y.len())));
    }
    let rows = i32::try_from(y.len()).map_err(|_| LgbmError("too many rows".into()))?;
    let dataset_params = cstring(DATASET_PARAMS)?;
    let label = cstring("label")?;
    let mut ds: sys::DatasetHandle = std::ptr::null_mut();
    // SAFETY: x points to rows·n_features f64 values that outlive the call; LightGBM copies them. The reference,
    // when given, is a live dataset handle.
    check(unsafe {
        sys::LGBM_DatasetCreateFromMat(
            x.as_ptr() as *const c_void,
            sys::C_API_DTYPE_FLOAT64 as i32,
            rows,
            n_features as i32,
            1,
            dataset_params.as_ptr(),
            reference.map_or(std::ptr::null_mut(), |r| r.0),
            &mut ds,
        )
    })?;
    let ds = DatasetGuard(ds);
    // SAFETY: y holds `rows` f32 labels; LightGBM copies them.
    check(unsafe {
        sys::LGBM_DatasetSetField(
            ds.0,
            label.as_ptr(),
            y.as_ptr() as *const c_void,
            rows,
            sys::C_API_DTYPE_FLOAT32 as i32,
        )
    })?;
    Ok(ds)
}

/// Trains a regression model on row-major `x` (`n_features` columns) against `y` for `num_iterations` boosting
/// rounds with LightGBM `params` (space-separated `key=value`, e.g. `objective=regression num_leaves=31`), and
/// returns the model as LightGBM text.
///
/// Errors: shape mismatches, fewer than 2 rows, or any LightGBM error (bad parameter names, …).
pub fn train(x: &[f64], y: &[f32], n_features: usize, params: &str, num_iterations: u32) -> Result<String, LgbmError> {
    Ok(train_with(x, y, n_features, params, num_iterations, None)?.text)
}

/// [`train`], stopping early when `early` is given: after each round LightGBM scores the held-out rows (L1 error
/// of the label, here a log ratio: about the mean relative error), and training stops `patience` rounds after the
/// best round; the model keeps the rounds up to the best one. Without `early`, exactly `num_iterations` rounds
/// (fewer only if LightGBM finds nothing left to split).
///
/// Errors: as [`train`], and validation rows of another width.
pub fn train_with(
    x: &[f64],
    y: &[f32],
    n_features: usize,
    params: &str,
    num_iterations: u32,
    early: Option<EarlyStopping<'_>>,
) -> Result<Trained, LgbmError> {
    if y.len() < 2 {
        return Err(LgbmError("need at least 2 rows".into()));
    }
    let ds = dataset(x, y, n_features, None)?;
    let valid = match early {
        Some(e) if !e.y.is_empty() => Some((dataset(e.x, e.y, n_features, Some(&ds))?, e.patience.max(1))),
        _ => None,
    };
    let metric = if valid.is_some() { " metric=l1" } else { "" };
    let booster_params = cstring(&format!("{params}{metric} verbosity=-1"))?;
    let mut bh: sys::BoosterHandle = std::ptr::null_mut();
    // SAFETY: ds is a valid dataset handle; the booster keeps its own reference to the data until freed.
    check(unsafe { sys::LGBM_BoosterCreate(ds.0, booster_params.as_ptr(), &mut bh) })?;
    let booster = BoosterGuard(bh);
    if let Some((v, _)) = &valid {
        // SAFETY: both handles are valid; the validation dataset outlives the booster's use of it (dropped after).
        check(unsafe { sys::LGBM_BoosterAddValidData(booster.0, v.0) })?;
    }
    let (mut best, mut best_round, mut rounds) = (f64::INFINITY, 0u32, 0u32);
    for round in 1..=num_iterations {
        let mut finished = 0;
        // SAFETY: booster is valid for the loop.
        check(unsafe { sys::LGBM_BoosterUpdateOneIter(booster.0, &mut finished) })?;
        if finished != 0 {
            break;
        }
        rounds = round;
        if let Some((_, patience)) = &valid {
            let mut out_len = 0;
            let mut results = [0.0f64; 4];
            // SAFETY: one metric (l1) is configured; the buffer holds four.
            check(unsafe { sys::LGBM_BoosterGetEval(booster.0, 1, &mut out_len, results.as_mut_ptr()) })?;
            if out_len >= 1 && results[0] < best {
                (best, best_round) = (results[0], round);
            } else if round - best_round >= *patience {
                break;
            }
        }
    }
    let keep = if valid.is_some() { best_round.max(1) } else { rounds };
    let text = model_text(&booster, if valid.is_some() { keep as i32 } else { -1 })?;
    drop(booster);
    drop(valid);
    Ok(Trained { text, iterations: keep })
}

/// The model text of the first `num_iteration` rounds (−1: all).
fn model_text(booster: &BoosterGuard, num_iteration: i32) -> Result<String, LgbmError> {
    let mut len = 0_i64;
    // SAFETY: first call asks for the size only (buffer length 0, null buffer).
    check(unsafe {
        sys::LGBM_BoosterSaveModelToString(booster.0, 0, num_iteration, 0, 0, &mut len, std::ptr::null_mut())
    })?;
    let mut buf = vec![0u8; usize::try_from(len).map_err(|_| LgbmError("negative model size".into()))?];
    // SAFETY: buf has `len` bytes; LightGBM writes at most that many including the NUL.
    check(unsafe {
        sys::LGBM_BoosterSaveModelToString(
            booster.0,
            0,
            num_iteration,
            0,
            buf.len() as i64,
            &mut len,
            buf.as_mut_ptr() as *mut _,
        )
    })?;
    while buf.last() == Some(&0) {
        buf.pop();
    }
    String::from_utf8(buf).map_err(|_| LgbmError("model text is not UTF-8".into()))
}

/// Per-tree fields of LightGBM's model text that predictions do not read (split gains, internal node values,
/// weights and counts, leaf weights and counts): LightGBM's loader fills them with zeros when absent (`Tree::Tree`
/// in `src/io/tree.cpp`). Feature importances are read from the full text before it is slimmed.
const UNREAD_TREE_FIELDS: [&str; 6] =
    ["split_gain=", "internal_value=", "internal_weight=", "internal_count=", "leaf_weight=", "leaf_count="];

/// `text` without the tree fields predictions do not read ([`UNREAD_TREE_FIELDS`]) and without the `tree_sizes`
/// index (which would no longer match; LightGBM then reads the trees one after another): the same predictions
/// from about half the bytes.
pub fn slim(text: &str) -> String {
    let mut out = String::with_capacity(text.len() / 2);
    for line in text.split_inclusive('\n') {
        if line.starts_with("tree_sizes=") || UNREAD_TREE_FIELDS.iter().any(|f| line.starts_with(f)) {
            continue;
        }
        out.push_str(line);
    }
    out
}

/// A trained model loaded for predictions. `Send + Sync`: LightGBM's predict takes a shared lock inside the
/// booster, so concurrent `&self` predictions are safe (DESIGN.md build facts); nothing here mutates it.
pub struct Model {
    booster: lightgbm3::Booster,
    n_features: usize,
}

// SAFETY: see the type's doc — only `&self` predictions are exposed, which LightGBM serializes internally.
unsafe impl Send for Model {}
// SAFETY: as above.
unsafe impl Sync for Model {}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("n_features", &self.n_features).finish()
    }
}

impl Model {
    /// Loads a model from LightGBM text. Errors: the text is not a LightGBM model.
    pub fn from_text(text: &str) -> Result<Model, LgbmError> {
        let booster = lightgbm3::Booster::from_string(text).map_err(|e| LgbmError(e.to_string()))?;
        let n_features = booster.num_features().max(0) as usize;
        Ok(Model { booster, n_features })
    }

    /// Features the model expects.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// Predicts row-major `x` (a multiple of `n_features` values), one output per row, on one thread.
    pub fn predict(&self, x: &[f64]) -> Result<Vec<f64>, LgbmError> {
        if self.n_features == 0 || x.len() % self.n_features != 0 {
            return Err(LgbmError(format!("{} values are not rows of {} features", x.len(), self.n_features)));
        }
        self.booster
            .predict_with_params(x, self.n_features as i32, true, "num_threads=1")
            .map_err(|e| LgbmError(e.to_string()))
    }

    /// Split-gain importance per feature.
    pub fn importance_gain(&self) -> Result<Vec<f64>, LgbmError> {
        self.booster.feature_importance(lightgbm3::ImportanceType::Gain).map_err(|e| LgbmError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_rows_still_learn_a_step() {
        // 12 rows, y = 1 when x0 > 5 else 0; with the default pre-filter (min_data_in_leaf 20) this would be a
        // constant. min_data_in_leaf=2 here.
        let x: Vec<f64> = (0..12).flat_map(|i| [i as f64, 0.5]).collect();
        let y: Vec<f32> = (0..12).map(|i| if i > 5 { 1.0 } else { 0.0 }).collect();
        let text =
            train(&x, &y, 2, "objective=regression num_leaves=4 min_data_in_leaf=2 learning_rate=0.5", 50).unwrap();
        let m = Model::from_text(&text).unwrap();
        let p = m.predict(&[1.0, 0.5, 10.0, 0.5]).unwrap();
        assert!(p[0] < 0.1 && p[1] > 0.9, "{p:?}");
        assert_eq!(m.n_features(), 2);
    }

    #[test]
    fn early_stopping_keeps_the_best_round_of_the_held_out_rows() {
        // y = x0 exactly; held-out rows of the same function. A learning rate of 0.5 fits it in a few rounds, after
        // which the held-out L1 error stops falling: training stops `patience` rounds later and keeps the best
        // round, far fewer than the 500 allowed.
        let x: Vec<f64> = (0..200).map(|i| (i % 50) as f64).collect();
        let y: Vec<f32> = (0..200).map(|i| (i % 50) as f32).collect();
        let vx: Vec<f64> = (0..40).map(|i| (i % 50) as f64 + 0.5).collect();
        let vy: Vec<f32> = vx.iter().map(|v| *v as f32).collect();
        let params = "objective=regression num_leaves=8 min_data_in_leaf=2 learning_rate=0.5";
        let t = train_with(&x, &y, 1, params, 500, Some(EarlyStopping { x: &vx, y: &vy, patience: 10 })).unwrap();
        assert!(t.iterations >= 2 && t.iterations < 100, "{}", t.iterations);
        let m = Model::from_text(&t.text).unwrap();
        let p = m.predict(&[10.0, 40.0]).unwrap();
        assert!((p[0] - 10.0).abs() < 2.0 && (p[1] - 40.0).abs() < 2.0, "{p:?}");
        // Without early stopping every round is kept.
        assert_eq!(train_with(&x, &y, 1, params, 30, None).unwrap().iterations, 30);
    }

    #[test]
    fn slimmed_models_predict_exactly_as_the_full_ones() {
        let x: Vec<f64> = (0..400).flat_map(|i| [(i % 37) as f64, (i % 11) as f64 * 0.5, f64::NAN]).collect();
        let y: Vec<f32> = (0..400).map(|i| ((i % 37) as f32).sqrt() - (i % 11) as f32 * 0.1).collect();
        let text = train(&x, &y, 3, "objective=regression num_leaves=15 min_data_in_leaf=3 learning_rate=0.2", 40).unwrap();
        let slim_text = slim(&text);
        assert!(slim_text.len() * 10 < text.len() * 7, "{} → {}", text.len(), slim_text.len());
        assert!(!slim_text.contains("tree_sizes=") && !slim_text.contains("leaf_count="));
        let (full, slim_model) = (Model::from_text(&text).unwrap(), Model::from_text(&slim_text).unwrap());
        let probe: Vec<f64> = (0..300).flat_map(|i| [(i % 41) as f64 * 0.9, (i % 13) as f64 * 0.45, f64::NAN]).collect();
        assert_eq!(full.predict(&probe).unwrap(), slim_model.predict(&probe).unwrap());
    }

    #[test]
    fn errors_are_reported_not_panics() {
        assert!(train(&[1.0, 2.0], &[1.0], 1, "", 1).is_err());
        assert!(train(&[1.0, 2.0], &[1.0, 2.0], 1, "num_leaves=abc", 1).is_err());
        assert!(Model::from_text("not a model").is_err());
    }
}

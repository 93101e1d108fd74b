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

/// Trains a regression model on row-major `x` (`n_features` columns) against `y` for `num_iterations` boosting
/// rounds with LightGBM `params` (space-separated `key=value`, e.g. `objective=regression num_leaves=31`), and
/// returns the model as LightGBM text.
///
/// Errors: shape mismatches, fewer than 2 rows, or any LightGBM error (bad parameter names, …).
pub fn train(x: &[f64], y: &[f32], n_features: usize, params: &str, num_iterations: u32) -> Result<String, LgbmError> {
    if n_features == 0 || x.len() != y.len() * n_features {
        return Err(LgbmError(format!("{} values for {} rows × {n_features} features", x.len(), y.len())));
    }
    if y.len() < 2 {
        return Err(LgbmError("need at least 2 rows".into()));
    }
    let rows = i32::try_from(y.len()).map_err(|_| LgbmError("too many rows".into()))?;
    let dataset_params = cstring(DATASET_PARAMS)?;
    let label = cstring("label")?;
    let mut ds: sys::DatasetHandle = std::ptr::null_mut();
    // SAFETY: x points to rows·n_features f64 values that outlive the call; LightGBM copies them.
    check(unsafe {
        sys::LGBM_DatasetCreateFromMat(
            x.as_ptr() as *const c_void,
            sys::C_API_DTYPE_FLOAT64 as i32,
            rows,
            n_features as i32,
            1,
            dataset_params.as_ptr(),
            std::ptr::null_mut(),
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
    let booster_params = cstring(&format!("{params} verbosity=-1"))?;
    let mut bh: sys::BoosterHandle = std::ptr::null_mut();
    // SAFETY: ds is a valid dataset handle; the booster keeps its own reference to the data until freed.
    check(unsafe { sys::LGBM_BoosterCreate(ds.0, booster_params.as_ptr(), &mut bh) })?;
    let booster = BoosterGuard(bh);
    for _ in 0..num_iterations {
        let mut finished = 0;
        // SAFETY: booster is valid for the loop.
        check(unsafe { sys::LGBM_BoosterUpdateOneIter(booster.0, &mut finished) })?;
        if finished != 0 {
            break;
        }
    }
    model_text(&booster)
}

fn model_text(booster: &BoosterGuard) -> Result<String, LgbmError> {
    let mut len = 0_i64;
    // SAFETY: first call asks for the size only (buffer length 0, null buffer).
    check(unsafe { sys::LGBM_BoosterSaveModelToString(booster.0, 0, -1, 0, 0, &mut len, std::ptr::null_mut()) })?;
    let mut buf = vec![0u8; usize::try_from(len).map_err(|_| LgbmError("negative model size".into()))?];
    // SAFETY: buf has `len` bytes; LightGBM writes at most that many including the NUL.
    check(unsafe {
        sys::LGBM_BoosterSaveModelToString(booster.0, 0, -1, 0, buf.len() as i64, &mut len, buf.as_mut_ptr() as *mut _)
    })?;
    while buf.last() == Some(&0) {
        buf.pop();
    }
    String::from_utf8(buf).map_err(|_| LgbmError("model text is not UTF-8".into()))
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
    fn errors_are_reported_not_panics() {
        assert!(train(&[1.0, 2.0], &[1.0], 1, "", 1).is_err());
        assert!(train(&[1.0, 2.0], &[1.0, 2.0], 1, "num_leaves=abc", 1).is_err());
        assert!(Model::from_text("not a model").is_err());
    }
}

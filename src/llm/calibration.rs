//! Calibration of training predictions from a system × framework's own runs (issue 28 item 7): users upload
//! training logs with the configuration that ran them (`POST /v1/systems/{system}/training-runs`); each run is
//! one end-to-end pair (measured iteration time, the iteration time perfcast predicted for its configuration when
//! it was uploaded). The correction is one multiplicative constant per (system, framework),
//!
//! c = exp(median_i ln(measured_i / predicted_i)),
//!
//! the median of the log-ratios so that one bad run cannot drag it (a geometric median-of-ratios). It is
//! validation-gated as the learned regressors are ([`crate::learn::promotion`]): with at least [`MIN_RUNS`] runs,
//! each run is predicted by the correction fitted on the others (leave-one-out) and the calibration is used only
//! when the mean absolute percentage error of those held-out calibrated predictions is below that of the
//! uncalibrated ones; otherwise it is kept as rejected, with the reason, and predictions stay as they were.
//!
//! A calibrated prediction scales the iteration time, its interval, the whole-run estimate and the throughput
//! (tokens/s, model TFLOP/s, MFU) by c and says so in its `calibration` member; the per-stage and per-operator
//! breakdown stays the model's.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::framework::Framework;
use super::TrainingPrediction;

/// Runs a (system, framework) needs before its calibration can be validated (leave-one-out on fewer says
/// nothing: each held-out correction would rest on one or two runs).
pub const MIN_RUNS: usize = 3;

/// One uploaded run: its measured and its (uncalibrated) predicted iteration time, s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunPair {
    pub measured_s: f64,
    pub predicted_s: f64,
}

impl RunPair {
    fn log_ratio(&self) -> f64 {
        (self.measured_s / self.predicted_s).ln()
    }
}

/// A (system, framework)'s calibration from its uploaded runs: the correction, whether the validation gate
/// accepted it, and the held-out errors it was judged by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TrainingCalibration {
    /// The system it calibrates.
    pub system: String,
    /// The framework it calibrates (runs of other frameworks on the system do not count).
    pub framework: Framework,
    /// Runs it was fitted to.
    pub runs: u64,
    /// Multiplies the predicted iteration time: exp(median ln(measured / predicted)) over the runs.
    pub correction: f64,
    /// Whether predictions use it (the leave-one-out gate passed).
    pub accepted: bool,
    /// Why it was accepted or rejected.
    pub reason: String,
    /// Leave-one-out mean absolute percentage error of the uncalibrated predictions, % (absent below
    /// [`MIN_RUNS`] runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out_mape_before_pct: Option<f64>,
    /// The same of the calibrated predictions, each run corrected by the constant fitted without it, %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out_mape_after_pct: Option<f64>,
    /// When it was fitted, RFC 3339 UTC (set by the store).
    #[serde(default)]
    pub created_at: String,
}

/// What a calibrated prediction says of the calibration it used.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct AppliedCalibration {
    /// Uploaded runs of the system × framework it was fitted to.
    pub runs: u64,
    /// The factor the iteration time was multiplied by.
    pub correction: f64,
    /// The model's iteration time before the correction, s.
    pub uncalibrated_iteration_time_s: f64,
    /// Leave-one-out MAPE of the uncalibrated predictions on the runs, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_out_mape_before_pct: Option<f64>,
    /// Leave-one-out MAPE of the calibrated predictions on the runs, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_out_mape_after_pct: Option<f64>,
}

/// The correction of `pairs`: exp(median ln(measured/predicted)); 1 for no pairs.
pub fn correction(pairs: &[RunPair]) -> f64 {
    crate::comm::calibrate::median(pairs.iter().map(RunPair::log_ratio).collect()).exp()
}

/// Leave-one-out MAPE (%) of (uncalibrated, calibrated) predictions over `pairs` (n ≥ 2).
pub fn leave_one_out_mape_pct(pairs: &[RunPair]) -> (f64, f64) {
    let n = pairs.len() as f64;
    let (mut before, mut after) = (0.0, 0.0);
    for (i, p) in pairs.iter().enumerate() {
        let others: Vec<RunPair> = pairs.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, q)| *q).collect();
        let c = correction(&others);
        before += (p.predicted_s - p.measured_s).abs() / p.measured_s;
        after += (c * p.predicted_s - p.measured_s).abs() / p.measured_s;
    }
    (100.0 * before / n, 100.0 * after / n)
}

/// Fits and gates the calibration of (`system`, `framework`) on `pairs` (every pair with positive finite
/// times; the caller keeps only such runs). `created_at` is left empty for the store to set.
pub fn calibrate(system: &str, framework: Framework, pairs: &[RunPair]) -> TrainingCalibration {
    let c = correction(pairs);
    let n = pairs.len();
    let mut cal = TrainingCalibration {
        system: system.to_string(),
        framework,
        runs: n as u64,
        correction: c,
        accepted: false,
        reason: String::new(),
        held_out_mape_before_pct: None,
        held_out_mape_after_pct: None,
        created_at: String::new(),
    };
    if n < MIN_RUNS {
        cal.reason = format!("{n} run(s) uploaded; at least {MIN_RUNS} are needed to validate a calibration");
        return cal;
    }
    let (before, after) = leave_one_out_mape_pct(pairs);
    cal.held_out_mape_before_pct = Some(before);
    cal.held_out_mape_after_pct = Some(after);
    cal.accepted = after < before;
    cal.reason = if cal.accepted {
        format!("leave-one-out MAPE {after:.1} % calibrated < {before:.1} % uncalibrated over {n} runs")
    } else {
        format!(
            "rejected: leave-one-out MAPE {after:.1} % calibrated is not below {before:.1} % uncalibrated over {n} \
             runs (the runs do not agree on one correction)"
        )
    };
    cal
}

/// Applies an accepted calibration to `p` (see the module); a rejected one leaves `p` as it is.
pub fn apply(p: &mut TrainingPrediction, cal: &TrainingCalibration) {
    if !cal.accepted || !(cal.correction.is_finite() && cal.correction > 0.0) {
        return;
    }
    let c = cal.correction;
    let uncalibrated = p.iteration_time_s;
    p.iteration_time_s *= c;
    p.interval.p10_s *= c;
    p.interval.p90_s *= c;
    p.throughput.tokens_per_s /= c;
    p.throughput.model_tflops_per_gpu /= c;
    p.throughput.mfu /= c;
    p.calibration = Some(AppliedCalibration {
        runs: cal.runs,
        correction: c,
        uncalibrated_iteration_time_s: uncalibrated,
        held_out_mape_before_pct: cal.held_out_mape_before_pct,
        held_out_mape_after_pct: cal.held_out_mape_after_pct,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(ratios: &[f64]) -> Vec<RunPair> {
        ratios.iter().map(|r| RunPair { measured_s: r * 2.0, predicted_s: 2.0 }).collect()
    }

    #[test]
    fn runs_that_agree_are_accepted_with_their_ratio() {
        // Ratios 1.3, 1.3, 1.3: c = 1.3; each held-out correction is 1.3 too, so the calibrated LOO error is 0
        // and the uncalibrated one |1 − 1.3|/1.3 = 23.08 %.
        let cal = calibrate("s", Framework::Megatron, &pairs(&[1.3, 1.3, 1.3]));
        assert!(cal.accepted, "{}", cal.reason);
        assert!((cal.correction - 1.3).abs() < 1e-12);
        assert!((cal.held_out_mape_before_pct.unwrap() - 100.0 * 0.3 / 1.3).abs() < 1e-9);
        assert!(cal.held_out_mape_after_pct.unwrap() < 1e-9);
    }

    #[test]
    fn runs_that_disagree_are_rejected() {
        // Ratios 0.5, 2, 1 (module's gate). Leave out 0.5: c = exp((ln 2 + ln 1)/2) = √2, error |√2 − 0.5|/0.5 =
        // 182.8 % (uncalibrated 100 %); leave out 2: c = exp((ln 0.5 + 0)/2) = 1/√2, error |0.7071 − 2|/2 = 64.6 %
        // (uncalibrated 50 %); leave out 1: c = exp((ln 0.5 + ln 2)/2) = 1, error 0 (0). Calibrated 82.5 % against
        // uncalibrated 50 %: rejected.
        let cal = calibrate("s", Framework::Torchtitan, &pairs(&[0.5, 2.0, 1.0]));
        assert!(!cal.accepted);
        assert!((cal.held_out_mape_before_pct.unwrap() - 50.0).abs() < 1e-9);
        let after = 100.0 * ((2f64.sqrt() - 0.5) / 0.5 + (2.0 - 0.5f64.sqrt()) / 2.0) / 3.0;
        assert!((cal.held_out_mape_after_pct.unwrap() - after).abs() < 1e-9);
        assert!(cal.reason.starts_with("rejected"), "{}", cal.reason);
    }

    #[test]
    fn too_few_runs_are_not_used() {
        let cal = calibrate("s", Framework::Megatron, &pairs(&[1.3, 1.3]));
        assert!(!cal.accepted);
        assert_eq!(cal.held_out_mape_before_pct, None);
        assert!((cal.correction - 1.3).abs() < 1e-12);
    }

    #[test]
    fn the_median_resists_one_outlier() {
        // ln-ratios sorted: ln 1.2, ln 1.25, ln 5 → the median is ln 1.25.
        assert!((correction(&pairs(&[5.0, 1.2, 1.25])) - 1.25).abs() < 1e-12);
    }
}

//! [`FitSummary`]: what a learned model's fit measured and was trained on — one struct that the stored model
//! versions (`store::regressors`) and the shipped bundle models (`bundle::ShippedModel`) share, so the fields are
//! defined and documented once and move between them whole.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::fit::Fitted;

/// The summary of one fit of a correction model: its chosen configuration, its accuracy on the seeded hold-out
/// rows, and the set it was trained on. Serialized flat (`#[serde(flatten)]`) into the shipped model JSON; the
/// store keeps each field in its own `regressors` column of the same name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitSummary {
    /// The chosen LightGBM candidate: `{"name", "params", "num_iterations"}` (a [`super::fit::Candidate`],
    /// `num_iterations` after early stopping).
    pub candidate: serde_json::Value,
    /// Every candidate's validation MAPE: `[{"name": …, "validation_mape": 0–1}, …]`.
    pub candidates: serde_json::Value,
    /// MAPE of the chosen candidate on the seeded 20 % validation rows, 0–∞ (0.05 = 5 %).
    pub validation_mape: f64,
    /// Signed mean relative error on the same rows, (pred − meas) / meas: positive = over-prediction.
    pub validation_signed: f64,
    /// The analytic model's MAPE on the same rows, 0–∞ (the bar the correction model must beat).
    pub analytic_validation_mape: f64,
    /// Rows on the training (80 %) side of the seeded split.
    pub train_rows: u64,
    /// Rows on the validation (20 %) side of the seeded split.
    pub validation_rows: u64,
    /// Samples of the key when trained (retraining is skipped while it is unchanged).
    pub samples: u64,
    /// What it was trained on (rows per GPU, dims or placement ranges): its domain of validity.
    pub summary: serde_json::Value,
    /// Gain importance of each feature in the final model: `[{"feature": …, "gain": …}, …]`.
    pub importance: serde_json::Value,
}

impl FitSummary {
    /// The summary of fit `f` of a key with `samples` samples, trained on the set `summary` describes.
    pub fn of(f: &Fitted, samples: u64, summary: serde_json::Value) -> FitSummary {
        FitSummary {
            candidate: serde_json::to_value(&f.chosen).unwrap_or_default(),
            candidates: json!(f
                .candidates
                .iter()
                .map(|(n, m)| json!({"name": n, "validation_mape": m}))
                .collect::<Vec<_>>()),
            validation_mape: f.validation.mape,
            validation_signed: f.validation.signed,
            analytic_validation_mape: f.analytic_validation.mape,
            train_rows: f.train_rows as u64,
            validation_rows: f.validation_rows as u64,
            samples,
            summary,
            importance: json!(f.importance.iter().map(|(n, g)| json!({"feature": n, "gain": g})).collect::<Vec<_>>()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::fit::{Accuracy, Candidate};

    #[test]
    fn a_fit_is_summarized_field_by_field_and_serialized_with_the_column_names() {
        let f = Fitted {
            model_text: "tree".into(),
            holdout_text: "holdout tree".into(),
            chosen: Candidate { name: "gbdt_31".into(), params: "num_leaves=31".into(), num_iterations: 120 },
            validation: Accuracy { mape: 0.08, signed: -0.02, rows: 10 },
            analytic_validation: Accuracy { mape: 0.3, signed: 0.25, rows: 10 },
            candidates: vec![("gbdt_15".into(), 0.09), ("gbdt_31".into(), 0.08)],
            train_rows: 40,
            validation_rows: 10,
            importance: vec![("flops_log10".into(), 12.5)],
            validation_points: Vec::new(),
        };
        let s = FitSummary::of(&f, 50, json!({"rows": 50}));
        // 40 + 10 rows of the split; 50 samples of the key, as given.
        assert_eq!((s.train_rows, s.validation_rows, s.samples), (40, 10, 50));
        assert_eq!((s.validation_mape, s.validation_signed, s.analytic_validation_mape), (0.08, -0.02, 0.3));
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({
                "candidate": {"name": "gbdt_31", "params": "num_leaves=31", "num_iterations": 120},
                "candidates": [{"name": "gbdt_15", "validation_mape": 0.09}, {"name": "gbdt_31", "validation_mape": 0.08}],
                "validation_mape": 0.08,
                "validation_signed": -0.02,
                "analytic_validation_mape": 0.3,
                "train_rows": 40,
                "validation_rows": 10,
                "samples": 50,
                "summary": {"rows": 50},
                "importance": [{"feature": "flops_log10", "gain": 12.5}],
            })
        );
    }
}

//! The promotion rule: whether a freshly trained model version becomes the active one. A candidate is compared
//! with the model it would replace on the same held-out rows (the hold-out models, trained on the 80 % side
//! only) and activated when it is not worse; a per-GPU candidate must also beat the cross-GPU model on its GPU's
//! held-out rows, or there is no reason to serve it. The decision is stored with the version (`promotion`) and
//! reported by the retrain job, so its JSON shape and reason strings are part of the API.

use serde::{Deserialize, Serialize};

use super::fit::{accuracy, predict_rows, split, Accuracy, TrainingSet};
use super::lgbm::Model;

/// Why a candidate was (not) activated; serialized as the sentence the API reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reason {
    /// No version of the key is active.
    #[serde(rename = "first model of this key")]
    FirstModel,
    /// Candidate MAPE ≤ active MAPE on the same held-out rows.
    #[serde(rename = "not worse than the active version on the same held-out rows")]
    NotWorse,
    /// Candidate MAPE > active MAPE on the same held-out rows.
    #[serde(rename = "worse than the active version on the same held-out rows")]
    Worse,
    /// The active version's hold-out model cannot be evaluated, so the candidate replaces it.
    #[serde(rename = "the active version's hold-out model does not load")]
    ActiveUnreadable,
    /// The active version shipped with perfcast without a hold-out model (the bundle leaves them out to halve its
    /// size): the candidate, trained on its rows and the new ones, replaces it.
    #[serde(rename = "the active version is bundled without a hold-out model; this one was trained on its rows and the new ones")]
    ReplacesBundled,
    /// Per-GPU candidate: strictly better than the cross-GPU model on this GPU's held-out rows (and not worse than
    /// the active per-GPU version).
    #[serde(rename = "better than the cross-GPU model on this GPU's held-out rows")]
    BeatsCrossGpu,
    /// Per-GPU candidate: not strictly better than the cross-GPU model on this GPU's held-out rows.
    #[serde(rename = "not better than the cross-GPU model on this GPU's held-out rows")]
    NotBetterThanCrossGpu,
    /// Per-GPU candidate: better than the cross-GPU model but worse than the active per-GPU version.
    #[serde(rename = "worse than the active per-GPU version on the same held-out rows")]
    WorseThanActivePerGpu,
}

/// The model a candidate would replace, as far as it can be evaluated on the candidate's held-out rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Incumbent {
    /// No version of the key is active.
    None,
    /// A version is active but its hold-out model does not load or predict.
    Unreadable,
    /// The active version's hold-out MAPE on the same rows (fraction).
    Mape(f64),
}

impl Incumbent {
    /// From "is a version active" and its hold-out accuracy on the candidate's rows, when it could be computed.
    pub fn of(active: bool, accuracy: Option<Accuracy>) -> Incumbent {
        match (active, accuracy) {
            (false, _) => Incumbent::None,
            (true, None) => Incumbent::Unreadable,
            (true, Some(a)) => Incumbent::Mape(a.mape),
        }
    }

    fn mape(self) -> Option<f64> {
        match self {
            Incumbent::Mape(m) => Some(m),
            _ => None,
        }
    }
}

/// The rule, once: activate when nothing comparable is active or the candidate's held-out MAPE is not worse
/// (`candidate ≤ active`). Returns (activate, reason).
pub fn decide(candidate_mape: f64, incumbent: Incumbent) -> (bool, Reason) {
    match incumbent {
        Incumbent::None => (true, Reason::FirstModel),
        Incumbent::Unreadable => (true, Reason::ActiveUnreadable),
        Incumbent::Mape(active) if candidate_mape <= active => (true, Reason::NotWorse),
        Incumbent::Mape(_) => (false, Reason::Worse),
    }
}

/// The per-GPU rule: a per-GPU candidate is activated when it is strictly better than the cross-GPU model on this
/// GPU's held-out rows (there is no reason to serve it otherwise) and, by [`decide`], not worse than the active
/// per-GPU version. `cross` / `own`: their MAPE on those rows (None: none, or not evaluable).
pub fn decide_per_gpu(candidate_mape: f64, cross: Option<f64>, own: Option<f64>) -> (bool, Reason) {
    let beats_cross = cross.is_none_or(|c| candidate_mape < c);
    let own = own.map_or(Incumbent::None, Incumbent::Mape);
    match (beats_cross, decide(candidate_mape, own)) {
        (false, _) => (false, Reason::NotBetterThanCrossGpu),
        (true, (false, _)) => (false, Reason::WorseThanActivePerGpu),
        (true, (true, _)) => (true, Reason::BeatsCrossGpu),
    }
}

/// The recorded decision (the `promotion` object of a model version and of the retrain job's per-key report).
/// One shape per comparison; the fields are fractions (MAPE), `null` where the compared model is absent.
/// Serialize-only: the shapes overlap, so stored JSON is read back as JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Promotion {
    /// A cross-GPU operator model against the active version of its key (named by `active_version`).
    Versioned {
        activated: bool,
        reason: Reason,
        #[serde(skip_serializing_if = "Option::is_none")]
        active_version: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        active_validation_mape: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        candidate_validation_mape: Option<f64>,
    },
    /// A per-GPU operator model against the cross-GPU model on its GPU and the active per-GPU version.
    PerGpu {
        activated: bool,
        reason: Reason,
        candidate_validation_mape: f64,
        cross_gpu_validation_mape: Option<f64>,
        active_validation_mape: Option<f64>,
    },
    /// A communication or kernel model against the active version of its key.
    Keyed { activated: bool, reason: Reason, candidate_validation_mape: f64, active_validation_mape: Option<f64> },
}

impl Promotion {
    /// A cross-GPU operator candidate (hold-out MAPE `candidate`) against `active`: its version and hold-out
    /// accuracy on the same rows (None when its hold-out model does not load or predict), or None.
    pub fn versioned(candidate: f64, active: Option<(i64, Option<Accuracy>)>) -> Promotion {
        let incumbent = Incumbent::of(active.is_some(), active.and_then(|(_, a)| a));
        let (activated, reason) = decide(candidate, incumbent);
        Promotion::Versioned {
            activated,
            reason,
            active_version: active.map(|(v, _)| v),
            active_validation_mape: incumbent.mape(),
            // An unreadable active version gives nothing to compare the candidate with.
            candidate_validation_mape: (incumbent != Incumbent::Unreadable).then_some(candidate),
        }
    }

    /// A per-GPU candidate; see [`decide_per_gpu`].
    pub fn per_gpu(candidate: f64, cross: Option<f64>, own: Option<f64>) -> Promotion {
        let (activated, reason) = decide_per_gpu(candidate, cross, own);
        Promotion::PerGpu {
            activated,
            reason,
            candidate_validation_mape: candidate,
            cross_gpu_validation_mape: cross,
            active_validation_mape: own,
        }
    }

    /// A communication or kernel candidate against the active version of its key (`active`: one is active;
    /// `active_accuracy`: its hold-out accuracy on the same rows, when it loads). These families report an
    /// active version whose hold-out model does not load as "not worse" (what they have always stored).
    pub fn keyed(candidate: f64, active: bool, active_accuracy: Option<Accuracy>) -> Promotion {
        let (activated, reason) = match decide(candidate, Incumbent::of(active, active_accuracy)) {
            (activated, Reason::ActiveUnreadable) => (activated, Reason::NotWorse),
            decision => decision,
        };
        Promotion::Keyed {
            activated,
            reason,
            candidate_validation_mape: candidate,
            active_validation_mape: active_accuracy.map(|a| a.mape),
        }
    }

    /// A communication or kernel candidate replacing an active version that shipped with perfcast without a
    /// hold-out model ([`Reason::ReplacesBundled`]).
    pub fn keyed_replaces_bundled(candidate: f64) -> Promotion {
        Promotion::Keyed {
            activated: true,
            reason: Reason::ReplacesBundled,
            candidate_validation_mape: candidate,
            active_validation_mape: None,
        }
    }

    /// A cross-GPU operator candidate replacing the active `version`, which shipped with perfcast without a
    /// hold-out model ([`Reason::ReplacesBundled`]): nothing to compare on the held-out rows, and the candidate was
    /// trained on the bundled rows and more.
    pub fn replaces_bundled(candidate: f64, version: i64) -> Promotion {
        Promotion::Versioned {
            activated: true,
            reason: Reason::ReplacesBundled,
            active_version: Some(version),
            active_validation_mape: None,
            candidate_validation_mape: Some(candidate),
        }
    }

    /// Whether the candidate becomes the active version.
    pub fn activated(&self) -> bool {
        match self {
            Promotion::Versioned { activated, .. }
            | Promotion::PerGpu { activated, .. }
            | Promotion::Keyed { activated, .. } => *activated,
        }
    }

    /// Why.
    pub fn reason(&self) -> Reason {
        match self {
            Promotion::Versioned { reason, .. }
            | Promotion::PerGpu { reason, .. }
            | Promotion::Keyed { reason, .. } => *reason,
        }
    }
}

/// Accuracy of a hold-out model (LightGBM text) on the validation rows of `set` — what promotion compares. None
/// when the text does not load or the model cannot predict these rows (e.g. another feature count).
pub fn holdout_accuracy(text: &str, set: &TrainingSet) -> Option<Accuracy> {
    if text.is_empty() {
        return None; // a bundled version ships without its hold-out model
    }
    let model = Model::from_text(text).ok()?;
    let (_, val) = split(set);
    let pred = predict_rows(&model, set, &val).ok()?;
    let meas: Vec<f64> = val.iter().map(|&i| set.measured_us[i]).collect();
    Some(accuracy(&pred, &meas))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn acc(mape: f64) -> Option<Accuracy> {
        Some(Accuracy { mape, ..Accuracy::default() })
    }

    #[test]
    fn the_rule_activates_a_candidate_that_is_not_worse() {
        assert_eq!(decide(0.2, Incumbent::None), (true, Reason::FirstModel));
        assert_eq!(decide(0.2, Incumbent::Unreadable), (true, Reason::ActiveUnreadable));
        assert_eq!(decide(0.2, Incumbent::Mape(0.2)), (true, Reason::NotWorse));
        assert_eq!(decide(0.3, Incumbent::Mape(0.2)), (false, Reason::Worse));
        assert_eq!(decide_per_gpu(0.1, Some(0.1), None), (false, Reason::NotBetterThanCrossGpu));
        assert_eq!(decide_per_gpu(0.1, Some(0.2), Some(0.05)), (false, Reason::WorseThanActivePerGpu));
        assert_eq!(decide_per_gpu(0.1, None, Some(0.1)), (true, Reason::BeatsCrossGpu));
    }

    /// The stored JSON of every shape, as the worker wrote it before the rule had one home.
    #[test]
    fn the_recorded_decision_keeps_its_json() {
        let v = |p: Promotion| serde_json::to_value(p).unwrap();
        assert_eq!(
            v(Promotion::versioned(0.1, None)),
            json!({"activated": true, "reason": "first model of this key", "candidate_validation_mape": 0.1})
        );
        assert_eq!(
            v(Promotion::versioned(0.3, Some((2, acc(0.2))))),
            json!({"activated": false, "reason": "worse than the active version on the same held-out rows",
                   "active_version": 2, "active_validation_mape": 0.2, "candidate_validation_mape": 0.3})
        );
        assert_eq!(
            v(Promotion::versioned(0.1, Some((2, acc(0.2))))),
            json!({"activated": true, "reason": "not worse than the active version on the same held-out rows",
                   "active_version": 2, "active_validation_mape": 0.2, "candidate_validation_mape": 0.1})
        );
        assert_eq!(
            v(Promotion::versioned(0.1, Some((2, None)))),
            json!({"activated": true, "reason": "the active version's hold-out model does not load",
                   "active_version": 2})
        );
        assert_eq!(
            v(Promotion::per_gpu(0.1, Some(0.2), None)),
            json!({"activated": true, "reason": "better than the cross-GPU model on this GPU's held-out rows",
                   "candidate_validation_mape": 0.1, "cross_gpu_validation_mape": 0.2, "active_validation_mape": null})
        );
        assert_eq!(
            v(Promotion::per_gpu(0.3, None, Some(0.2))),
            json!({"activated": false, "reason": "worse than the active per-GPU version on the same held-out rows",
                   "candidate_validation_mape": 0.3, "cross_gpu_validation_mape": null, "active_validation_mape": 0.2})
        );
        assert_eq!(
            v(Promotion::per_gpu(0.3, Some(0.2), None)),
            json!({"activated": false, "reason": "not better than the cross-GPU model on this GPU's held-out rows",
                   "candidate_validation_mape": 0.3, "cross_gpu_validation_mape": 0.2, "active_validation_mape": null})
        );
        assert_eq!(
            v(Promotion::keyed(0.1, false, None)),
            json!({"activated": true, "reason": "first model of this key",
                   "candidate_validation_mape": 0.1, "active_validation_mape": null})
        );
        assert_eq!(
            v(Promotion::keyed(0.1, true, None)),
            json!({"activated": true, "reason": "not worse than the active version on the same held-out rows",
                   "candidate_validation_mape": 0.1, "active_validation_mape": null})
        );
        assert_eq!(
            v(Promotion::keyed(0.3, true, acc(0.2))),
            json!({"activated": false, "reason": "worse than the active version on the same held-out rows",
                   "candidate_validation_mape": 0.3, "active_validation_mape": 0.2})
        );
    }
}

//! Installing a bundle into a database: parse its parts as the upload path does (perfcast JSON lines, the same
//! split keys), decide which shipped models become active, and hand everything to the store's one transaction.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use serde_json::json;
use sha2::{Digest, Sha256};

use super::{gunzip, Bundle, BundleError, ShippedModel};
use crate::hw::lookup;
use crate::ingest::{self, Context, Format};
use crate::jobs::{follow_up, CalibrateParams, Job, RetrainJob};
use crate::learn::registry::is_stale;
use crate::samples::Sample;
use crate::service::profiles::split_key;
use crate::store::bundles::{BundleInstall, BundleProfile};
use crate::store::profiles::{NewProfile, SampleBatch};
use crate::store::regressors::{NewRegressor, Provenance};
use crate::store::Store;

/// What [`install`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct InstallReport {
    /// The bundle version installed.
    pub version: String,
    /// Profiles created and their samples.
    pub profiles: usize,
    pub samples: u64,
    /// Shipped model versions stored, and of those activated.
    pub models: usize,
    pub activated: usize,
    /// Profiles of an earlier bundle version removed.
    pub removed_profiles: u64,
    /// Wall-clock time of the install (parsing and the transaction), seconds.
    pub seconds: f64,
}

/// The profiles of `bundle`'s parts, parsed exactly as an upload of the part's bytes would be (format
/// `perfcast_jsonl`, split keys from the bytes' SHA-256 and the sample's index), labelled with their dataset and the
/// bundle version. A part with a row perfcast refuses, or a GPU outside the catalog, is an error: the bundle is
/// perfcast's own output.
fn profiles(bundle: &Bundle) -> Result<Vec<(Vec<u8>, Vec<u8>, super::Part, SampleBatch)>, BundleError> {
    let files = bundle.part_files()?;
    let mut out = Vec::new();
    for part in &bundle.manifest.parts {
        let gz = files.get(&part.file).ok_or_else(|| BundleError::Corrupt(format!("no {} in samples.tar", part.file)))?;
        let raw = gunzip(gz, &part.file)?;
        let parsed = ingest::parse(Format::PerfcastJsonl, &raw, &Context::default())
            .map_err(|e| BundleError::Corrupt(format!("{}: {e}", part.file)))?;
        if let Some(r) = parsed.rejected.first() {
            return Err(BundleError::Corrupt(format!("{} line {}: {}", part.file, r.line, r.reason)));
        }
        let sha = Sha256::digest(&raw);
        let mut batch = SampleBatch::default();
        for (i, sample) in parsed.samples.into_iter().enumerate() {
            match sample {
                Sample::Op(mut s) => {
                    let gpu = lookup(&s.gpu)
                        .ok_or_else(|| BundleError::Corrupt(format!("{}: GPU {:?} not in the catalog", part.file, s.gpu)))?;
                    s.gpu = gpu.spec.name.clone();
                    batch.ops.push((s, split_key(&sha, i)));
                }
                Sample::Comm(s) => batch.comms.push(s),
                Sample::Kernel(s) => batch.kernels.push(s),
                Sample::Timer(s) => batch.timers.push(s),
            }
        }
        if batch.len() as u64 != part.samples {
            return Err(BundleError::Corrupt(format!(
                "{}: {} samples where the manifest says {}",
                part.file,
                batch.len(),
                part.samples
            )));
        }
        out.push((raw, gz.clone(), part.clone(), batch));
    }
    Ok(out)
}

/// The stored version of a shipped model: bundled provenance, activated when `activate`.
fn new_version(bundle: &Bundle, m: &ShippedModel, activate: bool) -> NewRegressor {
    let reason = if activate {
        "shipped with perfcast: no model trained in this database is active for this key"
    } else {
        "shipped with perfcast, kept inactive: a model trained in this database is active; the next retrain compares \
         them on the same held-out rows"
    };
    NewRegressor {
        key: m.key.clone(),
        family: m.family.clone(),
        scope: m.scope.clone(),
        model: m.model.clone(),
        holdout_model: m.holdout_model.clone(),
        feature_names: m.features.clone(),
        candidate: m.candidate.clone(),
        candidates: m.candidates.clone(),
        validation_mape: m.validation_mape,
        validation_signed: m.validation_signed,
        analytic_validation_mape: m.analytic_validation_mape,
        train_rows: m.train_rows,
        validation_rows: m.validation_rows,
        samples: m.samples,
        summary: m.summary.clone(),
        importance: m.importance.clone(),
        promotion: json!({"activated": activate, "reason": reason}),
        // The bundle ships no hold-out predictions (its models are refit on every row), so no accuracy plot.
        validation_points: Vec::new(),
        provenance: Provenance {
            bundled: true,
            bundle: Some(bundle.manifest.version.clone()),
            datasets: m.datasets.clone(),
            commit: bundle.manifest.commit.clone(),
            perfcast_version: Some(bundle.manifest.perfcast_version.clone()),
            trained_at: Some(m.trained_at.clone()),
        },
        activate,
    }
}

/// Installs `bundle` unless its version is installed already (then `None`): its training set as profiles
/// (labels `bundle` = the version, `dataset`), the systems of its collectives, and its models — each activated
/// where no version of its key is active, or the active one is bundled (an earlier bundle) or trained on another
/// feature list than this build computes; where a model trained here is active, the shipped one is stored
/// inactive and a retrain is queued to compare them. Calibrations of the bundled systems are queued. One
/// transaction ([`Store::install_bundle`]); profiles of earlier bundle versions are replaced.
///
/// `with_models: false` installs the training set only (`perfcast models bundle` trains the models on it).
///
/// Errors: an unreadable bundle, a database error.
pub async fn install(store: &Store, bundle: &Bundle, with_models: bool) -> Result<Option<InstallReport>, BundleError> {
    let started = Instant::now();
    let version = &bundle.manifest.version;
    if store.bundle_installed(version).await? {
        return Ok(None);
    }
    let parts = profiles(bundle)?;
    let shipped = if with_models { bundle.models()? } else { Vec::new() };
    let active: HashMap<String, (bool, bool)> = store
        .active_regressors()
        .await?
        .into_iter()
        .map(|r| (r.key.clone(), (r.provenance.bundled, is_stale(&r.family, &r.feature_names))))
        .collect();
    let regressors: Vec<NewRegressor> = shipped
        .iter()
        .map(|m| {
            let activate = active.get(&m.key).is_none_or(|(bundled, stale)| *bundled || *stale);
            new_version(bundle, m, activate)
        })
        .collect();
    let mut follow_ups = Vec::new();
    let calibrate: BTreeSet<&str> =
        parts.iter().filter(|(_, _, _, b)| !b.comms.is_empty()).filter_map(|(_, _, p, _)| p.system.as_deref()).collect();
    for system in calibrate {
        follow_ups.push(follow_up(&Job::Calibrate(CalibrateParams { system: system.to_string() })));
    }
    if regressors.iter().any(|r| !r.activate) {
        follow_ups.push(follow_up(&Job::Retrain(RetrainJob::automatic("bundled measurements installed"))));
    }
    let manifest = serde_json::to_value(&bundle.manifest).map_err(|e| BundleError::Corrupt(e.to_string()))?;
    let profiles = parts
        .iter()
        .map(|(raw, gz, part, batch)| BundleProfile {
            profile: NewProfile {
                sha256: hex::encode(Sha256::digest(raw)),
                format: Format::PerfcastJsonl.as_str().to_string(),
                system: part.system.clone(),
                gpu: None,
                labels: BTreeMap::from([
                    ("bundle".to_string(), version.clone()),
                    ("dataset".to_string(), part.dataset.clone()),
                    ("part".to_string(), part.file.clone()),
                ]),
                raw,
                rejected: Vec::new(),
            },
            raw_gzip: gz.clone(),
            samples: batch.clone(),
        })
        .collect();
    let request = BundleInstall {
        version,
        manifest: &manifest,
        systems: &bundle.manifest.systems,
        profiles,
        regressors: &regressors,
        follow_ups: &follow_ups,
    };
    let Some(done) = store.install_bundle(&request).await? else { return Ok(None) };
    Ok(Some(InstallReport {
        version: version.clone(),
        profiles: done.profiles,
        samples: done.samples,
        models: done.regressors.len(),
        activated: done.regressors.iter().filter(|r| r.active).count(),
        removed_profiles: done.removed_profiles,
        seconds: started.elapsed().as_secs_f64(),
    }))
}

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
use crate::learn::lgbm::Model;
use crate::learn::registry::is_stale;
use crate::samples::Sample;
use crate::service::profiles::split_key;
use crate::service::startup::{Phase, Startup};
use crate::store::bundles::{BundleModels, BundleProfile, ModelsInstalled};
use crate::store::profiles::{NewProfile, SampleBatch, Stored};
use crate::store::regressors::{NewRegressor, Provenance};
use crate::store::Store;

/// The LightGBM models of the versions an install activated, parsed while its samples were written, by stored
/// regressor id (`RegressorRecord::id`): the start's registry takes them instead of parsing the same texts again
/// after the commit ([`crate::jobs::load_registry_at_start`]).
#[derive(Default)]
pub struct ParsedModels(pub HashMap<i64, Model>);

impl std::fmt::Debug for ParsedModels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ParsedModels({} models)", self.0.len())
    }
}

/// What [`install`] did (both steps).
#[derive(Debug)]
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
    /// Wall-clock time of the install (parsing and the transactions), seconds.
    pub seconds: f64,
    /// Of which reading the bundle (decompressing and parsing its parts and models), seconds.
    pub read_seconds: f64,
    /// The activated versions' models, parsed.
    pub parsed: ParsedModels,
}

/// What [`install_models`] did: the first step of an install, after which predictions are served.
#[derive(Debug)]
pub struct ModelsReport {
    /// Shipped model versions stored now, and of those activated (both 0 when an interrupted start or a replica
    /// stored them before: `stored_before`).
    pub models: usize,
    pub activated: usize,
    pub stored_before: bool,
    /// Profiles of an earlier bundle version removed.
    pub removed_profiles: u64,
    /// Wall-clock time of the step (reading the models and the transaction), seconds.
    pub seconds: f64,
    /// Of which decompressing and parsing the models, seconds.
    pub read_seconds: f64,
    /// The activated versions' models, parsed.
    pub parsed: ParsedModels,
}

/// What [`install_samples`] did: the second step of an install.
#[derive(Debug)]
pub struct SamplesReport {
    /// Profiles created and their samples (a part stored before, by an interrupted start or a replica, is not
    /// created again and not counted).
    pub profiles: usize,
    pub samples: u64,
    /// Whether this process recorded the version (false: a replica finished the same install first).
    pub recorded: bool,
    /// Wall-clock time of the step (reading the parts and the transactions), seconds.
    pub seconds: f64,
    /// Of which decompressing and parsing the parts, seconds.
    pub read_seconds: f64,
}

/// One part parsed: its decompressed bytes, its gzip'd bytes as shipped, the part, its samples.
type ParsedPart = (Vec<u8>, Vec<u8>, super::Part, SampleBatch);

/// The profiles of `bundle`'s parts, parsed exactly as an upload of the part's bytes would be (format
/// `perfcast_jsonl`, split keys from the bytes' SHA-256 and the sample's index), labelled with their dataset and the
/// bundle version. CPU work (inflating and parsing 531,891 lines): the parts are parsed on every core, largest
/// first. A part with a row perfcast refuses, or a GPU outside the catalog, is an error: the bundle is perfcast's
/// own output.
fn read_parts(bundle: &Bundle) -> Result<Vec<ParsedPart>, BundleError> {
    let files = bundle.part_files()?;
    let parts = &bundle.manifest.parts;
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(parts[i].samples));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 8);
    let mut parsed = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some(&i) = order.get(k) else { return Ok::<_, BundleError>(done) };
                        done.push((i, read_part(&files, &parts[i])?));
                    }
                })
            })
            .collect();
        let mut parsed = Vec::with_capacity(parts.len());
        for w in workers {
            parsed.extend(w.join().map_err(|_| BundleError::Corrupt("a part's parser panicked".into()))??);
        }
        Ok::<_, BundleError>(parsed)
    })?;
    parsed.sort_by_key(|(i, _)| *i);
    Ok(parsed.into_iter().map(|(_, p)| p).collect())
}

/// One part of `samples.tar` (`files`), inflated and parsed (see [`read_parts`]).
fn read_part(files: &BTreeMap<String, Vec<u8>>, part: &super::Part) -> Result<ParsedPart, BundleError> {
    let gz = files.get(&part.file).ok_or_else(|| BundleError::Corrupt(format!("no {} in samples.tar", part.file)))?;
    let raw = gunzip(gz, &part.file)?;
    let parsed = ingest::parse(Format::PerfcastJsonl, &raw, &Context::default())
        .map_err(|e| BundleError::Corrupt(format!("{}: {e}", part.file)))?;
    if let Some(r) = parsed.rejected.first() {
        return Err(BundleError::Corrupt(format!("{} line {}: {}", part.file, r.line, r.reason)));
    }
    let sha = Sha256::digest(&raw);
    let mut batch = SampleBatch::default();
    // A part names a handful of GPUs on 10⁵ rows: resolve each name once (a catalog lookup normalizes every
    // catalog name and alias; per row it was 40 % of the install's reading).
    let mut canonical: HashMap<String, String> = HashMap::new();
    for (i, sample) in parsed.samples.into_iter().enumerate() {
        match sample {
            Sample::Op(mut s) => {
                if let Some(name) = canonical.get(&s.gpu) {
                    s.gpu.clone_from(name);
                } else {
                    let gpu = lookup(&s.gpu).ok_or_else(|| {
                        BundleError::Corrupt(format!("{}: GPU {:?} not in the catalog", part.file, s.gpu))
                    })?;
                    canonical.insert(std::mem::replace(&mut s.gpu, gpu.spec.name.clone()), gpu.spec.name.clone());
                }
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
    Ok((raw, gz.clone(), part.clone(), batch))
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
        fit: m.fit.clone(),
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

/// Installs `bundle` unless its version is installed already (then `None`), both steps one after the other
/// ([`install_models`], then [`install_samples`]; `perfcast serve` runs the second after it is ready). With
/// `with_models: false` it installs the training set only (`perfcast models bundle` trains the models on it).
/// Errors: an unreadable bundle, a database error.
pub async fn install(
    store: &Store,
    bundle: &Bundle,
    with_models: bool,
    progress: &Startup,
) -> Result<Option<InstallReport>, BundleError> {
    let Some(models) = install_models(store, bundle, with_models, progress).await? else {
        return Ok(None);
    };
    let samples = install_samples(store, bundle, progress).await?;
    Ok(Some(InstallReport {
        version: bundle.manifest.version.clone(),
        profiles: samples.profiles,
        samples: samples.samples,
        models: models.models,
        activated: models.activated,
        removed_profiles: models.removed_profiles,
        seconds: models.seconds + samples.seconds,
        read_seconds: models.read_seconds + samples.read_seconds,
        parsed: models.parsed,
    }))
}

/// The first step of installing `bundle` (`crate::store::bundles`), after which predictions can be served:
/// unless its version is installed already (then `None`), its systems and, with `with_models`, its models — each
/// activated where no version of its key is active, or the active one is bundled (an earlier bundle) or trained
/// on another feature list than this build computes; where a model trained here is active, the shipped one is
/// stored inactive (the last step queues a retrain to compare them). Profiles of earlier bundle versions are
/// removed. Returns the activated models parsed (their LightGBM texts parse while the transaction writes).
/// `progress` follows it: totals from the manifest, the models written.
///
/// Errors: an unreadable bundle, a database error.
pub async fn install_models(
    store: &Store,
    bundle: &Bundle,
    with_models: bool,
    progress: &Startup,
) -> Result<Option<ModelsReport>, BundleError> {
    let started = Instant::now();
    let version = &bundle.manifest.version;
    progress.set_phase(Phase::Checking);
    if store.bundle_installed(version).await? {
        return Ok(None);
    }
    let samples_total = bundle.manifest.parts.iter().map(|p| p.samples).sum();
    progress.set_totals(samples_total, if with_models { bundle.manifest.models.len() as u64 } else { 0 });
    // A start that stopped after this step (or a replica that did it): the samples are left, the models are in.
    if with_models && store.bundle_models_stored(version).await? {
        progress.add_models(bundle.manifest.models.len() as u64);
        return Ok(Some(ModelsReport {
            models: 0,
            activated: 0,
            stored_before: true,
            removed_profiles: 0,
            seconds: started.elapsed().as_secs_f64(),
            read_seconds: 0.0,
            parsed: ParsedModels::default(),
        }));
    }
    progress.set_phase(Phase::Reading);
    // Off the async runtime: the server answers /healthz and /readyz meanwhile.
    let owned = bundle.clone();
    let shipped = if with_models {
        tokio::task::spawn_blocking(move || owned.models())
            .await
            .map_err(|e| BundleError::Corrupt(format!("reading the bundled models: {e}")))??
    } else {
        Vec::new()
    };
    let read_seconds = started.elapsed().as_secs_f64();
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
    // The activated models' LightGBM texts are parsed on a thread of their own while the transaction writes (the
    // parse takes as long as the writes); a text that does not parse is left to the registry's load, which logs it.
    let texts: Vec<Option<String>> = regressors.iter().map(|r| r.activate.then(|| r.model.clone())).collect();
    let parsing = tokio::task::spawn_blocking(move || {
        texts.into_iter().map(|t| t.and_then(|t| Model::from_text(&t).ok())).collect::<Vec<Option<Model>>>()
    });
    progress.set_phase(Phase::WritingModels);
    let request = BundleModels { version, systems: &bundle.manifest.systems, regressors: &regressors };
    let (stored, removed_profiles, stored_before) = match store.install_bundle_models(&request, progress).await? {
        ModelsInstalled::BundleInstalled => {
            progress.reset_counts();
            return Ok(None);
        }
        ModelsInstalled::StoredBefore => (Vec::new(), 0, true),
        ModelsInstalled::Stored { regressors, removed_profiles } => (regressors, removed_profiles, false),
    };
    let parsed = parsing.await.map_err(|e| BundleError::Corrupt(format!("parsing the shipped models: {e}")))?;
    let parsed = stored.iter().zip(parsed).filter_map(|(r, m)| Some((r.id, m?))).collect();
    Ok(Some(ModelsReport {
        models: stored.len(),
        activated: stored.iter().filter(|r| r.active).count(),
        stored_before,
        removed_profiles,
        seconds: started.elapsed().as_secs_f64(),
        read_seconds,
        parsed: ParsedModels(parsed),
    }))
}

/// The second step of installing `bundle` (`crate::store::bundles`), after [`install_models`]: its training set as
/// profiles (labels `bundle` = the version, `dataset`, `part`), one transaction per part (a part stored before is
/// kept), then the calibrations of its systems and the retrain a model stored inactive calls for, and the row that
/// records the version. `progress` counts the samples written.
///
/// Errors: an unreadable bundle, a database error.
pub async fn install_samples(store: &Store, bundle: &Bundle, progress: &Startup) -> Result<SamplesReport, BundleError> {
    let started = Instant::now();
    let version = &bundle.manifest.version;
    let owned = bundle.clone();
    let parts = tokio::task::spawn_blocking(move || read_parts(&owned))
        .await
        .map_err(|e| BundleError::Corrupt(format!("reading the bundled measurements: {e}")))??;
    let read_seconds = started.elapsed().as_secs_f64();
    let calibrate: BTreeSet<&str> = parts
        .iter()
        .filter(|(_, _, _, b)| !b.comms.is_empty())
        .filter_map(|(_, _, p, _)| p.system.as_deref())
        .collect();
    let follow_ups: Vec<_> = calibrate
        .into_iter()
        .map(|system| follow_up(&Job::Calibrate(CalibrateParams { system: system.to_string() })))
        .collect();
    let retrain = follow_up(&Job::Retrain(RetrainJob::automatic("bundled measurements installed")));
    let manifest = serde_json::to_value(&bundle.manifest).map_err(|e| BundleError::Corrupt(e.to_string()))?;
    let (mut profiles, mut samples) = (0, 0);
    let mut conn = store.install_connection().await?;
    for (raw, gz, part, batch) in parts {
        let profile = BundleProfile {
            profile: NewProfile {
                sha256: hex::encode(Sha256::digest(&raw)),
                format: Format::PerfcastJsonl.as_str().to_string(),
                system: part.system.clone(),
                gpu: None,
                labels: BTreeMap::from([
                    ("bundle".to_string(), version.clone()),
                    ("dataset".to_string(), part.dataset.clone()),
                    ("part".to_string(), part.file.clone()),
                ]),
                raw: &raw,
                rejected: Vec::new(),
            },
            raw_gzip: gz,
            samples: batch,
        };
        match store.install_bundle_profile(&mut conn, &profile, progress).await {
            Ok(Stored::Created(r)) => {
                profiles += 1;
                samples += r.samples;
            }
            // Stored before (an interrupted start, a replica): its samples count as done.
            Ok(Stored::Duplicate(r)) => progress.add_samples(r.samples),
            Err(e) => {
                store.end_install(conn).await;
                return Err(e.into());
            }
        }
    }
    store.end_install(conn).await;
    let recorded = store.finish_bundle(version, &manifest, &follow_ups, &retrain).await?;
    Ok(SamplesReport { profiles, samples, recorded, seconds: started.elapsed().as_secs_f64(), read_seconds })
}

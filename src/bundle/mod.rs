//! The bundled measurements and models: what makes a fresh install serve learned answers at once.
//!
//! `models/bundled/` (committed, embedded in the binary with `include_bytes!`, so `perfcast serve` needs no file
//! beside it) holds three files that `perfcast models bundle` writes from the train split of `../shared/data`
//! (DATA.md):
//! - `samples.tar` — the compact training set: one gzip'd perfcast JSON-lines file per part (a dataset, or one
//!   system's collectives), thinned evenly per regressor key;
//! - `models.json.zst` — the LightGBM models (model texts, features, chosen hyper-parameters, validation errors)
//!   the retrain job trained on exactly that set, one per active key ([`ShippedModel`]); zstd-compressed, and
//!   without their hold-out twins (half the size): the first retrain of a key on a user's database replaces the
//!   bundled version by one trained on the bundled rows and the user's (`Reason::ReplacesBundled`);
//! - `manifest.json` — what the bundle holds ([`Manifest`]): its version (a hash of the other two files), the
//!   commit and date it was built at, its parts and systems, and per key the datasets, rows, features,
//!   hyper-parameters and validation error.
//!
//! At startup ([`install`], called by `app`), a database without the bundle's version gets, in one transaction,
//! the training set as profiles labelled with their dataset and the bundle version (so later retrains train on it
//! together with the users' uploads and never lose the GPUs they did not measure), the systems its collectives
//! were measured on, and the shipped models as the active versions of their keys (unless a model trained here is
//! active: then the next retrain decides). [`registry`] loads the shipped models without a database (the
//! accuracy reports use it: what a fresh install answers).
//!
//! May import: the core, `ingest`, `store`, `jobs`, `service` (the upload's split key). Imported by `app`, `cli`
//! and `eval`.

mod install;
pub mod write;

use std::collections::BTreeMap;
use std::io::Read;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::hw::SystemSpec;
use crate::learn::lgbm::Model;
use crate::learn::registry::is_stale;
use crate::learn::{ActiveRegressor, Registry};

pub use install::{install, install_models, install_samples, InstallReport, ModelsReport, ParsedModels, SamplesReport};

/// The bundle's manifest, as committed (`models/bundled/manifest.json`).
pub const MANIFEST_JSON: &str = include_str!("../../models/bundled/manifest.json");
/// The compact training set: a tar of gzip'd perfcast JSON-lines files, one per [`Part`].
pub const SAMPLES_TAR: &[u8] = include_bytes!("../../models/bundled/samples.tar");
/// The shipped models: a zstd-compressed JSON array of [`ShippedModel`].
pub const MODELS_ZST: &[u8] = include_bytes!("../../models/bundled/models.json.zst");

/// The command that regenerates the committed bundle (run from the repository root with `../shared` beside it).
pub const REGENERATE: &str =
    "cargo run --release --locked --bin perfcast -- models bundle --data ../shared/data --out models/bundled";

/// Most bytes one part or the models file may inflate to (256 MiB): the committed parts are a few MiB each.
const MAX_INFLATED: u64 = 256 << 20;

/// Why a bundle cannot be read or installed.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A file of the bundle is missing, damaged or inconsistent (a bug of `perfcast models bundle`, or a hand edit).
    #[error("the bundle is unreadable: {0}")]
    Corrupt(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// One file of the training set: a profile at install.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// File name inside `samples.tar` (`<name>.jsonl.gz`).
    pub file: String,
    /// The dataset of `../shared/data` it comes from (`aiconfigurator`, `neusight`, …): the profile's `dataset`
    /// label and what model provenance lists.
    pub dataset: String,
    /// The system its communication samples were measured on (one of [`Manifest::systems`]); none for operators.
    pub system: Option<String>,
    /// What it holds and how it was chosen.
    pub description: String,
    /// Samples (lines) in the file.
    pub samples: u64,
    /// Rows of the dataset's train split it was thinned from.
    pub source_rows: u64,
}

/// A key's line in the manifest: what the shipped model was trained on and how well it validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelEntry {
    pub key: String,
    pub family: String,
    /// `all` or a GPU name.
    pub scope: String,
    /// Datasets of its training rows.
    pub datasets: Vec<String>,
    /// Samples of the key in the bundle (the retrain's unchanged-samples check compares with it).
    pub samples: u64,
    pub train_rows: u64,
    pub validation_rows: u64,
    /// Feature names in model order (must equal the running build's, or the model is not served).
    pub features: Vec<String>,
    /// The chosen LightGBM configuration (`name`, `params`, `num_iterations` after early stopping).
    pub hyper_parameters: serde_json::Value,
    /// MAPE on the seeded 20 % validation rows, 0–1.
    pub validation_mape: f64,
    /// The analytic model's MAPE on the same rows, 0–1.
    pub analytic_validation_mape: f64,
    /// Bytes of its LightGBM model text.
    pub model_bytes: u64,
}

/// The bundle's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Layout version of the bundle files (1).
    pub format: u32,
    /// First 16 hex digits of a SHA-256 over `samples.tar` and `models.json.zst` ([`version_of`]).
    pub version: String,
    /// Git commit the bundle was built at (`-dirty` when the tree had changes), when known.
    pub commit: Option<String>,
    /// perfcast version that built it.
    pub perfcast_version: String,
    /// When it was built (RFC 3339, UTC).
    pub created_at: String,
    /// The command that rebuilds it.
    pub command: String,
    /// Most samples per regressor key (class, phase, dtype) after thinning.
    pub max_rows_per_key: usize,
    /// Hyper-parameter grid of the retrain that trained the models.
    pub grid: crate::learn::Grid,
    /// Seconds the build took (reading, thinning, training).
    pub build_seconds: f64,
    pub parts: Vec<Part>,
    /// Systems the communication parts were measured on (created at install when missing).
    pub systems: Vec<SystemSpec>,
    /// Per shipped model.
    pub models: Vec<ModelEntry>,
    /// Bytes of `samples.tar` and `models.json.zst`.
    pub samples_bytes: u64,
    pub models_bytes: u64,
}

/// One shipped model version (an element of `models.json.zst`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShippedModel {
    pub key: String,
    pub family: String,
    pub scope: String,
    pub features: Vec<String>,
    /// The fit's configuration, accuracy and training set, written flat (`candidate` … `importance` keys, between
    /// `features` and `datasets`, as the bundle has always had them).
    #[serde(flatten)]
    pub fit: crate::learn::FitSummary,
    pub datasets: Vec<String>,
    /// When it was trained (RFC 3339, UTC).
    pub trained_at: String,
    /// LightGBM text, refit on all rows.
    pub model: String,
    /// The same configuration trained on the 80 % side only (what promotion compares on held-out rows); empty in
    /// the committed bundle, which leaves the hold-out twins out.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub holdout_model: String,
}

/// A bundle in memory: its manifest and the two data files (the embedded one, or one read from a directory).
#[derive(Debug, Clone)]
pub struct Bundle {
    pub manifest: Manifest,
    pub samples_tar: Vec<u8>,
    pub models_zst: Vec<u8>,
}

/// The version of a bundle with these data files: the first 16 hex digits of SHA-256(SHA-256(samples) ‖
/// SHA-256(models)).
pub fn version_of(samples_tar: &[u8], models_zst: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(Sha256::digest(samples_tar));
    h.update(Sha256::digest(models_zst));
    hex::encode(h.finalize())[..16].to_string()
}

/// Inflates `reader` (a decoder of `what`), at most [`MAX_INFLATED`] bytes out.
fn inflate(reader: impl Read, what: &str) -> Result<Vec<u8>, BundleError> {
    let mut out = Vec::new();
    reader.take(MAX_INFLATED + 1).read_to_end(&mut out).map_err(|e| BundleError::Corrupt(format!("{what}: {e}")))?;
    if out.len() as u64 > MAX_INFLATED {
        return Err(BundleError::Corrupt(format!("{what} inflates to more than {MAX_INFLATED} bytes")));
    }
    Ok(out)
}

/// Inflates gzip `bytes` (at most [`MAX_INFLATED`] bytes out).
pub(crate) fn gunzip(bytes: &[u8], what: &str) -> Result<Vec<u8>, BundleError> {
    inflate(flate2::read::GzDecoder::new(bytes), what)
}

impl Bundle {
    /// The bundle embedded in this binary. Errors: a manifest that does not parse.
    pub fn embedded() -> Result<Bundle, BundleError> {
        let manifest = serde_json::from_str(MANIFEST_JSON)
            .map_err(|e| BundleError::Corrupt(format!("embedded manifest.json: {e}")))?;
        Ok(Bundle { manifest, samples_tar: SAMPLES_TAR.to_vec(), models_zst: MODELS_ZST.to_vec() })
    }

    /// The bundle in directory `dir` (`manifest.json`, `samples.tar`, `models.json.zst`).
    pub fn read_dir(dir: &std::path::Path) -> Result<Bundle, BundleError> {
        let read = |name: &str| {
            std::fs::read(dir.join(name))
                .map_err(|e| BundleError::Corrupt(format!("{}: {e}", dir.join(name).display())))
        };
        let manifest = serde_json::from_slice(&read("manifest.json")?)
            .map_err(|e| BundleError::Corrupt(format!("manifest.json: {e}")))?;
        Ok(Bundle { manifest, samples_tar: read("samples.tar")?, models_zst: read("models.json.zst")? })
    }

    /// True when the manifest's version is the hash of the data files (nothing was edited by hand since).
    pub fn is_consistent(&self) -> bool {
        self.manifest.version == version_of(&self.samples_tar, &self.models_zst)
    }

    /// The files of `samples.tar` by name (gzip'd bytes).
    pub fn part_files(&self) -> Result<BTreeMap<String, Vec<u8>>, BundleError> {
        let mut out = BTreeMap::new();
        let mut archive = tar::Archive::new(&self.samples_tar[..]);
        let entries = archive.entries().map_err(|e| BundleError::Corrupt(format!("samples.tar: {e}")))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| BundleError::Corrupt(format!("samples.tar: {e}")))?;
            let name = entry
                .path()
                .map_err(|e| BundleError::Corrupt(format!("samples.tar: {e}")))?
                .to_string_lossy()
                .into_owned();
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).map_err(|e| BundleError::Corrupt(format!("samples.tar {name}: {e}")))?;
            out.insert(name, bytes);
        }
        Ok(out)
    }

    /// The shipped models.
    pub fn models(&self) -> Result<Vec<ShippedModel>, BundleError> {
        if self.models_zst.is_empty() {
            return Ok(Vec::new());
        }
        let decoder = zstd::stream::read::Decoder::new(&self.models_zst[..])
            .map_err(|e| BundleError::Corrupt(format!("models.json.zst: {e}")))?;
        let json = inflate(decoder, "models.json.zst")?;
        serde_json::from_slice(&json).map_err(|e| BundleError::Corrupt(format!("models.json.zst: {e}")))
    }
}

/// The shipped models as a registry — what a fresh install serves (each key at version 1, as the install
/// numbers them in a new database). Models trained on another feature list than this build computes are left
/// out, as the service would. Errors: an unreadable bundle or model text.
pub fn registry(bundle: &Bundle) -> Result<Registry, BundleError> {
    let mut out = Vec::new();
    for m in bundle.models()? {
        if is_stale(&m.family, &m.features) {
            tracing::warn!(key = %m.key, "bundled model was trained on another feature list; not used");
            continue;
        }
        let model = Model::from_text(&m.model).map_err(|e| BundleError::Corrupt(format!("{}: {e}", m.key)))?;
        out.push(ActiveRegressor {
            key: m.key,
            version: 1,
            model,
            feature_names: m.features,
            validation_mape: m.fit.validation_mape,
            summary: m.fit.summary,
        });
    }
    Ok(Registry::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::registry::current_features;

    /// The committed bundle must match the code: its files unedited since `perfcast models bundle` wrote them, and
    /// every model trained on the feature list this build computes (a feature change makes the service refuse the
    /// shipped models, so it must come with a regenerated bundle).
    #[test]
    fn the_committed_bundle_is_consistent_and_matches_this_build() {
        let b = Bundle::embedded().expect("models/bundled/manifest.json parses");
        assert!(b.is_consistent(), "models/bundled changed since it was built: run `{REGENERATE}`");
        let models = b.models().expect("models.json.zst reads");
        assert!(!models.is_empty(), "the committed bundle has no models: run `{REGENERATE}`");
        assert_eq!(models.len(), b.manifest.models.len());
        for m in &models {
            let current =
                current_features(&m.family).unwrap_or_else(|| panic!("{}: unknown family {}", m.key, m.family));
            assert!(
                current.iter().eq(m.features.iter()),
                "{}: the bundled model was trained on other features than this build computes\n  bundled: {:?}\n  \
                 build:   {current:?}\nrun `perfcast models bundle …` ({REGENERATE}) and rebuild",
                m.key,
                m.features
            );
        }
        let files = b.part_files().unwrap();
        for p in &b.manifest.parts {
            assert!(files.contains_key(&p.file), "{} missing from samples.tar", p.file);
        }
        assert_eq!(registry(&b).unwrap().len(), models.len(), "every shipped model loads");
    }

    /// The layout `ShippedModel` had before its fit fields moved into [`crate::learn::FitSummary`] (what the
    /// committed `models.json.zst` was written with).
    #[derive(Serialize, Deserialize)]
    struct ShippedModelBeforeFitSummary {
        key: String,
        family: String,
        scope: String,
        features: Vec<String>,
        candidate: serde_json::Value,
        candidates: serde_json::Value,
        validation_mape: f64,
        validation_signed: f64,
        analytic_validation_mape: f64,
        train_rows: u64,
        validation_rows: u64,
        samples: u64,
        summary: serde_json::Value,
        importance: serde_json::Value,
        datasets: Vec<String>,
        trained_at: String,
        model: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        holdout_model: String,
    }

    /// The flattened [`crate::learn::FitSummary`] keeps `models.json` as it was: the committed file read through
    /// the old layout and through `ShippedModel` writes the same bytes (same keys, order and values), and
    /// `ShippedModel` keeps every key of the committed file in its place.
    #[test]
    fn shipped_models_serialize_as_before_the_fit_summary() {
        let json = zstd::stream::decode_all(MODELS_ZST).expect("models.json.zst inflates");
        let old: Vec<ShippedModelBeforeFitSummary> = serde_json::from_slice(&json).expect("old layout parses");
        let new: Vec<ShippedModel> = serde_json::from_slice(&json).expect("models.json parses");
        let (old, new) = (serde_json::to_vec(&old).unwrap(), serde_json::to_vec(&new).unwrap());
        let at = old.iter().zip(&new).position(|(a, b)| a != b).unwrap_or(old.len().min(new.len()));
        assert!(
            old == new,
            "differs at byte {at}: old {:?} new {:?}",
            String::from_utf8_lossy(&old[at.saturating_sub(80)..(at + 80).min(old.len())]),
            String::from_utf8_lossy(&new[at.saturating_sub(80)..(at + 80).min(new.len())])
        );
        let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        let committed: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let written: serde_json::Value = serde_json::from_slice(&new).unwrap();
        for (c, w) in committed.as_array().unwrap().iter().zip(written.as_array().unwrap()) {
            assert_eq!(keys(c), keys(w));
        }
        if new != json {
            // Only float parsing may differ (serde_json without `float_roundtrip` may read a float one ulp off, and
            // its shortest form can then be a digit shorter): with every number replaced by `#` the two texts are
            // the same bytes, and every number agrees to 1e-15 relative.
            assert!(numbers_masked(&json) == numbers_masked(&new), "the shipped models' layout changed");
            let (a, b) = (numbers(&committed), numbers(&written));
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() <= 1e-15 * x.abs().max(y.abs()), "{x} read back as {y}");
            }
        }
    }

    /// `text` with each number outside a string replaced by `#`.
    fn numbers_masked(text: &[u8]) -> Vec<u8> {
        let (mut out, mut in_string, mut escaped, mut in_number) =
            (Vec::with_capacity(text.len()), false, false, false);
        for &c in text {
            if in_string {
                out.push(c);
                (in_string, escaped) = (escaped || c != b'"', !escaped && c == b'\\');
            } else if c.is_ascii_digit() || (in_number && matches!(c, b'.' | b'e' | b'E' | b'+' | b'-')) || c == b'-' {
                if !in_number {
                    out.push(b'#');
                }
                in_number = true;
            } else {
                in_number = false;
                in_string = c == b'"';
                out.push(c);
            }
        }
        out
    }

    /// Every number in `v`, depth first.
    fn numbers(v: &serde_json::Value) -> Vec<f64> {
        match v {
            serde_json::Value::Number(n) => vec![n.as_f64().unwrap()],
            serde_json::Value::Array(a) => a.iter().flat_map(numbers).collect(),
            serde_json::Value::Object(o) => o.values().flat_map(numbers).collect(),
            _ => Vec::new(),
        }
    }
}

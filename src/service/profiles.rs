//! Profile uploads: detect the format, parse, normalize the samples, store raw bytes and samples in one
//! transaction, wake the retraining worker.

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

use super::{Service, ServiceError};
use crate::hw::Precision;
use crate::ingest::{self, Context, Format};
use crate::jobs::{self, CalibrateParams, Job};
use crate::samples::{Rejected, Sample};
use crate::store::profiles::{NewProfile, ProfileRecord, SampleBatch, Stored};

/// The query parameters of an upload.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UploadParams {
    /// Format name; detected from the content when absent.
    pub format: Option<String>,
    /// System the file was measured on (its GPU is the default device; communication samples belong to it).
    pub system: Option<String>,
    /// GPU the file was measured on, when the file does not name it.
    pub gpu: Option<String>,
    /// Precision, when the format does not record it (NeuSight: fp32).
    pub dtype: Option<String>,
    /// Ranks of the measured collectives, when the file does not record it (OSU collectives, TAU, traces).
    pub ranks: Option<String>,
    /// Nodes the ranks span, when the file does not say.
    pub nodes: Option<String>,
    /// Ranks per node, when the file does not say.
    pub gpus_per_node: Option<String>,
    /// The collective an old nccl-tests log measured (it does not name it).
    pub collective: Option<String>,
    /// Every other parameter: free CI labels (`ci_run`, `git_sha`, …).
    pub labels: BTreeMap<String, String>,
}

/// What an upload did.
#[derive(Debug, Clone, PartialEq)]
pub struct UploadOutcome {
    pub profile: ProfileRecord,
    /// True when identical bytes were uploaded before (nothing was written).
    pub duplicate: bool,
    /// Samples accepted per kind (`op`, `comm`, `kernel`); empty for a duplicate.
    pub by_kind: BTreeMap<&'static str, u64>,
}

/// Stable 64-bit key of the `index`-th sample of an upload (`sha`: the SHA-256 of its bytes): decides its side of
/// the 80/20 split. The bundled measurements (`crate::bundle`) are keyed the same way.
pub fn split_key(sha: &[u8], index: usize) -> u64 {
    let mut h = Sha256::new();
    h.update(sha);
    h.update((index as u64).to_le_bytes());
    let d = h.finalize();
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

impl Service {
    /// Stores an upload of `raw` (already gzip-decoded) with `params`.
    ///
    /// Errors: unknown `format`, `system` or `gpu` (naming the parameter); a format that cannot be detected
    /// (listing the formats tried); an unparseable file (`Unparseable` with line and column); a file with no
    /// usable sample (`Invalid` on `body`, with the first rejection reasons).
    pub async fn upload_profile(&self, raw: &[u8], params: &UploadParams) -> Result<UploadOutcome, ServiceError> {
        self.upload(raw, None, params).await
    }

    /// Stores an upload of several files of one run (multipart): TAU profiles of every rank, rocprof outputs and
    /// their companions. The raw bytes kept are a tar archive of the files (sorted by name, so the same files give
    /// the same archive and the same profile). Errors as [`Service::upload_profile`].
    pub async fn upload_profile_files(
        &self,
        files: &[(String, Vec<u8>)],
        params: &UploadParams,
    ) -> Result<UploadOutcome, ServiceError> {
        if files.is_empty() {
            return Err(ServiceError::invalid("body", "the multipart upload has no file parts"));
        }
        let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut builder = tar::Builder::new(Vec::new());
        for (i, (name, bytes)) in sorted.iter().enumerate() {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(0);
            header.set_cksum();
            let path = if name.is_empty() { format!("part-{i}") } else { name.replace(['/', '\\'], "_") };
            builder
                .append_data(&mut header, path, &bytes[..])
                .map_err(|e| ServiceError::invalid("body", format!("cannot archive part {name:?}: {e}")))?;
        }
        let archive = builder.into_inner().map_err(|e| ServiceError::invalid("body", e.to_string()))?;
        let parts: Vec<(&str, &[u8])> = sorted.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
        self.upload(&archive, Some(&parts), params).await
    }

    async fn upload(
        &self,
        raw: &[u8],
        parts: Option<&[(&str, &[u8])]>,
        params: &UploadParams,
    ) -> Result<UploadOutcome, ServiceError> {
        let system = match &params.system {
            Some(name) => Some(self.system_for(name, "system").await?),
            None => None,
        };
        let gpu = match &params.gpu {
            Some(name) => Some(self.gpu(name, "gpu")?.name),
            None => system.as_ref().map(|s| s.gpu.name.clone()),
        };
        let dtype = match &params.dtype {
            Some(d) => Some(Precision::parse(d).ok_or_else(|| {
                ServiceError::invalid(
                    "dtype",
                    format!("unknown dtype {d:?} (fp64, fp32, tf32, fp16, bf16, fp8, fp8_block, nvfp4)"),
                )
            })?),
            None => None,
        };
        let format = match &params.format {
            Some(f) => Format::parse(f).ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.as_str()).collect();
                ServiceError::invalid("format", format!("unknown format {f:?}; known: {}", names.join(", ")))
            })?,
            None => match parts {
                Some(p) => ingest::detect_files(p),
                None => ingest::detect(raw),
            }
            .ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.as_str()).collect();
                ServiceError::invalid(
                    "format",
                    format!("cannot detect the format (tried {}); give ?format=", names.join(", ")),
                )
            })?,
        };
        let sha = Sha256::digest(raw);
        if let Some(profile) = self.store.profile_by_sha256(&hex::encode(sha)).await? {
            return Ok(UploadOutcome { profile, duplicate: true, by_kind: BTreeMap::new() });
        }
        let count = |field: &str, v: &Option<String>| -> Result<Option<u32>, ServiceError> {
            v.as_deref()
                .map(|s| {
                    s.parse::<u32>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| ServiceError::invalid(field, format!("{s:?} is not a positive whole number")))
                })
                .transpose()
        };
        let collective = match &params.collective {
            Some(c) => Some(serde_json::from_value::<crate::op::Collective>(serde_json::Value::String(c.clone())).map_err(|_| {
                ServiceError::invalid("collective", format!("unknown collective {c:?} (all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv)"))
            })?),
            None => None,
        };
        let ctx = Context {
            gpu: gpu.clone(),
            dtype,
            ranks: count("ranks", &params.ranks)?,
            nodes: count("nodes", &params.nodes)?,
            gpus_per_node: count("gpus_per_node", &params.gpus_per_node)?,
            collective,
        };
        let parsed = match parts {
            Some(p) => ingest::parse_files(format, p, &ctx),
            None => ingest::parse(format, raw, &ctx),
        }
        .map_err(|e| ServiceError::Unparseable { line: e.line, column: e.column, message: e.message })?;

        let mut rejected = parsed.rejected;
        let mut batch = SampleBatch::default();
        let mut unknown_gpus: HashMap<String, u64> = HashMap::new();
        let gpus = self.gpus.load();
        for (i, sample) in parsed.samples.into_iter().enumerate() {
            match sample {
                Sample::Op(mut s) => match gpus.spec(&s.gpu) {
                    Some(g) => {
                        s.gpu = g.name.clone();
                        batch.ops.push((s, split_key(&sha, i)));
                    }
                    None => *unknown_gpus.entry(s.gpu).or_default() += 1,
                },
                Sample::Comm(s) => batch.comms.push(s),
                Sample::Timer(s) => batch.timers.push(s),
                Sample::Kernel(mut s) => {
                    if let Some(g) = s.gpu.as_deref().and_then(|n| gpus.spec(n)) {
                        s.gpu = Some(g.name.clone());
                    } else if s.gpu.is_none() {
                        s.gpu = gpu.clone();
                    }
                    batch.kernels.push(s);
                }
            }
        }
        let mut unknown: Vec<(String, u64)> = unknown_gpus.into_iter().collect();
        unknown.sort();
        for (name, n) in unknown {
            rejected.push(Rejected {
                line: 0,
                reason: format!("{n} sample(s) on GPU {name:?}, which is not in the catalog (GET /v1/gpus)"),
            });
        }
        if batch.is_empty() {
            let first: Vec<String> =
                rejected.iter().take(5).map(|r| format!("line {}: {}", r.line, r.reason)).collect();
            return Err(ServiceError::invalid(
                "body",
                format!("no usable sample in the file ({} rejected): {}", rejected.len(), first.join("; ")),
            ));
        }
        let by_kind = BTreeMap::from([
            ("op", batch.ops.len() as u64),
            ("comm", batch.comms.len() as u64),
            ("kernel", batch.kernels.len() as u64),
            ("timer", batch.timers.len() as u64),
        ]);
        let new = NewProfile {
            sha256: hex::encode(sha),
            format: format.as_str().to_string(),
            system: system.map(|s| s.name),
            gpu,
            labels: params.labels.clone(),
            raw,
            rejected,
        };
        // Communication samples of a system: recalibrate it in the background. The job is queued in the upload's
        // transaction, so a crash cannot keep the samples and lose the calibration they call for.
        let calibrate = match (&new.system, batch.comms.is_empty()) {
            (Some(system), false) => Some(jobs::follow_up(&Job::Calibrate(CalibrateParams { system: system.clone() }))),
            _ => None,
        };
        match self.store.insert_profile(&new, &batch, calibrate.as_ref()).await? {
            Stored::Created(profile) => {
                let kinds: Vec<(&str, u64)> = by_kind.iter().map(|(k, v)| (*k, *v)).collect();
                crate::metrics::upload(format.as_str(), false, &kinds);
                self.worker.samples_changed();
                Ok(UploadOutcome { profile, duplicate: false, by_kind })
            }
            Stored::Duplicate(profile) => {
                crate::metrics::upload(format.as_str(), true, &[]);
                Ok(UploadOutcome { profile, duplicate: true, by_kind: BTreeMap::new() })
            }
        }
    }
}

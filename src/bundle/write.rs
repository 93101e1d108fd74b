//! Writing a bundle's files (`perfcast models bundle`): samples as perfcast JSON lines, gzip and tar with fixed
//! headers (the same input gives the same bytes, so an unchanged bundle keeps its version), the manifest.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::{version_of, Manifest};
use crate::samples::{CommSample, OpSample};

/// Significant digits a bundled time keeps: the measurements repeat to about 1 %, so five digits lose nothing
/// and save a third of the bytes.
pub const TIME_DIGITS: usize = 5;

/// `t` rounded to [`TIME_DIGITS`] significant digits.
pub fn round_time(t: f64) -> f64 {
    format!("{t:.*e}", TIME_DIGITS - 1).parse().unwrap_or(t)
}

/// Operator samples as perfcast JSON lines: `op`, `phase`, `dtype`, `gpu` (as given: write catalog names),
/// the class's non-zero dims by name, `time_us` ([`round_time`]), and the sample's attributes when it has any (the
/// bundle keeps only those that say whose kernel measured it; the profile's `dataset` label says where they come
/// from).
pub fn op_jsonl(samples: &[OpSample]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in samples {
        let dims: Map<String, Value> =
            s.op.dim_names()
                .iter()
                .zip(s.dims)
                .filter(|(_, v)| *v > 0)
                .map(|(n, v)| (n.to_string(), json!(v)))
                .collect();
        let mut line = json!({"op": s.op, "phase": s.phase, "dtype": s.dtype, "gpu": s.gpu, "dims": dims,
            "time_us": round_time(s.time_us)});
        if !s.attributes.is_empty() {
            line["attributes"] = json!(s.attributes);
        }
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// Communication samples as perfcast JSON lines (`kind: comm`, collective, bytes, ranks, nodes, GPUs per node,
/// `time_us` rounded as [`round_time`], dtype when known).
pub fn comm_jsonl(samples: &[CommSample]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in samples {
        let mut line = json!({"kind": "comm", "collective": s.collective, "bytes": s.bytes, "ranks": s.ranks,
            "nodes": s.nodes, "gpus_per_node": s.gpus_per_node, "time_us": round_time(s.time_us)});
        if let Some(d) = &s.dtype {
            line["dtype"] = json!(d);
        }
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// `bytes` gzip'd at the best compression, with a header that does not depend on the time.
pub fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    let mut enc = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes)?;
    enc.finish()
}

/// The shipped models' JSON zstd-compressed at level 19.
pub fn compress_models(json: &[u8]) -> std::io::Result<Vec<u8>> {
    zstd::stream::encode_all(json, 19)
}

/// A tar archive of `files` (name, bytes) in the given order, with fixed modes and times.
pub fn tar(files: &[(String, Vec<u8>)]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        builder.append_data(&mut header, name, &bytes[..])?;
    }
    builder.into_inner()
}

/// Writes `manifest.json`, `samples.tar` and `models.json.zst` into `dir` (created when missing), setting the
/// manifest's version and sizes from the data files. Returns the manifest as written.
pub fn write_dir(
    dir: &Path,
    mut manifest: Manifest,
    samples_tar: &[u8],
    models_zst: &[u8],
) -> std::io::Result<Manifest> {
    std::fs::create_dir_all(dir)?;
    manifest.version = version_of(samples_tar, models_zst);
    manifest.samples_bytes = samples_tar.len() as u64;
    manifest.models_bytes = models_zst.len() as u64;
    std::fs::write(dir.join("samples.tar"), samples_tar)?;
    std::fs::write(dir.join("models.json.zst"), models_zst)?;
    let mut text = serde_json::to_string_pretty(&manifest).map_err(std::io::Error::other)?;
    text.push('\n');
    std::fs::write(dir.join("manifest.json"), text)?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_keep_five_significant_digits() {
        assert_eq!(round_time(166.02578428056505), 166.03);
        assert_eq!(round_time(0.0123456789), 0.012346);
        assert_eq!(round_time(60324.04242621528), 60324.0);
    }

    #[test]
    fn the_same_files_give_the_same_bytes() {
        let files = vec![("a.jsonl.gz".to_string(), gzip(b"{}\n").unwrap())];
        assert_eq!(tar(&files).unwrap(), tar(&files).unwrap());
        assert_eq!(gzip(b"x").unwrap(), gzip(b"x").unwrap());
    }
}

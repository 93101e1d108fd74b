//! `perfcast import FILE…`: profiler or benchmark outputs, as `POST /v1/profiles` stores them, or an MT4G GPU
//! report, as `POST /v1/gpus/import` imports it; prints the same response.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use indicatif::ProgressBar;

use super::progress::Mode;
use super::{open_store, print_json, print_problem};
use crate::api::gpus::GpuImportResponse;
use crate::api::profiles::UploadResponse;
use crate::config::Config;
use crate::ingest::{detect, Format};
use crate::service::profiles::UploadParams;
use crate::service::Service;

/// The files of `perfcast import` and what they do not say themselves.
#[derive(Args)]
pub(super) struct ImportArgs {
    /// Files to import (`.gz` files are decompressed unless the format reads gzip itself).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Format (`perfcast_jsonl`, `neusight_csv`, `ncu_csv`, `rocprof_csv`, `torch_trace`, `tau`, `osu`,
    /// `nccl_tests`, `nccl_tests_json`, `mt4g`); detected when absent.
    #[arg(long)]
    format: Option<String>,
    /// System the files were measured on.
    #[arg(long)]
    system: Option<String>,
    /// GPU the files were measured on, when they do not say.
    #[arg(long)]
    gpu: Option<String>,
    /// Precision, when the format does not record it.
    #[arg(long)]
    dtype: Option<String>,
    /// Ranks of the measured collectives, when the files do not say.
    #[arg(long)]
    ranks: Option<String>,
    /// Collective of an old nccl-tests log that does not name it.
    #[arg(long)]
    collective: Option<String>,
    /// Catalog GPU whose peaks a new MT4G device takes.
    #[arg(long)]
    base: Option<String>,
    /// Free labels, `key=value` (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
}

/// Reads the files, then imports them into the configured database with its models loaded. Exit codes: 2 for an
/// unreadable file, a malformed `--label` or refused content; 1 when the database cannot be opened.
pub(super) async fn run(args: ImportArgs, config: &Config, progress: Mode) -> ExitCode {
    let files = match read_files(&args.files, progress) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let labels = match parse_labels(&args.labels) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let store = match open_store(config).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let service = Service::new(store.clone());
    let size: usize = files.iter().map(|(_, b)| b.len()).sum();
    let spinner = if size >= BAR_MIN_BYTES { progress.spinner("parsing and storing") } else { None };
    let code = match service.load_models().await {
        Ok(_) if is_mt4g(args.format.as_deref(), &files) => import_gpu(&service, &files[0].1, &args).await,
        Ok(_) => upload(&service, &files, args, labels).await,
        Err(e) => print_problem(e),
    };
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    store.close().await;
    code
}

/// An MT4G report: named so, or detected as the only file when no format is given.
fn is_mt4g(format: Option<&str>, files: &[(String, Vec<u8>)]) -> bool {
    match format {
        Some(f) => f.eq_ignore_ascii_case("mt4g"),
        None => files.len() == 1 && detect(&files[0].1) == Some(Format::Mt4g),
    }
}

/// Imports an MT4G report and prints the [`GpuImportResponse`].
async fn import_gpu(service: &Service, report: &[u8], args: &ImportArgs) -> ExitCode {
    match service.import_gpu(report, args.format.as_deref(), args.base.as_deref()).await {
        Ok(out) => print_json(&GpuImportResponse::from(out)),
        Err(e) => print_problem(e),
    }
}

/// Uploads one file, or several files of one run, and prints the [`UploadResponse`].
async fn upload(
    service: &Service,
    files: &[(String, Vec<u8>)],
    args: ImportArgs,
    labels: BTreeMap<String, String>,
) -> ExitCode {
    let params = UploadParams {
        format: args.format,
        system: args.system,
        gpu: args.gpu,
        dtype: args.dtype,
        ranks: args.ranks,
        collective: args.collective,
        labels,
        ..Default::default()
    };
    let result = match files {
        [(_, bytes)] => service.upload_profile(bytes, &params).await,
        _ => service.upload_profile_files(files, &params).await,
    };
    match result {
        Ok(out) => print_json(&UploadResponse::from(out)),
        Err(e) => print_problem(e),
    }
}

/// Imports of at least this many bytes show a bar while they are read and a spinner while they are parsed and
/// stored (on a terminal).
const BAR_MIN_BYTES: usize = 1 << 20;

/// Each file's name (without its directory) and content, in the order given, with a bar of the bytes read when
/// they are large (`progress`). Errors: the message to print.
fn read_files(paths: &[PathBuf], progress: Mode) -> Result<Vec<(String, Vec<u8>)>, String> {
    let total: u64 = paths.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    let bar = if total >= BAR_MIN_BYTES as u64 { progress.bytes("reading", total) } else { None };
    let files = paths
        .iter()
        .map(|f| {
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            read_import_file(f, bar.as_ref()).map(|bytes| (name, bytes))
        })
        .collect();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    files
}

/// Reads a file to import (advancing `bar` by its bytes), decompressing `.gz` unless its content is a format read
/// inside gzip (traces, tars).
fn read_import_file(path: &Path, bar: Option<&ProgressBar>) -> Result<Vec<u8>, String> {
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let bytes = match bar {
        None => std::fs::read(path).map_err(cannot)?,
        Some(b) => {
            let mut out = Vec::new();
            b.wrap_read(std::fs::File::open(path).map_err(cannot)?).read_to_end(&mut out).map_err(cannot)?;
            out
        }
    };
    let gz = bytes.starts_with(&[0x1f, 0x8b]);
    if gz && detect(&bytes).is_none() {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .map_err(|e| format!("cannot decompress {}: {e}", path.display()))?;
        Ok(out)
    } else {
        Ok(bytes)
    }
}

/// `--label KEY=VALUE` flags as a map (a later key wins). Errors: the message for a flag without `=`.
fn parse_labels(labels: &[String]) -> Result<BTreeMap<String, String>, String> {
    labels
        .iter()
        .map(|l| match l.split_once('=') {
            Some((k, v)) => Ok((k.to_string(), v.to_string())),
            None => Err(format!("--label {l:?} is not KEY=VALUE")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_split_at_the_first_equals_sign_and_a_later_key_wins() {
        let labels = ["a=b", "c=d=e", "a=f"].map(String::from);
        let map = parse_labels(&labels).unwrap();
        assert_eq!(map.get("a").map(String::as_str), Some("f"));
        assert_eq!(map.get("c").map(String::as_str), Some("d=e"));
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn a_label_without_equals_sign_is_refused() {
        assert_eq!(parse_labels(&["ab".to_string()]).unwrap_err(), "--label \"ab\" is not KEY=VALUE");
    }

    #[test]
    fn mt4g_is_named_in_any_case_or_detected_in_a_single_file() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/mt4g/NVIDIA_H100_80GB_HBM3.json");
        let report = std::fs::read(fixture).unwrap();
        let other = vec![("x.csv".to_string(), b"a,b\n1,2\n".to_vec())];
        assert!(is_mt4g(Some("MT4G"), &other));
        assert!(!is_mt4g(Some("ncu_csv"), &other));
        assert!(!is_mt4g(None, &other));
        let one = vec![("r.json".to_string(), report)];
        assert!(is_mt4g(None, &one));
        let two = vec![one[0].clone(), one[0].clone()];
        assert!(!is_mt4g(None, &two), "several files are a profile upload unless --format mt4g says otherwise");
    }
}

//! Ingest: one parser per input format, each a pure function from bytes to typed samples (or, for MT4G, a GPU
//! description). No IO, no database: the service stores what a parser returns.
//!
//! Rules every parser follows (FORMATS.md): columns are mapped by header name, never by position; units are
//! explicit and converted (times to µs, bandwidths to GB/s = 10⁹ B/s); bad input gives a [`ParseError`] naming the
//! line (and column where there is one) — never a panic; memory stays proportional to the input (no unbounded
//! allocation driven by numbers inside a file). Rows that are well-formed but unusable (a missing time, an
//! unknown operator) are returned in [`Parsed::rejected`] with their line and reason, and the rest is kept.
//!
//! May import: the domain core's vocabulary (`hw`, `op`, `samples`, `comm`). Must not import `store`, `service`,
//! `jobs`, `api`, `app`, `cli` or `eval`.

pub mod aiconfigurator;
pub mod mt4g;
pub mod nccl_tests;
pub mod ncu;
pub mod neusight;
pub mod osu;
pub mod perfcast;
pub mod rocprof;
pub mod tau;
mod text;
pub mod torch_trace;
pub mod training_log;

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::hw::Precision;
use crate::op::Collective;
use crate::op::{OpClass, Phase};
use crate::samples::{Rejected, Sample};

/// Input formats perfcast reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// perfcast's own sample format, JSON lines (README "Sample format").
    PerfcastJsonl,
    /// perfcast's own sample format, CSV.
    PerfcastCsv,
    /// NeuSight operator CSVs (`OPName, Latency, Device, …, B, M, N, K` or `B, H`; latency in ms).
    NeusightCsv,
    /// Nsight Compute `--csv` export, `--page details` (long) or `--page raw` (wide) ([`ncu`]).
    NcuCsv,
    /// rocprof v1/v2/v3 and Omniperf dispatch CSVs, with a run's companions: `--stats` tables, memory-copy traces,
    /// agent info, Omniperf `sysinfo.csv` ([`rocprof`]).
    RocprofCsv,
    /// PyTorch profiler (Kineto) Chrome trace, `.json` or `.json.gz` ([`torch_trace`]).
    TorchTrace,
    /// TAU `profile.N.C.T` files, one or several in a tar archive ([`tau`]).
    Tau,
    /// OSU Micro-Benchmarks text output ([`osu`]).
    Osu,
    /// nccl-tests text output ([`nccl_tests`]).
    NcclTests,
    /// nccl-tests `-J` JSON output ([`nccl_tests`]).
    NcclTestsJson,
    /// MT4G GPU memory-topology JSON (or its legacy v1 CSV): a GPU description, not samples ([`mt4g`]).
    Mt4g,
    /// NVIDIA aiconfigurator's performance database: its Parquet tables (or CSV copies), one or several, or a tar
    /// archive of them ([`aiconfigurator`]).
    Aiconfigurator,
}

impl Format {
    /// Every format, in detection order (the specific signatures first; the perfcast formats are strict too).
    pub const ALL: [Format; 12] = [
        Format::Aiconfigurator,
        Format::PerfcastJsonl,
        Format::NeusightCsv,
        Format::PerfcastCsv,
        Format::TorchTrace,
        Format::NcclTestsJson,
        Format::Mt4g,
        Format::NcuCsv,
        Format::RocprofCsv,
        Format::NcclTests,
        Format::Osu,
        Format::Tau,
    ];

    /// The wire name (`perfcast_jsonl`).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::PerfcastJsonl => "perfcast_jsonl",
            Format::PerfcastCsv => "perfcast_csv",
            Format::NeusightCsv => "neusight_csv",
            Format::NcuCsv => "ncu_csv",
            Format::RocprofCsv => "rocprof_csv",
            Format::TorchTrace => "torch_trace",
            Format::Tau => "tau",
            Format::Osu => "osu",
            Format::NcclTests => "nccl_tests",
            Format::NcclTestsJson => "nccl_tests_json",
            Format::Mt4g => "mt4g",
            Format::Aiconfigurator => "aiconfigurator",
        }
    }

    /// Parses a wire name (also accepts `jsonl`, `csv`, `neusight`, `ncu`, `nsight_compute`, `rocprof`, `kineto`,
    /// `pytorch_trace`, `chrome_trace`, `nccl`, `nccl_json`, `aic`).
    pub fn parse(s: &str) -> Option<Format> {
        match s.trim().to_ascii_lowercase().as_str() {
            "perfcast_jsonl" | "jsonl" | "perfcast" => Some(Format::PerfcastJsonl),
            "perfcast_csv" | "csv" => Some(Format::PerfcastCsv),
            "neusight_csv" | "neusight" => Some(Format::NeusightCsv),
            "ncu_csv" | "ncu" | "nsight_compute" => Some(Format::NcuCsv),
            "rocprof_csv" | "rocprof" | "omniperf" => Some(Format::RocprofCsv),
            "torch_trace" | "pytorch_trace" | "kineto" | "chrome_trace" => Some(Format::TorchTrace),
            "tau" => Some(Format::Tau),
            "osu" => Some(Format::Osu),
            "nccl_tests" | "nccl" => Some(Format::NcclTests),
            "nccl_tests_json" | "nccl_json" => Some(Format::NcclTestsJson),
            "mt4g" => Some(Format::Mt4g),
            "aiconfigurator" | "aic" => Some(Format::Aiconfigurator),
            _ => None,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a parser returns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    pub samples: Vec<Sample>,
    pub rejected: Vec<Rejected>,
}

/// Why an input cannot be parsed at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{message}", location(*line, *column))]
pub struct ParseError {
    /// 1-based line, when the problem has one.
    pub line: Option<u64>,
    /// 1-based column, when known.
    pub column: Option<u64>,
    pub message: String,
}

fn location(line: Option<u64>, column: Option<u64>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!("line {l}, column {c}: "),
        (Some(l), None) => format!("line {l}: "),
        _ => String::new(),
    }
}

impl ParseError {
    /// An error at `line`.
    pub fn at(line: u64, message: impl Into<String>) -> ParseError {
        ParseError { line: Some(line), column: None, message: message.into() }
    }

    /// An error without a position.
    pub fn whole(message: impl Into<String>) -> ParseError {
        ParseError { line: None, column: None, message: message.into() }
    }
}

/// What the upload adds to a file that does not say everything itself. Build it with
/// `Context { gpu: …, ..Default::default() }`: fields may be added.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Context {
    /// Device to assume when the file names none (the upload's `gpu`, or its `system`'s GPU).
    pub gpu: Option<String>,
    /// Precision to assume when the format does not record one (NeuSight: fp32).
    pub dtype: Option<Precision>,
    /// Ranks taking part in the measured collectives when the file does not record it (OSU collectives, TAU, a
    /// PyTorch trace without a group size). A file's own count wins.
    pub ranks: Option<u32>,
    /// Nodes the ranks span, when the file does not say.
    pub nodes: Option<u32>,
    /// Ranks (GPUs) per node, when the file does not say.
    pub gpus_per_node: Option<u32>,
    /// The collective an old nccl-tests log measured (logs before the `# Collective test starting` line do not
    /// name it, and all_gather and alltoall tables look alike).
    pub collective: Option<Collective>,
}

/// Parses `bytes` as `format`.
///
/// Errors: the whole input is unusable (wrong format, no header, not UTF-8 where text is required), with the
/// line where that shows.
pub fn parse(format: Format, bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    match format {
        Format::PerfcastJsonl => perfcast::parse_jsonl(bytes, ctx),
        Format::PerfcastCsv => perfcast::parse_csv(bytes, ctx),
        Format::NeusightCsv => neusight::parse(bytes, ctx),
        Format::NcuCsv => ncu::parse(bytes, ctx),
        Format::RocprofCsv => rocprof::parse(bytes, ctx),
        Format::TorchTrace => torch_trace::parse(bytes, ctx),
        Format::Tau => tau::parse(bytes, ctx),
        Format::Osu => osu::parse(bytes, ctx),
        Format::NcclTests => nccl_tests::parse_text(bytes, ctx),
        Format::NcclTestsJson => nccl_tests::parse_json(bytes, ctx),
        Format::Aiconfigurator => aiconfigurator::parse(bytes, ctx),
        Format::Mt4g => Err(ParseError::whole(
            "MT4G output describes a GPU, not measured samples: import it as a GPU (ingest::mt4g::parse)",
        )),
    }
}

/// Parses several files of one upload (multipart) as `format`: TAU profiles and rocprof outputs are read
/// together (ranks from the profile count; counters, device names and clocks joined to dispatches, companion
/// files accepted); aiconfigurator tables file by file, skipping their YAML side files; other formats are parsed
/// file by file
/// and merged (rejection lines then refer to their own file, named in the reason).
///
/// Errors: the first file that cannot be parsed, named.
pub fn parse_files(format: Format, files: &[(&str, &[u8])], ctx: &Context) -> Result<Parsed, ParseError> {
    match format {
        Format::Tau => tau::parse_files(files, ctx),
        Format::RocprofCsv => rocprof::parse_files(files, ctx),
        Format::Aiconfigurator => aiconfigurator::parse_files(files, ctx),
        _ => {
            let mut out = Parsed::default();
            for (name, bytes) in files {
                let p = parse(format, bytes, ctx).map_err(|mut e| {
                    e.message = format!("{name}: {}", e.message);
                    e
                })?;
                out.samples.extend(p.samples);
                out.rejected.extend(
                    p.rejected.into_iter().map(|r| Rejected { line: r.line, reason: format!("{name}: {}", r.reason) }),
                );
            }
            Ok(out)
        }
    }
}

/// The format of a multi-file upload: TAU or rocprof when any file is one (their companions need not be
/// recognizable on their own), else the first file's detected format.
pub fn detect_files(files: &[(&str, &[u8])]) -> Option<Format> {
    let formats: Vec<Option<Format>> = files.iter().map(|(_, b)| detect(b)).collect();
    for f in [Format::Tau, Format::RocprofCsv] {
        if formats.contains(&Some(f)) {
            return Some(f);
        }
    }
    formats.into_iter().flatten().next()
}

/// Guesses the format from the first bytes; `None` when nothing matches. A gzip stream is looked into (its first
/// 64 KiB): a gzip'd Chrome trace is [`Format::TorchTrace`], a gzip'd tar archive [`Format::Tau`] — unless it holds
/// aiconfigurator tables, which (Parquet, CSV or archives of them) are recognized first.
pub fn detect(bytes: &[u8]) -> Option<Format> {
    const HEAD: usize = 64 * 1024;
    if aiconfigurator::looks_like(bytes) {
        return Some(Format::Aiconfigurator);
    }
    if text::is_gzip(bytes) {
        let inner = text::gunzip_head(bytes, HEAD);
        return if text::is_tar(&inner) || tau::looks_like(&inner) {
            Some(Format::Tau)
        } else if torch_trace::looks_like(&inner) {
            Some(Format::TorchTrace)
        } else {
            None
        };
    }
    let head = &bytes[..bytes.len().min(HEAD)];
    if text::is_tar(head) {
        return Some(Format::Tau);
    }
    Format::ALL.into_iter().find(|f| match f {
        Format::PerfcastJsonl => perfcast::looks_like_jsonl(head),
        Format::PerfcastCsv => perfcast::looks_like_csv(head),
        Format::NeusightCsv => neusight::looks_like(head),
        Format::NcuCsv => ncu::looks_like(head),
        Format::RocprofCsv => rocprof::looks_like(head),
        Format::TorchTrace => torch_trace::looks_like(head),
        Format::Tau => tau::looks_like(head),
        Format::Osu => osu::looks_like(head),
        Format::NcclTests => nccl_tests::looks_like_text(head),
        Format::NcclTestsJson => nccl_tests::looks_like_json(head),
        Format::Mt4g => mt4g::looks_like(head),
        Format::Aiconfigurator => aiconfigurator::looks_like(head),
    })
}

/// Text of `bytes` as UTF-8 (a leading BOM is skipped). Errors name the line of the first invalid byte.
pub fn utf8(bytes: &[u8]) -> Result<&str, ParseError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        let valid = &bytes[..e.valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        let column = valid.iter().rev().take_while(|&&b| b != b'\n').count() as u64 + 1;
        ParseError { line: Some(line), column: Some(column), message: "not valid UTF-8 text".into() }
    })
}

/// Parses an operator name: perfcast's classes, S1's Table I names and common aliases
/// (`gemm`/`matmul`/`mm`/`addmm` → linear, `baddbmm` → bmm, `layer_norm` → layernorm, aiconfigurator's
/// `context_attention`/`generation_attention` → attention_prefill/attention_decode, …). Case-insensitive.
pub fn op_class(name: &str) -> Option<OpClass> {
    let n: String = name.trim().to_ascii_lowercase().chars().filter(|c| !matches!(c, ' ' | '-')).collect();
    Some(match n.as_str() {
        "linear" | "gemm" | "matmul" | "mm" | "addmm" | "linear1" | "linear2" | "linear3" | "linear4"
        | "final_linear" | "finallinear" | "lmhead" | "lm_head" | "qkv" => OpClass::Linear,
        "bmm" | "baddbmm" | "batched_gemm" | "qk^t" | "qkt" | "v" | "attnv" | "attn_v" => OpClass::Bmm,
        "layernorm" | "layer_norm" | "ln" => OpClass::LayerNorm,
        "rmsnorm" | "rms_norm" => OpClass::RmsNorm,
        "softmax" => OpClass::Softmax,
        "fused_softmax" | "fusedsoftmax" | "scaled_masked_softmax" | "scaled_upper_triang_masked_softmax" => {
            OpClass::FusedSoftmax
        }
        "fillmask" | "fill_mask" | "masked_fill" => OpClass::FillMask,
        "gelu" => OpClass::Gelu,
        "swiglu" | "silu_mul" => OpClass::Swiglu,
        "rope" | "rotary" | "rotary_embedding" => OpClass::Rope,
        "flash_attention" | "flashattention" | "flash_attn" | "sdpa" | "scaled_dot_product_attention" => {
            OpClass::FlashAttention
        }
        "embedding" => OpClass::Embedding,
        "cross_entropy" | "crossentropy" | "parallel_cross_entropy" => OpClass::CrossEntropy,
        "optimizer" | "adam" | "adamw" | "fused_adam" => OpClass::Optimizer,
        "elementwise" | "elem" | "add" | "mul" | "dropout" | "relu" | "silu" | "tanh" | "sigmoid" => {
            OpClass::Elementwise
        }
        "attention_prefill" | "context_attention" | "prefill_attention" => OpClass::AttentionPrefill,
        "attention_decode" | "generation_attention" | "decode_attention" => OpClass::AttentionDecode,
        "moe" | "fused_moe" | "fusedmoe" => OpClass::Moe,
        "quantize" | "scale_matrix" | "static_quantize" => OpClass::Quantize,
        "quantize_scale" | "compute_scale" | "computescale" => OpClass::QuantizeScale,
        _ => return None,
    })
}

/// Parses a phase (`fwd`/`forward`, `bwd`/`backward`).
pub fn phase(name: &str) -> Option<Phase> {
    match name.trim().to_ascii_lowercase().as_str() {
        "fwd" | "forward" | "f" => Some(Phase::Fwd),
        "bwd" | "backward" | "b" => Some(Phase::Bwd),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_errors_point_at_the_byte() {
        let e = utf8(b"ok\nab\xffc").unwrap_err();
        assert_eq!((e.line, e.column), (Some(2), Some(3)));
        assert_eq!(utf8(b"\xEF\xBB\xBFhello").unwrap(), "hello");
    }

    /// Every shared fixture is detected as its format (MT4G's raw per-benchmark measurements are not reports).
    #[test]
    fn detect_recognizes_every_fixture() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures");
        let expected = [
            ("ncu", Some(Format::NcuCsv)),
            ("rocprof", Some(Format::RocprofCsv)),
            ("pytorch_trace", Some(Format::TorchTrace)),
            ("tau", Some(Format::Tau)),
            ("nccl-tests", Some(Format::NcclTests)),
            ("mt4g", Some(Format::Mt4g)),
        ];
        let mut seen = 0;
        for (dir, format) in expected {
            for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if name == "SOURCE.txt" {
                    continue;
                }
                let want = if name.ends_with(".raw.txt") { None } else { format };
                assert_eq!(detect(&std::fs::read(&path).unwrap()), want, "{dir}/{name}");
                seen += 1;
            }
        }
        assert_eq!(seen, 36, "a fixture was added or removed: check its expected format");
    }

    /// Every profiler fixture (MT4G describes a GPU) yields samples when uploaded as its run's files are: alone, or
    /// with the companions it needs (a TAU rank among its peers, Omniperf passes with their timestamps and
    /// sysinfo, the MI300X counters with the device named, an old nccl-tests log with its collective). `detect_files`
    /// picks the format of each upload.
    #[test]
    fn every_profiler_fixture_yields_samples_in_its_upload() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures");
        let read = |f: &str| std::fs::read(format!("{root}/{f}")).unwrap();
        let mi300x = Context { gpu: Some("MI300X".into()), ..Default::default() };
        let none = Context::default();
        // An old nccl-tests log does not name its collective: the upload says it.
        let all_gather = Context { collective: Some(Collective::AllGather), ..Default::default() };
        let uploads: Vec<(Vec<&str>, &Context, Format)> = vec![
            (vec!["nccl-tests/superbench_nccl_allgather.log"], &all_gather, Format::NcclTests),
            (
                vec![
                    "tau/hatchet_tau-cpi-mpi_profile.0.0.0",
                    "tau/hatchet_tau-cpi-mpi_profile.1.0.0",
                    "tau/hatchet_tau-cpi-mpi_profile.2.0.0",
                    "tau/hatchet_tau-cpi-mpi_profile.3.0.0",
                ],
                &none,
                Format::Tau,
            ),
            (vec!["tau/tau2_examples_wrap_mpi_profile.0.0.0"], &none, Format::Tau),
            (vec!["tau/tau2_opencl_FFT_profile.0.0.0"], &none, Format::Tau),
            (vec!["tau/tau2_taudb_test_openmp_profile.0.0.1"], &none, Format::Tau),
            (
                vec![
                    "rocprof/omniperf_MI200_gfx90a_rocprofv1_SQ_IFETCH_LEVEL.csv",
                    "rocprof/omniperf_MI200_gfx90a_rocprofv1_timestamps.csv",
                    "rocprof/omniperf_MI200_gfx90a_rocprofv1_pmc_perf.csv",
                    "rocprof/omniperf_MI200_sysinfo.csv",
                    "rocprof/omniperf_MI200_perfmon_SQ_IFETCH_LEVEL.input.txt",
                ],
                &none,
                Format::RocprofCsv,
            ),
            (
                vec![
                    "rocprof/omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv",
                    "rocprof/omniperf_MI300X_rocprofv2_timestamps.csv",
                ],
                &mi300x,
                Format::RocprofCsv,
            ),
            (
                vec![
                    "rocprof/rocprofv3_kernel_trace.csv",
                    "rocprof/rocprofv3_counter_collection.csv",
                    "rocprof/rocprofv3_hip_api_stats.csv",
                    "rocprof/rocprofv3_memory_copy_trace.csv",
                ],
                &none,
                Format::RocprofCsv,
            ),
        ];
        let mut covered = std::collections::BTreeSet::new();
        for (names, ctx, format) in &uploads {
            let bytes: Vec<Vec<u8>> = names.iter().map(|n| read(n)).collect();
            let files: Vec<(&str, &[u8])> = names.iter().zip(&bytes).map(|(n, b)| (*n, b.as_slice())).collect();
            assert_eq!(detect_files(&files), Some(*format), "{names:?}");
            let p = parse_files(*format, &files, ctx).unwrap_or_else(|e| panic!("{names:?}: {e}"));
            assert!(!p.samples.is_empty(), "{names:?}: {:?}", p.rejected);
            covered.extend(names.iter().map(|n| n.to_string()));
        }
        // The other profiler and benchmark fixtures stand alone.
        for dir in ["ncu", "pytorch_trace", "nccl-tests", "tau", "rocprof"] {
            for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
                let name = format!("{dir}/{}", entry.unwrap().file_name().to_string_lossy());
                if name.ends_with("SOURCE.txt") || covered.contains(&name) {
                    continue;
                }
                let bytes = read(&name);
                let format = detect_files(&[(&name, &bytes)]).unwrap_or_else(|| panic!("{name}: not detected"));
                let p = parse_files(format, &[(&name, &bytes)], &none).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(!p.samples.is_empty(), "{name}: {:?}", p.rejected);
                covered.insert(name);
            }
        }
        assert_eq!(covered.len(), 30, "a fixture was added or removed: {covered:?}");
    }

    #[test]
    fn wire_names_round_trip_and_mt4g_is_not_a_sample_format() {
        for f in Format::ALL {
            assert_eq!(Format::parse(f.as_str()), Some(f));
            assert_eq!(serde_json::to_value(f).unwrap(), serde_json::json!(f.as_str()));
        }
        assert_eq!(Format::parse("kineto"), Some(Format::TorchTrace));
        let e = parse(Format::Mt4g, b"{}", &Context::default()).unwrap_err();
        assert!(e.message.contains("GPU"), "{e}");
    }

    #[test]
    fn operator_names_map_to_classes() {
        assert_eq!(op_class("Linear3"), Some(OpClass::Linear));
        assert_eq!(op_class("QK^T"), Some(OpClass::Bmm));
        assert_eq!(op_class("Fused Softmax"), Some(OpClass::FusedSoftmax));
        assert_eq!(op_class("ln"), Some(OpClass::LayerNorm));
        assert_eq!(op_class("conv2d"), None);
        // Every class by its wire name (the API and the sample format accept them all).
        for class in OpClass::ALL {
            assert_eq!(op_class(class.as_str()), Some(class), "{class}");
        }
        assert_eq!(op_class("generation_attention"), Some(OpClass::AttentionDecode));
    }
}

//! NVIDIA aiconfigurator's performance database (FORMATS.md; columns and units in
//! `data/aiconfigurator/SOURCE.txt`): one table per operator kind — `gemm_perf`, `context_attention_perf`,
//! `generation_attention_perf`, `moe_perf`, `nccl_perf`, `custom_allreduce_perf`, and TensorRT-LLM's and
//! SGLang's `scale_matrix_perf` and `computescale_perf` — of any engine's folder (vLLM, SGLang, TensorRT-LLM: the
//! engine is the `backend` column of the CSV copies, else the collector's `framework` label, and every sample keeps
//! it as its `backend` attribute, with `kernel_source` and `attn_dtype`; see [`crate::op::KernelFamily`]) as
//! aiconfigurator's collector writes them (Apache Parquet) or as CSV (`.csv`, `.csv.gz`; the copies in `data/aiconfigurator/` prepend `gpu`,
//! `backend`, `backend_version` and rename custom all-reduce's own `backend` to `ar_backend`). An upload is one
//! table, a tar archive of tables (`.tar`, `.tar.gz`; `collection_meta.yaml` and other non-table entries are
//! skipped), or several tables as multipart parts. The kind of table is told by its columns.
//!
//! Mapping (latency ms → `time_us` µs; `device` is the sample's GPU, resolved through the catalog's aliases by the
//! service; `framework`, `version`, `kernel_source`, `backend`, `backend_version`, `attn_dtype`,
//! `kv_cache_dtype`, `window_size`, `distribution`, `moe_tp_size`, `moe_ep_size` become attributes, with
//! `source = aiconfigurator` and the CSV's `gpu` folder as `aic_system`):
//! - `gemm_perf` → `linear` fwd, B = 1, M = m (tokens), N = n, K = k, dtype from `gemm_dtype` (bfloat16 → bf16,
//!   fp8, fp8_block, nvfp4).
//! - `context_attention_perf` → `attention_prefill` (B = batch_size, L = isl, A = num_heads, G =
//!   num_key_value_heads, D = head_dim); sliding-window rows (window_size > 0) are rejected: the class is full
//!   causal attention.
//! - `generation_attention_perf` → `attention_decode` with C = the tokens attended: step + 1, or step for the vLLM
//!   collector before 0.24 (the a100 file, 0.14.0); min(C, window_size) for sliding windows; `step` kept as an
//!   attribute.
//!   Both attention tables take the KV cache's precision (`kv_cache_dtype`) as the sample's dtype.
//! - `moe_perf` → `moe` (T = ⌈num_tokens / moe_ep_size⌉ — num_tokens is the count entering the whole layer, of
//!   which one GPU's experts get 1/ep of the routed copies, see [`rows::moe_tokens_on_this_gpu`] —, H =
//!   hidden_size, F = inter_size / moe_tp_size, E = num_experts / moe_ep_size, K = topk); dtype from
//!   `moe_dtype`; the global num_tokens is kept as the attribute `num_tokens`. MXFP4 and INT4 rows (no perfcast precision) are rejected.
//!   TensorRT-LLM's non-gated experts (`kernel_source` `*_nongated`) are rejected: the class is SwiGLU experts.
//! - `scale_matrix_perf` → `quantize`, `computescale_perf` → `quantize_scale` (B = m, H = k; dtype from
//!   `quant_dtype`); rows whose scale computation was floored at 0 upstream are rejected (no positive latency).
//! - `nccl_perf`, `custom_allreduce_perf` → communication samples: bytes = message_size (elements) × the dtype's
//!   element size, ranks = gpus_per_node = num_gpus, nodes = 1; attribute `implementation` = `nccl`,
//!   `vllm_custom_allreduce`, `sglang_custom_allreduce` or `trtllm_allreduce` by the table's engine (with
//!   `ar_backend` = vllm_graph / vllm_eager / sglang_graph / sglang_eager and `kernel_source`).
//!
//! Rows are numbered from 1: the CSV line (the header is line 1), or the row within the Parquet file (errors also
//! name the row group). A cell that is not of its column's type fails the upload; a well-formed row perfcast
//! cannot use is rejected with its row number, repeated reasons tallied. A Parquet file's footer and page headers
//! are checked against caps derived from its length before anything is decoded ([`guard`]); gzip input inflates
//! to at most [`MAX_INFLATED_BYTES`], read as a stream.

#[cfg(test)]
mod engine_tests;
mod guard;
mod parquet;
mod rows;
mod table;
#[cfg(test)]
mod tests;

use std::io::Read;

use super::text::{for_each_tar_file, gunzip, gunzip_head, is_gzip, is_tar, named, Tally};
use super::{Context, ParseError, Parsed};
use table::{Cell, Columns, Row};

pub use table::TableKind;

/// Most bytes a gzip'd table or archive may inflate to (1 GiB): the largest CSV copy is about 20 MiB.
pub const MAX_INFLATED_BYTES: u64 = 1 << 30;

/// True for an aiconfigurator table or an archive of them: a Parquet file, a CSV whose header names an
/// aiconfigurator table's columns, a tar archive whose first entry is a table (`*.parquet`, `*.csv`, `*.csv.gz`),
/// or any of those gzip'd.
pub fn looks_like(bytes: &[u8]) -> bool {
    if parquet::is_parquet(bytes) {
        return true;
    }
    let head: std::borrow::Cow<[u8]> =
        if is_gzip(bytes) { gunzip_head(bytes, 64 * 1024).into() } else { bytes[..bytes.len().min(64 * 1024)].into() };
    if is_tar(&head) {
        return first_entry_is_table(&head);
    }
    csv_header(&head).is_some_and(|h| TableKind::detect(&h).is_some())
}

fn is_table_name(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    base.ends_with(".parquet") || base.ends_with(".csv") || base.ends_with(".csv.gz")
}

/// The tar header's name field (bytes 0–100) of the first entry.
fn first_entry_is_table(head: &[u8]) -> bool {
    let name = head.get(..100).unwrap_or_default();
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    std::str::from_utf8(&name[..end]).is_ok_and(is_table_name)
}

fn csv_header(head: &[u8]) -> Option<Vec<String>> {
    let line = head.split(|&b| b == b'\n').next()?;
    let text = std::str::from_utf8(line).ok()?;
    Some(text.trim_end_matches('\r').split(',').map(|s| s.trim().trim_matches('"').to_string()).collect())
}

/// Parses one upload: a table (Parquet, CSV, gzip'd CSV) or a tar archive of tables (see the module doc).
///
/// Errors: not an aiconfigurator table, a table missing a column its kind needs, a damaged Parquet file or gzip
/// stream, or a cell that is not of its column's type (naming the row and column).
pub fn parse(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    let mut out = Parsed::default();
    read_upload("", bytes, ctx, &mut out)?;
    if out.samples.is_empty() && out.rejected.is_empty() {
        return Err(ParseError::whole("no aiconfigurator table rows in the upload"));
    }
    Ok(out)
}

/// Parses several files of one upload (multipart): each a table or an archive; files that are no table by name
/// (`collection_meta.yaml`, `reuse.yaml`, `SOURCE.txt`) are skipped. Rejections name their file.
pub fn parse_files(files: &[(&str, &[u8])], ctx: &Context) -> Result<Parsed, ParseError> {
    let mut out = Parsed::default();
    for (name, bytes) in files {
        if is_side_file(name) {
            continue;
        }
        read_upload(name, bytes, ctx, &mut out)?;
    }
    if out.samples.is_empty() && out.rejected.is_empty() {
        return Err(ParseError::whole("no aiconfigurator table in the upload"));
    }
    Ok(out)
}

fn is_side_file(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".yaml", ".yml", ".txt", ".md", ".json"].iter().any(|ext| lower.ends_with(ext))
}

fn read_upload(name: &str, bytes: &[u8], ctx: &Context, out: &mut Parsed) -> Result<(), ParseError> {
    if is_gzip(bytes) && is_tar(&gunzip_head(bytes, 1024)) {
        let inflated = gunzip(bytes, MAX_INFLATED_BYTES).map_err(|e| named(e, name))?;
        return read_tar(&inflated, ctx, out);
    }
    if is_tar(bytes) {
        return read_tar(bytes, ctx, out);
    }
    read_table(bytes, ctx, out).map_err(|e| named(e, name))
}

fn read_tar(bytes: &[u8], ctx: &Context, out: &mut Parsed) -> Result<(), ParseError> {
    for_each_tar_file(bytes, is_table_name, |path, content| read_table(content, ctx, out).map_err(|e| named(e, path)))
}

/// Reads one table, adding its samples and rejections (prefixed with `label`) to `out`.
fn read_table(bytes: &[u8], ctx: &Context, out: &mut Parsed) -> Result<(), ParseError> {
    let mut tally = Tally::default();
    let mut each = |row: &Row<'_>| -> Result<(), ParseError> {
        match rows::map(row.columns.kind, row, ctx)? {
            Ok(sample) => out.samples.push(sample),
            Err(reason) => tally.add(row.line, reason),
        }
        Ok(())
    };
    // The leading magic decides: a truncated Parquet file (no trailing magic) is a damaged Parquet file, not CSV.
    if bytes.starts_with(b"PAR1") {
        parquet::for_each_row(bytes, &mut each)?;
    } else if is_gzip(bytes) {
        let capped = Capped { inner: flate2::read::MultiGzDecoder::new(bytes), left: MAX_INFLATED_BYTES };
        read_csv(capped, &mut each)?;
    } else {
        read_csv(bytes, &mut each)?;
    }
    out.rejected.extend(tally.into_rejected());
    Ok(())
}

/// A reader that fails once more than `left` bytes were read (a gzip stream must not inflate without bound).
struct Capped<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            std::io::Error::other(format!("the gzip stream inflates to more than {MAX_INFLATED_BYTES} bytes"))
        })?;
        Ok(n)
    }
}

/// Reads a CSV table row by row (streaming), calling `each`.
fn read_csv(input: impl Read, each: &mut dyn FnMut(&Row<'_>) -> Result<(), ParseError>) -> Result<(), ParseError> {
    let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(input);
    let csv_error = |e: &csv::Error| {
        let line = e.position().map(|p| p.line());
        ParseError { line, column: None, message: format!("not a readable CSV table: {e}") }
    };
    let headers = reader.headers().map_err(|e| csv_error(&e))?.clone();
    let columns = Columns::new(headers.iter().map(|h| h.trim().to_string()).collect())?;
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => return Ok(()),
            Ok(true) => {}
            Err(e) => return Err(csv_error(&e)),
        }
        let line = record.position().map_or(0, |p| p.line());
        let cells = record.iter().map(|c| Cell::Text(c.to_string())).collect();
        each(&Row { columns: &columns, cells, line, place: String::new() })?;
    }
}

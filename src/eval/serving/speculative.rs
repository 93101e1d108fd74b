//! InferenceX's speculative-decoding (MTP) runs among `aiconfigurator/serving_runs_blackwell.csv`'s rows: which
//! they are ([`speculative`]), from the rows' provenance (`silicon_data_source`), since no column says so, and the
//! speculative decoding their scripts start the engine with ([`inferencex_mtp`], simulated by
//! [`crate::llm::serving::speculative`]); `eval serving` reports them apart from its headline.

use std::collections::HashSet;

use super::rows::{concurrency_of, measured_digits};

/// The TensorRT-LLM image only InferenceX's MTP configs ran on: SemiAnalysisAI/InferenceX
/// `.github/configs/nvidia-master.yaml` @0004cf5 gives `dsr1-fp4-b200-trt-mtp` and `dsr1-fp8-b200-trt-mtp` (every
/// search-space entry `spec-decoding: mtp`) the image `nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3`, and
/// their non-MTP siblings `dsr1-fp{4,8}-b200-trt` `…:1.2.0rc6.post2`. The exports write the registry as `nvcr.io#`
/// or `nvcr.io/`, so the tag is matched.
pub const MTP_TRTLLM_IMAGE_TAG: &str = "release:1.2.0rc6.post3";

/// The measured date (`measured=`, UTC) of InferenceX's TensorRT-LLM B200 DeepSeek-R1 aggregated MTP runs of
/// January: InferenceMAX/InferenceMAX `.github/configs/nvidia-master.yaml` @525079a (the late-2025 matrix) runs
/// `dsr1-fp{4,8}-b200-trt-mtp` on `release:1.1.0rc2.post2`, the image of the non-MTP configs of the time, so the
/// image does not tell them apart; every row measured that day sits on a cell of that MTP search space (e.g. fp4
/// 1k/1k tp4 ep4 at 16–64 clients), and their TPOT is a median 0.61× that of the same cell in the db-dump's
/// non-MTP config (cfg177) on the same image.
pub const MTP_TRTLLM_JAN_DATE: &str = "2026-01-14";

/// The measured date (`measured=`, UTC) of InferenceX's SGLang B200 DeepSeek-R1 fp8 MTP sweep
/// (`dsr1-fp8-b200-sglang-mtp` in `nvidia-master.yaml` @0004cf5: tp 8, ep 1, 4–512 clients, `spec-decoding: mtp`;
/// image `lmsysorg/sglang:v0.5.9-cu130`). That run's non-MTP series is a copy of the db-dump's cfg87 and is not
/// flagged; the other series has lower TPOT at few clients (1k/8k, 4 clients: 5.76 ms against 8.64 ms), higher
/// TTFT, and extends to 128–512 clients, which only the `-mtp` config runs.
pub const MTP_SGLANG_DATE: &str = "2026-03-25";

/// One `key=value` field of a `silicon_data_source` string (`…; measured=2026-02-05T…; image=…`), `""` if absent.
fn source_field<'a>(source: &'a str, key: &str) -> &'a str {
    source.split("; ").find_map(|f| f.strip_prefix(key).and_then(|v| v.strip_prefix('='))).unwrap_or("")
}

/// Whether a row is one of InferenceX's speculative-decoding (MTP) runs, which perfcast does not model (it
/// decodes one token per step; InferenceX's `benchmarks/dsr1_fp4_b200_trt_mtp.sh` starts TensorRT-LLM with
/// `speculative_config: {decoding_type: MTP, num_nextn_predict_layers: 3}`, up to 4 tokens a step). No column of
/// the file says so; the provenance does (research of 2026-11-29, the book's serving-simulated page). Only rows of
/// the dated gap-analysis exports (`silicon_data_source` `source_file=2026-…`) can be: the db-dump keeps one
/// config per parallelism, the non-MTP one. Flagged (163 rows of the file, 102 of them evaluated):
/// - TensorRT-LLM rows on image [`MTP_TRTLLM_IMAGE_TAG`] (88 rows, all DeepSeek-R1 on B200, aggregated);
/// - TensorRT-LLM DeepSeek-R1 aggregated rows on B200 measured [`MTP_TRTLLM_JAN_DATE`] (32);
/// - SGLang DeepSeek-R1 fp8 aggregated rows on B200 at tp 8, ep 1 (no attention DP) measured
///   [`MTP_SGLANG_DATE`] that are not a copy of a db-dump measurement (`db_dump_copy`; 43).
///
/// Evidence: against the non-MTP sibling at the same cell their TPOT is 0.43× (4 clients) to 0.8× (256) — e.g.
/// TensorRT-LLM fp8 tp8 ep1, 1k/8k, 4 clients: 4.37 ms (post3) against 10.13 ms (post2, cfg75) — the gain
/// shrinking as the batch grows, as MTP's does; a version bump cannot explain it (the January rows are 0.61× on
/// the same image). `col` gives a column of the row by its header name (`""` if empty).
pub fn speculative(col: &dyn Fn(&str) -> String, db_dump_copy: bool) -> bool {
    let source = col("silicon_data_source");
    if !source.starts_with("source_file=2026-") {
        return false;
    }
    let measured = source_field(&source, "measured").get(..10).unwrap_or("");
    let image = source_field(&source, "image");
    let (backend, system, model, mode) = (col("backend"), col("system"), col("model_path"), col("mode"));
    let r1_b200_agg = system == "b200_sxm" && model == "deepseek-ai/DeepSeek-R1" && mode == "agg";
    match backend.as_str() {
        "trtllm" => image.ends_with(MTP_TRTLLM_IMAGE_TAG) || (r1_b200_agg && measured == MTP_TRTLLM_JAN_DATE),
        "sglang" => {
            r1_b200_agg
                && col("precision") == "fp8"
                && col("tp_size") == "8"
                && col("moe_ep_size") == "1"
                && matches!(col("attention_dp_size").as_str(), "" | "1")
                && measured == MTP_SGLANG_DATE
                && !db_dump_copy
        }
        _ => false,
    }
}

/// A row's measurement as [`super::rows::one_per_measurement`] keys it (engine, mode, GPU, lengths, concurrency, TTFT and TPOT
/// to 10 significant digits), from its columns; `None` without a concurrency or a parseable TTFT and TPOT.
pub(super) fn measurement_key(col: &dyn Fn(&str) -> String) -> Option<String> {
    let conc = concurrency_of(&col("silicon_data_source"))?;
    let (t, p) = (col("silicon_ttft_ms").parse::<f64>().ok()?, col("silicon_tpot_ms").parse::<f64>().ok()?);
    Some(format!(
        "{}|{}|{}|{}|{}|{conc}|{}|{}",
        col("backend"),
        col("mode"),
        col("system"),
        col("isl"),
        col("osl"),
        measured_digits(t),
        measured_digits(p)
    ))
}

/// Whether the row `rec` (under `header`) is [`speculative`]; `db_dump`: the file's [`db_dump_measurements`].
pub(super) fn row_is_speculative(
    header: &csv::StringRecord,
    rec: &csv::StringRecord,
    db_dump: &HashSet<String>,
) -> bool {
    let col = columns(header, rec);
    speculative(&col, measurement_key(&col).is_some_and(|k| db_dump.contains(&k)))
}

/// The ids of the rows of `records` (under `header`) that are [`speculative`], in file order.
#[cfg(test)]
pub(super) fn speculative_ids(header: &csv::StringRecord, records: &[csv::StringRecord]) -> Vec<String> {
    let db = db_dump_measurements(header, records);
    records.iter().filter(|r| row_is_speculative(header, r, &db)).map(|r| columns(header, r)("id")).collect()
}

/// A row's columns by header name (trimmed, `""` if absent).
pub(super) fn columns<'a>(header: &'a csv::StringRecord, rec: &'a csv::StringRecord) -> impl Fn(&str) -> String + 'a {
    move |name: &str| header.iter().position(|h| h == name).and_then(|i| rec.get(i)).unwrap_or("").trim().to_string()
}

/// The measurement keys ([`measurement_key`]) of the db-dump rows (`silicon_data_source` `db-dump/…`).
pub(super) fn db_dump_measurements(header: &csv::StringRecord, records: &[csv::StringRecord]) -> HashSet<String> {
    records
        .iter()
        .map(|r| columns(header, r))
        .filter(|col| col("silicon_data_source").starts_with("db-dump"))
        .filter_map(|col| measurement_key(&col))
        .collect()
}

#[cfg(test)]
#[path = "speculative_tests.rs"]
mod tests;

/// The speculative decoding InferenceX's MTP scripts start `engine` with (`attention_dp`: the run uses attention
/// data parallelism), at perfcast's default acceptance (no `acceptance_rate`: the tokens per step TensorRT-LLM
/// measured for DeepSeek-R1's reused MTP layer, [`crate::llm::serving::speculative::REUSED_MTP_TOKENS_PER_STEP`];
/// a cited table, not fitted to these rows):
/// - TensorRT-LLM: `benchmarks/dsr1_fp4_b200_trt_mtp.sh` (and its fp8 sibling) write
///   `speculative_config: {decoding_type: MTP, num_nextn_predict_layers: 3}`, or 1 when `DP_ATTENTION` is true;
/// - SGLang: `benchmarks/dsr1_fp8_b200_mtp.sh` (SemiAnalysisAI/InferenceX @574bcd3) starts
///   `--speculative-algorithm EAGLE --speculative-num-steps 2 --speculative-eagle-topk 1
///   --speculative-num-draft-tokens 3`: 2 draft tokens per step.
///
/// `None` for vLLM (InferenceX runs no MTP config of it among these rows).
pub fn inferencex_mtp(
    engine: crate::llm::serving::request::Engine,
    attention_dp: bool,
) -> Option<crate::llm::serving::request::SpeculativeDecoding> {
    use crate::llm::serving::request::{Engine, SpeculativeDecoding, SpeculativeMethod};
    let k = match engine {
        Engine::Trtllm if attention_dp => 1,
        Engine::Trtllm => 3,
        Engine::Sglang => 2,
        Engine::Vllm => return None,
    };
    Some(SpeculativeDecoding { method: SpeculativeMethod::Mtp, num_speculative_tokens: Some(k), acceptance_rate: None })
}

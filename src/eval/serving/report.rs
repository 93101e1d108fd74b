//! The report of `eval serving`: accuracy per subset (engine, mode, GPU, model, concurrency; the rows with and
//! without known worker counts apart, InferenceX's speculative-decoding runs apart), the headline sentence, and the
//! markdown and files written.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;

use super::{Client, Report, RowResult};
use crate::learn::fit::{accuracy, Accuracy};

/// Accuracy of TTFT and TPOT over one subset.
#[derive(Debug, Clone, Serialize)]
pub struct Subset {
    pub label: String,
    pub ttft: Accuracy,
    pub tpot: Accuracy,
    /// Fraction of the rows whose measured TTFT lies inside the shipped p10–p90 interval of the prediction
    /// (target 0.8; in sample: the shipped band's shift was fitted on these rows too — the leave-source-out
    /// coverage is [`super::intervals`]').
    pub ttft_coverage: f64,
    /// The same for TPOT.
    pub tpot_coverage: f64,
}

/// Fraction of `(measured, p10, p90)` triples with p10 ≤ measured ≤ p90 (training's
/// [`crate::eval::intervals::coverage`]); 0 without triples.
fn coverage(rows: &[(f64, f64, f64)]) -> f64 {
    crate::eval::intervals::coverage("", rows).map_or(0.0, |c| c.inside)
}

/// The label of the disaggregated rows whose worker counts the data do not give.
const NO_WORKER_COUNTS: &str = "disagg, worker counts not in the data";

/// The label of InferenceX's speculative-decoding (MTP) runs ([`super::speculative::speculative`]), simulated with
/// their scripts' speculative decoding ([`super::speculative::inferencex_mtp`]) and kept out of the headline.
const SPECULATIVE: &str = "speculative decoding (MTP), modelled, reported apart";

/// Accuracy and interval coverage of `rows` over every subset the report shows, in the report's order.
pub(super) fn subsets(rows: &[RowResult]) -> Vec<Subset> {
    let mut out = Vec::new();
    let mut add = |label: String, f: &dyn Fn(&RowResult) -> bool| {
        let sel: Vec<&RowResult> = rows.iter().filter(|r| f(r)).collect();
        if sel.is_empty() {
            return;
        }
        let acc = |p: &dyn Fn(&RowResult) -> (f64, f64)| {
            let (a, b): (Vec<f64>, Vec<f64>) = sel.iter().map(|r| p(r)).unzip();
            accuracy(&a, &b)
        };
        let cov = |b: &dyn Fn(&RowResult) -> (f64, f64, f64)| coverage(&sel.iter().map(|r| b(r)).collect::<Vec<_>>());
        out.push(Subset {
            label,
            ttft: acc(&|r| (r.predicted_ttft_ms, r.measured_ttft_ms)),
            tpot: acc(&|r| (r.predicted_tpot_ms, r.measured_tpot_ms)),
            ttft_coverage: cov(&|r| (r.measured_ttft_ms, r.ttft_p10_ms, r.ttft_p90_ms)),
            tpot_coverage: cov(&|r| (r.measured_tpot_ms, r.tpot_p10_ms, r.tpot_p90_ms)),
        });
    };
    add("all rows".into(), &|_| true);
    // The headline: the rows predictable as deployed, less the speculative-decoding runs (perfcast decodes one
    // token per step; InferenceX's MTP runs up to four), which are reported apart below.
    add("worker counts known (agg, or disagg with counts)".into(), &|r| r.workers_known && !r.speculative);
    // Not predictable as measured: the data do not give their prefill and decode pools' sizes, and the eval
    // assumes one worker of each (`rows::load`), so one decode worker carries every client. Reported apart so
    // that the rows above are not read as a prediction of these deployments.
    add(format!("{NO_WORKER_COUNTS} (1 + 1 workers assumed)"), &|r| !r.workers_known);
    add(format!("{SPECULATIVE} (InferenceX `spec-decoding: mtp`)"), &|r| r.speculative);
    let engines: BTreeSet<&str> = rows.iter().map(|r| r.engine).collect();
    let modes: BTreeSet<&str> = rows.iter().map(|r| r.mode.as_str()).collect();
    for e in &engines {
        add(format!("{e}, worker counts known"), &|r| r.engine == *e && r.workers_known && !r.speculative);
    }
    for e in &engines {
        for m in &modes {
            add(format!("{e} {m}"), &|r| r.engine == *e && r.mode == *m);
        }
    }
    let gpus: BTreeSet<&str> = rows.iter().map(|r| r.gpu.as_str()).collect();
    let models: BTreeSet<&str> = rows.iter().map(|r| r.model.as_str()).collect();
    for e in &engines {
        add(e.to_string(), &|r| r.engine == *e);
    }
    for m in &modes {
        add(m.to_string(), &|r| r.mode == *m);
    }
    for g in &gpus {
        add(g.to_string(), &|r| r.gpu == *g);
    }
    for e in &engines {
        for m in &modes {
            for g in &gpus {
                add(format!("{e} {m} {g}"), &|r| r.engine == *e && r.mode == *m && r.gpu == *g);
            }
        }
    }
    for m in &models {
        add(format!("model {m}"), &|r| r.model == *m);
    }
    for (lo, hi) in [(1, 8), (9, 64), (65, 4096)] {
        add(format!("concurrency {lo}–{hi}"), &|r| (lo..=hi).contains(&r.concurrency));
    }
    out
}

fn table(subsets: &[Subset]) -> String {
    let pct = crate::eval::output::pct;
    let mut s = String::from(
        "| subset | rows | TTFT MAPE | TTFT signed | TPOT MAPE | TPOT signed | TTFT in p10–p90 | TPOT in p10–p90 |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for x in subsets {
        s.push_str(&format!(
            "| {} | {} | {} | {:+.1} % | {} | {:+.1} % | {} | {} |\n",
            x.label,
            x.ttft.rows,
            pct(x.ttft.mape),
            x.ttft.signed * 100.0,
            pct(x.tpot.mape),
            x.tpot.signed * 100.0,
            pct(x.ttft_coverage),
            pct(x.tpot_coverage)
        ));
    }
    s
}

/// The headline sentence over `subsets`: the rows predictable as deployed (worker counts known, not speculative
/// decoding) first, the disaggregated rows without worker counts and the speculative-decoding runs apart (empty if
/// none of these subsets is present).
fn headline(subsets: &[Subset]) -> String {
    let pct = crate::eval::output::pct;
    let find = |p: &str| subsets.iter().find(|x| x.label.starts_with(p));
    let line = |x: &Subset| {
        format!(
            "{} rows, TTFT {} ({:+.1} %), TPOT {} ({:+.1} %)",
            x.ttft.rows,
            pct(x.ttft.mape),
            x.ttft.signed * 100.0,
            pct(x.tpot.mape),
            x.tpot.signed * 100.0
        )
    };
    let mut s = String::new();
    if let Some(k) = find("worker counts known") {
        s.push_str(&format!("**Headline, worker counts known:** {}.", line(k)));
    }
    if let Some(u) = find(NO_WORKER_COUNTS) {
        s.push_str(&format!(
            " Reported apart, not predictable without their pool sizes ({NO_WORKER_COUNTS}, one prefill and one \
             decode worker assumed): {}.",
            line(u)
        ));
    }
    if let Some(m) = find(SPECULATIVE) {
        s.push_str(&format!(
            " {SPECULATIVE} (InferenceX's MTP runs, simulated with their scripts' draft tokens — \
             TensorRT-LLM 3, 1 with attention DP; SGLang 2; the GB200 dynamo-trt points their recipe's \
             DECODE_MTP_SIZE 1–3 — at the default tokens per step of a reused MTP layer, 1.92/2.58/2.82 at 1/2/3 drafts): {}.",
            line(m)
        ));
    }
    if !s.is_empty() {
        s.push_str("\n\n");
    }
    s
}

/// The report as markdown.
pub fn markdown(r: &Report) -> String {
    let client = match r.client {
        Client::Fixed => "fixed input and output lengths",
        Client::InferenceX => "InferenceX's, lengths uniform in [0.8 L, L] in its three shapes",
    };
    let mut s = format!(
        "Models: {}\n\nClient: {client}\n\n### Whole source left out (the shipped constants; nothing fitted on these \
         runs)\n\n",
        r.models
    );
    s.push_str(&headline(&r.whole_source_out));
    s.push_str(&table(&r.whole_source_out));
    s.push_str("\n### Leave model out\n\n");
    s.push_str(&table(&r.leave_model_out));
    s.push_str("\n### Leave GPU out\n\n");
    s.push_str(&table(&r.leave_gpu_out));
    s.push_str(concat!(
        "\n### Front-end time per request, fitted per fold (ms)\n\n",
        "| split | held out | vLLM | SGLang | TensorRT-LLM |\n",
        "|---|---|---:|---:|---:|\n",
    ));
    for f in r.folds.iter().chain([&r.all_rows]) {
        s.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {:.1} |\n",
            f.split,
            f.held_out,
            f.vllm_request_us / 1e3,
            f.sglang_request_us / 1e3,
            f.trtllm_request_us / 1e3
        ));
    }
    s.push_str("\n### Not evaluated\n\n| reason | rows |\n|---|---:|\n");
    for (why, n) in &r.skipped {
        s.push_str(&format!("| {why} | {n} |\n"));
    }
    s
}

/// Writes `serving.md`, `serving.json` and `serving_rows.csv` under `out`.
pub fn write(r: &Report, out: &Path) -> Result<(), String> {
    crate::eval::output::write_files(out, "serving", &markdown(r), r, Some(&r.rows)).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(engine: &'static str, mode: &str, known: bool, ttft: (f64, f64), tpot: (f64, f64)) -> RowResult {
        spec_row(engine, mode, known, false, ttft, tpot)
    }

    fn spec_row(
        engine: &'static str,
        mode: &str,
        known: bool,
        speculative: bool,
        ttft: (f64, f64),
        tpot: (f64, f64),
    ) -> RowResult {
        RowResult {
            id: String::new(),
            engine,
            mode: mode.into(),
            gpu: "b200_sxm".into(),
            model: "m".into(),
            precision: "fp8".into(),
            isl: 1024,
            osl: 1024,
            concurrency: 4,
            replicas: 1,
            workers_known: known,
            speculative,
            memory_fraction_raised: false,
            split: "source",
            measured_ttft_ms: ttft.1,
            predicted_ttft_ms: ttft.0,
            measured_tpot_ms: tpot.1,
            predicted_tpot_ms: tpot.0,
            ttft_p10_ms: 0.0,
            ttft_p90_ms: 0.0,
            tpot_p10_ms: 0.0,
            tpot_p90_ms: 0.0,
            steady_ttft_ms: 0.0,
            steady_tpot_ms: 0.0,
            kv_cache_dtype: "fp8".into(),
            kv_max_requests: 0,
        }
    }

    #[test]
    fn disaggregated_rows_without_worker_counts_are_reported_apart() {
        // (predicted, measured) ms. sglang agg: TTFT 110/100 (+10 %), TPOT 9/10 (−10 %); trtllm agg: TTFT 80/100
        // (−20 %), TPOT 12/10 (+20 %); trtllm disagg with counts: TTFT 100/100, TPOT 10/10; trtllm disagg without
        // counts: TTFT 500/100 (+400 %), TPOT 30/10 (+200 %).
        let rows = [
            row("sglang", "agg", true, (110.0, 100.0), (9.0, 10.0)),
            row("trtllm", "agg", true, (80.0, 100.0), (12.0, 10.0)),
            row("trtllm", "disagg", true, (100.0, 100.0), (10.0, 10.0)),
            row("trtllm", "disagg", false, (500.0, 100.0), (30.0, 10.0)),
        ];
        let s = subsets(&rows);
        let get = |l: &str| s.iter().find(|x| x.label == l).unwrap_or_else(|| panic!("no subset {l}"));
        // Worker counts known: TTFT |+10| + |−20| + 0 = 30 % over 3 rows = 10 %, signed (10 − 20)/3 = −3.33 %.
        let known = get("worker counts known (agg, or disagg with counts)");
        assert_eq!(known.ttft.rows, 3);
        assert!((known.ttft.mape - 0.10).abs() < 1e-12);
        assert!((known.ttft.signed + 0.1 / 3.0).abs() < 1e-12);
        // TPOT: (10 + 20 + 0)/3 = 10 %, signed (−10 + 20)/3 = +3.33 %.
        assert!((known.tpot.mape - 0.10).abs() < 1e-12);
        assert!((known.tpot.signed - 0.1 / 3.0).abs() < 1e-12);
        let apart = get("disagg, worker counts not in the data (1 + 1 workers assumed)");
        assert_eq!(apart.ttft.rows, 1);
        assert!((apart.ttft.mape - 4.0).abs() < 1e-12);
        assert!((apart.tpot.signed - 2.0).abs() < 1e-12);
        // TensorRT-LLM with counts: TTFT (20 + 0)/2 = 10 %, TPOT (20 + 0)/2 = 10 %.
        let trt = get("trtllm, worker counts known");
        assert_eq!(trt.tpot.rows, 2);
        assert!((trt.ttft.mape - 0.10).abs() < 1e-12);
        assert!((trt.tpot.mape - 0.10).abs() < 1e-12);
        // TensorRT-LLM disaggregated, both kinds: TTFT (0 + 400)/2 = 200 %.
        assert!((get("trtllm disagg").ttft.mape - 2.0).abs() < 1e-12);
        let h = headline(&s);
        assert!(h.starts_with("**Headline, worker counts known:** 3 rows"), "{h}");
        assert!(h.contains("not predictable without their pool sizes"), "{h}");
    }

    #[test]
    fn speculative_decoding_runs_are_reported_apart_from_the_headline() {
        // (predicted, measured) ms. trtllm agg: TTFT 110/100 (+10 %), TPOT 9/10 (−10 %); trtllm agg MTP: TTFT
        // 100/200 (−50 %), TPOT 10/5 (+100 %).
        let rows = [
            row("trtllm", "agg", true, (110.0, 100.0), (9.0, 10.0)),
            spec_row("trtllm", "agg", true, true, (100.0, 200.0), (10.0, 5.0)),
        ];
        let s = subsets(&rows);
        let get = |l: &str| s.iter().find(|x| x.label == l).unwrap_or_else(|| panic!("no subset {l}"));
        // The headline and its per-engine line hold the non-speculative row only: TPOT 10 % (−10 %).
        for l in ["worker counts known (agg, or disagg with counts)", "trtllm, worker counts known"] {
            assert_eq!(get(l).tpot.rows, 1);
            assert!((get(l).tpot.signed + 0.10).abs() < 1e-12);
        }
        let apart = get("speculative decoding (MTP), modelled, reported apart (InferenceX `spec-decoding: mtp`)");
        assert_eq!(apart.tpot.rows, 1);
        assert!((apart.tpot.mape - 1.0).abs() < 1e-12);
        assert!((apart.ttft.signed + 0.5).abs() < 1e-12);
        // All rows and the engine × mode line keep both: TPOT (10 + 100)/2 = 55 %.
        assert!((get("all rows").tpot.mape - 0.55).abs() < 1e-12);
        assert!((get("trtllm agg").tpot.mape - 0.55).abs() < 1e-12);
        let h = headline(&s);
        assert!(h.starts_with("**Headline, worker counts known:** 1 rows"), "{h}");
        assert!(h.contains(" speculative decoding (MTP), modelled, reported apart (InferenceX"), "{h}");
    }

    #[test]
    fn coverage_counts_measurements_inside_their_interval() {
        // Four rows: 1.0 in [0.9, 1.1] and 1.1 in [1.1, 1.2] (the ends count) inside; 2.0 above [0.9, 1.1], 0.5
        // below [0.9, 1.1]: 2 of 4.
        let rows = [(1.0, 0.9, 1.1), (1.1, 1.1, 1.2), (2.0, 0.9, 1.1), (0.5, 0.9, 1.1)];
        assert_eq!(coverage(&rows), 0.5);
        assert_eq!(coverage(&[]), 0.0);
    }
}

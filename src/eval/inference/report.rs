//! The evaluation's summary subsets, its markdown and its CSV/JSON files.

use super::*;
use crate::eval::output::{coverage_table, subset, summary_table};

pub(super) fn summarize(results: &[RowResult]) -> Vec<Summary> {
    let mut summary = Vec::new();
    let mut add = |label: String, f: &dyn Fn(&RowResult) -> bool| {
        summary.extend(subset(label, results.iter().filter(|r| f(r)).map(|r| (r.predicted_s, r.measured_s))));
    };
    add("all rows".to_string(), &|_| true);
    for fw in ["vllm", "trtllm"] {
        add(fw.to_string(), &|r| r.framework == fw);
    }
    for hw in ["A100", "H100", "GH200"] {
        add(hw.to_string(), &|r| r.hardware == hw);
        for fw in ["vllm", "trtllm"] {
            add(format!("{fw} {hw}"), &|r| r.hardware == hw && r.framework == fw);
        }
    }
    // The bench times whole batches: prefill-heavy rows stand for TTFT (the prompt's prefill), decode-heavy rows
    // for TPOT (the decode steps), by the predicted share of the latency in the prefill.
    add("prefill-heavy (prefill ≥ 8 % of the latency, the most there are; TTFT-like)".to_string(), &|r| {
        r.prefill_share >= 0.08
    });
    add("decode-heavy (prefill < 2 % of the latency; TPOT-like)".to_string(), &|r| r.prefill_share < 0.02);
    for hw in ["A100", "H100", "GH200"] {
        for fw in ["vllm", "trtllm"] {
            add(format!("{fw} {hw} prefill-heavy"), &|r| {
                r.hardware == hw && r.framework == fw && r.prefill_share >= 0.08
            });
            add(format!("{fw} {hw} decode-heavy"), &|r| {
                r.hardware == hw && r.framework == fw && r.prefill_share < 0.02
            });
        }
    }
    for b in [1, 16, 32, 64] {
        add(format!("batch {b}"), &|r| r.batch == b);
    }
    for l in [128, 256, 512, 1024, 2048] {
        add(format!("length {l}"), &|r| r.length == l);
    }
    add("needs waves (batch above the KV cache)".to_string(), &|r| r.waves > 1);
    let models: std::collections::BTreeSet<&str> = results.iter().map(|r| r.model.as_str()).collect();
    for m in models {
        add(format!("model {m}"), &|r| r.model == m);
    }
    summary
}

/// The report as markdown.
pub fn markdown(r: &Report) -> String {
    let mut s = summary_table(&r.summary);
    s.push_str(&format!("\nModels: {}\n\nConstants: {}\n", r.models, describe(&r.constants)));
    for (i, f) in r.folds.iter().enumerate() {
        s.push_str(&format!("fold {}: {}\n", i + 1, describe(f)));
    }
    s.push_str(&format!(
        "\nIntervals ({}): how often the measured latency falls in [p10, p90] (target 80 %)\n\n",
        r.coverage_kind
    ));
    s.push_str(&coverage_table(&r.coverage));
    if !r.quantiles.is_empty() {
        s.push_str("\nResidual quantiles ln(measured / predicted) over every out-of-fold row:\n\n");
        for q in &r.quantiles {
            s.push_str(&format!("- {}: q10 {:+.4}, q90 {:+.4} ({} rows)\n", q.class, q.q10, q.q90, q.rows));
        }
    }
    s.push_str("\nNot evaluated:\n\n| reason | rows |\n|---|---:|\n");
    for (why, n) in &r.skipped {
        s.push_str(&format!("| {why} | {n} |\n"));
    }
    s
}

/// Writes inference.md, inference.json and inference_rows.csv under `out` ([`crate::eval::output::write_files`]).
pub fn write(r: &Report, out: &Path) -> Result<(), String> {
    crate::eval::output::write_files(out, "inference", &markdown(r), r, Some(&r.rows)).map(|_| ())
}

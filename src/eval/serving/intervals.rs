//! `perfcast eval serving-intervals`: the serving bands' between-source shift ([`ServingShift`]), fitted on the
//! rows two other evaluations wrote, and its coverage with each source left out.
//!
//! **The sources** (what `../shared` has, each predicted with nothing fitted on it):
//! - `blackwell/<engine>` (vLLM, SGLang, TensorRT-LLM): the aggregated rows of `perfcast eval serving`'s
//!   `serving_rows.csv` under the headline split (`split` = `source`: the shipped constants, the whole source left
//!   out), less InferenceX's speculative-decoding runs (`speculative`; modelled since branch `mtp`, still set apart from
//!   the headline). TTFT and TPOT. Disaggregated rows are not a source: 623 of 845 have no worker counts and are predicted
//!   with one prefill and one decode worker (a known failure of the row, not a bias of the deployment), so the
//!   bands are not measured on disaggregated serving.
//! - `llm-inference-bench/<framework>` (vLLM, TensorRT-LLM): `perfcast eval inference --cross-validate`'s
//!   `inference_rows.csv` (each row predicted by constants fitted without its framework × model group). The bench
//!   times whole static batches, input = output length, the prefill at most ≈ 18 % of the predicted latency: its
//!   latency residual stands for the TPOT residual only (an assumption), and it gives no TTFT evidence.
//!
//! So TTFT has 3 sources and TPOT 5, few: the spread of their means is a rough estimate, which the t quantile of
//! [`crate::llm::interval::t90`] with k − 1 degrees of freedom widens accordingly.
//!
//! **Coverage, leave-source-out**: each source's rows are judged by the band of a [`ServingShift`] fitted on the
//! other sources only (its within quantiles and its shift), the way the band meets a deployment nobody measured.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::super::intervals::{coverage, Coverage};
use super::super::output::{coverage_table, pct};
use crate::llm::serving::interval::ServingShift;

/// One source's residuals ln(measured / predicted) of one quantity.
#[derive(Debug, Clone, Serialize)]
pub struct Source {
    /// `blackwell/vllm`, `llm-inference-bench/trtllm`, …
    pub name: String,
    pub residuals: Vec<f64>,
}

/// One quantity's sources, fitted shift and leave-source-out coverage.
#[derive(Debug, Clone, Serialize)]
pub struct Quantity {
    /// `ttft` or `tpot`.
    pub name: &'static str,
    pub sources: Vec<Source>,
    /// Fitted on every source: what ships.
    pub shift: ServingShift,
    /// Per source (its rows judged by the shift fitted without it), then `all rows`.
    pub coverage: Vec<Coverage>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ttft: Quantity,
    pub tpot: Quantity,
    /// The block to paste into `src/llm/serving/interval.rs`.
    pub rust_block: String,
}

#[derive(Deserialize)]
struct ServingCsvRow {
    engine: String,
    mode: String,
    split: String,
    /// InferenceX's speculative-decoding runs ([`super::speculative::speculative`]); absent (false) in rows files
    /// written before the column.
    #[serde(default)]
    speculative: bool,
    measured_ttft_ms: f64,
    predicted_ttft_ms: f64,
    measured_tpot_ms: f64,
    predicted_tpot_ms: f64,
}

#[derive(Deserialize)]
struct InferenceCsvRow {
    framework: String,
    measured_s: f64,
    predicted_s: f64,
}

/// ln(measured / predicted), `None` unless both are positive and finite.
fn residual(measured: f64, predicted: f64) -> Option<f64> {
    (measured > 0.0 && predicted > 0.0).then(|| (measured / predicted).ln()).filter(|r| r.is_finite())
}

/// Reads `dir/<stem>_rows.csv` into `T`s; errors name the file and line.
fn read<T: for<'de> Deserialize<'de>>(dir: &Path, stem: &str) -> Result<Vec<T>, String> {
    let path = dir.join(format!("{stem}_rows.csv"));
    let mut r = csv::Reader::from_path(&path).map_err(|e| {
        format!("{}: {e} (run `perfcast eval {stem}` with --out {} first)", path.display(), dir.display())
    })?;
    r.deserialize().enumerate().map(|(i, x)| x.map_err(|e| format!("{} line {}: {e}", path.display(), i + 2))).collect()
}

/// The leave-source-out coverage of `sources` (each judged by the shift of the others), and over all rows.
pub fn leave_source_out(sources: &[Source]) -> Vec<Coverage> {
    let mut out = Vec::new();
    let mut all = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        let others: Vec<Vec<f64>> =
            sources.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, o)| o.residuals.clone()).collect();
        let (lo, hi) = ServingShift::fit(&others).bounds();
        // In log space: measured / predicted = e^r against the band [e^lo, e^hi].
        let t: Vec<(f64, f64, f64)> = s.residuals.iter().map(|r| (*r, lo, hi)).collect();
        out.extend(coverage(&s.name, &t));
        all.extend(t);
    }
    out.extend(coverage("all rows", &all));
    out
}

fn quantity(name: &'static str, by: BTreeMap<String, Vec<f64>>) -> Quantity {
    let sources: Vec<Source> = by.into_iter().map(|(name, residuals)| Source { name, residuals }).collect();
    let all: Vec<Vec<f64>> = sources.iter().map(|s| s.residuals.clone()).collect();
    Quantity { name, shift: ServingShift::fit(&all), coverage: leave_source_out(&sources), sources }
}

/// Fits the shifts from `serving_dir/serving_rows.csv` (`perfcast eval serving`) and
/// `inference_dir/inference_rows.csv` (`perfcast eval inference --cross-validate`; refused unless its
/// `inference.json` says the rows were held out); `stamp` (date, commit) goes into the generated block.
pub fn run(serving_dir: &Path, inference_dir: &Path, stamp: &str) -> Result<Report, String> {
    let json = inference_dir.join("inference.json");
    let kind = std::fs::read_to_string(&json)
        .map_err(|e| format!("{}: {e} (run `perfcast eval inference --cross-validate` first)", json.display()))?;
    if !kind.contains("\"held-out (cross-conformal)\"") {
        return Err(format!(
            "{}: its rows were predicted in sample; run `perfcast eval inference --cross-validate`",
            json.display()
        ));
    }
    let (mut ttft, mut tpot): (BTreeMap<String, Vec<f64>>, BTreeMap<String, Vec<f64>>) = Default::default();
    for r in read::<ServingCsvRow>(serving_dir, "serving")? {
        if r.split != "source" || r.mode != "agg" || r.speculative {
            continue;
        }
        let name = format!("blackwell/{}", r.engine);
        ttft.entry(name.clone()).or_default().extend(residual(r.measured_ttft_ms, r.predicted_ttft_ms));
        tpot.entry(name).or_default().extend(residual(r.measured_tpot_ms, r.predicted_tpot_ms));
    }
    if ttft.is_empty() {
        return Err(format!("{}/serving_rows.csv: no aggregated rows of the headline split", serving_dir.display()));
    }
    for r in read::<InferenceCsvRow>(inference_dir, "inference")? {
        let name = format!("llm-inference-bench/{}", r.framework);
        tpot.entry(name).or_default().extend(residual(r.measured_s, r.predicted_s));
    }
    let (ttft, tpot) = (quantity("ttft", ttft), quantity("tpot", tpot));
    let rust_block = rust_block(&ttft, &tpot, stamp);
    Ok(Report { ttft, tpot, rust_block })
}

/// The generated block of `src/llm/serving/interval.rs`.
pub fn rust_block(ttft: &Quantity, tpot: &Quantity, stamp: &str) -> String {
    let item = |q: &Quantity| {
        let (s, n) = (&q.shift, q.sources.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "));
        format!(
            "/// {}: {} sources, 80 % half-width of the shift {:.4}:\n/// {n}.\npub const {}_SHIFT: ServingShift = ServingShift {{\n    q10: {:.4},\n    q90: {:.4},\n    shift: SourceShift {{ mean: {:.4}, sd: {:.4}, sources: {} }},\n    rows: {},\n}};\n",
            q.name.to_uppercase(),
            s.shift.sources,
            s.shift.half_width(),
            q.name.to_uppercase(),
            s.q10,
            s.q90,
            s.shift.mean,
            s.shift.sd,
            s.shift.sources,
            s.rows
        )
    };
    format!(
        "// BEGIN generated by `perfcast eval serving-intervals`\n/// Fitted by `perfcast eval serving-intervals` ({stamp}).\n{}{}// END generated\n",
        item(ttft),
        item(tpot)
    )
}

/// The report as markdown.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    for q in [&r.ttft, &r.tpot] {
        let (lo, hi) = q.shift.bounds();
        s.push_str(&format!(
            "### {}\n\n| source | rows | mean ln(measured / predicted) |\n|---|---:|---:|\n",
            q.name.to_uppercase()
        ));
        for x in &q.sources {
            let m = x.residuals.iter().sum::<f64>() / x.residuals.len().max(1) as f64;
            s.push_str(&format!("| {} | {} | {:+.3} |\n", x.name, x.residuals.len(), m));
        }
        s.push_str(&format!(
            "\nShipped: within quantiles {:+.3} / {:+.3}, source means {:+.3} ± {:.3} (sd, {} sources), 80 % \
             half-width {:.3}; band {:.3}–{:.3} × the prediction ({} … {} of it).\n\nLeave-source-out coverage \
             (each source judged by the band fitted without it):\n\n",
            q.shift.q10,
            q.shift.q90,
            q.shift.shift.mean,
            q.shift.shift.sd,
            q.shift.shift.sources,
            q.shift.shift.half_width(),
            lo.exp(),
            hi.exp(),
            pct(lo.exp()),
            pct(hi.exp())
        ));
        s.push_str(&coverage_table(&q.coverage));
        s.push('\n');
    }
    s.push_str("### Generated block\n\n```rust\n");
    s.push_str(&r.rust_block);
    s.push_str("```\n");
    s
}

/// Writes `serving_intervals.md` and `serving_intervals.json` under `out`.
pub fn write(r: &Report, out: &Path) -> Result<(), String> {
    super::super::output::write_files::<Report, ()>(out, "serving_intervals", &markdown(r), r, None).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_source_is_judged_by_the_band_of_the_others() {
        // Three sources of 3 rows each (equal weights: the rank rule). Leaving out A = [−0.1, 0, 0.1]: B = [0.1,
        // 0.2, 0.3] (mean 0.2) and C = [−0.4, −0.2, 0.0] (mean −0.2) centre to −0.1, 0, 0.1, −0.2, 0, 0.2; n = 6,
        // (n + 1)·0.1 = 0.7 → the smallest, −0.2; (n + 1)·0.9 = 6.3 → the largest, 0.2. Means 0.2, −0.2: mean 0,
        // sd √(0.08 / 1) = 0.28284, t₀.₉,₁ = 3.078, h = 3.078 · 0.28284 · √1.5 = 1.06625; bounds ±√(0.04 + 1.13689) =
        // ±1.08484: A's three rows all inside. Leaving out B (mean 0.2): A and C centre to −0.1, 0, 0.1, −0.2, 0,
        // 0.2 again, means 0 and −0.2: mean −0.1, sd 0.14142, h = 0.53312, centre −0.1, half-width
        // √(0.04 + 0.28422) = 0.56940: [−0.6694, 0.4694], B's rows (0.1, 0.2, 0.3) inside. Leaving out C: means 0
        // and 0.2, centre +0.1, [−0.4694, 0.6694]: C's −0.4 inside, −0.2 and 0.0 inside. 9 of 9.
        let s = |n: &str, r: &[f64]| Source { name: n.into(), residuals: r.to_vec() };
        let sources = [s("a", &[-0.1, 0.0, 0.1]), s("b", &[0.1, 0.2, 0.3]), s("c", &[-0.4, -0.2, 0.0])];
        let c = leave_source_out(&sources);
        assert_eq!(c.len(), 4);
        assert!(c.iter().all(|c| c.inside == 1.0 && c.rows == 3 || c.label == "all rows"), "{c:?}");
        assert_eq!((c[3].rows, c[3].inside), (9, 1.0));
        // A fourth source far above (mean 3): left out, the others' band (centre ≈ 0) cannot reach it: all above.
        let mut four = sources.to_vec();
        four.push(s("d", &[2.9, 3.0, 3.1]));
        let c = leave_source_out(&four);
        let d = c.iter().find(|c| c.label == "d").unwrap();
        assert_eq!((d.inside, d.above, d.below), (0.0, 1.0, 0.0));
    }

    #[test]
    fn residuals_need_positive_times() {
        assert!((residual(2.0, 1.0).unwrap() - 2f64.ln()).abs() < 1e-12);
        assert_eq!(residual(0.0, 1.0), None);
        assert_eq!(residual(1.0, -1.0), None);
    }
}

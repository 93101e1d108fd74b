//! The leave-one-GPU-out results and their report: one row per (key, held-out GPU), the unweighted mean per key,
//! the markdown and the written files (moved out of `src/eval/logo/mod.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{FallbackScore, Source};
use crate::learn::fit::{Accuracy, Grid};

/// One (key, held-out GPU) result.
#[derive(Debug, Clone, Serialize)]
pub struct LogoRow {
    pub key: String,
    pub held_out: String,
    /// Rows of the training GPUs the model was fitted on (after thinning).
    pub train_rows: usize,
    /// The training GPUs.
    pub trained_on: Vec<String>,
    /// The analytic model alone on the held-out GPU's rows.
    pub analytic: Accuracy,
    /// The learned correction (fitted without the held-out GPU) on the same rows.
    pub learned: Accuracy,
    /// With [`Options::fallback`](super::Options::fallback): the same rows timed by the models of the engines a request falls back to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<FallbackScore>,
}
/// The mean over held-out GPUs of one key (each GPU weighs the same, whatever its row count).
#[derive(Debug, Clone, Serialize)]
pub struct KeyMean {
    pub key: String,
    pub held_out_gpus: usize,
    pub rows: usize,
    pub analytic: Accuracy,
    pub learned: Accuracy,
}

/// A run's report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub source: Source,
    pub grid: Grid,
    pub max_rows: usize,
    pub masked_features: Vec<String>,
    pub features: Vec<String>,
    pub rows_read: usize,
    pub rows: Vec<LogoRow>,
    pub means: Vec<KeyMean>,
    /// Keys with GPUs that could not be held out (fewer than three GPUs with rows), and why.
    pub skipped: Vec<(String, String)>,
    pub elapsed_s: f64,
}
/// Per key, the unweighted mean over its held-out GPUs of MAPE and signed error.
pub fn means(rows: &[LogoRow]) -> Vec<KeyMean> {
    let mut by_key: BTreeMap<&str, Vec<&LogoRow>> = BTreeMap::new();
    for r in rows {
        by_key.entry(&r.key).or_default().push(r);
    }
    let mean = |v: &[&LogoRow], f: &dyn Fn(&LogoRow) -> Accuracy| {
        let n = v.len() as f64;
        Accuracy {
            mape: v.iter().map(|r| f(r).mape).sum::<f64>() / n,
            signed: v.iter().map(|r| f(r).signed).sum::<f64>() / n,
            rows: v.iter().map(|r| f(r).rows).sum(),
        }
    };
    by_key
        .into_iter()
        .map(|(key, v)| KeyMean {
            key: key.to_string(),
            held_out_gpus: v.len(),
            rows: v.iter().map(|r| r.learned.rows).sum(),
            analytic: mean(&v, &|r| r.analytic),
            learned: mean(&v, &|r| r.learned),
        })
        .collect()
}

fn pct(a: &Accuracy) -> String {
    format!("{:.1} % ({:+.1} %)", a.mape * 100.0, a.signed * 100.0)
}

/// The report as markdown: one row per (key, held-out GPU), then the mean per key.
pub fn markdown(r: &Report) -> String {
    let mut s = format!(
        "Leave one GPU out, source {}: {} rows read; at most {} training rows per fit; grid {:?}; masked features: {}.\n\n",
        r.source.name(),
        r.rows_read,
        if r.max_rows == 0 { "all".to_string() } else { r.max_rows.to_string() },
        r.grid,
        if r.masked_features.is_empty() { "none".to_string() } else { r.masked_features.join(", ") },
    );
    s.push_str("| key | held-out GPU | rows | train rows | analytic MAPE (signed) | learned MAPE (signed) |\n");
    s.push_str("|---|---|---:|---:|---:|---:|\n");
    for x in &r.rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            x.key,
            x.held_out,
            x.learned.rows,
            x.train_rows,
            pct(&x.analytic),
            pct(&x.learned)
        ));
    }
    s.push_str(
        "\nMean over held-out GPUs:\n\n| key | GPUs | rows | analytic MAPE (signed) | learned MAPE (signed) |\n",
    );
    s.push_str("|---|---:|---:|---:|---:|\n");
    for m in &r.means {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            m.key,
            m.held_out_gpus,
            m.rows,
            pct(&m.analytic),
            pct(&m.learned)
        ));
    }
    let fallback_rows: Vec<&LogoRow> = r.rows.iter().filter(|x| !x.fallbacks.is_empty()).collect();
    if !fallback_rows.is_empty() {
        s.push_str(
            "\nThe same held-out rows timed by another engine's model (a request falling back to it), mean over \
             held-out GPUs; 'with the GPU': that engine's model also trained on the held-out GPU's rows:\n\n\
             | key | timed by | GPUs | own model MAPE (signed) | stand-in MAPE (signed) | stand-in with the GPU |\n\
             |---|---|---:|---:|---:|---:|\n",
        );
        let mut by_pair: BTreeMap<(&str, &str), Vec<(&LogoRow, &FallbackScore)>> = BTreeMap::new();
        for x in &fallback_rows {
            for f in &x.fallbacks {
                by_pair.entry((x.key.as_str(), f.key.as_str())).or_default().push((x, f));
            }
        }
        for ((key, standin), v) in by_pair {
            let n = v.len() as f64;
            let mean = |g: &dyn Fn(&(&LogoRow, &FallbackScore)) -> Option<Accuracy>| {
                let a: Vec<Accuracy> = v.iter().filter_map(g).collect();
                (!a.is_empty()).then(|| Accuracy {
                    mape: a.iter().map(|a| a.mape).sum::<f64>() / a.len() as f64,
                    signed: a.iter().map(|a| a.signed).sum::<f64>() / a.len() as f64,
                    rows: a.iter().map(|a| a.rows).sum(),
                })
            };
            let own = mean(&|(x, _)| Some(x.learned)).expect("non-empty");
            let without = mean(&|(_, f)| Some(f.without_held_out)).expect("non-empty");
            let with = mean(&|(_, f)| f.with_held_out).map_or("–".to_string(), |a| pct(&a));
            s.push_str(&format!("| {key} | {standin} | {n} | {} | {} | {with} |\n", pct(&own), pct(&without)));
        }
    }
    if !r.skipped.is_empty() {
        s.push_str("\nNot held out:\n\n| key | why |\n|---|---|\n");
        for (k, why) in &r.skipped {
            s.push_str(&format!("| {k} | {why} |\n"));
        }
    }
    s.push_str(&format!("\n{:.0} s.\n", r.elapsed_s));
    s
}

/// Writes `cross_gpu_<source>.md` and `.json` under `out` ([`crate::eval::output::write_files`]); returns their
/// paths.
pub fn write(r: &Report, out: &Path) -> Result<(PathBuf, PathBuf), String> {
    let none: Option<&[()]> = None;
    let paths =
        crate::eval::output::write_files(out, &format!("cross_gpu_{}", r.source.name()), &markdown(r), r, none)?;
    Ok((paths[0].clone(), paths[1].clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, held: &str, a: (f64, f64, usize), l: (f64, f64, usize)) -> LogoRow {
        LogoRow {
            key: key.into(),
            held_out: held.into(),
            train_rows: 10,
            trained_on: vec![],
            analytic: Accuracy { mape: a.0, signed: a.1, rows: a.2 },
            learned: Accuracy { mape: l.0, signed: l.1, rows: l.2 },
            fallbacks: Vec::new(),
        }
    }

    #[test]
    fn the_mean_weighs_every_held_out_gpu_the_same() {
        // Two GPUs of 100 and 300 rows at 10 % and 30 % learned MAPE: the mean is 20 %, not the row-weighted 25 %.
        let rows = vec![
            row("linear.fwd.bf16", "H100", (0.5, -0.5, 100), (0.1, 0.1, 100)),
            row("linear.fwd.bf16", "L40S", (0.3, -0.1, 300), (0.3, -0.3, 300)),
            row("moe.fwd.fp8", "B200", (0.2, 0.2, 7), (0.05, 0.0, 7)),
        ];
        let m = means(&rows);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].key.as_str(), m[0].held_out_gpus, m[0].rows), ("linear.fwd.bf16", 2, 400));
        assert!((m[0].learned.mape - 0.2).abs() < 1e-12);
        assert!((m[0].learned.signed - (-0.1)).abs() < 1e-12);
        assert!((m[0].analytic.mape - 0.4).abs() < 1e-12);
        assert!((m[0].analytic.signed - (-0.3)).abs() < 1e-12);
        assert_eq!(m[1].rows, 7);
    }
}

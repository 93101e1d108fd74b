//! `perfcast eval kernels`: the kernel models against the measured kernels of the profiler fixtures (Nsight
//! Compute, rocprof) whose GPU is in the catalog. There are few such kernels and no train/test split of kernels
//! in `../shared/data`, so this reports the analytic models only (roofline, pipe ceiling, Hong–Kim where the
//! metrics allow it) — lower bounds by construction — and how far the measured kernels sit above them; no
//! learned correction is fitted or evaluated here.

use std::path::Path;

use serde::Serialize;

use crate::hw::lookup;
use crate::ingest::{self, Context, Format};
use crate::kernel::sample::estimate_sample;
use crate::learn::fit::{accuracy, Accuracy};
use crate::samples::Sample;

/// One kernel of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub fixture: String,
    pub kernel: String,
    pub gpu: String,
    pub measured_us: f64,
    pub roofline_us: Option<f64>,
    pub roofline_verdict: Option<String>,
    pub ceiling_us: Option<f64>,
    /// ceiling / measured, 0–1.
    pub efficiency: Option<f64>,
    pub hong_kim_us: Option<f64>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
    /// (model, accuracy of its time against the measurement).
    pub summary: Vec<(String, Accuracy)>,
    /// Fixtures skipped and why.
    pub skipped: Vec<(String, String)>,
}

/// The fixtures with kernel samples and the catalog GPU each was measured on (from their SOURCE notes).
pub fn fixtures() -> Vec<(&'static str, Format, Option<&'static str>)> {
    vec![
        ("ncu/gene_V100_summit_ncu2020_details_units-base_time-dram.csv", Format::NcuCsv, Some("V100-SXM2-16GB")),
        ("ncu/gene_V100_summit_ncu2020_details_units-base_time-flops.csv", Format::NcuCsv, Some("V100-SXM2-16GB")),
        ("ncu/microgpusim_GTX1080_ncu_page_raw_wide.csv", Format::NcuCsv, None),
        ("ncu/superbench_B200_ncu_details_csv_with_PROF_lines.log", Format::NcuCsv, None),
        ("rocprof/omniperf_MI200_gfx90a_rocprofv1_pmc_perf.csv", Format::RocprofCsv, Some("MI210")),
    ]
}

/// Runs the evaluation over `fixtures_dir` (`../shared/fixtures`).
pub fn run(fixtures_dir: &Path) -> Result<Report, String> {
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for (file, format, gpu) in fixtures() {
        let Some(gpu_name) = gpu else {
            skipped.push((file.to_string(), "its GPU (GTX 1080, B200) is not in the catalog".to_string()));
            continue;
        };
        let Some(spec) = lookup(gpu_name).map(|g| g.spec.clone()) else { continue };
        let bytes = std::fs::read(fixtures_dir.join(file)).map_err(|e| format!("{file}: {e}"))?;
        let ctx = Context { gpu: Some(gpu_name.into()), ..Default::default() };
        let parsed = ingest::parse(format, &bytes, &ctx).map_err(|e| format!("{file}: {e}"))?;
        for s in parsed.samples {
            let Sample::Kernel(k) = s else { continue };
            let Ok(e) = estimate_sample(&k, &spec) else { continue };
            rows.push(Row {
                fixture: file.to_string(),
                kernel: k.name.chars().take(80).collect(),
                gpu: spec.name.clone(),
                measured_us: k.duration_us,
                roofline_us: e.roofline.as_ref().map(|r| r.time_us).filter(|t| *t > 0.0),
                roofline_verdict: e.roofline.as_ref().map(|r| r.verdict.clone()),
                ceiling_us: e.pipes.as_ref().map(|p| p.ceiling_us).filter(|t| *t > 0.0),
                efficiency: e.pipes.as_ref().and_then(|p| p.efficiency),
                hong_kim_us: e.hong_kim.as_ref().map(|h| h.time_us),
            });
        }
    }
    let acc = |f: &dyn Fn(&Row) -> Option<f64>| {
        let (p, m): (Vec<f64>, Vec<f64>) = rows.iter().filter_map(|r| f(r).map(|v| (v, r.measured_us))).unzip();
        accuracy(&p, &m)
    };
    let summary = vec![
        ("roofline".to_string(), acc(&|r| r.roofline_us)),
        ("pipe ceiling".to_string(), acc(&|r| r.ceiling_us)),
        ("hong_kim".to_string(), acc(&|r| r.hong_kim_us)),
    ];
    Ok(Report { rows, summary, skipped })
}

/// The report as markdown.
pub fn markdown(r: &Report) -> String {
    let mut s = String::from(
        "Kernel models against the measured kernels of the profiler fixtures (analytic only: lower bounds).\n\n\
         | model | kernels | MAPE | signed |\n|---|---:|---:|---:|\n",
    );
    for (m, a) in &r.summary {
        s.push_str(&format!("| {m} | {} | {:.1} % | {:+.1} % |\n", a.rows, a.mape * 100.0, a.signed * 100.0));
    }
    s.push_str(concat!(
        "\n| fixture | kernel | GPU | measured µs | roofline µs (bound) ",
        "| pipe ceiling µs | efficiency | Hong–Kim µs |\n",
        "|---|---|---|---:|---:|---:|---:|---:|\n",
    ));
    let f = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "–".into());
    for row in &r.rows {
        s.push_str(&format!(
            "| {} | `{}` | {} | {:.2} | {} ({}) | {} | {} | {} |\n",
            row.fixture.rsplit('/').next().unwrap_or(&row.fixture),
            row.kernel.replace('|', "\\|"),
            row.gpu,
            row.measured_us,
            f(row.roofline_us),
            row.roofline_verdict.as_deref().unwrap_or("–"),
            f(row.ceiling_us),
            row.efficiency.map(|e| format!("{:.0} %", e * 100.0)).unwrap_or_else(|| "–".into()),
            f(row.hong_kim_us)
        ));
    }
    for (file, why) in &r.skipped {
        s.push_str(&format!("\nSkipped `{file}`: {why}."));
    }
    s.push('\n');
    s
}

//! The report's tables of `perfcast eval training`: MAPE and signed error per subset of the evaluated rows, and
//! how often the measured times fall in their p10–p90 intervals.

use std::collections::BTreeSet;

use super::{Mode, RowResult, SOURCES};
use crate::eval::efficiency_fit::FIT_SOURCES;
use crate::eval::intervals::{coverage, Coverage};
use crate::eval::output::{subset, Summary};

/// MAPE and signed error ([`crate::learn::fit::accuracy`]) of the predicted against the measured times, s, per subset of `results`,
/// in report order: each source of [`SOURCES`]; NeMo's MoE runs per (model, GPU); the MoE, Blackwell and
/// long-context sources per GPU; the long-context runs per (GPU, cp); vTrain per pp and per tp; NeMo and DGX Cloud
/// per precision; every other source per model group. Subsets without rows are left out. A subset holding trap
/// rows ([`RowResult::trap`]) is followed by the same subset without them, labelled
/// `<label> without trap rows (<the rows out>)` ([`without_traps_label`]): both figures stay in the report.
pub(super) fn summary(results: &[RowResult]) -> Vec<Summary> {
    let mut summary = Vec::new();
    let mut add = |label: String, f: &dyn Fn(&RowResult) -> bool| {
        let rows: Vec<&RowResult> = results.iter().filter(|r| f(r)).collect();
        let traps: Vec<&RowResult> = rows.iter().copied().filter(|r| r.trap.is_some()).collect();
        let kept = rows.iter().filter(|r| r.trap.is_none()).map(|r| (r.predicted_s, r.measured_s));
        let twin = (!traps.is_empty()).then(|| subset(without_traps_label(&label, &traps), kept)).flatten();
        summary.extend(subset(label, rows.iter().map(|r| (r.predicted_s, r.measured_s))));
        summary.extend(twin);
    };
    for source in SOURCES {
        add(source.to_string(), &|r| r.source == source);
    }
    let moe_cells: BTreeSet<(String, String)> =
        results.iter().filter(|r| r.source == "nemo-moe").map(|r| (r.group.clone(), r.gpu.clone())).collect();
    for (model, gpu) in moe_cells {
        add(format!("nemo-moe {model} {gpu}"), &|r| r.source == "nemo-moe" && r.group == model && r.gpu == gpu);
    }
    let per_gpu: BTreeSet<(&str, String)> = results
        .iter()
        .filter(|r| matches!(r.source, "nemo-moe" | "nemo-blackwell" | "nemo-long-cp"))
        .map(|r| (r.source, r.gpu.clone()))
        .collect();
    for (source, gpu) in per_gpu {
        add(format!("{source} {gpu}"), &|r| r.source == source && r.gpu == gpu);
    }
    let long_cp: BTreeSet<(String, u32)> =
        results.iter().filter(|r| r.source == "nemo-long-cp").map(|r| (r.gpu.clone(), r.cp)).collect();
    for (gpu, cp) in long_cp {
        add(format!("nemo-long-cp {gpu} cp {cp}"), &|r| r.source == "nemo-long-cp" && r.gpu == gpu && r.cp == cp);
    }
    for pp in [1, 2, 4] {
        add(format!("vtrain pp {pp}"), &|r| r.source == "vtrain" && r.pp == pp);
    }
    for tp in [1, 2, 4, 8] {
        add(format!("vtrain tp {tp}"), &|r| r.source == "vtrain" && r.tp == tp);
    }
    for prec in ["bf16", "fp8"] {
        add(format!("nemo + dgxc {prec}"), &|r| (r.source == "nemo" || r.source == "dgxc") && r.precision == prec);
    }
    let groups: BTreeSet<(String, &str)> =
        results.iter().filter(|r| r.source != "vtrain").map(|r| (r.group.clone(), r.source)).collect();
    for (g, s) in groups {
        add(format!("{s} {g}"), &|r| r.source == s && r.group == g);
    }
    summary
}

/// The label of `label`'s subset without its trap rows `traps`, naming each row out by its line and GPU as the
/// row id gives them (`nemo-moe without trap rows (line 530 H100-SXM5-80GB, line 593 H100-SXM5-80GB)`; the whole
/// id where it has no `line N`).
pub(super) fn without_traps_label(label: &str, traps: &[&RowResult]) -> String {
    let name = |r: &RowResult| match r.id.split_once(" line ") {
        Some((_, rest)) => format!("line {} {}", rest.split(' ').next().unwrap_or(""), r.gpu),
        None => r.id.clone(),
    };
    let out: Vec<String> = traps.iter().map(|r| name(r)).collect();
    format!("{label} without trap rows ({})", out.join(", "))
}

/// The coverage rows ([`coverage`]: inside p10–p90, below, above) of `results`: over the fitted sources (under
/// `mode`, or [`FIT_SOURCES`] for the shipped constants), over every source and per source label weighing the same
/// when whole sources were left out, per source, and per residual class over the fitted sources.
pub(super) fn coverage_rows(results: &[RowResult], mode: &Mode) -> Vec<Coverage> {
    let cov = |label: &str, f: &dyn Fn(&RowResult) -> bool| {
        let t: Vec<(f64, f64, f64)> =
            results.iter().filter(|r| f(r)).map(|r| (r.measured_s, r.p10_s, r.p90_s)).collect();
        coverage(label, &t)
    };
    let fitted_sources = match mode {
        Mode::CrossValidate { fit_sources, .. } | Mode::LeaveSourceOut { fit_sources, .. } => fit_sources.clone(),
        Mode::Fixed(_) => FIT_SOURCES.iter().map(|s| s.to_string()).collect(),
    };
    let mut coverage_rows: Vec<Coverage> = Vec::new();
    coverage_rows.extend(cov("fitted sources", &|r| fitted_sources.iter().any(|s| s == r.source)));
    if matches!(mode, Mode::LeaveSourceOut { .. }) {
        coverage_rows.extend(cov("every source", &|_| true));
    }
    let per_source: Vec<Coverage> = SOURCES.iter().filter_map(|s| cov(s, &|r| r.source == *s)).collect();
    if matches!(mode, Mode::LeaveSourceOut { .. }) && !per_source.is_empty() {
        // Each source label weighing the same: vTrain's 1,440 rows would otherwise be three quarters of the figure.
        let n = per_source.len() as f64;
        let mean = |f: &dyn Fn(&Coverage) -> f64| per_source.iter().map(f).sum::<f64>() / n;
        coverage_rows.push(Coverage {
            label: format!("every source, each of the {} labels weighing the same", per_source.len()),
            rows: per_source.iter().map(|c| c.rows).sum(),
            inside: mean(&|c| c.inside),
            below: mean(&|c| c.below),
            above: mean(&|c| c.above),
        });
    }
    coverage_rows.extend(per_source);
    let class_names: BTreeSet<String> = results.iter().map(|r| r.class.clone()).collect();
    for c in class_names {
        coverage_rows.extend(cov(&format!("class {c} (fitted sources)"), &|r| {
            r.class == c && fitted_sources.iter().any(|s| s == r.source)
        }));
    }
    coverage_rows
}

//! The held-out operator rows of `perfcast eval operators`, each answered three ways (the analytic roofline, the
//! models trained on the uploaded train split, the bundled models) and grouped per (operator class, GPU); the
//! report's rows and subset summaries from those groups.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use super::{parse_neusight, test_files, Row};
use crate::cost::CostBackend;
use crate::eval::neighbours::Neighbours;
use crate::hw::{lookup, GpuSpec, System};
use crate::learn::backend::LearnedBackend;
use crate::learn::fit::{accuracy, Accuracy};
use crate::learn::Registry;
use crate::op::OpShape;
use crate::samples::OpSample;

/// Predictions and measurements of one (operator, GPU) group, µs.
#[derive(Default)]
pub(super) struct Group {
    analytic: Vec<f64>,
    learned: Vec<f64>,
    bundled: Vec<f64>,
    measured: Vec<f64>,
    /// (neighbour reference, learned, measured) of the rows with train neighbours.
    neighbour: (Vec<f64>, Vec<f64>, Vec<f64>),
}

/// What the test rows gave: their groups, the rows not evaluated, (measured, analytic, learned) µs per row for the
/// scatter plot, and the per-row CSV (`operators_rows.csv`).
pub(super) struct Tested {
    /// The evaluated rows grouped by (operator class, GPU).
    pub groups: BTreeMap<(String, String), Group>,
    /// Test rows that could not be evaluated (GPU not in the catalog, a precision it lacks, …).
    pub skipped: u64,
    /// (measured, analytic, learned) µs of every evaluated row, for the scatter plot.
    pub points: Vec<(f64, f64, f64)>,
    /// `operators_rows.csv`, one line per evaluated row.
    pub rows_csv: csv::Writer<Vec<u8>>,
}

/// Answers every row of DATA.md's operator test split ([`test_files`]) with the analytic roofline, the learned
/// models of `models.0` (this evaluation's) and `models.1` (the bundled ones) on a one-GPU system of the row's GPU,
/// and the train-neighbour reference where the row has `neighbours`; `progress` gets one line per file.
pub(super) fn evaluate(
    data: &Path,
    neighbours: &Neighbours,
    models: (&Arc<Registry>, &Arc<Registry>),
    progress: &mut dyn FnMut(&str),
) -> Result<Tested, String> {
    let (snapshot, bundled) = models;
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    let mut skipped = 0u64;
    let mut points: Vec<(f64, f64, f64)> = Vec::new();
    let mut rows_csv = csv::Writer::from_writer(Vec::new());
    let _ = rows_csv.write_record([
        "op",
        "phase",
        "dtype",
        "gpu",
        "d0",
        "d1",
        "d2",
        "d3",
        "measured_us",
        "analytic_us",
        "learned_us",
        "source",
    ]);
    for path in test_files(data) {
        let samples = parse_neusight(&path)?;
        progress(&format!("evaluating {} ({} rows)", path.display(), samples.len()));
        for s in samples {
            let Some(gpu) = lookup(&s.gpu).map(|g| g.spec.clone()) else {
                skipped += 1;
                continue;
            };
            let Some((analytic, learned, fresh)) = answer(&s, &gpu, snapshot, bundled) else {
                skipped += 1;
                continue;
            };
            let g = groups.entry((s.op.as_str().to_string(), gpu.name.clone())).or_default();
            g.analytic.push(analytic.time_us);
            g.learned.push(learned.time_us);
            g.bundled.push(fresh.time_us);
            g.measured.push(s.time_us);
            if let Some(reference) = neighbours.predict(&s, &gpu.name) {
                g.neighbour.0.push(reference);
                g.neighbour.1.push(learned.time_us);
                g.neighbour.2.push(s.time_us);
            }
            points.push((s.time_us, analytic.time_us, learned.time_us));
            let d = s.dims.map(|v| v.to_string());
            let _ = rows_csv.write_record([
                s.op.as_str(),
                s.phase.as_str(),
                s.dtype.as_str(),
                &gpu.name,
                &d[0],
                &d[1],
                &d[2],
                &d[3],
                &format!("{:.3}", s.time_us),
                &format!("{:.3}", analytic.time_us),
                &format!("{:.3}", learned.time_us),
                &learned.source.to_string(),
            ]);
        }
    }
    Ok(Tested { groups, skipped, points, rows_csv })
}

/// The analytic roofline's, the learned models' (`snapshot`) and the bundled models' (`bundled`) times of one test
/// row `s` on a one-GPU system of `gpu` ([`System::single_gpu`]); `None` where any of them cannot answer.
fn answer(
    s: &OpSample,
    gpu: &GpuSpec,
    snapshot: &Arc<Registry>,
    bundled: &Arc<Registry>,
) -> Option<(crate::cost::roofline::AnalyticCost, crate::cost::Timed, crate::cost::Timed)> {
    let shape = OpShape { class: s.op, phase: s.phase, dims: s.dims };
    let Ok(analytic) = crate::cost::roofline::estimate(&shape, s.dtype, gpu) else {
        return None;
    };
    let system = System::single_gpu(gpu.clone());
    let Ok(learned) = LearnedBackend::new(system.clone(), snapshot.clone()).compute(&shape, s.dtype) else {
        return None;
    };
    let Ok(fresh) = LearnedBackend::new(system, bundled.clone()).compute(&shape, s.dtype) else {
        return None;
    };
    Some((analytic, learned, fresh))
}

/// One report [`Row`] per (operator, GPU) group: its analytic, learned and bundled MAPE against the measurements,
/// and on its rows with train neighbours the neighbours' and the learned model's; `seen` marks GPUs with fp32
/// training samples of the operator.
pub(super) fn rows(groups: &BTreeMap<(String, String), Group>, seen: &BTreeMap<String, BTreeSet<String>>) -> Vec<Row> {
    let mut rows = Vec::new();
    for ((op, gpu), g) in groups {
        let (nr, nl, nm) = &g.neighbour;
        rows.push(Row {
            op: op.clone(),
            gpu: gpu.clone(),
            seen: seen.get(op).is_some_and(|s| s.contains(gpu)),
            analytic: accuracy(&g.analytic, &g.measured),
            learned: accuracy(&g.learned, &g.measured),
            bundled: accuracy(&g.bundled, &g.measured),
            neighbour_reference: accuracy(nr, nm),
            learned_on_neighbour_rows: accuracy(nl, nm),
        });
    }
    rows
}

/// The report's subsets (GEMMs on the unseen H100, on all unseen GPUs and on the training GPUs' test shapes;
/// vector ops on unseen and on training GPUs; all rows), each as (label, analytic, learned), (label, bundled) and,
/// where it has rows with train neighbours, (label, neighbour reference, learned on those rows).
#[allow(clippy::type_complexity)]
pub(super) fn summaries(
    groups: &BTreeMap<(String, String), Group>,
    seen: &BTreeMap<String, BTreeSet<String>>,
) -> (Vec<(String, Accuracy, Accuracy)>, Vec<(String, Accuracy)>, Vec<(String, Accuracy, Accuracy)>) {
    // (analytic, learned) and (neighbour reference, learned on those rows) over the groups `f` selects.
    let pick = |f: &dyn Fn(&str, &str, bool) -> bool| {
        let (mut a, mut l, mut b, mut m) = (vec![], vec![], vec![], vec![]);
        let (mut nr, mut nl, mut nm) = (vec![], vec![], vec![]);
        for ((op, gpu), g) in groups {
            let s = seen.get(op).is_some_and(|s| s.contains(gpu));
            if f(op, gpu, s) {
                a.extend(&g.analytic);
                l.extend(&g.learned);
                b.extend(&g.bundled);
                m.extend(&g.measured);
                nr.extend(&g.neighbour.0);
                nl.extend(&g.neighbour.1);
                nm.extend(&g.neighbour.2);
            }
        }
        ((accuracy(&a, &m), accuracy(&l, &m), accuracy(&b, &m)), (accuracy(&nr, &nm), accuracy(&nl, &nm)))
    };
    let gemm = |op: &str| op == "linear" || op == "bmm";
    let mut summary = Vec::new();
    let mut bundled_summary = Vec::new();
    let mut neighbour_summary = Vec::new();
    for (label, f) in [
        (
            "GEMM (linear + bmm), unseen H100",
            Box::new(|op: &str, gpu: &str, _s: bool| gemm(op) && gpu == "H100-SXM5-80GB")
                as Box<dyn Fn(&str, &str, bool) -> bool>,
        ),
        ("GEMM (linear + bmm), all unseen GPUs", Box::new(|op: &str, _g: &str, s: bool| gemm(op) && !s)),
        ("GEMM (linear + bmm), training GPUs' test shapes", Box::new(|op: &str, _g: &str, s: bool| gemm(op) && s)),
        ("vector ops, unseen GPUs", Box::new(|op: &str, _g: &str, s: bool| !gemm(op) && !s)),
        ("vector ops, training GPUs' test shapes", Box::new(|op: &str, _g: &str, s: bool| !gemm(op) && s)),
        ("all test rows", Box::new(|_: &str, _: &str, _: bool| true)),
    ] {
        let ((a, l, b), (nr, nl)) = pick(&*f);
        summary.push((label.to_string(), a, l));
        bundled_summary.push((label.to_string(), b));
        if nr.rows > 0 {
            neighbour_summary.push((label.to_string(), nr, nl));
        }
    }
    (summary, bundled_summary, neighbour_summary)
}

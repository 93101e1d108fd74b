//! The report of `perfcast eval operators`: its markdown tables and the files written under the output directory.

use super::{Options, Report};
use crate::eval::output::pct;
use crate::learn::fit::Accuracy;

/// Writes operators.md ([`markdown`]), operators.json (the report), operators_rows.csv (`rows_csv`, one line per
/// evaluated test row) and operators.svg (the predicted-against-measured scatter of `points`, µs) under `opts.out`,
/// in that order. Errors: the directory or a file that cannot be written.
pub(super) fn write(
    opts: &Options,
    report: &Report,
    rows_csv: csv::Writer<Vec<u8>>,
    points: &[(f64, f64, f64)],
) -> Result<(), String> {
    std::fs::create_dir_all(&opts.out).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    std::fs::write(opts.out.join("operators.md"), markdown(report)).map_err(|e| e.to_string())?;
    std::fs::write(opts.out.join("operators.json"), serde_json::to_vec_pretty(report).unwrap_or_default())
        .map_err(|e| e.to_string())?;
    std::fs::write(opts.out.join("operators_rows.csv"), rows_csv.into_inner().map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    crate::eval::plot::scatter(
        &opts.out.join("operators.svg"),
        "Operators, held-out rows: predicted vs measured",
        points,
    )?;
    Ok(())
}

/// A signed fraction as a percentage with its sign, one decimal (`+4.7 %`).
fn signed_pct(v: f64) -> String {
    format!("{:+.1} %", v * 100.0)
}

/// Markdown rows `| label | rows | MAPE | signed | MAPE | signed |` of (label, first, second) summaries; the row
/// count is the first accuracy's.
fn summary_rows(s: &mut String, rows: &[(String, Accuracy, Accuracy)]) {
    for (label, a, b) in rows {
        s.push_str(&format!(
            "| {label} | {} | {} | {} | {} | {} |\n",
            a.rows,
            pct(a.mape),
            signed_pct(a.signed),
            pct(b.mape),
            signed_pct(b.signed)
        ));
    }
}

/// The report as a markdown table.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "Trained on {} samples of the train split; {} test rows skipped (GPU not in the catalog). \"GPU in training\" \
         means the GPU had fp32 training samples of that operator.\n\n",
        r.training_samples, r.skipped_test_rows
    ));
    s.push_str(concat!(
        "| subset | rows | analytic MAPE | analytic signed | learned MAPE | learned signed | bundled models MAPE ",
        "| bundled signed |\n",
        "|---|---:|---:|---:|---:|---:|---:|---:|\n",
    ));
    for ((label, a, l), (_, b)) in r.summary.iter().zip(&r.bundled_summary) {
        s.push_str(&format!(
            "| {label} | {} | {} | {} | {} | {} | {} | {} |\n",
            a.rows,
            pct(a.mape),
            signed_pct(a.signed),
            pct(l.mape),
            signed_pct(l.signed),
            pct(b.mape),
            signed_pct(b.signed)
        ));
    }
    s.push_str(
        "\n\"learned\": the models this evaluation trains on the train split it uploads; \"bundled models\": the ones a \
         fresh install serves (`models/bundled`, trained on the thinned train split and the other bundled datasets).\n",
    );
    s.push_str(&format!(
        "\nTrain-neighbour reference: test rows with train samples of the same GPU and operator whose every dim is \
         within {}×, answered by those samples' median work-scaled time (a lookup table of the train split; its \
         error is how much the train and test collections disagree at nearly equal shapes).\n\n",
        crate::eval::neighbours::TOLERANCE
    ));
    s.push_str(concat!(
        "| subset | rows with neighbours | neighbour MAPE | neighbour signed ",
        "| learned MAPE on them | learned signed |\n",
        "|---|---:|---:|---:|---:|---:|\n",
    ));
    summary_rows(&mut s, &r.neighbour_summary);
    s.push_str(concat!(
        "\n| operator | GPU | GPU in training | rows | analytic MAPE | analytic signed ",
        "| learned MAPE | learned signed | rows with neighbours | neighbour MAPE (signed) | learned on them |\n",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    ));
    for row in &r.rows {
        let n = &row.neighbour_reference;
        let (nm, lm) = if n.rows > 0 {
            (format!("{} ({})", pct(n.mape), signed_pct(n.signed)), pct(row.learned_on_neighbour_rows.mape))
        } else {
            ("–".to_string(), "–".to_string())
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {nm} | {lm} |\n",
            row.op,
            row.gpu,
            if row.seen { "yes" } else { "**no**" },
            row.analytic.rows,
            pct(row.analytic.mape),
            signed_pct(row.analytic.signed),
            pct(row.learned.mape),
            signed_pct(row.learned.signed),
            n.rows,
        ));
    }
    s
}

//! What every evaluation writes: its markdown summary, its report as JSON and, where it has rows, one CSV line per
//! row — the accuracy of one subset, the unit of those summaries, and the pieces of markdown they share.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::intervals::Coverage;
use crate::learn::fit::{accuracy, Accuracy};

/// Accuracy of one subset of an evaluation's rows (MAPE and signed error over `accuracy.rows` rows).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// What the subset is (`vtrain tp 8`, `all rows`, …).
    pub label: String,
    /// Its MAPE and mean signed error (fractions) and row count.
    pub accuracy: Accuracy,
}

/// The [`Summary`] labelled `label` of the (predicted, measured) pairs `times` (both in one unit, e.g. s): MAPE and
/// mean signed error by [`accuracy`] (positive = predicted too slow). `None` without pairs, so that a report leaves
/// out a subset without rows.
pub fn subset(label: String, times: impl Iterator<Item = (f64, f64)>) -> Option<Summary> {
    let (p, m): (Vec<f64>, Vec<f64>) = times.unzip();
    (!m.is_empty()).then(|| Summary { label, accuracy: accuracy(&p, &m) })
}

/// A fraction as a percentage with one decimal: 0.0537 → `5.4 %`.
pub fn pct(v: f64) -> String {
    format!("{:.1} %", v * 100.0)
}

/// The markdown table of accuracy per subset: its label, rows, MAPE and mean signed error (both in percent, the
/// signed one with its sign; positive = predicted too slow).
pub fn summary_table(summary: &[Summary]) -> String {
    let mut s = String::from("| subset | rows | MAPE | signed error |\n|---|---:|---:|---:|\n");
    for x in summary {
        s.push_str(&format!(
            "| {} | {} | {} | {:+.1} % |\n",
            x.label,
            x.accuracy.rows,
            pct(x.accuracy.mape),
            x.accuracy.signed * 100.0
        ));
    }
    s
}

/// The markdown table of interval coverage: per subset its rows and the fractions measured inside p10–p90
/// (target 80 %), below p10 and above p90 (10 % each).
pub fn coverage_table(coverage: &[Coverage]) -> String {
    let mut s = String::from("| subset | rows | inside p10–p90 | below p10 | above p90 |\n|---|---:|---:|---:|---:|\n");
    for c in coverage {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            c.label,
            c.rows,
            pct(c.inside),
            pct(c.below),
            pct(c.above)
        ));
    }
    s
}

/// Writes `<stem>.md` (`markdown`), `<stem>.json` (`report`, pretty-printed) and, with `rows`, `<stem>_rows.csv`
/// (one line per row, the serde field names as its header) under `out`, creating it; returns the paths written.
/// Errors name the file (or the row that does not serialize).
pub fn write_files<R: Serialize, T: Serialize>(
    out: &Path,
    stem: &str,
    markdown: &str,
    report: &R,
    rows: Option<&[T]>,
) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let write = |name: String, bytes: Vec<u8>| {
        let path = out.join(name);
        std::fs::write(&path, bytes).map(|_| path.clone()).map_err(|e| format!("{}: {e}", path.display()))
    };
    let mut paths = vec![
        write(format!("{stem}.md"), markdown.as_bytes().to_vec())?,
        write(format!("{stem}.json"), serde_json::to_vec_pretty(report).map_err(|e| format!("{stem}.json: {e}"))?)?,
    ];
    if let Some(rows) = rows {
        let mut w = csv::Writer::from_writer(Vec::new());
        for (i, row) in rows.iter().enumerate() {
            w.serialize(row).map_err(|e| format!("{stem}_rows.csv row {}: {e}", i + 1))?;
        }
        paths.push(write(format!("{stem}_rows.csv"), w.into_inner().map_err(|e| e.to_string())?)?);
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        gpu: &'static str,
        measured_us: f64,
    }

    #[test]
    fn writes_the_three_files_with_a_header_from_the_row_fields() {
        let dir = std::env::temp_dir().join(format!("perfcast-output-{}", std::process::id()));
        let rows = [Row { gpu: "H100", measured_us: 166.0 }, Row { gpu: "A100", measured_us: 312.5 }];
        let paths = write_files(&dir, "demo", "# demo\n", &serde_json::json!({"rows": 2}), Some(&rows[..])).unwrap();
        assert_eq!(paths, vec![dir.join("demo.md"), dir.join("demo.json"), dir.join("demo_rows.csv")]);
        assert_eq!(std::fs::read_to_string(dir.join("demo.md")).unwrap(), "# demo\n");
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("demo.json")).unwrap()).unwrap();
        assert_eq!(json["rows"], 2);
        assert_eq!(
            std::fs::read_to_string(dir.join("demo_rows.csv")).unwrap(),
            "gpu,measured_us\nH100,166.0\nA100,312.5\n"
        );
        // Without rows: no CSV.
        let none: Option<&[Row]> = None;
        assert_eq!(write_files(&dir, "bare", "", &1, none).unwrap().len(), 2);
        assert!(!dir.join("bare_rows.csv").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn coverage_rows_in_percent() {
        let c = Coverage {
            label: "dgxc".into(),
            rows: 117,
            inside: 87.0 / 117.0,
            below: 17.0 / 117.0,
            above: 13.0 / 117.0,
        };
        // 87/117 = 74.36 %, 17/117 = 14.53 %, 13/117 = 11.11 %.
        assert!(coverage_table(&[c]).ends_with("| dgxc | 117 | 74.4 % | 14.5 % | 11.1 % |\n"));
        assert_eq!(pct(0.0537), "5.4 %");
    }

    #[test]
    fn summary_rows_in_percent_with_the_sign() {
        // 16 rows, MAPE 0.0587 and signed −0.0233: `5.9 %` and `-2.3 %`.
        let x = Summary { label: "nemo".into(), accuracy: Accuracy { mape: 0.0587, signed: -0.0233, rows: 16 } };
        let t = summary_table(&[x]);
        assert!(t.starts_with("| subset | rows | MAPE | signed error |\n"), "{t}");
        assert!(t.ends_with("| nemo | 16 | 5.9 % | -2.3 % |\n"), "{t}");
    }
}

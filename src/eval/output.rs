//! What every evaluation writes: its markdown summary, its report as JSON and, where it has rows, one CSV line per
//! row — and the accuracy of one subset, the unit of those summaries.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::learn::fit::Accuracy;

/// Accuracy of one subset of an evaluation's rows (MAPE and signed error over `accuracy.rows` rows).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub label: String,
    pub accuracy: Accuracy,
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
}

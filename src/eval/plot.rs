//! The eval reports' predicted-vs-measured plots: [`crate::learn::accuracy_plot`] (the same plot the API draws
//! for a model's validation rows) written to a file.

use std::path::Path;

use crate::learn::accuracy_plot;
use crate::learn::fit::ValidationPoint;

/// Writes the accuracy plot of `points` = (measured, analytic, learned) µs to `path` (log–log axes, y = x line).
pub fn scatter(path: &Path, title: &str, points: &[(f64, f64, f64)]) -> Result<(), String> {
    let pts: Vec<ValidationPoint> = points
        .iter()
        .map(|&(measured_us, analytic_us, predicted_us)| ValidationPoint { measured_us, analytic_us, predicted_us })
        .collect();
    let m: Vec<f64> = pts.iter().map(|p| p.measured_us).collect();
    let mape = |pred: Vec<f64>| crate::learn::fit::accuracy(&pred, &m).mape * 100.0;
    let subtitle = format!(
        "{} rows; MAPE learned {:.1} %, analytic {:.1} %",
        pts.len(),
        mape(pts.iter().map(|p| p.predicted_us).collect()),
        mape(pts.iter().map(|p| p.analytic_us).collect()),
    );
    let svg = accuracy_plot::svg(title, &subtitle, &pts).map_err(|e| format!("plot {}: {e}", path.display()))?;
    std::fs::write(path, svg).map_err(|e| format!("plot {}: {e}", path.display()))
}

//! Predicted-vs-measured scatter plots (plotters, SVG).

use std::path::Path;

use plotters::prelude::*;

/// Draws `points` = (measured, analytic, learned) µs on log–log axes with the y = x diagonal; at most 4,000
/// points (evenly subsampled) to keep the SVG small.
pub fn scatter(path: &Path, title: &str, points: &[(f64, f64, f64)]) -> Result<(), String> {
    let step = (points.len() / 4000).max(1);
    let pts: Vec<(f64, f64, f64)> =
        points.iter().step_by(step).copied().filter(|p| p.0 > 0.0 && p.1 > 0.0 && p.2 > 0.0).collect();
    let lo = pts.iter().flat_map(|p| [p.0, p.1, p.2]).fold(f64::INFINITY, f64::min).max(1e-3);
    let hi = pts.iter().flat_map(|p| [p.0, p.1, p.2]).fold(0.0_f64, f64::max).max(lo * 10.0);
    let root = SVGBackend::new(path, (900, 800)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("plot {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())
        .map_err(|e| err(&e))?;
    chart.configure_mesh().x_desc("measured µs").y_desc("predicted µs").draw().map_err(|e| err(&e))?;
    chart.draw_series(LineSeries::new([(lo, lo), (hi, hi)], BLACK.stroke_width(1))).map_err(|e| err(&e))?;
    chart
        .draw_series(pts.iter().map(|p| Circle::new((p.0, p.1), 2, RGBColor(200, 120, 40).mix(0.35).filled())))
        .map_err(|e| err(&e))?
        .label("analytic")
        .legend(|(x, y)| Circle::new((x, y), 4, RGBColor(200, 120, 40).filled()));
    chart
        .draw_series(pts.iter().map(|p| Circle::new((p.0, p.2), 2, RGBColor(30, 90, 200).mix(0.35).filled())))
        .map_err(|e| err(&e))?
        .label("learned")
        .legend(|(x, y)| Circle::new((x, y), 4, RGBColor(30, 90, 200).filled()));
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

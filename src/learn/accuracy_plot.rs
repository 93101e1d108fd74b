//! The accuracy plot of a correction model: predicted vs measured times on log–log axes with the y = x line, the
//! analytic and the learned predictions as two series, a title and a subtitle above (plotters, SVG, in memory).
//! `perfcast eval operators` writes it for the test split and `GET /v1/regressors/{key}/plot.svg` draws it for a
//! version's stored validation rows, so both show the same picture.

use plotters::prelude::*;

use super::fit::ValidationPoint;

/// Width × height of the plot, pixels.
pub const SIZE: (u32, u32) = (900, 800);

/// The x axis' label.
pub const X_AXIS_LABEL: &str = "measured µs";

/// The y axis' label.
pub const Y_AXIS_LABEL: &str = "predicted µs";

/// Most points drawn per series (more are evenly subsampled) to keep the SVG small.
pub const MAX_POINTS: usize = 4000;

const ANALYTIC: RGBColor = RGBColor(200, 120, 40);
const LEARNED: RGBColor = RGBColor(30, 90, 200);

/// Plotters could not draw the plot (a backend error: does not happen with the in-memory SVG backend).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the accuracy plot: {0}")]
pub struct PlotError(String);

/// The axes' range (µs) covering every positive time of `points`, at least a decade wide; 1–10 µs without any.
fn range(points: &[ValidationPoint]) -> (f64, f64) {
    let times = points.iter().flat_map(|p| [p.measured_us, p.analytic_us, p.predicted_us]);
    let (lo, hi) = times
        .filter(|t| t.is_finite() && *t > 0.0)
        .fold((f64::INFINITY, 0.0_f64), |(lo, hi), t| (lo.min(t), hi.max(t)));
    if lo.is_finite() {
        let lo = lo.max(1e-3);
        (lo, hi.max(lo * 10.0))
    } else {
        (1.0, 10.0)
    }
}

/// A tick label: the value without a trailing `.0` (`100000`, `0.5`), at most 4 significant digits.
fn tick(v: f64) -> String {
    let rounded = format!("{v:.4e}").parse::<f64>().unwrap_or(v);
    format!("{rounded}")
}

/// The plot of `points` as an SVG document of [`SIZE`]: `title` on the first line (e.g. the model and its MAPE),
/// `subtitle` on the second (omitted when empty); points with a non-positive time are left out, at most
/// [`MAX_POINTS`] are drawn.
///
/// Errors: [`PlotError`] when plotters fails.
pub fn svg(title: &str, subtitle: &str, points: &[ValidationPoint]) -> Result<String, PlotError> {
    let step = points.len().div_ceil(MAX_POINTS).max(1);
    let pts: Vec<ValidationPoint> = points
        .iter()
        .step_by(step)
        .copied()
        .filter(|p| p.measured_us > 0.0 && p.analytic_us > 0.0 && p.predicted_us > 0.0)
        .collect();
    let (lo, hi) = range(&pts);
    let mut buf = String::new();
    {
        let err = |e: &dyn std::fmt::Display| PlotError(e.to_string());
        let root = SVGBackend::with_string(&mut buf, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut area = root.titled(title, ("sans-serif", 22)).map_err(|e| err(&e))?;
        if !subtitle.is_empty() {
            area = area.titled(subtitle, ("sans-serif", 16)).map_err(|e| err(&e))?;
        }
        let mut chart = ChartBuilder::on(&area)
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc(X_AXIS_LABEL)
            .y_desc(Y_AXIS_LABEL)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(|e| err(&e))?;
        chart
            .draw_series(LineSeries::new([(lo, lo), (hi, hi)], BLACK.stroke_width(1)))
            .map_err(|e| err(&e))?
            .label("y = x")
            .legend(|(x, y)| PathElement::new([(x - 8, y), (x + 8, y)], BLACK));
        for (name, colour, pick) in [
            ("analytic", ANALYTIC, (|p: &ValidationPoint| p.analytic_us) as fn(&ValidationPoint) -> f64),
            ("learned", LEARNED, |p: &ValidationPoint| p.predicted_us),
        ] {
            chart
                .draw_series(pts.iter().map(|p| Circle::new((p.measured_us, pick(p)), 2, colour.mix(0.35).filled())))
                .map_err(|e| err(&e))?
                .label(name)
                .legend(move |(x, y)| Circle::new((x, y), 4, colour.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(m: f64, a: f64, p: f64) -> ValidationPoint {
        ValidationPoint { measured_us: m, analytic_us: a, predicted_us: p }
    }

    #[test]
    fn range_covers_every_positive_time_and_a_decade() {
        assert_eq!(range(&[point(5.0, 2.0, 400.0), point(-1.0, 0.0, 3.0)]), (2.0, 400.0));
        assert_eq!(range(&[point(5.0, 5.0, 5.0)]), (5.0, 50.0));
        assert_eq!(range(&[]), (1.0, 10.0));
    }

    #[test]
    fn draws_titles_axes_legend_and_one_circle_per_point_and_series() {
        let pts: Vec<ValidationPoint> = (1..=30).map(|i| point(i as f64, 2.0 * i as f64, 1.1 * i as f64)).collect();
        let svg = svg("linear.fwd.fp16 v2: MAPE 10.0 %", "30 validation rows", &pts).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let texts: Vec<&str> =
            doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).map(str::trim).collect();
        for text in ["linear.fwd.fp16 v2: MAPE 10.0 %", "30 validation rows", X_AXIS_LABEL, Y_AXIS_LABEL] {
            assert!(texts.contains(&text), "{text} missing from {texts:?}");
        }
        for series in ["analytic", "learned", "y = x"] {
            assert!(texts.contains(&series), "legend entry {series} missing from {texts:?}");
        }
        // Ticks without a trailing ".0".
        assert!(texts.contains(&"10") && texts.contains(&"20"), "{texts:?}");
        assert!(!texts.iter().any(|t| t.ends_with(".0")), "{texts:?}");
        // 30 points × 2 series, plus the two circles of the legend.
        assert_eq!(doc.descendants().filter(|n| n.has_tag_name("circle")).count(), 62);
    }

    #[test]
    fn ticks_read_as_plain_numbers() {
        assert_eq!(tick(100000.0), "100000");
        assert_eq!(tick(0.5), "0.5");
        assert_eq!(tick(20.000000000000004), "20");
    }

    #[test]
    fn no_points_still_draws_the_axes() {
        let svg = svg("empty", "", &[]).unwrap();
        assert!(svg.contains(X_AXIS_LABEL) && roxmltree::Document::parse(&svg).is_ok());
        assert_eq!(svg.matches("<circle").count(), 2);
    }
}

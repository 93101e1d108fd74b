//! The throughput–interactivity trade-off of serving configurations: the Pareto front of generated tokens per
//! second per GPU (what the deployment costs) against tokens per second per user (1000 / TPOT in ms: how fast one
//! answer streams) — the chart NVIDIA's aiconfigurator and SemiAnalysis' InferenceMAX draw — as points and as an
//! SVG (plotters).
//!
//! A point is on the front when no other point is at least as good on both axes and better on one. The front is
//! returned sorted by tokens/s per user, ascending (so tokens/s per GPU descends along it).

use plotters::prelude::*;
use serde::Serialize;
use utoipa::ToSchema;

use crate::hw::Precision;

/// One configuration at one concurrency.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct ParetoPoint {
    pub tp: u32,
    pub pp: u32,
    pub ep: u32,
    /// Attention data-parallel ranks.
    pub attention_dp: u32,
    pub precision: Precision,
    /// Clients per instance.
    pub concurrency: u32,
    /// Generated tokens per second one request sees while decoding: 1000 / TPOT (ms).
    pub tokens_per_s_per_user: f64,
    /// Generated tokens per second per GPU.
    pub output_tokens_per_s_per_gpu: f64,
    /// Time to first token and per output token, ms.
    pub ttft_ms: f64,
    pub tpot_ms: f64,
}

/// The non-dominated points of `points` (maximize both rates), sorted by tokens/s per user ascending; ties keep the
/// first.
pub fn front(points: &[ParetoPoint]) -> Vec<ParetoPoint> {
    let mut sorted: Vec<ParetoPoint> = points
        .iter()
        .copied()
        .filter(|p| p.tokens_per_s_per_user.is_finite() && p.output_tokens_per_s_per_gpu.is_finite())
        .collect();
    // By per-user rate descending (per-GPU descending among equals): a point is on the front iff its per-GPU rate
    // beats every point seen before it.
    sorted.sort_by(|a, b| {
        b.tokens_per_s_per_user
            .total_cmp(&a.tokens_per_s_per_user)
            .then(b.output_tokens_per_s_per_gpu.total_cmp(&a.output_tokens_per_s_per_gpu))
    });
    let mut best = f64::NEG_INFINITY;
    let mut out = Vec::new();
    for p in sorted {
        if p.output_tokens_per_s_per_gpu > best {
            best = p.output_tokens_per_s_per_gpu;
            out.push(p);
        }
    }
    out.reverse();
    out
}

/// Plotters could not draw the chart (does not happen with the in-memory SVG backend).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the Pareto front: {0}")]
pub struct PlotError(String);

/// Width × height of the chart, pixels.
pub const SIZE: (u32, u32) = (900, 650);

/// Every point (grey) and the front (a blue line through its points) as an SVG document of [`SIZE`], titled
/// `title`.
pub fn svg(title: &str, points: &[ParetoPoint], front: &[ParetoPoint]) -> Result<String, PlotError> {
    let x_max = points.iter().map(|p| p.tokens_per_s_per_user).fold(1.0, f64::max) * 1.05;
    let y_max = points.iter().map(|p| p.output_tokens_per_s_per_gpu).fold(1.0, f64::max) * 1.05;
    let mut buf = String::new();
    {
        let err = |e: &dyn std::fmt::Display| PlotError(e.to_string());
        let root = SVGBackend::with_string(&mut buf, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let area = root.titled(title, ("sans-serif", 20)).map_err(|e| err(&e))?;
        let mut chart = ChartBuilder::on(&area)
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("tokens/s per user (1000 / TPOT ms)")
            .y_desc("output tokens/s per GPU")
            .draw()
            .map_err(|e| err(&e))?;
        let grey = RGBColor(170, 170, 170);
        chart
            .draw_series(
                points
                    .iter()
                    .map(|p| Circle::new((p.tokens_per_s_per_user, p.output_tokens_per_s_per_gpu), 3, grey.filled())),
            )
            .map_err(|e| err(&e))?
            .label("configuration × concurrency")
            .legend(move |(x, y)| Circle::new((x, y), 3, grey.filled()));
        let blue = RGBColor(30, 90, 200);
        let line: Vec<(f64, f64)> =
            front.iter().map(|p| (p.tokens_per_s_per_user, p.output_tokens_per_s_per_gpu)).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), blue.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label("Pareto front")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], blue.stroke_width(2)));
        chart.draw_series(line.iter().map(|&xy| Circle::new(xy, 4, blue.filled()))).map_err(|e| err(&e))?;
        chart
            .configure_series_labels()
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

    fn p(user: f64, gpu: f64) -> ParetoPoint {
        ParetoPoint {
            tp: 1,
            pp: 1,
            ep: 1,
            attention_dp: 1,
            precision: Precision::Bf16,
            concurrency: 1,
            tokens_per_s_per_user: user,
            output_tokens_per_s_per_gpu: gpu,
            ttft_ms: 1.0,
            tpot_ms: 1000.0 / user,
        }
    }

    #[test]
    fn the_front_keeps_the_non_dominated_points() {
        // (user, gpu): (10, 100) and (50, 60) and (80, 20) trade off; (40, 50) is dominated by (50, 60); (10, 90)
        // by (10, 100); (80, 10) by (80, 20).
        let pts = [p(40.0, 50.0), p(10.0, 100.0), p(80.0, 20.0), p(50.0, 60.0), p(10.0, 90.0), p(80.0, 10.0)];
        let f = front(&pts);
        let got: Vec<(f64, f64)> = f.iter().map(|x| (x.tokens_per_s_per_user, x.output_tokens_per_s_per_gpu)).collect();
        assert_eq!(got, vec![(10.0, 100.0), (50.0, 60.0), (80.0, 20.0)]);
        let doc = svg("test", &pts, &f).unwrap();
        let xml = roxmltree::Document::parse(&doc).unwrap();
        assert_eq!(xml.root_element().tag_name().name(), "svg");
        assert!(doc.contains("Pareto front"));
    }
}

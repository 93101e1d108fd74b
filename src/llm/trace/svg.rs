//! A [`Trace`] as an SVG Gantt chart (plotters): one row per stage and lane (the lanes a stage uses), time in ms
//! on the x axis, one colour per [`SpanKind`] with a legend below the chart.

use plotters::prelude::*;

use super::{Lane, SpanKind, Trace};

/// The x axis' label.
pub const X_AXIS_LABEL: &str = "time (ms)";

/// Plotters could not draw the chart (a backend error: does not happen with the in-memory SVG backend).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the timeline: {0}")]
pub struct RenderError(String);

fn colour(kind: SpanKind) -> RGBColor {
    match kind {
        SpanKind::Forward => RGBColor(66, 133, 244),
        SpanKind::Backward => RGBColor(52, 168, 83),
        SpanKind::Recompute => RGBColor(251, 188, 5),
        SpanKind::TpCollective => RGBColor(171, 71, 188),
        SpanKind::EpAllToAll => RGBColor(233, 30, 99),
        SpanKind::Send => RGBColor(234, 67, 53),
        SpanKind::ZeroCollective => RGBColor(0, 172, 193),
        SpanKind::GradReduce => RGBColor(255, 112, 67),
        SpanKind::EmbeddingGrad => RGBColor(141, 110, 99),
        SpanKind::Optimizer => RGBColor(96, 125, 139),
        SpanKind::ParamGather => RGBColor(120, 144, 156),
    }
}

/// `trace` as an SVG document of `width` pixels (its height follows from the rows).
///
/// Errors: [`RenderError`] when plotters fails.
pub fn svg(trace: &Trace, width: u32) -> Result<String, RenderError> {
    let rows: Vec<(u32, Lane)> = trace
        .stages
        .iter()
        .flat_map(|st| Lane::ALL.into_iter().filter(|l| st.spans.iter().any(|s| s.lane == *l)).map(|l| (st.stage, l)))
        .collect();
    let kinds: Vec<SpanKind> = SpanKind::ALL
        .into_iter()
        .filter(|k| trace.stages.iter().flat_map(|st| &st.spans).any(|s| s.kind == *k))
        .collect();
    let n = rows.len().max(1);
    let legend_h = 30 * kinds.len().div_ceil(5).max(1) as u32 + 10;
    let height = 120 + 20 * n as u32 + legend_h;
    let end_ms = trace.extent_s().1 * 1e3;
    let mut buf = String::new();
    {
        let err = |e: &dyn std::fmt::Display| RenderError(e.to_string());
        let root = SVGBackend::with_string(&mut buf, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let (top, bottom) = root.split_vertically(height - legend_h);
        let caption = format!(
            "training iteration: {:.3} ms ({} schedule, {} micro-batches)",
            trace.iteration_s * 1e3,
            trace.model,
            trace.micro_batches
        );
        let mut chart = ChartBuilder::on(&top)
            .caption(caption, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(150)
            .build_cartesian_2d(0.0..end_ms.max(1e-9), (0..n).into_segmented())
            .map_err(|e| err(&e))?;
        let label = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(r) | SegmentValue::Exact(r) if *r < n => {
                rows.get(n - 1 - *r).map(|(s, l)| format!("stage {s} {}", l.name())).unwrap_or_default()
            }
            SegmentValue::CenterOf(_) | SegmentValue::Exact(_) => String::new(),
            SegmentValue::Last => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n + 1)
            .y_label_formatter(&label)
            .x_desc(X_AXIS_LABEL)
            .draw()
            .map_err(|e| err(&e))?;
        for kind in &kinds {
            let boxes = rows.iter().enumerate().flat_map(|(r, (stage, lane))| {
                let y = n - 1 - r;
                trace
                    .stages
                    .iter()
                    .filter(move |st| st.stage == *stage)
                    .flat_map(|st| &st.spans)
                    .filter(move |s| s.kind == *kind && s.lane == *lane)
                    .map(move |s| {
                        let (a, b): ((f64, SegmentValue<usize>), (f64, SegmentValue<usize>)) =
                            ((s.start_s * 1e3, SegmentValue::Exact(y)), (s.end_s * 1e3, SegmentValue::Exact(y + 1)));
                        Rectangle::new([a, b], colour(*kind).filled())
                    })
            });
            chart.draw_series(boxes).map_err(|e| err(&e))?;
        }
        // The legend, in rows of five below the chart.
        for (i, kind) in kinds.iter().enumerate() {
            let (x, y) = (20 + 230 * (i % 5) as i32, 10 + 30 * (i / 5) as i32);
            bottom.draw(&Rectangle::new([(x, y), (x + 18, y + 14)], colour(*kind).filled())).map_err(|e| err(&e))?;
            bottom.draw(&Text::new(kind.label(), (x + 24, y), ("sans-serif", 14))).map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok(buf)
}

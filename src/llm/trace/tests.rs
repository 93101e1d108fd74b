//! The timeline against hand-computed placements and against the prediction it comes from.

use super::chrome::chrome_trace;
use super::svg::{svg, X_AXIS_LABEL};
use super::*;
use crate::cost::AnalyticBackend;
use crate::hw::Precision;
use crate::llm::predict::predict_traced;
use crate::llm::predict_tests::{eq7_config, gpt20b, par, preset, small_system, FixedBackend};
use crate::llm::validate::validate;

fn find(t: &Trace, stage: usize, kind: SpanKind, chunk: u32, micro: u32) -> &Span {
    t.stages[stage].spans.iter().find(|s| s.kind == kind && s.chunk == Some(chunk) && s.micro == Some(micro)).unwrap()
}

fn assert_span_is_iteration(t: &Trace, iteration_s: f64) {
    let (start, end) = t.extent_s();
    assert_eq!(start, 0.0);
    assert!(((end - iteration_s) / iteration_s).abs() < 1e-9, "span {end} vs iteration {iteration_s}");
}

#[test]
fn first_passes_by_hand_with_fixed_operator_times() {
    // `predict_tests::eq7_on_a_small_configuration_with_fixed_operator_times`: stage 0's forward is 348 µs =
    // computation 300 + embedding 10 + MP all-reduce 7·5 = 35 + send 3; eq. 7 slots of Max_Fwd = 348 µs.
    let (pred, t) = predict_traced(&eq7_config(), &FixedBackend(small_system())).unwrap();
    let us = |s: f64| (s * 1e12).round() / 1e6;
    let f0 = find(&t, 0, SpanKind::Forward, 0, 0);
    assert_eq!((us(f0.start_s), us(f0.end_s)), (0.0, 310.0));
    let tp0 = find(&t, 0, SpanKind::TpCollective, 0, 0);
    assert_eq!((us(tp0.start_s), us(tp0.end_s)), (310.0, 345.0));
    let send0 = find(&t, 0, SpanKind::Send, 0, 0);
    assert_eq!((us(send0.start_s), us(send0.end_s)), (345.0, 348.0));
    assert_eq!(us(send0.end_s), us(pred.stages[0].forward_s));
    // Stage 1's first forward starts when stage 0's forward computation and its send are done.
    let f1 = find(&t, 1, SpanKind::Forward, 0, 0);
    assert_eq!(us(f1.start_s), us(f0.end_s - f0.start_s + tp0.end_s - tp0.start_s) + us(send0.end_s - send0.start_s));
    assert_eq!(us(f1.start_s), 348.0);
    // Eq. 7: the span is (m − 1 + pp)·(F + B) + first-stage reduction + update = 4054 µs.
    assert_eq!(t.model, "eq7");
    assert_span_is_iteration(&t, pred.iteration_time_s);
    let names: Vec<&str> = t.stages[0].spans.iter().map(|s| s.kind.label()).collect();
    for k in ["gradient reduction", "optimizer step", "parameter all-gather"] {
        assert!(names.contains(&k), "{k} missing from {names:?}");
    }
    // Every forward, backward per micro-batch and stage: 2 · m · pp compute spans.
    let compute = t.stages.iter().flat_map(|s| &s.spans).filter(|s| s.lane == Lane::Compute).count();
    assert_eq!(compute, 2 * 3 * 2);
}

fn gpt20b_traced(p: serde_json::Value) -> (crate::llm::TrainingPrediction, Trace) {
    let s = preset("perlmutter-a100-40g");
    let cfg = validate(&gpt20b(), &par(p), Precision::Fp16, s.total_gpus()).unwrap();
    predict_traced(&cfg, &AnalyticBackend::new(s)).unwrap()
}

#[test]
fn the_span_is_the_iteration_time_for_every_schedule() {
    for p in [
        serde_json::json!({"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4, "grad_accum": 16}),
        serde_json::json!({"tp": 4, "pp": 2, "dp": 16, "micro_batch": 1, "grad_accum": 16, "virtual_stages": 2,
            "overlap_grad_reduce": true, "distributed_optimizer": true, "recompute": "full"}),
        serde_json::json!({"tp": 4, "pp": 2, "dp": 16, "micro_batch": 1, "grad_accum": 8, "zero_stage": 3}),
    ] {
        let (pred, t) = gpt20b_traced(p.clone());
        assert_span_is_iteration(&t, pred.iteration_time_s);
        // No span ends before it starts; a chrome event per span.
        assert!(t.stages.iter().flat_map(|s| &s.spans).all(|s| s.end_s >= s.start_s), "{p}");
        let spans: usize = t.stages.iter().map(|s| s.spans.len()).sum();
        let x = chrome_trace(&t).trace_events.iter().filter(|e| e.ph == "X").count();
        assert_eq!(x, spans);
    }
}

#[test]
fn overlapped_gradient_reduction_overlaps_the_last_backward() {
    let (_, t) = gpt20b_traced(serde_json::json!({"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4, "grad_accum": 16,
        "overlap_grad_reduce": true}));
    assert_eq!(t.model, "simulated");
    for st in &t.stages {
        let last_bwd = st.spans.iter().filter(|s| s.kind == SpanKind::Backward).map(|s| s.end_s).fold(0.0, f64::max);
        let sync = st.spans.iter().find(|s| s.kind == SpanKind::GradReduce).unwrap();
        if st.stage == 0 {
            // The first stage reduces bucket by bucket during its last backward.
            assert!(sync.start_s < last_bwd && sync.end_s > sync.start_s, "stage 0: {sync:?} vs {last_bwd}");
        } else {
            // Megatron-Core reduces the other stages' gradients in one bucket (off the critical path): after it.
            assert!(sync.start_s >= last_bwd - 1e-12, "stage {}: {sync:?} vs {last_bwd}", st.stage);
        }
    }
    // Without overlap it follows the stage's last backward.
    let (_, t) = gpt20b_traced(serde_json::json!({"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4, "grad_accum": 16}));
    for st in &t.stages {
        let last = st.spans.iter().filter(|s| s.lane == Lane::Compute).map(|s| s.end_s).fold(0.0, f64::max);
        let sync = st.spans.iter().find(|s| s.kind == SpanKind::GradReduce).unwrap();
        assert!(sync.start_s >= last - 1e-12);
    }
}

#[test]
fn interleaving_shows_both_model_chunks() {
    let (_, t) = gpt20b_traced(serde_json::json!({"tp": 4, "pp": 2, "dp": 16, "micro_batch": 1, "grad_accum": 16,
        "virtual_stages": 2}));
    for st in &t.stages {
        for c in 0..2 {
            assert_eq!(st.spans.iter().filter(|s| s.kind == SpanKind::Forward && s.chunk == Some(c)).count(), 16);
        }
        // One compute stream: its passes never overlap.
        let mut passes: Vec<&Span> = st.spans.iter().filter(|s| s.lane == Lane::Compute).collect();
        passes.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        assert!(passes.windows(2).all(|w| w[1].start_s >= w[0].end_s - 1e-12));
    }
    assert_eq!(find(&t, 0, SpanKind::Forward, 1, 0).name(2), "F c1 mb0");
}

#[test]
fn the_svg_has_the_axis_the_rows_and_the_legend() {
    let (_, t) = predict_traced(&eq7_config(), &FixedBackend(small_system())).unwrap();
    let doc = svg(&t, 1200).unwrap();
    assert!(doc.starts_with("<svg") || doc.starts_with("<?xml"));
    for text in [X_AXIS_LABEL, "forward", "backward", "pipeline send", "optimizer step", "stage 1 compute"] {
        assert!(doc.contains(text), "{text} missing");
    }
}

//! `POST /v1/predictions/training/timeline` through the real router and a real SQLite file: the Chrome trace
//! spans the prediction, has a process per stage and shows overlap as overlap; the SVG is XML with an axis and a
//! legend.

use crate::common::{example_requests, TestApp};
use serde_json::{json, Value};

const PATH: &str = "/v1/predictions/training/timeline";

fn example(name: &str) -> Value {
    example_requests().into_iter().find(|(f, _)| f.contains(name)).map(|(_, r)| r).unwrap()
}

/// The complete events of a trace.
fn spans(trace: &Value) -> Vec<&Value> {
    trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "X").collect()
}

fn end(e: &Value) -> f64 {
    e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap()
}

#[tokio::test]
async fn chrome_trace_spans_the_predicted_iteration_with_a_process_per_stage() {
    let app = TestApp::new().await;
    for file in ["gpt-20b_pp4-tp4-dp8", "llama-13b_pp4-tp8-dp2"] {
        let req = example(file);
        let pred = app.post_json("/v1/predictions/training", &req).await.json();
        let iteration_us = pred["iteration_time_s"].as_f64().unwrap() * 1e6;
        let r = app.post_json(PATH, &req).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.content_type, "application/json");
        let trace = r.json();
        let x = spans(&trace);
        let first = x.iter().map(|e| e["ts"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
        let last = x.iter().map(|e| end(e)).fold(0.0, f64::max);
        assert_eq!(first, 0.0, "{file}");
        assert!(((last - first - iteration_us) / iteration_us).abs() < 1e-6, "{file}: {last} vs {iteration_us}");
        // One process per stage, named, with its forward and backward passes.
        let pp = req["parallelism"]["pp"].as_u64().unwrap();
        let events = trace["traceEvents"].as_array().unwrap();
        for stage in 0..pp {
            let named = events.iter().any(|e| {
                e["ph"] == "M"
                    && e["name"] == "process_name"
                    && e["pid"] == stage
                    && e["args"]["name"] == format!("stage {stage}")
            });
            assert!(named, "{file}: stage {stage} has no process_name");
            for cat in ["forward", "backward", "optimizer"] {
                assert!(x.iter().any(|e| e["pid"] == stage && e["cat"] == cat), "{file}: stage {stage} has no {cat}");
            }
        }
        assert!(events.iter().any(|e| e["name"] == "thread_name" && e["args"]["name"] == "dp collectives"));
    }
}

#[tokio::test]
async fn overlapped_gradient_reduction_overlaps_the_first_stages_last_backward() {
    let app = TestApp::new().await;
    let mut req = example("gpt-20b_pp4-tp4-dp8");
    req["parallelism"]["overlap_grad_reduce"] = json!(true);
    let trace = app.post_json(&format!("{PATH}?format=chrome"), &req).await.json();
    let x = spans(&trace);
    for stage in 0..4 {
        let last_bwd =
            x.iter().filter(|e| e["pid"] == stage && e["cat"] == "backward").map(|e| end(e)).fold(0.0, f64::max);
        let sync = x.iter().find(|e| e["pid"] == stage && e["cat"] == "grad_reduce").unwrap();
        if stage == 0 {
            // The first stage reduces bucket by bucket during its last backward.
            assert!(sync["ts"].as_f64().unwrap() < last_bwd, "stage {stage}: {sync} starts after {last_bwd}");
        } else {
            // Megatron-Core reduces the later stages' gradients in one bucket, after their last backward (off the
            // critical path: they finish before the first stage).
            assert!(sync["ts"].as_f64().unwrap() >= last_bwd - 1e-6, "stage {stage}: {sync} before {last_bwd}");
        }
        assert_ne!(sync["tid"], x.iter().find(|e| e["cat"] == "backward").unwrap()["tid"], "own track");
    }
}

#[tokio::test]
async fn interleaving_shows_both_model_chunks() {
    let app = TestApp::new().await;
    let mut req = example("gpt-20b_pp4-tp4-dp8");
    req["parallelism"] = json!({"tp": 4, "pp": 2, "dp": 16, "micro_batch": 1, "grad_accum": 16, "virtual_stages": 2});
    let r = app.post_json(PATH, &req).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let trace = r.json();
    let x = spans(&trace);
    for chunk in 0..2 {
        assert!(x.iter().any(|e| e["cat"] == "forward" && e["args"]["chunk"] == chunk), "no chunk {chunk}");
    }
    assert!(x.iter().any(|e| e["name"] == "F c1 mb0"));
}

#[tokio::test]
async fn svg_is_xml_with_a_time_axis_and_a_legend() {
    let app = TestApp::new().await;
    let r = app.post_json(&format!("{PATH}?format=svg"), &example("gpt-20b_pp4-tp4-dp8")).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.content_type, "image/svg+xml");
    let text = String::from_utf8(r.body).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).map(str::trim).collect();
    for want in ["time (ms)", "forward", "backward", "pipeline send", "gradient reduction", "optimizer step"] {
        assert!(texts.contains(&want), "no text {want:?}");
    }
    assert!(texts.iter().any(|t| t.starts_with("stage 3 ")), "no row label of stage 3");
}

#[tokio::test]
async fn an_unknown_format_is_a_problem_naming_format() {
    let app = TestApp::new().await;
    let req = example("gpt-20b_pp4-tp4-dp8");
    let p = app.post_json(&format!("{PATH}?format=png"), &req).await.problem(400);
    assert_eq!(p["errors"][0]["field"], "format");
    let p = app.post_json(&format!("{PATH}?formt=svg"), &req).await.problem(400);
    assert_eq!(p["errors"][0]["field"], "formt");
    // A bad body is the prediction's problem.
    let mut bad = req.clone();
    bad["parallelism"]["tp"] = json!(3);
    app.post_json(PATH, &bad).await.problem(422);
}

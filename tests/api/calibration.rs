//! The calibration pipeline end to end through the real router: a system whose links are datasheet figures is
//! predicted with a warning that its network is uncalibrated; uploading nccl-tests results measured on it and
//! calibrating moves its training predictions the way the measured bandwidth says, and the warning goes.

use serde_json::{json, Value};

use crate::common::TestApp;

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures").join(path)).unwrap()
}

/// A one-node H100 system declaring an intra-node bandwidth of `intra_gbs` (a datasheet figure).
fn system(name: &str, intra_gbs: f64) -> Value {
    json!({"name": name, "gpu": "H100-SXM5-80GB", "gpus_per_node": 8, "nodes": 2,
        "intra_node": {"kind": "nvswitch", "bandwidth_gbs": intra_gbs, "latency_us": 2.0},
        "inter_node": {"kind": "infiniband-ndr", "bandwidth_gbs": 400, "latency_us": 5.0, "nics": 8}})
}

/// tp 8 within one node: every tensor-parallel all-reduce of 2 · 4096 tokens · 8192 · 2 bytes crosses NVSwitch.
fn request(system: &str) -> Value {
    json!({"system": system, "precision": "bf16",
        "model": {"layers": 4, "hidden": 8192, "heads": 64, "seq_len": 4096, "vocab": 32000, "attention": "flash"},
        "parallelism": {"tp": 8, "micro_batch": 2, "grad_accum": 2, "zero_stage": 0}})
}

/// The forward MP all-reduce's time per call, µs.
fn allreduce_us(p: &Value) -> f64 {
    p["operators"].as_array().unwrap().iter().find(|o| o["name"] == "MP_Allreduce" && o["phase"] == "fwd").unwrap()
        ["time_us"]
        .as_f64()
        .unwrap()
}

fn uncalibrated_warning(p: &Value) -> Option<String> {
    p["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .find(|w| w.contains("uncalibrated"))
        .map(String::from)
}

async fn predict(app: &TestApp, name: &str) -> Value {
    let r = app.post_json("/v1/predictions/training", &request(name)).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

/// Uploads the single-node 8× H100 nccl-tests log to `name` and calibrates it; returns the 8-rank all-reduce fit
/// (latency µs, bus bandwidth GB/s).
async fn calibrate(app: &TestApp, name: &str) -> (f64, f64) {
    // The same log for every system, a trailing newline more for one of them: uploads are deduplicated by content.
    let mut log = fixture("nccl-tests/xxrjun_nccl_N1_G8_H100_single_node.log");
    log.extend(std::iter::repeat_n(b'\n', 1 + name.starts_with("fast") as usize));
    let up = app.post_bytes(&format!("/v1/profiles?system={name}"), log, &[]).await;
    assert_eq!(up.status, 201, "{}", String::from_utf8_lossy(&up.body));
    let cal = app.post_json(&format!("/v1/systems/{name}/calibrate"), &json!({})).await;
    assert_eq!(cal.status, 200, "{}", String::from_utf8_lossy(&cal.body));
    let cal = cal.json();
    let g = cal["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["collective"] == "all_reduce" && g["ranks"] == 8)
        .unwrap()
        .clone();
    (g["fit"]["latency_us"].as_f64().unwrap(), g["fit"]["busbw_gbs"].as_f64().unwrap())
}

#[tokio::test]
async fn uploaded_nccl_tests_move_training_predictions_the_way_the_measured_bandwidth_says() {
    let app = TestApp::new().await;
    // Two systems declaring the wrong NVSwitch bandwidth: one far too slow (100 GB/s), one far too fast
    // (2,000 GB/s); the same 8× H100 node measured by nccl-tests (all-reduce bus bandwidth ≈ 470 GB/s at large
    // messages) calibrates both.
    for (name, gbs) in [("slow-claim-h100", 100.0), ("fast-claim-h100", 2000.0)] {
        let r = app.post_json("/v1/systems", &system(name, gbs)).await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
    let before_slow = predict(&app, "slow-claim-h100").await;
    let before_fast = predict(&app, "fast-claim-h100").await;
    // Uncalibrated, datasheet links: the answer says so, for the intra-node link only (8 GPUs on one node).
    let w = uncalibrated_warning(&before_slow).expect("an uncalibrated-network warning");
    assert!(w.contains("intra-node") && !w.contains("inter-node") && w.contains("slow-claim-h100"), "{w}");
    assert!(w.contains("upload nccl-tests or OSU results"), "{w}");

    let (lat, busbw) = calibrate(&app, "slow-claim-h100").await;
    calibrate(&app, "fast-claim-h100").await;
    assert!(busbw > 100.0 * 0.74 && busbw < 2000.0 * 0.74, "measured busbw {busbw}");
    let after_slow = predict(&app, "slow-claim-h100").await;
    let after_fast = predict(&app, "fast-claim-h100").await;
    for p in [&after_slow, &after_fast] {
        assert!(uncalibrated_warning(p).is_none(), "{}", p["warnings"]);
        let sources = p["sources"].as_array().unwrap();
        assert!(sources.iter().any(|s| s.as_str().unwrap().starts_with("calibrated:")), "{sources:?}");
    }
    // The all-reduce of 2·4096·8192·2 = 134,217,728 bytes now answers from the measured group's fit:
    // latency + 2·7/8 · bytes / busbw.
    let bytes = 2.0 * 4096.0 * 8192.0 * 2.0;
    let measured_us = lat + 1.75 * bytes / (busbw * 1e3);
    for p in [&after_slow, &after_fast] {
        assert!((allreduce_us(p) - measured_us).abs() / measured_us < 1e-9, "{} vs {measured_us}", allreduce_us(p));
    }
    // The direction the measurement says: the slow claim's collectives and iteration get faster, the fast
    // claim's slower; the computation is unchanged, so the iteration moves by the collectives' change.
    assert!(allreduce_us(&after_slow) < allreduce_us(&before_slow));
    assert!(allreduce_us(&after_fast) > allreduce_us(&before_fast));
    let t = |p: &Value| p["iteration_time_s"].as_f64().unwrap();
    assert!(t(&after_slow) < t(&before_slow), "{} vs {}", t(&after_slow), t(&before_slow));
    assert!(t(&after_fast) > t(&before_fast), "{} vs {}", t(&after_fast), t(&before_fast));
    // Both systems are now the same measured node: the same prediction.
    assert!((t(&after_slow) / t(&after_fast) - 1.0).abs() < 1e-9);
}

#[tokio::test]
async fn presets_state_which_links_nccl_measured() {
    let app = TestApp::new().await;
    let h100 = app.get("/v1/systems/dgx-h100").await.json();
    assert_eq!(
        (h100["intra_node"]["bandwidth_gbs"].as_f64(), h100["intra_node"]["achieved"].as_bool()),
        (Some(350.0), Some(true))
    );
    assert!(h100["inter_node"].get("achieved").is_none_or(|a| a == false));
    // One node of dgx-h100: NCCL's achieved bandwidth, no warning; two nodes: the datasheet InfiniBand is.
    let one = app
        .post_json(
            "/v1/predictions/training",
            &json!({"system": "dgx-h100", "precision": "bf16",
                "model": {"layers": 4, "hidden": 4096, "heads": 32, "seq_len": 2048, "vocab": 32000},
                "parallelism": {"tp": 8, "grad_accum": 2}}),
        )
        .await
        .json();
    assert!(uncalibrated_warning(&one).is_none(), "{}", one["warnings"]);
    let two = app
        .post_json(
            "/v1/predictions/training",
            &json!({"system": "dgx-h100", "precision": "bf16",
                "model": {"layers": 4, "hidden": 4096, "heads": 32, "seq_len": 2048, "vocab": 32000},
                "parallelism": {"tp": 8, "dp": 2, "grad_accum": 2}}),
        )
        .await
        .json();
    let w = uncalibrated_warning(&two).unwrap();
    assert!(w.contains("inter-node") && !w.contains("intra-node"), "{w}");
    // Every answer carries its interval around the point estimate.
    let (lo, hi) = (two["interval"]["p10_s"].as_f64().unwrap(), two["interval"]["p90_s"].as_f64().unwrap());
    let t = two["iteration_time_s"].as_f64().unwrap();
    assert!(lo < t && t < hi, "{lo} {t} {hi}");
    assert_eq!(two["interval"]["class"], "hopper/multi-node");
}

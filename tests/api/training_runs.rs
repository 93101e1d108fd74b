//! Calibration of training predictions from users' own runs (`/v1/systems/{name}/training-runs`) through the real
//! router, a real SQLite file and the real job runner: runs 1.3× slower than predicted move the next prediction to
//! 1.3×, other systems and frameworks stay as they were, runs that disagree are rejected by the gate, and a bad log
//! line is a 422 naming it with nothing stored.

use serde_json::{json, Value};

use crate::common::TestApp;

/// 8 H100s of one node at tp 8: global batch = micro_batch 2 · grad_accum 2 · dp 1 = 4 sequences of 4,096 tokens.
fn config(system: &str, framework: &str) -> Value {
    json!({"system": system, "precision": "bf16", "framework": framework,
        "model": {"layers": 4, "hidden": 8192, "heads": 64, "seq_len": 4096, "vocab": 32000, "attention": "flash"},
        "parallelism": {"tp": 8, "micro_batch": 2, "grad_accum": 2, "zero_stage": 0}})
}

async fn started() -> TestApp {
    TestApp::started(perfcast::config::Config { auto_retrain: false, ..TestApp::config() }).await
}

async fn predict(app: &TestApp, body: &Value) -> Value {
    let r = app.post_json("/v1/predictions/training", body).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

/// A Megatron log whose first (warm-up) line is 5 s and whose other four lines are `ms` each.
fn megatron_log(ms: f64) -> String {
    let mut log =
        String::from("training ...\n iteration       10/     100 | elapsed time per iteration (ms): 5000.0 |\n");
    for i in 2..=5 {
        log += &format!(
            " iteration {:8}/     100 | consumed samples: {:12} | elapsed time per iteration (ms): {ms:.6} |\n",
            i * 10,
            i * 40
        );
    }
    log
}

async fn upload(app: &TestApp, system: &str, format: &str, config: &Value, log: &str) -> Value {
    let body = json!({"format": format, "config": config, "log": log});
    let r = app.post_json(&format!("/v1/systems/{system}/training-runs"), &body).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

#[tokio::test]
async fn uploaded_runs_move_the_systems_prediction_toward_them() {
    let app = started().await;
    let megatron = config("dgx-h100", "megatron");
    let p0 = predict(&app, &megatron).await;
    let t0 = p0["iteration_time_s"].as_f64().unwrap();
    let other_system = predict(&app, &config("dgx-h200", "megatron")).await;
    let other_framework = predict(&app, &config("dgx-h100", "torchtitan")).await;

    // Three runs, each measured at 1.3 · t0 after its warm-up, in three formats.
    let measured = 1.3 * t0;
    // 1. Megatron: four lines of 1.3 · t0 after a 5 s warm-up line → median 1.3 · t0.
    // A line the parser skips, with a non-ASCII character: `log_bytes` counts its UTF-8 bytes (✓ is 3).
    let log = format!("setup done ✓\n{}", megatron_log(measured * 1000.0));
    let a = upload(&app, "dgx-h100", "megatron", &megatron, &log).await;
    assert_eq!((a["run"]["steps"].as_u64(), a["run"]["warmup_steps"].as_u64()), (Some(5), Some(1)));
    assert_eq!(a["run"]["log_bytes"].as_u64(), Some(log.len() as u64));
    assert_eq!(log.len(), log.chars().count() + 2);
    assert!(close(a["run"]["ratio"].as_f64().unwrap(), 1.3, 1e-6), "{}", a["run"]);
    // 2. torchtitan: tps = tokens per step per GPU / step time = 4 · 4096 / 8 / (1.3 · t0) = 2048 / (1.3 · t0).
    let tps = 2048.0 / measured;
    let titan = format!(
        "step:  1  loss: 10.0000  memory: 40.00GiB(50.00%)  tps: {:.6}  tflops: 1.00  mfu: 1.00%\n\
         step:  2  loss:  9.0000  memory: 40.00GiB(50.00%)  tps: {tps:.6}  tflops: 1.00  mfu: 1.00%\n\
         step:  3  loss:  8.0000  memory: 40.00GiB(50.00%)  tps: {tps:.6}  tflops: 1.00  mfu: 1.00%\n",
        tps / 4.0
    );
    let b = upload(&app, "dgx-h100", "torchtitan", &megatron, &titan).await;
    assert!(close(b["run"]["measured_iteration_s"].as_f64().unwrap(), measured, 1e-6), "{}", b["run"]);
    // 3. MLLOG: train_step_time in s, steps from samples_count / 4.
    let mllog: String = (1..=3)
        .map(|i| {
            let s = if i == 1 { 3.0 * measured } else { measured };
            format!(":::MLLOG {{\"key\": \"tracked_stats\", \"value\": {{\"train_step_time\": {s}}}, \"metadata\": {{\"samples_count\": {}}}}}\n", 4 * i)
        })
        .collect();
    let c = upload(&app, "dgx-h100", "mllog", &megatron, &mllog).await;
    assert!(close(c["run"]["measured_iteration_s"].as_f64().unwrap(), measured, 1e-9), "{}", c["run"]);
    let job = app.wait_job(c["job"]["id"].as_i64().unwrap(), 60).await;
    assert_eq!(job["state"], "succeeded", "{job}");

    // c = exp(median ln 1.3) = 1.3; leave-one-out: each held-out run's correction is 1.3 (error 0) where the
    // uncalibrated prediction is off by |1 − 1.3| / 1.3 = 23.08 %.
    let p1 = predict(&app, &megatron).await;
    assert!(
        close(p1["iteration_time_s"].as_f64().unwrap(), measured, 1e-6),
        "{} vs {measured}",
        p1["iteration_time_s"]
    );
    let cal = &p1["calibration"];
    assert_eq!(cal["runs"], 3);
    assert!(close(cal["correction"].as_f64().unwrap(), 1.3, 1e-6), "{cal}");
    assert!(close(cal["uncalibrated_iteration_time_s"].as_f64().unwrap(), t0, 1e-12), "{cal}");
    assert!(close(cal["held_out_mape_before_pct"].as_f64().unwrap(), 100.0 * 0.3 / 1.3, 1e-5), "{cal}");
    assert!(cal["held_out_mape_after_pct"].as_f64().unwrap() < 1e-4, "{cal}");
    // Throughput falls by the same factor: tokens/s = 4 · 4096 / iteration time.
    assert!(close(p1["throughput"]["tokens_per_s"].as_f64().unwrap(), 16384.0 / measured, 1e-6));

    // Another system, and another framework on this one, have no runs: unchanged, no calibration member.
    let again = predict(&app, &config("dgx-h200", "megatron")).await;
    assert_eq!(again["iteration_time_s"], other_system["iteration_time_s"]);
    assert!(again.get("calibration").is_none());
    let again = predict(&app, &config("dgx-h100", "torchtitan")).await;
    assert_eq!(again["iteration_time_s"], other_framework["iteration_time_s"]);
    assert!(again.get("calibration").is_none());

    let list = app.get("/v1/systems/dgx-h100/training-runs").await;
    assert_eq!(list.status, 200);
    let list = list.json();
    let formats: Vec<&str> = list["runs"].as_array().unwrap().iter().map(|r| r["format"].as_str().unwrap()).collect();
    assert_eq!(formats, ["megatron", "torchtitan", "mllog"]);
    assert_eq!(list["calibrations"].as_array().unwrap().len(), 1);
    assert_eq!(list["calibrations"][0]["framework"], "megatron");
    assert_eq!(list["calibrations"][0]["accepted"], true);
}

#[tokio::test]
async fn the_gate_rejects_runs_that_do_not_agree() {
    let app = started().await;
    let cfg = config("dgx-h100", "nemo");
    let t0 = predict(&app, &cfg).await["iteration_time_s"].as_f64().unwrap();
    // Ratios 0.5, 2 and 1: leave-one-out calibrated MAPE 82.5 % against 50 % uncalibrated (src/llm/calibration.rs
    // works it out) → rejected, and predictions stay uncalibrated.
    let mut last = Value::Null;
    for ratio in [0.5, 2.0, 1.0] {
        last = upload(&app, "dgx-h100", "megatron", &cfg, &megatron_log(ratio * t0 * 1000.0)).await;
    }
    let job = app.wait_job(last["job"]["id"].as_i64().unwrap(), 60).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let cal = &app.get("/v1/systems/dgx-h100/training-runs").await.json()["calibrations"][0];
    assert_eq!((cal["framework"].as_str(), cal["accepted"].as_bool()), (Some("nemo"), Some(false)), "{cal}");
    assert!(close(cal["held_out_mape_before_pct"].as_f64().unwrap(), 50.0, 1e-5), "{cal}");
    let after = 100.0 * ((2f64.sqrt() - 0.5) / 0.5 + (2.0 - 0.5f64.sqrt()) / 2.0) / 3.0;
    assert!(close(cal["held_out_mape_after_pct"].as_f64().unwrap(), after, 1e-5), "{cal}");
    assert!(cal["reason"].as_str().unwrap().starts_with("rejected"), "{cal}");
    let p = predict(&app, &cfg).await;
    assert_eq!(p["iteration_time_s"].as_f64(), Some(t0));
    assert!(p.get("calibration").is_none());
}

#[tokio::test]
async fn a_bad_log_line_is_a_422_naming_it_and_nothing_is_stored() {
    let app = TestApp::new().await;
    let cfg = config("dgx-h100", "megatron");
    let log = " iteration 10/100 | elapsed time per iteration (ms): 900.0 |\nother output\n iteration 20/100 | elapsed time per iteration (ms): n/a |\n";
    let r = app
        .post_json("/v1/systems/dgx-h100/training-runs", &json!({"format": "megatron", "config": cfg, "log": log}))
        .await;
    let p = r.problem(422);
    assert_eq!(p["errors"][0]["line"], 3, "{p}");
    assert_eq!(p["errors"][0]["field"], "log", "{p}");
    assert!(p["detail"].as_str().unwrap().contains("(line 3)"), "{p}");

    // A log with one step line, a configuration of another system, an impossible configuration, an unknown
    // system: each refused, naming what is wrong.
    let one = " iteration 10/100 | elapsed time per iteration (ms): 900.0 |\n";
    let r = app
        .post_json("/v1/systems/dgx-h100/training-runs", &json!({"format": "megatron", "config": cfg, "log": one}))
        .await;
    assert!(r.problem(422)["detail"].as_str().unwrap().contains("at least 2"));
    let r = app
        .post_json("/v1/systems/dgx-b200/training-runs", &json!({"format": "megatron", "config": cfg, "log": log}))
        .await;
    assert_eq!(r.problem(422)["errors"][0]["field"], "config.system");
    let mut bad = cfg.clone();
    bad["parallelism"]["tp"] = json!(3);
    let r = app
        .post_json("/v1/systems/dgx-h100/training-runs", &json!({"format": "megatron", "config": bad, "log": log}))
        .await;
    let field = r.problem(422)["errors"][0]["field"].as_str().unwrap().to_string();
    assert!(field.starts_with("config."), "{field}");
    let r = app
        .post_json("/v1/systems/nope/training-runs", &json!({"format": "megatron", "config": cfg, "log": log}))
        .await;
    r.problem(404);

    let list = app.get("/v1/systems/dgx-h100/training-runs").await.json();
    assert_eq!(list, json!({"runs": [], "calibrations": []}));
    // No calibration job was queued either.
    assert!(app.store.claim_job(&["calibrate_training"]).await.unwrap().is_none());
}

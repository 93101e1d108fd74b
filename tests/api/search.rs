//! `POST /v1/predictions/training/search` and the `search` job through the real router, worker and SQLite file;
//! `perfcast search` through the real binary.

use std::process::Command;

use crate::common::TestApp;
use perfcast::config::Config;
use serde_json::{json, Value};

fn llama8b_search(extra: Value) -> Value {
    let mut r = json!({"system": "dgx-h100", "gpus": 16, "global_batch": 64, "precision": "bf16",
        "model": {"name": "Llama-3 8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                  "ffn_hidden": 14336, "seq_len": 4096, "vocab": 128256, "norm": "rmsnorm",
                  "activation": "swiglu", "attention": "flash"},
        "training": {"distributed_optimizer": true, "overlap_grad_reduce": true},
        "constraints": {"max_virtual_stages": 4}, "top_k": 3, "run": {"tokens": 1e12}});
    for (k, v) in extra.as_object().unwrap() {
        r[k] = v.clone();
    }
    r
}

#[tokio::test]
async fn small_searches_answer_inline_and_their_winner_predicts_the_same_time() {
    let app = TestApp::new().await;
    let r = app.post_json("/v1/predictions/training/search", &llama8b_search(json!({}))).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let res = r.json();
    let evaluated = res["evaluated"].as_u64().unwrap();
    assert!(evaluated > 100 && res["fitting"].as_u64().unwrap() <= evaluated);
    assert!(res["elapsed_s"].as_f64().unwrap() > 0.0 && res["candidates_per_s"].as_f64().unwrap() > 0.0);
    let top = res["top"].as_array().unwrap();
    assert_eq!(top.len(), 3);
    let times: Vec<f64> = top.iter().map(|h| h["iteration_time_s"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    for h in top {
        assert!(h["prediction"]["memory"]["fits"].as_bool().unwrap());
        // The whole-run estimate: 1e12 tokens at 64 · 4096 tokens per step → ⌈3,814,697.3⌉ steps.
        assert_eq!(h["prediction"]["run"]["steps"], 3_814_698);
    }
    // The winner's parallelism sent to the prediction endpoint gives the same iteration time.
    let req = json!({"system": "dgx-h100", "model": llama8b_search(json!({}))["model"],
        "parallelism": top[0]["parallelism"], "precision": "bf16"});
    let p = app.post_json("/v1/predictions/training", &req).await;
    assert_eq!(p.status, 200, "{}", String::from_utf8_lossy(&p.body));
    let t = p.json()["iteration_time_s"].as_f64().unwrap();
    assert!((t / times[0] - 1.0).abs() < 1e-12, "{t} vs {}", times[0]);
}

#[tokio::test]
async fn bad_searches_are_problems_naming_the_field() {
    let app = TestApp::new().await;
    for (extra, status, field) in [
        (json!({"system": "nowhere"}), 404, "system"),
        (json!({"gpus": 4096}), 422, "gpus"),
        (json!({"constraints": {"tp": 3}}), 422, "constraints.tp"),
        (json!({"constraints": {"pipeline": 2}}), 422, "constraints"),
        (json!({"run": {"tokens": 1e9, "steps": 10}}), 422, "run"),
        (
            json!({"model": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 5, "seq_len": 4096,
            "vocab": 32000}}),
            422,
            "model.kv_heads",
        ),
        (json!({"training": {"zero_stage": 7}}), 422, "training.zero_stage"),
        (json!({"top_k": 1000}), 422, "top_k"),
    ] {
        let p = app.post_json("/v1/predictions/training/search", &llama8b_search(extra.clone())).await.problem(status);
        let got = p["errors"][0]["field"].as_str().unwrap_or_default().to_string();
        assert!(got == field || got.starts_with(&format!("{field}.")), "{extra}: {p}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_searches_run_as_jobs_with_progress_and_result() {
    let config = Config { search_inline_max_candidates: 10, auto_retrain: false, ..TestApp::config() };
    let app = TestApp::started(config).await;
    let r = app.post_json("/v1/predictions/training/search", &llama8b_search(json!({}))).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let job = r.json();
    assert_eq!(job["kind"], "search");
    assert_eq!(r.headers["location"], format!("/v1/jobs/{}", job["id"]));
    let done = app.wait_job(job["id"].as_i64().unwrap(), 120).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["progress"], 1.0);
    let result = &done["result"];
    assert_eq!(result["top"].as_array().unwrap().len(), 3);
    assert!(result["evaluated"].as_u64().unwrap() > 10);
    assert!(done["message"].as_str().unwrap().starts_with("evaluated "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_search_job_runs_again_after_a_restart() {
    let config = Config { auto_retrain: false, ..TestApp::config() };
    // A process queued and started the search, then died: the job is left 'running' with one attempt.
    let app = TestApp::new().await;
    let job = app.store.create_job("search", &llama8b_search(json!({"top_k": 2})), false).await.unwrap();
    let claimed = app.store.claim_job(&["search"]).await.unwrap().unwrap();
    assert_eq!((claimed.id, claimed.attempts), (job.id, 1));
    // The restarted worker queues it again and finishes it.
    let worker = perfcast::app::spawn_jobs(&app.service, &config);
    let done = app.wait_job(job.id, 120).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["attempts"], 2);
    assert_eq!(done["result"]["top"].as_array().unwrap().len(), 2);
    worker.abort();
}

#[tokio::test]
async fn the_cli_search_prints_the_same_configurations_as_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let req = llama8b_search(json!({}));
    let file = dir.path().join("search.json");
    std::fs::write(&file, serde_json::to_vec(&req).unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_perfcast"))
        .args(["--db", dir.path().join("cli.db").to_str().unwrap(), "search", file.to_str().unwrap()])
        // As the API below: without the bundled models.
        .env("PERFCAST_BUNDLED_MODELS", "false")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    let api = TestApp::new().await.post_json("/v1/predictions/training/search", &req).await.json();
    for k in ["evaluated", "fitting", "simulated"] {
        assert_eq!(cli[k], api[k], "{k}");
    }
    let strip = |v: &Value| -> Vec<Value> {
        v["top"].as_array().unwrap().iter().map(|h| json!([h["parallelism"], h["iteration_time_s"]])).collect()
    };
    assert_eq!(strip(&cli), strip(&api));
}

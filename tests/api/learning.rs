//! Learned regressors end to end: uploads → background retrain → promotion → predictions, through the real
//! router, a real SQLite file and real LightGBM.

use std::time::{Duration, Instant};

use crate::common::TestApp;
use perfcast::config::Config;
use perfcast::learn::Grid;
use serde_json::{json, Value};

fn data(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data").join(path)
}

fn fast() -> Config {
    Config { retrain_grid: Grid::Fast, retrain_debounce_s: 0, per_gpu_min_samples: 300, ..TestApp::config() }
}

async fn upload(app: &TestApp, file: &str) -> Value {
    let raw = std::fs::read(data(file)).unwrap();
    let r = app.post_bytes("/v1/profiles", raw, &[("content-encoding", "gzip")]).await;
    assert_eq!(r.status, 201, "{file}: {}", String::from_utf8_lossy(&r.body));
    r.json()
}

async fn retrain(app: &TestApp, body: Value) -> Value {
    let r = app.post_json("/v1/regressors/retrain", &body).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let job = r.json();
    assert_eq!(r.headers["location"], format!("/v1/jobs/{}", job["id"]));
    app.wait_job(job["id"].as_i64().unwrap(), 300).await
}

fn fp32_gpt(system: &str) -> Value {
    json!({"system": system,
           "model": {"layers": 8, "hidden": 2048, "heads": 16, "seq_len": 1024, "vocab": 32000},
           "parallelism": {"tp": 2, "pp": 2, "dp": 1, "micro_batch": 2, "grad_accum": 4},
           "precision": "fp32"})
}

async fn estimate(app: &TestApp, gpu: &str, m: u64, n: u64, k: u64) -> Value {
    let r = app
        .post_json(
            "/v1/estimates/operator",
            &json!({"gpu": gpu, "op": "linear", "dtype": "fp32",
            "dims": {"M": m, "N": n, "K": k}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regressors_train_promote_serve_and_survive_a_crash() {
    let config = Config { auto_retrain: false, ..fast() };
    let app = TestApp::started(config.clone()).await;

    // Before any model: analytic everywhere.
    let before = app.post_json("/v1/predictions/training", &fp32_gpt("perlmutter-a100-40g")).await.json();
    assert_eq!(before["sources"], json!(["analytic"]));
    let e = estimate(&app, "A100-SXM4-40GB", 2048, 2048, 2048).await;
    assert_eq!(e["source"], "analytic");
    assert_eq!(e["predicted_us"], e["analytic_us"]);

    upload(&app, "neusight/train_collect/linear__NVIDIA_A100-PCIE-40GB.csv.gz").await;
    upload(&app, "neusight/train_collect/linear__Tesla_V100-PCIE-32GB.csv.gz").await;
    let job = retrain(&app, json!({})).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["progress"], 1.0);

    // v1 of the cross-GPU key is active, with its validation error and the analytic one on the same rows.
    let list = app.get("/v1/regressors").await.json();
    let v1 = list.as_array().unwrap().iter().find(|r| r["key"] == "linear.fwd.fp32").unwrap().clone();
    assert_eq!((v1["version"].as_i64(), v1["active"].as_bool()), (Some(1), Some(true)));
    assert!(v1["validation_mape"].as_f64().unwrap() < v1["analytic_validation_mape"].as_f64().unwrap());
    let detail = app.get("/v1/regressors/linear.fwd.fp32").await.json();
    assert_eq!(detail["active_version"], 1);
    assert_eq!(detail["features"].as_array().unwrap().len(), perfcast::learn::features::OP_FEATURES.len());
    assert!(detail["feature_importance"].as_array().unwrap().iter().any(|f| f["gain"].as_f64().unwrap() > 0.0));
    assert_eq!(detail["training_set"]["gpus"]["A100-PCIE-40GB"], 6460);
    app.get("/v1/regressors/no.such.key").await.problem(404);

    // Predictions report their sources, and a training prediction changes once a regressor is active. The
    // A100-SXM4 has no samples: it is served by the cross-GPU model.
    let e = estimate(&app, "A100-SXM4-40GB", 2048, 2048, 2048).await;
    assert_eq!(e["source"], "regressor:linear.fwd.fp32@v1");
    assert_ne!(e["predicted_us"], e["analytic_us"]);
    let e = estimate(&app, "NVIDIA A100-PCIE-40GB", 2048, 2048, 2048).await;
    let per_gpu = e["source"].as_str().unwrap();
    assert!(
        per_gpu == "regressor:linear.fwd.fp32.A100-PCIE-40GB@v1" || per_gpu == "regressor:linear.fwd.fp32@v1",
        "{per_gpu}"
    );
    let after = app.post_json("/v1/predictions/training", &fp32_gpt("perlmutter-a100-40g")).await.json();
    assert_ne!(after["iteration_time_s"], before["iteration_time_s"]);
    assert!(
        after["sources"].as_array().unwrap().iter().any(|s| s == "regressor:linear.fwd.fp32@v1"),
        "{}",
        after["sources"]
    );
    let linear1_bwd =
        after["operators"].as_array().unwrap().iter().find(|o| o["name"] == "Linear1" && o["phase"] == "bwd").unwrap();
    assert_eq!(linear1_bwd["source"], "regressor:linear.fwd.fp32@v1", "GEMM backward is timed as two forward GEMMs");

    // A worse candidate (the minimal grid: two boosting rounds) is stored but not promoted.
    let job = retrain(&app, json!({"keys": ["linear.fwd.fp32"], "grid": "minimal", "force": true})).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let versions = app.get("/v1/regressors/linear.fwd.fp32").await.json();
    assert_eq!(versions["active_version"], 1);
    let v2 = &versions["versions"][0];
    assert_eq!((v2["version"].as_i64(), v2["active"].as_bool()), (Some(2), Some(false)));
    assert!(v2["promotion"]["reason"].as_str().unwrap().contains("worse"), "{}", v2["promotion"]);
    assert!(v2["promotion"]["candidate_validation_mape"].as_f64() > v2["promotion"]["active_validation_mape"].as_f64());
    assert_eq!(estimate(&app, "A100-SXM4-40GB", 2048, 2048, 2048).await["source"], "regressor:linear.fwd.fp32@v1");

    // Crash mid-retrain: new samples, a retrain starts, the worker task is killed while it trains.
    upload(&app, "neusight/train_collect/linear__Tesla_T4.csv.gz").await;
    let queued = app.post_json("/v1/regressors/retrain", &json!({})).await.json();
    let id = queued["id"].as_i64().unwrap();
    let start = Instant::now();
    loop {
        let j = app.store.get_job(id).await.unwrap();
        if j.state == perfcast::store::jobs::JobState::Running {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "job never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let worker = app.worker.as_ref().unwrap();
    worker.abort();
    // An aborted task finishes at its next await point; on a loaded machine that can take longer than a fixed
    // sleep, so wait for it (bounded) instead of assuming a time.
    let aborted = Instant::now();
    while !worker.is_finished() && aborted.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(worker.is_finished(), "the aborted worker did not stop within 30 s");
    // Nothing half-written: the job is still 'running', no new version, v1 still serves.
    assert_eq!(app.store.get_job(id).await.unwrap().state, perfcast::store::jobs::JobState::Running);
    let versions = app.get("/v1/regressors/linear.fwd.fp32").await.json();
    assert_eq!(versions["versions"].as_array().unwrap().len(), 2);
    assert_eq!(estimate(&app, "A100-SXM4-40GB", 2048, 2048, 2048).await["source"], "regressor:linear.fwd.fp32@v1");

    // "Restart": a new worker re-queues the interrupted job and finishes it.
    let handle = perfcast::app::spawn_jobs(&app.service, &config);
    let job = app.wait_job(id, 300).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["attempts"], 2);
    let versions = app.get("/v1/regressors/linear.fwd.fp32").await.json();
    assert_eq!(versions["versions"][0]["version"], 3);
    assert_eq!(versions["versions"][0]["samples"], 6460 + 6460 + 6458);
    handle.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_wake_the_worker_and_learned_models_beat_analytic_on_unseen_gpus() {
    let app = TestApp::started(fast()).await;
    for gpu in ["NVIDIA_A100-PCIE-40GB", "Tesla_P100-PCIE-16GB", "Tesla_P4", "Tesla_T4", "Tesla_V100-PCIE-32GB"] {
        upload(&app, &format!("neusight/train_collect/linear__{gpu}.csv.gz")).await;
    }
    // No retrain request: the uploads queue one by themselves (debounced).
    let start = Instant::now();
    let job = loop {
        if let Ok(j) = app.store.get_job(1).await {
            break app.wait_job(j.id, 300).await;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no automatic retrain");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["params"]["reason"], "new samples");

    // The held-out test rows of GPUs the models never saw (DATA.md: H100, L4, A100 80GB PCIe).
    let test = perfcast::eval::datasets::read(&data("neusight/test/linear.csv.gz")).unwrap();
    let parsed = perfcast::ingest::parse(perfcast::ingest::Format::NeusightCsv, &test, &Default::default()).unwrap();
    let (mut analytic, mut learned, mut measured) = (vec![], vec![], vec![]);
    for s in parsed.samples {
        let perfcast::samples::Sample::Op(s) = s else { continue };
        if !["NVIDIA H100 80GB HBM3", "NVIDIA L4", "NVIDIA A100 80GB PCIe"].contains(&s.gpu.as_str()) {
            continue;
        }
        let e = estimate(&app, &s.gpu, s.dims[1], s.dims[2], s.dims[3]).await;
        assert_eq!(e["source"], "regressor:linear.fwd.fp32@v1");
        analytic.push(e["analytic_us"].as_f64().unwrap());
        learned.push(e["predicted_us"].as_f64().unwrap());
        measured.push(s.time_us);
    }
    assert_eq!(measured.len(), 3 * 1040);
    let a = perfcast::learn::fit::accuracy(&analytic, &measured);
    let l = perfcast::learn::fit::accuracy(&learned, &measured);
    eprintln!("unseen GPUs, linear fp32: analytic MAPE {:.1} %, learned {:.1} %", a.mape * 100.0, l.mape * 100.0);
    assert!(l.mape < 0.85 * a.mape, "learned {l:?} not clearly below analytic {a:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrains_stay_within_their_row_cap_and_time_budget() {
    // A100 PCIe linear samples: 6,460 rows. A cap of 1,000 keeps a uniform sample of exactly 1,000 (by split key).
    let config = Config { auto_retrain: false, max_training_rows: 1000, ..fast() };
    let app = TestApp::started(config).await;
    upload(&app, "neusight/train_collect/linear__NVIDIA_A100-PCIE-40GB.csv.gz").await;
    let job = retrain(&app, json!({"grid": "minimal"})).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let key = job["result"]["keys"].as_array().unwrap().iter().find(|k| k["key"] == "linear.fwd.fp32").unwrap();
    assert_eq!(key["rows"], 1000, "{key}");

    // A zero time budget: the job ends without training and says why; the keys stay due for the next retrain.
    let config = Config { auto_retrain: false, retrain_time_limit_s: 0, ..fast() };
    let app = TestApp::started(config).await;
    upload(&app, "neusight/train_collect/linear__NVIDIA_A100-PCIE-40GB.csv.gz").await;
    let job = retrain(&app, json!({"grid": "minimal"})).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["result"]["trained"], 0, "{job}");
    let key = job["result"]["keys"].as_array().unwrap().iter().find(|k| k["key"] == "linear.fwd.fp32").unwrap();
    assert!(key["skipped"].as_str().unwrap().contains("time limit"), "{key}");
}

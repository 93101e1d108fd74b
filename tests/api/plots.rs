//! `GET /v1/regressors/{key}/plot.svg`: the accuracy plot of a key's active version, drawn from the validation
//! rows stored at training time, through the real router, a real SQLite file and real LightGBM.

use crate::common::TestApp;
use perfcast::config::Config;
use perfcast::learn::fit::{accuracy, MAX_VALIDATION_POINTS};
use perfcast::learn::FitSummary;
use perfcast::store::regressors::NewRegressor;
use serde_json::{json, Value};

fn data(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data").join(path)
}

async fn upload(app: &TestApp, gpu: &str) {
    let raw = std::fs::read(data(&format!("neusight/train_collect/linear__{gpu}.csv.gz"))).unwrap();
    let r = app.post_bytes("/v1/profiles", raw, &[("content-encoding", "gzip")]).await;
    assert_eq!(r.status, 201, "{gpu}: {}", String::from_utf8_lossy(&r.body));
}

async fn retrain_minimal(app: &TestApp) {
    let r = app.post_json("/v1/regressors/retrain", &json!({"grid": "minimal"})).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let job = app.wait_job(r.json()["id"].as_i64().unwrap(), 300).await;
    assert_eq!(job["state"], "succeeded", "{job}");
}

fn active(list: &Value, key: &str) -> Value {
    list.as_array().unwrap().iter().find(|r| r["key"] == key && r["active"] == true).unwrap().clone()
}

/// The texts of the SVG's `<text>` elements (the SVG must parse as XML).
fn texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("plot is not XML ({e})"));
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_string())
        .collect()
}

fn circles(svg: &str) -> usize {
    roxmltree::Document::parse(svg).unwrap().descendants().filter(|n| n.has_tag_name("circle")).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plot_shows_every_stored_validation_row_and_the_versions_mape() {
    let config = Config { auto_retrain: false, per_gpu_min_samples: 1_000_000, ..TestApp::config() };
    let app = TestApp::started(config).await;
    upload(&app, "NVIDIA_A100-PCIE-40GB").await;
    retrain_minimal(&app).await;
    let v = active(&app.get("/v1/regressors").await.json(), "linear.fwd.fp32");
    let rows = v["validation_rows"].as_u64().unwrap() as usize;
    // 6,460 samples, about one in five on the validation side: all of them are kept.
    assert!((1000..MAX_VALIDATION_POINTS).contains(&rows), "{rows}");

    let r = app.get("/v1/regressors/linear.fwd.fp32/plot.svg").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.content_type, "image/svg+xml");
    let svg = String::from_utf8(r.body).unwrap();
    let texts = texts(&svg);
    let title = format!(
        "linear.fwd.fp32 v1: MAPE {:.1} % (analytic {:.1} %)",
        v["validation_mape"].as_f64().unwrap() * 100.0,
        v["analytic_validation_mape"].as_f64().unwrap() * 100.0
    );
    assert!(texts.contains(&title), "no title {title:?} in {texts:?}");
    assert!(texts.contains(&format!("predicted vs measured on {rows} validation rows")), "{texts:?}");
    for t in ["measured µs", "predicted µs", "analytic", "learned", "y = x"] {
        assert!(texts.iter().any(|x| x == t), "no {t:?} in {texts:?}");
    }
    // One circle per row and series (the learned and the analytic time), plus the legend's two.
    assert_eq!(circles(&svg), 2 * rows + 2);

    // The stored points are the rows the version's MAPEs were measured on (f32 storage: 1e-5 relative).
    let versions = app.store.regressor_versions("linear.fwd.fp32").await.unwrap();
    let id = versions.iter().find(|r| r.active).unwrap().id;
    let stored = app.store.validation_points(id).await.unwrap().unwrap();
    assert_eq!(stored.len(), rows);
    let meas: Vec<f64> = stored.iter().map(|p| p.measured_us).collect();
    let learned = accuracy(&stored.iter().map(|p| p.predicted_us).collect::<Vec<_>>(), &meas).mape;
    let analytic = accuracy(&stored.iter().map(|p| p.analytic_us).collect::<Vec<_>>(), &meas).mape;
    let close = |a: f64, b: f64| ((a - b) / b).abs() < 1e-5;
    assert!(close(learned, v["validation_mape"].as_f64().unwrap()), "{learned} vs {v}");
    assert!(close(analytic, v["analytic_validation_mape"].as_f64().unwrap()), "{analytic} vs {v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_validation_side_is_thinned_to_the_stored_maximum() {
    let config = Config { auto_retrain: false, per_gpu_min_samples: 1_000_000, ..TestApp::config() };
    let app = TestApp::started(config).await;
    for gpu in ["NVIDIA_A100-PCIE-40GB", "Tesla_P100-PCIE-16GB", "Tesla_P4", "Tesla_T4", "Tesla_V100-PCIE-32GB"] {
        upload(&app, gpu).await;
    }
    retrain_minimal(&app).await;
    let v = active(&app.get("/v1/regressors").await.json(), "linear.fwd.fp32");
    let rows = v["validation_rows"].as_u64().unwrap() as usize;
    assert!(rows > MAX_VALIDATION_POINTS, "{rows}");
    // Every k-th row, k = ⌈rows / max⌉.
    let kept = rows.div_ceil(rows.div_ceil(MAX_VALIDATION_POINTS));
    let r = app.get("/v1/regressors/linear.fwd.fp32/plot.svg").await;
    assert_eq!(r.status, 200);
    let svg = String::from_utf8(r.body).unwrap();
    assert!(texts(&svg).contains(&format!("predicted vs measured on {rows} validation rows, {kept} shown")));
    assert_eq!(circles(&svg), 2 * kept + 2);
}

fn version(key: &str, activate: bool) -> NewRegressor {
    NewRegressor {
        key: key.into(),
        family: "op".into(),
        scope: "all".into(),
        model: String::new(),
        holdout_model: String::new(),
        feature_names: vec![],
        fit: FitSummary {
            candidate: json!({}),
            candidates: json!([]),
            validation_mape: 0.1,
            validation_signed: 0.0,
            analytic_validation_mape: 0.2,
            train_rows: 40,
            validation_rows: 10,
            samples: 50,
            summary: json!({}),
            importance: json!([]),
        },
        promotion: json!({}),
        provenance: Default::default(),
        activate,
        validation_points: vec![],
    }
}

#[tokio::test]
async fn unknown_keys_and_keys_without_a_plot_answer_problems() {
    let app = TestApp::new().await;
    let p = app.get("/v1/regressors/no.such.key/plot.svg").await.problem(404);
    assert!(p["detail"].as_str().unwrap().contains("no.such.key"), "{p}");

    // A key whose only version was not promoted: nothing to plot.
    app.store.insert_regressors(None, &[version("bmm.fwd.fp32", false)]).await.unwrap();
    let p = app.get("/v1/regressors/bmm.fwd.fp32/plot.svg").await.problem(409);
    assert!(p["detail"].as_str().unwrap().contains("no active version"), "{p}");

    // An active version without stored validation rows (as versions trained before they were stored).
    app.store.insert_regressors(None, &[version("linear.fwd.fp32", true)]).await.unwrap();
    let p = app.get("/v1/regressors/linear.fwd.fp32/plot.svg").await.problem(409);
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains("no stored validation rows") && detail.contains("force"), "{p}");
}

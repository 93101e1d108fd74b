//! `/v1/systems` and `/v1/gpus` through the real router and a real SQLite file.

use crate::common::TestApp;
use serde_json::json;

fn cluster() -> serde_json::Value {
    json!({"name": "my-a100-cluster", "gpu": "A100-SXM4-80GB", "gpus_per_node": 8, "nodes": 64,
           "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 300, "latency_us": 2.0},
           "inter_node": {"kind": "infiniband-hdr", "bandwidth_gbs": 100, "latency_us": 5.0}})
}

#[tokio::test]
async fn presets_ship_with_every_new_database() {
    let app = TestApp::new().await;
    let r = app.get("/v1/systems").await;
    assert_eq!(r.status, 200);
    let names: Vec<String> = r.json().as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().into()).collect();
    assert_eq!(
        names,
        vec![
            "dgx-a100-80g",
            "dgx-b200",
            "dgx-b300",
            "dgx-h100",
            "dgx-h200",
            "gb200-nvl72",
            "gb300-nvl72",
            "perlmutter-a100-40g",
            "vista-gh200"
        ]
    );
    let h100 = app.get("/v1/systems/dgx-h100").await.json();
    assert_eq!(h100["gpu_spec"]["name"], "H100-SXM5-80GB");
    assert_eq!(h100["total_gpus"], 1024);
    assert_eq!(h100["preset"], true);
    assert_eq!(h100["inter_node"]["bandwidth_gbs"], 400.0);
    // A GB200 NVL72 rack is one node of 72 GPUs (18 trays × 4); 8 racks = 576 GPUs, one NIC per GPU.
    let nvl72 = app.get("/v1/systems/gb200-nvl72").await.json();
    assert_eq!((nvl72["gpus_per_node"].as_u64(), nvl72["total_gpus"].as_u64()), (Some(72), Some(576)));
    assert_eq!(nvl72["inter_node"]["nics"], 72);
}

#[tokio::test]
async fn create_then_read_back_and_conflict_on_the_same_name() {
    let app = TestApp::new().await;
    let r = app.post_json("/v1/systems", &cluster()).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.headers["location"], "/v1/systems/my-a100-cluster");
    let created = r.json();
    assert_eq!(created["gpu"], "A100-SXM4-80GB");
    assert_eq!(created["gpu_spec"]["memory_bandwidth_gbs"], 2039.0);
    assert_eq!(created["total_gpus"], 512);
    assert_eq!(created["preset"], false);

    let got = app.get("/v1/systems/my-a100-cluster").await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json(), created);

    let p = app.post_json("/v1/systems", &cluster()).await.problem(409);
    assert!(p["detail"].as_str().unwrap().contains("my-a100-cluster"));
    // Nothing half-written: still exactly one such system.
    let all = app.get("/v1/systems").await.json();
    assert_eq!(all.as_array().unwrap().iter().filter(|s| s["name"] == "my-a100-cluster").count(), 1);
}

#[tokio::test]
async fn gpu_by_alias_or_inline_description() {
    let app = TestApp::new().await;
    let mut by_alias = cluster();
    by_alias["name"] = json!("aliased");
    by_alias["gpu"] = json!("NVIDIA H100 80GB HBM3");
    let r = app.post_json("/v1/systems", &by_alias).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["gpu_spec"]["name"], "H100-SXM5-80GB");

    let mut inline = cluster();
    inline["name"] = json!("custom");
    inline["gpu"] = json!({"name": "my-gpu", "sm_count": 100, "clock_ghz": 1.5, "memory_gib": 48,
        "memory_bandwidth_gbs": 1000, "l2_mib": 32,
        "peak_tflops": {"fp64": 10, "fp32": 20, "tf32": 100, "fp16": 200, "bf16": 200, "fp8": null}});
    let r = app.post_json("/v1/systems", &inline).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["gpu_spec"]["sm_count"], 100);
}

#[tokio::test]
async fn invalid_systems_name_the_field() {
    let app = TestApp::new().await;
    let cases = [
        (json!({"gpu": "RTX 9090"}), "gpu"),
        (json!({"nodes": 0}), "nodes"),
        (json!({"name": "has space"}), "name"),
        (json!({"intra_node": {"kind": "x", "bandwidth_gbs": -1, "latency_us": 1}}), "intra_node.bandwidth_gbs"),
        (json!({"gpus_per_node": "eight"}), "gpus_per_node"),
        (json!({"gpu": {"name": "g", "sm_count": 1}}), "gpu"),
        (json!({"colour": "blue"}), "colour"),
    ];
    for (patch, field) in cases {
        let mut body = cluster();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        let p = app.post_json("/v1/systems", &body).await.problem(422);
        let got = p["errors"][0]["field"].as_str().unwrap_or("");
        assert!(
            got == field || got.starts_with(&format!("{field}.")) || p["detail"].as_str().unwrap().contains(field),
            "{patch}: {p}"
        );
    }
    // Missing required field.
    let mut body = cluster();
    body.as_object_mut().unwrap().remove("nodes");
    let p = app.post_json("/v1/systems", &body).await.problem(422);
    assert!(p["detail"].as_str().unwrap().contains("missing field `nodes`"), "{p}");
}

#[tokio::test]
async fn malformed_bodies_are_400_or_415_never_500() {
    let app = TestApp::new().await;
    let p =
        app.post_raw("/v1/systems", "application/json", b"{\"name\": \n \"x\" \"gpu\"}".to_vec()).await.problem(400);
    assert_eq!(p["errors"][0]["line"], 2);
    assert_eq!(p["errors"][0]["column"], 6);
    app.post_raw("/v1/systems", "text/plain", serde_json::to_vec(&cluster()).unwrap()).await.problem(415);
    app.post_raw("/v1/systems", "application/json", vec![0xff, 0xfe]).await.problem(400);
    app.post_raw("/v1/systems", "application/json", Vec::new()).await.problem(400);
}

#[tokio::test]
async fn unknown_systems_routes_and_methods_are_problems() {
    let app = TestApp::new().await;
    let p = app.get("/v1/systems/nope").await.problem(404);
    assert!(p["detail"].as_str().unwrap().contains("nope"));
    app.get("/v1/nothing-here").await.problem(404);
    let r = app.send(axum::http::Request::delete("/v1/systems").body(axum::body::Body::empty()).unwrap()).await;
    r.problem(405);
}

#[tokio::test]
async fn gpu_catalog_resolves_aliases() {
    let app = TestApp::new().await;
    let all = app.get("/v1/gpus").await.json();
    assert!(all.as_array().unwrap().len() >= 17);
    let v100 = app.get("/v1/gpus/Tesla%20V100-PCIE-32GB").await;
    assert_eq!(v100.status, 200);
    assert_eq!(v100.json()["name"], "V100-PCIE-32GB");
    assert_eq!(v100.json()["peak_tflops"]["fp16"], 112.0);
    app.get("/v1/gpus/RTX-9090").await.problem(404);
    // PyTorch's name for a B300 (aiconfigurator's data); HGX B300's 108 PFLOPS dense FP4 / 8 GPUs = 13,500.
    let b300 = app.get("/v1/gpus/NVIDIA%20B300%20SXM6%20AC").await.json();
    assert_eq!((b300["name"].as_str(), b300["peak_tflops"]["fp4"].as_f64()), (Some("B300"), Some(108_000.0 / 8.0)));
    // Before Blackwell the field is absent, not null.
    assert!(app.get("/v1/gpus/H100").await.json()["peak_tflops"].get("fp4").is_none());
}

#[tokio::test]
async fn systems_survive_a_restart_on_the_same_file() {
    let app = TestApp::new().await;
    assert_eq!(app.post_json("/v1/systems", &cluster()).await.status, 201);
    let path = app.dir.path().join("perfcast.db");
    app.store.close().await;
    let reopened = perfcast::store::Store::open(&path).await.unwrap();
    let s = reopened.get_system("my-a100-cluster").await.unwrap();
    assert_eq!(s.spec.nodes, 64);
    // Nine presets and the one created above.
    assert_eq!(reopened.list_systems().await.unwrap().len(), 10);
}

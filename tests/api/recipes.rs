//! Training precision recipes and CUDA graphs through the real router: an fp8 request with current scaling, fp8
//! parameter gathers and per-layer CUDA graphs answered with its amax operators; a search carrying the options into
//! its winner's `parallelism`; what a GPU or framework lacks as problems naming the field.

use crate::common::TestApp;
use serde_json::{json, Value};

/// Llama 3.1 8B on one DGX H100, tp 2 with sequence parallelism, the distributed optimizer, fp8.
fn llama8b(system: &str, precision: &str, extra: Value) -> Value {
    let mut r = json!({"system": system, "precision": precision, "model": "Llama-3.1-8B",
        "parallelism": {"tp": 2, "dp": 4, "sequence_parallel": true, "micro_batch": 1, "grad_accum": 4,
            "distributed_optimizer": true}});
    for (k, v) in extra.as_object().unwrap() {
        r["parallelism"][k] = v.clone();
    }
    r
}

#[tokio::test]
async fn recipes_and_cuda_graphs_are_answered_and_move_the_time() {
    let app = TestApp::new().await;
    let time = |r: &Value| r["iteration_time_s"].as_f64().unwrap();
    let delayed = app.post_json("/v1/predictions/training", &llama8b("dgx-h100", "fp8", json!({}))).await;
    assert_eq!(delayed.status, 200, "{}", String::from_utf8_lossy(&delayed.body));
    let delayed = delayed.json();
    let opts = json!({"fp8_recipe": "tensorwise", "fp8_param_gather": true, "cuda_graphs": "per_layer"});
    let r = app.post_json("/v1/predictions/training", &llama8b("dgx-h100", "fp8", opts)).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let cs = r.json();
    // Current scaling's amax passes and, with sequence parallelism, its tp amax all-reduces are operators of their
    // own; delayed scaling has neither.
    let has = |p: &Value, name: &str| p["operators"].as_array().unwrap().iter().any(|o| o["name"] == name);
    assert!(has(&cs, "FP8_Amax") && has(&cs, "FP8_Amax_Allreduce"));
    assert!(!has(&delayed, "FP8_Amax"));
    // The answer's `config` echoes the options in effect.
    let c = &cs["config"];
    assert_eq!(
        (&c["fp8_recipe"], &c["fp8_param_gather"], &c["cuda_graphs"]),
        (&json!("tensorwise"), &json!(true), &json!("per_layer"))
    );
    assert_eq!(delayed["config"]["fp8_recipe"], "delayed");
    // The amax passes cost more than the halved parameter gather saves here (one gather per step against a pass
    // per GEMM and micro-batch).
    assert!(time(&cs) > time(&delayed), "{} {}", time(&cs), time(&delayed));
    // `fp4` is nvfp4, on Blackwell: faster than fp8 there.
    let b_fp8 = app.post_json("/v1/predictions/training", &llama8b("dgx-b200", "fp8", json!({}))).await.json();
    let b_fp4 = app.post_json("/v1/predictions/training", &llama8b("dgx-b200", "fp4", json!({}))).await;
    assert_eq!(b_fp4.status, 200, "{}", String::from_utf8_lossy(&b_fp4.body));
    assert!(time(&b_fp4.json()) < time(&b_fp8));
}

#[tokio::test]
async fn what_the_gpu_or_framework_lacks_is_a_problem_naming_the_field() {
    let app = TestApp::new().await;
    let cases = [
        (llama8b("dgx-h100", "fp8", json!({"fp8_recipe": "mxfp8"})), "parallelism.fp8_recipe"),
        (llama8b("dgx-h100", "bf16", json!({"fp8_recipe": "tensorwise"})), "parallelism.fp8_recipe"),
        (llama8b("dgx-h100", "bf16", json!({"fp8_param_gather": true})), "parallelism.fp8_param_gather"),
        (llama8b("dgx-h100", "fp4", json!({})), "precision"),
        (llama8b("dgx-a100-80g", "fp8", json!({})), "precision"),
    ];
    for (req, field) in cases {
        let p = app.post_json("/v1/predictions/training", &req).await.problem(422);
        assert_eq!(p["errors"][0]["field"], field, "{req}: {p}");
    }
    let mut titan = llama8b("dgx-h100", "bf16", json!({"cuda_graphs": "full_iteration"}));
    titan["framework"] = json!("torchtitan");
    let p = app.post_json("/v1/predictions/training", &titan).await.problem(422);
    assert_eq!(p["errors"][0]["field"], "parallelism.cuda_graphs", "{p}");
    let p = app
        .post_json("/v1/predictions/training", &llama8b("dgx-h100", "fp8", json!({"fp8_recipe": "exotic"})))
        .await
        .problem(422);
    assert!(p.to_string().contains("fp8_recipe"), "{p}");
}

#[tokio::test]
async fn the_search_carries_the_recipe_into_its_winners_parallelism() {
    let app = TestApp::new().await;
    let req = json!({"system": "dgx-h100", "gpus": 8, "global_batch": 32, "precision": "fp8",
        "model": "Llama-3.1-8B",
        "training": {"distributed_optimizer": true, "fp8_recipe": "tensorwise", "fp8_param_gather": true,
            "cuda_graphs": "per_layer"},
        "constraints": {"max_virtual_stages": 1, "max_pp": 2}, "top_k": 1});
    let r = app.post_json("/v1/predictions/training/search", &req).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let top = &r.json()["top"][0];
    let par = &top["parallelism"];
    assert_eq!(
        (&par["fp8_recipe"], &par["fp8_param_gather"], &par["cuda_graphs"]),
        (&json!("tensorwise"), &json!(true), &json!("per_layer"))
    );
    // On Hopper the search refuses MXFP8 naming its own field.
    let mut bad = req.clone();
    bad["training"]["fp8_recipe"] = json!("mxfp8");
    let p = app.post_json("/v1/predictions/training/search", &bad).await.problem(422);
    assert_eq!(p["errors"][0]["field"], "training.fp8_recipe", "{p}");
}

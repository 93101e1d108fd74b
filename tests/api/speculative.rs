//! `POST /v1/predictions/inference` with speculative decoding (`speculative`) through the real router.

use crate::common::TestApp;
use serde_json::{json, Value};

/// DeepSeek-R1 under TensorRT-LLM, fp8, tp 8 on a DGX B200: 40 requests of 1,024 prompt and 128 output tokens from
/// 4 clients.
fn r1() -> Value {
    json!({"system": "dgx-b200", "model": "deepseek-ai/DeepSeek-R1", "engine": "trtllm", "precision": "fp8",
        "parallelism": {"tp": 8},
        "workload": {"input_tokens": 1024, "output_tokens": 128, "concurrency": 4, "num_requests": 40}})
}

#[tokio::test]
async fn mtp_yields_e_tokens_per_step_and_every_output_token_is_reported() {
    let app = TestApp::new().await;
    let plain = app.post_json("/v1/predictions/inference", &r1()).await;
    assert_eq!(plain.status, 200, "{}", String::from_utf8_lossy(&plain.body));
    let mut req = r1();
    req["speculative"] = json!({"method": "mtp", "num_speculative_tokens": 3});
    let r = app.post_json("/v1/predictions/inference", &req).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let (p, plain) = (r.json(), plain.json());
    // The configuration echoes the default: k = 3 of a reused MTP layer yields 2.82 tokens per step (TensorRT-LLM
    // tech blog 1's measured DeepSeek-R1 table), no acceptance rate of the request's.
    assert_eq!(p["config"]["speculative"], json!({"method": "mtp", "draft_tokens": 3, "tokens_per_step": 2.82}));
    assert_eq!(p["config"]["model"]["mtp_layers"], 1);
    assert!(plain["config"].get("speculative").is_none(), "{}", plain["config"]);
    // Every request still generates its 128 tokens: output tokens/s = 128 × requests/s, and the mean latency is
    // TTFT + 127 TPOT.
    let sim = &p["simulation"];
    assert_eq!((sim["requests"].as_u64(), sim["completed"].as_u64()), (Some(40), Some(40)));
    let x = p["throughput"]["requests_per_s"].as_f64().unwrap();
    assert!((p["throughput"]["per_gpu"].as_f64().unwrap() * 8.0 - 128.0 * x).abs() < 1e-6 * x);
    let (ttft, tpot, lat) =
        (p["ttft_ms"].as_f64().unwrap(), p["tpot_ms"].as_f64().unwrap(), p["request_latency_ms"].as_f64().unwrap());
    assert!((lat - ttft - 127.0 * tpot).abs() < 1e-6 * lat, "{lat} {ttft} {tpot}");
    // A decode step yields 2.82 tokens at a cost of under 2.82 plain steps: TPOT falls, but not by all of E.
    let plain_tpot = plain["tpot_ms"].as_f64().unwrap();
    assert!(tpot < plain_tpot && tpot > plain_tpot / 2.82, "{tpot} vs {plain_tpot}");
}

#[tokio::test]
async fn bad_speculative_settings_are_problems_naming_their_field() {
    let app = TestApp::new().await;
    let cases: Vec<(Value, Value, &str)> = vec![
        (json!("deepseek-ai/DeepSeek-R1"), json!({"method": "mtp"}), "speculative.num_speculative_tokens"),
        (
            json!("deepseek-ai/DeepSeek-R1"),
            json!({"method": "mtp", "num_speculative_tokens": 0}),
            "speculative.num_speculative_tokens",
        ),
        (
            json!("deepseek-ai/DeepSeek-R1"),
            json!({"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 1.0}),
            "speculative.acceptance_rate",
        ),
        (json!("deepseek-ai/DeepSeek-R1"), json!({"method": "eagle9", "num_speculative_tokens": 2}), "speculative"),
        (json!("deepseek-ai/DeepSeek-R1"), json!({"method": "mtp", "num_draft": 2}), "speculative"),
        // Llama has no multi-token-prediction layers.
        (json!("Llama-3.1-70B"), json!({"method": "mtp", "num_speculative_tokens": 1}), "speculative.method"),
    ];
    for (model, spec, field) in cases {
        let mut req = r1();
        req["model"] = model;
        req["speculative"] = spec;
        let p = app.post_json("/v1/predictions/inference", &req).await.problem(422);
        let got = p["errors"][0]["field"].as_str().unwrap_or_default().to_string();
        assert!(got == field || got.starts_with(&format!("{field}.")), "{req}: {p}");
    }
}

//! `POST /v1/profiles` and the samples it stores, through the real router and a real SQLite file.

use std::io::Write;

use crate::common::TestApp;
use perfcast::config::Config;
use serde_json::Value;

const NEUSIGHT_T4: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/neusight/train_collect/linear__Tesla_T4.csv.gz");

fn gunzip(path: &str) -> Vec<u8> {
    perfcast::eval::datasets::read(std::path::Path::new(path)).unwrap()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

const JSONL: &str = r#"{"op": "linear", "phase": "fwd", "dtype": "bf16", "gpu": "NVIDIA H100 80GB HBM3", "dims": {"M": 4096, "N": 4096, "K": 4096}, "time_us": 191.3}
{"op": "layernorm", "dtype": "bf16", "gpu": "H100", "dims": {"B": 8192, "H": 4096}, "time_us": 41.0}
{"op": "conv2d", "dtype": "bf16", "gpu": "H100", "dims": {"B": 1}, "time_us": 1.0}
{"kind": "comm", "collective": "all_reduce", "bytes": 1048576, "ranks": 8, "nodes": 1, "gpus_per_node": 8, "time_us": 40.0}
"#;

#[tokio::test]
async fn upload_is_idempotent_by_content() {
    let app = TestApp::new().await;
    let first =
        app.post_bytes("/v1/profiles?system=dgx-h100&ci_run=42&git_sha=abc", JSONL.as_bytes().to_vec(), &[]).await;
    assert_eq!(first.status, 201, "{}", String::from_utf8_lossy(&first.body));
    let p = first.json();
    assert_eq!(p["format"], "perfcast_jsonl");
    assert_eq!(p["samples"], 3);
    assert_eq!(p["samples_by_kind"]["op"], 2);
    assert_eq!(p["samples_by_kind"]["comm"], 1);
    assert_eq!(p["duplicate"], false);
    assert_eq!(p["labels"]["ci_run"], "42");
    assert_eq!(p["rejected_total"], 1);
    assert_eq!(p["rejected"][0]["line"], 3);
    assert!(p["rejected"][0]["reason"].as_str().unwrap().contains("conv2d"));
    assert_eq!(first.headers["location"], format!("/v1/profiles/{}", p["id"].as_str().unwrap()));

    let again = app.post_bytes("/v1/profiles?system=dgx-h100", JSONL.as_bytes().to_vec(), &[]).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["id"], p["id"]);
    assert_eq!(again.json()["duplicate"], true);
    // Still one profile, three samples.
    let list = app.get("/v1/profiles").await.json();
    assert_eq!(list["total"], 1);

    let samples = app.get(&format!("/v1/profiles/{}/samples?limit=2", p["id"].as_str().unwrap())).await.json();
    assert_eq!(samples["total"], 3);
    assert_eq!(samples["samples"].as_array().unwrap().len(), 2);
    assert_eq!(samples["samples"][0]["data"]["gpu"], "H100-SXM5-80GB");
    assert_eq!(samples["samples"][0]["data"]["dims"], serde_json::json!([1, 4096, 4096, 4096, 0]));
    let next = samples["next"].as_str().unwrap().to_string();
    let rest = app.get(&next).await.json();
    assert_eq!(rest["samples"][0]["kind"], "comm");
    assert_eq!(rest["samples"][0]["data"]["system"], "dgx-h100");
    // busbw = 2·7/8 · (1,048,576 B / 40 µs = 26.2144 GB/s) = 45.8752 GB/s
    assert!((rest["samples"][0]["data"]["busbw_gbs"].as_f64().unwrap() - 45.8752).abs() < 1e-9);
    assert!(rest.get("next").is_none());
}

#[tokio::test]
async fn neusight_files_upload_gzip_encoded_and_detected() {
    let app = TestApp::new().await;
    let raw = std::fs::read(NEUSIGHT_T4).unwrap();
    let r = app.post_bytes("/v1/profiles", raw, &[("content-encoding", "gzip")]).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let p = r.json();
    assert_eq!(p["format"], "neusight_csv");
    // linear__Tesla_T4.csv.gz has 6,458 data rows (zcat | wc -l = 6,459 with the header).
    assert_eq!(p["samples"], 6458);
    let first = app.get(&format!("/v1/profiles/{}/samples?limit=1", p["id"].as_str().unwrap())).await.json();
    let s = &first["samples"][0]["data"];
    assert_eq!(s["gpu"], "T4");
    assert_eq!(s["dtype"], "fp32");
    // Raw bytes are kept: the stored copy decompresses to the uploaded file.
    let raw_back = app.store.profile_raw(p["id"].as_str().unwrap()).await.unwrap();
    assert_eq!(raw_back, gunzip(NEUSIGHT_T4));
}

#[tokio::test]
async fn unparseable_files_are_422_naming_the_line_and_nothing_is_stored() {
    let app = TestApp::new().await;
    let body = format!("{}{}", JSONL.lines().next().unwrap(), "\n{\"op\": \"linear\", \"dtype\": ");
    let p = app.post_bytes("/v1/profiles?gpu=H100", body.into_bytes(), &[]).await.problem(422);
    assert_eq!(p["errors"][0]["line"], 2);
    assert!(p["errors"][0]["column"].as_u64().is_some());
    assert_eq!(app.get("/v1/profiles").await.json()["total"], 0);

    // Nothing usable: 422 with the reasons; unknown format name; undetectable content.
    let p = app
        .post_bytes(
            "/v1/profiles",
            b"{\"op\": \"conv\", \"dtype\": \"fp16\", \"dims\": {}, \"time_us\": 1}".to_vec(),
            &[],
        )
        .await
        .problem(422);
    assert!(p["detail"].as_str().unwrap().contains("no usable sample"), "{p}");
    let p = app.post_bytes("/v1/profiles?format=excel", b"x".to_vec(), &[]).await.problem(422);
    assert_eq!(p["errors"][0]["field"], "format");
    let p = app.post_bytes("/v1/profiles", b"hello world".to_vec(), &[]).await.problem(422);
    assert!(p["detail"].as_str().unwrap().contains("perfcast_jsonl"), "lists formats tried: {p}");
    app.post_bytes("/v1/profiles?system=nope", JSONL.as_bytes().to_vec(), &[]).await.problem(404);
    let p = app.post_bytes("/v1/profiles?gpu=RTX-9090", JSONL.as_bytes().to_vec(), &[]).await.problem(422);
    assert_eq!(p["errors"][0]["field"], "gpu");
    // A broken gzip stream is a client error, not a 500.
    let r = app.post_bytes("/v1/profiles", b"not gzip".to_vec(), &[("content-encoding", "gzip")]).await;
    assert!(r.status.is_client_error(), "{}", r.status);
    assert_eq!(app.get("/v1/profiles").await.json()["total"], 0);
}

#[tokio::test]
async fn uploads_over_the_limit_are_413_even_when_gzip_is_small() {
    let app = TestApp::with_config(Config { upload_limit_bytes: 4096, ..TestApp::config() }).await;
    let big: String = JSONL.repeat(100);
    app.post_bytes("/v1/profiles", big.clone().into_bytes(), &[]).await.problem(413);
    // 10 kB of JSON lines gzip to a few hundred bytes; the limit applies after decoding (no zip bombs).
    let packed = gzip(big.as_bytes());
    assert!(packed.len() < 4096);
    app.post_bytes("/v1/profiles", packed, &[("content-encoding", "gzip")]).await.problem(413);
    assert_eq!(app.get("/v1/profiles").await.json()["total"], 0);
}

#[tokio::test]
async fn profile_routes_answer_problems_for_unknown_ids_and_bad_paging() {
    let app = TestApp::new().await;
    app.get("/v1/profiles/0000000000000000").await.problem(404);
    app.get("/v1/profiles/0000000000000000/samples").await.problem(404);
    let p = app.get("/v1/profiles?limit=0").await.problem(422);
    assert_eq!(p["errors"][0]["field"], "limit");
    app.get("/v1/profiles?limit=abc").await.problem(400);
    let v: Value = app.get("/v1/profiles?limit=5&offset=0").await.json();
    assert_eq!(v["limit"], 5);
}

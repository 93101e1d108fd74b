//! The OpenAPI document: served, browsable, committed, and in step with the code.

use crate::common::TestApp;

const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");

#[test]
fn committed_spec_matches_the_code() {
    let generated = serde_json::to_value(perfcast::api::openapi()).unwrap();
    let committed: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(COMMITTED).unwrap_or_default())
        .unwrap_or(serde_json::Value::Null);
    assert!(
        generated == committed,
        "openapi/openapi.json is out of date; regenerate it with\n  cargo run --release -- openapi > openapi/openapi.json"
    );
}

#[test]
fn every_route_documents_its_errors_as_problems() {
    let spec = serde_json::to_value(perfcast::api::openapi()).unwrap();
    let paths = spec["paths"].as_object().unwrap();
    for p in
        ["/v1/systems", "/v1/systems/{name}", "/v1/predictions/training", "/v1/gpus", "/v1/gpus/{name}", "/healthz"]
    {
        assert!(paths.contains_key(p), "{p} undocumented");
    }
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            for (code, r) in responses {
                if code.starts_with('4') || code.starts_with('5') {
                    assert!(
                        r["content"]["application/problem+json"]["schema"]["$ref"] == "#/components/schemas/Problem",
                        "{method} {path} {code} is not a problem"
                    );
                }
            }
            if method == "post" && op.get("requestBody").is_some() {
                assert!(responses.keys().any(|c| c == "422"), "{method} {path} lacks 422");
                assert!(responses.keys().any(|c| c == "400"), "{method} {path} lacks 400");
            }
        }
    }
}

#[tokio::test]
async fn spec_is_served_and_docs_are_browsable_without_a_cdn() {
    let app = TestApp::new().await;
    let r = app.get("/openapi.json").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), serde_json::to_value(perfcast::api::openapi()).unwrap());
    let docs = app.get("/docs/").await;
    assert_eq!(docs.status, 200);
    let html = String::from_utf8_lossy(&docs.body);
    assert!(html.contains("swagger-ui"), "{html}");
    assert!(!html.contains("https://"), "docs page loads something from the network: {html}");
    let js = app.get("/docs/swagger-ui-bundle.js").await;
    assert_eq!(js.status, 200);
    assert!(js.body.len() > 100_000);
}

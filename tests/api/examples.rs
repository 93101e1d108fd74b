//! Every request file under `examples/` — the requests the README and the book show (`{{#include}}`) — is sent to
//! the real router of a fresh install (bundled models active) and must be answered with success, carrying the fields
//! the documentation quotes. A documented example that stops working fails here.
//!
//! The directory says the route (the table is repeated in `docs/src/development/docs.md`); a file in a directory
//! this table does not know fails the test, so a new kind of example gets its route here first.

use std::path::{Path, PathBuf};

use crate::common::{TestApp, NON_TRAINING_EXAMPLE_DIRS};
use perfcast::config::Config;
use perfcast::learn::Grid;
use serde_json::Value;

/// Where an example file goes and what its answer must hold.
struct Route {
    path: &'static str,
    status: u16,
    /// JSON pointers into the answer that the documentation quotes; each must be present (and, for a number,
    /// finite and positive).
    fields: &'static [&'static str],
}

const TRAINING: Route = Route {
    path: "/v1/predictions/training",
    status: 200,
    fields: &[
        "/iteration_time_s",
        "/interval/p10_s",
        "/interval/p90_s",
        "/throughput/tokens_per_s",
        "/throughput/mfu",
        "/memory/total_gib",
        "/memory/fits",
        "/bubble_fraction",
        "/stages/0/forward_s",
        "/operators/0/source",
    ],
};
const TIMELINE: Route = Route { path: "/v1/predictions/training/timeline", status: 200, fields: &["/traceEvents/0"] };
const TRAINING_SEARCH: Route = Route {
    path: "/v1/predictions/training/search",
    status: 200,
    fields: &["/evaluated", "/top/0/iteration_time_s", "/top/0/interval/p10_s", "/top/0/memory_gib"],
};
const SERVING: Route = Route {
    path: "/v1/predictions/inference",
    status: 200,
    fields: &[
        "/ttft_ms",
        "/tpot_ms",
        "/request_latency_ms",
        "/throughput/output_tokens_per_s",
        "/throughput/per_gpu",
        "/throughput/per_user",
        "/memory/max_concurrency",
        "/interval/ttft_ms/p10",
        "/decode_step/operators/0/source",
    ],
};
const SERVING_SEARCH: Route = Route {
    path: "/v1/predictions/inference/search",
    status: 200,
    fields: &["/evaluated", "/feasible", "/best/0/tokens_per_s_per_gpu", "/best/0/ttft_ms", "/best/0/tpot_ms"],
};
const OPERATOR: Route =
    Route { path: "/v1/estimates/operator", status: 200, fields: &["/predicted_us", "/analytic_us", "/source"] };
const KERNEL: Route =
    Route { path: "/v1/estimates/kernel", status: 200, fields: &["/estimates/mwp_cwp/cycles", "/estimates/roofline"] };
const COMM: Route = Route { path: "/v1/estimates/comm", status: 200, fields: &["/time_us", "/busbw_gbs"] };
const SYSTEM: Route = Route { path: "/v1/systems", status: 201, fields: &["/name"] };

/// The routes of one example file, from its directory and name; `None` for a directory no route is known for.
fn routes(file: &Path) -> Option<Vec<&'static Route>> {
    let dir = file.parent()?.file_name()?.to_str()?;
    let name = file.file_name()?.to_str()?;
    Some(match dir {
        "serving" if name.starts_with("search_") => vec![&SERVING_SEARCH],
        "serving" => vec![&SERVING],
        "search" => vec![&TRAINING_SEARCH],
        "estimates" if name.starts_with("operator_") => vec![&OPERATOR],
        "estimates" if name.starts_with("kernel_") => vec![&KERNEL],
        "estimates" if name.starts_with("comm_") => vec![&COMM],
        "estimates" => return None,
        "systems" => vec![&SYSTEM],
        // Every other directory is named after a preset system and holds training requests.
        d if !NON_TRAINING_EXAMPLE_DIRS.contains(&d) => vec![&TRAINING, &TIMELINE],
        _ => return None,
    })
}

fn example_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            example_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_request_is_answered_by_a_fresh_install() {
    // A fresh install, as the documentation's answers describe it: the bundled models active, no retraining.
    let config = Config { bundled_models: true, auto_retrain: false, retrain_grid: Grid::Fast, ..TestApp::config() };
    let app = TestApp::started(config).await;
    let mut files = Vec::new();
    example_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples"), &mut files);
    files.sort();
    let mut failures = Vec::new();
    let mut sent = 0;
    for file in &files {
        let shown = file.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap().display().to_string();
        let Some(routes) = routes(file).filter(|_| file.extension().is_some_and(|x| x == "json")) else {
            failures.push(format!(
                "{shown}: no route is known for this file (a .json request in a directory of the table in \
                 tests/api/examples.rs)"
            ));
            continue;
        };
        let body: Value = match serde_json::from_slice(&std::fs::read(file).unwrap()) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{shown}: not JSON: {e}"));
                continue;
            }
        };
        for route in routes {
            sent += 1;
            let r = app.post_json(route.path, &body).await;
            if r.status.as_u16() != route.status {
                failures.push(format!(
                    "{shown} → POST {}: {} (expected {}): {}",
                    route.path,
                    r.status,
                    route.status,
                    String::from_utf8_lossy(&r.body)
                ));
                continue;
            }
            let answer = r.json();
            for pointer in route.fields {
                match answer.pointer(pointer) {
                    None => failures.push(format!("{shown} → POST {}: the answer has no {pointer}", route.path)),
                    Some(Value::Number(n)) if !(n.as_f64().unwrap().is_finite() && n.as_f64().unwrap() > 0.0) => {
                        failures.push(format!("{shown} → POST {}: {pointer} = {n}", route.path))
                    }
                    Some(_) => {}
                }
            }
        }
    }
    assert!(failures.is_empty(), "examples that are not answered as documented:\n{}", failures.join("\n"));
    // 10 training requests (each also as a timeline), 2 serving, 1 training search, 3 estimates, 1 system.
    assert!(sent >= 27, "{sent} requests sent");
}

#[test]
fn a_file_in_an_unknown_directory_has_no_route() {
    // The guard of the test above: a new kind of example is not silently sent to the training route.
    assert!(routes(Path::new("examples/estimates/latency.json")).is_none());
    assert!(routes(Path::new("examples/serving/x.json")).is_some_and(|r| r[0].path == "/v1/predictions/inference"));
    assert!(routes(Path::new("examples/dgx-h100/x.json")).is_some_and(|r| r.len() == 2));
}

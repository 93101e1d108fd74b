//! Property-based fuzzing of every JSON request type through the real router (proptest; cargo-fuzz needs a
//! nightly toolchain CI does not have). Each case starts from a valid body of a route and applies up to four
//! structural mutations — a value replaced by an arbitrary JSON value (edge numbers included: 0, −1, 2⁵³+1,
//! u64::MAX, 1e308, 1e-300), a field removed, an unknown field added — or sends arbitrary bytes. Whatever comes
//! in, the answer must be:
//!
//! - never a 5xx (a client's mistake is never a server error; a panic would be a 500);
//! - an error as RFC 9457 problem+json whose `status` is the HTTP status, with `type`, `title` and `detail`;
//! - a success as a JSON body.
//!
//! The seed is fixed by proptest's deterministic runner, so a failure replays; `PROPTEST_CASES` raises the count.

use crate::common::{self, TestApp};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{json, Map, Value};

/// The POST routes that take JSON, each with a valid body to mutate.
fn seeds() -> Vec<(&'static str, Value)> {
    let training = common::example_requests().into_iter().next().expect("an example request").1;
    vec![
        ("/v1/predictions/training", training),
        (
            "/v1/predictions/training",
            json!({"system": "dgx-h100", "precision": "bf16",
                "model": {"name": "Llama-3 8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                          "ffn_hidden": 14336, "seq_len": 4096, "vocab": 128256, "norm": "rmsnorm",
                          "activation": "swiglu", "attention": "flash"},
                "parallelism": {"tp": 2, "pp": 2, "dp": 4, "micro_batch": 1, "global_batch": 64,
                                "sequence_parallel": true, "virtual_stages": 2, "recompute": "selective",
                                "zero_stage": 1, "context_parallel": 1},
                "run": {"tokens": 1e12}}),
        ),
        (
            "/v1/predictions/training/search",
            json!({"system": "dgx-h100", "gpus": 16, "global_batch": 64, "precision": "bf16", "top_k": 3,
                "model": {"name": "Llama-3 8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                          "ffn_hidden": 14336, "seq_len": 4096, "vocab": 128256, "norm": "rmsnorm",
                          "activation": "swiglu", "attention": "flash"},
                "constraints": {"max_pp": 4}}),
        ),
        (
            "/v1/predictions/inference",
            json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "parallelism": {"tp": 4, "pp": 1, "ep": 1},
                "precision": "bf16", "engine": "vllm", "engine_options": {"max_num_seqs": 256,
                "max_num_batched_tokens": 4096, "gpu_memory_utilization": 0.9, "cuda_graphs": true},
                "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 32}}),
        ),
        (
            "/v1/predictions/inference",
            json!({"system": "dgx-h100", "parallelism": {"tp": 2, "ep": 2}, "kv_cache_dtype": "fp8",
                "model": {"name": "moe", "layers": 4, "hidden": 1024, "heads": 16, "kv_heads": 4, "head_dim": 64,
                          "vocab": 32000, "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 1024,
                          "shared_experts": 1, "dense_layers": 1}},
                "workload": {"input_tokens": 512, "output_tokens": 64, "request_rate": 4.0}}),
        ),
        (
            "/v1/predictions/inference/search",
            json!({"system": "dgx-h100", "model": "Llama-3.1-8B", "gpus": 8,
                "workload": {"input_tokens": 512, "output_tokens": 128}, "slo": {"ttft_ms": 500, "tpot_ms": 30},
                "constraints": {"tp": [1, 2], "pp": [1], "precisions": ["bf16"], "concurrency": [1, 8, 64]},
                "top_k": 2}),
        ),
        (
            "/v1/estimates/operator",
            json!({"gpu": "H100-SXM5-80GB", "op": "linear", "phase": "fwd", "dtype": "bf16",
                   "dims": {"B": 1, "M": 4096, "N": 4096, "K": 4096}}),
        ),
        (
            "/v1/estimates/kernel",
            json!({"gpu": {"sm_count": 16, "clock_ghz": 1.0, "memory_bandwidth_gbs": 80, "dram_latency_cycles": 420,
                           "departure_delay_coal_cycles": 4, "departure_delay_uncoal_cycles": 10, "issue_cycles": 4},
                   "kernel": {"comp_insts": 27, "coal_mem_insts": 0, "uncoal_mem_insts": 6, "synch_insts": 6,
                              "threads_per_block": 128, "blocks": 80, "active_blocks_per_sm": 5,
                              "uncoal_per_mw": 32, "load_bytes_per_warp": 128},
                   "models": ["mwp_cwp", "roofline"]}),
        ),
        (
            "/v1/estimates/comm",
            json!({"system": "dgx-h100", "collective": "all_reduce", "bytes": 1073741824, "nodes": 1,
                   "gpus_per_node": 8, "dtype": "bf16"}),
        ),
        (
            "/v1/systems",
            json!({"name": "fuzz-cluster", "gpu": "A100-SXM4-80GB", "gpus_per_node": 8, "nodes": 64,
                   "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 300, "latency_us": 2.0},
                   "inter_node": {"kind": "infiniband-hdr", "bandwidth_gbs": 100, "latency_us": 5.0}}),
        ),
        ("/v1/regressors/retrain", json!({"keys": ["linear.fwd.fp16"], "grid": "minimal", "force": false})),
        ("/v1/systems/dgx-h100/calibrate", json!({})),
    ]
}

/// Arbitrary JSON values, weighted towards the ones that break numeric code.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop_oneof![
            Just(0i64),
            Just(-1),
            Just(1),
            Just(2),
            Just(3),
            Just(i64::MIN),
            Just(i64::MAX),
            Just((1i64 << 53) + 1)
        ]
        .prop_map(Value::from),
        Just(Value::from(u64::MAX)),
        any::<i64>().prop_map(Value::from),
        prop_oneof![Just(1e308), Just(-1e308), Just(1e-300), Just(0.5), Just(-0.0), any::<f64>()].prop_map(
            // serde_json turns non-finite floats into null
            |f| serde_json::Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null)
        ),
        "[a-z_]{0,12}".prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// One structural mutation: `at` picks a node of the tree (by pre-order index, modulo its size).
#[derive(Debug, Clone)]
enum Mutation {
    Replace { at: usize, with: Value },
    Remove { at: usize },
    AddField { at: usize, name: String, value: Value },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any_json()).prop_map(|(at, with)| Mutation::Replace { at, with }),
        2 => any::<usize>().prop_map(|at| Mutation::Remove { at }),
        1 => (any::<usize>(), "[a-z_]{1,12}", any_json())
            .prop_map(|(at, name, value)| Mutation::AddField { at, name, value }),
    ]
}

fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count).sum(),
        Value::Object(o) => o.values().map(count).sum(),
        _ => 0,
    }
}

/// Applies `m` to the node with pre-order index `*at` (counting down); returns true once applied.
fn apply(v: &mut Value, at: &mut usize, m: &Mutation) -> bool {
    if *at == 0 {
        match m {
            Mutation::Replace { with, .. } => *v = with.clone(),
            Mutation::AddField { name, value, .. } => match v {
                Value::Object(o) => {
                    o.insert(name.clone(), value.clone());
                }
                other => *other = value.clone(),
            },
            Mutation::Remove { .. } => *v = Value::Null,
        }
        return true;
    }
    *at -= 1;
    match v {
        Value::Array(a) => {
            for i in 0..a.len() {
                if *at == 0 && matches!(m, Mutation::Remove { .. }) {
                    a.remove(i);
                    return true;
                }
                if apply(&mut a[i], at, m) {
                    return true;
                }
            }
        }
        Value::Object(o) => {
            let keys: Vec<String> = o.keys().cloned().collect();
            for k in keys {
                if *at == 0 && matches!(m, Mutation::Remove { .. }) {
                    o.remove(&k);
                    return true;
                }
                if apply(o.get_mut(&k).unwrap(), at, m) {
                    return true;
                }
            }
        }
        _ => {}
    }
    false
}

fn mutate(mut body: Value, mutations: &[Mutation]) -> Value {
    for m in mutations {
        let n = count(&body);
        let mut at = match m {
            Mutation::Replace { at, .. } | Mutation::Remove { at } | Mutation::AddField { at, .. } => at % n,
        };
        apply(&mut body, &mut at, m);
    }
    body
}

/// The contract every answer keeps, whatever the input.
fn check_answer(route: &str, sent: &[u8], r: &common::Reply) -> Result<(), TestCaseError> {
    let shown = || format!("{route} ← {}", String::from_utf8_lossy(&sent[..sent.len().min(600)]));
    let status = r.status.as_u16();
    prop_assert!(status < 500, "{status} for {}: {}", shown(), String::from_utf8_lossy(&r.body));
    let body: Value = serde_json::from_slice(&r.body)
        .map_err(|e| TestCaseError::fail(format!("{status} body is not JSON ({e}) for {}", shown())))?;
    if status >= 400 {
        prop_assert_eq!(&r.content_type, "application/problem+json", "for {}", shown());
        prop_assert_eq!(body["status"].as_u64(), Some(status as u64), "for {}: {}", shown(), body);
        prop_assert!(body["type"].as_str().is_some_and(|t| t.starts_with("urn:perfcast:problem:")), "{}", body);
        prop_assert!(body["title"].is_string() && body["detail"].is_string(), "{}", body);
    }
    Ok(())
}

fn runner(cases: u32) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(cases);
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

#[test]
fn mutated_json_bodies_never_get_a_server_error() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let app = rt.block_on(TestApp::new());
    let seeds = seeds();
    // Every seed is valid as it stands (so mutations start from the routes' real code paths).
    for (route, seed) in &seeds {
        let r = rt.block_on(app.post_json(route, seed));
        assert!(r.status.is_success(), "seed of {route}: {} {}", r.status, String::from_utf8_lossy(&r.body));
    }
    let strategy = (0..seeds.len(), prop::collection::vec(mutation(), 1..5));
    let statuses = std::sync::Mutex::new(std::collections::BTreeMap::<u16, u32>::new());
    runner(600)
        .run(&strategy, |(which, mutations)| {
            let (route, seed) = &seeds[which];
            let body = serde_json::to_vec(&mutate(seed.clone(), &mutations)).unwrap();
            let r = rt.block_on(app.post_raw(route, "application/json", body.clone()));
            *statuses.lock().unwrap().entry(r.status.as_u16()).or_default() += 1;
            check_answer(route, &body, &r)
        })
        .unwrap();
    // The mutations reach both sides: some bodies still succeed, many are refused.
    let statuses = statuses.into_inner().unwrap();
    println!("statuses: {statuses:?}");
    assert!(statuses.range(200..300).map(|(_, n)| n).sum::<u32>() > 0, "{statuses:?}");
    assert!(statuses.get(&422).copied().unwrap_or(0) > 0, "{statuses:?}");
}

#[test]
fn arbitrary_bytes_as_json_bodies_are_client_errors() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let app = rt.block_on(TestApp::new());
    // Calibration takes no body (it ignores one), so it is not among the routes that must refuse bad bytes.
    let routes: Vec<&str> = seeds().iter().map(|(r, _)| *r).filter(|r| !r.ends_with("/calibrate")).collect();
    let bytes = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        // Almost JSON: a valid body cut short.
        (0..routes.len(), any::<prop::sample::Index>()).prop_map(|(i, cut)| {
            let b = serde_json::to_vec(&seeds()[i].1).unwrap();
            b[..cut.index(b.len())].to_vec()
        }),
    ];
    runner(300)
        .run(&(0..routes.len(), bytes), |(which, body)| {
            let route = routes[which];
            let r = rt.block_on(app.post_raw(route, "application/json", body.clone()));
            check_answer(route, &body, &r)?;
            // Bytes that are not JSON are never accepted.
            if serde_json::from_slice::<Value>(&body).is_err() {
                prop_assert!(r.status.is_client_error(), "{} accepted non-JSON: {}", route, r.status);
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn the_mutator_reaches_every_node() {
    // Hand check of the pre-order indexing the fuzzer relies on: {"a": [1, 2], "b": 3} has 5 nodes.
    let v = json!({"a": [1, 2], "b": 3});
    assert_eq!(count(&v), 5);
    assert_eq!(mutate(v.clone(), &[Mutation::Replace { at: 3, with: json!("x") }]), json!({"a": [1, "x"], "b": 3}));
    assert_eq!(mutate(v.clone(), &[Mutation::Remove { at: 4 }]), json!({"a": [1, 2]}));
    assert_eq!(mutate(v.clone(), &[Mutation::Remove { at: 2 }]), json!({"a": [2], "b": 3}));
    assert_eq!(
        mutate(v, &[Mutation::AddField { at: 0, name: "c".into(), value: json!(null) }]),
        json!({"a": [1, 2], "b": 3, "c": null})
    );
}

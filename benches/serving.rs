//! Serving speed: one serving prediction (Llama-3.1-70B, tp 4, 32 concurrent requests on H100: the steady state
//! and the simulated benchmark of 1,000 requests) with every operator class answered by a LightGBM regressor
//! (operator times from the process-wide caches after the first prediction, as in the service: "warm"), with the
//! analytic backend; the simulated benchmark of issue 27 (1,000 requests of 1,024 in / 1,024 out, 64 clients: a
//! million simulated tokens); and the serving configuration search of the README (8 GPUs, TTFT ≤ 500 ms, TPOT ≤
//! 30 ms at p90). Configurations per second = the search's `evaluated` (printed once) divided by its time. Run:
//! `cargo bench --bench serving`.

use std::sync::Arc;

mod common;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use perfcast::cost::AnalyticBackend;
use perfcast::hw::{presets, Precision};
use perfcast::learn::backend::LearnedBackend;
use perfcast::llm::serving::search::{search, InferenceSearchRequest};
use perfcast::llm::serving::{predict, validate, InferenceRequest, ServingConstants, ServingDerated};

fn bench(c: &mut Criterion) {
    let req: InferenceRequest =
        serde_json::from_str(include_str!("../examples/serving/llama-3.1-70b_tp4_h100.json")).expect("example parses");
    let system = presets().into_iter().find(|s| s.name == req.system).unwrap().resolve().unwrap();
    let consts = ServingConstants::CALIBRATED;
    let learned = ServingDerated::new(
        LearnedBackend::new(system.clone(), Arc::new(common::all_regressors(&system, Precision::Bf16))),
        consts,
    );
    let cfg = validate(&req, &system).unwrap();
    let p = predict(&cfg, &learned, consts).unwrap();
    assert!(p.sources.iter().any(|s| s.starts_with("regressor:attention_decode")), "{:?}", p.sources);
    c.bench_function("serving_prediction_llama70b_tp4_all_regressors_warm", |b| {
        b.iter(|| {
            let cfg = validate(black_box(&req), &system).unwrap();
            black_box(predict(&cfg, &learned, consts).unwrap().tpot_ms)
        })
    });
    let mut long = req.clone();
    long.workload = perfcast::llm::serving::request::Workload::closed(1024, 1024, 64);
    let p = predict(&validate(&long, &system).unwrap(), &learned, consts).unwrap();
    let sim = p.simulation.as_ref().unwrap();
    eprintln!(
        "simulated benchmark: {} requests, {} steps, {} tokens",
        sim.completed,
        sim.steps,
        sim.completed as u64 * 1024
    );
    c.bench_function("serving_simulation_1000_requests_1024_in_1024_out_c64_all_regressors_warm", |b| {
        b.iter(|| {
            let cfg = validate(black_box(&long), &system).unwrap();
            black_box(predict(&cfg, &learned, consts).unwrap().ttft_ms)
        })
    });
    let analytic = ServingDerated::new(AnalyticBackend::new(system.clone()), consts);
    c.bench_function("serving_prediction_llama70b_tp4_analytic", |b| {
        b.iter(|| {
            let cfg = validate(black_box(&req), &system).unwrap();
            black_box(predict(&cfg, &analytic, consts).unwrap().tpot_ms)
        })
    });
    let sreq: InferenceSearchRequest =
        serde_json::from_str(include_str!("../examples/serving/search_llama-3.1-70b_8xh100.json")).unwrap();
    let r = search(&sreq, &learned, consts).unwrap();
    eprintln!(
        "serving search: {} configurations evaluated ({} solved, {} simulated) per search",
        r.evaluated, r.solved, r.simulated
    );
    c.bench_function("serving_search_llama70b_8gpu_all_regressors_warm", |b| {
        b.iter(|| black_box(search(black_box(&sreq), &learned, consts).unwrap().evaluated))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

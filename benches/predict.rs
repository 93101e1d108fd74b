//! Prediction speed: one training iteration (decomposition, operator timing, eq. 7) with the analytic backend
//! and with a regressor active for every operator it times (operator times come from the process-wide cache
//! after the first prediction, as in the service), and one operator estimate with a regressor, cached and not.
//! Run: `cargo bench --bench predict`.

use std::sync::Arc;

mod common;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use perfcast::cost::{AnalyticBackend, CostBackend};
use perfcast::hw::{presets, Precision};
use perfcast::learn::backend::LearnedBackend;
use perfcast::llm::{predict, validate, TrainingRequest};
use perfcast::op::{OpClass, OpShape, Phase};

fn bench(c: &mut Criterion) {
    let req: TrainingRequest =
        serde_json::from_str(include_str!("../examples/perlmutter-a100-40g/gpt-20b_pp4-tp4-dp8.json"))
            .expect("example parses");
    let system = presets().into_iter().find(|s| s.name == req.system).unwrap().resolve().unwrap();
    let analytic = AnalyticBackend::new(system.clone());
    c.bench_function("training_prediction_gpt20b_128gpu_analytic", |b| {
        b.iter(|| {
            let cfg = validate(&req.model, &req.parallelism, req.precision, system.total_gpus()).unwrap();
            black_box(predict(&cfg, &analytic).unwrap().iteration_time_s)
        })
    });
    let learned = LearnedBackend::new(system.clone(), Arc::new(common::all_regressors(&system, Precision::Fp16)));
    let cfg = validate(&req.model, &req.parallelism, req.precision, system.total_gpus()).unwrap();
    let p = predict(&cfg, &learned).unwrap();
    assert!(p.sources.iter().all(|s| s.starts_with("regressor:") || s == "analytic"));
    assert!(p.operators.iter().filter(|o| o.source.to_string().starts_with("regressor:")).count() >= 20);
    c.bench_function("training_prediction_gpt20b_128gpu_all_regressors", |b| {
        b.iter(|| {
            let cfg = validate(&req.model, &req.parallelism, req.precision, system.total_gpus()).unwrap();
            black_box(predict(&cfg, &learned).unwrap().iteration_time_s)
        })
    });
    let shape = OpShape { class: OpClass::Linear, phase: Phase::Fwd, dims: [1, 8192, 4608, 6144, 0] };
    c.bench_function("operator_prediction_linear_with_regressor_cached", |b| {
        b.iter(|| black_box(learned.compute(black_box(&shape), Precision::Fp16).unwrap().time_us))
    });
    c.bench_function("operator_prediction_linear_with_regressor_uncached", |b| {
        b.iter(|| black_box(learned.compute_uncached(black_box(&shape), Precision::Fp16).unwrap().time_us))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

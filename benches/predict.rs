//! Prediction speed: one training iteration (decomposition, operator timing, eq. 7) with the analytic backend
//! and with a regressor active for every operator it times (operator times come from the process-wide cache
//! after the first prediction, as in the service), and one operator estimate with a regressor, cached and not.
//! Run: `cargo bench --bench predict`.

use std::sync::Arc;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use perfcast::backend::{AnalyticBackend, CostBackend, LearnedBackend};
use perfcast::hw::{presets, Precision, System};
use perfcast::learn::features::OP_FEATURES;
use perfcast::learn::fit::{fit, Grid, TrainingSet};
use perfcast::learn::lgbm::Model;
use perfcast::learn::{op_key, ActiveRegressor, Registry};
use perfcast::llm::{predict, validate, TrainingRequest};
use perfcast::op::{estimate, OpClass, OpShape, Phase};

/// A regressor for every (class, phase) of fp16 on the system's GPU, trained on synthetic samples (analytic time ×
/// a smooth shape-dependent factor): the models are real LightGBM models of realistic size, so prediction cost is
/// what production pays.
fn all_regressors(system: &System) -> Registry {
    let mut models = Vec::new();
    for class in OpClass::ALL {
        for phase in [Phase::Fwd, Phase::Bwd] {
            let mut set = TrainingSet::new(&OP_FEATURES);
            let mut key = 0u64;
            for a in [64u64, 256, 1024, 4096, 16384] {
                for b in [64u64, 512, 2048, 8192] {
                    for c in [64u64, 128, 1024, 4096] {
                        let dims: [u64; 4] = match class {
                            OpClass::Linear | OpClass::Bmm => [1 + a / 1024, a, b, c],
                            OpClass::FlashAttention => [1 + a / 4096, b, 16, 128],
                            OpClass::Embedding => [a, b * 4, c, 0],
                            OpClass::Optimizer => [a * b * c / 64, 0, 0, 0],
                            OpClass::Elementwise => [a, b, 2, 0],
                            _ => [a, b * c / 64, 0, 0],
                        };
                        let shape = OpShape { class, phase, dims };
                        let Ok(cost) = estimate(&shape, Precision::Fp16, &system.gpu) else { continue };
                        let factor = 1.2 + 0.3 * ((a as f64).ln() - (c as f64).ln()).tanh();
                        let x = perfcast::learn::features::op_features(&shape, Precision::Fp16, &system.gpu, &cost);
                        set.push(&x, cost.time_us, cost.time_us * factor, key);
                        key += 1;
                    }
                }
            }
            let fitted = fit(&set, Grid::Fast, &mut |_| {}).expect("synthetic fit");
            models.push(ActiveRegressor {
                key: op_key(class, phase, Precision::Fp16, None),
                version: 1,
                model: Model::from_text(&fitted.model_text).expect("model loads"),
                feature_names: OP_FEATURES.iter().map(|s| s.to_string()).collect(),
                validation_mape: fitted.validation.mape,
            });
        }
    }
    Registry::new(models)
}

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
    let learned = LearnedBackend::new(system.clone(), Arc::new(all_regressors(&system)));
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
    let shape = OpShape { class: OpClass::Linear, phase: Phase::Fwd, dims: [1, 8192, 4608, 6144] };
    c.bench_function("operator_prediction_linear_with_regressor_cached", |b| {
        b.iter(|| black_box(learned.compute(black_box(&shape), Precision::Fp16).unwrap().time_us))
    });
    c.bench_function("operator_prediction_linear_with_regressor_uncached", |b| {
        b.iter(|| black_box(learned.compute_uncached(black_box(&shape), Precision::Fp16).unwrap().time_us))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Speed of one training-iteration prediction (decomposition, operator timing, eq. 7) with the analytic
//! backend, for S1's GPT-20B on Perlmutter. Run: `cargo bench --bench predict`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use perfcast::backend::AnalyticBackend;
use perfcast::hw::presets;
use perfcast::llm::{predict, validate, TrainingRequest};

fn bench(c: &mut Criterion) {
    let req: TrainingRequest =
        serde_json::from_str(include_str!("../examples/perlmutter-a100-40g/gpt-20b_pp4-tp4-dp8.json"))
            .expect("example parses");
    let system = presets().into_iter().find(|s| s.name == req.system).unwrap().resolve().unwrap();
    let backend = AnalyticBackend::new(system.clone());
    c.bench_function("training_prediction_gpt20b_128gpu_analytic", |b| {
        b.iter(|| {
            let cfg = validate(&req.model, &req.parallelism, req.precision, system.total_gpus()).unwrap();
            black_box(predict(&cfg, &backend).unwrap().iteration_time_s)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

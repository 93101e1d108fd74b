//! Search speed: GPT-3 175B (96 layers, hidden 12288, 96 heads, seq 2048, vocab 51200) on the `dgx-h100` preset's
//! 1,024 H100s (128 nodes × 8), global batch 1,536, bf16, with a LightGBM regressor active for every (operator
//! class, phase) it times. Criterion reports candidate configurations evaluated per second (Throughput::Elements =
//! the search's `evaluated`). Three variants: analytic backend; all regressors (derated as the service does) with the process-wide operator-time
//! cache warm (what a running service sees after its first search); all regressors with a fresh registry, so every
//! distinct operator shape runs LightGBM once (the first search after a retrain).
//! Run: `cargo bench --bench search`.

mod common;

use std::sync::Arc;

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use perfcast::cost::{AnalyticBackend, Derated, Efficiency};
use perfcast::hw::{presets, Precision};
use perfcast::learn::backend::LearnedBackend;
use perfcast::llm::search::{search, SearchRequest};

fn request() -> SearchRequest {
    serde_json::from_value(serde_json::json!({"system": "dgx-h100", "gpus": 1024, "global_batch": 1536,
        "precision": "bf16",
        "model": {"name": "GPT-3 175B", "layers": 96, "hidden": 12288, "heads": 96, "seq_len": 2048,
                  "vocab": 51200, "attention": "flash", "rotary": false, "tied_embeddings": true},
        "training": {"distributed_optimizer": true, "overlap_grad_reduce": true},
        "constraints": {"max_tp": 8, "micro_batches": [1, 2, 4, 8], "max_virtual_stages": 12},
        "top_k": 5}))
    .expect("request parses")
}

fn bench(c: &mut Criterion) {
    let system = presets().into_iter().find(|s| s.name == "dgx-h100").unwrap().resolve().unwrap();
    assert_eq!(system.total_gpus(), 1024);
    let req = request();
    let analytic = AnalyticBackend::new(system.clone());
    let first = search(&req, &analytic, &mut |_, _| {}).unwrap();
    let evaluated = first.evaluated;
    eprintln!(
        "search space: {} candidates, {} fit, {} simulated; best {:?} at {:.3} s",
        first.evaluated, first.fitting, first.simulated, first.top[0].parallelism, first.top[0].iteration_time_s
    );
    let mut g = c.benchmark_group("search_gpt3_175b_1024_h100");
    g.throughput(Throughput::Elements(evaluated));
    g.bench_function("analytic", |b| b.iter(|| black_box(search(&req, &analytic, &mut |_, _| {}).unwrap().evaluated)));

    let texts = common::regressor_texts(&system, Precision::Bf16);
    // As the service builds it: the learned backend, its analytic answers derated.
    let learned =
        Derated::new(LearnedBackend::new(system.clone(), Arc::new(common::registry(&texts))), Efficiency::CALIBRATED);
    let r = search(&req, &learned, &mut |_, _| {}).unwrap();
    let p = &r.top[0].prediction;
    let learned_ops = p.operators.iter().filter(|o| o.source.to_string().starts_with("regressor:")).count();
    assert!(learned_ops >= 15, "{learned_ops} operators corrected by a regressor");
    assert!(p
        .operators
        .iter()
        .filter(|o| o.precision.is_some())
        .all(|o| o.source.to_string().starts_with("regressor:")));
    g.bench_function("all_regressors_warm_cache", |b| {
        b.iter(|| black_box(search(&req, &learned, &mut |_, _| {}).unwrap().evaluated))
    });
    g.sample_size(10);
    g.bench_function("all_regressors_cold_cache", |b| {
        b.iter_batched(
            || {
                Derated::new(
                    LearnedBackend::new(system.clone(), Arc::new(common::registry(&texts))),
                    Efficiency::CALIBRATED,
                )
            },
            |fresh| black_box(search(&req, &fresh, &mut |_, _| {}).unwrap().evaluated),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

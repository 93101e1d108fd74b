//! The search against brute force through the predictor, its constraints and its validation.

use super::*;
use crate::cost::AnalyticBackend;
use crate::hw::presets;
use crate::llm::config::{ParallelSpec, Recompute};

fn dgx_h100() -> crate::hw::System {
    presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap()
}

fn llama8b_request(extra: serde_json::Value) -> SearchRequest {
    let mut r = serde_json::json!({"system": "dgx-h100", "gpus": 16, "global_batch": 64, "precision": "bf16",
        "model": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
                  "seq_len": 4096, "vocab": 128256, "norm": "rmsnorm", "activation": "swiglu", "attention": "flash"},
        "training": {"distributed_optimizer": true}, "top_k": 5});
    for (k, v) in extra.as_object().unwrap() {
        r[k] = v.clone();
    }
    serde_json::from_value(r).unwrap()
}

#[test]
fn every_candidate_is_a_valid_configuration() {
    let req = llama8b_request(serde_json::json!({"constraints": {"context_parallel": [1, 2]}}));
    let sys = dgx_h100();
    let sp = space(&req, 8, sys.total_gpus()).unwrap();
    let mut n = 0;
    enumerate(&req, &sp, &mut |c| {
        let cfg = validate(&req.model, &c.parallelism(&req), req.precision, sys.total_gpus())
            .unwrap_or_else(|e| panic!("{c:?}: {e}"));
        assert_eq!(cfg.gpus(), 16);
        let mut mine = sp.base.clone();
        mine.layer_split = LayerSplit::Uniform;
        Evaluator::configure(&mut mine, &req.training, &c, 64);
        assert_eq!(mine, cfg);
        n += 1;
    });
    assert_eq!(n as u64, count_candidates(&req, 8, sys.total_gpus()).unwrap());
    assert!(n > 100, "{n}");
}

#[test]
fn the_top_k_are_exactly_the_fastest_that_fit_and_match_the_predictor() {
    let plain = llama8b_request(serde_json::json!({"constraints": {"max_virtual_stages": 4}}));
    top_k_by_brute_force(&plain, &AnalyticBackend::new(dgx_h100()));
    // NeMo's overlaps on every candidate that can use them, with contention: the same arithmetic.
    let nemo = llama8b_request(serde_json::json!({"constraints": {"max_virtual_stages": 4},
        "training": {"distributed_optimizer": true, "overlap_grad_reduce": true, "overlap_param_gather": true,
                     "align_param_gather": true, "tp_comm_overlap": true, "overlap_p2p_comm": true,
                     "bucket_size": 134217728}}));
    let derated = crate::cost::Derated::new(AnalyticBackend::new(dgx_h100()), crate::cost::Efficiency::CALIBRATED);
    top_k_by_brute_force(&nemo, &derated);
}

fn top_k_by_brute_force(req: &SearchRequest, backend: &dyn CostBackend) {
    let req = req.clone();
    let sys = backend.system().clone();
    let res = search(&req, backend, &mut |_, _| {}).unwrap();
    assert_eq!(res.top.len(), 5);
    assert!(res.simulated < res.fitting, "pruning simulated {} of {}", res.simulated, res.fitting);
    // Brute force: predict every candidate through the endpoint's code and rank those that fit.
    let sp = space(&req, 8, sys.total_gpus()).unwrap();
    let mut all: Vec<(f64, ParallelSpec)> = Vec::new();
    let mut evaluated = 0;
    enumerate(&req, &sp, &mut |c| {
        evaluated += 1;
        let cfg = validate(&req.model, &c.parallelism(&req), req.precision, 1024).unwrap();
        let p = predict(&cfg, backend).unwrap();
        if p.memory.fits {
            all.push((p.iteration_time_s, c.parallelism(&req)));
        }
    });
    assert_eq!((res.evaluated, res.fitting), (evaluated, all.len() as u64));
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (hit, (t, _)) in res.top.iter().zip(&all) {
        assert!((hit.iteration_time_s / t - 1.0).abs() < 1e-9, "{} vs {t}", hit.iteration_time_s);
        assert!(hit.prediction.memory.fits);
    }
    // Ranked fastest first.
    assert!(res.top.windows(2).all(|w| w[0].iteration_time_s <= w[1].iteration_time_s));
}

#[test]
fn constraints_restrict_the_space_and_bad_ones_name_their_field() {
    let sys = dgx_h100();
    let fixed = llama8b_request(serde_json::json!({"constraints": {"tp": 2, "max_pp": 2, "recompute": ["full"],
        "sequence_parallel": [true], "micro_batches": [1], "max_virtual_stages": 1}}));
    // tp 2, pp ∈ {1, 2}, dp = 8 or 4, b 1, full recompute, SP on: 2 candidates.
    assert_eq!(count_candidates(&fixed, 8, sys.total_gpus()).unwrap(), 2);
    let res = search(&fixed, &AnalyticBackend::new(sys.clone()), &mut |_, _| {}).unwrap();
    assert!(res.top.iter().all(|h| h.parallelism.tp == 2 && h.parallelism.recompute == Recompute::Full));
    for (extra, field) in [
        (serde_json::json!({"constraints": {"tp": 3}}), "constraints.tp"),
        (serde_json::json!({"gpus": 0}), "gpus"),
        (serde_json::json!({"top_k": 0}), "top_k"),
        (serde_json::json!({"constraints": {"micro_batches": []}}), "constraints.micro_batches"),
        (serde_json::json!({"constraints": {"context_parallel": [3]}}), "constraints.context_parallel"),
        (serde_json::json!({"training": {"zero_stage": 5}}), "training.zero_stage"),
    ] {
        let e = count_candidates(&llama8b_request(extra.clone()), 8, sys.total_gpus()).unwrap_err();
        assert_eq!(e.field, field, "{extra}");
    }
}

#[test]
fn nothing_fits_is_reported() {
    // Llama-3 8B on one GPU without sharding: 8 B parameters · 16 bytes = 128 GB > 80 GiB.
    let req = llama8b_request(serde_json::json!({"gpus": 1, "global_batch": 8,
        "training": {"zero_stage": 0}}));
    let res = search(&req, &AnalyticBackend::new(dgx_h100()), &mut |_, _| {}).unwrap();
    assert!(res.evaluated > 0);
    assert_eq!((res.fitting, res.top.len()), (0, 0));
    assert!(res.warnings[0].contains("fits"), "{:?}", res.warnings);
}

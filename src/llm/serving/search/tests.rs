//! Tests of the serving configuration search ([`super::search`]): targets met on their percentile, the shared operator
//! table, and the request's field errors.

use super::*;
use crate::cost::AnalyticBackend;
use crate::hw::presets;
use crate::llm::serving::ServingDerated;

fn h100() -> ServingDerated<AnalyticBackend> {
    let s = presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap();
    ServingDerated::new(AnalyticBackend::new(s), ServingConstants::CALIBRATED)
}

fn req(v: serde_json::Value) -> InferenceSearchRequest {
    serde_json::from_value(v).unwrap()
}

#[test]
fn every_hit_meets_the_target_on_its_percentile_and_they_are_ranked_by_goodput() {
    let r = search(
        &req(serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
            "workload": {"input_tokens": 1024, "output_tokens": 256},
            "slo": {"ttft_ms": 2000, "tpot_ms": 50}, "top_k": 5})),
        &h100(),
        ServingConstants::CALIBRATED,
    )
    .unwrap();
    assert_eq!(r.best.len(), 5, "{:?}", r.warnings);
    assert_eq!(r.percentile, 90.0);
    for h in &r.best {
        // p90 of the simulated benchmark meets the target.
        let sim = h.prediction.simulation.as_ref().unwrap();
        assert!(h.ttft_percentile_ms <= 2000.0 && h.tpot_percentile_ms <= 50.0, "{h:?}");
        assert_eq!((h.ttft_percentile_ms, h.tpot_percentile_ms), (sim.ttft.p90_ms, sim.tpot.p90_ms));
        assert_eq!(h.replicas, 8 / (h.tp * h.pp));
        // The hit's rates are its prediction's; its goodput is at most its throughput.
        assert!((h.tokens_per_s_per_gpu - h.prediction.throughput.per_gpu).abs() < 1e-9 * h.tokens_per_s_per_gpu);
        assert!(h.goodput_per_gpu <= h.tokens_per_s_per_gpu * (1.0 + 1e-12) && h.goodput_per_gpu > 0.0);
    }
    assert!(r.best.windows(2).all(|w| w[0].goodput_per_gpu >= w[1].goodput_per_gpu));
    // tp 1 cannot hold 70 B in 80 GB at bf16: never a hit.
    assert!(r.best.iter().all(|h| h.tp * h.pp >= 2));
    // The steady-state bound rules most pairs out: few are simulated.
    assert!(r.evaluated >= r.solved && r.solved > r.simulated && r.simulated >= 5 && r.feasible >= 5, "{r:?}");
    assert!(r.simulated <= MAX_SIMULATIONS);
    // The Pareto front: a subset of the points, none dominated by any point.
    assert!(!r.pareto_front.is_empty() && r.points.len() as u64 == r.solved);
    for f in &r.pareto_front {
        assert!(r.points.contains(f));
        assert!(!r.points.iter().any(|p| p.tokens_per_s_per_user >= f.tokens_per_s_per_user
            && p.output_tokens_per_s_per_gpu > f.output_tokens_per_s_per_gpu));
    }
    let svg = pareto_svg(
        &req(serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
        "workload": {"input_tokens": 1024, "output_tokens": 256}, "slo": {"tpot_ms": 50}})),
        &r,
    )
    .unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("Pareto front"));
    // A tighter TPOT target lowers the best concurrency of the same configuration.
    let one = |tpot: f64| {
        search(
            &req(serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
                "workload": {"input_tokens": 1024, "output_tokens": 256}, "slo": {"tpot_ms": tpot},
                "constraints": {"tp": [8], "pp": [1], "precisions": ["bf16"]}, "top_k": 1})),
            &h100(),
            ServingConstants::CALIBRATED,
        )
        .unwrap()
    };
    let (tight, loose) = (one(25.0), one(60.0));
    assert!(
        tight.best[0].concurrency < loose.best[0].concurrency,
        "{:?} {:?}",
        tight.best[0].concurrency,
        loose.best[0].concurrency
    );
    assert!(tight.best[0].goodput_per_gpu < loose.best[0].goodput_per_gpu);
}

#[test]
fn sharing_operator_times_among_candidates_changes_no_answer() {
    // The search times every candidate on one operator table; each answer must be the one a fresh solver (and
    // a fresh prediction) gives for that configuration alone, to the bit.
    let backend = h100();
    let consts = ServingConstants::CALIBRATED;
    let sreq = req(serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "gpus": 8,
        "workload": {"input_tokens": 1024, "output_tokens": 256},
        "slo": {"ttft_ms": 500, "tpot_ms": 30}, "top_k": 3}));
    let r = search(&sreq, &backend, consts).unwrap();
    assert!(r.best.len() == 3 && r.simulated >= 3, "{:?}", r.warnings);
    let system = backend.system();
    let candidate = |p: &ParetoPoint, n: u32| {
        let mut c = InferenceRequest {
            system: sreq.system.clone(),
            model: sreq.model.clone(),
            parallelism: ServingParallelism {
                tp: p.tp,
                pp: p.pp,
                ep: p.ep,
                dp_attention: false,
                attention_dp_size: None,
            },
            precision: if p.precision == Precision::Bf16 { ServingPrecision::Bf16 } else { ServingPrecision::Fp8 },
            kv_cache_dtype: None,
            engine: sreq.engine,
            engine_options: sreq.engine_options.clone(),
            workload: Workload::closed(1024, 256, 1),
            slo: Some(sreq.slo),
            mode: Default::default(),
            prefill: None,
            decode: None,
            speculative: None,
            frontend: None,
        };
        c.workload.concurrency = Some(n);
        c
    };
    // Every steady-state point: a fresh solver of its configuration alone.
    assert_eq!(r.points.len() as u64, r.solved);
    for p in &r.points {
        let cfg = validate(&candidate(p, 1), system).unwrap();
        assert_eq!(cfg.precision, p.precision);
        let mut solver = Solver::new(&cfg, &backend, consts, serving_memory(&cfg, &system.gpu).max_concurrency);
        let s = solver.closed_loop(p.concurrency as f64).unwrap();
        let per_gpu = s.throughput_rps * 256.0 / cfg.gpus() as f64;
        assert_eq!((p.ttft_ms, p.tpot_ms), (s.ttft_s * 1e3, s.tpot_s * 1e3), "{p:?}");
        assert_eq!(p.output_tokens_per_s_per_gpu, per_gpu, "{p:?}");
    }
    // Every hit: the prediction of its configuration at its concurrency, made on its own.
    for h in &r.best {
        let point = r.points.iter().find(|p| (p.tp, p.pp, p.precision) == (h.tp, h.pp, h.precision)).unwrap();
        let mut c = candidate(point, h.concurrency);
        c.workload.num_requests = Some(search_requests(&sreq.workload, h.concurrency));
        let cfg = validate(&c, system).unwrap();
        let alone = super::super::predict(&cfg, &backend, consts).unwrap();
        assert_eq!(*h.prediction, alone, "tp {} pp {} {:?} at {}", h.tp, h.pp, h.precision, h.concurrency);
    }
}

#[test]
fn bad_searches_name_their_field() {
    let base = serde_json::json!({"system": "dgx-h100", "model": "Llama-3.1-8B", "gpus": 8,
        "workload": {"input_tokens": 128, "output_tokens": 128}, "slo": {"tpot_ms": 20}});
    for (k, v, field) in [
        ("gpus", serde_json::json!(0), "gpus"),
        ("slo", serde_json::json!({}), "slo"),
        ("slo", serde_json::json!({"ttft_ms": -1}), "slo"),
        ("slo", serde_json::json!({"ttft_ms": 1, "percentile": 95}), "slo.percentile"),
        ("top_k", serde_json::json!(0), "top_k"),
        ("model", serde_json::json!("nope"), "model"),
        ("constraints", serde_json::json!({"concurrency": []}), "constraints"),
    ] {
        let mut r = base.clone();
        r[k] = v;
        assert_eq!(search(&req(r), &h100(), ServingConstants::CALIBRATED).unwrap_err().field, field, "{k}");
    }
    // An unreachable target: no hit, a warning.
    let mut r = base;
    r["slo"] = serde_json::json!({"tpot_ms": 0.001});
    let res = search(&req(r), &h100(), ServingConstants::CALIBRATED).unwrap();
    assert!(res.best.is_empty() && !res.warnings.is_empty());
}

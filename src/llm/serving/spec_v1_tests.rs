//! SGLang's spec-v1 EAGLE iteration worked by hand ([`super::spec_v1`]): the exposed host time for given graph
//! sizes and batch, when it applies, its direction on a step (SGLang MTP slower; TensorRT-LLM MTP, SGLang's spec-v2
//! worker and plain SGLang unchanged), and SGLang's padded draft-extend pass ([`super::speculative`]).

use serde_json::json;

use super::engine::HostCost;
use super::request::Engine;
use super::spec_v1::{applies, exposed_host_us, SpecV1Step, SGLANG_V1_VERIFY_SYNCS};
use super::speculative::Speculative;
use super::step::StepLoad;
use super::*;
use crate::hw::{presets, System};

fn system() -> System {
    presets().into_iter().find(|p| p.name == "dgx-b200").unwrap().resolve().unwrap()
}

/// DeepSeek-R1, fp8, tp 8 on a DGX B200 under `engine` with k = 2 MTP drafts (or none) and `options`.
fn r1(engine: &str, mtp: bool, options: serde_json::Value) -> InferenceRequest {
    let mut v = json!({"system": "dgx-b200", "model": "deepseek-ai/DeepSeek-R1", "engine": engine,
        "precision": "fp8", "parallelism": {"tp": 8}, "engine_options": options,
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 4}});
    if mtp {
        v["speculative"] = json!({"method": "mtp", "num_speculative_tokens": 2});
    }
    serde_json::from_value(v).unwrap()
}

const HOST: HostCost = HostCost { step_us: 19.0, seq_us: 21.7, request_us: 0.0 };

#[test]
fn the_exposed_host_path_adds_preparations_verify_launch_syncs_and_a_second_request_pass() {
    let consts = ServingConstants::CALIBRATED;
    let step = SpecV1Step {
        graph: true,
        verify_nodes: 1000.0,
        draft_decode_nodes: 20.0,
        draft_extend_nodes: 25.0,
        draft_decode_gpu_us: 300.0,
        seqs: 4.0,
    };
    // Two preparations behind syncs: 2·19 + (20 + 25)·0.98 = 38 + 44.1 = 82.1 µs; the verify graph's launch beyond
    // the draft-decode GPU time: 1,000·0.98 − 300 = 680 µs; 6 syncs · 20.9 = 125.4 µs; a second request pass
    // 4·21.7 = 86.8 µs. Sum 974.3 µs.
    assert_eq!(SGLANG_V1_VERIFY_SYNCS, 6);
    assert!((exposed_host_us(&step, &HOST, &consts) - 974.3).abs() < 1e-9);
    // A draft-decode pass longer than the verify launch hides it: 1,000·0.98 − 1,500 < 0 → 0; 82.1 + 125.4 + 86.8.
    let covered = SpecV1Step { draft_decode_gpu_us: 1500.0, ..step };
    assert!((exposed_host_us(&covered, &HOST, &consts) - 294.3).abs() < 1e-9);
    // Without CUDA graphs the launches are the eager path's (charged elsewhere): 2·19 + 125.4 + 86.8 = 250.2 µs.
    let eager = SpecV1Step { graph: false, ..step };
    assert!((exposed_host_us(&eager, &HOST, &consts) - 250.2).abs() < 1e-9);
    // sglang issue #29960's graph: 2,876 nodes at 0.98 µs = 2,818.48 µs (measured 2,826), nothing else charged.
    let issue = SpecV1Step {
        verify_nodes: 2876.0,
        draft_decode_nodes: 0.0,
        draft_extend_nodes: 0.0,
        draft_decode_gpu_us: 0.0,
        seqs: 0.0,
        graph: true,
    };
    let none = HostCost { step_us: 0.0, seq_us: 0.0, request_us: 0.0 };
    let bare = ServingConstants { custom_op_us: 0.0, ..consts };
    assert!((exposed_host_us(&issue, &none, &bare) - 2818.48).abs() < 1e-9);
}

#[test]
fn it_applies_to_sglang_mtp_without_overlap_scheduling_only() {
    let s = system();
    let cfg = |engine: &str, mtp: bool, options: serde_json::Value| validate(&r1(engine, mtp, options), &s).unwrap();
    // SGLang's MTP defaults to spec v1 (overlap off); the spec-v2 worker (`async_scheduling: true`) does not pay it.
    assert!(applies(&cfg("sglang", true, json!({}))));
    assert!(!applies(&cfg("sglang", true, json!({"async_scheduling": true}))));
    assert!(!applies(&cfg("sglang", false, json!({}))));
    assert!(!applies(&cfg("trtllm", true, json!({}))));
    assert!(!applies(&cfg("vllm", true, json!({}))));
}

#[test]
fn an_sglang_mtp_step_pays_the_host_path_and_other_steps_do_not() {
    let s = system();
    let backend = tests::backend(&s);
    let step = |engine: &str, mtp: bool, options: serde_json::Value| {
        let cfg = validate(&r1(engine, mtp, options), &s).unwrap();
        let mut solver = steady::Solver::new(&cfg, &backend, ServingConstants::CALIBRATED, 1);
        solver.step(StepLoad::decode(4, 1536, 1024)).unwrap()
    };
    // The engine's own host cost of a 4-sequence step: 19 + 4·21.7 = 105.8 µs. TensorRT-LLM's and vLLM's MTP,
    // SGLang's spec-v2 worker and plain SGLang pay that and nothing more.
    for (engine, mtp, options) in [
        ("trtllm", true, json!({})),
        ("vllm", true, json!({})),
        ("sglang", true, json!({"async_scheduling": true})),
        ("sglang", false, json!({"async_scheduling": false})),
    ] {
        let r = step(engine, mtp, options);
        assert!((r.overhead_s * 1e6 - 105.8).abs() < 1e-9, "{engine} {mtp}: {}", r.overhead_s);
    }
    // SGLang's spec v1 (a 4-sequence decode replays its graphs) adds at least what needs no graph size:
    // 2·19 + 6·20.9 + 4·21.7 = 38 + 125.4 + 86.8 = 250.2 µs, so ≥ 356 µs in all. The spec-v2 worker runs the same
    // GPU work and overlaps its 105.8 µs of host time with it (max(GPU, host) = GPU); spec v1 adds its whole host
    // path to the GPU's, so its step is longer by more than 250.2 µs.
    let v1 = step("sglang", true, json!({}));
    assert!(v1.cuda_graph);
    assert!(v1.overhead_s * 1e6 >= 105.8 + 250.2, "{}", v1.overhead_s);
    // The verify graph's launch: DeepSeek-R1's 61 layers launch far more than 300 nodes (≥ 0.29 ms at 0.98 µs),
    // more than a 4-row draft-decode pass covers, so something beyond 356 µs remains.
    assert!(v1.overhead_s * 1e6 > 105.8 + 250.2 + 1.0, "{}", v1.overhead_s);
    let v2 = step("sglang", true, json!({"async_scheduling": true}));
    assert_eq!(v1.gpu_s, v2.gpu_s);
    assert!(v1.time_s > v2.time_s + 250.2e-6);
}

#[test]
fn sglangs_draft_extend_pass_runs_k_plus_1_rows_per_decode() {
    // 8 decodes at 1,536 cached tokens, k = 2. SGLang's draft-extend graph pads each to k + 1 = 3 rows: 24 GEMM
    // rows, 3 query tokens in attention (draft_tokens 2), the LM head on the 8 sequences' last tokens. The k − 1 = 1
    // draft-decode pass stays at 8 rows. TensorRT-LLM's first pass runs the 8 rows.
    let sp = Speculative::new(request::SpeculativeMethod::Mtp, 2, None);
    let decode = StepLoad::decode(8, 1536, 1024);
    let [(first, one), (rest, more)] = sp.draft_passes(&decode, Engine::Sglang);
    assert_eq!((first.tokens(), first.draft_tokens, first.sampled, one), (24, 2, 8, 1));
    assert_eq!((rest.tokens(), rest.draft_tokens, rest.sampled, more), (8, 0, 8, 1));
    let [(trt, _), _] = sp.draft_passes(&decode, Engine::Trtllm);
    assert_eq!((trt.tokens(), trt.draft_tokens), (8, 0));
    // A prefill-only step (a 1,024-token prompt chunk sampling 1) has no decodes to pad: 1,024 tokens either way.
    let prefill = StepLoad { decode_seqs: 0, prefill_tokens: 1024, sampled: 1, ..decode };
    let [(p, _), _] = sp.draft_passes(&prefill, Engine::Sglang);
    assert_eq!((p.tokens(), p.draft_tokens), (1024, 0));
}

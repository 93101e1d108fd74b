//! Speculative decoding worked by hand ([`super::speculative`]): the expected tokens per step, the request's
//! validation, a verification step's shape, and the simulated benchmark's TPOT and output count.

use serde_json::json;

use super::sim::instance::InstanceSettings;
use super::sim::steps::ConstantSteps;
use super::sim::{simulate, Pool, SimOptions};
use super::speculative::Speculative;
use super::step::{stage_ops, StageRole, StepLoad};
use super::workload::SimRequest;
use super::*;
use crate::hw::{presets, System};
use crate::llm::operators::{OpName, Work};

fn system(name: &str) -> System {
    presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap()
}

/// DeepSeek-R1 under TensorRT-LLM, fp8, tp 8 on a DGX B200, with `speculative` (JSON, or null for none).
fn r1(speculative: serde_json::Value) -> InferenceRequest {
    let mut v = json!({"system": "dgx-b200", "model": "deepseek-ai/DeepSeek-R1", "engine": "trtllm",
        "precision": "fp8", "parallelism": {"tp": 8},
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 8}});
    if !speculative.is_null() {
        v["speculative"] = speculative;
    }
    serde_json::from_value(v).unwrap()
}

fn mtp(k: u32, a: f64) -> Speculative {
    Speculative::new(request::SpeculativeMethod::Mtp, k, Some(a))
}

#[test]
fn expected_tokens_per_step_follow_leviathan_eq_1() {
    // k = 3, a = 0.85: 1 + 0.85 + 0.7225 + 0.614125 = 3.186625 (= (1 − 0.85⁴)/(1 − 0.85) = 0.47799375/0.15).
    assert!((mtp(3, 0.85).tokens_per_step() - 3.186625).abs() < 1e-12);
    // k = 2 (SGLang's InferenceX script): 1 + 0.85 + 0.7225 = 2.5725; k = 1: 1.85.
    assert!((mtp(2, 0.85).tokens_per_step() - 2.5725).abs() < 1e-12);
    assert!((mtp(1, 0.85).tokens_per_step() - 1.85).abs() < 1e-12);
    // Nothing accepted: the model's own token only.
    assert_eq!(mtp(3, 0.0).tokens_per_step(), 1.0);
}

#[test]
fn without_a_rate_a_reused_mtp_layer_yields_tensorrt_llms_measured_tokens_per_step() {
    // TensorRT-LLM tech blog 1, "Autoregressive MTP Layers": DeepSeek-R1 at k = 1…5 measured 1.92, 2.58, 2.82,
    // 2.99, 3.01 tokens per step; k = 3 is 2.82 where i.i.d. 0.85 gives 3.186625; k = 8 keeps k = 5's 3.01.
    let measured = |k| Speculative::new(request::SpeculativeMethod::Mtp, k, None).tokens_per_step();
    assert_eq!([1, 2, 3, 4, 5, 8].map(measured), [1.92, 2.58, 2.82, 2.99, 3.01, 3.01]);
    // Position by position: the first draft is accepted 92 % of the time, the second 66 % (2.58 − 1.92), the
    // third 24 % (2.82 − 2.58) — 0.24/0.66 = 0.36 given the second.
    assert!((measured(3) - measured(2) - 0.24).abs() < 1e-9);
}

#[test]
fn the_request_is_validated_field_by_field() {
    let s = system("dgx-b200");
    let cfg = validate(&r1(json!({"method": "mtp", "num_speculative_tokens": 3})), &s).unwrap();
    let default = Speculative::new(request::SpeculativeMethod::Mtp, 3, None);
    assert_eq!(cfg.speculative, Some(default));
    assert_eq!((default.acceptance_rate, default.tokens_per_step), (None, 2.82));
    let given = validate(&r1(json!({"method": "mtp", "num_speculative_tokens": 3, "acceptance_rate": 0.85})), &s);
    assert_eq!(given.unwrap().speculative, Some(mtp(3, 0.85)));
    assert_eq!(cfg.model.mtp_layers, 1);
    assert_eq!(validate(&r1(json!(null)), &s).unwrap().speculative, None);
    let field = |spec: serde_json::Value| validate(&r1(spec), &s).unwrap_err().field;
    assert_eq!(field(json!({"method": "mtp"})), "speculative.num_speculative_tokens");
    assert_eq!(field(json!({"method": "mtp", "num_speculative_tokens": 0})), "speculative.num_speculative_tokens");
    assert_eq!(field(json!({"method": "mtp", "num_speculative_tokens": 17})), "speculative.num_speculative_tokens");
    for a in [1.0, -0.1, 1.5] {
        let spec = json!({"method": "mtp", "num_speculative_tokens": 1, "acceptance_rate": a});
        assert_eq!(field(spec), "speculative.acceptance_rate");
    }
    // A model without MTP layers (Llama-3.1-70B's config.json has no num_nextn_predict_layers).
    let mut llama = r1(json!({"method": "mtp", "num_speculative_tokens": 1}));
    llama.model = request::ModelRef::Name("Llama-3.1-70B".into());
    let e = validate(&llama, &s).unwrap_err();
    assert_eq!(e.field, "speculative.method");
    assert!(e.message.contains("num_nextn_predict_layers"), "{}", e.message);
}

#[test]
fn sglangs_speculative_decoding_caps_running_requests_at_48_and_turns_the_overlap_scheduler_off() {
    // SGLang's ServerArgs._handle_speculative_decoding: max_running_requests unset → 48, and without
    // SGLANG_ENABLE_SPEC_V2 disable_overlap_schedule = True. Plain SGLang keeps 4,096 and async scheduling.
    let s = system("dgx-b200");
    let sglang = |spec: serde_json::Value, options: serde_json::Value| {
        let mut r = r1(spec);
        r.engine = request::Engine::Sglang;
        r.engine_options = serde_json::from_value(options).unwrap();
        validate(&r, &s).unwrap().settings
    };
    let spec = json!({"method": "mtp", "num_speculative_tokens": 2});
    let with = sglang(spec.clone(), json!({}));
    assert_eq!((with.max_num_seqs, with.async_scheduling), (48, false));
    let plain = sglang(json!(null), json!({}));
    assert_eq!((plain.max_num_seqs, plain.async_scheduling), (4096, true));
    // What the request sets wins: InferenceX's script's --max-running-requests 256; the spec-v2 worker overlaps.
    let set = sglang(spec, json!({"max_num_seqs": 256, "async_scheduling": true}));
    assert_eq!((set.max_num_seqs, set.async_scheduling), (256, true));
    // TensorRT-LLM's MTP keeps its overlap scheduler.
    let trt = validate(&r1(json!({"method": "mtp", "num_speculative_tokens": 3})), &s).unwrap().settings;
    assert!(trt.async_scheduling);
}

#[test]
fn a_verification_step_runs_k_plus_1_tokens_per_sequence() {
    // 8 decoding sequences at 1,536 cached tokens verify k = 3 drafts each: 8·4 = 32 tokens through the GEMMs and
    // 32 positions through the LM head; decode attention folds the 4 query tokens into the heads: 128/8 = 16 heads
    // per GPU × 4 = 64, above the one-pass limit of 32 (step::GROUPED_DECODE_ONE_PASS_HEADS), so 32.
    let decode = StepLoad::decode(8, 1536, 1024);
    let v = mtp(3, 0.85).verification(&decode);
    assert_eq!((v.tokens(), v.sampled, v.draft_tokens, v.decode_seqs), (32, 32, 3, 8));
    let cfg = validate(&r1(json!({"method": "mtp", "num_speculative_tokens": 3})), &system("dgx-b200")).unwrap();
    let (dense, moe) = (cfg.model.layers - cfg.model.moe_layers(), cfg.model.moe_layers());
    let ops = stage_ops(&cfg, &system("dgx-b200"), &v, StageRole { first: true, last: true }, dense, moe);
    let dims = |name: OpName| -> Vec<u64> { ops.iter().find(|o| o.op.name == name).unwrap().op.features.clone() };
    // Linear2 (attention output) [1, T, d, a·D_v]: T = 32, d = 7,168, 16 heads · 128 = 2,048.
    assert_eq!(dims(OpName::Linear2), vec![1, 32, 7168, 2048]);
    // The LM head over the 32 positions: vocabulary 129,280 / 8 = 16,160 rows per GPU, d = 7,168.
    assert_eq!(dims(OpName::FinalLinear), vec![1, 32, 16160, 7168]);
    // MLA decode: 8 sequences, 1,536 cached, 32 heads, 1 latent head of (512 + 64)/2 = 288 dims.
    assert_eq!(dims(OpName::AttentionDecode), vec![8, 1536, 32, 1, 288]);
    assert!(ops.iter().all(|o| !matches!(o.op.work, Work::WideEp(_))));
    // The drafter's passes: the first over the step's 8 decodes, then k − 1 = 2 more over the 8 that sample.
    let [(first, one), (rest, more)] = mtp(3, 0.85).draft_passes(&decode, request::Engine::Trtllm);
    assert_eq!((first.tokens(), first.sampled, one), (8, 8, 1));
    assert_eq!((rest.decode_seqs, rest.decode_context, rest.sampled, more), (8, 1536, 8, 2));
}

#[test]
fn a_speculative_step_costs_more_than_a_plain_one_and_less_than_k_plus_1_of_them() {
    // The same 8-sequence decode step: the speculative one runs the model over 32 tokens (its weights still read
    // once, memory-bound) and the one-layer drafter 3 times, so it costs more than one plain step and less than the
    // 3.19 plain steps whose tokens it yields on average.
    let s = system("dgx-b200");
    let backend = tests::backend(&s);
    let time = |spec: serde_json::Value| {
        let cfg = validate(&r1(spec), &s).unwrap();
        let mut solver = steady::Solver::new(&cfg, &backend, ServingConstants::CALIBRATED, 1);
        solver.step(StepLoad::decode(8, 1536, 1024)).unwrap().time_s
    };
    let (plain, spec) = (time(json!(null)), time(json!({"method": "mtp", "num_speculative_tokens": 3})));
    assert!(spec > plain && spec < 3.186625 * plain, "{spec} vs {plain}");
}

#[test]
fn the_simulation_decodes_e_tokens_a_step_and_reports_every_output_token() {
    // 2 clients, 2 requests of 10 prompt and 50 output tokens, steps of 50 ms (prefill) and 10 ms (decode), k = 2
    // at a = 0.5: E = 1 + 0.5 + 0.25 = 1.75 tokens per decode step. The first token comes out of the prefill, the
    // other 49 out of ⌈49/1.75⌉ = 28 decode steps: step 1 [0, 50 ms], steps 2–29 to 50 + 28·10 = 330 ms.
    // TTFT 50 ms, end to end 330 ms, TPOT (330 − 50)/49 = 5.714 ms; 50 output tokens each, 100 in all; 29 steps.
    let settings = InstanceSettings {
        tokens_per_decode_step: mtp(2, 0.5).tokens_per_step(),
        ..super::sim::tests::settings(request::Engine::Vllm, 8192, 16, 1000)
    };
    let reqs = vec![SimRequest { input: 10, output: 50, arrival_s: 0.0 }; 2];
    // Step by step (a trace recorded) and with decode runs (none): the same answer.
    for trace_steps in [1000, 0] {
        let mut timer =
            ConstantSteps { decode_s: 0.010, prefill_s: 0.050, decode_launch_s: 0.0, prefill_launch_s: 0.0 };
        let mut pools = [Pool { settings: settings.clone(), workers: 1, timer: &mut timer }];
        let opts = SimOptions {
            max_steps: 100_000,
            trace_steps,
            frontend_s: 0.0,
            tokenize_s_per_token: 0.0,
            tokenizer_threads: 1,
        };
        let o = simulate(&mut pools, &reqs, Some(2), &|_| 0.0, opts).unwrap();
        assert_eq!(o.steps, 29);
        for (ttft, e2e, tpot) in o.ttft_s.iter().zip(&o.e2e_s).zip(&o.tpot_s).map(|((a, b), c)| (a, b, c)) {
            assert!((ttft - 0.050).abs() < 1e-12 && (e2e - 0.330).abs() < 1e-12, "{ttft} {e2e}");
            assert!((tpot - 0.280 / 49.0).abs() < 1e-12, "{tpot}");
        }
        assert_eq!((o.outputs.clone(), o.output_tokens), (vec![50, 50], 100));
    }
}

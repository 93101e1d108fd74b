//! Hand-counted host time of vLLM V1's piecewise CUDA graphs ([`steady::Solver::step`]): a step with prefill whose
//! tokens are at most `max_cudagraph_capture_size` replays one graph per piece between eagerly run attention calls,
//! padded up to the next captured size; a larger one launches every kernel from Python.

use serde_json::json;

use super::step::StepLoad;
use super::*;
use crate::cost::AnalyticBackend;
use crate::hw::{presets, System};

fn system() -> System {
    presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap()
}

/// Llama-3.1-8B bf16 under `engine` at tp 1, with `engine_options`.
fn config(engine: &str, options: serde_json::Value) -> ServingConfig {
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-h100", "model": "Llama-3.1-8B",
        "engine": engine, "parallelism": {"tp": 1}, "engine_options": options,
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 4}}))
    .unwrap();
    validate(&req, &system()).unwrap()
}

/// One 1,024-token prompt prefilled whole.
const PREFILL_1K: StepLoad =
    StepLoad { decode_seqs: 0, decode_context: 0, prefill_tokens: 1024, prompt_len: 1024, sampled: 1 };

#[test]
fn a_1k_prefill_replays_piecewise_graphs_only_within_the_capture_size() {
    // Llama-3.1-8B (32 layers) at tp 1, every operator analytic. The kernels of a 1,024-token prefill step: per layer
    // two norms, QKV, RoPE, prefill attention (2: the KV-cache write and the flash attention), output, gate-and-up,
    // SwiGLU and down = 10, × 32 = 320; embedding, final norm, LM head and sampler: 324.
    let consts = ServingConstants::CALIBRATED;
    assert_eq!((consts.python_kernel_us, consts.efficiency.kernel_us, consts.graph_kernel_us), (70.1, 7.40, 1.75));
    let backend = ServingDerated::new(AnalyticBackend::new(system()), consts);
    // vLLM's default capture size on an H100 (max_num_seqs 1024, max_num_batched_tokens 8192): min(2·1024, 512) =
    // 512 < 1,024 tokens, so the step runs without graphs: 324 · 70.1 = 22,712.4 µs of Python launches.
    let default = config("vllm", json!({}));
    assert_eq!(default.settings.cuda_graph_max_batch, 512);
    let eager = steady::Solver::new(&default, &backend, consts, 1000).step(PREFILL_1K).unwrap();
    assert!(!eager.piecewise_graph && !eager.cuda_graph);
    assert!((eager.launch_s * 1e6 - 22_712.4).abs() < 1e-6, "{} s", eager.launch_s);
    // `max_cudagraph_capture_size` 2048 (InferenceX's gpt-oss recipe): 1,024 = 256 + 48·16 is a captured size (no
    // padding). vLLM's splitting ops are the 32 attention calls, which cut the forward into 33 pieces: 33 graph
    // replays + 32 eager attention calls = 65 Python calls, 65 · 70.1 = 4,556.5 µs.
    let graphed = config("vllm", json!({"max_cudagraph_capture_size": 2048}));
    assert_eq!(graphed.settings.cuda_graph_max_batch, 2048);
    let mut solver = steady::Solver::new(&graphed, &backend, consts, 1000);
    let piecewise = solver.step(PREFILL_1K).unwrap();
    assert!(piecewise.piecewise_graph && !piecewise.cuda_graph);
    assert!((piecewise.launch_s * 1e6 - 4_556.5).abs() < 1e-6, "{} s", piecewise.launch_s);
    // On the GPU the pieces' 324 − 64 = 260 analytic kernels cost 1.75 µs beyond their bodies instead of 7.40 µs
    // (the attention's 64 stay eager): 260 · 5.65 = 1,469.0 µs less.
    let saved_us = (eager.gpu_s - piecewise.gpu_s) * 1e6;
    assert!((saved_us - 1_469.0).abs() < 1e-6, "{saved_us} µs");
    // The report's operator rows carry the same costs.
    let detail = solver.detail(&piecewise).unwrap();
    assert!((detail.gpu_s - piecewise.gpu_s).abs() < 1e-12);
}

#[test]
fn a_mixed_step_is_padded_to_the_next_capture_size() {
    // vLLM pads a step's tokens up to the next captured size (`pad_for_cudagraph`); above 256 the sizes step by
    // 16: 3 decodes + 1,000 prompt tokens = 1,003 → 1,008, and 3 + 1,005 = 1,008 already is one: the same GPU work.
    // 3 + 1,006 = 1,009 pads to 1,024: more.
    let consts = ServingConstants::CALIBRATED;
    let backend = ServingDerated::new(AnalyticBackend::new(system()), consts);
    let cfg = config("vllm", json!({"max_cudagraph_capture_size": 2048}));
    let mut solver = steady::Solver::new(&cfg, &backend, consts, 1000);
    let load = |prefill| StepLoad {
        decode_seqs: 3,
        decode_context: 1536,
        prefill_tokens: prefill,
        prompt_len: 1024,
        sampled: 4,
    };
    let (a, b, c) =
        (solver.step(load(1000)).unwrap(), solver.step(load(1005)).unwrap(), solver.step(load(1006)).unwrap());
    assert!(a.piecewise_graph && b.piecewise_graph && c.piecewise_graph);
    assert_eq!(a.gpu_s, b.gpu_s);
    assert!(c.gpu_s > b.gpu_s);
    // A mixed step runs one attention call per layer (decodes and prompt together): 65 calls, as for the prefill.
    assert!((a.launch_s * 1e6 - 4_556.5).abs() < 1e-6, "{} s", a.launch_s);
    // Beyond the capture size (2,048 + 1 tokens) every kernel is launched again.
    assert!(!solver.step(load(2046)).unwrap().piecewise_graph);
}

#[test]
fn only_vllm_v1_replays_piecewise_graphs() {
    // SGLang and TensorRT-LLM keep their eager prefill, and so does vLLM's V0 engine, whose graphs were decode-only;
    // `max_cudagraph_capture_size` is vLLM's option. SGLang and vLLM V0 launch the same 324 kernels (324 · 70.1 =
    // 22,712.4 µs); TensorRT-LLM's attention applies RoPE itself (`TrtllmAttention.support_fused_rope()`), 32 kernels
    // fewer: 292 · 70.1 = 20,469.2 µs.
    let consts = ServingConstants::CALIBRATED;
    let backend = ServingDerated::new(AnalyticBackend::new(system()), consts);
    for (engine, options, launch_us) in [
        ("sglang", json!({"cuda_graph_max_batch": 2048}), 22_712.4),
        ("trtllm", json!({"cuda_graph_max_batch": 2048}), 20_469.2),
        ("vllm", json!({"max_cudagraph_capture_size": 2048, "vllm_engine": "v0"}), 22_712.4),
    ] {
        let cfg = config(engine, options);
        let step = steady::Solver::new(&cfg, &backend, consts, 1000).step(PREFILL_1K).unwrap();
        assert!(!step.piecewise_graph, "{engine}");
        assert!((step.launch_s * 1e6 - launch_us).abs() < 1e-6, "{engine}: {} s", step.launch_s);
    }
    let req: Result<InferenceRequest, _> = serde_json::from_value(json!({"system": "dgx-h100",
        "model": "Llama-3.1-8B", "engine": "sglang", "parallelism": {"tp": 1},
        "engine_options": {"max_cudagraph_capture_size": 2048},
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 4}}));
    let err = validate(&req.unwrap(), &system()).unwrap_err();
    assert!(err.to_string().contains("max_cudagraph_capture_size"), "{err}");
}

#[test]
fn vllms_default_capture_size_follows_max_num_seqs_and_the_token_budget() {
    // `VllmConfig._set_cudagraph_sizes`: min(2·max_num_seqs, 512), then at most max_num_batched_tokens.
    let at = |o| config("vllm", o).settings.cuda_graph_max_batch;
    assert_eq!(at(json!({"max_num_seqs": 8})), 16);
    assert_eq!(at(json!({"max_num_seqs": 4096})), 512);
    assert_eq!(at(json!({"max_num_batched_tokens": 256})), 256);
    assert_eq!(at(json!({"max_cudagraph_capture_size": 4096, "max_num_batched_tokens": 2048})), 2048);
}

#[test]
fn with_data_parallel_attention_the_busiest_rank_decides() {
    // Qwen3-30B-A3B on 2 GPUs as 2 data-parallel attention ranks: the step's 1,024 prompt tokens average 512 a rank,
    // within vLLM's default capture size 512, but the prompt sits whole on one rank and vLLM pads every rank to
    // its 1,024 tokens (`get_dp_padding`): beyond 512, so no rank replays graphs. With 2,048 they do.
    let consts = ServingConstants::CALIBRATED;
    let backend = ServingDerated::new(AnalyticBackend::new(system()), consts);
    let dp = |options: serde_json::Value| {
        let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-h100", "model": "Qwen3-30B-A3B",
            "engine": "vllm", "parallelism": {"tp": 2, "attention_dp_size": 2}, "engine_options": options,
            "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 4}}))
        .unwrap();
        validate(&req, &system()).unwrap()
    };
    let default = dp(json!({}));
    assert_eq!(default.dp(), 2);
    assert!(!steady::Solver::new(&default, &backend, consts, 1000).step(PREFILL_1K).unwrap().piecewise_graph);
    let raised = dp(json!({"max_cudagraph_capture_size": 2048}));
    assert!(steady::Solver::new(&raised, &backend, consts, 1000).step(PREFILL_1K).unwrap().piecewise_graph);
}

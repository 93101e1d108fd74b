//! TensorRT-LLM's defaults by backend and entry point (`super::engine` module doc for the sources), checked by
//! hand against `TorchLlmArgs`, `CudaGraphConfig` and `trtllm-bench`'s `get_settings`.

use serde_json::json;

use super::*;
use crate::cost::AnalyticBackend;
use crate::hw::{presets, System};

fn system(name: &str) -> System {
    presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap()
}

fn config(workload: serde_json::Value, options: serde_json::Value) -> ServingConfig {
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-h100", "model": "Llama-3.1-8B",
        "engine": "trtllm", "workload": workload, "engine_options": options}))
    .unwrap();
    validate(&req, &system("dgx-h100")).unwrap()
}

#[test]
fn trtllm_serve_runs_the_overlap_scheduler_and_unpadded_graphs_up_to_128_without_chunking() {
    // `TorchLlmArgs`: disable_overlap_scheduler False, enable_chunked_prefill False, max_num_tokens 8192,
    // max_batch_size 2048; `CudaGraphConfig()`: max_batch_size 0 → 128, enable_padding False.
    let s = config(json!({"input_tokens": 1024, "output_tokens": 128, "concurrency": 64}), json!({})).settings;
    assert!(s.async_scheduling && !s.chunked_prefill && s.cuda_graphs && !s.cuda_graph_padding);
    assert_eq!((s.cuda_graph_max_batch, s.max_num_batched_tokens, s.max_num_seqs), (128, 8192, 2048));
    // The C++ executor of trtllm-build engines: no graphs unless asked, no overlap.
    let t = config(
        json!({"input_tokens": 1024, "output_tokens": 128, "concurrency": 64}),
        json!({"trtllm_backend": "tensorrt"}),
    )
    .settings;
    assert!(!t.cuda_graphs && !t.async_scheduling);
}

#[test]
fn trtllm_bench_pads_graphs_up_to_its_max_batch_size_and_fits_the_longest_prompt() {
    // An offline workload (no concurrency, no rate) defaults to trtllm-bench's settings: graphs with padding up
    // to max_batch_size 2048; max_num_tokens = max(8192, 1024 + 2048 = 3072) = 8192.
    let offline = json!({"input_tokens": 1024, "output_tokens": 128, "num_requests": 64});
    let s = config(offline.clone(), json!({})).settings;
    assert!(s.cuda_graph_padding && !s.chunked_prefill);
    assert_eq!((s.cuda_graph_max_batch, s.max_num_batched_tokens), (2048, 8192));
    // max_batch_size 256 and 8,192-token prompts: graphs to 256; max_num_tokens = max(8192, 8192 + 256) = 8448.
    let long = json!({"input_tokens": 8192, "output_tokens": 128, "num_requests": 64});
    let b = config(long, json!({"max_num_seqs": 256})).settings;
    assert_eq!((b.cuda_graph_max_batch, b.max_num_batched_tokens), (256, 8448));
    // range_ratio 0.5 around 8,192: the longest prompt ⌈8192 · 1.5⌉ = 12,288; + 256 = 12,544.
    let spread = json!({"input_tokens": 8192, "output_tokens": 128, "num_requests": 64, "range_ratio": 0.5});
    assert_eq!(config(spread, json!({"max_num_seqs": 256})).settings.max_num_batched_tokens, 12_544);
    // Named explicitly, serve under an offline workload keeps TorchLlmArgs' defaults.
    let serve = config(offline, json!({"trtllm_launcher": "serve"})).settings;
    assert_eq!((serve.cuda_graph_max_batch, serve.cuda_graph_padding), (128, false));
    // The option is TensorRT-LLM's.
    let vllm: InferenceRequest = serde_json::from_value(json!({"system": "dgx-h100", "model": "Llama-3.1-8B",
        "workload": {"input_tokens": 1024, "output_tokens": 128, "concurrency": 8},
        "engine_options": {"trtllm_launcher": "bench"}}))
    .unwrap();
    assert_eq!(validate(&vllm, &system("dgx-h100")).unwrap_err().field, "engine_options.trtllm_launcher");
}

#[test]
fn without_padding_only_a_captured_batch_size_replays_a_graph() {
    // trtllm-serve's graphs: 1–31, 32, 64, 128 unpadded. A decode step of 32 sequences replays its graph; one of 33
    // runs eagerly, so its kernels are launched from Python (python_kernel_us each) and it costs more.
    let cfg = config(json!({"input_tokens": 1024, "output_tokens": 128, "concurrency": 64}), json!({}));
    let s = system("dgx-h100");
    let b = ServingDerated::new(AnalyticBackend::new(s.clone()), ServingConstants::CALIBRATED);
    let mut solver = steady::Solver::new(&cfg, &b, ServingConstants::CALIBRATED, 1000);
    let load = |n| step::StepLoad::decode(n, 1100, 1024);
    let (at32, at33) = (solver.step(load(32)).unwrap(), solver.step(load(33)).unwrap());
    assert!(at32.cuda_graph && !at33.cuda_graph);
    assert!(at33.time_s > at32.time_s);
    // Padded (trtllm-bench, or cuda_graph_padding), 33 replays a graph (the simulator pads it to 40).
    let padded = config(
        json!({"input_tokens": 1024, "output_tokens": 128, "concurrency": 64}),
        json!({"cuda_graph_padding": true}),
    );
    let mut p = steady::Solver::new(&padded, &b, ServingConstants::CALIBRATED, 1000);
    assert!(p.step(load(33)).unwrap().cuda_graph);
}

#[test]
fn trtllm_serve_refuses_a_prompt_longer_than_max_num_tokens_without_chunked_context() {
    // trtllm-serve's defaults: max_num_tokens 8,192, no chunked context. A 20,000-token prompt is refused
    // (llm.py `_check_arguments`), so the request is a 422 naming the workload's input length …
    let req = |options: serde_json::Value| -> InferenceRequest {
        serde_json::from_value(json!({"system": "dgx-h100", "model": "Llama-3.1-8B", "engine": "trtllm",
            "workload": {"input_tokens": 20000, "output_tokens": 16, "concurrency": 2},
            "engine_options": options}))
        .unwrap()
    };
    let e = validate(&req(json!({})), &system("dgx-h100")).unwrap_err();
    assert_eq!(e.field, "workload.input_tokens");
    assert!(e.message.contains("20000-token prompt") && e.message.contains("8192"), "{}", e.message);
    // … and a range ratio counts its longest draw: 6,000 · 1.5 = 9,000 > 8,192 is refused, 5,000 · 1.5 = 7,500 is not.
    let spread = |input: u32| -> InferenceRequest {
        serde_json::from_value(json!({"system": "dgx-h100", "model": "Llama-3.1-8B", "engine": "trtllm",
            "workload": {"input_tokens": input, "output_tokens": 16, "concurrency": 2, "range_ratio": 0.5}}))
        .unwrap()
    };
    assert_eq!(validate(&spread(6000), &system("dgx-h100")).unwrap_err().field, "workload.input_tokens");
    assert!(validate(&spread(5000), &system("dgx-h100")).is_ok());
    // A budget of 20,000 tokens or chunked context run it.
    for options in [json!({"max_num_batched_tokens": 20000}), json!({"chunked_prefill": true})] {
        assert!(validate(&req(options.clone()), &system("dgx-h100")).is_ok(), "{options}");
    }
}

#[test]
fn only_the_disaggregated_prefill_pool_must_fit_a_prompt_in_a_step() {
    // A decode worker never prefills: its budget of 64 tokens (aiconfigurator's decode max_num_tokens = batch) is
    // fine beside 1,024-token prompts; a prefill worker with the same 64 is refused.
    let disagg = |prefill_tokens: u32| -> InferenceRequest {
        serde_json::from_value(json!({"system": "dgx-h100", "model": "Llama-3.1-8B", "engine": "trtllm",
            "mode": "disagg",
            "prefill": {"workers": 1, "parallelism": {"tp": 1},
                        "engine_options": {"max_num_batched_tokens": prefill_tokens}},
            "decode": {"workers": 1, "parallelism": {"tp": 1}, "engine_options": {"max_num_batched_tokens": 64}},
            "workload": {"input_tokens": 1024, "output_tokens": 16, "concurrency": 4}}))
        .unwrap()
    };
    assert!(validate(&disagg(2524), &system("dgx-h100")).is_ok());
    assert_eq!(validate(&disagg(64), &system("dgx-h100")).unwrap_err().field, "workload.input_tokens");
}

//! The request's CUDA-graph capture list (`engine_options.cuda_graph_batch_sizes`) and front end (`frontend`):
//! validation by hand, and the list deciding which decode steps replay a graph.

use serde_json::json;

use super::*;
use crate::cost::AnalyticBackend;
use crate::hw::{presets, System};

fn system() -> System {
    presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap()
}

fn request(engine: &str, options: serde_json::Value) -> InferenceRequest {
    serde_json::from_value(json!({"system": "dgx-h100", "model": "Llama-3.1-8B", "engine": engine,
        "workload": {"input_tokens": 1024, "output_tokens": 128, "concurrency": 64}, "engine_options": options}))
    .unwrap()
}

fn refused(engine: &str, options: serde_json::Value) -> String {
    validate(&request(engine, options), &system()).unwrap_err().field
}

#[test]
fn a_capture_list_is_sorted_deduplicated_and_sets_the_largest_graph_batch() {
    // [256, 1, 64, 64, 8] → 1, 8, 64, 256; the largest, 256, replaces TensorRT-LLM's default 128.
    let cfg = validate(&request("trtllm", json!({"cuda_graph_batch_sizes": [256, 1, 64, 64, 8]})), &system()).unwrap();
    assert_eq!(cfg.cuda_graph_batch_sizes.as_deref(), Some(&[1, 8, 64, 256][..]));
    assert_eq!(cfg.cuda_graph_sizes(), vec![1, 8, 64, 256]);
    assert_eq!(cfg.settings.cuda_graph_max_batch, 256);
    // Without a list: the engine's default (trtllm-serve: 1–31, 32, 64, 128, 34 sizes), unchanged.
    let default = validate(&request("trtllm", json!({})), &system()).unwrap();
    assert_eq!((default.cuda_graph_batch_sizes.is_none(), default.cuda_graph_sizes().len()), (true, 34));
    // vLLM drops the sizes above max_num_batched_tokens (64 here): [32, 128] → [32], largest 32.
    let v = validate(
        &request(
            "vllm",
            json!({"max_num_batched_tokens": 64, "chunked_prefill": true, "cuda_graph_batch_sizes": [128, 32]}),
        ),
        &system(),
    )
    .unwrap();
    assert_eq!((v.cuda_graph_sizes(), v.settings.cuda_graph_max_batch), (vec![32], 32));
    // SGLang keeps the list as given: [4, 2] → [2, 4], cuda_graph_max_bs 4.
    let s = validate(&request("sglang", json!({"cuda_graph_batch_sizes": [4, 2]})), &system()).unwrap();
    assert_eq!((s.cuda_graph_sizes(), s.settings.cuda_graph_max_batch), (vec![2, 4], 4));
}

#[test]
fn a_bad_capture_list_is_a_422_naming_the_size() {
    assert_eq!(refused("trtllm", json!({"cuda_graph_batch_sizes": []})), "engine_options.cuda_graph_batch_sizes");
    assert_eq!(
        refused("trtllm", json!({"cuda_graph_batch_sizes": [8, 0]})),
        "engine_options.cuda_graph_batch_sizes[1]"
    );
    assert_eq!(
        refused("sglang", json!({"cuda_graph_batch_sizes": [65_537]})),
        "engine_options.cuda_graph_batch_sizes[0]"
    );
    // vLLM with every size above its 64-token budget.
    let over = json!({"max_num_batched_tokens": 64, "chunked_prefill": true, "cuda_graph_batch_sizes": [128]});
    assert_eq!(refused("vllm", over), "engine_options.cuda_graph_batch_sizes");
    // A largest graph batch that disagrees with the list, and a list with graphs off.
    let both = json!({"cuda_graph_max_batch": 128, "cuda_graph_batch_sizes": [1, 256]});
    assert_eq!(refused("trtllm", both), "engine_options.cuda_graph_max_batch");
    let agree = json!({"cuda_graph_max_batch": 256, "cuda_graph_batch_sizes": [1, 256]});
    assert!(validate(&request("trtllm", agree), &system()).is_ok());
    assert_eq!(
        refused("trtllm", json!({"cuda_graphs": false, "cuda_graph_batch_sizes": [8]})),
        "engine_options.cuda_graphs"
    );
    // A decode pool's list is named under the pool.
    let disagg: InferenceRequest = serde_json::from_value(json!({"system": "dgx-h100", "model": "Llama-3.1-8B",
        "engine": "trtllm", "mode": "disagg", "workload": {"input_tokens": 1024, "output_tokens": 128, "concurrency": 8},
        "prefill": {"workers": 1}, "decode": {"workers": 1, "engine_options": {"cuda_graph_batch_sizes": [0]}}}))
    .unwrap();
    assert_eq!(validate(&disagg, &system()).unwrap_err().field, "decode.engine_options.cuda_graph_batch_sizes[0]");
}

#[test]
fn without_padding_only_a_listed_batch_replays_its_graph() {
    // aiconfigurator's TensorRT-LLM 1.3.0rc1 list 1, 2, 4, …, 256 without padding: a decode step of 64 sequences
    // replays its graph, one of 56 (no captured size) runs eagerly and costs more; with padding 56 replays the
    // graph of 64.
    let list = json!([1, 2, 4, 8, 16, 32, 64, 128, 256]);
    let cfg =
        validate(&request("trtllm", json!({"cuda_graph_batch_sizes": list, "cuda_graph_padding": false})), &system())
            .unwrap();
    let b = ServingDerated::new(AnalyticBackend::new(system()), ServingConstants::CALIBRATED);
    let load = |n| step::StepLoad::decode(n, 1100, 1024);
    let mut solver = steady::Solver::new(&cfg, &b, ServingConstants::CALIBRATED, 1000);
    let (at64, at56) = (solver.step(load(64)).unwrap(), solver.step(load(56)).unwrap());
    assert!(at64.cuda_graph && !at56.cuda_graph && at56.time_s > at64.time_s);
    // trtllm-serve's default list captures 1–31, 32, 64, 128: 56 runs eagerly there too, but 24 replays; with the
    // powers of two 24 is eager.
    assert!(!solver.step(load(24)).unwrap().cuda_graph);
    let padded =
        validate(&request("trtllm", json!({"cuda_graph_batch_sizes": list, "cuda_graph_padding": true})), &system())
            .unwrap();
    let mut p = steady::Solver::new(&padded, &b, ServingConstants::CALIBRATED, 1000);
    assert!(p.step(load(56)).unwrap().cuda_graph);
}

#[test]
fn the_front_end_tokenizes_on_one_thread_unless_it_is_dynamos() {
    use super::frontend::{tokenizer_threads, DYNAMO_DEFAULT_TOKENIZER_THREADS};
    let with = |f: serde_json::Value| {
        let mut r = request("trtllm", json!({}));
        r.frontend = Some(serde_json::from_value(f).unwrap());
        validate(&r, &system())
    };
    assert_eq!(validate(&request("trtllm", json!({})), &system()).unwrap().tokenizer_threads, 1);
    assert_eq!(with(json!({"server": "engine"})).unwrap().tokenizer_threads, 1);
    assert_eq!(with(json!({"server": "dynamo"})).unwrap().tokenizer_threads, DYNAMO_DEFAULT_TOKENIZER_THREADS);
    assert_eq!(with(json!({"server": "dynamo", "tokenizer_threads": 8})).unwrap().tokenizer_threads, 8);
    for bad in
        [json!({"server": "engine", "tokenizer_threads": 2}), json!({"server": "dynamo", "tokenizer_threads": 0})]
    {
        assert_eq!(with(bad).unwrap_err().field, "frontend.tokenizer_threads");
    }
    assert_eq!(tokenizer_threads(&None).unwrap(), 1);
}

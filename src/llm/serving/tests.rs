//! Hand-computed checks of the serving model (issue 17's done-means) and the directions of its effects.

use serde_json::json;

use super::*;
use crate::cost::AnalyticBackend;
use crate::hw::{presets, System};

pub(super) fn system(name: &str) -> System {
    presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap()
}

fn request(v: serde_json::Value) -> InferenceRequest {
    serde_json::from_value(v).unwrap()
}

pub(super) fn llama70b(tp: u32, workload: serde_json::Value) -> InferenceRequest {
    request(json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "parallelism": {"tp": tp},
        "workload": workload}))
}

pub(super) fn backend(s: &System) -> ServingDerated<AnalyticBackend> {
    ServingDerated::new(AnalyticBackend::new(s.clone()), ServingConstants::CALIBRATED)
}

fn run(req: &InferenceRequest) -> InferencePrediction {
    let s = system(&req.system);
    let cfg = validate(req, &s).unwrap();
    predict(&cfg, &backend(&s), ServingConstants::CALIBRATED).unwrap()
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

#[test]
fn kv_cache_bytes_per_token_of_llama_3_1_70b() {
    // 2 (K and V) · 80 layers · 8 key/value heads · 128 dims · 2 bytes (bf16) = 327,680 B; fp8 halves it.
    let p = run(&llama70b(4, json!({"input_tokens": 1024, "output_tokens": 256, "concurrency": 32})));
    assert_eq!(p.memory.kv_bytes_per_token, 327_680.0);
    // Per GPU at tp 4: 2 of the 8 key/value heads: 81,920 B.
    assert_eq!(p.memory.kv_bytes_per_token_per_gpu, 81_920.0);
    let mut fp8 = llama70b(4, json!({"input_tokens": 1024, "output_tokens": 256, "concurrency": 32}));
    fp8.kv_cache_dtype = Some(request::ServingPrecision::Fp8);
    assert_eq!(run(&fp8).memory.kv_bytes_per_token, 163_840.0);
}

#[test]
fn kv_capacity_and_max_concurrency_on_h100_at_tp_4() {
    // Llama-3.1-70B, bf16, vLLM defaults on H100-SXM5-80GB (80 GiB ≥ 70, not an A100): max_num_batched_tokens
    // 8192, max_num_seqs 1024, gpu_memory_utilization 0.9.
    // Weights per GPU: per layer QKV 8192·128·(64/4 + 2·8/4) = 20,971,520, output 16·128·8192 = 16,777,216, MLP
    // 3·8192·28672/4 = 176,160,768 → 213,909,504 params · 2 B = 427,819,008 B, plus two norms 2·8192·2 = 32,768 B:
    // 427,851,776 B × 80 = 34,228,142,080 B; embedding and LM head 2 · (128256/4)·8192·2 = 1,050,673,152 B; final
    // norm 16,384 B. Total 35,278,831,616 B = 32.856 GiB.
    // Workspace: 8192 tokens · (2·8192 + 3·7168) · 2 B = 620,756,992 B; logits 1024 · 128256 · 4 B = 525,336,576 B;
    // 1 GiB non-tensor: 2,219,835,392 B.
    // KV cache: 0.9 · 80 GiB = 77,309,411,328 − 35,278,831,616 − 2,219,835,392 = 39,810,744,320 B; per token per
    // GPU 2·80·2·128·2 = 81,920 B → 485,971.0 tokens → 30,373 blocks of 16 = 485,968 tokens.
    // A request of 1024 + 256 = 1280 tokens needs 80 blocks: 30,373 / 80 = 379 requests at once.
    let p = run(&llama70b(4, json!({"input_tokens": 1024, "output_tokens": 256, "concurrency": 32})));
    let m = p.memory;
    assert!((m.weights_gib * GIB - 35_278_831_616.0).abs() < 1.0, "{}", m.weights_gib * GIB);
    assert!((m.workspace_gib * GIB - 2_219_835_392.0).abs() < 1.0, "{}", m.workspace_gib * GIB);
    assert_eq!(m.kv_capacity_tokens, 485_968);
    assert_eq!(m.max_concurrency, 379);
    assert!(m.fits);
    // 64 concurrent requests fit; 500 do not: a warning, and the rest queue.
    let over = run(&llama70b(4, json!({"input_tokens": 1024, "output_tokens": 256, "concurrency": 500})));
    assert!(over.warnings.iter().any(|w| w.contains("exceeds the KV cache's 379")), "{:?}", over.warnings);
    assert_eq!(over.batch.capacity, 379);
    assert!((over.batch.queued - 121.0).abs() < 1e-9);
    // On one H100 the weights alone (131 GiB) do not fit.
    let one = run(&llama70b(1, json!({"input_tokens": 1024, "output_tokens": 256, "concurrency": 1})));
    assert!(!one.memory.fits && one.warnings.iter().any(|w| w.starts_with("does not fit")));
}

#[test]
fn a_decode_step_at_batch_1_is_bounded_below_by_weights_over_bandwidth() {
    // Every decode step reads every weight it multiplies by: all layers' weights and the LM head (the embedding table
    // is only indexed). On H100 (3,350 GB/s), for Llama-3.1-70B at tp 4 that is 35,278,831,616 − 525,336,576 =
    // 34,753,495,040 B per GPU → ≥ 10.37 ms; for Llama-3.1-8B on one GPU (16,060,522,496 − 1,050,673,152 B) ≥ 4.48 ms.
    for (model, tp, bytes) in [("Llama-3.1-70B", 4, 34_753_495_040.0), ("Llama-3.1-8B", 1, 15_009_849_344.0)] {
        let req = request(json!({"system": "dgx-h100", "model": model, "parallelism": {"tp": tp},
            "workload": {"input_tokens": 128, "output_tokens": 128, "concurrency": 1}}));
        let p = run(&req);
        let bound_ms = bytes / 3350e9 * 1e3;
        assert_eq!(p.decode_step.decode_seqs, 1);
        assert!(p.decode_step_ms >= bound_ms, "{model}: {} < {bound_ms}", p.decode_step_ms);
        // …and its GPU time alone too (overheads aside), within 2× of the bound (memory-bound, not compute).
        assert!(
            p.decode_step.gpu_ms >= bound_ms && p.decode_step.gpu_ms < 2.0 * bound_ms,
            "{model}: {}",
            p.decode_step.gpu_ms
        );
    }
}

#[test]
fn moe_decodes_read_only_the_routed_experts() {
    // Mixtral-8x7B (46.7 B parameters, 12.9 B active) at batch 1: two of eight experts per layer are read, so a
    // decode step costs far less than reading all weights; its GPU time sits between the active weights'
    // (12,879,925,248 − 131,072,000 embedding rows) · 2 B / 3,350 GB/s = 7.61 ms and the total's 27.8 ms.
    let req = request(json!({"system": "dgx-h100", "model": "Mixtral-8x7B",
        "workload": {"input_tokens": 128, "output_tokens": 128, "concurrency": 1}}));
    let p = run(&req);
    assert_eq!(p.params_active, 12_879_925_248.0);
    assert_eq!(p.params_total, 46_702_792_704.0);
    let active_ms = (12_879_925_248.0 - 131_072_000.0) * 2.0 / 3350e9 * 1e3;
    assert!(p.decode_step.gpu_ms > active_ms && p.decode_step.gpu_ms < 2.0 * active_ms, "{}", p.decode_step.gpu_ms);
    assert!(p.decode_step.operators.iter().any(|o| o.name == crate::llm::operators::OpName::Moe));
    // ep 2 at tp 2: four experts per GPU, each whole, receiving ⌈1/2⌉ token's routed copies on average.
    let ep = request(json!({"system": "dgx-h100", "model": "Mixtral-8x7B", "parallelism": {"tp": 2, "ep": 2},
        "workload": {"input_tokens": 128, "output_tokens": 128, "concurrency": 1}}));
    let e = run(&ep);
    let moe = e.decode_step.operators.iter().find(|o| o.name == crate::llm::operators::OpName::Moe).unwrap();
    assert_eq!(moe.features, vec![1, 4096, 14336, 4, 2]);
}

#[test]
fn ttft_grows_with_input_length_and_concurrency_and_tpot_with_concurrency() {
    let at = |input: u32, conc: u32| {
        run(&llama70b(4, json!({"input_tokens": input, "output_tokens": 256, "concurrency": conc})))
    };
    let base = at(1024, 16);
    let (longer, busier) = (at(4096, 16), at(1024, 128));
    // The steady state's directions.
    let (b, l, u) = (&base.steady_state, &longer.steady_state, &busier.steady_state);
    assert!(l.ttft_ms > b.ttft_ms && u.ttft_ms > b.ttft_ms && u.tpot_ms > b.tpot_ms, "{b:?} {l:?} {u:?}");
    // The simulated benchmark: more clients queue longer and share more steps; a lone client's TTFT is its
    // prompt's prefill, longer for a longer prompt. (Sixteen clients with 4,096-token prompts can see a shorter
    // mean TTFT than with 1,024: their long prefills stagger the clients, so fewer prompts arrive together.)
    assert!(busier.ttft_ms > base.ttft_ms && busier.tpot_ms > base.tpot_ms);
    assert!(at(4096, 1).ttft_ms > at(1024, 1).ttft_ms);
    // More concurrency, more throughput (until the batch saturates).
    assert!(busier.throughput.output_tokens_per_s > base.throughput.output_tokens_per_s);
    let single = at(1024, 1);
    assert!(single.tpot_ms < base.tpot_ms && single.ttft_ms < base.ttft_ms);
    // The steady state obeys Little's law: X = concurrency / R; output tokens/s = X·O; per GPU over tp·pp = 4.
    for p in [&base, &longer, &busier, &single] {
        let st = &p.steady_state;
        let c = p.config.concurrency.unwrap() as f64;
        let x = c / (st.request_latency_ms / 1e3);
        assert!((st.throughput.requests_per_s - x).abs() < 1e-9 * x);
        assert!((st.throughput.output_tokens_per_s - 256.0 * x).abs() < 1e-6 * x);
        assert!((st.throughput.per_gpu * 4.0 - st.throughput.output_tokens_per_s).abs() < 1e-6 * x);
        assert!((st.request_latency_ms - st.ttft_ms - 255.0 * st.tpot_ms).abs() < 1e-6 * st.request_latency_ms);
        assert!(p.prefill_step_ms > p.decode_step_ms);
        // The simulated benchmark: with every output 256 tokens, each request's latency is its TTFT + 255 TPOT,
        // so the means obey it too; its throughput is the 1,000 requests' tokens over the run.
        let sim = p.simulation.as_ref().unwrap();
        assert!((p.request_latency_ms - p.ttft_ms - 255.0 * p.tpot_ms).abs() < 1e-6 * p.request_latency_ms);
        assert_eq!((sim.completed, sim.requests), (1000, 1000));
        let tokens = 256_000.0 / sim.duration_s;
        assert!((p.throughput.output_tokens_per_s - tokens).abs() < 1e-6 * tokens);
        assert!((p.throughput.per_gpu * 4.0 - tokens).abs() < 1e-6 * tokens);
        // The simulation's ordering of percentiles.
        assert!(sim.ttft.p50_ms <= sim.ttft.p90_ms && sim.ttft.p90_ms <= sim.ttft.p99_ms);
    }
}

#[test]
fn an_open_loop_at_a_closed_loops_throughput_is_that_closed_loop() {
    let closed = run(&llama70b(4, json!({"input_tokens": 1024, "output_tokens": 256, "concurrency": 32})));
    let rate = closed.steady_state.throughput.requests_per_s;
    let open = run(&llama70b(4, json!({"input_tokens": 1024, "output_tokens": 256, "request_rate": rate})));
    assert!((open.batch.running - 32.0).abs() < 0.2, "{}", open.batch.running);
    assert!((open.steady_state.tpot_ms - closed.steady_state.tpot_ms).abs() < 0.02 * closed.steady_state.tpot_ms);
    let flood = run(&llama70b(4, json!({"input_tokens": 1024, "output_tokens": 256, "request_rate": 1e6})));
    assert!(flood.warnings.iter().any(|w| w.contains("grows without bound")), "{:?}", flood.warnings);
}

#[test]
fn tensor_parallelism_adds_two_all_reduces_per_layer() {
    let p = run(&llama70b(4, json!({"input_tokens": 1024, "output_tokens": 256, "concurrency": 8})));
    let ar: f64 = p
        .decode_step
        .operators
        .iter()
        .filter(|o| o.name == crate::llm::operators::OpName::MpAllReduce)
        .map(|o| o.calls_per_step)
        .sum();
    // 2 per layer · 80 layers + the vocabulary-parallel embedding's one.
    assert_eq!(ar, 161.0);
    // A decode step's LM head covers only the sampled sequences' last tokens.
    let head = p.decode_step.operators.iter().find(|o| o.name == crate::llm::operators::OpName::FinalLinear).unwrap();
    assert_eq!(head.features, vec![1, p.decode_step.decode_seqs as u64, 128256 / 4, 8192]);
    // Pipeline parallelism: the sends appear, and each GPU holds half the layers.
    let pp = run(&request(json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "parallelism": {"tp": 4, "pp": 2},
        "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 8}})));
    assert!(pp.memory.weights_gib < 0.55 * p.memory.weights_gib);
}

#[test]
fn a_static_batch_is_one_prefill_and_the_decode_steps() {
    let req = request(json!({"system": "dgx-h100", "model": "Llama-3-8B",
        "workload": {"input_tokens": 512, "output_tokens": 512, "concurrency": 1}}));
    let s = system("dgx-h100");
    let cfg = validate(&req, &s).unwrap();
    let b = predict_static_batch(&cfg, &backend(&s), ServingConstants::CALIBRATED, 16).unwrap();
    assert_eq!(b.waves, 1);
    assert_eq!((b.prefill.load.prefill_tokens, b.decode.load.decode_seqs), (16 * 512, 16));
    assert_eq!(b.decode.load.decode_context, 512 + 256);
    assert!((b.latency_s - (b.prefill.time_s + 511.0 * b.decode.time_s)).abs() < 1e-12);
}

#[test]
fn invalid_requests_name_their_field() {
    let s = system("dgx-h100");
    let base = json!({"system": "dgx-h100", "model": "Llama-3.1-70B",
        "workload": {"input_tokens": 128, "output_tokens": 128, "concurrency": 1}});
    let cases = [
        (json!({"model": "Llama-9-1T"}), "model"),
        (json!({"parallelism": {"tp": 3}}), "parallelism.tp"),
        (json!({"parallelism": {"tp": 128}}), "parallelism.tp"),
        (json!({"parallelism": {"ep": 2}}), "parallelism.ep"),
        (json!({"parallelism": {"pp": 81}}), "parallelism.pp"),
        (json!({"model": "Llama-3.1-405B", "parallelism": {"tp": 16, "pp": 126}}), "parallelism"),
        (json!({"workload": {"input_tokens": 0, "output_tokens": 1, "concurrency": 1}}), "workload.input_tokens"),
        (json!({"workload": {"input_tokens": 1, "output_tokens": 1, "burstiness": 2.0}}), "workload.burstiness"),
        (json!({"workload": {"input_tokens": 1, "output_tokens": 1, "range_ratio": 1.0}}), "workload.range_ratio"),
        (
            json!({"workload": {"input_tokens": 1, "output_tokens": 1, "range_ratio": 0.1, "input_tokens_std": 3}}),
            "workload.range_ratio",
        ),
        (
            json!({"workload": {"input_tokens": 1, "output_tokens": 1, "min_length_ratio": 0.0}}),
            "workload.min_length_ratio",
        ),
        (
            json!({"workload": {"input_tokens": 1, "output_tokens": 1, "min_length_ratio": 1.5}}),
            "workload.min_length_ratio",
        ),
        (
            json!({"workload": {"input_tokens": 1, "output_tokens": 1, "min_length_ratio": 0.8, "range_ratio": 0.1}}),
            "workload.min_length_ratio",
        ),
        (json!({"workload": {"input_tokens": 1, "output_tokens": 1, "num_requests": 0}}), "workload.num_requests"),
        (json!({"slo": {"ttft_ms": 0}}), "slo.ttft_ms"),
        (json!({"prefill": {"workers": 1}}), "prefill"),
        (json!({"workload": {"input_tokens": 1, "output_tokens": 1, "request_rate": -1.0}}), "workload.request_rate"),
        (json!({"engine_options": {"gpu_memory_utilization": 1.5}}), "engine_options.gpu_memory_utilization"),
        (json!({"engine_options": {"scheduler_recv_interval": 10}}), "engine_options.scheduler_recv_interval"),
        (
            json!({"engine": "sglang", "engine_options": {"scheduler_recv_interval": 0}}),
            "engine_options.scheduler_recv_interval",
        ),
        (json!({"model": {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 3, "vocab": 100}}), "model.kv_heads"),
        (json!({"model": {"hidden": 64, "heads": 4, "vocab": 100}}), "model.layers"),
        (json!({"model": {"hf_config": {"hidden_size": 64}}}), "model.hf_config.num_hidden_layers"),
        (json!({"model": {"hf_config": {}, "layers": 2}}), "model.layers"),
        (
            json!({"model": {"layers": 2, "hidden": 64, "heads": 4, "vocab": 100,
                "moe": {"experts": 4, "top_k": 5, "expert_ffn_hidden": 64}}}),
            "model.moe.top_k",
        ),
    ];
    for (patch, field) in cases {
        let mut v = base.clone();
        for (k, x) in patch.as_object().unwrap() {
            v[k] = x.clone();
        }
        let err = validate(&request(v.clone()), &s).unwrap_err();
        assert_eq!(err.field, field, "{v}: {err}");
    }
    // fp8 on an A100: no FP8 tensor cores.
    let a100 = system("dgx-a100-80g");
    let mut v = base.clone();
    v["precision"] = json!("fp8");
    assert_eq!(validate(&request(v), &a100).unwrap_err().field, "precision");
}

#[test]
fn a_hugging_face_config_predicts_what_the_catalog_entry_does() {
    let hf = json!({"system": "dgx-h100", "model": {"name": "Llama-3.1-70B", "hf_config": {"hidden_size": 8192,
        "intermediate_size": 28672, "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8,
        "vocab_size": 128256, "hidden_act": "silu", "rms_norm_eps": 1e-5}}, "parallelism": {"tp": 4},
        "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 32}});
    let a = run(&request(hf));
    let b = run(&llama70b(4, json!({"input_tokens": 1024, "output_tokens": 256, "concurrency": 32})));
    assert_eq!((a.ttft_ms, a.tpot_ms, a.memory), (b.ttft_ms, b.tpot_ms, b.memory));
}

#[test]
fn every_catalog_model_predicts_on_eight_h100s() {
    for e in catalog::catalog() {
        let m = &e.model;
        let tp = [8u32, 4, 2, 1]
            .into_iter()
            .find(|t| m.heads % t == 0 && (m.kv_heads % t == 0 || t % m.kv_heads == 0))
            .unwrap();
        let req = request(json!({"system": "dgx-h100", "model": m.name, "parallelism": {"tp": tp},
            "precision": "fp8", "workload": {"input_tokens": 2048, "output_tokens": 512, "concurrency": 64}}));
        let p = run(&req);
        assert!(p.ttft_ms > 0.0 && p.tpot_ms > 0.0 && p.ttft_ms.is_finite() && p.tpot_ms.is_finite(), "{}", m.name);
    }
}

#[test]
fn data_parallel_attention_dispatches_experts_by_all_to_all() {
    // Mixtral-8x7B on 4 H100s, ep = tp = 4, data-parallel attention, 64 requests of 512 + 128 tokens.
    let req = request(json!({"system": "dgx-h100", "model": "Mixtral-8x7B",
        "parallelism": {"tp": 4, "ep": 4, "dp_attention": true},
        "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 64}}));
    let p = run(&req);
    // Weights per GPU: attention 41,943,040 params, two norms 8192, two of the eight experts 352,321,536, the
    // router 32,768 (all 2 B) = 788,611,072 B per layer, × 32 = 25,235,554,304; embedding and head whole
    // 2·32000·4096·2 = 524,288,000; final norm 8192 B: 25,759,850,496 B.
    assert!((p.memory.weights_gib * GIB - 25_759_850_496.0).abs() < 1.0, "{}", p.memory.weights_gib * GIB);
    // Each rank caches its own requests with all 8 key/value heads: 2·32·8·128·2 = 131,072 B per token.
    // Workspace 8192·(2·4096 + 3·28672)·2 + 1024·32000·4 + 1 GiB = 2,748,317,696 B; KV 0.9·80 GiB − weights −
    // workspace = 48,801,243,136 B → 23,270 blocks of 16 → 581 requests of 40 blocks per rank, × 4 ranks = 2,324.
    assert_eq!(p.memory.kv_bytes_per_token_per_gpu, 131_072.0);
    assert_eq!(p.memory.max_concurrency, 2324);
    let names: Vec<_> = p.decode_step.operators.iter().map(|o| o.name).collect();
    use crate::llm::operators::OpName;
    assert!(!names.contains(&OpName::MpAllReduce), "{names:?}");
    let a2a = p.decode_step.operators.iter().find(|o| o.name == OpName::EpAllToAll).unwrap();
    // Dispatch and combine in each of the 32 MoE layers; a rank's decode tokens ⌈64/4⌉ = 16 · top-2 · 4096 · 2 B.
    assert_eq!(a2a.calls_per_step, 64.0);
    let local = (p.decode_step.decode_seqs as u64).div_ceil(4);
    assert_eq!(a2a.features[0], local * 2 * 4096 * 2);
    // The experts of one GPU see the routed copies of every rank's tokens that chose them: 4·local tokens' copies
    // spread over 4 GPUs, local tokens' worth; its 2 of 8 experts, whole.
    let moe = p.decode_step.operators.iter().find(|o| o.name == OpName::Moe).unwrap();
    assert_eq!(moe.features, vec![local, 4096, 14336, 2, 2]);
    // Two attention ranks of two GPUs each (vLLM's -tp 2 -dp 2 with expert parallelism over 4): attention
    // all-reduces within a rank's pair of GPUs, the tokens still dispatched to the experts of all four.
    let mut half = req.clone();
    (half.parallelism.dp_attention, half.parallelism.attention_dp_size) = (false, Some(2));
    let h = run(&half);
    let ar = h.decode_step.operators.iter().find(|o| o.name == OpName::MpAllReduce).unwrap();
    assert_eq!(&ar.features[1..], &[1, 2]);
    assert!(h.decode_step.operators.iter().any(|o| o.name == OpName::EpAllToAll));
    // Refused: an attention_dp_size that does not divide tp or contradicts dp_attention, or a dense model.
    let s = system("dgx-h100");
    let mut bad = req.clone();
    bad.parallelism.attention_dp_size = Some(2);
    assert_eq!(validate(&bad, &s).unwrap_err().field, "parallelism.attention_dp_size");
    (bad.parallelism.dp_attention, bad.parallelism.attention_dp_size) = (false, Some(3));
    assert_eq!(validate(&bad, &s).unwrap_err().field, "parallelism.attention_dp_size");
    let dense = request(json!({"system": "dgx-h100", "model": "Llama-3.1-8B",
        "parallelism": {"tp": 2, "dp_attention": true},
        "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 4}}));
    assert_eq!(validate(&dense, &s).unwrap_err().field, "parallelism.dp_attention");
}

#[test]
fn host_cost_by_engine_generation_and_async_scheduling() {
    // Llama-3.1-70B tp 4, 64 requests of 1024 + 256 tokens. A decode-only step of the shipped constants:
    // vLLM V1 host = 19 + 21.7 · D µs, V0 host = 972 + 71.7 · D µs with D decoding sequences, on the same GPU time;
    // with async scheduling the step takes max(GPU, host) instead of GPU + host.
    let w = json!({"input_tokens": 1024, "output_tokens": 256, "concurrency": 64});
    let with = |opts: serde_json::Value| {
        run(&request(json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "parallelism": {"tp": 4},
            "engine_options": opts, "workload": w})))
    };
    // vLLM V1 schedules asynchronously by default (the V0 engine never does): `async_scheduling: false` is the
    // synchronous step.
    let (v1, v0, overlapped) =
        (with(json!({"async_scheduling": false})), with(json!({"vllm_engine": "v0"})), with(json!({})));
    assert!(overlapped.config.settings.async_scheduling && !v0.config.settings.async_scheduling);
    let d = v1.decode_step.decode_seqs as f64;
    let c = ServingConstants::CALIBRATED;
    assert!((v1.decode_step.overhead_ms - (c.vllm.step_us + c.vllm.seq_us * d) * 1e-3).abs() < 1e-9);
    assert!((v1.decode_step.overhead_ms - (19.0 + 21.7 * d) * 1e-3).abs() < 1e-9);
    let gpu = v1.decode_step.gpu_ms.max(v1.decode_step.launch_ms);
    assert!((v1.decode_step.time_ms - (gpu + v1.decode_step.overhead_ms)).abs() < 1e-9);
    if v0.decode_step.decode_seqs as f64 == d {
        assert!((v0.decode_step.overhead_ms - (972.0 + 71.7 * d) * 1e-3).abs() < 1e-9);
    }
    assert!(v0.tpot_ms > v1.tpot_ms);
    // Async: the GPU time hides the host's (it is the larger here).
    let o = &overlapped.decode_step;
    assert!((o.time_ms - (o.gpu_ms.max(o.launch_ms)).max(o.overhead_ms)).abs() < 1e-9);
    assert!(overlapped.tpot_ms < v1.tpot_ms);
    // The interval (for a deployment nobody measured) brackets each latency.
    assert_eq!(v1.interval.class, "unseen deployment");
    assert!(v1.interval.tpot_ms.p10 < v1.tpot_ms && v1.tpot_ms < v1.interval.tpot_ms.p90);
    assert!(v1.interval.ttft_ms.p10 < v1.ttft_ms && v1.ttft_ms < v1.interval.ttft_ms.p90);
}

#[test]
fn a_disaggregated_requests_ttft_includes_its_kv_transfer() {
    // Llama-3.1-70B, a prefill worker of tp 4 and a decode worker of tp 8 on dgx-h100 (8 GPUs per node): 4 + 8 > 8,
    // so the cache crosses nodes. Per token on one prefill GPU: 2·80·(8/4)·128·2 B = 81,920 B; 1,024 tokens:
    // 83,886,080 B per GPU. dgx-h100's NICs: 400 GB/s per node over 8 NICs; 4 GPUs sending at once get
    // min(400/4, 400/8) = 50 GB/s each: 83,886,080 B / 50e9 B/s = 1,677.7216 µs, + α 5 µs = 1,682.7216 µs (the raw
    // analytic backend: no efficiency).
    let req = request(json!({"system": "dgx-h100", "model": "Llama-3.1-70B", "mode": "disagg",
        "prefill": {"parallelism": {"tp": 4}}, "decode": {"parallelism": {"tp": 8}},
        "workload": {"input_tokens": 1024, "output_tokens": 16, "concurrency": 1, "num_requests": 4}}));
    let s = system("dgx-h100");
    let cfg = validate(&req, &s).unwrap();
    let raw = AnalyticBackend::new(s.clone());
    let p = predict(&cfg, &raw, ServingConstants::ROOFLINE).unwrap();
    let d = p.disagg.as_ref().unwrap();
    assert_eq!(d.kv_transfer_bytes_per_gpu, 83_886_080.0);
    assert!((d.kv_transfer_ms - 1.6827216).abs() < 1e-9, "{}", d.kv_transfer_ms);
    // One client at a time: every TTFT is the prefill worker's step of the prompt, the transfer and the decode
    // worker's first step (one token at a context of 1,024), timed by the same step model.
    let (pcfg, dcfg) = (cfg.for_pool(&d.pools.prefill), cfg.for_pool(&d.pools.decode));
    let mut ps = steady::Solver::new(&pcfg, &raw, ServingConstants::ROOFLINE, 1000);
    let mut ds = steady::Solver::new(&dcfg, &raw, ServingConstants::ROOFLINE, 1000);
    let pre = ps.step(step::StepLoad {
        decode_seqs: 0,
        decode_context: 0,
        prefill_tokens: 1024,
        prompt_len: 1024,
        sampled: 1,
        graph_pad_tokens: 0,
        draft_tokens: 0,
    });
    let first = ds.step(step::StepLoad {
        decode_seqs: 1,
        decode_context: 1024,
        prefill_tokens: 0,
        prompt_len: 0,
        sampled: 1,
        graph_pad_tokens: 0,
        draft_tokens: 0,
    });
    let want = (pre.unwrap().time_s + 1.6827216e-3 + first.unwrap().time_s) * 1e3;
    let sim = p.simulation.as_ref().unwrap();
    assert!((sim.ttft.mean_ms - want).abs() < 1e-6 && (sim.ttft.max_ms - want).abs() < 1e-6, "{sim:?} vs {want}");
    assert_eq!(sim.gpus, 12);
    // Within one node (tp 4 + tp 4 ≤ 8): NVSwitch at 350 GB/s, α 2 µs: 83,886,080 / 350e9 s = 239.6745 µs + 2 µs.
    let mut near = req.clone();
    near.decode.as_mut().unwrap().parallelism.tp = 4;
    let n = predict(&validate(&near, &s).unwrap(), &raw, ServingConstants::ROOFLINE).unwrap();
    let want_us = 83_886_080.0 / 350e9 * 1e6 + 2.0;
    assert!((n.disagg.unwrap().kv_transfer_ms * 1e3 - want_us).abs() < 1e-6);
    // Refused: a pool missing, or the top-level parallelism given.
    let mut bad = req.clone();
    bad.decode = None;
    assert_eq!(validate(&bad, &s).unwrap_err().field, "decode");
    let mut bad = req.clone();
    bad.parallelism.tp = 2;
    assert_eq!(validate(&bad, &s).unwrap_err().field, "parallelism");
    let mut bad = req;
    bad.prefill.as_mut().unwrap().parallelism.tp = 3;
    assert_eq!(validate(&bad, &s).unwrap_err().field, "prefill.parallelism.tp");
}

#[test]
fn without_chunked_prefill_vllm_refuses_a_prompt_above_its_budget_and_sglang_runs_it() {
    // vLLM rejects max_num_batched_tokens below max_model_len without chunked prefill
    // (`SchedulerConfig.verify_max_model_len`): 4,000-token prompts against a 2,048-token budget are a 422 naming the
    // workload's input length. SGLang's `PrefillAdder` admits the first request of a batch whatever its length.
    let req = |engine: &str| {
        request(json!({"system": "dgx-h100", "model": "Llama-3.1-8B", "engine": engine,
            "workload": {"input_tokens": 4000, "output_tokens": 16, "concurrency": 2},
            "engine_options": {"chunked_prefill": false, "max_num_batched_tokens": 2048}}))
    };
    let e = validate(&req("vllm"), &system("dgx-h100")).unwrap_err();
    assert_eq!(e.field, "workload.input_tokens");
    assert!(e.message.contains("4000-token prompt") && e.message.contains("2048") && e.message.contains("vLLM"));
    assert!(validate(&req("sglang"), &system("dgx-h100")).is_ok());
}

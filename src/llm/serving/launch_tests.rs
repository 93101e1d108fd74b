//! Hand-counted launches of vLLM V1's compiled steps ([`super::launch`]): a step with prefill above the largest
//! captured size runs Inductor's pieces without graphs, one within it replays the piecewise graphs, and the other
//! engines stay eager.

use serde_json::json;

use super::launch::{LaunchPath, OpHost};
use super::step::StepLoad;
use super::*;
use crate::cost::AnalyticBackend;
use crate::hw::{presets, System};
use crate::llm::operators::OpName;

fn system() -> System {
    presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap()
}

fn config(engine: &str, tp: u32) -> ServingConfig {
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-h100", "model": "Llama-3.1-8B",
        "engine": engine, "parallelism": {"tp": tp},
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 4}}))
    .unwrap();
    validate(&req, &system()).unwrap()
}

/// A 1,024-token prompt prefilled beside 4 decodes: 1,028 tokens, above vLLM's largest captured size (512).
const MIXED: StepLoad = StepLoad { decode_seqs: 4, decode_context: 1536, prefill_tokens: 1024, prompt_len: 1024, sampled: 5 };

/// A 256-token chunk beside 4 decodes: 260 tokens, within the captured sizes.
const SMALL: StepLoad = StepLoad { prefill_tokens: 256, ..MIXED };

fn step(cfg: &ServingConfig, load: StepLoad) -> steady::StepResult {
    let consts = ServingConstants::CALIBRATED;
    let backend = ServingDerated::new(AnalyticBackend::new(system()), consts);
    steady::Solver::new(cfg, &backend, consts, 1000).step(load).unwrap()
}

#[test]
fn operators_run_where_vllm_compiles_them() {
    assert_eq!(OpHost::of(OpName::Linear1), OpHost::Piece);
    assert_eq!(OpHost::of(OpName::RMSNorm), OpHost::Piece);
    assert_eq!(OpHost::of(OpName::AttentionPrefill), OpHost::Splitting);
    assert_eq!(OpHost::of(OpName::AttentionDecode), OpHost::Splitting);
    assert_eq!(OpHost::of(OpName::Moe), OpHost::OpaqueInPiece);
    assert_eq!(OpHost::of(OpName::MpAllReduce), OpHost::OpaqueInPiece);
    assert_eq!(OpHost::of(OpName::Sampler), OpHost::OutsideModel);
    assert_eq!(OpHost::of(OpName::FinalLinear), OpHost::OutsideModel);
}

#[test]
fn a_vllm_v1_step_above_the_captured_sizes_launches_inductors_kernels() {
    // Llama-3.1-8B (32 layers) bf16 at tp 1. Kernels Inductor compiles into the pieces: per layer two norms, QKV,
    // RoPE, output, gate-and-up, SwiGLU and down = 8, × 32 = 256, + the embedding and the final norm = 258, at 9.1
    // µs each = 2,347.8 µs. Python calls: the 32 attention calls between the pieces and the LM head and sampler
    // outside the model, 34 × 20.9 = 710.6 µs. Launch: 3,058.4 µs.
    let consts = ServingConstants::CALIBRATED;
    assert_eq!((consts.inductor_kernel_us, consts.custom_op_us, consts.piece_replay_us), (9.1, 20.9, 6.0));
    let s = step(&config("vllm", 1), MIXED);
    assert_eq!(s.launch, LaunchPath::Compiled);
    assert!((s.launch_s * 1e6 - 3_058.4).abs() < 1e-6, "{} µs", s.launch_s * 1e6);
    // At tp 2 the 2 · 32 + 1 all-reduces (custom ops Inductor calls out to) and the logits all-gather add 66 Python
    // calls: 3,058.4 + 66 · 20.9 = 4,437.8 µs.
    let s = step(&config("vllm", 2), MIXED);
    assert!((s.launch_s * 1e6 - 4_437.8).abs() < 1e-6, "{} µs", s.launch_s * 1e6);
}

#[test]
fn a_vllm_v1_step_within_the_captured_sizes_replays_its_pieces() {
    // 260 tokens ≤ 512: 32 attention calls split the model into 33 pieces, each one graph launch of 6 µs = 198 µs,
    // + 34 Python calls (attention, LM head, sampler) × 20.9 = 710.6 µs: 908.6 µs.
    let cfg = config("vllm", 1);
    let piecewise = step(&cfg, SMALL);
    assert_eq!(piecewise.launch, LaunchPath::Piecewise);
    assert!((piecewise.launch_s * 1e6 - 908.6).abs() < 1e-6, "{} µs", piecewise.launch_s * 1e6);
    // Captured only up to 256 tokens, the same step runs the pieces without graphs (3,058.4 µs of launches, as
    // above), and the 258 analytic kernels inside the pieces cost the GPU kernel_us 7.40 µs beyond their bodies
    // instead of graph_kernel_us 1.75 µs: 258 · 5.65 = 1,457.7 µs more GPU time.
    let mut small_graphs = cfg.clone();
    small_graphs.settings.cuda_graph_max_batch = 256;
    let compiled = step(&small_graphs, SMALL);
    assert_eq!(compiled.launch, LaunchPath::Compiled);
    assert!((compiled.launch_s * 1e6 - 3_058.4).abs() < 1e-6);
    let extra_us = (compiled.gpu_s - piecewise.gpu_s) * 1e6;
    assert!((extra_us - 1_457.7).abs() < 1e-6, "{extra_us} µs");
}

#[test]
fn enforce_eager_the_v0_engine_and_sglang_launch_every_kernel_from_python() {
    // vLLM V1 with `cuda_graphs: false` (`--enforce-eager`: -O0, no compilation), vLLM's V0 engine and SGLang run
    // the mixed step's modules eagerly: every counted kernel at python_kernel_us 70.7 µs. Counted kernels: the 258
    // above, the LM head and sampler (2), and the attention's: 32 × 2 decode (split-KV pass and reduction) + at
    // least one prefill kernel per layer (32); so the eager launch is at least 356 · 70.7 = 25,169.2 µs, 8.2× the
    // compiled 3,058.4.
    let mut eager = config("vllm", 1);
    eager.settings.cuda_graphs = false;
    let mut v0 = config("vllm", 1);
    v0.settings.vllm_engine = request::VllmEngine::V0;
    for cfg in [eager, v0, config("sglang", 1)] {
        let s = step(&cfg, MIXED);
        assert_eq!(s.launch, LaunchPath::Eager);
        assert!(s.launch_s * 1e6 >= 25_169.2 - 1e-6, "{} µs", s.launch_s * 1e6);
        // A whole number of 70.7 µs launches, plus the prefill attention charged by its share (here the whole
        // prompt: share 1).
        let kernels = s.launch_s * 1e6 / 70.7;
        assert!((kernels - kernels.round()).abs() < 1e-6, "{kernels}");
    }
}

#[test]
fn a_vllm_v1_decode_batch_beyond_the_captured_sizes_runs_the_compiled_pieces() {
    // 600 decodes > 512: no full graph; the pieces run without graphs (tokens 600 > 512). The same 258 compiled
    // kernels and 34 Python calls: 3,058.4 µs.
    let load = StepLoad { decode_seqs: 600, prefill_tokens: 0, sampled: 600, ..MIXED };
    let s = step(&config("vllm", 1), load);
    assert!(!s.cuda_graph);
    assert_eq!(s.launch, LaunchPath::Compiled);
    assert!((s.launch_s * 1e6 - 3_058.4).abs() < 1e-6, "{} µs", s.launch_s * 1e6);
}

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
const MIXED: StepLoad = StepLoad {
    decode_seqs: 4,
    decode_context: 1536,
    prefill_tokens: 1024,
    prompt_len: 1024,
    sampled: 5,
    graph_pad_tokens: 0,
    draft_tokens: 0,
};

/// A 252-token chunk beside 4 decodes: 256 tokens, a captured size (no padding).
const SMALL: StepLoad = StepLoad { prefill_tokens: 252, ..MIXED };

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
    // 256 tokens ≤ 512: 32 attention calls split the model into 33 pieces, each one graph launch of 6 µs = 198 µs,
    // + 34 Python calls (attention, LM head, sampler) × 20.9 = 710.6 µs: 908.6 µs.
    let cfg = config("vllm", 1);
    let piecewise = step(&cfg, SMALL);
    assert_eq!(piecewise.launch, LaunchPath::Piecewise);
    assert!((piecewise.launch_s * 1e6 - 908.6).abs() < 1e-6, "{} µs", piecewise.launch_s * 1e6);
    // Captured only up to 248 tokens, the same step runs the pieces without graphs (3,058.4 µs of launches, as
    // above), and the 258 analytic kernels inside the pieces cost the GPU kernel_us 7.40 µs beyond their bodies
    // instead of graph_kernel_us 1.75 µs: 258 · 5.65 = 1,457.7 µs more GPU time.
    let mut small_graphs = cfg.clone();
    small_graphs.settings.cuda_graph_max_batch = 248;
    let compiled = step(&small_graphs, SMALL);
    assert_eq!(compiled.launch, LaunchPath::Compiled);
    assert!((compiled.launch_s * 1e6 - 3_058.4).abs() < 1e-6);
    let extra_us = (compiled.gpu_s - piecewise.gpu_s) * 1e6;
    assert!((extra_us - 1_457.7).abs() < 1e-6, "{extra_us} µs");
}

#[test]
fn enforce_eager_the_v0_engine_and_sglang_launch_every_kernel_from_python() {
    // vLLM V1 with `cuda_graphs: false` (`--enforce-eager`: -O0, no compilation), vLLM's V0 engine and SGLang run
    // the mixed step's modules eagerly: every counted kernel at python_kernel_us 69.3 µs. Counted kernels: the 258
    // above, the LM head and sampler (2), and the attention's: 32 × 2 decode (split-KV pass and reduction) + at
    // least one prefill kernel per layer (32); so the eager launch is at least 356 · 69.3 = 24,670.8 µs, 8.1× the
    // compiled 3,058.4.
    let mut eager = config("vllm", 1);
    eager.settings.cuda_graphs = false;
    let mut v0 = config("vllm", 1);
    v0.settings.vllm_engine = request::VllmEngine::V0;
    for cfg in [eager, v0, config("sglang", 1)] {
        let s = step(&cfg, MIXED);
        assert_eq!(s.launch, LaunchPath::Eager);
        assert!(s.launch_s * 1e6 >= 24_670.8 - 1e-6, "{} µs", s.launch_s * 1e6);
        // A whole number of launches at the shipped host time per kernel, plus the prefill attention charged by
        // its share (here the whole prompt: share 1).
        let kernels = s.launch_s * 1e6 / crate::cost::Efficiency::CALIBRATED.host_us;
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

/// The token count of `name`'s first operator in `step`'s report (dims[1] of a linear layer: its rows), and the
/// batch of its decode attention (dims[0]).
fn rows(cfg: &ServingConfig, load: StepLoad) -> (u64, u64) {
    let consts = ServingConstants::CALIBRATED;
    let backend = ServingDerated::new(AnalyticBackend::new(system()), consts);
    let mut solver = steady::Solver::new(cfg, &backend, consts, 1000);
    let s = solver.step(load).unwrap();
    let detail = solver.detail(&s).unwrap();
    let dims = |name: OpName| {
        let o = detail.ops.iter().find(|o| o.op.name == name).unwrap();
        match o.op.work {
            crate::llm::operators::Work::Compute { shape, .. } => shape.dims,
            _ => panic!("{name:?} is not a compute operator"),
        }
    };
    (dims(OpName::Linear1)[1], dims(OpName::AttentionDecode)[0])
}

#[test]
fn a_piecewise_step_pads_its_pieces_tokens_to_the_next_captured_size() {
    // A 256-token chunk beside 4 decodes: 260 tokens. vLLM's capture sizes run …, 248, 256, 272, … (multiples of
    // 16 from 256), so the pieces run 272 rows: the QKV projection's rows are 272 = 260 + 12 padding, while the
    // decode attention between the pieces still sees its 4 real sequences.
    let cfg = config("vllm", 1);
    let load = StepLoad { prefill_tokens: 256, ..MIXED };
    assert_eq!(rows(&cfg, load), (272, 4));
    // 3 prefill tokens beside 4 decodes: 7 tokens pad to 8.
    assert_eq!(rows(&cfg, StepLoad { prefill_tokens: 3, ..MIXED }), (8, 4));
    // Above the largest captured size (1,028 > 512) the compiled pieces run the real 1,028 rows, and SGLang's eager
    // prefill step pads nothing: 260.
    assert_eq!(rows(&cfg, MIXED), (1028, 4));
    assert_eq!(rows(&config("sglang", 1), load), (260, 4));
}

#[test]
fn vllm_captures_up_to_twice_its_running_sequences() {
    use super::sim::steps::{graph_sizes, vllm_max_capture_size};
    // min(2 · 1,024, 512) = 512 (perfcast's large-GPU default); min(2 · 64, 512) = 128, a multiple of 8.
    assert_eq!(vllm_max_capture_size(None, 1024, 8192), 512);
    assert_eq!(vllm_max_capture_size(None, 64, 8192), 128);
    // 2 · 150 = 300: the list's multiples of 16 from 256 stop at 288, vLLM's largest size. Capped by a 300-token
    // budget instead: the same 288. Asked 1,000: 256 + 16 · 46 = 992.
    assert_eq!(vllm_max_capture_size(None, 150, 8192), 288);
    assert_eq!(vllm_max_capture_size(None, 1024, 300), 288);
    assert_eq!(vllm_max_capture_size(Some(1000), 1024, 8192), 992);
    // One sequence: 2 → sizes 1, 2; three: 6 → sizes 1, 2, 4, largest 4.
    assert_eq!(vllm_max_capture_size(None, 1, 8192), 2);
    assert_eq!(vllm_max_capture_size(None, 3, 8192), 4);
    // The list up to 288: 1, 2, 4 (3), 8…248 step 8 (31), 256, 272, 288 (3) = 37 sizes.
    let v = graph_sizes(request::Engine::Vllm, 288, true);
    assert_eq!((v.len(), v[3], v[33], v[34], v[36]), (37, 8, 248, 256, 288));
    // A vLLM instance started with max_num_seqs 64 captures up to 128 (the request's settings); SGLang keeps its
    // own table (512 on an 80 GB GPU at tp ≥ 4, 256 below).
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-h100", "model": "Llama-3.1-8B",
        "engine": "vllm", "parallelism": {"tp": 1}, "engine_options": {"max_num_seqs": 64},
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 4}}))
    .unwrap();
    assert_eq!(validate(&req, &system()).unwrap().settings.cuda_graph_max_batch, 128);
    assert_eq!(config("sglang", 1).settings.cuda_graph_max_batch, 256);
}

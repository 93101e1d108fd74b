//! Hand-counted kernels of a decode step: what a CUDA graph replay costs per analytic kernel
//! ([`ServingConstants::graph_kernel_us`]) and which RMSNorms TensorRT-LLM runs inside its all-reduces
//! ([`super::fusion`]), and what an eager step launched from Python costs the host
//! ([`ServingConstants::python_kernel_us`]).

use serde_json::json;

use super::step::{stage_ops, StageRole, StepLoad};
use super::*;
use crate::cost::AnalyticBackend;
use crate::hw::{presets, System};
use crate::llm::operators::OpName;

fn system(name: &str) -> System {
    presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap()
}

fn config(model: &str, engine: &str, tp: u32) -> ServingConfig {
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-h100", "model": model,
        "engine": engine, "parallelism": {"tp": tp},
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 4}}))
    .unwrap();
    validate(&req, &system("dgx-h100")).unwrap()
}

const DECODE4: StepLoad = StepLoad::decode(4, 1536, 1024);

/// Calls per step of `name` in the single stage's decode step of `cfg`.
fn calls(cfg: &ServingConfig, name: OpName) -> f64 {
    let ops = stage_ops(cfg, &system("dgx-h100"), &DECODE4, StageRole { first: true, last: true }, cfg.model.layers, 0);
    ops.iter().filter(|o| o.op.name == name).map(|o| o.per_step).sum()
}

#[test]
fn tensorrt_llm_runs_the_rmsnorms_inside_its_tensor_parallel_all_reduces() {
    // Llama-3.1-70B (80 layers, hidden 8,192). vLLM at tp 4: two norms per layer and the final norm, 2·80 + 1 =
    // 161 kernels, beside 2·80 all-reduces + the embedding's = 161.
    let vllm = config("Llama-3.1-70B", "vllm", 4);
    assert_eq!((calls(&vllm, OpName::RMSNorm), calls(&vllm, OpName::MpAllReduce)), (161.0, 161.0));
    // TensorRT-LLM at tp 4: the post-attention norm rides the attention's all-reduce, the next layer's input norm
    // (the last layer's: the final norm) the MLP's; only the first layer's input norm runs alone: 1 kernel. The
    // all-reduces stay 161.
    let trt = config("Llama-3.1-70B", "trtllm", 4);
    assert_eq!((calls(&trt, OpName::RMSNorm), calls(&trt, OpName::MpAllReduce)), (1.0, 161.0));
    assert_eq!(calls(&trt, OpName::AllreduceRmsNorm), 160.0);
    // At tp 1 there is no all-reduce to ride: 161 norms again.
    assert_eq!(calls(&config("Llama-3.1-70B", "trtllm", 1), OpName::RMSNorm), 161.0);
    // Llama-3.1-8B (32 layers, hidden 4,096 ≤ 4,096: Llama's layer keeps the fusion off): 2·32 + 1 = 65.
    assert_eq!(calls(&config("Llama-3.1-8B", "trtllm", 2), OpName::RMSNorm), 65.0);
}

#[test]
fn a_cuda_graph_replay_charges_graph_kernel_us_per_analytic_kernel() {
    // Llama-3.1-8B bf16 under vLLM at tp 1, every operator analytic. Kernels of the decode step: per layer two
    // norms, QKV, RoPE, decode attention (2: the split-KV pass and its reduction), output, gate-and-up, SwiGLU and
    // down = 10, × 32 layers = 320; embedding, final norm, LM head and sampler: 324. Eager (no graph, launch cost
    // set to 0 so only the GPU's side differs) each carries kernel_us 7.40 µs; replayed from a graph 1.75 µs:
    // 324 · 5.65 = 1,830.6 µs less GPU time.
    let s = system("dgx-h100");
    let consts = ServingConstants { eager_kernel_us: 0.0, ..ServingConstants::CALIBRATED };
    assert_eq!((consts.efficiency.kernel_us, consts.graph_kernel_us), (7.40, 1.75));
    let backend = ServingDerated::new(AnalyticBackend::new(s.clone()), consts);
    let graph_cfg = config("Llama-3.1-8B", "vllm", 1);
    let mut eager_cfg = graph_cfg.clone();
    eager_cfg.settings.cuda_graphs = false;
    let mut graph = steady::Solver::new(&graph_cfg, &backend, consts, 1000);
    let mut eager = steady::Solver::new(&eager_cfg, &backend, consts, 1000);
    let (g, e) = (graph.step(DECODE4).unwrap(), eager.step(DECODE4).unwrap());
    assert!(g.cuda_graph && !e.cuda_graph);
    let saved_us = (e.gpu_s - g.gpu_s) * 1e6;
    assert!((saved_us - 1830.6).abs() < 1e-6, "{saved_us} µs");
    // The report's operator rows carry the same in-graph cost: they sum to the step's GPU time.
    let detail = graph.detail(&g).unwrap();
    let rows_us: f64 = detail.ops.iter().zip(&detail.times).map(|(o, t)| o.per_step * t.time_us).sum();
    assert!((rows_us * 1e-6 - g.gpu_s).abs() < 1e-12 && (detail.gpu_s - g.gpu_s).abs() < 1e-12);
    // A step with prefill runs eagerly: no change.
    let mixed = StepLoad { prefill_tokens: 512, sampled: 5, ..DECODE4 };
    assert_eq!(graph.step(mixed).unwrap().gpu_s, eager.step(mixed).unwrap().gpu_s);
}

#[test]
fn an_eager_step_from_python_costs_the_host_python_kernel_us_per_kernel() {
    // The same Llama-3.1-8B decode step of 4 sequences, CUDA graphs off: its 324 kernels (counted above) launched
    // one by one. From Python (vLLM) each costs the host 69.3 µs (`python_kernel_us`, the training model's
    // `host_us` since the 2026-11-28 refit): 324 · 69.3 = 22,453.2 µs. 8 B parameters in bf16 are 16 GB, read once
    // per decode step at H100's 3.35 TB/s in ≈ 4.8 ms: the step is bound by its launches, 22.45 ms (async
    // scheduling: the host's 19 + 4 · 21.7 = 105.8 µs of scheduling overlaps it).
    let s = system("dgx-h100");
    let consts = ServingConstants::CALIBRATED;
    assert_eq!((consts.python_kernel_us, consts.eager_kernel_us), (crate::cost::Efficiency::CALIBRATED.host_us, 5.0));
    assert_eq!(consts.python_kernel_us, 69.3);
    let backend = ServingDerated::new(AnalyticBackend::new(s), consts);
    let mut cfg = config("Llama-3.1-8B", "vllm", 1);
    cfg.settings.cuda_graphs = false;
    let step = steady::Solver::new(&cfg, &backend, consts, 1000).step(DECODE4).unwrap();
    assert!((step.launch_s * 1e6 - 22_453.2).abs() < 1e-6, "{} s", step.launch_s);
    assert!(step.gpu_s < step.launch_s && (step.time_s - step.launch_s).abs() < 1e-12);
    // TensorRT-LLM's C++ executor (`trtllm_backend: tensorrt`) launches the same kernels at 5 µs each and its
    // PyTorch backend at 69.3 µs: at tp 1 (no all-reduce to fuse a norm into) the two run the same kernels, so
    // their launch times differ by 69.3 / 5 = 13.86×.
    let mut trt = config("Llama-3.1-8B", "trtllm", 1);
    trt.settings.cuda_graphs = false;
    let py = steady::Solver::new(&trt, &backend, consts, 1000).step(DECODE4).unwrap();
    trt.settings.trtllm_backend = super::request::TrtllmBackend::Tensorrt;
    let cpp = steady::Solver::new(&trt, &backend, consts, 1000).step(DECODE4).unwrap();
    assert!((py.launch_s / cpp.launch_s - 13.86).abs() < 1e-9, "{} / {}", py.launch_s, cpp.launch_s);
}

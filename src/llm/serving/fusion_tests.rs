//! Hand-counted kernels of TensorRT-LLM prefill steps with and without the norms its decoder layers run inside the
//! tensor-parallel all-reduces ([`super::fusion`]), each count derived from the model file's forward.

use serde_json::json;

use super::fusion::{allreduce_fusion, LayerFusion};
use super::step::{stage_ops, StageRole, StepLoad};
use super::*;
use crate::cost::AnalyticBackend;
use crate::hw::{presets, System};
use crate::llm::operators::OpName;

fn system() -> System {
    presets().into_iter().find(|p| p.name == "dgx-b200").unwrap().resolve().unwrap()
}

fn config(model: &str, tp: u32, precision: &str) -> ServingConfig {
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-b200", "model": model,
        "engine": "trtllm", "precision": precision, "parallelism": {"tp": tp},
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 4}}))
    .unwrap();
    validate(&req, &system()).unwrap()
}

/// One prompt of 1,024 tokens prefilled alone (no decodes): an eager step, every kernel launched from Python.
const PREFILL: StepLoad = StepLoad {
    decode_seqs: 0,
    decode_context: 1024,
    prefill_tokens: 1024,
    prompt_len: 1024,
    sampled: 1,
    graph_pad_tokens: 0,
    draft_tokens: 0,
};

/// (kernels launched, launch µs, GPU µs) of `cfg`'s prefill step with every operator analytic.
fn prefill(cfg: &ServingConfig) -> (f64, f64, f64) {
    let consts = ServingConstants::CALIBRATED;
    let backend = ServingDerated::new(AnalyticBackend::new(system()), consts);
    let mut solver = steady::Solver::new(cfg, &backend, consts, 1000);
    let step = solver.step(PREFILL).unwrap();
    let detail = solver.detail(&step).unwrap();
    assert!((detail.gpu_s - step.gpu_s).abs() < 1e-12, "the report's rows sum to the step's GPU time");
    (detail.kernels, step.launch_s * 1e6, step.gpu_s * 1e6)
}

/// Asserts that `cfg`'s prefill step launches `kernels` kernels (worked by hand in the caller), each costing the
/// host `python_kernel_us` (the training model's fitted `host_us`, referenced symbolically: the count is the
/// point, not the refitted µs), and returns its GPU µs.
fn assert_prefill(cfg: &ServingConfig, kernels: f64) -> f64 {
    let (k, l, gpu_us) = prefill(cfg);
    assert_eq!(k, kernels, "{}", cfg.model.name);
    let launch_us = kernels * ServingConstants::CALIBRATED.python_kernel_us;
    assert!((l - launch_us).abs() < 1e-6, "{}: {l} µs of launches, want {launch_us}", cfg.model.name);
    gpu_us
}

/// Calls per step of `name` in `cfg`'s single-stage prefill step.
fn calls(cfg: &ServingConfig, name: OpName) -> f64 {
    let moe = cfg.model.moe_layers();
    let ops = stage_ops(cfg, &system(), &PREFILL, StageRole { first: true, last: true }, cfg.model.layers - moe, moe);
    ops.iter().filter(|o| o.op.name == name).map(|o| o.per_step).sum()
}

#[test]
fn gpt_oss_at_tp_4_runs_its_72_layer_norms_inside_the_all_reduces() {
    // gpt-oss-120b (36 MoE layers, hidden 2,880), nvfp4, tp 4. Before (every norm its own kernel, as main counted
    // it: Llama's hidden > 4,096 rule kept gpt-oss out), per layer: input and post-attention RMSNorm 2, QKV
    // `Linear1` 2 (nvfp4: the activation quantization and the GEMM), `Attention_Prefill` 2 (KV-cache write and
    // attention), `Linear2` 2, the bf16 router 1, the fused MoE 5 (top-k/sort, gate+up, activation, down,
    // combine), two all-reduces 2 = 16; × 36 = 576; the embedding and its all-reduce, the final norm, the LM head,
    // the logits' all-gather and the sampler: 6 → 582 kernels, 582 · `python_kernel_us` of launches.
    // After: `TransformerBlock.forward_tp` (modeling_gpt_oss.py) calls `self.allreduce(x, AllReduceParams(
    // fusion_op=RESIDUAL_RMS_NORM, norm_weight=post_attention_layernorm.weight))` after attention and the same with
    // `next_layer_layernorm` after the MoE — the last layer's is `model.norm` (`post_load_weights`) — so 2 · 36 = 72
    // norms launch nothing; only layer 0's `input_layernorm` (`residual is None`) runs alone: 14 · 36 + 1 + 5 = 510
    // kernels, 510 · `python_kernel_us`.
    // The count is of the fusion: without the sliding window, whose windowed layers' prefill attention is charged
    // a fraction of a call per layer (`step::attention`), kernels and all.
    let mut cfg = config("gpt-oss-120b", 4, "fp4");
    cfg.model.sliding_window = None;
    assert_eq!((calls(&cfg, OpName::RMSNorm), calls(&cfg, OpName::AllreduceRmsNorm)), (1.0, 72.0));
    assert_eq!(calls(&cfg, OpName::MpAllReduce), 73.0);
    let gpu_us = assert_prefill(&cfg, 510.0);
    // Before: the same model under a name whose decoder layer is not read here (no fusion counted).
    let mut unfused = cfg.clone();
    unfused.model.name = "unread-moe".into();
    let gpu0_us = assert_prefill(&unfused, 582.0);
    // GPU: a fused norm keeps its traffic and loses only its per-kernel cost, kernel_us 7.40 µs: 72 · 7.40 = 532.8
    // µs less. The final norm, alone over the one sampled row (11,520 B: 0.0018 µs at B200's 8 TB/s · 0.8), now
    // rides the last all-reduce over all 1,024 rows, as `model.norm` does there (2 · 1,024 · 2,880 · 2 B =
    // 11,796,480 B: 1.8432 µs): 532.8 − 1.8432 + 0.0018 = 530.9586 µs less.
    assert!((gpu0_us - gpu_us - 530.9586).abs() < 1e-3, "{gpu0_us} − {gpu_us}");
}

#[test]
fn a_dense_llama_at_tp_1_has_no_all_reduce_and_at_tp_8_fuses_both_norms() {
    // Llama-3.1-70B (80 layers, hidden 8,192 > 4,096), bf16. At tp 1 (`PRE_MLP_FUSION = has_tp() and …`, false)
    // per layer: 2 norms, QKV 1, attention 2, output 1, gate+up 1, SwiGLU 1, down 1 = 9; × 80 = 720; embedding,
    // final norm, LM head, sampler: 724 kernels.
    let tp1 = config("Llama-3.1-70B", 1, "bf16");
    assert_eq!(allreduce_fusion(&tp1), (LayerFusion::default(), LayerFusion::default()));
    assert_eq!((calls(&tp1, OpName::RMSNorm), calls(&tp1, OpName::AllreduceRmsNorm)), (161.0, 0.0));
    assert_prefill(&tp1, 724.0);
    // At tp 8 (`LlamaDecoderLayer`: PRE_MLP_FUSION and POST_MLP_FUSION on): per layer the two norms ride the two
    // all-reduces, QKV 1, attention 2, output 1, all-reduce 1, gate+up 1, SwiGLU 1, down 1, all-reduce 1 = 9; × 80 =
    // 720; layer 0's input norm, embedding and its all-reduce, LM head, all-gather, sampler: 726 kernels
    // (unchanged from main, which fused Llama's norms already).
    let tp8 = config("Llama-3.1-70B", 8, "bf16");
    assert_eq!((calls(&tp8, OpName::RMSNorm), calls(&tp8, OpName::AllreduceRmsNorm)), (1.0, 160.0));
    assert_prefill(&tp8, 726.0);
}

#[test]
fn a_dense_qwen3_keeps_its_norms_at_tp_8() {
    // Qwen3-32B (64 layers, hidden 5,120), bf16, tp 8. `Qwen3DecoderLayer.forward` (modeling_qwen3.py) runs
    // `input_layernorm(hidden_states, residual)` and `post_attention_layernorm(hidden_states, residual)` as norms of
    // their own and leaves the all-reduces inside `o_proj` and the MLP (`AllReduceParams(enable_allreduce=not
    // self.disable_allreduce)`): per layer 2 norms, QKV 1, attention 2, output 1, all-reduce 1, gate+up 1, SwiGLU 1,
    // down 1, all-reduce 1 = 11; × 64 = 704; embedding and its all-reduce, final norm, LM head, all-gather,
    // sampler: 710 kernels. Main fused them by Llama's rule (hidden > 4,096): 9 · 64 + 6
    // = 582 kernels.
    let cfg = config("Qwen3-32B", 8, "bf16");
    assert_eq!((calls(&cfg, OpName::RMSNorm), calls(&cfg, OpName::AllreduceRmsNorm)), (129.0, 0.0));
    assert_prefill(&cfg, 710.0);
    let mut as_llama = cfg.clone();
    as_llama.model.name = "Llama-like".into();
    assert_prefill(&as_llama, 582.0);
}

#[test]
fn deepseek_fuses_its_dense_layers_post_attention_norm_only_with_nvfp4() {
    // DeepSeek-V3/R1 (61 layers, the first 3 dense), tp 8 without attention data parallelism.
    // `DeepseekV3DecoderLayer.__init__`: MoE layers PRE_MOE_FUSION = POST_MOE_FUSION = enable_fusion and has_tp;
    // dense layers POST_MLP_FUSION = enable_fusion and has_mlp_tp, PRE_MLP_FUSION only with is_nvfp4.
    // fp8: the 3 dense layers' post-attention norms run alone: 1 (layer 0's input) + 3 = 4 alone, 3 + 2 · 58 = 119
    // fused (4 + 119 = 123 = 2 · 61 + 1).
    let fp8 = config("DeepSeek-R1", 8, "fp8");
    assert_eq!((calls(&fp8, OpName::RMSNorm), calls(&fp8, OpName::AllreduceRmsNorm)), (4.0, 119.0));
    // nvfp4: those 3 ride the all-reduce too (`RESIDUAL_RMS_NORM_QUANT_NVFP4`): 1 alone, 122 fused.
    let fp4 = config("DeepSeek-R1", 8, "fp4");
    assert_eq!((calls(&fp4, OpName::RMSNorm), calls(&fp4, OpName::AllreduceRmsNorm)), (1.0, 122.0));
    // With attention data parallelism there is no tensor-parallel all-reduce to ride (`enable_fusion &= not
    // enable_attention_dp`): 2 · 61 + 1 = 123 alone.
    let mut dp = fp8.clone();
    dp.attention_dp = 8;
    assert_eq!((calls(&dp, OpName::RMSNorm), calls(&dp, OpName::AllreduceRmsNorm)), (123.0, 0.0));
}

#[test]
fn qwen3_moe_fuses_both_norms_but_not_the_one_after_the_moe_under_pipeline_parallelism() {
    // Qwen3-30B-A3B (48 MoE layers): PRE_MOE_FUSION = enable_fusion and has_tp, POST_MOE_FUSION = PRE_MOE_FUSION and
    // not has_pp (modeling_qwen3_moe.py). tp 4, pp 1: 2 · 48 = 96 fused, layer 0's input norm alone.
    let cfg = config("Qwen3-30B-A3B", 4, "bf16");
    assert_eq!((calls(&cfg, OpName::RMSNorm), calls(&cfg, OpName::AllreduceRmsNorm)), (1.0, 96.0));
    let mut pp = cfg.clone();
    pp.pp = 2;
    let post = LayerFusion { pre: true, post: false };
    assert_eq!(allreduce_fusion(&pp), (LayerFusion::default(), post));
}

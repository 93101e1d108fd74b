//! The frameworks' effects: the FSDP prefetch worked by hand, and each option's direction with the analytic
//! backend derated by the shipped constants.

use super::config::{ModelSpec, ParallelSpec};
use super::framework::Framework;
use super::operators::OpName;
use super::predict::predict;
use super::timing::{chunk_seconds, zero_exposed, ChunkInputs, Pieces, ZeroSeconds};
use super::validate::{validate, with_framework};
use crate::cost::{AnalyticBackend, Derated, Efficiency};
use crate::hw::{presets, Precision, System};

/// A system preset by name, resolved (the recipe tests use it too).
pub(super) fn preset(name: &str) -> System {
    presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap()
}

/// Llama 3.1 8B's architecture at 8,192 tokens (the recipe tests use it too).
pub(super) fn llama8b() -> ModelSpec {
    serde_json::from_value(serde_json::json!({"name": "Llama-3.1-8B", "layers": 32, "hidden": 4096, "heads": 32,
        "kv_heads": 8, "ffn_hidden": 14336, "seq_len": 8192, "vocab": 128256, "norm": "rmsnorm",
        "activation": "swiglu", "attention": "flash"}))
    .unwrap()
}

/// Llama 3.1 8B on one DGX H100 node as torchtitan's FSDP2 recipe runs it (dp_shard 8, ZeRO-3, micro-batch 1),
/// with `extra` parallel options, under `framework`: the iteration time, s, and the prediction.
fn run(system: &str, framework: Framework, extra: serde_json::Value) -> super::TrainingPrediction {
    let s = preset(system);
    let mut p = serde_json::json!({"dp": 8, "micro_batch": 1, "grad_accum": 1, "zero_stage": 3});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    let par: ParallelSpec = serde_json::from_value(p).unwrap();
    let cfg = with_framework(validate(&llama8b(), &par, Precision::Bf16, s.total_gpus()).unwrap(), framework).unwrap();
    predict(&cfg, &Derated::new(AnalyticBackend::new(s), Efficiency::CALIBRATED)).unwrap()
}

#[test]
fn fsdp2_prefetched_all_gather_hides_behind_the_previous_blocks_forward() {
    // Four blocks, each 2 ms of forward computation and a 1 ms parameter all-gather (4 ms in all). FSDP2 gathers
    // block 1 before anything runs (1 ms exposed), then block i + 1's during block i's forward (1 ms < 2 ms:
    // hidden) — 1 ms exposed in all, not 4.
    assert!((zero_exposed(4e-3, 8e-3, 4.0) - 1e-3).abs() < 1e-15);
    // Gathers slower than the blocks (3 ms each, 12 ms in all): the first 3 ms, then each later block waits
    // 3 − 2 = 1 ms: 3 + 3·1 = 6 ms = 12/4 + (3/4)·(12 − 8).
    assert!((zero_exposed(12e-3, 8e-3, 4.0) - 6e-3).abs() < 1e-15);
    // One bucket (nothing to pipeline against): all of it.
    assert!((zero_exposed(4e-3, 8e-3, 1.0) - 4e-3).abs() < 1e-15);
    // In a chunk's forward (no contention): 4 layers × 2 ms + the 1 ms first gather = 9 ms.
    let p =
        Pieces { layer: (2e-3, 4e-3), moe_layer: (0.0, 0.0), embedding: (0.0, 0.0), head: (0.0, 0.0), mtp: (0.0, 0.0) };
    let c = ChunkInputs {
        layers: 4,
        moe_layers: 0,
        mtp: 0,
        embedding: false,
        head: false,
        send_fwd_s: None,
        send_bwd_s: None,
        zero: Some(ZeroSeconds { reduce_scatter_s: 8e-3, all_gather_s: 4e-3, buckets: 4.0 }),
        overlap_sends: false,
        contention: 0.0,
    };
    let (f, b) = chunk_seconds(&p, &c);
    assert!((f - 9e-3).abs() < 1e-12, "{f}");
    // Backward: 4 layers × 4 ms = 16 ms; the gather (4 ms) and the reduce-scatter (8 ms) share the links, 12 ms in
    // 4 buckets: 12/4 + (3/4)·max(0, 12 − 16) = 3 ms exposed → 19 ms.
    assert!((b - 19e-3).abs() < 1e-12, "{b}");
}

#[test]
fn torchtitans_eager_kernels_cost_time_that_torch_compile_removes() {
    let eager = run("dgx-h100", Framework::Torchtitan, serde_json::json!({}));
    let compiled = run("dgx-h100", Framework::Torchtitan, serde_json::json!({"torch_compile": true}));
    assert!(
        eager.iteration_time_s > compiled.iteration_time_s,
        "{} {}",
        eager.iteration_time_s,
        compiled.iteration_time_s
    );
    // The eager RMSNorm, SwiGLU and RoPE kernels appear as their own operator, and only eager.
    let has = |p: &super::TrainingPrediction| p.operators.iter().any(|o| o.name == OpName::EagerElementwise);
    assert!(has(&eager) && !has(&compiled));
    // Hugging Face's eager modules are no faster than torchtitan's (RoPE's rotate_half launches more kernels).
    let hf = run("dgx-h100", Framework::Hf, serde_json::json!({}));
    assert!(hf.iteration_time_s >= eager.iteration_time_s);
}

#[test]
fn sdpa_flash_attention_2_is_slower_than_transformer_engines_on_hopper_only() {
    let attention = |p: &super::TrainingPrediction, phase: &str| {
        let ops = p.operators.iter().filter(|o| o.name == OpName::FlashAttention && o.phase.as_str() == phase);
        ops.map(|o| o.total_us).sum::<f64>()
    };
    // Same kernels otherwise: compiled torchtitan against Megatron with the same (bf16) gradient reduction.
    let opts = serde_json::json!({"torch_compile": true, "grad_reduce_in_fp32": false});
    let titan = run("dgx-h100", Framework::Torchtitan, opts.clone());
    let mega = run("dgx-h100", Framework::Megatron, serde_json::json!({"grad_reduce_in_fp32": false}));
    // FlashAttention-2 against Transformer Engine's cuDNN on Hopper, both over the measured FlashAttention-3 (Shah
    // et al. 2024, Fig. 5 and 6): forward 1.75 / (648 / 595) = 1.75 · 595 / 648 = 1.6069, backward
    // 1.75 · 516 / 561 = 1.6096.
    for (phase, want) in [("fwd", 1.75 * 595.0 / 648.0), ("bwd", 1.75 * 516.0 / 561.0)] {
        let ratio = attention(&titan, phase) / attention(&mega, phase);
        assert!((ratio - want).abs() < 1e-9, "{phase} {ratio}");
    }
    assert!(titan.iteration_time_s > mega.iteration_time_s);
    // On A100 FlashAttention-2 is the native kernel: the same attention time.
    let titan = run("dgx-a100-80g", Framework::Torchtitan, opts);
    let mega = run("dgx-a100-80g", Framework::Megatron, serde_json::json!({"grad_reduce_in_fp32": false}));
    for phase in ["fwd", "bwd"] {
        assert!((attention(&titan, phase) / attention(&mega, phase) - 1.0).abs() < 1e-9);
    }
}

#[test]
fn transformer_engines_cudnn_attention_runs_at_cudnns_share_of_flash_attention_3_on_hopper_only() {
    use super::framework::AttentionKernel;
    // Shah et al. 2024, Fig. 5 and 6 (H100, bf16, head dim 128, 16k): cuDNN 595 / 516 TFLOP/s against
    // FlashAttention-3's 648 / 561 — time × 648 / 595 = 1.08908 forward, × 561 / 516 = 1.08721 backward.
    let (f, b) = AttentionKernel::Fused.slowdown(&preset("dgx-h100").gpu);
    assert!((f - 1.08908).abs() < 1e-5 && (b - 1.08721).abs() < 1e-5, "{f} {b}");
    // Blackwell's measured kernels stand for cuDNN's; Ampere's for FlashAttention-2, which TE runs there.
    for system in ["dgx-b200", "dgx-a100-80g"] {
        assert_eq!(AttentionKernel::Fused.slowdown(&preset(system).gpu), (1.0, 1.0), "{system}");
    }
}

#[test]
fn unmasked_attention_runs_at_the_measured_share_of_the_causal_time_on_hopper_only() {
    use super::framework::AttentionKernel;
    // Shah et al. 2024, Fig. 5(c)/(d) (H100, bf16, head dim 128, 16k): causal 335 against unmasked 370 TFLOP/s for
    // FlashAttention-2 → 0.905405 of the time; cuDNN 539 against 595 → 0.905882. The backward takes the forward's.
    let h100 = preset("dgx-h100").gpu;
    let (f, b) = AttentionKernel::Flash2.full_over_causal(&h100);
    assert!((f - 0.905405).abs() < 1e-6 && f == b, "{f} {b}");
    let (f, b) = AttentionKernel::Fused.full_over_causal(&h100);
    assert!((f - 0.905882).abs() < 1e-6 && f == b, "{f} {b}");
    // Nothing measured elsewhere, nor for FlashAttention v1 or the Triton port: 1.
    assert_eq!(AttentionKernel::Triton.full_over_causal(&h100), (1.0, 1.0));
    for system in ["dgx-b200", "dgx-a100-80g"] {
        for k in [AttentionKernel::Fused, AttentionKernel::Flash2] {
            assert_eq!(k.full_over_causal(&preset(system).gpu), (1.0, 1.0), "{system} {k:?}");
        }
    }
}

#[test]
fn the_triton_flash_attention_port_slows_the_forward_by_1_4_and_the_backward_by_2() {
    // Per attention operator, the Triton port over FlashAttention-2 on the A100 (FlashAttention-2 §4.1): the
    // forward and its recomputation 1.4x, the backward 2x. With full recomputation a layer runs the forward
    // kernel twice and the backward once, so the whole attention time grows by (1.4 F + 1.4 F + 2 B) / (2F + B)
    // with F, B FlashAttention-2's forward and backward times.
    let opts = |backend: &str| serde_json::json!({"attention_backend": backend, "recompute": "full"});
    let fa2 = run("dgx-a100-80g", Framework::Hf, opts("flash2"));
    let triton = run("dgx-a100-80g", Framework::Hf, opts("triton"));
    let attn = |p: &super::TrainingPrediction, bwd: bool, recompute: bool| {
        p.operators
            .iter()
            .find(|o| {
                o.name == OpName::FlashAttention
                    && (o.phase == crate::op::Phase::Bwd) == bwd
                    && o.recompute == recompute
            })
            .map(|o| o.time_us)
            .unwrap()
    };
    for (bwd, recompute, factor) in [(false, false, 1.4), (true, true, 1.4), (true, false, 2.0)] {
        let ratio = attn(&triton, bwd, recompute) / attn(&fa2, bwd, recompute);
        assert!((ratio - factor).abs() < 1e-9, "bwd {bwd} recompute {recompute}: {ratio}");
    }
    assert!(triton.iteration_time_s > fa2.iteration_time_s);
    // The kernel needs a FlashAttention-style model: a materialized attention refuses it, naming the field.
    let mut model = llama8b();
    model.attention = super::config::Attention::Unfused;
    let par: ParallelSpec = serde_json::from_value(opts("triton")).unwrap();
    let err = validate(&model, &par, Precision::Bf16, 8).unwrap_err();
    assert_eq!(err.field, "parallelism.attention_backend");
}

#[test]
fn fp32_gradient_reduction_doubles_the_reduce_scatter_and_slows_the_step() {
    let fp32 = run("dgx-h100", Framework::Nemo, serde_json::json!({"grad_reduce_in_fp32": true}));
    let bf16 = run("dgx-h100", Framework::Nemo, serde_json::json!({}));
    let rs = |p: &super::TrainingPrediction| {
        p.operators.iter().find(|o| o.name == OpName::DpReduceScatter).map(|o| o.time_us).unwrap()
    };
    // Twice the bytes: more than 1.5× the time (the α term stays), at most 2×.
    let r = rs(&fp32) / rs(&bf16);
    assert!(r > 1.5 && r <= 2.0 + 1e-9, "{r}");
    assert!(fp32.iteration_time_s > bf16.iteration_time_s);
    assert!(fp32.config.grad_reduce_in_fp32 && !bf16.config.grad_reduce_in_fp32);
    // Megatron-LM's default under bf16 is fp32 (arguments.py), NeMo's recipes bf16.
    assert!(run("dgx-h100", Framework::Megatron, serde_json::json!({})).config.grad_reduce_in_fp32);
}

#[test]
fn an_unfused_optimizer_takes_longer_than_the_fused_kernel() {
    // ZeRO-1 over 8 GPUs with pp 1: every GPU updates 1/8 of the 8 B parameters.
    let opt = |o: &str| {
        let p = run("dgx-h100", Framework::Nemo, serde_json::json!({"zero_stage": 1, "optimizer": o}));
        (p.stages[0].optimizer_s, p.iteration_time_s)
    };
    let (fused, t_fused) = opt("fused");
    let (foreach, _) = opt("foreach");
    let (per_tensor, t_per_tensor) = opt("per_tensor");
    // foreach: twice the state passes of the fused kernel (memory-bound).
    assert!((foreach / fused - 2.0).abs() < 1e-9, "{foreach} {fused}");
    // Per tensor: 32 layers × 7 + 3 = 227 tensors × 8 launches = 1,816 kernels at the shipped 69.3 µs of host
    // time each = 125,848.8 µs = 0.126 s — longer than the GPU work.
    assert!((per_tensor - 1816.0 * Efficiency::CALIBRATED.host_us * 1e-6).abs() < 1e-9, "{per_tensor}");
    assert!(t_per_tensor > t_fused);
}

#[test]
fn torch_compile_is_refused_for_frameworks_that_do_not_compile() {
    let s = preset("dgx-h100");
    let par: ParallelSpec = serde_json::from_value(serde_json::json!({"dp": 8, "torch_compile": true})).unwrap();
    let cfg = validate(&llama8b(), &par, Precision::Bf16, s.total_gpus()).unwrap();
    assert_eq!(with_framework(cfg.clone(), Framework::Megatron).unwrap_err().field, "parallelism.torch_compile");
    assert!(with_framework(cfg, Framework::Hf).is_ok());
    // A request names the framework at its top level; unknown names are refused by the schema.
    let req: super::TrainingRequest = serde_json::from_value(serde_json::json!({"system": "dgx-h100",
        "model": {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 100}, "parallelism": {},
        "framework": "torchtitan"}))
    .unwrap();
    assert_eq!(req.framework, Framework::Torchtitan);
    assert!(serde_json::from_value::<super::TrainingRequest>(serde_json::json!({"system": "x",
        "model": {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 100}, "parallelism": {},
        "framework": "jax"}))
    .is_err());
}

/// Qwen3-30B-A3B (48 MoE layers, hidden 2048, 128 experts of width 768, top-8, no shared experts) at 4,096 tokens
/// on one DGX H100 node in bf16: dp 8 with `par` over it, the routing load factor set to 1.
fn qwen30b(par: serde_json::Value, framework: Framework) -> Result<super::TrainingConfig, super::ConfigError> {
    let mut p = serde_json::json!({"dp": 8, "micro_batch": 1, "grad_accum": 1, "moe_load_imbalance": 1.0});
    for (k, v) in par.as_object().unwrap() {
        p[k] = v.clone();
    }
    // The catalog name resolves where a request is read.
    let req: super::TrainingRequest = serde_json::from_value(serde_json::json!({"system": "dgx-h100",
        "model": {"name": "Qwen3-30B-A3B", "seq_len": 4096}, "parallelism": p, "precision": "bf16"}))
    .unwrap();
    with_framework(validate(&req.model, &req.parallelism, req.precision, 8)?, framework)
}

#[test]
fn moe_models_run_under_each_framework_with_its_dispatchers() {
    use crate::llm::moe::Dispatcher;
    let dispatcher = |par, fw| qwen30b(par, fw).map(|c| c.moe.unwrap().dispatcher);
    let field = |par, fw| qwen30b(par, fw).unwrap_err().field;
    // Megatron-Core's default dispatcher is allgather; torchtitan's `standard` backend and DeepSpeed-MoE all-to-all.
    for (fw, d) in [
        (Framework::Megatron, Dispatcher::Allgather),
        (Framework::Torchtitan, Dispatcher::Alltoall),
        (Framework::Deepspeed, Dispatcher::Alltoall),
    ] {
        assert_eq!(dispatcher(serde_json::json!({"ep": 8}), fw), Ok(d), "{fw:?}");
    }
    // torchtitan also has DeepEP; Megatron-Core's allgather dispatcher it has not, nor DeepSpeed DeepEP.
    let deepep = serde_json::json!({"ep": 8, "moe_token_dispatcher": "deepep"});
    assert_eq!(dispatcher(deepep.clone(), Framework::Torchtitan), Ok(Dispatcher::Deepep));
    let allgather = serde_json::json!({"ep": 8, "moe_token_dispatcher": "allgather"});
    assert_eq!(field(allgather, Framework::Torchtitan), "parallelism.moe_token_dispatcher");
    assert_eq!(field(deepep, Framework::Deepspeed), "parallelism.moe_token_dispatcher");
    // Hugging Face Transformers holds every expert on every GPU: ep 1 only.
    assert_eq!(field(serde_json::json!({"ep": 8}), Framework::Hf), "parallelism.ep");
    assert_eq!(dispatcher(serde_json::json!({}), Framework::Hf), Ok(Dispatcher::Alltoall));
    // Megatron-Core's 1F1B all-to-all overlap (valid here: ep 8, alltoall, pp 1) is not torchtitan's.
    let overlap =
        serde_json::json!({"ep": 8, "moe_token_dispatcher": "alltoall", "overlap_moe_expert_parallel_comm": true});
    assert!(qwen30b(overlap.clone(), Framework::Megatron).is_ok());
    assert_eq!(field(overlap, Framework::Torchtitan), "parallelism.overlap_moe_expert_parallel_comm");
    // Megatron-Core's HybridEP SM budget is not torchtitan's option, though torchtitan has HybridEP.
    let sms = serde_json::json!({"ep": 8, "moe_token_dispatcher": "hybridep", "moe_hybridep_num_sms": 32});
    assert!(qwen30b(sms.clone(), Framework::Nemo).is_ok());
    assert_eq!(field(sms, Framework::Torchtitan), "parallelism.moe_hybridep_num_sms");
}

#[test]
fn expert_gradients_reduce_in_the_frameworks_precision() {
    use super::decompose::{stage_expert_params, tail_parts};
    // ep 4 over dp 8: expert_dp 2, so the experts' gradients are all-reduced over 2 ranks. Per GPU 128/4 = 32
    // experts of 3·2048·768 = 4,718,592 parameters: 150,994,944 per layer, × 48 layers = 7,247,757,312.
    let bytes = |fw| {
        let c = qwen30b(serde_json::json!({"ep": 4}), fw).unwrap();
        let experts = stage_expert_params(&c, 0, 48);
        assert_eq!(experts, 7_247_757_312.0);
        tail_parts(&c, 0, 1e9, experts, 151_936).expert_sync.unwrap().2
    };
    // Megatron-LM reduces bf16 gradients in fp32 (4 B each), NeMo's recipes in bf16 (2 B).
    assert_eq!(bytes(Framework::Megatron), 4.0 * 7_247_757_312.0);
    assert_eq!(bytes(Framework::Nemo), 2.0 * 7_247_757_312.0);
}

#[test]
fn eager_kernels_and_optimizer_tensors_count_the_experts() {
    use super::decompose::decompose;
    use super::timing::optimizer_tensors;
    let s = preset("dgx-h100");
    // torchtitan without torch.compile runs the experts' SwiGLU as separate silu and mul kernels: with grouped
    // GEMMs (torchtitan's `torch._grouped_mm`) on the R = etp·t·K·γ = 1·4096·8·1 = 32,768 routed rows of width
    // 768, one extra kernel forward and two backward.
    let c = qwen30b(serde_json::json!({"ep": 8, "moe_grouped_gemm": true}), Framework::Torchtitan).unwrap();
    let d = decompose(&c, &s);
    let expert_eager: Vec<_> = d
        .moe_layer
        .iter()
        .filter(|o| o.name == OpName::EagerElementwise && o.features[..2] == [32_768, 768])
        .map(|o| (o.phase, o.calls))
        .collect();
    assert_eq!(expert_eager, [(crate::op::Phase::Fwd, 1), (crate::op::Phase::Bwd, 2)]);
    // One GEMM per expert instead: 32,768 / 16 local experts = 2,048 rows each, 16 calls of each eager kernel.
    let c = qwen30b(serde_json::json!({"ep": 8}), Framework::Torchtitan).unwrap();
    let per_expert: Vec<_> = decompose(&c, &s)
        .moe_layer
        .iter()
        .filter(|o| o.name == OpName::EagerElementwise && o.features[..2] == [2_048, 768])
        .map(|o| (o.phase, o.calls))
        .collect();
    assert_eq!(per_expert, [(crate::op::Phase::Fwd, 16), (crate::op::Phase::Bwd, 32)]);
    let compiled = qwen30b(serde_json::json!({"ep": 8, "torch_compile": true}), Framework::Torchtitan).unwrap();
    assert!(!decompose(&compiled, &s).moe_layer.iter().any(|o| o.name == OpName::EagerElementwise));
    // A per-tensor optimizer loops over every expert's tensors: per MoE layer 7 − 3 (the dense MLP) + 1 (router)
    // + 3 · 16 local experts (ep 8) = 53; 48 layers and 3 beyond them: 2,547.
    assert_eq!(optimizer_tensors(&c, 48, 48), 2547.0);
}

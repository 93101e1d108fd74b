//! Tests of [`super`]: the operator lists of a layer, the embedding and the head, by hand.

use super::*;
use crate::hw::Precision;
use crate::llm::config::TrainingConfig;
use crate::llm::layout::Layout;
use crate::llm::validate;
use crate::op::Phase;

fn cfg(model: serde_json::Value, par: serde_json::Value, p: Precision) -> TrainingConfig {
    validate(&serde_json::from_value(model).unwrap(), &serde_json::from_value(par).unwrap(), p, 1024).unwrap()
}

fn calls(ops: &[StageOp], name: OpName, phase: Phase) -> u32 {
    ops.iter().filter(|o| o.name == name && o.phase == phase).map(|o| o.calls).sum()
}

fn dims(ops: &[StageOp], name: OpName) -> [u64; 5] {
    match ops.iter().find(|o| o.name == name).unwrap().work {
        Work::Compute { shape, .. } => {
            // Only flash attention has a fifth dim (its key/value heads).
            assert!(shape.dims[4] == 0 || name == OpName::FlashAttention, "{name:?}: {:?}", shape.dims);
            shape.dims
        }
        _ => panic!("not a computation"),
    }
}

const PREC: OpPrecisions = OpPrecisions { gemm: Precision::Bf16, other: Precision::Bf16 };

#[test]
fn gqa_and_swiglu_shapes_of_llama_70b() {
    // d 8192, 64 heads of 128, kv 8, ffn 28672, tp 8, b 1, l 4096: QKV N = (64 + 16)·128/8 = 1280; the fused
    // gate+up GEMM N = 2·28672/8 = 7168; the down GEMM K = 3584.
    let c = cfg(
        serde_json::json!({"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
            "seq_len": 4096, "vocab": 128256, "activation": "swiglu", "norm": "rmsnorm", "attention": "flash"}),
        serde_json::json!({"tp": 8}),
        Precision::Bf16,
    );
    let ops = layer_ops(&c, &Layout::new(&c, 8), PREC);
    assert_eq!(dims(&ops, OpName::Linear1), [1, 4096, 1280, 8192, 0]);
    assert_eq!(dims(&ops, OpName::Linear3), [1, 4096, 7168, 8192, 0]);
    assert_eq!(dims(&ops, OpName::SwiGLU), [4096, 3584, 0, 0, 0]);
    assert_eq!(dims(&ops, OpName::Linear4), [1, 4096, 8192, 3584, 0]);
    // 8 query heads per rank, 1 kv head: rope rows 4096·(8 + 1)/2.
    assert_eq!(dims(&ops, OpName::RoPE), [18432, 128, 0, 0, 0]);
    assert_eq!(calls(&ops, OpName::MpAllReduce, Phase::Fwd), 2);
}

#[test]
fn sequence_parallelism_turns_all_reduces_into_gather_scatter_pairs_and_shards_norms() {
    let m = serde_json::json!({"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 2048, "vocab": 1000});
    let tp = cfg(m.clone(), serde_json::json!({"tp": 4}), Precision::Fp16);
    let sp = cfg(m, serde_json::json!({"tp": 4, "sequence_parallel": true}), Precision::Fp16);
    let (a, b) = (layer_ops(&tp, &Layout::new(&tp, 8), PREC), layer_ops(&sp, &Layout::new(&sp, 8), PREC));
    assert_eq!((calls(&a, OpName::MpAllReduce, Phase::Fwd), calls(&a, OpName::MpAllReduce, Phase::Bwd)), (2, 2));
    assert_eq!(calls(&b, OpName::MpAllReduce, Phase::Fwd) + calls(&b, OpName::MpAllReduce, Phase::Bwd), 0);
    for phase in [Phase::Fwd, Phase::Bwd] {
        assert_eq!(calls(&b, OpName::MpAllGather, phase), 2);
        assert_eq!(calls(&b, OpName::MpReduceScatter, phase), 2);
    }
    // Norms on 2048/4 = 512 rows instead of 2048.
    assert_eq!(dims(&a, OpName::LayerNorm), [2048, 1024, 0, 0, 0]);
    assert_eq!(dims(&b, OpName::LayerNorm), [512, 1024, 0, 0, 0]);
}

#[test]
fn without_userbuffers_the_backward_reduce_scatters_hide_behind_the_column_parallel_weight_gradients() {
    // tp 4 with sequence parallelism, no tp_comm_overlap (Megatron-Core with Transformer Engine, the default
    // framework): backward, the QKV (Linear1) and up-projection (Linear3) dgrad reduce-scatters are launched
    // async and waited on after the wgrad GEMM — one call each, overlapping its layer's GEMM's weight-gradient
    // half; the two output-gradient all-gathers stay synchronous (2 calls, no partner). Forward: 2 + 2, none
    // overlapped.
    let m = serde_json::json!({"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 2048, "vocab": 1000});
    let sp = cfg(m, serde_json::json!({"tp": 4, "sequence_parallel": true}), Precision::Bf16);
    let ops = layer_ops(&sp, &Layout::new(&sp, 8), PREC);
    let rs: Vec<&StageOp> = ops.iter().filter(|o| o.name == OpName::MpReduceScatter && o.phase == Phase::Bwd).collect();
    let partners: Vec<_> = rs.iter().map(|o| (o.calls, o.overlaps)).collect();
    assert_eq!(
        partners,
        vec![
            (1, Some(Overlap { with: OpName::Linear3, chunks: 1, wgrad_only: true })),
            (1, Some(Overlap { with: OpName::Linear1, chunks: 1, wgrad_only: true })),
        ]
    );
    let ag = |phase: Phase| ops.iter().filter(move |o| o.name == OpName::MpAllGather && o.phase == phase);
    assert_eq!(ag(Phase::Bwd).map(|o| o.calls).sum::<u32>(), 2);
    assert!(ag(Phase::Bwd).chain(ag(Phase::Fwd)).all(|o| o.overlaps.is_none()));
    let fwd_rs = ops.iter().filter(|o| o.name == OpName::MpReduceScatter && o.phase == Phase::Fwd);
    assert!(fwd_rs.clone().all(|o| o.overlaps.is_none()) && fwd_rs.map(|o| o.calls).sum::<u32>() == 2);
}

#[test]
fn megatrons_fused_softmax_runs_only_where_its_kernel_is_available() {
    // vTrain's 16 heads at tp 8: micro-batch 1 gives 1·2 = 2 attention batches (not a multiple of 4) → PyTorch's
    // mask fill + softmax; micro-batch 2 gives 4 → the fused kernel. At tp 4, 4 heads per rank always fuse.
    let m = serde_json::json!({"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 1000});
    let names = |tp: u32, mb: u32| {
        let c = cfg(m.clone(), serde_json::json!({"tp": tp, "micro_batch": mb}), Precision::Fp16);
        let ops = layer_ops(&c, &Layout::new(&c, 8), PREC);
        let has = |n: OpName| ops.iter().any(|o| o.name == n && o.phase == Phase::Fwd);
        (has(OpName::FusedSoftmax), has(OpName::Fillmask) && has(OpName::Softmax))
    };
    assert_eq!(names(8, 1), (false, true));
    assert_eq!(names(8, 2), (true, false));
    assert_eq!(names(4, 1), (true, false));
    // The fallback's fp32 casts and scale (`forward_torch_softmax`): 3 element-wise kernels each way beyond the mask
    // fill and softmax, over b·heads/tp·s = 1·2·1,024 = 2,048 rows of 1,024 scores; none where the kernel fuses, and
    // none for a model that asks for the unfused attention itself.
    let extra = |attention: &str, tp: u32, mb: u32| {
        let mut m = m.clone();
        m["attention"] = serde_json::json!(attention);
        let c = cfg(m, serde_json::json!({"tp": tp, "micro_batch": mb}), Precision::Fp16);
        let ops = layer_ops(&c, &Layout::new(&c, 8), PREC);
        [Phase::Fwd, Phase::Bwd].map(|p| {
            ops.iter()
                .filter(|o| o.name == OpName::EagerElementwise && o.phase == p)
                .map(|o| (o.calls, o.features.clone()))
                .collect::<Vec<_>>()
        })
    };
    let fallback = vec![(3, vec![2_048, 1_024, 3])];
    assert_eq!(extra("fused_softmax", 8, 1), [fallback.clone(), fallback]);
    assert_eq!(extra("fused_softmax", 8, 2), [vec![], vec![]]);
    assert_eq!(extra("unfused", 8, 1), [vec![], vec![]]);
    // The kernel's own limits: 16-bit input, 16 < sk ≤ 4096, multiples of 4, 8 batches per block when sk ≤ 128.
    assert!(fused_softmax_available(1, 4, 2048, Precision::Bf16));
    assert!(!fused_softmax_available(1, 4, 2048, Precision::Fp32));
    assert!(!fused_softmax_available(1, 4, 8192, Precision::Fp16));
    assert!(!fused_softmax_available(1, 4, 16, Precision::Fp16));
    assert!(!fused_softmax_available(1, 4, 1026, Precision::Fp16));
    assert!(!fused_softmax_available(1, 4, 128, Precision::Fp16));
    assert!(fused_softmax_available(2, 4, 128, Precision::Fp16));
    assert!(fused_softmax_available(1, 4, 129 + 3, Precision::Fp16));
}

#[test]
fn recompute_adds_forward_work_to_the_backward_pass() {
    let m = serde_json::json!({"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 2048, "vocab": 1000});
    let count = |r: &str| {
        let c = cfg(m.clone(), serde_json::json!({"tp": 2, "recompute": r}), Precision::Fp16);
        let ops = layer_ops(&c, &Layout::new(&c, 8), PREC);
        let fwd = ops.iter().filter(|o| o.phase == Phase::Fwd).count();
        let rec: Vec<OpName> = ops.iter().filter(|o| o.recompute).map(|o| o.name).collect();
        (fwd, rec)
    };
    let (fwd, none) = count("none");
    assert!(none.is_empty());
    // Full: every forward operator again (10 compute + 1 all-reduce entry).
    let (_, full) = count("full");
    assert_eq!(full.len(), fwd);
    assert!(full.contains(&OpName::MpAllReduce) && full.contains(&OpName::Linear1));
    // Selective: QKᵀ, fused softmax and ·V only.
    let (_, sel) = count("selective");
    assert_eq!(sel, vec![OpName::QkT, OpName::FusedSoftmax, OpName::AttnV]);
}

#[test]
fn dropout_adds_the_attention_dropout_and_two_bias_dropout_adds() {
    let m = serde_json::json!({"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 1000,
        "dropout": 0.1});
    let c = cfg(m.clone(), serde_json::json!({"tp": 2, "micro_batch": 4}), Precision::Fp16);
    let ops = layer_ops(&c, &Layout::new(&c, 8), PREC);
    // 4 · 8 heads · 1024 query rows of 1024 probabilities; two residual branches of 4096 tokens × 1024.
    assert_eq!(dims(&ops, OpName::AttentionDropout), [32768, 1024, 1, 0, 0]);
    assert_eq!(dims(&ops, OpName::BiasDropoutAdd), [4096, 1024, 3, 0, 0]);
    assert_eq!(
        (calls(&ops, OpName::BiasDropoutAdd, Phase::Fwd), calls(&ops, OpName::BiasDropoutAdd, Phase::Bwd)),
        (2, 2)
    );
    // FlashAttention fuses the attention dropout; no dropout, no kernels.
    let mut flash = m.clone();
    flash["attention"] = serde_json::json!("flash");
    let f = cfg(flash, serde_json::json!({"tp": 2}), Precision::Fp16);
    assert_eq!(calls(&layer_ops(&f, &Layout::new(&f, 8), PREC), OpName::AttentionDropout, Phase::Fwd), 0);
    let mut none = m;
    none["dropout"] = serde_json::json!(0.0);
    let n = cfg(none, serde_json::json!({"tp": 2}), Precision::Fp16);
    assert_eq!(calls(&layer_ops(&n, &Layout::new(&n, 8), PREC), OpName::BiasDropoutAdd, Phase::Fwd), 0);
}

#[test]
fn context_parallel_ring_attention_and_fp8_gemms() {
    let c = cfg(
        serde_json::json!({"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
            "seq_len": 8192, "vocab": 128256, "activation": "swiglu", "attention": "flash"}),
        serde_json::json!({"context_parallel": 2}),
        Precision::Fp8,
    );
    let prec = OpPrecisions { gemm: Precision::Fp8, other: Precision::Bf16 };
    let ops = layer_ops(&c, &Layout::new(&c, 8), prec);
    // Two ring steps of 4096 queries each; one key/value exchange forward, one (with gradients) backward.
    assert_eq!(calls(&ops, OpName::FlashAttention, Phase::Fwd), 2);
    // 32 query heads and 8 key/value heads (GQA), no tensor parallelism.
    assert_eq!(dims(&ops, OpName::FlashAttention), [1, 4096, 32, 128, 8]);
    let p2p: Vec<&StageOp> = ops.iter().filter(|o| o.name == OpName::CpP2p).collect();
    assert_eq!(p2p.len(), 2);
    // K and V of 4096 tokens · 8 heads · 128 · 2 bytes = 16 MiB forward, twice that backward.
    let bytes = |o: &StageOp| match o.work {
        Work::Collective { bytes, .. } => bytes,
        _ => 0.0,
    };
    assert_eq!((bytes(p2p[0]), bytes(p2p[1])), (16_777_216.0, 33_554_432.0));
    assert_eq!(p2p[0].overlaps, Some(Overlap { with: OpName::FlashAttention, chunks: 1, wgrad_only: false }));
    // GEMMs in fp8, the rest in bf16.
    let dtype = |n: OpName| match ops.iter().find(|o| o.name == n).unwrap().work {
        Work::Compute { dtype, .. } => dtype,
        _ => panic!(),
    };
    assert_eq!((dtype(OpName::Linear1), dtype(OpName::FlashAttention)), (Precision::Fp8, Precision::Bf16));
    assert_eq!(dtype(OpName::Linear4), Precision::Fp8);
}

#[test]
fn qwen3_normalizes_each_query_and_key_head_by_hand() {
    use crate::llm::model_ref::{resolve_named, NamedModel};
    // Qwen3-30B-A3B by catalog name: 32 query heads and 4 key/value heads of 128 (Qwen3 config.json; Megatron-Bridge
    // qwen3_moe_bridge.py sets qk_layernorm). tp 1, micro-batch 1 of 4,096 tokens: q_layernorm runs over
    // 4,096·32 = 131,072 rows of 128 and k_layernorm over 4,096·4 = 16,384 rows, once each per pass.
    let named = |name: &str| NamedModel { name: Some(name.into()), hf_config: None, seq_len: None, mtp_layers: None };
    let qwen = resolve_named(&named("Qwen3-30B-A3B")).unwrap();
    assert!(qwen.qk_norm);
    let c = validate(&qwen, &serde_json::from_value(serde_json::json!({"ep": 8, "dp": 8})).unwrap(), Precision::Bf16, 8)
        .unwrap();
    let ops = layer_ops(&c, &Layout::new(&c, 8), PREC);
    let rows: Vec<(Phase, [u64; 5])> = ops
        .iter()
        .filter(|o| o.name == OpName::QkNorm)
        .map(|o| match o.work {
            Work::Compute { shape, .. } => (o.phase, shape.dims),
            _ => panic!("QK_Norm is a computation"),
        })
        .collect();
    assert_eq!(
        rows,
        [
            (Phase::Fwd, [131_072, 128, 0, 0, 0]),
            (Phase::Bwd, [131_072, 128, 0, 0, 0]),
            (Phase::Fwd, [16_384, 128, 0, 0, 0]),
            (Phase::Bwd, [16_384, 128, 0, 0, 0]),
        ]
    );
    // At tp 4 (dp 2, ep 2 with sequence parallelism, as Megatron-Core requires when tp and ep combine; expert_tp·ep =
    // 4·2 divides the stage's 8 ranks) a rank holds 8 query heads and 1 key
    // head: 32,768 and 4,096 rows.
    let json = serde_json::json!({"tp": 4, "dp": 2, "ep": 2, "sequence_parallel": true});
    let tp4 = validate(&qwen, &serde_json::from_value(json).unwrap(), Precision::Bf16, 8)
        .unwrap();
    let ops = layer_ops(&tp4, &Layout::new(&tp4, 8), PREC);
    let q: Vec<u64> = ops
        .iter()
        .filter(|o| o.name == OpName::QkNorm && o.phase == Phase::Fwd)
        .map(|o| match o.work {
            Work::Compute { shape, .. } => shape.dims[0],
            _ => 0,
        })
        .collect();
    assert_eq!(q, [32_768, 4_096]);
    // Llama-3.1-8B has no QK norm: no such operator.
    let llama = resolve_named(&named("Llama-3.1-8B")).unwrap();
    assert!(!llama.qk_norm);
    let c = validate(&llama, &serde_json::from_value(serde_json::json!({"dp": 8})).unwrap(), Precision::Bf16, 8).unwrap();
    assert_eq!(calls(&layer_ops(&c, &Layout::new(&c, 8), PREC), OpName::QkNorm, Phase::Fwd), 0);
    // A Hugging Face config says it by model_type.
    let hf = |t: &str| NamedModel {
        name: None,
        hf_config: Some(serde_json::json!({"model_type": t, "hidden_size": 1024, "num_hidden_layers": 2,
            "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3072,
            "vocab_size": 1000})),
        seq_len: Some(1024),
        mtp_layers: None,
    };
    assert!(resolve_named(&hf("qwen3")).unwrap().qk_norm);
    assert!(!resolve_named(&hf("llama")).unwrap().qk_norm);
}

#[test]
fn megatron_deepspeeds_loss_runs_on_the_fp32_upcast_and_the_others_on_the_fused_kernel() {
    // The head's cross-entropy shape: T = 2 · 1,024 tokens, V = 50,304 / 2 columns at tp 2; the third dim 1 only under
    // deepspeed (GPTModelPipe's `float16_to_fp32` before `_VocabParallelCrossEntropy`).
    use crate::llm::framework::Framework;
    use crate::llm::with_framework;
    let m = serde_json::json!({"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 50257});
    let head = |fw: Framework| {
        let c = with_framework(cfg(m.clone(), serde_json::json!({"tp": 2, "micro_batch": 2}), Precision::Fp16), fw)
            .unwrap();
        dims(&head_ops(&c, &Layout::new(&c, 8), PREC, 50_304), OpName::CrossEntropy)
    };
    assert_eq!(head(Framework::Deepspeed), [2_048, 25_152, 1, 0, 0]);
    assert_eq!(head(Framework::Megatron), [2_048, 25_152, 0, 0, 0]);
    assert_eq!(head(Framework::Nemo), [2_048, 25_152, 0, 0, 0]);
}

#[test]
fn megatron_deepspeeds_column_parallel_input_gradient_all_reduces_hide_behind_the_weight_gradients() {
    // tp 2 without sequence parallelism: backward, the two input-gradient all-reduces of a layer (QKV = Linear1,
    // up-projection = Linear3) each of b·s·h = 2·1,024·1,024 elements; under deepspeed each is its own op,
    // overlapping its layer's weight-gradient GEMM (`async_tensor_model_parallel_allreduce`); under megatron one op
    // of 2 calls charged in full (as before). The forward's two row-parallel all-reduces stay synchronous.
    use crate::llm::framework::Framework;
    use crate::llm::with_framework;
    let m = serde_json::json!({"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 50257});
    let ars = |fw: Framework, phase: Phase| {
        let c = with_framework(cfg(m.clone(), serde_json::json!({"tp": 2, "micro_batch": 2}), Precision::Fp16), fw)
            .unwrap();
        layer_ops(&c, &Layout::new(&c, 8), PREC)
            .into_iter()
            .filter(|o| o.name == OpName::MpAllReduce && o.phase == phase && !o.recompute)
            .map(|o| (o.calls, o.overlaps.map(|v| (v.with, v.chunks, v.wgrad_only)), o.features))
            .collect::<Vec<_>>()
    };
    let f = vec![2 * 1024 * 1024, 1, 2];
    assert_eq!(
        ars(Framework::Deepspeed, Phase::Bwd),
        vec![
            (1, Some((OpName::Linear3, 1, true)), f.clone()),
            (1, Some((OpName::Linear1, 1, true)), f.clone())
        ]
    );
    assert_eq!(ars(Framework::Megatron, Phase::Bwd), vec![(2, None, f.clone())]);
    assert_eq!(ars(Framework::Deepspeed, Phase::Fwd), vec![(2, None, f)]);
}

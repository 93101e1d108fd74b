//! Tests of [`super::validate`]: S1's defaults, every impossible configuration naming its field, Megatron-Core's
//! options on Llama 3 70B and GPT-20B.

use super::*;
use crate::llm::config::Recompute;

fn gpt20b() -> ModelSpec {
    serde_json::from_value(serde_json::json!({"layers": 44, "hidden": 6144, "heads": 64, "seq_len": 2048,
        "vocab": 50257, "parallel_residual": true}))
    .unwrap()
}

fn llama70b() -> ModelSpec {
    serde_json::from_value(serde_json::json!({"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
        "ffn_hidden": 28672, "seq_len": 8192, "vocab": 128256, "norm": "rmsnorm", "activation": "swiglu",
        "attention": "flash"}))
    .unwrap()
}

fn par(v: serde_json::Value) -> ParallelSpec {
    serde_json::from_value(v).unwrap()
}

#[test]
fn global_batch_derives_grad_accum() {
    let c = validate(
        &gpt20b(),
        &par(serde_json::json!({"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4,
        "global_batch": 512})),
        Precision::Fp16,
        128,
    )
    .unwrap();
    assert_eq!((c.grad_accum, c.global_batch), (16, 512));
    // S1's defaults.
    assert_eq!((c.kv_heads, c.ffn_hidden, c.cp, c.virtual_stages), (64, 4 * 6144, 1, 1));
    assert_eq!((c.recompute, c.layer_split), (Recompute::None, LayerSplit::S1));
    assert!(c.s1_pipeline());
}

#[test]
fn impossible_configurations_name_their_field() {
    let m = gpt20b();
    let cases = [
        (serde_json::json!({"tp": 3}), "parallelism.tp"),
        (serde_json::json!({"pp": 45}), "parallelism.pp"),
        (serde_json::json!({"tp": 8, "pp": 4, "dp": 8}), "parallelism"),
        (serde_json::json!({"dp": 8, "micro_batch": 4, "global_batch": 100}), "parallelism.global_batch"),
        (serde_json::json!({"dp": 2, "grad_accum": 4, "global_batch": 10}), "parallelism.global_batch"),
        (serde_json::json!({"zero_stage": 4}), "parallelism.zero_stage"),
        (serde_json::json!({"micro_batch": 0}), "parallelism.micro_batch"),
        (serde_json::json!({"virtual_stages": 0}), "parallelism.virtual_stages"),
        (serde_json::json!({"virtual_stages": 2}), "parallelism.virtual_stages"),
        // 44 layers over pp·v = 4·3 = 12 chunks.
        (serde_json::json!({"pp": 4, "virtual_stages": 3, "grad_accum": 8}), "parallelism.virtual_stages"),
        // m = 6 micro-batches not divisible by pp 4.
        (serde_json::json!({"pp": 4, "virtual_stages": 11, "grad_accum": 6}), "parallelism.virtual_stages"),
        (
            serde_json::json!({"pp": 4, "virtual_stages": 11, "grad_accum": 8, "layer_split": "s1"}),
            "parallelism.layer_split",
        ),
        (serde_json::json!({"pp": 8, "layer_split": "uniform"}), "parallelism.layer_split"),
        // Megatron-Core's options with S1's split, or with each other.
        (
            serde_json::json!({"pp": 4, "layer_split": "s1", "account_for_loss_in_pipeline_split": true}),
            "parallelism.layer_split",
        ),
        (
            serde_json::json!({"pp": 4, "num_layers_in_first_pipeline_stage": 8,
                "account_for_embedding_in_pipeline_split": true}),
            "parallelism.account_for_embedding_in_pipeline_split",
        ),
        // 44 − 10 = 34 layers over 3 stages.
        (
            serde_json::json!({"pp": 4, "num_layers_in_first_pipeline_stage": 10}),
            "parallelism.num_layers_in_first_pipeline_stage",
        ),
        (serde_json::json!({"zero_stage": 0, "distributed_optimizer": true}), "parallelism.distributed_optimizer"),
        // Ring attention needs flash attention.
        (serde_json::json!({"context_parallel": 2}), "parallelism.context_parallel"),
    ];
    for (p, field) in cases {
        assert_eq!(validate(&m, &par(p.clone()), Precision::Fp16, 128).unwrap_err().field, field, "{p}");
    }
    let odd = ModelSpec { hidden: 6000, ..m.clone() };
    assert_eq!(validate(&odd, &par(serde_json::json!({})), Precision::Fp16, 8).unwrap_err().field, "model.hidden");
    let gqa = ModelSpec { kv_heads: Some(6), ..m };
    assert_eq!(validate(&gqa, &par(serde_json::json!({})), Precision::Fp16, 8).unwrap_err().field, "model.kv_heads");
}

#[test]
fn megatron_options_on_llama_70b() {
    let m = llama70b();
    // kv_heads 8 cannot be split over tp 16.
    let e = validate(&m, &par(serde_json::json!({"tp": 16})), Precision::Bf16, 1024).unwrap_err();
    assert_eq!(e.field, "parallelism.tp");
    // cp 3: 8192 is not divisible by 6.
    let e = validate(&m, &par(serde_json::json!({"context_parallel": 3})), Precision::Bf16, 1024).unwrap_err();
    assert_eq!(e.field, "parallelism.context_parallel");
    // DGX Cloud's Llama 3.1 70B: TP 4, PP 4, CP 2, VP 5, MBS 1, GA 64 on 64 GPUs (dp 2).
    let c = validate(
        &m,
        &par(serde_json::json!({"tp": 4, "pp": 4, "dp": 2, "context_parallel": 2, "virtual_stages": 5,
            "grad_accum": 64, "sequence_parallel": true, "distributed_optimizer": true,
            "overlap_grad_reduce": true})),
        Precision::Bf16,
        64,
    )
    .unwrap();
    assert_eq!((c.gpus(), c.grad_ranks(), c.layer_split, c.global_batch), (64, 4, LayerSplit::Uniform, 128));
    assert!(!c.s1_pipeline() && c.sp());
    // 8192 / cp 2 = 4096 tokens per rank per sequence.
    assert_eq!(c.tokens_per_rank(), 4096);
}

#[test]
fn megatron_split_options_choose_the_uniform_split() {
    // GPT-20B's 44 layers over pp 4 with the first stage holding 8: 36 left over 3 stages = 12 each; the
    // options alone choose Megatron-Core's split (no layer_split given).
    let c = validate(
        &gpt20b(),
        &par(serde_json::json!({"pp": 4, "num_layers_in_first_pipeline_stage": 8})),
        Precision::Fp16,
        8,
    )
    .unwrap();
    assert_eq!(c.layer_split, LayerSplit::Uniform);
    assert_eq!(crate::llm::partition::chunk_layers(&c), vec![8, 12, 12, 12]);
    assert!(!c.s1_pipeline());
    // 44 + 2 = 46 slots do not divide over pp 4; 44 + 0 do (11 each).
    let e = validate(
        &gpt20b(),
        &par(serde_json::json!({"pp": 4, "account_for_embedding_in_pipeline_split": true,
            "account_for_loss_in_pipeline_split": true})),
        Precision::Fp16,
        8,
    )
    .unwrap_err();
    assert_eq!(e.field, "parallelism.layer_split");
    assert!(e.message.contains("44 + 2 (embedding and loss) = 46"), "{}", e.message);
}

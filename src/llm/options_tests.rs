//! Tests of Megatron-LM's options at Llama scale with the analytic backend: the direction of recomputation,
//! sequence parallelism, interleaving, overlaps, fp8, GQA and tied embeddings on Llama-3-70B on H100s; a
//! configuration that cannot fit; the GPU count check; the whole-run estimate; and the Llama 3.1 405B reference
//! layout with the embedding and the loss counted as pipeline layers.

use super::config::ModelSpec;
use super::predict::predict;
use super::predict_tests::{gpt20b, model, par, preset};
use super::validate::validate;
use crate::cost::AnalyticBackend;
use crate::hw::Precision;

fn llama(extra: serde_json::Value) -> ModelSpec {
    let mut m = serde_json::json!({"name": "Llama-3-70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
        "ffn_hidden": 28672, "seq_len": 8192, "vocab": 128256, "norm": "rmsnorm", "activation": "swiglu",
        "attention": "flash"});
    for (k, v) in extra.as_object().unwrap() {
        m[k] = v.clone();
    }
    model(m)
}

fn on_h100(m: &ModelSpec, p: serde_json::Value, precision: Precision) -> super::TrainingPrediction {
    let s = preset("dgx-h100");
    let cfg = validate(m, &par(p), precision, s.total_gpus()).unwrap();
    predict(&cfg, &AnalyticBackend::new(s)).unwrap()
}

fn megatron(extra: serde_json::Value) -> serde_json::Value {
    let mut p = serde_json::json!({"tp": 8, "pp": 4, "dp": 4, "micro_batch": 1, "global_batch": 128,
        "layer_split": "uniform", "distributed_optimizer": true});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

#[test]
fn full_recompute_is_slower_than_selective_which_is_slower_than_none() {
    let m = llama(serde_json::json!({"attention": "fused_softmax"}));
    let t = |r: &str| on_h100(&m, megatron(serde_json::json!({"recompute": r})), Precision::Bf16);
    let (none, sel, full) = (t("none"), t("selective"), t("full"));
    assert!(none.iteration_time_s < sel.iteration_time_s, "{} !< {}", none.iteration_time_s, sel.iteration_time_s);
    assert!(sel.iteration_time_s < full.iteration_time_s);
    // Full recompute re-runs the forward: the backward grows by about one forward (≈ 4/3 of the compute).
    let (bn, bf, fw) = (none.stages[1].backward_s, full.stages[1].backward_s, none.stages[1].forward_s);
    assert!((bf - bn) > 0.9 * fw && (bf - bn) < 1.05 * fw, "{bn} {bf} {fw}");
    // ... and needs far less activation memory.
    assert!(full.memory.activations_gib < sel.memory.activations_gib);
    assert!(sel.memory.activations_gib < none.memory.activations_gib);
}

#[test]
fn sequence_parallelism_lowers_activation_memory_and_norm_time() {
    let m = llama(serde_json::json!({}));
    let off = on_h100(&m, megatron(serde_json::json!({})), Precision::Bf16);
    let on = on_h100(&m, megatron(serde_json::json!({"sequence_parallel": true})), Precision::Bf16);
    assert!(on.memory.activations_gib < off.memory.activations_gib);
    // With flash attention Korthikanti's per-layer count falls from sbh·(10 + D/t) to sbh·(10 + D)/t.
    let norm = |p: &super::TrainingPrediction| {
        p.operators.iter().filter(|o| o.name == super::operators::OpName::RMSNorm).map(|o| o.total_us).sum::<f64>()
    };
    assert!(norm(&on) < norm(&off) / 4.0);
    assert!(on.operators.iter().any(|o| o.name == super::operators::OpName::MpReduceScatter));
}

#[test]
fn more_virtual_stages_shrink_the_bubble() {
    let m = llama(serde_json::json!({}));
    let t =
        |v: u32| on_h100(&m, megatron(serde_json::json!({"virtual_stages": v, "global_batch": 64})), Precision::Bf16);
    let (v1, v2, v5) = (t(1), t(2), t(5));
    assert_eq!(v5.schedule, "interleaved_1f1b");
    assert_eq!(v5.timeline.model, "simulated");
    // m = 64/4 = 16: (pp − 1)/(m·v) = 3/16, 3/32, 3/80.
    assert_eq!((v1.bubble_fraction, v2.bubble_fraction, v5.bubble_fraction), (3.0 / 16.0, 3.0 / 32.0, 3.0 / 80.0));
    assert!(v2.timeline.pipeline_s < v1.timeline.pipeline_s);
    assert!(v5.timeline.pipeline_s < v2.timeline.pipeline_s);
    // More sends per micro-batch: 2·(pp·v − 1) instead of 2·(pp − 1).
    let sends = |p: &super::TrainingPrediction| {
        p.operators
            .iter()
            .filter(|o| o.name == super::operators::OpName::PpP2p)
            .map(|o| o.calls_per_micro_batch)
            .sum::<u32>()
    };
    assert_eq!((sends(&v1), sends(&v5)), (6, 38));
    // Interleaving keeps more activations in flight on the first stage: 1 + (pp − 1)/(pp·v) of pp micro-batches.
    assert!(v5.memory.activations_gib > v1.memory.activations_gib);
}

#[test]
fn overlapping_gradient_reduction_and_sharding_the_optimizer() {
    let m = llama(serde_json::json!({}));
    let base = on_h100(&m, megatron(serde_json::json!({"dp": 8, "pp": 2, "global_batch": 64})), Precision::Bf16);
    let ovl = on_h100(
        &m,
        megatron(serde_json::json!({"dp": 8, "pp": 2, "global_batch": 64, "overlap_grad_reduce": true})),
        Precision::Bf16,
    );
    assert!(ovl.timeline.exposed_grad_sync_s < base.timeline.exposed_grad_sync_s);
    assert!(ovl.iteration_time_s < base.iteration_time_s);
    // ZeRO-0 keeps the whole optimizer on every GPU; the distributed optimizer shards it over dp = 8.
    let z0 = on_h100(
        &m,
        megatron(serde_json::json!({"dp": 8, "pp": 2, "global_batch": 64, "zero_stage": 0,
        "distributed_optimizer": false})),
        Precision::Bf16,
    );
    assert!((z0.memory.optimizer_gib / base.memory.optimizer_gib - 8.0).abs() < 1e-9);
    // ZeRO-3 partitions the weights too, at the price of per-micro-batch all-gathers.
    let z3 = on_h100(
        &m,
        megatron(serde_json::json!({"dp": 8, "pp": 2, "global_batch": 64, "zero_stage": 3,
        "distributed_optimizer": false})),
        Precision::Bf16,
    );
    assert!(z3.memory.gradients_gib < base.memory.gradients_gib / 7.9);
    assert!(z3.iteration_time_s > base.iteration_time_s);
}

#[test]
fn fp8_gemms_are_faster_on_h100_and_refused_on_a100() {
    let m = llama(serde_json::json!({}));
    let bf16 = on_h100(&m, megatron(serde_json::json!({})), Precision::Bf16);
    let fp8 = on_h100(&m, megatron(serde_json::json!({})), Precision::Fp8);
    assert!(fp8.iteration_time_s < bf16.iteration_time_s);
    let lin = fp8.operators.iter().find(|o| o.name == super::operators::OpName::Linear1).unwrap();
    assert_eq!(lin.precision, Some(Precision::Fp8));
    let head = fp8.operators.iter().find(|o| o.name == super::operators::OpName::FinalLinear).unwrap();
    assert_eq!(head.precision, Some(Precision::Bf16));
    let a100 = preset("dgx-a100-80g");
    let cfg = validate(&m, &par(megatron(serde_json::json!({}))), Precision::Fp8, a100.total_gpus()).unwrap();
    assert_eq!(predict(&cfg, &AnalyticBackend::new(a100)).unwrap_err().field, "precision");
}

#[test]
fn gqa_and_tied_embeddings_shrink_the_model() {
    let mha = on_h100(&llama(serde_json::json!({"kv_heads": 64})), megatron(serde_json::json!({})), Precision::Bf16);
    let gqa = on_h100(&llama(serde_json::json!({})), megatron(serde_json::json!({})), Precision::Bf16);
    // K and V projections: 2·8192·(64 − 8)·128 weights per layer fewer, ×80 layers = 9.395e9.
    let saved = mha.config.model_parameters - gqa.config.model_parameters;
    assert!((saved - 80.0 * (2.0 * 8192.0 * 56.0 * 128.0 + 2.0 * 56.0 * 128.0)).abs() < 1.0, "{saved}");
    assert!(gqa.iteration_time_s < mha.iteration_time_s);
    // Tied embeddings on one stage: one 128256·8192 matrix fewer (padded vocab 128,256 at tp 1 = 128·1002).
    let one = |tied: bool| {
        on_h100(
            &llama(serde_json::json!({"tied_embeddings": tied, "layers": 8})),
            serde_json::json!({"tp": 8}),
            Precision::Bf16,
        )
    };
    assert!((one(false).config.model_parameters - one(true).config.model_parameters - 128_256.0 * 8192.0).abs() < 1.0);
}

#[test]
fn a_configuration_that_cannot_fit_says_so() {
    // Llama-3 70B on 8 H100s with tp 8 only: 8.8 B parameters per GPU · 16 bytes = 141 GB of model states alone.
    let p = on_h100(&llama(serde_json::json!({})), serde_json::json!({"tp": 8, "zero_stage": 0}), Precision::Bf16);
    assert!(!p.memory.fits);
    assert!(p.memory.total_gib > 80.0);
    assert!(p.warnings.iter().any(|w| w.starts_with("does not fit")), "{:?}", p.warnings);
    // Sharded over 16 pipeline-and-data-parallel GPUs with full recompute it fits.
    let ok = on_h100(
        &llama(serde_json::json!({})),
        megatron(serde_json::json!({"recompute": "full", "sequence_parallel": true})),
        Precision::Bf16,
    );
    assert!(ok.memory.fits, "{:?}", ok.memory);
}

#[test]
fn more_gpus_than_the_system_has_names_the_field_and_the_way_out() {
    // GPT-20B with tp 4 · pp 4 · dp 128 = 2,048 GPUs on dgx-h100 (128 nodes × 8 = 1,024).
    let p = par(serde_json::json!({"tp": 4, "pp": 4, "dp": 128, "micro_batch": 1, "global_batch": 1024}));
    let e = validate(&gpt20b(), &p, Precision::Bf16, 1024).unwrap_err();
    assert_eq!(e.field, "parallelism");
    assert!(e.message.contains("4·1·4·128 = 2048 GPUs, but the system has 1024"), "{}", e.message);
    assert!(e.message.contains("more `nodes` (POST /v1/systems)"), "{}", e.message);
}

#[test]
fn whole_run_estimate_by_hand() {
    let p = on_h100(&llama(serde_json::json!({})), megatron(serde_json::json!({})), Precision::Bf16);
    // 1e12 tokens at 128 · 8192 = 1,048,576 tokens per step → ⌈953,674.3⌉ = 953,675 steps.
    let r = super::run::run_estimate(&p, &super::RunSpec { tokens: Some(1e12), steps: None }, 8192);
    assert_eq!(r.steps, 953_675);
    assert_eq!(r.tokens, 953_675.0 * 1_048_576.0);
    assert!((r.wall_clock_s - 953_675.0 * p.iteration_time_s).abs() < 1e-6);
    assert!((r.gpu_hours - r.wall_clock_s * 128.0 / 3600.0).abs() < 1e-6);
    assert!((r.wall_clock_days - r.wall_clock_s / 86_400.0).abs() < 1e-9);
}

#[test]
fn llama_405b_reference_configuration_is_answered_with_embedding_and_loss_as_layers() {
    // The 405B reference configuration: tp 8 · pp 8 · vp 8 · cp 2 · dp 8 = 1024 H100, 126 layers, the embedding
    // and the loss counted as pipeline layers (Megatron-Bridge's Llama 3.1 405B recipe). 128 slots / 64 chunks = 2
    // per chunk; the first chunk of stage 0 and the last chunk of stage 7 build one layer each, so stage 0 and
    // stage 7 hold 15 layers and the six middle stages 16 (hand-worked in partition.rs).
    let m = model(serde_json::json!({"name": "Llama-3.1-405B", "layers": 126, "hidden": 16384, "heads": 128,
        "kv_heads": 8, "ffn_hidden": 53248, "seq_len": 8192, "vocab": 128256, "norm": "rmsnorm",
        "activation": "swiglu", "attention": "flash"}));
    let p = serde_json::json!({"tp": 8, "pp": 8, "dp": 8, "context_parallel": 2, "virtual_stages": 8,
        "micro_batch": 1, "global_batch": 1536, "sequence_parallel": true, "distributed_optimizer": true,
        "overlap_grad_reduce": true, "account_for_embedding_in_pipeline_split": true,
        "account_for_loss_in_pipeline_split": true});
    let s = preset("dgx-h100");
    let cfg = validate(&m, &par(p.clone()), Precision::Bf16, s.total_gpus()).unwrap();
    let even = predict(&cfg, &AnalyticBackend::new(s.clone())).unwrap();
    let layers: Vec<u32> = even.stages.iter().map(|st| st.encoders).collect();
    assert_eq!(layers, vec![15, 16, 16, 16, 16, 16, 16, 15]);
    assert!(even.iteration_time_s.is_finite() && even.iteration_time_s > 0.0);
    // The point of counting them: the first stage's forward (embedding + 15 layers) is lighter than a middle
    // stage's 16 layers would make it, and no heavier than a middle stage's by more than the embedding lookup.
    let (first, middle) = (even.stages[0].forward_s, even.stages[1].forward_s);
    assert!(first < middle, "{first} !< {middle}");
    // The uneven options instead: first and last stages with 14 layers each leave 126 − 28 = 98 for 6 middle
    // stages, not divisible (Megatron-Core's assertion), refused on that field.
    let mut q = p;
    q["account_for_embedding_in_pipeline_split"] = false.into();
    q["account_for_loss_in_pipeline_split"] = false.into();
    q["num_layers_in_first_pipeline_stage"] = 14.into();
    q["num_layers_in_last_pipeline_stage"] = 14.into();
    let e = validate(&m, &par(q.clone()), Precision::Bf16, s.total_gpus()).unwrap_err();
    assert_eq!(e.field, "parallelism.num_layers_in_first_pipeline_stage");
    // First 16, last 14 leave 96 = 6 · 16, but the last stage's 14 layers do not split over vp 8: refused on
    // virtual_stages. With vp 2 every stage splits: 16 → 8 + 8, 14 → 7 + 7.
    q["num_layers_in_first_pipeline_stage"] = 16.into();
    assert_eq!(
        validate(&m, &par(q.clone()), Precision::Bf16, s.total_gpus()).unwrap_err().field,
        "parallelism.virtual_stages"
    );
    q["virtual_stages"] = 2.into();
    let cfg = validate(&m, &par(q), Precision::Bf16, s.total_gpus()).unwrap();
    let uneven = predict(&cfg, &AnalyticBackend::new(s)).unwrap();
    let layers: Vec<u32> = uneven.stages.iter().map(|st| st.encoders).collect();
    assert_eq!(layers, vec![16, 16, 16, 16, 16, 16, 16, 14]);
}

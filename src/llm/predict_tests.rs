//! Tests of the composition with operator times fixed by hand, and of the direction of effects with the
//! analytic backend.

use super::config::{ModelSpec, ParallelSpec};
use super::predict::predict;
use super::validate::validate;
use crate::backend::{AnalyticBackend, CostBackend, Source, Timed};
use crate::comm::{Collective, Group};
use crate::hw::{presets, GpuRef, Link, Precision, System, SystemSpec};
use crate::op::{analytic::UnsupportedPrecision, OpClass, OpShape, Phase};

/// Every compute operator 10 µs forward and 20 µs backward, the optimizer 50 µs; all-reduce 5 µs, send/recv
/// 3 µs, all-gather 7 µs.
struct FixedBackend(System);

impl CostBackend for FixedBackend {
    fn system(&self) -> &System {
        &self.0
    }
    fn compute(&self, op: &OpShape, _: Precision) -> Result<Timed, UnsupportedPrecision> {
        let t = match (op.class, op.phase) {
            (OpClass::Optimizer, _) => 50.0,
            (_, Phase::Fwd) => 10.0,
            (_, Phase::Bwd) => 20.0,
        };
        Ok(Timed { time_us: t, analytic_us: t, source: Source::Analytic })
    }
    fn collective(&self, c: Collective, _: f64, _: Group, _: u32) -> Timed {
        let t = match c {
            Collective::AllReduce => 5.0,
            Collective::SendRecv => 3.0,
            Collective::AllGather => 7.0,
            _ => 1000.0,
        };
        Timed { time_us: t, analytic_us: t, source: Source::Analytic }
    }
}

fn small_system() -> System {
    SystemSpec {
        name: "small".into(),
        gpu: GpuRef::Name("A100-SXM4-40GB".into()),
        gpus_per_node: 2,
        nodes: 4,
        intra_node: Link { kind: "nvlink".into(), bandwidth_gbs: 300.0, latency_us: 2.0 },
        inter_node: Link { kind: "ib".into(), bandwidth_gbs: 25.0, latency_us: 5.0 },
        description: None,
    }
    .resolve()
    .unwrap()
}

fn model(v: serde_json::Value) -> ModelSpec {
    serde_json::from_value(v).unwrap()
}

fn par(v: serde_json::Value) -> ParallelSpec {
    serde_json::from_value(v).unwrap()
}

#[test]
fn eq7_on_a_small_configuration_with_fixed_operator_times() {
    // E = 4, pp = 2 → partition [3, 1] (u = ⌈9/2⌉ = 5). Per encoder forward: 2 LayerNorm, Linear1, QK^T,
    // Fused_Softmax, V, Linear2, Linear3, GeLU, Linear4 = 10 calls.
    // Stage 0: F = 30·10 + Embedding 10 + MP all-reduce (2·3 + 1 embedding)·5 + send 3 = 348 µs;
    //          B = 30·20 + Embedding 20 + MP 6·5 = 650 µs.
    // Stage 1: F = 10·10 + final LayerNorm, Final_Linear, Cross-entropy 3·10 + MP 2·5 = 140 µs;
    //          B = 10·20 + 3·20 + MP 2·5 + send 3 = 273 µs.
    // m = 3: (3 − 1 + 2)·(348 + 650) = 3992 µs; + DP all-reduce 5 + (optimizer 50 + all-gather 7) = 4054 µs.
    let m = model(serde_json::json!({"layers": 4, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 1000,
        "rotary": false}));
    let p = par(serde_json::json!({"tp": 2, "pp": 2, "dp": 2, "micro_batch": 1, "grad_accum": 3, "zero_stage": 1}));
    let cfg = validate(&m, &p, Precision::Fp16, 8).unwrap();
    let pred = predict(&cfg, &FixedBackend(small_system())).unwrap();
    let enc: Vec<u32> = pred.stages.iter().map(|s| s.encoders).collect();
    assert_eq!(enc, vec![3, 1]);
    let us = |s: f64| (s * 1e6 * 1e6).round() / 1e6;
    assert_eq!(us(pred.stages[0].forward_s), 348.0);
    assert_eq!(us(pred.stages[0].backward_s), 650.0);
    assert_eq!(us(pred.stages[1].forward_s), 140.0);
    assert_eq!(us(pred.stages[1].backward_s), 273.0);
    assert_eq!(us(pred.components.pipeline_s), 3992.0);
    assert_eq!(us(pred.components.first_stage_grad_sync_s), 5.0);
    assert_eq!(us(pred.components.max_update_s), 57.0);
    assert_eq!(us(pred.iteration_time_s), 4054.0);
}

#[test]
fn parallel_residual_saves_one_forward_all_reduce_per_encoder() {
    let base = serde_json::json!({"layers": 4, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 1000,
        "rotary": false});
    let mut pr = base.clone();
    pr["parallel_residual"] = serde_json::json!(true);
    let p = par(serde_json::json!({"tp": 2, "pp": 2, "dp": 2, "grad_accum": 3}));
    let t = |m| {
        let cfg = validate(&model(m), &p, Precision::Fp16, 8).unwrap();
        predict(&cfg, &FixedBackend(small_system())).unwrap()
    };
    // Stage 0 forward loses 3 all-reduces of 5 µs.
    assert!((t(base).stages[0].forward_s - t(pr).stages[0].forward_s - 15e-6).abs() < 1e-12);
}

fn preset(name: &str) -> System {
    presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap()
}

fn gpt20b() -> ModelSpec {
    model(serde_json::json!({"name": "GPT-20B", "layers": 44, "hidden": 6144, "heads": 64, "seq_len": 2048,
        "vocab": 50257, "norm": "layernorm", "attention": "fused_softmax", "activation": "gelu",
        "parallel_residual": true}))
}

fn analytic(system: &System, m: &ModelSpec, p: serde_json::Value) -> super::TrainingPrediction {
    let cfg = validate(m, &par(p), Precision::Fp16, system.total_gpus()).unwrap();
    predict(&cfg, &AnalyticBackend::new(system.clone())).unwrap()
}

#[test]
fn doubling_dp_at_fixed_global_batch_lowers_the_time() {
    let s = preset("perlmutter-a100-40g");
    let small = analytic(
        &s,
        &gpt20b(),
        serde_json::json!({"tp": 4, "pp": 4, "dp": 4, "micro_batch": 4,
        "global_batch": 512}),
    );
    let big = analytic(
        &s,
        &gpt20b(),
        serde_json::json!({"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4,
        "global_batch": 512}),
    );
    assert_eq!((small.config.grad_accum, big.config.grad_accum), (32, 16));
    assert!(big.iteration_time_s < small.iteration_time_s);
}

#[test]
fn tensor_parallelism_across_nodes_costs_more_than_within() {
    let s = preset("perlmutter-a100-40g");
    // tp 4 fits a 4-GPU node; tp 8 spans two nodes. Same GPUs (128), same global batch.
    let within = analytic(
        &s,
        &gpt20b(),
        serde_json::json!({"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4,
        "grad_accum": 16}),
    );
    let across = analytic(
        &s,
        &gpt20b(),
        serde_json::json!({"tp": 8, "pp": 4, "dp": 4, "micro_batch": 4,
        "grad_accum": 32}),
    );
    assert_eq!(across.config.tp_nodes, 2);
    assert!(across.iteration_time_s > within.iteration_time_s);
    assert!(across.warnings.iter().any(|w| w.contains("tensor-parallel all-reduces cross")));
}

#[test]
fn prediction_reports_sources_throughput_and_all_operators() {
    let s = preset("perlmutter-a100-40g");
    let p = analytic(
        &s,
        &gpt20b(),
        serde_json::json!({"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4,
        "grad_accum": 16}),
    );
    assert_eq!(p.sources, vec!["analytic".to_string()]);
    assert_eq!(p.config.vocab_padded, 50688);
    assert!(p.throughput.mfu > 0.0 && p.throughput.mfu < 1.0, "{}", p.throughput.mfu);
    // Tokens/s = 512 · 2048 / t.
    assert!((p.throughput.tokens_per_s * p.iteration_time_s - 512.0 * 2048.0).abs() < 1e-6);
    let names: Vec<String> =
        p.operators.iter().map(|r| serde_json::to_value(r.name).unwrap().as_str().unwrap().to_string()).collect();
    for n in [
        "Embedding",
        "LayerNorm",
        "Linear1",
        "QK^T",
        "Fused_Softmax",
        "V",
        "Linear2",
        "Linear3",
        "GeLU",
        "Linear4",
        "Final_Linear",
        "Parallel_Cross_Entropy",
        "MP_Allreduce",
        "DP_Allreduce",
        "DP_Allgather",
        "PP_P2P",
        "Optimizer",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
    }
    // QKV GEMM runs once per encoder per micro-batch: 44 calls forward over the pipeline.
    let qkv = p.operators.iter().find(|r| r.name == super::operators::OpName::Linear1 && r.phase == Phase::Fwd);
    assert_eq!(qkv.unwrap().calls_per_micro_batch, 44);
    assert_eq!(qkv.unwrap().features, vec![4 * 2048, 6144, 3 * 6144 / 4]);
}

//! Tests of the composition with operator times fixed by hand, and of the direction of effects with the
//! analytic backend.

use super::config::{ModelSpec, ParallelSpec};
use super::predict::predict;
use super::validate::validate;
use crate::comm::Group;
use crate::cost::roofline::UnsupportedPrecision;
use crate::cost::{AnalyticBackend, CostBackend, Source, Timed};
use crate::hw::{presets, GpuRef, Link, Precision, System, SystemSpec};
use crate::op::Collective;
use crate::op::{OpClass, OpShape, Phase};

/// Every compute operator 10 µs forward and 20 µs backward, the optimizer 50 µs; all-reduce 5 µs, send/recv
/// 3 µs, all-gather 7 µs.
pub(super) struct FixedBackend(pub(super) System);

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
        Ok(Timed::new(t, t, Source::Analytic))
    }
    fn collective(&self, c: Collective, _: f64, _: Group, _: u32) -> Timed {
        let t = match c {
            Collective::AllReduce => 5.0,
            Collective::SendRecv => 3.0,
            Collective::AllGather => 7.0,
            _ => 1000.0,
        };
        Timed::new(t, t, Source::Analytic)
    }
}

pub(super) fn small_system() -> System {
    SystemSpec {
        name: "small".into(),
        gpu: GpuRef::Name("A100-SXM4-40GB".into()),
        gpus_per_node: 2,
        nodes: 4,
        intra_node: Link::new("nvlink", 300.0, 2.0),
        inter_node: Link::new("ib", 25.0, 5.0),
        description: None,
    }
    .resolve()
    .unwrap()
}

pub(super) fn model(v: serde_json::Value) -> ModelSpec {
    serde_json::from_value(v).unwrap()
}

pub(super) fn par(v: serde_json::Value) -> ParallelSpec {
    serde_json::from_value(v).unwrap()
}

/// The small configuration of the eq. 7 tests: 4 layers, hidden 64, 16 heads, seq 32, vocab 1000, no RoPE;
/// tp 2 · pp 2 · dp 2, micro-batch 1, 3 micro-batches, ZeRO-1, fp16, 8 GPUs. 16 heads so that Megatron's fused
/// softmax runs (8 attention batches per rank, a multiple of the kernel's 8 per block at seq ≤ 128:
/// [`crate::llm::operators::fused_softmax_available`]); the operator times are fixed, so heads change nothing else.
pub(super) fn eq7_config() -> super::TrainingConfig {
    let m = model(serde_json::json!({"layers": 4, "hidden": 64, "heads": 16, "seq_len": 32, "vocab": 1000,
        "rotary": false}));
    let p = par(serde_json::json!({"tp": 2, "pp": 2, "dp": 2, "micro_batch": 1, "grad_accum": 3, "zero_stage": 1}));
    validate(&m, &p, Precision::Fp16, 8).unwrap()
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
    let cfg = eq7_config();
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

/// [`FixedBackend`] whose compute operators take 100 µs of host time each to dispatch (collectives none).
struct HostBoundBackend(System);

impl CostBackend for HostBoundBackend {
    fn system(&self) -> &System {
        &self.0
    }
    fn compute(&self, op: &OpShape, dtype: Precision) -> Result<Timed, UnsupportedPrecision> {
        Ok(Timed { host_us: 100.0, ..FixedBackend(self.0.clone()).compute(op, dtype)? })
    }
    fn collective(&self, c: Collective, bytes: f64, group: Group, active: u32) -> Timed {
        FixedBackend(self.0.clone()).collective(c, bytes, group, active)
    }
}

#[test]
fn a_host_bound_pass_runs_at_the_hosts_pace() {
    // The configuration of the eq. 7 test above, every compute call now 100 µs on the host. Per encoder and pass
    // 10 calls → 1000 µs host against 10·10 + 2·5 = 110 µs (forward) or 10·20 + 2·5 = 210 µs (backward) of GPU
    // time; the embedding 100 µs against 10 + 5 (forward) or 20; the head's 3 calls 300 µs against 30 or 60.
    // Stage 0: F = 3·1000 + 100 + send 3 = 3103 µs, B = 3·1000 + 100 = 3100 µs.
    // Stage 1: F = 1000 + 300 = 1300 µs, B = 1000 + 300 + send 3 = 1303 µs.
    // m = 3: (3 − 1 + 2)·(3103 + 3100) = 24812 µs; + DP all-reduce 5 + update 57 = 24874 µs.
    let cfg = eq7_config();
    let pred = predict(&cfg, &HostBoundBackend(small_system())).unwrap();
    let us = |s: f64| (s * 1e6 * 1e6).round() / 1e6;
    assert_eq!(us(pred.stages[0].forward_s), 3103.0);
    assert_eq!(us(pred.stages[0].backward_s), 3100.0);
    assert_eq!(us(pred.stages[1].forward_s), 1300.0);
    assert_eq!(us(pred.stages[1].backward_s), 1303.0);
    assert_eq!(us(pred.iteration_time_s), 24874.0);
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

pub(super) fn preset(name: &str) -> System {
    presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap()
}

pub(super) fn gpt20b() -> ModelSpec {
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

/// S1's pipeline inputs of a prediction: every stage paced at the slowest stage's forward and backward (S1's
/// assumption), only the first stage's gradient reduction exposed, each stage's own update.
fn s1_inputs(p: &super::TrainingPrediction) -> (Vec<f64>, Vec<f64>, Vec<super::pipeline::StageTail>) {
    let pp = p.stages.len();
    let tails = p
        .stages
        .iter()
        .map(|s| super::pipeline::StageTail {
            grad_sync_s: if s.stage == 0 { p.components.first_stage_grad_sync_s } else { 0.0 },
            overlap_window_s: 0.0,
            buckets: 1,
            update_s: s.optimizer_s + s.param_allgather_s,
            ..Default::default()
        })
        .collect();
    (vec![p.components.max_fwd_s; pp], vec![p.components.max_bwd_s; pp], tails)
}

#[test]
fn the_simulation_reduces_to_eq7_in_s1_setting() {
    // Every example configuration of S1 (GPT-20B 4-4-8, 4-8-4, 8-4-4, LLaMA-13B 4-8-2, Llemma-7B 4-2-2 on
    // Perlmutter and Vista): the general simulation fed S1's inputs gives eq. 7's number.
    let mut checked = 0;
    for sys in ["perlmutter-a100-40g", "vista-gh200"] {
        let system = preset(sys);
        for entry in std::fs::read_dir(format!("{}/examples/{sys}", env!("CARGO_MANIFEST_DIR"))).unwrap() {
            let req: super::TrainingRequest =
                serde_json::from_slice(&std::fs::read(entry.unwrap().path()).unwrap()).unwrap();
            let cfg = validate(&req.model, &req.parallelism, req.precision, system.total_gpus()).unwrap();
            let p = predict(&cfg, &AnalyticBackend::new(system.clone())).unwrap();
            assert_eq!(p.timeline.model, "eq7");
            let (f, b, tails) = s1_inputs(&p);
            let spec = super::pipeline::PipelineSpec::new(cfg.pp, 1, cfg.grad_accum, &f, &b);
            let sim = super::pipeline::simulate(&spec).unwrap();
            let t = super::pipeline::step_time(&sim, &tails, false).iteration_s();
            assert!((t / p.iteration_time_s - 1.0).abs() < 1e-12, "{sys}: {t} vs eq. 7 {}", p.iteration_time_s);
            assert!((sim.makespan_s / p.components.pipeline_s - 1.0).abs() < 1e-12);
            checked += 1;
        }
    }
    assert_eq!(checked, 10);
}

#[test]
fn simulating_s1_configurations_with_their_own_stage_times_never_exceeds_eq7() {
    // Eq. 7 paces every stage at the slowest; the simulation lets faster stages finish earlier, so it can only be
    // shorter — and equal when the stages are balanced (the fixed-time small model with pp = 1).
    let s = preset("perlmutter-a100-40g");
    let cfg = validate(
        &gpt20b(),
        &par(serde_json::json!({"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4,
        "grad_accum": 16})),
        Precision::Fp16,
        6144,
    )
    .unwrap();
    let p = predict(&cfg, &AnalyticBackend::new(s.clone())).unwrap();
    let f: Vec<f64> = p.stages.iter().map(|s| s.forward_s).collect();
    let b: Vec<f64> = p.stages.iter().map(|s| s.backward_s).collect();
    let sim = super::pipeline::simulate(&super::pipeline::PipelineSpec::new(4, 1, 16, &f, &b)).unwrap();
    assert!(sim.makespan_s < p.components.pipeline_s);
    // The middle stages (13 layers) pace the steady state: at least 16 of their slots.
    assert!(sim.makespan_s > 16.0 * (p.components.max_fwd_s + p.components.max_bwd_s));
}

//! The recipes' and CUDA graphs' effects, worked out by hand where a number is asserted; each option's direction
//! with the analytic backend derated by the shipped constants.

use super::*;
use crate::cost::{AnalyticBackend, CostBackend, Derated, Efficiency, Timed};
use crate::hw::System;
use crate::llm::config::{ModelSpec, ParallelSpec};
use crate::llm::decompose::decompose;
use crate::llm::framework::Framework;
use crate::llm::framework_tests::{llama8b, preset};
use crate::llm::predict::predict;
use crate::llm::validate::{validate, with_framework};

fn config(
    system: &System,
    m: &ModelSpec,
    p: serde_json::Value,
    precision: Precision,
    fw: Framework,
) -> Result<TrainingConfig, ConfigError> {
    let par: ParallelSpec = serde_json::from_value(p).unwrap();
    with_framework(validate(m, &par, precision, system.total_gpus())?, fw)
}

/// Llama 3.1 8B on one node of `system`, tp 2 with sequence parallelism, dp 4 with the distributed optimizer, in
/// fp8 with `extra` options: the derated analytic prediction.
fn fp8_run(system: &str, extra: serde_json::Value) -> Result<crate::llm::TrainingPrediction, ConfigError> {
    let s = preset(system);
    let mut p = serde_json::json!({"tp": 2, "dp": 4, "sequence_parallel": true, "micro_batch": 1,
        "grad_accum": 4, "distributed_optimizer": true});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    let cfg = config(&s, &llama8b(), p, Precision::Fp8, Framework::Megatron)?;
    predict(&cfg, &Derated::new(AnalyticBackend::new(s), Efficiency::CALIBRATED))
}

#[test]
fn current_scalings_amax_pass_reads_each_gemm_input_once() {
    // One Linear1 of a 1,024-token micro-batch, 4,096 → 4,096 (dims [b, m, n, k] = [1, 1024, 4096, 4096]).
    // Forward: the amax reads X[1024, 4096] = 4,194,304 elements × 2 B = 8,388,608 B; backward: dY[1024, 4096],
    // the same. On the analytic roofline that is 8,388,608 B / bandwidth + one launch (2 µs).
    let s = preset("dgx-h100");
    let cfg =
        config(&s, &llama8b(), serde_json::json!({"fp8_recipe": "tensorwise"}), Precision::Fp8, Framework::Megatron)
            .unwrap();
    let layout = crate::llm::layout::Layout::new(&cfg, s.gpus_per_node);
    let linear = |phase| {
        op(
            OpName::Linear1,
            phase,
            1,
            Work::Compute {
                shape: OpShape::new(OpClass::Linear, phase, &[1, 1024, 4096, 4096]),
                dtype: Precision::Fp8,
            },
            vec![],
        )
    };
    let ops = scaling_ops(&cfg, &layout, &[linear(Phase::Fwd), linear(Phase::Bwd)]);
    // No sequence parallelism here: no amax all-reduce, one amax pass per GEMM and pass.
    assert_eq!(ops.len(), 2);
    let bw = s.gpu.memory_bandwidth_gbs * 1e9;
    for o in &ops {
        assert_eq!(o.name, OpName::Fp8Amax);
        let Work::Compute { shape, .. } = o.work else { panic!() };
        assert_eq!((shape.class, shape.dims[0] * shape.dims[1]), (OpClass::QuantizeScale, 4_194_304));
        let t = AnalyticBackend::new(s.clone()).compute(&shape, Precision::Fp8).unwrap();
        let by_hand = 8_388_608.0 / bw * 1e6 + 2.0;
        assert!((t.time_us - by_hand).abs() < 1e-6 * by_hand, "{} vs {by_hand}", t.time_us);
    }
    // Delayed scaling (the default) adds nothing; blockwise runs the GEMMs as fp8_block instead.
    let delayed = config(&s, &llama8b(), serde_json::json!({}), Precision::Fp8, Framework::Megatron).unwrap();
    assert!(scaling_ops(&delayed, &layout, &[linear(Phase::Fwd)]).is_empty());
    assert_eq!(delayed.gemm_precision(), Precision::Fp8);
    let block =
        config(&s, &llama8b(), serde_json::json!({"fp8_recipe": "blockwise"}), Precision::Fp8, Framework::Megatron)
            .unwrap();
    assert_eq!(block.gemm_precision(), Precision::Fp8Block);
}

#[test]
fn each_recipe_moves_the_time_the_way_it_should() {
    let delayed = fp8_run("dgx-h100", serde_json::json!({})).unwrap();
    let tensorwise = fp8_run("dgx-h100", serde_json::json!({"fp8_recipe": "tensorwise"})).unwrap();
    // Current scaling: one more read of every GEMM input, and with sequence parallelism an amax all-reduce over
    // tp for QKV's and FC1's inputs (forward) and the projection's and FC2's output gradients (backward).
    assert!(tensorwise.iteration_time_s > delayed.iteration_time_s);
    let count = |p: &crate::llm::TrainingPrediction, n: OpName| p.operators.iter().filter(|o| o.name == n).count();
    assert!(count(&tensorwise, OpName::Fp8Amax) > 0 && count(&tensorwise, OpName::Fp8AmaxAllreduce) > 0);
    assert_eq!(count(&delayed, OpName::Fp8Amax), 0);
    // MXFP8 on Blackwell: its scale bytes make it slower than delayed per-tensor scaling, never faster.
    let b_delayed = fp8_run("dgx-b200", serde_json::json!({})).unwrap();
    let b_mx = fp8_run("dgx-b200", serde_json::json!({"fp8_recipe": "mxfp8"})).unwrap();
    assert!(b_mx.iteration_time_s > b_delayed.iteration_time_s);
    assert!(b_mx.iteration_time_s < tensorwise_on("dgx-b200").iteration_time_s);
    // fp4 on Blackwell: the GEMMs at the fp4 peak (twice the fp8 one) are faster than fp8.
    let s = preset("dgx-b200");
    let p = serde_json::json!({"tp": 2, "dp": 4, "sequence_parallel": true, "micro_batch": 1, "grad_accum": 4,
        "distributed_optimizer": true});
    let fp4 = config(&s, &llama8b(), p, Precision::Nvfp4, Framework::Nemo).unwrap();
    let fp4 = predict(&fp4, &Derated::new(AnalyticBackend::new(s), Efficiency::CALIBRATED)).unwrap();
    assert!(fp4.iteration_time_s < b_delayed.iteration_time_s);
}

fn tensorwise_on(system: &str) -> crate::llm::TrainingPrediction {
    fp8_run(system, serde_json::json!({"fp8_recipe": "tensorwise"})).unwrap()
}

#[test]
fn fp8_param_gather_moves_the_layers_in_fp8_and_the_embedding_and_head_in_bf16() {
    // The distributed optimizer's all-gather of the updated parameters: P · 2 B in bf16; with fp8_param_gather
    // (delayed scaling: no scales) the layers' L parameters at 1 B and the U outside them (embedding, final norm,
    // LM head; Transformer Engine does not quantize them) at 2 B: (L + 2U) / 2P = (P + U) / 2P.
    // Llama 3.1 8B at tp 2 on one GPU (sizing.rs's count, biases included as S1 counts them): per layer
    // 4·4096 + 218,146,816 / 2 = 109,089,792, ×32 = 3,490,873,344; vocabulary 128,256 (a multiple of 128·2), the
    // embedding 128,256·4096/2 = 262,668,288, the head the same + 2·4096: U = 525,344,768, P = 4,016,218,112;
    // (P + U) / 2P = 4,541,562,880 / 8,032,436,224 = 0.565403. At tp 1 (torchtitan below): per layer
    // 218,163,200, U = 1,050,681,344, P = 8,031,903,744: 0.565407.
    let s = preset("dgx-h100");
    let p = |on: bool| {
        serde_json::json!({"tp": 2, "dp": 4, "sequence_parallel": true, "micro_batch": 1, "grad_accum": 4,
            "distributed_optimizer": true, "fp8_param_gather": on})
    };
    let gather = |on: bool| {
        let cfg = config(&s, &llama8b(), p(on), Precision::Fp8, Framework::Megatron).unwrap();
        let d = decompose(&cfg, &s);
        match d.stages[0].tail.param_gather.as_ref().unwrap().work {
            Work::Collective { bytes, .. } => bytes,
            _ => panic!(),
        }
    };
    assert!((gather(true) / gather(false) - 0.565403).abs() < 1e-6, "{}", gather(true) / gather(false));
    let on = fp8_run("dgx-h100", serde_json::json!({"fp8_param_gather": true})).unwrap();
    let off = fp8_run("dgx-h100", serde_json::json!({})).unwrap();
    assert!(on.iteration_time_s < off.iteration_time_s);
    // MXFP8 gathers one E8M0 scale per 32 weights with them: 1 + 1/32 B.
    assert_eq!(Fp8Recipe::Mxfp8.param_bytes(), 1.03125);
    // torchtitan's FSDP2 gathers per block before each pass (ZeRO-3): the same split (torchao converts the
    // Linear layers only, `convert_to_float8_training`; the embedding and the output stay bf16).
    let titan = |on: bool| {
        let p = serde_json::json!({"dp": 8, "micro_batch": 1, "grad_accum": 1, "zero_stage": 3,
            "fp8_param_gather": on});
        let cfg = config(&s, &llama8b(), p, Precision::Fp8, Framework::Torchtitan).unwrap();
        let d = decompose(&cfg, &s);
        match d.stages[0].chunks[0].zero.as_ref().unwrap().all_gathers.as_ref().unwrap()[0].work {
            Work::Collective { bytes, .. } => bytes,
            _ => panic!(),
        }
    };
    assert!((titan(true) / titan(false) - 0.565407).abs() < 1e-6, "{}", titan(true) / titan(false));
}

#[test]
fn refusals_name_the_field() {
    let h100 = preset("dgx-h100");
    let m = llama8b();
    let err = |p: serde_json::Value, prec: Precision, fw: Framework| {
        config(&h100, &m, p, prec, fw).map(|_| ()).unwrap_err().field
    };
    assert_eq!(
        err(serde_json::json!({"fp8_recipe": "tensorwise"}), Precision::Bf16, Framework::Megatron),
        "parallelism.fp8_recipe"
    );
    assert_eq!(
        err(
            serde_json::json!({"fp8_param_gather": true, "distributed_optimizer": true}),
            Precision::Bf16,
            Framework::Megatron
        ),
        "parallelism.fp8_param_gather"
    );
    // Nothing to gather: no distributed optimizer, no ZeRO-3.
    assert_eq!(
        err(serde_json::json!({"fp8_param_gather": true}), Precision::Fp8, Framework::Megatron),
        "parallelism.fp8_param_gather"
    );
    assert_eq!(
        err(serde_json::json!({"fp8_param_gather": true, "zero_stage": 3}), Precision::Fp8, Framework::Deepspeed),
        "parallelism.fp8_param_gather"
    );
    assert_eq!(err(serde_json::json!({}), Precision::Fp8Block, Framework::Megatron), "precision");
    assert_eq!(
        err(serde_json::json!({"cuda_graphs": "per_layer"}), Precision::Bf16, Framework::Torchtitan),
        "parallelism.cuda_graphs"
    );
    // What the GPU lacks: MXFP8 before Blackwell, fp4 before Blackwell, fp8 on Ampere.
    let gpu_err = |system: &str, p: serde_json::Value, prec: Precision| {
        let s = preset(system);
        let cfg = config(&s, &m, p, prec, Framework::Megatron).unwrap();
        check_gpu(&cfg, &s.gpu).unwrap_err()
    };
    let e = gpu_err("dgx-h100", serde_json::json!({"fp8_recipe": "mxfp8"}), Precision::Fp8);
    assert_eq!(e.field, "parallelism.fp8_recipe");
    assert!(e.message.contains("9.0"), "{}", e.message);
    assert_eq!(gpu_err("dgx-h100", serde_json::json!({}), Precision::Nvfp4).field, "precision");
    assert_eq!(
        gpu_err("dgx-a100-80g", serde_json::json!({"fp8_recipe": "blockwise"}), Precision::Fp8).field,
        "precision"
    );
    let b200 = preset("dgx-b200");
    let ok = config(&b200, &m, serde_json::json!({"fp8_recipe": "mxfp8"}), Precision::Fp8, Framework::Nemo).unwrap();
    assert!(check_gpu(&ok, &b200.gpu).is_ok());
    // `fp4` is read as nvfp4.
    assert_eq!(serde_json::from_value::<Precision>(serde_json::json!("fp4")).unwrap(), Precision::Nvfp4);
}

/// Every compute operator 10 µs forward and 20 µs backward on the GPU and 100 µs of host time; one kernel's host
/// time (a graph launch) also 100 µs ([`Efficiency::host_us`]).
struct HostBound(crate::llm::predict_tests::FixedBackend);

impl CostBackend for HostBound {
    fn system(&self) -> &System {
        self.0.system()
    }
    fn compute(&self, op: &OpShape, dtype: Precision) -> Result<Timed, crate::cost::roofline::UnsupportedPrecision> {
        Ok(Timed { host_us: 100.0, ..self.0.compute(op, dtype)? })
    }
    fn collective(&self, c: Collective, bytes: f64, group: crate::comm::Group, active: u32) -> Timed {
        self.0.collective(c, bytes, group, active)
    }
    fn efficiency(&self) -> Option<Efficiency> {
        Some(Efficiency { host_us: 100.0, ..Efficiency::ROOFLINE })
    }
}

#[test]
fn cuda_graphs_remove_the_host_time_of_a_host_bound_toy() {
    // The eq. 7 configuration (predict_tests: 4 layers over pp 2 as [3, 1], tp 2, 3 micro-batches) with every
    // compute kernel taking 100 µs of host time. Per layer and pass: 10 kernels → 1,000 µs of host against 110 µs
    // (forward: 10·10 + 2 tp all-reduces · 5) and 210 µs (backward: 10·20 + 2·5) of GPU time; the embedding 100 µs
    // of host against 15 / 20; the head's 3 kernels 300 µs against 30 / 60.
    // Eager (predict_tests' host-bound test): 24,874 µs.
    // per_layer: a layer pass pays one launch, 100 µs < its GPU time, so runs at the GPU's pace; the embedding and
    // head stay host-bound. Stage 0: F = 3·110 + 100 + send 3 = 433, B = 3·210 + 100 = 730 (1,163);
    // stage 1: F = 110 + 300 = 410, B = 210 + 300 + send 3 = 513 (923). (3 − 1 + 2)·1,163 = 4,652
    // + DP all-reduce 5 + update 57 = 4,714 µs.
    // full_iteration: no host time in the passes at all — the GPU-bound answer of the eq. 7 test, 4,054 µs.
    let run = |graphs: &str| {
        let m: ModelSpec = serde_json::from_value(serde_json::json!({"layers": 4, "hidden": 64, "heads": 16,
            "seq_len": 32, "vocab": 1000, "rotary": false}))
        .unwrap();
        let p = serde_json::json!({"tp": 2, "pp": 2, "dp": 2, "micro_batch": 1, "grad_accum": 3, "zero_stage": 1,
            "cuda_graphs": graphs});
        let par: ParallelSpec = serde_json::from_value(p).unwrap();
        let cfg = validate(&m, &par, Precision::Fp16, 8).unwrap();
        let b = HostBound(crate::llm::predict_tests::FixedBackend(crate::llm::predict_tests::small_system()));
        let us = |s: f64| (s * 1e6 * 1e6).round() / 1e6;
        us(predict(&cfg, &b).unwrap().iteration_time_s)
    };
    assert_eq!(run("none"), 24874.0);
    assert_eq!(run("per_layer"), 4714.0);
    assert_eq!(run("full_iteration"), 4054.0);
}

#[test]
fn cuda_graphs_change_nothing_where_the_gpu_is_the_bottleneck() {
    // Llama 3.1 8B at 8,192 tokens per micro-batch: every layer pass takes milliseconds on the GPU against
    // ~30 kernels × 69.3 µs ≈ 2 ms of host time — GPU-bound, so per-layer graphs leave the time as it is.
    let none = fp8_run("dgx-h100", serde_json::json!({})).unwrap();
    let graphs = fp8_run("dgx-h100", serde_json::json!({"cuda_graphs": "per_layer"})).unwrap();
    assert_eq!(none.iteration_time_s, graphs.iteration_time_s);
    // A small model with short sequences is host-bound: graphs make it faster.
    let small = |graphs: &str| {
        let s = preset("dgx-h100");
        let m: ModelSpec = serde_json::from_value(serde_json::json!({"layers": 12, "hidden": 768, "heads": 12,
            "seq_len": 512, "vocab": 50257, "attention": "flash"}))
        .unwrap();
        let p = serde_json::json!({"dp": 8, "micro_batch": 1, "grad_accum": 4, "cuda_graphs": graphs});
        let cfg = config(&s, &m, p, Precision::Bf16, Framework::Megatron).unwrap();
        predict(&cfg, &Derated::new(AnalyticBackend::new(s), Efficiency::CALIBRATED)).unwrap().iteration_time_s
    };
    let (eager, per_layer, full) = (small("none"), small("per_layer"), small("full_iteration"));
    assert!(per_layer < eager && full < per_layer, "{eager} {per_layer} {full}");
}

/// The sequence-parallel all-gather and reduce-scatter bytes of one Llama 3.1 8B layer (tp 2 with sequence
/// parallelism, micro-batch 1, 8,192 tokens) under `precision` and `extra` options on one DGX B200 node:
/// ((forward all-gather, backward all-gather), (forward reduce-scatter, backward reduce-scatter)), bytes summed
/// over the layer's calls.
fn sp_bytes(precision: Precision, extra: serde_json::Value, fw: Framework) -> ((f64, f64), (f64, f64)) {
    let s = preset("dgx-b200");
    let mut p = serde_json::json!({"tp": 2, "dp": 4, "sequence_parallel": true, "micro_batch": 1,
        "grad_accum": 4, "distributed_optimizer": true});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    let cfg = config(&s, &llama8b(), p, precision, fw).unwrap();
    let layout = crate::llm::layout::Layout::new(&cfg, s.gpus_per_node);
    let prec = crate::llm::operators::OpPrecisions { gemm: cfg.gemm_precision(), other: Precision::Bf16 };
    let ops = crate::llm::operators::layer_ops(&cfg, &layout, prec);
    let sum = |name: OpName, phase: Phase| -> f64 {
        ops.iter()
            .filter(|o| o.name == name && o.phase == phase)
            .map(|o| match o.work {
                Work::Collective { bytes, .. } => bytes * o.calls as f64,
                _ => 0.0,
            })
            .sum()
    };
    let ag = (sum(OpName::MpAllGather, Phase::Fwd), sum(OpName::MpAllGather, Phase::Bwd));
    let rs = (sum(OpName::MpReduceScatter, Phase::Fwd), sum(OpName::MpReduceScatter, Phase::Bwd));
    (ag, rs)
}

#[test]
fn sequence_parallel_all_gathers_move_the_quantized_tensor() {
    // One all-gather site gathers the b·l·d = 1 · 8,192 · 4,096 = 33,554,432-element activation; a layer has two
    // sites per pass (before QKV and the MLP forward; the projection's and the down-projection's output
    // gradients backward).
    let none = serde_json::json!({});
    // bf16: 2 sites × 33,554,432 × 2 B = 134,217,728 B per pass, gathers and reduce-scatters alike.
    let (ag, rs) = sp_bytes(Precision::Bf16, none.clone(), Framework::Megatron);
    assert_eq!(ag, (134_217_728.0, 134_217_728.0));
    assert_eq!(rs, (134_217_728.0, 134_217_728.0));
    // Per-tensor fp8 (delayed, current scaling): 1 B per element both ways (backward gathers the rowwise copy
    // and transposes it locally): 2 × 33,554,432 = 67,108,864 B. The reduce-scatters stay bf16.
    for recipe in ["delayed", "tensorwise"] {
        let (ag, rs) = sp_bytes(Precision::Fp8, serde_json::json!({"fp8_recipe": recipe}), Framework::Megatron);
        assert_eq!(ag, (67_108_864.0, 67_108_864.0), "{recipe}");
        assert_eq!(rs, (134_217_728.0, 134_217_728.0), "{recipe}");
    }
    // MXFP8: 1 + 1/32 B per element and copy. Forward one rowwise copy: 2 × 33,554,432 × 33/32 = 69,206,016 B;
    // backward rowwise + columnwise: 138,412,032 B — a little more than bf16's 134,217,728.
    let mx = serde_json::json!({"fp8_recipe": "mxfp8"});
    assert_eq!(sp_bytes(Precision::Fp8, mx, Framework::Megatron).0, (69_206_016.0, 138_412_032.0));
    // Blockwise: 1 + 4/128 = 1 + 1/32 B per element and copy, the same sizes as MXFP8.
    let block = serde_json::json!({"fp8_recipe": "blockwise"});
    assert_eq!(sp_bytes(Precision::Fp8, block, Framework::Megatron).0, (69_206_016.0, 138_412_032.0));
    // NVFP4: 0.5 + 1/16 = 9/16 B per element and copy: forward 2 × 33,554,432 × 9/16 = 37,748,736 B, backward
    // two copies 75,497,472 B.
    assert_eq!(sp_bytes(Precision::Nvfp4, none, Framework::Megatron).0, (37_748_736.0, 75_497_472.0));
}

#[test]
fn userbuffers_gather_one_quantized_copy_and_other_frameworks_stay_16_bit() {
    // tp_comm_overlap: the backward gather moves the rowwise copy only, so NVFP4's backward is one copy:
    // 2 sites × 33,554,432 × 9/16 = 37,748,736 B (two overlapped all-gathers of 18,874,368 B each).
    let ub = serde_json::json!({"tp_comm_overlap": true});
    assert_eq!(sp_bytes(Precision::Nvfp4, ub, Framework::Megatron).0, (37_748_736.0, 37_748_736.0));
    let mx_ub = serde_json::json!({"tp_comm_overlap": true, "fp8_recipe": "mxfp8"});
    assert_eq!(sp_bytes(Precision::Fp8, mx_ub, Framework::Megatron).0, (69_206_016.0, 69_206_016.0));
    // NeMo runs Megatron-Core with Transformer Engine: the same 1 B per element for delayed scaling.
    assert_eq!(sp_bytes(Precision::Fp8, serde_json::json!({}), Framework::Nemo).0, (67_108_864.0, 67_108_864.0));
    // torchtitan's sequence-parallel gathers are modelled 16-bit: 2 × 33,554,432 × 2 B = 134,217,728 B.
    let fsdp = serde_json::json!({"zero_stage": 3, "distributed_optimizer": false});
    assert_eq!(sp_bytes(Precision::Fp8, fsdp, Framework::Torchtitan).0, (134_217_728.0, 134_217_728.0));
}

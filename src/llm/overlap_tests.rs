//! The communication overlaps of Megatron-Core and Transformer Engine (`overlap_grad_reduce`,
//! `overlap_param_gather`, `align_param_gather`, `tp_comm_overlap`, `overlap_p2p_comm`) and their contention:
//! one step worked out by hand, the charge of a chunked overlap by hand, the direction of each option's effect
//! through the whole predictor, and their timeline.

use super::operators::{OpName, Overlap};
use super::pipeline::{simulate, step_time, PipelineSpec, StageTail};
use super::predict::{predict, predict_traced};
use super::predict_tests::par;
use super::timing::overlap_charge;
use super::trace::{Lane, SpanKind};
use super::validate::validate;
use crate::cost::{AnalyticBackend, Derated, Efficiency};
use crate::hw::{presets, Precision, System};

#[test]
fn an_overlapped_step_by_hand() {
    // pp 2, v 1, m 2; every chunk F = 1, B = 2. Overlapped sends of 0.5 (stage 0's forward output, stage 1's
    // backward output) reach the receiver 0.5 after the pass; stage 0 prefetches a parameter all-gather of 2 in 2
    // buckets, stage 1 one of 1 in one bucket, both dispatched at 0 (aligned); contention κ = 0.1.
    // Order (1F1B): stage 0 F0 F1 B0 B1, stage 1 F0 B0 F1 B1.
    // s0 F0: first bucket in at 1 → starts 1; cannot end before the last bucket (2) + 1/2 → max(2, 2.5) = 2.5;
    //        the gather runs beside it from 1 to 2 → + 0.1·1 → [1, 2.6].
    // s0 F1 [2.6, 3.6]. s1 F0: input at 2.6 + 0.5 = 3.1, its gather done at 1 (hidden by the fill) → [3.1, 4.1].
    // s1 B0 [4.1, 6.1]; s1 F1: input at 3.6 + 0.5, stage free at 6.1 → [6.1, 7.1]; s1 B1 [7.1, 9.1].
    // s0 B0: gradient at 6.1 + 0.5 = 6.6 → [6.6, 8.6]; s0 B1: gradient at 9.1 + 0.5 → [9.6, 11.6].
    let (f, b) = ([1.0, 1.0], [2.0, 2.0]);
    let (lag_f, lag_b) = ([0.5, 0.0], [0.0, 0.5]);
    let tails = [
        StageTail {
            grad_sync_s: 1.0,
            overlap_window_s: 2.0,
            buckets: 2,
            update_s: 0.3,
            param_gather_s: 2.0,
            contention: 0.1,
            ..StageTail::default()
        },
        StageTail {
            grad_sync_s: 1.0,
            overlap_window_s: 2.0,
            buckets: 1,
            update_s: 0.3,
            param_gather_s: 1.0,
            contention: 0.1,
            ..StageTail::default()
        },
    ];
    let spec = PipelineSpec {
        lag_fwd_s: &lag_f,
        lag_bwd_s: &lag_b,
        tails: &tails,
        align_gather: true,
        ..PipelineSpec::new(2, 1, 2, &f, &b)
    };
    let sim = simulate(&spec).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(close(sim.makespan_s, 11.6) && close(sim.stage_end_s[1], 9.1), "{sim:?}");
    // Overlapped gradient reduction: stage 0 exposes max(1 − 2, 1/2) = 0.5 plus 0.1 × the hidden 0.5 → 12.15;
    // stage 1 (one bucket) all of it after its end → 10.1. Exposed 0.55, then the optimizer 0.3 → 12.45.
    let t = step_time(&sim, &tails, true);
    assert!(close(t.exposed_grad_sync_s, 0.55) && close(t.iteration_s(), 12.45), "{t:?}");
    // Without the overlaps (sends in the sender's pass: stage 0 F = 1.5, stage 1 B = 2.5; gathers after the
    // optimizer; reduction after the flush): s0 F0 [0, 1.5] F1 [1.5, 3]; s1 F0 [1.5, 2.5] B0 [2.5, 5] F1 [5, 6]
    // B1 [6, 8.5]; s0 B0 [5, 7] B1 [8.5, 10.5] → 10.5 + stage 0's reduction 1 (stage 1's 8.5 + 1 is earlier)
    // + optimizer 0.3 + the larger gather 2 = 13.8.
    let (f0, b0) = ([1.5, 1.0], [2.0, 2.5]);
    let plain: Vec<StageTail> = tails
        .iter()
        .map(|t| StageTail { update_s: t.update_s + t.param_gather_s, param_gather_s: 0.0, ..*t })
        .collect();
    let sim0 = simulate(&PipelineSpec::new(2, 1, 2, &f0, &b0)).unwrap();
    assert!(close(sim0.makespan_s, 10.5));
    assert!(close(step_time(&sim0, &plain, false).iteration_s(), 13.8));
}

#[test]
fn a_chunked_overlap_exposes_one_chunk_or_what_outlasts_the_gemm() {
    // Transformer Engine's split in n = 4: comm 4 beside a GEMM of 6 → the first chunk, 1; κ 0.1 of the hidden 3.
    let te = Overlap { with: OpName::Linear1, chunks: 4, wgrad_only: false };
    assert_eq!(te.exposed(4.0, 6.0), 1.0);
    assert!((overlap_charge(4.0, te.exposed(4.0, 6.0), 0.1) - 1.3).abs() < 1e-12);
    // Comm 8 beside a GEMM of 4: the pipeline's excess 8 − 4·3/4 = 5 (more than a chunk, 2).
    assert_eq!(te.exposed(8.0, 4.0), 5.0);
    // Unsplit (the context-parallel ring): max(0, comm − compute).
    let ring = Overlap { with: OpName::FlashAttention, chunks: 1, wgrad_only: false };
    assert_eq!((ring.exposed(4.0, 6.0), ring.exposed(8.0, 6.0)), (0.0, 2.0));
}

#[test]
fn a_weight_gradient_overlap_hides_behind_half_the_backward_gemm() {
    // A backward GEMM of 6 is dgrad 3 + wgrad 3; the async reduce-scatter runs beside the wgrad only:
    // comm 2 → max(0, 2 − 3) = 0; comm 4 → 4 − 3 = 1 (the whole-GEMM overlap would hide it all: 0).
    let rs = Overlap { with: OpName::Linear3, chunks: 1, wgrad_only: true };
    assert_eq!((rs.exposed(2.0, 6.0), rs.exposed(4.0, 6.0)), (0.0, 1.0));
    // Charged with κ 0.1: 1 exposed + 0.1 × the hidden 3 = 1.3.
    assert!((overlap_charge(4.0, rs.exposed(4.0, 6.0), 0.1) - 1.3).abs() < 1e-12);
}

fn dgx_h100() -> System {
    presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap()
}

fn llama70b() -> super::ModelSpec {
    serde_json::from_value(serde_json::json!({"name": "Llama-3 70B", "layers": 80, "hidden": 8192, "heads": 64,
        "kv_heads": 8, "ffn_hidden": 28672, "seq_len": 8192, "vocab": 128256, "norm": "rmsnorm",
        "activation": "swiglu", "attention": "flash"}))
    .unwrap()
}

/// The predicted iteration of Llama-3 70B on the dgx-h100 preset with NeMo's base configuration (tp 4, pp 4,
/// virtual stages 5, cp 2, dp 4 on 128 GPUs, distributed optimizer, SP) plus `extra`, with contention κ.
fn iteration(extra: serde_json::Value, kappa: f64) -> f64 {
    let mut p = serde_json::json!({"tp": 4, "pp": 4, "dp": 4, "context_parallel": 2, "virtual_stages": 5,
        "micro_batch": 1, "global_batch": 128, "sequence_parallel": true, "distributed_optimizer": true,
        "zero_stage": 1});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    let s = dgx_h100();
    let cfg = validate(&llama70b(), &par(p), Precision::Bf16, s.total_gpus()).unwrap();
    let eff = Efficiency { overlap_slowdown: kappa, ..Efficiency::CALIBRATED };
    predict(&cfg, &Derated::new(AnalyticBackend::new(s), eff)).unwrap().iteration_time_s
}

#[test]
fn a_prefetched_parameter_gather_leaves_the_optimizer_step_alone() {
    // With `overlap_param_gather` the all-gather moves out of the update into the next forward; the stage's
    // optimizer time (fused Adam) is the same either way and positive (it once came out as the update minus the
    // gather, negative).
    let stages = |extra: serde_json::Value| {
        let mut p = serde_json::json!({"tp": 4, "pp": 4, "dp": 4, "context_parallel": 2, "virtual_stages": 5,
            "micro_batch": 1, "global_batch": 128, "sequence_parallel": true, "distributed_optimizer": true,
            "zero_stage": 1, "overlap_grad_reduce": true});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        let cfg = validate(&llama70b(), &par(p), Precision::Bf16, dgx_h100().total_gpus()).unwrap();
        predict(&cfg, &AnalyticBackend::new(dgx_h100())).unwrap().stages
    };
    let plain = stages(serde_json::json!({}));
    let prefetched = stages(serde_json::json!({"overlap_param_gather": true}));
    for (a, b) in plain.iter().zip(&prefetched) {
        assert!(a.param_allgather_s > 0.0 && (a.param_allgather_s - b.param_allgather_s).abs() < 1e-12);
        assert!(b.optimizer_s > 0.0 && (a.optimizer_s - b.optimizer_s).abs() < 1e-12, "{a:?} vs {b:?}");
    }
}

#[test]
fn every_overlap_shortens_the_step_and_contention_lengthens_it() {
    let k = Efficiency::CALIBRATED.overlap_slowdown;
    assert!(k > 0.0 && k <= 0.2, "κ {k} outside its plausible range");
    let base = iteration(serde_json::json!({}), k);
    let grad = serde_json::json!({"overlap_grad_reduce": true});
    let with_grad = iteration(grad.clone(), k);
    assert!(with_grad < base, "overlap_grad_reduce {with_grad} vs {base}");
    let gather = serde_json::json!({"overlap_grad_reduce": true, "overlap_param_gather": true,
        "align_param_gather": true});
    let with_gather = iteration(gather.clone(), k);
    assert!(with_gather < with_grad, "overlap_param_gather {with_gather} vs {with_grad}");
    // Without alignment the later stages dispatch their gathers at their own first forward, in one bucket.
    let unaligned = iteration(serde_json::json!({"overlap_grad_reduce": true, "overlap_param_gather": true}), k);
    assert!(with_gather < unaligned, "align_param_gather {with_gather} vs {unaligned}");
    for (option, what) in [
        (serde_json::json!({"tp_comm_overlap": true}), "tp_comm_overlap"),
        (serde_json::json!({"overlap_p2p_comm": true}), "overlap_p2p_comm"),
    ] {
        let on = iteration(option.clone(), k);
        assert!(on < base, "{what} {on} vs {base}");
        // Free overlap is faster still; more contention is slower.
        assert!(iteration(option.clone(), 0.0) < on && on < iteration(option, 0.2), "{what}");
    }
    // All of NeMo's options together beat each alone.
    let all = serde_json::json!({"overlap_grad_reduce": true, "overlap_param_gather": true,
        "align_param_gather": true, "tp_comm_overlap": true, "overlap_p2p_comm": true});
    assert!(iteration(all, k) < with_gather);
    // The bucket size matters for the first stage's exposed last bucket and first gather: one huge bucket
    // exposes all of it.
    let huge = serde_json::json!({"overlap_grad_reduce": true, "overlap_param_gather": true,
        "align_param_gather": true, "bucket_size": 100_000_000_000u64});
    assert!(iteration(huge, k) > with_gather);
}

#[test]
fn tp_comm_overlap_needs_sequence_parallelism_and_overlap_options_name_their_field() {
    let off = iteration(serde_json::json!({"sequence_parallel": false}), 0.1);
    let on = iteration(serde_json::json!({"sequence_parallel": false, "tp_comm_overlap": true}), 0.1);
    assert_eq!(on, off);
    let s = dgx_h100();
    let err = |p: serde_json::Value| validate(&llama70b(), &par(p), Precision::Bf16, s.total_gpus()).unwrap_err().field;
    assert_eq!(err(serde_json::json!({"tp": 8, "overlap_param_gather": true})), "parallelism.overlap_param_gather");
    assert_eq!(
        err(serde_json::json!({"tp": 8, "distributed_optimizer": true, "overlap_param_gather": true})),
        "parallelism.overlap_param_gather"
    );
    assert_eq!(err(serde_json::json!({"tp": 8, "pp": 4, "overlap_p2p_comm": true})), "parallelism.overlap_p2p_comm");
    assert_eq!(err(serde_json::json!({"tp": 8, "bucket_size": 0})), "parallelism.bucket_size");
}

#[test]
fn the_timeline_shows_overlapped_collectives_beside_the_computation() {
    let s = dgx_h100();
    let p = serde_json::json!({"tp": 4, "pp": 4, "dp": 4, "context_parallel": 2, "virtual_stages": 5,
        "micro_batch": 1, "global_batch": 128, "sequence_parallel": true, "distributed_optimizer": true,
        "overlap_grad_reduce": true, "overlap_param_gather": true, "align_param_gather": true,
        "tp_comm_overlap": true, "overlap_p2p_comm": true});
    let cfg = validate(&llama70b(), &par(p), Precision::Bf16, s.total_gpus()).unwrap();
    let (pred, t) = predict_traced(&cfg, &Derated::new(AnalyticBackend::new(s), Efficiency::CALIBRATED)).unwrap();
    let (start, end) = t.extent_s();
    assert!(start == 0.0 && ((end - pred.iteration_time_s) / pred.iteration_time_s).abs() < 1e-9);
    let overlaps = |a: &super::trace::Span, b: &super::trace::Span| a.start_s < b.end_s && b.start_s < a.end_s;
    for st in &t.stages {
        let compute: Vec<_> = st.spans.iter().filter(|s| s.lane == Lane::Compute).collect();
        // Every pass's tensor-parallel collectives start inside its computation (TE's userbuffers overlap).
        for tp in st.spans.iter().filter(|s| s.kind == SpanKind::TpCollective) {
            let pass = compute.iter().find(|c| {
                c.chunk == tp.chunk && c.micro == tp.micro && c.kind != SpanKind::Recompute && overlaps(c, tp)
            });
            assert!(pass.is_some(), "stage {}: {tp:?} overlaps no computation", st.stage);
        }
        // Overlapped sends run beside a later pass of the same stage.
        let sends: Vec<_> = st.spans.iter().filter(|s| s.kind == SpanKind::Send).collect();
        assert!(!sends.is_empty());
        assert!(sends.iter().any(|s| compute.iter().any(|c| overlaps(c, s))), "stage {}", st.stage);
        // The parameter all-gather is prefetched before and beside the first forward, on the dp lane; the
        // optimizer lane holds only the optimizer step.
        let gather = st.spans.iter().find(|s| s.kind == SpanKind::ParamGather).unwrap();
        assert_eq!((gather.lane, gather.start_s), (Lane::DpCollectives, 0.0));
        let first =
            compute.iter().filter(|c| c.kind == SpanKind::Forward).min_by(|a, b| a.start_s.total_cmp(&b.start_s));
        assert!(gather.end_s > first.unwrap().start_s || st.stage > 0);
        assert!(st.spans.iter().filter(|s| s.lane == Lane::Optimizer).all(|s| s.kind == SpanKind::Optimizer));
    }
}

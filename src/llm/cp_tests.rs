//! Context parallelism per `cp_comm_type`: bytes and calls worked out by hand, the 422s, the framework default,
//! a ring step's exposed communication through the timer, and each kind's direction of effect.

use super::*;
use crate::cost::{AnalyticBackend, Derated, Efficiency};
use crate::hw::{presets, Precision, System};
use crate::llm::framework::Framework;
use crate::llm::operators::{layer_ops, OpPrecisions, Work};
use crate::llm::predict::predict;
use crate::llm::timing::{overlap_charge, time_ops, Timer};
use crate::llm::{validate, with_framework};

const PREC: OpPrecisions = OpPrecisions { gemm: Precision::Bf16, other: Precision::Bf16 };

/// Llama-3 8B's attention (32 heads, 8 key/value heads of 128 dims) on `layers` layers, `seq` tokens.
fn model(layers: u32, seq: u32) -> serde_json::Value {
    serde_json::json!({"layers": layers, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
        "seq_len": seq, "vocab": 128256, "norm": "rmsnorm", "activation": "swiglu", "attention": "flash"})
}

fn cfg(seq: u32, par: serde_json::Value, fw: Framework) -> Result<TrainingConfig, ConfigError> {
    let m = serde_json::from_value(model(4, seq)).unwrap();
    with_framework(validate(&m, &serde_json::from_value(par).unwrap(), Precision::Bf16, 1 << 20)?, fw)
}

fn cp_ops_of(c: &TrainingConfig) -> Vec<StageOp> {
    layer_ops(c, &Layout::new(c, 8), PREC)
        .into_iter()
        .filter(|o| {
            matches!(o.name, OpName::CpP2p | OpName::CpAllGather | OpName::CpReduceScatter | OpName::CpAllToAll)
        })
        .collect()
}

/// (name, phase, calls, bytes, overlapped) of every context-parallel op.
fn summary(c: &TrainingConfig) -> Vec<(OpName, Phase, u32, f64, bool)> {
    cp_ops_of(c)
        .iter()
        .map(|o| {
            let bytes = match o.work {
                Work::Collective { bytes, .. } => bytes,
                _ => 0.0,
            };
            (o.name, o.phase, o.calls, bytes, o.overlaps.is_some())
        })
        .collect()
}

fn flash_dims(c: &TrainingConfig) -> ([u64; 5], u32) {
    let ops = layer_ops(c, &Layout::new(c, 8), PREC);
    let fa = ops.iter().find(|o| o.name == OpName::FlashAttention && o.phase == Phase::Fwd).unwrap();
    match fa.work {
        Work::Compute { shape, .. } => (shape.dims, fa.calls),
        _ => panic!(),
    }
}

#[test]
fn p2p_ring_sends_one_chunk_per_step_hidden_behind_the_step() {
    // cp 2, 8192 tokens: 4096 per rank. K and V of one chunk: 2 · 4096 · 8 heads · 128 · 2 bytes = 16 MiB; one
    // send forward, one of 32 MiB (with dK, dV) backward, both hidden behind a FlashAttention step.
    let c = cfg(8192, serde_json::json!({"context_parallel": 2}), Framework::Megatron).unwrap();
    assert_eq!(c.cp_comm.comm_type, CpCommType::P2p);
    assert_eq!(
        summary(&c),
        [(OpName::CpP2p, Phase::Fwd, 1, 16_777_216.0, true), (OpName::CpP2p, Phase::Bwd, 1, 33_554_432.0, true)]
    );
    // Two steps of 4096 queries on all 32 heads.
    assert_eq!(flash_dims(&c), ([1, 4096, 32, 128, 8], 2));
}

#[test]
fn all_gather_gathers_the_whole_sequence_exposed_under_transformer_engine() {
    // Megatron / TE: the whole sequence's K and V gathered = cp · 16 MiB = 32 MiB forward; backward the same
    // gather and a 32 MiB reduce-scatter of dK, dV; nothing overlapped ("KV all-gather ... is exposed").
    let c = cfg(8192, serde_json::json!({"context_parallel": 2, "cp_comm_type": "all_gather"}), Framework::Megatron)
        .unwrap();
    assert_eq!(
        summary(&c),
        [
            (OpName::CpAllGather, Phase::Fwd, 1, 33_554_432.0, false),
            (OpName::CpAllGather, Phase::Bwd, 1, 33_554_432.0, false),
            (OpName::CpReduceScatter, Phase::Bwd, 1, 33_554_432.0, false),
        ]
    );
    // Megatron-LM's help text spells it `allgather`.
    let alias = cfg(8192, serde_json::json!({"context_parallel": 2, "cp_comm_type": "allgather"}), Framework::Megatron)
        .unwrap();
    assert_eq!(alias.cp_comm.comm_type, CpCommType::AllGather);
}

#[test]
fn torchtitan_defaults_to_all_gather_hidden_behind_the_first_step() {
    // cp 4, 8192 tokens: 2048 per rank, one chunk's K, V = 2 · 2048 · 8 · 128 · 2 = 8 MiB; gathered 32 MiB.
    // Forward: the gather behind the first step. Backward: the gather again behind the first step, dK/dV sent
    // around the ring (8 MiB) — 3 sends hidden behind steps, the last one exposed.
    let c = cfg(8192, serde_json::json!({"context_parallel": 4}), Framework::Torchtitan).unwrap();
    assert_eq!((c.cp_comm.comm_type, c.cp_comm.pytorch), (CpCommType::AllGather, true));
    assert_eq!(
        summary(&c),
        [
            (OpName::CpAllGather, Phase::Fwd, 1, 33_554_432.0, true),
            (OpName::CpAllGather, Phase::Bwd, 1, 33_554_432.0, true),
            (OpName::CpP2p, Phase::Bwd, 3, 8_388_608.0, true),
            (OpName::CpP2p, Phase::Bwd, 1, 8_388_608.0, false),
        ]
    );
    // Ulysses is Transformer Engine's, not PyTorch's.
    let e = cfg(8192, serde_json::json!({"context_parallel": 4, "cp_comm_type": "a2a"}), Framework::Torchtitan)
        .unwrap_err();
    assert_eq!(e.field, "parallelism.cp_comm_type");
}

#[test]
fn a2a_moves_qkv_and_o_and_runs_the_whole_sequence_on_heads_over_cp() {
    // cp 2, 4096 tokens per rank. Forward: Q, K, V = 4096 · (32 + 2·8) · 128 = 25,165,824 elements = 50,331,648
    // bytes; O = 4096 · 32 · 128 = 16,777,216 elements = 33,554,432 bytes. Backward: dQ/dK/dV and dO the same.
    let c = cfg(8192, serde_json::json!({"context_parallel": 2, "cp_comm_type": "a2a"}), Framework::Megatron).unwrap();
    let (q, o) = (50_331_648.0, 33_554_432.0);
    assert_eq!(
        summary(&c),
        [
            (OpName::CpAllToAll, Phase::Fwd, 1, q, false),
            (OpName::CpAllToAll, Phase::Fwd, 1, o, false),
            (OpName::CpAllToAll, Phase::Bwd, 1, q, false),
            (OpName::CpAllToAll, Phase::Bwd, 1, o, false),
        ]
    );
    // One call of the whole 8192-token sequence on 32/2 heads and 8/2 key/value heads.
    assert_eq!(flash_dims(&c), ([1, 8192, 16, 128, 4], 1));
}

#[test]
fn a2a_needs_heads_per_tp_rank_divisible_by_cp() {
    // 8 key/value heads at tp 1 do not split over cp 16; at tp 4, 2 per rank do not split over cp 4.
    for par in [
        serde_json::json!({"context_parallel": 16, "cp_comm_type": "a2a"}),
        serde_json::json!({"tp": 4, "context_parallel": 4, "cp_comm_type": "a2a"}),
    ] {
        let e = cfg(1 << 16, par, Framework::Megatron).unwrap_err();
        assert_eq!(e.field, "parallelism.cp_comm_type");
        assert!(e.message.contains("divisible"), "{}", e.message);
    }
}

#[test]
fn a2a_p2p_all_to_all_inside_the_ring_outside() {
    // cp 4 = a2a 2 × p2p 2, 8192 tokens (2048 per rank). All-to-alls over 2 ranks: Q, K, V = 2048 · 48 · 128 · 2
    // = 25,165,824 bytes, O = 2048 · 32 · 128 · 2 = 16,777,216. Ring of 2: steps of 4096 queries on 16 heads,
    // one send of K, V = 2 · 4096 · 4 · 128 · 2 = 8,388,608 bytes forward, twice that backward.
    let c = cfg(
        8192,
        serde_json::json!({"context_parallel": 4, "cp_comm_type": "a2a+p2p",
            "hierarchical_context_parallel_sizes": [2, 2]}),
        Framework::Nemo,
    )
    .unwrap();
    let s = summary(&c);
    assert_eq!(s.len(), 6);
    assert_eq!(s[0], (OpName::CpAllToAll, Phase::Fwd, 1, 25_165_824.0, false));
    assert_eq!(s[1], (OpName::CpAllToAll, Phase::Fwd, 1, 16_777_216.0, false));
    assert_eq!(s[4], (OpName::CpP2p, Phase::Fwd, 1, 8_388_608.0, true));
    assert_eq!(s[5], (OpName::CpP2p, Phase::Bwd, 1, 16_777_216.0, true));
    assert_eq!(flash_dims(&c), ([1, 4096, 16, 128, 4], 2));
    // Megatron-LM's assertions: the sizes are required and multiply to cp.
    let par = |v: serde_json::Value| cfg(8192, v, Framework::Megatron).unwrap_err().field;
    assert_eq!(par(serde_json::json!({"context_parallel": 4, "cp_comm_type": "a2a+p2p"})), "parallelism.cp_comm_type");
    assert_eq!(
        par(serde_json::json!({"context_parallel": 4, "cp_comm_type": "a2a+p2p",
            "hierarchical_context_parallel_sizes": [2, 4]})),
        "parallelism.hierarchical_context_parallel_sizes"
    );
    assert_eq!(
        par(serde_json::json!({"context_parallel": 4, "hierarchical_context_parallel_sizes": [2, 2]})),
        "parallelism.hierarchical_context_parallel_sizes"
    );
}

fn dgx_h100(nodes: u32) -> System {
    let mut p = presets().into_iter().find(|p| p.name == "dgx-h100").unwrap();
    p.nodes = nodes;
    p.resolve().unwrap()
}

#[test]
fn a_ring_steps_exposed_communication() {
    // Llama-2 7B-like attention at 1M tokens, tp 8, cp 32 (NeMo's largest H100 row): each rank holds 32,768
    // tokens; one ring step's K, V = 2 · 32,768 · (8 kv heads / tp 8 = 1) · 128 · 2 bytes = 16 MiB, sent across
    // nodes (tp 8 fills a node). The send's charge is the excess over ONE FlashAttention step of the same pass plus
    // the contention κ on the hidden part: charged = max(0, t_send − t_step) + κ·min(t_send, t_step).
    let c = cfg(1 << 20, serde_json::json!({"tp": 8, "context_parallel": 32}), Framework::Megatron).unwrap();
    let sys = dgx_h100(32);
    let backend = Derated::new(AnalyticBackend::new(sys.clone()), Efficiency::CALIBRATED);
    let mut timer = Timer::for_training(&backend, &c);
    let ops = layer_ops(&c, &Layout::new(&c, 8), PREC);
    let timed = time_ops(&ops, &mut timer).unwrap();
    let find = |n: OpName, p: Phase| ops.iter().position(|o| o.name == n && o.phase == p).unwrap();
    let (send, step) = (find(OpName::CpP2p, Phase::Fwd), find(OpName::FlashAttention, Phase::Fwd));
    assert_eq!(ops[send].calls, 31);
    match ops[send].work {
        Work::Collective { bytes, group, .. } => {
            assert_eq!(bytes, 16_777_216.0);
            assert_eq!(group.nodes, 2);
        }
        _ => panic!(),
    }
    let (t_send, t_step) = (timed[send].time.time_us, timed[step].time.time_us);
    let kappa = timer.contention();
    let by_hand = (t_send - t_step).max(0.0) + kappa * t_send.min(t_step);
    assert!((timed[send].charged_us - by_hand).abs() < 1e-9 * by_hand.max(1.0));
    assert_eq!(timed[send].charged_us, overlap_charge(t_send, (t_send - t_step).max(0.0), kappa));
    // At 32,768 tokens per rank a step's attention (4·32,768²·4 heads·128/2 FLOPs ≈ 1.1 TFLOP) outlasts a 16 MiB
    // send over a 400 Gb/s NIC (≈ 0.34 ms): hidden.
    assert!(t_step > t_send, "step {t_step} µs, send {t_send} µs");
}

#[test]
fn one_ring_step_is_causal_and_the_others_run_unmasked() {
    // 32 steps, FlashAttention-2's 335/370 = 0.905405 per unmasked step: (1 + 31 · 0.905405) / 32 = 29.067568 / 32
    // = 0.908361. cp 2 under cuDNN's 539/595 = 0.905882: (1 + 0.905882) / 2 = 0.952941. One call: 1.
    assert!((ring_step_scale(32, 335.0 / 370.0) - 0.908361).abs() < 1e-6);
    assert!((ring_step_scale(2, 539.0 / 595.0) - 0.952941).abs() < 1e-6);
    assert_eq!(ring_step_scale(1, 0.5), 1.0);
    assert_eq!(ring_step_scale(0, 0.5), 1.0);
}

#[test]
fn a_ring_steps_attention_is_charged_at_the_unmasked_share_on_hopper() {
    // Llama-2 7B-like attention at 1M tokens, tp 8, cp 32, attention_backend flash2 (NeMo 24.03.01's H100 row):
    // the per-call FlashAttention time through the framework's timer is the plain timer's causal time × 1.75
    // (FlashAttention-2 over -3) × 0.908361 (31 of 32 steps unmasked, above), forward and backward alike. Without
    // context parallelism (16k tokens, tp 2) only the 1.75 applies.
    let flash = |seq: u32, par: serde_json::Value| {
        let c = cfg(seq, par, Framework::Megatron).unwrap();
        let backend = Derated::new(AnalyticBackend::new(dgx_h100(32)), Efficiency::CALIBRATED);
        let ops = layer_ops(&c, &Layout::new(&c, 8), PREC);
        let plain = time_ops(&ops, &mut Timer::new(&backend)).unwrap();
        let framework = time_ops(&ops, &mut Timer::for_training(&backend, &c)).unwrap();
        ops.iter()
            .zip(plain.iter().zip(&framework))
            .filter(|(o, _)| o.name == OpName::FlashAttention)
            .map(|(o, (p, f))| (o.phase, f.time.time_us / p.time.time_us))
            .collect::<Vec<_>>()
    };
    let ring = flash(1 << 20, serde_json::json!({"tp": 8, "context_parallel": 32, "attention_backend": "flash2"}));
    assert_eq!(ring.len(), 2);
    for (phase, ratio) in ring {
        assert!((ratio - 1.75 * 0.908361).abs() < 1e-5, "{phase:?} {ratio}");
    }
    for (phase, ratio) in flash(1 << 14, serde_json::json!({"tp": 2, "attention_backend": "flash2"})) {
        assert!((ratio - 1.75).abs() < 1e-9, "{phase:?} {ratio}");
    }
}

#[test]
fn exposed_ring_communication_grows_as_the_chunks_shrink() {
    // A send grows with l/cp, a step's attention with (l/cp)²: the smaller each rank's chunk, the larger the
    // exposed share. 32k tokens at tp 8 over 2 nodes: cp 2 → 16k per rank, cp 16 → 2k.
    let exposed = |seq: u32, cp: u32| {
        let c = cfg(seq, serde_json::json!({"tp": 8, "context_parallel": cp}), Framework::Megatron).unwrap();
        let sys = dgx_h100(cp);
        let backend = Derated::new(AnalyticBackend::new(sys), Efficiency::CALIBRATED);
        let mut timer = Timer::new(&backend);
        let ops = layer_ops(&c, &Layout::new(&c, 8), PREC);
        let timed = time_ops(&ops, &mut timer).unwrap();
        let i = ops.iter().position(|o| o.name == OpName::CpP2p && o.phase == Phase::Fwd).unwrap();
        let fa = ops.iter().position(|o| o.name == OpName::FlashAttention && o.phase == Phase::Fwd).unwrap();
        (timed[i].time.time_us - timed[fa].time.time_us).max(0.0) / timed[i].time.time_us
    };
    let (small, large) = (exposed(1 << 15, 16), exposed(1 << 15, 2));
    assert!(small > large, "exposed share at 2k tokens per rank {small}, at 16k {large}");
    assert!(small > 0.0);
}

#[test]
fn each_kind_changes_the_step_in_its_direction() {
    // Llama-3 8B at 64k tokens, cp 8 on one DGX H100 node: the ring hides its sends behind the steps; TE's
    // all-gather and reduce-scatter are exposed; a2a (32/8 heads, 8/8 key/value heads) exposes four all-to-alls
    // of Q, K, V, O per layer and pass. Both cost more than the ring's hidden sends — but the ring also merges
    // every step's partial result (`CP_Merge`), which the other two do not, and on NVLink with GQA's small K, V
    // the exposed collectives and the merges come within a few percent of each other (TE: "the overheads should
    // be small with GQA/MQA"): so each kind is compared with the ring less its merges. Under torchtitan the gather
    // hides behind the first step, so TE's exposed gather is slower than torchtitan's of the same kernels' timing.
    let step = |par: serde_json::Value, fw: Framework| {
        let m = serde_json::from_value(model(32, 1 << 16)).unwrap();
        let c = with_framework(validate(&m, &serde_json::from_value(par).unwrap(), Precision::Bf16, 8).unwrap(), fw)
            .unwrap();
        let backend = Derated::new(AnalyticBackend::new(dgx_h100(1)), Efficiency::CALIBRATED);
        let p = predict(&c, &backend).unwrap();
        let merges = p.operators.iter().filter(|o| o.name == OpName::CpMerge).map(|o| o.total_us).sum::<f64>();
        (p.iteration_time_s, merges * c.grad_accum as f64 / 1e6)
    };
    let par = |kind: &str| serde_json::json!({"context_parallel": 8, "cp_comm_type": kind});
    let (p2p, merges) = step(par("p2p"), Framework::Megatron);
    let (ag, ag_merges) = step(par("all_gather"), Framework::Megatron);
    let (a2a, a2a_merges) = step(par("a2a"), Framework::Megatron);
    assert!(merges > 0.0 && ag_merges == 0.0 && a2a_merges == 0.0);
    assert!(ag > p2p - merges, "all_gather {ag} s vs p2p {p2p} s less its merges {merges} s");
    assert!(a2a > p2p - merges, "a2a {a2a} s vs p2p {p2p} s less its merges {merges} s");
    // torchtitan: its default (all_gather, hidden behind one step) and the ring (hidden behind every step).
    let tt_default = step(serde_json::json!({"context_parallel": 8}), Framework::Torchtitan).0;
    let tt_ag = step(par("all_gather"), Framework::Torchtitan).0;
    assert_eq!(tt_default, tt_ag);
    let tt_p2p = step(par("p2p"), Framework::Torchtitan).0;
    assert!(tt_ag >= tt_p2p, "torchtitan all_gather {tt_ag} s vs p2p {tt_p2p} s");
}

/// (phase, rows, width, inputs, calls) of every ring merge of one layer.
fn merges(c: &TrainingConfig) -> Vec<(Phase, u64, u64, u64, u32)> {
    layer_ops(c, &Layout::new(c, 8), PREC)
        .iter()
        .filter(|o| o.name == OpName::CpMerge)
        .map(|o| match o.work {
            Work::Compute { shape, .. } => (o.phase, shape.dims[0], shape.dims[1], shape.dims[2], o.calls),
            _ => panic!("a merge is a kernel"),
        })
        .collect()
}

#[test]
fn the_ring_merges_every_steps_partial_output_and_gradients() {
    // Llama-3 8B attention (32 heads, 8 key/value heads of 128), 8192 tokens, cp 2, tp 1: two ring steps of
    // 8192 / 2 = 4096 queries. Forward: 2 merges of one step's output, 4096 · 32 = 131,072 rows of 128 (the step's
    // output and the running output in, the running output out: 2 inputs). Backward: 2 − 1 = 1 accumulation of
    // dQ (131,072 rows) and 1 of dK, dV: 2 · 4096 · 8 = 65,536 rows.
    let c = cfg(8192, serde_json::json!({"context_parallel": 2}), Framework::Megatron).unwrap();
    assert_eq!(
        merges(&c),
        [(Phase::Fwd, 131_072, 128, 2, 2), (Phase::Bwd, 131_072, 128, 2, 1), (Phase::Bwd, 65_536, 128, 2, 1)]
    );
    // a2a+p2p [2, 2] at cp 4: a ring of 2 over groups of 2 — steps of 8192 / 2 = 4096 queries on 32 / 2 = 16
    // heads (65,536 rows) and 8 / 2 = 4 key/value heads (2 · 4096 · 4 = 32,768 rows).
    let h = cfg(
        8192,
        serde_json::json!({"context_parallel": 4, "cp_comm_type": "a2a+p2p",
            "hierarchical_context_parallel_sizes": [2, 2]}),
        Framework::Nemo,
    )
    .unwrap();
    assert_eq!(
        merges(&h),
        [(Phase::Fwd, 65_536, 128, 2, 2), (Phase::Bwd, 65_536, 128, 2, 1), (Phase::Bwd, 32_768, 128, 2, 1)]
    );
    // PyTorch's all-gather rotation still runs cp = 4 sub-SDPA steps of 2048 queries and merges them: 2048 · 32 =
    // 65,536 rows forward (4 calls); 3 accumulations of dQ and of dK, dV (2 · 2048 · 8 = 32,768 rows).
    let titan = cfg(8192, serde_json::json!({"context_parallel": 4}), Framework::Torchtitan).unwrap();
    assert_eq!(
        merges(&titan),
        [(Phase::Fwd, 65_536, 128, 2, 4), (Phase::Bwd, 65_536, 128, 2, 3), (Phase::Bwd, 32_768, 128, 2, 3)]
    );
    // Nothing to merge: TE's all-gather (one call per local chunk), Ulysses (one call), no context parallelism.
    for (cp, kind) in [(2, "all_gather"), (2, "a2a"), (1, "p2p")] {
        let c = cfg(8192, serde_json::json!({"context_parallel": cp, "cp_comm_type": kind}), Framework::Megatron);
        assert!(merges(&c.unwrap()).is_empty(), "{kind} cp {cp}");
    }
}

#[test]
fn a_ring_merge_is_a_memory_bound_pass_over_three_tensors() {
    // The analytic time of the cp 2 forward merge above: 131,072 · 128 = 16,777,216 elements, three tensors of
    // 2 bytes (two read, one written) = 100,663,296 bytes; on an H100 (3.35 TB/s HBM3) the roofline is
    // 100,663,296 / 3.35e12 s = 30.05 µs, plus the 2 µs launch ([`crate::cost::roofline::LAUNCH_OVERHEAD_US`]).
    let c = cfg(8192, serde_json::json!({"context_parallel": 2}), Framework::Megatron).unwrap();
    let ops = layer_ops(&c, &Layout::new(&c, 8), PREC);
    let fwd = ops.iter().find(|o| o.name == OpName::CpMerge && o.phase == Phase::Fwd).unwrap();
    let Work::Compute { shape, dtype } = fwd.work else { panic!("a merge is a kernel") };
    let t = crate::cost::roofline::estimate(&shape, dtype, &dgx_h100(1).gpu).unwrap();
    assert!((t.time_us - (100_663_296.0 / 3.35e12 * 1e6 + 2.0)).abs() < 0.05, "{}", t.time_us);
}

//! The wide-EP tables reproduce SGLang's measured rows (by their line in aiconfigurator's files, header = line 1),
//! interpolate as the module doc says, and only SGLang with data-parallel attention and ep > 1 takes the path.

use serde_json::json;

use super::*;
use crate::hw::presets;
use crate::llm::operators::{OpName, Work};
use crate::llm::serving::step::{stage_ops, StageRole, StepLoad};
use crate::llm::serving::{validate, InferenceRequest};

fn system(name: &str) -> System {
    presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap()
}

/// DeepSeek-V3's experts (7168 → 2048, top-8 of 256) as `kind` at `ep` with `tokens` per rank.
fn dsv3(kind: WideEpKind, ep: u32, tokens: u64) -> WideEpOp {
    let inter = if kind.is_deepep() { 0 } else { 2048 };
    WideEpOp { kind, hidden: 7168, inter, top_k: 8, experts: 256, ep, tokens }
}

fn us(kind: WideEpKind, ep: u32, tokens: u64) -> f64 {
    lookup_time(&dsv3(kind, ep, tokens), &system("dgx-b200")).unwrap().time_us
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-3, "{a} vs {b}");
}

#[test]
fn every_table_row_of_the_committed_csv_parses() {
    // One curve point per data line (keys are unique in the script's output).
    let points: usize = curves().iter().map(|c| c.points.len()).sum();
    assert_eq!(points, TABLE_CSV.lines().count() - 1);
}

#[test]
fn measured_rows_are_reproduced() {
    // b200_sxm/sglang/wideep_generation_moe_perf.csv.gz line 151: 1,024 tokens at moe_ep_size 32, uniform,
    // 0.0863103985786438 ms → 1,024 / 32 = 32 tokens per rank, 86.3104 µs (the script rounds to 4 decimals).
    close(us(WideEpKind::DeepGemmDecode, 32, 32), 86.3104);
    // b200_sxm/sglang/wideep_context_moe_perf.csv.gz line 98: 2,048 tokens at ep 4, uniform, 0.482317715883255 ms
    // → 512 tokens per rank, 482.3177 µs.
    close(us(WideEpKind::DeepGemmPrefill, 4, 512), 482.3177);
    // b200_sxm/sglang/wideep_deepep_ll_perf.csv.gz line 151: node_num 1, hidden 7168, 64 tokens, top-8 of 256:
    // combine 31.453 + dispatch 26.606 = 58.059 µs.
    close(us(WideEpKind::DeepEpLowLatency, 8, 64), 58.059);
    // b200_sxm/sglang/wideep_deepep_normal_perf.csv.gz line 2,178: 512 tokens at 20 SMs: dispatch 113.06383612812782
    // + 0 + combine 179.31885743627745 + 0 = 292.3827 µs.
    close(us(WideEpKind::DeepEpNormal, 8, 512), 292.3827);
}

#[test]
fn an_unmeasured_ep_is_the_log_log_interpolation_of_its_neighbours() {
    // ep 8 lies halfway between ep 4 and ep 16 in log ep, so its time is the geometric mean of theirs at the same
    // 32 tokens per rank: lines 55 (128 tokens at ep 4: 0.5183167934417725 ms) and 103 (512 at ep 16:
    // 0.14677759408950805 ms) of b200's wideep_generation_moe_perf: √(518.3168 · 146.7776) = √76,077.3 = 275.821 µs.
    let want = (518.3168_f64 * 146.7776).sqrt();
    assert!((want - 275.821).abs() < 1e-3, "{want}");
    close(us(WideEpKind::DeepGemmDecode, 8, 32), want);
    // DeepEP answers every ep of one NVLink domain from the 8-rank curve: ep 32 is the same 58.059 µs.
    close(us(WideEpKind::DeepEpLowLatency, 32, 64), 58.059);
}

#[test]
fn outside_the_tables_nothing_answers() {
    let b200 = system("dgx-b200");
    // Above 128 tokens per rank in the decode layout, another model's hidden size, ep 1 below the measured range.
    assert!(lookup_time(&dsv3(WideEpKind::DeepGemmDecode, 32, 129), &b200).is_none());
    let other = WideEpOp { hidden: 4096, ..dsv3(WideEpKind::DeepGemmDecode, 32, 32) };
    assert!(lookup_time(&other, &b200).is_none());
    assert!(lookup_time(&dsv3(WideEpKind::DeepGemmDecode, 1, 32), &b200).is_none());
    // A100 (compute capability 8.0): no measured GPU of its generation.
    assert!(lookup_time(&dsv3(WideEpKind::DeepGemmDecode, 32, 32), &system("dgx-a100-80g")).is_none());
}

#[test]
fn gb300_stands_in_with_a_measured_blackwell() {
    let t = lookup_time(&dsv3(WideEpKind::DeepGemmDecode, 32, 32), &system("gb300-nvl72")).unwrap();
    assert!(t.gpu.starts_with('B') || t.gpu.starts_with("GB200"), "{}", t.gpu);
}

/// The MoE layer's operators of one step of DeepSeek-V3 fp8 under `engine` with `parallelism` on a DGX B200: 64
/// decode sequences per attention rank (`prefill` tokens more), one MoE layer.
fn moe_ops(engine: &str, parallelism: serde_json::Value, prefill: u32) -> Vec<(OpName, Work)> {
    moe_ops_on("dgx-b200", "fp8", engine, parallelism, prefill)
}

/// [`moe_ops`] on system preset `sys` with the request's `precision`.
fn moe_ops_on(sys: &str, precision: &str, engine: &str, parallelism: serde_json::Value, prefill: u32) -> Vec<(OpName, Work)> {
    let req: InferenceRequest = serde_json::from_value(json!({"system": sys, "model": "DeepSeek-V3",
        "precision": precision, "engine": engine, "parallelism": parallelism,
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 512}}))
    .unwrap();
    let system = system(sys);
    let cfg = validate(&req, &system).unwrap();
    let load = StepLoad {
        decode_seqs: 64,
        decode_context: 1536,
        prefill_tokens: prefill,
        prompt_len: 1024,
        sampled: 64,
        graph_pad_tokens: 0,
        draft_tokens: 0,
    };
    let ops = stage_ops(&cfg, &system, &load, StageRole { first: true, last: true }, 0, 1);
    ops.into_iter()
        .filter(|o| matches!(o.op.name, OpName::Moe | OpName::EpAllToAll))
        .map(|o| (o.op.name, o.op.work))
        .collect()
}

#[test]
fn sglang_with_dp_attention_runs_deepep_around_deepgemm() {
    let dp = json!({"tp": 8, "ep": 8, "dp_attention": true});
    let ops = moe_ops("sglang", dp.clone(), 0);
    // Decode: 64 tokens per rank ≤ 128 → low latency; the experts receive ⌈64 · 8 / 8⌉ = 64 tokens' worth.
    assert_eq!(
        ops,
        vec![
            (OpName::Moe, Work::WideEp(dsv3(WideEpKind::DeepGemmDecode, 8, 64))),
            (OpName::EpAllToAll, Work::WideEp(dsv3(WideEpKind::DeepEpLowLatency, 8, 64))),
        ]
    );
    // A step with a prefill in it: the normal kernels, over 64 + 256 = 320 tokens per rank.
    let ops = moe_ops("sglang", dp, 256);
    assert_eq!(ops[0].1, Work::WideEp(dsv3(WideEpKind::DeepGemmPrefill, 8, 320)));
    assert_eq!(ops[1].1, Work::WideEp(dsv3(WideEpKind::DeepEpNormal, 8, 320)));
    // Timed: SGLang's table names itself.
    let t = timed(&dsv3(WideEpKind::DeepGemmDecode, 8, 64), &system("dgx-b200")).unwrap();
    assert_eq!(t.source.to_string(), "measured:sglang_wideep/deepgemm_decode/B200");
    assert_eq!(t.kernels, 3);
}

#[test]
fn other_engines_and_sglang_without_dp_attention_keep_the_fused_moe() {
    for (engine, par) in [
        ("sglang", json!({"tp": 8, "ep": 8})),
        ("vllm", json!({"tp": 8, "ep": 8, "dp_attention": true})),
        ("trtllm", json!({"tp": 8, "ep": 8, "dp_attention": true})),
    ] {
        let ops = moe_ops(engine, par.clone(), 0);
        assert!(ops.iter().all(|(_, w)| !matches!(w, Work::WideEp(_))), "{engine} {par}: {ops:?}");
        assert!(ops.iter().any(|(n, w)| *n == OpName::Moe && matches!(w, Work::Compute { .. })), "{engine}");
    }
}

fn gb200_us(kind: WideEpKind, ep: u32, tokens: u64) -> f64 {
    lookup_time(&dsv3(kind, ep, tokens), &system("gb200-nvl72")).unwrap().time_us
}

#[test]
fn nvfp4_experts_are_sglangs_measured_fused_moe_at_the_ep_groups_tokens() {
    // gb200/sglang/moe_perf.csv.gz line 109,575: sglang_flashinfer_trtllm_moe, nvfp4, 2,048 tokens, DeepSeek-V3's
    // 7168/2048/top-8/256, moe_tp 1, moe_ep 32, balanced, 0.24668096542358398 ms. num_tokens is the EP group's
    // tokens (aiconfigurator's MoE.query: per-rank x × attention_dp_size), so the row is 2,048 / 32 = 64 tokens
    // per rank: 246.6810 µs (4 decimals).
    close(gb200_us(WideEpKind::FlashInferNvfp4, 32, 64), 246.6810);
    // Between measured token counts, log-log: lines 109,573 (1,024 tokens = 32 per rank, 0.14255167961120604 ms)
    // and 109,574 (1,536 = 48 per rank, 0.1981484794616699 ms). 40 per rank: w = ln(40/32) / ln(48/32)
    // = 0.223144 / 0.405465 = 0.550340; exp(ln 142.5517 + w · ln(198.1485 / 142.5517)) = 142.5517 · 1.39000^0.55034
    // = 170.876 µs.
    let want = (142.5517_f64.ln() + (40.0_f64 / 32.0).ln() / 1.5_f64.ln() * (198.1485_f64 / 142.5517).ln()).exp();
    assert!((want - 170.876).abs() < 1e-2, "{want}");
    close(gb200_us(WideEpKind::FlashInferNvfp4, 32, 40), want);
    // Between measured eps, log-log at the same 64 tokens per rank: line 131,284 (4,096 tokens at ep 64, 64 per rank,
    // 0.41078910827636717 ms) with the ep-32 point above; ep 48 lies ln(48/32) / ln(64/32) = 0.405465 / 0.693147
    // = 0.584963 of the way: 246.6810 · (410.7891 / 246.6810)^0.584963 = 246.6810 · 1.66527^0.584963 = 332.426 µs.
    let want = 246.6810_f64 * (410.7891_f64 / 246.6810).powf((48.0_f64 / 32.0).ln() / 2.0_f64.ln());
    assert!((want - 332.426).abs() < 1e-2, "{want}");
    close(gb200_us(WideEpKind::FlashInferNvfp4, 48, 64), want);
}

#[test]
fn gb200s_deepep_low_latency_row_is_reproduced() {
    // gb200/sglang/wideep_deepep_ll_perf.csv.gz line 151: node_num 1, hidden 7168, 64 tokens, top-8 of 256:
    // combine 25.969 + dispatch 21.642 = 47.611 µs, for every ep of the NVLink domain.
    close(gb200_us(WideEpKind::DeepEpLowLatency, 8, 64), 47.611);
    close(gb200_us(WideEpKind::DeepEpLowLatency, 32, 64), 47.611);
}

#[test]
fn a_dep32_nvfp4_decode_step_runs_deepep_around_the_measured_nvfp4_experts() {
    // GB200 NVL72, DeepSeek-V3 fp4, tp = ep = 32 with data-parallel attention (the SGLang GB200 fp4 decode recipe's
    // layout), 64 decode tokens per rank: low latency (64 ≤ 128); the experts receive ⌈64 · 32 / 32⌉ = 64 tokens'
    // worth; DeepEP sends this rank's 64.
    let dep32 = json!({"tp": 32, "ep": 32, "dp_attention": true});
    let ops = moe_ops_on("gb200-nvl72", "fp4", "sglang", dep32, 0);
    assert_eq!(
        ops,
        vec![
            (OpName::Moe, Work::WideEp(dsv3(WideEpKind::FlashInferNvfp4, 32, 64))),
            (OpName::EpAllToAll, Work::WideEp(dsv3(WideEpKind::DeepEpLowLatency, 32, 64))),
        ]
    );
    let gb200 = system("gb200-nvl72");
    let experts = timed(&dsv3(WideEpKind::FlashInferNvfp4, 32, 64), &gb200).unwrap();
    assert_eq!(experts.source.to_string(), "measured:sglang_wideep/flashinfer_nvfp4/GB200");
    assert_eq!(experts.kernels, 5);
    let a2a = timed(&dsv3(WideEpKind::DeepEpLowLatency, 32, 64), &gb200).unwrap();
    assert_eq!(a2a.source.to_string(), "measured:sglang_wideep/deepep_ll/GB200");
    // 246.6810 µs of experts and 47.611 µs of dispatch + combine per MoE layer (the rows above).
    close(experts.time_us, 246.6810);
    close(a2a.time_us, 47.611);
    assert_eq!(dsv3(WideEpKind::FlashInferNvfp4, 32, 64).precision(), Some(Precision::Nvfp4));
}

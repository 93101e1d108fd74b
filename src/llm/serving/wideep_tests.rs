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
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-b200", "model": "DeepSeek-V3",
        "precision": "fp8", "engine": engine, "parallelism": parallelism,
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 512}}))
    .unwrap();
    let system = system("dgx-b200");
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

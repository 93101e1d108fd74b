//! gpt-oss's sliding-window attention ([`super::model::SlidingWindow`]) in the step model: the prefill key count's
//! closed form, and the windowed layers' decode and prefill attention, each number worked by hand.

use serde_json::json;

use super::model::SlidingWindow;
use super::step::{stage_ops, StageRole, StepLoad};
use super::*;
use crate::cost::AnalyticBackend;
use crate::hw::{presets, System};
use crate::llm::operators::OpName;

fn system() -> System {
    presets().into_iter().find(|p| p.name == "dgx-b200").unwrap().resolve().unwrap()
}

fn config(model: &str, precision: &str) -> ServingConfig {
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-b200", "model": model,
        "engine": "vllm", "precision": precision, "parallelism": {"tp": 1},
        "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 64}}))
    .unwrap();
    validate(&req, &system()).unwrap()
}

/// (dims, calls per step) of every `name` row of `cfg`'s single-stage step with `load`.
fn rows(cfg: &ServingConfig, load: &StepLoad, name: OpName) -> Vec<(Vec<u64>, f64)> {
    let moe = cfg.model.moe_layers();
    let ops = stage_ops(cfg, &system(), load, StageRole { first: true, last: true }, cfg.model.layers - moe, moe);
    ops.iter().filter(|o| o.op.name == name).map(|o| (o.op.features.clone(), o.per_step)).collect()
}

#[test]
fn a_windowed_prompt_attends_the_keys_its_window_sees() {
    let w = SlidingWindow { window_tokens: 128, layers: 18 };
    // S = 100 < W: every token sees all before it, 1 + 2 + … + 100 = 100·101/2 = 5,050.
    assert_eq!(w.prefill_keys(100), 5_050.0);
    // S = W = 128: 128·129/2 = 8,256 (both branches agree here).
    assert_eq!(w.prefill_keys(128), 8_256.0);
    // S = 1,024 > W: tokens 1–128 see 8,256 keys, the other 896 see 128 each: 8,256 + 896·128 = 8,256 + 114,688.
    assert_eq!(w.prefill_keys(1024), 122_944.0);
    // Against the sum itself, term by term.
    for s in [1u64, 127, 129, 300] {
        let brute: u64 = (1..=s).map(|i| i.min(128)).sum();
        assert_eq!(w.prefill_keys(s), brute as f64, "S = {s}");
    }
}

#[test]
fn gpt_oss_decode_reads_the_window_on_its_windowed_layers_and_a_dense_model_does_not() {
    // 64 sequences at a context of 8,192. gpt-oss: 64 query heads, 8 key/value heads of 64 dims at tp 1; 18 of
    // its 36 layers read the whole 8,192 tokens, the other 18 only their 128-token window.
    let load = StepLoad::decode(64, 8192, 8192);
    let oss = config("gpt-oss-120b", "fp4");
    let got = rows(&oss, &load, OpName::AttentionDecode);
    assert_eq!(got, vec![(vec![64, 8192, 64, 8, 64], 18.0), (vec![64, 128, 64, 8, 64], 18.0)]);
    // Within the window (context 100 ≤ 128) every layer reads the whole context: one row of 36 calls.
    let short = StepLoad::decode(64, 100, 100);
    assert_eq!(rows(&oss, &short, OpName::AttentionDecode), vec![(vec![64, 100, 64, 8, 64], 36.0)]);
    // A dense model without a window: Llama-3.1-70B's 80 layers (64 query, 8 key/value heads of 128) at 8,192.
    let llama = config("Llama-3.1-70B", "fp8");
    assert_eq!(rows(&llama, &load, OpName::AttentionDecode), vec![(vec![64, 8192, 64, 8, 128], 80.0)]);

    // The step's GPU time drops by the 18 windowed layers' difference between reading 8,192 and 128 tokens; the
    // same model without its window charges all 36 layers the whole context.
    let consts = ServingConstants::CALIBRATED;
    let backend = ServingDerated::new(AnalyticBackend::new(system()), consts);
    let gpu = |cfg: &ServingConfig| steady::Solver::new(cfg, &backend, consts, 1000).step(load).unwrap().gpu_s;
    let mut full = oss.clone();
    full.model.sliding_window = None;
    let (windowed_s, full_s) = (gpu(&oss), gpu(&full));
    assert!(windowed_s < full_s, "{windowed_s} vs {full_s}");
    // The KV bytes each windowed layer reads: 64 sequences × 8,192 tokens × 8 heads × 64 dims × 2 (keys and
    // values) = 536,870,912 elements at 8,192 against 8,388,608 at 128 — a 64th; 18 layers save 18 × 528,482,304
    // elements. At B200's 8 TB/s in an fp8 cache (1 B each) that is ≥ 18 × 66 µs ≈ 1.19 ms saved at full
    // bandwidth; the analytic model is at most that fast, so the drop is at least 1.1 ms.
    assert!(full_s - windowed_s > 1.1e-3, "{} ms saved", (full_s - windowed_s) * 1e3);
    // The dense model is untouched by the change: its step equals itself with the (absent) window cleared.
    let mut llama_none = llama.clone();
    llama_none.model.sliding_window = None;
    assert_eq!(gpu(&llama), gpu(&llama_none));
}

#[test]
fn gpt_oss_prefill_charges_its_windowed_layers_the_kept_key_pairs() {
    // One 1,024-token prompt alone. Causal attention over it: 1,024·1,025/2 = 524,800 query–key pairs; a windowed
    // layer keeps 122,944 of them (the closed form above). 18 full layers + 18 × 122,944/524,800 windowed ones
    // = 18 + 4.216829… = 22.216829… layer-equivalents of the prompt's causal attention.
    let load = StepLoad::prefill(1024);
    let got = rows(&config("gpt-oss-120b", "fp4"), &load, OpName::AttentionPrefill);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, vec![1, 1024, 64, 8, 64]);
    let want = 18.0 + 18.0 * 122_944.0 / 524_800.0;
    assert!((got[0].1 - want).abs() < 1e-9 && (want - 22.216_829).abs() < 1e-6, "{} vs {want}", got[0].1);
    // A prompt within the window (100 tokens) keeps every pair: 36 layers.
    let short = StepLoad { prefill_tokens: 100, prompt_len: 100, ..load };
    assert_eq!(rows(&config("gpt-oss-120b", "fp4"), &short, OpName::AttentionPrefill)[0].1, 36.0);
    // A dense model: Llama-3.1-70B's 80 layers, unchanged.
    assert_eq!(rows(&config("Llama-3.1-70B", "fp8"), &load, OpName::AttentionPrefill)[0].1, 80.0);
}

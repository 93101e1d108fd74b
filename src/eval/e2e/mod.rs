//! End-to-end training measurements of `../shared/data` (DATA.md: vTrain, NeuSight's distributed runs,
//! NeMo/Megatron-Bridge and DGX Cloud tables, NeMo's long-sequence table, llm-foundry's MPT runs) turned into prediction requests with their measured iteration time.
//! What each source ran is reconstructed from its documentation; every assumption is stated where it is made.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use super::datasets::read;
use crate::hw::{GpuRef, Link, SystemSpec};
use crate::llm::TrainingRequest;

/// One measured configuration.
#[derive(Debug, Clone)]
pub struct E2eRow {
    /// `vtrain`, `neusight`, `neusight-1gpu`, `nemo`, `nemo-blackwell`, `nemo-moe`, `nemo-long-cp`, `dgxc`,
    /// `llmfoundry`.
    pub source: &'static str,
    /// Where it comes from (file and line or table title and column).
    pub id: String,
    /// The system it ran on.
    pub system: SystemSpec,
    /// The training request that describes the run (model, parallelism, precision) on `system`.
    pub request: TrainingRequest,
    /// Measured time of one iteration, s.
    pub measured_s: f64,
    /// The measurement covers forward and backward only (NeuSight): the optimizer update is not counted.
    pub without_update: bool,
    /// Model configuration (for grouped cross-validation).
    pub group: String,
    /// Why the row is a data trap, when it is one: a measurement the source itself contradicts (a release
    /// regression its patch release re-measured, a run physically slower than a weaker GPU's in the same
    /// container). Trap rows are still predicted and scored; the report shows every subset that holds them a
    /// second time without them ([`crate::eval::training`]). `None` for an ordinary row.
    pub trap: Option<&'static str>,
}

/// The rows of all sources, and the rows skipped per source with the reason.
#[derive(Debug, Default)]
pub struct E2eData {
    /// The rows that became requests.
    pub rows: Vec<E2eRow>,
    /// (source, reason) → rows not evaluated.
    pub skipped: BTreeMap<(String, String), u64>,
}

impl E2eData {
    fn skip(&mut self, source: &str, why: &str) {
        *self.skipped.entry((source.to_string(), why.to_string())).or_default() += 1;
    }
}

fn csv_records(path: &Path) -> Result<Vec<BTreeMap<String, String>>, String> {
    let bytes = read(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let body: String = text.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n");
    let mut r = csv::ReaderBuilder::new().flexible(true).from_reader(body.as_bytes());
    let headers = r.headers().map_err(|e| format!("{}: {e}", path.display()))?.clone();
    let mut out = Vec::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| format!("{}: {e}", path.display()))?;
        out.push(headers.iter().zip(rec.iter()).map(|(h, v)| (h.to_string(), v.trim().to_string())).collect());
    }
    Ok(out)
}

fn system(name: &str, gpu: &str, gpus_per_node: u32, nodes: u32, intra: (&str, f64), inter: (&str, f64)) -> SystemSpec {
    SystemSpec {
        name: name.into(),
        gpu: GpuRef::Name(gpu.into()),
        gpus_per_node,
        nodes,
        intra_node: Link::new(intra.0, intra.1, 2.0),
        inter_node: Link::new(inter.0, inter.1, 5.0),
        description: None,
    }
}

/// A DGX H100 cluster large enough for DGX Cloud's 2,304-GPU runs: the `dgx-h100` preset's nodes (8× H100 SXM on
/// NVSwitch at NCCL's achieved 350 GB/s, 8× NDR 400 Gb/s datasheet) × 512 — the links a prediction on the preset
/// uses.
fn dgx_h100() -> SystemSpec {
    let preset = crate::hw::presets().into_iter().find(|p| p.name == "dgx-h100").expect("the dgx-h100 preset");
    SystemSpec { name: "eval-dgx-h100".into(), nodes: 512, description: None, ..preset }
}

/// The request of a measured run: `framework` is what ran it ([`crate::llm::framework::Framework`]'s wire name).
/// The request precision and fp8 recipe of a NeMo / Megatron-Bridge table's precision cell, as the tables name
/// them (the first configuration of an `x (y)` cell): `BF16` → bf16; `FP8-CS` (current scaling) → fp8 with
/// `fp8_recipe` tensorwise; `FP8-MX` and `MXFP8` → fp8 with mxfp8; `FP8` (no recipe stated) → fp8 with Megatron's
/// default (delayed); `NVFP4` → nvfp4; anything else (an empty cell) → none.
pub(super) fn nemo_precision(cell: &str) -> Option<(&'static str, Option<&'static str>)> {
    let p = cell.trim().to_ascii_uppercase();
    if p.starts_with("BF16") {
        Some(("bf16", None))
    } else if p.starts_with("FP8-CS") {
        Some(("fp8", Some("tensorwise")))
    } else if p.starts_with("FP8-MX") || p.starts_with("MXFP8") {
        Some(("fp8", Some("mxfp8")))
    } else if p.starts_with("FP8") {
        Some(("fp8", None))
    } else if p.starts_with("NVFP4") {
        Some(("nvfp4", None))
    } else {
        None
    }
}

fn request(
    system: &str,
    model: Value,
    parallelism: Value,
    precision: &str,
    framework: &str,
) -> Option<TrainingRequest> {
    serde_json::from_value(json!({"system": system, "model": model, "parallelism": parallelism,
        "precision": precision, "framework": framework}))
    .ok()
}
mod dgxc;
mod llmfoundry;
mod nemo;
mod nemo_long;
mod nemo_moe;
mod neusight;
mod vtrain;

pub use dgxc::dgxc;
pub use llmfoundry::llmfoundry;
pub use nemo::{architecture, nemo};
pub use nemo_long::nemo_long;
pub use nemo_moe::nemo_moe;
pub use neusight::{neusight, neusight_single};
pub use vtrain::vtrain;

/// Every source.
pub fn load(data: &Path) -> Result<E2eData, String> {
    let mut out = E2eData::default();
    vtrain(data, &mut out)?;
    neusight(data, &mut out)?;
    neusight_single(data, &mut out)?;
    nemo(data, &mut out)?;
    nemo_moe(data, &mut out)?;
    nemo_long(data, &mut out)?;
    dgxc(data, &mut out)?;
    llmfoundry(data, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::dgxc::title_param;
    use super::*;

    fn data() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data")
    }

    #[test]
    fn vtrain_rows_become_megatron_requests() {
        let mut out = E2eData::default();
        vtrain(&data(), &mut out).unwrap();
        assert_eq!(out.rows.len(), 1440);
        // First row: 2 GPUs, gbs 16, mbs 8, h 1024, 24 layers, TP 1, DP 1, PP 2, 372.160408 ms.
        let r = &out.rows[0];
        assert_eq!((r.request.parallelism.pp, r.request.parallelism.micro_batch), (2, 8));
        assert_eq!(r.request.parallelism.global_batch, Some(16));
        assert!((r.measured_s - 0.372160408).abs() < 1e-12);
        assert_eq!(r.group, "h1024-L24");
    }

    #[test]
    fn neusight_pipeline_runs_one_micro_batch_of_its_traced_models() {
        let mut out = E2eData::default();
        neusight(&data(), &mut out).unwrap();
        // 11 measured cells: GPT-2 Large batch 4 on A100 and H100 (6), batch 16 on H100 (3), GPT3-XL on H100 (2).
        assert_eq!(out.rows.len(), 11);
        let xl_tp = out.rows.iter().find(|r| r.id.contains("GPT3-XL tp4")).unwrap();
        // NeuSight's GPT3-XL as traced: addmm [2048, 3072]·[3072, 9216], attention matmul [1, 24, 2048, 128].
        let m = &xl_tp.request.model;
        assert_eq!((m.layers, m.hidden, m.heads, m.seq_len), (24, 3072, 24, 2048));
        assert!((xl_tp.measured_s - 1.0105).abs() < 1e-12);
        // pp4_1: the global batch of 4 as one micro-batch through 4 stages.
        let xl_pp = out.rows.iter().find(|r| r.id.contains("GPT3-XL pp4")).unwrap();
        let p = &xl_pp.request.parallelism;
        assert_eq!((p.pp, p.micro_batch, p.grad_accum), (4, 4, Some(1)));
        assert!((xl_pp.measured_s - 3.5544).abs() < 1e-12);
        let gpt2_pp16 = out.rows.iter().find(|r| r.id.contains("line 5 GPT2-Large pp4")).unwrap();
        assert_eq!(
            (gpt2_pp16.request.parallelism.micro_batch, gpt2_pp16.request.parallelism.grad_accum),
            (16, Some(1))
        );
    }

    #[test]
    fn neusight_single_gpu_labels_become_one_gpu_requests() {
        let mut out = E2eData::default();
        neusight_single(&data(), &mut out).unwrap();
        // GPT-2/GPT-3/OPT training rows without a variant on catalog GPUs: A100 80GB PCIe 6, H100 6, L4 1,
        // V100 1, MI100 1, MI210 4; the BERT and Switch rows and MI250 (not in the catalog) are skipped.
        assert_eq!(out.rows.len(), 19);
        assert!(out.rows.iter().all(|r| r.source == "neusight-1gpu" && r.without_update));
        // H100 gpt3_xl batch 1: fw 326.716 ms + bw 606.721 ms = e2e 933.437 ms.
        let r = out.rows.iter().find(|r| r.id.contains("H100-SXM5-80GB GPT3-XL batch 1")).unwrap();
        assert!((r.measured_s - 0.933436834716797).abs() < 1e-12, "{}", r.measured_s);
        assert_eq!((r.request.model.hidden, r.request.parallelism.micro_batch), (3072, 1));
        assert_eq!((r.system.gpus_per_node, r.system.nodes), (1, 1));
        let opt = out.rows.iter().find(|r| r.group == "OPT-1.3B").unwrap();
        assert_eq!(opt.request.model.vocab, 50272);
        assert!(out.skipped.keys().any(|(s, why)| s == "neusight-1gpu" && why.contains("catalog")));
        assert!(out.skipped.keys().any(|(s, why)| s == "neusight-1gpu" && why.contains("BERT")));
    }

    #[test]
    fn nemo_step_time_comes_from_tokens_per_second() {
        let mut out = E2eData::default();
        nemo(&data(), &mut out).unwrap();
        // NeMo 24.07's LLAMA3-70B: 64 GPUs, GBS 128, seq 8192, 1,524 tokens/s/GPU → 128·8192/(1524·64) = 10.75 s.
        let r = out.rows.iter().find(|r| r.id.contains("LLAMA3-70B") && r.id.contains("docs/source")).unwrap();
        assert!((r.measured_s - 128.0 * 8192.0 / (1524.0 * 64.0)).abs() < 1e-9, "{}", r.measured_s);
        assert_eq!(r.request.precision, crate::hw::Precision::Fp8);
        assert_eq!(
            (r.request.parallelism.tp, r.request.parallelism.pp, r.request.parallelism.context_parallel),
            (4, 4, 2)
        );
        // Llama 3.1 405B on 1,024 H100 (TP 8, PP 8, CP 2, VP 8): Megatron-Bridge's recipe counts the embedding and
        // the loss as layers, so the row is represented (126 layers alone do not divide over pp·VP = 64).
        let r = out.rows.iter().find(|r| r.id.contains("line 106 ")).unwrap();
        let p = &r.request.parallelism;
        assert_eq!((p.tp, p.pp, p.context_parallel, p.virtual_stages, p.dp), (8, 8, 2, 8, 8));
        assert!(p.account_for_embedding_in_pipeline_split && p.account_for_loss_in_pipeline_split);
        assert!(crate::llm::validate(&r.request.model, p, r.request.precision, 4096).is_ok());
        // Blackwell rows are the predicted-only source on their presets: the GB200 NVL72 racks of 72 GPUs.
        let gb200 = out.rows.iter().find(|r| r.id.contains("LLAMA3_70B") && r.system.name == "gb200-nvl72").unwrap();
        assert_eq!((gb200.source, gb200.system.gpus_per_node), ("nemo-blackwell", 72));
        assert!(out.rows.iter().all(|r| (r.source == "nemo") == (r.system.name == "eval-dgx-h100")));
        // The precision cell's recipe is the request's: NVFP4 rows train in nvfp4 (Blackwell only), FP8-MX / MXFP8
        // rows with the mxfp8 recipe, FP8-CS rows with current (tensorwise) scaling.
        use crate::llm::recipe::Fp8Recipe;
        let nvfp4 = out.rows.iter().filter(|r| r.request.precision == crate::hw::Precision::Nvfp4);
        assert!(nvfp4.clone().count() > 0 && nvfp4.clone().all(|r| r.source == "nemo-blackwell"));
        let recipe = |r: &crate::llm::config::TrainingRequest| r.parallelism.fp8_recipe;
        assert!(out.rows.iter().any(|r| recipe(&r.request) == Some(Fp8Recipe::Mxfp8)));
        assert!(out.rows.iter().all(|r| recipe(&r.request) != Some(Fp8Recipe::Mxfp8) || r.source != "nemo"));
        assert_eq!(super::nemo_precision("FP8-CS (FP8-MX)"), Some(("fp8", Some("tensorwise"))));
        assert_eq!(super::nemo_precision("FP8"), Some(("fp8", None)));
    }

    #[test]
    fn nemo_gb300_rows_printed_in_configurations_that_cannot_run_are_traps() {
        let mut out = E2eData::default();
        nemo(&data(), &mut out).unwrap();
        let row = |line: &str| out.rows.iter().find(|r| r.id.contains(&format!("line {line} "))).unwrap();
        // Only lines 399 and 401 (26.02.01, DGX-GB300, Llama 3 70B) are traps.
        let traps: Vec<&str> = out.rows.iter().filter(|r| r.trap.is_some()).map(|r| r.id.as_str()).collect();
        assert_eq!(traps.len(), 2, "{traps:?}");
        assert!(row("399").trap.is_some() && row("401").trap.is_some());
        assert!(row("403").trap.is_none() && row("202").trap.is_none() && row("400").trap.is_none());
        // Line 399 as printed: TP 1, PP 1, no FSDP on 64 GPUs, MBS 2, GBS 256 → dp 64, 256 / (2 · 64) = 2 micro-batches.
        let p = &row("399").request.parallelism;
        assert_eq!((p.tp, p.pp, p.dp, p.micro_batch, p.zero_stage), (1, 1, 64, 2, 1));
        // Its per-GPU state without FSDP, by hand: Llama 3 70B holds 2 · 128,256 · 8,192 = 2,101,346,304 embedding
        // and output parameters and 80 layers of (2 · 8,192² + 2 · 8,192 · 1,024 + 3 · 8,192 · 28,672 + 2 · 8,192)
        // = 855,654,400, so 68,452,352,000 + 2,101,346,304 = 70,553,698,304 parameters; bf16 weights and gradients
        // 4 B each = 282.2 GB, the optimizer's fp32 shard 12 B / 64 = 13.2 GB: 295.5 GB > GB300's 288 GB.
        let m = &row("399").request.model;
        let layer = 2 * 8192u64.pow(2) + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192;
        let params = 80 * layer + 2 * 128_256 * 8192;
        assert_eq!((m.layers, m.hidden, m.ffn_hidden, m.vocab), (80, 8192, Some(28672), 128_256));
        assert_eq!(params, 70_553_698_304);
        assert!(params as f64 * (4.0 + 12.0 / 64.0) > 288e9);
        // Line 401 as printed: PP 4 without VP, MBS 2: dp 16, 256 / (2 · 16) = 8 micro-batches, bubble 3/8; line 202's
        // PP 4 · VP 5, MBS 1: 16 micro-batches, bubble 3/80. Measured: 256 · 8192 / (4,798 · 64) = 6.8295 s and
        // 2,097,152 / (4,864 · 64) = 6.7368 s; equal throughput needs (1 + 3/8)/(1 + 3/80) = 1.3253× per token.
        let (p401, p202) = (&row("401").request.parallelism, &row("202").request.parallelism);
        assert_eq!((p401.pp, p401.virtual_stages, p401.dp, p401.micro_batch), (4, 1, 16, 2));
        assert_eq!((p202.pp, p202.virtual_stages, p202.dp, p202.micro_batch), (4, 5, 16, 1));
        assert!((row("401").measured_s - 2_097_152.0 / 307_072.0).abs() < 1e-9, "{}", row("401").measured_s);
        assert!((row("202").measured_s - 2_097_152.0 / 311_296.0).abs() < 1e-9, "{}", row("202").measured_s);
        // The bubbles from the requests' own fields: (pp − 1)/(m · vp) with m = GBS / (MBS · dp).
        let bubble = |p: &crate::llm::config::ParallelSpec| {
            let m = p.global_batch.unwrap() / (p.micro_batch * p.dp);
            (p.pp - 1) as f64 / (m * p.virtual_stages) as f64
        };
        assert!(((1.0 + bubble(p401)) / (1.0 + bubble(p202)) - 1.3253).abs() < 1e-4);
        // … while the measured steps differ by 6.8295 / 6.7368 = 1.0138.
        assert!((row("401").measured_s / row("202").measured_s - 1.0138).abs() < 1e-4);
    }

    #[test]
    fn nemo_long_sequence_rows_convert_tflops_with_nemos_formula() {
        let mut out = E2eData::default();
        nemo_long(&data(), &mut out).unwrap();
        // All 17 rows: Llama-3 8B on B200 at 8k–1M tokens (8), Llama-2 7B on H100 at 4k–1M (9).
        assert_eq!(out.rows.len(), 17, "{:?}", out.skipped);
        assert!(out.rows.iter().all(|r| r.source == "nemo-long-cp"));
        // Llama-2 7B, 1M tokens on 1,024 H100 (tp 8, dp 4, cp 32), 4 sequences per step at 536 TFLOP/s per GPU.
        // NeMo's llama2 formula with B = 4, s = 1,048,576, L = 32, d = 4096, kv = h, f = 11,008, V = 32,000:
        // F = B·s·L·d²·(12 + 12 + 18·11008/4096 + 12·s/4096 + 6·32000/(32·4096))
        //   = 4·1048576·32·16777216·(24 + 48.375 + 3072 + 1.46484375) = 2.2518e15·3145.84 = 7.0838e18 FLOPs;
        // t = F / (536e12 · 1024) = 12.906 s.
        let r = out.rows.iter().find(|r| r.id.contains("LLAMA2-7B 1024K")).unwrap();
        let p = &r.request.parallelism;
        assert_eq!((p.tp, p.pp, p.dp, p.context_parallel, p.micro_batch, p.global_batch), (8, 1, 4, 32, 1, Some(4)));
        let f = 4.0
            * 1048576.0
            * 32.0
            * 4096.0f64.powi(2)
            * (24.0 + 18.0 * 11008.0 / 4096.0 + 12.0 * 1048576.0 / 4096.0 + 6.0 * 32000.0 / (32.0 * 4096.0));
        assert!((r.measured_s - f / (536e12 * 1024.0)).abs() < 1e-9 * r.measured_s, "{}", r.measured_s);
        assert!((r.measured_s - 12.906).abs() < 0.01, "{}", r.measured_s);
        // The B200 rows run on tp·pp·dp·cp GPUs: 1M tokens at tp 4 · dp 4 · cp 16 = 256.
        let b = out.rows.iter().find(|r| r.id.contains("LLAMA3-8B 1024K")).unwrap();
        assert_eq!(b.request.parallelism.context_parallel, 16);
        assert!(b.id.contains(" 256 GPUs"), "{}", b.id);
        // The 9 H100 rows (NeMo 24.03.01, whose launcher sets NVTE_FUSED_ATTN=0) ran FlashAttention-2; the 8 B200
        // rows (NeMo 25.04) the framework's default fused attention.
        use crate::llm::framework::AttentionKernel;
        let backend = |r: &E2eRow| r.request.parallelism.attention_backend;
        let flash2: Vec<_> = out.rows.iter().filter(|r| backend(r) == Some(AttentionKernel::Flash2)).collect();
        assert_eq!(flash2.len(), 9);
        assert!(flash2.iter().all(|r| r.id.contains("LLAMA2-7B") && r.system.name.contains("h100")));
        assert_eq!(out.rows.iter().filter(|r| backend(r).is_none() && r.id.contains("LLAMA3-8B")).count(), 8);
    }

    #[test]
    fn llmfoundry_rows_become_fsdp_requests() {
        let mut out = E2eData::default();
        llmfoundry(&data(), &mut out).unwrap();
        // All 216 rows: A100 40 GB (78), A100 80 GB (61), H100 (77); none offloads activations to the CPU.
        assert_eq!(out.rows.len(), 216);
        // README line 75: MPT-70B, seq 2048, 512 H100, micro-batch 8, grad_accum 1, FULL_SHARD, checkpointing,
        // amp_bf16; 4,096 × 2,048 tokens at 515,636 tokens/s = 16.2685 s.
        let r = out.rows.iter().find(|r| r.id.contains("line 75 ")).unwrap();
        let p = &r.request.parallelism;
        assert_eq!((p.tp, p.pp, p.dp, p.micro_batch, p.grad_accum, p.zero_stage), (1, 1, 512, 8, Some(1), 3));
        assert_eq!(p.recompute, crate::llm::config::Recompute::Full);
        assert_eq!(r.request.precision, crate::hw::Precision::Bf16);
        let m = &r.request.model;
        assert_eq!(
            (m.layers, m.hidden, m.heads, m.vocab, m.rotary, m.tied_embeddings),
            (80, 8192, 64, 50368, false, true)
        );
        assert!((r.measured_s - 4096.0 * 2048.0 / 515_636.0).abs() < 1e-3, "{}", r.measured_s);
        assert_eq!(r.system.gpus_per_node, 8);
        // SHARD_GRAD_OP is ZeRO-2; amp_fp8 is fp8.
        assert_eq!(out.rows.iter().filter(|r| r.request.parallelism.zero_stage == 2).count(), 6);
        assert_eq!(out.rows.iter().filter(|r| r.request.precision == crate::hw::Precision::Fp8).count(), 7);
    }

    #[test]
    fn dgxc_titles_give_the_parallel_configuration() {
        assert_eq!(title_param("Llama 3.1 70b BF16 (TP=4, PP=4, CP=2, VP=5, MBS=1, GA=64)", "VP"), Some(5));
        assert_eq!(title_param("NeMo Megatron BF16 (TP=4,PP=8, MBS=1, VP=12, SEQ=2048)", "PP"), Some(8));
        let mut out = E2eData::default();
        dgxc(&data(), &mut out).unwrap();
        // Llama 3.1 405B (TP 8, PP 9, CP 2) on 1,152 GPUs: dp 8, GBS = 1·63·8 = 504.
        let r = out.rows.iter().find(|r| r.id.contains("405b") && r.id.contains("1152x")).unwrap();
        assert_eq!((r.request.parallelism.dp, r.request.parallelism.global_batch), (8, Some(504)));
        // 32 GPUs cannot hold TP 8 · PP 9 · CP 2 = 144: a reduced-layer proxy, skipped.
        assert!(!out.rows.iter().any(|r| r.id.contains("405b") && r.id.contains(" 32x")));
        assert!(architecture("Nemotron4 15b").is_some() && architecture("Grok 1 314b").is_none());
    }
}

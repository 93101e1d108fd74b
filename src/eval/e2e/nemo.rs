//! NeMo / Megatron-Bridge performance tables, the dense architectures they and DGX Cloud name, and NeMo's
//! pre-training defaults.

use std::path::Path;

use serde_json::{json, Value};

use super::{csv_records, dgx_h100, request, E2eData, E2eRow};
use crate::hw::SystemSpec;

/// Architectures of the dense models in the NeMo and DGX Cloud tables (public configurations: Meta's Llama 2 /
/// Llama 3 / 3.1 model cards, GPT-3 (Brown et al. 2020, Table 2.1) as NeMo configures it with the GPT-2
/// vocabulary, Nemotron-4 15B and 340B technical reports — squared-ReLU MLPs, modeled as the GeLU MLP of the same
/// width, which costs the same GEMMs). `None` for models not modeled (mixture-of-experts, hybrid Mamba, unknown).
pub fn architecture(name: &str) -> Option<(Value, u32)> {
    let llama = |l: u32, d: u32, h: u32, kv: u32, f: u32, v: u32| {
        json!({"name": name, "layers": l, "hidden": d, "heads": h, "kv_heads": kv, "ffn_hidden": f, "vocab": v,
            "norm": "rmsnorm", "activation": "swiglu", "attention": "flash"})
    };
    let gpt = |l: u32, d: u32, h: u32| {
        json!({"name": name, "layers": l, "hidden": d, "heads": h, "vocab": 50257, "attention": "flash",
            "rotary": false, "tied_embeddings": true, "dropout": 0.1})
    };
    let nemotron = |l: u32, d: u32, h: u32, kv: u32| {
        json!({"name": name, "layers": l, "hidden": d, "heads": h, "kv_heads": kv, "ffn_hidden": 4 * d,
            "vocab": 256000, "attention": "flash"})
    };
    let n = name.to_ascii_lowercase().replace([' ', '-', '_', '.'], "");
    Some(match n.as_str() {
        "llama27b" => (llama(32, 4096, 32, 32, 11008, 32000), 4096),
        "llama213b" => (llama(40, 5120, 40, 40, 13824, 32000), 4096),
        "llama270b" => (llama(80, 8192, 64, 8, 28672, 32000), 4096),
        "llama38b" | "llama318b" => (llama(32, 4096, 32, 8, 14336, 128256), 8192),
        "llama370b" | "llama3170b" => (llama(80, 8192, 64, 8, 28672, 128256), 8192),
        "llama31405b" | "llama3405b" => (llama(126, 16384, 128, 8, 53248, 128256), 8192),
        "gpt35b" => (gpt(24, 4096, 32), 2048),
        "gpt320b" => (gpt(44, 6144, 48), 2048),
        "gpt3175b" | "nemomegatron175b" => (gpt(96, 12288, 96), 2048),
        "nemotron415b" => (nemotron(32, 6144, 48, 8), 4096),
        "nemotron340b" | "nemotron4340b" => (nemotron(96, 18432, 96, 8), 4096),
        _ => return None,
    })
}

/// Megatron/NeMo's pre-training defaults for the performance recipes: sequence parallelism with tp > 1, the
/// distributed optimizer, flash attention, no recomputation, layers split evenly (interleaved with VP > 1), and
/// the communication overlaps NeMo's and Megatron-Bridge's overlap configuration turns on
/// (`nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py` `MegatronCommOverlapCallback`,
/// `megatron/bridge/training/comm_overlap.py` `CommOverlapConfig`): with the distributed optimizer and dp > 1
/// `overlap_grad_reduce` and `overlap_param_gather` in buckets of 128 Mi parameters, `align_param_gather` with
/// pp > 1 and VP > 1; `overlap_p2p_comm` with pp > 1 and VP > 1; and Transformer Engine's `tp_comm_overlap`,
/// which the performance recipes request (`tp_comm_overlap=True` with the `userbuffers_*_h100_*` configurations of
/// the GPT-3 175B and Llama-3 70B recipes; `tp > 1` for Llama-3 8B) and the callback keeps with tp ≥ 2 and
/// sequence parallelism. FSDP rows (ZeRO-3, no distributed optimizer) keep only the overlapped reduction.
/// Assumption: the NeMo 24.07 (NeMo 1.0 launcher) rows ran the same overlaps.
pub(super) fn nemo_parallelism(tp: u64, pp: u64, cp: u64, vp: u64, mbs: u64, gbs: u64, dp: u64, fsdp: bool) -> Value {
    let dp_overlap = !fsdp && dp * cp > 1;
    let interleaved = pp > 1 && vp > 1;
    let mut p = json!({"tp": tp, "pp": pp, "dp": dp, "context_parallel": cp, "virtual_stages": vp,
        "micro_batch": mbs, "global_batch": gbs, "sequence_parallel": tp > 1, "distributed_optimizer": !fsdp,
        "zero_stage": if fsdp { 3 } else { 1 }, "overlap_grad_reduce": true, "layer_split": "uniform",
        "overlap_param_gather": dp_overlap, "align_param_gather": dp_overlap && interleaved,
        "overlap_p2p_comm": interleaved, "tp_comm_overlap": tp > 1});
    if dp_overlap {
        p["bucket_size"] = json!(128u64 << 20);
    }
    p
}

/// Transformer Engine's `tp_comm_overlap` on the nvfp4 rows: off. Megatron-Bridge's performance configurations
/// of the dense models with nvfp4 rows set `cfg.comm_overlap.tp_comm_overlap = False if precision == "nvfp4"
/// else cfg.comm_overlap.tp_comm_overlap` on every Blackwell GPU (`scripts/performance/configs/llama/
/// llama3_llm_pretrain.py` `llama3_70b_pretrain_config_{b200,b300,gb200,gb300}` and
/// `llama3_8b_pretrain_config_*`; `llama31_llm_pretrain.py` `llama31_405b_pretrain_config_{b200,b300,gb200,
/// gb300}`), so the rows ran their sequence-parallel collectives through NCCL, unoverlapped.
const NVFP4_TP_COMM_OVERLAP: bool = false;

/// Why the Blackwell row at `line` of `source_path` on `system` is a data trap, or `None`: a configuration printed
/// in the table that cannot have run as printed (the rows are still predicted and scored; the report shows each
/// subset holding them a second time without them, [`super::E2eRow::trap`]). Two Llama 3 70B rows of the 26.02.01
/// container on DGX-GB300 (`performance-summary-archive.md`, 64 GPUs, GBS 256, MBS 2, sequence 8192):
/// - line 399, NVFP4, TP 1 · PP 1, FSDP 0, 7,002 tokens/s/GPU: without FSDP every GPU holds the whole model's bf16
///   weights and gradients, 70.55 × 10⁹ parameters × 4 B = 282.2 GB, and the distributed optimizer's fp32 shard
///   (12 B / 64 each, 13.2 GB): 295.4 GB before any activation, over the GPU's 288 GB (GB300 NVL72 datasheet). The
///   same container's FP8 row (line 403) prints the same cells with FSDP 64, as do lines 201, 306 and 487.
/// - line 401, MXFP8, TP 1 · PP 4 without VP, FSDP 0, 4,798 tokens/s/GPU: 256 / (2 · 16) = 8 micro-batches, so
///   1F1B's bubble is (pp − 1)/m = 3/8 of the compute, against 3/(5 · 16) = 3/80 for the PP 4 · VP 5, MBS 1 GB300
///   MXFP8 rows of the other containers (lines 202, 304, 485: 4,864, 4,742, 4,596). Matching them would need the
///   micro-batch of 2 alone to run each token (11/8)/(83/80) = 1.325× faster; the train-split B300 fp8 GEMMs
///   (aiconfigurator TensorRT-LLM table) take 0.97–1.10 of the per-token time at 16,384 rows as at 8,192 for
///   Llama 3 70B's shapes.
fn trap(source_path: &str, line: &str, system: &str) -> Option<&'static str> {
    if source_path != "docs/performance-summary-archive.md" || system != "DGX-GB300" {
        return None;
    }
    match line {
        "399" => Some(
            "26.02.01 GB300 NVFP4 70B printed TP 1, PP 1 without FSDP: bf16 weights and gradients alone (282 GB) plus \
             the optimizer shard exceed the GPU's 288 GB; the same container's FP8 row (line 403) prints FSDP 64",
        ),
        "401" => Some(
            "26.02.01 GB300 MXFP8 70B printed PP 4 without VP at MBS 2 (8 micro-batches, bubble 3/8) yet runs at the \
             throughput of the PP 4 · VP 5, MBS 1 rows (bubble 3/80): 1.3x faster per token from MBS 2 alone",
        ),
        _ => None,
    }
}

fn first_number(cell: &str) -> Option<f64> {
    let head = cell.split('(').next()?.replace([',', '*'], "");
    head.trim().parse::<f64>().ok()
}

/// The source and system of a table's `System` cell: DGX-H100 (and NeMo 24.07's rows, which name none) is the
/// fitted source `nemo`; the Blackwell systems, DGX B200 and B300 and the GB200 / GB300 NVL72 racks, are the
/// predicted-only source `nemo-blackwell` on their presets (no constant is fitted on them).
fn system_of(system: &str, legacy: bool) -> Option<(&'static str, SystemSpec)> {
    let preset = |name: &str| crate::hw::presets().into_iter().find(|p| p.name == name);
    match system {
        "DGX-H100" => Some(("nemo", dgx_h100())),
        "" if legacy => Some(("nemo", dgx_h100())),
        "DGX-B200" => Some(("nemo-blackwell", preset("dgx-b200")?)),
        "DGX-B300" => Some(("nemo-blackwell", preset("dgx-b300")?)),
        "DGX-GB200" => Some(("nemo-blackwell", preset("gb200-nvl72")?)),
        "DGX-GB300" => Some(("nemo-blackwell", preset("gb300-nvl72")?)),
        _ => None,
    }
}

/// NeMo / Megatron-Bridge performance tables (`nemo_perf_tables_long.csv`), pre-training rows of dense models:
/// the step time is GBS · sequence / (tokens/s/GPU · GPUs) — the tables' tokens per second need no FLOPs formula
/// (their TFLOP/s column is checked against it in the report). DGX-H100 rows are the source `nemo`; the Blackwell
/// rows (DGX B200, B300, GB200 / GB300 NVL72) the predicted-only `nemo-blackwell` ([`system_of`]).
/// Mixture-of-experts or hybrid models, fine-tuning tasks and rows without a precision are skipped; the precision
/// cell's recipe is passed as `fp8_recipe` ([`super::nemo_precision`]); nvfp4 rows run without
/// `tp_comm_overlap`, as their recipes state ([`NVFP4_TP_COMM_OVERLAP`]). Two GB300 rows whose printed
/// configuration cannot have run as printed carry their reason as a data trap ([`trap`]).
/// NeMo 24.07's table (no precision column) is FP8 (its SOURCE.txt).
pub fn nemo(data: &Path, out: &mut E2eData) -> Result<(), String> {
    for r in csv_records(&data.join("nemo_megatron_bridge_perf/nemo_perf_tables_long.csv"))? {
        let g = |k: &str| r.get(k).map(String::as_str).unwrap_or("");
        let system = if g("System").is_empty() { g("h4").trim_start_matches("System: ") } else { g("System") };
        let legacy = g("source_path").starts_with("docs/source/performance");
        let Some((source, sys)) = system_of(system, legacy) else {
            out.skip("nemo", "unknown system");
            continue;
        };
        let task = format!("{} {}", g("h3"), g("Task"));
        if task.contains("Finetun") || task.contains("LoRA") || task.contains("SFT") {
            out.skip(source, "fine-tuning");
            continue;
        }
        let name = if g("Model").is_empty() { g("h4").trim_start_matches("Model: ") } else { g("Model") };
        let Some((model, seq)) = architecture(name) else {
            out.skip(source, "mixture-of-experts, hybrid or unknown architecture");
            continue;
        };
        let precision = if legacy { Some(("fp8", None)) } else { super::nemo_precision(g("Precision")) };
        let Some((precision, recipe)) = precision else {
            out.skip(source, "no precision given");
            continue;
        };
        let num = |k: &str| first_number(g(k));
        let (Some(gpus), Some(gbs), Some(mbs), Some(tps)) =
            (num("#-GPUs"), num("GBS"), num("MBS"), num("Tokens / sec / GPU"))
        else {
            out.skip(source, "missing numbers");
            continue;
        };
        let par = |k: &str| num(k).unwrap_or(1.0).max(1.0) as u64;
        let (tp, pp, cp, vp) = (par("TP"), par("PP"), par("CP"), par("VP"));
        let seq_len = num("Sequence Length").map(|s| s as u32).unwrap_or(seq);
        if num("EP").unwrap_or(1.0) > 1.0 {
            out.skip(source, "expert parallelism");
            continue;
        }
        let fsdp = num("FSDP").unwrap_or(0.0) > 0.0;
        let (gpus, gbs, mbs) = (gpus as u64, gbs as u64, mbs as u64);
        if gpus % (tp * pp * cp) != 0 {
            out.skip(source, "GPUs not a multiple of tp·pp·cp");
            continue;
        }
        let dp = gpus / (tp * pp * cp);
        let mut model = model;
        model["seq_len"] = json!(seq_len);
        let mut parallelism = nemo_parallelism(tp, pp, cp, vp, mbs, gbs, dp, fsdp);
        if model["layers"] == json!(126) {
            // Megatron-Bridge's Llama 3.1 405B recipe (`recipes/llama/llama3.py` `llama31_405b_pretrain_config`)
            // counts the embedding and the loss as pipeline layers: 126 + 2 = 128 over pp·VP.
            parallelism["account_for_embedding_in_pipeline_split"] = json!(true);
            parallelism["account_for_loss_in_pipeline_split"] = json!(true);
        }
        if let Some(recipe) = recipe {
            parallelism["fp8_recipe"] = json!(recipe);
        }
        if precision == "nvfp4" {
            parallelism["tp_comm_overlap"] = json!(NVFP4_TP_COMM_OVERLAP);
        }
        let Some(request) = request(&sys.name, model, parallelism, precision, "nemo") else {
            out.skip(source, "request does not parse");
            continue;
        };
        let step = gbs as f64 * seq_len as f64 / (tps * gpus as f64);
        out.rows.push(E2eRow {
            source,
            id: format!("{} line {} {name} {gpus} GPUs {precision}", g("source_path"), g("line")),
            system: sys,
            request,
            measured_s: step,
            without_update: false,
            group: name.to_string(),
            trap: trap(g("source_path"), g("line"), system),
        });
    }
    Ok(())
}

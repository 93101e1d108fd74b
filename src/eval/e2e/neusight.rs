//! NeuSight's end-to-end runs: its 4-GPU DP/TP/PP set and its single-GPU training labels, with the Hugging Face
//! models it traced.

use std::path::Path;

use serde_json::{json, Value};

use super::super::datasets::read;
use super::{csv_records, request, system, E2eData, E2eRow};

/// The Hugging Face modules NeuSight traced, by NeuSight's model name (`summary_distributed.csv`'s
/// `GPT2-Large`, `GPT3-XL`; `labels_e2e_summary.csv`'s `gpt2_large`, `gpt3_xl`, `gpt3_27`, `opt_13`): the
/// request's model and the group name. The sizes are read off NeuSight's own traced graphs
/// (`labels_e2e_opgraph/<GPU>/<model>-train-<seq>-<batch>.csv.gz`, the `input_shapes` of the first block's
/// GEMMs and of `lm_head`), not the papers: its `gpt3_xl` is 24 layers of hidden 3,072 with 24 heads of 128
/// (`addmm` [2048, 3072]·[3072, 9216], `matmul` [1, 24, 2048, 128]) — not GPT-3 XL's 2,048 (Brown et al. 2020);
/// `gpt2_large` 36 × 1,280, 20 heads; `gpt3_27` 32 × 2,560, 32 heads of 80; `opt_13` 24 × 2,048, 32 heads,
/// ffn 8,192, vocabulary 50,272. Every model runs HF's unfused attention (QKᵀ, scale, causal mask, softmax,
/// dropout, ·V as separate kernels; perfcast's `unfused` counts all but the scale pass), tied embeddings, learned
/// positions and dropout 0.1. Assumption: OPT's ReLU MLP is modeled as the GeLU MLP of the same width (the same
/// GEMMs; one element-wise pass either way).
/// `None` for models not modeled (BERT's encoder and masked-LM head, Switch's experts).
fn neusight_model(name: &str) -> Option<(Value, &'static str)> {
    let gpt = |l: u32, d: u32, h: u32, s: u32| {
        json!({"layers": l, "hidden": d, "heads": h, "seq_len": s, "vocab": 50257, "attention": "unfused",
            "rotary": false, "tied_embeddings": true, "dropout": 0.1})
    };
    Some(match name.to_ascii_lowercase().replace(['-', '_', '.'], "").as_str() {
        "gpt2large" => (gpt(36, 1280, 20, 1024), "GPT2-Large"),
        "gpt3xl" => (gpt(24, 3072, 24, 2048), "GPT3-XL"),
        "gpt327" => (gpt(32, 2560, 32, 2048), "GPT3-2.7B"),
        "opt13" => {
            let mut m = gpt(24, 2048, 32, 2048);
            m["vocab"] = json!(50272);
            (m, "OPT-1.3B")
        }
        _ => return None,
    })
}

/// NeuSight's distributed set (`summary_distributed.csv`): GPT-2 Large and NeuSight's GPT3-XL ([`neusight_model`])
/// on 4 A100-SXM4-40GB or 4 H100 SXM, DP 4, TP 4 or PP 4, forward and backward only (no optimizer step), FP32
/// with TF32 off (NeuSight's setup). Assumptions: one 4-GPU NVLink node (300 GB/s A100, 450 GB/s H100); DP splits
/// the global batch over the ranks and reduces gradients in buckets during the backward pass (PyTorch DDP).
/// PP ("pp4_1" in NeuSight's labels) runs the global batch as **one** micro-batch through the four stages one
/// after another (no pipelining): the measured pipeline times equal NeuSight's single-GPU times of the whole batch
/// (`labels_e2e_summary.csv`, H100: GPT-2 Large batch 4 pp4_1 637.5 ms, one GPU 638.8 ms; GPT3-XL batch 4 3,554 ms
/// against 4 × 933 ms for batch 1), where micro-batches of 1 in 1F1B would take (4 + 3)/4 of one GPU's batch-1
/// time (H100 GPT-2 Large: 1.75 × 184 = 322 ms).
pub fn neusight(data: &Path, out: &mut E2eData) -> Result<(), String> {
    let bytes = read(&data.join("neusight/summary_distributed.csv"))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut r = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(text.as_bytes());
    let rows: Vec<Vec<String>> =
        r.records().filter_map(|x| x.ok()).map(|x| x.iter().map(|c| c.trim().to_string()).collect()).collect();
    let (mut model, mut gb) = (String::new(), 0u64);
    for (line, row) in rows.iter().enumerate() {
        if !row.first().map_or(true, |c| c.is_empty()) {
            model = row[0].clone();
        }
        if let Some(b) = row.get(1).and_then(|c| c.parse::<u64>().ok()) {
            gb = b;
        }
        if row.get(2).map(String::as_str) != Some("Measured Latency (ms)") {
            continue;
        }
        let Some((spec, _)) = neusight_model(&model) else {
            out.skip("neusight", "unknown model");
            continue;
        };
        for (col, gpu, kind) in [
            (3, "A100-SXM4-40GB", "dp"),
            (4, "A100-SXM4-40GB", "tp"),
            (5, "A100-SXM4-40GB", "pp"),
            (6, "H100-SXM5-80GB", "dp"),
            (7, "H100-SXM5-80GB", "tp"),
            (8, "H100-SXM5-80GB", "pp"),
        ] {
            let Some(ms) = row.get(col).and_then(|c| c.parse::<f64>().ok()) else { continue };
            let bw = if gpu.starts_with("A100") { 300.0 } else { 450.0 };
            let sys = system(
                &format!("eval-neusight-{}", &gpu[..4].to_lowercase()),
                gpu,
                4,
                1,
                ("nvlink", bw),
                ("none", 25.0),
            );
            let par = match kind {
                "dp" => json!({"dp": 4, "micro_batch": gb / 4, "grad_accum": 1, "zero_stage": 0,
                    "overlap_grad_reduce": true, "layer_split": "uniform"}),
                "tp" => json!({"tp": 4, "micro_batch": gb, "grad_accum": 1, "zero_stage": 0, "layer_split": "uniform"}),
                _ => json!({"pp": 4, "micro_batch": gb, "grad_accum": 1, "zero_stage": 0, "layer_split": "uniform"}),
            };
            let Some(request) = request(&sys.name, spec.clone(), par, "fp32", "hf") else {
                out.skip("neusight", "request does not parse");
                continue;
            };
            out.rows.push(E2eRow {
                source: "neusight",
                id: format!("summary_distributed.csv line {} {model} {kind}4 {gpu}", line + 1),
                system: sys,
                request,
                measured_s: ms * 1e-3,
                without_update: true,
                group: model.clone(),
                trap: None,
            });
        }
    }
    Ok(())
}

/// NeuSight's single-GPU training labels (`labels_e2e_summary.csv`, `mode` train, no `variant`): forward plus
/// backward of one batch on one GPU, FP32 with TF32 off, no optimizer step (the sum of the JSON's `fw_latency` and
/// `bwall_latency`, which is its `e2e_latency`), for the models [`neusight_model`] knows on GPUs the catalog knows
/// (its directory name with `_` read as a space: `NVIDIA_H100_80GB_HBM3` → H100 SXM5). The parallel rows
/// (`variant` dp4/tp4/pp4_1) are [`neusight`]'s. The per-GPU compute model with no parallelism: the cleanest check
/// of FP32 operator times.
pub fn neusight_single(data: &Path, out: &mut E2eData) -> Result<(), String> {
    const SOURCE: &str = "neusight-1gpu";
    for (i, r) in csv_records(&data.join("neusight/labels_e2e_summary.csv"))?.into_iter().enumerate() {
        let field = |k: &str| r.get(k).map(String::as_str).unwrap_or("");
        if field("mode") != "train" || !field("variant").is_empty() {
            continue;
        }
        let Some((mut spec, name)) = neusight_model(field("model")) else {
            out.skip(SOURCE, "model not modeled (BERT encoder, Switch experts)");
            continue;
        };
        let Some(gpu) = crate::hw::catalog::lookup(&field("gpu_dir").replace('_', " ")) else {
            out.skip(SOURCE, "GPU not in the catalog");
            continue;
        };
        let (Ok(seq), Ok(batch), Ok(ms)) =
            (field("seq_len").parse::<u32>(), field("batch").parse::<u32>(), field("e2e_latency_ms").parse::<f64>())
        else {
            out.skip(SOURCE, "unreadable row");
            continue;
        };
        spec["seq_len"] = json!(seq);
        let name_of_system = format!("eval-neusight-1gpu-{}", gpu.spec.name);
        let sys = system(&name_of_system, &gpu.spec.name, 1, 1, ("pcie", 32.0), ("none", 25.0));
        let par = json!({"micro_batch": batch, "grad_accum": 1, "zero_stage": 0});
        let Some(request) = request(&sys.name, spec, par, "fp32", "hf") else {
            out.skip(SOURCE, "request does not parse");
            continue;
        };
        out.rows.push(E2eRow {
            source: SOURCE,
            id: format!("labels_e2e_summary.csv row {} {} {name} batch {batch}", i + 1, gpu.spec.name),
            system: sys,
            request,
            measured_s: ms * 1e-3,
            without_update: true,
            group: name.to_string(),
            trap: None,
        });
    }
    Ok(())
}

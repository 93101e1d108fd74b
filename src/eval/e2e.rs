//! End-to-end training measurements of `../shared/data` (DATA.md: vTrain, NeuSight's distributed runs,
//! NeMo/Megatron-Bridge and DGX Cloud tables) turned into prediction requests with their measured iteration time.
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
    /// `vtrain`, `neusight`, `neusight-1gpu`, `nemo`, `dgxc`.
    pub source: &'static str,
    /// Where it comes from (file and line or table title and column).
    pub id: String,
    /// The system it ran on.
    pub system: SystemSpec,
    pub request: TrainingRequest,
    /// Measured time of one iteration, s.
    pub measured_s: f64,
    /// The measurement covers forward and backward only (NeuSight): the optimizer update is not counted.
    pub without_update: bool,
    /// Model configuration (for grouped cross-validation).
    pub group: String,
}

/// The rows of all sources, and the rows skipped per source with the reason.
#[derive(Debug, Default)]
pub struct E2eData {
    pub rows: Vec<E2eRow>,
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

fn request(system: &str, model: Value, parallelism: Value, precision: &str) -> Option<TrainingRequest> {
    serde_json::from_value(json!({"system": system, "model": model, "parallelism": parallelism,
        "precision": precision}))
    .ok()
}

/// vTrain's single-node set: 1,440 Megatron-DeepSpeed GPT runs on one 8× A100 node, fp16, full activation
/// recompute, 1F1B, no gradient bucketing (vTrain `config/validation/single/*.json`: `use_checkpoint` true,
/// `use_gradient_bucket` false). Assumptions: Megatron's GPT dropout 0.1; A100-SXM4-80GB on NVSwitch (vTrain's trace directory says
/// only "A100"; its NCCL all-reduce table reaches 229 GB/s bus bandwidth on 8 GPUs, an NVSwitch node); the GPT-2
/// vocabulary (50,257) with tied embeddings and learned positions (Megatron's GPT); Megatron's fused softmax;
/// plain data parallelism (ZeRO-0) with the all-reduce after the flush; layers split evenly over stages
/// (Megatron-DeepSpeed's `type:transformer` partition).
pub fn vtrain(data: &Path, out: &mut E2eData) -> Result<(), String> {
    let sys = system("eval-vtrain-a100", "A100-SXM4-80GB", 8, 1, ("nvswitch", 300.0), ("none", 25.0));
    for (i, r) in csv_records(&data.join("vtrain/vtrain_ground_truth_singlenode_a100.csv"))?.iter().enumerate() {
        let n = |k: &str| r.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let (layers, hidden, heads, seq) = (n("layers"), n("hidden"), n("heads"), n("seq_len"));
        let model = json!({"layers": layers, "hidden": hidden, "heads": heads, "seq_len": seq, "vocab": 50257,
            "attention": "fused_softmax", "rotary": false, "tied_embeddings": true, "dropout": 0.1});
        let par = json!({"tp": n("TP"), "pp": n("PP"), "dp": n("DP"), "micro_batch": n("micro_batch"),
            "global_batch": n("global_batch"), "recompute": "full", "zero_stage": 0, "layer_split": "uniform"});
        let Some(request) = request(&sys.name, model, par, "fp16") else {
            out.skip("vtrain", "request does not parse");
            continue;
        };
        let ms: f64 = r.get("iter_time_ms").and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
        out.rows.push(E2eRow {
            source: "vtrain",
            id: format!("vtrain_ground_truth_singlenode_a100.csv row {}", i + 1),
            system: sys.clone(),
            request,
            measured_s: ms * 1e-3,
            without_update: false,
            group: format!("h{hidden}-L{layers}"),
        });
    }
    Ok(())
}

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
            let Some(request) = request(&sys.name, spec.clone(), par, "fp32") else {
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
        let Some(request) = request(&sys.name, spec, par, "fp32") else {
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
        });
    }
    Ok(())
}

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
fn nemo_parallelism(tp: u64, pp: u64, cp: u64, vp: u64, mbs: u64, gbs: u64, dp: u64, fsdp: bool) -> Value {
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

fn first_number(cell: &str) -> Option<f64> {
    let head = cell.split('(').next()?.replace([',', '*'], "");
    head.trim().parse::<f64>().ok()
}

fn precision_of(p: &str) -> Option<&'static str> {
    let p = p.to_ascii_uppercase();
    if p.starts_with("BF16") {
        Some("bf16")
    } else if p.starts_with("FP8") {
        Some("fp8")
    } else {
        None
    }
}

/// NeMo / Megatron-Bridge performance tables (`nemo_perf_tables_long.csv`), DGX-H100 pre-training rows of dense
/// models: the step time is GBS · sequence / (tokens/s/GPU · GPUs) — the tables' tokens per second need no FLOPs
/// formula (their TFLOP/s column is checked against it in the report). Rows on Blackwell systems (no catalog GPU),
/// mixture-of-experts or hybrid models, fine-tuning tasks and rows without a precision are skipped. NeMo 24.07's
/// table (no precision column) is FP8 (its SOURCE.txt).
pub fn nemo(data: &Path, out: &mut E2eData) -> Result<(), String> {
    let sys = dgx_h100();
    for r in csv_records(&data.join("nemo_megatron_bridge_perf/nemo_perf_tables_long.csv"))? {
        let g = |k: &str| r.get(k).map(String::as_str).unwrap_or("");
        let system = if g("System").is_empty() { g("h4").trim_start_matches("System: ") } else { g("System") };
        let legacy = g("source_path").starts_with("docs/source/performance");
        if !(system == "DGX-H100" || (legacy && system.is_empty())) {
            out.skip("nemo", "not a DGX-H100 row (GPU not in the catalog)");
            continue;
        }
        let task = format!("{} {}", g("h3"), g("Task"));
        if task.contains("Finetun") || task.contains("LoRA") || task.contains("SFT") {
            out.skip("nemo", "fine-tuning");
            continue;
        }
        let name = if g("Model").is_empty() { g("h4").trim_start_matches("Model: ") } else { g("Model") };
        let Some((model, seq)) = architecture(name) else {
            out.skip("nemo", "mixture-of-experts, hybrid or unknown architecture");
            continue;
        };
        let precision = if legacy { Some("fp8") } else { precision_of(g("Precision")) };
        let Some(precision) = precision else {
            out.skip("nemo", "no precision given");
            continue;
        };
        let num = |k: &str| first_number(g(k));
        let (Some(gpus), Some(gbs), Some(mbs), Some(tps)) =
            (num("#-GPUs"), num("GBS"), num("MBS"), num("Tokens / sec / GPU"))
        else {
            out.skip("nemo", "missing numbers");
            continue;
        };
        let par = |k: &str| num(k).unwrap_or(1.0).max(1.0) as u64;
        let (tp, pp, cp, vp) = (par("TP"), par("PP"), par("CP"), par("VP"));
        let seq_len = num("Sequence Length").map(|s| s as u32).unwrap_or(seq);
        if num("EP").unwrap_or(1.0) > 1.0 {
            out.skip("nemo", "expert parallelism");
            continue;
        }
        let fsdp = num("FSDP").unwrap_or(0.0) > 0.0;
        let (gpus, gbs, mbs) = (gpus as u64, gbs as u64, mbs as u64);
        if gpus % (tp * pp * cp) != 0 {
            out.skip("nemo", "GPUs not a multiple of tp·pp·cp");
            continue;
        }
        let dp = gpus / (tp * pp * cp);
        let mut model = model;
        model["seq_len"] = json!(seq_len);
        let Some(request) = request(&sys.name, model, nemo_parallelism(tp, pp, cp, vp, mbs, gbs, dp, fsdp), precision)
        else {
            out.skip("nemo", "request does not parse");
            continue;
        };
        let step = gbs as f64 * seq_len as f64 / (tps * gpus as f64);
        out.rows.push(E2eRow {
            source: "nemo",
            id: format!("{} line {} {name} {gpus} GPUs {precision}", g("source_path"), g("line")),
            system: sys.clone(),
            request,
            measured_s: step,
            without_update: false,
            group: name.to_string(),
        });
    }
    Ok(())
}

fn title_param(title: &str, key: &str) -> Option<u64> {
    let i = title.find(&format!("{key}="))?;
    let rest = &title[i + key.len() + 1..];
    rest.chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().ok()
}

/// DGX Cloud benchmarking step times (`dgxc_step_times_tidy.csv`), H100 rows whose table title carries the
/// parallel configuration (Llama 3.1 8B/70B/405B, NeMo Megatron GPT-3 175B, Nemotron-4 15B/340B), NeMo
/// defaults as for [`nemo`]. GBS from the column header, else MBS · GA · dp. Rows whose GPU count is not a
/// multiple of tp·pp·cp (the reduced-layer proxy configurations of small GPU counts), or whose header GBS
/// contradicts the title's GA, are skipped; repeated (configuration, GPUs, step time) rows across README commits
/// count once.
pub fn dgxc(data: &Path, out: &mut E2eData) -> Result<(), String> {
    let sys = dgx_h100();
    let mut seen = std::collections::BTreeSet::new();
    for r in csv_records(&data.join("dgxc_benchmarking_step_times/dgxc_step_times_tidy.csv"))? {
        let g = |k: &str| r.get(k).map(String::as_str).unwrap_or("");
        let title = g("table_title");
        if g("gpu_parsed") != "H100" || !title.contains("TP=") {
            out.skip("dgxc", "not H100 or no parallel configuration in the title");
            continue;
        }
        if title.contains("Finetuning") || title.contains("Maxtext") || title.contains("Paxml") {
            out.skip("dgxc", "fine-tuning or a JAX framework");
            continue;
        }
        // "Llama 3.1 405b 24.09 BF16 (…)" → "Llama 3.1 405b": the words up to the size.
        let name = if title.starts_with("NeMo Megatron") {
            "GPT3-175B".to_string()
        } else {
            let mut words = Vec::new();
            for w in title.split_whitespace() {
                words.push(w);
                if w.ends_with(['b', 'B']) && w.starts_with(|c: char| c.is_ascii_digit()) {
                    break;
                }
            }
            words.join(" ")
        };
        let Some((mut model, seq)) = architecture(&name) else {
            out.skip("dgxc", "unknown architecture");
            continue;
        };
        let precision = if title.contains("FP8") { "fp8" } else { "bf16" };
        let p = |k: &str| title_param(title, k);
        let (tp, pp, cp, vp, mbs) = (
            p("TP").unwrap_or(1),
            p("PP").unwrap_or(1),
            p("CP").unwrap_or(1),
            p("VP").unwrap_or(1),
            p("MBS").unwrap_or(1),
        );
        let seq_len = p("SEQ").unwrap_or(seq as u64);
        let Ok(gpus) = g("n_gpus_parsed").parse::<u64>() else { continue };
        let step: f64 = g("step_time_s").replace(' ', "").parse().unwrap_or(f64::NAN);
        if gpus % (tp * pp * cp) != 0 || !step.is_finite() {
            out.skip("dgxc", "GPUs not a multiple of tp·pp·cp (proxy configuration)");
            continue;
        }
        let dp = gpus / (tp * pp * cp);
        let gbs = match (g("gbs_parsed").parse::<u64>().ok(), p("GA")) {
            (Some(gbs), Some(ga)) if gbs != mbs * ga * dp => {
                out.skip("dgxc", "GBS contradicts GA");
                continue;
            }
            (Some(gbs), _) => gbs,
            (None, Some(ga)) => mbs * ga * dp,
            (None, None) => {
                out.skip("dgxc", "no batch size");
                continue;
            }
        };
        if !seen.insert((title.replace(" 24.09", "").replace(" 24.11", ""), gpus, g("step_time_s").to_string())) {
            out.skip("dgxc", "same measurement in another README version");
            continue;
        }
        model["seq_len"] = json!(seq_len);
        let Some(request) = request(&sys.name, model, nemo_parallelism(tp, pp, cp, vp, mbs, gbs, dp, false), precision)
        else {
            out.skip("dgxc", "request does not parse");
            continue;
        };
        out.rows.push(E2eRow {
            source: "dgxc",
            id: format!("{} | {} | {}", g("path"), title, g("column_header")),
            system: sys.clone(),
            request,
            measured_s: step,
            without_update: false,
            group: name,
        });
    }
    Ok(())
}

/// Every source.
pub fn load(data: &Path) -> Result<E2eData, String> {
    let mut out = E2eData::default();
    vtrain(data, &mut out)?;
    neusight(data, &mut out)?;
    neusight_single(data, &mut out)?;
    nemo(data, &mut out)?;
    dgxc(data, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
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
        // Blackwell rows are skipped for want of a catalog GPU.
        assert!(out.skipped.keys().any(|(s, why)| s == "nemo" && why.contains("DGX-H100")));
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

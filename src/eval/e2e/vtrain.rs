//! vTrain's single-node Megatron-DeepSpeed runs (`vtrain/vtrain_ground_truth_singlenode_a100.csv`).

use std::path::Path;

use serde_json::json;

use super::{csv_records, request, system, E2eData, E2eRow};

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
        let Some(request) = request(&sys.name, model, par, "fp16", "deepspeed") else {
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
            trap: None,
        });
    }
    Ok(())
}

//! MosaicML llm-foundry's MPT training throughput (`llmfoundry_mpt/llmfoundry_mpt_training_throughput.csv`): PyTorch
//! FSDP runs (Composer), the only end-to-end source here that is not Megatron-style.

use std::path::Path;

use serde_json::json;

use super::{csv_records, request, E2eData, E2eRow};
use crate::hw::SystemSpec;

/// The system a row ran on: 8 GPUs per node. A100 (40 and 80 GB): the README's "1600 Gbps node-node
/// interconnect (RoCE)" = 8 × 200 Gb/s, the `dgx-a100-80g` preset's links (NVSwitch, 8 × 200 Gb/s per node) with
/// the row's GPU. H100: the README names no interconnect; assumed the `dgx-h100` preset's (NVSwitch, 8 × NDR
/// 400 Gb/s per node). Enough nodes for the largest run (512 GPUs).
fn system_of(gpu: &str) -> Option<SystemSpec> {
    let preset = |name: &str| crate::hw::presets().into_iter().find(|p| p.name == name);
    let (base, gpu_name) = match gpu {
        "a100_40gb" => (preset("dgx-a100-80g")?, "A100-SXM4-40GB"),
        "a100_80gb" => (preset("dgx-a100-80g")?, "A100-SXM4-80GB"),
        "h100_80gb" => (preset("dgx-h100")?, "H100-SXM5-80GB"),
        _ => return None,
    };
    Some(SystemSpec {
        name: format!("eval-llmfoundry-{gpu}"),
        gpu: crate::hw::GpuRef::Name(gpu_name.into()),
        nodes: 64,
        description: None,
        ..base
    })
}

/// llm-foundry's MPT benchmark table (its SOURCE.txt's mapping): MPT 125M–70B — GPT-style, multi-head attention,
/// GeLU MLP 4×, LayerNorm, learned positions (no rotary), tied embeddings, flash attention, vocabulary 50,368 —
/// trained with FSDP data parallelism over every GPU (tp = pp = 1): `FULL_SHARD` is ZeRO-3, `SHARD_GRAD_OP`
/// ZeRO-2; activation checkpointing is full recomputation; `amp_bf16` and pure `bf16` are bf16, `amp_fp8` fp8
/// (Transformer Engine). The framework is `hf` (eager PyTorch with FSDP: Composer wraps every MPT block in an FSDP
/// unit, `limit_all_gathers`, backward prefetch; FlashAttention's Triton port, MPT's `attn_impl: triton`) with Composer's per-tensor optimizer and its
/// mixed-precision mode's gradient reduction. The step time is the derived `step_time_s` (global batch tokens / tokens per second).
/// Assumptions: the model has no bias terms (perfcast counts them: < 0.1 % of the parameters); pure-bf16 FSDP
/// (A100 `PURE` rows) is modeled as mixed precision (its all-gathers and reductions are bf16 either way).
pub fn llmfoundry(data: &Path, out: &mut E2eData) -> Result<(), String> {
    let file = "llmfoundry_mpt/llmfoundry_mpt_training_throughput.csv";
    for r in csv_records(&data.join(file))? {
        let g = |k: &str| r.get(k).map(String::as_str).unwrap_or("");
        let n = |k: &str| g(k).parse::<u64>().ok();
        let Some(system) = system_of(g("gpu")) else {
            out.skip("llmfoundry", "GPU not in the catalog");
            continue;
        };
        let (Some(layers), Some(hidden), Some(heads), Some(seq), Some(vocab)) =
            (n("n_layers"), n("d_model"), n("n_heads"), n("seq_len"), n("vocab"))
        else {
            out.skip("llmfoundry", "missing model numbers");
            continue;
        };
        let (Some(gpus), Some(mbs), Some(ga)) = (n("gpus"), n("micro_batch"), n("grad_accum")) else {
            out.skip("llmfoundry", "missing parallel numbers");
            continue;
        };
        if g("activation_cpu_offload") == "True" {
            out.skip("llmfoundry", "activation CPU offload");
            continue;
        }
        let ratio = n("expansion_ratio").unwrap_or(4);
        let model = json!({"name": format!("MPT-{}", g("model_size")), "layers": layers, "hidden": hidden,
            "heads": heads, "seq_len": seq, "vocab": vocab, "ffn_hidden": ratio * hidden, "norm": "layernorm",
            "activation": "gelu", "attention": "flash", "rotary": false, "tied_embeddings": true});
        let zero = match g("fsdp_sharding_strategy") {
            "FULL_SHARD" => 3,
            "SHARD_GRAD_OP" => 2,
            _ => {
                out.skip("llmfoundry", "unknown FSDP sharding strategy");
                continue;
            }
        };
        let recompute = if g("activation_checkpointing") == "True" { "full" } else { "none" };
        // Composer's FSDP mixed precision (`composer/distributed/mosaic_parallelism.py` `get_mixed_precision`):
        // `DEFAULT` reduces gradients in fp32, `PURE` in bf16. Composer's `DecoupledAdamW`
        // (`composer/optim/decoupled_weight_decay.py`) updates the parameters tensor by tensor.
        // The attention kernel: MPT's `attn_config.attn_impl`, which the benchmark's sweeps (`sweep.sh`,
        // `h100_benchmarks.sh`) never pass, so `submit_benchmarks.py`'s default applies: `triton` (FlashAttention's
        // Triton port, `llmfoundry/models/layers/flash_attn_triton.py`) until the script moved to `flash` with the
        // `gpu-flash2` extra. The table does not record it; the runs' image (`mosaicml/pytorch:2.1.0_cu121-
        // nightly20230827`, the H100 and A100-80GB rows of `scripts/train/benchmarking/h100new.md` on a working
        // branch) dates them to August 2023, and their step time grows with the sequence length as an attention
        // at about half FlashAttention-2's rate would (an assumption, stated in the accuracy chapter).
        let par = json!({"dp": gpus, "micro_batch": mbs, "grad_accum": ga, "zero_stage": zero,
            "recompute": recompute, "optimizer": "per_tensor", "attention_backend": "triton",
            "grad_reduce_in_fp32": g("fsdp_mixed_precision_mode") != "PURE"});
        let precision = if g("precision") == "amp_fp8" { "fp8" } else { "bf16" };
        let step: f64 = g("step_time_s").parse().unwrap_or(f64::NAN);
        let Some(request) = request(&system.name, model, par, precision, "hf") else {
            out.skip("llmfoundry", "request does not parse");
            continue;
        };
        if !(step.is_finite() && step > 0.0) {
            out.skip("llmfoundry", "no step time");
            continue;
        }
        out.rows.push(E2eRow {
            source: "llmfoundry",
            id: format!(
                "{file} README line {} MPT-{} {gpus}x {} seq {seq}",
                g("readme_line"),
                g("model_size"),
                g("gpu")
            ),
            system,
            request,
            measured_s: step,
            without_update: false,
            group: format!("MPT-{}", g("model_size")),
            trap: None,
        });
    }
    Ok(())
}

//! NeMo's long-sequence table (`nemo_megatron_bridge_perf/nemo_long_sequence_cp.csv`, NeMo's
//! `docs/source/performance/performance_long_sequence.md`): Llama-3 8B fp8 on DGX B200 at 8k–1M tokens and
//! Llama-2 7B fp8 on DGX H100 at 4k–1M, each with context parallelism — the predicted-only source `nemo-long-cp`.

use std::path::Path;

use serde_json::json;

use super::nemo::{architecture, nemo_parallelism};
use super::{csv_records, dgx_h100, request, E2eData, E2eRow};

const SOURCE: &str = "nemo-long-cp";

/// The container whose rows ran FlashAttention-2, not cuDNN's fused attention: NeMo-Framework-Launcher's
/// `launcher_scripts/conf/config.yaml` (commit 01d0773) for `container: nvcr.io/nvidia/nemo:24.03.01.framework`
/// exports `NVTE_FUSED_ATTN: 0  # Disable cudnn FA until we've tested it more`. That takes cuDNN out of
/// Transformer Engine's `DotProductAttention` backend choice (TE 1.3 in that PyTorch 24.02-based container), so
/// TE runs its `FlashAttention` backend — flash-attn 2.x, FlashAttention-3 did not exist before July 2024 — inside
/// the context-parallel ring too. NVIDIA's Llama-2 context-parallel Slurm scripts on the same image carry the same
/// line. The launcher's 23.11 config does not.
const FLASH2_CONTAINER: &str = "NeMo24.03.01.framework";

/// The table's rows with context parallelism ("With CP" columns): the request is NeMo's (`framework: nemo`, its
/// overlaps as [`nemo_parallelism`] sets them, Megatron-Core's default `cp_comm_type` `p2p`), micro-batch 1 (the
/// table's setting), the global batch its `Batch Size` column (sequences), tp·pp·dp·cp from its columns; the
/// DGX-H100 rows (container [`FLASH2_CONTAINER`]) with `attention_backend: flash2`, as their launcher ran them.
///
/// The step time is the model FLOPs of one step over the measured TFLOP/s per GPU and the GPUs:
/// t = F / (TFLOPS · 10¹² · GPUs), F from [`crate::llm::flops::model_flops_of`] — NeMo's `llama2` / `llama3`
/// formula (`nemo/utils/flops_formulas.py`: B·s·L·d²·(12 + 12·kv/h + 18·f/d + 12·s/d + 6·V/(L·d)), causal
/// attention counted in full), the formula the table's TFLOP/s come from.
///
/// Assumption: the DGX-B200 rows' `# of GPUs` is 4 × tp·pp·dp·cp in every row (e.g. 1,024 GPUs at tp 4 · dp 4 ·
/// cp 16 = 256), while the DGX-H100 rows' equals it; the B200 rows are evaluated on tp·pp·dp·cp GPUs (their global
/// batches divide by that dp, not by the one the GPU count would give), which TFLOP/s per GPU does not depend on.
pub fn nemo_long(data: &Path, out: &mut E2eData) -> Result<(), String> {
    let path = data.join("nemo_megatron_bridge_perf/nemo_long_sequence_cp.csv");
    for (i, r) in csv_records(&path)?.into_iter().enumerate() {
        let g = |k: &str| r.get(k).map(String::as_str).unwrap_or("");
        let num = |k: &str| g(k).replace(',', "").trim().parse::<f64>().ok();
        let section = g("section");
        let name = section.split(" (").next().unwrap_or("");
        let Some((mut model, _)) = architecture(name) else {
            out.skip(SOURCE, "unknown architecture");
            continue;
        };
        let (Some(seq_k), Some(gbs), Some(tflops), Some(tp), Some(pp), Some(dp), Some(cp)) = (
            num("seqlen_K"),
            num("batch_size"),
            num("CP_tflops_per_gpu"),
            num("CP_TP"),
            num("CP_PP"),
            num("CP_DP"),
            num("CP_CP"),
        ) else {
            out.skip(SOURCE, "missing numbers");
            continue;
        };
        let (tp, pp, dp, cp) = (tp as u64, pp as u64, dp as u64, cp as u64);
        let gpus = tp * pp * dp * cp;
        let system = match g("system") {
            "DGX-H100" => dgx_h100(),
            "DGX-B200" => {
                let Some(p) = crate::hw::presets().into_iter().find(|p| p.name == "dgx-b200") else {
                    out.skip(SOURCE, "no preset");
                    continue;
                };
                p
            }
            _ => {
                out.skip(SOURCE, "unknown system");
                continue;
            }
        };
        let seq = (seq_k as u64) * 1024;
        model["seq_len"] = json!(seq);
        let mut par = nemo_parallelism(tp, pp, cp, 1, 1, gbs as u64, dp, false);
        if g("container") == FLASH2_CONTAINER {
            par["attention_backend"] = json!("flash2");
        }
        let Some(req) = request(&system.name, model, par, "fp8", "nemo") else {
            out.skip(SOURCE, "request does not parse");
            continue;
        };
        let Ok(cfg) = crate::llm::validate_request(&req, system.gpus_per_node as u64 * system.nodes as u64) else {
            out.skip(SOURCE, "not representable");
            continue;
        };
        let step = crate::llm::flops::model_flops_of(&cfg) / (tflops * 1e12 * gpus as f64);
        out.rows.push(E2eRow {
            source: SOURCE,
            id: format!("nemo_long_sequence_cp.csv line {} {name} {}K tokens cp {cp} {gpus} GPUs", i + 3, seq_k),
            system,
            request: req,
            measured_s: step,
            without_update: false,
            group: name.to_string(),
            trap: None,
        });
    }
    Ok(())
}

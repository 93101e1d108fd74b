//! NeMo / Megatron-Bridge performance tables' mixture-of-experts pre-training rows (`nemo_perf_tables_long.csv`,
//! its SOURCE.txt): DeepSeek-V3, Qwen3-30B-A3B and Qwen3-235B-A22B with their parallel configuration (TP, PP, CP,
//! VP, EP, MBS, GBS) and measured tokens per second per GPU. The step time is GBS · sequence / (tokens/s/GPU · GPUs).
//!
//! What each row ran beyond its columns comes from Megatron-Bridge's performance recipes
//! (`scripts/performance/configs/qwen/qwen3_workload_base_configs.py` @ 01b2977e, `qwen3_llm_pretrain.py` @
//! 05c0c90f, `deepseek/deepseek_workload_base_configs.py` @ 04264182): expert_tp 1; `moe_grouped_gemm`;
//! `moe_router_force_load_balancing` for the dropless rows ("required for token dropless") and, for the rows marked
//! "tokendrop", `apply_moe_token_drop`'s capacity factor 1.0 with padding; the dispatcher per model and GPU —
//! Qwen3-235B-A22B `alltoall` on H100, B200 and B300 (with `moe_a2a_overlap`, Megatron-Core's
//! `overlap_moe_expert_parallel_comm`, on H100) and HybridEP on GB200/GB300, Qwen3-30B-A3B HybridEP everywhere,
//! DeepSeek-V3 HybridEP (DeepEP with the 1F1B overlap for the B200 pp 8 · vp 2 · ep 32 rows) with `recompute_modules`
//! [mla_up_proj, mlp] on H100 and B200 at ep 32, none for the GB300 full-iteration MXFP8 recipe (PR #3983),
//! [mla_up_proj] otherwise; Transformer Engine's TP overlap except
//! for Qwen3-235B-A22B on H100; DeepSeek-V3 with its MTP layer unless the row says "w/o MTP". The NeMo overlap
//! defaults of the dense rows ([`super::nemo::nemo_parallelism`]) apply too, and the rows run as `framework: nemo`
//! (the performance recipes set `cfg.ddp.grad_reduce_in_fp32 = False`, expert gradients included). A DGX-H100
//! row whose precision cell says only `FP8` runs the presets' `FP8_CS`, tensorwise current scaling
//! (`h100_fp8_recipe`). An MXFP8 Qwen3 row on GB200, GB300 or B300 (DeepSeek-V3: GB200 or GB300) from the 26.06
//! container on runs the full-iteration CUDA graph and the expert all-to-all overlap its recipe switched to
//! (`full_iteration_mxfp8`). DeepSeek-V3's pipeline runs the recipe's layout: uneven first and last stages without
//! interleaving (`deepseek_split`), Megatron-Core's `pipeline_model_parallel_layout` with it (`deepseek_layout`).
//! HybridEP runs on 32 SMs in every row that uses it (`moe_hybridep_num_sms`: `scripts/performance/utils/overrides.py`
//! @ 00538e26 `_set_common_perf_overrides`, [`HYBRIDEP_RECIPE_SMS`]). No row sets `moe_shared_expert_overlap`:
//! DeepSeek-V3's recipe turns it on (`recipes/deepseek/deepseek_v3.py` `deepseek_v3_pretrain_config`, "Default from
//! DeepSeekModelProvider") and then calls `apply_flex_dispatcher_backend` (`training/flex_dispatcher_backend.py`),
//! which sets `moe_token_dispatcher_type = "flex"` and `moe_shared_expert_overlap = False` for deepep and hybridep.
//! Assumption: rows of older containers ran the recipes of the commits above.
//!
//! The systems are the presets `dgx-h100` (its nodes × 512, as the dense rows), `dgx-b200`, `dgx-b300`,
//! `gb200-nvl72` and `gb300-nvl72` (an NVL72 rack is one node of 72 GPUs; 8 racks hold the largest rows' 256 GPUs).
//! Rows of models perfcast does not represent (gpt-oss: attention sinks and sliding windows; Kimi K2 and
//! DeepSeek-V4: GB300 only) and fine-tuning rows are skipped and counted.
//!
//! Data traps (kept, not fitted on — the source is predicted-only — but no model should follow them): the
//! DGX-H100 Qwen3-30B-A3B rows of the 25.11 and 26.02 containers ran at about 5.2 k tokens/s/GPU while every other
//! H100 Qwen3-30B-A3B row runs at 8.8–9.1 k and the Blackwell rows of the same containers show no such drop.
//! `performance-summary-archive.md` line 530 (26.02, pp 2 · vp 12 · ep 8, MBS 1, GBS 1024: 5,113 tokens/s/GPU →
//! 51.27 s) is the configuration 26.02.01 re-measured at 9,058 (line 445 → 28.94 s): a release regression the patch
//! release fixed. Line 593 (25.11, pp 2 · vp 24 · ep 8, MBS 2, GBS 512: 5,275 → 24.85 s) is the same configuration
//! the 25.09 container ran token-dropping at 10,494 (line 632 → 12.49 s; skipped here: its precision cell is empty).
//! The eval reads line 593 as it is printed — grad_accum 512/(2·8) = 32, 48 layers/(2·24) = one layer per virtual
//! stage ([`tests::line_593_reads_micro_batch_2_with_one_layer_per_virtual_stage`]); its prediction (≈ 9.2 s,
//! main b792a06) is faster per token than line 445's because a micro-batch of 1 leaves the H100 layer at the pace
//! of its host's framework calls (per stage and micro-batch ≈ 82 ms of forward host time against ≈ 52 ms of GPU
//! time) while a micro-batch of 2 doubles the GPU time under the same host time.
//!
//! The DGX-B300 Qwen3-235B-A22B rows of the 26.02 and 26.02.01 containers are traps too: line 538 (26.02, pp 8 ·
//! vp 4 · ep 32, MBS 1, GBS 8192 on 256 GPUs: 2,691 tokens/s/GPU → 48.71 s) runs at 0.71× the same container's
//! DGX-B200 row (line 539, pp 8, no vp: 3,805), and line 453 (26.02.01, the same configuration) at 2,644 → 49.57 s.
//! A B300 (Blackwell Ultra: the B200's fp8 rate or more, more HBM) cannot run the same model 29 % slower than a
//! B200 in the same container, and the same containers' B300 DeepSeek-V3 (2,983 against B200's 2,689) and
//! Qwen3-30B-A3B rows show no such drop; 26.04.01 ran the model on B300 at 5,936 (line 256, MBS 2). Nothing in the
//! request explains a 2× slowdown: vp 4 lowers the bubble and the pp sends are overlapped. The four rows carry the
//! reason in [`E2eRow::trap`] (`trap`): still predicted and scored, and the report shows each subset that holds
//! them also without them.

use std::path::Path;

use serde_json::{json, Value};

use super::nemo::nemo_parallelism;
use super::{csv_records, dgx_h100, request, E2eData, E2eRow};
use crate::hw::SystemSpec;

/// The catalog model of a table's model name, and whether it trains its MTP layer.
fn model_of(name: &str) -> Option<(&'static str, bool)> {
    let n = name.to_ascii_lowercase().replace([' ', '-', '_', '.', '(', ')', '/'], "");
    if n.starts_with("deepseekv3") {
        Some(("DeepSeek-V3", !n.contains("wo") && !n.contains("withoutmtp")))
    } else if n.starts_with("qwen330ba3b") {
        Some(("Qwen3-30B-A3B", false))
    } else if n.starts_with("qwen3235ba22b") {
        Some(("Qwen3-235B-A22B", false))
    } else {
        None
    }
}

/// The preset `name` (each holds the largest table row's 256 GPUs: DGX B200 128 nodes, DGX B300 64, NVL72 8 racks).
fn preset(name: &str) -> SystemSpec {
    crate::hw::presets().into_iter().find(|p| p.name == name).unwrap_or_else(|| panic!("the {name} preset"))
}

/// Why the row at `line` of `source_path` on `system` is a data trap (see the module doc), or `None`.
fn trap(source_path: &str, line: &str, system: &str) -> Option<&'static str> {
    if source_path != "docs/performance-summary-archive.md" {
        return None;
    }
    match (line, system) {
        ("530", "DGX-H100") => Some(
            "26.02 release regression: line 445 (26.02.01) re-measured the same configuration at 9,058 against \
             5,113 tokens/s/GPU",
        ),
        ("593", "DGX-H100") => Some(
            "25.11 release regression: 5,275 tokens/s/GPU where 25.09 ran the configuration at 10,494 (line 632) \
             and every other H100 Qwen3-30B-A3B row at 8.8–9.1 k",
        ),
        ("538", "DGX-B300") => Some(
            "26.02 B300 at 0.71× the same container's B200 row (line 539: 3,805 against 2,691 tokens/s/GPU): \
             physically impossible",
        ),
        ("453", "DGX-B300") => Some(
            "26.02.01 B300 at 2,644 tokens/s/GPU, 0.69× 26.02's B200 (line 539) and 0.45× 26.04.01's B300 \
             (line 256): physically impossible",
        ),
        _ => None,
    }
}

fn first_number(cell: &str) -> Option<f64> {
    let head = cell.split('(').next()?.replace([',', '*'], "");
    head.trim().parse::<f64>().ok()
}

/// The SMs HybridEP runs on in every NeMo / Megatron-Bridge performance recipe: `_set_common_perf_overrides`
/// (`scripts/performance/utils/overrides.py` @ 00538e26, lines 65–68: "TODO: This needs to be adjusted when
/// overlapping HybridEP with computation or the number of SMs for HybridEP is reduced. if
/// recipe.model.moe_flex_dispatcher_backend == "hybridep": recipe.model.moe_hybridep_num_sms = 32"), which
/// `set_workload_base_configs` applies to every preset, against Megatron-Core's default 16.
const HYBRIDEP_RECIPE_SMS: u32 = 32;

/// The MoE options of a row (see the module doc).
fn moe_options(p: &mut Value, model: &str, gpu: &str, ep: u64, pp: u64, vp: u64, token_drop: bool) {
    let h100 = gpu == "DGX-H100";
    let nvl72 = matches!(gpu, "DGX-GB200" | "DGX-GB300");
    let (dispatcher, overlap) = match model {
        "Qwen3-235B-A22B" if h100 => ("alltoall", true),
        "Qwen3-235B-A22B" if nvl72 => ("hybridep", false),
        "Qwen3-235B-A22B" => ("alltoall", false),
        "DeepSeek-V3" if !h100 && ep == 32 && pp == 8 && vp == 2 => ("deepep", true),
        _ => ("hybridep", false),
    };
    p["ep"] = json!(ep);
    p["expert_tp"] = json!(1);
    p["moe_token_dispatcher"] = json!(dispatcher);
    if dispatcher == "hybridep" {
        p["moe_hybridep_num_sms"] = json!(HYBRIDEP_RECIPE_SMS);
    }
    p["overlap_moe_expert_parallel_comm"] = json!(overlap && ep > 1 && (pp == 1 || vp > 1));
    p["moe_grouped_gemm"] = json!(true);
    if token_drop {
        p["moe_expert_capacity_factor"] = json!(1.0);
        p["moe_pad_expert_input_to_capacity"] = json!(true);
    } else {
        p["moe_router_force_load_balancing"] = json!(true);
    }
    if model == "Qwen3-235B-A22B" && h100 {
        p["tp_comm_overlap"] = json!(false);
    }
    if model == "DeepSeek-V3" {
        let modules = if h100 || (gpu == "DGX-B200" && ep == 32) {
            json!(["mla_up_proj", "mlp"])
        } else {
            json!(["mla_up_proj"])
        };
        p["recompute"] = json!("selective");
        p["recompute_modules"] = modules;
    }
    // Qwen3-235B-A22B's recipe counts the embedding and the loss as pipeline layers (`qwen3_moe.py`:
    // account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split).
    if model == "Qwen3-235B-A22B" && pp > 1 {
        p["account_for_embedding_in_pipeline_split"] = json!(true);
        p["account_for_loss_in_pipeline_split"] = json!(true);
    }
}

/// The fp8 recipe of a DGX-H100 row whose precision cell says only `FP8`: current (tensorwise) scaling.
/// Megatron-Bridge's performance presets for the MoE models on H100 exist in two precisions only, `BF16` and
/// `FP8_CS` (`scripts/performance/configs/qwen/qwen3_workload_base_configs.py` @ 01b2977e:
/// `QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_{BF16,FP8_CS}_V1`, `QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_{BF16,FP8_CS}_V1`;
/// Hopper has no MXFP8), and the 25.11 container's table prints the same H100 configurations as `FP8-CS`
/// (`performance-summary-archive.md` lines 593–594). `None` elsewhere: the Blackwell presets carry both `FP8_CS`
/// and `FP8_MX`, so a bare `FP8` there does not say which ran.
fn h100_fp8_recipe(system: &str, precision: &str) -> Option<&'static str> {
    (system == "DGX-H100" && precision == "fp8").then_some("tensorwise")
}

/// The NeMo container of a table heading ("26.06.01 NeMo Container" → (26, 6, 1)); `None` for a heading that names
/// none (the NeMo 24.07 table).
fn container_version(heading: &str) -> Option<(u32, u32, u32)> {
    let head = heading.split_whitespace().next()?;
    let mut parts = head.split('.').map(|s| s.parse::<u32>().ok());
    let (year, month) = (parts.next()??, parts.next()??);
    Some((year, month, parts.next().flatten().unwrap_or(0)))
}

/// Whether a row ran Megatron-Bridge's MXFP8 full-iteration stack: the 26.06 release branch switched the MXFP8
/// performance recipes of Qwen3-30B-A3B and Qwen3-235B-A22B on GB200 / GB300 (PR #4249, "Enable Qwen3
/// GB200/GB300 MXFP8 CuTeDSL Fusion and Full-Iter CUDA Graphs for 26.06"; `qwen3_llm_pretrain.py`
/// `set_full_iter_cg_configs`) and on B300 (PR #4606 on the r0.5.0 branch: "the same optimization path already
/// used by GB200/GB300") to `cuda_graph_impl="full_iteration"` with `moe_a2a_overlap` and the CuTeDSL fused
/// grouped MLP. The BF16 / FP8-CS recipes and H100's keep their TE-scoped graphs and dispatch. DeepSeek-V3's
/// GB200 / GB300 recipes made the same switch (PRs #3983, #4226; those rows run their interleaved layouts,
/// [`deepseek_layout`]); its B300 recipe's (PR #4498) is listed for the 0.5.1 release, of which the table has no
/// B300 row: DeepSeek-V3's B300 rows keep their recipe.
fn full_iteration_mxfp8(model: &str, system: &str, recipe: Option<&str>, container: &str) -> bool {
    let systems: &[&str] = match model {
        "DeepSeek-V3" => &["DGX-GB200", "DGX-GB300"],
        m if m.starts_with("Qwen3") => &["DGX-GB200", "DGX-GB300", "DGX-B300"],
        _ => &[],
    };
    recipe == Some("mxfp8")
        && systems.contains(&system)
        && container_version(container).is_some_and(|v| v >= (26, 6, 0))
}

/// The options of the full-iteration MXFP8 recipes ([`full_iteration_mxfp8`]) perfcast represents: the whole
/// forward-backward captured as one CUDA graph (`cuda_graph_impl="full_iteration"`, `cuda_graph_scope=[]`:
/// [`crate::llm::cuda_graphs::CudaGraphs::FullIteration`]) and the expert-parallel all-to-all hidden behind the
/// other micro-batch's compute (`moe_a2a_overlap=True`, Megatron-Core's `overlap_moe_expert_parallel_comm`, which
/// needs pp 1 or an interleaved pipeline: every such Qwen3 row has one). What perfcast does not represent: the
/// CuTeDSL fused grouped MLP (`NVTE_CUTEDSL_FUSED_GROUPED_MLP`), FP8 attention (`fp8_dot_product_attention`),
/// `delay_wgrad_compute` and the paged stash.
fn full_iteration_options(p: &mut Value) {
    p["cuda_graphs"] = json!("full_iteration");
    let pp = p["pp"].as_u64().unwrap_or(1);
    let vp = p["virtual_stages"].as_u64().unwrap_or(1);
    p["overlap_moe_expert_parallel_comm"] = json!(pp == 1 || vp > 1);
}

/// DeepSeek-V3's pipeline layout without interleaving as Megatron-Bridge's recipe sets it (`deepseek.py`
/// `layout_map`: the first stage the embedding and L/pp layers, the last stage the rest, its MTP layer and the
/// loss): (num_layers_in_first_pipeline_stage, num_layers_in_last_pipeline_stage). `None` for an interleaved
/// layout ([`deepseek_layout`]), whose chunks Megatron-Core's uneven first/last options cannot express.
fn deepseek_split(pp: u64, vp: u64) -> Option<(u64, u64)> {
    match (pp, vp) {
        (1, _) => Some((0, 0)),
        (4, 1) => Some((16, 13)),
        (8, 1) => Some((8, 5)),
        (16, 1) => Some((4, 1)),
        _ => None,
    }
}

/// DeepSeek-V3's interleaved pipeline layout (`pipeline_model_parallel_layout`) for pp · vp model chunks as
/// Megatron-Bridge's recipes set it: `deepseek.py` `set_deepseek_v3_pipeline_model_parallel_layout`'s
/// `layout_map` gives one layout per chunk count ((4, 2) the same 8 chunks as (8, 1): E + 8 layers, 6 × 8, 5 + MTP +
/// loss; (8, 2) and (4, 4) the same 16: "Et*4|(t*4|)*14tmL"), the GB300 recipes pass the 16-chunk one for pp 2 ·
/// vp 8 (`deepseek_v3_pretrain_256gpu_gb300_*_config`), the H100 recipes "Et|(tt|)*30mL" for pp 8 · vp 4
/// (`deepseek_v3_pretrain_config_h100`). Without the MTP layer ("w/o MTP" rows) the last chunk holds the loss alone
/// (`layout_map`'s `last_layer = ["mtp"] * mtp_layers + ["loss"]`). `None` for a chunk count without a recipe layout.
fn deepseek_layout(pp: u64, vp: u64, mtp: bool) -> Option<String> {
    let layout = match pp * vp {
        8 => "Et*8|(t*8|)*6t*5mL",
        16 => "Et*4|(t*4|)*14tmL",
        32 => "Et|(tt|)*30mL",
        _ => return None,
    };
    Some(if mtp { layout.to_string() } else { layout.replace('m', "") })
}

/// The MoE pre-training rows of the NeMo / Megatron-Bridge tables on DGX H100, B200, B300 and GB200 / GB300 NVL72
/// (see the module doc).
pub fn nemo_moe(data: &Path, out: &mut E2eData) -> Result<(), String> {
    let h100 = dgx_h100();
    let blackwell = [
        ("DGX-B200", preset("dgx-b200")),
        ("DGX-B300", preset("dgx-b300")),
        ("DGX-GB200", preset("gb200-nvl72")),
        ("DGX-GB300", preset("gb300-nvl72")),
    ];
    for r in csv_records(&data.join("nemo_megatron_bridge_perf/nemo_perf_tables_long.csv"))? {
        let g = |k: &str| r.get(k).map(String::as_str).unwrap_or("");
        let name = if g("Model").is_empty() { g("h4").trim_start_matches("Model: ") } else { g("Model") };
        let Some((model, mtp)) = model_of(name) else {
            continue;
        };
        let task = format!("{} {}", g("h3"), g("Task"));
        if task.contains("Finetun") || task.contains("LoRA") || task.contains("SFT") {
            out.skip("nemo-moe", "fine-tuning");
            continue;
        }
        let system_name = if g("System").is_empty() { g("h4").trim_start_matches("System: ") } else { g("System") };
        let sys = match system_name {
            "DGX-H100" => h100.clone(),
            other => match blackwell.iter().find(|(n, _)| *n == other) {
                Some((_, s)) => s.clone(),
                None => {
                    out.skip("nemo-moe", "unknown system");
                    continue;
                }
            },
        };
        let Some((precision, recipe)) = super::nemo_precision(g("Precision")) else {
            out.skip("nemo-moe", "no precision given");
            continue;
        };
        let num = |k: &str| first_number(g(k));
        let (Some(gpus), Some(gbs), Some(mbs), Some(tps)) =
            (num("#-GPUs"), num("GBS"), num("MBS"), num("Tokens / sec / GPU"))
        else {
            out.skip("nemo-moe", "missing numbers");
            continue;
        };
        let par = |k: &str| num(k).unwrap_or(1.0).max(1.0) as u64;
        let (tp, pp, cp, vp, ep) = (par("TP"), par("PP"), par("CP"), par("VP"), par("EP"));
        let seq_len = num("Sequence Length").map_or(4096, |s| s as u32);
        let (gpus, gbs, mbs) = (gpus as u64, gbs as u64, mbs as u64);
        if gpus % (tp * pp * cp) != 0 {
            out.skip("nemo-moe", "GPUs not a multiple of tp·pp·cp");
            continue;
        }
        let dp = gpus / (tp * pp * cp);
        let token_drop = name.to_ascii_lowercase().contains("tokendrop");
        let mut p = nemo_parallelism(tp, pp, cp, vp, mbs, gbs, dp, false);
        moe_options(&mut p, model, system_name, ep, pp, vp, token_drop);
        if model == "DeepSeek-V3" {
            match deepseek_split(pp, vp) {
                Some((0, 0)) => {}
                Some((first, last)) => {
                    p["num_layers_in_first_pipeline_stage"] = json!(first);
                    p["num_layers_in_last_pipeline_stage"] = json!(last);
                }
                None => match deepseek_layout(pp, vp, mtp) {
                    Some(layout) => p["pipeline_model_parallel_layout"] = json!(layout),
                    None => {
                        out.skip("nemo-moe", "DeepSeek-V3's pipeline layout for this pp·vp has no recipe");
                        continue;
                    }
                },
            }
        }
        if let Some(recipe) = recipe.or_else(|| h100_fp8_recipe(system_name, precision)) {
            p["fp8_recipe"] = json!(recipe);
        }
        let container = if g("h2").is_empty() { g("h1") } else { g("h2") };
        if full_iteration_mxfp8(model, system_name, recipe, container) {
            full_iteration_options(&mut p);
            // DeepSeek-V3's GB300 full-iteration recipe runs without recomputation (PR #3983: "recompute
            // disabled"); GB200's keeps mla_up_proj for its smaller HBM (PR #4226).
            if model == "DeepSeek-V3" && system_name == "DGX-GB300" {
                p["recompute"] = json!("none");
                if let Some(o) = p.as_object_mut() {
                    o.remove("recompute_modules");
                }
            }
        }
        let model_json = json!({"name": model, "seq_len": seq_len, "mtp_layers": u32::from(mtp)});
        let Some(request) = request(&sys.name, model_json, p, precision, "nemo") else {
            out.skip("nemo-moe", "request does not parse");
            continue;
        };
        let step = gbs as f64 * seq_len as f64 / (tps * gpus as f64);
        out.rows.push(E2eRow {
            source: "nemo-moe",
            id: format!("{} line {} {name} {system_name} {gpus} GPUs {precision}", g("source_path"), g("line")),
            system: sys,
            request,
            measured_s: step,
            without_update: false,
            group: model.to_string(),
            trap: trap(g("source_path"), g("line"), system_name),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::recipe::Fp8Recipe;

    /// The NeMo MoE rows of ../shared/data, as the evaluation reads them.
    fn loaded() -> E2eData {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data");
        let mut out = E2eData::default();
        nemo_moe(&data, &mut out).unwrap();
        out
    }

    /// The row of the archive's `line` on `system` (e.g. "130", "DGX-GB200").
    fn row<'a>(out: &'a E2eData, line: &str, system: &str) -> &'a E2eRow {
        out.rows.iter().find(|r| r.id.contains(&format!("line {line} ")) && r.id.contains(system)).unwrap()
    }

    #[test]
    fn h100_fp8_rows_train_with_current_scaling() {
        let out = loaded();
        // The 26.06 container's Qwen3-30B-A3B on 16 H100 (line 132): GBS 1024 · 4096 tokens at 8,826 tokens/s/GPU
        // on 16 GPUs → 4,194,304 / 141,216 = 29.701 s per step, with the FP8_CS preset's tensorwise scaling.
        let r = out.rows.iter().find(|r| r.id.contains("line 132 ") && r.id.contains("DGX-H100")).unwrap();
        assert!((r.measured_s - 4_194_304.0 / 141_216.0).abs() < 1e-9, "{}", r.measured_s);
        assert_eq!(r.request.parallelism.fp8_recipe, Some(Fp8Recipe::Tensorwise));
        // Every fp8 row on H100 runs it (the nine 26.x rows printed "FP8", the 25.11 rows "FP8-CS"); a Blackwell
        // row keeps its cell's recipe (the 26.08 GB300 row, line 66, prints MXFP8).
        let fp8 = |r: &&E2eRow| r.request.precision == crate::hw::Precision::Fp8;
        let h100: Vec<_> = out.rows.iter().filter(fp8).filter(|r| r.id.contains("DGX-H100")).collect();
        assert!(h100.len() >= 9, "{}", h100.len());
        assert!(h100.iter().all(|r| r.request.parallelism.fp8_recipe == Some(Fp8Recipe::Tensorwise)));
        let gb300 = out.rows.iter().find(|r| r.id.contains("line 66 ") && r.id.contains("DGX-GB300")).unwrap();
        assert_eq!(gb300.request.parallelism.fp8_recipe, Some(Fp8Recipe::Mxfp8));
        assert_eq!((h100_fp8_recipe("DGX-GB300", "fp8"), h100_fp8_recipe("DGX-H100", "bf16")), (None, None));
    }

    #[test]
    fn line_593_reads_micro_batch_2_with_one_layer_per_virtual_stage() {
        let out = loaded();
        // The 25.11 container's Qwen3-30B-A3B on 16 DGX-H100 GPUs (archive line 593): FP8-CS, GBS 512, MBS 2,
        // TP 1, PP 2, VP 24, EP 8 at 5,275 tokens/s/GPU → 512 · 4096 / (5,275 · 16) = 2,097,152 / 84,400
        // = 24.8478 s per step; dp = 16 / (1 · 2 · 1) = 8, so grad_accum = 512 / (2 · 8) = 32 micro-batches.
        let r = out.rows.iter().find(|r| r.id.contains("line 593 ") && r.id.contains("DGX-H100")).unwrap();
        assert!((r.measured_s - 2_097_152.0 / 84_400.0).abs() < 1e-9, "{}", r.measured_s);
        let p = &r.request.parallelism;
        assert_eq!((p.tp, p.pp, p.dp, p.virtual_stages, p.ep, p.micro_batch), (1, 2, 8, 24, 8, 2));
        assert_eq!(p.global_batch, Some(512));
        assert_eq!(p.global_batch.unwrap() / (p.micro_batch * p.dp), 32);
        // Qwen3-30B-A3B's 48 layers over pp 2 · vp 24 = 48 virtual stages: one layer each, no embedding or loss
        // accounting in the split (only Qwen3-235B-A22B's recipe sets it).
        assert_eq!(r.request.model.layers, 48);
        assert_eq!(r.request.model.layers / (p.pp * p.virtual_stages), 1);
        assert!(!p.account_for_embedding_in_pipeline_split);
        // The regressed 26.02 run of line 445's configuration (line 530): 1024 · 4096 / (5,113 · 16) = 51.2701 s
        // against 26.02.01's 4,194,304 / (9,058 · 16) = 28.9406 s.
        let slow = out.rows.iter().find(|r| r.id.contains("line 530 ")).unwrap();
        let fixed = out.rows.iter().find(|r| r.id.contains("line 445 ")).unwrap();
        assert!((slow.measured_s - 4_194_304.0 / 81_808.0).abs() < 1e-9, "{}", slow.measured_s);
        assert!((fixed.measured_s - 4_194_304.0 / 144_928.0).abs() < 1e-9, "{}", fixed.measured_s);
        assert_eq!(slow.request.parallelism.virtual_stages, fixed.request.parallelism.virtual_stages);
    }

    #[test]
    fn the_four_trap_rows_carry_their_reason() {
        let out = loaded();
        // H100 Qwen3-30B-A3B lines 530 and 593, B300 Qwen3-235B-A22B lines 453 and 538; nothing else.
        let traps: Vec<&E2eRow> = out.rows.iter().filter(|r| r.trap.is_some()).collect();
        assert_eq!(traps.len(), 4, "{:?}", traps.iter().map(|r| &r.id).collect::<Vec<_>>());
        for (line, system) in [("530", "DGX-H100"), ("593", "DGX-H100"), ("453", "DGX-B300"), ("538", "DGX-B300")] {
            assert!(row(&out, line, system).trap.is_some(), "{line} {system}");
        }
        // The trap's evidence, by hand: line 538 at 2,691 tokens/s/GPU against line 539's B200 at 3,805 is
        // 2691 / 3805 = 0.707 of a weaker GPU's throughput; as step times, 8192 · 4096 / (2691 · 256) = 48.708 s
        // against 8192 · 4096 / (3805 · 256) = 34.448 s.
        let (b300, b200) = (row(&out, "538", "DGX-B300"), row(&out, "539", "DGX-B200"));
        assert!((b300.measured_s - 33_554_432.0 / 688_896.0).abs() < 1e-9, "{}", b300.measured_s);
        assert!((b200.measured_s - 33_554_432.0 / 974_080.0).abs() < 1e-9, "{}", b200.measured_s);
        assert!(b200.trap.is_none() && row(&out, "256", "DGX-B300").trap.is_none());
        assert!(row(&out, "445", "DGX-H100").trap.is_none());
    }

    #[test]
    fn hybridep_rows_run_the_recipes_32_sms() {
        use crate::llm::moe::Dispatcher;
        let out = loaded();
        // Every row whose dispatcher is HybridEP runs it on 32 SMs, the performance recipes' override; the
        // alltoall (Qwen3-235B-A22B on B200) and DeepEP (DeepSeek-V3 B200 pp 8 · vp 2 · ep 32) rows leave it unset.
        let mut hybridep = 0;
        for r in &out.rows {
            let p = &r.request.parallelism;
            if p.moe_token_dispatcher == Some(Dispatcher::Hybridep) {
                assert_eq!(p.moe_hybridep_num_sms, Some(32), "{}", r.id);
                hybridep += 1;
            } else {
                assert_eq!(p.moe_hybridep_num_sms, None, "{}", r.id);
            }
        }
        assert!(hybridep > 50, "{hybridep}");
        // Qwen3-235B-A22B on GB200 (line 355, 26.04: ep 32 on one NVL72 domain) and on B200 (line 539, alltoall).
        assert_eq!(row(&out, "355", "DGX-GB200").request.parallelism.moe_hybridep_num_sms, Some(32));
        assert_eq!(row(&out, "539", "DGX-B200").request.parallelism.moe_hybridep_num_sms, None);
    }

    #[test]
    fn mxfp8_rows_from_26_06_run_full_iteration_graphs() {
        use crate::llm::cuda_graphs::CudaGraphs;
        let out = loaded();
        let row = |line: &str, system: &str| row(&out, line, system);
        // The 26.06 container's Qwen3-30B-A3B on 8 GB200 (archive line 130): GBS 512 · 4096 tokens at 40,706
        // tokens/s/GPU on 8 GPUs → 2,097,152 / 325,648 = 6.43988 s per step; PR #4249's MXFP8 recipe captures the
        // whole iteration and overlaps the expert all-to-all (pp 1).
        let r = row("130", "DGX-GB200");
        assert!((r.measured_s - 2_097_152.0 / 325_648.0).abs() < 1e-9, "{}", r.measured_s);
        assert_eq!(r.request.parallelism.cuda_graphs, Some(CudaGraphs::FullIteration));
        assert!(r.request.parallelism.overlap_moe_expert_parallel_comm);
        // The same configuration in 26.04.01 (line 245: 26,112 tokens/s/GPU) ran before the change: no graphs set.
        let before = row("245", "DGX-GB200");
        assert_eq!(before.request.parallelism.cuda_graphs, None);
        assert!(!before.request.parallelism.overlap_moe_expert_parallel_comm);
        // Qwen3-235B-A22B on GB300 in 26.08 (performance-summary.md line 73: pp 4 · vp 12, interleaved, so the
        // overlap is allowed) and on B300 in 26.06 (line 131, Qwen3-30B-A3B, PR #4606).
        for (line, system) in [("73", "DGX-GB300"), ("131", "DGX-B300")] {
            let r = row(line, system);
            assert_eq!(r.request.parallelism.cuda_graphs, Some(CudaGraphs::FullIteration), "{line}");
            assert!(r.request.parallelism.overlap_moe_expert_parallel_comm, "{line}");
        }
        // DeepSeek-V3 on B300 in 26.06 (line 115) keeps its recipe; H100's FP8 row of 26.06 (line 132) is not MXFP8.
        assert_eq!(row("115", "DGX-B300").request.parallelism.cuda_graphs, None);
        assert_eq!(row("132", "DGX-H100").request.parallelism.cuda_graphs, None);
        assert_eq!(container_version("26.06.01 NeMo Container"), Some((26, 6, 1)));
        assert_eq!(container_version("26.08 NeMo Container"), Some((26, 8, 0)));
        assert_eq!(container_version("Performance"), None);
    }

    #[test]
    fn interleaved_deepseek_v3_rows_run_the_recipes_pipeline_layouts() {
        use crate::llm::config::Recompute;
        use crate::llm::cuda_graphs::CudaGraphs;
        let out = loaded();
        let row = |line: &str, system: &str| row(&out, line, system);
        let layout = |r: &E2eRow| r.request.parallelism.pipeline_model_parallel_layout.clone();
        // 26.08 GB300 (performance-summary.md line 45): pp 2 · vp 8 = 16 chunks, "Et*4|(t*4|)*14tmL" (4 + 14·4 + 1 =
        // 61 layers); GBS 4096 · 4096 tokens at 6,288 tokens/s/GPU on 256 GPUs → 16,777,216 / 1,609,728 = 10.42 s.
        // Its full-iteration MXFP8 recipe (PR #3983) runs without recomputation.
        let r = row("45", "DGX-GB300");
        assert_eq!(layout(r).as_deref(), Some("Et*4|(t*4|)*14tmL"));
        assert!((r.measured_s - 16_777_216.0 / 1_609_728.0).abs() < 1e-9, "{}", r.measured_s);
        assert_eq!(r.request.parallelism.cuda_graphs, Some(CudaGraphs::FullIteration));
        assert_eq!(r.request.parallelism.recompute, Recompute::None);
        // 26.08 GB200 (line 46): pp 4 · vp 4 = 16 chunks, the same layout; GB200 keeps mla_up_proj (PR #4226).
        let r = row("46", "DGX-GB200");
        assert_eq!(layout(r).as_deref(), Some("Et*4|(t*4|)*14tmL"));
        assert_eq!(r.request.parallelism.recompute, Recompute::Selective);
        // 25.11 GB300 without MTP (archive line 555): pp 2 · vp 4 = 8 chunks, layout_map's 8-chunk layout with the
        // loss alone in the last chunk: 8 + 6·8 + 5 = 61 layers.
        assert_eq!(layout(row("555", "DGX-GB300")).as_deref(), Some("Et*8|(t*8|)*6t*5L"));
        // 25.11 GB200 fp8 (line 569): pp 8 · vp 4 = 32 chunks, the H100 recipe's "Et|(tt|)*30mL" without its m.
        assert_eq!(layout(row("569", "DGX-GB200")).as_deref(), Some("Et|(tt|)*30L"));
        // Without interleaving the uneven first/last options stay (B300 line 115: pp 8 → 8 and 5 layers).
        let r = row("115", "DGX-B300");
        assert_eq!(layout(r), None);
        assert_eq!(r.request.parallelism.num_layers_in_first_pipeline_stage, Some(8));
    }
}

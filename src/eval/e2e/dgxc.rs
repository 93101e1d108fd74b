//! DGX Cloud benchmarking step times (`dgxc_benchmarking_step_times/dgxc_step_times_tidy.csv`).

use std::path::Path;

use serde_json::json;

use super::nemo::{architecture, nemo_parallelism};
use super::{csv_records, dgx_h100, request, E2eData, E2eRow};

pub(super) fn title_param(title: &str, key: &str) -> Option<u64> {
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
        let Some(request) =
            request(&sys.name, model, nemo_parallelism(tp, pp, cp, vp, mbs, gbs, dp, false), precision, "nemo")
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
            trap: None,
        });
    }
    Ok(())
}

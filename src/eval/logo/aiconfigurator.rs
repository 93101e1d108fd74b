//! NVIDIA aiconfigurator's measured operator tables (`data/aiconfigurator/<gpu>/*.csv.gz`; columns and units in
//! its SOURCE.txt) for leave-one-GPU-out, read through the service's own parser ([`crate::ingest`]): `gemm_perf` →
//! `linear` (bf16, fp8, fp8_block, nvfp4), `context_attention_perf` → `attention_prefill`,
//! `generation_attention_perf` → `attention_decode`, `moe_perf` → `moe`, grouped by regressor key and GPU.
//!
//! MoE rows differ by routing distribution (`balanced`, `power_law_1.01`, `power_law_1.2`: the measured rank holds
//! the heaviest experts), which no operator feature describes: one MoE key mixing them has an irreducible spread
//! of up to the power law's imbalance. [`MoeRouting`] says which rows a run keeps and whether the distribution
//! is part of the key.

use std::path::Path;

use super::split::Groups;
use crate::eval::datasets;
use crate::hw::lookup;
use crate::ingest::{self, Context, Format};
use crate::learn::op_key;
use crate::op::OpClass;
use crate::samples::Sample;

/// The tables read, in order.
pub const TABLES: [&str; 4] =
    ["gemm_perf.csv.gz", "context_attention_perf.csv.gz", "generation_attention_perf.csv.gz", "moe_perf.csv.gz"];

/// Which MoE rows a run keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoeRouting {
    /// Only rows of this routing distribution (the key is the plain regressor key).
    Only(String),
    /// Every distribution, each its own key (`moe.fwd.bf16[power_law_1.2]`).
    Each,
    /// Every distribution under the plain regressor key, as a retrain over all rows trains it.
    Mixed,
}

impl MoeRouting {
    /// `all` → [`MoeRouting::Each`], `mixed` → [`MoeRouting::Mixed`], anything else one distribution.
    pub fn parse(s: &str) -> MoeRouting {
        match s {
            "all" => MoeRouting::Each,
            "mixed" => MoeRouting::Mixed,
            d => MoeRouting::Only(d.to_string()),
        }
    }
}

/// Reads every GPU folder under `data/aiconfigurator/` (`systems/` holds no tables). GPUs the catalog does not
/// know are an error: every folder there is one the catalog lists.
pub fn load(data: &Path, routing: &MoeRouting, progress: &mut dyn FnMut(&str)) -> Result<Groups, String> {
    let root = data.join("aiconfigurator");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .map_err(|e| format!("{}: {e}", root.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && p.join(TABLES[0]).exists())
        .collect();
    dirs.sort();
    let mut groups = Groups::default();
    for dir in dirs {
        for table in TABLES {
            let path = dir.join(table);
            if !path.exists() {
                continue;
            }
            progress(&format!("reading {}", path.display()));
            let raw = datasets::read(&path)?;
            let parsed = ingest::parse(Format::Aiconfigurator, &raw, &Context::default())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            drop(raw);
            for s in parsed.samples {
                let Sample::Op(s) = s else { continue };
                let gpu = lookup(&s.gpu)
                    .ok_or_else(|| format!("{}: GPU {:?} is not in the catalog", path.display(), s.gpu))?;
                let mut key = op_key(s.op, s.phase, s.dtype, None);
                if s.op == OpClass::Moe {
                    let dist = s.attributes.get("distribution").map_or("", |d| d.as_str());
                    match routing {
                        MoeRouting::Only(d) if d != dist => continue,
                        MoeRouting::Each => key = format!("{key}[{dist}]"),
                        _ => {}
                    }
                }
                groups.add(&key, s.op, s.phase, s.dtype, &gpu.spec, s.dims, s.time_us);
            }
        }
    }
    Ok(groups)
}

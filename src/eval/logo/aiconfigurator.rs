//! NVIDIA aiconfigurator's measured operator tables (`data/aiconfigurator/<gpu>/*.csv.gz`, and TensorRT-LLM's and
//! SGLang's in `<gpu>/{trtllm,sglang}/`; columns and units in its SOURCE.txt) for leave-one-GPU-out, read through
//! the service's own parser ([`crate::ingest`]): `gemm_perf` → `linear` (bf16, fp8, fp8_block, nvfp4),
//! `context_attention_perf` → `attention_prefill`, `generation_attention_perf` → `attention_decode`, `moe_perf` →
//! `moe`, `scale_matrix_perf` / `computescale_perf` → `quantize` / `quantize_scale`, grouped by regressor key (its
//! engine included) and GPU.
//!
//! MoE rows differ by routing distribution (`balanced`, `power_law_1.01`, `power_law_1.2`: the measured rank holds
//! the heaviest experts), which no operator feature describes: one MoE key mixing them has an irreducible spread
//! of up to the power law's imbalance. [`MoeRouting`] says which rows a run keeps and whether the distribution
//! is part of the key.

use std::collections::BTreeMap;
use std::path::Path;

use super::split::Groups;
use crate::eval::datasets;
use crate::hw::{lookup, Precision};
use crate::ingest::{self, Context, Format};
use crate::learn::op_data::{kernel_mask, KernelView};
use crate::learn::op_key;
use crate::op::{KernelFamily, OpClass, Phase};
use crate::samples::{compute_dtype, Sample};

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

/// The tables of the TensorRT-LLM and SGLang folders (`<gpu>/<engine>/`): [`TABLES`] and the activation
/// quantization kernels. TensorRT-LLM's full MoE table on B200, B300 and GB200 is `moe_perf_1.3.0rc20.csv.gz`
/// (DATA.md), read in place of its `moe_perf.csv.gz` there.
pub const ENGINE_TABLES: [&str; 6] = [
    "gemm_perf.csv.gz",
    "context_attention_perf.csv.gz",
    "generation_attention_perf.csv.gz",
    "moe_perf.csv.gz",
    "scale_matrix_perf.csv.gz",
    "computescale_perf.csv.gz",
];

/// The table files of `engine` in the GPU folder `dir`.
fn table_paths(dir: &Path, engine: KernelFamily) -> Vec<std::path::PathBuf> {
    match engine {
        KernelFamily::Vllm => TABLES.iter().map(|t| dir.join(t)).collect(),
        e => {
            let sub = dir.join(e.as_str());
            ENGINE_TABLES
                .iter()
                .map(|t| {
                    let full = sub.join("moe_perf_1.3.0rc20.csv.gz");
                    if e == KernelFamily::Trtllm && *t == "moe_perf.csv.gz" && full.exists() {
                        full
                    } else {
                        sub.join(t)
                    }
                })
                .collect()
        }
    }
}

/// One row as [`load`] keeps it until its key's kernels are chosen.
struct Lite {
    gpu: &'static crate::hw::GpuSpec,
    dims: crate::op::Dims,
    time_us: f64,
    kernel: u32,
    compute: &'static str,
}

/// Reads every GPU folder under `data/aiconfigurator/` (`systems/` holds no tables) for each of `engines` (vLLM's
/// tables in the folder itself, TensorRT-LLM's and SGLang's in its `trtllm/` and `sglang/`), keyed as the retrain
/// keys them (the engine in the key, [`op_key`]) and on the kernel each engine runs where a shape was measured by
/// several ([`kernel_mask`]). GPUs the catalog does not know are an error: every folder there is one the catalog
/// lists.
pub fn load(
    data: &Path,
    routing: &MoeRouting,
    engines: &[KernelFamily],
    progress: &mut dyn FnMut(&str),
) -> Result<Groups, String> {
    let root = data.join("aiconfigurator");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .map_err(|e| format!("{}: {e}", root.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && p.join(TABLES[0]).exists())
        .collect();
    dirs.sort();
    let mut kernels: Vec<String> = Vec::new();
    let mut kernel_index: BTreeMap<String, u32> = BTreeMap::new();
    // key → (class, phase, dtype, rows).
    let mut by_key: BTreeMap<String, (OpClass, Phase, Precision, Vec<Lite>)> = BTreeMap::new();
    for dir in dirs {
        for &engine in engines {
            for path in table_paths(&dir, engine) {
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
                    let mut key = op_key(s.op, s.phase, s.dtype, s.kernel_family(), None);
                    if s.op == OpClass::Moe {
                        let dist = s.attributes.get("distribution").map_or("", |d| d.as_str());
                        match routing {
                            MoeRouting::Only(d) if d != dist => continue,
                            MoeRouting::Each => key = format!("{key}[{dist}]"),
                            _ => {}
                        }
                    }
                    let name = s.attributes.get("kernel_source").cloned().unwrap_or_default();
                    let next = kernels.len() as u32;
                    let kernel = *kernel_index.entry(name.clone()).or_insert_with(|| {
                        kernels.push(name);
                        next
                    });
                    let compute = compute_dtype(&s.attributes).map_or("", |p| p.as_str());
                    let rows = &mut by_key.entry(key).or_insert_with(|| (s.op, s.phase, s.dtype, Vec::new())).3;
                    rows.push(Lite { gpu: &gpu.spec, dims: s.dims, time_us: s.time_us, kernel, compute });
                }
            }
        }
    }
    let mut groups = Groups::default();
    for (key, (class, phase, dtype, rows)) in by_key {
        let views: Vec<KernelView> = rows
            .iter()
            .map(|r| KernelView {
                gpu: &r.gpu.name,
                dims: r.dims,
                kernel: &kernels[r.kernel as usize],
                compute_dtype: r.compute,
            })
            .collect();
        let keep = kernel_mask(&views, dtype);
        for (r, _) in rows.iter().zip(keep).filter(|(_, k)| *k) {
            groups.add(&key, class, phase, dtype, r.gpu, r.dims, r.time_us);
        }
    }
    Ok(groups)
}

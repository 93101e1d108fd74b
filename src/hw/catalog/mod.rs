//! The built-in GPU catalog: datasheet numbers with their sources, and the device names that PyTorch
//! (`torch.cuda.get_device_name`), `nvidia-smi`, Nsight Compute and `rocm-smi` report, as aliases.
//!
//! Conventions (so that numbers from different datasheets mean the same thing):
//! - peaks are **dense** (the datasheets' "with sparsity" figures are halved);
//! - `fp64`/`fp32` are vector rates; AMD's FP32 matrix-core rate goes to `fp32_matrix`;
//! - `clock_ghz` is the boost (NVIDIA) or peak engine (AMD) clock;
//! - memory bandwidth in GB/s (10⁹ B/s), memory in GiB as marketed (GB), L2 in MiB;
//! - `tdp_watts` is the datasheet's maximum board power (GH200: the whole superchip module, CPU included;
//!   MI250X-GCD: half the package; GB200/GB300: one Blackwell GPU of the superchip, the Grace CPU and the other GPU
//!   excluded, because those entries describe one CUDA device and a superchip carries two);
//! - `fp4` (Blackwell only) is the dense NVFP4 tensor-core peak; per-GPU figures of 8-GPU boards (HGX/DGX) and of
//!   NVL72 racks are the board or rack figure divided by 8 or 72.
//! Where a datasheet omits a number (SM count, L2, a low fp64/fp16 rate) the architecture whitepaper named in
//! `source` gives it.

#[cfg(test)]
mod datasheet_tests;
mod entries;
#[cfg(test)]
mod names_tests;

use std::sync::OnceLock;

use super::gpu::GpuSpec;

/// One catalog GPU with the names it is also known by.
#[derive(Debug, Clone)]
pub struct CatalogGpu {
    /// The hardware description (its `name` is the canonical key).
    pub spec: GpuSpec,
    /// Other names that resolve to this GPU (device names as tools report them, short forms).
    pub aliases: Vec<&'static str>,
    /// Accelerator complex dies (XCDs) that one runtime device spans in the default (SPX) compute partition.
    /// rocprof sums per-XCD counters such as `GRBM_GUI_ACTIVE` over them (Omniperf divides by `num_xcd`). 1 for
    /// single-die GPUs: every NVIDIA GPU, MI100, each MI200 GCD (and the MI250X package entry, which is not a
    /// runtime device).
    pub xcds: u32,
}

/// The built-in catalog, built once.
pub fn catalog() -> &'static [CatalogGpu] {
    static CATALOG: OnceLock<Vec<CatalogGpu>> = OnceLock::new();
    CATALOG.get_or_init(entries::build)
}

/// Normalizes a device name for alias matching: lower case, letters and digits only, so
/// `"NVIDIA_H100_80GB_HBM3"`, `"NVIDIA H100 80GB HBM3"` and `"nvidia-h100-80gb-hbm3"` compare equal.
pub fn normalize_name(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect()
}

/// Strips vendor and product-line prefixes that tools add inconsistently (`NVIDIA`, `Tesla`, `AMD Instinct`).
fn strip_prefixes(normalized: &str) -> &str {
    let mut s = normalized;
    for prefix in ["nvidia", "tesla", "amd", "instinct"] {
        if let Some(rest) = s.strip_prefix(prefix) {
            if !rest.is_empty() {
                s = rest;
            }
        }
    }
    s
}

/// Finds a catalog GPU by its canonical name or any alias (case, spaces, `_`/`-` do not matter). An exact
/// normalized match wins; otherwise the vendor prefix is ignored (`"Tesla T4"` = `"T4"`). `None` when nothing
/// matches.
pub fn lookup(name: &str) -> Option<&'static CatalogGpu> {
    let wanted = normalize_name(name);
    let names = |g: &'static CatalogGpu| std::iter::once(g.spec.name.as_str()).chain(g.aliases.iter().copied());
    if let Some(g) = catalog().iter().find(|g| names(g).any(|c| normalize_name(c) == wanted)) {
        return Some(g);
    }
    let wanted_bare = strip_prefixes(&wanted);
    catalog().iter().find(|g| names(g).any(|c| strip_prefixes(&normalize_name(c)) == wanted_bare))
}

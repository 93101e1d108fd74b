//! One Nsight Compute kernel launch assembled from its CSV cells and mapped to a [`KernelSample`] (moved out of
//! `src/ingest/ncu.rs`):
//!
//! One [`KernelSample`] per launch (`ID`), columns mapped by header name:
//! - `duration_us` from `gpu__time_duration.sum` (Pascal: `gpu__time_duration`; section: `Duration`), else
//!   `sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second` (MODELS.md §2.1), else section `Elapsed Cycles
//!   / SM Frequency`. A launch without any of them is rejected.
//! - `grid`/`block` from the `Grid Size`/`Block Size` columns (`"(9, 32, 1)"`), else `launch__grid_size` /
//!   `launch__block_size` (totals, reported as `[n, 1, 1]`).
//! - `gpu` from `device__attribute_display_name` (raw page), else the upload's `gpu`; the `Device` column is an
//!   index and goes to the attribute `device`.
//! - `metrics` with the names of [`kernel_metrics`](crate::samples::kernel_metrics): FLOPs per precision = add + mul + 2·fma
//!   of `sm(sp)__sass_thread_inst_executed_op_{f,d,h}{add,mul,fma}_pred_on.sum` (all three needed); tensor FLOPs =
//!   the sum of `sm__ops_path_tensor_src_*.sum` (ncu's tensor-path operation counts, what its tensor roofline
//!   plots; `*_sparsity_off` variants only when no plain one is present; instruction counts such as
//!   `sm__inst_executed_pipe_tensor*` cannot be turned into FLOPs without the MMA shape and are not used); DRAM
//!   bytes (`dram__bytes.sum`, or read + write, Pascal `dram__read_bytes` + `dram__write_bytes`), L2 bytes
//!   (`lts__t_bytes.sum`), L1 bytes (`l1tex__t_bytes.sum`); hit rates and achieved occupancy as 0–1 (from
//!   `l1tex__t_sector_hit_rate.pct` / `L1/TEX Hit Rate` / Pascal `tex__hitrate_pct`,
//!   `lts__t_sector_hit_rate.pct` / `L2 Hit Rate` / Pascal `lts__request_total_sectors_hitrate_pct`,
//!   `sm__warps_active.avg.pct_of_peak_sustained_active` / `Achieved Occupancy` / Pascal
//!   `sm__active_warps_avg_per_active_cycle_pct`); registers per thread; static + dynamic shared memory per block
//!   (bytes, the driver's reserved share excluded); SM cycles (`sm__cycles_elapsed.avg`, Pascal
//!   `sm__elapsed_cycles_avg`, section `Elapsed Cycles` — gpc cycles, the same clock).
//! - launches without a duration are rejected, one [`Rejected`](crate::samples::Rejected) per kernel name with a count.
//! - every other numeric metric too, as `ncu.<name as printed>` converted to the base unit of its unit (byte,
//!   second, hz, count, …; percentages stay 0–100), except the per-device constants `device__attribute_*` and the
//!   profiler's own `profiler__*`.
//! - attributes: `id`, `process`, `pid`, `host`, `context`, `stream`, `device`, `cc`, `kernel_time` when present,
//!   `source_format = ncu_csv`.

use std::collections::BTreeMap;

use super::units::unit_scale;
use super::Columns;
use crate::ingest::text::number;
use crate::ingest::Context;
use crate::samples::{kernel_metrics as km, Attributes, KernelSample};

/// One kernel launch being assembled.
pub(super) struct Launch {
    line: u64,
    name: String,
    grid: Option<[u64; 3]>,
    block: Option<[u64; 3]>,
    gpu: Option<String>,
    attributes: Attributes,
    /// Metric values in base units, by name as printed.
    raw: BTreeMap<String, f64>,
}

impl Launch {
    pub(super) fn new(record: &csv::StringRecord, cols: &Columns, line: u64) -> Launch {
        let get = |name: &str| {
            cols.identity.iter().find(|(n, _)| *n == name).and_then(|(_, i)| record.get(*i)).map(str::trim)
        };
        let mut attributes = Attributes::new();
        for (attr, col) in [
            ("id", "ID"),
            ("process", "Process Name"),
            ("pid", "Process ID"),
            ("host", "Host Name"),
            ("context", "Context"),
            ("stream", "Stream"),
            ("device", "Device"),
            ("cc", "CC"),
            ("kernel_time", "Kernel Time"),
        ] {
            if let Some(v) = get(col).filter(|v| !v.is_empty()) {
                attributes.insert(attr.into(), v.to_string());
            }
        }
        attributes.insert("source_format".into(), "ncu_csv".into());
        Launch {
            line,
            name: record.get(cols.name).unwrap_or("").trim().to_string(),
            grid: get("Grid Size").and_then(triple),
            block: get("Block Size").and_then(triple),
            gpu: None,
            attributes,
            raw: BTreeMap::new(),
        }
    }

    pub(super) fn add(&mut self, name: &str, unit: &str, value: &str) {
        if name == "device__attribute_display_name" {
            let v = value.trim();
            if !v.is_empty() {
                self.gpu = Some(v.to_string());
            }
            return;
        }
        if name.starts_with("device__attribute_") || name.starts_with("profiler__") || value.contains(';') {
            return;
        }
        if let Some(v) = number(value) {
            let scale = unit_scale(unit).map(|u| u.factor).unwrap_or(1.0);
            self.raw.insert(name.to_string(), v * scale);
        }
    }

    pub(super) fn into_sample(self, ctx: &Context) -> Result<KernelSample, (u64, String)> {
        let raw = &self.raw;
        let get = |names: &[&str]| names.iter().find_map(|n| raw.get(*n).copied());
        let duration_s = get(&["gpu__time_duration.sum", "gpu__time_duration", "Duration"])
            .or_else(|| ratio(get(&["sm__cycles_elapsed.avg"]), get(&["sm__cycles_elapsed.avg.per_second"])))
            .or_else(|| ratio(get(&["Elapsed Cycles"]), get(&["SM Frequency"])));
        let Some(duration_s) = duration_s.filter(|d| d.is_finite() && *d > 0.0) else {
            return Err((
                self.line,
                format!(
                    "kernel {}: no positive duration (gpu__time_duration.sum, or sm__cycles_elapsed.avg and its \
                     .per_second)",
                    self.name
                ),
            ));
        };
        let mut metrics = BTreeMap::new();
        let mut put = |key: &str, v: Option<f64>| {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                metrics.insert(key.to_string(), v);
            }
        };
        for (key, p) in [(km::FLOPS_FP32, 'f'), (km::FLOPS_FP64, 'd'), (km::FLOPS_FP16, 'h')] {
            put(key, flops(raw, p));
        }
        put(km::FLOPS_TENSOR, tensor_flops(raw));
        let dram = get(&["dram__bytes.sum"])
            .or_else(|| sum2(get(&["dram__bytes_read.sum"]), get(&["dram__bytes_write.sum"])))
            .or_else(|| sum2(get(&["dram__read_bytes"]), get(&["dram__write_bytes"])));
        put(km::DRAM_BYTES, dram);
        put(km::L2_BYTES, get(&["lts__t_bytes.sum"]));
        put(km::L1_BYTES, get(&["l1tex__t_bytes.sum"]));
        let pct = |v: Option<f64>| v.map(|p| p / 100.0);
        put(km::L1_HIT_RATE, pct(get(&["l1tex__t_sector_hit_rate.pct", "L1/TEX Hit Rate", "tex__hitrate_pct"])));
        put(
            km::L2_HIT_RATE,
            pct(get(&["lts__t_sector_hit_rate.pct", "L2 Hit Rate", "lts__request_total_sectors_hitrate_pct"])),
        );
        put(
            km::ACHIEVED_OCCUPANCY,
            pct(get(&[
                "sm__warps_active.avg.pct_of_peak_sustained_active",
                "Achieved Occupancy",
                "sm__active_warps_avg_per_active_cycle_pct",
            ])),
        );
        put(km::REGISTERS_PER_THREAD, get(&["launch__registers_per_thread", "Registers Per Thread"]));
        let smem = sum2(get(&["launch__shared_mem_per_block_static"]), get(&["launch__shared_mem_per_block_dynamic"]))
            .or_else(|| sum2(get(&["Static Shared Memory Per Block"]), get(&["Dynamic Shared Memory Per Block"])));
        put(km::SHARED_MEM_BYTES, smem);
        put(km::SM_CYCLES, get(&["sm__cycles_elapsed.avg", "sm__elapsed_cycles_avg", "Elapsed Cycles"]));
        for (name, v) in raw {
            metrics.insert(format!("ncu.{name}"), *v);
        }
        let grid = self.grid.or_else(|| get(&["launch__grid_size"]).and_then(total));
        let block = self.block.or_else(|| get(&["launch__block_size"]).and_then(total));
        Ok(KernelSample {
            name: self.name,
            gpu: self.gpu.or_else(|| ctx.gpu.clone()),
            duration_us: duration_s * 1e6,
            grid,
            block,
            metrics,
            attributes: self.attributes,
        })
    }
}

fn ratio(num: Option<f64>, den: Option<f64>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 => Some(n / d),
        _ => None,
    }
}

/// Both, or the one that is present.
fn sum2(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

/// add + mul + 2·fma for precision prefix `p` (`f`, `d`, `h`), from `sm__` or `smsp__` counters; all three needed.
fn flops(raw: &BTreeMap<String, f64>, p: char) -> Option<f64> {
    let op = |op: &str| {
        ["sm", "smsp"]
            .iter()
            .find_map(|unit| raw.get(&format!("{unit}__sass_thread_inst_executed_op_{p}{op}_pred_on.sum")))
    };
    Some(op("add")? + op("mul")? + 2.0 * op("fma")?)
}

/// Sum of the tensor-path operation counts (`sm__ops_path_tensor_src_*.sum`).
fn tensor_flops(raw: &BTreeMap<String, f64>) -> Option<f64> {
    let paths = |sparsity: bool| {
        raw.iter()
            .filter(|(k, _)| {
                k.starts_with("sm__ops_path_tensor_src_") && k.ends_with(".sum") && k.contains("sparsity") == sparsity
            })
            .map(|(_, v)| *v)
            .fold(None, |acc: Option<f64>, v| Some(acc.unwrap_or(0.0) + v))
    };
    paths(false).or_else(|| paths(true))
}

/// `"(9, 32, 1)"` → `[9, 32, 1]`.
fn triple(s: &str) -> Option<[u64; 3]> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    let mut it = inner.split(',').map(|p| p.trim().parse::<u64>().ok());
    let t = [it.next()??, it.next()??, it.next()??];
    it.next().is_none().then_some(t)
}

/// A total count as `[n, 1, 1]`.
fn total(v: f64) -> Option<[u64; 3]> {
    (v >= 1.0 && v.fract() == 0.0 && v < 1.8e19).then_some([v as u64, 1, 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_dims_parse_as_triples() {
        assert_eq!(triple("(384, 1, 1)"), Some([384, 1, 1]));
        assert_eq!(triple("(1, 2)"), None);
    }
}

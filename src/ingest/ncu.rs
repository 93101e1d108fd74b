//! Nsight Compute CSV exports (`ncu --csv`), both pages:
//!
//! - `--page details` (the default): long format, one row per (launch, metric) with `"ID", …, "Kernel Name", …,
//!   "Section Name", "Metric Name", "Metric Unit", "Metric Value"`. Recent versions add `Block Size`, `Grid Size`,
//!   `Device`, `CC` and rule columns (rule rows have no metric and are skipped); ncu 2020 has `Kernel Time` (a
//!   wall-clock string) and no launch columns. Section rows use readable names (`Duration`, `Registers Per
//!   Thread`, `Achieved Occupancy`); `--metrics` rows use metric names (`dram__bytes.sum`).
//! - `--page raw`: wide format, a header of identity columns then one column per metric, a second row of units,
//!   then one row per launch.
//!
//! Captured stdout is accepted: everything before the header line starting with `"ID",` (`==PROF==` lines,
//! program output) is skipped, and later rows whose `ID` is not a launch number are ignored. Values may carry
//! thousands separators (`"1,553,918.10"`) or be `n/a`; every value is scaled by its unit (ncu's prefixes are SI:
//! `Kbyte` = 1000 bytes; `nsecond`/`usecond`/`msecond`/`ns`; `Khz`, `Mhz`, `Ghz`; `cycle/second`, …). Instanced
//! values (`"32.00; 32.00; …"`) are skipped.
//!
//! One [`KernelSample`] per launch (`ID`), columns mapped by header name:
//! - `duration_us` from `gpu__time_duration.sum` (Pascal: `gpu__time_duration`; section: `Duration`), else
//!   `sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second` (MODELS.md §2.1), else section `Elapsed Cycles
//!   / SM Frequency`. A launch without any of them is rejected.
//! - `grid`/`block` from the `Grid Size`/`Block Size` columns (`"(9, 32, 1)"`), else `launch__grid_size` /
//!   `launch__block_size` (totals, reported as `[n, 1, 1]`).
//! - `gpu` from `device__attribute_display_name` (raw page), else the upload's `gpu`; the `Device` column is an
//!   index and goes to the attribute `device`.
//! - `metrics` with the names of [`kernel_metrics`](super::kernel_metrics): FLOPs per precision = add + mul + 2·fma
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
//! - launches without a duration are rejected, one [`Rejected`](super::Rejected) per kernel name with a count.
//! - every other numeric metric too, as `ncu.<name as printed>` converted to the base unit of its unit (byte,
//!   second, hz, count, …; percentages stay 0–100), except the per-device constants `device__attribute_*` and the
//!   profiler's own `profiler__*`.
//! - attributes: `id`, `process`, `pid`, `host`, `context`, `stream`, `device`, `cc`, `kernel_time` when present,
//!   `source_format = ncu_csv`.

use std::collections::{BTreeMap, HashMap};

use super::text::{number, Lines, Tally};
use super::{utf8, Context, ParseError, Parsed};
use crate::samples::{kernel_metrics as km, Attributes, KernelSample, Sample};

/// Identity columns: everything else in the raw page is a metric.
const IDENTITY: [&str; 15] = [
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Kernel Time",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Section Name",
    "Metric Name",
    "Metric Unit",
];

/// Parses an Nsight Compute CSV export (see the module doc).
///
/// Errors: no line starting with `"ID",`; a header without `Kernel Name`; broken CSV quoting (with its line).
pub fn parse(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    let text = utf8(bytes)?;
    let (offset, header_line) = header_start(text).ok_or_else(|| {
        ParseError::whole("not an Nsight Compute CSV: no header line starting with \"ID\", (run ncu with --csv)")
    })?;
    let body = text.as_bytes().get(offset..).unwrap_or(&[]);
    let mut lines = Lines::new(body);
    let mut reader = csv::ReaderBuilder::new().flexible(true).has_headers(true).from_reader(body);
    let headers = reader.headers().map_err(|e| shifted(lines.error(&e), header_line))?.clone();
    let col = |name: &str| headers.iter().position(|h| h.trim() == name);
    let Some(id_i) = col("ID") else { return Err(ParseError::at(header_line, "the header has no ID column")) };
    let Some(name_i) = col("Kernel Name") else {
        return Err(ParseError::at(header_line, "the header has no \"Kernel Name\" column"));
    };
    let cols = Columns {
        id: id_i,
        name: name_i,
        identity: IDENTITY.iter().filter_map(|n| col(n).map(|i| (*n, i))).collect(),
        metric_name: col("Metric Name"),
        metric_unit: col("Metric Unit"),
        metric_value: col("Metric Value"),
    };
    let mut launches: Vec<Launch> = Vec::new();
    if let (Some(mn), Some(mv)) = (cols.metric_name, cols.metric_value) {
        // Long (details) layout: rows grouped by ID.
        let mut index: HashMap<String, usize> = HashMap::new();
        for record in reader.records() {
            let record = record.map_err(|e| shifted(lines.error(&e), header_line))?;
            let line = lines.of(&record).saturating_add(header_line - 1);
            let Some(id) = launch_id(&record, cols.id) else { continue };
            let slot = match index.get(id) {
                Some(&i) => i,
                None => {
                    index.insert(id.to_string(), launches.len());
                    launches.push(Launch::new(&record, &cols, line));
                    launches.len() - 1
                }
            };
            let name = record.get(mn).unwrap_or("").trim();
            if name.is_empty() {
                continue; // a rule row (SpeedOfLight, LaunchStats, …): no metric
            }
            let unit = cols.metric_unit.and_then(|i| record.get(i)).unwrap_or("");
            let value = record.get(mv).unwrap_or("");
            launches[slot].add(name, unit, value);
        }
    } else {
        // Wide (raw) layout: a units row, then one row per launch.
        let mut units: Option<csv::StringRecord> = None;
        for record in reader.records() {
            let record = record.map_err(|e| shifted(lines.error(&e), header_line))?;
            let line = lines.of(&record).saturating_add(header_line - 1);
            let Some(_) = launch_id(&record, cols.id) else {
                if units.is_none() && record.get(cols.id).is_some_and(|v| v.trim().is_empty()) {
                    units = Some(record);
                }
                continue;
            };
            let mut launch = Launch::new(&record, &cols, line);
            for (i, name) in headers.iter().enumerate() {
                let name = name.trim();
                if cols.is_identity(i) || name.is_empty() {
                    continue;
                }
                let unit = units.as_ref().and_then(|u| u.get(i)).unwrap_or("");
                launch.add(name, unit, record.get(i).unwrap_or(""));
            }
            launches.push(launch);
        }
    }
    if launches.is_empty() {
        return Err(ParseError::at(header_line, "the Nsight Compute CSV has a header but no kernel launches"));
    }
    let mut out = Parsed::default();
    let mut tally = Tally::default();
    for launch in launches {
        match launch.into_sample(ctx) {
            Ok(s) => out.samples.push(Sample::Kernel(s)),
            Err((line, reason)) => tally.add(line, reason),
        }
    }
    out.rejected = tally.into_rejected();
    Ok(out)
}

/// The capture contains an ncu CSV header (`"ID","Process ID",…`) on a line of its own.
pub fn looks_like(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    text.lines().any(|l| l.starts_with("\"ID\",\"Process ID\""))
}

/// Byte offset and 1-based line of the header line.
fn header_start(text: &str) -> Option<(usize, u64)> {
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line.trim_start_matches('\u{feff}').starts_with("\"ID\",") {
            return Some((offset, i as u64 + 1));
        }
        offset += line.len();
    }
    None
}

fn shifted(mut e: ParseError, header_line: u64) -> ParseError {
    e.line = e.line.map(|l| l.saturating_add(header_line - 1));
    e
}

/// The launch ID of a data row; `None` for rows that are not launches (units row, trailing program output).
fn launch_id(record: &csv::StringRecord, id_i: usize) -> Option<&str> {
    let id = record.get(id_i)?.trim();
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then_some(id)
}

struct Columns {
    id: usize,
    name: usize,
    identity: Vec<(&'static str, usize)>,
    metric_name: Option<usize>,
    metric_unit: Option<usize>,
    metric_value: Option<usize>,
}

impl Columns {
    fn is_identity(&self, i: usize) -> bool {
        self.identity.iter().any(|(_, c)| *c == i)
    }
}

/// One kernel launch being assembled.
struct Launch {
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
    fn new(record: &csv::StringRecord, cols: &Columns, line: u64) -> Launch {
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

    fn add(&mut self, name: &str, unit: &str, value: &str) {
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

    fn into_sample(self, ctx: &Context) -> Result<KernelSample, (u64, String)> {
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

/// What a value in a unit is multiplied by to reach the unit's base (byte, second, hz, count …).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Scale {
    factor: f64,
}

/// Scale of an ncu unit string: SI prefixes (`K`, `M`, `G`, `T`) on counts and bytes, `n`/`u`/`m` on seconds,
/// a `/denominator` divides. Unknown words scale by 1. `None` only for an empty component in a ratio.
fn unit_scale(unit: &str) -> Option<Scale> {
    let unit = unit.trim();
    if unit.is_empty() || unit == "%" {
        return Some(Scale { factor: 1.0 });
    }
    let mut parts = unit.splitn(2, '/');
    let num = word_factor(parts.next()?)?;
    let den = match parts.next() {
        Some(d) => word_factor(d)?,
        None => 1.0,
    };
    Some(Scale { factor: num / den })
}

fn word_factor(word: &str) -> Option<f64> {
    let w = word.trim();
    if w.is_empty() {
        return None;
    }
    let time = [("nsecond", 1e-9), ("usecond", 1e-6), ("msecond", 1e-3), ("second", 1.0), ("ns", 1e-9)];
    let time_short = [("us", 1e-6), ("ms", 1e-3), ("s", 1.0)];
    if let Some((_, f)) = time.iter().chain(time_short.iter()).find(|(n, _)| *n == w) {
        return Some(*f);
    }
    let prefixed = |p: char| match p {
        'K' | 'k' => Some(1e3),
        'M' => Some(1e6),
        'G' => Some(1e9),
        'T' => Some(1e12),
        'P' => Some(1e15),
        _ => None,
    };
    let bases = ["byte", "hz", "Hz", "cycle", "inst", "sector", "request", "warp", "thread", "block", "B"];
    let mut chars = w.chars();
    if let (Some(first), rest) = (chars.next(), chars.as_str()) {
        if bases.contains(&rest) {
            if let Some(f) = prefixed(first) {
                return Some(f);
            }
        }
    }
    Some(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/../shared/fixtures/ncu/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    fn kernels(p: &Parsed) -> Vec<&KernelSample> {
        p.samples.iter().filter_map(|s| if let Sample::Kernel(k) = s { Some(k) } else { None }).collect()
    }

    #[test]
    fn units_scale_to_base() {
        assert_eq!(unit_scale("Kbyte").unwrap().factor, 1e3);
        assert_eq!(unit_scale("Mbyte").unwrap().factor, 1e6);
        assert_eq!(unit_scale("usecond").unwrap().factor, 1e-6);
        assert_eq!(unit_scale("msecond").unwrap().factor, 1e-3);
        assert_eq!(unit_scale("ns").unwrap().factor, 1e-9);
        assert_eq!(unit_scale("Ghz").unwrap().factor, 1e9);
        assert_eq!(unit_scale("cycle/usecond").unwrap().factor, 1e6);
        assert_eq!(unit_scale("Gbyte/second").unwrap().factor, 1e9);
        assert_eq!(unit_scale("register/thread").unwrap().factor, 1.0);
        assert_eq!(unit_scale("%").unwrap().factor, 1.0);
        assert_eq!(triple("(384, 1, 1)"), Some([384, 1, 1]));
        assert_eq!(triple("(1, 2)"), None);
    }

    #[test]
    fn b200_details_with_prof_lines() {
        let bytes = fixture("superbench_B200_ncu_details_csv_with_PROF_lines.log");
        let p = parse(&bytes, &Context { gpu: Some("B200".into()), ..Default::default() }).unwrap();
        let k = kernels(&p);
        assert_eq!(k.len(), 1);
        let k = k[0];
        assert!(k.name.starts_with("cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32"));
        // "Duration","ns","406240"
        assert!((k.duration_us - 406.24).abs() < 1e-9, "{}", k.duration_us);
        assert_eq!(k.block, Some([384, 1, 1]));
        assert_eq!(k.grid, Some([9, 32, 1]));
        assert_eq!(k.gpu.as_deref(), Some("B200"));
        assert_eq!(k.metrics[km::REGISTERS_PER_THREAD], 168.0);
        // "Achieved Occupancy","%","15.53"
        assert!((k.metrics[km::ACHIEVED_OCCUPANCY] - 0.1553).abs() < 1e-12);
        // static 0 + dynamic 205696 bytes/block; the driver's 1024 is not the kernel's.
        assert_eq!(k.metrics[km::SHARED_MEM_BYTES], 205696.0);
        assert_eq!(k.metrics[km::SM_CYCLES], 508757.0);
        assert_eq!(k.metrics["ncu.SM Frequency"], 1239496049.13);
        assert_eq!(k.attributes["cc"], "10.0");
        assert_eq!(k.attributes["device"], "0");
        assert!(p.rejected.is_empty());
    }

    #[test]
    fn v100_details_old_columns_duration_from_cycles() {
        let bytes = fixture("gene_V100_summit_ncu2020_details_units-base_time-dram.csv");
        let p = parse(&bytes, &Context::default()).unwrap();
        let k = kernels(&p);
        assert_eq!(k.len(), 8);
        // ID 0: dram__bytes.sum 690,974,304; sm__cycles_elapsed.avg 1,209,826.20 at 1,309,471,763.30 cycle/s.
        assert_eq!(k[0].metrics[km::DRAM_BYTES], 690_974_304.0);
        assert!((k[0].duration_us - 1_209_826.20 / 1_309_471_763.30 * 1e6).abs() < 1e-6);
        assert_eq!(k[0].attributes["kernel_time"], "2020-Aug-27 18:57:25");
        assert_eq!((k[0].grid, k[0].block, k[0].gpu.as_ref()), (None, None, None));
        assert!(k[1].name.starts_with("add_i_col_times_ij_block_kernel"));
        assert_eq!(k[7].metrics[km::DRAM_BYTES], 891_866_400.0);
    }

    #[test]
    fn v100_fp64_flops_are_add_mul_and_two_fma() {
        let bytes = fixture("gene_V100_summit_ncu2020_details_units-base_time-flops.csv");
        let p = parse(&bytes, &Context::default()).unwrap();
        let k = kernels(&p);
        assert_eq!(k.len(), 8);
        // ID 0: dadd 0, dfma 137,625,600, dmul 55,050,240.
        assert_eq!(k[0].metrics[km::FLOPS_FP64], 55_050_240.0 + 2.0 * 137_625_600.0);
        // ID 1: all three 27,525,120.
        assert_eq!(k[1].metrics[km::FLOPS_FP64], 4.0 * 27_525_120.0);
        assert!(!k[0].metrics.contains_key(km::FLOPS_FP32));
        assert!((k[0].duration_us - 179_638_319.62 / 1_312_168_927.90 * 1e6).abs() < 1e-6);
    }

    #[test]
    fn gtx1080_raw_page_legacy_names() {
        let bytes = fixture("microgpusim_GTX1080_ncu_page_raw_wide.csv");
        let p = parse(&bytes, &Context::default()).unwrap();
        let k = kernels(&p);
        assert_eq!(k.len(), 3);
        let k0 = k[0];
        assert_eq!(k0.name, "vecAdd");
        assert_eq!(k0.gpu.as_deref(), Some("NVIDIA GeForce GTX 1080"));
        // gpu__time_duration "2,720.00" nsecond
        assert!((k0.duration_us - 2.72).abs() < 1e-12);
        // dram__read_bytes 7,552.00 + dram__write_bytes 384.00
        assert_eq!(k0.metrics[km::DRAM_BYTES], 7936.0);
        assert_eq!((k0.grid, k0.block), (Some([1, 1, 1]), Some([1024, 1, 1])));
        assert_eq!(k0.metrics[km::REGISTERS_PER_THREAD], 8.0);
        assert!((k0.metrics[km::L2_HIT_RATE] - 0.3077).abs() < 1e-12);
        assert!((k0.metrics[km::ACHIEVED_OCCUPANCY] - 0.2830).abs() < 1e-12);
        assert_eq!(k0.metrics[km::SM_CYCLES], 5773.25);
        assert_eq!(k0.metrics[km::SHARED_MEM_BYTES], 0.0);
        // dram__bytes_per_sec 2,917,647,058.82 byte/second kept raw; instanced lists and device constants are not.
        assert_eq!(k0.metrics["ncu.dram__bytes_per_sec"], 2_917_647_058.82);
        assert!(!k0.metrics.contains_key("ncu.inst_executed"));
        assert!(!k0.metrics.keys().any(|m| m.contains("device__attribute")));
        assert_eq!(k[2].metrics[km::DRAM_BYTES], 2176.0 + 256.0);
    }

    #[test]
    fn scaled_units_na_and_missing_duration() {
        let csv = "==PROF== Connected\nsome output\n\
\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"gpu__time_duration.sum\",\"usecond\",\"1,553.50\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"dram__bytes_read.sum\",\"Mbyte\",\"1.5\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"dram__bytes_write.sum\",\"Kbyte\",\"2\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"lts__t_sector_hit_rate.pct\",\"%\",\"n/a\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum\",\"Minst\",\"1\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"smsp__sass_thread_inst_executed_op_fmul_pred_on.sum\",\"inst\",\"10\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum\",\"Kinst\",\"2\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"sm__ops_path_tensor_src_fp16_dst_fp32.sum\",\"Minst\",\"3\"\n\
\"1\",\"1\",\"p\",\"h\",\"k2\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"dram__bytes.sum\",\"byte\",\"5\"\n\
==PROF== Disconnected\n";
        let p = parse(csv.as_bytes(), &Context::default()).unwrap();
        let k = kernels(&p);
        assert_eq!(k.len(), 1);
        assert!((k[0].duration_us - 1553.5).abs() < 1e-9);
        assert_eq!(k[0].metrics[km::DRAM_BYTES], 1.5e6 + 2e3);
        assert!(!k[0].metrics.contains_key(km::L2_HIT_RATE));
        assert_eq!(k[0].metrics[km::FLOPS_FP32], 1e6 + 10.0 + 2.0 * 2e3);
        assert_eq!(k[0].metrics[km::FLOPS_TENSOR], 3e6);
        assert_eq!(p.rejected.len(), 1);
        assert_eq!(p.rejected[0].line, 12);
        assert!(p.rejected[0].reason.contains("k2"), "{}", p.rejected[0].reason);
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(parse(b"hello\nworld\n", &Context::default()).unwrap_err().message.contains("\"ID\""));
        let e = parse(b"x\n\"ID\",\"Process ID\"\n\"0\",\"1\"\n", &Context::default()).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(looks_like(b"==PROF== x\n\"ID\",\"Process ID\",\"Process Name\"\n"));
        assert!(!looks_like(b"ID,Process ID\n"));
    }
}

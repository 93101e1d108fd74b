//! One rocprof dispatch table (v1, Omniperf, v2 or a v3 trace): columns by name, rows → kernel samples.

use std::collections::HashMap;

use super::counters::derived;
use super::{agent_key, clean_name, Companions};

use super::super::text::{number, whole};
use crate::samples::{kernel_metrics as km, Attributes, KernelSample};

/// Column positions of one dispatch table.
pub(super) struct Table {
    pub(super) name: Option<usize>,
    pub(super) dispatch: Option<usize>,
    pub(super) agent: Option<usize>,
    pub(super) start: Option<usize>,
    pub(super) end: Option<usize>,
    pub(super) grid: [Option<usize>; 3],
    pub(super) wg: [Option<usize>; 3],
    pub(super) grid_1d: Option<usize>,
    pub(super) wg_1d: Option<usize>,
    pub(super) lds: Option<usize>,
    pub(super) vgpr: Option<usize>,
    pub(super) accum_vgpr: Option<usize>,
    pub(super) sgpr: Option<usize>,
    pub(super) wave: Option<usize>,
    /// Counter columns (wide v1/v2 files).
    pub(super) counters: Vec<usize>,
}

/// Non-counter columns of v1/Omniperf/v2/v3 dispatch tables (and their `_<n>` duplicates in merged Omniperf
/// files).
const IDENTITY: [&str; 45] = [
    "Index",
    "vgpr",
    "Dispatch_ID",
    "Dispatch_Id",
    "KernelName",
    "Kernel_Name",
    "Kernel_Id",
    "gpu-id",
    "GPU_ID",
    "Agent_Id",
    "queue-id",
    "queue-index",
    "Queue_ID",
    "Queue_Id",
    "Stream_Id",
    "pid",
    "tid",
    "PID",
    "TID",
    "Process_Id",
    "Thread_Id",
    "grd",
    "wgr",
    "lds",
    "scr",
    "Grid_Size",
    "Workgroup_Size",
    "LDS_Per_Workgroup",
    "Scratch_Per_Workitem",
    "arch_vgpr",
    "accum_vgpr",
    "sgpr",
    "Arch_VGPR",
    "Accum_VGPR",
    "SGPR",
    "wave_size",
    "Wave_Size",
    "sig",
    "obj",
    "DispatchNs",
    "BeginNs",
    "EndNs",
    "CompleteNs",
    "Correlation_ID",
    "Correlation_Id",
];

fn is_identity(h: &str) -> bool {
    let base = match h.rsplit_once('_') {
        Some((b, n)) if !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) => b,
        _ => h,
    };
    IDENTITY.contains(&h)
        || IDENTITY.contains(&base)
        || matches!(
            h,
            "Kind"
                | "Start_Timestamp"
                | "End_Timestamp"
                | "Private_Segment_Size"
                | "Group_Segment_Size"
                | "LDS_Block_Size"
                | "Scratch_Size"
                | "VGPR_Count"
                | "Accum_VGPR_Count"
                | "SGPR_Count"
        )
        || h.starts_with("Grid_Size_")
        || h.starts_with("Workgroup_Size_")
}

impl Table {
    pub(super) fn new(headers: &csv::StringRecord) -> Table {
        let col = |names: &[&str]| names.iter().find_map(|n| headers.iter().position(|h| h == *n));
        let xyz =
            |base: &str| ["X", "Y", "Z"].map(|d| headers.iter().position(|h| h == format!("{base}_{d}").as_str()));
        Table {
            name: col(&["KernelName", "Kernel_Name"]),
            dispatch: col(&["Index", "Dispatch_ID", "Dispatch_Id"]),
            agent: col(&["Agent_Id", "gpu-id", "GPU_ID"]),
            start: col(&["BeginNs", "Start_Timestamp"]),
            end: col(&["EndNs", "End_Timestamp"]),
            grid: xyz("Grid_Size"),
            wg: xyz("Workgroup_Size"),
            grid_1d: col(&["grd", "Grid_Size"]),
            wg_1d: col(&["wgr", "Workgroup_Size"]),
            lds: col(&["lds", "LDS_Per_Workgroup", "LDS_Block_Size", "Group_Segment_Size"]),
            vgpr: col(&["arch_vgpr", "vgpr", "Arch_VGPR", "VGPR_Count"]),
            accum_vgpr: col(&["accum_vgpr", "Accum_VGPR", "Accum_VGPR_Count"]),
            sgpr: col(&["sgpr", "SGPR", "SGPR_Count"]),
            wave: col(&["wave_size", "Wave_Size"]),
            counters: headers
                .iter()
                .enumerate()
                .filter(|(_, h)| !is_identity(h) && !h.ends_with(']') && !h.is_empty())
                .map(|(i, _)| i)
                .collect(),
        }
    }

    /// The sample of one dispatch row and, when its duration comes from its timestamps and it has a dispatch id,
    /// the key that identifies the dispatch across Omniperf's per-pass tables.
    pub(super) fn sample(
        &self,
        record: &csv::StringRecord,
        headers: &csv::StringRecord,
        with: &Companions,
    ) -> Result<(KernelSample, Option<DispatchKey>), String> {
        let get = |i: Option<usize>| i.and_then(|i| record.get(i)).filter(|v| !v.is_empty());
        let name = clean_name(get(self.name).unwrap_or("")).to_string();
        if name.is_empty() {
            return Err("no kernel name".into());
        }
        let dispatch = get(self.dispatch).and_then(whole);
        let agent = agent_key(get(self.agent).unwrap_or(""));
        let counted = dispatch.and_then(|d| with.counted.get(&(agent.clone(), d))).filter(|c| c.kernel == name);
        let num = |i: Option<usize>| get(i).and_then(number);
        let wg = dims3(self.wg.map(|i| get(i).and_then(whole)), get(self.wg_1d).and_then(whole));
        let grid_items = dims3(self.grid.map(|i| get(i).and_then(whole)), get(self.grid_1d).and_then(whole));
        let grid = match (grid_items, wg) {
            (Some(g), Some(w)) if w.iter().all(|&x| x > 0) => {
                Some([g[0].div_ceil(w[0]), g[1].div_ceil(w[1]), g[2].div_ceil(w[2])])
            }
            _ => None,
        };
        let mut values: HashMap<&str, f64> = HashMap::new();
        for &i in &self.counters {
            if let (Some(h), Some(v)) = (headers.get(i), get(Some(i)).and_then(number)) {
                values.insert(h, v);
            }
        }
        if let Some(c) = counted {
            for (k, v) in &c.values {
                values.insert(k.as_str(), *v);
            }
        }
        let gpu = with.agents.get(&agent).cloned().or_else(|| with.system.gpu.clone()).or_else(|| with.ctx.gpu.clone());
        let mut attributes = Attributes::new();
        let timed = match (get(self.start), get(self.end)) {
            (Some(start), Some(end)) => duration_ns(start, end).map(|d| (d, start, end)),
            _ => Err("no start/end timestamps (run rocprof with --timestamp on or --kernel-trace)".to_string()),
        };
        let (duration_ns, key) = match timed {
            Ok((d, start, end)) => {
                (d, dispatch.map(|id| (agent.clone(), id, name.clone(), start.to_string(), end.to_string())))
            }
            Err(why) => {
                let cycles = values.get("GRBM_GUI_ACTIVE").copied().filter(|c| c.is_finite() && *c >= 1.0);
                let Some(cycles) = cycles else { return Err(format!("{name}: {why}")) };
                let Some(clock) = engine_clock(gpu.as_deref(), with) else {
                    return Err(format!(
                        "{name}: {why}; GRBM_GUI_ACTIVE would give it with the device's clock: name a catalog GPU \
                         (gpu) or upload Omniperf's sysinfo.csv"
                    ));
                };
                attributes.insert("duration_source".into(), "grbm_gui_active/(num_xcd*clock)".into());
                attributes.insert("clock_ghz".into(), clock.ghz.to_string());
                attributes.insert("num_xcd".into(), clock.xcds.to_string());
                attributes.insert("clock_source".into(), clock.source);
                (cycles / f64::from(clock.xcds) / clock.ghz, None)
            }
        };
        let wave = num(self.wave).filter(|w| *w > 0.0).unwrap_or(64.0);
        let mut metrics = derived(&values, wave);
        let vgpr = num(self.vgpr).or(counted.and_then(|c| c.vgpr));
        let accum = num(self.accum_vgpr).or(counted.and_then(|c| c.accum_vgpr));
        if let Some(v) = vgpr {
            metrics.insert(km::REGISTERS_PER_THREAD.into(), v + accum.unwrap_or(0.0));
        }
        if let Some(l) = num(self.lds).or(counted.and_then(|c| c.lds)) {
            metrics.insert(km::SHARED_MEM_BYTES.into(), l);
        }
        for (k, v) in &values {
            metrics.insert(format!("rocprof.{k}"), *v);
        }
        attributes.insert("source_format".into(), "rocprof_csv".into());
        if let Some(d) = dispatch {
            attributes.insert("dispatch".into(), d.to_string());
        }
        if !agent.is_empty() {
            attributes.insert("gpu_id".into(), agent.clone());
        }
        if let Some(s) = num(self.sgpr) {
            attributes.insert("sgpr".into(), s.to_string());
        }
        let sample = KernelSample { name, gpu, duration_us: duration_ns / 1e3, grid, block: wg, metrics, attributes };
        Ok((sample, key))
    }
}

/// Agent, dispatch id, kernel name, start and end timestamp as written.
type DispatchKey = (String, u64, String, String, String);

/// A device's engine clock and the XCDs its per-XCD counters are summed over.
struct EngineClock {
    ghz: f64,
    xcds: u32,
    /// `sysinfo.csv` or `catalog <name>`.
    source: String,
}

/// The clock of `gpu` for a `GRBM_GUI_ACTIVE` reconstruction: `sysinfo.csv`'s `max_sclk`/`num_xcd` where given,
/// else the catalog entry of `gpu` (or of the upload's `gpu` when the file's name is not in the catalog).
fn engine_clock(gpu: Option<&str>, with: &Companions) -> Option<EngineClock> {
    let catalog = gpu.and_then(crate::hw::lookup).or_else(|| with.ctx.gpu.as_deref().and_then(crate::hw::lookup));
    let ghz = with.system.max_sclk_mhz.map(|m| m / 1e3).or(catalog.map(|g| g.spec.clock_ghz))?;
    let xcds = with.system.num_xcd.or(catalog.map(|g| g.xcds))?;
    let cat = catalog.map(|g| format!("catalog {}", g.spec.name)).unwrap_or_default();
    let source = match (with.system.max_sclk_mhz.is_some(), with.system.num_xcd.is_some()) {
        (true, true) => "sysinfo.csv".to_string(),
        (false, false) => cat,
        (true, false) => format!("sysinfo.csv max_sclk, {cat} XCDs"),
        (false, true) => format!("{cat} clock, sysinfo.csv num_xcd"),
    };
    (ghz.is_finite() && ghz > 0.0 && xcds > 0).then_some(EngineClock { ghz, xcds, source })
}

/// Per-dimension sizes when the X column exists (missing Y/Z are 1), else a 1-D total.
fn dims3(xyz: [Option<u64>; 3], one_d: Option<u64>) -> Option<[u64; 3]> {
    match xyz {
        [Some(x), y, z] => Some([x, y.unwrap_or(1), z.unwrap_or(1)]),
        _ => one_d.map(|n| [n, 1, 1]),
    }
}

/// A timestamp in ns: exact for integers, with its resolution for float notation.
pub(super) fn timestamp(s: &str) -> Result<(f64, f64, Option<u64>), String> {
    let t = s.trim();
    if let Ok(n) = t.parse::<u64>() {
        return Ok((n as f64, 1.0, Some(n)));
    }
    let v = number(t).filter(|v| *v >= 0.0).ok_or_else(|| format!("timestamp {t:?} is not a number"))?;
    let (mantissa, exp) = match t.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().map_err(|_| format!("timestamp {t:?} has a bad exponent"))?),
        None => (t, 0),
    };
    let decimals = mantissa.split_once('.').map(|(_, d)| d.len() as i32).unwrap_or(0);
    let resolution = 10f64.powi(exp.saturating_sub(decimals)).max(1.0);
    Ok((v, resolution, None))
}

pub(super) fn duration_ns(start: &str, end: &str) -> Result<f64, String> {
    let (s, s_res, s_int) = timestamp(start)?;
    let (e, e_res, e_int) = timestamp(end)?;
    if let (Some(a), Some(b)) = (s_int, e_int) {
        return match b.checked_sub(a) {
            Some(d) if d > 0 => Ok(d as f64),
            _ => Err(format!("end timestamp {end} is not after start {start}")),
        };
    }
    let resolution = s_res.max(e_res);
    let d = e - s;
    if d <= 0.0 || resolution * 100.0 > d {
        return Err(format!(
            "timestamps {start} and {end} are written in float notation with a resolution of {resolution:e} ns: the \
             duration is lost"
        ));
    }
    Ok(d)
}

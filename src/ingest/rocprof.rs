//! AMD rocprof outputs: v1 `results.csv` (and Omniperf's renamed copies), rocprofv2 CSVs and rocprofv3
//! (rocprofiler-sdk) `*_kernel_trace.csv` / `*_counter_collection.csv` / `*_agent_info.csv`.
//!
//! Columns are found by name, accepting every spelling of a field:
//! | field | v1 | Omniperf / v2 | v3 |
//! |---|---|---|---|
//! | kernel | `KernelName` | `Kernel_Name` | `Kernel_Name` |
//! | dispatch | `Index` | `Dispatch_ID` | `Dispatch_Id` |
//! | start, end (ns) | `BeginNs`, `EndNs` | `Start_Timestamp`, `End_Timestamp` | same |
//! | grid (work-items) | `grd` | `Grid_Size` | `Grid_Size_X/Y/Z` (counter file: `Grid_Size`) |
//! | work-group (work-items) | `wgr` | `Workgroup_Size` | `Workgroup_Size_X/Y/Z` |
//! | LDS per work-group (B) | `lds` | `LDS_Per_Workgroup` | `LDS_Block_Size` / `Group_Segment_Size` |
//! | VGPRs | `arch_vgpr` + `accum_vgpr` | `Arch_VGPR` + `Accum_VGPR` | `VGPR_Count` + `Accum_VGPR_Count` |
//!
//! One [`KernelSample`] per dispatch: name with ` [clone .kd]` / ` (.kd)` / `.kd` removed; `duration_us` =
//! (end − start) / 1000. Timestamps may be written in float notation (`8.1097E+14`, rocprofv2 via Omniperf): their
//! resolution is then 10^(exponent − decimals) ns, and a dispatch whose duration is not known to 1 % (or is not
//! positive) is rejected rather than stored with a made-up duration. `grid` is in **blocks** (work-groups):
//! HSA grid sizes count work-items, so blocks = ceil(grid / work-group) per dimension (1-D files give
//! `[n, 1, 1]`); `block` is the work-group size in work-items. `gpu` is the agent's `Product_Name` (else `Name`)
//! from an `*_agent_info.csv`, or Omniperf's `sysinfo.csv` `gpu_model`, when uploaded together (see
//! [`parse_files`]), else the upload's `gpu`.
//!
//! Counters: every numeric counter column (wide v1/v2) or `Counter_Name`/`Counter_Value` row (v3, joined to the
//! trace by agent and dispatch id) is kept as `rocprof.<counter>`; per-instance columns (`TCC_HIT[3]`) are left
//! out. Normalized metrics where the counters allow (Omniperf's formulas, wave size from the file, else 64):
//! FLOPs per precision = wave × (ADD + MUL + 2·FMA) of `SQ_INSTS_VALU_{ADD,MUL,FMA}_F{32,64,16}`; tensor FLOPs =
//! 512 × Σ `SQ_INSTS_VALU_MFMA_MOPS_{F16,BF16,F32,F64}`; L2 hit rate = TCC_HIT / (TCC_HIT + TCC_MISS); DRAM bytes
//! = 32·RDREQ_32B + 64·(RDREQ − RDREQ_32B) + 64·WRREQ_64B + 32·(WRREQ − WRREQ_64B) over the `TCC_EA_*_sum`
//! counters (TCC↔EA traffic, which includes non-HBM fabric requests); registers per thread = arch + accumulation
//! VGPRs; shared memory = LDS per work-group.
//!
//! Dispatches that cannot be used are rejected, one [`Rejected`](super::Rejected) per distinct reason (the kernel
//! name is part of it) with a count.
//!
//! Other rocprof files (`*_hip_api_stats.csv`, `*_memory_copy_trace.csv`, the `pmc:` input file) hold no kernel
//! dispatches and are refused with an error saying so; a counter collection alone is refused too (it has no
//! timestamps — upload it with its kernel trace).

use std::collections::HashMap;

use super::text::{number, whole, Lines, Tally};
use super::{kernel_metrics as km, utf8, Attributes, Context, KernelSample, ParseError, Parsed, Sample};

/// Parses one rocprof CSV (a dispatch table: v1, Omniperf, v2, or a v3 kernel trace). See [`parse_files`] for
/// several outputs of one run.
pub fn parse(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    parse_files(&[("", bytes)], ctx)
}

/// Parses the CSVs of one rocprof run together: dispatch tables, v3 counter collections (joined by agent and
/// dispatch id), v3 agent info and Omniperf `sysinfo.csv` (for the device name). `files` are (file name, bytes);
/// the name is only used in messages.
///
/// Errors: a file that is not a rocprof CSV or holds no dispatches (naming the file); no dispatch table at all.
pub fn parse_files(files: &[(&str, &[u8])], ctx: &Context) -> Result<Parsed, ParseError> {
    let mut tables = Vec::new();
    let mut counters: HashMap<(String, u64), Counted> = HashMap::new();
    let mut agents: HashMap<String, String> = HashMap::new();
    let mut system_gpu: Option<String> = None;
    for (name, bytes) in files {
        let text = utf8(bytes).map_err(|e| in_file(e, name))?;
        let mut lines = Lines::new(text.as_bytes());
        if text.trim_start().starts_with("pmc:") {
            return Err(in_file(
                ParseError::at(1, "this is rocprof's counter input file (pmc: lines), not its output"),
                name,
            ));
        }
        let mut reader = csv::ReaderBuilder::new().flexible(true).trim(csv::Trim::All).from_reader(text.as_bytes());
        let headers = reader.headers().map_err(|e| in_file(lines.error(&e), name))?.clone();
        let has = |c: &str| headers.iter().any(|h| h == c);
        if has("Counter_Name") && has("Counter_Value") {
            read_counters(&mut reader, &headers, &mut counters, &mut lines).map_err(|e| in_file(e, name))?;
        } else if has("Agent_Type") {
            read_agents(&mut reader, &headers, &mut agents, &mut lines).map_err(|e| in_file(e, name))?;
        } else if has("gpu_model") {
            let gpu_i = headers.iter().position(|h| h == "gpu_model");
            if let Some(Ok(r)) = reader.records().next() {
                system_gpu = gpu_i.and_then(|i| r.get(i)).filter(|g| !g.is_empty()).map(str::to_string);
            }
        } else if has("KernelName") || has("Kernel_Name") {
            tables.push((*name, reader, headers, lines));
        } else if has("TotalDurationNs") || has("Direction") {
            return Err(in_file(
                ParseError::at(1, "this rocprof file (API statistics or memory-copy trace) holds no kernel dispatches"),
                name,
            ));
        } else {
            return Err(in_file(
                ParseError::at(1, "not a rocprof CSV: the header has no KernelName/Kernel_Name column"),
                name,
            ));
        }
    }
    if tables.is_empty() {
        let msg = if counters.is_empty() {
            "no rocprof dispatch table among the files (a kernel trace, results.csv or Omniperf pmc_perf.csv)"
        } else {
            "a counter collection has no timestamps: upload it together with the *_kernel_trace.csv of the same run"
        };
        return Err(ParseError::whole(msg));
    }
    let mut out = Parsed::default();
    let mut tally = Tally::default();
    for (name, mut reader, headers, mut lines) in tables {
        let t = Table::new(&headers);
        for record in reader.records() {
            let record = record.map_err(|e| in_file(lines.error(&e), name))?;
            let line = lines.of(&record);
            match t.sample(&record, &headers, &counters, &agents, system_gpu.as_deref(), ctx) {
                Ok(s) => out.samples.push(Sample::Kernel(s)),
                Err(reason) => tally.add(line, if name.is_empty() { reason } else { format!("{name}: {reason}") }),
            }
        }
    }
    out.rejected = tally.into_rejected();
    if out.samples.is_empty() && out.rejected.is_empty() {
        return Err(ParseError::whole("the rocprof dispatch table has a header but no rows"));
    }
    Ok(out)
}

/// A rocprof CSV header: a kernel-name column with dispatch fields, a v3 counter collection, agent info, or one of
/// rocprof's other outputs (API statistics, memory-copy trace), Omniperf's `sysinfo.csv`, or the `pmc:` input file
/// (detected so that parsing can say what the file is).
pub fn looks_like(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let text = text.trim_start_matches('\u{feff}');
    if text.starts_with("pmc:") {
        return true;
    }
    let Some(first) = text.lines().next() else { return false };
    let cols: Vec<&str> = first.split(',').map(|c| c.trim().trim_matches('"')).collect();
    let has = |c: &str| cols.contains(&c);
    ((has("KernelName") || has("Kernel_Name"))
        && (has("Start_Timestamp") || has("BeginNs") || has("Grid_Size") || has("grd") || has("Dispatch_Id")))
        || (has("Counter_Name") && has("Counter_Value"))
        || (has("Agent_Type") && has("Node_Id"))
        || (has("gpu_model") && has("gpu_arch"))
        || (has("Name") && has("Calls") && has("TotalDurationNs"))
        || (has("Kind") && has("Direction") && has("Start_Timestamp"))
}

fn in_file(mut e: ParseError, name: &str) -> ParseError {
    if !name.is_empty() {
        e.message = format!("{name}: {}", e.message);
    }
    e
}

/// Counters and launch fields of one dispatch from a v3 counter collection.
#[derive(Default)]
struct Counted {
    kernel: String,
    values: HashMap<String, f64>,
    vgpr: Option<f64>,
    accum_vgpr: Option<f64>,
    lds: Option<f64>,
}

fn read_counters(
    reader: &mut csv::Reader<&[u8]>,
    headers: &csv::StringRecord,
    out: &mut HashMap<(String, u64), Counted>,
    lines: &mut Lines,
) -> Result<(), ParseError> {
    let col = |names: &[&str]| names.iter().find_map(|n| headers.iter().position(|h| h == *n));
    let (Some(dispatch_i), Some(name_i), Some(value_i)) =
        (col(&["Dispatch_Id", "Dispatch_ID"]), col(&["Counter_Name"]), col(&["Counter_Value"]))
    else {
        return Err(ParseError::at(1, "a counter collection needs Dispatch_Id, Counter_Name and Counter_Value"));
    };
    let agent_i = col(&["Agent_Id"]);
    let kernel_i = col(&["Kernel_Name"]);
    let vgpr_i = col(&["VGPR_Count", "Arch_VGPR_Count"]);
    let accum_i = col(&["Accum_VGPR_Count"]);
    let lds_i = col(&["LDS_Block_Size", "Group_Segment_Size"]);
    for record in reader.records() {
        let record = record.map_err(|e| lines.error(&e))?;
        let Some(dispatch) = record.get(dispatch_i).and_then(whole) else { continue };
        let agent = agent_key(agent_i.and_then(|i| record.get(i)).unwrap_or(""));
        let entry = out.entry((agent, dispatch)).or_default();
        if entry.kernel.is_empty() {
            entry.kernel = clean_name(kernel_i.and_then(|i| record.get(i)).unwrap_or("")).to_string();
            entry.vgpr = vgpr_i.and_then(|i| record.get(i)).and_then(number);
            entry.accum_vgpr = accum_i.and_then(|i| record.get(i)).and_then(number);
            entry.lds = lds_i.and_then(|i| record.get(i)).and_then(number);
        }
        let name = record.get(name_i).unwrap_or("").trim();
        if let Some(v) = record.get(value_i).and_then(number) {
            if !name.is_empty() && !name.ends_with(']') {
                *entry.values.entry(name.to_string()).or_insert(0.0) += v;
            }
        }
    }
    Ok(())
}

fn read_agents(
    reader: &mut csv::Reader<&[u8]>,
    headers: &csv::StringRecord,
    out: &mut HashMap<String, String>,
    lines: &mut Lines,
) -> Result<(), ParseError> {
    let col = |n: &str| headers.iter().position(|h| h == n);
    let (node_i, type_i, product_i, name_i) = (col("Node_Id"), col("Agent_Type"), col("Product_Name"), col("Name"));
    for record in reader.records() {
        let record = record.map_err(|e| lines.error(&e))?;
        let get = |i: Option<usize>| i.and_then(|i| record.get(i)).filter(|v| !v.is_empty());
        if get(type_i).is_some_and(|t| !t.eq_ignore_ascii_case("GPU")) {
            continue;
        }
        if let (Some(node), Some(name)) = (get(node_i), get(product_i).or(get(name_i))) {
            out.insert(agent_key(node), name.to_string());
        }
    }
    Ok(())
}

/// `"Agent 2"` and `"2"` name the same agent.
fn agent_key(s: &str) -> String {
    let digits: String = s.chars().filter(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() {
        s.trim().to_string()
    } else {
        digits
    }
}

/// Removes the code-object suffixes rocprof appends (` [clone .kd]`, ` (.kd)`, `.kd`).
pub fn clean_name(name: &str) -> &str {
    let n = name.trim();
    for suffix in [" [clone .kd]", " (.kd)", ".kd"] {
        if let Some(s) = n.strip_suffix(suffix) {
            return s.trim_end();
        }
    }
    n
}

/// Column positions of one dispatch table.
struct Table {
    name: Option<usize>,
    dispatch: Option<usize>,
    agent: Option<usize>,
    start: Option<usize>,
    end: Option<usize>,
    grid: [Option<usize>; 3],
    wg: [Option<usize>; 3],
    grid_1d: Option<usize>,
    wg_1d: Option<usize>,
    lds: Option<usize>,
    vgpr: Option<usize>,
    accum_vgpr: Option<usize>,
    sgpr: Option<usize>,
    wave: Option<usize>,
    /// Counter columns (wide v1/v2 files).
    counters: Vec<usize>,
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
    fn new(headers: &csv::StringRecord) -> Table {
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

    fn sample(
        &self,
        record: &csv::StringRecord,
        headers: &csv::StringRecord,
        counted: &HashMap<(String, u64), Counted>,
        agents: &HashMap<String, String>,
        system_gpu: Option<&str>,
        ctx: &Context,
    ) -> Result<KernelSample, String> {
        let get = |i: Option<usize>| i.and_then(|i| record.get(i)).filter(|v| !v.is_empty());
        let name = clean_name(get(self.name).unwrap_or("")).to_string();
        if name.is_empty() {
            return Err("no kernel name".into());
        }
        let dispatch = get(self.dispatch).and_then(whole);
        let (Some(start), Some(end)) = (get(self.start), get(self.end)) else {
            return Err(format!("{name}: no start/end timestamps (run rocprof with --timestamp on or --kernel-trace)"));
        };
        let duration_ns = duration_ns(start, end).map_err(|e| format!("{name}: {e}"))?;
        let agent = agent_key(get(self.agent).unwrap_or(""));
        let counted = dispatch.and_then(|d| counted.get(&(agent.clone(), d))).filter(|c| c.kernel == name);
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
        let mut attributes = Attributes::new();
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
        let gpu = agents.get(&agent).cloned().or_else(|| system_gpu.map(str::to_string)).or_else(|| ctx.gpu.clone());
        Ok(KernelSample { name, gpu, duration_us: duration_ns / 1e3, grid, block: wg, metrics, attributes })
    }
}

/// Per-dimension sizes when the X column exists (missing Y/Z are 1), else a 1-D total.
fn dims3(xyz: [Option<u64>; 3], one_d: Option<u64>) -> Option<[u64; 3]> {
    match xyz {
        [Some(x), y, z] => Some([x, y.unwrap_or(1), z.unwrap_or(1)]),
        _ => one_d.map(|n| [n, 1, 1]),
    }
}

/// A timestamp in ns: exact for integers, with its resolution for float notation.
fn timestamp(s: &str) -> Result<(f64, f64, Option<u64>), String> {
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

fn duration_ns(start: &str, end: &str) -> Result<f64, String> {
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

/// Normalized metrics from counters (Omniperf's formulas; see the module doc).
fn derived(c: &HashMap<&str, f64>, wave: f64) -> std::collections::BTreeMap<String, f64> {
    let mut m = std::collections::BTreeMap::new();
    let get = |names: &[&str]| names.iter().find_map(|n| c.get(n).copied());
    for (key, p) in [(km::FLOPS_FP32, "F32"), (km::FLOPS_FP64, "F64"), (km::FLOPS_FP16, "F16")] {
        let op = |o: &str| get(&[&format!("SQ_INSTS_VALU_{o}_{p}")]);
        if let (Some(a), Some(mu), Some(f)) = (op("ADD"), op("MUL"), op("FMA")) {
            m.insert(key.to_string(), wave * (a + mu + 2.0 * f));
        }
    }
    let mops: Vec<f64> =
        ["F16", "BF16", "F32", "F64"].iter().filter_map(|p| get(&[&format!("SQ_INSTS_VALU_MFMA_MOPS_{p}")])).collect();
    if !mops.is_empty() {
        m.insert(km::FLOPS_TENSOR.into(), 512.0 * mops.iter().sum::<f64>());
    }
    if let (Some(hit), Some(miss)) = (get(&["TCC_HIT_sum", "TCC_HIT"]), get(&["TCC_MISS_sum", "TCC_MISS"])) {
        if hit + miss > 0.0 {
            m.insert(km::L2_HIT_RATE.into(), hit / (hit + miss));
        }
    }
    if let (Some(rd), Some(rd32), Some(wr), Some(wr64)) = (
        get(&["TCC_EA_RDREQ_sum"]),
        get(&["TCC_EA_RDREQ_32B_sum"]),
        get(&["TCC_EA_WRREQ_sum"]),
        get(&["TCC_EA_WRREQ_64B_sum"]),
    ) {
        m.insert(km::DRAM_BYTES.into(), 32.0 * rd32 + 64.0 * (rd - rd32) + 64.0 * wr64 + 32.0 * (wr - wr64));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/../shared/fixtures/rocprof/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    fn kernels(p: &Parsed) -> Vec<&KernelSample> {
        p.samples.iter().filter_map(|s| if let Sample::Kernel(k) = s { Some(k) } else { None }).collect()
    }

    #[test]
    fn names_and_timestamps() {
        assert_eq!(
            clean_name("vecCopy(double*, double*, double*, int, int) [clone .kd]"),
            "vecCopy(double*, double*, double*, int, int)"
        );
        assert_eq!(clean_name("k (.kd)"), "k");
        assert_eq!(clean_name("k.kd"), "k");
        assert_eq!(duration_ns("1411551767635712", "1411551767656192"), Ok(20480.0));
        assert!(duration_ns("8.1097E+14", "8.1097E+14").unwrap_err().contains("float notation"));
        assert!(duration_ns("8.1097E+14", "8.1098E+14").is_err(), "10 s steps are not a duration");
        assert_eq!(duration_ns("1.000000E+06", "1.000500E+06"), Ok(500.0));
        assert!(duration_ns("5", "5").is_err());
    }

    #[test]
    fn v1_omniperf_counters_and_timestamps() {
        let p = parse(&fixture("omniperf_MI200_gfx90a_rocprofv1_SQ_IFETCH_LEVEL.csv"), &Context::default()).unwrap();
        let k = kernels(&p);
        assert_eq!(k.len(), 3);
        assert_eq!(k[0].name, "vecCopy(double*, double*, double*, int, int)");
        // End_Timestamp 1411551767656192 − Start_Timestamp 1411551767635712 = 20480 ns.
        assert!((k[0].duration_us - 20.48).abs() < 1e-12);
        // Grid_Size 1048576 work-items / Workgroup_Size 256 = 4096 work-groups.
        assert_eq!((k[0].grid, k[0].block), (Some([4096, 1, 1]), Some([256, 1, 1])));
        assert_eq!(k[0].metrics["rocprof.SQ_WAVES"], 16384.0);
        assert_eq!(k[0].metrics["rocprof.SQ_IFETCH_LEVEL"], 13592.0);
        assert_eq!(k[0].metrics[km::REGISTERS_PER_THREAD], 8.0);
        assert_eq!(k[0].attributes["gpu_id"], "2");
        assert!(!k[0].metrics.contains_key("rocprof.DispatchNs"));
        assert!((k[2].duration_us - (1411551767802112u64 - 1411551767786592u64) as f64 / 1e3).abs() < 1e-12);
    }

    #[test]
    fn v1_timestamps_file_and_sysinfo_name() {
        let files = [
            ("timestamps.csv", fixture("omniperf_MI200_gfx90a_rocprofv1_timestamps.csv")),
            ("sysinfo.csv", fixture("omniperf_MI200_sysinfo.csv")),
        ];
        let files: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        let p = parse_files(&files, &Context::default()).unwrap();
        let k = kernels(&p);
        assert_eq!(k.len(), 3);
        assert_eq!(k[1].gpu.as_deref(), Some("MI200"));
        // 1411551767765792 − 1411551767749472 = 16320 ns.
        assert!((k[1].duration_us - 16.32).abs() < 1e-12);
    }

    #[test]
    fn pmc_perf_derived_metrics() {
        let bytes = fixture("omniperf_MI200_gfx90a_rocprofv1_pmc_perf.csv");
        let p = parse(&bytes, &Context { gpu: Some("MI250X".into()), ..Default::default() }).unwrap();
        let k = kernels(&p);
        assert_eq!(k.len(), 3);
        assert_eq!(k[0].gpu.as_deref(), Some("MI250X"));
        assert!((k[0].duration_us - 20.48).abs() < 1e-12);
        assert_eq!(k[0].metrics["rocprof.SQ_INSTS_VALU"], 163840.0);
        assert!(!k[0].metrics.keys().any(|m| m.ends_with(']')));
        assert!(!k[0].metrics.contains_key("rocprof.obj_1"));
        for key in [km::L2_HIT_RATE, km::DRAM_BYTES, km::FLOPS_FP64] {
            assert!(k[0].metrics.contains_key(key), "{key}");
        }
        let hit = k[0].metrics["rocprof.TCC_HIT_sum"];
        let miss = k[0].metrics["rocprof.TCC_MISS_sum"];
        assert_eq!(k[0].metrics[km::L2_HIT_RATE], hit / (hit + miss));
    }

    #[test]
    fn v2_float_timestamps_are_rejected_not_invented() {
        for f in ["omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv", "omniperf_MI300X_rocprofv2_timestamps.csv"] {
            let p = parse(&fixture(f), &Context::default()).unwrap();
            assert!(p.samples.is_empty());
            // The three dispatches share one reason: one rejection at the first one's line, with the count.
            assert_eq!(p.rejected.len(), 1);
            assert_eq!(p.rejected[0].line, 2);
            assert!(p.rejected[0].reason.contains("8.1097E+14"), "{}", p.rejected[0].reason);
            assert!(p.rejected[0].reason.starts_with("vecCopy(double*, double*, double*, int, int): "));
            assert!(p.rejected[0].reason.ends_with("(3 times)"), "{}", p.rejected[0].reason);
        }
    }

    #[test]
    fn v3_kernel_trace_alone_and_with_counters() {
        let trace = fixture("rocprofv3_kernel_trace.csv");
        let p = parse(&trace, &Context::default()).unwrap();
        let k = kernels(&p);
        assert_eq!(k.len(), 7);
        // Dispatch 1: 8819330200116308 − 8819330200067564 = 48744 ns; grid 1024×1024 items in 64×1×1 groups.
        assert_eq!(k[0].name, "void addition_kernel<float>(float*, float const*, float const*, int, int)");
        assert!((k[0].duration_us - 48.744).abs() < 1e-12);
        assert_eq!((k[0].grid, k[0].block), (Some([16, 1024, 1]), Some([64, 1, 1])));
        let counters = fixture("rocprofv3_counter_collection.csv");
        let p =
            parse_files(&[("kernel_trace.csv", &trace), ("counter_collection.csv", &counters)], &Context::default())
                .unwrap();
        let k = kernels(&p);
        assert_eq!(k.len(), 7);
        assert!(k.iter().all(|k| k.metrics.get("rocprof.SQ_WAVES") == Some(&16384.0)));
        assert_eq!(k[0].metrics[km::REGISTERS_PER_THREAD], 8.0);
        let e = parse(&counters, &Context::default()).unwrap_err();
        assert!(e.message.contains("kernel_trace"), "{e}");
    }

    #[test]
    fn agent_info_names_the_device() {
        let trace = "\"Kind\",\"Agent_Id\",\"Queue_Id\",\"Dispatch_Id\",\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\",\"Workgroup_Size_X\",\"Grid_Size_X\"\n\
\"KERNEL_DISPATCH\",\"Agent 1\",1,7,\"k(int) [clone .kd]\",1000,3500,256,1000\n";
        let agents = "\"Node_Id\",\"Logical_Node_Id\",\"Agent_Type\",\"Name\",\"Product_Name\"\n0,0,\"CPU\",\"AMD EPYC\",\"AMD EPYC\"\n1,1,\"GPU\",\"gfx942\",\"AMD Instinct MI300X\"\n";
        let p = parse_files(&[("t", trace.as_bytes()), ("a", agents.as_bytes())], &Context::default()).unwrap();
        let k = kernels(&p);
        assert_eq!((k[0].name.as_str(), k[0].gpu.as_deref()), ("k(int)", Some("AMD Instinct MI300X")));
        assert_eq!((k[0].duration_us, k[0].grid), (2.5, Some([4, 1, 1])));
    }

    #[test]
    fn other_rocprof_files_are_refused_with_a_reason() {
        for (f, needle) in [
            ("rocprofv3_hip_api_stats.csv", "no kernel dispatches"),
            ("rocprofv3_memory_copy_trace.csv", "no kernel dispatches"),
            ("omniperf_MI200_perfmon_SQ_IFETCH_LEVEL.input.txt", "input file"),
            ("omniperf_MI200_sysinfo.csv", "no rocprof dispatch table"),
        ] {
            let e = parse(&fixture(f), &Context::default()).unwrap_err();
            assert!(e.message.contains(needle), "{f}: {e}");
        }
        assert!(parse(b"a,b\n1,2\n", &Context::default()).is_err());
    }
}

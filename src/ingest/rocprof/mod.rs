//! AMD rocprof outputs: v1 `results.csv` (and Omniperf's renamed copies), rocprofv2 CSVs and rocprofv3
//! (rocprofiler-sdk) `*_kernel_trace.csv` / `*_counter_collection.csv` / `*_agent_info.csv`, with the companion
//! files of a run: rocprofv3 `*_hip_api_stats.csv` (and the other `--stats` tables), `*_memory_copy_trace.csv`,
//! Omniperf's `sysinfo.csv` and rocprof's `pmc:` input file.
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
//! **Kernels.** One [`KernelSample`] per dispatch: name with ` [clone .kd]` / ` (.kd)` / `.kd` removed;
//! `duration_us` = (end − start) / 1000. Timestamps may be written in float notation (`8.1097E+14`, rocprofv2 via
//! Omniperf): their resolution is then 10^(exponent − decimals) ns, and a dispatch whose duration is not known to
//! 1 % (or is not positive) has no timestamp duration. `grid` is in **blocks** (work-groups): HSA grid sizes count
//! work-items, so blocks = ceil(grid / work-group) per dimension (1-D files give `[n, 1, 1]`); `block` is the
//! work-group size in work-items. `gpu` is the agent's `Product_Name` (else `Name`) from an `*_agent_info.csv`, or
//! Omniperf's `sysinfo.csv` `gpu_model`, when uploaded together (see [`parse_files`]), else the upload's `gpu`.
//!
//! **[rec] Duration from `GRBM_GUI_ACTIVE`.** When the timestamps give no duration (missing, float notation that
//! lost it — every rocprofv2 dispatch of the MI300X Omniperf workload reads `8.1097E+14` for both — or not
//! increasing) and the dispatch has the `GRBM_GUI_ACTIVE` counter (GPU-busy cycles during the dispatch's
//! counting window, summed over the device's XCDs), the duration is *reconstructed* as
//! `GRBM_GUI_ACTIVE / (num_xcd × clock)`: clock = Omniperf's `sysinfo.csv` `max_sclk` (MHz) when uploaded, else
//! the catalog's peak engine clock of the sample's device (the file's or the upload's `gpu`, resolved in
//! [`crate::hw::catalog`]); `num_xcd` = `sysinfo.csv`'s `num_xcd`, else the catalog's XCD count (MI300X: 8 in
//! the default SPX partition; single-die GPUs 1) — Omniperf divides the counter by `num_xcd` the same way
//! (`GRBM_GUI_ACTIVE_PER_XCD`). Such samples carry `duration_source = grbm_gui_active/(num_xcd*clock)`,
//! `clock_ghz`, `num_xcd` and `clock_source` attributes. It is an estimate: the clock may run below its peak
//! (longer real time) and the counting window includes the counter start/stop around the kernel; on the MI200
//! Omniperf fixture, where both exist, it gives 15.9, 24.3 and 23.8 µs for dispatches whose timestamps (of
//! another pass of the same workload) say 20.5, 16.3 and 15.5 µs. Without the counter or a known clock the
//! dispatch is rejected with the reason; no duration is made up.
//!
//! Omniperf writes one table per counter pass and copies the timestamps of `timestamps.csv` into each: rows of
//! several uploaded tables with the same agent, dispatch id, kernel name and start/end timestamps are one
//! dispatch, merged into one sample (counters united; the first table's values win).
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
//! **Timers.** A `--stats` table (`Name,Calls,TotalDurationNs,AverageNs,Percentage,MinNs,MaxNs,StdDev`, ns) gives
//! one [`TimerSample`] per row: calls, total duration as both exclusive and inclusive µs (an API call's own time;
//! rocprof does not nest them), `average_us`, `min_us`, `max_us`, `stddev_us` and `percent` attributes. Its group
//! comes from the file name (`*_hip_api_stats.csv` → `HIP_API`, `*_hsa_api_stats.csv` → `HSA_API`,
//! `*_kernel_stats.csv` → `KERNEL`, `*_memory_copy_stats.csv` → `MEMORY_COPY`, `*_marker_api_stats.csv` →
//! `MARKER_API`, `*_rccl_api_stats.csv` → `RCCL_API`), else from the names (all `hip…`/`__hip…` → `HIP_API`, all
//! `hsa_…` → `HSA_API`), else `ROCPROF_STATS`. A memory-copy trace (`Kind,Direction,…,Start_Timestamp,
//! End_Timestamp`) gives one [`TimerSample`] **per copy** (like a kernel trace gives one sample per dispatch, so
//! the distribution of copy times is kept; sum by name for a per-direction total): name = the `Direction`
//! (`MEMORY_COPY_HOST_TO_DEVICE`), group `MEMORY_COPY`, calls 1, duration (end − start) as exclusive and
//! inclusive µs, `source_agent`, `destination_agent`, `correlation_id` and `start_ns` attributes. rocprof does
//! not record ranks or threads for these: `rank` and `thread` are empty. Either file is a valid upload alone.
//!
//! Dispatches and rows that cannot be used are rejected, one [`Rejected`](super::Rejected) per distinct reason
//! (the kernel or timer name is part of it) with a count.
//!
//! Companions that hold no samples of their own are accepted with the files they describe and refused alone with
//! what they are: the `pmc:` input file (contributes nothing), `sysinfo.csv` and `*_agent_info.csv` (device name,
//! clock and XCDs), a v3 counter collection (counters, joined to the kernel trace; with only timer files it is
//! reported unused).

mod counters;
mod table;
#[cfg(test)]
mod tests;
mod timers;

use std::collections::HashMap;

use super::text::{number, whole, Lines, Tally};
use super::{utf8, Context, ParseError, Parsed};
use crate::samples::{Rejected, Sample};
use counters::{read_counters, Counted};
use table::Table;
use timers::{read_copies, read_stats};

/// memory-copy trace). See [`parse_files`] for several outputs of one run.
pub fn parse(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    parse_files(&[("", bytes)], ctx)
}

/// What Omniperf's `sysinfo.csv` says about the device.
#[derive(Debug, Default)]
struct SystemInfo {
    /// `gpu_model` (`MI200`).
    gpu: Option<String>,
    /// `max_sclk`, MHz.
    max_sclk_mhz: Option<f64>,
    /// `num_xcd`.
    num_xcd: Option<u32>,
}

/// What a dispatch table's rows are joined with.
struct Companions<'a> {
    counted: &'a HashMap<(String, u64), Counted>,
    agents: &'a HashMap<String, String>,
    system: &'a SystemInfo,
    ctx: &'a Context,
}

/// Parses the CSVs of one rocprof run together: dispatch tables, v3 counter collections (joined by agent and
/// dispatch id), v3 agent info and Omniperf `sysinfo.csv` (device name, clock, XCDs), `--stats` tables and
/// memory-copy traces (timer samples), and the `pmc:` input file (accepted, contributes nothing). `files` are
/// (file name, bytes); the name picks a stats table's group and prefixes messages.
///
/// Errors: a file that is not a rocprof CSV or not UTF-8, a CSV that cannot be read (naming the file and line);
/// an upload with neither a dispatch table nor a timer file (a counter collection, `pmc:` input file,
/// `sysinfo.csv` or agent info alone), or whose tables have headers but no rows.
pub fn parse_files(files: &[(&str, &[u8])], ctx: &Context) -> Result<Parsed, ParseError> {
    let mut tables = Vec::new();
    let mut counters: HashMap<(String, u64), Counted> = HashMap::new();
    let mut counter_files: Vec<&str> = Vec::new();
    let mut agents: HashMap<String, String> = HashMap::new();
    let mut system = SystemInfo::default();
    let mut input_file: Option<&str> = None;
    let mut timer_files = 0usize;
    let mut out = Parsed::default();
    let mut tally = Tally::default();
    for (name, bytes) in files {
        let text = utf8(bytes).map_err(|e| in_file(e, name))?;
        let mut lines = Lines::new(text.as_bytes());
        if text.trim_start().starts_with("pmc:") {
            input_file.get_or_insert(name);
            continue;
        }
        let mut reader = csv::ReaderBuilder::new().flexible(true).trim(csv::Trim::All).from_reader(text.as_bytes());
        let headers = reader.headers().map_err(|e| in_file(lines.error(&e), name))?.clone();
        let has = |c: &str| headers.iter().any(|h| h == c);
        if has("Counter_Name") && has("Counter_Value") {
            read_counters(&mut reader, &headers, &mut counters, &mut lines).map_err(|e| in_file(e, name))?;
            counter_files.push(name);
        } else if has("Agent_Type") {
            read_agents(&mut reader, &headers, &mut agents, &mut lines).map_err(|e| in_file(e, name))?;
        } else if has("gpu_model") {
            system = read_sysinfo(&mut reader, &headers);
        } else if has("KernelName") || has("Kernel_Name") {
            tables.push((*name, reader, headers, lines));
        } else if has("Name") && has("Calls") && has("TotalDurationNs") {
            let rows = read_stats(name, &mut reader, &headers, &mut lines, &mut tally).map_err(|e| in_file(e, name))?;
            out.samples.extend(rows.into_iter().map(Sample::Timer));
            timer_files += 1;
        } else if has("Direction") && has("Start_Timestamp") && has("End_Timestamp") {
            let rows =
                read_copies(name, &mut reader, &headers, &mut lines, &mut tally).map_err(|e| in_file(e, name))?;
            out.samples.extend(rows.into_iter().map(Sample::Timer));
            timer_files += 1;
        } else {
            return Err(in_file(
                ParseError::at(
                    1,
                    "not a rocprof CSV: the header has no KernelName/Kernel_Name, Counter_Name, \
                     Name/Calls/TotalDurationNs (stats) or Direction/Start_Timestamp/End_Timestamp (memory copies) \
                     columns",
                ),
                name,
            ));
        }
    }
    if tables.is_empty() && timer_files == 0 {
        if !counter_files.is_empty() {
            return Err(ParseError::whole(
                "a counter collection has no timestamps: upload it together with the *_kernel_trace.csv of the same \
                 run",
            ));
        }
        if let Some(name) = input_file {
            return Err(in_file(
                ParseError::at(
                    1,
                    "this is rocprof's counter input file (pmc: lines), not its output: upload it with the CSV it \
                     produced",
                ),
                name,
            ));
        }
        return Err(ParseError::whole(
            "no rocprof dispatch table among the files (a kernel trace, results.csv or Omniperf pmc_perf.csv), nor a \
             --stats table or memory-copy trace",
        ));
    }
    if tables.is_empty() {
        for name in counter_files {
            let who = if name.is_empty() { String::new() } else { format!("{name}: ") };
            out.rejected.push(Rejected {
                line: 1,
                reason: format!("{who}counter collection not used: no kernel trace in the upload to join it to"),
            });
        }
    }
    let companions = Companions { counted: &counters, agents: &agents, system: &system, ctx };
    // Omniperf's per-pass tables repeat each dispatch with the same timestamps: merged by this key.
    let mut merged: HashMap<(String, u64, String, String, String), usize> = HashMap::new();
    for (name, mut reader, headers, mut lines) in tables {
        let t = Table::new(&headers);
        for record in reader.records() {
            let record = record.map_err(|e| in_file(lines.error(&e), name))?;
            let line = lines.of(&record);
            match t.sample(&record, &headers, &companions) {
                Ok((s, key)) => {
                    if let Some(Sample::Kernel(first)) =
                        key.as_ref().and_then(|k| merged.get(k)).and_then(|&i| out.samples.get_mut(i))
                    {
                        for (k, v) in s.metrics {
                            first.metrics.entry(k).or_insert(v);
                        }
                        for (k, v) in s.attributes {
                            first.attributes.entry(k).or_insert(v);
                        }
                    } else {
                        if let Some(k) = key {
                            merged.insert(k, out.samples.len());
                        }
                        out.samples.push(Sample::Kernel(s));
                    }
                }
                Err(reason) => tally.add(line, if name.is_empty() { reason } else { format!("{name}: {reason}") }),
            }
        }
    }
    out.rejected.extend(tally.into_rejected());
    if out.samples.is_empty() && out.rejected.is_empty() {
        return Err(ParseError::whole("the rocprof tables have a header but no rows"));
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

/// The first row of Omniperf's `sysinfo.csv`: device name, peak engine clock and XCD count.
fn read_sysinfo(reader: &mut csv::Reader<&[u8]>, headers: &csv::StringRecord) -> SystemInfo {
    let col = |n: &str| headers.iter().position(|h| h == n);
    let Some(Ok(r)) = reader.records().next() else { return SystemInfo::default() };
    let get = |n: &str| col(n).and_then(|i| r.get(i)).filter(|v| !v.is_empty());
    SystemInfo {
        gpu: get("gpu_model").map(str::to_string),
        max_sclk_mhz: get("max_sclk").and_then(number).filter(|v| *v > 0.0),
        num_xcd: get("num_xcd").and_then(whole).and_then(|n| u32::try_from(n).ok()).filter(|n| *n > 0),
    }
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

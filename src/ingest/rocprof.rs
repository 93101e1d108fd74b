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

use std::collections::HashMap;

use super::text::{number, whole, Lines, Tally};
use super::{
    kernel_metrics as km, utf8, Attributes, Context, KernelSample, ParseError, Parsed, Rejected, Sample, TimerSample,
};

/// Parses one rocprof CSV (a dispatch table: v1, Omniperf, v2, or a v3 kernel trace; or a `--stats` table or a
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

/// The group of a `--stats` table: from the file name, else from the row names (see the module doc).
fn stats_group(file: &str, names: &[&str]) -> &'static str {
    let base = file.rsplit(['/', '\\']).next().unwrap_or(file).to_ascii_lowercase();
    for (needle, group) in [
        ("hip_api_stats", "HIP_API"),
        ("hsa_api_stats", "HSA_API"),
        ("kernel_stats", "KERNEL"),
        ("memory_copy_stats", "MEMORY_COPY"),
        ("marker_api_stats", "MARKER_API"),
        ("rccl_api_stats", "RCCL_API"),
    ] {
        if base.contains(needle) {
            return group;
        }
    }
    if !names.is_empty() && names.iter().all(|n| n.starts_with("hip") || n.starts_with("__hip")) {
        "HIP_API"
    } else if !names.is_empty() && names.iter().all(|n| n.starts_with("hsa_")) {
        "HSA_API"
    } else {
        "ROCPROF_STATS"
    }
}

/// ns → µs, rounded to the picosecond so that `1368378` ns reads `1368.378` µs (no binary-fraction tail); finite
/// for every finite input.
fn us(ns: f64) -> f64 {
    let ps = ns * 1e3;
    if ps.is_finite() {
        ps.round() / 1e6
    } else {
        ns / 1e3
    }
}

fn timer_attributes(file: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("source_format".into(), "rocprof_csv".into());
    if !file.is_empty() {
        a.insert("file".into(), file.to_string());
    }
    a
}

/// Timer samples of a `--stats` table (see the module doc); unusable rows go to `tally`.
fn read_stats(
    file: &str,
    reader: &mut csv::Reader<&[u8]>,
    headers: &csv::StringRecord,
    lines: &mut Lines,
    tally: &mut Tally,
) -> Result<Vec<TimerSample>, ParseError> {
    let col = |n: &str| headers.iter().position(|h| h == n);
    let (Some(name_i), Some(calls_i), Some(total_i)) = (col("Name"), col("Calls"), col("TotalDurationNs")) else {
        return Err(ParseError::at(1, "a stats table needs Name, Calls and TotalDurationNs"));
    };
    let extra = [("AverageNs", "average_us"), ("MinNs", "min_us"), ("MaxNs", "max_us"), ("StdDev", "stddev_us")]
        .map(|(h, a)| (col(h), a));
    let percent_i = col("Percentage");
    let who = |s: String| if file.is_empty() { s } else { format!("{file}: {s}") };
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| lines.error(&e))?;
        let line = lines.of(&record);
        let get = |i: Option<usize>| i.and_then(|i| record.get(i)).filter(|v| !v.is_empty());
        let Some(name) = get(Some(name_i)) else {
            tally.add(line, who("a stats row without a name".into()));
            continue;
        };
        let calls = get(Some(calls_i)).and_then(number).filter(|c| *c >= 0.0);
        let total_ns = get(Some(total_i)).and_then(number).filter(|t| *t >= 0.0);
        let (Some(calls), Some(total_ns)) = (calls, total_ns) else {
            tally.add(line, who(format!("{name}: Calls or TotalDurationNs is not a non-negative number")));
            continue;
        };
        let mut attributes = timer_attributes(file);
        for (i, key) in extra {
            if let Some(v) = get(i).and_then(number) {
                attributes.insert(key.into(), us(v).to_string());
            }
        }
        if let Some(v) = get(percent_i).and_then(number) {
            attributes.insert("percent".into(), v.to_string());
        }
        rows.push(TimerSample {
            name: name.to_string(),
            group: String::new(),
            rank: None,
            thread: None,
            calls,
            exclusive_us: us(total_ns),
            inclusive_us: us(total_ns),
            attributes,
        });
    }
    let names: Vec<&str> = rows.iter().map(|t| t.name.as_str()).collect();
    let group = stats_group(file, &names);
    for t in &mut rows {
        t.group = group.to_string();
    }
    Ok(rows)
}

/// Timer samples of a memory-copy trace, one per copy (see the module doc); unusable rows go to `tally`.
fn read_copies(
    file: &str,
    reader: &mut csv::Reader<&[u8]>,
    headers: &csv::StringRecord,
    lines: &mut Lines,
    tally: &mut Tally,
) -> Result<Vec<TimerSample>, ParseError> {
    let col = |n: &str| headers.iter().position(|h| h == n);
    let (Some(dir_i), Some(start_i), Some(end_i)) = (col("Direction"), col("Start_Timestamp"), col("End_Timestamp"))
    else {
        return Err(ParseError::at(1, "a memory-copy trace needs Direction, Start_Timestamp and End_Timestamp"));
    };
    let extra = [
        (col("Source_Agent_Id"), "source_agent"),
        (col("Destination_Agent_Id"), "destination_agent"),
        (col("Correlation_Id"), "correlation_id"),
        (col("Stream_Id"), "stream_id"),
    ];
    let who = |s: String| if file.is_empty() { s } else { format!("{file}: {s}") };
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| lines.error(&e))?;
        let line = lines.of(&record);
        let get = |i: Option<usize>| i.and_then(|i| record.get(i)).filter(|v| !v.is_empty());
        let Some(direction) = get(Some(dir_i)) else {
            tally.add(line, who("a memory copy without a Direction".into()));
            continue;
        };
        let (Some(start), Some(end)) = (get(Some(start_i)), get(Some(end_i))) else {
            tally.add(line, who(format!("{direction}: no start/end timestamps")));
            continue;
        };
        let ns = match duration_ns(start, end) {
            Ok(ns) => ns,
            Err(why) => {
                tally.add(line, who(format!("{direction}: {why}")));
                continue;
            }
        };
        let mut attributes = timer_attributes(file);
        for (i, key) in extra {
            if let Some(v) = get(i) {
                let v = if key.ends_with("_agent") { agent_key(v) } else { v.to_string() };
                attributes.insert(key.into(), v);
            }
        }
        attributes.insert("start_ns".into(), start.to_string());
        rows.push(TimerSample {
            name: direction.to_string(),
            group: "MEMORY_COPY".into(),
            rank: None,
            thread: None,
            calls: 1.0,
            exclusive_us: us(ns),
            inclusive_us: us(ns),
            attributes,
        });
    }
    Ok(rows)
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

    /// The sample of one dispatch row and, when its duration comes from its timestamps and it has a dispatch id,
    /// the key that identifies the dispatch across Omniperf's per-pass tables.
    fn sample(
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

    fn timers(p: &Parsed) -> Vec<&TimerSample> {
        p.samples.iter().filter_map(|s| if let Sample::Timer(t) = s { Some(t) } else { None }).collect()
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
        // The counter file says how its duration could be had; the timestamps file has no counter to offer.
        let p = parse(&fixture("omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv"), &Context::default()).unwrap();
        assert!(p.rejected[0].reason.contains("GRBM_GUI_ACTIVE would give it"), "{}", p.rejected[0].reason);
        // A GPU outside the catalog has no known clock: still rejected.
        let p = parse(
            &fixture("omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv"),
            &Context { gpu: Some("Radeon 9999".into()), ..Default::default() },
        )
        .unwrap();
        assert!(p.samples.is_empty() && p.rejected.len() == 1);
    }

    #[test]
    fn mi300x_durations_from_grbm_gui_active() {
        let sq = fixture("omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv");
        let mi300x = Context { gpu: Some("MI300X".into()), ..Default::default() };
        let p = parse_files(&[("omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv", &sq)], &mi300x).unwrap();
        assert!(p.rejected.is_empty(), "{:?}", p.rejected);
        let k = kernels(&p);
        assert_eq!(k.len(), 3);
        // Dispatch 0: GRBM_GUI_ACTIVE 449213 cycles summed over 8 XCDs at 2.1 GHz:
        // 449213 / 8 = 56151.625 cycles; / 2100 cycles per µs = 26.738869… µs.
        assert_eq!(k[0].name, "vecCopy(double*, double*, double*, int, int)");
        assert!((k[0].duration_us - 26.738869).abs() < 1e-6, "{}", k[0].duration_us);
        // Dispatch 1: 421528 / 8 = 52691 cycles → 25.090952 µs; dispatch 2: 431238 / 8 = 53904.75 → 25.668929 µs.
        assert!((k[1].duration_us - 25.090952).abs() < 1e-6, "{}", k[1].duration_us);
        assert!((k[2].duration_us - 25.668929).abs() < 1e-6, "{}", k[2].duration_us);
        assert_eq!(k[0].attributes["duration_source"], "grbm_gui_active/(num_xcd*clock)");
        assert_eq!((k[0].attributes["clock_ghz"].as_str(), k[0].attributes["num_xcd"].as_str()), ("2.1", "8"));
        assert_eq!(k[0].attributes["clock_source"], "catalog MI300X");
        assert_eq!((k[0].gpu.as_deref(), k[0].metrics["rocprof.GRBM_GUI_ACTIVE"]), (Some("MI300X"), 449213.0));
        assert_eq!((k[0].grid, k[0].block), (Some([4096, 1, 1]), Some([256, 1, 1])));
        // The device as rocm-smi names it resolves too.
        let named = Context { gpu: Some("AMD Instinct MI300X".into()), ..Default::default() };
        assert_eq!(kernels(&parse(&sq, &named).unwrap())[0].duration_us, k[0].duration_us);

        // With the timestamps file of the same workload: it is accepted, its dispatches (other pass, no counters,
        // lost timestamps) are rejected once with the count; the counter file's samples are unchanged.
        let ts = fixture("omniperf_MI300X_rocprofv2_timestamps.csv");
        let files: [(&str, &[u8]); 2] =
            [("omniperf_MI300X_rocprofv2_timestamps.csv", &ts), ("omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv", &sq)];
        assert_eq!(super::super::detect_files(&files), Some(super::super::Format::RocprofCsv));
        let both = parse_files(&files, &mi300x).unwrap();
        assert_eq!(kernels(&both), k);
        assert_eq!(both.rejected.len(), 1);
        assert!(both.rejected[0].reason.starts_with("omniperf_MI300X_rocprofv2_timestamps.csv: vecCopy"));
        assert!(both.rejected[0].reason.ends_with("(3 times)"), "{}", both.rejected[0].reason);

        // Omniperf's sysinfo.csv gives the clock and XCDs itself (MI300X_A1: max_sclk 2100 MHz, num_xcd 8).
        let sysinfo = "gpu_model,gpu_arch,cu_per_gpu,max_sclk,num_xcd\nMI300X_A1,gfx942,304,2100,8\n";
        let p = parse_files(&[("SQ_IFETCH_LEVEL.csv", &sq), ("sysinfo.csv", sysinfo.as_bytes())], &Context::default())
            .unwrap();
        let s = kernels(&p);
        assert_eq!((s[0].duration_us, s[0].gpu.as_deref()), (k[0].duration_us, Some("MI300X_A1")));
        assert_eq!(s[0].attributes["clock_source"], "sysinfo.csv");
    }

    #[test]
    fn timestamps_win_over_grbm_and_omniperf_passes_merge() {
        // MI200: the counter file has real timestamps: no reconstruction even when the clock is known.
        let sq = fixture("omniperf_MI200_gfx90a_rocprofv1_SQ_IFETCH_LEVEL.csv");
        let p = parse(&sq, &Context { gpu: Some("MI210".into()), ..Default::default() }).unwrap();
        assert!(kernels(&p).iter().all(|k| !k.attributes.contains_key("duration_source")));
        assert!((kernels(&p)[0].duration_us - 20.48).abs() < 1e-12);
        // The Omniperf directory: per-pass tables with timestamps copied from timestamps.csv, sysinfo, the input
        // file. Each dispatch is one sample with the counters of every pass.
        let names = [
            "omniperf_MI200_gfx90a_rocprofv1_SQ_IFETCH_LEVEL.csv",
            "omniperf_MI200_gfx90a_rocprofv1_timestamps.csv",
            "omniperf_MI200_gfx90a_rocprofv1_pmc_perf.csv",
            "omniperf_MI200_sysinfo.csv",
            "omniperf_MI200_perfmon_SQ_IFETCH_LEVEL.input.txt",
        ];
        let bytes: Vec<Vec<u8>> = names.iter().map(|n| fixture(n)).collect();
        let files: Vec<(&str, &[u8])> = names.iter().zip(&bytes).map(|(n, b)| (*n, b.as_slice())).collect();
        assert_eq!(super::super::detect_files(&files), Some(super::super::Format::RocprofCsv));
        let p = parse_files(&files, &Context::default()).unwrap();
        assert!(p.rejected.is_empty(), "{:?}", p.rejected);
        let k = kernels(&p);
        assert_eq!(k.len(), 3);
        // Dispatch 1: 1411551767765792 − 1411551767749472 = 16320 ns; SQ_IFETCH_LEVEL 9433 from its pass,
        // TCC_HIT_sum from pmc_perf; the SQ pass (first) gives GRBM_GUI_ACTIVE 41252.
        assert!((k[1].duration_us - 16.32).abs() < 1e-12);
        assert_eq!((k[1].gpu.as_deref(), k[1].attributes["dispatch"].as_str()), (Some("MI200"), "1"));
        assert_eq!(k[1].metrics["rocprof.SQ_IFETCH_LEVEL"], 9433.0);
        assert_eq!(k[1].metrics["rocprof.GRBM_GUI_ACTIVE"], 41252.0);
        assert!(k[1].metrics.contains_key("rocprof.TCC_HIT_sum") && k[1].metrics.contains_key(km::L2_HIT_RATE));
        // The input file contributes nothing: the same samples without it.
        let without = parse_files(&files[..4], &Context::default()).unwrap();
        assert_eq!(without, p);
    }

    #[test]
    fn hip_api_stats_become_timers() {
        let stats = fixture("rocprofv3_hip_api_stats.csv");
        for name in ["rocprofv3_hip_api_stats.csv", ""] {
            let p = parse_files(&[(name, &stats)], &Context::default()).unwrap();
            assert!(p.rejected.is_empty(), "{:?}", p.rejected);
            let t = timers(&p);
            assert_eq!(t.len(), 17);
            assert!(t.iter().all(|t| t.group == "HIP_API" && t.rank.is_none() && t.thread.is_none()));
            // "hipMemcpyAsync",12,1368378,114031.500000,0.4439,2490,764044,249308.051619
            let m = t.iter().find(|t| t.name == "hipMemcpyAsync").unwrap();
            assert_eq!((m.calls, m.exclusive_us, m.inclusive_us), (12.0, 1368.378, 1368.378));
            assert_eq!(
                (m.attributes["average_us"].as_str(), m.attributes["min_us"].as_str(), m.attributes["max_us"].as_str()),
                ("114.0315", "2.49", "764.044")
            );
            assert_eq!(
                (m.attributes["stddev_us"].as_str(), m.attributes["percent"].as_str()),
                ("249.308052", "0.4439")
            );
            // "hipLaunchKernel",16,692734,…
            let l = t.iter().find(|t| t.name == "hipLaunchKernel").unwrap();
            assert_eq!((l.calls, l.exclusive_us), (16.0, 692.734));
        }
        // The group follows the file name where the names do not tell (kernel statistics).
        let kernel_stats = "\"Name\",\"Calls\",\"TotalDurationNs\",\"AverageNs\",\"Percentage\",\"MinNs\",\"MaxNs\",\"StdDev\"\n\"void addition_kernel<float>(float*, float const*, float const*, int, int)\",4,465316,116329.0,40.1,48744,130526,38000.1\n";
        let t = parse_files(&[("run_kernel_stats.csv", kernel_stats.as_bytes())], &Context::default()).unwrap();
        assert_eq!(timers(&t)[0].group, "KERNEL");
        let t = parse(kernel_stats.as_bytes(), &Context::default()).unwrap();
        assert_eq!(timers(&t)[0].group, "ROCPROF_STATS");
        assert_eq!(stats_group("", &["hsa_queue_create", "hsa_signal_wait"]), "HSA_API");
        // Negative or missing numbers are rejected with the name.
        let bad = "Name,Calls,TotalDurationNs\nhipFree,-1,5\nhipMalloc,2,10\n";
        let p = parse(bad.as_bytes(), &Context::default()).unwrap();
        assert_eq!(timers(&p).len(), 1);
        assert_eq!(p.rejected[0].line, 2);
        assert!(p.rejected[0].reason.starts_with("hipFree: "), "{:?}", p.rejected);
    }

    #[test]
    fn memory_copies_become_timers() {
        let copies = fixture("rocprofv3_memory_copy_trace.csv");
        let p = parse_files(&[("rocprofv3_memory_copy_trace.csv", &copies)], &Context::default()).unwrap();
        assert!(p.rejected.is_empty(), "{:?}", p.rejected);
        let t = timers(&p);
        assert_eq!(t.len(), 2);
        // Host to device: 14955950239443 − 14955949675563 = 563880 ns, agent 0 → 1.
        assert_eq!(
            (t[0].name.as_str(), t[0].group.as_str(), t[0].calls),
            ("MEMORY_COPY_HOST_TO_DEVICE", "MEMORY_COPY", 1.0)
        );
        assert_eq!((t[0].exclusive_us, t[0].inclusive_us), (563.88, 563.88));
        assert_eq!(
            (t[0].attributes["source_agent"].as_str(), t[0].attributes["destination_agent"].as_str()),
            ("0", "1")
        );
        assert_eq!(t[0].attributes["start_ns"], "14955949675563");
        // Device to host: 14955953315285 − 14955952733485 = 581800 ns, agent 1 → 0.
        assert_eq!((t[1].name.as_str(), t[1].exclusive_us), ("MEMORY_COPY_DEVICE_TO_HOST", 581.8));
        assert_eq!(t[1].attributes["source_agent"], "1");
        // A copy whose end is not after its start is rejected, not stored.
        let bad = "Kind,Direction,Start_Timestamp,End_Timestamp\nMEMORY_COPY,MEMORY_COPY_HOST_TO_DEVICE,10,10\n";
        let p = parse(bad.as_bytes(), &Context::default()).unwrap();
        assert!(p.samples.is_empty() && p.rejected[0].reason.starts_with("MEMORY_COPY_HOST_TO_DEVICE: "));
    }

    #[test]
    fn v3_run_uploaded_together() {
        let names = [
            "rocprofv3_kernel_trace.csv",
            "rocprofv3_counter_collection.csv",
            "rocprofv3_hip_api_stats.csv",
            "rocprofv3_memory_copy_trace.csv",
        ];
        let bytes: Vec<Vec<u8>> = names.iter().map(|n| fixture(n)).collect();
        let files: Vec<(&str, &[u8])> = names.iter().zip(&bytes).map(|(n, b)| (*n, b.as_slice())).collect();
        assert_eq!(super::super::detect_files(&files), Some(super::super::Format::RocprofCsv));
        assert_eq!(super::super::detect_files(&files[2..]), Some(super::super::Format::RocprofCsv));
        let p = parse_files(&files, &Context::default()).unwrap();
        assert!(p.rejected.is_empty(), "{:?}", p.rejected);
        assert_eq!((kernels(&p).len(), timers(&p).len()), (7, 19));
        assert!(kernels(&p).iter().all(|k| k.metrics.get("rocprof.SQ_WAVES") == Some(&16384.0)));
        // Stats and copies without the trace: timers, and the counter collection is reported unused.
        let p = parse_files(&files[1..], &Context::default()).unwrap();
        assert_eq!((kernels(&p).len(), timers(&p).len()), (0, 19));
        assert_eq!(p.rejected.len(), 1);
        assert!(p.rejected[0].reason.starts_with("rocprofv3_counter_collection.csv: counter collection not used"));
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
    fn companions_alone_are_refused_with_a_reason() {
        for (f, needle) in [
            ("omniperf_MI200_perfmon_SQ_IFETCH_LEVEL.input.txt", "input file"),
            ("omniperf_MI200_sysinfo.csv", "no rocprof dispatch table"),
            ("rocprofv3_counter_collection.csv", "kernel_trace"),
        ] {
            let e = parse(&fixture(f), &Context::default()).unwrap_err();
            assert!(e.message.contains(needle), "{f}: {e}");
        }
        let e = parse_files(
            &[("perfmon/SQ_IFETCH_LEVEL.txt", &fixture("omniperf_MI200_perfmon_SQ_IFETCH_LEVEL.input.txt"))],
            &Context::default(),
        )
        .unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.message.starts_with("perfmon/SQ_IFETCH_LEVEL.txt: this is rocprof's counter input file"), "{e}");
        assert!(parse(b"a,b\n1,2\n", &Context::default()).is_err());
        let e = parse(b"Name,Calls,TotalDurationNs\n", &Context::default()).unwrap_err();
        assert!(e.message.contains("no rows"), "{e}");
    }
}

//! rocprof `--stats` tables and memory-copy traces → timer samples (see the module documentation).

use super::agent_key;
use super::table::duration_ns;

use super::super::text::{number, Lines, Tally};
use super::super::ParseError;
use crate::samples::{Attributes, TimerSample};

/// The group of a `--stats` table: from the file name, else from the row names (see the module doc).
pub(super) fn stats_group(file: &str, names: &[&str]) -> &'static str {
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
pub(super) fn read_stats(
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
pub(super) fn read_copies(
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

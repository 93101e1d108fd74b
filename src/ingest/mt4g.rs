//! MT4G (caps-tum/mt4g) GPU memory-topology reports → a GPU description ([`Mt4gGpu`]), not samples: the HTTP GPU
//! import merges it into the catalog. [`super::parse`] refuses [`super::Format::Mt4g`] with a message pointing
//! here.
//!
//! **JSON** (MT4G ≥ 2025): `general` (`name`, `vendor`, `clockRate {value, unit: kHz}`, `computeCapability
//! {major, minor}`), `compute` (`multiProcessorCount`, `warpSize`, `maxThreadsPerMultiProcessor`, …), `memory`
//! with `l1`, `l2`, `l3` (AMD), `shared`, `main` (and `constant`, `readOnly`, `texture`, `scalarL1`, not used),
//! `meta` (driver, runtime, timestamp). Every quantity is read with its `unit`: sizes in `bytes`/`B`/`KiB`/`MiB`/
//! `GiB`/`KB`/`MB`/`GB`/`bit`, clocks in `Hz`/`kHz`/`MHz`/`GHz`, bandwidths in `GiB/s` (× 1.073741824 → GB/s),
//! `GB/s`, `MiB/s`, `MB/s`, `TB/s`, `TiB/s`, latencies in `cycles` (or `ns`/`nanoseconds`, converted with the core
//! clock). An unknown unit is an error naming the field. Measured sizes (`{size, unit, confidence}`) with a
//! confidence below 0.5 are left out (MT4G reports 0.0 when its p-chase found no edge).
//!
//! Mapping to [`MemoryHierarchy`]: `l1` ← `memory.l1` (size per SM, `lineSize` else `fetchGranularity`);
//! `shared` ← `memory.shared` (`sharedMemPerMultiProcessor`); `l2`, `l3` ← `memory.l2`, `memory.l3` (device size,
//! read/write bandwidth); `dram` ← `memory.main` (`totalGlobalMem`, bandwidths). Latency = the mean in cycles, else
//! p50. MT4G does not measure the departure delay (Hong–Kim): models keep their defaults for it.
//!
//! **Legacy v1 CSV** (`GPU_INFORMATION; GPU_vendor; "Nvidia"; …`, one `;`-separated section per line: key, value,
//! unit): `GPU_name`, `GPU_vendor`, `CUDA_compute_capability`, `Number_of_streaming_multiprocessors`,
//! `GPU_Clock_Rate`, `L1_DATA_CACHE`, `L2_DATA_CACHE` (size × `Caches_Per_GPU`: v1 measures one L2 segment),
//! `SHARED_MEMORY`, `MAIN_MEMORY`, each with `Size`, `Cache_Line_Size`, `Load_Latency` in cycles.
//!
//! `compute_capability` is set for NVIDIA only (MT4G writes a HIP compute capability for AMD, which is not the gfx
//! target perfcast's catalog uses).

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::{utf8, ParseError};
use crate::hw::{MemoryHierarchy, MemoryLevel, Vendor};

/// A GPU as MT4G describes it. Units are in the field names; `None` = not in the report.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Mt4gGpu {
    /// Device name as the driver reports it (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// `general.vendor`.
    pub vendor: Vendor,
    /// Core clock, GHz.
    pub clock_ghz: Option<f64>,
    /// Streaming multiprocessors (compute units on AMD).
    pub sm_count: Option<u32>,
    /// Threads per warp / wavefront.
    pub warp_size: Option<u32>,
    /// Resident threads per SM / CU.
    pub max_threads_per_sm: Option<u32>,
    /// `"9.0"` (NVIDIA only).
    pub compute_capability: Option<String>,
    /// Device memory, GiB (2³⁰ B).
    pub memory_gib: Option<f64>,
    /// Memory bus width, bits.
    pub memory_bus_width_bits: Option<u32>,
    /// Memory clock, GHz.
    pub memory_clock_ghz: Option<f64>,
    /// Measured memory hierarchy.
    pub hierarchy: MemoryHierarchy,
    /// Where the numbers come from (`MT4G JSON, driver 12020, 2025-08-10T00:03:09Z`).
    pub source: String,
}

/// Parses an MT4G report: the JSON, or the legacy v1 semicolon CSV.
///
/// Errors: not UTF-8 / not JSON (with line and column), no GPU name, an unknown unit (naming the field), or raw
/// per-measurement output (`* - L2 Latency.txt`), which is not a report.
pub fn parse(bytes: &[u8]) -> Result<Mt4gGpu, ParseError> {
    let text = utf8(bytes)?;
    let t = text.trim_start();
    if t.starts_with('{') {
        parse_json(t.as_bytes())
    } else if t.starts_with("GPU_INFORMATION") {
        parse_legacy_csv(t.as_bytes())
    } else {
        Err(ParseError::whole(
            "not an MT4G report: expected the JSON report or the v1 CSV (raw per-benchmark measurement files are not \
             reports)",
        ))
    }
}

/// An MT4G JSON report (`"general"`, `"memory"`) or a legacy v1 CSV (`GPU_INFORMATION;`).
pub fn looks_like(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let t = text.trim_start_matches('\u{feff}').trim_start();
    (t.starts_with('{') && t.contains("\"general\"") && t.contains("\"memory\"") && !t.contains("\"traceEvents\""))
        || t.starts_with("GPU_INFORMATION;")
}

/// Parses the MT4G JSON report (see the module doc).
pub fn parse_json(bytes: &[u8]) -> Result<Mt4gGpu, ParseError> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| ParseError {
        line: Some(e.line() as u64),
        column: Some(e.column() as u64),
        message: format!("invalid MT4G JSON: {e}"),
    })?;
    let general = v.get("general").ok_or_else(|| ParseError::whole("not an MT4G report: no \"general\" object"))?;
    let name = general
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| ParseError::whole("general.name is missing"))?
        .trim()
        .to_string();
    let vendor = vendor(general.get("vendor").and_then(Value::as_str).unwrap_or(""));
    let clock_ghz = quantity(general.get("clockRate"), "general.clockRate", frequency_ghz)?;
    let compute_capability = match (vendor, general.get("computeCapability")) {
        (Vendor::Nvidia, Some(cc)) => {
            match (cc.get("major").and_then(Value::as_u64), cc.get("minor").and_then(Value::as_u64)) {
                (Some(a), Some(b)) => Some(format!("{a}.{b}")),
                _ => None,
            }
        }
        _ => None,
    };
    let compute = v.get("compute");
    let count = |k: &str| compute.and_then(|c| c.get(k)).and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
    let memory = v.get("memory");
    let level_json = |k: &str| memory.and_then(|m| m.get(k));
    let main = level_json("main");
    let dram_bytes = quantity(main.and_then(|m| m.get("totalGlobalMem")), "memory.main.totalGlobalMem", bytes_of)?;
    let bus_bits = quantity(main.and_then(|m| m.get("memoryBusWidth")), "memory.main.memoryBusWidth", bytes_of)?;
    let hierarchy = MemoryHierarchy {
        l1: level(level_json("l1"), "memory.l1", "size", clock_ghz)?,
        shared: level(level_json("shared"), "memory.shared", "sharedMemPerMultiProcessor", clock_ghz)?,
        l2: level(level_json("l2"), "memory.l2", "size", clock_ghz)?,
        l3: level(level_json("l3"), "memory.l3", "size", clock_ghz)?,
        dram: level(main, "memory.main", "totalGlobalMem", clock_ghz)?,
    };
    let meta = v.get("meta");
    let meta_str = |k: &str| {
        meta.and_then(|m| m.get(k)).map(|x| match x {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    let mut source = "MT4G JSON".to_string();
    for (k, label) in [("driver", "driver "), ("timestamp", "")] {
        if let Some(s) = meta_str(k) {
            source.push_str(&format!(", {label}{s}"));
        }
    }
    Ok(Mt4gGpu {
        name,
        vendor,
        clock_ghz,
        sm_count: count("multiProcessorCount"),
        warp_size: count("warpSize"),
        max_threads_per_sm: count("maxThreadsPerMultiProcessor"),
        compute_capability,
        memory_gib: dram_bytes.map(|b| b / (1u64 << 30) as f64),
        memory_bus_width_bits: bus_bits.map(|b| (b * 8.0).round() as u32),
        memory_clock_ghz: quantity(
            main.and_then(|m| m.get("memoryClockRate")),
            "memory.main.memoryClockRate",
            frequency_ghz,
        )?,
        hierarchy,
        source,
    })
}

fn vendor(s: &str) -> Vendor {
    match s.trim().to_ascii_lowercase().as_str() {
        "nvidia" => Vendor::Nvidia,
        "amd" | "advanced micro devices, inc." => Vendor::Amd,
        _ => Vendor::Other,
    }
}

/// One level from its JSON object; `None` when the report has no such level. `size_key` names the size field.
fn level(
    v: Option<&Value>,
    path: &str,
    size_key: &str,
    clock_ghz: Option<f64>,
) -> Result<Option<MemoryLevel>, ParseError> {
    let Some(v) = v.filter(|v| v.is_object()) else { return Ok(None) };
    let field = |k: &str| v.get(k);
    let size_bytes = match field(size_key) {
        Some(s) if s.get("confidence").and_then(Value::as_f64).is_some_and(|c| c < 0.5) => None,
        s => quantity(s, &format!("{path}.{size_key}"), bytes_of)?,
    };
    let latency_cycles = match field("latency") {
        None => None,
        Some(l) => {
            let unit = l.get("unit").and_then(Value::as_str).unwrap_or("");
            let value = l.get("mean").and_then(Value::as_f64).or_else(|| l.get("p50").and_then(Value::as_f64));
            match (value, unit.trim().to_ascii_lowercase().as_str()) {
                (None, _) => None,
                (Some(x), "cycles" | "cycle" | "clk" | "clocks") => Some(x),
                (Some(x), "ns" | "nanoseconds" | "nanosecond") => clock_ghz.map(|g| x * g),
                (Some(_), other) => {
                    return Err(ParseError::whole(format!("{path}.latency: unknown unit {other:?} (cycles or ns)")))
                }
            }
        }
    };
    let line = quantity(field("lineSize"), &format!("{path}.lineSize"), bytes_of)?.or(quantity(
        field("fetchGranularity"),
        &format!("{path}.fetchGranularity"),
        bytes_of,
    )?);
    let level = MemoryLevel {
        size_bytes,
        latency_cycles,
        read_bandwidth_gbs: quantity(field("readBandwidth"), &format!("{path}.readBandwidth"), bandwidth_gbs)?,
        write_bandwidth_gbs: quantity(field("writeBandwidth"), &format!("{path}.writeBandwidth"), bandwidth_gbs)?,
        line_bytes: line.filter(|l| *l >= 1.0 && *l < 1e9).map(|l| l.round() as u32),
    };
    Ok((level != MemoryLevel::default()).then_some(level))
}

/// A `{value|size|mean, unit}` quantity converted by `convert` (unit → factor); `None` when absent.
fn quantity(v: Option<&Value>, path: &str, convert: fn(&str) -> Option<f64>) -> Result<Option<f64>, ParseError> {
    let Some(v) = v else { return Ok(None) };
    let Some(x) = ["value", "size", "mean"].iter().find_map(|k| v.get(*k).and_then(Value::as_f64)) else {
        return Ok(None);
    };
    let unit = v.get("unit").and_then(Value::as_str).unwrap_or("");
    let factor = convert(unit).ok_or_else(|| ParseError::whole(format!("{path}: unknown unit {unit:?}")))?;
    let out = x * factor;
    Ok(out.is_finite().then_some(out))
}

/// Bytes per `unit` (SI `KB`/`MB`/`GB`, binary `KiB`/`MiB`/`GiB`, `bit`).
fn bytes_of(unit: &str) -> Option<f64> {
    Some(match unit.trim() {
        "bytes" | "byte" | "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => (1u64 << 30) as f64,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "bit" | "bits" => 0.125,
        _ => return None,
    })
}

/// GHz per `unit`.
fn frequency_ghz(unit: &str) -> Option<f64> {
    Some(match unit.trim() {
        "Hz" => 1e-9,
        "kHz" | "KHz" => 1e-6,
        "MHz" => 1e-3,
        "GHz" => 1.0,
        _ => return None,
    })
}

/// GB/s (10⁹ B/s) per `unit`.
fn bandwidth_gbs(unit: &str) -> Option<f64> {
    Some(match unit.trim() {
        "GiB/s" => 1.073741824,
        "GB/s" => 1.0,
        "MiB/s" => 1.048576e-3,
        "MB/s" => 1e-3,
        "TiB/s" => 1099.511627776,
        "TB/s" => 1e3,
        "B/s" => 1e-9,
        _ => return None,
    })
}

/// One `;`-separated entry of the legacy CSV: key, value, optional unit.
struct Entry {
    key: String,
    value: String,
    unit: Option<String>,
}

fn unit_word(t: &str) -> bool {
    bytes_of(t).is_some() || frequency_ghz(t).is_some() || matches!(t, "cycles" | "nanoseconds" | "ns")
}

/// Splits a legacy line into its section and entries (keys are the unquoted, non-numeric, non-unit tokens).
fn legacy_line(line: &str) -> (String, Vec<Entry>) {
    let tokens: Vec<(String, bool)> = line
        .split(';')
        .map(str::trim)
        .map(|t| match t.strip_prefix('"').and_then(|x| x.strip_suffix('"')) {
            Some(inner) => (inner.to_string(), true),
            None => (t.to_string(), false),
        })
        .collect();
    let section = tokens.first().map(|t| t.0.clone()).unwrap_or_default();
    let mut entries: Vec<Entry> = Vec::new();
    let mut i = 1;
    while i < tokens.len() {
        let (t, quoted) = &tokens[i];
        let is_key = !quoted && !t.is_empty() && t.parse::<f64>().is_err() && !unit_word(t);
        if is_key {
            let value = tokens.get(i + 1).map(|v| v.0.clone()).unwrap_or_default();
            let unit = tokens.get(i + 2).map(|u| u.0.clone()).filter(|u| unit_word(u));
            i += if unit.is_some() { 3 } else { 2 };
            entries.push(Entry { key: t.clone(), value, unit });
        } else {
            i += 1;
        }
    }
    (section, entries)
}

/// Parses the legacy MT4G v1 CSV (see the module doc).
pub fn parse_legacy_csv(bytes: &[u8]) -> Result<Mt4gGpu, ParseError> {
    let text = utf8(bytes)?;
    let sections: Vec<(u64, String, Vec<Entry>)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let (s, e) = legacy_line(l);
            (i as u64 + 1, s, e)
        })
        .collect();
    let find = |section: &str, key: &str, unit: Option<&str>| {
        sections.iter().filter(|(_, s, _)| s == section).find_map(|(line, _, entries)| {
            entries
                .iter()
                .find(|e| e.key == key && unit.map_or(true, |u| e.unit.as_deref() == Some(u)))
                .map(|e| (*line, e))
        })
    };
    let scaled = |section: &str, key: &str, convert: fn(&str) -> Option<f64>| -> Result<Option<f64>, ParseError> {
        let Some((line, e)) = find(section, key, None) else { return Ok(None) };
        let Ok(x) = e.value.parse::<f64>() else {
            return Err(ParseError::at(line, format!("{section} {key}: {:?} is not a number", e.value)));
        };
        let unit = e.unit.as_deref().unwrap_or("");
        let f = convert(unit).ok_or_else(|| ParseError::at(line, format!("{section} {key}: unknown unit {unit:?}")))?;
        Ok(Some(x * f))
    };
    let name = find("GPU_INFORMATION", "GPU_name", None)
        .map(|(_, e)| e.value.trim().to_string())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ParseError::at(1, "GPU_INFORMATION has no GPU_name"))?;
    let vendor = vendor(find("GPU_INFORMATION", "GPU_vendor", None).map(|(_, e)| e.value.as_str()).unwrap_or(""));
    let cc = find("COMPUTE_RESOURCE_INFORMATION", "CUDA_compute_capability", None).and_then(|(_, e)| {
        let (major, minor) = e.value.split_once('.')?;
        Some(format!("{}.{}", major.trim(), minor.trim().chars().next()?))
    });
    let sms = find("COMPUTE_RESOURCE_INFORMATION", "Number_of_streaming_multiprocessors", None)
        .and_then(|(_, e)| e.value.parse::<u32>().ok());
    let clock_ghz = scaled("ADDITIONAL_INFORMATION", "GPU_Clock_Rate", frequency_ghz)?;
    let latency =
        |section: &str| find(section, "Load_Latency", Some("cycles")).and_then(|(_, e)| e.value.parse::<f64>().ok());
    let level = |section: &str, segments: f64| -> Result<Option<MemoryLevel>, ParseError> {
        if !sections.iter().any(|(_, s, _)| s == section) {
            return Ok(None);
        }
        let line = scaled(section, "Cache_Line_Size", bytes_of)?;
        Ok(Some(MemoryLevel {
            size_bytes: scaled(section, "Size", bytes_of)?.map(|s| s * segments),
            latency_cycles: latency(section),
            read_bandwidth_gbs: None,
            write_bandwidth_gbs: None,
            line_bytes: line.filter(|l| *l >= 1.0 && *l < 1e9).map(|l| l.round() as u32),
        }))
    };
    let l2_segments = find("L2_DATA_CACHE", "Caches_Per_GPU", None)
        .and_then(|(_, e)| e.value.parse::<f64>().ok())
        .filter(|n| *n >= 1.0)
        .unwrap_or(1.0);
    let dram_bytes = scaled("MAIN_MEMORY", "Size", bytes_of)?;
    let mem_clock = scaled("ADDITIONAL_INFORMATION", "Memory_Clock_Frequency", frequency_ghz)?;
    let bus_bits =
        find("ADDITIONAL_INFORMATION", "Memory_Bus_Width", None).and_then(|(_, e)| e.value.parse::<u32>().ok());
    Ok(Mt4gGpu {
        name,
        vendor,
        clock_ghz,
        sm_count: sms,
        warp_size: None,
        max_threads_per_sm: None,
        compute_capability: cc.filter(|_| vendor == Vendor::Nvidia),
        memory_gib: dram_bytes.map(|b| b / (1u64 << 30) as f64),
        memory_bus_width_bits: bus_bits,
        memory_clock_ghz: mem_clock,
        hierarchy: MemoryHierarchy {
            l1: level("L1_DATA_CACHE", 1.0)?,
            shared: level("SHARED_MEMORY", 1.0)?,
            l2: level("L2_DATA_CACHE", l2_segments)?,
            l3: None,
            dram: level("MAIN_MEMORY", 1.0)?,
        },
        source: "MT4G v1 CSV".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/../shared/fixtures/mt4g/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    const GIB_S: f64 = 1.073741824;

    #[test]
    fn h100_json() {
        let g = parse(&fixture("NVIDIA_H100_80GB_HBM3.json")).unwrap();
        assert_eq!((g.name.as_str(), g.vendor), ("NVIDIA H100 80GB HBM3", Vendor::Nvidia));
        // clockRate 1980000 kHz.
        assert!((g.clock_ghz.unwrap() - 1.98).abs() < 1e-12);
        assert_eq!((g.sm_count, g.warp_size, g.max_threads_per_sm), (Some(132), Some(32), Some(2048)));
        assert_eq!(g.compute_capability.as_deref(), Some("9.0"));
        // totalGlobalMem 85176483840 bytes.
        assert!((g.memory_gib.unwrap() - 85176483840.0 / 1073741824.0).abs() < 1e-9);
        assert_eq!(g.memory_bus_width_bits, Some(5120));
        let l1 = g.hierarchy.l1.as_ref().unwrap();
        assert_eq!((l1.size_bytes, l1.latency_cycles, l1.line_bytes), (Some(238848.0), Some(38.0), Some(128)));
        let l2 = g.hierarchy.l2.as_ref().unwrap();
        assert_eq!((l2.size_bytes, l2.latency_cycles), (Some(52428800.0), Some(219.34509803921569)));
        assert!((l2.read_bandwidth_gbs.unwrap() - 4528.922496649036 * GIB_S).abs() < 1e-9);
        assert!((l2.write_bandwidth_gbs.unwrap() - 3494.612631053556 * GIB_S).abs() < 1e-9);
        let dram = g.hierarchy.dram.as_ref().unwrap();
        assert_eq!((dram.size_bytes, dram.latency_cycles), (Some(85176483840.0), Some(834.4758182706399)));
        assert!((dram.read_bandwidth_gbs.unwrap() - 2561.031719280527 * GIB_S).abs() < 1e-9);
        let shared = g.hierarchy.shared.as_ref().unwrap();
        assert_eq!((shared.size_bytes, shared.latency_cycles), (Some(233472.0), Some(29.88235294117647)));
        assert!(g.hierarchy.l3.is_none());
        assert_eq!(g.source, "MT4G JSON, driver 12020, 2025-08-10T00:03:09Z");
    }

    #[test]
    fn a100_and_mi210_json() {
        let a = parse(&fixture("NVIDIA_A100-PCIE-40GB.json")).unwrap();
        assert_eq!((a.sm_count, a.compute_capability.as_deref()), (Some(108), Some("8.0")));
        assert!((a.clock_ghz.unwrap() - 1.41).abs() < 1e-12);
        let l2 = a.hierarchy.l2.unwrap();
        assert_eq!((l2.size_bytes, l2.latency_cycles), (Some(41943040.0), Some(220.95294117647057)));
        assert_eq!(a.hierarchy.l1.unwrap().size_bytes, Some(176128.0));
        let m = parse(&fixture("AMD_Instinct_MI210.json")).unwrap();
        assert_eq!((m.name.as_str(), m.vendor, m.compute_capability), ("AMD Instinct MI210", Vendor::Amd, None));
        assert_eq!((m.warp_size, m.sm_count), (Some(64), Some(104)));
        let l2 = m.hierarchy.l2.unwrap();
        // lineSize {"unit": "bytes", "value": 128}; size 8388608 bytes; latency mean 302.1490196078431 cycles.
        assert_eq!(
            (l2.line_bytes, l2.size_bytes, l2.latency_cycles),
            (Some(128), Some(8388608.0), Some(302.1490196078431))
        );
        assert_eq!(m.hierarchy.l1.unwrap().latency_cycles, Some(124.0));
        assert!((m.hierarchy.dram.unwrap().read_bandwidth_gbs.unwrap() - 1085.4164756189655 * GIB_S).abs() < 1e-9);
    }

    #[test]
    fn legacy_v1_csv() {
        let g = parse(&fixture("legacy_v1_ampere_A100-PCIE-40GB.csv")).unwrap();
        assert_eq!((g.name.as_str(), g.vendor), ("NVIDIA A100-PCIE-40GB", Vendor::Nvidia));
        assert_eq!((g.compute_capability.as_deref(), g.sm_count), (Some("8.0"), Some(108)));
        assert!((g.clock_ghz.unwrap() - 1.410).abs() < 1e-12);
        let l1 = g.hierarchy.l1.unwrap();
        // Size 21.886719 KiB, line 32 B, 39 cycles.
        assert!((l1.size_bytes.unwrap() - 21.886719 * 1024.0).abs() < 1e-6);
        assert_eq!((l1.line_bytes, l1.latency_cycles), (Some(32), Some(39.0)));
        // L2: 20 MiB per segment × Caches_Per_GPU 2; 323 cycles.
        let l2 = g.hierarchy.l2.unwrap();
        assert_eq!((l2.size_bytes, l2.latency_cycles), (Some(40.0 * 1024.0 * 1024.0), Some(323.0)));
        assert!((g.memory_gib.unwrap() - 39.408630).abs() < 1e-9);
        assert_eq!(g.hierarchy.dram.unwrap().latency_cycles, Some(567.0));
        let shared = g.hierarchy.shared.unwrap();
        assert_eq!((shared.size_bytes, shared.latency_cycles), (Some(164.0 * 1024.0), Some(28.0)));
        assert_eq!((g.memory_bus_width_bits, g.memory_clock_ghz), (Some(5120), Some(1.215)));
    }

    #[test]
    fn raw_measurements_units_and_detection() {
        for f in ["NVIDIA_H100_80GB_HBM3_-_L2_Latency.raw.txt", "NVIDIA_H100_80GB_HBM3_-_L1_Size.raw.txt"] {
            let bytes = fixture(f);
            assert!(parse(&bytes).unwrap_err().message.contains("not an MT4G report"), "{f}");
            assert!(!looks_like(&bytes));
        }
        assert!(looks_like(&fixture("NVIDIA_H100_80GB_HBM3.json")));
        assert!(looks_like(&fixture("legacy_v1_ampere_A100-PCIE-40GB.csv")));
        let bad = br#"{"general": {"name": "X", "clockRate": {"unit": "furlongs", "value": 1}}, "memory": {}}"#;
        assert!(parse(bad).unwrap_err().message.contains("general.clockRate: unknown unit"));
        let low = br#"{"general": {"name": "X"}, "memory": {"l1": {"size": {"size": 65537, "unit": "bytes", "confidence": 0.0}, "latency": {"mean": 40, "unit": "ns"}}}}"#;
        let g = parse(low).unwrap();
        assert_eq!(g.hierarchy.l1, None, "low-confidence size and a ns latency without a clock leave nothing");
        assert!(parse(b"{\"general\": ").unwrap_err().line.is_some());
    }
}

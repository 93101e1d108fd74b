//! rocprof v3 counter-collection files joined to their trace, and the metrics derived from counters.

use std::collections::HashMap;

use super::{agent_key, clean_name};

use super::super::text::{number, whole, Lines};
use super::super::ParseError;
use crate::samples::kernel_metrics as km;

/// Counters and launch fields of one dispatch from a v3 counter collection.
#[derive(Default)]
pub(super) struct Counted {
    pub(super) kernel: String,
    pub(super) values: HashMap<String, f64>,
    pub(super) vgpr: Option<f64>,
    pub(super) accum_vgpr: Option<f64>,
    pub(super) lds: Option<f64>,
}

pub(super) fn read_counters(
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

/// Normalized metrics from counters (Omniperf's formulas; see the module doc).
pub(super) fn derived(c: &HashMap<&str, f64>, wave: f64) -> std::collections::BTreeMap<String, f64> {
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

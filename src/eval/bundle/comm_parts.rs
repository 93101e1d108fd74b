//! The communication parts of the bundle: the train rows `perfcast eval comm` calibrates on and aiconfigurator's
//! one-node NCCL tables, each on its own bundled system, thinned per collective.

use std::collections::BTreeMap;
use std::path::Path;

use super::super::comm::{h100_rows, superbench_rows, systems as comm_systems, vtrain_rows};
use super::{bundled_name, content_key, AIC_GPUS};
use crate::hw::{GpuRef, Link, SystemSpec};
use crate::ingest::{self, Context, Format};
use crate::learn::fit::thin_by_key;
use crate::op::Collective;
use crate::samples::{CommSample, Sample};

/// One node of aiconfigurator's system `gpu` (its `systems/<gpu>.yaml`: GPUs per node, NVLink / PCIe bandwidth
/// per GPU and direction, NIC bandwidth per GPU; the NIC numbers only matter beyond one node, which its NCCL tables
/// never measure).
fn aic_system(gpu: &str) -> Option<SystemSpec> {
    // (catalog GPU, GPUs per node, intra-node link, GB/s per GPU, NIC GB/s per GPU).
    let (catalog, per_node, link, intra, nic) = match gpu {
        "a100_sxm" => ("A100-SXM4-80GB", 8, "nvswitch", 300.0, 25.0),
        "h100_sxm" => ("H100-SXM5-80GB", 8, "nvswitch", 450.0, 50.0),
        "b200_sxm" => ("B200", 8, "nvswitch", 900.0, 100.0),
        "b300_sxm" => ("B300", 8, "nvswitch", 900.0, 100.0),
        "gb200" => ("GB200", 4, "nvswitch", 900.0, 900.0),
        "l40s" => ("L40S", 8, "pcie4", 32.0, 50.0),
        _ => return None,
    };
    Some(SystemSpec {
        name: bundled_name(&format!("aic-{}", gpu.replace('_', "-"))),
        gpu: GpuRef::Name(catalog.into()),
        gpus_per_node: per_node,
        nodes: 1,
        intra_node: Link::new(link, intra, 2.0),
        inter_node: Link { nics: Some(per_node), ..Link::new("infiniband", nic * per_node as f64, 5.0) },
        description: Some(format!(
            "bundled: one node of aiconfigurator's {gpu} system (systems/{gpu}.yaml), where its NCCL tables were measured"
        )),
    })
}

/// One communication part: a system and its samples.
pub(super) struct CommSet {
    pub(super) system: SystemSpec,
    pub(super) dataset: &'static str,
    pub(super) samples: Vec<CommSample>,
    pub(super) source_rows: u64,
}

/// The communication parts from `data`, each on its bundled system; `progress` gets a line per aiconfigurator GPU.
///
/// Errors: a file that cannot be read or parsed, a system the eval does not define.
pub(super) fn comm_sets(data: &Path, progress: &mut dyn FnMut(&str)) -> Result<Vec<CommSet>, String> {
    let specs: BTreeMap<String, SystemSpec> = comm_systems().into_iter().map(|s| (s.name.clone(), s)).collect();
    let mut from_eval: Vec<(String, &'static str, Vec<CommSample>)> = Vec::new();
    for (system, rows) in vtrain_rows(data)? {
        from_eval.push((system, "vtrain", rows));
    }
    for (system, rows) in superbench_rows(data)? {
        from_eval.push((system, "superbench_results", rows));
    }
    let (cluster00, cluster01, _) = h100_rows(data)?;
    from_eval.push(("h100-cluster".into(), "nccl_tests_h100_cluster", cluster01));
    from_eval.push(("h100-cluster00".into(), "nccl_tests_h100_cluster", cluster00));
    let mut out = Vec::new();
    for (name, dataset, samples) in from_eval {
        let mut system = specs.get(&name).cloned().ok_or(format!("no system {name}"))?;
        system.name = bundled_name(&name);
        system.description = system.description.map(|d| format!("bundled: {d}"));
        out.push(CommSet { system, dataset, source_rows: samples.len() as u64, samples });
    }
    for gpu in AIC_GPUS {
        let path = data.join("aiconfigurator").join(gpu).join("nccl_perf.csv.gz");
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let parsed = ingest::parse(Format::Aiconfigurator, &bytes, &Context::default())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let samples: Vec<CommSample> = parsed
            .samples
            .into_iter()
            .filter_map(|s| {
                if let Sample::Comm(mut c) = s {
                    c.attributes.clear();
                    Some(c)
                } else {
                    None
                }
            })
            .collect();
        let system = aic_system(gpu).ok_or(format!("no system for {gpu}"))?;
        progress(&format!("{gpu}/nccl_perf: {} samples", samples.len()));
        out.push(CommSet { system, dataset: "aiconfigurator", source_rows: samples.len() as u64, samples });
    }
    Ok(out)
}

/// Thins `set` to at most `max` samples per collective, a uniform sample by content ([`content_key`]).
pub(super) fn thin_comm(set: &mut CommSet, max: usize) {
    let mut by_collective: BTreeMap<Collective, Vec<CommSample>> = BTreeMap::new();
    for s in std::mem::take(&mut set.samples) {
        by_collective.entry(s.collective).or_default().push(s);
    }
    for (_, rows) in by_collective {
        set.samples.extend(thin_by_key(rows, max, content_key));
    }
}

#[cfg(test)]
#[path = "comm_parts_tests.rs"]
mod tests;

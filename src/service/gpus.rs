//! GPU imports: MT4G reports refine a catalog GPU (measured caches, latencies, bandwidths, clock, SM count) or
//! add a new device whose peaks come from a named catalog GPU.

use std::sync::Arc;

use super::{Service, ServiceError};
use crate::hw::{GpuSpec, KnownGpu, MemoryHierarchy, MemoryLevel};
use crate::ingest::mt4g::{self, Mt4gGpu};

/// What an import did.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuImport {
    pub gpu: KnownGpu,
    /// A new device (true) or a refinement of a known one.
    pub created: bool,
    /// Fields the import set.
    pub updated: Vec<String>,
}

fn merge_level(into: &mut Option<MemoryLevel>, from: &Option<MemoryLevel>, name: &str, updated: &mut Vec<String>) {
    let Some(f) = from else { return };
    let t = into.get_or_insert_with(MemoryLevel::default);
    let mut set = |slot: &mut Option<f64>, v: Option<f64>, field: &str| {
        if let Some(v) = v {
            *slot = Some(v);
            updated.push(format!("hierarchy.{name}.{field}"));
        }
    };
    set(&mut t.size_bytes, f.size_bytes, "size_bytes");
    set(&mut t.latency_cycles, f.latency_cycles, "latency_cycles");
    set(&mut t.read_bandwidth_gbs, f.read_bandwidth_gbs, "read_bandwidth_gbs");
    set(&mut t.write_bandwidth_gbs, f.write_bandwidth_gbs, "write_bandwidth_gbs");
    if let Some(l) = f.line_bytes {
        t.line_bytes = Some(l);
        updated.push(format!("hierarchy.{name}.line_bytes"));
    }
}

/// `base` refined with what MT4G measured; returns the fields set.
pub fn refine(base: &GpuSpec, m: &Mt4gGpu) -> (GpuSpec, Vec<String>) {
    let mut g = base.clone();
    let mut updated = Vec::new();
    if let Some(v) = m.clock_ghz {
        g.clock_ghz = v;
        updated.push("clock_ghz".into());
    }
    if let Some(v) = m.sm_count {
        g.sm_count = v;
        updated.push("sm_count".into());
    }
    if let Some(v) = m.warp_size {
        g.warp_size = Some(v);
        updated.push("warp_size".into());
    }
    if let Some(v) = m.max_threads_per_sm {
        g.max_threads_per_sm = Some(v);
        updated.push("max_threads_per_sm".into());
    }
    if let Some(v) = &m.compute_capability {
        g.compute_capability = Some(v.clone());
        updated.push("compute_capability".into());
    }
    if let Some(v) = m.memory_gib {
        g.memory_gib = v;
        updated.push("memory_gib".into());
    }
    let mut h: MemoryHierarchy = g.hierarchy.take().unwrap_or_default();
    merge_level(&mut h.l1, &m.hierarchy.l1, "l1", &mut updated);
    merge_level(&mut h.shared, &m.hierarchy.shared, "shared", &mut updated);
    merge_level(&mut h.l2, &m.hierarchy.l2, "l2", &mut updated);
    merge_level(&mut h.l3, &m.hierarchy.l3, "l3", &mut updated);
    merge_level(&mut h.dram, &m.hierarchy.dram, "dram", &mut updated);
    g.hierarchy = Some(h);
    g.source = Some(match &base.source {
        Some(s) => format!("{s}; measured hierarchy, clock and SMs from {}", m.source),
        None => m.source.clone(),
    });
    (g, updated)
}

impl Service {
    /// Imports an MT4G report (JSON or legacy v1 CSV). The reported device refines its catalog GPU; a device the
    /// catalog does not know needs `base`, the catalog GPU whose peaks it takes (MT4G measures memory, not
    /// FLOP/s). Errors: unparseable report (with line and column), unknown `base`, unknown device without `base`,
    /// a format other than `mt4g`.
    pub async fn import_gpu(
        &self,
        raw: &[u8],
        format: Option<&str>,
        base: Option<&str>,
    ) -> Result<GpuImport, ServiceError> {
        if let Some(f) = format {
            if !f.eq_ignore_ascii_case("mt4g") {
                return Err(ServiceError::invalid(
                    "format",
                    format!("GPU imports read MT4G reports (format=mt4g), not {f:?}"),
                ));
            }
        }
        let m = mt4g::parse(raw).map_err(|e| ServiceError::Unparseable {
            line: e.line,
            column: e.column,
            message: e.message,
        })?;
        let dir = self.gpus.load_full();
        let known = dir.lookup(&m.name);
        let (base_spec, name) = match (base, &known) {
            (Some(b), _) => {
                let spec = dir
                    .spec(b)
                    .ok_or_else(|| ServiceError::invalid("base", format!("unknown GPU {b:?} (GET /v1/gpus)")))?;
                // A known device keeps its name; a new one is named as the report names it.
                let name = known.as_ref().map(|k| k.spec.name.clone()).unwrap_or_else(|| m.name.clone());
                (spec, name)
            }
            (None, Some(k)) => (k.spec.clone(), k.spec.name.clone()),
            (None, None) => {
                return Err(ServiceError::invalid(
                    "base",
                    format!(
                        "{:?} is not in the catalog and MT4G does not measure peak FLOP/s: give base=<catalog GPU> to \
                         take the peaks from",
                        m.name
                    ),
                ))
            }
        };
        let (mut spec, updated) = refine(&base_spec, &m);
        spec.name = name;
        let mut aliases = known.as_ref().map(|k| k.aliases.clone()).unwrap_or_default();
        if !aliases.iter().any(|a| a == &m.name) && m.name != spec.name {
            aliases.push(m.name.clone());
        }
        let created = self.store.put_gpu(&spec, &aliases, &m.source).await? && known.is_none();
        self.gpus.store(Arc::new(self.store.gpu_directory().await?));
        let gpu = self.gpus.load().lookup(&spec.name).ok_or_else(|| {
            ServiceError::Internal(crate::store::StoreError::Corrupt(format!("imported GPU {} not found", spec.name)))
        })?;
        Ok(GpuImport { gpu, created, updated })
    }
}

//! The operator train split of DATA.md for leave-one-GPU-out: NeuSight's collections (NVIDIA and AMD), DeepBench's
//! GEMMs and XLA's matmul table, grouped by regressor key (class, phase, dtype) and GPU. GPUs the catalog does not
//! know are left out.

use std::path::Path;

use super::split::Groups;
use crate::eval::datasets;
use crate::eval::operators::training_files;
use crate::hw::lookup;
use crate::ingest::{self, Context, Format};
use crate::learn::op_key;
use crate::samples::Sample;

/// Reads the train split under `data` (`../shared/data`).
pub fn load(data: &Path, progress: &mut dyn FnMut(&str)) -> Result<Groups, String> {
    let mut groups = Groups::default();
    for (path, kind) in training_files(data) {
        progress(&format!("reading {}", path.display()));
        let samples = match kind {
            "deepbench" => datasets::deepbench_gemm(&path)?,
            "xla" => datasets::xla_matmul(&path)?,
            _ => {
                let raw = datasets::read(&path)?;
                ingest::parse(Format::NeusightCsv, &raw, &Context::default())
                    .map_err(|e| format!("{}: {e}", path.display()))?
                    .samples
                    .into_iter()
                    .filter_map(|s| if let Sample::Op(o) = s { Some(o) } else { None })
                    .collect()
            }
        };
        for s in samples {
            if let Some(g) = lookup(&s.gpu) {
                let key = op_key(s.op, s.phase, s.dtype, None, None);
                groups.add(&key, s.op, s.phase, s.dtype, &g.spec, s.dims, s.time_us);
            }
        }
    }
    Ok(groups)
}

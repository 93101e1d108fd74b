//! The kernel training set: profiled kernels turned into (S2's per-pipe features, pipe-demand ceiling, measured
//! duration) rows for the one kernel regressor (all GPUs).

use super::fit::TrainingSet;
use crate::hw::GpuSpec;
use crate::kernel::pipes::PipeFeatures;
use crate::kernel::sample::estimate_sample;
use crate::samples::KernelSample;

/// Key of the kernel regressor (all GPUs).
pub const KERNEL_KEY: &str = "kernel";

/// The kernel training set from `(sample id, sample, its GPU)`: every sample with the metrics the pipe model
/// needs (others are skipped). The sample id is the row's split key.
pub fn kernel_training_set<'a>(samples: impl IntoIterator<Item = (i64, &'a KernelSample, GpuSpec)>) -> TrainingSet {
    let mut set = TrainingSet::new(&PipeFeatures::NAMES);
    for (id, s, gpu) in samples {
        let Ok(est) = estimate_sample(s, &gpu) else { continue };
        let Some(p) = est.pipes else { continue };
        set.push(&p.features.values(), p.ceiling_us, s.duration_us, id as u64);
    }
    set
}

//! Operator training sets: measured operator samples turned into (features, analytic time, measured time) rows
//! for one regressor key (class, phase, dtype), across GPUs or for one GPU.

use std::collections::BTreeMap;

use serde::Serialize;

use super::features::{op_features, OP_FEATURES};
use super::fit::TrainingSet;
use crate::cost::roofline::estimate;
use crate::hw::{GpuSpec, Precision};
use crate::op::{Dims, OpClass, OpShape, Phase, DIMS};

/// One measured operator call on a known GPU.
#[derive(Debug, Clone, Copy)]
pub struct OpObservation<'a> {
    pub gpu: &'a GpuSpec,
    pub dims: Dims,
    pub time_us: f64,
    pub split_key: u64,
}

/// What a training set was built from, stored with the model.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct SetSummary {
    /// Rows per GPU.
    pub gpus: BTreeMap<String, u64>,
    /// Smallest and largest value of each dim.
    pub dims_min: Dims,
    pub dims_max: Dims,
    /// Observations dropped (the analytic model cannot time them, or a non-finite feature).
    pub dropped: u64,
}

/// Builds the training set of (class, phase, dtype) from `observations`.
pub fn op_training_set(
    class: OpClass,
    phase: Phase,
    dtype: Precision,
    observations: &[OpObservation<'_>],
) -> (TrainingSet, SetSummary) {
    let mut set = TrainingSet::new(&OP_FEATURES);
    let mut summary = SetSummary { dims_min: [u64::MAX; DIMS], ..Default::default() };
    for o in observations {
        let shape = OpShape { class, phase, dims: o.dims };
        let Ok(cost) = estimate(&shape, dtype, o.gpu) else {
            summary.dropped += 1;
            continue;
        };
        let x = op_features(&shape, dtype, o.gpu, &cost);
        if set.push(&x, cost.time_us, o.time_us, o.split_key) {
            *summary.gpus.entry(o.gpu.name.clone()).or_default() += 1;
            for k in 0..DIMS {
                summary.dims_min[k] = summary.dims_min[k].min(o.dims[k]);
                summary.dims_max[k] = summary.dims_max[k].max(o.dims[k]);
            }
        } else {
            summary.dropped += 1;
        }
    }
    if set.is_empty() {
        summary.dims_min = [0; DIMS];
    }
    (set, summary)
}

//! Operator training sets: measured operator samples turned into (features, analytic time, measured time) rows
//! for one regressor key (class, phase, dtype, engine), across GPUs or for one GPU — on one kernel per measured
//! shape ([`engine_kernels`]).

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

/// What [`engine_kernels`] reads of a stored row.
#[derive(Debug, Clone, Copy)]
pub struct KernelView<'a> {
    pub gpu: &'a str,
    pub dims: Dims,
    /// The kernel or code path (`kernel_source`, '' when unknown).
    pub kernel: &'a str,
    /// The precision the kernel computed in when the sample's dtype names another ('' otherwise).
    pub compute_dtype: &'a str,
}

/// The rows of one key on the kernel its engine runs, where a shape was measured by several (aiconfigurator's
/// engine tables time some shapes with two kernels: SGLang's attention with its Triton kernel beside FlashAttention-3
/// or `trtllm_mha`, TensorRT-LLM's FP8 context attention with and without FP8 FMHA, its NVFP4 MoE with the CUTLASS
/// and the min-latency kernels — `data/aiconfigurator/SOURCE.txt`: "keep kernel_source in the key; the engine
/// picks one at serving time"): [`kernel_mask`] of the rows' views, rows in their order.
pub fn engine_kernels<T>(rows: Vec<T>, dtype: Precision, view: impl Fn(&T) -> KernelView<'_>) -> Vec<T> {
    let keep = {
        let views: Vec<KernelView<'_>> = rows.iter().map(&view).collect();
        kernel_mask(&views, dtype)
    };
    rows.into_iter().zip(keep).filter_map(|(r, k)| k.then_some(r)).collect()
}

/// Which rows (`views`, one key's) [`engine_kernels`] keeps: per GPU the variants (kernel, compute precision) are
/// ranked — first those that compute in the sample's precision `dtype` (an fp8 KV cache's attention on FP8 FMHA, as
/// TensorRT-LLM runs it with an fp8 KV cache and aiconfigurator's TensorRT-LLM and SGLang presets pair them:
/// `fmha_quant_mode = fp8` with `kvcache_quant_mode = fp8`), then the one measured on most rows (the collector's main
/// grid, the kernel the engine's defaults select), then by name. At every shape (GPU and dims) measured by several
/// variants only the best-ranked one's rows are kept (all of them: repeats and routing distributions stay); a shape
/// measured by one kernel keeps it — an engine dispatches different kernels to different shapes (vLLM's fp8_block
/// GEMMs: FlashInfer for a few tokens, DeepGEMM for many).
pub fn kernel_mask(views: &[KernelView<'_>], dtype: Precision) -> Vec<bool> {
    use std::collections::{HashMap, HashSet};
    type Variant<'a> = (&'a str, &'a str);
    let mut counts: HashMap<(&str, Variant), usize> = HashMap::new();
    let mut variants_at: HashMap<(&str, Dims), HashSet<Variant>> = HashMap::new();
    for v in views {
        *counts.entry((v.gpu, (v.kernel, v.compute_dtype))).or_default() += 1;
        variants_at.entry((v.gpu, v.dims)).or_default().insert((v.kernel, v.compute_dtype));
    }
    if variants_at.values().all(|v| v.len() < 2) {
        return vec![true; views.len()];
    }
    let name = dtype.as_str();
    // Larger is better; the name reversed so that the alphabetically first wins a tie.
    fn rank<'a>(
        counts: &HashMap<(&'a str, Variant<'a>), usize>,
        name: &str,
        gpu: &'a str,
        v: Variant<'a>,
    ) -> (bool, usize, std::cmp::Reverse<Variant<'a>>) {
        let native = v.1.is_empty() || v.1 == name;
        (native, counts.get(&(gpu, v)).copied().unwrap_or(0), std::cmp::Reverse(v))
    }
    let best: HashMap<(&str, Dims), Variant> = variants_at
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(&(gpu, dims), v)| {
            let top = v.iter().copied().max_by_key(|&k| rank(&counts, name, gpu, k)).expect("non-empty");
            ((gpu, dims), top)
        })
        .collect();
    views.iter().map(|v| best.get(&(v.gpu, v.dims)).is_none_or(|&b| b == (v.kernel, v.compute_dtype))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct Row(&'static str, u64, &'static str, &'static str, f64);

    fn view(r: &Row) -> KernelView<'_> {
        KernelView { gpu: r.0, dims: [r.1, 0, 0, 0, 0], kernel: r.2, compute_dtype: r.3 }
    }

    #[test]
    fn a_shape_measured_twice_keeps_the_kernel_the_engine_runs() {
        // H100 fp8-KV prefill: FlashAttention-3 in fp8 on shapes 1–3 (and a repeat of 1), Triton in bf16 and fp8
        // on shapes 1 and 4. Shape 1: fa3/fp8 computes in the KV precision and has the most rows; shape 4 has
        // Triton only, in bf16 and fp8: the fp8 one (native) wins; shapes 2 and 3 have one kernel each.
        let rows = vec![
            Row("H100", 1, "fa3", "fp8", 1.0),
            Row("H100", 1, "fa3", "fp8", 1.1),
            Row("H100", 2, "fa3", "fp8", 2.0),
            Row("H100", 3, "fa3", "fp8", 3.0),
            Row("H100", 1, "triton", "bf16", 9.0),
            Row("H100", 1, "triton", "fp8", 8.0),
            Row("H100", 4, "triton", "bf16", 7.0),
            Row("H100", 4, "triton", "fp8", 6.0),
        ];
        let kept = engine_kernels(rows, Precision::Fp8, view);
        let times: Vec<f64> = kept.iter().map(|r| r.4).collect();
        assert_eq!(times, [1.0, 1.1, 2.0, 3.0, 6.0]);
    }

    #[test]
    fn the_larger_grid_wins_and_other_gpus_rank_on_their_own() {
        // bf16 (no compute precision column): cutlass on three shapes beats min_latency on one at the shared shape;
        // on B200 min_latency has more rows and wins there.
        let rows = vec![
            Row("H100", 1, "cutlass", "", 1.0),
            Row("H100", 2, "cutlass", "", 2.0),
            Row("H100", 3, "cutlass", "", 3.0),
            Row("H100", 1, "min_latency", "", 0.5),
            Row("B200", 1, "cutlass", "", 1.0),
            Row("B200", 1, "min_latency", "", 0.4),
            Row("B200", 2, "min_latency", "", 0.8),
        ];
        let kept = engine_kernels(rows, Precision::Bf16, view);
        let times: Vec<f64> = kept.iter().map(|r| r.4).collect();
        assert_eq!(times, [1.0, 2.0, 3.0, 0.4, 0.8]);
        // A tie of equal grids: the alphabetically first kernel.
        let tie = vec![Row("L40S", 1, "b", "", 2.0), Row("L40S", 1, "a", "", 1.0)];
        assert_eq!(engine_kernels(tie, Precision::Bf16, view), vec![Row("L40S", 1, "a", "", 1.0)]);
    }
}

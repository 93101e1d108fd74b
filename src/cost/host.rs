//! Host (CPU) time of the calls a training step makes that are not counted kernels: the collectives.
//!
//! [`crate::cost::Efficiency::host_us`] is fitted per *counted* kernel: it carries the Python module call, the
//! autograd bookkeeping and the uncounted element-wise kernels around each counted operator. A collective call
//! is none of that: Megatron's tensor-parallel all-reduce (`megatron/core/tensor_parallel/mappings.py`;
//! `megatron/mpu/mappings.py` in Megatron-DeepSpeed; `_reduce` inside `_ReduceFromModelParallelRegion` / `_CopyToModelParallelRegion`) is one
//! `torch.distributed.all_reduce` on the current stream, and the autograd `Function` that wraps it runs at
//! tensor parallelism 1 too (`_reduce` returns its input when the group has one rank), so its Python cost is
//! already in the tp 1 fit of `host_us`. A collective call therefore costs one eager collective dispatch
//! ([`COLLECTIVE_HOST_US`]), never more than a counted kernel.

/// Host time of one eager collective call from Python, µs. Measured, not fitted: aiconfigurator's A100-SXM
/// table of vLLM 0.14's tensor-parallel all-reduce (DATA.md train data,
/// `aiconfigurator/a100_sxm/custom_allreduce_perf.csv.gz`, rows `ar_backend` = `vllm_eager`: each call dispatched
/// from Python, no CUDA graph) takes 43.6–58.5 µs per call, median 44.7 µs, over the 30 rows of 2, 4 and 8 GPUs
/// and 128–65,536 elements — flat in the message size, while the same calls replayed in a CUDA graph (the
/// `vllm_graph` rows, GPU time only) take 4.9–11.4 µs: the eager loop runs at the host's pace, so 44.7 µs is the
/// host time of one call. The newer vLLM 0.24 rows of H100, B200 and B300 give 20–23 µs, GB200 44–50 µs and
/// L40S (vLLM 0.14) 58–69 µs: the host CPU and the framework's Python path set it, and the A100's is the one
/// measured beside the A100 end-to-end runs (vTrain's DGX A100).
pub const COLLECTIVE_HOST_US: f64 = 44.7;

/// Host time of one collective call, µs, when a counted kernel costs `host_us` of host time: the eager
/// collective dispatch [`COLLECTIVE_HOST_US`], or `host_us` if that is less (a counted kernel includes at least
/// one call's dispatch; 0 for a backend without host time).
pub fn collective_host_us(host_us: f64) -> f64 {
    host_us.min(COLLECTIVE_HOST_US)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collective_call_costs_one_eager_dispatch_never_more_than_a_counted_kernel() {
        // The shipped 67.9 µs per counted kernel: the call costs the measured 44.7 µs.
        assert_eq!(collective_host_us(67.9), 44.7);
        // A cheaper host (7 µs per counted kernel) or none (the roofline's 0) keeps its own value.
        assert_eq!(collective_host_us(7.0), 7.0);
        assert_eq!(collective_host_us(0.0), 0.0);
    }

    #[test]
    fn derated_collectives_take_the_call_host_time_and_kernels_the_counted_one() {
        use crate::comm::Group;
        use crate::cost::{AnalyticBackend, CostBackend, Derated, Efficiency};
        use crate::hw::{presets, Precision};
        use crate::op::{Collective, OpClass, OpShape, Phase};
        let s = presets().into_iter().find(|p| p.name == "dgx-a100-80g").unwrap().resolve().unwrap();
        let d = Derated::new(AnalyticBackend::new(s), Efficiency { host_us: 67.9, ..Efficiency::CALIBRATED });
        // A 4 MiB tensor-parallel all-reduce over 4 GPUs: one call, 44.7 µs of host time (not 67.9).
        assert_eq!(d.collective(Collective::AllReduce, 4_194_304.0, Group::new(4, 4), 4).host_us, 44.7);
        // A layernorm forward is one counted kernel: 1 × 67.9 µs.
        let ln = OpShape::new(OpClass::LayerNorm, Phase::Fwd, &[2048, 2048]);
        assert_eq!(d.compute(&ln, Precision::Fp16).unwrap().host_us, 67.9);
    }

    #[test]
    fn the_constant_is_the_median_of_the_a100_eager_rows() {
        // aiconfigurator a100_sxm custom_allreduce_perf, vllm_eager, 2/4/8 GPUs × 128..65,536 elements (30 rows),
        // sorted, µs: the 15th and 16th values are 44.7 and 44.7, so the median is 44.7 (per-size medians by GPU
        // count: 44.0, 45.4 and 44.7 µs); the graph rows of the same sizes, 4.9–11.4 µs, are the GPU's share.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/aiconfigurator/a100_sxm/custom_allreduce_perf.csv.gz");
        let file = std::fs::File::open(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (../shared beside the repo)", path.display()));
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text).unwrap();
        let mut rows = text.lines();
        let header: Vec<&str> = rows.next().unwrap().split(',').collect();
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        let (size, latency, backend) = (col("message_size"), col("latency"), col("ar_backend"));
        let mut us: Vec<f64> = rows
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|r| r[backend] == "vllm_eager" && r[size].parse::<u64>().unwrap() <= 65_536)
            .map(|r| r[latency].parse::<f64>().unwrap() * 1e3)
            .collect();
        us.sort_by(f64::total_cmp);
        assert_eq!(us.len(), 30);
        let median = (us[14] + us[15]) / 2.0;
        assert!((median - COLLECTIVE_HOST_US).abs() < 0.05, "{median}");
    }
}

//! Feature vectors of the learned operator correction (MODELS.md §4): the operator's workload dims, the
//! analytic model's quantities, and the GPU's descriptors — so one model can serve GPUs it has no samples for.
//!
//! The board power (TDP) per SM tells how far below its boost clock a power-capped GPU runs under load (T4, L4,
//! P4 sustain a fraction of the datasheet peak). Neither the boost clock nor TDP per peak TFLOP/s is a feature:
//! the first is a datasheet number power-capped boards never sustain, the second halves on GPUs with 128 FP32
//! lanes per SM (Hopper, Ada) without their power budget changing, which put an H100 beside the T4.
//!
//! Following NeuSight (Lee et al., ASPLOS 2025; its utilization model reads only per-SM tile quantities), a work
//! unit's (GEMM tile's) compute and DRAM time on one SM at its share of the peak rates are features too:
//! normalized per SM they read the same on every GPU.
//!
//! Magnitudes enter as logarithms (trees split on order of magnitude, and ratios become differences); quantities
//! relative to the machine (intensity over machine balance, wave utilization, bytes over L2) are what transfers
//! between GPUs best, the absolute descriptors let a model learn what does not.
//!
//! The GPU's identity descriptors (peak FLOP/s, DRAM bandwidth, SM count, L2 size, board power, power per SM) are
//! given only for CUDA-core and vector operators ([`describes_gpu_identity`]); for tensor-core operators they are
//! missing, leaving the per-SM, per-work-unit and machine-relative quantities (S2, SynPerf's idea: demand
//! normalised by the GPU's peaks, not the GPU's name). Both choices come from leave-one-GPU-out on the train
//! splits (`perfcast eval cross-gpu`): over NeuSight's FP32 collections the descriptors carry the power-capped
//! boards' clocks (removing them costs 1–3 points of MAPE on GEMMs); over aiconfigurator's six GPUs they let
//! trees file a held-out GPU with the training GPU nearest in one descriptor (A100 bf16 prefill 23.9 → 14.7 %,
//! GEMM 22.9 → 18.3 %, H100 fp8 prefill 37.4 → 32.0 % without them).

use crate::cost::roofline::AnalyticCost;
use crate::hw::{GpuSpec, Precision};
use crate::op::{OpClass, OpShape};

/// Names of [`op_features`]'s values, in order. Stored with every model so a model is only ever fed the vector
/// it was trained on.
pub const OP_FEATURES: [&str; 32] = [
    "dim0_log2",
    "dim1_log2",
    "dim2_log2",
    "dim3_log2",
    "flops_log10",
    "bytes_log10",
    "arithmetic_intensity_log2",
    "intensity_over_balance_log2",
    "waves_log2",
    "wave_utilization",
    "work_units_log2",
    "gemm_split_k",
    "gemm_tile_efficiency",
    "analytic_us_log10",
    "compute_us_log10",
    "memory_us_log10",
    "kernels",
    "compute_share",
    "peak_tflops",
    "memory_bandwidth_gbs",
    "sm_count",
    "l2_mib",
    "elem_bytes",
    "bytes_over_l2_log2",
    "tdp_watts",
    "watts_per_sm",
    "tile_peak_us_log2",
    "tile_dram_us_log2",
    "dim4_log2",
    "work_units_per_sm_log2",
    "work_unit_bytes_log2",
    "launch_share",
];

fn log2p(v: f64) -> f64 {
    (v.max(0.0) + 1.0).log2()
}

fn log10p(v: f64) -> f64 {
    (v.max(0.0) + 1e-3).log10()
}

/// log2 of one work unit's time on one SM at that SM's share of the rate, µs; for non-GEMMs the whole operator
/// spread over the SMs.
fn per_tile(amount: f64, rate_per_s: f64, tiles: f64, sms: f64) -> f64 {
    let units = if tiles > 0.0 { tiles } else { sms };
    ((amount / units) / (rate_per_s / sms) * 1e6 + 1e-6).log2()
}

/// True when `class` in `dtype` gets the GPU's identity descriptors as features (see the module doc): every
/// operator but the tensor-core ones — the serving classes (attention and MoE) and matrix products in the
/// precisions only tensor cores run (bf16, fp8, fp8_block, nvfp4). fp16 keeps them: NeuSight's and DeepBench's
/// fp16 GEMMs ran on GPUs without tensor cores (P100) too.
pub fn describes_gpu_identity(class: OpClass, dtype: Precision) -> bool {
    let tensor_core_class =
        matches!(class, OpClass::AttentionPrefill | OpClass::AttentionDecode | OpClass::Moe | OpClass::FlashAttention);
    let tensor_core_dtype = matches!(dtype, Precision::Bf16 | Precision::Fp8 | Precision::Fp8Block | Precision::Nvfp4);
    let matmul = matches!(class, OpClass::Linear | OpClass::Bmm);
    !(tensor_core_class || (matmul && tensor_core_dtype))
}

/// True when `class`'s absolute analytic times (`analytic_us_log10`, `compute_us_log10`, `memory_us_log10`,
/// `tile_peak_us_log2`, `tile_dram_us_log2`) are features. Not for `attention_decode`: a memory-bound call whose
/// times, beside its dims, name the GPU's bandwidth as surely as an identity descriptor would, while the
/// machine-relative features (intensity over balance, bytes over L2, work units per SM, launch share) keep what
/// transfers. Chosen by leave-one-GPU-out (`perfcast eval cross-gpu --source aiconfigurator`, fast grid, 24,000
/// rows, 2026-11-24): decode bf16 25.9 → 22.6 % and fp8 33.3 → 27.9 % mean over the held-out GPUs (L40S 88.3 →
/// 67.6 % and 110.4 → 83.6 %; A100 25.7 → 24.1 %; the others within ±1.4 points). The same mask made prefill
/// (bf16 20.6 → 22.9 %) and fp8 GEMMs (14.1 → 15.3 %) worse, so they keep them.
pub fn describes_absolute_times(class: OpClass) -> bool {
    class != OpClass::AttentionDecode
}

/// The feature vector of `shape` in `dtype` on `gpu`, given its analytic cost (MODELS.md §4). Length
/// [`OP_FEATURES`]`.len()`.
pub fn op_features(shape: &OpShape, dtype: Precision, gpu: &GpuSpec, cost: &AnalyticCost) -> [f64; 32] {
    let d = shape.dims;
    let bw = gpu.memory_bandwidth_bps();
    let balance = cost.peak_flops / bw;
    let ai = cost.arithmetic_intensity();
    // Fraction of the compute term that is useful work: 1 for non-matmuls, < 1 when the last wave is partial.
    let ideal_compute_us = cost.flops / cost.peak_flops * 1e6;
    let wave_utilization =
        if cost.waves > 0.0 && cost.compute_us > 0.0 { ideal_compute_us / cost.compute_us } else { 1.0 };
    let sms = f64::from(gpu.sm_count.max(1));
    let l2_bytes = gpu.l2_mib * (1u64 << 20) as f64;
    // Missing (NaN, which LightGBM treats as missing) where the identity is not described.
    let identity = |v: f64| if describes_gpu_identity(shape.class, dtype) { v } else { f64::NAN };
    let absolute = |v: f64| if describes_absolute_times(shape.class) { v } else { f64::NAN };
    [
        log2p(d[0] as f64),
        log2p(d[1] as f64),
        log2p(d[2] as f64),
        log2p(d[3] as f64),
        log10p(cost.flops),
        log10p(cost.bytes),
        (ai + 1e-6).log2(),
        ((ai + 1e-6) / balance).log2(),
        log2p(cost.waves),
        wave_utilization,
        log2p(cost.tiles),
        cost.split_k,
        cost.tile_efficiency,
        absolute(log10p(cost.time_us)),
        absolute(log10p(cost.compute_us)),
        absolute(log10p(cost.memory_us)),
        cost.kernels as f64,
        cost.compute_us / (cost.compute_us + cost.memory_us).max(1e-12),
        identity(cost.peak_flops / 1e12),
        identity(gpu.memory_bandwidth_gbs),
        identity(gpu.sm_count as f64),
        identity(gpu.l2_mib),
        dtype.bytes(),
        ((cost.bytes + 1.0) / l2_bytes.max(1.0)).log2(),
        // Missing also for GPUs described without a TDP.
        identity(gpu.tdp_watts.unwrap_or(f64::NAN)),
        identity(gpu.tdp_watts.map_or(f64::NAN, |w| w / f64::from(gpu.sm_count.max(1)))),
        absolute(per_tile(cost.flops, cost.peak_flops, cost.tiles, sms)),
        absolute(per_tile(cost.bytes, bw, cost.tiles, sms)),
        // The fifth dim (serving classes: attention head dim, MoE top-k) last, so the older indices hold.
        log2p(d[4] as f64),
        // Work units (CTAs: GEMM tiles, attention query tiles or (sequence, KV head) pairs, MoE expert tiles) per
        // SM — the parallelism the kernel offers relative to the machine — and the DRAM bytes of one (the same
        // on every GPU); missing for classes without work units.
        if cost.tiles > 0.0 { (cost.tiles / sms).log2() } else { f64::NAN },
        if cost.tiles > 0.0 { (cost.bytes / cost.tiles + 1.0).log2() } else { f64::NAN },
        // The share of the analytic time that is launch overhead: 1 for a latency-bound call, → 0 for a long one.
        cost.launch_us / cost.time_us.max(1e-12),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::roofline::estimate;
    use crate::hw::lookup;
    use crate::op::{OpClass, Phase};

    #[test]
    fn features_are_finite_and_describe_the_machine() {
        let gpu = lookup("A100-SXM4-40GB").unwrap().spec.clone();
        for (class, dims) in [
            (OpClass::Linear, [1, 8192, 8192, 8192, 0]),
            (OpClass::LayerNorm, [1, 1, 0, 0, 0]),
            (OpClass::Elementwise, [4096, 1024, 1, 0, 0]),
            (OpClass::Optimizer, [1_000_000, 0, 0, 0, 0]),
            (OpClass::AttentionDecode, [32, 4096, 8, 1, 128]),
            (OpClass::Moe, [16, 4096, 14336, 8, 2]),
        ] {
            let shape = OpShape::new(class, Phase::Fwd, &dims);
            let cost = estimate(&shape, Precision::Fp16, &gpu).unwrap();
            let f = op_features(&shape, Precision::Fp16, &gpu, &cost);
            // The work-unit features are missing (NaN) for classes without work units, the identity descriptors
            // for tensor-core classes.
            let identity = [18, 19, 20, 21, 24, 25];
            let described = describes_gpu_identity(class, Precision::Fp16);
            // Absolute times: analytic, compute and memory µs, per-SM tile µs (missing for decode only).
            let absolute = [13, 14, 15, 26, 27];
            for (i, v) in f.iter().enumerate() {
                let missing = (identity.contains(&i) && !described)
                    || ((i == 29 || i == 30) && cost.tiles == 0.0)
                    || (absolute.contains(&i) && class == OpClass::AttentionDecode);
                assert_eq!(v.is_nan(), missing, "{class} feature {i} ({}): {v}", OP_FEATURES[i]);
                assert!(!v.is_infinite());
            }
            if described {
                // A100 SXM4: 400 W, 108 SMs.
                assert_eq!((f[24], f[20]), (400.0, 108.0));
            }
        }
        // 8192³ GEMM: 4096 tiles over 38 waves of 108 SMs → utilization 4096 / (38·108) = 0.998.
        let shape = OpShape::new(OpClass::Linear, Phase::Fwd, &[1, 8192, 8192, 8192]);
        let cost = estimate(&shape, Precision::Fp16, &gpu).unwrap();
        let f = op_features(&shape, Precision::Fp16, &gpu, &cost);
        assert!((f[9] - 4096.0 / (38.0 * 108.0)).abs() < 1e-9, "{}", f[9]);
        // 4096 tiles without split-K at full tile efficiency.
        assert_eq!((f[10], f[11], f[12]), (4097.0_f64.log2(), 1.0, 1.0));
        assert_eq!(f[0], 1.0); // log2(1 + 1)
                               // 400 W over 108 SMs.
        assert!((f[25] - 400.0 / 108.0).abs() < 1e-12);
        // One 128×128 tile of K = 8192: 2·128·128·8192 = 268,435,456 FLOP at 312 TFLOP/s / 108 SMs
        // = 2.8889 TFLOP/s per SM → 92.92 µs.
        assert!((f[26] - 92.92_f64.log2()).abs() < 1e-3, "{}", f[26]);
        // Work units: 4096 tiles over 108 SMs; bytes 3·8192²·2 = 402,653,184 B over 4096 tiles = 98,304 B each.
        assert!((f[29] - (4096.0_f64 / 108.0).log2()).abs() < 1e-12);
        assert!((f[30] - 98_305.0_f64.log2()).abs() < 1e-12);
    }

    #[test]
    fn identity_descriptors_only_for_cuda_core_and_vector_operators() {
        use OpClass::*;
        assert!(describes_gpu_identity(Linear, Precision::Fp32));
        assert!(describes_gpu_identity(Bmm, Precision::Fp16));
        assert!(describes_gpu_identity(LayerNorm, Precision::Bf16));
        assert!(!describes_gpu_identity(Linear, Precision::Bf16));
        assert!(!describes_gpu_identity(Linear, Precision::Nvfp4));
        assert!(!describes_gpu_identity(AttentionPrefill, Precision::Fp16));
        assert!(!describes_gpu_identity(Moe, Precision::Fp8));
        // A bf16 GEMM's vector: descriptors missing, the machine-relative features kept.
        let gpu = lookup("H100-SXM5-80GB").unwrap().spec.clone();
        let shape = OpShape::new(Linear, Phase::Fwd, &[1, 4096, 4096, 4096]);
        let f = op_features(&shape, Precision::Bf16, &gpu, &estimate(&shape, Precision::Bf16, &gpu).unwrap());
        assert!([18, 19, 20, 21, 24, 25].iter().all(|&i| f[i].is_nan()));
        assert!(f[7].is_finite() && f[23].is_finite() && f[26].is_finite());
    }

    #[test]
    fn decode_work_units_are_sequence_kv_head_pairs() {
        // attention_decode B 32, C 4096, A 8, G 1, D 128, bf16 on A100-SXM4-40GB (108 SMs): 32·1 = 32 work units,
        // log2(32/108) = −1.7549; bytes 67,272,704 (serving.rs's test) → 2,102,272 per unit, log2(2,102,273) =
        // 21.0035; launch 2 kernels · 2 µs = 4 µs of 47.2622 µs = 0.084634.
        let gpu = lookup("A100-SXM4-40GB").unwrap().spec.clone();
        let shape = OpShape::new(OpClass::AttentionDecode, Phase::Fwd, &[32, 4096, 8, 1, 128]);
        let cost = estimate(&shape, Precision::Bf16, &gpu).unwrap();
        let f = op_features(&shape, Precision::Bf16, &gpu, &cost);
        assert!((f[29] - (-1.7549)).abs() < 1e-4, "{}", f[29]);
        assert!((f[30] - 21.0035).abs() < 1e-4, "{}", f[30]);
        assert!((f[31] - 0.084634).abs() < 1e-6, "{}", f[31]);
        // Its absolute times are missing: 47.2622 µs beside the dims would tell the A100's bandwidth.
        assert!([13, 14, 15, 26, 27].iter().all(|&i| f[i].is_nan()));
        assert!(
            !describes_absolute_times(OpClass::AttentionDecode) && describes_absolute_times(OpClass::AttentionPrefill)
        );
        // A layernorm has no work units: both features missing.
        let ln = OpShape::new(OpClass::LayerNorm, Phase::Fwd, &[1024, 1024]);
        let f = op_features(&ln, Precision::Fp16, &gpu, &estimate(&ln, Precision::Fp16, &gpu).unwrap());
        assert!(f[29].is_nan() && f[30].is_nan());
        assert_eq!(f[31], 2.0 / estimate(&ln, Precision::Fp16, &gpu).unwrap().time_us);
    }
}

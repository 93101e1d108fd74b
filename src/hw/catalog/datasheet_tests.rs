//! Tests of the catalog entries against their datasheets (dense peaks, memory, clocks, generations).

use super::*;
use crate::hw::gpu::{Precision, Vendor};

#[test]
fn generations_follow_the_compute_capability() {
    let generation = |n: &str| lookup(n).unwrap().spec.generation();
    // 8.0 and 8.6 are Ampere, 8.9 is Ada Lovelace (NVIDIA's CUDA C++ Programming Guide, compute capabilities).
    assert_eq!(generation("A100-SXM4-80GB"), "ampere");
    assert_eq!(generation("L4"), "ada");
    assert_eq!(generation("L40S"), "ada");
    assert_eq!(generation("H100-SXM5-80GB"), "hopper");
    assert_eq!(generation("V100-PCIE-32GB"), "other");
    assert_eq!(generation("B200"), "other");
    assert_eq!(generation("MI210"), "other");
    // The capability's major version (the guide's table: A100 8.0, H100 9.0, B200 10.0); MI210 has none.
    let major = |n: &str| lookup(n).unwrap().spec.compute_major();
    assert_eq!((major("A100-SXM4-80GB"), major("H100-SXM5-80GB"), major("B200")), (Some(8), Some(9), Some(10)));
    assert_eq!(major("MI210"), None);
    let later = |n: &str| lookup(n).unwrap().spec.hopper_or_later();
    assert!(!later("A100-SXM4-80GB") && !later("L40S") && later("H100-SXM5-80GB") && later("B200"));
}

#[test]
fn every_required_gpu_is_present_and_valid() {
    let required = [
        "P4",
        "P100-PCIE-16GB",
        "T4",
        "V100-PCIE-32GB",
        "V100-SXM2",
        "A100-PCIE-40GB",
        "A100-SXM4-40GB",
        "A100-SXM4-80GB",
        "A100-80GB-PCIe",
        "L4",
        "H100-SXM5-80GB",
        "H100-PCIe",
        "H200",
        "GH200",
        "MI100",
        "MI210",
        "MI250X",
        "MI300X",
        "L40S",
        "B200",
        "GB200",
        "B300",
        "GB300",
        "RTX-PRO-6000-Blackwell-Server",
    ];
    for name in required {
        let g = lookup(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(g.spec.name, name);
        g.spec.validate().unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert!(g.spec.source.as_deref().is_some_and(|s| s.contains("datasheet")), "{name} cites no datasheet");
    }
}

#[test]
fn datasheet_peaks_follow_the_dense_convention() {
    // H100 SXM: the datasheet's 1,979 TFLOPS BF16 is with 2:4 sparsity; dense is half.
    let h100 = &lookup("H100-SXM5-80GB").unwrap().spec;
    assert_eq!(h100.peak_tflops.get(Precision::Bf16), Some(989.5));
    // A100: 312 TFLOPS FP16 dense; bf16 supported; no fp8.
    let a100 = &lookup("A100-SXM4-40GB").unwrap().spec;
    assert_eq!(a100.peak_flops(Precision::Fp16), Some(312e12));
    assert_eq!(a100.peak_tflops.get(Precision::Fp8), None);
    // V100 has no bf16 path; MI210 fp32 GEMMs run on matrix cores at 45.3.
    assert_eq!(lookup("V100").unwrap().spec.peak_tflops.get(Precision::Bf16), None);
    assert_eq!(lookup("MI210").unwrap().spec.peak_tflops.matmul(Precision::Fp32), Some(45.3));
}

#[test]
fn blackwell_datasheet_numbers() {
    // B200 (HGX B200, per 8 GPUs with sparsity: FP16/BF16 36 PFLOPS, FP8 72, TF32 18; FP4 144 | 72 dense):
    // dense per GPU = 36,000 / 8 / 2 = 2,250 TFLOPS BF16, 72,000 / 8 / 2 = 4,500 FP8, 18,000 / 8 / 2 = 1,125
    // TF32, 72,000 / 8 = 9,000 FP4. DGX B200: 1,440 GB and 64 TB/s over 8 GPUs.
    let b200 = &lookup("NVIDIA B200").unwrap().spec;
    let p = &b200.peak_tflops;
    assert_eq!(p.get(Precision::Bf16), Some(36_000.0 / 8.0 / 2.0));
    assert_eq!(p.get(Precision::Fp16), Some(2250.0));
    assert_eq!(p.get(Precision::Fp8), Some(72_000.0 / 8.0 / 2.0));
    assert_eq!(p.get(Precision::Tf32), Some(18_000.0 / 8.0 / 2.0));
    assert_eq!(p.fp4, Some(72_000.0 / 8.0));
    assert_eq!(
        (b200.memory_gib, b200.memory_bandwidth_gbs, b200.tdp_watts),
        (1440.0 / 8.0, 64_000.0 / 8.0, Some(1000.0))
    );
    assert_eq!(b200.compute_capability.as_deref(), Some("10.0"));
    // GB200 NVL72 (72 GPUs): FP16/BF16 360 PFLOPS sparse -> 360,000 / 72 / 2 = 2,500 dense; FP4 1,440 sparse
    // -> 10,000 dense; 372 GB per two-GPU superchip = 186 GB; one GPU at 1,200 W.
    let gb200 = &lookup("NVIDIA GB200").unwrap().spec;
    assert_eq!(gb200.peak_tflops.bf16, Some(360_000.0 / 72.0 / 2.0));
    assert_eq!(gb200.peak_tflops.fp4, Some(1_440_000.0 / 72.0 / 2.0));
    assert_eq!((gb200.memory_gib, gb200.tdp_watts), (372.0 / 2.0, Some(1200.0)));
    // B300 (HGX B300): FP4 108 PFLOPS dense per 8 GPUs = 13,500; FP64 10 TFLOPS / 8 = 1.25; 2,304 GB / 8 = 288.
    let b300 = &lookup("NVIDIA B300 SXM6 AC").unwrap().spec;
    assert_eq!((b300.peak_tflops.fp4, b300.peak_tflops.fp64), (Some(108_000.0 / 8.0), 10.0 / 8.0));
    assert_eq!((b300.memory_gib, b300.compute_capability.as_deref()), (2304.0 / 8.0, Some("10.3")));
    // GB300 NVL72: 1,080 PFLOPS dense FP4 / 72 = 15,000 (the Blackwell Ultra blog's "15 PetaFLOPS dense NVFP4").
    let gb300 = &lookup("NVIDIA GB300").unwrap().spec;
    assert_eq!((gb300.peak_tflops.fp4, gb300.tdp_watts), (Some(1_080_000.0 / 72.0), Some(1400.0)));
    // RTX PRO 6000 Blackwell Server Edition: 4 PFLOPS FP4 with sparsity -> 2,000 dense; 24,064 / 128 = 188 SMs.
    let rtx = &lookup("NVIDIA RTX PRO 6000 Blackwell Server Edition").unwrap().spec;
    assert_eq!((rtx.peak_tflops.fp4, rtx.sm_count, rtx.memory_gib), (Some(4000.0 / 2.0), 24_064 / 128, 96.0));
    // fp4 exists from Blackwell (sm_100/103/120) on, and only there.
    for g in catalog() {
        let cc = g.spec.compute_capability.as_deref().unwrap_or("");
        let blackwell = cc.starts_with("10.") || cc.starts_with("12.");
        assert_eq!(g.spec.peak_tflops.fp4.is_some(), blackwell, "{}", g.spec.name);
    }
}

#[test]
fn l40s_and_h200_datasheet_numbers() {
    // L40S datasheet: BF16 362.05 | 733* and FP8 733 | 1,466* (dense | sparse): dense = sparse / 2.
    // 18,176 CUDA cores / 128 per SM = 142 SMs; 48 GB at 864 GB/s, 350 W.
    let l40s = &lookup("NVIDIA L40S").unwrap().spec;
    // BF16 is the datasheet's dense column as printed (362.05; its sparse 733 is rounded).
    assert_eq!(l40s.peak_tflops.bf16, Some(362.05));
    assert_eq!(l40s.peak_tflops.fp8, Some(1466.0 / 2.0));
    assert_eq!((l40s.sm_count, l40s.memory_gib, l40s.memory_bandwidth_gbs), (18_176 / 128, 48.0, 864.0));
    assert_eq!((l40s.tdp_watts, l40s.peak_tflops.fp4), (Some(350.0), None));
    // H200 SXM datasheet: FP64 34, FP32 67, TF32 989*, BF16/FP16 1,979*, FP8 3,958* (* sparse -> halved),
    // 141 GB HBM3e at 4.8 TB/s, up to 700 W.
    let h200 = &lookup("NVIDIA H200").unwrap().spec;
    let p = &h200.peak_tflops;
    assert_eq!(
        (p.fp64, p.fp32, p.tf32, p.bf16, p.fp8),
        (34.0, 67.0, Some(989.0 / 2.0), Some(1979.0 / 2.0), Some(3958.0 / 2.0))
    );
    assert_eq!((h200.memory_gib, h200.memory_bandwidth_gbs, h200.tdp_watts), (141.0, 4800.0, Some(700.0)));
}

#[test]
fn mi300x_datasheet_numbers() {
    // AMD Instinct MI300X datasheet: 304 CUs at 2100 MHz, 192 GB HBM3 at 5.3 TB/s, 750 W; dense peaks FP64
    // 81.7 (vector), FP32 163.4 (vector and matrix), TF32 653.7, FP16/BF16 1307.4, FP8 2614.9.
    let g = lookup("AMD Instinct MI300X").unwrap();
    let s = &g.spec;
    assert_eq!((s.name.as_str(), s.vendor, s.sm_count, s.clock_ghz), ("MI300X", Vendor::Amd, 304, 2.1));
    assert_eq!((s.memory_gib, s.memory_bandwidth_gbs, s.l2_mib, s.tdp_watts), (192.0, 5300.0, 32.0, Some(750.0)));
    assert_eq!((s.compute_capability.as_deref(), s.warp_size, g.xcds), (Some("gfx942"), Some(64), 8));
    let p = &s.peak_tflops;
    assert_eq!(
        (p.fp64, p.fp32, p.tf32, p.fp16, p.bf16, p.fp8),
        (81.7, 163.4, Some(653.7), 1307.4, Some(1307.4), Some(2614.9))
    );
    assert_eq!(p.matmul(Precision::Fp32), Some(163.4));
    // Single-die devices count one XCD.
    assert!(catalog().iter().filter(|g| g.spec.name != "MI300X").all(|g| g.xcds == 1));
}

//! The built-in GPU catalog: datasheet numbers with their sources, and the device names that PyTorch
//! (`torch.cuda.get_device_name`), `nvidia-smi`, Nsight Compute and `rocm-smi` report, as aliases.
//!
//! Conventions (so that numbers from different datasheets mean the same thing):
//! - peaks are **dense** (the datasheets' "with sparsity" figures are halved);
//! - `fp64`/`fp32` are vector rates; AMD's FP32 matrix-core rate goes to `fp32_matrix`;
//! - `clock_ghz` is the boost (NVIDIA) or peak engine (AMD) clock;
//! - memory bandwidth in GB/s (10⁹ B/s), memory in GiB as marketed (GB), L2 in MiB;
//! - `tdp_watts` is the datasheet's maximum board power (GH200: the whole superchip module, CPU included;
//!   MI250X-GCD: half the package).
//! Where a datasheet omits a number (SM count, L2, a low fp64/fp16 rate) the architecture whitepaper named in
//! `source` gives it.

use std::sync::OnceLock;

use super::gpu::{GpuSpec, PeakTflops, Vendor};

/// One catalog GPU with the names it is also known by.
#[derive(Debug, Clone)]
pub struct CatalogGpu {
    /// The hardware description (its `name` is the canonical key).
    pub spec: GpuSpec,
    /// Other names that resolve to this GPU (device names as tools report them, short forms).
    pub aliases: Vec<&'static str>,
    /// Accelerator complex dies (XCDs) that one runtime device spans in the default (SPX) compute partition.
    /// rocprof sums per-XCD counters such as `GRBM_GUI_ACTIVE` over them (Omniperf divides by `num_xcd`). 1 for
    /// single-die GPUs: every NVIDIA GPU, MI100, each MI200 GCD (and the MI250X package entry, which is not a
    /// runtime device).
    pub xcds: u32,
}

#[allow(clippy::too_many_arguments)]
fn gpu(
    name: &str,
    vendor: Vendor,
    cc: &str,
    sm_count: u32,
    clock_ghz: f64,
    memory_gib: f64,
    memory_bandwidth_gbs: f64,
    l2_mib: f64,
    tdp_watts: f64,
    peak: [Option<f64>; 7],
    source: &str,
    aliases: &[&'static str],
) -> CatalogGpu {
    let [fp64, fp32, tf32, fp16, bf16, fp8, fp32_matrix] = peak;
    CatalogGpu {
        spec: GpuSpec {
            name: name.to_string(),
            vendor,
            sm_count,
            clock_ghz,
            memory_gib,
            memory_bandwidth_gbs,
            l2_mib,
            peak_tflops: PeakTflops {
                fp64: fp64.unwrap_or(0.0),
                fp32: fp32.unwrap_or(0.0),
                tf32,
                fp16: fp16.unwrap_or(0.0),
                bf16,
                fp8,
                fp32_matrix,
                fp4: None,
            },
            compute_capability: Some(cc.to_string()),
            source: Some(source.to_string()),
            tdp_watts: Some(tdp_watts),
            warp_size: Some(if vendor == Vendor::Amd { 64 } else { 32 }),
            max_threads_per_sm: None,
            hierarchy: None,
        },
        aliases: aliases.to_vec(),
        xcds: 1,
    }
}

const N: Vendor = Vendor::Nvidia;
const A: Vendor = Vendor::Amd;

fn build() -> Vec<CatalogGpu> {
    // peak order: [fp64, fp32, tf32, fp16, bf16, fp8, fp32_matrix], TFLOP/s dense.
    vec![
        gpu("P4", N, "6.1", 20, 1.063, 8.0, 192.0, 2.0, 75.0,
            // 5.5 TFLOPS FP32 (datasheet); GP104 runs FP64 at 1/32 and FP16 at 1/64 of FP32 (Pascal whitepaper).
            [Some(0.17), Some(5.5), None, Some(0.086), None, None, None],
            "NVIDIA Tesla P4 datasheet (2016, https://images.nvidia.com/content/pdf/tesla/184457-Tesla-P4-Datasheet-NV-Final-Letter-Web.pdf); GP104 rates: NVIDIA Tesla P100/Pascal whitepaper",
            &["Tesla P4", "NVIDIA Tesla P4"]),
        gpu("P100-PCIE-16GB", N, "6.0", 56, 1.303, 16.0, 732.0, 4.0, 250.0,
            [Some(4.7), Some(9.3), None, Some(18.7), None, None, None],
            "NVIDIA Tesla P100 datasheet, PCIe 16 GB (2016, https://images.nvidia.com/content/tesla/pdf/nvidia-tesla-p100-PCIe-datasheet.pdf); SMs/L2: Pascal GP100 whitepaper",
            &["Tesla P100-PCIE-16GB", "P100", "P100-PCIE", "NVIDIA Tesla P100-PCIE-16GB"]),
        gpu("T4", N, "7.5", 40, 1.59, 16.0, 320.0, 4.0, 70.0,
            // 8.1 FP32, 65 mixed FP16/FP32 (tensor); FP64 at 1/32 of FP32 (Turing whitepaper).
            [Some(0.25), Some(8.1), None, Some(65.0), None, None, None],
            "NVIDIA T4 Tensor Core GPU datasheet (2019, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf); SMs/L2: NVIDIA Turing architecture whitepaper",
            &["Tesla T4", "NVIDIA T4", "NVIDIA Tesla T4"]),
        gpu("V100-PCIE-32GB", N, "7.0", 80, 1.38, 32.0, 900.0, 6.0, 250.0,
            [Some(7.0), Some(14.0), None, Some(112.0), None, None, None],
            "NVIDIA Tesla V100 datasheet, PCIe (2020, https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf); SMs/L2: Volta GV100 whitepaper",
            &["Tesla V100-PCIE-32GB", "V100-PCIE", "NVIDIA Tesla V100-PCIE-32GB"]),
        gpu("V100-SXM2-16GB", N, "7.0", 80, 1.53, 16.0, 900.0, 6.0, 300.0,
            [Some(7.8), Some(15.7), None, Some(125.0), None, None, None],
            "NVIDIA Tesla V100 datasheet, SXM2 (2020, https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf); SMs/L2: Volta GV100 whitepaper",
            &["Tesla V100-SXM2-16GB", "NVIDIA Tesla V100-SXM2-16GB"]),
        gpu("V100-SXM2", N, "7.0", 80, 1.53, 32.0, 900.0, 6.0, 300.0,
            [Some(7.8), Some(15.7), None, Some(125.0), None, None, None],
            "NVIDIA Tesla V100 datasheet, SXM2 32 GB (2020, https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf); SMs/L2: Volta GV100 whitepaper",
            &["V100-SXM2-32GB", "Tesla V100-SXM2-32GB", "NVIDIA Tesla V100-SXM2-32GB", "V100", "Tesla V100-SXM2-32GB-LS"]),
        gpu("A100-PCIE-40GB", N, "8.0", 108, 1.41, 40.0, 1555.0, 40.0, 250.0,
            [Some(9.7), Some(19.5), Some(156.0), Some(312.0), Some(312.0), None, None],
            "NVIDIA A100 Tensor Core GPU datasheet (2021, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), PCIe 40GB; SMs/L2: NVIDIA A100 Tensor Core GPU architecture whitepaper",
            &["NVIDIA A100-PCIE-40GB", "A100-PCIE"]),
        gpu("A100-SXM4-40GB", N, "8.0", 108, 1.41, 40.0, 1555.0, 40.0, 400.0,
            [Some(9.7), Some(19.5), Some(156.0), Some(312.0), Some(312.0), None, None],
            "NVIDIA A100 Tensor Core GPU datasheet (2021, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), SXM4 40GB; SMs/L2: A100 architecture whitepaper",
            &["NVIDIA A100-SXM4-40GB", "A100", "A100-40GB", "A100-SXM-40GB"]),
        gpu("A100-SXM4-80GB", N, "8.0", 108, 1.41, 80.0, 2039.0, 40.0, 400.0,
            [Some(9.7), Some(19.5), Some(156.0), Some(312.0), Some(312.0), None, None],
            "NVIDIA A100 Tensor Core GPU datasheet (2021, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), SXM4 80GB; SMs/L2: A100 architecture whitepaper",
            &["NVIDIA A100-SXM4-80GB", "A100-80GB", "A100-SXM-80GB"]),
        gpu("A100-80GB-PCIe", N, "8.0", 108, 1.41, 80.0, 1935.0, 40.0, 300.0,
            [Some(9.7), Some(19.5), Some(156.0), Some(312.0), Some(312.0), None, None],
            "NVIDIA A100 Tensor Core GPU datasheet (2021, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), PCIe 80GB; SMs/L2: A100 architecture whitepaper",
            &["NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"]),
        gpu("L4", N, "8.9", 58, 2.04, 24.0, 300.0, 48.0, 72.0,
            // Datasheet peaks are with sparsity (TF32 120, FP16/BF16 242, FP8 485): halved. FP64 = FP32/64 (Ada).
            [Some(0.47), Some(30.3), Some(60.0), Some(121.0), Some(121.0), Some(242.5), None],
            "NVIDIA L4 Tensor Core GPU datasheet (2023, https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet); SMs/L2/FP64 rate: NVIDIA Ada GPU architecture whitepaper",
            &["NVIDIA L4"]),
        gpu("H100-SXM5-80GB", N, "9.0", 132, 1.98, 80.0, 3350.0, 50.0, 700.0,
            // Datasheet (SXM): FP64 34, FP32 67, TF32 989*, BF16/FP16 1979*, FP8 3958* (* sparsity, halved).
            [Some(34.0), Some(67.0), Some(494.5), Some(989.5), Some(989.5), Some(1979.0), None],
            "NVIDIA H100 Tensor Core GPU datasheet (2023, https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet), H100 SXM; SMs/L2/clock: NVIDIA H100 Tensor Core GPU architecture whitepaper",
            &["NVIDIA H100 80GB HBM3", "H100", "H100-SXM", "H100-SXM5", "H100-SXM-80GB", "NVIDIA H100-SXM5-80GB"]),
        gpu("H100-PCIe", N, "9.0", 114, 1.755, 80.0, 2000.0, 50.0, 350.0,
            // Datasheet (PCIe): FP64 26, FP32 51, TF32 756*, BF16/FP16 1513*, FP8 3026* (* sparsity, halved).
            [Some(26.0), Some(51.0), Some(378.0), Some(756.5), Some(756.5), Some(1513.0), None],
            "NVIDIA H100 Tensor Core GPU datasheet (2023, https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet), H100 PCIe; SMs/L2/clock: H100 architecture whitepaper",
            &["NVIDIA H100 PCIe", "H100-PCIE-80GB"]),
        gpu("H200", N, "9.0", 132, 1.98, 141.0, 4800.0, 50.0, 700.0,
            [Some(34.0), Some(67.0), Some(494.5), Some(989.5), Some(989.5), Some(1979.0), None],
            "NVIDIA H200 Tensor Core GPU datasheet (2024, https://resources.nvidia.com/en-us-data-center-overview-mc/en-us-data-center-overview/hpc-datasheet-sc23-h200), H200 SXM; GH100 SMs/L2: H100 architecture whitepaper",
            &["NVIDIA H200", "H200-SXM", "H200-SXM5-141GB", "NVIDIA H200 141GB HBM3e"]),
        gpu("GH200", N, "9.0", 132, 1.98, 96.0, 4000.0, 50.0, 1000.0,
            [Some(34.0), Some(67.0), Some(494.5), Some(989.5), Some(989.5), Some(1979.0), None],
            "NVIDIA GH200 Grace Hopper Superchip datasheet (2023, https://resources.nvidia.com/en-us-grace-cpu/grace-hopper-superchip), 96 GB HBM3 version; GH100 SMs/L2: H100 architecture whitepaper",
            &["NVIDIA GH200 480GB", "GH200-96GB", "NVIDIA GH200 96GB HBM3"]),
        gpu("MI100", A, "gfx908", 120, 1.502, 32.0, 1228.8, 8.0, 300.0,
            // FP64 11.5, FP32 23.1, FP32 matrix 46.1, FP16 matrix 184.6, BF16 matrix 92.3.
            [Some(11.5), Some(23.1), None, Some(184.6), Some(92.3), None, Some(46.1)],
            "AMD Instinct MI100 accelerator datasheet (2020, https://www.amd.com/system/files/documents/instinct-mi100-brochure.pdf); L2: AMD CDNA architecture whitepaper",
            &["AMD Instinct MI100", "gfx908", "MI100-32GB"]),
        gpu("MI210", A, "gfx90a", 104, 1.7, 64.0, 1638.4, 8.0, 300.0,
            // FP64 vector 22.6 (matrix 45.3), FP32 vector 22.6 (matrix 45.3), FP16/BF16 matrix 181.0.
            [Some(22.6), Some(22.6), None, Some(181.0), Some(181.0), None, Some(45.3)],
            "AMD Instinct MI210 accelerator datasheet (2022, https://www.amd.com/system/files/documents/amd-instinct-mi210-brochure.pdf); L2: AMD CDNA 2 architecture whitepaper",
            &["AMD Instinct MI210", "MI210-64GB"]),
        gpu("MI250X", A, "gfx90a", 220, 1.7, 128.0, 3276.8, 16.0, 560.0,
            // Whole OAM package (two GCDs): FP64/FP32 vector 47.9, matrix 95.7, FP16/BF16 383.
            [Some(47.9), Some(47.9), None, Some(383.0), Some(383.0), None, Some(95.7)],
            "AMD Instinct MI250X accelerator datasheet (2021, https://www.amd.com/system/files/documents/amd-instinct-mi200-datasheet.pdf), whole package of two GCDs; L2 8 MiB per GCD: AMD CDNA 2 whitepaper",
            &["MI250X-OAM", "MI250X-package"]),
        gpu("MI250X-GCD", A, "gfx90a", 110, 1.7, 64.0, 1638.4, 8.0, 280.0,
            // One of the MI250X's two GCDs: what PyTorch and rocm-smi call one device. Half the package numbers.
            [Some(23.95), Some(23.95), None, Some(191.5), Some(191.5), None, Some(47.85)],
            "AMD Instinct MI250X datasheet (2021, https://www.amd.com/system/files/documents/amd-instinct-mi200-datasheet.pdf), halved per GCD as the runtime exposes each GCD as one device",
            &["AMD Instinct MI250X", "AMD Instinct MI250X/MI250"]),
        CatalogGpu {
            // 8 XCDs of 38 active CUs each (CDNA 3 whitepaper): one device in the default SPX partition.
            xcds: 8,
            ..gpu("MI300X", A, "gfx942", 304, 2.1, 192.0, 5300.0, 32.0, 750.0,
                // FP64 vector 81.7 (matrix 163.4), FP32 vector 163.4 and matrix 163.4, TF32 653.7, FP16/BF16 1307.4,
                // FP8 2614.9 (dense; the datasheet's sparsity figures are twice these).
                [Some(81.7), Some(163.4), Some(653.7), Some(1307.4), Some(1307.4), Some(2614.9), Some(163.4)],
                "AMD Instinct MI300X accelerator datasheet (2023, https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf): 304 CUs, 2100 MHz peak engine clock, 192 GB HBM3 at 5.3 TB/s, 750 W; L2 4 MB per XCD x 8 XCDs (the 256 MB AMD Infinity Cache behind it is not counted in l2_mib): AMD CDNA 3 architecture whitepaper",
                &["AMD Instinct MI300X", "gfx942"])
        },
    ]
}

/// The built-in catalog, built once.
pub fn catalog() -> &'static [CatalogGpu] {
    static CATALOG: OnceLock<Vec<CatalogGpu>> = OnceLock::new();
    CATALOG.get_or_init(build)
}

/// Normalizes a device name for alias matching: lower case, letters and digits only, so
/// `"NVIDIA_H100_80GB_HBM3"`, `"NVIDIA H100 80GB HBM3"` and `"nvidia-h100-80gb-hbm3"` compare equal.
pub fn normalize_name(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect()
}

/// Strips vendor and product-line prefixes that tools add inconsistently (`NVIDIA`, `Tesla`, `AMD Instinct`).
fn strip_prefixes(normalized: &str) -> &str {
    let mut s = normalized;
    for prefix in ["nvidia", "tesla", "amd", "instinct"] {
        if let Some(rest) = s.strip_prefix(prefix) {
            if !rest.is_empty() {
                s = rest;
            }
        }
    }
    s
}

/// Finds a catalog GPU by its canonical name or any alias (case, spaces, `_`/`-` do not matter). An exact
/// normalized match wins; otherwise the vendor prefix is ignored (`"Tesla T4"` = `"T4"`). `None` when nothing
/// matches.
pub fn lookup(name: &str) -> Option<&'static CatalogGpu> {
    let wanted = normalize_name(name);
    let names = |g: &'static CatalogGpu| std::iter::once(g.spec.name.as_str()).chain(g.aliases.iter().copied());
    if let Some(g) = catalog().iter().find(|g| names(g).any(|c| normalize_name(c) == wanted)) {
        return Some(g);
    }
    let wanted_bare = strip_prefixes(&wanted);
    catalog().iter().find(|g| names(g).any(|c| strip_prefixes(&normalize_name(c)) == wanted_bare))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::gpu::Precision;

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
        ];
        for name in required {
            let g = lookup(name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(g.spec.name, name);
            g.spec.validate().unwrap_or_else(|e| panic!("{name}: {e:?}"));
            assert!(g.spec.source.as_deref().is_some_and(|s| s.contains("datasheet")), "{name} cites no datasheet");
        }
    }

    #[test]
    fn tool_reported_names_resolve() {
        let cases = [
            ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
            ("NVIDIA_H100_80GB_HBM3", "H100-SXM5-80GB"),
            ("Tesla V100-PCIE-32GB", "V100-PCIE-32GB"),
            ("Tesla_P4", "P4"),
            ("Tesla T4", "T4"),
            ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
            ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIe"),
            ("NVIDIA_A100_80GB_PCIe", "A100-80GB-PCIe"),
            ("NVIDIA L4", "L4"),
            ("AMD Instinct MI210", "MI210"),
            ("AMD Instinct MI100", "MI100"),
            ("a100-sxm4-80gb", "A100-SXM4-80GB"),
            ("NVIDIA GH200 480GB", "GH200"),
            ("NVIDIA H200", "H200"),
            ("AMD Instinct MI250X", "MI250X-GCD"),
            ("MI250X", "MI250X"),
            ("AMD Instinct MI300X", "MI300X"),
            ("gfx942", "MI300X"),
            ("AMD_Instinct_MI300X", "MI300X"),
        ];
        for (alias, canonical) in cases {
            assert_eq!(lookup(alias).map(|g| g.spec.name.as_str()), Some(canonical), "{alias}");
        }
        assert!(lookup("RTX 9090").is_none());
    }

    #[test]
    fn names_and_aliases_are_unambiguous() {
        let mut seen = std::collections::HashMap::new();
        for g in catalog() {
            for n in std::iter::once(g.spec.name.as_str()).chain(g.aliases.iter().copied()) {
                let key = normalize_name(n);
                if let Some(prev) = seen.insert(key.clone(), g.spec.name.clone()) {
                    panic!("{n} names both {prev} and {}", g.spec.name);
                }
            }
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
}

//! The catalog's entries: one [`gpu`] call per GPU with its datasheet numbers, the source they come from and the
//! names tools report for it (conventions in the parent module's doc).

use super::CatalogGpu;
use crate::hw::gpu::{GpuSpec, PeakTflops, Vendor};

/// One catalog entry from its datasheet numbers (`peak`: TFLOP/s dense, in the order
/// `[fp64, fp32, tf32, fp16, bf16, fp8, fp32_matrix]`; `None` where the GPU has no such rate).
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
                fp4: None,
                fp32_matrix,
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

/// Sets the dense FP4 tensor-core peak (TFLOP/s) of a Blackwell entry; [`gpu`] leaves it `None`.
fn with_fp4(mut g: CatalogGpu, fp4_tflops: f64) -> CatalogGpu {
    g.spec.peak_tflops.fp4 = Some(fp4_tflops);
    g
}

const N: Vendor = Vendor::Nvidia;
const A: Vendor = Vendor::Amd;

/// Every catalog GPU, in catalog order.
pub(super) fn build() -> Vec<CatalogGpu> {
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
            // aiconfigurator's `a100_sxm` data: its `device` column reads "NVIDIA A100-SXM4-80GB".
            &["NVIDIA A100-SXM4-80GB", "A100-80GB", "A100-SXM-80GB", "a100_sxm"]),
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
            // aiconfigurator's folder `h100_sxm` already resolves through "H100-SXM" (names compare normalized).
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
        gpu("L40S", N, "8.9", 142, 2.52, 48.0, 864.0, 96.0, 350.0,
            // Datasheet: FP32 91.6; TF32 183 | 366*, BF16/FP16 362.05 | 733*, FP8 733 | 1,466* (dense | sparse):
            // the dense column is taken. FP64 = FP32/64 (Ada): 91.6/64 = 1.43. SMs: 18,176 CUDA cores / 128 per SM
            // = 142 (= 568 Tensor Cores / 4). Clock reconstructed from FP32: 91.6e12 / (142 × 128 × 2) = 2.52 GHz.
            [Some(1.43), Some(91.6), Some(183.0), Some(362.05), Some(362.05), Some(733.0), None],
            "NVIDIA L40S GPU datasheet (2023, https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413): 48 GB GDDR6 at 864 GB/s, 350 W, 18,176 CUDA cores, 568 Tensor Cores; L2 96 MB (AD102) and FP64 rate: NVIDIA Ada GPU architecture whitepaper; clock reconstructed from the FP32 peak",
            // aiconfigurator's folder `l40s` is the canonical name itself (names are compared normalized).
            &["NVIDIA L40S"]),
        with_fp4(gpu("B200", N, "10.0", 148, 1.98, 180.0, 8000.0, 126.0, 1000.0,
            // HGX B200 (8 GPUs, sparse* figures): FP4 144* | 72 dense, FP8 72*, FP16/BF16 36*, TF32 18*, FP32 600,
            // FP64 296 TFLOPS; per GPU /8 and sparse /2: BF16 36000/8/2 = 2250, FP8 72000/8/2 = 4500,
            // TF32 18000/8/2 = 1125, FP4 72000/8 = 9000, FP32 600/8 = 75, FP64 296/8 = 37. DGX B200: 1,440 GB and
            // 64 TB/s over 8 GPUs = 180 GB and 8 TB/s each. Clock reconstructed from FP32: 75e12 / (148 × 256) = 1.98 GHz.
            [Some(37.0), Some(75.0), Some(1125.0), Some(2250.0), Some(2250.0), Some(4500.0), None],
            "NVIDIA DGX B200 datasheet (2025, https://www.nvidia.com/en-us/data-center/dgx-b200/): 8 GPUs, 1,440 GB HBM3e, 64 TB/s, FP4 144|72 PFLOPS sparse|dense; NVIDIA HGX B200 specifications (https://www.nvidia.com/en-us/data-center/hgx/): FP16/BF16 36, TF32 18 PFLOPS (sparse), FP32 600, FP64 296 TFLOPS per 8 GPUs, 1,000 W per GPU; NVIDIA publishes no SM count or L2 size for B200: 148 SMs and 126 MiB L2 are what CUDA's device properties report, and the clock is reconstructed from the FP32 peak",
            // `b200_sxm`: aiconfigurator's folder; "NVIDIA B200": PyTorch/nvidia-smi (its `device` column).
            &["NVIDIA B200", "b200_sxm"]), 9000.0),
        with_fp4(gpu("GB200", N, "10.0", 148, 2.11, 186.0, 8000.0, 126.0, 1200.0,
            // One Blackwell GPU of a GB200 superchip. GB200 NVL72 (72 GPUs, sparse* figures): FP4 1,440*,
            // FP8 720*, FP16/BF16 360*, TF32 180* PFLOPS, FP32 5,760, FP64 2,880 TFLOPS, 13.4 TB HBM3e at 576 TB/s;
            // per GPU: BF16 360000/72/2 = 2500, FP8 720000/72/2 = 5000, TF32 180000/72/2 = 1250,
            // FP4 1440000/72/2 = 10000, FP32 5760/72 = 80, FP64 2880/72 = 40; memory 372 GB per superchip / 2 = 186 GB,
            // 576/72 = 8 TB/s. Clock reconstructed from FP32: 80e12 / (148 × 256) = 2.11 GHz.
            [Some(40.0), Some(80.0), Some(1250.0), Some(2500.0), Some(2500.0), Some(5000.0), None],
            "NVIDIA GB200 NVL72 datasheet (2024, https://www.nvidia.com/en-us/data-center/gb200-nvl72/), divided per GPU (72 per rack, 2 per superchip); tdp_watts is one GPU's 1,200 W in the superchip (NVIDIA Blackwell architecture technical brief, https://resources.nvidia.com/en-us-blackwell-architecture), the Grace CPU excluded; SM count and L2 are not published: 148 SMs and 126 MiB as for B200 (same die), clock reconstructed from the FP32 peak",
            // aiconfigurator's folder `gb200` is the canonical name itself.
            &["NVIDIA GB200"]), 10000.0),
        with_fp4(gpu("B300", N, "10.3", 148, 1.98, 288.0, 8000.0, 126.0, 1100.0,
            // Blackwell Ultra on an HGX/DGX B300 board (8 GPUs, sparse* figures): FP4 144* | 108 dense, FP8 72*,
            // FP16/BF16 36*, TF32 18* PFLOPS, FP32 600, FP64 10 TFLOPS, 2.3 TB HBM3e; per GPU: BF16 36000/8/2 = 2250,
            // FP8 72000/8/2 = 4500, TF32 18000/8/2 = 1125, FP4 108000/8 = 13500, FP32 600/8 = 75, FP64 10/8 = 1.25,
            // memory 2304/8 = 288 GB. Clock reconstructed from FP32: 75e12 / (148 × 256) = 1.98 GHz.
            [Some(1.25), Some(75.0), Some(1125.0), Some(2250.0), Some(2250.0), Some(4500.0), None],
            "NVIDIA DGX B300 datasheet (2025, https://www.nvidia.com/en-us/data-center/dgx-b300/) and HGX B300 specifications (https://www.nvidia.com/en-us/data-center/hgx/), divided per GPU; 8 TB/s per GPU: NVIDIA technical blog 'Inside NVIDIA Blackwell Ultra' (2025, https://developer.nvidia.com/blog/inside-nvidia-blackwell-ultra-the-chip-powering-the-ai-factory-era); 1,100 W per GPU on the HGX board; 148 SMs enabled of the 160 the full die has, and 126 MiB L2, as for B200 (not published), clock reconstructed from the FP32 peak",
            // "NVIDIA B300 SXM6 AC": PyTorch's name in aiconfigurator's `b300_sxm` data.
            &["NVIDIA B300 SXM6 AC", "b300_sxm", "NVIDIA B300"]), 13500.0),
        with_fp4(gpu("GB300", N, "10.3", 148, 2.2, 288.0, 8000.0, 126.0, 1400.0,
            // One Blackwell Ultra GPU of a GB300 superchip. GB300 NVL72 (72 GPUs): FP4 1,440* | 1,080 dense,
            // FP8 720*, FP16/BF16 360*, TF32 180* PFLOPS, FP32 6,000, FP64 100 TFLOPS, 20.7 TB HBM3e at 576 TB/s;
            // per GPU: FP4 1080000/72 = 15000, BF16 360000/72/2 = 2500, FP8 720000/72/2 = 5000,
            // TF32 180000/72/2 = 1250, FP32 6000/72 = 83.3, FP64 100/72 = 1.39; 288 GB, 576/72 = 8 TB/s.
            // Clock reconstructed from FP32: 83.3e12 / (148 × 256) = 2.2 GHz.
            [Some(1.39), Some(83.3), Some(1250.0), Some(2500.0), Some(2500.0), Some(5000.0), None],
            "NVIDIA GB300 NVL72 datasheet (2025, https://www.nvidia.com/en-us/data-center/gb300-nvl72/), divided per GPU (72 per rack); 288 GB HBM3e, 8 TB/s and 15 PFLOPS dense NVFP4 per GPU, 1,400 W: NVIDIA technical blog 'Inside NVIDIA Blackwell Ultra' (2025, https://developer.nvidia.com/blog/inside-nvidia-blackwell-ultra-the-chip-powering-the-ai-factory-era); tdp_watts is one GPU, the Grace CPU excluded; SM count and L2 as for B300 (not published), clock reconstructed from the FP32 peak",
            &["NVIDIA GB300"]), 15000.0),
        with_fp4(gpu("RTX-PRO-6000-Blackwell-Server", N, "12.0", 188, 2.49, 96.0, 1792.0, 128.0, 600.0,
            // Datasheet: FP32 120 TFLOPS, FP4 4 PFLOPS with sparsity -> 2000 dense. GB202 tensor rates per the RTX
            // Blackwell whitepaper (FP32 accumulate at full rate on RTX PRO): FP8 = FP4/2 = 1000, FP16/BF16 =
            // FP4/4 = 500, TF32 = FP4/16 = 125; FP64 = FP32/64 = 1.9. SMs: 24,064 CUDA cores / 128 = 188.
            // Bandwidth: 512-bit GDDR7 at 28 Gb/s = 512 × 28 / 8 = 1792 GB/s. Clock: 120e12 / (188 × 256) = 2.49 GHz.
            [Some(1.9), Some(120.0), Some(125.0), Some(500.0), Some(500.0), Some(1000.0), None],
            "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet (2025, https://www.nvidia.com/en-us/data-center/rtx-pro-6000-blackwell-server-edition/): 24,064 CUDA cores, 752 Tensor Cores, 96 GB GDDR7 (512-bit, 28 Gb/s), FP32 120 TFLOPS, FP4 4 PFLOPS (sparse), 600 W max; L2 128 MB and tensor-rate ratios: NVIDIA RTX Blackwell GPU architecture whitepaper (GB202); clock reconstructed from the FP32 peak",
            &["NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000-SE"]), 2000.0),
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

//! Tests of the Nsight Compute parser on the fixtures in `../shared/fixtures/ncu` (both pages, ncu 2020's columns,
//! Pascal's metric names, units, `n/a` and missing durations, errors).

use super::*;
use crate::samples::{kernel_metrics as km, KernelSample};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../shared/fixtures/ncu/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn kernels(p: &Parsed) -> Vec<&KernelSample> {
    p.samples.iter().filter_map(|s| if let Sample::Kernel(k) = s { Some(k) } else { None }).collect()
}

#[test]
fn b200_details_with_prof_lines() {
    let bytes = fixture("superbench_B200_ncu_details_csv_with_PROF_lines.log");
    let p = parse(&bytes, &Context { gpu: Some("B200".into()), ..Default::default() }).unwrap();
    let k = kernels(&p);
    assert_eq!(k.len(), 1);
    let k = k[0];
    assert!(k.name.starts_with("cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32"));
    // "Duration","ns","406240"
    assert!((k.duration_us - 406.24).abs() < 1e-9, "{}", k.duration_us);
    assert_eq!(k.block, Some([384, 1, 1]));
    assert_eq!(k.grid, Some([9, 32, 1]));
    assert_eq!(k.gpu.as_deref(), Some("B200"));
    assert_eq!(k.metrics[km::REGISTERS_PER_THREAD], 168.0);
    // "Achieved Occupancy","%","15.53"
    assert!((k.metrics[km::ACHIEVED_OCCUPANCY] - 0.1553).abs() < 1e-12);
    // static 0 + dynamic 205696 bytes/block; the driver's 1024 is not the kernel's.
    assert_eq!(k.metrics[km::SHARED_MEM_BYTES], 205696.0);
    assert_eq!(k.metrics[km::SM_CYCLES], 508757.0);
    assert_eq!(k.metrics["ncu.SM Frequency"], 1239496049.13);
    assert_eq!(k.attributes["cc"], "10.0");
    assert_eq!(k.attributes["device"], "0");
    assert!(p.rejected.is_empty());
}

#[test]
fn v100_details_old_columns_duration_from_cycles() {
    let bytes = fixture("gene_V100_summit_ncu2020_details_units-base_time-dram.csv");
    let p = parse(&bytes, &Context::default()).unwrap();
    let k = kernels(&p);
    assert_eq!(k.len(), 8);
    // ID 0: dram__bytes.sum 690,974,304; sm__cycles_elapsed.avg 1,209,826.20 at 1,309,471,763.30 cycle/s.
    assert_eq!(k[0].metrics[km::DRAM_BYTES], 690_974_304.0);
    assert!((k[0].duration_us - 1_209_826.20 / 1_309_471_763.30 * 1e6).abs() < 1e-6);
    assert_eq!(k[0].attributes["kernel_time"], "2020-Aug-27 18:57:25");
    assert_eq!((k[0].grid, k[0].block, k[0].gpu.as_ref()), (None, None, None));
    assert!(k[1].name.starts_with("add_i_col_times_ij_block_kernel"));
    assert_eq!(k[7].metrics[km::DRAM_BYTES], 891_866_400.0);
}

#[test]
fn v100_fp64_flops_are_add_mul_and_two_fma() {
    let bytes = fixture("gene_V100_summit_ncu2020_details_units-base_time-flops.csv");
    let p = parse(&bytes, &Context::default()).unwrap();
    let k = kernels(&p);
    assert_eq!(k.len(), 8);
    // ID 0: dadd 0, dfma 137,625,600, dmul 55,050,240.
    assert_eq!(k[0].metrics[km::FLOPS_FP64], 55_050_240.0 + 2.0 * 137_625_600.0);
    // ID 1: all three 27,525,120.
    assert_eq!(k[1].metrics[km::FLOPS_FP64], 4.0 * 27_525_120.0);
    assert!(!k[0].metrics.contains_key(km::FLOPS_FP32));
    assert!((k[0].duration_us - 179_638_319.62 / 1_312_168_927.90 * 1e6).abs() < 1e-6);
}

#[test]
fn gtx1080_raw_page_legacy_names() {
    let bytes = fixture("microgpusim_GTX1080_ncu_page_raw_wide.csv");
    let p = parse(&bytes, &Context::default()).unwrap();
    let k = kernels(&p);
    assert_eq!(k.len(), 3);
    let k0 = k[0];
    assert_eq!(k0.name, "vecAdd");
    assert_eq!(k0.gpu.as_deref(), Some("NVIDIA GeForce GTX 1080"));
    // gpu__time_duration "2,720.00" nsecond
    assert!((k0.duration_us - 2.72).abs() < 1e-12);
    // dram__read_bytes 7,552.00 + dram__write_bytes 384.00
    assert_eq!(k0.metrics[km::DRAM_BYTES], 7936.0);
    assert_eq!((k0.grid, k0.block), (Some([1, 1, 1]), Some([1024, 1, 1])));
    assert_eq!(k0.metrics[km::REGISTERS_PER_THREAD], 8.0);
    assert!((k0.metrics[km::L2_HIT_RATE] - 0.3077).abs() < 1e-12);
    assert!((k0.metrics[km::ACHIEVED_OCCUPANCY] - 0.2830).abs() < 1e-12);
    assert_eq!(k0.metrics[km::SM_CYCLES], 5773.25);
    assert_eq!(k0.metrics[km::SHARED_MEM_BYTES], 0.0);
    // dram__bytes_per_sec 2,917,647,058.82 byte/second kept raw; instanced lists and device constants are not.
    assert_eq!(k0.metrics["ncu.dram__bytes_per_sec"], 2_917_647_058.82);
    assert!(!k0.metrics.contains_key("ncu.inst_executed"));
    assert!(!k0.metrics.keys().any(|m| m.contains("device__attribute")));
    assert_eq!(k[2].metrics[km::DRAM_BYTES], 2176.0 + 256.0);
}

#[test]
fn scaled_units_na_and_missing_duration() {
    let csv = "==PROF== Connected\nsome output\n\
\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"gpu__time_duration.sum\",\"usecond\",\"1,553.50\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"dram__bytes_read.sum\",\"Mbyte\",\"1.5\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"dram__bytes_write.sum\",\"Kbyte\",\"2\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"lts__t_sector_hit_rate.pct\",\"%\",\"n/a\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum\",\"Minst\",\"1\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"smsp__sass_thread_inst_executed_op_fmul_pred_on.sum\",\"inst\",\"10\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum\",\"Kinst\",\"2\"\n\
\"0\",\"1\",\"p\",\"h\",\"k1\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"sm__ops_path_tensor_src_fp16_dst_fp32.sum\",\"Minst\",\"3\"\n\
\"1\",\"1\",\"p\",\"h\",\"k2\",\"1\",\"7\",\"(256, 1, 1)\",\"(1024, 1, 1)\",\"0\",\"8.0\",\"s\",\"dram__bytes.sum\",\"byte\",\"5\"\n\
==PROF== Disconnected\n";
    let p = parse(csv.as_bytes(), &Context::default()).unwrap();
    let k = kernels(&p);
    assert_eq!(k.len(), 1);
    assert!((k[0].duration_us - 1553.5).abs() < 1e-9);
    assert_eq!(k[0].metrics[km::DRAM_BYTES], 1.5e6 + 2e3);
    assert!(!k[0].metrics.contains_key(km::L2_HIT_RATE));
    assert_eq!(k[0].metrics[km::FLOPS_FP32], 1e6 + 10.0 + 2.0 * 2e3);
    assert_eq!(k[0].metrics[km::FLOPS_TENSOR], 3e6);
    assert_eq!(p.rejected.len(), 1);
    assert_eq!(p.rejected[0].line, 12);
    assert!(p.rejected[0].reason.contains("k2"), "{}", p.rejected[0].reason);
}

#[test]
fn errors_name_the_problem() {
    assert!(parse(b"hello\nworld\n", &Context::default()).unwrap_err().message.contains("\"ID\""));
    let e = parse(b"x\n\"ID\",\"Process ID\"\n\"0\",\"1\"\n", &Context::default()).unwrap_err();
    assert_eq!(e.line, Some(2));
    assert!(looks_like(b"==PROF== x\n\"ID\",\"Process ID\",\"Process Name\"\n"));
    assert!(!looks_like(b"ID,Process ID\n"));
}

//! The measured engine all-reduce tables: every committed row read, interpolation worked by hand, and the
//! stand-in and fallback rules.

use super::*;
use crate::hw::{presets, Link};

fn system(name: &str) -> System {
    presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap()
}

#[test]
fn every_committed_row_is_read() {
    // 1,173 data rows: 3 engines × (5 GPUs × 3 group sizes + GB200's 2) × 23 sizes = 3 × 17 × 23.
    let rows = TABLE_CSV.lines().skip(1).count();
    assert_eq!(rows, 3 * 17 * 23);
    let c = curves();
    assert_eq!(c.len(), 3 * 17);
    assert_eq!(c.iter().map(|c| c.points.len()).sum::<usize>(), rows);
    assert!(c.iter().all(|c| c.points.windows(2).all(|w| w[0].0 < w[1].0)));
}

#[test]
fn a_message_between_two_measured_sizes_interpolates_in_log_log() {
    // Rows (bytes, µs) 1,000 → 4 and 4,000 → 16: 2,000 B is halfway in log(bytes), so
    // t = exp((ln 4 + ln 16) / 2) = 8 µs; below the table the smallest size's 4 µs; above it nothing.
    let p = [(1000.0, 4.0), (4000.0, 16.0)];
    assert!((interpolate(&p, 2000.0).unwrap() - 8.0).abs() < 1e-9);
    assert_eq!(interpolate(&p, 4000.0), Some(16.0));
    assert_eq!(interpolate(&p, 10.0), Some(4.0));
    assert_eq!(interpolate(&p, 4001.0), None);
}

#[test]
fn trtllm_on_eight_b200s_reads_its_own_row() {
    // b200_sxm/trtllm/custom_allreduce_perf.csv.gz: bfloat16, 8 GPUs, message_size 32,768 elements = 65,536 B,
    // 0.0059855997562408446 ms = 5.9856 µs (the table keeps 4 decimals).
    let b200 = system("dgx-b200");
    let m = engine_allreduce(KernelFamily::Trtllm, &b200, 8, 1, 65536.0).unwrap();
    assert!((m.time_us - 5.9856).abs() < 1e-9, "{m:?}");
    assert_eq!(m.table(), "trtllm_allreduce/B200");
    // Across nodes, for one rank, or past the largest measured size (1 GiB): no answer.
    assert_eq!(engine_allreduce(KernelFamily::Trtllm, &b200, 8, 2, 65536.0), None);
    assert_eq!(engine_allreduce(KernelFamily::Trtllm, &b200, 1, 1, 65536.0), None);
    assert_eq!(engine_allreduce(KernelFamily::Trtllm, &b200, 8, 1, 2.0 * 1024.0 * 1024.0 * 1024.0), None);
    // No group of 3 was measured.
    assert_eq!(engine_allreduce(KernelFamily::Trtllm, &b200, 3, 1, 65536.0), None);
}

#[test]
fn a_gpu_without_tables_borrows_the_nearest_of_its_generation_over_nvlink_only() {
    // GB300 (sm 10.3) → B300 (sm 10.3, measured; B200 and GB200 are sm 10.0); H200 (sm 9.0) → H100, the only
    // measured sm 9 GPU.
    let gb300 = engine_allreduce(KernelFamily::Sglang, &system("gb300-nvl72"), 4, 1, 65536.0).unwrap();
    assert_eq!((gb300.engine, gb300.gpu.as_str()), (KernelFamily::Sglang, "B300"));
    let h200 = engine_allreduce(KernelFamily::Vllm, &system("dgx-h200"), 8, 1, 65536.0).unwrap();
    assert_eq!(h200.gpu, "H100-SXM5-80GB");
    // The same H200s over PCIe: no custom all-reduce above 2 GPUs (vLLM/SGLang need full NVLink), 2 still borrow.
    let mut pcie = system("dgx-h200");
    pcie.intra_node = Link::new("pcie5", 64.0, 2.0);
    assert_eq!(engine_allreduce(KernelFamily::Vllm, &pcie, 4, 1, 65536.0), None);
    assert!(engine_allreduce(KernelFamily::Vllm, &pcie, 2, 1, 65536.0).is_some());
}

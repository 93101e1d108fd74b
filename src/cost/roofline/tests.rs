//! Hand-computed checks of the operator roofline (training classes).

use super::*;
use crate::hw::lookup;

fn a100() -> GpuSpec {
    lookup("A100-SXM4-40GB").unwrap().spec.clone()
}

#[test]
fn large_gemm_is_compute_bound_at_quantized_peak() {
    // M=N=K=8192 fp16 on A100 (108 SMs, 312 TFLOP/s): 64·64 = 4096 tiles → ceil(4096/108) = 38 waves;
    // per tile 2·128·128·8192 = 268,435,456 FLOP at 312e12/108 FLOP/s per SM = 92.92 µs; 38 waves = 3530.9 µs.
    let c =
        estimate(&OpShape::new(OpClass::Linear, Phase::Fwd, &[1, 8192, 8192, 8192]), Precision::Fp16, &a100()).unwrap();
    assert_eq!(c.waves, 38.0);
    let expected_compute_us = 38.0 * 268_435_456.0 / (312e12 / 108.0) * 1e6;
    assert!((c.compute_us - expected_compute_us).abs() < 1e-6, "{}", c.compute_us);
    assert!((expected_compute_us - 3530.9).abs() < 0.1);
    assert_eq!(c.bound, Bound::Compute);
    assert!((c.time_us - (expected_compute_us + 2.0)).abs() < 1e-6);
    // Ideal FLOPs 2·8192³ = 1.0995e12.
    assert!((c.flops - 1.099_511_627_776e12).abs() < 1.0);
}

#[test]
fn small_output_gemms_use_small_tiles_and_split_k() {
    // M = N = 128, K = 4096, fp32 on A100 (108 SMs, 19.5 TFLOP/s → 180.56 GFLOP/s per SM).
    // One 128×128 tile alone: 2·128·128·4096 / 180.56e9 = 743.4 µs. Best plan by hand: 64×64 tiles (4 of
    // them, efficiency 4096/128/64 = 0.5) with split-K 16 (K/s = 256): 64 tile-splits in one wave,
    // 2·64·64·256 / (180.56e9 · 0.5) = 23.23 µs, plus the reduction 17·128·128·4 B / 1555e9 B/s = 0.72 µs.
    let g = a100();
    let plan = gemm_plan(1, 128, 128, 4096, 19.5e12, &g);
    assert_eq!((plan.tile, plan.split_k, plan.waves), ((64, 64), 16, 1.0));
    let expected = 2.0 * 64.0 * 64.0 * 256.0 / (19.5e12 / 108.0 * 0.5) + 17.0 * 128.0 * 128.0 * 4.0 / 1555e9;
    assert!((plan.time_s - expected).abs() < 1e-12, "{} vs {expected}", plan.time_s);
    assert_eq!(tile_efficiency(128, 64), (8192.0 / 192.0 / 64.0));
}

#[test]
fn gemm_backward_is_two_gemms() {
    let g = a100();
    let fwd =
        estimate(&OpShape::new(OpClass::Linear, Phase::Fwd, &[1, 4096, 4096, 4096]), Precision::Bf16, &g).unwrap();
    let bwd =
        estimate(&OpShape::new(OpClass::Linear, Phase::Bwd, &[1, 4096, 4096, 4096]), Precision::Bf16, &g).unwrap();
    assert_eq!(bwd.kernels, 2);
    assert!((bwd.flops - 2.0 * fwd.flops).abs() < 1.0);
    assert!((bwd.time_us - 2.0 * fwd.time_us).abs() < 1e-6);
}

#[test]
fn layernorm_is_memory_bound() {
    // 8192 rows × 6144 fp16 → read + write 2·8192·6144·2 B = 201,326,592 B over 1555 GB/s = 129.47 µs, + 2 µs.
    let c = estimate(&OpShape::new(OpClass::LayerNorm, Phase::Fwd, &[8192, 6144]), Precision::Fp16, &a100()).unwrap();
    assert_eq!(c.bound, Bound::Memory);
    assert!((c.bytes - 201_326_592.0).abs() < 1e-6);
    assert!((c.time_us - (201_326_592.0 / 1555e9 * 1e6 + 2.0)).abs() < 1e-6);
}

#[test]
fn unsupported_precision_is_an_error() {
    let v100 = lookup("V100-SXM2").unwrap().spec.clone();
    let err =
        estimate(&OpShape::new(OpClass::Linear, Phase::Fwd, &[1, 64, 64, 64]), Precision::Bf16, &v100).unwrap_err();
    assert_eq!(err.precision, Precision::Bf16);
}

#[test]
fn tiny_ops_are_launch_bound() {
    let c = estimate(&OpShape::new(OpClass::Gelu, Phase::Fwd, &[1, 1024]), Precision::Fp16, &a100()).unwrap();
    assert_eq!(c.bound, Bound::Launch);
}

#[test]
fn low_precision_linears_quantize_their_input_first() {
    // H100 SXM (3350 GB/s), M = N = K = 4096: X has n = 16,777,216 elements. fp8 per-tensor adds vLLM's max
    // reduction (reads 2n B = 33,554,432 → 10.016 µs) and quantization (reads 2n, writes n: 50,331,648 B →
    // 15.024 µs), two launches; the GEMM itself is the same as a batched GEMM of one matrix, whose output is
    // written in bf16: bytes (n + n)·1 + n·2 = 67,108,864.
    let h100 = lookup("H100-SXM5-80GB").unwrap().spec.clone();
    let shape = |c| OpShape::new(c, Phase::Fwd, &[1, 4096, 4096, 4096]);
    let n = 16_777_216.0;
    let gemm = estimate(&shape(OpClass::Bmm), Precision::Fp8, &h100).unwrap();
    assert_eq!(gemm.bytes, 67_108_864.0);
    let fp8 = estimate(&shape(OpClass::Linear), Precision::Fp8, &h100).unwrap();
    assert_eq!(fp8.kernels, 3);
    assert_eq!(fp8.bytes, gemm.bytes + 5.0 * n);
    let quant_us = 2.0 * n / 3350e9 * 1e6 + 3.0 * n / 3350e9 * 1e6;
    assert!((quant_us - 25.040).abs() < 1e-3, "{quant_us}");
    assert!((fp8.time_us - (gemm.time_us + 4.0 + quant_us)).abs() < 1e-6, "{} vs {}", fp8.time_us, gemm.time_us);
    // fp8_block: one kernel reading 2n and writing n plus a 4-byte scale per 128 elements: 3.03125·n bytes.
    let block = estimate(&shape(OpClass::Linear), Precision::Fp8Block, &h100).unwrap();
    assert_eq!((block.kernels, block.bytes), (2, gemm.bytes + 3.03125 * n));
    // bf16 quantizes nothing: one kernel, output 2 B.
    let bf16 = estimate(&shape(OpClass::Linear), Precision::Bf16, &h100).unwrap();
    assert_eq!((bf16.kernels, bf16.bytes), (1, 3.0 * n * 2.0));
}

#[test]
fn flash_attention_backward_runs_at_0_87_of_the_forwards_flop_rate() {
    // One sequence of 16,384 tokens, 32 heads of 128, bf16 on A100 (108 SMs, 312 TFLOP/s): 32 · 128 = 4,096 query
    // tiles of 128 rows → ceil(4096/108) = 38 waves. A causal tile sees half the keys: forward 4·128·8192·128 =
    // 536,870,912 FLOP per tile at 312e12/108 FLOP/s per SM = 185.84 µs, 38 waves = 7,061.9 µs; the backward does
    // 2.5× that at 0.87 of the rate (FlashAttention-3 Fig. 5–6: 561/648, 516/595, 322/370): 7,061.9 · 2.5 / 0.87
    // = 20,292.9 µs.
    let shape = |phase| OpShape::new(OpClass::FlashAttention, phase, &[1, 16384, 32, 128]);
    let fwd = estimate(&shape(Phase::Fwd), Precision::Bf16, &a100()).unwrap();
    let bwd = estimate(&shape(Phase::Bwd), Precision::Bf16, &a100()).unwrap();
    assert!((fwd.compute_us - 7061.9).abs() < 0.1, "{}", fwd.compute_us);
    assert!((bwd.compute_us - 20292.9).abs() < 0.5, "{}", bwd.compute_us);
    assert_eq!((fwd.bound, bwd.bound), (Bound::Compute, Bound::Compute));
}

#[test]
fn megatron_deepspeeds_upcast_loss_moves_38_bytes_per_logit_forward_and_14_backward() {
    // GPT-2's padded vocabulary at tp 1 and 1,024 tokens: N = 1,024 · 50,304 = 51,511,296 logits, fp16 (e = 2).
    // Forward (third dim 1): upcast 2 + 4, max 4, subtract 4 + 4, exp 4 + 4, sum 4, div_ 4 + 4 = 38 B per logit in
    // 6 kernels: 38 · 51,511,296 = 1,957,429,248 B. Backward: mul_ 4 + 4, cast back 4 + 2 = 14 B in 2 kernels:
    // 721,158,144 B. The fused kernel (0): 3·2 + 4 = 10 B forward in 4 kernels, 4 + 2 = 6 B backward in 2.
    let n = 1024.0 * 50_304.0;
    let ce = |u: u64, phase: Phase| {
        estimate(&OpShape::new(OpClass::CrossEntropy, phase, &[1024, 50_304, u]), Precision::Fp16, &a100()).unwrap()
    };
    let (f, b) = (ce(1, Phase::Fwd), ce(1, Phase::Bwd));
    assert_eq!((f.bytes, f.kernels, b.bytes, b.kernels), (1_957_429_248.0, 6, 721_158_144.0, 2));
    assert_eq!((f.bytes / n, b.bytes / n), (38.0, 14.0));
    let (f0, b0) = (ce(0, Phase::Fwd), ce(0, Phase::Bwd));
    assert_eq!((f0.bytes / n, f0.kernels, b0.bytes / n, b0.kernels), (10.0, 4, 6.0, 2));
    // Memory-bound: 1,957,429,248 B over the A100-40GB's 1,555 GB/s = 1,258.8 µs of DRAM time.
    assert!((f.memory_us - 1_957_429_248.0 / 1555e9 * 1e6).abs() < 1e-6, "{}", f.memory_us);
}

//! Analytic costs of the serving operators (forward only; dims in [`crate::op`]): prefill and decode attention
//! with grouped key/value heads and the KV-cache write, and the fused mixture-of-experts layer. Each kernel is a
//! roofline term max(compute, memory) plus [`super::LAUNCH_OVERHEAD_US`], like every other class.
//!
//! The counts are a reconstruction [rec] of vLLM's kernels as NVIDIA aiconfigurator's collector times them
//! (`data/aiconfigurator/SOURCE.txt`): FlashAttention-2/3 for attention (`reshape_and_cache` writes the new K/V
//! into the paged cache), FusedMoE (top-k and token sorting, the gate+up grouped GEMM, SiLU·mul, the down grouped
//! GEMM, the weighted sum) for MoE. `e` is the operator's bytes per element ([`crate::hw::Precision::bytes`]): for
//! attention the KV-cache precision, for MoE the weights' (and activations') precision.

use super::{ceil_div, Acc};
use crate::hw::GpuSpec;
use crate::op::Dims;

/// Query rows per flash-attention tile (one CTA), FlashAttention-2/3's block size on current GPUs.
const QUERY_TILE: u64 = 128;

/// `attention_prefill` (B, L, A, G, D) at matrix peak `peak` FLOP/s, two kernels:
/// 1. KV-cache write of the new keys and values: 2·B·L·G·D·e bytes.
/// 2. Causal flash attention: FLOPs = 4·B·L²·A·D / 2 (QKᵀ and P·V, halved by causality) = 2·B·L²·A·D; bytes =
///    Q, K, V read once and O written once = (2·A + 2·G)·B·L·D·e. Compute over query tiles of 128 rows:
///    tiles = B·A·⌈L/128⌉, waves = ⌈tiles / SMs⌉, each wave one average tile (FLOPs / tiles) at the per-SM peak.
///
/// In all, bytes = (2·A + 4·G)·B·L·D·e.
pub(super) fn attention_prefill(acc: &mut Acc, d: &Dims, e: f64, peak: f64, gpu: &GpuSpec) {
    let (b, l, a, g, dh) = (d[0] as f64, d[1] as f64, d[2] as f64, d[3] as f64, d[4] as f64);
    let bw = gpu.memory_bandwidth_bps();
    acc.kernel(0.0, 0.0, 2.0 * b * l * g * dh * e, bw);
    let flops = 2.0 * b * l * l * a * dh;
    let sms = f64::from(gpu.sm_count.max(1));
    let tiles = (d[0].max(1) * d[2].max(1) * ceil_div(d[1], QUERY_TILE)) as f64;
    let waves = (tiles / sms).ceil();
    let compute_s = waves * (flops / tiles) / (peak / sms);
    acc.kernel(flops, compute_s, (2.0 * a + 2.0 * g) * b * l * dh * e, bw);
    acc.waves += waves;
}

/// `attention_decode` (B, C, A, G, D) at matrix peak `peak` FLOP/s, two kernels:
/// 1. KV-cache write of the new token's key and value: 2·B·G·D·e bytes.
/// 2. Attention of one query token per sequence over its C cached tokens: FLOPs = 4·B·C·A·D (q·Kᵀ and p·V);
///    bytes = the K and V of the cache, 2·B·C·G·D·e, plus q read and o written, 2·B·A·D·e. Memory-bound: the
///    compute term is FLOPs / peak (split-KV kernels fill the GPU).
pub(super) fn attention_decode(acc: &mut Acc, d: &Dims, e: f64, peak: f64, gpu: &GpuSpec) {
    let (b, c, a, g, dh) = (d[0] as f64, d[1] as f64, d[2] as f64, d[3] as f64, d[4] as f64);
    let bw = gpu.memory_bandwidth_bps();
    acc.kernel(0.0, 0.0, 2.0 * b * g * dh * e, bw);
    let flops = 4.0 * b * c * a * dh;
    acc.kernel(flops, flops / peak, 2.0 * b * c * g * dh * e + 2.0 * b * a * dh * e, bw);
}

/// `moe` (T, H, F, E, K) at matrix peak `peak` FLOP/s: R = T·K routed token copies reach n = min(E, R) experts
/// (at most every routed copy a different expert), five kernels:
/// 1. top-k selection and token sorting: a launch, traffic negligible (counted 0).
/// 2. gate+up grouped GEMM: 2·R·H·2F FLOPs; reads the n experts' 2F×H weights and the routed inputs R·H, writes
///    R·2F.
/// 3. SiLU·mul: reads R·2F, writes R·F (element-wise FLOPs not counted).
/// 4. down grouped GEMM: 2·R·F·H FLOPs; reads the n experts' H×F weights and R·F, writes R·H.
/// 5. weighted combine: reads R·H, writes T·H.
///
/// In all, FLOPs = 6·T·K·H·F (SwiGLU experts) and bytes = (3·n·H·F + T·K·(3·H + 6·F) + T·H)·e. Each GEMM's
/// compute term is FLOPs / peak (grouped GEMMs of uneven expert loads; the learned correction carries tiles).
pub(super) fn moe(acc: &mut Acc, d: &Dims, e: f64, peak: f64, gpu: &GpuSpec) {
    let (t, h, f) = (d[0] as f64, d[1] as f64, d[2] as f64);
    let r = (d[0] as f64) * (d[4] as f64);
    let n = (d[3] as f64).min(r);
    let bw = gpu.memory_bandwidth_bps();
    acc.kernel(0.0, 0.0, 0.0, bw);
    let up = 4.0 * r * h * f;
    acc.kernel(up, up / peak, (2.0 * n * f * h + r * h + 2.0 * r * f) * e, bw);
    acc.kernel(0.0, 0.0, 3.0 * r * f * e, bw);
    let down = 2.0 * r * f * h;
    acc.kernel(down, down / peak, (n * f * h + r * f + r * h) * e, bw);
    acc.kernel(0.0, 0.0, (r * h + t * h) * e, bw);
}

#[cfg(test)]
mod tests {
    use super::super::estimate;
    use crate::hw::{lookup, GpuSpec, Precision};
    use crate::op::{OpClass, OpShape, Phase};

    /// A100-SXM4-40GB: 108 SMs, 312 TFLOP/s bf16, 1555 GB/s.
    fn a100() -> GpuSpec {
        lookup("A100-SXM4-40GB").unwrap().spec.clone()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn prefill_counts_causal_flops_and_the_kv_write() {
        // B 2, L 1024, A 8, G 1, D 128, bf16. FLOPs 2·2·1024²·8·128 = 4,294,967,296.
        // Bytes: KV write 2·2·1024·1·128·2 = 1,048,576; attention (16 + 2)·2·1024·128·2 = 9,437,184; sum 10,485,760.
        // Tiles 2·8·⌈1024/128⌉ = 128 → 2 waves of 108 SMs; a tile 4,294,967,296/128 = 33,554,432 FLOP at
        // 312e12/108 FLOP/s: compute 2·33,554,432·108/312e12 s = 23.230 µs; memory 9,437,184/1555e9 = 6.069 µs.
        // Time = 2 launches (4 µs) + KV write 1,048,576/1555e9 (0.674 µs) + 23.230 µs = 27.904 µs.
        let s = OpShape::new(OpClass::AttentionPrefill, Phase::Fwd, &[2, 1024, 8, 1, 128]);
        let c = estimate(&s, Precision::Bf16, &a100()).unwrap();
        assert_eq!(c.flops, 4_294_967_296.0);
        assert_eq!(c.bytes, 10_485_760.0);
        assert_eq!((c.kernels, c.waves), (2, 2.0));
        let compute_us = 2.0 * 33_554_432.0 * 108.0 / 312e12 * 1e6;
        assert!(close(c.compute_us, compute_us), "{}", c.compute_us);
        assert!((compute_us - 23.230).abs() < 1e-3);
        let expected = 4.0 + 1_048_576.0 / 1555e9 * 1e6 + compute_us;
        assert!(close(c.time_us, expected), "{} vs {expected}", c.time_us);
        assert!((expected - 27.904).abs() < 1e-3);
    }

    #[test]
    fn decode_is_memory_bound_on_the_kv_read() {
        // B 32, C 4096, A 8, G 1, D 128, bf16. FLOPs 4·32·4096·8·128 = 536,870,912.
        // Bytes: KV write 2·32·1·128·2 = 16,384; KV read 2·32·4096·1·128·2 = 67,108,864; q and o 2·32·8·128·2 =
        // 131,072; sum 67,256,320. Attention kernel: memory (67,108,864 + 131,072)/1555e9 = 43.241 µs against
        // compute 536,870,912/312e12 = 1.72 µs; KV write 16,384/1555e9 = 0.0105 µs. Time 4 + 43.241 + 0.0105.
        let s = OpShape::new(OpClass::AttentionDecode, Phase::Fwd, &[32, 4096, 8, 1, 128]);
        let c = estimate(&s, Precision::Bf16, &a100()).unwrap();
        assert_eq!(c.flops, 536_870_912.0);
        assert_eq!(c.bytes, 67_256_320.0);
        assert_eq!(c.bound, crate::cost::roofline::Bound::Memory);
        let expected = 4.0 + (67_108_864.0 + 131_072.0) / 1555e9 * 1e6 + 16_384.0 / 1555e9 * 1e6;
        assert!(close(c.time_us, expected), "{} vs {expected}", c.time_us);
        assert!((expected - 47.2517).abs() < 1e-3, "{expected}");
        // An fp8 KV cache halves the traffic (A100 has no fp8 path: H100 SXM).
        let h100 = lookup("H100-SXM5-80GB").unwrap().spec.clone();
        let f = estimate(&s, Precision::Fp8, &h100).unwrap();
        assert_eq!(f.bytes, 67_256_320.0 / 2.0);
    }

    #[test]
    fn moe_reads_only_the_experts_it_touches() {
        // Mixtral-like T 1, H 4096, F 14336, E 8, K 2, bf16: 2 routed copies touch 2 of the 8 experts.
        // FLOPs 6·1·2·4096·14336 = 704,643,072. Weights 3·2·4096·14336·2 B = 704,643,072 B; activations
        // (1·2·(3·4096 + 6·14336) + 4096)·2 = (2·98,304 + 4096)·2 = 401,408 B; bytes 705,044,480.
        let g = a100();
        let s = OpShape::new(OpClass::Moe, Phase::Fwd, &[1, 4096, 14336, 8, 2]);
        let c = estimate(&s, Precision::Bf16, &g).unwrap();
        assert_eq!(c.flops, 704_643_072.0);
        assert_eq!(c.bytes, 705_044_480.0);
        assert_eq!((c.kernels, c.bound), (5, crate::cost::roofline::Bound::Memory));
        // Every kernel memory-bound here (a GEMM of 2 rows): time = 5 launches + bytes / 1555 GB/s.
        assert!(close(c.time_us, 10.0 + 705_044_480.0 / 1555e9 * 1e6), "{}", c.time_us);
        // 4096 tokens: every expert touched, weights 3·8·4096·14336·2 B.
        let big =
            estimate(&OpShape::new(OpClass::Moe, Phase::Fwd, &[4096, 4096, 14336, 8, 2]), Precision::Bf16, &g).unwrap();
        let acts = (4096.0 * 2.0 * (3.0 * 4096.0 + 6.0 * 14336.0) + 4096.0 * 4096.0) * 2.0;
        assert_eq!(big.bytes, 3.0 * 8.0 * 4096.0 * 14336.0 * 2.0 + acts);
        assert_eq!(big.flops, 6.0 * 4096.0 * 2.0 * 4096.0 * 14336.0);
    }

    #[test]
    fn nvfp4_needs_an_fp4_peak_and_fp8_block_runs_at_fp8() {
        let h100 = lookup("H100-SXM5-80GB").unwrap().spec.clone();
        let s = OpShape::new(OpClass::Linear, Phase::Fwd, &[1, 4096, 4096, 4096]);
        let err = estimate(&s, Precision::Nvfp4, &h100).unwrap_err();
        assert!(err.to_string().contains("peak_tflops.fp4 is null"), "{err}");
        let block = estimate(&s, Precision::Fp8Block, &h100).unwrap();
        let fp8 = estimate(&s, Precision::Fp8, &h100).unwrap();
        assert_eq!((block.time_us, block.peak_flops), (fp8.time_us, fp8.peak_flops));
    }
}

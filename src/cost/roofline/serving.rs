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
use crate::hw::{GpuSpec, Precision};
use crate::op::Dims;

/// Query rows per flash-attention tile (one CTA), FlashAttention-2/3's block size on current GPUs.
pub const QUERY_TILE: u64 = 128;

/// Bytes per element of the attention's activations (Q, the new K/V before the cache write, O): 16-bit.
const ACT_BYTES: f64 = 2.0;

/// The matrix peak attention computes at, FLOP/s: bf16 (fp16 where a GPU has no bf16 path). The sample's precision
/// is the KV cache's and sets only the K/V traffic: vLLM's FlashAttention-3 and FlashInfer kernels take a bf16
/// query (aiconfigurator's `attn_dtype` column, bfloat16 in every row of its tables) and an fp8 KV cache runs
/// no faster in prefill than a bf16 one (the median fp8/bf16 time ratio of its prefill rows is 0.98–1.13 on H100,
/// L40S and B200).
pub fn attention_peak(gpu: &GpuSpec) -> Option<f64> {
    gpu.peak_matmul_flops(Precision::Bf16).or_else(|| gpu.peak_matmul_flops(Precision::Fp16)).filter(|p| *p > 0.0)
}

/// `attention_prefill` (B, L, A, G, D) with a KV cache of `e` bytes per element, at the 16-bit matrix peak `peak`
/// FLOP/s ([`attention_peak`]), two kernels:
/// 1. KV-cache write of the new keys and values (vLLM `reshape_and_cache`): reads them, 2·B·L·G·D·2 bytes, and
///    writes them, 2·B·L·G·D·e.
/// 2. Causal flash attention: FLOPs = 4·B·L²·A·D / 2 (QKᵀ and P·V, halved by causality) = 2·B·L²·A·D; bytes =
///    Q read and O written, 2·B·L·A·D·2, and the cached K and V read once, 2·B·L·G·D·e. Compute over query tiles
///    of 128 rows: tiles = B·A·⌈L/128⌉, waves = ⌈tiles / SMs⌉, each wave one average tile (FLOPs / tiles) at
///    the per-SM peak.
///
/// In all, bytes = (4·A + 4·G)·B·L·D + 4·G·B·L·D·e.
pub(super) fn attention_prefill(acc: &mut Acc, d: &Dims, e: f64, peak: f64, gpu: &GpuSpec) {
    let (b, l, a, g, dh) = (d[0] as f64, d[1] as f64, d[2] as f64, d[3] as f64, d[4] as f64);
    let bw = gpu.memory_bandwidth_bps();
    acc.kernel(0.0, 0.0, 2.0 * b * l * g * dh * (ACT_BYTES + e), bw);
    let flops = 2.0 * b * l * l * a * dh;
    let sms = f64::from(gpu.sm_count.max(1));
    let tiles = (d[0].max(1) * d[2].max(1) * ceil_div(d[1], QUERY_TILE)) as f64;
    let waves = (tiles / sms).ceil();
    let compute_s = waves * (flops / tiles) / (peak / sms);
    acc.kernel(flops, compute_s, 2.0 * a * b * l * dh * ACT_BYTES + 2.0 * g * b * l * dh * e, bw);
    acc.waves += waves;
    acc.tiles += tiles;
}

/// `attention_decode` (B, C, A, G, D) with a KV cache of `e` bytes per element, at the 16-bit matrix peak `peak`
/// FLOP/s, two kernels:
/// 1. KV-cache write of the new token's key and value: reads 2·B·G·D·2 bytes, writes 2·B·G·D·e.
/// 2. Attention of one query token per sequence over its C cached tokens: FLOPs = 4·B·C·A·D (q·Kᵀ and p·V);
///    bytes = the K and V of the cache, 2·B·C·G·D·e, plus q read and o written, 2·B·A·D·2. Memory-bound: the
///    compute term is FLOPs / peak (split-KV kernels fill the GPU). Its work units are the B·G (sequence, KV
///    head) pairs, each reading its own 2·C·D·e bytes of cache (`tiles`; split-KV kernels divide them further).
pub(super) fn attention_decode(acc: &mut Acc, d: &Dims, e: f64, peak: f64, gpu: &GpuSpec) {
    let (b, c, a, g, dh) = (d[0] as f64, d[1] as f64, d[2] as f64, d[3] as f64, d[4] as f64);
    let bw = gpu.memory_bandwidth_bps();
    acc.kernel(0.0, 0.0, 2.0 * b * g * dh * (ACT_BYTES + e), bw);
    let flops = 4.0 * b * c * a * dh;
    acc.kernel(flops, flops / peak, 2.0 * b * c * g * dh * e + 2.0 * b * a * dh * ACT_BYTES, bw);
    acc.tiles += b * g;
}

/// `moe` (T, H, F, E, K) at matrix peak `peak` FLOP/s: R = T·K routed token copies reach n = min(E, R) experts
/// (at most every routed copy a different expert). With expert parallelism T is the tokens' worth of copies this
/// GPU receives — tokens entering the layer / ep, so R = tokens·K/ep even where K > E (top-22 of 512 experts
/// over ep 256: 2 experts here, 22 copies per 256 tokens) — five kernels:
/// 1. top-k selection and token sorting: a launch, traffic negligible (counted 0).
/// 2. gate+up grouped GEMM: 2·R·H·2F FLOPs; reads the n experts' 2F×H weights and the routed inputs R·H, writes
///    R·2F.
/// 3. SiLU·mul: reads R·2F, writes R·F (element-wise FLOPs not counted).
/// 4. down grouped GEMM: 2·R·F·H FLOPs; reads the n experts' H×F weights and R·F, writes R·H.
/// 5. weighted combine: reads R·H, writes T·H.
///
/// In all, FLOPs = 6·R·H·F (SwiGLU experts) and bytes = (3·n·H·F + R·(3·H + 6·F) + T·H)·e. Each GEMM's
/// compute term is FLOPs / peak (grouped GEMMs of uneven expert loads; the learned correction carries tiles).
/// Work units (`tiles`, a learned feature): 128×128 output tiles of both grouped GEMMs with the routed copies
/// spread evenly, m = ⌈R/n⌉ rows per expert: n·⌈m/128⌉·(⌈2F/128⌉ + ⌈H/128⌉).
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
    if n >= 1.0 {
        let row_tiles = ((r / n).ceil() / 128.0).ceil();
        acc.tiles += n * row_tiles * ((2.0 * f / 128.0).ceil() + (h / 128.0).ceil());
    }
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
        // Bytes: KV write reads and writes 2·2·1024·1·128·(2 + 2) = 2,097,152; attention Q and O 2·8·2·1024·128·2 =
        // 8,388,608, K and V 2·1·2·1024·128·2 = 1,048,576; sum 11,534,336.
        // Tiles 2·8·⌈1024/128⌉ = 128 → 2 waves of 108 SMs; a tile 4,294,967,296/128 = 33,554,432 FLOP at
        // 312e12/108 FLOP/s: compute 2·33,554,432·108/312e12 s = 23.230 µs; memory 9,437,184/1555e9 = 6.069 µs.
        // Time = 2 launches (4 µs) + KV write 2,097,152/1555e9 (1.349 µs) + 23.230 µs = 28.579 µs.
        let s = OpShape::new(OpClass::AttentionPrefill, Phase::Fwd, &[2, 1024, 8, 1, 128]);
        let c = estimate(&s, Precision::Bf16, &a100()).unwrap();
        assert_eq!(c.flops, 4_294_967_296.0);
        assert_eq!(c.bytes, 11_534_336.0);
        assert_eq!((c.kernels, c.waves, c.tiles), (2, 2.0, 128.0));
        let compute_us = 2.0 * 33_554_432.0 * 108.0 / 312e12 * 1e6;
        assert!(close(c.compute_us, compute_us), "{}", c.compute_us);
        assert!((compute_us - 23.230).abs() < 1e-3);
        let expected = 4.0 + 2_097_152.0 / 1555e9 * 1e6 + compute_us;
        assert!(close(c.time_us, expected), "{} vs {expected}", c.time_us);
        assert!((expected - 28.579).abs() < 1e-3, "{expected}");
    }

    #[test]
    fn fp8_kv_prefill_computes_at_the_bf16_peak() {
        // H100 SXM: 989.4 TFLOP/s bf16 (the fp8 peak is twice that). Same shape as above with an fp8 cache: the
        // compute term is the bf16 one, and only the K/V bytes halve: KV write 2·2·1024·128·(2 + 1) = 1,572,864;
        // attention 8,388,608 + 2·2·1024·128·1 = 524,288 → 8,912,896; sum 10,485,760.
        let h100 = lookup("H100-SXM5-80GB").unwrap().spec.clone();
        let s = OpShape::new(OpClass::AttentionPrefill, Phase::Fwd, &[2, 1024, 8, 1, 128]);
        let bf16 = estimate(&s, Precision::Bf16, &h100).unwrap();
        let fp8 = estimate(&s, Precision::Fp8, &h100).unwrap();
        assert_eq!(fp8.peak_flops, h100.peak_matmul_flops(Precision::Bf16).unwrap());
        assert_eq!(fp8.compute_us, bf16.compute_us);
        assert_eq!(fp8.bytes, 10_485_760.0);
        // A cache precision the GPU has no matrix path for is refused (A100: no fp8), as for every matrix product.
        assert_eq!(estimate(&s, Precision::Fp8, &a100()).unwrap_err().precision, Precision::Fp8);
    }

    #[test]
    fn decode_is_memory_bound_on_the_kv_read() {
        // B 32, C 4096, A 8, G 1, D 128, bf16. FLOPs 4·32·4096·8·128 = 536,870,912.
        // Bytes: KV write 2·32·1·128·(2 + 2) = 32,768; KV read 2·32·4096·1·128·2 = 67,108,864; q and o 2·32·8·128·2 =
        // 131,072; sum 67,272,704. Attention kernel: memory (67,108,864 + 131,072)/1555e9 = 43.241 µs against
        // compute 536,870,912/312e12 = 1.72 µs; KV write 32,768/1555e9 = 0.0211 µs. Time 4 + 43.241 + 0.0211.
        let s = OpShape::new(OpClass::AttentionDecode, Phase::Fwd, &[32, 4096, 8, 1, 128]);
        let c = estimate(&s, Precision::Bf16, &a100()).unwrap();
        assert_eq!(c.flops, 536_870_912.0);
        assert_eq!(c.bytes, 67_272_704.0);
        assert_eq!(c.tiles, 32.0);
        assert_eq!(c.bound, crate::cost::roofline::Bound::Memory);
        let expected = 4.0 + (67_108_864.0 + 131_072.0) / 1555e9 * 1e6 + 32_768.0 / 1555e9 * 1e6;
        assert!(close(c.time_us, expected), "{} vs {expected}", c.time_us);
        assert!((expected - 47.2622).abs() < 1e-3, "{expected}");
        // An fp8 KV cache halves the cache traffic, not q and o: 2·32·128·(2 + 1) + 33,554,432 + 131,072.
        let h100 = lookup("H100-SXM5-80GB").unwrap().spec.clone();
        let f = estimate(&s, Precision::Fp8, &h100).unwrap();
        assert_eq!(f.bytes, 24_576.0 + 33_554_432.0 + 131_072.0);
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
        // 2 experts of one row each: 2·1·(⌈28672/128⌉ + ⌈4096/128⌉) = 2·(224 + 32) = 512 tiles.
        assert_eq!(c.tiles, 512.0);
        // Every kernel memory-bound here (a GEMM of 2 rows): time = 5 launches + bytes / 1555 GB/s.
        assert!(close(c.time_us, 10.0 + 705_044_480.0 / 1555e9 * 1e6), "{}", c.time_us);
        // 4096 tokens: every expert touched, weights 3·8·4096·14336·2 B.
        let big =
            estimate(&OpShape::new(OpClass::Moe, Phase::Fwd, &[4096, 4096, 14336, 8, 2]), Precision::Bf16, &g).unwrap();
        let acts = (4096.0 * 2.0 * (3.0 * 4096.0 + 6.0 * 14336.0) + 4096.0 * 4096.0) * 2.0;
        assert_eq!(big.bytes, 3.0 * 8.0 * 4096.0 * 14336.0 * 2.0 + acts);
        assert_eq!(big.flops, 6.0 * 4096.0 * 2.0 * 4096.0 * 14336.0);
        // 8192 copies over 8 experts: 1024 rows each = 8 row tiles; 8·8·(224 + 32) = 16,384 tiles.
        assert_eq!(big.tiles, 16_384.0);
        // Expert parallelism: top-22 of 512 experts with 2 on this GPU (aiconfigurator's moe_ep_size 256), 2560
        // tokens entering the layer: T = 2560/256 = 10 tokens' worth, R = 10·22 = 220 copies (2560·22/256), FLOPs
        // 6·220·2048·5120 = 13,841,203,200; both experts touched, 110 rows each = 1 row tile:
        // 2·1·(⌈10240/128⌉ + ⌈2048/128⌉) = 2·(80 + 16) = 192 tiles.
        let ep =
            estimate(&OpShape::new(OpClass::Moe, Phase::Fwd, &[10, 2048, 5120, 2, 22]), Precision::Bf16, &g).unwrap();
        assert_eq!(ep.flops, 13_841_203_200.0);
        assert_eq!(ep.tiles, 192.0);
    }

    #[test]
    fn nvfp4_needs_an_fp4_peak_and_fp8_block_runs_at_fp8() {
        let h100 = lookup("H100-SXM5-80GB").unwrap().spec.clone();
        let s = OpShape::new(OpClass::Linear, Phase::Fwd, &[1, 4096, 4096, 4096]);
        let err = estimate(&s, Precision::Nvfp4, &h100).unwrap_err();
        assert!(err.to_string().contains("peak_tflops.fp4 is null"), "{err}");
        let block = estimate(&s, Precision::Fp8Block, &h100).unwrap();
        let fp8 = estimate(&s, Precision::Fp8, &h100).unwrap();
        assert_eq!((block.compute_us > 0.0, block.peak_flops), (true, fp8.peak_flops));
        assert_eq!((block.kernels, fp8.kernels), (2, 3));
    }
}

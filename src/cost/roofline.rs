//! Analytic operator cost: roofline with GEMM wave quantization and a launch overhead (MODELS.md §2.1).
//!
//! time = kernels · [`LAUNCH_OVERHEAD_US`] + Σ over the operator's kernels of max(compute, memory), where
//! compute = FLOPs / peak (for matrix products: waves · per-tile FLOPs / per-SM peak, NeuSight's wave
//! observation) and memory = ideal DRAM bytes / DRAM bandwidth. Peaks are the datasheet's dense numbers, so this is
//! a lower bound that real kernels approach to 60–90 %; the learned correction (MODELS.md §4) carries the rest.
//!
//! Per-operator byte and FLOP counts are a reconstruction [rec] of what the PyTorch/Megatron kernels read and
//! write (documented per class in [`estimate`]).

use serde::Serialize;
use utoipa::ToSchema;

use crate::hw::{GpuSpec, Precision};
use crate::op::{Dims, OpClass, OpShape, Phase};

mod serving;
mod vector;

/// Fixed cost per kernel launch, µs: the minimum duration of a kernel on current GPUs (≈ 2 µs from back-to-back
/// launches, S1 times operators by kernel spans so CPU dispatch is excluded).
pub const LAUNCH_OVERHEAD_US: f64 = 2.0;

/// The reference output tile (rows, columns): cuBLAS's common 128×128 CTA tile, one CTA per SM at full
/// efficiency; smaller tiles trade efficiency for parallelism ([`gemm_plan`]).
pub const GEMM_TILE: (u64, u64) = (128, 128);

/// The fraction of its forward's FLOP rate a flash-attention backward reaches: it does 2.5× the forward's FLOPs
/// (five GEMMs against two) in 2.5 / 0.87 ≈ 2.9× its time. Shah et al. 2024 ("FlashAttention-3", Fig. 5 and 6:
/// H100 SXM5, bf16, head dim 128, 16k tokens) measure forward / backward 648 / 561 TFLOP/s for FlashAttention-3,
/// 595 / 516 for cuDNN and 370 / 322 for FlashAttention-2 — 0.866, 0.867 and 0.870: every kernel's backward loses
/// the same share (the dQ accumulation across key tiles and the extra softmax-gradient pass), so one constant.
pub const FLASH_BACKWARD_RATE: f64 = 0.87;

/// Which roofline term bounds the estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    Compute,
    Memory,
    Launch,
}

/// The analytic estimate of one operator and the quantities behind it (also the learned model's features).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct AnalyticCost {
    /// Estimated time, µs.
    pub time_us: f64,
    /// Floating-point operations.
    pub flops: f64,
    /// Ideal DRAM traffic, bytes.
    pub bytes: f64,
    /// Σ compute terms, µs.
    pub compute_us: f64,
    /// Σ memory terms, µs.
    pub memory_us: f64,
    /// Launch overhead, µs.
    pub launch_us: f64,
    /// Kernels launched.
    pub kernels: u32,
    /// GEMM waves (Σ over the operator's GEMMs; 0 for non-matmul classes).
    pub waves: f64,
    /// Work units (CTAs): GEMM tiles × split-K (Σ over the operator's GEMMs), prefill attention's query tiles,
    /// decode attention's (sequence, KV head) pairs, MoE's expert tiles; 0 for the other classes.
    pub tiles: f64,
    /// Largest split-K factor of the operator's GEMMs (1 without split-K or GEMM).
    pub split_k: f64,
    /// Smallest tile efficiency of the operator's GEMMs ([`tile_efficiency`]; 1 without GEMM).
    pub tile_efficiency: f64,
    /// Peak FLOP/s used for the compute term.
    pub peak_flops: f64,
    /// The binding term.
    pub bound: Bound,
}

impl AnalyticCost {
    /// Arithmetic intensity, FLOP per DRAM byte.
    pub fn arithmetic_intensity(&self) -> f64 {
        if self.bytes > 0.0 {
            self.flops / self.bytes
        } else {
            0.0
        }
    }
}

/// The GPU cannot run this precision on the path the operator needs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{gpu} has no {precision} {path} path (its peak_tflops.{} is null)", precision.peak_field())]
pub struct UnsupportedPrecision {
    pub gpu: String,
    pub precision: Precision,
    pub path: &'static str,
}

#[derive(Default)]
struct Acc {
    flops: f64,
    bytes: f64,
    compute_s: f64,
    memory_s: f64,
    time_s: f64,
    kernels: u32,
    waves: f64,
    tiles: f64,
    split_k: f64,
    tile_efficiency: f64,
}

impl Acc {
    /// Adds one kernel: `flops` at `compute_s`, `bytes` over DRAM.
    fn kernel(&mut self, flops: f64, compute_s: f64, bytes: f64, bw: f64) {
        let memory_s = bytes / bw;
        self.flops += flops;
        self.bytes += bytes;
        self.compute_s += compute_s;
        self.memory_s += memory_s;
        self.time_s += compute_s.max(memory_s);
        self.kernels += 1;
    }
}

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b.max(1))
}

/// Per-SM efficiency of an output tile relative to a 128×128 tile: its arithmetic intensity per operand byte
/// loaded into shared memory, tm·tn/(tm + tn), over the 128×128 tile's 64, capped at 1 [rec].
pub fn tile_efficiency(tm: u64, tn: u64) -> f64 {
    ((tm * tn) as f64 / (tm + tn) as f64 / 64.0).min(1.0)
}

/// The compute plan of one (batched) GEMM: tile, split-K factor and waves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GemmPlan {
    pub tile: (u64, u64),
    pub split_k: u64,
    pub waves: f64,
    /// Compute time including the split-K reduction, s.
    pub time_s: f64,
}

/// Chooses the tile and split-K that minimize the compute time of C[b][m,n] = A[b][m,k]·B[b][k,n], as cuBLAS's
/// heuristics pick a kernel [rec]: for each tile in [`GEMM_TILES`] and split-K s ∈ {1, 2, 4, 8, 16} (K/s ≥ 256),
/// time = waves · 2·tm·tn·⌈K/s⌉ / (per-SM peak · tile efficiency) + the split-K reduction ((s + 1)·b·m·n fp32
/// partials over DRAM), waves = ⌈b·⌈m/tm⌉·⌈n/tn⌉·s / SMs⌉ (NeuSight's wave quantization).
pub fn gemm_plan(b: u64, m: u64, n: u64, k: u64, peak: f64, gpu: &GpuSpec) -> GemmPlan {
    let sms = gpu.sm_count.max(1) as u64;
    let per_sm = peak / sms as f64;
    let bw = gpu.memory_bandwidth_bps();
    let mut best = GemmPlan { tile: GEMM_TILE, split_k: 1, waves: 0.0, time_s: f64::INFINITY };
    for &(tm, tn) in GEMM_TILES.iter() {
        let tiles = b.max(1) * ceil_div(m, tm) * ceil_div(n, tn);
        for s in [1u64, 2, 4, 8, 16] {
            if s > 1 && k / s < 256 {
                break;
            }
            let waves = ceil_div(tiles * s, sms) as f64;
            let compute = waves * 2.0 * (tm * tn) as f64 * ceil_div(k, s) as f64 / (per_sm * tile_efficiency(tm, tn));
            let reduce = if s > 1 { (s + 1) as f64 * (b.max(1) * m * n) as f64 * 4.0 / bw } else { 0.0 };
            if compute + reduce < best.time_s {
                best = GemmPlan { tile: (tm, tn), split_k: s, waves, time_s: compute + reduce };
            }
        }
    }
    best
}

/// Output tiles considered by [`gemm_plan`].
pub const GEMM_TILES: [(u64, u64); 6] = [(128, 128), (128, 64), (64, 128), (64, 64), (64, 32), (32, 64)];

/// One (batched) GEMM C[b][m,n] = A[b][m,k]·B[b][k,n] with wave quantization ([`gemm_plan`]). The operands are
/// `elem_bytes` wide; the output at least 16-bit (fp8 and fp4 GEMMs write bf16, as vLLM's and Transformer Engine's
/// scaled GEMMs do).
fn gemm(acc: &mut Acc, b: u64, m: u64, n: u64, k: u64, elem_bytes: f64, peak: f64, gpu: &GpuSpec) {
    let flops = 2.0 * b.max(1) as f64 * m as f64 * n as f64 * k as f64;
    let plan = gemm_plan(b, m, n, k, peak, gpu);
    let compute_s = if flops == 0.0 { 0.0 } else { plan.time_s };
    let bytes = b.max(1) as f64 * ((m * k + k * n) as f64 * elem_bytes + (m * n) as f64 * elem_bytes.max(2.0));
    acc.kernel(flops, compute_s, bytes, gpu.memory_bandwidth_bps());
    acc.waves += plan.waves;
    acc.tiles += (b.max(1) * ceil_div(m, plan.tile.0) * ceil_div(n, plan.tile.1) * plan.split_k) as f64;
    acc.split_k = acc.split_k.max(plan.split_k as f64);
    acc.tile_efficiency = acc.tile_efficiency.min(tile_efficiency(plan.tile.0, plan.tile.1));
}

/// Analytic time of `shape` in precision `dtype` on `gpu`: the operator's kernels added up by its class's step
/// ([`matrix_products`], [`flash_attention`], [`serving_attention`], `serving::moe`, [`vector::memory_bound`]), then
/// the roofline total with the launch overheads ([`cost`]).
///
/// Traffic per class, in units of N·e (N elements, e bytes per element), forward / backward, kernels in brackets:
/// layernorm, rmsnorm 2 [1] / 5 [2] (dx, then dγ/dβ re-reading x and dy); softmax, fused_softmax, gelu 2 [1] / 3 [1];
/// fillmask 2 + 1 byte of mask per element [1] both ways; swiglu 3 [1] / 5 [1]; rope 4 [1] / 4 [1] (q and k);
/// elementwise with I inputs I + 1 [1] both ways; embedding 2·T·H [1] / V·H + 3·T·H [2]; cross_entropy N·(3e + 4) [4] /
/// N·(4 + e) [2] (fp32 softmax kept between passes, Megatron's vocab-parallel kernel), with its third dim 1 (Megatron-DeepSpeed's fp32
/// upcast and unfused loss) N·(e + 36) [6] / N·(12 + e) [2]; optimizer 28 B per parameter [1]
/// (fused Adam: read fp32 p, m, v and 16-bit g, write p, m, v and the 16-bit copy); quantize 2 B + e per element [1] (e
/// the target precision's bytes), quantize_scale 2 B per element [1] (the amax read). GEMMs: forward one GEMM, backward
/// two (dX = dY·Wᵀ, dW = Xᵀ·dY); a forward `linear` in fp8, fp8_block or nvfp4 first quantizes its input
/// ([`vector::activation_quantization`]: 2, 1, 1 more kernels). Flash attention (causal): forward 2·B·A·L²·D FLOPs over
/// query tiles of 128 rows, backward 2.5× the FLOPs (FlashAttention-2's five GEMMs against two) at
/// [`FLASH_BACKWARD_RATE`] of the forward's FLOP rate, traffic 4·BLAD·e / 8·BLAD·e — the forward is
/// `attention_prefill`'s count with G = A and no KV-cache write. The serving classes (`attention_prefill`,
/// `attention_decode`, `moe`; forward only, the phase is ignored) are counted in `serving.rs`.
///
/// Errors: [`UnsupportedPrecision`] when a matrix product asks for a precision the GPU has no path for.
pub fn estimate(shape: &OpShape, dtype: Precision, gpu: &GpuSpec) -> Result<AnalyticCost, UnsupportedPrecision> {
    let e = dtype.bytes();
    let d = shape.dims;
    let mut acc = Acc { split_k: 1.0, tile_efficiency: 1.0, ..Acc::default() };
    let bwd = shape.phase == Phase::Bwd;
    let peak_used = match shape.class {
        OpClass::Linear | OpClass::Bmm => {
            let peak = matmul_peak(dtype, gpu)?;
            matrix_products(&mut acc, shape, dtype, peak, gpu);
            peak
        }
        OpClass::FlashAttention => {
            let peak = matmul_peak(dtype, gpu)?;
            flash_attention(&mut acc, &d, bwd, e, peak, gpu);
            peak
        }
        OpClass::AttentionPrefill | OpClass::AttentionDecode => serving_attention(&mut acc, shape, dtype, gpu)?,
        OpClass::Moe => {
            let peak = matmul_peak(dtype, gpu)?;
            serving::moe(&mut acc, &d, e, peak, gpu);
            peak
        }
        _ => {
            vector::memory_bound(&mut acc, shape.class, &d, bwd, e, gpu);
            gpu.peak_tflops.fp32 * 1e12
        }
    };
    Ok(cost(&acc, peak_used))
}

/// The tensor-core peak of `dtype` on `gpu`, FLOP/s (the datasheet's dense figure,
/// [`GpuSpec::peak_matmul_flops`]). Errors: [`UnsupportedPrecision`] (path `matrix`) where the datasheet has none.
fn matmul_peak(dtype: Precision, gpu: &GpuSpec) -> Result<f64, UnsupportedPrecision> {
    gpu.peak_matmul_flops(dtype).ok_or(UnsupportedPrecision { gpu: gpu.name.clone(), precision: dtype, path: "matrix" })
}

/// Adds the GEMMs of a `linear` or `bmm` operator (dims [B, M, N, K]) at `peak` FLOP/s: a linear layer's B·M rows
/// share one weight, so one GEMM of B·M rows; forward C = A·B (a forward linear in a scaled precision first
/// quantizes its input: [`vector::activation_quantization`]), backward dX[m,k] = dY[m,n]·Wᵀ[n,k] and
/// dW[k,n] = Xᵀ[k,m]·dY[m,n] (Megatron-LM's `LinearWithGradAccumulationAndAsyncCommunication.backward`).
fn matrix_products(acc: &mut Acc, shape: &OpShape, dtype: Precision, peak: f64, gpu: &GpuSpec) {
    let e = dtype.bytes();
    let d = shape.dims;
    let (mut b, mut m, n, k) = (d[0].max(1), d[1], d[2], d[3]);
    if shape.class == OpClass::Linear {
        // A linear layer over B·M rows shares one weight: one GEMM of B·M rows.
        (b, m) = (1, b * m);
    }
    if shape.phase == Phase::Bwd {
        gemm(acc, b, m, k, n, e, peak, gpu); // dX[m,k] = dY[m,n]·Wᵀ[n,k]
        gemm(acc, b, k, n, m, e, peak, gpu); // dW[k,n] = Xᵀ[k,m]·dY[m,n]
    } else {
        if shape.class == OpClass::Linear {
            vector::activation_quantization(acc, m, k, dtype, gpu);
        }
        gemm(acc, b, m, n, k, e, peak, gpu);
    }
}

/// Adds one causal flash-attention kernel, dims [B, L, A, D] (batch, sequence, heads, head dim), `e` bytes per
/// element, at `peak` FLOP/s: forward 2·B·A·L²·D FLOPs (causal: a 128-row query tile sees L/2 keys on average)
/// in waves of B·A·⌈L/128⌉ query tiles over the SMs, backward 2.5× the FLOPs at [`FLASH_BACKWARD_RATE`] of the
/// forward's rate (Dao 2023, FlashAttention-2: five GEMMs against two; Shah et al. 2024, Fig. 5 and 6); DRAM
/// traffic 4·B·L·A·D·e forward (q, k, v, o), 8·B·L·A·D·e backward.
fn flash_attention(acc: &mut Acc, d: &Dims, bwd: bool, e: f64, peak: f64, gpu: &GpuSpec) {
    let bw = gpu.memory_bandwidth_bps();
    let (b, l, a, dh) = (d[0] as f64, d[1], d[2] as f64, d[3] as f64);
    let sms = gpu.sm_count.max(1) as f64;
    let tiles = (d[0].max(1) * d[2].max(1) * ceil_div(l, 128)) as f64;
    let waves = (tiles / sms).ceil();
    let factor = if bwd { 2.5 } else { 1.0 };
    let l = l as f64;
    // Causal: on average a 128-row query tile sees half the keys.
    let flops = factor * 2.0 * b * a * l * l * dh;
    let tile_flops = factor * 4.0 * 128.0 * (l / 2.0) * dh;
    let rate = if bwd { FLASH_BACKWARD_RATE } else { 1.0 };
    let compute_s = waves * tile_flops / (rate * peak / sms);
    let bytes = (if bwd { 8.0 } else { 4.0 }) * b * l * a * dh * e;
    acc.kernel(flops, compute_s, bytes, bw);
    acc.waves += waves;
}

/// Adds a serving attention kernel (`attention_prefill` or `attention_decode`, counted in `serving.rs`) and returns
/// the peak it ran at, FLOP/s: `dtype` is the KV cache's, but the attention computes in 16 bits
/// ([`serving::attention_peak`]). Errors: [`UnsupportedPrecision`] where the GPU has no tensor-core path for the
/// cache's precision or for bf16.
fn serving_attention(
    acc: &mut Acc,
    shape: &OpShape,
    dtype: Precision,
    gpu: &GpuSpec,
) -> Result<f64, UnsupportedPrecision> {
    // `dtype` is the KV cache's; the attention itself computes in 16 bits (aiconfigurator's `attn_dtype`
    // is bfloat16 in every row, and its fp8-KV prefill is no faster than bf16). A cache precision the GPU's
    // tensor cores have no path for is still refused, as for every matrix product (an nvfp4 cache on H100).
    matmul_peak(dtype, gpu)?;
    let peak = serving::attention_peak(gpu).ok_or(UnsupportedPrecision {
        gpu: gpu.name.clone(),
        precision: Precision::Bf16,
        path: "matrix",
    })?;
    let (d, e) = (shape.dims, dtype.bytes());
    if shape.class == OpClass::AttentionPrefill {
        serving::attention_prefill(acc, &d, e, peak, gpu);
    } else {
        serving::attention_decode(acc, &d, e, peak, gpu);
    }
    Ok(peak)
}

/// The estimate from the kernels `acc` added up: time = kernels · [`LAUNCH_OVERHEAD_US`] + Σ max(compute, memory),
/// µs, with the binding term (launch when the overheads exceed the kernels' time, else the larger of the summed
/// compute and memory terms) and `peak_used`, the FLOP/s of the compute term.
fn cost(acc: &Acc, peak_used: f64) -> AnalyticCost {
    let launch_us = acc.kernels as f64 * LAUNCH_OVERHEAD_US;
    let compute_us = acc.compute_s * 1e6;
    let memory_us = acc.memory_s * 1e6;
    let body_us = acc.time_s * 1e6;
    let bound = if launch_us > body_us {
        Bound::Launch
    } else if compute_us >= memory_us {
        Bound::Compute
    } else {
        Bound::Memory
    };
    AnalyticCost {
        time_us: launch_us + body_us,
        flops: acc.flops,
        bytes: acc.bytes,
        compute_us,
        memory_us,
        launch_us,
        kernels: acc.kernels,
        waves: acc.waves,
        tiles: acc.tiles,
        split_k: acc.split_k,
        tile_efficiency: acc.tile_efficiency,
        peak_flops: peak_used,
        bound,
    }
}

#[cfg(test)]
mod tests;

//! The memory-bound operator classes of the roofline: normalizations, activations, masks, rotary embeddings,
//! element-wise ops, embeddings, cross-entropy, the optimizer step and quantization kernels, each one or a few
//! vector kernels whose time is max(FLOPs / fp32 vector peak, DRAM bytes / bandwidth) (the traffic table is
//! [`super::estimate`]'s).

use super::Acc;
use crate::hw::{GpuSpec, Precision};
use crate::op::{Dims, OpClass};

/// Adds the vector kernels of a memory-bound operator `class` (dims [N rows, width, …] as
/// [`super::estimate`] lists them), forward or backward (`bwd`), `e` bytes per element: the per-class traffic of
/// [`super::estimate`]'s table, reconstructed [rec] from PyTorch's and Megatron-LM's kernels. The matrix and
/// attention classes have their own steps in [`super::estimate`] and add nothing here.
pub(super) fn memory_bound(acc: &mut Acc, class: OpClass, d: &Dims, bwd: bool, e: f64, gpu: &GpuSpec) {
    match class {
        OpClass::LayerNorm | OpClass::RmsNorm => {
            let n = (d[0] * d[1]) as f64;
            if bwd {
                vector(acc, n, 8.0, 3.0 * n * e, gpu);
                vector(acc, n, 4.0, 2.0 * n * e, gpu);
            } else {
                vector(acc, n, 8.0, 2.0 * n * e, gpu);
            }
        }
        OpClass::Softmax | OpClass::FusedSoftmax | OpClass::Gelu => {
            let n = (d[0] * d[1]) as f64;
            let f = if class == OpClass::Gelu { 12.0 } else { 6.0 };
            vector(acc, n, f, if bwd { 3.0 } else { 2.0 } * n * e, gpu);
        }
        OpClass::FillMask => {
            let n = (d[0] * d[1]) as f64;
            vector(acc, n, 1.0, 2.0 * n * e + n, gpu);
        }
        OpClass::Swiglu => {
            let n = (d[0] * d[1]) as f64;
            vector(acc, n, 8.0, if bwd { 5.0 } else { 3.0 } * n * e, gpu);
        }
        OpClass::Rope => {
            let n = (d[0] * d[1]) as f64;
            vector(acc, 2.0 * n, 3.0, 4.0 * n * e, gpu);
        }
        OpClass::Elementwise => {
            let n = (d[0] * d[1]) as f64;
            let inputs = if d[2] == 0 { 2.0 } else { d[2] as f64 };
            // Forward reads every input and writes one output; backward reads the output gradient (and the
            // inputs for non-linear ops, ignored) and writes one gradient per input.
            vector(acc, n, 1.0, (inputs + 1.0) * n * e, gpu);
        }
        OpClass::Embedding => {
            let (t, v, h) = (d[0] as f64, d[1] as f64, d[2] as f64);
            if bwd {
                vector(acc, v * h, 0.0, v * h * e, gpu);
                vector(acc, t * h, 1.0, 3.0 * t * h * e, gpu);
            } else {
                vector(acc, t * h, 0.0, 2.0 * t * h * e, gpu);
            }
        }
        // The third slot, 1 only from the training decomposition under `deepspeed` (`crate::op`'s table).
        OpClass::CrossEntropy if d[2] == 1 => {
            // Megatron-DeepSpeed's loss (`GPTModelPipe`: the `float16_to_fp32` stage after the LM head, then
            // `_VocabParallelCrossEntropy` in `megatron/core/tensor_parallel/cross_entropy.py`) on N = T·V logits:
            // forward the upcast (read e, write 4 B), `torch.max` (read 4), the out-of-place subtraction of the
            // max (read 4, write 4), `torch.exp` (read 4, write 4), `.sum` (read 4) and `exp_logits.div_` (read 4,
            // write 4), the softmax kept for backward: 6 kernels, N·(e + 36) B. Backward `grad_input.mul_`
            // (read 4, write 4) and the upcast's backward cast to 16 bits (read 4, write e): N·(12 + e) B.
            let n = (d[0] * d[1]) as f64;
            if bwd {
                vector(acc, n, 1.0, 8.0 * n, gpu);
                vector(acc, n, 0.0, 4.0 * n + n * e, gpu);
            } else {
                vector(acc, n, 0.0, n * e + 4.0 * n, gpu);
                vector(acc, n, 1.0, 4.0 * n, gpu);
                vector(acc, n, 1.0, 8.0 * n, gpu);
                vector(acc, n, 4.0, 8.0 * n, gpu);
                vector(acc, n, 1.0, 4.0 * n, gpu);
                vector(acc, n, 1.0, 8.0 * n, gpu);
            }
        }
        OpClass::CrossEntropy => {
            let n = (d[0] * d[1]) as f64;
            if bwd {
                vector(acc, n, 1.0, n * 4.0, gpu);
                vector(acc, n, 1.0, n * e, gpu);
            } else {
                // max, subtract + exp (writes the fp32 softmax), sum, log: four passes.
                vector(acc, n, 1.0, n * e, gpu);
                vector(acc, n, 4.0, n * e + n * 4.0, gpu);
                vector(acc, n, 1.0, n * e, gpu);
                acc.kernels += 1;
            }
        }
        OpClass::Optimizer => {
            let p = d[0] as f64;
            vector(acc, p, 12.0, 28.0 * p, gpu);
        }
        OpClass::Quantize => {
            // Read the 16-bit element, scale, write it in `dtype` (fp8: 1 B).
            let n = (d[0] * d[1]) as f64;
            vector(acc, n, 2.0, 2.0 * n + n * e, gpu);
        }
        OpClass::QuantizeScale => {
            // The absolute maximum of the 16-bit tensor: one read.
            let n = (d[0] * d[1]) as f64;
            vector(acc, n, 1.0, 2.0 * n, gpu);
        }
        OpClass::Linear
        | OpClass::Bmm
        | OpClass::FlashAttention
        | OpClass::AttentionPrefill
        | OpClass::AttentionDecode
        | OpClass::Moe => {}
    }
}

/// Dynamic quantization of a linear layer's 16-bit input X[rows, k] before a low-precision GEMM, as vLLM runs it
/// (`vllm/_custom_ops.py` `scaled_fp8_quant`, `per_token_group_quant_fp8`, `scaled_fp4_quant`):
/// - `fp8` (per-tensor scale): two kernels (`csrc/quantization/fp8/common.cu`): `segmented_max_reduction` reads X
///   (2 B per element) for the absolute maximum, `scaled_fp8_quant_kernel` reads X again and writes 1 B per element.
/// - `fp8_block` (one scale per 128 elements of a row): one kernel reading X and writing 1 B per element and 4 B
///   per 128.
/// - `nvfp4` (one scale per 16 elements): one kernel reading X and writing 0.5625 B per element.
///
/// Other precisions need none.
pub(super) fn activation_quantization(acc: &mut Acc, rows: u64, k: u64, dtype: Precision, gpu: &GpuSpec) {
    let n = (rows * k) as f64;
    match dtype {
        Precision::Fp8 => {
            vector(acc, n, 1.0, 2.0 * n, gpu);
            vector(acc, n, 2.0, 3.0 * n, gpu);
        }
        Precision::Fp8Block => vector(acc, n, 3.0, 2.0 * n + n + n / 128.0 * 4.0, gpu),
        Precision::Nvfp4 => vector(acc, n, 3.0, 2.0 * n + n * Precision::Nvfp4.bytes(), gpu),
        _ => {}
    }
}

/// Element-wise style kernel: `elems` elements, `flops_per_elem`, `bytes` of traffic, on the vector fp32 peak.
fn vector(acc: &mut Acc, elems: f64, flops_per_elem: f64, bytes: f64, gpu: &GpuSpec) {
    let flops = elems * flops_per_elem;
    let peak = gpu.peak_tflops.fp32 * 1e12;
    acc.kernel(flops, flops / peak, bytes, gpu.memory_bandwidth_bps());
}

//! Low-precision training recipes: how Transformer Engine scales the fp8 (or fp4) GEMMs of a layer, and in which
//! precision the sharded parameters are gathered — what each changes in the time.
//!
//! - [`Fp8Recipe`] (Megatron-LM `--fp8-recipe`, `arguments.py` `_add_transformer_engine_args`: choices
//!   `tensorwise`, `delayed`, `mxfp8`, `blockwise`, default `delayed`; `megatron/core/fp8_utils.py` maps them onto
//!   Transformer Engine's `transformer_engine/common/recipe/__init__.py` recipes `DelayedScaling`,
//!   `Float8CurrentScaling`, `Float8BlockScaling`, `MXFP8BlockScaling`).
//! - `fp8_param_gather` (Megatron-LM `--fp8-param-gather`; torchao's `enable_fsdp_float8_all_gather` under
//!   torchtitan): the distributed optimizer's (or FSDP's) parameter all-gathers move the fp8 copy of the weights,
//!   1 byte per parameter, instead of the 16-bit one ([`TrainingConfig::param_gather_bytes`]; the embedding and the LM head stay 16-bit).
//! - `precision: nvfp4` (alias `fp4`; Transformer Engine's `NVFP4BlockScaling`, NeMo / Megatron-Bridge's nvfp4
//!   recipes on Blackwell): the layers' GEMMs at the GPU's fp4 peak, everything else in bf16.
//!
//! Delayed scaling is the baseline the calibrated constants were fitted on ([`crate::cost::Efficiency`]): its
//! casts are fused into the neighbouring kernels (the scale is known before the tensor is produced) and its
//! once-per-step amax reduction is inside the fitted per-kernel and per-collective costs. The other recipes are
//! modelled by what they add to it or change in it, never by a constant fitted to a source.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::config::{bad, ConfigError, TrainingConfig};
use super::layout::Layout;
use super::operators::{collective, op, OpName, StageOp, Work};
use crate::hw::{GpuSpec, Precision};
use crate::op::{Collective, OpClass, OpShape, Phase};

/// How Transformer Engine scales an fp8 GEMM's operands (`fp8_recipe` of a training request's `parallelism`;
/// Megatron-LM `--fp8-recipe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Fp8Recipe {
    /// `DelayedScaling` (Megatron's default): one per-tensor scale from the amax history of earlier iterations
    /// (`amax_history_len` 1024, `amax_compute_algo` "max"), so the cast can be fused into the kernel that
    /// produces the tensor; the amaxes are all-reduced once per autocast region (`reduce_amax`). The calibrated
    /// baseline: nothing is added.
    #[default]
    Delayed,
    /// `Float8CurrentScaling` (per-tensor current scaling): the scale comes from the tensor itself, so each GEMM
    /// input is read once more for its absolute maximum before the cast (forward: the input X[M,K]; backward: the
    /// output gradient dY[M,N]) — one extra kernel per operand ([`OpName::Fp8Amax`]); with sequence parallelism
    /// the column-parallel layers' inputs (QKV and FC1) and the row-parallel layers' output gradients (projection
    /// and FC2) reduce that amax over the tensor-parallel group (TE `module/linear.py` /
    /// `layernorm_linear.py` `_customize_quantizers_float8_current_scaling`: `with_amax_reduction = True`,
    /// `amax_reduction_group = self.tp_group`), one 4-byte all-reduce each ([`OpName::Fp8AmaxAllreduce`]).
    Tensorwise,
    /// `Float8BlockScaling` (DeepSeek-V3's recipe): fp32 scales per 1×128 block of activations and gradients and per
    /// 128×128 block of weights; the GEMMs run through cuBLASLt's block-scaled fp8 path with split accumulation
    /// (`use_split_accumulator=True` for all three GEMMs). Timed as the `fp8_block` GEMMs the learned models
    /// measured (aiconfigurator's block-scaled GEMMs, whose time includes the per-group activation quantization);
    /// analytic elsewhere (its scale bytes and quantization kernel, [`crate::cost`]'s roofline). Hopper and later.
    Blockwise,
    /// `MXFP8BlockScaling` (TE's default on Blackwell, `get_default_fp8_recipe`): E4M3 elements with one E8M0 scale
    /// per 32 consecutive values, consumed natively by Blackwell's block-scaled tensor cores at the fp8 rate; the
    /// quantization writes the rowwise and the columnwise copy, each with its scales: 1/32 byte of scale per
    /// element and copy beyond per-tensor fp8 ([`OpName::Fp8Amax`] counts them as one pass writing them). Needs
    /// compute capability 10.0 or later (TE `check_mxfp8_support`).
    Mxfp8,
}

impl Fp8Recipe {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Fp8Recipe::Delayed => "delayed",
            Fp8Recipe::Tensorwise => "tensorwise",
            Fp8Recipe::Blockwise => "blockwise",
            Fp8Recipe::Mxfp8 => "mxfp8",
        }
    }

    /// The precision the layers' GEMMs are timed in: `fp8_block` for blockwise scaling, else `fp8`.
    pub fn gemm_precision(self) -> Precision {
        match self {
            Fp8Recipe::Blockwise => Precision::Fp8Block,
            _ => Precision::Fp8,
        }
    }

    /// Bytes of scale per quantized element beyond a per-tensor scale: MXFP8's one E8M0 byte per 32 elements in
    /// each of the two copies (rowwise and columnwise) = 2/32; blockwise's fp32 scales are inside the learned
    /// `fp8_block` GEMM; 0 for the per-tensor recipes.
    pub fn scale_bytes_per_element(self) -> f64 {
        match self {
            Fp8Recipe::Mxfp8 => 2.0 / 32.0,
            _ => 0.0,
        }
    }

    /// Bytes per parameter of an fp8 parameter all-gather: 1, plus MXFP8's scale byte per 32 elements (one copy is
    /// gathered) and blockwise's fp32 scale per 128×128 weight block.
    pub fn param_bytes(self) -> f64 {
        match self {
            Fp8Recipe::Mxfp8 => 1.0 + 1.0 / 32.0,
            Fp8Recipe::Blockwise => 1.0 + 4.0 / (128.0 * 128.0),
            _ => 1.0,
        }
    }
}

/// Bytes per element of one quantized copy (one usage: rowwise, or columnwise) of an activation or gradient as
/// Transformer Engine all-gathers it: the E4M3/E5M2 byte plus the scale-inverses that travel with it —
/// MXFP8's E8M0 byte per 32 elements (`_all_gather_mxfp8` gathers `_rowwise_scale_inv` beside `_rowwise_data`),
/// blockwise's fp32 scale per 1×128 block, NVFP4's half byte (two E2M1 values per byte) plus its E4M3 scale per
/// 16 elements (`_all_gather_nvfp4`); the per-tensor recipes' single scale is not gathered (`_all_gather_fp8`
/// reuses the local `_scale_inv`). `None` for a precision Transformer Engine does not quantize (16-bit, fp32).
/// Source: Transformer Engine `transformer_engine/pytorch/distributed.py` `gather_along_first_dim` and its
/// per-format helpers.
pub fn quantized_copy_bytes(precision: Precision, recipe: Fp8Recipe) -> Option<f64> {
    match precision {
        Precision::Fp8 => Some(match recipe {
            Fp8Recipe::Delayed | Fp8Recipe::Tensorwise => 1.0,
            Fp8Recipe::Mxfp8 => 1.0 + 1.0 / 32.0,
            Fp8Recipe::Blockwise => 1.0 + 4.0 / 128.0,
        }),
        Precision::Nvfp4 => Some(0.5 + 1.0 / 16.0),
        _ => None,
    }
}

/// Refuses what `cfg`'s precision and recipe need and `gpu` lacks: fp8 training without fp8 tensor cores and
/// nvfp4 training without fp4 ones (field `precision`); `mxfp8` before Blackwell (compute capability < 10) and
/// `blockwise` before Hopper (field `parallelism.fp8_recipe`; Transformer Engine's `check_mxfp8_support` and
/// `check_fp8_block_scaling_support`).
pub fn check_gpu(cfg: &TrainingConfig, gpu: &GpuSpec) -> Result<(), ConfigError> {
    let name = &gpu.name;
    match cfg.precision {
        Precision::Fp8 if gpu.peak_matmul_flops(Precision::Fp8).is_none() => {
            return Err(bad(
                "precision",
                format!("{name} has no fp8 tensor cores (its peak_tflops.fp8 is null): fp8 training needs them"),
            ))
        }
        Precision::Nvfp4 if gpu.peak_matmul_flops(Precision::Nvfp4).is_none() => {
            return Err(bad(
                "precision",
                format!(
                    "{name} has no fp4 tensor cores (its peak_tflops.fp4 is null): nvfp4 training (Transformer \
                     Engine's NVFP4BlockScaling) needs a Blackwell GPU"
                ),
            ))
        }
        _ => {}
    }
    let major = gpu.compute_major();
    let blackwell = major.is_some_and(|m| m >= 10) || gpu.generation() == "blackwell";
    let hopper_or_later = blackwell || gpu.hopper_or_later();
    match cfg.fp8_recipe {
        Fp8Recipe::Mxfp8 if !blackwell => Err(bad(
            "parallelism.fp8_recipe",
            format!(
                "mxfp8 needs Blackwell's block-scaled tensor cores (compute capability 10.0 or later; {name} is {}): \
                 use delayed, tensorwise or blockwise",
                gpu.compute_capability.as_deref().unwrap_or("older")
            ),
        )),
        Fp8Recipe::Blockwise if !hopper_or_later => Err(bad(
            "parallelism.fp8_recipe",
            format!("blockwise fp8 scaling needs Hopper or later (compute capability 9.0+); {name} is not"),
        )),
        _ => Ok(()),
    }
}

/// Validates the recipe options of a request against its precision: `fp8_recipe` and `fp8_param_gather` need
/// `precision` `fp8`; `fp8_param_gather` needs sharded parameters to gather (the distributed optimizer, or ZeRO-3 /
/// FSDP); `precision` `fp8_block` is refused for training (blockwise scaling is `fp8_recipe: blockwise`).
pub fn validate(
    precision: Precision,
    recipe: Option<Fp8Recipe>,
    param_gather: bool,
    sharded: bool,
) -> Result<Fp8Recipe, ConfigError> {
    if precision == Precision::Fp8Block {
        return Err(bad(
            "precision",
            "fp8_block is a serving precision: train with precision fp8 and parallelism.fp8_recipe blockwise",
        ));
    }
    if let Some(r) = recipe {
        if precision != Precision::Fp8 {
            return Err(bad(
                "parallelism.fp8_recipe",
                format!(
                    "fp8_recipe {} scales fp8 GEMMs: it needs precision fp8, not {precision} (nvfp4 training runs \
                     Transformer Engine's NVFP4BlockScaling)",
                    r.as_str()
                ),
            ));
        }
    }
    if param_gather && precision != Precision::Fp8 {
        return Err(bad(
            "parallelism.fp8_param_gather",
            format!("gathers fp8 weights: it needs precision fp8, not {precision}"),
        ));
    }
    if param_gather && !sharded {
        return Err(bad(
            "parallelism.fp8_param_gather",
            "there is no parameter all-gather to run in fp8: it needs distributed_optimizer or zero_stage 3 (FSDP)",
        ));
    }
    Ok(recipe.unwrap_or_default())
}

impl TrainingConfig {
    /// The precision the transformer layers' GEMMs run in: the recipe's under fp8 ([`Fp8Recipe::gemm_precision`]),
    /// else the training precision (nvfp4 included).
    pub fn gemm_precision(&self) -> Precision {
        match self.precision {
            Precision::Fp8 => self.fp8_recipe.gemm_precision(),
            p => p,
        }
    }

    /// Bytes a parameter all-gather (ZeRO-1/2 and distributed optimizer after the step, ZeRO-3 / FSDP before each
    /// pass) moves for `params` parameters of which `unquantized` are the embedding, the LM head and the final norm:
    /// with `fp8_param_gather` the layers' weights as their fp8 copy ([`Fp8Recipe::param_bytes`] each) and those
    /// `unquantized` ones in 16 bits (Transformer Engine quantizes only its modules' GEMM weights: Megatron-Core's
    /// `fp8_model_init` context wraps the transformer layers, the embedding and the output layer stay bf16 —
    /// Megatron-LM `megatron/core/models/gpt/gpt_model.py`; for Llama 3 8B they are 13 % of the parameters); without
    /// it every parameter in 16 bits ([`super::operators::comm_elem_bytes`]). The layers' norm weights (≈ 2·d per
    /// layer, < 0.01 %) are counted at the fp8 size.
    pub fn param_gather_bytes(&self, params: f64, unquantized: f64) -> f64 {
        let e16 = super::operators::comm_elem_bytes(self);
        if self.fp8_param_gather {
            let unquantized = unquantized.clamp(0.0, params);
            (params - unquantized) * self.fp8_recipe.param_bytes() + unquantized * e16
        } else {
            params * e16
        }
    }

    /// Bytes per element of a layer's sequence-parallel all-gather in `phase`: what Transformer Engine moves when
    /// an fp8 or nvfp4 recipe is active under Megatron-Core (Megatron-LM, NeMo / Megatron-Bridge), else the 16-bit
    /// activation ([`super::operators::comm_elem_bytes`]; also under fp8 for the other frameworks, whose
    /// sequence-parallel gathers perfcast does not model as quantized).
    ///
    /// - Forward, the input of a column-parallel layer (QKV, the MLP's up-projection): `_LayerNormLinear.forward`
    ///   (`transformer_engine/pytorch/module/layernorm_linear.py`; `_LayerNormMLP` the same) quantizes the norm
    ///   output first (fused into the norm kernel) and gathers the quantized tensor —
    ///   `gather_along_first_dim(ln_out, tp_group, quantizer=input_quantizer)` after
    ///   `quantizer.set_usage(rowwise=True, columnwise=False)`, or with `tp_comm_overlap`
    ///   `fill_userbuffers_buffer_for_all_gather(ub_obj, ln_out, quantizer, tp_group)`: one rowwise copy
    ///   ([`quantized_copy_bytes`]). Under current scaling the amax is all-reduced over the tensor-parallel
    ///   group first ([`Fp8Recipe::Tensorwise`]) so every rank quantizes with the same scale, and the gather is
    ///   still 1 byte. Transformer Engine 1.x already gathered the fp8 `ln_out` of delayed scaling.
    /// - Backward, the output gradient of a row-parallel layer (the attention projection, the down-projection):
    ///   `TransformerEngineBaseModule.grad_output_preprocess` (`module/base.py`) gathers it with the gradient's
    ///   quantizer, whose usage `_Linear.backward` sets to rowwise (dgrad) and columnwise (wgrad). Per-tensor
    ///   fp8 gathers the rowwise copy and transposes it locally (`_all_gather_fp8`), 1 byte; the block-scaled
    ///   formats (MXFP8, blockwise, NVFP4) gather both copies with their scales, 2 × [`quantized_copy_bytes`] —
    ///   unless `tp_comm_overlap` is on: "Userbuffers only supports communication for one tensor usage at a
    ///   time", so the gather moves the rowwise copy only.
    ///
    /// The reduce-scatters (of the row-parallel outputs forward, of the column-parallel input gradients backward)
    /// stay 16-bit: they sum partial results (`reduce_scatter_along_first_dim` on the GEMM's bf16 output), as does
    /// the backward re-gather of a column-parallel layer's input for its weight gradient, which perfcast does not
    /// charge (it hides behind the input-gradient GEMM).
    pub fn sp_gather_elem_bytes(&self, phase: Phase) -> f64 {
        let e16 = super::operators::comm_elem_bytes(self);
        if !self.framework.framework.is_megatron_core() {
            return e16;
        }
        let Some(copy) = quantized_copy_bytes(self.precision, self.fp8_recipe) else { return e16 };
        let per_tensor =
            self.precision == Precision::Fp8 && matches!(self.fp8_recipe, Fp8Recipe::Delayed | Fp8Recipe::Tensorwise);
        let copies = if phase == Phase::Bwd && !per_tensor && !self.tp_overlap() { 2.0 } else { 1.0 };
        copy * copies
    }
}

/// The recipe's operators beyond delayed scaling for the layer operators `ops` (current scaling's amax passes and
/// tensor-parallel amax all-reduces, MXFP8's scale writes), one per fp8 `linear` operator and pass, with its calls
/// and recomputation flag. Empty for delayed and blockwise scaling and for other precisions.
///
/// Each amax pass over a quantized operand of M×K elements is a `quantize_scale` operator of [M, K] (one read of
/// the 16-bit tensor, 2 B per element; the learned TensorRT-LLM `computescale` kernel where the bundle has it).
/// MXFP8's scales add 2/32 B per element of the operand (one E8M0 byte per 32 values, rowwise and columnwise
/// copies): timed as a `quantize_scale` over [M, K/32], whose 2-byte read stands for those bytes.
pub fn scaling_ops(cfg: &TrainingConfig, layout: &Layout, ops: &[StageOp]) -> Vec<StageOp> {
    if cfg.precision != Precision::Fp8 {
        return Vec::new();
    }
    let recipe = cfg.fp8_recipe;
    if matches!(recipe, Fp8Recipe::Delayed | Fp8Recipe::Blockwise) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for o in ops {
        let Work::Compute { shape, dtype: Precision::Fp8 } = o.work else { continue };
        if shape.class != OpClass::Linear {
            continue;
        }
        let [b, m, n, k, _] = shape.dims;
        let rows = b.max(1) * m;
        // The operand this pass quantizes: forward the input X[M,K], backward the output gradient dY[M,N].
        let width = if o.phase == Phase::Fwd { k } else { n };
        let dims = match recipe {
            Fp8Recipe::Tensorwise => [rows, width],
            _ => [rows, (width / 32).max(1)],
        };
        let work =
            Work::Compute { shape: OpShape::new(OpClass::QuantizeScale, Phase::Fwd, &dims), dtype: Precision::Fp8 };
        let mut amax = op(OpName::Fp8Amax, o.phase, o.calls, work, vec![rows, width]);
        amax.recompute = o.recompute;
        out.push(amax);
        let reduced = match o.phase {
            Phase::Fwd => matches!(o.name, OpName::Linear1 | OpName::Linear3),
            Phase::Bwd => matches!(o.name, OpName::Linear2 | OpName::Linear4),
        };
        if recipe == Fp8Recipe::Tensorwise && cfg.sp() && reduced {
            let tp = layout.tp_group;
            let mut ar = collective(
                OpName::Fp8AmaxAllreduce,
                o.phase,
                o.calls,
                Collective::AllReduce,
                4.0,
                tp,
                layout.active_per_node,
                vec![1, tp.nodes as u64, tp.ranks_per_node as u64],
            );
            ar.recompute = o.recompute;
            out.push(ar);
        }
    }
    out
}

#[cfg(test)]
#[path = "recipe_tests.rs"]
mod tests;

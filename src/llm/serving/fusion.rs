//! Which RMSNorms TensorRT-LLM's PyTorch backend runs inside its tensor-parallel all-reduces, per model family, and
//! what such a fused norm costs: the all-reduce kernel applies the residual add and the norm
//! (`AllReduceParams(fusion_op=AllReduceFusionOp.RESIDUAL_RMS_NORM, residual=…, norm_weight=…)` passed to
//! `tensorrt_llm._torch.distributed.AllReduce`; the C++ op `cpp/tensorrt_llm/thop/allreduceOp.cpp` with the kernels
//! of `kernels/communicationKernels/allReduceFusionKernels.h`), so the norm launches no kernel of its own. Which
//! norms are fused is each model file's decoder layer's decision, read from `tensorrt_llm/_torch/models/`
//! (NVIDIA/TensorRT-LLM):
//!
//! - Llama, `modeling_llama.py` `LlamaDecoderLayer.__init__`: before the MLP (`post_attention_layernorm`)
//!   `PRE_MLP_FUSION = has_tp() and not enable_attention_dp and enable_fusion`, after it (the next layer's
//!   `input_layernorm`; the last layer's: the final norm) `POST_MLP_FUSION = has_tp() and enable_fusion`, with
//!   `enable_fusion &= hidden_size > 4096`.
//! - gpt-oss, `modeling_gpt_oss.py` `TransformerBlock.forward_tp` (`is_tp = has_tp() and not enable_attention_dp`):
//!   both, always (`post_attention_layernorm`, then `next_layer_layernorm`, the last layer's `model.norm`).
//! - Qwen3 MoE, `modeling_qwen3_moe.py`, the decoder layer's `__init__`: `PRE_MOE_FUSION = enable_fusion and
//!   has_tp`, `POST_MOE_FUSION = PRE_MOE_FUSION and not has_pp`.
//! - Qwen3 dense, `modeling_qwen3.py` `Qwen3DecoderLayer.forward`: neither — `input_layernorm(hidden_states,
//!   residual)` and `post_attention_layernorm(hidden_states, residual)` run alone and the all-reduces stay inside
//!   `o_proj` and the MLP.
//! - DeepSeek-V3/R1 (every MLA model), `modeling_deepseekv3.py` `DeepseekV3DecoderLayer.__init__`, `forward_MoE`,
//!   `forward_mlp`: MoE layers `PRE_MOE_FUSION = enable_fusion and has_tp`, `POST_MOE_FUSION = PRE_MOE_FUSION`;
//!   dense layers `PRE_MLP_FUSION = enable_fusion and has_mlp_tp and is_nvfp4`, `POST_MLP_FUSION = enable_fusion
//!   and has_mlp_tp`.
//!
//! `enable_fusion` is on by default (`TRTLLM_{LLAMA,QWEN3,DEEPSEEK}_EAGER_FUSION_DISABLED` = 0) and off with
//! attention data parallelism (no tensor-parallel all-reduce to fuse into). The first layer's input norm always
//! runs alone (`residual is None`: `hidden_states = self.input_layernorm(hidden_states)`). Families whose decoder
//! layer was not read (Mistral, Mixtral, Qwen2, MiniMax, …) keep their norms: a fusion is counted only where the
//! model file shows it. `trtllm-build` engines (`engine_options.trtllm_backend: tensorrt`) fuse nothing by default
//! (`PluginConfig.reduce_fusion` false, `tensorrt_llm/plugin/plugin.py`).
//!
//! GPU time: the fused kernel still reads the residual and writes the updated residual and the normed output, the
//! traffic of the norm kernel it replaces; it is charged the norm's body (the RMSNorm operator's time without its
//! per-kernel cost `kernel_us`) on top of the all-reduce's own time, and no launch ([`fused_charge`]).
//! aiconfigurator's TensorRT-LLM all-reduce tables (`<gpu>/trtllm/custom_allreduce_perf`) time only the plain
//! all-reduce (`op_name` `all_reduce`), so there is no measured fused time to use instead.

use super::request::{Engine, TrtllmBackend};
use super::validate::ServingConfig;
use crate::hw::Precision;
use crate::llm::config::Norm;
use crate::llm::operators::OpName;

/// The TensorRT-LLM decoder layer a model runs as (the table in the module doc), from its MLA latents and its name
/// (the catalog name or the Hugging Face `architectures` entry, as TensorRT-LLM's `register_auto_model` dispatches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrtllmLayer {
    /// `LlamaDecoderLayer` (names containing "llama").
    Llama,
    /// gpt-oss's `TransformerBlock` (names containing "gpt-oss" / "GptOss").
    GptOss,
    /// Qwen3 MoE's decoder layer (`modeling_qwen3_moe.py`; a Qwen3 name with experts).
    Qwen3Moe,
    /// `Qwen3DecoderLayer` (a dense Qwen3 name).
    Qwen3,
    /// `DeepseekV3DecoderLayer`: every model with MLA latents (DeepSeek-V3/R1, Kimi-K2, GLM-5).
    DeepseekV3,
    /// A decoder layer not read here: no fusion counted.
    Other,
}

impl TrtllmLayer {
    /// The family of `cfg`'s model.
    pub fn of(cfg: &ServingConfig) -> TrtllmLayer {
        let m = &cfg.model;
        let name: String = m.name.to_ascii_lowercase().chars().filter(|c| c.is_ascii_alphanumeric()).collect();
        if m.mla.is_some() {
            TrtllmLayer::DeepseekV3
        } else if name.contains("gptoss") {
            TrtllmLayer::GptOss
        } else if name.contains("qwen3") && m.moe.is_some() {
            TrtllmLayer::Qwen3Moe
        } else if name.contains("qwen3") {
            TrtllmLayer::Qwen3
        } else if name.contains("llama") {
            TrtllmLayer::Llama
        } else {
            TrtllmLayer::Other
        }
    }
}

/// Which of a layer's two norms ride an all-reduce: `pre` the post-attention norm (in the all-reduce after
/// attention), `post` the next layer's input norm (in the all-reduce after the MLP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayerFusion {
    /// The post-attention RMSNorm runs inside the all-reduce after attention (TensorRT-LLM's `PRE_MLP_FUSION` /
    /// `PRE_MOE_FUSION`).
    pub pre: bool,
    /// The next layer's input RMSNorm (the last layer's: the final norm) runs inside the all-reduce after the MLP or
    /// MoE (`POST_MLP_FUSION` / `POST_MOE_FUSION`).
    pub post: bool,
}

/// The fusions of `cfg`'s dense layers and MoE layers (module doc): none unless TensorRT-LLM's PyTorch backend runs
/// a tensor-parallel RMSNorm model without attention data parallelism.
pub fn allreduce_fusion(cfg: &ServingConfig) -> (LayerFusion, LayerFusion) {
    let none = LayerFusion::default();
    let applies = cfg.engine == Engine::Trtllm
        && cfg.settings.trtllm_backend == TrtllmBackend::Pytorch
        && cfg.attn_tp() > 1
        && cfg.dp() == 1
        && cfg.model.norm == Norm::Rmsnorm;
    if !applies {
        return (none, none);
    }
    let both = LayerFusion { pre: true, post: true };
    match TrtllmLayer::of(cfg) {
        TrtllmLayer::Llama if cfg.model.hidden > 4096 => (both, both),
        TrtllmLayer::GptOss => (both, both),
        TrtllmLayer::Qwen3Moe => (none, LayerFusion { pre: true, post: cfg.pp == 1 }),
        TrtllmLayer::DeepseekV3 => (LayerFusion { pre: cfg.precision == Precision::Nvfp4, post: true }, both),
        _ => (none, none),
    }
}

/// The norms of one pipeline stage holding `dense` dense and `moe` MoE layers (MoE layers after the dense ones),
/// under the fusions `(dense_f, moe_f)`: (norms over the step's tokens that run alone, norms fused into an
/// all-reduce, whether the final norm runs alone on the last stage). The first stage adds the first layer's input
/// norm; a norm after the MLP is the next layer's input norm, or on the last stage's last layer the final norm.
/// Without any fusion: 2 per layer and the final norm, as every other engine.
pub fn stage_norms(
    dense: u32,
    moe: u32,
    (dense_f, moe_f): (LayerFusion, LayerFusion),
    first: bool,
    last: bool,
) -> (f64, f64, bool) {
    let (d, m) = (dense as f64, moe as f64);
    if dense_f == LayerFusion::default() && moe_f == LayerFusion::default() {
        return (2.0 * (d + m), 0.0, last);
    }
    let alone = |on: bool| if on { 0.0 } else { 1.0 };
    let fused = |on: bool| if on { 1.0 } else { 0.0 };
    let last_post = if moe > 0 { moe_f.post } else { dense_f.post };
    let final_alone = last && !last_post;
    let standalone = if first { 1.0 } else { 0.0 }
        + d * (alone(dense_f.pre) + alone(dense_f.post))
        + m * (alone(moe_f.pre) + alone(moe_f.post))
        - if final_alone { 1.0 } else { 0.0 };
    let in_allreduce = d * (fused(dense_f.pre) + fused(dense_f.post)) + m * (fused(moe_f.pre) + fused(moe_f.post));
    (standalone.max(0.0), in_allreduce, final_alone)
}

/// What one call of operator `name` charges a step, timed `time_us` with `kernels` kernels: (GPU µs, kernels
/// launched). An RMSNorm fused into an all-reduce ([`OpName::AllreduceRmsNorm`]) charges its body — the time less
/// the `kernel_us` per-kernel cost of each of its kernels — and launches nothing. MLA's prefill copies
/// ([`OpName::MlaPrefillElementwise`], [`super::mla`]) charge their GPU time and count no launch: the host time
/// per counted kernel of an eager step (`python_kernel_us`, the training model's `host_us`) already covers the
/// element-wise kernels an operator list folds into its neighbours, which these are. Every other operator charges
/// its time and its kernels (at least one).
pub fn fused_charge(name: OpName, time_us: f64, kernels: u32, kernel_us: f64) -> (f64, u32) {
    match name {
        OpName::AllreduceRmsNorm => ((time_us - f64::from(kernels.max(1)) * kernel_us).max(0.0), 0),
        OpName::MlaPrefillElementwise => (time_us, 0),
        _ => (time_us, kernels.max(1)),
    }
}

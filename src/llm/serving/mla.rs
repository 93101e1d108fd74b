//! The element-wise kernels of multi-head latent attention (DeepSeek-V2/V3, Liu et al. 2024, §2.1) beside its
//! GEMMs and attention kernel in a serving step ([`super::step::for_each_op`] emits them after MLA's projections):
//!
//! - **The latents' RMSNorms**, every step and engine, over all T tokens of the step: `q_a_layernorm` over the query
//!   latent [T, q_r] (models with a query down-projection) and `kv_a_layernorm` over the key/value latent [T, kv_r],
//!   each its own kernel — SGLang `python/sglang/srt/models/deepseek_v2.py` (`forward_normal_prepare` and
//!   `forward_absorb_prepare` both call `self.q_a_layernorm(q)` and `self.kv_a_layernorm(...)`), TensorRT-LLM
//!   `tensorrt_llm/_torch/modules/attention.py` (`MLA.forward_impl`: the two norms, run on two streams by
//!   `maybe_execute_in_parallel`), vLLM's `DeepseekV2MLAAttention.forward` (`q_a_layernorm`, `kv_a_layernorm`).
//! - **Prefill without weight absorption** (the prompt's tokens only; decodes run the absorbed path inside the
//!   attention kernel): the engines up-project the latent with `kv_b_proj` and run multi-head attention of D_nope +
//!   D_rope query/key dims and D_v value dims over a local heads. Around it:
//!   - SGLang (`AttnForwardMethod.MHA`, `forward_normal_prepare`): the key is assembled from k_nope [P, a, D_nope]
//!     and the one shared k_pe [P, 1, D_rope] into k [P, a, D_nope + D_rope] (`_concat_and_cast_mha_k`: one kernel,
//!     `concat_mla_k` or `concat_and_cast_mha_k_triton`); the normalized latent is copied into the latent cache row
//!     (`latent_cache[:, :, :kv_lora_rank] = kv_a`) and the row [P, kv_r + D_rope] is written to the KV cache in the
//!     cache's precision (`token_to_kv_pool.set_kv_buffer`, the cast and the store). Three kernels.
//!   - TensorRT-LLM (`MLA.forward_context_default`): `k = torch.empty_like(q)` and the copy of k_nope into it
//!     (`k[..., :qk_nope_head_dim] = k_nope`, `maybe_compiled_copy_`); the rope part is written by the attention op's
//!     fused RoPE and the latent cache by the op itself (`latent_cache` passed to `mha.forward`). One kernel.
//!   - vLLM: its MLA prefill assembles k inside the attention custom op (`MLACommonImpl._forward_prefill`), not
//!     modelled here [rec].
//!
//!   These copies count no host launch of their own ([`super::fusion::fused_charge`]). The q_pe copy-back (`q[..., qk_nope_head_dim:] = q_pe`) and the latent's rope write are left out: with the
//!   in-place rotary kernel they copy a view onto itself, which PyTorch's `copy_` returns from without a kernel.
//!
//! The key's assembly is timed as one element-wise kernel of width a·(D_nope + D_rope/2) with one input: its
//! 2·width·e bytes are the read of k_nope (a·D_nope) and the write of k (a·(D_nope + D_rope)) per token; the shared
//! k_pe row it reads (D_rope, 1/a of the write) is left out. The KV-cache write is a `quantize` of [P, kv_r + D_rope]
//! in the cache's precision (read 2 B, write the cache's bytes per element).

use super::request::{Engine, MlaSpec};
use super::step::{compute, Emit, StepLoad};
use super::validate::ServingConfig;
use crate::llm::operators::OpName;
use crate::op::OpClass;

/// MLA's two latent RMSNorms over the step's `t` tokens, `layers` times per step: [t, q_r] (when the model has a
/// query down-projection, q_r > 0) and [t, kv_r], in the activations' precision (module doc).
pub fn latent_norms(out: &mut Emit, cfg: &ServingConfig, t: u64, mla: &MlaSpec, layers: f64) {
    let act = cfg.activation_precision;
    if mla.q_lora_rank > 0 {
        compute(out, OpName::MlaNorm, OpClass::RmsNorm, act, &[t, mla.q_lora_rank as u64], layers);
    }
    compute(out, OpName::MlaNorm, OpClass::RmsNorm, act, &[t, mla.kv_lora_rank as u64], layers);
}

/// The element-wise kernels of an MLA prefill without weight absorption over the step's `load.prefill_tokens` P,
/// `layers` times per step, as SGLang and TensorRT-LLM run them (module doc); nothing without prefill tokens or
/// under vLLM. a = the model's heads / the attention tensor-parallel degree:
/// - SGLang: the key's assembly `Elementwise` [P, a·(D_nope + D_rope/2), 1], the latent's copy `Elementwise`
///   [P, kv_r, 1] and the KV-cache write `Quantize` [P, kv_r + D_rope] in the cache's precision;
/// - TensorRT-LLM: the copy of k_nope into the key, `Elementwise` [P, a·D_nope, 1].
pub fn prefill_elementwise(out: &mut Emit, cfg: &ServingConfig, load: &StepLoad, mla: &MlaSpec, layers: f64) {
    let p = load.prefill_tokens as u64;
    if p == 0 {
        return;
    }
    let act = cfg.activation_precision;
    let a = cfg.model.heads as u64 / cfg.attn_tp() as u64;
    let (nope, rope, kvr) = (mla.qk_nope_head_dim as u64, mla.qk_rope_head_dim as u64, mla.kv_lora_rank as u64);
    let name = OpName::MlaPrefillElementwise;
    match cfg.engine {
        Engine::Sglang => {
            compute(out, name, OpClass::Elementwise, act, &[p, a * nope + (a * rope).div_ceil(2), 1], layers);
            compute(out, name, OpClass::Elementwise, act, &[p, kvr, 1], layers);
            compute(out, name, OpClass::Quantize, cfg.kv_cache_dtype, &[p, kvr + rope], layers);
        }
        Engine::Trtllm => compute(out, name, OpClass::Elementwise, act, &[p, a * nope, 1], layers),
        Engine::Vllm => {}
    }
}

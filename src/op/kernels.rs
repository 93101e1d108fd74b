//! Whose kernels measured an operator: the serving engine whose code path ran it ([`KernelFamily`]), and the
//! order in which a request for one engine's kernels falls back to another's ([`KernelFamily::closest`]).
//!
//! aiconfigurator measures the same operators through vLLM's, SGLang's and TensorRT-LLM's own code paths
//! (`data/aiconfigurator/SOURCE.txt`: "the same operators as run by TensorRT-LLM and SGLang"): the same GEMM shape
//! costs different times in each (SGLang and vLLM quantize the activation inside every fp8 GEMM call, TensorRT-LLM
//! runs cuBLASLt's FP8 GEMM after its own quantization kernels; SGLang on Blackwell runs TensorRT-LLM's attention
//! and MoE kernels through FlashInfer). Samples say which engine measured them in their `backend` attribute (the
//! column aiconfigurator's tables carry); samples without one (NeuSight, DeepBench, XLA, perfcast's collector) are
//! engine-neutral, and so are vLLM's: perfcast's learned models without an engine in their key
//! (`linear.fwd.fp8`) are trained on engine-neutral and vLLM measurements, the others on one engine's
//! (`linear.fwd.fp8.trtllm`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The serving engine whose kernels measured (or are asked to time) an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum KernelFamily {
    /// vLLM (and engine-neutral measurements): the family of the models without an engine in their key.
    Vllm,
    /// SGLang.
    Sglang,
    /// TensorRT-LLM (its PyTorch backend, `torch_flow`, or the older TRT engine flow).
    Trtllm,
}

impl KernelFamily {
    /// Every family.
    pub const ALL: [KernelFamily; 3] = [KernelFamily::Vllm, KernelFamily::Sglang, KernelFamily::Trtllm];

    /// The wire name (`"trtllm"`), as aiconfigurator's `backend` column writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            KernelFamily::Vllm => "vllm",
            KernelFamily::Sglang => "sglang",
            KernelFamily::Trtllm => "trtllm",
        }
    }

    /// The family a sample's `backend` (or `framework`) attribute names, case-insensitively: `vllm`, `sglang`,
    /// `trtllm` (also `tensorrt-llm`, `tensorrt_llm`, `trt-llm`). None for anything else (an engine-neutral
    /// sample).
    pub fn parse(name: &str) -> Option<KernelFamily> {
        match name.trim().to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "vllm" => Some(KernelFamily::Vllm),
            "sglang" => Some(KernelFamily::Sglang),
            "trtllm" | "tensorrtllm" => Some(KernelFamily::Trtllm),
            _ => None,
        }
    }

    /// The segment of a model key this family's models carry: none for vLLM (its measurements train the models
    /// without an engine segment, with the engine-neutral ones), the name for the others.
    pub fn key_segment(self) -> Option<&'static str> {
        match self {
            KernelFamily::Vllm => None,
            other => Some(other.as_str()),
        }
    }

    /// The families to ask, in order, when this one's kernels are wanted: itself, then the closest. SGLang and vLLM
    /// run the same kinds of kernels — CUTLASS scaled-mm fp8 GEMMs that quantize the activation inside the call,
    /// FlashAttention-3 / FlashInfer attention, Triton fused MoE (aiconfigurator's `kernel_source` labels:
    /// `sglang_sgl_kernel_fp8_scaled_mm` and vLLM's `CutlassFP8ScaledMMLinearKernel`, `fa3` and
    /// `vllm_flash_attn_fa3`, `sglang_fused_moe_triton` and vLLM's Triton experts) — so each is the other's nearest.
    /// TensorRT-LLM's own kernels (its FMHA, cuBLASLt FP8 GEMMs, CUTLASS MoE) are closest to SGLang's, which on
    /// Blackwell runs TensorRT-LLM's attention and MoE kernels through FlashInfer (`trtllm_mha`,
    /// `sglang_flashinfer_trtllm_moe` in its tables), then to vLLM's.
    pub fn closest(self) -> [KernelFamily; 3] {
        match self {
            KernelFamily::Vllm => [KernelFamily::Vllm, KernelFamily::Sglang, KernelFamily::Trtllm],
            KernelFamily::Sglang => [KernelFamily::Sglang, KernelFamily::Vllm, KernelFamily::Trtllm],
            KernelFamily::Trtllm => [KernelFamily::Trtllm, KernelFamily::Sglang, KernelFamily::Vllm],
        }
    }
}

impl std::fmt::Display for KernelFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_with_their_aliases() {
        for f in KernelFamily::ALL {
            assert_eq!(KernelFamily::parse(f.as_str()), Some(f));
        }
        assert_eq!(KernelFamily::parse("TensorRT-LLM"), Some(KernelFamily::Trtllm));
        assert_eq!(KernelFamily::parse("tensorrt_llm"), Some(KernelFamily::Trtllm));
        assert_eq!(KernelFamily::parse(" SGLang "), Some(KernelFamily::Sglang));
        assert_eq!(KernelFamily::parse("VLLM"), Some(KernelFamily::Vllm));
        // nccl_perf's backend column, and anything else, is no engine.
        assert_eq!(KernelFamily::parse("nccl"), None);
        assert_eq!(KernelFamily::parse(""), None);
    }

    #[test]
    fn every_chain_starts_with_itself_and_holds_each_family_once() {
        for f in KernelFamily::ALL {
            let chain = f.closest();
            assert_eq!(chain[0], f);
            let mut sorted = chain.to_vec();
            sorted.sort();
            assert_eq!(sorted, KernelFamily::ALL.to_vec());
        }
        assert_eq!(KernelFamily::Vllm.key_segment(), None);
        assert_eq!(KernelFamily::Trtllm.key_segment(), Some("trtllm"));
    }
}

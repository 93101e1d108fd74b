//! The operator inventory ([`OpName`]): every operator a prediction can report, S1 Table I's names and the
//! Megatron-LM, MoE, MLA, FP8 and serving operators beyond them, with their wire names.

use serde::Serialize;
use utoipa::ToSchema;

/// S1 Table I operator names, and the Megatron-LM operators beyond them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, ToSchema)]
pub enum OpName {
    Embedding,
    LayerNorm,
    RMSNorm,
    Linear1,
    RoPE,
    #[serde(rename = "QK^T")]
    QkT,
    Fillmask,
    Softmax,
    #[serde(rename = "Fused_Softmax")]
    FusedSoftmax,
    #[serde(rename = "V")]
    AttnV,
    #[serde(rename = "Flash_Attention")]
    FlashAttention,
    Linear2,
    Linear3,
    GeLU,
    SwiGLU,
    Linear4,
    /// Dropout over the attention probabilities.
    #[serde(rename = "Attention_Dropout")]
    AttentionDropout,
    /// Megatron's fused bias + dropout + residual add.
    #[serde(rename = "Bias_Dropout_Add")]
    BiasDropoutAdd,
    /// The extra element-wise kernels an eager PyTorch module launches beyond the fused kernel the table counts
    /// (RMSNorm's casts and statistics, SwiGLU's separate `silu` and `mul`, RoPE's complex casts;
    /// [`crate::llm::framework::EagerKernels`]), each one pass over the operator's tensor.
    #[serde(rename = "Eager_Elementwise")]
    EagerElementwise,
    #[serde(rename = "Final_Linear")]
    FinalLinear,
    #[serde(rename = "Parallel_Cross_Entropy")]
    CrossEntropy,
    #[serde(rename = "MP_Allreduce")]
    MpAllReduce,
    /// Sequence parallelism's all-gather into the tensor-parallel region.
    #[serde(rename = "MP_Allgather")]
    MpAllGather,
    /// Sequence parallelism's reduce-scatter out of the tensor-parallel region.
    #[serde(rename = "MP_Reduce_Scatter")]
    MpReduceScatter,
    /// Context parallelism's ring exchange of key/value chunks (and their gradients).
    #[serde(rename = "CP_P2P")]
    CpP2p,
    /// Context parallelism's all-gather of the whole sequence's keys and values (`cp_comm_type` `all_gather`).
    #[serde(rename = "CP_Allgather")]
    CpAllGather,
    /// Context parallelism's reduce-scatter of the key/value gradients (`cp_comm_type` `all_gather`, backward).
    #[serde(rename = "CP_Reduce_Scatter")]
    CpReduceScatter,
    /// Context parallelism's Ulysses all-to-alls of Q, K, V and O (`cp_comm_type` `a2a`, `a2a+p2p`).
    #[serde(rename = "CP_Alltoall")]
    CpAllToAll,
    /// Context parallelism's ring merges: each step's partial attention output folded into the running one
    /// (forward), its dQ and dK, dV accumulated (backward) — element-wise kernels ([`crate::llm::cp::merge_ops`]).
    #[serde(rename = "CP_Merge")]
    CpMerge,
    #[serde(rename = "DP_Allreduce")]
    DpAllReduce,
    #[serde(rename = "DP_Reduce_Scatter")]
    DpReduceScatter,
    #[serde(rename = "DP_Allgather")]
    DpAllGather,
    /// All-reduce of the tied word-embedding gradients between the first and the last stage.
    #[serde(rename = "Embedding_Grad_Allreduce")]
    EmbeddingGradAllReduce,
    #[serde(rename = "PP_P2P")]
    PpP2p,
    Optimizer,
    /// Serving: prefill attention over the new prompt tokens, writing their K/V into the KV cache.
    #[serde(rename = "Attention_Prefill")]
    AttentionPrefill,
    /// Serving: decode attention of one new token per sequence over its KV cache.
    #[serde(rename = "Attention_Decode")]
    AttentionDecode,
    /// The MoE router GEMM (hidden → experts logits).
    #[serde(rename = "MoE_Router")]
    MoeRouter,
    /// The routed experts of an MoE layer: serving's fused MoE (top-k, grouped GEMMs, combine); training's grouped
    /// expert GEMMs (Megatron-Core TEGroupedMLP: gate+up, activation, down).
    #[serde(rename = "MoE")]
    Moe,
    /// Serving: sampling over the gathered logits (softmax and top-k/top-p over the vocabulary).
    Sampler,
    /// Expert parallelism's all-to-all: dispatching routed tokens to their experts' GPUs and combining the results
    /// back (training's alltoall, DeepEP and HybridEP dispatchers; serving's data-parallel attention).
    #[serde(rename = "EP_Alltoall")]
    EpAllToAll,
    /// The allgather dispatcher's all-gather of hidden states over the tp·ep group, the alltoall dispatcher's
    /// all-gather of received tokens over the expert-tensor-parallel group, and HybridEP's all-gather of the
    /// routing map over the tp·ep group before its dispatch (forward only).
    #[serde(rename = "EP_Allgather")]
    EpAllGather,
    /// The reduce-scatters mirroring [`OpName::EpAllGather`] in the combine.
    #[serde(rename = "EP_Reduce_Scatter")]
    EpReduceScatter,
    /// The router's score function and top-k selection over the experts' logits (Megatron-Core `router.py`).
    #[serde(rename = "MoE_TopK")]
    MoeTopK,
    /// Permutation of the tokens into expert order before the dispatch (and sorting by local expert after it).
    #[serde(rename = "MoE_Permute")]
    MoePermute,
    /// Unpermutation after the combine: each token's routed copies weighted by their probabilities and summed.
    #[serde(rename = "MoE_Unpermute")]
    MoeUnpermute,
    /// The routed experts' activation, recomputed on its own (`recompute_modules` `moe_act`; part of `MoE`
    /// otherwise).
    #[serde(rename = "MoE_SwiGLU")]
    MoeAct,
    /// One local expert's gate+up GEMM (SequentialMLP, without `moe_grouped_gemm`).
    #[serde(rename = "Expert_FC1")]
    ExpertFc1,
    /// One local expert's down GEMM (SequentialMLP).
    #[serde(rename = "Expert_FC2")]
    ExpertFc2,
    /// The shared experts' gate+up GEMM.
    #[serde(rename = "Shared_Expert_FC1")]
    SharedExpertFc1,
    /// The shared experts' activation.
    #[serde(rename = "Shared_Expert_SwiGLU")]
    SharedExpertAct,
    /// The shared experts' down GEMM.
    #[serde(rename = "Shared_Expert_FC2")]
    SharedExpertFc2,
    /// MLA's query down-projection.
    #[serde(rename = "MLA_Q_Down")]
    MlaQDown,
    /// MLA's key/value down-projection (with the shared rotary key).
    #[serde(rename = "MLA_KV_Down")]
    MlaKvDown,
    /// MLA's query up-projection.
    #[serde(rename = "MLA_Q_Up")]
    MlaQUp,
    /// MLA's key/value up-projection.
    #[serde(rename = "MLA_KV_Up")]
    MlaKvUp,
    /// MLA's RMSNorms of the query and key/value latents.
    #[serde(rename = "MLA_Norm")]
    MlaNorm,
    /// The RMSNorm of every query head, or of every key head, over the head dim before attention (Megatron-Core
    /// `qk_layernorm`; [`crate::llm::config::ModelSpec::qk_norm`]).
    #[serde(rename = "QK_Norm")]
    QkNorm,
    /// Multi-token prediction's projection of the concatenated hidden state and next-token embedding (2d → d).
    #[serde(rename = "MTP_Proj")]
    MtpProj,
    /// Gradient all-reduce of the expert parameters over the expert-data-parallel group.
    #[serde(rename = "EDP_Allreduce")]
    EdpAllReduce,
    /// Gradient reduce-scatter of the expert parameters over the expert-data-parallel group (distributed
    /// optimizer).
    #[serde(rename = "EDP_Reduce_Scatter")]
    EdpReduceScatter,
    /// All-gather of the updated expert parameters over the expert-data-parallel group.
    #[serde(rename = "EDP_Allgather")]
    EdpAllGather,
    /// Current scaling's absolute-maximum pass over an fp8 GEMM's operand before its cast (and MXFP8's scale
    /// writes; [`crate::llm::recipe::scaling_ops`]).
    #[serde(rename = "FP8_Amax")]
    Fp8Amax,
    /// Current scaling's all-reduce of a sequence-parallel operand's amax over the tensor-parallel group.
    #[serde(rename = "FP8_Amax_Allreduce")]
    Fp8AmaxAllreduce,
    /// Serving, DeepSeek sparse attention: the indexer's projections (`wq_b`, `wk`, `weights_proj`).
    #[serde(rename = "DSA_Indexer_Proj")]
    DsaIndexerProj,
    /// Serving, DeepSeek sparse attention: the indexer's fp8 multi-query logits over the cached index keys.
    #[serde(rename = "DSA_Indexer_Logits")]
    DsaIndexerLogits,
    /// Serving, DeepSeek sparse attention: the indexer's small kernels (key norm, rotary, Hadamard rotations, fp8
    /// quantization, index-cache write, head gates) and its top-k selection.
    #[serde(rename = "DSA_Indexer_Elementwise")]
    DsaIndexerElementwise,
    /// Serving, MLA prefill without weight absorption: the element-wise kernels around the up-projected
    /// multi-head attention (the key's assembly from k_nope and the shared k_pe, the latent's copy and its
    /// KV-cache write; [`crate::llm::serving::mla`]).
    #[serde(rename = "MLA_Prefill_Elementwise")]
    MlaPrefillElementwise,
    /// Serving, TensorRT-LLM: an RMSNorm (with its residual add) applied inside the tensor-parallel all-reduce
    /// before it (`AllReduceFusionOp.RESIDUAL_RMS_NORM`; [`crate::llm::serving::fusion`]): the norm's traffic, no
    /// kernel of its own.
    #[serde(rename = "AllReduce_Residual_RMSNorm")]
    AllreduceRmsNorm,
}

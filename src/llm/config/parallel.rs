//! How a training request runs the model ([`ParallelSpec`]): the parallel degrees, the batch, ZeRO, and every
//! Megatron-LM / framework training option, with the choices some of them take ([`Recompute`], [`LayerSplit`],
//! [`MegatronSplit`]).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::llm::framework::{FrameworkOptions, OptimizerImpl};

/// Activation recomputation (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
/// Models", §5): `none` stores every activation; `selective` recomputes the core attention (QKᵀ, softmax,
/// dropout, ·V — or the FlashAttention forward) in the backward pass and stores the rest; `full` stores only
/// each layer's input and recomputes the whole layer forward (its tensor-parallel communication included) in the
/// backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    #[default]
    None,
    Selective,
    Full,
}

impl Recompute {
    /// Every choice, cheapest in time first.
    pub const ALL: [Recompute; 3] = [Recompute::None, Recompute::Selective, Recompute::Full];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Full => "full",
        }
    }
}

/// How the layers are divided among pipeline stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LayerSplit {
    /// S1 eq. 3–5 (GPT-NeoX / DeepSpeed): the E + 5 pipeline blocks are filled in order, so the first and last
    /// stages, which also hold the embedding and the LM head, get fewer layers.
    S1,
    /// Megatron-Core (`transformer_block.py` `get_num_layers_to_build`): layers / (pp · virtual_stages) layers per
    /// model chunk, the embedding added to the first stage and the LM head to the last — or, with
    /// [`MegatronSplit`]'s options, uneven first and last stages or the embedding and the loss counted as layers.
    Uniform,
}

/// Megatron-Core's uneven pipeline split, the `TransformerConfig` fields of the same names (Megatron-LM
/// `arguments.py`: `--decoder-first-pipeline-num-layers`, `--decoder-last-pipeline-num-layers`,
/// `--account-for-embedding-in-pipeline-split`, `--account-for-loss-in-pipeline-split`). All unset is the even
/// split. [`crate::llm::partition::megatron_split`] turns them into layers per model chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MegatronSplit {
    /// Transformer layers of the first pipeline stage (all its model chunks), or the even share.
    pub first: Option<u32>,
    /// Transformer layers of the last pipeline stage (all its model chunks), or the even share.
    pub last: Option<u32>,
    /// The embedding counts as one layer of the first model chunk of the first stage.
    pub embedding: bool,
    /// The loss (final norm, LM head, cross-entropy) counts as one layer of the last chunk of the last stage.
    pub loss: bool,
}

impl MegatronSplit {
    /// True when no option is set (the even split).
    pub fn is_even(&self) -> bool {
        *self == MegatronSplit::default()
    }
}

fn one() -> u32 {
    1
}

/// The parallel configuration: tensor (tp), pipeline (pp), data (dp) and context (cp) parallel degrees, the
/// micro-batch, the micro-batches per step, and the Megatron-LM training options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4, "grad_accum": 16, "zero_stage": 1}))]
pub struct ParallelSpec {
    /// Tensor (model) parallel degree, S1's mp. Default 1.
    #[serde(default = "one")]
    pub tp: u32,
    /// Pipeline stages. Default 1.
    #[serde(default = "one")]
    pub pp: u32,
    /// Data-parallel degree. Default 1.
    #[serde(default = "one")]
    pub dp: u32,
    /// Sequences per micro-batch, b. Default 1.
    #[serde(default = "one")]
    pub micro_batch: u32,
    /// Micro-batches per optimizer step per data-parallel rank, m (gradient accumulation steps). Give this or
    /// `global_batch`; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_accum: Option<u32>,
    /// Sequences per optimizer step over all data-parallel ranks = micro_batch · grad_accum · dp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_batch: Option<u32>,
    /// ZeRO stage 0–3 (Rajbhandari et al. 2020; S1: 1). Stage ≥ 1 partitions the optimizer states over the
    /// data-parallel ranks and all-gathers the updated parameters; stage ≥ 2 also partitions the gradients and
    /// reduce-scatters them during every micro-batch's backward; stage 3 also partitions the parameters and
    /// all-gathers them before every micro-batch's forward and backward.
    #[serde(default = "one")]
    pub zero_stage: u32,
    /// Megatron-LM sequence parallelism (Korthikanti et al. 2022, §4.2.2): the norms and dropouts run on
    /// seq_len/tp tokens per rank, and every tensor-parallel all-reduce becomes a reduce-scatter plus an
    /// all-gather of the same total volume. Needs tp > 1 to matter. Default `false`.
    #[serde(default)]
    pub sequence_parallel: bool,
    /// Model chunks per pipeline stage for the interleaved 1F1B schedule (Narayanan et al. 2021, §2.2.2): the
    /// bubble shrinks by this factor, the pipeline sends grow by it. Needs pp > 1, layers divisible by
    /// pp·virtual_stages and micro-batches per step divisible by pp. Default 1 (plain 1F1B).
    #[serde(default = "one")]
    pub virtual_stages: u32,
    /// Activation recomputation `none`, `selective` or `full` (Korthikanti et al. 2022). Default `none` (S1).
    #[serde(default)]
    pub recompute: Recompute,
    /// Megatron-Core's distributed optimizer: optimizer states sharded over the data-parallel ranks (ZeRO-1
    /// memory), gradients reduce-scattered instead of all-reduced, updated parameters all-gathered. Needs
    /// zero_stage ≥ 1. Default `false`.
    #[serde(default)]
    pub distributed_optimizer: bool,
    /// Megatron-Core's `overlap_grad_reduce`: the data-parallel gradient reduction runs in buckets during the last
    /// micro-batch's backward, so only what outlasts that backward (at least the last bucket) is exposed.
    /// Default `false` (S1: the first stage's reduction follows the pipeline flush).
    #[serde(default)]
    pub overlap_grad_reduce: bool,
    /// Megatron-Core's `overlap_param_gather` (distributed optimizer): the updated parameters are all-gathered
    /// at the start of the next iteration, bucket by bucket ahead of the forward pass that needs them
    /// (`param_and_grad_buffer.py`: finishing bucket i's gather dispatches bucket i + 1's), instead of after the
    /// optimizer step; only the first bucket, and what outlasts the first micro-batch's forward, is exposed.
    /// Needs `distributed_optimizer` and `overlap_grad_reduce` (Megatron-LM `arguments.py`). Default `false`.
    #[serde(default)]
    pub overlap_param_gather: bool,
    /// Megatron-Core's `align_param_gather`: every pipeline stage launches its parameter all-gathers at the
    /// iteration's start (so the later stages' gathers hide behind the pipeline fill) instead of at its own first
    /// forward. NeMo and Megatron-Bridge set it with pp > 1 and virtual_stages > 1. Default `false`.
    #[serde(default)]
    pub align_param_gather: bool,
    /// Megatron-Core's DDP `bucket_size`: parameters per gradient-reduction (and parameter-gather) bucket on the
    /// first pipeline stage; the other stages reduce in one bucket (`distributed_data_parallel.py`). Default
    /// max(40 M, 1 M · dp) (Megatron-Core); NeMo's communication-overlap callback uses 128 Mi (134,217,728).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_size: Option<u64>,
    /// Transformer Engine's `tp_comm_overlap` (userbuffers; Megatron-Core `--tp-comm-overlap`, NeMo
    /// `tp_comm_overlap`): each sequence-parallel all-gather / reduce-scatter of a layer is split in chunks and
    /// pipelined with the GEMM it feeds or follows, so only its first chunk and what outlasts that GEMM are
    /// exposed. Takes effect with `sequence_parallel` and tp > 1 (NeMo disables it otherwise). Default `false`.
    #[serde(default)]
    pub tp_comm_overlap: bool,
    /// Megatron-Core's `overlap_p2p_comm` for the interleaved schedule: pipeline sends and receives run
    /// asynchronously while the next chunk computes; the receiver waits for the data, the sender does not.
    /// Needs virtual_stages > 1 when pp > 1 (Megatron-Core refuses it for the non-interleaved schedule).
    /// Default `false`.
    #[serde(default)]
    pub overlap_p2p_comm: bool,
    /// Context-parallel degree cp (Megatron-Core / NeMo ring attention): every sequence is split over cp ranks,
    /// the keys and values circulate around the ring during attention, gradients are reduced over dp·cp. GPUs =
    /// tp·cp·pp·dp. Needs `model.attention` = `flash`. Default 1.
    #[serde(default = "one")]
    pub context_parallel: u32,
    /// Megatron-Core's `cp_comm_type` (`--cp-comm-type`, Transformer Engine's `attn_forward_func_with_cp`): how
    /// the context-parallel ranks exchange attention data — `p2p` (the K/V ring hidden behind each step's
    /// attention), `all_gather` (K/V of the whole sequence gathered, exposed; `allgather` also accepted), `a2a`
    /// (Ulysses all-to-alls of Q, K, V and O, heads per tp rank divisible by cp), `a2a+p2p` (all-to-all inside
    /// groups, ring across them; needs `hierarchical_context_parallel_sizes`). Default: the framework's —
    /// `all_gather` under torchtitan (its `context_parallel_rotate_method`), `p2p` otherwise
    /// ([`crate::llm::cp`]). No effect with context_parallel 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cp_comm_type: Option<crate::llm::cp::CpCommType>,
    /// Megatron-Core's `hierarchical_context_parallel_sizes` for `cp_comm_type` `a2a+p2p`: `[a2a, p2p]`, the
    /// all-to-all group of a adjacent cp ranks and the ring over the cp/a groups; a·p2p = context_parallel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hierarchical_context_parallel_sizes: Option<Vec<u32>>,
    /// How layers are divided among stages: `s1` (S1 eq. 3–5) or `uniform` (Megatron-Core, with the four options
    /// below). Default `s1` with virtual_stages = 1 and none of the options below, `uniform` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer_split: Option<LayerSplit>,
    /// Megatron-Core's `recompute_modules` under `recompute` `selective`: which submodules re-run in the backward
    /// pass (`core_attn`, `moe_act`, `layernorm`, `mla_up_proj`, `mlp`, `moe`, `shared_experts`;
    /// [`crate::llm::moe::RecomputeModule`]). Default `["core_attn"]` (Megatron-Core's and perfcast's selective
    /// recompute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recompute_modules: Option<Vec<crate::llm::moe::RecomputeModule>>,
    /// Expert-parallel degree (Megatron-Core `expert_model_parallel_size`): each MoE layer's routed experts are
    /// sharded over ep ranks of a pipeline stage. Default 1.
    #[serde(default = "one")]
    pub ep: u32,
    /// Expert-tensor-parallel degree (Megatron-Core `expert_tensor_parallel_size`): each expert's MLP split over
    /// expert_tp ranks. The expert-data-parallel size follows by MoE parallel folding: tp·cp·dp / (expert_tp·ep).
    /// Default tp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_tp: Option<u32>,
    /// Megatron-Core's `moe_token_dispatcher_type`: `allgather` (the default), `alltoall`, or the flex dispatcher's
    /// `deepep` / `hybridep` backends ([`crate::llm::moe::Dispatcher`]). Under another `framework`, one of its
    /// dispatchers, default `alltoall` ([`crate::llm::framework::Framework::moe_dispatchers`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_token_dispatcher: Option<crate::llm::moe::Dispatcher>,
    /// Megatron-Core's `overlap_moe_expert_parallel_comm`: the combined 1F1B schedule hides each pass's
    /// dispatch and combine all-to-alls behind another micro-batch's computation. Needs ep > 1, a non-allgather
    /// dispatcher, no full recompute, and virtual_stages > 1 when pp > 1. Default `false`.
    #[serde(default)]
    pub overlap_moe_expert_parallel_comm: bool,
    /// Megatron-Core's `moe_shared_expert_overlap`: the shared experts compute while the all-to-alls run (alltoall
    /// dispatcher). Default `false`.
    #[serde(default)]
    pub moe_shared_expert_overlap: bool,
    /// Megatron-Core's `moe_router_force_load_balancing`: random router logits spread the tokens uniformly over
    /// the experts (benchmarks; what NeMo's dropless performance recipes set). Default `false`.
    #[serde(default)]
    pub moe_router_force_load_balancing: bool,
    /// Routed tokens of the busiest expert-parallel rank over the mean (≥ 1): the experts and the all-to-alls wait
    /// for it. Default: the statistical maximum of uniform routing ([`crate::llm::moe::routing`]), e.g. 1.02 for
    /// Qwen3-235B-A22B at ep 32 — what a balanced router reaches; give a measured value for a skewed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_load_imbalance: Option<f64>,
    /// Megatron-Core's `moe_expert_capacity_factor`: each expert takes at most tokens·top_k·factor/experts tokens,
    /// the rest are dropped. Default none (dropless).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_expert_capacity_factor: Option<f64>,
    /// Megatron-Core's `moe_pad_expert_input_to_capacity`: every expert processes exactly its capacity. Needs
    /// `moe_expert_capacity_factor`. Default `false`.
    #[serde(default)]
    pub moe_pad_expert_input_to_capacity: bool,
    /// Megatron-Core's `moe_grouped_gemm`: the local experts run as one grouped GEMM (TEGroupedMLP) instead of one
    /// GEMM per expert (SequentialMLP). Default `false` (Megatron-Core's default).
    #[serde(default)]
    pub moe_grouped_gemm: bool,
    /// Megatron-Core's `num_layers_in_first_pipeline_stage` (Megatron-LM `--decoder-first-pipeline-num-layers`):
    /// transformer layers on the first stage (split evenly over its virtual_stages chunks); the other stages
    /// share the rest evenly (`transformer_block.py` `get_num_layers_to_build`). Needs pp > 1; not with the
    /// `account_for_*` options. Default: the even share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_layers_in_first_pipeline_stage: Option<u32>,
    /// Megatron-Core's `num_layers_in_last_pipeline_stage` (`--decoder-last-pipeline-num-layers`), as
    /// `num_layers_in_first_pipeline_stage` for the last stage. Default: the even share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_layers_in_last_pipeline_stage: Option<u32>,
    /// Megatron-Core's `account_for_embedding_in_pipeline_split`: the embedding counts as one layer in the split,
    /// so (layers + 1 [+ 1 with the loss]) / (pp·virtual_stages) slots per model chunk and the first chunk of the
    /// first stage builds one transformer layer fewer (`get_num_layers_to_build`). NeMo / Megatron-Bridge's
    /// Llama 3.1 405B recipe sets it. Default `false`.
    #[serde(default)]
    pub account_for_embedding_in_pipeline_split: bool,
    /// Megatron-Core's `account_for_loss_in_pipeline_split`: the loss (final norm, LM head, cross-entropy) counts
    /// as one layer, so the last chunk of the last stage builds one transformer layer fewer. Default `false`.
    #[serde(default)]
    pub account_for_loss_in_pipeline_split: bool,
    /// `torch.compile` of the model (torchtitan `compile`, Hugging Face `torch_compile`): Inductor fuses the eager
    /// element-wise kernels of the norms, activations and RoPE ([`crate::llm::framework`]). Only with `framework`
    /// `torchtitan` or `hf`. Default `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_compile: Option<bool>,
    /// The optimizer's implementation, `fused`, `foreach` or `per_tensor` (PyTorch `torch.optim.AdamW`'s
    /// `fused` / `foreach` / for-loop). Default: the framework's ([`crate::llm::framework::Framework`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizer: Option<OptimizerImpl>,
    /// Reduce the gradients in fp32 (Megatron-Core DDP `grad_reduce_in_fp32`, PyTorch FSDP `reduce_dtype`):
    /// 4 bytes per element in the data-parallel all-reduce or reduce-scatter instead of 2. Default: the
    /// framework's (Megatron-LM: true under bf16; NeMo's recipes: false; torchtitan and Hugging Face FSDP: true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_reduce_in_fp32: Option<bool>,
    /// Megatron-LM's `--fp8-recipe` under `precision` `fp8`: `delayed` (the default), `tensorwise` (current
    /// scaling), `blockwise` (1×128 / 128×128 block scales) or `mxfp8` (Blackwell) —
    /// [`crate::llm::recipe::Fp8Recipe`]. Needs precision fp8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_recipe: Option<crate::llm::recipe::Fp8Recipe>,
    /// Megatron-LM's `--fp8-param-gather` (torchtitan: `enable_fsdp_float8_all_gather`): the parameter all-gathers
    /// of the distributed optimizer or of ZeRO-3 / FSDP move the fp8 weights, 1 byte per parameter instead of 2.
    /// Needs precision fp8 and `distributed_optimizer` or `zero_stage` 3. Default `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fp8_param_gather: bool,
    /// CUDA graphs (Megatron-LM `--cuda-graph-impl` / `--cuda-graph-scope`): `none` (the default), `per_layer`
    /// (each transformer layer's forward and backward replayed as one graph) or `full_iteration` (the whole
    /// forward-backward as one graph) — [`crate::llm::cuda_graphs::CudaGraphs`]. Only under `megatron` and `nemo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_graphs: Option<crate::llm::cuda_graphs::CudaGraphs>,
    /// The attention kernel (Megatron-LM's `--attention-backend`): `fused` (Transformer Engine's cuDNN /
    /// FlashAttention-3-class fused attention), `flash2` (FlashAttention-2, PyTorch SDPA's flash backend),
    /// `flash1` (FlashAttention v1) or `triton` (FlashAttention's Triton port, llm-foundry's `attn_impl:
    /// triton`) — [`crate::llm::framework::AttentionKernel`]. Needs `model.attention` `flash`. Default: the
    /// framework's (`fused` under megatron, nemo and deepspeed; `flash2` under torchtitan and hf).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_backend: Option<crate::llm::framework::AttentionKernel>,
}

impl Default for ParallelSpec {
    /// The defaults a request gets for every field it leaves out (S1's configuration on one GPU).
    fn default() -> Self {
        ParallelSpec {
            tp: 1,
            pp: 1,
            dp: 1,
            micro_batch: 1,
            grad_accum: None,
            global_batch: None,
            zero_stage: 1,
            sequence_parallel: false,
            virtual_stages: 1,
            recompute: Recompute::None,
            distributed_optimizer: false,
            overlap_grad_reduce: false,
            overlap_param_gather: false,
            align_param_gather: false,
            bucket_size: None,
            tp_comm_overlap: false,
            overlap_p2p_comm: false,
            context_parallel: 1,
            cp_comm_type: None,
            hierarchical_context_parallel_sizes: None,
            layer_split: None,
            num_layers_in_first_pipeline_stage: None,
            num_layers_in_last_pipeline_stage: None,
            account_for_embedding_in_pipeline_split: false,
            account_for_loss_in_pipeline_split: false,
            torch_compile: None,
            optimizer: None,
            grad_reduce_in_fp32: None,
            fp8_recipe: None,
            fp8_param_gather: false,
            cuda_graphs: None,
            attention_backend: None,
            recompute_modules: None,
            ep: 1,
            expert_tp: None,
            moe_token_dispatcher: None,
            overlap_moe_expert_parallel_comm: false,
            moe_shared_expert_overlap: false,
            moe_router_force_load_balancing: false,
            moe_load_imbalance: None,
            moe_expert_capacity_factor: None,
            moe_pad_expert_input_to_capacity: false,
            moe_grouped_gemm: false,
        }
    }
}

impl ParallelSpec {
    /// The request's framework options.
    pub fn framework_options(&self) -> FrameworkOptions {
        FrameworkOptions {
            torch_compile: self.torch_compile,
            optimizer: self.optimizer,
            grad_reduce_in_fp32: self.grad_reduce_in_fp32,
            moe_token_dispatcher: self.moe_token_dispatcher,
            cuda_graphs: self.cuda_graphs,
            attention_backend: self.attention_backend,
        }
    }

    /// The request's Megatron-Core split options.
    pub fn megatron_split(&self) -> MegatronSplit {
        MegatronSplit {
            first: self.num_layers_in_first_pipeline_stage,
            last: self.num_layers_in_last_pipeline_stage,
            embedding: self.account_for_embedding_in_pipeline_split,
            loss: self.account_for_loss_in_pipeline_split,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_without_parallel_fields_gets_the_default_spec() {
        // Every serde default is the Default impl's (S1's configuration on one GPU), the split options included.
        let empty: ParallelSpec = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(empty, ParallelSpec::default());
        assert!(empty.megatron_split().is_even());
        let p: ParallelSpec = serde_json::from_value(serde_json::json!({"num_layers_in_last_pipeline_stage": 10,
            "account_for_embedding_in_pipeline_split": true}))
        .unwrap();
        assert_eq!(p.megatron_split(), MegatronSplit { first: None, last: Some(10), embedding: true, loss: false });
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = serde_json::from_value::<ParallelSpec>(serde_json::json!({"tp": 2, "tensor_parallel": 2}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `tensor_parallel`"), "{err}");
        let ok: ParallelSpec = serde_json::from_value(serde_json::json!({"recompute": "selective",
            "sequence_parallel": true, "virtual_stages": 2, "layer_split": "uniform"}))
        .unwrap();
        assert_eq!((ok.recompute, ok.layer_split), (Recompute::Selective, Some(LayerSplit::Uniform)));
        assert!(serde_json::from_value::<ParallelSpec>(serde_json::json!({"recompute": "some"})).is_err());
    }
}

//! How a training request runs the model ([`ParallelSpec`]): the parallel degrees, the batch, ZeRO, and every
//! Megatron-LM / framework training option, with the choices some of them take ([`Recompute`], [`LayerSplit`],
//! [`MegatronSplit`]).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::options::with_training_options;
use crate::llm::framework::FrameworkOptions;

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

// Its own fields here; the training options it shares with a search's `training` are declared once in
// `options.rs` and follow them.
with_training_options! {
    /// The parallel configuration: tensor (tp), pipeline (pp), data (dp) and context (cp) parallel degrees, the
    /// micro-batch, the micro-batches per step, and the Megatron-LM training options.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    #[schema(example = json!({"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4, "grad_accum": 16, "zero_stage": 1}))]
    pub struct ParallelSpec {
        /// Tensor (model) parallel degree, S1's mp. Default 1.
        #[serde(default = "super::options::one")]
        pub tp: u32 = 1,
        /// Pipeline stages. Default 1.
        #[serde(default = "super::options::one")]
        pub pp: u32 = 1,
        /// Data-parallel degree. Default 1.
        #[serde(default = "super::options::one")]
        pub dp: u32 = 1,
        /// Sequences per micro-batch, b. Default 1.
        #[serde(default = "super::options::one")]
        pub micro_batch: u32 = 1,
        /// Micro-batches per optimizer step per data-parallel rank, m (gradient accumulation steps). Give this or
        /// `global_batch`; default 1.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub grad_accum: Option<u32> = None,
        /// Sequences per optimizer step over all data-parallel ranks = micro_batch · grad_accum · dp.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub global_batch: Option<u32> = None,
        /// Megatron-LM sequence parallelism (Korthikanti et al. 2022, §4.2.2): the norms and dropouts run on
        /// seq_len/tp tokens per rank, and every tensor-parallel all-reduce becomes a reduce-scatter plus an
        /// all-gather of the same total volume. Needs tp > 1 to matter. Default `false`.
        #[serde(default)]
        pub sequence_parallel: bool = false,
        /// Model chunks per pipeline stage for the interleaved 1F1B schedule (Narayanan et al. 2021, §2.2.2): the
        /// bubble shrinks by this factor, the pipeline sends grow by it. Needs pp > 1, layers divisible by
        /// pp·virtual_stages and micro-batches per step divisible by pp. Default 1 (plain 1F1B).
        #[serde(default = "super::options::one")]
        pub virtual_stages: u32 = 1,
        /// Activation recomputation `none`, `selective` or `full` (Korthikanti et al. 2022). Default `none` (S1).
        #[serde(default)]
        pub recompute: Recompute = Recompute::None,
        /// Context-parallel degree cp (Megatron-Core / NeMo ring attention): every sequence is split over cp ranks,
        /// the keys and values circulate around the ring during attention, gradients are reduced over dp·cp. GPUs =
        /// tp·cp·pp·dp. Needs `model.attention` = `flash`. Default 1.
        #[serde(default = "super::options::one")]
        pub context_parallel: u32 = 1,
        /// Megatron-Core's `hierarchical_context_parallel_sizes` for `cp_comm_type` `a2a+p2p`: `[a2a, p2p]`, the
        /// all-to-all group of a adjacent cp ranks and the ring over the cp/a groups; a·p2p = context_parallel.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub hierarchical_context_parallel_sizes: Option<Vec<u32>> = None,
        /// How layers are divided among stages: `s1` (S1 eq. 3–5) or `uniform` (Megatron-Core, with the four options
        /// below). Default `s1` with virtual_stages = 1 and none of the options below, `uniform` otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub layer_split: Option<LayerSplit> = None,
        /// Megatron-Core's `recompute_modules` under `recompute` `selective`: which submodules re-run in the backward
        /// pass (`core_attn`, `moe_act`, `layernorm`, `mla_up_proj`, `mlp`, `moe`, `shared_experts`;
        /// [`crate::llm::moe::RecomputeModule`]). Default `["core_attn"]` (Megatron-Core's and perfcast's selective
        /// recompute).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub recompute_modules: Option<Vec<crate::llm::moe::RecomputeModule>> = None,
        /// Expert-parallel degree (Megatron-Core `expert_model_parallel_size`): each MoE layer's routed experts are
        /// sharded over ep ranks of a pipeline stage. Default 1.
        #[serde(default = "super::options::one")]
        pub ep: u32 = 1,
        /// Expert-tensor-parallel degree (Megatron-Core `expert_tensor_parallel_size`): each expert's MLP split over
        /// expert_tp ranks. The expert-data-parallel size follows by MoE parallel folding: tp·cp·dp / (expert_tp·ep).
        /// Default tp.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub expert_tp: Option<u32> = None,
        /// Megatron-Core's `moe_token_dispatcher_type`: `allgather` (the default), `alltoall`, or the flex dispatcher's
        /// `deepep` / `hybridep` backends ([`crate::llm::moe::Dispatcher`]). Under another `framework`, one of its
        /// dispatchers, default `alltoall` ([`crate::llm::framework::Framework::moe_dispatchers`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub moe_token_dispatcher: Option<crate::llm::moe::Dispatcher> = None,
        /// Megatron-Core's `moe_shared_expert_overlap`: the shared experts compute while the all-to-alls run (alltoall
        /// dispatcher). Default `false`.
        #[serde(default)]
        pub moe_shared_expert_overlap: bool = false,
        /// Megatron-Core's `moe_hybridep_num_sms`: the SMs HybridEP's dispatch and combine kernels run on
        /// (`moe_token_dispatcher` `hybridep` only). perfcast times them at the rates DeepEP's
        /// `docs/README_Hybrid-EP.md` measured at 16 and at 32 SMs ([`crate::llm::moe::nvlink`]), so 16 or 32.
        /// NeMo / Megatron-Bridge's performance recipes set 32 (`scripts/performance/utils/overrides.py`
        /// `_set_common_perf_overrides`). Default 16 (Megatron-Core's, `transformer_config.py`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub moe_hybridep_num_sms: Option<u32> = None,
        /// Megatron-Core's `moe_grouped_gemm`: the local experts run as one grouped GEMM (TEGroupedMLP) instead of one
        /// GEMM per expert (SequentialMLP). Default `false` (Megatron-Core's default).
        #[serde(default)]
        pub moe_grouped_gemm: bool = false,
        /// Megatron-Core's `num_layers_in_first_pipeline_stage` (Megatron-LM `--decoder-first-pipeline-num-layers`):
        /// transformer layers on the first stage (split evenly over its virtual_stages chunks); the other stages
        /// share the rest evenly (`transformer_block.py` `get_num_layers_to_build`). Needs pp > 1; not with the
        /// `account_for_*` options. Default: the even share.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub num_layers_in_first_pipeline_stage: Option<u32> = None,
        /// Megatron-Core's `num_layers_in_last_pipeline_stage` (`--decoder-last-pipeline-num-layers`), as
        /// `num_layers_in_first_pipeline_stage` for the last stage. Default: the even share.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub num_layers_in_last_pipeline_stage: Option<u32> = None,
        /// Megatron-LM's `--fp8-param-gather` (torchtitan: `enable_fsdp_float8_all_gather`): the parameter all-gathers
        /// of the distributed optimizer or of ZeRO-3 / FSDP move the fp8 weights, 1 byte per parameter instead of 2.
        /// Needs precision fp8 and `distributed_optimizer` or `zero_stage` 3. Default `false`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pub fp8_param_gather: bool = false,
        /// Megatron-Core's `pipeline_model_parallel_layout` (Megatron-LM `--pipeline-model-parallel-layout`;
        /// `pipeline_parallel_layer_layout.py` `PipelineParallelLayerLayout`): what every virtual pipeline stage
        /// builds, `E` embedding, `t` transformer layer, `m` MTP layer, `L` loss, `|` between virtual stages (listed
        /// 0 … pp·virtual_stages − 1; virtual stage i is chunk i / pp of stage i mod pp), `(…)*N` and `x*N` repeats,
        /// commas cosmetic; e.g. DeepSeek-V3 on pp 8 · virtual_stages 4 `"Et|(tt|)*30mL"`
        /// ([`crate::llm::pipeline_layout`]). Needs pp·virtual_stages virtual stages, the model's layers and MTP
        /// layers, E first and L last; not with `num_layers_in_first/last_pipeline_stage`, `account_for_*` or
        /// `layer_split` `s1`. Default: none (Megatron-Core's split).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub pipeline_model_parallel_layout: Option<String> = None,
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

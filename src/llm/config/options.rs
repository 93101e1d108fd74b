//! The Megatron-LM / framework training options that a training request's `parallelism` ([`super::ParallelSpec`])
//! and a search's `training` ([`crate::llm::search::SearchTraining`]) both take, declared once.
//!
//! [`with_training_options!`] declares a request struct from its own fields followed by these shared ones, each
//! written once with its doc comment (the OpenAPI description), its serde attributes (wire name, default, when it
//! is left out of the JSON) and its Rust default. It also writes the struct's `Default` (every field's default:
//! what a request that leaves the field out gets) and, for a struct that names a target
//! (`into ParallelSpec;`), `copy_training_options` that copies the shared options into a [`super::ParallelSpec`].
//! So a new shared option is one entry below: both requests, their defaults and the search's candidates get it.
//!
//! The fields stay fields of each struct (not a `#[serde(flatten)]`ed struct): serde buffers a flattened
//! struct's fields and deserializes them after the map, so an error in one of them would lose its path
//! (`parallelism.zero_stage` would become `parallelism`) and its line and column, and an unknown field would no
//! longer list the expected ones. Declared in place, the wire format and its errors are a plain struct's.

/// serde's default of the counts that default to 1.
pub(crate) fn one() -> u32 {
    1
}

/// Declares `struct $name` with the fields given, each written `/// doc`, `#[serde(…)]`, `pub name: Type =
/// default,`, followed by the shared training options (see the module doc); derives `Default` from the defaults
/// given. Preceded by `into Target;`, it also writes `copy_training_options(&self, &mut Target)`.
macro_rules! with_training_options {
    (into $target:ty; $($rest:tt)*) => {
        $crate::llm::config::options::with_training_options!(@struct [$target] $($rest)*);
    };
    (@struct [$($target:ty)?]
        $(#[$m:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fm:meta])* $fvis:vis $f:ident : $t:ty = $d:expr, )*
        }
    ) => {
        $crate::llm::config::options::with_training_options!(@emit [$($target)?]
            [$(#[$m])* $vis struct $name]
            [$( $(#[$fm])* $fvis $f : $t = $d, )*]
            // The shared options, one entry each, written at a struct field's indentation (a doc comment's line
            // breaks are kept in its OpenAPI description).
            [
    /// ZeRO stage 0–3 (Rajbhandari et al. 2020; S1: 1). Stage ≥ 1 partitions the optimizer states over the
    /// data-parallel ranks and all-gathers the updated parameters; stage ≥ 2 also partitions the gradients and
    /// reduce-scatters them during every micro-batch's backward; stage 3 also partitions the parameters and
    /// all-gathers them before every micro-batch's forward and backward.
    #[serde(default = "crate::llm::config::options::one")]
    pub zero_stage: u32 = 1,
    /// Megatron-Core's distributed optimizer: optimizer states sharded over the data-parallel ranks (ZeRO-1
    /// memory), gradients reduce-scattered instead of all-reduced, updated parameters all-gathered. Needs
    /// zero_stage ≥ 1. Default `false`.
    #[serde(default)]
    pub distributed_optimizer: bool = false,
    /// Megatron-Core's `overlap_grad_reduce`: the data-parallel gradient reduction runs in buckets during the last
    /// micro-batch's backward, so only what outlasts that backward (at least the last bucket) is exposed.
    /// Default `false` (S1: the first stage's reduction follows the pipeline flush).
    #[serde(default)]
    pub overlap_grad_reduce: bool = false,
    /// Megatron-Core's `overlap_param_gather` (distributed optimizer): the updated parameters are all-gathered
    /// at the start of the next iteration, bucket by bucket ahead of the forward pass that needs them
    /// (`param_and_grad_buffer.py`: finishing bucket i's gather dispatches bucket i + 1's), instead of after the
    /// optimizer step; only the first bucket, and what outlasts the first micro-batch's forward, is exposed.
    /// Needs `distributed_optimizer` and `overlap_grad_reduce` (Megatron-LM `arguments.py`). Default `false`.
    #[serde(default)]
    pub overlap_param_gather: bool = false,
    /// Megatron-Core's `align_param_gather`: every pipeline stage launches its parameter all-gathers at the
    /// iteration's start (so the later stages' gathers hide behind the pipeline fill) instead of at its own first
    /// forward. NeMo and Megatron-Bridge set it with pp > 1 and virtual_stages > 1. Default `false`.
    #[serde(default)]
    pub align_param_gather: bool = false,
    /// Megatron-Core's DDP `bucket_size`: parameters per gradient-reduction (and parameter-gather) bucket on the
    /// first pipeline stage; the other stages reduce in one bucket (`distributed_data_parallel.py`). Default
    /// max(40 M, 1 M · dp) (Megatron-Core); NeMo's communication-overlap callback uses 128 Mi (134,217,728).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_size: Option<u64> = None,
    /// Transformer Engine's `tp_comm_overlap` (userbuffers; Megatron-Core `--tp-comm-overlap`, NeMo
    /// `tp_comm_overlap`): each sequence-parallel all-gather / reduce-scatter of a layer is split in chunks and
    /// pipelined with the GEMM it feeds or follows, so only its first chunk and what outlasts that GEMM are
    /// exposed. Takes effect with `sequence_parallel` and tp > 1 (NeMo disables it otherwise). Default `false` —
    /// also what NeMo / Megatron-Bridge's performance recipes run under nvfp4, which they set to false
    /// (`scripts/performance/configs/llama/llama3_llm_pretrain.py`, `llama31_llm_pretrain.py`:
    /// `tp_comm_overlap = False if precision == "nvfp4"`).
    #[serde(default)]
    pub tp_comm_overlap: bool = false,
    /// Megatron-Core's `overlap_p2p_comm` for the interleaved schedule: pipeline sends and receives run
    /// asynchronously while the next chunk computes; the receiver waits for the data, the sender does not.
    /// Needs virtual_stages > 1 when pp > 1 (Megatron-Core refuses it for the non-interleaved schedule).
    /// Default `false`.
    #[serde(default)]
    pub overlap_p2p_comm: bool = false,
    /// Megatron-Core's `cp_comm_type` (`--cp-comm-type`, Transformer Engine's `attn_forward_func_with_cp`): how
    /// the context-parallel ranks exchange attention data — `p2p` (the K/V ring hidden behind each step's
    /// attention), `all_gather` (K/V of the whole sequence gathered, exposed; `allgather` also accepted), `a2a`
    /// (Ulysses all-to-alls of Q, K, V and O, heads per tp rank divisible by cp), `a2a+p2p` (all-to-all inside
    /// groups, ring across them; needs `hierarchical_context_parallel_sizes`). Default: the framework's —
    /// `all_gather` under torchtitan (its `context_parallel_rotate_method`), `p2p` otherwise
    /// ([`crate::llm::cp`]). No effect with context_parallel 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cp_comm_type: Option<crate::llm::cp::CpCommType> = None,
    /// Megatron-Core's `overlap_moe_expert_parallel_comm`: the combined 1F1B schedule hides each pass's
    /// dispatch and combine all-to-alls behind another micro-batch's computation. Needs ep > 1, a non-allgather
    /// dispatcher, no full recompute, and virtual_stages > 1 when pp > 1. Default `false`.
    #[serde(default)]
    pub overlap_moe_expert_parallel_comm: bool = false,
    /// Megatron-Core's `moe_router_force_load_balancing`: random router logits spread the tokens uniformly over
    /// the experts (benchmarks; what NeMo's dropless performance recipes set). Default `false`.
    #[serde(default)]
    pub moe_router_force_load_balancing: bool = false,
    /// Routed tokens of the busiest expert-parallel rank over the mean (≥ 1): the experts and the all-to-alls wait
    /// for it. Default: the statistical maximum of uniform routing ([`crate::llm::moe::routing`]), e.g. 1.02 for
    /// Qwen3-235B-A22B at ep 32 — what a balanced router reaches; give a measured value for a skewed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_load_imbalance: Option<f64> = None,
    /// Megatron-Core's `moe_expert_capacity_factor`: each expert takes at most tokens·top_k·factor/experts tokens,
    /// the rest are dropped. Default none (dropless).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_expert_capacity_factor: Option<f64> = None,
    /// Megatron-Core's `moe_pad_expert_input_to_capacity`: every expert processes exactly its capacity. Needs
    /// `moe_expert_capacity_factor`. Default `false`.
    #[serde(default)]
    pub moe_pad_expert_input_to_capacity: bool = false,
    /// Megatron-Core's `account_for_embedding_in_pipeline_split`: the embedding counts as one layer in the split,
    /// so (layers + 1 [+ 1 with the loss]) / (pp·virtual_stages) slots per model chunk and the first chunk of the
    /// first stage builds one transformer layer fewer (`get_num_layers_to_build`). NeMo / Megatron-Bridge's
    /// Llama 3.1 405B recipe sets it. Default `false`.
    #[serde(default)]
    pub account_for_embedding_in_pipeline_split: bool = false,
    /// Megatron-Core's `account_for_loss_in_pipeline_split`: the loss (final norm, LM head, cross-entropy) counts
    /// as one layer, so the last chunk of the last stage builds one transformer layer fewer. Default `false`.
    #[serde(default)]
    pub account_for_loss_in_pipeline_split: bool = false,
    /// `torch.compile` of the model (torchtitan `compile`, Hugging Face `torch_compile`): Inductor fuses the eager
    /// element-wise kernels of the norms, activations and RoPE ([`crate::llm::framework`]). Only with `framework`
    /// `torchtitan` or `hf`. Default `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_compile: Option<bool> = None,
    /// The optimizer's implementation, `fused`, `foreach` or `per_tensor` (PyTorch `torch.optim.AdamW`'s
    /// `fused` / `foreach` / for-loop). Default: the framework's ([`crate::llm::framework::Framework`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizer: Option<crate::llm::framework::OptimizerImpl> = None,
    /// Reduce the gradients in fp32 (Megatron-Core DDP `grad_reduce_in_fp32`, PyTorch FSDP `reduce_dtype`):
    /// 4 bytes per element in the data-parallel all-reduce or reduce-scatter instead of 2. Default: the
    /// framework's (Megatron-LM: true under bf16; NeMo's recipes: false; torchtitan and Hugging Face FSDP: true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_reduce_in_fp32: Option<bool> = None,
    /// Megatron-LM's `--fp8-recipe` under `precision` `fp8`: `delayed` (the default), `tensorwise` (current
    /// scaling), `blockwise` (1×128 / 128×128 block scales) or `mxfp8` (Blackwell) —
    /// [`crate::llm::recipe::Fp8Recipe`]. Needs precision fp8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_recipe: Option<crate::llm::recipe::Fp8Recipe> = None,
    /// CUDA graphs (Megatron-LM `--cuda-graph-impl` / `--cuda-graph-scope`): `none` (the default), `per_layer`
    /// (each transformer layer's forward and backward replayed as one graph) or `full_iteration` (the whole
    /// forward-backward as one graph) — [`crate::llm::cuda_graphs::CudaGraphs`]. Only under `megatron` and `nemo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_graphs: Option<crate::llm::cuda_graphs::CudaGraphs> = None,
    /// The attention kernel (Megatron-LM's `--attention-backend`): `fused` (Transformer Engine's cuDNN /
    /// FlashAttention-3-class fused attention), `flash2` (FlashAttention-2, PyTorch SDPA's flash backend),
    /// `flash1` (FlashAttention v1) or `triton` (FlashAttention's Triton port, llm-foundry's `attn_impl:
    /// triton`) — [`crate::llm::framework::AttentionKernel`]. Needs `model.attention` `flash`. Default: the
    /// framework's (`fused` under megatron, nemo and deepspeed; `flash2` under torchtitan and hf).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_backend: Option<crate::llm::framework::AttentionKernel> = None,
            ]
        );
    };
    (@emit [$($target:ty)?]
        [$(#[$m:meta])* $vis:vis struct $name:ident]
        [$( $(#[$fm:meta])* $fvis:vis $f:ident : $t:ty = $d:expr, )*]
        [$( $(#[$sm:meta])* pub $s:ident : $st:ty = $sd:expr, )*]
    ) => {
        $(#[$m])*
        $vis struct $name {
            $( $(#[$fm])* $fvis $f: $t, )*
            $( $(#[$sm])* pub $s: $st, )*
        }

        impl Default for $name {
            /// The defaults a request gets for every field it leaves out.
            fn default() -> Self {
                $name { $( $f: $d, )* $( $s: $sd, )* }
            }
        }

        $crate::llm::config::options::with_training_options!(@copy $name [$($target)?] [$($s)*]);
    };
    (@copy $name:ident [] [$($s:ident)*]) => {};
    (@copy $name:ident [$target:ty] [$($s:ident)*]) => {
        impl $name {
            /// Copies the shared training options ([`crate::llm::config::options`]) into `spec`, as they are.
            pub fn copy_training_options(&self, spec: &mut $target) {
                $( spec.$s = self.$s; )*
            }
        }
    };
    ($($rest:tt)*) => {
        $crate::llm::config::options::with_training_options!(@struct [] $($rest)*);
    };
}

pub(crate) use with_training_options;

#[cfg(test)]
mod tests {
    use crate::llm::config::{LayerSplit, ParallelSpec};
    use crate::llm::search::SearchTraining;

    #[test]
    fn a_shared_option_reads_the_same_in_both_requests_and_copies_over() {
        // One body of shared options, read as a training request's `parallelism` and as a search's `training`:
        // the search's, copied into an otherwise default `parallelism`, is the request's.
        let body = serde_json::json!({"zero_stage": 3, "bucket_size": 134_217_728u64, "cp_comm_type": "a2a",
            "moe_load_imbalance": 1.1, "attention_backend": "flash2", "torch_compile": true,
            "overlap_grad_reduce": true});
        let spec: ParallelSpec = serde_json::from_value(body.clone()).unwrap();
        let search: SearchTraining = serde_json::from_value(body).unwrap();
        let mut copied = ParallelSpec::default();
        search.copy_training_options(&mut copied);
        assert_eq!(copied, spec);
        assert_eq!((spec.zero_stage, spec.bucket_size, spec.moe_load_imbalance), (3, Some(134_217_728), Some(1.1)));
        assert!(spec.overlap_grad_reduce && !spec.distributed_optimizer);
    }

    #[test]
    fn each_request_keeps_its_own_defaults() {
        // The generated `Default` is what an empty body reads as, for both structs.
        let search: SearchTraining = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(search, SearchTraining::default());
        // Shared: ZeRO-1. Own: the search defaults to Megatron's uniform split and grouped GEMMs, a request to S1's
        // split (resolved later) and Megatron-Core's SequentialMLP.
        let spec = ParallelSpec::default();
        assert_eq!((search.zero_stage, spec.zero_stage), (1, 1));
        assert_eq!((search.layer_split, spec.layer_split), (LayerSplit::Uniform, None));
        assert_eq!((search.moe_grouped_gemm, spec.moe_grouped_gemm), (true, false));
    }

    #[test]
    fn an_error_in_a_shared_option_names_its_field() {
        // Declared in place (not flattened), a shared option's error keeps its path and an unknown field still
        // lists the expected ones — what the API's 422 reports.
        let mut de = serde_json::Deserializer::from_str(r#"{"tp": 2, "zero_stage": "x"}"#);
        let e = serde_path_to_error::deserialize::<_, ParallelSpec>(&mut de).unwrap_err();
        assert_eq!(e.path().to_string(), "zero_stage");
        assert!(e.inner().to_string().contains("expected u32"), "{}", e.inner());
        let mut de = serde_json::Deserializer::from_str(r#"{"zero_stge": 1}"#);
        let e = serde_path_to_error::deserialize::<_, SearchTraining>(&mut de).unwrap_err();
        assert!(e.inner().to_string().contains("unknown field `zero_stge`, expected one of"), "{}", e.inner());
    }
}

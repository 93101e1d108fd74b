//! The validated configuration a prediction runs on ([`TrainingConfig`]): the request with every default
//! resolved and every derived count filled in, and what follows from it (GPUs, gradient ranks, which overlaps are
//! in effect, the precisions).

use super::{LayerSplit, MegatronSplit, ModelSpec, Recompute};
use crate::hw::Precision;
use crate::llm::framework::{FrameworkOptions, FrameworkTraits};

/// A validated configuration with every derived count and default filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingConfig {
    pub model: ModelSpec,
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    /// Context-parallel degree.
    pub cp: u32,
    /// How the context-parallel ranks communicate ([`crate::llm::cp::CpComm`]).
    pub cp_comm: crate::llm::cp::CpComm,
    pub micro_batch: u32,
    /// Micro-batches per step, m.
    pub grad_accum: u32,
    /// micro_batch · grad_accum · dp.
    pub global_batch: u64,
    pub zero_stage: u32,
    pub precision: Precision,
    /// How the fp8 GEMMs are scaled (delayed unless the request names another; [`crate::llm::recipe`]).
    pub fp8_recipe: crate::llm::recipe::Fp8Recipe,
    /// The parameter all-gathers move fp8 weights ([`TrainingConfig::param_gather_bytes`]).
    pub fp8_param_gather: bool,
    /// Key/value heads (= heads without GQA).
    pub kv_heads: u32,
    /// MLP hidden width.
    pub ffn_hidden: u32,
    pub sequence_parallel: bool,
    /// Model chunks per stage (1 = plain 1F1B).
    pub virtual_stages: u32,
    pub recompute: Recompute,
    pub distributed_optimizer: bool,
    pub overlap_grad_reduce: bool,
    /// Parameter all-gather overlapped with the next forward (validated: needs the distributed optimizer and
    /// overlapped gradient reduction).
    pub overlap_param_gather: bool,
    /// Every stage launches its parameter all-gathers at the iteration's start.
    pub align_param_gather: bool,
    /// Parameters per gradient bucket on the first stage ([`ParallelSpec::bucket_size`], default resolved).
    ///
    /// [`ParallelSpec::bucket_size`]: super::ParallelSpec::bucket_size
    pub bucket_params: f64,
    /// Tensor-parallel communication overlapped with the adjacent GEMMs (requested; in effect with SP, see
    /// [`TrainingConfig::tp_overlap`]).
    pub tp_comm_overlap: bool,
    /// Pipeline sends overlapped with computation (validated: interleaved schedule only when pp > 1).
    pub overlap_p2p_comm: bool,
    pub layer_split: LayerSplit,
    /// Dims per attention head (hidden / heads unless the model says otherwise).
    pub head_dim: u32,
    /// Submodules recomputed under selective recompute (`[core_attn]` by default; empty otherwise).
    pub recompute_modules: Vec<crate::llm::moe::RecomputeModule>,
    /// The mixture-of-experts layers and how they run ([`crate::llm::moe::MoeTraining`]); `None` for a dense
    /// model.
    pub moe: Option<crate::llm::moe::MoeTraining>,
    /// Megatron-Core's uneven-split options (with `LayerSplit::Uniform`; all unset otherwise).
    pub split: MegatronSplit,
    /// Megatron-Core's custom pipeline layout, when the request gives one (with `LayerSplit::Uniform`): every
    /// chunk's layers, MTP layers, embedding and loss ([`crate::llm::pipeline_layout`]).
    pub pipeline_layout: Option<crate::llm::pipeline_layout::PipelineLayout>,
    /// What the framework that runs it does ([`FrameworkTraits`]; Megatron's unless the request names another).
    pub framework: FrameworkTraits,
    /// The request's framework options, kept so the framework can be set after validation.
    pub framework_options: FrameworkOptions,
}

impl TrainingConfig {
    /// MTP layers on chunk `c` of stage `s`: where the custom pipeline layout puts them, else all on the last chunk
    /// of the last stage (Megatron-Core's `mtp_on_this_rank` without a layout).
    pub fn chunk_mtp_layers(&self, s: u32, c: u32) -> u32 {
        match &self.pipeline_layout {
            Some(l) => l.chunk(s, c).mtp,
            None if s + 1 == self.pp.max(1) && c + 1 == self.virtual_stages.max(1) => self.model.mtp_layers,
            None => 0,
        }
    }

    /// MTP layers on stage `s` (all its chunks; [`TrainingConfig::chunk_mtp_layers`]).
    pub fn stage_mtp_layers(&self, s: u32) -> u32 {
        (0..self.virtual_stages.max(1)).map(|c| self.chunk_mtp_layers(s, c)).sum()
    }

    /// GPUs used: tp · cp · pp · dp.
    pub fn gpus(&self) -> u64 {
        self.tp as u64 * self.cp as u64 * self.pp as u64 * self.dp as u64
    }

    /// Ranks over which gradients are reduced and ZeRO shards: dp · cp (Megatron-Core reduces over the
    /// data- and context-parallel ranks together).
    pub fn grad_ranks(&self) -> u32 {
        self.dp * self.cp
    }

    /// True when the pipeline is S1's: S1's layer split, no interleaving, gradients all-reduced (ZeRO ≤ 1, no
    /// distributed optimizer) after the flush without overlap. Then S1 eq. 7 is the schedule model; otherwise
    /// the schedule is simulated ([`crate::llm::pipeline`]).
    pub fn s1_pipeline(&self) -> bool {
        self.layer_split == LayerSplit::S1
            && self.virtual_stages == 1
            && self.zero_stage <= 1
            && !self.distributed_optimizer
            && !self.overlap_grad_reduce
            && !self.overlap_param_gather
            && !self.overlap_p2p()
    }

    /// Transformer Engine's TP communication overlap in effect: requested, with sequence parallelism and tp > 1.
    pub fn tp_overlap(&self) -> bool {
        self.tp_comm_overlap && self.sp()
    }

    /// Overlapped pipeline sends in effect: requested with more than one stage.
    pub fn overlap_p2p(&self) -> bool {
        self.overlap_p2p_comm && self.pp > 1
    }

    /// Megatron-Core's default DDP bucket: max(40 M, 1 M · dp) parameters (`distributed_data_parallel.py`).
    pub fn default_bucket_params(dp: u32) -> f64 {
        (40e6f64).max(1e6 * dp as f64)
    }

    /// Sequence parallelism in effect (requested and tp > 1).
    pub fn sp(&self) -> bool {
        self.sequence_parallel && self.tp > 1
    }

    /// The precision of everything that is not an FP8 / FP4 GEMM: the request's precision, or bf16 (fp16 where
    /// the GPU has no bf16) under fp8 and nvfp4 training (Transformer Engine keeps norms, softmax, attention and
    /// the LM head in 16 bits).
    pub fn non_gemm_precision(&self, has_bf16: bool) -> Precision {
        match self.precision {
            Precision::Fp8 | Precision::Nvfp4 if has_bf16 => Precision::Bf16,
            Precision::Fp8 | Precision::Nvfp4 => Precision::Fp16,
            p => p,
        }
    }

    /// Bytes per gradient element in the data-parallel reduction ([`FrameworkTraits::grad_bytes`]).
    pub fn grad_elem_bytes(&self) -> f64 {
        self.framework.grad_bytes(self.precision.bytes().max(2.0))
    }

    /// Tokens of one micro-batch on one context-parallel rank: b·l/cp.
    pub fn tokens_per_rank(&self) -> u64 {
        self.micro_batch as u64 * self.model.seq_len as u64 / self.cp.max(1) as u64
    }

    /// Whether Megatron-Core's selective recompute re-runs `module` ([`ParallelSpec::recompute_modules`]).
    ///
    /// [`ParallelSpec::recompute_modules`]: super::ParallelSpec::recompute_modules
    pub fn recomputes(&self, module: crate::llm::moe::RecomputeModule) -> bool {
        self.recompute == Recompute::Selective && self.recompute_modules.contains(&module)
    }
}

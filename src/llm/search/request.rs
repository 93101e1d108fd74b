//! The search's request and answer: what it may choose, the options every candidate shares, one candidate and
//! the configurations it returns.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::hw::Precision;
use crate::llm::config::options::with_training_options;
use crate::llm::config::{LayerSplit, MegatronSplit, ModelSpec, ParallelSpec, Recompute, RunSpec};
use crate::llm::framework::Framework;
use crate::llm::interval::Interval;
use crate::llm::report::TrainingPrediction;

fn fp16() -> Precision {
    Precision::Fp16
}

fn five() -> u32 {
    5
}

/// What the search may choose; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchConstraints {
    /// Fix the tensor-parallel degree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<u32>,
    /// Largest tensor-parallel degree. Default: the system's GPUs per node (Megatron keeps tp inside a node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tp: Option<u32>,
    /// Fix the pipeline-parallel degree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp: Option<u32>,
    /// Largest pipeline-parallel degree. Default: the model's layers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pp: Option<u32>,
    /// Micro-batch sizes to try. Default 1, 2, 4, 8 (those dividing the per-rank batch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub micro_batches: Option<Vec<u32>>,
    /// Largest virtual-stage count (interleaving) to try. Default 8; 1 disables interleaving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_virtual_stages: Option<u32>,
    /// Recomputation choices to try. Default all three.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recompute: Option<Vec<Recompute>>,
    /// Sequence-parallel choices to try (only with tp > 1). Default both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence_parallel: Option<Vec<bool>>,
    /// Context-parallel degrees to try (they need flash attention). Default 1 only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_parallel: Option<Vec<u32>>,
    /// Expert-parallel degrees to try (mixture-of-experts models). Default every degree dividing the experts and a
    /// pipeline stage's ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep: Option<Vec<u32>>,
    /// Expert-tensor-parallel degrees to try. Default 1 and the candidate's tp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_tp: Option<Vec<u32>>,
    /// Token dispatchers to try. Default `alltoall` and `deepep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_token_dispatcher: Option<Vec<crate::llm::moe::Dispatcher>>,
}

// Its own fields here; the training options it shares with a training request's `parallelism` are declared once in
// `crate::llm::config::options` and follow them.
with_training_options! {
    into ParallelSpec;
    /// Training options every candidate shares: the options of a training request's `parallelism`
    /// ([`crate::llm::config::options`]), each in effect for the candidates it applies to — `tp_comm_overlap` for those
    /// with sequence parallelism, `overlap_p2p_comm` for the interleaved ones, `cp_comm_type` for those with
    /// context_parallel > 1 (`p2p`, `all_gather` or `a2a`, candidates whose heads per tp rank cp does not divide
    /// skipped; `a2a+p2p` is not searched), `overlap_moe_expert_parallel_comm` for those that allow it (ep > 1, an
    /// all-to-all dispatcher, the interleaved schedule when pp > 1, no full recompute), the `account_for_*` split
    /// options for every `uniform` one; `bucket_size` and `moe_load_imbalance` default per candidate (max(40 M, 1 M ·
    /// dp) parameters; uniform routing's statistical maximum). Beyond those: the layer split, grouped GEMMs and fp8
    /// parameter gathers below, with the search's own defaults.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    pub struct SearchTraining {
        /// `uniform` (Megatron-LM; allows interleaving) or `s1` (S1's split, no interleaving; eq. 7). Default
        /// `uniform`.
        #[serde(default = "uniform")]
        pub layer_split: LayerSplit = LayerSplit::Uniform,
        /// Megatron-Core's `moe_grouped_gemm`. Default `true` (every MoE recipe of Megatron-Bridge sets it).
        #[serde(default = "yes")]
        pub moe_grouped_gemm: bool = true,
        /// Parameter all-gathers in fp8 (precision fp8; distributed optimizer or ZeRO-3). Default `false`.
        #[serde(default)]
        pub fp8_param_gather: bool = false,
    }
}

fn yes() -> bool {
    true
}

impl SearchTraining {
    /// The Megatron-Core split options every `uniform` candidate gets (no uneven first or last stage: those
    /// depend on pp).
    pub fn megatron_split(&self) -> MegatronSplit {
        MegatronSplit {
            embedding: self.account_for_embedding_in_pipeline_split,
            loss: self.account_for_loss_in_pipeline_split,
            ..MegatronSplit::default()
        }
    }
}

fn uniform() -> LayerSplit {
    LayerSplit::Uniform
}

/// `POST /v1/predictions/training/search`: the fastest configurations of `model` on `gpus` GPUs of `system`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"system": "dgx-h100", "gpus": 1024, "global_batch": 1536, "precision": "bf16",
    "model": {"name": "GPT-3 175B", "layers": 96, "hidden": 12288, "heads": 96, "seq_len": 2048, "vocab": 51200,
              "attention": "flash", "rotary": false, "tied_embeddings": true},
    "training": {"distributed_optimizer": true, "overlap_grad_reduce": true},
    "constraints": {"max_pp": 16}, "top_k": 3}))]
pub struct SearchRequest {
    /// Name of a stored system.
    pub system: String,
    /// The architecture, a catalog name (`"Llama-3.1-8B"`) or `{"hf_config": {…}, "seq_len": …}`
    /// ([`crate::llm::model_ref`]); resolved into the architecture while the request is read.
    #[serde(deserialize_with = "crate::llm::model_ref::deserialize_model")]
    #[schema(value_type = crate::llm::model_ref::TrainingModelInput)]
    pub model: ModelSpec,
    /// GPUs to use: tp·cp·pp·dp equals this.
    pub gpus: u64,
    /// Sequences per optimizer step.
    pub global_batch: u32,
    /// Default `fp16`.
    #[serde(default = "fp16")]
    pub precision: Precision,
    /// The framework every candidate runs under (as in a training request). Default `megatron`.
    #[serde(default)]
    pub framework: Framework,
    #[serde(default)]
    pub training: SearchTraining,
    #[serde(default)]
    pub constraints: SearchConstraints,
    /// How many configurations to return, 1–100. Default 5.
    #[serde(default = "five")]
    pub top_k: u32,
    /// Optional whole-run length for each returned configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunSpec>,
}

/// One returned configuration.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SearchHit {
    /// 1 = fastest.
    pub rank: u32,
    /// The `parallelism` object to send to `POST /v1/predictions/training`.
    pub parallelism: ParallelSpec,
    /// Predicted iteration time, s (the rank's key).
    pub iteration_time_s: f64,
    /// Its 10 %–90 % prediction interval ([`crate::llm::interval`]): configurations whose intervals overlap are
    /// not clearly ordered.
    pub interval: Interval,
    /// Memory per GPU of the fullest stage, GiB.
    pub memory_gib: f64,
    /// The full prediction (memory breakdown, stages, operators, throughput, run estimate).
    pub prediction: TrainingPrediction,
}

/// The search's answer.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SearchResult {
    /// Candidate configurations evaluated (costed, memory-checked and bounded or simulated).
    pub evaluated: u64,
    /// Of those, the ones that fit in memory.
    pub fitting: u64,
    /// Of those, the ones whose schedule was simulated to rank them exactly (the others' lower bound already
    /// exceeded the k-th best).
    pub simulated: u64,
    /// Wall-clock time of the search, s.
    pub elapsed_s: f64,
    /// evaluated / elapsed_s.
    pub candidates_per_s: f64,
    /// The fastest configurations that fit, fastest first.
    pub top: Vec<SearchHit>,
    pub warnings: Vec<String>,
}

/// One candidate: the choices beyond the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Candidate {
    pub tp: u32,
    pub cp: u32,
    pub pp: u32,
    pub dp: u32,
    pub micro_batch: u32,
    pub virtual_stages: u32,
    pub recompute: Recompute,
    pub sequence_parallel: bool,
    /// Expert-parallel degree (1 for a dense model).
    pub ep: u32,
    /// Expert-tensor-parallel degree (1 for a dense model).
    pub expert_tp: u32,
    /// Token dispatcher (ignored for a dense model).
    pub dispatcher: crate::llm::moe::Dispatcher,
    /// Whether the 1F1B expert-parallel overlap is on.
    pub overlap_ep: bool,
}

impl Candidate {
    /// The request's `parallelism` for this candidate: the shared training options as the request gives them,
    /// except those the candidate does not allow (`overlap_p2p_comm` without interleaving, the `account_for_*`
    /// split options under `s1`, the expert-parallel overlap where [`Candidate::overlap_ep`] says so).
    pub fn parallelism(&self, req: &SearchRequest) -> ParallelSpec {
        let t = &req.training;
        let mut p = ParallelSpec {
            tp: self.tp,
            pp: self.pp,
            dp: self.dp,
            micro_batch: self.micro_batch,
            global_batch: Some(req.global_batch),
            sequence_parallel: self.sequence_parallel,
            virtual_stages: self.virtual_stages,
            recompute: self.recompute,
            context_parallel: self.cp,
            layer_split: Some(t.layer_split),
            ep: self.ep,
            expert_tp: req.model.moe.is_some().then_some(self.expert_tp),
            moe_token_dispatcher: req.model.moe.is_some().then_some(self.dispatcher),
            moe_grouped_gemm: t.moe_grouped_gemm,
            fp8_param_gather: t.fp8_param_gather,
            ..ParallelSpec::default()
        };
        t.copy_training_options(&mut p);
        p.overlap_p2p_comm = t.overlap_p2p_comm && self.pp > 1 && self.virtual_stages > 1;
        p.overlap_moe_expert_parallel_comm = self.overlap_ep;
        let uniform = t.layer_split == LayerSplit::Uniform;
        p.account_for_embedding_in_pipeline_split = uniform && t.account_for_embedding_in_pipeline_split;
        p.account_for_loss_in_pipeline_split = uniform && t.account_for_loss_in_pipeline_split;
        p
    }
}

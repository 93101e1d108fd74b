//! How Megatron-Core runs a mixture-of-experts layer in parallel, with its argument names: expert parallelism
//! (`ep`, `expert_model_parallel_size`), expert tensor parallelism (`expert_tp`, `expert_tensor_parallel_size`),
//! the expert-data-parallel size MoE parallel folding derives, the token dispatcher and its overlaps, the routing
//! balance and the capacity factor, grouped GEMMs, and the resolved [`MoeTraining`] every later stage reads.
//!
//! MoE parallel folding (Megatron-Core `parallel_state.py` `initialize_model_parallel`, MoE README "MoE Parallel
//! Folding"): attention runs on the tp-cp-dp-pp grid, the MoE layers on a second grid of the same ranks in the
//! order tp-ep-dp-pp with its own sizes, `expert_tensor_parallel_size` (etp, default tp),
//! `expert_model_parallel_size` (ep) and `expert_data_parallel_size = world_size // (etp · ep · pp)` (edp), so
//! that tp·cp·dp = etp·ep·edp ranks hold one pipeline stage either way.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::spec::MoeConfig;
use crate::llm::config::{bad, ConfigError};

/// Megatron-Core's MoE token dispatcher (`moe_token_dispatcher_type`, `token_dispatcher.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Dispatcher {
    /// `MoEAllGatherTokenDispatcher` (Megatron-Core's default): every rank all-gathers the hidden states of its
    /// tensor- and expert-parallel group (tp·ep ranks), runs its local experts on the tokens routed to them, and
    /// reduce-scatters the result back.
    #[default]
    Allgather,
    /// `MoEAlltoAllTokenDispatcher`: permute → all-to-all over the expert-parallel group → all-gather over the
    /// expert-tensor-parallel group → sort by local expert; the combine mirrors it (sort → reduce-scatter →
    /// all-to-all → unpermute). One copy of a token per routed expert crosses the network.
    Alltoall,
    /// `MoEFlexTokenDispatcher` with DeepSeek's DeepEP (`moe_token_dispatcher_type flex`, `moe_enable_deepep` /
    /// `moe_flex_dispatcher_backend deepep`; `fused_a2a.py`): permutation fused into the dispatch, a token sent
    /// once per destination GPU, and across nodes once per destination node over RDMA, forwarded over NVLink
    /// inside it.
    Deepep,
    /// `MoEFlexTokenDispatcher` with NVIDIA's HybridEP (`moe_flex_dispatcher_backend hybridep`; DeepEP's
    /// `HybridEPBuffer`, `fused_a2a.py` `HybridEPDispatch`): the same fused, deduplicated dispatch over the NVLink
    /// domain and RDMA.
    Hybridep,
}

impl Dispatcher {
    /// Every dispatcher.
    pub const ALL: [Dispatcher; 4] =
        [Dispatcher::Allgather, Dispatcher::Alltoall, Dispatcher::Deepep, Dispatcher::Hybridep];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Dispatcher::Allgather => "allgather",
            Dispatcher::Alltoall => "alltoall",
            Dispatcher::Deepep => "deepep",
            Dispatcher::Hybridep => "hybridep",
        }
    }

    /// DeepEP or HybridEP: the flex dispatcher's fused, deduplicated all-to-all.
    pub fn is_flex(self) -> bool {
        matches!(self, Dispatcher::Deepep | Dispatcher::Hybridep)
    }
}

/// A submodule Megatron-Core recomputes under `recompute_granularity selective` (`recompute_modules`,
/// `transformer_config.py`; MoE README "Checkpointing").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecomputeModule {
    /// The core attention (QKᵀ, softmax, ·V or the FlashAttention forward): Megatron-Core's default and
    /// perfcast's `selective` (Korthikanti et al. 2022).
    CoreAttn,
    /// The experts' activation function (output-discarding: the SwiGLU output is recomputed from its input).
    MoeAct,
    /// The two pre-norms (input_layernorm, pre_mlp_layernorm; output-discarding).
    Layernorm,
    /// MLA's up-projections and RoPE (output-discarding).
    MlaUpProj,
    /// The dense MLP of dense layers (standard checkpointing: its input is kept, the whole MLP re-runs).
    Mlp,
    /// The whole MoE layer's MLP part (standard checkpointing: router, dispatch, experts, combine re-run,
    /// their all-to-alls included).
    Moe,
    /// The shared experts (standard checkpointing).
    SharedExperts,
}

impl RecomputeModule {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RecomputeModule::CoreAttn => "core_attn",
            RecomputeModule::MoeAct => "moe_act",
            RecomputeModule::Layernorm => "layernorm",
            RecomputeModule::MlaUpProj => "mla_up_proj",
            RecomputeModule::Mlp => "mlp",
            RecomputeModule::Moe => "moe",
            RecomputeModule::SharedExperts => "shared_experts",
        }
    }
}

/// The MoE options of a training request's `parallelism`, as given (the fields of
/// [`crate::llm::config::ParallelSpec`] that [`resolve`] reads).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoeParallelInput {
    pub ep: u32,
    pub expert_tp: Option<u32>,
    pub dispatcher: Option<Dispatcher>,
    pub overlap_ep_comm: bool,
    pub shared_expert_overlap: bool,
    pub hybridep_num_sms: Option<u32>,
    pub force_load_balancing: bool,
    pub load_imbalance: Option<f64>,
    pub capacity_factor: Option<f64>,
    pub pad_to_capacity: bool,
    pub grouped_gemm: bool,
}

/// Megatron-Core's default `moe_hybridep_num_sms` (`transformer_config.py`: "In pure NVL scenarios, 16 SMs can
/// generally achieve good bandwidth").
pub const HYBRIDEP_DEFAULT_SMS: u32 = 16;

/// The SM counts of HybridEP's measured rates (DeepEP `docs/README_Hybrid-EP.md`, "GB200 Platform": 16 and 32 SMs;
/// [`super::nvlink`]): the values `moe_hybridep_num_sms` may take.
pub const HYBRIDEP_MEASURED_SMS: [u32; 2] = [16, 32];

/// The resolved MoE training configuration every later stage reads.
#[derive(Debug, Clone, PartialEq)]
pub struct MoeTraining {
    /// The model's MoE layers.
    pub config: MoeConfig,
    /// Expert-parallel degree: experts sharded over ep ranks (E/ep each).
    pub ep: u32,
    /// Expert-tensor-parallel degree: each expert's MLP split over etp ranks.
    pub etp: u32,
    /// Expert-data-parallel degree (folding): tp·cp·dp / (etp·ep); expert gradients are reduced and their
    /// optimizer states sharded over these ranks.
    pub edp: u32,
    pub dispatcher: Dispatcher,
    /// Megatron-Core's `overlap_moe_expert_parallel_comm`: the combined 1F1B schedule runs one micro-batch's
    /// forward beside another's backward, each pass's all-to-alls hidden behind the other's computation.
    pub overlap_ep_comm: bool,
    /// Megatron-Core's `moe_shared_expert_overlap`: the shared experts compute while the dispatch and combine
    /// all-to-alls run.
    pub shared_expert_overlap: bool,
    /// Megatron-Core's `moe_hybridep_num_sms` as the request gave it (16 or 32; `None`: Megatron-Core's default
    /// 16, [`MoeTraining::hybridep_sms`]).
    pub hybridep_num_sms: Option<u32>,
    /// Megatron-Core's `moe_router_force_load_balancing`: random router logits, tokens spread uniformly.
    pub force_load_balancing: bool,
    /// Routed token copies of the busiest expert-parallel rank over the mean, ≥ 1 (see
    /// [`super::routing::busiest_rank_factor`]).
    pub imbalance: f64,
    /// Megatron-Core's `moe_expert_capacity_factor`: tokens over capacity = tokens·K·factor/E per expert are
    /// dropped.
    pub capacity_factor: Option<f64>,
    /// Megatron-Core's `moe_pad_expert_input_to_capacity`: every expert processes exactly its capacity.
    pub pad_to_capacity: bool,
    /// Megatron-Core's `moe_grouped_gemm`: one grouped GEMM over the local experts (TEGroupedMLP) instead of one
    /// GEMM per expert (SequentialMLP).
    pub grouped_gemm: bool,
}

impl MoeTraining {
    /// Tests' MoE layout: `config` on `ep` × `etp` ranks, expert data parallelism `edp`, `dispatcher`, force-balanced
    /// routing (imbalance 1), grouped GEMMs, no overlaps, no capacity factor.
    #[cfg(test)]
    pub(crate) fn balanced(config: MoeConfig, (ep, etp, edp): (u32, u32, u32), dispatcher: Dispatcher) -> MoeTraining {
        MoeTraining {
            config,
            ep,
            etp,
            edp,
            dispatcher,
            overlap_ep_comm: false,
            shared_expert_overlap: false,
            hybridep_num_sms: None,
            force_load_balancing: true,
            imbalance: 1.0,
            capacity_factor: None,
            pad_to_capacity: false,
            grouped_gemm: true,
        }
    }

    /// The SMs HybridEP's kernels run on: the request's `moe_hybridep_num_sms`, else Megatron-Core's default
    /// [`HYBRIDEP_DEFAULT_SMS`].
    pub fn hybridep_sms(&self) -> u32 {
        self.hybridep_num_sms.unwrap_or(HYBRIDEP_DEFAULT_SMS)
    }

    /// Experts on one GPU, E/ep.
    pub fn local_experts(&self) -> u32 {
        self.config.experts / self.ep.max(1)
    }

    /// Re-derives the configuration for another expert layout (the search's candidates): `ep`, `etp` and
    /// `dispatcher`, the folded expert-data-parallel size of a stage of `ranks_per_stage` ranks, and the default
    /// load factor for `tokens_per_rank` tokens entering a layer per GPU (unless `imbalance` is given). The
    /// caller checks divisibility (as [`resolve`] does).
    pub fn reconfigure(
        &mut self,
        ep: u32,
        etp: u32,
        dispatcher: Dispatcher,
        ranks_per_stage: u64,
        tokens_per_rank: u64,
        imbalance: Option<f64>,
    ) {
        let c = &self.config;
        self.ep = ep.max(1);
        self.etp = etp.max(1);
        self.dispatcher = dispatcher;
        self.edp = (ranks_per_stage / (self.ep as u64 * self.etp as u64)).max(1) as u32;
        self.imbalance = imbalance.unwrap_or_else(|| {
            super::routing::busiest_rank_factor(
                tokens_per_rank as f64 * c.top_k as f64 * self.etp as f64,
                self.ep,
                c.experts,
                c.top_k,
            )
        });
    }

    /// Routed copies of one token the busiest rank's experts process, relative to the mean K: the imbalance
    /// factor, capped by the capacity factor when tokens are dropped, exactly the capacity factor when inputs are
    /// padded to capacity (Megatron-Core `moe_utils.py` `get_capacity`; MoE README "Token Dispatch Mechanism").
    pub fn load_factor(&self) -> f64 {
        match (self.capacity_factor, self.pad_to_capacity) {
            (Some(c), true) => c,
            (Some(c), false) => self.imbalance.min(c),
            (None, _) => self.imbalance,
        }
    }
}

/// Validates and resolves the MoE options for a model with `moe` on a configuration of tensor-parallel degree `tp`,
/// `ranks_per_stage` = tp·cp·dp ranks per pipeline stage, `tokens_per_rank` tokens entering an MoE layer on one
/// GPU per micro-batch. Errors name the field (`parallelism.ep`, …): ep not dividing the experts or the stage's
/// ranks with etp, etp not dividing the expert width, tp > 1 with ep > 1 without sequence parallelism (Megatron-LM
/// `arguments.py`), the overlaps' requirements (`overlap_moe_expert_parallel_comm`: ep > 1, an all-to-all or flex
/// dispatcher, no full recompute, the interleaved schedule with pp > 1; `moe_shared_expert_overlap`: the
/// alltoall dispatcher and shared experts), `moe_hybridep_num_sms` without the hybridep dispatcher or outside
/// [`HYBRIDEP_MEASURED_SMS`], an imbalance below 1 or a capacity factor ≤ 0.
#[allow(clippy::too_many_arguments)]
pub fn resolve(
    moe: &MoeConfig,
    p: &MoeParallelInput,
    tp: u32,
    ranks_per_stage: u64,
    sequence_parallel: bool,
    full_recompute: bool,
    pp: u32,
    virtual_stages: u32,
    tokens_per_rank: u64,
) -> Result<MoeTraining, ConfigError> {
    let ep = p.ep;
    if ep == 0 {
        return Err(bad("parallelism.ep", "must be at least 1"));
    }
    if moe.experts % ep != 0 {
        return Err(bad(
            "parallelism.ep",
            format!("ep {ep} does not divide the {} experts: every rank needs the same experts", moe.experts),
        ));
    }
    let etp = p.expert_tp.unwrap_or(tp);
    if etp == 0 {
        return Err(bad("parallelism.expert_tp", "must be at least 1"));
    }
    if moe.expert_ffn_hidden % etp != 0 {
        return Err(bad(
            "parallelism.expert_tp",
            format!("expert_tp {etp} does not divide the experts' width {}", moe.expert_ffn_hidden),
        ));
    }
    let group = etp as u64 * ep as u64;
    if ranks_per_stage % group != 0 {
        return Err(bad(
            "parallelism.ep",
            format!(
                "expert_tp·ep = {etp}·{ep} = {group} must divide the {ranks_per_stage} ranks of a pipeline stage \
                 (tp·cp·dp): MoE parallel folding re-divides the same ranks"
            ),
        ));
    }
    if tp > 1 && ep > 1 && !sequence_parallel {
        return Err(bad(
            "parallelism.sequence_parallel",
            "Megatron-Core needs sequence parallelism when tensor and expert parallelism are combined",
        ));
    }
    let dispatcher = p.dispatcher.unwrap_or_default();
    if p.overlap_ep_comm {
        let why = if ep < 2 {
            Some("needs expert parallelism (ep > 1)")
        } else if dispatcher == Dispatcher::Allgather {
            Some("needs the alltoall, deepep or hybridep dispatcher")
        } else if full_recompute {
            Some("is incompatible with full recomputation (Megatron-LM arguments.py)")
        } else if pp > 1 && virtual_stages < 2 {
            Some("needs the interleaved schedule (virtual_stages > 1) when pp > 1")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(bad(
                "parallelism.overlap_moe_expert_parallel_comm",
                format!("overlap_moe_expert_parallel_comm {why}"),
            ));
        }
    }
    if p.shared_expert_overlap {
        if moe.shared_ffn_hidden == 0 {
            return Err(bad("parallelism.moe_shared_expert_overlap", "the model has no shared experts"));
        }
        if dispatcher != Dispatcher::Alltoall {
            return Err(bad(
                "parallelism.moe_shared_expert_overlap",
                "Megatron-Core overlaps the shared experts only with the alltoall dispatcher",
            ));
        }
    }
    if let Some(sms) = p.hybridep_num_sms {
        if dispatcher != Dispatcher::Hybridep {
            return Err(bad(
                "parallelism.moe_hybridep_num_sms",
                format!(
                    "moe_hybridep_num_sms sets HybridEP's SMs: it needs moe_token_dispatcher hybridep, not {}",
                    dispatcher.as_str()
                ),
            ));
        }
        if !HYBRIDEP_MEASURED_SMS.contains(&sms) {
            return Err(bad(
                "parallelism.moe_hybridep_num_sms",
                format!(
                    "perfcast times HybridEP at the rates measured with 16 and 32 SMs (DeepEP README_Hybrid-EP, \
                     GB200); got {sms}"
                ),
            ));
        }
    }
    if let Some(g) = p.load_imbalance {
        if !(g.is_finite() && g >= 1.0) {
            return Err(bad(
                "parallelism.moe_load_imbalance",
                format!("the busiest rank's share over the mean, ≥ 1; got {g}"),
            ));
        }
    }
    if let Some(c) = p.capacity_factor {
        if !(c.is_finite() && c > 0.0) {
            return Err(bad("parallelism.moe_expert_capacity_factor", format!("must be positive, got {c}")));
        }
    } else if p.pad_to_capacity {
        return Err(bad(
            "parallelism.moe_pad_expert_input_to_capacity",
            "needs moe_expert_capacity_factor (Megatron-Core pads to the capacity it sets)",
        ));
    }
    let imbalance = p.load_imbalance.unwrap_or_else(|| {
        super::routing::busiest_rank_factor(
            tokens_per_rank as f64 * moe.top_k as f64 * etp as f64,
            ep,
            moe.experts,
            moe.top_k,
        )
    });
    Ok(MoeTraining {
        config: moe.clone(),
        ep,
        etp,
        edp: (ranks_per_stage / group) as u32,
        dispatcher,
        overlap_ep_comm: p.overlap_ep_comm,
        shared_expert_overlap: p.shared_expert_overlap,
        hybridep_num_sms: p.hybridep_num_sms,
        force_load_balancing: p.force_load_balancing,
        imbalance,
        capacity_factor: p.capacity_factor,
        pad_to_capacity: p.pad_to_capacity,
        grouped_gemm: p.grouped_gemm,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::moe::spec::qwen3_235b_a22b as qwen235;

    fn input(ep: u32, etp: Option<u32>) -> MoeParallelInput {
        MoeParallelInput {
            ep,
            expert_tp: etp,
            dispatcher: Some(Dispatcher::Alltoall),
            overlap_ep_comm: false,
            shared_expert_overlap: false,
            hybridep_num_sms: None,
            force_load_balancing: true,
            load_imbalance: None,
            capacity_factor: None,
            pad_to_capacity: false,
            grouped_gemm: true,
        }
    }

    #[test]
    fn folding_derives_the_expert_data_parallel_size_by_hand() {
        // Qwen3-235B-A22B on 256 GPUs, tp 2, pp 8 (dp 16): a stage holds tp·cp·dp = 32 ranks. With expert_tp 1 and
        // ep 32: edp = 32 / (1·32) = 1 (Megatron-Core: world 256 // (etp 1 · ep 32 · pp 8) = 1). With ep 8: 4.
        let m = qwen235();
        let r = resolve(&m, &input(32, Some(1)), 2, 32, true, false, 8, 4, 2048).unwrap();
        assert_eq!((r.ep, r.etp, r.edp, r.local_experts()), (32, 1, 1, 4));
        let r = resolve(&m, &input(8, Some(1)), 2, 32, true, false, 8, 4, 2048).unwrap();
        assert_eq!(r.edp, 4);
        // expert_tp defaults to tp (2): etp·ep = 16 → edp = 2.
        let r = resolve(&m, &input(8, None), 2, 32, true, false, 8, 4, 2048).unwrap();
        assert_eq!((r.etp, r.edp), (2, 2));
    }

    #[test]
    fn impossible_moe_configurations_name_their_field() {
        let m = qwen235();
        let field = |p: MoeParallelInput, sp: bool, full: bool, pp: u32, v: u32| {
            resolve(&m, &p, 2, 32, sp, full, pp, v, 2048).unwrap_err().field
        };
        assert_eq!(field(input(3, Some(1)), true, false, 1, 1), "parallelism.ep");
        assert_eq!(field(input(64, Some(1)), true, false, 1, 1), "parallelism.ep");
        assert_eq!(field(input(8, Some(5)), true, false, 1, 1), "parallelism.expert_tp");
        assert_eq!(field(input(8, Some(1)), false, false, 1, 1), "parallelism.sequence_parallel");
        let overlap = MoeParallelInput { overlap_ep_comm: true, ..input(8, Some(1)) };
        assert_eq!(field(overlap, true, true, 1, 1), "parallelism.overlap_moe_expert_parallel_comm");
        assert_eq!(field(overlap, true, false, 8, 1), "parallelism.overlap_moe_expert_parallel_comm");
        assert!(resolve(&m, &overlap, 2, 32, true, false, 8, 4, 2048).is_ok());
        let shared = MoeParallelInput { shared_expert_overlap: true, ..input(8, Some(1)) };
        assert_eq!(field(shared, true, false, 1, 1), "parallelism.moe_shared_expert_overlap");
        // moe_hybridep_num_sms: HybridEP's only, at a measured SM count (16 or 32).
        let sms = |d: Dispatcher, n: u32| MoeParallelInput {
            dispatcher: Some(d),
            hybridep_num_sms: Some(n),
            ..input(8, Some(1))
        };
        assert_eq!(field(sms(Dispatcher::Alltoall, 32), true, false, 1, 1), "parallelism.moe_hybridep_num_sms");
        assert_eq!(field(sms(Dispatcher::Hybridep, 24), true, false, 1, 1), "parallelism.moe_hybridep_num_sms");
        assert_eq!(field(sms(Dispatcher::Hybridep, 0), true, false, 1, 1), "parallelism.moe_hybridep_num_sms");
        let r = resolve(&m, &sms(Dispatcher::Hybridep, 32), 2, 32, true, false, 1, 1, 2048).unwrap();
        assert_eq!(r.hybridep_sms(), 32);
        let hybridep = MoeParallelInput { dispatcher: Some(Dispatcher::Hybridep), ..input(8, Some(1)) };
        assert_eq!(resolve(&m, &hybridep, 2, 32, true, false, 1, 1, 2048).unwrap().hybridep_sms(), 16);
        let low = MoeParallelInput { load_imbalance: Some(0.9), ..input(8, Some(1)) };
        assert_eq!(field(low, true, false, 1, 1), "parallelism.moe_load_imbalance");
        let pad = MoeParallelInput { pad_to_capacity: true, ..input(8, Some(1)) };
        assert_eq!(field(pad, true, false, 1, 1), "parallelism.moe_pad_expert_input_to_capacity");
    }

    #[test]
    fn capacity_caps_or_sets_the_busiest_load() {
        let m = qwen235();
        let mut r = resolve(
            &m,
            &MoeParallelInput { load_imbalance: Some(1.4), ..input(8, Some(1)) },
            1,
            8,
            true,
            false,
            1,
            1,
            4096,
        )
        .unwrap();
        assert_eq!(r.load_factor(), 1.4);
        r.capacity_factor = Some(1.25);
        assert_eq!(r.load_factor(), 1.25);
        r.pad_to_capacity = true;
        r.imbalance = 1.0;
        assert_eq!(r.load_factor(), 1.25);
    }
}

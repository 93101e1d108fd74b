//! Mixture-of-experts training as Megatron-Core runs it (`megatron/core/transformer/moe/`), with multi-head
//! latent attention and multi-token prediction: the model vocabulary training and serving share ([`spec`]), the
//! parallel options and MoE parallel folding ([`parallel`]), where the expert groups sit ([`layout`]), what routing
//! does to load and traffic ([`routing`]), the dispatcher's collectives ([`dispatch`]) and the flex dispatchers' RDMA rate ([`rdma`]), an MoE layer's operators
//! ([`ops`]) and its host calls beyond them ([`launches`]), MLA's projections ([`mla`]), MTP's layer ([`mtp`]),
//! recomputation by module ([`recompute`]), the 1F1B expert-parallel overlap ([`timing`]), parameters
//! ([`params`]) and activation memory ([`memory`]).
//!
//! The training predictor's stages call in here through small hooks: validation ([`validate_training`]), the
//! decomposition (an MoE layer's and an MTP layer's operators beside the dense layer's; MoE layers per model
//! chunk, [`chunk_moe_layers`]), timing, the expert gradients' reduction over the expert-data-parallel group, the
//! memory of experts and routed tokens, and the report ([`MoeReport`]).

pub mod dispatch;
pub mod launches;
pub mod layout;
pub mod memory;
pub mod mla;
pub mod mtp;
pub mod nvlink;
pub mod ops;
pub mod parallel;
pub mod params;
pub mod rdma;
pub mod recompute;
pub mod routing;
pub mod spec;
pub mod timing;

use serde::Serialize;
use utoipa::ToSchema;

pub use parallel::{Dispatcher, MoeParallelInput, MoeTraining, RecomputeModule};
pub use spec::{validate_mla, validate_moe, MlaSpec, MoeConfig, MoeSpec};

use crate::llm::config::{bad, Activation, ConfigError, ModelSpec, ParallelSpec, Recompute, TrainingConfig};

/// What validation resolves for MoE, MLA and recomputation modules.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub moe: Option<MoeTraining>,
    pub recompute_modules: Vec<RecomputeModule>,
}

/// The shape facts [`validate_training`] needs from the rest of the configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub tp: u32,
    pub cp: u32,
    pub dp: u32,
    pub pp: u32,
    pub virtual_stages: u32,
    pub micro_batch: u32,
    pub sequence_parallel: bool,
}

/// Validates the MoE, MLA, MTP and recompute-module parts of a training request and resolves them. Errors name the
/// field: `model.moe.*` ([`validate_moe`]), `model.activation` (MoE experts are SwiGLU), `model.mla.*` (zero
/// dims), `model.mtp_layers` (more than the layers), `parallelism.ep` /
/// `parallelism.expert_tp` on a dense model, the expert-parallel options ([`parallel::resolve`]), and
/// `parallelism.recompute_modules` (without `recompute` `selective`, or naming MLA or MoE modules the model does
/// not have).
pub fn validate_training(model: &ModelSpec, par: &ParallelSpec, shape: Shape) -> Result<Resolved, ConfigError> {
    if let Some(m) = &model.mla {
        validate_mla(m, "model.mla")?;
    }
    if model.mtp_layers > model.layers {
        return Err(bad("model.mtp_layers", format!("{} MTP layers for {} layers", model.mtp_layers, model.layers)));
    }
    let recompute_modules = match (&par.recompute_modules, par.recompute) {
        (Some(_), r) if r != Recompute::Selective => {
            return Err(bad(
                "parallelism.recompute_modules",
                "recompute_modules choose what selective recompute re-runs: set recompute to selective",
            ))
        }
        (Some(list), _) => {
            let mut v = list.clone();
            v.sort();
            v.dedup();
            for m in &v {
                let ok = match m {
                    RecomputeModule::MlaUpProj => model.mla.is_some(),
                    RecomputeModule::Moe | RecomputeModule::MoeAct => model.moe.is_some(),
                    RecomputeModule::SharedExperts => {
                        model.moe.as_ref().is_some_and(|s| s.shared_experts > 0 || s.shared_ffn_hidden.is_some())
                    }
                    _ => true,
                };
                if !ok {
                    return Err(bad(
                        "parallelism.recompute_modules",
                        format!("{} is not part of this model", m.as_str()),
                    ));
                }
            }
            v
        }
        (None, Recompute::Selective) => vec![RecomputeModule::CoreAttn],
        (None, _) => Vec::new(),
    };
    let moe = match &model.moe {
        None => {
            if par.ep > 1 || par.expert_tp.is_some() {
                let field = if par.ep > 1 { "parallelism.ep" } else { "parallelism.expert_tp" };
                return Err(bad(field, "expert parallelism needs a mixture-of-experts model (model.moe)"));
            }
            None
        }
        Some(spec) => {
            if model.activation != Activation::Swiglu {
                return Err(bad("model.activation", "perfcast's MoE experts are SwiGLU MLPs: set activation swiglu"));
            }
            let config = validate_moe(spec, model.layers, "model.moe")?;
            let tokens = shape.micro_batch as u64 * model.seq_len as u64
                / shape.cp.max(1) as u64
                / if shape.sequence_parallel && shape.tp > 1 { shape.tp as u64 } else { 1 };
            let input = MoeParallelInput {
                ep: par.ep,
                expert_tp: par.expert_tp,
                dispatcher: par.moe_token_dispatcher,
                overlap_ep_comm: par.overlap_moe_expert_parallel_comm,
                shared_expert_overlap: par.moe_shared_expert_overlap,
                hybridep_num_sms: par.moe_hybridep_num_sms,
                force_load_balancing: par.moe_router_force_load_balancing,
                load_imbalance: par.moe_load_imbalance,
                capacity_factor: par.moe_expert_capacity_factor,
                pad_to_capacity: par.moe_pad_expert_input_to_capacity,
                grouped_gemm: par.moe_grouped_gemm,
            };
            Some(parallel::resolve(
                &config,
                &input,
                shape.tp,
                shape.tp as u64 * shape.cp as u64 * shape.dp as u64,
                shape.sequence_parallel,
                par.recompute == Recompute::Full,
                shape.pp,
                shape.virtual_stages,
                tokens,
            )?)
        }
    };
    Ok(Resolved { moe, recompute_modules })
}

/// MoE layers of every model chunk, indexed like `layers` (`stage · v + chunk`; chunk c of stage s is virtual stage
/// c·pp + s and holds the next layers in that order): zeros for a dense model.
pub fn chunk_moe_layers(cfg: &TrainingConfig, layers: &[u32]) -> Vec<u32> {
    let mut out = vec![0; layers.len()];
    let Some(moe) = &cfg.moe else { return out };
    let (pp, v) = (cfg.pp.max(1), cfg.virtual_stages.max(1));
    let mut start = 0;
    for vs in 0..pp * v {
        let idx = ((vs % pp) * v + vs / pp) as usize;
        let n = layers.get(idx).copied().unwrap_or(0);
        if let Some(o) = out.get_mut(idx) {
            *o = moe.config.moe_layers_in(start, start + n);
        }
        start += n;
    }
    out
}

/// The MoE part of a prediction's resolved configuration.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct MoeReport {
    /// Expert-parallel degree.
    pub ep: u32,
    /// Expert-tensor-parallel degree.
    pub expert_tp: u32,
    /// Expert-data-parallel degree by MoE parallel folding: tp·cp·dp / (expert_tp·ep).
    pub expert_dp: u32,
    /// Routed experts on one GPU, E/ep.
    pub local_experts: u32,
    /// MoE layers of the model.
    pub moe_layers: u32,
    /// The token dispatcher.
    pub moe_token_dispatcher: Dispatcher,
    /// Routed tokens of the busiest expert-parallel rank over the mean, as used (the imbalance, capped or set by
    /// the capacity factor).
    pub load_factor: f64,
    pub overlap_moe_expert_parallel_comm: bool,
    pub moe_shared_expert_overlap: bool,
    /// The SMs HybridEP's dispatch and combine run on (Megatron-Core's `moe_hybridep_num_sms`; absent for
    /// another dispatcher).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moe_hybridep_num_sms: Option<u32>,
    pub moe_router_force_load_balancing: bool,
    pub moe_grouped_gemm: bool,
    /// Megatron-Core's capacity factor (absent: dropless).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moe_expert_capacity_factor: Option<f64>,
    /// Multi-token-prediction layers on the last stage.
    pub mtp_layers: u32,
}

impl MoeReport {
    /// The report of `cfg` (`None` for a dense model).
    pub fn of(cfg: &TrainingConfig) -> Option<MoeReport> {
        let m = cfg.moe.as_ref()?;
        Some(MoeReport {
            ep: m.ep,
            expert_tp: m.etp,
            expert_dp: m.edp,
            local_experts: m.local_experts(),
            moe_layers: m.config.moe_layers_in(0, cfg.model.layers),
            moe_token_dispatcher: m.dispatcher,
            load_factor: m.load_factor(),
            overlap_moe_expert_parallel_comm: m.overlap_ep_comm,
            moe_shared_expert_overlap: m.shared_expert_overlap,
            moe_hybridep_num_sms: (m.dispatcher == Dispatcher::Hybridep).then(|| m.hybridep_sms()),
            moe_router_force_load_balancing: m.force_load_balancing,
            moe_grouped_gemm: m.grouped_gemm,
            moe_expert_capacity_factor: m.capacity_factor,
            mtp_layers: cfg.model.mtp_layers,
        })
    }
}

/// Model FLOPs of one iteration of an MoE or MLA model (Narayanan et al. 2021's accounting generalized, as
/// [`crate::llm::flops::model_flops_of`] does for dense models): 3 × the forward FLOPs (forward and two backward
/// GEMMs), the forward per token 2 × the GEMM parameters a token uses (attention projections, dense MLP or router,
/// shared and top-k routed experts) plus the attention core 2·s·a·(D_qk + D_v) (counted in full) per layer, and
/// the LM head 2·V·d; MTP layers add their layer, projection and head. Recomputation is not counted.
pub fn model_flops(cfg: &TrainingConfig) -> f64 {
    let m = &cfg.model;
    let (d, a, s) = (m.hidden as f64, m.heads as f64, m.seq_len as f64);
    let one = TrainingConfig { tp: 1, ..cfg.clone() };
    let norms = 2.0 * if m.norm == crate::llm::config::Norm::Rmsnorm { d } else { 2.0 * d };
    let latent_norms = m.mla.as_ref().map_or(0.0, |x| (x.q_lora_rank + x.kv_lora_rank) as f64);
    let (dqk, dv) = match &m.mla {
        Some(x) => (x.qk_head_dim() as f64, x.v_head_dim as f64),
        None => (cfg.head_dim as f64, cfg.head_dim as f64),
    };
    let core = 2.0 * s * a * (dqk + dv);
    let dense_gemm = params::dense_layer(&one) - norms - latent_norms;
    let moe_gemm = cfg.moe.as_ref().map(|mt| {
        let whole = MoeTraining { ep: 1, etp: 1, ..mt.clone() };
        let p = params::moe_layer(&one, &whole);
        let routed = p.expert * mt.config.top_k as f64 / mt.config.experts as f64;
        p.dense - norms - latent_norms + routed
    });
    let n_moe = cfg.moe.as_ref().map_or(0, |mt| mt.config.moe_layers_in(0, m.layers)) as f64;
    let n_dense = m.layers as f64 - n_moe;
    let head = 2.0 * m.vocab as f64 * d;
    let mut per_token = n_dense * (2.0 * dense_gemm + core) + n_moe * (2.0 * moe_gemm.unwrap_or(0.0) + core) + head;
    if m.mtp_layers > 0 {
        let layer = if params::last_layer_is_moe(cfg) { moe_gemm.unwrap_or(dense_gemm) } else { dense_gemm };
        per_token += m.mtp_layers as f64 * (2.0 * (layer + 2.0 * d * d) + core + head);
    }
    3.0 * cfg.global_batch as f64 * s * per_token
}

/// Warnings about an MoE configuration: dropless routing without forced balance (the load factor is uniform
/// routing's, a trained router may be more skewed), and expert-parallel all-to-alls that cross nodes without a
/// deduplicating dispatcher.
pub fn warnings(cfg: &TrainingConfig, gpus_per_node: u32) -> Vec<String> {
    let Some(m) = &cfg.moe else { return Vec::new() };
    let mut w = Vec::new();
    if !m.force_load_balancing && m.capacity_factor.is_none() && m.ep > 1 {
        w.push(format!(
            "dropless routing without moe_router_force_load_balancing: the busiest expert-parallel rank is taken to \
             receive {:.3}× the mean routed tokens (uniform routing's statistical maximum); a skewed router is \
             slower — give moe_load_imbalance from your run's per-rank token counts",
            m.load_factor()
        ));
    }
    let ml = layout::MoeLayout::new(m, gpus_per_node);
    if ml.ep_group.nodes > 1 && !m.dispatcher.is_flex() {
        w.push(format!(
            "the expert-parallel group spans {} nodes: the {} dispatcher's collectives cross the inter-node network \
             for every MoE layer (deepep or hybridep send each token once per node)",
            ml.ep_group.nodes,
            m.dispatcher.as_str()
        ));
    }
    w
}

#[cfg(test)]
mod tests;

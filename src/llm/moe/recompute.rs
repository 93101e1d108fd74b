//! Which forward operators of a layer re-run in its backward pass (activation recomputation): `full` re-runs them
//! all (Korthikanti et al. 2022, §5: only the layer input is kept); `selective` re-runs the submodules of
//! Megatron-Core's `recompute_modules` (`transformer_config.py`, `transformer_layer.py`, `moe_layer.py`; MoE README
//! "Checkpointing"), by operator:
//!
//! | module | operators re-run |
//! |---|---|
//! | `core_attn` | QKᵀ, (fused) softmax, mask, attention dropout, ·V or FlashAttention, the context-parallel ring and its merges |
//! | `layernorm` | the layer's two pre-norms |
//! | `mla_up_proj` | MLA's query and key/value up-projections and RoPE |
//! | `mlp` | a dense layer's MLP GEMMs and activation |
//! | `moe` | an MoE layer's whole MLP part: router, top-k, permutation, dispatch and combine, experts, shared experts |
//! | `moe_act` | the experts' activation |
//! | `shared_experts` | the shared experts' GEMMs and activation |
//!
//! Standard checkpointing re-runs the module's communication too (the `moe` module's all-to-alls); the
//! tensor-parallel collectives around a dense MLP are not re-run here (they sit at the layer's boundary).

use super::parallel::RecomputeModule;
use crate::llm::config::{Recompute, TrainingConfig};
use crate::llm::operators::{OpName, StageOp};
use crate::op::Phase;

/// The recompute module an operator belongs to, if any.
fn module_of(name: OpName) -> Option<RecomputeModule> {
    use OpName::*;
    Some(match name {
        QkT | Fillmask | Softmax | FusedSoftmax | AttnV | FlashAttention | AttentionDropout | CpP2p | CpAllGather
        | CpReduceScatter | CpAllToAll | CpMerge => RecomputeModule::CoreAttn,
        LayerNorm | RMSNorm => RecomputeModule::Layernorm,
        MlaQUp | MlaKvUp | RoPE => RecomputeModule::MlaUpProj,
        Linear3 | GeLU | SwiGLU | Linear4 => RecomputeModule::Mlp,
        MoeRouter | MoeTopK | MoePermute | MoeUnpermute | EpAllToAll | EpAllGather | EpReduceScatter | Moe
        | ExpertFc1 | ExpertFc2 => RecomputeModule::Moe,
        MoeAct => RecomputeModule::MoeAct,
        SharedExpertFc1 | SharedExpertAct | SharedExpertFc2 => RecomputeModule::SharedExperts,
        _ => return None,
    })
}

/// The modules selective recompute re-runs for `cfg` asked about `recompute`: the request's when it is the
/// request's own recomputation, Megatron-Core's default `[core_attn]` otherwise (a what-if of the memory model).
pub fn modules(cfg: &TrainingConfig, recompute: Recompute) -> Vec<RecomputeModule> {
    match recompute {
        Recompute::Selective if cfg.recompute == Recompute::Selective => cfg.recompute_modules.clone(),
        Recompute::Selective => vec![RecomputeModule::CoreAttn],
        _ => Vec::new(),
    }
}

/// Whether `cfg` re-runs the forward operator `name` in the backward pass.
pub fn is_recomputed(cfg: &TrainingConfig, name: OpName) -> bool {
    match cfg.recompute {
        Recompute::None => false,
        Recompute::Full => true,
        Recompute::Selective => match module_of(name) {
            // RoPE belongs to MLA's up-projection only in MLA layers; otherwise it re-runs with nothing.
            Some(RecomputeModule::MlaUpProj) if name == OpName::RoPE && cfg.model.mla.is_none() => false,
            // The shared experts re-run with the whole MoE layer as well.
            Some(RecomputeModule::SharedExperts) => {
                cfg.recomputes(RecomputeModule::SharedExperts) || cfg.recomputes(RecomputeModule::Moe)
            }
            // The experts' activation re-runs alone (`moe_act`) or with the whole MoE part.
            Some(RecomputeModule::MoeAct) => {
                cfg.recomputes(RecomputeModule::MoeAct) || cfg.recomputes(RecomputeModule::Moe)
            }
            Some(m) => cfg.recomputes(m),
            None => false,
        },
    }
}

/// The forward operators of `ops` (one layer's passes) that `cfg` re-runs, as backward-pass operators marked
/// recomputed.
pub fn recomputed(cfg: &TrainingConfig, ops: &[StageOp]) -> Vec<StageOp> {
    ops.iter()
        .filter(|o| o.phase == Phase::Fwd && !o.recompute && is_recomputed(cfg, o.name))
        .map(|o| StageOp { phase: Phase::Bwd, recompute: true, ..o.clone() })
        .collect()
}

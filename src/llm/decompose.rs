//! Stage 1 of a training prediction — **decompose**: what one GPU of every pipeline stage runs per micro-batch
//! and per step, from the validated [`TrainingConfig`] and the system's node shape alone (no cost backend, no
//! times).
//!
//! This stage owns the *work*: the operators of one transformer layer, of the first stage's embedding and of the
//! last stage's head (S1 Table I and its Megatron-LM extensions, built by [`super::operators`]), which model chunks
//! hold how many layers (S1's partition or Megatron-LM's uniform split, [`super::partition`]), every chunk's
//! pipeline sends and ZeRO-2/3 per-micro-batch collectives, and every stage's update work (gradient reduction,
//! tied-embedding gradient all-reduce, fused Adam, parameter all-gather) with their sizes. Timing it is
//! [`super::timing`]'s job, scheduling it [`super::schedule`]'s, reporting it [`super::report`]'s.

use super::config::TrainingConfig;
use super::layout::Layout;
use super::moe::chunk_moe_layers;
use super::moe::layout::MoeLayout;
use super::moe::mtp::mtp_ops;
use super::moe::ops::moe_layer_ops;
use super::operators::{
    comm_elem_bytes, embedding_ops, head_ops, layer_ops, optimizer_work, p2p_op, OpName, OpPrecisions, StageOp, Work,
};
use super::partition::{chunk_layers, StageRole};
use super::sizing::{embedding_params, layer_params, outside_layers_params, padded_vocab, stage_params_of};
use crate::hw::System;
use crate::op::Collective;
use crate::op::Phase;

/// One training iteration's work on one GPU of every pipeline stage.
#[derive(Debug, Clone, PartialEq)]
pub struct Decomposition {
    /// Where the parallel groups sit on the nodes.
    pub layout: Layout,
    /// The precisions the operators run in.
    pub prec: OpPrecisions,
    /// Vocabulary padded for tp (S1 eq. 1–2).
    pub v_padded: u64,
    /// Model chunks per stage, v (1 without interleaving).
    pub v: u32,
    /// One transformer layer's operators per micro-batch (calls per layer), forward, backward and recomputed.
    pub layer: Vec<StageOp>,
    /// One MoE layer's operators per micro-batch ([`crate::llm::moe::ops`]; empty for a dense model).
    pub moe_layer: Vec<StageOp>,
    /// One multi-token-prediction layer's operators per micro-batch ([`crate::llm::moe::mtp`]; empty without).
    pub mtp: Vec<StageOp>,
    /// The first stage's embedding operators per micro-batch (chunk 0 of stage 0).
    pub embedding: Vec<StageOp>,
    /// The last stage's head operators per micro-batch (final norm, LM head, cross-entropy; last chunk of the last
    /// stage).
    pub head: Vec<StageOp>,
    /// Every pipeline stage, in order (pp of them).
    pub stages: Vec<StageWork>,
}

/// One pipeline stage's work.
#[derive(Debug, Clone, PartialEq)]
pub struct StageWork {
    /// Stage index, 0-based.
    pub stage: u32,
    pub role: StageRole,
    /// Transformer layers on the stage, all its model chunks.
    pub encoders: u32,
    /// Of those, MoE layers.
    pub moe_layers: u32,
    /// Parameters on one GPU of the stage before ZeRO partitioning (S1 eq. 6, generalized), the routed experts'
    /// aside.
    pub params: f64,
    /// Routed-expert parameters on one GPU of the stage (reduced and sharded over the expert-data-parallel group).
    pub expert_params: f64,
    /// The stage's model chunks, chunk c being virtual stage c·pp + s.
    pub chunks: Vec<ChunkWork>,
    /// What the stage does after its last backward.
    pub tail: TailWork,
}

/// One model chunk's work per micro-batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkWork {
    /// Transformer layers of the chunk (each runs [`Decomposition::layer`], or [`Decomposition::moe_layer`] for
    /// its MoE layers).
    pub layers: u32,
    /// Of those, MoE layers.
    pub moe_layers: u32,
    /// Multi-token-prediction layers the chunk runs after its head ([`Decomposition::mtp`]; the last chunk of the
    /// last stage, or the chunk the custom pipeline layout names: [`TrainingConfig::chunk_mtp_layers`]).
    pub mtp: u32,
    /// The chunk runs [`Decomposition::embedding`] (chunk 0 of stage 0).
    pub embedding: bool,
    /// The chunk runs [`Decomposition::head`] (last chunk of the last stage).
    pub head: bool,
    /// Pipeline send of the activations to the next virtual stage (`PP_P2P`, charged to the sender, S1).
    pub send_fwd: Option<StageOp>,
    /// Pipeline send of the gradients to the previous virtual stage.
    pub send_bwd: Option<StageOp>,
    /// ZeRO-2/3 per-micro-batch collectives of the chunk's parameters.
    pub zero: Option<ZeroWork>,
}

/// ZeRO ≥ 2's collectives of one model chunk per micro-batch, overlapped bucket by bucket with its passes.
#[derive(Debug, Clone, PartialEq)]
pub struct ZeroWork {
    /// Gradient reduce-scatter during the backward pass (`DP_Reduce_Scatter`).
    pub reduce_scatter: StageOp,
    /// ZeRO-3's parameter all-gathers before the forward and before the backward pass (`DP_Allgather`).
    pub all_gathers: Option<[StageOp; 2]>,
    /// Gradient buckets of the chunk, ⌈params / [`bucket_params`]⌉ ≥ 1.
    pub buckets: f64,
}

/// What a stage does after its last backward, per step.
#[derive(Debug, Clone, PartialEq)]
pub struct TailWork {
    /// Fused Adam over the stage's (ZeRO-partitioned) parameters (`Optimizer`).
    pub optimizer: StageOp,
    /// Parameter all-gather after the update (ZeRO-1/2, distributed optimizer; `DP_Allgather`).
    pub param_gather: Option<StageOp>,
    /// Data-parallel gradient reduction after the last backward (`DP_Allreduce`, or `DP_Reduce_Scatter` with the
    /// distributed optimizer; none with ZeRO ≥ 2 or dp·cp = 1).
    pub grad_sync: Option<StageOp>,
    /// Buckets of the gradient reduction (Megatron-Core reduces bucket by bucket; 1 without a reduction).
    pub grad_sync_buckets: u32,
    /// Tied-embedding gradient all-reduce between the first and the last stage (`Embedding_Grad_Allreduce`).
    pub embedding_grad: Option<StageOp>,
    /// The routed experts' gradient reduction over the expert-data-parallel group (`EDP_Allreduce` or
    /// `EDP_Reduce_Scatter`).
    pub expert_grad_sync: Option<StageOp>,
    /// The routed experts' parameter all-gather after the update (`EDP_Allgather`).
    pub expert_param_gather: Option<StageOp>,
}

/// Decomposes one training iteration of `cfg` on `system`'s nodes (its GPUs per node place the groups, its GPU
/// picks the non-GEMM precision under fp8 training).
pub fn decompose(cfg: &TrainingConfig, system: &System) -> Decomposition {
    let layout = Layout::new(cfg, system.gpus_per_node);
    let prec = OpPrecisions::of(cfg, &system.gpu);
    let v_padded = padded_vocab(cfg.model.vocab as u64, cfg.tp as u64);
    let layers = chunk_layers(cfg);
    let moe_counts = chunk_moe_layers(cfg, &layers);
    let (pp, v) = (cfg.pp, cfg.virtual_stages.max(1));
    let stages = (0..pp)
        .map(|s| {
            let range = (s * v) as usize..((s + 1) * v) as usize;
            let encoders: u32 = layers[range.clone()].iter().sum();
            let moe_layers: u32 = moe_counts[range].iter().sum();
            let params = stage_params(cfg, s, &layers, &moe_counts, v_padded);
            let expert_params = stage_expert_params(cfg, s, moe_layers);
            StageWork {
                stage: s,
                role: StageRole::of(s, pp),
                encoders,
                moe_layers,
                params,
                expert_params,
                chunks: (0..v).map(|c| chunk_work(cfg, &layout, &layers, &moe_counts, v_padded, s, c)).collect(),
                tail: tail_work(cfg, &layout, prec, s, (params, expert_params), encoders, v_padded),
            }
        })
        .collect();
    Decomposition {
        layout,
        prec,
        v_padded,
        v,
        layer: layer_ops(cfg, &layout, prec),
        moe_layer: cfg.moe.as_ref().map_or_else(Vec::new, |moe| moe_layer_ops(cfg, &layout, moe, prec)),
        mtp: mtp_ops(cfg, &layout, prec, v_padded),
        embedding: embedding_ops(cfg, &layout, prec, v_padded),
        head: head_ops(cfg, &layout, prec, v_padded),
        stages,
    }
}

fn chunk_work(
    cfg: &TrainingConfig,
    layout: &Layout,
    layers: &[u32],
    moe_counts: &[u32],
    v_padded: u64,
    s: u32,
    c: u32,
) -> ChunkWork {
    let (pp, v) = (cfg.pp, cfg.virtual_stages.max(1));
    let n = layers[(s * v + c) as usize];
    let head = s + 1 == pp && c + 1 == v;
    let send =
        |phase| send_target(pp, v, s, c, phase).map(|to| p2p_op(cfg, layout, phase, layout.p2p_group(cfg, s, to)));
    let zero = (cfg.zero_stage >= 2 && cfg.grad_ranks() > 1).then(|| {
        let params = chunk_params(cfg, s, c, n, v_padded);
        let bytes = cfg.param_gather_bytes(params, chunk_outside_layers_params(cfg, s, c, v_padded));
        let gather = |phase| collective_op(OpName::DpAllGather, phase, Collective::AllGather, bytes, layout, params);
        ZeroWork {
            reduce_scatter: collective_op(
                OpName::DpReduceScatter,
                Phase::Bwd,
                Collective::ReduceScatter,
                params * cfg.grad_elem_bytes(),
                layout,
                params,
            ),
            all_gathers: (cfg.zero_stage >= 3).then(|| [gather(Phase::Fwd), gather(Phase::Bwd)]),
            buckets: zero_buckets(cfg, params, n, s == 0 && c == 0, s + 1 == pp && c + 1 == v),
        }
    });
    ChunkWork {
        layers: n,
        moe_layers: moe_counts[(s * v + c) as usize],
        mtp: cfg.chunk_mtp_layers(s, c),
        embedding: s == 0 && c == 0,
        head,
        send_fwd: send(Phase::Fwd),
        send_bwd: send(Phase::Bwd),
        zero,
    }
}

fn tail_work(
    cfg: &TrainingConfig,
    layout: &Layout,
    prec: OpPrecisions,
    s: u32,
    (params, expert_params): (f64, f64),
    encoders: u32,
    v_padded: u64,
) -> TailWork {
    let parts = tail_parts(cfg, s, params, expert_params, v_padded);
    let edp = cfg.moe.as_ref().map(|m| MoeLayout::new(m, layout.gpus_per_node).edp_group);
    let expert_op = |name, c, bytes: f64| {
        let g = edp.unwrap_or(layout.dp_group);
        let mut op = collective_op(name, Phase::Bwd, c, bytes, layout, expert_params);
        op.work = Work::Collective { collective: c, bytes, group: g, active_per_node: layout.active_per_node };
        op.features = vec![expert_params.round() as u64, g.nodes as u64, g.ranks_per_node as u64];
        op
    };
    let embedding_grad = parts.embedding_grad_bytes.map(|bytes| {
        let group = layout.p2p_group(cfg, 0, cfg.pp - 1);
        let mut op =
            collective_op(OpName::EmbeddingGradAllReduce, Phase::Bwd, Collective::AllReduce, bytes, layout, 0.0);
        op.work = Work::Collective {
            collective: Collective::AllReduce,
            bytes,
            group,
            active_per_node: layout.active_per_node,
        };
        op.features =
            vec![(bytes / comm_elem_bytes(cfg)).round() as u64, group.nodes as u64, group.ranks_per_node as u64];
        op
    });
    TailWork {
        optimizer: StageOp {
            name: OpName::Optimizer,
            phase: Phase::Fwd,
            calls: 1,
            work: optimizer_work(parts.optimizer_params, prec.other),
            features: vec![cfg.tp as u64, cfg.model.hidden as u64, encoders as u64],
            recompute: false,
            overlaps: None,
        },
        param_gather: parts
            .gather_bytes
            .map(|bytes| collective_op(OpName::DpAllGather, Phase::Fwd, Collective::AllGather, bytes, layout, params)),
        grad_sync: parts.sync.map(|(name, c, bytes)| collective_op(name, Phase::Bwd, c, bytes, layout, params)),
        grad_sync_buckets: sync_buckets(cfg, s, &parts),
        embedding_grad,
        expert_grad_sync: parts.expert_sync.map(|(name, c, bytes)| expert_op(name, c, bytes)),
        expert_param_gather: parts.expert_gather_bytes.map(|bytes| {
            let mut op = expert_op(OpName::EdpAllGather, Collective::AllGather, bytes);
            op.phase = Phase::Fwd;
            op
        }),
    }
}

/// A data-parallel collective of `bytes` over the gradient-reduction group, once per step (or micro-batch), with
/// S1's feature vector (parameters, nodes, ranks per node).
fn collective_op(name: OpName, phase: Phase, c: Collective, bytes: f64, layout: &Layout, params: f64) -> StageOp {
    let g = layout.dp_group;
    StageOp {
        name,
        phase,
        calls: 1,
        work: Work::Collective { collective: c, bytes, group: g, active_per_node: layout.active_per_node },
        features: vec![params.round() as u64, g.nodes as u64, g.ranks_per_node as u64],
        recompute: false,
        overlaps: None,
    }
}

/// The buckets a ZeRO ≥ 2 chunk of `params` parameters and `layers` layers gathers and reduces in: one per wrapped
/// block with a framework that shards per module (FSDP's units, DeepSpeed's per-module fetch: the layers, plus
/// the embedding and the head where the chunk holds them — [`crate::llm::framework::FrameworkTraits`]), else
/// ⌈params / [`bucket_params`]⌉ (Megatron-Core's buckets); at least 1.
pub fn zero_buckets(cfg: &TrainingConfig, params: f64, layers: u32, embedding: bool, head: bool) -> f64 {
    if cfg.framework.gather_per_block {
        (layers + embedding as u32 + head as u32).max(1) as f64
    } else {
        (params / bucket_params(cfg)).ceil().max(1.0)
    }
}

/// Parameters per gradient bucket: the request's `bucket_size`, else Megatron-Core's default max(40 M, 1 M · dp)
/// (`distributed_data_parallel.py`).
pub fn bucket_params(cfg: &TrainingConfig) -> f64 {
    cfg.bucket_params
}

/// The stage a model chunk's pipeline send goes to: forward to the next virtual stage, backward to the previous
/// one (`None` at the ends of the pipeline).
pub fn send_target(pp: u32, v: u32, s: u32, c: u32, phase: Phase) -> Option<u32> {
    let vs = c * pp + s;
    match phase {
        Phase::Fwd if vs + 1 < pp * v => Some((s + 1) % pp),
        Phase::Bwd if vs > 0 => Some((s + pp - 1) % pp),
        _ => None,
    }
}

/// Parameters of one GPU's model chunk c of stage s (the stage's embedding on chunk 0 of stage 0, its head on the
/// last chunk of the last stage).
pub fn chunk_params(cfg: &TrainingConfig, s: u32, c: u32, layers: u32, v_padded: u64) -> f64 {
    let (pp, v) = (cfg.pp, cfg.virtual_stages.max(1));
    let mut p = layers as f64 * layer_params(cfg);
    if s == 0 && c == 0 {
        p += embedding_params(cfg, v_padded);
    }
    if s + 1 == pp && c + 1 == v {
        p += stage_params_of(cfg, StageRole::of(s, pp), 0, 0, v_padded)
            - if pp == 1 { embedding_params(cfg, v_padded) } else { 0.0 };
    }
    p
}

/// The part of [`chunk_params`] outside the transformer layers: the embedding in the first chunk of the first
/// stage, the final norm and the LM head (and MTP's embedding copy) in the last chunk of the last stage
/// ([`outside_layers_params`]).
pub fn chunk_outside_layers_params(cfg: &TrainingConfig, s: u32, c: u32, v_padded: u64) -> f64 {
    let (pp, v) = (cfg.pp, cfg.virtual_stages.max(1));
    let (first, last) = (s == 0 && c == 0, s + 1 == pp && c + 1 == v);
    match (first, last) {
        (true, true) => outside_layers_params(cfg, StageRole::Only, v_padded),
        (true, false) => embedding_params(cfg, v_padded),
        (false, true) => outside_layers_params(cfg, StageRole::of(s, pp), v_padded),
        (false, false) => 0.0,
    }
}

/// Parameters on one GPU of stage s (all chunks), the routed experts aside; `layers` and `moe_layers` per chunk,
/// indexed `stage · v + chunk`.
pub fn stage_params(cfg: &TrainingConfig, s: u32, layers: &[u32], moe_layers: &[u32], v_padded: u64) -> f64 {
    let v = cfg.virtual_stages.max(1);
    let n: u32 = (0..v).map(|c| layers[(s * v + c) as usize]).sum();
    let moe: u32 = (0..v).map(|c| moe_layers.get((s * v + c) as usize).copied().unwrap_or(0)).sum();
    stage_params_of(cfg, StageRole::of(s, cfg.pp), n as u64, moe as u64, v_padded) + mtp_moved_params(cfg, s)
}

/// The MTP layers' dense-like parameters a custom pipeline layout moves onto stage s from the last stage, where
/// [`stage_params_of`] counts them (positive on the stage that gains them, negative on the last stage; 0 without a
/// layout or with the MTP layers on the last stage, as in Megatron-Bridge's DeepSeek-V3 layouts for pp 8).
fn mtp_moved_params(cfg: &TrainingConfig, s: u32) -> f64 {
    let counted = if s + 1 == cfg.pp { cfg.model.mtp_layers } else { 0 };
    let placed = cfg.stage_mtp_layers(s);
    if placed == counted {
        return 0.0;
    }
    (placed as f64 - counted as f64) * crate::llm::moe::params::mtp_layer(cfg).dense
}

/// Routed-expert parameters on one GPU of stage s with `moe_layers` MoE layers (and its MTP layers', on the last
/// stage or where the custom pipeline layout puts them: [`TrainingConfig::stage_mtp_layers`]): [`crate::llm::moe::params`]; 0 for a dense model.
pub fn stage_expert_params(cfg: &TrainingConfig, s: u32, moe_layers: u32) -> f64 {
    let Some(moe) = &cfg.moe else { return 0.0 };
    let per_layer = crate::llm::moe::params::moe_layer(cfg, moe).expert;
    let mtp = cfg.stage_mtp_layers(s) as f64 * crate::llm::moe::params::mtp_layer(cfg).expert;
    moe_layers as f64 * per_layer + mtp
}

/// The names, kinds and sizes of a stage's tail operators.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TailParts {
    /// Gradient reduction: (name, collective, bytes) or none.
    pub sync: Option<(OpName, Collective, f64)>,
    /// Parameter all-gather bytes after the update (ZeRO-1/2, distributed optimizer).
    pub gather_bytes: Option<f64>,
    /// Parameters the optimizer updates on this GPU.
    pub optimizer_params: f64,
    /// Tied-embedding gradient all-reduce bytes (first and last stage, pp > 1).
    pub embedding_grad_bytes: Option<f64>,
    /// The routed experts' gradient reduction over the expert-data-parallel group: (name, collective, bytes).
    pub expert_sync: Option<(OpName, Collective, f64)>,
    /// The routed experts' parameter all-gather bytes after the update.
    pub expert_gather_bytes: Option<f64>,
}

/// What stage s does after its last backward: S1 all-reduces the gradients over dp (the distributed optimizer
/// reduce-scatters them; ZeRO ≥ 2 reduced them during the backward passes), all-reduces the tied embedding's
/// gradients between the first and last stage, runs fused Adam over its (ZeRO-partitioned) parameters and
/// all-gathers the updated parameters (ZeRO-1/2 and the distributed optimizer; ZeRO-3 keeps them partitioned).
/// The routed experts' `expert_params` are reduced, sharded and gathered the same way over the expert-data-parallel
/// group (MoE parallel folding, [`crate::llm::moe::parallel`]; Megatron-Core's DDP keeps them in their own
/// buffers). The first and last stage also all-reduce the embedding's gradients when MTP layers read it on the last
/// stage (Megatron-Core shares it as it shares a tied one).
pub fn tail_parts(cfg: &TrainingConfig, s: u32, params: f64, expert_params: f64, v_padded: u64) -> TailParts {
    let n = cfg.grad_ranks();
    let e = comm_elem_bytes(cfg);
    let ge = cfg.grad_elem_bytes();
    let sharded = cfg.zero_stage >= 1 || cfg.distributed_optimizer;
    let sync = if n <= 1 || cfg.zero_stage >= 2 {
        None
    } else if cfg.distributed_optimizer {
        Some((OpName::DpReduceScatter, Collective::ReduceScatter, params * ge))
    } else {
        Some((OpName::DpAllReduce, Collective::AllReduce, params * ge))
    };
    let unquantized = outside_layers_params(cfg, StageRole::of(s, cfg.pp), v_padded);
    let gather_bytes = (sharded && cfg.zero_stage < 3 && n > 1).then(|| cfg.param_gather_bytes(params, unquantized));
    let shared = cfg.model.tied_embeddings || cfg.model.mtp_layers > 0;
    let tied = shared && cfg.pp > 1 && (s == 0 || s + 1 == cfg.pp);
    let edp = cfg.moe.as_ref().map_or(1, |m| m.edp).max(1);
    let experts = expert_params > 0.0 && edp > 1;
    let expert_sync = experts.then(|| {
        if cfg.distributed_optimizer {
            (OpName::EdpReduceScatter, Collective::ReduceScatter, expert_params * ge)
        } else {
            (OpName::EdpAllReduce, Collective::AllReduce, expert_params * ge)
        }
    });
    let expert_optimizer = if sharded { expert_params / edp as f64 } else { expert_params };
    TailParts {
        sync,
        gather_bytes,
        optimizer_params: if sharded { params / n as f64 } else { params } + expert_optimizer,
        embedding_grad_bytes: tied.then(|| embedding_params(cfg, v_padded) * e),
        expert_sync,
        expert_gather_bytes: (experts && sharded).then(|| cfg.param_gather_bytes(expert_params, 0.0)),
    }
}

/// Buckets of stage `s`'s gradient reduction (and of its parameter all-gather, which shares the buffer):
/// ⌈reduced parameters / [`bucket_params`]⌉ ≥ 1 on the first stage; one on the others, whose reduction is off the
/// critical path (Megatron-Core's `DistributedDataParallel` turns bucketing off for pp rank > 0); 1 without a
/// reduction.
pub fn sync_buckets(cfg: &TrainingConfig, s: u32, parts: &TailParts) -> u32 {
    match parts.sync {
        Some((_, _, bytes)) if s == 0 => (bytes / cfg.grad_elem_bytes() / bucket_params(cfg)).ceil().max(1.0) as u32,
        _ => 1,
    }
}

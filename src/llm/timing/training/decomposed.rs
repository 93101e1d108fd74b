//! Timing a [`Decomposition`]: every distinct operator timed once, then composed through the same arithmetic as
//! the search's path (the parent module) into every chunk's per-micro-batch times and every stage's tail.

use crate::cost::Timed;
use crate::llm::config::{ConfigError, TrainingConfig};
use crate::llm::decompose::Decomposition;
use crate::llm::operators::StageOp;
use crate::llm::pipeline::StageTail;
use crate::llm::timing::{optimizer_tensors, time_ops, TimedOp, Timer};

use super::{chunk_seconds, compose_tail, ChunkInputs, Pieces, ZeroSeconds};

/// A [`Decomposition`] timed.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedTraining {
    /// [`Decomposition::layer`]'s operators timed, in order.
    pub layer: Vec<TimedOp>,
    /// [`Decomposition::moe_layer`]'s operators timed (the 1F1B expert-parallel overlap applied).
    pub moe_layer: Vec<TimedOp>,
    /// [`Decomposition::mtp`]'s operators timed.
    pub mtp: Vec<TimedOp>,
    /// [`Decomposition::embedding`]'s operators timed.
    pub embedding: Vec<TimedOp>,
    /// [`Decomposition::head`]'s operators timed.
    pub head: Vec<TimedOp>,
    /// Every model chunk's forward seconds per micro-batch, indexed `stage · v + chunk`.
    pub fwd_s: Vec<f64>,
    /// Every model chunk's backward seconds per micro-batch, indexed `stage · v + chunk`.
    pub bwd_s: Vec<f64>,
    /// Every model chunk's forward pipeline send, s (0 where none), indexed `stage · v + chunk`.
    pub send_fwd_s: Vec<f64>,
    /// Every model chunk's backward pipeline send, s (0 where none).
    pub send_bwd_s: Vec<f64>,
    /// Every stage, in order.
    pub stages: Vec<TimedStage>,
}

/// One stage's times.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedStage {
    /// Forward seconds per micro-batch, all chunks.
    pub forward_s: f64,
    /// Backward seconds per micro-batch, all chunks.
    pub backward_s: f64,
    /// Its chunks' collectives timed, in [`crate::llm::decompose::StageWork::chunks`]' order.
    pub chunks: Vec<TimedChunk>,
    /// Its fused Adam step timed.
    pub optimizer: Timed,
    /// Its parameter all-gather timed (ZeRO-1/2, distributed optimizer).
    pub param_gather: Option<Timed>,
    /// Its gradient reduction after the last backward timed.
    pub grad_sync: Option<Timed>,
    /// Its tied-embedding gradient all-reduce timed.
    pub embedding_grad: Option<Timed>,
    /// Its routed experts' gradient reduction timed.
    pub expert_grad_sync: Option<Timed>,
    /// Its routed experts' parameter all-gather timed.
    pub expert_param_gather: Option<Timed>,
    /// What follows its last backward, composed.
    pub tail: StageTail,
}

/// One chunk's collectives timed (as [`crate::llm::decompose::ChunkWork`]'s).
#[derive(Debug, Clone, PartialEq)]
pub struct TimedChunk {
    /// The forward pipeline send timed.
    pub send_fwd: Option<Timed>,
    /// The backward pipeline send timed.
    pub send_bwd: Option<Timed>,
    /// ZeRO ≥ 2: the reduce-scatter and (ZeRO-3) the all-gather (both all-gathers are the same work).
    pub zero: Option<(Timed, Option<Timed>)>,
}

fn time_opt(op: &Option<StageOp>, timer: &mut Timer) -> Result<Option<Timed>, ConfigError> {
    op.as_ref().map(|o| timer.time(&o.work)).transpose()
}

fn seconds(t: &Timed) -> f64 {
    t.time_us * 1e-6
}

/// Times every operator of `d`, the decomposition of `cfg` (each distinct piece of work once) and composes every chunk's per-micro-batch
/// times and every stage's tail. Errors: a precision the GPU has no path for (field `precision`).
pub fn time_training(cfg: &TrainingConfig, d: &Decomposition, timer: &mut Timer) -> Result<TimedTraining, ConfigError> {
    let layer = time_ops(&d.layer, timer)?;
    let moe_layer = crate::llm::moe::timing::time_layer(cfg, &d.moe_layer, timer)?;
    let mtp = crate::llm::moe::timing::time_layer(cfg, &d.mtp, timer)?;
    let embedding = time_ops(&d.embedding, timer)?;
    let head = time_ops(&d.head, timer)?;
    let p = Pieces {
        layer: timer.layer_seconds(&d.layer, &layer),
        moe_layer: crate::llm::moe::timing::layer_seconds(cfg, timer, &d.moe_layer, &moe_layer),
        embedding: timer.outside_seconds(&d.embedding, &embedding),
        head: timer.outside_seconds(&d.head, &head),
        mtp: timer.layer_seconds(&d.mtp, &mtp),
    };
    let chunks = d.stages.len() * d.v as usize;
    let (mut fwd_s, mut bwd_s) = (Vec::with_capacity(chunks), Vec::with_capacity(chunks));
    let (mut send_fwd_s, mut send_bwd_s) = (Vec::with_capacity(chunks), Vec::with_capacity(chunks));
    let contention = timer.contention();
    let mut stages = Vec::with_capacity(d.stages.len());
    for st in &d.stages {
        let mut timed_chunks = Vec::with_capacity(st.chunks.len());
        let first = fwd_s.len();
        for ch in &st.chunks {
            let send_fwd = time_opt(&ch.send_fwd, timer)?;
            let send_bwd = time_opt(&ch.send_bwd, timer)?;
            let zero = match &ch.zero {
                Some(z) => {
                    let rs = timer.time(&z.reduce_scatter.work)?;
                    let ag = match &z.all_gathers {
                        Some([fwd, _]) => Some(timer.time(&fwd.work)?),
                        None => None,
                    };
                    Some((rs, ag))
                }
                None => None,
            };
            let (f, b) = chunk_seconds(
                &p,
                &ChunkInputs {
                    layers: ch.layers,
                    moe_layers: ch.moe_layers,
                    mtp: ch.mtp,
                    embedding: ch.embedding,
                    head: ch.head,
                    send_fwd_s: send_fwd.as_ref().map(seconds),
                    send_bwd_s: send_bwd.as_ref().map(seconds),
                    zero: ch.zero.as_ref().zip(zero.as_ref()).map(|(z, (rs, ag))| ZeroSeconds {
                        reduce_scatter_s: seconds(rs),
                        all_gather_s: ag.as_ref().map_or(0.0, seconds),
                        buckets: z.buckets,
                    }),
                    overlap_sends: cfg.overlap_p2p(),
                    contention,
                },
            );
            fwd_s.push(f);
            bwd_s.push(b);
            send_fwd_s.push(send_fwd.as_ref().map_or(0.0, seconds));
            send_bwd_s.push(send_bwd.as_ref().map_or(0.0, seconds));
            timed_chunks.push(TimedChunk { send_fwd, send_bwd, zero });
        }
        let (forward_s, backward_s): (f64, f64) = (fwd_s[first..].iter().sum(), bwd_s[first..].iter().sum());
        let tensors = optimizer_tensors(cfg, st.encoders, st.moe_layers);
        let optimizer = timer.optimizer(&st.tail.optimizer.work, tensors)?;
        let param_gather = time_opt(&st.tail.param_gather, timer)?;
        let grad_sync = time_opt(&st.tail.grad_sync, timer)?;
        let embedding_grad = time_opt(&st.tail.embedding_grad, timer)?;
        let expert_grad_sync = time_opt(&st.tail.expert_grad_sync, timer)?;
        let expert_param_gather = time_opt(&st.tail.expert_param_gather, timer)?;
        let both =
            |a: &Option<Timed>, b: &Option<Timed>| a.as_ref().map_or(0.0, seconds) + b.as_ref().map_or(0.0, seconds);
        let tail = compose_tail(
            cfg,
            both(&grad_sync, &expert_grad_sync),
            backward_s,
            st.tail.grad_sync_buckets,
            embedding_grad.as_ref().map_or(0.0, seconds),
            seconds(&optimizer),
            both(&param_gather, &expert_param_gather),
            contention,
        );
        stages.push(TimedStage {
            forward_s,
            backward_s,
            chunks: timed_chunks,
            optimizer,
            param_gather,
            grad_sync,
            embedding_grad,
            expert_grad_sync,
            expert_param_gather,
            tail,
        });
    }
    Ok(TimedTraining { layer, moe_layer, mtp, embedding, head, fwd_s, bwd_s, send_fwd_s, send_bwd_s, stages })
}

//! Costing one candidate of a search without building its decomposition: chunk times and stage tails from
//! per-shape caches into scratch buffers, a memory verdict, a lower bound of its iteration time and, for the
//! candidates that may reach the top, the exact simulated time — the same arithmetic as
//! `POST /v1/predictions/training` ([`crate::llm::timing`], [`crate::llm::schedule`]).

use std::collections::HashMap;

use super::{Candidate, SearchTraining};
use crate::cost::CostBackend;
use crate::hw::Precision;
use crate::llm::config::{bad, ConfigError, Recompute, TrainingConfig};
use crate::llm::decompose::{stage_expert_params, stage_params, tail_parts};
use crate::llm::layout::Layout;
use crate::llm::memory::{stage_memory, ActivationFacts, StageMemoryInput};
use crate::llm::moe::{chunk_moe_layers, Dispatcher};
use crate::llm::operators::OpPrecisions;
use crate::llm::partition::fill_chunk_layers;
use crate::llm::pipeline::{self, makespan_lower_bound, step_lower_bound, StageTail};
use crate::llm::schedule::{eq7, pipeline_spec};
use crate::llm::sizing::{layer_params, padded_vocab};
use crate::llm::timing::{chunk_times, pieces, stage_tail, ChunkTimes, P2pTimes, Pieces, Timer};

/// What a layer's operator times depend on: tp, cp, micro-batch, sequence parallelism, recomputation, and for MoE
/// models ep, expert_tp, the dispatcher and the load factor's bits.
type PiecesKey = (u32, u32, u32, bool, Recompute, u32, u32, Option<Dispatcher>, u64);

fn pieces_key(cfg: &TrainingConfig) -> PiecesKey {
    let m = cfg.moe.as_ref();
    (
        cfg.tp,
        cfg.cp,
        cfg.micro_batch,
        cfg.sp(),
        cfg.recompute,
        m.map_or(1, |m| m.ep),
        m.map_or(1, |m| m.etp),
        m.map(|m| m.dispatcher),
        m.map_or(0, |m| m.load_factor().to_bits()),
    )
}

/// Caches and scratch buffers shared by all candidates of one search.
pub(super) struct Evaluator<'a> {
    timer: Timer<'a>,
    pieces: HashMap<PiecesKey, Pieces>,
    sends: HashMap<(u32, u32, u32, u32), P2pTimes>,
    prec: OpPrecisions,
    gpus_per_node: u32,
    capacity: f64,
    layers: Vec<u32>,
    moe_layers: Vec<u32>,
    times: ChunkTimes,
    tails: Vec<StageTail>,
}

/// A candidate's bound (or exact time) and memory verdict.
pub(super) struct Costed {
    /// Lower bound of the iteration time, s (exact for S1's pipeline).
    pub(super) bound_s: f64,
    pub(super) exact: bool,
    pub(super) fits: bool,
}

impl<'a> Evaluator<'a> {
    /// An evaluator over `backend` for candidates derived from `base`, with empty caches.
    pub(super) fn new(backend: &'a dyn CostBackend, base: &TrainingConfig) -> Evaluator<'a> {
        let system = backend.system();
        Evaluator {
            timer: Timer::for_training(backend, base),
            pieces: HashMap::new(),
            sends: HashMap::new(),
            prec: OpPrecisions::of(base, &system.gpu),
            gpus_per_node: system.gpus_per_node,
            capacity: system.gpu.memory_bytes(),
            layers: Vec::new(),
            moe_layers: Vec::new(),
            times: ChunkTimes::default(),
            tails: Vec::new(),
        }
    }

    pub(super) fn configure(cfg: &mut TrainingConfig, req: &SearchTraining, c: &Candidate, global_batch: u64) {
        if let Some(moe) = cfg.moe.as_mut() {
            let ranks = c.tp as u64 * c.cp as u64 * c.dp as u64;
            let tokens = c.micro_batch as u64 * cfg.model.seq_len as u64
                / c.cp.max(1) as u64
                / if c.sequence_parallel && c.tp > 1 { c.tp as u64 } else { 1 };
            moe.reconfigure(c.ep, c.expert_tp, c.dispatcher, ranks, tokens, req.moe_load_imbalance);
        }
        cfg.tp = c.tp;
        cfg.cp = c.cp;
        cfg.cp_comm.a2a = if c.cp > 1 && cfg.cp_comm.comm_type == crate::llm::cp::CpCommType::A2a { c.cp } else { 1 };
        cfg.pp = c.pp;
        cfg.dp = c.dp;
        cfg.micro_batch = c.micro_batch;
        cfg.grad_accum = (global_batch / c.dp as u64 / c.micro_batch as u64) as u32;
        cfg.global_batch = global_batch;
        cfg.virtual_stages = c.virtual_stages;
        cfg.recompute = c.recompute;
        cfg.recompute_modules = if c.recompute == Recompute::Selective {
            vec![crate::llm::moe::RecomputeModule::CoreAttn]
        } else {
            Vec::new()
        };
        cfg.sequence_parallel = c.sequence_parallel;
        cfg.overlap_p2p_comm = req.overlap_p2p_comm && c.pp > 1 && c.virtual_stages > 1;
        if let Some(moe) = cfg.moe.as_mut() {
            moe.overlap_ep_comm = c.overlap_ep;
        }
        cfg.bucket_params = req.bucket_size.map_or_else(|| TrainingConfig::default_bucket_params(c.dp), |b| b as f64);
    }

    fn fill_layers(&mut self, cfg: &TrainingConfig) {
        fill_chunk_layers(cfg, &mut self.layers);
        self.moe_layers = chunk_moe_layers(cfg, &self.layers);
    }

    /// Chunk times and stage tails of `cfg` into the scratch buffers; returns whether every stage fits.
    fn cost(&mut self, cfg: &TrainingConfig) -> Result<bool, ConfigError> {
        let layout = Layout::new(cfg, self.gpus_per_node);
        let v_padded = padded_vocab(cfg.model.vocab as u64, cfg.tp as u64);
        let key = pieces_key(cfg);
        let p = match self.pieces.get(&key) {
            Some(p) => *p,
            None => {
                let p = pieces(cfg, &layout, self.prec, v_padded, &mut self.timer)?;
                self.pieces.insert(key, p);
                p
            }
        };
        let skey = (cfg.tp, cfg.cp, cfg.dp, cfg.micro_batch);
        let sends = match self.sends.get(&skey) {
            Some(s) => *s,
            None => {
                let s = P2pTimes::of(cfg, &layout, &mut self.timer)?;
                self.sends.insert(skey, s);
                s
            }
        };
        self.fill_layers(cfg);
        chunk_times(
            cfg,
            &layout,
            &self.layers,
            &self.moe_layers,
            &p,
            &sends,
            v_padded,
            &mut self.timer,
            &mut self.times,
        )?;
        let facts = ActivationFacts::of(cfg);
        let lp = layer_params(cfg);
        let v = cfg.virtual_stages.max(1) as usize;
        self.tails.clear();
        let mut fits = true;
        let mut memo: Option<(f64, bool, StageTail)> = None;
        for s in 0..cfg.pp {
            let params = stage_params(cfg, s, &self.layers, &self.moe_layers, v_padded);
            let range = s as usize * v..(s as usize + 1) * v;
            let layers: u32 = self.layers[range.clone()].iter().sum();
            let moe_layers: u32 = self.moe_layers[range].iter().sum();
            let expert_params = stage_expert_params(cfg, s, moe_layers);
            let mem = stage_memory(
                cfg,
                &facts,
                &StageMemoryInput {
                    stage: s,
                    params,
                    layers,
                    moe_layers,
                    expert_params,
                    layer_params: lp,
                    first: s == 0,
                    last: s + 1 == cfg.pp,
                    v_padded,
                },
                self.capacity,
            );
            fits &= mem.fits;
            let window: f64 = self.times.bwd[s as usize * v..(s as usize + 1) * v].iter().sum();
            let shared = cfg.model.tied_embeddings || cfg.model.mtp_layers > 0;
            let tied = shared && cfg.pp > 1 && (s == 0 || s + 1 == cfg.pp);
            let tail = match memo {
                Some((p, first, t)) if p == params + expert_params && first == (s == 0) && !tied => {
                    StageTail { overlap_window_s: window, ..t }
                }
                _ => {
                    let parts = tail_parts(cfg, s, params, expert_params, v_padded);
                    let t =
                        stage_tail(cfg, &layout, s, layers, moe_layers, &parts, window, self.prec, &mut self.timer)?;
                    if !tied {
                        memo = Some((params + expert_params, s == 0, t));
                    }
                    t
                }
            };
            self.tails.push(tail);
        }
        Ok(fits)
    }

    /// Hands the backend every operator shape the candidates will ask for, so a learned backend can run each
    /// model once over all of them: the layer, embedding and head operators of every distinct (tp, cp,
    /// micro_batch, SP, recompute) and the optimizer of every distinct stage size.
    pub(super) fn prefetch(
        &mut self,
        base: &TrainingConfig,
        req_training: &SearchTraining,
        candidates: &[Candidate],
        global_batch: u64,
    ) {
        let mut cfg = base.clone();
        let mut keys = std::collections::HashSet::new();
        let mut params_seen = std::collections::HashSet::new();
        let mut sizes = std::collections::HashSet::new();
        let mut shapes = Vec::new();
        let push = |ops: Vec<crate::llm::operators::StageOp>, shapes: &mut Vec<(crate::op::OpShape, Precision)>| {
            shapes.extend(ops.into_iter().filter_map(|o| match o.work {
                crate::llm::operators::Work::Compute { shape, dtype } => Some((shape, dtype)),
                _ => None,
            }))
        };
        for c in candidates {
            Self::configure(&mut cfg, req_training, c, global_batch);
            let v_padded = padded_vocab(cfg.model.vocab as u64, cfg.tp as u64);
            if keys.insert(pieces_key(&cfg)) {
                let layout = Layout::new(&cfg, self.gpus_per_node);
                push(crate::llm::operators::layer_ops(&cfg, &layout, self.prec), &mut shapes);
                if let Some(moe) = &cfg.moe {
                    push(crate::llm::moe::ops::moe_layer_ops(&cfg, &layout, moe, self.prec), &mut shapes);
                }
                push(crate::llm::operators::embedding_ops(&cfg, &layout, self.prec, v_padded), &mut shapes);
                push(crate::llm::operators::head_ops(&cfg, &layout, self.prec, v_padded), &mut shapes);
            }
            // Stage sizes depend on (tp, pp, v) and their ZeRO shards on dp·cp only.
            if !sizes.insert((c.tp, c.pp, c.virtual_stages, c.dp, c.cp, c.ep, c.expert_tp)) {
                continue;
            }
            self.fill_layers(&cfg);
            for s in [0, 1.min(cfg.pp - 1), cfg.pp - 1] {
                let params = stage_params(&cfg, s, &self.layers, &self.moe_layers, v_padded);
                let range = s as usize * cfg.virtual_stages as usize..(s as usize + 1) * cfg.virtual_stages as usize;
                let experts = stage_expert_params(&cfg, s, self.moe_layers[range].iter().sum());
                let opt = tail_parts(&cfg, s, params, experts, v_padded).optimizer_params;
                if params_seen.insert((opt.round() as u64, cfg.precision)) {
                    if let crate::llm::operators::Work::Compute { shape, dtype } =
                        crate::llm::operators::optimizer_work(opt, self.prec.other)
                    {
                        shapes.push((shape, dtype));
                    }
                }
            }
        }
        self.timer.backend().prefetch(&shapes);
    }

    /// Costs a candidate: S1's pipeline gets eq. 7 (exact); the others a lower bound of the simulation.
    pub(super) fn bound(&mut self, cfg: &TrainingConfig) -> Result<Costed, ConfigError> {
        let fits = self.cost(cfg)?;
        if cfg.s1_pipeline() {
            let pp = cfg.pp as usize;
            debug_assert_eq!(self.times.fwd.len(), pp);
            let upd: Vec<f64> = self.tails.iter().map(|t| t.update_s).collect();
            let first = self.tails[0].grad_sync_s + self.tails[0].after_sync_s;
            let e = eq7(&self.times.fwd[..pp], &self.times.bwd[..pp], &upd, first, cfg.grad_accum);
            return Ok(Costed { bound_s: e.iteration_s(), exact: true, fits });
        }
        let t = &self.times;
        let spec = pipeline_spec(cfg, &t.fwd, &t.bwd, &t.send_fwd, &t.send_bwd, &self.tails);
        let lb = step_lower_bound(makespan_lower_bound(&spec), &self.tails, cfg.overlap_grad_reduce);
        Ok(Costed { bound_s: lb, exact: false, fits })
    }

    /// The exact (simulated) iteration time of a candidate.
    pub(super) fn exact(&mut self, cfg: &TrainingConfig) -> Result<f64, ConfigError> {
        self.cost(cfg)?;
        let t = &self.times;
        let spec = pipeline_spec(cfg, &t.fwd, &t.bwd, &t.send_fwd, &t.send_bwd, &self.tails);
        let sim = pipeline::simulate(&spec)
            .ok_or_else(|| bad("constraints", "a candidate's pipeline schedule cannot be simulated"))?;
        Ok(pipeline::step_time(&sim, &self.tails, cfg.overlap_grad_reduce).iteration_s())
    }
}

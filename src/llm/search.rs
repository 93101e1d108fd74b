//! The search for the fastest configuration that fits: enumerate tp·cp·pp·dp factorizations of the GPUs,
//! micro-batch sizes, virtual stages, recomputation and sequence parallelism; drop what does not fit in memory;
//! rank the rest by predicted iteration time and return the top k with their full predictions.
//!
//! Speed: operator times depend on shapes, not on the whole configuration, so a layer's, the embedding's and the
//! head's per-micro-batch times are computed once per (tp, cp, micro_batch, sequence_parallel, recompute) and every
//! collective once per (size, group); a candidate then costs a few multiplications per model chunk. The schedule
//! simulation is the only per-candidate work that grows with pp·v·m: candidates are first ranked by a lower bound
//! of their iteration time ([`pipeline::makespan_lower_bound`]) and simulated in that order until the bound
//! exceeds the k-th best simulated time, so the top k are exact (branch and bound). A configuration the search
//! returns predicts the same time through `POST /v1/predictions/training` (the same [`super::timing`] code).

use std::collections::HashMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::config::{bad, ConfigError, LayerSplit, ModelSpec, ParallelSpec, Recompute, RunSpec, TrainingConfig};
use super::decompose::{stage_params, tail_parts};
use super::layout::Layout;
use super::memory::{stage_memory, ActivationFacts, StageMemoryInput};
use super::operators::OpPrecisions;
use super::partition::partition;
use super::pipeline::{self, makespan_lower_bound, step_lower_bound, StageTail};
use super::predict::predict;
use super::report::TrainingPrediction;
use super::run::run_estimate;
use super::schedule::{eq7, pipeline_spec};
use super::sizing::{layer_params, padded_vocab};
use super::timing::{chunk_times, pieces, stage_tail, ChunkTimes, P2pTimes, Pieces, Timer};
use super::validate::{validate, validate_run};
use crate::cost::CostBackend;
use crate::hw::Precision;

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
}

/// Training options every candidate shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchTraining {
    /// ZeRO stage 0–3. Default 1.
    #[serde(default = "one")]
    pub zero_stage: u32,
    /// Megatron-Core's distributed optimizer. Default `false`.
    #[serde(default)]
    pub distributed_optimizer: bool,
    /// Megatron-Core's `overlap_grad_reduce`. Default `false`.
    #[serde(default)]
    pub overlap_grad_reduce: bool,
    /// Megatron-Core's `overlap_param_gather` (needs `distributed_optimizer` and `overlap_grad_reduce`). Default
    /// `false`.
    #[serde(default)]
    pub overlap_param_gather: bool,
    /// Megatron-Core's `align_param_gather`. Default `false`.
    #[serde(default)]
    pub align_param_gather: bool,
    /// Megatron-Core's DDP `bucket_size`, parameters. Default max(40 M, 1 M · dp) per candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_size: Option<u64>,
    /// Transformer Engine's `tp_comm_overlap` (in effect for candidates with sequence parallelism). Default
    /// `false`.
    #[serde(default)]
    pub tp_comm_overlap: bool,
    /// Megatron-Core's `overlap_p2p_comm` (in effect for interleaved candidates). Default `false`.
    #[serde(default)]
    pub overlap_p2p_comm: bool,
    /// `uniform` (Megatron-LM; allows interleaving) or `s1` (S1's split, no interleaving; eq. 7). Default
    /// `uniform`.
    #[serde(default = "uniform")]
    pub layer_split: LayerSplit,
}

impl Default for SearchTraining {
    fn default() -> Self {
        SearchTraining {
            zero_stage: 1,
            distributed_optimizer: false,
            overlap_grad_reduce: false,
            overlap_param_gather: false,
            align_param_gather: false,
            bucket_size: None,
            tp_comm_overlap: false,
            overlap_p2p_comm: false,
            layer_split: LayerSplit::Uniform,
        }
    }
}

fn one() -> u32 {
    1
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
    pub model: ModelSpec,
    /// GPUs to use: tp·cp·pp·dp equals this.
    pub gpus: u64,
    /// Sequences per optimizer step.
    pub global_batch: u32,
    /// Default `fp16`.
    #[serde(default = "fp16")]
    pub precision: Precision,
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
    /// Predicted iteration time, s.
    pub iteration_time_s: f64,
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
}

impl Candidate {
    /// The request's `parallelism` for this candidate.
    pub fn parallelism(&self, req: &SearchRequest) -> ParallelSpec {
        ParallelSpec {
            tp: self.tp,
            pp: self.pp,
            dp: self.dp,
            micro_batch: self.micro_batch,
            grad_accum: None,
            global_batch: Some(req.global_batch),
            zero_stage: req.training.zero_stage,
            sequence_parallel: self.sequence_parallel,
            virtual_stages: self.virtual_stages,
            recompute: self.recompute,
            distributed_optimizer: req.training.distributed_optimizer,
            overlap_grad_reduce: req.training.overlap_grad_reduce,
            overlap_param_gather: req.training.overlap_param_gather,
            align_param_gather: req.training.align_param_gather,
            bucket_size: req.training.bucket_size,
            tp_comm_overlap: req.training.tp_comm_overlap,
            overlap_p2p_comm: req.training.overlap_p2p_comm && self.pp > 1 && self.virtual_stages > 1,
            context_parallel: self.cp,
            layer_split: Some(req.training.layer_split),
        }
    }
}

fn divisors(n: u64) -> Vec<u32> {
    (1..=n.min(u32::MAX as u64)).filter(|d| n % d == 0).map(|d| d as u32).collect()
}

/// The validated template every candidate is derived from, and the enumeration limits.
struct Space {
    base: TrainingConfig,
    tps: Vec<u32>,
    cps: Vec<u32>,
    max_pp: u32,
    fixed_pp: Option<u32>,
    micro_batches: Vec<u32>,
    max_v: u32,
    recompute: Vec<Recompute>,
    sp: Vec<bool>,
}

fn space(req: &SearchRequest, gpus_per_node: u32, system_gpus: u64) -> Result<Space, ConfigError> {
    if req.gpus == 0 || req.gpus > system_gpus {
        return Err(bad("gpus", format!("gpus must be 1–{system_gpus} (the system's GPUs), got {}", req.gpus)));
    }
    if req.global_batch == 0 {
        return Err(bad("global_batch", "must be at least 1"));
    }
    if !(1..=100).contains(&req.top_k) {
        return Err(bad("top_k", "must be 1–100"));
    }
    if let Some(run) = &req.run {
        validate_run(run)?;
    }
    let t = &req.training;
    let template = ParallelSpec {
        tp: 1,
        pp: 1,
        dp: 1,
        micro_batch: 1,
        grad_accum: None,
        global_batch: Some(req.global_batch),
        zero_stage: t.zero_stage,
        sequence_parallel: false,
        virtual_stages: 1,
        recompute: Recompute::None,
        distributed_optimizer: t.distributed_optimizer,
        overlap_grad_reduce: t.overlap_grad_reduce,
        overlap_param_gather: t.overlap_param_gather,
        align_param_gather: t.align_param_gather,
        bucket_size: t.bucket_size,
        tp_comm_overlap: t.tp_comm_overlap,
        overlap_p2p_comm: false,
        context_parallel: 1,
        layer_split: Some(LayerSplit::S1),
    };
    let base = validate(&req.model, &template, req.precision, system_gpus).map_err(|e| {
        let field = e.field.replace("parallelism.", "training.");
        ConfigError { field, message: e.message }
    })?;
    let c = &req.constraints;
    let m = &base.model;
    let tp_ok =
        |tp: u32| m.heads % tp == 0 && base.kv_heads % tp == 0 && m.hidden % tp == 0 && base.ffn_hidden % tp == 0;
    let max_tp = c.max_tp.unwrap_or(gpus_per_node).max(1);
    let tps: Vec<u32> = match c.tp {
        Some(tp) if tp == 0 || !tp_ok(tp) || req.gpus % tp as u64 != 0 => {
            return Err(bad(
                "constraints.tp",
                format!("tp {tp} must divide heads, kv_heads, hidden, ffn_hidden and gpus"),
            ))
        }
        Some(tp) => vec![tp],
        None => divisors(req.gpus).into_iter().filter(|&tp| tp <= max_tp && tp_ok(tp)).collect(),
    };
    let cps = c.context_parallel.clone().unwrap_or_else(|| vec![1]);
    for &cp in &cps {
        if cp == 0 {
            return Err(bad("constraints.context_parallel", "degrees must be at least 1"));
        }
        if cp > 1 && (m.attention != super::config::Attention::Flash || m.seq_len % (2 * cp) != 0) {
            return Err(bad(
                "constraints.context_parallel",
                format!("cp {cp} needs model.attention flash and seq_len divisible by 2·cp"),
            ));
        }
    }
    let max_pp = c.max_pp.unwrap_or(m.layers).clamp(1, m.layers);
    if let Some(pp) = c.pp {
        if pp == 0 || pp > m.layers {
            return Err(bad("constraints.pp", format!("pp must be 1–{} (the layers)", m.layers)));
        }
    }
    let micro_batches = c.micro_batches.clone().unwrap_or_else(|| vec![1, 2, 4, 8]);
    if micro_batches.is_empty() || micro_batches.contains(&0) {
        return Err(bad("constraints.micro_batches", "give at least one micro-batch size, each at least 1"));
    }
    let max_v = match t.layer_split {
        LayerSplit::S1 => 1,
        LayerSplit::Uniform => c.max_virtual_stages.unwrap_or(8).max(1),
    };
    let recompute = c.recompute.clone().unwrap_or_else(|| Recompute::ALL.to_vec());
    let sp = c.sequence_parallel.clone().unwrap_or_else(|| vec![false, true]);
    if recompute.is_empty() {
        return Err(bad("constraints.recompute", "give at least one choice"));
    }
    if sp.is_empty() {
        return Err(bad("constraints.sequence_parallel", "give at least one choice"));
    }
    Ok(Space { base, tps, cps, max_pp, fixed_pp: c.pp, micro_batches, max_v, recompute, sp })
}

/// Calls `f` with every valid candidate (the same checks as [`validate`]).
fn enumerate(req: &SearchRequest, sp: &Space, f: &mut dyn FnMut(Candidate)) {
    let m = &sp.base.model;
    let gb = req.global_batch as u64;
    for &tp in &sp.tps {
        for &cp in &sp.cps {
            let per_pp = tp as u64 * cp as u64;
            if req.gpus % per_pp != 0 {
                continue;
            }
            if (m.seq_len / cp) % tp != 0 && sp.sp.iter().all(|&s| s) {
                continue;
            }
            for pp in divisors(req.gpus / per_pp) {
                if pp > sp.max_pp || sp.fixed_pp.is_some_and(|f| f != pp) {
                    continue;
                }
                if req.training.layer_split == LayerSplit::Uniform && m.layers % pp != 0 {
                    continue;
                }
                let dp = (req.gpus / per_pp / pp as u64) as u32;
                if gb % dp as u64 != 0 {
                    continue;
                }
                for &b in &sp.micro_batches {
                    if (gb / dp as u64) % b as u64 != 0 {
                        continue;
                    }
                    let grad_accum = gb / dp as u64 / b as u64;
                    for v in 1..=sp.max_v {
                        if v > 1 && (pp < 2 || m.layers % (pp * v) != 0 || grad_accum % pp as u64 != 0) {
                            continue;
                        }
                        for &recompute in &sp.recompute {
                            for &s in &sp.sp {
                                if s && (tp == 1 || (m.seq_len / cp) % tp != 0) {
                                    continue;
                                }
                                f(Candidate {
                                    tp,
                                    cp,
                                    pp,
                                    dp,
                                    micro_batch: b,
                                    virtual_stages: v,
                                    recompute,
                                    sequence_parallel: s,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
}

/// How many candidates `req` enumerates on a system (cheap: no costing). Errors as [`search`].
pub fn count_candidates(req: &SearchRequest, gpus_per_node: u32, system_gpus: u64) -> Result<u64, ConfigError> {
    let sp = space(req, gpus_per_node, system_gpus)?;
    let mut n = 0u64;
    enumerate(req, &sp, &mut |_| n += 1);
    Ok(n)
}

/// Caches and scratch buffers shared by all candidates of one search.
struct Evaluator<'a> {
    timer: Timer<'a>,
    pieces: HashMap<(u32, u32, u32, bool, Recompute), Pieces>,
    sends: HashMap<(u32, u32, u32, u32), P2pTimes>,
    prec: OpPrecisions,
    gpus_per_node: u32,
    capacity: f64,
    layers: Vec<u32>,
    times: ChunkTimes,
    tails: Vec<StageTail>,
}

/// A candidate's bound (or exact time) and memory verdict.
struct Costed {
    /// Lower bound of the iteration time, s (exact for S1's pipeline).
    bound_s: f64,
    exact: bool,
    fits: bool,
}

impl<'a> Evaluator<'a> {
    fn configure(cfg: &mut TrainingConfig, req: &SearchTraining, c: &Candidate, global_batch: u64) {
        cfg.tp = c.tp;
        cfg.cp = c.cp;
        cfg.pp = c.pp;
        cfg.dp = c.dp;
        cfg.micro_batch = c.micro_batch;
        cfg.grad_accum = (global_batch / c.dp as u64 / c.micro_batch as u64) as u32;
        cfg.global_batch = global_batch;
        cfg.virtual_stages = c.virtual_stages;
        cfg.recompute = c.recompute;
        cfg.sequence_parallel = c.sequence_parallel;
        cfg.overlap_p2p_comm = req.overlap_p2p_comm && c.pp > 1 && c.virtual_stages > 1;
        cfg.bucket_params =
            req.bucket_size.map_or_else(|| TrainingConfig::default_bucket_params(c.dp), |b| b as f64);
    }

    fn fill_layers(&mut self, cfg: &TrainingConfig) {
        self.layers.clear();
        match cfg.layer_split {
            LayerSplit::S1 => self.layers.extend(partition(cfg.model.layers, cfg.pp)),
            LayerSplit::Uniform => {
                let chunks = cfg.pp * cfg.virtual_stages;
                self.layers.extend((0..chunks).map(|_| cfg.model.layers / chunks));
            }
        }
    }

    /// Chunk times and stage tails of `cfg` into the scratch buffers; returns whether every stage fits.
    fn cost(&mut self, cfg: &TrainingConfig) -> Result<bool, ConfigError> {
        let layout = Layout::new(cfg, self.gpus_per_node);
        let v_padded = padded_vocab(cfg.model.vocab as u64, cfg.tp as u64);
        let key = (cfg.tp, cfg.cp, cfg.micro_batch, cfg.sp(), cfg.recompute);
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
        chunk_times(cfg, &layout, &self.layers, &p, &sends, v_padded, &mut self.timer, &mut self.times)?;
        let facts = ActivationFacts::of(cfg);
        let lp = layer_params(cfg);
        let v = cfg.virtual_stages.max(1) as usize;
        self.tails.clear();
        let mut fits = true;
        let mut memo: Option<(f64, bool, StageTail)> = None;
        for s in 0..cfg.pp {
            let params = stage_params(cfg, s, &self.layers, v_padded);
            let layers: u32 = self.layers[s as usize * v..(s as usize + 1) * v].iter().sum();
            let mem = stage_memory(
                cfg,
                &facts,
                &StageMemoryInput {
                    stage: s,
                    params,
                    layers,
                    layer_params: lp,
                    first: s == 0,
                    last: s + 1 == cfg.pp,
                    v_padded,
                },
                self.capacity,
            );
            fits &= mem.fits;
            let window: f64 = self.times.bwd[s as usize * v..(s as usize + 1) * v].iter().sum();
            let tied = cfg.model.tied_embeddings && cfg.pp > 1 && (s == 0 || s + 1 == cfg.pp);
            let tail = match memo {
                Some((p, first, t)) if p == params && first == (s == 0) && !tied => StageTail { overlap_window_s: window, ..t },
                _ => {
                    let parts = tail_parts(cfg, s, params, v_padded);
                    let t = stage_tail(cfg, &layout, s, &parts, window, self.prec, &mut self.timer)?;
                    if !tied {
                        memo = Some((params, s == 0, t));
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
    fn prefetch(
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
        let push = |ops: Vec<super::operators::StageOp>, shapes: &mut Vec<(crate::op::OpShape, Precision)>| {
            shapes.extend(ops.into_iter().filter_map(|o| match o.work {
                super::operators::Work::Compute { shape, dtype } => Some((shape, dtype)),
                _ => None,
            }))
        };
        for c in candidates {
            Self::configure(&mut cfg, req_training, c, global_batch);
            let v_padded = padded_vocab(cfg.model.vocab as u64, cfg.tp as u64);
            if keys.insert((c.tp, c.cp, c.micro_batch, cfg.sp(), c.recompute)) {
                let layout = Layout::new(&cfg, self.gpus_per_node);
                push(super::operators::layer_ops(&cfg, &layout, self.prec), &mut shapes);
                push(super::operators::embedding_ops(&cfg, &layout, self.prec, v_padded), &mut shapes);
                push(super::operators::head_ops(&cfg, &layout, self.prec, v_padded), &mut shapes);
            }
            // Stage sizes depend on (tp, pp, v) and their ZeRO shards on dp·cp only.
            if !sizes.insert((c.tp, c.pp, c.virtual_stages, c.dp, c.cp)) {
                continue;
            }
            self.fill_layers(&cfg);
            for s in [0, 1.min(cfg.pp - 1), cfg.pp - 1] {
                let params = stage_params(&cfg, s, &self.layers, v_padded);
                let opt = tail_parts(&cfg, s, params, v_padded).optimizer_params;
                if params_seen.insert((opt.round() as u64, cfg.precision)) {
                    if let super::operators::Work::Compute { shape, dtype } =
                        super::operators::optimizer_work(opt, self.prec.other)
                    {
                        shapes.push((shape, dtype));
                    }
                }
            }
        }
        self.timer.backend().prefetch(&shapes);
    }

    /// Costs a candidate: S1's pipeline gets eq. 7 (exact); the others a lower bound of the simulation.
    fn bound(&mut self, cfg: &TrainingConfig) -> Result<Costed, ConfigError> {
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
    fn exact(&mut self, cfg: &TrainingConfig) -> Result<f64, ConfigError> {
        self.cost(cfg)?;
        let t = &self.times;
        let spec = pipeline_spec(cfg, &t.fwd, &t.bwd, &t.send_fwd, &t.send_bwd, &self.tails);
        let sim = pipeline::simulate(&spec)
            .ok_or_else(|| bad("constraints", "a candidate's pipeline schedule cannot be simulated"))?;
        Ok(pipeline::step_time(&sim, &self.tails, cfg.overlap_grad_reduce).iteration_s())
    }
}

/// Searches `req` on `backend`'s system. `progress(done, total)` is called now and then.
///
/// Errors (422 fields): `gpus`, `global_batch`, `top_k`, `run…`, `model…`, `training…`, `constraints…`; a
/// precision the GPU lacks (`precision`).
pub fn search(
    req: &SearchRequest,
    backend: &dyn CostBackend,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<SearchResult, ConfigError> {
    let start = Instant::now();
    let system = backend.system();
    let sp = space(req, system.gpus_per_node, system.total_gpus())?;
    if req.precision == Precision::Fp8 && system.gpu.peak_matmul_flops(Precision::Fp8).is_none() {
        return Err(bad("precision", format!("{} has no fp8 tensor cores", system.gpu.name)));
    }
    let mut candidates: Vec<Candidate> = Vec::new();
    enumerate(req, &sp, &mut |c| candidates.push(c));
    let total = candidates.len() as u64;
    let mut base = sp.base.clone();
    base.layer_split = req.training.layer_split;
    let mut ev = Evaluator {
        timer: Timer::new(backend),
        pieces: HashMap::new(),
        sends: HashMap::new(),
        prec: OpPrecisions::of(&base, &system.gpu),
        gpus_per_node: system.gpus_per_node,
        capacity: system.gpu.memory_bytes(),
        layers: Vec::new(),
        times: ChunkTimes::default(),
        tails: Vec::new(),
    };
    let gb = req.global_batch as u64;
    ev.prefetch(&base, &req.training, &candidates, gb);
    // Phase 1: cost, memory-check and bound every candidate.
    let mut ranked: Vec<(f64, bool, u32)> = Vec::new();
    let mut cfg = base.clone();
    for (i, c) in candidates.iter().enumerate() {
        Evaluator::configure(&mut cfg, &req.training, c, gb);
        let costed = ev.bound(&cfg)?;
        if costed.fits {
            ranked.push((costed.bound_s, costed.exact, i as u32));
        }
        if i % 4096 == 4095 {
            progress(i as u64 + 1, total);
        }
    }
    let fitting = ranked.len() as u64;
    // Phase 2: exact times in bound order until the bound exceeds the k-th best.
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    let k = req.top_k as usize;
    let mut best: Vec<(f64, u32)> = Vec::with_capacity(k + 1);
    let mut simulated = 0u64;
    for &(bound, exact, i) in &ranked {
        if best.len() == k && bound >= best[k - 1].0 {
            break;
        }
        let t = if exact {
            bound
        } else {
            Evaluator::configure(&mut cfg, &req.training, &candidates[i as usize], gb);
            simulated += 1;
            ev.exact(&cfg)?
        };
        let pos = best.partition_point(|(bt, _)| *bt <= t);
        if pos < k {
            best.insert(pos, (t, i));
            best.truncate(k);
        }
    }
    progress(total, total);
    let elapsed_s = start.elapsed().as_secs_f64();
    // The full predictions of the winners (the same code path as POST /v1/predictions/training).
    let mut top = Vec::with_capacity(best.len());
    for (rank, (t, i)) in best.iter().enumerate() {
        let c = candidates[*i as usize];
        let parallelism = c.parallelism(req);
        let cfg = validate(&req.model, &parallelism, req.precision, system.total_gpus())?;
        let mut prediction = predict(&cfg, backend)?;
        debug_assert!((prediction.iteration_time_s / t - 1.0).abs() < 1e-9, "{} vs {t}", prediction.iteration_time_s);
        if let Some(run) = &req.run {
            prediction.run = Some(run_estimate(&prediction, run, req.model.seq_len));
        }
        top.push(SearchHit {
            rank: rank as u32 + 1,
            parallelism,
            iteration_time_s: prediction.iteration_time_s,
            memory_gib: prediction.memory.total_gib,
            prediction,
        });
    }
    let mut warnings = Vec::new();
    if total == 0 {
        warnings.push(format!(
            "no configuration of {} GPUs divides global_batch {} under the constraints",
            req.gpus, req.global_batch
        ));
    } else if fitting == 0 {
        warnings.push(format!(
            "none of the {total} configurations fits in {:.0} GiB per GPU: allow recompute, sequence parallelism, \
             more pipeline stages or a higher zero_stage",
            system.gpu.memory_gib
        ));
    }
    Ok(SearchResult {
        evaluated: total,
        fitting,
        simulated,
        elapsed_s,
        candidates_per_s: total as f64 / elapsed_s.max(1e-9),
        top,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::AnalyticBackend;
    use crate::hw::presets;

    fn dgx_h100() -> crate::hw::System {
        presets().into_iter().find(|p| p.name == "dgx-h100").unwrap().resolve().unwrap()
    }

    fn llama8b_request(extra: serde_json::Value) -> SearchRequest {
        let mut r = serde_json::json!({"system": "dgx-h100", "gpus": 16, "global_batch": 64, "precision": "bf16",
            "model": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
                      "seq_len": 4096, "vocab": 128256, "norm": "rmsnorm", "activation": "swiglu", "attention": "flash"},
            "training": {"distributed_optimizer": true}, "top_k": 5});
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        serde_json::from_value(r).unwrap()
    }

    #[test]
    fn every_candidate_is_a_valid_configuration() {
        let req = llama8b_request(serde_json::json!({"constraints": {"context_parallel": [1, 2]}}));
        let sys = dgx_h100();
        let sp = space(&req, 8, sys.total_gpus()).unwrap();
        let mut n = 0;
        enumerate(&req, &sp, &mut |c| {
            let cfg = validate(&req.model, &c.parallelism(&req), req.precision, sys.total_gpus())
                .unwrap_or_else(|e| panic!("{c:?}: {e}"));
            assert_eq!(cfg.gpus(), 16);
            let mut mine = sp.base.clone();
            mine.layer_split = LayerSplit::Uniform;
            Evaluator::configure(&mut mine, &req.training, &c, 64);
            assert_eq!(mine, cfg);
            n += 1;
        });
        assert_eq!(n as u64, count_candidates(&req, 8, sys.total_gpus()).unwrap());
        assert!(n > 100, "{n}");
    }

    #[test]
    fn the_top_k_are_exactly_the_fastest_that_fit_and_match_the_predictor() {
        let req = llama8b_request(serde_json::json!({"constraints": {"max_virtual_stages": 4}}));
        let sys = dgx_h100();
        let backend = AnalyticBackend::new(sys.clone());
        let res = search(&req, &backend, &mut |_, _| {}).unwrap();
        assert_eq!(res.top.len(), 5);
        assert!(res.simulated < res.fitting, "pruning simulated {} of {}", res.simulated, res.fitting);
        // Brute force: predict every candidate through the endpoint's code and rank those that fit.
        let sp = space(&req, 8, sys.total_gpus()).unwrap();
        let mut all: Vec<(f64, ParallelSpec)> = Vec::new();
        let mut evaluated = 0;
        enumerate(&req, &sp, &mut |c| {
            evaluated += 1;
            let cfg = validate(&req.model, &c.parallelism(&req), req.precision, 1024).unwrap();
            let p = predict(&cfg, &backend).unwrap();
            if p.memory.fits {
                all.push((p.iteration_time_s, c.parallelism(&req)));
            }
        });
        assert_eq!((res.evaluated, res.fitting), (evaluated, all.len() as u64));
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (hit, (t, _)) in res.top.iter().zip(&all) {
            assert!((hit.iteration_time_s / t - 1.0).abs() < 1e-9, "{} vs {t}", hit.iteration_time_s);
            assert!(hit.prediction.memory.fits);
        }
        // Ranked fastest first.
        assert!(res.top.windows(2).all(|w| w[0].iteration_time_s <= w[1].iteration_time_s));
    }

    #[test]
    fn constraints_restrict_the_space_and_bad_ones_name_their_field() {
        let sys = dgx_h100();
        let fixed = llama8b_request(serde_json::json!({"constraints": {"tp": 2, "max_pp": 2, "recompute": ["full"],
            "sequence_parallel": [true], "micro_batches": [1], "max_virtual_stages": 1}}));
        // tp 2, pp ∈ {1, 2}, dp = 8 or 4, b 1, full recompute, SP on: 2 candidates.
        assert_eq!(count_candidates(&fixed, 8, sys.total_gpus()).unwrap(), 2);
        let res = search(&fixed, &AnalyticBackend::new(sys.clone()), &mut |_, _| {}).unwrap();
        assert!(res.top.iter().all(|h| h.parallelism.tp == 2 && h.parallelism.recompute == Recompute::Full));
        for (extra, field) in [
            (serde_json::json!({"constraints": {"tp": 3}}), "constraints.tp"),
            (serde_json::json!({"gpus": 0}), "gpus"),
            (serde_json::json!({"top_k": 0}), "top_k"),
            (serde_json::json!({"constraints": {"micro_batches": []}}), "constraints.micro_batches"),
            (serde_json::json!({"constraints": {"context_parallel": [3]}}), "constraints.context_parallel"),
            (serde_json::json!({"training": {"zero_stage": 5}}), "training.zero_stage"),
        ] {
            let e = count_candidates(&llama8b_request(extra.clone()), 8, sys.total_gpus()).unwrap_err();
            assert_eq!(e.field, field, "{extra}");
        }
    }

    #[test]
    fn nothing_fits_is_reported() {
        // Llama-3 8B on one GPU without sharding: 8 B parameters · 16 bytes = 128 GB > 80 GiB.
        let req = llama8b_request(serde_json::json!({"gpus": 1, "global_batch": 8,
            "training": {"zero_stage": 0}}));
        let res = search(&req, &AnalyticBackend::new(dgx_h100()), &mut |_, _| {}).unwrap();
        assert!(res.evaluated > 0);
        assert_eq!((res.fitting, res.top.len()), (0, 0));
        assert!(res.warnings[0].contains("fits"), "{:?}", res.warnings);
    }
}

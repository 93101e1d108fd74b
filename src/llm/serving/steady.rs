//! Stage 3 of a serving prediction — **schedule**: engine steps composed into the steady state of continuous
//! batching with chunked prefill (Orca's iteration-level scheduling, Yu et al. 2022; vLLM's chunked prefill,
//! Agrawal et al. 2024 "Sarathi-Serve"), or into one static batch.
//!
//! **A step** ([`Solver::step`]) runs the decodes of every running sequence plus prefill chunks within
//! `max_num_batched_tokens`; its time is max(GPU time, eager launch time) plus the engine's host overhead per step
//! ([`super::engine::ServingConstants`]). A decode step of at most `cuda_graph_max_batch` sequences replays a CUDA
//! graph (no launch time, and each analytic kernel costs the GPU `graph_kernel_us` beyond its body instead of
//! `kernel_us`); a step with prefill runs eagerly. With pp > 1 the batch is split into pp micro-batches
//! that flow through the stages: a round takes pp times the slowest stage's micro-batch step [rec].
//!
//! **Steady state, closed loop of n running requests** ([`Solver::closed_loop`]; a fluid model [rec]): each
//! request prefills L tokens in k = ⌈L/c⌉ chunks of c = min(L, budget − D) tokens, then decodes O − 1 tokens at a
//! mean context of L + O/2. With D requests decoding, D/(O − 1) requests finish per step, so a fraction
//! q = min(1, k·D/(O − 1)) of steps carry a prefill chunk (several prompts' chunks when the demand D·L/(O − 1)
//! exceeds one chunk, up to the budget; beyond it the step budget bounds the throughput and the surplus requests
//! wait for their prefill). Mixed steps carry D·(n − 1)/n decodes (a prompt never shares a step with its own
//! decode). The mean step τ = q·t_mixed + (1 − q)·t_decode.
//! - **TPOT** = τ (a decoding sequence advances every step); without chunked prefill the decodes stall during
//!   prefill steps: τ/(1 − q).
//! - **TTFT** = wait for the running step (τ/2, when others are running: ·(n − 1)/n) + k mixed steps (+ the wait for
//!   prefill admission when the budget is saturated, + the queue of requests beyond the running limit).
//! - **Request latency** R = TTFT + (O − 1)·TPOT; **throughput** X = concurrency / R requests/s (Little's law),
//!   output tokens/s = X·O.
//!
//! D is found by fixed-point iteration on n = X·R. An **open loop** at rate λ is the closed loop whose throughput
//! is λ (bisection on n); arrivals above the largest throughput make the queue grow without bound (a warning).
//!
//! **A static batch** ([`Solver::static_batch`], LLM-Inference-Bench): B prompts prefilled in one step, then O − 1
//! decode steps of B sequences at the mean context L + O/2 (decode attention is linear in the context, so the mean
//! step is exact for it); a batch larger than the KV cache holds runs in ⌈B/fit⌉ waves.

use rustc_hash::FxHashMap;

use super::engine::ServingConstants;
use super::step::{for_each_op, stage_ops, time_step, StageRole, StepLoad, TimedStep};
use super::validate::ServingConfig;
use crate::comm::Group;
use crate::cost::{CostBackend, Source};
use crate::hw::Precision;
use crate::llm::config::ConfigError;
use crate::llm::operators::Work;
use crate::llm::timing::{Timer, TimerCache};
use crate::op::{Collective, OpShape};

/// An operator's work as a hashable key (a collective's bytes by their bits).
#[derive(PartialEq, Eq, Hash, Clone, Copy)]
enum OpKey {
    Compute(OpShape, Precision),
    Collective(Collective, u64, Group, u32),
}

/// Operator times of the serving step model, memoized per operator's work: per operator its time, µs; its
/// kernels; whether it is an analytic compute answer (it carries `kernel_us` per kernel, [`super::derate`]).
///
/// An operator's time depends on its work (shape and precision, or a collective's bytes and group) and the
/// backend, not on the configuration that asks: solvers of different configurations over one backend — a search's
/// candidates and their simulations — share one table ([`Solver::with_op_times`], [`Solver::into_op_times`]), so
/// that each distinct operator is timed through the backend once per search instead of once per candidate. The
/// table remembers the backend it was filled through and empties itself when handed to a solver over another one.
///
/// Hashed with FxHash (`rustc-hash`): the keys are shapes, precisions and group sizes derived from a validated
/// configuration (never client-chosen strings), so no key set can be crafted to collide (HashDoS); a table holds at
/// most the distinct operators of one search.
#[derive(Default)]
pub struct OpTimes {
    /// The address of the backend the times came from (None: empty). Keep a table no longer than its backend lives:
    /// another backend at the same address would read its times.
    backend: Option<usize>,
    times: FxHashMap<OpKey, (f64, u32, bool)>,
    /// The solver's timer's table (the full answers, for the report's operator tables, [`Solver::detail`]).
    timed: TimerCache,
}

impl OpTimes {
    /// Distinct operators timed.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// No operator timed yet.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// The table for `backend`: itself when it was filled through the same backend, else emptied.
    fn for_backend(mut self, backend: &dyn CostBackend) -> OpTimes {
        let address = (backend as *const dyn CostBackend).cast::<()>() as usize;
        if self.backend != Some(address) {
            self.times.clear();
            self.timed.clear();
            self.backend = Some(address);
        }
        self
    }
}

/// One step of the whole running batch, timed.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// What the step processed.
    pub load: StepLoad,
    /// The step's wall time, s: pp · max(GPU, launch) of the slowest stage's micro-batch + the host overhead
    /// (with `async_scheduling`, the larger of the two).
    pub time_s: f64,
    /// GPU time of the slowest stage's micro-batch, s.
    pub gpu_s: f64,
    /// Eager launch time of the slowest stage's micro-batch, s (0 under a CUDA graph).
    pub launch_s: f64,
    /// The engine's host overhead, s.
    pub overhead_s: f64,
    /// The step replays a CUDA graph.
    pub cuda_graph: bool,
    /// The slowest stage (0 = the first; with pp = 1 the only one).
    pub slowest_stage: usize,
}

/// The steady state of a closed loop.
#[derive(Debug, Clone, PartialEq)]
pub struct Steady {
    /// Requests running (admitted).
    pub running: f64,
    /// Of them, decoding.
    pub decoding: f64,
    /// Requests waiting beyond the running limit.
    pub queued: f64,
    /// Prompt tokens per mixed step.
    pub prefill_tokens_per_step: f64,
    /// Mixed steps per prompt, k.
    pub prefill_steps: u32,
    /// Fraction of steps that carry prefill, q.
    pub mixed_fraction: f64,
    /// The step budget bounds admissions.
    pub prefill_bound: bool,
    pub ttft_s: f64,
    pub tpot_s: f64,
    pub request_latency_s: f64,
    /// Requests per second.
    pub throughput_rps: f64,
    /// A step with prefill (and the decodes sharing it).
    pub mixed: StepResult,
    /// A decode-only step.
    pub decode: StepResult,
}

/// A static batch's time.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticBatch {
    /// The whole batch, s.
    pub latency_s: f64,
    /// Waves the batch ran in (1 when it fits the KV cache).
    pub waves: u32,
    pub prefill: StepResult,
    pub decode: StepResult,
}

/// Steps of one configuration, timed through one backend; caches operator times and steps by load.
pub struct Solver<'a> {
    cfg: &'a ServingConfig,
    timer: Timer<'a>,
    consts: ServingConstants,
    /// Steps by load (decode sequences, decode context, prefill tokens, prompt length, sampled); FxHash, as
    /// [`OpTimes`]: the keys are the step model's own token counts.
    steps: FxHashMap<(u32, u32, u32, u32, u32), StepResult>,
    /// Per operator: time, µs; kernels; whether it is an analytic compute answer.
    ops: OpTimes,
    /// Sequences the engine runs at once (max_num_seqs, the KV cache and the step budget).
    pub capacity: u32,
    /// Sequences a static batch runs at once (max_num_seqs and the KV cache).
    pub static_capacity: u32,
}

impl<'a> Solver<'a> {
    /// A solver for `cfg` on `backend`'s system; at most `kv_concurrency` requests fit in the KV cache.
    pub fn new(
        cfg: &'a ServingConfig,
        backend: &'a dyn CostBackend,
        consts: ServingConstants,
        kv_concurrency: u64,
    ) -> Solver<'a> {
        Solver::with_op_times(cfg, backend, consts, kv_concurrency, OpTimes::default())
    }

    /// [`Solver::new`] starting from the operator times `ops` (timed through `backend` by earlier solvers; emptied if
    /// they came from another backend). The answers are those of [`Solver::new`]: a table only saves asking the
    /// backend again for an operator it already timed.
    pub fn with_op_times(
        cfg: &'a ServingConfig,
        backend: &'a dyn CostBackend,
        consts: ServingConstants,
        kv_concurrency: u64,
        ops: OpTimes,
    ) -> Solver<'a> {
        let s = &cfg.settings;
        let fit = (s.max_num_seqs as u64).min(kv_concurrency.max(1));
        let capacity = if s.chunked_prefill { fit.min(s.max_num_batched_tokens as u64) } else { fit };
        let mut ops = ops.for_backend(backend);
        Solver {
            cfg,
            timer: Timer::with_cache(backend, std::mem::take(&mut ops.timed)),
            consts,
            steps: FxHashMap::default(),
            ops,
            capacity: capacity.max(1) as u32,
            static_capacity: fit.max(1) as u32,
        }
    }

    /// The operator times this solver holds, for the next solver over the same backend.
    pub fn into_op_times(self) -> OpTimes {
        OpTimes { timed: self.timer.into_cache(), ..self.ops }
    }

    /// The configuration.
    pub fn config(&self) -> &ServingConfig {
        self.cfg
    }

    /// Distinct step loads timed so far.
    pub fn cached_steps(&self) -> usize {
        self.steps.len()
    }

    /// The stages a step is timed on (pp = 1: the only one; else the first and the last, the slowest two) with
    /// their dense and MoE layers.
    fn stages(&self) -> Vec<(StageRole, u32, u32)> {
        let cfg = self.cfg;
        let moe_total = cfg.model.moe_layers();
        let dense_total = cfg.model.layers - moe_total;
        if cfg.pp == 1 {
            return vec![(StageRole { first: true, last: true }, dense_total, moe_total)];
        }
        let per = cfg.layers_per_stage();
        let (first_dense, last_moe) = (dense_total.min(per), moe_total.min(per));
        vec![
            (StageRole { first: true, last: false }, first_dense, per - first_dense),
            (StageRole { first: false, last: true }, per - last_moe, last_moe),
        ]
    }

    /// One micro-batch of `load` on one GPU: every count split over the pp micro-batches (and, with data-parallel
    /// attention, over the tp ranks).
    fn micro(&self, load: &StepLoad) -> StepLoad {
        let parts = self.cfg.pp * self.cfg.dp();
        let split = |v: u32| v.div_ceil(parts);
        StepLoad {
            decode_seqs: split(load.decode_seqs),
            prefill_tokens: split(load.prefill_tokens),
            sampled: split(load.sampled),
            ..*load
        }
    }

    /// GPU seconds, kernels and analytic compute kernels (those charged `kernel_us` each, [`super::derate`]) of one
    /// stage's micro-batch step, without allocating (operator times memoized).
    fn stage_time(
        &mut self,
        micro: &StepLoad,
        role: StageRole,
        dense: u32,
        moe: u32,
    ) -> Result<(f64, f64, f64), ConfigError> {
        let (mut gpu_us, mut kernels, mut analytic) = (0.0, 0.0, 0.0);
        let mut err = None;
        let (cfg, timer, cache) = (self.cfg, &mut self.timer, &mut self.ops.times);
        let system = timer.backend().system();
        for_each_op(cfg, system, micro, role, dense, moe, &mut |_, work, per_step, _| {
            if err.is_some() {
                return;
            }
            let key = match work {
                Work::Compute { shape, dtype } => OpKey::Compute(shape, dtype),
                Work::Collective { collective, bytes, group, active_per_node } => {
                    OpKey::Collective(collective, bytes.to_bits(), group, active_per_node)
                }
            };
            let (t, k, a) = match cache.get(&key) {
                Some(v) => *v,
                None => match timer.time(&work) {
                    Ok(t) => {
                        let a = matches!(work, Work::Compute { .. }) && t.source == Source::Analytic;
                        let v = (t.time_us, t.kernels.max(1), a);
                        cache.insert(key, v);
                        v
                    }
                    Err(e) => {
                        err = Some(e);
                        return;
                    }
                },
            };
            gpu_us += per_step * t;
            kernels += per_step * f64::from(k);
            if a {
                analytic += per_step * f64::from(k);
            }
        });
        match err {
            Some(e) => Err(e),
            None => Ok((gpu_us * 1e-6, kernels, analytic)),
        }
    }

    /// What one analytic kernel's GPU time changes by when its step replays a CUDA graph, µs: `graph_kernel_us` in
    /// place of `kernel_us` (negative: a graph is cheaper).
    fn graph_delta_us(&self) -> f64 {
        self.consts.graph_kernel_us - self.consts.efficiency.kernel_us
    }

    /// The time of one step processing `load` (see the module doc).
    pub fn step(&mut self, load: StepLoad) -> Result<StepResult, ConfigError> {
        let key = (load.decode_seqs, load.decode_context, load.prefill_tokens, load.prompt_len, load.sampled);
        if let Some(s) = self.steps.get(&key) {
            return Ok(s.clone());
        }
        let cfg = self.cfg;
        let micro = self.micro(&load);
        let graph = cfg.settings.cuda_graphs
            && load.prefill_tokens == 0
            && micro.decode_seqs <= cfg.settings.cuda_graph_max_batch;
        let eager_us = if graph { 0.0 } else { self.consts.eager_kernel_us };
        let (mut slowest, mut gpu_s, mut launch_s) = (0usize, 0.0f64, 0.0f64);
        for (i, (role, dense, moe)) in self.stages().into_iter().enumerate() {
            let (g, k, analytic) = self.stage_time(&micro, role, dense, moe)?;
            let g = if graph { (g + analytic * self.graph_delta_us() * 1e-6).max(0.0) } else { g };
            let l = k * eager_us * 1e-6;
            if i == 0 || g.max(l) > gpu_s.max(launch_s) {
                (slowest, gpu_s, launch_s) = (i, g, l);
            }
        }
        let host = self.consts.host(cfg.engine, &cfg.settings);
        // Each data-parallel rank runs its own scheduler over its share of the sequences.
        let seqs = (load.decode_seqs as f64 + (load.prefill_tokens as f64 / load.prompt_len.max(1) as f64).ceil())
            / cfg.dp() as f64;
        let overhead_s = (host.step_us + host.seq_us * seqs) * 1e-6;
        let result = StepResult {
            load,
            // Host work between steps adds to the GPU's, unless the engine schedules asynchronously: then the
            // next step's preparation runs while this one computes and the slower of the two sets the pace.
            time_s: if cfg.settings.async_scheduling {
                (cfg.pp as f64 * gpu_s.max(launch_s)).max(overhead_s)
            } else {
                cfg.pp as f64 * gpu_s.max(launch_s) + overhead_s
            },
            gpu_s,
            launch_s,
            overhead_s,
            cuda_graph: graph,
            slowest_stage: slowest,
        };
        self.steps.insert(key, result.clone());
        Ok(result)
    }

    /// The slowest stage's operators of `step`, each timed (the report's operator table).
    pub fn detail(&mut self, step: &StepResult) -> Result<TimedStep, ConfigError> {
        let micro = self.micro(&step.load);
        let (role, dense, moe) = self.stages()[step.slowest_stage];
        let ops = stage_ops(self.cfg, self.timer.backend().system(), &micro, role, dense, moe);
        let mut timed = time_step(ops, &mut self.timer)?;
        if step.cuda_graph {
            // The same in-graph kernel cost as [`Solver::step`], shown on each analytic operator.
            let delta = self.graph_delta_us();
            let mut gpu_us = 0.0;
            for (o, t) in timed.ops.iter().zip(timed.times.iter_mut()) {
                if matches!(o.op.work, Work::Compute { .. }) && t.source == Source::Analytic {
                    t.time_us = (t.time_us + f64::from(t.kernels.max(1)) * delta).max(0.0);
                }
                gpu_us += o.per_step * t.time_us;
            }
            timed.gpu_s = gpu_us * 1e-6;
        }
        Ok(timed)
    }

    /// The mean context of a decoding sequence, tokens: L + O/2.
    fn decode_context(&self) -> u32 {
        self.cfg.input_tokens + self.cfg.output_tokens / 2
    }

    /// The steady state with `n` requests running (n ≤ [`Solver::capacity`]; real-valued for the open loop's
    /// bisection). See the module doc.
    pub fn closed_loop(&mut self, n: f64) -> Result<Steady, ConfigError> {
        let cfg = self.cfg;
        let (l, o1) = (cfg.input_tokens, cfg.output_tokens.saturating_sub(1));
        let (lf, o1f) = (l as f64, o1 as f64);
        let n = n.max(1e-6);
        let budget = cfg.settings.max_num_batched_tokens.max(1);
        let chunked = cfg.settings.chunked_prefill;
        let ctx = self.decode_context();
        let others = ((n - 1.0) / n).max(0.0);
        if o1 == 0 {
            return self.prefill_only(n, budget.max(if chunked { 1 } else { l }));
        }
        // The most decodes the budget's prefill can feed: D·L/(O − 1) prompt tokens per step ≤ budget − D.
        let d_max = if chunked { budget as f64 * o1f / (lf + o1f) } else { f64::INFINITY };
        let mut d = (n * o1f / (o1f + (lf / budget as f64).ceil())).min(d_max);
        let mut state = None;
        for _ in 0..16 {
            d = d.min(d_max).max(1e-6);
            let dr = (d.round() as u32).max(1);
            let room = if chunked { budget.saturating_sub(dr).max(1) } else { budget.max(l) };
            let c = if chunked { l.min(room) } else { l };
            let k = l.div_ceil(c.max(1));
            let completions = d / o1f;
            let demand = completions * lf;
            let (q, prefill_tokens) = if demand <= c as f64 {
                ((completions * k as f64).min(1.0), lf / k as f64)
            } else {
                (1.0, demand.min(room as f64))
            };
            // Without chunked prefill a prefill step holds no decodes and decodes stall during it.
            let q = if chunked { q } else { q.min(0.95) };
            let pt = (prefill_tokens.round() as u32).max(1);
            let mixed_decodes = if chunked { ((d * others).round() as u32).min(dr) } else { 0 };
            let sampled = mixed_decodes + (pt as f64 / lf).ceil() as u32;
            let mixed = self.step(StepLoad {
                decode_seqs: mixed_decodes,
                decode_context: ctx,
                prefill_tokens: pt,
                prompt_len: l,
                sampled,
            })?;
            let decode = self.step(StepLoad {
                decode_seqs: dr,
                decode_context: ctx,
                prefill_tokens: 0,
                prompt_len: l,
                sampled: dr,
            })?;
            let tau = q * mixed.time_s + (1.0 - q) * decode.time_s;
            let tpot = if chunked { tau } else { tau / (1.0 - q) };
            let mut ttft = others * tau / 2.0 + k as f64 * mixed.time_s;
            let x = d / (o1f * tpot);
            let implied = x * (ttft + o1f * tpot);
            let bound = d >= d_max * (1.0 - 1e-9) && implied < n;
            if bound {
                // The surplus waits for prefill admission (Little's law on the waiting requests).
                ttft += (n - implied) / x;
            }
            let latency = ttft + o1f * tpot;
            state = Some(Steady {
                running: n,
                decoding: d,
                queued: 0.0,
                prefill_tokens_per_step: prefill_tokens,
                prefill_steps: k,
                mixed_fraction: q,
                prefill_bound: bound,
                ttft_s: ttft,
                tpot_s: tpot,
                request_latency_s: latency,
                throughput_rps: n / latency,
                mixed,
                decode,
            });
            if bound || (implied - n).abs() <= 1e-4 * n {
                break;
            }
            // n = X·R with X = D/((O − 1)·TPOT): D = n / (1 + TTFT/((O − 1)·TPOT)).
            d = n / (1.0 + ttft / (o1f * tpot));
        }
        Ok(state.expect("at least one iteration"))
    }

    /// Requests that generate one token (O = 1): every step prefills up to `room` prompt tokens; TTFT = R = n/X.
    fn prefill_only(&mut self, n: f64, room: u32) -> Result<Steady, ConfigError> {
        let l = self.cfg.input_tokens;
        let lf = l as f64;
        let pt = (n * lf).min(room as f64).max(1.0);
        let k = l.div_ceil(room.min(l).max(1));
        let mixed = self.step(StepLoad {
            decode_seqs: 0,
            decode_context: 0,
            prefill_tokens: pt.round() as u32,
            prompt_len: l,
            sampled: (pt / lf).ceil() as u32,
        })?;
        let x = pt / lf / mixed.time_s;
        let ttft = (n / x).max(k as f64 * mixed.time_s);
        Ok(Steady {
            running: n,
            decoding: 0.0,
            queued: 0.0,
            prefill_tokens_per_step: pt,
            prefill_steps: k,
            mixed_fraction: 1.0,
            prefill_bound: n * lf > room as f64,
            ttft_s: ttft,
            tpot_s: 0.0,
            request_latency_s: ttft,
            throughput_rps: n / ttft,
            decode: mixed.clone(),
            mixed,
        })
    }

    /// A closed loop of `concurrency` clients: at most [`Solver::capacity`] run, the rest queue.
    pub fn concurrency(&mut self, concurrency: u32) -> Result<Steady, ConfigError> {
        let running = concurrency.min(self.capacity);
        let mut s = self.closed_loop(running as f64)?;
        if concurrency > running {
            let x = s.throughput_rps;
            let queued = (concurrency - running) as f64;
            s.queued = queued;
            s.ttft_s += queued / x;
            s.request_latency_s += queued / x;
            s.throughput_rps = concurrency as f64 / s.request_latency_s;
        }
        Ok(s)
    }

    /// An open loop at `rate` requests/s: the closed loop whose throughput is `rate`, and whether the rate is
    /// above the largest throughput (then the answer is at saturation).
    pub fn open_loop(&mut self, rate: f64) -> Result<(Steady, bool), ConfigError> {
        let max = self.closed_loop(self.capacity as f64)?;
        if rate >= max.throughput_rps {
            return Ok((max, true));
        }
        let (mut lo, mut hi) = (1e-6, self.capacity as f64);
        for _ in 0..40 {
            let mid = 0.5 * (lo + hi);
            if self.closed_loop(mid)?.throughput_rps < rate {
                lo = mid;
            } else {
                hi = mid;
            }
            if hi - lo < 1e-3 * hi {
                break;
            }
        }
        Ok((self.closed_loop(hi)?, false))
    }

    /// One static batch of `batch` prompts (see the module doc).
    pub fn static_batch(&mut self, batch: u32) -> Result<StaticBatch, ConfigError> {
        let cfg = self.cfg;
        let fit = self.static_capacity;
        let waves = batch.div_ceil(fit);
        let b = batch.div_ceil(waves);
        let l = cfg.input_tokens;
        let prefill = self.step(StepLoad {
            decode_seqs: 0,
            decode_context: 0,
            prefill_tokens: b * l,
            prompt_len: l,
            sampled: b,
        })?;
        let decode = self.step(StepLoad {
            decode_seqs: b,
            decode_context: self.decode_context(),
            prefill_tokens: 0,
            prompt_len: l,
            sampled: b,
        })?;
        let o1 = cfg.output_tokens.saturating_sub(1) as f64;
        let latency_s = waves as f64 * (prefill.time_s + o1 * decode.time_s);
        Ok(StaticBatch { latency_s, waves, prefill, decode })
    }
}

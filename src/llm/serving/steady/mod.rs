//! Stage 3 of a serving prediction — **schedule**: engine steps composed into the steady state of continuous
//! batching with chunked prefill (Orca's iteration-level scheduling, Yu et al. 2022; vLLM's chunked prefill,
//! Agrawal et al. 2024 "Sarathi-Serve"), or into one static batch.
//!
//! **A step** ([`Solver::step`]) runs the decodes of every running sequence plus prefill chunks within
//! `max_num_batched_tokens`; its time is max(GPU time, eager launch time) plus the engine's host overhead per step
//! ([`super::engine::ServingConstants`]). A decode step of at most `cuda_graph_max_batch` sequences (with
//! `cuda_graph_padding` off: of exactly a captured size, [`super::sim::steps::replays_graph`]) replays a CUDA
//! graph (no launch time, and each analytic kernel costs the GPU `graph_kernel_us` beyond its body instead of
//! `kernel_us`); a step with prefill runs eagerly, or under vLLM V1 its Inductor-compiled pieces, replayed from
//! piecewise graphs up to the captured size ([`super::launch`]). With pp > 1 the batch is split into pp micro-batches
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
//!
//! Split by concept: the operator-time table shared between solvers (`op_times.rs`); one engine step timed
//! (`step_time.rs`); the steady state of closed and open loops and the static batch (`loops.rs`); here the solver.

mod loops;
mod op_times;
mod step_time;

pub use loops::{StaticBatch, Steady};
pub use op_times::OpTimes;
pub use step_time::StepResult;

use rustc_hash::FxHashMap;

use super::engine::ServingConstants;
use super::validate::ServingConfig;
use crate::cost::CostBackend;
use crate::llm::timing::Timer;

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
        // `max_num_seqs` and the token budget are per attention data-parallel rank and the steps are the whole
        // instance's (split over the ranks, [`Solver::step`]), as the simulation's instance counts them
        // ([`crate::llm::serving::benchmark::instance_settings`]).
        let dp = cfg.dp().max(1) as u64;
        let fit = (s.max_num_seqs as u64 * dp).min(kv_concurrency.max(1));
        let capacity = if s.chunked_prefill { fit.min(s.max_num_batched_tokens as u64 * dp) } else { fit };
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
}

//! Runs of decode-only steps advanced at once (event skipping). A closed loop of fixed-length requests spends
//! most of its steps in runs where every running request decodes one token, nothing arrives, nothing finishes and
//! nothing is preempted: such a step differs from the previous one only in its requests' contexts (each one token
//! longer) and in the KV blocks they grow into. [`Instance::decode_run`] advances such a run step by step in O(1)
//! per step — the step's start and end, its KV-cache occupancy, its ITL samples (one run of `n` equal gaps) — and
//! touches each request once at the end, instead of scheduling, loading and applying every request every step.
//!
//! **Exact, not approximate.** Every quantity the step-by-step path computes is computed here by the same
//! floating-point operations in the same order: step `j` of the run (0-based) loads the mean context
//! ⌊Σ(computed + 1)/n⌋ + j (each request's context grows by one per step), so its [`StepLoad`] — hence its time
//! from the [`StepTimer`] — is the one the step-by-step path builds; the KV blocks drawn at step j are counted
//! per request (a request of `c` computed tokens holding `b` blocks and `v` reserved ones draws from the pool at the
//! steps c' + 1 = (b + v)·B + 1, then every B = block tokens), so the occupancy the step-by-step path sees after
//! each step's allocations is reproduced to the block. The test `decode_runs_change_nothing` (`sim/tests.rs`)
//! compares both paths field by field (the step-by-step path runs whenever a trace is being recorded). One
//! difference: the timer is asked once per distinct load of a run, not once per step, so the distinct-step cap
//! ([`super::steps::MAX_DISTINCT_STEPS`]) is checked when a run meets a new shape.
//!
//! **When a run applies** (checked before each step by [`Instance::decode_run`]): the instance is not a
//! disaggregated prefill worker; every running request has sampled at least one token, has exactly one token to
//! compute, got its last token when the previous step ended, and has more than one token left to generate; the
//! token budget covers one token each; and no request can be admitted (the queue is empty, or `max_num_seqs`
//! requests run). For all three engines' policies ([`super::policy`]) such a state schedules the same decode-only
//! batch of every running request, in order, until a request finishes, a block allocation would fail (the
//! step-by-step path then preempts or retracts), or another event (a send, an arrival, another instance's step)
//! comes first: the run stops before each of these, and the ordinary step handles it.

use super::super::request::Engine;
use super::super::step::StepLoad;
use super::instance::{
    Instance, Req, Role, SGLANG_DECAY_STEPS, SGLANG_INIT_NEW_TOKEN_RATIO, SGLANG_MIN_NEW_TOKEN_RATIO,
    SGLANG_RECV_WEIGHT_OTHER,
};
use super::stats::Weighted;
use super::steps::{bucket, StepTimer};
use crate::llm::config::{bad, ConfigError};

/// What a run of steps adds to the simulation's time-weighted totals (summed in step order, as the step-by-step
/// path sums them).
#[derive(Debug)]
pub struct RunTotals<'a> {
    /// Σ KV occupancy × step time, Σ batch size × step time, Σ step time (all instances), Σ step time (this pool).
    pub kv_area: &'a mut f64,
    pub batch_area: &'a mut f64,
    pub busy: &'a mut f64,
    pub pool_busy: &'a mut f64,
    /// Largest KV occupancy.
    pub kv_usage_max: &'a mut f64,
    /// Gaps between consecutive tokens.
    pub itl: &'a mut Weighted,
}

/// Reusable buffers of [`Instance::decode_run`] (no allocation per run once grown).
#[derive(Debug, Default)]
pub struct RunScratch {
    /// Per request, the run's first step (1-based) that draws a KV block from the pool, ascending.
    first_draw: Vec<u64>,
    /// Requests drawing at steps ≡ residue (mod block tokens), of those whose first draw is past.
    active: Vec<u32>,
    /// Completions when the last step's tokens are streamed (always none: a run does not start while one is due).
    done: Vec<u32>,
}

impl Instance {
    /// Advances the run of decode-only steps that starts at `self.free_at` (module doc): at most `max_steps` steps,
    /// each starting at a time `may_start` accepts (no other event comes first). Returns the steps run (0: the next
    /// step is not part of such a run; nothing changed). Errors: the timer's, or a step time that is not a
    /// positive finite number (as the step-by-step path).
    pub fn decode_run(
        &mut self,
        reqs: &mut [Req],
        timer: &mut dyn StepTimer,
        may_start: &dyn Fn(f64) -> bool,
        max_steps: u64,
        totals: RunTotals,
        scratch: &mut RunScratch,
    ) -> Result<u64, ConfigError> {
        let n = self.running.len();
        let s = &self.settings;
        if n == 0
            || max_steps == 0
            || s.role == Role::Prefill
            || (s.token_budget as usize) < n
            || (!self.waiting.is_empty() && n < s.max_num_seqs as usize)
            || !self.held.is_empty()
            || !may_start(self.free_at)
        {
            return Ok(0);
        }
        // A completion still to be streamed frees a client slot, which may send a request before the run's next
        // step: the ordinary step streams it ([`Instance::show`]).
        if self.unseen.iter().any(|&r| reqs[r as usize].generated >= reqs[r as usize].output) {
            return Ok(0);
        }
        // Steps before the first request finishes (the step that finishes one is an ordinary one).
        let mut left = u64::MAX;
        let mut ctx_sum = 0u64;
        for &r in &self.running {
            let q = &reqs[r as usize];
            if q.pending() != 1 || q.generated == 0 || q.last_s != self.free_at || q.generated + 1 >= q.output {
                return Ok(0);
            }
            left = left.min((q.output - q.generated - 1) as u64);
            ctx_sum += s.decode_context(q.input, q.computed);
        }
        let block = s.block_tokens.max(1) as u64;
        let kv_blocks = s.kv_blocks;
        let free0 = self.free_blocks;
        // The load of the run's first step, as the step-by-step path builds it (CUDA-graph padding included).
        self.batch.clear();
        self.batch.extend(self.running.iter().map(|&r| (r, 1)));
        let template = self.load(reqs);
        self.batch.clear();
        let base_ctx = (ctx_sum / n as u64) as u32;
        // The context grows by one token per step, or by E with speculative decoding ([`InstanceSettings`]).
        let e = s.tokens_per_decode_step;
        let advance = |steps: u64| if e == 1.0 { steps as u32 } else { (steps as f64 * e).round() as u32 };
        scratch.first_draw.clear();
        scratch.first_draw.extend(self.running.iter().map(|&r| {
            let q = &reqs[r as usize];
            // Blocks cover (b + v)·B tokens; the step that computes token (b + v)·B + 1 draws from the pool.
            (q.blocks as u64 + q.reserved as u64) * block + 1 - q.computed as u64
        }));
        scratch.first_draw.sort_unstable();
        scratch.active.clear();
        scratch.active.resize(block as usize, 0);
        let (mut next_draw, mut drawn) = (0usize, 0u64);
        let decay = (SGLANG_INIT_NEW_TOKEN_RATIO - SGLANG_MIN_NEW_TOKEN_RATIO) / SGLANG_DECAY_STEPS;
        let (mut start, mut dt, mut launch, mut timed_ctx) = (self.free_at, 0.0, 0.0, u32::MAX);
        let mut last_start = start;
        // Engines that stream a step's tokens once the next is launched ([`Instance::launched`]): the first step
        // follows the previous one as [`Instance::follows`] says, every later one does (it runs back to back with
        // requests running); `shown` is when the client got the previous step's tokens.
        let (deferred, recv_interval) = (s.results_after_launch, s.recv_interval);
        let follows_first = self.follows(start);
        let mut shown = f64::NAN;
        let mut steps = 0u64;
        // SGLang's recv counter over the run ([`Instance::receive`]): a step whose reception would take requests
        // from the inbox is not part of the run (the ordinary step receives them and prefills).
        let (mut counter, mut last_decode) = (self.recv_counter, self.last_decode);
        while steps < left.min(max_steps) && may_start(start) {
            if recv_interval > 1 {
                let c = counter.saturating_add(if last_decode { 1 } else { SGLANG_RECV_WEIGHT_OTHER });
                let fires = c >= recv_interval;
                if fires && !self.inbox.is_empty() {
                    break;
                }
                (counter, last_decode) = (if fires { 0 } else { c }, true);
            }
            let j = steps + 1;
            while next_draw < n && scratch.first_draw[next_draw] <= j {
                scratch.active[(scratch.first_draw[next_draw] % block) as usize] += 1;
                next_draw += 1;
            }
            let draws = scratch.active[(j % block) as usize] as u64;
            if drawn + draws > free0 {
                break;
            }
            let ctx = bucket(base_ctx + advance(steps));
            if ctx != timed_ctx {
                let load = StepLoad { decode_context: ctx, ..template };
                let t = timer.time(&load)?;
                (dt, launch) = (t.wall_s, t.launch_s);
                if !(dt.is_finite() && dt > 0.0) {
                    return Err(bad("model", format!("a step of {load:?} was timed at {dt} s")));
                }
                timed_ctx = ctx;
            }
            drawn += draws;
            let usage = (kv_blocks - (free0 - drawn)) as f64 / kv_blocks.max(1) as f64;
            let end = start + dt;
            *totals.kv_area += usage * dt;
            *totals.batch_area += n as f64 * dt;
            *totals.busy += dt;
            *totals.pool_busy += dt;
            *totals.kv_usage_max = totals.kv_usage_max.max(usage);
            if !deferred {
                totals.itl.push(end - start, n as u64);
            } else if steps == 0 {
                // The step before the run: its tokens are streamed as the ordinary step does.
                shown = self.show_when_launched(reqs, start, follows_first, dt, launch, totals.itl, &mut scratch.done);
                debug_assert!(scratch.done.is_empty(), "no completion is streamed in a run");
            } else {
                // The previous step of the run (it started at `last_start` and ended at `start`).
                let at = self.launched(start, last_start, true, dt, launch).max(start);
                totals.itl.push(at - shown, n as u64);
                shown = at;
            }
            if self.settings.engine == Engine::Sglang {
                self.new_token_ratio = (self.new_token_ratio - decay).max(SGLANG_MIN_NEW_TOKEN_RATIO);
            }
            last_start = start;
            start = end;
            steps += 1;
        }
        if steps == 0 {
            return Ok(0);
        }
        if recv_interval > 1 {
            self.recv_counter = counter;
        }
        self.last_decode = true;
        let k = steps as u32;
        for i in 0..n {
            let r = self.running[i];
            let q = &mut reqs[r as usize];
            q.computed += k;
            q.tokens += k;
            q.generated += k;
            q.last_s = start;
            if deferred {
                q.shown_s = shown;
            } else {
                q.shown_s = start;
            }
            let computed = q.computed;
            let grown = self.grow(reqs, r, computed);
            debug_assert!(grown, "the run's allocations were counted to fit");
        }
        debug_assert_eq!(self.free_blocks, free0 - drawn, "the run's block count matches the requests' growth");
        if deferred {
            // The run's last step's tokens: streamed when the next step is launched, or when it ends if none is.
            self.unseen.clear();
            self.unseen.extend_from_slice(&self.running);
        }
        self.free_at = start;
        (self.last_start, self.last_end) = (last_start, start);
        Ok(steps)
    }
}

//! The steady state composed from timed steps: a closed loop of n running requests (fixed point on Little's law),
//! a closed loop of clients with a queue, an open loop at a request rate, and a static batch.

use super::{Solver, StepResult};
use crate::llm::config::ConfigError;
use crate::llm::serving::step::StepLoad;

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

impl Solver<'_> {
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
        // Decode steps per request: O − 1, or (O − 1)/E with speculative decoding's E tokens per step.
        let e = cfg.speculative.map_or(1.0, |s| s.tokens_per_step());
        let o1s = o1f / e;
        // The most decodes the budget's prefill can feed: D·L/(O − 1) prompt tokens per step ≤ budget − D.
        let d_max = if chunked { budget as f64 * o1s / (lf + o1s) } else { f64::INFINITY };
        let mut d = (n * o1s / (o1s + (lf / budget as f64).ceil())).min(d_max);
        let mut state = None;
        for _ in 0..16 {
            d = d.min(d_max).max(1e-6);
            let dr = (d.round() as u32).max(1);
            let room = if chunked { budget.saturating_sub(dr).max(1) } else { budget.max(l) };
            let c = if chunked { l.min(room) } else { l };
            let k = l.div_ceil(c.max(1));
            let completions = d / o1s;
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
                graph_pad_tokens: 0,
                draft_tokens: 0,
            })?;
            let decode = self.step(StepLoad {
                decode_seqs: dr,
                decode_context: ctx,
                prefill_tokens: 0,
                prompt_len: l,
                sampled: dr,
                graph_pad_tokens: 0,
                draft_tokens: 0,
            })?;
            let tau = q * mixed.time_s + (1.0 - q) * decode.time_s;
            // Per output token: a step yields E of them per decoding sequence.
            let tpot = (if chunked { tau } else { tau / (1.0 - q) }) / e;
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
            graph_pad_tokens: 0,
            draft_tokens: 0,
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
            graph_pad_tokens: 0,
            draft_tokens: 0,
        })?;
        let decode = self.step(StepLoad {
            decode_seqs: b,
            decode_context: self.decode_context(),
            prefill_tokens: 0,
            prompt_len: l,
            sampled: b,
            graph_pad_tokens: 0,
            draft_tokens: 0,
        })?;
        // Decode steps: O − 1, or (O − 1)/E with speculative decoding.
        let o1 = cfg.output_tokens.saturating_sub(1) as f64 / cfg.speculative.map_or(1.0, |s| s.tokens_per_step());
        let latency_s = waves as f64 * (prefill.time_s + o1 * decode.time_s);
        Ok(StaticBatch { latency_s, waves, prefill, decode })
    }
}

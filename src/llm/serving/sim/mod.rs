//! A discrete-event simulation of a serving benchmark: the clients of [`super::workload`] send their requests to
//! one or more engine instances (one pool, or disaggregated prefill and decode pools), each instance steps through
//! its engine's scheduling policy ([`policy`]: admission, continuous batching with chunked prefill under the token
//! budget, `max_num_seqs`, KV blocks with preemption) and each step lasts what the step model says for its shape
//! ([`steps`]: the steady-state solver's operators, CUDA-graph padding, host overhead and async scheduling). The
//! answer is what the benchmark client measures ([`stats`]): TTFT, TPOT, ITL and end-to-end latency of every
//! request, the throughput over the run, KV-cache occupancy and preemptions.
//!
//! Peers: Vidur (Agrawal et al., MLSys 2024) and LLMServingSim simulate the scheduler step by step the same way;
//! BLIS (llm-d) is a discrete-event simulator of vLLM. Time only advances by steps: a step's tokens are visible to
//! the client when it ends — or, on an engine whose host thread launches the next step before it processes this
//! one's results ([`InstanceSettings::results_after_launch`]: SGLang's and TensorRT-LLM's overlap loops, vLLM V1
//! with one GPU per engine), when the next step has been launched, if one follows ([`Instance::launched`],
//! [`Instance::show`]); the TTFT, ITL, end-to-end latency and the closed loop's next send follow. Streaming latency,
//! detokenization and the network are not modelled.
//!
//! **Events.** A request is sent when it arrives and a client slot is free (closed loop: `concurrency` slots, each
//! freed when its request's last token arrives). It goes to the next instance of its pool in turn (round robin,
//! blind to the instances' load: NVIDIA Dynamo's frontend routes with `--router-mode round-robin` by default (its
//! Frontend Configuration Reference, `DYN_ROUTER_MODE`), and for a disaggregated request it routes to a decode
//! worker and picks the prefill worker round robin (Dynamo `backends/sglang/sglang-disaggregation.md`, "Dynamo's
//! approach"); SGLang's standalone PD load balancer picks a random (prefill, decode) pair). A worker that already
//! runs its `max_num_seqs` keeps the request waiting even when another has room: with uneven lengths, a closed
//! loop's requests queue behind whole requests on the busier workers. An instance with work steps back to back: a
//! step starts when the previous ends (or when work arrives at an idle instance), its policy picks the batch, and
//! its end time applies it. A disaggregated request leaves its prefill instance when its first token is sampled and
//! arrives at a decode instance after its KV cache's transfer.
//!
//! **Bounded cost.** Every loop is bounded: at most `max_steps` steps (an error beyond), and every step moves a
//! request forward or drops one that can never run (a prompt larger than the KV cache: counted as failed).

pub mod decode_run;
pub mod instance;
pub mod policy;
pub mod stats;
pub mod steps;
#[cfg(test)]
pub(super) mod tests;
#[cfg(test)]
mod tests_decode_arrival;
pub mod trace;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use decode_run::{RunScratch, RunTotals};
use instance::{Instance, InstanceSettings, Req, Role};
use stats::Weighted;
use steps::StepTimer;

use super::workload::SimRequest;
use crate::llm::config::{bad, ConfigError};

/// The server's caps on one simulation (configuration `serving_max_requests`, `serving_max_concurrency`,
/// `serving_max_simulated_tokens`, `serving_max_simulated_steps`), so that no request pins a core: a request beyond
/// them is refused with a 422 naming the workload field to change ([`super::validate::check_limits`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimLimits {
    /// Most requests one simulation sends.
    pub max_requests: u32,
    /// Most closed-loop clients.
    pub max_concurrency: u32,
    /// Most generated tokens over all requests (each costs the simulator a few nanoseconds).
    pub max_tokens: u64,
    /// Most engine steps.
    pub max_steps: u64,
}

impl SimLimits {
    /// The defaults: 20,000 requests, 10,000 clients, 20 million generated tokens, 2 million steps — about a
    /// quarter of a second of one core at the largest.
    pub const DEFAULT: SimLimits =
        SimLimits { max_requests: 20_000, max_concurrency: 10_000, max_tokens: 20_000_000, max_steps: 2_000_000 };
}

/// One pool of identical instances and the timer of their steps.
pub struct Pool<'a> {
    pub settings: InstanceSettings,
    /// Instances in the pool.
    pub workers: u32,
    pub timer: &'a mut dyn StepTimer,
}

/// One simulated step, for the timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepRecord {
    /// Pool (0 = aggregated or prefill, 1 = decode) and instance in it.
    pub pool: u8,
    pub instance: u32,
    /// Start and duration, s.
    pub start_s: f64,
    pub dur_s: f64,
    /// Requests given one token (decodes) and prompt tokens prefilled.
    pub decodes: u32,
    pub prefill_tokens: u32,
    /// Requests waiting and running after the step was scheduled.
    pub waiting: u32,
    pub running: u32,
    /// KV-cache blocks in use over the instance's total.
    pub kv_usage: f64,
}

/// Simulation limits and options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimOptions {
    /// Most steps (all instances together); beyond it the simulation stops with an error naming
    /// `workload.num_requests`.
    pub max_steps: u64,
    /// Keep at most this many [`StepRecord`]s (0: none).
    pub trace_steps: usize,
    /// The front end's time per request beyond tokenization, s: a request reaches its first instance this long
    /// after its tokenization ends ([`crate::llm::serving::engine::HostCost::request_us`]).
    pub frontend_s: f64,
    /// The front end's tokenization time per prompt token on one thread, s
    /// ([`crate::llm::serving::engine::ServingConstants::tokenize_us_per_token`]).
    pub tokenize_s_per_token: f64,
    /// Threads the front end tokenizes on ([`crate::llm::serving::frontend`]; 0 counts as 1): an engine's own API
    /// server has one (vLLM's API server, SGLang's `TokenizerManager`, `trtllm-serve`), so a request's tokenization
    /// starts when it is sent or when the previous request's ends, whichever is later; NVIDIA Dynamo's front end
    /// has its tokio workers, and each request, in the order sent, takes the thread that is free first (the lowest
    /// on ties) from when it is sent.
    pub tokenizer_threads: u32,
}

/// What the benchmark client measures, and what the engine saw.
#[derive(Debug, Clone, Default)]
pub struct SimOutcome {
    /// Per completed request: time to first token, s.
    pub ttft_s: Vec<f64>,
    /// Per completed request with more than one output token: (end-to-end − TTFT)/(output − 1), s.
    pub tpot_s: Vec<f64>,
    /// Per completed request: from sending to its last token, s.
    pub e2e_s: Vec<f64>,
    /// Per completed request: TPOT as goodput counts it (0 for a single output token), s.
    pub tpot_or_zero_s: Vec<f64>,
    /// Per completed request: its output tokens.
    pub outputs: Vec<u32>,
    /// Gaps between consecutive tokens of a request, s (runs of equal values).
    pub itl_s: Weighted,
    /// Requests completed, and dropped because they could never run.
    pub completed: u32,
    pub failed: u32,
    /// From the start to the last token, s.
    pub duration_s: f64,
    /// Prompt and generated tokens of the completed requests.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Steps simulated (all instances).
    pub steps: u64,
    pub preemptions: u64,
    /// KV-cache blocks in use over the total, time-weighted over busy steps, and the largest.
    pub kv_usage_mean: f64,
    pub kv_usage_max: f64,
    /// Requests per step (decodes and prefill chunks), time-weighted over busy steps.
    pub batch_mean: f64,
    /// Per pool: busy time over the run's duration × instances.
    pub busy_fraction: Vec<f64>,
    /// The first `trace_steps` steps.
    pub trace: Vec<StepRecord>,
    /// More steps ran than the trace kept.
    pub trace_truncated: bool,
}

/// A simulated time, s, ordered by `f64::total_cmp` (the event heaps need a total order; times are finite).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Time(f64);
impl Eq for Time {}
impl PartialOrd for Time {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Time {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// The next instance of a pool (instances `range`) in round-robin order, `turn` being the pool's count of requests
/// routed so far (advanced here): the instance `range.start + turn mod |range|` (module doc).
fn route(turn: &mut usize, range: std::ops::Range<usize>) -> usize {
    let i = range.start + *turn % range.len().max(1);
    *turn += 1;
    i
}

/// Simulates `requests` sent by at most `concurrency` clients at once (`None`: unlimited) to `pools` (one pool:
/// aggregated serving; two: prefill then decode, `transfer_s(prompt tokens)` being the KV cache's transfer time).
///
/// Errors: more than `options.max_steps` steps (`workload.num_requests`); a step time that is not a positive
/// finite number, or the step model's own errors.
pub fn simulate(
    pools: &mut [Pool],
    requests: &[SimRequest],
    concurrency: Option<u32>,
    transfer_s: &dyn Fn(u32) -> f64,
    options: SimOptions,
) -> Result<SimOutcome, ConfigError> {
    let n = requests.len();
    // Speculative decoding (the decoding pool's E tokens per decode step): a request of O output tokens samples
    // its first in the prefill and the other O − 1 in ⌈(O − 1)/E⌉ decode steps, so the simulation runs it as
    // that many samples and reports its O tokens when it completes ([`complete`]).
    let e = pools.last().map_or(1.0, |p| p.settings.tokens_per_decode_step);
    let samples = |output: u32| if e == 1.0 { output } else { 1 + ((output - 1) as f64 / e).ceil() as u32 };
    let mut reqs: Vec<Req> =
        requests.iter().map(|r| Req::new(r.input, samples(r.output.max(1)), r.arrival_s)).collect();
    let reported = |r: usize| if e == 1.0 { None } else { Some(requests[r].output.max(1)) };
    let mut instances: Vec<Instance> = Vec::new();
    let mut pool_of: Vec<(usize, u32)> = Vec::new();
    let mut ranges = Vec::new();
    for (p, pool) in pools.iter().enumerate() {
        let start = instances.len();
        for w in 0..pool.workers.max(1) {
            instances.push(Instance::new(pool.settings.clone()));
            pool_of.push((p, w));
        }
        ranges.push(start..instances.len());
    }
    let decode_pool = if pools.len() > 1 { Some(1) } else { None };
    // Each pool's round-robin turn ([`route`]).
    let mut turns = vec![0usize; pools.len()];
    // Client slots: the times they free up (a min-heap of `concurrency` entries).
    let mut slots: BinaryHeap<Reverse<Time>> = BinaryHeap::new();
    if let Some(c) = concurrency {
        for _ in 0..c.min(n as u32).max(1) {
            slots.push(Reverse(Time(0.0)));
        }
    }
    // Requests on their way to a pool: (arrival, request, pool) — past the front end, or a KV transfer.
    let mut transfers: BinaryHeap<Reverse<(Time, u32, usize)>> = BinaryHeap::new();
    let mut out = SimOutcome { busy_fraction: vec![0.0; pools.len()], ..SimOutcome::default() };
    let (mut next, mut finished) = (0usize, 0usize);
    let (mut kv_area, mut batch_area, mut busy) = (0.0f64, 0.0f64, 0.0f64);
    // Requests whose last token the client got (completions), and requests that left an instance in a step.
    let (mut done, mut left): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
    let mut scratch = RunScratch::default();
    // When each of the front end's tokenizer threads is free (SimOptions::tokenizer_threads).
    let mut tokenizer_free = vec![0.0f64; options.tokenizer_threads.max(1) as usize];
    while finished < n {
        // The next event: a send, a transfer's arrival, or an instance's step (sends and arrivals first on ties).
        let send_at = (next < n).then(|| {
            let free = slots.peek().map_or(0.0, |s| s.0 .0);
            if concurrency.is_some() && slots.is_empty() {
                f64::INFINITY
            } else {
                reqs[next].sent_s.max(free)
            }
        });
        let arrive_at = transfers.peek().map(|t| t.0 .0 .0);
        let step = (0..instances.len())
            .filter(|&i| instances[i].outstanding() > 0)
            .min_by(|&a, &b| instances[a].free_at.total_cmp(&instances[b].free_at).then(a.cmp(&b)));
        let step_at = step.map_or(f64::INFINITY, |i| instances[i].free_at);
        let send_t = send_at.unwrap_or(f64::INFINITY);
        let arrive_t = arrive_at.unwrap_or(f64::INFINITY);
        if send_t.is_finite() && send_t <= step_at && send_t <= arrive_t {
            if concurrency.is_some() {
                slots.pop();
            }
            let r = next;
            next += 1;
            reqs[r].sent_s = send_t;
            if options.frontend_s > 0.0 || options.tokenize_s_per_token > 0.0 {
                // Sends come in time order, so the tokenizer threads serve them first come, first served: each on
                // the thread free first.
                let k = (0..tokenizer_free.len())
                    .min_by(|&a, &b| tokenizer_free[a].total_cmp(&tokenizer_free[b]).then(a.cmp(&b)))
                    .expect("at least one tokenizer thread");
                tokenizer_free[k] = tokenizer_free[k].max(send_t) + reqs[r].input as f64 * options.tokenize_s_per_token;
                transfers.push(Reverse((Time(tokenizer_free[k] + options.frontend_s), r as u32, 0)));
                continue;
            }
            let i = route(&mut turns[0], ranges[0].clone());
            let inst = &mut instances[i];
            inst.free_at = inst.free_at.max(send_t);
            inst.deliver(r as u32, send_t);
            continue;
        }
        if arrive_t.is_finite() && arrive_t <= step_at {
            let Reverse((Time(t), r, pool)) = transfers.pop().expect("peeked");
            if pool > 0 {
                // The decode worker has the prompt's cache; what it still computes depends on the engine.
                instance::decode_arrival(pools[pool].settings.engine, &mut reqs[r as usize]);
            }
            let i = route(&mut turns[pool], ranges[pool].clone());
            let inst = &mut instances[i];
            inst.free_at = inst.free_at.max(t);
            inst.deliver(r, t);
            continue;
        }
        let Some(i) = step else {
            return Err(bad("workload", "the simulation has requests left but no instance can run them"));
        };
        let (pool, worker) = pool_of[i];
        // A run of decode-only steps before the next other event: advanced at once, exactly ([`decode_run`]).
        // Not while a trace is being recorded (its steps are recorded one by one).
        if out.trace.len() >= options.trace_steps {
            let other = (0..instances.len())
                .filter(|&o| o != i && instances[o].outstanding() > 0)
                .map(|o| (instances[o].free_at, o))
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            // A step at `t` comes before a send or an arrival at `t' ≤ t` never, and before another instance's
            // step at the same time only from the lower index (the order of the loop above).
            let may_start =
                |t: f64| t < send_t && t < arrive_t && other.is_none_or(|(f, o)| t < f || (t == f && i < o));
            let totals = RunTotals {
                kv_area: &mut kv_area,
                batch_area: &mut batch_area,
                busy: &mut busy,
                pool_busy: &mut out.busy_fraction[pool],
                kv_usage_max: &mut out.kv_usage_max,
                itl: &mut out.itl_s,
            };
            let left = options.max_steps.saturating_sub(out.steps);
            let ran =
                instances[i].decode_run(&mut reqs, &mut *pools[pool].timer, &may_start, left, totals, &mut scratch)?;
            if ran > 0 {
                out.steps += ran;
                if options.trace_steps > 0 {
                    out.trace_truncated = true;
                }
                continue;
            }
        }
        let start = instances[i].free_at;
        let follows = instances[i].follows(start);
        let preempted_before = instances[i].preemptions;
        instances[i].release_held(start);
        instances[i].schedule(&mut reqs);
        // SGLang disaggregated decode: requests whose only token came from the prefill server finished when they
        // were prebuilt (their token streamed at the iteration's start).
        for r in std::mem::take(&mut instances[i].prebuilt_done) {
            finished += 1;
            complete(&reqs[r as usize], reported(r as usize), &mut out, &mut slots, concurrency.is_some());
        }
        if instances[i].batch.is_empty() {
            if instances[i].outstanding() == 0 {
                continue;
            }
            // Nothing can run: a request larger than the KV cache (or one the policy can never admit). Drop it.
            let inst = &mut instances[i];
            // The engine launches nothing: it streams the last step's tokens when that step ends.
            done.clear();
            let at = inst.last_end;
            inst.show(&mut reqs, at, &mut out.itl_s, &mut done);
            for &r in &done {
                finished += 1;
                complete(&reqs[r as usize], reported(r as usize), &mut out, &mut slots, concurrency.is_some());
            }
            if inst.preemptions > preempted_before && inst.running.is_empty() {
                continue;
            }
            let victim = inst.running.pop().or_else(|| inst.waiting.pop_front()).expect("outstanding work");
            let q = &mut reqs[victim as usize];
            inst.free_blocks += q.blocks as u64 + q.reserved as u64;
            (q.blocks, q.reserved) = (0, 0);
            out.failed += 1;
            finished += 1;
            if concurrency.is_some() {
                slots.push(Reverse(Time(start)));
            }
            continue;
        }
        let load = instances[i].load(&reqs);
        let timed = pools[pool].timer.time(&load)?;
        let dt = timed.wall_s;
        if !(dt.is_finite() && dt > 0.0) {
            return Err(bad("model", format!("a step of {load:?} was timed at {dt} s")));
        }
        let end = start + dt;
        out.steps += 1;
        if out.steps > options.max_steps {
            return Err(bad(
                "workload.num_requests",
                format!(
                    "the simulation needs more than {} engine steps (the server's serving_max_simulated_steps): send \
                     fewer or shorter requests",
                    options.max_steps
                ),
            ));
        }
        let inst = &mut instances[i];
        let usage = inst.used_blocks() as f64 / inst.settings.kv_blocks.max(1) as f64;
        kv_area += usage * dt;
        batch_area += inst.batch.len() as f64 * dt;
        busy += dt;
        out.busy_fraction[pool] += dt;
        out.kv_usage_max = out.kv_usage_max.max(usage);
        if out.trace.len() < options.trace_steps {
            let decodes = inst.batch.iter().filter(|b| b.1 == 1).count() as u32;
            out.trace.push(StepRecord {
                pool: pool as u8,
                instance: worker,
                start_s: start,
                dur_s: dt,
                decodes,
                prefill_tokens: inst.batch.iter().filter(|b| b.1 > 1).map(|b| b.1).sum(),
                waiting: inst.waiting.len() as u32,
                running: inst.running.len() as u32,
                kv_usage: usage,
            });
        } else if options.trace_steps > 0 {
            out.trace_truncated = true;
        }
        done.clear();
        if inst.settings.results_after_launch {
            // The previous step's tokens reach the client once this step is launched ([`Instance::launched`]).
            inst.show_when_launched(&mut reqs, start, follows, dt, timed.launch_s, &mut out.itl_s, &mut done);
        }
        left.clear();
        inst.apply(&mut reqs, end, &mut left);
        inst.free_at = end;
        (inst.last_start, inst.last_end) = (start, end);
        if inst.settings.role == Role::Prefill {
            let pool = decode_pool.expect("a prefill role only in disaggregated runs");
            for &r in &left {
                transfers.push(Reverse((Time(end + transfer_s(reqs[r as usize].input)), r, pool)));
            }
        }
        // The client gets this step's tokens when it ends, unless the engine launches another step first: an
        // overlap engine with more to run streams them when that step is launched (above, at the next step).
        if !inst.settings.results_after_launch || inst.quiet() {
            inst.show(&mut reqs, end, &mut out.itl_s, &mut done);
        }
        for &r in &done {
            finished += 1;
            complete(&reqs[r as usize], reported(r as usize), &mut out, &mut slots, concurrency.is_some());
        }
    }
    out.preemptions = instances.iter().map(|i| i.preemptions).sum();
    if busy > 0.0 {
        out.kv_usage_mean = kv_area / busy;
        out.batch_mean = batch_area / busy;
    }
    for (p, pool) in pools.iter().enumerate() {
        out.busy_fraction[p] /= (out.duration_s * pool.workers.max(1) as f64).max(1e-12);
    }
    Ok(out)
}

/// Records the completion of request `q` (its last token at the client at `q.done_s`) in `out`, and frees its
/// client's slot at that time when the clients are a closed loop. `reported`: the output tokens it generated when
/// they differ from its simulated samples (speculative decoding, [`simulate`]).
fn complete(
    q: &Req,
    reported: Option<u32>,
    out: &mut SimOutcome,
    slots: &mut BinaryHeap<Reverse<Time>>,
    closed_loop: bool,
) {
    let generated = reported.unwrap_or(q.generated);
    out.completed += 1;
    out.input_tokens += q.input as u64;
    out.output_tokens += generated as u64;
    let (ttft, e2e) = (q.first_s - q.sent_s, q.done_s - q.sent_s);
    out.ttft_s.push(ttft);
    out.e2e_s.push(e2e);
    let tpot = if generated > 1 { (e2e - ttft) / (generated - 1) as f64 } else { 0.0 };
    if generated > 1 {
        out.tpot_s.push(tpot);
    }
    out.tpot_or_zero_s.push(tpot);
    out.outputs.push(generated);
    out.duration_s = out.duration_s.max(q.done_s);
    if closed_loop {
        slots.push(Reverse(Time(q.done_s)));
    }
}

impl Instance {
    /// Applies the step in `self.batch`, ending at `end`: tokens computed, tokens sampled (their requests pushed
    /// to `unseen`, for the client: [`Instance::show`]), and the requests that leave (all output tokens sampled, or
    /// handed to a decode worker) pushed to `left` with their blocks freed.
    pub fn apply(&mut self, reqs: &mut [Req], end: f64, left: &mut Vec<u32>) {
        let prefill_role = self.settings.role == Role::Prefill;
        for k in 0..self.batch.len() {
            let (r, n) = self.batch[k];
            let q = &mut reqs[r as usize];
            q.computed += n;
            if q.computed < q.tokens {
                continue;
            }
            if prefill_role {
                self.free_blocks += q.blocks as u64 + q.reserved as u64;
                (q.blocks, q.reserved) = (0, 0);
                left.push(r);
                continue;
            }
            q.generated += 1;
            q.tokens += 1;
            q.last_s = end;
            self.unseen.push(r);
            if q.generated >= q.output {
                self.free_blocks += q.blocks as u64 + q.reserved as u64;
                (q.blocks, q.reserved) = (0, 0);
                left.push(r);
            }
        }
        if !left.is_empty() {
            let leaving = |r: &u32| left.contains(r);
            if left.len() <= 4 {
                self.running.retain(|r| !leaving(r));
            } else {
                let set: std::collections::HashSet<u32> = left.iter().copied().collect();
                self.running.retain(|r| !set.contains(r));
            }
        }
    }
}

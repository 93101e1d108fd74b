//! Hand-worked simulations with constant step times (every number in the comments).

use super::instance::{InstanceSettings, Role};
use super::steps::{ConstantSteps, StepTime, StepTimer};
use super::*;
use crate::llm::serving::request::Engine;

/// One instance's settings for a hand-worked simulation: `engine` at `budget` tokens per step, `kv_blocks` blocks of
/// `block_tokens` tokens, 256 sequences, no graphs, no overlap, one token per decode step.
pub(in crate::llm::serving) fn settings(
    engine: Engine,
    budget: u32,
    block_tokens: u32,
    kv_blocks: u64,
) -> InstanceSettings {
    InstanceSettings {
        engine,
        role: Role::Both,
        max_num_seqs: 256,
        token_budget: budget,
        chunked_prefill: true,
        max_prefill_tokens: 16384,
        block_tokens,
        kv_blocks,
        graph_sizes: Vec::new(),
        graph_padding: true,
        dp: 1,
        recv_interval: 1,
        overlap: false,
        results_after_launch: false,
        tokens_per_decode_step: 1.0,
    }
}

pub(super) fn same(n: usize, input: u32, output: u32) -> Vec<SimRequest> {
    vec![SimRequest { input, output, arrival_s: 0.0 }; n]
}

pub(super) const OPTS: SimOptions = SimOptions {
    max_steps: 100_000,
    trace_steps: 1000,
    frontend_s: 0.0,
    tokenize_s_per_token: 0.0,
    tokenizer_threads: 1,
};
pub(super) const STEPS: ConstantSteps =
    ConstantSteps { decode_s: 0.010, prefill_s: 0.050, decode_launch_s: 0.0, prefill_launch_s: 0.0 };

fn run(s: InstanceSettings, reqs: &[SimRequest], concurrency: Option<u32>) -> SimOutcome {
    run_with(s, 1, reqs, concurrency, OPTS)
}

/// `reqs` on one pool of `workers` instances of `s` timed by [`STEPS`], with `concurrency` clients and `opts`.
fn run_with(
    s: InstanceSettings,
    workers: u32,
    reqs: &[SimRequest],
    concurrency: Option<u32>,
    opts: SimOptions,
) -> SimOutcome {
    let mut timer = STEPS;
    let mut pools = [Pool { settings: s, workers, timer: &mut timer }];
    simulate(&mut pools, reqs, concurrency, &|_| 0.0, opts).unwrap()
}

pub(super) fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-9, "{a:?} vs {b:?}");
    }
}

#[test]
fn four_closed_loop_clients_queue_behind_each_others_prefill() {
    // 4 clients, 8 requests of 100 prompt tokens and 3 output tokens; vLLM with a 202-token budget: a step holds
    // two prompts and two decodes. Prefill steps 50 ms, decode steps 10 ms.
    // Step 1 [0, 50]: prompts 1, 2 and the first 2 tokens of prompt 3 (chunked) → 1, 2's first tokens at 50 ms.
    // Step 2 [50, 100]: decodes of 1, 2 (token 2), the other 98 tokens of 3 and prompt 4 → 3, 4's first tokens at
    // 100 ms (TTFT 100).
    // Step 3 [100, 110]: four decodes: 1, 2 finish (token 3) at 110 ms; clients 1, 2 send requests 5, 6.
    // Step 4 [110, 160]: decodes of 3, 4 (they finish at 160 ms) and prompts 5, 6 (TTFT 50); clients send 7, 8.
    // Step 5 [160, 210]: decodes of 5, 6 and prompts 7, 8 (TTFT 50). Step 6 [210, 220]: 5, 6 finish at 220.
    // Step 7 [220, 230]: 7, 8 finish at 230 ms.
    let o = run(settings(Engine::Vllm, 202, 16, 1000), &same(8, 100, 3), Some(4));
    close(&o.ttft_s, &[0.05, 0.05, 0.10, 0.10, 0.05, 0.05, 0.05, 0.05]);
    // End to end: 110, 110, 160, 160, 220 − 110, 220 − 110, 230 − 160, 230 − 160 ms.
    close(&o.e2e_s, &[0.11, 0.11, 0.16, 0.16, 0.11, 0.11, 0.07, 0.07]);
    // TPOT = (e2e − TTFT)/2: 30 ms but for 7, 8 (10 ms).
    close(&o.tpot_s, &[0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.01, 0.01]);
    assert_eq!((o.completed, o.steps, o.preemptions, o.output_tokens), (8, 7, 0, 24));
    assert!((o.duration_s - 0.23).abs() < 1e-9);
    // ITL: tokens 2 and 3 of each request. 1, 2: 50, 10; 3, 4: 10, 50; 5, 6: 50, 10; 7, 8: 10, 10.
    let itl = o.itl_s.stats(1e3);
    assert_eq!(itl.count, 16);
    assert!((itl.mean_ms - (6.0 * 50.0 + 10.0 * 10.0) / 16.0).abs() < 1e-9, "{itl:?}");
    // The trace: 7 steps, the first a prefill of 202 tokens with 3 running and 1 waiting.
    assert_eq!(o.trace.len(), 7);
    assert_eq!((o.trace[0].prefill_tokens, o.trace[0].running, o.trace[0].waiting), (202, 3, 1));
}

#[test]
fn a_full_kv_cache_preempts_the_last_request_and_recomputes_it() {
    // vLLM, 16-token blocks, 5 blocks (80 tokens). Two requests of 16 prompt tokens and 40 output tokens.
    // Step 1 (prefill, 50 ms): both cache 16 tokens (1 block each). Decode step j ≥ 2 caches token 16 + j − 1, so
    // at step 18 each needs a 3rd block (33 tokens): A takes the last free one, B finds none and, being the last
    // running request, preempts itself (recompute). A decodes alone to its 40th token at step 40:
    // 50 + 39·10 = 440 ms. B (17 tokens out, its 17th at 50 + 16·10 = 210 ms) needs 3 blocks again and only
    // 5 − 3 or 5 − 4 are free while A runs, so it waits: step 41 recomputes its 33 tokens (50 ms) and samples token
    // 18 at 490 ms (an ITL of 280 ms), then 22 decodes end it at 490 + 220 = 710 ms.
    let o = run(settings(Engine::Vllm, 8192, 16, 5), &same(2, 16, 40), Some(2));
    assert_eq!(o.preemptions, 1);
    close(&o.e2e_s, &[0.44, 0.71]);
    close(&o.ttft_s, &[0.05, 0.05]);
    let itl = o.itl_s.stats(1e3);
    assert!((itl.max_ms - 280.0).abs() < 1e-9, "{itl:?}");
    // The fullest step: 4 of 5 blocks (A and B at 2 blocks each before step 18, A at 4 from step 34).
    assert!((o.kv_usage_max - 0.8).abs() < 1e-12, "{}", o.kv_usage_max);
    // TensorRT-LLM reserves a whole request (56 tokens = 2 blocks of 32) on admission: with 3 blocks of 32 the
    // second request waits for the first instead of being preempted. A: prefill 50 + 39 decodes = 440 ms; B then
    // prefills (TTFT 440 + 50 = 490 ms) and ends at 490 + 390 = 880 ms.
    let t = run(settings(Engine::Trtllm, 8192, 32, 3), &same(2, 16, 40), Some(2));
    assert_eq!(t.preemptions, 0);
    close(&t.e2e_s, &[0.44, 0.88]);
    close(&t.ttft_s, &[0.05, 0.49]);
}

#[test]
fn sglang_prefills_first_and_stalls_the_decodes() {
    // SGLang, 200-token chunk: 2 prompts of 100 per prefill batch, decodes wait while prompts are waiting.
    // 4 requests at once, output 2: batch 1 [0, 50] prompts 1, 2 (TTFT 50); batch 2 [50, 100] prompts 3, 4 (TTFT
    // 100) — no decode in it; batch 3 [100, 110] decodes all four: their second tokens at 110 ms.
    let o = run(settings(Engine::Sglang, 200, 1, 100_000), &same(4, 100, 2), None);
    close(&o.ttft_s, &[0.05, 0.05, 0.10, 0.10]);
    close(&o.e2e_s, &[0.11, 0.11, 0.11, 0.11]);
    // vLLM (202-token budget) mixes them: step 1 prefills 1, 2 and 2 tokens of 3; step 2 carries the decodes of 1,
    // 2 with the rest of 3 and all of 4, so 1, 2 end at 100 ms, 3, 4 after one more decode at 110 ms.
    let v = run(settings(Engine::Vllm, 202, 16, 100_000), &same(4, 100, 2), None);
    close(&v.e2e_s, &[0.10, 0.10, 0.11, 0.11]);
}

#[test]
fn a_prefill_batch_that_arrives_mid_decode_stalls_the_decode_and_its_tpot() {
    // Two requests of 100 prompt tokens and 4 output tokens: A sent at 0, B at 55 ms (while A's first decode runs).
    // SGLang (`get_next_batch_to_run`: a waiting request makes the next step a prefill batch, without the decodes):
    // [0, 50] prefill A (TTFT 50); [50, 60] decode A (token 2; B not there yet); [60, 110] prefill B alone — A
    // stalls — (B's TTFT 110 − 55 = 55); [110, 120] A token 3, B token 2; [120, 130] A token 4 (A ends at 130),
    // B token 3; [130, 140] B token 4 (e2e 140 − 55 = 85).
    // A's TPOT = (130 − 50)/3 = 26.67 ms: its three 10 ms decodes plus the 50 ms prefill batch it waited behind.
    // B's TPOT = (140 − 110)/3 = 10 ms.
    let reqs =
        [SimRequest { input: 100, output: 4, arrival_s: 0.0 }, SimRequest { input: 100, output: 4, arrival_s: 0.055 }];
    let o = run(settings(Engine::Sglang, 200, 1, 100_000), &reqs, None);
    close(&o.ttft_s, &[0.05, 0.055]);
    close(&o.e2e_s, &[0.13, 0.085]);
    close(&o.tpot_s, &[(0.03 + 0.05) / 3.0, 0.01]);
    // vLLM (202-token budget) runs A's decode inside B's prefill step: [60, 110] gives A token 3, [110, 120] token 4,
    // so A's TPOT is (120 − 50)/3 = 23.33 ms (the stall is the prefill step's length, 50, in place of a 10 ms decode).
    let v = run(settings(Engine::Vllm, 202, 16, 100_000), &reqs, None);
    close(&v.e2e_s, &[0.12, 0.085]);
    close(&v.tpot_s, &[0.07 / 3.0, 0.01]);
}

#[test]
fn a_prompt_larger_than_the_cache_fails_instead_of_hanging_and_steps_are_capped() {
    // 2 blocks of 16 tokens cannot hold a 100-token prompt: the request is dropped, the next runs.
    let reqs =
        [SimRequest { input: 100, output: 2, arrival_s: 0.0 }, SimRequest { input: 10, output: 2, arrival_s: 0.0 }];
    let o = run(settings(Engine::Vllm, 8192, 16, 2), &reqs, Some(1));
    assert_eq!((o.failed, o.completed), (1, 1));
    let mut timer = STEPS;
    let mut pools = [Pool { settings: settings(Engine::Vllm, 8192, 16, 1000), workers: 1, timer: &mut timer }];
    let e = simulate(
        &mut pools,
        &same(10, 10, 100),
        Some(1),
        &|_| 0.0,
        SimOptions { max_steps: 50, trace_steps: 0, ..OPTS },
    )
    .unwrap_err();
    assert_eq!(e.field, "workload.num_requests");
}

#[test]
fn disaggregated_requests_wait_for_their_kv_transfer() {
    // One prefill and one decode worker, a 30 ms transfer: prefill ends at 50 ms, the decode worker gets the
    // request at 80 ms and samples the first token in its first step (10 ms): TTFT 90 ms; 2 more decodes: 110 ms.
    let mut pt = STEPS;
    let mut dt = STEPS;
    let mut p = settings(Engine::Vllm, 8192, 16, 1000);
    p.role = Role::Prefill;
    let mut d = p.clone();
    d.role = Role::Decode;
    let mut pools =
        [Pool { settings: p, workers: 1, timer: &mut pt }, Pool { settings: d, workers: 1, timer: &mut dt }];
    let o = simulate(&mut pools, &same(1, 64, 3), Some(1), &|input| 0.030 * input as f64 / 64.0, OPTS).unwrap();
    close(&o.ttft_s, &[0.09]);
    close(&o.e2e_s, &[0.11]);
}

#[test]
fn decode_workers_are_picked_round_robin_blind_to_their_load() {
    // One prefill worker, two decode workers of max_num_seqs 1, no transfer time, two closed-loop clients.
    // Requests A (64 prompt tokens, 10 output), B (64, 2), C (64, 2). Prefill steps 50 ms, decode steps 10 ms.
    // [0, 50]: the prefill worker prefills A and B; A goes to decode worker 0 (turn 0), B to worker 1 (turn 1).
    // Worker 0: A's first token at 60 ms (TTFT 60), tokens 2–10 at 70, 80, …, 150 ms.
    // Worker 1: B's first token at 60 ms, its 2nd at 70 ms: B is done and its client sends C at 70 ms.
    // [70, 120]: C is prefilled; turn 2 sends it to worker 0 (2 mod 2), which runs A and holds one sequence, while
    // worker 1 is idle. A's last token: 60 + 9·10 = 150 ms; C's first token in worker 0's next step, [150, 160]:
    // TTFT 160 − 70 = 90 ms (the least-loaded worker 1 would have given 120 + 10 − 70 = 60 ms); its 2nd at 170 ms.
    let mut pt = STEPS;
    let mut dt = STEPS;
    let mut p = settings(Engine::Vllm, 8192, 16, 1000);
    p.role = Role::Prefill;
    let mut d = p.clone();
    (d.role, d.max_num_seqs) = (Role::Decode, 1);
    let mut pools =
        [Pool { settings: p, workers: 1, timer: &mut pt }, Pool { settings: d, workers: 2, timer: &mut dt }];
    let reqs = [
        SimRequest { input: 64, output: 10, arrival_s: 0.0 },
        SimRequest { input: 64, output: 2, arrival_s: 0.0 },
        SimRequest { input: 64, output: 2, arrival_s: 0.0 },
    ];
    let o = simulate(&mut pools, &reqs, Some(2), &|_| 0.0, OPTS).unwrap();
    // In order of completion: B (70 ms), A (150 ms), C (170 ms).
    close(&o.ttft_s, &[0.06, 0.06, 0.09]);
    close(&o.e2e_s, &[0.07, 0.15, 0.10]);
}

/// `reqs` on one pool of `workers` vLLM instances (8,192-token budget, 16-token blocks, 1,000 blocks) timed by
/// [`STEPS`], with `concurrency` clients and `opts`.
fn vllm_run(workers: u32, reqs: &[SimRequest], concurrency: Option<u32>, opts: SimOptions) -> SimOutcome {
    run_with(settings(Engine::Vllm, 8192, 16, 1000), workers, reqs, concurrency, opts)
}

#[test]
fn the_front_end_delays_every_request_and_its_ttft() {
    // A 5 ms front end: request 1 reaches the engine at 5 ms, prefills to 55 ms (TTFT 55), decodes to 65 ms;
    // the client's next request is sent at 65, reaches the engine at 70, first token at 120 (TTFT 55 again).
    let o = vllm_run(1, &same(2, 10, 2), Some(1), SimOptions { frontend_s: 0.005, ..OPTS });
    close(&o.ttft_s, &[0.055, 0.055]);
    close(&o.e2e_s, &[0.065, 0.065]);
    assert!((o.duration_s - 0.130).abs() < 1e-12);
}

#[test]
fn simultaneous_requests_are_tokenized_one_after_another() {
    // 4 clients send 1,024-token prompts at 0 to 4 vLLM instances (round robin: one each); 1 µs a token on one
    // tokenizer thread: the requests reach their instances at 1.024, 2.048, 3.072 and 4.096 ms. Each instance is
    // idle, so its prefill step (50 ms) starts then: first (and only) tokens at 51.024, 52.048, 53.072, 54.096 ms.
    let o = vllm_run(4, &same(4, 1024, 1), Some(4), SimOptions { tokenize_s_per_token: 1e-6, ..OPTS });
    close(&o.ttft_s, &[0.051024, 0.052048, 0.053072, 0.054096]);
    close(&o.e2e_s, &[0.051024, 0.052048, 0.053072, 0.054096]);
    let starts: Vec<f64> = o.trace.iter().map(|s| s.start_s).collect();
    close(&starts, &[0.001024, 0.002048, 0.003072, 0.004096]);
}

#[test]
fn simultaneous_requests_are_tokenized_two_at_a_time_on_two_threads() {
    // The same 4 requests on a front end with 2 tokenizer threads (Dynamo's tokio workers): requests 1 and 2 take
    // threads 1 and 2 at 0 and reach their instances at 1.024 ms; 3 and 4 take them again when they free up at
    // 1.024 ms and arrive at 2.048 ms. Prefills of 50 ms on idle instances: first tokens at 51.024, 51.024,
    // 52.048, 52.048 ms.
    let two = SimOptions { tokenize_s_per_token: 1e-6, tokenizer_threads: 2, ..OPTS };
    let o = vllm_run(4, &same(4, 1024, 1), Some(4), two);
    close(&o.ttft_s, &[0.051024, 0.051024, 0.052048, 0.052048]);
    let starts: Vec<f64> = o.trace.iter().map(|s| s.start_s).collect();
    close(&starts, &[0.001024, 0.001024, 0.002048, 0.002048]);
    // 4 threads: all four arrive at 1.024 ms (TTFT 51.024 ms each).
    let four = vllm_run(4, &same(4, 1024, 1), Some(4), SimOptions { tokenizer_threads: 4, ..two });
    close(&four.ttft_s, &[0.051024; 4]);
}

#[test]
fn a_request_arriving_mid_step_waits_for_the_next_step() {
    // The same 4 tokenized requests (2 output tokens) on one instance: request 1 arrives at 1.024 ms and prefills
    // alone in step 1 [1.024, 51.024] (first token at 51.024); 2–4 arrive during it (2.048–4.096 ms) and wait for
    // its end: step 2 [51.024, 101.024] decodes 1 (done) and prefills 2–4 (first tokens at 101.024, TTFT 101.024
    // ms, not their arrival + 50 ms); step 3 [101.024, 111.024] decodes 2–4 (done). TTFT in order of completion:
    // 51.024, then 101.024 × 3; end to end 101.024, then 111.024 × 3.
    let o = vllm_run(1, &same(4, 1024, 2), Some(4), SimOptions { tokenize_s_per_token: 1e-6, ..OPTS });
    close(&o.ttft_s, &[0.051024, 0.101024, 0.101024, 0.101024]);
    close(&o.e2e_s, &[0.101024, 0.111024, 0.111024, 0.111024]);
}

#[test]
fn the_tokenizer_is_free_again_for_a_later_request() {
    // One client, two 2,000-token prompts (1 output token), 1 µs a token and a 5 ms front end on top: request 1 is
    // tokenized [0, 2] ms, reaches the engine at 7 ms, its prefill ends at 57 ms (TTFT 57). Request 2 is sent at 57
    // ms to an idle tokenizer: [57, 59], engine at 64, first token at 114 ms (TTFT 57 again).
    let o =
        vllm_run(1, &same(2, 2000, 1), Some(1), SimOptions { frontend_s: 0.005, tokenize_s_per_token: 1e-6, ..OPTS });
    close(&o.ttft_s, &[0.057, 0.057]);
    assert!((o.duration_s - 0.114).abs() < 1e-12);
}

/// Steps whose time grows with every count of the load (so that a wrong load in a decode run shows), counting
/// how often they are asked for.
struct ShapedSteps {
    calls: u64,
}

impl StepTimer for ShapedSteps {
    fn time(&mut self, l: &crate::llm::serving::step::StepLoad) -> Result<StepTime, ConfigError> {
        self.calls += 1;
        let wall_s = 0.004
            + 1e-6 * l.decode_context as f64
            + 3e-5 * l.decode_seqs as f64
            + 2e-6 * l.sampled as f64
            + if l.prefill_tokens > 0 {
                0.02 + 1e-5 * l.prefill_tokens as f64 + 1e-7 * l.prompt_len as f64
            } else {
                0.0
            };
        // Launches that are sometimes shorter than the step (GPU-bound), sometimes as long (host-bound): eager
        // prefill steps, and decode steps of more than 8 sequences (none captured); smaller decodes replay a graph.
        let launch_s = if l.prefill_tokens > 0 {
            0.015 + 2e-5 * l.prefill_tokens as f64
        } else if l.decode_seqs > 8 {
            0.0043 + 1e-5 * l.decode_seqs as f64
        } else {
            0.0
        };
        Ok(StepTime { wall_s, launch_s })
    }
}

/// `n` requests from a small linear congruential generator: prompts 1–`max_in`, outputs 1–`max_out`, Poisson-like
/// arrivals `gap_s` apart on average (0: all at once).
fn varied(n: usize, max_in: u32, max_out: u32, gap_s: f64, seed: u64) -> Vec<SimRequest> {
    let mut x = seed;
    let mut next = move || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) as u32
    };
    let mut t = 0.0;
    (0..n)
        .map(|_| {
            t += gap_s * -((next() as f64 + 1.0) / (u32::MAX >> 1) as f64 + 1e-9).min(1.0).ln();
            SimRequest { input: 1 + next() % max_in, output: 1 + next() % max_out, arrival_s: t }
        })
        .collect()
}

/// Runs `reqs` on `pools` (settings, workers) twice — step by step (a trace of every step is being recorded) and
/// with decode runs advanced at once — and asserts that every number of the outcome is the same to the bit.
/// Returns the timer calls of both (step by step, with runs).
fn same_both_ways(
    pools: &[(InstanceSettings, u32)],
    reqs: &[SimRequest],
    concurrency: Option<u32>,
    frontend_s: f64,
) -> (u64, u64) {
    let go = |trace_steps: usize| {
        let mut timers: Vec<ShapedSteps> = pools.iter().map(|_| ShapedSteps { calls: 0 }).collect();
        let mut ps: Vec<Pool> = pools
            .iter()
            .zip(timers.iter_mut())
            .map(|((s, w), t)| Pool { settings: s.clone(), workers: *w, timer: t })
            .collect();
        // With a front end, a tokenizer of a thousandth of it per prompt token too (prompts up to 400 tokens).
        let opts = SimOptions {
            max_steps: 1_000_000,
            trace_steps,
            frontend_s,
            tokenize_s_per_token: frontend_s / 1e3,
            tokenizer_threads: 1,
        };
        let o = simulate(&mut ps, reqs, concurrency, &|input| 1e-5 * input as f64, opts).unwrap();
        drop(ps);
        (o, timers.iter().map(|t| t.calls).sum::<u64>())
    };
    let (slow, slow_calls) = go(usize::MAX);
    let (fast, fast_calls) = go(0);
    assert_eq!(slow.trace.len() as u64, slow.steps, "the step-by-step path recorded every step");
    assert!(fast.trace.is_empty());
    assert_eq!(slow.ttft_s, fast.ttft_s);
    assert_eq!(slow.tpot_s, fast.tpot_s);
    assert_eq!(slow.e2e_s, fast.e2e_s);
    assert_eq!(slow.tpot_or_zero_s, fast.tpot_or_zero_s);
    assert_eq!(slow.outputs, fast.outputs);
    assert_eq!(slow.itl_s, fast.itl_s);
    assert_eq!(
        (slow.completed, slow.failed, slow.steps, slow.preemptions, slow.input_tokens, slow.output_tokens),
        (fast.completed, fast.failed, fast.steps, fast.preemptions, fast.input_tokens, fast.output_tokens)
    );
    assert_eq!(
        (slow.duration_s, slow.kv_usage_mean, slow.kv_usage_max, slow.batch_mean),
        (fast.duration_s, fast.kv_usage_mean, fast.kv_usage_max, fast.batch_mean)
    );
    assert_eq!(slow.busy_fraction, fast.busy_fraction);
    (slow_calls, fast_calls)
}

#[test]
fn decode_runs_by_hand() {
    // vLLM, 2 clients, 2 requests of 10 prompt and 50 output tokens, constant steps, no trace (decode runs on).
    // Step 1 [0, 50 ms] prefills both (first tokens at 50 ms); steps 2–49 are one decode run (both decode, nothing
    // arrives or finishes: 48 steps of 10 ms, to 530 ms); step 50 [530, 540] samples token 50 of both.
    // TTFT 50 ms, end to end 540 ms, TPOT (540 − 50)/49 = 10 ms; ITL 2 × 49 gaps of 10 ms; 50 steps.
    let mut timer = STEPS;
    let mut pools = [Pool { settings: settings(Engine::Vllm, 8192, 16, 1000), workers: 1, timer: &mut timer }];
    let opts = SimOptions { trace_steps: 0, ..OPTS };
    let o = simulate(&mut pools, &same(2, 10, 50), Some(2), &|_| 0.0, opts).unwrap();
    close(&o.ttft_s, &[0.05, 0.05]);
    close(&o.e2e_s, &[0.54, 0.54]);
    close(&o.tpot_s, &[0.01, 0.01]);
    assert_eq!(o.steps, 50);
    let itl = o.itl_s.stats(1e3);
    assert_eq!(itl.count, 98);
    assert!((itl.p90_ms - 10.0).abs() < 1e-9 && (itl.max_ms - 10.0).abs() < 1e-9, "{itl:?}");
    // KV: 16-token blocks; the prompts' 10 tokens take 1 block each, token 17 (step 8) a 2nd, token 33 (step 24) a
    // 3rd, token 49 (step 40) a 4th: 8 of 1,000 blocks at the end. Time-weighted over the 540 ms: step 1 (50 ms)
    // and steps 2–7 (60 ms) at 2 blocks, steps 8–23 (160 ms) at 4, steps 24–39 (160 ms) at 6, steps 40–50 (110 ms)
    // at 8: (2·110 + 4·160 + 6·160 + 8·110)/540 = 2,700/540 = 5 blocks = 0.005.
    assert!((o.kv_usage_mean - 0.005).abs() < 1e-12, "{}", o.kv_usage_mean);
    assert!((o.kv_usage_max - 0.008).abs() < 1e-15, "{}", o.kv_usage_max);
    // The hand-worked cases above give the same answers with decode runs on.
    let o = simulate(
        &mut [Pool { settings: settings(Engine::Vllm, 8192, 16, 5), workers: 1, timer: &mut STEPS.clone() }],
        &same(2, 16, 40),
        Some(2),
        &|_| 0.0,
        opts,
    )
    .unwrap();
    assert_eq!(o.preemptions, 1);
    close(&o.e2e_s, &[0.44, 0.71]);
    assert!((o.itl_s.stats(1e3).max_ms - 280.0).abs() < 1e-9);
    assert!((o.kv_usage_max - 0.8).abs() < 1e-12, "{}", o.kv_usage_max);
}

#[test]
fn decode_runs_change_nothing() {
    let mut graphs = settings(Engine::Vllm, 2048, 16, 100_000);
    graphs.graph_sizes = vec![1, 2, 4, 8, 16, 24, 32];
    // A closed loop of fixed lengths (the common case): far fewer step timings asked for.
    let (slow, fast) = same_both_ways(&[(graphs.clone(), 1)], &same(100, 300, 200), Some(16), 0.0);
    assert!(fast * 4 < slow, "{fast} timer calls with runs, {slow} step by step");
    same_both_ways(&[(graphs.clone(), 1)], &same(100, 300, 200), Some(16), 0.002);
    // Every engine; varied lengths, Poisson-like arrivals, a KV cache small enough to preempt, CUDA graphs with
    // data-parallel ranks, page size 1, several instances.
    for engine in [Engine::Vllm, Engine::Sglang, Engine::Trtllm] {
        for (block, blocks) in [(16, 100_000), (16, 120), (1, 3000), (32, 90)] {
            for chunked in [true, false] {
                let mut s = settings(engine, 1024, block, blocks);
                s.chunked_prefill = chunked;
                s.max_num_seqs = 12;
                let reqs = varied(60, 400, 150, 0.0, 7);
                same_both_ways(&[(s.clone(), 1)], &reqs, Some(20), 0.0);
                same_both_ways(&[(s.clone(), 1)], &varied(60, 400, 150, 0.05, 11), None, 0.001);
                same_both_ways(&[(s.clone(), 3)], &same(40, 200, 90), Some(24), 0.0);
                let mut g = s.clone();
                (g.dp, g.graph_sizes) = (2, vec![1, 2, 4, 8]);
                same_both_ways(&[(g, 2)], &varied(50, 300, 120, 0.01, 5), Some(30), 0.0);
                let (mut p, mut d) = (s.clone(), s);
                (p.role, d.role) = (Role::Prefill, Role::Decode);
                same_both_ways(&[(p, 2), (d, 3)], &varied(50, 300, 120, 0.0, 3), Some(16), 0.0);
            }
        }
    }
    // SGLang's scheduler_recv_interval: requests wait in the inbox across decode runs.
    for interval in [2, 10, 30] {
        let mut s = settings(Engine::Sglang, 1024, 16, 100_000);
        s.recv_interval = interval;
        same_both_ways(&[(s.clone(), 1)], &varied(60, 400, 150, 0.0, 7), Some(20), 0.0);
        same_both_ways(&[(s.clone(), 2)], &varied(60, 400, 150, 0.05, 11), None, 0.001);
        s.max_num_seqs = 12;
        same_both_ways(&[(s, 1)], &varied(60, 400, 150, 0.02, 5), Some(20), 0.0);
    }
}

#[test]
fn sglang_receives_new_requests_every_recv_interval_decode_batches() {
    // SGLang, --scheduler-recv-interval 3, 10 ms decodes, 50 ms prefills. A (100 prompt, 10 output tokens) sent at
    // 0, B (100, 4) at 55 ms. [0, 50] prefill A (received at once: the scheduler was idle; TTFT 50); at 50 the
    // counter takes the prefill batch's 1,000 and resets (nothing to receive): [50, 60] decode A (token 2). B is
    // sent at 55 and sits in the socket: at 60 the counter is 1, at 70 it is 2 (decodes [60, 70], [70, 80]: A's
    // tokens 3, 4), at 80 it reaches 3 and B is received: [80, 130] prefill B (TTFT 130 − 55 = 75 ms, not the 55 ms
    // of interval 1). Then both decode: A's tokens 5–10 at 140…190 (A ends at 190), B's 2–4 at 140, 150, 160
    // (end to end 160 − 55 = 105 ms).
    let reqs =
        [SimRequest { input: 100, output: 10, arrival_s: 0.0 }, SimRequest { input: 100, output: 4, arrival_s: 0.055 }];
    let mut s = settings(Engine::Sglang, 200, 1, 100_000);
    s.recv_interval = 3;
    for trace_steps in [1000, 0] {
        let mut timer = STEPS;
        let mut pools = [Pool { settings: s.clone(), workers: 1, timer: &mut timer }];
        let o = simulate(&mut pools, &reqs, None, &|_| 0.0, SimOptions { trace_steps, ..OPTS }).unwrap();
        close(&o.ttft_s, &[0.075, 0.05]);
        close(&o.e2e_s, &[0.105, 0.19]);
    }
    // Interval 1 (SGLang's default): B is received at 60 and prefilled [60, 110] (TTFT 55 ms).
    let o = run(settings(Engine::Sglang, 200, 1, 100_000), &reqs, None);
    assert!((o.ttft_s.iter().cloned().fold(0.0, f64::max) - 0.055).abs() < 1e-9, "{:?}", o.ttft_s);
}

#[test]
fn an_overlap_engine_takes_a_request_sent_mid_step_into_the_step_after_next() {
    // vLLM with async scheduling (its batch queue of two), 10 ms decodes, 50 ms prefills, a 200-token budget.
    // A (100 prompt, 10 output tokens) sent at 0, B (100, 4) at 55 ms.
    // [0, 50] prefill A: the instance was idle, so the batch is formed when A arrives (TTFT 50 ms).
    // [50, 60] decode A (token 2), formed at 0 from A. B arrives at 55, while [50, 60] runs.
    // [60, 70] was formed when [50, 60] started (at 50): B, at 55, is not in it — decode A (token 3).
    // [70, 120] formed at 60: prefill B + decode A (token 4) → B's first token at 120: TTFT 120 − 55 = 65 ms
    // (55 ms without the overlap: B would join [60, 110]).
    // Then both decode: A's tokens 5–10 at 130…180, B's 2–4 at 130, 140, 150: B end to end 150 − 55 = 95 ms.
    let reqs =
        [SimRequest { input: 100, output: 10, arrival_s: 0.0 }, SimRequest { input: 100, output: 4, arrival_s: 0.055 }];
    let mut s = settings(Engine::Vllm, 200, 1, 100_000);
    s.overlap = true;
    for trace_steps in [1000, 0] {
        let mut timer = STEPS;
        let mut pools = [Pool { settings: s.clone(), workers: 1, timer: &mut timer }];
        let o = simulate(&mut pools, &reqs, None, &|_| 0.0, SimOptions { trace_steps, ..OPTS }).unwrap();
        // Completion order: B (150 ms), then A (180 ms).
        close(&o.ttft_s, &[0.065, 0.05]);
        close(&o.e2e_s, &[0.095, 0.18]);
    }
    // Without the overlap: [60, 110] prefills B beside A's decode (TTFT 55 ms); B's tokens 2–4 at 120, 130, 140
    // (end to end 85 ms); A's token 3 at 110, 4–10 at 120…180.
    s.overlap = false;
    let o = run(s, &reqs, None);
    close(&o.ttft_s, &[0.055, 0.05]);
    close(&o.e2e_s, &[0.085, 0.18]);
}

#[test]
fn an_overlap_engine_with_nothing_else_to_run_takes_a_new_request_at_once() {
    // One closed-loop client, requests of 100 prompt and 3 output tokens, async scheduling: A [0, 50] prefill,
    // [50, 60], [60, 70] decodes — A ends at 70 ms and the client sends B at 70. The batch formed at 60 for the
    // step after [60, 70] is empty (A finishes in [60, 70]), so the engine schedules B when [60, 70] ends: TTFT
    // 50 ms for every request, end to end 70 ms, as without the overlap.
    let mut s = settings(Engine::Vllm, 200, 16, 1000);
    s.overlap = true;
    let o = run(s, &same(3, 100, 3), Some(1));
    close(&o.ttft_s, &[0.05, 0.05, 0.05]);
    close(&o.e2e_s, &[0.07, 0.07, 0.07]);
    assert!((o.duration_s - 0.21).abs() < 1e-9);
}

#[test]
fn overlap_engines_decode_runs_change_nothing() {
    // The held requests of an overlap engine stop a decode run; the step-by-step path and the runs agree, also
    // when the engine streams a step's tokens only once the next step is launched (ShapedSteps' launches are
    // host-bound for decodes of 9 or more sequences at short contexts, GPU-bound for the others and for prefills).
    for (engine, after_launch) in
        [Engine::Vllm, Engine::Sglang, Engine::Trtllm].into_iter().flat_map(|e| [(e, false), (e, true)])
    {
        let mut s = settings(engine, 1024, 16, 100_000);
        s.overlap = true;
        s.results_after_launch = after_launch;
        s.max_num_seqs = 12;
        same_both_ways(&[(s.clone(), 1)], &varied(60, 400, 150, 0.0, 7), Some(20), 0.0);
        same_both_ways(&[(s.clone(), 2)], &varied(60, 400, 150, 0.05, 11), None, 0.001);
        let (slow, fast) = same_both_ways(&[(s.clone(), 1)], &same(40, 200, 90), Some(16), 0.002);
        assert!(fast * 2 < slow, "{fast} timer calls with runs, {slow} step by step: the runs ran");
        let (mut p, mut d) = (s.clone(), s.clone());
        (p.role, d.role) = (Role::Prefill, Role::Decode);
        same_both_ways(&[(p, 2), (d, 3)], &varied(50, 300, 120, 0.0, 3), Some(16), 0.0);
        s.recv_interval = 10;
        same_both_ways(&[(s, 1)], &varied(60, 400, 150, 0.0, 7), Some(20), 0.0);
    }
}

/// SGLang with the overlap loop, one request of 100 prompt tokens per prefill step (a 100-token chunk), steps of
/// `steps`, streaming a step's tokens once the next step is launched when `after_launch` (no overlap loop when
/// not). Run step by step and with decode runs: both give the same answer.
fn overlap_run(steps: ConstantSteps, after_launch: bool, reqs: &[SimRequest]) -> SimOutcome {
    let mut s = settings(Engine::Sglang, 100, 1, 100_000);
    (s.overlap, s.results_after_launch) = (after_launch, after_launch);
    let go = |trace_steps: usize| {
        let mut timer = steps;
        let mut pools = [Pool { settings: s.clone(), workers: 1, timer: &mut timer }];
        simulate(&mut pools, reqs, None, &|_| 0.0, SimOptions { trace_steps, ..OPTS }).unwrap()
    };
    let (slow, fast) = (go(1000), go(0));
    assert_eq!((&slow.ttft_s, &slow.e2e_s, &slow.itl_s), (&fast.ttft_s, &fast.e2e_s, &fast.itl_s));
    slow
}

/// DeepSeek-R1's eager prefill step on SGLang (dsprefill, sgeager §3): 199.9 ms on the GPU, 154.4 ms of host
/// launches; a decode step replays a CUDA graph (10 ms, nothing to launch).
const EAGER: ConstantSteps =
    ConstantSteps { decode_s: 0.010, prefill_s: 0.1999, decode_launch_s: 0.0, prefill_launch_s: 0.1544 };

#[test]
fn an_overlap_engine_streams_a_prefill_after_launching_the_next_prefill() {
    // A and B (100 prompt tokens, 2 output tokens) both sent at 0; the 100-token chunk prefills one per step.
    // [0, 199.9] prefill A: the host launches it in [0, 154.4]. [199.9, 399.8] prefill B, formed and launched
    // while A's prefill runs: from 154.4 (A launched; nothing before A to wait for) to 154.4 + 154.4 = 308.8.
    // The engine processes A's first token after launching B: A's TTFT max(199.9, 308.8) = 308.8 ms (+108.9).
    // [399.8, 409.8] decodes A and B (a graph, 0 launch): launched at max(308.8, 199.9) + 0 = 308.8, so B's first
    // token is streamed when its prefill ends: TTFT 399.8 ms. Both finish there and nothing follows: their last
    // tokens at 409.8 ms. A's ITL 409.8 − 308.8 = 101 ms, B's 10 ms.
    let reqs = same(2, 100, 2);
    let o = overlap_run(EAGER, true, &reqs);
    close(&o.ttft_s, &[0.3088, 0.3998]);
    close(&o.e2e_s, &[0.4098, 0.4098]);
    let itl = o.itl_s.stats(1e3);
    // Two gaps: (101 + 10)/2 = 55.5 ms on average.
    assert!(itl.count == 2 && (itl.max_ms - 101.0).abs() < 1e-9 && (itl.mean_ms - 55.5).abs() < 1e-9, "{itl:?}");
    // Streamed when each step ends (no overlap loop): A's TTFT 199.9 ms, ITLs 210 and 10 ms.
    let o = overlap_run(EAGER, false, &reqs);
    close(&o.ttft_s, &[0.1999, 0.3998]);
    close(&o.e2e_s, &[0.4098, 0.4098]);
}

#[test]
fn an_overlap_engine_streams_a_prefill_followed_by_a_graph_decode_at_its_end() {
    // One request of 100 prompt and 3 output tokens: [0, 199.9] prefill (launched in [0, 154.4]); [199.9, 209.9]
    // decode, a graph launched at max(154.4, 0) + 0 = 154.4 < 199.9: the first token at 199.9 ms, unchanged.
    // [209.9, 219.9] decode: launched at max(154.4, 199.9) + 0, token 2 at 209.9; token 3 ends the request and
    // nothing follows: 219.9 ms. A lone request of 1 output token at an idle instance: its prefill's end, 199.9 ms.
    for after_launch in [true, false] {
        let o = overlap_run(EAGER, after_launch, &same(1, 100, 3));
        close(&o.ttft_s, &[0.1999]);
        close(&o.e2e_s, &[0.2199]);
        let o = overlap_run(EAGER, after_launch, &same(1, 100, 1));
        close(&o.ttft_s, &[0.1999]);
        close(&o.e2e_s, &[0.1999]);
    }
}

#[test]
fn a_host_bound_overlap_engine_streams_every_token_one_step_late() {
    // Eager decodes whose launch is the whole step (10 ms; prefill 50 ms, host-bound too: TensorRT-LLM beyond its
    // captured batch sizes). One request of 100 prompt and 4 output tokens. [0, 50] prefill, launched [0, 50];
    // [50, 60] decode launched [max(50, 0), 60]: the first token at max(50, 60) = 60 ms (TTFT +10 ms);
    // [60, 70] launched [max(60, 50), 70]: token 2 at 70; [70, 80] launched [70, 80]: token 3 at 80; token 4 ends
    // the request at 80 ms with nothing after it. ITLs 10, 10, 0 ms: every token but the last one step late.
    let host_bound =
        ConstantSteps { decode_s: 0.010, prefill_s: 0.050, decode_launch_s: 0.010, prefill_launch_s: 0.050 };
    let o = overlap_run(host_bound, true, &same(1, 100, 4));
    close(&o.ttft_s, &[0.06]);
    close(&o.e2e_s, &[0.08]);
    close(&o.tpot_s, &[(0.08 - 0.06) / 3.0]);
    // A non-overlap engine streams every token when its step ends: 50, 60, 70, 80 ms.
    let o = overlap_run(host_bound, false, &same(1, 100, 4));
    close(&o.ttft_s, &[0.05]);
    close(&o.e2e_s, &[0.08]);
}

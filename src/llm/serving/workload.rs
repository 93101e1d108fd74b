//! The workload as serving benchmark clients send it: how many requests, how long each prompt and answer is, and
//! when each is sent — the input of the engine simulation ([`super::sim`]).
//!
//! Each option mirrors a client's:
//! - **`concurrency`** N: N clients start together and each sends its next request when its previous one has
//!   finished (a closed loop). vLLM `vllm bench serve --max-concurrency` (a semaphore around every request,
//!   `vllm/benchmarks/serve.py` `limited_request_func`; the latency clock starts once the request holds a slot),
//!   SGLang `bench_serving.py --max-concurrency`, genai-perf `--concurrency`, `trtllm-bench --concurrency`.
//! - **`request_rate`** λ requests/s with **`burstiness`** k: inter-arrival times drawn from a gamma distribution
//!   of shape k and scale 1/(λ·k) (mean 1/λ; k = 1 is a Poisson process, k < 1 burstier, k → ∞ evenly spaced), then
//!   rescaled so that the last arrival falls at `num_requests`/λ — vLLM `serve.py` `get_request` (`--request-rate`,
//!   `--burstiness`); SGLang `bench_serving.py --request-rate` draws the Poisson case. With both `request_rate` and
//!   `concurrency`, a request that arrives while N are in flight waits for a slot (vLLM's semaphore). With neither,
//!   every request is sent at t = 0 (`trtllm-bench throughput`'s offline mode, `--request-rate inf`).
//! - **`num_requests`**: requests sent in all; default 1,000 (`vllm bench serve --num-prompts`).
//! - **Lengths**: `input_tokens` and `output_tokens` fixed (every output runs to its length: the benchmarks'
//!   `ignore_eos`), or with **`range_ratio`** r drawn as integers uniform in [⌊L·(1 − r)⌋, ⌈L·(1 + r)⌉] (output at
//!   least 1; vLLM `datasets.py` `RandomDataset.get_sampling_params`, `--random-range-ratio`, r in [0, 1)), or with
//!   **`min_length_ratio`** r drawn as integers uniform in [⌊L·r⌋, L] (L the longest; SGLang `bench_serving.py
//!   --random-range-ratio`, `compute_random_lens`, and the copy of vLLM's `benchmark_serving.py` that SemiAnalysis
//!   InferenceX runs, `utils/bench_serving`, `sample_random_requests`: `np.random.randint(int(L·r), L + 1)`), or with
//!   **`input_tokens_std`** / **`output_tokens_std`** drawn from a normal distribution of that mean and standard
//!   deviation, rounded and clipped to at least 1 token (genai-perf `--synthetic-input-tokens-stddev`,
//!   `--output-tokens-stddev`).
//! - **`seed`**: the random stream (default 0, `vllm bench serve --seed`). Requests are drawn from ChaCha8
//!   (`rand_chacha`), lengths on stream 0 and arrivals on stream 1, so a seed gives the same requests on every
//!   platform and release; the streams are not numpy's, so a seed does not reproduce a vLLM run's exact prompts.

use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Gamma, Normal};
use serde::Serialize;
use utoipa::ToSchema;

/// Requests a benchmark sends when `num_requests` is not given (`vllm bench serve --num-prompts`).
pub const DEFAULT_NUM_REQUESTS: u32 = 1000;

/// How request lengths vary around `input_tokens` / `output_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LengthDist {
    /// Every request has exactly the given lengths.
    Fixed,
    /// Integers uniform in [⌊L·(1 − r)⌋, ⌈L·(1 + r)⌉] (vLLM's random dataset).
    Uniform { range_ratio: f64 },
    /// Integers uniform in [⌊L·r⌋, L] (SGLang's `bench_serving.py`, InferenceX's `benchmark_serving.py`): L is the
    /// longest length.
    UniformBelow { min_ratio: f64 },
    /// Normal around the given lengths with these standard deviations, tokens (genai-perf's synthetic prompts).
    Normal { input_std: f64, output_std: f64 },
}

/// The traffic of one prediction with every default filled in (the request's `workload`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Traffic {
    /// Mean prompt tokens per request.
    pub input_tokens: u32,
    /// Mean generated tokens per request.
    pub output_tokens: u32,
    pub lengths: LengthDist,
    /// Clients in a closed loop (at most this many requests in flight); none: unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Arrivals per second; none: every request is sent as soon as a client is free (t = 0 without concurrency).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_rate: Option<f64>,
    /// Gamma shape of the inter-arrival times (1 = Poisson).
    pub burstiness: f64,
    /// Requests sent in all.
    pub num_requests: u32,
    /// The random stream's seed.
    pub seed: u64,
}

/// One request as the benchmark client sends it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimRequest {
    /// Prompt tokens.
    pub input: u32,
    /// Tokens to generate (the first comes out of the prefill).
    pub output: u32,
    /// When the client may send it, s from the start (0 in a closed loop without a rate); it is sent then, or when a
    /// client slot frees under `concurrency`.
    pub arrival_s: f64,
}

/// The bounds of vLLM's random-dataset lengths around `mean` for `range_ratio` r (`get_sampling_params`): ⌊L·(1 −
/// r)⌋ to ⌈L·(1 + r)⌉, at least `min`.
pub fn uniform_bounds(mean: u32, range_ratio: f64, min: u32) -> (u32, u32) {
    let l = mean as f64;
    let low = ((l * (1.0 - range_ratio)).floor() as u32).max(min);
    let high = ((l * (1.0 + range_ratio)).ceil() as u32).max(min).max(low);
    (low, high)
}

fn lengths(t: &Traffic, rng: &mut ChaCha8Rng) -> Vec<(u32, u32)> {
    let n = t.num_requests as usize;
    match t.lengths {
        LengthDist::Fixed => vec![(t.input_tokens, t.output_tokens); n],
        LengthDist::Uniform { range_ratio } => {
            let input = uniform_bounds(t.input_tokens, range_ratio, 1);
            uniform_pairs(n, input, uniform_bounds(t.output_tokens, range_ratio, 1), rng)
        }
        LengthDist::UniformBelow { min_ratio } => {
            // numpy's randint(⌊L·r⌋, L + 1), at least 1 token.
            let bounds = |l: u32| {
                let low = ((l as f64 * min_ratio).floor() as u32).clamp(1, l.max(1));
                (low, l.max(low))
            };
            uniform_pairs(n, bounds(t.input_tokens), bounds(t.output_tokens), rng)
        }
        LengthDist::Normal { input_std, output_std } => {
            let draw = |mean: u32, std: f64, rng: &mut ChaCha8Rng| -> u32 {
                match Normal::new(mean as f64, std.max(0.0)) {
                    Ok(d) => d.sample(rng).round().clamp(1.0, u32::MAX as f64) as u32,
                    Err(_) => mean,
                }
            };
            (0..n).map(|_| (draw(t.input_tokens, input_std, rng), draw(t.output_tokens, output_std, rng))).collect()
        }
    }
}

/// `n` (input, output) lengths, integers uniform in the inclusive `input` and `output` bounds, tokens. Both clients
/// that draw this way (vLLM `datasets.py` `RandomDataset`, SGLang / InferenceX `sample_random_requests`) draw every
/// input length first, then every output length, so the pairs follow that order of the stream.
fn uniform_pairs(n: usize, input: (u32, u32), output: (u32, u32), rng: &mut ChaCha8Rng) -> Vec<(u32, u32)> {
    let inputs: Vec<u32> = (0..n).map(|_| rng.random_range(input.0..=input.1)).collect();
    inputs.into_iter().map(|i| (i, rng.random_range(output.0..=output.1))).collect()
}

/// Arrival times of `n` requests at `rate` per second with gamma(`burstiness`) inter-arrival times, rescaled so the
/// last falls at n/rate (vLLM `get_request`; the first request also waits one drawn interval). An infinite
/// burstiness spaces them evenly at 1/rate.
pub fn arrivals(n: u32, rate: f64, burstiness: f64, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(1);
    let mut t = 0.0;
    let mut out: Vec<f64> = Vec::with_capacity(n as usize);
    let gamma = Gamma::new(burstiness, 1.0 / (rate * burstiness)).ok();
    for _ in 0..n {
        t += match (&gamma, burstiness.is_finite()) {
            (Some(g), true) => g.sample(&mut rng),
            _ => 1.0 / rate,
        };
        out.push(t);
    }
    if let Some(&last) = out.last() {
        if last > 0.0 {
            let scale = n as f64 / rate / last;
            out.iter_mut().for_each(|a| *a *= scale);
        }
    }
    out
}

/// Every request of `t`, in the order the client sends them (deterministic in `t.seed`).
pub fn requests(t: &Traffic) -> Vec<SimRequest> {
    let mut rng = ChaCha8Rng::seed_from_u64(t.seed);
    let lens = lengths(t, &mut rng);
    let times = match t.request_rate {
        Some(rate) => arrivals(t.num_requests, rate, t.burstiness, t.seed),
        None => vec![0.0; t.num_requests as usize],
    };
    lens.into_iter().zip(times).map(|((input, output), arrival_s)| SimRequest { input, output, arrival_s }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traffic(lengths: LengthDist, rate: Option<f64>, seed: u64) -> Traffic {
        Traffic {
            input_tokens: 1000,
            output_tokens: 100,
            lengths,
            concurrency: None,
            request_rate: rate,
            burstiness: 1.0,
            num_requests: 2000,
            seed,
        }
    }

    #[test]
    fn poisson_arrivals_are_reproducible_by_seed_and_have_the_rate() {
        let a = requests(&traffic(LengthDist::Fixed, Some(4.0), 7));
        let b = requests(&traffic(LengthDist::Fixed, Some(4.0), 7));
        let c = requests(&traffic(LengthDist::Fixed, Some(4.0), 8));
        assert_eq!(a, b);
        assert_ne!(a, c);
        // vLLM's rescaling: the last of 2,000 arrivals at 4/s is at exactly 2000/4 = 500 s.
        assert!((a.last().unwrap().arrival_s - 500.0).abs() < 1e-9);
        assert!(a.windows(2).all(|w| w[1].arrival_s >= w[0].arrival_s));
        // Exponential gaps (shape 1): mean 1/4 s; their coefficient of variation is 1 (std = mean), so over 2,000
        // gaps the sample CV is within 1 ± 0.1 (its standard error is about 1/√2000 ≈ 0.022 times a small factor).
        let gaps: Vec<f64> = a.windows(2).map(|w| w[1].arrival_s - w[0].arrival_s).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!((mean - 0.25).abs() < 0.01, "{mean}");
        assert!((var.sqrt() / mean - 1.0).abs() < 0.1, "{}", var.sqrt() / mean);
        // Burstiness 4: gamma of shape 4, CV 1/√4 = 0.5.
        let smooth = arrivals(2000, 4.0, 4.0, 7);
        let g: Vec<f64> = smooth.windows(2).map(|w| w[1] - w[0]).collect();
        let m = g.iter().sum::<f64>() / g.len() as f64;
        let sd = (g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / g.len() as f64).sqrt();
        assert!((sd / m - 0.5).abs() < 0.05, "{}", sd / m);
        // Infinite burstiness: evenly spaced at 1/rate: 0.25, 0.5, …
        let even = arrivals(4, 4.0, f64::INFINITY, 7);
        assert_eq!(even, vec![0.25, 0.5, 0.75, 1.0]);
    }

    #[test]
    fn lengths_follow_the_clients_distributions() {
        // Fixed: every request 1000 in, 100 out, all at t = 0 without a rate.
        let f = requests(&traffic(LengthDist::Fixed, None, 0));
        assert!(f.iter().all(|r| (r.input, r.output, r.arrival_s) == (1000, 100, 0.0)));
        // range_ratio 0.25: inputs in [750, 1250], outputs in [75, 125], both ends reached over 2,000 draws
        // (each end has probability 1/501 per draw: missing one in 2,000 draws has probability (500/501)^2000 ≈ 2 %,
        // and the seed is fixed).
        let u = requests(&traffic(LengthDist::Uniform { range_ratio: 0.25 }, None, 3));
        assert!(u.iter().all(|r| (750..=1250).contains(&r.input) && (75..=125).contains(&r.output)));
        let mean_in = u.iter().map(|r| r.input as f64).sum::<f64>() / 2000.0;
        assert!((mean_in - 1000.0).abs() < 10.0, "{mean_in}");
        assert_eq!(uniform_bounds(10, 0.95, 1), (1, 20));
        // Normal: mean 1000, std 100 → the sample std within 10 % of 100.
        let n = requests(&traffic(LengthDist::Normal { input_std: 100.0, output_std: 0.0 }, None, 3));
        let m = n.iter().map(|r| r.input as f64).sum::<f64>() / 2000.0;
        let sd = (n.iter().map(|r| (r.input as f64 - m).powi(2)).sum::<f64>() / 2000.0).sqrt();
        assert!((m - 1000.0).abs() < 10.0 && (sd - 100.0).abs() < 10.0, "{m} {sd}");
        assert!(n.iter().all(|r| r.output == 100));
    }

    #[test]
    fn lower_bounded_lengths_are_sglangs_and_inferencexs_range() {
        // min_length_ratio 0.8 of 1000 in / 100 out: numpy's randint(800, 1001) and randint(80, 101), integers in
        // [800, 1000] and [80, 100] (201 and 21 values), means (800 + 1000)/2 = 900 and 90. Over 2,000 draws both
        // ends are reached (missing one has probability (200/201)^2000 ≈ 5e-5), and the sample mean of the inputs
        // is within 5 tokens of 900 (the uniform's std is √((201² − 1)/12) = 58.0, its standard error over 2,000
        // draws 1.3).
        let u = requests(&traffic(LengthDist::UniformBelow { min_ratio: 0.8 }, None, 3));
        assert!(u.iter().all(|r| (800..=1000).contains(&r.input) && (80..=100).contains(&r.output)));
        for (lo, hi, f) in [(800, 1000, true), (80, 100, false)] {
            let v: Vec<u32> = u.iter().map(|r| if f { r.input } else { r.output }).collect();
            assert_eq!((v.iter().min(), v.iter().max()), (Some(&lo), Some(&hi)));
        }
        let mean_in = u.iter().map(|r| r.input as f64).sum::<f64>() / 2000.0;
        assert!((mean_in - 900.0).abs() < 5.0, "{mean_in}");
        // InferenceX's 1,024 / 8,192 at 0.8: ⌊819.2⌋ = 819 to 1,024 and ⌊6553.6⌋ = 6,553 to 8,192; a 1-token output
        // stays 1 (never 0).
        let t = Traffic {
            input_tokens: 1024,
            output_tokens: 8192,
            ..traffic(LengthDist::UniformBelow { min_ratio: 0.8 }, None, 1)
        };
        let r = requests(&t);
        assert!(r.iter().all(|q| (819..=1024).contains(&q.input) && (6553..=8192).contains(&q.output)));
        let one = Traffic { input_tokens: 1, output_tokens: 1, ..t };
        assert!(requests(&one).iter().all(|q| (q.input, q.output) == (1, 1)));
    }
}

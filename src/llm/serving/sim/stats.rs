//! Latency statistics as serving benchmarks report them: mean, standard deviation and percentiles of TTFT, TPOT,
//! ITL and end-to-end latency (`vllm bench serve`: `calculate_metrics` in `vllm/benchmarks/serve.py`, NumPy's
//! `np.mean`, `np.std` and `np.percentile`; SGLang's `bench_serving.py` reports the same).
//!
//! Percentiles interpolate linearly between the two nearest ranks, NumPy's default (`method="linear"`): over n
//! sorted values x₀ ≤ … ≤ x_{n−1}, the p-th percentile sits at rank h = (n − 1)·p/100 and is
//! x_⌊h⌋ + (h − ⌊h⌋)·(x_⌈h⌉ − x_⌊h⌋). Inter-token latencies arrive as runs of equal values (every sequence of a step
//! sees the same gap), so they are kept as (value, count) pairs — a million tokens in a few thousand pairs — and
//! the same percentile is taken over the expanded sequence without expanding it.

use serde::Serialize;
use utoipa::ToSchema;

/// A latency metric's distribution over requests (or, for ITL, over tokens), ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema, Default)]
pub struct LatencyStats {
    /// Mean, ms.
    pub mean_ms: f64,
    /// Population standard deviation (NumPy `np.std`), ms.
    pub std_ms: f64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
    /// Values the statistics are taken over (requests, or tokens for ITL).
    pub count: u64,
}

impl LatencyStats {
    /// The percentile `p` (0–100) in ms of the distribution these statistics summarize, for the percentiles they
    /// keep (50, 90, 99; 100 = max); the mean for any other value.
    pub fn at(&self, p: f64) -> f64 {
        match p {
            p if p == 50.0 => self.p50_ms,
            p if p == 90.0 => self.p90_ms,
            p if p == 99.0 => self.p99_ms,
            p if p == 100.0 => self.max_ms,
            _ => self.mean_ms,
        }
    }
}

/// Samples with multiplicities, merged while pushed when equal to the last (the runs of a step).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Weighted {
    values: Vec<(f64, u64)>,
}

impl Weighted {
    /// `count` samples of `value`.
    pub fn push(&mut self, value: f64, count: u64) {
        if count == 0 {
            return;
        }
        match self.values.last_mut() {
            Some((v, c)) if *v == value => *c += count,
            _ => self.values.push((value, count)),
        }
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.values.iter().map(|v| v.1).sum()
    }

    /// No samples.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Statistics of the samples, in seconds turned into ms (`scale` = 1000 for seconds).
    pub fn stats(mut self, scale: f64) -> LatencyStats {
        self.values.sort_by(|a, b| a.0.total_cmp(&b.0));
        let n = self.len();
        if n == 0 {
            return LatencyStats::default();
        }
        let nf = n as f64;
        let mean = self.values.iter().map(|(v, c)| v * *c as f64).sum::<f64>() / nf;
        let var = self.values.iter().map(|(v, c)| (v - mean).powi(2) * *c as f64).sum::<f64>() / nf;
        let pct = |p: f64| percentile_weighted(&self.values, n, p);
        LatencyStats {
            mean_ms: mean * scale,
            std_ms: var.sqrt() * scale,
            p50_ms: pct(50.0) * scale,
            p90_ms: pct(90.0) * scale,
            p99_ms: pct(99.0) * scale,
            max_ms: self.values.last().map_or(0.0, |v| v.0) * scale,
            count: n,
        }
    }
}

/// The value at 0-based index `k` of the expanded sorted sequence.
fn at_index(sorted: &[(f64, u64)], k: u64) -> f64 {
    let mut seen = 0;
    for (v, c) in sorted {
        seen += c;
        if k < seen {
            return *v;
        }
    }
    sorted.last().map_or(0.0, |v| v.0)
}

/// NumPy's linear percentile `p` (0–100) of `n` samples given sorted with multiplicities.
pub fn percentile_weighted(sorted: &[(f64, u64)], n: u64, p: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let h = (n - 1) as f64 * p.clamp(0.0, 100.0) / 100.0;
    let (lo, hi) = (h.floor() as u64, h.ceil() as u64);
    let (a, b) = (at_index(sorted, lo), at_index(sorted, hi));
    a + (h - lo as f64) * (b - a)
}

/// Statistics of plain samples in seconds, reported in ms.
pub fn stats_s(values: &[f64]) -> LatencyStats {
    let mut w = Weighted::default();
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    for v in sorted {
        w.push(v, 1);
    }
    w.stats(1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_sequence_are_numpys() {
        // 1, 2, …, 10 s. np.percentile(x, 50) = 5.5 (rank 4.5 between 5 and 6), p90: rank 8.1 → 9 + 0.1·1 = 9.1,
        // p99: rank 8.91 → 9.91; mean 5.5; np.std = √(Σ(x − 5.5)²/10) = √8.25 = 2.8723 s.
        let x: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = stats_s(&x);
        assert!((s.p50_ms - 5500.0).abs() < 1e-9, "{s:?}");
        assert!((s.p90_ms - 9100.0).abs() < 1e-9);
        assert!((s.p99_ms - 9910.0).abs() < 1e-9);
        assert!((s.mean_ms - 5500.0).abs() < 1e-9);
        assert!((s.std_ms - 8.25f64.sqrt() * 1e3).abs() < 1e-9);
        assert_eq!((s.max_ms, s.count), (10_000.0, 10));
        // Order does not matter; one value is every percentile.
        let mut rev = x.clone();
        rev.reverse();
        assert_eq!(stats_s(&rev), s);
        assert_eq!(stats_s(&[0.002]).p99_ms, 2.0);
        assert_eq!(stats_s(&[]), LatencyStats::default());
    }

    #[test]
    fn weighted_runs_give_the_expanded_sequences_percentiles() {
        // Three tokens at 10 ms and one at 50 ms, pushed as runs: the expanded sequence is 10, 10, 10, 50 (ms).
        // p50: rank 1.5 → 10; p90: rank 2.7 → 10 + 0.7·40 = 38; mean (30 + 50)/4 = 20.
        let mut w = Weighted::default();
        w.push(0.010, 2);
        w.push(0.010, 1);
        w.push(0.050, 1);
        w.push(0.7, 0);
        assert_eq!(w.len(), 4);
        let s = w.stats(1e3);
        assert!((s.p50_ms - 10.0).abs() < 1e-9 && (s.p90_ms - 38.0).abs() < 1e-9 && (s.mean_ms - 20.0).abs() < 1e-9);
        assert!((s.at(90.0) - s.p90_ms).abs() < 1e-12 && s.at(100.0) == 50.0);
    }
}

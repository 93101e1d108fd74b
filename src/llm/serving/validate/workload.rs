//! The workload and the latency target checked (token lengths, arrivals, length distributions, SLO), and the
//! server's caps on a simulation.

use super::ServingConfig;
use crate::llm::config::{bad, ConfigError};
use crate::llm::serving::request::{Slo, Workload};
use crate::llm::serving::sim::SimLimits;
use crate::llm::serving::workload::{LengthDist, Traffic, DEFAULT_NUM_REQUESTS};

/// Largest prompt or output length accepted, tokens (larger than any released model's context).
pub const MAX_TOKENS: u32 = 10_000_000;

pub(super) fn workload(w: &Workload) -> Result<Traffic, ConfigError> {
    for (f, v) in [("input_tokens", w.input_tokens), ("output_tokens", w.output_tokens)] {
        if v == 0 || v > MAX_TOKENS {
            return Err(bad(&format!("workload.{f}"), format!("must be 1–{MAX_TOKENS}, got {v}")));
        }
    }
    if let Some(c) = w.concurrency {
        if c == 0 || c > 1_000_000 {
            return Err(bad("workload.concurrency", format!("must be 1–1,000,000, got {c}")));
        }
    }
    if let Some(r) = w.request_rate {
        if !(r > 0.0 && r < 1e9) {
            return Err(bad("workload.request_rate", format!("must be a positive number of requests/s, got {r}")));
        }
    }
    let burstiness = w.burstiness.unwrap_or(1.0);
    if !(1e-3..=1e6).contains(&burstiness) {
        return Err(bad("workload.burstiness", format!("must be 0.001–1e6 (1 = Poisson), got {burstiness}")));
    }
    if w.burstiness.is_some() && w.request_rate.is_none() {
        return Err(bad("workload.burstiness", "applies to request_rate arrivals: give request_rate"));
    }
    let num_requests = w.num_requests.unwrap_or(DEFAULT_NUM_REQUESTS);
    if num_requests == 0 {
        return Err(bad("workload.num_requests", "must be at least 1"));
    }
    let std_ok = |v: Option<f64>| v.is_none_or(|x| x >= 0.0 && x.is_finite() && x <= MAX_TOKENS as f64);
    let std_given = w.input_tokens_std.is_some() || w.output_tokens_std.is_some();
    if let Some(r) = w.min_length_ratio {
        if w.range_ratio.is_some() || std_given {
            return Err(bad(
                "workload.min_length_ratio",
                "give min_length_ratio, range_ratio or input/output_tokens_std, not two of them",
            ));
        }
        if !(r > 0.0 && r <= 1.0) {
            return Err(bad("workload.min_length_ratio", format!("must be in (0, 1], got {r}")));
        }
    }
    let lengths = match (w.range_ratio, std_given) {
        (Some(_), true) => {
            return Err(bad("workload.range_ratio", "give range_ratio or input/output_tokens_std, not both"));
        }
        (Some(r), false) if !(0.0..1.0).contains(&r) => {
            return Err(bad("workload.range_ratio", format!("must be in [0, 1), got {r}")));
        }
        (Some(r), false) => LengthDist::Uniform { range_ratio: r },
        (None, true) if !std_ok(w.input_tokens_std) => {
            return Err(bad("workload.input_tokens_std", "must be a non-negative number of tokens"));
        }
        (None, true) if !std_ok(w.output_tokens_std) => {
            return Err(bad("workload.output_tokens_std", "must be a non-negative number of tokens"));
        }
        (None, true) => LengthDist::Normal {
            input_std: w.input_tokens_std.unwrap_or(0.0),
            output_std: w.output_tokens_std.unwrap_or(0.0),
        },
        (None, false) => match w.min_length_ratio {
            Some(r) if r < 1.0 => LengthDist::UniformBelow { min_ratio: r },
            _ => LengthDist::Fixed,
        },
    };
    Ok(Traffic {
        input_tokens: w.input_tokens,
        output_tokens: w.output_tokens,
        lengths,
        concurrency: w.concurrency,
        request_rate: w.request_rate,
        burstiness,
        num_requests,
        seed: w.seed.unwrap_or(0),
    })
}

pub(super) fn slo(s: &Option<Slo>) -> Result<(), ConfigError> {
    let Some(s) = s else { return Ok(()) };
    for (f, v) in [("ttft_ms", s.ttft_ms), ("tpot_ms", s.tpot_ms), ("e2e_latency_ms", s.e2e_latency_ms)] {
        if v.is_some_and(|x| !(x > 0.0 && x.is_finite())) {
            return Err(bad(&format!("slo.{f}"), "must be a positive number of ms"));
        }
    }
    if let Some(p) = s.percentile {
        if ![50.0, 90.0, 99.0].contains(&p) {
            return Err(bad("slo.percentile", format!("must be 50, 90 or 99, got {p}")));
        }
    }
    Ok(())
}

/// Refuses a simulation beyond the server's caps (each a 422 naming the field to change): more than
/// `max_requests` requests (`workload.num_requests`), more than `max_concurrency` clients
/// (`workload.concurrency`), or more generated tokens in all than `max_tokens` (`workload.output_tokens`, counted
/// at the longest output the lengths allow). The steps cap is enforced while simulating.
pub fn check_limits(cfg: &ServingConfig, limits: &SimLimits) -> Result<(), ConfigError> {
    if !cfg.simulate {
        return Ok(());
    }
    let t = &cfg.traffic;
    let hint = "or set workload.simulate to false for the steady-state model";
    if t.num_requests > limits.max_requests {
        return Err(bad(
            "workload.num_requests",
            format!(
                "{} requests exceed this server's {} (serving_max_requests); send fewer, {hint}",
                t.num_requests, limits.max_requests
            ),
        ));
    }
    if let Some(c) = t.concurrency {
        if c > limits.max_concurrency {
            return Err(bad(
                "workload.concurrency",
                format!(
                    "{c} clients exceed this server's {} (serving_max_concurrency), {hint}",
                    limits.max_concurrency
                ),
            ));
        }
    }
    let longest = match t.lengths {
        LengthDist::Fixed => t.output_tokens as f64,
        LengthDist::Uniform { range_ratio } => (t.output_tokens as f64 * (1.0 + range_ratio)).ceil(),
        LengthDist::UniformBelow { .. } => t.output_tokens as f64,
        LengthDist::Normal { output_std, .. } => t.output_tokens as f64 + 4.0 * output_std,
    };
    let tokens = t.num_requests as f64 * longest;
    if tokens > limits.max_tokens as f64 {
        return Err(bad(
            "workload.output_tokens",
            format!(
                "{} requests × up to {longest:.0} output tokens = {tokens:.0} simulated tokens exceed this server's {} \
                 (serving_max_simulated_tokens); send fewer or shorter requests, {hint}",
                t.num_requests, limits.max_tokens
            ),
        ));
    }
    Ok(())
}

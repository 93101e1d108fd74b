//! The fitted serving constants: their search coordinates, the loss, the fit and the grouped folds.

use super::*;

/// The constants the fit adjusts: `kernel_us` (the GPU cost per kernel of what stays analytic), and vLLM V0's
/// and TensorRT-LLM's host costs per step and per sequence. vLLM V1's and SGLang's host costs take TensorRT-LLM's
/// fitted ones (engines whose host path is compiled or off the critical path; no rows of theirs exist here, see
/// [`crate::llm::serving::engine`]). `memory` (element-wise kernels) and `stream` (memory-bound matrix kernels)
/// stay at their shipped 0.8: with the bundled learned models every dense matrix operator of these rows is
/// learned, so `stream` is not identified — fitted freely it wandered 0.20–0.81 over the five folds (2026-11-24),
/// a value that would then time analytic GEMVs (fp8 on GPUs without models) at a fifth of the bandwidth.
pub const FITTED: [&str; 5] = ["kernel_us", "vllm_v0.step_us", "vllm_v0.seq_us", "trtllm.step_us", "trtllm.seq_us"];

pub(super) fn to_consts(x: &[f64], base: &ServingConstants) -> ServingConstants {
    let efficiency = crate::cost::Efficiency { kernel_us: x[0].exp(), ..base.efficiency };
    // The engines' per-request front-end cost does not enter a static batch: each keeps its own.
    let host = |request_us: f64| HostCost { step_us: x[3].exp(), seq_us: x[4].exp(), request_us };
    ServingConstants {
        efficiency,
        vllm_v0: HostCost { step_us: x[1].exp(), seq_us: x[2].exp(), request_us: base.vllm_v0.request_us },
        vllm: host(base.vllm.request_us),
        trtllm: host(base.trtllm.request_us),
        sglang: host(base.sglang.request_us),
        ..*base
    }
}

pub(super) fn from_consts(c: &ServingConstants) -> Vec<f64> {
    vec![
        c.efficiency.kernel_us.ln(),
        c.vllm_v0.step_us.ln(),
        c.vllm_v0.seq_us.max(1e-3).ln(),
        c.trtllm.step_us.ln(),
        c.trtllm.seq_us.max(1e-3).ln(),
    ]
}

/// Where every fit starts: the shipped constants' fixed fields (`stream` and `memory` 0.8), neutral values for
/// the fitted ones (5 µs per kernel, 500 µs per step, 10 µs per sequence), so no fold starts from a fit that saw
/// it.
pub fn start() -> ServingConstants {
    let c = ServingConstants::CALIBRATED;
    let host = HostCost { step_us: 500.0, seq_us: 10.0, request_us: 0.0 };
    ServingConstants {
        efficiency: crate::cost::Efficiency { kernel_us: 5.0, ..c.efficiency },
        stream: 0.8,
        vllm: host,
        vllm_v0: host,
        trtllm: host,
        sglang: host,
        ..c
    }
}

/// Mean over frameworks of the mean |ln(predicted/measured)| of `rows` (each framework weighted equally).
pub fn loss(backends: &Backends, rows: &[&BenchRow], consts: &ServingConstants) -> f64 {
    let mut by: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for r in rows {
        let e = by.entry(r.framework.as_str()).or_default();
        e.0 += match backends.predict(r, consts) {
            Some(b) if b.latency_s > 0.0 => (b.latency_s / r.measured_s).ln().abs(),
            _ => 10.0,
        };
        e.1 += 1.0;
    }
    by.values().map(|(s, n)| s / n).sum::<f64>() / by.len().max(1) as f64
}

/// Fits the constants on `rows` from [`start`].
pub fn fit(backends: &Backends, rows: &[&BenchRow], iterations: usize) -> (ServingConstants, f64) {
    let base = start();
    let mut f = |x: &[f64]| loss(backends, rows, &to_consts(x, &base));
    let (x, v) = nelder_mead(&mut f, &from_consts(&base), 0.3, iterations);
    (to_consts(&x, &base), v)
}

/// The fold of each group: groups sorted and dealt round-robin into `k` folds.
pub fn folds(rows: &[BenchRow], k: usize) -> BTreeMap<String, usize> {
    let mut groups: Vec<String> = rows.iter().map(BenchRow::group).collect();
    groups.sort();
    groups.dedup();
    groups.into_iter().enumerate().map(|(i, g)| (g, i % k.max(1))).collect()
}

//! The one fitted constant of `eval serving`: each engine's front-end time per request, fitted per fold on the
//! training rows' simulated TTFT without a front end (see the parent module's doc for what is held out).

use super::{FoldConstants, Ready};
use crate::llm::serving::engine::HostCost;
use crate::llm::serving::request::Engine;
use crate::llm::serving::ServingConstants;

/// The shipped constants with each engine's front-end time per request (µs) replaced by `f`.
pub(super) fn constants(f: &FoldConstants) -> ServingConstants {
    let c = ServingConstants::CALIBRATED;
    ServingConstants {
        vllm: HostCost { request_us: f.vllm_request_us, ..c.vllm },
        sglang: HostCost { request_us: f.sglang_request_us, ..c.sglang },
        trtllm: HostCost { request_us: f.trtllm_request_us, ..c.trtllm },
        ..c
    }
}

/// The front-end time (µs) minimizing the mean |ln((ttft₀ + f)/measured)| over `rows` ((ttft₀, measured) in ms):
/// a grid of 0.25 ms up to 2 s (the loss is piecewise smooth in f, so a grid finds its minimum).
fn fit_request_us(rows: &[(f64, f64)]) -> f64 {
    if rows.is_empty() {
        return 0.0;
    }
    let loss = |f_ms: f64| rows.iter().map(|(p, m)| ((p + f_ms) / m).ln().abs()).sum::<f64>();
    let (mut best, mut best_loss) = (0.0, loss(0.0));
    for i in 1..=8000 {
        let f = i as f64 * 0.25;
        let l = loss(f);
        if l < best_loss {
            (best, best_loss) = (f, l);
        }
    }
    best * 1e3
}

/// The front-end time of each engine fitted on the rows of `base` ((row, simulated TTFT without a front end, ms))
/// that `train` keeps: one fold of `split` holding `held_out` out.
pub(super) fn fit_fold(
    base: &[(&Ready, f64)],
    split: &'static str,
    held_out: &str,
    train: &dyn Fn(&Ready) -> bool,
) -> FoldConstants {
    let of = |e: Engine| {
        let rows: Vec<(f64, f64)> =
            base.iter().filter(|(r, _)| r.row.engine == e && train(r)).map(|(r, t)| (*t, r.row.ttft_ms)).collect();
        fit_request_us(&rows)
    };
    FoldConstants {
        split,
        held_out: held_out.to_string(),
        vllm_request_us: of(Engine::Vllm),
        sglang_request_us: of(Engine::Sglang),
        trtllm_request_us: of(Engine::Trtllm),
    }
}

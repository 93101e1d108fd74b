//! The steady-state solver's operator-time table: a solver handed another configuration's table answers as a fresh
//! one and asks the backend nothing the table holds.

use serde_json::json;

use super::tests::{backend, llama70b, system};
use super::*;
use crate::hw::System;

/// A backend that counts the operators it is asked to time.
struct Counting<'b> {
    inner: &'b dyn crate::cost::CostBackend,
    calls: std::sync::atomic::AtomicU64,
}

impl<'b> Counting<'b> {
    fn new(inner: &'b dyn crate::cost::CostBackend) -> Counting<'b> {
        Counting { inner, calls: 0.into() }
    }

    fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl crate::cost::CostBackend for Counting<'_> {
    fn system(&self) -> &System {
        self.inner.system()
    }

    fn compute(
        &self,
        op: &crate::op::OpShape,
        dtype: crate::hw::Precision,
    ) -> Result<crate::cost::Timed, crate::cost::roofline::UnsupportedPrecision> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.compute(op, dtype)
    }

    fn collective(
        &self,
        c: crate::op::Collective,
        bytes: f64,
        group: crate::comm::Group,
        active: u32,
    ) -> crate::cost::Timed {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.collective(c, bytes, group, active)
    }

    fn efficiency(&self) -> Option<crate::cost::Efficiency> {
        self.inner.efficiency()
    }
}

#[test]
fn a_solver_on_shared_operator_times_answers_as_a_fresh_one_without_asking_the_backend_again() {
    // Operator times depend on the operator's work, not on the configuration: a solver of another configuration
    // handed the first one's table steps exactly as a fresh solver does, and asks the backend nothing for the
    // operators the table holds.
    let s = system("dgx-h100");
    let b = backend(&s);
    let consts = ServingConstants::CALIBRATED;
    let a_cfg =
        validate(&llama70b(4, json!({"input_tokens": 1024, "output_tokens": 256, "concurrency": 32})), &s).unwrap();
    let b_cfg =
        validate(&llama70b(4, json!({"input_tokens": 2048, "output_tokens": 128, "concurrency": 8})), &s).unwrap();
    let loads = [
        step::StepLoad {
            decode_seqs: 32,
            decode_context: 1152,
            prefill_tokens: 0,
            prompt_len: 1024,
            sampled: 32,
            graph_pad_tokens: 0,
            draft_tokens: 0,
        },
        step::StepLoad {
            decode_seqs: 31,
            decode_context: 1152,
            prefill_tokens: 1024,
            prompt_len: 1024,
            sampled: 32,
            graph_pad_tokens: 0,
            draft_tokens: 0,
        },
        step::StepLoad {
            decode_seqs: 1,
            decode_context: 1100,
            prefill_tokens: 0,
            prompt_len: 1024,
            sampled: 1,
            graph_pad_tokens: 0,
            draft_tokens: 0,
        },
        step::StepLoad {
            decode_seqs: 0,
            decode_context: 0,
            prefill_tokens: 8192,
            prompt_len: 1024,
            sampled: 8,
            graph_pad_tokens: 0,
            draft_tokens: 0,
        },
    ];
    let first = Counting::new(&b);
    let mut a = steady::Solver::new(&a_cfg, &first, consts, 1000);
    for l in loads {
        a.step(l).unwrap();
    }
    assert!(first.calls() > 0);
    let table = a.into_op_times();
    assert!(!table.is_empty());
    // A fresh solver of the second configuration, and one on the first's table (the same backend).
    let fresh_backend = Counting::new(&b);
    let mut fresh = steady::Solver::new(&b_cfg, &fresh_backend, consts, 1000);
    let mut shared = steady::Solver::with_op_times(&b_cfg, &first, consts, 1000, table);
    let before = first.calls();
    for l in loads {
        assert_eq!(shared.step(l).unwrap(), fresh.step(l).unwrap(), "{l:?}");
    }
    assert!(fresh_backend.calls() > 0);
    assert_eq!(first.calls(), before, "every operator came from the table");
    // Handed to a solver over another backend, the table is emptied: that backend is asked for every operator.
    let other_backend = Counting::new(&b);
    let mut other = steady::Solver::with_op_times(&b_cfg, &other_backend, consts, 1000, shared.into_op_times());
    for l in loads {
        assert_eq!(other.step(l).unwrap(), fresh.step(l).unwrap(), "{l:?}");
    }
    assert_eq!(other_backend.calls(), fresh_backend.calls());
}

#[test]
fn the_running_limit_counts_every_attention_rank() {
    // Mixtral-8x7B on 4 H100s, SGLang with data-parallel attention over the 4 GPUs and max_num_seqs 16 per rank
    // (SGLang's `--max-running-requests 64` split over dp_size 4, `ModelRunner`: max_running_requests // dp_size).
    // Neither the KV cache (0.88 · 80 GiB less 24 GiB of weights and ~3 GiB of workspace ≈ 47·10⁹ B at 131,072 B
    // per token per rank: ~360,000 tokens, ~560 requests of 640 tokens per rank) nor the token budget (4 · 8192)
    // binds: the instance runs 16 · 4 = 64, as the simulation's instance does (before: 16, one rank's); 100
    // clients leave 100 − 64 = 36 queued.
    let req: InferenceRequest = serde_json::from_value(json!({"system": "dgx-h100", "model": "Mixtral-8x7B",
        "engine": "sglang", "parallelism": {"tp": 4, "ep": 4, "dp_attention": true},
        "engine_options": {"max_num_seqs": 16},
        "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 100}}))
    .unwrap();
    let s = system("dgx-h100");
    let cfg = validate(&req, &s).unwrap();
    let p = predict(&cfg, &backend(&s), ServingConstants::CALIBRATED).unwrap();
    assert_eq!(p.batch.capacity, 64);
    assert!((p.batch.queued - 36.0).abs() < 1e-9, "{}", p.batch.queued);
}

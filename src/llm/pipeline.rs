//! The general pipeline-schedule simulation: Megatron-LM's 1F1B and interleaved 1F1B schedules (Narayanan et al.
//! 2021, §2.2) executed operation by operation with every stage's own forward and backward times, followed by the
//! data-parallel gradient reduction (optionally overlapped with the backward pass) and the optimizer update.
//!
//! Each stage runs its schedule's operations in order; an operation starts when the stage is free and its input
//! is ready (the previous virtual stage's forward of that micro-batch, the next one's backward). The pipeline
//! send is part of the sender's operation, as in S1. With every stage taking the same times (S1's assumption that
//! the slowest stage paces the pipeline) and only the first stage's gradient reduction exposed, the simulation
//! gives S1 eq. 7 exactly: `(m − 1 + pp)·(F + B) + sync + update` (tested in `predict_tests`).

/// One micro-batch's forward and backward time of every model chunk, seconds, indexed `stage · v + chunk`
/// (chunk c of stage s is virtual stage c·pp + s), and the overlaps that change the schedule.
#[derive(Debug, Clone, Copy)]
pub struct PipelineSpec<'a> {
    pub pp: u32,
    /// Model chunks per stage (1 = plain 1F1B).
    pub v: u32,
    /// Micro-batches per step.
    pub m: u32,
    pub fwd_s: &'a [f64],
    pub bwd_s: &'a [f64],
    /// Overlapped pipeline sends (Megatron-Core's `overlap_p2p_comm`), indexed like `fwd_s`: a chunk's forward
    /// output reaches the next virtual stage this long after its pass ends (the pass itself does not include the
    /// send). Empty: the sends are part of the sender's pass (S1).
    pub lag_fwd_s: &'a [f64],
    /// The same for the backward sends to the previous virtual stage.
    pub lag_bwd_s: &'a [f64],
    /// Every stage's tail; a stage whose [`StageTail::param_gather_s`] is positive all-gathers its parameters
    /// ahead of its first forward (Megatron-Core's `overlap_param_gather`). Empty: no prefetch.
    pub tails: &'a [StageTail],
    /// The prefetching all-gathers of every stage start at the step's start (Megatron-Core's
    /// `align_param_gather`), not at the stage's first forward.
    pub align_gather: bool,
}

impl<'a> PipelineSpec<'a> {
    /// A pipeline without overlapped sends or parameter prefetch.
    pub fn new(pp: u32, v: u32, m: u32, fwd_s: &'a [f64], bwd_s: &'a [f64]) -> PipelineSpec<'a> {
        PipelineSpec { pp, v, m, fwd_s, bwd_s, lag_fwd_s: &[], lag_bwd_s: &[], tails: &[], align_gather: false }
    }
}

/// The first forward of a stage whose parameters are all-gathered ahead of it in `buckets` buckets taking `gather`
/// seconds together, dispatched at `dispatch` (Megatron-Core: finishing bucket i's gather dispatches bucket
/// i + 1's, the forward of bucket i's layers waits for it): the computation of `compute` seconds starts when it is
/// free (`free`) and the first bucket is in, and cannot end before the last bucket is in plus the computation of
/// its layers, compute/buckets. The gather's time beside the computation slows it by `kappa` × that time
/// (contention). Returns (start, end) of the computation.
pub fn prefetched_forward(free: f64, dispatch: f64, gather: f64, buckets: u32, compute: f64, kappa: f64) -> (f64, f64) {
    let b = buckets.max(1) as f64;
    let start = free.max(dispatch + gather / b);
    let end = (start + compute).max(dispatch + gather + compute / b);
    let beside = ((dispatch + gather).min(end) - start).max(0.0);
    (start, end + kappa * beside)
}

/// The simulated pipeline of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Simulated {
    /// Time from the first forward to the last backward, s.
    pub makespan_s: f64,
    /// When each stage finishes its last backward, s.
    pub stage_end_s: Vec<f64>,
}

/// One operation as the simulation placed it: a forward or backward pass of one model chunk of one stage for one
/// micro-batch (the pipeline send included, as in S1), with its start and end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placed {
    /// Pipeline stage, 0-based.
    pub stage: u32,
    /// Model chunk of the stage, 0-based (virtual stage chunk·pp + stage).
    pub chunk: u32,
    /// Micro-batch, 0-based.
    pub micro: u32,
    /// Forward (true) or backward pass.
    pub fwd: bool,
    /// When the operation starts, s from the step's start.
    pub start_s: f64,
    /// When it ends, s.
    pub end_s: f64,
}

/// One scheduled operation: forward or backward of (chunk, micro-batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    fwd: bool,
    chunk: u32,
    micro: u32,
}

/// The k-th operation of stage `s` under Megatron-LM's schedule (`forward_backward_pipelining_without_interleaving`
/// for v = 1, `…_with_interleaving` otherwise): `warmup` forwards, then alternating forward/backward, then the
/// remaining backwards. Interleaved warm-up: 2·(pp − s − 1) + (v − 1)·pp forwards (all of them when m = pp);
/// the k-th forward is chunk ⌊(k mod pp·v)/pp⌋ of micro-batch ⌊k/(pp·v)⌋·pp + k mod pp, backwards run the chunks
/// in reverse.
fn step(pp: u32, v: u32, m: u32, s: u32, k: u32) -> Step {
    let total = m * v;
    let warmup = warmup(pp, v, m, s);
    let (fwd, idx) = if k < warmup {
        (true, k)
    } else if k < 2 * total - warmup {
        let i = k - warmup;
        if i % 2 == 0 {
            (true, warmup + i / 2)
        } else {
            (false, i / 2)
        }
    } else {
        (false, k - total)
    };
    let group = pp * v;
    let in_group = idx % group;
    let chunk = if fwd { in_group / pp } else { v - 1 - in_group / pp };
    Step { fwd, chunk, micro: (idx / group) * pp + in_group % pp }
}

fn warmup(pp: u32, v: u32, m: u32, s: u32) -> u32 {
    let total = m * v;
    if v == 1 {
        (pp - s - 1).min(m)
    } else if m == pp {
        total
    } else {
        (2 * (pp - s - 1) + (v - 1) * pp).min(total)
    }
}

/// Simulates one step's pipeline. Returns `None` only for an inconsistent spec (slices shorter than pp·v, or an
/// interleaved schedule whose micro-batches are not a multiple of pp — rejected by validation).
pub fn simulate(spec: &PipelineSpec) -> Option<Simulated> {
    simulate_placing(spec, None)
}

/// [`simulate`], also appending every operation as it is placed to `placed` when given (in placement order: by
/// stage within a sweep, not sorted by time). Without a sink it allocates nothing more than [`simulate`]: the
/// search's hot path calls it that way.
pub fn simulate_placing(spec: &PipelineSpec, mut placed: Option<&mut Vec<Placed>>) -> Option<Simulated> {
    let (pp, v, m) = (spec.pp.max(1), spec.v.max(1), spec.m.max(1));
    let chunks = (pp * v) as usize;
    if spec.fwd_s.len() < chunks || spec.bwd_s.len() < chunks || (v > 1 && m % pp != 0) {
        return None;
    }
    let n_ops = 2 * m * v;
    // Completion times per (virtual stage, micro-batch); NaN = not yet.
    let idx = |vs: u32, j: u32| (vs * m + j) as usize;
    let mut f_end = vec![f64::NAN; chunks * m as usize];
    let mut b_end = vec![f64::NAN; chunks * m as usize];
    let mut next = vec![0u32; pp as usize];
    let mut clock = vec![0.0f64; pp as usize];
    let last_vs = pp * v - 1;
    let mut remaining = pp as u64 * n_ops as u64;
    while remaining > 0 {
        let mut progressed = false;
        for s in 0..pp {
            while next[s as usize] < n_ops {
                let st = step(pp, v, m, s, next[s as usize]);
                let vs = st.chunk * pp + s;
                // The chunk (index stage · v + chunk) of virtual stage `vs`.
                let chunk_of = |vs: u32| ((vs % pp) * v + vs / pp) as usize;
                let lag = |lags: &[f64], vs: u32| lags.get(chunk_of(vs)).copied().unwrap_or(0.0);
                let ready = if st.fwd {
                    if vs == 0 {
                        0.0
                    } else {
                        f_end[idx(vs - 1, st.micro)] + lag(spec.lag_fwd_s, vs - 1)
                    }
                } else if vs == last_vs {
                    f_end[idx(vs, st.micro)]
                } else {
                    b_end[idx(vs + 1, st.micro)] + lag(spec.lag_bwd_s, vs + 1)
                };
                if ready.is_nan() {
                    break;
                }
                let c = (s * v + st.chunk) as usize;
                let dur = if st.fwd { spec.fwd_s[c] } else { spec.bwd_s[c] };
                let free = clock[s as usize].max(ready);
                let (start, end) = match spec.tails.get(s as usize) {
                    Some(t) if next[s as usize] == 0 && t.param_gather_s > 0.0 => {
                        let dispatch = if spec.align_gather { 0.0 } else { free };
                        prefetched_forward(free, dispatch, t.param_gather_s, t.buckets, dur, t.contention)
                    }
                    _ => (free, free + dur),
                };
                clock[s as usize] = end;
                if let Some(sink) = placed.as_deref_mut() {
                    sink.push(Placed {
                        stage: s,
                        chunk: st.chunk,
                        micro: st.micro,
                        fwd: st.fwd,
                        start_s: start,
                        end_s: end,
                    });
                }
                if st.fwd {
                    f_end[idx(vs, st.micro)] = end;
                } else {
                    b_end[idx(vs, st.micro)] = end;
                }
                next[s as usize] += 1;
                remaining -= 1;
                progressed = true;
            }
        }
        if !progressed {
            return None;
        }
    }
    let makespan_s = clock.iter().copied().fold(0.0, f64::max);
    Some(Simulated { makespan_s, stage_end_s: clock })
}

/// A lower bound of [`simulate`]'s makespan in O(pp·v): stage s cannot start before the forwards of chunk 0 on
/// the stages before it, then does m micro-batches of all its chunks' forward and backward work, and its last
/// backward (chunk 0 of micro-batch m) must still pass back through those stages:
/// max over s of Σ_{k<s} F(k, 0) + m·Σ_c (F(s, c) + B(s, c)) + Σ_{k<s} B(k, 0).
pub fn makespan_lower_bound(spec: &PipelineSpec) -> f64 {
    let (pp, v, m) = (spec.pp.max(1) as usize, spec.v.max(1) as usize, spec.m.max(1) as f64);
    let (mut before_f, mut before_b, mut best) = (0.0, 0.0, 0.0f64);
    for s in 0..pp {
        let work: f64 = (0..v).map(|c| spec.fwd_s[s * v + c] + spec.bwd_s[s * v + c]).sum();
        best = best.max(before_f + m * work + before_b);
        before_f += spec.fwd_s[s * v];
        before_b += spec.bwd_s[s * v];
    }
    best
}

/// What follows a stage's last backward: its gradient reduction and the optimizer update (and, with
/// `overlap_param_gather`, what precedes its first forward: the parameter all-gather).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StageTail {
    /// Data-parallel gradient reduction of the stage's gradients after its last backward (0 when gradients are
    /// reduced per micro-batch, ZeRO ≥ 2), s.
    pub grad_sync_s: f64,
    /// Backward time of the stage's last micro-batch (all chunks) that an overlapped reduction can hide behind, s.
    pub overlap_window_s: f64,
    /// Buckets of the gradient reduction and of the parameter all-gather (Megatron-Core reduces and gathers
    /// bucket by bucket; the last reduction and the first gather cannot overlap; one on stages after the first).
    pub buckets: u32,
    /// Communication after the reduction and before the update (tied-embedding gradient all-reduce), s.
    pub after_sync_s: f64,
    /// Optimizer step, plus the parameter all-gather unless it is prefetched, s.
    pub update_s: f64,
    /// The parameter all-gather prefetched ahead of the next iteration's first forward (`overlap_param_gather`;
    /// 0 otherwise), s.
    pub param_gather_s: f64,
    /// Contention κ of overlapped communication (the hidden reduction slows the backward it hides behind).
    pub contention: f64,
}

impl StageTail {
    /// The reduction time not hidden behind the backward pass: all of it without overlap; with Megatron-Core's
    /// `overlap_grad_reduce` what outlasts the last micro-batch's backward, at least the last bucket, plus the
    /// contention κ × the hidden part.
    pub fn exposed_sync_s(&self, overlap: bool) -> f64 {
        if !overlap || self.grad_sync_s == 0.0 {
            self.grad_sync_s
        } else {
            let g = self.grad_sync_s;
            let exposed = (g - self.overlap_window_s).max(g / self.buckets.max(1) as f64);
            exposed + self.contention * (g - exposed)
        }
    }
}

/// The step: pipeline, exposed gradient reduction, update.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTime {
    /// The pipeline's makespan, s.
    pub pipeline_s: f64,
    /// How long the gradient reductions outlast the pipeline (the latest stage's, counted from the makespan), s.
    pub exposed_grad_sync_s: f64,
    /// The slowest stage's update (all stages wait for the global gradient norm before stepping), s.
    pub update_s: f64,
}

impl StepTime {
    /// pipeline + exposed reduction + update, s.
    pub fn iteration_s(&self) -> f64 {
        self.pipeline_s + self.exposed_grad_sync_s + self.update_s
    }
}

/// Composes a simulated pipeline with the stages' tails: every stage reduces its gradients after its own last
/// backward (so the later stages' reductions hide behind the first stage's drain, S1's observation), then all
/// stages update together.
pub fn step_time(sim: &Simulated, tails: &[StageTail], overlap: bool) -> StepTime {
    let done = sim
        .stage_end_s
        .iter()
        .zip(tails)
        .map(|(end, t)| end + t.exposed_sync_s(overlap) + t.after_sync_s)
        .fold(sim.makespan_s, f64::max);
    StepTime {
        pipeline_s: sim.makespan_s,
        exposed_grad_sync_s: done - sim.makespan_s,
        update_s: tails.iter().map(|t| t.update_s).fold(0.0, f64::max),
    }
}

/// A lower bound of [`step_time`]'s iteration for a pipeline whose makespan is at least `makespan_lb`: stage 0
/// finishes last, so its exposed reduction always follows the makespan.
pub fn step_lower_bound(makespan_lb: f64, tails: &[StageTail], overlap: bool) -> f64 {
    let first = tails.first().map(|t| t.exposed_sync_s(overlap) + t.after_sync_s).unwrap_or(0.0);
    makespan_lb + first + tails.iter().map(|t| t.update_s).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(pp: u32, v: u32, m: u32, f: &[f64], b: &[f64]) -> Simulated {
        simulate(&PipelineSpec::new(pp, v, m, f, b)).unwrap()
    }

    #[test]
    fn one_f_one_b_with_equal_stages_is_m_plus_pp_minus_one_slots() {
        // (m + pp − 1)·(F + B): pp 4, m 8, F 1, B 2 → 11 · 3 = 33.
        let s = sim(4, 1, 8, &[1.0; 4], &[2.0; 4]);
        assert_eq!(s.makespan_s, 33.0);
        // Stage s finishes s backward slots before stage 0: 33 − 2s.
        assert_eq!(s.stage_end_s, vec![33.0, 31.0, 29.0, 27.0]);
        // Fewer micro-batches than stages: m 2, pp 4 → (2 + 3)·3 = 15.
        assert_eq!(sim(4, 1, 2, &[1.0; 4], &[2.0; 4]).makespan_s, 15.0);
    }

    #[test]
    fn placed_operations_match_the_simulation() {
        // The slow-last-stage case of `unequal_stages_by_hand`: s1 F1 [1,4] B1 [4,10] F2 [10,13] B2 [13,19].
        let (f, b) = ([1.0, 3.0], [2.0, 6.0]);
        let spec = PipelineSpec::new(2, 1, 2, &f, &b);
        let mut placed = Vec::new();
        let s = simulate_placing(&spec, Some(&mut placed)).unwrap();
        assert_eq!(s, simulate(&spec).unwrap());
        assert_eq!(placed.len(), 2 * 2 * 2);
        let mut s1: Vec<(bool, u32, f64, f64)> =
            placed.iter().filter(|p| p.stage == 1).map(|p| (p.fwd, p.micro, p.start_s, p.end_s)).collect();
        s1.sort_by(|a, b| a.2.total_cmp(&b.2));
        assert_eq!(s1, vec![(true, 0, 1.0, 4.0), (false, 0, 4.0, 10.0), (true, 1, 10.0, 13.0), (false, 1, 13.0, 19.0)]);
        // Every stage's last operation ends at its end time.
        for st in 0..2 {
            let last = placed.iter().filter(|p| p.stage == st).map(|p| p.end_s).fold(0.0, f64::max);
            assert_eq!(last, s.stage_end_s[st as usize]);
        }
    }

    #[test]
    fn unequal_stages_by_hand() {
        // pp 2, m 2. Slow last stage (F, B) = (3, 6), fast first (1, 2):
        // s0 F1 [0,1] F2 [1,2]; s1 F1 [1,4] B1 [4,10] F2 [10,13] B2 [13,19]; s0 B1 [10,12] B2 [19,21] → 21.
        assert_eq!(sim(2, 1, 2, &[1.0, 3.0], &[2.0, 6.0]).makespan_s, 21.0);
        // Slow first stage: s0 F1 [0,3] F2 [3,6]; s1 F1 [3,4] B1 [4,6]; s0 B1 [6,12]; s1 F2 [6,7] B2 [7,9];
        // s0 B2 [12,18] → 18 (S1's eq. 7 would say (2 − 1 + 2)·(3 + 6) = 27).
        let s = sim(2, 1, 2, &[3.0, 1.0], &[6.0, 2.0]);
        assert_eq!((s.makespan_s, s.stage_end_s[1]), (18.0, 9.0));
    }

    #[test]
    fn interleaving_divides_the_bubble_by_the_chunks() {
        // Equal chunks f = F/v, b = B/v: makespan (m·v + pp − 1)·(f + b) = m(F + B) + (pp − 1)(F + B)/v.
        for (pp, m) in [(2u32, 4u32), (4, 8), (4, 4), (8, 16)] {
            for v in [1u32, 2, 3, 4] {
                let (f, b) = (1.0 / v as f64, 2.0 / v as f64);
                let n = (pp * v) as usize;
                let s = sim(pp, v, m, &vec![f; n], &vec![b; n]);
                let expected = (m * v + pp - 1) as f64 * (f + b);
                assert!((s.makespan_s - expected).abs() < 1e-9, "pp {pp} m {m} v {v}: {} vs {expected}", s.makespan_s);
            }
        }
        // More chunks, smaller bubble: pp 4, m 8, F 1, B 2 → 33 (v 1), 28.5 (v 2), 27 (v 3)... ideal 24.
        let t = |v: u32| {
            let n = (4 * v) as usize;
            sim(4, v, 8, &vec![1.0 / v as f64; n], &vec![2.0 / v as f64; n]).makespan_s
        };
        assert!(t(1) > t(2) && t(2) > t(4) && t(4) > 24.0);
    }

    #[test]
    fn lower_bound_never_exceeds_the_simulation() {
        // Deterministic pseudo-random stage times (LCG), several shapes.
        let mut x = 12345u64;
        let mut rnd = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            0.5 + (x >> 33) as f64 / (1u64 << 31) as f64
        };
        for (pp, v, m) in [(2, 1, 3), (4, 1, 8), (4, 2, 8), (3, 3, 6), (8, 1, 4), (8, 2, 16)] {
            for _ in 0..20 {
                let n = (pp * v) as usize;
                let f: Vec<f64> = (0..n).map(|_| rnd()).collect();
                let b: Vec<f64> = f.iter().map(|x| 2.0 * x * (0.8 + 0.4 * (x - 0.5))).collect();
                let spec = PipelineSpec::new(pp, v, m, &f, &b);
                let s = simulate(&spec).unwrap();
                assert!(makespan_lower_bound(&spec) <= s.makespan_s + 1e-9);
                // Every stage's own work fits in the makespan.
                for st in 0..pp as usize {
                    let work: f64 = (0..v as usize).map(|c| f[st * v as usize + c] + b[st * v as usize + c]).sum();
                    assert!(s.stage_end_s[st] >= m as f64 * work - 1e-9);
                }
            }
        }
    }

    #[test]
    fn gradient_reduction_overlap_and_tails() {
        let sim = Simulated { makespan_s: 100.0, stage_end_s: vec![100.0, 95.0] };
        let tails = [
            StageTail { grad_sync_s: 10.0, overlap_window_s: 6.0, buckets: 5, update_s: 3.0, ..StageTail::default() },
            StageTail { grad_sync_s: 20.0, overlap_window_s: 6.0, buckets: 4, update_s: 4.0, ..StageTail::default() },
        ];
        // Without overlap: stage 1 ends 95 + 20 = 115 > 100 + 10 → exposed 15, update 4 → 119.
        let t = step_time(&sim, &tails, false);
        assert_eq!((t.exposed_grad_sync_s, t.update_s, t.iteration_s()), (15.0, 4.0, 119.0));
        // Overlapped: stage 0 max(10 − 6, 10/5) = 4 → 104; stage 1 max(20 − 6, 5) = 14 → 109 → exposed 9.
        let t = step_time(&sim, &tails, true);
        assert_eq!(t.iteration_s(), 113.0);
        // A short reduction still exposes its last bucket.
        let short = StageTail { grad_sync_s: 1.0, overlap_window_s: 6.0, buckets: 4, ..StageTail::default() };
        assert_eq!(short.exposed_sync_s(true), 0.25);
        assert!(step_lower_bound(100.0, &tails, true) <= t.iteration_s());
    }
}

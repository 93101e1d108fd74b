//! The timeline of one training iteration as the schedule placed it: every pipeline stage's forward, backward and
//! recomputed passes per micro-batch, its pipeline sends, tensor-/context-parallel and data-parallel collectives
//! and its optimizer step, each on its own lane, built from the four prediction stages' outputs (no new model:
//! the spans add up to the predicted iteration time). [`chrome`] renders it in the Trace Event Format (Perfetto,
//! chrome://tracing), [`svg`] as a Gantt chart.
//!
//! Where the passes go: the same 1F1B / interleaved simulation as [`super::schedule`] ([`simulate_placing`]);
//! for S1's pipeline (eq. 7) every stage runs in slots of the slowest stage's forward and backward (S1's
//! assumption), which gives eq. 7's pipeline time exactly. Inside a pass (the model charges its parts one after
//! the other on the stage): the exposed part of a ZeRO-3 parameter all-gather, the recomputed forward (backward
//! only), the computation, the pass's tensor-parallel collectives (shown as one span after the computation: in
//! reality they interleave layer by layer; the total is what the model charges), the exposed part of the ZeRO ≥ 2
//! gradient reduce-scatter and the pipeline send. ZeRO collectives are drawn for their full time, overlapping the
//! pass where the model overlaps them. After a stage's last backward: its gradient reduction (overlapped with
//! that backward under `overlap_grad_reduce`, after it otherwise), the tied-embedding gradient all-reduce, then
//! every stage's optimizer step and parameter all-gather, all starting together (they wait for the global
//! gradient norm).
//!
//! Overlapped communication shows on its own lane beside the computation it hides behind: Transformer Engine's
//! TP overlap (`tp_comm_overlap`) and the context-parallel ring end with the pass's exposed part and start their
//! full time earlier, inside the computation; overlapped pipeline sends (`overlap_p2p_comm`) start when their
//! pass ends and run beside the next one; a prefetched parameter all-gather (`overlap_param_gather`) runs on the
//! data-parallel lane before and beside the stage's first forward (from the step's start with
//! `align_param_gather`), and the optimizer lane then holds the optimizer step only.

pub mod chrome;
pub mod svg;

use serde::Serialize;

use super::config::{ConfigError, TrainingConfig};
use super::decompose::Decomposition;
use super::operators::{OpName, StageOp, Work};
use super::pipeline::{simulate_placing, PipelineSpec, Placed, StageTail};
use super::schedule::pipeline_spec;
use super::schedule::Step;
use super::timing::{pass_seconds, TimedOp, TimedTraining};
use crate::op::Phase;

/// How a timeline is rendered: `chrome` (the default: Trace Event Format JSON, [`chrome`]) or `svg` (a Gantt
/// chart, [`svg`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    #[default]
    Chrome,
    Svg,
}

impl TraceFormat {
    /// The format named `s` (`chrome` or `svg`, lower case), `None` for any other.
    pub fn parse(s: &str) -> Option<TraceFormat> {
        match s {
            "chrome" => Some(TraceFormat::Chrome),
            "svg" => Some(TraceFormat::Svg),
            _ => None,
        }
    }

    /// Its media type: `application/json` or `image/svg+xml`.
    pub fn content_type(self) -> &'static str {
        match self {
            TraceFormat::Chrome => "application/json",
            TraceFormat::Svg => "image/svg+xml",
        }
    }
}

/// The stream of a stage a span runs on (one thread per lane in the Chrome trace, one row in the SVG).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// Forward, backward and recomputed passes.
    Compute,
    /// Pipeline sends of activations and gradients.
    PipelineSend,
    /// Tensor- and context-parallel collectives.
    TpCollectives,
    /// Expert parallelism's dispatch and combine (all-to-alls, or the allgather dispatcher's gathers).
    EpAllToAll,
    /// Data-parallel collectives: the gradient reduction, ZeRO's per-micro-batch collectives, the tied-embedding
    /// gradient all-reduce.
    DpCollectives,
    /// The optimizer step and the parameter all-gather after it.
    Optimizer,
}

impl Lane {
    /// Every lane, in display order.
    pub const ALL: [Lane; 6] = [
        Lane::Compute,
        Lane::PipelineSend,
        Lane::TpCollectives,
        Lane::EpAllToAll,
        Lane::DpCollectives,
        Lane::Optimizer,
    ];

    /// Its display name.
    pub fn name(self) -> &'static str {
        match self {
            Lane::Compute => "compute",
            Lane::PipelineSend => "pipeline send",
            Lane::TpCollectives => "tp/cp collectives",
            Lane::EpAllToAll => "ep all-to-all",
            Lane::DpCollectives => "dp collectives",
            Lane::Optimizer => "optimizer",
        }
    }
}

/// What a span is (its colour in the SVG, its category in the Chrome trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanKind {
    Forward,
    Backward,
    /// The forward recomputed during the backward pass (activation recomputation).
    Recompute,
    /// A pass's tensor- and context-parallel collectives.
    TpCollective,
    /// A pass's expert-parallel dispatch and combine.
    EpAllToAll,
    /// A pipeline send.
    Send,
    /// ZeRO ≥ 2's per-micro-batch reduce-scatter and ZeRO-3's parameter all-gathers.
    ZeroCollective,
    /// The data-parallel gradient reduction after the stage's last backward.
    GradReduce,
    /// The tied-embedding gradient all-reduce between the first and the last stage.
    EmbeddingGrad,
    /// The fused Adam step.
    Optimizer,
    /// The parameter all-gather after the update (ZeRO-1/2, distributed optimizer).
    ParamGather,
}

impl SpanKind {
    /// Every kind, in legend order.
    pub const ALL: [SpanKind; 11] = [
        SpanKind::Forward,
        SpanKind::Backward,
        SpanKind::Recompute,
        SpanKind::TpCollective,
        SpanKind::EpAllToAll,
        SpanKind::Send,
        SpanKind::ZeroCollective,
        SpanKind::GradReduce,
        SpanKind::EmbeddingGrad,
        SpanKind::Optimizer,
        SpanKind::ParamGather,
    ];

    /// Its legend label.
    pub fn label(self) -> &'static str {
        match self {
            SpanKind::Forward => "forward",
            SpanKind::Backward => "backward",
            SpanKind::Recompute => "recompute",
            SpanKind::TpCollective => "tp/cp collectives",
            SpanKind::EpAllToAll => "ep all-to-all",
            SpanKind::Send => "pipeline send",
            SpanKind::ZeroCollective => "ZeRO collectives",
            SpanKind::GradReduce => "gradient reduction",
            SpanKind::EmbeddingGrad => "embedding grad all-reduce",
            SpanKind::Optimizer => "optimizer step",
            SpanKind::ParamGather => "parameter all-gather",
        }
    }
}

/// One span of work on one lane of one stage.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub lane: Lane,
    pub kind: SpanKind,
    /// Model chunk of the stage (passes and their collectives; `None` for the step's tail).
    pub chunk: Option<u32>,
    /// Micro-batch (passes and their collectives).
    pub micro: Option<u32>,
    /// Start, s from the iteration's start.
    pub start_s: f64,
    /// End, s.
    pub end_s: f64,
}

impl Span {
    /// Its display name: `F mb3` (`F c1 mb3` with interleaving), `gradient reduction`, ….
    pub fn name(&self, chunks: u32) -> String {
        let pass = match self.kind {
            SpanKind::Forward => "F",
            SpanKind::Backward => "B",
            SpanKind::Recompute => "R",
            SpanKind::TpCollective => "TP",
            SpanKind::EpAllToAll => "EP",
            SpanKind::Send => "send",
            SpanKind::ZeroCollective => "ZeRO",
            k => return k.label().to_string(),
        };
        match (self.chunk, self.micro) {
            (Some(c), Some(m)) if chunks > 1 => format!("{pass} c{c} mb{m}"),
            (_, Some(m)) => format!("{pass} mb{m}"),
            _ => pass.to_string(),
        }
    }
}

/// One stage's spans.
#[derive(Debug, Clone, PartialEq)]
pub struct StageTrace {
    /// Stage index, 0-based.
    pub stage: u32,
    /// Its spans, ordered by lane, then start.
    pub spans: Vec<Span>,
}

/// The timeline of one training iteration.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// The schedule model the timeline comes from: `eq7` or `simulated`.
    pub model: &'static str,
    /// The predicted iteration time, s: the last span's end (the first starts at 0).
    pub iteration_s: f64,
    /// Model chunks per stage (1 without interleaving).
    pub chunks: u32,
    /// Micro-batches per step.
    pub micro_batches: u32,
    /// Every pipeline stage, in order.
    pub stages: Vec<StageTrace>,
}

impl Trace {
    /// The first span's start and the last span's end, s ((0, 0) when empty).
    pub fn extent_s(&self) -> (f64, f64) {
        let spans = || self.stages.iter().flat_map(|s| &s.spans);
        let start = spans().map(|s| s.start_s).fold(f64::INFINITY, f64::min);
        let end = spans().map(|s| s.end_s).fold(0.0, f64::max);
        (if start.is_finite() { start } else { 0.0 }, end)
    }
}

/// One pass's (forward or backward, per micro-batch) total, tensor-parallel and recomputed seconds of a list of
/// operators.
#[derive(Debug, Clone, Copy, Default)]
struct PassParts {
    total_s: f64,
    /// The charged time of the pass's collectives (their exposed part and contention where they overlap).
    tp_s: f64,
    /// Their full time.
    tp_full_s: f64,
    /// The charged time of the pass's expert-parallel dispatch and combine.
    ep_s: f64,
    /// Their full time.
    ep_full_s: f64,
    recompute_s: f64,
}

impl PassParts {
    fn add(self, o: PassParts, n: f64) -> PassParts {
        PassParts {
            total_s: self.total_s + n * o.total_s,
            tp_s: self.tp_s + n * o.tp_s,
            tp_full_s: self.tp_full_s + n * o.tp_full_s,
            ep_s: self.ep_s + n * o.ep_s,
            ep_full_s: self.ep_full_s + n * o.ep_full_s,
            recompute_s: self.recompute_s + n * o.recompute_s,
        }
    }
}

/// The forward and backward [`PassParts`] of `ops` timed as `timed`: the pass time of [`pass_seconds`], the
/// charged and the full time of its collectives (tensor and context parallelism within a layer) and the charged
/// time of its recomputed compute.
fn parts(ops: &[StageOp], timed: &[TimedOp]) -> [PassParts; 2] {
    let (f, b) = pass_seconds(ops, timed);
    let mut out = [PassParts { total_s: f, ..PassParts::default() }, PassParts { total_s: b, ..PassParts::default() }];
    for (o, t) in ops.iter().zip(timed) {
        let n = o.calls as f64 * 1e-6;
        let p = &mut out[usize::from(o.phase == Phase::Bwd)];
        let ep = matches!(o.name, OpName::EpAllToAll | OpName::EpAllGather | OpName::EpReduceScatter);
        if ep {
            p.ep_s += n * t.charged_us;
            p.ep_full_s += n * t.time.time_us;
        } else if matches!(o.work, Work::Collective { .. }) {
            p.tp_s += n * t.charged_us;
            p.tp_full_s += n * t.time.time_us;
        } else if o.recompute {
            p.recompute_s += n * t.charged_us;
        }
    }
    out
}

fn span(lane: Lane, kind: SpanKind, p: &Placed, start_s: f64, end_s: f64) -> Span {
    Span { lane, kind, chunk: Some(p.chunk), micro: Some(p.micro), start_s, end_s }
}

/// Builds the timeline of `cfg`'s iteration from its decomposition, its times and its schedule (the outputs of
/// [`super::decompose`], [`super::timing`] and [`super::schedule`]).
///
/// Errors: a pipeline the simulation cannot run (field `parallelism`; validation rules it out).
pub fn trace(
    cfg: &TrainingConfig,
    work: &Decomposition,
    timed: &TimedTraining,
    step: &Step,
) -> Result<Trace, ConfigError> {
    let (pp, v, m) = (cfg.pp.max(1), work.v.max(1), cfg.grad_accum.max(1));
    let n = (pp * v) as usize;
    let eq7 = step.timeline.model == "eq7";
    // Eq. 7 paces every stage by the slowest one: slots of Max_Fwd and Max_Bwd.
    let (slot_f, slot_b) = if eq7 {
        (vec![step.components.max_fwd_s; n], vec![step.components.max_bwd_s; n])
    } else {
        (timed.fwd_s.clone(), timed.bwd_s.clone())
    };
    let tails: Vec<StageTail> = timed.stages.iter().map(|s| s.tail).collect();
    let spec = if eq7 {
        PipelineSpec::new(pp, v, m, &slot_f, &slot_b)
    } else {
        pipeline_spec(cfg, &slot_f, &slot_b, &timed.send_fwd_s, &timed.send_bwd_s, &tails)
    };
    let lagged = !spec.lag_fwd_s.is_empty();
    let mut placed = Vec::with_capacity(2 * n * m as usize);
    let sim = simulate_placing(&spec, Some(&mut placed)).ok_or_else(|| ConfigError {
        field: "parallelism".into(),
        message: "the pipeline schedule cannot be simulated".into(),
    })?;
    let layer = parts(&work.layer, &timed.layer);
    let moe_layer = parts(&work.moe_layer, &timed.moe_layer);
    let mtp = parts(&work.mtp, &timed.mtp);
    let embedding = parts(&work.embedding, &timed.embedding);
    let head = parts(&work.head, &timed.head);
    let mut stages: Vec<StageTrace> = (0..pp).map(|stage| StageTrace { stage, spans: Vec::new() }).collect();
    for p in &placed {
        let (s, c) = (p.stage as usize, p.chunk as usize);
        let (Some(cw), Some(ct), Some(out)) = (
            work.stages.get(s).and_then(|st| st.chunks.get(c)),
            timed.stages.get(s).and_then(|st| st.chunks.get(c)),
            stages.get_mut(s),
        ) else {
            continue;
        };
        let phase = usize::from(!p.fwd);
        let moe_n = cw.moe_layers.min(cw.layers);
        let mut core = PassParts::default()
            .add(layer[phase], (cw.layers - moe_n) as f64)
            .add(moe_layer[phase], moe_n as f64)
            .add(mtp[phase], cw.mtp as f64);
        if cw.embedding {
            core = core.add(embedding[phase], 1.0);
        }
        if cw.head {
            core = core.add(head[phase], 1.0);
        }
        let idx = s * v as usize + c;
        let content = if p.fwd { timed.fwd_s[idx] } else { timed.bwd_s[idx] };
        let send = if p.fwd { &ct.send_fwd } else { &ct.send_bwd };
        let send_s = send.as_ref().map_or(0.0, |t| t.time_us * 1e-6);
        // Overlapped sends (`overlap_p2p_comm`) run after the pass, beside the next one.
        let send_charged = if lagged { 0.0 } else { send_s };
        let zero_full = ct.zero.as_ref().map_or(0.0, |(rs, ag)| {
            let ag = ag.as_ref().map_or(0.0, |t| t.time_us * 1e-6);
            if p.fwd {
                ag
            } else {
                rs.time_us * 1e-6 + ag
            }
        });
        let zero_exposed = if zero_full > 0.0 { (content - core.total_s - send_charged).max(0.0) } else { 0.0 };
        let mut t = p.start_s;
        let gather = tails.get(s).filter(|tl| cfg.overlap_param_gather && !eq7 && tl.param_gather_s > 0.0);
        if let (true, Some(tl)) = (p.fwd && p.chunk == 0 && p.micro == 0, gather) {
            // The parameters all-gathered ahead of the stage's first forward, bucket by bucket: the computation
            // starts once the first bucket is in (`pipeline::prefetched_forward`).
            let first = tl.param_gather_s / tl.buckets.max(1) as f64;
            let d = if cfg.align_param_gather { 0.0 } else { p.start_s - first };
            out.spans.push(span(Lane::DpCollectives, SpanKind::ParamGather, p, d, d + tl.param_gather_s));
        }
        if p.fwd && zero_full > 0.0 {
            // ZeRO-3 gathers the chunk's parameters bucket by bucket as the forward runs; the exposed part first.
            out.spans.push(span(Lane::DpCollectives, SpanKind::ZeroCollective, p, t, t + zero_full));
            t += zero_exposed;
        }
        let recompute = if p.fwd { 0.0 } else { core.recompute_s.min(core.total_s) };
        // The computation fills the operation's span (the wait for a prefetched bucket, the contention of
        // overlapped sends) but for what is drawn after it.
        let compute = (p.end_s - p.start_s - zero_exposed - recompute - core.tp_s - core.ep_s - send_charged).max(0.0);
        if recompute > 0.0 {
            out.spans.push(span(Lane::Compute, SpanKind::Recompute, p, t, t + recompute));
            t += recompute;
        }
        let kind = if p.fwd { SpanKind::Forward } else { SpanKind::Backward };
        out.spans.push(span(Lane::Compute, kind, p, t, t + compute));
        t += compute;
        if core.tp_full_s > 0.0 {
            // Overlapped collectives (TE's userbuffers, the context-parallel ring) run beside the computation and
            // end with their exposed part; the others follow it.
            let end = t + core.tp_s;
            out.spans.push(span(
                Lane::TpCollectives,
                SpanKind::TpCollective,
                p,
                (end - core.tp_full_s).max(p.start_s),
                end,
            ));
            t = end;
        }
        if core.ep_full_s > 0.0 {
            // Expert-parallel dispatch and combine: their exposed part after the computation, the rest beside it
            // (shared-expert or 1F1B overlap).
            let end = t + core.ep_s;
            out.spans.push(span(Lane::EpAllToAll, SpanKind::EpAllToAll, p, (end - core.ep_full_s).max(p.start_s), end));
            t = end;
        }
        if !p.fwd && zero_full > 0.0 {
            // The reduce-scatter runs bucket by bucket during the backward; only its excess shows after it.
            let end = t + zero_exposed;
            out.spans.push(span(
                Lane::DpCollectives,
                SpanKind::ZeroCollective,
                p,
                (end - zero_full).max(p.start_s),
                end,
            ));
            t = end;
        }
        if send_s > 0.0 {
            let from = if lagged { p.end_s } else { t };
            out.spans.push(span(Lane::PipelineSend, SpanKind::Send, p, from, from + send_s));
        }
    }
    let update_start = step.timeline.pipeline_s + step.timeline.exposed_grad_sync_s;
    let overlap = cfg.overlap_grad_reduce && !eq7;
    for ((out, ts), end) in stages.iter_mut().zip(&timed.stages).zip(&sim.stage_end_s) {
        let tail = ts.tail;
        let tail_span = |lane, kind, start_s, end_s| Span { lane, kind, chunk: None, micro: None, start_s, end_s };
        let sync_end = end + tail.exposed_sync_s(overlap);
        if tail.grad_sync_s > 0.0 {
            out.spans.push(tail_span(Lane::DpCollectives, SpanKind::GradReduce, sync_end - tail.grad_sync_s, sync_end));
        }
        if tail.after_sync_s > 0.0 {
            let e = sync_end + tail.after_sync_s;
            out.spans.push(tail_span(Lane::DpCollectives, SpanKind::EmbeddingGrad, sync_end, e));
        }
        let opt = ts.optimizer.time_us * 1e-6;
        out.spans.push(tail_span(Lane::Optimizer, SpanKind::Optimizer, update_start, update_start + opt));
        if tail.update_s > opt {
            let e = update_start + tail.update_s;
            out.spans.push(tail_span(Lane::Optimizer, SpanKind::ParamGather, update_start + opt, e));
        }
        out.spans.sort_by(|a, b| a.lane.cmp(&b.lane).then(a.start_s.total_cmp(&b.start_s)));
    }
    Ok(Trace {
        model: step.timeline.model,
        iteration_s: step.timeline.iteration_s(),
        chunks: v,
        micro_batches: m,
        stages,
    })
}

#[cfg(test)]
mod tests;

//! A [`Trace`] in the Trace Event Format (the JSON object form) that Perfetto UI and chrome://tracing open: one
//! process per pipeline stage (`pid` = stage, named `stage N` by a `process_name` metadata event), one thread per
//! [`Lane`] (`tid` = its index + 1, named by `thread_name`), every span a complete event (`ph: "X"`) with `ts`
//! and `dur` in µs. Format: <https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU>.

use serde::Serialize;
use serde_json::{json, Value};

use super::{Lane, Trace};

/// The whole trace file.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChromeTrace {
    /// Metadata events first, then the complete events of every stage.
    pub trace_events: Vec<ChromeEvent>,
    /// `ms`: how the viewers show times.
    pub display_time_unit: &'static str,
    /// The prediction behind the trace: `model` (eq7 / simulated) and `iteration_time_s`.
    #[schema(value_type = Object)]
    pub other_data: Value,
}

/// One event: a complete event (`ph` `X`) or a metadata event (`ph` `M`, no `ts`/`dur`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ChromeEvent {
    pub name: String,
    /// The span's kind (complete events only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cat: Option<&'static str>,
    pub ph: &'static str,
    /// Start, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ts: Option<f64>,
    /// Duration, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dur: Option<f64>,
    /// The pipeline stage.
    pub pid: u32,
    /// The lane ([`lane_tid`]; 0 for process metadata).
    pub tid: u32,
    /// `name` of a process or thread (metadata); `stage`, `chunk`, `micro_batch` of a span.
    #[schema(value_type = Object)]
    pub args: Value,
}

/// The thread id of `lane`: its index in [`Lane::ALL`] + 1.
pub fn lane_tid(lane: Lane) -> u32 {
    Lane::ALL.iter().position(|l| *l == lane).map_or(0, |i| i as u32 + 1)
}

fn kind_cat(kind: super::SpanKind) -> &'static str {
    use super::SpanKind::*;
    match kind {
        Forward => "forward",
        Backward => "backward",
        Recompute => "recompute",
        TpCollective => "tp_collective",
        EpAllToAll => "ep_all_to_all",
        Send => "send",
        ZeroCollective => "zero_collective",
        GradReduce => "grad_reduce",
        EmbeddingGrad => "embedding_grad",
        Optimizer => "optimizer",
        ParamGather => "param_gather",
    }
}

fn meta(name: &str, pid: u32, tid: u32, args: Value) -> ChromeEvent {
    ChromeEvent { name: name.into(), cat: None, ph: "M", ts: None, dur: None, pid, tid, args }
}

/// `trace` in the Trace Event Format. Its complete events span exactly the trace's extent (first start 0, last
/// end = the iteration time, µs).
pub fn chrome_trace(trace: &Trace) -> ChromeTrace {
    let mut events = Vec::new();
    for st in &trace.stages {
        let pid = st.stage;
        events.push(meta("process_name", pid, 0, json!({ "name": format!("stage {pid}") })));
        events.push(meta("process_sort_index", pid, 0, json!({ "sort_index": pid })));
        for lane in Lane::ALL {
            let tid = lane_tid(lane);
            events.push(meta("thread_name", pid, tid, json!({ "name": lane.name() })));
            events.push(meta("thread_sort_index", pid, tid, json!({ "sort_index": tid })));
        }
    }
    for st in &trace.stages {
        for s in &st.spans {
            let mut args = json!({ "stage": st.stage });
            if let (Some(c), Some(m), Value::Object(a)) = (s.chunk, s.micro, &mut args) {
                a.insert("chunk".into(), json!(c));
                a.insert("micro_batch".into(), json!(m));
            }
            events.push(ChromeEvent {
                name: s.name(trace.chunks),
                cat: Some(kind_cat(s.kind)),
                ph: "X",
                ts: Some(s.start_s * 1e6),
                dur: Some((s.end_s - s.start_s) * 1e6),
                pid: st.stage,
                tid: lane_tid(s.lane),
                args,
            });
        }
    }
    ChromeTrace {
        trace_events: events,
        display_time_unit: "ms",
        other_data: json!({ "model": trace.model, "iteration_time_s": trace.iteration_s }),
    }
}

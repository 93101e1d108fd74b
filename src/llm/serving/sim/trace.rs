//! The simulated steps as a Trace Event Format file (`POST /v1/predictions/inference/timeline?format=chrome`),
//! with training's conventions ([`crate::llm::trace::chrome`]): one process per engine instance (`pid` = pool ·
//! 1000 + instance, named `instance N`, `prefill N` or `decode N` by a `process_name` metadata event), one thread
//! of steps (`tid` 1), each step a complete event (`ph: "X"`, `ts`/`dur` in µs) named by what it ran
//! (`prefill 2048 + decode 63`, `decode 64`) with its counts in `args`, and counter events (`ph: "C"`) of the
//! running and waiting requests and of the KV-cache usage that Perfetto draws as tracks.

use serde_json::json;

use super::StepRecord;
use crate::llm::trace::chrome::{ChromeEvent, ChromeTrace};

fn pid(r: &StepRecord) -> u32 {
    r.pool as u32 * 1000 + r.instance
}

/// The trace of `steps` (from [`super::SimOutcome::trace`]); `disaggregated` names pool 0 `prefill` and pool 1
/// `decode`; `truncated` and `summary` go to `otherData`.
pub fn chrome(steps: &[StepRecord], disaggregated: bool, truncated: bool, summary: serde_json::Value) -> ChromeTrace {
    let mut events = Vec::with_capacity(steps.len() * 3 + 8);
    let mut seen = std::collections::BTreeSet::new();
    for r in steps {
        if seen.insert(pid(r)) {
            let role = match (disaggregated, r.pool) {
                (false, _) => "instance",
                (true, 0) => "prefill",
                (true, _) => "decode",
            };
            let meta = |name: &str, tid: u32, args| ChromeEvent {
                name: name.into(),
                cat: None,
                ph: "M",
                ts: None,
                dur: None,
                pid: pid(r),
                tid,
                args,
            };
            events.push(meta("process_name", 0, json!({ "name": format!("{role} {}", r.instance) })));
            events.push(meta("process_sort_index", 0, json!({ "sort_index": pid(r) })));
            events.push(meta("thread_name", 1, json!({ "name": "steps" })));
        }
    }
    for r in steps {
        let name = match (r.prefill_tokens, r.decodes) {
            (0, d) => format!("decode {d}"),
            (p, 0) => format!("prefill {p}"),
            (p, d) => format!("prefill {p} + decode {d}"),
        };
        let ts = r.start_s * 1e6;
        events.push(ChromeEvent {
            name,
            cat: Some(if r.prefill_tokens > 0 { "prefill" } else { "decode" }),
            ph: "X",
            ts: Some(ts),
            dur: Some(r.dur_s * 1e6),
            pid: pid(r),
            tid: 1,
            args: json!({
                "decodes": r.decodes, "prefill_tokens": r.prefill_tokens, "running": r.running,
                "waiting": r.waiting, "kv_usage": r.kv_usage,
            }),
        });
        let counter = |name: &str, args| ChromeEvent {
            name: name.into(),
            cat: None,
            ph: "C",
            ts: Some(ts),
            dur: None,
            pid: pid(r),
            tid: 0,
            args,
        };
        events.push(counter("requests", json!({ "running": r.running, "waiting": r.waiting })));
        events.push(counter("kv_cache_usage", json!({ "usage": r.kv_usage })));
    }
    ChromeTrace {
        trace_events: events,
        display_time_unit: "ms",
        other_data: json!({ "model": "serving simulation", "truncated": truncated, "summary": summary }),
    }
}

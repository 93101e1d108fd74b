//! PyTorch profiler (Kineto) Chrome traces, `.json` or gzip'd `.json.gz`: `{"deviceProperties": […],
//! "distributedInfo": {…}, "traceEvents": […]}` (or a bare array of events).
//!
//! The trace is streamed: events are deserialized one at a time into typed structs that skip every field perfcast
//! does not use, and only the complete (`"ph": "X"`) events of categories `cpu_op`, `user_annotation`,
//! `cuda_runtime`/`cuda_driver` and `kernel` are kept, in compact form. Joins use hash maps and per-thread sorted
//! intervals: time O(n log n), memory O(kept events).
//!
//! **Joins.** A kernel is joined to its runtime launch by `args.correlation`, and the launch to the op that issued
//! it by `External id` — accepted only when that op runs on the launch's thread and spans the launch (Kineto
//! versions differ in what the id refers to); otherwise the innermost `cpu_op`/`user_annotation` on the launch's
//! thread whose interval contains the launch. Ops nest by time on each thread.
//!
//! **Samples.**
//! - [`OpSample`] per instance of the *outermost* op whose name has an operator class (`aten::linear` owns the
//!   `aten::addmm` inside it; classes and dims in [`ops`]): time = last kernel end − first kernel start over every
//!   kernel launched inside it (S1). Phase `bwd` when the op or an ancestor is an autograd node (`…Backward0`,
//!   `autograd::engine::evaluate_function: …` — activation recompute inside backward counts as bwd). Dims come
//!   from the op's `Input Dims`; a backward node's from its forward op (same `Sequence number`, same class), and
//!   for linear, when the forward op is outside the trace window, from the gradient's shape and the shapes of the
//!   gradient GEMM (`aten::mm`) inside it. dtype from `Input type`, else the upload's `dtype`. GPU from
//!   `deviceProperties` of the kernel's `device`, else the only device listed, else the upload's `gpu`.
//!   Instances that cannot be used are rejected, one [`Rejected`] per (op name, reason) with a count.
//! - [`KernelSample`] per GPU kernel (NCCL excluded): duration, grid, block, and metrics `registers_per_thread`,
//!   `shared_mem_bytes`, plus `torch.est_achieved_occupancy` (0–1; Kineto's estimate from the launch
//!   configuration, not a measured occupancy, so not stored as `achieved_occupancy`); attribute `cpu_op` names
//!   the op that launched it.
//! - [`CommSample`] per NCCL/RCCL kernel (`ncclKernel_*`, `ncclDevKernel_*`), time = kernel duration; collective,
//!   bytes and ranks as [`comm`] describes.
//! - cpu_ops that launched kernels but have no class: one [`Rejected`] per distinct name (the outermost such
//!   cpu_op), with the number of instances. `gpu_memcpy`/`gpu_memset` activity is not counted in op times.
//!
//! Rejected lines are the lines where the first such event ends in the (decompressed) JSON.
//!
//! Timestamps are µs as f64: traces with absolute epoch microseconds and fractional digits keep ~0.25 µs.
//! Limits: at most [`MAX_TRACE_BYTES`] of (decompressed) JSON and [`MAX_KEPT_EVENTS`] kept events; beyond that the
//! upload fails with an error instead of exhausting memory.
//!
//! [`OpSample`]: super::OpSample
//! [`KernelSample`]: super::KernelSample
//! [`CommSample`]: super::CommSample

mod collector;
mod comm;
mod events;
mod join;
mod ops;
mod samples;

use std::cell::Cell;
use std::io::{BufReader, Read};
use std::rc::Rc;

use serde::de::DeserializeSeed;

pub use ops::op_class_of;

use self::collector::Collector;
use self::events::{Counting, TraceSeed};
use super::text::is_gzip;
use super::{Context, ParseError, Parsed};

/// Most (decompressed) JSON bytes read from one trace.
pub const MAX_TRACE_BYTES: u64 = 8 << 30;
/// Most events kept (cpu ops, annotations, launches, kernels) from one trace.
pub const MAX_KEPT_EVENTS: usize = 10_000_000;
/// Deepest op nesting walked when looking for an enclosing op.
const MAX_DEPTH: usize = 256;

/// Parses a PyTorch Chrome trace (see the module doc).
///
/// Errors: not JSON / not gzip (with line and column), no `traceEvents`, a trace over the size limits.
pub fn parse(bytes: &[u8], ctx: &Context) -> Result<Parsed, ParseError> {
    let lines = Rc::new(Cell::new(0u64));
    let reader: Box<dyn Read + '_> = if is_gzip(bytes) {
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(bytes)))
    } else {
        Box::new(bytes)
    };
    let counting = Counting { inner: reader, newlines: lines.clone(), read: 0 };
    let mut collector = Collector::new(lines);
    let mut de = serde_json::Deserializer::from_reader(counting);
    TraceSeed { sink: &mut collector }.deserialize(&mut de).map_err(json_error)?;
    de.end().map_err(json_error)?;
    if !collector.saw_events {
        return Err(ParseError::whole("not a Chrome trace: no traceEvents array"));
    }
    Ok(collector.finish(ctx))
}

/// A Chrome trace: JSON mentioning `traceEvents`, or an event array with `"ph"` and `"ts"`.
pub fn looks_like(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let t = text.trim_start_matches('\u{feff}').trim_start();
    (t.starts_with('{') && t.contains("\"traceEvents\""))
        || (t.starts_with('[') && t.contains("\"ph\"") && t.contains("\"ts\""))
}

fn json_error(e: serde_json::Error) -> ParseError {
    let message = if e.is_io() { format!("cannot read the trace: {e}") } else { format!("invalid trace JSON: {e}") };
    ParseError {
        line: (e.line() > 0).then_some(e.line() as u64),
        column: (e.column() > 0).then_some(e.column() as u64),
        message,
    }
}

#[cfg(test)]
mod tests;

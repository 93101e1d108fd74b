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

mod comm;
mod ops;

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufReader, Read};
use std::rc::Rc;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

pub use ops::op_class_of;

use self::comm::CommFacts;
use self::ops::OpArgs;
use super::text::{is_gzip, Tally};
use super::{
    kernel_metrics as km, Attributes, CommSample, Context, KernelSample, OpSample, ParseError, Parsed, Sample,
};
use crate::op::{OpClass, Phase};

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

/// Counts newlines (for line numbers of rejected events) and bounds the bytes read.
struct Counting<R> {
    inner: R,
    newlines: Rc<Cell<u64>>,
    read: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read = self.read.saturating_add(n as u64);
        if self.read > MAX_TRACE_BYTES {
            return Err(io::Error::other(format!("the trace exceeds {MAX_TRACE_BYTES} bytes")));
        }
        let nl = buf.get(..n).unwrap_or(&[]).iter().filter(|&&b| b == b'\n').count() as u64;
        self.newlines.set(self.newlines.get().saturating_add(nl));
        Ok(n)
    }
}

#[derive(Deserialize)]
struct RawEvent {
    #[serde(default)]
    ph: Option<Value>,
    #[serde(default)]
    cat: Option<Value>,
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    pid: Option<Value>,
    #[serde(default)]
    tid: Option<Value>,
    #[serde(default)]
    ts: Option<Value>,
    #[serde(default)]
    dur: Option<Value>,
    #[serde(default)]
    args: Option<RawArgs>,
}

#[derive(Deserialize, Default)]
struct RawArgs {
    #[serde(rename = "External id", default)]
    external_id: Option<Value>,
    #[serde(default)]
    correlation: Option<Value>,
    #[serde(default)]
    device: Option<Value>,
    #[serde(default)]
    grid: Option<Value>,
    #[serde(default)]
    block: Option<Value>,
    #[serde(rename = "registers per thread", default)]
    registers: Option<Value>,
    #[serde(rename = "shared memory", default)]
    shared_memory: Option<Value>,
    #[serde(rename = "est. achieved occupancy %", default)]
    occupancy: Option<Value>,
    #[serde(rename = "Input Dims", default)]
    input_dims: Option<Value>,
    #[serde(rename = "Input type", default)]
    input_type: Option<Value>,
    #[serde(rename = "Concrete Inputs", default)]
    concrete: Option<Value>,
    #[serde(rename = "Sequence number", default)]
    seq: Option<Value>,
    #[serde(rename = "Collective name", default)]
    collective: Option<Value>,
    #[serde(rename = "In msg nelems", default)]
    in_nelems: Option<Value>,
    #[serde(rename = "Out msg nelems", default)]
    out_nelems: Option<Value>,
    #[serde(rename = "Group size", default)]
    group_size: Option<Value>,
    #[serde(default)]
    dtype: Option<Value>,
}

struct TraceSeed<'a> {
    sink: &'a mut Collector,
}

impl<'de> DeserializeSeed<'de> for TraceSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TraceSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Chrome trace: an object with traceEvents, or an array of events")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "traceEvents" => map.next_value_seed(EventsSeed { sink: &mut *self.sink })?,
                "deviceProperties" => self.sink.devices(map.next_value::<Value>()?),
                "distributedInfo" => self.sink.distributed(map.next_value::<Value>()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        EventsSeed { sink: self.sink }.visit_seq(seq)
    }
}

struct EventsSeed<'a> {
    sink: &'a mut Collector,
}

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of trace events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.sink.saw_events = true;
        while let Some(ev) = seq.next_element::<RawEvent>()? {
            self.sink.push(ev).map_err(de::Error::custom)?;
        }
        Ok(())
    }
}

/// `pid`/`tid` as the trace writes them (numbers or strings).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Int(i64),
    Str(String),
    None,
}

fn key(v: Option<Value>) -> Key {
    match v {
        Some(Value::Number(n)) => {
            n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)).map(Key::Int).unwrap_or(Key::None)
        }
        Some(Value::String(s)) => Key::Str(s),
        _ => Key::None,
    }
}

fn int(v: &Option<Value>) -> Option<i64> {
    match v.as_ref()? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn unsigned(v: &Option<Value>) -> Option<u64> {
    int(v).and_then(|i| u64::try_from(i).ok())
}

fn float(v: &Option<Value>) -> Option<f64> {
    let f = match v.as_ref()? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }?;
    f.is_finite().then_some(f)
}

fn string(v: Option<Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

fn triple(v: &Option<Value>) -> Option<[u64; 3]> {
    let a = v.as_ref()?.as_array()?;
    let get = |i: usize| a.get(i).and_then(Value::as_u64);
    match a.len() {
        3 => Some([get(0)?, get(1)?, get(2)?]),
        _ => None,
    }
}

fn strings(v: Option<Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => {
            a.into_iter().map(|x| if let Value::String(s) = x { s } else { String::new() }).collect()
        }
        _ => Vec::new(),
    }
}

/// `Input Dims`: one entry per input, a shape (`[5, 128]`), `[]` for non-tensors, or a list of shapes for tensor
/// lists (kept as `None`).
fn dims(v: Option<Value>) -> (bool, Vec<Option<Vec<u64>>>) {
    let Some(Value::Array(inputs)) = v else { return (false, Vec::new()) };
    let one = |x: &Value| -> Option<Vec<u64>> { x.as_array()?.iter().map(Value::as_u64).collect() };
    (true, inputs.iter().map(one).collect())
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    CpuOp,
    Annotation,
}

struct Op {
    name: u32,
    thread: u32,
    ts: f64,
    end: f64,
    ext: Option<i64>,
    line: u64,
    kind: Kind,
    args: Option<Box<OpArgs>>,
}

struct Launch {
    thread: u32,
    ts: f64,
    ext: Option<i64>,
}

struct Kernel {
    name: u32,
    ts: f64,
    dur: f64,
    correlation: Option<i64>,
    ext: Option<i64>,
    device: Option<i64>,
    grid: Option<[u64; 3]>,
    block: Option<[u64; 3]>,
    registers: Option<f64>,
    shared_memory: Option<f64>,
    occupancy: Option<f64>,
    line: u64,
}

/// The kept events and the few top-level facts.
struct Collector {
    lines: Rc<Cell<u64>>,
    saw_events: bool,
    names: Vec<String>,
    name_ids: HashMap<String, u32>,
    threads: HashMap<(Key, Key), u32>,
    ops: Vec<Op>,
    launches: HashMap<i64, Launch>,
    kernels: Vec<Kernel>,
    device_names: HashMap<i64, String>,
    world_size: Option<u64>,
    rank: Option<i64>,
}

impl Collector {
    fn new(lines: Rc<Cell<u64>>) -> Collector {
        Collector {
            lines,
            saw_events: false,
            names: Vec::new(),
            name_ids: HashMap::new(),
            threads: HashMap::new(),
            ops: Vec::new(),
            launches: HashMap::new(),
            kernels: Vec::new(),
            device_names: HashMap::new(),
            world_size: None,
            rank: None,
        }
    }

    fn intern(&mut self, name: String) -> u32 {
        if let Some(&id) = self.name_ids.get(&name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.name_ids.insert(name.clone(), id);
        self.names.push(name);
        id
    }

    fn thread(&mut self, pid: Option<Value>, tid: Option<Value>) -> u32 {
        let k = (key(pid), key(tid));
        let next = self.threads.len() as u32;
        *self.threads.entry(k).or_insert(next)
    }

    fn devices(&mut self, v: Value) {
        if let Value::Array(list) = v {
            for d in list {
                let id = d.get("id").and_then(Value::as_i64);
                let name = d.get("name").and_then(Value::as_str);
                if let (Some(id), Some(name)) = (id, name) {
                    self.device_names.insert(id, name.to_string());
                }
            }
        }
    }

    fn distributed(&mut self, v: Value) {
        self.world_size = v.get("world_size").and_then(Value::as_u64);
        self.rank = v.get("rank").and_then(Value::as_i64);
    }

    fn push(&mut self, ev: RawEvent) -> Result<(), String> {
        if !matches!(ev.ph.as_ref().and_then(Value::as_str), Some("X")) {
            return Ok(());
        }
        let cat = ev.cat.as_ref().and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
        let kind = match cat.as_str() {
            "kernel" => None,
            "cpu_op" | "operator" => Some(Kind::CpuOp),
            "user_annotation" => Some(Kind::Annotation),
            "cuda_runtime" | "cuda_driver" | "runtime" => {
                let args = ev.args.unwrap_or_default();
                if let (Some(corr), Some(ts)) = (int(&args.correlation), float(&ev.ts)) {
                    let thread = self.thread(ev.pid, ev.tid);
                    self.launches.insert(corr, Launch { thread, ts, ext: int(&args.external_id) });
                    self.check_size()?;
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        let (Some(ts), Some(name)) = (float(&ev.ts), string(ev.name)) else { return Ok(()) };
        let dur = float(&ev.dur).filter(|d| *d >= 0.0).unwrap_or(0.0);
        let line = self.lines.get().saturating_add(1);
        let args = ev.args.unwrap_or_default();
        match kind {
            None => {
                let name = self.intern(name);
                self.kernels.push(Kernel {
                    name,
                    ts,
                    dur,
                    correlation: int(&args.correlation),
                    ext: int(&args.external_id),
                    device: int(&args.device),
                    grid: triple(&args.grid),
                    block: triple(&args.block),
                    registers: float(&args.registers),
                    shared_memory: float(&args.shared_memory),
                    occupancy: float(&args.occupancy),
                    line,
                });
            }
            Some(kind) => {
                let keep = op_class_of(&name).is_some()
                    || comm::is_comm_op(&name)
                    || ops::is_backward(&name)
                    || args.collective.is_some();
                let op_args = keep.then(|| {
                    let (has_dims, dims) = dims(args.input_dims);
                    Box::new(OpArgs {
                        seq: int(&args.seq),
                        has_dims,
                        dims,
                        types: strings(args.input_type),
                        concrete: strings(args.concrete),
                        collective: string(args.collective),
                        in_nelems: unsigned(&args.in_nelems),
                        out_nelems: unsigned(&args.out_nelems),
                        group_size: unsigned(&args.group_size),
                        dtype: string(args.dtype),
                    })
                });
                let thread = self.thread(ev.pid, ev.tid);
                let name = self.intern(name);
                self.ops.push(Op {
                    name,
                    thread,
                    ts,
                    end: ts + dur,
                    ext: int(&args.external_id),
                    line,
                    kind,
                    args: op_args,
                });
            }
        }
        self.check_size()
    }

    fn check_size(&self) -> Result<(), String> {
        if self.ops.len() + self.kernels.len() + self.launches.len() > MAX_KEPT_EVENTS {
            return Err(format!("the trace has more than {MAX_KEPT_EVENTS} operator, launch and kernel events"));
        }
        Ok(())
    }

    fn finish(self, ctx: &Context) -> Parsed {
        Joined::new(self).samples(ctx)
    }
}

/// Span of the kernels an op owns: the first start, and the start and duration of the kernel that ends last
/// (kept apart so that the span is computed as a difference of nearby timestamps plus a duration, without the
/// rounding of large absolute end times).
struct Span {
    start: f64,
    last_ts: f64,
    last_dur: f64,
    kernels: u64,
    first_kernel: u32,
    device: Option<i64>,
}

impl Span {
    fn time_us(&self) -> f64 {
        (self.last_ts - self.start) + self.last_dur
    }
}

/// An op's class and dims, the `Input type` list they go with, and the rule that gave them.
type DimsFrom<'a> = (OpClass, [u64; 4], &'a Vec<String>, &'static str);

/// The op tree of every thread and the per-op facts derived from it.
struct Joined {
    c: Collector,
    parent: Vec<Option<u32>>,
    /// Ops of each thread sorted by start.
    by_thread: Vec<Vec<u32>>,
    class: Vec<Option<OpClass>>,
    bwd: Vec<bool>,
    owner: Vec<Option<u32>>,
    top_cpu: Vec<Option<u32>>,
    /// For backward owners: the first autograd node with Input Dims, and the first aten::mm, inside them.
    grad_of: HashMap<u32, u32>,
    mm_of: HashMap<u32, u32>,
    by_ext: HashMap<i64, u32>,
    by_seq: HashMap<i64, Vec<u32>>,
}

impl Joined {
    fn new(c: Collector) -> Joined {
        let n = c.ops.len();
        let mut by_thread: Vec<Vec<u32>> = vec![Vec::new(); c.threads.len()];
        for (i, op) in c.ops.iter().enumerate() {
            if let Some(list) = by_thread.get_mut(op.thread as usize) {
                list.push(i as u32);
            }
        }
        let mut j = Joined {
            parent: vec![None; n],
            class: vec![None; n],
            bwd: vec![false; n],
            owner: vec![None; n],
            top_cpu: vec![None; n],
            grad_of: HashMap::new(),
            mm_of: HashMap::new(),
            by_ext: HashMap::new(),
            by_seq: HashMap::new(),
            by_thread,
            c,
        };
        let ops = &j.c.ops;
        for list in &mut j.by_thread {
            list.sort_by(|&a, &b| {
                let (a, b) = (&ops[a as usize], &ops[b as usize]);
                a.ts.total_cmp(&b.ts).then(b.end.total_cmp(&a.end))
            });
            let mut stack: Vec<u32> = Vec::new();
            for &i in list.iter() {
                let op = &ops[i as usize];
                while stack.last().is_some_and(|&t| ops[t as usize].end <= op.ts) {
                    stack.pop();
                }
                j.parent[i as usize] = stack.last().copied();
                stack.push(i);
            }
        }
        // Parents precede children in each thread's order, so one pass derives inherited facts.
        for t in 0..j.by_thread.len() {
            for k in 0..j.by_thread[t].len() {
                let i = j.by_thread[t][k] as usize;
                let op = &j.c.ops[i];
                let name = &j.c.names[op.name as usize];
                let parent = j.parent[i].map(|p| p as usize);
                let cpu = op.kind == Kind::CpuOp;
                let class = if cpu { op_class_of(name) } else { None };
                j.class[i] = class;
                j.bwd[i] = parent.is_some_and(|p| j.bwd[p]) || (cpu && ops::is_backward(name));
                j.owner[i] = parent.and_then(|p| j.owner[p]).or(class.map(|_| i as u32));
                j.top_cpu[i] = parent.and_then(|p| j.top_cpu[p]).or(cpu.then_some(i as u32));
                if let (Some(o), Some(args)) = (j.owner[i], op.args.as_deref()) {
                    if j.bwd[o as usize] {
                        if ops::is_backward(name) && args.tensor(0).is_some() {
                            j.grad_of.entry(o).or_insert(i as u32);
                        }
                        if name == "aten::mm" {
                            j.mm_of.entry(o).or_insert(i as u32);
                        }
                    }
                }
                if let Some(e) = op.ext {
                    j.by_ext.insert(e, i as u32);
                }
                if let (Some(_), false, Some(seq)) = (class, j.bwd[i], op.args.as_ref().and_then(|a| a.seq)) {
                    j.by_seq.entry(seq).or_default().push(i as u32);
                }
            }
        }
        j
    }

    fn name(&self, op: u32) -> &str {
        &self.c.names[self.c.ops[op as usize].name as usize]
    }

    /// The innermost op on `thread` whose interval contains `ts`.
    fn innermost(&self, thread: u32, ts: f64) -> Option<u32> {
        let list = self.by_thread.get(thread as usize)?;
        let idx = list.partition_point(|&o| self.c.ops[o as usize].ts <= ts);
        let mut cur = *list.get(idx.checked_sub(1)?)?;
        for _ in 0..MAX_DEPTH {
            if self.c.ops[cur as usize].end >= ts {
                return Some(cur);
            }
            cur = self.parent[cur as usize]?;
        }
        None
    }

    /// The op that launched kernel `k` (see the module doc).
    fn launcher(&self, k: &Kernel) -> Option<u32> {
        let launch = k.correlation.and_then(|c| self.c.launches.get(&c));
        if let Some(&o) = launch.and_then(|l| l.ext).or(k.ext).and_then(|e| self.by_ext.get(&e)) {
            let op = &self.c.ops[o as usize];
            let ok = match launch {
                Some(l) => op.thread == l.thread && op.ts <= l.ts && l.ts <= op.end,
                None => op.ts <= k.ts,
            };
            if ok {
                return Some(o);
            }
        }
        launch.and_then(|l| self.innermost(l.thread, l.ts))
    }

    fn gpu(&self, device: Option<i64>, ctx: &Context) -> Option<String> {
        device
            .and_then(|d| self.c.device_names.get(&d).cloned())
            .or_else(|| {
                let mut names = self.c.device_names.values();
                let first = names.next()?;
                names.all(|n| n == first).then(|| first.clone())
            })
            .or_else(|| ctx.gpu.clone())
    }

    fn samples(self, ctx: &Context) -> Parsed {
        let mut out = Parsed::default();
        let mut tally = Tally::default();
        let mut spans: HashMap<u32, Span> = HashMap::new();
        let mut unclassified_seen = vec![false; self.c.ops.len()];
        for k in &self.c.kernels {
            let name = &self.c.names[k.name as usize];
            let op = self.launcher(k);
            if comm::is_nccl_kernel(name) {
                match self.comm_sample(k, op, ctx) {
                    Ok(s) => out.samples.push(Sample::Comm(s)),
                    Err(reason) => tally.add(k.line, reason),
                }
                continue;
            }
            if k.dur <= 0.0 {
                tally.add(k.line, format!("kernel {name}: zero duration"));
                continue;
            }
            out.samples.push(Sample::Kernel(self.kernel_sample(k, op, ctx)));
            let Some(op) = op else { continue };
            match self.owner[op as usize] {
                Some(o) => {
                    let s = spans.entry(o).or_insert(Span {
                        start: k.ts,
                        last_ts: k.ts,
                        last_dur: k.dur,
                        kernels: 0,
                        first_kernel: k.name,
                        device: k.device,
                    });
                    if k.ts < s.start {
                        s.start = k.ts;
                        s.first_kernel = k.name;
                    }
                    if k.ts + k.dur > s.last_ts + s.last_dur {
                        (s.last_ts, s.last_dur) = (k.ts, k.dur);
                    }
                    s.kernels += 1;
                }
                None => {
                    let top = self.top_cpu[op as usize].unwrap_or(op);
                    if !std::mem::replace(&mut unclassified_seen[top as usize], true) {
                        let line = self.c.ops[top as usize].line;
                        let reason = match self.c.ops[top as usize].kind {
                            Kind::CpuOp => "cpu_op with GPU kernels has no operator class",
                            Kind::Annotation => {
                                "GPU kernels launched with no cpu_op around them (only this annotation)"
                            }
                        };
                        tally.add(line, format!("{}: {reason}", self.name(top)));
                    }
                }
            }
        }
        let mut owners: Vec<u32> = spans.keys().copied().collect();
        owners.sort_unstable();
        for o in owners {
            let Some(span) = spans.get(&o) else { continue };
            match self.op_sample(o, span, ctx) {
                Ok(s) => out.samples.push(Sample::Op(s)),
                Err(reason) => tally.add(self.c.ops[o as usize].line, format!("{}: {reason}", self.name(o))),
            }
        }
        out.rejected = tally.into_rejected();
        out
    }

    fn base_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.insert("source_format".into(), "torch_trace".into());
        if let Some(r) = self.c.rank {
            a.insert("rank".into(), r.to_string());
        }
        a
    }

    fn kernel_sample(&self, k: &Kernel, op: Option<u32>, ctx: &Context) -> KernelSample {
        let mut metrics = std::collections::BTreeMap::new();
        if let Some(r) = k.registers {
            metrics.insert(km::REGISTERS_PER_THREAD.to_string(), r);
        }
        if let Some(s) = k.shared_memory {
            metrics.insert(km::SHARED_MEM_BYTES.to_string(), s);
        }
        if let Some(o) = k.occupancy {
            metrics.insert("torch.est_achieved_occupancy".to_string(), o / 100.0);
        }
        let mut attributes = self.base_attributes();
        if let Some(op) = op {
            attributes.insert("cpu_op".into(), self.name(op).to_string());
        }
        if let Some(d) = k.device {
            attributes.insert("device".into(), d.to_string());
        }
        KernelSample {
            name: self.c.names[k.name as usize].clone(),
            gpu: self.gpu(k.device, ctx),
            duration_us: k.dur,
            grid: k.grid,
            block: k.block,
            metrics,
            attributes,
        }
    }

    fn comm_sample(&self, k: &Kernel, op: Option<u32>, ctx: &Context) -> Result<CommSample, String> {
        let kname = &self.c.names[k.name as usize];
        let mut facts = CommFacts::default();
        let mut cur = op;
        for _ in 0..MAX_DEPTH {
            let Some(o) = cur else { break };
            if let Some(args) = self.c.ops[o as usize].args.as_deref() {
                if comm::is_comm_op(self.name(o)) || args.collective.is_some() {
                    facts.add(self.name(o), args);
                }
            }
            cur = self.parent[o as usize];
        }
        let label = facts.op_name.clone().unwrap_or_else(|| "NCCL kernel".into());
        let collective = facts.collective.or_else(|| comm::collective_from_kernel(kname)).ok_or_else(|| {
            format!(
                "{label}: collective unknown (no nccl:/c10d op around the kernel, and {kname:.40} does not name one)"
            )
        })?;
        if k.dur <= 0.0 {
            return Err(format!("{label}: kernel with zero duration"));
        }
        let (ranks, ranks_source) = facts.ranks(collective, self.c.world_size, ctx.ranks).ok_or_else(|| {
            format!("{label}: group size unknown (no Group size, no distributedInfo.world_size): give ranks")
        })?;
        let bytes = facts.bytes(collective, ranks).ok_or_else(|| {
            format!("{label}: message size unknown (no In msg nelems / Input Dims with a known type)")
        })?;
        let mut attributes = self.base_attributes();
        attributes.insert("kernel".into(), kname.clone());
        attributes.insert("ranks_source".into(), ranks_source.into());
        if let Some(g) = self.gpu(k.device, ctx) {
            attributes.insert("gpu".into(), g);
        }
        Ok(CommSample {
            nodes: ctx.nodes,
            gpus_per_node: ctx.gpus_per_node,
            dtype: facts.dtype_name(),
            attributes,
            ..CommSample::timed(collective, bytes, ranks, k.dur)
        })
    }

    fn op_sample(&self, o: u32, span: &Span, ctx: &Context) -> Result<OpSample, String> {
        let op = &self.c.ops[o as usize];
        let name = self.name(o);
        let class = self.class[o as usize].ok_or("no operator class")?;
        let bwd = self.bwd[o as usize];
        // Autograd nodes record only gradients: their shapes come from the forward op. Other ops (an `aten::add_`
        // accumulating a gradient) record their own.
        let (class, dims, types, source) = if ops::is_backward(name) {
            self.backward_dims(o, class)?
        } else {
            let args = op.args.as_deref().ok_or("no Input Dims recorded (profile with record_shapes=True)")?;
            let (c, d) = ops::dims_for(class, name, args)?;
            (c, d, &args.types, "input_dims")
        };
        let dtype = types
            .iter()
            .find_map(|t| ops::precision(t))
            .or(ctx.dtype)
            .ok_or_else(|| format!("unknown dtype (Input type {types:?}); give dtype"))?;
        let gpu = self.gpu(span.device, ctx).ok_or("no GPU name (no deviceProperties): give gpu")?;
        let time_us = span.time_us();
        if !(time_us.is_finite() && time_us > 0.0) {
            return Err("kernels with zero total duration".into());
        }
        let mut attributes = self.base_attributes();
        attributes.insert("torch_op".into(), name.to_string());
        attributes.insert("kernels".into(), span.kernels.to_string());
        attributes.insert("kernel".into(), self.c.names[span.first_kernel as usize].clone());
        attributes.insert("dims_source".into(), source.into());
        Ok(OpSample {
            op: class,
            phase: if bwd { Phase::Bwd } else { Phase::Fwd },
            dtype,
            gpu,
            dims,
            time_us,
            attributes,
        })
    }

    /// Dims of a backward owner: from its forward op (same sequence number and class), else for linear from the
    /// gradient and gradient-GEMM shapes.
    fn backward_dims(&self, o: u32, class: OpClass) -> Result<DimsFrom<'_>, String> {
        let args = self.c.ops[o as usize].args.as_deref();
        let seq = args.and_then(|a| a.seq);
        if let Some(seq) = seq {
            let candidates = self.by_seq.get(&seq).map(Vec::as_slice).unwrap_or(&[]);
            for &f in candidates.iter().rev() {
                let Some(fargs) = self.c.ops[f as usize].args.as_deref() else { continue };
                if self.class[f as usize] != Some(class) {
                    continue;
                }
                if let Ok((c, d)) = ops::dims_for(class, self.name(f), fargs) {
                    return Ok((c, d, &fargs.types, "forward_op"));
                }
            }
        }
        if class == OpClass::Linear {
            let grad = self.grad_of.get(&o).and_then(|g| self.c.ops[*g as usize].args.as_deref());
            let mm = self.mm_of.get(&o).and_then(|m| self.c.ops[*m as usize].args.as_deref());
            if let (Some(g), Some(m)) = (grad, mm) {
                let shapes = (g.tensor(0), m.tensor(0), m.tensor(1));
                if let (Some(go), Some(a), Some(b)) = shapes {
                    if let Some(d) = ops::linear_backward_dims(go, a, b) {
                        return Ok((OpClass::Linear, d, &g.types, "backward_gemm_shapes"));
                    }
                }
            }
        }
        Err(match seq {
            Some(s) => {
                format!("backward op: no forward op with Sequence number {s} and usable Input Dims in the trace")
            }
            None => "backward op without a Sequence number: its shape is unknown".into(),
        })
    }
}

#[cfg(test)]
mod tests;

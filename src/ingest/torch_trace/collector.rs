//! The kept events: complete (`"ph": "X"`) cpu ops, annotations, runtime launches and kernels in compact form
//! (names interned, threads numbered), and the few top-level facts (devices, rank, world size).

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use serde_json::Value;

use super::events::RawEvent;
use super::join::Joined;
use super::ops::{self, op_class_of, OpArgs};
use super::{comm, MAX_KEPT_EVENTS};
use crate::ingest::{Context, Parsed};

/// `pid`/`tid` as the trace writes them (numbers or strings).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Key {
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
pub(super) enum Kind {
    CpuOp,
    Annotation,
}

pub(super) struct Op {
    pub(super) name: u32,
    pub(super) thread: u32,
    pub(super) ts: f64,
    pub(super) end: f64,
    pub(super) ext: Option<i64>,
    pub(super) line: u64,
    pub(super) kind: Kind,
    pub(super) args: Option<Box<OpArgs>>,
}

pub(super) struct Launch {
    pub(super) thread: u32,
    pub(super) ts: f64,
    pub(super) ext: Option<i64>,
}

pub(super) struct Kernel {
    pub(super) name: u32,
    pub(super) ts: f64,
    pub(super) dur: f64,
    pub(super) correlation: Option<i64>,
    pub(super) ext: Option<i64>,
    pub(super) device: Option<i64>,
    pub(super) grid: Option<[u64; 3]>,
    pub(super) block: Option<[u64; 3]>,
    pub(super) registers: Option<f64>,
    pub(super) shared_memory: Option<f64>,
    pub(super) occupancy: Option<f64>,
    pub(super) line: u64,
}

/// The kept events and the few top-level facts.
pub(super) struct Collector {
    lines: Rc<Cell<u64>>,
    pub(super) saw_events: bool,
    pub(super) names: Vec<String>,
    name_ids: HashMap<String, u32>,
    pub(super) threads: HashMap<(Key, Key), u32>,
    pub(super) ops: Vec<Op>,
    pub(super) launches: HashMap<i64, Launch>,
    pub(super) kernels: Vec<Kernel>,
    pub(super) device_names: HashMap<i64, String>,
    pub(super) world_size: Option<u64>,
    pub(super) rank: Option<i64>,
}

impl Collector {
    pub(super) fn new(lines: Rc<Cell<u64>>) -> Collector {
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

    pub(super) fn devices(&mut self, v: Value) {
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

    pub(super) fn distributed(&mut self, v: Value) {
        self.world_size = v.get("world_size").and_then(Value::as_u64);
        self.rank = v.get("rank").and_then(Value::as_i64);
    }

    pub(super) fn push(&mut self, ev: RawEvent) -> Result<(), String> {
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

    pub(super) fn finish(self, ctx: &Context) -> Parsed {
        Joined::new(self).samples(ctx)
    }
}

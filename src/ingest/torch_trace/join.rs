//! The join: ops nest by time on each thread (the op tree), and a kernel is joined to its runtime launch by
//! `correlation` and the launch to the op that issued it (see the [parent module](super)).

use std::collections::HashMap;

use super::collector::{Collector, Kernel, Kind};
use super::ops::{self, op_class_of};
use super::MAX_DEPTH;
use crate::ingest::Context;
use crate::op::OpClass;

/// The op tree of every thread and the per-op facts derived from it.
pub(super) struct Joined {
    pub(super) c: Collector,
    pub(super) parent: Vec<Option<u32>>,
    /// Ops of each thread sorted by start.
    by_thread: Vec<Vec<u32>>,
    pub(super) class: Vec<Option<OpClass>>,
    pub(super) bwd: Vec<bool>,
    pub(super) owner: Vec<Option<u32>>,
    pub(super) top_cpu: Vec<Option<u32>>,
    /// For backward owners: the first autograd node with Input Dims, and the first aten::mm, inside them.
    pub(super) grad_of: HashMap<u32, u32>,
    pub(super) mm_of: HashMap<u32, u32>,
    by_ext: HashMap<i64, u32>,
    pub(super) by_seq: HashMap<i64, Vec<u32>>,
}

impl Joined {
    pub(super) fn new(c: Collector) -> Joined {
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

    pub(super) fn name(&self, op: u32) -> &str {
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
    pub(super) fn launcher(&self, k: &Kernel) -> Option<u32> {
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

    pub(super) fn gpu(&self, device: Option<i64>, ctx: &Context) -> Option<String> {
        device
            .and_then(|d| self.c.device_names.get(&d).cloned())
            .or_else(|| {
                let mut names = self.c.device_names.values();
                let first = names.next()?;
                names.all(|n| n == first).then(|| first.clone())
            })
            .or_else(|| ctx.gpu.clone())
    }
}

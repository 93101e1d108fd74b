//! Op and kernel samples from the joined trace: an op's time spans the kernels it owns, its dims come from its
//! `Input Dims` or, for a backward node, from its forward op (see the [parent module](super)).

use std::collections::HashMap;

use super::collector::{Kernel, Kind};
use super::join::Joined;
use super::{comm, ops};
use crate::ingest::text::Tally;
use crate::ingest::{Context, Parsed};
use crate::op::{OpClass, Phase};
use crate::samples::{kernel_metrics as km, Attributes, KernelSample, OpSample, Sample};

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

impl Joined {
    pub(super) fn samples(self, ctx: &Context) -> Parsed {
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

    pub(super) fn base_attributes(&self) -> Attributes {
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
            dims: crate::op::dims_from(&dims),
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

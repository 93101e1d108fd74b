//! NCCL/RCCL kernels of a PyTorch trace → communication samples: what collective, how many bytes, how many ranks.
//!
//! The collective comes from the ops around the kernel's launch, innermost first: `Collective name`
//! (`record_param_comms`, newer releases), the `nccl:<op>` annotation, the `c10d::<op>_` cpu_op; only then from the
//! kernel name (`ncclKernel_AllReduce_RING_LL_Sum_float`, `ncclDevKernel_AllGather_RING_LL`). NCCL ≥ 2.12 runs
//! several collectives through one `…SendRecv…` kernel, so a kernel name saying SendRecv is trusted only when no
//! op says otherwise — and then the sample is rejected, since a send/recv kernel cannot be told from a collective.
//!
//! Bytes follow nccl-tests (the full vector; all-gather: the gathered total): `In msg nelems` (all-gather: `Out
//! msg nelems`) × the element size of `dtype`; else the output tensor of `c10d::_allgather_base_` /
//! `c10d::allgather_into_tensor` for all-gather; else the first tensor of `Input Dims` of the `nccl:*` annotation or
//! `record_param_comms` (element counts) × the size of its `Input type` (all-gather: × ranks).
//!
//! Ranks: `Group size`; for all-gather the ratio of the gathered output to the input shard of the `c10d` op; else
//! `distributedInfo.world_size` (an assumption: a collective over a sub-group is then mislabeled — the attribute
//! `ranks_source` says which rule applied); else the upload's `ranks`. Send/recv is always 2 ranks.

use super::collector::Kernel;
use super::join::Joined;
use super::ops::{precision, type_bytes, OpArgs};
use super::MAX_DEPTH;
use crate::ingest::Context;
use crate::op::Collective;
use crate::samples::CommSample;

/// True for NCCL/RCCL device kernels.
pub(super) fn is_nccl_kernel(name: &str) -> bool {
    let n = name.trim_start_matches("void ").trim_start();
    n.starts_with("ncclKernel_") || n.starts_with("ncclDevKernel_") || n.starts_with("ncclDevKernelDebug_")
}

/// Collective from an op or API name (`nccl:all_reduce`, `c10d::_allgather_base_`, `allreduce`,
/// `reduce_scatter_tensor_coalesced`, `ALLTOALL`).
pub(super) fn collective_from_name(name: &str) -> Option<Collective> {
    let n = name.trim();
    let n = n.strip_prefix("nccl:").unwrap_or(n);
    let n = n.rsplit("::").next().unwrap_or(n);
    let n: String = n.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase();
    Some(if n.contains("allreduce") {
        Collective::AllReduce
    } else if n.contains("allgather") {
        Collective::AllGather
    } else if n.contains("reducescatter") {
        Collective::ReduceScatter
    } else if n.contains("alltoall") {
        Collective::AllToAll
    } else if n.contains("broadcast") || n.contains("bcast") {
        Collective::Broadcast
    } else if n.contains("reduce") {
        Collective::Reduce
    } else if n.starts_with("send") || n.starts_with("recv") || n.contains("sendrecv") {
        Collective::SendRecv
    } else {
        return None;
    })
}

/// Collective from a kernel name (`ncclKernel_AllReduce_…`, `ncclDevKernel_AllGather_…`); `None` for the generic
/// SendRecv kernel and unknown names.
pub(super) fn collective_from_kernel(name: &str) -> Option<Collective> {
    let n = name.trim_start_matches("void ").trim_start();
    let rest = ["ncclKernel_", "ncclDevKernelDebug_", "ncclDevKernel_"].iter().find_map(|p| n.strip_prefix(p))?;
    let op = rest.split(['_', '(']).next()?;
    match collective_from_name(op)? {
        Collective::SendRecv => None,
        c => Some(c),
    }
}

/// Whether an op carries communication information worth keeping.
pub(super) fn is_comm_op(name: &str) -> bool {
    name.starts_with("nccl:") || name.starts_with("c10d::") || name == "record_param_comms"
}

/// What the ops around one NCCL kernel say, gathered innermost first.
#[derive(Debug, Default)]
pub(super) struct CommFacts {
    pub collective: Option<Collective>,
    /// Op whose name gave the collective.
    pub op_name: Option<String>,
    pub in_nelems: Option<u64>,
    pub out_nelems: Option<u64>,
    pub group_size: Option<u64>,
    /// Element type (from `dtype` or `Input type`).
    pub dtype: Option<String>,
    /// Bytes of the first input tensor of the `nccl:*` annotation or `record_param_comms`.
    pub input_bytes: Option<u64>,
    /// Gathered output bytes of an all-gather `c10d` op, and output / input shard ratio.
    pub gathered_bytes: Option<u64>,
    pub gather_ratio: Option<u64>,
}

impl CommFacts {
    /// Adds what op `name` with `args` says; earlier (inner) facts win.
    pub(super) fn add(&mut self, name: &str, args: &OpArgs) {
        if self.collective.is_none() {
            let c = args.collective.as_deref().and_then(collective_from_name).or_else(|| {
                if is_comm_op(name) && name != "record_param_comms" {
                    collective_from_name(name)
                } else {
                    None
                }
            });
            if c.is_some() {
                self.collective = c;
                self.op_name = Some(name.to_string());
            }
        }
        self.in_nelems = self.in_nelems.or(args.in_nelems);
        self.out_nelems = self.out_nelems.or(args.out_nelems);
        self.group_size = self.group_size.or(args.group_size.filter(|g| *g > 0));
        let first_type = args.types.first().filter(|t| type_bytes(t).is_some()).cloned();
        if self.dtype.is_none() {
            self.dtype = args.dtype.clone().filter(|d| type_bytes(d).is_some()).or_else(|| first_type.clone());
        }
        let tensor_bytes = |i: usize| {
            let numel = args.tensor(i)?.iter().try_fold(1u64, |a, &x| a.checked_mul(x))?;
            numel.checked_mul(type_bytes(args.types.get(i)?)?)
        };
        if self.input_bytes.is_none() && (name.starts_with("nccl:") || name == "record_param_comms") {
            self.input_bytes = tensor_bytes(0);
        }
        let gather = matches!(name, "c10d::_allgather_base_" | "c10d::allgather_into_tensor_coalesced_")
            || name.starts_with("c10d::allgather_into_tensor");
        if gather && self.gathered_bytes.is_none() {
            self.gathered_bytes = tensor_bytes(0);
            if let (Some(out), Some(shard)) = (args.tensor(0), args.tensor(1)) {
                let count = |d: &[u64]| d.iter().try_fold(1u64, |a, &x| a.checked_mul(x));
                if let (Some(o), Some(s)) = (count(out), count(shard)) {
                    self.gather_ratio = (s > 0 && o % s == 0 && o / s > 1).then_some(o / s);
                }
            }
        }
    }

    /// Bytes per element of the recorded type.
    fn elem_bytes(&self) -> Option<u64> {
        self.dtype.as_deref().and_then(type_bytes)
    }

    /// Ranks and the rule that gave them.
    pub(super) fn ranks(
        &self,
        c: Collective,
        world: Option<u64>,
        ctx_ranks: Option<u32>,
    ) -> Option<(u32, &'static str)> {
        if c == Collective::SendRecv {
            return Some((2, "send_recv"));
        }
        let fit = |v: u64| u32::try_from(v).ok().filter(|v| *v > 0);
        if let Some(g) = self.group_size.and_then(fit) {
            return Some((g, "group_size"));
        }
        if c == Collective::AllGather {
            if let Some(r) = self.gather_ratio.and_then(fit) {
                return Some((r, "all_gather_shapes"));
            }
        }
        if let Some(w) = world.and_then(fit) {
            return Some((w, "world_size"));
        }
        ctx_ranks.filter(|r| *r > 0).map(|r| (r, "context"))
    }

    /// Message bytes as nccl-tests counts them (see the module doc).
    pub(super) fn bytes(&self, c: Collective, ranks: u32) -> Option<u64> {
        let from_nelems = |n: Option<u64>| n.zip(self.elem_bytes()).and_then(|(n, b)| n.checked_mul(b));
        if c == Collective::AllGather {
            from_nelems(self.out_nelems)
                .or(self.gathered_bytes)
                .or_else(|| from_nelems(self.in_nelems).and_then(|b| b.checked_mul(ranks as u64)))
                .or_else(|| self.input_bytes.and_then(|b| b.checked_mul(ranks as u64)))
        } else {
            from_nelems(self.in_nelems).or(self.input_bytes)
        }
    }

    /// Element type as perfcast names it (`bf16`, `fp32`), else as the trace spells it.
    pub(super) fn dtype_name(&self) -> Option<String> {
        let t = self.dtype.as_deref()?;
        Some(precision(t).map(|p| p.as_str().to_string()).unwrap_or_else(|| t.to_string()))
    }
}

impl Joined {
    pub(super) fn comm_sample(&self, k: &Kernel, op: Option<u32>, ctx: &Context) -> Result<CommSample, String> {
        let kname = &self.c.names[k.name as usize];
        let mut facts = CommFacts::default();
        let mut cur = op;
        for _ in 0..MAX_DEPTH {
            let Some(o) = cur else { break };
            if let Some(args) = self.c.ops[o as usize].args.as_deref() {
                if is_comm_op(self.name(o)) || args.collective.is_some() {
                    facts.add(self.name(o), args);
                }
            }
            cur = self.parent[o as usize];
        }
        let label = facts.op_name.clone().unwrap_or_else(|| "NCCL kernel".into());
        let collective = facts.collective.or_else(|| collective_from_kernel(kname)).ok_or_else(|| {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_nccl_kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"));
        assert!(is_nccl_kernel("void ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
        assert!(!is_nccl_kernel("void at::native::vectorized_elementwise_kernel<4>"));
        assert_eq!(collective_from_name("nccl:all_reduce"), Some(Collective::AllReduce));
        assert_eq!(collective_from_name("nccl:_all_gather_base"), Some(Collective::AllGather));
        assert_eq!(collective_from_name("c10d::alltoall_base_"), Some(Collective::AllToAll));
        assert_eq!(collective_from_name("reduce_scatter_tensor_coalesced"), Some(Collective::ReduceScatter));
        assert_eq!(collective_from_name("c10d::broadcast_"), Some(Collective::Broadcast));
        assert_eq!(collective_from_name("nccl:recv"), Some(Collective::SendRecv));
        assert_eq!(collective_from_name("record_param_comms"), None);
        assert_eq!(collective_from_kernel("ncclKernel_AllReduce_RING_LL_Sum_float(x)"), Some(Collective::AllReduce));
        assert_eq!(collective_from_kernel("ncclDevKernel_ReduceScatter_RING_LL(x)"), Some(Collective::ReduceScatter));
        assert_eq!(collective_from_kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(x)"), None);
    }

    #[test]
    fn newer_record_param_comms_fields() {
        let mut f = CommFacts::default();
        let args = OpArgs {
            collective: Some("allgather_into_tensor_coalesced".into()),
            in_nelems: Some(1000),
            out_nelems: Some(8000),
            group_size: Some(8),
            dtype: Some("BFloat16".into()),
            ..Default::default()
        };
        f.add("record_param_comms", &args);
        assert_eq!(f.collective, Some(Collective::AllGather));
        let (ranks, rule) = f.ranks(Collective::AllGather, Some(64), None).unwrap();
        assert_eq!((ranks, rule), (8, "group_size"));
        assert_eq!(f.bytes(Collective::AllGather, 8), Some(16000));
        assert_eq!(f.dtype_name().as_deref(), Some("bf16"));
        let mut g = CommFacts::default();
        g.add(
            "nccl:all_reduce",
            &OpArgs { has_dims: true, dims: vec![Some(vec![10])], types: vec!["float".into()], ..Default::default() },
        );
        assert_eq!((g.collective, g.bytes(Collective::AllReduce, 4)), (Some(Collective::AllReduce), Some(40)));
        assert_eq!(g.ranks(Collective::AllReduce, None, None), None);
        assert_eq!(g.ranks(Collective::AllReduce, None, Some(16)), Some((16, "context")));
    }
}

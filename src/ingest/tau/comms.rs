//! Communication samples ([`comm_samples`]): one per rank and MPI collective timer, with the MPI call's perfcast
//! collective and how TAU's message-size event converts to nccl-tests' byte count; the rules are the parent
//! module's (*Communication.*).

use std::collections::{BTreeMap, BTreeSet};

use super::profile::{who, TauProfile};
use crate::ingest::text::{bytes_u64, number};
use crate::ingest::{Context, Parsed};
use crate::op::Collective;
use crate::samples::{Attributes, CommSample, Rejected, Sample};

/// How TAU's size event relates to nccl-tests' byte count.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    Same,
    TimesRanks,
    Half,
}

/// Collective, event name and scale of an MPI timer's base name; `Err` for calls that are rejected, `Ok(None)` for
/// calls that are not communication samples.
fn mpi_call(base: &str) -> Result<Option<(Collective, &'static str, Scale)>, &'static str> {
    Ok(Some(match base {
        "MPI_Allreduce" => (Collective::AllReduce, "all-reduce", Scale::Same),
        "MPI_Bcast" => (Collective::Broadcast, "broadcast", Scale::Same),
        "MPI_Reduce" => (Collective::Reduce, "reduce", Scale::Same),
        "MPI_Allgather" => (Collective::AllGather, "all-gather", Scale::TimesRanks),
        "MPI_Allgatherv" => (Collective::AllGather, "all-gather", Scale::Same),
        "MPI_Reduce_scatter" | "MPI_Reduce_scatter_block" => {
            (Collective::ReduceScatter, "reduce-scatter", Scale::TimesRanks)
        }
        "MPI_Alltoall" => (Collective::AllToAll, "all-to-all", Scale::TimesRanks),
        "MPI_Alltoallv" => (Collective::AllToAll, "all-to-all", Scale::Half),
        "MPI_Iallreduce"
        | "MPI_Ibcast"
        | "MPI_Ireduce"
        | "MPI_Iallgather"
        | "MPI_Iallgatherv"
        | "MPI_Ialltoall"
        | "MPI_Ialltoallv"
        | "MPI_Ireduce_scatter" => {
            return Err("non-blocking collective: the timer covers only the call that starts it")
        }
        "MPI_Gather" | "MPI_Gatherv" | "MPI_Scatter" | "MPI_Scatterv" | "MPI_Scan" | "MPI_Exscan" => {
            return Err("no perfcast collective for this MPI call")
        }
        "MPI_Send"
        | "MPI_Recv"
        | "MPI_Isend"
        | "MPI_Irecv"
        | "MPI_Ssend"
        | "MPI_Bsend"
        | "MPI_Rsend"
        | "MPI_Sendrecv"
        | "MPI_Sendrecv_replace" => {
            return Err("point-to-point: TAU does not pair sends with receives, and the call time includes waiting")
        }
        _ => return Ok(None),
    }))
}

/// `"MPI_Bcast()   [ <message size> = <1024> ]"` → (`MPI_Bcast`, Some(1024)).
pub(super) fn timer_base(name: &str) -> (&str, Option<f64>) {
    let (head, param) = match name.find('[') {
        Some(p) => (&name[..p], Some(&name[p..])),
        None => (name, None),
    };
    let base = head.trim().trim_end_matches("()").trim();
    let size = param.and_then(|p| {
        let (key, value) = p.split_once('=')?;
        if !key.to_ascii_lowercase().contains("size") {
            return None;
        }
        number(value.trim().trim_end_matches(']').trim().trim_start_matches('<').trim_end_matches('>'))
    });
    (base, size)
}

/// Communication samples of a set of profiles of one run (see the module doc).
pub fn comm_samples(profiles: &[TauProfile], ctx: &Context) -> Parsed {
    let mut out = Parsed::default();
    let node_ids: BTreeSet<u32> = profiles.iter().filter_map(|p| p.node).collect();
    let file_ranks = (node_ids.len() >= 2).then(|| u32::try_from(node_ids.len()).ok()).flatten();
    let ranks = ctx.ranks.filter(|r| *r > 0).or(file_ranks);
    let mut hosts_by_node: BTreeMap<u32, &str> = BTreeMap::new();
    for p in profiles {
        if let (Some(n), Some(h)) = (p.node, p.metadata.get("Hostname").or_else(|| p.metadata.get("Node Name"))) {
            hosts_by_node.insert(n, h.as_str());
        }
    }
    let hosts: BTreeSet<&str> = hosts_by_node.values().copied().collect();
    let derived_nodes = (ctx.ranks.is_none() && !hosts.is_empty() && hosts_by_node.len() == node_ids.len())
        .then_some(hosts.len() as u32);
    let nodes = ctx.nodes.or(derived_nodes);
    let gpus_per_node = ctx.gpus_per_node.or(match (ranks, derived_nodes) {
        (Some(r), Some(n)) if n > 0 && r % n == 0 => Some(r / n),
        _ => None,
    });
    for p in profiles {
        let who = who(p);
        if !p.is_time() {
            out.rejected.push(Rejected { line: 1, reason: format!("{who}: metric {} is not a time", p.metric) });
            continue;
        }
        let called = |b: &str| p.mpi_timers().any(|t| timer_base(&t.name).0 == b && t.calls > 0.0);
        for t in p.mpi_timers() {
            let (base, param_size) = timer_base(&t.name);
            let reject = |out: &mut Parsed, why: String| {
                out.rejected.push(Rejected { line: t.line, reason: format!("{who}: {}: {why}", t.name) })
            };
            let (collective, event, scale) = match mpi_call(base) {
                Ok(Some(c)) => c,
                Ok(None) => continue,
                Err(why) => {
                    if t.calls > 0.0 {
                        reject(&mut out, why.into());
                    }
                    continue;
                }
            };
            if t.calls <= 0.0 {
                continue;
            }
            let mixed = match base {
                "MPI_Allgather" | "MPI_Allgatherv" => called("MPI_Allgather") && called("MPI_Allgatherv"),
                "MPI_Alltoall" | "MPI_Alltoallv" => called("MPI_Alltoall") && called("MPI_Alltoallv"),
                _ => false,
            };
            if mixed && param_size.is_none() {
                reject(&mut out, "the plain and v variants share one size event: sizes cannot be told apart".into());
                continue;
            }
            let Some(ranks) = ranks else {
                reject(&mut out, "the rank count is unknown: upload every rank's profile or give ranks".into());
                continue;
            };
            let event_name = format!("Message size for {event}");
            let ev = p.user_events.iter().find(|e| e.name == event_name && e.count > 0.0);
            let Some(size) = param_size.or(ev.map(|e| e.mean)) else {
                reject(&mut out, format!("no '{event_name}' user event (TAU without MPI message tracking)"));
                continue;
            };
            let factor = match scale {
                Scale::Same => 1.0,
                Scale::TimesRanks => ranks as f64,
                Scale::Half => 0.5,
            };
            let Some(bytes) = bytes_u64(size * factor).filter(|b| *b > 0) else {
                reject(&mut out, format!("message size {size} is not a positive byte count"));
                continue;
            };
            let time_us = t.exclusive / t.calls;
            if !(time_us.is_finite() && time_us > 0.0) {
                reject(&mut out, "exclusive time is not positive".into());
                continue;
            }
            let mut attributes = Attributes::new();
            attributes.insert("source_format".into(), "tau".into());
            attributes.insert("timer".into(), t.name.clone());
            attributes.insert("calls".into(), t.calls.to_string());
            attributes.insert("exclusive_us".into(), t.exclusive.to_string());
            attributes.insert("inclusive_us".into(), t.inclusive.to_string());
            if !p.file.is_empty() {
                attributes.insert("file".into(), p.file.clone());
            }
            if let Some(n) = p.node {
                attributes.insert("rank".into(), n.to_string());
            }
            if let Some(h) = p.metadata.get("Hostname") {
                attributes.insert("hostname".into(), h.clone());
            }
            if let (Some(e), None) = (ev, param_size) {
                attributes.insert("size_events".into(), e.count.to_string());
                attributes.insert("min_bytes".into(), (e.min * factor).to_string());
                attributes.insert("max_bytes".into(), (e.max * factor).to_string());
            }
            if let Some(g) = &ctx.gpu {
                attributes.insert("gpu".into(), g.clone());
            }
            out.samples.push(Sample::Comm(CommSample {
                nodes,
                gpus_per_node,
                attributes,
                ..CommSample::timed(collective, bytes, ranks, time_us)
            }));
        }
    }
    out
}

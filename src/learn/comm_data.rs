//! Communication training sets: measured collectives (OSU / nccl-tests samples) turned into (features, α–β
//! baseline, measured time) rows, one training set per collective across every system.

use std::collections::BTreeMap;

use serde::Serialize;

use super::comm_features::{comm_features, COMM_FEATURES};
use super::fit::TrainingSet;
use crate::comm::calibrated::SystemCalibration;
use crate::comm::{Group, GroupLinks};
use crate::hw::System;
use crate::op::Collective;
use crate::samples::CommSample;

/// The placements a communication regressor was trained on: it corrects only collectives within them (a
/// correction learned on node pairs says nothing about ten nodes).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Domain {
    /// Most nodes of any training row's group.
    pub max_nodes: u32,
    /// Most ranks of any training row's group.
    pub max_ranks: u32,
}

/// Where a sample's ranks sat: its nodes and ranks per node (derived from each other when one is missing).
pub fn sample_group(s: &CommSample) -> Group {
    let ranks = s.ranks.max(1);
    let (nodes, per) = match (s.nodes, s.gpus_per_node) {
        (Some(n), Some(g)) => (n.max(1), g.max(1)),
        (Some(n), None) => (n.max(1), ranks.div_ceil(n.max(1))),
        (None, Some(g)) => (ranks.div_ceil(g.max(1)), g.max(1).min(ranks)),
        (None, None) => (1, ranks),
    };
    Group { ranks, nodes, ranks_per_node: per.min(ranks) }
}

fn split_key(system: &str, i: usize, s: &CommSample) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (system, i, s.collective, s.bytes, s.ranks, s.nodes, s.time_us.to_bits()).hash(&mut h);
    h.finish()
}

/// The training sets of every collective, by collective, with the placements they cover.
pub type CommTrainingSets = BTreeMap<Collective, (TrainingSet, Domain)>;

/// Adds the samples of one system (`name`, resolved as `system`, calibrated as `cal`) to `sets`. The baseline is
/// the α–β algorithms over the system's calibrated links, never a measured group's own fit (which would leave
/// nothing to learn); rows the training set rejects do not widen the domain.
pub fn push_system_samples(
    sets: &mut CommTrainingSets,
    name: &str,
    system: &System,
    samples: &[CommSample],
    cal: &SystemCalibration,
) {
    for (i, s) in samples.iter().enumerate() {
        let group = sample_group(s);
        // The calibrated links (exact group fits skipped), or the declared ones.
        let base_links = GroupLinks::on(system, group.ranks_per_node);
        let links = cal.links(s.collective, group.ranks_per_node, &base_links);
        let base = crate::comm::estimate(s.collective, s.bytes as f64, group, &links).time_us;
        let x = comm_features(s.collective, s.bytes as f64, group, &links, base);
        let (set, domain) =
            sets.entry(s.collective).or_insert_with(|| (TrainingSet::new(&COMM_FEATURES), Domain::default()));
        if set.push(&x, base, s.time_us, split_key(name, i, s)) {
            domain.max_nodes = domain.max_nodes.max(group.nodes);
            domain.max_ranks = domain.max_ranks.max(group.ranks);
        }
    }
}

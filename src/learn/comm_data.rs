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

/// Adds the samples of one system (`name`, resolved as `system`, calibrated as `cal`) to `sets`; rows the training
/// set rejects do not widen the domain.
///
/// The regressor is asked in two situations ([`crate::learn::backend::LearnedBackend`]'s collectives), and each
/// sample is a row of both (same label, same split key, so both sit on the same side of the hold-out):
/// 1. over the system's **calibrated links** (a system with its own samples, a group it did not measure): the α–β
///    algorithms over the links `cal` fitted, never a measured group's own fit (which would leave nothing to learn),
///    marked achieved;
/// 2. for groups within one node, over its **declared links** (every preset and any system without samples, e.g.
///    `dgx-b200`): the α–β algorithms over the datasheet links it declares, marked achieved only where the
///    system's links are ([`crate::hw::Link::achieved`], e.g. `dgx-h100`'s 350 GB/s).
///
/// Trained on the first alone, the model only saw baselines that already match the measurement (the single-node
/// links are fitted to the largest group of the same collective), and answered a declared-links baseline with
/// the same ratio ≈ 1: aiconfigurator's B200 all-to-all, 8 GPUs, 268,435,456 B, measured 435.7 µs
/// (`b200_sxm/nccl_perf.csv.gz`, NCCL 2.29.2) came out 272.9 µs on `dgx-b200` (NVLink 5 declared at 900 GB/s,
/// baseline 7/8 · 268.4 MB / 900 GB/s = 261 µs). A system whose calibration changes nothing gets one row.
pub fn push_system_samples(
    sets: &mut CommTrainingSets,
    name: &str,
    system: &System,
    samples: &[CommSample],
    cal: &SystemCalibration,
) {
    for (i, s) in samples.iter().enumerate() {
        let group = sample_group(s);
        let declared = GroupLinks::on(system, group.ranks_per_node);
        // The calibrated links (exact group fits skipped; measured, so achieved), then the declared ones when they
        // differ (achieved only where the system says so).
        let calibrated = cal.links(s.collective, group.ranks_per_node, &declared);
        let datasheet = (declared, crate::cost::derate::achieved(system, group));
        // Across nodes only the calibrated row: the multi-node train rows are the H100 cluster's node pairs, whose
        // ratio to its declared InfiniBand would be taught to every uncalibrated multi-node group (vLLM's EP 16 over
        // two DGX B200 came out 3× slower in `eval serving`).
        let rows: &[(GroupLinks, bool)] = if calibrated == declared {
            &[datasheet]
        } else if group.nodes > 1 {
            &[(calibrated, true)]
        } else {
            &[(calibrated, true), datasheet]
        };
        for (links, achieved) in rows {
            let base = crate::comm::estimate(s.collective, s.bytes as f64, group, links).time_us;
            let x = comm_features(s.collective, s.bytes as f64, group, links, base, *achieved);
            let (set, domain) =
                sets.entry(s.collective).or_insert_with(|| (TrainingSet::new(&COMM_FEATURES), Domain::default()));
            if set.push(&x, base, s.time_us, split_key(name, i, s)) {
                domain.max_nodes = domain.max_nodes.max(group.nodes);
                domain.max_ranks = domain.max_ranks.max(group.ranks);
            }
        }
    }
}

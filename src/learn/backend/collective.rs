//! The learned backend's collectives: the baseline (a measured group's fit, calibrated or declared links), a
//! serving engine's own measured all-reduce, and the learned correction floored at the link bound (moved out of
//! `src/learn/backend.rs`).

use super::LearnedBackend;
use crate::comm::calibrated::CalibrationUse;
use crate::comm::{self, CommEstimate, Group, GroupLinks};
use crate::cost::{CostBackend, KernelChoice, Source, Timed};
use crate::learn::comm_features::{comm_features, comm_key};
use crate::learn::fit::MAX_ABS_LOG_RATIO;
use crate::learn::ActiveRegressor;
use crate::op::Collective;

impl LearnedBackend {
    /// The baseline of a collective before any learned correction: the measured group's fit, the α–β algorithms
    /// over calibrated links, or over the declared links; with the links used and the source.
    pub fn collective_baseline(
        &self,
        c: Collective,
        bytes: f64,
        group: Group,
        active_per_node: u32,
    ) -> (CommEstimate, GroupLinks, Source, bool) {
        let system = self.analytic.system();
        let links = GroupLinks::on(system, active_per_node);
        if let Some(cal) = &self.calibration {
            if let Some((e, how)) = cal.estimate(c, bytes, group, &links) {
                let source = Source::Calibrated { system: system.name.clone() };
                return (e, cal.links(c, group.ranks_per_node, &links), source, how == CalibrationUse::MeasuredGroup);
            }
        }
        (comm::estimate(c, bytes, group, &links), links, Source::Analytic, false)
    }
    /// A serving engine's all-reduce within one node, timed by that engine's measured kernel (or the closest
    /// engine's, named in the source; [`comm::engine_allreduce`]), never faster than the links allow
    /// ([`comm::link_bound_us`]). None for other collectives, other kernel choices (training), groups across nodes
    /// and where no table answers: the NCCL path then times it.
    fn engine_allreduce(
        &self,
        c: Collective,
        bytes: f64,
        group: Group,
        active_per_node: u32,
        analytic_us: f64,
    ) -> Option<Timed> {
        let KernelChoice::Engine(engine) = self.kernels else { return None };
        if c != Collective::AllReduce {
            return None;
        }
        let system = self.analytic.system();
        let m = comm::engine_allreduce::engine_allreduce(engine, system, group.ranks, group.nodes, bytes)?;
        let links = GroupLinks::on(system, active_per_node);
        let t = m.time_us.max(comm::link_bound_us(c, bytes, group, &links));
        let instead_of = (m.engine != engine).then_some(engine);
        Some(Timed::new(t, analytic_us, Source::Measured { table: m.table(), instead_of }))
    }
    /// [`CostBackend::collective`]: the engine's own all-reduce, else the baseline corrected by the learned model
    /// (within the placements it was trained on), never faster than the links allow.
    pub(super) fn learned_collective(&self, c: Collective, bytes: f64, group: Group, active_per_node: u32) -> Timed {
        let analytic_us = self.analytic.collective(c, bytes, group, active_per_node).time_us;
        if let Some(t) = self.engine_allreduce(c, bytes, group, active_per_node, analytic_us) {
            return t;
        }
        let (base, links, source, measured) = self.collective_baseline(c, bytes, group, active_per_node);
        // A measured group's own fit is the best answer; elsewhere the learned correction applies, within the
        // placements it was trained on.
        if !measured {
            let within = |m: &ActiveRegressor| {
                m.trained_max("max_nodes").is_none_or(|n| group.nodes as f64 <= n)
                    && m.trained_max("max_ranks").is_none_or(|r| group.ranks as f64 <= r)
            };
            if let Some(m) = self.registry.get(&comm_key(c)).filter(|m| within(m)) {
                // Calibrated links were measured; declared ones are achieved only where the system says so.
                let achieved = matches!(source, Source::Calibrated { .. })
                    || crate::cost::derate::achieved(self.analytic.system(), group);
                let x = comm_features(c, bytes, group, &links, base.time_us, achieved);
                if let Ok(r) = m.model.predict(&x) {
                    let t = base.time_us * r[0].clamp(-MAX_ABS_LOG_RATIO, MAX_ABS_LOG_RATIO).exp();
                    // Learned on other machines, the correction may not make this system's links faster than they
                    // are (a Slingshot-10 node's 4 × 6.25 GB/s answered like a DGX's InfiniBand).
                    let t = t.max(comm::link_bound_us(c, bytes, group, &links));
                    return Timed::new(t, analytic_us, m.source());
                }
            }
        }
        Timed::new(base.time_us, analytic_us, source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::presets;
    use crate::learn::fit::{fit, Grid, TrainingSet};
    use crate::learn::lgbm::Model;
    use crate::learn::Registry;
    use std::sync::Arc;

    #[test]
    fn a_learned_collective_is_never_faster_than_the_systems_links() {
        use crate::learn::comm_features::COMM_FEATURES;
        let system = presets().into_iter().find(|p| p.name == "perlmutter-a100-40g").unwrap().resolve().unwrap();
        // An all-reduce model that learned "4× faster than the α–β baseline" everywhere (as a model trained on
        // machines with faster networks may answer a Slingshot-10 system): r̂ = ln 0.25 on every row.
        let mut set = TrainingSet::new(&COMM_FEATURES);
        let mut key = 0;
        for (ranks, per_node) in [(2u32, 2u32), (4, 4), (8, 4), (16, 4), (4, 1)] {
            let group = Group::new(ranks, per_node);
            let links = GroupLinks::on(&system, 4);
            for bytes in [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9] {
                let base = comm::estimate(Collective::AllReduce, bytes, group, &links).time_us;
                let x = comm_features(Collective::AllReduce, bytes, group, &links, base, false);
                set.push(&x, base, base * 0.25, key);
                key += 1;
            }
        }
        let fitted = fit(&set, Grid::Minimal, &mut |_| {}).unwrap();
        let model = ActiveRegressor {
            key: comm_key(Collective::AllReduce),
            version: 1,
            model: Model::from_text(&fitted.model_text).unwrap(),
            feature_names: COMM_FEATURES.iter().map(|s| s.to_string()).collect(),
            validation_mape: fitted.validation.mape,
            summary: serde_json::Value::Null,
        };
        let b = LearnedBackend::new(system, Arc::new(Registry::new([model])));
        // tp 8 across two Perlmutter nodes, 100 MB (S1's tensor-parallel all-reduce across Slingshot-10): the
        // baseline is the hierarchical algorithm, 2·3·2 + 2·3/4 · 1e8 / 300e9 + 2·1·5 + 2·1/2 · (1e8/4) / 6.25e9 =
        // 12 + 500 + 10 + 4,000 = 4,522 µs; a quarter of it, 1,130.5 µs, would need each node to export its half of
        // the vector (5e7 B) through its 4 × 6.25 = 25 GB/s in 1,130.5 µs (44 GB/s). The answer is the link bound,
        // 5e7 / 25e9 = 2,000 µs.
        let t = b.collective(Collective::AllReduce, 1e8, Group::new(8, 4), 4);
        assert!(t.source.to_string().starts_with("regressor:comm.all_reduce"), "{}", t.source);
        assert!((t.analytic_us - 4522.0).abs() < 1e-6, "{}", t.analytic_us);
        assert!((t.time_us - 2000.0).abs() < 1e-6, "{}", t.time_us);
        // Within a node the NVLink 3 bound is 3/4 · 1e8 / 300e9 = 250 µs; the baseline (Rabenseifner) 2·2·2 + 2·3/4 ·
        // 1e8 / 300e9 = 508 µs, a quarter of it 127 µs: floored at 250.
        let t = b.collective(Collective::AllReduce, 1e8, Group::new(4, 4), 4);
        assert!((t.time_us - 250.0).abs() < 1e-6, "{}", t.time_us);
        // A 1 kB all-reduce is latency: the baseline (recursive doubling) 2 · (2 + 1e3 / 300e9) = 4.0067 µs, the
        // learned quarter ≈ 1.0 µs (within 5 %: the trees' mean of ln 0.25), far above the bandwidth bound
        // 3/4 · 1e3 / 300e9 = 0.0025 µs: not floored.
        let t = b.collective(Collective::AllReduce, 1e3, Group::new(4, 4), 4);
        assert!((t.analytic_us - 4.0067).abs() < 1e-4, "{}", t.analytic_us);
        assert!((t.time_us / (4.0067 * 0.25) - 1.0).abs() < 0.05, "{}", t.time_us);
    }
}

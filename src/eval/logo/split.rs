//! The measured rows of a leave-one-GPU-out run, grouped by regressor key and GPU, and the split of one group for
//! one held-out GPU: every other GPU's rows train (each GPU thinned to an equal share of `max_rows`), the held-out
//! GPU's rows test. No held-out row ever reaches the training side; the unit tests check it on a hand-built group.

use std::collections::BTreeMap;

use crate::hw::{GpuSpec, Precision};
use crate::learn::fit::thin_evenly;
use crate::learn::op_data::OpObservation;
use crate::op::{Dims, OpClass, Phase};

/// One measured operator call: shape (the class's dims, [`crate::op`]), time in µs, and its load order within its
/// group (a stable key for the fit's 80/20 validation split).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub dims: Dims,
    pub time_us: f64,
    pub seq: u64,
}

/// One GPU's rows of a group.
#[derive(Debug, Clone)]
pub struct GpuRows {
    pub gpu: &'static GpuSpec,
    pub rows: Vec<Measured>,
}

/// The rows of one regressor key (class, phase, dtype, and for MoE the routing distribution when it is kept
/// apart), by GPU catalog name.
#[derive(Debug, Clone)]
pub struct Group {
    pub class: OpClass,
    pub phase: Phase,
    pub dtype: Precision,
    pub by_gpu: BTreeMap<String, GpuRows>,
    /// Rows added so far (the next row's `seq`).
    added: u64,
}

/// Groups by key.
#[derive(Debug, Clone, Default)]
pub struct Groups {
    pub by_key: BTreeMap<String, Group>,
}

impl Groups {
    /// Adds one measured row of `key` on `gpu`.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        key: &str,
        class: OpClass,
        phase: Phase,
        dtype: Precision,
        gpu: &'static GpuSpec,
        dims: Dims,
        time_us: f64,
    ) {
        let group = self.by_key.entry(key.to_string()).or_insert_with(|| Group {
            class,
            phase,
            dtype,
            by_gpu: BTreeMap::new(),
            added: 0,
        });
        let seq = group.added;
        group.added += 1;
        let rows = &mut group.by_gpu.entry(gpu.name.clone()).or_insert_with(|| GpuRows { gpu, rows: Vec::new() }).rows;
        rows.push(Measured { dims, time_us, seq });
    }

    /// Rows in all groups.
    pub fn rows(&self) -> usize {
        self.by_key.values().flat_map(|g| g.by_gpu.values()).map(|r| r.rows.len()).sum()
    }
}

/// Fewest other GPUs that must train for a GPU to be held out: with one, "unseen GPU" means "that GPU's twin".
pub const MIN_TRAINING_GPUS: usize = 2;

impl Group {
    /// The GPUs that can be held out: those with rows while at least [`MIN_TRAINING_GPUS`] others have rows.
    pub fn held_out_candidates(&self) -> Vec<&str> {
        let with_rows: Vec<&str> =
            self.by_gpu.iter().filter(|(_, r)| !r.rows.is_empty()).map(|(n, _)| n.as_str()).collect();
        if with_rows.len() < MIN_TRAINING_GPUS + 1 {
            return Vec::new();
        }
        with_rows
    }

    /// The split for `held`: (training observations, test observations). Training holds every other GPU's rows,
    /// each GPU thinned evenly ([`thin_evenly`]) to ⌈`max_rows` / training GPUs⌉ so that a GPU with a denser grid
    /// does not outvote the others (`max_rows` = 0 keeps every row), in load order; test holds all of `held`'s
    /// rows.
    pub fn split(&self, held: &str, max_rows: usize) -> (Vec<OpObservation<'static>>, Vec<OpObservation<'static>>) {
        let training_gpus = self.by_gpu.iter().filter(|(n, r)| n.as_str() != held && !r.rows.is_empty()).count();
        let per_gpu = if max_rows == 0 { 0 } else { max_rows.div_ceil(training_gpus.max(1)) };
        let obs = |r: &GpuRows, m: &Measured| OpObservation {
            gpu: r.gpu,
            dims: m.dims,
            time_us: m.time_us,
            split_key: m.seq,
        };
        let mut train = Vec::new();
        let mut test = Vec::new();
        for (name, r) in &self.by_gpu {
            if name == held {
                test.extend(r.rows.iter().map(|m| obs(r, m)));
            } else {
                train.extend(thin_evenly(r.rows.iter().collect(), per_gpu).into_iter().map(|m| obs(r, m)));
            }
        }
        // Load order, GPUs interleaved as read: LightGBM's bagging depends on row order.
        train.sort_by_key(|o| o.split_key);
        (train, test)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::lookup;

    fn spec(name: &str) -> &'static GpuSpec {
        &lookup(name).unwrap().spec
    }

    /// Three GPUs; each row's time encodes its GPU (1000s) and index, so a row's origin can be read back.
    fn sample() -> Groups {
        let mut g = Groups::default();
        for (k, name) in ["H100-SXM5-80GB", "L40S", "B200"].iter().enumerate() {
            let n = [10, 4, 6][k];
            for i in 0..n {
                let time = (k as f64 + 1.0) * 1000.0 + i as f64;
                g.add(
                    "linear.fwd.bf16",
                    OpClass::Linear,
                    Phase::Fwd,
                    Precision::Bf16,
                    spec(name),
                    [1, 64, 64, 64 + i, 0],
                    time,
                );
            }
        }
        // A key on two GPUs only: nothing can be held out.
        g.add("moe.fwd.fp8", OpClass::Moe, Phase::Fwd, Precision::Fp8, spec("H100-SXM5-80GB"), [1, 2, 3, 4, 1], 5.0);
        g.add("moe.fwd.fp8", OpClass::Moe, Phase::Fwd, Precision::Fp8, spec("L40S"), [1, 2, 3, 4, 1], 6.0);
        g
    }

    #[test]
    fn the_held_out_gpu_never_trains() {
        let g = sample();
        assert_eq!(g.rows(), 22);
        let group = &g.by_key["linear.fwd.bf16"];
        assert_eq!(group.held_out_candidates(), vec!["B200", "H100-SXM5-80GB", "L40S"]);
        for held in group.held_out_candidates() {
            let (train, test) = group.split(held, 0);
            assert!(train.iter().all(|o| o.gpu.name != held), "{held}");
            assert!(test.iter().all(|o| o.gpu.name == held), "{held}");
            // Unthinned, the two sides partition the group's 20 rows.
            assert_eq!(train.len() + test.len(), 20);
            let mut keys: Vec<u64> = train.iter().chain(&test).map(|o| o.split_key).collect();
            keys.sort();
            keys.dedup();
            assert_eq!(keys.len(), 20);
        }
        // Holding out L40S (the second GPU: times 2000–2003) tests exactly its four rows and trains on none of them.
        let (train, test) = group.split("L40S", 0);
        let mut t: Vec<f64> = test.iter().map(|o| o.time_us).collect();
        t.sort_by(f64::total_cmp);
        assert_eq!(t, vec![2000.0, 2001.0, 2002.0, 2003.0]);
        assert!(train.iter().all(|o| o.time_us < 2000.0 || o.time_us >= 3000.0));
        assert!(g.by_key["moe.fwd.fp8"].held_out_candidates().is_empty());
    }

    #[test]
    fn thinning_gives_each_training_gpu_an_equal_share() {
        let group = &sample().by_key["linear.fwd.bf16"];
        // Held out L40S, max 6 rows over 2 training GPUs → ⌈6/2⌉ = 3 each: H100's 10 rows step ⌈10/3⌉ = 4
        // (indices 0, 4, 8), B200's 6 rows step 2 (0, 2, 4). The test side is not thinned.
        let (train, test) = group.split("L40S", 6);
        assert_eq!(test.len(), 4);
        let mut t: Vec<f64> = train.iter().map(|o| o.time_us).collect();
        t.sort_by(f64::total_cmp);
        assert_eq!(t, vec![1000.0, 1004.0, 1008.0, 3000.0, 3002.0, 3004.0]);
    }
}

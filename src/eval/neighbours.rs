//! The train-neighbour reference of `perfcast eval operators`: how well the train split's own measurements
//! predict a test row of the same GPU when a train row of nearly the same shape exists.
//!
//! For a test row it takes the train samples of the same operator class, phase, precision and GPU whose every
//! dimension is within a factor [`TOLERANCE`] of the test row's, scales each one's measured time by the work ratio
//! (the product of the dims: FLOPs for GEMMs, elements for vector ops) and answers the median. It is a lookup
//! table, not a model perfcast serves: its error on the rows it covers is the floor that any model trained on the
//! train split can expect there, because it measures how much the two collection campaigns disagree at equal
//! shapes (NeuSight's P4 test rows, for one, ran another cuBLAS kernel family than its train rows).

use std::collections::HashMap;

use crate::op::{Dims, DIMS};
use crate::samples::OpSample;

/// Largest ratio between a test row's dimension and a neighbour's (each dimension separately).
pub const TOLERANCE: f64 = 1.25;

type Key = (String, String, String, String);

/// A (class, phase, dtype, GPU) key with the half-octave buckets of the dims.
type Cell = (Key, [i64; DIMS]);

/// A train sample's dims and measured time, µs.
type Measured = (Dims, f64);

fn key(s: &OpSample, gpu: &str) -> Key {
    (s.op.as_str().to_string(), s.phase.as_str().to_string(), s.dtype.as_str().to_string(), gpu.to_string())
}

/// Work of a shape: the product of its non-zero dims.
fn work(dims: &Dims) -> f64 {
    dims.iter().filter(|&&d| d > 0).map(|&d| d as f64).product()
}

/// Bucket of one dim: half-octaves, so every neighbour within [`TOLERANCE`] (< 2^0.5) is in the same or an
/// adjacent bucket.
fn bucket(d: u64) -> i64 {
    ((d.max(1) as f64).log2() * 2.0).floor() as i64
}

/// Train samples indexed by (class, phase, dtype, canonical GPU) and dim buckets.
#[derive(Default)]
pub struct Neighbours {
    index: HashMap<Cell, Vec<Measured>>,
}

impl Neighbours {
    /// Adds one train sample of `gpu` (its canonical name).
    pub fn add(&mut self, s: &OpSample, gpu: &str) {
        if s.time_us.is_finite() && s.time_us > 0.0 {
            self.index.entry((key(s, gpu), s.dims.map(bucket))).or_default().push((s.dims, s.time_us));
        }
    }

    /// The reference answer for `s` on `gpu`, µs: the median work-scaled time of its train neighbours, or
    /// `None` when it has none.
    pub fn predict(&self, s: &OpSample, gpu: &str) -> Option<f64> {
        let k = key(s, gpu);
        let b = s.dims.map(bucket);
        let w = work(&s.dims);
        let mut times = Vec::new();
        for code in 0..3_i64.pow(DIMS as u32) {
            let mut nb = b;
            let mut c = code;
            for v in nb.iter_mut() {
                *v += c % 3 - 1;
                c /= 3;
            }
            let Some(list) = self.index.get(&(k.clone(), nb)) else { continue };
            for (dims, t) in list {
                let near = dims.iter().zip(&s.dims).all(|(&a, &b)| {
                    let (a, b) = (a.max(1) as f64, b.max(1) as f64);
                    a / b <= TOLERANCE && b / a <= TOLERANCE
                });
                if near {
                    times.push(t * w / work(dims));
                }
            }
        }
        if times.is_empty() {
            return None;
        }
        times.sort_by(f64::total_cmp);
        let n = times.len();
        Some(if n % 2 == 1 { times[n / 2] } else { (times[n / 2 - 1] + times[n / 2]) / 2.0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::Precision;
    use crate::op::{OpClass, Phase};

    fn sample(dims: [u64; 4], time_us: f64) -> OpSample {
        OpSample {
            op: OpClass::Bmm,
            phase: Phase::Fwd,
            dtype: Precision::Fp32,
            gpu: "T4".into(),
            dims: crate::op::dims_from(&dims),
            time_us,
            attributes: Default::default(),
        }
    }

    #[test]
    fn the_reference_is_the_median_of_work_scaled_neighbours() {
        let mut n = Neighbours::default();
        // Work 1·100·100·100 = 1e6 at 10 µs; 1·110·100·100 = 1.1e6 at 22 µs; 1·120·100·100 = 1.2e6 at 12 µs;
        // 1·200·100·100 is 2× away (not a neighbour).
        n.add(&sample([1, 100, 100, 100], 10.0), "T4");
        n.add(&sample([1, 110, 100, 100], 22.0), "T4");
        n.add(&sample([1, 120, 100, 100], 12.0), "T4");
        n.add(&sample([1, 200, 100, 100], 1.0), "T4");
        // Test 1·105·100·100 (work 1.05e6): 10·1.05 = 10.5, 22·1.05/1.1 = 21.0, 12·1.05/1.2 = 10.5 → median 10.5.
        let t = n.predict(&sample([1, 105, 100, 100], 0.0), "T4").unwrap();
        assert!((t - 10.5).abs() < 1e-9, "{t}");
        // Another GPU has no neighbours.
        assert_eq!(n.predict(&sample([1, 105, 100, 100], 0.0), "P4"), None);
        // 1·300·… is 1.5× from 200 and farther from the rest.
        assert_eq!(n.predict(&sample([1, 300, 100, 100], 0.0), "T4"), None);
        // 1·240·… has one neighbour, 200 (1.2×): 1·(240/200) = 1.2 µs.
        let t = n.predict(&sample([1, 240, 100, 100], 0.0), "T4").unwrap();
        assert!((t - 1.2).abs() < 1e-9, "{t}");
    }
}

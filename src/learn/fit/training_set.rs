//! The rows a correction model is fitted on, and their fixed 80/20 split: each row's side is a seeded hash of
//! its `split_key`, so a retrain on more data keeps the old validation rows in validation.

/// Seed of the 80/20 split.
pub const SPLIT_SEED: u64 = 0x5EED_CAFE_F00D_0001;

/// Rows to fit: features (row-major), analytic and measured times, and a stable key per row for the split.
#[derive(Debug, Clone, Default)]
pub struct TrainingSet {
    pub feature_names: Vec<String>,
    /// Row-major, `rows · feature_names.len()` values.
    pub x: Vec<f64>,
    pub analytic_us: Vec<f64>,
    pub measured_us: Vec<f64>,
    /// Stable per-row key (e.g. the sample's content hash); decides the row's side of the split.
    pub split_key: Vec<u64>,
}

impl TrainingSet {
    /// An empty set with these feature names.
    pub fn new(feature_names: &[&str]) -> TrainingSet {
        TrainingSet { feature_names: feature_names.iter().map(|s| s.to_string()).collect(), ..Default::default() }
    }

    /// Adds one row. Rows with a non-positive or non-finite time, or an infinite feature, are skipped (returns
    /// false); NaN features are kept as missing values.
    pub fn push(&mut self, features: &[f64], analytic_us: f64, measured_us: f64, split_key: u64) -> bool {
        let ok = analytic_us.is_finite() && analytic_us > 0.0 && measured_us.is_finite() && measured_us > 0.0;
        if ok && features.len() == self.feature_names.len() && features.iter().all(|v| !v.is_infinite()) {
            self.x.extend_from_slice(features);
            self.analytic_us.push(analytic_us);
            self.measured_us.push(measured_us);
            self.split_key.push(split_key);
            true
        } else {
            false
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.measured_us.len()
    }

    /// True without rows.
    pub fn is_empty(&self) -> bool {
        self.measured_us.is_empty()
    }

    pub(super) fn n_features(&self) -> usize {
        self.feature_names.len()
    }

    fn row(&self, i: usize) -> &[f64] {
        let n = self.n_features();
        &self.x[i * n..(i + 1) * n]
    }

    /// True when row `i` belongs to the 20 % validation side of the seeded split.
    pub fn is_validation(&self, i: usize) -> bool {
        is_validation_key(self.split_key[i])
    }

    /// The features (row-major) and log ratios ln(measured / analytic) of `rows`, as LightGBM takes them.
    pub(super) fn subset(&self, rows: &[usize]) -> (Vec<f64>, Vec<f32>) {
        let mut x = Vec::with_capacity(rows.len() * self.n_features());
        let mut y = Vec::with_capacity(rows.len());
        for &i in rows {
            x.extend_from_slice(self.row(i));
            y.push((self.measured_us[i] / self.analytic_us[i]).ln() as f32);
        }
        (x, y)
    }
}

/// SplitMix64 of the key and [`SPLIT_SEED`]: the row is in validation when the result is ≡ 0 (mod 5).
pub fn is_validation_key(key: u64) -> bool {
    let mut z = key ^ SPLIT_SEED;
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    z % 5 == 0
}

/// Rows of each side of the split.
pub fn split(set: &TrainingSet) -> (Vec<usize>, Vec<usize>) {
    (0..set.len()).partition(|&i| !set.is_validation(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_about_one_in_five_and_stable() {
        let val = (0..10_000u64).filter(|&k| is_validation_key(k)).count();
        assert!((1800..2200).contains(&val), "{val}");
        assert_eq!(is_validation_key(42), is_validation_key(42));
    }
}

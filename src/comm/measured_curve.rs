//! Measured curves read off committed tables: the shared reader of the serving engines' measured-kernel CSVs
//! ([`crate::comm::engine_allreduce`]'s `engine_allreduce.csv`, `llm::serving::wideep`'s `wideep.csv`, both written
//! from aiconfigurator's tables, train split, DATA.md).
//!
//! A table is one row per measurement: a key (which kernel, group or shape), aiconfigurator's `device` name and one
//! point (x, y) — message bytes or tokens per rank against µs per call. [`read_curves`] reads it once with the `csv`
//! crate into one [`MeasuredCurve`] per key and GPU, resolving the device through the GPU catalog
//! ([`crate::hw::lookup`]) so that a curve carries what [`stand_ins`] needs: the GPU's compute capability and DRAM
//! bandwidth (the catalog's datasheet values). [`interpolate`] answers between the measured x in log-log, and
//! [`stand_ins`] orders the measured GPUs that may answer for a GPU that has no table.
//!
//! Each table module keeps only its own row type ([`CurveRow`]) and key. May import: `hw` (the catalog).

use serde::de::DeserializeOwned;

use crate::hw::{lookup, GpuSpec};

/// One measured curve: the points of one key on one GPU model.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredCurve<K> {
    /// The table's own key of the curve (an engine and group size, a kernel kind and shape).
    pub key: K,
    /// perfcast's catalog name of the GPU (aiconfigurator's `device` resolved through [`lookup`]).
    pub gpu: String,
    /// The GPU's compute capability (`"10.3"`), as the catalog gives it (for the stand-in choice).
    pub cc: Option<String>,
    /// Its major version ([`GpuSpec::compute_major`]).
    pub cc_major: Option<u32>,
    /// The GPU's DRAM bandwidth, GB/s (datasheet, the catalog's [`GpuSpec::memory_bandwidth_gbs`]).
    pub memory_bandwidth_gbs: f64,
    /// (x, y) points sorted by x (x: the table's size, as message bytes or tokens per rank; y: µs per call).
    pub points: Vec<(f64, f64)>,
}

/// One table row reduced to its curve's key, device and point.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint<K> {
    /// The curve's key.
    pub key: K,
    /// aiconfigurator's `device` name (`NVIDIA B200`), looked up in the GPU catalog.
    pub device: String,
    /// The measured size (message bytes, tokens per rank); must be > 0.
    pub x: f64,
    /// The measured time, µs; must be > 0.
    pub y: f64,
}

/// A table's row, deserialized by the `csv` crate from the header's column names.
pub trait CurveRow: DeserializeOwned {
    /// What tells one curve of the table from another on the same GPU.
    type Key: PartialEq;
    /// The row's point; None skips the row (a kind or engine the code does not know).
    fn point(self) -> Option<CurvePoint<Self::Key>>;
}

/// The curves of a CSV table with a header line, in the order their first rows appear, each one's points sorted
/// by x. Rows that do not deserialize as `R`, that [`CurveRow::point`] skips, whose device the catalog does not
/// know, or whose x or y is not > 0 are skipped (the committed tables have none: each module's test holds every
/// row).
pub fn read_curves<R: CurveRow>(csv: &str) -> Vec<MeasuredCurve<R::Key>> {
    let mut out: Vec<MeasuredCurve<R::Key>> = Vec::new();
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    for row in reader.deserialize::<R>() {
        let Some(p) = row.ok().and_then(R::point) else { continue };
        let Some(gpu) = lookup(&p.device) else { continue };
        if !(p.x > 0.0 && p.y > 0.0) {
            continue;
        }
        let name = &gpu.spec.name;
        match out.iter_mut().find(|c| c.key == p.key && &c.gpu == name) {
            Some(c) => c.points.push((p.x, p.y)),
            None => out.push(MeasuredCurve {
                key: p.key,
                gpu: name.clone(),
                cc: gpu.spec.compute_capability.clone(),
                cc_major: gpu.spec.compute_major(),
                memory_bandwidth_gbs: gpu.spec.memory_bandwidth_gbs,
                points: vec![(p.x, p.y)],
            }),
        }
    }
    for c in &mut out {
        c.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Log-log interpolation of `(x, y)` points sorted by x at `x`: between the two measured x around it,
/// y = exp(ln y₀ + w · ln(y₁ / y₀)) with w = ln(x / x₀) / ln(x₁ / x₀); the smallest x's y at or below it (the
/// latency floor); None above the largest x (no extrapolation) or for no points.
pub fn interpolate(points: &[(f64, f64)], x: f64) -> Option<f64> {
    let (first, last) = (points.first()?, points.last()?);
    if x <= first.0 {
        return Some(first.1);
    }
    if x > last.0 {
        return None;
    }
    let i = points.partition_point(|p| p.0 < x);
    let (hi, lo) = (points[i], points[i - 1]);
    if hi.0 == x {
        return Some(hi.1);
    }
    let w = (x / lo.0).ln() / (hi.0 / lo.0).ln();
    Some((lo.1.ln() + w * (hi.1 / lo.1).ln()).exp())
}

/// The measured GPUs that may stand in for `gpu` (which has no table, or none that answers), best first: those of
/// the same compute-capability major version only, the same full compute capability first, then the nearest in
/// DRAM bandwidth, then by name; each GPU once, never `gpu` itself. Empty when `gpu` has no compute capability.
/// (H200 → H100, GB300 → B300: a GPU of the same generation and memory runs the same kernels nearest in time.)
pub fn stand_ins<'a, K>(curves: &'a [MeasuredCurve<K>], gpu: &GpuSpec) -> Vec<&'a str> {
    let Some(major) = gpu.compute_major() else { return Vec::new() };
    let mut others: Vec<&MeasuredCurve<K>> =
        curves.iter().filter(|c| c.gpu != gpu.name && c.cc_major == Some(major)).collect();
    others.sort_by(|a, b| {
        let other_cc = |c: &MeasuredCurve<K>| c.cc != gpu.compute_capability;
        let d = |c: &MeasuredCurve<K>| (c.memory_bandwidth_gbs - gpu.memory_bandwidth_gbs).abs();
        other_cc(a).cmp(&other_cc(b)).then_with(|| d(a).total_cmp(&d(b))).then_with(|| a.gpu.cmp(&b.gpu))
    });
    others.dedup_by(|a, b| a.gpu == b.gpu);
    others.into_iter().map(|c| c.gpu.as_str()).collect()
}

#[cfg(test)]
#[path = "measured_curve_tests.rs"]
mod tests;

//! Serving's achievable efficiencies: like [`crate::cost::Derated`], but a matrix operator is derated by the
//! roofline term that bounds it. Serving runs most GEMMs memory-bound (a decode step multiplies a few rows by every
//! weight: a GEMV), and decode attention streams the KV cache, so their achievable fraction is a fraction of the
//! DRAM bandwidth ([`ServingConstants::stream`]), not of the tensor-core peak the training derating applies to
//! every matrix product.
//!
//! For an analytic answer of a matrix class: t = max(compute / η_gemm(GPU, precision), memory / η_stream) +
//! kernels · τ_kernel, with compute and memory the roofline's terms ([`crate::cost::roofline::estimate`]); other
//! classes (body) / η_mem + kernels · τ_kernel; collectives t_α–β / η_net + α_extra, as [`crate::cost::Derated`].
//! Answers from learned regressors and calibrations pass unchanged.

use super::engine::ServingConstants;
use crate::comm::Group;
use crate::cost::roofline::{self, UnsupportedPrecision, LAUNCH_OVERHEAD_US};
use crate::cost::{CostBackend, Efficiency, Source, Timed};
use crate::hw::{Precision, System};
use crate::op::{Collective, OpShape};

/// A backend whose analytic answers are derated by serving's constants.
#[derive(Debug, Clone)]
pub struct ServingDerated<B> {
    inner: B,
    consts: ServingConstants,
    gpu_hash: u64,
}

impl<B: CostBackend> ServingDerated<B> {
    /// `inner` derated by `consts`.
    pub fn new(inner: B, consts: ServingConstants) -> ServingDerated<B> {
        let gpu_hash = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            serde_json::to_string(&inner.system().gpu).unwrap_or_default().hash(&mut h);
            h.finish()
        };
        ServingDerated { inner, consts, gpu_hash }
    }

    /// The roofline's compute and memory terms of a matrix operator, µs, computed once per GPU description,
    /// shape and precision in the process (a pure function of the three; searches and repeated predictions ask
    /// for the same shapes).
    fn terms(&self, shape: &OpShape, dtype: Precision) -> Result<(f64, f64), UnsupportedPrecision> {
        type Key = (u64, OpShape, Precision);
        static CACHE: std::sync::OnceLock<moka::sync::Cache<Key, (f64, f64)>> = std::sync::OnceLock::new();
        let cache = CACHE.get_or_init(|| moka::sync::Cache::new(200_000));
        let key = (self.gpu_hash, *shape, dtype);
        if let Some(v) = cache.get(&key) {
            return Ok(v);
        }
        let cost = roofline::estimate(shape, dtype, &self.system().gpu)?;
        cache.insert(key, (cost.compute_us, cost.memory_us));
        Ok((cost.compute_us, cost.memory_us))
    }
}

impl<B: CostBackend> CostBackend for ServingDerated<B> {
    fn system(&self) -> &System {
        self.inner.system()
    }

    fn compute(&self, shape: &OpShape, dtype: Precision) -> Result<Timed, UnsupportedPrecision> {
        let t = self.inner.compute(shape, dtype)?;
        if t.source != Source::Analytic {
            return Ok(t);
        }
        let eff = &self.consts.efficiency;
        let kernels = t.kernels as f64;
        let body_us = if shape.class.is_matmul() {
            let (compute_us, memory_us) = self.terms(shape, dtype)?;
            let eta = eff.gemm_on(&self.system().gpu.name, dtype).max(1e-6);
            (compute_us / eta).max(memory_us / self.consts.stream.max(1e-6))
        } else {
            (t.time_us - kernels * LAUNCH_OVERHEAD_US).max(0.0) / eff.memory.max(1e-6)
        };
        Ok(Timed { time_us: body_us + kernels * eff.kernel_us, ..t })
    }

    fn collective(&self, c: Collective, bytes: f64, group: Group, active_per_node: u32) -> Timed {
        let t = self.inner.collective(c, bytes, group, active_per_node);
        if t.time_us == 0.0 || t.source != Source::Analytic {
            return t;
        }
        let eff = &self.consts.efficiency;
        Timed { time_us: t.time_us / eff.network.max(1e-6) + eff.collective_us, ..t }
    }

    fn prefetch(&self, ops: &[(OpShape, Precision)]) {
        self.inner.prefetch(ops)
    }

    fn efficiency(&self) -> Option<Efficiency> {
        Some(self.consts.efficiency)
    }
}

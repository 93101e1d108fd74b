//! The analytic backend: roofline operators ([`super::roofline`]) and α–β collectives ([`crate::comm`]).

use super::roofline::{self, UnsupportedPrecision};
use super::{CostBackend, Source, Timed};
use crate::comm::{self, Group, GroupLinks};
use crate::hw::{Precision, System};
use crate::op::Collective;
use crate::op::OpShape;

/// Answers from the hardware description only.
#[derive(Debug, Clone)]
pub struct AnalyticBackend {
    system: System,
}

impl AnalyticBackend {
    /// A backend for `system`.
    pub fn new(system: System) -> AnalyticBackend {
        AnalyticBackend { system }
    }
}

impl CostBackend for AnalyticBackend {
    fn system(&self) -> &System {
        &self.system
    }

    fn compute(&self, shape: &OpShape, dtype: Precision) -> Result<Timed, UnsupportedPrecision> {
        let cost = roofline::estimate(shape, dtype, &self.system.gpu)?;
        Ok(Timed::new(cost.time_us, cost.time_us, Source::Analytic).with_kernels(cost.kernels))
    }

    fn collective(&self, c: Collective, bytes: f64, group: Group, active_per_node: u32) -> Timed {
        let links = GroupLinks::on(&self.system, active_per_node);
        let e = comm::estimate(c, bytes, group, &links);
        Timed::new(e.time_us, e.time_us, Source::Analytic)
    }
}

//! Operator times memoized per operator's work, shared by the solvers of one search over one backend.

use rustc_hash::FxHashMap;

use crate::comm::Group;
use crate::cost::CostBackend;
use crate::hw::Precision;
use crate::llm::timing::TimerCache;
use crate::op::{Collective, OpShape};

/// An operator's work as a hashable key (a collective's bytes by their bits).
#[derive(PartialEq, Eq, Hash, Clone, Copy)]
pub(super) enum OpKey {
    Compute(OpShape, Precision),
    Collective(Collective, u64, Group, u32),
    WideEp(crate::llm::serving::wideep::WideEpOp),
}

/// Operator times of the serving step model, memoized per operator's work: per operator its time, µs; its
/// kernels; whether it is an analytic compute answer (it carries `kernel_us` per kernel, [`super::derate`](crate::llm::serving::derate)).
///
/// An operator's time depends on its work (shape and precision, or a collective's bytes and group) and the
/// backend, not on the configuration that asks: solvers of different configurations over one backend — a search's
/// candidates and their simulations — share one table ([`Solver::with_op_times`](super::Solver::with_op_times), [`Solver::into_op_times`](super::Solver::into_op_times)), so
/// that each distinct operator is timed through the backend once per search instead of once per candidate. The
/// table remembers the backend it was filled through and empties itself when handed to a solver over another one.
///
/// Hashed with FxHash (`rustc-hash`): the keys are shapes, precisions and group sizes derived from a validated
/// configuration (never client-chosen strings), so no key set can be crafted to collide (HashDoS); a table holds at
/// most the distinct operators of one search.
#[derive(Default)]
pub struct OpTimes {
    /// The address of the backend the times came from (None: empty). Keep a table no longer than its backend lives:
    /// another backend at the same address would read its times.
    pub(super) backend: Option<usize>,
    pub(super) times: FxHashMap<OpKey, (f64, u32, bool)>,
    /// The solver's timer's table (the full answers, for the report's operator tables, [`Solver::detail`](super::Solver::detail)).
    pub(super) timed: TimerCache,
}

impl OpTimes {
    /// Distinct operators timed.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// No operator timed yet.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// The table for `backend`: itself when it was filled through the same backend, else emptied.
    pub(super) fn for_backend(mut self, backend: &dyn CostBackend) -> OpTimes {
        let address = (backend as *const dyn CostBackend).cast::<()>() as usize;
        if self.backend != Some(address) {
            self.times.clear();
            self.timed.clear();
            self.backend = Some(address);
        }
        self
    }
}

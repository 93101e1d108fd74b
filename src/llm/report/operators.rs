//! The operator table ([`OperatorTable`]): every timed operator instance merged into rows by name, pass,
//! recomputation, features and time per call, with its calls per micro-batch over the whole pipeline.

use super::types::OperatorRow;
use crate::cost::Timed;
use crate::llm::config::TrainingConfig;
use crate::llm::decompose::Decomposition;
use crate::llm::operators::{StageOp, Work};
use crate::llm::timing::{TimedOp, TimedTraining};

/// The operator table under construction: rows merged by (name, phase, recomputation, features, time per call),
/// in the order operators are first added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperatorTable {
    pub rows: Vec<OperatorRow>,
}

impl OperatorTable {
    /// Adds `calls` calls of `op` taking `t` per call, each charged `charged_us` (nothing for 0 calls).
    pub fn add(&mut self, op: &StageOp, t: &Timed, charged_us: f64, calls: u32) {
        if calls == 0 {
            return;
        }
        if let Some(r) = self.rows.iter_mut().find(|r| {
            r.name == op.name
                && r.phase == op.phase
                && r.recompute == op.recompute
                && r.features == op.features
                && r.time_us == t.time_us
        }) {
            r.calls_per_micro_batch += calls;
            r.total_us += calls as f64 * charged_us;
        } else {
            self.rows.push(OperatorRow {
                name: op.name,
                phase: op.phase,
                features: op.features.clone(),
                calls_per_micro_batch: calls,
                time_us: t.time_us,
                total_us: calls as f64 * charged_us,
                source: t.source.clone(),
                precision: match op.work {
                    Work::Compute { dtype, .. } => Some(dtype),
                    Work::Collective { .. } => None,
                    Work::WideEp(op) => op.precision(),
                },
                recompute: op.recompute,
            });
        }
    }

    /// Adds an operator charged its full time, once.
    pub fn add_once(&mut self, op: &StageOp, t: &Timed) {
        self.add(op, t, t.time_us, 1);
    }

    /// Adds every op of `ops` (timed as `timed`, in the same order) `times` times its own calls.
    pub fn add_all(&mut self, ops: &[StageOp], timed: &[TimedOp], times: u32) {
        for (op, t) in ops.iter().zip(timed) {
            self.add(op, &t.time, t.charged_us, op.calls * times);
        }
    }
}

fn add_opt(table: &mut OperatorTable, op: &Option<StageOp>, t: &Option<Timed>) {
    if let (Some(op), Some(t)) = (op, t) {
        table.add_once(op, t);
    }
}

/// The operator table of a timed decomposition: every stage's layers, the embedding and the head, then every
/// chunk's pipeline sends and ZeRO ≥ 2 collectives, then every stage's tail (S1's pipeline charges only the first
/// stage's gradient reduction: the others hide behind its backward drain).
pub(super) fn operator_rows(cfg: &TrainingConfig, d: &Decomposition, t: &TimedTraining) -> Vec<OperatorRow> {
    let mut table = OperatorTable::default();
    for st in &d.stages {
        table.add_all(&d.layer, &t.layer, st.encoders - st.moe_layers.min(st.encoders));
        table.add_all(&d.moe_layer, &t.moe_layer, st.moe_layers);
    }
    table.add_all(&d.embedding, &t.embedding, 1);
    table.add_all(&d.head, &t.head, 1);
    table.add_all(&d.mtp, &t.mtp, cfg.model.mtp_layers);
    for (st, ts) in d.stages.iter().zip(&t.stages) {
        for (ch, tc) in st.chunks.iter().zip(&ts.chunks) {
            add_opt(&mut table, &ch.send_fwd, &tc.send_fwd);
            add_opt(&mut table, &ch.send_bwd, &tc.send_bwd);
            if let (Some(z), Some((rs, ag))) = (&ch.zero, &tc.zero) {
                table.add_once(&z.reduce_scatter, rs);
                if let (Some(gathers), Some(ag)) = (&z.all_gathers, ag) {
                    for op in gathers {
                        table.add_once(op, ag);
                    }
                }
            }
        }
    }
    let s1 = cfg.s1_pipeline();
    for (st, ts) in d.stages.iter().zip(&t.stages) {
        table.add_once(&st.tail.optimizer, &ts.optimizer);
        add_opt(&mut table, &st.tail.param_gather, &ts.param_gather);
        if !s1 || st.stage == 0 {
            add_opt(&mut table, &st.tail.grad_sync, &ts.grad_sync);
        }
        add_opt(&mut table, &st.tail.embedding_grad, &ts.embedding_grad);
        add_opt(&mut table, &st.tail.expert_grad_sync, &ts.expert_grad_sync);
        add_opt(&mut table, &st.tail.expert_param_gather, &ts.expert_param_gather);
    }
    table.rows
}

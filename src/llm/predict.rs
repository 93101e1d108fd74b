//! Training-iteration prediction: decompose (S1 Table I), time every operator through a [`CostBackend`],
//! compose stages and the 1F1B timeline (S1 eq. 7), and report where the time goes.

use std::collections::HashMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::config::{ConfigError, TrainingConfig};
use super::flops::{mfu, model_flops};
use super::operators::{comm_elem_bytes, stage_ops, Layout, OpName, StageOp, Work};
use super::partition::{partition, StageRole};
use super::schedule::{bubble_fraction, eq7, Eq7};
use super::sizing::{padded_vocab, stage_params};
use crate::backend::{CostBackend, Source, Timed};
use crate::comm::{Collective, Group};
use crate::op::Phase;

/// One pipeline stage of the prediction.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct StageReport {
    /// Stage index, 0-based.
    pub stage: u32,
    pub role: StageRole,
    /// Encoder layers on the stage.
    pub encoders: u32,
    /// Parameters held by one GPU of the stage (S1 eq. 6).
    pub parameters: f64,
    /// Forward time per micro-batch (compute, MP all-reduces, forward P2P send), s.
    pub forward_s: f64,
    /// Backward time per micro-batch (compute, MP all-reduces, backward P2P send), s.
    pub backward_s: f64,
    /// Fused Adam over the stage's (ZeRO-partitioned) parameters, s.
    pub optimizer_s: f64,
    /// ZeRO all-gather of the updated parameters over dp, s (0 without ZeRO or with dp = 1).
    pub param_allgather_s: f64,
}

/// One row of the operator table: an operator, its per-call time and how often it runs per micro-batch over the
/// whole pipeline (update operators: per step).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct OperatorRow {
    /// S1 Table I name.
    pub name: OpName,
    pub phase: Phase,
    /// The S1 Table I feature vector.
    pub features: Vec<u64>,
    /// Calls per micro-batch summed over stages (per step for DP_* and Optimizer).
    pub calls_per_micro_batch: u32,
    /// Time per call, µs.
    pub time_us: f64,
    /// calls · time, µs.
    pub total_us: f64,
    /// `analytic` or `regressor:<key>@v<n>`.
    #[schema(value_type = String)]
    pub source: Source,
}

/// Throughput figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Throughput {
    /// global_batch · seq_len / iteration time, tokens/s.
    pub tokens_per_s: f64,
    /// Model FLOPs (Narayanan et al. eq. 3) per second per GPU, TFLOP/s.
    pub model_tflops_per_gpu: f64,
    /// Model FLOPs utilization against the GPU's dense peak for the precision, 0–1.
    pub mfu: f64,
}

/// The resolved configuration the prediction used.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ResolvedConfig {
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub gpus: u64,
    pub micro_batch: u32,
    /// Micro-batches per step, m.
    pub grad_accum: u32,
    pub global_batch: u64,
    pub zero_stage: u32,
    pub precision: crate::hw::Precision,
    /// Padded vocabulary (S1 eq. 1–2).
    pub vocab_padded: u64,
    /// Nodes the tensor-parallel group spans.
    pub tp_nodes: u32,
    /// Nodes the data-parallel group spans.
    pub dp_nodes: u32,
}

/// The answer to `POST /v1/predictions/training`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct TrainingPrediction {
    /// Predicted time of one training iteration (optimizer step), s.
    pub iteration_time_s: f64,
    /// The system it was predicted for.
    pub system: String,
    /// The GPU (catalog name).
    pub gpu: String,
    /// Pipeline schedule: `1f1b`.
    pub schedule: &'static str,
    /// S1 eq. 7's components.
    pub components: Eq7,
    /// (pp − 1)/m: idle fraction of the 1F1B pipeline.
    pub bubble_fraction: f64,
    pub config: ResolvedConfig,
    pub stages: Vec<StageReport>,
    pub operators: Vec<OperatorRow>,
    pub throughput: Throughput,
    /// Distinct sources used (`analytic`, `regressor:…`).
    pub sources: Vec<String>,
    pub warnings: Vec<String>,
}

/// Times operators through the backend once per distinct piece of work.
struct Timer<'a> {
    backend: &'a dyn CostBackend,
    cfg: &'a TrainingConfig,
    cache: HashMap<WorkKey, Timed>,
}

#[derive(PartialEq, Eq, Hash)]
enum WorkKey {
    Compute(crate::op::OpShape),
    Collective(Collective, u64, Group, u32),
}

impl<'a> Timer<'a> {
    fn time(&mut self, work: &Work) -> Result<Timed, ConfigError> {
        let key = match *work {
            Work::Compute(shape) => WorkKey::Compute(shape),
            Work::Collective { collective, bytes, group, active_per_node } => {
                WorkKey::Collective(collective, bytes.to_bits(), group, active_per_node)
            }
        };
        if let Some(t) = self.cache.get(&key) {
            return Ok(t.clone());
        }
        let t = match *work {
            Work::Compute(shape) => self
                .backend
                .compute(&shape, self.cfg.precision)
                .map_err(|e| ConfigError { field: "precision".into(), message: e.to_string() })?,
            Work::Collective { collective, bytes, group, active_per_node } => {
                self.backend.collective(collective, bytes, group, active_per_node)
            }
        };
        self.cache.insert(key, t.clone());
        Ok(t)
    }
}

/// Predicts one training iteration of `cfg` with `backend` (which also provides the system).
///
/// Errors: a precision the GPU cannot compute in (`precision`). Configuration errors are caught earlier by
/// [`super::config::validate`].
pub fn predict(cfg: &TrainingConfig, backend: &dyn CostBackend) -> Result<TrainingPrediction, ConfigError> {
    let system = backend.system();
    let layout = Layout::new(cfg, system.gpus_per_node);
    let v_padded = padded_vocab(cfg.model.vocab as u64, cfg.tp as u64);
    let encoders = partition(cfg.model.layers, cfg.pp);
    let mut timer = Timer { backend, cfg, cache: HashMap::new() };
    let mut rows: Vec<OperatorRow> = Vec::new();
    let mut record = |op: &StageOp, t: &Timed, calls: u32| {
        if let Some(r) = rows
            .iter_mut()
            .find(|r| r.name == op.name && r.phase == op.phase && r.features == op.features && r.time_us == t.time_us)
        {
            r.calls_per_micro_batch += calls;
            r.total_us += calls as f64 * t.time_us;
        } else {
            rows.push(OperatorRow {
                name: op.name,
                phase: op.phase,
                features: op.features.clone(),
                calls_per_micro_batch: calls,
                time_us: t.time_us,
                total_us: calls as f64 * t.time_us,
                source: t.source.clone(),
            });
        }
    };

    let e = comm_elem_bytes(cfg);
    let zero = cfg.zero_stage;
    let dp_active = layout.active_per_node;
    let mut stages = Vec::with_capacity(cfg.pp as usize);
    let (mut fwd, mut bwd, mut upd) = (vec![], vec![], vec![]);
    let mut first_stage_grad_sync_s = 0.0;
    for s in 0..cfg.pp {
        let role = StageRole::of(s, cfg.pp);
        let n = encoders[s as usize];
        let params = stage_params(role, n as u64, cfg.model.hidden as u64, v_padded, cfg.tp as u64);
        let (mut f_us, mut b_us) = (0.0, 0.0);
        for op in stage_ops(cfg, &layout, s, role, n, v_padded) {
            if op.calls == 0 {
                continue;
            }
            let t = timer.time(&op.work)?;
            let total = op.calls as f64 * t.time_us;
            match op.phase {
                Phase::Fwd => f_us += total,
                Phase::Bwd => b_us += total,
            }
            record(&op, &t, op.calls);
        }
        // Update: fused Adam over this GPU's share of the stage's parameters, then the ZeRO all-gather.
        let opt_params = if zero >= 1 { params / cfg.dp as f64 } else { params };
        let opt = StageOp {
            name: OpName::Optimizer,
            phase: Phase::Fwd,
            calls: 1,
            work: Work::Compute(crate::op::OpShape::new(
                crate::op::OpClass::Optimizer,
                Phase::Fwd,
                &[opt_params.round() as u64],
            )),
            features: vec![cfg.tp as u64, cfg.model.hidden as u64, n as u64],
        };
        let opt_t = timer.time(&opt.work)?;
        record(&opt, &opt_t, 1);
        let mut gather_us = 0.0;
        if zero >= 1 && cfg.dp > 1 {
            let op = StageOp {
                name: OpName::DpAllGather,
                phase: Phase::Fwd,
                calls: 1,
                work: Work::Collective {
                    collective: Collective::AllGather,
                    bytes: params * e,
                    group: layout.dp_group,
                    active_per_node: dp_active,
                },
                features: vec![
                    params.round() as u64,
                    layout.dp_group.nodes as u64,
                    layout.dp_group.ranks_per_node as u64,
                ],
            };
            let t = timer.time(&op.work)?;
            gather_us = t.time_us;
            record(&op, &t, 1);
        }
        if s == 0 && cfg.dp > 1 {
            let (name, collective) = if zero >= 2 {
                (OpName::DpReduceScatter, Collective::ReduceScatter)
            } else {
                (OpName::DpAllReduce, Collective::AllReduce)
            };
            let op = StageOp {
                name,
                phase: Phase::Bwd,
                calls: 1,
                work: Work::Collective {
                    collective,
                    bytes: params * e,
                    group: layout.dp_group,
                    active_per_node: dp_active,
                },
                features: vec![
                    params.round() as u64,
                    layout.dp_group.nodes as u64,
                    layout.dp_group.ranks_per_node as u64,
                ],
            };
            let t = timer.time(&op.work)?;
            first_stage_grad_sync_s = t.time_us * 1e-6;
            record(&op, &t, 1);
        }
        fwd.push(f_us * 1e-6);
        bwd.push(b_us * 1e-6);
        upd.push((opt_t.time_us + gather_us) * 1e-6);
        stages.push(StageReport {
            stage: s,
            role,
            encoders: n,
            parameters: params,
            forward_s: f_us * 1e-6,
            backward_s: b_us * 1e-6,
            optimizer_s: opt_t.time_us * 1e-6,
            param_allgather_s: gather_us * 1e-6,
        });
    }
    let components = eq7(&fwd, &bwd, &upd, first_stage_grad_sync_s, cfg.grad_accum);
    let iteration_time_s = components.iteration_s();

    let m = &cfg.model;
    let flops = model_flops(cfg.global_batch, m.seq_len as u64, m.layers as u64, m.hidden as u64, m.vocab as u64);
    let peak = system.gpu.peak_matmul_flops(cfg.precision).unwrap_or(f64::NAN);
    let throughput = Throughput {
        tokens_per_s: cfg.global_batch as f64 * m.seq_len as f64 / iteration_time_s,
        model_tflops_per_gpu: flops / iteration_time_s / cfg.gpus() as f64 / 1e12,
        mfu: mfu(flops, iteration_time_s, cfg.gpus(), peak),
    };

    let mut sources: Vec<String> = rows.iter().map(|r| r.source.to_string()).collect();
    sources.sort();
    sources.dedup();
    let mut warnings = Vec::new();
    if sources.iter().all(|s| s == "analytic") {
        warnings.push(
            "every operator time is analytic (no learned regressor covers this GPU yet): roofline times are lower \
             bounds, so the iteration time is likely optimistic"
                .to_string(),
        );
    }
    if layout.tp_group.nodes > 1 {
        warnings.push(format!(
            "tp = {} exceeds gpus_per_node = {}: tensor-parallel all-reduces cross the inter-node network",
            cfg.tp, system.gpus_per_node
        ));
    }
    let bubble = bubble_fraction(cfg.pp, cfg.grad_accum);
    if bubble > 0.25 {
        warnings.push(format!(
            "pipeline bubble (pp − 1)/m = {:.0} % of the ideal time: raise grad_accum (or global_batch) to hide it",
            bubble * 100.0
        ));
    }
    if let Some(s) = stages.iter().find(|s| s.encoders == 0) {
        warnings.push(format!("stage {} holds no encoder layer: pp is large for {} layers", s.stage, m.layers));
    }

    Ok(TrainingPrediction {
        iteration_time_s,
        system: system.name.clone(),
        gpu: system.gpu.name.clone(),
        schedule: "1f1b",
        components,
        bubble_fraction: bubble,
        config: ResolvedConfig {
            tp: cfg.tp,
            pp: cfg.pp,
            dp: cfg.dp,
            gpus: cfg.gpus(),
            micro_batch: cfg.micro_batch,
            grad_accum: cfg.grad_accum,
            global_batch: cfg.global_batch,
            zero_stage: cfg.zero_stage,
            precision: cfg.precision,
            vocab_padded: v_padded,
            tp_nodes: layout.tp_group.nodes,
            dp_nodes: layout.dp_group.nodes,
        },
        stages,
        operators: rows,
        throughput,
        sources,
        warnings,
    })
}

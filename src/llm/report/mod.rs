//! Stage 4 of a prediction — **report**: the answer from the previous stages' outputs. This stage owns what the
//! caller reads: the per-stage report (times, parameters, memory), the operator table (every operator instance
//! with its per-call and total time, merged over stages; [`OperatorTable`] takes any timed operator list, so other
//! predictors can report theirs the same way), the memory of the fullest stage, throughput and MFU, the resolved
//! configuration and the warnings.
//!
//! One concept per module: `types` (the parts of the answer, [`TrainingPrediction`]), `operators` (the
//! operator table) and `warnings` (what the caller should know about the configuration); [`report`] here
//! assembles the answer. Every item is re-exported here, so `crate::llm::report::X` names it.

mod operators;
mod types;
mod warnings;

pub use operators::OperatorTable;
pub use types::{OperatorRow, ResolvedConfig, RunEstimate, StageReport, Throughput};
pub use warnings::network_warning;

use serde::Serialize;
use utoipa::ToSchema;

use super::config::TrainingConfig;
use super::decompose::Decomposition;
use super::flops::{mfu, model_flops_of};
use super::interval::{interval, Interval, ResidualClass};
use super::memory::{stage_memory, ActivationFacts, MemoryBreakdown, StageMemoryInput};
use super::schedule::{interleaved_bubble_fraction, Eq7, Step, Timeline};
use super::sizing::{active_params, layer_params, model_params, padded_vocab};
use super::timing::TimedTraining;
use crate::cost::{CostBackend, Efficiency};
use operators::operator_rows;
use warnings::warnings;

/// The answer to `POST /v1/predictions/training`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct TrainingPrediction {
    /// Predicted time of one training iteration (optimizer step), s.
    pub iteration_time_s: f64,
    /// 10 %–90 % prediction interval of the iteration time from perfcast's cross-validated end-to-end residuals
    /// (split conformal per GPU generation and scale, [`super::interval`]; README, accuracy).
    pub interval: Interval,
    /// The system it was predicted for.
    pub system: String,
    /// The GPU (catalog name).
    pub gpu: String,
    /// Pipeline schedule: `1f1b` or `interleaved_1f1b`.
    pub schedule: &'static str,
    /// S1 eq. 7's components (the answer for S1's pipeline; for reference otherwise).
    pub components: Eq7,
    /// How the iteration time is composed.
    pub timeline: Timeline,
    /// (pp − 1)/(m·v): idle fraction of the (interleaved) 1F1B pipeline.
    pub bubble_fraction: f64,
    pub config: ResolvedConfig,
    pub stages: Vec<StageReport>,
    pub operators: Vec<OperatorRow>,
    pub throughput: Throughput,
    /// Memory per GPU of the stage that needs the most, and whether it fits.
    pub memory: MemoryBreakdown,
    /// Whole-run estimate, when the request gave `run`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunEstimate>,
    /// Distinct sources used (`analytic`, `regressor:…`).
    pub sources: Vec<String>,
    /// The achievable efficiencies the analytic times were derated by (absent: bare roofline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<Efficiency>,
    pub warnings: Vec<String>,
    /// The calibration from the system × framework's uploaded runs that scaled the iteration time, interval and
    /// throughput ([`super::calibration`]); absent when the system has no accepted calibration for the framework.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<super::calibration::AppliedCalibration>,
}

/// The [`TrainingPrediction`] of `cfg` on `backend`'s system from its decomposition `d`, its times `t` and its
/// scheduled `step` (the backend says what it derated analytic times by and whether its network is calibrated).
pub fn report(
    cfg: &TrainingConfig,
    backend: &dyn CostBackend,
    d: &Decomposition,
    t: &TimedTraining,
    step: &Step,
) -> TrainingPrediction {
    let (system, efficiency) = (backend.system(), backend.efficiency());
    let gpu = &system.gpu;
    let (pp, v) = (cfg.pp, d.v);
    let rows = operator_rows(cfg, d, t);
    let facts = ActivationFacts::of(cfg);
    let capacity = gpu.memory_bytes();
    let mut stages = Vec::with_capacity(pp as usize);
    let mut memories: Vec<MemoryBreakdown> = Vec::with_capacity(pp as usize);
    for (st, ts) in d.stages.iter().zip(&t.stages) {
        let s = st.stage;
        let mem = stage_memory(
            cfg,
            &facts,
            &StageMemoryInput {
                stage: s,
                params: st.params,
                layers: st.encoders,
                moe_layers: st.moe_layers,
                expert_params: st.expert_params,
                layer_params: layer_params(cfg),
                first: s == 0,
                last: s + 1 == pp,
                v_padded: d.v_padded,
            },
            capacity,
        );
        let gather_s = [&ts.param_gather, &ts.expert_param_gather]
            .iter()
            .map(|g| g.as_ref().map_or(0.0, |g| g.time_us * 1e-6))
            .sum();
        stages.push(StageReport {
            stage: s,
            role: st.role,
            encoders: st.encoders,
            parameters: st.params + st.expert_params,
            forward_s: ts.forward_s,
            backward_s: ts.backward_s,
            optimizer_s: ts.optimizer.time_us * 1e-6,
            param_allgather_s: gather_s,
            grad_sync_s: ts.tail.grad_sync_s,
            memory_gib: mem.total_gib,
        });
        memories.push(mem);
    }
    let Step { components, timeline } = *step;
    let iteration_time_s = timeline.iteration_s();

    let m = &cfg.model;
    let flops = model_flops_of(cfg);
    let peak = gpu.peak_matmul_flops(cfg.precision).unwrap_or(f64::NAN);
    let throughput = Throughput {
        tokens_per_s: cfg.global_batch as f64 * m.seq_len as f64 / iteration_time_s,
        model_tflops_per_gpu: flops / iteration_time_s / cfg.gpus() as f64 / 1e12,
        mfu: mfu(flops, iteration_time_s, cfg.gpus(), peak),
    };
    let memory = *memories.iter().max_by(|a, b| a.total_gib.total_cmp(&b.total_gib)).expect("pp ≥ 1");

    let mut sources: Vec<String> = rows.iter().map(|r| r.source.to_string()).collect();
    sources.sort();
    sources.dedup();
    let bubble = interleaved_bubble_fraction(pp, cfg.grad_accum, v);
    let layout = &d.layout;
    let mut warnings =
        warnings(cfg, layout, system.gpus_per_node, &sources, efficiency.is_some(), bubble, &stages, &memory);
    warnings.extend(network_warning(cfg, system, backend.network_calibrated()));
    warnings.extend(crate::llm::moe::warnings(cfg, system.gpus_per_node));

    TrainingPrediction {
        iteration_time_s,
        interval: interval(iteration_time_s, &ResidualClass::of(system, cfg.gpus())),
        system: system.name.clone(),
        gpu: gpu.name.clone(),
        schedule: if v > 1 { "interleaved_1f1b" } else { "1f1b" },
        components,
        timeline,
        bubble_fraction: bubble,
        config: ResolvedConfig {
            tp: cfg.tp,
            pp,
            dp: cfg.dp,
            context_parallel: cfg.cp,
            cp_comm_type: (cfg.cp > 1).then_some(cfg.cp_comm.comm_type),
            gpus: cfg.gpus(),
            micro_batch: cfg.micro_batch,
            grad_accum: cfg.grad_accum,
            global_batch: cfg.global_batch,
            zero_stage: cfg.zero_stage,
            precision: cfg.precision,
            vocab_padded: d.v_padded,
            tp_nodes: layout.tp_group.nodes,
            dp_nodes: layout.dp_group.nodes,
            kv_heads: cfg.kv_heads,
            ffn_hidden: cfg.ffn_hidden,
            sequence_parallel: cfg.sp(),
            virtual_stages: v,
            recompute: cfg.recompute,
            distributed_optimizer: cfg.distributed_optimizer,
            overlap_grad_reduce: cfg.overlap_grad_reduce,
            overlap_param_gather: cfg.overlap_param_gather,
            align_param_gather: cfg.align_param_gather,
            bucket_size: cfg.bucket_params,
            tp_comm_overlap: cfg.tp_overlap(),
            overlap_p2p_comm: cfg.overlap_p2p(),
            layer_split: cfg.layer_split,
            framework: cfg.framework.framework,
            optimizer: cfg.framework.optimizer,
            grad_reduce_in_fp32: cfg.framework.grad_reduce_in_fp32,
            fp8_recipe: cfg.fp8_recipe,
            fp8_param_gather: cfg.fp8_param_gather,
            cuda_graphs: cfg.framework.cuda_graphs,
            model_parameters: model_params(cfg, padded_vocab(cfg.model.vocab as u64, 1)),
            active_parameters: active_params(cfg, padded_vocab(cfg.model.vocab as u64, 1)),
            head_dim: cfg.head_dim,
            recompute_modules: cfg.recompute_modules.clone(),
            moe: crate::llm::moe::MoeReport::of(cfg),
        },
        stages,
        operators: rows,
        throughput,
        memory,
        run: None,
        sources,
        efficiency,
        warnings,
        calibration: None,
    }
}

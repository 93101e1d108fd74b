//! Training-iteration prediction: decompose (S1 Table I and its Megatron-LM extensions), time every operator
//! through a [`CostBackend`], compose the model chunks, schedule them — S1 eq. 7 for S1's pipeline, the simulated
//! 1F1B / interleaved schedule otherwise ([`super::pipeline`]) — and report where the time and the memory go.

use serde::Serialize;
use utoipa::ToSchema;

use super::config::{ConfigError, LayerSplit, Recompute, TrainingConfig};
use super::costs::{
    charged_us, chunk_params, chunk_times, optimizer_work, pieces, send_target, stage_params, stage_tail, tail_parts,
    P2pTimes, TailParts, Timer,
};
use super::flops::{mfu, model_flops_of};
use super::layout::Layout;
use super::memory::{stage_memory, ActivationFacts, MemoryBreakdown, StageMemoryInput};
use super::operators::{
    comm_elem_bytes, embedding_ops, head_ops, layer_ops, p2p_op, OpName, OpPrecisions, StageOp, Work,
};
use super::partition::{chunk_layers, StageRole};
use super::pipeline::{simulate, step_time, PipelineSpec, StageTail};
use super::schedule::{eq7, interleaved_bubble_fraction, Eq7};
use super::sizing::{layer_params, model_params, padded_vocab};
use crate::cost::{CostBackend, Efficiency, Source, Timed};
use crate::comm::Collective;
use crate::hw::Precision;
use crate::op::Phase;

/// One pipeline stage of the prediction.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct StageReport {
    /// Stage index, 0-based.
    pub stage: u32,
    pub role: StageRole,
    /// Encoder layers on the stage (all its model chunks).
    pub encoders: u32,
    /// Parameters held by one GPU of the stage before ZeRO partitioning (S1 eq. 6, generalized).
    pub parameters: f64,
    /// Forward time per micro-batch, all model chunks (compute, tensor/context-parallel communication, pipeline
    /// sends), s.
    pub forward_s: f64,
    /// Backward time per micro-batch, all model chunks (recomputation included), s.
    pub backward_s: f64,
    /// Fused Adam over the stage's (ZeRO-partitioned) parameters, s.
    pub optimizer_s: f64,
    /// ZeRO / distributed-optimizer all-gather of the updated parameters, s (0 without it or with dp·cp = 1).
    pub param_allgather_s: f64,
    /// Data-parallel reduction of the stage's gradients after its last backward (0 with ZeRO ≥ 2, which reduces
    /// during every backward), s.
    pub grad_sync_s: f64,
    /// Memory one GPU of the stage needs, GiB.
    pub memory_gib: f64,
}

/// One row of the operator table: an operator, its per-call time and how often it runs per micro-batch over the
/// whole pipeline (update operators: per step).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct OperatorRow {
    /// S1 Table I name (or a Megatron-LM operator beyond it: `SwiGLU`, `MP_Allgather`, `CP_P2P`, …).
    pub name: OpName,
    /// The pass the time is charged to.
    pub phase: Phase,
    /// The S1 Table I feature vector.
    pub features: Vec<u64>,
    /// Calls per micro-batch summed over stages (per step for DP_*, Embedding_Grad_Allreduce and Optimizer).
    pub calls_per_micro_batch: u32,
    /// Time per call, µs.
    pub time_us: f64,
    /// calls · charged time, µs (an operator overlapping another — the context-parallel exchange behind its
    /// attention step — is charged only its excess; ZeRO-2/3's per-micro-batch collectives are listed at full
    /// time, the stage times charge only what their pass does not hide).
    pub total_us: f64,
    /// `analytic` or `regressor:<key>@v<n>`.
    #[schema(value_type = String)]
    pub source: Source,
    /// Precision of a computation (absent for communication).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    /// A forward operator re-run in the backward pass (activation recomputation).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub recompute: bool,
}

/// Throughput figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Throughput {
    /// global_batch · seq_len / iteration time, tokens/s.
    pub tokens_per_s: f64,
    /// Model FLOPs (Narayanan et al. eq. 3, generalized to GQA and SwiGLU; recomputation not counted) per second per
    /// GPU, TFLOP/s.
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
    pub context_parallel: u32,
    pub gpus: u64,
    pub micro_batch: u32,
    /// Micro-batches per step, m.
    pub grad_accum: u32,
    pub global_batch: u64,
    pub zero_stage: u32,
    pub precision: Precision,
    /// Padded vocabulary (S1 eq. 1–2).
    pub vocab_padded: u64,
    /// Nodes the tensor-parallel group spans.
    pub tp_nodes: u32,
    /// Nodes the gradient-reduction group (dp·cp ranks) spans.
    pub dp_nodes: u32,
    pub kv_heads: u32,
    pub ffn_hidden: u32,
    pub sequence_parallel: bool,
    pub virtual_stages: u32,
    pub recompute: Recompute,
    pub distributed_optimizer: bool,
    pub overlap_grad_reduce: bool,
    pub layer_split: LayerSplit,
    /// Unique parameters of the model.
    pub model_parameters: f64,
}

/// The step's timeline as the schedule model composes it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Timeline {
    /// `eq7` (S1's pipeline: S1 eq. 7) or `simulated` (the 1F1B / interleaved simulation).
    pub model: &'static str,
    /// First forward to last backward, s.
    pub pipeline_s: f64,
    /// Gradient reduction not hidden behind the pipeline, s.
    pub exposed_grad_sync_s: f64,
    /// Optimizer step and parameter all-gather of the slowest stage, s.
    pub update_s: f64,
}

/// Wall-clock time and cost of a whole training run at the predicted iteration time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct RunEstimate {
    /// Optimizer steps.
    pub steps: u64,
    /// Tokens trained on: steps · global_batch · seq_len.
    pub tokens: f64,
    /// steps · iteration time, s.
    pub wall_clock_s: f64,
    /// The same in days (86,400 s).
    pub wall_clock_days: f64,
    /// wall_clock_s · GPUs / 3600.
    pub gpu_hours: f64,
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
}

fn record(rows: &mut Vec<OperatorRow>, op: &StageOp, t: &Timed, charged_us: f64, calls: u32) {
    if calls == 0 {
        return;
    }
    if let Some(r) = rows.iter_mut().find(|r| {
        r.name == op.name
            && r.phase == op.phase
            && r.recompute == op.recompute
            && r.features == op.features
            && r.time_us == t.time_us
    }) {
        r.calls_per_micro_batch += calls;
        r.total_us += calls as f64 * charged_us;
    } else {
        rows.push(OperatorRow {
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
            },
            recompute: op.recompute,
        });
    }
}

fn record_all(rows: &mut Vec<OperatorRow>, ops: &[StageOp], timer: &mut Timer, times: u32) -> Result<(), ConfigError> {
    for (op, (charged, t)) in ops.iter().zip(charged_us(ops, timer)?) {
        record(rows, op, &t, charged, op.calls * times);
    }
    Ok(())
}

fn collective_op(name: OpName, phase: Phase, c: Collective, bytes: f64, layout: &Layout, params: f64) -> StageOp {
    let g = layout.dp_group;
    StageOp {
        name,
        phase,
        calls: 1,
        work: Work::Collective { collective: c, bytes, group: g, active_per_node: layout.active_per_node },
        features: vec![params.round() as u64, g.nodes as u64, g.ranks_per_node as u64],
        recompute: false,
        overlaps: None,
    }
}

/// Predicts one training iteration of `cfg` with `backend` (which also provides the system).
///
/// Errors: a precision the GPU cannot compute in (`precision`). Configuration errors are caught earlier by
/// [`super::validate`].
pub fn predict(cfg: &TrainingConfig, backend: &dyn CostBackend) -> Result<TrainingPrediction, ConfigError> {
    let system = backend.system();
    let gpu = &system.gpu;
    if cfg.precision == Precision::Fp8 && gpu.peak_matmul_flops(Precision::Fp8).is_none() {
        return Err(ConfigError {
            field: "precision".into(),
            message: format!(
                "{} has no fp8 tensor cores (its peak_tflops.fp8 is null): fp8 training needs them",
                gpu.name
            ),
        });
    }
    let layout = Layout::new(cfg, system.gpus_per_node);
    let prec = OpPrecisions::of(cfg, gpu);
    let v_padded = padded_vocab(cfg.model.vocab as u64, cfg.tp as u64);
    let layers = chunk_layers(cfg);
    let (pp, v) = (cfg.pp, cfg.virtual_stages.max(1));
    let mut timer = Timer::new(backend);
    let p = pieces(cfg, &layout, prec, v_padded, &mut timer)?;
    let sends = P2pTimes::of(cfg, &layout, &mut timer)?;
    let (mut fwd, mut bwd) = (Vec::new(), Vec::new());
    chunk_times(cfg, &layout, &layers, &p, &sends, v_padded, &mut timer, &mut fwd, &mut bwd)?;

    // Operator table.
    let mut rows: Vec<OperatorRow> = Vec::new();
    let l_ops = layer_ops(cfg, &layout, prec);
    let stage_layers: Vec<u32> = (0..pp).map(|s| (0..v).map(|c| layers[(s * v + c) as usize]).sum()).collect();
    for &n in &stage_layers {
        record_all(&mut rows, &l_ops, &mut timer, n)?;
    }
    record_all(&mut rows, &embedding_ops(cfg, &layout, prec, v_padded), &mut timer, 1)?;
    record_all(&mut rows, &head_ops(cfg, &layout, prec, v_padded), &mut timer, 1)?;
    for s in 0..pp {
        for c in 0..v {
            for phase in [Phase::Fwd, Phase::Bwd] {
                if let Some(to) = send_target(pp, v, s, c, phase) {
                    let op = p2p_op(cfg, &layout, phase, layout.p2p_group(cfg, s, to));
                    let t = timer.time(&op.work)?;
                    record(&mut rows, &op, &t, t.time_us, 1);
                }
            }
            if cfg.zero_stage >= 2 && cfg.grad_ranks() > 1 {
                let params = chunk_params(cfg, s, c, layers[(s * v + c) as usize], v_padded);
                let bytes = params * comm_elem_bytes(cfg);
                let mut per_mb = vec![collective_op(
                    OpName::DpReduceScatter,
                    Phase::Bwd,
                    Collective::ReduceScatter,
                    bytes,
                    &layout,
                    params,
                )];
                if cfg.zero_stage >= 3 {
                    for phase in [Phase::Fwd, Phase::Bwd] {
                        per_mb.push(collective_op(
                            OpName::DpAllGather,
                            phase,
                            Collective::AllGather,
                            bytes,
                            &layout,
                            params,
                        ));
                    }
                }
                for op in per_mb {
                    let t = timer.time(&op.work)?;
                    record(&mut rows, &op, &t, t.time_us, 1);
                }
            }
        }
    }

    // Stage tails and reports.
    let s1 = cfg.s1_pipeline();
    let facts = ActivationFacts::of(cfg);
    let capacity = gpu.memory_bytes();
    let mut tails: Vec<StageTail> = Vec::with_capacity(pp as usize);
    let mut stages = Vec::with_capacity(pp as usize);
    let mut memories: Vec<MemoryBreakdown> = Vec::with_capacity(pp as usize);
    for s in 0..pp {
        let role = StageRole::of(s, pp);
        let params = stage_params(cfg, s, &layers, v_padded);
        let parts: TailParts = tail_parts(cfg, s, params, v_padded);
        let range = (s * v) as usize..((s + 1) * v) as usize;
        let (f_s, b_s): (f64, f64) = (fwd[range.clone()].iter().sum(), bwd[range].iter().sum());
        let tail = stage_tail(cfg, &layout, &parts, b_s, prec, &mut timer)?;
        // Operator rows of the tail.
        let opt = StageOp {
            name: OpName::Optimizer,
            phase: Phase::Fwd,
            calls: 1,
            work: optimizer_work(parts.optimizer_params, prec.other),
            features: vec![cfg.tp as u64, cfg.model.hidden as u64, stage_layers[s as usize] as u64],
            recompute: false,
            overlaps: None,
        };
        let opt_t = timer.time(&opt.work)?;
        record(&mut rows, &opt, &opt_t, opt_t.time_us, 1);
        let mut gather_s = 0.0;
        if let Some(bytes) = parts.gather_bytes {
            let op = collective_op(OpName::DpAllGather, Phase::Fwd, Collective::AllGather, bytes, &layout, params);
            let t = timer.time(&op.work)?;
            gather_s = t.time_us * 1e-6;
            record(&mut rows, &op, &t, t.time_us, 1);
        }
        if let Some((name, c, bytes)) = parts.sync {
            // S1 charges only the first stage's reduction (the others hide behind its backward drain).
            if !s1 || s == 0 {
                let op = collective_op(name, Phase::Bwd, c, bytes, &layout, params);
                let t = timer.time(&op.work)?;
                record(&mut rows, &op, &t, t.time_us, 1);
            }
        }
        if let Some(bytes) = parts.embedding_grad_bytes {
            let group = layout.p2p_group(cfg, 0, pp - 1);
            let mut op =
                collective_op(OpName::EmbeddingGradAllReduce, Phase::Bwd, Collective::AllReduce, bytes, &layout, 0.0);
            op.work = Work::Collective {
                collective: Collective::AllReduce,
                bytes,
                group,
                active_per_node: layout.active_per_node,
            };
            op.features =
                vec![(bytes / comm_elem_bytes(cfg)).round() as u64, group.nodes as u64, group.ranks_per_node as u64];
            let t = timer.time(&op.work)?;
            record(&mut rows, &op, &t, t.time_us, 1);
        }
        let mem = stage_memory(
            cfg,
            &facts,
            &StageMemoryInput {
                stage: s,
                params,
                layers: stage_layers[s as usize],
                layer_params: layer_params(cfg),
                first: s == 0,
                last: s + 1 == pp,
                v_padded,
            },
            capacity,
        );
        stages.push(StageReport {
            stage: s,
            role,
            encoders: stage_layers[s as usize],
            parameters: params,
            forward_s: f_s,
            backward_s: b_s,
            optimizer_s: tail.update_s - gather_s,
            param_allgather_s: gather_s,
            grad_sync_s: tail.grad_sync_s,
            memory_gib: mem.total_gib,
        });
        memories.push(mem);
        tails.push(tail);
    }

    // Schedule.
    let stage_f: Vec<f64> = stages.iter().map(|s| s.forward_s).collect();
    let stage_b: Vec<f64> = stages.iter().map(|s| s.backward_s).collect();
    let updates: Vec<f64> = tails.iter().map(|t| t.update_s).collect();
    let first_sync = tails[0].grad_sync_s + tails[0].after_sync_s;
    let components = eq7(&stage_f, &stage_b, &updates, first_sync, cfg.grad_accum);
    let timeline = if s1 {
        Timeline {
            model: "eq7",
            pipeline_s: components.pipeline_s,
            exposed_grad_sync_s: components.first_stage_grad_sync_s,
            update_s: components.max_update_s,
        }
    } else {
        let sim = simulate(&PipelineSpec { pp, v, m: cfg.grad_accum, fwd_s: &fwd, bwd_s: &bwd }).ok_or_else(|| {
            ConfigError { field: "parallelism".into(), message: "the pipeline schedule cannot be simulated".into() }
        })?;
        let st = step_time(&sim, &tails, cfg.overlap_grad_reduce);
        Timeline {
            model: "simulated",
            pipeline_s: st.pipeline_s,
            exposed_grad_sync_s: st.exposed_grad_sync_s,
            update_s: st.update_s,
        }
    };
    let iteration_time_s = timeline.pipeline_s + timeline.exposed_grad_sync_s + timeline.update_s;

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
    let efficiency = backend.efficiency();
    let warnings =
        warnings(cfg, &layout, system.gpus_per_node, &sources, efficiency.is_some(), bubble, &stages, &memory);

    Ok(TrainingPrediction {
        iteration_time_s,
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
            gpus: cfg.gpus(),
            micro_batch: cfg.micro_batch,
            grad_accum: cfg.grad_accum,
            global_batch: cfg.global_batch,
            zero_stage: cfg.zero_stage,
            precision: cfg.precision,
            vocab_padded: v_padded,
            tp_nodes: layout.tp_group.nodes,
            dp_nodes: layout.dp_group.nodes,
            kv_heads: cfg.kv_heads,
            ffn_hidden: cfg.ffn_hidden,
            sequence_parallel: cfg.sp(),
            virtual_stages: v,
            recompute: cfg.recompute,
            distributed_optimizer: cfg.distributed_optimizer,
            overlap_grad_reduce: cfg.overlap_grad_reduce,
            layer_split: cfg.layer_split,
            model_parameters: model_params(cfg, padded_vocab(cfg.model.vocab as u64, 1)),
        },
        stages,
        operators: rows,
        throughput,
        memory,
        run: None,
        sources,
        efficiency,
        warnings,
    })
}

#[allow(clippy::too_many_arguments)]
fn warnings(
    cfg: &TrainingConfig,
    layout: &Layout,
    gpus_per_node: u32,
    sources: &[String],
    derated: bool,
    bubble: f64,
    stages: &[StageReport],
    memory: &MemoryBreakdown,
) -> Vec<String> {
    let mut w = Vec::new();
    if sources.iter().all(|s| s == "analytic") {
        w.push(if derated {
            "every operator time is analytic (no learned regressor covers this GPU yet), derated by perfcast's \
             calibrated achievable efficiencies (README, accuracy): expect the end-to-end errors reported there"
                .to_string()
        } else {
            "every operator time is analytic (no learned regressor covers this GPU yet): roofline times are lower \
             bounds, so the iteration time is likely optimistic"
                .to_string()
        });
    }
    if layout.tp_group.nodes > 1 {
        w.push(format!(
            "tp = {} exceeds gpus_per_node = {gpus_per_node}: tensor-parallel all-reduces cross the inter-node network",
            cfg.tp
        ));
    }
    if bubble > 0.25 {
        w.push(format!(
            "pipeline bubble (pp − 1)/(m·v) = {:.0} % of the ideal time: raise grad_accum (or global_batch) or \
             virtual_stages to hide it",
            bubble * 100.0
        ));
    }
    if let Some(s) = stages.iter().find(|s| s.encoders == 0) {
        w.push(format!("stage {} holds no encoder layer: pp is large for {} layers", s.stage, cfg.model.layers));
    }
    if cfg.sequence_parallel && cfg.tp == 1 {
        w.push("sequence_parallel has no effect with tp = 1".to_string());
    }
    if !memory.fits {
        w.push(format!(
            "does not fit: stage {} needs {:.1} GiB per GPU (weights {:.1}, gradients {:.1}, optimizer {:.1}, \
             activations {:.1}, allowance {:.1}) but the GPU has {:.1} GiB; try recompute, sequence_parallel, more \
             tp/pp or a higher zero_stage",
            memory.stage,
            memory.total_gib,
            memory.weights_gib,
            memory.gradients_gib,
            memory.optimizer_gib,
            memory.activations_gib,
            memory.allowance_gib,
            memory.capacity_gib
        ));
    }
    w
}

//! Stage 4 of a prediction — **report**: the answer from the previous stages' outputs. This stage owns what the
//! caller reads: the per-stage report (times, parameters, memory), the operator table (every operator instance
//! with its per-call and total time, merged over stages; [`OperatorTable`] takes any timed operator list, so other
//! predictors can report theirs the same way), the memory of the fullest stage, throughput and MFU, the resolved
//! configuration and the warnings.

use serde::Serialize;
use utoipa::ToSchema;

use super::config::{LayerSplit, Recompute, TrainingConfig};
use super::decompose::Decomposition;
use super::flops::{mfu, model_flops_of};
use super::framework::{Framework, OptimizerImpl};
use super::interval::{interval, Interval, ResidualClass};
use super::layout::Layout;
use super::memory::{stage_memory, ActivationFacts, MemoryBreakdown, StageMemoryInput};
use super::operators::{OpName, StageOp, Work};
use super::partition::StageRole;
use super::schedule::{interleaved_bubble_fraction, Eq7, Step, Timeline};
use super::sizing::{active_params, layer_params, model_params, padded_vocab};
use super::timing::{TimedOp, TimedTraining};
use crate::cost::{CostBackend, Efficiency, Source, Timed};
use crate::hw::{Precision, System};
use crate::op::Phase;

/// One pipeline stage of the prediction.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct StageReport {
    /// Stage index, 0-based.
    pub stage: u32,
    pub role: StageRole,
    /// Encoder layers on the stage (all its model chunks).
    pub encoders: u32,
    /// Parameters held by one GPU of the stage before ZeRO partitioning (S1 eq. 6, generalized; its routed experts
    /// included).
    pub parameters: f64,
    /// Forward time per micro-batch, all model chunks (compute, tensor/context-parallel communication, pipeline
    /// sends), s.
    pub forward_s: f64,
    /// Backward time per micro-batch, all model chunks (recomputation included), s.
    pub backward_s: f64,
    /// Fused Adam over the stage's (ZeRO-partitioned) parameters, s.
    pub optimizer_s: f64,
    /// ZeRO / distributed-optimizer all-gather of the updated parameters (and of the routed experts over the
    /// expert-data-parallel group), s (0 without it or with dp·cp = 1).
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
    /// How the context-parallel ranks communicate, in effect (the request's `cp_comm_type` or the framework's
    /// default; [`crate::llm::cp`]); absent with context_parallel 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cp_comm_type: Option<crate::llm::cp::CpCommType>,
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
    pub overlap_param_gather: bool,
    pub align_param_gather: bool,
    /// Parameters per gradient bucket on the first stage (the request's `bucket_size` or Megatron-Core's
    /// default).
    pub bucket_size: f64,
    /// Transformer Engine's TP overlap in effect (requested, with sequence parallelism and tp > 1).
    pub tp_comm_overlap: bool,
    /// Overlapped pipeline sends in effect.
    pub overlap_p2p_comm: bool,
    pub layer_split: LayerSplit,
    /// The framework that runs it.
    pub framework: Framework,
    /// The optimizer's implementation in effect (the request's or the framework's).
    pub optimizer: OptimizerImpl,
    /// Gradients reduced in fp32 (the request's `grad_reduce_in_fp32` or the framework's default).
    pub grad_reduce_in_fp32: bool,
    /// How the fp8 GEMMs are scaled (`delayed` unless the request names another; meaningful under precision fp8).
    pub fp8_recipe: crate::llm::recipe::Fp8Recipe,
    /// The parameter all-gathers move fp8 weights.
    pub fp8_param_gather: bool,
    /// Which passes replay as CUDA graphs.
    pub cuda_graphs: crate::llm::cuda_graphs::CudaGraphs,
    /// Unique parameters of the model (every expert; multi-token-prediction layers not counted).
    pub model_parameters: f64,
    /// Parameters one token uses: the model's with only the top-k routed experts of each MoE layer (= model
    /// parameters for a dense model).
    pub active_parameters: f64,
    /// Dims per attention head.
    pub head_dim: u32,
    /// Submodules selective recompute re-runs (Megatron-Core `recompute_modules`; empty without selective recompute).
    pub recompute_modules: Vec<crate::llm::moe::RecomputeModule>,
    /// Expert parallelism, the dispatcher and the routing balance (mixture-of-experts models).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moe: Option<crate::llm::moe::MoeReport>,
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
fn operator_rows(cfg: &TrainingConfig, d: &Decomposition, t: &TimedTraining) -> Vec<OperatorRow> {
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

/// The warning that the links this configuration communicates over are datasheet figures (derated by perfcast's
/// generic network efficiency) rather than what NCCL achieves on the system ([`crate::hw::Link::achieved`]), when
/// the system has no calibration from its own measurements. The intra-node link is used when a node holds
/// several of the configuration's GPUs, the inter-node link when the configuration spans nodes.
pub fn network_warning(cfg: &TrainingConfig, system: &System, calibrated: bool) -> Option<String> {
    if calibrated || cfg.gpus() <= 1 {
        return None;
    }
    let gpn = system.gpus_per_node.max(1) as u64;
    let mut links = Vec::new();
    if gpn > 1 && !system.intra_node.achieved {
        links.push("intra-node");
    }
    if cfg.gpus() > gpn && !system.inter_node.achieved {
        links.push("inter-node");
    }
    (!links.is_empty()).then(|| {
        format!(
            "network uncalibrated: the {} bandwidth of {} is a datasheet figure derated by a generic efficiency, \
             not what NCCL achieves there; upload nccl-tests or OSU results of this system to calibrate it \
             (POST /v1/profiles?system={})",
            links.join(" and "),
            system.name,
            system.name
        )
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
    if cfg.tp_comm_overlap && !cfg.tp_overlap() {
        w.push(
            "tp_comm_overlap has no effect without sequence_parallel and tp > 1 (Transformer Engine overlaps the \
             sequence-parallel all-gathers and reduce-scatters; NeMo turns it off otherwise)"
                .to_string(),
        );
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

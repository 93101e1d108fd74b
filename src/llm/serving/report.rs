//! Stage 4 of a serving prediction — **report**: the answer to `POST /v1/predictions/inference` from the steady
//! state, the memory and the configuration: latencies, throughput, the two step kinds with their operator
//! breakdown (each row's `source`, as training's operator table), memory and warnings.

use serde::Serialize;
use utoipa::ToSchema;

use super::benchmark::SimulationReport;
use super::engine::ServingConstants;
use super::interval::{interval, ServingInterval};
use super::memory::ServingMemory;
use super::model::ServingModel;
use super::steady::{Steady, StepResult};
use super::step::TimedStep;
use super::validate::ServingConfig;
use crate::cost::{Source, Timed};
use crate::hw::{Precision, System};
use crate::llm::operators::{OpName, Work};

/// One operator of a step: its time per call and how often it runs per step.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ServingOperatorRow {
    /// S1 Table I name or a serving operator (`Attention_Prefill`, `Attention_Decode`, `MoE_Router`, `MoE`,
    /// `Sampler`).
    pub name: OpName,
    /// The operator's dims (its class's dims, see `/v1/estimates/operator`), or bytes, nodes and GPUs per node of
    /// a collective.
    pub features: Vec<u64>,
    /// Calls per step on the slowest pipeline stage (a prefill attention charged by the share of its prompts'
    /// tokens in the step is fractional).
    pub calls_per_step: f64,
    /// Time per call, µs.
    pub time_us: f64,
    /// calls_per_step · time_us, µs.
    pub total_us: f64,
    /// `analytic`, `calibrated:<system>` or `regressor:<key>@v<n>`.
    #[schema(value_type = String)]
    pub source: Source,
    /// Precision of a computation (absent for communication).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
}

/// One kind of engine step.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct StepReport {
    /// The step's wall time, ms: pp · max(GPU, launch) + host overhead (with `async_scheduling`, the larger of the
    /// two).
    pub time_ms: f64,
    /// GPU time of the slowest stage's micro-batch, ms.
    pub gpu_ms: f64,
    /// Eager kernel-launch time of that micro-batch, ms (0 when a CUDA graph replays).
    pub launch_ms: f64,
    /// The engine's host overhead per step, ms.
    pub overhead_ms: f64,
    /// Sequences decoding in the step.
    pub decode_seqs: u32,
    /// Their mean context, tokens.
    pub decode_context: u32,
    /// Prompt tokens prefilled in the step.
    pub prefill_tokens: u32,
    /// The step replays a CUDA graph of the whole step.
    pub cuda_graph: bool,
    /// How the step's kernels are launched: `graph` (one CUDA graph), `eager` (every kernel from the host),
    /// `compiled` (vLLM V1's Inductor-compiled pieces without graphs) or `piecewise` (vLLM V1's piecewise graphs,
    /// attention between them) ([`super::launch`]).
    pub launch: super::launch::LaunchPath,
    /// The slowest stage's operators for one micro-batch.
    pub operators: Vec<ServingOperatorRow>,
}

/// Throughput of one serving instance.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct ServingThroughput {
    /// Requests completed per second (Little's law: concurrency / request latency).
    pub requests_per_s: f64,
    /// Generated tokens per second.
    pub output_tokens_per_s: f64,
    /// Prompt and generated tokens per second.
    pub total_tokens_per_s: f64,
    /// Generated tokens per second per GPU (tp·pp GPUs).
    pub per_gpu: f64,
    /// Generated tokens per second one request sees while decoding: 1000 / tpot_ms.
    pub per_user: f64,
}

/// The steady batch the engine settles into.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct SteadyBatch {
    /// Requests running at once.
    pub running: f64,
    /// Of them, decoding.
    pub decoding: f64,
    /// Requests waiting beyond the running limit (closed loop: concurrency − running).
    pub queued: f64,
    /// Sequences the engine runs at once: min(max_num_seqs, KV-cache max concurrency, step budget).
    pub capacity: u32,
    /// Prompt tokens per step that carries prefill.
    pub prefill_tokens_per_step: f64,
    /// Steps that prefill one prompt (chunks).
    pub prefill_steps_per_request: u32,
    /// Fraction of steps that carry prefill.
    pub mixed_step_fraction: f64,
    /// The step budget (`max_num_batched_tokens`) limits how fast prompts are admitted.
    pub prefill_bound: bool,
}

/// The steady state of continuous batching (Little's law over the closed or open loop): what the search prunes
/// with, and the answer when `workload.simulate` is false.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct SteadyStateReport {
    /// Time to first token, ms.
    pub ttft_ms: f64,
    /// Time per output token, ms.
    pub tpot_ms: f64,
    /// ttft + (output_tokens − 1)·tpot, ms.
    pub request_latency_ms: f64,
    pub throughput: ServingThroughput,
}

/// The answer to `POST /v1/predictions/inference`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct InferencePrediction {
    /// Time to first token, ms: the simulated benchmark's mean over requests (waiting behind other requests'
    /// prefills, then the prompt's prefill steps), or the steady state's when `workload.simulate` is false.
    pub ttft_ms: f64,
    /// Time per output token after the first, ms: the simulated mean over requests of (latency − TTFT)/(output −
    /// 1), or the steady state's mean step.
    pub tpot_ms: f64,
    /// End-to-end latency of a request, ms: the simulated mean, or ttft + (output_tokens − 1)·tpot in the steady
    /// state.
    pub request_latency_ms: f64,
    /// The simulated benchmark's throughput (completed requests over its duration), or the steady state's.
    pub throughput: ServingThroughput,
    /// The simulated benchmark: percentiles of TTFT, TPOT, ITL and latency, throughput, goodput, KV-cache usage
    /// and preemptions (absent when `workload.simulate` is false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulation: Option<SimulationReport>,
    /// The steady-state model's answer (the fast bound; disaggregated: an aggregated instance of the decode
    /// worker's layout).
    pub steady_state: SteadyStateReport,
    /// The disaggregated deployment (`mode: "disagg"`): its pools, the prefill worker's memory and the KV transfer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disagg: Option<super::disagg::DisaggReport>,
    /// A step that prefills (with the decodes sharing it), ms.
    pub prefill_step_ms: f64,
    /// A decode-only step, ms.
    pub decode_step_ms: f64,
    pub prefill_step: StepReport,
    pub decode_step: StepReport,
    pub batch: SteadyBatch,
    pub memory: ServingMemory,
    /// The model as resolved.
    pub model: ServingModel,
    /// Parameters of the model.
    pub params_total: f64,
    /// Parameters one token uses (MoE: its routed experts).
    pub params_active: f64,
    /// The configuration with every default filled in.
    pub config: ServingConfig,
    /// The system and its GPU (catalog name).
    pub system: String,
    pub gpu: String,
    /// Distinct sources of the operator times.
    pub sources: Vec<String>,
    /// The constants analytic times were derated by and the engines' host costs.
    pub constants: ServingConstants,
    /// 10 %–90 % prediction intervals of `ttft_ms`, `tpot_ms` and `request_latency_ms` from the cross-validated
    /// residuals of `perfcast eval inference` ([`super::interval`]: what they cover and what not).
    pub interval: ServingInterval,
    pub warnings: Vec<String>,
}

/// The report of one step kind from its result and its slowest stage's operators, timed.
pub fn step_report(s: &StepResult, stage: &TimedStep) -> StepReport {
    let operators = stage
        .ops
        .iter()
        .zip(&stage.times)
        .map(|(o, t): (_, &Timed)| ServingOperatorRow {
            name: o.op.name,
            features: o.op.features.clone(),
            calls_per_step: o.per_step,
            time_us: t.time_us,
            total_us: o.per_step * t.time_us,
            source: t.source.clone(),
            precision: match o.op.work {
                Work::Compute { dtype, .. } => Some(dtype),
                Work::Collective { .. } => None,
                Work::WideEp(op) => op.precision(),
            },
        })
        .collect();
    StepReport {
        time_ms: s.time_s * 1e3,
        gpu_ms: s.gpu_s * 1e3,
        launch_ms: s.launch_s * 1e3,
        overhead_ms: s.overhead_s * 1e3,
        decode_seqs: s.load.decode_seqs,
        decode_context: s.load.decode_context,
        prefill_tokens: s.load.prefill_tokens,
        cuda_graph: s.cuda_graph,
        launch: s.launch,
        operators,
    }
}

/// Everything the report is built from.
pub struct ReportInputs<'a> {
    pub cfg: &'a ServingConfig,
    pub system: &'a System,
    pub steady: &'a Steady,
    /// The slowest stage's operators of the mixed step and of the decode step.
    pub mixed: &'a TimedStep,
    pub decode: &'a TimedStep,
    pub memory: ServingMemory,
    pub capacity: u32,
    pub consts: ServingConstants,
    /// Warnings the schedule stage raised.
    pub warnings: Vec<String>,
    /// The simulated benchmark, when simulated.
    pub simulation: Option<SimulationReport>,
    /// The disaggregated deployment, when disaggregated.
    pub disagg: Option<super::disagg::DisaggReport>,
}

/// The answer.
pub fn report(r: ReportInputs) -> InferencePrediction {
    let (cfg, s) = (r.cfg, r.steady);
    let x = s.throughput_rps;
    let (l, o) = (cfg.input_tokens as f64, cfg.output_tokens as f64);
    let prefill_step = step_report(&s.mixed, r.mixed);
    let decode_step = step_report(&s.decode, r.decode);
    let mut sources: Vec<String> = prefill_step
        .operators
        .iter()
        .chain(&decode_step.operators)
        .map(|o| o.source.to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    sources.sort();
    let mut warnings = Vec::new();
    if sources.iter().all(|s| s == "analytic") {
        warnings.push(
            "every operator time is analytic (no learned regressor covers this GPU yet), derated by perfcast's serving \
             constants (README, Predict LLM serving): expect the errors reported there"
                .to_string(),
        );
    }
    warnings.extend(r.warnings);
    let m = &cfg.model;
    if !r.memory.fits {
        warnings.push(format!(
            "does not fit: weights {:.1} GiB and workspace {:.1} GiB per GPU leave no room for the KV cache of one \
             request of {} tokens on {:.0} GiB; use more tp/pp, fp8 or a shorter request (the steady state answers as \
             if it fitted; the benchmark is not simulated)",
            r.memory.weights_gib,
            r.memory.workspace_gib,
            cfg.input_tokens + cfg.output_tokens,
            r.memory.capacity_gib
        ));
    }
    if let Some(c) = cfg.concurrency {
        if c as u64 > r.memory.max_concurrency && r.memory.fits {
            warnings.push(format!(
                "concurrency {c} exceeds the KV cache's {} requests of {} tokens: only {} run at once and the rest \
                 queue (an engine admitting them would preempt and recompute)",
                r.memory.max_concurrency,
                cfg.input_tokens + cfg.output_tokens,
                r.capacity
            ));
        } else if c > r.capacity {
            warnings.push(format!(
                "concurrency {c} exceeds the engine's running limit {} (max_num_seqs / step budget): the rest queue",
                r.capacity
            ));
        }
    }
    if s.prefill_bound {
        warnings.push(format!(
            "prefill-bound: max_num_batched_tokens {} admits prompts more slowly than requests finish, so TTFT \
             includes waiting for admission; a larger budget or fewer concurrent requests shortens it",
            cfg.settings.max_num_batched_tokens
        ));
    }
    if cfg.tp > r.system.gpus_per_node {
        warnings.push(format!(
            "tp {} spans nodes of {} GPUs: every layer's all-reduces cross the inter-node network",
            cfg.tp, r.system.gpus_per_node
        ));
    }
    if m.mla.is_some() {
        warnings.push(
            "multi-head latent attention is approximated (latent KV cache and projections exact; attention timed as \
             grouped attention over the latent)"
                .to_string(),
        );
    }
    let gpus = cfg.gpus() as f64;
    let steady = SteadyStateReport {
        ttft_ms: s.ttft_s * 1e3,
        tpot_ms: s.tpot_s * 1e3,
        request_latency_ms: s.request_latency_s * 1e3,
        throughput: ServingThroughput {
            requests_per_s: x,
            output_tokens_per_s: x * o,
            total_tokens_per_s: x * (l + o),
            per_gpu: x * o / gpus,
            per_user: if s.tpot_s > 0.0 { 1.0 / s.tpot_s } else { 0.0 },
        },
    };
    let (ttft_ms, tpot_ms, request_latency_ms, throughput) = match &r.simulation {
        Some(sim) if sim.completed == 0 => {
            warnings.extend(simulation_warnings(sim, cfg));
            (steady.ttft_ms, steady.tpot_ms, steady.request_latency_ms, steady.throughput)
        }
        None => (steady.ttft_ms, steady.tpot_ms, steady.request_latency_ms, steady.throughput),
        Some(sim) => {
            warnings.extend(simulation_warnings(sim, cfg));
            let t = &sim.throughput;
            let tp = ServingThroughput {
                requests_per_s: t.requests_per_s,
                output_tokens_per_s: t.output_tokens_per_s,
                total_tokens_per_s: t.total_tokens_per_s,
                per_gpu: t.output_tokens_per_s_per_gpu,
                per_user: t.output_tokens_per_s_per_user,
            };
            (sim.ttft.mean_ms, sim.tpot.mean_ms, sim.e2e_latency.mean_ms, tp)
        }
    };
    let interval = interval(ttft_ms, tpot_ms, request_latency_ms);
    InferencePrediction {
        ttft_ms,
        tpot_ms,
        request_latency_ms,
        throughput,
        simulation: r.simulation,
        steady_state: steady,
        disagg: r.disagg,
        prefill_step_ms: prefill_step.time_ms,
        decode_step_ms: decode_step.time_ms,
        prefill_step,
        decode_step,
        batch: SteadyBatch {
            running: s.running,
            decoding: s.decoding,
            queued: s.queued,
            capacity: r.capacity,
            prefill_tokens_per_step: s.prefill_tokens_per_step,
            prefill_steps_per_request: s.prefill_steps,
            mixed_step_fraction: s.mixed_fraction,
            prefill_bound: s.prefill_bound,
        },
        memory: r.memory,
        params_total: m.params_total(),
        params_active: m.params_active(),
        model: m.clone(),
        config: cfg.clone(),
        system: r.system.name.clone(),
        gpu: r.system.gpu.name.clone(),
        sources,
        constants: r.consts,
        interval,
        warnings,
    }
}

/// What the simulated run says the user should know.
fn simulation_warnings(sim: &SimulationReport, cfg: &ServingConfig) -> Vec<String> {
    let mut w = Vec::new();
    if sim.failed > 0 {
        w.push(format!(
            "{} of {} requests can never run (longer than the KV cache holds) and were dropped",
            sim.failed, sim.requests
        ));
    }
    if sim.kv_cache.preemptions > 0 {
        w.push(format!(
            "the KV cache ran out: {} preemptions (recomputed requests); fewer concurrent requests, more GPUs or an \
             fp8 KV cache avoid them",
            sim.kv_cache.preemptions
        ));
    }
    if let Some(c) = cfg.traffic.concurrency {
        if sim.requests < 2 * c {
            w.push(format!(
                "num_requests {} is less than twice the concurrency {c}: most requests see the clients' first \
                 burst, not a steady load",
                sim.requests
            ));
        }
    }
    w
}

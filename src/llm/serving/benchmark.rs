//! The simulated benchmark of one configuration: engine instances built from the validated configuration and its
//! memory ([`instance_settings`]), the clients' requests ([`super::workload`]), the simulation ([`super::sim`]) and
//! the answer's `simulation` section in the terms serving benchmarks and SLOs use ([`SimulationReport`]:
//! `vllm bench serve`'s metrics — mean, median and tail percentiles of TTFT, TPOT, ITL and end-to-end latency,
//! request and token throughput, goodput under an SLO).

use serde::Serialize;
use utoipa::ToSchema;

use super::disagg::{DisaggReport, Transfers};
use super::engine::ServingConstants;
use super::memory::{serving_memory, ServingMemory};
use super::request::{Engine, Slo};
use super::sim::instance::{InstanceSettings, Role};
use super::sim::stats::{stats_s, LatencyStats};
use super::sim::steps::StepTimer;
use super::sim::{simulate, Pool, SimLimits, SimOptions, SimOutcome};
use super::steady::Solver;
use super::validate::ServingConfig;
use super::workload::requests;
use crate::cost::CostBackend;
use crate::llm::config::ConfigError;

/// SGLang's `max_prefill_tokens` default (`server_args.py`): prompt tokens one prefill batch takes.
pub const SGLANG_MAX_PREFILL_TOKENS: u32 = 16384;

/// The engine settings of one instance of `cfg` with `memory`, in `role` (data-parallel attention ranks counted
/// together: each rank runs `max_num_seqs` requests and `max_num_batched_tokens` tokens and caches its own
/// requests; the ranks step in lockstep, as their MoE layers exchange tokens every step).
pub fn instance_settings(cfg: &ServingConfig, memory: &ServingMemory, role: Role) -> InstanceSettings {
    let s = &cfg.settings;
    let dp = cfg.dp().max(1);
    let block = memory.block_tokens.max(1);
    InstanceSettings {
        engine: cfg.engine,
        role,
        max_num_seqs: s.max_num_seqs.saturating_mul(dp),
        token_budget: s.max_num_batched_tokens.saturating_mul(dp),
        chunked_prefill: s.chunked_prefill,
        max_prefill_tokens: SGLANG_MAX_PREFILL_TOKENS.max(s.max_num_batched_tokens).saturating_mul(dp),
        block_tokens: block,
        kv_blocks: memory.kv_capacity_tokens / block as u64 * dp as u64,
        graph_sizes: if s.cuda_graphs { cfg.cuda_graph_sizes() } else { Vec::new() },
        graph_padding: s.cuda_graph_padding,
        dp,
        recv_interval: s.scheduler_recv_interval,
        overlap: s.async_scheduling,
        // The engine's host thread launches the next step before it streams this one's tokens: SGLang and
        // TensorRT-LLM always; vLLM V1 when its engine core launches the kernels itself (one GPU per engine,
        // `UniProcExecutor`), not when worker processes do ([`InstanceSettings::results_after_launch`]).
        results_after_launch: s.async_scheduling
            && match cfg.engine {
                Engine::Sglang | Engine::Trtllm => true,
                Engine::Vllm => cfg.tp * cfg.pp == 1,
            },
        tokens_per_decode_step: match (&cfg.speculative, role) {
            (Some(sp), Role::Both | Role::Decode) => sp.tokens_per_step(),
            _ => 1.0,
        },
    }
}

/// The front end's time per request of `cfg`'s engine, s ([`super::engine::HostCost::request_us`]).
pub fn frontend_s(cfg: &ServingConfig, consts: &ServingConstants) -> f64 {
    consts.host(cfg.engine, &cfg.settings).request_us * 1e-6
}

/// The simulation's options for `cfg` under `consts`: at most `max_steps` steps, the first `trace_steps` kept, the
/// engine's front end per request and the tokenization per prompt token
/// ([`ServingConstants::tokenize_us_per_token`]) on the front end's threads ([`ServingConfig::tokenizer_threads`]).
fn sim_options(cfg: &ServingConfig, consts: &ServingConstants, max_steps: u64, trace_steps: usize) -> SimOptions {
    SimOptions {
        max_steps,
        trace_steps,
        frontend_s: frontend_s(cfg, consts),
        tokenize_s_per_token: consts.tokenize_us_per_token * 1e-6,
        tokenizer_threads: cfg.tokenizer_threads,
    }
}

/// Simulates `cfg`'s benchmark on one aggregated instance whose steps `timer` times (`consts` gives the engine's
/// front-end time per request), keeping the first `trace_steps` steps.
pub fn simulate_aggregated(
    cfg: &ServingConfig,
    consts: &ServingConstants,
    timer: &mut dyn StepTimer,
    memory: &ServingMemory,
    limits: &SimLimits,
    trace_steps: usize,
) -> Result<SimOutcome, ConfigError> {
    let settings = instance_settings(cfg, memory, Role::Both);
    let reqs = requests(&cfg.traffic);
    let mut pools = [Pool { settings, workers: 1, timer }];
    let options = sim_options(cfg, consts, limits.max_steps, trace_steps);
    simulate(&mut pools, &reqs, cfg.traffic.concurrency, &|_| 0.0, options)
}

/// Simulates `cfg`'s benchmark on its two pools (`cfg.pools`, [`super::disagg`]) with steps timed through
/// `backend` by one solver per pool, keeping the first `trace_steps` steps; the outcome and the deployment's
/// report. Errors: `cfg` is not disaggregated (`mode`), or the simulation's.
pub fn simulate_disaggregated(
    cfg: &ServingConfig,
    backend: &dyn CostBackend,
    consts: ServingConstants,
    limits: &SimLimits,
    trace_steps: usize,
) -> Result<(SimOutcome, DisaggReport), ConfigError> {
    let pools = cfg.pools.as_ref().ok_or_else(|| crate::llm::config::bad("mode", "not a disaggregated deployment"))?;
    let (pcfg, dcfg) = (cfg.for_pool(&pools.prefill), cfg.for_pool(&pools.decode));
    let gpu = &backend.system().gpu;
    let (pmem, dmem) = (serving_memory(&pcfg, gpu), serving_memory(&dcfg, gpu));
    let mut ps = Solver::new(&pcfg, backend, consts, pmem.max_concurrency);
    let mut ds = Solver::new(&dcfg, backend, consts, dmem.max_concurrency);
    let transfers = Transfers::new(&pcfg, &dcfg, pmem, backend);
    let reqs = requests(&cfg.traffic);
    let mut sim_pools = [
        Pool {
            settings: instance_settings(&pcfg, &pmem, Role::Prefill),
            workers: pools.prefill.workers,
            timer: &mut ps,
        },
        Pool { settings: instance_settings(&dcfg, &dmem, Role::Decode), workers: pools.decode.workers, timer: &mut ds },
    ];
    let options = sim_options(cfg, &consts, limits.max_steps, trace_steps);
    let o = simulate(&mut sim_pools, &reqs, cfg.traffic.concurrency, &|i| transfers.time_s(i), options)?;
    let input = cfg.traffic.input_tokens;
    let report = DisaggReport {
        pools: pools.clone(),
        prefill_memory: pmem,
        kv_transfer_ms: transfers.time_s(input) * 1e3,
        kv_transfer_bytes_per_gpu: input as f64 * pmem.kv_bytes_per_token_per_gpu,
        prefill_busy: o.busy_fraction[0],
        decode_busy: o.busy_fraction[1],
    };
    Ok((o, report))
}

/// Throughput over the simulated run (completed requests and their tokens over its duration).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct SimThroughput {
    /// Requests completed per second.
    pub requests_per_s: f64,
    /// Prompt tokens per second.
    pub input_tokens_per_s: f64,
    /// Generated tokens per second.
    pub output_tokens_per_s: f64,
    /// Prompt and generated tokens per second.
    pub total_tokens_per_s: f64,
    /// The same per GPU of the deployment.
    pub requests_per_s_per_gpu: f64,
    pub input_tokens_per_s_per_gpu: f64,
    pub output_tokens_per_s_per_gpu: f64,
    pub total_tokens_per_s_per_gpu: f64,
    /// Generated tokens per second one request sees while decoding: 1000 / mean TPOT (ms).
    pub output_tokens_per_s_per_user: f64,
}

/// Requests that met the latency target (`vllm bench serve --goodput`: a request is good when each given bound
/// holds for it; a single-token request's TPOT counts as 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Goodput {
    pub slo: Slo,
    /// Good requests per second.
    pub requests_per_s: f64,
    /// Share of the completed requests that were good.
    pub fraction: f64,
    /// Generated tokens of good requests per second, per GPU.
    pub output_tokens_per_s_per_gpu: f64,
}

/// The KV cache over the run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct KvCacheReport {
    /// Blocks of the instance (all data-parallel ranks; per instance of a pool) and tokens per block.
    pub blocks: u64,
    pub block_tokens: u32,
    /// Blocks in use over the total, averaged over the busy time, and at the fullest step, 0–1.
    pub usage_mean: f64,
    pub usage_max: f64,
    /// Requests preempted (their cache freed, recomputed later).
    pub preemptions: u64,
}

/// The simulated benchmark, as its client reports it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SimulationReport {
    /// Time to first token over requests (queueing, prefill and, disaggregated, the KV transfer).
    pub ttft: LatencyStats,
    /// Time per output token over requests: (end-to-end − TTFT)/(output − 1).
    pub tpot: LatencyStats,
    /// Inter-token latency over every token after the first.
    pub itl: LatencyStats,
    /// End-to-end latency over requests.
    pub e2e_latency: LatencyStats,
    /// Requests sent, completed, and dropped because they can never run (longer than the KV cache holds).
    pub requests: u32,
    pub completed: u32,
    pub failed: u32,
    /// From the first request to the last token, s.
    pub duration_s: f64,
    pub throughput: SimThroughput,
    /// Present when the request gives `slo`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Goodput>,
    pub kv_cache: KvCacheReport,
    /// Engine steps simulated, and requests per step (time-weighted mean).
    pub steps: u64,
    pub batch_mean: f64,
    /// GPUs of the deployment the per-GPU rates divide by.
    pub gpus: u32,
}

/// The report of `o`, a run of `sent` requests on `gpus` GPUs with the instances' `kv` cache, against `slo`.
pub fn summarize(o: &SimOutcome, sent: u32, gpus: u32, kv: (u64, u32), slo: Option<Slo>) -> SimulationReport {
    let d = o.duration_s.max(1e-12);
    let g = gpus.max(1) as f64;
    let tpot = stats_s(&o.tpot_s);
    let x = o.completed as f64 / d;
    let (i, out) = (o.input_tokens as f64 / d, o.output_tokens as f64 / d);
    let goodput = slo.map(|slo| {
        let ok = |v: f64, bound: Option<f64>| bound.is_none_or(|b| v * 1e3 <= b);
        let mut good = 0u64;
        let mut good_tokens = 0.0;
        for k in 0..o.ttft_s.len() {
            let tpot = o.tpot_or_zero_s[k];
            if ok(o.ttft_s[k], slo.ttft_ms) && ok(tpot, slo.tpot_ms) && ok(o.e2e_s[k], slo.e2e_latency_ms) {
                good += 1;
                good_tokens += o.outputs[k] as f64;
            }
        }
        Goodput {
            slo,
            requests_per_s: good as f64 / d,
            fraction: if o.completed > 0 { good as f64 / o.completed as f64 } else { 0.0 },
            output_tokens_per_s_per_gpu: good_tokens / d / g,
        }
    });
    SimulationReport {
        ttft: stats_s(&o.ttft_s),
        itl: o.itl_s.clone().stats(1e3),
        e2e_latency: stats_s(&o.e2e_s),
        requests: sent,
        completed: o.completed,
        failed: o.failed,
        duration_s: o.duration_s,
        throughput: SimThroughput {
            requests_per_s: x,
            input_tokens_per_s: i,
            output_tokens_per_s: out,
            total_tokens_per_s: i + out,
            requests_per_s_per_gpu: x / g,
            input_tokens_per_s_per_gpu: i / g,
            output_tokens_per_s_per_gpu: out / g,
            total_tokens_per_s_per_gpu: (i + out) / g,
            output_tokens_per_s_per_user: if tpot.mean_ms > 0.0 { 1e3 / tpot.mean_ms } else { 0.0 },
        },
        tpot,
        goodput,
        kv_cache: KvCacheReport {
            blocks: kv.0,
            block_tokens: kv.1,
            usage_mean: o.kv_usage_mean,
            usage_max: o.kv_usage_max,
            preemptions: o.preemptions,
        },
        steps: o.steps,
        batch_mean: o.batch_mean,
        gpus,
    }
}

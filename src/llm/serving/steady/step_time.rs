//! One engine step of the whole running batch timed: its stages' micro-batches through the backend, a CUDA graph's
//! or eager launches, and the engine's host overhead.
//!
//! **vLLM V1's piecewise CUDA graphs.** vLLM V1 compiles the model with its attention ops as splitting ops
//! (`CompilationConfig.splitting_ops` default: `_attention_ops` — `vllm::unified_attention_with_output`,
//! `vllm::unified_mla_attention_with_output`, `vllm::sparse_attn_indexer`, …, `vllm/config/compilation.py`,
//! `set_splitting_ops_for_v1`): N splitting ops cut the forward into N + 1 pieces, each captured as a CUDA graph per
//! capture size, and the attention op runs eagerly between two pieces. Under the default `cudagraph_mode`
//! (`FULL_AND_PIECEWISE`; `PIECEWISE` in earlier V1 releases) the dispatcher (`CudagraphDispatcher.dispatch`,
//! `vllm/v1/cudagraph_dispatcher.py`) replays a FULL graph for a uniform decode batch and PIECEWISE graphs for any
//! other batch — prefill or mixed — whose token count, padded up to the next `cudagraph_capture_sizes` entry
//! (`GPUModelRunner._get_num_input_tokens`: `pad_for_cudagraph` when `num_scheduled_tokens <=
//! cudagraph_batch_sizes[-1]`, `vllm/v1/worker/gpu_model_runner.py`), is a captured size; a larger one runs without
//! graphs. A piecewise step therefore costs the host one graph replay per piece and one eager call per splitting op,
//! each a Python call priced `python_kernel_us` (the training model's convention for one graph launch,
//! [`crate::llm::cuda_graphs::CudaGraphs::layer_host_us`]), instead of `python_kernel_us` per counted kernel; on the
//! GPU the pieces' analytic kernels cost `graph_kernel_us` and the eager attention keeps `kernel_us`, over the padded
//! token count. The LM head and the sampler run outside the compiled model in every step; like the decode graphs'
//! path, their launches are not charged [rec].

use super::op_times::OpKey;
use super::Solver;
use crate::cost::Source;
use crate::llm::config::ConfigError;
use crate::llm::operators::{OpName, Work};
use crate::llm::serving::fusion::{cpp_launched, fused_charge};
use crate::llm::serving::request::{Engine, VllmEngine};
use crate::llm::serving::step::{for_each_op, stage_ops, time_step, StageRole, StepLoad, TimedStep};
use crate::op::OpClass;

/// One step of the whole running batch, timed.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// What the step processed.
    pub load: StepLoad,
    /// The step's wall time, s: pp · max(GPU, launch) of the slowest stage's micro-batch + the host overhead
    /// (with `async_scheduling`, the larger of the two).
    pub time_s: f64,
    /// GPU time of the slowest stage's micro-batch, s.
    pub gpu_s: f64,
    /// Eager launch time of the slowest stage's micro-batch, s (0 under a CUDA graph).
    pub launch_s: f64,
    /// The engine's host overhead, s.
    pub overhead_s: f64,
    /// The step replays a CUDA graph (a decode-only step's whole forward).
    pub cuda_graph: bool,
    /// The step replays vLLM V1's piecewise CUDA graphs, attention run eagerly between the pieces (see the module
    /// doc).
    pub piecewise_graph: bool,
    /// The slowest stage (0 = the first; with pp = 1 the only one).
    pub slowest_stage: usize,
}

/// One stage's micro-batch step: GPU seconds, counted kernels, analytic compute kernels (charged `kernel_us` each,
/// [`super::derate`](crate::llm::serving::derate)) and those of them that are attention.
struct StageTime {
    gpu_s: f64,
    kernels: f64,
    analytic: f64,
    analytic_attention: f64,
    /// Kernels a TensorRT-LLM C++ op launches past its first ([`cpp_launched`]).
    cpp: f64,
}

/// The attention kernels vLLM runs eagerly between its piecewise graphs (its splitting ops).
fn is_attention(class: OpClass) -> bool {
    matches!(class, OpClass::AttentionPrefill | OpClass::AttentionDecode)
}

impl Solver<'_> {
    /// The stages a step is timed on (pp = 1: the only one; else the first and the last, the slowest two) with
    /// their dense and MoE layers.
    fn stages(&self) -> Vec<(StageRole, u32, u32)> {
        let cfg = self.cfg;
        let moe_total = cfg.model.moe_layers();
        let dense_total = cfg.model.layers - moe_total;
        if cfg.pp == 1 {
            return vec![(StageRole { first: true, last: true }, dense_total, moe_total)];
        }
        let per = cfg.layers_per_stage();
        let (first_dense, last_moe) = (dense_total.min(per), moe_total.min(per));
        vec![
            (StageRole { first: true, last: false }, first_dense, per - first_dense),
            (StageRole { first: false, last: true }, per - last_moe, last_moe),
        ]
    }

    /// One micro-batch of `load` on one GPU: every count split over the pp micro-batches (and, with data-parallel
    /// attention, over the tp ranks).
    fn micro(&self, load: &StepLoad) -> StepLoad {
        let parts = self.cfg.pp * self.cfg.dp();
        let split = |v: u32| v.div_ceil(parts);
        StepLoad {
            decode_seqs: split(load.decode_seqs),
            prefill_tokens: split(load.prefill_tokens),
            sampled: split(load.sampled),
            ..*load
        }
    }

    /// One stage's micro-batch step ([`StageTime`]: GPU seconds, kernels, analytic kernels and the attention among
    /// them), without allocating (operator times memoized).
    fn stage_time(
        &mut self,
        micro: &StepLoad,
        role: StageRole,
        dense: u32,
        moe: u32,
    ) -> Result<StageTime, ConfigError> {
        let (mut gpu_us, mut kernels, mut analytic, mut analytic_attention, mut cpp) = (0.0, 0.0, 0.0, 0.0, 0.0);
        let mut err = None;
        let (cfg, timer, cache) = (self.cfg, &mut self.timer, &mut self.ops.times);
        let system = timer.backend().system();
        let kernel_us = self.consts.efficiency.kernel_us;
        for_each_op(cfg, system, micro, role, dense, moe, &mut |name, work, per_step, _| {
            if err.is_some() {
                return;
            }
            let attention = matches!(work, Work::Compute { shape, .. } if is_attention(shape.class));
            let mut cpp_class = None;
            let key = match work {
                Work::Compute { shape, dtype } => {
                    cpp_class = Some(shape.class);
                    OpKey::Compute(shape, dtype)
                }
                Work::Collective { collective, bytes, group, active_per_node } => {
                    OpKey::Collective(collective, bytes.to_bits(), group, active_per_node)
                }
            };
            // A norm fused into an all-reduce (`fusion::fused_charge`) shares its shape with the norm that runs
            // alone: it is timed through the same cache entry and charged apart.
            let (t, k, a) = match cache.get(&key) {
                Some(v) => *v,
                None => match timer.time(&work) {
                    Ok(t) => {
                        let a = matches!(work, Work::Compute { .. }) && t.source == Source::Analytic;
                        let v = (t.time_us, t.kernels.max(1), a);
                        cache.insert(key, v);
                        v
                    }
                    Err(e) => {
                        err = Some(e);
                        return;
                    }
                },
            };
            let (t, k) = fused_charge(name, t, k, kernel_us);
            gpu_us += per_step * t;
            kernels += per_step * f64::from(k);
            if let Some(class) = cpp_class {
                cpp += per_step * f64::from(cpp_launched(cfg, class, k));
            }
            if a {
                analytic += per_step * f64::from(k);
                if attention {
                    analytic_attention += per_step * f64::from(k);
                }
            }
        });
        match err {
            Some(e) => Err(e),
            None => Ok(StageTime { gpu_s: gpu_us * 1e-6, kernels, analytic, analytic_attention, cpp }),
        }
    }

    /// Whether a step of `micro` (one micro-batch on one GPU) replays vLLM V1's piecewise CUDA graphs: vLLM's V1
    /// engine with graphs on, a step holding prefill, and at most the largest capture size of tokens (see the
    /// module doc).
    fn piecewise(&self, micro: &StepLoad, busiest: u32, sizes: &[u32]) -> bool {
        let s = &self.cfg.settings;
        self.cfg.engine == Engine::Vllm
            && s.vllm_engine == VllmEngine::V1
            && s.cuda_graphs
            && micro.prefill_tokens > 0
            && sizes.last().is_some_and(|m| busiest <= *m)
    }

    /// Tokens of the busiest data-parallel rank in a step of `load` whose average rank runs `micro`: with
    /// data-parallel attention a prompt's chunk sits whole on one rank (at least min(prefill tokens, prompt length)
    /// there), and vLLM pads every rank to the largest rank's token count and runs them in one graph mode
    /// (`GPUModelRunner.get_dp_padding`); without it, `micro`'s tokens.
    fn busiest_rank_tokens(&self, load: &StepLoad, micro: &StepLoad) -> u32 {
        if self.cfg.dp() <= 1 {
            return micro.tokens();
        }
        micro.decode_seqs + micro.prefill_tokens.max(load.prefill_tokens.min(load.prompt_len))
    }

    /// Host time of one piecewise step of a stage of `layers` layers, µs: vLLM's splitting ops per layer (the
    /// attention op; DeepSeek sparse attention's `sparse_attn_indexer` too) cut the stage's forward into
    /// splits + 1 graph pieces; each piece's replay and each eager splitting-op call cost `python_kernel_us`.
    fn piecewise_host_us(&self, layers: u32) -> f64 {
        let per_layer = if self.cfg.model.dsa.is_some() { 2 } else { 1 };
        let splits = f64::from(layers * per_layer);
        (splits + 1.0 + splits) * self.consts.python_kernel_us
    }

    /// What one analytic kernel's GPU time changes by when its step replays a CUDA graph, µs: `graph_kernel_us` in
    /// place of `kernel_us` (negative: a graph is cheaper).
    fn graph_delta_us(&self) -> f64 {
        self.consts.graph_kernel_us - self.consts.efficiency.kernel_us
    }

    /// The time of one step processing `load` (see the module doc).
    pub fn step(&mut self, load: StepLoad) -> Result<StepResult, ConfigError> {
        let key = (load.decode_seqs, load.decode_context, load.prefill_tokens, load.prompt_len, load.sampled);
        if let Some(s) = self.steps.get(&key) {
            return Ok(s.clone());
        }
        let cfg = self.cfg;
        let (micro, graph, piecewise) = self.graph_mode(&load);
        let eager_us = if graph { 0.0 } else { self.consts.eager_launch_us(cfg.engine, &cfg.settings) };
        let (mut slowest, mut gpu_s, mut launch_s) = (0usize, 0.0f64, 0.0f64);
        for (i, (role, dense, moe)) in self.stages().into_iter().enumerate() {
            let t = self.stage_time(&micro, role, dense, moe)?;
            let (g, l) = if graph {
                ((t.gpu_s + t.analytic * self.graph_delta_us() * 1e-6).max(0.0), 0.0)
            } else if piecewise {
                // The pieces' analytic kernels replay from graphs; the attention between them runs eagerly.
                let in_graph = t.analytic - t.analytic_attention;
                (
                    (t.gpu_s + in_graph * self.graph_delta_us() * 1e-6).max(0.0),
                    self.piecewise_host_us(dense + moe) * 1e-6,
                )
            } else {
                // Kernels a TensorRT-LLM C++ op launches past its first cost the compiled launch, not Python's.
                (t.gpu_s, ((t.kernels - t.cpp) * eager_us + t.cpp * self.consts.eager_kernel_us) * 1e-6)
            };
            if i == 0 || g.max(l) > gpu_s.max(launch_s) {
                (slowest, gpu_s, launch_s) = (i, g, l);
            }
        }
        let host = self.consts.host(cfg.engine, &cfg.settings);
        // Each data-parallel rank runs its own scheduler over its share of the sequences.
        let seqs = (load.decode_seqs as f64 + (load.prefill_tokens as f64 / load.prompt_len.max(1) as f64).ceil())
            / cfg.dp() as f64;
        let overhead_s = (host.step_us + host.seq_us * seqs) * 1e-6;
        let result = StepResult {
            load,
            // Host work between steps adds to the GPU's, unless the engine schedules asynchronously: then the
            // next step's preparation runs while this one computes and the slower of the two sets the pace.
            time_s: if cfg.settings.async_scheduling {
                (cfg.pp as f64 * gpu_s.max(launch_s)).max(overhead_s)
            } else {
                cfg.pp as f64 * gpu_s.max(launch_s) + overhead_s
            },
            gpu_s,
            launch_s,
            overhead_s,
            cuda_graph: graph,
            piecewise_graph: piecewise,
            slowest_stage: slowest,
        };
        self.steps.insert(key, result.clone());
        Ok(result)
    }

    /// One micro-batch of `load` as its forward runs, and whether it replays a full CUDA graph (a decode-only batch
    /// of at most `cuda_graph_max_batch` sequences, with `cuda_graph_padding` off of exactly a captured size) or
    /// vLLM's piecewise graphs (its prefill tokens then padded so that the step's tokens are the captured size the
    /// busiest data-parallel rank is padded to: the padded rows cost what real ones do).
    fn graph_mode(&self, load: &StepLoad) -> (StepLoad, bool, bool) {
        use crate::llm::serving::sim::steps::{graph_sizes, padded, replays_graph};
        let s = &self.cfg.settings;
        let mut micro = self.micro(load);
        let sizes = graph_sizes(self.cfg.engine, s.cuda_graph_max_batch, s.cuda_graph_padding);
        let graph =
            s.cuda_graphs && load.prefill_tokens == 0 && replays_graph(&sizes, micro.decode_seqs, s.cuda_graph_padding);
        let busiest = self.busiest_rank_tokens(load, &micro);
        let piecewise = !graph && self.piecewise(&micro, busiest, &sizes);
        if piecewise {
            let to = padded(&sizes, busiest).unwrap_or(busiest).max(micro.tokens());
            micro.prefill_tokens += to - micro.tokens();
        }
        (micro, graph, piecewise)
    }

    /// The slowest stage's operators of `step`, each timed (the report's operator table).
    pub fn detail(&mut self, step: &StepResult) -> Result<TimedStep, ConfigError> {
        let (micro, _, _) = self.graph_mode(&step.load);
        let (role, dense, moe) = self.stages()[step.slowest_stage];
        let ops = stage_ops(self.cfg, self.timer.backend().system(), &micro, role, dense, moe);
        let mut timed = time_step(ops, &mut self.timer)?;
        if step.cuda_graph || step.piecewise_graph {
            // The same in-graph kernel cost as [`Solver::step`], shown on each analytic operator (a piecewise
            // step's attention runs eagerly and keeps `kernel_us`).
            let delta = self.graph_delta_us();
            let mut gpu_us = 0.0;
            for (o, t) in timed.ops.iter().zip(timed.times.iter_mut()) {
                let fused = o.op.name == OpName::AllreduceRmsNorm;
                let eager = step.piecewise_graph
                    && matches!(o.op.work, Work::Compute { shape, .. } if is_attention(shape.class));
                if matches!(o.op.work, Work::Compute { .. }) && t.source == Source::Analytic && !fused && !eager {
                    t.time_us = (t.time_us + f64::from(t.kernels.max(1)) * delta).max(0.0);
                }
                gpu_us += o.per_step * t.time_us;
            }
            timed.gpu_s = gpu_us * 1e-6;
        }
        Ok(timed)
    }
}

//! One engine step of the whole running batch timed: its stages' micro-batches through the backend, their launches
//! (a CUDA graph's, vLLM V1's compiled pieces with or without their graphs, or eager: [`LaunchPath`]), and the
//! engine's host overhead.

use super::op_times::OpKey;
use super::Solver;
use crate::cost::Source;
use crate::llm::config::ConfigError;
use crate::llm::operators::{OpName, Work};
use crate::llm::serving::fusion::fused_charge;
use crate::llm::serving::launch::{LaunchCounts, LaunchPath, OpHost};
use crate::llm::serving::sim::steps::{padded, replays_graph};
use crate::llm::serving::spec_v1::{self, SpecV1Step};
use crate::llm::serving::speculative::mtp_module_extras;
use crate::llm::serving::step::{for_each_op, stage_ops, time_step, StageRole, StepLoad, TimedStep};

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
    /// Host launch time of the slowest stage's micro-batch, s (0 under a full CUDA graph; [`LaunchPath::host_us`]).
    pub launch_s: f64,
    /// The engine's host overhead, s.
    pub overhead_s: f64,
    /// The step replays a CUDA graph of the whole step.
    pub cuda_graph: bool,
    /// How the step's kernels are launched.
    pub launch: LaunchPath,
    /// The slowest stage (0 = the first; with pp = 1 the only one).
    pub slowest_stage: usize,
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

    /// GPU seconds, kernels and analytic compute kernels (those charged `kernel_us` each,
    /// [`super::derate`](crate::llm::serving::derate)), both by where they run ([`OpHost`]), of one stage's
    /// micro-batch step, without allocating (operator times memoized).
    fn stage_time(
        &mut self,
        micro: &StepLoad,
        role: StageRole,
        dense: u32,
        moe: u32,
        mtp: bool,
    ) -> Result<(f64, LaunchCounts, LaunchCounts), ConfigError> {
        let (mut gpu_us, mut kernels, mut analytic) = (0.0, LaunchCounts::default(), LaunchCounts::default());
        let mut err = None;
        let (cfg, timer, cache) = (self.cfg, &mut self.timer, &mut self.ops.times);
        let system = timer.backend().system();
        let kernel_us = self.consts.efficiency.kernel_us;
        let mut sink = |name: OpName, work: Work, per_step: f64, _: &[u64]| {
            if err.is_some() {
                return;
            }
            let key = match work {
                Work::Compute { shape, dtype } => OpKey::Compute(shape, dtype),
                Work::Collective { collective, bytes, group, active_per_node } => {
                    OpKey::Collective(collective, bytes.to_bits(), group, active_per_node)
                }
                Work::WideEp(op) => OpKey::WideEp(op),
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
            kernels.add(name, per_step * f64::from(k));
            if a {
                analytic.add(name, per_step * f64::from(k));
            }
        };
        for_each_op(cfg, system, micro, role, dense, moe, &mut sink);
        if mtp {
            mtp_module_extras(cfg, micro, &mut sink);
        }
        kernels.splitting_calls = splitting_calls(cfg, dense, moe);
        match err {
            Some(e) => Err(e),
            None => Ok((gpu_us * 1e-6, kernels, analytic)),
        }
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
        // Speculative decoding: the model's pass verifies every decode's drafts ([`Speculative::verification`]).
        let drafted = self.micro(&load);
        let load = match &cfg.speculative {
            Some(sp) => sp.verification(&load),
            None => load,
        };
        let mut micro = self.micro(&load);
        // A decode-only step replays a graph when its batch is (padded to) a captured size.
        let s = &cfg.settings;
        let sizes = cfg.cuda_graph_sizes();
        let graph =
            s.cuda_graphs && load.prefill_tokens == 0 && replays_graph(&sizes, micro.decode_seqs, s.cuda_graph_padding);
        let launch = LaunchPath::of(cfg.engine, s, graph, micro.tokens());
        pad_piecewise(&mut micro, launch, &sizes);
        let (mut slowest, mut gpu_s, mut launch_s) = (0usize, 0.0f64, 0.0f64);
        let (mut verify_nodes, mut draft) = (0.0f64, DraftTimes::default());
        for (i, (role, dense, moe)) in self.stages().into_iter().enumerate() {
            let (g, k, analytic) = self.stage_time(&micro, role, dense, moe, false)?;
            let replayed = analytic.in_graph(launch);
            let g = if replayed > 0.0 { (g + replayed * self.graph_delta_us() * 1e-6).max(0.0) } else { g };
            if role.last {
                draft = self.draft_s(&drafted, launch)?;
            }
            let g = if role.last { g + (draft.extend_s + draft.decode_s) } else { g };
            let l = launch.host_us(&k, &self.consts, cfg.engine, s) * 1e-6;
            if i == 0 || g.max(l) > gpu_s.max(launch_s) {
                (slowest, gpu_s, launch_s, verify_nodes) = (i, g, l, k.total());
            }
        }
        let host = self.consts.host(cfg.engine, &cfg.settings);
        // Each data-parallel rank runs its own scheduler over its share of the sequences.
        let seqs = (load.decode_seqs as f64 + (load.prefill_tokens as f64 / load.prompt_len.max(1) as f64).ceil())
            / cfg.dp() as f64;
        let mut overhead_us = host.step_us + host.seq_us * seqs;
        // SGLang's spec-v1 EAGLE iteration: its host path around the verify's syncs ([`spec_v1`]).
        if load.decode_seqs > 0 && spec_v1::applies(cfg) {
            let v1 = SpecV1Step {
                graph: launch == LaunchPath::Graph,
                verify_nodes,
                draft_decode_nodes: draft.decode_nodes,
                draft_extend_nodes: draft.extend_nodes,
                draft_decode_gpu_us: draft.decode_s * 1e6,
                seqs: load.decode_seqs as f64 / cfg.dp() as f64,
            };
            overhead_us += spec_v1::exposed_host_us(&v1, &host, &self.consts);
        }
        let overhead_s = overhead_us * 1e-6;
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
            launch,
            slowest_stage: slowest,
        };
        self.steps.insert(key, result.clone());
        Ok(result)
    }

    /// The MTP module's draft passes in a step of `micro` (one micro-batch, before verification;
    /// [`crate::llm::serving::speculative`]), run on the last stage, launched as the step's kernels are (`launch`):
    /// their GPU seconds and kernels, the first pass apart from the k − 1 others (all 0 without speculative
    /// decoding). The module is one MoE layer on a mixture-of-experts model (DeepSeek-V3's layer 61), else one dense
    /// layer, with the embedding and the output head, and its own norms and `eh_proj`.
    fn draft_s(&mut self, micro: &StepLoad, launch: LaunchPath) -> Result<DraftTimes, ConfigError> {
        let Some(sp) = self.cfg.speculative else {
            return Ok(DraftTimes::default());
        };
        let (dense, moe) = if self.cfg.model.moe.is_some() { (0, 1) } else { (1, 0) };
        let role = StageRole { first: true, last: true };
        let mut out = DraftTimes::default();
        for (i, (load, passes)) in sp.draft_passes(micro, self.cfg.engine).into_iter().enumerate() {
            if passes == 0 || load.tokens() == 0 {
                continue;
            }
            let (g, k, analytic) = self.stage_time(&load, role, dense, moe, true)?;
            let replayed = analytic.in_graph(launch);
            let g = if replayed > 0.0 { (g + replayed * self.graph_delta_us() * 1e-6).max(0.0) } else { g };
            let (s, n) = (passes as f64 * g, passes as f64 * k.total());
            if i == 0 {
                (out.extend_s, out.extend_nodes) = (s, n);
            } else {
                (out.decode_s, out.decode_nodes) = (s, n);
            }
        }
        Ok(out)
    }

    /// The slowest stage's operators of `step`, each timed (the report's operator table).
    pub fn detail(&mut self, step: &StepResult) -> Result<TimedStep, ConfigError> {
        let mut micro = self.micro(&step.load);
        pad_piecewise(&mut micro, step.launch, &self.cfg.cuda_graph_sizes());
        let (role, dense, moe) = self.stages()[step.slowest_stage];
        let ops = stage_ops(self.cfg, self.timer.backend().system(), &micro, role, dense, moe);
        let mut timed = time_step(ops, &mut self.timer)?;
        if step.launch == LaunchPath::Graph || step.launch == LaunchPath::Piecewise {
            // The same in-graph kernel cost as [`Solver::step`], shown on each analytic operator a graph replays.
            let delta = self.graph_delta_us();
            let mut gpu_us = 0.0;
            for (o, t) in timed.ops.iter().zip(timed.times.iter_mut()) {
                let fused = o.op.name == OpName::AllreduceRmsNorm;
                if matches!(o.op.work, Work::Compute { .. })
                    && t.source == Source::Analytic
                    && !fused
                    && step.launch.in_graph(OpHost::of(o.op.name))
                {
                    t.time_us = (t.time_us + f64::from(t.kernels.max(1)) * delta).max(0.0);
                }
                gpu_us += o.per_step * t.time_us;
            }
            timed.gpu_s = gpu_us * 1e-6;
        }
        Ok(timed)
    }
}

/// The MTP module's draft passes of one step on the last stage ([`Solver::step`]): the first pass (SGLang's
/// draft-extend) and the k − 1 draft-decode passes after it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct DraftTimes {
    /// GPU time of the first pass, s.
    extend_s: f64,
    /// Counted kernels of the first pass.
    extend_nodes: f64,
    /// GPU time of the k − 1 later passes together, s.
    decode_s: f64,
    /// Counted kernels of the k − 1 later passes together.
    decode_nodes: f64,
}

/// Pads `micro`'s tokens on a piecewise-graph step (`launch`) up to the next of the captured `sizes`, as vLLM does
/// (`GPUModelRunner._get_num_input_tokens`, `vllm/v1/worker/gpu_model_runner.py`: `pad_for_cudagraph` when
/// `num_scheduled_tokens` ≤ the largest capture size): the pieces' operators run the padded rows
/// ([`StepLoad::graph_pad_tokens`]), the attention between them only the real ones. Other paths: unchanged.
fn pad_piecewise(micro: &mut StepLoad, launch: LaunchPath, sizes: &[u32]) {
    if launch == LaunchPath::Piecewise {
        if let Some(p) = padded(sizes, micro.tokens()) {
            micro.graph_pad_tokens = p - micro.tokens();
        }
    }
}

/// Splitting-op calls of a stage with `dense` + `moe` layers: one attention call per layer, and one DSA indexer
/// call per layer of a model with DeepSeek sparse attention (`vllm::sparse_attn_indexer`).
fn splitting_calls(cfg: &crate::llm::serving::validate::ServingConfig, dense: u32, moe: u32) -> f64 {
    let per_layer = if cfg.model.dsa.is_some() { 2.0 } else { 1.0 };
    f64::from(dense + moe) * per_layer
}

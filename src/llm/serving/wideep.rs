//! SGLang's wide expert parallelism, as SGLang measured it: DeepEP dispatch and combine around DeepGEMM's grouped
//! expert GEMMs, read off aiconfigurator's SGLang `wideep_*` tables (train split, DATA.md) instead of the fused-MoE
//! regressor and the all-to-all collective model.
//!
//! **When SGLang runs this path.** SGLang's large-scale expert parallelism is `--moe-a2a-backend deepep` with
//! `--enable-dp-attention` (data-parallel attention, ep > 1) and DeepGEMM as the expert runner
//! (`--moe-runner-backend deep_gemm`; aiconfigurator's collector `collector/sglang/collect_wideep_deepep_moe.py` builds
//! exactly that `ServerArgs`). The dispatcher picks its kernels per step: `DeepEPMode.resolve(is_extend_in_batch)`
//! (`python/sglang/srt/layers/moe/utils.py`) turns `--deepep-mode auto` into NORMAL when any rank has a prefill
//! (extend) in its batch and LOW_LATENCY otherwise. Low-latency mode's buffers hold at most
//! `num_max_dispatch_tokens_per_rank` = 128 tokens per rank (the collector skips decode batches above it): a decode
//! step of more tokens per rank than the table holds is timed as the normal kernels.
//!
//! **What the tables time (no double count).** `wideep_generation_moe_perf` / `wideep_context_moe_perf` time only
//! `moe_layer.experts.run_moe_core(dispatch_output)` on a fabricated dispatch output (the collector above): DeepGEMM's
//! masked grouped GEMMs (decode) or contiguous grouped GEMMs (prefill), no dispatch or combine. Their `num_tokens` is
//! the tokens of one rank × `moe_ep_size`. `wideep_deepep_ll_perf` and `wideep_deepep_normal_perf` time DeepEP's
//! dispatch and combine alone (µs); aiconfigurator's SDK charges their sum once per MoE layer
//! (`MoEDispatch.query`, `sdk/operations/moe.py`, `load_wideep_deepep_ll_data`). So one MoE layer here is one
//! DeepGEMM call plus one dispatch+combine, and no [`crate::llm::operators::OpName::EpAllToAll`].
//!
//! **NVFP4 experts.** SGLang's NVFP4 wide-EP decode recipes for GB200 (`--quantization modelopt_fp4
//! --moe-a2a-backend deepep --deepep-mode low_latency --moe-runner-backend flashinfer_cutedsl` with
//! `SGLANG_CUTEDSL_MOE_NVFP4_DISPATCH=1`, ai-dynamo/dynamo@44884ef
//! `components/backends/sglang/slurm_jobs/scripts/gb200-fp4.sh`)
//! run the same DeepEP kernels around FlashInfer's NVFP4 experts. Dispatch and combine are timed by the same
//! `wideep_deepep_*` curves: they move activations, whatever the experts' weights. The tables dispatch fp8 (their
//! `dispatch_bandwidth_gbps` is (hidden + hidden/128·4 + 16) bytes per routed copy over `dispatch_avg_t_us`: GB200,
//! hidden 7,168, 1 token, top-8 of 256: 7,408 · 8 B / 16.57 µs = 3.58 GB/s, the row's 3.5766) and combine bf16, as
//! DeepEP's
//! `tests/test_low_latency.py` does. The recipe's NVFP4 dispatch (that variable: "use nvfp4 for dispatch", SGLang's
//! `docs/references/environment_variables.md`; `get_deepep_output_dtype`, `python/sglang/srt/layers/moe/utils.py`:
//! `input_global_scale` set → NVFP4, else BF16 for the CuteDSL runner, else FP8) moves
//! hidden/2 + hidden/16 bytes per copy, 54 % of fp8's (4,032 against 7,408 B at hidden 7,168); at decode's few
//! tokens per rank the low-latency kernels are latency-bound (same table: dispatch 16.6 µs at 1 token, 21.6 µs at
//! 64), so the fp8 curve is kept unscaled, an upper bound. Without that variable SGLang
//! dispatches bf16, which no table times. The experts are the measured SGLang NVFP4 MoE
//! (`moe_perf`, `sglang_flashinfer_trtllm_moe`, `nvfp4`, `balanced`; collected by SGLang 0.5.14's
//! `collector/sglang/collect_moe.py`, `_benchmark_framework_quantized_moe`: num_tokens hidden states routed top-k
//! over all experts into rank 0's `FusedMoE` of experts/ep local ones, so num_tokens is the EP group's tokens, as
//! aiconfigurator's `MoE.query` (`sdk/operations/moe.py`) queries it with per-rank tokens × attention_dp_size).
//! It is FlashInfer's TensorRT-LLM routed kernel, not the CuteDSL masked GEMM the recipe names (no table times
//! that): it routes and finalizes all num_tokens tokens on every rank, where DeepEP hands each rank only its
//! routed copies, so it bounds the CuteDSL experts from above.
//!
//! **Lookup.** `wideep.csv` (written by `scripts/wideep-table`: kind, aiconfigurator's `device`, hidden, expert
//! inter size, top-k, experts, ep, tokens per rank, µs per call) is read once. A curve is one kind, GPU, shape and
//! ep; its time at `tokens` is the log-log interpolation between the two measured token counts around it, the
//! smallest count's time below it (the latency floor) and nothing above the largest. The expert GEMMs were measured
//! at ep 2, 4, 16, 32, 64, 128 and 256 (no 8): an ep between two measured ones is the log-log interpolation of the
//! two curves at the same tokens per rank (the weights one GPU reads scale as 1/ep). DeepEP was measured on one node
//! of 8 GPUs (`node_num` 1; aiconfigurator's adapter: ep = 8 · node_num): its per-rank kernels send this rank's
//! T·K routed copies and receive as many, so within one NVLink domain the 8-rank curve answers every ep; across
//! nodes (RDMA) nothing does. GPUs: the system's own, then a measured GPU of the same compute-capability major
//! version, the same minor version first, then the nearest in DRAM bandwidth (GB300 → B300), as
//! [`crate::comm::engine_allreduce`] chooses ([`crate::comm::measured_curve::stand_ins`]; the table is read and
//! interpolated by [`crate::comm::measured_curve`] as well).

use std::sync::OnceLock;

use serde::Deserialize;

use crate::comm::measured_curve::{interpolate, read_curves, stand_ins, CurvePoint, CurveRow, MeasuredCurve};
use crate::cost::{Source, Timed};
use crate::hw::{Precision, System};

/// The tables, as `scripts/wideep-table` writes them.
const TABLE_CSV: &str = include_str!("wideep.csv");

/// Which measured kernel of the wide-EP path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WideEpKind {
    /// DeepGEMM's masked grouped GEMMs of the low-latency layout (`wideep_generation_moe_perf`).
    DeepGemmDecode,
    /// DeepGEMM's contiguous grouped GEMMs of the normal layout (`wideep_context_moe_perf`).
    DeepGemmPrefill,
    /// DeepEP's low-latency dispatch + combine (`wideep_deepep_ll_perf`).
    DeepEpLowLatency,
    /// DeepEP's normal (high-throughput) dispatch + combine at 20 SMs (`wideep_deepep_normal_perf`).
    DeepEpNormal,
    /// SGLang's fused NVFP4 experts (`moe_perf`, `kernel_source` sglang_flashinfer_trtllm_moe, `moe_dtype` nvfp4,
    /// balanced routing): the experts of `--quantization modelopt_fp4` (module doc).
    FlashInferNvfp4,
}

impl WideEpKind {
    /// The name in `wideep.csv` and in the answer's source.
    pub fn as_str(self) -> &'static str {
        match self {
            WideEpKind::DeepGemmDecode => "deepgemm_decode",
            WideEpKind::DeepGemmPrefill => "deepgemm_prefill",
            WideEpKind::DeepEpLowLatency => "deepep_ll",
            WideEpKind::DeepEpNormal => "deepep_normal",
            WideEpKind::FlashInferNvfp4 => "flashinfer_nvfp4",
        }
    }

    fn parse(s: &str) -> Option<WideEpKind> {
        [Self::DeepGemmDecode, Self::DeepGemmPrefill, Self::DeepEpLowLatency, Self::DeepEpNormal, Self::FlashInferNvfp4]
            .into_iter()
            .find(|k| k.as_str() == s)
    }

    /// A DeepEP communication kernel pair (its curves hold for every ep of one NVLink domain).
    pub fn is_deepep(self) -> bool {
        matches!(self, WideEpKind::DeepEpLowLatency | WideEpKind::DeepEpNormal)
    }

    /// Kernels one call launches: DeepGEMM's gate/up GEMM, the SiLU-and-multiply with fp8 re-quantization, the down
    /// GEMM (SGLang's `DeepEPMoE` DeepGEMM runner); DeepEP's dispatch and combine; the fused NVFP4 MoE's activation
    /// fp4 quantization, routing, gate/up GEMM, down GEMM and finalize (SGLang's `flashinfer_trtllm` runner:
    /// `quantize_hidden_states_fp4`, then FlashInfer's `trtllm_fp4_block_scale_moe`).
    pub fn kernels(self) -> u32 {
        match self {
            WideEpKind::DeepEpLowLatency | WideEpKind::DeepEpNormal => 2,
            WideEpKind::DeepGemmDecode | WideEpKind::DeepGemmPrefill => 3,
            WideEpKind::FlashInferNvfp4 => 5,
        }
    }
}

/// One wide-EP operator of one MoE layer on one GPU. `tokens`: the tokens one rank dispatches (the expert GEMMs:
/// tokens' worth of routed copies the rank's experts receive, T·K copies); `inter`: the expert's MLP width (0 for
/// DeepEP); `experts`: routed experts of the whole model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WideEpOp {
    /// Which measured kernel times it.
    pub kind: WideEpKind,
    /// The model's hidden size, elements.
    pub hidden: u32,
    /// The expert's MLP width (moe_intermediate_size), elements; 0 for DeepEP.
    pub inter: u32,
    /// Routed experts per token.
    pub top_k: u32,
    /// Routed experts of the whole model.
    pub experts: u32,
    /// Expert-parallel ranks (SGLang's `--ep-size`).
    pub ep: u32,
    /// Tokens one rank dispatches in the step.
    pub tokens: u64,
}

impl WideEpOp {
    /// The precision the operator computes in: DeepGEMM's block-scaled fp8 (`fp8_block`, the tables' `moe_dtype`),
    /// the fused NVFP4 experts' `nvfp4`; None for DeepEP's communication.
    pub fn precision(&self) -> Option<Precision> {
        match self.kind {
            WideEpKind::DeepEpLowLatency | WideEpKind::DeepEpNormal => None,
            WideEpKind::DeepGemmDecode | WideEpKind::DeepGemmPrefill => Some(Precision::Fp8Block),
            WideEpKind::FlashInferNvfp4 => Some(Precision::Nvfp4),
        }
    }
}

/// One row of `wideep.csv`: `kind,device,hidden,inter,topk,experts,ep,tokens,latency_us`.
#[derive(Debug, Deserialize)]
struct Row {
    /// [`WideEpKind::as_str`].
    kind: String,
    /// aiconfigurator's `device`.
    device: String,
    /// The model's hidden size.
    hidden: u32,
    /// The expert's MLP width (0 for DeepEP).
    inter: u32,
    /// Experts each token is routed to.
    topk: u32,
    /// Routed experts of the whole model.
    experts: u32,
    /// Expert-parallel size (`moe_ep_size`; DeepEP: 8 ranks of one node).
    ep: u32,
    /// Tokens per rank.
    tokens: f64,
    /// Time of one call, µs.
    latency_us: f64,
}

/// What tells the table's curves of one GPU apart: the kind and the shape `[hidden, inter, top_k, experts, ep]`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Key {
    kind: WideEpKind,
    shape: [u32; 5],
}

impl CurveRow for Row {
    type Key = Key;
    fn point(self) -> Option<CurvePoint<Key>> {
        let kind = WideEpKind::parse(&self.kind)?;
        let key = Key { kind, shape: [self.hidden, self.inter, self.topk, self.experts, self.ep] };
        Some(CurvePoint { key, device: self.device, x: self.tokens, y: self.latency_us })
    }
}

/// One measured curve: a kind's time by tokens per rank for one GPU, shape and ep, (tokens per rank, µs).
type Curve = MeasuredCurve<Key>;

fn curves() -> &'static [Curve] {
    static CURVES: OnceLock<Vec<Curve>> = OnceLock::new();
    CURVES.get_or_init(|| read_curves::<Row>(TABLE_CSV))
}

/// The time of `op` from the curves of GPU `gpu` (module doc: ep interpolation for the expert GEMMs, the 8-rank
/// curve for DeepEP).
fn on_gpu(curves: &[Curve], op: &WideEpOp, gpu: &str) -> Option<f64> {
    let same = |c: &&Curve| {
        c.key.kind == op.kind && c.gpu == gpu && c.key.shape[..4] == [op.hidden, op.inter, op.top_k, op.experts]
    };
    let tokens = op.tokens.max(1) as f64;
    if op.kind.is_deepep() {
        let c = curves.iter().filter(same).min_by_key(|c| c.key.shape[4].abs_diff(8))?;
        return interpolate(&c.points, tokens);
    }
    // (ep, µs at these tokens) of every measured ep.
    let mut by_ep: Vec<(f64, f64)> = curves
        .iter()
        .filter(same)
        .filter_map(|c| Some((c.key.shape[4] as f64, interpolate(&c.points, tokens)?)))
        .collect();
    by_ep.sort_by(|a, b| a.0.total_cmp(&b.0));
    let ep = op.ep as f64;
    if by_ep.first()?.0 > ep {
        return None;
    }
    interpolate(&by_ep, ep)
}

/// A measured answer: µs per call and the GPU whose table answered.
#[derive(Debug, Clone, PartialEq)]
pub struct WideEpTime {
    /// Time of one call, µs.
    pub time_us: f64,
    /// The GPU the measurement ran on (the system's own, or a stand-in).
    pub gpu: String,
}

/// The time of `op` on `system`'s GPU from SGLang's measured tables (module doc for the lookup); None where no
/// table answers (another model's shape, an ep outside the measured range, tokens above the table, a GPU of a
/// generation never measured).
pub fn lookup_time(op: &WideEpOp, system: &System) -> Option<WideEpTime> {
    lookup_in(curves(), op, system)
}

fn lookup_in(curves: &[Curve], op: &WideEpOp, system: &System) -> Option<WideEpTime> {
    let gpu = &system.gpu;
    if let Some(t) = on_gpu(curves, op, &gpu.name) {
        return Some(WideEpTime { time_us: t, gpu: gpu.name.clone() });
    }
    stand_ins(curves, gpu)
        .into_iter()
        .find_map(|name| Some(WideEpTime { time_us: on_gpu(curves, op, name)?, gpu: name.to_string() }))
}

/// `op` timed as a cost answer: the measured time (also its analytic baseline: no model stands behind it), the
/// source `measured:sglang_wideep/<kind>/<GPU>`, [`WideEpKind::kernels`] kernels. None as [`lookup_time`].
pub fn timed(op: &WideEpOp, system: &System) -> Option<Timed> {
    let m = lookup_time(op, system)?;
    let table = format!("sglang_wideep/{}/{}", op.kind.as_str(), m.gpu);
    Some(Timed::new(m.time_us, m.time_us, Source::Measured { table, instead_of: None }).with_kernels(op.kind.kernels()))
}

/// Tokens per rank SGLang's low-latency DeepEP buffers hold: `num_max_dispatch_tokens_per_rank`, 128 by default
/// (`SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK`; aiconfigurator's collector uses the same 128 and skips decode
/// batches above it).
pub const LL_MAX_TOKENS_PER_RANK: u64 = 128;

/// The wide-EP operators of one MoE layer: DeepGEMM's grouped experts, and DeepEP's dispatch + combine (None when
/// the expert-parallel group spans nodes: the tables hold one NVLink domain; the caller keeps its all-to-all model).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WideEpPlan {
    pub experts: WideEpOp,
    pub dispatch_combine: Option<WideEpOp>,
}

/// What one MoE layer of `cfg` on `system` runs when SGLang serves it with data-parallel attention and ep > 1 over
/// fp8 (block-scaled) or NVFP4 experts: `tokens` is this rank's tokens in the step, `extend_in_batch` whether the
/// step holds a prefill (DeepEP's normal kernels; decode alone runs the low-latency ones, up to
/// [`LL_MAX_TOKENS_PER_RANK`] tokens per rank). The experts' `tokens` is ⌈tokens · dp / ep⌉ (the tokens' worth of
/// routed copies one rank's experts receive, as the `moe` operator counts them; both expert tables' num_tokens / ep,
/// module doc); DeepEP's is this rank's tokens. fp8 experts are DeepGEMM's (decode or prefill layout); NVFP4
/// experts are [`WideEpKind::FlashInferNvfp4`] in both DeepEP modes (one measured curve), with DeepEP's dispatch
/// and combine as measured (module doc: NVFP4 experts). None for every other engine, precision or parallelism (expert
/// tensor parallelism included: the tables hold moe_tp 1), and where no table answers: the caller keeps the
/// fused-MoE path.
pub fn plan(cfg: &super::ServingConfig, system: &System, tokens: u64, extend_in_batch: bool) -> Option<WideEpPlan> {
    let moe = cfg.model.moe.as_ref()?;
    let wide = cfg.engine == super::request::Engine::Sglang && cfg.dp() > 1 && cfg.ep > 1 && cfg.tp == cfg.ep;
    let fp8 = cfg.expert_precision() == Precision::Fp8Block;
    let nvfp4 = cfg.expert_precision() == Precision::Nvfp4;
    if !wide || !(fp8 || nvfp4) || tokens == 0 {
        return None;
    }
    let one_domain = super::step::tp_group(cfg, system).0.nodes <= 1;
    let low_latency = !extend_in_batch && tokens <= LL_MAX_TOKENS_PER_RANK;
    let modes: &[(WideEpKind, WideEpKind)] = match (nvfp4, low_latency) {
        (false, true) => &[
            (WideEpKind::DeepGemmDecode, WideEpKind::DeepEpLowLatency),
            (WideEpKind::DeepGemmPrefill, WideEpKind::DeepEpNormal),
        ],
        (false, false) => &[(WideEpKind::DeepGemmPrefill, WideEpKind::DeepEpNormal)],
        (true, true) => &[
            (WideEpKind::FlashInferNvfp4, WideEpKind::DeepEpLowLatency),
            (WideEpKind::FlashInferNvfp4, WideEpKind::DeepEpNormal),
        ],
        (true, false) => &[(WideEpKind::FlashInferNvfp4, WideEpKind::DeepEpNormal)],
    };
    let op = |kind, inter, tokens| WideEpOp {
        kind,
        hidden: cfg.model.hidden,
        inter,
        top_k: moe.top_k,
        experts: moe.experts,
        ep: cfg.ep,
        tokens,
    };
    let expert_tokens = (tokens * cfg.dp() as u64).div_ceil(cfg.ep as u64);
    modes.iter().find_map(|&(gemm, a2a)| {
        let experts = op(gemm, moe.expert_ffn_hidden, expert_tokens);
        lookup_time(&experts, system)?;
        let dispatch_combine = match one_domain {
            true => {
                let d = op(a2a, 0, tokens);
                lookup_time(&d, system)?;
                Some(d)
            }
            false => None,
        };
        Some(WideEpPlan { experts, dispatch_combine })
    })
}

#[cfg(test)]
#[path = "wideep_tests.rs"]
mod tests;

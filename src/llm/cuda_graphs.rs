//! CUDA graphs in training: what replaying captured kernels removes from the host.
//!
//! perfcast times a pass as the longer of its GPU time and its host time, the CPU dispatching
//! [`crate::cost::Efficiency::host_us`] per kernel ahead of the GPU ([`crate::llm::timing::pass_seconds`]); a pass of
//! short kernels (small models, small micro-batches, large tensor parallelism) runs at the host's pace. A CUDA graph
//! replays its captured kernels with one launch, so the host pays one dispatch per graph instead of one per kernel:
//! the effect shows only where the host was the bottleneck. What a graph does not change here: the GPU-side cost
//! per kernel ([`crate::cost::Efficiency::kernel_us`], fitted on eager runs, which also carries the kernels the
//! operator list folds away), the collectives, and the memory — Megatron's graphs keep static input and output
//! buffers per captured layer and micro-batch (`cuda_graphs.py` `CudaGraphManager`), which perfcast does not add to
//! the memory estimate.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::hw::Precision;
use crate::llm::operators::{OpName, StageOp, Work};
use crate::llm::timing::TimedOp;
use crate::op::{OpClass, Phase};

/// Which parts of an iteration run as CUDA graphs (`cuda_graphs` of a training request's `parallelism`).
///
/// Megatron-LM (`arguments.py`): `--cuda-graph-impl` `none` (the default), `local` (Megatron-Core's
/// `CudaGraphManager`) or `transformer_engine` (TE's `make_graphed_callables`), and `--cuda-graph-scope` — by
/// default each whole `TransformerLayer` (its attention and MLP), or `full_iteration` (with the local
/// implementation: the whole forward-backward of the step captured once). NeMo / Megatron-Bridge's performance
/// recipes turn graphs on per model and system (`cuda_graph_impl`, `cuda_graph_scope`); torchtitan, DeepSpeed and
/// Hugging Face's Trainer do not capture training steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum CudaGraphs {
    /// Every kernel dispatched by the host (Megatron's default).
    #[default]
    None,
    /// Each transformer layer's forward and its backward replayed as one graph: the layer's host time per pass
    /// is one graph launch ([`CudaGraphs::layer_host_us`]); the embedding, the head, the optimizer and the
    /// collectives outside the layers stay eager.
    PerLayer,
    /// The whole forward-backward of a step captured as one graph (`--cuda-graph-scope full_iteration`): no host
    /// time in the forward and backward passes; the optimizer step stays eager.
    FullIteration,
}

impl CudaGraphs {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CudaGraphs::None => "none",
            CudaGraphs::PerLayer => "per_layer",
            CudaGraphs::FullIteration => "full_iteration",
        }
    }

    /// The host time of one pass of one transformer layer whose kernels take `eager_host_us` to dispatch, µs: the
    /// same without graphs; one dispatch (`host_us`, the host cost of one kernel: the graph's launch and the
    /// framework call around it) with per-layer graphs, or less if the layer launched fewer; 0 when the whole
    /// iteration is one graph.
    pub fn layer_host_us(self, eager_host_us: f64, host_us: f64) -> f64 {
        match self {
            CudaGraphs::None => eager_host_us,
            CudaGraphs::PerLayer => eager_host_us.min(host_us),
            CudaGraphs::FullIteration => 0.0,
        }
    }

    /// The host time of one pass of the operators outside the layers (embedding, head) whose kernels take
    /// `eager_host_us`: unchanged unless the whole iteration is one graph.
    pub fn outside_host_us(self, eager_host_us: f64) -> f64 {
        match self {
            CudaGraphs::FullIteration => 0.0,
            _ => eager_host_us,
        }
    }
}

/// One name of Megatron-LM's `--cuda-graph-scope` (Megatron-Core `megatron/core/transformer/enums.py`
/// `CudaGraphScope`): `full_iteration` (the whole training iteration), `attn` (the attention block), `mlp` (a dense
/// layer's MLP), `moe` (a drop-and-pad MoE layer), `moe_router` (the MoE router), `moe_preprocess` (the token
/// dispatcher's preprocessing; Megatron-Core requires `moe_router` with it), `mamba` (Mamba layers),
/// `full_iteration_inference`. A name outside this list is refused when the request is read (422 naming
/// `parallelism.cuda_graph_scope`); perfcast models the Transformer Engine scopes `attn`, `moe_router` and
/// `moe_preprocess` ([`GraphScopes`]) and refuses the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CudaGraphScope {
    FullIteration,
    Attn,
    Mlp,
    Moe,
    MoeRouter,
    MoePreprocess,
    Mamba,
    FullIterationInference,
}

impl CudaGraphScope {
    /// Every scope, in Megatron-Core's enum order.
    pub const ALL: [CudaGraphScope; 8] = [
        CudaGraphScope::FullIteration,
        CudaGraphScope::Attn,
        CudaGraphScope::Mlp,
        CudaGraphScope::Moe,
        CudaGraphScope::MoeRouter,
        CudaGraphScope::MoePreprocess,
        CudaGraphScope::Mamba,
        CudaGraphScope::FullIterationInference,
    ];

    /// The wire name (Megatron's).
    pub fn as_str(self) -> &'static str {
        match self {
            CudaGraphScope::FullIteration => "full_iteration",
            CudaGraphScope::Attn => "attn",
            CudaGraphScope::Mlp => "mlp",
            CudaGraphScope::Moe => "moe",
            CudaGraphScope::MoeRouter => "moe_router",
            CudaGraphScope::MoePreprocess => "moe_preprocess",
            CudaGraphScope::Mamba => "mamba",
            CudaGraphScope::FullIterationInference => "full_iteration_inference",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// The set of [`CudaGraphScope`]s a request captures with Transformer Engine's per-module graphs
/// (`parallelism.cuda_graph_scope`, a JSON list of names; Megatron-LM `--cuda-graph-impl transformer_engine
/// --cuda-graph-scope …`, which captures each layer's scoped modules with TE's `make_graphed_callables`,
/// Megatron-Core `megatron/core/transformer/cuda_graphs.py` `TECudaGraphHelper`). Megatron-Bridge's Qwen3 MoE
/// presets set `attn`, `moe_router`, `moe_preprocess` (`scripts/performance/configs/qwen/
/// qwen3_workload_base_configs.py` @ 01b2977e).
///
/// What a captured scope does to the host ([`GraphScopes::captured`]): the counted framework calls of the
/// operators inside it are replaced by one graph launch per pass and contiguous captured block. With `attn` and
/// `moe_router` the layer's forward from its input norm through the router (and, with `moe_preprocess`, the
/// dispatcher's preprocessing) is one graph: Megatron-Core's `MoELayer` raises `MoECudaGraphPartialCaptureSignal`
/// after the captured part (`megatron/core/transformer/moe/moe_utils.py`) and runs the rest eager. What stays
/// charged to the host, and why:
/// - the token dispatch and combine with their device→host synchronizations: a dropless dispatcher needs the
///   received token counts on the host to size its buffers and the grouped GEMM's splits
///   (`token_dispatcher.py` `cuda_sync_point`, HybridEP's `num_dispatched_tokens_tensor.cpu()`;
///   [`crate::llm::moe::launches`]), so it cannot be replayed from a static graph — Megatron-Core's `moe` scope is
///   for drop-and-pad layers only (enums.py);
/// - the experts (`TEGroupedMLP`): their grouped GEMM splits the rows by the host-side token counts and issues one
///   cuBLAS GEMM per local expert ([`crate::llm::moe::launches::MULTI_STREAM_GEMM_HOST_US`]);
/// - recomputed forward operators (re-run outside the captured forward), the embedding, the head and the
///   optimizer step (outside the layers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(from = "Vec<CudaGraphScope>", into = "Vec<CudaGraphScope>")]
pub struct GraphScopes(u8);

impl From<Vec<CudaGraphScope>> for GraphScopes {
    fn from(v: Vec<CudaGraphScope>) -> GraphScopes {
        GraphScopes(v.iter().fold(0, |bits, s| bits | s.bit()))
    }
}

impl From<GraphScopes> for Vec<CudaGraphScope> {
    fn from(s: GraphScopes) -> Vec<CudaGraphScope> {
        s.iter().collect()
    }
}

/// Host time a [`GraphScopes`] takes off one layer's passes, µs ([`GraphScopes::captured`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Captured {
    /// Forward: the captured calls' host time less the graph launches.
    pub fwd_us: f64,
    /// The part of `fwd_us` from the operators listed before the layer's first expert-parallel collective
    /// (the attention and the router, with their graph launches; the captured linears' fp8 scale operators are
    /// listed after the layer's operators and are not in it).
    pub fwd_listed_before_us: f64,
    /// Backward: the captured calls' host time less the graph launches.
    pub bwd_us: f64,
}

impl GraphScopes {
    /// No scope (eager layers).
    pub const NONE: GraphScopes = GraphScopes(0);

    /// Whether `scope` is captured.
    pub fn contains(self, scope: CudaGraphScope) -> bool {
        self.0 & scope.bit() != 0
    }

    /// Whether no scope is captured.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The captured scopes, in Megatron-Core's order.
    pub fn iter(self) -> impl Iterator<Item = CudaGraphScope> {
        CudaGraphScope::ALL.into_iter().filter(move |s| self.contains(*s))
    }

    /// The host time the captured scopes take off one pass of a layer's `ops` (timed as `timed`, in order), µs,
    /// with `launch_us` the host time of one call (a graph's launch costs one) and `extra` the MoE layer's calls
    /// beyond its operators that the scopes hold, [forward, backward]: the router's (`moe_router`) and the
    /// dispatcher's preprocessing (`moe_preprocess`) from [`crate::llm::moe::launches::moe_launches`].
    ///
    /// Captured operators (non-recomputed, either pass): under `attn` the attention block — the first norm of the
    /// pass (`input_layernorm`), the QKV / MLA projections, QK norm, RoPE, the attention kernels, the output
    /// projection and its residual — under `moe_router` the second norm (`pre_mlp_layernorm`), the router GEMM and
    /// its top-k; each captured fp8 linear's scale operator (one [`OpName::Fp8Amax`] of its pass per call). Not
    /// captured: collectives (tensor-, context- and expert-parallel), the dispatch and everything after it. Graph
    /// launches per pass: one for a contiguous `attn` + `moe_router` block, else one per scope present.
    pub fn captured(self, ops: &[StageOp], timed: &[TimedOp], launch_us: f64, extra: [u32; 2]) -> Captured {
        let attn = self.contains(CudaGraphScope::Attn);
        let router = self.contains(CudaGraphScope::MoeRouter) && ops.iter().any(|o| o.name == OpName::MoeRouter);
        if !attn && !router {
            return Captured::default();
        }
        let mut out = Captured::default();
        let mut norms = [0u32; 2];
        for (o, t) in ops.iter().zip(timed) {
            if o.recompute {
                continue;
            }
            let pass = usize::from(o.phase == Phase::Bwd);
            let in_attn = match o.name {
                OpName::LayerNorm | OpName::RMSNorm => {
                    norms[pass] += 1;
                    norms[pass] == 1
                }
                n => ATTENTION_OPS.contains(&n),
            };
            let in_router = match o.name {
                OpName::LayerNorm | OpName::RMSNorm => norms[pass] == 2,
                n => matches!(n, OpName::MoeRouter | OpName::MoeTopK),
            };
            if !((attn && in_attn) || (router && in_router)) {
                continue;
            }
            let mut host = o.calls as f64 * t.time.host_us;
            // The fp8 scale operator of a captured linear (`recipe::scaling_ops`: one per fp8 linear and call).
            if let Work::Compute { shape, dtype: Precision::Fp8 } = o.work {
                if shape.class == OpClass::Linear {
                    let scale = ops.iter().zip(timed).find(|(s, _)| s.name == OpName::Fp8Amax && s.phase == o.phase);
                    host += scale.map_or(0.0, |(_, st)| o.calls as f64 * st.time.host_us);
                }
            }
            if pass == 0 {
                out.fwd_us += host;
            } else {
                out.bwd_us += host;
            }
            if pass == 0 {
                out.fwd_listed_before_us += o.calls as f64 * t.time.host_us;
            }
        }
        // Graph launches of a pass that captured anything.
        let graphs = if attn && router { 1.0 } else { f64::from(u8::from(attn) + u8::from(router)) };
        let extra = if router { extra } else { [0, 0] };
        if out.fwd_us > 0.0 {
            out.fwd_us += extra[0] as f64 * launch_us - graphs * launch_us;
            out.fwd_listed_before_us += extra[0] as f64 * launch_us - graphs * launch_us;
        }
        if out.bwd_us > 0.0 {
            out.bwd_us += extra[1] as f64 * launch_us - graphs * launch_us;
        }
        out
    }
}

/// The attention block's operators besides its norms (multi-head, grouped-query and MLA attention,
/// [`crate::llm::operators::layer_passes`], [`crate::llm::moe::mla`]): what an `attn` graph captures.
const ATTENTION_OPS: [OpName; 17] = [
    OpName::Linear1,
    OpName::QkNorm,
    OpName::RoPE,
    OpName::QkT,
    OpName::Fillmask,
    OpName::Softmax,
    OpName::FusedSoftmax,
    OpName::AttnV,
    OpName::FlashAttention,
    OpName::AttentionDropout,
    OpName::Linear2,
    OpName::BiasDropoutAdd,
    OpName::MlaQDown,
    OpName::MlaQUp,
    OpName::MlaKvDown,
    OpName::MlaKvUp,
    OpName::MlaNorm,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphs_replace_per_kernel_dispatch_by_one_launch() {
        // A layer of 30 kernels at 67.9 µs of host time each: 2,037 µs eager; one launch per layer graph; none in
        // a captured iteration. The embedding is captured only with the whole iteration.
        let eager = 30.0 * 67.9;
        assert_eq!(CudaGraphs::None.layer_host_us(eager, 67.9), eager);
        assert_eq!(CudaGraphs::PerLayer.layer_host_us(eager, 67.9), 67.9);
        assert_eq!(CudaGraphs::FullIteration.layer_host_us(eager, 67.9), 0.0);
        assert_eq!(CudaGraphs::PerLayer.outside_host_us(135.8), 135.8);
        assert_eq!(CudaGraphs::FullIteration.outside_host_us(135.8), 0.0);
        let parsed: CudaGraphs = serde_json::from_value(serde_json::json!("per_layer")).unwrap();
        assert_eq!((parsed, parsed.as_str()), (CudaGraphs::PerLayer, "per_layer"));
    }

    /// One operator of `name` in `phase` (`calls` per layer), a GEMM of fp8 `linear` or a bf16 element-wise
    /// op, timed at 50 µs with 70 µs of host time per call.
    fn timed_op(name: OpName, phase: Phase, calls: u32, linear: bool) -> (StageOp, TimedOp) {
        use crate::cost::{Source, Timed};
        let (class, dtype) = if linear { (OpClass::Linear, Precision::Fp8) } else { (OpClass::RmsNorm, Precision::Bf16) };
        let work = Work::Compute { shape: crate::op::OpShape::new(class, phase, &[1, 64, 64, 64]), dtype };
        let o = crate::llm::operators::op(name, phase, calls, work, vec![]);
        let t = Timed { time_us: 50.0, analytic_us: 50.0, source: Source::Analytic, host_us: 70.0, kernels: 1 };
        (o, TimedOp { time: t, charged_us: 50.0 })
    }

    /// A forward MoE layer: input norm, QKV (fp8), attention, projection (fp8), pre-MLP norm, router, top-k, the
    /// all-to-all, an expert GEMM (fp8), and the three fp8 linears' scale operators listed last.
    fn moe_forward() -> (Vec<StageOp>, Vec<TimedOp>) {
        let f = Phase::Fwd;
        let list = [
            timed_op(OpName::RMSNorm, f, 1, false),
            timed_op(OpName::Linear1, f, 1, true),
            timed_op(OpName::FlashAttention, f, 1, false),
            timed_op(OpName::Linear2, f, 1, true),
            timed_op(OpName::RMSNorm, f, 1, false),
            timed_op(OpName::MoeRouter, f, 1, false),
            timed_op(OpName::MoeTopK, f, 1, false),
            timed_op(OpName::EpAllToAll, f, 2, false),
            timed_op(OpName::ExpertFc1, f, 1, true),
            timed_op(OpName::Fp8Amax, f, 1, false),
            timed_op(OpName::Fp8Amax, f, 1, false),
            timed_op(OpName::Fp8Amax, f, 1, false),
        ];
        list.into_iter().unzip()
    }

    #[test]
    fn scoped_graphs_take_the_captured_calls_off_the_host_by_hand() {
        let (ops, timed) = moe_forward();
        let scopes = |v: &[CudaGraphScope]| GraphScopes::from(v.to_vec());
        // attn + moe_router + moe_preprocess, with 9 router and 1 preprocessing calls beyond the operators
        // (HybridEP's; `MoeLaunches::captured`): captured are the input norm, QKV, attention, projection, pre-MLP
        // norm, router and top-k (7 × 70 = 490 µs), QKV's and the projection's scale operators (2 × 70 = 140 µs)
        // and the 10 extra calls (700 µs); one graph launch (70 µs) replaces them: 490 + 140 + 700 − 70 = 1,260 µs.
        // Listed before the all-to-all: 490 + 700 − 70 = 1,120 µs. The all-to-all (2 calls), the expert GEMM and its
        // scale operator stay: 4 × 70 = 280 µs of the layer's 11 × 70 + 10 × 70 = 1,540 µs.
        let all = scopes(&[CudaGraphScope::Attn, CudaGraphScope::MoeRouter, CudaGraphScope::MoePreprocess]);
        let c = all.captured(&ops, &timed, 70.0, [10, 0]);
        assert!((c.fwd_us - 1260.0).abs() < 1e-9 && (c.fwd_listed_before_us - 1120.0).abs() < 1e-9, "{c:?}");
        // No backward operator in the list: nothing captured, no backward graph launched.
        assert_eq!(c.bwd_us, 0.0);
        // moe_router + moe_preprocess alone: the pre-MLP norm, router and top-k (210 µs) and the 10 calls (700 µs)
        // less one launch: 840 µs; the attention block stays eager.
        let moe = scopes(&[CudaGraphScope::MoeRouter, CudaGraphScope::MoePreprocess]);
        assert!((moe.captured(&ops, &timed, 70.0, [10, 0]).fwd_us - 840.0).abs() < 1e-9);
        // attn alone: input norm, QKV, attention, projection (280 µs) and two scale operators (140 µs), one launch
        // (70 µs): 350 µs; the router's calls are not captured.
        let attn = scopes(&[CudaGraphScope::Attn]);
        assert!((attn.captured(&ops, &timed, 70.0, [10, 0]).fwd_us - 350.0).abs() < 1e-9);
        // A dense layer (no router) under moe_router: nothing captured.
        let dense: Vec<usize> = (0..5).collect();
        let (d_ops, d_timed): (Vec<StageOp>, Vec<TimedOp>) =
            dense.iter().map(|&i| (ops[i].clone(), timed[i].clone())).unzip();
        assert_eq!(moe.captured(&d_ops, &d_timed, 70.0, [0, 0]), Captured::default());
        // The wire form is Megatron's list of names, in Megatron-Core's order.
        let parsed: GraphScopes = serde_json::from_value(serde_json::json!(["moe_preprocess", "attn", "moe_router"])).unwrap();
        assert_eq!(parsed, all);
        assert_eq!(serde_json::to_value(parsed).unwrap(), serde_json::json!(["attn", "moe_router", "moe_preprocess"]));
        assert!(serde_json::from_value::<GraphScopes>(serde_json::json!(["router"])).is_err());
    }
}


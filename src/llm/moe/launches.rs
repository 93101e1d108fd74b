//! The host side of an MoE layer: the framework calls Megatron-Core's `MoELayer` issues beyond the operators
//! [`super::ops`] times, and its device→host synchronization, per micro-batch.
//!
//! perfcast prices host time per counted kernel ([`crate::cost::Efficiency::host_us`], 70.7 µs: fitted on dense
//! layers, where it is the cost of one framework call — Python, PyTorch's dispatcher, autograd and Transformer
//! Engine's module logic — more than of the CUDA launch itself) and runs a pass at the pace of the longer of its
//! GPU and host time ([`crate::llm::timing::pass_seconds`]). The operator list times one operator per piece of GPU
//! work; the MoE layer's Python issues many more calls, most of them tiny. Counted here are those calls — each
//! PyTorch operator, Triton kernel launched from Python, host copy, or C++ entry point (which may loop over kernels
//! inside: Transformer Engine's `general_grouped_gemm` issues one cuBLAS GEMM per local expert on 4 compute streams,
//! `cublaslt_gemm.cu` `nvte_multi_stream_cublas_gemm`, from one call) — that the operator list does not count,
//! from Megatron-LM's `megatron/core/transformer/moe/` with the fusions Megatron-Bridge's performance recipes turn
//! on (`moe_router_fusion`, `moe_permute_fusion`: `qwen3_llm_pretrain.py` `set_qwen3_specific_overrides`,
//! `deepseek_llm_pretrain.py`) and the load-balancing loss every catalog MoE model trains with:
//!
//! - **router** (`router.py` `TopKRouter`): `moe_router_force_load_balancing` replaces the logits by random ones
//!   (`moe_utils.py` `apply_random_logits`, `RandomSTE`: clone, normal_) — 2 forward; the load-balancing loss
//!   (`aux_loss_load_balancing` with TE's fused `fused_compute_score_for_moe_aux_loss` and `fused_moe_aux_loss`, the
//!   tokens-per-expert sum, `save_to_aux_losses_tracker`'s division and indexed add) — 5 forward, plus its
//!   all-reduce over the tensor×context-parallel group when that has more than one rank. Backward: the fused
//!   loss's and scores' gradients, `MoEAuxLossAutoScaler`'s scaled ones and their sum into the logits' gradient —
//!   5; `RouterGatingLinearFunction.backward`'s four casts (weight and input to the router dtype, the two gradients
//!   back) — 4;
//! - **token dispatcher** (`token_dispatcher.py`), per `moe_token_dispatcher`:
//!   - `alltoall` (`MoEAlltoAllTokenDispatcher.preprocess`): the routing map's column sum and its `.long()`, the
//!     input splits' sum, the all-gather of the counts over the tensor×expert group, the local slice's
//!     `.contiguous()` and three sums (per rank, per TP rank, per local expert) — 8; the non-blocking copies of the
//!     splits and counts to the host (`maybe_move_tensor_to_cpu`) — 4; the fused permute's row-id map (TE
//!     `moe_permute_with_probs`, Triton: 3 launches besides the counted permute); the probabilities' all-to-all
//!     beside the tokens' — 1; with several local experts the fused `sort_chunks_by_idxs`' row-id map before and
//!     after the experts — 2 + 2. Backward: the probabilities' all-to-all — 1. Synchronization: the host needs the
//!     split sizes as Python ints before the all-to-all (`cuda_sync_point` `before_ep_alltoall`; `before_finish`
//!     without expert parallelism);
//!   - `allgather` (`MoEAllGatherTokenDispatcher`): the routing map's and probabilities' all-gathers beside the
//!     hidden states' — 2; the local slices' `.contiguous()` — 2; the tokens-per-expert sum, `.long()` and `.cpu()`
//!     — 3; the permute's row-id map — 3; the local probabilities' transposes and `masked_select` — 4; the combine's
//!     two casts around the reduce-scatter — 2. Backward: the probabilities' gather's reduce-scatter, the
//!     `masked_select`'s scatter, the transpose and the two casts — 5. Synchronization: `.cpu()` of the tokens per
//!     expert;
//!   - `deepep` (`MoEFlexTokenDispatcher`, `_DeepepManager`): the metadata's two `.contiguous()` expansions and the
//!     top-k to indices — 3; `get_dispatch_layout` beside the counted dispatch — 1; the indices-to-multihot and the
//!     permute's row-id map — 4. Backward: the top-k's scatter into zeros — 2. Synchronization: DeepEP's CPU waits
//!     for the received tokens per expert (`num_out_tokens=sum(tokens_per_expert)`, a host list);
//!   - `hybridep` (`_HybridEPManager`, permuting inside `hybrid_ep_dispatch`): the probabilities' `.contiguous()`
//!     expansion, the permuted tokens' sum and the tokens per expert's copy to the host for the grouped GEMM's
//!     splits — 3. Backward: the expansion's gradient — 1. Synchronizations: two with dynamic routing. Megatron-LM's
//!     `fused_a2a.py` `HybridEPDispatch` passes `num_permuted_tokens` only when the receive size is known ("If not
//!     provided, HybridEP obtains the size from a GPU tensor, which causes a D2H synchronization";
//!     `_HybridEPManager.dispatch` passes None for dropless routing), and DeepEP's `hybrid_ep_buffer.py`
//!     `dispatch_with_permute` with `executor.cu` `dispatch_postprocess` then waits twice: (A) on
//!     `num_dispatched_tokens_tensor.cpu()` after the routing map's all-gather and `metadata_preprocessing`
//!     ([`super::dispatch::routing_map_gather`]), and (B) on the blocking `tokens_per_expert` copy to pinned memory
//!     and its `.sum().item()` after the dispatch kernel — so the host cannot issue the permute or the expert GEMMs
//!     before the dispatch has finished. None when the receive size is known (`moe_pad_expert_input_to_capacity`);
//!   - with `moe_pad_expert_input_to_capacity` (drop-and-pad) the all-to-all dispatcher's `preprocess` sizes
//!     every buffer from the capacity and leaves `cuda_sync_point` at `no_sync`: no synchronization either;
//! - **experts** (`experts.py` `TEGroupedMLP`): the probabilities' cast into the weighted activation — 1 forward,
//!   its gradient's reduction — 1 backward; under fp8 or fp4 training the grouped input's padding to the
//!   quantization's alignment and its removal (`Fp8Padding`, `Fp8Unpadding`) — 2 forward, 2 backward, and the
//!   output gradient's `split_quantize` per projection — 2 backward (the forward's input quantization is counted
//!   with the GEMM). `SequentialMLP` (`moe_grouped_gemm` off) already times a GEMM per expert; its outputs'
//!   `torch.cat` — 1 forward;
//! - shared experts: TE modules like the dense MLP's, timed operator by operator — none beyond.
//!
//! A device→host synchronization makes the host wait until the GPU has run everything queued before it; the
//! queue is then empty, and the GPU idles until the host launches again. Between two synchronizations (one layer)
//! the host issues the rest of this layer after the synchronization (the dispatch, the experts, the combine: host
//! time h_post) and then the next layer's part before it (attention, router, dispatcher bookkeeping: GPU time
//! g_pre), so the next layer's pre-synchronization GPU work cannot start before h_post has been issued: the layer
//! takes max(G + one launch, H, h_post + g_pre) rather than max(G, H) ([`synced_pass_us`]; G and H the pass's GPU
//! and host time). With several synchronizations the forward is a sum of intervals between them, each timed so
//! ([`SyncInterval`]), plus the GPU work queued after the host's last call before a synchronization (HybridEP's
//! routing-map all-gather before (A)): the host waits for it, so it is no longer hidden behind the host time.
//! Under CUDA graphs ([`crate::llm::cuda_graphs`]; the full-iteration recipes pre-size HybridEP's buffers with
//! `moe_expert_rank_capacity_factor`) no synchronization is modelled.

use super::parallel::{Dispatcher, MoeTraining};

/// Host time of each cuBLAS GEMM Transformer Engine's grouped GEMM issues beyond the first of one framework call,
/// µs. Megatron-Core's `TEGroupedMLP` calls `GroupedLinear` once per projection and pass (`general_grouped_gemm`),
/// which splits the routed rows by local expert (`m_splits`) and, in C++, issues one cuBLASLt GEMM per expert
/// round-robin on 4 compute streams (`cublaslt_gemm.cu` `multi_stream_cublas_gemm`, reached through
/// `nvte_multi_tensor_gemm` unless Hopper bf16 runs with `NVTE_USE_CUTLASS_GROUPED_GEMM`): each GEMM goes through
/// `nvte_cublas_gemm_v2` → `cublas_gemm` (matmul and matrix-layout descriptors, cuBLASLt's heuristic query, the
/// launch). Cited, not fitted: Transformer Engine PR #3134 (2026-06, `benchmarks/linear/benchmark_grouped_linear.py`,
/// SM100) times 8 experts × 128 tokens (N = K = 2,048) at 0.267 ms through the multi-stream cuBLASLt loop against
/// 0.069 ms for one grouped kernel of the same GEMMs, kernel against kernel — GEMMs far too small to bound the time,
/// so (0.267 − 0.069)/8 ≈ 25 µs per expert GEMM is the loop's issue cost. The framework call itself costs
/// [`crate::cost::Efficiency::host_us`] per counted kernel as every operator does (one local expert: exactly the
/// former single GEMM).
///
/// The GPU side stays one GEMM of all routed rows per projection ([`super::ops`]): every expert's GEMM of these
/// runs fills the GPU with several waves of tiles, and the 4 streams overlap the partial last waves.
pub const MULTI_STREAM_GEMM_HOST_US: f64 = 25.0;

/// Host time, µs, of one call of an expert GEMM operator (`ExpertFc1`, `ExpertFc2`) that Transformer Engine runs
/// as a grouped GEMM over `experts` local experts: `op_host_us` the backend's host time of the call
/// ([`crate::cost::Efficiency::host_us`] × its counted kernels, the fp8 input quantization included) plus
/// [`MULTI_STREAM_GEMM_HOST_US`] for each further expert's GEMMs — `gemms` per expert in the pass: 1 forward,
/// 2 backward (dgrad and wgrad, each a grouped call of its own): op_host_us + (experts − 1) · gemms · 25 µs.
pub fn grouped_gemm_host_us(op_host_us: f64, experts: u32, gemms: u32) -> f64 {
    op_host_us + experts.saturating_sub(1) as f64 * gemms as f64 * MULTI_STREAM_GEMM_HOST_US
}

/// Calls of one MoE layer per micro-batch beyond those its operators count, by module and pass
/// (`[forward, backward]`), and the forward's device→host synchronizations (see the module doc for the counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MoeLaunches {
    /// The router's calls (`router.py` `TopKRouter`, the load-balancing loss, forced balance), [forward, backward].
    pub router: [u32; 2],
    /// The token dispatcher's calls (`token_dispatcher.py`, per `moe_token_dispatcher`), [forward, backward].
    pub dispatcher: [u32; 2],
    /// The experts' calls beyond their GEMMs and activation (`experts.py`), [forward, backward].
    pub experts: [u32; 2],
    /// Device→host synchronizations in the forward (none in the backward: the splits are kept from the forward):
    /// 2 for HybridEP with dynamic routing, 0 with drop-and-pad under the all-to-all or HybridEP dispatcher, else 1.
    pub fwd_syncs: u32,
}

impl MoeLaunches {
    /// Extra calls of the forward pass.
    pub fn fwd(&self) -> u32 {
        self.router[0] + self.dispatcher[0] + self.experts[0]
    }

    /// Extra calls of the backward pass.
    pub fn bwd(&self) -> u32 {
        self.router[1] + self.dispatcher[1] + self.experts[1]
    }

    /// Extra forward calls issued before the synchronization (router and dispatcher bookkeeping).
    pub fn fwd_pre_sync(&self) -> u32 {
        self.router[0] + self.dispatcher[0]
    }
}

/// The calls of one MoE layer of `moe` (see the module doc). `tp_cp` is the tensor×context-parallel size (the
/// load-balancing loss's all-reduce group), `quantized` whether the expert GEMMs run in fp8 or fp4.
pub fn moe_launches(moe: &MoeTraining, tp_cp: u32, quantized: bool) -> MoeLaunches {
    let n = moe.local_experts().max(1);
    let force = if moe.force_load_balancing { 2 } else { 0 };
    let router = [force + 5 + u32::from(tp_cp > 1), 5 + 4];
    let several = u32::from(n > 1);
    let communicates = moe.ep * moe.etp > 1;
    let dispatcher = match moe.dispatcher {
        Dispatcher::Alltoall if communicates => [8 + 4 + 3 + 1 + 4 * several, 1],
        // Without expert or expert-tensor parallelism: the column sum, `.long()`, the counts' host copy, the
        // permute's row-id map and the chunk sorts.
        Dispatcher::Alltoall => [2 + 1 + 3 + 4 * several, 0],
        Dispatcher::Allgather => [2 + 2 + 3 + 3 + 4 + 2, 5],
        Dispatcher::Deepep => [3 + 1 + 4, 2],
        Dispatcher::Hybridep => [3, 1],
    };
    let q = u32::from(quantized);
    let experts = if moe.grouped_gemm { [1 + 2 * q, 1 + 4 * q] } else { [1, 0] };
    let fwd_syncs = match moe.dispatcher {
        Dispatcher::Alltoall | Dispatcher::Hybridep if moe.pad_to_capacity => 0,
        Dispatcher::Hybridep => 2,
        _ => 1,
    };
    MoeLaunches { router, dispatcher, experts, fwd_syncs }
}

/// One interval of a forward pass between two device→host synchronizations (or, with one, the whole layer), µs:
/// the GPU and host time issued in it, the GPU time of what runs before the first wait-free point
/// (`pre_gpu_us`: the next layer's work before its synchronization) behind the host time of what is issued
/// first (`post_host_us`: this layer's calls after the synchronization), and `tail_gpu_us`, the GPU work queued
/// by the interval's last host call that the host must wait for at the synchronization closing it (HybridEP's
/// routing-map all-gather; 0 where that is one launch's worth).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SyncInterval {
    /// GPU time of the kernels issued in the interval, µs.
    pub gpu_us: f64,
    /// Host time of the calls issued in the interval, µs.
    pub host_us: f64,
    /// GPU time of the next layer's work before its own synchronization, µs.
    pub pre_gpu_us: f64,
    /// Host time of this layer's calls after the synchronization that opens the interval, µs.
    pub post_host_us: f64,
    /// GPU time queued by the interval's last host call that the closing synchronization waits for, µs.
    pub tail_gpu_us: f64,
}

impl SyncInterval {
    /// The interval's time, µs, with `launch_us` of GPU idle after the synchronization that opens it:
    /// max(gpu + launch, host + tail, post_host + pre_gpu).
    pub fn us(&self, launch_us: f64) -> f64 {
        (self.gpu_us + launch_us).max(self.host_us + self.tail_gpu_us).max(self.post_host_us + self.pre_gpu_us)
    }
}

/// One pass of an MoE layer with `syncs` device→host synchronizations, µs (see the module doc): `gpu_us` and
/// `host_us` its GPU and host time, `pre_gpu_us` the GPU time of what the next layer runs before its
/// synchronization, `post_host_us` the host time of what this layer issues after it, `launch_us` one call's host
/// time (the GPU's idle after the wait). Without synchronization, max(gpu, host).
pub fn synced_pass_us(
    syncs: u32,
    gpu_us: f64,
    host_us: f64,
    pre_gpu_us: f64,
    post_host_us: f64,
    launch_us: f64,
) -> f64 {
    if syncs == 0 {
        return gpu_us.max(host_us);
    }
    (gpu_us + syncs as f64 * launch_us).max(host_us).max(post_host_us + pre_gpu_us)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::{AnalyticBackend, Derated, Efficiency};
    use crate::hw::{presets, System};
    use crate::llm::config::{TrainingConfig, TrainingRequest};
    use crate::llm::layout::Layout;
    use crate::llm::moe::ops::moe_layer_ops;
    use crate::llm::operators::OpPrecisions;
    use crate::llm::timing::{pass_sums, Timer};
    use crate::llm::validate;

    fn cfg(model: serde_json::Value, par: serde_json::Value, gpus: u64) -> TrainingConfig {
        let req: TrainingRequest = serde_json::from_value(serde_json::json!({"system": "dgx-b200", "model": model,
            "parallelism": par, "precision": "bf16"}))
        .unwrap();
        validate(&req.model, &req.parallelism, req.precision, gpus).unwrap()
    }

    /// A Mixtral-like toy: 8 experts, top-2, ep 4 (2 local experts), forced balance, grouped GEMM, bf16.
    fn toy(dispatcher: &str) -> MoeTraining {
        let model = serde_json::json!({"name": "toy", "layers": 2, "hidden": 1024, "heads": 8, "ffn_hidden": 4096,
            "vocab": 32000, "seq_len": 2048, "activation": "swiglu",
            "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 1024}});
        let par = serde_json::json!({"dp": 4, "ep": 4, "moe_token_dispatcher": dispatcher,
            "moe_grouped_gemm": true, "moe_router_force_load_balancing": true});
        cfg(model, par, 4).moe.unwrap()
    }

    #[test]
    fn alltoall_layer_launches_by_hand() {
        // 8 experts at ep 4: n = 2 local experts; tp·cp = 1 (no aux-loss all-reduce); bf16.
        // Router (router.py, moe_utils.py): RandomSTE clone + normal_ = 2; fused aux-loss scores, tokens-per-expert
        // sum, fused aux loss, tracker division and indexed add = 5 → forward 7. Backward: fused loss and scores
        // gradients, MoEAuxLossAutoScaler's ones_like and scale, their sum into the logits' gradient = 5, and
        // RouterGatingLinearFunction.backward's 4 casts → 9.
        // Dispatcher (token_dispatcher.py MoEAlltoAllTokenDispatcher.preprocess): sum, long, input splits' sum,
        // counts all-gather, slice contiguous, three sums = 8; host copies of the splits and counts = 4; fused
        // permute's row-id map = 3; the probabilities' all-to-all = 1; sort_chunks_by_idxs' row-id maps before and
        // after the experts (n > 1) = 4 → 20 forward; backward the probabilities' all-to-all = 1; one sync
        // (before_ep_alltoall).
        // Experts (TEGroupedMLP; GroupedLinear's per-expert GEMMs come from one general_grouped_gemm call, counted
        // with the operator): the probabilities' cast = 1 forward, its gradient's reduction = 1 backward.
        let l = moe_launches(&toy("alltoall"), 1, false);
        assert_eq!((l.router, l.dispatcher, l.experts, l.fwd_syncs), ([7, 9], [20, 1], [1, 1], 1));
        assert_eq!((l.fwd(), l.bwd(), l.fwd_pre_sync()), (28, 11, 27));
        // Under fp8 the grouped input is padded and unpadded (Fp8Padding, Fp8Unpadding: 2 forward, 2 backward) and
        // each projection's output gradient quantized (split_quantize: 2 backward).
        let q = moe_launches(&toy("alltoall"), 1, true);
        assert_eq!((q.experts, q.fwd(), q.bwd()), ([3, 5], 30, 15));
        // tp·cp = 2 adds the aux loss's all-reduce over the sequence partition.
        assert_eq!(moe_launches(&toy("alltoall"), 2, false).router, [8, 9]);
    }

    #[test]
    fn allgather_layer_launches_by_hand() {
        // Router and experts as for the all-to-all (7 / 9, 1 / 1). Dispatcher (MoEAllGatherTokenDispatcher): routing
        // map's and probabilities' all-gathers beside the counted hidden states' = 2; local map's and probs'
        // slices contiguous = 2; tokens_per_expert sum, long, .cpu() = 3; permute row-id map = 3; the local
        // probabilities' two transposes and masked_select (nonzero + index) = 4; the combine's two casts = 2 →
        // 16 forward; backward the probabilities' reduce-scatter, masked_select's scatter, the transpose and two
        // casts = 5; one sync (.cpu()).
        let l = moe_launches(&toy("allgather"), 1, false);
        assert_eq!((l.router, l.dispatcher, l.experts, l.fwd_syncs), ([7, 9], [16, 5], [1, 1], 1));
        assert_eq!((l.fwd(), l.bwd()), (24, 15));
    }

    #[test]
    fn hybridep_synchronizes_twice_and_drop_and_pad_never() {
        // HybridEP with dropless routing (fused_a2a.py passes no num_permuted_tokens): (A) the host reads
        // num_dispatched_tokens after the routing map's all-gather, (B) the tokens per expert after the dispatch.
        assert_eq!(moe_launches(&toy("hybridep"), 1, false).fwd_syncs, 2);
        // The all-to-all dispatcher's before_ep_alltoall and DeepEP's received-token counter: one each.
        assert_eq!(moe_launches(&toy("alltoall"), 1, false).fwd_syncs, 1);
        assert_eq!(moe_launches(&toy("deepep"), 1, false).fwd_syncs, 1);
        // Drop-and-pad: the capacity sizes every buffer, the host never waits (cuda_sync_point stays no_sync).
        for d in ["hybridep", "alltoall"] {
            let mut m = toy(d);
            (m.capacity_factor, m.pad_to_capacity) = (Some(1.0), true);
            assert_eq!(moe_launches(&m, 1, false).fwd_syncs, 0, "{d}");
        }
    }

    #[test]
    fn a_synchronization_serializes_the_next_layers_gpu_work_behind_this_layers_launches() {
        // GPU 1,000 µs, host 800 µs: without a sync max = 1,000. With one: the GPU idles one launch (67.9 µs) after
        // the wait → 1,067.9; if the next layer's pre-sync GPU work (700 µs) waits behind 500 µs of this layer's
        // post-sync launches → 1,200.
        assert_eq!(synced_pass_us(0, 1000.0, 800.0, 700.0, 500.0, 67.9), 1000.0);
        assert_eq!(synced_pass_us(1, 1000.0, 800.0, 300.0, 500.0, 67.9), 1067.9);
        assert_eq!(synced_pass_us(1, 1000.0, 800.0, 700.0, 500.0, 67.9), 1200.0);
        // Host-bound: the host never waits, the pass takes its host time.
        assert_eq!(synced_pass_us(1, 500.0, 2000.0, 300.0, 900.0, 67.9), 2000.0);
    }

    fn b200(scale: f64) -> System {
        let mut spec = presets().into_iter().find(|p| p.name == "dgx-b200").unwrap();
        spec.nodes = 1;
        let mut sys = spec.resolve().unwrap();
        let g = &mut sys.gpu;
        let p = &mut g.peak_tflops;
        (p.fp32, p.fp16) = (p.fp32 * scale, p.fp16 * scale);
        for x in [&mut p.tf32, &mut p.bf16, &mut p.fp8] {
            *x = x.map(|v| v * scale);
        }
        g.memory_bandwidth_gbs *= scale;
        sys
    }

    #[test]
    fn qwen3_30b_layer_at_micro_batch_1_is_host_bound_on_a_fast_gpu() {
        use crate::llm::operators::OpName;
        use crate::op::Phase;
        // Qwen3-30B-A3B (48 layers, 128 experts, top-8, expert width 768, hidden 2048) at micro-batch 1 of 4,096
        // tokens, ep 8 (16 local experts), HybridEP, grouped GEMM, forced balance — Megatron-Bridge's B200 row.
        let c = cfg(
            serde_json::json!({"name": "Qwen3-30B-A3B", "seq_len": 4096}),
            serde_json::json!({"dp": 8, "ep": 8, "moe_token_dispatcher": "hybridep", "moe_grouped_gemm": true,
                "moe_router_force_load_balancing": true, "global_batch": 512}),
            8,
        );
        let moe = c.moe.as_ref().unwrap();
        // Extra calls: router 7 / 9; HybridEP 3 / 1; experts 1 / 1. HybridEP with dropless routing: two syncs.
        let l = moe_launches(moe, 1, false);
        assert_eq!((l.fwd(), l.bwd(), l.fwd_syncs), (11, 11, 2));
        let layer = |scale: f64| {
            let sys = b200(scale);
            let backend = Derated::new(AnalyticBackend::new(sys.clone()), Efficiency::CALIBRATED);
            let mut timer = Timer::for_training(&backend, &c);
            let ops = moe_layer_ops(&c, &Layout::new(&c, 8), moe, OpPrecisions::of(&c, &sys.gpu));
            let timed = super::super::timing::time_layer(&c, &ops, &mut timer).unwrap();
            let [(gf, hf), (gb, hb)] = pass_sums(&ops, &timed);
            let secs = super::super::timing::layer_seconds(&c, &timer, &ops, &timed);
            // The routing map's all-gather (t_A) and one dispatch (D, one of the all-to-all's two calls).
            let fwd = |name: OpName| {
                ops.iter().zip(&timed).find(|(o, _)| o.name == name && o.phase == Phase::Fwd).unwrap().1.charged_us
            };
            (secs, [(gf, hf), (gb, hb)], [fwd(OpName::EpAllGather), fwd(OpName::EpAllToAll)])
        };
        let ((f1, b1), ..) = layer(1.0);
        let ((f2, b2), [(gf, hf), (gb, hb)], [t_a, d]) = layer(2.0);
        // The operators' own kernels (bf16, no quantization): forward two RMSNorms, QKV, the query and key heads'
        // QK norms (Qwen3's qk_layernorm: 2), RoPE, flash attention, output projection, router GEMM, top-k, the
        // routing map's all-gather, the dispatch and combine (3), FC1, SwiGLU, FC2 = 16; backward the norms 2 × 2,
        // QKV 2, QK norms 2 × 2, RoPE 1, attention 1, projection 2, router 2, top-k 1, all-to-alls 2, FC1 2,
        // SwiGLU 1, FC2 2 = 24, of which the all-gather, dispatch and combine are collective calls at 44.7 µs
        // (`cost::host`) and the rest counted kernels at 70.7 µs: 13 × 70.7 + 3 × 44.7 = 919.1 + 134.1 = 1,053.2
        // and 22 × 70.7 + 2 × 44.7 = 1,555.4 + 89.4 = 1,644.8 µs.
        // The grouped
        // FC1 and FC2 run one GEMM per local expert (128/8 = 16): 15 further GEMMs at 25 µs per projection and GEMM
        // kind — forward 2 × 15 × 25 = 750 µs, backward (dgrad and wgrad) 2 × 2 × 15 × 25 = 1,500 µs. Plus 11 calls
        // per pass at 70.7 µs (777.7 µs): 1,053.2 + 750 + 777.7 = 2,580.9 and 1,644.8 + 1,500 + 777.7 = 3,922.5 µs.
        let host = Efficiency::CALIBRATED.host_us;
        let coll = crate::cost::host::COLLECTIVE_HOST_US;
        assert!((hf - (13.0 * host + 3.0 * coll + 750.0)).abs() < 1e-9, "{hf}");
        assert!((hb - (22.0 * host + 2.0 * coll + 1500.0)).abs() < 1e-9, "{hb}");
        let (fwd_host, bwd_host) = (hf + 11.0 * host, hb + 11.0 * host);
        assert!((fwd_host - 2580.9).abs() < 1e-9 && (bwd_host - 3922.5).abs() < 1e-9);
        // On the 2× GPU the backward runs at the host's pace. The forward's host waits at (A) for the all-gather it
        // issued last and at (B) for the dispatch: (host − the dispatch's call 44.7 + t_A) + (70.7 + D) µs, which
        // outlasts the GPU time plus one call per synchronization and the next layer's attention behind the
        // expert launches.
        assert!(fwd_host > gf + 2.0 * host && bwd_host > gb, "{gf} {gb}");
        let fwd = fwd_host - coll + t_a + host + d;
        assert!((f2 - fwd * 1e-6).abs() < 1e-12 && (b2 - bwd_host * 1e-6).abs() < 1e-12, "{f2} {b2} {fwd}");
        assert!(t_a > 0.0 && d > 0.0);
        assert!((f2 + b2) / (f1 + b1) > 0.99, "{} → {}", f1 + b1, f2 + b2);
    }

    #[test]
    fn grouped_gemm_host_time_by_hand() {
        // An fp8 projection's forward call counts 3 kernels (quantization and GEMM) at 67.9 µs = 203.7 µs; over 8
        // local experts the 7 further GEMMs add 7 × 25 = 175 µs: 378.7 µs.
        assert!((grouped_gemm_host_us(203.7, 8, 1) - 378.7).abs() < 1e-9);
        // Backward: 407.4 µs for the call, and dgrad and wgrad of each further expert, 7 × 2 × 25 = 350 µs: 757.4 µs.
        assert!((grouped_gemm_host_us(407.4, 8, 2) - 757.4).abs() < 1e-9);
        // One local expert: one GEMM, exactly the operator's own host time.
        assert_eq!(grouped_gemm_host_us(67.9, 1, 2), 67.9);
    }

    #[test]
    fn grouped_expert_gemms_cost_the_host_per_local_expert_only_under_megatron_core() {
        use crate::llm::operators::OpName;
        use crate::op::Phase;
        // The toy at ep 4 (2 local experts), bf16 on the analytic backend: FC1 and FC2 forward 1 kernel (70.7 µs)
        // plus the second expert's GEMM, 25 µs → 95.7 µs; backward 2 kernels (141.4 µs) plus its dgrad and
        // wgrad, 50 µs → 191.4 µs.
        let model = serde_json::json!({"name": "toy", "layers": 2, "hidden": 1024, "heads": 8, "ffn_hidden": 4096,
            "vocab": 32000, "seq_len": 2048, "activation": "swiglu",
            "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 1024}});
        let par = serde_json::json!({"dp": 4, "ep": 4, "moe_token_dispatcher": "alltoall",
            "moe_grouped_gemm": true, "moe_router_force_load_balancing": true});
        let host_of = |framework: &str| {
            let req: TrainingRequest = serde_json::from_value(serde_json::json!({"system": "dgx-b200",
                "model": model.clone(), "parallelism": par.clone(), "precision": "bf16", "framework": framework}))
            .unwrap();
            let c = crate::llm::validate::validate_request(&req, 4).unwrap();
            let sys = b200(1.0);
            let backend = Derated::new(AnalyticBackend::new(sys.clone()), Efficiency::CALIBRATED);
            let mut timer = Timer::for_training(&backend, &c);
            let moe = c.moe.as_ref().unwrap();
            let ops = moe_layer_ops(&c, &Layout::new(&c, 4), moe, OpPrecisions::of(&c, &sys.gpu));
            let timed = super::super::timing::time_layer(&c, &ops, &mut timer).unwrap();
            let host = |name: OpName, phase: Phase| {
                ops.iter().zip(&timed).find(|(o, _)| o.name == name && o.phase == phase).unwrap().1.time.host_us
            };
            [
                host(OpName::ExpertFc1, Phase::Fwd),
                host(OpName::ExpertFc2, Phase::Fwd),
                host(OpName::ExpertFc1, Phase::Bwd),
                host(OpName::ExpertFc2, Phase::Bwd),
            ]
        };
        let h = Efficiency::CALIBRATED.host_us;
        let close = |a: [f64; 4], b: [f64; 4]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9);
        let megatron = host_of("megatron");
        assert!(close(megatron, [h + 25.0, h + 25.0, 2.0 * h + 50.0, 2.0 * h + 50.0]), "{megatron:?}");
        assert!((megatron[0] - 95.7).abs() < 1e-9 && (megatron[2] - 191.4).abs() < 1e-9);
        // torchtitan's grouped GEMM (`torch._grouped_mm`) is one kernel per projection and pass.
        let titan = host_of("torchtitan");
        assert!(close(titan, [h, h, 2.0 * h, 2.0 * h]), "{titan:?}");
    }
}

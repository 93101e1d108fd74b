//! Stage 1 and 2 of a serving prediction for one engine step — **decompose** and **time**: the operators one
//! pipeline stage runs in one step of a continuous batch (decodes and prefill tokens together, vLLM's
//! `max_num_batched_tokens` step), timed through the training predictor's memoizing [`Timer`] and [`time_ops`].
//!
//! Per layer, T = prefill tokens + decoding sequences (the step's tokens), per GPU (a/t query heads, g_t = max(1,
//! g/t) key/value heads, f/t MLP columns):
//! - two norms [T, d]; QKV `Linear1` [T, d → (a/t + 2·g_t)·D]; `RoPE` over q and k (not under TensorRT-LLM,
//!   whose attention op applies it); `Attention_Prefill`
//!   (B, L, a/t, g_t, D) over whole prompts charged by the share of their tokens in this step (a chunk of c of a
//!   prompt's L tokens costs c/L of the prompt's causal attention: summed over the chunks, a chunk at offset p
//!   costs c·(p + c/2), and Σ = L²/2); `Attention_Decode` (B, C, a/t, g_t, D) at the decodes' mean context C;
//!   output `Linear2` [T, a/t·D → d];
//! - dense MLP: `Linear3` [T, d → 2f/t] (gate and up), `SwiGLU`, `Linear4` [T, f/t → d] (GeLU: f/t and `GeLU`);
//! - MoE MLP (MODELS.md §5): `MoE_Router` [T, d → E] (16-bit), fused experts `MoE` (T/ep, d, F/(t/ep), E/ep, K) —
//!   the GPU's E/ep experts receive, on average, the T·K/ep routed copies of T/ep tokens (aiconfigurator's vLLM
//!   measurements agree: 16,384 tokens at ep 4 over 32 local experts take what 4,096 take at ep 1, 1.57 against
//!   1.48 ms on H100) — and the shared experts as a dense MLP of width F_shared/t. With ep > 1 the tokens are
//!   replicated over the
//!   tensor-parallel group (vLLM's `--enable-expert-parallel` at data-parallel size 1, SGLang's and TensorRT-LLM's
//!   default), so no all-to-all dispatch is needed: each GPU runs only its experts' tokens and the layer's
//!   tensor-parallel all-reduce combines them;
//! - two tensor-parallel all-reduces of T·d 16-bit activations (after attention and after the MLP; vLLM's custom
//!   all-reduce or NCCL through the backend's collective model); under TensorRT-LLM they also apply the residual
//!   add and the next RMSNorm where the model's decoder layer fuses them ([`super::fusion`]): those norms are
//!   `AllReduce_Residual_RMSNorm` rows, their traffic without a kernel of their own;
//! - with data-parallel attention (`parallelism.attention_dp_size` ranks, or `dp_attention`: one per GPU) each rank
//!   runs attention and the dense layers tensor-parallel over its tp/attention_dp GPUs on its share of the step's
//!   tokens (all-reduces within the rank's group only), and every MoE layer adds two all-to-alls (`EP_Alltoall`,
//!   dispatch and combine) of the rank's T·K routed copies of d activations over the tp GPUs (DeepEP, SGLang's DP
//!   attention); the experts of a GPU receive the routed copies of every rank's tokens;
//! - the first stage adds the vocabulary-parallel `Embedding` (and its all-reduce); the last the final norm, the
//!   LM head `Final_Linear` over only the S sequences that sample this step (vLLM computes logits for the last
//!   token of each sequence), the all-gather of their logits and the `Sampler` (a softmax over S·V fp32 logits);
//!   every stage but the last sends its T·d activations to the next (`PP_P2P`).
//!
//! DeepSeek sparse attention (GLM-5) adds its indexer on every layer ([`dsa_indexer`]), and its decode attention
//! reads at most the indexer's top-k cached tokens (prefill attention stays dense causal: an over-estimate for
//! prompts longer than top-k).
//!
//! MLA (DeepSeek-V3) is approximated: the down-projections (replicated) and the per-head up-projections are three
//! `Linear1` GEMMs, prefill attention runs as heads of D_nope + D_rope dims, decode attention as one key/value head
//! of (kv_r + D_rope)/2 dims so its bytes equal the latent cache's, read once for all local query heads as the MLA
//! kernels read it ([`mla_decode`]).

use super::fusion::{allreduce_fusion, fused_charge, stage_norms};
use super::request::{Engine, MlaSpec};
use super::validate::ServingConfig;
use crate::comm::Group;
use crate::cost::Timed;
use crate::hw::{Precision, System};
use crate::llm::config::{Activation, ConfigError, Norm};
use crate::llm::operators::{OpName, StageOp, Work};
use crate::llm::timing::{time_ops, Timer};
use crate::op::{Collective, OpClass, OpShape, Phase};

/// What one engine step processes (on every pipeline stage, for one micro-batch).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepLoad {
    /// Sequences decoding one token each.
    pub decode_seqs: u32,
    /// Mean tokens a decoding sequence attends (its context, the new token included).
    pub decode_context: u32,
    /// Prompt tokens prefilled in this step (chunks of one or more prompts).
    pub prefill_tokens: u32,
    /// Prompt length L (prefill attention is charged as a share of whole prompts).
    pub prompt_len: u32,
    /// Sequences that sample a token at the end of the step (the decodes and the prompts whose last chunk ran).
    pub sampled: u32,
    /// Padding tokens the step's non-attention operators (projections, MLP/MoE, norms, all-reduces) run beyond
    /// [`Self::tokens`]: vLLM V1 pads a piecewise-graph step's `num_tokens` up to the next captured size
    /// (`GPUModelRunner._get_num_input_tokens` → `VllmConfig.pad_for_cudagraph`, `vllm/v1/worker/gpu_model_runner.py`)
    /// while attention, run eagerly between the pieces, sees only the real tokens. Set by the step solver
    /// (`steady::Solver::step`); 0 elsewhere.
    pub graph_pad_tokens: u32,
    /// Draft tokens each decoding sequence verifies besides its own token in this step, k (speculative
    /// decoding's verification pass, [`super::speculative`]): the sequence runs k + 1 tokens through the GEMMs
    /// and k + 1 query tokens through decode attention. Set by the step solver; 0 without speculative decoding.
    pub draft_tokens: u32,
}

#[cfg(test)]
impl StepLoad {
    /// A decode-only step for tests: `seqs` sequences each decoding (and sampling) one token at a mean context of
    /// `context` tokens, of prompts `prompt_len` tokens long; no prefill, no CUDA-graph padding.
    pub(crate) const fn decode(seqs: u32, context: u32, prompt_len: u32) -> StepLoad {
        StepLoad {
            decode_seqs: seqs,
            decode_context: context,
            prefill_tokens: 0,
            prompt_len,
            sampled: seqs,
            graph_pad_tokens: 0,
            draft_tokens: 0,
        }
    }

    /// A prefill-only step for tests: one whole prompt of `prompt_len` tokens, all of it prefilled this step, sampling
    /// its first token; no decodes, no CUDA-graph padding.
    pub(crate) const fn prefill(prompt_len: u32) -> StepLoad {
        StepLoad {
            decode_seqs: 0,
            decode_context: 0,
            prefill_tokens: prompt_len,
            prompt_len,
            sampled: 1,
            graph_pad_tokens: 0,
            draft_tokens: 0,
        }
    }
}

impl StepLoad {
    /// Tokens in the step: prefill tokens plus one per decoding sequence (1 + [`Self::draft_tokens`] when it
    /// verifies drafts).
    pub fn tokens(&self) -> u32 {
        self.prefill_tokens + self.decode_seqs * (1 + self.draft_tokens)
    }

    /// Tokens the non-attention operators process: [`Self::tokens`] plus the CUDA-graph padding
    /// ([`Self::graph_pad_tokens`]).
    pub fn gemm_tokens(&self) -> u32 {
        self.tokens() + self.graph_pad_tokens
    }
}

/// Where a stage sits in the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageRole {
    /// Runs the embedding.
    pub first: bool,
    /// Runs the LM head and sampling; stages that are not last send their activations on.
    pub last: bool,
}

/// One operator of a step and how often it runs per step (fractional for a prefill attention charged by share).
#[derive(Debug, Clone, PartialEq)]
pub struct StepOp {
    pub op: StageOp,
    /// Calls per step (layers × calls per layer, × the prompt share for prefill attention).
    pub per_step: f64,
}

/// Receives the operators of a step one by one: name, work, calls per step and features (the dims, or bytes,
/// nodes and GPUs per node of a collective). The allocation-free path of [`for_each_op`].
pub type Emit<'e> = dyn FnMut(OpName, Work, f64, &[u64]) + 'e;

pub(crate) fn compute(out: &mut Emit, name: OpName, class: OpClass, dtype: Precision, dims: &[u64], per_step: f64) {
    let shape = OpShape::new(class, Phase::Fwd, dims);
    out(name, Work::Compute { shape, dtype }, per_step, dims);
}

fn collective(out: &mut Emit, name: OpName, c: Collective, bytes: f64, group: Group, active: u32, per_step: f64) {
    let features = [bytes as u64, group.nodes as u64, group.ranks_per_node as u64];
    out(name, Work::Collective { collective: c, bytes, group, active_per_node: active }, per_step, &features);
}

/// Vocabulary rows on one GPU: V padded to a multiple of 64 (vLLM's `DEFAULT_VOCAB_PADDING_SIZE`), split over tp.
pub fn vocab_per_gpu(vocab: u32, tp: u32) -> u64 {
    (vocab as u64).div_ceil(64).saturating_mul(64).div_ceil(tp.max(1) as u64)
}

/// The tensor-parallel group of one instance on `system` (packed into as few nodes as possible) and the GPUs of a
/// node communicating at once.
pub fn tp_group(cfg: &ServingConfig, system: &System) -> (Group, u32) {
    let gpn = system.gpus_per_node.max(1);
    (Group::new(cfg.tp, cfg.tp.min(gpn)), cfg.tp.min(gpn))
}

/// The attention tensor-parallel group (tp/attention_dp GPUs; the whole tp group without data-parallel attention)
/// and the GPUs of a node communicating at once (every rank's group runs together).
pub fn attention_group(cfg: &ServingConfig, system: &System) -> (Group, u32) {
    let gpn = system.gpus_per_node.max(1);
    let a = cfg.attn_tp();
    (Group::new(a, a.min(gpn)), cfg.tp.min(gpn))
}

/// The operators one pipeline stage runs in one step with `load`, holding `dense_layers` dense and `moe_layers`
/// MoE layers, as a list.
pub fn stage_ops(
    cfg: &ServingConfig,
    system: &System,
    load: &StepLoad,
    role: StageRole,
    dense_layers: u32,
    moe_layers: u32,
) -> Vec<StepOp> {
    let mut ops = Vec::with_capacity(24);
    for_each_op(cfg, system, load, role, dense_layers, moe_layers, &mut |name, work, per_step, features| {
        ops.push(StepOp {
            op: StageOp {
                name,
                phase: Phase::Fwd,
                calls: 1,
                work,
                features: features.to_vec(),
                recompute: false,
                overlaps: None,
            },
            per_step,
        })
    });
    ops
}

/// The operators of [`stage_ops`], handed to `out` one by one without allocating (the solver's path: it times
/// thousands of steps).
pub fn for_each_op(
    cfg: &ServingConfig,
    system: &System,
    load: &StepLoad,
    role: StageRole,
    dense_layers: u32,
    moe_layers: u32,
    out: &mut Emit,
) {
    let m = &cfg.model;
    // Attention and the dense layers split over tp, or data-parallel (full on every GPU) with dp_attention.
    let (tp, layers) = (cfg.attn_tp() as u64, (dense_layers + moe_layers) as f64);
    let t = load.gemm_tokens() as u64;
    let d = m.hidden as u64;
    let a = m.heads as u64 / tp;
    let g = cfg.kv_heads_per_gpu() as u64;
    let (w, act) = (cfg.precision, cfg.activation_precision);
    if t == 0 {
        return;
    }
    let norm = match m.norm {
        Norm::Rmsnorm => (OpName::RMSNorm, OpClass::RmsNorm),
        Norm::Layernorm => (OpName::LayerNorm, OpClass::LayerNorm),
    };
    // TensorRT-LLM runs some norms inside the tensor-parallel all-reduces (`super::fusion`): they launch nothing.
    let fusion = allreduce_fusion(cfg);
    let (norms, in_allreduce, final_alone) = stage_norms(dense_layers, moe_layers, fusion, role.first, role.last);
    if norms > 0.0 {
        compute(out, norm.0, norm.1, act, &[t, d], norms);
    }
    if in_allreduce > 0.0 {
        compute(out, OpName::AllreduceRmsNorm, norm.1, act, &[t, d], in_allreduce);
    }
    let (rope_dim, v_dim) = qkv_projections(out, cfg, t, layers);
    if let Some(mla) = &m.mla {
        super::mla::latent_norms(out, cfg, t, mla, layers);
        super::mla::prefill_elementwise(out, cfg, load, mla, layers);
    }
    // TensorRT-LLM applies RoPE inside its attention op (`TrtllmAttention.support_fused_rope()`, negotiated in
    // `Attention.__init__`, `tensorrt_llm/_torch/modules/attention.py`): no kernel of its own.
    if cfg.engine != Engine::Trtllm {
        compute(out, OpName::RoPE, OpClass::Rope, act, &[(t * (a + g)).div_ceil(2), rope_dim], layers);
    }
    if let Some(ix) = &m.dsa {
        dsa_indexer(out, cfg, load, ix, rope_dim, layers);
    }
    attention(out, cfg, load, layers);
    compute(out, OpName::Linear2, OpClass::Linear, w, &[1, t, d, a * v_dim], layers);
    mlp(out, cfg, t, m.ffn_hidden as u64 / tp, dense_layers as f64);
    if moe_layers > 0 {
        moe_block(out, cfg, system, t, load.prefill_tokens > 0, moe_layers as f64);
    }
    let (agroup, aactive) = attention_group(cfg, system);
    if tp > 1 {
        let bytes = (t * d) as f64 * act.bytes();
        collective(out, OpName::MpAllReduce, Collective::AllReduce, bytes, agroup, aactive, 2.0 * layers);
    }
    stage_ends(out, cfg, system, load, role, final_alone.then_some(norm));
}

/// The query/key/value projections of `layers` layers over `t` tokens, and (RoPE width, value head width): one
/// fused QKV GEMM of (a + 2g)·dh columns, or MLA's down-projection (with DSA's indexer key `wk`), query
/// up-projection and key/value up-projection (DeepSeek-V2, Liu et al. 2024, §2.1; aiconfigurator's MLA module).
fn qkv_projections(out: &mut Emit, cfg: &ServingConfig, t: u64, layers: f64) -> (u64, u64) {
    let m = &cfg.model;
    let (w, d) = (cfg.precision, m.hidden as u64);
    let a = m.heads as u64 / cfg.attn_tp() as u64;
    let (g, dh) = (cfg.kv_heads_per_gpu() as u64, m.head_dim as u64);
    match &m.mla {
        None => {
            compute(out, OpName::Linear1, OpClass::Linear, w, &[1, t, (a + 2 * g) * dh, d], layers);
            (dh, dh)
        }
        Some(mla) => {
            let (qr, kvr) = (mla.q_lora_rank as u64, mla.kv_lora_rank as u64);
            let (nope, rope, v) = (mla.qk_nope_head_dim as u64, mla.qk_rope_head_dim as u64, mla.v_head_dim as u64);
            // With DSA the indexer's key projection `wk` rides in the same fused GEMM (aiconfigurator's DSA module:
            // "kv_a_proj_with_mqa GEMM (includes indexer K projection)").
            let wk = m.dsa.map_or(0, |x| x.head_dim as u64);
            compute(out, OpName::Linear1, OpClass::Linear, w, &[1, t, qr + kvr + rope + wk, d], layers);
            let q_in = if qr > 0 { qr } else { d };
            compute(out, OpName::Linear1, OpClass::Linear, w, &[1, t, a * (nope + rope), q_in], layers);
            compute(out, OpName::Linear1, OpClass::Linear, w, &[1, t, a * (nope + v), kvr], layers);
            (rope, v)
        }
    }
}

/// The attention kernels of `layers` layers: the step's prefill tokens as a share of whole prompts of `prompt_len`
/// (multi-head after MLA's up-projection), and one decode attention over the decoding sequences' mean context
/// (DeepSeek sparse attention: the indexer's top-k tokens; MLA: [`mla_decode`]), in the KV cache's dtype.
///
/// With sliding-window attention ([`crate::llm::serving::model::SlidingWindow`], W tokens on N_w of the model's
/// N layers; this stage holds `layers`·N_w/N of them) a windowed layer's decode attention reads min(C, W) cached
/// tokens — its time and its KV-cache bytes read both follow that context — and its prefill attention over a
/// prompt of L tokens is charged the causal kernel's time × Σ_{i=1..L} min(i, W) / (L(L + 1)/2), the share of
/// query–key pairs the window keeps (flash attention's windowed kernels skip the key blocks outside the window:
/// FlashAttention's `window_size`, which vLLM's `FlashAttentionImpl.__init__` sets to (W − 1, 0),
/// `vllm/v1/attention/backends/flash_attn.py`). That charge scales the windowed layers' calls, so their attention
/// kernels' fixed costs (launch, `kernel_us`) shrink with it (by 27.6 of 72 kernels for gpt-oss at a 1,024-token
/// prompt), as a chunk's share already scales them: an under-charge of those fixed costs, not of the attention's
/// work [rec: a whole-call row of the window's equivalent causal segments, ≈ L/(2W) prompts of 2W tokens].
fn attention(out: &mut Emit, cfg: &ServingConfig, load: &StepLoad, layers: f64) {
    let m = &cfg.model;
    let a = m.heads as u64 / cfg.attn_tp() as u64;
    let (g, dh, kv) = (cfg.kv_heads_per_gpu() as u64, m.head_dim as u64, cfg.kv_cache_dtype);
    let windowed = m.sliding_window.map_or(0.0, |sw| layers * sw.layers as f64 / m.layers.max(1) as f64);
    if load.prefill_tokens > 0 {
        let l = load.prompt_len.max(1) as u64;
        let prompts = (load.prefill_tokens as u64).div_ceil(l).max(1);
        let share = load.prefill_tokens as f64 / (prompts * l) as f64;
        // The windowed layers count as the share of the causal query–key pairs their window keeps.
        let kept = m.sliding_window.map_or(1.0, |sw| sw.prefill_keys(l) / (l as f64 * (l as f64 + 1.0) / 2.0));
        let layers = layers - windowed + windowed * kept;
        // MLA prefill: multi-head attention after the up-projection (g = a on this GPU).
        let g_prefill = if m.mla.is_some() { a } else { g };
        let dims = [prompts, l, a, g_prefill, dh];
        compute(out, OpName::AttentionPrefill, OpClass::AttentionPrefill, kv, &dims, layers * share);
    }
    if load.decode_seqs > 0 {
        // DeepSeek sparse attention reads only the indexer's top-k cached tokens.
        let c = load.decode_context.max(1).min(m.dsa.map_or(u32::MAX, |x| x.topk)) as u64;
        let b = load.decode_seqs as u64;
        // A verification pass's k + 1 query tokens per sequence read its cache once, as that many times the
        // query heads (FlashMLA's `s_q * h_q // h_kv` query rows per key/value head; [`super::speculative`]).
        let a = a * (1 + load.draft_tokens as u64);
        let decode = |out: &mut Emit, c: u64, n: f64| match &m.mla {
            None => compute(out, OpName::AttentionDecode, OpClass::AttentionDecode, kv, &[b, c, a, g, dh], n),
            Some(mla) => mla_decode(out, b, c, a, mla, kv, n),
        };
        // A windowed layer reads at most its window; at a context within the window every layer reads it all.
        match m.sliding_window.map(|sw| sw.window_tokens as u64) {
            Some(w) if windowed > 0.0 && c > w => {
                if layers > windowed {
                    decode(out, c, layers - windowed);
                }
                decode(out, w, windowed);
            }
            _ => decode(out, c, layers),
        }
    }
}

/// One MLP of `width` columns per GPU over `t` tokens, `n` times per step (nothing for `n` or `width` 0): the up
/// (and gate, fused: 2·width) GEMM, the SwiGLU or GeLU, the down GEMM.
fn mlp(out: &mut Emit, cfg: &ServingConfig, t: u64, width: u64, n: f64) {
    if n == 0.0 || width == 0 {
        return;
    }
    let (w, act, d) = (cfg.precision, cfg.activation_precision, cfg.model.hidden as u64);
    match cfg.model.activation {
        Activation::Swiglu => {
            compute(out, OpName::Linear3, OpClass::Linear, w, &[1, t, 2 * width, d], n);
            compute(out, OpName::SwiGLU, OpClass::Swiglu, act, &[t, width], n);
        }
        Activation::Gelu => {
            compute(out, OpName::Linear3, OpClass::Linear, w, &[1, t, width, d], n);
            compute(out, OpName::GeLU, OpClass::Gelu, act, &[t, width], n);
        }
    }
    compute(out, OpName::Linear4, OpClass::Linear, w, &[1, t, d, width], n);
}

/// The mixture-of-experts part of `n` MoE layers (nothing for a dense model): the router GEMM, the expert-parallel
/// all-to-all dispatch and combine with data-parallel attention and ep > 1, the grouped experts of this GPU
/// (T·dp/ep tokens' worth of routed copies), and the shared experts' MLP. SGLang's wide expert parallelism (DeepEP
/// around DeepGEMM, [`super::wideep::plan`]) replaces the all-to-all and the fused experts with its measured kernels.
fn moe_block(out: &mut Emit, cfg: &ServingConfig, system: &System, t: u64, extend: bool, n: f64) {
    let m = &cfg.model;
    let Some(moe) = &m.moe else {
        return;
    };
    let (act, d) = (cfg.activation_precision, m.hidden as u64);
    let (group, active) = tp_group(cfg, system);
    let ep = cfg.ep as u64;
    let f = moe.expert_ffn_hidden as u64 / (cfg.tp as u64 / ep);
    compute(out, OpName::MoeRouter, OpClass::Linear, act, &[1, t, moe.experts as u64, d], n);
    // The experts of one GPU receive the routed copies of the step's tokens (with data-parallel attention,
    // every rank's) that chose them: on average T·K/ep copies, T/ep tokens' worth.
    let t_experts = (t * cfg.dp() as u64).div_ceil(ep);
    let dims = [t_experts, d, f, moe.experts as u64 / ep, moe.top_k as u64];
    let wide = super::wideep::plan(cfg, system, t, extend);
    if let Some(p) = wide {
        let features = [p.experts.tokens, d, f, dims[3], dims[4]];
        out(OpName::Moe, Work::WideEp(p.experts), n, &features);
        if let Some(a2a) = p.dispatch_combine {
            out(OpName::EpAllToAll, Work::WideEp(a2a), n, &[t, d, dims[4]]);
        }
    }
    if cfg.dp() > 1 && cfg.ep > 1 && wide.is_none_or(|p| p.dispatch_combine.is_none()) {
        // Dispatch this rank's T·K routed copies of d activations to their experts' GPUs, and combine back.
        let bytes = (t * moe.top_k as u64 * d) as f64 * act.bytes();
        collective(out, OpName::EpAllToAll, Collective::AllToAll, bytes, group, active, 2.0 * n);
    }
    if wide.is_none() {
        compute(out, OpName::Moe, OpClass::Moe, cfg.expert_precision(), &dims, n);
    }
    mlp(out, cfg, t, moe.shared_ffn_hidden as u64 / cfg.attn_tp() as u64, n);
}

/// The pipeline ends of a stage: the first runs the embedding (and its tensor-parallel all-reduce); the last the
/// final norm (`final_norm`, unless fused into an all-reduce), the LM head over the sampled sequences, its vocab
/// all-gather and the sampler; every other stage sends its activations to the next stage's first GPU.
fn stage_ends(
    out: &mut Emit,
    cfg: &ServingConfig,
    system: &System,
    load: &StepLoad,
    role: StageRole,
    final_norm: Option<(OpName, OpClass)>,
) {
    let tp = cfg.attn_tp() as u64;
    let (t, d) = (load.gemm_tokens() as u64, cfg.model.hidden as u64);
    let (act, act_bytes) = (cfg.activation_precision, cfg.activation_precision.bytes());
    let (agroup, aactive) = attention_group(cfg, system);
    let vp = vocab_per_gpu(cfg.model.vocab, tp as u32);
    if role.first {
        compute(out, OpName::Embedding, OpClass::Embedding, act, &[t, vp, d], 1.0);
        if tp > 1 {
            let bytes = (t * d) as f64 * act_bytes;
            collective(out, OpName::MpAllReduce, Collective::AllReduce, bytes, agroup, aactive, 1.0);
        }
    }
    if role.last {
        let s = load.sampled.max(1) as u64;
        if let Some((norm_name, norm_class)) = final_norm {
            compute(out, norm_name, norm_class, act, &[s, d], 1.0);
        }
        compute(out, OpName::FinalLinear, OpClass::Linear, act, &[1, s, vp, d], 1.0);
        if tp > 1 {
            let bytes = (s * vp * tp) as f64 * act_bytes;
            collective(out, OpName::MpAllGather, Collective::AllGather, bytes, agroup, aactive, 1.0);
        }
        compute(out, OpName::Sampler, OpClass::Softmax, Precision::Fp32, &[s, vp * tp], 1.0);
    } else {
        // The next stage's first GPU: on the same node when the instance fits in one.
        let gpn = system.gpus_per_node.max(1);
        let pair = if cfg.gpus() <= gpn { Group::new(2, 2) } else { Group::new(2, 1) };
        let bytes = (t * d) as f64 * act_bytes;
        collective(out, OpName::PpP2p, Collective::SendRecv, bytes, pair, cfg.tp.min(gpn), 1.0);
    }
}

/// Query heads the grouped decode-attention kernels perfcast's attention models learned from run in one pass over
/// a key/value head's cache. aiconfigurator's TensorRT-LLM table (`b200_sxm/trtllm/generation_attention_perf`,
/// train split; fp8 cache, one key/value head, 64 sequences at step 1,023) is flat up to 32 query heads — 11 µs
/// at 1–16 heads of 64 dims, 13 µs at 32 — and falls off there: 54 µs at 64 and 101 µs at 128 (heads of 256 dims:
/// 13–17 µs up to 32, 560 µs at 64, 1,102 µs at 128), the kernel streaming the cache again per query head; H100's
/// table has the same edge (10–12 µs up to 32 heads of 64 dims, 59 µs at 64, 111 µs at 128).
pub const GROUPED_DECODE_ONE_PASS_HEADS: u64 = 32;

/// MLA's absorbed decode attention on one GPU: each sequence's a local query heads share its one latent
/// key/value head (kv_r + D_rope dims), and the MLA kernels fold the heads into the rows of their matrix
/// multiplies, reading each sequence's C cached latents once for all of them — FlashMLA's
/// `flash_mla_with_kvcache` takes `s_q · h_q / h_kv` query rows per key/value head (`get_mla_metadata(
/// cache_seqlens, s_q * h_q // h_kv, h_kv)`, deepseek-ai/FlashMLA), as do TensorRT-LLM's `trtllm-gen` MLA
/// generation kernels and SGLang's and vLLM's FlashMLA / FlashInfer MLA backends. Timed as grouped attention over
/// one key/value head of (kv_r + D_rope)/2 dims, so its bytes equal the latent cache's, with at most
/// [`GROUPED_DECODE_ONE_PASS_HEADS`] query heads: the grouped kernels' one-pass regime, where the cache is read
/// once as the MLA kernel reads it (under data-parallel attention every GPU holds all 128 heads of DeepSeek-V3,
/// and the grouped kernels' 128-head times stream the cache 128 times). Against aiconfigurator's TensorRT-LLM MLA
/// table on B200 (`generation_mla_perf`, train split, fp8 cache): 16 heads (tp 8) 13.2 µs vs 12.8 µs at 8
/// sequences × 1,023 cached tokens, 201 vs 202 µs at 256 × 8,191; 128 heads (data-parallel attention), 8 × 1,023:
/// 95 µs before the cap, 16.8 µs measured. The heads beyond 32 still add compute the cap leaves out: the MLA
/// table's 128-head times are 0.9–1.8× its 16-head times (1.8× at 256 sequences × 1,023) [rec].
fn mla_decode(out: &mut Emit, b: u64, c: u64, a: u64, mla: &MlaSpec, kv: Precision, layers: f64) {
    let d = ((mla.kv_lora_rank + mla.qk_rope_head_dim) as u64).div_ceil(2);
    let heads = a.min(GROUPED_DECODE_ONE_PASS_HEADS);
    compute(out, OpName::AttentionDecode, OpClass::AttentionDecode, kv, &[b, c, heads, 1, d], layers);
}

/// DeepSeek sparse attention's indexer on one GPU, `layers` times ([`crate::llm::serving::model::DsaIndexer`]),
/// as SGLang's `Indexer.forward_cuda` runs it (`nsa_indexer.py`; H heads of D_i dims, replicated on every GPU,
/// the step's T tokens, q_r the query latent's rank, d hidden):
/// - projections: `wq_b` [T, q_r → H·D_i] in the weights' precision and `weights_proj` [T, d → H] in 16 bits
///   (`wk` [T, d → D_i] rides in MLA's fused down-projection, [`for_each_op`]);
/// - `k_norm` (a LayerNorm of D_i), one rotary kernel over the query's H heads and the key, then on the query
///   [T, H·D_i] the rotary part's copy back, the Hadamard `rotate_activation` and `act_quant` to fp8 (3 kernels),
///   on the key [T, D_i] the same three and the index-cache write (`set_index_k_scale_buffer`: 4), and the head
///   gates' scaling [T, H] (1);
/// - decode: `deep_gemm.fp8_paged_mqa_logits` of each sequence's query over its C cached index keys — one key
///   head shared by the H query heads, so per sequence an fp8 GEMM [H × D_i]·[D_i × C] (`bmm` [B, H, C, D_i]),
///   which reads the C·D_i key bytes once — and `topk_transform` over the C fp32 logits (one pass);
/// - prefill: the same logits over the prompt (causal: its L·H query rows against L/2 keys on average, `bmm`
///   [prompts, L·H, L/2, D_i], charged by the chunk's share of the prompt) and top-k over them, only when the
///   prompt is longer than top-k: SGLang skips both otherwise (`skip_logits_computation = max_kv_len <=
///   index_topk`).
///
/// The main stream's `weights_proj` overlaps the alternate stream's projections in graph-captured decode; that
/// overlap is not modelled [rec].
fn dsa_indexer(
    out: &mut Emit,
    cfg: &ServingConfig,
    load: &StepLoad,
    ix: &crate::llm::serving::model::DsaIndexer,
    rope_dim: u64,
    layers: f64,
) {
    let m = &cfg.model;
    let t = load.gemm_tokens() as u64;
    let (d, h, di) = (m.hidden as u64, ix.heads as u64, ix.head_dim as u64);
    let (w, act) = (cfg.precision, cfg.activation_precision);
    let q_in = m.mla.as_ref().map_or(d, |x| if x.q_lora_rank > 0 { x.q_lora_rank as u64 } else { d });
    let (proj, small) = (OpName::DsaIndexerProj, OpName::DsaIndexerElementwise);
    compute(out, proj, OpClass::Linear, w, &[1, t, h * di, q_in], layers);
    compute(out, proj, OpClass::Linear, act, &[1, t, h, d], layers);
    compute(out, small, OpClass::LayerNorm, act, &[t, di], layers);
    compute(out, small, OpClass::Rope, act, &[(t * (h + 1)).div_ceil(2), rope_dim], layers);
    compute(out, small, OpClass::Elementwise, act, &[t, h * di, 1], 3.0 * layers);
    compute(out, small, OpClass::Elementwise, act, &[t, di, 1], 4.0 * layers);
    compute(out, small, OpClass::Elementwise, Precision::Fp32, &[t, h, 1], layers);
    if load.decode_seqs > 0 {
        let (b, c) = (load.decode_seqs as u64, load.decode_context.max(1) as u64);
        compute(out, OpName::DsaIndexerLogits, OpClass::Bmm, Precision::Fp8, &[b, h, c, di], layers);
        compute(out, small, OpClass::Elementwise, Precision::Fp32, &[b, c, 1], layers);
    }
    let l = load.prompt_len.max(1) as u64;
    if load.prefill_tokens > 0 && l > ix.topk as u64 {
        let prompts = (load.prefill_tokens as u64).div_ceil(l).max(1);
        let share = load.prefill_tokens as f64 / (prompts * l) as f64;
        // Causal: the prompt's l·H query rows against l/2 keys on average.
        let dims = [prompts, l * h, l.div_ceil(2), di];
        compute(out, OpName::DsaIndexerLogits, OpClass::Bmm, Precision::Fp8, &dims, layers * share);
        // Top-k over the chunk's logits: each of its tokens against (on average) half the prompt.
        let rows = load.prefill_tokens as u64;
        compute(out, small, OpClass::Elementwise, Precision::Fp32, &[rows, l.div_ceil(2), 1], layers);
    }
}

/// One step's operators timed.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedStep {
    /// The operators, in order.
    pub ops: Vec<StepOp>,
    /// Their times, in the same order.
    pub times: Vec<Timed>,
    /// Σ per_step · time, s: the GPU's work.
    pub gpu_s: f64,
    /// Kernels launched per step (a collective counts one).
    pub kernels: f64,
}

/// Times `ops` through `timer` (each distinct operator once).
pub fn time_step(ops: Vec<StepOp>, timer: &mut Timer) -> Result<TimedStep, ConfigError> {
    let stage: Vec<StageOp> = ops.iter().map(|o| o.op.clone()).collect();
    let timed = time_ops(&stage, timer)?;
    let kernel_us = timer.backend().efficiency().map_or(0.0, |e| e.kernel_us);
    let (mut gpu_us, mut kernels, mut times) = (0.0, 0.0, Vec::with_capacity(ops.len()));
    for (o, t) in ops.iter().zip(timed) {
        let (us, k) = fused_charge(o.op.name, t.charged_us, t.time.kernels, kernel_us);
        gpu_us += o.per_step * us;
        kernels += o.per_step * f64::from(k);
        // A fused norm's row shows what it charges: its body, no kernel.
        times.push(if o.op.name == OpName::AllreduceRmsNorm {
            Timed { time_us: us, kernels: 0, ..t.time }
        } else {
            t.time
        });
    }
    Ok(TimedStep { ops, times, gpu_s: gpu_us * 1e-6, kernels })
}

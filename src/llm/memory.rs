//! Memory per GPU: model states per ZeRO stage (Rajbhandari et al. 2020), activations per Korthikanti et al.
//! 2022 with recomputation, sequence parallelism and the micro-batches a pipeline stage keeps in flight, and an
//! allowance for the CUDA context, library workspaces and allocator fragmentation.

use serde::Serialize;
use utoipa::ToSchema;

use super::config::{Activation, Attention, Recompute, TrainingConfig};
use crate::hw::Precision;

/// Bytes in one GiB (2³⁰).
pub const GIB: f64 = 1_073_741_824.0;

/// Fixed part of the allowance: CUDA context, cuBLAS/cuDNN workspaces and NCCL buffers, bytes (1 GiB) [rec: a
/// typical figure for PyTorch + NCCL on current GPUs].
pub const WORKSPACE_BYTES: f64 = GIB;

/// Allocator fragmentation as a fraction of the dynamic memory (activations and gathered parameters) [rec:
/// PyTorch's caching allocator typically loses 5–30 %; 10 % is the middle of what Megatron-LM users report].
pub const FRAGMENTATION: f64 = 0.10;

/// Bytes per parameter of (weights, gradients, optimizer states) before ZeRO partitioning. Mixed precision
/// (fp16/bf16/fp8): 16-bit weights and gradients, fp32 master weights and Adam's two moments = 2 + 2 + 12
/// (Rajbhandari et al., ZeRO §3.1; MODELS.md §1.6; fp8 training keeps 16-bit weights, Transformer Engine's fp8
/// copies are transient). fp32/tf32: 4 + 4 + 8 (no master copy).
pub fn state_bytes_per_param(p: Precision) -> (f64, f64, f64) {
    match p {
        Precision::Fp32 | Precision::Tf32 | Precision::Fp64 => (4.0, 4.0, 8.0),
        _ => (2.0, 2.0, 12.0),
    }
}

/// Activation bytes one layer stores for one micro-batch on one GPU (Korthikanti et al. 2022, §4, Table 2),
/// generalized to GQA, the MLP width, SwiGLU, dropout, FlashAttention and context parallelism.
///
/// Korthikanti's 16-bit count per layer (with dropout) is s·b·h·(34 + 5·a·s/h) bytes: attention 11·sbh (QKV input
/// 2, Q and K 4, V 2, output-projection input 2, dropout mask 1) + 5·a·s²·b (softmax output 2, its dropout mask 1,
/// dropout output 2), MLP 19·sbh (input 2, activation input 8, activation output 8, dropout mask 1), norms 4·sbh.
/// Of the 34, 10 (norm inputs 4, QKV and MLP inputs 4, dropout masks 2) are replicated over tensor-parallel ranks
/// and D = 24 is split; sequence parallelism splits the 10 as well. Generalized: D = 4 + 4·kv/h (Q, output input,
/// K, V) + 4·f/h (GeLU's input and output) or 6·f/h (SwiGLU's gate/up input 2·2f and output 2f). Without dropout
/// (`model.dropout` = 0) the masks and the dropout output are not stored: 10 → 8 and 5·a·s/h → 2·a·s/h (the
/// softmax output feeds ·V). FlashAttention stores no s² term (it keeps only the output and the softmax
/// statistics). Context parallelism divides s by cp. Then, with r the replicated part and A the s² part:
/// - none: s·b·h·(r + D/t + A/t), with SP s·b·h/t·(r + D + A);
/// - selective (the s² term is recomputed): s·b·h·(r + D/t), with SP 34·s·b·h/t for GPT;
/// - full (only the layer input is kept): 2·s·b·h, with SP 2·s·b·h/t (Megatron stores the sequence-parallel
///   shard).
///
/// A head dim D ≠ h/a scales the attention terms: 4 → 4·a·D/h, 4·kv/a → 4·kv·D/h. MLA and MoE layers, and the
/// recompute modules beyond the core attention, are counted by [`crate::llm::moe::memory::layer_bytes`].
pub fn layer_activation_bytes(cfg: &TrainingConfig, recompute: Recompute) -> f64 {
    let m = &cfg.model;
    let modules = crate::llm::moe::recompute::modules(cfg, recompute);
    let beyond_core = modules.iter().any(|r| *r != crate::llm::moe::RecomputeModule::CoreAttn);
    if m.mla.is_some() || beyond_core {
        return crate::llm::moe::memory::layer_bytes(cfg, false, recompute);
    }
    let (s, b, h, a) = (m.seq_len as f64 / cfg.cp as f64, cfg.micro_batch as f64, m.hidden as f64, m.heads as f64);
    let t = cfg.tp as f64;
    let sp = cfg.sp();
    let sbh = s * b * h;
    let dh = cfg.head_dim as f64;
    let (qo, kvo) = (a * dh / h, cfg.kv_heads as f64 * dh / h);
    let f = cfg.ffn_hidden as f64 / h;
    let act = if m.activation == Activation::Swiglu { 6.0 * f } else { 4.0 * f };
    let split = 4.0 * qo + 4.0 * kvo + act;
    let dropout = m.dropout > 0.0;
    let replicated = if dropout { 10.0 } else { 8.0 };
    let scores = match (m.attention, dropout) {
        (Attention::Flash, _) => 0.0,
        (_, true) => 5.0 * a * s / h,
        (_, false) => 2.0 * a * s / h,
    };
    let core = modules.contains(&crate::llm::moe::RecomputeModule::CoreAttn);
    match recompute {
        Recompute::Full => 2.0 * sbh / if sp { t } else { 1.0 },
        Recompute::Selective if !core && sp => sbh / t * (replicated + split + scores),
        Recompute::Selective if !core => sbh * (replicated + split / t + scores / t),
        Recompute::Selective if sp => sbh / t * (replicated + split),
        Recompute::Selective => sbh * (replicated + split / t),
        Recompute::None if sp => sbh / t * (replicated + split + scores),
        Recompute::None => sbh * (replicated + split / t + scores / t),
    }
}

/// Micro-batch chunks whose activations stage `s` holds at the peak of the schedule: min(m, pp − s) for 1F1B
/// (its warm-up forwards plus one), and 2·(pp − s − 1) + (v − 1)·pp + 1 chunks of layers/(pp·v) layers with
/// interleaving (Megatron-LM's warm-up), at most m·v. For the first stage this is Korthikanti et al.'s pp
/// micro-batches, times (1 + (pp − 1)/(pp·v)) with interleaving (MODELS.md §1.6).
pub fn chunks_in_flight(pp: u32, v: u32, m: u32, s: u32) -> u32 {
    if v <= 1 {
        m.min(pp - s)
    } else if m == pp {
        m * v
    } else {
        (2 * (pp - s - 1) + (v - 1) * pp + 1).min(m * v)
    }
}

/// One GPU's memory, GiB (2³⁰ bytes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct MemoryBreakdown {
    /// The pipeline stage this is (the one that needs the most).
    pub stage: u32,
    /// 16-bit (or fp32) weights after ZeRO-3 partitioning, GiB.
    pub weights_gib: f64,
    /// Gradients after ZeRO-2 partitioning, GiB.
    pub gradients_gib: f64,
    /// fp32 master weights and Adam moments after ZeRO-1 / distributed-optimizer partitioning, GiB.
    pub optimizer_gib: f64,
    /// Activations of the micro-batches in flight (Korthikanti et al.), the recomputation working set and, on
    /// the first and last stage, the embedding and output layers, GiB.
    pub activations_gib: f64,
    /// CUDA context and workspaces (1 GiB) plus 10 % of the dynamic memory for fragmentation, GiB.
    pub allowance_gib: f64,
    /// Sum, GiB.
    pub total_gib: f64,
    /// The GPU's memory, GiB.
    pub capacity_gib: f64,
    /// total ≤ capacity.
    pub fits: bool,
    /// Micro-batches (model chunks with interleaving) whose activations the stage holds at its peak.
    pub in_flight: u32,
}

/// What one stage holds: its parameters (per GPU, before ZeRO), its layers and place, and the shape facts the
/// activation formulas need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageMemoryInput {
    pub stage: u32,
    /// Parameters on one GPU of the stage before ZeRO partitioning.
    pub params: f64,
    /// Transformer layers on the stage (all chunks).
    pub layers: u32,
    /// Of those, MoE layers.
    pub moe_layers: u32,
    /// Routed-expert parameters on one GPU of the stage (ZeRO-sharded over the expert-data-parallel group).
    pub expert_params: f64,
    /// Parameters of one layer on one GPU (for ZeRO-3's gathered working set).
    pub layer_params: f64,
    pub first: bool,
    pub last: bool,
    /// Padded vocabulary.
    pub v_padded: u64,
}

/// Per-micro-batch activation facts of one configuration, computed once: per-layer bytes for the chosen
/// recomputation and the recomputation working set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivationFacts {
    /// Bytes one layer keeps per micro-batch.
    pub per_layer: f64,
    /// Bytes one MoE layer keeps per micro-batch ([`crate::llm::moe::memory`]; 0 for a dense model).
    pub per_moe_layer: f64,
    /// Bytes alive while one layer is recomputed and back-propagated (the stored activations of one layer without
    /// recomputation, or of its core attention with selective recompute).
    pub working: f64,
}

impl ActivationFacts {
    /// The facts of `cfg`.
    pub fn of(cfg: &TrainingConfig) -> ActivationFacts {
        let none = layer_activation_bytes(cfg, Recompute::None);
        let mut working = match cfg.recompute {
            Recompute::None => 0.0,
            Recompute::Selective => none - layer_activation_bytes(cfg, Recompute::Selective),
            Recompute::Full => none,
        };
        let per_moe_layer = if cfg.moe.is_some() {
            let moe = |r| crate::llm::moe::memory::layer_bytes(cfg, true, r);
            let kept = moe(cfg.recompute);
            if cfg.recompute != Recompute::None {
                working = working.max(moe(Recompute::None) - kept);
            }
            kept
        } else {
            0.0
        };
        ActivationFacts { per_layer: layer_activation_bytes(cfg, cfg.recompute), per_moe_layer, working }
    }
}

/// The memory of one GPU of a stage.
pub fn stage_memory(
    cfg: &TrainingConfig,
    facts: &ActivationFacts,
    st: &StageMemoryInput,
    capacity_bytes: f64,
) -> MemoryBreakdown {
    let (w, g, o) = state_bytes_per_param(cfg.precision);
    let n = cfg.grad_ranks().max(1) as f64;
    let zero = cfg.zero_stage;
    let shard_opt = zero >= 1 || cfg.distributed_optimizer;
    let edp = cfg.moe.as_ref().map_or(1, |m| m.edp).max(1) as f64;
    let weights = st.params * w / if zero >= 3 { n } else { 1.0 } + st.expert_params * w;
    let grads = st.params * g / if zero >= 2 { n } else { 1.0 } + st.expert_params * g;
    let optimizer =
        st.params * o / if shard_opt { n } else { 1.0 } + st.expert_params * o / if shard_opt { edp } else { 1.0 };
    let (pp, v) = (cfg.pp, cfg.virtual_stages.max(1));
    let in_flight = chunks_in_flight(pp, v, cfg.grad_accum, st.stage);
    let moe_layers = st.moe_layers.min(st.layers) as f64;
    let per_chunk = ((st.layers as f64 - moe_layers) * facts.per_layer + moe_layers * facts.per_moe_layer) / v as f64;
    let mut act = in_flight as f64 * per_chunk + facts.working;
    let mtp = cfg.stage_mtp_layers(st.stage);
    if mtp > 0 {
        // The MTP layers run on the last chunk (or the chunk the custom pipeline layout names): one layer's
        // activations each (an MoE one when the last layer is).
        let per = if crate::llm::moe::params::last_layer_is_moe(cfg) { facts.per_moe_layer } else { facts.per_layer };
        act += mtp as f64 * per;
    }
    act += crate::llm::moe::memory::dispatch_buffer_bytes(cfg);
    let m = &cfg.model;
    let (s, b, h) = (m.seq_len as f64 / cfg.cp as f64, cfg.micro_batch as f64, m.hidden as f64);
    let t = cfg.tp as f64;
    if st.first && m.dropout > 0.0 {
        // Korthikanti §4.3: the embedding dropout mask, s·b·h per micro-batch in flight (/t with SP).
        act += in_flight as f64 * s * b * h / if cfg.sp() { t } else { 1.0 };
    }
    if st.last {
        // Korthikanti §4.3: output layer norm, projection input and fp32 logits, 4·s·b·h/t·(1 + v/h).
        act += 4.0 * s * b * h / t * (1.0 + st.v_padded as f64 / h);
    }
    // ZeRO-3 gathers a layer's full parameters (and prefetches the next one).
    let gathered = if zero >= 3 { 2.0 * st.layer_params * w } else { 0.0 };
    let allowance = WORKSPACE_BYTES + FRAGMENTATION * (act + gathered);
    let total = weights + grads + optimizer + act + gathered + allowance;
    MemoryBreakdown {
        stage: st.stage,
        weights_gib: (weights + gathered) / GIB,
        gradients_gib: grads / GIB,
        optimizer_gib: optimizer / GIB,
        activations_gib: act / GIB,
        allowance_gib: allowance / GIB,
        total_gib: total / GIB,
        capacity_gib: capacity_bytes / GIB,
        fits: total <= capacity_bytes,
        in_flight,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::validate;

    fn gpt3(par: serde_json::Value, attention: &str) -> TrainingConfig {
        let m = serde_json::from_value(serde_json::json!({"layers": 96, "hidden": 12288, "heads": 96,
            "seq_len": 2048, "vocab": 51200, "attention": attention, "dropout": 0.1}))
        .unwrap();
        validate(&m, &serde_json::from_value(par).unwrap(), Precision::Fp16, 4096).unwrap()
    }

    #[test]
    fn korthikanti_activation_formulas_by_hand() {
        // GPT-3 175B layer, s = 2048, b = 1, h = 12288, a = 96: s·b·h = 25,165,824; 5·a·s/h = 5·96·2048/12288 = 80.
        let sbh = 25_165_824.0;
        // No parallelism: sbh·(34 + 80) = 2,868,903,936 bytes.
        let c = gpt3(serde_json::json!({}), "fused_softmax");
        assert_eq!(layer_activation_bytes(&c, Recompute::None), 2_868_903_936.0);
        assert_eq!(sbh * 114.0, 2_868_903_936.0);
        // TP 8: sbh·(10 + 24/8 + 80/8) = sbh·23 = 578,813,952.
        let c = gpt3(serde_json::json!({"tp": 8}), "fused_softmax");
        assert_eq!(layer_activation_bytes(&c, Recompute::None), 578_813_952.0);
        // TP 8 + selective recompute (no SP): sbh·(10 + 3) = 327,155,712.
        assert_eq!(layer_activation_bytes(&c, Recompute::Selective), 327_155_712.0);
        // Full recompute: 2·sbh = 50,331,648.
        assert_eq!(layer_activation_bytes(&c, Recompute::Full), 50_331_648.0);
        // TP 8 + SP: sbh/8·114 = 358,612,992; + selective: 34·sbh/8 = 106,954,752; full 2·sbh/8 = 6,291,456.
        let c = gpt3(serde_json::json!({"tp": 8, "sequence_parallel": true}), "fused_softmax");
        assert_eq!(layer_activation_bytes(&c, Recompute::None), 358_612_992.0);
        assert_eq!(layer_activation_bytes(&c, Recompute::Selective), 106_954_752.0);
        assert_eq!(layer_activation_bytes(&c, Recompute::Full), 6_291_456.0);
        // FlashAttention drops the s² term: TP 8 + SP without recompute = 34·sbh/8, as selective.
        let c = gpt3(serde_json::json!({"tp": 8, "sequence_parallel": true}), "flash");
        assert_eq!(layer_activation_bytes(&c, Recompute::None), 106_954_752.0);
        // Without dropout no masks: TP 8 = sbh·(8 + 3 + 2·96·2048/(12288·8)) = sbh·(8 + 3 + 4) = 377,487,360.
        let mut c = gpt3(serde_json::json!({"tp": 8}), "fused_softmax");
        c.model.dropout = 0.0;
        assert_eq!(layer_activation_bytes(&c, Recompute::None), 377_487_360.0);
        assert_eq!(sbh * 15.0, 377_487_360.0);
    }

    #[test]
    fn sequence_parallelism_and_recompute_lower_activation_memory() {
        let tp = gpt3(serde_json::json!({"tp": 8}), "fused_softmax");
        let sp = gpt3(serde_json::json!({"tp": 8, "sequence_parallel": true}), "fused_softmax");
        for r in Recompute::ALL {
            assert!(layer_activation_bytes(&sp, r) < layer_activation_bytes(&tp, r), "{r:?}");
        }
        assert!(layer_activation_bytes(&tp, Recompute::Full) < layer_activation_bytes(&tp, Recompute::Selective));
        assert!(layer_activation_bytes(&tp, Recompute::Selective) < layer_activation_bytes(&tp, Recompute::None));
    }

    #[test]
    fn in_flight_micro_batches_by_schedule() {
        // 1F1B, pp 4, m 8: stage 0 holds 4, stage 3 holds 1; m 2 caps it.
        assert_eq!(
            (chunks_in_flight(4, 1, 8, 0), chunks_in_flight(4, 1, 8, 3), chunks_in_flight(4, 1, 2, 0)),
            (4, 1, 2)
        );
        // Interleaved pp 4, v 2, m 8: stage 0 warm-up 2·3 + 4 = 10 chunks + 1 = 11 chunks of half a stage:
        // 5.5 stage-micro-batches = pp·(1 + (pp − 1)/(pp·v)) = 4·(1 + 3/8) = 5.5 (MODELS.md §1.6).
        assert_eq!(chunks_in_flight(4, 2, 8, 0), 11);
        assert_eq!(11.0 / 2.0, 4.0 * (1.0 + 3.0 / 8.0));
    }

    #[test]
    fn zero_stages_partition_model_states_by_hand() {
        // 1e9 parameters on the stage, dp 8, mixed precision: weights 2 GB, gradients 2 GB, optimizer 12 GB.
        let st = StageMemoryInput {
            stage: 1,
            params: 1e9,
            layers: 0,
            moe_layers: 0,
            expert_params: 0.0,
            layer_params: 1e8,
            first: false,
            last: false,
            v_padded: 0,
        };
        let states = |zero: u32| {
            let c = gpt3(serde_json::json!({"dp": 8, "zero_stage": zero, "pp": 2}), "fused_softmax");
            let m = stage_memory(&c, &ActivationFacts::of(&c), &st, 80.0 * GIB);
            (m.weights_gib * GIB, m.gradients_gib * GIB, m.optimizer_gib * GIB)
        };
        assert_eq!(states(0), (2e9, 2e9, 12e9));
        assert_eq!(states(1), (2e9, 2e9, 1.5e9));
        assert_eq!(states(2), (2e9, 0.25e9, 1.5e9));
        // ZeRO-3: weights / 8 plus two gathered layers (2 · 1e8 · 2 bytes).
        assert_eq!(states(3), (0.25e9 + 4e8, 0.25e9, 1.5e9));
    }
}

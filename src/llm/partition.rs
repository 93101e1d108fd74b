//! Pipeline partition of the encoders over pp stages (S1 eq. 3–5, corrected so the stages sum to E), and
//! Megatron-Core's split into pp · virtual_stages model chunks, even or uneven.

use serde::Serialize;
use utoipa::ToSchema;

use super::config::{bad, ConfigError, LayerSplit, MegatronSplit, TrainingConfig};

/// A stage's place in the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum StageRole {
    /// Holds the embedding (pp > 1).
    First,
    /// Encoders only.
    Middle,
    /// Holds the final norm, LM head and loss (pp > 1).
    Last,
    /// pp = 1: everything.
    Only,
}

impl StageRole {
    /// The role of stage `s` of `pp`.
    pub fn of(s: u32, pp: u32) -> StageRole {
        match (s, pp) {
            (_, 1) => StageRole::Only,
            (0, _) => StageRole::First,
            (s, pp) if s + 1 == pp => StageRole::Last,
            _ => StageRole::Middle,
        }
    }
}

/// Blocks before the encoders (EmbeddingPipe, pre-transformer) and after them (post-transformer, NormPipe,
/// ParallelLinearPipe) in GPT-NeoX's pipeline module list.
pub const BLOCKS_BEFORE: u32 = 2;
/// See [`BLOCKS_BEFORE`].
pub const BLOCKS_AFTER: u32 = 3;

/// Encoders on each of `pp` stages for `e` encoders.
///
/// Rule (S1 eq. 3–5 as DeepSpeed's uniform partition applies it): the E + 5 blocks are laid out in order and
/// every stage takes up to u = ⌈(E + 5)/pp⌉ of them, the last stage the remainder. This gives S1's first stage
/// u − 2 and middle stages u; S1's printed last-stage count u − 3 is replaced by the remainder, so the stages
/// always sum to E (S1's formulas give 47 for E = 44, pp = 4). When the capacity rule would leave a stage with no
/// block at all (tiny E with large pp), stages take ⌊s·(E + 5)/pp⌋-aligned balanced ranges instead.
///
/// Requires 1 ≤ pp ≤ e (validated upstream); returns a vector of length pp summing to e.
pub fn partition(e: u32, pp: u32) -> Vec<u32> {
    let pp = pp.max(1);
    let blocks = e + BLOCKS_BEFORE + BLOCKS_AFTER;
    let u = blocks.div_ceil(pp);
    let capacity_bounds: Vec<u32> = (0..=pp).map(|s| (s * u).min(blocks)).collect();
    let bounds = if capacity_bounds.windows(2).all(|w| w[1] > w[0]) {
        capacity_bounds
    } else {
        (0..=pp).map(|s| ((s as u64 * blocks as u64) / pp as u64) as u32).collect()
    };
    // Encoders occupy blocks [BLOCKS_BEFORE, BLOCKS_BEFORE + e).
    let (enc_lo, enc_hi) = (BLOCKS_BEFORE, BLOCKS_BEFORE + e);
    bounds.windows(2).map(|w| w[1].min(enc_hi).saturating_sub(w[0].max(enc_lo))).collect()
}

/// Layers of every model chunk, indexed `stage · v + chunk` (v = virtual stages, chunk c of stage s is virtual
/// stage c·pp + s in Narayanan et al.'s interleaved order): S1's [`partition`] for `LayerSplit::S1` (v = 1), or
/// Megatron-Core's [`megatron_split`] for `LayerSplit::Uniform` (validated upstream; a configuration validation
/// would refuse gets the layers spread as evenly as possible instead of a panic), or the request's custom pipeline
/// layout's `t` per chunk when it gives one ([`crate::llm::pipeline_layout`]; `get_num_layers_to_build` reads the
/// layout first).
pub fn chunk_layers(cfg: &TrainingConfig) -> Vec<u32> {
    let mut out = Vec::new();
    fill_chunk_layers(cfg, &mut out);
    out
}

/// [`chunk_layers`] into `out` (cleared first; the search reuses the buffer).
pub fn fill_chunk_layers(cfg: &TrainingConfig, out: &mut Vec<u32>) {
    out.clear();
    let (layers, pp, v) = (cfg.model.layers, cfg.pp.max(1), cfg.virtual_stages.max(1));
    if let Some(layout) = &cfg.pipeline_layout {
        out.extend(layout.chunks.iter().map(|c| c.layers));
        return;
    }
    match cfg.layer_split {
        LayerSplit::S1 => out.extend(partition(layers, pp)),
        LayerSplit::Uniform => match megatron_split(layers, pp, v, &cfg.split) {
            Ok(split) => out.extend(split),
            Err(_) => {
                let chunks = pp * v;
                out.extend((0..chunks).map(|i| (i + 1) * layers / chunks - i * layers / chunks));
            }
        },
    }
}

/// Megatron-Core's layers per model chunk, indexed `stage · v + chunk`, as `transformer_block.py`
/// `get_num_layers_to_build(config, vp_stage)` builds them on every pipeline rank:
///
/// - **uneven first / last stage** (`num_layers_in_first_pipeline_stage`, `…_last_…`): those stages hold the
///   given layers, the other stages share the rest evenly; every stage's layers are split evenly over its v
///   chunks.
/// - **otherwise** the split counts L = layers (+ 1 with `account_for_embedding_in_pipeline_split`, + 1 with
///   `account_for_loss_in_pipeline_split`) slots, L/(pp·v) per chunk; the first chunk of the first stage then
///   builds one transformer layer fewer when the embedding is counted, the last chunk of the last stage one fewer
///   when the loss is (e.g. Llama 3.1 405B: 126 + 2 = 128 slots over pp 8 · v 8 = 2 per chunk, the two end
///   chunks 1 layer each).
///
/// Errors, each an assertion of `get_num_layers_to_build` or Megatron-LM `arguments.py` (fields named as in the
/// request): the uneven options with the `account_for_*` options ("does not support standalone embedding stage
/// and standalone loss stage with uneven pp") or with pp = 1; first + last above the layers, or with no middle
/// stage not equal to them; the middle layers not divisible by the middle stages; a stage's layers not
/// divisible by v; the slots L not divisible by pp·v; a chunk with no slot at all.
pub fn megatron_split(layers: u32, pp: u32, v: u32, split: &MegatronSplit) -> Result<Vec<u32>, ConfigError> {
    let (pp, v) = (pp.max(1), v.max(1));
    let uneven = split.first.is_some() || split.last.is_some();
    if uneven {
        if split.embedding || split.loss {
            let field = if split.embedding {
                "parallelism.account_for_embedding_in_pipeline_split"
            } else {
                "parallelism.account_for_loss_in_pipeline_split"
            };
            return Err(bad(
                field,
                "Megatron-Core does not count the embedding or the loss as layers together with \
                 num_layers_in_first/last_pipeline_stage: give one or the other",
            ));
        }
        let first_field = if split.first.is_some() {
            "parallelism.num_layers_in_first_pipeline_stage"
        } else {
            "parallelism.num_layers_in_last_pipeline_stage"
        };
        if pp < 2 {
            return Err(bad(first_field, "an uneven first or last pipeline stage needs pp ≥ 2"));
        }
        let fixed = split.first.unwrap_or(0) as u64 + split.last.unwrap_or(0) as u64;
        let middle_stages = pp - split.first.is_some() as u32 - split.last.is_some() as u32;
        if fixed > layers as u64 || (middle_stages == 0 && fixed != layers as u64) {
            return Err(bad(
                first_field,
                format!(
                    "the first and last stages' layers ({fixed}) must {} the model's {layers} layers",
                    if middle_stages == 0 { "equal (no middle stage with pp 2)" } else { "not exceed" }
                ),
            ));
        }
        let rest = layers - fixed as u32;
        if middle_stages > 0 && rest % middle_stages != 0 {
            return Err(bad(
                first_field,
                format!(
                    "the {rest} layers left for the {middle_stages} middle stages do not divide evenly \
                     (Megatron-Core: \"the left over layers must be divisible by left over stages\")"
                ),
            ));
        }
        let middle = if middle_stages > 0 { rest / middle_stages } else { 0 };
        let mut out = Vec::with_capacity((pp * v) as usize);
        for s in 0..pp {
            let n = match (s, split.first, split.last) {
                (0, Some(f), _) => f,
                (s, _, Some(l)) if s + 1 == pp => l,
                _ => middle,
            };
            if n % v != 0 {
                return Err(bad(
                    "parallelism.virtual_stages",
                    format!("stage {s}'s {n} layers are not divisible by virtual_stages {v}"),
                ));
            }
            out.extend(std::iter::repeat_n(n / v, v as usize));
        }
        return Ok(out);
    }
    let slots = layers + split.embedding as u32 + split.loss as u32;
    let chunks = pp * v;
    if slots % chunks != 0 || slots < chunks {
        let counted = match (split.embedding, split.loss) {
            (false, false) => format!("layers {layers}"),
            (true, false) => format!("layers {layers} + 1 (embedding) = {slots}"),
            (false, true) => format!("layers {layers} + 1 (loss) = {slots}"),
            (true, true) => format!("layers {layers} + 2 (embedding and loss) = {slots}"),
        };
        let (field, what) = if v > 1 {
            ("parallelism.virtual_stages", "pp·virtual_stages")
        } else {
            ("parallelism.layer_split", "pp")
        };
        return Err(bad(
            field,
            format!(
                "{counted} are not divisible by {what} = {chunks}; Megatron-Core can count the embedding and the \
                 loss as layers (account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split) \
                 or give the first and last stages other layer counts (num_layers_in_first_pipeline_stage, \
                 num_layers_in_last_pipeline_stage)"
            ),
        ));
    }
    let mut out = vec![slots / chunks; chunks as usize];
    if split.embedding {
        out[0] -= 1;
    }
    if split.loss {
        out[(chunks - 1) as usize] -= 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s1_examples_by_hand() {
        // E = 44, pp = 4: u = ⌈49/4⌉ = 13 → blocks 0–12 | 13–25 | 26–38 | 39–48; encoders are blocks 2–45:
        // 11, 13, 13, 7.
        assert_eq!(partition(44, 4), vec![11, 13, 13, 7]);
        // E = 44, pp = 8: u = ⌈49/8⌉ = 7 fills 7 stages with 49 blocks and leaves the 8th empty, so the balanced
        // rule applies: bounds ⌊s·49/8⌋ = 0,6,12,18,24,30,36,42,49 → encoders (blocks 2–45) 4,6,6,6,6,6,6,4.
        assert_eq!(partition(44, 8), vec![4, 6, 6, 6, 6, 6, 6, 4]);
        // E = 40, pp = 4: u = ⌈45/4⌉ = 12 → 10, 12, 12, 6.
        assert_eq!(partition(40, 4), vec![10, 12, 12, 6]);
        // E = 32, pp = 4: u = ⌈37/4⌉ = 10 → 8, 10, 10, 4.
        assert_eq!(partition(32, 4), vec![8, 10, 10, 4]);
        assert_eq!(partition(7, 1), vec![7]);
    }

    #[test]
    fn stages_always_sum_to_e_and_no_stage_is_empty_of_blocks() {
        for e in 1..=160u32 {
            for pp in 1..=e.min(64) {
                let parts = partition(e, pp);
                assert_eq!(parts.len(), pp as usize);
                assert_eq!(parts.iter().sum::<u32>(), e, "E={e} pp={pp}: {parts:?}");
            }
        }
        // Capacity rule would empty the last stage (E = 4, pp = 4: u = 3 → 3·3 = 9 blocks fill three stages):
        // balanced bounds 0,2,4,6,9 → encoders 0, 2, 2, 0.
        assert_eq!(partition(4, 4), vec![0, 2, 2, 0]);
    }

    #[test]
    fn uniform_chunks_for_megatron() {
        let m = serde_json::from_value(serde_json::json!({"layers": 126, "hidden": 16384, "heads": 128,
            "seq_len": 8192, "vocab": 128256}))
        .unwrap();
        let p = serde_json::from_value(serde_json::json!({"pp": 9, "virtual_stages": 7, "grad_accum": 63})).unwrap();
        let c = crate::llm::validate(&m, &p, crate::hw::Precision::Bf16, 1024).unwrap();
        // Llama 3.1 405B on DGX Cloud: 126 layers over 9 stages × 7 chunks = 2 layers per chunk.
        assert_eq!(chunk_layers(&c), vec![2; 63]);
    }

    fn llama405b(par: serde_json::Value) -> Result<TrainingConfig, ConfigError> {
        let m = serde_json::from_value(serde_json::json!({"layers": 126, "hidden": 16384, "heads": 128,
            "kv_heads": 8, "ffn_hidden": 53248, "seq_len": 8192, "vocab": 128256, "attention": "flash"}))
        .unwrap();
        crate::llm::validate(&m, &serde_json::from_value(par).unwrap(), crate::hw::Precision::Bf16, 1024)
    }

    #[test]
    fn llama_405b_reference_split_counts_embedding_and_loss_as_layers() {
        // The 405B reference configuration: tp 8 · pp 8 · vp 8 · cp 2 on 1024 GPUs (dp 8), 126 layers. Without the
        // options 126 over pp·v = 64 chunks is refused, as Megatron-Core refuses it.
        let base = serde_json::json!({"tp": 8, "pp": 8, "dp": 8, "context_parallel": 2, "virtual_stages": 8,
            "global_batch": 1536, "sequence_parallel": true});
        let e = llama405b(base.clone()).unwrap_err();
        assert_eq!(e.field, "parallelism.virtual_stages");
        assert!(e.message.contains("account_for_embedding_in_pipeline_split"), "{}", e.message);
        // With both counted: 126 + 2 = 128 slots, 128 / 8 = 16 per stage, 16 / 8 = 2 per chunk. The embedding
        // takes one slot of chunk 0 of stage 0 (index 0), the loss one of the last chunk of the last stage
        // (index 7·8 + 7 = 63): those two chunks build 1 layer, the other 62 build 2 → 1 + 62·2 + 1 = 126.
        let mut p = base;
        p["account_for_embedding_in_pipeline_split"] = true.into();
        p["account_for_loss_in_pipeline_split"] = true.into();
        let c = llama405b(p).unwrap();
        assert_eq!(c.layer_split, LayerSplit::Uniform);
        let layers = chunk_layers(&c);
        let mut want = vec![2u32; 64];
        want[0] = 1;
        want[63] = 1;
        assert_eq!(layers, want);
        // Stage 0 holds 1 + 7·2 = 15 layers, stages 1–6 16 each, stage 7 15: 15 + 6·16 + 15 = 126.
        let per_stage: Vec<u32> = layers.chunks(8).map(|c| c.iter().sum()).collect();
        assert_eq!(per_stage, vec![15, 16, 16, 16, 16, 16, 16, 15]);
    }

    #[test]
    fn megatron_uneven_first_and_last_stages() {
        let even = MegatronSplit::default();
        // 8 layers, pp 2, v 2: Megatron's docstring example, [0,1] [4,5] | [2,3] [6,7] → 2 per chunk.
        assert_eq!(megatron_split(8, 2, 2, &even).unwrap(), vec![2, 2, 2, 2]);
        // DeepSeek-V3-style 61 layers over pp 16 with first 3 and last 2 stages' counts: 61 − 5 = 56 layers over
        // 14 middle stages = 4 each.
        let s = MegatronSplit { first: Some(3), last: Some(2), ..even };
        let mut want = vec![3];
        want.extend([4; 14]);
        want.push(2);
        assert_eq!(megatron_split(61, 16, 1, &s).unwrap(), want);
        // Only the last stage given: 94 layers, pp 8, last 10 → 84 over 7 stages = 12; with v 2: 6 and 5 per chunk.
        let s = MegatronSplit { last: Some(10), ..even };
        let mut want = vec![6; 14];
        want.extend([5, 5]);
        assert_eq!(megatron_split(94, 8, 2, &s).unwrap(), want);
        // pp 2 with both given: they must sum to the layers.
        let s = MegatronSplit { first: Some(13), last: Some(14), ..even };
        assert_eq!(megatron_split(27, 2, 1, &s).unwrap(), vec![13, 14]);
        assert_eq!(megatron_split(28, 2, 1, &s).unwrap_err().field, "parallelism.num_layers_in_first_pipeline_stage");
        // 61 − 3 = 58 over 15 middle stages does not divide.
        let s = MegatronSplit { first: Some(3), ..even };
        assert_eq!(megatron_split(61, 16, 1, &s).unwrap_err().field, "parallelism.num_layers_in_first_pipeline_stage");
        // The first stage's 3 layers over v 2 chunks.
        assert_eq!(megatron_split(63, 4, 2, &s).unwrap_err().field, "parallelism.virtual_stages");
        // Not with the account_for options (Megatron-Core's assertion), not with pp 1.
        let s = MegatronSplit { first: Some(3), loss: true, ..even };
        assert_eq!(megatron_split(63, 4, 1, &s).unwrap_err().field, "parallelism.account_for_loss_in_pipeline_split");
        let s = MegatronSplit { last: Some(3), ..even };
        assert_eq!(megatron_split(63, 1, 1, &s).unwrap_err().field, "parallelism.num_layers_in_last_pipeline_stage");
        // Only the loss counted: 31 + 1 = 32 slots over pp 4 → 8, 8, 8, 7.
        let s = MegatronSplit { loss: true, ..even };
        assert_eq!(megatron_split(31, 4, 1, &s).unwrap(), vec![8, 8, 8, 7]);
        // Qwen3-235B: 94 + 2 = 96 slots over pp 8 · v 4 = 3 per chunk, the two end chunks 2.
        let s = MegatronSplit { embedding: true, loss: true, ..even };
        let got = megatron_split(94, 8, 4, &s).unwrap();
        assert_eq!((got.len(), got[0], got[1], got[31], got.iter().sum::<u32>()), (32, 2, 3, 2, 94));
        // A standalone embedding stage: 7 + 1 = 8 slots over pp 8 → stage 0 holds the embedding and no layer.
        let s = MegatronSplit { embedding: true, ..even };
        assert_eq!(megatron_split(7, 8, 1, &s).unwrap(), vec![0, 1, 1, 1, 1, 1, 1, 1]);
    }

    #[test]
    fn megatron_split_always_sums_to_the_layers() {
        for layers in 1..=130u32 {
            for pp in 1..=16u32 {
                for v in 1..=4u32 {
                    for (embedding, loss) in [(false, false), (true, false), (false, true), (true, true)] {
                        let s = MegatronSplit { embedding, loss, ..MegatronSplit::default() };
                        if let Ok(split) = megatron_split(layers, pp, v, &s) {
                            assert_eq!(split.len(), (pp * v) as usize);
                            assert_eq!(split.iter().sum::<u32>(), layers, "{layers} {pp} {v} {s:?}");
                        }
                    }
                }
            }
        }
    }
}

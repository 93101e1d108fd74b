//! Pipeline partition of the encoders over pp stages (S1 eq. 3–5, corrected so the stages sum to E), and
//! Megatron-LM's uniform split into pp · virtual_stages model chunks.

use serde::Serialize;
use utoipa::ToSchema;

use super::config::{LayerSplit, TrainingConfig};

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
/// layers/(pp·v) per chunk for `LayerSplit::Uniform` (Megatron-LM; divisibility is validated upstream).
pub fn chunk_layers(cfg: &TrainingConfig) -> Vec<u32> {
    match cfg.layer_split {
        LayerSplit::S1 => partition(cfg.model.layers, cfg.pp),
        LayerSplit::Uniform => {
            let chunks = cfg.pp * cfg.virtual_stages;
            vec![cfg.model.layers / chunks; chunks as usize]
        }
    }
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
}

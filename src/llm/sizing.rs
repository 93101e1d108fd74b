//! Model sizes: vocabulary padding (S1 eq. 1–2) and parameters per pipeline stage (S1 eq. 6, Table III).

use super::partition::StageRole;

/// Padded vocabulary (S1 eq. 1–2, Megatron's `_vocab_size_with_padding`): the vocabulary is padded to a multiple
/// of 128·mp so every tensor-parallel rank holds an equal, GEMM-friendly slice.
///
/// `v_padded = ceil(v / (128·mp)) · 128·mp`; e.g. v = 50257, mp = 4 → 50688.
pub fn padded_vocab(vocab: u64, mp: u64) -> u64 {
    let divisibility = 128 * mp.max(1);
    vocab.div_ceil(divisibility) * divisibility
}

/// Parameters of one encoder on one tensor-parallel rank (S1 eq. 6):
/// `4d + 8d(d+1)/mp + d(4d+1)/mp` (two norms' γ, β unsplit; attention and MLP weights and biases split over mp).
/// Computed in f64 because the /mp terms need not be integers for every (d, mp).
pub fn encoder_params(d: u64, mp: u64) -> f64 {
    let (d, mp) = (d as f64, mp.max(1) as f64);
    4.0 * d + 8.0 * d * (d + 1.0) / mp + d * (4.0 * d + 1.0) / mp
}

/// Parameters held by one GPU of a pipeline stage (S1 eq. 6): the first stage adds the vocabulary-parallel
/// embedding `v_padded·d/mp`; the last adds the final norm `2d` and the untied LM head `v_padded·d/mp`; a single
/// stage (pp = 1) has both.
pub fn stage_params(role: StageRole, encoders: u64, d: u64, v_padded: u64, mp: u64) -> f64 {
    let embedding = v_padded as f64 * d as f64 / mp.max(1) as f64;
    let body = encoders as f64 * encoder_params(d, mp);
    match role {
        StageRole::First => embedding + body,
        StageRole::Middle => body,
        StageRole::Last => body + 2.0 * d as f64 + embedding,
        StageRole::Only => embedding + body + 2.0 * d as f64 + embedding,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocab_padding_by_hand() {
        assert_eq!(padded_vocab(50257, 4), 50688); // 512 · 99
        assert_eq!(padded_vocab(50257, 1), 50304); // 128 · 393
        assert_eq!(padded_vocab(50257, 8), 51200); // 1024 · 50
        assert_eq!(padded_vocab(32000, 8), 32768); // 1024 · 32
        assert_eq!(padded_vocab(1024, 8), 1024);
    }

    #[test]
    fn gpt20b_stage_parameters_by_hand() {
        // d = 6144, mp = 4: 4·6144 = 24,576; 8·6144·6145/4 = 75,509,760; 6144·24,577/4 = 37,750,272.
        assert_eq!(encoder_params(6144, 4), 113_284_608.0);
        // Embedding slice 50,688·6144/4 = 77,856,768.
        // pp = 4 partition of 44 encoders is 11, 13, 13, 7 (see partition tests).
        assert_eq!(stage_params(StageRole::First, 11, 6144, 50688, 4), 77_856_768.0 + 11.0 * 113_284_608.0);
        assert_eq!(stage_params(StageRole::Middle, 13, 6144, 50688, 4), 1_472_699_904.0);
        assert_eq!(stage_params(StageRole::Last, 7, 6144, 50688, 4), 7.0 * 113_284_608.0 + 12_288.0 + 77_856_768.0);
    }
}

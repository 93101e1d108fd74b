//! The 1F1B pipeline timeline with data parallelism (S1 eq. 7).

use serde::Serialize;
use utoipa::ToSchema;

/// The four components of S1 eq. 7, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Eq7 {
    /// Largest per-micro-batch forward time over stages (MP all-reduces and the stage's P2P send included), s.
    pub max_fwd_s: f64,
    /// Largest per-micro-batch backward time over stages, s.
    pub max_bwd_s: f64,
    /// (m − 1 + pp) · (Max_Fwd + Max_Bwd), s.
    pub pipeline_s: f64,
    /// All-reduce of the first stage's gradients over dp (the other stages' are hidden behind it), s.
    pub first_stage_grad_sync_s: f64,
    /// max over stages of (optimizer + ZeRO all-gather of the stage's parameters), s.
    pub max_update_s: f64,
}

impl Eq7 {
    /// Runtime = (m − 1 + pp)·(Max_Fwd + Max_Bwd) + First_Stage_Gradient_Synchronization + Max_Update.
    pub fn iteration_s(&self) -> f64 {
        self.pipeline_s + self.first_stage_grad_sync_s + self.max_update_s
    }
}

/// Evaluates S1 eq. 7 from per-stage times (seconds): `fwd_s[s]`, `bwd_s[s]` per micro-batch, `update_s[s]` per
/// step; `m` micro-batches per step, `pp` = number of stages (= the slices' length).
///
/// Panics never; empty slices give zeros.
pub fn eq7(fwd_s: &[f64], bwd_s: &[f64], update_s: &[f64], first_stage_grad_sync_s: f64, m: u32) -> Eq7 {
    let max = |v: &[f64]| v.iter().copied().fold(0.0_f64, f64::max);
    let pp = fwd_s.len() as f64;
    let (max_fwd_s, max_bwd_s) = (max(fwd_s), max(bwd_s));
    Eq7 {
        max_fwd_s,
        max_bwd_s,
        pipeline_s: (m as f64 - 1.0 + pp) * (max_fwd_s + max_bwd_s),
        first_stage_grad_sync_s,
        max_update_s: max(update_s),
    }
}

/// 1F1B pipeline bubble fraction (pp − 1)/m (Narayanan et al. 2021).
pub fn bubble_fraction(pp: u32, m: u32) -> f64 {
    (pp as f64 - 1.0) / m.max(1) as f64
}

/// Interleaved 1F1B bubble fraction (pp − 1)/(m·v) with v model chunks per stage (Narayanan et al. 2021,
/// §2.2.2); v = 1 is [`bubble_fraction`].
pub fn interleaved_bubble_fraction(pp: u32, m: u32, v: u32) -> f64 {
    (pp as f64 - 1.0) / (m.max(1) as f64 * v.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq7_and_bubbles_by_hand() {
        // Stages (F, B) = (3, 6) and (2, 7) ms, m = 4: (4 − 1 + 2)·(3 + 7) = 50 ms, + 5 + max(1, 2) = 57 ms.
        let e = eq7(&[3.0, 2.0], &[6.0, 7.0], &[1.0, 2.0], 5.0, 4);
        assert_eq!((e.max_fwd_s, e.max_bwd_s, e.pipeline_s, e.iteration_s()), (3.0, 7.0, 50.0, 57.0));
        assert_eq!(bubble_fraction(4, 16), 0.1875);
        // Narayanan et al.: interleaving with v chunks divides the bubble by v.
        assert_eq!(interleaved_bubble_fraction(4, 16, 3), 0.0625);
        assert_eq!(interleaved_bubble_fraction(4, 16, 1), bubble_fraction(4, 16));
    }
}

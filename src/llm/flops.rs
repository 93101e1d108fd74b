//! Model FLOPs and utilization (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
//! Clusters Using Megatron-LM", eq. 3; MODELS.md §1.6).

/// Model FLOPs of one training iteration without activation recompute:
/// F = 72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h)) with B the global batch (sequences), s the sequence length, L
/// layers, h hidden, V vocabulary. (With full recompute the hardware does 96 instead of 72; MFU counts 72.)
pub fn model_flops(global_batch: u64, seq: u64, layers: u64, hidden: u64, vocab: u64) -> f64 {
    let (b, s, l, h, v) = (global_batch as f64, seq as f64, layers as f64, hidden as f64, vocab as f64);
    72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h))
}

/// Model FLOPs utilization: F / (t · GPUs · peak FLOP/s).
pub fn mfu(flops: f64, iteration_s: f64, gpus: u64, peak_flops: f64) -> f64 {
    flops / (iteration_s * gpus as f64 * peak_flops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt3_175b_by_hand() {
        // GPT-3 175B (L 96, h 12288, s 2048, V 51200), B = 1536:
        // 72·1536·2048·96·12288² = 3.2829e18 · (1 + 2048/73728 + 51200/14155776) = 1.031395 → 3.3860e18.
        let f = model_flops(1536, 2048, 96, 12288, 51200);
        let base = 72.0 * 1536.0 * 2048.0 * 96.0 * 12288.0_f64.powi(2);
        let expected = base * (1.0 + 2048.0 / 73728.0 + 51200.0 / (12.0 * 96.0 * 12288.0));
        assert!((f / expected - 1.0).abs() < 1e-12);
        assert!((f / 3.386e18 - 1.0).abs() < 1e-3, "{f:e}");
    }
}

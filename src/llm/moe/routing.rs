//! What routing does to the traffic and the load: the busiest expert-parallel rank's share of the routed tokens
//! under uniform (force-balanced) routing, and how many distinct GPUs and nodes one token's top-k experts live
//! on (what a deduplicating dispatcher, DeepEP or HybridEP, sends once each).

/// Routed token copies the busiest of `ep` expert-parallel ranks receives over the mean `mean_copies` (copies per
/// rank per micro-batch), when each token picks `top_k` distinct experts of `experts` uniformly at random — what
/// Megatron-Core's `moe_router_force_load_balancing` does (`router.py`: random logits replace the router's, then
/// the usual top-k) and the best a balanced router can do. A rank holds E/ep experts, so one token sends it a
/// hypergeometric number of copies (mean K/ep, variance K·(1/ep)·(1 − 1/ep)·(E − K)/(E − 1)); a rank's count over
/// all tokens of the group has mean μ = `mean_copies` and variance σ² = μ·(1 − 1/ep)·(E − K)/(E − 1), and the
/// largest of ep such counts is about μ + σ·√(2 ln ep) (the expected maximum of ep Gaussian variables, its
/// leading term). Returns 1 + σ·√(2 ln ep)/μ (1 for ep = 1 or no tokens).
///
/// Example: Qwen3-235B-A22B at ep 32, 2,048 tokens per rank, top-8 of 128: μ = 16,384, σ² = 16,384 · 31/32 ·
/// 120/127 = 14,998, σ = 122.5, √(2 ln 32) = 2.633 → 1.0197.
pub fn busiest_rank_factor(mean_copies: f64, ep: u32, experts: u32, top_k: u32) -> f64 {
    if ep <= 1 || mean_copies <= 0.0 || experts <= 1 {
        return 1.0;
    }
    let (p, e, k) = (ep as f64, experts as f64, top_k as f64);
    let var = mean_copies * (1.0 - 1.0 / p) * ((e - k) / (e - 1.0)).max(0.0);
    1.0 + var.sqrt() * (2.0 * p.ln()).sqrt() / mean_copies
}

/// The probability that none of `top_k` distinct items drawn uniformly from `n` falls in a given subset of `m`:
/// C(n − m, K)/C(n, K) = Π_{i<K} (n − m − i)/(n − i).
fn miss(n: f64, m: f64, top_k: u32) -> f64 {
    let mut p = 1.0;
    for i in 0..top_k {
        let i = i as f64;
        if n - m - i <= 0.0 {
            return 0.0;
        }
        p *= (n - m - i) / (n - i);
    }
    p
}

/// Expected number of distinct bins (GPUs, or nodes) one token's `top_k` experts live on, when the `experts` are
/// laid out in order over `bins` equal bins: bins·(1 − C(E − E/bins, K)/C(E, K)). With group-limited routing
/// (`groups` equal groups of consecutive experts, `group_top_k` chosen per token; Megatron-Core `router.py`
/// `group_limited_topk`) the token's experts lie in group_top_k groups: with bins of whole groups (groups a
/// multiple of bins) at most the bins those groups cover, bins·(1 − C(G − G/bins, g)/C(G, g)); with groups of
/// whole bins, the distinct bins of K experts among the g·E/G the chosen groups hold. The smaller of the two
/// counts is returned (each chosen group is assumed to receive at least one of the K experts).
///
/// Example: DeepSeek-V3's 256 experts, top-8, over 4 nodes (ep 32): 4·(1 − C(192, 8)/C(256, 8)) = 3.61 nodes;
/// node-limited to 4 of 8 groups (2 groups per node): 4·(1 − C(6, 4)/C(8, 4)) = 4·(1 − 15/70) = 3.14.
pub fn distinct_bins(experts: u32, top_k: u32, bins: u32, groups: u32, group_top_k: u32) -> f64 {
    if bins <= 1 {
        return 1.0;
    }
    let (e, b) = (experts as f64, bins as f64);
    let free = b * (1.0 - miss(e, e / b, top_k));
    if groups == 0 || group_top_k == 0 || group_top_k >= groups {
        return free;
    }
    let (g, gk) = (groups as f64, group_top_k as f64);
    let limited = if groups % bins == 0 {
        b * (1.0 - miss(g, g / b, group_top_k))
    } else if bins % groups == 0 {
        let pool = gk * e / g;
        gk * (b / g) * (1.0 - miss(pool, e / b, top_k))
    } else {
        free
    };
    free.min(limited)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busiest_rank_by_hand() {
        // Qwen3-235B-A22B, ep 32: μ = 2048·8 = 16,384; σ² = 16,384·(31/32)·(120/127) = 14,997.5; σ = 122.46;
        // √(2 ln 32) = √6.9315 = 2.6328 → 1 + 122.46·2.6328/16,384 = 1.01968.
        let g = busiest_rank_factor(16_384.0, 32, 128, 8);
        assert!((g - 1.01968).abs() < 1e-4, "{g}");
        assert_eq!(busiest_rank_factor(16_384.0, 1, 128, 8), 1.0);
        // Fewer tokens, larger fluctuation: a quarter of the tokens doubles the excess.
        let small = busiest_rank_factor(4_096.0, 32, 128, 8);
        assert!(((small - 1.0) / (g - 1.0) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn distinct_destinations_by_hand() {
        // 8 experts on 8 GPUs, top-2: 8·(1 − C(7,2)/C(8,2)) = 8·(1 − 21/28) = 2 (two distinct GPUs always).
        assert!((distinct_bins(8, 2, 8, 0, 0) - 2.0).abs() < 1e-12);
        // 8 experts on 2 GPUs, top-2: 2·(1 − C(4,2)/C(8,2)) = 2·(1 − 6/28) = 1.5714.
        assert!((distinct_bins(8, 2, 2, 0, 0) - 1.571_428_571).abs() < 1e-6);
        // DeepSeek-V3 over 4 nodes: C(192,8)/C(256,8) = Π (192−i)/(256−i) = 0.09645 → 3.6142; node-limited to 4
        // of 8 groups: 4·(1 − 15/70) = 3.1429.
        let free = distinct_bins(256, 8, 4, 0, 0);
        assert!((free - 3.6142).abs() < 1e-4, "{free}");
        assert!((distinct_bins(256, 8, 4, 8, 4) - 3.142_857).abs() < 1e-5);
        assert_eq!(distinct_bins(256, 8, 1, 8, 4), 1.0);
    }
}

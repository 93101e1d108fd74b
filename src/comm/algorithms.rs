//! Cost formulas of collective algorithms (Thakur, Rabenseifner & Gropp 2005; MODELS.md §3.2) and the
//! postal point-to-point model (MODELS.md §3.1).
//!
//! Conventions: times in µs, α in µs, bandwidths in GB/s (10⁹ B/s, so `bytes / (gbs · 1e3)` is µs), `n` the full
//! vector in bytes (for all-gather the gathered total, for reduce-scatter the input), `p` ranks. The reduction term
//! γ is omitted: GPUs reduce at HBM speed, far faster than any link.

/// µs to move `bytes` at `gbs` GB/s.
pub fn transfer_us(bytes: f64, gbs: f64) -> f64 {
    bytes / (gbs * 1e3)
}

/// Postal (Hockney) point-to-point time: α + n/β, µs.
pub fn postal_us(alpha_us: f64, bw_gbs: f64, bytes: f64) -> f64 {
    alpha_us + transfer_us(bytes, bw_gbs)
}

/// Ring all-reduce: 2(p−1)α + 2(p−1)/p · n/B.
pub fn ring_all_reduce_us(p: u32, bytes: f64, alpha_us: f64, bw_gbs: f64) -> f64 {
    if p <= 1 {
        return 0.0;
    }
    let p = p as f64;
    2.0 * (p - 1.0) * alpha_us + 2.0 * (p - 1.0) / p * transfer_us(bytes, bw_gbs)
}

/// Ring all-gather or reduce-scatter: (p−1)α + (p−1)/p · n/B.
pub fn ring_gather_us(p: u32, bytes: f64, alpha_us: f64, bw_gbs: f64) -> f64 {
    if p <= 1 {
        return 0.0;
    }
    let p = p as f64;
    (p - 1.0) * alpha_us + (p - 1.0) / p * transfer_us(bytes, bw_gbs)
}

/// ⌈lg p⌉.
pub fn ceil_log2(p: u32) -> f64 {
    (p.max(1) as f64).log2().ceil()
}

/// Recursive-doubling all-reduce (short messages): ⌈lg p⌉·(α + n/B).
pub fn recursive_doubling_all_reduce_us(p: u32, bytes: f64, alpha_us: f64, bw_gbs: f64) -> f64 {
    if p <= 1 {
        return 0.0;
    }
    ceil_log2(p) * (alpha_us + transfer_us(bytes, bw_gbs))
}

/// Rabenseifner all-reduce (reduce-scatter by recursive halving + all-gather by doubling):
/// 2⌈lg p⌉α + 2(p−1)/p · n/B.
pub fn rabenseifner_all_reduce_us(p: u32, bytes: f64, alpha_us: f64, bw_gbs: f64) -> f64 {
    if p <= 1 {
        return 0.0;
    }
    let pf = p as f64;
    2.0 * ceil_log2(p) * alpha_us + 2.0 * (pf - 1.0) / pf * transfer_us(bytes, bw_gbs)
}

/// Recursive-doubling (Bruck) all-gather: ⌈lg p⌉α + (p−1)/p · n/B.
pub fn recursive_doubling_all_gather_us(p: u32, bytes: f64, alpha_us: f64, bw_gbs: f64) -> f64 {
    if p <= 1 {
        return 0.0;
    }
    let pf = p as f64;
    ceil_log2(p) * alpha_us + (pf - 1.0) / pf * transfer_us(bytes, bw_gbs)
}

/// Binomial-tree broadcast or reduce: ⌈lg p⌉·(α + n/B).
pub fn binomial_tree_us(p: u32, bytes: f64, alpha_us: f64, bw_gbs: f64) -> f64 {
    if p <= 1 {
        return 0.0;
    }
    ceil_log2(p) * (alpha_us + transfer_us(bytes, bw_gbs))
}

/// Scatter + ring all-gather broadcast (long messages, van de Geijn): (lg p + p − 1)α + 2(p−1)/p · n/B.
pub fn scatter_allgather_broadcast_us(p: u32, bytes: f64, alpha_us: f64, bw_gbs: f64) -> f64 {
    if p <= 1 {
        return 0.0;
    }
    let pf = p as f64;
    (ceil_log2(p) + pf - 1.0) * alpha_us + 2.0 * (pf - 1.0) / pf * transfer_us(bytes, bw_gbs)
}

/// Pairwise-exchange all-to-all of `bytes` per rank (its whole send buffer): (p−1)α + (p−1)/p · n/B.
pub fn pairwise_all_to_all_us(p: u32, bytes: f64, alpha_us: f64, bw_gbs: f64) -> f64 {
    if p <= 1 {
        return 0.0;
    }
    let pf = p as f64;
    (pf - 1.0) * alpha_us + (pf - 1.0) / pf * transfer_us(bytes, bw_gbs)
}

/// Hierarchical (two-level) all-reduce of `bytes` per GPU, `g` GPUs per node on `nodes` nodes: intra-node
/// reduce-scatter → inter-node all-reduce of n/g per GPU → intra-node all-gather (MODELS.md §3.2):
/// T = 2(g−1)α_i + 2(N−1)α_e + 2(g−1)/g · n/B_i + 2(N−1)/N · n/(g·B_e),
/// with `inter_gbs_per_gpu` = B_e, each GPU's share of its node's NIC bandwidth.
pub fn hierarchical_all_reduce_us(
    g: u32,
    nodes: u32,
    bytes: f64,
    intra_alpha_us: f64,
    intra_gbs: f64,
    inter_alpha_us: f64,
    inter_gbs_per_gpu: f64,
) -> f64 {
    let (gf, nf) = (g.max(1) as f64, nodes.max(1) as f64);
    let intra = if g > 1 {
        2.0 * (gf - 1.0) * intra_alpha_us + 2.0 * (gf - 1.0) / gf * transfer_us(bytes, intra_gbs)
    } else {
        0.0
    };
    let inter = if nodes > 1 {
        2.0 * (nf - 1.0) * inter_alpha_us + 2.0 * (nf - 1.0) / nf * transfer_us(bytes / gf, inter_gbs_per_gpu)
    } else {
        0.0
    };
    intra + inter
}

/// Hierarchical all-gather or reduce-scatter (one phase of [`hierarchical_all_reduce_us`]):
/// (g−1)α_i + (N−1)α_e + (g−1)/g · n/B_i + (N−1)/N · n/(g·B_e).
pub fn hierarchical_gather_us(
    g: u32,
    nodes: u32,
    bytes: f64,
    intra_alpha_us: f64,
    intra_gbs: f64,
    inter_alpha_us: f64,
    inter_gbs_per_gpu: f64,
) -> f64 {
    0.5 * hierarchical_all_reduce_us(g, nodes, bytes, intra_alpha_us, intra_gbs, inter_alpha_us, inter_gbs_per_gpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_all_reduce_by_hand() {
        // p = 8, n = 1 GiB, α = 2 µs, B = 300 GB/s:
        // 2·7·2 = 28 µs + 2·7/8 · 1,073,741,824 B / 300e9 B/s = 1.75 · 3579.139 µs = 6263.49 µs → 6291.49 µs.
        let t = ring_all_reduce_us(8, 1_073_741_824.0, 2.0, 300.0);
        assert!((t - 6291.494).abs() < 0.01, "{t}");
        assert_eq!(ring_all_reduce_us(1, 1e9, 2.0, 300.0), 0.0);
    }

    #[test]
    fn hierarchical_all_reduce_by_hand() {
        // g = 4, N = 2, n = 100 MB, α_i 2 µs, B_i 300 GB/s, α_e 5 µs, B_e 6.25 GB/s per GPU:
        // intra 2·3·2 = 12 + 2·3/4·1e8/300e9 = 500 µs; inter 2·1·5 = 10 + 2·1/2·(1e8/4)/6.25e9 = 4000 µs.
        let t = hierarchical_all_reduce_us(4, 2, 1e8, 2.0, 300.0, 5.0, 6.25);
        assert!((t - (12.0 + 500.0 + 10.0 + 4000.0)).abs() < 1e-6, "{t}");
        // One node: reduces to the intra ring.
        let one = hierarchical_all_reduce_us(4, 1, 1e8, 2.0, 300.0, 5.0, 6.25);
        assert!((one - ring_all_reduce_us(4, 1e8, 2.0, 300.0)).abs() < 1e-9);
    }

    #[test]
    fn other_algorithms_by_hand() {
        // p = 16, n = 1 MB, α = 1 µs, B = 100 GB/s → n/B = 10 µs.
        assert!((recursive_doubling_all_reduce_us(16, 1e6, 1.0, 100.0) - 4.0 * 11.0).abs() < 1e-9);
        assert!((rabenseifner_all_reduce_us(16, 1e6, 1.0, 100.0) - (8.0 + 2.0 * 15.0 / 16.0 * 10.0)).abs() < 1e-9);
        assert!((ring_gather_us(16, 1e6, 1.0, 100.0) - (15.0 + 15.0 / 16.0 * 10.0)).abs() < 1e-9);
        assert!((binomial_tree_us(16, 1e6, 1.0, 100.0) - 44.0).abs() < 1e-9);
        assert!((postal_us(5.0, 50.0, 1e6) - 25.0).abs() < 1e-9);
    }
}

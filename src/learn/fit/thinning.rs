//! Thinning a large row set to a bounded size, evenly in upload order or as a stable seeded sample by key.

/// Keeps at most `max` items, every k-th one (k = ⌈len / max⌉), so a large sample set is thinned evenly across
/// its upload order rather than truncated to its oldest rows. `max == 0` keeps everything.
///
/// Beware tables in grid order: a stride that divides an axis's length keeps one slice of that axis (every
/// second row of an m·n·k grid with an even k axis drops half the k values); [`thin_by_key`] has no such
/// aliasing.
pub fn thin_evenly<T>(items: Vec<T>, max: usize) -> Vec<T> {
    if max == 0 || items.len() <= max {
        return items;
    }
    let k = items.len().div_ceil(max);
    items.into_iter().step_by(k).collect()
}

/// SplitMix64 finalizer with another constant than the split's, so the rows thinning keeps are independent of
/// their side of the split.
fn thinning_rank(key: u64) -> u64 {
    let mut z = key ^ 0x7A1D_5EED_0BAD_F00D;
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Keeps the `max` items whose stable `key` (a sample's split key or content hash) ranks lowest under a seeded
/// hash, in their original order: a uniform sample of the set that does not alias with the grid order of
/// measured tables, and that keeps the same rows retrain after retrain (a new row displaces a kept one only when
/// it ranks lower). `max == 0` keeps everything.
pub fn thin_by_key<T>(items: Vec<T>, max: usize, key: impl Fn(&T) -> u64) -> Vec<T> {
    if max == 0 || items.len() <= max {
        return items;
    }
    let mut ranked: Vec<(u64, usize)> = items.iter().enumerate().map(|(i, t)| (thinning_rank(key(t)), i)).collect();
    ranked.select_nth_unstable(max - 1);
    let mut keep = vec![false; items.len()];
    for &(_, i) in &ranked[..max] {
        keep[i] = true;
    }
    items.into_iter().zip(keep).filter_map(|(t, k)| k.then_some(t)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_every_kth_row_and_at_most_max() {
        let v: Vec<u32> = (0..10).collect();
        // ⌈10/4⌉ = 3 → rows 0, 3, 6, 9.
        assert_eq!(thin_evenly(v.clone(), 4), vec![0, 3, 6, 9]);
        assert_eq!(thin_evenly(v.clone(), 5), vec![0, 2, 4, 6, 8]);
        assert_eq!(thin_evenly(v.clone(), 10), v);
        assert_eq!(thin_evenly(v.clone(), 0), v);
        assert_eq!(thin_evenly(v, 1), vec![0]);
    }

    #[test]
    fn thinning_by_key_is_a_stable_uniform_sample_without_grid_aliasing() {
        // A 40 × 12 grid in row order (k innermost, 12 values): every second row would keep 6 of the 12 k values.
        let grid: Vec<(u64, u64)> = (0..40u64).flat_map(|m| (0..12u64).map(move |k| (m, k))).collect();
        let strided = thin_evenly(grid.clone(), 240);
        assert_eq!(strided.iter().map(|r| r.1).collect::<std::collections::BTreeSet<_>>().len(), 6);
        let key = |r: &(u64, u64)| r.0 * 1000 + r.1;
        let kept = thin_by_key(grid.clone(), 240, key);
        assert_eq!(kept.len(), 240);
        assert_eq!(kept.iter().map(|r| r.1).collect::<std::collections::BTreeSet<_>>().len(), 12);
        // Original order, and the same rows again with more rows added (those that rank lower displace some).
        assert!(kept.windows(2).all(|w| key(&w[0]) < key(&w[1])));
        let mut more = grid.clone();
        more.extend((0..12u64).map(|k| (99, k)));
        let again = thin_by_key(more, 240, key);
        let common = again.iter().filter(|r| kept.contains(r)).count();
        assert!(common >= 228, "{common}");
        assert_eq!(thin_by_key(grid.clone(), 0, key).len(), grid.len());
    }
}

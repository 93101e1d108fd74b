//! Nsight Compute's unit strings and the factor that scales a value to its unit's base (moved out of
//! `src/ingest/ncu.rs`): ncu's prefixes are SI (`Kbyte` = 1000 bytes; `nsecond`/`usecond`/`msecond`/`ns`; `Khz`,
//! `Mhz`, `Ghz`; `cycle/second`, …).

/// What a value in a unit is multiplied by to reach the unit's base (byte, second, hz, count …).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Scale {
    pub(super) factor: f64,
}

/// Scale of an ncu unit string: SI prefixes (`K`, `M`, `G`, `T`) on counts and bytes, `n`/`u`/`m` on seconds,
/// a `/denominator` divides. Unknown words scale by 1. `None` only for an empty component in a ratio.
pub(super) fn unit_scale(unit: &str) -> Option<Scale> {
    let unit = unit.trim();
    if unit.is_empty() || unit == "%" {
        return Some(Scale { factor: 1.0 });
    }
    let mut parts = unit.splitn(2, '/');
    let num = word_factor(parts.next()?)?;
    let den = match parts.next() {
        Some(d) => word_factor(d)?,
        None => 1.0,
    };
    Some(Scale { factor: num / den })
}

fn word_factor(word: &str) -> Option<f64> {
    let w = word.trim();
    if w.is_empty() {
        return None;
    }
    let time = [("nsecond", 1e-9), ("usecond", 1e-6), ("msecond", 1e-3), ("second", 1.0), ("ns", 1e-9)];
    let time_short = [("us", 1e-6), ("ms", 1e-3), ("s", 1.0)];
    if let Some((_, f)) = time.iter().chain(time_short.iter()).find(|(n, _)| *n == w) {
        return Some(*f);
    }
    let prefixed = |p: char| match p {
        'K' | 'k' => Some(1e3),
        'M' => Some(1e6),
        'G' => Some(1e9),
        'T' => Some(1e12),
        'P' => Some(1e15),
        _ => None,
    };
    let bases = ["byte", "hz", "Hz", "cycle", "inst", "sector", "request", "warp", "thread", "block", "B"];
    let mut chars = w.chars();
    if let (Some(first), rest) = (chars.next(), chars.as_str()) {
        if bases.contains(&rest) {
            if let Some(f) = prefixed(first) {
                return Some(f);
            }
        }
    }
    Some(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_scale_to_base() {
        assert_eq!(unit_scale("Kbyte").unwrap().factor, 1e3);
        assert_eq!(unit_scale("Mbyte").unwrap().factor, 1e6);
        assert_eq!(unit_scale("usecond").unwrap().factor, 1e-6);
        assert_eq!(unit_scale("msecond").unwrap().factor, 1e-3);
        assert_eq!(unit_scale("ns").unwrap().factor, 1e-9);
        assert_eq!(unit_scale("Ghz").unwrap().factor, 1e9);
        assert_eq!(unit_scale("cycle/usecond").unwrap().factor, 1e6);
        assert_eq!(unit_scale("Gbyte/second").unwrap().factor, 1e9);
        assert_eq!(unit_scale("register/thread").unwrap().factor, 1.0);
        assert_eq!(unit_scale("%").unwrap().factor, 1.0);
    }
}

//! Prediction intervals from cross-validated residuals ([`crate::llm::interval`]): the per-class quantiles of the
//! out-of-fold log residuals ln(measured / predicted), their coverage on held-out rows, and the Rust block that
//! ships them.
//!
//! Coverage is cross-conformal (Vovk 2015, "Cross-conformal predictors"): the rows of each fold get intervals
//! from the quantiles of the *other* folds' out-of-fold residuals, so no row's interval uses its own residual or
//! any residual of its (source, model) group. The shipped quantiles use every fitted row's out-of-fold residual.
//!
//! With whole sources left out ([`leave_source_out_intervals`]), each source's rows get the interval a user's run
//! from an unmeasured source would get: the other sources' residuals, each de-biased by its own source's mean, give
//! the within-source quantiles, and the other sources' means give the spread between sources
//! ([`crate::llm::interval::SourceShift`]); the row's own source enters neither.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::llm::interval::{
    weighted_conformal_quantiles, widen, ResidualClass, ResidualQuantiles, SourceShift, MIN_CLASS_ROWS,
};

/// One class's quantiles (owned, for reports).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassQuantiles {
    pub class: String,
    pub q10: f64,
    pub q90: f64,
    pub rows: u32,
}

/// Quantiles per class (classes with at least [`MIN_CLASS_ROWS`] residuals) and over all residuals, and the
/// spread between sources that widens them ([`widen`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quantiles {
    pub classes: Vec<ClassQuantiles>,
    pub pooled: ClassQuantiles,
    /// [`SourceShift::NONE`] for quantiles of one set of residuals ([`Quantiles::fit`]).
    pub shift: SourceShift,
}

/// The residuals of a quantile set weighted so that every group weighs the same: `(group, residual)` pairs →
/// `(residual, 1 / rows of its group)`.
fn group_weighted(r: &[(&str, f64)]) -> Vec<(f64, f64)> {
    let mut rows: BTreeMap<&str, f64> = BTreeMap::new();
    for (g, _) in r {
        *rows.entry(g).or_default() += 1.0;
    }
    r.iter().map(|(g, x)| (*x, 1.0 / rows[g])).collect()
}

impl Quantiles {
    /// Fits the quantiles to `(class, group, residual)` triples, every group (a source × model configuration)
    /// weighted equally inside each class and in the pooled set ([`weighted_conformal_quantiles`]); `None` without
    /// residuals.
    pub fn fit(residuals: &[(ResidualClass, &str, f64)]) -> Option<Quantiles> {
        let all: Vec<(&str, f64)> = residuals.iter().map(|(_, g, r)| (*g, *r)).collect();
        let (q10, q90) = weighted_conformal_quantiles(&group_weighted(&all))?;
        let pooled = ClassQuantiles { class: "pooled".into(), q10, q90, rows: all.len() as u32 };
        let mut by: BTreeMap<String, Vec<(&str, f64)>> = BTreeMap::new();
        for (c, g, r) in residuals {
            by.entry(c.name()).or_default().push((*g, *r));
        }
        let classes = by
            .into_iter()
            .filter(|(_, r)| r.len() >= MIN_CLASS_ROWS)
            .filter_map(|(class, r)| {
                let (q10, q90) = weighted_conformal_quantiles(&group_weighted(&r))?;
                Some(ClassQuantiles { class, q10, q90, rows: r.len() as u32 })
            })
            .collect();
        Some(Quantiles { classes, pooled, shift: SourceShift::NONE })
    }

    /// The quantiles of residuals from whole sources left out, `(class, source, group, residual)`: each residual
    /// minus its source's mean ([`source_means`]) gives the within-source quantiles ([`Quantiles::fit`]), and the
    /// sources' means the [`SourceShift`]; `None` without residuals.
    pub fn fit_across_sources(residuals: &[(ResidualClass, &str, &str, f64)]) -> Option<Quantiles> {
        let means = source_means(&residuals.iter().map(|(_, s, g, r)| (*s, *g, *r)).collect::<Vec<_>>());
        let within: Vec<(ResidualClass, &str, f64)> =
            residuals.iter().map(|(c, s, g, r)| (*c, *g, r - means[*s])).collect();
        let mut q = Quantiles::fit(&within)?;
        q.shift = SourceShift::fit(&means.values().copied().collect::<Vec<_>>());
        Some(q)
    }

    /// The quantiles of `class`: its own, else the pooled ones.
    pub fn of(&self, class: &ResidualClass) -> &ClassQuantiles {
        let name = class.name();
        self.classes.iter().find(|q| q.class == name).unwrap_or(&self.pooled)
    }

    /// The interval [p10, p90] of a predicted time `t` in `class`, s: the class's quantiles widened by
    /// [`Quantiles::shift`] ([`widen`]).
    pub fn interval(&self, t: f64, class: &ResidualClass) -> (f64, f64) {
        let q = self.of(class);
        let (lo, hi) = widen(q.q10, q.q90, &self.shift);
        (t * lo.exp(), t * hi.exp())
    }

    /// The shipped constants ([`crate::llm::interval::QUANTILES`], [`crate::llm::interval::POOLED`]) as
    /// quantiles.
    pub fn shipped() -> Quantiles {
        let own =
            |q: &ResidualQuantiles| ClassQuantiles { class: q.class.into(), q10: q.q10, q90: q.q90, rows: q.rows };
        Quantiles {
            classes: crate::llm::interval::QUANTILES.iter().map(own).collect(),
            pooled: own(&crate::llm::interval::POOLED),
            shift: crate::llm::interval::SOURCE_SHIFT,
        }
    }

    /// The Rust block to paste between the `BEGIN generated by \`perfcast eval training --leave-source-out\`` and
    /// `END generated` lines of `src/llm/interval.rs` ([`crate::llm::interval::SOURCE_SHIFT`]), stamped with `stamp`.
    pub fn shift_block(&self, stamp: &str) -> String {
        let s = &self.shift;
        format!(
            "// BEGIN generated by `perfcast eval training --leave-source-out`\n\
             /// The spread of perfcast's bias between whole sources left out (`perfcast eval training \
             --leave-source-out`,\n/// {stamp}; 80 % half-width {:.4}).\n\
             pub const SOURCE_SHIFT: SourceShift = SourceShift {{ mean: {:.4}, sd: {:.4}, sources: {} }};\n\
             // END generated\n",
            s.half_width(),
            s.mean,
            s.sd,
            s.sources
        )
    }

    /// The Rust block to paste between the `BEGIN generated` and `END generated` lines of
    /// `src/llm/interval.rs`, stamped with `stamp` (date and commit).
    pub fn rust_block(&self, stamp: &str) -> String {
        let item = |q: &ClassQuantiles| {
            format!(
                "ResidualQuantiles {{ class: {:?}, q10: {:.4}, q90: {:.4}, rows: {} }}",
                q.class, q.q10, q.q90, q.rows
            )
        };
        let mut s = String::from("// BEGIN generated by `perfcast eval training --cross-validate`\n");
        s.push_str("/// Per-class quantiles of the cross-validated residuals ln(measured / predicted)\n");
        s.push_str(&format!("/// (`perfcast eval training --cross-validate`, {stamp}).\n"));
        s.push_str(&format!("pub const QUANTILES: [ResidualQuantiles; {}] = [\n", self.classes.len()));
        for q in &self.classes {
            s.push_str(&format!("    {},\n", item(q)));
        }
        s.push_str("];\n/// The quantiles over every fitted row, for classes without enough rows of their own.\n");
        s.push_str(&format!("pub const POOLED: ResidualQuantiles = {};\n", item(&self.pooled)));
        s.push_str("// END generated\n");
        s
    }
}

/// How often measured times fall inside their intervals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Coverage {
    pub label: String,
    pub rows: usize,
    /// Fraction of rows with p10 ≤ measured ≤ p90 (target 0.8).
    pub inside: f64,
    /// Fraction measured below p10 (target 0.1).
    pub below: f64,
    /// Fraction measured above p90 (target 0.1).
    pub above: f64,
}

/// The coverage of `(measured, p10, p90)` triples, labelled.
pub fn coverage(label: &str, rows: &[(f64, f64, f64)]) -> Option<Coverage> {
    if rows.is_empty() {
        return None;
    }
    let n = rows.len() as f64;
    let below = rows.iter().filter(|(m, lo, _)| m < lo).count() as f64 / n;
    let above = rows.iter().filter(|(m, _, hi)| m > hi).count() as f64 / n;
    Some(Coverage { label: label.to_string(), rows: rows.len(), inside: 1.0 - below - above, below, above })
}

/// One row of the cross-conformal computation: its residual class, its group (source × model), its fold, its
/// out-of-fold prediction (s), whether its residual may enter the quantiles, and the measured time (s).
pub type ConformalRow = (ResidualClass, String, usize, Option<f64>, bool, f64);

/// Cross-conformal intervals: for every row, the interval from the quantiles ([`Quantiles::fit`]) of the other
/// folds' eligible residuals; `None` for rows without a prediction.
pub fn cross_conformal(rows: &[ConformalRow], k: usize) -> Vec<Option<(f64, f64)>> {
    let residual = |p: Option<f64>, m: f64| p.filter(|p| *p > 0.0).map(|p| (m / p).ln());
    let per_fold: Vec<Option<Quantiles>> = (0..k)
        .map(|f| {
            let r: Vec<(ResidualClass, &str, f64)> = rows
                .iter()
                .filter(|(_, _, fold, _, eligible, _)| *fold != f && *eligible)
                .filter_map(|(c, g, _, p, _, m)| Some((*c, g.as_str(), residual(*p, *m)?)))
                .collect();
            Quantiles::fit(&r)
        })
        .collect();
    rows.iter()
        .map(|(c, _, fold, p, _, _)| {
            let q = per_fold.get(*fold)?.as_ref()?;
            p.map(|p| q.interval(p, c))
        })
        .collect()
}

/// Each source's mean log residual from `(source, group, residual)` triples, every group (source × model) of a
/// source weighing the same.
pub fn source_means(r: &[(&str, &str, f64)]) -> BTreeMap<String, f64> {
    let mut by: BTreeMap<&str, BTreeMap<&str, (f64, f64)>> = BTreeMap::new();
    for (s, g, x) in r {
        let e = by.entry(s).or_default().entry(g).or_default();
        e.0 += x;
        e.1 += 1.0;
    }
    by.into_iter()
        .map(|(s, groups)| {
            let k = groups.len() as f64;
            (s.to_string(), groups.values().map(|(sum, n)| sum / n).sum::<f64>() / k)
        })
        .collect()
}

/// One row of the leave-source-out intervals: its residual class, its source, its group (source × model), its
/// prediction by constants fitted without its source (s), and the measured time (s).
pub type SourceRow = (ResidualClass, String, String, Option<f64>, f64);

/// Leave-source-out intervals: every row's interval from the quantiles of the *other* sources' residuals
/// ([`Quantiles::fit_across_sources`]); `None` for rows without a prediction or when no other source has one.
pub fn leave_source_out_intervals(rows: &[SourceRow]) -> Vec<Option<(f64, f64)>> {
    let residual = |p: Option<f64>, m: f64| p.filter(|p| *p > 0.0 && m > 0.0).map(|p| (m / p).ln());
    let mut per_source: BTreeMap<&str, Option<Quantiles>> = BTreeMap::new();
    for (_, source, _, _, _) in rows {
        per_source.entry(source.as_str()).or_insert_with(|| {
            let r: Vec<(ResidualClass, &str, &str, f64)> = rows
                .iter()
                .filter(|(_, s, _, _, _)| s != source)
                .filter_map(|(c, s, g, p, m)| Some((*c, s.as_str(), g.as_str(), residual(*p, *m)?)))
                .collect();
            Quantiles::fit_across_sources(&r)
        });
    }
    rows.iter().map(|(c, s, _, p, _)| Some(per_source[s.as_str()].as_ref()?.interval((*p)?, c))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(g: &'static str, multi: bool) -> ResidualClass {
        ResidualClass { generation: g, multi_node: multi }
    }

    #[test]
    fn quantiles_per_class_and_pooled() {
        // 40 Ampere residuals −0.20, −0.19, …, 0.19 and 5 Hopper residuals of 1.0: Ampere has its own quantiles
        // ((40 + 1)·0.1 = 4.1 → 4th smallest −0.17; ⌈36.9⌉ = 37th → 0.16), Hopper (5 < 30 rows) falls back to the
        // pooled 45 ((46)·0.1 → 4th −0.17; ⌈41.4⌉ = 42nd → 1.0).
        // Every row its own group: equal weights, the plain rank rule.
        let names: Vec<String> = (0..45).map(|i| format!("g{i}")).collect();
        let mut r: Vec<(ResidualClass, &str, f64)> =
            (0..40).map(|i| (class("ampere", false), names[i].as_str(), -0.2 + i as f64 * 0.01)).collect();
        r.extend((40..45).map(|i| (class("hopper", true), names[i].as_str(), 1.0)));
        let q = Quantiles::fit(&r).unwrap();
        assert_eq!(q.classes.len(), 1);
        let a = q.of(&class("ampere", false));
        assert!((a.q10 + 0.17).abs() < 1e-12 && (a.q90 - 0.16).abs() < 1e-12, "{a:?}");
        let h = q.of(&class("hopper", true));
        assert_eq!((h.class.as_str(), h.rows), ("pooled", 45));
        assert!((h.q10 + 0.17).abs() < 1e-12 && h.q90 == 1.0);
        assert!(q.rust_block("today").contains("pub const QUANTILES: [ResidualQuantiles; 1]"));
        // The same 40 Ampere residuals as two groups, the 36 smallest one model and the 4 largest (0.16…0.19)
        // another: each group weighs 20 of the 40 normalized units, so the 4 rows weigh 5 each. (n + 1)·0.9 = 36.9:
        // the first group reaches 20, the second 25, 30, 35, 40 → q90 = 0.19, the largest; (n + 1)·0.1 = 4.1: the
        // first group's rows weigh 20/36 = 0.556 each, 7 of them reach 3.89 → q10 = the 7th smallest, −0.14.
        let r: Vec<(ResidualClass, &str, f64)> =
            (0..40).map(|i| (class("ampere", false), if i < 36 { "a" } else { "b" }, -0.2 + i as f64 * 0.01)).collect();
        let a = Quantiles::fit(&r).unwrap().of(&class("ampere", false)).clone();
        assert!((a.q10 + 0.14).abs() < 1e-9 && (a.q90 - 0.19).abs() < 1e-9, "{a:?}");
    }

    #[test]
    fn leave_source_out_intervals_by_hand() {
        // Four sources, 40 rows each of one class, predicted 1.0: source s has residuals b_s + (−0.1, −0.095, …,
        // +0.095) (40 steps of 0.005) with biases b = −0.2, 0, +0.1, +0.3. Each source is its own group.
        let c = class("ampere", false);
        let biases = [("a", -0.2), ("b", 0.0), ("c", 0.1), ("d", 0.3)];
        let rows: Vec<SourceRow> = biases
            .iter()
            .flat_map(|(s, b)| {
                (0..40).map(move |i| (c, s.to_string(), s.to_string(), Some(1.0), (b - 0.1 + 0.005 * i as f64).exp()))
            })
            .collect();
        // The source means: b − 0.0025 (the offsets average −0.0025).
        let means = source_means(&[("a", "x", 1.0), ("a", "x", 3.0), ("a", "y", 5.0), ("b", "z", -1.0)]);
        // Groups weigh the same: a = (2 + 5)/2 = 3.5, not (1 + 3 + 5)/3.
        assert_eq!((means["a"], means["b"]), (3.5, -1.0));
        let iv = leave_source_out_intervals(&rows);
        // Source "a" left out: the others' means −0.0025 + (0, 0.1, 0.3): mean 0.13083, sd √((0.01778 + 0.00087 +
        // 0.02884)/2) = 0.15275; h = t₀.₉,₂ · sd · √(4/3) = 1.886 · 0.15275 · 1.1547 = 0.33266. Within: the 120
        // de-biased residuals are three copies of −0.0975…+0.0975; (n + 1)·0.1 = 12.1 → the 12th smallest (the
        // 4th value, −0.0825), ⌈108.9⌉ = 109th (the 37th value, +0.0825): centre 0, half-width 0.0825.
        // Interval: 0.13083 ∓ √(0.0825² + 0.33266²) = 0.13083 ∓ 0.34274 → [e^−0.21191, e^0.47357].
        let (lo, hi) = iv[0].unwrap();
        assert!((lo.ln() + 0.21191).abs() < 1e-4 && (hi.ln() - 0.47357).abs() < 1e-4, "{} {}", lo.ln(), hi.ln());
        // Its own residuals (−0.3 … −0.105) fall below: the source whose bias is the extreme is not covered by
        // the others' spread at its lowest rows, but its upper rows are: ln m from −0.3 to −0.105, inside from
        // −0.2119 on.
        let inside = (0..40).filter(|&i| iv[i].is_some_and(|(lo, hi)| lo <= rows[i].4 && rows[i].4 <= hi)).count();
        // −0.3 + 0.005·i ≥ −0.21191 ⇔ i ≥ 17.6: rows 18–39.
        assert_eq!(inside, 22);
        // Every interval is ordered, and a row without a prediction has none.
        assert!(iv.iter().all(|x| x.is_some_and(|(lo, hi)| lo < hi)));
        let mut none = rows.clone();
        none[0].3 = None;
        assert_eq!(leave_source_out_intervals(&none)[0], None);
        // The shipped-style quantiles over all four sources carry their spread.
        let all: Vec<(ResidualClass, &str, &str, f64)> =
            rows.iter().map(|(c, s, g, p, m)| (*c, s.as_str(), g.as_str(), (m / p.unwrap()).ln())).collect();
        let q = Quantiles::fit_across_sources(&all).unwrap();
        assert_eq!(q.shift.sources, 4);
        assert!((q.shift.mean - 0.0475).abs() < 1e-9, "{:?}", q.shift);
        assert!(q.shift_block("today").contains("pub const SOURCE_SHIFT: SourceShift = SourceShift { mean: 0.0475"));
    }

    #[test]
    fn cross_conformal_intervals_never_use_their_own_fold() {
        // Two folds of 40 rows, predicted 1.0; fold 0 measured 1.0, fold 1 measured e. Fold 0's interval comes
        // from fold 1's residuals (all 1.0: [e, e], so 1.0 falls outside), and the reverse.
        let c = class("ampere", false);
        let mut rows: Vec<ConformalRow> = (0..40).map(|_| (c, "x".into(), 0, Some(1.0), true, 1.0)).collect();
        rows.extend((0..40).map(|_| (c, "y".into(), 1, Some(1.0), true, 1f64.exp())));
        let iv = cross_conformal(&rows, 2);
        let (lo, hi) = iv[0].unwrap();
        assert!((lo - 1f64.exp()).abs() < 1e-12 && (hi - 1f64.exp()).abs() < 1e-12);
        let (lo, hi) = iv[79].unwrap();
        assert!((lo - 1.0).abs() < 1e-12 && (hi - 1.0).abs() < 1e-12);
        let cov = coverage("x", &[(1.0, 0.9, 1.1), (2.0, 0.9, 1.1), (0.5, 0.9, 1.1), (1.0, 1.0, 1.0)]).unwrap();
        assert_eq!((cov.inside, cov.below, cov.above), (0.5, 0.25, 0.25));
    }
}

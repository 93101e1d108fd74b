//! `perfcast eval training` on the shared datasets: the roofline bound, the shipped constants' in-sample errors,
//! and the cross-validated and leave-source-out intervals.

use super::*;
use crate::cost::Efficiency;
use crate::learn::fit::Accuracy;

fn data() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data")
}

fn by_source(r: &Report, s: &str) -> Accuracy {
    r.summary.iter().find(|x| x.label == s).unwrap().accuracy.clone()
}

#[test]
fn the_roofline_is_a_lower_bound_and_the_shipped_configuration_is_not_worse_than_reported() {
    let none = (&Arc::new(Registry::default()), "none");
    let roof = run(&data(), &Mode::Fixed(Efficiency::ROOFLINE), none, &mut |_| {}).unwrap();
    for s in ["vtrain", "nemo", "dgxc"] {
        assert!(by_source(&roof, s).signed < -0.2, "{s}: {:?}", by_source(&roof, s));
    }
    // In-sample guard (these rows calibrated the constants, with the bundled models a fresh install serves; the
    // README reports the out-of-fold errors).
    let bundle = crate::bundle::Bundle::embedded().unwrap();
    let models = Arc::new(crate::bundle::registry(&bundle).unwrap());
    let shipped = run(&data(), &Mode::Fixed(Efficiency::CALIBRATED), (&models, "bundled"), &mut |_| {}).unwrap();
    assert_eq!(by_source(&shipped, "vtrain").rows, 1440);
    // Reported in-sample (2026-11-24, joint bounded fit): vTrain 8.2 %, NeMo 6.1 %, DGX Cloud 10.4 % (its bf16
    // half −14 %, README); a little headroom, so a change that makes any of them worse fails here. Measured
    // 2026-11-27 with the flash-attention backward at 0.87 of its forward's FLOP rate (`FLASH_BACKWARD_RATE`,
    // cited; the constants not refit): vTrain 7.1 %, NeMo 6.5 % (+5.0 %; its 20 rows now include the 405B
    // ones), DGX Cloud 4.9 % — the slower backward costs NeMo's in-sample rows 0.4 points while every
    // leave-source-out error it touches falls (NeMo 10.1 → 9.8 %, long-context CP 17.3 → 13.1 %).
    // Refit 2026-11-28 with the fit's prior (`eval::fit_prior`) and the CP merges and Hopper cuDNN attention
    // (branch `fitprior`): vTrain 7.1 %, NeMo 4.5 % (+2.5 %), DGX Cloud 5.7 %; with the old constants those
    // changes had put NeMo at 7.45 %.
    assert!(by_source(&shipped, "vtrain").mape < 0.085, "{:?}", by_source(&shipped, "vtrain"));
    assert!(by_source(&shipped, "nemo").mape < 0.07, "{:?}", by_source(&shipped, "nemo"));
    assert!(by_source(&shipped, "dgxc").mape < 0.107, "{:?}", by_source(&shipped, "dgxc"));
    // NeuSight is never fitted: its 11 FP32 4-GPU rows and 19 single-GPU rows are predicted with constants fitted
    // on the others. Reported 2026-11-24 (README): 4-GPU 5.1 % (+1.5 %), single-GPU 12.5 % (−3.7 %).
    let (ns, one) = (by_source(&shipped, "neusight"), by_source(&shipped, "neusight-1gpu"));
    assert_eq!((ns.rows, one.rows), (11, 19));
    assert!(ns.mape < 0.08, "{ns:?}");
    assert!(one.mape < 0.15, "{one:?}");
}

#[test]
fn cross_validated_intervals_cover_held_out_rows() {
    // A short cross-validation (3 folds, 20 Nelder–Mead steps per fit): every row's interval comes from the
    // other folds' out-of-fold residuals; over the fitted sources about 80 % of the held-out measurements fall
    // inside p10–p90, about 10 % on each side.
    let fit_sources = crate::eval::efficiency_fit::FIT_SOURCES.iter().map(|s| s.to_string()).collect();
    let mode = Mode::CrossValidate { folds: 3, iterations: 20, fit_sources, contention: false };
    let r = run(&data(), &mode, (&Arc::new(Registry::default()), "none"), &mut |_| {}).unwrap();
    assert_eq!(r.coverage_kind, "held-out (cross-conformal)");
    let fitted = r.coverage.iter().find(|c| c.label == "fitted sources").unwrap();
    // vTrain 1,440, NeMo 20 (16 + the four Llama 3.1 405B rows the embedding and loss split admits), DGX Cloud
    // 117, llm-foundry 216.
    assert_eq!(fitted.rows, 1440 + 20 + 117 + 216);
    assert!((0.7..=0.9).contains(&fitted.inside), "{fitted:?}");
    // Both tails hold some rows. Without the learned models (this test's registry) the analytic timing leaves them
    // uneven: 17.2 % below, 2.6 % above since Megatron's softmax fallback is counted (2026-11-28, dd4e5bc; the
    // bundled models give 11.2 % / 9.6 %, `eval training --cross-validate --folds 3 --iterations 20`).
    assert!(fitted.below > 0.02 && fitted.above > 0.02, "{fitted:?}");
    // The intervals are ordered everywhere. They bracket the point estimates where the class's held-out
    // residuals fall on both sides of 0 (Ampere one-node: vTrain's 1,440 rows beside llm-foundry's 105), not
    // necessarily where they are one-sided: Hopper one-node's fitted rows are 44 llm-foundry runs predicted
    // about 20 % too fast (docs/src/accuracy/training.md) and 7 NeMo / DGX Cloud rows, so ln(measured /
    // predicted) is positive at its 10th percentile and the interval lies above the estimate.
    assert!(r.rows.iter().all(|row| row.p10_s <= row.p90_s));
    assert!(r
        .rows
        .iter()
        .filter(|row| row.class == "ampere/one-node")
        .all(|row| row.p10_s <= row.predicted_s && row.predicted_s <= row.p90_s));
    let q = r.quantiles.as_ref().unwrap();
    // Ampere one-node: vTrain's 1,440 rows and llm-foundry's 105 single-node A100 runs.
    assert!(q.classes.iter().any(|c| c.class == "ampere/one-node" && c.rows == 1440 + 105));
    assert!(q.pooled.q10 < 0.0 && q.pooled.q90 > 0.0);
}

#[test]
fn leave_source_out_intervals_carry_the_spread_between_sources() {
    // A short leave-source-out run (5 Nelder–Mead steps per fit): the shipped-style quantiles' source shift is
    // the mean and spread of the sources' own mean log residuals, recomputed here from the rows.
    let fit_sources = crate::eval::efficiency_fit::FIT_SOURCES.iter().map(|s| s.to_string()).collect();
    let mode = Mode::LeaveSourceOut { iterations: 5, fit_sources, contention: false };
    let r = run(&data(), &mode, (&Arc::new(Registry::default()), "none"), &mut |_| {}).unwrap();
    let every = r.coverage.iter().find(|c| c.label == "every source").unwrap();
    assert_eq!(every.rows, r.rows.len());
    // The source-weighted row: the mean over the source labels of each label's fraction inside, recounted here.
    let mut labels: std::collections::BTreeMap<&str, (f64, f64)> = Default::default();
    for row in &r.rows {
        let e = labels.entry(row.source).or_default();
        e.0 += f64::from(u8::from(row.p10_s <= row.measured_s && row.measured_s <= row.p90_s));
        e.1 += 1.0;
    }
    let weighted = labels.values().map(|(inside, n)| inside / n).sum::<f64>() / labels.len() as f64;
    let label = format!("every source, each of the {} labels weighing the same", labels.len());
    let row = r.coverage.iter().find(|c| c.label == label).unwrap();
    assert!((row.inside - weighted).abs() < 1e-12, "{row:?} {weighted}");
    assert!(r.rows.iter().all(|row| row.p10_s < row.p90_s));
    // Per source (NeuSight's two tables one source), the mean over its groups of each group's mean ln(m / p).
    let mut groups: std::collections::BTreeMap<(String, String), (f64, f64)> = Default::default();
    for row in &r.rows {
        let source = if row.source == "neusight-1gpu" { "neusight" } else { row.source };
        let e = groups.entry((source.to_string(), format!("{}/{}", row.source, row.group))).or_default();
        e.0 += (row.measured_s / row.predicted_s).ln();
        e.1 += 1.0;
    }
    let mut sources: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for ((s, _), (sum, n)) in groups {
        sources.entry(s).or_default().push(sum / n);
    }
    let means: Vec<f64> = sources.values().map(|g| g.iter().sum::<f64>() / g.len() as f64).collect();
    let k = means.len() as f64;
    let mean = means.iter().sum::<f64>() / k;
    let sd = (means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
    let q = r.quantiles.as_ref().unwrap();
    // vTrain, NeuSight, NeMo, NeMo on Blackwell, NeMo MoE, NeMo's long sequences, DGX Cloud, llm-foundry.
    assert_eq!(q.shift.sources, 8);
    assert!((q.shift.mean - mean).abs() < 1e-9 && (q.shift.sd - sd).abs() < 1e-9, "{:?} {mean} {sd}", q.shift);
    assert!(q.shift.half_width() > 0.0);
}

/// A `nemo-moe` row result of `group` on `gpu` with only what the summary reads set.
fn moe_row(id: &str, group: &str, gpu: &str, measured_s: f64, predicted_s: f64, trap: bool) -> RowResult {
    RowResult {
        source: "nemo-moe",
        id: id.to_string(),
        group: group.to_string(),
        gpu: gpu.to_string(),
        gpus: 16,
        tp: 1,
        pp: 2,
        dp: 8,
        cp: 1,
        virtual_stages: 1,
        micro_batch: 1,
        grad_accum: 1,
        precision: "fp8".to_string(),
        measured_s,
        predicted_s,
        p10_s: predicted_s * 0.9,
        p90_s: predicted_s * 1.1,
        class: "hopper/multi-node".to_string(),
        measured_tflops_per_gpu: 100.0,
        trap: trap.then_some("a release regression"),
    }
}

#[test]
fn subsets_with_trap_rows_are_reported_with_and_without_them() {
    let rows = vec![
        moe_row("archive.md line 445 Qwen3 DGX-H100", "Qwen3-30B-A3B", "H100", 10.0, 11.0, false),
        moe_row("archive.md line 132 Qwen3 DGX-H100", "Qwen3-30B-A3B", "H100", 20.0, 18.0, false),
        moe_row("archive.md line 530 Qwen3 DGX-H100", "Qwen3-30B-A3B", "H100", 50.0, 30.0, true),
        moe_row("archive.md line 40 Qwen3 DGX-B200", "Qwen3-30B-A3B", "B200", 8.0, 8.0, false),
    ];
    let s = summary::summary(&rows);
    let get = |label: &str| s.iter().find(|x| x.label == label).unwrap_or_else(|| panic!("{label}: {s:?}")).accuracy.clone();
    // With the trap: errors (p − m)/m = +0.1, −0.1, −0.4, 0 → MAPE (0.1 + 0.1 + 0.4 + 0)/4 = 0.15,
    // signed (0.1 − 0.1 − 0.4 + 0)/4 = −0.1.
    let with = get("nemo-moe");
    assert_eq!(with.rows, 4);
    assert!((with.mape - 0.15).abs() < 1e-12 && (with.signed + 0.1).abs() < 1e-12, "{with:?}");
    // Without it: +0.1, −0.1, 0 → MAPE 0.2/3 = 0.066667, signed 0.
    let without = get("nemo-moe without trap rows (line 530 H100)");
    assert_eq!(without.rows, 3);
    assert!((without.mape - 0.2 / 3.0).abs() < 1e-12 && without.signed.abs() < 1e-12, "{without:?}");
    // The (model, GPU) cell: H100 with the trap (0.1 + 0.1 + 0.4)/3 = 0.2, without it (0.1 + 0.1)/2 = 0.1.
    assert!((get("nemo-moe Qwen3-30B-A3B H100").mape - 0.2).abs() < 1e-12);
    let cell = get("nemo-moe Qwen3-30B-A3B H100 without trap rows (line 530 H100)");
    assert!((cell.mape - 0.1).abs() < 1e-12 && cell.rows == 2, "{cell:?}");
    // A subset without trap rows gets no twin; the twin comes right after its subset.
    assert!(!s.iter().any(|x| x.label.starts_with("nemo-moe B200 without")));
    let i = s.iter().position(|x| x.label == "nemo-moe").unwrap();
    assert!(s[i + 1].label.starts_with("nemo-moe without trap rows"));
}

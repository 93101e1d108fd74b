//! Tests of the efficiency fit: the search vector, Nelder–Mead, the printed block, the Ampere clock and the folds.

use super::*;

#[test]
fn every_field_has_its_bounds_and_fitted_comes_first() {
    let names: Vec<&str> = FIELDS.iter().map(|f| f.0).collect();
    assert_eq!(names[..4], FITTED);
    // The search vector at 0 puts every field at the middle of its range (tanh 0 = 0), read off the struct's
    // own fields: memory (0.5 + 0.9)/2 = 0.7, kernel_us (5 + 40)/2 = 22.5, host_us (20 + 100)/2 = 60,
    // sustained_clock (0.8 + 1.0)/2 = 0.9, overlap_slowdown (0 + 0.2)/2 = 0.1.
    let e = to_eff(&[0.0; 5], &Efficiency::CALIBRATED);
    let want =
        [e.memory - 0.7, e.kernel_us - 22.5, e.host_us - 60.0, e.sustained_clock - 0.9, e.overlap_slowdown - 0.1];
    assert!(want.iter().all(|d| d.abs() < 1e-12), "{e:?}");
    // Each getter reads what its setter wrote; from_eff inverts to_eff (4 coordinates, 5 with κ).
    for (name, get, set, _) in FIELDS {
        let mut x = e;
        set(&mut x, 0.123);
        assert_eq!(get(&x), 0.123, "{name}");
    }
    assert_eq!(from_eff(&e, false).len(), 4);
    assert!(from_eff(&e, true).iter().all(|c| c.abs() < 1e-12));
}

#[test]
fn nelder_mead_finds_a_quadratic_minimum() {
    // (x − 1)² + 10·(y + 2)² has its minimum 0 at (1, −2).
    let mut f = |x: &[f64]| (x[0] - 1.0).powi(2) + 10.0 * (x[1] + 2.0).powi(2);
    let (x, v) = nelder_mead(&mut f, &[0.0, 0.0], 0.5, 300);
    assert!((x[0] - 1.0).abs() < 1e-4 && (x[1] + 2.0).abs() < 1e-4 && v < 1e-8, "{x:?} {v}");
}

#[test]
fn the_search_stays_inside_the_plausible_ranges() {
    // tanh maps the whole line into (lo, hi): far coordinates land at the bounds, 0 at the middle.
    assert!((bounded(0.0, (0.5, 0.9)) - 0.7).abs() < 1e-12);
    assert!((bounded(50.0, (5.0, 40.0)) - 40.0).abs() < 1e-9);
    assert!((bounded(-50.0, (20.0, 100.0)) - 20.0).abs() < 1e-9);
    // The coordinate inverts it: memory 0.8 → 0.8, 10 µs → 10 µs.
    assert!((bounded(coordinate(0.8, (0.5, 0.9)), (0.5, 0.9)) - 0.8).abs() < 1e-12);
    assert!((bounded(coordinate(10.0, (5.0, 40.0)), (5.0, 40.0)) - 10.0).abs() < 1e-9);
    // A loss that wants memory 0.3 and no kernel time gets the bounds, 0.5 and 5 µs.
    let base = start();
    let mut f = |x: &[f64]| {
        let e = to_eff(x, &base);
        (e.memory - 0.3).abs() + (e.kernel_us - 0.0).abs() / 10.0 + (e.host_us - 60.0).abs() / 10.0
    };
    let (x, _) = nelder_mead(&mut f, &from_eff(&base, false), 0.3, 400);
    let e = to_eff(&x, &base);
    assert!(e.memory < 0.51 && e.kernel_us < 5.5 && (e.host_us - 60.0).abs() < 0.5, "{e:?}");
}

#[test]
fn the_printed_constants_carry_the_fold_ranges() {
    let a = Efficiency { memory: 0.6, kernel_us: 20.0, host_us: 60.0, ..start() };
    let b = Efficiency { memory: 0.7, kernel_us: 30.0, host_us: 70.0, sustained_clock: 0.95, ..start() };
    let s = rust_block(&a, &[a, b], false, "`perfcast eval training --cross-validate`", "today");
    assert!(s.contains("memory: 0.600, // folds 0.600–0.700"), "{s}");
    assert!(s.contains("kernel_us: 20.0, // folds 20.000–30.000"), "{s}");
    // Both start at the neutral sustained clock 0.9; the second fold moved it to 0.95. The Ampere clock is
    // measured, not fitted, so it is not printed.
    assert!(s.contains("sustained_clock: 0.900, // folds 0.900–0.950"), "{s}");
    assert!(!s.contains("sustained_clock_ampere"), "{s}");
    assert!(!s.contains("overlap_slowdown"), "{s}");
}

#[test]
fn the_block_for_the_shipped_constants_prints_each_at_its_shipped_precision() {
    // Written out by hand from `Efficiency::CALIBRATED` (src/cost/derate.rs): memory 0.705 (3 decimals), kernel_us
    // 25.8 and host_us 69.3 (1 decimal), SUSTAINED_CLOCK 0.837 and OVERLAP_SLOWDOWN 0.1 (3 decimals: 0.100). The
    // header names the command and rows it is given, then the stamp.
    let shipped = Efficiency::CALIBRATED;
    let by = "`perfcast eval training --leave-source-out --iterations 60` on the 1,793 rows of vtrain, nemo";
    let want = "// fitted by `perfcast eval training --leave-source-out --iterations 60` on the 1,793 rows of \
                vtrain, nemo, 2026-11-28, commit 3adfb7b\n\
                memory: 0.705,\n\
                kernel_us: 25.8,\n\
                host_us: 69.3,\n\
                sustained_clock: 0.837,\n\
                overlap_slowdown: 0.100,\n";
    assert_eq!(rust_block(&shipped, &[], true, by, "2026-11-28, commit 3adfb7b"), want);
    // With two folds, memory 0.705 and 0.7001: each line carries the folds' range at 3 decimals, least first
    // (0.700–0.705; kernel_us 25.8 and 30.04: 25.800–30.040), and without the contention κ its line is left out.
    let other = Efficiency { memory: 0.7001, kernel_us: 30.04, ..shipped };
    let want = "// fitted by `perfcast eval training --cross-validate`, today\n\
                memory: 0.705, // folds 0.700–0.705\n\
                kernel_us: 25.8, // folds 25.800–30.040\n\
                host_us: 69.3, // folds 69.300–69.300\n\
                sustained_clock: 0.837, // folds 0.837–0.837\n";
    assert_eq!(
        rust_block(&shipped, &[shipped, other], false, "`perfcast eval training --cross-validate`", "today"),
        want
    );
}

#[test]
fn the_ampere_sustained_clock_is_superbench_sustained_gemms_over_the_learned_a100_gemm() {
    // SuperBench `gemm-flops` (DATA.md train data): cutlass tensor-core GEMMs at m = n = k = 16,384 averaged over
    // 1,939 NDv4 (A100 40 GB) and 729 NDmv4 (A100 80 GB) production nodes, v0.3.0 baselines, GFLOP/s.
    use super::super::comm::{csv_records, read_text};
    let csv =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/superbench_results/superbench_flat.csv");
    let (h, rows) = csv_records(&read_text(&csv).unwrap()).unwrap();
    let col = |n: &str| h.iter().position(|c| c == n).unwrap();
    let (file, bench, metric, value) = (col("file"), col("benchmark"), col("metric"), col("value"));
    let baselines = ["v0.3.0/Azure-NDv4-A100/baseline.json", "v0.3.0/Azure-NDmv4-A100/baseline.json"];
    let sustained: Vec<f64> = rows
        .iter()
        .filter(|r| baselines.contains(&&r[file]) && &r[bench] == "gemm-flops")
        .filter(|r| ["FP16_TC", "BF16_TC"].contains(&&r[metric]))
        .map(|r| r[value].parse::<f64>().unwrap())
        .collect();
    // By hand: 280,435 and 265,901 (NDv4 fp16, bf16), 275,397 and 261,228 (NDmv4): mean 270,740 GFLOP/s.
    assert_eq!(sustained.len(), 4);
    let mean_tflops = sustained.iter().sum::<f64>() / 4.0 / 1e3;
    assert!((mean_tflops - 270.74).abs() < 0.01, "{mean_tflops}");
    // The same GEMM by the bundled learned A100 model (aiconfigurator's short microbenchmarks).
    let system = crate::hw::presets().into_iter().find(|p| p.name == "dgx-a100-80g").unwrap().resolve().unwrap();
    let bundle = crate::bundle::Bundle::embedded().unwrap();
    let learned = LearnedBackend::new(system, Arc::new(crate::bundle::registry(&bundle).unwrap()));
    let gemm = crate::op::OpShape::new(crate::op::OpClass::Linear, crate::op::Phase::Fwd, &[1, 16384, 16384, 16384]);
    let t = learned.compute_uncached(&gemm, crate::hw::Precision::Bf16).unwrap();
    assert!(t.source.to_string().contains("A100-SXM4-80GB"), "{}", t.source);
    let learned_tflops = 2.0 * 16384f64.powi(3) / t.time_us / 1e6;
    // Sustained over microbenchmark speed: the shipped Ampere clock, 270.7 / 291.0 ≈ 0.930.
    let ratio = mean_tflops / learned_tflops;
    assert!((ratio - crate::cost::derate::SUSTAINED_CLOCK_AMPERE).abs() < 0.005, "{ratio} ({learned_tflops} TFLOP/s)");
}

#[test]
fn folds_keep_every_group_whole() {
    let rows = super::super::training::prepare(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"),
        &Arc::new(Registry::default()),
    )
    .unwrap()
    .0;
    let rows: Vec<Prepared> = rows.into_iter().map(|(_, p)| p).collect();
    let fit: Vec<String> = FIT_SOURCES.iter().map(|s| s.to_string()).collect();
    let f = folds(&rows, &fit, 5);
    // Every (source, model) group maps to one fold, all five folds are used.
    let used: std::collections::BTreeSet<usize> = f.values().copied().collect();
    assert_eq!(used.len(), 5);
    for r in &rows {
        assert!(f.contains_key(&(r.source.to_string(), r.group.clone())));
    }
    // The eight vTrain model configurations (hidden 1024/2048 × 12–24 layers) are eight groups.
    assert_eq!(f.keys().filter(|(s, _)| s == "vtrain").count(), 8);
    // Rows of a source that is only predicted do not move the fitted groups' folds: without NeuSight's rows the
    // fitted groups land in the same folds.
    let fitted_only: Vec<Prepared> = rows.iter().filter(|r| fit.iter().any(|s| s == r.source)).cloned().collect();
    let g = folds(&fitted_only, &fit, 5);
    assert!(f.keys().any(|(s, _)| s.starts_with("neusight")));
    for (key, fold) in &g {
        assert_eq!(f[key], *fold, "{key:?}");
    }
}

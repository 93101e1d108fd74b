//! The learned all-to-all, trained as the bundle trains it on aiconfigurator's one-node NCCL tables, reproduces
//! its own train rows on the presets (uncalibrated systems: the α–β baseline over their declared links).

use std::path::Path;
use std::sync::Arc;

use super::{aic_system, AIC_GPUS};
use crate::comm::calibrated::calibrate;
use crate::comm::Group;
use crate::cost::CostBackend;
use crate::hw::presets;
use crate::ingest::{self, Context, Format};
use crate::learn::backend::LearnedBackend;
use crate::learn::comm_data::{push_system_samples, CommTrainingSets};
use crate::learn::comm_features::{comm_key, COMM_FEATURES};
use crate::learn::fit::{fit, Grid};
use crate::learn::lgbm::Model;
use crate::learn::{ActiveRegressor, Registry};
use crate::op::Collective;
use crate::samples::{CommSample, Sample};

fn nccl_rows(gpu: &str) -> Vec<CommSample> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/aiconfigurator").join(gpu).join("nccl_perf.csv.gz");
    let parsed = ingest::parse(Format::Aiconfigurator, &std::fs::read(&path).unwrap(), &Context::default()).unwrap();
    parsed.samples.into_iter().filter_map(|s| if let Sample::Comm(c) = s { Some(c) } else { None }).collect()
}

#[test]
fn the_learned_all_to_all_reproduces_its_blackwell_and_h100_train_rows_on_the_presets() {
    // Every aiconfigurator GPU's NCCL rows on its bundled system, calibrated from its own rows, as the bundle does.
    let mut sets = CommTrainingSets::new();
    for gpu in AIC_GPUS {
        let samples = nccl_rows(gpu);
        let system = aic_system(gpu).unwrap().resolve().unwrap();
        push_system_samples(&mut sets, gpu, &system, &samples, &calibrate(&samples));
    }
    let (set, _) = &sets[&Collective::AllToAll];
    let fitted = fit(set, Grid::Full, &mut |_| {}).unwrap();
    let registry = Arc::new(Registry::new([ActiveRegressor {
        key: comm_key(Collective::AllToAll),
        version: 1,
        model: Model::from_text(&fitted.model_text).unwrap(),
        feature_names: COMM_FEATURES.iter().map(|s| s.to_string()).collect(),
        validation_mape: fitted.validation.mape,
        summary: serde_json::Value::Null,
    }]));
    let on = |name: &str| {
        let system = presets().into_iter().find(|p| p.name == name).unwrap().resolve().unwrap();
        LearnedBackend::new(system, registry.clone()).collective(
            Collective::AllToAll,
            268_435_456.0,
            Group::new(8, 8),
            8,
        )
    };
    // Train rows (aiconfigurator, NCCL 2.29.2, alltoall, int8, num_gpus 8, message_size 268,435,456 elements of 1 B):
    //   b200_sxm/nccl_perf.csv.gz latency 0.43567 ms = 435.67 µs; b300_sxm 0.42292 ms = 422.92 µs;
    //   h100_sxm 0.76606 ms = 766.06 µs.
    // The presets are uncalibrated: the baseline is pairwise over the declared NVSwitch link, (p − 1)·α +
    // (p − 1)/p · B / bw = 7 · 2 µs + 7/8 · 268,435,456 B / 900 GB/s = 14 + 260.98 = 274.98 µs on dgx-b200 and
    // dgx-b300 (NVLink 5), 14 + 7/8 · 268,435,456 / 350 GB/s = 14 + 671.09 = 685.09 µs on dgx-h100 (NCCL's achieved
    // 350 GB/s). Trained only over calibrated links the model answered B200 with ≈ the baseline (272.9 µs, 0.63 of
    // the measurement); now within 10 % on the Blackwell presets. dgx-h100's 350 GB/s is marked achieved (NCCL's
    // all-gather / reduce-scatter bus bandwidth there), so it is answered like the calibrated rows, whose ratios are
    // ≈ 1; all-to-all reaches only 7/8 · 268,435,456 B / 766.06 µs = 306.6 GB/s: within 15 %, and never below the
    // link bound 7/8 · 268,435,456 / 350e9 = 671.09 µs.
    for (preset, measured_us, baseline_us, tolerance) in
        [("dgx-b200", 435.67, 274.98, 0.10), ("dgx-b300", 422.92, 274.98, 0.10), ("dgx-h100", 766.06, 685.09, 0.15)]
    {
        let t = on(preset);
        assert!(t.source.to_string().starts_with("regressor:comm.all_to_all"), "{preset}: {}", t.source);
        assert!((t.analytic_us - baseline_us).abs() < 0.01, "{preset}: baseline {}", t.analytic_us);
        assert!((t.time_us / measured_us - 1.0).abs() < tolerance, "{preset}: {} µs against {measured_us}", t.time_us);
    }
    assert!(on("dgx-h100").time_us >= 671.08, "the NVLink bound");
}

/// The shipped bundle's collective models reproduce aiconfigurator's one-node NCCL train rows on the Blackwell presets
/// (uncalibrated, as a training prediction sees them): for every collective and group size, rows of at least 32 MiB,
/// the mean signed error (predicted / measured − 1) is within ±5 %. Before the declared-links rows these presets were
/// answered 20–39 % fast (B200 all-to-all 8 × 268,435,456 B: 272.9 µs against the measured 435.67 µs).
#[test]
fn the_shipped_collectives_reproduce_their_blackwell_train_rows_on_the_presets() {
    let bundle = crate::bundle::Bundle::embedded().unwrap();
    let registry = Arc::new(crate::bundle::registry(&bundle).unwrap());
    for (gpu, preset) in [("b200_sxm", "dgx-b200"), ("b300_sxm", "dgx-b300"), ("gb200", "gb200-nvl72")] {
        let system = presets().into_iter().find(|p| p.name == preset).unwrap().resolve().unwrap();
        let backend = LearnedBackend::new(system, registry.clone());
        let rows = nccl_rows(gpu);
        for c in [Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll] {
            let mut ranks: Vec<u32> = rows.iter().filter(|s| s.collective == c).map(|s| s.ranks).collect();
            ranks.sort();
            ranks.dedup();
            for p in ranks {
                let errs: Vec<f64> = rows
                    .iter()
                    .filter(|s| s.collective == c && s.ranks == p && s.bytes >= 32 << 20)
                    .map(|s| backend.collective(c, s.bytes as f64, Group::new(p, p), p).time_us / s.time_us - 1.0)
                    .collect();
                if errs.is_empty() {
                    continue;
                }
                let signed = errs.iter().sum::<f64>() / errs.len() as f64;
                assert!(
                    signed.abs() <= 0.05,
                    "{gpu} on {preset}: {} over {p} ranks, {} rows: mean signed error {:+.1} %",
                    c.as_str(),
                    errs.len(),
                    100.0 * signed
                );
            }
        }
    }
}

//! `/v1/estimates/kernel`, `/v1/estimates/comm`, calibration and GPU imports through the real router and a real
//! SQLite file.

use crate::common::TestApp;
use serde_json::json;

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures").join(path)).unwrap()
}

#[tokio::test]
async fn hong_kim_worked_example_through_http() {
    let app = TestApp::new().await;
    let r = app
        .post_json(
            "/v1/estimates/kernel",
            &json!({
            "gpu": {"sm_count": 16, "clock_ghz": 1.0, "memory_bandwidth_gbs": 80, "dram_latency_cycles": 420,
                    "departure_delay_coal_cycles": 4, "departure_delay_uncoal_cycles": 10, "issue_cycles": 4},
            "kernel": {"comp_insts": 27, "coal_mem_insts": 0, "uncoal_mem_insts": 6, "synch_insts": 6,
                       "threads_per_block": 128, "blocks": 80, "active_blocks_per_sm": 5, "uncoal_per_mw": 32,
                       "load_bytes_per_warp": 128},
            "models": ["mwp_cwp", "roofline"]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let e = r.json();
    // Hong & Kim ISCA 2009's worked example: ≈ 50,728 cycles (MODELS.md §2.2), case 2, MWP 2.28125, CWP 20.
    let cycles = e["estimates"]["mwp_cwp"]["cycles"].as_f64().unwrap();
    assert!((cycles - 50_728.0).abs() / 50_728.0 < 0.01, "{cycles}");
    assert_eq!(e["estimates"]["mwp_cwp"]["case"], "case2");
    assert_eq!(e["estimates"]["mwp_cwp"]["mwp"], 2.28125);
    // 1 GHz: cycles / 1000 = µs.
    assert!((e["estimates"]["mwp_cwp"]["time_us"].as_f64().unwrap() - cycles / 1000.0).abs() < 1e-6);
    // Roofline of the same kernel: 80 blocks × 4 warps × 6 uncoalesced accesses × 32 transactions × 32 B
    // = 1,966,080 B over 80 GB/s = 24.576 µs; memory-bound.
    assert!((e["estimates"]["roofline"]["time_us"].as_f64().unwrap() - 24.576).abs() < 1e-6);
    assert_eq!(e["verdict"], "memory-bound: DRAM");
    // Field errors.
    let p = app.post_json("/v1/estimates/kernel", &json!({"gpu": "A100"})).await.problem(422);
    assert_eq!(p["errors"][0]["field"], "kernel");
    app.post_json("/v1/estimates/kernel", &json!({"sample_id": 999})).await.problem(404);
}

#[tokio::test]
async fn stored_ncu_samples_get_roofline_and_pipe_estimates() {
    let app = TestApp::new().await;
    let up = app
        .post_bytes("/v1/profiles", fixture("ncu/gene_V100_summit_ncu2020_details_units-base_time-flops.csv"), &[])
        .await;
    assert_eq!(up.status, 201, "{}", String::from_utf8_lossy(&up.body));
    let id = up.json()["id"].as_str().unwrap().to_string();
    let samples = app.get(&format!("/v1/profiles/{id}/samples")).await.json();
    let kernel = samples["samples"].as_array().unwrap().iter().find(|s| s["kind"] == "kernel").unwrap().clone();
    let r = app.post_json("/v1/estimates/kernel", &json!({"sample_id": kernel["id"], "gpu": "V100-SXM2"})).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let e = r.json();
    let (m, d) = (e["measured_us"].as_f64().unwrap(), kernel["data"]["duration_us"].as_f64().unwrap());
    assert!((m - d).abs() / d < 1e-12, "{m} vs {d}");
    assert!(e["estimates"]["roofline"]["time_us"].as_f64().unwrap() > 0.0);
    assert!(e["verdict"].as_str().unwrap().contains("-bound"), "{}", e["verdict"]);
}

#[tokio::test]
async fn collectives_calibrate_from_uploads_and_predictions_use_them() {
    let app = TestApp::new().await;
    // Analytic on the preset: ring over NVSwitch at NCCL's achieved 350 GB/s (and faster algorithms where they
    // exist).
    let req = json!({"system": "dgx-h100", "collective": "all_reduce", "bytes": 1073741824, "nodes": 1,
                     "gpus_per_node": 8, "dtype": "bf16"});
    let before = app.post_json("/v1/estimates/comm", &req).await.json();
    assert_eq!(before["source"], "analytic");
    assert_eq!(before["ranks"], 8);
    let ring =
        before["analytic"]["algorithms"].as_array().unwrap().iter().find(|a| a["algorithm"] == "ring").unwrap().clone();
    assert!((ring["time_us"].as_f64().unwrap() - (28.0 + 1.75 * 1_073_741_824.0 / 350e3)).abs() < 1e-6);
    // busbw = algbw · 2·7/8.
    assert!((before["busbw_gbs"].as_f64().unwrap() - before["algbw_gbs"].as_f64().unwrap() * 1.75).abs() < 1e-9);

    // The single-node H100 nccl-tests log on dgx-h100: uploading it queues a calibration; calibrate now.
    let up = app
        .post_bytes("/v1/profiles?system=dgx-h100", fixture("nccl-tests/xxrjun_nccl_N1_G8_H100_single_node.log"), &[])
        .await;
    assert_eq!(up.status, 201, "{}", String::from_utf8_lossy(&up.body));
    let cal = app.post_json("/v1/systems/dgx-h100/calibrate", &json!({})).await;
    assert_eq!(cal.status, 200, "{}", String::from_utf8_lossy(&cal.body));
    let cal = cal.json();
    let group = cal["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["collective"] == "all_reduce" && g["ranks"] == 8)
        .unwrap()
        .clone();
    assert!(group["fit"]["busbw_gbs"].as_f64().unwrap() > 100.0);
    assert_eq!(app.get("/v1/systems/dgx-h100").await.json()["calibration"]["samples"], cal["samples"]);

    // The same question now answers from the measured group's fit.
    let after = app.post_json("/v1/estimates/comm", &req).await.json();
    assert_eq!(after["source"], "calibrated:dgx-h100");
    assert_eq!(after["calibrated"]["how"], "measured_group");
    let fit = &group["fit"];
    let expected =
        fit["latency_us"].as_f64().unwrap() + 1.75 * 1_073_741_824.0 / (fit["busbw_gbs"].as_f64().unwrap() * 1e3);
    assert!((after["time_us"].as_f64().unwrap() - expected).abs() / expected < 1e-9);

    // A training prediction on the calibrated system names the calibration as a source.
    let p = app
        .post_json(
            "/v1/predictions/training",
            &json!({"system": "dgx-h100",
        "model": {"layers": 8, "hidden": 4096, "heads": 32, "seq_len": 2048, "vocab": 32000},
        "parallelism": {"tp": 8, "pp": 1, "dp": 1, "micro_batch": 1, "grad_accum": 2}}),
        )
        .await
        .json();
    assert!(p["sources"].as_array().unwrap().iter().any(|s| s == "calibrated:dgx-h100"), "{}", p["sources"]);

    // Bad placements name their field.
    let mut bad = req.clone();
    bad["gpus_per_node"] = json!(16);
    assert_eq!(app.post_json("/v1/estimates/comm", &bad).await.problem(422)["errors"][0]["field"], "gpus_per_node");
    app.post_json("/v1/systems/nope/calibrate", &json!({})).await.problem(404);
}

#[tokio::test]
async fn mt4g_reports_refine_catalog_gpus_and_systems_see_them() {
    let app = TestApp::new().await;
    let r = app.post_bytes("/v1/gpus/import?format=mt4g", fixture("mt4g/NVIDIA_H100_80GB_HBM3.json"), &[]).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let g = r.json();
    assert_eq!(g["created"], false);
    assert_eq!(g["gpu"]["name"], "H100-SXM5-80GB");
    assert_eq!(g["gpu"]["imported"], true);
    // Values read from the report: 132 SMs; L2 latency ≈ 219 cycles (p50/mean as the report gives).
    assert_eq!(g["gpu"]["sm_count"], 132);
    let l2 = g["gpu"]["hierarchy"]["l2"]["latency_cycles"].as_f64().unwrap();
    assert!((200.0..240.0).contains(&l2), "{l2}");
    // Systems on that GPU resolve to the refined description.
    let sys = app.get("/v1/systems/dgx-h100").await.json();
    assert_eq!(sys["gpu_spec"]["hierarchy"]["l2"]["latency_cycles"], g["gpu"]["hierarchy"]["l2"]["latency_cycles"]);
    // An unknown device needs a base; a raw measurement file is not a report.
    let mut other: serde_json::Value = serde_json::from_slice(&fixture("mt4g/NVIDIA_H100_80GB_HBM3.json")).unwrap();
    other["general"]["name"] = json!("Lab Prototype X1");
    let raw = serde_json::to_vec(&other).unwrap();
    let p = app.post_bytes("/v1/gpus/import", raw.clone(), &[]).await.problem(422);
    assert_eq!(p["errors"][0]["field"], "base");
    let r = app.post_bytes("/v1/gpus/import?base=H100", raw, &[]).await;
    assert_eq!(r.status, 201);
    assert_eq!(app.get("/v1/gpus/Lab%20Prototype%20X1").await.json()["peak_tflops"]["bf16"], 989.5);
    app.post_bytes("/v1/gpus/import", fixture("mt4g/NVIDIA_H100_80GB_HBM3_-_L1_Size.raw.txt"), &[]).await.problem(422);
}

#[tokio::test]
async fn implausible_inline_gpus_are_refused_not_answered_with_nulls() {
    // Found by schemathesis: a clock of 5e-324 GHz passed "positive" and made every time infinite (JSON null).
    let app = TestApp::new().await;
    let gpu = json!({"name": "my-gpu", "vendor": "nvidia", "sm_count": 108, "clock_ghz": 5e-324, "memory_gib": 40,
                     "memory_bandwidth_gbs": 1555, "l2_mib": 40,
                     "peak_tflops": {"fp64": 9.7, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "fp8": null}});
    let req = json!({"gpu": gpu, "op": "linear", "phase": "fwd", "dtype": "fp16",
                     "dims": {"B": 1, "M": 1024, "N": 2560, "K": 2560}});
    let p = app.post_json("/v1/estimates/operator", &req).await.problem(422);
    assert_eq!(p["errors"][0]["field"], "gpu.clock_ghz");
    // The same GPU at 1.41 GHz answers, with finite times: 2·1024·2560·2560 FLOP at 312 TFLOP/s ≥ 43 µs.
    let mut ok = req.clone();
    ok["gpu"]["clock_ghz"] = json!(1.41);
    let r = app.post_json("/v1/estimates/operator", &ok).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let t = r.json()["analytic_us"].as_f64().unwrap();
    assert!(t >= 2.0 * 1024.0 * 2560.0 * 2560.0 / 312e6, "{t}");
}

/// The serving classes through `POST /v1/estimates/operator` with their named dims.
#[tokio::test]
async fn serving_operator_classes_estimate_with_named_dims() {
    let app = TestApp::new().await;
    let req = json!({"gpu": "NVIDIA H100 80GB HBM3", "op": "attention_decode", "phase": "fwd", "dtype": "bf16",
        "dims": {"B": 32, "C": 4096, "A": 8, "G": 1, "D": 128}});
    let v = app.post_json("/v1/estimates/operator", &req).await.json();
    assert_eq!(v["dims"], json!([32, 4096, 8, 1, 128]), "{v}");
    // FLOPs 4·32·4096·8·128; bytes: new K/V read and written 2·32·1·128·(2 + 2) + cache 2·32·4096·1·128·2 + q/o
    // 2·32·8·128·2.
    assert_eq!(v["analytic"]["flops"], 536_870_912.0);
    assert_eq!(v["analytic"]["bytes"], 32_768.0 + 67_108_864.0 + 131_072.0);
    assert_eq!(v["analytic"]["bound"], "memory");
    let moe = json!({"gpu": "H100", "op": "moe", "dtype": "fp8_block",
        "dims": {"T": 16, "H": 7168, "F": 512, "E": 256, "K": 8}});
    // 6·16·8·7168·512 FLOPs.
    assert_eq!(app.post_json("/v1/estimates/operator", &moe).await.json()["analytic"]["flops"], 2_818_572_288.0);
    let prefill = json!({"gpu": "H100", "op": "attention_prefill", "dtype": "bf16",
        "dims": {"B": 2, "L": 1024, "A": 8, "G": 1, "D": 128}});
    // 2·2·1024²·8·128 FLOPs (causal); bytes: q/o 2·8·2·1024·128·2, new K/V read and written 2·1·2·1024·128·(2 + 2),
    // cached K/V read 2·1·2·1024·128·2: (32 + 8 + 4)·2·1024·128 = 11,534,336.
    let p = app.post_json("/v1/estimates/operator", &prefill).await.json();
    assert_eq!(
        (p["analytic"]["flops"].as_f64(), p["analytic"]["bytes"].as_f64()),
        (Some(4_294_967_296.0), Some(11_534_336.0))
    );
    let problem = |r: crate::common::Reply| r.problem(422)["errors"][0]["field"].as_str().unwrap().to_string();
    let mut bwd = req.clone();
    bwd["phase"] = json!("bwd");
    assert_eq!(problem(app.post_json("/v1/estimates/operator", &bwd).await), "phase");
    let mut four = req.clone();
    four["dims"] = json!({"B": 32, "C": 4096, "A": 8, "D": 128});
    assert_eq!(problem(app.post_json("/v1/estimates/operator", &four).await), "dims");
    // H100 has no FP4 tensor cores: nvfp4 is refused with the field that says so.
    let mut fp4 = req.clone();
    fp4["dtype"] = json!("nvfp4");
    let r = app.post_json("/v1/estimates/operator", &fp4).await.problem(422);
    assert_eq!(r["errors"][0]["field"], "dtype");
    assert!(r["detail"].as_str().unwrap().contains("peak_tflops.fp4"), "{r}");
}

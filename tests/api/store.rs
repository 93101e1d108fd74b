//! The store on every engine: a fresh SQLite file, and a fresh PostgreSQL database when
//! `PERFCAST_TEST_POSTGRES_URL` names a server (`scripts/test` starts one) — one test text for both engines.

use std::collections::BTreeMap;

use perfcast::hw::{GpuRef, Link, SystemSpec};
use perfcast::samples::{CommSample, KernelSample, OpSample, TimerSample};
use perfcast::store::profiles::{NewProfile, SampleBatch, Stored};
use perfcast::store::replicas::TrainerLock;
use perfcast::store::testing::{self, stores};
use perfcast::store::{Engine, StoreError};
use serde_json::json;

fn spec(name: &str) -> SystemSpec {
    SystemSpec {
        name: name.into(),
        gpu: GpuRef::Name("L4".into()),
        gpus_per_node: 2,
        nodes: 3,
        intra_node: Link::new("pcie4", 32.0, 3.0),
        inter_node: Link::new("ethernet", 12.5, 10.0),
        description: Some("lab box".into()),
    }
}

fn upload<'a>(raw: &'a [u8], labels: &[(&str, &str)]) -> NewProfile<'a> {
    use sha2::Digest;
    NewProfile {
        sha256: hex::encode(sha2::Sha256::digest(raw)),
        format: "perfcast".into(),
        system: Some("dgx-h100".into()),
        gpu: None,
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        raw,
        rejected: Vec::new(),
    }
}

fn batch() -> SampleBatch {
    let op: OpSample = serde_json::from_value(json!({"op": "linear", "phase": "fwd", "dtype": "bf16", "gpu": "H100",
        "dims": [8, 4096, 4096, 1, 0], "time_us": 12.5, "attributes": {"run": "a"}}))
    .unwrap();
    let kernel: KernelSample = serde_json::from_value(json!({"name": "gemm", "gpu": "H100", "duration_us": 3.5,
        "grid": [1, 2, 3], "metrics": {"dram_bytes": 1024.0}}))
    .unwrap();
    let timer: TimerSample = serde_json::from_value(json!({"name": "MPI_Allreduce", "group": "MPI", "rank": 3,
        "calls": 2.0, "exclusive_us": 5.0, "inclusive_us": 6.0}))
    .unwrap();
    SampleBatch {
        ops: vec![(op, 42)],
        comms: vec![CommSample::timed(perfcast::op::Collective::AllReduce, 1 << 20, 8, 50.0)],
        kernels: vec![kernel],
        timers: vec![timer],
    }
}

#[tokio::test]
async fn migrations_apply_and_presets_are_seeded_once() {
    for store in stores().await {
        // perlmutter-a100-40g, vista-gh200, dgx-a100-80g, dgx-h100, dgx-h200, dgx-b200, dgx-b300, gb200-nvl72,
        // gb300-nvl72.
        assert_eq!(store.list_systems().await.unwrap().len(), 9, "{:?}", store.engine());
        // Opening again (a restart, or a second replica) neither duplicates nor fails.
        let again = store.reopen().await;
        assert_eq!(again.list_systems().await.unwrap().len(), 9);
        store.ping().await.unwrap();
    }
}

#[tokio::test]
async fn insert_get_and_conflict() {
    for store in stores().await {
        let stored = store.insert_system(&spec("lab")).await.unwrap();
        assert!(!stored.preset);
        assert!(stored.created_at.ends_with('Z') && stored.created_at.len() == 24, "{}", stored.created_at);
        assert_eq!(store.get_system("lab").await.unwrap().spec, spec("lab"));
        assert!(matches!(store.insert_system(&spec("lab")).await, Err(StoreError::Conflict(_))));
        assert!(matches!(store.get_system("nope").await, Err(StoreError::NotFound(_))));
        // Names are exact: a preset name can't be overwritten either.
        assert!(matches!(store.insert_system(&spec("dgx-h100")).await, Err(StoreError::Conflict(_))));
        assert!(store.get_system("dgx-h100").await.unwrap().preset);
    }
}

#[tokio::test]
async fn uploads_round_trip_every_sample_kind_and_name_their_datasets() {
    for store in stores().await {
        let raw = b"one upload";
        let created = store.insert_profile(&upload(raw, &[("dataset", "lab-runs")]), &batch(), None).await.unwrap();
        let Stored::Created(p) = created else { panic!("not created") };
        assert_eq!((p.samples, p.raw_bytes), (4, raw.len() as u64));
        assert_eq!(store.profile_raw(&p.id).await.unwrap(), raw);
        let (rows, total) = store.profile_samples(&p.id, 10, 0).await.unwrap();
        assert_eq!(total, 4);
        let kinds: Vec<&str> = rows.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, ["op", "comm", "kernel", "timer"]);
        assert_eq!(rows[0].data["dims"], json!([8, 4096, 4096, 1, 0]));
        assert_eq!(rows[0].data["attributes"]["run"], "a");
        assert_eq!(rows[2].data["grid"], json!([1, 2, 3]));
        assert_eq!(rows[3].data["group"], "MPI");
        let ops = store.op_rows("linear", "fwd", "bf16", &["", "vllm"]).await.unwrap();
        assert_eq!((ops.len(), ops[0].split_key, ops[0].dims[1]), (1, 42, 4096));
        assert_eq!(store.op_datasets("linear", "fwd", "bf16", &["", "vllm"]).await.unwrap(), ["lab-runs"]);
        // An engine-neutral sample is no TensorRT-LLM measurement.
        assert!(store.op_rows("linear", "fwd", "bf16", &["trtllm"]).await.unwrap().is_empty());
        assert_eq!(store.comm_samples("dgx-h100").await.unwrap().len(), 1);
        let (listed, n) = store.list_profiles(10, 0).await.unwrap();
        assert_eq!((listed.len(), n), (1, 1));
    }
}

#[tokio::test]
async fn operator_samples_keep_their_engine_kernel_and_compute_precision() {
    for store in stores().await {
        // The same fp8-KV prefill shape measured by TensorRT-LLM with and without FP8 FMHA, one SGLang row (its
        // collector's `framework` label only), one vLLM row and one engine-neutral row.
        let op = |attributes: serde_json::Value, time: f64| -> (OpSample, u64) {
            let s = serde_json::from_value(json!({"op": "attention_prefill", "phase": "fwd", "dtype": "fp8",
                "gpu": "H100", "dims": [1, 1024, 32, 8, 128], "time_us": time, "attributes": attributes}))
            .unwrap();
            (s, time as u64)
        };
        let batch = SampleBatch {
            ops: vec![
                op(json!({"backend": "trtllm", "kernel_source": "torch_flow", "attn_dtype": "fp8"}), 100.0),
                op(json!({"backend": "trtllm", "kernel_source": "torch_flow", "attn_dtype": "bfloat16"}), 130.0),
                op(json!({"framework": "SGLang", "kernel_source": "fa3", "attn_dtype": "fp8"}), 110.0),
                op(json!({"backend": "vllm", "kernel_source": "vllm_flash_attn_fa3"}), 120.0),
                op(json!({"run": "lab"}), 140.0),
            ],
            comms: vec![],
            kernels: vec![],
            timers: vec![],
        };
        store.insert_profile(&upload(b"engines", &[("dataset", "aic")]), &batch, None).await.unwrap();
        let counts = store.op_sample_counts().await.unwrap();
        let engines: Vec<(&str, u64)> = counts.iter().map(|c| (c.engine.as_str(), c.samples)).collect();
        assert_eq!(engines, [("", 1), ("sglang", 1), ("trtllm", 2), ("vllm", 1)], "{:?}", store.engine());
        let trt = store.op_rows("attention_prefill", "fwd", "fp8", &["trtllm"]).await.unwrap();
        let kernels: Vec<(&str, &str, f64)> =
            trt.iter().map(|r| (r.kernel_source.as_str(), r.compute_dtype.as_str(), r.time_us)).collect();
        assert_eq!(kernels, [("torch_flow", "fp8", 100.0), ("torch_flow", "bf16", 130.0)]);
        let generic = store.op_rows("attention_prefill", "fwd", "fp8", &["", "vllm"]).await.unwrap();
        let times: Vec<f64> = generic.iter().map(|r| r.time_us).collect();
        assert_eq!(times, [120.0, 140.0]);
        assert_eq!(generic[0].compute_dtype, "");
        assert_eq!(store.op_datasets("attention_prefill", "fwd", "fp8", &["sglang"]).await.unwrap(), ["aic"]);
    }
}

#[tokio::test]
async fn concurrent_identical_uploads_store_one_profile_and_answer_both() {
    for store in stores().await {
        // Two "replicas": two pools on the same database.
        let other = store.reopen().await;
        let raw = b"the same bytes from two CI jobs at once".to_vec();
        let mut tasks = Vec::new();
        for i in 0..8 {
            let s = if i % 2 == 0 { store.store.clone() } else { other.clone() };
            let raw = raw.clone();
            tasks.push(tokio::spawn(async move { s.insert_profile(&upload(&raw, &[]), &batch(), None).await }));
        }
        let mut ids = Vec::new();
        let mut created = 0;
        for t in tasks {
            match t.await.unwrap().unwrap() {
                Stored::Created(p) => {
                    created += 1;
                    ids.push(p.id)
                }
                Stored::Duplicate(p) => ids.push(p.id),
            }
        }
        assert_eq!(created, 1, "{:?}", store.engine());
        ids.dedup();
        assert_eq!(ids.len(), 1);
        assert_eq!(store.list_profiles(10, 0).await.unwrap().1, 1);
    }
}

#[tokio::test]
async fn each_job_is_claimed_once_and_an_expired_lease_is_claimed_again() {
    for store in stores().await {
        let other = store.reopen().await;
        for i in 0..6 {
            store.create_job("calibrate", &json!({"system": format!("s{i}")}), false).await.unwrap();
        }
        // Deduplication compares parameters as JSON values.
        let a = store.create_job("calibrate", &json!({"a": 1, "b": [1, 2]}), true).await.unwrap();
        let b = store.create_job("calibrate", &json!({"b": [1, 2], "a": 1}), true).await.unwrap();
        assert_eq!(a.id, b.id);
        // Two replicas claim concurrently: every job exactly once.
        let claim = |s: perfcast::store::Store, owner: &'static str| async move {
            let mut got = Vec::new();
            while let Some(j) = s.claim_job_for(&["calibrate"], owner, 60).await.unwrap() {
                got.push(j.id);
            }
            got
        };
        let (x, y) = tokio::join!(claim(store.store.clone(), "a"), claim(other.clone(), "b"));
        let mut all: Vec<i64> = x.iter().chain(&y).copied().collect();
        all.sort();
        assert_eq!(all.len(), 7, "{x:?} {y:?}");
        all.dedup();
        assert_eq!(all.len(), 7, "a job was claimed twice: {x:?} {y:?}");
        // A lease that expires (its replica died) is claimed again by another replica; the dead one's renewal fails.
        let job = store.create_job("retrain", &json!({}), false).await.unwrap();
        let first = store.claim_job_for(&["retrain"], "dying", 1).await.unwrap().unwrap();
        assert_eq!((first.id, first.attempts), (job.id, 1));
        assert!(store.renew_job_lease(job.id, "dying", 1).await.unwrap());
        assert!(other.claim_job_for(&["retrain"], "survivor", 60).await.unwrap().is_none(), "lease still valid");
        tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
        let again = other.claim_job_for(&["retrain"], "survivor", 60).await.unwrap().unwrap();
        assert_eq!((again.id, again.attempts), (job.id, 2));
        assert!(again.message.starts_with("re-run"), "{}", again.message);
        assert!(!store.renew_job_lease(job.id, "dying", 60).await.unwrap());
        assert!(other.finish_job(job.id, "survivor", true, "done", &json!({"ok": true})).await.unwrap());
        assert_eq!(store.get_job(job.id).await.unwrap().result, Some(json!({"ok": true})));
    }
}

#[tokio::test]
async fn keys_calibrations_gpus_and_fingerprints() {
    for store in stores().await {
        let k = store.insert_key("kid", "ci", "write", "abc").await.unwrap();
        assert_eq!(k.revoked_at, None);
        store.touch_key("kid").await.unwrap();
        assert!(store.key("kid").await.unwrap().unwrap().last_used_at.is_some());
        assert_eq!(store.revoke_key("ci").await.unwrap(), 1);
        assert!(store.has_keys().await.unwrap());
        let before = store.systems_fingerprint().await.unwrap();
        let c = store.put_calibration("dgx-h100", &json!({"links": []}), 3).await.unwrap();
        assert_eq!(c.samples, 3);
        let c2 = store.put_calibration("dgx-h100", &json!({"links": [1]}), 4).await.unwrap();
        assert_eq!(store.calibration("dgx-h100").await.unwrap().unwrap().calibration, c2.calibration);
        assert_ne!(store.systems_fingerprint().await.unwrap(), before);
        assert_eq!(store.models_fingerprint().await.unwrap(), (0, 0));
        assert_eq!(store.comm_sample_counts().await.unwrap().len(), 0);
    }
}

#[tokio::test]
async fn one_trainer_is_elected_and_the_election_survives_its_death() {
    let Some(store) = testing::postgres().await else {
        eprintln!("note: {} is not set; the trainer election test is skipped", testing::POSTGRES_URL_VAR);
        return;
    };
    assert_eq!(store.engine(), Engine::Postgres);
    let other = store.reopen().await;
    let (mut a, mut b) = (TrainerLock::new(), TrainerLock::new());
    assert!(a.held(&store).await.unwrap());
    assert!(!b.held(&other).await.unwrap());
    assert!(a.held(&store).await.unwrap(), "the trainer stays the trainer");
    drop(a); // its connection closes, as when its process is killed
    let mut won = false;
    for _ in 0..50 {
        if b.held(&other).await.unwrap() {
            won = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(won, "the survivor never became the trainer");
}

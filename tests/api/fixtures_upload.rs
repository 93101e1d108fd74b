//! Every profiler fixture of `../shared/fixtures` (MT4G aside: it is a GPU import, see estimates.rs) uploads
//! through HTTP with 201 and samples — alone, or with the companion files of its run as multipart.

use crate::common::{Reply, TestApp};
use serde_json::Value;

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures").join(path)).unwrap()
}

async fn single(app: &TestApp, path: &str, query: &str) -> Value {
    let r = app.post_bytes(&format!("/v1/profiles{query}"), fixture(path), &[]).await;
    created(path, &r)
}

fn created(what: &str, r: &Reply) -> Value {
    assert_eq!(r.status, 201, "{what}: {}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    assert!(v["samples"].as_u64().unwrap() > 0, "{what}: no samples: {v}");
    v
}

async fn multipart(app: &TestApp, paths: &[&str], query: &str) -> Value {
    let boundary = "perfcast-test-boundary-7c1f";
    let mut body = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let name = p.rsplit('/').next().unwrap();
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"f{i}\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n")
                .as_bytes(),
        );
        body.extend_from_slice(&fixture(p));
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let ct = format!("multipart/form-data; boundary={boundary}");
    let r = app.post_bytes(&format!("/v1/profiles{query}"), body, &[("content-type", &ct)]).await;
    created(&paths.join(" + "), &r)
}

async fn samples(app: &TestApp, id: &Value) -> Vec<Value> {
    let page = app.get(&format!("/v1/profiles/{}/samples?limit=1000", id.as_str().unwrap())).await.json();
    page["samples"].as_array().unwrap().clone()
}

#[tokio::test]
async fn nccl_tests_and_ncu_fixtures() {
    let app = TestApp::new().await;
    let single_node = single(&app, "nccl-tests/xxrjun_nccl_N1_G8_H100_single_node.log", "?system=dgx-h100").await;
    assert_eq!(single_node["format"], "nccl_tests");
    // From the log: all_reduce 33554432 B out-of-place, 8 ranks (read by eye from the table).
    let s = samples(&app, &single_node["id"]).await;
    assert!(s.iter().any(|x| x["kind"] == "comm" && x["data"]["bytes"] == 33554432 && x["data"]["ranks"] == 8));
    single(&app, "nccl-tests/xxrjun_nccl_N10_G8_H100_80gpu_multinode.log", "?system=dgx-h100").await;
    single(&app, "nccl-tests/superbench_nccl_allreduce_A100-SXM4-40GB_8gpu.log", "").await;
    // The old all-gather log does not name its collective: the upload says it.
    single(&app, "nccl-tests/superbench_nccl_allgather.log", "?collective=all_gather").await;
    for f in [
        "ncu/gene_V100_summit_ncu2020_details_units-base_time-dram.csv",
        "ncu/gene_V100_summit_ncu2020_details_units-base_time-flops.csv",
        "ncu/microgpusim_GTX1080_ncu_page_raw_wide.csv",
        "ncu/superbench_B200_ncu_details_csv_with_PROF_lines.log",
    ] {
        let p = single(&app, f, "").await;
        assert_eq!(p["format"], "ncu_csv", "{f}");
    }
}

#[tokio::test]
async fn pytorch_trace_fixtures() {
    let app = TestApp::new().await;
    for f in [
        "pytorch_trace/hta_A100_simple_add_trace.json.gz",
        "pytorch_trace/hta_MI250_ROCm6.2_minitoy_train_kineto.json.gz",
        "pytorch_trace/hta_distributed_nccl_rank0_of_128_sampled.json.gz",
        "pytorch_trace/hta_minimal_backward_thread.json",
    ] {
        let p = single(&app, f, "").await;
        assert_eq!(p["format"], "torch_trace", "{f}");
    }
}

#[tokio::test]
async fn rocprof_fixtures_alone_and_with_their_companions() {
    let app = TestApp::new().await;
    for f in [
        "rocprof/omniperf_MI200_gfx90a_rocprofv1_SQ_IFETCH_LEVEL.csv",
        "rocprof/omniperf_MI200_gfx90a_rocprofv1_pmc_perf.csv",
        "rocprof/omniperf_MI200_gfx90a_rocprofv1_timestamps.csv",
        "rocprof/rocprofv3_kernel_trace.csv",
        "rocprof/rocprofv3_hip_api_stats.csv",
        "rocprof/rocprofv3_memory_copy_trace.csv",
    ] {
        single(&app, f, "").await;
    }
    // The Omniperf MI200 run: tables, system info and the counter input file together — 3 dispatches.
    let mi200 = multipart(
        &app,
        &[
            "rocprof/omniperf_MI200_gfx90a_rocprofv1_SQ_IFETCH_LEVEL.csv",
            "rocprof/omniperf_MI200_gfx90a_rocprofv1_timestamps.csv",
            "rocprof/omniperf_MI200_gfx90a_rocprofv1_pmc_perf.csv",
            "rocprof/omniperf_MI200_sysinfo.csv",
            "rocprof/omniperf_MI200_perfmon_SQ_IFETCH_LEVEL.input.txt",
        ],
        "",
    )
    .await;
    assert_eq!(mi200["samples_by_kind"]["kernel"], 3);
    // MI300X rocprofv2: the timestamps are float notation with no usable duration; the busy-cycle counter gives it.
    let mi300x = multipart(
        &app,
        &["rocprof/omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv", "rocprof/omniperf_MI300X_rocprofv2_timestamps.csv"],
        "?gpu=MI300X",
    )
    .await;
    assert_eq!(mi300x["samples_by_kind"]["kernel"], 3);
    let s = samples(&app, &mi300x["id"]).await;
    // Dispatch 0: GRBM_GUI_ACTIVE 449,213 cycles / 8 XCDs / 2.1 GHz = 26.7389 µs.
    assert!(
        s.iter().any(|x| (x["data"]["duration_us"].as_f64().unwrap_or(0.0) - 449_213.0 / 8.0 / 2100.0).abs() < 1e-3),
        "{s:?}"
    );
    // rocprofv3: the kernel trace with its counters, API statistics and memory copies.
    let v3 = multipart(
        &app,
        &[
            "rocprof/rocprofv3_kernel_trace.csv",
            "rocprof/rocprofv3_counter_collection.csv",
            "rocprof/rocprofv3_hip_api_stats.csv",
            "rocprof/rocprofv3_memory_copy_trace.csv",
        ],
        "",
    )
    .await;
    assert_eq!(v3["samples_by_kind"]["kernel"], 7);
    assert_eq!(v3["samples_by_kind"]["timer"], 19);
}

#[tokio::test]
async fn tau_fixtures_alone_and_as_one_run() {
    let app = TestApp::new().await;
    for f in [
        "tau/tau2_examples_wrap_mpi_profile.0.0.0",
        "tau/tau2_opencl_FFT_profile.0.0.0",
        "tau/tau2_taudb_test_openmp_profile.0.0.1",
        "tau/hatchet_tau-cpi-mpi_profile.0.0.0",
    ] {
        let p = single(&app, f, "").await;
        assert_eq!(p["format"], "tau", "{f}");
    }
    // The four ranks of the cpi run together: the rank count is known, so the MPI collectives become samples.
    let cpi = multipart(
        &app,
        &[
            "tau/hatchet_tau-cpi-mpi_profile.0.0.0",
            "tau/hatchet_tau-cpi-mpi_profile.1.0.0",
            "tau/hatchet_tau-cpi-mpi_profile.2.0.0",
            "tau/hatchet_tau-cpi-mpi_profile.3.0.0",
        ],
        "?system=perlmutter-a100-40g",
    )
    .await;
    assert_eq!(cpi["samples_by_kind"]["comm"], 8);
    assert_eq!(cpi["samples_by_kind"]["timer"], 48);
    let s = samples(&app, &cpi["id"]).await;
    assert!(s.iter().any(|x| x["kind"] == "comm" && x["data"]["collective"] == "broadcast" && x["data"]["ranks"] == 4));
}

/// NVIDIA aiconfigurator's Parquet tables: each alone, all six with their YAML as one multipart upload, a CSV.gz copy,
/// and a truncated table (422 problem+json). Row counts are pyarrow's reading of each file's footer.
#[tokio::test]
async fn aiconfigurator_tables_alone_together_and_damaged() {
    let app = TestApp::new().await;
    let dir = "aiconfigurator/a100_sxm_vllm_";
    let tables = [
        ("gemm_vllm_0.14.0_gemm_perf.parquet", 9240, "op"),
        ("attention_vllm_0.14.0_context_attention_perf.parquet", 5457, "op"),
        ("attention_vllm_0.14.0_generation_attention_perf.parquet", 5431, "op"),
        ("comm_nccl_2.27.3_nccl_perf.parquet", 504, "comm"),
        ("comm_vllm_0.14.0_custom_allreduce_perf.parquet", 138, "comm"),
        ("moe_vllm_0.14.0_moe_perf.parquet", 6360, "op"),
    ];
    let mut ids = Vec::new();
    for (file, rows, kind) in tables {
        let p = single(&app, &format!("{dir}{file}"), "").await;
        assert_eq!(p["format"], "aiconfigurator", "{file}");
        assert_eq!(p["samples"], rows, "{file}: {p}");
        assert_eq!(p["samples_by_kind"][kind], rows, "{file}: {p}");
        ids.push(p["id"].clone());
    }
    // The GEMM's first row, stored: the device resolves to the catalog's name; five dims.
    let first = &samples(&app, &ids[0]).await[0]["data"];
    assert_eq!(first["op"], "linear");
    assert_eq!(first["gpu"], "A100-SXM4-80GB");
    assert_eq!(first["dims"], serde_json::json!([1, 8192, 65536, 4096, 0]));
    // One database in one upload: the six tables and the collection metadata.
    let mut parts: Vec<String> = tables.iter().map(|t| format!("{dir}{}", t.0)).collect();
    parts.push(format!("{dir}gemm_vllm_0.14.0_collection_meta.yaml"));
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    let all = multipart(&app, &refs, "").await;
    assert_eq!(all["samples"], 9240 + 5457 + 5431 + 504 + 138 + 6360);
    assert_eq!(all["samples_by_kind"]["comm"], 504 + 138);
    // The CSV.gz copy of the same GEMM table (shared/data), as a raw body.
    let csv = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/aiconfigurator/a100_sxm/gemm_perf.csv.gz"),
    )
    .unwrap();
    let r = app.post_bytes("/v1/profiles", csv, &[]).await;
    let v = created("gemm_perf.csv.gz", &r);
    assert_eq!((v["format"].as_str(), v["samples"].as_u64()), (Some("aiconfigurator"), Some(9240)));
    // A truncated table is a problem, not a crash.
    let mut cut = fixture(&format!("{dir}moe_vllm_0.14.0_moe_perf.parquet"));
    cut.truncate(cut.len() / 2);
    let p = app.post_bytes("/v1/profiles?format=aiconfigurator", cut, &[]).await.problem(422);
    assert!(p["detail"].as_str().unwrap().contains("Parquet"), "{p}");
}

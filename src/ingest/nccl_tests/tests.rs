use super::*;
use crate::ingest::{Context, Parsed};
use crate::samples::{Rejected, Sample};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../shared/fixtures/nccl-tests/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn comms(p: &Parsed) -> Vec<&CommSample> {
    p.samples.iter().filter_map(|s| if let Sample::Comm(c) = s { Some(c) } else { None }).collect()
}

fn find(p: &Parsed, c: Collective, bytes: u64, in_place: bool) -> &CommSample {
    comms(p)
        .into_iter()
        .find(|s| s.collective == c && s.bytes == bytes && s.attributes["in_place"] == in_place.to_string())
        .unwrap_or_else(|| panic!("{c:?} {bytes} in_place={in_place}"))
}

#[test]
fn old_all_reduce_log_infers_the_collective_and_skips_nccl_info() {
    let p = parse_text(&fixture("superbench_nccl_allreduce_A100-SXM4-40GB_8gpu.log"), &Context::default()).unwrap();
    // 34 rows, two of size 0: 32 sizes × (out-of-place, in-place).
    assert_eq!(comms(&p).len(), 64);
    assert_eq!(p.rejected.len(), 4);
    assert!(p.rejected[0].reason.starts_with("size 0"));
    // "33554432  8388608  float  sum  374.3  89.65  156.89  N/A  372.8  90.00  157.50  N/A"
    let s = find(&p, Collective::AllReduce, 33554432, false);
    assert_eq!((s.time_us, s.algbw_gbs, s.busbw_gbs), (374.3, Some(89.65), Some(156.89)));
    assert_eq!((s.ranks, s.nodes, s.gpus_per_node), (8, Some(1), Some(8)));
    assert_eq!((s.dtype.as_deref(), s.attributes["gpu"].as_str()), (Some("float"), "A100-SXM4-40GB"));
    assert_eq!(s.attributes["redop"], "sum");
    assert_eq!(find(&p, Collective::AllReduce, 33554432, true).time_us, 372.8);
}

#[test]
fn old_all_gather_log_needs_the_collective() {
    let bytes = fixture("superbench_nccl_allgather.log");
    let e = parse_text(&bytes, &Context::default()).unwrap_err();
    assert!(e.message.contains("all_gather") && e.message.contains("give the collective"), "{e}");
    assert_eq!(e.line, Some(1));
    let ctx = Context { collective: Some(Collective::AllGather), ..Default::default() };
    let p = parse_text(&bytes, &ctx).unwrap();
    assert_eq!(comms(&p).len(), 2 * (34 - 5));
    // "33554432  1048576  float  265.8  126.24  110.46  N/A  257.5  130.33  114.04  N/A"
    let s = find(&p, Collective::AllGather, 33554432, false);
    assert_eq!((s.time_us, s.busbw_gbs, s.ranks), (265.8, Some(110.46), 8));
    assert_eq!(find(&p, Collective::AllGather, 33554432, true).busbw_gbs, Some(114.04));
}

#[test]
fn new_single_node_log_with_five_tests() {
    let p = parse_text(&fixture("xxrjun_nccl_N1_G8_H100_single_node.log"), &Context::default()).unwrap();
    assert_eq!(comms(&p).len(), 100);
    assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    // all_reduce "33554432  4194304  double  sum  -1  182.87  183.49  321.10  0  182.88  183.48  321.08  0"
    let s = find(&p, Collective::AllReduce, 33554432, false);
    assert_eq!((s.time_us, s.algbw_gbs, s.busbw_gbs), (182.87, Some(183.49), Some(321.10)));
    assert_eq!((s.ranks, s.nodes, s.gpus_per_node), (8, Some(1), Some(8)));
    assert_eq!(s.attributes["gpu"], "NVIDIA H100 80GB HBM3");
    assert_eq!(s.attributes["nccl_version"], "2.29.2");
    assert_eq!(s.attributes["nccl_tests_version"], "2.17.8");
    assert!(!s.attributes.contains_key("root"), "root -1 is not an attribute");
    assert_eq!(find(&p, Collective::AllReduce, 17179869184, true).time_us, 62359.0);
    for c in [Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll, Collective::SendRecv] {
        assert_eq!(comms(&p).iter().filter(|s| s.collective == c).count(), 20, "{c:?}");
    }
}

#[test]
fn new_multi_node_log_counts_ranks_and_hosts() {
    let p = parse_text(&fixture("xxrjun_nccl_N10_G8_H100_80gpu_multinode.log"), &Context::default()).unwrap();
    assert_eq!(comms(&p).len(), 100);
    // all_reduce "33554432  4194304  double  sum  -1  798.52  42.02  82.99  0  857.09  39.15  77.32  0"
    let s = find(&p, Collective::AllReduce, 33554432, false);
    assert_eq!(
        (s.time_us, s.busbw_gbs, s.ranks, s.nodes, s.gpus_per_node),
        (798.52, Some(82.99), 80, Some(10), Some(8))
    );
    assert_eq!(find(&p, Collective::AllReduce, 33554432, true).time_us, 857.09);
    // all_gather "17179868160  26843544  double  none  -1  52314.1  328.40  324.29  0 …"
    let g = find(&p, Collective::AllGather, 17179868160, false);
    assert_eq!((g.time_us, g.busbw_gbs, g.attributes["redop"].as_str()), (52314.1, Some(324.29), "none"));
    assert_eq!(find(&p, Collective::SendRecv, 33554432, false).time_us, 2271.70);
}

#[test]
fn failed_checks_short_rows_and_unsupported_tests() {
    let log = "# nccl-tests version 2.13.8 nccl-headers=21903 nccl-library=21903
# Collective test starting: gather_perf
# nThread 1 nGpus 2 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#  Rank  0 Group  0 Pid 1 on n1 device  0 [0x1b] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid 1 on n1 device  1 [0x1c] NVIDIA A100-SXM4-80GB
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
           8             2     float    none       0    10.00    0.00    0.00       0    10.00    0.00    0.00       0
# Collective test concluded: gather_perf
# nccl-tests version 2.13.8 nccl-headers=21903 nccl-library=21903
# Collective test starting: broadcast_perf
# nThread 1 nGpus 2 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#  Rank  0 Group  0 Pid 1 on n1 device  0 [0x1b] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid 1 on n2 device  0 [0x1b] NVIDIA A100-SXM4-80GB
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
        1024           256     float    none       0    20.00    0.05    0.05       3    21.00    0.05    0.05       0
n1:123:123 [0] NCCL INFO Channel 00/02
        2048           512     float    none       0    22.00
";
    let p = parse_text(log.as_bytes(), &Context::default()).unwrap();
    let c = comms(&p);
    assert_eq!(c.len(), 2);
    assert_eq!(
        (c[0].collective, c[0].bytes, c[0].attributes["in_place"].as_str()),
        (Collective::Broadcast, 1024, "true")
    );
    assert_eq!((c[0].ranks, c[0].nodes, c[0].gpus_per_node), (2, Some(2), Some(1)));
    assert_eq!(c[0].attributes["root"], "0");
    assert_eq!(c[0].attributes["nccl_version"], "2.19.3");
    assert_eq!(c[1].bytes, 2048);
    let reasons: Vec<(u64, &str)> = p.rejected.iter().map(|r| (r.line, r.reason.as_str())).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0].1.starts_with("gather_perf") && reasons[0].0 == 2);
    assert_eq!(reasons[1], (15, "out-of-place data check failed: 3 wrong elements"));
    assert!(reasons[2].0 == 17 && reasons[2].1.contains("expected 13 fields"), "{reasons:?}");
    assert!(parse_text(b"hello\n", &Context::default()).is_err());
    assert!(looks_like_text(b"# nThread 1 nGpus 8 minBytes 1"));
    assert!(!looks_like_text(b"# OSU MPI Latency Test v7.3"));
}

#[test]
fn json_report() {
    let json = r#"{"version":1,"start_time":"2025-01-01 00:00:00","args":["./build/all_reduce_perf","-b","8","-e","16","-J","r.json"],"env":[],"nccl_version":22703,"config":{"nthreads":1,"ngpus":1,"minimum_bytes":8,"maximum_bytes":16,"step_factor":2,"warmup_iters":5,"iterations":20,"aggregated_iterations":1,"validation":1,"graph":0,"blocking_collectives":"false","parallel_init":"false","devices":[{"rank":0,"group":0,"pid":11,"hostname":"a","device":0,"device_hex":"0000:1b:00","device_info":"NVIDIA H100 80GB HBM3"},{"rank":1,"group":0,"pid":12,"hostname":"a","device":1,"device_hex":"0000:43:00","device_info":"NVIDIA H100 80GB HBM3"},{"rank":2,"group":0,"pid":13,"hostname":"b","device":0,"device_hex":"0000:1b:00","device_info":"NVIDIA H100 80GB HBM3"},{"rank":3,"group":0,"pid":14,"hostname":"b","device":1,"device_hex":"0000:43:00","device_info":"NVIDIA H100 80GB HBM3"}]},"results":[{"size":8,"count":2,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":20.5,"alg_bw":0.000390,"bus_bw":0.000585,"nwrong":0.000000},"in_place":{"time":19.25,"alg_bw":0.000416,"bus_bw":0.000623,"nwrong":null},"actual_iterations":20,"experiment_name":""},{"size":16,"count":4,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":"nan","alg_bw":"nan","bus_bw":"nan","nwrong":null},"in_place":null}],"out_of_bounds":{"count":0,"okay":"true"},"average_bus_bandwidth":{"bandwidth":0.000604,"okay":"unchecked"},"errors":[],"end_time":"2025-01-01 00:00:01"}"#;
    assert!(looks_like_json(json.as_bytes()));
    let p = parse_json(json.as_bytes(), &Context::default()).unwrap();
    let c = comms(&p);
    assert_eq!(c.len(), 2);
    assert_eq!(
        (c[0].collective, c[0].bytes, c[0].ranks, c[0].nodes, c[0].gpus_per_node),
        (Collective::AllReduce, 8, 4, Some(2), Some(2))
    );
    assert_eq!((c[0].time_us, c[0].busbw_gbs), (20.5, Some(0.000585)));
    assert_eq!((c[1].time_us, c[1].attributes["in_place"].as_str()), (19.25, "true"));
    assert_eq!(c[0].attributes["nccl_version"], "2.27.3");
    assert_eq!(
        p.rejected,
        vec![Rejected { line: 1, reason: "results[1]: out-of-place time is not a positive number".into() }]
    );
    assert!(parse_json(b"{\"results\": [}", &Context::default()).unwrap_err().column.is_some());
    let no_name = r#"{"args": ["./x"], "results": [], "config": {"devices": [{"hostname": "a"}]}}"#;
    assert!(parse_json(no_name.as_bytes(), &Context::default()).unwrap_err().message.contains("give the collective"));
}

#[test]
fn versions_and_names() {
    assert_eq!(nccl_version(22902), "2.29.2");
    assert_eq!(nccl_version(2708), "2.7.8");
    assert_eq!(collective_of_test("/opt/nccl-tests/build/reduce_scatter_perf"), Some(Collective::ReduceScatter));
    assert_eq!(collective_of_test("hypercube_perf"), None);
}

use super::*;

fn comms(p: &Parsed) -> Vec<&CommSample> {
    p.samples.iter().filter_map(|s| if let Sample::Comm(c) = s { Some(c) } else { None }).collect()
}

const LATENCY_73: &str = "\
# OSU MPI-CUDA Latency Test v7.3
# Send Buffer on DEVICE (D) and Receive Buffer on DEVICE (D)
# Datatype: MPI_CHAR.
# Size       Avg Latency(us)   P50 Tail Lat(us)   P90 Tail Lat(us)   P99 Tail Lat(us)
1                       2.07               2.05               2.10               2.55
2                       2.06               2.05               2.09               2.40
[1699999999.123456] [node1:1234 :0]       ucp_context.c:1050 UCX  WARN  transport 'cuda_ipc' is not available

4194304               330.15             329.90             331.00             335.10
";

#[test]
fn latency_with_tail_columns_and_warnings() {
    let p = parse(LATENCY_73.as_bytes(), &Context { gpu: Some("H100".into()), ..Default::default() }).unwrap();
    let c = comms(&p);
    assert_eq!(c.len(), 3);
    assert_eq!((c[0].collective, c[0].bytes, c[0].ranks, c[0].time_us), (Collective::SendRecv, 1, 2, 2.07));
    assert_eq!((c[2].bytes, c[2].time_us), (4194304, 330.15));
    // algbw = 4194304 B / 330.15 µs = 12.70 GB/s; send/recv busbw = algbw.
    let algbw = 4194304.0 / 330.15e3;
    assert!((c[2].algbw_gbs.unwrap() - algbw).abs() < 1e-12);
    assert_eq!(c[2].busbw_gbs, c[2].algbw_gbs);
    assert_eq!(c[0].attributes["p99_us"], "2.55");
    assert_eq!(c[0].attributes["omb_version"], "7.3");
    assert_eq!(c[0].attributes["send_buffer"], "device");
    assert_eq!((c[0].attributes["gpu"].as_str(), c[0].dtype.as_deref()), ("H100", Some("char")));
    assert_eq!(c[0].attributes["benchmark"], "Latency");
    assert!(p.rejected.is_empty());
}

#[test]
fn bandwidth_tests_become_times_per_message() {
    let input = "\
# OSU MPI Bandwidth Test v5.9
# Size      Bandwidth (MB/s)
1                       3.21
1048576             24000.00
# OSU MPI Bi-Directional Bandwidth Test v5.9
# Size      Bandwidth (MB/s)
1048576             48000.00
# OSU MPI Multiple Bandwidth / Message Rate Test v5.9
# [ pairs: 4 ] [ window size: 64 ]
# Size                  MB/s        Messages/s
1048576             96000.00             91.55
";
    let p = parse(input.as_bytes(), &Context::default()).unwrap();
    let c = comms(&p);
    assert_eq!(c.len(), 4);
    // 1 B at 3.21 MB/s (= 3.21 B/µs) → 1/3.21 µs.
    assert!((c[0].time_us - 1.0 / 3.21).abs() < 1e-12);
    // 1 MiB at 24000 MB/s → 43.69 µs; algbw = 24 GB/s.
    assert!((c[1].time_us - 1048576.0 / 24000.0).abs() < 1e-9);
    assert!((c[1].algbw_gbs.unwrap() - 24.0).abs() < 1e-9);
    // Bidirectional 48000 MB/s counts both directions: 24 GB/s each way.
    assert!((c[2].time_us - 2.0 * 1048576.0 / 48000.0).abs() < 1e-9);
    // Four pairs share 96000 MB/s: 24 GB/s per pair.
    assert!((c[3].time_us - 4.0 * 1048576.0 / 96000.0).abs() < 1e-9);
    assert_eq!((c[3].attributes["pairs"].as_str(), c[3].attributes["messages_per_s"].as_str()), ("4", "91.55"));
    assert_eq!(c[1].attributes["time_from"], "bandwidth");
}

#[test]
fn collectives_need_ranks_and_scale_gather_sizes() {
    let input = "\
# OSU MPI Allreduce Latency Test v7.1
# Datatype: MPI_FLOAT.
# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations
4                       5.50              5.10              6.00        1000
65536                  40.00             39.00             41.00         100

# OSU MPI Allgather Latency Test v7.1
# Size       Avg Latency(us)
1024                   12.00
# OSU MPI Gather Latency Test v7.1
# Size       Avg Latency(us)
1024                   12.00
# OSU MPI Broadcast Latency Test v7.1
# Size       Avg Latency(us)
8                        1.0   extra
";
    let p = parse(input.as_bytes(), &Context::default()).unwrap();
    assert!(comms(&p).is_empty());
    assert_eq!(p.rejected.len(), 4);
    assert_eq!(p.rejected[0].line, 1);
    assert!(p.rejected[0].reason.contains("give ranks"), "{}", p.rejected[0].reason);
    assert!(p.rejected[2].reason.contains("Gather"), "{}", p.rejected[2].reason);
    let ctx = Context { ranks: Some(16), nodes: Some(2), gpus_per_node: Some(8), ..Default::default() };
    let p = parse(input.as_bytes(), &ctx).unwrap();
    let c = comms(&p);
    assert_eq!(c.len(), 3);
    assert_eq!((c[0].collective, c[0].bytes, c[0].ranks, c[0].time_us), (Collective::AllReduce, 4, 16, 5.5));
    assert_eq!((c[0].nodes, c[0].gpus_per_node, c[0].dtype.as_deref()), (Some(2), Some(8), Some("float")));
    assert_eq!((c[0].attributes["min_latency_us"].as_str(), c[0].attributes["iterations"].as_str()), ("5.10", "1000"));
    // busbw of an all-reduce over 16 ranks: algbw × 2·15/16.
    let algbw = 65536.0 / 40.0e3;
    assert!((c[1].busbw_gbs.unwrap() - algbw * 30.0 / 16.0).abs() < 1e-12);
    // Allgather: OSU's 1024 B is one rank's block: nccl-tests bytes = 16 × 1024.
    assert_eq!((c[2].collective, c[2].bytes), (Collective::AllGather, 16 * 1024));
    let last = p.rejected.last().unwrap();
    assert_eq!(last.line, 15);
    assert!(last.reason.contains("expected 2 fields"), "{}", last.reason);
}

#[test]
fn headers_and_errors() {
    assert_eq!(columns("Size  Latency (us)"), vec!["size", "latency(us)"]);
    assert_eq!(columns("Size Bandwidth (MB/s)"), vec!["size", "bandwidth(mb/s)"]);
    assert_eq!(columns("Size Avg Latency (us) Weird"), vec!["size", "avglatency(us)", "weird"]);
    assert_eq!(kind_of("Non-blocking Allreduce Latency"), Ok(Kind::Collective(Collective::AllReduce)));
    assert_eq!(kind_of("All-to-All Personalized Exchange Latency"), Ok(Kind::Collective(Collective::AllToAll)));
    assert_eq!(kind_of("Reduce_scatter Latency"), Ok(Kind::Collective(Collective::ReduceScatter)));
    assert!(kind_of("Allgatherv Latency").is_err());
    assert!(parse(b"nothing here\n", &Context::default()).is_err());
    assert!(looks_like(b"\n# OSU MPI Latency Test v7.3\n"));
    let validated = "# OSU MPI Latency Test v7.3\n# Size Avg Latency(us) Validation\n8 1.5 Pass\n16 1.6 Fail\n";
    let p = parse(validated.as_bytes(), &Context::default()).unwrap();
    assert_eq!((comms(&p).len(), p.rejected[0].line), (1, 4));
}

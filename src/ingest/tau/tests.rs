use super::*;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../shared/fixtures/tau/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn comms(p: &Parsed) -> Vec<&CommSample> {
    p.samples.iter().filter_map(|s| if let Sample::Comm(c) = s { Some(c) } else { None }).collect()
}

fn cpi_files() -> Vec<(String, Vec<u8>)> {
    (0..4).map(|r| (format!("profile.{r}.0.0"), fixture(&format!("hatchet_tau-cpi-mpi_profile.{r}.0.0")))).collect()
}

#[test]
fn cpi_rank0_profile_timers_and_events() {
    let p = parse_profile("profile.0.0.0", &fixture("hatchet_tau-cpi-mpi_profile.0.0.0")).unwrap();
    assert_eq!((p.node, p.context, p.thread, p.metric.as_str()), (Some(0), Some(0), Some(0), "TIME"));
    assert_eq!(p.timers.len(), 23);
    // ".TAU application" 1 7 449 51781 0 GROUP="TAU_DEFAULT"
    let app = &p.timers[0];
    assert_eq!(
        (app.name.as_str(), app.calls, app.subroutines, app.exclusive, app.inclusive),
        (".TAU application", 1.0, 7.0, 449.0, 51781.0)
    );
    assert_eq!((app.group.as_str(), app.line), ("TAU_DEFAULT", 3));
    // "MPI_Finalize()  " 1 4 4458 32304 0 GROUP="MPI"
    let fin = p.timers.iter().find(|t| t.name == "MPI_Finalize()").unwrap();
    assert_eq!((fin.calls, fin.exclusive, fin.inclusive), (1.0, 4458.0, 32304.0));
    // 11 flat MPI timers; callpath copies are not counted.
    assert_eq!(p.mpi_timers().count(), 11);
    assert!(p.timers.iter().any(|t| t.is_callpath() && t.is_mpi()));
    assert_eq!(p.user_events.len(), 2);
    let bcast = &p.user_events[0];
    assert_eq!(
        (bcast.name.as_str(), bcast.count, bcast.mean, bcast.sum_squares),
        ("Message size for broadcast", 1.0, 4.0, 16.0)
    );
    assert_eq!(p.metadata["Hostname"], "nid01045");
    assert_eq!(p.metadata["TAU Version"], "2.29-git");
}

#[test]
fn cpi_four_ranks_become_broadcast_and_reduce_samples() {
    let files = cpi_files();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    let p = parse_files(&refs, &Context::default()).unwrap();
    let c = comms(&p);
    assert_eq!(c.len(), 8);
    assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    // Rank 0: MPI_Bcast 1 call, 218 µs exclusive, 4 bytes; MPI_Reduce 473 µs, 8 bytes; 4 ranks on nid01045.
    let b0 = c.iter().find(|s| s.collective == Collective::Broadcast && s.attributes["rank"] == "0").unwrap();
    assert_eq!((b0.bytes, b0.time_us, b0.ranks, b0.nodes, b0.gpus_per_node), (4, 218.0, 4, Some(1), Some(4)));
    let r1 = c.iter().find(|s| s.collective == Collective::Reduce && s.attributes["rank"] == "1").unwrap();
    assert_eq!((r1.bytes, r1.time_us), (8, 44.0));
    let b3 = c.iter().find(|s| s.collective == Collective::Broadcast && s.attributes["rank"] == "3").unwrap();
    assert_eq!(b3.time_us, 406.0);
    assert_eq!(b3.attributes["hostname"], "nid01045");
    // One rank alone: the rank count is unknown unless given.
    let one = parse_files(&refs[..1], &Context::default()).unwrap();
    assert!(comms(&one).is_empty());
    assert!(one.rejected.iter().all(|r| r.reason.contains("rank count is unknown")));
    let one = parse_files(&refs[..1], &Context { ranks: Some(4), ..Default::default() }).unwrap();
    assert_eq!(comms(&one).len(), 2);
}

#[test]
fn cpi_in_a_tar_and_a_tar_gz() {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, bytes) in cpi_files() {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, format!("run/{name}"), bytes.as_slice()).unwrap();
    }
    let mut header = tar::Header::new_gnu();
    header.set_size(3);
    header.set_cksum();
    builder.append_data(&mut header, "run/README", &b"hi\n"[..]).unwrap();
    let archive = builder.into_inner().unwrap();
    assert!(is_tar(&archive));
    assert_eq!(super::super::detect(&archive), Some(super::super::Format::Tau));
    let p = parse(&archive, &Context::default()).unwrap();
    assert_eq!(comms(&p).len(), 8);
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&archive).unwrap();
    let gz = enc.finish().unwrap();
    assert_eq!(super::super::detect(&gz), Some(super::super::Format::Tau));
    assert_eq!(comms(&parse(&gz, &Context::default()).unwrap()).len(), 8);
}

#[test]
fn profiles_without_mpi_collectives() {
    // wrap example: MPI_Init/MPI_Finalize and dgemm parameter profiles.
    let wrap = parse_profile("profile.0.0.0", &fixture("tau2_examples_wrap_mpi_profile.0.0.0")).unwrap();
    assert_eq!(wrap.timers.len(), 8);
    let init = wrap.timers.iter().find(|t| t.name == "MPI_Init()").unwrap();
    assert_eq!((init.calls, init.exclusive), (1.0, 1047345.0));
    let dgemm = wrap.timers.iter().find(|t| t.name.contains("<size> = <100>")).unwrap();
    assert_eq!((dgemm.group.as_str(), dgemm.calls, dgemm.exclusive), ("TAU_PARAM | TAU_USER", 1.0, 28.0));
    assert!(wrap.user_events.is_empty());
    let p = parse(&fixture("tau2_examples_wrap_mpi_profile.0.0.0"), &Context::default()).unwrap();
    assert!(p.samples.is_empty());
    assert_eq!(p.rejected.len(), 1);
    assert!(p.rejected[0].reason.contains("no MPI collective"), "{}", p.rejected[0].reason);
    // OpenCL FFT (TAU 2.18): 21 timers; clEnqueueNDRangeKernel 30 calls, 1396 µs.
    let fft = parse_profile("", &fixture("tau2_opencl_FFT_profile.0.0.0")).unwrap();
    assert_eq!(fft.timers.len(), 21);
    let nd = fft.timers.iter().find(|t| t.name.starts_with("cl_int clEnqueueNDRangeKernel")).unwrap();
    assert_eq!((nd.calls, nd.exclusive, nd.inclusive), (30.0, 1396.0, 1396.0));
    assert_eq!(fft.node, None);
    // OpenMP thread 1: "compute OpenMP region" 1 0 1120473 1120473.
    let omp = parse_profile("profile.0.0.1", &fixture("tau2_taudb_test_openmp_profile.0.0.1")).unwrap();
    assert_eq!((omp.thread, omp.timers[0].exclusive), (Some(1), 1120473.0));
    assert_eq!(parse(&fixture("tau2_taudb_test_openmp_profile.0.0.1"), &Context::default()).unwrap().rejected.len(), 1);
}

#[test]
fn sizes_scale_to_nccl_tests_bytes_and_problems_are_named() {
    let profile = |rank: u32| {
        format!(
            "6 templated_functions_MULTI_TIME
# Name Calls Subrs Excl Incl ProfileCalls # <metadata><attribute><name>Hostname</name><value>n{}</value></attribute></metadata>
\"MPI_Allgather()\" 10 1 500 900 0 GROUP=\"MPI\"
\"MPI Collective Sync\" 10 0 400 400 0 GROUP=\"MPI\"
\"MPI_Allreduce()  [ <message size> = <4096> ]\" 4 0 80 80 0 GROUP=\"MPI\"
\"MPI_Send()\" 3 0 9 9 0 GROUP=\"MPI\"
\"MPI_Gather()\" 0 0 0 0 0 GROUP=\"MPI\"
\"MPI_Iallreduce()\" 2 0 2 2 0 GROUP=\"MPI\"
0 aggregates
1 userevents
# eventname numevents max min mean sumsqr
\"Message size for all-gather\" 10 2048 512 1024 1.2e7
",
            rank / 2
        )
    };
    let files: Vec<(String, String)> = (0..4).map(|r| (format!("profile.{r}.0.0"), profile(r))).collect();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_bytes())).collect();
    let p = parse_files(&refs, &Context::default()).unwrap();
    let c = comms(&p);
    assert_eq!(c.len(), 8);
    // MPI_Allgather: mean block 1024 B × 4 ranks; exclusive 500 µs / 10 calls (the sync barrier excluded).
    let ag = c.iter().find(|s| s.collective == Collective::AllGather).unwrap();
    assert_eq!((ag.bytes, ag.time_us, ag.ranks, ag.nodes, ag.gpus_per_node), (4096, 50.0, 4, Some(2), Some(2)));
    assert_eq!((ag.attributes["min_bytes"].as_str(), ag.attributes["max_bytes"].as_str()), ("2048", "8192"));
    // The parameter profile gives the all-reduce size: 4096 B, 80 µs / 4 calls.
    let ar = c.iter().find(|s| s.collective == Collective::AllReduce).unwrap();
    assert_eq!((ar.bytes, ar.time_us), (4096, 20.0));
    let reasons: Vec<&str> = p.rejected.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(reasons.len(), 8, "{reasons:?}");
    assert!(reasons[0].starts_with("profile.0.0.0: MPI_Send(): point-to-point"), "{reasons:?}");
    assert!(reasons[1].contains("MPI_Iallreduce(): non-blocking"));
    assert_eq!(p.rejected[0].line, 6);
}

#[test]
fn malformed_profiles_are_errors_with_lines() {
    assert_eq!(parse(b"hello\n", &Context::default()).unwrap_err().line, Some(1));
    let short = b"3 templated_functions_MULTI_TIME\n# Name Calls\n\"a\" 1 0 1 1 0 GROUP=\"X\"\n";
    let e = parse(short, &Context::default()).unwrap_err();
    assert_eq!(e.line, Some(3));
    assert!(e.message.contains("3 timers"));
    let bad = b"1 templated_functions_MULTI_TIME\n# Name\n\"a\" 1 x 1 1 0 GROUP=\"X\"\n";
    assert_eq!(parse(bad, &Context::default()).unwrap_err().line, Some(3));
    let papi =
        b"1 templated_functions_MULTI_PAPI_FP_OPS\n# Name\n\"MPI_Bcast()\" 1 0 5 5 0 GROUP=\"MPI\"\n0 aggregates\n";
    let p = parse(papi, &Context { ranks: Some(2), ..Default::default() }).unwrap();
    assert!(p.rejected[0].reason.contains("PAPI_FP_OPS is not a time"));
    assert!(looks_like(b"23 templated_functions_MULTI_TIME\n"));
    assert!(!looks_like(b"# OSU MPI Latency Test"));
    assert_eq!(timer_base("MPI_Bcast()   [ <message size> = <1024> ]"), ("MPI_Bcast", Some(1024.0)));
    assert_eq!(timer_base("int f(int) C [{f.c} {3,1}]"), ("int f(int) C", None));
}

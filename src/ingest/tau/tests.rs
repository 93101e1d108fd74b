use super::comms::timer_base;
use super::*;
use crate::op::Collective;
use crate::samples::{CommSample, Sample, TimerSample};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../shared/fixtures/tau/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn comms(p: &Parsed) -> Vec<&CommSample> {
    p.samples.iter().filter_map(|s| if let Sample::Comm(c) = s { Some(c) } else { None }).collect()
}

fn timers(p: &Parsed) -> Vec<&TimerSample> {
    p.samples.iter().filter_map(|s| if let Sample::Timer(t) = s { Some(t) } else { None }).collect()
}

fn timer<'a>(p: &'a Parsed, rank: Option<u32>, name: &str) -> &'a TimerSample {
    timers(p)
        .into_iter()
        .find(|t| t.rank == rank && t.name == name)
        .unwrap_or_else(|| panic!("no timer {name:?} on rank {rank:?}"))
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
    assert_eq!((comms(&p).len(), timers(&p).len()), (8, 48));
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&archive).unwrap();
    let gz = enc.finish().unwrap();
    assert_eq!(super::super::detect(&gz), Some(super::super::Format::Tau));
    assert_eq!(comms(&parse(&gz, &Context::default()).unwrap()).len(), 8);
}

#[test]
fn cpi_four_ranks_give_per_rank_timers() {
    // Uploaded under the fixtures' own names (`hatchet_tau-cpi-mpi_profile.N.0.0`): the ids come from the suffix.
    let files: Vec<(String, Vec<u8>)> = (0..4)
        .map(|r| {
            let name = format!("hatchet_tau-cpi-mpi_profile.{r}.0.0");
            let bytes = fixture(&name);
            (name, bytes)
        })
        .collect();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    assert_eq!(super::super::detect_files(&refs), Some(super::super::Format::Tau));
    let p = parse_files(&refs, &Context::default()).unwrap();
    assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    // 23 timer lines per file, 11 of them callpaths: 12 flat timers × 4 ranks; 2 collectives × 4 ranks.
    assert_eq!((timers(&p).len(), comms(&p).len()), (48, 8));
    assert!(comms(&p).iter().all(|c| c.ranks == 4));
    assert!(timers(&p).iter().all(|t| !t.name.contains("=>") && t.thread == Some(0)));
    // profile.2.0.0: "MPI_Bcast()  " 1 0 418 418 0 GROUP="MPI"
    let b2 = timer(&p, Some(2), "MPI_Bcast()");
    assert_eq!((b2.group.as_str(), b2.calls, b2.exclusive_us, b2.inclusive_us), ("MPI", 1.0, 418.0, 418.0));
    // profile.0.0.0: "MPI_Finalize()  " 1 4 4458 32304 0 GROUP="MPI"
    let f0 = timer(&p, Some(0), "MPI_Finalize()");
    assert_eq!((f0.calls, f0.exclusive_us, f0.inclusive_us), (1.0, 4458.0, 32304.0));
    assert_eq!((f0.attributes["subroutines"].as_str(), f0.attributes["hostname"].as_str()), ("4", "nid01045"));
    // profile.3.0.0: ".TAU application" 1 7 409 52908 0 GROUP="TAU_DEFAULT"
    let a3 = timer(&p, Some(3), ".TAU application");
    assert_eq!((a3.group.as_str(), a3.exclusive_us, a3.inclusive_us), ("TAU_DEFAULT", 409.0, 52908.0));
    // profile.1.0.0: "MPI_Reduce()  " 1 0 44 44 0 GROUP="MPI"
    assert_eq!(timer(&p, Some(1), "MPI_Reduce()").exclusive_us, 44.0);
    assert_eq!(timers(&p).iter().filter(|t| t.group == "MPI").count(), 44);
}

#[test]
fn profiles_without_mpi_collectives_give_timers() {
    // wrap example: MPI_Init/MPI_Finalize and dgemm parameter profiles.
    let wrap = parse_profile("profile.0.0.0", &fixture("tau2_examples_wrap_mpi_profile.0.0.0")).unwrap();
    assert_eq!(wrap.timers.len(), 8);
    let init = wrap.timers.iter().find(|t| t.name == "MPI_Init()").unwrap();
    assert_eq!((init.calls, init.exclusive), (1.0, 1047345.0));
    let dgemm = wrap.timers.iter().find(|t| t.name.contains("<size> = <100>")).unwrap();
    assert_eq!((dgemm.group.as_str(), dgemm.calls, dgemm.exclusive), ("TAU_PARAM | TAU_USER", 1.0, 28.0));
    assert!(wrap.user_events.is_empty());
    let p = parse_files(
        &[("tau2_examples_wrap_mpi_profile.0.0.0", &fixture("tau2_examples_wrap_mpi_profile.0.0.0"))],
        &Context::default(),
    )
    .unwrap();
    assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    assert!(comms(&p).is_empty());
    assert_eq!(timers(&p).len(), 8);
    let init = timer(&p, Some(0), "MPI_Init()");
    assert_eq!((init.group.as_str(), init.calls, init.exclusive_us, init.thread), ("MPI", 1.0, 1047345.0, Some(0)));
    // The base timer: "int __wrap_dgemm(int) C [{wb.c} {5,1}-{11,1}]  " 3 0 58 58 0 GROUP="TAU_USER"
    let base = "int __wrap_dgemm(int) C [{wb.c} {5,1}-{11,1}]";
    let d = timer(&p, Some(0), base);
    assert_eq!((d.group.as_str(), d.calls, d.exclusive_us), ("TAU_USER", 3.0, 58.0));
    assert!(!d.attributes.contains_key("param_of"));
    // Its parameter profile for size 10000: 1 call, 18 µs, a separate timer naming its base.
    let d1e4 = timer(&p, Some(0), &format!("{base}   [ <size> = <10000> ]"));
    assert_eq!((d1e4.group.as_str(), d1e4.calls, d1e4.exclusive_us), ("TAU_PARAM | TAU_USER", 1.0, 18.0));
    assert_eq!((d1e4.attributes["param_of"].as_str(), d1e4.attributes["param_name"].as_str()), (base, "size"));
    assert_eq!(d1e4.attributes["param_value"], "10000");
    // The parameter profiles split the base timer: 28 + 18 + 12 = 58 µs over 3 calls.
    let params: Vec<&TimerSample> =
        timers(&p).into_iter().filter(|t| t.attributes.get("param_of").map(String::as_str) == Some(base)).collect();
    assert_eq!(params.iter().map(|t| t.exclusive_us).sum::<f64>(), 58.0);
    assert_eq!(params.iter().map(|t| t.calls).sum::<f64>(), 3.0);

    // OpenCL FFT (TAU 2.18): 21 timers; clEnqueueNDRangeKernel 30 calls, 1396 µs.
    let fft = parse_profile("", &fixture("tau2_opencl_FFT_profile.0.0.0")).unwrap();
    assert_eq!(fft.timers.len(), 21);
    let nd = fft.timers.iter().find(|t| t.name.starts_with("cl_int clEnqueueNDRangeKernel")).unwrap();
    assert_eq!((nd.calls, nd.exclusive, nd.inclusive), (30.0, 1396.0, 1396.0));
    assert_eq!(fft.node, None);
    let p = parse(&fixture("tau2_opencl_FFT_profile.0.0.0"), &Context::default()).unwrap();
    assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    assert_eq!(timers(&p).len(), 21);
    // Without a file name the rank is unknown; "cl_int clWaitForEvents(…) C" 20 0 1796953 1796953.
    let wait = timers(&p).into_iter().find(|t| t.name.starts_with("cl_int clWaitForEvents")).unwrap();
    assert_eq!((wait.rank, wait.group.as_str(), wait.calls, wait.exclusive_us), (None, "TAU_USER", 20.0, 1796953.0));
    // ".TAU application  " 1 178 269166 5963579 0 GROUP="TAU_DEFAULT"
    let app = timer(&p, None, ".TAU application");
    assert_eq!((app.exclusive_us, app.inclusive_us), (269166.0, 5963579.0));

    // OpenMP thread 1: "compute OpenMP region" 1 0 1120473 1120473 and ".TAU application" 1 1 1460610 2581083.
    let omp = parse_profile("profile.0.0.1", &fixture("tau2_taudb_test_openmp_profile.0.0.1")).unwrap();
    assert_eq!((omp.thread, omp.timers[0].exclusive), (Some(1), 1120473.0));
    let p = parse_files(
        &[("tau2_taudb_test_openmp_profile.0.0.1", &fixture("tau2_taudb_test_openmp_profile.0.0.1"))],
        &Context::default(),
    )
    .unwrap();
    assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    assert_eq!(timers(&p).len(), 2);
    let region = timer(&p, Some(0), "compute OpenMP region");
    assert_eq!((region.thread, region.group.as_str(), region.calls), (Some(1), "TAU_USER", 1.0));
    assert_eq!((region.exclusive_us, region.inclusive_us), (1120473.0, 1120473.0));
    let app = timer(&p, Some(0), ".TAU application");
    assert_eq!((app.exclusive_us, app.inclusive_us), (1460610.0, 2581083.0));
    for name in [
        "tau2_examples_wrap_mpi_profile.0.0.0",
        "tau2_opencl_FFT_profile.0.0.0",
        "tau2_taudb_test_openmp_profile.0.0.1",
    ] {
        let bytes = fixture(name);
        assert_eq!(super::super::detect_files(&[(name, &bytes)]), Some(super::super::Format::Tau), "{name}");
    }
}

#[test]
fn timer_counts_are_bounded_and_bad_timers_rejected() {
    // 1 MPI timer with no time and 1099 user timers of 0..1098 µs: the MPI timer and the 1023 largest are kept.
    let mut text = String::from("1100 templated_functions_MULTI_TIME\n# Name Calls Subrs Excl Incl ProfileCalls\n");
    text.push_str("\"MPI_Barrier()\" 1 0 0 0 0 GROUP=\"MPI\"\n");
    for i in 0..1099 {
        text.push_str(&format!("\"f{i}\" 1 0 {i} {i} 0 GROUP=\"TAU_USER\"\n"));
    }
    text.push_str("0 aggregates\n");
    let p = parse_files(&[("profile.5.0.0", text.as_bytes())], &Context::default()).unwrap();
    let t = timers(&p);
    assert_eq!(t.len(), MAX_TIMERS_PER_PROFILE);
    assert_eq!((t[0].name.as_str(), t[0].rank), ("MPI_Barrier()", Some(5)));
    assert_eq!(t[1].name, "f76");
    assert!(t[1..].iter().all(|t| t.exclusive_us >= 76.0));
    assert_eq!(p.rejected.len(), 1);
    assert!(p.rejected[0].reason.starts_with("profile.5.0.0: 76 of its 1100 flat timers left out"), "{:?}", p.rejected);

    // A negative time is rejected at its line; a callpath-only profile says it has nothing.
    let bad = b"2 templated_functions_MULTI_TIME\n# Name\n\"a\" 1 0 -5 1 0 GROUP=\"X\"\n\"b\" 2 0 3 4 0 GROUP=\"X\"\n0 aggregates\n";
    let p = parse_files(&[("profile.0.0.0", bad)], &Context::default()).unwrap();
    assert_eq!(timers(&p).len(), 1);
    assert_eq!((p.rejected[0].line, p.rejected[0].reason.as_str()), (3, "profile.0.0.0: a: negative calls or time"));
    let callpaths = b"1 templated_functions_MULTI_TIME\n# Name\n\"a => b\" 1 0 5 5 0 GROUP=\"X\"\n0 aggregates\n";
    let p = parse_files(&[("profile.0.0.0", callpaths)], &Context::default()).unwrap();
    assert!(p.samples.is_empty());
    assert!(p.rejected[0].reason.contains("no flat timer"), "{:?}", p.rejected);
}

#[test]
fn names_ids_and_parameters() {
    assert_eq!(profile_ids("profile.3.0.1"), Some([3, 0, 1]));
    assert_eq!(profile_ids("run/hatchet_tau-cpi-mpi_profile.2.0.0"), Some([2, 0, 0]));
    assert_eq!(profile_ids("profile.3.0"), None);
    assert_eq!(profile_ids("profile.3.0.1.gz"), None);
    assert_eq!(profile_ids("notes.txt"), None);
    assert_eq!(
        param_of("int f(int) C [{f.c} {5,1}-{11,1}]   [ <size> = <100> ]  "),
        Some(("int f(int) C [{f.c} {5,1}-{11,1}]", "size", "100"))
    );
    assert_eq!(param_of("MPI_Bcast()   [ <message size> = <1024> ]"), Some(("MPI_Bcast()", "message size", "1024")));
    assert_eq!(param_of("int f(int) C [{f.c} {5,1}-{11,1}]"), None);
    assert_eq!(param_of("MPI_Send()"), None);
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

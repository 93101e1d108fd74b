//! Tests of the rocprof parser against the shared fixtures.

use super::table::duration_ns;
use super::timers::stats_group;
use super::*;
use crate::samples::{kernel_metrics as km, KernelSample, TimerSample};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../shared/fixtures/rocprof/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn kernels(p: &Parsed) -> Vec<&KernelSample> {
    p.samples.iter().filter_map(|s| if let Sample::Kernel(k) = s { Some(k) } else { None }).collect()
}

fn timers(p: &Parsed) -> Vec<&TimerSample> {
    p.samples.iter().filter_map(|s| if let Sample::Timer(t) = s { Some(t) } else { None }).collect()
}

#[test]
fn names_and_timestamps() {
    assert_eq!(
        clean_name("vecCopy(double*, double*, double*, int, int) [clone .kd]"),
        "vecCopy(double*, double*, double*, int, int)"
    );
    assert_eq!(clean_name("k (.kd)"), "k");
    assert_eq!(clean_name("k.kd"), "k");
    assert_eq!(duration_ns("1411551767635712", "1411551767656192"), Ok(20480.0));
    assert!(duration_ns("8.1097E+14", "8.1097E+14").unwrap_err().contains("float notation"));
    assert!(duration_ns("8.1097E+14", "8.1098E+14").is_err(), "10 s steps are not a duration");
    assert_eq!(duration_ns("1.000000E+06", "1.000500E+06"), Ok(500.0));
    assert!(duration_ns("5", "5").is_err());
}

#[test]
fn v1_omniperf_counters_and_timestamps() {
    let p = parse(&fixture("omniperf_MI200_gfx90a_rocprofv1_SQ_IFETCH_LEVEL.csv"), &Context::default()).unwrap();
    let k = kernels(&p);
    assert_eq!(k.len(), 3);
    assert_eq!(k[0].name, "vecCopy(double*, double*, double*, int, int)");
    // End_Timestamp 1411551767656192 − Start_Timestamp 1411551767635712 = 20480 ns.
    assert!((k[0].duration_us - 20.48).abs() < 1e-12);
    // Grid_Size 1048576 work-items / Workgroup_Size 256 = 4096 work-groups.
    assert_eq!((k[0].grid, k[0].block), (Some([4096, 1, 1]), Some([256, 1, 1])));
    assert_eq!(k[0].metrics["rocprof.SQ_WAVES"], 16384.0);
    assert_eq!(k[0].metrics["rocprof.SQ_IFETCH_LEVEL"], 13592.0);
    assert_eq!(k[0].metrics[km::REGISTERS_PER_THREAD], 8.0);
    assert_eq!(k[0].attributes["gpu_id"], "2");
    assert!(!k[0].metrics.contains_key("rocprof.DispatchNs"));
    assert!((k[2].duration_us - (1411551767802112u64 - 1411551767786592u64) as f64 / 1e3).abs() < 1e-12);
}

#[test]
fn v1_timestamps_file_and_sysinfo_name() {
    let files = [
        ("timestamps.csv", fixture("omniperf_MI200_gfx90a_rocprofv1_timestamps.csv")),
        ("sysinfo.csv", fixture("omniperf_MI200_sysinfo.csv")),
    ];
    let files: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    let p = parse_files(&files, &Context::default()).unwrap();
    let k = kernels(&p);
    assert_eq!(k.len(), 3);
    assert_eq!(k[1].gpu.as_deref(), Some("MI200"));
    // 1411551767765792 − 1411551767749472 = 16320 ns.
    assert!((k[1].duration_us - 16.32).abs() < 1e-12);
}

#[test]
fn pmc_perf_derived_metrics() {
    let bytes = fixture("omniperf_MI200_gfx90a_rocprofv1_pmc_perf.csv");
    let p = parse(&bytes, &Context { gpu: Some("MI250X".into()), ..Default::default() }).unwrap();
    let k = kernels(&p);
    assert_eq!(k.len(), 3);
    assert_eq!(k[0].gpu.as_deref(), Some("MI250X"));
    assert!((k[0].duration_us - 20.48).abs() < 1e-12);
    assert_eq!(k[0].metrics["rocprof.SQ_INSTS_VALU"], 163840.0);
    assert!(!k[0].metrics.keys().any(|m| m.ends_with(']')));
    assert!(!k[0].metrics.contains_key("rocprof.obj_1"));
    for key in [km::L2_HIT_RATE, km::DRAM_BYTES, km::FLOPS_FP64] {
        assert!(k[0].metrics.contains_key(key), "{key}");
    }
    let hit = k[0].metrics["rocprof.TCC_HIT_sum"];
    let miss = k[0].metrics["rocprof.TCC_MISS_sum"];
    assert_eq!(k[0].metrics[km::L2_HIT_RATE], hit / (hit + miss));
}

#[test]
fn v2_float_timestamps_are_rejected_not_invented() {
    for f in ["omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv", "omniperf_MI300X_rocprofv2_timestamps.csv"] {
        let p = parse(&fixture(f), &Context::default()).unwrap();
        assert!(p.samples.is_empty());
        // The three dispatches share one reason: one rejection at the first one's line, with the count.
        assert_eq!(p.rejected.len(), 1);
        assert_eq!(p.rejected[0].line, 2);
        assert!(p.rejected[0].reason.contains("8.1097E+14"), "{}", p.rejected[0].reason);
        assert!(p.rejected[0].reason.starts_with("vecCopy(double*, double*, double*, int, int): "));
        assert!(p.rejected[0].reason.ends_with("(3 times)"), "{}", p.rejected[0].reason);
    }
    // The counter file says how its duration could be had; the timestamps file has no counter to offer.
    let p = parse(&fixture("omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv"), &Context::default()).unwrap();
    assert!(p.rejected[0].reason.contains("GRBM_GUI_ACTIVE would give it"), "{}", p.rejected[0].reason);
    // A GPU outside the catalog has no known clock: still rejected.
    let p = parse(
        &fixture("omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv"),
        &Context { gpu: Some("Radeon 9999".into()), ..Default::default() },
    )
    .unwrap();
    assert!(p.samples.is_empty() && p.rejected.len() == 1);
}

#[test]
fn mi300x_durations_from_grbm_gui_active() {
    let sq = fixture("omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv");
    let mi300x = Context { gpu: Some("MI300X".into()), ..Default::default() };
    let p = parse_files(&[("omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv", &sq)], &mi300x).unwrap();
    assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    let k = kernels(&p);
    assert_eq!(k.len(), 3);
    // Dispatch 0: GRBM_GUI_ACTIVE 449213 cycles summed over 8 XCDs at 2.1 GHz:
    // 449213 / 8 = 56151.625 cycles; / 2100 cycles per µs = 26.738869… µs.
    assert_eq!(k[0].name, "vecCopy(double*, double*, double*, int, int)");
    assert!((k[0].duration_us - 26.738869).abs() < 1e-6, "{}", k[0].duration_us);
    // Dispatch 1: 421528 / 8 = 52691 cycles → 25.090952 µs; dispatch 2: 431238 / 8 = 53904.75 → 25.668929 µs.
    assert!((k[1].duration_us - 25.090952).abs() < 1e-6, "{}", k[1].duration_us);
    assert!((k[2].duration_us - 25.668929).abs() < 1e-6, "{}", k[2].duration_us);
    assert_eq!(k[0].attributes["duration_source"], "grbm_gui_active/(num_xcd*clock)");
    assert_eq!((k[0].attributes["clock_ghz"].as_str(), k[0].attributes["num_xcd"].as_str()), ("2.1", "8"));
    assert_eq!(k[0].attributes["clock_source"], "catalog MI300X");
    assert_eq!((k[0].gpu.as_deref(), k[0].metrics["rocprof.GRBM_GUI_ACTIVE"]), (Some("MI300X"), 449213.0));
    assert_eq!((k[0].grid, k[0].block), (Some([4096, 1, 1]), Some([256, 1, 1])));
    // The device as rocm-smi names it resolves too.
    let named = Context { gpu: Some("AMD Instinct MI300X".into()), ..Default::default() };
    assert_eq!(kernels(&parse(&sq, &named).unwrap())[0].duration_us, k[0].duration_us);

    // With the timestamps file of the same workload: it is accepted, its dispatches (other pass, no counters,
    // lost timestamps) are rejected once with the count; the counter file's samples are unchanged.
    let ts = fixture("omniperf_MI300X_rocprofv2_timestamps.csv");
    let files: [(&str, &[u8]); 2] =
        [("omniperf_MI300X_rocprofv2_timestamps.csv", &ts), ("omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv", &sq)];
    assert_eq!(super::super::detect_files(&files), Some(super::super::Format::RocprofCsv));
    let both = parse_files(&files, &mi300x).unwrap();
    assert_eq!(kernels(&both), k);
    assert_eq!(both.rejected.len(), 1);
    assert!(both.rejected[0].reason.starts_with("omniperf_MI300X_rocprofv2_timestamps.csv: vecCopy"));
    assert!(both.rejected[0].reason.ends_with("(3 times)"), "{}", both.rejected[0].reason);

    // Omniperf's sysinfo.csv gives the clock and XCDs itself (MI300X_A1: max_sclk 2100 MHz, num_xcd 8).
    let sysinfo = "gpu_model,gpu_arch,cu_per_gpu,max_sclk,num_xcd\nMI300X_A1,gfx942,304,2100,8\n";
    let p =
        parse_files(&[("SQ_IFETCH_LEVEL.csv", &sq), ("sysinfo.csv", sysinfo.as_bytes())], &Context::default()).unwrap();
    let s = kernels(&p);
    assert_eq!((s[0].duration_us, s[0].gpu.as_deref()), (k[0].duration_us, Some("MI300X_A1")));
    assert_eq!(s[0].attributes["clock_source"], "sysinfo.csv");
}

#[test]
fn timestamps_win_over_grbm_and_omniperf_passes_merge() {
    // MI200: the counter file has real timestamps: no reconstruction even when the clock is known.
    let sq = fixture("omniperf_MI200_gfx90a_rocprofv1_SQ_IFETCH_LEVEL.csv");
    let p = parse(&sq, &Context { gpu: Some("MI210".into()), ..Default::default() }).unwrap();
    assert!(kernels(&p).iter().all(|k| !k.attributes.contains_key("duration_source")));
    assert!((kernels(&p)[0].duration_us - 20.48).abs() < 1e-12);
    // The Omniperf directory: per-pass tables with timestamps copied from timestamps.csv, sysinfo, the input
    // file. Each dispatch is one sample with the counters of every pass.
    let names = [
        "omniperf_MI200_gfx90a_rocprofv1_SQ_IFETCH_LEVEL.csv",
        "omniperf_MI200_gfx90a_rocprofv1_timestamps.csv",
        "omniperf_MI200_gfx90a_rocprofv1_pmc_perf.csv",
        "omniperf_MI200_sysinfo.csv",
        "omniperf_MI200_perfmon_SQ_IFETCH_LEVEL.input.txt",
    ];
    let bytes: Vec<Vec<u8>> = names.iter().map(|n| fixture(n)).collect();
    let files: Vec<(&str, &[u8])> = names.iter().zip(&bytes).map(|(n, b)| (*n, b.as_slice())).collect();
    assert_eq!(super::super::detect_files(&files), Some(super::super::Format::RocprofCsv));
    let p = parse_files(&files, &Context::default()).unwrap();
    assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    let k = kernels(&p);
    assert_eq!(k.len(), 3);
    // Dispatch 1: 1411551767765792 − 1411551767749472 = 16320 ns; SQ_IFETCH_LEVEL 9433 from its pass,
    // TCC_HIT_sum from pmc_perf; the SQ pass (first) gives GRBM_GUI_ACTIVE 41252.
    assert!((k[1].duration_us - 16.32).abs() < 1e-12);
    assert_eq!((k[1].gpu.as_deref(), k[1].attributes["dispatch"].as_str()), (Some("MI200"), "1"));
    assert_eq!(k[1].metrics["rocprof.SQ_IFETCH_LEVEL"], 9433.0);
    assert_eq!(k[1].metrics["rocprof.GRBM_GUI_ACTIVE"], 41252.0);
    assert!(k[1].metrics.contains_key("rocprof.TCC_HIT_sum") && k[1].metrics.contains_key(km::L2_HIT_RATE));
    // The input file contributes nothing: the same samples without it.
    let without = parse_files(&files[..4], &Context::default()).unwrap();
    assert_eq!(without, p);
}

#[test]
fn hip_api_stats_become_timers() {
    let stats = fixture("rocprofv3_hip_api_stats.csv");
    for name in ["rocprofv3_hip_api_stats.csv", ""] {
        let p = parse_files(&[(name, &stats)], &Context::default()).unwrap();
        assert!(p.rejected.is_empty(), "{:?}", p.rejected);
        let t = timers(&p);
        assert_eq!(t.len(), 17);
        assert!(t.iter().all(|t| t.group == "HIP_API" && t.rank.is_none() && t.thread.is_none()));
        // "hipMemcpyAsync",12,1368378,114031.500000,0.4439,2490,764044,249308.051619
        let m = t.iter().find(|t| t.name == "hipMemcpyAsync").unwrap();
        assert_eq!((m.calls, m.exclusive_us, m.inclusive_us), (12.0, 1368.378, 1368.378));
        assert_eq!(
            (m.attributes["average_us"].as_str(), m.attributes["min_us"].as_str(), m.attributes["max_us"].as_str()),
            ("114.0315", "2.49", "764.044")
        );
        assert_eq!((m.attributes["stddev_us"].as_str(), m.attributes["percent"].as_str()), ("249.308052", "0.4439"));
        // "hipLaunchKernel",16,692734,…
        let l = t.iter().find(|t| t.name == "hipLaunchKernel").unwrap();
        assert_eq!((l.calls, l.exclusive_us), (16.0, 692.734));
    }
    // The group follows the file name where the names do not tell (kernel statistics).
    let kernel_stats = "\"Name\",\"Calls\",\"TotalDurationNs\",\"AverageNs\",\"Percentage\",\"MinNs\",\"MaxNs\",\"StdDev\"\n\"void addition_kernel<float>(float*, float const*, float const*, int, int)\",4,465316,116329.0,40.1,48744,130526,38000.1\n";
    let t = parse_files(&[("run_kernel_stats.csv", kernel_stats.as_bytes())], &Context::default()).unwrap();
    assert_eq!(timers(&t)[0].group, "KERNEL");
    let t = parse(kernel_stats.as_bytes(), &Context::default()).unwrap();
    assert_eq!(timers(&t)[0].group, "ROCPROF_STATS");
    assert_eq!(stats_group("", &["hsa_queue_create", "hsa_signal_wait"]), "HSA_API");
    // Negative or missing numbers are rejected with the name.
    let bad = "Name,Calls,TotalDurationNs\nhipFree,-1,5\nhipMalloc,2,10\n";
    let p = parse(bad.as_bytes(), &Context::default()).unwrap();
    assert_eq!(timers(&p).len(), 1);
    assert_eq!(p.rejected[0].line, 2);
    assert!(p.rejected[0].reason.starts_with("hipFree: "), "{:?}", p.rejected);
}

#[test]
fn memory_copies_become_timers() {
    let copies = fixture("rocprofv3_memory_copy_trace.csv");
    let p = parse_files(&[("rocprofv3_memory_copy_trace.csv", &copies)], &Context::default()).unwrap();
    assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    let t = timers(&p);
    assert_eq!(t.len(), 2);
    // Host to device: 14955950239443 − 14955949675563 = 563880 ns, agent 0 → 1.
    assert_eq!(
        (t[0].name.as_str(), t[0].group.as_str(), t[0].calls),
        ("MEMORY_COPY_HOST_TO_DEVICE", "MEMORY_COPY", 1.0)
    );
    assert_eq!((t[0].exclusive_us, t[0].inclusive_us), (563.88, 563.88));
    assert_eq!((t[0].attributes["source_agent"].as_str(), t[0].attributes["destination_agent"].as_str()), ("0", "1"));
    assert_eq!(t[0].attributes["start_ns"], "14955949675563");
    // Device to host: 14955953315285 − 14955952733485 = 581800 ns, agent 1 → 0.
    assert_eq!((t[1].name.as_str(), t[1].exclusive_us), ("MEMORY_COPY_DEVICE_TO_HOST", 581.8));
    assert_eq!(t[1].attributes["source_agent"], "1");
    // A copy whose end is not after its start is rejected, not stored.
    let bad = "Kind,Direction,Start_Timestamp,End_Timestamp\nMEMORY_COPY,MEMORY_COPY_HOST_TO_DEVICE,10,10\n";
    let p = parse(bad.as_bytes(), &Context::default()).unwrap();
    assert!(p.samples.is_empty() && p.rejected[0].reason.starts_with("MEMORY_COPY_HOST_TO_DEVICE: "));
}

#[test]
fn v3_run_uploaded_together() {
    let names = [
        "rocprofv3_kernel_trace.csv",
        "rocprofv3_counter_collection.csv",
        "rocprofv3_hip_api_stats.csv",
        "rocprofv3_memory_copy_trace.csv",
    ];
    let bytes: Vec<Vec<u8>> = names.iter().map(|n| fixture(n)).collect();
    let files: Vec<(&str, &[u8])> = names.iter().zip(&bytes).map(|(n, b)| (*n, b.as_slice())).collect();
    assert_eq!(super::super::detect_files(&files), Some(super::super::Format::RocprofCsv));
    assert_eq!(super::super::detect_files(&files[2..]), Some(super::super::Format::RocprofCsv));
    let p = parse_files(&files, &Context::default()).unwrap();
    assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    assert_eq!((kernels(&p).len(), timers(&p).len()), (7, 19));
    assert!(kernels(&p).iter().all(|k| k.metrics.get("rocprof.SQ_WAVES") == Some(&16384.0)));
    // Stats and copies without the trace: timers, and the counter collection is reported unused.
    let p = parse_files(&files[1..], &Context::default()).unwrap();
    assert_eq!((kernels(&p).len(), timers(&p).len()), (0, 19));
    assert_eq!(p.rejected.len(), 1);
    assert!(p.rejected[0].reason.starts_with("rocprofv3_counter_collection.csv: counter collection not used"));
}

#[test]
fn v3_kernel_trace_alone_and_with_counters() {
    let trace = fixture("rocprofv3_kernel_trace.csv");
    let p = parse(&trace, &Context::default()).unwrap();
    let k = kernels(&p);
    assert_eq!(k.len(), 7);
    // Dispatch 1: 8819330200116308 − 8819330200067564 = 48744 ns; grid 1024×1024 items in 64×1×1 groups.
    assert_eq!(k[0].name, "void addition_kernel<float>(float*, float const*, float const*, int, int)");
    assert!((k[0].duration_us - 48.744).abs() < 1e-12);
    assert_eq!((k[0].grid, k[0].block), (Some([16, 1024, 1]), Some([64, 1, 1])));
    let counters = fixture("rocprofv3_counter_collection.csv");
    let p = parse_files(&[("kernel_trace.csv", &trace), ("counter_collection.csv", &counters)], &Context::default())
        .unwrap();
    let k = kernels(&p);
    assert_eq!(k.len(), 7);
    assert!(k.iter().all(|k| k.metrics.get("rocprof.SQ_WAVES") == Some(&16384.0)));
    assert_eq!(k[0].metrics[km::REGISTERS_PER_THREAD], 8.0);
    let e = parse(&counters, &Context::default()).unwrap_err();
    assert!(e.message.contains("kernel_trace"), "{e}");
}

#[test]
fn agent_info_names_the_device() {
    let trace = "\"Kind\",\"Agent_Id\",\"Queue_Id\",\"Dispatch_Id\",\"Kernel_Name\",\"Start_Timestamp\",\"End_Timestamp\",\"Workgroup_Size_X\",\"Grid_Size_X\"\n\
\"KERNEL_DISPATCH\",\"Agent 1\",1,7,\"k(int) [clone .kd]\",1000,3500,256,1000\n";
    let agents = "\"Node_Id\",\"Logical_Node_Id\",\"Agent_Type\",\"Name\",\"Product_Name\"\n0,0,\"CPU\",\"AMD EPYC\",\"AMD EPYC\"\n1,1,\"GPU\",\"gfx942\",\"AMD Instinct MI300X\"\n";
    let p = parse_files(&[("t", trace.as_bytes()), ("a", agents.as_bytes())], &Context::default()).unwrap();
    let k = kernels(&p);
    assert_eq!((k[0].name.as_str(), k[0].gpu.as_deref()), ("k(int)", Some("AMD Instinct MI300X")));
    assert_eq!((k[0].duration_us, k[0].grid), (2.5, Some([4, 1, 1])));
}

#[test]
fn companions_alone_are_refused_with_a_reason() {
    for (f, needle) in [
        ("omniperf_MI200_perfmon_SQ_IFETCH_LEVEL.input.txt", "input file"),
        ("omniperf_MI200_sysinfo.csv", "no rocprof dispatch table"),
        ("rocprofv3_counter_collection.csv", "kernel_trace"),
    ] {
        let e = parse(&fixture(f), &Context::default()).unwrap_err();
        assert!(e.message.contains(needle), "{f}: {e}");
    }
    let e = parse_files(
        &[("perfmon/SQ_IFETCH_LEVEL.txt", &fixture("omniperf_MI200_perfmon_SQ_IFETCH_LEVEL.input.txt"))],
        &Context::default(),
    )
    .unwrap_err();
    assert_eq!(e.line, Some(1));
    assert!(e.message.starts_with("perfmon/SQ_IFETCH_LEVEL.txt: this is rocprof's counter input file"), "{e}");
    assert!(parse(b"a,b\n1,2\n", &Context::default()).is_err());
    let e = parse(b"Name,Calls,TotalDurationNs\n", &Context::default()).unwrap_err();
    assert!(e.message.contains("no rows"), "{e}");
}

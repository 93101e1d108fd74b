//! Robustness of every parser: the shared fixtures, their truncations and deterministic byte-level mutations,
//! and arbitrary bytes are fed to every parser (not only the matching one). None may panic, and whatever they
//! accept must satisfy the sample invariants (positive finite times, at least one rank, finite bandwidths,
//! non-negative finite timer calls and times, lines within the input).

use std::io::{Read, Write};
use std::path::PathBuf;

use perfcast::ingest::{self, Context, Format, Parsed};
use perfcast::samples::Sample;

/// Deterministic xorshift64* generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures"));
    let mut out = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        for f in std::fs::read_dir(&dir).unwrap() {
            let path = f.unwrap().path();
            let name = format!(
                "{}/{}",
                dir.file_name().unwrap().to_string_lossy(),
                path.file_name().unwrap().to_string_lossy()
            );
            out.push((name, std::fs::read(&path).unwrap()));
        }
    }
    out.sort();
    assert!(out.len() >= 36, "fixtures at {}", root.display());
    out
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// What a parser may return: an error, or samples that satisfy the invariants.
fn check(what: &str, input: &[u8], result: Result<Parsed, ingest::ParseError>) {
    check_files(what, &[input], result)
}

/// [`check`] for several files parsed together: rejected lines lie within the longest of them.
fn check_files(what: &str, inputs: &[&[u8]], result: Result<Parsed, ingest::ParseError>) {
    let Ok(p) = result else { return };
    let lines = inputs.iter().map(|i| i.iter().filter(|&&b| b == b'\n').count() as u64 + 1).max().unwrap_or(1);
    for s in &p.samples {
        match s {
            Sample::Op(o) => {
                assert!(o.time_us.is_finite() && o.time_us > 0.0, "{what}: op time {}", o.time_us);
                assert!(!o.gpu.is_empty(), "{what}: op without gpu");
            }
            Sample::Kernel(k) => {
                assert!(k.duration_us.is_finite() && k.duration_us > 0.0, "{what}: kernel duration {}", k.duration_us);
                assert!(k.metrics.values().all(|v| v.is_finite()), "{what}: non-finite metric");
            }
            Sample::Comm(c) => {
                assert!(c.time_us.is_finite() && c.time_us > 0.0, "{what}: comm time {}", c.time_us);
                assert!(c.ranks >= 1, "{what}: zero ranks");
                assert!(
                    c.algbw_gbs.map_or(true, f64::is_finite) && c.busbw_gbs.map_or(true, f64::is_finite),
                    "{what}: bandwidth"
                );
            }
            Sample::Timer(t) => {
                assert!(!t.name.is_empty(), "{what}: timer without a name");
                assert!(t.calls.is_finite() && t.calls >= 0.0, "{what}: timer calls {}", t.calls);
                assert!(
                    t.exclusive_us.is_finite()
                        && t.exclusive_us >= 0.0
                        && t.inclusive_us.is_finite()
                        && t.inclusive_us >= 0.0,
                    "{what}: timer times {} / {}",
                    t.exclusive_us,
                    t.inclusive_us
                );
            }
        }
    }
    // Compressed inputs count lines of the inflated text; only plain text is held to its own line count.
    if !inputs.iter().any(|i| i.starts_with(&[0x1f, 0x8b])) {
        for r in &p.rejected {
            assert!(r.line <= lines, "{what}: rejected line {} beyond the input's {lines} lines", r.line);
        }
    }
}

/// Files of rocprof runs that are read together: MI300X counters, their timestamps and a sysinfo; a v3 trace with
/// its counters, stats and copies; an Omniperf MI200 pass with its timestamps.
fn rocprof_companions() -> Vec<(String, Vec<u8>)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/rocprof");
    let mut files: Vec<(String, Vec<u8>)> = [
        "omniperf_MI300X_rocprofv2_SQ_IFETCH_LEVEL.csv",
        "omniperf_MI300X_rocprofv2_timestamps.csv",
        "rocprofv3_kernel_trace.csv",
        "rocprofv3_counter_collection.csv",
        "rocprofv3_hip_api_stats.csv",
        "rocprofv3_memory_copy_trace.csv",
        "omniperf_MI200_gfx90a_rocprofv1_SQ_IFETCH_LEVEL.csv",
        "omniperf_MI200_gfx90a_rocprofv1_timestamps.csv",
    ]
    .iter()
    .map(|n| (n.to_string(), std::fs::read(format!("{root}/{n}")).unwrap()))
    .collect();
    files.push(("sysinfo.csv".into(), b"gpu_model,gpu_arch,max_sclk,num_xcd\nMI300X_A1,gfx942,2100,8\n".to_vec()));
    files
}

/// Runs every parser on `input`.
fn all_parsers(label: &str, input: &[u8]) {
    let ctxs = [
        Context::default(),
        Context {
            gpu: Some("H100".into()),
            ranks: Some(8),
            nodes: Some(1),
            gpus_per_node: Some(8),
            ..Default::default()
        },
        // A catalog GPU with a known clock and XCD count: rocprof reconstructs lost durations from GRBM_GUI_ACTIVE.
        Context { gpu: Some("MI300X".into()), ..Default::default() },
    ];
    for ctx in &ctxs {
        for f in Format::ALL {
            check(&format!("{label} as {f}"), input, ingest::parse(f, input, ctx));
        }
        check(&format!("{label} as tau files"), input, ingest::tau::parse_files(&[("profile.1.0.0", input)], ctx));
        check(
            &format!("{label} as rocprof files"),
            input,
            ingest::rocprof::parse_files(&[("a", input), ("b", input)], ctx),
        );
        // The input as each companion of a rocprof run, next to intact ones (named so that stats groups, sysinfo
        // clocks and the dispatch merge are exercised).
        let companions = rocprof_companions();
        for (i, (name, _)) in companions.iter().enumerate() {
            let mut files: Vec<(&str, &[u8])> = companions.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
            files[i].1 = input;
            let inputs: Vec<&[u8]> = files.iter().map(|(_, b)| *b).collect();
            check_files(&format!("{label} as {name}"), &inputs, ingest::rocprof::parse_files(&files, ctx));
        }
        let tau = ingest::tau::parse_files(&[("run_profile.0.0.0", input), ("run_profile.1.0.0", input)], ctx);
        check(&format!("{label} as two TAU ranks"), input, tau);
    }
    let _ = ingest::mt4g::parse(input);
    let _ = ingest::tau::parse_profile("profile.0.0.0", input);
    let _ = ingest::detect(input);
}

/// Byte-level mutations: flips, deletions, insertions of structural characters, digit runs.
fn mutate(rng: &mut Rng, bytes: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    let edits = 1 + rng.below(8);
    for _ in 0..edits {
        if b.is_empty() {
            b.push(b'"');
            continue;
        }
        let at = rng.below(b.len());
        match rng.below(6) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => {
                b.remove(at);
            }
            2 => {
                let c = [b'"', b',', b';', b'\n', b'\r', b'{', b'[', b']', b'}', b'#', b'-', b'.', b'e', 0xff]
                    [rng.below(14)];
                b.insert(at, c);
            }
            3 => {
                for (i, d) in b"99999999999999999999999".iter().enumerate() {
                    b.insert(at + i, *d);
                }
            }
            4 => {
                let end = (at + 1 + rng.below(64)).min(b.len());
                b.drain(at..end);
            }
            _ => {
                let len = rng.below(64).min(b.len() - at);
                let chunk = b[at..at + len].to_vec();
                for (i, c) in chunk.into_iter().enumerate() {
                    b.insert(at + i, c);
                }
            }
        }
    }
    b
}

#[test]
fn fixtures_truncations_and_mutations_never_panic() {
    for (name, bytes) in fixtures() {
        let plain = if bytes.starts_with(&[0x1f, 0x8b]) { gunzip(&bytes) } else { bytes.clone() };
        all_parsers(&name, &bytes);
        let cuts = if plain.len() > 200_000 { 6 } else { 24 };
        for i in 1..cuts {
            let cut = plain.len() * i / cuts;
            all_parsers(&format!("{name}[..{cut}]"), &plain[..cut]);
        }
        for cut in [1, 2, 17, bytes.len() / 2, bytes.len().saturating_sub(1)] {
            all_parsers(&format!("{name} raw[..{cut}]"), &bytes[..cut.min(bytes.len())]);
        }
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ name.len() as u64 ^ (bytes.len() as u64) << 17);
        let rounds = if plain.len() > 200_000 { 4 } else { 24 };
        for round in 0..rounds {
            let m = mutate(&mut rng, &plain);
            all_parsers(&format!("{name} mutation {round}"), &m);
            if bytes.starts_with(&[0x1f, 0x8b]) {
                all_parsers(&format!("{name} gz mutation {round}"), &gzip(&m));
            }
        }
    }
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut rng = Rng(42);
    let prefixes: [&[u8]; 9] = [
        b"",
        b"\"ID\",\"Process ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n",
        b"Dispatch_ID,Kernel_Name,Start_Timestamp,End_Timestamp,Grid_Size,Workgroup_Size\n",
        b"{\"traceEvents\": [",
        b"3 templated_functions_MULTI_TIME\n# Name\n",
        b"# OSU MPI Allreduce Latency Test v7.3\n# Size Avg Latency(us)\n",
        b"# nThread 1 nGpus 1\n#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n",
        b"{\"general\": {\"name\": \"x\"}, \"memory\": {",
        b"GPU_INFORMATION; GPU_name; ",
    ];
    for round in 0..400 {
        let prefix = prefixes[round % prefixes.len()];
        let len = rng.below(512);
        let alphabet = b"0123456789.,;:\"'{}[]#\n\r\t -eE+xN/A()<>=|_abcdefghijklmnopqrstuvwxyz\xff\x00";
        let mut input = prefix.to_vec();
        input.extend((0..len).map(|_| alphabet[rng.below(alphabet.len())]));
        all_parsers(&format!("random {round}"), &input);
    }
}

#[test]
fn hostile_numbers_do_not_allocate_or_overflow() {
    let inputs: [&[u8]; 10] = [
        b"18446744073709551615 templated_functions_MULTI_TIME\n# x\n",
        b"1 templated_functions_MULTI_TIME\n\"MPI_Allgather()\" 1e308 0 1e308 1e308 0 GROUP=\"MPI\"\n0 aggregates\n1 userevents\n# e\n\"Message size for all-gather\" 1 1e300 1e300 1e300 1\n",
        b"# OSU MPI Allgather Latency Test v7.3\n# Size Avg Latency(us)\n18446744073709551615 1.0\n",
        b"# nThread 1 nGpus 1\n#  Rank  0 Group  0 Pid 1 on h device  0 [0x1] G\n#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n 99999999999999999999 1 float sum -1 1 1 1 0 1 1 1 0\n",
        br#"{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 9, "args": {"Input Dims": [[18446744073709551615, 18446744073709551615], [18446744073709551615, 2]], "Input type": ["float", "float"], "External id": 1}}, {"ph": "X", "cat": "cuda_runtime", "pid": 1, "tid": 1, "ts": 1, "args": {"correlation": 5, "External id": 1}}, {"ph": "X", "cat": "kernel", "name": "k", "ts": 2, "dur": 1, "args": {"correlation": 5, "grid": [4294967296, 1, 1]}}]}"#,
        b"Dispatch_ID,Kernel_Name,Start_Timestamp,End_Timestamp,Grid_Size,Workgroup_Size\n0,k,18446744073709551615,0,18446744073709551615,1\n1,k,1,2,18446744073709551615,3\n",
        b"Name,Calls,TotalDurationNs,AverageNs,MinNs,MaxNs,StdDev\nhipFree,1e308,1.7e308,1.7e308,1e308,1.7e308,1e308\n",
        b"Kind,Direction,Start_Timestamp,End_Timestamp\nMEMORY_COPY,D2H,0,18446744073709551615\nMEMORY_COPY,H2D,1e308,1.7e308\n",
        b"Dispatch_ID,Kernel_Name,Start_Timestamp,End_Timestamp,GRBM_GUI_ACTIVE\n0,k,8.1E+14,8.1E+14,1.7e308\n1,k,,,1e-300\n",
        b"2 templated_functions_MULTI_TIME\n# x\n\"a\" 1e308 0 1.7e308 1.7e308 0 GROUP=\"X\"\n\"b [ <size> = <1e308> ]\" 1 0 1 1 0 GROUP=\"TAU_PARAM\"\n0 aggregates\n",
    ];
    for (i, input) in inputs.iter().enumerate() {
        all_parsers(&format!("hostile {i}"), input);
    }
    let ctx = Context { gpu: Some("H100".into()), ranks: Some(4), ..Default::default() };
    let p = ingest::parse(Format::Osu, inputs[2], &ctx).unwrap();
    assert!(p.samples.is_empty() && p.rejected[0].reason.contains("overflows"), "{:?}", p.rejected);
    let p = ingest::parse(Format::TorchTrace, inputs[4], &ctx).unwrap();
    assert!(p.rejected.iter().any(|r| r.reason.contains("aten::mm")), "{:?}", p.rejected);
}

/// A PyTorch trace of `n` kernels, each with its own cpu_op and launch.
fn torch_trace_of(n: u64) -> String {
    let mut s = String::from("{\"traceEvents\": [\n");
    for i in 0..n {
        let ts = i * 10;
        s.push_str(&format!(
            "{{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::gelu\",\"pid\":1,\"tid\":1,\"ts\":{ts},\"dur\":5,\"args\":{{\"External id\":{i},\"Input Dims\":[[64,1024]],\"Input type\":[\"c10::BFloat16\"]}}}},\n\
{{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":{},\"dur\":1,\"args\":{{\"External id\":{i},\"correlation\":{i}}}}},\n\
{{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gelu_kernel\",\"pid\":0,\"tid\":7,\"ts\":{},\"dur\":2,\"args\":{{\"correlation\":{i},\"device\":0}}}},\n",
            ts + 1,
            ts + 3
        ));
    }
    s.push_str("{\"ph\": \"i\", \"name\": \"end\", \"ts\": 0}]}\n");
    s
}

#[test]
fn large_trace_is_linear() {
    // The parse time of 8× the kernels, over the smaller trace's: about 8 when the cpu_op/launch/kernel join is
    // linear (or n log n), 64 when it is quadratic. A ratio, not a wall-clock limit, so a busy machine (which
    // slows both) does not fail it; the best of three runs of the small trace takes out most of its noise.
    let ctx = Context { gpu: Some("H100".into()), ..Default::default() };
    let time = |n: u64| {
        let s = torch_trace_of(n);
        let start = std::time::Instant::now();
        let p = ingest::parse(Format::TorchTrace, s.as_bytes(), &ctx).unwrap();
        let took = start.elapsed().as_secs_f64();
        assert_eq!(p.samples.len(), 2 * n as usize);
        took
    };
    let small = (0..3).map(|_| time(20_000)).fold(f64::INFINITY, f64::min);
    let large = time(160_000);
    assert!(large / small < 32.0, "8x the kernels took {:.1}x the time ({large:.2} s vs {small:.3} s)", large / small);
}

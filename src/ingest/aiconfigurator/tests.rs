//! The aiconfigurator fixtures (Parquet, as published) and their CSV.gz copies: row counts from an independent
//! reader, first rows by hand, the same samples from both containers, and hostile input.

use proptest::prelude::*;

use super::*;
use crate::hw::Precision;
use crate::op::{Collective, OpClass, Phase};
use crate::samples::{CommSample, OpSample, Sample};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/aiconfigurator/");
const CSV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/aiconfigurator/a100_sxm/");

/// (table, fixture file, rows): the row counts pyarrow 26 reads from each file's footer
/// (`pq.ParquetFile(f).metadata.num_rows`), equal to `zcat <table>.csv.gz | wc -l` − 1 for the CSV copies.
const TABLES: [(&str, &str, usize); 6] = [
    ("gemm_perf", "a100_sxm_vllm_gemm_vllm_0.14.0_gemm_perf.parquet", 9240),
    ("context_attention_perf", "a100_sxm_vllm_attention_vllm_0.14.0_context_attention_perf.parquet", 5457),
    ("generation_attention_perf", "a100_sxm_vllm_attention_vllm_0.14.0_generation_attention_perf.parquet", 5431),
    ("nccl_perf", "a100_sxm_vllm_comm_nccl_2.27.3_nccl_perf.parquet", 504),
    ("custom_allreduce_perf", "a100_sxm_vllm_comm_vllm_0.14.0_custom_allreduce_perf.parquet", 138),
    ("moe_perf", "a100_sxm_vllm_moe_vllm_0.14.0_moe_perf.parquet", 6360),
];

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn fixture(table: &str) -> Vec<u8> {
    let (_, file, _) = TABLES.iter().find(|t| t.0 == table).unwrap();
    read(&format!("{FIXTURES}{file}"))
}

/// Equal to 1e-12 relative: latency ms × 1000 rounds in the last bit.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs()
}

fn first_op(p: &Parsed) -> &OpSample {
    match &p.samples[0] {
        Sample::Op(o) => o,
        other => panic!("{other:?}"),
    }
}

fn first_comm(p: &Parsed) -> &CommSample {
    match &p.samples[0] {
        Sample::Comm(c) => c,
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_fixture_parses_every_row() {
    for (table, file, rows) in TABLES {
        let bytes = read(&format!("{FIXTURES}{file}"));
        assert!(looks_like(&bytes), "{file}");
        assert_eq!(super::super::detect(&bytes), Some(super::super::Format::Aiconfigurator), "{file}");
        let p = parse(&bytes, &Context::default()).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(p.samples.len(), rows, "{table}: {:?}", p.rejected);
        assert!(p.rejected.is_empty(), "{table}: {:?}", p.rejected);
    }
}

/// First rows, as pyarrow prints them, mapped by hand.
#[test]
fn first_rows_map_by_hand() {
    let ctx = Context::default();
    // gemm: bfloat16, m 8192, n 65536, k 4096, latency 15.287540011935763 ms.
    let p = parse(&fixture("gemm_perf"), &ctx).unwrap();
    let g = first_op(&p);
    assert_eq!(
        (g.op, g.phase, g.dtype, g.dims),
        (OpClass::Linear, Phase::Fwd, Precision::Bf16, [1, 8192, 65536, 4096, 0])
    );
    assert!(close(g.time_us, 15_287.540011935763), "{}", g.time_us);
    assert_eq!(g.gpu, "NVIDIA A100-SXM4-80GB");
    assert_eq!((g.attributes["kernel_source"].as_str(), g.attributes["version"].as_str()), ("vllm_default", "0.14.0"));
    // context attention: batch 4, isl 16384, 64 heads, 1 KV head, head_dim 128, kv bfloat16, 96.47487386067708 ms.
    let p = parse(&fixture("context_attention_perf"), &ctx).unwrap();
    let a = first_op(&p);
    assert_eq!((a.op, a.dtype, a.dims), (OpClass::AttentionPrefill, Precision::Bf16, [4, 16384, 64, 1, 128]));
    assert!(close(a.time_us, 96_474.87386067708), "{}", a.time_us);
    // generation attention (vLLM 0.14.0: attends `step` tokens): batch 32, step 1, 64/1 heads, 128;
    // 0.013712000101804733 ms.
    let p = parse(&fixture("generation_attention_perf"), &ctx).unwrap();
    let d = first_op(&p);
    assert_eq!((d.op, d.dims), (OpClass::AttentionDecode, [32, 1, 64, 1, 128]));
    assert!(close(d.time_us, 13.712000101804733), "{}", d.time_us);
    assert_eq!(d.attributes["step"], "1");
    // nccl: all_gather, half, 2 GPUs, 256 elements = 512 bytes, 0.00898 ms = 8.98 µs.
    let p = parse(&fixture("nccl_perf"), &ctx).unwrap();
    let c = first_comm(&p);
    assert_eq!(
        (c.collective, c.bytes, c.ranks, c.nodes, c.gpus_per_node),
        (Collective::AllGather, 512, 2, Some(1), Some(2))
    );
    assert!(close(c.time_us, 8.98), "{}", c.time_us);
    assert_eq!((c.dtype.as_deref(), c.attributes["implementation"].as_str()), (Some("half"), "nccl"));
    // custom all-reduce: bfloat16, 2 GPUs, 128 elements = 256 bytes, 0.004866879880428314 ms, vllm_graph.
    let p = parse(&fixture("custom_allreduce_perf"), &ctx).unwrap();
    let c = first_comm(&p);
    assert_eq!((c.collective, c.bytes, c.ranks), (Collective::AllReduce, 256, 2));
    assert!(close(c.time_us, 4.866879880428314), "{}", c.time_us);
    assert_eq!(c.attributes["implementation"], "vllm_custom_allreduce");
    assert_eq!(
        (c.attributes["ar_backend"].as_str(), c.attributes["kernel_source"].as_str()),
        ("vllm_graph", "vLLM_custom_graph")
    );
    assert!(!c.attributes.contains_key("backend"));
    assert_eq!(c.attributes["gpu"], "NVIDIA A100-SXM4-80GB");
    // moe: bfloat16, 1 token, hidden 4096, inter 14336 (tp 1), top-2 of 8 experts (ep 1), power_law_1.01,
    // 0.4540544033050537 ms.
    let p = parse(&fixture("moe_perf"), &ctx).unwrap();
    let m = first_op(&p);
    assert_eq!((m.op, m.dtype, m.dims), (OpClass::Moe, Precision::Bf16, [1, 4096, 14336, 8, 2]));
    assert!(close(m.time_us, 454.0544033050537), "{}", m.time_us);
    assert_eq!(m.attributes["distribution"], "power_law_1.01");
}

/// An expert-parallel row of the fixture: `num_tokens` counts the tokens entering the whole layer, the measured GPU
/// holds num_experts / moe_ep_size experts and computes 1/ep of the routed copies, so T = num_tokens / ep.
#[test]
fn moe_rows_with_expert_parallelism_keep_one_gpus_share_of_the_tokens() {
    // The a100 fixture row (also row of a100_sxm/moe_perf.csv.gz): bfloat16, num_tokens 4096, hidden 4096,
    // inter 14336, top-2 of 8 experts, moe_tp_size 1, moe_ep_size 4, power_law_1.01, 13.025762939453125 ms.
    // This GPU: 8/4 = 2 experts, F = 14336/1, T = 4096/4 = 1024 tokens' worth (2048 routed copies on average).
    let p = parse(&fixture("moe_perf"), &Context::default()).unwrap();
    let rows: Vec<&OpSample> = p
        .samples
        .iter()
        .filter_map(|s| match s {
            Sample::Op(o) => Some(o),
            _ => None,
        })
        .filter(|o| {
            let a = &o.attributes;
            a["moe_ep_size"] == "4"
                && a["num_tokens"] == "4096"
                && a["inter_size"] == "14336"
                && o.dims[1] == 4096
                && a["distribution"] == "power_law_1.01"
        })
        .collect();
    assert_eq!(rows.len(), 1);
    let m = rows[0];
    assert_eq!((m.op, m.dtype, m.dims), (OpClass::Moe, Precision::Bf16, [1024, 4096, 14336, 2, 2]));
    assert!(close(m.time_us, 13_025.762939453125), "{}", m.time_us);
    // The same shape with the experts tensor-parallel instead (moe_tp_size 4, ep 1): every rank sees all 4096 tokens
    // and all 8 experts at F = 14336/4 = 3584; 4.340214538574219 ms.
    let tp = p
        .samples
        .iter()
        .filter_map(|s| match s {
            Sample::Op(o) => Some(o),
            _ => None,
        })
        .find(|o| {
            let a = &o.attributes;
            a["moe_tp_size"] == "4"
                && a["num_tokens"] == "4096"
                && o.dims[1] == 4096
                && o.dims[2] == 3584
                && a["distribution"] == "power_law_1.01"
        })
        .unwrap();
    assert_eq!(tp.dims, [4096, 4096, 3584, 8, 2]);
    assert!(close(tp.time_us, 4_340.214538574219), "{}", tp.time_us);
}

/// The CSV.gz copies give the same samples; their attributes add the prepended columns.
#[test]
fn csv_gz_copies_give_the_same_samples() {
    let strip = |mut s: Sample| {
        let a = match &mut s {
            Sample::Op(o) => &mut o.attributes,
            Sample::Comm(c) => &mut c.attributes,
            _ => unreachable!(),
        };
        for k in ["backend", "backend_version", "aic_system"] {
            a.remove(k);
        }
        s
    };
    for (table, _, rows) in TABLES {
        let csv = parse(&read(&format!("{CSV}{table}.csv.gz")), &Context::default()).unwrap();
        let pq = parse(&fixture(table), &Context::default()).unwrap();
        assert_eq!(csv.samples.len(), rows, "{table}");
        let csv: Vec<Sample> = csv.samples.into_iter().map(strip).collect();
        assert_eq!(csv, pq.samples, "{table}");
    }
}

#[test]
fn several_tables_in_one_upload_and_in_a_tar() {
    let gemm = fixture("gemm_perf");
    let nccl = fixture("nccl_perf");
    let meta = read(&format!("{FIXTURES}a100_sxm_vllm_gemm_vllm_0.14.0_collection_meta.yaml"));
    let files: Vec<(&str, &[u8])> =
        vec![("gemm_perf.parquet", &gemm), ("collection_meta.yaml", &meta), ("nccl_perf.parquet", &nccl)];
    assert_eq!(super::super::detect_files(&files), Some(super::super::Format::Aiconfigurator));
    let p = parse_files(&files, &Context::default()).unwrap();
    assert_eq!(p.samples.len(), 9240 + 504);
    let mut builder = tar::Builder::new(Vec::new());
    for (name, bytes) in &files {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        builder.append_data(&mut h, format!("a100_sxm/{name}"), *bytes).unwrap();
    }
    let archive = builder.into_inner().unwrap();
    assert_eq!(super::super::detect(&archive), Some(super::super::Format::Aiconfigurator));
    assert_eq!(parse(&archive, &Context::default()).unwrap().samples.len(), 9240 + 504);
}

#[test]
fn bad_cells_fail_and_unusable_rows_are_rejected_with_their_line() {
    let header = "framework,version,device,op_name,kernel_source,moe_dtype,num_tokens,hidden_size,inter_size,topk,\
                  num_experts,moe_tp_size,moe_ep_size,distribution,latency\n";
    let good = "VLLM,0.24.0,NVIDIA H100 80GB HBM3,moe,k,fp8_block,16,7168,2048,8,256,4,1,balanced,0.2\n";
    let mxfp4 = "VLLM,0.24.0,NVIDIA H100 80GB HBM3,moe,k,w4a16_mxfp4,16,7168,2048,8,256,1,8,balanced,0.2\n";
    let text = format!("{header}{good}{mxfp4}{mxfp4}");
    let p = parse(text.as_bytes(), &Context::default()).unwrap();
    assert_eq!(p.samples.len(), 1);
    // DeepSeek-V3-like, experts split 4-way by TP: F = 2048 / 4 = 512, E = 256.
    assert_eq!(first_op(&p).dims, [16, 7168, 512, 256, 8]);
    assert_eq!(first_op(&p).dtype, Precision::Fp8Block);
    assert_eq!(p.rejected.len(), 1);
    assert_eq!(p.rejected[0].line, 3);
    assert!(
        p.rejected[0].reason.contains("w4a16_mxfp4") && p.rejected[0].reason.contains("(2 times)"),
        "{:?}",
        p.rejected
    );
    // A text where a number belongs fails the upload, naming line and column.
    let bad =
        format!("{header}{good}VLLM,0.24.0,NVIDIA H100 80GB HBM3,moe,k,fp8,sixteen,7168,2048,8,256,1,1,balanced,0.2\n");
    let e = parse(bad.as_bytes(), &Context::default()).unwrap_err();
    assert_eq!((e.line, e.column), (Some(3), Some(7)));
    assert!(e.message.contains("num_tokens"), "{e}");
    // No table columns: not this format.
    assert!(parse(b"a,b\n1,2\n", &Context::default()).is_err());
}

#[test]
fn truncated_parquet_is_an_error_and_a_row_bomb_is_refused() {
    let gemm = fixture("gemm_perf");
    for cut in [0, 4, 100, gemm.len() / 2, gemm.len() - 9, gemm.len() - 1] {
        assert!(parse(&gemm[..cut], &Context::default()).is_err(), "cut at {cut}");
    }
    // 2,000,000 constant rows in 45,125 bytes (written by pyarrow; see tests/data/README.md): more rows than bytes.
    let bomb = read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/aiconfigurator_row_bomb.parquet"));
    let e = parse(&bomb, &Context::default()).unwrap_err();
    assert!(e.message.contains("2000000 rows"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Random truncations and byte flips of Parquet fixtures give Ok or Err, never a panic.
    #[test]
    fn damaged_parquet_never_panics(
        table in 0usize..6,
        cut in 0.0f64..1.0,
        flips in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 0..8),
    ) {
        let mut bytes = fixture(TABLES[table].0);
        let keep = ((bytes.len() as f64) * (0.5 + cut / 2.0)) as usize;
        if cut < 0.3 {
            bytes.truncate(keep);
        }
        let len = bytes.len();
        for (at, v) in flips {
            let i = ((len as f64) * at) as usize % len.max(1);
            if let Some(b) = bytes.get_mut(i) {
                *b ^= v;
            }
        }
        let _ = parse(&bytes, &Context::default());
    }
}

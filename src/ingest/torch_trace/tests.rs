use super::*;
use crate::hw::Precision;
use crate::op::Collective;
use crate::op::{OpClass, Phase};
use crate::samples::{kernel_metrics as km, CommSample, KernelSample, OpSample, Sample};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../shared/fixtures/pytorch_trace/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn ops(p: &Parsed) -> Vec<&OpSample> {
    p.samples.iter().filter_map(|s| if let Sample::Op(o) = s { Some(o) } else { None }).collect()
}

fn kernels(p: &Parsed) -> Vec<&KernelSample> {
    p.samples.iter().filter_map(|s| if let Sample::Kernel(k) = s { Some(k) } else { None }).collect()
}

fn comms(p: &Parsed) -> Vec<&CommSample> {
    p.samples.iter().filter_map(|s| if let Sample::Comm(c) = s { Some(c) } else { None }).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6 * b.abs().max(1.0)
}

/// Timestamps around 4.2e12 µs parse to f64 with ~1 ns resolution.
fn close_us(a: f64, b: f64) -> bool {
    (a - b).abs() < 2e-3
}

#[test]
fn minimal_backward_thread_joins_by_time_and_infers_linear_backward_dims() {
    // The launch's External id (2131433) names no cpu_op: the kernel is joined by time to aten::mm (ts
    // 1666149715364330, 58 µs) on thread 24922, inside AddmmBackward0 (gradient [2048, 2048]); the mm multiplies
    // [2048, 2048] · [2048, 256], so K = 256.
    let p = parse(
        &fixture("hta_minimal_backward_thread.json"),
        &Context { gpu: Some("A100".into()), ..Default::default() },
    )
    .unwrap();
    let k = kernels(&p);
    assert_eq!(k.len(), 1);
    assert_eq!(k[0].name, "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>");
    assert_eq!((k[0].duration_us, k[0].grid, k[0].block), (45.0, Some([32, 1, 2]), Some([128, 1, 1])));
    assert_eq!(k[0].metrics[km::REGISTERS_PER_THREAD], 240.0);
    assert_eq!(k[0].metrics[km::SHARED_MEM_BYTES], 98304.0);
    assert_eq!(k[0].attributes["cpu_op"], "aten::mm");
    let o = ops(&p);
    assert_eq!(o.len(), 1);
    assert_eq!((o[0].op, o[0].phase, o[0].dtype), (OpClass::Linear, Phase::Bwd, Precision::Fp32));
    assert_eq!((o[0].dims, o[0].time_us, o[0].gpu.as_str()), ([1, 2048, 2048, 256, 0], 45.0, "A100"));
    assert_eq!(o[0].attributes["dims_source"], "backward_gemm_shapes");
    assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    // Without a GPU name the op is rejected with the reason; the kernel stays.
    let p = parse(&fixture("hta_minimal_backward_thread.json"), &Context::default()).unwrap();
    assert_eq!(ops(&p).len(), 0);
    assert!(p.rejected[0].reason.contains("no GPU name"), "{:?}", p.rejected);
}

#[test]
fn mi250_forward_and_backward_ops() {
    let p = parse(&fixture("hta_MI250_ROCm6.2_minitoy_train_kineto.json.gz"), &Context::default()).unwrap();
    assert_eq!(kernels(&p).len(), 14);
    let o = ops(&p);
    let find = |class: OpClass, phase: Phase, dims: [u64; 4]| {
        o.iter().find(|s| s.op == class && s.phase == phase && s.dims == crate::op::dims_from(&dims)).copied()
    };
    // aten::linear (ext 9) owns aten::addmm (ext 13) and its two kernels: the bias copy at 4203669603771.648 and the
    // GEMM at 4203669603847.969 lasting 17.6 µs; input [5, 128], weight [128, 128].
    let fwd = find(OpClass::Linear, Phase::Fwd, [1, 5, 128, 128]).expect("linear fwd");
    assert!(close_us(fwd.time_us, 4203669603847.969 + 17.6 - 4203669603771.648), "{}", fwd.time_us);
    assert_eq!((fwd.gpu.as_str(), fwd.dtype), ("AMD Radeon Graphics", Precision::Fp32));
    assert_eq!(fwd.attributes["kernels"], "2");
    // AddmmBackward0 (Sequence number 5) takes the shapes of aten::addmm (Sequence number 5); its kernels: the mm at
    // 4203669605185.735 and the sum ending at 4203669605284.296 + 13.6.
    let bwd = find(OpClass::Linear, Phase::Bwd, [1, 5, 128, 128]).expect("linear bwd");
    assert!(close_us(bwd.time_us, 4203669605284.296 + 13.6 - 4203669605185.735), "{}", bwd.time_us);
    assert_eq!(bwd.attributes["dims_source"], "forward_op");
    // aten::relu [5, 128] → clamp kernel 6.72 µs; ReluBackward0 → threshold_backward kernel 5.6 µs.
    assert!(close(find(OpClass::Elementwise, Phase::Fwd, [5, 128, 1, 0]).unwrap().time_us, 6.72));
    assert!(close(find(OpClass::Elementwise, Phase::Bwd, [5, 128, 1, 0]).unwrap().time_us, 5.6));
    // AccumulateGrad's aten::add_ on [128] + [128] (4.96 µs) and [128, 128] + [128, 128] (4.16 µs).
    assert!(close(find(OpClass::Elementwise, Phase::Bwd, [1, 128, 2, 0]).unwrap().time_us, 4.96));
    assert!(close(find(OpClass::Elementwise, Phase::Bwd, [128, 128, 2, 0]).unwrap().time_us, 4.16));
    assert_eq!(o.len(), 6);
    let reasons: Vec<&str> = p.rejected.iter().map(|r| r.reason.as_str()).collect();
    for name in ["aten::mse_loss", "aten::ones_like", "MseLossBackward0", "aten::_foreach_add_"] {
        assert!(reasons.iter().any(|r| r.contains(name) && r.contains("no operator class")), "{name}: {reasons:?}");
    }
}

#[test]
fn a100_trace_without_shapes_gives_kernels_and_one_rejection_per_op_name() {
    let p = parse(&fixture("hta_A100_simple_add_trace.json.gz"), &Context::default()).unwrap();
    let k = kernels(&p);
    assert_eq!(k.len(), 79);
    // The first kernel: a uniform_ distribution kernel, 73 µs, grid [864, 1, 1], block [256, 1, 1], 47 registers,
    // est. achieved occupancy 63 %, on device 0 = "NVIDIA A100-PG509-200".
    assert!(k[0]
        .name
        .starts_with("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel"));
    assert_eq!((k[0].duration_us, k[0].grid, k[0].block), (73.0, Some([864, 1, 1]), Some([256, 1, 1])));
    assert_eq!(k[0].metrics[km::REGISTERS_PER_THREAD], 47.0);
    assert_eq!(k[0].metrics["torch.est_achieved_occupancy"], 0.63);
    assert_eq!(k[0].gpu.as_deref(), Some("NVIDIA A100-PG509-200"));
    assert!(ops(&p).is_empty());
    // Six aten::linear calls, recorded without Input Dims: one rejection with the count.
    let linear: Vec<_> = p.rejected.iter().filter(|r| r.reason.starts_with("aten::linear:")).collect();
    assert_eq!(linear.len(), 1);
    assert!(
        linear[0].reason.contains("record_shapes") && linear[0].reason.ends_with("(6 times)"),
        "{}",
        linear[0].reason
    );
    assert!(p
        .rejected
        .iter()
        .any(|r| r.reason.starts_with("aten::conv2d: cpu_op with GPU kernels has no operator class")));
}

#[test]
fn distributed_trace_nccl_kernels_become_comm_samples() {
    let ctx = Context { gpu: Some("A100-SXM4-80GB".into()), ..Default::default() };
    let p = parse(&fixture("hta_distributed_nccl_rank0_of_128_sampled.json.gz"), &ctx).unwrap();
    let c = comms(&p);
    assert_eq!(c.len(), 10);
    // Correlation 6981619: launched inside nccl:all_reduce with Input Dims [[19618307]] float; kernel 11727 µs;
    // distributedInfo.world_size 128.
    let ar = c.iter().find(|s| s.time_us == 11727.0).unwrap();
    assert_eq!((ar.collective, ar.bytes, ar.ranks), (Collective::AllReduce, 19618307 * 4, 128));
    assert_eq!(ar.attributes["ranks_source"], "world_size");
    let algbw = 19618307.0 * 4.0 / (11727.0 * 1e3);
    assert!(close(ar.algbw_gbs.unwrap(), algbw));
    assert!(close(ar.busbw_gbs.unwrap(), algbw * 2.0 * 127.0 / 128.0));
    // Correlation 7172110: c10d::_allgather_base_ gathers [1073741824] signed chars from [16777216]: 64 ranks.
    let ag = c.iter().find(|s| s.time_us == 63644.0).unwrap();
    assert_eq!((ag.collective, ag.bytes, ag.ranks), (Collective::AllGather, 1073741824, 64));
    // Correlation 6937369: nccl:all_to_all of [384] longs.
    let a2a = c.iter().find(|s| s.time_us == 30669.0).unwrap();
    assert_eq!((a2a.collective, a2a.bytes, a2a.dtype.as_deref()), (Collective::AllToAll, 384 * 8, Some("long")));
    assert_eq!(c.iter().filter(|s| s.collective == Collective::AllReduce).count(), 4);
    assert!(kernels(&p).iter().all(|k| !k.name.starts_with("ncclKernel")));
    assert_eq!(kernels(&p).len(), 1154 - 10);
    assert!(ops(&p).len() > 50);
}

#[test]
fn synthetic_trace_external_ids_nesting_and_collapsed_rejections() {
    let trace = r#"{"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
 "distributedInfo": {"rank": 3, "world_size": 8},
 "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::layer_norm", "pid": 1, "tid": 1, "ts": 100, "dur": 50,
   "args": {"External id": 1, "Input Dims": [[4, 512, 1024], [], [1024], [1024], [], []], "Input type": ["c10::BFloat16", "", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::native_layer_norm", "pid": 1, "tid": 1, "ts": 102, "dur": 40,
   "args": {"External id": 2, "Input Dims": [[4, 512, 1024], [], [1024], [1024], []], "Input type": ["c10::BFloat16"]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 5, "args": {"External id": 2, "correlation": 77}},
  {"ph": "X", "cat": "kernel", "name": "layer_norm_kernel", "pid": 0, "tid": 7, "ts": 200, "dur": 12.5, "args": {"correlation": 77, "device": 0, "grid": [2048, 1, 1], "block": [256, 1, 1]}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::cumsum", "pid": 1, "tid": 1, "ts": 300, "dur": 10, "args": {"External id": 3}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 301, "dur": 2, "args": {"correlation": 78}},
  {"ph": "X", "cat": "kernel", "name": "scan_kernel", "pid": 0, "tid": 7, "ts": 320, "dur": 3, "args": {"correlation": 78, "device": 0}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::cumsum", "pid": 1, "tid": 1, "ts": 400, "dur": 10, "args": {"External id": 4}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 401, "dur": 2, "args": {"correlation": 79}},
  {"ph": "X", "cat": "kernel", "name": "scan_kernel", "pid": 0, "tid": 7, "ts": 420, "dur": 3, "args": {"correlation": 79, "device": 0}},
  {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 500, "dur": 10,
   "args": {"Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": 1048576, "Group size": 4, "dtype": "BFloat16"}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 505, "dur": 2, "args": {"correlation": 80}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 9, "ts": 600, "dur": 20, "args": {"correlation": 80, "device": 0}},
  {"ph": "i", "name": "marker", "ts": 1}
 ]}"#;
    let p = parse(trace.as_bytes(), &Context::default()).unwrap();
    let o = ops(&p);
    assert_eq!(o.len(), 1, "{:?}", p.rejected);
    assert_eq!((o[0].op, o[0].dims, o[0].dtype), (OpClass::LayerNorm, [2048, 1024, 0, 0, 0], Precision::Bf16));
    assert_eq!((o[0].time_us, o[0].gpu.as_str()), (12.5, "NVIDIA H100 80GB HBM3"));
    assert_eq!(o[0].attributes["rank"], "3");
    let c = comms(&p);
    assert_eq!((c[0].collective, c[0].bytes, c[0].ranks), (Collective::AllReduce, 2 * 1048576, 4));
    assert_eq!((c[0].time_us, c[0].dtype.as_deref()), (20.0, Some("bf16")));
    assert_eq!(p.rejected.len(), 1);
    assert_eq!(p.rejected[0].reason, "aten::cumsum: cpu_op with GPU kernels has no operator class (2 times)");
    assert_eq!(p.rejected[0].line, 10, "the line where the first aten::cumsum event ends");
}

#[test]
fn gzip_array_format_and_errors() {
    use std::io::Write;
    let events =
        r#"[{"ph": "X", "cat": "kernel", "name": "k", "pid": "gpu", "tid": "stream 7", "ts": 1.5, "dur": 2.25}]"#;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(events.as_bytes()).unwrap();
    let gz = enc.finish().unwrap();
    let p = parse(&gz, &Context::default()).unwrap();
    assert_eq!(kernels(&p)[0].duration_us, 2.25);
    let e = parse(b"{\"traceEvents\": [\n{\"ph\": \"X\",,}]}", &Context::default()).unwrap_err();
    assert_eq!(e.line, Some(2));
    assert!(e.column.is_some());
    assert!(parse(b"{\"schemaVersion\": 1}", &Context::default()).unwrap_err().message.contains("traceEvents"));
    assert!(parse(b"\x1f\x8b\x08garbage", &Context::default()).is_err());
    assert!(looks_like(b"{\n  \"schemaVersion\": 1,\n  \"traceEvents\": ["));
    assert!(!looks_like(b"{\"op\": \"linear\"}"));
}

#[test]
fn kernels_under_an_annotation_only_and_nccl_facts_from_comm_ops_only() {
    let trace = r#"{"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 2, "args": {"correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "triton_fused_0", "pid": 0, "tid": 7, "ts": 20, "dur": 4, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: AddmmBackward0", "pid": 1, "tid": 1, "ts": 100, "dur": 100,
   "args": {"Sequence number": 9, "Input Dims": [[8, 8]], "Input type": ["double"]}},
  {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 1, "tid": 1, "ts": 110, "dur": 20,
   "args": {"Input Dims": [[1000]], "Input type": ["c10::BFloat16"]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 115, "dur": 2, "args": {"correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", "pid": 0, "tid": 9, "ts": 300, "dur": 50, "args": {"correlation": 2}}
 ]}"#;
    let p = parse(trace.as_bytes(), &Context { ranks: Some(16), ..Default::default() }).unwrap();
    assert_eq!(kernels(&p).len(), 1);
    assert_eq!(p.rejected.len(), 1);
    assert!(
        p.rejected[0].reason.starts_with("ProfilerStep#4: GPU kernels launched with no cpu_op"),
        "{:?}",
        p.rejected
    );
    let c = comms(&p);
    // The all-reduce runs inside a backward node typed double; its size and type come from nccl:all_reduce only.
    assert_eq!((c[0].bytes, c[0].ranks, c[0].dtype.as_deref()), (2000, 16, Some("bf16")));
    assert_eq!(c[0].attributes["ranks_source"], "context");
}

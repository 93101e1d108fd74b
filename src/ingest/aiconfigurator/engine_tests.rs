//! TensorRT-LLM's and SGLang's tables (`data/aiconfigurator/<gpu>/{trtllm,sglang}/`): one test per table, each on
//! rows copied verbatim from the H100 (B200 for NVFP4 MoE) files of ../shared, mapped by hand.

use super::*;
use crate::hw::Precision;
use crate::op::{Collective, KernelFamily, OpClass, Phase};
use crate::samples::{compute_dtype, Sample};

fn parse_csv(csv: &str) -> Parsed {
    parse(csv.as_bytes(), &Context::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn ops(p: &Parsed) -> Vec<&crate::samples::OpSample> {
    p.samples.iter().filter_map(|s| if let Sample::Op(o) = s { Some(o) } else { None }).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs()
}

const H100: &str = "h100_sxm,trtllm,1.3.0rc20,TRTLLM,1.3.0rc20,NVIDIA H100 80GB HBM3";
const H100_SGLANG: &str = "h100_sxm,sglang,0.5.14,SGLang,0.5.14,NVIDIA H100 80GB HBM3";

#[test]
fn trtllm_gemm_rows_are_linear_samples_of_the_trtllm_family() {
    // h100_sxm/trtllm/gemm_perf.csv.gz, row 1: bf16, m 4353, n 65536, k 51200, 39.30102284749349 ms.
    let p = parse_csv(&format!(
        "gpu,backend,backend_version,framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\n\
         {H100},gemm,torch_flow,bfloat16,4353,65536,51200,39.30102284749349\n"
    ));
    let g = ops(&p)[0];
    assert_eq!(
        (g.op, g.phase, g.dtype, g.dims),
        (OpClass::Linear, Phase::Fwd, Precision::Bf16, [1, 4353, 65536, 51200, 0])
    );
    assert!(close(g.time_us, 39_301.02284749349), "{}", g.time_us);
    assert_eq!(g.kernel_family(), Some(KernelFamily::Trtllm));
    assert_eq!(g.attributes["kernel_source"], "torch_flow");
}

#[test]
fn sglang_gemm_rows_keep_their_kernel() {
    // h100_sxm/sglang/gemm_perf.csv.gz, row 1: fp8 (activation quantization inside the call), m 224, n 1536,
    // k 2048, 0.010989333192507425 ms.
    let p = parse_csv(&format!(
        "gpu,backend,backend_version,framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\n\
         {H100_SGLANG},gemm,sglang_sgl_kernel_fp8_scaled_mm,fp8,224,1536,2048,0.010989333192507425\n"
    ));
    let g = ops(&p)[0];
    assert_eq!((g.dtype, g.dims), (Precision::Fp8, [1, 224, 1536, 2048, 0]));
    assert!(close(g.time_us, 10.989333192507425), "{}", g.time_us);
    assert_eq!(g.kernel_family(), Some(KernelFamily::Sglang));
    assert_eq!(g.attributes["kernel_source"], "sglang_sgl_kernel_fp8_scaled_mm");
}

#[test]
fn trtllm_attention_reads_window_before_beam_width_and_keeps_fp8_fmha() {
    // h100_sxm/trtllm/context_attention_perf.csv.gz: row 1 (bf16 KV, bf16 FMHA: 16 × 8192 tokens, 96/1 heads of
    // 128, 53.49678039550781 ms) and the first row with attn_dtype fp8 (1 × 16384, 96/96 heads of 64, fp8 KV,
    // 6.291658401489258 ms); trtllm puts window_size before beam_width.
    let header = "gpu,backend,backend_version,framework,version,device,op_name,kernel_source,batch_size,isl,num_heads,\
                  num_key_value_heads,head_dim,window_size,beam_width,attn_dtype,kv_cache_dtype,step,latency\n";
    let p = parse_csv(&format!(
        "{header}{H100},context_attention,torch_flow,16,8192,96,1,128,0,1,bfloat16,bfloat16,0,53.49678039550781\n\
         {H100},context_attention,torch_flow,1,16384,96,96,64,0,1,fp8,fp8,0,6.291658401489258\n"
    ));
    let o = ops(&p);
    assert_eq!((o[0].op, o[0].dtype, o[0].dims), (OpClass::AttentionPrefill, Precision::Bf16, [16, 8192, 96, 1, 128]));
    assert!(close(o[0].time_us, 53_496.78039550781));
    assert_eq!(compute_dtype(&o[0].attributes), Some(Precision::Bf16));
    // The fp8 row: the KV cache's precision is the sample's, FP8 FMHA its compute precision.
    assert_eq!((o[1].dtype, o[1].dims), (Precision::Fp8, [1, 16384, 96, 96, 64]));
    assert_eq!(compute_dtype(&o[1].attributes), Some(Precision::Fp8));
    assert!(o.iter().all(|s| s.kernel_family() == Some(KernelFamily::Trtllm)));
}

#[test]
fn trtllm_decode_attends_step_plus_one() {
    // h100_sxm/trtllm/generation_attention_perf.csv.gz, row 1: 32 sequences, step 1 (attends 2 tokens), 64/64
    // heads of 64, 0.023930666347344715 ms. TensorRT-LLM's version 1.3.0rc20 is no vLLM before 0.24.
    let p = parse_csv(&format!(
        "gpu,backend,backend_version,framework,version,device,op_name,kernel_source,batch_size,isl,num_heads,\
         num_key_value_heads,head_dim,window_size,beam_width,attn_dtype,kv_cache_dtype,step,latency\n\
         {H100},generation_attention,torch_flow,32,1,64,64,64,0,1,bfloat16,bfloat16,1,0.023930666347344715\n"
    ));
    let d = ops(&p)[0];
    assert_eq!((d.op, d.dims), (OpClass::AttentionDecode, [32, 2, 64, 64, 64]));
    assert!(close(d.time_us, 23.930666347344715));
}

#[test]
fn sglang_sliding_window_prefill_is_rejected_and_full_attention_kept() {
    // h100_sxm/sglang/context_attention_perf.csv.gz, row 1 (Triton, window 1024: not the class's full causal
    // shape) and its first FlashAttention-3 fp8 row (2 × 16384 tokens, 40/8 heads of 128, 7.589390563964844 ms).
    let header = "gpu,backend,backend_version,framework,version,device,op_name,kernel_source,batch_size,isl,num_heads,\
                  num_key_value_heads,head_dim,beam_width,attn_dtype,kv_cache_dtype,step,window_size,latency\n";
    let p = parse_csv(&format!(
        "{header}{H100_SGLANG},context_attention,triton,2,16384,16,8,256,1,bfloat16,bfloat16,0,1024,35.993429565429686\n\
         {H100_SGLANG},context_attention,fa3,2,16384,40,8,128,1,fp8,fp8,0,0,7.589390563964844\n"
    ));
    assert_eq!(p.rejected.len(), 1);
    assert!(p.rejected[0].reason.contains("sliding-window"), "{:?}", p.rejected);
    let a = ops(&p)[0];
    assert_eq!(
        (a.dtype, a.dims, a.attributes["kernel_source"].as_str()),
        (Precision::Fp8, [2, 16384, 40, 8, 128], "fa3")
    );
    assert!(close(a.time_us, 7_589.390563964844));
    assert_eq!(a.kernel_family(), Some(KernelFamily::Sglang));
}

#[test]
fn trtllm_moe_keeps_swiglu_experts_and_rejects_non_gated_ones() {
    // b200_sxm/trtllm/moe_perf_1.3.0rc20.csv.gz, row 1: nvfp4, 1 token of hidden 3072, inter 1024, top-8 of 256
    // experts over ep 256 (one expert here: T = ⌈1/256⌉ = 1, E = 1), min-latency kernel, 0.016230399906635284 ms;
    // h100_sxm/trtllm/moe_perf.csv.gz's first non-gated row is rejected.
    let header = "gpu,backend,backend_version,framework,version,device,op_name,kernel_source,moe_dtype,num_tokens,\
                  hidden_size,inter_size,topk,num_experts,moe_tp_size,moe_ep_size,distribution,latency\n";
    let p = parse_csv(&format!(
        "{header}b200_sxm,trtllm,1.3.0rc20,TRTLLM,1.3.0rc20,NVIDIA B200,moe,moe_torch_flow_min_latency,nvfp4,1,3072,1024,\
         8,256,1,256,power_law_1.2,0.016230399906635284\n\
         {H100},moe,moe_torch_flow_nongated,fp8,1,2048,5120,22,512,16,2,power_law_1.2,0.048198398947715757\n"
    ));
    let m = ops(&p)[0];
    assert_eq!((m.op, m.dtype, m.dims), (OpClass::Moe, Precision::Nvfp4, [1, 3072, 1024, 1, 8]));
    assert!(close(m.time_us, 16.230399906635284));
    assert_eq!(p.rejected.len(), 1);
    assert!(p.rejected[0].reason.contains("non-gated"), "{:?}", p.rejected);
}

#[test]
fn sglang_moe_rows_are_moe_samples() {
    // h100_sxm/sglang/moe_perf.csv.gz, row 1: fp8_block, 64 tokens of 7168, inter 2048, top-8 of 256 experts (tp 1,
    // ep 1: DeepSeek-V3), balanced, 1.914014129638672 ms.
    let p = parse_csv(&format!(
        "gpu,backend,backend_version,framework,version,device,op_name,kernel_source,moe_dtype,num_tokens,\
         hidden_size,inter_size,topk,num_experts,moe_tp_size,moe_ep_size,distribution,latency\n\
         {H100_SGLANG},moe,sglang_fused_moe_triton,fp8_block,64,7168,2048,8,256,1,1,balanced,1.914014129638672\n"
    ));
    let m = ops(&p)[0];
    assert_eq!((m.dtype, m.dims), (Precision::Fp8Block, [64, 7168, 2048, 256, 8]));
    assert!(close(m.time_us, 1_914.014129638672));
    assert_eq!(m.kernel_family(), Some(KernelFamily::Sglang));
}

#[test]
fn sglangs_blackwell_fp8_block_moe_row_is_the_flashinfer_trtllm_kernel_at_ep_8() {
    // b200_sxm/sglang/moe_perf.csv.gz, line 23,336: DeepSeek-V3's experts (7168 → 2048, top-8 of 256) in fp8_block on
    // FlashInfer's TensorRT-LLM kernel, 64 tokens at moe tp 1, ep 8, balanced, 0.34464767456054685 ms. This GPU holds
    // 256 / 8 = 32 experts and receives the copies of ⌈64 / 8⌉ = 8 tokens' worth (64 · 8 / 8 = 64 routed copies).
    let p = parse_csv(
        "gpu,backend,backend_version,framework,version,device,op_name,kernel_source,moe_dtype,num_tokens,\
         hidden_size,inter_size,topk,num_experts,moe_tp_size,moe_ep_size,distribution,latency\n\
         b200_sxm,sglang,0.5.14,SGLang,0.5.14,NVIDIA B200,moe,sglang_flashinfer_trtllm_moe,fp8_block,64,7168,2048,8,\
         256,1,8,balanced,0.34464767456054685\n",
    );
    let m = ops(&p)[0];
    assert_eq!((m.op, m.dtype, m.dims), (OpClass::Moe, Precision::Fp8Block, [8, 7168, 2048, 32, 8]));
    assert!(close(m.time_us, 344.647_674_560_546_85));
    assert_eq!(m.kernel_family(), Some(KernelFamily::Sglang));
    assert_eq!(m.attributes.get("kernel_source").map(String::as_str), Some("sglang_flashinfer_trtllm_moe"));
    assert_eq!(m.attributes.get("num_tokens").map(String::as_str), Some("64"));
}

#[test]
fn quantization_tables_are_quantize_and_quantize_scale_samples() {
    // h100_sxm/trtllm/scale_matrix_perf.csv.gz and computescale_perf.csv.gz, row 1 each: m 32768, k 51200, fp8;
    // static quantization 1.6843626658121746 ms, the dynamic scale's share 2.540670903523763 ms. A scale floored at
    // 0 upstream has no positive latency and is rejected.
    let header = "gpu,backend,backend_version,framework,version,device,op_name,kernel_source,m,k,quant_dtype,latency\n";
    let p = parse_csv(&format!(
        "{header}{H100},scale_matrix,torch_ops,32768,51200,fp8,1.6843626658121746\n\
         {H100},compute_scale,torch_ops,32768,51200,fp8,2.540670903523763\n\
         {H100},compute_scale,torch_ops,1,32,fp8,0.0\n"
    ));
    let o = ops(&p);
    assert_eq!((o[0].op, o[0].dtype, o[0].dims), (OpClass::Quantize, Precision::Fp8, [32768, 51200, 0, 0, 0]));
    assert!(close(o[0].time_us, 1_684.3626658121746));
    assert_eq!((o[1].op, o[1].dims), (OpClass::QuantizeScale, [32768, 51200, 0, 0, 0]));
    assert!(close(o[1].time_us, 2_540.670903523763));
    assert_eq!(p.rejected.len(), 1);
    assert!(looks_like(header.as_bytes()));
}

#[test]
fn engine_all_reduces_name_their_implementation() {
    // h100_sxm/sglang/custom_allreduce_perf.csv.gz: a graph row (2 GPUs, 128 bf16 elements = 256 B,
    // 0.002433280050754547 ms) and an eager one; h100_sxm/trtllm/custom_allreduce_perf.csv.gz, row 1 (its own
    // `implementation` column, no graph/eager split).
    let p = parse_csv(&format!(
        "gpu,backend,backend_version,framework,version,device,op_name,kernel_source,allreduce_dtype,num_gpus,\
         message_size,latency,ar_backend\n\
         {H100_SGLANG},all_reduce,SGLang_CustomAllReduce_graph,bfloat16,2,128,0.002433280050754547,sglang_graph\n\
         {H100_SGLANG},all_reduce,SGLang_CustomAllReduce_eager,bfloat16,2,128,0.029936320781707763,sglang_eager\n"
    ));
    let Sample::Comm(c) = &p.samples[0] else { panic!() };
    assert_eq!((c.collective, c.bytes, c.ranks), (Collective::AllReduce, 256, 2));
    assert!(close(c.time_us, 2.433280050754547));
    assert_eq!(
        (c.attributes["implementation"].as_str(), c.attributes["ar_backend"].as_str()),
        ("sglang_custom_allreduce", "sglang_graph")
    );
    let p = parse_csv(&format!(
        "gpu,backend,backend_version,framework,version,device,op_name,kernel_source,allreduce_dtype,num_gpus,\
         message_size,latency,implementation\n\
         {H100},all_reduce,TRTLLM,bfloat16,2,128,0.002662079930305481,trtllm\n"
    ));
    let Sample::Comm(c) = &p.samples[0] else { panic!() };
    assert_eq!(c.attributes["implementation"], "trtllm_allreduce");
    assert!(close(c.time_us, 2.662079930305481));
}

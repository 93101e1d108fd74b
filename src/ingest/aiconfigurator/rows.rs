//! One aiconfigurator row → one perfcast sample (the mapping of the module doc). A cell that cannot be read as
//! its column's type is an error ([`ParseError`], naming row and column); a well-formed row perfcast cannot use
//! (a precision it has no model for, a zero dim, a non-positive latency) is a rejection reason.

use super::super::{Context, ParseError};
use super::table::{Row, TableKind};
use crate::hw::Precision;
use crate::op::{Collective, KernelFamily, OpClass, Phase};
use crate::samples::{Attributes, CommSample, OpSample, Sample};

/// What one row gives: a sample, or why the row is not kept.
pub type Mapped = Result<Sample, String>;

/// Columns copied into every sample's attributes when present (`gpu` of the CSV copies is aiconfigurator's system
/// folder, kept as `aic_system`).
const ATTRIBUTE_COLUMNS: [&str; 12] = [
    "framework",
    "version",
    "kernel_source",
    "backend",
    "backend_version",
    "attn_dtype",
    "kv_cache_dtype",
    "window_size",
    "beam_width",
    "distribution",
    "moe_tp_size",
    "moe_ep_size",
];

/// Maps `row` of a table of `kind`.
pub fn map(kind: TableKind, row: &Row<'_>, ctx: &Context) -> Result<Mapped, ParseError> {
    let latency_ms = row.float("latency")?;
    let time_us = latency_ms * 1e3;
    let mut attributes = attributes(row);
    if !(time_us.is_finite() && time_us > 0.0) {
        return Ok(Err(format!("latency must be a positive number of ms, got {latency_ms}")));
    }
    match kind {
        TableKind::Gemm => gemm(row, ctx, time_us, attributes),
        TableKind::Attention => attention(row, ctx, time_us, attributes),
        TableKind::Moe => moe(row, ctx, time_us, attributes),
        TableKind::Quantize => quantize(row, ctx, time_us, attributes),
        TableKind::Nccl | TableKind::CustomAllReduce => {
            let custom = kind == TableKind::CustomAllReduce;
            if custom {
                // The CSV copies rename the table's own `backend` (vllm_graph / vllm_eager, sglang_graph / …) to
                // `ar_backend`.
                let ar = if row.columns.position("ar_backend").is_some() { "ar_backend" } else { "backend" };
                if let Some(v) = row.opt_text(ar) {
                    attributes.insert("ar_backend".into(), v.into_owned());
                }
                if row.columns.position("ar_backend").is_none() {
                    attributes.remove("backend");
                }
                // Whose all-reduce: the engine of the folder or of the collector's `framework` label.
                let engine = attributes
                    .get("backend")
                    .and_then(|b| KernelFamily::parse(b))
                    .or_else(|| attributes.get("framework").and_then(|f| KernelFamily::parse(f)))
                    .unwrap_or(KernelFamily::Vllm);
                let implementation = match engine {
                    KernelFamily::Vllm => "vllm_custom_allreduce",
                    KernelFamily::Sglang => "sglang_custom_allreduce",
                    KernelFamily::Trtllm => "trtllm_allreduce",
                };
                attributes.insert("implementation".into(), implementation.into());
            } else {
                attributes.insert("implementation".into(), "nccl".into());
            }
            comm(row, ctx, custom, time_us, attributes)
        }
    }
}

fn attributes(row: &Row<'_>) -> Attributes {
    let mut a = Attributes::new();
    a.insert("source".into(), "aiconfigurator".into());
    for c in ATTRIBUTE_COLUMNS {
        if let Some(v) = row.opt_text(c) {
            a.insert(c.into(), v.into_owned());
        }
    }
    if let Some(v) = row.opt_text("gpu") {
        a.insert("aic_system".into(), v.into_owned());
    }
    a
}

fn device(row: &Row<'_>, ctx: &Context) -> Result<String, String> {
    row.opt_text("device")
        .map(|d| d.into_owned())
        .or_else(|| ctx.gpu.clone())
        .ok_or_else(|| "no device: give the upload's gpu or system parameter".into())
}

fn precision(column: &str, name: &str) -> Result<Precision, String> {
    Precision::parse(name).ok_or_else(|| format!("{column} {name:?} has no perfcast precision"))
}

fn op(class: OpClass, dtype: Precision, gpu: String, dims: [u64; 5], time_us: f64, attributes: Attributes) -> Mapped {
    let names = class.dim_names();
    if let Some((n, _)) = names.iter().zip(&dims).find(|(_, d)| **d == 0) {
        return Err(format!("dim {n} of {class} is 0"));
    }
    Ok(Sample::Op(OpSample { op: class, phase: Phase::Fwd, dtype, gpu, dims, time_us, attributes }))
}

/// `scale_matrix_perf` → `quantize`, `computescale_perf` → `quantize_scale` (B = m tokens, H = k elements; dtype
/// from `quant_dtype`).
fn quantize(row: &Row<'_>, ctx: &Context, time_us: f64, attributes: Attributes) -> Result<Mapped, ParseError> {
    let (m, k) = (row.uint("m")?, row.uint("k")?);
    let dtype = row.text("quant_dtype")?;
    let kind = row.text("op_name")?;
    Ok((|| {
        let class = match kind.as_ref() {
            "scale_matrix" => OpClass::Quantize,
            "compute_scale" => OpClass::QuantizeScale,
            other => return Err(format!("op_name {other:?} is neither scale_matrix nor compute_scale")),
        };
        let dtype = precision("quant_dtype", &dtype)?;
        op(class, dtype, device(row, ctx)?, [m, k, 0, 0, 0], time_us, attributes)
    })())
}

fn gemm(row: &Row<'_>, ctx: &Context, time_us: f64, attributes: Attributes) -> Result<Mapped, ParseError> {
    let (m, n, k) = (row.uint("m")?, row.uint("n")?, row.uint("k")?);
    let dtype = row.text("gemm_dtype")?;
    Ok((|| {
        let dtype = precision("gemm_dtype", &dtype)?;
        op(OpClass::Linear, dtype, device(row, ctx)?, [1, m, n, k, 0], time_us, attributes)
    })())
}

/// (major, minor) of a version string (`0.14.0`, `v0.24.1rc2`).
fn major_minor(v: &str) -> Option<(u64, u64)> {
    let mut parts = v.trim().trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts.next()?.chars().take_while(|c| c.is_ascii_digit()).collect();
    Some((major, minor.parse().ok()?))
}

/// Cached tokens a decode row attends: `step + 1` (history and the new token), except for the vLLM collector
/// before 0.24 (the a100 file's 0.14.0), whose kernel attended `step` (SOURCE.txt). An unreadable version is taken
/// as the current collector's.
fn attended(step: u64, version: Option<&str>) -> u64 {
    match version.and_then(major_minor) {
        Some(v) if v < (0, 24) => step,
        _ => step.saturating_add(1),
    }
}

fn attention(row: &Row<'_>, ctx: &Context, time_us: f64, mut attributes: Attributes) -> Result<Mapped, ParseError> {
    let (b, isl, a, g, d) = (
        row.uint("batch_size")?,
        row.uint("isl")?,
        row.uint("num_heads")?,
        row.uint("num_key_value_heads")?,
        row.uint("head_dim")?,
    );
    let step = row.uint("step")?;
    let window = row.opt_uint("window_size")?.unwrap_or(0);
    let kind = row.text("op_name")?;
    let kv = row.text("kv_cache_dtype")?;
    let version = row.opt_text("version").or_else(|| row.opt_text("backend_version"));
    Ok((|| {
        // The KV cache's precision sets the dominant traffic (and FlashAttention-3's fp8 path computes in it).
        let dtype = precision("kv_cache_dtype", &kv)?;
        let gpu = device(row, ctx)?;
        if g > a {
            return Err(format!("{g} key/value heads for {a} query heads"));
        }
        match kind.as_ref() {
            "context_attention" => {
                if window > 0 {
                    return Err(format!(
                        "sliding-window prefill (window_size {window}) is not attention_prefill's full causal shape"
                    ));
                }
                op(OpClass::AttentionPrefill, dtype, gpu, [b, isl, a, g, d], time_us, attributes)
            }
            "generation_attention" => {
                let mut c = attended(step, version.as_deref());
                if window > 0 {
                    c = c.min(window);
                }
                attributes.insert("step".into(), step.to_string());
                op(OpClass::AttentionDecode, dtype, gpu, [b, c, a, g, d], time_us, attributes)
            }
            other => Err(format!("op_name {other:?} is neither context_attention nor generation_attention")),
        }
    })())
}

fn moe(row: &Row<'_>, ctx: &Context, time_us: f64, mut attributes: Attributes) -> Result<Mapped, ParseError> {
    let (t, h, inter, k) =
        (row.uint("num_tokens")?, row.uint("hidden_size")?, row.uint("inter_size")?, row.uint("topk")?);
    let (experts, tp, ep) = (row.uint("num_experts")?, row.uint("moe_tp_size")?, row.uint("moe_ep_size")?);
    let dtype = row.text("moe_dtype")?;
    Ok((|| {
        if attributes.get("kernel_source").is_some_and(|k| k.contains("nongated")) {
            // TensorRT-LLM's non-gated experts (an up projection and a plain activation, Nemotron-H's), not the
            // moe class's SwiGLU experts.
            return Err("non-gated experts (kernel_source *_nongated) are not the moe class's SwiGLU experts".into());
        }
        let dtype = precision("moe_dtype", &dtype)?;
        let gpu = device(row, ctx)?;
        if tp == 0 || ep == 0 || inter % tp != 0 || experts % ep != 0 {
            return Err(format!(
                "inter_size {inter} / moe_tp_size {tp} or num_experts {experts} / moe_ep_size {ep} is not whole"
            ));
        }
        attributes.insert("inter_size".into(), inter.to_string());
        attributes.insert("num_experts".into(), experts.to_string());
        attributes.insert("num_tokens".into(), t.to_string());
        op(
            OpClass::Moe,
            dtype,
            gpu,
            [moe_tokens_on_this_gpu(t, ep), h, inter / tp, experts / ep, k],
            time_us,
            attributes,
        )
    })())
}

/// The `moe` dim T of an aiconfigurator `moe_perf` row: ⌈num_tokens / moe_ep_size⌉ tokens.
///
/// aiconfigurator's collector (`collector/vllm/collect_moe.py` at the commit of `SOURCE.txt`) routes all
/// `num_tokens` tokens top-K over all `num_experts` experts and times rank 0, which holds `num_experts /
/// moe_ep_size` of them (`determine_expert_map`): `fused_experts` skips the copies routed to other ranks'
/// experts, so the measured GPU computes num_tokens·K / moe_ep_size routed copies ('balanced'; more on rank 0
/// under 'power_law_*', which hands it the heaviest experts). perfcast's `moe` T is the tokens whose K copies this
/// GPU's experts receive — T·K copies, the same convention the serving predictor queries with
/// (T = ⌈tokens·dp / ep⌉, `llm::serving::step`) — so T = num_tokens / ep. Rounded up, because a dim is a whole
/// number ≥ 1: below num_tokens = ep the row is a launch-bound floor that one token's copies describe. With
/// expert tensor parallelism (moe_tp_size > 1, never together with ep > 1) every rank sees all tokens: T =
/// num_tokens. The global count is kept as the attribute `num_tokens`.
pub fn moe_tokens_on_this_gpu(num_tokens: u64, moe_ep_size: u64) -> u64 {
    num_tokens.div_ceil(moe_ep_size.max(1))
}

/// Bytes of one element of a collective's dtype as nccl-tests and PyTorch name them.
fn element_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype.trim().to_ascii_lowercase().as_str() {
        "half" | "fp16" | "float16" | "bfloat16" | "bf16" => 2,
        "float" | "float32" | "fp32" | "int32" | "int" | "uint32" => 4,
        "double" | "float64" | "fp64" | "int64" | "uint64" => 8,
        "int8" | "uint8" | "char" | "fp8" | "float8" | "e4m3" | "e5m2" => 1,
        _ => return None,
    })
}

fn collective(op_name: &str) -> Option<Collective> {
    Some(match op_name.trim() {
        "all_reduce" | "allreduce" => Collective::AllReduce,
        "all_gather" | "allgather" => Collective::AllGather,
        "reduce_scatter" | "reducescatter" => Collective::ReduceScatter,
        "alltoall" | "all_to_all" => Collective::AllToAll,
        _ => return None,
    })
}

fn comm(
    row: &Row<'_>,
    ctx: &Context,
    custom: bool,
    time_us: f64,
    mut attributes: Attributes,
) -> Result<Mapped, ParseError> {
    let dtype_column = if custom { "allreduce_dtype" } else { "nccl_dtype" };
    let dtype = row.text(dtype_column)?;
    let (gpus, elements) = (row.uint("num_gpus")?, row.uint("message_size")?);
    let op_name = row.text("op_name")?;
    Ok((|| {
        let c = collective(&op_name).ok_or_else(|| format!("op_name {op_name:?} is not a collective"))?;
        if custom && c != Collective::AllReduce {
            return Err(format!("custom all-reduce row measures {op_name:?}"));
        }
        let size = element_bytes(&dtype).ok_or_else(|| format!("{dtype_column} {dtype:?}: unknown element size"))?;
        let bytes = elements.checked_mul(size).ok_or("message_size × element size overflows")?;
        let ranks = u32::try_from(gpus).ok().filter(|&r| r >= 1).ok_or(format!("num_gpus {gpus} is not 1–2³²"))?;
        if bytes == 0 {
            return Err("message_size is 0".into());
        }
        if let Ok(gpu) = device(row, ctx) {
            attributes.insert("gpu".into(), gpu);
        }
        Ok(Sample::Comm(CommSample {
            nodes: Some(1),
            gpus_per_node: Some(ranks),
            dtype: Some(dtype.into_owned()),
            attributes,
            ..CommSample::timed(c, bytes, ranks, time_us)
        }))
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_attends_step_before_vllm_0_24_and_step_plus_one_after() {
        assert_eq!(attended(1023, Some("0.14.0")), 1023);
        assert_eq!(attended(1023, Some("0.24.0")), 1024);
        assert_eq!(attended(1023, Some("v0.25.1rc2")), 1024);
        assert_eq!(attended(1023, None), 1024);
        assert_eq!(attended(1023, Some("nightly")), 1024);
    }

    #[test]
    fn moe_tokens_are_the_global_count_over_expert_parallelism() {
        // 4096 tokens over ep 4: 1024 tokens' worth of routed copies per GPU; 1 token over ep 8 rounds up to 1;
        // 100 over 8 = 12.5 → 13; ep 1 (or tp only) keeps every token.
        assert_eq!(moe_tokens_on_this_gpu(4096, 4), 1024);
        assert_eq!(moe_tokens_on_this_gpu(1, 8), 1);
        assert_eq!(moe_tokens_on_this_gpu(100, 8), 13);
        assert_eq!(moe_tokens_on_this_gpu(4096, 1), 4096);
    }

    #[test]
    fn element_sizes_and_collectives() {
        assert_eq!((element_bytes("half"), element_bytes("int8"), element_bytes("float")), (Some(2), Some(1), Some(4)));
        assert_eq!(element_bytes("complex"), None);
        assert_eq!(collective("alltoall"), Some(Collective::AllToAll));
        assert_eq!(collective("broadcast"), None);
    }
}

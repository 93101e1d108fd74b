//! Kernel estimates (`POST /v1/estimates/kernel`): Hong–Kim MWP/CWP, the hierarchical roofline and S2's pipe
//! demand for an explicitly described kernel or a stored Nsight Compute / rocprof sample, with the learned
//! correction when one is active.

use serde::{de, Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use super::{Service, ServiceError};
use crate::hw::{GpuSpec, PeakTflops, Vendor};
use crate::kernel::hong_kim::{self, HongKimEstimate, HongKimKernel, HongKimMachineInput, HongKimRequest};
use crate::kernel::pipes::{self, PipeEstimate, PipeWork};
use crate::kernel::roofline::{self, RooflineEstimate, RooflineWork};
use crate::kernel::sample::{estimate_sample, SkippedModel};
use crate::learn::fit::MAX_ABS_LOG_RATIO;
use crate::worker::kernels::KERNEL_KEY;

/// A kernel model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KernelModel {
    /// Hong & Kim's MWP/CWP model (ISCA 2009) with S0's cache extension.
    MwpCwp,
    /// Hierarchical roofline (Williams 2009; Yang 2019).
    Roofline,
    /// S2's per-pipe demand and ceiling.
    Pipes,
}

/// The GPU of a kernel estimate: a catalog name, or machine parameters (with `name` naming a catalog GPU they
/// override).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum KernelGpu {
    Name(String),
    Machine(HongKimMachineInput),
}

impl<'de> Deserialize<'de> for KernelGpu {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = KernelGpu;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a catalog GPU name or an object of machine parameters")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KernelGpu, E> {
                Ok(KernelGpu::Name(v.to_string()))
            }
            fn visit_map<M: de::MapAccess<'de>>(self, map: M) -> Result<KernelGpu, M::Error> {
                HongKimMachineInput::deserialize(de::value::MapAccessDeserializer::new(map)).map(KernelGpu::Machine)
            }
        }
        d.deserialize_any(V)
    }
}

impl utoipa::PartialSchema for KernelGpu {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::String).description(Some("Catalog GPU name or alias")))
            .item(utoipa::openapi::Ref::from_schema_name("HongKimMachineInput"))
            .into()
    }
}

impl utoipa::ToSchema for KernelGpu {
    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        schemas.push((HongKimMachineInput::name().into(), <HongKimMachineInput as utoipa::PartialSchema>::schema()));
        <HongKimMachineInput as utoipa::ToSchema>::schemas(schemas);
    }
}

/// `POST /v1/estimates/kernel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"gpu": {"sm_count": 16, "clock_ghz": 1.0, "memory_bandwidth_gbs": 80,
    "dram_latency_cycles": 420, "departure_delay_coal_cycles": 4, "departure_delay_uncoal_cycles": 10,
    "issue_cycles": 4},
    "kernel": {"comp_insts": 27, "coal_mem_insts": 0, "uncoal_mem_insts": 6, "synch_insts": 6,
               "threads_per_block": 128, "blocks": 80, "active_blocks_per_sm": 5, "uncoal_per_mw": 32,
               "load_bytes_per_warp": 128},
    "models": ["mwp_cwp", "roofline"]}))]
pub struct KernelEstimateRequest {
    /// The GPU; optional with `sample_id` (the sample's GPU is used).
    #[serde(default)]
    pub gpu: Option<KernelGpu>,
    /// Hong–Kim's description of the kernel (per-thread instruction counts and the launch).
    #[serde(default)]
    pub kernel: Option<HongKimKernel>,
    /// FLOPs per pipe, warp instructions and bytes per level (for the roofline and the pipe model).
    #[serde(default)]
    pub work: Option<PipeWork>,
    /// A stored kernel sample (`GET /v1/profiles/{id}/samples` lists ids): its metrics and measured duration.
    #[serde(default)]
    pub sample_id: Option<i64>,
    /// Models to run; default: every one the inputs allow.
    #[serde(default)]
    pub models: Option<Vec<KernelModel>>,
}

/// Per-model estimates.
#[derive(Debug, Clone, PartialEq, Default, Serialize, ToSchema)]
pub struct KernelEstimates {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mwp_cwp: Option<HongKimEstimate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline: Option<RooflineEstimate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipes: Option<PipeEstimate>,
}

/// The learned correction of the pipe-model ceiling.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct KernelCorrection {
    /// Corrected time, µs.
    pub time_us: f64,
    /// `regressor:kernel@v<n>`.
    pub source: String,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct KernelEstimateResponse {
    /// GPU name, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// Measured duration of the sample, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_us: Option<f64>,
    pub estimates: KernelEstimates,
    /// The learned correction, when a kernel regressor is active and the pipe model ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected: Option<KernelCorrection>,
    /// Plain-language verdict: what bounds the kernel (`memory-bound: DRAM`, `compute-bound: tensor`).
    pub verdict: String,
    /// Models not run, and why.
    pub skipped: Vec<SkippedModel>,
    /// Defaults and derivations used.
    pub notes: Vec<String>,
}

/// A GPU description from machine parameters alone (no catalog GPU): the FP32 peak follows from the issue rate,
/// warp_size / issue_cycles lanes per SM, 2 FLOPs per FMA lane per cycle.
fn machine_gpu(m: &HongKimMachineInput) -> Option<GpuSpec> {
    let (sms, clock, bw) = (m.sm_count?, m.clock_ghz?, m.memory_bandwidth_gbs?);
    let lanes = m.warp_size.unwrap_or(32) as f64 / m.issue_cycles.unwrap_or(4.0).max(1e-9);
    let fp32 = sms as f64 * clock * lanes * 2.0 / 1e3;
    Some(GpuSpec {
        name: "request".into(),
        vendor: Vendor::Other,
        sm_count: sms,
        clock_ghz: clock,
        memory_gib: 1.0,
        memory_bandwidth_gbs: bw,
        l2_mib: 0.0,
        peak_tflops: PeakTflops {
            fp64: fp32 / 2.0,
            fp32,
            tf32: None,
            fp16: fp32,
            bf16: None,
            fp8: None,
            fp32_matrix: None,
            fp4: None,
        },
        compute_capability: None,
        source: None,
        tdp_watts: None,
        warp_size: m.warp_size,
        max_threads_per_sm: None,
        hierarchy: None,
    })
}

/// Roofline work implied by a Hong–Kim description: one FLOP per computation instruction per thread (a lower
/// bound), and per warp memory instruction `Load_bytes_per_warp` bytes when coalesced, `#Uncoal_per_mw` 32-byte
/// transactions when not [rec].
fn work_from_hong_kim(k: &HongKimKernel) -> RooflineWork {
    let threads = k.threads_per_block as f64 * k.blocks as f64;
    let warps = threads / 32.0;
    let load = k.load_bytes_per_warp.unwrap_or(128.0);
    let uncoal = k.uncoal_per_mw.unwrap_or(32.0) * 32.0;
    RooflineWork {
        flops_fp32: k.comp_insts * threads,
        dram_bytes: warps * (k.coal_mem_insts * load + k.uncoal_mem_insts * uncoal),
        ..RooflineWork::default()
    }
}

fn roofline_work(p: &PipeWork) -> RooflineWork {
    RooflineWork {
        flops_fp64: p.flops_fp64,
        flops_fp32: p.flops_fp32,
        flops_fp16: p.flops_fp16,
        flops_tensor: p.flops_tensor,
        tensor_precision: p.tensor_precision,
        l1_bytes: p.l1_bytes,
        l2_bytes: p.l2_bytes,
        dram_bytes: p.dram_bytes,
    }
}

fn invalid(e: crate::kernel::KernelModelError) -> ServiceError {
    ServiceError::Invalid { field: e.field, message: e.message }
}

impl Service {
    /// Runs the requested kernel models. Errors: no GPU, unknown GPU, no kernel description, unknown sample,
    /// invalid numbers — each naming its field.
    pub async fn estimate_kernel(&self, req: &KernelEstimateRequest) -> Result<KernelEstimateResponse, ServiceError> {
        let sample = match req.sample_id {
            Some(id) => Some(self.store.kernel_sample(id).await.map_err(|e| match ServiceError::from(e) {
                ServiceError::NotFound { what, .. } => ServiceError::NotFound { what, field: Some("sample_id".into()) },
                other => other,
            })?),
            None => None,
        };
        if req.kernel.is_none() && req.work.is_none() && sample.is_none() {
            return Err(ServiceError::invalid("kernel", "give a kernel description (kernel or work) or a sample_id"));
        }
        // The GPU description: named, overridden machine, bare machine, or the sample's GPU.
        let (gpu, machine): (Option<GpuSpec>, Option<HongKimMachineInput>) = match &req.gpu {
            Some(KernelGpu::Name(n)) => {
                (Some(self.gpu(n, "gpu")?), Some(HongKimMachineInput { name: Some(n.clone()), ..Default::default() }))
            }
            Some(KernelGpu::Machine(m)) => {
                let base = match &m.name {
                    Some(n) => Some(self.gpu(n, "gpu.name")?),
                    None => machine_gpu(m),
                };
                (base, Some(m.clone()))
            }
            None => (sample.as_ref().and_then(|s| s.gpu.as_deref()).and_then(|n| self.gpus.load().spec(n)), None),
        };
        let wants = |m: KernelModel| req.models.as_ref().is_none_or(|ms| ms.contains(&m));
        let mut out = KernelEstimateResponse {
            gpu: gpu.as_ref().map(|g| g.name.clone()),
            measured_us: None,
            estimates: KernelEstimates::default(),
            corrected: None,
            verdict: String::new(),
            skipped: Vec::new(),
            notes: Vec::new(),
        };
        if let Some(s) = &sample {
            let g =
                gpu.clone().ok_or_else(|| ServiceError::invalid("gpu", "the sample names no catalog GPU: give gpu"))?;
            let est = estimate_sample(s, &g).map_err(invalid)?;
            out.measured_us = Some(est.measured_us);
            if wants(KernelModel::Roofline) {
                out.estimates.roofline = est.roofline;
            }
            if wants(KernelModel::Pipes) {
                out.estimates.pipes = est.pipes;
            }
            if wants(KernelModel::MwpCwp) {
                out.estimates.mwp_cwp = est.hong_kim;
            }
            out.skipped = est.skipped;
            out.notes = est.notes;
        }
        if let Some(k) = &req.kernel {
            if wants(KernelModel::MwpCwp) {
                let m = machine.clone().ok_or_else(|| ServiceError::invalid("gpu", "the Hong–Kim model needs gpu"))?;
                let base = m.name.as_deref().and_then(|n| self.gpus.load().spec(n));
                let r = HongKimRequest { gpu: m, kernel: k.clone() };
                out.estimates.mwp_cwp = Some(hong_kim::estimate_request(&r, base.as_ref()).map_err(invalid)?);
            }
            if wants(KernelModel::Roofline) && out.estimates.roofline.is_none() {
                if let Some(g) = &gpu {
                    out.estimates.roofline = Some(roofline::estimate(&work_from_hong_kim(k), g).map_err(invalid)?);
                    out.notes.push("roofline work derived from the Hong–Kim counts: 1 FLOP per computation instruction, 32-byte transactions for uncoalesced accesses".into());
                }
            }
        }
        if let Some(w) = &req.work {
            let g = gpu.clone().ok_or_else(|| ServiceError::invalid("gpu", "the roofline and pipe models need gpu"))?;
            if wants(KernelModel::Roofline) {
                out.estimates.roofline = Some(roofline::estimate(&roofline_work(w), &g).map_err(invalid)?);
            }
            if wants(KernelModel::Pipes) {
                out.estimates.pipes = Some(pipes::estimate(w, &g).map_err(invalid)?);
            }
        }
        if let Some(p) = &out.estimates.pipes {
            if let Some(m) = self.registry.load().get(KERNEL_KEY) {
                if let Ok(r) = m.model.predict(&p.features.values()) {
                    let t = p.ceiling_us * r[0].clamp(-MAX_ABS_LOG_RATIO, MAX_ABS_LOG_RATIO).exp();
                    out.corrected = Some(KernelCorrection { time_us: t, source: m.source().to_string() });
                }
            }
        }
        out.verdict = out
            .estimates
            .roofline
            .as_ref()
            .map(|r| r.verdict.clone())
            .or_else(|| out.estimates.pipes.as_ref().map(|p| p.verdict.clone()))
            .or_else(|| out.estimates.mwp_cwp.as_ref().map(|h| h.verdict.clone()))
            .unwrap_or_else(|| "no model could run on these inputs".into());
        Ok(out)
    }
}

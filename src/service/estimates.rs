//! Single-operator estimates: analytic and learned.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Service, ServiceError};
use crate::cost::roofline::{self, AnalyticCost};
use crate::cost::{CostBackend, KernelChoice};
use crate::hw::{GpuRef, Precision, System};

use crate::learn::backend::LearnedBackend;
use crate::op::{place_dims, Dims, KernelFamily, OpClass, OpShape, Phase};

/// `POST /v1/estimates/operator`: one operator call on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"gpu": "NVIDIA H100 80GB HBM3", "op": "linear", "phase": "fwd", "dtype": "fp32",
    "dims": {"B": 1, "M": 1024, "N": 2560, "K": 2560}}))]
pub struct OperatorEstimateRequest {
    /// Catalog GPU name or alias, or a full description.
    pub gpu: GpuRef,
    /// Operator class (`linear`, `bmm`, `layernorm`, …) or S1 name (`Linear1`, `QK^T`, …).
    pub op: String,
    /// Default `fwd`.
    #[serde(default = "fwd")]
    pub phase: Phase,
    pub dtype: Precision,
    /// Dims by name: `B, M, N, K` for linear/bmm; `B, H` for vector ops (`I` = inputs for elementwise);
    /// `B, L, A, D[, G]` for flash_attention (G = key/value heads, default A); `T, V, H` embedding; `T, V`
    /// cross_entropy; `P` optimizer; serving (forward only): `B, L, A, G, D` attention_prefill (sequences, new
    /// tokens each, query heads, key/value heads, head dim), `B, C, A, G, D` attention_decode (C = cached tokens
    /// attended), `T, H, F, E, K` moe (tokens, hidden, expert FFN width and experts on this GPU, top-k); `B, H`
    /// quantize / quantize_scale (tokens, elements per token of a GEMM's input).
    pub dims: std::collections::BTreeMap<String, u64>,
    /// Whose measured kernels to answer with: `vllm`, `sglang` or `trtllm` — that engine's model where one exists,
    /// else the closest engine's, named in `source` (as a serving request of that engine). Default: the
    /// engine-neutral models (vLLM's measurements and the engine-neutral ones), as training reads them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<KernelFamily>,
}

fn fwd() -> Phase {
    Phase::Fwd
}

/// The answer: analytic and predicted time, the source of the prediction and the analytic quantities.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct OperatorEstimate {
    /// Canonical GPU name.
    pub gpu: String,
    pub op: OpClass,
    pub phase: Phase,
    pub dtype: Precision,
    /// Dims in the class's slots (see `op`'s dim names); unused trailing dims are 0.
    #[schema(value_type = Vec<u64>)]
    pub dims: Dims,
    /// Roofline estimate, µs.
    pub analytic_us: f64,
    /// Learned prediction (= analytic when no regressor covers it), µs.
    pub predicted_us: f64,
    /// `analytic`, `regressor:<key>@v<n>`, or `regressor:<key>@v<n> (<engine> not measured)` when another engine's
    /// model stood in for the asked one.
    pub source: String,
    /// The analytic model's quantities (FLOPs, bytes, bound, waves, …).
    pub analytic: AnalyticCost,
}

impl Service {
    /// Estimates one operator. Errors: unknown GPU or implausible GPU numbers (`gpu`, `gpu.<field>`), operator
    /// (`op`), bad dims or a size with no finite time (`dims`), or a precision the GPU lacks (`dtype`).
    pub async fn estimate_operator(&self, req: &OperatorEstimateRequest) -> Result<OperatorEstimate, ServiceError> {
        let gpu = match &req.gpu {
            GpuRef::Name(n) => self.gpu(n, "gpu")?,
            GpuRef::Spec(s) => {
                s.validate().map_err(|(f, m)| ServiceError::invalid(&format!("gpu.{f}"), m))?;
                (**s).clone()
            }
        };
        let class = crate::ingest::op_class(&req.op).ok_or_else(|| {
            let names: Vec<&str> = OpClass::ALL.iter().map(|c| c.as_str()).collect();
            ServiceError::invalid("op", format!("unknown operator {:?}; classes: {}", req.op, names.join(", ")))
        })?;
        if class.is_serving() && req.phase == Phase::Bwd {
            return Err(ServiceError::invalid("phase", format!("{class} is forward only (a serving operator)")));
        }
        let dims = place_dims(class, &req.dims).map_err(|m| ServiceError::invalid("dims", m))?;
        let shape = OpShape { class, phase: req.phase, dims };
        let analytic =
            roofline::estimate(&shape, req.dtype, &gpu).map_err(|e| ServiceError::invalid("dtype", e.to_string()))?;
        // A one-GPU system carries the GPU into the backend; links are irrelevant to a compute operator.
        let system = System::single_gpu(gpu.clone());
        let kernels = req.engine.map_or(KernelChoice::Neutral, KernelChoice::Engine);
        let timed = LearnedBackend::new(system, self.registry.load_full())
            .with_kernels(kernels)
            .compute(&shape, req.dtype)
            .map_err(|e| ServiceError::invalid("dtype", e.to_string()))?;
        if !(analytic.time_us.is_finite() && timed.time_us.is_finite()) {
            return Err(ServiceError::invalid("dims", "these dimensions on this GPU give no finite time"));
        }
        Ok(OperatorEstimate {
            gpu: gpu.name,
            op: class,
            phase: req.phase,
            dtype: req.dtype,
            dims,
            analytic_us: analytic.time_us,
            predicted_us: timed.time_us,
            source: timed.source.to_string(),
            analytic,
        })
    }
}

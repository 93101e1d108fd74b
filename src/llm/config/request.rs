//! The body of `POST /v1/predictions/training` ([`TrainingRequest`]): the system, the model, the parallel
//! configuration, the precision, the framework and the optional whole-run length ([`RunSpec`]).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ModelSpec, ParallelSpec};
use crate::hw::Precision;
use crate::llm::framework::Framework;

fn fp16() -> Precision {
    Precision::Fp16
}

/// How long a whole training run is: tokens to train on, or optimizer steps (give one).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"tokens": 300e9}))]
pub struct RunSpec {
    /// Training tokens; steps = ⌈tokens / (global_batch · seq_len)⌉.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<f64>,
    /// Optimizer steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
}

/// `POST /v1/predictions/training`: one training iteration of `model` on `system` with `parallelism`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"system": "perlmutter-a100-40g",
    "model": {"name": "GPT-20B", "layers": 44, "hidden": 6144, "heads": 64, "seq_len": 2048, "vocab": 50257,
              "norm": "layernorm", "attention": "fused_softmax", "activation": "gelu", "parallel_residual": true},
    "parallelism": {"tp": 4, "pp": 4, "dp": 8, "micro_batch": 4, "grad_accum": 16, "zero_stage": 1},
    "precision": "fp16"}))]
pub struct TrainingRequest {
    /// Name of a stored system (`GET /v1/systems`).
    pub system: String,
    /// The architecture, a catalog name (`"Llama-3.1-8B"`) or `{"hf_config": {…}, "seq_len": …}`
    /// ([`crate::llm::model_ref`]); resolved into the architecture while the request is read.
    #[serde(deserialize_with = "crate::llm::model_ref::deserialize_model")]
    #[schema(value_type = crate::llm::model_ref::TrainingModelInput)]
    pub model: ModelSpec,
    pub parallelism: ParallelSpec,
    /// Training precision (mixed precision with fp32 master weights for 16-, 8- and 4-bit). `fp8` runs the
    /// transformer layers' GEMMs in FP8 (Micikevicius et al. 2022, "FP8 Formats for Deep Learning"; NVIDIA
    /// Transformer Engine, scaled as `parallelism.fp8_recipe` says) and everything else in bf16; the GPU needs FP8
    /// tensor cores. `nvfp4` (alias `fp4`) runs them in NVFP4 (Transformer Engine's `NVFP4BlockScaling`) at the
    /// GPU's fp4 peak, Blackwell only. Default `fp16`.
    #[serde(default = "fp16")]
    pub precision: Precision,
    /// The framework that runs the training: `megatron` (Megatron-LM / Megatron-Core with Transformer Engine),
    /// `nemo` (Megatron-Core with NeMo's recipe defaults), `torchtitan` (PyTorch FSDP2, eager or compiled),
    /// `deepspeed`, `hf` (Hugging Face Trainer, eager PyTorch). Default `megatron`.
    #[serde(default)]
    pub framework: Framework,
    /// Optional whole-run length: the answer then includes the wall-clock time and GPU-hours of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunSpec>,
}
